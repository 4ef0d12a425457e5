#!/usr/bin/env bash
# tests/cli/test_metrics.sh VRAMKIT - `vramkit metrics` end to end: the
# exposition of replayed traces passes `promtool check metrics` (promtool
# missing is a failure: scripts/deps.sh installs it), its numbers agree with
# each other and with --events; served with --port 0, the printed URL answers
# /metrics, /snapshot, /snapshot?pool=NAME and /healthz, refuses other methods
# and paths, and the server stops cleanly on SIGTERM; bad arguments fail with
# a clear message.
set -euo pipefail
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool not found: scripts/deps.sh installs it (Debian package prometheus)"

small=$src/tests/data/traces/small.csv.gz
crops=$src/data/traces/mobilenet_crops.csv.gz

# Printed once.
"$vramkit" metrics "$small" "$crops" >"$tmp/all.prom"
promtool check metrics <"$tmp/all.prom" || fail "promtool refused the exposition"
python3 - "$tmp/all.prom" <<'PY'
import re, sys
series = {}
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    name, value = line.rsplit(" ", 1)
    series[name] = float(value)
bad = []
for pool in ("small", "mobilenet_crops"):
    live = series.get(f'vram_pool_live_bytes{{pool="{pool}"}}')
    if live is None:
        bad.append(f"{pool}: no vram_pool_live_bytes")
        continue
    owners = sum(v for k, v in series.items()
                 if k.startswith(f'vram_pool_owner_live_bytes{{pool="{pool}",'))
    kinds = sum(v for k, v in series.items()
                if k.startswith(f'vram_pool_kind_live_bytes{{pool="{pool}",'))
    if owners != live or kinds != live:
        bad.append(f"{pool}: live {live}, owners {owners}, kinds {kinds}")
    if series.get(f'vram_pool_peak_live_bytes{{pool="{pool}"}}', 0) <= 0:
        bad.append(f"{pool}: no peak")
    if not any(k.startswith(f'vram_pool_owner_allocs_total{{pool="{pool}",owner="thread ') for k in series):
        bad.append(f"{pool}: no owner per trace thread")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
PY
grep -q '^vram_nvml_available ' "$tmp/all.prom" || fail "no vram_nvml_available"
if grep -q '^vram_nvml_available 0' "$tmp/all.prom"; then
  ! grep -q '^vram_gpu_' "$tmp/all.prom" || fail "GPU figures without NVML"
fi
"$vramkit" metrics --no-gpu "$small" >"$tmp/nogpu.prom"
! grep -q 'vram_nvml\|vram_gpu' "$tmp/nogpu.prom" || fail "--no-gpu still reads NVML"
# Before any event nothing is live or allocated.
"$vramkit" metrics --events 0 --no-gpu "$small" >"$tmp/none.prom"
grep -qx 'vram_pool_live_bytes{pool="small"} 0' "$tmp/none.prom" || fail "--events 0: live bytes"
grep -qx 'vram_pool_allocs_total{pool="small"} 0' "$tmp/none.prom" || fail "--events 0: allocations"
"$vramkit" metrics --policy segments --no-gpu "$small" | promtool check metrics ||
  fail "segments policy: promtool refused it"

# Served.
"$vramkit" metrics --port 0 --hold 60 "$small" "$crops" >"$tmp/serve.out" 2>"$tmp/serve.err" &
server=$!
for _ in $(seq 100); do
  grep -q '^serving ' "$tmp/serve.out" 2>/dev/null && break
  sleep 0.1
done
url=$(awk '/^serving /{print $2}' "$tmp/serve.out")
[ -n "$url" ] || fail "no URL printed: $(cat "$tmp/serve.out" "$tmp/serve.err")"
[[ $url == http://127.0.0.1:*/metrics ]] || fail "unexpected URL $url"
python3 - "${url%/metrics}" "$tmp/scraped.prom" <<'PY'
import json, sys, urllib.error, urllib.request
base, out = sys.argv[1], sys.argv[2]
def get(path, method="GET", data=None):
    req = urllib.request.Request(base + path, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
bad = []
st, h, body = get("/metrics")
if st != 200 or not h["Content-Type"].startswith("text/plain; version=0.0.4"):
    bad.append(f"/metrics: {st} {h['Content-Type']}")
open(out, "wb").write(body)
st, h, body = get("/snapshot")
snaps = json.loads(body)
if st != 200 or [s["pool"] for s in snaps] != ["small", "mobilenet_crops"]:
    bad.append(f"/snapshot: {st} {[s.get('pool') for s in snaps]}")
st, h, body = get("/snapshot?pool=small")
one = json.loads(body)
live = sum(b["requested"] for b in one["blocks"] if b["state"] == "live")
if st != 200 or one["pool"] != "small" or live != one["stats"]["live_bytes"]:
    bad.append(f"/snapshot?pool=small: {st}, blocks {live}")
st, h, body = get("/snapshot?pool=missing")
if st != 404 or "missing" not in json.loads(body)["error"]:
    bad.append(f"/snapshot?pool=missing: {st} {body!r}")
st, h, body = get("/healthz")
if st != 200 or body != b"ok\n":
    bad.append(f"/healthz: {st} {body!r}")
st, h, body = get("/metrics", "POST", b"x=1")
if st != 405 or h["Allow"] != "GET, HEAD":
    bad.append(f"POST /metrics: {st} Allow {h['Allow']}")
st, h, body = get("/nothing")
if st != 404:
    bad.append(f"/nothing: {st}")
if bad:
    sys.exit("FAIL: " + "; ".join(bad))
PY
promtool check metrics <"$tmp/scraped.prom" || fail "promtool refused the served exposition"
kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=
[ "$rc" -eq 0 ] || fail "the server exited $rc on SIGTERM: $(cat "$tmp/serve.err")"

# Bad arguments.
expect_fail() { # STATUS PATTERN ARGS...
  local want=$1 pattern=$2
  shift 2
  local got=0
  "$vramkit" metrics "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  [ "$got" -eq "$want" ] || fail "metrics $*: exit $got, wanted $want ($(cat "$tmp/err"))"
  grep -q -- "$pattern" "$tmp/err" || fail "metrics $*: no \"$pattern\" in: $(cat "$tmp/err")"
}
expect_fail 2 "no trace given"
expect_fail 2 "--hold needs --port" --hold 1 "$small"
expect_fail 2 "--port: 70000 is outside 0 .. 65535" --port 70000 "$small"
expect_fail 2 '--events: "x" is not a whole number' --events x "$small"
expect_fail 2 "--gpu: GPU \"gpu0\" is none of" --gpu gpu0 "$small"
expect_fail 2 "unknown option --prot (did you mean --port?)" --prot 0 "$small"
expect_fail 1 "not an IPv4 or IPv6 literal" --port 0 --address localhost "$small"
expect_fail 1 "both named \"small\"" "$small" "$small"
expect_fail 1 "cannot open" "$tmp/missing.csv"
# --json: each pool's statistics, the fields the library names.
"$vramkit" metrics --json --no-gpu "$small" >"$tmp/stats.json" || fail "metrics --json exited $?"
python3 - "$tmp/stats.json" <<'PY' || fail "metrics --json: $(head -c 300 "$tmp/stats.json")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 1 and rows[0]["pool"] == "small", rows
assert "live_bytes" in rows[0]["stats"] and rows[0]["owners"] and rows[0]["kinds"], rows[0]
PY
echo "metrics CLI: all checks passed"
