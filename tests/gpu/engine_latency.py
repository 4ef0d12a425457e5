#!/usr/bin/env python3
"""tests/gpu/engine_latency.py - latency of vramkit's CUDA executor against
PyTorch eager on the same GPU, in one run.

    python3 tests/gpu/engine_latency.py VRAMKIT --torchvision DIR
        --blazeface MODEL_B1.onnx --blazeface-batched B=MODEL_BB.onnx
        --out DIR [--iters 100] [--warmup 20] [--repeat 3] [--batches 1,32]
        [--time-budget SECONDS]

Rows: ResNet-50 (PyTorch: torchvision's resnet50 itself, torch.manual_seed(0)
and weights=None as tests/gpu/export_torchvision.py builds it; vramkit: that
export, DIR/resnet50.onnx, with --batch B) and BlazeFace-back (PyTorch:
tests/gpu/onnx_torch.py's module of the model; vramkit: the same model; at
batch B > 1 both use the model tools/onnx/rebatch.py made), at each batch,
in two math modes:
  fp32  torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32
        = False; vramkit without --tf32
  tf32  both True; vramkit --tf32
torch.backends.cudnn.benchmark is left at its default (False) and reported.

PyTorch: inputs on the GPU, under torch.inference_mode(), --warmup
iterations, then --iters iterations each `out = model(x);
torch.cuda.synchronize()` timed with time.perf_counter. vramkit: `vramkit
model run MODEL --backend cuda --bench ITERS --json` (its first run is
separate, reported as first_run_ms; the ITERS timed runs follow), and at
batch 1 also with --graph. Percentiles are taken the same way on both sides
(sorted times, p50 = element (n-1)/2, p90 = element floor((n-1)*0.9)).
Each (model, batch, math) row is measured --repeat times, alternating which
side goes first, and keeps the median of the p50s.

Targets, PASS/FAIL per row: vramkit p50 / PyTorch p50 <= 1.2; at batch 1
vramkit --graph p50 / PyTorch p50 < 1. Memory: the bytes vramkit's JSON
reports (weights + activations + io + workspace) next to
torch.cuda.max_memory_allocated() for the same model and batch (less what
was allocated before the model was built: the model's weights, its input
and everything its forward allocates).

Writes DIR/engine_latency.md (the table) and DIR/engine_latency.jsonl (one
object per measurement, as they finish, then one per row). Exit status 1
if a row fails or could not be measured, 0 otherwise, 2 on bad usage.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RATIO_MAX = 1.2
GRAPH_RATIO_MAX = 1.0
MiB = 1024.0 * 1024.0
LABELS = {"resnet50": "ResNet-50", "blazeface_back": "BlazeFace-back"}


def stats(ms):
    s = sorted(ms)
    n = len(s)
    return {"iterations": n, "mean": sum(s) / n, "p50": s[(n - 1) // 2], "p90": s[int((n - 1) * 0.9)],
            "p99": s[int((n - 1) * 0.99)], "min": s[0], "max": s[-1]}


class Bench:
    def __init__(self, args):
        import torch
        self.torch = torch
        self.a = args
        self.jsonl = os.path.join(args.out, "engine_latency.jsonl")
        open(self.jsonl, "w").close()
        self.deadline = time.monotonic() + args.time_budget if args.time_budget else None
        self.tmp = tempfile.mkdtemp(prefix="vk_latency_")

    def log(self, rec):
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def out_of_time(self):
        return self.deadline is not None and time.monotonic() > self.deadline

    def set_math(self, math):
        torch = self.torch
        tf32 = math == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return {"cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                "cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn.benchmark": bool(torch.backends.cudnn.benchmark)}

    def time_torch(self, model, x, math):
        torch = self.torch
        flags = self.set_math(math)
        with torch.inference_mode():
            torch.cuda.synchronize()
            for _ in range(self.a.warmup):
                out = model(x)
            torch.cuda.synchronize()
            ms = []
            for _ in range(self.a.iters):
                t0 = time.perf_counter()
                out = model(x)
                torch.cuda.synchronize()
                ms.append((time.perf_counter() - t0) * 1e3)
        del out
        return stats(ms), flags

    def run_vramkit(self, path, batch, symbolic, math, graph):
        cmd = [self.a.vramkit, "model", "run", path, "--backend", "cuda", "--bench", str(self.a.iters),
               "--json", "--output-dir", self.tmp]
        if symbolic or batch != 1:
            cmd += ["--batch", str(batch)]
        if math == "tf32":
            cmd.append("--tf32")
        if graph:
            cmd.append("--graph")
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=self.a.run_timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {self.a.run_timeout} s: {' '.join(cmd)}"
        except OSError as e:
            return None, f"cannot run {self.a.vramkit}: {e}"
        out = p.stdout.decode(errors="replace")
        err = p.stderr.decode(errors="replace").strip()
        if p.returncode != 0:
            return None, f"exit status {p.returncode}: " + " / ".join((err or out).splitlines()[-4:])
        doc = None
        try:
            doc = json.loads(out)
        except ValueError:
            for line in reversed(out.splitlines()):
                line = line.strip()
                if line.startswith("{"):
                    try:
                        doc = json.loads(line)
                        break
                    except ValueError:
                        pass
        if not isinstance(doc, dict):
            return None, "no JSON object on stdout: " + " / ".join(out.splitlines()[-3:])
        lat = doc.get("latency_ms")
        if not isinstance(lat, dict) or "p50" not in lat:
            return None, f"the JSON has no latency_ms.p50: {json.dumps(doc)[:300]}"
        return doc, None

    # ------------------------------------------------------------ models

    def torch_model(self, which, batch):
        """(module, input tensor, what it is)"""
        torch = self.torch
        if which == "resnet50":
            import torchvision
            from export_torchvision import build
            m = build(torchvision.models.resnet50).cuda()
            x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, 3, 224, 224))
                                 .astype(np.float32)).cuda()
            return m, x, "torchvision.models.resnet50 (eager)"
        from onnx_torch import OnnxModule
        path = self.vk_model(which, batch)[0]
        m = OnnxModule(path, device="cuda")
        import onnx
        mdl = onnx.load(path)
        inits = {t.name for t in mdl.graph.initializer}
        vi = [v for v in mdl.graph.input if v.name not in inits][0]
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)).cuda()
        return m, x, f"onnx_torch.OnnxModule({os.path.basename(path)})"

    def vk_model(self, which, batch):
        """(onnx path, symbolic batch?)"""
        if which == "resnet50":
            return os.path.join(self.a.torchvision, "resnet50.onnx"), True
        if batch == 1:
            return self.a.blazeface, False
        if batch not in self.a.batched:
            raise FileNotFoundError(f"no --blazeface-batched {batch}=MODEL given")
        return self.a.batched[batch], False

    # ------------------------------------------------------------ one row set

    def measure(self, which, batch, maths):
        """Every math mode of (model, batch): rows."""
        torch = self.torch
        rows = []
        label = LABELS[which]
        try:
            path, symbolic = self.vk_model(which, batch)
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path} does not exist")
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            model, x, what = self.torch_model(which, batch)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            for math in maths:
                rows.append({"model": label, "batch": batch, "math": math, "ok": False,
                             "message": f"setup failed: {type(e).__name__}: {e}"})
            return rows
        print(f"{label} batch {batch}: PyTorch {what}; vramkit {path}", flush=True)
        for math in maths:
            row = {"model": label, "batch": batch, "math": math, "torch_model": what, "onnx": path,
                   "torch": [], "vramkit": [], "graph": [], "messages": []}
            torch.cuda.reset_peak_memory_stats()
            for rep in range(self.a.repeat):
                if self.out_of_time():
                    row["messages"].append(f"time budget spent after {rep} of {self.a.repeat} repeats")
                    break
                order = ("torch", "vramkit") if rep % 2 == 0 else ("vramkit", "torch")
                for side in order:
                    if side == "torch":
                        try:
                            st, flags = self.time_torch(model, x, math)
                            row["torch"].append(st)
                            row["torch_flags"] = flags
                            self.log({"kind": "measurement", "side": "torch", "model": label, "batch": batch,
                                      "math": math, "repeat": rep, "first": order[0] == side, **st,
                                      "flags": flags})
                        except Exception as e:  # noqa: BLE001
                            row["messages"].append(f"PyTorch: {type(e).__name__}: {e}")
                        continue
                    for graph in ([False, True] if batch == 1 else [False]):
                        doc, err = self.run_vramkit(path, batch, symbolic, math, graph)
                        key = "graph" if graph else "vramkit"
                        if err:
                            row["messages"].append(f"vramkit{' --graph' if graph else ''}: {err}")
                            self.log({"kind": "measurement", "side": key, "model": label, "batch": batch,
                                      "math": math, "repeat": rep, "error": err})
                            continue
                        lat = doc["latency_ms"]
                        row[key].append(lat)
                        row.setdefault(key + "_json", doc)
                        self.log({"kind": "measurement", "side": key, "model": label, "batch": batch,
                                  "math": math, "repeat": rep, "first": order[0] == side, **lat,
                                  "first_run_ms": doc.get("first_run_ms"), "memory": doc.get("memory"),
                                  "executor": doc.get("executor"), "graph": doc.get("graph"),
                                  "tf32": doc.get("tf32")})
            row["torch_peak_bytes"] = max(0, torch.cuda.max_memory_allocated() - base)
            rows.append(self.finish(row))
            print(f"  {math}: " + row_text(rows[-1]), flush=True)
        del model, x
        torch.cuda.empty_cache()
        return rows

    def finish(self, row):
        def med(key):
            v = [s["p50"] for s in row[key]]
            return statistics.median(v) if v else None
        row["torch_p50"] = med("torch")
        row["vramkit_p50"] = med("vramkit")
        row["graph_p50"] = med("graph")
        row["torch_p90"] = statistics.median([s["p90"] for s in row["torch"]]) if row["torch"] else None
        row["torch_mean"] = statistics.median([s["mean"] for s in row["torch"]]) if row["torch"] else None
        row["vramkit_p90"] = statistics.median([s["p90"] for s in row["vramkit"]]) if row["vramkit"] else None
        row["vramkit_mean"] = statistics.median([s["mean"] for s in row["vramkit"]]) if row["vramkit"] else None
        tp, vp, gp = row["torch_p50"], row["vramkit_p50"], row["graph_p50"]
        row["ratio"] = vp / tp if tp and vp else None
        row["graph_ratio"] = gp / tp if tp and gp else None
        mem = (row.get("vramkit_json") or {}).get("memory") or {}
        keys = ("weights_bytes", "activations_bytes", "io_bytes", "workspace_bytes")
        row["vramkit_memory"] = mem
        row["vramkit_bytes"] = sum(int(mem.get(k, 0)) for k in keys) if mem else None
        ok = row["ratio"] is not None and row["ratio"] <= RATIO_MAX
        if row["ratio"] is None:
            row["messages"].append("no ratio: a side was not measured")
        if row["batch"] == 1:
            gok = row["graph_ratio"] is not None and row["graph_ratio"] < GRAPH_RATIO_MAX
            if row["graph_ratio"] is None:
                row["messages"].append("no --graph ratio: --graph was not measured")
            ok = ok and gok
        row["ok"] = bool(ok)
        reps = len(row["torch"]), len(row["vramkit"]), len(row["graph"])
        row["repeats_measured"] = {"torch": reps[0], "vramkit": reps[1], "graph": reps[2]}
        for k in ("vramkit_json", "graph_json"):
            row.pop(k, None)
        return row


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def row_text(r):
    if "torch_p50" not in r:
        return "FAIL " + "; ".join(r.get("messages", [r.get("message", "")]) or [r.get("message", "")])
    s = (f"PyTorch p50 {fmt(r['torch_p50'])} ms, vramkit {fmt(r['vramkit_p50'])} ms "
         f"(x{fmt(r['ratio'], '.2f')})")
    if r["batch"] == 1:
        s += f", --graph {fmt(r['graph_p50'])} ms (x{fmt(r['graph_ratio'], '.2f')})"
    s += " " + ("PASS" if r["ok"] else "FAIL")
    if r.get("messages"):
        s += " [" + "; ".join(r["messages"]) + "]"
    return s


def table(rows, env, args):
    L = ["# vramkit CUDA executor against PyTorch eager: latency", ""]
    L.append(f"{env.get('gpu', '?')}; torch {env.get('torch')}, cuDNN {env.get('cudnn')}, "
             f"CUDA {env.get('cuda')}; torch.backends.cudnn.benchmark = {env.get('cudnn_benchmark')} "
             f"(left at its default). PyTorch: {args.warmup} warm-up iterations, then {args.iters} timed "
             f"`out = model(x); torch.cuda.synchronize()`; vramkit: `--bench {args.iters} --json` (first run "
             f"separate). Each row: {args.repeat} repeats alternating which side goes first, median of the "
             f"p50s. Targets: vramkit/PyTorch <= {RATIO_MAX}; at batch 1 vramkit --graph/PyTorch < "
             f"{GRAPH_RATIO_MAX:g}.")
    L.append("")
    L += ["| model | batch | math | PyTorch p50 ms | vramkit p50 ms | ratio | vramkit --graph p50 ms | "
          "--graph ratio | PyTorch max_memory_allocated MiB | vramkit memory MiB (weights/act/io/ws) | result |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "torch_p50" not in r:
            L.append(f"| {r['model']} | {r['batch']} | {r['math']} | - | - | - | - | - | - | - | "
                     f"FAIL: {r.get('message', '')} |")
            continue
        mem = r.get("vramkit_memory") or {}
        vm = "-"
        if r.get("vramkit_bytes") is not None:
            parts = "/".join(f"{int(mem.get(k, 0)) / MiB:.1f}" for k in
                             ("weights_bytes", "activations_bytes", "io_bytes", "workspace_bytes"))
            vm = f"{r['vramkit_bytes'] / MiB:.1f} ({parts})"
        tm = "-" if r.get("torch_peak_bytes") is None else f"{r['torch_peak_bytes'] / MiB:.1f}"
        g = (fmt(r["graph_p50"]), fmt(r["graph_ratio"], ".2f")) if r["batch"] == 1 else ("n/a", "n/a")
        L.append(f"| {r['model']} | {r['batch']} | {r['math']} | {fmt(r['torch_p50'])} | {fmt(r['vramkit_p50'])} | "
                 f"{fmt(r['ratio'], '.2f')} | {g[0]} | {g[1]} | {tm} | {vm} | {'PASS' if r['ok'] else 'FAIL'} |")
    L += ["", "Spread (medians over the repeats):", "",
          "| model | batch | math | PyTorch p50 / p90 / mean | vramkit p50 / p90 / mean | repeats (torch, vramkit, graph) |",
          "|---|---|---|---|---|---|"]
    for r in rows:
        if "torch_p50" not in r:
            continue
        rm = r["repeats_measured"]
        L.append(f"| {r['model']} | {r['batch']} | {r['math']} | {fmt(r['torch_p50'])} / {fmt(r['torch_p90'])} / "
                 f"{fmt(r['torch_mean'])} | {fmt(r['vramkit_p50'])} / {fmt(r['vramkit_p90'])} / "
                 f"{fmt(r['vramkit_mean'])} | {rm['torch']}, {rm['vramkit']}, {rm['graph']} |")
    notes = [(r, m) for r in rows for m in r.get("messages", [])]
    if notes:
        L += ["", "## Problems", ""]
        for r, m in notes:
            L.append(f"- {r['model']} batch {r['batch']} {r['math']}: {m}")
    nfail = sum(1 for r in rows if not r["ok"])
    L += ["", f"**{len(rows) - nfail} of {len(rows)} rows pass.**"]
    return "\n".join(L)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vramkit")
    ap.add_argument("--torchvision", required=True, help="directory of export_torchvision.py")
    ap.add_argument("--blazeface", required=True, help="BlazeFace-back, batch 1")
    ap.add_argument("--blazeface-batched", action="append", default=[], metavar="B=MODEL.onnx",
                    help="BlazeFace-back rebatched to B (tools/onnx/rebatch.py)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--maths", default="fp32,tf32")
    ap.add_argument("--models", default="resnet50,blazeface_back")
    ap.add_argument("--run-timeout", type=int, default=180, help="seconds for one vramkit run")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds; no new repeat after that")
    args = ap.parse_args(argv[1:])
    try:
        args.batched = {}
        for s in args.blazeface_batched:
            b, f = s.split("=", 1)
            args.batched[int(b)] = f
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
    except ValueError as e:
        ap.error(f"bad --blazeface-batched or --batches: {e}")
    maths = [m.strip() for m in args.maths.split(",") if m.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if set(maths) - {"fp32", "tf32"} or set(models) - {"resnet50", "blazeface_back"}:
        ap.error("--maths takes fp32,tf32; --models takes resnet50,blazeface_back")
    if args.iters < 1 or args.repeat < 1:
        ap.error("--iters and --repeat must be at least 1")
    os.makedirs(args.out, exist_ok=True)

    import torch
    if not torch.cuda.is_available():
        print("engine_latency: PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda,
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}
    print(f"engine_latency: {json.dumps(env)}", flush=True)
    b = Bench(args)
    b.log({"kind": "environment", **env, "iters": args.iters, "warmup": args.warmup, "repeat": args.repeat})
    rows = []
    for which in models:
        for batch in batches:
            if b.out_of_time():
                for math in maths:
                    rows.append({"model": LABELS[which], "batch": batch, "math": math, "ok": False,
                                 "message": "not measured: --time-budget spent"})
                continue
            rows += b.measure(which, batch, maths)
    for r in rows:
        b.log({"kind": "row", **{k: v for k, v in r.items() if k not in ("torch", "vramkit", "graph")},
               "torch_runs": r.get("torch"), "vramkit_runs": r.get("vramkit"), "graph_runs": r.get("graph")})
    md = table(rows, env, args)
    with open(os.path.join(args.out, "engine_latency.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
