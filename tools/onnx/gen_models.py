#!/usr/bin/python3
"""tools/onnx/gen_models.py - write the small ONNX models that vramkit's
engine is checked on against ONNX Runtime, one or more per supported operator
and attribute variant, plus a few mixed networks, and OUTDIR/manifest.json.

    /usr/bin/python3 tools/onnx/gen_models.py OUTDIR

Run it with Debian's python3 (python3-onnx, python3-numpy). Every model is
float32 with fixed weights (numpy's default_rng seeded from the model name),
initializers stored as raw_data, checked with onnx.checker, and named after
what it covers; its graph outputs carry the shapes ONNX shape inference
finds. manifest.json lists per model: file, opset, description, inputs
(name, shape with symbolic dimensions as strings, dtype), outputs, and, for
models with symbolic dimensions, "dims": the values the references use
(passed to ort_run.js as --dim NAME=VALUE).
"""

import json
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
DTYPE_NAMES = {F: "float32", I64: "int64", TensorProto.INT32: "int32",
               TensorProto.UINT8: "uint8", TensorProto.BOOL: "bool"}


class Builder:
    """One model under construction: nodes, graph inputs, initializers."""

    def __init__(self, name, desc, opset=13):
        self.name, self.desc, self.opset = name, desc, opset
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes, self.inputs, self.inits, self.outputs = [], [], [], []
        self.dims = {}
        self.out_shapes = {}
        self.count = 0

    def input(self, name, shape, dtype=F):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def const(self, name, array):
        """An initializer (raw_data) holding `array` as is."""
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, lo=-1.0, hi=1.0):
        return self.const(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def ints(self, name, values):
        return self.const(name, np.array(values, dtype=np.int64))

    def floats(self, name, values):
        return self.const(name, np.array(values, dtype=np.float32))

    def node(self, op, inputs, n_out=1, outputs=None, **attrs):
        if outputs is None:
            outputs = []
            for _ in range(n_out):
                self.count += 1
                outputs.append(f"t{self.count}")
        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"{op}_{len(self.nodes)}", **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def constant(self, array=None, **attr):
        """A Constant node: a tensor, or value_float / value_ints / ... ."""
        if array is not None:
            attr = {"value": numpy_helper.from_array(np.asarray(array))}
        return self.node("Constant", [], **attr)

    def output(self, name, shape=None):
        """Mark `name` a graph output; `shape` where shape inference (onnx
        1.12) cannot find it, e.g. a Reshape to a Constant's value_ints."""
        self.outputs.append(name)
        if shape is not None:
            self.out_shapes[name] = shape

    def build(self):
        # Outputs first untyped; shape inference then gives their types and
        # shapes, which replace the placeholders.
        outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in self.outputs]
        graph = helper.make_graph(self.nodes, self.name, self.inputs, outs, initializer=self.inits)
        model = helper.make_model(graph, producer_name="vramkit-gen_models",
                                  opset_imports=[helper.make_opsetid("", self.opset)])
        model.doc_string = self.desc
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for i, o in enumerate(self.outputs):
            v = known.get(o)
            if v is None or v.type.tensor_type.elem_type == TensorProto.UNDEFINED:
                raise RuntimeError(f"{self.name}: shape inference gave no type for output {o}")
            model.graph.output[i].CopyFrom(v)
            if o in self.out_shapes:
                # newer onnx infers what 1.12 could not: where it infers the
                # whole shape, it must agree with the explicit one
                inferred = dims_of(v) if v.type.tensor_type.HasField("shape") else None
                if inferred and all(isinstance(d, int) and d > 0 for d in inferred) and \
                        inferred != list(self.out_shapes[o]):
                    raise RuntimeError(f"{self.name}: output {o}: inferred shape {inferred} "
                                       f"is not the explicit {self.out_shapes[o]}")
                model.graph.output[i].CopyFrom(
                    helper.make_tensor_value_info(o, v.type.tensor_type.elem_type, self.out_shapes[o]))
        try:
            onnx.checker.check_model(model, full_check=True)
        except onnx.checker.ValidationError as e:
            raise RuntimeError(f"{self.name}: {e}") from None
        return model


def dims_of(vi):
    return [d.dim_param if d.dim_param else d.dim_value for d in vi.type.tensor_type.shape.dim]


MODELS = []


def model(fn):
    MODELS.append(fn)
    return fn


def unary(name, desc, op, shape=(2, 3, 4, 5), scale=None, opset=13, **attrs):
    """X (optionally times a Constant `scale`, to reach saturated ranges) -> op."""
    b = Builder(name, desc, opset)
    x = b.input("X", list(shape))
    if scale is not None:
        x = b.node("Mul", [x, b.constant(np.array(scale, dtype=np.float32))])
    b.output(b.node(op, [x], **attrs))
    return b


# ---------------------------------------------------------------- Conv

def conv(name, desc, xshape, wshape, bias=True, opset=13, kernel_attr=False, **attrs):
    b = Builder(name, desc, opset)
    ins = [b.input("X", list(xshape)), b.weight("W", wshape)]
    if bias:
        ins.append(b.weight("B", [wshape[0]]))
    if kernel_attr:
        attrs["kernel_shape"] = list(wshape[2:])
    b.output(b.node("Conv", ins, **attrs))
    return b


