"""Fills and selections: operators that write a value where a mask, a diagonal or a bound
says, or read the elements a mask picks.

- fills: ``InplaceFillScalar`` / ``InplaceFillTensor`` (``Tensor.fill_``), ``InplaceZero``,
  ``InplaceMaskedFillScalar`` / ``InplaceMaskedFillTensor`` (``Tensor.masked_fill_``),
  ``InplaceFillDiagonal`` (``Tensor.fill_diagonal_``) and ``DiagFlat``
  (``torch.diagflat``); generated fills: ``Arange`` and ``OneHot`` (on/off values by
  where a label's class is);
- selection: ``MaskedSelect`` (``torch.masked_select``);
- bounds: ``Hardtanh`` (``F.hardtanh``), ``ClampMinTensor`` / ``ClampMaxTensor``
  (``torch.clamp_min`` / ``clamp_max`` with tensor bounds) and their in-place forms, on
  arithmetic's clamp kernel.

Fills and selections move values without arithmetic: bit-exact in every dtype. A fill
value is cast as ``Tensor.fill_`` casts it (float to integer truncates) and refused where
PyTorch refuses it (it overflows the dtype, a complex value into a real tensor).

MaskedSelect's output size depends on the mask's values, which phase 1 cannot read: as in
CANN, ``out`` holds as many elements as ``self`` and ``mask`` broadcast to; the selected
elements come first, in row-major order, and the rest is set to zero.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops import arithmetic, promotion
from openacl.ops.call import (
    ALL_DTYPES,
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    Call,
    Kernel,
    ScalarArg,
    as_array,
    like,
)
from openacl.ops.movement import (
    BF16,
    C128,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    _convert,
    _fill_value,
    _out_like,
    _require_broadcast_to,
)
from openacl.ops.registry import register, register_inplace

__all__: list[str] = []

# dtype lists of the aclnn documents (numpy-holdable ones)
ZERO_DTYPES = ALL_DTYPES - U32 - U64
# InplaceFillTensor: the op_api's list (its document omits DOUBLE and the complex types,
# which CANN's ATK cases fill; it lists UINT16/32/64, which the op_api refuses)
FILL_TENSOR_DTYPES = ALL_DTYPES - U16 - U32 - U64
FILL_DIAGONAL_DTYPES = F32 | F16 | F64 | I32 | I64 | I16 | I8 | U8 | BOOL_DTYPES | BF16 | \
    (COMPLEX_DTYPES - C128)
DIAG_FLAT_DTYPES = FILL_DIAGONAL_DTYPES
MASKED_FILL_DTYPES = BOOL_DTYPES | I8 | I32 | I64 | F32 | F16 | BF16
MASKED_SELECT_DTYPES = BF16 | F16 | F32 | F64 | I8 | I16 | I32 | I64 | U8 | BOOL_DTYPES
MASK_DTYPES = U8 | BOOL_DTYPES  # MaskedSelect's mask (MaskedFill takes BOOL only)
CLAMP_DTYPES = F16 | F32 | F64 | I8 | U8 | I16 | I32 | I64 | BF16  # self/out of Hardtanh, ...
CLAMP_BOUND_DTYPES = CLAMP_DTYPES | BOOL_DTYPES  # the bound tensors of Clamp*Tensor
FILL_DIAGONAL_MIN_DIMS = 2
ARANGE_SCALAR_DTYPES = FLOAT_DTYPES | U8 | I8 | I16 | I32 | I64 | BOOL_DTYPES
ARANGE_OUT_DTYPES = FLOAT_DTYPES | I32 | I64
ONE_HOT_SELF_DTYPES = U8 | I32 | I64
ONE_HOT_VALUE_DTYPES = F16 | F32 | I8 | U8 | I32 | I64
ONE_HOT_MAX_SELF_DIMS = 7  # out gains a dim and must stay within 8


def _fill_tensor_value(c: Call, name: str, target: np.dtype) -> None:
    """A fill-value tensor ``name``: 0-dim or one element, its dtype castable to
    ``target`` (a complex value fills only a complex tensor)."""
    value = c.tensor(name)
    if value.ndim > 1 or value.numel != 1:
        raise c.fail(name, "must be 0-dim or a 1-dim tensor of one element")
    c.check_dtype(name, ALL_DTYPES)
    if value.dtype.kind == "c" and target.kind != "c":
        raise c.fail(name, f"a complex value cannot fill a {target} tensor")


# -- fills -------------------------------------------------------------------------------------
def _inplace_fill_scalar(c: Call) -> Kernel:
    """Set every element of ``selfRef`` to ``value`` (cast as ``Tensor.fill_`` casts)."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", ALL_DTYPES)
    value = _fill_value(c, "value", target.dtype)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        v["selfRef"][...] = value[()]
    return kernel


