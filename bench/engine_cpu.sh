#!/usr/bin/env bash
# bench/engine_cpu.sh VRAMKIT [RUNS] - the CPU executor's latency against ONNX
# Runtime's on this machine, batch 1: BlazeFace-back, MobileNetV3-Large and
# ResNet-50 (tools/onnx/gen_models.py's, untrained).
#
# One thread each, both pinned to the same core (taskset), on every core of
# the machine in turn: on a virtual machine the cores need not be equal, and
# a figure from whichever core the scheduler picked would mix them. vramkit:
# `vramkit model run --backend cpu --bench RUNS` (the median of the timed
# runs), with its fast kernels and with --kernels reference (the plain-C
# kernels, every step as planned); ONNX Runtime (npm onnxruntime-node, one
# intra-op thread): tools/onnx/ort_run.js --bench RUNS, with every graph
# optimization (as users run it) and with none (the exact reference the
# engine is tested against). Then every core, unpinned: vramkit --threads N
# against ONNX Runtime with N intra-op threads, N the machine's cores.
#
# Prints two Markdown tables; the first has each ratio against its target
# (vramkit over ONNX Runtime optimized: 1.5 for the two small models, 2 for
# ResNet-50) and whether it is met. Needs `make models` and
# scripts/onnx_ref.sh --refs (ORT_PREFIX, default build/onnxref).
set -euo pipefail
vramkit=$1
runs=${2:-50}
here=$(cd "$(dirname "$0")" && pwd)
ort=${ORT_PREFIX:-$here/../build/onnxref}
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pin=() # the command prefix that pins to one core (empty: any)

median_vramkit() { # MODEL [vramkit options]
    local model=$1
    shift
    "${pin[@]}" "$vramkit" model run --backend cpu --batch 1 --bench "$runs" --json --output-dir "$tmp/v" \
        "$@" "$model" |
        python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["latency_ms"]["p50"])'
}

median_ort() { # MODEL [ort_run.js options]
    ORT_PREFIX=$ort "${pin[@]}" node "$here/../tools/onnx/ort_run.js" "$@" "$tmp/o" --bench "$runs" >/dev/null
    python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["bench_ms"]["median"])' \
        "$tmp/o/ort_run.json"
}

ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }

models=("BlazeFace-back:$here/../build/models/blazeface_back.onnx:1.5"
    "MobileNetV3-Large:$ort/models/net_mobilenetv3_large.onnx:1.5"
    "ResNet-50:$ort/models/net_resnet50.onnx:2")
for entry in "${models[@]}"; do
    IFS=: read -r _ model _ <<<"$entry"
    [ -f "$model" ] || { echo "engine_cpu: $model is missing (make models; scripts/onnx_ref.sh --refs)" >&2; exit 1; }
done

echo "One thread, pinned; $runs timed runs each, medians in ms."
echo
echo "| model | core | vramkit | ONNX Runtime (optimized) | ratio | target | met | vramkit reference kernels | ONNX Runtime (no optimization) |"
echo "|---|---:|---:|---:|---:|---:|---|---:|---:|"
for entry in "${models[@]}"; do
    IFS=: read -r name model target <<<"$entry"
    for ((core = 0; core < cores; core++)); do
        pin=(taskset -c "$core")
        v=$(median_vramkit "$model" --threads 1)
        o=$(median_ort "$model" --optimize)
        r=$(median_vramkit "$model" --kernels reference)
        n=$(median_ort "$model")
        q=$(ratio "$v" "$o")
        met=$(python3 -c "print('yes' if $q <= $target else 'no')")
        echo "| $name | $core | $v | $o | $q | $target | $met | $r | $n |"
    done
done
echo
pin=(env)
echo "Every core: $cores threads each, unpinned; medians in ms."
echo
echo "| model | vramkit --threads $cores | ONNX Runtime, $cores intra-op threads (optimized) | ratio | vramkit one thread, unpinned |"
echo "|---|---:|---:|---:|---:|"
for entry in "${models[@]}"; do
    IFS=: read -r name model _ <<<"$entry"
    v=$(median_vramkit "$model" --threads "$cores")
    o=$(median_ort "$model" --optimize --threads "$cores")
    one=$(median_vramkit "$model" --threads 1)
    echo "| $name | $v | $o | $(ratio "$v" "$o") | $one |"
done
