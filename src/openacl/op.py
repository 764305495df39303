"""Single operators by CANN op type (the aclop face): ``execute_v2("MatMul", ...)``.

An aclop call names a CANN operator type (``"Add"``, ``"MatMulV2"``, ``"SoftmaxV2"``...),
describes its tensors with TensorDescs (dims, dtype, format), passes their memory as
DataBuffers and its attributes as an aclopAttr. Here every call is lowered onto the aclnn
operator library: ``OP_TYPES`` is the one table that says, per op type, its inputs, outputs
and attributes (names and defaults from the CANN IR, ``REG_OP(...)`` in the ``*_proto.h``
files of hicann/ops-math and hicann/ops-nn) and which aclnn calls compute it.

Design note (invariants)
------------------------
* Binding (``_Program``) runs phase 1 of every aclnn call of the lowering, with tensors
  created from the descs at address 0, and makes each executor repeatable. It records, for
  every tensor of every executor, which input or output buffer it reads (views keep their
  offset and strides, so a new base address is all they need). The aclTensor, aclScalar
  handles it creates are destroyed as soon as phase 1 returns: the executors hold snapshots.
* Running (``_Program.run``) checks each DataBuffer against its desc, gives the executors
  the buffers' addresses and enqueues every aclnn call in order on one stream; workspaces are
  allocated per run and freed right after enqueueing (stream-ordered reuse, as the one-shot
  helpers do). ``execute_v2`` binds, runs once and releases; ``create_handle`` binds once and
  ``execute_with_handle`` runs it any number of times with new buffers.
* Value inputs (Slice ``offsets``/``size``, Transpose ``perm``, ReduceSum ``axes``...) decide
  shapes, so they are read on the host when binding: from ``set_tensor_const`` data when the
  desc has it, else (``execute_v2``, ``infer_shape``) from the buffer's memory at call time, as
  CANN reads host-placed inputs. ``create_handle`` has no buffers: those inputs must be const.
* Errors use the aclop codes: an unknown op type is ``ACL_ERROR_OP_NOT_FOUND`` (100024),
  wrong input/output counts or tensors ``ACL_ERROR_OP_INPUT_NOT_MATCH`` (100021) /
  ``ACL_ERROR_OP_OUTPUT_NOT_MATCH`` (100022), a bad or missing attribute
  ``ACL_ERROR_OP_ATTR_NOT_MATCH`` (100023), a buffer that does not fit its desc
  ``ACL_ERROR_INVALID_PARAM``. A failure inside an aclnn phase 1 is translated by the
  argument it names, and the aclnn message is kept.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_FORMAT_NOT_MATCH,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
    ACL_ERROR_UNSUPPORTED_DATA_TYPE,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    AclError,
)
from openacl.ops import REGISTRY
from openacl.ops.dispatch import phase1
from openacl.ops.executor import find_executor, set_executor_repeatable, set_tensor_addr
from openacl.runtime import core, memory
from openacl.runtime.stream import resolve_stream
from openacl.tensor import (
    PLAIN_FORMATS,
    TensorDesc,
    contiguous_strides,
    create_scalar,
    create_tensor,
    destroy_scalar,
    destroy_tensor,
    lookup_data_buffer,
    lookup_tensor_desc,
)

SUGGESTIONS = 6  # op types listed when an op type is unknown


# -- aclopAttr ---------------------------------------------------------------------------------
ATTR_KINDS = ("bool", "int", "float", "str", "type", "list_bool", "list_int", "list_float",
              "list_str", "list_list_int")


class OpAttr:
    """aclopAttr: attribute name -> (kind, value); kinds are ``ATTR_KINDS``."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[str, Any]] = {}
        self.handle = core.current().handles.add(self)

    def __repr__(self) -> str:
        return f"<aclopAttr {self.values!r}>"


def _bad(argument: str, value: Any, reason: str) -> AclError:
    return AclError(ACL_ERROR_INVALID_PARAM,
                    f"argument '{argument}' = {value!r} is invalid: {reason}")


def _lookup_attr(attr: Any) -> OpAttr:
    return core.current().handles.get(attr, OpAttr, "attr")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _set(attr: Any, name: Any, kind: str, value: Any) -> None:
    target = _lookup_attr(attr)
    if not isinstance(name, str) or not name:
        raise _bad("attrName", name, "expected a non-empty string")
    target.values[name] = (kind, value)


def _scalar(value: Any, check: Callable[[Any], bool], convert: Callable[[Any], Any],
            what: str) -> Any:
    if not check(value):
        raise _bad("attrValue", value, f"expected {what}")
    return convert(value)


def _list(args: tuple, check: Callable[[Any], bool], convert: Callable[[Any], Any],
          what: str) -> list:
    """The values of a list setter: ``(values)`` or pyACL's ``(num, values)``."""
    if len(args) == 1:
        values = args[0]
    elif len(args) == 2:
        num, values = args
        if not _is_int(num):
            raise _bad("numValues", num, "expected an integer")
    else:
        raise _bad("values", args, "expected (values) or (numValues, values)")
    if isinstance(values, np.ndarray):
        values = values.reshape(-1).tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise _bad("values", values, f"expected a list of {what}")
    if len(args) == 2 and int(args[0]) != len(values):
        raise _bad("numValues", args[0], f"but values has {len(values)} entries")
    for item in values:
        if not check(item):
            raise _bad("values", values, f"element {item!r} is not {what}")
    return [convert(v) for v in values]


def create_attr() -> int:
    """aclopCreateAttr: an empty attribute set; returns its handle."""
    return OpAttr().handle


def destroy_attr(attr: int) -> None:
    """aclopDestroyAttr."""
    core.current().handles.remove(_lookup_attr(attr).handle)


def set_attr_bool(attr: int, name: str, value: bool) -> None:
    _set(attr, name, "bool", _scalar(value, _is_bool, bool, "a bool"))


def set_attr_int(attr: int, name: str, value: int) -> None:
    _set(attr, name, "int", _scalar(value, _is_int, int, "an integer"))


def set_attr_float(attr: int, name: str, value: float) -> None:
    _set(attr, name, "float", _scalar(value, _is_number, float, "a number"))


def set_attr_string(attr: int, name: str, value: str) -> None:
    _set(attr, name, "str", _scalar(value, lambda v: isinstance(v, str), str, "a string"))


def set_attr_data_type(attr: int, name: str, value: Any) -> None:
    """aclopSetAttrDataType: ``value`` is an aclDataType (or its int, or a numpy dtype)."""
    _set(attr, name, "type", dtypes.to_data_type(value, "attrValue"))


