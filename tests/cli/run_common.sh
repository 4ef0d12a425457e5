# tests/cli/run_common.sh - what the `vramkit run` test scripts share
# (test_run.sh, test_run_faults.sh, test_run_api.sh, test_run_gpus.sh),
# sourced after they set $vramkit: fail, killing and reaping a background
# process, the port a `vramkit run --listen 127.0.0.1:0` serves on, the
# programs a script needs, the RTSP server on loopback ($cport, $sport,
# $rtp chosen by the script) and waiting for a port, and the default model (beside the binary, else
# the source tree's build/models; scripts/models.sh makes it).
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
fail() { echo "FAIL: $*" >&2; exit 1; }
stop_pid() { # kill and reap a background process of ours
  local pid=$1
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
need() { # PROGRAM...: each on PATH, or the test fails naming it
  local prog
  for prog in "$@"; do
    command -v "$prog" >/dev/null || fail "$prog not found: scripts/deps.sh installs it"
  done
}
if [ -z "${VRAM_MODEL_DIR:-}" ] && [ ! -f "$(dirname "$vramkit")/models/blazeface_back.onnx" ]; then
  export VRAM_MODEL_DIR=$src/build/models
fi
if [ -n "${VRAM_MODEL_DIR:-}" ] && [ ! -f "$VRAM_MODEL_DIR/blazeface_back.onnx" ]; then
  fail "no model in $VRAM_MODEL_DIR: scripts/models.sh makes it (make models)"
fi
export VRAM_LOG_LEVEL=${VRAM_LOG_LEVEL:-warn}

# rtsp_server: the packaged rtsp-server-perl on our ports. When a connection closes while
# nothing is mounted, its housekeeping sets the next RTP port back to the package's
# $RTP_START_PORT (20000, where another server may be, and not the port asked for): that
# is set to our range too. Run in the background (it execs, so that $! is the server).
rtsp_server() {
  exec perl -e 'require RTSP::Server; $RTSP::Server::RTP_START_PORT = shift @ARGV;
           my $script = shift @ARGV; do $script; die $@ if $@;' \
    "$rtp" "$(command -v rtsp-server-perl)" --clientport "$cport" --serverport "$sport" \
    --rtp_start_port "$rtp"
}
# wait_port PORT [udp]: until something listens on the TCP port, or has the UDP port bound
# (10 s), read from /proc/net.
wait_port() {
  python3 - "$1" "${2:-tcp}" <<'PY' || return 1
import sys, time
want, proto = ":%04X" % int(sys.argv[1]), sys.argv[2]
end = time.time() + 10
while time.time() < end:
    for table in (f"/proc/net/{proto}", f"/proc/net/{proto}6"):
        try:
            rows = [r.split() for r in open(table).read().splitlines()[1:]]
        except OSError:
            continue
        if any(r[1].endswith(want) and (proto == "udp" or r[3] == "0A") for r in rows):
            sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
}

# serving_port PID ERRFILE: the port `vramkit run --listen 127.0.0.1:0` (process PID, its
# stderr in ERRFILE) says it serves on, once it says so (20 s), or the test fails.
serving_port() {
  local p=
  for _ in $(seq 200); do
    p=$(sed -n 's|^run: serving http://127\.0\.0\.1:\([0-9]*\)/ .*|\1|p' "$2")
    [ -n "$p" ] && break
    [ -e "/proc/$1" ] || break
    sleep 0.1
  done
  [ -n "$p" ] || fail "no serving line: $(cat "$2")"
  echo "$p"
}