@model
def _conv():
    return [
        conv("conv_notset_asym_pads_bias", "Conv 3x3, auto_pad NOTSET, explicit asymmetric pads [1,0,2,1], bias",
             (1, 3, 8, 8), (4, 3, 3, 3), pads=[1, 0, 2, 1], kernel_attr=True),
        conv("conv_strides_dilations_nobias", "Conv 3x3, strides [2,3], dilations [2,1], pads 1, no bias",
             (1, 2, 11, 10), (3, 2, 3, 3), bias=False, strides=[2, 3], dilations=[2, 1], pads=[1, 1, 1, 1]),
        conv("conv_same_upper_k3x4_s2", "Conv 3x4 kernel, stride 2, auto_pad SAME_UPPER (odd padding extra at the end)",
             (1, 3, 7, 8), (4, 3, 3, 4), auto_pad="SAME_UPPER", strides=[2, 2]),
        conv("conv_same_lower_k3x4_s2", "Conv 3x4 kernel, stride 2, auto_pad SAME_LOWER (odd padding extra at the start)",
             (1, 3, 7, 8), (4, 3, 3, 4), auto_pad="SAME_LOWER", strides=[2, 2]),
        # (ONNX Runtime refuses dilations with SAME_UPPER/SAME_LOWER.)
        conv("conv_same_upper_k5x2_s1_nobias", "Conv 5x2 kernel, stride 1, auto_pad SAME_UPPER, no bias",
             (1, 2, 9, 6), (3, 2, 5, 2), bias=False, auto_pad="SAME_UPPER"),
        conv("conv_valid_s2", "Conv 3x2 kernel, stride 2, auto_pad VALID",
             (1, 3, 9, 8), (5, 3, 3, 2), auto_pad="VALID", strides=[2, 2], kernel_attr=True),
        conv("conv_grouped_g2", "Conv group 2 (4 in, 6 out channels), pads 1, bias",
             (1, 4, 6, 6), (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1]),
        conv("conv_depthwise_s2", "depthwise Conv (group = channels = 4), 3x3, stride 2, pads 1, bias",
             (1, 4, 9, 9), (4, 1, 3, 3), group=4, strides=[2, 2], pads=[1, 1, 1, 1]),
        conv("conv_depthwise_mult2_nobias", "depthwise Conv with channel multiplier 2 (group 3, 6 out), 5x5, pads 2",
             (1, 3, 8, 7), (6, 1, 5, 5), bias=False, group=3, pads=[2, 2, 2, 2]),
        conv("conv_pointwise_batch2", "Conv 1x1, batch 2, bias",
             (2, 5, 4, 3), (7, 5, 1, 1)),
    ]