def set_attr_list_bool(attr: int, name: str, *values: Any) -> None:
    """``(attr, name, values)`` or pyACL's ``(attr, name, num_values, values)``."""
    _set(attr, name, "list_bool", _list(values, _is_bool, bool, "a bool"))


def set_attr_list_int(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_int", _list(values, _is_int, int, "an integer"))


def set_attr_list_float(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_float", _list(values, _is_number, float, "a number"))


def set_attr_list_string(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_str", _list(values, lambda v: isinstance(v, str), str, "a string"))


def set_attr_list_list_int(attr: int, name: str, values: Sequence[Sequence[int]]) -> None:
    """aclopSetAttrListListInt: a list of int lists."""
    rows = _list((values,), lambda v: isinstance(v, (list, tuple, np.ndarray)), list,
                 "a list of integers")
    _set(attr, name, "list_list_int",
         [_list((row,), _is_int, int, "an integer") for row in rows])


# -- the table ------------------------------------------------------------------------------------
REQUIRED = "<required>"  # an attribute without a default (REQUIRED_ATTR)


@dataclass(frozen=True)
class AttrDef:
    """One attribute of an op type: CANN name, kind (``ATTR_KINDS``) and default."""

    name: str
    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class OpType:
    """One CANN op type and how it maps onto aclnn.

    ``inputs`` are CANN's input names in IR order: ``"bias?"`` is an optional input,
    ``"x*"`` a dynamic one (one or more). ``values`` are the inputs read on the host.
    ``lower(b)`` issues the aclnn calls through the ``_Lowering`` ``b``. ``rule``, where
    given, returns ``{output: (shape, DataType)}`` for lowerings that write in place.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[AttrDef, ...]
    lower: Callable[[_Lowering], None]
    values: frozenset[str] = frozenset()
    rule: Callable[[_Lowering], dict[str, tuple[tuple[int, ...], DataType]]] | None = None

    def attr(self, name: str) -> AttrDef | None:
        return next((a for a in self.attrs if a.name == name), None)


OP_TYPES: dict[str, OpType] = {}


def _define(name: str, inputs: str, outputs: str, lower: Callable[[_Lowering], None],
            attrs: Sequence[AttrDef] = (), values: str = "", rule=None) -> None:
    if name in OP_TYPES:
        raise ValueError(f"op type {name} is defined twice")
    OP_TYPES[name] = OpType(name, tuple(inputs.split()), tuple(outputs.split()), tuple(attrs),
                            lower, frozenset(values.split()), rule)


# -- binding ---------------------------------------------------------------------------------
@dataclass
class _Operand:
    """One input or output as the call described it (a snapshot of its desc)."""

    name: str  # CANN name; dynamic inputs are x0, x1...
    origin: tuple[str, int]  # ("in", i) or ("out", j): which buffer holds it
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
        self.values: dict[str, tuple[int, ...]] = {}
        self.steps: list[_Step] = []
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

    def _tensor(self, operand: _Operand) -> int:
        if operand.handle is None:
            operand.handle = self._create(operand, operand.dims, None, 0)
        return operand.handle

    def view(self, name: str, dims: Sequence[int], strides: Sequence[int] | None = None,
             offset: int = 0) -> int:
        """A strided view (element strides, element offset) of input ``name``'s buffer."""
        return self._create(self.inputs[name], dims, strides, offset)

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
            pending = {param: value.name for param, value in raw.items()
                       if isinstance(value, _Pending)}
            if not pending:
                return
            raw = {k: None if isinstance(v, _Pending) else v for k, v in raw.items()}
            call, _ = self._bind(op, raw, names, infer=True)
            for param, target in pending.items():
                if param in call.inferred and target not in self.inferred:
                    shape, dtype = call.inferred[param]
                    self.inferred[target] = (tuple(shape), dtypes.from_numpy_dtype(dtype))
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


def _unary(aclnn: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call(aclnn, self=b.x("x"), out=b.y("y"))
    return lower


def _binary(aclnn: str, **extra: Any) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call(aclnn, self=b.x("x1"), other=b.x("x2"), out=b.y("y"), **extra)
    return lower


def _pow(b: _Lowering) -> None:
    b.call("PowTensorTensor", self=b.x("x"), exponent=b.x("exponent"), out=b.y("y"))


def _integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iub"


def _div(b: _Lowering) -> None:
    """Div / RealDiv: true division for floats; integers truncate, as TensorFlow's Div."""
    if _integer(b.operand("x1").dtype) and _integer(b.operand("x2").dtype):
        b.call("DivMod", self=b.x("x1"), other=b.x("x2"), mode=1, out=b.y("y"))
    else:
        b.call("Div", self=b.x("x1"), other=b.x("x2"), out=b.y("y"))


# -- lowerings with attributes ---------------------------------------------------------------
def _exp_log(aclnn: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.only_default("base", "scale", "shift")
        _unary(aclnn)(b)
    return lower


def _transposed(b: _Lowering, name: str, transpose: bool) -> int:
    """Input ``name`` with its last two dims swapped when ``transpose`` (a strided view)."""
    dims = b.shape(name)
    if not transpose:
        return b.x(name)
    strides = list(contiguous_strides(dims))
    view = list(dims)
    view[-1], view[-2] = view[-2], view[-1]
    strides[-1], strides[-2] = strides[-2], strides[-1]
    return b.view(name, view, strides)


def _matmul(first: str, second: str, batched: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        for name in ("x1", "x2"):
            rank = len(b.shape(name))
            if (rank != 2) if not batched else (rank < 2):
                raise b.fail_input(name, f"has {rank} dims {list(b.shape(name))}; "
                                         f"{b.op_type} takes {'2' if not batched else '>= 2'}")
        if b.has("offset_w"):
            raise b.fail_input("offset_w", "quantized matmul (offset_w) is not supported")
        if b.spec.attr("offset_x") is not None:
            b.only_default("offset_x")
        b.call("Matmul", {"self": "x1", "mat2": "x2"},
               self=_transposed(b, "x1", b.attr(first)),
               mat2=_transposed(b, "x2", b.attr(second)), out=b.y("y"), cubeMathType=0)
        if b.has("bias") and not b.infer:
            b.call("InplaceAdd", selfRef=b.y("y"), other=b.x("bias"), alpha=None)
    return lower


def _softmax(aclnn: str, x: str, y: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        axes = b.attr("axes")
        if len(axes) != 1:
            raise b.fail_attr("axes", "exactly one axis is supported (aclnn softmax takes one "
                                      "dim)")
        b.call(aclnn, {"dim": "axes"}, self=b.x(x), dim=axes[0], out=b.y(y))
    return lower


def _layer_norm(b: _Lowering) -> None:
    """LayerNorm: y, mean and variance over the dims from begin_norm_axis on (mean and
    variance keep them as 1, CANN's infershape); gamma/beta cover the dims from
    begin_params_axis on and are broadcast over the rest."""
    shape = b.shape("x")
    rank = len(shape)
    norm = b.axis("begin_norm_axis", b.attr("begin_norm_axis"), rank)
    params = b.axis("begin_params_axis", b.attr("begin_params_axis"), rank)
    if params < norm:
        raise b.fail_attr("begin_params_axis", f"must not come before begin_norm_axis {norm}")
    normalized = shape[norm:]
    weights = []
    for name in ("gamma", "beta"):
        if b.shape(name) != shape[params:]:
            raise b.fail_input(name, f"shape {list(b.shape(name))} must be x's dims from "
                                     f"begin_params_axis: {list(shape[params:])}")
        if params == norm:
            weights.append(b.x(name))
        else:  # broadcast over the leading normalized dims with zero strides
            strides = [0] * (params - norm) + list(contiguous_strides(shape[params:]))
            weights.append(b.view(name, normalized, strides))
    b.call("LayerNorm", {"normalizedShape": "begin_norm_axis", "eps": "epsilon"},
           input=b.x("x"), normalizedShape=list(normalized), weightOptional=weights[0],
           biasOptional=weights[1], eps=b.attr("epsilon"), out=b.y("y"),
           meanOutOptional=b.y("mean"), rstdOutOptional=None)
    b.call("VarCorrection", self=b.x("x"), dim=list(range(norm, rank)), correction=0,
           keepdim=True, out=b.y("variance"))


def _cast(b: _Lowering) -> None:
    try:
        target = dtypes.to_data_type(b.attr("dst_type"), "dst_type")
    except AclError:
        raise b.fail_attr("dst_type", "is not an aclDataType") from None
    if not b.infer and b.outputs["y"].data_type != target:
        raise b.fail_output("y", f"dtype {b.outputs['y'].data_type.name} differs from "
                                 f"dst_type {target.name}")
    b.call("Cast", {"dtype": "dst_type"}, self=b.x("x"), dtype=target, out=b.y("y"))


def _copy_of(b: _Lowering, view: int) -> None:
    """Output y = ``view`` of input x (a copy through aclnnCast to x's own dtype)."""
    b.call("Cast", {"self": "x"}, self=view, dtype=b.operand("x").data_type,
           out=b.y("y"))


def _slice_from(offsets_name: str, size_name: str, from_inputs: bool
                ) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        shape = b.shape("x")
        get = b.values.__getitem__ if from_inputs else b.attr
        fail = b.fail_input if from_inputs else b.fail_attr
        offsets, size = list(get(offsets_name)), list(get(size_name))
        for name, value in ((offsets_name, offsets), (size_name, size)):
            if len(value) != len(shape):
                raise fail(name, f"has {len(value)} entries; x has {len(shape)} dims")
        dims = []
        for k, (start, count, extent) in enumerate(zip(offsets, size, shape, strict=True)):
            if not 0 <= start <= extent:
                raise fail(offsets_name, f"entry {k} = {start} is outside dim {k} of size "
                                         f"{extent}")
            count = extent - start if count == -1 else count
            if count < 0 or start + count > extent:
                raise fail(size_name, f"entry {k} = {size[k]} runs past dim {k} of size "
                                      f"{extent} from offset {start}")
            dims.append(count)
        strides = contiguous_strides(shape)
        offset = sum(s * o for s, o in zip(strides, offsets, strict=True)) if all(dims) else 0
        _copy_of(b, b.view("x", dims, strides, offset))
    return lower


def _reshaped(b: _Lowering, dims: Sequence[int]) -> None:
    if math.prod(dims) != math.prod(b.shape("x")):
        raise b.fail_output("y", f"shape {list(dims)} does not hold the "
                                 f"{math.prod(b.shape('x'))} elements of x")
    _copy_of(b, b.view("x", dims))


def _reshape(b: _Lowering) -> None:
    b.only_default("axis", "num_axes")
    shape, target = b.shape("x"), list(b.values["shape"])
    target = [shape[k] if d == 0 and k < len(shape) else d for k, d in enumerate(target)]
    if target.count(-1) > 1:
        raise b.fail_input("shape", f"{target} has more than one -1")
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(shape) // known if known else 0
    _reshaped(b, target)


def _squeeze(b: _Lowering) -> None:
    shape = b.shape("x")
    axes = {b.axis("axis", a, len(shape)) for a in b.attr("axis")}
    for a in axes:
        if shape[a] != 1:
            raise b.fail_attr("axis", f"dim {a} has size {shape[a]}, not 1")
    keep = [d for k, d in enumerate(shape) if (k not in axes if axes else d != 1)]
    _reshaped(b, keep)


def _unsqueeze(b: _Lowering) -> None:
    dims = list(b.shape("x"))
    rank = len(dims) + len(b.attr("axes"))
    for a in sorted(b.axis("axes", a, rank) for a in b.attr("axes")):
        dims.insert(a, 1)
    _reshaped(b, dims)


def _concat(dim_from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        pieces = b.inputs["x"]
        count = b.attrs.get("N")
        if count is not None and count != len(pieces) and "N" in b.explicit:
            raise b.fail_attr("N", f"but {len(pieces)} x inputs were given")
        if dim_from_input:
            values = b.values["concat_dim"]
            if len(values) != 1:
                raise b.fail_input("concat_dim", f"must hold one value, not {list(values)}")
            dim = values[0]
        else:
            dim = b.attr("concat_dim")
        b.call("Cat", {"dim": "concat_dim"}, tensors=b.xs("x"), dim=dim, out=b.y("y"))
    return lower


def _transpose(from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        perm = b.values["perm"] if from_input else b.attr("perm")
        b.call("Permute", {"dims": "perm"}, self=b.x("x"), dims=list(perm),
               out=b.y("y"))
    return lower


REDUCTIONS = {"Sum": ("ReduceSum", "dims", "keepDims"), "Mean": ("Mean", "dim", "keepDim"),
              "Max": ("Amax", "dim", "keepDim"), "Min": ("Amin", "dim", "keepDim"),
              "All": ("All", "dim", "keepdim"), "Any": ("Any", "dim", "keepdim")}


def _reduce(kind: str, axes_from_input: bool) -> Callable[[_Lowering], None]:
    aclnn, dims_arg, keep_arg = REDUCTIONS[kind]

    def lower(b: _Lowering) -> None:
        axes = list(b.values["axes"] if axes_from_input else b.attr("axes"))
        if not axes and b.attrs.get("noop_with_empty_axes", False):
            _copy_of(b, b.x("x"))  # empty axes with noop_with_empty_axes: no reduction
            return
        extra = {"dtype": None} if aclnn in ("ReduceSum", "Mean") else {}
        b.call(aclnn, {dims_arg: "axes", keep_arg: "keep_dims"}, self=b.x("x"),
               **{dims_arg: axes, keep_arg: b.attr("keep_dims")}, **extra, out=b.y("y"))
    return lower


def _arg_extremum(aclnn: str, from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        if from_input:
            values = b.values["dimension"]
            if len(values) != 1:
                raise b.fail_input("dimension", f"must hold one value, not {list(values)}")
            dim = values[0]
        else:
            dim = b.attr("dimension")
        wanted = dtypes.to_data_type(b.attr("dtype"), "dtype")
        if wanted not in (DataType.ACL_INT32, DataType.ACL_INT64):
            raise b.fail_attr("dtype", "must be ACL_INT32 or ACL_INT64")
        if not b.infer and b.outputs["y"].data_type != wanted:
            raise b.fail_output("y", f"dtype {b.outputs['y'].data_type.name} differs from "
                                     f"the dtype attribute {wanted.name}")
        b.infer_dtypes["y"] = wanted
        b.call(aclnn, {"dim": "dimension"}, self=b.x("x"), dim=dim, keepdim=False,
               out=b.y("y"))
    return lower


def _select(condition: str, first: str, second: str, out: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call("SWhere", condition=b.x(condition), self=b.x(first), other=b.x(second),
               out=b.y(out))
    return lower


def _fill(b: _Lowering) -> None:
    b.call("Expand", {"size": "dims"}, self=b.x("value"), size=list(b.values["dims"]),
           out=b.y("y"))


def _expand(from_input: bool) -> Callable[[_Lowering], None]:
    """Expand (ONNX): the output is the broadcast of x's shape and ``shape``."""
    def lower(b: _Lowering) -> None:
        shape = list(b.values["shape"] if from_input else b.attr("shape"))
        try:
            target = np.broadcast_shapes(tuple(b.shape("x")), tuple(shape))
        except ValueError:
            reason = f"{shape} does not broadcast with x's shape {list(b.shape('x'))}"
            raise (b.fail_input("shape", reason) if from_input
                   else b.fail_attr("shape", reason)) from None
        b.call("Expand", {"size": "shape"}, self=b.x("x"), size=list(target),
               out=b.y("y"))
    return lower


def _like_rule(b: _Lowering) -> dict[str, tuple[tuple[int, ...], DataType]]:
    return {"y": (b.shape("x"), b.operand("x").data_type)}


def _zeros_like(b: _Lowering) -> None:
    b.call("InplaceZero", selfRef=b.y("y"))


def _ones_like(b: _Lowering) -> None:
    b.call("InplaceFillScalar", selfRef=b.y("y"), value=b.scalar(1, DataType.ACL_INT64))


def _scalar_attrs(aclnn: str, **mapping: str) -> Callable[[_Lowering], None]:
    """A unary aclnn op whose aclScalar arguments come from float attributes."""
    def lower(b: _Lowering) -> None:
        scalars = {param: b.scalar(b.attr(attr)) for param, attr in mapping.items()}
        b.call(aclnn, dict(mapping), self=b.x("x"), out=b.y("y"), **scalars)
    return lower


def _softplus(b: _Lowering) -> None:
    """Softplus: log(1 + exp(x)), aclnnSoftplus with beta 1 and its default threshold."""
    b.call("Softplus", self=b.x("x"), beta=b.scalar(1.0), threshold=b.scalar(20.0),
           out=b.y("y"))


def _round(b: _Lowering) -> None:
    b.only_default("decimals")
    _unary("Round")(b)


def _clip(b: _Lowering) -> None:
    b.call("ClampTensor", self=b.x("x"), clipValueMin=b.x("clip_value_min"),
           clipValueMax=b.x("clip_value_max"), out=b.y("y"))


def _square(b: _Lowering) -> None:
    b.call("Mul", self=b.x("x"), other=b.x("x"), out=b.y("y"))


def _one_hot(b: _Lowering) -> None:
    depth = b.values["depth"]
    if len(depth) != 1:
        raise b.fail_input("depth", f"must hold one value, not {list(depth)}")
    b.call("OneHot", {"numClasses": "depth"}, self=b.x("x"), numClasses=depth[0],
           onValue=b.x("on_value"), offValue=b.x("off_value"), axis=b.attr("axis"),
           out=b.y("y"))


def _cumsum(b: _Lowering) -> None:
    b.only_default("exclusive", "reverse")
    axis = b.values["axis"]
    if len(axis) != 1:
        raise b.fail_input("axis", f"must hold one value, not {list(axis)}")
    b.call("Cumsum", {"dim": "axis"}, self=b.x("x"), dim=axis[0], dtype=None,
           out=b.y("y"))


def _identity(b: _Lowering) -> None:
    _copy_of(b, b.x("x"))


# -- the table: names verified against CANN's REG_OP definitions (see the module docstring) ----
def _attr(name: str, kind: str, default: Any = REQUIRED) -> AttrDef:
    return AttrDef(name, kind, default)


_EXP_LOG_ATTRS = (_attr("base", "float", -1.0), _attr("scale", "float", 1.0),
                  _attr("shift", "float", 0.0))
_KEEP = _attr("keep_dims", "bool", False)

for _name, _aclnn in (("Add", "Add"), ("AddV2", "Add"), ("Sub", "Sub"), ("Mul", "Mul"),
                      ("Maximum", "Maximum"), ("Minimum", "Minimum"),
                      ("Less", "LtTensor"), ("Greater", "GtTensor"), ("Equal", "EqTensor"),
                      ("LessEqual", "LeTensor"), ("GreaterEqual", "GeTensor"),
                      ("NotEqual", "NeTensor"), ("LogicalAnd", "LogicalAnd"),
                      ("LogicalOr", "LogicalOr"), ("FloorMod", "RemainderTensorTensor"),
                      ("Mod", "FmodTensor")):
    _define(_name, "x1 x2", "y", _binary(_aclnn))
_define("FloorDiv", "x1 x2", "y", _binary("DivMod", mode=2))
_define("RealDiv", "x1 x2", "y", _div)
_define("Div", "x1 x2", "y", _div)
_define("Pow", "x exponent", "y", _pow)
for _name, _aclnn in (("Neg", "Neg"), ("Abs", "Abs"), ("Sqrt", "Sqrt"), ("Rsqrt", "Rsqrt"),
                      ("Reciprocal", "Reciprocal"), ("Tanh", "Tanh"), ("Sigmoid", "Sigmoid"),
                      ("Relu", "Relu"), ("Gelu", "Gelu"), ("Erf", "Erf"), ("Sin", "Sin"),
                      ("Cos", "Cos"), ("Floor", "Floor"), ("Ceil", "Ceil"), ("Sign", "Sign"),
                      ("Mish", "Mish"),
                      ("LogicalNot", "LogicalNot")):
    _define(_name, "x", "y", _unary(_aclnn))
_define("Exp", "x", "y", _exp_log("Exp"), _EXP_LOG_ATTRS)
_define("Log", "x", "y", _exp_log("Log"), _EXP_LOG_ATTRS)
_define("Round", "x", "y", _round, (_attr("decimals", "int", 0),))
_define("Square", "x", "y", _square)
_define("Softplus", "x", "y", _softplus)
_define("LeakyRelu", "x", "y", _scalar_attrs("LeakyRelu", negativeSlope="negative_slope"),
        (_attr("negative_slope", "float", 0.0),))
_define("Elu", "x", "y", _scalar_attrs("Elu", alpha="alpha", scale="scale",
                                       inputScale="input_scale"),
        (_attr("alpha", "float", 1.0), _attr("scale", "float", 1.0),
         _attr("input_scale", "float", 1.0)))
_define("ClipByValue", "x clip_value_min clip_value_max", "y", _clip)
_define("MatMul", "x1 x2 bias?", "y", _matmul("transpose_x1", "transpose_x2", False),
        (_attr("transpose_x1", "bool", False), _attr("transpose_x2", "bool", False)))
_define("MatMulV2", "x1 x2 bias? offset_w?", "y",
        _matmul("transpose_x1", "transpose_x2", False),
        (_attr("transpose_x1", "bool", False), _attr("transpose_x2", "bool", False),
         _attr("offset_x", "int", 0)))
_define("BatchMatMul", "x1 x2", "y", _matmul("adj_x1", "adj_x2", True),
        (_attr("adj_x1", "bool", False), _attr("adj_x2", "bool", False)))
_define("BatchMatMulV2", "x1 x2 bias? offset_w?", "y", _matmul("adj_x1", "adj_x2", True),
        (_attr("adj_x1", "bool", False), _attr("adj_x2", "bool", False),
         _attr("offset_x", "int", 0)))
_define("SoftmaxV2", "x", "y", _softmax("Softmax", "x", "y"),
        (_attr("axes", "list_int", [-1]), _attr("half_to_float", "bool", False)))
_define("LogSoftmaxV2", "logits", "logsoftmax", _softmax("LogSoftmax", "logits", "logsoftmax"),
        (_attr("axes", "list_int", [-1]),))
_define("LayerNorm", "x gamma beta", "y mean variance", _layer_norm,
        (_attr("begin_norm_axis", "int", 0), _attr("begin_params_axis", "int", 0),
         _attr("epsilon", "float", 1e-7)))
_define("Cast", "x", "y", _cast, (_attr("dst_type", "int"),))
_define("Slice", "x offsets size", "y", _slice_from("offsets", "size", True),
        values="offsets size")
_define("SliceD", "x", "y", _slice_from("offsets", "size", False),
        (_attr("offsets", "list_int"), _attr("size", "list_int")))
_define("ConcatD", "x*", "y", _concat(False),
        (_attr("concat_dim", "int"), _attr("N", "int", 1)))
_define("ConcatV2D", "x*", "y", _concat(False),
        (_attr("concat_dim", "int"), _attr("N", "int", 1)))
_define("ConcatV2", "x* concat_dim", "y", _concat(True), (_attr("N", "int", 1),),
        values="concat_dim")
_define("Concat", "concat_dim x*", "y", _concat(True), (_attr("N", "int", 1),),
        values="concat_dim")
_define("Transpose", "x perm", "y", _transpose(True), values="perm")
_define("TransposeD", "x", "y", _transpose(False), (_attr("perm", "list_int"),))
for _kind in ("Sum", "Max", "Min"):
    _define(f"Reduce{_kind}D", "x", "y", _reduce(_kind, False),
            (_attr("axes", "list_int"), _KEEP))
_define("ReduceMeanD", "x", "y", _reduce("Mean", False),
        (_attr("axes", "list_int"), _KEEP, _attr("noop_with_empty_axes", "bool", False)))
for _kind in ("Sum", "Mean", "Max", "Min"):
    _define(f"Reduce{_kind}", "x axes", "y", _reduce(_kind, True),
            (_KEEP, _attr("noop_with_empty_axes", "bool", True)), values="axes")
for _kind in ("All", "Any"):
    _define(f"Reduce{_kind}", "x axes", "y", _reduce(_kind, True), (_KEEP,), values="axes")
_define("ArgMaxD", "x", "y", _arg_extremum("ArgMax", False),
        (_attr("dimension", "int"), _attr("dtype", "type", DataType.ACL_INT64)))
_define("ArgMaxV2", "x dimension", "y", _arg_extremum("ArgMax", True),
        (_attr("dtype", "type", DataType.ACL_INT64),), values="dimension")
_define("ArgMin", "x dimension", "y", _arg_extremum("ArgMin", True),
        (_attr("dtype", "type", DataType.ACL_INT64),), values="dimension")
_define("Select", "condition x1 x2", "y", _select("condition", "x1", "x2", "y"))
_define("SelectV2", "condition then else", "result",
        _select("condition", "then", "else", "result"))
_define("Fill", "dims value", "y", _fill, values="dims")
_define("ZerosLike", "x", "y", _zeros_like, rule=_like_rule)
_define("OnesLike", "x", "y", _ones_like, rule=_like_rule)
_define("ExpandD", "x", "y", _expand(False), (_attr("shape", "list_int"),))
_define("Expand", "x shape", "y", _expand(True), values="shape")
_define("BroadcastTo", "x shape", "y", _expand(True), values="shape")
_define("Identity", "x", "y", _identity)
_define("Reshape", "x shape", "y", _reshape,
        (_attr("axis", "int", 0), _attr("num_axes", "int", -1)), values="shape")
_define("Squeeze", "x", "y", _squeeze, (_attr("axis", "list_int", []),))
_define("Unsqueeze", "x", "y", _unsqueeze, (_attr("axes", "list_int", []),))
_define("OneHot", "x depth on_value off_value", "y", _one_hot, (_attr("axis", "int", -1),),
        values="depth")
_define("Cumsum", "x axis", "y", _cumsum,
        (_attr("exclusive", "bool", False), _attr("reverse", "bool", False)), values="axis")
del _name, _aclnn, _kind

ATTR_KIND_NAMES = {"bool": "Bool", "int": "Int", "float": "Float", "str": "String",
                   "type": "Type", "list_bool": "ListBool", "list_int": "ListInt",
                   "list_float": "ListFloat", "list_str": "ListString",
                   "list_list_int": "ListListInt"}
COMPATIBLE_KINDS = {"int": {"type"}, "type": {"int"}}  # dst_type is an Int holding a DataType


# -- resolving a call ---------------------------------------------------------------------------
def _spec(op_type: Any) -> OpType:
    if not isinstance(op_type, str) or not op_type:
        raise _bad("opType", op_type, "expected a non-empty op type name")
    spec = OP_TYPES.get(op_type) or _custom_spec(op_type)
    if spec is None:
        lowered = {name.lower(): name for name in OP_TYPES}
        near = ([lowered[op_type.lower()]] if op_type.lower() in lowered else []) + \
            difflib.get_close_matches(op_type, list(OP_TYPES), n=SUGGESTIONS, cutoff=0.5)
        near = list(dict.fromkeys(near))[:SUGGESTIONS]
        hint = f"; near it: {', '.join(near)}" if near else ""
        raise AclError(ACL_ERROR_OP_NOT_FOUND,
                       f"op type '{op_type}' is not a single operator OpenACL can run "
                       f"({len(OP_TYPES)} are: see openacl.op.OP_TYPES){hint}")
    return spec


CUSTOM_ATTR_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str",
                     "list_int": "list_int", "list_float": "list_float",
                     "list_bool": "list_bool"}  # custom OpDef attr kind -> aclop attr kind


def _custom_spec(op_type: str) -> OpType | None:
    """A registered custom operator run by name: its declaration is its IR, and its aclnn
    operator (same name, same argument names) computes it."""
    definition = REGISTRY.get(op_type)
    declaration = getattr(definition, "ir", None)
    if declaration is None:
        return None
    suffix = {"optional": "?", "dynamic": "*"}
    inputs = tuple(p.name + suffix.get(p.kind, "") for p in declaration.inputs)
    outputs = tuple(p.name for p in declaration.outputs)
    attrs = tuple(AttrDef(a.name, CUSTOM_ATTR_KINDS[a.kind],
                          REQUIRED if a.required else a.default) for a in declaration.attrs)

    def lower(b: _Lowering) -> None:
        raw: dict[str, Any] = {}
        for param in declaration.inputs:
            if param.kind == "dynamic":
                raw[param.name] = b.xs(param.name)
            elif b.has(param.name):
                raw[param.name] = b.x(param.name)
        raw.update({a.name: b.attr(a.name) for a in declaration.attrs})
        raw.update({name: b.y(name) for name in outputs})
        b.call(op_type, **raw)

    return OpType(op_type, inputs, outputs, attrs, lower)


def _resolve_attrs(spec: OpType, attr: Any) -> tuple[dict[str, Any], set[str]]:
    given = {} if attr is None or attr == 0 else dict(_lookup_attr(attr).values)  # 0: NULL
    resolved, explicit = {}, set(given)
    for name, (kind, value) in given.items():
        definition = spec.attr(name)
        if definition is None:
            known = ", ".join(a.name for a in spec.attrs) or "none"
            raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                           f"{spec.name}: attribute '{name}' is not an attribute of "
                           f"{spec.name} (its attributes: {known})")
        if kind != definition.kind and kind not in COMPATIBLE_KINDS.get(definition.kind, ()):
            raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                           f"{spec.name}: attribute '{name}' is {ATTR_KIND_NAMES[definition.kind]}"
                           f" in CANN's definition but was set as {ATTR_KIND_NAMES[kind]} "
                           f"({value!r})")
        resolved[name] = int(value) if definition.kind == "int" else value
    for definition in spec.attrs:
        if definition.name not in resolved:
            if definition.default is REQUIRED:
                raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                               f"{spec.name}: required attribute '{definition.name}' "
                               f"({ATTR_KIND_NAMES[definition.kind]}) is not set")
            default = definition.default
            resolved[definition.name] = list(default) if isinstance(default, list) else default
    return resolved, explicit


def _arity(spec: OpType) -> str:
    return ", ".join(f"[{n[:-1]}]" if n.endswith("?") else (f"{n[:-1]}..." if n.endswith("*")
                                                           else n) for n in spec.inputs)


def _desc(desc: Any, argument: str) -> TensorDesc:
    try:
        return lookup_tensor_desc(desc, argument)
    except AclError as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM, exc.message) from None


def _operand(spec: OpType, name: str, origin: tuple[str, int], desc: TensorDesc,
             argument: str, concrete: bool) -> _Operand:
    if desc.format not in PLAIN_FORMATS:
        raise AclError(ACL_ERROR_FORMAT_NOT_MATCH,
                       f"{spec.name}: {argument} ('{name}') has format {desc.format.name}; "
                       f"only plain formats (ND, NCHW, NHWC...) are supported")
    try:
        dtypes.to_numpy_dtype(desc.data_type)
    except AclError:
        raise AclError(ACL_ERROR_UNSUPPORTED_DATA_TYPE,
                       f"{spec.name}: {argument} ('{name}') has data type "
                       f"{desc.data_type.name}, which cannot be computed here") from None
    if concrete and any(d < 0 for d in desc.dims):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"{spec.name}: {argument} ('{name}') has unknown dims "
                       f"{list(desc.dims)}; running an operator needs every dim")
    return _Operand(name, origin, desc.data_type, tuple(desc.dims), desc.format,
                    desc.const_data)


def _bind_inputs(spec: OpType, descs: Sequence[Any], concrete: bool) -> dict[str, Any]:
    if descs is None or isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad("inputDesc", descs, "expected a list of tensor desc handles")
    found = [_desc(d, f"inputDesc[{i}]") for i, d in enumerate(descs)]
    names = list(spec.inputs)
    dynamic = next((n for n in names if n.endswith("*")), None)
    required = [n for n in names if not n.endswith(("?", "*"))]
    if dynamic is not None:
        ok = len(found) >= len(required) + 1
    else:
        ok = len(required) <= len(found) <= len(names)
    if not ok:
        raise AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                       f"{spec.name} takes inputs ({_arity(spec)}), but {len(found)} input "
                       f"descs were given")
    inputs: dict[str, Any] = {}
    position = 0
    for name in names:
        if name.endswith("*"):
            count = len(found) - (len(names) - 1)
            base = name[:-1]
            inputs[base] = [_operand(spec, f"{base}{k}", ("in", position + k),
                                     found[position + k], f"inputDesc[{position + k}]",
                                     concrete) for k in range(count)]
            position += count
            continue
        base = name.rstrip("?")
        if position >= len(found) or (name.endswith("?") and found[position].data_type
                                      == DataType.ACL_DT_UNDEFINED):
            inputs[base] = None  # an absent optional input
        else:
            inputs[base] = _operand(spec, base, ("in", position), found[position],
                                    f"inputDesc[{position}]", concrete)
        position += 1
    return inputs


def _bind_outputs(spec: OpType, descs: Sequence[Any] | None, count: int | None,
                  concrete: bool) -> dict[str, _Operand] | None:
    if descs is None:
        if count is not None and count != len(spec.outputs):
            raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                           f"{spec.name} has {len(spec.outputs)} outputs "
                           f"({', '.join(spec.outputs)}), but numOutputs is {count}")
        return None
    if isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad("outputDesc", descs, "expected a list of tensor desc handles")
    if len(descs) != len(spec.outputs):
        raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                       f"{spec.name} has {len(spec.outputs)} outputs "
                       f"({', '.join(spec.outputs)}), but {len(descs)} output descs were given")
    return {name: _operand(spec, name, ("out", j), _desc(d, f"outputDesc[{j}]"),
                           f"outputDesc[{j}]", concrete)
            for j, (name, d) in enumerate(zip(spec.outputs, descs, strict=True))}


def _read_values(b: _Lowering, buffers: Sequence[Any] | None) -> None:
    """Read the value inputs (shape-deciding) on the host: const data, else the buffer."""
    for name in sorted(b.spec.values):
        operand = b.inputs[name]
        if operand.dtype.kind not in "iu":
            raise b.fail_input(name, f"must be an integer tensor, not "
                                     f"{operand.data_type.name}")
        count = math.prod(operand.dims)
        nbytes = count * operand.dtype.itemsize
        if operand.const is not None:
            raw = operand.const
        elif buffers is not None:
            buffer = lookup_data_buffer(buffers[operand.origin[1]],
                                        f"inputs[{operand.origin[1]}]")
            if buffer.size < nbytes:
                raise b.fail_input(name, f"its buffer holds {buffer.size} bytes; the desc "
                                         f"needs {nbytes}")
            if not nbytes:
                raw = b""
            else:
                region, start = core.current().pointers.resolve(
                    buffer.data, nbytes, f"inputs[{operand.origin[1]}]")
                raw = bytes(np.asarray(region.view(start, nbytes)))
        else:
            raise b.fail_input(name, "its value decides the output shape, so its desc must "
                                     "be made constant with set_tensor_const (a handle is "
                                     "bound before any buffer exists)")
        if len(raw) < nbytes:
            raise b.fail_input(name, f"its const data holds {len(raw)} bytes; the desc "
                                     f"needs {nbytes}")
        b.values[name] = tuple(int(v) for v in np.frombuffer(raw[:nbytes], operand.dtype))


class _Program:
    """A bound op call: its aclnn executors and where each of their tensors lives."""

    def __init__(self, op_type: Any, input_desc: Sequence[Any], output_desc: Sequence[Any],
                 attr: Any, value_buffers: Sequence[Any] | None) -> None:
        spec = _spec(op_type)
        inputs = _bind_inputs(spec, input_desc, concrete=True)
        outputs = _bind_outputs(spec, output_desc, None, concrete=True)
        attrs, explicit = _resolve_attrs(spec, attr)
        b = _Lowering(spec, inputs, outputs, attrs, infer=False)
        b.explicit = explicit
        self.spec = spec
        self.num_inputs = len(input_desc)
        self.in_bytes = self._bytes(inputs, len(input_desc))
        self.out_bytes = [math.prod(o.dims) * o.dtype.itemsize for o in outputs.values()]
        self.steps: list[_Step] = []
        self._run_lock = threading.Lock()  # addresses set + launch is one step per run
        try:
            _read_values(b, value_buffers)
            if spec.rule is not None:
                _check_rule(b, spec.rule(b))
            spec.lower(b)
        except BaseException:
            for step in b.steps:
                find_executor(step.executor).release()
            raise
        finally:
            b.release_temporaries()
        self.steps = b.steps

    @staticmethod
    def _bytes(inputs: dict[str, Any], count: int) -> list[int]:
        sizes = [0] * count
        for value in inputs.values():
            for operand in value if isinstance(value, list) else [value]:
                if operand is not None:
                    sizes[operand.origin[1]] = math.prod(operand.dims) * operand.dtype.itemsize
        return sizes

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], stream: Any) -> None:
        addresses = {"in": self._addresses("inputs", inputs, self.in_bytes),
                     "out": self._addresses("outputs", outputs, self.out_bytes)}
        target = resolve_stream(stream)
        with self._run_lock:  # two threads running one handle must not mix their buffers
            for step in self.steps:
                for index, source in enumerate(step.sources):
                    if source is not None:
                        set_tensor_addr(step.executor, index, None,
                                        addresses[source[0]][source[1]])
            for step in self.steps:
                workspace = memory.malloc(step.workspace_bytes) if step.workspace_bytes else 0
                try:
                    find_executor(step.executor).launch(workspace, step.workspace_bytes, target)
                finally:
                    if workspace:
                        memory.free(workspace)  # stream-ordered: reused after this work

    def _addresses(self, argument: str, buffers: Sequence[Any], sizes: list[int]) -> list[int]:
        if buffers is None or isinstance(buffers, (str, bytes)) or \
                not hasattr(buffers, "__len__"):
            raise _bad(argument, buffers, "expected a list of data buffer handles")
        if len(buffers) != len(sizes):
            code = ACL_ERROR_OP_INPUT_NOT_MATCH if argument == "inputs" else \
                ACL_ERROR_OP_OUTPUT_NOT_MATCH
            raise AclError(code, f"{self.spec.name}: {len(buffers)} {argument} buffers for "
                                 f"{len(sizes)} {argument[:-1]} descs")
        found = []
        for i, (handle, size) in enumerate(zip(buffers, sizes, strict=True)):
            buffer = lookup_data_buffer(handle, f"{argument}[{i}]")
            if buffer.size < size:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"{self.spec.name}: argument '{argument}[{i}]' holds "
                               f"{buffer.size} bytes, but its desc needs {size}")
            found.append(buffer.data)
        return found

    def release(self) -> None:
        for step in self.steps:
            try:
                find_executor(step.executor).release()
            except AclError:
                pass  # already gone with the runtime
        self.steps = []


