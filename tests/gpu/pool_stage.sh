#!/usr/bin/env bash
# tests/gpu/pool_stage.sh BIN OUT [BEFORE] - the pool on the GPU, in one run:
# every trace replayed on real device memory by vramkit with no limit (the
# default) against cudaMallocAsync and cudaMalloc in the same process, the
# same with VRAM_STREAM_RECLAIM=need and with VRAM_STREAM_RECLAIM_MIN=0, by
# vramkit with its limit at 1.05 x the trace's peak live, by the segments
# policy on cuda (the stand-in for PyTorch's caching allocator), and, when
# BEFORE names the bin directory of an earlier build, by that build's default
# policy; the decay after the load stops; the PyTorch workloads against
# PyTorch's own allocator; and the frontier page from all of it
# (tests/gpu/frontier.py). BIN holds vramkit, bench_decay and
# libvramkit-core.so. Traces: data/traces and $VRAM_SHARED_TRACES.
# VRAM_TORCH_REPEAT: runs of each PyTorch pair (default 5); VRAM_POOL_RUNS:
# timed replays of each (default 3); VRAM_POOL_SKIP=torch skips PyTorch.
set -uo pipefail
bin=$1
out=$2
before=${3:-}
mkdir -p "$out"
runs=${VRAM_POOL_RUNS:-3}
repeat=${VRAM_TORCH_REPEAT:-5}
traces=(data/traces/*.csv.gz)
[ -n "${VRAM_SHARED_TRACES:-}" ] && traces+=("$VRAM_SHARED_TRACES"/*.csv.gz)
failed=()
commit=${VRAM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
stamp() { printf '=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

{
    date -u +"date: %Y-%m-%d %H:%M:%S UTC"
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
    echo "commit: $commit"
    echo "before: ${VRAM_BEFORE_COMMIT:-${before:-none}}"
    nproc
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

replay() { # LABEL BINARY ARGS...: one JSON line per trace (and allocator)
    local label=$1 vk=$2
    shift 2
    : >"$out/$label.jsonl"
    for t in "${traces[@]}"; do
        "$vk" replay --runs "$runs" --json "$@" "$t" >>"$out/$label.jsonl" 2>>"$out/$label.err" ||
            failed+=("$label:$(basename "$t")")
    done
    echo "$label: $(wc -l <"$out/$label.jsonl") rows"
}

stamp "replays"
replay vramkit "$bin/vramkit" --backend vmm --compare
replay vramkit-need "$bin/vramkit" --backend vmm --stream-reclaim need
replay vramkit-all "$bin/vramkit" --backend vmm --stream-reclaim large --reclaim-min 0
replay vramkit-1.05 "$bin/vramkit" --backend vmm --limit-ratio 1.05
replay segments "$bin/vramkit" --backend cuda --policy segments
if [ -n "$before" ] && [ -x "$before/vramkit" ]; then
    LD_LIBRARY_PATH=$before:${LD_LIBRARY_PATH:-} replay vramkit-before "$before/vramkit" --backend vmm
fi

stamp "decay after the load stops"
"$bin/bench_decay" --backend vmm --decay-ms 2000 --commit "$commit" --out "$out/decay.md" \
    "${traces[@]}" \
    >"$out/decay.txt" 2>&1 || failed+=(decay)
"$bin/bench_decay" --backend vmm --decay-ms 2000 --keep-live "${traces[@]}" \
    >"$out/decay_keep_live.txt" 2>&1 || failed+=(decay-keep-live)
cat "$out/decay.txt"

if [[ " ${VRAM_POOL_SKIP:-} " != *" torch "* ]]; then
    stamp "PyTorch: vramkit's pool against PyTorch's allocator, $repeat runs a pair"
    PYTHONUNBUFFERED=1 python3 tests/gpu/torch_workloads.py --all --lib "$bin/libvramkit-core.so" \
        --repeat "$repeat" --out "$out/torch.md" >"$out/torch.log" 2>&1 || failed+=(torch)
    grep -E "^\| (resnet|deeplab|retinanet) \|" "$out/torch.md" | head -3 || tail -20 "$out/torch.log"
fi

stamp "frontier"
inputs=(vramkit="$out/vramkit.jsonl" vramkit-need="$out/vramkit-need.jsonl"
    vramkit-all="$out/vramkit-all.jsonl"
    vramkit-1.05="$out/vramkit-1.05.jsonl" segments="$out/segments.jsonl")
[ -s "$out/vramkit-before.jsonl" ] && inputs+=(vramkit-before="$out/vramkit-before.jsonl")
python3 tests/gpu/frontier.py --out "$out/frontier.md" --title "The pool on the H200" --commit "$commit" \
    "${inputs[@]}" || failed+=(frontier)
cat "$out/frontier.md"
if [ ${#failed[@]} -gt 0 ]; then
    echo "pool stage FAILED: ${failed[*]}"
    exit 1
fi
echo "pool stage passed"
