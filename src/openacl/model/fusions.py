"""Graph fusions run by ``passes.optimize`` after constant folding, before dead code
elimination: each rewrites a pattern of nodes into fewer nodes that compute the same values.

* ``fold_conv_affine``: a ``Conv`` or ``ConvTranspose`` with constant weights followed by
  constant per-channel ``Mul`` / ``Div`` / ``Add`` / ``Sub`` or an inference
  ``BatchNormalization`` is one node with folded weights and bias (``W' = W * s`` per output
  channel, ``b' = b * s + t``), computed in float64 and rounded once, as onnxruntime and
  ATC do.
* ``fuse_hard_swish``: ``x * clip(x + 3, 0, 6) / 6`` (``/ 6`` or ``* (1/6)``, either operand
  order) is one ``HardSwish``.
* ``pretranspose_gemm_weights`` (first): a ``Gemm`` whose transposed operand is a constant
  read by nothing else gets it transposed once, here (``transA`` / ``transB`` cleared), so
  no run transposes a weight.
* ``batch_shared_weight_products`` (after it): ``Gemm`` / ``MatMul`` nodes that multiply
  rows by one constant weight (the same bias and attributes) and do not depend on each
  other are one product of their rows stacked (``Concat``, the product, ``Split``): an
  unrolled recurrence's input projections, one per time step, stream their weight once
  instead of once per step. The graph is then sorted again (the stacked product runs where
  all its rows are ready).
* ``fuse_layer_norm``: layer normalisation written out, ``(x - mean) / sqrt(var + eps)``
  with ``var = mean((x - mean)^2)`` over trailing axes, then an optional constant scale and
  bias (PyTorch's exports before opset 17), is one ``LayerNormalization``.
* ``fuse_silu``: ``x * sigmoid(x)`` (SiLU / Swish, YOLO's activation; either operand order)
  is one ``Silu`` node, lowered onto aclnnSilu: one pass where there were two.
* ``fuse_gelu_erf``: GELU written out with Erf, ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (``/
  sqrt(2)`` or ``* (1/sqrt(2))``, the two products in any order and grouping, as PyTorch
  and Paddle exporters write it) is one ``Gelu`` node: one pass where there were five.
* ``fuse_matmul_epilogue``: ``MatMul`` by a constant matrix, then an ``Add`` of a constant
  bias row and/or a ``Relu`` (or a plain ``Gemm`` then ``Relu``) is one ``FusedMatMul``
  node, lowered onto aclnnFusedMatmul (fusedOpType "" or "relu"): one step where there
  were two or three, the bias and the ReLU applied in place on the product.
* ``fold_matmul_scale``: ``MatMul(a, b) * s`` with ``s`` a constant scalar, where ``a`` (or
  ``b``) comes from a ``FusedMatMul`` through shape-only nodes (attention's
  ``softmax(q @ k^T * 1/sqrt(d))``, ``q`` a projection reshaped into heads): ``s`` is folded
  into that projection's weights and bias, and the Mul, a pass over every score, goes.
* ``fuse_add_layer_norm``: ``LayerNormalization(a + b)`` with constant scale and bias (a
  transformer's residual add then norm) is one ``AddLayerNorm``, lowered onto
  aclnnAddLayerNorm; the bias row of a ``FusedMatMul`` producing ``a`` or ``b`` moves into
  it (added in the same pass instead of its own pass over the product).
* ``fuse_qdq`` (first, on the weights' DequantizeLinear that folding left for it): a QDQ
  group, DequantizeLinear -> Conv / MatMul / Gemm [-> a redundant Relu / Clip] ->
  QuantizeLinear, is the QLinearConv / QLinearMatMul / QGemm onnxruntime makes of it (and a
  MatMul / Gemm of dequantized operands with no Q after, its MatMulIntegerToFloat / float
  QGemm): integer accumulation and one requantization, where the float op would land a
  halfway quotient one step away. It fuses exactly the groups onnxruntime's QDQ selectors
  take (see that section), so the quantized values are onnxruntime's to the bit.
  ``quantize_weights_and_biases`` (run by ``passes.optimize`` before folding) first makes
  the rewrites onnxruntime makes before its selectors (MatMul + Add -> Gemm, float weights
  and biases quantized), which decide what its groups are.

A pattern is rewritten only when every intermediate value it removes has exactly one reader
and is not a graph output, so no other node loses an input (a QDQ group's DequantizeLinear
nodes stay for their other readers, as onnxruntime gives each reader a copy). New weights
are new initializers (an initializer shared with another node is never changed in place);
the old ones go with dead code elimination.
"""

from __future__ import annotations

import math
import platform
from collections import Counter
from collections.abc import Callable

import numpy as np

from openacl.model.ir import Graph, Node, Value

HARD_SWISH_OFFSET, HARD_SWISH_LIMIT = 3.0, 6.0


def fuse(graph: Graph) -> dict[str, int]:
    """Run every fusion; returns how many patterns each rewrote."""
    return {"gemm_weights": pretranspose_gemm_weights(graph),
            "shared_weight_products": batch_shared_weight_products(graph),
            "qdq": fuse_qdq(graph),
            "conv_affine": fold_conv_affine(graph),
            "layer_norm": fuse_layer_norm(graph),
            "hard_swish": fuse_hard_swish(graph), "gelu_erf": fuse_gelu_erf(graph),
            "silu": fuse_silu(graph),
            "matmul_epilogue": fuse_matmul_epilogue(graph),
            "matmul_scale": fold_matmul_scale(graph),
            "add_layer_norm": fuse_add_layer_norm(graph)}


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
    if node.op_type == "Div":  # a division by zero stays a division (inf, NaN as it makes)
        return None if (constant == 0).any() else (1.0 / constant, zeros)
    return {"Mul": (constant, zeros), "Add": (ones, constant),
            "Sub": (ones, -constant)}[node.op_type]


def fold_conv_affine(graph: Graph) -> int:
    """Fold constant per-channel affine steps and BatchNormalization into the Conv (or
    ConvTranspose) before."""
    folded = 0
    uses = _Uses(graph)  # rebuilt after each rewrite only
    for conv in list(graph.nodes):
        if conv.op_type not in ("Conv", "ConvTranspose") or len(conv.inputs) < 2:
            continue
        weight = graph.initializers.get(conv.inputs[1])
        bias_name = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else None
        bias = graph.initializers.get(bias_name) if bias_name else None
        if weight is None or weight.dtype.kind != "f" or (bias_name and bias is None):
            continue
        groups = int(conv.attrs.get("group", 1))
        transposed = conv.op_type == "ConvTranspose"  # weight (C_in, C_out / G, *kernel)
        channels, rank = (weight.shape[1] * groups if transposed else weight.shape[0],
                          weight.ndim)
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
        new_weight = _scaled_weight(weight, scale, groups, transposed)
        names = []
        for suffix, array in (("folded_weight", new_weight), ("folded_bias", base * scale + shift)):
            names.append(_new_initializer(graph, f"{conv.name or conv.outputs[0]}/{suffix}",
                                          array.astype(weight.dtype)))
        conv.inputs = [conv.inputs[0], *names]
    return folded


