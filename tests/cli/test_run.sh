#!/usr/bin/env bash
# tests/cli/test_run.sh VRAMKIT - `vramkit run` end to end on real inputs:
# eight streams at once (mp4 with a face in every frame, mkv, MPEG-TS, raw
# H.264, HEVC, two synthetic cameras and an RTSP camera served on loopback
# by rtsp-server-perl) each process exactly their number of frames (ffprobe
# counts the files', --frames ends the others), none drops, every stream
# gives its memory back, and the JSON Lines hold one line per processed
# frame, frames 0..N-1 in order per stream, in the documented schema; a
# stream file (--config) with per-stream frame limits and settings that the
# command line overrides; --streams N replicating the inputs under new ids,
# with live streams that fall behind counting what they drop; annotated
# snapshots every 0.2 s that are valid JPEGs of the stream's frame size.
set -euo pipefail
vramkit=$1
source "$(dirname "$0")/run_common.sh"
tmp=$(mktemp -d)
rtsp_pid= pub_pid=
cleanup() {
  stop_pid "$pub_pid"
  stop_pid "$rtsp_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
need ffmpeg ffprobe rtsp-server-perl python3
started=$(date +%s)


# ---- clips: 25 fps, short, low resolution ----
clip() { # OUT SECONDS ENCODER-ARGS...: ffmpeg's testsrc2 pattern at 160x120
  local out=$1 secs=$2
  shift 2
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=160x120:rate=25" \
    -t "$secs" -pix_fmt yuv420p "$@" "$out" || fail "ffmpeg could not make $out"
}
count_frames() { # the frames ffprobe decodes from a file
  ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
    -of csv=p=0 "$1" | sed -n 1p
}
x264=(-c:v libx264 -preset veryfast -g 25 -bf 0)
photo=${VRAM_ASTRONAUT:-/usr/lib/python3/dist-packages/skimage/data/astronaut.png}
face=0
if [ -f "$photo" ]; then # a real face (scikit-image's astronaut), panning slowly, 320x240
  ffmpeg -nostdin -hide_banner -loglevel error -y -loop 1 -framerate 25 -t 2 -i "$photo" \
    -filter_complex "[0:v]crop=512:384:0:0,zoompan=z='1+0.004*in':x='1.3*in':y='0.5*in':d=1:s=320x240:fps=25,format=yuv420p[v]" \
    -map '[v]' -frames:v 50 "${x264[@]}" "$tmp/a.mp4" || fail "ffmpeg could not make the face clip"
  face=1
else
  echo "run: $photo missing (python3-skimage): the mp4 clip has no face" >&2
  clip "$tmp/a.mp4" 2 "${x264[@]}"
fi
clip "$tmp/b.mkv" 1.6 "${x264[@]}"
clip "$tmp/c.ts" 1.8 "${x264[@]}" -f mpegts
clip "$tmp/d.h264" 1.4 "${x264[@]}" -f h264
encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null || true)
if [[ $encoders == *libx265* ]]; then
  clip "$tmp/e.mp4" 1.2 -c:v libx265 -preset ultrafast -x265-params log-level=error:bframes=0 -tag:v hvc1
  hevc=hevc
else
  echo "run: ffmpeg has no libx265: the HEVC stream is H.264" >&2
  clip "$tmp/e.mp4" 1.2 "${x264[@]}"
  hevc=h264
fi
clip "$tmp/cam.mp4" 2 "${x264[@]}"
[ "$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name -of csv=p=0 "$tmp/e.mp4")" = "$hevc" ] ||
  fail "e.mp4 is not $hevc"
declare -A frames
for f in a.mp4 b.mkv c.ts d.h264 e.mp4; do
  frames[$f]=$(count_frames "$tmp/$f")
  [[ ${frames[$f]} =~ ^[0-9]+$ ]] && [ "${frames[$f]}" -gt 20 ] || fail "ffprobe counted ${frames[$f]} frames in $f"
done

# ---- the RTSP camera: rtsp-server-perl on loopback, ffmpeg publishing a loop ----
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
rtsp_server >"$tmp/rtsp.log" 2>&1 &
rtsp_pid=$!
wait_port "$cport" && wait_port "$sport" || fail "rtsp-server-perl did not listen: $(tail "$tmp/rtsp.log")"
ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/cam.mp4" -c copy \
  -f rtsp "rtsp://127.0.0.1:$sport/cam1" >"$tmp/pub.log" 2>&1 &
