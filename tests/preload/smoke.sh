#!/usr/bin/env bash
# tests/preload/smoke.sh - every program of tests/preload against the
# stand-in driver libraries alone (no preload library): each must exit as
# it should and print JSON whose numbers are what the stand-ins' memory
# model gives (80 GiB device, 326 MiB a context, decoders of surfaces x
# 3 MiB + 8 MiB, pools and VMM charged as documented in fake_cuda*.c).
# The programs find the stand-ins through their RUNPATH: LD_LIBRARY_PATH
# and LD_PRELOAD are cleared.
#
#   smoke.sh APP_DIR FAKE_DIR
#
# VRAM_FAKE_NVDEC=OFF skips app_nvdec (built only with ffnvcodec's headers);
# VRAM_FAKE_SANITIZER (asan, tsan) says the programs run under a sanitizer.
set -u
apps=${1:?usage: smoke.sh APP_DIR FAKE_DIR}
fake=${2:?usage: smoke.sh APP_DIR FAKE_DIR}
unset LD_LIBRARY_PATH LD_PRELOAD FAKE_CUDA_TOTAL FAKE_CUDA_CTX_BYTES FAKE_CUDA_PROC_TRAMPOLINES
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

for lib in libcuda.so.1 libcuda.so libnvidia-ml.so.1; do
  [ -e "$fake/$lib" ] || { echo "FAIL: $fake/$lib is missing"; exit 1; }
done

# run NAME WANT_RC CHECK -- COMMAND...: run it, then the Python CHECK on
# its stdout lines (parsed as JSON, in `lines`, the last in `j`).
run() {
  local name=$1 want=$2 check=$3
  shift 4
  # A shell of its own, so that a death by signal is told in its stderr.
  bash -c '"$@"; exit $?' run "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $name: exit status $rc, not $want"
    sed 's/^/  stderr: /' "$tmp/err" | tail -20
    sed 's/^/  stdout: /' "$tmp/out" | tail -5
    failed=$((failed + 1))
    return
  fi
  if ! python3 - "$tmp/out" "$check" <<'EOF' >"$tmp/why" 2>&1; then
import json, sys
MiB = 1 << 20
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert lines, "no JSON line"
j = lines[-1]
exec(sys.argv[2])
EOF
    echo "FAIL: $name: $(tail -1 "$tmp/why")"
    sed 's/^/  stdout: /' "$tmp/out" | tail -5
    failed=$((failed + 1))
    return
  fi
  echo "ok: $name"
  passed=$((passed + 1))
}

CTX=$((326 << 20))
TOTAL=$((80 << 30))

run linked 0 "
t = $TOTAL; ctx = $CTX
assert j['total'] == t and j['free_before'] == t - ctx, j
assert j['pitch'] == 1024 and j['pitch_bytes'] == 102400
assert j['array_requirements'] == 'CUDA_ERROR_INVALID_VALUE', 'a plain array has no requirements'
assert j['deferred_array_bytes'] == j['array_bytes'] == 256 * 1024
held = (j['device_bytes'] + j['pitch_bytes'] + j['managed_bytes'] + j['async_bytes']
        + j['pool_bytes'] + j['vmm_bytes'] + j['array_bytes'] + j['leak_bytes'])
assert j['free_before'] - j['free_peak'] == held, ('peak', j['free_before'] - j['free_peak'], held)
assert j['free_before'] - j['free_after'] == j['leak_bytes'] == 3 * MiB, 'only the leak stays'
assert j['api'] == 'legacy'
" -- "$apps/app_linked" 5 --leak 3145728

run linked_ptds 0 "
assert j['api'] == 'ptds' and j['free_after'] == j['free_before'] and j['leak_bytes'] == 0
" -- "$apps/app_linked_ptds"

run dlopen 0 "
assert j['free_before'] - j['free_peak'] == j['allocated'] == 8 * MiB
assert j['free_after'] == j['free_before']
assert j['probe_result'] == 'CUDA_ERROR_OUT_OF_MEMORY' and j['probe_code'] == 2
" -- "$apps/app_dlopen" --budget-probe 100G

run dlopen_probe_fits 0 "
assert j['probe_result'] == 'CUDA_SUCCESS' and j['probe_code'] == 0
assert j['free_before'] - j['free_peak'] == 3 * 4096
" -- "$apps/app_dlopen" --count 3 --size 4K --budget-probe 1G