def _check_rule(b: _Lowering, expected: dict[str, tuple[tuple[int, ...], DataType]]) -> None:
    for name, (shape, data_type) in expected.items():
        operand = b.outputs[name]
        if operand.dims != tuple(shape) or operand.data_type != data_type:
            raise b.fail_output(name, f"desc is {list(operand.dims)} {operand.data_type.name}; "
                                      f"expected {list(shape)} {data_type.name}")


# -- the public functions ------------------------------------------------------------------------
def execute_v2(op_type: str, input_desc: Sequence[int], inputs: Sequence[int],
               output_desc: Sequence[int], outputs: Sequence[int], attr: int | None,
               stream: Any = None) -> None:
    """aclopExecuteV2: run CANN op ``op_type`` on ``stream`` (asynchronous).

    Args:
        op_type: the CANN op type ("Add", "MatMulV2", "SoftmaxV2"...; see ``OP_TYPES``).
        input_desc, inputs: TensorDesc and DataBuffer handles, one per input, in IR order
            (a trailing optional input may be left out, or given a desc of
            ``ACL_DT_UNDEFINED``).
        output_desc, outputs: the same for the outputs.
        attr: an aclopAttr handle (``create_attr``), or None for all defaults.
        stream: the stream (None: the current one).

    Raises:
        AclError: 100024 unknown op type; 100021/100022 inputs/outputs that do not match;
            100023 a bad or missing attribute; 100000 a buffer smaller than its desc.
    """
    if inputs is None or not hasattr(inputs, "__len__") or len(inputs) != len(input_desc):
        raise _bad("inputs", inputs, f"expected {len(input_desc)} data buffer handles, one "
                                     f"per input desc")
    program = _Program(op_type, input_desc, output_desc, attr, inputs)
    try:
        program.run(inputs, outputs, stream)
    finally:
        program.release()


