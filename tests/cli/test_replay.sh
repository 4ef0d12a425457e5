#!/usr/bin/env bash
# tests/cli/test_replay.sh VRAMKIT - the replay command end to end: the shared
# traces meet the acceptance figures (under no limit no failure and no backend
# call once warm, host time <= 1.5 x glibc malloc in the same run; at a limit
# of 1.05 x peak live, held within it and no refusal the stream model's floor
# does not force), peak
# live matches the capture's summary, a capacity the trace exceeds is reported
# and the replay goes on, and bad input fails with a clear message.
set -euo pipefail
shopt -s nullglob
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
shared=${VRAM_SHARED_TRACES:-$src/../shared/data/traces}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

traces=("$src"/data/traces/*.csv.gz)
if [ -d "$shared" ]; then traces+=("$shared"/*.csv.gz); fi
[ -e "${traces[0]}" ] || fail "no traces found"

"$vramkit" replay --json --runs 3 "${traces[@]}" >"$tmp/out.jsonl"
python3 - "$tmp/out.jsonl" "$shared/summary.json" "$src/data/traces/summary.json" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
summ = {}
for p in sys.argv[2:]:
    if os.path.exists(p):
        for s in json.load(open(p)):
            summ[s["workload"]] = s
need = ["trace", "allocator", "settings", "events", "peak_live_bytes", "peak_reserved_bytes", "reserved_ratio",
        "ns_per_op", "malloc_ns_per_op", "backend_calls", "failed_allocs"]
bad, slow = [], []
for r in rows:
    name = os.path.basename(r["trace"]).split(".")[0]
    for k in need:
        if k not in r:
            bad.append(f"{name}: key {k} missing")
    st = r["settings"]
    if r["allocator"] != "sim/vmm" or st["policy"] != "vmm" or st["backend"] != "sim":
        bad.append(f"{name}: default allocator {r['allocator']}, settings {st}")
    for k in ("granularity", "pool_limit", "limit_ratio", "decay_ms", "retain_min", "capacity"):
        if k not in st:
            bad.append(f"{name}: settings lack {k}")
    if st.get("granularity") != 2 << 20 or st.get("timing_runs") != 3:
        bad.append(f"{name}: settings say granularity {st.get('granularity')}, runs {st.get('timing_runs')}")
    if r["failed_allocs"] != 0:
        bad.append(f"{name}: {r['failed_allocs']} failed allocations")
    # No limit: freed memory stays mapped, so a warm pass calls nothing.
    if r["warm_backend_calls"] != 0:
        bad.append(f"{name}: {r['warm_backend_calls']} backend calls a warm pass under no limit")
    if r["ns_per_op"] > 1.5 * r["malloc_ns_per_op"]:
        slow.append(r["trace"])
        print(f"{name}: {r['ns_per_op']:.1f} ns/op > 1.5 x malloc {r['malloc_ns_per_op']:.1f}: "
              "measured again", file=sys.stderr)
    if name in summ and r["peak_live_bytes"] != summ[name]["peak_live_requested"]:
        bad.append(f"{name}: peak live {r['peak_live_bytes']} != captured {summ[name]['peak_live_requested']}")
    print(f"{name:28s} ratio {r['reserved_ratio']:.4f} floor {r['floor_ratio']:.4f} "
          f"ns/op {r['ns_per_op']:.1f} malloc {r['malloc_ns_per_op']:.1f}")
open(os.path.join(os.path.dirname(sys.argv[1]), "slow.txt"), "w").write("".join(t + "\n" for t in slow))
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY
# Host time is a measurement on a shared machine (other tests run beside this
# one): a trace over the bound is measured again, alone, with more runs, and
# fails only if it is over again.
while read -r t; do
  "$vramkit" replay --json --runs 7 "$t" >"$tmp/again.json"
  python3 - "$tmp/again.json" <<'PY' || fail "host time over 1.5 x malloc twice"
import json, os, sys
r = json.loads(open(sys.argv[1]).readline())
name = os.path.basename(r["trace"]).split(".")[0]
print(f"{name:28s} again: ns/op {r['ns_per_op']:.1f} malloc {r['malloc_ns_per_op']:.1f}")
if r["ns_per_op"] > 1.5 * r["malloc_ns_per_op"]:
    print(f"{name}: {r['ns_per_op']:.1f} ns/op > 1.5 x malloc {r['malloc_ns_per_op']:.1f}", file=sys.stderr)
    sys.exit(1)
PY
done <"$tmp/slow.txt"

# At a limit of 1.05 x peak live held never passes the limit, and nothing is
# refused unless the stream model's floor (live plus frees not yet reusable)
# is above the limit; a refusal names the limit.
"$vramkit" replay --json --runs 1 --limit-ratio 1.05 "${traces[@]}" >"$tmp/limit.jsonl" 2>"$tmp/limit.err"
python3 - "$tmp/limit.jsonl" <<'PY' || fail "limit 1.05: $(cat "$tmp/limit.err")"
import json, os, sys
bad = []
for r in map(json.loads, open(sys.argv[1])):
    name = os.path.basename(r["trace"]).split(".")[0]
    if r["peak_reserved_bytes"] > r["limit_bytes"]:
        bad.append(f"{name}: held {r['peak_reserved_bytes']} > limit {r['limit_bytes']}")
    if r["failed_allocs"] and r["floor_ratio"] <= 1.05:
        bad.append(f"{name}: {r['failed_allocs']} refused under a floor of {r['floor_ratio']:.3f}")
    if r["failed_allocs"] and "limit of" not in r["first_failure"]["message"]:
        bad.append(f"{name}: a refusal does not name the limit: {r['first_failure']['message']}")
    print(f"{name:28s} limit 1.05: held/live {r['reserved_ratio']:.4f}, {r['backend_calls']} calls, "
          f"{r['failed_allocs']} refused (floor {r['floor_ratio']:.3f})")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY

# A capacity the trace exceeds: requests are refused, reported, and the replay goes on.
"$vramkit" replay --json --runs 1 --capacity 64M "${traces[0]}" >"$tmp/cap.json" 2>"$tmp/cap.err" \
  || fail "replay with a small capacity exited $?"
grep -q '"failed_allocs":[1-9]' "$tmp/cap.json" || fail "no refused request at 64 MiB: $(cat "$tmp/cap.json")"
grep -q "refused; the first, line [0-9]" "$tmp/cap.err" || fail "refusal not reported: $(cat "$tmp/cap.err")"
grep -q "out of memory" "$tmp/cap.err" || fail "refusal does not say why: $(cat "$tmp/cap.err")"

# The segments policy runs too, and the table mode prints the settings, a
# header and a row.
"$vramkit" replay --policy segments --runs 1 --limit 8GiB --decay-ms 500 "${traces[0]}" >"$tmp/seg.txt"
grep -q "^trace " "$tmp/seg.txt" && grep -q "segments" "$tmp/seg.txt" || fail "table: $(cat "$tmp/seg.txt")"
grep -q "^settings: backend sim, policy segments, granularity 2.00 MiB, .*limit 8.00 GiB, decay 500 ms" \
  "$tmp/seg.txt" || fail "table settings: $(head -2 "$tmp/seg.txt")"
"$vramkit" replay --json --runs 1 --granularity 4M --limit-ratio 1.05 "${traces[0]}" >"$tmp/set.json"
python3 - "$tmp/set.json" <<'PY' || fail "JSON settings: $(cat "$tmp/set.json")"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
s = r["settings"]
assert s["granularity"] == 4 << 20 and s["limit_ratio"] == 1.05 and s["timing_runs"] == 1, s
# The limit is 1.05 x the trace's peak live, and held never passes it.
assert r["limit_bytes"] > 0 and r["peak_reserved_bytes"] <= r["limit_bytes"], r
PY

# The sim with events done once recorded (a GPU with nothing queued): the
# pool's event paths on a two-stream trace, said in the settings, no request
# refused, and every event it recorded released (the sim reports any left).
multi=$src/data/traces/frcnn_mbv3_2streams.csv.gz
"$vramkit" replay --runs 1 --decay-ms 0 --sim-events done "$multi" >"$tmp/ev.txt" 2>"$tmp/ev.err"
grep -q "^settings: backend sim (events done once recorded), policy vmm" "$tmp/ev.txt" ||
  fail "sim events settings: $(head -1 "$tmp/ev.txt")"
grep -q "stream reclaim large from 16.0 MiB," "$tmp/ev.txt" ||
  fail "stream reclaim settings: $(head -1 "$tmp/ev.txt")"
if grep -q "never released" "$tmp/ev.err"; then fail "events left over: $(cat "$tmp/ev.err")"; fi
"$vramkit" replay --json --runs 1 --decay-ms 0 --sim-events done "$multi" >"$tmp/ev.json"
VRAM_SIM_EVENTS=done "$vramkit" replay --json --runs 1 --decay-ms 0 "$multi" >"$tmp/ev_env.json"
"$vramkit" replay --json --runs 1 --decay-ms 0 "$multi" >"$tmp/noev.json"
python3 - "$tmp/ev.json" "$tmp/ev_env.json" "$tmp/noev.json" <<'PY' || fail "sim events JSON"
import json, sys
ev, env, noev = (json.loads(open(p).readline()) for p in sys.argv[1:])
assert ev["settings"]["sim_events"] == "done" and env["settings"]["sim_events"] == "done", ev["settings"]
assert noev["settings"]["sim_events"] == "none", noev["settings"]
for r in (ev, noev):
    assert r["failed_allocs"] == 0 and "stream_waits" in r and "event_waits" in r, r
# The option and the variable are the same replay: the same placement.
assert ev["peak_reserved_bytes"] == env["peak_reserved_bytes"], (ev, env)
# With events the second stream's arrival waits once for the first's work.
assert ev["event_waits"] >= 1 and noev["event_waits"] == 0, (ev["event_waits"], noev["event_waits"])
s = ev["settings"]
assert s["stream_reclaim"] == "large" and s["reclaim_min"] == 16 << 20, s
PY
# Completed frees rejoining only when new memory is needed, and before every
# large request: said in the settings; the events recorded for the rejoins
# are backend calls of the measured run, fewer the fewer requests rejoin.
"$vramkit" replay --json --runs 1 --decay-ms 0 --sim-events done --stream-reclaim need "$multi" \
  >"$tmp/rn.json" 2>"$tmp/rn.err"
"$vramkit" replay --json --runs 1 --decay-ms 0 --sim-events done --reclaim-min 0 "$multi" \
  >"$tmp/rl.json" 2>"$tmp/rl.err"
if grep -q "never released" "$tmp/rl.err" "$tmp/rn.err"; then
  fail "events left over: $(cat "$tmp/rl.err" "$tmp/rn.err")"
fi
python3 - "$tmp/rn.json" "$tmp/ev.json" "$tmp/rl.json" <<'PY' || fail "stream reclaim JSON"
import json, sys
rn, ev, rl = (json.loads(open(p).readline()) for p in sys.argv[1:])
assert rn["settings"]["stream_reclaim"] == "need" and rn["failed_allocs"] == 0, rn
assert rl["settings"]["stream_reclaim"] == "large" and rl["settings"]["reclaim_min"] == 0, rl
assert rl["failed_allocs"] == 0, rl
calls = [r["backend_calls"] for r in (rn, ev, rl)]
assert calls[0] < calls[1] < calls[2], calls
PY

# A trace of one stream stays a pool of one stream: blocks still live at the
# end of a pass are freed on the stream they were allocated on, so the warm
# passes make no event call (a free on another stream would make the pool
# shared, and the rejoin before the large request would record events).
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,12:00:00.000001,allocate,0x1000,4194304,7\n0,12:00:00.000002,allocate,0x2000,4194304,7\n0,12:00:00.000003,free,0x1000,4194304,7\n0,12:00:00.000004,allocate,0x3000,8388608,7\n0,12:00:00.000005,free,0x3000,8388608,7\n' >"$tmp/one.csv"
"$vramkit" replay --json --runs 2 --decay-ms 0 --sim-events done --stream-reclaim large "$tmp/one.csv" \
  >"$tmp/one.json" || fail "one-stream trace"
python3 - "$tmp/one.json" <<'PY' || fail "one-stream trace: $(cat "$tmp/one.json")"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["warm_backend_calls"] == 0 and r["event_waits"] == 0, (r["warm_backend_calls"], r["event_waits"])
PY

# Malformed traces fail with the line number.
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,12:00:00.000001,allocate,0x1000,256,0\n0,12:00:00.000002,free,0x2000,256,0\n' >"$tmp/bad.csv"
if "$vramkit" replay "$tmp/bad.csv" 2>"$tmp/bad.err"; then fail "malformed trace accepted"; fi
grep -q "bad.csv:3" "$tmp/bad.err" || fail "no line number: $(cat "$tmp/bad.err")"
if "$vramkit" replay "$tmp/missing.csv" 2>"$tmp/miss.err"; then fail "missing trace accepted"; fi
grep -q "missing.csv" "$tmp/miss.err" || fail "missing file not named: $(cat "$tmp/miss.err")"

# Usage errors exit 2 and say what is wrong.
set +e
"$vramkit" replay --policy nope "${traces[0]}" 2>"$tmp/use.err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad policy exit $rc"
grep -q -- '--policy: "nope" is not one of vmm|segments' "$tmp/use.err" || fail "bad policy message: $(cat "$tmp/use.err")"
usage_case() { # PATTERN ARGS...: exit 2, the flag named
  local want=$1 rc=0
  shift
  "$vramkit" replay "$@" >"$tmp/u.out" 2>"$tmp/u.err" || rc=$?
  [ "$rc" -eq 2 ] || fail "replay $*: exit $rc, not 2 ($(cat "$tmp/u.err"))"
  grep -q -- "$want" "$tmp/u.err" || fail "replay $*: no \"$want\" in $(cat "$tmp/u.err")"
}
usage_case "--granularity: 3M is not a power of two" --granularity 3M "${traces[0]}"
usage_case "--granularity: 3K is not a power of two" --granularity 3K "${traces[0]}"
usage_case '--capacity: size "12X" has an unknown unit' --capacity 12X "${traces[0]}"
usage_case "unknown option --granularty (did you mean --granularity?)" --granularty 4M "${traces[0]}"
usage_case "--limit-ratio: 2000 is outside 0 .. 1000" --limit-ratio 2000 "${traces[0]}"
usage_case '--sim-events: "maybe" is not one of none|done' --sim-events maybe "${traces[0]}"
usage_case '--stream-reclaim: "often" is not one of need|large' --stream-reclaim often "${traces[0]}"
usage_case "no trace given"

# --compare needs a GPU backend; without a GPU a GPU backend says why.
set +e
"$vramkit" replay --compare "${traces[0]}" 2>"$tmp/cmp.err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "needs a GPU backend" "$tmp/cmp.err" || fail "--compare on sim: rc $rc $(cat "$tmp/cmp.err")"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    for b in vmm cuda cuda_async; do
        set +e
        "$vramkit" replay --backend $b --runs 1 "${traces[0]}" >/dev/null 2>"$tmp/gpu.err"; rc=$?
        set -e
        [ "$rc" -eq 1 ] || fail "--backend $b without a GPU exited $rc"
        grep -Eq "no CUDA driver|no usable GPU|needs a GPU|no GPU support" "$tmp/gpu.err" || fail "--backend $b: $(cat "$tmp/gpu.err")"
    done
fi

# config lists every option with its source, and rejects a malformed variable.
# (Through a file: grep -q exits at its match, and a writer still writing then dies of SIGPIPE.)
"$vramkit" config >"$tmp/cfg.txt"
grep -q "^VRAM_GRANULARITY .*default" "$tmp/cfg.txt" || fail "config table"
VRAM_GRANULARITY=4MiB "$vramkit" config >"$tmp/cfg.txt"
grep -q "^VRAM_GRANULARITY  *4MiB  *environment" "$tmp/cfg.txt" \
  || fail "config does not show the environment"
set +e
VRAM_GRANULARITY=lots "$vramkit" config >/dev/null 2>"$tmp/cfg.err"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "VRAM_GRANULARITY=lots" "$tmp/cfg.err" || fail "bad variable: rc $rc $(cat "$tmp/cfg.err")"
"$vramkit" config --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["GRANULARITY"]["source"]=="default"'

echo "1 passed, 0 failed"
