"""ONNX import: an ``onnx.ModelProto`` (or file) becomes a ``Graph`` with concrete shapes.

Opsets 11 to 21 are read as they are, older ones after ``onnx.version_converter`` upgraded
them to 11 (``onnx_graph.upgrade_opset``), newer ones where each op's definition is unchanged
since 21. Constant nodes become initializers; shapes and dtypes come from
ONNX shape inference with the graph inputs fixed to the given shapes (``input_shapes``
overrides dynamic dims such as the batch). Anything the graph leaves without a concrete
type is an error naming the value. ``onnx`` is imported here only (it is heavy).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model.ir import Graph, Node, Value
from openacl.model.onnx_graph import MIN_OPSET, default_opset, infer_shapes, upgrade_opset

MAX_OPSET = 21  # the newest ONNX default-domain opset the lowerings were written for


ONNX_INSTALL = "pip install 'openacl[onnx]'"  # the line that adds the ONNX reader
HEAD_BYTES = 16  # bytes of a file's start an error message shows
OM_SUFFIX = ".om"  # offline models' file name ending (ATC's)


def require_onnx() -> Any:
    """The ``onnx`` module: every ONNX reader (import, convert, inspect, InferenceSession on
    .onnx) gets it here, so a missing package is one clear error, not a traceback.

    Raises:
        AclError: ACL_ERROR_FEATURE_UNSUPPORTED with the install line when ``onnx`` cannot be
            imported.
    """
    try:
        import onnx
    except ImportError as exc:
        if exc.name == "onnx":
            reason = "onnx is not installed"
        else:  # installed but broken (a dependency such as protobuf is missing)
            reason = f"onnx cannot be imported ({exc})"
        raise AclError(ACL_ERROR_FEATURE_UNSUPPORTED,
                       f"reading ONNX models needs the onnx package, and {reason}: "
                       f"{ONNX_INSTALL}") from exc
    return onnx


# the first byte of a serialized ModelProto: the tag of one of its fields (ir_version 0x08,
# opset_import 0x42, producer_name 0x12, producer_version 0x1a, domain 0x22, graph 0x3a, ...)
ONNX_FIRST_BYTES = (b"\x08", b"\x12", b"\x1a", b"\x22", b"\x28", b"\x32", b"\x3a", b"\x42",
                    b"\x72")


def _describe_head(head: bytes) -> str:
    """What a file's first bytes look like, for an error message."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"starts with {head[:HEAD_BYTES]!r}"
    if text.isprintable() or all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"is a text file (it starts with {text[:HEAD_BYTES]!r})"
    return f"starts with {head[:HEAD_BYTES]!r}"


def check_model_path(path: str) -> bytes:
    """The first bytes of the ONNX model file ``path``, after refusing, by what the file is,
    a path that does not exist or is not a file, an empty file, and an offline model (ours,
    CANN's, or a file named .om that is neither).

    Raises:
        AclError: ACL_ERROR_INVALID_FILE naming the path and what it holds.
    """
    from openacl.model import om

    if not os.path.exists(path):
        raise AclError(ACL_ERROR_INVALID_FILE, f"model file {path!r} does not exist")
    if not os.path.isfile(path):
        raise AclError(ACL_ERROR_INVALID_FILE, f"model file {path!r} is not a file")
    try:
        with open(path, "rb") as file:
            head = file.read(max(HEAD_BYTES, len(om.MAGIC)))
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read model file {path!r}: {exc}") \
            from exc
    if not head:
        kind = "an offline model" if path.lower().endswith(OM_SUFFIX) else "an ONNX model"
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"model file {path!r} is empty (0 bytes): not {kind}")
    if head.startswith(om.MAGIC):
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{path!r} is an OpenACL offline model (.om), not an ONNX model: run it "
                       f"with InferenceSession or openacl.mdl, or look into it with "
                       f"openacl inspect")
    if head.startswith(om.CANN_OM_MAGIC):
        om.load_offline(path)  # refuses it with CANN's explanation
    if path.lower().endswith(OM_SUFFIX):
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{path!r} is not an offline model: it {_describe_head(head)}, not "
                       f"OpenACL's magic {om.MAGIC!r}")
    return head


