#!/usr/bin/env python3
"""tests/gpu/summarize.py OUT - turn the files tests/gpu/run wrote into one
Markdown page: the machine, the replay of each trace on real device memory
against cudaMallocAsync and cudaMalloc (with the acceptance checks), the vmm
chunk/retention sweep, ctxcost, the driver's call costs and the PyTorch
workloads. Checks print PASS or FAIL; nothing is typed in by hand."""
import json
import os
import sys

out = sys.argv[1]


def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else None


def jsonl(name):
    text = read(name)
    return [json.loads(l) for l in text.splitlines() if l.strip()] if text else []


MiB = 1024.0 * 1024.0
print("# GPU results\n")
m = read("machine.txt")
if m:
    print("```\n" + m.strip() + "\n```\n")

ctest = read("ctest.log")
san = read("sanitizer_summary.txt")
if ctest or san:
    print("## Tests and compute-sanitizer\n")
    for line in (ctest or "").splitlines():
        if "tests passed" in line or "***" in line or "Failed" in line:
            print("- ctest (CPU and GPU tests): " + line.strip())
    for line in (san or "").splitlines():
        if line.strip():
            print("- " + line.strip())
    print()

def allocator(r):
    """backend/policy or the driver's allocator (files before 0.2 called it policy)"""
    return r.get("allocator", r.get("policy"))


rows = jsonl("replay_gpu.jsonl")
if rows:
    print("## Trace replay on real device memory\n")
    print("Host ns per operation: `cold` replays on a fresh pool (growth included), `warm` on")
    print("a pool that replayed the trace once before; median of the runs. `held` is the")
    print("allocator's own peak (vramkit: mapped bytes; cudaMallocAsync: the pool's reserved")
    print("high-water mark; cudaMalloc: bytes the driver reports in use); `drv` is the most")
    print("device memory in use by cuMemGetInfo, sampled after every allocation.\n")
    print("| trace | allocator | live MiB | held MiB | held/live | drv/live | backend calls | cold ns/op | warm ns/op |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %.1f | %.1f | %.3f | %.3f | %s | %.0f | %.0f |" % (
            os.path.basename(r["trace"]).replace(".csv.gz", ""), allocator(r),
            r["peak_live_bytes"] / MiB, r["peak_reserved_bytes"] / MiB, r["reserved_ratio"],
            r.get("driver_ratio", 0), r.get("backend_calls", ""), r["ns_per_op"],
            r.get("warm_ns_per_op", 0)))
    print("\n### Checks (vmm, traces of ../shared/data/traces)\n")
    shared = {"decoder_kv", "deeplab_dynamic", "resnet_dynamic", "retinanet_multistream4"}
    by = {}
    for r in rows:
        by.setdefault(os.path.basename(r["trace"]).replace(".csv.gz", ""), {})[allocator(r)] = r
    npass = nall = 0
    for t in sorted(by):
        v, a = by[t].get("vmm/vmm"), by[t].get("cudaMallocAsync")
        if not v or not a:
            continue
        checks = [("held <= 1.05 x live", v["reserved_ratio"], 1.05, v["reserved_ratio"] <= 1.05),
                  ("cold ns/op <= 0.2 x cudaMallocAsync", v["ns_per_op"] / a["ns_per_op"], 0.2,
                   v["ns_per_op"] <= 0.2 * a["ns_per_op"]),
                  ("warm ns/op <= 0.2 x cudaMallocAsync warm",
                   v["warm_ns_per_op"] / a["warm_ns_per_op"], 0.2,
                   v["warm_ns_per_op"] <= 0.2 * a["warm_ns_per_op"])]
        for name, val, lim, ok in checks:
            tag = "PASS" if ok else "FAIL"
            if t in shared:
                nall += 1
                npass += ok
            print("- %s %s: %s = %.3f (limit %.2f)%s" % (tag, t, name, val, lim,
                                                        "" if t in shared else " (own trace)"))
    print("\n%d of %d checks on the shared traces pass.\n" % (npass, nall))

