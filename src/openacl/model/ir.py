"""The graph IR: what the converter produces and the engine runs.

A ``Graph`` is a list of ``Node``s in topological order over named ``Value``s (every value
has a concrete dtype and shape), plus constant ``initializers`` (numpy arrays). ONNX import
(``onnx_import.py``) builds it; lowering (``lowering.py``) turns each node into aclnn calls,
a ``Lowered`` program of ``Step``s over ``Ref``/``RefList``/``Scalar`` arguments (defined
here, so the memory plan, the .om file and the engine read programs without importing the
lowerings); the memory plan (``plan.py``) places every intermediate value in one arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.errors import ACL_ERROR_PARSE_MODEL, AclError


@dataclass
class Value:
    """A tensor of the graph: its name, dtype and concrete shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass
class Node:
    """One operator application (ONNX op type and attributes; '' marks a missing input)."""

    op_type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Graph:
    """A whole model."""

    name: str
    inputs: list[str]
    outputs: list[str]
    values: dict[str, Value]
    nodes: list[Node]
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = 0

    def value(self, name: str) -> Value:
        try:
            return self.values[name]
        except KeyError:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"graph {self.name!r}: value {name!r} has no dtype/shape") from None

    def validate(self) -> None:
        """Every node input is defined before use; every value has a type; outputs exist."""
        defined = set(self.inputs) | set(self.initializers)
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in defined:
                    raise AclError(ACL_ERROR_PARSE_MODEL,
                                   f"node {node.name!r} ({node.op_type}) reads {name!r} before "
                                   f"anything defines it (a cycle or a missing input)")
            for name in node.outputs:
                if not name:  # an optional output left out
                    continue
                if name in defined:
                    raise AclError(ACL_ERROR_PARSE_MODEL,
                                   f"node {node.name!r} ({node.op_type}) redefines {name!r}")
                defined.add(name)
                self.value(name)
        for name in self.outputs:
            if name not in defined:
                raise AclError(ACL_ERROR_PARSE_MODEL, f"graph output {name!r} is never computed")


# -- lowered programs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref:
    """A graph value passed as an aclTensor."""

    value: str


@dataclass(frozen=True)
class RefList:
    """Graph values passed as an aclTensorList."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class Scalar:
    """A constant passed as an aclScalar of ``dtype`` (a numpy dtype name)."""

    value: Any
    dtype: str


@dataclass(frozen=True)
class Step:
    """One aclnn call: operator name and its arguments by CANN name."""

    op: str
    args: tuple[tuple[str, Any], ...]
    node: str = ""  # the graph node it came from, for errors and profiles


@dataclass
class Lowered:
    """A graph's steps, its zero-copy views (output -> source) and the graph itself."""

    graph: Graph
    steps: list[Step] = field(default_factory=list)
    views: dict[str, str] = field(default_factory=dict)


def encode_arg(arg: Any) -> Any:
    """A step argument as JSON-able data (for the offline model file)."""
    if isinstance(arg, Ref):
        return {"value": arg.value}
    if isinstance(arg, RefList):
        return {"values": list(arg.values)}
    if isinstance(arg, Scalar):
        return {"scalar": arg.value, "dtype": arg.dtype}
    if isinstance(arg, tuple):
        return [encode_arg(a) for a in arg]
    if isinstance(arg, np.dtype) or (isinstance(arg, type) and issubclass(arg, np.generic)):
        return int(dtypes.from_numpy_dtype(arg))  # an aclDataType value (dtype arguments)
    if isinstance(arg, np.generic):
        return arg.item()
    return arg


def decode_arg(data: Any) -> Any:
    if isinstance(data, dict):
        if set(data) == {"value"}:
            return Ref(str(data["value"]))
        if set(data) == {"values"}:
            return RefList(tuple(str(v) for v in data["values"]))
        if set(data) == {"scalar", "dtype"}:
            return Scalar(data["scalar"], str(data["dtype"]))
        raise AclError(ACL_ERROR_PARSE_MODEL, f"bad step argument {data!r}")
    if isinstance(data, list):
        return tuple(data)
    return data
