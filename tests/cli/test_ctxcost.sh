#!/usr/bin/env bash
# tests/cli/test_ctxcost.sh VRAMKIT - `vramkit ctxcost` on any machine: usage
# errors exit 2 and say what is wrong; without a GPU (no driver, no device, or
# a build without CUDA) it exits 1 with one line on stderr saying why and prints
# no table; with a GPU it prints the table (every row, the recommendation) and,
# with --json, one object with every figure. Figures themselves are checked on
# the GPU machine by tests/gpu/test_nvml_ctxcost.sh.
set -euo pipefail
vramkit=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Usage errors: exit 2, the command and the offending value named.
usage_case() { # expected-text args...
    local want=$1 rc
    shift
    set +e
    "$vramkit" ctxcost "$@" >"$tmp/use.out" 2>"$tmp/use.err"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "ctxcost $* exited $rc, not 2"
    [ ! -s "$tmp/use.out" ] || fail "ctxcost $* printed to stdout: $(cat "$tmp/use.out")"
    grep -q "vramkit ctxcost: .*$want" "$tmp/use.err" || fail "ctxcost $*: message $(cat "$tmp/use.err")"
}
usage_case '--threads: 0 is outside 1 .. 1024' --threads 0
usage_case '--threads: "x" is not a whole number' --threads x
usage_case '--threads: "-3" is not a whole number' --threads=-3
usage_case '--threads: 2000 is outside 1 .. 1024' --threads 2000
usage_case '--threads needs a value' --threads
usage_case 'unknown option --bogus' --bogus
usage_case 'unknown option --thread (did you mean --threads?)' --thread 4
usage_case 'unexpected argument "extra"' extra
usage_case '--device: "gpu0" is not a whole number' --device gpu0
usage_case 'an empty item' --stack-limits 256,,1024
usage_case '"12x" is not a size' --stack-limits 0,12x

"$vramkit" ctxcost --help >"$tmp/help.out" || fail "--help exited $?"
grep -q "^usage: vramkit ctxcost" "$tmp/help.out" || fail "help: $(cat "$tmp/help.out")"
"$vramkit" --help | grep -q "^  ctxcost " || fail "ctxcost missing from the command list"

# Is there a GPU a CUDA build should see?
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
    gpu=1
fi

set +e
"$vramkit" ctxcost --threads 4 --stack-limits 0,1K >"$tmp/table.out" 2>"$tmp/table.err"
rc=$?
set -e
if [ "$rc" -eq 1 ]; then
    # No GPU to measure: one line naming why, nothing on stdout.
    [ "$(wc -l <"$tmp/table.err")" -eq 1 ] || fail "more than one line on stderr: $(cat "$tmp/table.err")"
    grep -Eq "^vramkit ctxcost: (no CUDA driver: cannot load libcuda\.so\.1|no usable GPU: cuInit failed|no CUDA device|the CUDA driver (is too old|lacks)|no GPU support: vramkit was built without CUDA)" \
        "$tmp/table.err" || fail "no-GPU message: $(cat "$tmp/table.err")"
    [ ! -s "$tmp/table.out" ] || fail "a table without a GPU: $(cat "$tmp/table.out")"
    if [ "$gpu" -eq 1 ] && ! grep -q "built without CUDA" "$tmp/table.err"; then
        fail "nvidia-smi lists a GPU but ctxcost says: $(cat "$tmp/table.err")"
    fi
    set +e
    "$vramkit" ctxcost --json >"$tmp/json.out" 2>"$tmp/json.err"
    rc=$?
    set -e
    [ "$rc" -eq 1 ] && [ ! -s "$tmp/json.out" ] || fail "--json without a GPU: rc $rc $(cat "$tmp/json.out")"
    echo "no GPU: $(cat "$tmp/table.err")"
    echo "1 passed, 0 failed"
    exit 0
fi
[ "$rc" -eq 0 ] || fail "ctxcost exited $rc: $(cat "$tmp/table.err")"

# A GPU: every row of the table and the recommendation.
for row in "^device 0: " "^used memory read with " "^measurement  *MiB$" \
           "^one context (cuCtxCreate, default stack [0-9]* B)  *[0-9.]*$" \
           "^own contexts, 4 threads: total  *[0-9.]*$" \
           "^own contexts, 4 threads: per context  *[0-9.]*$" \
           "^shared context" \
           "^one context at stack limit 0 B (effective [0-9]* B)  *[0-9.]*$" \
           "^one context at stack limit 1024 B (effective [0-9]* B)  *[0-9.]*$" \
           "^recommendation: share one context: 4 threads with their own contexts take "; do
    grep -q "$row" "$tmp/table.out" || fail "no row /$row/ in:
$(cat "$tmp/table.out")"
done

"$vramkit" ctxcost --json --threads 2 --stack-limits 256 >"$tmp/out.json"
python3 - "$tmp/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ["device", "name", "pci_bus_id", "source", "threads", "default_stack_limit_bytes",
          "one_context_bytes", "own", "shared", "stack_limits", "notes", "recommendation"]:
    assert k in r, f"key {k} missing: {r}"
assert r["threads"] == 2 and r["own"]["threads"] == 2, r
assert r["source"] in ("nvml", "cuMemGetInfo"), r["source"]
assert [s["requested_bytes"] for s in r["stack_limits"]] == [256], r["stack_limits"]
assert r["one_context_bytes"] > 0 and r["own"]["total_bytes"] > r["one_context_bytes"], r
if r["shared"] is not None:
    assert 0 < r["shared"]["total_bytes"] < r["own"]["total_bytes"], r
print(f"one context {r['one_context_bytes'] / 2**20:.1f} MiB, 2 own "
      f"{r['own']['total_bytes'] / 2**20:.1f} MiB, source {r['source']}")
PY
echo "1 passed, 0 failed"
