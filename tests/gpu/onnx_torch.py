#!/usr/bin/env python3
"""tests/gpu/onnx_torch.py - run an ONNX graph in PyTorch eager mode: a
torch.nn.Module built from the .onnx file, its initializers held as tensors on
the device (CUDA), its nodes executed in order through torch /
torch.nn.functional (cuDNN convolutions, cuBLAS matrix products), as a
hand-written PyTorch port of the model would run. It is the PyTorch side of
tests/gpu/engine_latency.py for models that have no torchvision
implementation (BlazeFace).

    import onnx_torch
    m = onnx_torch.OnnxModule("model.onnx", device="cuda")
    with torch.inference_mode():
        y = m(x)                  # one tensor, or a tuple for several outputs

Everything that can be worked out ahead is worked out when the module is
built: attributes are parsed, subgraphs of constants (ConstantOfShape of a
constant shape, Shape of nothing, ...) are evaluated once, asymmetric
paddings are turned into F.pad arguments, Gemm's operands are laid out for
F.linear. A forward call then only launches the kernels, one node after the
other, and drops each intermediate after its last reader (as eager code
does). Integer tensors computed from shapes (Shape, Gather on a shape, ...)
stay on the host and never touch the GPU.

Supported operators: Abs Add AveragePool BatchNormalization Cast Ceil Clip
Concat Constant ConstantOfShape Conv Div Dropout Elu Equal Erf Exp Expand
Flatten Floor Gather Gemm GlobalAveragePool GlobalMaxPool Greater HardSigmoid
HardSwish Identity LeakyRelu Less Log MatMul Max MaxPool Min Mul Neg Not Pad
Pow PRelu Reciprocal ReduceMax ReduceMean ReduceMin ReduceSum Relu Reshape
Shape Sigmoid Slice Softmax Split Sqrt Squeeze Sub Sum Tanh Transpose
Unsqueeze Where. Anything else is refused when the module is built, with an
error naming the operator and the node.

As a command, it checks itself against ONNX Runtime (CPU, graph
optimizations disabled) on random inputs (uniform in [-1, 1) for floats, or
the .npy files given) and prints the relative L2 error of each output:

    python3 tests/gpu/onnx_torch.py MODEL.onnx [--input NAME=FILE.npy]...
        [--batch N] [--device cuda] [--tol 1e-4] [--tf32]

exit status 0 when every output is within --tol (exact FP32 by default:
TF32 off for cuDNN and cuBLAS unless --tf32), 1 otherwise, 2 on bad usage.
"""
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F

# ONNX TensorProto element types -> torch dtypes
_DTYPES = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32,
    7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16,
}

HOST = "host"
DEV = "dev"


class UnsupportedModel(Exception):
    pass


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _ints(t):
    """A 1-D (or scalar) integer tensor as a list of Python ints."""
    if isinstance(t, (list, tuple)):
        return [int(v) for v in t]
    return [int(v) for v in t.reshape(-1).tolist()]


def _torch_pad_from_onnx(pads, rank_spatial):
    """ONNX pads [b1..bn, e1..en] of the last n dims -> F.pad's tuple (last
    dim first)."""
    out = []
    for d in reversed(range(rank_spatial)):
        out += [pads[d], pads[d + rank_spatial]]
    return tuple(out)