run procaddr 0 "
assert j['failures'] == 0 and j['cases'] == 30, j
alloc = [l for l in lines if l.get('case') == 'alloc']
assert len(alloc) == 12 and all(l['ok'] and l['same_as_dlsym'] for l in alloc)
for l in alloc:
    want = 'ptsz' if l['flags'] == 'PER_THREAD_DEFAULT_STREAM' else 'legacy'
    assert l['alloc_variant'] == l['free_variant'] == want, l
    assert l['alloc_call'] == l['expect'] == l['symbol'], l
" -- "$apps/app_procaddr"

run procaddr_trampolines 0 "
alloc = [l for l in lines if l.get('case') == 'alloc']
assert j['failures'] == 0 and not any(l['same_as_dlsym'] for l in alloc), 'pointers are not dlsym ones'
assert all(l['alloc_call'] == l['expect'] for l in alloc)
" -- env FAKE_CUDA_PROC_TRAMPOLINES=1 "$apps/app_procaddr" --any-pointer

# Under a sanitizer every block's shadow is written: fewer rounds.
rounds=1000
[ -n "${VRAM_FAKE_SANITIZER:-}" ] && rounds=100
run threads 0 "
assert j['threads'] == 16 and j['iterations'] == $rounds and j['failures'] == 0
assert j['calls'] == 16 * (9 + 3 + 6 * $rounds + 1), j['calls']
" -- "$apps/app_threads" --iterations "$rounds"

for v in v2 v3 v4; do
  run "contexts_own_$v" 0 "
assert j['mode'] == 'own' and j['create'] == 'cuCtxCreate_$v' and j['failures'] == 0
assert j['per_thread_bytes'] == $CTX + MiB, j['per_thread_bytes']
assert j['free_after'] == j['free_before'] and j['free_before'] == $TOTAL - $CTX
" -- "$apps/app_contexts" --own 4 --create "$v"
done

run contexts_shared 0 "
assert j['mode'] == 'shared' and j['failures'] == 0 and j['per_thread_bytes'] == MiB
assert j['free_before'] - j['free_all_live'] == 8 * MiB and j['free_after'] == j['free_before']
" -- "$apps/app_contexts" --shared 8

run contexts_cost_knob 0 "
assert j['per_thread_bytes'] == 100 * MiB + MiB, j
" -- env FAKE_CUDA_CTX_BYTES=100M "$apps/app_contexts" --own 2

run fork 0 "
child = [l for l in lines if l['role'] == 'child'][0]
parent = [l for l in lines if l['role'] == 'parent'][0]
assert child['pid'] != parent['pid'] and child['parent'] == parent['pid'] == j['pid']
assert parent['child'] == child['pid'] and parent['child_status'] == 0
t = $TOTAL; ctx = $CTX
assert parent['free_while_allocated'] == t - ctx - 4 * MiB and parent['free_after'] == t - ctx
assert child['free_while_allocated'] == t - ctx - 2 * MiB, 'the child starts with a device of its own'
assert child['free_after'] == t - ctx
" -- "$apps/app_fork"

if [ "${VRAM_FAKE_NVDEC:-ON}" != OFF ]; then
  run nvdec 0 "
assert j['decoder_bytes'] == [68 * MiB, 32 * MiB], j['decoder_bytes']
assert j['free_before'] - j['free_one'] == 32 * MiB
" -- "$apps/app_nvdec"
fi

run nvml 0 "
n, n2, c = j['nvml'], j['nvml_v2'], j['cuda']
assert n['total'] == n2['total'] == c['total'] == $TOTAL
assert n['free'] == n2['free'] == c['free'] and n['used'] == n['total'] - n['free']
assert n['used'] == $CTX + j['allocated'] and n2['reserved'] == 0
assert j['processes'] == 1 and j['process_used'] == n['used']
" -- "$apps/app_nvml"

run crash 134 "
assert j['live'] == 2 * MiB and j['signal'] == 6
" -- "$apps/app_crash"

run oom 0 "
assert j['error'] == 'CUDA_ERROR_OUT_OF_MEMORY' and j['code'] == 2
assert j['allocated_blocks'] == (1024 - 326), j['allocated_blocks']
assert j['free_at_oom'] == 0 and j['free_after'] == j['free_before'] == (1024 - 326) * MiB
" -- env FAKE_CUDA_TOTAL=1G "$apps/app_oom"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