def _load(model: Any):
    """An ONNX ModelProto from a ModelProto (as it is), serialized bytes or a file path.

    Raises:
        AclError: ACL_ERROR_FEATURE_UNSUPPORTED without onnx; ACL_ERROR_INVALID_FILE for a
            file that is missing, empty or an offline model (``check_model_path``);
            ACL_ERROR_PARSE_MODEL for bytes that are not an ONNX model.
    """
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):  # serialized, as onnxruntime takes
        if not len(model):
            raise AclError(ACL_ERROR_PARSE_MODEL, "the model given is empty (0 bytes)")
        try:
            proto = onnx.load_from_string(bytes(model))
        except Exception as exc:  # protobuf DecodeError and friends
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"the {len(model)} bytes given are not an ONNX model: {exc}") from exc
        return _check_decoded(proto, f"the {len(model)} bytes given")
    if not isinstance(model, (str, os.PathLike)):
        return _check_decoded(onnx.load(model), "the model file given")  # a file object
    path = os.fspath(model)
    head = check_model_path(path)
    try:
        proto = onnx.load(path)
    except (OSError, ValueError) as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read ONNX model {path!r}: {exc}") \
            from exc
    except Exception as exc:  # protobuf DecodeError and friends
        looks = ("it starts as one (a protobuf field), so it is probably truncated or "
                 "damaged" if head[:1] in ONNX_FIRST_BYTES else f"it {_describe_head(head)}")
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"{path!r} is not a readable ONNX model: {looks}, and protobuf cannot "
                       f"decode it ({exc})") from exc
    return _check_decoded(proto, repr(path))


def _check_decoded(proto: Any, origin: str) -> Any:
    """``proto``, unless it is empty: protobuf decodes many non-ONNX byte strings (an empty
    file, some text) to a ModelProto with no graph and no opset."""
    if not proto.HasField("graph") and not proto.opset_import:
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"{origin} is not an ONNX model: it decodes to an empty ModelProto (no "
                       f"graph, no opset_import)")
    return proto


def need_shapes_error(needed: Sequence[tuple[str, Sequence[Any]]],
                      code: int = ACL_ERROR_PARSE_MODEL) -> AclError:
    """The error (``code``) for inputs whose dims are not all fixed and that were given no
    shape: every one of them at once, with its rank and dims (symbolic names as the model
    writes them, ``?`` for an unnamed one), and the --input-shape that would fix them."""
    def dims_text(dims: Sequence[Any]) -> str:
        return ",".join("?" if d is None or d == "" or (isinstance(d, int) and d < 0)
                        else str(d) for d in dims)

    listed = ", ".join(f"{name} (rank {len(dims)}: {dims_text(dims)})" for name, dims in needed)
    example = ";".join(f"{name}:" + ",".join(str(d) if isinstance(d, int) and d >= 0 else "N"
                                             for d in dims) for name, dims in needed)
    noun = "input needs a shape" if len(needed) == 1 else "inputs need shapes"
    return AclError(code,
                    f"{len(needed)} {noun}: {listed}; give them with input_shapes / "
                    f"--input-shape \"{example}\" (N: the size)")


LIGHT_INITIALIZER_ELEMENTS = 4096  # initializers shape inference still sees (shape tensors)


def shape_inference_view(proto: Any,
                         input_shapes: dict[str, tuple[int, ...]] | None = None) -> Any:
    """A copy of ``proto`` for ONNX shape inference, with the graph inputs fixed to
    ``input_shapes`` (``apply_input_shapes``) and without its big initializers: each of
    those becomes a typed graph input. Inference needs their types and shapes, never their
    values (data propagation only follows small shape tensors), so it costs kilobytes
    instead of two more copies of the weights (MiniLM's peak RSS was 3x its weights), and
    ``proto`` is left as it is."""
    import onnx
    from onnx import helper

    light = onnx.ModelProto()
    light.ir_version = proto.ir_version
    light.opset_import.extend(proto.opset_import)
    light.functions.extend(proto.functions)
    source, graph = proto.graph, light.graph
    graph.name = source.name
    graph.node.extend(source.node)
    graph.input.extend(source.input)
    for output in source.output:  # types only: a declared shape may contradict the real one
        graph.output.add().CopyFrom(output)
        if output.type.WhichOneof("value") == "tensor_type":
            graph.output[-1].type.tensor_type.ClearField("shape")
    graph.value_info.extend(source.value_info)
    initializers = {tensor.name for tensor in source.initializer}
    apply_input_shapes([v for v in graph.input if v.name not in initializers], input_shapes)
    declared = {value.name for value in source.input}
    for tensor in source.initializer:
        if math.prod(tensor.dims) <= LIGHT_INITIALIZER_ELEMENTS:
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                             list(tensor.dims)))
    return light