def _inplace_fill_tensor(c: Call) -> Kernel:
    """Set every element of ``selfRef`` to the one element of tensor ``value``."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", FILL_TENSOR_DTYPES)
    _fill_tensor_value(c, "value", target.dtype)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        v["selfRef"][...] = _convert(v["value"].reshape(()), target.dtype)
    return kernel


def inplace_constant(value: int, supported: frozenset[np.dtype]):
    """The prepare function of an operator that sets every element of ``selfRef`` to the
    constant ``value`` (InplaceZero; a family's InplaceOne can take it too)."""
    def prepare(c: Call) -> Kernel:
        target = c.tensor("selfRef")
        c.check_dtype("selfRef", supported)
        c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

        def kernel(v) -> None:
            v["selfRef"][...] = value
        return kernel
    prepare.__doc__ = f"Set every element of ``selfRef`` to {value}."
    return prepare


register_inplace("InplaceFillScalar", "selfRef: tensor!, value: scalar", _inplace_fill_scalar,
                 silent=True, selfRef="selfRef")
register_inplace("InplaceFillTensor", "selfRef: tensor!, value: tensor", _inplace_fill_tensor,
                 silent=True, selfRef="selfRef")
register_inplace("InplaceZero", "selfRef: tensor!", inplace_constant(0, ZERO_DTYPES),
                 silent=True, selfRef="selfRef")


def _masked_fill(c: Call) -> Kernel:
    """Set the elements of ``selfRef`` where ``mask`` (broadcast to selfRef's shape) is
    true to ``value`` (``Tensor.masked_fill_``)."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", MASKED_FILL_DTYPES)
    c.check_dtype("mask", BOOL_DTYPES)
    _require_broadcast_to(c, "mask", "selfRef")
    constant = None
    if isinstance(c["value"], ScalarArg):
        constant = _fill_value(c, "value", target.dtype)
    else:
        _fill_tensor_value(c, "value", target.dtype)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        out = v["selfRef"]
        value = constant[()] if constant is not None else _convert(v["value"].reshape(()),
                                                                   target.dtype)
        np.copyto(out, value, where=v["mask"])
    return kernel


register_inplace("InplaceMaskedFillScalar", "selfRef: tensor!, mask: tensor, value: scalar",
                 _masked_fill, silent=True, selfRef="selfRef")
register_inplace("InplaceMaskedFillTensor", "selfRef: tensor!, mask: tensor, value: tensor",
                 _masked_fill, silent=True, selfRef="selfRef")


def _diagonal_positions(shape: tuple[int, ...], wrap: bool) -> tuple[np.ndarray, ...]:
    """The index of each element ``Tensor.fill_diagonal_`` sets: ``(i, i, ...)``; for a
    2-dim tensor taller than its width + 1 with ``wrap``, the diagonal restarts every
    ``width + 1`` rows (it continues in row-major order through the whole tensor)."""
    if len(shape) == 2 and wrap and shape[0] > shape[1] + 1:
        height, width = shape
        flat = np.arange(math.ceil(height * width / (width + 1))) * (width + 1)
        return flat // width, flat % width
    return (np.arange(min(shape)),) * len(shape)


def _inplace_fill_diagonal(c: Call) -> Kernel:
    """Set the main diagonal of ``selfRef`` (2-dim, or every dim of one size) to
    ``fillValue`` (``Tensor.fill_diagonal_(fillValue, wrap)``)."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", FILL_DIAGONAL_DTYPES)
    if target.ndim < FILL_DIAGONAL_MIN_DIMS:
        raise c.fail("selfRef", "must have at least 2 dims")
    if target.ndim > FILL_DIAGONAL_MIN_DIMS and len(set(target.shape)) != 1:
        raise c.fail("selfRef", "every dim must have the same size when there are more than 2")
    value = _fill_value(c, "fillValue", target.dtype)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)
    positions = _diagonal_positions(target.shape, c["wrap"])

    def kernel(v) -> None:
        out = v["selfRef"]
        out[tuple(like(out, p) for p in positions)] = value[()]
    return kernel


register_inplace("InplaceFillDiagonal", "selfRef: tensor!, fillValue: scalar, wrap: bool",
                 _inplace_fill_diagonal, silent=True, selfRef="selfRef")


