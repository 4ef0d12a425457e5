#!/usr/bin/env bash
# tests/cli/test_trace.sh VRAMKIT [SANITIZER CC] - `vramkit trace` and
# libvram_preload.so against the stand-in driver (tests/preload: libcuda,
# libnvcuvid and NVML on host memory) and the programs built there, which
# reach the driver linked, through dlopen + dlsym and through
# cuGetProcAddress:
#   - observe: every kind counted with its bytes (pitch x height, arrays as
#     required), nothing live at exit, a planted leak named by its call
#     site, the trace written as it goes (a crash keeps it) and readable by
#     vramkit replay, per-thread cuGetProcAddress still reaching _ptsz,
#     16 threads at once, contexts with their cost and the fix line, NVDEC
#     decoders charged, fork's child on its own files;
#   - limit: the budget refuses as the driver's out of memory, cuMemGetInfo
#     and NVML say the budget; a group shares one budget and gets a
#     SIGKILLed member's bytes back;
#   - pool: cuMemAlloc served by a vramkit pool;
#   - bad use: not found (127), a malformed budget, a static program.
# Under a sanitizer (address or thread) its runtime (found with CC) is
# preloaded first. Skips (exit 0) where the stand-ins were not built.
set -uo pipefail
vramkit=${1:?usage: test_trace.sh VRAMKIT [SANITIZER CC]}
sanitizer=${2:-}
cc=${3:-cc}
build=$(cd "$(dirname "$vramkit")" && pwd)
apps=$build/preload
if [ ! -x "$apps/app_linked" ] || [ ! -e "$build/libvram_preload.so" ]; then
    echo "test_trace: the stand-in driver or libvram_preload.so is not built here: skipped"
    exit 0
