#!/usr/bin/env bash
# tests/gpu/engine_stage.sh VRAMKIT OUTDIR - the inference engine's checks on
# the GPU machine, in order, each logged to OUTDIR/<step>.log:
#   gen_models        tools/onnx/gen_models.py OUTDIR/models (the ~140 models;
#                     $VRAM_ONNX_REF/models instead where it has them)
#   blazeface         both BlazeFace models copied to OUTDIR/blazeface (from
#                     $VRAM_BLAZEFACE_DIR, .carry/models or build/onnxref/blazeface)
#   export            tests/gpu/export_torchvision.py OUTDIR/torchvision
#   rebatch           tools/onnx/rebatch.py: BlazeFace-back at batch 32
#   check_rebatch_cpu / check_rebatch_cuda
#                     tests/gpu/check_rebatch.py: each sample of the batch-32
#                     model's outputs against the batch-1 model's
#   onnx_torch        tests/gpu/onnx_torch.py against ONNX Runtime on the models
#                     PyTorch runs through it (and on the torchvision exports)
#   engine_check      tests/gpu/engine_check.py: cuda against cpu (FP32, TF32,
#                     --graph) and against ONNX Runtime
#   engine_latency    tests/gpu/engine_latency.py: against PyTorch eager
# then OUTDIR/summary.md (each step's status, engine_check.md and
# engine_latency.md) and a short summary on stdout. Exit status 1 if any step
# failed. A failing step never stops the ones after it (those that need its
# output fail in turn, saying so).
#
# Run it from the repository root with the GPU machine's python3 (torch,
# torchvision, onnx, onnxruntime). The whole stage is kept within
# $VRAM_STAGE_BUDGET seconds (default 450): engine_check and engine_latency
# get what is left, and stop starting new work when it is spent.
# Other knobs: VRAM_CHECK_WORKERS (8), VRAM_LAT_ITERS (100), VRAM_LAT_REPEAT (3),
# VRAM_LAT_BATCHES (1,32); VRAM_STAGE_SKIP="step step..." skips those steps
# (reported as skipped, not failed), e.g. to run engine_check alone again.
set -uo pipefail
if [ $# -ne 2 ]; then
    echo "usage: tests/gpu/engine_stage.sh VRAMKIT OUTDIR" >&2
    exit 2
fi
vk=$1
out=$2
case $vk in /*) ;; *) vk=$PWD/$vk ;; esac
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
budget=${VRAM_STAGE_BUDGET:-450}
workers=${VRAM_CHECK_WORKERS:-8}
lat_iters=${VRAM_LAT_ITERS:-100}
lat_repeat=${VRAM_LAT_REPEAT:-3}
lat_batches=${VRAM_LAT_BATCHES:-1,32}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((budget - $(elapsed))); }

names=()
results=()
# step NAME TIMEOUT CMD... : run CMD with its output in OUTDIR/NAME.log
step() {
    local name=$1 limit=$2
    shift 2
    if [[ " ${VRAM_STAGE_SKIP:-} " == *" $name "* ]]; then
        printf '=== %s: skipped (VRAM_STAGE_SKIP) ===\n' "$name"
        names+=("$name")
        results+=("skipped")
        return 0
    fi
    printf '=== %s (at %ss, limit %ss) ===\n' "$name" "$(elapsed)" "$limit"
    local t0 rc
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local dt=$(($(date +%s) - t0))
    names+=("$name")
    if [ $rc -eq 0 ]; then
        results+=("ok (${dt}s)")
        echo "ok ($dt s)"
    else
        local why="exit status $rc"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="timed out after ${limit}s"
        results+=("FAILED: $why (${dt}s)")
        echo "FAILED: $why ($dt s); last lines of $out/$name.log:"
        tail -n 15 "$out/$name.log" | sed 's/^/    /'
    fi
    return 0
}
# fail NAME MESSAGE: a step that could not even start
fail() {
    names+=("$1")
    results+=("FAILED: $2")
    printf '=== %s ===\nFAILED: %s\n' "$1" "$2"
    echo "$2" >"$out/$1.log"
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "vramkit: $vk"
    git rev-parse --short HEAD 2>/dev/null | sed 's/^/commit: /'
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1
    $py -c "import sys, numpy, onnx, onnxruntime, torch, torchvision; print('python', sys.version.split()[0], \
'numpy', numpy.__version__, 'onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__, \
'torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)" 2>&1
} >"$out/machine.txt"
cat "$out/machine.txt"
if [ ! -x "$vk" ]; then
    echo "FAILED: $vk is not an executable" >&2
fi

# The generated models: those tests/gpu/run made (VRAM_ONNX_REF), else new.
if [ -n "${VRAM_ONNX_REF:-}" ] && [ -f "$VRAM_ONNX_REF/models/manifest.json" ]; then
    ln -sfn "$VRAM_ONNX_REF/models" "$out/models"
    echo "=== gen_models: using $VRAM_ONNX_REF/models ==="
else
    step gen_models 120 "$py" tools/onnx/gen_models.py "$out/models"
fi

bf_dir=
for d in ${VRAM_BLAZEFACE_DIR:-} .carry/models build/onnxref/blazeface; do
    if [ -n "$d" ] && [ -f "$d/face_detection_back_256x256_barracuda.onnx" ]; then
        bf_dir=$d
        break
    fi
done
mkdir -p "$out/blazeface"
if [ -n "$bf_dir" ] && cp "$bf_dir"/face_detection_{back_256x256,front_128x128}_barracuda.onnx "$out/blazeface/"; then
    names+=(blazeface)
    results+=("ok (from $bf_dir)")
else
    fail blazeface "BlazeFace models not found in \$VRAM_BLAZEFACE_DIR, .carry/models or build/onnxref/blazeface"
fi
bf1=$out/blazeface/face_detection_back_256x256_barracuda.onnx
bff=$out/blazeface/face_detection_front_128x128_barracuda.onnx
bf32=$out/blazeface/face_detection_back_256x256_barracuda_b32.onnx

step export 240 "$py" tests/gpu/export_torchvision.py "$out/torchvision"
step rebatch 60 "$py" tools/onnx/rebatch.py "$bf1" 32 "$bf32"
step check_rebatch_cpu 120 "$py" tests/gpu/check_rebatch.py "$vk" "$bf1" "$bf32" --backend cpu
step check_rebatch_cuda 120 "$py" tests/gpu/check_rebatch.py "$vk" "$bf1" "$bf32" --backend cuda

# onnx_torch against ONNX Runtime, on every model it stands in for PyTorch.
onnx_torch_all() {
    local rc=0 m
    for m in "$bf1" "$bff" "$bf32"; do
        echo "--- $m"
        "$py" tests/gpu/onnx_torch.py "$m" --tol 1e-4 || rc=1
    done
    for m in resnet50 mobilenet_v3_large; do
        echo "--- $m"
        "$py" tests/gpu/onnx_torch.py "$out/torchvision/$m.onnx" --batch 2 \
            --input "input=$out/torchvision/${m}_input.npy" --tol 1e-4 || rc=1
    done
    return $rc
}
export -f onnx_torch_all
export py out bf1 bff bf32
step onnx_torch 180 bash -c onnx_torch_all

# What is left goes to the two long steps; the latency needs about 150 s.
check_budget=$(($(left) - 150))
[ $check_budget -gt 300 ] && check_budget=300
[ $check_budget -lt 60 ] && check_budget=60
step engine_check $((check_budget + 120)) "$py" tests/gpu/engine_check.py "$vk" --models "$out/models" \
    --blazeface "$bf1" --blazeface "$bff" --torchvision "$out/torchvision" --out "$out" \
    --workers "$workers" --time-budget "$check_budget"

lat_budget=$(($(left) - 15))
[ $lat_budget -lt 60 ] && lat_budget=60
step engine_latency $((lat_budget + 120)) "$py" tests/gpu/engine_latency.py "$vk" \
    --torchvision "$out/torchvision" --blazeface "$bf1" --blazeface-batched "32=$bf32" --out "$out" \
    --iters "$lat_iters" --repeat "$lat_repeat" --batches "$lat_batches" --time-budget "$lat_budget"

failed=0
{
    echo "# vramkit engine stage"
    echo
    echo '```'
    cat "$out/machine.txt"
    echo '```'
    echo
    echo "| step | result |"
    echo "|---|---|"
    for i in "${!names[@]}"; do
        echo "| ${names[$i]} | ${results[$i]} |"
    done
    echo
    echo "Total $(elapsed) s."
    for f in check_rebatch_cpu check_rebatch_cuda; do
        [ -f "$out/$f.log" ] && printf '\n%s: %s\n' "$f" "$(tail -n 1 "$out/$f.log")"
    done
    if [ -f "$out/onnx_torch.log" ]; then
        printf '\n## onnx_torch against ONNX Runtime\n\n```\n'
        grep -E '^(---|ok|DIFFER|onnx_torch)' "$out/onnx_torch.log"
        printf '```\n'
    fi
    for f in engine_check.md engine_latency.md; do
        echo
        if [ -f "$out/$f" ]; then sed 's/^# /## /' "$out/$f"; else echo "($f was not written)"; fi
    done
} >"$out/summary.md"

echo
echo "=== summary ($(elapsed) s; details in $out/summary.md) ==="
for i in "${!names[@]}"; do
    printf '%-20s %s\n' "${names[$i]}" "${results[$i]}"
    [[ ${results[$i]} == ok* || ${results[$i]} == skipped ]] || failed=1
done
[ -f "$out/engine_check.md" ] && grep -E '^\*\*' "$out/engine_check.md"
[ -f "$out/engine_latency.md" ] && grep -E '^\| (ResNet|BlazeFace)' "$out/engine_latency.md" | head -12
if [ $failed -eq 0 ]; then
    echo "engine stage: all steps passed"
else
    echo "engine stage: FAILED"
fi
exit $failed
