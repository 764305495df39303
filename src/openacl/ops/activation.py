"""Activation operators: Relu family, Gelu (tanh and erf forms), sigmoid family, Softplus,
Elu, Prelu, Softmax and LogSoftmax.

Semantics are aclnn's, which are PyTorch's. Argument names and order follow the aclnn
headers (``aclnnGeluV2(x, approximate, y)``, ``aclnnInplaceHardsigmoid(self)``). Supported
dtypes are the ones the aclnn documents list for the newest products, plus float64 for every
floating operator (the CPU reference dtype; torch accepts it everywhere). float16 and bfloat16
are computed in float32 and rounded once into the output.

Numerical care: sigmoid never evaluates ``exp`` of a large positive number (no inf/inf),
softmax subtracts the row maximum, and every kernel runs under ``np.errstate`` where NaN or
inf inputs are legal. Softplus is the exception on purpose: below its threshold it is
``log1p(exp(beta * x)) / beta`` in the compute dtype, so ``beta * x`` past exp's range
(about 88.7 in float32) gives inf, as CANN's kernel and torch do (see ``softplus``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.ops import native, promotion, random
from openacl.ops._special import NORMAL_TAIL_CLAMP, erf, erfc, normal_lower_tail
from openacl.ops.arithmetic import _binary, _operand
from openacl.ops.call import (
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    Call,
    Kernel,
    array_module,
    like,
)
from openacl.ops.fpstate import ignore_floating_point, quiet
from openacl.ops.registry import register, register_inplace

GELU_NONE, GELU_TANH = 0, 1  # aclnnGeluV2's approximate: 0 = erf form, 1 = tanh form
GELU_TANH_COEFF = 0.044715  # cubic term of the tanh approximation
GELU_TAIL_CLAMP_64 = 40.0  # Phi(-40) ~ 4e-350: 0 in float64 (float32: NORMAL_TAIL_CLAMP)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# elements per pass of a composite elementwise kernel over a large tensor: its temporaries
# stay in cache (measured: Hardswish on 2.4M floats 4.1 -> 1.9 ms; 2^13 pays call overhead)
ELEMENTWISE_CHUNK = 1 << 15
# a row of a block softmax-ed with the block's maximum as its shift is redone with its own
# maximum when its sum of exps is below this (its maximum is > ~20 below the block's)
SOFTMAX_SHARED_SHIFT_MIN_SUM = 2.0 ** -30
HARD_SIGMOID_SLOPE, HARD_SIGMOID_OFFSET = 1.0 / 6.0, 0.5  # Hardsigmoid = clip(x/6 + 1/2, 0, 1)
SELU_ALPHA = 1.6732632423543772848170429916717  # aclnnSelu's constants (its doc's formula)
SELU_SCALE = 1.0507009873554804934193349852946
FAST_GELU_COEFF = 1.702  # FastGelu(x) = x / (1 + exp(-1.702 x)) = x * sigmoid(1.702 x)

RELU_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in (np.int8, np.uint8, np.int32,
                                                             np.int64))
HARDSIGMOID_DTYPES = FLOAT_DTYPES | frozenset({np.dtype(np.int32)})
SIGMOID_DTYPES = FLOAT_DTYPES | COMPLEX_DTYPES
SELU_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in (np.int8, np.int32))
FLOAT32_DTYPE = np.dtype(np.float32)


# -- kernels (functions of arrays in the compute dtype) -----------------------------------------
def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) of an array in its compute dtype, without overflow; shared with the
    recurrent kernels (ops/rnn.py)."""
    if x.dtype.kind == "c":
        return 1.0 / (1.0 + np.exp(-x))
    # never exp of a positive number (no overflow): e / (1 + e) below 0, 1 / (1 + e) above,
    # the numerator exp(min(x, 0)) chosen without np.where (branch mispredictions)
    return np.exp(np.minimum(x, 0)) / (1.0 + np.exp(-np.abs(x)))


def _softplus_unit(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(x.dtype.type(0), x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))  # NaN propagates, as in torch


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = SQRT_2_OVER_PI * (x + GELU_TANH_COEFF * x * x * x)
    # 0.5 * (1 + tanh(u)) == sigmoid(2u), without the cancellation of 1 + tanh(u) near -1
    return x * sigmoid(2.0 * inner)


