#!/usr/bin/env bash
# tests/cli/test_oom.sh VRAMKIT - OOM reports from the command line: a replay
# on a device too small for its trace writes reports with --oom-dir (text,
# JSON and snapshot per refusal, named oom-<pool>-<UTC time>-<seq>, at most
# VRAM_OOM_MAX_REPORTS of them, the JSON with every field of the format and a
# diagnosis), VRAM_OOM_DIR does the same without the option, a replay that
# fits writes none, and `vramkit config` lists the options.
set -euo pipefail
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
trace=$src/data/traces/mobilenet_crops.csv.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$trace" ] || fail "no trace at $trace"

# A 64 MiB device: requests are refused, the replay goes on, reports appear.
"$vramkit" replay --json --runs 1 --capacity 64M --oom-dir "$tmp/a" "$trace" >"$tmp/a.json" 2>"$tmp/a.err" \
  || fail "replay exited $?: $(cat "$tmp/a.err")"
grep -q '"failed_allocs":[1-9]' "$tmp/a.json" || fail "no refusal at 64 MiB: $(cat "$tmp/a.json")"
grep -q "refused (VRAM_ENOMEM, likely [a-z_]*); report in $tmp/a/oom-replay-" "$tmp/a.err" \
  || fail "reports not announced: $(head -3 "$tmp/a.err")"
n=$(ls "$tmp/a"/*.txt | wc -l)
[ "$n" -eq 8 ] || fail "$n reports for thousands of refusals (the default limit is 8 a minute)"
for t in "$tmp/a"/*.txt; do
    base=${t%.txt}
    [[ $(basename "$base") =~ ^oom-replay-[0-9]{8}T[0-9]{6}Z-[0-9]+$ ]] || fail "name $(basename "$t")"
    [ -s "$base.json" ] && [ -s "$base.snapshot.json" ] || fail "$base: json or snapshot missing"
    grep -q "^diagnosis: " "$t" && grep -q "^request: " "$t" && grep -q "^last 64 event(s) of" "$t" \
      || fail "text report $t: $(head -5 "$t")"
done
python3 - "$tmp/a" <<'PY'
import glob, json, os, sys
reports = sorted(p for p in glob.glob(sys.argv[1] + "/*.json") if not p.endswith(".snapshot.json"))
top = ["type", "time_s", "pool", "request", "owners", "kinds", "reserved_bytes", "live_bytes",
       "fragmentation_ratio", "largest_free_bytes", "gpu", "trend", "last_events", "snapshot_path",
       "diagnosis"]
causes = {"exceeds_configured", "leak", "fragmentation", "other_processes"}
for p in reports:
    r = json.load(open(p))
    missing = [k for k in top if k not in r]
    assert not missing, f"{p}: missing {missing}"
    assert r["type"] == "oom" and r["pool"] == "replay", p
    q = r["request"]
    for k in ["size_bytes", "owner", "kind", "stream", "error", "message"]:
        assert k in q, f"{p}: request.{k} missing"
    assert q["error"] == "VRAM_ENOMEM" and "cannot allocate" in q["message"], q
    assert r["gpu"] is None and "gpu_unavailable" in r, "sim: no GPU, and why"
    assert r["trend"] is None and "trend_unavailable" in r
    assert len(r["last_events"]) == 64, len(r["last_events"])
    assert r["last_events"][-1]["action"] == "allocate failure"
    assert r["last_events"][-1]["size_bytes"] == q["size_bytes"]
    assert os.path.exists(r["snapshot_path"]), r["snapshot_path"]
    snap = json.load(open(r["snapshot_path"]))
    assert snap["pool"] == "replay" and "blocks" in snap
    assert r["diagnosis"]["cause"] in causes and len(r["diagnosis"]["line"]) > 20
    assert r["live_bytes"] <= r["reserved_bytes"] <= 64 << 20
print(len(reports), "reports:", sorted({json.load(open(p))["diagnosis"]["cause"] for p in reports}))
PY

# The environment does the same without the option; the limit is an option too.
VRAM_OOM_DIR="$tmp/b" VRAM_OOM_MAX_REPORTS=2 "$vramkit" replay --runs 1 --capacity 64M "$trace" \
  >/dev/null 2>"$tmp/b.err" || fail "replay with VRAM_OOM_DIR exited $?"
n=$(ls "$tmp/b"/*.json | grep -vc snapshot)
[ "$n" -eq 2 ] || fail "VRAM_OOM_MAX_REPORTS=2 gave $n reports"

# A replay that fits writes nothing.
"$vramkit" replay --runs 1 --oom-dir "$tmp/c" "$trace" >/dev/null 2>"$tmp/c.err"
[ -z "$(ls -A "$tmp/c")" ] || fail "reports without a refusal: $(ls "$tmp/c")"

# Usage and configuration.
set +e
"$vramkit" replay "$trace" --oom-dir 2>"$tmp/use.err"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--oom-dir without a value exited $rc"
touch "$tmp/file"
set +e
"$vramkit" replay --runs 1 --oom-dir "$tmp/file" "$trace" >/dev/null 2>"$tmp/file.err"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "is not a directory" "$tmp/file.err" || fail "bad --oom-dir: rc $rc $(cat "$tmp/file.err")"
"$vramkit" config >"$tmp/config.txt"
grep -q "^VRAM_OOM_DIR " "$tmp/config.txt" || fail "config does not list VRAM_OOM_DIR"
grep -q "^VRAM_OOM_MAX_REPORTS .* 8 " "$tmp/config.txt" || fail "config: VRAM_OOM_MAX_REPORTS"

echo "1 passed, 0 failed"
