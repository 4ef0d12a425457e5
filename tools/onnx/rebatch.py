#!/usr/bin/python3
"""tools/onnx/rebatch.py - turn a model whose batch is fixed at 1 (BlazeFace)
into the same model with its batch fixed at B, or symbolic when B is a name.

    python3 tools/onnx/rebatch.py MODEL.onnx B OUT.onnx

B is a positive integer (the batch fixed at B) or an identifier such as N
(the batch symbolic, named N: engines then serve every batch up to the one
they are loaded for).

What changes, and nothing else:
  - the leading dimension of every graph input (initializers excepted) and
    every graph output: 1 -> B;
  - the leading value of every constant shape given to Reshape (input 1) and
    to ConstantOfShape (input 0), whether an initializer or a Constant node:
    1 -> B. A constant also read by other nodes is copied first, so that
    those nodes keep the value they had;
  - the value_info hints of intermediate tensors are dropped (they carry
    batch 1; they are optional, and ONNX shape inference is run on the result
    to check that the graph outputs come out with batch B).

With a symbolic B a constant shape cannot carry the batch. Zeros made by
ConstantOfShape only to be concatenated after another tensor (channel
padding, as BlazeFace does) become a Pad of that tensor, which is exact;
any other such shape [1, d1, ...] is computed in the graph instead, from the first graph input's
batch: Concat(Gather(Shape(input), [0]), [d1, ...]) (nodes put first in the
graph; an engine that folds shapes per batch makes it a constant again).

It refuses, naming the tensor or node, when any of those shapes does not
start with 1 (a symbolic batch, a 0 or -1 in a Reshape shape, a batch other
than 1), so a model it cannot rebatch by these rules is never written half
right. A Reshape or ConstantOfShape whose shape is computed in the graph is
left as it is, with a note. Works with Debian's python3-onnx (1.12) and with
newer onnx.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


class RebatchError(Exception):
    pass


def _consumers(graph):
    """name -> list of (node, input index) reading it."""
    use = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name:
                use.setdefault(name, []).append((node, k))
    return use


def _set_leading_dim(vi, batch, what):
    tt = vi.type.tensor_type
    if not tt.HasField("shape") or len(tt.shape.dim) == 0:
        raise RebatchError(f"{what} '{vi.name}' has no shape (or rank 0); cannot set its batch")
    d0 = tt.shape.dim[0]
    if d0.HasField("dim_param") and d0.dim_param:
        raise RebatchError(f"{what} '{vi.name}' has a symbolic batch '{d0.dim_param}', not 1: "
                           f"run it with --batch instead")
    if not d0.HasField("dim_value") or d0.dim_value != 1:
        dims = [d.dim_param or d.dim_value for d in tt.shape.dim]
        raise RebatchError(f"{what} '{vi.name}' has shape {dims}, which does not start with 1")
    if isinstance(batch, str):
        d0.dim_param = batch
    else:
        d0.dim_value = batch


def _rebatch_array(arr, batch, what):
    a = np.asarray(arr)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        raise RebatchError(f"{what} is {a.dtype} of shape {list(a.shape)}, not a 1-D integer shape")
    if int(a[0]) != 1:
        raise RebatchError(f"{what} is {a.tolist()}, which does not start with 1")
    b = a.copy()
    b[0] = batch
    return b


def _pad_instead(g, node, shape, use, what, notes):
    """Concat([x, ConstantOfShape(shape)], axis) with zeros and no other
    reader of them becomes Pad(x) at the end of that axis (opset 11+ Pad,
    pads as an input). Returns whether it was rewritten."""
    attrs = {a.name: a for a in node.attribute}
    if "value" in attrs and numpy_helper.to_array(attrs["value"].t).any():
        return False
    readers = use.get(node.output[0], [])
    if len(readers) != 1:
        return False
    cat, k = readers[0]
    if cat.op_type != "Concat" or len(cat.input) != 2 or k != 1:
        return False
    axis = next((a.i for a in cat.attribute if a.name == "axis"), None)
    rank = len(shape)
    if axis is None or axis < 0 or axis >= rank or axis == 0:
        return False
    pads = np.zeros(2 * rank, dtype=np.int64)
    pads[rank + axis] = int(shape[axis])
    pads_name = f"{node.output[0]}__pads"
    g.initializer.append(numpy_helper.from_array(pads, pads_name))
    x = cat.input[0]
    cat.op_type = "Pad"
    del cat.attribute[:]
    cat.attribute.extend([onnx.helper.make_attribute("mode", "constant")])
    del cat.input[:]
    cat.input.extend([x, pads_name])
    g.node.remove(node)
    notes.append(f"{what}: zeros concatenated on axis {axis} -> Pad of '{x}' by {int(shape[axis])}")
    return True


def rebatch(model, batch):
    """Rebatch `model` (an onnx.ModelProto, changed in place); returns a list
    of notes (what was changed or left)."""
    if not isinstance(batch, str) and batch < 1:
        raise RebatchError(f"the batch must be at least 1, not {batch}")
    g = model.graph
    notes = []
    inits = {t.name: t for t in g.initializer}
    use = _consumers(g)
    graph_outputs = {o.name for o in g.output}
    graph_inputs = {i.name for i in g.input}
    const_nodes = {}  # output name -> Constant node
    for node in g.node:
        if node.op_type == "Constant" and node.output:
            const_nodes[node.output[0]] = node

    for vi in g.input:
        if vi.name in inits:
            continue
        _set_leading_dim(vi, batch, "graph input")
        notes.append(f"input {vi.name}: batch 1 -> {batch}")
    for vi in g.output:
        _set_leading_dim(vi, batch, "graph output")
        notes.append(f"output {vi.name}: batch 1 -> {batch}")

    # Constant shapes to rewrite: (node, input index).
    targets = []
    for node in g.node:
        if node.op_type == "Reshape" and len(node.input) > 1:
            targets.append((node, 1))
        elif node.op_type == "ConstantOfShape" and node.input:
            targets.append((node, 0))
    target_set = {(id(n), k) for n, k in targets}
    first_input = next((vi.name for vi in g.input if vi.name not in inits), None)
    computed = []  # nodes computing shapes from the batch, put first
    batch_dim = None

    def computed_shape(arr, name):
        """A tensor holding [batch] + arr[1:], computed from the first input."""
        nonlocal batch_dim
        if first_input is None:
            raise RebatchError(f"'{name}' needs the batch, but the graph has no input")
        if batch_dim is None:
            batch_dim = "rebatch__batch"
            shape = "rebatch__input_shape"
            index = "rebatch__zero"
            g.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), index))
            computed.append(onnx.helper.make_node("Shape", [first_input], [shape],
                                                  name="rebatch__Shape"))
            computed.append(onnx.helper.make_node("Gather", [shape, index], [batch_dim],
                                                  name="rebatch__Gather", axis=0))
        rest = f"{name}__rest"
        out = f"{name}__batched"
        g.initializer.append(numpy_helper.from_array(arr[1:].astype(np.int64), rest))
        computed.append(onnx.helper.make_node("Concat", [batch_dim, rest], [out],
                                              name=f"rebatch__Concat_{name}", axis=0))
        return out

    done = {}  # original constant name -> new name (same name when rewritten in place)
    for node, k in targets:
        name = node.input[k]
        what = f"{node.op_type} node '{node.name or node.output[0]}' shape input '{name}'"
        if name in done:
            node.input[k] = done[name]
            continue
        if name in inits:
            arr = numpy_helper.to_array(inits[name])
        elif name in const_nodes:
            cn = const_nodes[name]
            attrs = {a.name: a for a in cn.attribute}
            if "value" in attrs:
                arr = numpy_helper.to_array(attrs["value"].t)
            elif "value_ints" in attrs:
                arr = np.array(list(attrs["value_ints"].ints), dtype=np.int64)
            else:
                raise RebatchError(f"{what} comes from a Constant node without 'value' or 'value_ints'")
        else:
            notes.append(f"left as is: {what} is computed in the graph")
            continue
        if isinstance(batch, str) and node.op_type == "ConstantOfShape" and \
                _pad_instead(g, node, np.asarray(arr), use, what, notes):
            continue
        if isinstance(batch, str):
            _rebatch_array(arr, 1, what)  # checks it is a 1-D shape starting with 1
            node.input[k] = done[name] = computed_shape(np.asarray(arr), name)
            notes.append(f"{what}: {np.asarray(arr).tolist()} -> computed from the batch of "
                         f"'{first_input}'")
            continue
        new = _rebatch_array(arr, batch, what)
        others = [(n, j) for n, j in use.get(name, []) if (id(n), j) not in target_set]
        shared = bool(others) or name in graph_outputs or name in graph_inputs
        if shared:
            new_name = f"{name}__batch{batch}"
            while new_name in inits or new_name in use:
                new_name += "_"
            g.initializer.append(numpy_helper.from_array(new.astype(arr.dtype), new_name))
            node.input[k] = new_name
            done[name] = new_name
            notes.append(f"{what}: {arr.tolist()} -> {new.tolist()} (a copy; the original has other readers)")
        else:
            if name in inits:
                inits[name].CopyFrom(numpy_helper.from_array(new.astype(arr.dtype), name))
            else:
                cn = const_nodes[name]
                del cn.attribute[:]
                cn.attribute.extend([onnx.helper.make_attribute(
                    "value", numpy_helper.from_array(new.astype(np.int64), "value"))])
            done[name] = name
            notes.append(f"{what}: {arr.tolist()} -> {new.tolist()}")

    if computed:
        rest = list(g.node)
        del g.node[:]
        g.node.extend(computed + rest)
    if len(g.value_info):
        notes.append(f"dropped {len(g.value_info)} value_info hints (batch-1 shapes of intermediates)")
        del g.value_info[:]
    model.doc_string = (model.doc_string + "\n" if model.doc_string else "") + \
        (f"batch symbolic ({batch}) by tools/onnx/rebatch.py" if isinstance(batch, str)
         else f"batch fixed at {batch} by tools/onnx/rebatch.py")
    return notes


def dim_of(d):
    return d.dim_value if d.HasField("dim_value") else d.dim_param


def check(model, batch):
    """onnx.checker, then shape inference: every graph output whose shape it
    finds must have the declared shape (batch B first)."""
    onnx.checker.check_model(model)
    # Infer on a copy whose outputs carry no shape, so that what comes back
    # for them is inferred, not the declared shape kept.
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for o in probe.graph.output:
        o.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(probe)
    except Exception as e:  # noqa: BLE001 - shape inference is only a cross-check
        return [f"shape inference failed ({e}); outputs not cross-checked"]
    got_by_name = {v.name: v for v in inferred.graph.output}
    notes = []
    for o in model.graph.output:
        want = [dim_of(d) for d in o.type.tensor_type.shape.dim]
        v = got_by_name.get(o.name)
        if v is None or not v.type.tensor_type.HasField("shape"):
            notes.append(f"output {o.name}: shape inference found no shape; declared {want}")
            continue
        got = [dim_of(d) for d in v.type.tensor_type.shape.dim]
        if got != want:
            raise RebatchError(f"output {o.name}: shape inference gives {got}, declared {want}")
    # Every inferred intermediate that starts with a batch dimension should now
    # start with B; report how many do (a sanity figure, not a rule).
    lead = [dim_of(v.type.tensor_type.shape.dim[0]) for v in inferred.graph.value_info
            if v.type.tensor_type.HasField("shape") and len(v.type.tensor_type.shape.dim) > 0]
    notes.append(f"shape inference: {sum(1 for d in lead if d == batch)} of {len(lead)} intermediates "
                 f"start with {batch}, {sum(1 for d in lead if d == 1)} with 1")
    return notes


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    src, b, dst = argv[1], argv[2], argv[3]
    if b.isidentifier():
        batch = b
    else:
        try:
            batch = int(b)
        except ValueError:
            sys.stderr.write(f"rebatch: B must be an integer or a name such as N, not '{b}'\n")
            return 2
    try:
        model = onnx.load(src)
    except Exception as e:  # noqa: BLE001
        sys.stderr.write(f"rebatch: cannot load {src}: {e}\n")
        return 1
    try:
        notes = rebatch(model, batch)
        notes += check(model, batch)
    except RebatchError as e:
        sys.stderr.write(f"rebatch: {src}: {e}\n")
        return 1
    except onnx.checker.ValidationError as e:
        sys.stderr.write(f"rebatch: {src}: the rebatched model fails onnx.checker: {e}\n")
        return 1
    onnx.save(model, dst)
    for n in notes:
        print(f"rebatch: {n}")
    print(f"rebatch: wrote {dst} (batch {batch})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
