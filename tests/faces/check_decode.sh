#!/usr/bin/env bash
# tests/faces/check_decode.sh - vramkit's faces against an independent
# reference on real clips: for each clip and BlazeFace model, the raw
# frames go through faces_driver (vram_letterbox_frame, the engine,
# vram_blazeface_decode) and through tests/faces/reference.mjs (a letterbox
# and a decoder written apart in JavaScript, ONNX Runtime for the model);
# compare.py then asks for the same faces on every frame (IoU >= 0.9,
# scores within 0.01), and the faces found are checked against what the
# clips hold: the astronaut on every frame with a score above 0.7 (both
# models), two faces on every frame of faces2, none on noface. With VRAMKIT
# given, the service itself (`vramkit run` on the three clips at once, its
# own decoding, batching across streams, and the default model, given a
# symbolic batch by scripts/models.sh) must match the reference the same
# way.
#
#   tests/faces/check_decode.sh FACES_DRIVER [ONNXREF_DIR [VRAMKIT]]
#
# ONNXREF_DIR (default $VRAM_ONNX_REF, else build/onnxref) holds
# onnxruntime-node and the models, set up here by scripts/onnx_ref.sh when
# missing; the clips are made once into $VRAM_FACE_CLIPS (default
# build/faces, tests/faces/make_clips.sh). $VRAM_FACE_FRAMES (default 75,
# the clips' length) takes only the first frames of each clip (for slow
# sanitizer builds). The driver's and the reference's JSON Lines stay in
# $VRAM_FACE_OUT when it is set.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 3 ] || { echo "usage: tests/faces/check_decode.sh FACES_DRIVER [ONNXREF_DIR [VRAMKIT]]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/faces
driver=$1
ref=${2:-${VRAM_ONNX_REF:-$root/build/onnxref}}
vramkit=${3:-}
models=${VRAM_TEST_MODELS:-$root/build/models}
clips=${VRAM_FACE_CLIPS:-$root/build/faces}
py=/usr/bin/python3
frames=${VRAM_FACE_FRAMES:-75}

fail() { echo "check_decode: $*" >&2; exit 1; }
[ -x "$driver" ] || fail "$driver is not a program (build faces_driver)"
for c in ffmpeg ffprobe node; do command -v "$c" >/dev/null || fail "$c is missing: run 'make deps'"; done
if [ ! -d "$ref/node_modules/onnxruntime-node" ] || [ ! -s "$ref/blazeface/face_detection_back_256x256_barracuda.onnx" ]; then
  bash "$root/scripts/onnx_ref.sh" "$ref"
fi
bash "$here/make_clips.sh" "$clips"

work=$(mktemp -d "${TMPDIR:-/tmp}/vram_faces.XXXXXX")
trap 'rm -rf "$work"' EXIT
: >"$work/c.jsonl"
: >"$work/js.jsonl"
back=$ref/blazeface/face_detection_back_256x256_barracuda.onnx
front=$ref/blazeface/face_detection_front_128x128_barracuda.onnx

# run STREAM CLIP MODEL: both ways over the clip's frames, at once.
run() {
  local stream=$1 clip=$clips/$2 model=$3 size w h
  size=$(ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=p=0 "$clip")
  w=${size%,*}
  h=${size#*,}
  ffmpeg -nostdin -v error -y -i "$clip" -frames:v "$frames" -pix_fmt rgb24 -f rawvideo "$work/frames.rgb"
  local common=(--model "$model" --raw "$work/frames.rgb" --width "$w" --height "$h" --fps 25 --stream "$stream")
  "$driver" "${common[@]}" --out "$work/$stream.c.jsonl" &
  local pid=$!
  node "$here/reference.mjs" "${common[@]}" --out "$work/$stream.js.jsonl" --ort "$ref" ||
    { wait $pid || true; fail "reference.mjs failed on $clip"; }
  wait $pid || fail "faces_driver failed on $clip"
  cat "$work/$stream.c.jsonl" >>"$work/c.jsonl"
  cat "$work/$stream.js.jsonl" >>"$work/js.jsonl"
  rm -f "$work/frames.rgb"
}

start=$(date +%s)
run astronaut astronaut.mp4 "$back"
run astronaut_front astronaut.mp4 "$front"
run faces2 faces2.mp4 "$back"
run noface noface.mp4 "$back"
if [ -n "${VRAM_FACE_OUT:-}" ]; then
  mkdir -p "$VRAM_FACE_OUT"
  cp "$work"/*.jsonl "$VRAM_FACE_OUT/"
fi

echo "check_decode: vramkit (A) against the reference (B)"
"$py" "$here/compare.py" "$work/c.jsonl" "$work/js.jsonl"

# What the clips hold: faces per frame, and the lowest score allowed.
"$py" - "$work/c.jsonl" "$frames" <<'PY'
import json, sys
frames = int(sys.argv[2])
want = {"astronaut": (1, 0.7), "astronaut_front": (1, 0.7), "faces2": (2, 0.7), "noface": (0, 0)}
seen = {s: 0 for s in want}
for line in open(sys.argv[1]):
    r = json.loads(line)
    n, lo = want[r["stream"]]
    d = r["detections"]
    seen[r["stream"]] += 1
    if len(d) != n:
        sys.exit(f"check_decode: {r['stream']} frame {r['frame']}: {len(d)} faces, {n} expected")
    for f in d:
        if f["score"] <= lo:
            sys.exit(f"check_decode: {r['stream']} frame {r['frame']}: score {f['score']} <= {lo}")
for s, k in seen.items():
    if k != frames:
        sys.exit(f"check_decode: {s}: {k} frames, {frames} expected")
print("check_decode: the astronaut on every frame (both models), two faces on every frame "
      "of faces2, none on noface")
PY
if [ -n "$vramkit" ]; then
  bash "$root/scripts/models.sh" "$models" >/dev/null
  VRAM_MODEL_DIR=$models "$vramkit" run --quiet --workers 2 --batch 4 --frames "$frames" \
    --input astronaut="$clips/astronaut.mp4" --input faces2="$clips/faces2.mp4" \
    --input noface="$clips/noface.mp4" --jsonl "$work/service.jsonl" >"$work/service.out" 2>&1 ||
    { cat "$work/service.out"; fail "vramkit run failed"; }
  grep -E '"stream": ?"(astronaut|faces2|noface)"' "$work/js.jsonl" >"$work/js3.jsonl"
  echo "check_decode: the service (A) against the reference (B)"
  "$py" "$here/compare.py" "$work/service.jsonl" "$work/js3.jsonl"
  [ -n "${VRAM_FACE_OUT:-}" ] && cp "$work/service.jsonl" "$VRAM_FACE_OUT/"
fi
echo "check_decode: done in $(($(date +%s) - start)) s"
