"""Graph fusions run by ``passes.optimize`` after constant folding, before dead code
elimination: each rewrites a pattern of nodes into fewer nodes that compute the same values.

* ``fold_conv_affine``: a ``Conv`` with constant weights followed by constant per-channel
  ``Mul`` / ``Div`` / ``Add`` / ``Sub`` or an inference ``BatchNormalization`` is one ``Conv``
  with folded weights and bias (``W' = W * s``, ``b' = b * s + t``), computed in float64 and
  rounded once, as onnxruntime and ATC do.
* ``fuse_hard_swish``: ``x * clip(x + 3, 0, 6) / 6`` (``/ 6`` or ``* (1/6)``, either operand
  order) is one ``HardSwish``.

A pattern is rewritten only when every intermediate value it removes has exactly one reader
and is not a graph output, so no other node loses an input. New weights are new initializers
(an initializer shared with another node is never changed in place); the old ones go with
dead code elimination.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from openacl.model.ir import Graph, Node, Value

HARD_SWISH_OFFSET, HARD_SWISH_LIMIT = 3.0, 6.0


def fuse(graph: Graph) -> dict[str, int]:
    """Run every fusion; returns how many patterns each rewrote."""
    return {"conv_affine": fold_conv_affine(graph), "hard_swish": fuse_hard_swish(graph)}


class _Uses:
    """Readers of every value (graph outputs count as readers) and producers."""

    def __init__(self, graph: Graph) -> None:
        self.readers: Counter[str] = Counter(graph.outputs)
        self.producer: dict[str, Node] = {}
        self.consumer: dict[str, Node] = {}
        for node in graph.nodes:
            for name in node.inputs:
                if name:
                    self.readers[name] += 1
                    self.consumer[name] = node
            for name in node.outputs:
                self.producer[name] = node

    def only_reader(self, name: str) -> Node | None:
        """The node that alone reads ``name`` (None if several, none, or a graph output)."""
        return self.consumer.get(name) if self.readers[name] == 1 else None

    def sole_product(self, name: str, op_type: str) -> Node | None:
        """The ``op_type`` node producing ``name`` when nothing else reads ``name``."""
        node = self.producer.get(name)
        if node is None or node.op_type != op_type or self.readers[name] != 1:
            return None
        return node


def _scalar(graph: Graph, name: str) -> float | None:
    array = graph.initializers.get(name)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return None
    return float(array.reshape(()))


# -- Conv + per-channel affine / BatchNormalization -------------------------------------------
def _per_channel(graph: Graph, name: str, channels: int, rank: int) -> np.ndarray | None:
    """A constant that broadcasts as one value per output channel (dim 1), as float64[C]."""
    array = graph.initializers.get(name)
    if array is None or array.dtype.kind != "f" or array.ndim > rank:
        return None
    if array.size == 1:
        return np.full(channels, float(array.reshape(())))
    shape = (1,) * (rank - array.ndim) + array.shape
    if shape[1] != channels or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return array.reshape(channels).astype(np.float64)


def _affine_step(graph: Graph, node: Node, conv_output: str, channels: int,
                 rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``node`` as ``y = conv * scale + shift`` (float64[C] each), or None."""
    if node.op_type == "BatchNormalization":
        if (int(node.attrs.get("training_mode", 0)) or any(node.outputs[1:])
                or node.inputs[0] != conv_output):
            return None
        stats = [graph.initializers.get(name) for name in node.inputs[1:5]]
        if len(stats) != 4 or any(s is None or s.shape != (channels,) or s.dtype.kind != "f"
                                  for s in stats):
            return None
        gamma, beta, mean, variance = (s.astype(np.float64) for s in stats)
        scale = gamma / np.sqrt(variance + float(node.attrs.get("epsilon", 1e-5)))
        return scale, beta - mean * scale
    if node.op_type not in ("Mul", "Div", "Add", "Sub") or len(node.inputs) != 2:
        return None
    first, second = node.inputs
    other = second if first == conv_output else first
    if other == conv_output or (node.op_type in ("Div", "Sub") and second != other):
        return None  # x / x, c / x and c - x are not affine in x
    constant = _per_channel(graph, other, channels, rank)
    if constant is None:
        return None
    ones, zeros = np.ones(channels), np.zeros(channels)
    return {"Mul": (constant, zeros), "Div": (1.0 / constant, zeros),
            "Add": (ones, constant), "Sub": (ones, -constant)}[node.op_type]