fi
unset LD_PRELOAD FAKE_CUDA_TOTAL VRAM_PRELOAD_MODE VRAM_PRELOAD_BUDGET VRAM_PRELOAD_GROUP
# The stand-ins where the library itself looks for NVML (the programs find
# them by their RPATH).
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rt=
if [ -n "$sanitizer" ]; then
    rt=$("$cc" -print-file-name="lib${sanitizer/address/asan}.so")
    [ "$sanitizer" = thread ] && rt=$("$cc" -print-file-name=libtsan.so)
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 TSAN_OPTIONS=halt_on_error=1
fi
# vramkit trace with the sanitizer's runtime preloaded ahead of the library
# (only there: the checks' python3 must not get it).
trace() { LD_PRELOAD=$rt "$vramkit" trace "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# JSON checks: python3 -c CODE FILE, exit 1 with the message on a miss.
check() { # FILE PYTHON-EXPRESSION-LIST (each "expr|message")
    local file=$1
    shift
    python3 - "$file" "$@" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
k = r["kinds"]
for spec in sys.argv[2:]:
    expr, msg = spec.split("|", 1)
    if not eval(expr, {"r": r, "k": k}):
        print("FAIL:", msg, "; report:", json.dumps(r)[:1500])
        sys.exit(1)
PY
}

# ---- observe: every kind, nothing left, the trace ----
trace --report "$tmp/linked.json" --trace "$tmp/linked.csv" -- \
    "$apps/app_linked" 4 >"$tmp/linked.out" 2>"$tmp/linked.err" || fail "app_linked: $(tail -5 "$tmp/linked.err")"
check "$tmp/linked.json" \
    "k['device']['calls'] >= 4 and k['device']['frees'] >= 4|cuMemAlloc x4 counted" \
    "k['pitch']['calls'] == 1 and k['pitch']['peak_bytes'] == 1024*100|the pitched allocation (1000 bytes x 100 rows) as its 1024-byte pitch x height" \
    "k['managed']['calls'] == 1 and k['host']['calls'] >= 1|managed and pinned host memory in their own kinds" \
    "k['async']['calls'] >= 2|cuMemAllocAsync and the pool's allocation" \
    "k['vmm']['calls'] == 1 and k['array']['calls'] == 2|cuMemCreate and two arrays" \
    "k['array']['peak_bytes'] == 256*256*4|the RGBA8 array its size, the deferred-mapping one nothing" \
    "r['charged_bytes_at_exit'] == 0 and r['live_at_exit'] == []|nothing live at exit" \
    "r['peak_bytes'] > 0|a peak"
grep -q "report\|peak" "$tmp/linked.json.txt" || fail "no text report beside the JSON"
allocs=$(grep -c ",allocate," "$tmp/linked.csv")
frees=$(grep -c ",free," "$tmp/linked.csv")
[ "$allocs" -ge 10 ] && [ "$frees" -ge 10 ] || fail "the trace has $allocs allocations and $frees frees"
"$vramkit" replay --runs 1 --json "$tmp/linked.csv" >"$tmp/replay.json" || fail "vramkit replay cannot read the trace"
echo "trace: observe counts every kind; the trace has $allocs allocations and $frees frees and replays"

# A planted leak, named by its call site.
trace --report "$tmp/leak.json" -- "$apps/app_linked" 2 --leak 3145728 \
    >/dev/null 2>"$tmp/leak.err" || fail "app_linked --leak"
check "$tmp/leak.json" \
    "r['charged_bytes_at_exit'] == 3145728|3 MiB held at exit" \
    "any(s['module'].endswith('app_linked') and s['bytes'] == 3145728 and s['offset'].startswith('0x') for s in r['live_at_exit'])|the leak's module and offset"
if command -v addr2line >/dev/null; then
    grep -q "leaky_site" "$tmp/leak.err" || fail "vramkit trace does not name leaky_site: $(cat "$tmp/leak.err")"
fi
echo "trace: a planted leak of 3 MiB is named at leaky_site"

# dlopen + dlsym, and cuGetProcAddress with every flag.
trace --report "$tmp/dl.json" -- "$apps/app_dlopen" --count 8 >/dev/null 2>&1 || fail "app_dlopen"
check "$tmp/dl.json" "k['device']['calls'] == 8 and k['device']['frees'] == 8|dlsym'd cuMemAlloc_v2 lands in the hooks"
trace --report "$tmp/pa.json" -- "$apps/app_procaddr" >"$tmp/pa.out" 2>"$tmp/pa.err" ||
    fail "app_procaddr under the library: $(tail -3 "$tmp/pa.err"; tail -3 "$tmp/pa.out")"
python3 - "$tmp/pa.out" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cases = [l for l in lines if "flags" in l and "alloc_variant" in l]
bad = [c for c in cases if ("PER_THREAD" in str(c["flags"])) != (c["alloc_variant"] == "ptsz")
       or not c.get("ok")]
if not cases or bad:
    print("FAIL: the per-thread flag does not reach _ptsz through the hooks:", bad or lines[:3])
    sys.exit(1)
PY
check "$tmp/pa.json" "k['async']['calls'] >= 12|every cuGetProcAddress pointer counted"
echo "trace: dlsym and cuGetProcAddress (both ABIs, every flag) land in the hooks, _ptsz kept"

# 16 threads at once.
trace --report "$tmp/th.json" -- "$apps/app_threads" --threads 16 --iterations 300 \
    >/dev/null 2>&1 || fail "app_threads"
check "$tmp/th.json" \
    "k['device']['calls'] == 16*300 and k['device']['frees'] == 16*300|16 x 300 allocations and frees" \
    "r['charged_bytes_at_exit'] == 0|nothing left"
echo "trace: 16 threads starting at once, every call counted"

# Contexts: 18 of their own, flagged with the fix; 18 sharing one.
trace --report "$tmp/own.json" -- "$apps/app_contexts" --own 18 >/dev/null 2>&1 || fail "app_contexts --own"
check "$tmp/own.json" \
    "len([c for c in r['contexts'] if not c['primary']]) == 19|19 contexts (the main thread's and 18)" \
    "all(c['cost_bytes'] > 0 for c in r['contexts'] if not c['primary'])|each context's cost measured" \
    "any('share the primary context' in a and '19 contexts' in a for a in r['advice'])|the fix line"
trace --report "$tmp/keep.json" -- "$apps/app_contexts" --own 4 --keep >/dev/null 2>&1 || fail "app_contexts --keep"
check "$tmp/keep.json" \
    "k['device']['calls'] == 4 and k['device']['live_bytes'] == 0 and r['charged_bytes_at_exit'] == 0|allocations freed by their contexts' destruction leave the ledger"
trace --report "$tmp/shared.json" -- "$apps/app_contexts" --shared 18 >/dev/null 2>&1 || fail "app_contexts --shared"
check "$tmp/shared.json" "len(r['contexts']) == 1 and r['advice'] == []|one primary context, no advice"
grep -h "share the primary" "$tmp/own.json.txt"
echo "trace: 19 contexts flagged with their cost and the fix; 18 threads sharing the primary one, one"

# NVDEC decoders, NVML.
trace --report "$tmp/nv.json" -- "$apps/app_nvdec" >/dev/null 2>&1 || fail "app_nvdec"
check "$tmp/nv.json" "k['decoder']['calls'] == 2 and k['decoder']['live_count'] == 1 and k['decoder']['live_bytes'] > 0|two decoders charged, one live"
echo "trace: NVDEC decoders charged their measured memory"

# fork: the child's own report and trace.
trace --report "$tmp/fork.json" --trace "$tmp/fork.csv" -- "$apps/app_fork" \
    >"$tmp/fork.out" 2>/dev/null || fail "app_fork"
child=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "parent" in l][0]["pid"])' "$tmp/fork.out" 2>/dev/null)
[ -n "$child" ] && [ -s "$tmp/fork.csv.$child" ] || fail "no trace of the fork's child ($child): $(ls "$tmp")"
check "$tmp/fork.json" "k['device']['calls'] >= 1 and r['charged_bytes_at_exit'] == 0|the parent's own counts"
echo "trace: fork's child writes its own trace ($tmp/fork.csv.$child)"

