"""What a model file holds, as ``openacl inspect`` (and ``atc --mode=1``) shows it.

``describe_model(path)`` reads an offline model (.om, any format this OpenACL reads) or an
ONNX model (.onnx, read as it is: nothing is converted) and returns one JSON-able dict, our
own schema in the spirit of ATC's om-to-JSON (a graph with its op list)::

    {"file": str, "file_bytes": int,
     "kind": "offline model" | "onnx model",
     "format_version": "1.2",                # .om: the container's version
     "model_type": "static" | "dynamic batch" | "dynamic dims" | "dynamic image size"
                   | "dynamic shape",
     "precision": "fp32" | "fp16" | "mixed", # .om
     "inputs":  [{"name", "dtype", "dims", "ranges"}],   # dims: ints, -1 or symbolic names;
     "outputs": [{"name", "dtype", "dims"}],             # ranges: [low, high] per dim (.om)
     "gears": {"kind": "batch" | "dims" | "image_size", "values": [[...], ...]} | null,
     "op_counts": {"aclnn": {op: n}} | {"onnx": {op: n}},
     "graph": {"name": str, "op": [{"name": node, "type": op}, ...]},
     "weights_bytes": int, "weights_count": int,
     "arena_bytes": int | null, "naive_bytes": int | null,   # a compiled .om's plan
     "opset": int, "ir_version": int | null, "producer": str | null,
     "options": {...},                       # .om: the conversion options recorded (1.2/2.1)
     "metadata": {...}}                      # .om: everything the converter recorded

A dynamic-shape .om holds its ONNX graph: its op counts are ONNX's and its arena is planned
per input shape at run time (``arena_bytes`` is null). Reading never runs the model.
"""

from __future__ import annotations

import collections
import os
from typing import Any

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.model import om

__all__ = ["describe_model"]

GEAR_KIND_NAMES = {"batch": "dynamic batch", "dims": "dynamic dims",
                   "image_size": "dynamic image size"}  # a gear kind -> model_type


def _counts(names: Any) -> dict[str, int]:
    return dict(collections.Counter(names).most_common())


