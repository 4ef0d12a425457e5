#!/usr/bin/env bash
# scripts/run_demo.sh BUILD - what `make run` shows: the video service on
# sample clips. The clips are made once with Debian's ffmpeg into
# BUILD/clips (tests/faces/make_clips.sh: the astronaut photograph panned
# and zoomed, two faces moving, one with none) and run, with a synthetic
# camera beside them, through `vramkit run` with the default BlazeFace
# model (scripts/models.sh): the live table while it runs (on a terminal),
# the summary at the end, then per clip on how many frames a face was
# found. The JSON Lines and the annotated JPEG snapshots stay in the folder
# it names. The GPU is used where there is one (VRAM_DEMO_BACKEND=cpu to
# keep to the CPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
vramkit=$build/vramkit
bash "$root/tests/faces/make_clips.sh" "$build/clips" >/dev/null
bash "$root/scripts/models.sh" "$build/models" >/dev/null
backend=${VRAM_DEMO_BACKEND:-}
if [ -z "$backend" ]; then
  backend=cpu
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && backend=cuda
fi
out=$build/run-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "run: the service on $build/clips with the $backend executor; results in $out"
rc=0
VRAM_MODEL_DIR=$build/models "$vramkit" run --backend "$backend" --workers 2 --batch 4 \
  --input astronaut="$build/clips/astronaut.mp4" --input faces2="$build/clips/faces2.mp4" \
  --input noface="$build/clips/noface.mp4" --input camera=synthetic:640x480@25 \
  --frames 75 --duration 60 \
  --jsonl "$out/results.jsonl" --snapshots "$out/snapshots" --every 1 || rc=$?
python3 - "$out/results.jsonl" <<'PY'
import json, sys
frames, found, scores = {}, {}, {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    s = r["stream"]
    frames[s] = frames.get(s, 0) + 1
    if r["detections"]:
        found[s] = found.get(s, 0) + 1
        scores.setdefault(s, []).extend(d["score"] for d in r["detections"])
for s in sorted(frames):
    sc = scores.get(s)
    extra = f", scores {min(sc):.2f}-{max(sc):.2f}" if sc else ""
    print(f"found: {s}: a face on {found.get(s, 0)} of {frames[s]} frames{extra}")
PY
echo "run: $out/results.jsonl (a line per frame), $out/snapshots/ (JPEGs with the faces drawn)"
exit $rc
