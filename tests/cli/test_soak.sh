#!/usr/bin/env bash
# tests/cli/test_soak.sh VRAMKIT - the soak command end to end: clean soaks of
# the small test trace and of a captured inference trace are level (exit 0),
# the same with a planted leak are growing (exit 1) at the planted slope; the
# verdict line, the CSV (header, one pool row per iteration, owner and kind
# rows) and the JSON Lines are checked; progress lines appear when stderr is
# not a terminal; the report page is written when asked; bad arguments fail
# with a clear message; the shared traces captured on an H200, where the
# checkout has them, are level and their planted leaks flagged.
set -euo pipefail
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
small=$src/tests/data/traces/small.csv.gz
captured=$src/data/traces/mobilenet_crops.csv.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# run NAME EXPECTED_STATUS ARGS...: the soak's stdout in $tmp/NAME.out, stderr in .err
run() {
  local name=$1 want=$2 rc=0
  shift 2
  VRAM_MONITOR_GPU=none "$vramkit" soak "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want: $(cat "$tmp/$name.out" "$tmp/$name.err")"
}

# 1. Clean: level, with the files.
run clean 0 --workload "replay:$small" --iterations 300 --csv "$tmp/clean.csv" --jsonl "$tmp/clean.jsonl"
grep -q '^verdict: level: live bytes +0.0 B per iteration' "$tmp/clean.out" \
  || fail "clean soak: no level verdict: $(cat "$tmp/clean.out")"
grep -q 'over 240 samples after a warm-up of 60' "$tmp/clean.out" \
  || fail "clean soak: window not 240 of 300: $(cat "$tmp/clean.out")"
grep -q '^soak: 150/300 iterations, live 0 B' "$tmp/clean.err" \
  || fail "clean soak: no progress lines: $(cat "$tmp/clean.err")"

# 2. Planted leak: 4 KiB every 10 iterations, 409.6 B per iteration.
run leak 1 --workload "replay:$small" --iterations 300 --plant-leak 4K/10 --csv "$tmp/leak.csv" \
  --jsonl "$tmp/leak.jsonl"
grep -q '^verdict: growing: live bytes +40[0-9.]* B per iteration' "$tmp/leak.out" \
  || fail "planted leak not flagged: $(cat "$tmp/leak.out")"
grep -q '^planted leak: 4.00 KiB every 10 iterations, 30 blocks' "$tmp/leak.out" \
  || fail "planted leak not described: $(cat "$tmp/leak.out")"
grep -q 'monitor alert (growth, warning)' "$tmp/leak.err" || fail "no growth alert logged: $(cat "$tmp/leak.err")"

python3 - "$tmp" <<'PY'
import csv, json, sys
tmp = sys.argv[1]
header = ("time_s,elapsed_s,iteration,pool,owner,kind,live_bytes,peak_live_bytes,reserved_bytes,"
          "pending_bytes,fragmentation_ratio,largest_free_bytes,gpu_used_bytes,gpu_total_bytes")
