"""Graph passes run between ONNX import and lowering: constant folding, the fusions of
``fusions.py`` and dead code elimination (``optimize`` runs all three).

Constant folding evaluates, at conversion time, every node whose inputs are all
initializers (and every ``Shape`` / ``Size``, whose answer the concrete shapes already
know), and replaces it by initializers. Shape plumbing (Shape -> Gather -> Concat ->
Reshape, Range, ConstantOfShape, Expand of masks...) is evaluated with numpy by the
``_FOLDERS`` below; any other node by the evaluator ``optimize`` is given (ONNX's reference
evaluator by default, so converting a model needs no runtime). A node is left in place (and
lowered as usual) when its result would be large (``FOLD_GROWTH_BYTES``) or its result
disagrees with the shape and dtype that shape inference declared: folding never changes
what the model computes.

Dead code elimination drops nodes none of whose outputs reach a graph output, then the
initializers nothing reads any more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.model.ir import Graph, Node
from openacl.model.onnx_rules import if_condition, int_div, onnx_slice

FOLD_GROWTH_BYTES = 4 << 20  # a folded result bigger than this and than its inputs stays a node
Evaluator = Callable[[Graph, Node], "list[np.ndarray] | None"]  # a node over constant inputs


def optimize(graph: Graph, evaluate: Evaluator | None = None) -> Graph:
    """Fold constants, fuse patterns (``fusions.py``), then drop dead code; ``graph`` is
    changed in place and returned. ``evaluate`` folds what the numpy folders do not know
    (default ``evaluate_with_reference``: conversion never needs a runtime).

    The DequantizeLinear nodes of the constant weights and biases of a QDQ group that
    ``fusions.fuse_qdq`` rewrites into onnxruntime's integer ops (QLinearConv,
    QLinearMatMul, QGemm... as onnxruntime does, which never folds a DequantizeLinear; after
    ``fusions.quantize_weights_and_biases``, its rewrites that come first) are left out of
    the first folding: folded, their int8 form would be gone. Any of them still there after
    the fusions and dead code elimination (a group that did not fuse after all) is folded
    then, and the fusions run once more for what that made constant."""
    from openacl.model.fusions import (
        fuse,
        qdq_constant_dequantizers,
        quantize_weights_and_biases,
    )

    evaluate = evaluate_with_reference if evaluate is None else evaluate
    quantize_weights_and_biases(graph)  # onnxruntime's own rewrites before its QDQ fusions
    held = {id(node) for node in qdq_constant_dequantizers(graph)}
    fold_constants(graph, evaluate, keep=held)
    fuse(graph)
    eliminate_dead_code(graph)
    if any(id(node) in held for node in graph.nodes) and fold_constants(graph, evaluate):
        fuse(graph)
        eliminate_dead_code(graph)
    return graph


# -- constant folding -------------------------------------------------------------------------
def fold_constants(graph: Graph, evaluate: Evaluator | None,
                   keep: set[int] | frozenset[int] = frozenset()) -> int:
    """Replace constant nodes by initializers, but those whose ``id`` is in ``keep``;
    returns how many nodes were folded. ``evaluate(graph, node)`` computes a node the numpy
    folders do not know (``evaluate_with_reference``; None folds only those)."""
    kept: list[Node] = []
    folded = 0
    for node in graph.nodes:
        results = None if id(node) in keep else _evaluate(graph, node, evaluate)
        if results is None:
            kept.append(node)
            continue
        for name, array in zip(node.outputs, results, strict=False):
            if name:
                graph.initializers[name] = array
        folded += 1
    graph.nodes = kept
    return folded


def _evaluate(graph: Graph, node: Node, evaluate: Evaluator | None
              ) -> list[np.ndarray] | None:
    """The node's outputs computed now, or None when it cannot (or should not) be."""
    inputs = [name for name in node.inputs if name]
    if node.op_type not in ("Shape", "Size") and not all(
            name in graph.initializers for name in inputs):
        return None
    if node.op_type in ("Shape", "Size") and not inputs:
        return None
    outputs = [name for name in node.outputs if name]
    if not outputs or any(name not in graph.values for name in outputs):
        return None
    out_bytes = sum(graph.values[name].nbytes for name in outputs)
    in_bytes = sum(graph.initializers[name].nbytes for name in inputs
                   if name in graph.initializers)
    if out_bytes > max(FOLD_GROWTH_BYTES, in_bytes):
        return None
    folder = _FOLDERS.get(node.op_type)
    try:
        if folder is not None:
            arrays = [graph.initializers.get(name) if name else None for name in node.inputs]
            results = folder(node, arrays, lambda name: graph.value(name).shape)
        else:
            results = evaluate(graph, node) if evaluate is not None else None
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, AttributeError):
        return None
    if results is None:
        return None
    checked = []
    for name, result in zip(node.outputs, results, strict=False):
        if not name:
            checked.append(None)
            continue
        value = graph.values[name]
        array = np.asarray(result)
        if tuple(array.shape) != tuple(value.shape):
            return None
        checked.append(np.array(array, dtype=value.dtype, order="C"))
    return checked


