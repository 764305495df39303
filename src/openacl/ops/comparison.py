"""Comparison and logic operators: Eq/Ne/Gt/Ge/Lt/Le (tensor and scalar forms), logical
and/or/not/xor, bitwise and/or/xor/not, SWhere (where), IsInf/IsPosInf/IsNegInf/IsFinite,
IsClose and Equal (whole-tensor equality).

Semantics are aclnn's, which are PyTorch's:

* a comparison promotes its operands (``promotion.result_type``), rounds each of them to the
  promoted dtype (an int32 2049 compared with a 0-dim float16 2048 is equal; a float scalar
  0.1 compared with float16 data is float16(0.1)), then compares; an integer scalar wraps
  into the promoted integer dtype as torch's does. The result is bool, written into any
  output dtype (a float output gets 0.0/1.0); the in-place forms write it into ``selfRef``.
* logical operators take any dtypes (no promotion; nonzero, NaN included, is true).
* bitwise operators work on the promoted integer or bool dtype; a float operand is refused.

CANN has no aclnnIsNan (ops-math's IsNan is a graph-only operator), so there is none here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import (
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NUMERIC_DTYPES,
    WIDE_UNSIGNED_DTYPES,
    Call,
    Kernel,
    ScalarArg,
    TensorArg,
    as_array,
)
from openacl.ops.fpstate import ignore_floating_point
from openacl.ops.registry import register, register_inplace

BOOL = np.dtype(np.bool_)
ORDERED_DTYPES = NUMERIC_DTYPES | WIDE_UNSIGNED_DTYPES  # Gt/Ge/Lt/Le
EQUALITY_DTYPES = ORDERED_DTYPES | COMPLEX_DTYPES  # Eq/Ne
LOGICAL_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES
BITWISE_DTYPES = INT_DTYPES | BOOL_DTYPES | WIDE_UNSIGNED_DTYPES
BITWISE_NOT_DTYPES = INT_DTYPES | BOOL_DTYPES
WHERE_CONDITION_DTYPES = frozenset({BOOL, np.dtype(np.uint8)})
WHERE_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES | WIDE_UNSIGNED_DTYPES
IS_INF_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES
IS_CLOSE_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES
EQUAL_DTYPES = NUMERIC_DTYPES | WIDE_UNSIGNED_DTYPES


def _tensor_names(c: Call, *names: str) -> list[str]:
    return [n for n in names if isinstance(c[n], TensorArg)]


def _check_operands(c: Call, supported, *names: str) -> None:
    """Each operand's own dtype (tensor or scalar) must be supported."""
    for name in names:
        c.check_dtype(name, supported)


def _scalar_in(c: Call, name: str, dtype: np.dtype) -> np.ndarray:
    """Scalar ``name`` rounded (or, for integers, wrapped) into ``dtype``, as torch does when
    a wrapped number takes part in an op of that dtype; returned in the compute dtype."""
    value: ScalarArg = c[name]
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.array(value.value).astype(dtype)
    return rounded.astype(promotion.compute_dtype(dtype))[()]


def _operands(c: Call, dtype: np.dtype, *names: str) -> Callable:
    """A function of the views returning each operand rounded into ``dtype`` (computed in
    its compute dtype: float16/bfloat16 widen to float32 exactly after the rounding)."""
    compute = promotion.compute_dtype(dtype)
    scalars = {n: _scalar_in(c, n, dtype) for n in names if isinstance(c[n], ScalarArg)}

    def read(v) -> list:
        values = []
        for name in names:
            if name in scalars:
                values.append(scalars[name])
                continue
            array = as_array(v[name])
            if array.dtype != dtype:
                with ignore_floating_point():
                    array = array.astype(dtype)
            values.append(array.astype(compute, copy=False))
        return values
    read.scalars = tuple(scalars.get(name) for name in names)  # (None: a tensor)
    return read


# -- comparisons --------------------------------------------------------------------------------
def _compare(fn: Callable, supported) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        promoted = c.result_type("self", "other")
        _check_operands(c, supported, "self", "other")
        c.check_dtype("other", supported, promoted)
        c.check_out("out", c.broadcast(*_tensor_names(c, "self", "other")), BOOL)
        read = _operands(c, promoted, "self", "other")
        scalars = {name: value for name, value in zip(("self", "other"), read.scalars,
                                                      strict=True) if value is not None}
        exact = promoted == promotion.compute_dtype(promoted)  # no rounding to do

        def kernel(v) -> None:
            v.plan(kernel, lambda: exact and _compare_plan(v, fn, promoted, scalars) or
                   functools.partial(general, v))()

        def general(v) -> None:
            with ignore_floating_point():
                v.write("out", fn(*read(v)))
        return kernel
    return prepare


