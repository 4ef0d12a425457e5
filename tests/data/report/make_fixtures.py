#!/usr/bin/env python3
"""tests/data/report/make_fixtures.py - writes the report's test inputs in
the formats of the observe contract, next to this file:

  series.jsonl  three minutes of samples of pool "inference" (1 s apart) with
                interleaved alerts, as the monitor's JSON Lines
  series.csv    the same samples as the monitor's CSV (with pending_bytes;
                the CSV of versions before it lacked that column)
  oom.json      the OOM report of the refusal that ends them

snapshot.json is vram_pool_snapshot's own output, written by the unit test:
  VRAM_REPORT_FIXTURE=tests/data/report/snapshot.json build/test_report

The workload: a model's weights, three cameras whose activations and frames
come and go, one of them (cam03) leaking until its budget refuses it, and an
owner whose name is markup (owner names come from users; the page must show
it as text). Deterministic: run it again and the files are the same.
"""
import csv
import io
import json
import math
import os

MiB = 1 << 20
GiB = 1 << 30
HOSTILE = '<img src=x onerror="window.__pwned=1">&amp; \u00e9'
T0 = 1764456000.0  # 2025-11-29 22:40:00 UTC
N = 180
BUDGET = 128 * MiB
here = os.path.dirname(os.path.abspath(__file__))


def owners_at(i):
    """Live bytes per owner at sample i (the hostile owner from sample 30)."""
    o = {
        "model:resnet50": 102_135_808,
        "cam01": int(40 * MiB + 12 * MiB * math.sin(i / 7.0) ** 2),
        "cam02": int(48 * MiB + 10 * MiB * math.cos(i / 5.0) ** 2),
        "cam03": int(30 * MiB + i * 0.5 * MiB),
    }
    if i >= 30:
        o[HOSTILE] = 2 * MiB
    return o


def sample(i):
    owners = owners_at(i)
    live = sum(owners.values())
    weights = owners["model:resnet50"]
    rest = live - weights
    kinds = {"weights": weights, "activations": int(rest * 0.55), "frames": int(rest * 0.4)}
    kinds["io"] = rest - kinds["activations"] - kinds["frames"]
    frag = round(min(0.85, 0.2 + 0.6 * (i / N) ** 1.5 + 0.05 * math.sin(i / 3.0)), 4)
    reserved = int(live * 1.04) // (2 * MiB) * (2 * MiB) + 8 * MiB
    other = 8 * GiB if i >= 120 else 0
    return {
        "type": "sample",
        "time_s": round(T0 + i + 0.004 * (i % 3), 3),
        "elapsed_s": float(i),
        "iteration": i * 4,
        "contexts": 1,
        "pools": [{
            "pool": "inference",
            "live_bytes": live,
            "peak_live_bytes": live + 3 * MiB,
            "reserved_bytes": reserved,
            "pending_bytes": (i % 4) * 256 * 1024,
            "fragmentation_ratio": frag,
            "largest_free_bytes": int((reserved - live) * (1 - frag)),
            "owners": [{"owner": k, "live_bytes": v, "budget_bytes": BUDGET if k.startswith("cam") else 0}
                       for k, v in owners.items()],
            "kinds": [{"kind": k, "live_bytes": v} for k, v in kinds.items()],
        }],
        "gpu": {
            "index": 0, "name": "NVIDIA H200", "total_bytes": 150_754_820_096,
            "used_bytes": reserved + 600 * MiB + other,
            "processes": [{"pid": 4242, "name": "vramkit-serve", "used_bytes": reserved + 600 * MiB}] +
                         ([{"pid": 5151, "name": "python3", "used_bytes": other}] if other else []),
        },
    }


ALERTS = {
    60: ("fragmentation", "warning", None, 0.5, "fragmentation of pool \"inference\" is {v:.2f}, over the warning threshold 0.50"),
    95: ("fragmentation", "critical", None, 0.7, "fragmentation of pool \"inference\" is {v:.2f}, over the critical threshold 0.70"),
    140: ("budget", "warning", "cam03", 0.8, "owner \"cam03\" holds {v:.0%} of its 128.0 MiB budget"),
    150: ("growth", "critical", None, 262144.0, "live bytes of pool \"inference\" grow 0.50 MiB/s (r\u00b2 0.99)"),
    170: ("budget", "critical", "cam03", 0.9, "owner \"cam03\" holds {v:.0%} of its 128.0 MiB budget"),
}


