#!/usr/bin/env python3
"""tests/gpu/export_torchvision.py - export torchvision's ResNet-50 and
MobileNetV3-Large (untrained: torch.manual_seed(0) then weights=None, in eval
mode) to ONNX, with a seeded input and ONNX Runtime's output on it, for
tests/gpu/engine_check.py and tests/gpu/engine_latency.py.

    python3 tests/gpu/export_torchvision.py OUTDIR

Writes, for NAME in resnet50, mobilenet_v3_large:
  OUTDIR/NAME.onnx         opset 17, input "input" [batch, 3, 224, 224],
                           output "output" [batch, 1000], batch symbolic
  OUTDIR/NAME_input.npy    float32 [2, 3, 224, 224]:
                           np.random.default_rng(0).standard_normal(shape)
                           cast to float32
  OUTDIR/NAME_ort.npy      ONNX Runtime's output on it (CPU execution
                           provider, graph optimizations disabled)
and OUTDIR/torchvision.json: per model the files, the exporter used
(torch.onnx.export with dynamo=False, the TorchScript exporter; if that
fails or is gone, dynamo=True), the batch dimension's name, the operators
of the exported graph, and how far PyTorch's own output (CPU, FP32) is from
ONNX Runtime's (relative L2: a check of the export itself).

Everything runs on the CPU. Exit status 1 if a model could not be exported
or run (the other is still written), 0 otherwise.
"""
import collections
import json
import os
import sys
import time
import traceback

import numpy as np
import onnx
import torch
import torchvision

MODELS = (("resnet50", torchvision.models.resnet50),
          ("mobilenet_v3_large", torchvision.models.mobilenet_v3_large))
BATCH = 2
OPSET = 17


def build(ctor):
    """The model as engine_latency.py builds it too: seed 0, no weights."""
    torch.manual_seed(0)
    return ctor(weights=None).eval()


def seeded_input(batch=BATCH):
    return np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)


def export(model, path):
    """Export with the TorchScript exporter, else with the dynamo one.
    Returns (exporter description, notes)."""
    x = torch.from_numpy(seeded_input())
    notes = []
    ts_kw = dict(opset_version=OPSET, input_names=["input"], output_names=["output"],
                 do_constant_folding=True, dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    try:
        with torch.no_grad():
            torch.onnx.export(model, (x,), path, dynamo=False, **ts_kw)
        return "torch.onnx.export(dynamo=False) (TorchScript exporter)", notes
    except TypeError as e:
        if "dynamo" not in str(e):
            notes.append(f"dynamo=False failed: TypeError: {str(e)[:400]}")
        else:
            # a torch from before the dynamo exporter: TorchScript is all it has
            try:
                with torch.no_grad():
                    torch.onnx.export(model, (x,), path, **ts_kw)
                return "torch.onnx.export (TorchScript exporter; this torch takes no dynamo argument)", notes
            except Exception as e2:  # noqa: BLE001
                notes.append(f"TorchScript export failed: {type(e2).__name__}: {str(e2)[:400]}")
    except Exception as e:  # noqa: BLE001
        notes.append(f"dynamo=False failed: {type(e).__name__}: {str(e)[:400]}")
    if not hasattr(torch, "export"):
        raise RuntimeError("; ".join(notes) + "; and this torch has no dynamo exporter")
    batch = torch.export.Dim("batch", min=1, max=4096)
    last = None
    for opset in (OPSET, None):
        try:
            kw = dict(input_names=["input"], output_names=["output"], dynamo=True,
                      dynamic_shapes=({0: batch},), external_data=False)
            if opset is not None:
                kw["opset_version"] = opset
            with torch.no_grad():
                torch.onnx.export(model, (x,), path, **kw)
            what = "torch.onnx.export(dynamo=True)" + ("" if opset else " at its default opset")
            return what, notes
        except Exception as e:  # noqa: BLE001
            last = e
            notes.append(f"dynamo=True opset {opset or 'default'} failed: {type(e).__name__}: {str(e)[:400]}")
    raise RuntimeError("; ".join(notes)) from last


def ort_run(path, x):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3   # no warnings about unused initializers
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    in_name = sess.get_inputs()[0].name
    return sess.run(None, {in_name: x})[0], ort.__version__


def rel_l2(a, ref):
    a, ref = a.astype(np.float64), ref.astype(np.float64)
    n = np.linalg.norm(ref)
    return float(np.linalg.norm(a - ref) / n) if n > 0 else float(np.linalg.norm(a - ref))


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnx {onnx.__version__}")
    meta = {"torch": torch.__version__, "torchvision": torchvision.__version__, "batch": BATCH,
            "models": []}
    failed = 0
    for name, ctor in MODELS:
        t0 = time.perf_counter()
        entry = {"name": name, "onnx": f"{name}.onnx", "input_file": f"{name}_input.npy",
                 "ort_file": f"{name}_ort.npy", "input_name": "input", "output_name": "output",
                 "batch": BATCH, "ok": False}
        meta["models"].append(entry)
        try:
            model = build(ctor)
            path = os.path.join(out, entry["onnx"])
            exporter, notes = export(model, path)
            entry["exporter"], entry["export_notes"] = exporter, notes
            m = onnx.load(path)
            onnx.checker.check_model(m)
            inits = {t.name for t in m.graph.initializer}
            ins = [v for v in m.graph.input if v.name not in inits]
            entry["input_name"] = ins[0].name
            entry["output_name"] = m.graph.output[0].name
            d0 = ins[0].type.tensor_type.shape.dim[0]
            entry["batch_dim"] = d0.dim_param if d0.dim_param else d0.dim_value
            entry["opset"] = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
            entry["operators"] = dict(sorted(collections.Counter(n.op_type for n in m.graph.node).items()))
            if entry["input_name"] != "input" or entry["output_name"] != "output":
                notes.append(f"names are {entry['input_name']!r} / {entry['output_name']!r}, "
                             f"not 'input' / 'output'")
            if not isinstance(entry["batch_dim"], str):
                notes.append(f"the batch dimension is fixed at {entry['batch_dim']}, not symbolic")
            x = seeded_input()
            np.save(os.path.join(out, entry["input_file"]), x)
            ref, ort_version = ort_run(path, x)
            np.save(os.path.join(out, entry["ort_file"]), np.ascontiguousarray(ref.astype(np.float32)))
            entry["onnxruntime"] = ort_version
            entry["ort_shape"] = list(ref.shape)
            torch_out = model(torch.from_numpy(x)).numpy()
            entry["torch_cpu_vs_ort_rel_l2"] = rel_l2(torch_out, ref)
            entry["ok"] = True
            print(f"{name}: {exporter}, opset {entry['opset']}, batch dim {entry['batch_dim']!r}, "
                  f"{sum(entry['operators'].values())} nodes {entry['operators']}; ONNX Runtime output "
                  f"{list(ref.shape)}; PyTorch (CPU) vs ONNX Runtime relative L2 "
                  f"{entry['torch_cpu_vs_ort_rel_l2']:.2e} ({time.perf_counter() - t0:.1f} s)")
            for n in notes:
                print(f"  note: {n}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            entry["error"] = f"{type(e).__name__}: {e}"
            print(f"FAIL {name}: {entry['error']}")
            traceback.print_exc()
    with open(os.path.join(out, "torchvision.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"export_torchvision: {len(MODELS) - failed} of {len(MODELS)} models written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