def _gelu_erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The erf form; float32 host arrays may give ``out`` (same shape and dtype, possibly
    ``x`` itself) to receive the result without a copy."""
    # x * Phi(x) == max(x, 0) - |x| * Phi(-|x|): one tail for both signs, no branch, no
    # cancellation. |x| is clamped where the tail underflows, so that +inf gives inf and
    # -inf gives 0, the limits (torch's kernel gives NaN for both: inf * 0)
    if x.dtype == np.float32 and type(x) is np.ndarray:
        shape, x = x.shape, x.reshape(-1)  # 1-d: in-place ufuncs need arrays, not 0-d
        magnitude = np.abs(x)
        np.minimum(magnitude, np.float32(NORMAL_TAIL_CLAMP), out=magnitude)
        tail = normal_lower_tail(magnitude)
        tail *= magnitude
        result = np.empty_like(x) if out is None else out.reshape(-1)
        np.maximum(x, np.float32(0.0), out=result)  # x is read here for the last time
        result -= tail
        return result.reshape(shape)
    # float64 (math.erfc per element) and device arrays (their erfc kernel)
    clamp = GELU_TAIL_CLAMP_64 if x.dtype == np.float64 else NORMAL_TAIL_CLAMP
    magnitude = np.minimum(np.abs(x), x.dtype.type(clamp))
    tail = 0.5 * erfc(magnitude / x.dtype.type(math.sqrt(2.0)))
    tail *= magnitude
    return np.maximum(x, x.dtype.type(0.0)) - tail


def gelu(x: np.ndarray, approximate: int = GELU_NONE) -> np.ndarray:
    """GELU of an array in its compute dtype: ``approximate`` 0 the erf form, 1 the tanh
    form (aclnnGeluV2's values); for fused kernels (aclnnFusedMatmul's gelu epilogues)."""
    if approximate != GELU_TANH:
        lib = native.kernels()
        if lib is not None and native.host_float32(x):
            out = np.empty_like(x)
            lib.gelu_erf(x, out)
            return out
    with ignore_floating_point():
        return _gelu_tanh(x) if approximate == GELU_TANH else _gelu_erf(x)


def _silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def _hardsigmoid(x: np.ndarray) -> np.ndarray:
    # an int32 input computes in floating point; the result truncates into the int32 output
    return np.clip(x * HARD_SIGMOID_SLOPE + HARD_SIGMOID_OFFSET, 0.0, 1.0)


def _hardswish(x: np.ndarray) -> np.ndarray:
    return x * _hardsigmoid(x)


def _relu_into(x: np.ndarray, out: np.ndarray) -> None:
    np.maximum(x, np.float32(0.0), out=out)


def _sigmoid_into(x: np.ndarray, out: np.ndarray) -> None:
    """Sigmoid of float32 ``x`` into ``out`` (the C kernel's numpy twin)."""
    np.copyto(out, sigmoid(x))


def _silu_into(x: np.ndarray, out: np.ndarray) -> None:
    np.copyto(out, _silu(x))


_SINGLE_PASS = frozenset({_relu_into})  # into-kernels that gain nothing from chunking


def _hardswish_into(x: np.ndarray, out: np.ndarray) -> None:
    """Hardswish of float32 ``x`` written into ``out`` (possibly ``x``): four passes, one
    temporary."""
    gate = np.multiply(x, np.float32(HARD_SIGMOID_SLOPE))
    gate += np.float32(HARD_SIGMOID_OFFSET)
    np.clip(gate, np.float32(0.0), np.float32(1.0), out=gate)
    np.multiply(x, gate, out=out)


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(_softplus_unit(x))


def selu(x: np.ndarray) -> np.ndarray:
    """``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))``; an integer input computes in
    float64 (its result truncates into the integer output, as Hardsigmoid's)."""
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    negative = np.expm1(np.minimum(x, 0)) * x.dtype.type(SELU_ALPHA)
    return np.where(x > 0, x, negative) * x.dtype.type(SELU_SCALE)  # NaN stays NaN


def fast_gelu(x: np.ndarray) -> np.ndarray:
    """``x / (1 + exp(-1.702 x))``, as ``x * sigmoid(1.702 x)``: no overflow of exp."""
    return x * sigmoid(x * x.dtype.type(FAST_GELU_COEFF))


def _squared_relu(x: np.ndarray) -> np.ndarray:
    positive = _relu(x)
    return positive * positive


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """``log(1 / (1 + exp(-x))) = min(x, 0) - log1p(exp(-|x|))``, without overflow."""
    return np.minimum(x, x.dtype.type(0)) - np.log1p(np.exp(-np.abs(x)))


# -- parameterless elementwise activations ------------------------------------------------------
def _elementwise(fn: Callable[[np.ndarray], np.ndarray], supported, exact_out: bool,
                 silent: bool = False,
                 self_name: str = "self", out_name: str = "out") -> Callable[[Call], Kernel]:
    """``out = fn(self)``. ``exact_out``: the output dtype must equal the input's (the aclnn
    doc says so), else any dtype the input's can be cast to."""
    kernel_fn = fn if silent else quiet(fn)

    into = _WRITES_INTO.get(fn)

    def prepare(c: Call) -> Kernel:
        dtype = c.check_dtype(self_name, supported)
        c.check_out(out_name, c.tensor(self_name).shape, dtype, exact_dtype=exact_out)
        compute = promotion.compute_dtype(dtype)

        def kernel(v) -> None:
            v.plan(kernel, lambda: _plan(kernel_fn, v, self_name, compute, out_name, into))()
        return kernel
    return prepare


def _plan(fn: Callable, v, self_name: str, compute: np.dtype, out_name: str,
          into: Callable | None) -> Callable[[], Any]:
    """The call's plan (``Views.plan``): the layout checks of ``_apply`` made once, a float32
    host call one C call (or one single-pass ufunc) on the arrays themselves."""
    x, out = v[self_name], v[out_name]
    if into is not None and x.dtype == compute and native.host_float32(x, out) and \
            _chunkable(x, out):
        lib = native.kernels()
        if into in _NATIVE_INTO and lib is not None:
            return functools.partial(getattr(lib, _NATIVE_INTO[into]), x, out)
        if into in _SINGLE_PASS:
            return functools.partial(into, x, out)
    return lambda: _apply(fn, v, v.compute(self_name, compute), out_name, into)


def _apply(fn: Callable[[np.ndarray], np.ndarray], v, x: np.ndarray, out_name: str,
           into: Callable[[np.ndarray, np.ndarray], Any] | None = None) -> None:
    """``out = fn(x)``, chunk by chunk over large contiguous tensors (``ELEMENTWISE_CHUNK``).
    ``into(x, out)``, where given, computes the same float32 results straight into ``out``
    (no result array, no copy): used when input and output are float32 host arrays."""
    out = v[out_name]
    if into in _NATIVE_INTO and native.host_float32(x, out) and _chunkable(x, out):
        lib = native.kernels()
        if lib is not None:  # one fused pass, straight into out
            getattr(lib, _NATIVE_INTO[into])(x, out)
            return
    if into in _NATIVE_INTO and native.host_float32(x) and out.dtype == np.float16 and \
            native.kernels() is not None:  # float16 out: one pass into float32, then rounded
        result = np.empty(x.shape, np.float32)
        getattr(native.kernels(), _NATIVE_INTO[into])(x, result)
        v.write(out_name, result)
        return
    if (into is not None and x.dtype == out.dtype == np.float32 and type(out) is np.ndarray
            and _chunkable(x, out)):
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        step = max(flat_x.size, 1) if into in _SINGLE_PASS else ELEMENTWISE_CHUNK
        with ignore_floating_point():
            for start in range(0, flat_x.size, step):
                into(flat_x[start:start + step], flat_out[start:start + step])
        return
    if x.size <= ELEMENTWISE_CHUNK or not _chunkable(x, out):
        v.write(out_name, fn(x))
        return
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for start in range(0, flat_x.size, ELEMENTWISE_CHUNK):
        stop = start + ELEMENTWISE_CHUNK
        np.copyto(flat_out[start:stop], fn(flat_x[start:stop]), casting="unsafe")


def _chunkable(x: np.ndarray, out: np.ndarray) -> bool:
    """Chunk-by-chunk evaluation computes the same: both contiguous, and either apart in
    memory or the very same elements (an in-place call)."""
    if type(x) is not np.ndarray or type(out) is not np.ndarray:
        return False  # device arrays: one kernel over the whole tensor (no host cache)
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        return False
    if not np.may_share_memory(x, out):
        return True
    return (x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
            and x.dtype.itemsize == out.dtype.itemsize)


# float32 kernels that write their results straight into the output (see _apply)
_WRITES_INTO: dict[Callable, Callable] = {_gelu_erf: _gelu_erf, _hardswish: _hardswish_into,
                                          _relu: _relu_into, sigmoid: _sigmoid_into,
                                          _silu: _silu_into}

# into-kernels the C extension also has, by its function names (see openacl.ops.native)
_NATIVE_INTO: dict[Callable, str] = {_gelu_erf: "gelu_erf", _hardswish_into: "hardswish",
                                     _sigmoid_into: "sigmoid", _silu_into: "silu"}

# name: (kernel, supported dtypes, output dtype must equal input's, in-place (name, ref arg),
# silent: its kernel never raises floating-point warnings; np.maximum not even on NaN)
_ELEMENTWISE = {
    "Relu": (_relu, RELU_DTYPES, True, ("InplaceRelu", "selfRef"), True),
    "Gelu": (_gelu_tanh, FLOAT_DTYPES, True, None, False),
    "Silu": (_silu, FLOAT_DTYPES, True, None, False),
    "Sigmoid": (sigmoid, SIGMOID_DTYPES, False, ("InplaceSigmoid", "selfRef"), False),
    "Hardsigmoid": (_hardsigmoid, HARDSIGMOID_DTYPES, True, ("InplaceHardsigmoid", "self"),
                    False),
    "Hardswish": (_hardswish, FLOAT_DTYPES, False, ("InplaceHardswish", "self"), False),
    "Mish": (_mish, FLOAT_DTYPES, True, ("InplaceMish", "selfRef"), False),
    "Selu": (selu, SELU_DTYPES, True, ("InplaceSelu", "selfRef"), False),
    "FastGelu": (fast_gelu, FLOAT_DTYPES, True, None, False),
    "LogSigmoid": (log_sigmoid, FLOAT_DTYPES, True, None, False),
}
for _name, (_fn, _supported, _exact, _inplace, _silent) in _ELEMENTWISE.items():
    _prepare = register(_name, "self: tensor, out: tensor!", silent=_silent)(
        _elementwise(_fn, _supported, _exact, _silent))
    if _inplace is not None:
        _inplace_name, _ref = _inplace
        if _ref == "self":  # CANN names the in-out tensor "self" here, not "selfRef"
            register_inplace(_inplace_name, "self: tensor!", _prepare, silent=_silent,
                             out="self")
        else:
            register_inplace(_inplace_name, f"{_ref}: tensor!", _prepare, silent=_silent,
                             self=_ref, out=_ref)
del _name, _fn, _supported, _exact, _inplace, _silent, _prepare, _inplace_name, _ref

# CANN names SquaredRelu's input "input" (aclnnSquaredRelu(input, out))
register("SquaredRelu", "input: tensor, out: tensor!")(
    _elementwise(_squared_relu, FLOAT_DTYPES, True, self_name="input"))


@register("LogSigmoidForward", "self: tensor, out: tensor!, buffer: tensor!?")
def log_sigmoid_forward(c: Call) -> Kernel:
    """LogSigmoid with CANN's second output ``buffer`` (unused by CANN's kernel: "暂无用");
    it is accepted and left as it is."""
    dtype = c.check_dtype("self", FLOAT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    fn = quiet(log_sigmoid)

    def kernel(v) -> None:
        _apply(fn, v, v.compute("self", compute), "out")
    return kernel


@register("GeluV2", "x: tensor, approximate: int = 0, y: tensor!")
def gelu_v2(c: Call) -> Kernel:
    """GELU with ``approximate`` 0 (none: the exact erf form) or 1 (the tanh form)."""
    approximate = c["approximate"]
    if approximate not in (GELU_NONE, GELU_TANH):
        raise c.fail("approximate", "expected 0 (none, the erf form) or 1 (tanh)")
    dtype = c.check_dtype("x", FLOAT_DTYPES)
    c.check_out("y", c.tensor("x").shape, dtype, exact_dtype=True)
    fn = quiet(_gelu_tanh if approximate == GELU_TANH else _gelu_erf)
    compute = promotion.compute_dtype(dtype)
    into = _WRITES_INTO.get(_gelu_tanh if approximate == GELU_TANH else _gelu_erf)

    def kernel(v) -> None:
        _apply(fn, v, v.compute("x", compute), "y", into)
    return kernel


# -- activations with scalar parameters ---------------------------------------------------------
def _float_input(c: Call, name: str = "self", out: str = "out") -> tuple[np.dtype, np.dtype]:
    """Validate a floating input and its castable output: returns (dtype, compute dtype)."""
    dtype = c.check_dtype(name, FLOAT_DTYPES)
    c.check_out(out, c.tensor(name).shape, dtype)
    return dtype, promotion.compute_dtype(dtype)


@register("LeakyRelu", "self: tensor, negativeSlope: scalar = 0.01, out: tensor!")
def leaky_relu(c: Call) -> Kernel:
    """``x`` where ``x > 0``, else ``negativeSlope * x``."""
    _, compute = _float_input(c)
    slope = c.scalar("negativeSlope", compute)

    @quiet
    def kernel(v) -> None:
        x = v.compute("self", compute)
        out = v["out"]
        lib = native.kernels()
        if lib is not None and np.isfinite(slope) and native.host_float32(x, out) and \
                _chunkable(x, out):  # one pass on the C kernels' pool, straight into out
            lib.leaky_relu(x, out, slope)
            return
        if np.isfinite(slope):  # max(x, 0) + slope * min(x, 0): branch-free, same rounding
            result = np.minimum(x, 0)
            result *= slope
            result += np.maximum(x, 0)
        else:
            result = np.where(x > 0, x, x * slope)
        v.write("out", result)
    return kernel


register_inplace("InplaceLeakyRelu", "selfRef: tensor!, negativeSlope: scalar = 0.01",
                 leaky_relu, self="selfRef", out="selfRef")


@register("Softplus", "self: tensor, beta: scalar = 1, threshold: scalar = 20, out: tensor!")
def softplus(c: Call) -> Kernel:
    """``log(1 + exp(beta * x)) / beta``, or ``x`` where ``beta * x > threshold``.

    Below the threshold (and everywhere for a NaN threshold, which no value exceeds) exp is
    evaluated as it is, so it overflows to inf past its range: CANN's SoftplusV2 kernel
    (hicann/ops-nn activation/softplus_v2/op_kernel/arch35/softplus_v2.h) computes
    ``exp(beta * x)`` in float32 where ``beta * x`` is not above the threshold and maps
    ``1 + e == inf`` to inf, and torch does the same."""
    _, compute = _float_input(c)
    beta = c.scalar("beta", compute)
    threshold = c.scalar("threshold", compute)

    @quiet
    def kernel(v) -> None:
        x = v.compute("self", compute)
        scaled = x * beta
        above = scaled > threshold
        below = np.log1p(np.exp(np.where(above, scaled.dtype.type(0), scaled))) / beta
        v.write("out", np.where(above, x, below))
    return kernel


@register("Elu", "self: tensor, alpha: scalar = 1, scale: scalar = 1, inputScale: scalar = 1, "
                 "out: tensor!")
def elu(c: Call) -> Kernel:
    """``scale * x`` where ``x > 0``, else ``alpha * scale * (exp(x * inputScale) - 1)``."""
    _, compute = _float_input(c)
    alpha, scale, input_scale = (c.scalar(n, compute) for n in ("alpha", "scale", "inputScale"))
    return _elu_kernel(compute, alpha, scale, input_scale)


def _chunked(fn: Callable[[np.ndarray], np.ndarray], compute: np.dtype) -> Kernel:
    """The kernel ``out = fn(self)`` in ``compute``, chunk by chunk over a large contiguous
    tensor (``_apply``: its temporaries stay in cache)."""
    @quiet  # (the cast into a narrower output may overflow, legally, too)
    def kernel(v) -> None:
        _apply(fn, v, v.compute("self", compute), "out")
    return kernel


def _elu_kernel(compute: np.dtype, alpha: Any, scale: Any, input_scale: Any) -> Kernel:
    def fn(x: np.ndarray) -> np.ndarray:
        negative = alpha * scale * np.expm1(np.minimum(x, 0) * input_scale)
        return np.where(x > 0, x * scale, negative)  # NaN stays NaN
    return _chunked(fn, compute)


register_inplace("InplaceElu", "selfRef: tensor!, alpha: scalar = 1, scale: scalar = 1, "
                               "inputScale: scalar = 1", elu, self="selfRef", out="selfRef")


@register("Celu", "self: tensor, alpha: scalar = 1.0, out: tensor!")
def celu(c: Call) -> Kernel:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``: Elu with inputScale 1 / alpha
    (the same values for a negative alpha too); alpha must not be 0."""
    _, compute = _float_input(c)
    alpha = c.scalar("alpha", compute)
    if alpha == 0:
        raise c.fail("alpha", "must not be 0")
    one = compute.type(1)
    return _elu_kernel(compute, alpha, one, one / alpha)


register_inplace("InplaceCelu", "selfRef: tensor!, alpha: scalar = 1.0", celu,
                 self="selfRef", out="selfRef")


@register("Swish", "self: tensor, betaOptional: scalar?, out: tensor!")
def swish(c: Call) -> Kernel:
    """``x * sigmoid(beta * x)``; a null ``betaOptional`` is beta 1 (Silu)."""
    dtype = c.check_dtype("self", FLOAT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    beta = c.scalar("betaOptional", compute) if c.has("betaOptional") else compute.type(1)

    return _chunked(lambda x: x * sigmoid(x * beta), compute)


def _lambd(c: Call, name: str, compute: np.dtype, non_negative: bool) -> Any:
    value = c.scalar(name, compute)
    if non_negative and not value >= 0:
        raise c.fail(name, f"must be >= 0, got {value}")
    return value


@register("Softshrink", "self: tensor, lambd: scalar = 0.5, out: tensor!")
def softshrink(c: Call) -> Kernel:
    """``x - lambd`` above lambd, ``x + lambd`` below -lambd, else 0 (lambd >= 0): computed
    as ``x - clip(x, -lambd, lambd)``, which keeps NaN and inf."""
    dtype = c.check_dtype("self", FLOAT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    lambd = _lambd(c, "lambd", compute, non_negative=True)

    return _chunked(lambda x: x - np.clip(x, -lambd, lambd), compute)


@register("Shrink", "self: tensor, lambd: scalar = 0.5, bias: scalar = 0.0, out: tensor!")
def shrink(c: Call) -> Kernel:
    """``x - bias`` above lambd, ``x + bias`` below -lambd, else 0 (lambd >= 0; NaN stays
    NaN)."""
    dtype = c.check_dtype("self", FLOAT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    lambd, bias = _lambd(c, "lambd", compute, non_negative=True), c.scalar("bias", compute)
    zero = compute.type(0)
    return _chunked(lambda x: np.where(x > lambd, x - bias, np.where(
        x < -lambd, x + bias, np.where(np.isnan(x), x, zero))), compute)


@register("Hardshrink", "self: tensor, lambd: scalar = 0.5, out: tensor!")
def hardshrink(c: Call) -> Kernel:
    """``x`` where ``|x| > lambd``, else 0 (NaN stays NaN, as in torch)."""
    dtype = c.check_dtype("self", FLOAT_DTYPES)
    c.check_out("out", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    lambd = _lambd(c, "lambd", compute, non_negative=False)

    zero = compute.type(0)
    return _chunked(lambda x: np.where((x >= -lambd) & (x <= lambd), zero, x), compute)


THRESHOLD_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in (
    np.int8, np.uint8, np.int16, np.int32, np.int64))


@register("Threshold", "self: tensor, threshold: scalar, value: scalar, out: tensor!")
def threshold(c: Call) -> Kernel:
    """``x`` where ``x > threshold``, else ``value``; the result dtype is self's promoted
    with both scalars (NaN stays NaN, as in torch)."""
    c.check_dtype("self", THRESHOLD_DTYPES)
    for name in ("threshold", "value"):
        c.check_dtype(name, NUMERIC_DTYPES)
    dtype = c.result_type("self", "threshold", "value")
    c.check_dtype("self", THRESHOLD_DTYPES, dtype)
    c.check_out("out", c.tensor("self").shape, dtype)
    compute = promotion.compute_dtype(dtype)
    limit, value = c.scalar("threshold", compute), c.scalar("value", compute)

    return _chunked(lambda x: np.where(x <= limit, value, x), compute)


register_inplace("InplaceThreshold", "selfRef: tensor!, threshold: scalar, value: scalar",
                 threshold, self="selfRef", out="selfRef")


@register("Heaviside", "input: tensor, values: tensor, out: tensor!")
def heaviside(c: Call) -> Kernel:
    """0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0``
    (broadcast; NaN gives 0, as torch's ``input == 0 ? values : input > 0``)."""
    for name in ("input", "values"):
        c.check_dtype(name, FLOAT_DTYPES)
    dtype = c.result_type("input", "values")
    c.check_out("out", c.broadcast("input", "values"), dtype)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        x, values = v.compute("input", compute), v.compute("values", compute)
        v.write("out", np.where(x == 0, values, (x > 0).astype(compute)))
    return kernel


ADD_RELU_DTYPES = THRESHOLD_DTYPES  # floats, int8/16/32/64, uint8


@register("AddRelu", "self: tensor, other: tensor, alpha: scalar = 1, out: tensor!")
def add_relu(c: Call) -> Kernel:
    """``relu(self + alpha * other)`` with Add's broadcasting and promotion."""
    for name in ("self", "other"):
        c.check_dtype(name, ADD_RELU_DTYPES)
    dtype, _ = _binary(c, "self", "other", "out", ADD_RELU_DTYPES)
    compute = promotion.compute_dtype(dtype)
    alpha = c.scalar("alpha", dtype)
    left, right = (_operand(c, name, dtype) for name in ("self", "other"))

    @quiet
    def kernel(v) -> None:
        total = np.add(left(v), np.multiply(right(v), alpha, dtype=compute), dtype=compute)
        v.write("out", _relu(total))
    return kernel


register_inplace("InplaceAddRelu", "selfRef: tensor!, other: tensor, alpha: scalar = 1",
                 add_relu, self="selfRef", out="selfRef")


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision:
# erfinv(x) = x * P(w) with w = -log((1 - x)(1 + x)), one polynomial each side of w = 5
ERFINV_SPLIT = 5.0
ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
ERFINV_NEWTON_STEPS = 2  # float64: each step doubles the ~1e-7 approximation's digits
ERFINV_DTYPES = FLOAT_DTYPES | frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64))


def _polynomial(coefficients: tuple[float, ...], w: np.ndarray) -> np.ndarray:
    f = w.dtype.type
    result = np.multiply(w, f(coefficients[0]))
    for coefficient in coefficients[1:-1]:
        result += f(coefficient)
        result *= w
    result += f(coefficients[-1])
    return result


def erfinv(x: np.ndarray) -> np.ndarray:
    """The inverse of erf in ``x``'s dtype (float32 or float64): Giles' approximation (its
    tail polynomial only where ``w >= 5``, |x| > 0.9966); +-1 give +-inf, |x| > 1 and NaN
    give NaN."""
    f, shape, x = x.dtype.type, x.shape, x.reshape(-1)  # 1-d: in-place ufuncs, masks
    w = np.multiply(f(1) - x, f(1) + x)
    np.log(w, out=w)
    np.negative(w, out=w)
    result = _polynomial(ERFINV_CENTRAL, w - f(2.5))
    tail = w >= f(ERFINV_SPLIT)  # (NaN is not: it stays NaN through the central branch)
    if tail.any():
        result[tail] = _polynomial(ERFINV_TAIL, np.sqrt(w[tail]) - f(3))
    result *= x
    poles = np.abs(x) == f(1)
    if poles.any():
        result[poles] = np.copysign(f(np.inf), x[poles])
    return result.reshape(shape)


def _erfinv_refined(x: np.ndarray) -> np.ndarray:
    y = erfinv(x)
    for _ in range(ERFINV_NEWTON_STEPS):
        finite = np.isfinite(y)
        step = (erf(y[finite]) - x[finite]) * (0.5 * math.sqrt(math.pi)) * np.exp(
            y[finite] ** 2)
        y[finite] -= step
    return y


@register("Erfinv", "self: tensor, out: tensor!")
def erfinv_op(c: Call) -> Kernel:
    """The inverse error function; an integer or bool input gives a float32 result."""
    dtype = c.check_dtype("self", ERFINV_DTYPES)
    result = dtype if promotion.is_floating(dtype) else promotion.DEFAULT_FLOAT
    c.check_out("out", c.tensor("self").shape, result)
    if c.has("out"):
        c.check_dtype("out", FLOAT_DTYPES)
    wide = result == np.float64

    compute = np.dtype(np.float64 if wide else np.float32)
    return _chunked(_erfinv_refined if wide else erfinv, compute)


register_inplace("InplaceErfinv", "selfRef: tensor!", erfinv_op, self="selfRef", out="selfRef")


RRELU_DTYPES = FLOAT_DTYPES - {np.dtype(np.float64)}  # CANN's FLOAT, FLOAT16, BFLOAT16


@register("RReluWithNoise", "self: tensor, noise: tensor, lower: scalar = 0.125, "
                            "upper: scalar = 0.3333333333333333, training: bool = False, "
                            "seed: int = 0, offset: int = 0, out: tensor!")
def rrelu_with_noise(c: Call) -> Kernel:
    """``x`` where ``x > 0``, else ``a * x``: in training ``a ~ U(lower, upper)`` per element,
    one word each of the Philox stream at (seed, offset) (ops/random.py), and ``noise``
    receives ``a`` there (1 where ``x > 0``) in its first elements; else a = (lower +
    upper) / 2 and noise is not touched."""
    dtype = c.check_dtype("self", RRELU_DTYPES)
    c.check_dtype("noise", {dtype})
    x, noise = c.tensor("self"), c.tensor("noise")
    if noise.numel < x.numel:
        raise c.fail("noise", f"has {noise.numel} elements, fewer than self's {x.numel}")
    if c["training"] and noise.shape != x.shape and not noise.meta.is_contiguous():
        raise c.fail("noise", "must be contiguous when its shape is not self's")
    if c["offset"] < 0:
        raise c.fail("offset", "must be >= 0")
    c.check_out("out", x.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    lower, upper = c.scalar("lower", compute), c.scalar("upper", compute)
    training, seed, offset = c["training"], int(c["seed"]), int(c["offset"])

    @quiet
    def kernel(v) -> None:
        value = v.compute("self", compute)
        if not training:
            v.write("out", np.where(value > 0, value, value * ((lower + upper) / 2)))
            return
        draws = random.uniform01(random.philox_words(seed, offset, x.numel)).astype(compute)
        slopes = like(value, (lower + (upper - lower) * draws).reshape(x.shape))
        positive = value > 0
        v.write("out", np.where(positive, value, value * slopes))
        written = np.where(positive, compute.type(1), slopes)
        target = v["noise"]
        if noise.shape == x.shape:
            v.write("noise", written)
        else:
            np.copyto(target.reshape(-1)[:x.numel], written.reshape(-1), casting="unsafe")
    return kernel


register_inplace("InplaceRReluWithNoise", "self: tensor!, noise: tensor, lower: scalar = 0.125, "
                                          "upper: scalar = 0.3333333333333333, "
                                          "training: bool = False, seed: int = 0, "
                                          "offset: int = 0", rrelu_with_noise, out="self")


@register("Prelu", "self: tensor, weight: tensor, out: tensor!")
def prelu(c: Call) -> Kernel:
    """``x`` where ``x > 0``, else ``weight[channel] * x``; channels are dim 1 (one channel
    for tensors of fewer than two dims); ``weight`` has one element or one per channel."""
    dtype = c.result_type("self", "weight")
    c.check_dtype("self", FLOAT_DTYPES)
    c.check_dtype("weight", FLOAT_DTYPES)
    self_arg, weight = c.tensor("self"), c.tensor("weight")
    channels = self_arg.shape[1] if self_arg.ndim >= 2 else 1
    if weight.numel not in (1, channels):
        raise c.fail("weight", f"must have 1 element or one per channel ({channels}, dim 1 "
                               f"of self {list(self_arg.shape)}); it has {weight.numel}")
    c.check_out("out", self_arg.shape, dtype)
    compute = promotion.compute_dtype(dtype)
    # weight reshaped to broadcast along dim 1
    weight_shape = (1, channels) + (1,) * (self_arg.ndim - 2) if weight.numel > 1 else ()

    @quiet
    def kernel(v) -> None:
        x = v.compute("self", compute)
        w = v.compute("weight", compute).reshape(weight_shape)
        v.write("out", np.where(x > 0, x, w * x))
    return kernel


# -- softmax ------------------------------------------------------------------------------------
def _softmax(log: bool) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        dtype = c.check_dtype("self", FLOAT_DTYPES)
        shape = c.tensor("self").shape
        if c["dim"] is None:  # int64_t in C; the Python face could pass None
            raise c.fail("dim", "an integer is required")
        axis = c.normalize_dim("dim", c["dim"], len(shape))
        c.check_out("out", shape, dtype)
        compute = promotion.compute_dtype(dtype)

        def rows(work: np.ndarray, along: int) -> np.ndarray:
            shifted = work - np.max(work, axis=along, keepdims=True)
            exp = np.exp(shifted)
            if log:  # log of a sum near 1 cancels: take it in float64, round once
                total = np.sum(exp, axis=along, keepdims=True, dtype=np.float64)
                return shifted - np.log(total)
            return exp / np.sum(exp, axis=along, keepdims=True)

        def planned(v) -> Callable[[], Any] | None:
            """The C kernel's call on float32 host rows (it raises no floating-point
            warnings: no errstate round trip), checked once (``Views.plan``)."""
            x, out = v["self"], v["out"]
            lib = None if log or axis != len(shape) - 1 else native.kernels()
            if lib is None or not native.host_float32(x, out) or x.size == 0 or \
                    not _chunkable(x, out):
                return None
            return functools.partial(lib.softmax_rows, x, out, shape[-1])

        def kernel(v) -> None:
            v.plan(kernel, lambda: planned(v) or functools.partial(general, v))()

        @quiet
        def general(v) -> None:
            x, out = v.compute("self", compute), v["out"]
            if x.size == 0:
                return
            lib = None if log or axis != x.ndim - 1 else native.kernels()
            if lib is not None and native.host_float32(x, out) and _chunkable(x, out):
                lib.softmax_rows(x, out, x.shape[-1])  # out: apart from x, or x itself
                return
            if lib is not None and native.host_float32(x) and out.dtype == np.float16:
                result = np.empty(x.shape, np.float32)  # float16 out: computed, then rounded
                lib.softmax_rows(x, result, x.shape[-1])
                v.write("out", result)
                return
            if (axis != x.ndim - 1 or x.size <= ELEMENTWISE_CHUNK
                    or not _chunkable(x, out)):
                work = x.reshape(1) if x.ndim == 0 else x
                v.write("out", rows(work, axis).reshape(x.shape))
                return
            length = x.shape[-1]
            # the last dim, large and contiguous: blocks of whole rows that stay in cache
            flat_x, flat_out = x.reshape(-1, length), out.reshape(-1, length)
            block = max(1, ELEMENTWISE_CHUNK // length)
            shared = not log and x.dtype == np.float32
            into = shared and flat_out.dtype == np.float32  # results straight into out
            for start in range(0, flat_x.shape[0], block):
                rows_in, rows_out = flat_x[start:start + block], flat_out[start:start + block]
                if shared:
                    result = _softmax_shared_shift(rows_in, rows, rows_out if into else None)
                else:
                    result = rows(rows_in, 1)
                if result is not rows_out:
                    np.copyto(rows_out, result, casting="unsafe")
        return kernel
    return prepare


def _softmax_shared_shift(block: np.ndarray, exact: Callable,
                          out: np.ndarray | None = None) -> np.ndarray:
    """Softmax of a block of float32 rows shifted by the *block's* maximum rather than each
    row's (a row maximum costs ~8x a block maximum in numpy), row sums by a BLAS
    matrix-vector product; into ``out`` (float32, possibly ``block`` itself) when given.
    Rows whose sum of exps falls below ``SOFTMAX_SHARED_SHIFT_MIN_SUM`` (their maximum is
    far below the block's: their exps would lose precision) are redone by
    ``exact(rows, axis)``, and so is a block that holds NaN or inf."""
    shift = block.max()
    if not np.isfinite(shift):
        return exact(block, 1)
    exps = np.subtract(block, shift)
    np.exp(exps, out=exps)
    sums = np.matmul(exps, np.ones(block.shape[1], np.float32))
    redo = np.flatnonzero(sums < SOFTMAX_SHARED_SHIFT_MIN_SUM)
    redone = exact(block[redo], 1) if redo.size else None  # before out may overwrite block
    np.reciprocal(sums, out=sums)
    result = exps if out is None else out
    np.multiply(exps, sums[:, None], out=result)
    if redone is not None:
        result[redo] = redone
    return result


softmax = register("Softmax", "self: tensor, dim: int, out: tensor!")(_softmax(log=False))
log_softmax = register("LogSoftmax", "self: tensor, dim: int, out: tensor!")(_softmax(log=True))


# -- ScaledMaskedSoftmax -------------------------------------------------------------------------
SCALED_SOFTMAX_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16,
                                                         np.float32))
MASKED_SCORE = -10000.0  # what CANN's kernel writes at masked positions before the softmax
SCALED_SOFTMAX_RANK = 4


def check_scaled_mask(c: Call, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """ScaledMaskedSoftmax's (and its backward's) rules: ``name`` is (B, N, S1, S2), the bool
    mask (1 or B, 1 or N, S1, S2), fixTriuMask false; returns both shapes."""
    shape = c.tensor(name).shape
    if len(shape) != SCALED_SOFTMAX_RANK:
        raise c.fail(name, f"must have 4 dims (B, N, S1, S2), got {list(shape)}")
    c.check_dtype("mask", {np.dtype(np.bool_)})
    mask_shape = c.tensor("mask").shape
    if len(mask_shape) != SCALED_SOFTMAX_RANK or mask_shape[2:] != shape[2:] or any(
            m not in (1, d) for m, d in zip(mask_shape[:2], shape[:2], strict=True)):
        raise c.fail("mask", f"shape must be (1 or {shape[0]}, 1 or {shape[1]}, {shape[2]}, "
                             f"{shape[3]}), got {list(mask_shape)}")
    if c["fixTriuMask"]:
        raise c.fail("fixTriuMask", "only False is supported (as on CANN)")
    return shape, mask_shape


@register("ScaledMaskedSoftmax", "x: tensor, mask: tensor, scale: float = 1.0, "
                                 "fixTriuMask: bool = False, y: tensor!")
def scaled_masked_softmax(c: Call) -> Kernel:
    """``y = softmax((scale * x).masked_fill(mask, -10000), dim=-1)``: x (B, C, S1, S2) in
    float32/16/bf16, mask bool (1 or B, 1 or C, S1, S2). An attention's scores, scaling and
    padding mask in one pass. ``fixTriuMask`` (a generated causal mask) is not supported,
    as on CANN's current products."""
    dtype = c.check_dtype("x", SCALED_SOFTMAX_DTYPES)
    shape, mask_shape = check_scaled_mask(c, "x")
    c.check_out("y", shape, dtype, exact_dtype=True)
    scale = float(c["scale"])

    @quiet
    def kernel(v) -> None:
        if not math.prod(shape):
            return
        x, mask, y = v.compute("x", FLOAT32_DTYPE), v["mask"], v["y"]
        lib = native.kernels()
        if (lib is not None and native.host_float32(x, y) and _chunkable(x, y)
                and type(mask) is np.ndarray and mask.flags.c_contiguous):
            lib.masked_softmax(x, mask, y, shape, mask_shape[:2], scale)
            return
        scores = x * np.float32(scale)
        scores = array_module(scores).where(mask, np.float32(MASKED_SCORE), scores)
        scores -= scores.max(axis=-1, keepdims=True)
        exps = array_module(scores).exp(scores)
        v.write("y", exps / exps.sum(axis=-1, keepdims=True))
    return kernel