def _scaled_weight(weight: np.ndarray, scale: np.ndarray, groups: int,
                   transposed: bool) -> np.ndarray:
    """``weight`` (float64) with output channel o scaled by ``scale[o]``: dim 0 of a Conv's
    weight; dim 1 within each group of a ConvTranspose's."""
    wide = weight.astype(np.float64)
    kernel = (1,) * (weight.ndim - 2)
    if not transposed:
        return wide * scale.reshape(-1, 1, *kernel)
    c_in, per_group = weight.shape[:2]
    grouped = wide.reshape(groups, c_in // groups, per_group, *weight.shape[2:])
    return (grouped * scale.reshape(groups, 1, per_group, *kernel)).reshape(weight.shape)


def _new_initializer(graph: Graph, name: str, array: np.ndarray) -> str:
    """Add ``array`` as a new initializer named ``name`` (or ``name.N`` where that is taken)
    with its value entry; returns the name."""
    candidate = _new_value(graph, name, array.dtype, tuple(array.shape))
    graph.initializers[candidate] = array
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


# -- Gemm with a transposed constant ----------------------------------------------------------
def pretranspose_gemm_weights(graph: Graph) -> int:
    """``Gemm(a, W, transB=1)`` with ``W`` a constant that every reader takes transposed ->
    ``Gemm(a, W^T)``, one transposed copy shared by them all (an unrolled recurrence's 20
    steps read one weight); likewise ``transA``. A weight some reader takes as it is stays
    as it is (a second copy would double its memory). Returns how many operands changed."""
    uses = _Uses(graph)
    wanted: Counter[tuple[str, int]] = Counter()  # (weight, position) -> Gemms taking it
    for node in graph.nodes:                      # transposed there
        if node.op_type == "Gemm":
            for position, flag in ((0, "transA"), (1, "transB")):
                if int(node.attrs.get(flag, 0)) and node.inputs[position] in graph.initializers:
                    wanted[node.inputs[position], position] += 1
    transposed: dict[str, str] = {}
    done = 0
    for node in graph.nodes:
        if node.op_type != "Gemm":
            continue
        for position, flag in ((0, "transA"), (1, "transB")):
            name = node.inputs[position]
            array = graph.initializers.get(name)
            if not int(node.attrs.get(flag, 0)) or array is None or array.ndim != 2 or \
                    uses.readers[name] != wanted[name, position]:
                continue
            if name not in transposed:
                transposed[name] = _new_initializer(graph, f"{name}/transposed",
                                                    np.ascontiguousarray(array.T))
            node.inputs[position] = transposed[name]
            node.attrs = {key: value for key, value in node.attrs.items() if key != flag}
            done += 1
    return done


# -- products that share a weight, batched ------------------------------------------------------
def batch_shared_weight_products(graph: Graph) -> int:
    """Independent ``Gemm`` / ``MatMul`` nodes multiplying 2-d rows by one constant 2-d
    weight (same bias and attributes) -> ``Concat`` of their rows, one product, ``Split``
    back into their outputs, where the weight outweighs the rows copied. A node joins a
    batch only if its rows do not depend on a product already in it (so the batch has no
    cycle); the nodes are sorted again after. Returns how many products were removed."""
    if any(hasattr(value, "node") for node in graph.nodes for value in node.attrs.values()):
        return 0  # a subgraph reads outer names no edge shows: the order must stay
    groups: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        key = _shared_weight_key(graph, node)
        if key is not None:
            groups.setdefault(key, []).append(node)
    # (made once: a stacked batch's Concat -> product -> Split links the same names its
    # products did, so what each value reaches stays as this map says)
    readers: dict[str, list[Node]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node)
    removed = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        for batch in _independent_batches(members, readers):
            weight = graph.initializers[batch[0].inputs[1]]
            rows = sum(graph.value(node.inputs[0]).nbytes for node in batch)
            if len(batch) > 1 and weight.nbytes >= rows:
                _stack_products(graph, batch)
                removed += len(batch) - 1
    if removed:
        _sort_nodes(graph)
    return removed


def _shared_weight_key(graph: Graph, node: Node) -> tuple | None:
    """The grouping key of a product of 2-d rows by a constant 2-d weight (None: not one):
    op, weight, bias (a row or none) and attributes."""
    if node.op_type not in ("Gemm", "MatMul") or len(node.outputs) != 1:
        return None
    rows, weight = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else ""
    array = graph.initializers.get(weight)
    if array is None or array.ndim != 2 or rows in graph.initializers or \
            len(graph.value(rows).shape) != 2:
        return None
    if node.op_type == "MatMul":
        return ("MatMul", weight)
    if int(node.attrs.get("transA", 0)):
        return None
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    if bias:  # a bias row (or scalar) broadcast over the rows, the same for every batch
        shape = graph.value(bias).shape
        columns = array.shape[0] if int(node.attrs.get("transB", 0)) else array.shape[1]
        if shape not in ((), (1,), (columns,), (1, columns)):
            return None
    return ("Gemm", weight, bias, tuple(sorted((k, str(v)) for k, v in node.attrs.items())))


def _independent_batches(members: list[Node], readers: dict[str, list[Node]]
                         ) -> list[list[Node]]:
    """``members`` (in graph order) cut into batches whose rows read no batch member's
    output, directly or through other nodes."""
    batches: list[list[Node]] = []
    pending = list(members)
    while pending:
        batch, reached, rest = [], set(), []
        for node in pending:
            if node.inputs[0] in reached:
                rest.append(node)
                continue
            batch.append(node)
            frontier = [name for name in node.outputs if name]
            while frontier:  # everything computed from this product
                name = frontier.pop()
                if name in reached:
                    continue
                reached.add(name)
                for reader in readers.get(name, ()):
                    frontier.extend(out for out in reader.outputs if out)
        batches.append(batch)
        pending = rest
    return batches


def _stack_products(graph: Graph, batch: list[Node]) -> None:
    """Replace ``batch`` (products by one weight) with Concat -> the product -> Split."""
    first = batch[0]
    counts = [graph.value(node.inputs[0]).shape[0] for node in batch]
    depth = graph.value(first.inputs[0]).shape[1]
    out = graph.value(first.outputs[0])
    stacked = _new_value(graph, f"{first.name}/stacked_rows", graph.value(first.inputs[0]).dtype,
                         (sum(counts), depth))
    product = _new_value(graph, f"{first.name}/stacked_product", out.dtype,
                         (sum(counts), out.shape[1]))
    nodes = [Node("Concat", f"{first.name}/stack", [node.inputs[0] for node in batch],
                  [stacked], {"axis": 0}),
             Node(first.op_type, f"{first.name}/stacked", [stacked, *first.inputs[1:]],
                  [product], dict(first.attrs))]
    outputs = [node.outputs[0] for node in batch]
    if graph.opset >= SPLIT_SIZES_INPUT_OPSET:
        sizes = _new_initializer(graph, f"{first.name}/split_sizes",
                                 np.array(counts, np.int64))
        nodes.append(Node("Split", f"{first.name}/unstack", [product, sizes], outputs,
                          {"axis": 0}))
    else:
        nodes.append(Node("Split", f"{first.name}/unstack", [product], outputs,
                          {"axis": 0, "split": counts}))
    members = {id(node) for node in batch}
    index = graph.nodes.index(first)
    graph.nodes[:] = [node for node in graph.nodes if id(node) not in members]
    graph.nodes[index:index] = nodes  # (out of order until _sort_nodes)


SPLIT_SIZES_INPUT_OPSET = 13  # Split takes its sizes as an input from here on


def _sort_nodes(graph: Graph) -> None:
    """The nodes in a topological order that keeps their present order where it can
    (Kahn's algorithm, taking the earliest ready node first)."""
    import heapq

    producer = {name: index for index, node in enumerate(graph.nodes)
                for name in node.outputs if name}
    waiting = [0] * len(graph.nodes)
    dependents: dict[int, list[int]] = {}
    for index, node in enumerate(graph.nodes):
        for name in {name for name in node.inputs if name in producer}:
            waiting[index] += 1
            dependents.setdefault(producer[name], []).append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for dependent in dependents.get(index, ()):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) != len(graph.nodes):  # (a batch is acyclic by construction)
        raise AssertionError("batch_shared_weight_products made a cycle")
    graph.nodes[:] = [graph.nodes[index] for index in order]


# -- LayerNormalization written out ------------------------------------------------------------
def fuse_layer_norm(graph: Graph) -> int:
    """``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale] [+ bias]`` over
    trailing axes -> ``LayerNormalization(x, scale, bias, axis, epsilon)``."""
    fused = 0
    uses = _Uses(graph)
    for divide in list(graph.nodes):
        if divide.op_type != "Div" or divide not in graph.nodes:
            continue
        match = _layer_norm_at(graph, uses, divide)
        if match is None:
            continue
        x, axis, epsilon, removed, last, scale, bias = match
        graph.nodes[graph.nodes.index(last)] = Node(
            "LayerNormalization", last.name or f"{last.outputs[0]}/layer_norm",
            [x, scale, bias], list(last.outputs), {"axis": axis, "epsilon": epsilon})
        for node in removed:
            graph.nodes.remove(node)
        fused += 1
        uses = _Uses(graph)
    return fused