pub_pid=$!
# Mounted: the server listens for its RTP on the first ports of the range.
wait_port "$rtp" udp || fail "the publisher did not mount cam1: $(tail "$tmp/rtsp.log" "$tmp/pub.log")"
ready=0
for _ in $(seq 20); do
  if timeout 8 ffprobe -v error -show_entries stream=codec_name -of csv=p=0 "$cam" >/dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 "$pub_pid" 2>/dev/null || fail "the RTSP publisher exited: $(tail "$tmp/pub.log")"
  sleep 0.5
done
[ "$ready" -eq 1 ] || fail "$cam never became readable: $(tail "$tmp/rtsp.log" "$tmp/pub.log")"

# ---- the checker: a --json summary and its JSON Lines against what each stream must do ----
cat >"$tmp/check.py" <<'PY'
"""check.py SUMMARY JSONL SPEC: SPEC is JSON {id: {"frames": N, "w": W, "h": H,
"live": bool (it may drop: frames_in N, processed + dropped N), "clean": bool
(no damaged frame), "faces": bool (a face in every frame)}}."""
import json, sys

summary, jsonl, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
bad = []
d = json.load(open(summary))
streams = {s["id"]: s for s in d["streams"]}
if sorted(streams) != sorted(spec):
    bad.append(f"streams {sorted(streams)}, expected {sorted(spec)}")
for sid, want in spec.items():
    s = streams.get(sid)
    if s is None:
        continue
    n = want["frames"]
    got = {k: s[k] for k in ("state", "frames_in", "processed", "dropped", "damaged",
                             "output_dropped", "width", "height")}
    if s["state"] != "ended":
        bad.append(f"{sid}: state {s['state']}, expected ended ({got})")
    if want.get("live"):
        if s["frames_in"] != n or s["processed"] + s["dropped"] != n or s["processed"] < 1:
            bad.append(f"{sid}: frames_in {s['frames_in']}, processed {s['processed']} + "
                       f"dropped {s['dropped']}, expected {n} in and processed + dropped {n}")
    elif s["frames_in"] != n or s["processed"] != n or s["dropped"] != 0:
        bad.append(f"{sid}: frames_in {s['frames_in']}, processed {s['processed']}, dropped "
                   f"{s['dropped']}; expected {n}, {n}, 0")
    if want.get("clean") and s["damaged"] != 0:
        bad.append(f"{sid}: {s['damaged']} damaged, expected 0")
    if s["output_dropped"] != 0:
        bad.append(f"{sid}: {s['output_dropped']} results dropped by the output queue")
    if (s["width"], s["height"]) != (want["w"], want["h"]):
        bad.append(f"{sid}: {s['width']}x{s['height']}, expected {want['w']}x{want['h']}")
    mem = s["memory"]
    if any(mem[k] for k in ("frames_bytes", "decoder_bytes", "io_bytes", "live_bytes")):
        bad.append(f"{sid}: memory still held after the stop: {mem}")
    if mem["need_bytes"] <= 0:
        bad.append(f"{sid}: need_bytes {mem['need_bytes']}")
t = d["totals"]
for k in ("processed", "frames_in", "dropped", "faces"):
    total = sum(s[k] for s in d["streams"])
    if t[k] != total:
        bad.append(f"totals.{k} {t[k]}, the streams sum to {total}")
if t["live_bytes"] != 0 or t["streams"] != len(spec):
    bad.append(f"totals: live_bytes {t['live_bytes']}, streams {t['streams']}")
host = [p for p in d["pools"] if p["pool"] == "service-host"]
if not host or host[0]["live_bytes"] != d["service"]["fixed_bytes"]:
    bad.append(f"service-host pool holds {host[0]['live_bytes'] if host else None} B after the "
               f"stop, the service's fixed need is {d['service']['fixed_bytes']} B")

keys = {"stream", "frame", "pts", "width", "height", "latency_ms", "detections"}
per = {}
for no, line in enumerate(open(jsonl), 1):
    try:
        r = json.loads(line)
    except ValueError as e:
        bad.append(f"JSON Lines line {no} is not JSON ({e}): {line[:120]!r}")
        continue
    if set(r) != keys:
        bad.append(f"line {no}: members {sorted(r)}, expected {sorted(keys)}")
        continue
    ok = (isinstance(r["stream"], str) and isinstance(r["frame"], int) and
          isinstance(r["pts"], (int, float)) and isinstance(r["width"], int) and
          isinstance(r["height"], int) and isinstance(r["latency_ms"], (int, float)) and
          r["latency_ms"] >= 0 and isinstance(r["detections"], list))
    if not ok:
        bad.append(f"line {no}: wrong types: {line[:160]!r}")
        continue
    W, H = r["width"], r["height"]
    for det in r["detections"]:
        box, kp = det.get("box"), det.get("keypoints")
        if (sorted(det) != ["box", "keypoints", "score"] or len(box) != 4 or
                not 0 < det["score"] <= 1 or len(kp) != 6 or any(len(p) != 2 for p in kp)):
            bad.append(f"line {no}: a detection out of the schema: {det}")
        elif not (-0.25 * W <= box[0] < box[2] <= 1.25 * W and -0.25 * H <= box[1] < box[3] <= 1.25 * H):
            bad.append(f"line {no}: box {box} outside the {W}x{H} frame")
    per.setdefault(r["stream"], []).append(r)
