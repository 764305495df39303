"""ONNX import: an ``onnx.ModelProto`` (or file) becomes a ``Graph`` with concrete shapes.

Opsets 11 to 21 are accepted. Constant nodes become initializers; shapes and dtypes come from
ONNX shape inference with the graph inputs fixed to the given shapes (``input_shapes``
overrides dynamic dims such as the batch). Anything the graph leaves without a concrete
type is an error naming the value. ``onnx`` is imported here only (it is heavy).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_FILE, ACL_ERROR_PARSE_MODEL, AclError
from openacl.model.ir import Graph, Node, Value

MIN_OPSET, MAX_OPSET = 11, 21  # ONNX default-domain opsets the converter accepts


def _load(model: Any):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(os.fspath(model))
    except (OSError, ValueError) as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read ONNX model {model!r}: {exc}") \
            from exc
    except Exception as exc:  # protobuf DecodeError and friends
        raise AclError(ACL_ERROR_PARSE_MODEL, f"{model!r} is not an ONNX model: {exc}") from exc


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


def import_onnx(model: Any, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Read an ONNX model into a Graph (see the module docstring)."""
    import onnx
    from onnx import numpy_helper, shape_inference

    proto = _load(model)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"ONNX opset {opset} is not supported (opsets {MIN_OPSET}-{MAX_OPSET})")
    graph = proto.graph
    initializer_names = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializer_names]
    shapes = dict(input_shapes or {})
    for value in inputs:
        dims = shapes.get(value.name)
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if dims is not None:
                dim.ClearField("dim_param")
                dim.dim_value = int(dims[index])
            elif not dim.HasField("dim_value"):
                raise AclError(ACL_ERROR_PARSE_MODEL,
                               f"input {value.name!r} has a dynamic dim {dim.dim_param!r}: "
                               f"give its shape (input_shapes / --input-shape)")
    inferred = shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    values: dict[str, Value] = {}
    for info in list(inferred.graph.input) + list(inferred.graph.value_info) + \
            list(inferred.graph.output):
        tensor_type = info.type.tensor_type
        if not tensor_type.HasField("shape") or any(
                not d.HasField("dim_value") for d in tensor_type.shape.dim):
            continue
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        values[info.name] = Value(info.name, dtype,
                                  tuple(d.dim_value for d in tensor_type.shape.dim))
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    nodes = []
    for index, node in enumerate(inferred.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        attrs = {a.name: _attribute(a) for a in node.attribute}
        if node.domain not in ("", "ai.onnx"):
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"node {name!r}: op {node.domain}.{node.op_type} is not supported")
        if node.op_type == "Constant":
            if "value" not in attrs:
                raise AclError(ACL_ERROR_PARSE_MODEL,
                               f"node {name!r}: Constant without a 'value' tensor")
            initializers[node.output[0]] = np.asarray(attrs["value"])
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
                               f"{output!r} cannot be inferred")
    result.validate()
    return result