class OpHandle:
    """aclopHandle: an op call bound once, run with new buffers by execute_with_handle."""

    def __init__(self, program: _Program) -> None:
        self.program = program
        self.handle = core.current().handles.add(self)

    def __repr__(self) -> str:
        return f"<aclopHandle {self.program.spec.name} {self.handle:#x}>"


def create_handle(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
                  attr: int | None = None) -> int:
    """aclopCreateHandle: validate and bind ``op_type`` once; returns the handle.

    Inputs whose values decide shapes (Slice offsets, Transpose perm...) must have const
    descs (``set_tensor_const``).
    """
    return OpHandle(_Program(op_type, input_desc, output_desc, attr, None)).handle


def create_handle_for_cast(src_desc: int, dst_desc: int, truncate: Any = 0) -> int:
    """aclopCreateHandleForCast: a handle converting src_desc's dtype to dst_desc's."""
    _check_truncate(truncate)
    attr = _cast_attr(dst_desc)
    try:
        return create_handle("Cast", [src_desc], [dst_desc], attr)
    finally:
        destroy_attr(attr)


def _lookup_handle(handle: Any) -> OpHandle:
    return core.current().handles.get(handle, OpHandle, "handle")


def execute_with_handle(handle: int, inputs: Sequence[int], outputs: Sequence[int],
                        stream: Any = None) -> None:
    """aclopExecWithHandle: run a bound op with these buffers on ``stream``."""
    program = _lookup_handle(handle).program
    program.run(inputs, outputs, stream)