def evaluate_with_reference(graph: Graph, node: Node) -> list[np.ndarray] | None:
    """Evaluate ``node`` over its constant inputs with ONNX's reference evaluator (None when
    it cannot): the folding evaluator of conversions, which needs no runtime."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    names = [name for name in node.inputs if name]
    attrs = {key: numpy_helper.from_array(np.asarray(value)) if isinstance(value, np.ndarray)
             else value for key, value in node.attrs.items()}
    opset = graph.opset or REFERENCE_DEFAULT_OPSET
    for version in (opset, _same_interface_opset(node, opset)):
        if version is None:
            return None
        try:
            proto_node = helper.make_node(node.op_type, list(node.inputs), list(node.outputs),
                                          name=node.name, **attrs)
            model = helper.make_model(
                helper.make_graph([proto_node], f"fold:{node.name}", [], [
                    helper.make_empty_tensor_value_info(name) for name in node.outputs
                    if name],
                    [numpy_helper.from_array(graph.initializers[name], name)
                     for name in names]),
                opset_imports=[helper.make_opsetid("", version)])
            results = ReferenceEvaluator(model).run(None, {})
        except Exception:  # noqa: BLE001 - what the reference cannot run is not folded
            continue
        outputs = iter(results)
        return [next(outputs) if name else None for name in node.outputs]
    return None


REFERENCE_DEFAULT_OPSET = 17  # a graph of no recorded opset is folded at this one
RANDOM_OPS = frozenset({"RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"})


def fold_constant_nodes(nodes: list[Any], constants: dict[str, np.ndarray], opset: int,
                        skip: frozenset[str] = frozenset()) -> tuple[list[Any], list[str]]:
    """Fold, once, the ONNX nodes (NodeProtos, in order) whose inputs are all ``constants``:
    what no input shape can change (a weight's Transpose, Cast, Reshape...), evaluated by
    the numpy folders or ONNX's reference evaluator, the results added to ``constants``.
    Returns the nodes left and the names folded. Ops in ``skip``, random ops, nodes with no
    input or a subgraph, and results bigger than ``FOLD_GROWTH_BYTES`` and their inputs stay.
    """
    from openacl.model.onnx_graph import DEFAULT_DOMAINS, subgraphs
    from openacl.model.onnx_import import _attribute

    view = Graph("fold", [], [], {}, [], constants, opset)
    kept, folded = [], []
    for proto_node in nodes:
        inputs = [name for name in proto_node.input if name]
        outputs = list(proto_node.output)
        if (proto_node.domain not in DEFAULT_DOMAINS or proto_node.op_type in skip
                or proto_node.op_type in RANDOM_OPS or not inputs or not all(outputs)
                or any(True for _ in subgraphs(proto_node))
                or not all(name in constants for name in inputs)):
            kept.append(proto_node)
            continue
        node = Node(proto_node.op_type, proto_node.name, list(proto_node.input), outputs,
                    {a.name: _attribute(a) for a in proto_node.attribute})
        folder = _FOLDERS.get(node.op_type)
        try:
            results = folder(node, [constants[name] if name else None for name in node.inputs],
                             lambda name: constants[name].shape) if folder is not None \
                else evaluate_with_reference(view, node)
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, AttributeError):
            results = None
        arrays = [np.array(r, order="C") for r in results] if results is not None and all(
            r is not None for r in results) else None
        in_bytes = sum(constants[name].nbytes for name in inputs)
        if arrays is None or len(arrays) != len(outputs) or \
                sum(a.nbytes for a in arrays) > max(FOLD_GROWTH_BYTES, in_bytes):
            kept.append(proto_node)
            continue
        for name, array in zip(outputs, arrays, strict=True):
            constants[name] = array
            folded.append(name)
    return kept, folded


def _same_interface_opset(node: Node, opset: int) -> int | None:
    """The newest opset whose definition of ``node``'s op has the inputs, outputs and (a
    superset of) the attributes it has at ``opset``: the reference evaluator implements
    only some versions of an op (DequantizeLinear from 19), and a later version that only
    adds types or options computes the same. None when there is none."""
    from onnx import defs

    newest = defs.onnx_opset_version()
    try:
        old, new = defs.get_schema(node.op_type, opset, ""), defs.get_schema(
            node.op_type, newest, "")
    except defs.SchemaError:
        return None
    if new.since_version == old.since_version:
        return None
    same = [i.name for i in old.inputs] == [i.name for i in new.inputs] and \
        [o.name for o in old.outputs] == [o.name for o in new.outputs] and \
        set(old.attributes) <= set(new.attributes)
    return newest if same else None


# -- folding before import (where ONNX shape inference needs it) -----------------------------------
MAX_ONNX_FOLD_ROUNDS = 8  # shape inference / folding rounds before giving up on unknown shapes


def fold_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None):
    """An ONNX model with its constant subgraphs folded into initializers, so that ONNX
    shape inference (which stops at e.g. a Range whose limit comes from a Shape) can give
    every value a concrete shape. Graph inputs are fixed to ``input_shapes`` first; dims
    left dynamic simply keep their Shape nodes. ``model`` (a path or a ModelProto) is not
    modified; the result goes to ``import_onnx``."""
    import onnx
    from onnx import numpy_helper

    from openacl.model.onnx_graph import infer_shapes, inline_branch
    from openacl.model.onnx_import import (
        _attribute,
        _load,
        apply_input_shapes,
        shape_inference_view,
    )

    proto = _load(model)
    if proto is model:  # the caller's object: work on a copy (a file we loaded is ours)
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    graph = proto.graph
    del graph.value_info[:]  # stale symbolic shapes (a "batch" dim) would fight the fixed ones
    constants = _Constants(graph.initializer)
    taken: set[str] = set()  # every value name, gathered at the first If inlined
    apply_input_shapes([v for v in graph.input if v.name not in constants], input_shapes)
    for _ in range(MAX_ONNX_FOLD_ROUNDS):
        inferred = infer_shapes(shape_inference_view(proto))
        shapes = {}
        for info in list(inferred.graph.input) + list(inferred.graph.value_info):
            dims = info.type.tensor_type.shape.dim
            if info.type.tensor_type.HasField("shape") and all(
                    d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
                shapes[info.name] = tuple(d.dim_value for d in dims)

        def shape_of(name: str, shapes: dict = shapes) -> tuple[int, ...]:
            return constants.shape(name) if name in constants else shapes[name]

        kept, folded, inlined = [], [], False
        for index, proto_node in enumerate(graph.node):
            if proto_node.op_type == "If" and proto_node.domain in ("", "ai.onnx") and \
                    proto_node.input[0] in constants:
                if not taken:
                    taken.update(_all_names(graph))
                nodes, tensors = inline_branch(
                    proto_node, if_condition(proto_node, constants[proto_node.input[0]]), taken)
                kept.extend(nodes)
                graph.initializer.extend(tensors)
                constants.add_tensors(tensors)
                inlined = True
                continue
            node = Node(proto_node.op_type, proto_node.name or f"{proto_node.op_type}_{index}",
                        list(proto_node.input), list(proto_node.output),
                        {a.name: _attribute(a) for a in proto_node.attribute
                         if a.type != a.GRAPH and a.type != a.GRAPHS})
            results = None
            if proto_node.domain in ("", "ai.onnx"):
                if node.op_type == "Constant" and "value" in node.attrs:
                    constants[node.outputs[0]] = np.asarray(node.attrs["value"])
                else:
                    results = _fold_onnx_node(node, constants, shape_of)
            if results is None:
                kept.append(proto_node)
                continue
            for name, array in zip(node.outputs, results, strict=False):
                constants[name] = array
                folded.append(numpy_helper.from_array(array, name))
        if not folded and not inlined:
            break
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(folded)
        produced = {name for n in kept for name in n.output}
        if produced <= set(shapes) and not inlined:
            break
    return proto


def _all_names(graph: Any) -> set[str]:
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names.update(out for node in graph.node for out in node.output)
    return names


class _Constants(dict):
    """The values folding knows: the model's initializers, converted to numpy only when a
    fold reads them (a weight matrix usually never is), plus the arrays folds produce."""

    def __init__(self, initializers: Any) -> None:
        super().__init__()
        self._tensors = {tensor.name: tensor for tensor in initializers}

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self._tensors

    def __missing__(self, name: str) -> np.ndarray:
        from onnx import numpy_helper

        array = numpy_helper.to_array(self._tensors[name])
        self[name] = array
        return array

    def add_tensors(self, tensors: Any) -> None:
        """Know these TensorProtos too (the initializers of an inlined branch)."""
        self._tensors.update((tensor.name, tensor) for tensor in tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name).shape
        return tuple(self._tensors[name].dims)

    def nbytes(self, name: str) -> int:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name).nbytes
        from onnx import helper

        tensor = self._tensors[name]
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
        return math.prod(tensor.dims) * itemsize


def _fold_onnx_node(node: Node, constants: dict, shape_of) -> list[np.ndarray] | None:
    folder = _FOLDERS.get(node.op_type)
    inputs = [name for name in node.inputs if name]
    if folder is None or not inputs or not all(name for name in node.outputs):
        return None
    if node.op_type in ("Shape", "Size"):
        ready = inputs[0] in constants or _known(shape_of, inputs[0])
    else:
        ready = all(name in constants for name in inputs)
    if not ready:
        return None
    try:
        results = folder(node, [constants[name] if name in constants else None
                                for name in node.inputs], shape_of)
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, AttributeError):
        return None
    arrays = [np.array(r, order="C") for r in results]
    in_bytes = sum(constants.nbytes(name) for name in inputs if name in constants)
    if sum(a.nbytes for a in arrays) > max(FOLD_GROWTH_BYTES, in_bytes):
        return None
    return arrays


def _known(shape_of, name: str) -> bool:
    try:
        shape_of(name)
    except KeyError:
        return False
    return True


# -- dead code elimination ----------------------------------------------------------------------
def eliminate_dead_code(graph: Graph) -> int:
    """Drop nodes whose outputs nothing needs and unread initializers; returns nodes removed."""
    needed = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(name in needed for name in node.outputs if name):
            kept.append(node)
            needed.update(name for name in node.inputs if name)
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    for name in list(graph.initializers):
        if name not in needed:
            del graph.initializers[name]
    for name in list(graph.values):
        if name not in needed and name not in graph.inputs and not any(
                name in node.outputs for node in graph.nodes):
            del graph.values[name]
    for name, array in graph.initializers.items():  # folded values: exact dtype and shape
        graph.values[name].dtype = array.dtype
        graph.values[name].shape = tuple(array.shape)
    return removed


# -- numpy evaluators ---------------------------------------------------------------------------
ShapeOf = Callable[[str], tuple]
Folder = Callable[[Node, list, ShapeOf], list]
_FOLDERS: dict[str, Folder] = {}


def _folds(*op_types: str) -> Callable[[Folder], Folder]:
    def decorate(fn: Folder) -> Folder:
        for op_type in op_types:
            _FOLDERS[op_type] = fn
        return fn
    return decorate


def _ints(array) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


def _axes(node: Node, arrays: list, position: int) -> list[int] | None:
    """Axes from the attribute (older opsets) or from input ``position`` (newer)."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    if len(arrays) > position and arrays[position] is not None:
        return _ints(arrays[position])
    return None


