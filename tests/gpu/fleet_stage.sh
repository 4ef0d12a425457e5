#!/usr/bin/env bash
# tests/gpu/fleet_stage.sh BUILD OUT - one service per GPU (vram_fleet) on
# the GPUs this machine has:
#   1. tests/gpu/test_gpu_fleet.c: a fleet of one with the cuda executor
#      (the plain service's fixed need and need per stream, the gpu labels,
#      the GPU failing: streams lost and their memory back, nothing more
#      admitted), and a fleet naming a GPU past the last refused;
#   2. `vramkit run --backend cuda --decode nvdec --gpus all` on 1080p H.264
#      streams: every stream ends with its frames, on a listed GPU, memory
#      back; with --listen, /metrics carries the gpu labels and
#      vram_service_up, /healthz answers ok;
#   3. density (bench_density, NVDEC, CUDA graphs): the plain service
#      against a fleet over every GPU, N rising until a stream falls below
#      29.5 fps or drops more than 0.1 %: the fleet's figure should be the
#      GPUs' count times the one-GPU figure, its memory per stream the same.
# VRAM_FLEET_PARTS picks some of "test run density" (default all: a lent
# machine's command has a time limit). Clips and models from
# $VRAM_SERVICE_CARRY (.carry/service, made by tests/gpu/carry.sh). Writes
# OUT/summary.md (appended to when it exists) and the runs' files.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${VRAM_SERVICE_CARRY:-$root/.carry/service}
clips=$carry/clips
models=$carry/models
vramkit=$build/vramkit
mkdir -p "$out"
summary=$out/summary.md
commit=${VRAM_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
secs=${VRAM_DENSITY_SECONDS:-15}
fail=0
ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
gpus=$(seq -s, 0 $((ngpu - 1)))
parts=" ${VRAM_FLEET_PARTS:-test run density} "
part() { [[ $parts == *" $1 "* ]]; }
[ -s "$summary" ] || {
    echo "## One service per GPU (vram_fleet)"
    echo
    echo "$(nproc) CPU cores; $ngpu x $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); commit $commit"
    echo
} >"$summary"

# 1. The fleet's test on the GPU.
if part test; then
    VRAM_TEST_MODELS=$models "$build/test_gpu_fleet" >"$out/test_gpu_fleet.log" 2>&1 || fail=1
    {
        echo "### tests/gpu/test_gpu_fleet.c"
        echo
        echo '```'
        grep -E '^\[|error|fail' "$out/test_gpu_fleet.log"
        echo '```'
        echo
    } >>"$summary"
fi

# 2. The command line on every GPU.
run_part() {
inputs=()
for i in 1 2 3 4 5 6 7 8; do inputs+=(-i "c$i=$clips/cam1080_h264.mp4"); done
VRAM_MODEL_DIR=$models "$vramkit" run --backend cuda --decode nvdec --gpus all --frames 90 \
    --workers 2 --batch 8 --json "${inputs[@]}" >"$out/run_all.json" 2>"$out/run_all.err"
st=$?
{
    echo "### vramkit run --backend cuda --decode nvdec --gpus all, 8 streams of 90 frames"
    echo
    echo '```'
    echo "exit $st"
    python3 - "$out/run_all.json" "$ngpu" <<'PY' || echo "CHECK FAILED"
import json, sys
d = json.load(open(sys.argv[1]))
ngpu = int(sys.argv[2])
assert len(d["gpus"]) == ngpu, (len(d["gpus"]), ngpu)
n = 0
for g in d["gpus"]:
    assert g["up"], g
    for s in g["service"]["streams"]:
        assert s["gpu"] == g["gpu"] and s["state"] == "ended" and s["processed"] == 90, s
        assert s["decode"] == "nvdec" and s["memory"]["live_bytes"] == 0, s
        n += 1
    print(f'GPU {g["gpu"]}: {len(g["service"]["streams"])} streams, fixed '
          f'{g["service"]["service"]["fixed_bytes"] / 2**20:.1f} MiB')
assert n == 8, n
print(f"all {n} streams ended with 90 frames each, decoded on NVDEC, memory back; moved "
      f"{d['moved']}, lost {d['lost']}")
PY
    echo '```'
    echo
} >>"$summary" 2>&1
grep -q "CHECK FAILED" "$summary" && fail=1
[ "$st" = 0 ] || fail=1

VRAM_MODEL_DIR=$models "$vramkit" run --backend cuda --decode nvdec --gpus all --listen 127.0.0.1:0 \
    --realtime --loop --duration 12 --quiet "${inputs[@]:0:8}" >"$out/run_listen.out" \
    2>"$out/run_listen.err" &
pid=$!
port=
for _ in $(seq 300); do
    port=$(sed -n 's|^run: serving http://127\.0\.0\.1:\([0-9]*\)/ .*|\1|p' "$out/run_listen.err")
    [ -n "$port" ] && break
    sleep 0.1
done
sleep 5
{
    echo "### --listen on every GPU"
    echo
    echo '```'
    python3 - "$port" "$ngpu" <<'PY' || echo "CHECK FAILED"
import sys, urllib.request
port, ngpu = sys.argv[1], int(sys.argv[2])
base = f"http://127.0.0.1:{port}"
m = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
for g in range(ngpu):
    for want in (f'vram_service_up{{gpu="{g}"}} 1', f'vram_pool_live_bytes{{pool="gpu{g}-device",gpu="{g}"}} '):
        assert want in m, want
        print("found", want)
lines = [l for l in m.splitlines() if l.startswith("vram_stream_processed_total{")]
assert len(lines) == 4 and all('gpu="' in l for l in lines), lines
print(*lines, sep="\n")
h = urllib.request.urlopen(base + "/healthz", timeout=10)
assert h.status == 200 and h.read() == b"ok\n"
print("/healthz ok")
PY
    echo '```'
    echo
} >>"$summary" 2>&1
wait "$pid" || fail=1
grep -q "CHECK FAILED" "$summary" && fail=1

}
part run && run_part

# 3. Density: the plain service, then the fleet over every GPU.
density_part() {
bench=$build/bench_density
common=(--clip "$clips/cam1080_h264.mp4" --codec-label h264 --model "$models/blazeface_back.onnx"
        --design vramkit --graphs 1 --queue 1 --warmup 5 --workers 4 --batch 32
        --seconds "$secs" --out "$out/density.md" --json "$out/density.jsonl" --commit "$commit")
start=${VRAM_FLEET_START:-155}
timeout -s INT 250 "$bench" "${common[@]}" --start "$start" --step 5 --max 200 \
    >"$out/density_plain.log" 2>&1 || echo "plain: exit $?" >>"$out/density_plain.log"
timeout -s INT 250 "$bench" "${common[@]}" --gpus "$gpus" --start $((start * ngpu)) \
    --step $((5 * ngpu)) --max $((200 * ngpu)) >"$out/density_fleet.log" 2>&1 ||
    echo "fleet: exit $?" >>"$out/density_fleet.log"
{
    echo "### Density: the plain service against the fleet over GPUs $gpus"
    echo
    cat "$out/density.md" 2>/dev/null || echo "(no table: see density_*.log)"
    echo
    echo '```'
    python3 - "$out/density.jsonl" "$ngpu" <<'PY' || echo "(no summary lines)"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sums = [r for r in rows if r.get("type") == "summary"]
for s in sums:
    print(json.dumps({k: s.get(k) for k in ("largest_sustained", "mib_per_stream_at_largest", "stopped")}))
if len(sums) == 2:
    a, b = sums
    n = int(sys.argv[2])
    ratio = b["largest_sustained"] / (n * a["largest_sustained"]) if a["largest_sustained"] else 0
    print(f"fleet over {n} GPU(s) / ({n} x plain): {ratio:.3f}; MiB per stream "
          f"{a['mib_per_stream_at_largest']:.1f} plain, {b['mib_per_stream_at_largest']:.1f} fleet")
PY
    echo '```'
    tail -n 3 "$out/density_plain.log" "$out/density_fleet.log"
} >>"$summary" 2>&1
}
part density && density_part
exit $fail