def apply_input_shapes(graph_inputs: Any,
                       input_shapes: dict[str, tuple[int, ...]] | None) -> None:
    """Fix the dims of the ``graph_inputs`` (ValueInfoProtos: the graph inputs that are not
    initializers, changed in place) that ``input_shapes`` names. Each name must be one of
    them, and each shape must have the input's rank and dims that are ints >= 0: anything
    else is ``ACL_ERROR_INVALID_PARAM`` naming the input and the shape. Inputs it does not
    name keep their dims, dynamic or not."""
    import onnx

    inputs = {value.name: value for value in graph_inputs}
    for name, dims in (input_shapes or {}).items():
        if name not in inputs:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'input_shapes' names {name!r}, which is not a graph input "
                           f"(the inputs are {', '.join(inputs) or 'none'})")
        tensor_type = inputs[name].type.tensor_type
        if inputs[name].type.WhichOneof("value") != "tensor_type":
            continue  # not a tensor: import_onnx refuses it by name
        sizes = checked_shape(name, dims, len(tensor_type.shape.dim)
                              if tensor_type.HasField("shape") else None)
        tensor_type.shape.ClearField("dim")  # a shape of unknown rank gets its dims here
        tensor_type.shape.dim.extend(
            [onnx.TensorShapeProto.Dimension(dim_value=int(size)) for size in sizes])


def checked_shape(name: str, dims: Any, rank: int | None) -> list[int]:
    """``input_shapes``' shape for input ``name`` as ints, when it has ``rank`` dims (any,
    for None), each an int >= 0.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming the input and the shape.
    """
    sizes = list(dims)
    rank = len(sizes) if rank is None else rank
    if len(sizes) != rank or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
            for d in sizes):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'input_shapes' gives input {name!r} the shape {sizes}; it "
                       f"needs {rank} dims, each an int >= 0")
    return [int(d) for d in sizes]


def _attribute(attr) -> Any:
    import onnx
    from onnx import numpy_helper

    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


CONSTANT_KINDS = {"value_float": np.float32, "value_floats": np.float32,
                  "value_int": np.int64, "value_ints": np.int64}


def _constant_value(name: str, attrs: dict[str, Any]) -> np.ndarray:
    """A Constant node's tensor, from whichever of its value attributes it has."""
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for kind, dtype in CONSTANT_KINDS.items():
        if kind in attrs:
            return np.asarray(attrs[kind], dtype)
    given = ", ".join(attrs) or "none"
    raise AclError(ACL_ERROR_PARSE_MODEL,
                   f"node {name!r}: a Constant of {given} is not supported (value, value_float"
                   f"(s) and value_int(s) are)")


def _signature(schema: Any) -> tuple:
    return (sorted(schema.attributes), [i.name for i in schema.inputs],
            [o.name for o in schema.outputs])


def _check_definitions_unchanged(graph: Any, opset: int) -> None:
    """A model of an opset past ``MAX_OPSET`` is read when every op it uses has, at that
    opset, the interface it had at ``MAX_OPSET`` (the same inputs and outputs, the same
    attributes plus new ones the node leaves at their defaults: later opsets mostly add
    types and options), so the lowerings' semantics still hold; an op whose definition
    changed otherwise, or that is newer, is refused by name."""
    from onnx import defs

    for index, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            current = defs.get_schema(node.op_type, opset, "")
        except defs.SchemaError:
            continue  # an unknown op: refused later with the converter's own message
        if current.since_version <= MAX_OPSET:
            continue
        name = node.name or f"{node.op_type}_{index}"
        try:
            verified = defs.get_schema(node.op_type, MAX_OPSET, "")
        except defs.SchemaError:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"node {name!r}: ONNX op {node.op_type} (new in opset "
                           f"{current.since_version}) is not supported") from None
        added = set(current.attributes) - set(verified.attributes)
        same_interface = _signature(current)[1:] == _signature(verified)[1:] and \
            set(verified.attributes) <= set(current.attributes)
        if not same_interface or added & {a.name for a in node.attribute}:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"node {name!r}: the opset-{current.since_version} definition of "
                           f"{node.op_type} (attributes, inputs or outputs changed since "
                           f"opset {MAX_OPSET}) is not supported")


