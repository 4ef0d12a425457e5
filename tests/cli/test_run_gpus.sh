#!/usr/bin/env bash
# tests/cli/test_run_gpus.sh VRAMKIT - `vramkit run --gpus`, one service per
# GPU, with cpu executors standing in for the GPUs: usage errors (a GPU
# named twice, a malformed list, --total-budget without --gpus); six
# streams on three GPUs placed two on each, every stream's gpu in the JSON
# summary; --budget per GPU (a stream no GPU has room for is refused with
# each GPU's sentence, the others run); --total-budget over all of them
# (refused with the fleet's numbers); and with --listen: POST /streams
# places through the fleet, GET /streams gives each stream's gpu, /metrics
# passes promtool with gpu labels on the stream families and
# vram_service_up{gpu} per GPU, /healthz is ok, DELETE removes a stream
# from its GPU, and SIGTERM ends with every stream's memory back.
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

# expect_usage WANT-TEXT ARGS...: exit 2 naming the problem
expect_usage() {
  local want=$1 st=0
  shift
  "$vramkit" run "$@" >"$tmp/u.out" 2>"$tmp/u.err" || st=$?
  [ "$st" = 2 ] || fail "run $*: exit $st, expected 2: $(cat "$tmp/u.err")"
  grep -qF -- "$want" "$tmp/u.err" || fail "run $*: \"$(cat "$tmp/u.err")\" does not say \"$want\""
}
expect_usage "GPU 1 is named twice" --backend cpu --gpus 0,1,1 -i synthetic:64x64@30
expect_usage "is not a list of device indices" --backend cpu --gpus 0,x -i synthetic:64x64@30
expect_usage "is not a list of device indices" --backend cpu --gpus 0, -i synthetic:64x64@30
expect_usage "--total-budget is for several GPUs" --backend cpu --total-budget 1G -i synthetic:64x64@30
# With the cuda executor and no --gpus, one GPU or none here is one service too.
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
  expect_usage "--total-budget is for several GPUs" --backend cuda --total-budget 1G -i synthetic:64x64@30
fi
# --gpus all counts the visible GPUs: none here is a usage error naming it.
st=0
"$vramkit" run --backend cpu --gpus all --frames 2 -i synthetic:64x64@30 >"$tmp/a.out" 2>"$tmp/a.err" || st=$?
if [ "$st" = 0 ]; then
  grep -q '^GPU 0$' "$tmp/a.out" || fail "--gpus all ran but printed no GPU 0 table: $(cat "$tmp/a.out")"
else
  [ "$st" = 2 ] && grep -q -- "--gpus all" "$tmp/a.err" || fail "--gpus all: exit $st: $(cat "$tmp/a.err")"
fi
echo "run gpus: usage errors name the problem"

# One GPU's fixed need and a 160x120 stream's, from a run of one service.
"$vramkit" run --backend cpu --frames 1 --json -i p=synthetic:160x120@10 >"$tmp/probe.json" 2>"$tmp/probe.err" ||
  fail "probe: $(cat "$tmp/probe.err")"
read -r fixed need < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["service"]["fixed_bytes"], d["streams"][0]["memory"]["need_bytes"])' "$tmp/probe.json")

# summary FILE: "gpu:count ..." of the fleet's JSON summary, and each stream's state.
summary() {
  python3 - "$1" <<'PY'
import json, sys, collections
d = json.load(open(sys.argv[1]))
count = collections.Counter()
states = set()
for g in d["gpus"]:
    assert g["up"] is True, g
    for s in g["service"]["streams"]:
        assert s["gpu"] == g["gpu"], (s["id"], s["gpu"], g["gpu"])
        count[g["gpu"]] += 1
        states.add(s["state"])
print(" ".join(f"{k}:{count[k]}" for k in sorted(count)), ",".join(sorted(states)),
      d["moved"], d["lost"])
PY
}

# Six streams on three GPUs: two on each.
inputs=()
for i in 1 2 3 4 5 6; do inputs+=(-i "s$i=synthetic:160x120@30"); done
"$vramkit" run --backend cpu --gpus 0,1,2 --frames 4 --json "${inputs[@]}" >"$tmp/place.json" \
  2>"$tmp/place.err" || fail "placement: $(cat "$tmp/place.err")"
got=$(summary "$tmp/place.json")
[ "$got" = "0:2 1:2 2:2 ended 0 0" ] || fail "placement: $got, expected 0:2 1:2 2:2 ended 0 0"
grep -q "run: 3 GPUs (0,1,2), one service each" "$tmp/place.err" ||
  fail "no fleet line: $(cat "$tmp/place.err")"
