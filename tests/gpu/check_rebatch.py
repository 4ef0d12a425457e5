#!/usr/bin/env python3
"""tests/gpu/check_rebatch.py - check a model made by tools/onnx/rebatch.py
against the batch-1 model it came from, through `vramkit model run`: each
sample of the batch-B model's outputs must equal the batch-1 model's outputs
on that sample alone.

    python3 tests/gpu/check_rebatch.py VRAMKIT MODEL_B1.onnx MODEL_BB.onnx
        [--backend cpu|cuda] [--work DIR] [--tol T]

Two checks:
  tiled     the batch-1 input (uniform in [-1, 1), numpy seed 0) tiled B
            times: every sample's outputs against the batch-1 outputs;
  distinct  B different samples (seed 1): samples 0, 1, B/2 and B-1 against
            the batch-1 model run on that sample alone (catches samples
            mixed up across the batch, which identical samples would hide).
Float outputs match when their relative L2 error is at most --tol (default
1e-5 on cpu, 1e-4 on cuda, where the batch size may change the convolution
algorithms); integer outputs exactly. It says whether they are also bitwise
identical. Works with Debian's python3 (numpy, onnx) and with the GPU
machine's. Exit status 0 if every sample matches, 1 otherwise, 2 on bad
usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

NP_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 2: np.uint8}


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def io_of(path):
    m = onnx.load(path)
    inits = {t.name for t in m.graph.initializer}
    ins = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if None in shape:
            raise SystemExit(f"check_rebatch: {path}: input {v.name} has a symbolic shape {shape}")
        ins.append((v.name, shape, NP_DTYPES[tt.elem_type]))
    return ins, [o.name for o in m.graph.output]


def make(rng, shape, dt):
    if np.issubdtype(dt, np.floating):
        return rng.uniform(-1, 1, shape).astype(dt)
    return rng.integers(0, 4, shape).astype(dt)


class Runner:
    def __init__(self, vramkit, backend, work):
        self.vk, self.backend, self.work, self.n = vramkit, backend, work, 0

    def run(self, model, feeds, outputs):
        self.n += 1
        d = os.path.join(self.work, f"run{self.n}")
        os.makedirs(d, exist_ok=True)
        cmd = [self.vk, "model", "run", model, "--backend", self.backend, "--output-dir", d]
        for name, arr in feeds.items():
            f = os.path.join(d, "in_" + sanitize(name) + ".npy")
            np.save(f, np.ascontiguousarray(arr))
            cmd += ["--input", f"{name}={f}"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if p.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout.decode(errors='replace')[-2000:]}")
        return {o: np.load(os.path.join(d, sanitize(o) + ".npy")) for o in outputs}


def compare(a, b, tol):
    """(ok, bitwise, text)"""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, False, f"{a.dtype} {list(a.shape)} against {b.dtype} {list(b.shape)}"
    bitwise = a.tobytes() == b.tobytes()
    if a.dtype.kind in "biu":
        return bitwise, bitwise, "exact" if bitwise else f"{int(np.count_nonzero(a != b))} elements differ"
    r = b.astype(np.float64)
    n = float(np.linalg.norm(r))
    d = float(np.linalg.norm(a.astype(np.float64) - r))
    err = d / n if n > 0 else d
    mx = float(np.max(np.abs(a.astype(np.float64) - r))) if a.size else 0.0
    ok = bool(np.isfinite(err)) and err <= tol
    return ok, bitwise, f"relative L2 {err:.3g}, max abs {mx:.3g}{' (bitwise identical)' if bitwise else ''}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vramkit")
    ap.add_argument("model1")
    ap.add_argument("modelB")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--work")
    ap.add_argument("--tol", type=float)
    args = ap.parse_args(argv[1:])
    tol = args.tol if args.tol is not None else (1e-5 if args.backend == "cpu" else 1e-4)
    ins1, outs1 = io_of(args.model1)
    insB, outsB = io_of(args.modelB)
    if [n for n, _, _ in ins1] != [n for n, _, _ in insB] or outs1 != outsB:
        print("check_rebatch: the two models' inputs or outputs differ in name")
        return 1
    B = insB[0][1][0]
    for (n, s1, _), (_, sB, _) in zip(ins1, insB):
        if s1[0] != 1 or sB[0] != B or s1[1:] != sB[1:]:
            print(f"check_rebatch: input {n}: shapes {s1} and {sB} are not [1,...] and [{B},...]")
            return 1
    work = args.work or tempfile.mkdtemp(prefix="check_rebatch_")
    os.makedirs(work, exist_ok=True)
    r = Runner(args.vramkit, args.backend, work)
    bad = 0
    all_bitwise = True
    print(f"check_rebatch: {os.path.basename(args.modelB)} (batch {B}) against "
          f"{os.path.basename(args.model1)} on {args.backend}, tolerance {tol:g}")
    try:
        # tiled: one sample, B copies
        x1 = {n: make(np.random.default_rng(0), s, dt) for n, s, dt in ins1}
        xB = {n: np.tile(a, (B,) + (1,) * (a.ndim - 1)) for n, a in x1.items()}
        y1 = r.run(args.model1, x1, outs1)
        yB = r.run(args.modelB, xB, outsB)
        worst = {}
        for o in outs1:
            for i in range(B):
                ok, bw, text = compare(yB[o][i:i + 1], y1[o], tol)
                all_bitwise &= bw
                if not ok:
                    bad += 1
                    print(f"  DIFFER tiled sample {i} output {o}: {text}")
                worst.setdefault(o, (text, ok))
        for o in outs1:
            print(f"  tiled    {o}: shape {list(yB[o].shape)}; sample 0: {worst[o][0]}")
        # distinct samples
        rng = np.random.default_rng(1)
        xB = {n: make(rng, s, dt) for n, s, dt in insB}
        yB = r.run(args.modelB, xB, outsB)
        for i in sorted({0, min(1, B - 1), B // 2, B - 1}):
            yi = r.run(args.model1, {n: a[i:i + 1] for n, a in xB.items()}, outs1)
            for o in outs1:
                ok, bw, text = compare(yB[o][i:i + 1], yi[o], tol)
                all_bitwise &= bw
                bad += not ok
                print(f"  {'distinct' if ok else 'DIFFER  '} sample {i} {o}: {text}")
    except Exception as e:  # noqa: BLE001
        print(f"check_rebatch: FAIL: {e}")
        return 1
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"check_rebatch: {'PASS' if not bad else 'FAIL'}: "
          f"{'every sample matches' if not bad else f'{bad} sample output(s) differ'}"
          f"{' (all bitwise identical)' if all_bitwise and not bad else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