sweep = jsonl("sweep.jsonl")
if sweep:
    print("## vmm: huge blocks, retention and headroom (one run each)\n")
    print("`warm calls` are backend calls per pass on a pool that replayed the trace before;")
    print("`warm held` is that pool's peak over its life, over peak live.\n")
    print("| trace | huge size | map chunk | retain ratio | headroom | held/live | backend calls | cold ns/op | warm calls | warm held | warm ns/op |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sweep:
        print("| %s | %s | %s | %s | %s | %.3f | %d | %.0f | %.0f | %.3f | %.0f |" % (
            os.path.basename(r["trace"]).replace(".csv.gz", ""), r.get("huge_size", ""), r["map_chunk"],
            r["retain_ratio"], r.get("headroom", 0), r["reserved_ratio"], r["backend_calls"],
            r["ns_per_op"], r.get("warm_backend_calls", 0), r.get("warm_reserved_ratio", 0),
            r["warm_ns_per_op"]))
    print()

c = read("ctxcost.json")
if c:
    try:
        d = json.loads(c)
        print("## Contexts (`vramkit ctxcost --json`)\n")
        own, sh = d.get("own", {}), d.get("shared", {})
        print("- %d threads, own context each: %.0f MiB (%.1f MiB per context)" % (
            d["threads"], own.get("total_bytes", 0) / MiB, own.get("per_context_bytes", 0) / MiB))
        if sh:
            print("- %d threads sharing one context: %.0f MiB (%.2f MiB per stream)" % (
                d["threads"], sh["total_bytes"] / MiB, sh["per_stream_bytes"] / MiB))
        for s in d.get("stack_limits", []):
            print("- stack limit %d B (effective %d): %.1f MiB per context" % (
                s["requested_bytes"], s["effective_bytes"], s["context_bytes"] / MiB))
        print("- " + d.get("recommendation", ""))
        for n in d.get("notes", []):
            print("- note: " + n)
        want = [("18 own contexts", own.get("total_bytes", 0) / MiB, 9426)]
        for s in d.get("stack_limits", []):
            ref = {256: 326, 1024: 524, 4096: 1316}.get(s["requested_bytes"])
            if ref:
                want.append(("context at stack %d B" % s["requested_bytes"], s["context_bytes"] / MiB, ref))
        print()
        for name, got, ref in want:
            ok = abs(got - ref) <= 0.05 * ref
            print("- %s %s: %.0f MiB against %d (within 5%%)" % ("PASS" if ok else "FAIL", name, got, ref))
        if sh:
            ok = sh["total_bytes"] / MiB <= 600
            print("- %s shared by %d threads: %.0f MiB (the measured 534)" % (
                "PASS" if ok else "FAIL", d["threads"], sh["total_bytes"] / MiB))
        print()
    except (ValueError, KeyError) as e:
        print("ctxcost output unreadable: %s\n" % e)

costs = read("driver_costs.md")
if costs:
    print("## Driver call costs\n")
    print(costs.replace("# Driver call costs", "Driver call costs", 1))
for name, title in (
        ("torch.md", "PyTorch under vramkit (its PyTorch defaults: headroom 0.08, retention 1)"),
        ("torch_headroom.md", "PyTorch under vramkit with VRAM_HEADROOM=0.08 VRAM_RETAIN_RATIO=1"),
        ("torch_plain.md", "PyTorch under vramkit with the plain pool defaults "
                           "(VRAM_HEADROOM=0 VRAM_RETAIN_RATIO=0.25)"),
        ("torch_segments.md", "PyTorch under vramkit's segments policy on cuda "
                              "(VRAM_BACKEND=cuda VRAM_POLICY=segments): few driver calls in the loop"),
        ("torch_keepall.md", "PyTorch under vramkit's vmm policy keeping every mapping "
                             "(VRAM_HEADROOM=10 VRAM_RETAIN_RATIO=10)")):
    text = read(name)
    if text:
        print("## %s\n" % title)
        print(text)
stack = jsonl("stack.jsonl")
if stack:
    print("## The stack the workloads' kernels need\n")
    print("The shared context started at VRAM_STACK_LIMIT=0; the driver raises the limit when a")
    print("kernel needs more. After each workload under vramkit:\n")
    for d in stack:
        print("- %s: stack limit %s B" % (d.get("workload"), d.get("stack_limit_bytes")))
    print()
engine = read("engine/summary.md")
if engine:
    print("## The engine's cuda executor (tests/gpu/engine_stage.sh)\n")
    print(engine)
    for name, title in (("engine/plans.txt", "How the convolutions were planned"),
                        ("engine/sweep_resnet50.txt", "Workspace sweep, ResNet-50")):
        text = read(name)
        if text:
            print("### %s\n\n```\n%s\n```\n" % (title, text.strip()))
service = read("service/summary.md")
if service:
    print(service)