def alert(i, s):
    kind, level, owner, threshold, msg = ALERTS[i]
    p = s["pools"][0]
    value = (p["fragmentation_ratio"] if kind == "fragmentation" else
             next(o["live_bytes"] for o in p["owners"] if o["owner"] == owner) / BUDGET if kind == "budget" else
             524288.0)
    return {"type": "alert", "time_s": s["time_s"] + 0.001, "elapsed_s": s["elapsed_s"] + 0.001,
            "iteration": s["iteration"], "alert": kind, "level": level, "pool": "inference",
            "owner": owner, "value": round(value, 4), "threshold": threshold,
            "message": msg.format(v=value)}


def main():
    samples = [sample(i) for i in range(N)]
    with open(os.path.join(here, "series.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for i, s in enumerate(samples):
            f.write(json.dumps(s, ensure_ascii=False, separators=(",", ":")) + "\n")
            if i in ALERTS:
                f.write(json.dumps(alert(i, s), ensure_ascii=False, separators=(",", ":")) + "\n")

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    fields = ["live_bytes", "peak_live_bytes", "reserved_bytes", "pending_bytes",
              "fragmentation_ratio", "largest_free_bytes"]  # the pool's, as in the JSON Lines
    w.writerow(["time_s", "elapsed_s", "iteration", "pool", "owner", "kind"] + fields +
               ["gpu_used_bytes", "gpu_total_bytes"])
    empty = [""] * (len(fields) - 1 + 2)  # an owner's or a kind's row: live bytes only
    for s in samples:
        p, g = s["pools"][0], s["gpu"]
        head = [s["time_s"], s["elapsed_s"], s["iteration"], p["pool"]]
        w.writerow(head + ["", ""] + [p[f] for f in fields] + [g["used_bytes"], g["total_bytes"]])
        for o in p["owners"]:
            w.writerow(head + [o["owner"], "", o["live_bytes"]] + empty)
        for k in p["kinds"]:
            w.writerow(head + ["", k["kind"], k["live_bytes"]] + empty)
    with open(os.path.join(here, "series.csv"), "w", encoding="utf-8", newline="") as f:
        f.write(out.getvalue())

    last = samples[-1]
    p = last["pools"][0]
    cam03 = next(o["live_bytes"] for o in p["owners"] if o["owner"] == "cam03")
    events = []
    for k in range(19):
        owner = ["cam01", "cam02", "cam03"][k % 3]
        events.append({"action": "allocate" if k % 2 == 0 else "free", "size_bytes": (k % 5 + 1) * 3 * MiB,
                       "owner": owner, "kind": "activations", "stream": "0x%x" % (k % 3 + 1),
                       "address": "0x7f%08x" % (k * 0x300000), "time_s": round(last["time_s"] + 0.01 * k, 3)})
    events.append({"action": "allocate failure", "size_bytes": 24 * MiB, "owner": "cam03",
                   "kind": "activations", "stream": "0x3", "address": "0x0",
                   "time_s": round(last["time_s"] + 0.25, 3)})
    oom = {
        "type": "oom",
        "time_s": round(last["time_s"] + 0.25, 3),
        "pool": "inference",
        "request": {"size_bytes": 24 * MiB, "owner": "cam03", "kind": "activations", "stream": "0x3",
                    "error": "VRAM_EBUDGET",
                    "message": "budget of owner \"cam03\" exceeded: requested 24.0 MiB, live %.1f MiB of 128.0 MiB"
                               % (cam03 / MiB)},
        "owners": [{"owner": o["owner"], "live_bytes": o["live_bytes"], "peak_live_bytes": o["live_bytes"] + MiB,
                    "budget_bytes": o["budget_bytes"]} for o in p["owners"]],
        "kinds": p["kinds"],
        "reserved_bytes": p["reserved_bytes"],
        "live_bytes": p["live_bytes"],
        "fragmentation_ratio": p["fragmentation_ratio"],
        "largest_free_bytes": p["largest_free_bytes"],
        "gpu": last["gpu"],
        "trend": {"samples": N, "slope_bytes_per_s": 524288.0, "slope_bytes_per_iteration": 131072.0,
                  "r2": 0.9931},
        "last_events": events,
        "snapshot_path": "/var/tmp/vramkit-oom/snapshot.json",
        "diagnosis": {"cause": "leak",
                      "line": "pool \"inference\" grows 0.50 MiB/s (r\u00b2 0.99 over 180 samples); owner \"cam03\" "
                              "asked for 24.0 MiB with %.1f MiB of its 128.0 MiB budget live" % (cam03 / MiB)},
    }
    with open(os.path.join(here, "oom.json"), "w", encoding="utf-8") as f:
        json.dump(oom, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
