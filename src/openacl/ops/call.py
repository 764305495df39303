"""Phase 1 of an operator: resolve and validate its arguments, infer its outputs.

An operator's ``prepare(call)`` function receives a ``Call``. It reads the resolved
arguments, validates them through the helpers here (each failure is an ``AclError`` with
``ACLNN_ERR_PARAM_INVALID`` 161002 naming the operator, the argument and the value; a
missing required tensor is ``ACLNN_ERR_PARAM_NULLPTR`` 161001), declares each output's
shape and dtype with ``check_out``, sets ``call.workspace_bytes`` if it needs scratch
memory, and returns a kernel: a function of ``Views`` (phase 2) that computes with numpy
and writes its outputs.

``Call`` runs in one of two modes. ``check`` (the aclnn API): outputs are given and must
match what the operator infers. ``infer`` (one-shot helpers): outputs are absent and the
inferred ``(shape, dtype)`` is recorded so the caller can allocate them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.dtypes import DataType
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from openacl.ops import native, promotion
from openacl.ops.signature import Param
from openacl.runtime import core
from openacl.tensor import (
    AclBoolArray,
    AclFloatArray,
    AclIntArray,
    AclScalar,
    AclScalarList,
    AclTensor,
    AclTensorList,
)

MAX_DIMS = 8  # aclnn operators take tensors of rank <= 8
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # bounds of an aclIntArray element
POINTER_KINDS = frozenset({"tensor", "scalar", "int_array", "float_array", "bool_array",
                           "tensors", "scalars", "str"})  # pointers in C: None is NULL

# dtype groups operators declare support for
FLOAT_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32,
                                               np.float64))
SIGNED_DTYPES = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED_DTYPES = frozenset({np.dtype(np.uint8)})
WIDE_UNSIGNED_DTYPES = frozenset(promotion.WIDE_UNSIGNED)
INT_DTYPES = SIGNED_DTYPES | UNSIGNED_DTYPES
BOOL_DTYPES = frozenset({np.dtype(np.bool_)})
COMPLEX_DTYPES = frozenset(np.dtype(t) for t in (np.complex64, np.complex128))
REAL_DTYPES = FLOAT_DTYPES | INT_DTYPES
NUMERIC_DTYPES = REAL_DTYPES | BOOL_DTYPES
ALL_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES | WIDE_UNSIGNED_DTYPES


@dataclass
class TensorArg:
    """A tensor argument as phase 1 saw it (a snapshot of the aclTensor)."""

    name: str
    meta: AclTensor
    dtype: np.dtype
    output: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self.meta.view_dims

    @property
    def ndim(self) -> int:
        return len(self.meta.view_dims)

    @property
    def numel(self) -> int:
        return math.prod(self.meta.view_dims)


@dataclass(frozen=True)
class ScalarArg:
    """An aclScalar argument: its value and dtype."""

    value: Any
    dtype: np.dtype


Kernel = Callable[["Views"], None]


def describe(value: Any) -> str:
    """A short description of an argument value for error messages."""
    if isinstance(value, TensorArg):
        return f"tensor(shape={list(value.shape)}, dtype={value.meta.data_type.name})"
    if isinstance(value, ScalarArg):
        return f"scalar({value.value!r}, {value.dtype})"
    if isinstance(value, list) and value and isinstance(value[0], TensorArg):
        return f"[{', '.join(describe(v) for v in value)}]"
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."


class Call:
    """The resolved arguments of one phase-1 call, with validation helpers."""

    def __init__(self, op_name: str, params: Sequence[Param], raw: dict[str, Any],
                 infer: bool = False, aliases: dict[str, str] | None = None) -> None:
        self.op_name = op_name
        self.params = {p.name: p for p in params}
        self.infer = infer
        self.aliases = dict(aliases or {})
        self.workspace_bytes = 0
        self.inferred: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        self.values: dict[str, Any] = {}
        for param in params:
            self.values[param.name] = self._resolve(param, raw.get(param.name))
        self._tensors = self._collect_tensors()

    # -- argument access -------------------------------------------------------------------
    def _name(self, name: str) -> str:
        return self.aliases.get(name, name)

    def __getitem__(self, name: str) -> Any:
        return self.values[self._name(name)]

    def tensor(self, name: str) -> TensorArg:
        value = self[name]
        if not isinstance(value, TensorArg):
            raise self.fail(name, "a tensor is required here")
        return value

    def tensors(self) -> list[TensorArg]:
        """Every tensor argument (lists expanded), inputs then outputs, declaration order."""
        return self._tensors

    def _collect_tensors(self) -> list[TensorArg]:
        found: list[TensorArg] = []
        for param in self.params.values():
            value = self.values[param.name]
            items = value if isinstance(value, list) else [value]
            found.extend(v for v in items if isinstance(v, TensorArg))
        return found

    def has(self, name: str) -> bool:
        return self[name] is not None

    # -- errors ------------------------------------------------------------------------------
    def fail(self, name: str, reason: str, code: int = ACLNN_ERR_PARAM_INVALID) -> AclError:
        """An error naming the operator, argument ``name`` and its value (not raised)."""
        actual = self._name(name)
        value = self.values.get(actual)
        return AclError(code, f"aclnn{self.op_name}: argument '{actual}' = {describe(value)} "
                              f"is invalid: {reason}")

    # -- resolution ----------------------------------------------------------------------------
    def _resolve(self, param: Param, value: Any) -> Any:
        if value is None:
            if param.optional or (param.output and self.infer):
                return None
            if param.kind in POINTER_KINDS:  # a C pointer argument: NULL
                raise AclError(ACLNN_ERR_PARAM_NULLPTR,
                               f"aclnn{self.op_name}: argument '{param.name}' is null "
                               f"(a required {param.kind})")
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{self.op_name}: argument '{param.name}' = None is invalid: "
                           f"a {param.kind} is required")
        try:
            return _RESOLVERS[param.kind](self, param, value)
        except AclError as exc:
            if exc.code in (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR):
                raise
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{self.op_name}: argument '{param.name}': {exc.message}"
                           ) from exc

    def _tensor(self, param: Param, value: Any, name: str | None = None) -> TensorArg:
        meta = core.current().handles.get(value, AclTensor, name or param.name,
                                          ACLNN_ERR_PARAM_INVALID)
        if len(meta.view_dims) > MAX_DIMS:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{self.op_name}: argument '{name or param.name}' has "
                           f"{len(meta.view_dims)} dims; at most {MAX_DIMS}")
        np_dtype = dtypes.to_numpy_dtype(meta.data_type)
        if np_dtype not in ALL_DTYPES:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{self.op_name}: argument '{name or param.name}' has dtype "
                           f"{meta.data_type.name}, which no aclnn operator here computes in")
        # (dims that overflow int64 bytes never get here: create_tensor refuses them)
        # a snapshot: later changes to the user's aclTensor do not reach this call
        return TensorArg(name or param.name, copy.copy(meta), np_dtype, param.output)

    def _scalar(self, param: Param, value: Any) -> ScalarArg:
        scalar = core.current().handles.get(value, AclScalar, param.name,
                                            ACLNN_ERR_PARAM_INVALID)
        return ScalarArg(scalar.value.item(), dtypes.to_numpy_dtype(scalar.data_type))

    # -- validation helpers ------------------------------------------------------------
    def dtype(self, name: str) -> np.dtype:
        value = self[name]
        if isinstance(value, (TensorArg, ScalarArg)):
            return value.dtype
        raise self.fail(name, "has no dtype")

    def check_dtype(self, name: str, allowed: Iterable[np.dtype],
                    dtype: np.dtype | None = None) -> np.dtype:
        """Require the dtype of ``name`` (or ``dtype``, when given) to be in ``allowed``."""
        actual = self.dtype(name) if dtype is None else np.dtype(dtype)
        allowed = frozenset(allowed)
        if actual not in allowed:
            names = ", ".join(sorted(str(d) for d in allowed))
            raise self.fail(name, f"dtype {actual} is not supported (supported: {names})")
        return actual

    def broadcast(self, *names: str) -> tuple[int, ...]:
        shapes = [self.tensor(n).shape for n in names if self[n] is not None]
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            listed = ", ".join(f"{n}{list(self.tensor(n).shape)}" for n in names
                               if self[n] is not None)
            raise self.fail(names[-1], f"shapes cannot be broadcast together: {listed}") from None

    def result_type(self, *names: str) -> np.dtype:
        tensors, scalars = [], []
        for name in names:
            value = self[name]
            if isinstance(value, TensorArg):
                tensors.append((value.dtype, value.ndim))
            elif isinstance(value, ScalarArg):
                scalars.append(value.dtype)
        try:
            return promotion.result_type(tensors, scalars)
        except AclError as exc:
            raise self.fail(names[-1], exc.message) from None

    def check_out(self, name: str, shape: Sequence[int], dtype: np.dtype,
                  exact_dtype: bool = False) -> None:
        """Declare output ``name``; in check mode the given tensor must match.

        The output's shape must equal ``shape``; its dtype must be ``dtype`` when
        ``exact_dtype``, else any dtype ``dtype`` can be cast to (PyTorch's out= rule).
        """
        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        value = self[name]
        if value is None:
            if self.infer or self.params[self._name(name)].optional:
                self.inferred[self._name(name)] = (shape, dtype)
                return
            raise self.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
        out = value if isinstance(value, TensorArg) else self.tensor(name)
        if out.shape != shape:
            raise self.fail(name, f"shape must be {list(shape)}")
        if exact_dtype and out.dtype != dtype:
            raise self.fail(name, f"dtype must be {dtype}")
        if not promotion.can_cast(dtype, out.dtype):
            raise self.fail(name, f"the result dtype {dtype} cannot be cast to {out.dtype}")
        self.check_no_overlap(name, out)
        self.inferred[self._name(name)] = (shape, out.dtype)

    def check_no_overlap(self, name: str, out: TensorArg) -> None:
        """PyTorch's rule for outputs: no element written twice (a zero stride on a dim > 1)
        and no partial overlap with an input. The very same view as an input is fine (an
        in-place call); interleaved strided views are not judged (torch: "too hard")."""
        if out.numel and any(s == 0 and d > 1
                             for s, d in zip(out.meta.strides, out.shape, strict=True)):
            raise self.fail(name, "has a zero stride on a dim larger than 1: several "
                                  "elements would be written to one memory location")
        out_span = _byte_span(out)
        if out_span is None:
            return
        for other in self.tensors():
            if other is out or other.output:
                continue
            span = _byte_span(other)
            if span is None or span[1] <= out_span[0] or out_span[1] <= span[0]:
                continue
            same_view = (other.meta.data == out.meta.data and other.meta.offset ==
                         out.meta.offset and other.meta.strides == out.meta.strides and
                         other.shape == out.shape and other.dtype == out.dtype)
            if not same_view:
                raise self.fail(name, f"partly overlaps input '{other.name}' in memory: "
                                      f"write the result to separate memory")

    def check_out_list(self, name: str, shapes: Sequence[Sequence[int]],
                       dtype: np.dtype) -> None:
        """Declare tensor-list output ``name``: one tensor of ``dtype`` per shape."""
        shapes = [tuple(int(d) for d in shape) for shape in shapes]
        outs = self[name]
        if outs is None:
            if self.infer:
                self.inferred[self._name(name)] = [(shape, np.dtype(dtype)) for shape in shapes]
                return
            raise self.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
        if len(outs) != len(shapes):
            raise self.fail(name, f"must hold {len(shapes)} tensors, one per piece")
        for i, (out, shape) in enumerate(zip(outs, shapes, strict=True)):
            if out.shape != shape:
                raise self.fail(name, f"{name}[{i}] has shape {list(out.shape)}; expected "
                                      f"{list(shape)}")
            if out.dtype != dtype:
                raise self.fail(name, f"{name}[{i}] has dtype {out.dtype}; expected {dtype}")

    def scalar(self, name: str, dtype: np.dtype) -> Any:
        """A scalar argument converted to ``dtype`` (the compute dtype); it must be castable."""
        value = self[name]
        if value is None:
            return None
        if not isinstance(value, ScalarArg):
            raise self.fail(name, "a scalar is required here")
        if not promotion.can_cast(value.dtype, dtype):
            raise self.fail(name, f"a {value.dtype} scalar cannot be used with dtype {dtype}")
        if np.dtype(dtype).kind in "iu" and not isinstance(value.value, bool):
            info = np.iinfo(dtype)
            if not info.min <= int(value.value) <= info.max:
                raise self.fail(name, f"{value.value} cannot be converted to {dtype} "
                                      f"without overflow")
        return np.array(value.value).astype(promotion.compute_dtype(dtype))[()]

    def normalize_dim(self, name: str, dim: int, ndim: int) -> int:
        """A dim in ``[-ndim, ndim)`` (0-dim tensors accept -1 and 0) made non-negative."""
        limit = max(ndim, 1)
        if not -limit <= dim < limit:
            raise self.fail(name, f"dim {dim} is out of range for a {ndim}-dim tensor "
                                  f"(expected [{-limit}, {limit - 1}])")
        return dim % limit

def _array(kind: type, dtype: Any, check: Callable[[Any], bool], what: str):
    def resolve(call: Call, param: Param, value: Any) -> tuple:
        if value is None:
            return None
        if isinstance(value, (list, tuple, np.ndarray)):
            items = list(np.asarray(value).reshape(-1).tolist()) if isinstance(
                value, np.ndarray) else list(value)
            for item in items:
                if not check(item) or (dtype is np.int64 and not INT64_MIN <= item <= INT64_MAX):
                    raise AclError(ACLNN_ERR_PARAM_INVALID,
                                   f"aclnn{call.op_name}: argument '{param.name}' = {value!r} "
                                   f"is invalid: element {item!r} is not {what}")
            return tuple(np.array(items, dtype=dtype).tolist()) if items else ()
        array = core.current().handles.get(value, kind, param.name, ACLNN_ERR_PARAM_INVALID)
        return tuple(array.values.tolist())
    return resolve


def _is_int(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _is_float(item: Any) -> bool:
    return _is_int(item) or isinstance(item, (float, np.floating))


def _attr(check: Callable[[Any], bool], convert: Callable[[Any], Any], what: str):
    def resolve(call: Call, param: Param, value: Any) -> Any:
        if value is None:
            return None
        if not check(value):
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{call.op_name}: argument '{param.name}' = {value!r} is "
                           f"invalid: expected {what}")
        return convert(value)
    return resolve


def _tensor_list(call: Call, param: Param, value: Any) -> list[TensorArg] | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        handles = list(value)
    else:
        handles = [t.handle for t in core.current().handles.get(
            value, AclTensorList, param.name, ACLNN_ERR_PARAM_INVALID).tensors]
    if not handles:
        raise AclError(ACLNN_ERR_PARAM_INVALID,
                       f"aclnn{call.op_name}: argument '{param.name}' is an empty tensor list")
    return [call._tensor(param, h, f"{param.name}[{i}]") for i, h in enumerate(handles)]


def _scalar_list(call: Call, param: Param, value: Any) -> list[ScalarArg] | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [call._scalar(param, v) for v in value]
    scalars = core.current().handles.get(value, AclScalarList, param.name,
                                         ACLNN_ERR_PARAM_INVALID).scalars
    return [ScalarArg(s.value, dtypes.to_numpy_dtype(s.data_type)) for s in scalars]


def _data_type(call: Call, param: Param, value: Any) -> DataType | None:
    if value is None:
        return None
    return dtypes.to_data_type(value, param.name)


_RESOLVERS: dict[str, Callable[[Call, Param, Any], Any]] = {
    "tensor": lambda call, param, value: None if value is None else call._tensor(param, value),
    "scalar": lambda call, param, value: None if value is None else call._scalar(param, value),
    "int_array": _array(AclIntArray, np.int64, _is_int, "an integer"),
    "float_array": _array(AclFloatArray, np.float32, _is_float, "a number"),
    "bool_array": _array(AclBoolArray, np.bool_, lambda v: isinstance(v, (bool, np.bool_)),
                         "a bool"),
    "tensors": _tensor_list,
    "scalars": _scalar_list,
    "int": _attr(_is_int, int, "an integer"),
    "float": _attr(_is_float, float, "a number"),
    "bool": _attr(lambda v: isinstance(v, (bool, np.bool_)), bool, "a bool"),
    "str": _attr(lambda v: isinstance(v, str), str, "a string"),
    "dtype": _data_type,
}




def _byte_span(arg: TensorArg) -> tuple[int, int] | None:
    """The bytes a dense (contiguous) tensor occupies; None for empty, unset or strided."""
    meta = arg.meta
    if meta.data == 0 or arg.numel == 0 or not meta.is_contiguous():
        return None
    start = meta.data + meta.offset * arg.dtype.itemsize
    return start, start + arg.numel * arg.dtype.itemsize


@dataclass(frozen=True)
class Epilogue:
    """An activation a kernel applies to its output before it returns (``Views.epilogue``):
    the model engine's fusion of the in-place activation step that follows it. ``apply``
    runs that step itself, for a kernel path that cannot apply it in its tiles, so the
    output holds the standalone operator's bits either way."""

    name: str  # one of the operator's OpDef.epilogues: "relu", "hardswish", "silu"...
    alpha: float = 0.0  # the activation's parameter (leaky_relu: the negative slope)
    apply: Callable[[], None] | None = None  # the activation step's own bound kernel

    def run(self) -> None:
        """Apply it after a kernel path that could not (no ``apply``: nothing to run)."""
        if self.apply is not None:
            self.apply()


class Views(dict):
    """Phase-2 access to a call's memory: strided numpy views of every tensor argument, by
    argument name (and by the prepare function's names for in-place aliases).

    ``constant`` names the inputs whose memory the caller guarantees unchanged while these
    views live (the model engine's weights); a kernel may keep what it derives from them
    (a packed or transposed weight) in ``derived``, computed at its first run. Empty for a
    plain aclnn call: its inputs may change between launches.

    ``epilogue`` is an activation (``Epilogue``, one of the operator's ``OpDef.epilogues``)
    the kernel applies to its output before it returns, set by the model engine before the
    first call when it fuses the in-place activation that follows the step (None: none)."""

    def __init__(self, arrays: dict[str, Any], aliases: dict[str, str],
                 workspace: Any = None) -> None:
        super().__init__(arrays)
        for prepare_name, actual in aliases.items():
            if actual in arrays:
                self[prepare_name] = arrays[actual]
        self.workspace = workspace
        self.constant: frozenset[str] = frozenset()
        self.derived: dict[Any, Any] = {}
        self.epilogue: Epilogue | None = None

    def derive(self, key: Any, inputs: tuple[str, ...], make: Callable[[], Any]) -> Any:
        """``make()``, kept under ``key`` when every name in ``inputs`` is constant (see the
        class note), else computed afresh."""
        if not self.constant.issuperset(inputs):
            return make()
        value = self.derived.get(key)
        if value is None:
            value = self.derived[key] = make()
        return value

    def plan(self, key: Any, build: Callable[[], Callable[[], Any]]) -> Callable[[], Any]:
        """What a kernel does on these views, ``build()``-ed at its first call and kept:
        a views object's arrays never change (a bound kernel's, a repeatable executor's
        cached views), so the layout and dtype checks are made once and a float32 host call
        becomes one C call on the arrays themselves. A plan may keep the arrays and what
        ``derive`` gives; never the values of an input that is not constant. (``build``
        may give False, kept too: the kernel then takes its per-call path.)"""
        plan = self.derived.get(key)
        if plan is None:
            plan = self.derived[key] = build()
        return plan

    def compute(self, name: str, dtype: np.dtype) -> np.ndarray:
        """Input ``name`` converted to the compute dtype of a result of ``dtype``; an integer
        tensor is rounded to a half-precision ``dtype`` first, as CANN casts operands to the
        promoted dtype (``promotion.staged_dtype``)."""
        value = self[name]
        if not hasattr(value, "astype"):  # a list or a Python number
            value = np.asarray(value)
        elif promotion.staged_dtype(value.dtype, dtype) is not None:
            return promotion.round_through(value, dtype)
        return native.cast(value, promotion.compute_dtype(dtype))  # (F16C for float16)

    def write(self, name: str, value: Any) -> None:
        """Store ``value`` (broadcast, cast) into output ``name``."""
        target = self[name]
        if isinstance(target, list):
            raise TypeError(f"output {name} is a tensor list; use write_item")
        if target.dtype == np.float16 and native.narrowed_into(target, value):
            return
        np.copyto(target, like(target, value), casting="unsafe")

    def store(self, name: str, fn: Callable[..., Any], *operands: Any) -> None:
        """Output ``name`` = ``fn(*operands)``. A numpy ufunc writes straight into the output
        (one pass, rounding once into its dtype, overlap handled by numpy); anything else is
        computed, then written."""
        target = self[name]
        if isinstance(fn, np.ufunc):
            fn(*operands, out=target, casting="unsafe")
        else:
            np.copyto(target, like(target, fn(*operands)), casting="unsafe")

    def write_item(self, name: str, index: int, value: Any) -> None:
        target = self[name][index]
        np.copyto(target, like(target, value), casting="unsafe")


def like(target: Any, value: Any) -> Any:
    """``value`` on the device of ``target``: a host array (a kernel's constant, or a result
    computed on the host) is copied to the device when ``target`` is a device array; anything
    else is returned as it is. Device modules take no host arrays in their functions."""
    if type(value) is np.ndarray and type(target) is not np.ndarray:
        return array_module(target).asarray(value)
    return value


def as_array(value: Any) -> Any:
    """``value`` as an array of its own module: numpy and device arrays as they are, numbers
    and lists as numpy arrays (``np.asarray`` would pull a device array to the host)."""
    if type(value) is np.ndarray or hasattr(value, "__array_function__"):
        return value
    return np.asarray(value)


def array_module(array: Any) -> Any:
    """The array namespace (``xp``) of a kernel's array: numpy, or cupy for device memory."""
    if type(array) is np.ndarray or isinstance(array, np.generic):
        return np
    from openacl.runtime import core

    return core.current().backend.array_module(array)