def fold_conv_affine(graph: Graph) -> int:
    """Fold constant per-channel affine steps and BatchNormalization into the Conv before."""
    folded = 0
    uses = _Uses(graph)  # rebuilt after each rewrite only
    for conv in list(graph.nodes):
        if conv.op_type != "Conv" or len(conv.inputs) < 2:
            continue
        weight = graph.initializers.get(conv.inputs[1])
        bias_name = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else None
        bias = graph.initializers.get(bias_name) if bias_name else None
        if weight is None or weight.dtype.kind != "f" or (bias_name and bias is None):
            continue
        channels, rank = weight.shape[0], weight.ndim
        scale, shift = np.ones(channels), np.zeros(channels)
        absorbed: list[Node] = []
        while True:
            output = conv.outputs[0]
            follower = uses.only_reader(output)
            step = follower and _affine_step(graph, follower, output, channels, rank)
            if not step or graph.value(follower.outputs[0]).shape != graph.value(output).shape:
                break
            scale, shift = scale * step[0], shift * step[0] + step[1]
            conv.outputs = [follower.outputs[0]]
            graph.nodes.remove(follower)
            absorbed.append(follower)
            uses = _Uses(graph)
        if not absorbed:
            continue
        folded += len(absorbed)
        base = np.zeros(channels) if bias is None else bias.astype(np.float64)
        new_weight = weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (rank - 1))
        names = []
        for suffix, array in (("folded_weight", new_weight), ("folded_bias", base * scale + shift)):
            name = _fresh_name(graph, f"{conv.name or conv.outputs[0]}/{suffix}")
            graph.initializers[name] = array.astype(weight.dtype)
            graph.values[name] = Value(name, weight.dtype, tuple(array.shape))
            names.append(name)
        conv.inputs = [conv.inputs[0], *names]
    return folded


def _fresh_name(graph: Graph, name: str) -> str:
    candidate, number = name, 0
    while candidate in graph.values or candidate in graph.initializers:
        number += 1
        candidate = f"{name}.{number}"
    return candidate


# -- HardSwish ------------------------------------------------------------------------------------
def fuse_hard_swish(graph: Graph) -> int:
    """``x * clip(x + 3, 0, 6) / 6`` -> ``HardSwish(x)``."""
    fused = 0
    uses = _Uses(graph)  # rebuilt after each rewrite only
    for last in list(graph.nodes):
        match = _hard_swish_at(graph, uses, last)
        if match is None:
            continue
        x, removed = match
        # the pattern's first node reads x, and everything reading the result comes after
        # its last: the fused node takes the first one's place
        graph.nodes[graph.nodes.index(removed[0])] = Node(
            "HardSwish", last.name or f"{last.outputs[0]}/hardswish", [x], list(last.outputs))
        for node in removed[1:]:
            graph.nodes.remove(node)
        fused += 1
        uses = _Uses(graph)
    return fused


def _hard_swish_at(graph: Graph, uses: _Uses, last: Node) -> tuple[str, list[Node]] | None:
    """(x, nodes replaced) when ``last`` ends the pattern; else None."""
    if last.op_type not in ("Div", "Mul") or len(last.inputs) != 2:
        return None
    if last.op_type == "Div":
        product_name, divisor = last.inputs
        if _scalar(graph, divisor) != HARD_SWISH_LIMIT:
            return None
    else:
        constants = [name for name in last.inputs
                     if _scalar(graph, name) is not None and np.isclose(
                         _scalar(graph, name), 1 / HARD_SWISH_LIMIT, rtol=1e-6, atol=0)]
        if len(constants) != 1:
            return None
        product_name = last.inputs[1 - last.inputs.index(constants[0])]
    product = uses.sole_product(product_name, "Mul")
    if product is None or len(product.inputs) != 2:
        return None
    for x, clipped in (product.inputs, product.inputs[::-1]):
        clip = uses.sole_product(clipped, "Clip")
        if clip is None or len(clip.inputs) != 3 or clip.attrs:
            continue
        if (_scalar(graph, clip.inputs[1]) != 0.0
                or _scalar(graph, clip.inputs[2]) != HARD_SWISH_LIMIT):
            continue
        shifted = uses.sole_product(clip.inputs[0], "Add")
        if shifted is None or len(shifted.inputs) != 2 or x not in shifted.inputs:
            continue
        offset = shifted.inputs[1 - shifted.inputs.index(x)]
        if offset == x or _scalar(graph, offset) != HARD_SWISH_OFFSET:
            continue
        if graph.value(last.outputs[0]).shape != graph.value(x).shape:
            continue
        return x, [shifted, clip, product, last]
    return None