for sid in per:
    if sid not in spec:
        bad.append(f"JSON Lines: {len(per[sid])} lines of an unknown stream {sid}")
for sid, want in spec.items():
    rows, s = per.get(sid, []), streams.get(sid)
    if s is None:
        continue
    n = want["frames"]
    idx = [r["frame"] for r in rows]
    if len(rows) != s["processed"]:
        bad.append(f"{sid}: {len(rows)} JSON lines, {s['processed']} processed")
    if want.get("live"):
        if idx != sorted(set(idx)) or (idx and (idx[0] < 0 or idx[-1] != n - 1)):
            bad.append(f"{sid}: frames not rising to {n - 1}: {idx[:8]} ... {idx[-4:]}")
    elif idx != list(range(n)):
        first = next((i for i, (a, b) in enumerate(zip(idx, range(n))) if a != b), min(len(idx), n))
        bad.append(f"{sid}: frames are not 0..{n - 1} in order: {len(idx)} lines, "
                   f"first difference at line {first}: {idx[first:first + 5]}")
    pts = [r["pts"] for r in rows]
    if any(b <= a for a, b in zip(pts, pts[1:])) or (pts and pts[0] < 0):
        bad.append(f"{sid}: pts not rising: {pts[:6]} ...")
    if any((r["width"], r["height"]) != (want["w"], want["h"]) for r in rows):
        bad.append(f"{sid}: a line with another frame size than {want['w']}x{want['h']}")
    faces = sum(len(r["detections"]) for r in rows)
    if faces != s["faces"]:
        bad.append(f"{sid}: {faces} detections in the JSON Lines, faces {s['faces']} in the summary")
    if want.get("faces"):
        missing = [r["frame"] for r in rows if not r["detections"]]
        if missing:
            bad.append(f"{sid}: no face found in frames {missing[:10]}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY

# run NAME EXPECTED_STATUS ARGS...: stdout into $tmp/NAME.out, stderr into .err
run() {
  local name=$1 want=$2 rc=0
  shift 2
  timeout -k 5 240 "$vramkit" run "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  [ "$rc" -ne 124 ] || fail "$name: vramkit run $* did not end within 240 s: $(tail -n 20 "$tmp/$name.err")"
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want: $(tail -n 30 "$tmp/$name.out" "$tmp/$name.err")"
}
check() { # NAME SPEC: the summary in $tmp/NAME.out, the lines in $tmp/NAME.jsonl
  python3 "$tmp/check.py" "$tmp/$1.out" "$tmp/$1.jsonl" "$2" ||
    fail "$1: the summary or the JSON Lines are not what was expected (above); stderr: $(tail -n 15 "$tmp/$1.err")"
}

# ---- 1. eight streams at once ----
# --queue 64 holds more frames than the camera delivers before --frames ends it, so that
# even the live stream never has to drop one, and processes exactly 60.
run eight 0 --workers 2 --queue 64 --frames 60 --json --jsonl "$tmp/eight.jsonl" \
  -i mp4="$tmp/a.mp4" -i mkv="$tmp/b.mkv" -i ts="$tmp/c.ts" -i h264="$tmp/d.h264" \
  -i hevc="$tmp/e.mp4" -i syn1=synthetic:160x120@25 -i syn2=synthetic:320x240@30 -i cam="$cam"
spec=$(python3 -c '
import json, sys
f = dict(zip(["a.mp4", "b.mkv", "c.ts", "d.h264", "e.mp4"], map(int, sys.argv[1:6])))
face = sys.argv[6] == "1"
print(json.dumps({
    "mp4": {"frames": f["a.mp4"], "w": 320 if face else 160, "h": 240 if face else 120, "clean": True, "faces": face},
    "mkv": {"frames": f["b.mkv"], "w": 160, "h": 120, "clean": True},
    "ts": {"frames": f["c.ts"], "w": 160, "h": 120, "clean": True},
    "h264": {"frames": f["d.h264"], "w": 160, "h": 120, "clean": True},
    "hevc": {"frames": f["e.mp4"], "w": 160, "h": 120, "clean": True},
    "syn1": {"frames": 60, "w": 160, "h": 120, "clean": True},
    "syn2": {"frames": 60, "w": 320, "h": 240, "clean": True},
    "cam": {"frames": 60, "w": 160, "h": 120}}))' \
  "${frames[a.mp4]}" "${frames[b.mkv]}" "${frames[c.ts]}" "${frames[d.h264]}" "${frames[e.mp4]}" "$face")
check eight "$spec"
python3 - "$tmp/eight.out" <<'PY' || fail "eight: the service's summary: $(head -c 600 "$tmp/eight.out")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["service"]
assert s["workers"] == 2 and s["detector"] == "blazeface" and s["executor"] == "cpu", s
# Frames of different streams share batches.
assert s["batches"] > 0 and 1 < s["mean_batch"] <= s["batch"], s
assert sum(x["processed"] for x in d["streams"]) <= s["batches"] * s["batch"], s
assert s["fixed_bytes"] >= s["weights_bytes"] + 2 * (s["context_bytes"] + s["batch_io_bytes"]), s
PY
grep -q "refused" "$tmp/eight.err" && fail "eight: a stream was refused: $(grep refused "$tmp/eight.err")"
echo "run: eight streams (mp4, mkv, ts, h264, $hevc, 2 synthetic, rtsp): exact counts, memory back"

# ---- 2. a stream file, with the command line winning over its settings ----
cat >"$tmp/streams.json" <<EOF
{"workers": 1, "batch": 4, "queue": 3, "frames": 25, "jsonl": "$tmp/config.jsonl",
 "streams": [
   {"id": "face", "url": "$tmp/a.mp4"},
   {"id": "mkv", "url": "$tmp/b.mkv", "frames": 0},
   {"id": "raw", "url": "$tmp/d.h264", "frames": 1000},
   {"id": "s12", "url": "synthetic:160x120@25", "frames": 12},
   {"id": "s7", "url": "synthetic:64x48@10", "frames": 7, "budget": "8M"}]}
EOF
run config 0 --config "$tmp/streams.json" --workers 2 --json
w=$([ "$face" -eq 1 ] && echo 320 || echo 160)
h=$([ "$face" -eq 1 ] && echo 240 || echo 120)
check config "{\"face\": {\"frames\": 25, \"w\": $w, \"h\": $h, \"clean\": true},
  \"mkv\": {\"frames\": 25, \"w\": 160, \"h\": 120, \"clean\": true},
  \"raw\": {\"frames\": ${frames[d.h264]}, \"w\": 160, \"h\": 120, \"clean\": true},
  \"s12\": {\"frames\": 12, \"w\": 160, \"h\": 120}, \"s7\": {\"frames\": 7, \"w\": 64, \"h\": 48}}"
python3 - "$tmp/config.out" <<'PY' || fail "config: the file's settings: $(head -c 400 "$tmp/config.out")"
import json, sys
s = json.load(open(sys.argv[1]))["service"]
assert s["workers"] == 2 and s["batch"] == 4, f"workers {s['workers']} (the command line's 2), batch {s['batch']} (the file's 4)"
PY
# A stream file the parser refuses names the member and the stream.
printf '{"streams": [{"url": "synthetic:64x48@10"}, {"url": "x.mp4", "colour": 1}]}' >"$tmp/bad.json"
run badconfig 1 --config "$tmp/bad.json"
grep -q 'stream 1: "colour": is not a stream setting' "$tmp/badconfig.err" ||
  fail "badconfig: the refusal does not name the member: $(cat "$tmp/badconfig.err")"
run noconfig 1 --config "$tmp/none.json"
grep -q "cannot open the stream file $tmp/none.json" "$tmp/noconfig.err" ||
  fail "noconfig: $(cat "$tmp/noconfig.err")"
run nostreams 2
grep -q "no streams" "$tmp/nostreams.err" || fail "nostreams: $(cat "$tmp/nostreams.err")"
echo "run: stream file: per-stream frames, settings, overrides and refusals"

# ---- 3. --streams N: the inputs in turn, new ids for the repeats ----
# With the default queue the two camera streams may fall behind the synthetic ones, which
# are read as fast as they are taken: what they drop is counted, the rest processed.
run repl 0 --streams 5 --frames 30 --json --jsonl "$tmp/repl.jsonl" -i syn=synthetic:96x64@25 -i cam="$cam"
check repl '{"syn": {"frames": 30, "w": 96, "h": 64}, "cam": {"frames": 30, "w": 160, "h": 120, "live": true},
  "syn-2": {"frames": 30, "w": 96, "h": 64}, "cam-2": {"frames": 30, "w": 160, "h": 120, "live": true},
  "syn-3": {"frames": 30, "w": 96, "h": 64}}'
# Without ids: s0, s1, ...
run replauto 0 --streams 3 --frames 5 --json --jsonl "$tmp/replauto.jsonl" -i synthetic:64x48@25
check replauto '{"s0": {"frames": 5, "w": 64, "h": 48}, "s1": {"frames": 5, "w": 64, "h": 48},
  "s2": {"frames": 5, "w": 64, "h": 48}}'
