#!/usr/bin/env bash
# tests/gpu/test_nvml_ctxcost.sh VRAMKIT - on the H200 (driver 580, CUDA 13):
# `vramkit ctxcost --json` reproduces the context costs measured there with a
# standalone probe, each within 5%: 18 threads with their own contexts take
# 9,426 MiB; one context takes 524 MiB at the default 1 KiB stack, 326 MiB at
# 256 B and 1,316 MiB at 4 KiB; and 18 threads sharing one context with a
# stream each stay under 600 MiB. Needs the GPU to itself; not registered
# with CTest (tests/gpu/run runs it).
set -euo pipefail
vramkit=${1:?usage: test_nvml_ctxcost.sh VRAMKIT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$vramkit" ctxcost --json >"$tmp/ctxcost.json" 2>"$tmp/ctxcost.err" || {
    echo "FAIL: vramkit ctxcost exited $?: $(cat "$tmp/ctxcost.err")" >&2
    exit 1
}
python3 - "$tmp/ctxcost.json" <<'PY'
import json, sys

r = json.load(open(sys.argv[1]))
MiB = 1024 * 1024
bad = []

def near(what, got_bytes, want_mib, tol=0.05):
    got = got_bytes / MiB
    ok = abs(got - want_mib) <= tol * want_mib
    print(f"{what:40s} {got:9.1f} MiB  expected {want_mib:7.1f} +-{tol:.0%}  {'ok' if ok else 'FAIL'}")
    if not ok:
        bad.append(f"{what}: {got:.1f} MiB, expected {want_mib} MiB +-{tol:.0%}")

print(f"{r['name']} ({r['pci_bus_id']}), driver {r['driver_version']}, used memory from {r['source']}, "
      f"{r['other_processes']} other process(es)")
for n in r["notes"]:
    print(f"note: {n}")
if r["source"] != "nvml":
    bad.append(f"used memory read from {r['source']}, not NVML")
if r["threads"] != 18:
    bad.append(f"{r['threads']} threads, not the default 18")
near("18 own contexts, total", r["own"]["total_bytes"], 9426)
near("one context, default stack", r["one_context_bytes"], 524)
if r["default_stack_limit_bytes"] != 1024:
    bad.append(f"default stack limit {r['default_stack_limit_bytes']}, expected 1024")
stacks = {s["requested_bytes"]: s for s in r["stack_limits"]}
for req, want in ((1024, 524), (256, 326), (4096, 1316)):
    if req not in stacks:
        bad.append(f"stack limit {req} not measured")
        continue
    near(f"one context, stack {req} B", stacks[req]["context_bytes"], want)
    if stacks[req]["effective_bytes"] != req:
        print(f"  (stack {req} B took effect as {stacks[req]['effective_bytes']} B)")
sh = r["shared"]
if sh is None:
    bad.append("the shared context was not measured")
else:
    total = sh["total_bytes"] / MiB
    ok = 0 < total < 600
    print(f"{'18 threads sharing one context, total':40s} {total:9.1f} MiB  expected < 600 MiB  "
          f"{'ok' if ok else 'FAIL'}   (context {sh['context_bytes'] / MiB:.1f} MiB, "
          f"{sh['per_stream_bytes'] / MiB:.2f} MiB a stream)")
    if not ok:
        bad.append(f"shared total {total:.1f} MiB, expected under 600 MiB")
print(f"recommendation: {r['recommendation']}")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
print("1 passed, 0 failed")
PY
