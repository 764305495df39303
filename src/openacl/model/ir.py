"""The graph IR: what the converter produces and the engine runs.

A ``Graph`` is a list of ``Node``s in topological order over named ``Value``s (every value
has a concrete dtype and shape), plus constant ``initializers`` (numpy arrays). ONNX import
(``onnx_import.py``) builds it; lowering (``lowering.py``) turns each node into aclnn calls;
the memory plan (``plan.py``) places every intermediate value in one arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
