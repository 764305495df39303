"""Elementwise math beyond the arithmetic basics: lerp, log-add-exp, xlogy, nan_to_num,
the cross product of 3-vectors, angle and polar.

Argument lists and dtype lists are CANN's (``hicann/ops-math`` ``math/<op>/docs``);
semantics are PyTorch's: operands promote as in ``promotion.py``, integer and bool operands
of the float-valued operators give float32, float16/bfloat16 compute in float32 and round
once into the output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openacl.ops import promotion
from openacl.ops.arithmetic import _float_result, _operand
from openacl.ops.call import (
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NUMERIC_DTYPES,
    REAL_DTYPES,
    WIDE_UNSIGNED_DTYPES,
    Call,
    Kernel,
    TensorArg,
    array_module,
    as_array,
)
from openacl.ops.fpstate import quiet
from openacl.ops.registry import register, register_inplace

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
LERP_DTYPES = FLOAT_DTYPES - {np.dtype(np.float64)}  # FLOAT, FLOAT16, BFLOAT16
LERP_OUT_DTYPES = FLOAT_DTYPES  # Lerps also writes DOUBLE
LERP_SPLIT = 0.5  # torch's lerp switches formula at |weight| = 0.5 (exact at both ends)
LOG_ADD_EXP_DTYPES = NUMERIC_DTYPES | WIDE_UNSIGNED_DTYPES
LOG_ADD_EXP_OUT_DTYPES = LERP_DTYPES  # FLOAT, FLOAT16, BFLOAT16
XLOGY_DTYPES = REAL_DTYPES | BOOL_DTYPES
NAN_TO_NUM_DTYPES = (FLOAT_DTYPES - {np.dtype(np.float64)}) | INT_DTYPES | BOOL_DTYPES
FLOAT32_MAX = float(np.finfo(np.float32).max)  # NanToNum's default replacement of +inf
CROSS_DTYPES = REAL_DTYPES | COMPLEX_DTYPES
CROSS_SIZE = 3  # LinalgCross multiplies 3-vectors
COMPLEX64 = np.dtype(np.complex64)
ANGLE_DTYPES = (NUMERIC_DTYPES - {FLOAT64}) | {COMPLEX64}
ANGLE_OUT_DTYPES = LERP_DTYPES  # FLOAT, FLOAT16, BFLOAT16
POLAR_DTYPES = frozenset({np.dtype(np.float32)})


def _tensor_names(c: Call, *names: str) -> list[str]:
    return [n for n in names if isinstance(c[n], TensorArg)]


# -- lerp -----------------------------------------------------------------------------------
def _lerp_values(start, end, weight):
    """torch's lerp: ``start + w (end - start)`` for ``|w| < 0.5``, else
    ``end - (end - start)(1 - w)``, so both ends are exact."""
    diff = end - start
    low = np.abs(weight) < LERP_SPLIT
    return np.where(low, start + weight * diff, end - diff * (1 - weight))


def _lerp(c: Call) -> Kernel:
    """``self + weight * (end - self)``; self, end (and a tensor weight) share one dtype."""
    dtype = c.check_dtype("self", LERP_DTYPES)
    weighted = isinstance(c["weight"], TensorArg)
    for name in ("end", "weight") if weighted else ("end",):
        if c.tensor(name).dtype != dtype:
            raise c.fail(name, f"dtype must equal self's ({dtype})")
    c.check_out("out", c.broadcast(*_tensor_names(c, "self", "end", "weight")), dtype)
    if c["out"] is not None:
        c.check_dtype("out", LERP_OUT_DTYPES)
    read_weight = _operand(c, "weight", FLOAT64)

    @quiet
    def kernel(v) -> None:  # in float64: the difference of close ends cancels exactly
        v.write("out", _lerp_values(v.compute("self", FLOAT64), v.compute("end", FLOAT64),
                                    read_weight(v)))
    return kernel


lerp = register("Lerp", "self: tensor, end: tensor, weight: tensor, out: tensor!")(_lerp)
lerps = register("Lerps", "self: tensor, end: tensor, weight: scalar, out: tensor!")(_lerp)
register_inplace("InplaceLerp", "selfRef: tensor!, end: tensor, weight: tensor", lerp,
                 self="selfRef", out="selfRef")
register_inplace("InplaceLerps", "selfRef: tensor!, end: tensor, weight: scalar", lerps,
                 self="selfRef", out="selfRef")


# -- log-add-exp ------------------------------------------------------------------------------
def _log_add_exp(fn: np.ufunc) -> Callable[[Call], Kernel]:
    """``log(exp(x) + exp(y))`` (base 2 for LogAddExp2), computed without overflow; the
    result is float32, float16 or bfloat16 (a float64 or integer promotion gives float32)."""
    def prepare(c: Call) -> Kernel:
        for name in ("self", "other"):
            c.check_dtype(name, LOG_ADD_EXP_DTYPES)
        promoted = c.result_type("self", "other")
        result = compute = _float_result(promoted)  # float64 operands compute in float64
        if result not in LOG_ADD_EXP_OUT_DTYPES:
            result = FLOAT32
        c.check_out("out", c.broadcast("self", "other"), result)
        if c["out"] is not None:
            c.check_dtype("out", LOG_ADD_EXP_OUT_DTYPES)

        @quiet
        def kernel(v) -> None:
            v.store("out", fn, v.compute("self", compute), v.compute("other", compute))
        return kernel
    return prepare


log_add_exp = register("LogAddExp", "self: tensor, other: tensor, out: tensor!")(
    _log_add_exp(np.logaddexp))
log_add_exp2 = register("LogAddExp2", "self: tensor, other: tensor, out: tensor!")(
    _log_add_exp(np.logaddexp2))


# -- xlogy ------------------------------------------------------------------------------------
def _xlogy(c: Call) -> Kernel:
    """``self * log(other)``, 0 where self is 0 (unless other is NaN): torch.xlogy."""
    for name in ("self", "other"):
        c.check_dtype(name, XLOGY_DTYPES)
    result = _float_result(c.result_type("self", "other"))
    c.check_out("out", c.broadcast(*_tensor_names(c, "self", "other")), result)
    left, right = _operand(c, "self", result), _operand(c, "other", result)

    @quiet
    def kernel(v) -> None:
        x, y = left(v), right(v)
        product = np.where(x == 0, 0, x * np.log(y))
        v.write("out", np.where(np.isnan(y), np.nan, product))
    return kernel


xlogy_tensor = register("XLogYTensor", "self: tensor, other: tensor, out: tensor!")(_xlogy)
xlogy_scalar_self = register("XLogYScalarSelf", "self: scalar, other: tensor, out: tensor!")(
    _xlogy)
xlogy_scalar_other = register("XLogYScalarOther", "self: tensor, other: scalar, out: tensor!")(
    _xlogy)
register_inplace("InplaceXLogYTensor", "selfRef: tensor!, other: tensor", xlogy_tensor,
                 self="selfRef", out="selfRef")
register_inplace("InplaceXLogYScalarOther", "selfRef: tensor!, other: scalar",
                 xlogy_scalar_other, self="selfRef", out="selfRef")


# -- nan_to_num -------------------------------------------------------------------------------
@register("NanToNum", f"self: tensor, nan: float = 0.0, posinf: float = {FLOAT32_MAX!r}, "
                      f"neginf: float = {-FLOAT32_MAX!r}, out: tensor!")
def nan_to_num(c: Call) -> Kernel:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (each rounded to
    self's dtype, as torch casts them: beyond float16's range they stay inf); integer and
    bool tensors are copied unchanged."""
    dtype = c.check_dtype("self", NAN_TO_NUM_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    floating = promotion.is_floating(dtype)
    compute = promotion.compute_dtype(dtype)
    with np.errstate(over="ignore"):
        replacements = [np.array(c[n]).astype(dtype).astype(compute)[()]
                        for n in ("nan", "posinf", "neginf")]

    def kernel(v) -> None:
        x = as_array(v["self"])
        if not floating:
            v.write("out", x)
            return
        x = x.astype(compute, copy=False)
        xp = array_module(x)
        if xp is np and np.isfinite(x).all():  # the common case: one look, then a copy
            v.write("out", x)
            return
        value = xp.where(xp.isnan(x), replacements[0], x)
        value = xp.where(value == np.inf, replacements[1], value)
        v.write("out", xp.where(value == -np.inf, replacements[2], value))
    return kernel


register_inplace("InplaceNanToNum", "selfRef: tensor!, nan: float = 0.0, "
                                    f"posinf: float = {FLOAT32_MAX!r}, "
                                    f"neginf: float = {-FLOAT32_MAX!r}", nan_to_num,
                 self="selfRef", out="selfRef")


# -- cross product ------------------------------------------------------------------------------
@register("LinalgCross", "self: tensor, other: tensor, dim: int = -1, out: tensor!")
def linalg_cross(c: Call) -> Kernel:
    """The cross product of 3-vectors along ``dim`` of self and other broadcast together
    (torch.linalg.cross); self, other and out share one dtype."""
    dtype = c.check_dtype("self", CROSS_DTYPES)
    if c.tensor("other").dtype != dtype:
        raise c.fail("other", f"dtype must equal self's ({dtype})")
    shape = c.broadcast("self", "other")
    dim = c.normalize_dim("dim", c["dim"], len(shape))
    if not shape or shape[dim] != CROSS_SIZE:
        raise c.fail("dim", f"the broadcast shape {list(shape)} must have {CROSS_SIZE} "
                            f"elements along dim {c['dim']}")
    c.check_out("out", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute, copy=False)
        y = as_array(v["other"]).astype(compute, copy=False)
        x, y = np.broadcast_arrays(x, y)
        v.write("out", np.cross(x, y, axis=dim))
    return kernel


# -- angle and polar ------------------------------------------------------------------------------
@register("AngleV2", "x: tensor, out: tensor!")
def angle_v2(c: Call) -> Kernel:
    """The argument of each element (torch.angle): pi for a negative real, 0 otherwise, NaN
    kept; a complex element's atan2(imag, real). Integers and bools give float32."""
    dtype = c.check_dtype("x", ANGLE_DTYPES)
    complex_input = promotion.category(dtype) == promotion.COMPLEX
    result = FLOAT32 if complex_input else _float_result(dtype)
    c.check_out("out", c.tensor("x").shape, result)
    if c["out"] is not None:
        c.check_dtype("out", ANGLE_OUT_DTYPES)
    compute = promotion.compute_dtype(result)

    @quiet
    def kernel(v) -> None:
        x = as_array(v["x"])
        if complex_input:
            v.write("out", np.angle(x))
            return
        x = x.astype(compute)
        xp = array_module(x)
        v.write("out", xp.where(xp.isnan(x), x, xp.where(x < 0, np.pi, 0.0).astype(compute)))
    return kernel


@register("Polar", "input: tensor, angle: tensor, out: tensor!")
def polar(c: Call) -> Kernel:
    """The complex number of modulus ``input`` and argument ``angle``:
    input * (cos(angle) + i sin(angle)) (torch.polar), float32 in, complex64 out."""
    for name in ("input", "angle"):
        c.check_dtype(name, POLAR_DTYPES)
    c.check_out("out", c.broadcast("input", "angle"), COMPLEX64, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        modulus = as_array(v["input"]).astype(FLOAT64)
        argument = as_array(v["angle"]).astype(FLOAT64)
        real, imag = np.broadcast_arrays(modulus * np.cos(argument), modulus * np.sin(argument))
        if type(real) is not np.ndarray:  # a device array: its module's complex build
            v.write("out", real + 1j * imag)
            return
        value = np.empty(real.shape, np.complex128)
        value.real, value.imag = real, imag  # (not real + 1j * imag: 1j * inf is nan + inf j)
        v.write("out", value)
    return kernel