echo "run: --streams replication and live drops counted"

# ---- 4. snapshots: an annotated JPEG per stream every 0.2 s, paced to real time ----
mkdir -p "$tmp/snap"
run snap 0 --workers 2 --realtime --frames 40 --snapshots "$tmp/snap" --every 0.2 --json --jsonl "$tmp/snap.jsonl" \
  -i face="$tmp/a.mp4" -i syn=synthetic:160x120@25
# Paced, both are live: what falls behind is dropped (counted), never waited for.
check snap "{\"face\": {\"frames\": 40, \"w\": $w, \"h\": $h, \"clean\": true, \"live\": true},
  \"syn\": {\"frames\": 40, \"w\": 160, \"h\": 120, \"clean\": true, \"live\": true}}"
python3 - "$tmp/snap" "$tmp/snap.out" "$tmp/snap.jsonl" "$w" "$h" <<'PY' || fail "snapshots (above): $(ls "$tmp/snap" | head)"
import json, os, re, struct, sys
d, summary, jsonl, fw, fh = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
size = {"face": (fw, fh), "syn": (160, 120)}
done = {}
for line in open(jsonl):
    r = json.loads(line)
    done.setdefault(r["stream"], set()).add(r["frame"])
names = sorted(os.listdir(d))
bad, per = [], {}
def jpeg_size(b):
    """The frame size of a baseline or progressive JPEG's SOF marker."""
    i = 2
    while i + 9 < len(b):
        if b[i] != 0xFF:
            return None
        m, n = b[i + 1], struct.unpack(">H", b[i + 2:i + 4])[0]
        if m in (0xC0, 0xC1, 0xC2):
            h, w = struct.unpack(">HH", b[i + 5:i + 9])
            return w, h
        i += 2 + n
    return None