def check_model_types(proto: Any, initializers: set[str] | None = None,
                      host_values: bool = False) -> None:
    """Every graph input (but the ``initializers``) and output must be a tensor of numbers.

    With ``host_values`` (the staged engine, ``host_values.py``) string tensors are allowed
    too, and outputs may be sequences and maps (a classifier's ZipMap): the host makes them.

    Raises:
        AclError: ACL_ERROR_PARSE_MODEL naming the value and what it is.
    """
    import onnx

    graph = proto.graph
    if initializers is None:
        initializers = {i.name for i in graph.initializer}
    for value in [*graph.input, *graph.output]:
        if value.name in initializers:
            continue
        kind = value.type.WhichOneof("value")
        output = value in graph.output
        if kind != "tensor_type" and not (host_values and output and kind in (
                "sequence_type", "map_type")):
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"graph {'output' if output else 'input'} "
                           f"{value.name!r} is a {kind or 'value of no type'}; only tensors "
                           f"are supported" + (" (and sequences or maps as outputs)"
                                               if host_values else ""))
        if kind == "tensor_type" and not host_values and \
                value.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"graph value {value.name!r} holds strings; string tensors are not "
                           f"supported in a model compiled whole (InferenceSession takes them)")


def import_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None,
                weights: Mapping[str, np.ndarray] | None = None) -> Graph:
    """Read an ONNX model into a Graph (see the module docstring). ``weights`` gives the
    arrays of graph inputs that are really initializers (the staged engine keeps a model's
    big weights out of its protos and shares the arrays between specialisations); they
    become the graph's initializers as they are, never copied."""
    proto, _ = upgrade_opset(_load(model))  # first: a missing onnx is an AclError
    import onnx
    from onnx import numpy_helper

    weights = weights or {}
    opset = default_opset(proto)
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= max(MAX_OPSET, newest):
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"ONNX opset {opset} is not supported (opsets {MIN_OPSET}-{MAX_OPSET}, "
                       f"and later ones where an op's definition is unchanged)")
    if opset > MAX_OPSET:
        _check_definitions_unchanged(proto.graph, opset)
    graph = proto.graph
    initializer_names = {i.name for i in graph.initializer} | set(weights)
    inputs = [i for i in graph.input if i.name not in initializer_names]
    check_model_types(proto, initializer_names)
    view = shape_inference_view(proto, input_shapes)  # the caller's proto stays unchanged
    input_names = {value.name for value in inputs}
    needed = [(value.name, [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                            for d in value.type.tensor_type.shape.dim])
              for value in view.graph.input if value.name in input_names]  # not big weights
    needed = [(name, dims) for name, dims in needed
              if any(not isinstance(d, int) or d < 0 for d in dims)]
    if needed:
        raise need_shapes_error(needed)
    inferred = infer_shapes(view)
    values: dict[str, Value] = {}
    for info in list(inferred.graph.input) + list(inferred.graph.value_info) + \
            list(inferred.graph.output):
        tensor_type = info.type.tensor_type
        if not tensor_type.HasField("shape") or any(
                not d.HasField("dim_value") or d.dim_value < 0 for d in tensor_type.shape.dim):
            continue
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        values[info.name] = Value(info.name, dtype,
                                  tuple(d.dim_value for d in tensor_type.shape.dim))
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    initializers.update(weights)
    nodes = []
    for index, node in enumerate(inferred.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        attrs = {a.name: _attribute(a) for a in node.attribute}
        if node.domain not in ("", "ai.onnx"):
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"node {name!r}: op {node.domain}.{node.op_type} is not supported")
        if node.op_type == "Constant":
            initializers[node.output[0]] = _constant_value(name, attrs)
            continue
        nodes.append(Node(node.op_type, name, list(node.input), list(node.output), attrs))
    for name, array in initializers.items():
        values[name] = Value(name, array.dtype, tuple(array.shape))
    result = Graph(graph.name or "model", [v.name for v in inputs],
                   [o.name for o in graph.output], values, nodes, initializers, opset)
    for node in nodes:
        for output in node.outputs:
            if output and output not in values:
                raise AclError(ACL_ERROR_PARSE_MODEL,
                               f"node {node.name!r} ({node.op_type}): the shape of output "
                               f"{output!r} cannot be inferred before it runs; data-dependent "
                               f"shapes are not supported")
    result.validate()
    return result
