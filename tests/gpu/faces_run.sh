#!/usr/bin/env bash
# tests/gpu/faces_run.sh VRAMKIT OUT NAME [RUN OPTIONS...] - the three face
# clips (tests/faces/make_clips.sh) through `vramkit run --backend cuda` with
# the options given, their faces compared (tests/faces/compare.py: same
# faces on every frame, IoU >= 0.9, scores within 0.01) with the independent
# reference's (ONNX Runtime and the JavaScript decoder, carried by
# tests/gpu/carry.sh). Writes OUT/NAME.jsonl, .json and .err; prints the
# comparison and a PASS or FAIL line; exits 0 on PASS.
set -uo pipefail
vramkit=${1:?vramkit binary}
out=${2:?output dir}
name=${3:?name}
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${VRAM_SERVICE_CARRY:-$root/.carry/service}
clips=$carry/clips
VRAM_MODEL_DIR=$carry/models timeout -s INT 120 "$vramkit" run --backend cuda --quiet \
    --workers 2 --batch 4 --input astronaut="$clips/astronaut.mp4" \
    --input faces2="$clips/faces2.mp4" --input noface="$clips/noface.mp4" \
    --jsonl "$out/$name.jsonl" --json "$@" >"$out/$name.json" 2>"$out/$name.err"
rc=$?
if [ $rc -eq 0 ] && python3 "$root/tests/faces/compare.py" "$out/$name.jsonl" \
    "$clips/reference.jsonl"; then
    echo "PASS: the faces ($*) are the reference's on every frame"
    exit 0
fi
echo "FAIL (vramkit run exit $rc): $(tail -3 "$out/$name.err")"
exit 1