@_folds("Shape")
def _shape(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    shape = tuple(shape_of(node.inputs[0]))
    rank = len(shape)
    start, end = int(node.attrs.get("start", 0)), int(node.attrs.get("end", rank))
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    return [np.array(shape[start:end], np.int64)]


@_folds("Size")
def _size(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    return [np.array(int(np.prod(shape_of(node.inputs[0]))), np.int64)]


@_folds("Identity")
def _identity(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    return [arrays[0]]


@_folds("Cast")
def _cast(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    from onnx.helper import tensor_dtype_to_np_dtype

    return [arrays[0].astype(tensor_dtype_to_np_dtype(int(node.attrs["to"])))]


@_folds("Gather")
def _gather(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    data, indices = arrays
    axis = int(node.attrs.get("axis", 0))
    axis = axis + data.ndim if axis < 0 else axis
    size = data.shape[axis]
    if np.any(indices < -size) or np.any(indices >= size):
        raise IndexError("Gather index out of range")
    return [np.take(data, np.where(indices < 0, indices + size, indices), axis=axis)]


@_folds("Concat")
def _concat(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    return [np.concatenate(arrays, axis=int(node.attrs["axis"]))]


@_folds("Unsqueeze")
def _unsqueeze(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    rank = arrays[0].ndim + len(_axes(node, arrays, 1))
    result = arrays[0]
    for axis in sorted(a + rank if a < 0 else a for a in _axes(node, arrays, 1)):
        result = np.expand_dims(result, axis)
    return [result]


@_folds("Squeeze")
def _squeeze(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    axes = _axes(node, arrays, 1)
    return [np.squeeze(arrays[0], axis=None if axes is None else tuple(axes))]


@_folds("Reshape")
def _reshape(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    data, shape = arrays[0], _ints(arrays[1])
    if not int(node.attrs.get("allowzero", 0)):
        shape = [data.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    return [data.reshape(shape)]


@_folds("Flatten")
def _flatten(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    data = arrays[0]
    axis = int(node.attrs.get("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis
    return [data.reshape(int(np.prod(data.shape[:axis])), -1)]


@_folds("Transpose")
def _transpose(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    perm = node.attrs.get("perm")
    return [np.transpose(arrays[0], None if perm is None else [int(p) for p in perm])]


@_folds("Expand")
def _expand(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    shape = np.broadcast_shapes(arrays[0].shape, tuple(_ints(arrays[1])))
    return [np.broadcast_to(arrays[0], shape)]


@_folds("ConstantOfShape")
def _constant_of_shape(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    fill = np.asarray(node.attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
    return [np.full(_ints(arrays[0]), fill[0], fill.dtype)]


@_folds("Range")
def _range(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    start, limit, delta = (np.asarray(a).reshape(()) for a in arrays)
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(count) * delta).astype(start.dtype)]


@_folds("Slice")
def _slice(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    data = arrays[0]
    starts, ends = _ints(arrays[1]), _ints(arrays[2])
    axes = _ints(arrays[3]) if len(arrays) > 3 and arrays[3] is not None else \
        list(range(len(starts)))
    steps = _ints(arrays[4]) if len(arrays) > 4 and arrays[4] is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        index[axis] = onnx_slice(start, end, step, data.shape[axis])
    return [data[tuple(index)]]


_ELEMENTWISE: dict[str, Callable] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Neg": np.negative,
    "Abs": np.abs, "Equal": np.equal, "Less": np.less, "Greater": np.greater,
    "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal, "Not": np.logical_not,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor, "Where": np.where,
    "Floor": np.floor, "Ceil": np.ceil, "Sqrt": np.sqrt, "Max": np.maximum, "Min": np.minimum,
}


@_folds(*_ELEMENTWISE)
def _elementwise(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    fn = _ELEMENTWISE[node.op_type]
    if node.op_type in ("Max", "Min"):
        result = arrays[0]
        for other in arrays[1:]:
            result = fn(result, other)
        return [result]
    return [fn(*arrays)]


@_folds("Div")
def _div(node: Node, arrays: list, shape_of: ShapeOf) -> list:
    a, b = arrays
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise ArithmeticError("integer division by zero")
        return [int_div(a, b)]
    return [np.divide(a, b)]
