#!/usr/bin/env python3
"""bench/vmm_tradeoff.py - what holding memory close to peak live costs in
driver calls, per trace, for the vmm policy.

Replays each trace on the simulated device (`vramkit replay --json`, which
counts backend calls exactly as on a GPU) with a range of limits (a multiple
of the trace's peak live, up to none), and prints a Markdown table: memory held over peak live, mapping calls per
warm pass (a pool that replayed the trace once), and what those calls cost
per operation at a given cost per call, next to a budget per operation
(e.g. 0.2 x cudaMallocAsync's host ns/op measured on the GPU), and how many
calls a pass that budget leaves room for.

  bench/vmm_tradeoff.py --vramkit build/vramkit --call-us 50 \\
      --budget resnet_dynamic=118 --budget deeplab_dynamic=127 TRACE...

The cost per call and the budgets are inputs: measure them on the GPU
(tests/gpu/run costs replay) and pass them in.
"""
import argparse
import json
import os
import subprocess
import sys

# The pool's limit as a multiple of the trace's peak live bytes, from tight
# to none (0: the device's free memory); no decay, so only the limit gives
# memory back.
SETTINGS = [1.05, 1.1, 1.2, 1.3, 1.5, 0]


def replay(vramkit, trace, ratio):
    env = dict(os.environ, VRAM_DECAY_MS="0")
    out = subprocess.run([vramkit, "replay", trace, "--runs", "3", "--json",
                          "--limit-ratio", str(ratio)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--vramkit", default="build/vramkit")
    ap.add_argument("--call-us", type=float, required=True,
                    help="host µs one mapping or unmapping call costs on the GPU")
    ap.add_argument("--budget", action="append", default=[], metavar="TRACE=NS",
                    help="host ns per operation allowed for the trace (its file name "
                         "without .csv.gz)")
    a = ap.parse_args()
    budgets = {}
    for b in a.budget:
        name, _, ns = b.partition("=")
        budgets[name] = float(ns)
    print("| trace | limit x peak live | held/live | failed | warm calls per pass | events "
          "| host ns/op (sim) | driver ns/op at %.0f µs/call | total ns/op | budget ns/op "
          "| calls the budget allows |" % a.call_us)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for trace in a.traces:
        name = os.path.basename(trace).split(".")[0]
        for ratio in SETTINGS:
            r = replay(a.vramkit, trace, ratio)
            calls = r["warm_backend_calls"]
            driver = calls * a.call_us * 1000 / r["events"]
            host = r["warm_ns_per_op"]
            budget = budgets.get(name)
            allowed = "-"
            if budget:  # calls per pass that fit in what the budget leaves after the host's part
                allowed = "%d" % max(0, (budget - host) * r["events"] / (a.call_us * 1000))
            print("| %s | %s | %.3f | %d | %d | %d | %.0f | %.0f | %.0f | %s | %s |" % (
                name, "%g" % ratio if ratio else "none", r["warm_reserved_ratio"],
                r["failed_allocs"], calls, r["events"], host,
                driver, host + driver, "%.0f" % budget if budget else "-", allowed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
