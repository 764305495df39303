"""Graph fusions run by ``passes.optimize`` after constant folding, before dead code
elimination: each rewrites a pattern of nodes into fewer nodes that compute the same values.

* ``fold_conv_affine``: a ``Conv`` or ``ConvTranspose`` with constant weights followed by
  constant per-channel ``Mul`` / ``Div`` / ``Add`` / ``Sub`` or an inference
  ``BatchNormalization`` is one node with folded weights and bias (``W' = W * s`` per output
  channel, ``b' = b * s + t``), computed in float64 and rounded once, as onnxruntime and
  ATC do.
* ``fuse_hard_swish``: ``x * clip(x + 3, 0, 6) / 6`` (``/ 6`` or ``* (1/6)``, either operand
  order) is one ``HardSwish``.
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
    return {"conv_affine": fold_conv_affine(graph), "hard_swish": fuse_hard_swish(graph),
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
    return {"Mul": (constant, zeros), "Div": (1.0 / constant, zeros),
            "Add": (ones, constant), "Sub": (ones, -constant)}[node.op_type]


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
    candidate, number = name, 0
    while candidate in graph.values or candidate in graph.initializers:
        number += 1
        candidate = f"{name}.{number}"
    graph.initializers[candidate] = array
    graph.values[candidate] = Value(candidate, array.dtype, tuple(array.shape))
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