bad = []
for name, leak in (("clean", 0), ("leak", 4096)):
    lines = open(f"{tmp}/{name}.csv").read().splitlines()
    if lines[0] != header:
        bad.append(f"{name}.csv header: {lines[0]}")
    rows = list(csv.DictReader(lines))
    pools = [r for r in rows if not r["owner"] and not r["kind"]]
    if [int(r["iteration"]) for r in pools] != list(range(1, 301)):
        bad.append(f"{name}.csv: pool rows are not iterations 1..300")
    for r in pools:
        it = int(r["iteration"])
        want = leak * (it // 10)
        if int(r["live_bytes"]) != want:
            bad.append(f"{name}.csv: iteration {it} live {r['live_bytes']}, expected {want}")
            break
        if r["gpu_used_bytes"] or r["gpu_total_bytes"]:
            bad.append(f"{name}.csv: GPU columns filled without a GPU read")
            break
        if not (0 <= float(r["fragmentation_ratio"]) <= 1) or int(r["reserved_bytes"]) < int(r["live_bytes"]):
            bad.append(f"{name}.csv: iteration {it}: bad totals {r}")
            break
    owners = {r["owner"] for r in rows if r["owner"]}
    want_owners = {"default", "planted"} if leak else {"default"}
    if owners != want_owners:
        bad.append(f"{name}.csv: owners {owners}, expected {want_owners}")
    if leak:
        last = [r for r in rows if r["owner"] == "planted"][-1]
        if int(last["live_bytes"]) != 30 * 4096 or last["iteration"] != "300":
            bad.append(f"{name}.csv: planted owner's last row {last}")
    samples = alerts = 0
    for line in open(f"{tmp}/{name}.jsonl"):
        j = json.loads(line)
        if j["type"] == "sample":
            samples += 1
            if j["gpu"] is not None or "gpu_unavailable" not in j:
                bad.append(f"{name}.jsonl: GPU fields {j.get('gpu')!r}")
                break
            if j["pools"][0]["pool"] != "replay" or j["iteration"] != samples:
                bad.append(f"{name}.jsonl: sample {samples}: {line[:200]}")
                break
            # The CSV's pool row of the sample has the same pool fields.
            row, p = pools[samples - 1], j["pools"][0]
            fields = ("live_bytes", "peak_live_bytes", "reserved_bytes", "pending_bytes",
                      "fragmentation_ratio", "largest_free_bytes")
            if [float(row[f]) for f in fields] != [float(p[f]) for f in fields]:
                bad.append(f"{name}: sample {samples}: CSV {row} but JSON Lines {p}")
                break
        else:
            alerts += 1
            if j["type"] != "alert" or j["level"] not in ("warning", "critical", "clear"):
                bad.append(f"{name}.jsonl: {line[:200]}")
            if leak and j["alert"] == "growth" and j["level"] != "warning":
                bad.append(f"{name}.jsonl: growth alert {j['level']}")
    if samples != 300:
        bad.append(f"{name}.jsonl: {samples} samples")
    growth = sum(1 for l in open(f"{tmp}/{name}.jsonl") if '"alert":"growth"' in l)
    if growth != (1 if leak else 0):
        bad.append(f"{name}.jsonl: {growth} growth alerts")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY

# 3. A captured inference trace (38,622 events per iteration): level, and with a leak, growing.
run captured 0 --workload "replay:$captured" --iterations 120
grep -q '^verdict: level:' "$tmp/captured.out" || fail "captured trace: $(cat "$tmp/captured.out")"
grep -q 'peak live 173.4 MiB' "$tmp/captured.out" || fail "captured trace peak: $(cat "$tmp/captured.out")"
run captured_leak 1 --workload "replay:$captured" --iterations 120 --plant-leak 64K/25 --policy segments
grep -q '^verdict: growing:' "$tmp/captured_leak.out" || fail "captured leak: $(cat "$tmp/captured_leak.out")"
grep -q '(segments on sim)' "$tmp/captured_leak.out" || fail "policy not used: $(cat "$tmp/captured_leak.out")"
# A threshold above the leak's slope: level.
run captured_thr 0 --workload "replay:$captured" --iterations 120 --plant-leak 64K/25 --threshold 4K
grep -q '^verdict: level: live bytes +2\.[0-9]* KiB per iteration' "$tmp/captured_thr.out" \
  || fail "threshold: $(cat "$tmp/captured_thr.out")"

# 4. The report page (unless this build has no page script, which it then says).
rc=0
VRAM_MONITOR_GPU=none "$vramkit" soak --workload "replay:$small" --iterations 50 --html "$tmp/soak.html" \
  >"$tmp/html.out" 2>"$tmp/html.err" || rc=$?
if [ "$rc" -eq 0 ]; then
  grep -qi '<html' "$tmp/soak.html" || fail "report page is not HTML"
  grep -q "^report: $tmp/soak.html" "$tmp/html.out" || fail "report not announced"
else
  grep -qi 'javascript' "$tmp/html.err" || fail "report failed: $(cat "$tmp/html.err")"
fi

# 5. Errors.
run usage 2 --iterations 10
grep -q 'no workload given' "$tmp/usage.err" || fail "missing workload: $(cat "$tmp/usage.err")"
run badwork 2 --workload model:x.onnx
grep -q 'unknown workload "model:x.onnx"' "$tmp/badwork.err" || fail "$(cat "$tmp/badwork.err")"
run badleak 2 --workload "replay:$small" --plant-leak 4K
grep -q -- '--plant-leak: "4K" is not BYTES/K' "$tmp/badleak.err" || fail "$(cat "$tmp/badleak.err")"
run badleak2 2 --workload "replay:$small" --plant-leak 4K/0
grep -q 'K must be a whole number of at least 1' "$tmp/badleak2.err" || fail "$(cat "$tmp/badleak2.err")"
run baditer 2 --workload "replay:$small" --iterations 0
grep -q -- '--iterations: 0 is outside 1 .. 1000000000' "$tmp/baditer.err" || fail "$(cat "$tmp/baditer.err")"
run few 2 --workload "replay:$small" --iterations 5
grep -q '^verdict: none: 4 samples after the warm-up' "$tmp/few.out" || fail "$(cat "$tmp/few.out")"
run missing 1 --workload "replay:$tmp/nope.csv"
grep -q "nope.csv" "$tmp/missing.err" || fail "missing trace not named: $(cat "$tmp/missing.err")"
run badcsv 1 --workload "replay:$small" --iterations 10 --csv /nonexistent-dir/s.csv
grep -q "cannot create the monitor's file /nonexistent-dir/s.csv" "$tmp/badcsv.err" \
  || fail "$(cat "$tmp/badcsv.err")"
"$vramkit" soak --help | grep -q 'plant-leak BYTES/K' || fail "help"

# 6. The traces captured from PyTorch on an H200 (../shared/data/traces, or
# VRAM_SHARED_TRACES), where this checkout has them: each level clean, each
# growing with a planted leak; the swings of fragmentation within a cycle
# raise its alert at most once per level.
shared=${VRAM_SHARED_TRACES:-$src/../shared/data/traces}
n_shared=0
for t in "$shared"/*.csv.gz; do
  [ -f "$t" ] || continue
  name=$(basename "$t" .csv.gz)
  run "shared_$name" 0 --workload "replay:$t" --iterations 200
  grep -q '^verdict: level: live bytes +0.0 B per iteration' "$tmp/shared_$name.out" \
    || fail "$name: not level: $(cat "$tmp/shared_$name.out")"
  grep -qE '^alerts: fragmentation [01] warning, [01] critical' "$tmp/shared_$name.out" \
    || fail "$name: fragmentation alerts flap: $(grep '^alerts' "$tmp/shared_$name.out")"
  run "shared_leak_$name" 1 --workload "replay:$t" --iterations 200 --plant-leak 4K/10
  grep -q '^verdict: growing: live bytes +40[0-9.]* B per iteration' "$tmp/shared_leak_$name.out" \
    || fail "$name: planted leak not flagged: $(cat "$tmp/shared_leak_$name.out")"
  n_shared=$((n_shared + 1))
done
echo "soak: $n_shared shared traces (from $shared)"

# The video service soaked: a synthetic camera and, where ffmpeg can make
# one, a looping clip, every stream sampled every 2 frames; its memory must
# be level.
models=${VRAM_TEST_MODELS:-$src/build/models}
[ -s "$models/blazeface_back.onnx" ] || fail "no model at $models (scripts/models.sh makes it)"
urls=synthetic:160x120@30,synthetic:96x64@30
if command -v ffmpeg >/dev/null; then
  ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 20 \
    -c:v libx264 -pix_fmt yuv420p "$tmp/clip.mp4"
  urls=synthetic:160x120@30,$tmp/clip.mp4
fi
VRAM_MODEL_DIR=$models run service 0 --workload "run:$urls" \
  --iterations 40 --frames-per-iteration 2 --workers 2 --batch 4
grep -q '^verdict: level: live bytes +0.0 B per iteration' "$tmp/service.out" \
  || fail "service: not level: $(cat "$tmp/service.out")"
grep -q '2 streams looping, 40 iterations of 2 frames per stream' "$tmp/service.out" \
  || fail "service: $(cat "$tmp/service.out")"
run service_bad 2 --workload "run:"
VRAM_MODEL_DIR=$models run service_missing 1 --workload "run:$tmp/none.mp4" --iterations 5
grep -q "none.mp4" "$tmp/service_missing.err" || fail "service: a missing clip not named"
echo "soak: ok"
