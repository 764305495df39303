"""Precision modes of the converter (ATC's ``--precision_mode`` in spirit): ``fp32`` (as the
model is), ``fp16`` and ``mixed``.

``fp16`` stores every float32 weight as float16 and makes every float32 intermediate value
float16; the graph's inputs and outputs keep float32 at the interface, converted by Cast
steps at the edges, so a program feeds and reads the same arrays in every mode. The
operators multiply float16 operands with float32 accumulation (the aclnn matmul and
convolution contracts) and compute elementwise work in float32, rounding once per result.

``mixed`` does the same except around the numerically sensitive ops (``SENSITIVE``:
normalisations, softmax, reductions, exp/log/pow/sqrt/erf, division): they read their
inputs converted to float32, compute and write in float32, and their results are converted
back to float16 for the rest of the graph. That keeps a LayerNorm's variance or a softmax's
sum from being rounded to 11 bits on the way. (The CPU backend's kernels already compute
float16 in float32 and round once, so there the two modes give the same numbers; the
difference is for devices with native float16 arithmetic.) Weights beyond float16's range
saturate to +-65504 instead of becoming infinities.

The pass runs on the graph IR after the fusions (so folded BatchNorm weights are computed in
float32 first) and before lowering.
"""

from __future__ import annotations

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.model.ir import Graph, Node, Value

PRECISIONS = ("fp32", "fp16", "mixed")
FLOAT32, FLOAT16 = np.dtype(np.float32), np.dtype(np.float16)
FLOAT16_MAX = float(np.finfo(np.float16).max)
ONNX_FLOAT, ONNX_FLOAT16 = 1, 10  # TensorProto data types (Cast's ``to``)
SENSITIVE = frozenset({
    "LayerNormalization", "AddLayerNorm", "BatchNormalization", "InstanceNormalization",
    "GroupNormalization", "Softmax", "LogSoftmax", "ReduceMean", "ReduceSum", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSumExp", "Exp", "Log", "Pow", "Sqrt", "Reciprocal", "Div",
    "Erf", "CumSum"})


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'precision' = {precision!r} is invalid: expected one of "
                       f"{', '.join(PRECISIONS)}")
    return precision


def apply_precision(graph: Graph, precision: str) -> Graph:
    """``graph`` rewritten for ``precision`` (in place; returned for chaining)."""
    if check_precision(precision) == "fp32":
        return graph
    halved = {name for name, value in graph.values.items()
              if value.dtype == FLOAT32 and name not in graph.inputs
              and name not in graph.outputs and name not in graph.initializers}
    edges = _Edges(graph)
    renamed_inputs = {name: edges.cast(name, FLOAT16, "to_fp16")
                      for name in graph.inputs if graph.value(name).dtype == FLOAT32}
    nodes: list[Node] = [*edges.nodes]
    edges.nodes.clear()
    outputs_fp16 = {}  # float32 outputs computed in float16 under a new name, cast at the end
    for name in graph.outputs:
        if graph.value(name).dtype == FLOAT32 and name not in graph.inputs \
                and name not in graph.initializers:
            outputs_fp16[name] = edges.fresh(name, "fp16", FLOAT16)
    kept = {name for name in graph.outputs if name in graph.initializers}
    for name in halved:
        value = graph.values[name]
        graph.values[name] = Value(name, FLOAT16, value.shape)
    for name in list(graph.initializers):
        array = graph.initializers[name]
        if array.dtype == FLOAT32 and name not in kept:
            # saturate rather than overflow: a -3.4e38 mask constant stays very negative
            graph.initializers[name] = np.clip(array, -FLOAT16_MAX, FLOAT16_MAX).astype(
                np.float16)
            graph.values[name] = Value(name, FLOAT16, graph.values[name].shape)
    for node in graph.nodes:
        node.inputs = [renamed_inputs.get(n) or outputs_fp16.get(n, n) for n in node.inputs]
        node.outputs = [outputs_fp16.get(n, n) for n in node.outputs]
        if node.op_type == "Cast" and int(node.attrs.get("to", 0)) == ONNX_FLOAT:
            node.attrs = {**node.attrs, "to": ONNX_FLOAT16}
        if precision == "mixed" and node.op_type in SENSITIVE:
            nodes.extend(_in_float32(graph, node, edges))
        else:
            nodes.append(node)
    for original, half in outputs_fp16.items():
        nodes.append(edges.cast_to(half, original, ONNX_FLOAT, "to_fp32"))
    graph.nodes = nodes
    graph.validate()
    return graph


class _Edges:
    """Makes the Cast nodes and fresh values the pass inserts."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: list[Node] = []
        self._count = 0

    def fresh(self, base: str, tag: str, dtype: np.dtype) -> str:
        self._count += 1
        name = f"{base}/{tag}{self._count}"
        self.graph.values[name] = Value(name, dtype, self.graph.value(base).shape)
        return name

    def cast_to(self, source: str, target: str, onnx_type: int, tag: str) -> Node:
        self._count += 1
        return Node("Cast", f"{target}/{tag}{self._count}", [source], [target],
                    {"to": onnx_type})

    def cast(self, source: str, dtype: np.dtype, tag: str) -> str:
        target = self.fresh(source, tag, dtype)
        self.nodes.append(self.cast_to(source, target, ONNX_FLOAT16 if dtype == FLOAT16
                                       else ONNX_FLOAT, tag))
        return target


def _in_float32(graph: Graph, node: Node, edges: _Edges) -> list[Node]:
    """``node`` computing in float32: its float16 inputs cast up, its float16 outputs
    written in float32 and cast back down."""
    casts_in: list[Node] = []
    casts_out: list[Node] = []

    def widened(name: str, reading: bool) -> str:
        if not name or graph.value(name).dtype != FLOAT16:
            return name
        wide = edges.fresh(name, "fp32", FLOAT32)
        if reading:
            casts_in.append(edges.cast_to(name, wide, ONNX_FLOAT, "fp32"))
        else:
            casts_out.append(edges.cast_to(wide, name, ONNX_FLOAT16, "fp16"))
        return wide

    node.inputs = [widened(name, True) for name in node.inputs]
    node.outputs = [widened(name, False) for name in node.outputs]
    return [*casts_in, node, *casts_out]