# A crash keeps the trace written so far.
trace --trace "$tmp/crash.csv" -- "$apps/app_crash" >/dev/null 2>"$tmp/crash.err"
rc=$?
[ $rc -ge 128 ] || fail "app_crash: status $rc"
grep -q "ended by signal" "$tmp/crash.err" || fail "no word of the signal: $(cat "$tmp/crash.err")"
[ "$(grep -c ",allocate," "$tmp/crash.csv")" -eq 3 ] || fail "the crash's trace lost lines: $(cat "$tmp/crash.csv")"
echo "trace: a crash (status $rc) keeps its trace of 3 allocations"

# ---- limit ----
FAKE_CUDA_TOTAL=$((1 << 30)) trace --mode limit --budget 64M --report "$tmp/oom.json" -- \
    "$apps/app_oom" >"$tmp/oom.out" 2>/dev/null || fail "app_oom under a budget: $(cat "$tmp/oom.out")"
python3 - "$tmp/oom.out" <<'PY' || exit 1
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
if d.get("allocated_blocks") != 64 or d.get("error") != "CUDA_ERROR_OUT_OF_MEMORY" or d.get("total") != 64 << 20:
    print("FAIL: 64 MiB of budget did not give 64 blocks of 1 MiB then CUDA_ERROR_OUT_OF_MEMORY:", d)
    sys.exit(1)
PY
check "$tmp/oom.json" "k['device']['failures'] >= 1 and r['budget_bytes'] == 64 << 20|the refusal counted"
trace --mode limit --budget 256M -- "$apps/app_nvml" >"$tmp/nvml.out" 2>/dev/null || fail "app_nvml"
python3 - "$tmp/nvml.out" <<'PY' || exit 1
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
s = json.dumps(d)
totals = [v for key, v in d.items() if "total" in key] + \
         [v.get("total") for v in d.values() if isinstance(v, dict) and "total" in v]
if not totals or any(t != 256 << 20 for t in totals):
    print("FAIL: NVML and cuMemGetInfo do not report the 256 MiB budget as the total:", s)
    sys.exit(1)
PY
echo "trace: limit refuses at the budget as CUDA_ERROR_OUT_OF_MEMORY; NVML and cuMemGetInfo say the budget"