def _compare_plan(v, fn: Callable, dtype: np.dtype, scalars: dict[str, Any]
                  ) -> Callable[[], Any] | None:
    """A comparison's plan (``Views.plan``) where the promoted ``dtype`` is its own compute
    dtype: the ufunc straight into a boolean host output when each tensor operand has that
    dtype (nothing to round); None otherwise. (No floating-point warnings, NaN included.)"""
    out = v["out"]
    if type(out) is not np.ndarray or out.dtype != BOOL:
        return None
    operands = []
    for name in ("self", "other"):
        if name in scalars:
            operands.append(scalars[name])
            continue
        array = v[name]
        if type(array) is not np.ndarray or array.dtype != dtype:
            return None
        operands.append(array)
    return functools.partial(fn, *operands, out=out)


_COMPARISONS = {
    "Eq": (np.equal, EQUALITY_DTYPES),
    "Ne": (np.not_equal, EQUALITY_DTYPES),
    "Gt": (np.greater, ORDERED_DTYPES),
    "Ge": (np.greater_equal, ORDERED_DTYPES),
    "Lt": (np.less, ORDERED_DTYPES),
    "Le": (np.less_equal, ORDERED_DTYPES),
}
for _base, (_fn, _supported) in _COMPARISONS.items():
    for _form, _kind in (("Tensor", "tensor"), ("Scalar", "scalar")):
        _prepare = register(f"{_base}{_form}", f"self: tensor, other: {_kind}, out: tensor!")(
            _compare(_fn, _supported))
        register_inplace(f"Inplace{_base}{_form}", f"selfRef: tensor!, other: {_kind}",
                         _prepare, self="selfRef", out="selfRef")
del _base, _fn, _supported, _form, _kind, _prepare


# -- logical ------------------------------------------------------------------------------------
def _truth(array: np.ndarray) -> np.ndarray:
    return array if array.dtype == BOOL else array != 0


def _logical_binary(fn: Callable) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        _check_operands(c, LOGICAL_DTYPES, "self", "other")
        c.check_out("out", c.broadcast("self", "other"), BOOL)

        def kernel(v) -> None:
            with ignore_floating_point():
                v.write("out", fn(_truth(as_array(v["self"])), _truth(as_array(v["other"]))))
        return kernel
    return prepare


logical_and = register("LogicalAnd", "self: tensor, other: tensor, out: tensor!")(
    _logical_binary(np.logical_and))
logical_or = register("LogicalOr", "self: tensor, other: tensor, out: tensor!")(
    _logical_binary(np.logical_or))
logical_xor = register("LogicalXor", "self: tensor, other: tensor, out: tensor!")(
    _logical_binary(np.logical_xor))
register_inplace("InplaceLogicalAnd", "selfRef: tensor!, other: tensor", logical_and,
                 self="selfRef", out="selfRef")
register_inplace("InplaceLogicalOr", "selfRef: tensor!, other: tensor", logical_or,
                 self="selfRef", out="selfRef")


@register("LogicalNot", "self: tensor, out: tensor!")
def logical_not(c: Call) -> Kernel:
    """``out = not self`` (zero is false)."""
    c.check_dtype("self", LOGICAL_DTYPES)
    c.check_out("out", c.tensor("self").shape, BOOL)

    def kernel(v) -> None:
        v.write("out", np.logical_not(_truth(as_array(v["self"]))))
    return kernel


register_inplace("InplaceLogicalNot", "selfRef: tensor!", logical_not, self="selfRef",
                 out="selfRef")


# -- bitwise ------------------------------------------------------------------------------------
def _bitwise(fn: Callable) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        promoted = c.result_type("self", "other")
        _check_operands(c, BITWISE_DTYPES, "self", "other")
        c.check_dtype("other", BITWISE_DTYPES, promoted)
        c.check_out("out", c.broadcast(*_tensor_names(c, "self", "other")), promoted)
        read = _operands(c, promoted, "self", "other")

        def kernel(v) -> None:
            v.write("out", fn(*read(v)))
        return kernel
    return prepare


for _base, _fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                   ("BitwiseXor", np.bitwise_xor)):
    for _form, _kind in (("Tensor", "tensor"), ("Scalar", "scalar")):
        _prepare = register(f"{_base}{_form}", f"self: tensor, other: {_kind}, out: tensor!")(
            _bitwise(_fn))
        register_inplace(f"Inplace{_base}{_form}", f"selfRef: tensor!, other: {_kind}",
                         _prepare, self="selfRef", out="selfRef")
# aclnnBitwiseAndTensorOut is BitwiseAndTensor under another name; its in-place form calls
# the in-out tensor "self"
bitwise_and_tensor_out = register("BitwiseAndTensorOut",
                                  "self: tensor, other: tensor, out: tensor!")(
    _bitwise(np.bitwise_and))
register_inplace("InplaceBitwiseAndTensorOut", "self: tensor!, other: tensor",
                 bitwise_and_tensor_out, out="self")
del _base, _fn, _form, _kind, _prepare


@register("BitwiseNot", "self: tensor, out: tensor!")
def bitwise_not(c: Call) -> Kernel:
    """``~self`` (logical not for bool); the output dtype must equal the input's."""
    dtype = c.check_dtype("self", BITWISE_NOT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)

    def kernel(v) -> None:
        v.write("out", np.invert(as_array(v["self"])))
    return kernel