def _mean_axes(graph: Graph, node: Node | None) -> tuple[int, ...] | None:
    """The sorted non-negative axes of a keepdims ``ReduceMean``, or None."""
    if node is None or node.op_type != "ReduceMean" or not int(node.attrs.get("keepdims", 1)):
        return None
    rank = len(graph.value(node.inputs[0]).shape)
    if "axes" in node.attrs:
        axes = list(node.attrs["axes"])
    elif len(node.inputs) > 1 and node.inputs[1] in graph.initializers:
        axes = graph.initializers[node.inputs[1]].reshape(-1).tolist()
    else:
        return None
    return tuple(sorted(int(a) + rank if int(a) < 0 else int(a) for a in axes)) or None


def _layer_norm_at(graph: Graph, uses: _Uses, divide: Node) -> tuple | None:
    """(x, axis, epsilon, nodes removed, node replaced, scale, bias) when ``divide`` is the
    normalisation of a written-out layer norm; else None."""
    centred, root = divide.inputs
    sqrt = uses.sole_product(root, "Sqrt")
    shifted = None if sqrt is None else uses.sole_product(sqrt.inputs[0], "Add")
    if shifted is None or len(shifted.inputs) != 2:
        return None
    variance = next((name for name in shifted.inputs if _scalar(graph, name) is None), None)
    eps_name = next((name for name in shifted.inputs if name != variance), None)
    epsilon = None if eps_name is None else _scalar(graph, eps_name)
    var_mean = None if variance is None else uses.sole_product(variance, "ReduceMean")
    square = None if var_mean is None else uses.producer.get(var_mean.inputs[0])
    if epsilon is None or square is None or uses.readers[var_mean.inputs[0]] != 1:
        return None
    if not ((square.op_type == "Pow" and square.inputs[0] == centred
             and _scalar(graph, square.inputs[1]) == 2.0)
            or (square.op_type == "Mul" and square.inputs == [centred, centred])):
        return None
    sub = uses.producer.get(centred)
    if sub is None or sub.op_type != "Sub" or uses.readers[centred] != (
            2 if square.op_type == "Pow" else 3):
        return None
    x, mean = sub.inputs
    mean_node = uses.sole_product(mean, "ReduceMean")
    axes = _mean_axes(graph, mean_node)
    shape = graph.value(x).shape
    if axes is None or mean_node.inputs[0] != x or _mean_axes(graph, var_mean) != axes or \
            axes != tuple(range(axes[0], len(shape))) or graph.value(x).dtype.kind != "f":
        return None
    normalized = tuple(shape[axes[0]:])
    removed = [mean_node, sub, square, var_mean, shifted, sqrt, divide]
    last, scale, bias = divide, "", ""
    after = uses.only_reader(last.outputs[0])
    if after is not None and after.op_type == "Mul":
        scale = _normalized_constant(graph, after, last.outputs[0], normalized)
        if scale:
            removed.append(after)
            last, after = after, uses.only_reader(after.outputs[0])
    if after is not None and after.op_type == "Add":
        bias = _normalized_constant(graph, after, last.outputs[0], normalized)
        if bias:
            removed.append(after)
            last = after
    if graph.value(last.outputs[0]).shape != shape:
        return None
    if not scale:
        scale = _new_initializer(graph, f"{divide.name or divide.outputs[0]}/scale",
                                 np.ones(normalized, graph.value(x).dtype))
    removed.remove(last)
    return x, axes[0], float(epsilon), removed, last, scale, bias


def _normalized_constant(graph: Graph, node: Node, operand: str,
                         normalized: tuple[int, ...]) -> str:
    """The other input of ``node`` (which reads ``operand``) as a constant of the normalized
    shape (made so when it broadcasts as one), or ''."""
    if len(node.inputs) != 2 or operand not in node.inputs:
        return ""
    name = node.inputs[1 - node.inputs.index(operand)]
    array = graph.initializers.get(name)
    if array is None or array.dtype.kind != "f" or array.ndim > len(normalized):
        return ""
    try:
        if np.broadcast_shapes(array.shape, normalized) != normalized:
            return ""
    except ValueError:  # does not broadcast
        return ""
    if array.shape == normalized:
        return name
    return _new_initializer(graph, f"{name}/normalized",
                            np.ascontiguousarray(np.broadcast_to(array, normalized)))


# -- SiLU -----------------------------------------------------------------------------------------
SILU = "Silu"  # the IR op type (not an ONNX one)


def fuse_silu(graph: Graph) -> int:
    """``Mul(x, Sigmoid(x))`` (the Sigmoid read by the Mul alone) -> ``Silu(x)``."""
    fused = 0
    uses = _Uses(graph)
    for mul in list(graph.nodes):
        if mul.op_type != "Mul" or len(mul.inputs) != 2 or mul.inputs[0] == mul.inputs[1]:
            continue
        for x, gate in (mul.inputs, mul.inputs[::-1]):
            sigmoid = uses.sole_product(gate, "Sigmoid")
            if sigmoid is None or sigmoid.inputs[0] != x or \
                    graph.value(x).shape != graph.value(mul.outputs[0]).shape or \
                    graph.value(x).dtype.kind != "f":
                continue
            graph.nodes[graph.nodes.index(mul)] = Node(
                SILU, mul.name or f"{mul.outputs[0]}/silu", [x], list(mul.outputs))
            graph.nodes.remove(sigmoid)
            fused += 1
            uses = _Uses(graph)
            break
    return fused


# -- GELU, erf form ------------------------------------------------------------------------------
SQRT_HALF = math.sqrt(0.5)
GELU_CONSTANT_RTOL = 1e-6  # float32 spellings of sqrt(2), 1/sqrt(2) and 0.5


def _is_constant(graph: Graph, name: str, expected: float) -> bool:
    value = _scalar(graph, name)
    return value is not None and math.isclose(value, expected, rel_tol=GELU_CONSTANT_RTOL)


def _other_input(graph: Graph, node: Node, expected: float) -> str | None:
    """The input of a two-input ``node`` that is not the constant ``expected``."""
    if len(node.inputs) != 2:
        return None
    for index, name in enumerate(node.inputs):
        if _is_constant(graph, name, expected):
            return node.inputs[1 - index]
    return None


def fuse_gelu_erf(graph: Graph) -> int:
    """``x * 0.5 * (1 + erf(x / sqrt(2)))`` -> ``Gelu(x)`` (ONNX's, approximate "none")."""
    fused = 0
    uses = _Uses(graph)
    for erf in list(graph.nodes):
        if erf.op_type != "Erf" or erf not in graph.nodes:
            continue
        match = _gelu_erf_at(graph, uses, erf)
        if match is None:
            continue
        x, removed, last = match
        # every node of the pattern reads x or a value of the pattern: the fused node
        # takes the last one's place, after all of them
        graph.nodes[graph.nodes.index(last)] = Node(
            "Gelu", last.name or f"{last.outputs[0]}/gelu", [x], list(last.outputs))
        for node in removed:
            graph.nodes.remove(node)
        fused += 1
        uses = _Uses(graph)
    return fused


def _gelu_erf_at(graph: Graph, uses: _Uses, erf: Node) -> tuple[str, list[Node], Node] | None:
    """(x, nodes removed, the node the Gelu replaces) when ``erf`` is a GELU's; else None."""
    scaled = uses.sole_product(erf.inputs[0], "Div") or uses.sole_product(erf.inputs[0], "Mul")
    if scaled is None:
        return None
    x = _other_input(graph, scaled, math.sqrt(2.0) if scaled.op_type == "Div" else SQRT_HALF)
    if x is None or (scaled.op_type == "Div" and scaled.inputs[0] != x):
        return None
    shifted = uses.only_reader(erf.outputs[0])
    if shifted is None or shifted.op_type != "Add" or _other_input(
            graph, shifted, 1.0) != erf.outputs[0]:
        return None
    one_plus = shifted.outputs[0]
    first = uses.only_reader(one_plus)
    if first is None or first.op_type != "Mul" or len(first.inputs) != 2:
        return None
    partner = first.inputs[1 - first.inputs.index(one_plus)]
    head = [scaled, erf, shifted, first]
    if partner == x:  # (x * (1 + erf)) * 0.5
        last = uses.only_reader(first.outputs[0])
        if last is None or last.op_type != "Mul" or _other_input(
                graph, last, 0.5) != first.outputs[0]:
            return None
        nodes = head
    elif _is_constant(graph, partner, 0.5):  # x * ((1 + erf) * 0.5)
        last = uses.only_reader(first.outputs[0])
        if last is None or last.op_type != "Mul" or len(last.inputs) != 2 or \
                set(last.inputs) != {x, first.outputs[0]}:
            return None
        nodes = head
    else:  # (x * 0.5) * (1 + erf)
        half = uses.sole_product(partner, "Mul")
        if half is None or _other_input(graph, half, 0.5) != x:
            return None
        last, nodes = first, [half, *head[:-1]]
    if graph.value(last.outputs[0]).shape != graph.value(x).shape or \
            graph.value(x).dtype.kind != "f":
        return None
    return x, [node for node in nodes if node is not last], last


