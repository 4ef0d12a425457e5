#!/usr/bin/env bash
# tests/cli/test_run_faults.sh VRAMKIT - `vramkit run` when inputs go wrong,
# each time with the other streams unaffected (their exact frame counts) and
# the stream at fault holding no memory afterwards: a file with bytes
# overwritten in its middle (damaged frames or fewer of them, no crash, the
# stream ends), files cut in half (they end cleanly, with fewer frames), a
# text file and a missing path (refused at admission with the path named,
# exit status 1, the others run), the RTSP server killed mid-run and
# started again (the stream reconnects and goes on to its frame limit),
# streams refused by --budget and --stream-budget (the sentence gives the
# need and what is left, to the byte as the service formats it), and
# SIGTERM and SIGINT mid-run (the frames in flight drained, the summary
# printed, the memory line, exit status 0).
set -euo pipefail
vramkit=$1
source "$(dirname "$0")/run_common.sh"
tmp=$(mktemp -d)
rtsp_pid= pub_pid= run_pid=
cleanup() {
  stop_pid "$run_pid"
  stop_pid "$pub_pid"
  stop_pid "$rtsp_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
need ffmpeg ffprobe rtsp-server-perl python3
started=$(date +%s)

# ---- clips ----
x264=(-c:v libx264 -preset veryfast -g 25 -bf 0)
clip() { # OUT SECONDS ARGS...: ffmpeg's testsrc2 at 160x120, 25 fps
  local out=$1 secs=$2
  shift 2
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=160x120:rate=25" \
    -t "$secs" -pix_fmt yuv420p "${x264[@]}" "$@" "$out" || fail "ffmpeg could not make $out"
}
count_frames() {
  ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
    -of csv=p=0 "$1" | sed -n 1p
}
clip "$tmp/good.mp4" 2 -movflags +faststart
clip "$tmp/good.ts" 2 -f mpegts
clip "$tmp/cam.mp4" 2
good=$(count_frames "$tmp/good.mp4")
good_ts=$(count_frames "$tmp/good.ts")
[ "$good" = 50 ] && [ "$good_ts" = 50 ] || fail "ffprobe counts $good and $good_ts frames, not 50"
# Damaged: the middle fifth of each file overwritten with (seeded) noise.
python3 - "$tmp" <<'PY'
import os, random, sys
tmp = sys.argv[1]
for name in ("good.mp4", "good.ts"):
    b = bytearray(open(os.path.join(tmp, name), "rb").read())
    rng = random.Random(7)
    for i in range(len(b) * 2 // 5, len(b) * 3 // 5):
        b[i] = rng.randrange(256)
    open(os.path.join(tmp, "corrupt." + name.split(".")[1]), "wb").write(b)
    whole = open(os.path.join(tmp, name), "rb").read()
    open(os.path.join(tmp, "half." + name.split(".")[1]), "wb").write(whole[:len(whole) // 2])
PY
echo "these are notes, not a video" >"$tmp/notes.txt"
missing=$tmp/no/such/clip.mp4

# ---- running and checking ----
# run NAME EXPECTED_STATUS ARGS...: stdout into $tmp/NAME.out, stderr into .err
run() {
  local name=$1 want=$2 rc=0
  shift 2
  timeout -k 5 240 "$vramkit" run "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  [ "$rc" -ne 124 ] || fail "$name: vramkit run $* did not end within 240 s: $(tail -n 20 "$tmp/$name.err")"
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want: $(tail -n 30 "$tmp/$name.out" "$tmp/$name.err")"
}
# bg_wait PID SECONDS: wait for a background process to end (failing after SECONDS);
# its exit status in bg_rc.
bg_wait() {
  local pid=$1 deadline=$((SECONDS + $2)) state=
  while :; do
    state=Z
    [ -r "/proc/$pid/stat" ] && read -r _ _ state _ 2>/dev/null <"/proc/$pid/stat"
    [ "$state" = Z ] && break
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
  bg_rc=0
  wait "$pid" || bg_rc=$?
}
lines_of() { # STREAM FILE: JSON lines of that stream written so far
  local n
  n=$(grep -c "\"stream\":\"$1\"" "$2" 2>/dev/null) || true
  echo "${n:-0}"
}
wait_lines() { # STREAM FILE N SECONDS PID: until the stream has N lines (while PID runs)
  local deadline=$((SECONDS + $4))
  while [ "$(lines_of "$1" "$2")" -lt "$3" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$1: fewer than $3 results after $4 s: $(tail -n 5 "${2%.jsonl}.err")"
    [ -e "/proc/$5" ] || fail "$1: vramkit ended early: $(tail -n 20 "${2%.jsonl}.err")"
    sleep 0.2
  done
}

# The checker of a --json summary and its JSON Lines; SPEC is JSON {id: {"frames": N | null,
# "max": N, "live": bool, "damaged_or_short": bool}}: "frames" exact (processed == frames_in ==
# N, nothing dropped), or at most "max" (and at least one) when null; "live": N in,
# processed + dropped == N.
cat >"$tmp/check.py" <<'PY'
import json, sys
summary, jsonl, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
d = json.load(open(summary))
streams = {s["id"]: s for s in d["streams"]}
bad = []
if sorted(streams) != sorted(spec):
    bad.append(f"streams {sorted(streams)}, expected {sorted(spec)}")
for sid, want in spec.items():
    s = streams.get(sid)
    if s is None:
        continue
    got = {k: s[k] for k in ("state", "frames_in", "processed", "dropped", "damaged", "reconnects")}
    if s["state"] != "ended":
        bad.append(f"{sid}: state {s['state']}, expected ended: {got} {s.get('error', '')}")
    n = want.get("frames")
    if want.get("live"):
        if s["frames_in"] != n or s["processed"] + s["dropped"] != n or s["processed"] < 1:
            bad.append(f"{sid}: {got}, expected {n} in, processed + dropped {n}")
    elif n is not None:
        if (s["frames_in"], s["processed"], s["dropped"]) != (n, n, 0):
            bad.append(f"{sid}: {got}, expected {n} in, {n} processed, none dropped")
    else:
        if not 1 <= s["processed"] <= want["max"] or s["dropped"] or s["processed"] != s["frames_in"]:
            bad.append(f"{sid}: {got}, expected 1..{want['max']} processed, all it decoded")
        if want.get("damaged_or_short") and not (s["damaged"] > 0 or s["processed"] < want["max"]):
            bad.append(f"{sid}: {got}: neither damaged frames nor fewer than {want['max']}")
        if want.get("short") and not s["processed"] < want["max"]:
            bad.append(f"{sid}: {got}: not fewer than {want['max']} frames")
    if want.get("reconnects") and s["reconnects"] < want["reconnects"]:
        bad.append(f"{sid}: {s['reconnects']} reconnects, expected at least {want['reconnects']}")
    mem = s["memory"]
    if any(mem[k] for k in ("frames_bytes", "decoder_bytes", "io_bytes", "live_bytes")):
        bad.append(f"{sid}: memory still held after the stop: {mem}")
if d["totals"]["live_bytes"] != 0:
    bad.append(f"totals.live_bytes {d['totals']['live_bytes']}")
# Nothing but the service's fixed need is left in the pool: streams refused at admission or
# failed hold nothing either.
host = [p for p in d["pools"] if p["pool"] == "service-host"][0]
if host["live_bytes"] != d["service"]["fixed_bytes"]:
    bad.append(f"the host pool holds {host['live_bytes']} B after the stop; the fixed need is "
               f"{d['service']['fixed_bytes']} B")
per = {}
for no, line in enumerate(open(jsonl), 1):
    try:
        r = json.loads(line)
    except ValueError:
        bad.append(f"JSON Lines line {no} is not JSON: {line[:100]!r}")
        continue
    per.setdefault(r["stream"], []).append((r["frame"], r["pts"]))
for sid, want in spec.items():
    s = streams.get(sid)
    if s is None:
        continue
    rows = per.get(sid, [])
    idx = [f for f, _ in rows]
    if len(rows) != s["processed"]:
        bad.append(f"{sid}: {len(rows)} JSON lines, {s['processed']} processed")
    if want.get("live"):
        if idx != sorted(set(idx)) or not idx or idx[-1] != want["frames"] - 1:
            bad.append(f"{sid}: frames not rising to {want['frames'] - 1}: {idx[:5]} ... {idx[-5:]}")
    elif idx != list(range(len(idx))):
        bad.append(f"{sid}: frames not 0..{len(idx) - 1} in order: {idx[:12]} ...")
    pts = [p for _, p in rows]
    if any(b <= a for a, b in zip(pts, pts[1:])):
        bad.append(f"{sid}: pts not rising")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY
check() { # NAME SPEC
  python3 "$tmp/check.py" "$tmp/$1.out" "$tmp/$1.jsonl" "$2" ||
    fail "$1: not what was expected (above); stderr: $(grep -v '^\[' "$tmp/$1.err" | tail -n 15)"
}
refused_line() { # NAME ID: the refusal of stream ID in NAME's stderr
  grep "^vramkit run: refused: stream $2[: ]" "$tmp/$1.err" || fail "$1: no refusal of $2: $(cat "$tmp/$1.err")"
}

# ---- 1. damaged, truncated, not video, missing; the others exact ----
cat >"$tmp/files.json" <<EOF
{"streams": [
  {"id": "good", "url": "$tmp/good.mp4"},
  {"id": "syn", "url": "synthetic:160x120@25", "frames": 40},
  {"id": "corrupt_mp4", "url": "$tmp/corrupt.mp4"},
  {"id": "corrupt_ts", "url": "$tmp/corrupt.ts"},
  {"id": "half_mp4", "url": "$tmp/half.mp4"},
  {"id": "half_ts", "url": "$tmp/half.ts"},
  {"id": "text", "url": "$tmp/notes.txt"},
  {"id": "missing", "url": "$missing"},
  {"id": "after", "url": "synthetic:64x48@25", "frames": 30}]}
EOF
run files 1 --config "$tmp/files.json" --json --jsonl "$tmp/files.jsonl"
check files "{\"good\": {\"frames\": $good}, \"syn\": {\"frames\": 40}, \"after\": {\"frames\": 30},
  \"corrupt_mp4\": {\"max\": $good, \"damaged_or_short\": true},
  \"corrupt_ts\": {\"max\": $good, \"damaged_or_short\": true},
  \"half_mp4\": {\"max\": $good, \"short\": true}, \"half_ts\": {\"max\": $good, \"short\": true}}"
line=$(refused_line files text)
[[ $line == *"$tmp/notes.txt"* ]] || fail "the text file's refusal does not name it: $line"
line=$(refused_line files missing)
[[ $line == *"$missing"* && $line == *"No such file"* ]] || fail "the missing path's refusal: $line"
[ "$(grep -c '^vramkit run: refused:' "$tmp/files.err")" -eq 2 ] ||
  fail "files: refusals: $(grep 'refused' "$tmp/files.err")"
echo "run faults: damaged and truncated files end, a text file and a missing path are refused"

# ---- 2. refused by the budgets: the sentence has the need and what is left ----
run probe 0 --frames 1 --json -i p=synthetic:160x120@25
# Each stream needs its ring (the default queue of 2, and 2 more frames, rows of RGB24 64-byte
# aligned) and its share of the batch buffers, the same for every stream: the probe's need less
# its frames. The budget takes a and b, and leaves big, which comes between, room for its
# frames but not for its whole need: admission refuses it with the need. Then a budget that
# leaves less than big's frames: it is refused while its source opens, never passing the budget.
read -r fixed share need_a need_b need_big budget < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
fixed, need_p = d["service"]["fixed_bytes"], d["streams"][0]["memory"]["need_bytes"]
frames = lambda w, h: 4 * ((w * 3 + 63) // 64 * 64) * h
share = need_p - frames(160, 120)
a, b, big = need_p, frames(64, 48) + share, frames(1280, 720) + share
print(fixed, share, a, b, big, fixed + a + frames(1280, 720) + share // 2)' "$tmp/probe.out")
run budget 1 --budget "$budget" --frames 20 --json --jsonl "$tmp/budget.jsonl" \
  -i a=synthetic:160x120@25 -i big=synthetic:1280x720@25 -i b=synthetic:64x48@25
python3 - "$tmp/budget.err" "$fixed" "$share" "$need_a" "$need_big" "$budget" <<'PY' ||
import sys
err = open(sys.argv[1]).read()
fixed, share, need_a, need_big, budget = map(int, sys.argv[2:7])
def fmt(n):  # vram_size_format
    if n < 1024:
        return f"{n} B"
    v, units, u = n / 1024.0, ["KiB", "MiB", "GiB", "TiB", "PiB"], 0
    while v >= (1023.995 if v < 10.0 else 1023.95) and u + 1 < len(units):
        v, u = v / 1024.0, u + 1
    return f"{v:.2f} {units[u]}" if v < 10.0 else f"{v:.1f} {units[u]}"
want = (f"vramkit run: refused: stream big (synthetic:1280x720@25) needs {fmt(need_big)} (frames "
        f"{fmt(need_big - share)}, decoder 0 B, staging and batch share {fmt(share)}) but the "
        f"budget of {fmt(budget)} has {fmt(budget - fixed - need_a)} left (the service's fixed "
        f"{fmt(fixed)} and 1 stream's {fmt(need_a)})")
if want not in err:
    sys.exit(f"expected the sentence\n  {want}\nin\n{err}")
PY
  fail "budget: the refusal (above)"
[ "$(grep -c '^vramkit run: refused:' "$tmp/budget.err")" -eq 1 ] ||
  fail "budget: only big is refused: $(grep refused "$tmp/budget.err")"
check budget '{"a": {"frames": 20}, "b": {"frames": 20}}'
run budget_open 1 --budget "$((fixed + need_a + 1048576))" --frames 20 --json \
  -i a=synthetic:160x120@25 -i big=synthetic:1280x720@25
grep -q "^vramkit run: refused: stream big (synthetic:1280x720@25) does not fit in what the budget of .* has left (.*, after the service's fixed .* and the streams' .*): .*budget of owner \"stream:big\" exceeded" "$tmp/budget_open.err" ||
  fail "budget: big's frames over what is left: $(cat "$tmp/budget_open.err")"
python3 - "$tmp/budget_open.out" "$((fixed + need_a + 1048576))" <<'PY' || fail "budget: the pool passed the budget"
import json, sys
d = json.load(open(sys.argv[1]))
host = [p for p in d["pools"] if p["pool"] == "service-host"][0]
if host["peak_live_bytes"] > int(sys.argv[2]):
    sys.exit(f"peak {host['peak_live_bytes']} over the budget {sys.argv[2]}")
PY
# mid's frames fit in 1 MiB but not with its batch share: admission refuses it with its need.
# wide's ring alone is more than the limit: admission refuses it with its need too.
run sbudget 1 --stream-budget 1M --frames 15 --json --jsonl "$tmp/sbudget.jsonl" \
  -i small=synthetic:64x48@25 -i mid=synthetic:160x120@25 -i wide=synthetic:640x480@25
python3 - "$tmp/sbudget.err" "$share" <<'PY' || fail "stream budget: the refusal (above)"
import sys
err, share = open(sys.argv[1]).read(), int(sys.argv[2])
def fmt(n):
    v, units, u = n / 1024.0, ["KiB", "MiB", "GiB", "TiB", "PiB"], 0
    while v >= (1023.995 if v < 10.0 else 1023.95) and u + 1 < len(units):
        v, u = v / 1024.0, u + 1
    return f"{v:.2f} {units[u]}" if v < 10.0 else f"{v:.1f} {units[u]}"
frames = lambda w, h: 4 * ((w * 3 + 63) // 64 * 64) * h
want = (f"vramkit run: refused: stream mid (synthetic:160x120@25) needs "
        f"{fmt(frames(160, 120) + share)} (frames {fmt(frames(160, 120))}, decoder 0 B, staging "
        f"and batch share {fmt(share)}), more than its limit of 1.00 MiB")
if want not in err:
    sys.exit(f"expected\n  {want}\nin\n{err}")
wide = [l for l in err.splitlines() if l.startswith("vramkit run: refused: stream wide")]
if len(wide) != 1 or "1.00 MiB" not in wide[0]:
    sys.exit(f"wide: its refusal does not give the limit: {wide}")
PY
check sbudget '{"small": {"frames": 15}}'
echo "run faults: budget and stream budget refusals give the need and what is left"

# ---- 3. the RTSP server killed mid-run and started again ----
read -r cport sport < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
rtp=$(python3 -c '
import random, socket
for _ in range(500):
    base, ok, socks = random.randrange(20000, 30000, 2), True, []
    try:
        for p in range(base, base + 64):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(s)
            s.bind(("127.0.0.1", p))
    except OSError:
        ok = False
    for s in socks: s.close()
    if ok:
        print(base)
        break')
[ -n "$rtp" ] || fail "no free UDP range for the RTSP server's RTP ports"
cam=rtsp://127.0.0.1:$cport/cam1
rtsp_start() { # the server, then ffmpeg publishing the looping clip, readable by a client
  rtsp_server >>"$tmp/rtsp.log" 2>&1 &
  rtsp_pid=$!
  wait_port "$cport" && wait_port "$sport" || fail "rtsp-server-perl did not listen: $(tail "$tmp/rtsp.log")"
  ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/cam.mp4" -c copy \
    -f rtsp "rtsp://127.0.0.1:$sport/cam1" >>"$tmp/pub.log" 2>&1 &
  pub_pid=$!
  # Mounted: the server listens for its RTP on the first ports of the range.
  wait_port "$rtp" udp || fail "the publisher did not mount cam1: $(tail "$tmp/rtsp.log" "$tmp/pub.log")"
  local i
  for i in $(seq 20); do
    timeout 8 ffprobe -v error -show_entries stream=codec_name -of csv=p=0 "$cam" >/dev/null 2>&1 && return 0
    kill -0 "$pub_pid" 2>/dev/null || fail "the RTSP publisher exited: $(tail "$tmp/pub.log")"
    sleep 0.5
  done
  fail "$cam never became readable: $(tail "$tmp/rtsp.log" "$tmp/pub.log")"
}
rtsp_kill() {
  kill -KILL "$pub_pid" "$rtsp_pid" 2>/dev/null || true
  wait "$pub_pid" 2>/dev/null || true
  wait "$rtsp_pid" 2>/dev/null || true
  pub_pid= rtsp_pid=
}
rtsp_start
cat >"$tmp/cam.json" <<EOF
{"streams": [{"id": "cam", "url": "$cam", "frames": 450},
             {"id": "syn", "url": "synthetic:160x120@25", "frames": 40},
             {"id": "file", "url": "$tmp/good.ts"}]}
EOF
"$vramkit" run --config "$tmp/cam.json" --json --jsonl "$tmp/cam.jsonl" >"$tmp/cam.out" 2>"$tmp/cam.err" &
run_pid=$!
wait_lines cam "$tmp/cam.jsonl" 5 60 "$run_pid"
before=$(lines_of cam "$tmp/cam.jsonl")
rtsp_kill
sleep 1.5
rtsp_start
bg_wait "$run_pid" 120 || fail "cam: vramkit still runs 120 s after the server came back: $(tail "$tmp/cam.err")"
run_pid=
[ "$bg_rc" -eq 0 ] || fail "cam: exit $bg_rc: $(tail -n 20 "$tmp/cam.err")"
check cam "{\"cam\": {\"frames\": 450, \"live\": true, \"reconnects\": 1}, \"syn\": {\"frames\": 40},
  \"file\": {\"frames\": $good_ts}}"
grep -q "video source $cam: .*reconnecting in" "$tmp/cam.err" || fail "cam: no reconnect logged: $(cat "$tmp/cam.err")"
after=$(lines_of cam "$tmp/cam.jsonl")
[ "$after" -gt "$before" ] || fail "cam: $before results before the outage, $after in all"
rtsp_kill
echo "run faults: the RTSP stream reconnected after its server came back ($before results before, $after in all)"

# ---- 4. SIGTERM and SIGINT mid-run: drained, summary, memory line, exit 0 ----
for sig in TERM INT; do
  name=sig$sig
  extra=()
  [ "$sig" = INT ] && extra=(--realtime)
  "$vramkit" run --loop "${extra[@]}" --jsonl "$tmp/$name.jsonl" -i loop="$tmp/good.mp4" \
    -i syn=synthetic:96x64@25 >"$tmp/$name.out" 2>"$tmp/$name.err" &
  run_pid=$!
  wait_lines loop "$tmp/$name.jsonl" 60 60 "$run_pid" # past the file's end: it looped
  kill -"$sig" "$run_pid"
  bg_wait "$run_pid" 60 || fail "$name: still running 60 s after SIG$sig"
  run_pid=
  [ "$bg_rc" -eq 0 ] || fail "$name: exit $bg_rc after SIG$sig: $(tail -n 20 "$tmp/$name.out" "$tmp/$name.err")"
  grep -q "^run: SIG$sig: draining the frames in flight" "$tmp/$name.err" ||
    fail "$name: no drain line: $(tail "$tmp/$name.err")"
  grep -q '^memory: every stream gave its memory back (0 B live)$' "$tmp/$name.out" ||
    fail "$name: no memory line: $(cat "$tmp/$name.out")"
  # The table's rows against the JSON Lines: every processed frame was written, in order.
  python3 - "$tmp/$name.out" "$tmp/$name.jsonl" "$sig" <<'PY' || fail "$name: $(cat "$tmp/$name.out")"
import json, sys
out, jsonl, sig = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(out):
    f = line.split()
    if len(f) >= 11 and f[0] in ("loop", "syn"):
        rows[f[0]] = dict(state=f[1], frames_in=int(f[2]), processed=int(f[3]), dropped=int(f[4]),
                          memory=" ".join(f[-2:]))
per = {}
for line in open(jsonl):
    r = json.loads(line)
    per.setdefault(r["stream"], []).append(r["frame"])
bad = []
if sorted(rows) != ["loop", "syn"]:
    bad.append(f"table rows {sorted(rows)}")
for sid, r in rows.items():
    idx = per.get(sid, [])
    if r["state"] != "ended" or r["memory"] != "0 B":
        bad.append(f"{sid}: {r}")
    if len(idx) != r["processed"] or r["processed"] + r["dropped"] != r["frames_in"]:
        bad.append(f"{sid}: {len(idx)} JSON lines, table {r}")
    if sig == "TERM" and (r["dropped"] or idx != list(range(len(idx)))):
        bad.append(f"{sid}: read as fast as taken, yet frames {idx[:5]} ... {idx[-5:]}, {r}")
    if idx != sorted(set(idx)):
        bad.append(f"{sid}: frames not rising")
if rows.get("loop", {}).get("processed", 0) <= 50:
    bad.append(f"loop: {rows.get('loop')}: it did not go past the file's 50 frames")
if not any(l.startswith("total ") for l in open(out)):
    bad.append("no total row")
if bad:
    sys.exit("\n".join(bad))
PY
  echo "run faults: SIG$sig drained and printed the summary"
done

echo "run faults: all checks passed in $(($(date +%s) - started)) s"
