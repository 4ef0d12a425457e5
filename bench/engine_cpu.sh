#!/usr/bin/env bash
# bench/engine_cpu.sh VRAMKIT [RUNS] - the CPU executor's latency against ONNX
# Runtime's on this machine, one thread each, batch 1: BlazeFace-back,
# MobileNetV3-Large and ResNet-50 (tools/onnx/gen_models.py's, untrained).
# vramkit: `vramkit model run --backend cpu --bench RUNS` (median of the timed
# runs); ONNX Runtime (npm onnxruntime-node, one intra-op thread):
# tools/onnx/ort_run.js --bench RUNS, with every graph optimization (as users
# run it) and with none (the exact reference the engine is tested against).
# Prints one Markdown table with each ratio and its target (vramkit over ONNX
# Runtime optimized: 1.5 for the two small models, 2 for ResNet-50). Needs
# `make models` and scripts/onnx_ref.sh --refs (ORT_PREFIX, default
# build/onnxref).
set -euo pipefail
vramkit=$1
runs=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
ort=${ORT_PREFIX:-$here/../build/onnxref}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median_vramkit() { # MODEL
    "$vramkit" model run --backend cpu --batch 1 --bench "$runs" --json --output-dir "$tmp/v" "$1" |
        python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["latency_ms"]["p50"])'
}

median_ort() { # MODEL [--optimize]
    ORT_PREFIX=$ort node "$here/../tools/onnx/ort_run.js" "$@" "$tmp/o" --bench "$runs" >/dev/null
    python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["bench_ms"]["median"])' \
        "$tmp/o/ort_run.json"
}

echo "| model | vramkit cpu ms | ONNX Runtime ms (optimized) | ratio | target | ONNX Runtime ms (no optimization) |"
echo "|---|---:|---:|---:|---:|---:|"
for entry in "BlazeFace-back:$here/../build/models/blazeface_back.onnx:1.5" \
    "MobileNetV3-Large:$ort/models/net_mobilenetv3_large.onnx:1.5" \
    "ResNet-50:$ort/models/net_resnet50.onnx:2"; do
    IFS=: read -r name model target <<<"$entry"
    [ -f "$model" ] || { echo "engine_cpu: $model is missing (make models; scripts/onnx_ref.sh --refs)" >&2; exit 1; }
    v=$(median_vramkit "$model")
    o=$(median_ort "$model" --optimize)
    n=$(median_ort "$model")
    ratio=$(python3 -c "print('%.2f' % ($v / $o))")
    echo "| $name | $v | $o | $ratio | $target | $n |"
done
