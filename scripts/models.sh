#!/usr/bin/env bash
# scripts/models.sh [DIR] - the service's default models in DIR (default
# build/models): MediaPipe's BlazeFace detectors (scripts/blazeface_fetch.sh)
# given a symbolic batch by tools/onnx/rebatch.py, so that one engine serves
# every batch of frames up to the one it is loaded for:
#   DIR/blazeface_back.onnx    256x256, the default of `vramkit run`
#   DIR/blazeface_front.onnx   128x128
# Idempotent: a model newer than its source and the rebatcher is kept.
# Needs node and npm (the first time) and python3-onnx (make deps).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/models}
mkdir -p "$dir/src"
bash "$root/scripts/blazeface_fetch.sh" "$dir/src"
py=/usr/bin/python3
"$py" -c 'import onnx' 2>/dev/null || { echo "models: $py cannot import onnx: run 'make deps'" >&2; exit 1; }
for pair in back:face_detection_back_256x256_barracuda front:face_detection_front_128x128_barracuda; do
  name=${pair%%:*} src=$dir/src/${pair#*:}.onnx out=$dir/blazeface_$name.onnx
  if [ -s "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$root/tools/onnx/rebatch.py" ]; then
    continue
  fi
  "$py" "$root/tools/onnx/rebatch.py" "$src" N "$out.tmp" >"$dir/rebatch_$name.log" 2>&1 ||
    { cat "$dir/rebatch_$name.log" >&2; exit 1; }
  mv "$out.tmp" "$out"
  echo "models: $out (batch symbolic)"
done
cp -u "$dir/src/LICENSE" "$dir/LICENSE.blazeface"
