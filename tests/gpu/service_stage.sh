#!/usr/bin/env bash
# tests/gpu/service_stage.sh VRAMKIT OUT - the video service on a GPU, with
# the cuda executor and CPU decoding:
#   1. correctness: the three face clips (tests/faces/make_clips.sh) through
#      `vramkit run --backend cuda`, compared (tests/faces/compare.py: same
#      faces on every frame, IoU >= 0.9, scores within 0.01) with the
#      independent reference's faces for the same clips (ONNX Runtime and
#      the JavaScript decoder, made where node is: tests/gpu/carry.sh);
#   2. density: N streams of a 1080p H.264 clip at its 30 fps (--realtime
#      --loop), N growing until a stream no longer keeps up; a stream is
#      sustained when it processed at least 97 % of the frames its clock
#      asked for over the window and dropped at most 1 % of what it decoded.
# Clips, the reference and the model come from $VRAM_SERVICE_CARRY (default
# .carry/service). Writes OUT/summary.md and the runs' JSON.
set -uo pipefail
vramkit=${1:?vramkit binary}
out=${2:?output dir}
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${VRAM_SERVICE_CARRY:-$root/.carry/service}
mkdir -p "$out"
models=$carry/models
clips=$carry/clips
seconds=${VRAM_DENSITY_SECONDS:-12}
workers=${VRAM_DENSITY_WORKERS:-4}
batch=${VRAM_DENSITY_BATCH:-32}
summary=$out/summary.md
fail=0
{
    echo "## The video service on the GPU (cuda executor, CPU decoding)"
    echo
    echo "$(nproc) CPU cores; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    echo
} >"$summary"

# 1. Correctness against the reference.
{
    echo "### Faces against the independent reference"
    echo
    echo '```'
    bash "$root/tests/gpu/faces_run.sh" "$vramkit" "$out" correctness || fail=1
    echo '```'
    echo
} >>"$summary" 2>&1

# 2. Density: streams sustained at 30 fps.
density() { # N: one run, its verdict line to stdout
    local n=$1 json=$out/density_$1.json
    VRAM_MODEL_DIR=$models "$vramkit" run --backend cuda --quiet --workers "$workers" \
        --batch "$batch" --realtime --loop --duration "$seconds" --queue 2 \
        --input cam="$clips/cam1080.mp4" --streams "$n" --json >"$json" 2>"$out/density_$n.err"
    python3 - "$json" "$n" "$seconds" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2]); secs = float(sys.argv[3])
s = d["streams"]
fps = [x["fps"] for x in s]  # each stream's mean, first result to last
drop = [x["dropped"] / max(1, x["frames_in"]) for x in s]
ok = len(s) == n and all(x["state"] != "failed" for x in s) and \
     min(fps) >= 0.97 * 30 and max(drop) <= 0.01
pools = {p["pool"]: p for p in d["pools"]}
host = pools.get("service-host", {}).get("peak_live_bytes", 0) / 2**20
dev = pools.get("service-device", {}).get("peak_live_bytes", 0) / 2**20
p99 = max(x["latency_p99_ms"] for x in s)
p50 = sorted(x["latency_p50_ms"] for x in s)[len(s) // 2]
print(f"| {n} | {sum(fps):.0f} | {min(fps):.1f} | "
      f"{100 * max(drop):.2f} | {d['service']['mean_batch']:.1f} | {p50:.1f} | {p99:.1f} | "
      f"{host:.0f} | {dev:.0f} | {'yes' if ok else 'no'} |")
sys.exit(0 if ok else 1)
PY
}
{
    echo "### Streams sustained at 30 fps, 1080p H.264, CPU decoding"
    echo
    echo "Each row: N streams of the same clip (--realtime --loop) for ${seconds} s, $workers"
    echo "workers, batch up to $batch. Sustained: every stream processed >= 97 % of 30 fps and"
    echo "dropped <= 1 % of its frames."
    echo
    echo "| streams | fps in all | slowest stream fps | most dropped % | mean batch | p50 ms | p99 ms | host MiB | device MiB | sustained |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
} >>"$summary"
best=0
for n in ${VRAM_DENSITY_STREAMS:-8 16 24 32 40 48 64 80 96}; do
    if row=$(density "$n"); then
        best=$n
        echo "$row" >>"$summary"
    else
        echo "$row" >>"$summary"
        break
    fi
done
{
    echo
    echo "**Sustained: $best streams of 1080p H.264 at 30 fps** (the largest N above that kept up)."
} >>"$summary"
cat "$summary"
exit $fail
