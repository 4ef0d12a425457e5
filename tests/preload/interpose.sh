#!/usr/bin/env bash
# tests/preload/interpose.sh - the stand-in driver under symbol
# interposition behaves as libcuda does, which is what a preload library
# is built against: with libinterpose_probe.so (interpose_probe.c)
# preloaded,
#   - the calls a program linked with -lcuda makes by name pass through
#     the interposer exactly once each (the probe's count equals the
#     driver's: the driver never calls its own exported names), for the
#     legacy stream functions and, built for per-thread default streams,
#     for the _ptsz ones;
#   - the pointers cuGetProcAddress hands out, and dlsym on the driver's
#     handle, bypass the interposer (its counts stay 0 while the driver's
#     grow), and are the same pointers (app_procaddr);
#   - with FAKE_CUDA_PROC_TRAMPOLINES=1 cuGetProcAddress hands out pointers
#     dlsym never gives, and the functions behind them are still the right
#     ones.
#
#   interpose.sh APP_DIR FAKE_DIR [SANITIZER CC]
#
# Under a sanitizer (asan, tsan) its runtime, found with CC, is preloaded
# before the probe, as it must come first.
set -u
apps=${1:?usage: interpose.sh APP_DIR FAKE_DIR [SANITIZER CC]}
fake=${2:?usage: interpose.sh APP_DIR FAKE_DIR [SANITIZER CC]}
sanitizer=${3:-}
cc=${4:-cc}
unset LD_LIBRARY_PATH LD_PRELOAD FAKE_CUDA_TOTAL FAKE_CUDA_CTX_BYTES FAKE_CUDA_PROC_TRAMPOLINES
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -e "$fake/libcuda.so.1" ] || { echo "FAIL: no $fake/libcuda.so.1"; exit 1; }

preload=$apps/libinterpose_probe.so
if [ -n "$sanitizer" ]; then
  rt=$("$cc" -print-file-name="lib$sanitizer.so")
  [ -e "$rt" ] || { echo "FAIL: no lib$sanitizer.so for $cc"; exit 1; }
  preload=$rt:$preload
fi
passed=0
failed=0

# probe NAME WANT_RC CHECK -- COMMAND...: run it with the probe preloaded;
# CHECK (Python) sees `probe` ({name: [probe's calls, driver's calls]}) and
# `lines`, the JSON lines of its stdout.
probe() {
  local name=$1 want=$2 check=$3
  shift 4
  env LD_PRELOAD="$preload" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $name: exit status $rc, not $want"
    sed 's/^/  stderr: /' "$tmp/err" | tail -20
    failed=$((failed + 1))
    return
  fi
  if ! python3 - "$tmp/out" "$tmp/err" "$check" <<'EOF' >"$tmp/why" 2>&1; then
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
found = [l for l in open(sys.argv[2]) if l.startswith('interpose_probe: ')]
assert found, 'the probe did not report'
probe = json.loads(found[-1][len('interpose_probe: '):])
exec(sys.argv[3])
EOF
    echo "FAIL: $name: $(tail -1 "$tmp/why")"
    grep '^interpose_probe' "$tmp/err" | sed 's/^/  /'
    failed=$((failed + 1))
    return
  fi
  echo "ok: $name"
  passed=$((passed + 1))
}

probe linked 0 "
assert probe['cuMemAlloc_v2'] == [4, 4], probe   # 3 blocks and the leak
assert probe['cuMemFree_v2'] == [5, 5], probe    # the blocks, managed and pitched memory
assert probe['cuMemAllocAsync'] == [1, 1] and probe['cuMemFreeAsync'] == [2, 2], probe
assert probe['cuMemAllocAsync_ptsz'] == [0, 0], probe
" -- "$apps/app_linked" 3 --leak 4096

probe linked_ptds 0 "
assert probe['cuMemAllocAsync_ptsz'] == [1, 1] and probe['cuMemFreeAsync_ptsz'] == [2, 2], probe
assert probe['cuMemAllocAsync'] == [0, 0] and probe['cuMemAlloc_v2'] == [3, 3], probe
" -- "$apps/app_linked_ptds" 3

probe procaddr 0 "
assert lines[-1]['failures'] == 0, 'pointers are dlsym ones, the driver own'
for name in ('cuMemAllocAsync', 'cuMemAllocAsync_ptsz', 'cuMemFreeAsync', 'cuMemFreeAsync_ptsz'):
    assert probe[name][0] == 0 and probe[name][1] > 0, (name, probe[name])
" -- "$apps/app_procaddr"

probe dlopen 0 "
assert probe['cuMemAlloc_v2'] == [0, 8] and probe['cuMemFree_v2'] == [0, 8], probe
" -- "$apps/app_dlopen"

probe trampolines_not_dlsym 1 "
alloc = [l for l in lines if l.get('case') == 'alloc']
assert alloc and not any(l['same_as_dlsym'] for l in alloc)
" -- env FAKE_CUDA_PROC_TRAMPOLINES=1 "$apps/app_procaddr"

probe trampolines_right_functions 0 "
assert lines[-1]['failures'] == 0
assert probe['cuMemAllocAsync_ptsz'][0] == 0 and probe['cuMemAllocAsync_ptsz'][1] == 4, probe
" -- env FAKE_CUDA_PROC_TRAMPOLINES=1 "$apps/app_procaddr" --any-pointer

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