def describe_model(path: str | os.PathLike) -> dict[str, Any]:
    """Describe the model file at ``path`` (see the module docstring): an offline model is
    told apart by its magic, anything else is read as ONNX.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM for a path that is not a str or PathLike; the
            offline model reader's or the ONNX reader's codes for a file they refuse.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'path' = {path!r} is invalid: expected a file path")
    path = os.fspath(path)
    if om.is_model_file(path):
        return _describe_offline(path)
    from openacl.model import onnx_import

    return _describe_onnx(onnx_import._load(path), path)


def _base(path: str, kind: str) -> dict[str, Any]:
    return {"file": path, "file_bytes": os.path.getsize(path), "kind": kind}


def _describe_offline(path: str) -> dict[str, Any]:
    model = om.load_offline(path)
    major, minor = om.file_version(path)
    metadata = dict(model.metadata)
    result = _base(path, "offline model")
    result["format_version"] = f"{major}.{minor}"
    if model.staged is not None:
        staged = model.staged
        result.update(_describe_onnx(staged.proto, path, ranges=staged.ranges))
        result.update(file=path, kind="offline model", format_version=f"{major}.{minor}",
                      precision=staged.precision,
                      weights_bytes=sum(a.nbytes for a in staged.weights.values()) +
                      result["weights_bytes"],
                      weights_count=len(staged.weights) + result["weights_count"],
                      arena_bytes=None, naive_bytes=None)
        if staged.gears is not None:
            result["model_type"] = GEAR_KIND_NAMES[staged.gears.kind]
            result["gears"] = {"kind": staged.gears.kind,
                               "values": [list(staged.gears.values(shape))
                                          for shape in staged.gears.shapes]}
        else:
            result["model_type"] = "dynamic shape"
    else:
        lowered, plan = model.lowered, model.plan
        graph = lowered.graph
        used = om.referenced_weights(lowered, plan)
        result.update(
            model_type="dynamic batch" if model.gears else "static",
            precision=metadata.get("precision", "fp32"),
            inputs=[_value(graph, name) for name in graph.inputs],
            outputs=[_value(graph, name) for name in graph.outputs],
            gears={"kind": "batch", "values": [[batch] for batch in _batches(model)]}
            if model.gears else None,
            op_counts={"aclnn": _counts(step.op for step in lowered.steps)},
            graph={"name": graph.name, "op": [{"name": step.node, "type": step.op}
                                              for step in lowered.steps]},
            weights_bytes=sum(graph.initializers[name].nbytes for name in used),
            weights_count=len(used), arena_bytes=plan.arena_bytes,
            naive_bytes=plan.naive_bytes, opset=graph.opset,
            ir_version=metadata.get("onnx_ir_version"),
            producer=metadata.get("onnx_producer"))
    result["options"] = dict(metadata.get("options", {}))
    result["metadata"] = metadata
    return result


def _batches(model: om.OfflineModel) -> list[int]:
    """A dynamic-batch model's batch sizes: its gears' and its main model's (the largest,
    dim 0 of its inputs)."""
    graph = model.lowered.graph
    main = [int(graph.value(graph.inputs[0]).shape[0])] if graph.inputs else []
    return sorted({gear.batch for gear in model.gears} | set(main))


def _value(graph: Any, name: str) -> dict[str, Any]:
    value = graph.value(name)
    dims = [int(d) for d in value.shape]
    return {"name": name, "dtype": value.dtype.name, "dims": dims,
            "ranges": [[d, d] for d in dims]}


def _describe_onnx(proto: Any, path: str, ranges: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """An ONNX model as it is written (symbolic dims kept); ``ranges``: a dynamic-shape
    offline model's input ranges."""
    import math

    from onnx import TensorProto, helper

    from openacl.model.onnx_graph import default_opset

    graph = proto.graph
    initializers = {tensor.name for tensor in graph.initializer}

    def dims_of(value: Any) -> list[Any] | None:
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            return None  # unknown rank
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or -1)
                for d in tensor_type.shape.dim]

    def dtype_name(elem: int) -> str:
        try:
            return helper.tensor_dtype_to_np_dtype(elem).name
        except (KeyError, TypeError, ValueError):
            return TensorProto.DataType.Name(elem).lower() if elem else "unknown"

    def dtype_of(value: Any) -> str:
        return dtype_name(value.type.tensor_type.elem_type)

    def entry(value: Any, with_ranges: bool) -> dict[str, Any]:
        item = {"name": value.name, "dtype": dtype_of(value), "dims": dims_of(value)}
        if with_ranges:
            item["ranges"] = [list(pair) for pair in (ranges or {}).get(value.name, [])] \
                or None
        return item

    inputs = [entry(v, True) for v in graph.input if v.name not in initializers]
    dynamic = any(d is None or not isinstance(d, int) or d < 0
                  for item in inputs for d in (item["dims"] or [None]))
    if ranges:
        dynamic = any(low != high for pairs in ranges.values() for low, high in pairs)
    # weights: the initializers and the tensors of Constant nodes (exporters such as
    # Paddle2ONNX keep every weight in a Constant node and no initializer at all)
    tensors = [*graph.initializer, *(attribute.t for node in graph.node
                                     if node.op_type == "Constant"
                                     for attribute in node.attribute if attribute.name == "value")]
    weights_bytes = 0
    for tensor in tensors:
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 1  # a type numpy has no dtype for (strings): counted as bytes
        weights_bytes += math.prod(tensor.dims) * itemsize
    producer = " ".join(filter(None, (proto.producer_name, proto.producer_version)))
    return {**_base(path, "onnx model"),
            "model_type": "dynamic shape" if dynamic else "static",
            "inputs": inputs, "outputs": [entry(v, False) for v in graph.output],
            "gears": None,
            "op_counts": {"onnx": _counts(node.op_type for node in graph.node)},
            "graph": {"name": graph.name, "op": [
                {"name": node.name or f"{node.op_type}_{index}", "type": node.op_type}
                for index, node in enumerate(graph.node)]},
            "weights_bytes": weights_bytes, "weights_count": len(tensors),
            "arena_bytes": None, "naive_bytes": None, "opset": default_opset(proto),
            "ir_version": int(proto.ir_version), "producer": producer or None}