# -- MatMul / Gemm + bias + ReLU -------------------------------------------------------------------
FUSED_MATMUL = "FusedMatMul"  # the IR op type (not an ONNX one: the importer takes none such)


def fuse_matmul_epilogue(graph: Graph) -> int:
    """``MatMul(x, W)`` [+ bias] [-> Relu] and ``Gemm(x, W, bias) -> Relu`` ->
    ``FusedMatMul(x, W, bias)`` with attribute ``fusedOpType`` "" or "relu"."""
    fused = 0
    uses = _Uses(graph)  # rebuilt after each rewrite only
    for node in list(graph.nodes):
        start = _matmul_operands(graph, node)
        if start is None:
            continue
        x, weight, bias = start
        absorbed: list[Node] = []
        output = node.outputs[0]
        if bias is None and node.op_type == "MatMul":
            follower = uses.only_reader(output)
            bias = follower and _bias_row(graph, follower, output, weight.shape[1])
            if bias:
                absorbed.append(follower)
                output = follower.outputs[0]
        follower = uses.only_reader(output)
        relu = follower is not None and follower.op_type == "Relu"
        if relu:
            absorbed.append(follower)
            output = follower.outputs[0]
        if not absorbed or (node.op_type == "Gemm" and not relu):
            continue  # nothing to fuse (a Gemm with a bias is one aclnnAddmm already)
        if graph.value(output).shape != graph.value(node.outputs[0]).shape:
            continue
        weight_name = node.inputs[1]
        if node.op_type == "Gemm" and node.attrs.get("transB", 0):
            weight_name = _new_initializer(graph, f"{node.name or output}/weight_t",
                                           np.ascontiguousarray(weight))
        graph.nodes[graph.nodes.index(node)] = Node(
            FUSED_MATMUL, node.name or f"{output}/fused_matmul", [x, weight_name, bias or ""],
            [output], {"fusedOpType": "relu" if relu else ""})
        for removed in absorbed:
            graph.nodes.remove(removed)
        fused += 1
        uses = _Uses(graph)
    return fused


def _matmul_operands(graph: Graph, node: Node) -> tuple[str, np.ndarray, str | None] | None:
    """(x, W as it multiplies, bias row or None) of a MatMul by a constant float matrix, or
    of a plain Gemm (alpha = beta = 1, x not transposed, bias a constant row); else None."""
    if node.op_type not in ("MatMul", "Gemm") or len(node.inputs) < 2:
        return None
    x, weight_name = node.inputs[:2]
    weight = graph.initializers.get(weight_name)
    if weight is None or weight.ndim != 2 or weight.dtype.kind != "f" or not x:
        return None
    x_value = graph.value(x)
    if x_value.dtype != weight.dtype or len(x_value.shape) < 2:
        return None
    if node.op_type == "MatMul":
        return x, weight, None
    if (node.attrs.get("transA", 0) or float(node.attrs.get("alpha", 1.0)) != 1.0
            or float(node.attrs.get("beta", 1.0)) != 1.0):
        return None
    if node.attrs.get("transB", 0):
        weight = weight.T
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    if bias is not None and _row(graph, bias, weight.shape[1]) is None:
        return None
    return x, weight, bias


def _bias_row(graph: Graph, node: Node, product: str, columns: int) -> str | None:
    """The constant bias row that ``node`` adds to ``product`` (either operand order)."""
    if node.op_type != "Add" or len(node.inputs) != 2 or product not in node.inputs:
        return None
    other = node.inputs[1 - node.inputs.index(product)]
    if other == product or _row(graph, other, columns) is None:
        return None
    if graph.initializers[other].dtype != graph.value(product).dtype:
        return None
    return other


def _row(graph: Graph, name: str, columns: int) -> np.ndarray | None:
    """A constant float of shape [columns] or [1, columns] (what broadcasts as one bias per
    output column, within aclnnFusedMatmul's 1-2 bias dims)."""
    array = graph.initializers.get(name)
    if array is None or array.dtype.kind != "f" or array.shape not in ((columns,),
                                                                        (1, columns)):
        return None
    return array


# -- Add + LayerNormalization ----------------------------------------------------------------------
ADD_LAYER_NORM = "AddLayerNorm"  # the IR op type (not an ONNX one)


def fuse_add_layer_norm(graph: Graph) -> int:
    """``LayerNormalization(Add(a, b), scale, bias)`` (a and b of the sum's shape; scale and
    bias constants of the normalized shape; only Y used) -> ``AddLayerNorm(a, b, scale,
    bias, matmul_bias)`` with attributes ``epsilon`` and ``axis``."""
    fused = 0
    uses = _Uses(graph)
    for norm in list(graph.nodes):
        if norm.op_type != "LayerNormalization" or int(norm.attrs.get("stash_type", 1)) != 1:
            continue
        if any(name and uses.readers[name] for name in norm.outputs[1:]):
            continue  # Mean / InvStdDev are read: aclnnAddLayerNorm's float32 stats differ
        total = norm.inputs[0]
        add = uses.sole_product(total, "Add")
        shape = graph.value(total).shape
        if add is None or len(add.inputs) != 2 or any(
                graph.value(name).shape != shape for name in add.inputs):
            continue
        axis = int(norm.attrs.get("axis", -1))
        normalized = tuple(shape[axis + len(shape) if axis < 0 else axis:])
        params = _norm_params(graph, norm, normalized)
        if params is None:
            continue
        bias = _movable_matmul_bias(graph, uses, add, normalized)
        graph.nodes[graph.nodes.index(norm)] = Node(
            ADD_LAYER_NORM, norm.name or f"{norm.outputs[0]}/add_layer_norm",
            [*add.inputs, *params, bias or ""], [norm.outputs[0]],
            {"epsilon": float(norm.attrs.get("epsilon", 1e-5)), "axis": axis})
        graph.nodes.remove(add)
        fused += 1
        uses = _Uses(graph)
    return fused


def _norm_params(graph: Graph, norm: Node, normalized: tuple[int, ...]) -> list[str] | None:
    """[scale, bias] of a LayerNormalization as constants of the normalized shape (a missing
    bias becomes zeros), or None."""
    names = []
    for position in (1, 2):
        name = norm.inputs[position] if len(norm.inputs) > position else ""
        if not name:  # LayerNormalization's B is optional: aclnnAddLayerNorm's beta is not
            scale = graph.initializers[names[0]]
            name = _new_initializer(graph, f"{norm.name or norm.outputs[0]}/beta",
                                    np.zeros(normalized, scale.dtype))
        array = graph.initializers.get(name)
        if array is None or array.shape != normalized or array.dtype.kind != "f":
            return None
        names.append(name)
    return names


def _movable_matmul_bias(graph: Graph, uses: _Uses, add: Node,
                         normalized: tuple[int, ...]) -> str | None:
    """Take the bias row off a ``FusedMatMul`` (no epilogue besides the bias) whose product
    only the Add reads, for the AddLayerNorm to add; its name (reshaped to the normalized
    shape where needed), or None when no operand qualifies."""
    for operand in add.inputs:
        matmul = uses.sole_product(operand, FUSED_MATMUL)
        if matmul is None or matmul.attrs.get("fusedOpType") or not matmul.inputs[2]:
            continue
        bias = matmul.inputs[2]
        row = graph.initializers[bias]
        if row.size != int(np.prod(normalized)) or row.dtype != graph.value(operand).dtype:
            continue
        if row.shape != normalized:
            bias = _new_initializer(graph, f"{bias}/row", row.reshape(normalized))
        matmul.inputs[2] = ""
        return bias
    return None