@model
def _conv_transpose():
    def ct(name, desc, xshape, wshape, bias=True, opset=13, **attrs):
        b = Builder(name, desc, opset)
        ins = [b.input("X", list(xshape)), b.weight("W", wshape)]
        if bias:
            ins.append(b.weight("B", [wshape[1] * attrs.get("group", 1)]))
        b.output(b.node("ConvTranspose", ins, **attrs))
        return b
    return [
        ct("convtranspose_basic_k3x2", "ConvTranspose 3x2 kernel, stride 1, no pads, bias", (1, 3, 4, 5), (3, 2, 3, 2)),
        ct("convtranspose_s2_pads_outpad", "ConvTranspose 3x3, strides 2, pads 1, output_padding [1,1], bias",
           (1, 4, 5, 5), (4, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
        ct("convtranspose_group2_k4s2_nobias", "ConvTranspose group 2, 4x4 kernel, strides 2, pads 1, no bias",
           (1, 4, 4, 4), (4, 2, 4, 4), bias=False, group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
        ct("convtranspose_asym_pads_s2x3_outpad", "ConvTranspose strides [2,3], asymmetric pads [0,1,1,0], "
           "output_padding [1,2], batch 2", (2, 2, 3, 4), (2, 3, 3, 3), strides=[2, 3], pads=[0, 1, 1, 0],
           output_padding=[1, 2]),
    ]


@model
def _batchnorm():
    out = []
    for name, desc, opset, eps in (("batchnorm_opset15_eps1e-3", "BatchNormalization (opset 15), epsilon 1e-3", 15, 1e-3),
                                   ("batchnorm_opset14_default_eps", "BatchNormalization (opset 14), default epsilon", 14, None)):
        b = Builder(name, desc, opset)
        x = b.input("X", [2, 3, 4, 5])
        ins = [x, b.weight("scale", [3], 0.5, 1.5), b.weight("B", [3]), b.weight("mean", [3]),
               b.weight("var", [3], 0.2, 2.0)]
        b.output(b.node("BatchNormalization", ins, **({} if eps is None else {"epsilon": eps})))
        out.append(b)
    return out


# ---------------------------------------------------------------- activations

@model
def _activations():
    out = [
        unary("relu", "Relu", "Relu"),
        unary("leakyrelu_alpha0.2", "LeakyRelu alpha 0.2", "LeakyRelu", alpha=0.2),
        unary("leakyrelu_default_alpha", "LeakyRelu default alpha 0.01", "LeakyRelu", scale=4.0),
        unary("sigmoid", "Sigmoid over [-6, 6)", "Sigmoid", scale=6.0),
        unary("tanh", "Tanh over [-4, 4)", "Tanh", scale=4.0),
        unary("hardsigmoid_default", "HardSigmoid default alpha 0.2 beta 0.5, inputs in [-4, 4) (both saturations)",
              "HardSigmoid", scale=4.0),
        unary("hardsigmoid_alpha0.3_beta0.6", "HardSigmoid alpha 0.3 beta 0.6, inputs in [-4, 4)",
              "HardSigmoid", scale=4.0, alpha=0.3, beta=0.6),
        unary("hardswish_opset14", "HardSwish (opset 14), inputs in [-5, 5) (both saturations)",
              "HardSwish", scale=5.0, opset=14),
    ]
    for name, desc, slope in (("prelu_per_channel", "PRelu with a per-channel slope of shape [C,1,1]", [3, 1, 1]),
                              ("prelu_scalar_slope", "PRelu with one slope of shape [1]", [1])):
        b = Builder(name, desc)
        b.output(b.node("PRelu", [b.input("X", [2, 3, 4, 5]), b.weight("slope", slope, 0.05, 0.5)]))
        out.append(b)
    # Clip: min/max are inputs from opset 11 on.
    b = Builder("clip_opset13_min_max", "Clip (opset 13) with min -0.5 and max 0.3 as inputs")
    b.output(b.node("Clip", [b.input("X", [2, 3, 4, 5]), b.floats("min", -0.5), b.floats("max", 0.3)]))
    out.append(b)
    b = Builder("clip_opset13_min_only", "Clip (opset 13) with min 0.1 and max left empty")
    b.output(b.node("Clip", [b.input("X", [2, 3, 4, 5]), b.floats("min", 0.1), ""]))
    out.append(b)
    b = Builder("clip_opset11_max_only_constant", "Clip (opset 11), min empty, max 0.25 from a Constant node", 11)
    b.output(b.node("Clip", [b.input("X", [2, 3, 4, 5]), "", b.constant(np.array(0.25, dtype=np.float32))]))
    out.append(b)
    b = Builder("clip_opset11_no_bounds", "Clip (opset 11) with neither min nor max: identity", 11)
    b.output(b.node("Clip", [b.input("X", [3, 7])]))
    out.append(b)
    return out


# ---------------------------------------------------------------- elementwise binary

@model
def _binary():
    def div_weight(b, name, shape):
        # Divisors kept away from zero: magnitude in [0.5, 2), random sign.
        m = b.rng.uniform(0.5, 2.0, shape) * b.rng.choice([-1.0, 1.0], shape)
        return b.const(name, m.astype(np.float32))

    out = []
    b = Builder("add_same_shape_two_inputs", "Add of two graph inputs of the same shape")
    b.output(b.node("Add", [b.input("A", [2, 3, 4, 5]), b.input("B", [2, 3, 4, 5])]))
    out.append(b)
    b = Builder("add_scalar", "Add of a scalar (rank 0) initializer")
    b.output(b.node("Add", [b.input("X", [2, 3, 4, 5]), b.floats("s", 0.75)]))
    out.append(b)
    b = Builder("add_bidirectional_broadcast", "Add broadcasting both inputs: [1,3,1,5] + [2,1,4,1]")
    b.output(b.node("Add", [b.input("A", [1, 3, 1, 5]), b.input("B", [2, 1, 4, 1])]))
    out.append(b)
    b = Builder("sub_per_channel", "Sub of a per-channel [C,1,1] initializer")
    b.output(b.node("Sub", [b.input("X", [2, 3, 4, 5]), b.weight("c", [3, 1, 1])]))
    out.append(b)
    b = Builder("sub_scalar_minus_input", "Sub with the scalar first: 1 - X (shape [1])")
    b.output(b.node("Sub", [b.floats("one", [1.0]), b.input("X", [2, 3, 4, 5])]))
    out.append(b)
    b = Builder("mul_rank_mismatch", "Mul of a rank-4 input by a rank-1 [W] initializer")
    b.output(b.node("Mul", [b.input("X", [2, 3, 4, 5]), b.weight("w", [5])]))
    out.append(b)
    b = Builder("mul_two_inputs_rank_mismatch", "Mul of inputs [2,3,4,5] and [4,1]")
    b.output(b.node("Mul", [b.input("A", [2, 3, 4, 5]), b.input("B", [4, 1])]))
    out.append(b)
    b = Builder("div_broadcast_both", "Div [2,1,4,1] / [3,1,5] initializer (divisors |d| >= 0.5)")
    b.output(b.node("Div", [b.input("X", [2, 1, 4, 1]), div_weight(b, "d", [3, 1, 5])]))
    out.append(b)
    b = Builder("div_scalar", "Div by a scalar initializer")
    b.output(b.node("Div", [b.input("X", [2, 3, 4, 5]), b.floats("d", -1.5)]))
    out.append(b)
    b = Builder("div_per_channel_numerator", "Div of a per-channel [C,1,1] initializer by an input-derived "
                "divisor 2 + X in [1, 3)")
    den = b.node("Add", [b.input("X", [2, 3, 4, 5]), b.floats("two", 2.0)])
    b.output(b.node("Div", [b.weight("num", [3, 1, 1]), den]))
    out.append(b)
    return out


# ---------------------------------------------------------------- pooling

@model
def _pools():
    def pool(name, desc, op, xshape=(1, 2, 8, 8), **attrs):
        b = Builder(name, desc)
        b.output(b.node(op, [b.input("X", list(xshape))], **attrs))
        return b
    return [
        pool("maxpool_k2s2", "MaxPool 2x2 stride 2, no pads", "MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        pool("maxpool_k3s2_pads1", "MaxPool 3x3 stride 2 pads 1", "MaxPool", (1, 3, 9, 9),
             kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        pool("maxpool_asym_pads_k3x2", "MaxPool 3x2 kernel, stride 1, asymmetric pads [0,1,1,0]", "MaxPool",
             kernel_shape=[3, 2], pads=[0, 1, 1, 0]),
        pool("maxpool_ceil_k3s2", "MaxPool 3x3 stride 2 ceil_mode 1 on 8x8 (last window partial)", "MaxPool",
             kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        pool("maxpool_ceil_pads1_k3s2", "MaxPool 3x3 stride 2 pads 1 ceil_mode 1 on 8x10", "MaxPool", (1, 2, 8, 10),
             kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        pool("avgpool_pads1_count_include_pad", "AveragePool 3x3 stride 1 pads 1, count_include_pad 1",
             "AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        pool("avgpool_pads1_exclude_pad", "AveragePool 3x3 stride 1 pads 1, count_include_pad 0",
             "AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        pool("avgpool_k2s2", "AveragePool 2x2 stride 2, no pads", "AveragePool", (2, 3, 6, 8),
             kernel_shape=[2, 2], strides=[2, 2]),
        pool("avgpool_ceil_exclude_pad", "AveragePool 3x3 stride 2 ceil_mode 1 on 8x8, count_include_pad 0",
             "AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        pool("avgpool_ceil_pads1_include_pad", "AveragePool 3x3 stride 2 pads 1 ceil_mode 1, count_include_pad 1 "
             "on 8x10 (the window past the padding)", "AveragePool", (1, 2, 8, 10),
             kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
        pool("avgpool_asym_pads_include_pad", "AveragePool 2x3 kernel stride 2, pads [1,0,0,2], count_include_pad 1",
             "AveragePool", (1, 2, 7, 7), kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 2],
             count_include_pad=1),
        pool("globalaveragepool", "GlobalAveragePool on [2,3,5,7]", "GlobalAveragePool", (2, 3, 5, 7)),
    ]


# ---------------------------------------------------------------- Gemm, MatMul

@model
def _gemm():
    def gemm(name, desc, a, bshape, c=None, b_is_input=False, **attrs):
        b = Builder(name, desc)
        ins = [b.input("A", a), b.input("B", bshape) if b_is_input else b.weight("W", bshape)]
        if c is not None:
            ins.append(b.weight("C", c))
        b.output(b.node("Gemm", ins, **attrs))
        return b
    return [
        gemm("gemm_c_row", "Gemm [3,4] x [4,5] + C [5]", [3, 4], [4, 5], [5]),
        gemm("gemm_transB_fc", "Gemm transB 1 (a fully connected layer): [2,6] x [5,6]^T + C [5]",
             [2, 6], [5, 6], [5], transB=1),
        gemm("gemm_transA_transB_alpha_beta", "Gemm transA 1, transB 1, alpha 0.5, beta 2, C [3,5]",
             [4, 3], [5, 4], [3, 5], transA=1, transB=1, alpha=0.5, beta=2.0),
        gemm("gemm_transA_c_col", "Gemm transA 1, C [3,1] (broadcast along columns), beta 0.25",
             [4, 3], [4, 5], [3, 1], transA=1, beta=0.25),
        gemm("gemm_c_scalar", "Gemm with a rank-0 C, alpha 1.5", [3, 4], [4, 5], [], alpha=1.5),
        gemm("gemm_c_1x1", "Gemm with C of shape [1,1]", [3, 4], [4, 5], [1, 1]),
        gemm("gemm_no_c_two_inputs", "Gemm without C, both operands graph inputs", [3, 4], [4, 5], b_is_input=True),
    ]


@model
def _matmul():
    def mm(name, desc, a, bshape, b_is_input=True):
        b = Builder(name, desc)
        ins = [b.input("A", a), b.input("B", bshape) if b_is_input else b.weight("W", bshape)]
        b.output(b.node("MatMul", ins))
        return b
    return [
        mm("matmul_2d_weight", "MatMul [3,4] x [4,5] initializer", [3, 4], [4, 5], False),
        mm("matmul_batched", "MatMul [2,3,4] x [2,4,5], both inputs", [2, 3, 4], [2, 4, 5]),
        mm("matmul_broadcast_batch", "MatMul [2,1,3,4] x [3,4,5]: batch dimensions broadcast to [2,3]",
           [2, 1, 3, 4], [3, 4, 5]),
        mm("matmul_batched_by_2d_weight", "MatMul [2,3,4] x [4,5] initializer", [2, 3, 4], [4, 5], False),
        mm("matmul_1d_left", "MatMul [4] x [2,4,5] (1-D first operand, prepended then removed)", [4], [2, 4, 5]),
        mm("matmul_1d_right", "MatMul [2,3,4] x [4] (1-D second operand)", [2, 3, 4], [4]),
        mm("matmul_1d_both", "MatMul [4] x [4]: a scalar", [4], [4]),
    ]


# ---------------------------------------------------------------- shape ops

@model
def _layout():
    out = []
    for axis in (0, 1, 2, -1):
        b = Builder(f"flatten_axis{axis}".replace("-", "neg"), f"Flatten axis {axis} of [2,3,4,5]")
        b.output(b.node("Flatten", [b.input("X", [2, 3, 4, 5])], axis=axis))
        out.append(b)
    b = Builder("reshape_zero_minus1", "Reshape [2,3,4,5] with shape [0,-1,5] (0 copies, -1 inferred)")
    b.output(b.node("Reshape", [b.input("X", [2, 3, 4, 5]), b.ints("shape", [0, -1, 5])]))
    out.append(b)
    b = Builder("reshape_minus1_first", "Reshape [2,3,4,5] with shape [-1,10] (opset 14)", 14)
    b.output(b.node("Reshape", [b.input("X", [2, 3, 4, 5]), b.ints("shape", [-1, 10])]))
    out.append(b)
    for name, shape, perm in (("transpose_nchw_to_nhwc", [2, 3, 4, 5], [0, 2, 3, 1]),
                              ("transpose_nhwc_to_nchw", [2, 4, 5, 3], [0, 3, 1, 2]),
                              ("transpose_3d_201", [3, 4, 5], [2, 0, 1]),
                              ("transpose_default_reverse", [2, 3, 4, 5], None)):
        b = Builder(name, f"Transpose of {shape} with perm {perm if perm else 'absent (reverse)'}")
        b.output(b.node("Transpose", [b.input("X", shape)], **({"perm": perm} if perm else {})))
        out.append(b)
    b = Builder("concat_axis1_three", "Concat axis 1 of two inputs and an initializer")
    b.output(b.node("Concat", [b.input("A", [2, 3, 4, 5]), b.weight("W", [2, 2, 4, 5]), b.input("B", [2, 1, 4, 5])],
                    axis=1))
    out.append(b)
    b = Builder("concat_axis_neg1", "Concat axis -1 of [2,3,1] and [2,3,4]")
    b.output(b.node("Concat", [b.input("A", [2, 3, 1]), b.input("B", [2, 3, 4])], axis=-1))
    out.append(b)
    b = Builder("identity", "Identity")
    b.output(b.node("Identity", [b.input("X", [2, 3, 4, 5])]))
    out.append(b)
    return out


@model
def _split():
    out = []
    b = Builder("split_opset13_split_input", "Split (opset 13) axis 1 of [2,6,3] into [1,3,2] by the split input")
    xs = b.node("Split", [b.input("X", [2, 6, 3]), b.ints("split", [1, 3, 2])], n_out=3, axis=1)
    for x in xs:
        b.output(x)
    out.append(b)
    b = Builder("split_opset13_equal_neg_axis", "Split (opset 13) axis -1 of [2,3,6] into 3 equal parts")
    xs = b.node("Split", [b.input("X", [2, 3, 6])], n_out=3, axis=-1)
    for x in xs:
        b.output(x)
    out.append(b)
    b = Builder("split_opset11_attr", "Split (opset 11) axis 0 of [5,4] with split attribute [2,3]", 11)
    xs = b.node("Split", [b.input("X", [5, 4])], n_out=2, axis=0, split=[2, 3])
    for x in xs:
        b.output(x)
    out.append(b)
    return out


@model
def _slice():
    big = np.iinfo(np.int64).max
    small = np.iinfo(np.int64).min

    def sl(name, desc, shape, starts, ends, axes=None, steps=None, opset=13):
        b = Builder(name, desc, opset)
        ins = [b.input("X", shape), b.ints("starts", starts), b.ints("ends", ends)]
        if axes is not None:
            ins.append(b.ints("axes", axes))
        if steps is not None:
            if axes is None:
                ins.append("")
            ins.append(b.ints("steps", steps))
        b.output(b.node("Slice", ins))
        return b
    return [
        sl("slice_starts_ends_only", "Slice with only starts [1,0,1] and ends [3,2,4]", [4, 3, 5], [1, 0, 1], [3, 2, 4]),
        sl("slice_axes_steps", "Slice axes [1,2], steps [2,3]", [2, 7, 8], [1, 0], [7, 8], [1, 2], [2, 3]),
        sl("slice_negative_steps", "Slice with steps -1 and -2, starts -1 / INT64_MAX, ends INT64_MIN / 0",
           [3, 6, 5], [-1, big], [small, 0], [1, 2], [-1, -2]),
        sl("slice_negative_axes_starts", "Slice axes [-1,-3], negative starts and ends", [4, 5, 6],
           [-4, -3], [-1, -1], [-1, -3]),
        sl("slice_clamped_ends", "Slice with out-of-range starts -1000 and ends 1000 (clamped)", [3, 4, 5],
           [-1000, 2], [1000, 1000], [0, 2]),
        sl("slice_empty_steps_axes_gap", "Slice empty axes input with steps [1,2,1]", [3, 4, 5],
           [0, 1, 2], [3, 4, 4], None, [1, 2, 1]),
        sl("slice_opset11", "Slice (opset 11) with axes and a negative step", [4, 6], [3], [0], [0], [-1], 11),
    ]


@model
def _squeeze():
    out = []
    b = Builder("squeeze_opset13_axes_input", "Squeeze (opset 13) of [1,3,1,5] with axes input [0,-2]")
    b.output(b.node("Squeeze", [b.input("X", [1, 3, 1, 5]), b.ints("axes", [0, -2])]))
    out.append(b)
    b = Builder("squeeze_opset13_no_axes", "Squeeze (opset 13) without axes: every dimension of size 1")
    b.output(b.node("Squeeze", [b.input("X", [1, 3, 1, 5, 1])]))
    out.append(b)
    b = Builder("squeeze_opset11_attr", "Squeeze (opset 11) with axes attribute [2]", 11)
    b.output(b.node("Squeeze", [b.input("X", [2, 3, 1, 5])], axes=[2]))
    out.append(b)
    b = Builder("unsqueeze_opset13_axes_input", "Unsqueeze (opset 13) of [3,5] with axes input [0,-1,2]")
    b.output(b.node("Unsqueeze", [b.input("X", [3, 5]), b.ints("axes", [0, -1, 2])]))
    out.append(b)
    b = Builder("unsqueeze_opset11_attr", "Unsqueeze (opset 11) of [3,5] with axes attribute [1,3]", 11)
    b.output(b.node("Unsqueeze", [b.input("X", [3, 5])], axes=[1, 3]))
    out.append(b)
    return out


@model
def _pad():
    def pad(name, desc, pads, mode=None, value=None, opset=13, shape=(1, 2, 4, 5)):
        b = Builder(name, desc, opset)
        ins = [b.input("X", list(shape)), b.ints("pads", pads)]
        if value is not None:
            ins.append(b.floats("value", value))
        b.output(b.node("Pad", ins, **({"mode": mode} if mode else {})))
        return b
    p = [0, 0, 1, 2, 0, 0, 2, 1]
    return [
        pad("pad_constant_value", "Pad constant mode with constant_value 0.5, pads H 1/2, W 2/1", p, value=0.5),
        pad("pad_constant_default_zero", "Pad constant mode, no constant_value (0), pads on N and C too",
            [1, 0, 0, 1, 0, 2, 1, 0]),
        pad("pad_constant_negative_crop", "Pad constant with negative pads (crops) mixed with positive",
            [0, 0, -1, 2, 0, 0, 1, -2]),
        pad("pad_reflect", "Pad reflect mode, pads H 1/2, W 2/1", p, mode="reflect"),
        pad("pad_edge", "Pad edge mode, pads H 1/2, W 2/1", p, mode="edge"),
        pad("pad_opset11_reflect", "Pad (opset 11, pads input) reflect mode, pads W 3/3 on [2,3,5]",
            [0, 0, 3, 0, 0, 3], mode="reflect", opset=11, shape=(2, 3, 5)),
        pad("pad_opset11_constant_value", "Pad (opset 11) constant mode with constant_value -1", p, value=-1.0, opset=11),
    ]


# ---------------------------------------------------------------- Resize

@model
def _resize():
    out = []

    def resize(name, desc, shape, scales=None, sizes=None, opset=13, **attrs):
        b = Builder(name, desc, opset)
        ins = [b.input("X", shape)]
        if opset == 11:
            # opset 11: roi and scales must be present; an empty scales
            # tensor when sizes is given.
            ins.append(b.floats("roi", []))
            ins.append(b.floats("scales", scales if scales is not None else []))
        else:
            ins.append("")
            ins.append(b.floats("scales", scales) if scales is not None else "")
        if sizes is not None:
            ins.append(b.ints("sizes", sizes))
        b.output(b.node("Resize", ins, **attrs))
        return b

    for mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        out.append(resize(f"resize_nearest_{mode}_asymmetric",
                          f"Resize nearest, nearest_mode {mode}, asymmetric, scales [1,1,2,3] "
                          "(H hits .5 ties, W thirds)", [1, 2, 3, 4], scales=[1, 1, 2, 3], mode="nearest",
                          nearest_mode=mode, coordinate_transformation_mode="asymmetric"))
    for mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        out.append(resize(f"resize_nearest_{mode}_half_pixel_down",
                          f"Resize nearest, nearest_mode {mode}, half_pixel, scales [1,1,0.6,1.5]",
                          [1, 2, 5, 4], scales=[1, 1, 0.6, 1.5], mode="nearest", nearest_mode=mode))
    out.append(resize("resize_nearest_sizes_default", "Resize nearest with sizes [1,2,7,3] and default attributes",
                      [1, 2, 4, 5], sizes=[1, 2, 7, 3], mode="nearest"))
    out.append(resize("resize_nearest_x2_opset11", "Resize (opset 11) nearest x2, asymmetric, floor (the classic "
                      "upsample)", [1, 3, 4, 5], scales=[1, 1, 2, 2], opset=11, mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    out.append(resize("resize_linear_half_pixel_scales", "Resize linear, half_pixel, scales [1,1,2,2.5]",
                      [1, 2, 4, 5], scales=[1, 1, 2, 2.5], mode="linear"))
    out.append(resize("resize_linear_half_pixel_down", "Resize linear, half_pixel, scales [1,1,0.5,0.75] (downsample)",
                      [1, 2, 8, 8], scales=[1, 1, 0.5, 0.75], mode="linear"))
    out.append(resize("resize_linear_align_corners_sizes", "Resize linear, align_corners, sizes [1,2,7,9]",
                      [1, 2, 4, 5], sizes=[1, 2, 7, 9], mode="linear", coordinate_transformation_mode="align_corners"))
    out.append(resize("resize_linear_asymmetric_scales", "Resize linear, asymmetric, scales [1,1,1.5,1.6]",
                      [1, 2, 4, 5], scales=[1, 1, 1.5, 1.6], mode="linear",
                      coordinate_transformation_mode="asymmetric"))
    out.append(resize("resize_linear_pytorch_half_pixel_sizes", "Resize linear, pytorch_half_pixel, sizes [1,2,1,9] "
                      "(an output length of 1 samples index 0)", [1, 2, 4, 5], sizes=[1, 2, 1, 9], mode="linear",
                      coordinate_transformation_mode="pytorch_half_pixel"))
    out.append(resize("resize_linear_opset11_align_corners_sizes", "Resize (opset 11) linear, align_corners, "
                      "sizes [1,3,8,10] with empty scales", [1, 3, 4, 5], sizes=[1, 3, 8, 10], opset=11,
                      mode="linear", coordinate_transformation_mode="align_corners"))
    return out


# ---------------------------------------------------------------- Softmax

@model
def _softmax():
    out = []
    for name, desc, opset, attrs in (
            ("softmax_opset11_axis1", "Softmax (opset 11) axis 1 of [2,3,4]: over the flattened 3*4", 11, {"axis": 1}),
            ("softmax_opset11_default_axis", "Softmax (opset 11) default axis 1 of [2,3,4]", 11, {}),
            ("softmax_opset11_axis_neg1", "Softmax (opset 11) axis -1 of [2,3,4]", 11, {"axis": -1}),
            ("softmax_opset13_axis1", "Softmax (opset 13) axis 1 of [2,3,4]: over that dimension only", 13, {"axis": 1}),
            ("softmax_opset13_default_axis", "Softmax (opset 13) default axis -1 of [2,3,4]", 13, {})):
        out.append(unary(name, desc + ", inputs in [-8, 8)", "Softmax", (2, 3, 4), scale=8.0, opset=opset, **attrs))
    return out


# ---------------------------------------------------------------- Cast, Shape, Gather, Constant

@model
def _misc():
    out = []
    b = Builder("cast_float_to_int64", "Cast float -> int64 (truncation toward zero) of 5 * X")
    x = b.node("Mul", [b.input("X", [2, 3, 4]), b.floats("five", 5.0)])
    b.output(b.node("Cast", [x], to=I64))
    out.append(b)
    b = Builder("cast_roundtrip_int32_float", "Cast float -> int32 -> float of 7 * X")
    x = b.node("Mul", [b.input("X", [2, 3, 4]), b.floats("seven", 7.0)])
    b.output(b.node("Cast", [b.node("Cast", [x], to=TensorProto.INT32)], to=F))
    out.append(b)
    b = Builder("cast_int64_input_to_float", "Cast of an int64 graph input to float, plus X")
    c = b.node("Cast", [b.input("I", [2, 3], I64)], to=F)
    b.output(b.node("Add", [b.input("X", [2, 3]), c]))
    out.append(b)

    b = Builder("shape_output", "Shape of a [2,3,4,5] input as the output")
    b.output(b.node("Shape", [b.input("X", [2, 3, 4, 5])]))
    out.append(b)
    b = Builder("shape_opset15_start_end", "Shape (opset 15) with start 1 and end -1", 15)
    b.output(b.node("Shape", [b.input("X", [2, 3, 4, 5])], start=1, end=-1))
    out.append(b)

    b = Builder("constantofshape_from_shape", "Shape -> ConstantOfShape(value 2.5) -> Add")
    x = b.input("X", [2, 3, 4])
    c = b.node("ConstantOfShape", [b.node("Shape", [x])], value=numpy_helper.from_array(np.array([2.5], np.float32)))
    b.output(b.node("Add", [x, c]))
    out.append(b)
    b = Builder("constantofshape_default_zero_concat", "ConstantOfShape of an initializer shape without value "
                "(zeros), concatenated to the input (channel padding as in BlazeFace)")
    x = b.input("X", [1, 3, 4, 4])
    z = b.node("ConstantOfShape", [b.ints("shape_1x2x4x4", [1, 2, 4, 4])])
    b.output(b.node("Concat", [x, z], axis=1))
    out.append(b)

    b = Builder("gather_const_indices_axis1_2d", "Gather axis 1 with constant 2-D indices [[0,2],[-1,1]]")
    b.output(b.node("Gather", [b.input("X", [2, 4, 3]), b.ints("idx", [[0, 2], [-1, 1]])], axis=1))
    out.append(b)
    b = Builder("gather_scalar_index_axis0", "Gather axis 0 with a scalar index -2 (rank drops)")
    b.output(b.node("Gather", [b.input("X", [5, 3, 2]), b.ints("idx", -2)], axis=0))
    out.append(b)
    b = Builder("gather_data_indices_axis_neg1", "Gather axis -1 with int64 indices from a graph input "
                "(random rule: values 0..3)")
    b.output(b.node("Gather", [b.input("X", [2, 3, 4]), b.input("I", [2, 5], I64)], axis=-1))
    out.append(b)

    b = Builder("constant_forms", "Constant nodes: value tensor (added), value_float (multiplied), "
                "value_ints (a Reshape shape)")
    x = b.input("X", [2, 3, 4])
    x = b.node("Add", [x, b.constant(b.rng.uniform(-1, 1, (3, 4)).astype(np.float32))])
    x = b.node("Mul", [x, b.constant(value_float=-0.5)])
    b.output(b.node("Reshape", [x, b.constant(value_ints=[4, 6])]), [4, 6])
    out.append(b)
    return out


# ---------------------------------------------------------------- mixed networks

def conv_bn(b, x, cin, cout, k, stride=1, group=1, act=None, pfx=""):
    w = b.weight(f"{pfx}conv_w", [cout, cin // group, k, k], -0.5, 0.5)
    x = b.node("Conv", [x, w], pads=[k // 2] * 4, strides=[stride, stride], group=group)
    x = b.node("BatchNormalization", [x, b.weight(f"{pfx}bn_scale", [cout], 0.5, 1.5), b.weight(f"{pfx}bn_b", [cout]),
                                      b.weight(f"{pfx}bn_mean", [cout], -0.2, 0.2),
                                      b.weight(f"{pfx}bn_var", [cout], 0.5, 1.5)])
    return b.node(act, [x]) if act else x


@model
def _mixed():
    out = []
    b = Builder("mixed_small_cnn", "small CNN: Conv+BN+Relu+MaxPool, Conv(stride 2)+BN+Relu, GlobalAveragePool, "
                "Flatten, Gemm(transB) to 10 classes, Softmax", 17)
    x = b.input("image", [1, 3, 32, 32])
    x = conv_bn(b, x, 3, 8, 3, act="Relu", pfx="c1_")
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = conv_bn(b, x, 8, 16, 3, stride=2, act="Relu", pfx="c2_")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    logits = b.node("Gemm", [x, b.weight("fc_w", [10, 16]), b.weight("fc_b", [10])], transB=1)
    b.output(logits)
    b.output(b.node("Softmax", [logits], axis=-1))
    out.append(b)

    b = Builder("mixed_dwsep_hardswish_residual", "depthwise-separable block: Conv1x1 expand+BN+HardSwish, "
                "depthwise 3x3+BN+HardSwish, Conv1x1 project+BN, Add residual", 14)
    x0 = b.input("X", [1, 8, 16, 16])
    x = conv_bn(b, x0, 8, 24, 1, act="HardSwish", pfx="expand_")
    x = conv_bn(b, x, 24, 24, 3, group=24, act="HardSwish", pfx="dw_")
    x = conv_bn(b, x, 24, 8, 1, pfx="project_")
    b.output(b.node("Add", [x, x0]))
    out.append(b)

    b = Builder("mixed_decoder_convtranspose_resize_concat", "upsampling decoder: ConvTranspose x2 + Relu, Concat "
                "with a skip input, Conv3x3 + Relu, Resize linear x2 (half_pixel), Resize nearest x2, Conv1x1, Sigmoid", 13)
    x = b.input("X", [1, 16, 4, 4])
    skip = b.input("skip", [1, 8, 8, 8])
    x = b.node("ConvTranspose", [x, b.weight("up_w", [16, 8, 4, 4], -0.3, 0.3), b.weight("up_b", [8])],
               strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.node("Concat", [b.node("Relu", [x]), skip], axis=1)
    x = b.node("Relu", [b.node("Conv", [x, b.weight("c_w", [8, 16, 3, 3], -0.3, 0.3), b.weight("c_b", [8])],
                               pads=[1, 1, 1, 1])])
    x = b.node("Resize", [x, "", b.floats("scales_lin", [1, 1, 2, 2])], mode="linear")
    x = b.node("Resize", [x, "", b.floats("scales_near", [1, 1, 2, 2])], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = b.node("Conv", [x, b.weight("head_w", [2, 8, 1, 1]), b.weight("head_b", [2])])
    b.output(b.node("Sigmoid", [x]))
    out.append(b)

    b = Builder("mixed_shape_subgraph_folds", "Shape->Gather->Unsqueeze->Concat->Reshape on static shapes "
                "(folds to a constant [1,-1] shape), then Gemm", 13)
    x = b.input("X", [1, 3, 8, 8])
    y = b.node("Relu", [b.node("Conv", [x, b.weight("w", [4, 3, 3, 3]), b.weight("b", [4])], pads=[1, 1, 1, 1],
                               strides=[2, 2])])
    n = b.node("Unsqueeze", [b.node("Gather", [b.node("Shape", [y]), b.ints("zero", 0)], axis=0), b.ints("ax0", [0])])
    shape = b.node("Concat", [n, b.ints("minus1", [-1])], axis=0)
    flat = b.node("Reshape", [y, shape])
    b.output(b.node("Gemm", [flat, b.weight("fc_w", [64, 5], -0.2, 0.2), b.weight("fc_b", [5])]), [1, 5])
    out.append(b)

    b = Builder("mixed_dynamic_batch_N", "dynamic batch dimension \"N\": Conv+Relu, a Shape->Gather->Unsqueeze->"
                "Concat->Reshape that depends on N, GlobalAveragePool, Flatten, Gemm", 13)
    x = b.input("X", ["N", 3, 8, 8])
    y = b.node("Relu", [b.node("Conv", [x, b.weight("w", [4, 3, 3, 3]), b.weight("b", [4])], pads=[1, 1, 1, 1])])
    n = b.node("Unsqueeze", [b.node("Gather", [b.node("Shape", [y]), b.ints("zero", 0)], axis=0), b.ints("ax0", [0])])
    shape = b.node("Concat", [n, b.ints("rest", [4, 4, 16])], axis=0)
    z = b.node("Reshape", [y, shape])   # [N,4,4,16]: regroups each channel's 8x8 as 4x16
    g = b.node("Flatten", [b.node("GlobalAveragePool", [z])], axis=1)
    b.output(b.node("Gemm", [g, b.weight("fc_w", [3, 4]), b.weight("fc_b", [3])], transB=1), ["N", 3])
    b.dims = {"N": 3}
    out.append(b)

    # What an executor may fold into a convolution's epilogue, and what it
    # must not: every case a reader of the convolution's output decides.
    b = Builder("mixed_conv_epilogues", "Conv+bias then Add (conv second) + Relu; depthwise with unequal "
                "pads, stride 2 + Relu; Conv also a graph output then Add; Conv + broadcast Add; Conv + Add "
                "read twice + Relu; dilated depthwise without bias + Relu", 13)
    x = b.input("X", [2, 4, 9, 9])
    skip = b.input("S", [2, 6, 9, 9])
    c1 = b.node("Conv", [x, b.weight("w1", [6, 4, 3, 3], -0.4, 0.4), b.weight("b1", [6])], pads=[1, 1, 1, 1])
    r1 = b.node("Relu", [b.node("Add", [skip, c1])])
    d1 = b.node("Conv", [r1, b.weight("wd1", [6, 1, 3, 3]), b.weight("bd1", [6])], group=6,
                strides=[2, 2], pads=[0, 0, 1, 1])
    b.output(b.node("Relu", [d1]))
    c2 = b.node("Conv", [r1, b.weight("w2", [6, 6, 1, 1], -0.4, 0.4), b.weight("b2", [6])])
    b.output(c2)
    b.output(b.node("Add", [c2, r1]))
    c3 = b.node("Conv", [r1, b.weight("w3", [6, 6, 1, 1], -0.4, 0.4), b.weight("b3", [6])])
    b.output(b.node("Add", [c3, b.weight("bcast", [1, 6, 1, 1])]))
    c4 = b.node("Conv", [r1, b.weight("w4", [6, 6, 3, 3], -0.3, 0.3)], pads=[1, 1, 1, 1])
    a4 = b.node("Add", [c4, r1])
    b.output(b.node("Mul", [a4, b.node("Relu", [a4])]))
    d2 = b.node("Conv", [r1, b.weight("wd2", [6, 1, 3, 3])], group=6, dilations=[2, 2], pads=[2, 2, 2, 2])
    b.output(b.node("Relu", [d2]))
    out.append(b)
    return out


# ---------------------------------------------------------------- real networks

def he_conv_bn(b, x, cin, cout, k, stride=1, group=1, act=None, pfx="", gamma=(0.5, 1.0)):
    """Conv (He-scaled uniform weights, no bias) + BatchNormalization (+ act),
    as torchvision's networks have them, so that activations stay in range
    through fifty layers of random weights."""
    bound = float(np.sqrt(6.0 / (cin // group * k * k)))
    w = b.weight(f"{pfx}w", [cout, cin // group, k, k], -bound, bound)
    x = b.node("Conv", [x, w], pads=[k // 2] * 4, strides=[stride, stride], group=group)
    x = b.node("BatchNormalization", [x, b.weight(f"{pfx}gamma", [cout], *gamma),
                                      b.weight(f"{pfx}beta", [cout], -0.1, 0.1),
                                      b.weight(f"{pfx}mean", [cout], -0.1, 0.1),
                                      b.weight(f"{pfx}var", [cout], 0.9, 1.1)])
    if act == "HardSigmoid":
        return b.node(act, [x], alpha=1.0 / 6, beta=0.5)
    return b.node(act, [x]) if act else x


def fc(b, x, cin, cout, pfx):
    bound = float(np.sqrt(1.0 / cin))
    return b.node("Gemm", [x, b.weight(f"{pfx}w", [cout, cin], -bound, bound),
                           b.weight(f"{pfx}b", [cout], -bound, bound)], transB=1)


@model
def _networks():
    """ResNet-50 and MobileNetV3-Large as torchvision builds them (untrained:
    seeded random weights), batch 1 at 224x224."""
    b = Builder("net_resnet50", "ResNet-50 (torchvision v1.5 layout: stride on the 3x3 conv), random "
                "weights, 1x3x224x224 -> 1000 logits", 13)
    x = b.input("image", [1, 3, 224, 224])
    x = he_conv_bn(b, x, 3, 64, 7, 2, act="Relu", pfx="stem_")
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            pfx = f"l{li + 1}b{bi}_"
            y = he_conv_bn(b, x, cin, width, 1, act="Relu", pfx=pfx + "a_")
            y = he_conv_bn(b, y, width, width, 3, s, act="Relu", pfx=pfx + "b_")
            y = he_conv_bn(b, y, width, width * 4, 1, pfx=pfx + "c_", gamma=(0.1, 0.3))
            if bi == 0:
                x = he_conv_bn(b, x, cin, width * 4, 1, s, pfx=pfx + "down_")
            x = b.node("Relu", [b.node("Add", [y, x])])
            cin = width * 4
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.output(fc(b, x, 2048, 1000, "fc_"))
    out = [b]

    def divisible(v):
        n = max(8, int(v + 4) // 8 * 8)
        return n + 8 if n < 0.9 * v else n

    b = Builder("net_mobilenetv3_large", "MobileNetV3-Large (torchvision layout: squeeze-excitation with "
                "HardSigmoid, HardSwish), random weights, 1x3x224x224 -> 1000 logits", 14)
    x = b.input("image", [1, 3, 224, 224])
    x = he_conv_bn(b, x, 3, 16, 3, 2, act="HardSwish", pfx="stem_")
    cfg = [(16, 3, 16, 16, 0, "Relu", 1), (16, 3, 64, 24, 0, "Relu", 2), (24, 3, 72, 24, 0, "Relu", 1),
           (24, 5, 72, 40, 1, "Relu", 2), (40, 5, 120, 40, 1, "Relu", 1), (40, 5, 120, 40, 1, "Relu", 1),
           (40, 3, 240, 80, 0, "HardSwish", 2), (80, 3, 200, 80, 0, "HardSwish", 1),
           (80, 3, 184, 80, 0, "HardSwish", 1), (80, 3, 184, 80, 0, "HardSwish", 1),
           (80, 3, 480, 112, 1, "HardSwish", 1), (112, 3, 672, 112, 1, "HardSwish", 1),
           (112, 5, 672, 160, 1, "HardSwish", 2), (160, 5, 960, 160, 1, "HardSwish", 1),
           (160, 5, 960, 160, 1, "HardSwish", 1)]
    for i, (cin, k, exp, cout, se, act, stride) in enumerate(cfg):
        pfx = f"b{i}_"
        y = x if exp == cin else he_conv_bn(b, x, cin, exp, 1, act=act, pfx=pfx + "expand_")
        y = he_conv_bn(b, y, exp, exp, k, stride, group=exp, act=act, pfx=pfx + "dw_")
        if se:
            sq = divisible(exp // 4)
            g = b.node("GlobalAveragePool", [y])
            g = b.node("Relu", [b.node("Conv", [g, b.weight(pfx + "se1_w", [sq, exp, 1, 1], -0.3, 0.3),
                                               b.weight(pfx + "se1_b", [sq], -0.1, 0.1)])])
            g = b.node("Conv", [g, b.weight(pfx + "se2_w", [exp, sq, 1, 1], -0.3, 0.3),
                                b.weight(pfx + "se2_b", [exp], -0.1, 0.1)])
            y = b.node("Mul", [y, b.node("HardSigmoid", [g], alpha=1.0 / 6, beta=0.5)])
        y = he_conv_bn(b, y, exp, cout, 1, pfx=pfx + "project_", gamma=(0.2, 0.5))
        x = b.node("Add", [y, x]) if stride == 1 and cin == cout else y
    x = he_conv_bn(b, x, 160, 960, 1, act="HardSwish", pfx="last_")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    x = b.node("HardSwish", [fc(b, x, 960, 1280, "fc1_")])
    b.output(fc(b, x, 1280, 1000, "fc2_"))
    out.append(b)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: /usr/bin/python3 tools/onnx/gen_models.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    manifest = {"generator": "tools/onnx/gen_models.py", "onnx_version": onnx.__version__, "models": []}
    seen = set()
    for group in MODELS:
        for b in group():
            if b.name in seen:
                sys.exit(f"gen_models: two models named {b.name}")
            seen.add(b.name)
            m = b.build()
            file = f"{b.name}.onnx"
            onnx.save(m, os.path.join(outdir, file))
            inits = {t.name for t in m.graph.initializer}
            entry = {
                "name": b.name, "file": file, "opset": b.opset, "description": b.desc,
                "ops": sorted({n.op_type for n in m.graph.node}),
                "inputs": [{"name": v.name, "shape": dims_of(v), "dtype": DTYPE_NAMES[v.type.tensor_type.elem_type]}
                           for v in m.graph.input if v.name not in inits],
                "outputs": [{"name": v.name, "shape": dims_of(v), "dtype": DTYPE_NAMES[v.type.tensor_type.elem_type]}
                            for v in m.graph.output],
            }
            if b.dims:
                entry["dims"] = b.dims
            manifest["models"].append(entry)
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    # Outside the manifest (no reference run): a valid model with an operator
    # the engine does not support, which it must refuse by name and node.
    erf = helper.make_node("Erf", ["X"], ["Y"], name="erf_0")
    g = helper.make_graph([erf], "unsupported_op",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(outdir, "unsupported_op.onnx"))
    print(f"gen_models: {len(manifest['models'])} models in {outdir}")


if __name__ == "__main__":
    main()
