"""Arithmetic operators: binary (tensor and scalar forms), unary math, clamps, addc*.

Semantics are aclnn's, which are PyTorch's: broadcasting, type promotion
(``promotion.py``), integer ``Div`` producing float, float16/bfloat16 computed in float32
and rounded once into the output, NaN propagating through Maximum/Minimum/Clamp.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.ops import native, promotion
from openacl.ops._special import erf
from openacl.ops.call import (
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    REAL_DTYPES,
    Call,
    Kernel,
    TensorArg,
    array_module,
)
from openacl.ops.fpstate import ignore_floating_point, quiet
from openacl.ops.registry import register, register_inplace

ARITH_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES
DIV_MODE_NONE, DIV_MODE_TRUNC, DIV_MODE_FLOOR = 0, 1, 2  # aclnnDivMod's mode
ADD_V3_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int32, np.int8)) | \
    {promotion.BFLOAT16}


def _float_result(dtype: np.dtype) -> np.dtype:
    """Float ops on integer/bool inputs produce the default float dtype."""
    return dtype if promotion.category(dtype) >= promotion.FLOATING else promotion.DEFAULT_FLOAT


# -- binary ---------------------------------------------------------------------------------
def _binary(c: Call, a: str, b: str, out: str, supported, result: np.dtype | None = None,
            extra: tuple[str, ...] = ()) -> tuple[np.dtype, np.dtype]:
    """Common phase-1 of a binary elementwise op: returns (promoted dtype, result dtype)."""
    promoted = c.result_type(a, b, *extra)
    c.check_dtype(a, supported, promoted)
    shape = c.broadcast(*(n for n in (a, b) if isinstance(c[n], TensorArg)))
    result = promoted if result is None else result
    c.check_out(out, shape, result)
    return promoted, result


def _operand(c: Call, name: str, dtype: np.dtype, convert: bool = True) -> Callable:
    """Phase 1 decides how phase 2 reads operand ``name`` in the compute dtype of ``dtype``:
    the view itself, a converted copy of it, or a scalar constant. With ``convert=False`` a
    tensor is read as it is (a ufunc given ``dtype=`` converts it chunk by chunk instead),
    unless it is an integer operand of a half-precision result: that one is rounded to
    ``dtype`` first (``promotion.staged_dtype``)."""
    compute = promotion.compute_dtype(dtype)
    value = c[name]
    if isinstance(value, TensorArg):
        if promotion.staged_dtype(value.dtype, dtype) is not None:
            return lambda v: v.compute(name, dtype)
        if value.dtype == compute or not convert:
            return operator.itemgetter(name)  # C-level: the hot path of small ops
        return lambda v: v[name].astype(compute)
    constant = c.scalar(name, dtype)
    return lambda v: constant


def _ufunc_kernel(c: Call, fn: np.ufunc, left: Callable, right: Callable, out: str,
                  wide: np.dtype, names: tuple[str, str] = ("self", "other")) -> Kernel:
    """``out = fn(left, right)`` in one ufunc call: positional and cast-free when every
    tensor already has the compute dtype (the dispatch-critical case), else computing in
    ``wide`` and rounding once into the output. ``names``: the arguments ``left`` and
    ``right`` read."""
    if all(t.dtype == wide for t in c.tensors()):
        def kernel(v) -> None:
            fn(left(v), right(v), out=v[out])
        return kernel
    halves = wide == np.float32 and any(t.dtype == np.float16 for t in c.tensors()
                                        if not t.output)

    def kernel(v) -> None:
        target = v[out]
        if halves and type(target) is np.ndarray and target.dtype == np.float16:
            # float16 in and out: F16C conversions (numpy's float16 casts are ~10x slower)
            operands = [v.compute(name, np.float16) if isinstance(v.get(name), np.ndarray)
                        else operand(v) for name, operand in zip(names, (left, right), strict=True)]
            v.write(out, fn(*operands))
            return
        fn(left(v), right(v), out=v[out], dtype=wide, casting="unsafe")
    return kernel


def _add_like(sign: int, allow_bool: bool, reverse: bool = False,
              dtypes: frozenset[np.dtype] | None = None):
    """``self + alpha * other`` (``sign`` -1: minus); ``reverse``: ``other - alpha * self``
    (aclnnRsub, aclnnRsubs); ``dtypes``: a narrower dtype list than the arithmetic one."""
    first, second = ("other", "self") if reverse else ("self", "other")

    def prepare(c: Call) -> Kernel:
        supported = ARITH_DTYPES if allow_bool else ARITH_DTYPES - BOOL_DTYPES
        if dtypes is not None:  # the tensor's own dtype, and the promoted one (_binary)
            supported = dtypes
            for name in ("self", "other"):
                if isinstance(c[name], TensorArg):
                    c.check_dtype(name, supported)
        if not allow_bool:  # torch refuses a bool operand in subtraction, not just bool - bool
            for name in ("self", "other"):
                c.check_dtype(name, supported)
        dtype, _ = _binary(c, "self", "other", "out", supported)
        alpha = c.scalar("alpha", dtype) if c.has("alpha") else None

        combine = np.logical_or if dtype == np.bool_ else (np.add if sign > 0 else np.subtract)
        left, right = _operand(c, first, dtype), _operand(c, second, dtype)
        out = c._name("out")
        if alpha is None or alpha == 1:  # one buffered pass: inputs widened chunk by chunk
            left, right = _operand(c, first, dtype, False), _operand(c, second, dtype, False)
            return _ufunc_kernel(c, combine, left, right, out, promotion.compute_dtype(dtype),
                                 (first, second))
        scale = np.logical_and if dtype == np.bool_ else np.multiply

        def kernel(v) -> None:
            combine(left(v), scale(right(v), alpha), out=v[out], casting="unsafe")
        return kernel
    return prepare


add = register("Add", "self: tensor, other: tensor, alpha: scalar?, out: tensor!")(
    _add_like(+1, True))
adds = register("Adds", "self: tensor, other: scalar, alpha: scalar?, out: tensor!")(
    _add_like(+1, True))
sub = register("Sub", "self: tensor, other: tensor, alpha: scalar?, out: tensor!")(
    _add_like(-1, False))
subs = register("Subs", "self: tensor, other: scalar, alpha: scalar?, out: tensor!")(
    _add_like(-1, False))
# aclnnAddV3: a scalar self plus alpha times a tensor (the in-place form writes other)
add_v3 = register("AddV3", "self: scalar, other: tensor, alpha: scalar = 1, out: tensor!")(
    _add_like(+1, True, dtypes=ADD_V3_DTYPES))
register_inplace("InplaceAddV3", "selfRef: scalar, other: tensor!, alpha: scalar = 1", add_v3,
                 self="selfRef", out="other")
rsub = register("Rsub", "self: tensor, other: tensor, alpha: scalar = 1, out: tensor!")(
    _add_like(-1, False, reverse=True))
rsubs = register("Rsubs", "self: tensor, other: scalar, alpha: scalar = 1, out: tensor!")(
    _add_like(-1, False, reverse=True))
register_inplace("InplaceAdd", "selfRef: tensor!, other: tensor, alpha: scalar?", add,
                 self="selfRef", out="selfRef")
register_inplace("InplaceAdds", "selfRef: tensor!, other: scalar, alpha: scalar?", adds,
                 self="selfRef", out="selfRef")
register_inplace("InplaceSub", "selfRef: tensor!, other: tensor, alpha: scalar?", sub,
                 self="selfRef", out="selfRef")
register_inplace("InplaceSubs", "selfRef: tensor!, other: scalar, alpha: scalar?", subs,
                 self="selfRef", out="selfRef")


def _simple_binary(fn: Callable, supported, result: Callable[[np.dtype], np.dtype] | None = None
                   ) -> Callable[[Call], Kernel]:
    """A binary op ``out = fn(self, other)`` computed in the promoted dtype."""
    def prepare(c: Call) -> Kernel:
        promoted = c.result_type("self", "other")
        out_dtype = promoted if result is None else result(promoted)
        compute = out_dtype if result is not None else promoted
        _binary(c, "self", "other", "out", supported, out_dtype)

        left, right = _operand(c, "self", compute), _operand(c, "other", compute)
        out = c._name("out")
        if isinstance(fn, np.ufunc):  # one buffered pass: inputs widened chunk by chunk
            left, right = _operand(c, "self", compute, False), _operand(c, "other", compute,
                                                                         False)
            return _ufunc_kernel(c, fn, left, right, out, promotion.compute_dtype(compute))

        def kernel(v) -> None:
            v.store("out", fn, left(v), right(v))
        return kernel
    return prepare


mul = register("Mul", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.multiply, ARITH_DTYPES))  # bool * bool is logical and, as in torch
muls = register("Muls", "self: tensor, other: scalar, out: tensor!")(
    _simple_binary(np.multiply, ARITH_DTYPES))
div = register("Div", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.true_divide, ARITH_DTYPES, _float_result))
divs = register("Divs", "self: tensor, other: scalar, out: tensor!")(
    _simple_binary(np.true_divide, ARITH_DTYPES, _float_result))
maximum = register("Maximum", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.maximum, NUMERIC_DTYPES))
minimum = register("Minimum", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.minimum, NUMERIC_DTYPES))
for _name, _signature, _fn in (
    ("FmodTensor", "self: tensor, other: tensor, out: tensor!", np.fmod),
    ("FmodScalar", "self: tensor, other: scalar, out: tensor!", np.fmod),
    ("RemainderTensorTensor", "self: tensor, other: tensor, out: tensor!", np.remainder),
    ("RemainderTensorScalar", "self: tensor, other: scalar, out: tensor!", np.remainder),
    ("RemainderScalarTensor", "self: scalar, other: tensor, out: tensor!", np.remainder),
):
    register(_name, _signature)(_simple_binary(_fn, REAL_DTYPES))
atan2 = register("Atan2", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.arctan2, NUMERIC_DTYPES, _float_result))
register_inplace("InplaceAtan2", "selfRef: tensor!, other: tensor", atan2, self="selfRef",
                 out="selfRef")
# torch.floor_divide: floor of the quotient (integers: floor division, as Python's //);
# a bool / bool quotient is refused (torch: not implemented for Bool)
floor_divide = register("FloorDivide", "self: tensor, other: tensor, out: tensor!")(
    _simple_binary(np.floor_divide, REAL_DTYPES))
floor_divides = register("FloorDivides", "self: tensor, other: scalar, out: tensor!")(
    _simple_binary(np.floor_divide, REAL_DTYPES))
register_inplace("InplaceFloorDivide", "selfRef: tensor!, other: tensor", floor_divide,
                 self="selfRef", out="selfRef")
register_inplace("InplaceFloorDivides", "selfRef: tensor!, other: scalar", floor_divides,
                 self="selfRef", out="selfRef")
register_inplace("InplaceMul", "selfRef: tensor!, other: tensor", mul, self="selfRef",
                 out="selfRef")
register_inplace("InplaceMuls", "selfRef: tensor!, other: scalar", muls, self="selfRef",
                 out="selfRef")
register_inplace("InplaceDiv", "selfRef: tensor!, other: tensor", div, self="selfRef",
                 out="selfRef")
register_inplace("InplaceDivs", "selfRef: tensor!, other: scalar", divs, self="selfRef",
                 out="selfRef")


def _div_mod(c: Call) -> Kernel:
    """Division with a rounding mode: 0 true division, 1 truncate, 2 floor (DivMod; DivMods
    divides by a scalar)."""
    mode = c["mode"]
    if mode not in (DIV_MODE_NONE, DIV_MODE_TRUNC, DIV_MODE_FLOOR):
        raise c.fail("mode", "expected 0 (true division), 1 (trunc) or 2 (floor)")
    promoted = c.result_type("self", "other")
    result = _float_result(promoted) if mode == DIV_MODE_NONE else promoted
    _binary(c, "self", "other", "out", REAL_DTYPES, result)
    integer = promotion.category(result) <= promotion.INTEGER
    left, right = _operand(c, "self", result), _operand(c, "other", result)

    def kernel(v) -> None:
        x, y = left(v), right(v)
        if mode == DIV_MODE_NONE:
            value = np.true_divide(x, y)
        elif integer:
            value = np.floor_divide(x, y) if mode == DIV_MODE_FLOOR else _trunc_div_int(x, y)
        else:
            q = np.true_divide(x, y)
            value = np.floor(q) if mode == DIV_MODE_FLOOR else np.trunc(q)
        v.write("out", value)
    return kernel


div_mod = register("DivMod", "self: tensor, other: tensor, mode: int, out: tensor!")(_div_mod)
div_mods = register("DivMods", "self: tensor, other: scalar, mode: int, out: tensor!")(_div_mod)
register_inplace("InplaceDivMod", "selfRef: tensor!, other: tensor, mode: int", div_mod,
                 self="selfRef", out="selfRef")
register_inplace("InplaceDivMods", "selfRef: tensor!, other: scalar, mode: int", div_mods,
                 self="selfRef", out="selfRef")


def _trunc_div_int(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    quotient = np.floor_divide(x, y)
    remainder = np.remainder(x, y)
    return np.where((remainder != 0) & ((x < 0) != (y < 0)), quotient + 1, quotient)


def _pow_prepare(c: Call) -> Kernel:
    dtype = c.result_type("self", "exponent")
    c.check_dtype("self", ARITH_DTYPES - BOOL_DTYPES if dtype != np.bool_ else BOOL_DTYPES
                  | ARITH_DTYPES, dtype)
    tensors = [n for n in ("self", "exponent") if isinstance(c[n], TensorArg)]
    c.check_out("out", c.broadcast(*tensors), dtype)

    integer = promotion.category(dtype) == promotion.INTEGER
    exponent_arg = c["exponent"]
    if integer and not isinstance(exponent_arg, TensorArg) and exponent_arg.value < 0:
        raise c.fail("exponent", "integers to negative integer powers are not allowed")
    read_base, read_exponent = _operand(c, "self", dtype), _operand(c, "exponent", dtype)
    # float tensors already of their compute dtype: np.power straight into the output
    direct = not integer and dtype == promotion.compute_dtype(dtype) and all(
        c.tensor(name).dtype == dtype for name in tensors)

    def kernel(v) -> None:
        if direct:
            v.plan(kernel, lambda: _power_plan(v, read_base, read_exponent) or
                   functools.partial(general, v))()
        else:
            general(v)

    def general(v) -> None:
        base, exponent = read_base(v), read_exponent(v)
        if integer:
            v.write("out", _integer_power(base, exponent))
        else:
            v.write("out", np.power(base, exponent))
    return kernel


def _power_plan(v, read_base: Callable, read_exponent: Callable) -> Callable[[], Any] | None:
    """Pow's plan (``Views.plan``) where every tensor operand has the float compute dtype
    (the readers return the views themselves, or a scalar constant): one ``np.power`` into
    a host output of that dtype; None otherwise."""
    out = v["out"]
    base, exponent = read_base(v), read_exponent(v)
    if type(out) is not np.ndarray or any(type(x) is not np.ndarray and hasattr(x, "shape")
                                          for x in (base, exponent)):
        return None
    return functools.partial(np.power, base, exponent, out=out, casting="unsafe")


def _integer_power(base, exponent):
    """PyTorch's integer pow: a negative exponent gives 1 for base 1, +-1 for base -1
    (by the exponent's parity), and 0 otherwise."""
    xp = array_module(base) if hasattr(base, "shape") else array_module(exponent)
    base, exponent = xp.broadcast_arrays(xp.asarray(base), xp.asarray(exponent))
    negative = exponent < 0
    result = np.power(base, np.where(negative, 0, exponent))
    if negative.any():
        odd = (exponent % 2) != 0
        tiny = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
        result = np.where(negative, tiny.astype(result.dtype), result)
    return result


pow_tensor_tensor = register("PowTensorTensor", "self: tensor, exponent: tensor, out: tensor!"
                             )(_pow_prepare)
pow_tensor_scalar = register("PowTensorScalar", "self: tensor, exponent: scalar, out: tensor!"
                             )(_pow_prepare)
pow_scalar_tensor = register("PowScalarTensor", "self: scalar, exponent: tensor, out: tensor!"
                             )(_pow_prepare)


def _addc(fn: Callable, supported) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        dtype = c.result_type("self", "tensor1", "tensor2")
        c.check_dtype("self", supported, dtype)
        c.check_out("out", c.broadcast("self", "tensor1", "tensor2"), dtype)
        value = c.scalar("value", dtype)
        # floats: the sum of self and a product that nearly cancel it is formed in float64
        # (one rounding, into out); integers compute in their own dtype
        wide = np.dtype(np.float64) if promotion.is_floating(dtype) else None

        def read(v, name: str):
            operand = v.compute(name, dtype)
            return operand if wide is None else operand.astype(wide)

        def kernel(v) -> None:
            v.write("out", read(v, "self") + value * fn(read(v, "tensor1"), read(v, "tensor2")))
        return kernel
    return prepare


addcmul = register("Addcmul", "self: tensor, tensor1: tensor, tensor2: tensor, value: scalar, "
                              "out: tensor!")(_addc(np.multiply, REAL_DTYPES))
addcdiv = register("Addcdiv", "self: tensor, tensor1: tensor, tensor2: tensor, value: scalar, "
                              "out: tensor!")(_addc(np.true_divide, FLOAT_DTYPES))


# -- clamps ------------------------------------------------------------------------------------
def _same_or_apart(x: np.ndarray, out: np.ndarray) -> bool:
    """Both contiguous, and either the very same elements or apart in memory: what a
    chunked elementwise pass may take."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        return False
    return not np.may_share_memory(x, out) or (
        x.__array_interface__["data"][0] == out.__array_interface__["data"][0])


def _clamp(low: str | None, high: str | None) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        bounds = [n for n in (low, high) if n is not None and c.has(n)]
        if not bounds:
            raise c.fail(low or high, "at least one of the bounds must be given")
        dtype = c.result_type("self", *bounds)
        c.check_dtype("self", REAL_DTYPES, dtype)
        tensors = ["self"] + [n for n in bounds if isinstance(c[n], TensorArg)]
        c.check_out("out", c.broadcast(*tensors), dtype)

        read_low = _operand(c, low, dtype) if low is not None and c.has(low) else None
        read_high = _operand(c, high, dtype) if high is not None and c.has(high) else None
        # float32 between scalar bounds: the C kernels' one pass (numpy's maximum and
        # minimum are two, each slower than a plain copy)
        scalar_bounds = dtype == np.float32 and not any(
            isinstance(c[n], TensorArg) for n in bounds)
        limits = (float(c.scalar(low, dtype)) if read_low is not None else -np.inf,
                  float(c.scalar(high, dtype)) if read_high is not None else np.inf) \
            if scalar_bounds else None

        def planned(v) -> Callable[[], Any] | None:
            """The C clamp on float32 host arrays (``Views.plan``); None elsewhere (NaN
            bounds too: np.maximum's NaN wins, the C comparisons' would not)."""
            x, out = v["self"], v["out"]
            lib = native.kernels()
            if limits is None or lib is None or any(math.isnan(b) for b in limits) or \
                    not native.host_float32(x, out) or x.shape != out.shape or \
                    not _same_or_apart(x, out):
                return None
            return functools.partial(lib.clamp, x, out, *limits)

        def kernel(v) -> None:
            v.plan(kernel, lambda: planned(v) or functools.partial(general, v))()

        def general(v) -> None:  # np.maximum/np.minimum propagate a NaN from either side
            x, out = v.compute("self", dtype), v["out"]
            if type(x) is np.ndarray and type(out) is np.ndarray and x.dtype == out.dtype:
                source = x  # host arrays of one dtype: the bounds applied straight into out
                if read_low is not None:
                    np.maximum(source, read_low(v), out=out)
                    source = out
                if read_high is not None:
                    np.minimum(source, read_high(v), out=out)
                return
            if read_low is not None:
                x = np.maximum(x, read_low(v))
            if read_high is not None:
                x = np.minimum(x, read_high(v))
            v.write("out", x)
        return kernel
    return prepare


clamp = register("Clamp", "self: tensor, clipValueMin: scalar?, clipValueMax: scalar?, "
                          "out: tensor!")(_clamp("clipValueMin", "clipValueMax"))
clamp_min = register("ClampMin", "self: tensor, clipValueMin: scalar, out: tensor!")(
    _clamp("clipValueMin", None))
clamp_max = register("ClampMax", "self: tensor, clipValueMax: scalar, out: tensor!")(
    _clamp(None, "clipValueMax"))
clamp_tensor = register("ClampTensor", "self: tensor, clipValueMin: tensor?, "
                                       "clipValueMax: tensor?, out: tensor!")(
    _clamp("clipValueMin", "clipValueMax"))


# -- unary ---------------------------------------------------------------------------------------
def _unary(fn: Callable, supported, to_float: bool = False, keep_int: bool = False,
           native_name: str | None = None) -> Callable[[Call], Kernel]:
    """``out = fn(self)``. ``to_float``: integer input gives a float32 result;
    ``keep_int``: integer input is returned unchanged (floor/ceil/round of an int);
    ``native_name``: the C kernel that computes ``fn`` of float32 host arrays in one pass
    on the pool (``NATIVE_UNARY``)."""
    def prepare(c: Call) -> Kernel:
        source = c.check_dtype("self", supported)
        result = _float_result(source) if to_float else source
        c.check_out("out", c.tensor("self").shape, result)
        identity = keep_int and promotion.category(source) <= promotion.INTEGER
        direct = (isinstance(fn, np.ufunc) or native_name is not None) and not identity \
            and source == result == promotion.compute_dtype(result)  # nothing to convert

        def kernel(v) -> None:
            if direct:
                v.plan(kernel, lambda: _unary_plan(v, fn, native_name) or
                       functools.partial(general, v))()
            else:
                general(v)

        def general(v) -> None:
            x = v.compute("self", result)
            if identity:
                v.write("out", x)
            else:
                v.store("out", fn, x)
        return kernel
    return prepare


def _unary_plan(v, fn: Callable, native_name: str | None = None
                ) -> Callable[[], Any] | None:
    """A unary ufunc's plan (``Views.plan``) where the input is in its compute dtype: the C
    kernel ``native_name`` on float32 host arrays it can take (contiguous, apart or the
    same), else the ufunc on the host arrays, straight into the output (``Views.store``'s
    call, its checks made once); None for device arrays."""
    x, out = v["self"], v["out"]
    if type(x) is not np.ndarray or type(out) is not np.ndarray:
        return None
    lib = native.kernels() if native_name is not None else None
    if lib is not None and native.host_float32(x, out) and native.apart_or_same(out, x):
        return functools.partial(getattr(lib, native_name), x, out)
    if not isinstance(fn, np.ufunc):
        return None
    return functools.partial(fn, x, out=out, casting="unsafe")


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with ignore_floating_point():
        return 1.0 / np.sqrt(x)


def _reciprocal(x: np.ndarray) -> np.ndarray:
    with ignore_floating_point():
        return np.reciprocal(x.astype(_float_result(x.dtype), copy=False))


SIGNED_ARITH = ARITH_DTYPES - BOOL_DTYPES - {np.dtype(np.uint8)}
_UNARY = {
    # name: (function, supported dtypes, integer -> float32, integer unchanged)
    "Neg": (np.negative, SIGNED_ARITH, False, False),
    "Abs": (np.abs, REAL_DTYPES, False, False),
    "Reciprocal": (_reciprocal, ARITH_DTYPES, True, False),
    "Sqrt": (quiet(np.sqrt), ARITH_DTYPES, True, False),
    "Rsqrt": (_rsqrt, ARITH_DTYPES, True, False),
    "Exp": (quiet(np.exp), ARITH_DTYPES, True, False),
    "Log": (quiet(np.log), ARITH_DTYPES, True, False),
    "Log2": (quiet(np.log2), ARITH_DTYPES, True, False),
    "Log1p": (quiet(np.log1p), REAL_DTYPES | BOOL_DTYPES, True, False),
    "Sin": (np.sin, ARITH_DTYPES, True, False),
    "Cos": (np.cos, ARITH_DTYPES, True, False),
    "Tanh": (np.tanh, ARITH_DTYPES, True, False),
    "Tan": (quiet(np.tan), ARITH_DTYPES, True, False),
    "Asin": (quiet(np.arcsin), ARITH_DTYPES, True, False),
    "Acos": (quiet(np.arccos), ARITH_DTYPES, True, False),
    "Atan": (np.arctan, ARITH_DTYPES, True, False),
    "Sinh": (quiet(np.sinh), ARITH_DTYPES, True, False),
    "Cosh": (quiet(np.cosh), ARITH_DTYPES, True, False),
    "Asinh": (np.arcsinh, ARITH_DTYPES, True, False),
    "Acosh": (quiet(np.arccosh), ARITH_DTYPES, True, False),
    "Atanh": (quiet(np.arctanh), ARITH_DTYPES, True, False),
    "Erf": (erf, REAL_DTYPES | BOOL_DTYPES, True, False),
    "Floor": (np.floor, REAL_DTYPES, False, True),
    "Ceil": (np.ceil, REAL_DTYPES, False, True),
    "Round": (np.rint, REAL_DTYPES, False, True),  # (np.round's own at 0 decimals: a ufunc)
    "Sign": (lambda x: x if x.dtype == np.bool_ else np.sign(x), REAL_DTYPES | BOOL_DTYPES,
             False, False),
}
# the C kernels (openacl._native) of float32 host arrays: the same function within a few ulp
# (their docstrings say how many), 3-30x faster than numpy's on an AVX2 CPU
NATIVE_UNARY = {"Tanh": "tanh", "Exp": "exp", "Erf": "erf"}
for _name, (_fn, _supported, _to_float, _keep_int) in _UNARY.items():
    _prepare = register(_name, "self: tensor, out: tensor!")(
        _unary(_fn, _supported, _to_float, _keep_int, NATIVE_UNARY.get(_name)))
    register_inplace(f"Inplace{_name}", "selfRef: tensor!", _prepare, self="selfRef",
                     out="selfRef")
del _name, _fn, _supported, _to_float, _keep_int, _prepare, _signature