# -- MatMul(a, b) * scalar, a from a projection ----------------------------------------------------
SHAPE_ONLY = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})


def fold_matmul_scale(graph: Graph) -> int:
    """``Mul(MatMul(a, b), s)`` (either operand order, ``s`` a constant float scalar) ->
    ``MatMul(a', b)``, where ``a`` is a ``FusedMatMul`` (no ReLU) seen through shape-only
    nodes, each read once: its weight and bias are scaled by ``s`` (float64, rounded once;
    new initializers, so shared ones stay)."""
    folded = 0
    uses = _Uses(graph)
    for mul in list(graph.nodes):
        if mul.op_type != "Mul" or len(mul.inputs) != 2:
            continue
        for position in (0, 1):
            scale = _scalar(graph, mul.inputs[1 - position])
            matmul = uses.sole_product(mul.inputs[position], "MatMul")
            if scale is None or matmul is None:
                continue
            projection = next(filter(None, (_projection_behind(uses, operand)
                                            for operand in matmul.inputs)), None)
            if projection is None:
                continue
            _scale_projection(graph, projection, scale)
            matmul.outputs[0] = mul.outputs[0]
            graph.nodes.remove(mul)
            folded += 1
            uses = _Uses(graph)
            break
    return folded


def _projection_behind(uses: _Uses, name: str) -> Node | None:
    """The FusedMatMul (fusedOpType "") whose product reaches ``name`` through shape-only
    nodes only, every value on the way read once; None otherwise."""
    for _ in range(len(SHAPE_ONLY) + 4):  # a short chain: reshape, transpose, ...
        node = uses.producer.get(name)
        if node is None or uses.readers[name] != 1:
            return None
        if node.op_type == FUSED_MATMUL:
            return None if node.attrs.get("fusedOpType") else node
        if node.op_type not in SHAPE_ONLY:
            return None
        name = node.inputs[0]
    return None


def _scale_projection(graph: Graph, projection: Node, scale: float) -> None:
    for position in (1, 2):
        name = projection.inputs[position]
        if not name:
            continue
        array = graph.initializers[name]
        projection.inputs[position] = _new_initializer(
            graph, f"{name}/scaled", (array.astype(np.float64) * scale).astype(array.dtype))


# -- QDQ groups -> QLinearConv / QLinearMatMul / MatMulIntegerToFloat / QGemm --------------------
# onnxruntime (CPU, graph optimizations on, its default) rewrites DequantizeLinear -> Conv /
# MatMul / Gemm -> QuantizeLinear into its integer kernels: integer accumulation and one
# requantization, where the float op lands a halfway quotient one quantization step away.
# Its QDQ selectors (qdq_selectors.cc: ConvNodeGroupSelector with CheckConvBiasScale,
# MatMulNodeGroupSelector, GemmNodeGroupSelector, the shared GetQDQSelection /
# CheckQDQNodes / CanCreateNodeGroup; ReluQuantFusion, ClipQuantFusion and
# IsClipMadeRedundantByQ for a Relu / Clip before the Q; EnsureUniqueDQForNodeUnit, which
# copies a DequantizeLinear read twice) decide which groups, checked against onnxruntime
# 1.32's fused graphs. These rules are theirs, narrowed where the fused op would not
# compute what the group means (a weight scale per channel along another axis than the
# output's; a Gemm bias dequantized with another scale, which onnxruntime fuses all the
# same) or where our lowerings take less (activations and outputs per tensor, float32
# scales, operands of 2 or more dims, no blocked scales). Dropping a Relu / Clip the Q
# makes redundant changes no quantized value; what the fusion changes is the rounding.
QDQ_INT8_ACTIVATIONS = platform.machine().lower().startswith(("aarch64", "arm"))
# onnxruntime's QDQIsInt8Allowed(): int8 activations (and then int8 weights) are fused on
# Arm only; on x86 such a group stays float (its session option session.qdqisint8allowed
# turns it on)
BIAS_SCALE_RTOL = 0.01  # CheckConvBiasScale: the int32 bias's scale within 1% of x_s * w_s[i]
QUANT_WEIGHTS = frozenset({np.dtype(np.int8), np.dtype(np.uint8)})
FLOAT32 = np.dtype(np.float32)
INT32_MIN = -(1 << 31)
MATMUL_INTEGER_TO_FLOAT, QGEMM = "MatMulIntegerToFloat", "QGemm"  # IR ops: onnxruntime's
# contrib ops of those names (inputs in their order), made by fuse_qdq only


def quantize_weights_and_biases(graph: Graph) -> int:
    """What onnxruntime does to a QDQ model before it fuses (graph level 1), so that its
    groups are the ones it fuses. Returns how many ops it changed.

    * MatMulAddFusion: ``Add(MatMul(DQ(a), DQ(b)), bias)`` with 2-d operands and a 1-d
      float constant bias, on a path to a Q, is ``Gemm(DQ(a), DQ(b), bias)`` (onnxruntime
      makes every such pair a Gemm; with no Q after, that stays a float Gemm, which the
      float ops here compute as well, so ``fuse_qdq`` only leaves such a MatMul alone).
    * WeightBiasQuantization: a Conv / ConvTranspose / Gemm whose input is dequantized per
      tensor, on a path to a QuantizeLinear (one reader after another, Relu / Clip allowed
      between), gets float32 constant weights quantized to int8 per tensor (onnxruntime's
      GetQuantizationParameter: ``scale = (max(w, 0) - min(w, 0)) / 255``, zero point
      ``rint(-128 - min / scale)``) and a float 1-d constant bias quantized to int32 with
      ``scale = x_scale * w_scale``, each behind a DequantizeLinear: the values the op
      then computes with are those, fused or not. (Scales only known at run time: left.)
    """
    changed = 0
    uses = _QdqUses(graph)
    for node in list(graph.nodes):
        if node.op_type == "MatMul" and _matmul_add_to_gemm(graph, uses, node):
            changed += 1
            uses = _QdqUses(graph)
    for node in list(graph.nodes):
        if node.op_type in ("Conv", "ConvTranspose", "Gemm") and \
                _quantize_weight_and_bias(graph, uses, node):
            changed += 1
            uses = _QdqUses(graph)
    return changed


def _is_dq(uses: _QdqUses, name: str) -> Node | None:
    node = uses.producer.get(name)
    return node if node is not None and node.op_type == "DequantizeLinear" else None


def _onnx_scalar(graph: Graph, name: str) -> bool:
    """optimizer_utils::IsScalar: rank 0, or one dim of 1."""
    return graph.value(name).shape in ((), (1,))


def _no_branch_path_to_q(graph: Graph, uses: _QdqUses, node: Node) -> bool:
    """IsNoBranchPathToQuantizeLinear: one reader after another (graph outputs do not
    count), through Relu / Clip only, to a QuantizeLinear."""
    current = node
    for _ in range(len(graph.nodes)):
        if len(current.outputs) != 1:
            return False
        readers = uses.all_readers.get(current.outputs[0], [])
        if len(readers) != 1:
            return False
        if readers[0].op_type == "QuantizeLinear":
            return True
        if readers[0].op_type not in ("Relu", "Clip"):
            return False
        current = readers[0]
    return False


def _matmul_add_to_gemm(graph: Graph, uses: _QdqUses, matmul: Node) -> bool:
    if len(matmul.inputs) != 2 or not all(_is_dq(uses, name) for name in matmul.inputs):
        return False
    if any(len(graph.value(name).shape) != 2 for name in matmul.inputs):
        return False
    add = uses.only_reader(matmul.outputs[0])
    if add is None or add.op_type != "Add" or len(add.inputs) != 2:
        return False
    bias = add.inputs[1 - add.inputs.index(matmul.outputs[0])]
    array = graph.initializers.get(bias)
    columns = graph.value(matmul.outputs[0]).shape[1]
    if bias == matmul.outputs[0] or array is None or array.dtype != FLOAT32 or \
            array.shape != (columns,) or not _no_branch_path_to_q(graph, uses, add):
        return False
    graph.nodes[graph.nodes.index(add)] = Node(
        "Gemm", matmul.name or f"{add.outputs[0]}/gemm", [*matmul.inputs, bias],
        list(add.outputs))
    graph.nodes.remove(matmul)
    return True


