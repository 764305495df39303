"""The lowering machinery: ``_Lowering``, what an op type's ``lower`` sees (its operands,
attributes and value inputs) and through which it issues aclnn calls, binding each one's
phase 1 into a ``_Step``; also ``_Operand`` (an input, an output or a scratch buffer as its
desc described it).

While binding, every executor tensor is mapped to the input, output or scratch buffer it
reads; see the design note in ``openacl.aclop.program``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from openacl import dtypes
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    AclError,
)
from openacl.ops import REGISTRY
from openacl.ops.dispatch import phase1
from openacl.ops.executor import find_executor, set_executor_repeatable
from openacl.tensor import create_scalar, create_tensor, destroy_scalar, destroy_tensor

if TYPE_CHECKING:
    from openacl.aclop.types import OpType


@dataclass
class _Operand:
    """One input or output as the call described it (a snapshot of its desc)."""

    name: str  # CANN name; dynamic inputs are x0, x1...; scratch buffers scratch0...
    origin: tuple[str, int]  # ("in", i), ("out", j) or ("tmp", k): which buffer holds it
    data_type: DataType
    dims: tuple[int, ...]
    format: Format
    const: bytes | None
    handle: int | None = None  # its aclTensor (inputs always; outputs unless inferring)

    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_numpy_dtype(self.data_type)


@dataclass(frozen=True)
class _Pending:
    """An output while inferring: the CANN output an aclnn output argument stands for."""

    name: str


@dataclass
class _Step:
    """One bound aclnn call: its executor and, per executor tensor, the buffer it reads."""

    executor: int
    sources: list[tuple[str, int] | None]
    workspace_bytes: int


@dataclass
class _Bound:
    """A lowering bound once: its steps in order and the bytes of each scratch buffer they
    pass between them (allocated per run, as the workspaces are)."""

    steps: list[_Step]
    scratch_bytes: list[int]


class _Lowering:
    """What an op type's ``lower`` sees: inputs, outputs, attributes, value inputs; it issues
    aclnn calls with ``call``."""

    def __init__(self, spec: OpType, inputs: dict[str, Any], outputs: dict[str, _Operand],
                 attrs: dict[str, Any], infer: bool) -> None:
        self.spec = spec
        self.op_type = spec.name
        self.inputs = inputs  # name -> _Operand, list of them (dynamic) or None (absent)
        self.outputs = outputs
        self.attrs = attrs
        self.infer = infer
        self.values: dict[str, tuple[int | float, ...]] = {}
        self.steps: list[_Step] = []
        self.scratch_bytes: list[int] = []  # per scratch buffer, in the order made
        self.inferred: dict[str, tuple[tuple[int, ...], DataType]] = {}
        self.infer_dtypes: dict[str, DataType] = {}
        self._origins: dict[int, tuple[str, int]] = {}  # aclTensor handle -> buffer
        self._names: dict[int, str] = {}  # aclTensor handle -> CANN name
        self._temporaries: list[tuple[Callable[[int], None], int]] = []
        self.explicit: set[str] = set()  # attributes the caller set (not defaults)

    # -- errors ---------------------------------------------------------------------------
    def fail_input(self, name: str, reason: str) -> AclError:
        return AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                        f"{self.op_type}: input '{name}' does not match: {reason}")

    def fail_output(self, name: str, reason: str) -> AclError:
        return AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                        f"{self.op_type}: output '{name}' does not match: {reason}")

    def fail_attr(self, name: str, reason: str) -> AclError:
        value = self.attrs.get(name)
        return AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                        f"{self.op_type}: attribute '{name}' = {value!r} is invalid: {reason}")

    # -- operands -------------------------------------------------------------------------
    def operand(self, name: str) -> _Operand:
        return self.inputs[name]

    def has(self, name: str) -> bool:
        return self.inputs.get(name) is not None

    def shape(self, name: str) -> tuple[int, ...]:
        return self.inputs[name].dims

    def x(self, name: str) -> int:
        """The aclTensor of input ``name`` (contiguous, as its desc says)."""
        return self._tensor(self.inputs[name])

    def xs(self, name: str) -> list[int]:
        return [self._tensor(item) for item in self.inputs[name]]

    def y(self, name: str) -> Any:
        """The aclTensor of output ``name`` (a ``_Pending`` marker while inferring)."""
        if self.infer:
            return _Pending(name)
        return self._tensor(self.outputs[name])

    def ys(self, name: str, count: int) -> list[Any]:
        """The aclTensors of dynamic output ``name`` (``name0``, ``name1``... of the output
        descs; ``_Pending`` markers while inferring), which must number ``count``."""
        names = [f"{name}{k}" for k in range(count)]
        if self.infer:
            return [_Pending(n) for n in names]
        found = [n for n in self.outputs if n.startswith(name) and n[len(name):].isdigit()]
        if len(found) != count:
            raise self.fail_output(name, f"{len(found)} output desc(s) were given; "
                                         f"{self.op_type} makes {count} here")
        return [self._tensor(self.outputs[n]) for n in names]

    def _tensor(self, operand: _Operand) -> int:
        if operand.handle is None:
            operand.handle = self._create(operand, operand.dims, None, 0)
        return operand.handle

    def view(self, name: str, dims: Sequence[int], strides: Sequence[int] | None = None,
             offset: int = 0) -> int:
        """A strided view (element strides, element offset) of input ``name``'s buffer."""
        return self._create(self.inputs[name], dims, strides, offset)

    def view_output(self, name: str, dims: Sequence[int], strides: Sequence[int],
                    offset: int = 0) -> int:
        """A strided view (element strides, element offset) of output ``name``'s buffer (an
        NHWC output written as NCHW, a padded output's interior)."""
        return self._create(self.outputs[name], dims, strides, offset)

    def scratch(self, dims: Sequence[int], data_type: DataType) -> _Operand:
        """A buffer of the call's own, for an intermediate one aclnn call writes and the next
        reads (int64 indices narrowed to the int32 output CANN's IR declares, a permuted
        copy): ``tensor`` makes aclTensors over it. Each run allocates it and frees it once
        the run's work is enqueued, as workspaces are."""
        index = len(self.scratch_bytes)
        dims = tuple(int(d) for d in dims)
        operand = _Operand(f"scratch{index}", ("tmp", index), DataType(data_type), dims,
                           Format.ACL_FORMAT_ND, None)
        self.scratch_bytes.append(math.prod(dims) * operand.dtype.itemsize)
        return operand

    def tensor(self, operand: _Operand, dims: Sequence[int] | None = None,
               strides: Sequence[int] | None = None, offset: int = 0) -> int:
        """An aclTensor over ``operand``'s buffer (a scratch buffer's): all of it as its desc
        says, or ``dims`` with element ``strides`` (contiguous when None) from ``offset``."""
        if dims is None:
            return self._tensor(operand)
        return self._create(operand, dims, strides, offset)

    def bound(self) -> _Bound:
        """What binding made: the steps and their scratch buffers."""
        return _Bound(self.steps, self.scratch_bytes)

    def _create(self, operand: _Operand, dims: Sequence[int], strides: Sequence[int] | None,
                offset: int) -> int:
        handle = create_tensor(list(dims), operand.data_type, strides, offset, operand.format,
                               operand.dims, 0)
        self._temporaries.append((destroy_tensor, handle))
        self._origins[handle] = operand.origin
        self._names[handle] = operand.name
        return handle

    def scalar(self, value: Any, data_type: Any = DataType.ACL_FLOAT) -> int:
        handle = create_scalar(value, data_type)
        self._temporaries.append((destroy_scalar, handle))
        return handle

    def release_temporaries(self) -> None:
        while self._temporaries:
            destroy, handle = self._temporaries.pop()
            destroy(handle)

    # -- attributes and values ------------------------------------------------------------
    def attr(self, name: str) -> Any:
        return self.attrs[name]

    def only_default(self, *names: str) -> None:
        """Refuse attributes this lowering cannot honour unless they keep their default."""
        for name in names:
            default = self.spec.attr(name).default
            if self.attrs[name] != default:
                raise self.fail_attr(name, f"only the default {default!r} is supported here")

    def axis(self, name: str, value: int, ndim: int, input_name: bool = False) -> int:
        limit = max(ndim, 1)
        if not -limit <= value < limit:
            reason = f"axis {value} is out of range for a {ndim}-dim tensor"
            raise self.fail_input(name, reason) if input_name else self.fail_attr(name, reason)
        return value % limit

    # -- aclnn calls ----------------------------------------------------------------------
    def call(self, aclnn: str, names: dict[str, str] | None = None, /, **raw: Any) -> None:
        """Phase 1 of ``aclnn<aclnn>`` with ``raw`` arguments; ``names`` maps aclnn argument
        names to the CANN attribute or input they come from (for error messages).

        While inferring, outputs are ``_Pending`` markers: the step is bound in infer mode
        and what it infers is recorded for the CANN outputs they stand for (a step with no
        pending output, an in-place one, is skipped)."""
        op = REGISTRY[aclnn]
        if self.infer:
            pending: dict[str, Any] = {}
            for param, value in raw.items():
                if isinstance(value, _Pending):
                    pending[param] = value.name
                elif isinstance(value, list) and value and all(
                        isinstance(v, _Pending) for v in value):  # a dynamic output
                    pending[param] = [v.name for v in value]
            if not pending:
                return
            raw = {k: None if k in pending else v for k, v in raw.items()}
            call, _ = self._bind(op, raw, names, infer=True)
            for param, target in pending.items():
                if param not in call.inferred:
                    continue
                found = call.inferred[param]
                pairs = zip(target, found, strict=True) if isinstance(target, list) else [
                    (target, found)]
                for name, (shape, dtype) in pairs:
                    if name not in self.inferred:
                        self.inferred[name] = (tuple(shape), dtypes.from_numpy_dtype(dtype))
            return
        workspace_size, executor = self._bind(op, raw, names, infer=False)
        exe = find_executor(executor)
        self.steps.append(_Step(executor, [self._origins.get(arg.meta.handle)
                                           for arg in exe.tensors], workspace_size))
        set_executor_repeatable(executor)

    def _bind(self, op, raw: dict[str, Any], names: dict[str, str] | None, infer: bool):
        names = dict(names or {})
        try:
            if infer:
                return op.bind(raw, infer=True)
            return phase1(op, raw)
        except AclError as exc:
            if exc.code not in (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR):
                raise
            raise self._translate(op, raw, names, exc) from exc

    def _translate(self, op, raw: dict[str, Any], names: dict[str, str],
                   exc: AclError) -> AclError:
        match = re.search(r"argument '(\w+)", exc.message)
        param = op.params[[p.name for p in op.params].index(match.group(1))] if match and \
            match.group(1) in {p.name for p in op.params} else None
        if param is None:
            return AclError(ACL_ERROR_OP_INPUT_NOT_MATCH, f"{self.op_type}: {exc.message}")
        value = raw.get(param.name)
        cann = names.get(param.name)
        if cann is None and param.is_tensor:
            items = value if isinstance(value, (list, tuple)) else [value]
            cann = ", ".join(self._names.get(v, "?") for v in items)
        cann = cann or param.name
        if param.output:
            code, what = ACL_ERROR_OP_OUTPUT_NOT_MATCH, "output"
        elif cann in self.attrs or (not param.is_tensor and cann not in self.spec.values
                                    and cann not in self.inputs):
            code, what = ACL_ERROR_OP_ATTR_NOT_MATCH, "attribute"
        else:
            code, what = ACL_ERROR_OP_INPUT_NOT_MATCH, "input"
        return AclError(code, f"{self.op_type}: {what} '{cann}' does not match "
                              f"(via {op.c_name}): {exc.message}")