# -- selection and classification ---------------------------------------------------------------
@register("SWhere", "condition: tensor, self: tensor, other: tensor, out: tensor!")
def s_where(c: Call) -> Kernel:
    """``self`` where ``condition`` (bool, or uint8 nonzero) else ``other``, broadcast."""
    c.check_dtype("condition", WHERE_CONDITION_DTYPES)
    promoted = c.result_type("self", "other")
    _check_operands(c, WHERE_DTYPES, "self", "other")
    c.check_out("out", c.broadcast("condition", "self", "other"), promoted)

    def kernel(v) -> None:
        condition = _truth(as_array(v["condition"]))
        v.write("out", np.where(condition, as_array(v["self"]).astype(promoted, copy=False),
                                as_array(v["other"]).astype(promoted, copy=False)))
    return kernel


@register("IsInf", "x: tensor, out: tensor!")
def is_inf(c: Call) -> Kernel:
    """Whether each element is +inf or -inf (never, for integers and bool)."""
    dtype = c.check_dtype("x", IS_INF_DTYPES)
    c.check_out("out", c.tensor("x").shape, BOOL, exact_dtype=True)
    floating = promotion.is_floating(dtype)

    def kernel(v) -> None:
        x = as_array(v["x"])
        v.write("out", np.isinf(x.astype(promotion.compute_dtype(dtype), copy=False))
                if floating else False)
    return kernel


def _classify(test: Callable) -> Callable[[Call], Kernel]:
    """A bool ``out`` of ``test(self)`` (IsFinite, IsPosInf, IsNegInf); integers and bools
    are finite (CANN's ATK cases pass them, as torch does)."""
    def prepare(c: Call) -> Kernel:
        dtype = c.check_dtype("self", IS_INF_DTYPES)
        c.check_out("out", c.tensor("self").shape, BOOL, exact_dtype=True)
        compute = promotion.compute_dtype(dtype) if promotion.is_floating(dtype) else \
            np.dtype(np.float32)  # (every integer is finite in float32 too)

        def kernel(v) -> None:
            v.write("out", test(as_array(v["self"]).astype(compute, copy=False)))
        return kernel
    return prepare


is_finite = register("IsFinite", "self: tensor, out: tensor!")(_classify(np.isfinite))
is_pos_inf = register("IsPosInf", "self: tensor, out: tensor!")(_classify(np.isposinf))
is_neg_inf = register("IsNegInf", "self: tensor, out: tensor!")(_classify(np.isneginf))


@register("IsClose", "self: tensor, other: tensor, rtol: float = 1e-05, atol: float = 1e-08, "
                     "equalNan: bool = False, out: tensor!")
def is_close(c: Call) -> Kernel:
    """``|self - other| <= atol + rtol * |other|`` (or equal, infinities included; NaN
    equal to NaN when ``equalNan``), computed in float64: torch.isclose. self and other
    share one dtype; rtol and atol must not be negative."""
    dtype = c.check_dtype("self", IS_CLOSE_DTYPES)
    if c.tensor("other").dtype != dtype:
        raise c.fail("other", f"dtype must equal self's ({dtype})")
    for name in ("rtol", "atol"):
        if not c[name] >= 0:
            raise c.fail(name, "must be >= 0")
    c.check_out("out", c.broadcast("self", "other"), BOOL, exact_dtype=True)
    rtol, atol, equal_nan = c["rtol"], c["atol"], bool(c["equalNan"])

    def kernel(v) -> None:  # (bools too: torch compares them as 0.0 / 1.0 with tolerance)
        x = as_array(v["self"]).astype(np.float64)
        y = as_array(v["other"]).astype(np.float64)
        with ignore_floating_point():
            error = np.abs(x - y)  # an infinite error (inf vs -inf) is never close
            close = (x == y) | (np.isfinite(error) & (error <= atol + rtol * np.abs(y)))
        if equal_nan:
            close = close | (np.isnan(x) & np.isnan(y))
        v.write("out", close)
    return kernel


@register("Equal", "self: tensor, other: tensor, out: tensor!")
def equal(c: Call) -> Kernel:
    """Whether self and other have the same shape and the same values (torch.equal; NaN is
    never equal): one bool, written into a one-element ``out``."""
    promoted = c.result_type("self", "other")
    _check_operands(c, EQUAL_DTYPES, "self", "other")
    c.check_dtype("other", EQUAL_DTYPES, promoted)
    out = c["out"]
    c.check_out("out", out.shape if out is not None and out.numel == 1 else (1,), BOOL)
    same_shape = c.tensor("self").shape == c.tensor("other").shape
    read = _operands(c, promoted, "self", "other")

    def kernel(v) -> None:
        if not same_shape:
            v.write("out", False)
            return
        with ignore_floating_point():
            v.write("out", np.all(np.equal(*read(v))))
    return kernel
