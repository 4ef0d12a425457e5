#!/usr/bin/env bash
# bench/stream_reclaim.sh VRAMKIT [TRACE...] - what the rejoin of other
# streams' completed frees before large requests buys and costs, threshold by
# threshold: on the sim device with events done once recorded (which places
# exactly as the GPU replay does, with nothing queued on its streams), no
# limit, no decay thread (whose rounds would rejoin frees at moments of its
# own), held over peak live and the backend calls of a warm pass (the event
# records and queries the rejoins make) for VRAM_STREAM_RECLAIM=need and for
# =large from each VRAM_STREAM_RECLAIM_MIN. Prints one Markdown table, each
# cell "held/live, calls"; the default is the row marked "default". Traces:
# the multi-stream ones in data/traces and ../shared/data/traces (a trace of
# one stream makes no rejoin).
set -euo pipefail
vramkit=$1
here=$(cd "$(dirname "$0")" && pwd)
traces=("${@:2}")
[ ${#traces[@]} -gt 0 ] || traces=("$here/../data/traces/frcnn_mbv3_2streams.csv.gz"
    "$here/../../shared/data/traces/retinanet_multistream4.csv.gz")
names=()
for t in "${traces[@]}"; do names+=("$(basename "$t" .csv.gz)"); done

row() { # LABEL REPLAY-ARGS...: one row, one column per trace
    local label=$1
    shift
    local cells=()
    for t in "${traces[@]}"; do
        cells+=("$(VRAM_POOL_LIMIT=0 VRAM_DECAY_MS=0 "$vramkit" replay --backend sim --sim-events done --runs 1 \
            --json "$@" "$t" | python3 -c 'import json,sys; d = json.load(sys.stdin); print("%.3f, %d" % (d["reserved_ratio"], d["warm_backend_calls"]))')")
    done
    local IFS='|'
    echo "| $label | ${cells[*]} |"
}

echo "| rejoin before | $(IFS='|'; echo "${names[*]}") |"
echo "|---|$(printf -- '---:|%.0s' "${names[@]}")"
row "new memory only (need)" --stream-reclaim need
for m in 0 2MiB 4MiB 8MiB 16MiB 24MiB 32MiB 48MiB 64MiB 128MiB; do
    label="large requests from $m"
    [ $m = 0 ] && label="every large request (above 1 MiB)"
    [ $m = 16MiB ] && label="$label (default)"
    row "$label" --stream-reclaim large --reclaim-min $m
done
