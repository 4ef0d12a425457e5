#!/usr/bin/env python3
"""tests/gpu/engine_check.py - the CUDA executor of `vramkit model run`
against the CPU executor (already checked against ONNX Runtime within 1e-4)
and, on the torchvision exports, against ONNX Runtime itself.

    python3 tests/gpu/engine_check.py VRAMKIT --models DIR [--blazeface FILE]...
        [--torchvision DIR] --out DIR [--workers 8] [--modes fp32,tf32,graph]
        [--graph-models NAME,...] [--ref-backend cpu] [--test-backend cuda]
        [--time-budget SECONDS] [--only SUBSTRING]

Models: every model of DIR/manifest.json (tools/onnx/gen_models.py; a
symbolic batch "N" gets the manifest's dims value through --batch, as
tests/cli/test_model.sh does), each --blazeface model (batch 1), and the
exports of tests/gpu/export_torchvision.py in --torchvision DIR (batch 2, on
the seeded input file written there). Inputs are the seeded random ones of
`vramkit model run --seed 1` (tests/onnx/README.md), or the given file, the
same for every run of a model.

Checks, per model and per output (float outputs: relative L2
||test - ref|| / ||ref||, or absolute L2 when the reference is all zeros;
integer and bool outputs: exactly equal; same dtype and shape always):
  fp32    --backend cuda (exact FP32) against --backend cpu: <= 1e-3
  tf32    --backend cuda --tf32 against cpu: reported; fails only > 1e-2
  graph   --backend cuda --graph --bench 2 against the plain cuda run: bitwise
          identical (on --graph-models only, a handful by default)
  ort     torchvision exports: cuda (FP32) against ONNX Runtime's output <= 1e-3
          (the cpu executor's and TF32's distances to it are reported too)
A run that fails (non-zero exit, missing output) fails its checks, with its
error text; everything else still runs.

Writes DIR/engine_check.jsonl (one JSON object per check, as they finish)
and DIR/engine_check.md (counts, the worst error of each group and check,
every failure with its message); the runs' outputs stay under DIR/runs.
Exit status 1 if any check failed (or was not run within --time-budget), 0
otherwise, 2 on bad usage.

--ref-backend/--test-backend (cpu/cuda) and --modes exist to check this
script itself without a GPU: `--test-backend cpu --modes fp32`.
Runs go through a pool of --workers threads, each driving one `vramkit`
process at a time (the work is in the processes; threads keep a crashed run
from taking the pool down).
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np

FP32_TOL = 1e-3
TF32_TOL = 1e-2
ORT_TOL = 1e-3
DEFAULT_GRAPH_MODELS = ("mixed_small_cnn,mixed_dwsep_hardswish_residual,"
                        "mixed_decoder_convtranspose_resize_concat,mixed_dynamic_batch_N,"
                        "net_mobilenetv3_large,face_detection_front_128x128_barracuda,"
                        "face_detection_back_256x256_barracuda,tv_resnet50")


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def compare(test, ref):
    """(ok_at_tolerance_function, error, metric, message) for two arrays."""
    if test.dtype != ref.dtype or test.shape != ref.shape:
        return None, float("inf"), "shape/dtype", \
            f"{test.dtype} {list(test.shape)} against {ref.dtype} {list(ref.shape)}"
    if ref.dtype.kind in "biu":
        n = int(np.count_nonzero(test != ref))
        return "exact", float(n), "mismatched elements", f"{n} of {ref.size} elements differ" if n else ""
    r = ref.astype(np.float64)
    t = test.astype(np.float64)
    if not np.all(np.isfinite(r)):
        same = np.array_equal(np.isnan(r), np.isnan(t)) and np.array_equal(r[np.isinf(r)], t[np.isinf(r)])
        fin = np.isfinite(r)
        r, t = np.where(fin, r, 0.0), np.where(fin, t, 0.0)
        if not same:
            return "l2", float("inf"), "non-finite", "NaN/Inf positions differ from the reference"
    d = float(np.linalg.norm(t - r))
    n = float(np.linalg.norm(r))
    if n > 0:
        return "l2", d / n, "relative L2", ""
    return "l2", d, "absolute L2", ""


def bitwise_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Checker:
    def __init__(self, args):
        self.a = args
        self.runs_dir = os.path.join(args.out, "runs")
        self.jsonl_path = os.path.join(args.out, "engine_check.jsonl")
        self.lock = threading.Lock()
        self.records = []
        self.deadline = time.monotonic() + args.time_budget if args.time_budget else None
        open(self.jsonl_path, "w").close()

    def record(self, **rec):
        rec.setdefault("ok", False)
        with self.lock:
            self.records.append(rec)
            with open(self.jsonl_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            if not rec["ok"]:
                print(f"FAIL {rec['group']}/{rec['model']} {rec['check']}"
                      f"{' ' + rec['output'] if rec.get('output') else ''}: {rec.get('message', '')}",
                      flush=True)

    def vramkit(self, item, mode, extra, timeout):
        """Run vramkit for `item` in `mode`; returns (outdir, error text or None, seconds)."""
        d = os.path.join(self.runs_dir, item["key"], mode)
        if os.path.isdir(d):
            for f in os.listdir(d):
                if f.endswith(".npy"):
                    os.remove(os.path.join(d, f))
        os.makedirs(d, exist_ok=True)
        cmd = [self.a.vramkit, "model", "run", item["path"], "--seed", "1", "--output-dir", d]
        if item["batch"] != 1 or item.get("symbolic"):
            cmd += ["--batch", str(item["batch"])]
        for name, f in item.get("inputs", []):
            cmd += ["--input", f"{name}={f}"]
        cmd += extra
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return d, f"timed out after {timeout} s: {' '.join(cmd)}", time.monotonic() - t0
        except OSError as e:
            return d, f"cannot run {self.a.vramkit}: {e}", time.monotonic() - t0
        dt = time.monotonic() - t0
        text = p.stdout.decode(errors="replace").strip()
        with open(os.path.join(d, "run.log"), "w") as f:
            f.write(" ".join(cmd) + "\n" + text + "\n")
        if p.returncode != 0:
            tail = "\n".join(text.splitlines()[-6:])
            return d, f"exit status {p.returncode}: {tail}", dt
        return d, None, dt

    def load_outputs(self, d, item):
        """{output name: array or error string}"""
        res = {}
        for name in item["outputs"]:
            f = os.path.join(d, sanitize(name) + ".npy")
            try:
                res[name] = np.load(f, allow_pickle=False)
            except Exception as e:  # noqa: BLE001
                res[name] = f"cannot read {os.path.basename(f)}: {e}"
        return res

    def check_item(self, item):
        a = self.a
        base = {"group": item["group"], "model": item["model"], "batch": item["batch"]}
        if self.deadline and time.monotonic() > self.deadline:
            self.record(**base, check="run", message="not run: --time-budget spent")
            return
        timeout = 600 if item["big"] else 180
        ref_dir, err, t_ref = self.vramkit(item, "ref_" + a.ref_backend, ["--backend", a.ref_backend], timeout)
        if err:
            self.record(**base, check="run", mode="ref", message=f"--backend {a.ref_backend}: {err}")
            return
        ref = self.load_outputs(ref_dir, item)
        bad_ref = {k: v for k, v in ref.items() if isinstance(v, str)}
        if bad_ref:
            self.record(**base, check="run", mode="ref", message="; ".join(bad_ref.values()))
            return
        runs = {}
        modes = [("fp32", [])]
        if "tf32" in a.modes:
            modes.append(("tf32", ["--tf32"]))
        if "graph" in a.modes and item["model"] in a.graph_models:
            modes.append(("graph", ["--graph", "--bench", "2"]))
        for mode, extra in modes:
            if mode == "fp32" and "fp32" not in a.modes and "graph" not in a.modes:
                continue
            d, err, dt = self.vramkit(item, mode, ["--backend", a.test_backend] + extra, timeout)
            runs[mode] = (d, err)
            if err:
                self.record(**base, check=mode, output=None, message=f"run failed: {err}")
                continue
            outs = self.load_outputs(d, item)
            against = ref
            if mode == "graph":
                if runs.get("fp32", (None, "no plain run"))[1]:
                    self.record(**base, check="graph", message="the plain cuda run failed; nothing to compare with")
                    continue
                against = self.load_outputs(runs["fp32"][0], item)
            for name in item["outputs"]:
                t, r = outs[name], against[name]
                rec = dict(base, check=mode, output=name)
                if isinstance(t, str) or isinstance(r, str):
                    self.record(**rec, message=t if isinstance(t, str) else r)
                    continue
                if mode == "graph":
                    same = bitwise_equal(t, r)
                    _, err_v, metric, msg = compare(t, r)
                    self.record(**rec, ok=same, error=err_v, metric=metric, tol=0.0,
                                message="" if same else f"not bitwise identical to the plain cuda run "
                                f"({metric} {err_v:.3g}) {msg}".strip())
                    continue
                kind, err_v, metric, msg = compare(t, r)
                tol = TF32_TOL if mode == "tf32" else FP32_TOL
                ok = kind is not None and bool(np.isfinite(err_v)) and (
                    err_v == 0 if kind == "exact" else err_v <= tol)
                if not ok and not msg:
                    msg = f"{metric} {err_v:.3g} > {tol:g}"
                self.record(**rec, ok=ok, error=err_v, metric=metric, tol=tol, message=msg)
        if item.get("ort_file"):
            ort_ref = np.load(item["ort_file"])
            name = item["outputs"][0]
            for mode, src, enforced in (("fp32", runs.get("fp32"), True), ("ref", (ref_dir, None), False),
                                        ("tf32", runs.get("tf32"), False)):
                if src is None:
                    continue
                if src[1]:
                    if enforced:
                        self.record(**base, check="ort", output=name, message=f"the cuda run failed: {src[1]}")
                    continue
                t = self.load_outputs(src[0], item)[name]
                check = "ort" if enforced else f"ort_{'cpu' if mode == 'ref' else mode}_info"
                if isinstance(t, str):
                    self.record(**base, check=check, output=name, ok=not enforced, message=t)
                    continue
                kind, err_v, metric, msg = compare(t, ort_ref.astype(t.dtype) if t.dtype.kind == "f" else ort_ref)
                ok = kind is not None and bool(np.isfinite(err_v)) and err_v <= ORT_TOL
                if not ok and not msg:
                    msg = f"{metric} {err_v:.3g} > {ORT_TOL:g} against ONNX Runtime"
                self.record(**base, check=check, output=name, ok=ok or not enforced, error=err_v,
                            metric=metric, tol=ORT_TOL if enforced else None, message=msg if enforced else "")


def collect(args):
    items = []
    problems = []
    man_path = os.path.join(args.models, "manifest.json")
    try:
        man = json.load(open(man_path))
        for m in man["models"]:
            dims = m.get("dims", {})
            if set(dims) - {"N"}:
                problems.append(f"{m['name']}: symbolic dims {sorted(dims)} other than N; only N (--batch) "
                                f"can be set; run with N only")
            items.append({"group": "generated", "model": m["name"], "key": "gen_" + m["name"],
                          "path": os.path.join(args.models, m["file"]), "batch": int(dims.get("N", 1)),
                          "symbolic": "N" in dims, "outputs": [o["name"] for o in m["outputs"]],
                          "big": m["name"].startswith("net_")})
    except Exception as e:  # noqa: BLE001
        problems.append(f"cannot read {man_path}: {e}")
    for bf in args.blazeface:
        name = os.path.splitext(os.path.basename(bf))[0]
        try:
            import onnx
            mdl = onnx.load(bf)
            outs = [o.name for o in mdl.graph.output]
        except Exception as e:  # noqa: BLE001
            problems.append(f"cannot read {bf}: {e}")
            continue
        items.append({"group": "blazeface", "model": name, "key": "bf_" + name, "path": bf, "batch": 1,
                      "outputs": outs, "big": True})
    if args.torchvision:
        tv_path = os.path.join(args.torchvision, "torchvision.json")
        try:
            tv = json.load(open(tv_path))
            for m in tv["models"]:
                if not m.get("ok"):
                    problems.append(f"torchvision {m['name']}: not exported ({m.get('error', '?')})")
                    continue
                items.append({"group": "torchvision", "model": "tv_" + m["name"], "key": "tv_" + m["name"],
                              "path": os.path.join(args.torchvision, m["onnx"]), "batch": int(m["batch"]),
                              "symbolic": isinstance(m.get("batch_dim"), str),
                              "inputs": [(m["input_name"], os.path.join(args.torchvision, m["input_file"]))],
                              "outputs": [m["output_name"]],
                              "ort_file": os.path.join(args.torchvision, m["ort_file"]), "big": True})
        except Exception as e:  # noqa: BLE001
            problems.append(f"cannot read {tv_path}: {e}")
    if args.only:
        items = [i for i in items if args.only in i["model"]]
    return items, problems


def summarize(records, args, elapsed):
    lines = ["# vramkit engine: cuda against cpu and ONNX Runtime", ""]
    lines.append(f"`{args.test_backend}` against `{args.ref_backend}`; modes {','.join(sorted(args.modes))}; "
                 f"{elapsed:.0f} s with {args.workers} workers. Tolerances: fp32 {FP32_TOL:g} relative L2, "
                 f"tf32 {TF32_TOL:g}, graph bitwise identical to the plain run, ort {ORT_TOL:g}; integer and "
                 f"bool outputs exact.")
    lines.append("")
    groups = sorted({r["group"] for r in records})
    checks = ["setup", "run", "fp32", "tf32", "graph", "ort", "ort_cpu_info", "ort_tf32_info"]
    lines += ["| group | check | models | outputs checked | failed | worst error | where |",
              "|---|---|---|---|---|---|---|"]
    for g in groups:
        for c in checks:
            rs = [r for r in records if r["group"] == g and r["check"] == c]
            if not rs:
                continue
            failed = [r for r in rs if not r["ok"]]
            errs = [r for r in rs if isinstance(r.get("error"), (int, float))]
            worst = max(errs, key=lambda r: (r["error"] if np.isfinite(r["error"]) else 1e300), default=None)
            w = f"{worst['error']:.3g} ({worst.get('metric', '')})" if worst else "-"
            where = f"{worst['model']} / {worst.get('output')}" if worst and worst["error"] != 0 else "-"
            lines.append(f"| {g} | {c} | {len({r['model'] for r in rs})} | {len(rs)} | {len(failed)} | {w} | {where} |")
    lines.append("")
    models = sorted({(r["group"], r["model"]) for r in records if r["group"] != "setup"})
    bad_models = sorted({(r["group"], r["model"]) for r in records if not r["ok"] and r["group"] != "setup"})
    n_fail = sum(1 for r in records if not r["ok"])
    n_setup = sum(1 for r in records if r["group"] == "setup")
    lines.append(f"**{len(models) - len(bad_models)} of {len(models)} models pass every check; "
                 f"{n_fail} failed check(s), {n_setup} of them setup problems (a model set not found or "
                 f"not readable).**")
    lines.append("")
    if n_fail:
        lines += ["## Failures", ""]
        for r in records:
            if not r["ok"]:
                msg = (r.get("message") or "").replace("\n", " / ")
                lines.append(f"- {r['group']}/{r['model']} (batch {r['batch']}) **{r['check']}**"
                             f"{' `' + r['output'] + '`' if r.get('output') else ''}: {msg}")
        lines.append("")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vramkit")
    ap.add_argument("--models", required=True, help="directory of gen_models.py (manifest.json)")
    ap.add_argument("--blazeface", action="append", default=[], help="a BlazeFace .onnx (repeatable)")
    ap.add_argument("--torchvision", help="directory of export_torchvision.py (torchvision.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--modes", default="fp32,tf32,graph")
    ap.add_argument("--graph-models", default=DEFAULT_GRAPH_MODELS)
    ap.add_argument("--ref-backend", default="cpu")
    ap.add_argument("--test-backend", default="cuda")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds; start no model after that")
    ap.add_argument("--only", help="only models whose name contains this")
    args = ap.parse_args(argv[1:])
    args.modes = {m.strip() for m in args.modes.split(",") if m.strip()}
    if not args.modes <= {"fp32", "tf32", "graph"}:
        ap.error(f"--modes takes fp32, tf32, graph, not {sorted(args.modes)}")
    args.graph_models = {m.strip() for m in args.graph_models.split(",") if m.strip()}
    if not (os.path.isfile(args.vramkit) and os.access(args.vramkit, os.X_OK)):
        ap.error(f"{args.vramkit} is not an executable file")
    os.makedirs(args.out, exist_ok=True)

    items, problems = collect(args)
    ck = Checker(args)
    for p in problems:
        ck.record(group="setup", model="-", batch=0, check="setup", message=p)
    t0 = time.monotonic()
    # Big models first, so that they do not straggle at the end.
    items.sort(key=lambda i: (not i["big"], i["group"], i["model"]))
    print(f"engine_check: {len(items)} models, {args.test_backend} against {args.ref_backend}, "
          f"modes {sorted(args.modes)}, {args.workers} workers", flush=True)
    done = 0
    with cf.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futs = {pool.submit(ck.check_item, it): it for it in items}
        for fut in cf.as_completed(futs):
            it = futs[fut]
            done += 1
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001 - a bug here must not stop the others
                ck.record(group=it["group"], model=it["model"], batch=it["batch"], check="run",
                          message=f"engine_check error: {type(e).__name__}: {e}")
            if done % 20 == 0 or done == len(items):
                nfail = sum(1 for r in ck.records if not r["ok"])
                print(f"  {done}/{len(items)} models done, {nfail} failed checks, "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
    elapsed = time.monotonic() - t0
    md = summarize(ck.records, args, elapsed)
    with open(os.path.join(args.out, "engine_check.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    failed = any(not r["ok"] for r in ck.records) or not items
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