@register("DiagFlat", "self: tensor, diagonal: int, out: tensor!", silent=True)
def diag_flat(c: Call) -> Kernel:
    """A square matrix holding the flattened ``self`` on diagonal ``diagonal`` (> 0 above
    the main one, < 0 below) and zeros elsewhere (``torch.diagflat``)."""
    self = c.tensor("self")
    c.check_dtype("self", DIAG_FLAT_DTYPES)
    offset = c["diagonal"]
    size = self.numel + abs(offset)
    _out_like(c, (size, size), self.dtype)
    rows = np.arange(self.numel) + max(-offset, 0)
    cols = np.arange(self.numel) + max(offset, 0)

    def kernel(v) -> None:
        out = v["out"]
        out[...] = 0
        out[like(out, rows), like(out, cols)] = v["self"].reshape(-1)
    return kernel


# -- generated fills ---------------------------------------------------------------------------
def sequence_bounds(c: Call, supported: frozenset[np.dtype]) -> tuple[float, float, float]:
    """The scalars ``start``, ``end``, ``step`` of a sequence operator (Arange, Range):
    each of a ``supported`` dtype, finite, and a non-zero step that goes from start
    towards end."""
    for name in ("start", "end", "step"):
        c.check_dtype(name, supported)
    start, end, step = (float(c[n].value) for n in ("start", "end", "step"))
    if not all(math.isfinite(x) for x in (start, end, step)):
        raise c.fail("end", "start, end and step must be finite")
    if step == 0:
        raise c.fail("step", "must not be zero")
    if (end - start) * step < 0:
        raise c.fail("step", f"has the wrong sign to go from {start} to {end}")
    return start, end, step


@register("Arange", "start: scalar, end: scalar, step: scalar, out: tensor!")
def arange(c: Call) -> Kernel:
    """``start, start + step, ...`` up to but excluding ``end`` (``torch.arange``); the
    one-shot helper picks int64 for integer scalars, else float32, as torch does."""
    start, end, step = sequence_bounds(c, ARANGE_SCALAR_DTYPES)
    size = max(math.ceil((end - start) / step), 0)
    integral = all(promotion.category(c[n].dtype) <= promotion.INTEGER
                   for n in ("start", "end", "step"))
    default = promotion.DEFAULT_INT if integral else promotion.DEFAULT_FLOAT
    dtype = c.tensor("out").dtype if c.has("out") else default
    c.check_dtype("out", ARANGE_OUT_DTYPES, dtype)
    _out_like(c, (size,), dtype)
    if dtype.kind in "iu" and int(step) == 0:
        raise c.fail("step", f"truncates to 0 for an integer out ({dtype})")
    accumulate = np.dtype(np.int64) if dtype.kind in "iu" else (
        np.dtype(np.float64) if dtype.itemsize >= 4 else np.dtype(np.float32))
    first = np.array(c["start"].value).astype(accumulate)
    delta = np.array(c["step"].value).astype(accumulate)

    def kernel(v) -> None:
        values = first + delta * np.arange(size, dtype=accumulate)
        v.write("out", values.astype(dtype))
    return kernel


@register("OneHot", "self: tensor, numClasses: int, onValue: tensor, offValue: tensor, "
                    "axis: int, out: tensor!")
def one_hot(c: Call) -> Kernel:
    """One-hot encode ``self`` with ``numClasses`` classes, inserting the new dim at
    ``axis`` (-1: last). Positions of the class take ``onValue[0]``, others
    ``offValue[0]``; values outside ``[0, numClasses)`` encode as all ``offValue`` (CANN's
    rule; ``F.one_hot`` raises instead)."""
    self = c.tensor("self")
    c.check_dtype("self", ONE_HOT_SELF_DTYPES)
    if self.ndim > ONE_HOT_MAX_SELF_DIMS:
        raise c.fail("self", f"must have at most {ONE_HOT_MAX_SELF_DIMS} dims")
    classes = c["numClasses"]
    if classes < 0 or (classes == 0 and self.numel == 0):
        raise c.fail("numClasses", "must be >= 0 (> 0 for an empty self)")
    dtype = c.check_dtype("onValue", ONE_HOT_VALUE_DTYPES)
    for name in ("onValue", "offValue"):
        value = c.tensor(name)
        if value.dtype != dtype:
            raise c.fail(name, f"dtype must equal onValue's ({dtype})")
        if value.numel == 0:
            raise c.fail(name, "must hold at least one element")
    if not -1 <= c["axis"] <= self.ndim:
        raise c.fail("axis", f"must be in [-1, {self.ndim}]")
    axis = self.ndim if c["axis"] == -1 else c["axis"]
    shape = (*self.shape[:axis], classes, *self.shape[axis:])
    if c.has("out"):
        c.check_dtype("out", ONE_HOT_VALUE_DTYPES)
    _out_like(c, shape, dtype)

    def kernel(v) -> None:
        labels = np.expand_dims(as_array(v["self"]).astype(np.int64), axis)
        classes_along = like(labels, np.arange(classes).reshape(
            [-1 if k == axis else 1 for k in range(len(shape))]))
        on, off = v["onValue"].reshape(-1)[0], v["offValue"].reshape(-1)[0]
        np.copyto(v["out"], np.where(labels == classes_along, on, off))
    return kernel


