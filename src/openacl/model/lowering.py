"""Lowering: each graph node becomes aclnn operator calls (``Step``s) over graph values.

A lowering function, registered per ONNX op type with ``@lowering("Relu")``, receives the
node and a ``Builder`` and issues ``builder.call("Relu", self=Ref(x), out=Ref(y))`` (aclnn
operator name and CANN argument names), may create temporaries (``builder.temp``) and
constants (``builder.constant``), and may make an output a zero-copy view of an input
(``builder.view``: reshapes and friends). Steps hold only JSON-able data, so a lowered graph
can be written into an offline model file and replayed.

An op type without a lowering is ``ACL_ERROR_OP_NOT_FOUND`` naming the node and the op; a
lowering that meets an attribute it cannot honour raises ``unsupported`` naming the node,
the op and the attribute: never a wrong result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_OP_NOT_FOUND, ACL_ERROR_PARSE_MODEL, AclError
from openacl.model.epilogues import write_in_place
from openacl.model.ir import (  # noqa: F401 - Step's family, re-exported for the lowerings
    Graph,
    Lowered,
    Node,
    Ref,
    RefList,
    Scalar,
    Step,
    Value,
    decode_arg,
    encode_arg,
)
from openacl.ops import REGISTRY

LOWERINGS: dict[str, Callable[[Node, Builder], None]] = {}


def lowering(*op_types: str) -> Callable:
    """Register a lowering function for ONNX ``op_types``."""
    def decorate(fn: Callable[[Node, Builder], None]) -> Callable[[Node, Builder], None]:
        for op_type in op_types:
            if op_type in LOWERINGS:
                raise ValueError(f"{op_type} is lowered twice")
            LOWERINGS[op_type] = fn
        return fn
    return decorate


def unsupported(node: Node, what: str) -> AclError:
    """The error for an attribute or input form a lowering cannot honour (not raised)."""
    return AclError(ACL_ERROR_PARSE_MODEL,
                    f"node {node.name!r} ({node.op_type}): {what} is not supported")


class Builder:
    """What a lowering function uses to emit steps."""

    def __init__(self, lowered: Lowered) -> None:
        self.lowered = lowered
        self.graph = lowered.graph
        self.node: Node | None = None
        self._temps = 0

    def value(self, name: str) -> Value:
        return self.graph.value(name)

    def constant_of(self, name: str) -> np.ndarray | None:
        """The initializer behind input ``name``, if it is one (for shape-like inputs)."""
        return self.graph.initializers.get(name)

    def call(self, op: str, /, **args: Any) -> None:
        if op not in REGISTRY:
            raise AclError(ACL_ERROR_OP_NOT_FOUND, f"lowering of {self.node.name!r} calls "
                                                   f"unknown aclnn operator {op}")
        self.lowered.steps.append(Step(op, tuple(args.items()),
                                       self.node.name if self.node else ""))

    def temp(self, shape: tuple[int, ...], dtype: Any) -> str:
        """A new intermediate value (placed in the arena like any other)."""
        self._temps += 1
        name = f"{self.node.name}/tmp{self._temps}" if self.node else f"tmp{self._temps}"
        self.graph.values[name] = Value(name, np.dtype(dtype), tuple(int(d) for d in shape))
        return name

    def constant(self, array: np.ndarray, hint: str = "const") -> str:
        """A new initializer holding ``array``."""
        self._temps += 1
        name = f"{self.node.name if self.node else ''}/{hint}{self._temps}"
        array = np.asarray(array, order="C")  # keeps 0-d constants 0-d
        self.graph.initializers[name] = array
        self.graph.values[name] = Value(name, array.dtype, tuple(array.shape))
        return name

    def unary(self, op: str, source: str, dtype: Any = None) -> str:
        """``op(source)`` into a new intermediate of ``dtype`` (default the source's)."""
        value = self.value(source)
        out = self.temp(value.shape, value.dtype if dtype is None else dtype)
        self.call(op, self=Ref(source), out=Ref(out))
        return out

    def binary(self, op: str, left: str, right: str, dtype: Any = None) -> str:
        """``op(left, right)`` (broadcast) into a new intermediate; Add/Sub get no alpha."""
        shape = np.broadcast_shapes(self.value(left).shape, self.value(right).shape)
        out = self.temp(shape, self.value(left).dtype if dtype is None else dtype)
        extra = {"alpha": None} if op in ("Add", "Sub") else {}
        self.call(op, self=Ref(left), other=Ref(right), out=Ref(out), **extra)
        return out

    def view(self, output: str, source: str) -> None:
        """Make ``output`` share ``source``'s memory (same element count, contiguous)."""
        out, src = self.value(output), self.value(source)
        if out.nbytes != src.nbytes:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"node {self.node.name!r}: view {output!r} {out.shape} does not "
                           f"hold the bytes of {source!r} {src.shape}")
        root = self.lowered.views.get(source, source)
        self.lowered.views[output] = root

    def reshaped(self, name: str, shape: tuple[int, ...]) -> str:
        """A zero-copy view of ``name`` with ``shape`` (``name`` itself when it has it)."""
        value = self.value(name)
        if value.shape == tuple(shape):
            return name
        viewed = self.temp(shape, value.dtype)
        self.view(viewed, name)
        return viewed

    def written_as(self, out: str, shape: tuple[int, ...]) -> str:
        """A value of ``shape`` that ``out`` is a view of, so an operator writing it writes
        ``out`` (``out`` itself when it has that shape)."""
        value = self.value(out)
        if value.shape == tuple(shape):
            return out
        target = self.temp(shape, value.dtype)
        self.view(out, target)
        return target


def register_lowerings() -> None:
    """Fill ``LOWERINGS`` (the modules register themselves when first imported)."""
    from openacl.model import (  # noqa: F401 - imported for their registrations
        onnx_ops,
        onnx_ops_einsum,
        onnx_ops_index,
        onnx_ops_math,
        onnx_ops_nn,
        onnx_ops_norm,
        onnx_ops_quant,
        onnx_ops_rnn,
    )


def lower(graph: Graph) -> Lowered:
    """Lower every node of ``graph`` (which is extended with temporaries and constants)."""
    register_lowerings()

    lowered = Lowered(graph)
    builder = Builder(lowered)
    for node in graph.nodes:
        fn = LOWERINGS.get(node.op_type)
        if fn is None:
            raise AclError(ACL_ERROR_OP_NOT_FOUND,
                           f"node {node.name!r}: ONNX op {node.op_type} is not supported by the "
                           f"converter (supported: {len(LOWERINGS)} op types, see "
                           f"openacl.model.lowering.LOWERINGS)")
        builder.node = node
        try:
            fn(node, builder)
        except AclError as exc:
            exc.node = node.name  # which node refused (the staged engine may specialise it)
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            # a safety net behind the lowerings' checks: a malformed node never escapes
            error = AclError(ACL_ERROR_PARSE_MODEL,
                             f"node {node.name!r} ({node.op_type}) cannot be lowered: "
                             f"{type(exc).__name__}: {exc}")
            error.node = node.name
            raise error from exc
    builder.node = None
    write_in_place(lowered)  # activations the producing step can apply (model/epilogues.py)
    return lowered
