/* src/engine/shape.h - shape inference and constant folding over a loaded
 * graph (graph.h): after it, every value has its dtype and a fully known
 * shape for the chosen maximum batch, and the shape sub-graphs (Shape ->
 * Gather -> Concat -> Reshape and the like) are folded to constants. */
#ifndef VRAM_ENGINE_SHAPE_H
#define VRAM_ENGINE_SHAPE_H

#include <stdint.h>

#include "graph.h"

/* Infer the dtype and shape of every value, in node order.
 *
 * Graph inputs: a symbolic (dim_param) or unknown first dimension becomes
 * `batch` (>= 1); any other unknown dimension is VRAM_EINVAL naming the input
 * and the axis, unless the caller set it in value.shape beforehand.
 *
 * Folding: a node whose inputs are all constant (value.data set, or an empty
 * initializer) and whose operator is one of Shape, Gather, Concat, Unsqueeze,
 * Squeeze, Slice, Cast, Reshape, Identity, ConstantOfShape, Constant, or
 * Add/Sub/Mul/Div on int64/int32 (and on float/double when the result has at
 * most 64 elements: the scale arithmetic of shape sub-graphs) gets its
 * outputs' data (host, row-major, owned by the graph) and folded[node] = 1.
 * Shape folds whenever its input's shape is known, constant or not.
 *
 * Every value's shape must come out fully known: an operator whose output
 * shape depends on run-time data (a Reshape whose shape input is not
 * constant, ...) is VRAM_ENOSYS. Graph outputs whose declared dtype or
 * dimensions (numeric ones; symbolic ones are free) disagree with the
 * inferred ones are VRAM_EINVAL naming both.
 *
 * Returns 0; VRAM_ENOSYS for an operator outside vram__op_supported()
 * ("unsupported operator 'NonMaxSuppression' at node 'nms_1' (node 57)") or
 * a variant the engine does not run; VRAM_EPARSE / VRAM_EINVAL for
 * inconsistent shapes or attributes, naming the node, its op and the shapes;
 * VRAM_EHOSTMEM. vram_last_error() has the sentence. On error the graph keeps
 * what was inferred so far (still valid to free, or to infer again).
 *
 * It may be called again (another batch): the outputs of nodes are derived
 * afresh each time (their folded data is released first). So that a later
 * call still knows which dimensions were open, an unnamed unknown dimension
 * of a graph input's first axis or of a graph output is given the symbolic
 * name "?" when it is filled in. `folded` holds n_nodes flags and may be
 * NULL. */
int vram__infer_shapes(vram__graph *g, int64_t batch, unsigned char *folded);

/* 1 if the engine supports operator `op` (an ONNX op_type of the default
 * domain), else 0. */
int vram__op_supported(const char *op);

#endif