def _quantize_weight_and_bias(graph: Graph, uses: _QdqUses, node: Node) -> bool:
    if len(node.inputs) < 2:
        return False
    weight, bias = node.inputs[1], _optional(node, 2)
    dq_x, dq_w = _is_dq(uses, node.inputs[0]), _is_dq(uses, weight)
    if dq_x is None or not _onnx_scalar(graph, dq_x.inputs[1]):
        return False
    if not _no_branch_path_to_q(graph, uses, node):
        return False
    weights = None if dq_w is not None else graph.initializers.get(weight)
    if dq_w is None and (weights is None or weights.dtype != FLOAT32):
        return False
    bias_array = graph.initializers.get(bias) if bias else None
    if bias and (bias_array is None or bias_array.ndim != 1 or bias_array.dtype != FLOAT32):
        return False
    if dq_w is not None and not bias:
        return False  # nothing to quantize
    per_tensor = dq_w is None or _onnx_scalar(graph, dq_w.inputs[1])
    if not per_tensor:
        scale_shape = graph.value(dq_w.inputs[1]).shape
        if len(scale_shape) != 1 or scale_shape[0] != bias_array.shape[0] or \
                int(dq_w.attrs.get("block_size", 0) or 0):
            return False
        axis = int(dq_w.attrs.get("axis", 1))
        if axis < 0:
            axis += len(graph.value(weight).shape)
        expected = (0 if int(node.attrs.get("transB", 0)) else 1) if node.op_type == "Gemm" \
            else 0
        if axis != expected:
            return False
    x_scale = graph.initializers.get(dq_x.inputs[1])
    w_scale = None if dq_w is None else graph.initializers.get(dq_w.inputs[1])
    if bias and (x_scale is None or (dq_w is not None and w_scale is None)):
        return False  # (onnxruntime computes such a bias at run time)
    name = node.name or node.outputs[0]
    new_nodes = []
    if dq_w is None:
        scale, zero, quantized = _int8_per_tensor(weights)
        names = [_new_initializer(graph, f"{name}/weight_q", quantized),
                 _new_initializer(graph, f"{name}/weight_scale", scale),
                 _new_initializer(graph, f"{name}/weight_zp", zero)]
        dequantized = _new_value(graph, f"{name}/weight_dq", FLOAT32, weights.shape)
        new_nodes.append(Node("DequantizeLinear", dequantized, names, [dequantized]))
        node.inputs[1] = dequantized
        w_scale = scale
    if bias:
        bias_scale = (x_scale.astype(np.float32) * w_scale.astype(np.float32)).astype(
            np.float32)
        with np.errstate(all="ignore"):
            quantized = np.rint(bias_array / bias_scale).astype(np.int32)
        names = [_new_initializer(graph, f"{name}/bias_int32", quantized),
                 _new_initializer(graph, f"{name}/bias_scale", bias_scale)]
        dequantized = _new_value(graph, f"{name}/bias_dq", FLOAT32, bias_array.shape)
        new_nodes.append(Node("DequantizeLinear", dequantized, names, [dequantized],
                              {} if per_tensor else {"axis": 0}))
        node.inputs[2] = dequantized
    at = graph.nodes.index(node)
    graph.nodes[at:at] = new_nodes
    return True


