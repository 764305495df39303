"""Run-time values that only the host handles: string tensors, sequences and maps.

Classical-ML models (scikit-learn, LightGBM, XGBoost converted by skl2onnx or onnxmltools)
return their labels as string tensors and their class scores as a sequence of maps
(``ZipMap``); sequence ops (``SplitToSequence`` ...) pass lists of tensors between nodes.
The staged engine (``staged.py``) keeps such values as Python objects between its host
nodes and never hands them to a compiled stage.

Design note (invariants)
------------------------
* A run-time value is a numpy array (numbers, bool, or ``object`` holding ``str`` for an
  ONNX string tensor), a ``list`` (an ONNX sequence: of arrays, or of dicts for a sequence
  of maps) or a ``dict`` (an ONNX map), as onnxruntime's Python API hands them out.
* Only arrays of numbers and bool are *compilable*: a node that reads or writes anything
  else runs on the host.
* ``kind(value)`` is hashable and identifies what a stage built after the value may assume
  of it: dtype and shape for an array, the ONNX type for a sequence or map (the nodes that
  read those run on the host, so their lengths never key a stage).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_value", "compilable_dtype", "kind", "type_proto", "type_string",
           "value_info"]

_DEFAULT_ELEMENT = np.dtype(np.float32)  # an empty sequence's element type, unknown at run


def compilable_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can flow through a compiled stage (not strings)."""
    return np.dtype(dtype).kind not in "OUS"


def as_value(result: Any) -> np.ndarray:
    """A host op's tensor result as the engine keeps it: an array, text as ``str`` objects
    (numpy's fixed-width ``<U`` arrays are what some reference ops return)."""
    array = np.asarray(result)
    return array.astype(object) if array.dtype.kind in "US" else array


OPAQUE = "onnx-type"  # the first item of a sequence's or map's kind


def kind(value: Any) -> tuple:
    """A hashable description of ``value`` for stage keys and stage inputs."""
    if isinstance(value, np.ndarray):
        return value.dtype, value.shape
    return (OPAQUE, type_proto(value).SerializeToString())


def value_info(name: str, value_kind: tuple) -> Any:
    """The ValueInfoProto of a graph input holding a value of ``value_kind``: a tensor of
    that dtype and shape, or the sequence's or map's ONNX type."""
    import onnx
    from onnx import helper

    first, second = value_kind
    if isinstance(first, str) and first == OPAQUE:
        proto = onnx.TypeProto()
        proto.ParseFromString(second)
        return helper.make_value_info(name, proto)
    return helper.make_tensor_value_info(name, _element_type(np.dtype(first)), list(second))


def _element_type(dtype: np.dtype) -> int:
    from onnx import TensorProto, helper

    if dtype.kind in "OUS":
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(dtype)


def _key_type(key: Any) -> int:
    from onnx import TensorProto

    if isinstance(key, str | bytes):
        return TensorProto.STRING
    return TensorProto.INT64


def type_proto(value: Any) -> Any:
    """The ONNX TypeProto of a run-time value (shapes left unknown)."""
    from onnx import helper

    if isinstance(value, np.ndarray):
        return helper.make_tensor_type_proto(_element_type(value.dtype), None)
    if isinstance(value, dict):
        first_key = next(iter(value), 0)
        first = next(iter(value.values()), np.float32(0))
        return helper.make_map_type_proto(
            _key_type(first_key), helper.make_tensor_type_proto(
                _element_type(np.asarray(first).dtype), None))
    if isinstance(value, list | tuple):
        element = type_proto(value[0]) if len(value) else \
            helper.make_tensor_type_proto(_element_type(_DEFAULT_ELEMENT), None)
        return helper.make_sequence_type_proto(element)
    return type_proto(np.asarray(value))


def type_string(proto: Any) -> str:
    """onnxruntime's name of an ONNX type: ``tensor(float)``, ``seq(tensor(int64))``,
    ``seq(map(int64,tensor(float)))``."""
    from onnx import helper

    which = proto.WhichOneof("value")
    if which == "tensor_type":
        name = helper.tensor_dtype_to_string(proto.tensor_type.elem_type)
        return f"tensor({name.removeprefix('TensorProto.').lower()})"
    if which == "sequence_type":
        return f"seq({type_string(proto.sequence_type.elem_type)})"
    if which == "map_type":
        key = helper.tensor_dtype_to_string(proto.map_type.key_type)
        return f"map({key.removeprefix('TensorProto.').lower()}," \
               f"{type_string(proto.map_type.value_type)})"
    if which == "optional_type":
        return f"optional({type_string(proto.optional_type.elem_type)})"
    return "unknown"