for n in names:
    m = re.fullmatch(r"(.+)-(\d{6})\.jpg", n)
    if not m:
        bad.append(f"unexpected file {n}")
        continue
    sid, frame = m.group(1), int(m.group(2))
    b = open(os.path.join(d, n), "rb").read()
    if b[:2] != b"\xff\xd8" or b[-2:] != b"\xff\xd9" or len(b) < 200:
        bad.append(f"{n}: not a JPEG ({len(b)} bytes, starts {b[:2].hex()}, ends {b[-2:].hex()})")
        continue
    if jpeg_size(b) != size.get(sid):
        bad.append(f"{n}: {jpeg_size(b)}, expected {size.get(sid)}")
    if frame not in done.get(sid, ()):
        bad.append(f"{n}: frame {frame} of {sid} was never processed")
    per[sid] = per.get(sid, 0) + 1
# 40 frames at 25 fps: 1.6 s of each stream, a snapshot due every 0.2 s.
for sid in size:
    if per.get(sid, 0) < 3:
        bad.append(f"{sid}: {per.get(sid, 0)} snapshots, expected at least 3 over 1.6 s")
s = json.load(open(summary))["service"]
if s["snapshots"] != len(names) or s["snapshot_errors"] != 0:
    bad.append(f"summary: {s['snapshots']} snapshots, {s['snapshot_errors']} errors; {len(names)} files")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"run: snapshots: {per}")
PY
# ffprobe reads them as images of the stream's size too.
shots=("$tmp"/snap/face-*.jpg)
one=${shots[0]}
got=$(ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 "$one")
[ "$got" = "mjpeg,$w,$h" ] || fail "ffprobe reads $one as $got, not a ${w}x$h JPEG"
# The table (not --json) ends with the memory line.
run table 0 --frames 5 -i t=synthetic:64x48@25
grep -q '^memory: every stream gave its memory back (0 B live)$' "$tmp/table.out" ||
  fail "table: no memory line: $(cat "$tmp/table.out")"
grep -Eq '^t +ended +5 +5 +0 +0 ' "$tmp/table.out" || fail "table: the stream's row: $(cat "$tmp/table.out")"

echo "run: all checks passed in $(($(date +%s) - started)) s"
