#!/usr/bin/env bash
# bench/placement.sh VRAMKIT [TRACE...] - what the vmm policy's placement holds
# when nothing is given back (no limit, no decay): held over peak live on the
# sim device for the placement settings (candidates compared for the lowest
# address, rounding of large requests, one reservation or two), beside
# bench/fixed_heap.py's classic placements in one address range. Prints one
# Markdown table, each cell "first pass / warm" (a pool that replayed the
# trace before); the defaults are the row marked "default".
set -euo pipefail
vramkit=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
    traces=("$root"/../shared/data/traces/*.csv.gz "$root"/data/traces/*.csv.gz)
fi
names=()
for t in "${traces[@]}"; do names+=("$(basename "$t" .csv.gz)"); done

row() { # LABEL VAR=VALUE...: one row of held/live, one column per trace
    local label=$1
    shift
    local cells=()
    for t in "${traces[@]}"; do
        cells+=("$(env VRAM_POOL_LIMIT=0 VRAM_DECAY_MS=0 "$@" "$vramkit" replay --backend sim \
            --runs 1 --json "$t" | python3 -c 'import json,sys; d = json.load(sys.stdin); print("%.3f / %.3f" % (d["reserved_ratio"], d["warm_reserved_ratio"]))')")
    done
    local IFS='|'
    echo "| $label | ${cells[*]} |"
}

echo "| placement | $(IFS='|'; echo "${names[*]}") |"
echo "|---|$(printf -- '---:|%.0s' "${names[@]}")"
row "size classes' good fit, 64 KiB rounding (the placement before)" VRAM_PLACE_CANDIDATES=0 VRAM_LARGE_ROUND=64KiB
row "good fit, 4 KiB rounding" VRAM_PLACE_CANDIDATES=0
for k in 2 3 4 5 8 16 32; do
    label="lowest address of $k candidates, 4 KiB rounding"
    [ $k = 4 ] && label="$label (default)"
    row "$label" VRAM_PLACE_CANDIDATES=$k
done
for r in 64KiB 16KiB 1KiB; do
    row "lowest of 4, $r rounding" VRAM_LARGE_ROUND=$r
done
row "lowest of 4, one reservation for all sizes" VRAM_SMALL_SIZE=0
row "lowest of 4, 2 MiB mappings" VRAM_MAP_CHUNK=2MiB
# Huge blocks apart apply only under a limit of the pool's own: one far
# above what any trace holds, so that nothing is given back.
row "lowest of 4, huge blocks of 16 MiB or more apart" VRAM_HUGE_SIZE=16MiB VRAM_POOL_LIMIT=100GiB
python3 "$root/bench/fixed_heap.py" "${traces[@]}" | python3 -c '
import sys
rows = [l.strip().strip("|").split("|") for l in sys.stdin if l.startswith("|") and not l.startswith("|---") and "peak live" not in l]
by = {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}
names = sys.argv[1:]
for i, what in enumerate(["best fit", "first fit", "worst fit"]):
    print("| fixed heap, %s (bench/fixed_heap.py) | %s |" % (what, "|".join(by.get(n, ["-"] * 4)[i + 1] for n in names)))
' "${names[@]}"