def destroy_handle(handle: int) -> None:
    """aclopDestroyHandle."""
    target = _lookup_handle(handle)
    target.program.release()
    core.current().handles.remove(target.handle)


def infer_shape(op_type: str, input_desc: Sequence[int], inputs: Sequence[int] | None,
                num_outputs: int, attr: int | None = None,
                output_desc: Sequence[int] | None = None
                ) -> list[tuple[tuple[int, ...], DataType]]:
    """aclopInferShape: the outputs' ``(dims, data_type)`` from the inputs' descs (and the
    values of value inputs, read from ``inputs`` or const descs).

    As aclopInferShape, when ``output_desc`` (a list of ``num_outputs`` desc handles) is
    given their dims are updated in place; the data types are returned but the descs keep
    theirs (CANN updates shapes only).
    """
    spec = _spec(op_type)
    if not _is_int(num_outputs):
        raise _bad("numOutputs", num_outputs, "expected an integer")
    inputs_bound = _bind_inputs(spec, input_desc, concrete=False)
    _bind_outputs(spec, None, int(num_outputs), concrete=False)
    if output_desc is not None and len(output_desc) != num_outputs:
        raise _bad("outputDesc", output_desc, f"expected {num_outputs} desc handles")
    for value in inputs_bound.values():
        for operand in value if isinstance(value, list) else [value]:
            if operand is not None and any(d < 0 for d in operand.dims):
                raise AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                               f"{spec.name}: input '{operand.name}' has unknown dims "
                               f"{list(operand.dims)}; shapes are inferred from known dims")
    attrs, explicit = _resolve_attrs(spec, attr)
    b = _Lowering(spec, inputs_bound, {}, attrs, infer=True)
    b.explicit = explicit
    try:
        _read_values(b, inputs)
        if spec.rule is not None:
            b.inferred.update(spec.rule(b))
        else:
            spec.lower(b)
    finally:
        b.release_temporaries()
    result = []
    for name in spec.outputs:
        shape, data_type = b.inferred[name]
        result.append((tuple(shape), b.infer_dtypes.get(name, data_type)))
    for desc, (shape, _) in zip(output_desc or (), result, strict=False):
        target = _desc(desc, "outputDesc")
        target.dims, target.dim_ranges = tuple(shape), []
    return result