# A group: two processes share 96 MiB; one is killed, its bytes come back.
group=vt$$
trace --mode limit --budget 96M --group "$group" -q -- "$apps/app_dlopen" --count 1 \
    --size $((64 << 20)) --budget-probe 1 --hold 30 >"$tmp/g1.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q holding "$tmp/g1.out" 2>/dev/null && break; sleep 0.1; done
grep -q holding "$tmp/g1.out" || { kill -9 $holder; fail "the first member never held its 64 MiB: $(cat "$tmp/g1.out")"; }
trace --mode limit --budget 96M --group "$group" -q -- "$apps/app_dlopen" --count 0 \
    --budget-probe $((48 << 20)) >"$tmp/g2.out" 2>&1
grep -q OUT_OF_MEMORY "$tmp/g2.out" || { kill -9 $holder; fail "48 MiB more fitted in a group of 96 MiB holding 64: $(cat "$tmp/g2.out")"; }
app_pid=$(sed -n 's/.*holding .* pid \([0-9]*\).*/\1/p' "$tmp/g1.out")
kill -9 "$app_pid" # the member itself, holding its bytes
wait $holder 2>/dev/null
trace --mode limit --budget 96M --group "$group" -q -- "$apps/app_dlopen" --count 0 \
    --budget-probe $((48 << 20)) >"$tmp/g3.out" 2>&1
grep -q '"CUDA_SUCCESS"' "$tmp/g3.out" || fail "the killed member's 64 MiB did not come back: $(cat "$tmp/g3.out")"
rm -f "/dev/shm/vramkit-group-$group"
echo "trace: a group of two shares 96 MiB; SIGKILL gives the holder's bytes back"

# ---- pool ----
if trace --mode pool --report "$tmp/pool.json" -- "$apps/app_dlopen" --count 8 \
    >/dev/null 2>"$tmp/pool.err"; then
    check "$tmp/pool.json" "'allocations' in r['pool'] and k['device']['calls'] == 8|the pool served cuMemAlloc"
    echo "trace: pool mode serves cuMemAlloc ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pool"])' "$tmp/pool.json"))"
elif grep -q "built without the CUDA toolkit" "$tmp/pool.err"; then
    # A build without the toolkit (the sanitizer builds) has no vmm backend:
    # the library says so and cuMemAlloc fails as out of memory.
    echo "trace: pool mode refused in a build without CUDA, with the sentence"
else
    fail "pool mode: $(tail -3 "$tmp/pool.err")"
fi

# ---- bad use ----
trace -- "$tmp/no-such-program" 2>"$tmp/nf.err"
[ $? -eq 127 ] && grep -q "no-such-program: not found" "$tmp/nf.err" || fail "a missing program: $(cat "$tmp/nf.err")"
trace --mode limit --budget lots -- /bin/true 2>"$tmp/bb.err"
[ $? -eq 2 ] && grep -q "lots" "$tmp/bb.err" || fail "a malformed budget: $(cat "$tmp/bb.err")"
if [ -z "$sanitizer" ]; then # an uninstrumented /bin/true cannot carry a sanitizer's library
    VRAM_PRELOAD_MODE=limit VRAM_PRELOAD_BUDGET=lots LD_PRELOAD="$build/libvram_preload.so" \
        /bin/true 2>"$tmp/lb.err"
    [ $? -eq 125 ] && grep -q '"lots" is not a size' "$tmp/lb.err" ||
        fail "the library took a malformed budget: $(cat "$tmp/lb.err")"
fi
if printf 'int main(void){return 0;}\n' | "$cc" -static -x c - -o "$tmp/static_app" 2>/dev/null; then
    trace -- "$tmp/static_app" 2>"$tmp/st.err"
    [ $? -eq 2 ] && grep -q "linked statically" "$tmp/st.err" || fail "a static program: $(cat "$tmp/st.err")"
fi
echo "trace: a missing program (127), a malformed budget and a static program are refused with a sentence"
echo "PASS: vramkit trace"