# JSON Lines: a file per GPU (out.gpuN.jsonl) with that GPU's streams; on stdout, whole
# lines from every GPU.
"$vramkit" run --backend cpu --gpus 0,1 --frames 6 --jsonl "$tmp/out.jsonl" -q "${inputs[@]:0:8}" \
  >/dev/null 2>"$tmp/jsonl.err" || fail "--jsonl per GPU: $(cat "$tmp/jsonl.err")"
[ ! -e "$tmp/out.jsonl" ] || fail "--jsonl with two GPUs wrote out.jsonl itself"
for g in 0 1; do
  got=$(python3 -c '
import json, sys
ids = sorted({json.loads(l)["stream"] for l in open(sys.argv[1])})
n = sum(1 for _ in open(sys.argv[1]))
print(" ".join(ids), n)' "$tmp/out.gpu$g.jsonl") || fail "out.gpu$g.jsonl: not JSON Lines"
  want=$([ $g = 0 ] && echo "s1 s3 12" || echo "s2 s4 12")
  [ "$got" = "$want" ] || fail "out.gpu$g.jsonl: $got, expected $want"
done
"$vramkit" run --backend cpu --gpus 0,1 --frames 30 --jsonl - "${inputs[@]}" >"$tmp/stdout.jsonl" \
  2>"$tmp/jsonl.err" || fail "--jsonl -: $(cat "$tmp/jsonl.err")"
python3 -c '
import json, sys
# The summary table follows the lines on stdout: every line naming a stream is one whole result.
lines = [l for l in open(sys.argv[1]).read().splitlines() if "\"frame\":" in l]
for l in lines:
    assert json.loads(l)["stream"].startswith("s"), l
assert len(lines) == 6 * 30, len(lines)' "$tmp/stdout.jsonl" || fail "--jsonl - with two GPUs: lines mixed"
echo "run gpus: six streams on three GPUs, two on each; JSON Lines per GPU"

# --budget is each GPU's: room for one stream on each of two, so the third is refused
# with both GPUs' sentences and the run exits 1; the two others run.
st=0
"$vramkit" run --backend cpu --gpus 0,1 --budget $((fixed + need)) --frames 4 --json \
  -i a=synthetic:160x120@30 -i b=synthetic:160x120@30 -i c=synthetic:160x120@30 \
  >"$tmp/budget.json" 2>"$tmp/budget.err" || st=$?
[ "$st" = 1 ] || fail "per-GPU budget: exit $st, expected 1: $(cat "$tmp/budget.err")"
grep -q 'refused: stream c (synthetic:160x120@30) fits on none of the 2 GPUs serving: GPU 0: .*; GPU 1: ' \
  "$tmp/budget.err" || fail "per-GPU budget: no refusal naming both GPUs: $(cat "$tmp/budget.err")"
got=$(summary "$tmp/budget.json")
[ "$got" = "0:1 1:1 ended 0 0" ] || fail "per-GPU budget: $got, expected 0:1 1:1 ended 0 0"
# --total-budget covers both GPUs' fixed needs and one stream: the second is refused.
st=0
"$vramkit" run --backend cpu --gpus 0,1 --total-budget $((2 * fixed + need)) --frames 4 --json \
  -i a=synthetic:160x120@30 -i b=synthetic:160x120@30 >"$tmp/total.json" 2>"$tmp/total.err" || st=$?
[ "$st" = 1 ] || fail "total budget: exit $st, expected 1: $(cat "$tmp/total.err")"
grep -q "refused: .*the fleet's budget of .* has .* left (2 GPUs' fixed" "$tmp/total.err" ||
  fail "total budget: no refusal with the fleet's numbers: $(cat "$tmp/total.err")"
got=$(summary "$tmp/total.json")
[ "$got" = "0:1 ended 0 0" ] || fail "total budget: $got, expected 0:1 ended 0 0"
# A fleet's budget below the GPUs' fixed needs refuses to start.
st=0
"$vramkit" run --backend cpu --gpus 0,1 --total-budget $((fixed + need)) -i a=synthetic:64x64@30 \
  >"$tmp/small.out" 2>"$tmp/small.err" || st=$?
[ "$st" = 1 ] && grep -q "budget" "$tmp/small.err" || fail "total budget below the fixed needs: exit $st: $(cat "$tmp/small.err")"
echo "run gpus: budgets per GPU and over all GPUs refuse with the numbers"

# The control API over two GPUs.
"$vramkit" run --backend cpu --gpus 0,1 --listen 127.0.0.1:0 --realtime --loop --interval 1 --json \
  -i base=synthetic:160x120@10 >"$tmp/run.json" 2>"$tmp/run.err" &
run_pid=$!
port=$(serving_port "$run_pid" "$tmp/run.err")
base=http://127.0.0.1:$port
http() { # METHOD PATH [BODY]: the status; the body in $tmp/body
  local args=(-s -S --max-time 30 -X "$1" -o "$tmp/body" -w '%{http_code}')
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  curl "${args[@]}" "$base$2" || echo "curl-failed"
}
for id in c1 c2 c3; do
  st=$(http POST /streams "{\"id\":\"$id\",\"url\":\"synthetic:160x120@10\",\"loop\":true,\"realtime\":true}")
  [ "$st" = 201 ] || fail "POST $id: $st $(cat "$tmp/body")"
done
st=$(http POST /streams '{"id":"c1","url":"synthetic:64x64@5"}')
[ "$st" = 409 ] && grep -q 'exists' "$tmp/body" || fail "POST of a duplicate id: $st $(cat "$tmp/body")"
[ "$(http GET /streams)" = 200 ] || fail "GET /streams: $(cat "$tmp/body")"
got=$(python3 -c '
import json, sys, collections
c = collections.Counter(s["gpu"] for s in json.load(open(sys.argv[1]))["streams"])
print(" ".join(f"{k}:{c[k]}" for k in sorted(c)))' "$tmp/body")
[ "$got" = "0:2 1:2" ] || fail "GET /streams: GPUs $got, expected 0:2 1:2: $(cat "$tmp/body")"
# base and c2 on GPU 0, c1 and c3 on GPU 1: each to the GPU with fewer streams, the lower on a tie.
[ "$(http GET /streams/c2)" = 200 ] && grep -q '"gpu":0' "$tmp/body" ||
  fail "GET /streams/c2: $(cat "$tmp/body")"
[ "$(http GET /streams/c3)" = 200 ] && grep -q '"gpu":1' "$tmp/body" ||
  fail "GET /streams/c3: $(cat "$tmp/body")"
[ "$(http GET /streams/nope)" = 404 ] || fail "GET of an unknown stream: $(cat "$tmp/body")"
# Frames flow before the metrics are read.
for _ in $(seq 100); do
  http GET /metrics >/dev/null
  grep -q '^vram_stream_processed_total{stream="c3",gpu="1"} [1-9]' "$tmp/body" && break
  sleep 0.1
done
promtool check metrics <"$tmp/body" >"$tmp/promtool.out" 2>&1 || fail "promtool: $(cat "$tmp/promtool.out")"
for want in 'vram_stream_processed_total{stream="base",gpu="0"} ' \
            'vram_stream_processed_total{stream="c1",gpu="1"} ' \
            'vram_service_up{gpu="0"} 1' 'vram_service_up{gpu="1"} 1' \
            'vram_fleet_gpus 2' 'vram_pool_live_bytes{pool="gpu1-host",gpu="1"} ' \
            'vram_pool_owner_live_bytes{pool="gpu0-host",gpu="0",owner="stream:c2"} '; do
  grep -qF -- "$want" "$tmp/body" || fail "/metrics lacks $want"
done
[ "$(http GET '/snapshot?pool=gpu1-host')" = 200 ] && grep -q '"pool":"gpu1-host","gpu":1,' "$tmp/body" ||
  fail "/snapshot of gpu1-host: no gpu member: $(head -c 300 "$tmp/body")"
[ "$(http GET /healthz)" = 200 ] && [ "$(cat "$tmp/body")" = ok ] || fail "/healthz: $(cat "$tmp/body")"
[ "$(http DELETE /streams/c1)" = 200 ] && grep -q '"removed":"c1"' "$tmp/body" ||
  fail "DELETE /streams/c1: $(cat "$tmp/body")"
[ "$(http GET /streams/c1)" = 404 ] || fail "c1 still there after DELETE: $(cat "$tmp/body")"
kill -TERM "$run_pid"
st=0
wait "$run_pid" || st=$?
run_pid=
[ "$st" = 0 ] || fail "SIGTERM: exit $st: $(tail -5 "$tmp/run.err")"
got=$(summary "$tmp/run.json")
[ "$got" = "0:2 1:1 ended 0 0" ] || fail "after SIGTERM: $got, expected 0:2 1:1 ended 0 0"
echo "run gpus: the control API places through the fleet; metrics carry gpu labels"