# -- selection ---------------------------------------------------------------------------------
@register("MaskedSelect", "self: tensor, mask: tensor, out: tensor!", silent=True)
def masked_select(c: Call) -> Kernel:
    """The elements of ``self`` where ``mask`` is true (both broadcast), in row-major order,
    as the first elements of the 1-dim ``out`` (see the module note on its size)."""
    self = c.tensor("self")
    c.check_dtype("self", MASKED_SELECT_DTYPES)
    c.check_dtype("mask", MASK_DTYPES)
    shape = c.broadcast("self", "mask")
    _out_like(c, (math.prod(shape),), self.dtype)

    def kernel(v) -> None:
        out = v["out"]
        mask = np.broadcast_to(as_array(v["mask"]), shape).astype(bool, copy=False)
        picked = np.broadcast_to(as_array(v["self"]), shape)[mask]
        count = len(picked)
        out[:count] = picked
        out[count:] = 0
    return kernel


# -- bounds ------------------------------------------------------------------------------------
def _bounded(clamp, bounds: tuple[str, ...], exact: bool, doc: str):
    """Arithmetic's clamp behind aclnn's dtype lists: ``self`` and ``bounds`` checked first;
    with ``exact`` the result keeps self's dtype and a lower bound above the upper one is
    refused (Hardtanh)."""
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        c.check_dtype("self", CLAMP_DTYPES)
        for name in bounds:
            c.check_dtype(name, CLAMP_BOUND_DTYPES)
        if exact:
            low, high = (c[name].value for name in bounds)
            if low > high:
                raise c.fail("clipValueMin", f"must not exceed clipValueMax ({high})")
            if c.has("out") and c.tensor("out").dtype != self.dtype:
                raise c.fail("out", f"dtype must be self's ({self.dtype})")
        return clamp(c)
    prepare.__doc__ = doc
    return prepare


hardtanh = register("Hardtanh", "self: tensor, clipValueMin: scalar, clipValueMax: scalar, "
                                "out: tensor!")(
    _bounded(arithmetic.clamp, ("clipValueMin", "clipValueMax"), True,
             "``self`` limited to ``[clipValueMin, clipValueMax]`` (``F.hardtanh``); the "
             "bounds must be ordered, the result keeps self's dtype."))
clamp_min_tensor = register("ClampMinTensor", "self: tensor, clipValueMin: tensor, "
                                              "out: tensor!")(
    _bounded(arithmetic._clamp("clipValueMin", None), ("clipValueMin",), False,
             "``max(self, clipValueMin)`` elementwise, broadcast and promoted "
             "(``torch.clamp_min`` with a tensor bound); NaN propagates."))
clamp_max_tensor = register("ClampMaxTensor", "self: tensor, clipValueMax: tensor, "
                                              "out: tensor!")(
    _bounded(arithmetic._clamp(None, "clipValueMax"), ("clipValueMax",), False,
             "``min(self, clipValueMax)`` elementwise, broadcast and promoted "
             "(``torch.clamp_max`` with a tensor bound); NaN propagates."))
register_inplace("InplaceHardtanh", "selfRef: tensor!, clipValueMin: scalar, "
                                    "clipValueMax: scalar", hardtanh, self="selfRef",
                 out="selfRef")
register_inplace("InplaceClampMinTensor", "selfRef: tensor!, clipValueMin: tensor",
                 clamp_min_tensor, self="selfRef", out="selfRef")
register_inplace("InplaceClampMaxTensor", "selfRef: tensor!, clipValueMax: tensor",
                 clamp_max_tensor, self="selfRef", out="selfRef")