class OnnxModule(torch.nn.Module):
    """An ONNX model as a torch.nn.Module; see the module docstring.

    path: the .onnx file. device: where the initializers and the computation
    live ("cuda" by default). The module is bound to that device at build
    time: build another one for another device rather than calling .to()."""

    def __init__(self, path, device="cuda"):
        super().__init__()
        self.device = torch.device(device)
        model = onnx.load(path) if isinstance(path, str) else path
        self.path = path if isinstance(path, str) else "<model>"
        self.opset = 1
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        g = model.graph
        if any(n.domain not in ("", "ai.onnx") for n in g.node):
            bad = sorted({f"{n.domain}::{n.op_type}" for n in g.node if n.domain not in ("", "ai.onnx")})
            raise UnsupportedModel(f"{self.path}: operators outside the default ONNX domain: {', '.join(bad)}")
        missing = sorted({n.op_type for n in g.node if not hasattr(self, "_op_" + n.op_type)})
        if missing:
            where = {}
            for n in g.node:
                if n.op_type in missing and n.op_type not in where:
                    where[n.op_type] = n.name or n.output[0]
            raise UnsupportedModel(f"{self.path}: unsupported operator(s) " +
                                   ", ".join(f"{op} (first at node '{where[op]}')" for op in missing))

        self._slot = {}           # value name -> slot index
        self._loc = {}            # value name -> HOST / DEV
        self._const = {}          # value name -> tensor (constants known at build time)
        n_buf = 0
        with torch.no_grad():
            init_names = set()
            for t in g.initializer:
                a = numpy_helper.to_array(t)
                init_names.add(t.name)
                tt = torch.from_numpy(np.array(a, order="C", copy=True))  # (keeps rank 0)
                if tt.is_floating_point():
                    tt = tt.to(self.device)
                    self._loc[t.name] = DEV
                    self.register_buffer(f"init{n_buf}", tt, persistent=False)
                    n_buf += 1
                else:
                    self._loc[t.name] = HOST
                self._const[t.name] = tt
            self.input_names = [v.name for v in g.input if v.name not in init_names]
            self.output_names = [v.name for v in g.output]
            for name in self.input_names:
                self._loc[name] = DEV
            steps = []      # (fn, input names, output names, node)
            for node in g.node:
                fn = getattr(self, "_op_" + node.op_type)(node, _attrs(node))
                ins = list(node.input)
                outs = [o for o in node.output]
                if all((not i) or i in self._const for i in ins):
                    # every input known now: evaluate once, keep the result
                    args = [self._const[i] if i else None for i in ins]
                    try:
                        res = fn(*args)
                    except Exception as e:  # noqa: BLE001
                        raise UnsupportedModel(f"{self.path}: node '{node.name}' ({node.op_type}) failed "
                                               f"on its constant inputs: {e}") from e
                    res = res if isinstance(res, (tuple, list)) else (res,)
                    for o, r in zip(outs, res):
                        if o:
                            self._const[o] = r
                            self._loc[o] = DEV if (isinstance(r, torch.Tensor) and r.device.type != "cpu") else HOST
                    continue
                steps.append((fn, ins, outs, node))
            produced = set(self._const) | set(self.input_names)
            for _, _, outs, _ in steps:
                produced.update(outs)
            for name in self.output_names:
                if name not in produced:
                    raise UnsupportedModel(f"{self.path}: graph output '{name}' is produced by no node")

        # Slots: constants first (filled once), then everything computed.
        names = list(self._const.keys())
        for _, ins, outs, _ in steps:
            names += [o for o in outs if o]
        names += [n for n in self.input_names]
        for n in names:
            if n not in self._slot:
                self._slot[n] = len(self._slot)
        self._template = [None] * len(self._slot)
        for n, t in self._const.items():
            self._template[self._slot[n]] = t
        last_use = {}
        for k, (_, ins, _, _) in enumerate(steps):
            for i in ins:
                if i:
                    last_use[i] = k
        keep = set(self.output_names) | set(self._const)
        absent = len(self._template)        # read for an absent optional input: always None
        trash = absent + 1                  # written for an unnamed output
        self._template += [None, None]
        self._steps = []
        for k, (fn, ins, outs, node) in enumerate(steps):
            for i in ins:
                if i and i not in self._slot:
                    raise UnsupportedModel(f"{self.path}: node '{node.name}' reads '{i}', which nothing "
                                           f"produces before it")
            in_slots = tuple(self._slot[i] if i else absent for i in ins)
            out_slots = tuple(self._slot[o] if o else trash for o in outs)
            dead = tuple(self._slot[i] for i in set(ins) if i and last_use.get(i) == k and i not in keep)
            self._steps.append((fn, in_slots, out_slots, len(outs) == 1, dead))
        self._in_slots = tuple(self._slot[n] for n in self.input_names)
        self._out_slots = tuple(self._slot[n] for n in self.output_names)

    # ------------------------------------------------------------ running

    def forward(self, *inputs):
        if len(inputs) != len(self._in_slots):
            raise TypeError(f"{self.path}: takes {len(self._in_slots)} inputs "
                            f"({', '.join(self.input_names)}), got {len(inputs)}")
        v = list(self._template)
        for s, x in zip(self._in_slots, inputs):
            v[s] = x
        for fn, ins, outs, single, dead in self._steps:
            r = fn(*[v[i] for i in ins])
            if single:
                v[outs[0]] = r
            else:
                for o, t in zip(outs, r):
                    v[o] = t
            for d in dead:
                v[d] = None
        if len(self._out_slots) == 1:
            return v[self._out_slots[0]]
        return tuple(v[s] for s in self._out_slots)

    # ------------------------------------------------------------ helpers

    def _c(self, node, i):
        """The constant value of input i of node, or None when it is computed
        at run time (or absent)."""
        if i >= len(node.input) or not node.input[i]:
            return None
        return self._const.get(node.input[i])

    def _has(self, node, i):
        return i < len(node.input) and bool(node.input[i])

    def _out_loc(self, node, loc):
        for o in node.output:
            if o:
                self._loc[o] = loc

    def _dev_const(self, node, i):
        """Constant input i on the device (moved once, now)."""
        c = self._c(node, i)
        return None if c is None else c.to(self.device)

    def _placed(self, node):
        """For ops mixing several tensors: if any input lives on the device,
        the result does too and host inputs are moved (constants now, others
        at run time, by the caller through _to_loc). Returns the location."""
        locs = [self._loc.get(i, DEV) for i in node.input if i]
        loc = DEV if DEV in locs else HOST
        self._out_loc(node, loc)
        return loc

    def _to_loc(self, loc):
        dev = self.device
        if loc == DEV:
            return lambda t: t if t.device.type == dev.type else t.to(dev)
        return lambda t: t if t.device.type == "cpu" else t.cpu()

    # ------------------------------------------------------------ operators
    # Each _op_X(node, attrs) returns fn(*inputs) -> output or tuple of outputs,
    # with every attribute and constant input already resolved.

    # ---- elementwise, one input

    def _unary(self, node, f):
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        return f

    def _op_Relu(self, node, a):
        return self._unary(node, F.relu)

    def _op_Sigmoid(self, node, a):
        return self._unary(node, torch.sigmoid)

    def _op_Tanh(self, node, a):
        return self._unary(node, torch.tanh)

    def _op_Exp(self, node, a):
        return self._unary(node, torch.exp)

    def _op_Log(self, node, a):
        return self._unary(node, torch.log)

    def _op_Sqrt(self, node, a):
        return self._unary(node, torch.sqrt)

    def _op_Neg(self, node, a):
        return self._unary(node, torch.neg)

    def _op_Abs(self, node, a):
        return self._unary(node, torch.abs)

    def _op_Reciprocal(self, node, a):
        return self._unary(node, torch.reciprocal)

    def _op_Floor(self, node, a):
        return self._unary(node, torch.floor)

    def _op_Ceil(self, node, a):
        return self._unary(node, torch.ceil)

    def _op_Erf(self, node, a):
        return self._unary(node, torch.erf)

    def _op_Not(self, node, a):
        return self._unary(node, torch.logical_not)

    def _op_Identity(self, node, a):
        return self._unary(node, lambda x: x)

    def _op_Dropout(self, node, a):
        if len(node.output) > 1 and node.output[1]:
            raise UnsupportedModel(f"{self.path}: Dropout node '{node.name}' asks for its mask output")
        return self._unary(node, lambda x, *rest: x)

    def _op_LeakyRelu(self, node, a):
        alpha = float(a.get("alpha", 0.01))
        return self._unary(node, lambda x: F.leaky_relu(x, alpha))

    def _op_Elu(self, node, a):
        alpha = float(a.get("alpha", 1.0))
        return self._unary(node, lambda x: F.elu(x, alpha))

    def _op_HardSwish(self, node, a):
        return self._unary(node, F.hardswish)

    def _op_HardSigmoid(self, node, a):
        alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        if abs(alpha - 1.0 / 6.0) < 1e-7 and beta == 0.5:
            return self._unary(node, F.hardsigmoid)   # what torch's own layers run
        return self._unary(node, lambda x: torch.clamp(x * alpha + beta, 0.0, 1.0))

    def _op_Clip(self, node, a):
        if self.opset < 11:
            lo, hi = a.get("min"), a.get("max")
        else:
            lo = self._c(node, 1) if self._has(node, 1) else None
            hi = self._c(node, 2) if self._has(node, 2) else None
            if (self._has(node, 1) and lo is None) or (self._has(node, 2) and hi is None):
                # bounds computed at run time
                self._out_loc(node, self._loc.get(node.input[0], DEV))
                return lambda x, lo=None, hi=None: torch.clamp(x, lo, hi)
            lo = None if lo is None else float(lo.reshape(-1)[0])
            hi = None if hi is None else float(hi.reshape(-1)[0])
        if lo is None and hi is None:
            return self._unary(node, lambda x, *r: x)
        if lo == 0.0 and hi == 6.0:
            return self._unary(node, lambda x, *r: F.relu6(x))
        return self._unary(node, lambda x, *r: torch.clamp(x, lo, hi))

    def _op_Softmax(self, node, a):
        axis = int(a.get("axis", -1 if self.opset >= 13 else 1))
        if self.opset >= 13:
            return self._unary(node, lambda x: torch.softmax(x, axis))

        def f(x):  # opset < 13: softmax over the input coerced to 2-D at axis
            ax = axis % x.dim()
            if ax == x.dim() - 1:
                return torch.softmax(x, -1)
            return torch.softmax(x.flatten(ax), -1).reshape(x.shape) if ax > 0 else \
                torch.softmax(x.reshape(1, -1), -1).reshape(x.shape)
        return self._unary(node, f)

    def _op_Cast(self, node, a):
        to = int(a["to"])
        if to not in _DTYPES:
            raise UnsupportedModel(f"{self.path}: Cast node '{node.name}' to ONNX type {to}")
        dt = _DTYPES[to]
        return self._unary(node, lambda x: x.to(dt))

    # ---- elementwise, several inputs

    def _binary(self, node, f):
        loc = self._placed(node)
        conv = self._to_loc(loc)
        consts = [self._c(node, i) for i in range(len(node.input))]
        consts = [None if c is None else conv(c) for c in consts]
        if all(c is None for c in consts):
            if loc == HOST or all(self._loc.get(i) == DEV for i in node.input):
                return f
            return lambda *xs: f(*[conv(x) for x in xs])
        # a constant operand: bake the (moved) tensor in
        mixed = not all(self._loc.get(i) == loc for i in node.input if i not in self._const)
        if len(node.input) == 2:
            ca, cb = consts
            if ca is None:
                return (lambda x, _: f(conv(x), cb)) if mixed else (lambda x, _: f(x, cb))
            if cb is None:
                return (lambda _, y: f(ca, conv(y))) if mixed else (lambda _, y: f(ca, y))
        return lambda *xs: f(*[c if c is not None else conv(x) for c, x in zip(consts, xs)])

    def _op_Add(self, node, a):
        return self._binary(node, torch.add)

    def _op_Sub(self, node, a):
        return self._binary(node, torch.sub)

    def _op_Mul(self, node, a):
        return self._binary(node, torch.mul)

    def _op_Div(self, node, a):
        def div(x, y):
            if x.is_floating_point():
                return torch.div(x, y)
            return torch.div(x, y, rounding_mode="trunc")
        return self._binary(node, div)

    def _op_Pow(self, node, a):
        e = self._c(node, 1)
        if e is not None and e.numel() == 1 and float(e.reshape(-1)[0]) == 2.0:
            return self._binary(node, lambda x, _: x * x)
        return self._binary(node, lambda x, y: torch.pow(x, y.to(x.dtype)))

    def _op_PRelu(self, node, a):
        return self._binary(node, lambda x, s: torch.where(x >= 0, x, x * s))

    def _op_Equal(self, node, a):
        return self._binary(node, torch.eq)

    def _op_Less(self, node, a):
        return self._binary(node, torch.lt)

    def _op_Greater(self, node, a):
        return self._binary(node, torch.gt)

    def _op_Where(self, node, a):
        return self._binary(node, torch.where)

    def _variadic(self, node, f):
        def g(*xs):
            r = xs[0]
            for x in xs[1:]:
                r = f(r, x)
            return r
        return self._binary(node, g)

    def _op_Max(self, node, a):
        return self._variadic(node, torch.maximum)

    def _op_Min(self, node, a):
        return self._variadic(node, torch.minimum)

    def _op_Sum(self, node, a):
        return self._variadic(node, torch.add)

    # ---- convolution, normalization, pooling

    def _op_Conv(self, node, a):
        w = self._dev_const(node, 1)
        if w is None:
            raise UnsupportedModel(f"{self.path}: Conv node '{node.name}' has a computed weight")
        b = self._dev_const(node, 2)
        nsp = w.dim() - 2
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}.get(nsp)
        if conv is None:
            raise UnsupportedModel(f"{self.path}: Conv node '{node.name}' with {nsp} spatial dimensions")
        k = list(a.get("kernel_shape", w.shape[2:]))
        strides = tuple(a.get("strides", [1] * nsp))
        dil = tuple(a.get("dilations", [1] * nsp))
        groups = int(a.get("group", 1))
        auto = _s(a.get("auto_pad", "NOTSET"))
        self._out_loc(node, DEV)
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            def f(x, *_):  # the padding depends on the input size
                pads = []
                for d in range(nsp):
                    n = x.shape[2 + d]
                    out = -(-n // strides[d])
                    total = max(0, (out - 1) * strides[d] + (k[d] - 1) * dil[d] + 1 - n)
                    small, big = total // 2, total - total // 2
                    pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
                pt = []
                for d in reversed(range(nsp)):
                    pt += list(pads[d])
                return conv(F.pad(x, pt), w, b, strides, 0, dil, groups)
            return f
        pads = [0] * (2 * nsp) if auto == "VALID" else list(a.get("pads", [0] * (2 * nsp)))
        if pads[:nsp] == pads[nsp:]:
            p = tuple(pads[:nsp])
            return lambda x, *_: conv(x, w, b, strides, p, dil, groups)
        pt = _torch_pad_from_onnx(pads, nsp)
        return lambda x, *_: conv(F.pad(x, pt), w, b, strides, 0, dil, groups)

    def _op_BatchNormalization(self, node, a):
        if len([o for o in node.output if o]) > 1 or int(a.get("training_mode", 0)):
            raise UnsupportedModel(f"{self.path}: BatchNormalization node '{node.name}' in training mode")
        eps = float(a.get("epsilon", 1e-5))
        scale, bias, mean, var = (self._dev_const(node, i) for i in (1, 2, 3, 4))
        if any(t is None for t in (scale, bias, mean, var)):
            raise UnsupportedModel(f"{self.path}: BatchNormalization node '{node.name}' has computed parameters")
        self._out_loc(node, DEV)
        return lambda x, *_: F.batch_norm(x, mean, var, scale, bias, False, 0.0, eps)

    def _pool_args(self, node, a):
        k = tuple(a["kernel_shape"])
        nsp = len(k)
        strides = tuple(a.get("strides", [1] * nsp))
        auto = _s(a.get("auto_pad", "NOTSET"))
        if auto not in ("NOTSET", "VALID"):
            raise UnsupportedModel(f"{self.path}: {node.op_type} node '{node.name}' with auto_pad {auto}")
        pads = [0] * (2 * nsp) if auto == "VALID" else list(a.get("pads", [0] * (2 * nsp)))
        return k, nsp, strides, pads, bool(a.get("ceil_mode", 0))

    def _op_MaxPool(self, node, a):
        if len([o for o in node.output if o]) > 1:
            raise UnsupportedModel(f"{self.path}: MaxPool node '{node.name}' asks for its Indices output")
        k, nsp, strides, pads, ceil = self._pool_args(node, a)
        dil = tuple(a.get("dilations", [1] * nsp))
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
        self._out_loc(node, DEV)
        if pads[:nsp] == pads[nsp:] and all(pads[d] <= k[d] // 2 for d in range(nsp)):
            p = tuple(pads[:nsp])
            return lambda x: pool(x, k, strides, p, dil, ceil)
        pt = _torch_pad_from_onnx(pads, nsp)
        return lambda x: pool(F.pad(x, pt, value=-math.inf), k, strides, 0, dil, ceil)

    def _op_AveragePool(self, node, a):
        k, nsp, strides, pads, ceil = self._pool_args(node, a)
        include = bool(a.get("count_include_pad", 0))
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
        if include and ceil and any(pads):
            # torch and ONNX count a window that runs past the padding differently
            raise UnsupportedModel(f"{self.path}: AveragePool node '{node.name}': ceil_mode 1 with "
                                   f"count_include_pad 1 and pads {pads}")
        self._out_loc(node, DEV)
        if pads[:nsp] == pads[nsp:] and all(pads[d] <= k[d] // 2 for d in range(nsp)):
            p = tuple(pads[:nsp])
            return lambda x: pool(x, k, strides, p, ceil, include)
        if include and not ceil:
            pt = _torch_pad_from_onnx(pads, nsp)
            return lambda x: pool(F.pad(x, pt), k, strides, 0, False, True)
        raise UnsupportedModel(f"{self.path}: AveragePool node '{node.name}': asymmetric or large pads "
                               f"{pads} with count_include_pad 0 or ceil_mode 1")

    def _op_GlobalAveragePool(self, node, a):
        self._out_loc(node, DEV)

        def f(x):
            if x.dim() == 4:
                return F.adaptive_avg_pool2d(x, 1)   # what torchvision's models run
            return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
        return f

    def _op_GlobalMaxPool(self, node, a):
        self._out_loc(node, DEV)

        def f(x):
            if x.dim() == 4:
                return F.adaptive_max_pool2d(x, 1)
            return x.amax(dim=tuple(range(2, x.dim())), keepdim=True)
        return f

    # ---- matrix products

    def _op_Gemm(self, node, a):
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
        B = self._dev_const(node, 1)
        C = self._dev_const(node, 2) if self._has(node, 2) else None
        if self._has(node, 2) and C is None:
            raise UnsupportedModel(f"{self.path}: Gemm node '{node.name}' has a computed C")
        self._out_loc(node, DEV)
        if C is not None and beta != 1.0:
            C = C * beta
        if B is not None and alpha == 1.0 and ta == 0:
            # nn.Linear's own call: y = x W^T + b with W [N, K]
            W = (B if tb else B.t()).contiguous()
            if C is None or (C.dim() <= 2 and C.numel() == W.shape[0] and (C.dim() < 2 or C.shape[0] == 1)):
                bias = None if C is None else C.reshape(-1).contiguous()
                return lambda x, *_: F.linear(x, W, bias)
            return lambda x, *_: torch.addmm(C, x, W.t())

        def f(x, y=None, *_):
            A = x.t() if ta else x
            Bm = B if B is not None else y
            Bm = Bm.t() if tb else Bm
            if C is None:
                return torch.mm(A, Bm) * alpha if alpha != 1.0 else torch.mm(A, Bm)
            return torch.addmm(C, A, Bm, beta=1.0, alpha=alpha)
        return f

    def _op_MatMul(self, node, a):
        return self._binary(node, torch.matmul)

    # ---- shapes and layout

    def _op_Shape(self, node, a):
        start, end = a.get("start", 0), a.get("end")
        self._out_loc(node, HOST)
        return lambda x: torch.tensor(x.shape[start:end] if end is not None else x.shape[start:],
                                      dtype=torch.int64)

    def _op_Flatten(self, node, a):
        axis = int(a.get("axis", 1))
        self._out_loc(node, self._loc.get(node.input[0], DEV))

        def f(x):
            ax = axis if axis >= 0 else axis + x.dim()
            if ax == 0:
                return x.reshape(1, -1)
            if ax == x.dim():
                return x.reshape(-1, 1)
            y = x.flatten(ax)
            return y.flatten(0, ax - 1) if ax > 1 else y
        return f

    def _op_Reshape(self, node, a):
        allowzero = int(a.get("allowzero", 0))
        shape = self._c(node, 1)
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if shape is not None:
            s = _ints(shape)
            if allowzero or 0 not in s:
                t = tuple(s)
                return lambda x, _: x.reshape(t)
            return lambda x, _: x.reshape([x.shape[i] if v == 0 else v for i, v in enumerate(s)])

        def f(x, sh):
            s = _ints(sh)
            if not allowzero:
                s = [x.shape[i] if v == 0 else v for i, v in enumerate(s)]
            return x.reshape(s)
        return f

    def _op_Transpose(self, node, a):
        perm = a.get("perm")
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if perm is None:
            return lambda x: x.permute(*reversed(range(x.dim())))
        p = tuple(perm)
        return lambda x: x.permute(p)

    def _op_Concat(self, node, a):
        axis = int(a["axis"])
        loc = self._placed(node)
        conv = self._to_loc(loc)
        consts = [None if c is None else conv(c) for c in (self._c(node, i) for i in range(len(node.input)))]
        if all(c is None for c in consts) and all(self._loc.get(i) == loc for i in node.input):
            return lambda *xs: torch.cat(xs, axis)
        return lambda *xs: torch.cat([c if c is not None else conv(x) for c, x in zip(consts, xs)], axis)

    def _op_Split(self, node, a):
        axis = int(a.get("axis", 0))
        n = len(node.output)
        if self.opset >= 13:
            sizes = self._c(node, 1)
            if self._has(node, 1) and sizes is None:
                raise UnsupportedModel(f"{self.path}: Split node '{node.name}' has computed sizes")
            sizes = None if sizes is None else _ints(sizes)
        else:
            sizes = a.get("split")
            sizes = None if sizes is None else list(sizes)
        self._out_loc(node, self._loc.get(node.input[0], DEV))

        def f(x, *_):
            if sizes is None:
                return torch.chunk(x, n, axis) if x.shape[axis] % n == 0 else \
                    torch.split(x, -(-x.shape[axis] // n), axis)
            return torch.split(x, sizes, axis)
        return f

    def _axes(self, node, a, from_opset):
        """axes as an attribute before `from_opset`, as input 1 from it on."""
        if self.opset < from_opset:
            ax = a.get("axes")
            return None if ax is None else list(ax)
        c = self._c(node, 1)
        if self._has(node, 1) and c is None:
            raise UnsupportedModel(f"{self.path}: {node.op_type} node '{node.name}' has computed axes")
        return None if c is None else _ints(c)

    def _op_Unsqueeze(self, node, a):
        axes = self._axes(node, a, 13)
        self._out_loc(node, self._loc.get(node.input[0], DEV))

        def f(x, *_):
            r = x.dim() + len(axes)
            for ax in sorted(v % r for v in axes):
                x = x.unsqueeze(ax)
            return x
        return f

    def _op_Squeeze(self, node, a):
        axes = self._axes(node, a, 13)
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if axes is None:
            return lambda x, *_: x.squeeze()

        def f(x, *_):
            for ax in sorted((v % x.dim() for v in axes), reverse=True):
                x = x.squeeze(ax)
            return x
        return f

    def _op_Expand(self, node, a):
        shape = self._c(node, 1)
        self._out_loc(node, self._loc.get(node.input[0], DEV))

        def f(x, sh):
            s = _ints(shape if shape is not None else sh)
            r = max(len(s), x.dim())
            s = [1] * (r - len(s)) + s
            xs = [1] * (r - x.dim()) + list(x.shape)
            return x.reshape(xs).expand([max(p, q) for p, q in zip(s, xs)])
        return f

    def _op_Gather(self, node, a):
        axis = int(a.get("axis", 0))
        loc = self._loc.get(node.input[0], DEV)
        self._out_loc(node, loc)
        conv = self._to_loc(loc)
        idx = self._c(node, 1)
        if idx is not None:
            idx = conv(idx.to(torch.int64))
            if idx.dim() == 0:
                i = int(idx)
                return lambda x, _: x.select(axis, i)

        def f(x, ind):
            ind = idx if idx is not None else conv(ind.to(torch.int64))
            ax = axis % x.dim()
            ind = torch.where(ind < 0, ind + x.shape[ax], ind)
            out = x.index_select(ax, ind.reshape(-1))
            return out.reshape(x.shape[:ax] + ind.shape + x.shape[ax + 1:])
        return f

    def _op_Slice(self, node, a):
        if self.opset < 10:
            starts, ends = list(a["starts"]), list(a["ends"])
            axes = list(a.get("axes", range(len(starts))))
            steps = [1] * len(starts)
        else:
            vals = [self._c(node, i) for i in range(1, 5)]
            for i in range(1, 5):
                if self._has(node, i) and vals[i - 1] is None:
                    raise UnsupportedModel(f"{self.path}: Slice node '{node.name}' has computed "
                                           f"starts/ends/axes/steps")
            starts, ends = _ints(vals[0]), _ints(vals[1])
            axes = _ints(vals[2]) if vals[2] is not None else list(range(len(starts)))
            steps = _ints(vals[3]) if vals[3] is not None else [1] * len(starts)
        if any(s == 0 for s in steps):
            raise UnsupportedModel(f"{self.path}: Slice node '{node.name}' with a step of 0")
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if any(s < 0 for s in steps):
            def g(x, *_):  # torch has no negative steps: gather the indices
                for s, e, ax, st in zip(starts, ends, axes, steps):
                    ax = ax % x.dim()
                    idx = list(range(*slice(s, e, st).indices(x.shape[ax])))
                    x = x.index_select(ax, torch.tensor(idx, dtype=torch.int64, device=x.device))
                return x
            return g

        def f(x, *_):
            idx = [slice(None)] * x.dim()
            for s, e, ax, st in zip(starts, ends, axes, steps):
                idx[ax % x.dim()] = slice(s, e, st)
            return x[tuple(idx)]
        return f

    def _op_Pad(self, node, a):
        mode = _s(a.get("mode", "constant"))
        if self.opset < 11:
            pads, value = list(a["pads"]), float(a.get("value", 0.0))
        else:
            p = self._c(node, 1)
            if p is None:
                raise UnsupportedModel(f"{self.path}: Pad node '{node.name}' has computed pads")
            pads = _ints(p)
            v = self._c(node, 2) if self._has(node, 2) else None
            if self._has(node, 2) and v is None:
                raise UnsupportedModel(f"{self.path}: Pad node '{node.name}' has a computed value")
            value = 0.0 if v is None else float(v.reshape(-1)[0])
            if self._has(node, 3):
                raise UnsupportedModel(f"{self.path}: Pad node '{node.name}' with axes")
        r = len(pads) // 2
        pt = list(_torch_pad_from_onnx(pads, r))
        while len(pt) > 2 and pt[-1] == 0 and pt[-2] == 0:   # outer dims without padding
            pt = pt[:-2]
        pt = tuple(pt)
        tmode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}.get(mode)
        if tmode is None:
            raise UnsupportedModel(f"{self.path}: Pad node '{node.name}' mode {mode}")
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if tmode == "constant":
            return lambda x, *_: F.pad(x, pt, "constant", value)
        return lambda x, *_: F.pad(x, pt, tmode)

    def _op_Constant(self, node, a):
        if "value" in a:
            arr = numpy_helper.to_array(a["value"])
        elif "value_float" in a:
            arr = np.array(a["value_float"], np.float32)
        elif "value_floats" in a:
            arr = np.array(a["value_floats"], np.float32)
        elif "value_int" in a:
            arr = np.array(a["value_int"], np.int64)
        elif "value_ints" in a:
            arr = np.array(a["value_ints"], np.int64)
        else:
            raise UnsupportedModel(f"{self.path}: Constant node '{node.name}' of kind {sorted(a)}")
        t = torch.from_numpy(np.array(arr, order="C", copy=True))
        if t.is_floating_point():
            t = t.to(self.device)
        return lambda: t

    def _op_ConstantOfShape(self, node, a):
        v = a.get("value")
        arr = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
        fill = torch.from_numpy(arr.copy())
        dev = self.device if fill.is_floating_point() else torch.device("cpu")
        self._out_loc(node, DEV if fill.is_floating_point() else HOST)
        return lambda sh: torch.full(_ints(sh), fill.item(), dtype=fill.dtype, device=dev)

    # ---- reductions

    def _reduce(self, node, a, f, axes_input_from):
        keep = bool(a.get("keepdims", 1))
        axes = self._axes(node, a, axes_input_from)
        noop = bool(a.get("noop_with_empty_axes", 0))
        self._out_loc(node, self._loc.get(node.input[0], DEV))
        if not axes:
            if noop:
                return lambda x, *_: x
            return lambda x, *_: f(x, tuple(range(x.dim())), keep)
        ax = tuple(axes)
        return lambda x, *_: f(x, ax, keep)

    def _op_ReduceMean(self, node, a):
        return self._reduce(node, a, lambda x, d, k: x.mean(dim=d, keepdim=k), 18)

    def _op_ReduceSum(self, node, a):
        return self._reduce(node, a, lambda x, d, k: x.sum(dim=d, keepdim=k), 13)

    def _op_ReduceMax(self, node, a):
        return self._reduce(node, a, lambda x, d, k: x.amax(dim=d, keepdim=k), 18)

    def _op_ReduceMin(self, node, a):
        return self._reduce(node, a, lambda x, d, k: x.amin(dim=d, keepdim=k), 18)


# ---------------------------------------------------------------- command

def _np_dtype(elem_type):
    return {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 2: np.uint8, 11: np.float64}[elem_type]


def main(argv):
    import argparse
    import time
    ap = argparse.ArgumentParser(description="Check OnnxModule against ONNX Runtime (CPU).")
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--batch", type=int, default=1, help="value of a symbolic leading dimension")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tf32", action="store_true", help="let cuDNN and cuBLAS use TF32")
    args = ap.parse_args(argv[1:])
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32

    model = onnx.load(args.model)
    inits = {t.name for t in model.graph.initializer}
    given = {}
    for s in args.input:
        if "=" not in s:
            print(f"onnx_torch: --input takes NAME=FILE.npy, not '{s}'", file=sys.stderr)
            return 2
        k, v = s.split("=", 1)
        given[k] = np.load(v)
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if vi.name in given:
            feeds[vi.name] = given[vi.name]
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (args.batch if i == 0 else 1)
                 for i, d in enumerate(tt.shape.dim)]
        dt = _np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.floating):
            feeds[vi.name] = rng.uniform(-1, 1, shape).astype(dt)
        else:
            feeds[vi.name] = rng.integers(0, 4, shape).astype(dt)
    t0 = time.perf_counter()
    try:
        mod = OnnxModule(args.model, device=args.device)
    except UnsupportedModel as e:
        print(f"onnx_torch: {e}", file=sys.stderr)
        return 1
    t_build = time.perf_counter() - t0
    with torch.inference_mode():
        xs = [torch.from_numpy(feeds[n]).to(args.device) for n in mod.input_names]
        ys = mod(*xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        ys = [y.float().cpu().numpy() if y.is_floating_point() else y.cpu().numpy() for y in ys]

    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3   # no warnings about unused initializers
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    refs = sess.run(mod.output_names, feeds)
    bad = 0
    for name, y, r in zip(mod.output_names, ys, refs):
        if y.shape != r.shape:
            print(f"DIFFER  {name}: shape {y.shape} against ONNX Runtime's {r.shape}")
            bad += 1
            continue
        if r.dtype.kind in "biu":
            err = float(np.count_nonzero(y != r))
            ok, what = err == 0, "mismatched elements"
        else:
            n = float(np.linalg.norm(r.astype(np.float64)))
            d = float(np.linalg.norm(y.astype(np.float64) - r.astype(np.float64)))
            err = d / n if n > 0 else d
            ok, what = bool(np.isfinite(err)) and err <= args.tol, "relative L2" if n > 0 else "absolute L2"
        print(f"{'ok     ' if ok else 'DIFFER '} {name}: {what} {err:.3g} (shape {list(y.shape)})")
        bad += not ok
    print(f"onnx_torch: {args.model}: {len(mod._steps)} nodes run per call "
          f"({len(model.graph.node) - len(mod._steps)} evaluated at build), built in {t_build:.2f} s; "
          f"{'all outputs within' if not bad else f'{bad} output(s) beyond'} {args.tol:g} of ONNX Runtime")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
