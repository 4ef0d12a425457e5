# tests/cli/run_common.sh - what the `vramkit run` test scripts share
# (test_run.sh, test_run_faults.sh, test_run_api.sh), sourced after they
# set $vramkit: fail, killing and reaping a background process, the
# programs a script needs, and the default model (beside the binary, else
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