def _int8_per_tensor(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """onnxruntime's GetQuantizationParameter<int8_t> and QuantizeLinear of ``weights``:
    (scale, zero point, int8 values), float32 arithmetic throughout."""
    low = min(np.float32(weights.min(initial=np.inf)), np.float32(0))
    high = max(np.float32(weights.max(initial=-np.inf)), np.float32(0))
    scale = np.float32(1) if high == low else np.float32((high - low) / np.float32(255))
    start = np.float32(-128) - np.float32(low / scale)
    zero = np.rint(np.clip(start, np.float32(-128), np.float32(127)))
    quantized = np.clip(np.rint(weights / scale) + zero, -128, 127)
    return np.array(scale, np.float32), np.array(zero, np.int8), quantized.astype(np.int8)


def fuse_qdq(graph: Graph) -> int:
    """QDQ groups -> onnxruntime's integer ops: ``Q(Conv(DQ(x), DQ(w)[, DQ(bias)]))`` ->
    ``QLinearConv``; ``Q(MatMul(DQ(a), DQ(b)))`` -> ``QLinearMatMul`` and, with no Q
    after, ``MatMulIntegerToFloat``; ``[Q](Gemm(DQ(a), DQ(b)[, DQ(c)]))`` -> ``QGemm``; a
    Relu or Clip between the op and its Q that the Q makes redundant goes too. The
    DequantizeLinear nodes stay for their other readers (dead code elimination drops the
    rest)."""
    fused = 0
    uses = _QdqUses(graph)
    for op in list(graph.nodes):
        match = _qdq_group(graph, uses, op)
        if match is None:
            continue
        make, replaced, _ = match
        new_nodes = make()
        last = replaced[-1]  # the group's last node: every input is defined before it
        at = graph.nodes.index(last)
        graph.nodes[at:at + 1] = new_nodes
        for node in replaced[:-1]:
            graph.nodes.remove(node)
        fused += 1
        uses = _QdqUses(graph)
    return fused


def qdq_constant_dequantizers(graph: Graph) -> list[Node]:
    """The DequantizeLinear nodes of constants (weights, biases) in groups ``fuse_qdq``
    rewrites: constant folding must leave them for it (``passes.optimize``)."""
    uses = _QdqUses(graph)
    held: list[Node] = []
    for op in graph.nodes:
        match = _qdq_group(graph, uses, op)
        if match is not None:
            held.extend(dq for dq in match[2] if all(
                name in graph.initializers for name in dq.inputs if name))
    return held


class _QdqUses(_Uses):
    """Also every reader of every value."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph)
        self.all_readers: dict[str, list[Node]] = {}
        for node in graph.nodes:
            for name in node.inputs:
                if name:
                    self.all_readers.setdefault(name, []).append(node)


Make = Callable[[], list[Node]]  # builds a group's replacement (new initializers and all)


def _qdq_group(graph: Graph, uses: _QdqUses, op: Node
               ) -> tuple[Make, list[Node], list[Node]] | None:
    """(what makes the nodes replacing the group, the group's nodes but its
    DequantizeLinears in graph order, those DequantizeLinears) when ``op`` is the Conv /
    MatMul / Gemm of a group onnxruntime fuses; else None."""
    if op.op_type not in ("Conv", "MatMul", "Gemm") or len(op.outputs) != 1:
        return None
    output = op.outputs[0]
    if graph.value(output).dtype != FLOAT32:
        return None
    # onnxruntime's GetQDQSelection / CheckQDQNodes: a Relu or Clip alone after the op (its
    # one reader, itself read once and no graph output) must be one the Q after it makes
    # redundant; the op's value must then be read by that Q alone (no graph output either)
    edges = uses.all_readers.get(output, [])
    clip = None
    if len(edges) == 1 and edges[0].op_type in ("Relu", "Clip") and \
            len(uses.all_readers.get(edges[0].outputs[0], [])) == 1 and \
            edges[0].outputs[0] not in graph.outputs:
        clip = edges[0]
    end = clip.outputs[0] if clip is not None else output
    q_nodes = [n for n in uses.all_readers.get(end, []) if n.op_type == "QuantizeLinear"]
    if clip is not None and (len(q_nodes) != 1 or not _plain_q(graph, q_nodes[0]) or
                             not _clip_made_redundant(graph, clip, q_nodes[0])):
        return None
    if q_nodes and (len(q_nodes) != 1 or len(edges) != 1 or output in graph.outputs or
                    not _plain_q(graph, q_nodes[0])):
        return None
    q = q_nodes[0] if q_nodes else None
    group = [op, *([clip] if clip else []), *([q] if q else [])]
    build = {"Conv": _qlinear_conv, "MatMul": _qlinear_matmul, "Gemm": _qgemm}[op.op_type]
    built = build(graph, uses, op, q)
    if built is None:
        return None
    make, dequantizers = built
    return make, group, dequantizers


def _optional(node: Node, position: int) -> str:
    return node.inputs[position] if len(node.inputs) > position else ""


def _one_element(graph: Graph, name: str) -> bool:
    return bool(name) and math.prod(graph.value(name).shape) == 1


def _plain_q(graph: Graph, q: Node) -> bool:
    """A per-tensor QuantizeLinear of float32 into 8 bits (a float32 scale of one element,
    a zero point of one element or none)."""
    if int(q.attrs.get("block_size", 0) or 0) or len(q.inputs) < 2:
        return False
    if graph.value(q.inputs[0]).dtype != FLOAT32:
        return False
    scale, zero = q.inputs[1], _optional(q, 2)
    if not _one_element(graph, scale) or graph.value(scale).dtype != FLOAT32:
        return False
    return not zero or _one_element(graph, zero)


def _dequantizer(graph: Graph, uses: _Uses, name: str) -> Node | None:
    """The DequantizeLinear producing ``name`` (float32, not blocked); other readers do not
    matter (onnxruntime gives each reader a copy of a shared one first)."""
    dq = uses.producer.get(name)
    if dq is None or dq.op_type != "DequantizeLinear" or len(dq.inputs) < 2:
        return None
    if int(dq.attrs.get("block_size", 0) or 0) or graph.value(name).dtype != FLOAT32:
        return None
    if graph.value(dq.inputs[1]).dtype != FLOAT32:
        return None
    zero = _optional(dq, 2)
    if zero and graph.value(zero).dtype != graph.value(dq.inputs[0]).dtype:
        return None
    return dq


def _per_tensor(graph: Graph, dq: Node) -> bool:
    zero = _optional(dq, 2)
    return _one_element(graph, dq.inputs[1]) and (not zero or _one_element(graph, zero))


def _per_axis(graph: Graph, dq: Node, axis: int) -> bool:
    """Per tensor, or one scale (and zero point) per index of ``axis`` of the quantized
    tensor: what the QLinear op's 1-d weight scale means."""
    if _per_tensor(graph, dq):
        return True
    shape = graph.value(dq.inputs[0]).shape
    given = int(dq.attrs.get("axis", 1))
    if not -len(shape) <= given < len(shape) or given % len(shape) != axis:
        return False
    size = (shape[axis],)
    zero = _optional(dq, 2)
    return graph.value(dq.inputs[1]).shape == size and (not zero or
                                                        graph.value(zero).shape == size)


def _activation_dtypes(x_dtype: np.dtype, w_dtype: np.dtype, int8: bool = False) -> bool:
    """onnxruntime's type rules: uint8 activations with 8-bit weights; int8 activations
    with int8 weights only, and for Conv and MatMul only where int8 is allowed
    (``QDQ_INT8_ACTIVATIONS``; ``int8``: always, Gemm's rule)."""
    if w_dtype not in QUANT_WEIGHTS:
        return False
    if x_dtype == np.dtype(np.uint8):
        return True
    return x_dtype == np.dtype(np.int8) and (int8 or QDQ_INT8_ACTIVATIONS) and \
        w_dtype == x_dtype


def _q_output(q: Node | None, out_dtype_of_x: np.dtype, graph: Graph) -> bool:
    """A Q ending the group writes the activation's own type (onnxruntime: dt_input ==
    dt_output)."""
    return q is None or graph.value(q.outputs[0]).dtype == out_dtype_of_x


def _qlinear_conv(graph: Graph, uses: _QdqUses, conv: Node, q: Node | None
                  ) -> tuple[Make, list[Node]] | None:
    """ConvNodeGroupSelector: every input dequantized (the bias from int32), a Q after."""
    names = [name for name in conv.inputs if name]
    if q is None or len(names) != len(conv.inputs) or len(names) not in (2, 3):
        return None
    dqs = [_dequantizer(graph, uses, name) for name in names]
    if any(dq is None for dq in dqs):
        return None
    dq_x, dq_w = dqs[0], dqs[1]
    x, w = dq_x.inputs[0], dq_w.inputs[0]
    x_dtype = graph.value(x).dtype
    if not _activation_dtypes(x_dtype, graph.value(w).dtype) or not _q_output(q, x_dtype,
                                                                             graph):
        return None
    if len(graph.value(w).shape) < 3 or not _per_tensor(graph, dq_x) or \
            not _per_axis(graph, dq_w, 0):
        return None
    bias = ""
    if len(dqs) == 3:
        channels = graph.value(w).shape[0]
        if graph.value(dqs[2].inputs[0]).shape != (channels,) or \
                not _per_axis(graph, dqs[2], 0) or \
                not _bias_matches(graph, dq_x, dq_w, dqs[2], channels):
            return None
        bias = dqs[2].inputs[0]
    attrs = {k: v for k, v in conv.attrs.items()
             if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")}
    if len(attrs) != len(conv.attrs):
        return None
    inputs = [x, dq_x.inputs[1], _optional(dq_x, 2), w, dq_w.inputs[1], _optional(dq_w, 2),
              q.inputs[1], _optional(q, 2), bias]
    node = Node("QLinearConv", conv.name or f"{q.outputs[0]}/qlinear_conv",
                inputs if bias else inputs[:8], [q.outputs[0]], attrs)
    return lambda: [node], dqs


def _bias_matches(graph: Graph, dq_x: Node, dq_w: Node, dq_b: Node, channels: int) -> bool:
    """The bias is an int32 tensor dequantized with no zero point (or zeros) and a constant
    scale within ``BIAS_SCALE_RTOL`` of ``x_scale * w_scale`` for each of the ``channels``
    outputs, so that the integer op can add it to the accumulation as it is
    (CheckConvBiasScale: without it the fused op would not compute what the group means)."""
    if graph.value(dq_b.inputs[0]).dtype != np.dtype(np.int32):
        return False
    zero = _optional(dq_b, 2)
    if zero and (zero not in graph.initializers or np.any(graph.initializers[zero])):
        return False
    scales = [graph.initializers.get(dq.inputs[1]) for dq in (dq_x, dq_w, dq_b)]
    if any(s is None or s.dtype != FLOAT32 for s in scales):
        return False
    x_scale, w_scale, b_scale = (s.reshape(-1) for s in scales)
    if x_scale.size != 1 or b_scale.size not in (1, channels) or \
            w_scale.size not in (1, channels):
        return False
    expected = np.broadcast_to(x_scale * w_scale, (channels,)).astype(np.float64)
    given = np.broadcast_to(b_scale, (channels,)).astype(np.float64)
    return bool(np.all(np.abs(given - expected) <= BIAS_SCALE_RTOL * np.abs(expected)))


def _two_dequantized(graph: Graph, uses: _QdqUses, node: Node, q: Node | None
                     ) -> tuple[Node, Node] | None:
    """The DequantizeLinear nodes of a MatMul's or Gemm's A and B, of types onnxruntime
    fuses (the Q's, if any, the activation's), A per tensor."""
    if not all(node.inputs[:2]):
        return None
    dqs = [_dequantizer(graph, uses, name) for name in node.inputs[:2]]
    if any(dq is None for dq in dqs):
        return None
    dq_a, dq_b = dqs
    a_dtype = graph.value(dq_a.inputs[0]).dtype
    if not _activation_dtypes(a_dtype, graph.value(dq_b.inputs[0]).dtype,
                              node.op_type == "Gemm") or not _q_output(q, a_dtype, graph):
        return None
    if not _per_tensor(graph, dq_a):
        return None
    return dq_a, dq_b


def _qlinear_matmul(graph: Graph, uses: _QdqUses, matmul: Node, q: Node | None
                    ) -> tuple[Make, list[Node]] | None:
    """MatMulNodeGroupSelector: both operands dequantized; a Q after (QLinearMatMul) or
    none (MatMulIntegerToFloat: the integer product times ``a_scale * b_scale``)."""
    if len(matmul.inputs) != 2:
        return None
    pair = _two_dequantized(graph, uses, matmul, q)
    if pair is None:
        return None
    dq_a, dq_b = pair
    a, b = dq_a.inputs[0], dq_b.inputs[0]
    b_rank = len(graph.value(b).shape)
    if len(graph.value(a).shape) < 2 or b_rank < 2 or not _per_axis(graph, dq_b, b_rank - 1):
        return None
    name = matmul.name or f"{matmul.outputs[0]}/matmul"
    follower = uses.only_reader(matmul.outputs[0])
    if q is None and follower is not None and follower.op_type == "Add":
        return None  # onnxruntime's MatMulAddFusion makes it a float Gemm first
    if q is None:
        inputs = [a, b, dq_a.inputs[1], dq_b.inputs[1], _optional(dq_a, 2), _optional(dq_b, 2)]
        node = Node(MATMUL_INTEGER_TO_FLOAT, name, inputs, list(matmul.outputs))
    else:
        inputs = [a, dq_a.inputs[1], _optional(dq_a, 2), b, dq_b.inputs[1],
                  _optional(dq_b, 2), q.inputs[1], _optional(q, 2)]
        node = Node("QLinearMatMul", name, inputs, [q.outputs[0]])
    return lambda: [node], [dq_a, dq_b]


def _qgemm(graph: Graph, uses: _QdqUses, gemm: Node, q: Node | None
           ) -> tuple[Make, list[Node]] | None:
    """GemmNodeGroupSelector: A, B (and C, from int32, with beta = alpha = 1) dequantized,
    a Q after or none -> QGemm (onnxruntime's contrib op: the integer product plus C, times
    ``alpha * a_scale * b_scale`` [/ y_scale, rounded, plus y_zero_point]). B transposed
    is transposed here when constant (else by a Transpose node), and so is A; alpha goes
    into A's scale (a constant then)."""
    names = [name for name in gemm.inputs if name]
    if len(names) != len(gemm.inputs) or len(names) not in (2, 3):
        return None
    pair = _two_dequantized(graph, uses, gemm, q)
    if pair is None:
        return None
    dq_a, dq_b = pair
    a, b = dq_a.inputs[0], dq_b.inputs[0]
    alpha, beta = float(gemm.attrs.get("alpha", 1.0)), float(gemm.attrs.get("beta", 1.0))
    trans_a, trans_b = int(gemm.attrs.get("transA", 0)), int(gemm.attrs.get("transB", 0))
    if len(graph.value(a).shape) != 2 or len(graph.value(b).shape) != 2:
        return None
    if not _per_axis(graph, dq_b, 0 if trans_b else 1):
        return None
    columns = graph.value(b).shape[0 if trans_b else 1]
    dqs = [dq_a, dq_b]
    bias = ""
    if len(names) == 3:
        dq_c = _dequantizer(graph, uses, names[2])
        c_shape = graph.value(dq_c.inputs[0]).shape if dq_c is not None else None
        if dq_c is None or alpha != 1.0 or beta != 1.0 or \
                c_shape not in ((columns,), (1, columns)) or \
                not _per_axis(graph, dq_c, len(c_shape) - 1) or \
                not _bias_matches(graph, dq_a, dq_b, dq_c, columns):
            return None
        bias = dq_c.inputs[0]
        dqs.append(dq_c)
    if alpha != 1.0 and dq_a.inputs[1] not in graph.initializers:
        return None

    def make() -> list[Node]:
        a_scale = dq_a.inputs[1]
        if alpha != 1.0:  # onnxruntime's multiplier: (alpha * a_scale) * b_scale, float32
            a_scale = _new_initializer(graph, f"{a_scale}/alpha", np.float32(alpha) *
                                       graph.initializers[a_scale].astype(np.float32))
        nodes: list[Node] = []
        name = gemm.name or f"{gemm.outputs[0]}/gemm"
        inputs = [_transposed(graph, a, trans_a, nodes, f"{name}/a_t"), a_scale,
                  _optional(dq_a, 2), _transposed(graph, b, trans_b, nodes, f"{name}/b_t"),
                  dq_b.inputs[1], _optional(dq_b, 2), bias]
        out = gemm.outputs[0]
        if q is not None:
            inputs += [q.inputs[1], _optional(q, 2)]
            out = q.outputs[0]
        return [*nodes, Node(QGEMM, name, inputs, [out])]

    return make, dqs


def _transposed(graph: Graph, name: str, transpose: int, nodes: list[Node], hint: str) -> str:
    """``name`` (2-d), transposed when ``transpose``: a new initializer of a constant, else
    the output of a Transpose node appended to ``nodes``."""
    if not transpose:
        return name
    array = graph.initializers.get(name)
    if array is not None:
        return _new_initializer(graph, hint, np.ascontiguousarray(array.T))
    value = graph.value(name)
    out = _new_value(graph, hint, value.dtype, value.shape[::-1])
    nodes.append(Node("Transpose", hint, [name], [out], {"perm": [1, 0]}))
    return out


def _new_value(graph: Graph, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str:
    candidate, number = name, 0
    while candidate in graph.values or candidate in graph.initializers:
        number += 1
        candidate = f"{name}.{number}"
    graph.values[candidate] = Value(candidate, np.dtype(dtype), tuple(shape))
    return candidate


def _clip_made_redundant(graph: Graph, clip: Node, q: Node) -> bool:
    """Whether onnxruntime drops the Relu / Clip before ``q`` (its output's only reader) as
    one the quantization's own saturation makes redundant: ReluQuantFusion (a constant zero
    point that is the type's lowest value), ClipQuantFusion (the Clip's bounds cover the
    quantized range, within float32 epsilon) or the QDQ selectors' IsClipMadeRedundantByQ
    (the bounds quantized, ``rint(bound / scale) + zero_point``, cover the type's range).
    Dropping such a node changes no quantized value."""
    out_dtype = graph.value(q.outputs[0]).dtype
    if out_dtype not in QUANT_WEIGHTS:
        return False
    low, high = (int(v) for v in (np.iinfo(out_dtype).min, np.iinfo(out_dtype).max))
    zero_name = _optional(q, 2)
    zero_array = graph.initializers.get(zero_name) if zero_name else np.zeros((), out_dtype)
    scale_array = graph.initializers.get(q.inputs[1])
    if zero_array is None or zero_array.size != 1:
        return False
    zero = int(zero_array.reshape(()))
    if clip.op_type == "Relu" and zero_name and zero == low:
        return True  # ReluQuantFusion
    # the Clip rules and IsClipMadeRedundantByQ read a 0-d float32 scale and zero point
    if scale_array is None or scale_array.dtype != FLOAT32 or scale_array.ndim or \
            zero_array.ndim:
        return False
    if clip.op_type == "Relu":
        return zero == low
    if clip.attrs:
        return False
    bounds = []
    for position, default in ((1, -np.finfo(np.float32).max), (2, np.finfo(np.float32).max)):
        name = _optional(clip, position)
        array = graph.initializers.get(name) if name else np.float32(default)
        if array is None or array.size != 1:
            return False
        bounds.append(np.float32(array.reshape(())))
    minimum, maximum = bounds
    scale = np.float32(scale_array)
    with np.errstate(all="ignore"):
        if zero_name:  # ClipQuantFusion (which wants the zero point given)
            lower, upper = scale * np.float32(low - zero), scale * np.float32(high - zero)
            eps = np.finfo(np.float32).eps
            if not (eps < minimum - lower or eps < upper - maximum):
                return True
        q_min, q_max = (_int32(np.rint(bound / scale)) + zero for bound in (minimum, maximum))
    return _wrap32(q_min) <= low and _wrap32(q_max) >= high


def _int32(value: np.floating) -> int:
    """C++'s static_cast<int32_t> of a double on x86: out of range (or NaN) is INT32_MIN."""
    number = float(value)
    if not math.isfinite(number) or not INT32_MIN <= number < -INT32_MIN:
        return INT32_MIN
    return int(number)


def _wrap32(value: int) -> int:
    return (value - INT32_MIN) % (1 << 32) + INT32_MIN
