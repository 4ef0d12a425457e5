#!/usr/bin/env bash
# tests/cli/test_run_api.sh VRAMKIT - the control API of `vramkit run
# --listen 127.0.0.1:0`, driven with curl while a paced synthetic camera
# runs: GET /streams and /streams/ID; POST /streams admits a stream (201,
# then it processes frames; one with a frame limit ends by itself and gives
# its memory back), refuses malformed JSON, an unknown member, a wrong type
# and a missing url (400, naming the reason), a duplicate id, a missing path
# and a stream over --budget (409, the sentence naming the path, or giving
# the need and what is left to the byte); DELETE /streams/ID mid-run (200,
# then 404, its memory back, the others going on), DELETE of an unknown id
# (404); other methods (405 with Allow); a body over 64 KiB (413); /metrics
# passes promtool with a vram_stream_processed_total series per stream;
# /healthz; and SIGTERM prints the summary and the memory line.
set -euo pipefail
vramkit=$1
source "$(dirname "$0")/run_common.sh"
tmp=$(mktemp -d)
run_pid=
cleanup() {
  stop_pid "$run_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
need curl promtool python3
started=$(date +%s)

# The bodies are read with sed where that is enough (starting python3 takes long on a
# loaded machine). field KEY [FILE]: a number or string member of a flat JSON object (the
# last one of that name); ids FILE: the "id" members in order; error FILE: {"error": ...}.
field() {
  sed -n -e "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" -e "t" -e "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" \
    "${2:-$tmp/body}"
}
ids() { grep -o '"id":"[^"]*"' "${1:-$tmp/body}" | sed 's/"id":"\(.*\)"/\1/' | tr '\n' ' ' | sed 's/ $//'; }
error_of() {
  sed -n 's/^{"error":"\(.*\)"}$/\1/p' "${1:-$tmp/body}" | sed 's/\\"/"/g; s/\\\\/\\/g'
}

# The service's fixed need and a 160x120 stream's, for a budget with room for three of them.
"$vramkit" run --frames 1 --json -i p=synthetic:160x120@10 >"$tmp/probe.json" 2>"$tmp/probe.err" ||
  fail "probe: $(cat "$tmp/probe.err")"
fixed=$(field fixed_bytes "$tmp/probe.json")
need=$(field need_bytes "$tmp/probe.json")
[[ $fixed =~ ^[0-9]+$ && $need =~ ^[0-9]+$ ]] || fail "probe: fixed $fixed, need $need: $(cat "$tmp/probe.json")"
budget=$((fixed + 3 * need))

"$vramkit" run --listen 127.0.0.1:0 --budget "$budget" --realtime -i base=synthetic:160x120@10 \
  --jsonl "$tmp/api.jsonl" --interval 1 >"$tmp/run.out" 2>"$tmp/run.err" &
run_pid=$!
port=$(serving_port "$run_pid" "$tmp/run.err")
base=http://127.0.0.1:$port

# http METHOD PATH [BODY-FILE]: the status; the body in $tmp/body, the headers in $tmp/headers
http() {
  local args=(-s -S --max-time 30 -X "$1" -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}')
  if [ $# -ge 3 ]; then
    args+=(-H 'Content-Type: application/json' --data-binary "@$3")
  fi
  curl "${args[@]}" "$base$2" || echo "curl-failed"
}
# post JSON WANT-STATUS [WANT-TEXT]: POST /streams, checking the status and the error sentence
post() {
  printf '%s' "$1" >"$tmp/req.json"
  local st
  st=$(http POST /streams "$tmp/req.json")
  [ "$st" = "$2" ] || fail "POST /streams $1: status $st, expected $2: $(cat "$tmp/body")"
  if [ $# -ge 3 ]; then
    local err
    err=$(error_of)
    [[ $err == *"$3"* ]] || fail "POST $1: the error \"$err\" ($(cat "$tmp/body")) does not say \"$3\""
  fi
}
stream_field() { # ID KEY: a member of GET /streams/ID
  local st
  st=$(http GET "/streams/$1")
  [ "$st" = 200 ] || fail "GET /streams/$1: $st $(cat "$tmp/body")"
  field "$2"
}
wait_for() { # ID KEY OP VALUE: until GET /streams/ID has [ KEY OP VALUE ] (30 s)
  local deadline=$((SECONDS + 30)) v
  while :; do
    v=$(stream_field "$1" "$2")
    [ -n "$v" ] && [ "$v" "$3" "$4" ] && return 0
    [ "$SECONDS" -lt "$deadline" ] || fail "$1: $2 $v, not $3 $4 after 30 s: $(cat "$tmp/body")"
    sleep 0.2
  done
}
metric() { # SERIES: its value in /metrics now ("" when absent)
  http GET /metrics >/dev/null
  awk -v s="$1" '$1 == s { print $2 }' "$tmp/body"
}

# ---- reading ----
st=$(http GET /streams)
[ "$st" = 200 ] || fail "GET /streams: $st $(cat "$tmp/body")"
grep -qi '^content-type: application/json' "$tmp/headers" || fail "GET /streams: $(cat "$tmp/headers")"
[ "$(ids)" = base ] || fail "GET /streams: $(cat "$tmp/body")"
wait_for base processed -ge 3
[ "$(field state)" = running ] || fail "base: $(cat "$tmp/body")"
st=$(http GET /streams/none)
[ "$st" = 404 ] || fail "GET /streams/none: $st"
[ "$(error_of)" = 'no stream "none"' ] || fail "GET /streams/none: $(cat "$tmp/body")"

# ---- admitting ----
post '{"id": "added", "url": "synthetic:160x120@10", "realtime": true}' 201
[ "$(field id) $(field state) $(field width)x$(field height) $(field need_bytes)" = \
  "added running 160x120 $need" ] || fail "POST added: $(cat "$tmp/body")"
wait_for added processed -ge 5
# A frame limit: it ends by itself and gives its memory back while the service runs.
post '{"id": "short", "url": "synthetic:64x48@25", "frames": 10}' 201
wait_for short state = ended
[ "$(field frames_in) $(field processed) $(field dropped) $(field live_bytes)" = "10 10 0 0" ] ||
  fail "short, ended: $(cat "$tmp/body")"

# ---- refusals ----
post '{"id": "x", "url": ' 400 "is not valid JSON (at byte"
post '[1, 2]' 400 "is not a JSON object"
post '{"url": "synthetic:64x48@10", "colour": "red"}' 400 '"colour": is not a stream setting'
post '{"id": "nourl"}' 400 'needs a "url"'
post '{"url": "synthetic:64x48@10", "realtime": "yes"}' 400 '"realtime": must be true or false'
post '{"id": "bad id", "url": "synthetic:64x48@10"}' 400 '"id": may hold only letters'
post '{"id": "base", "url": "synthetic:64x48@10"}' 409 'a stream with id "base" exists'
post "{\"id\": \"gone\", \"url\": \"$tmp/no/such.mp4\"}" 409 "$tmp/no/such.mp4: cannot open it: No such file"
# Over the budget: two 160x120 streams hold their need (short gave its own back), one is left;
# a 320x240 stream's frames fit in it, its whole need does not: admission refuses it.
big_frames=$((4 * 960 * 240))
share=$((need - 4 * 512 * 120))
want=$(python3 - "$((big_frames + share))" "$big_frames" "$share" "$budget" "$((budget - fixed - 2 * need))" \
  "$fixed" "$((2 * need))" <<'PY'
import sys
def fmt(n):  # vram_size_format
    if n < 1024:
        return f"{n} B"
    v, units, u = n / 1024.0, ["KiB", "MiB", "GiB", "TiB", "PiB"], 0
    while v >= (1023.995 if v < 10.0 else 1023.95) and u + 1 < len(units):
        v, u = v / 1024.0, u + 1
    return f"{v:.2f} {units[u]}" if v < 10.0 else f"{v:.1f} {units[u]}"
need, frames, share, budget, left, fixed, used = map(int, sys.argv[1:])
print(f"stream big (synthetic:320x240@10) needs {fmt(need)} (frames {fmt(frames)}, decoder 0 B, "
      f"staging and batch share {fmt(share)}) but the budget of {fmt(budget)} has {fmt(left)} "
      f"left (the service's fixed {fmt(fixed)} and 2 streams' {fmt(used)})")
PY
)
post '{"id": "big", "url": "synthetic:320x240@10"}' 409 "$want"
[ "$(error_of)" = "$want" ] || fail "the budget refusal: $(cat "$tmp/body"), expected $want"
# One whose frames alone are more than is left is refused as its source opens, the pool
# never passing the budget.
post '{"id": "huge", "url": "synthetic:1280x720@10"}' 409 "does not fit in what the budget of"
# What was refused is not there, in the list or the metrics.
http GET /streams >/dev/null
[ "$(ids)" = "base added short" ] ||
  fail "GET /streams after the refusals: $(cat "$tmp/body")"
http GET /metrics >/dev/null
! grep -Eq 'stream="(big|gone|x|nourl)"' "$tmp/body" ||
  fail "refused streams in /metrics: $(grep -E 'stream="(big|gone)' "$tmp/body" | head)"
for owner in big gone; do # their owners (if made) hold nothing
  for m in live_bytes live_blocks; do
    v=$(metric "vram_pool_owner_$m{pool=\"service-host\",owner=\"stream:$owner\"}")
    [ -z "$v" ] || [ "$v" = 0 ] || fail "the refused stream $owner holds $m $v"
  done
done
# The pool holds the fixed need and the two running streams' frames, nothing of the refused.
live=$(metric 'vram_pool_live_bytes{pool="service-host"}')
frames_now=$(( $(metric 'vram_stream_live_bytes{stream="base"}') + $(metric 'vram_stream_live_bytes{stream="added"}') ))
[ "$live" = "$((fixed + frames_now))" ] ||
  fail "the host pool holds $live B: the fixed $fixed B and the streams' $frames_now B expected"

# ---- methods, paths, sizes ----
st=$(http PUT /streams)
[ "$st" = 405 ] || fail "PUT /streams: $st"
grep -qi '^allow: GET, HEAD, POST' "$tmp/headers" || fail "PUT /streams: Allow: $(cat "$tmp/headers")"
st=$(http PATCH /streams/base)
[ "$st" = 405 ] || fail "PATCH /streams/base: $st"
grep -qi '^allow: GET, HEAD, DELETE' "$tmp/headers" || fail "PATCH /streams/base: $(cat "$tmp/headers")"
{ printf '{"id": "huge", "url": "'; head -c 70000 /dev/zero | tr '\0' a; printf '"}'; } >"$tmp/huge.json"
st=$(http POST /streams "$tmp/huge.json")
[ "$st" = 413 ] || fail "a body of 70000 bytes: $st $(head -c 300 "$tmp/body")"
st=$(http GET /healthz)
[ "$st" = 200 ] && [ "$(cat "$tmp/body")" = ok ] || fail "/healthz: $st $(cat "$tmp/body")"

# ---- removing ----
st=$(http DELETE /streams/nosuch)
[ "$st" = 404 ] || fail "DELETE /streams/nosuch: $st $(cat "$tmp/body")"
st=$(http DELETE /streams/added)
[ "$st" = 200 ] || fail "DELETE /streams/added: $st $(cat "$tmp/body")"
[ "$(field removed) $(field id)" = "added added" ] && [ "$(field processed)" -ge 5 ] ||
  fail "DELETE /streams/added: $(cat "$tmp/body")"
st=$(http GET /streams/added)
[ "$st" = 404 ] || fail "GET /streams/added after the DELETE: $st $(cat "$tmp/body")"
st=$(http DELETE /streams/added)
[ "$st" = 404 ] || fail "a second DELETE /streams/added: $st"
[ "$(metric 'vram_pool_owner_live_bytes{pool="service-host",owner="stream:added"}')" = 0 ] ||
  fail "stream:added still holds memory: $(grep 'owner="stream:added"' "$tmp/body")"
[ -z "$(metric 'vram_stream_processed_total{stream="added"}')" ] || fail "added still in /metrics"
# The others go on.
before=$(stream_field base processed)
wait_for base processed -ge $((before + 5))
[ "$(field state)" = running ] || fail "base after the DELETE: $(cat "$tmp/body")"
# Its id is free again.
post '{"id": "added", "url": "synthetic:96x64@10", "realtime": true}' 201
wait_for added processed -ge 2

# ---- metrics ----
http GET /metrics >/dev/null
cp "$tmp/body" "$tmp/metrics.prom"
promtool check metrics <"$tmp/metrics.prom" || fail "promtool refused /metrics (above)"
http GET /streams >/dev/null
python3 - "$tmp/body" "$tmp/metrics.prom" <<'PY' || fail "/metrics against /streams (above)"
import json, sys
streams = json.load(open(sys.argv[1]))["streams"]
series = {}
for line in open(sys.argv[2]):
    if not line.startswith("#") and line.strip():
        k, v = line.rsplit(" ", 1)
        series[k] = float(v)
bad = []
for s in streams:
    k = f'vram_stream_processed_total{{stream="{s["id"]}"}}'
    if k not in series:
        bad.append(f"no {k}")
    elif series[k] > s["processed"]:  # scraped first, then listed
        bad.append(f"{k} {series[k]}, but /streams says {s['processed']}")
    if f'vram_stream_state{{stream="{s["id"]}",state="{s["state"]}"}}' not in series:
        bad.append(f"no state series for {s['id']} ({s['state']})")
if series.get("vram_service_streams") != len(streams):
    bad.append(f"vram_service_streams {series.get('vram_service_streams')}, {len(streams)} streams")
if bad:
    sys.exit("\n".join(bad))
PY

# ---- SIGTERM: drained, the summary, the memory line ----
kill -TERM "$run_pid"
deadline=$((SECONDS + 60))
while :; do
  state=Z
  [ -r "/proc/$run_pid/stat" ] && read -r _ _ state _ 2>/dev/null <"/proc/$run_pid/stat"
  [ "$state" = Z ] && break
  [ "$SECONDS" -lt "$deadline" ] || fail "still running 60 s after SIGTERM"
  sleep 0.1
done
rc=0
wait "$run_pid" || rc=$?
run_pid=
[ "$rc" -eq 0 ] || fail "exit $rc after SIGTERM: $(tail -n 20 "$tmp/run.out" "$tmp/run.err")"
grep -q '^run: SIGTERM: draining the frames in flight' "$tmp/run.err" || fail "no drain line: $(tail "$tmp/run.err")"
grep -q '^memory: every stream gave its memory back (0 B live)$' "$tmp/run.out" ||
  fail "no memory line: $(cat "$tmp/run.out")"
python3 - "$tmp/run.out" "$tmp/api.jsonl" <<'PY' || fail "the summary: $(cat "$tmp/run.out")"
import json, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 11 and f[0] in ("base", "short", "added"):
        rows[f[0]] = (f[1], int(f[3]), " ".join(f[-2:]))
lines = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    lines.setdefault(r["stream"], []).append(r["frame"])
bad = []
if sorted(rows) != ["added", "base", "short"]:
    bad.append(f"rows {sorted(rows)}")
for sid, (state, processed, mem) in rows.items():
    if state != "ended" or mem != "0 B":
        bad.append(f"{sid}: {state}, {mem}")
    if sid != "added" and len(lines.get(sid, [])) != processed:
        bad.append(f"{sid}: {len(lines.get(sid, []))} JSON lines, {processed} processed")
if rows.get("short", (0, 0))[1] != 10:
    bad.append(f"short: {rows.get('short')}")
if bad:
    sys.exit("\n".join(bad))
PY
echo "run api: all checks passed in $(($(date +%s) - started)) s"