def _check_truncate(truncate: Any) -> None:
    if not (_is_int(truncate) or _is_bool(truncate)):
        raise _bad("truncate", truncate, "expected 0 or 1 (reserved by CANN)")


def _cast_attr(dst_desc: Any) -> int:
    attr = create_attr()
    set_attr_int(attr, "dst_type", int(_desc(dst_desc, "dstDesc").data_type))
    return attr


def cast(input_desc: int, input: int, output_desc: int, output: int, truncate: Any = 0,
         stream: Any = None) -> None:
    """aclopCast: convert ``input`` to ``output_desc``'s data type on ``stream``
    (``truncate`` is reserved, as in CANN)."""
    _check_truncate(truncate)
    attr = _cast_attr(output_desc)
    try:
        execute_v2("Cast", [input_desc], [input], [output_desc], [output], attr, stream)
    finally:
        destroy_attr(attr)


__all__ = ["OP_TYPES", "OpType", "AttrDef", "create_attr", "destroy_attr", "set_attr_bool",
           "set_attr_int", "set_attr_float", "set_attr_string", "set_attr_data_type",
           "set_attr_list_bool", "set_attr_list_int", "set_attr_list_float",
           "set_attr_list_string", "set_attr_list_list_int", "execute_v2", "create_handle",
           "create_handle_for_cast", "execute_with_handle", "destroy_handle", "infer_shape",
           "cast"]
