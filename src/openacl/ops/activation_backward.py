"""Backward operators of the activations: the gradient of an activation's input from the
gradient of its output (``gradOutput``) and the forward input or output.

Semantics are PyTorch's autograd formulas (``torch.ops.aten.*_backward``), which CANN's
docs state (hicann/ops-nn activation/*_grad/docs); argument names and order are CANN's.
float16 and bfloat16 compute in float32 and round once into the output. Inputs broadcast
where CANN's doc says so (GeluBackward, SigmoidBackward ...), else must match in shape.
Where torch's formula gives NaN at an infinite input (GELU's ``x * pdf(x)`` is inf * 0),
so does this one: the goldens are torch's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.ops import native, promotion
from openacl.ops._special import NORMAL_TAIL_CLAMP, erfc, normal_lower_tail
from openacl.ops.activation import (
    ELEMENTWISE_CHUNK,
    FAST_GELU_COEFF,
    GELU_NONE,
    GELU_TANH,
    GELU_TANH_COEFF,
    SCALED_SOFTMAX_DTYPES,
    SELU_ALPHA,
    SELU_DTYPES,
    SELU_SCALE,
    SIGMOID_DTYPES,
    SQRT_2_OVER_PI,
    THRESHOLD_DTYPES,
    _chunkable,
    check_scaled_mask,
    sigmoid,
)
from openacl.ops.activation_glu import (
    HALF_FLOAT_DTYPES,
    clipped_rows,
    clipped_split,
    clipped_swiglu_attributes,
    gate_halves,
    merged_view,
    situ_parts,
    situ_split,
)
from openacl.ops.activation_glu import split_halves as _split_halves
from openacl.ops.call import FLOAT_DTYPES, NUMERIC_DTYPES, Call, Kernel, array_module
from openacl.ops.fpstate import quiet
from openacl.ops.registry import register

__all__ = ["gelu_grad", "swish_grad"]

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # the standard normal pdf's constant
# a float32 derivative below this fraction of its leading term is recomputed in float64
# (``_refined_near_roots``). Measured over 2M points of [-12, 12]: the float32 values whose
# relative error passes 2^-13 (next to GELU's and SiLU's roots) are below 0.0023 of it;
# 1/16 leaves a wide margin and recomputes ~0.5% of the elements
ROOT_BAND = 1.0 / 16
HARD_LIMIT = 3.0  # Hardswish / Hardsigmoid are linear on [-3, 3]
GELU_MODES = {"none": GELU_NONE, "tanh": GELU_TANH}  # GeluBackwardV2's approximate
TANH_DTYPES = FLOAT_DTYPES
SOFTPLUS_SELF_DTYPES = NUMERIC_DTYPES


# -- derivatives (functions of arrays in the compute dtype) -------------------------------------
def _refined_near_roots(terms: Callable[..., tuple[np.ndarray, np.ndarray]]) -> Callable:
    """A derivative from ``terms(x, *args) -> (value, leading term)``, recomputed in float64
    where the value is below ``ROOT_BAND`` of its leading term: next to a root of the
    derivative (GELU's at x ~ -0.75, SiLU's at x ~ -1.28) its terms cancel and a float32
    evaluation loses the relative precision CANN's standard asks of the result."""
    @functools.wraps(terms)
    def derivative(x: np.ndarray, *args: Any) -> np.ndarray:
        shape, flat = x.shape, x.reshape(-1)
        value, term = terms(flat, *args)
        if flat.dtype != np.float64:
            near = abs(value) < flat.dtype.type(ROOT_BAND) * abs(term)
            if near.any():
                value[near] = terms(flat[near].astype(np.float64), *args)[0]
        return value.reshape(shape)
    return derivative


@_refined_near_roots
def gelu_grad(x: np.ndarray, approximate: int = GELU_NONE) -> tuple[np.ndarray, np.ndarray]:
    """d gelu(x) / dx: ``Phi(x) + x * pdf(x)`` (erf form) or the tanh form's derivative."""
    f = x.dtype.type
    if approximate == GELU_TANH:
        # with u the tanh's argument, 0.5 (1 + tanh u) = sigmoid(2u) and 1 - tanh^2 u =
        # 4 sigmoid(2u) sigmoid(-2u): no cancellation in the tails
        inner = f(2 * SQRT_2_OVER_PI) * (x + f(GELU_TANH_COEFF) * x * x * x)
        slope = f(SQRT_2_OVER_PI) * (f(1) + f(3 * GELU_TANH_COEFF) * x * x)
        lead = sigmoid(inner)
        return lead * (f(1) + f(2) * x * sigmoid(-inner) * slope), lead
    if x.dtype == np.float32 and type(x) is np.ndarray:  # one tail, Phi(-|x|), both signs
        tail = normal_lower_tail(np.minimum(np.abs(x), f(NORMAL_TAIL_CLAMP)))
        cdf = np.where(x >= 0, f(1) - tail, tail)
    else:
        cdf = f(0.5) * erfc(-x * f(1 / math.sqrt(2.0)))
    return cdf + x * np.exp(f(-0.5) * x * x) * f(INV_SQRT_2PI), cdf


@_refined_near_roots
def swish_grad(x: np.ndarray, beta: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """d (x * sigmoid(beta x)) / dx = ``s * (1 + beta x (1 - s))``, s = sigmoid(beta x)."""
    f = x.dtype.type
    scaled = x * f(beta)
    s = sigmoid(scaled)
    return s * (f(1) + scaled * sigmoid(-scaled)), s


@_refined_near_roots
def mish_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d (x tanh(softplus(x))) / dx = ``t + x sigmoid(x) (1 - t^2)``, t = tanh(softplus(x))."""
    f = x.dtype.type
    t = np.tanh(np.logaddexp(f(0), x))
    return t + x * sigmoid(x) * (f(1) - t * t), t


def hardswish_grad(x: np.ndarray) -> np.ndarray:
    """0 below -3, ``x / 3 + 1/2`` up to 3, 1 above (torch's hardswish_backward)."""
    f = x.dtype.type
    return np.where(x < f(-HARD_LIMIT), f(0), np.where(x <= f(HARD_LIMIT),
                                                      x / f(HARD_LIMIT) + f(0.5), f(1)))


def hardswish_grad_v2(x: np.ndarray) -> np.ndarray:
    """HardswishBackwardV2's: 0 up to -3, ``x / 3 + 1/2`` strictly inside, 1 from 3 on."""
    f = x.dtype.type
    return np.where(x <= f(-HARD_LIMIT), f(0), np.where(x < f(HARD_LIMIT),
                                                       x / f(HARD_LIMIT) + f(0.5), f(1)))


def hardsigmoid_grad(x: np.ndarray) -> np.ndarray:
    """1/6 strictly inside (-3, 3), else 0 (torch's hardsigmoid_backward)."""
    f = x.dtype.type
    return np.where((x > f(-HARD_LIMIT)) & (x < f(HARD_LIMIT)), f(1 / 6), f(0))


def _conj(value: np.ndarray) -> np.ndarray:
    """torch's complex gradients carry the conjugate of the derivative."""
    return np.conj(value) if value.dtype.kind == "c" else value


# -- the common elementwise form --------------------------------------------------------------
def _prepare(c: Call, grad: str, x: str, out: str, supported, *, same_dtype: bool = False,
             same_shape: bool = False, exact: bool = False, x_supported=None) -> np.dtype:
    """Phase 1 of ``out = f(gradOutput, x)``: dtypes in ``supported`` (``x_supported`` for
    ``x``), equal when ``same_dtype``; shapes equal or broadcast; returns the result
    dtype."""
    c.check_dtype(grad, supported)
    c.check_dtype(x, supported if x_supported is None else x_supported)
    if same_dtype and c.dtype(grad) != c.dtype(x):
        raise c.fail(x, f"dtype must be {grad}'s ({c.dtype(grad)})")
    if same_shape and c.tensor(grad).shape != c.tensor(x).shape:
        raise c.fail(x, f"shape must be {grad}'s {list(c.tensor(grad).shape)}")
    dtype = c.result_type(grad, x)
    c.check_out(out, c.broadcast(grad, x), dtype, exact_dtype=exact)
    return dtype


def _elementwise(c: Call, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], dtype: np.dtype,
                 grad: str = "gradOutput", x: str = "self", out: str = "gradInput") -> Kernel:
    """The kernel ``out = fn(gradOutput, x)`` in the compute dtype of ``dtype``; chunk by
    chunk (``ELEMENTWISE_CHUNK`` elements: the temporaries stay in cache) where both inputs
    and the output are large contiguous host arrays of one shape."""
    compute = promotion.compute_dtype(dtype)
    chunked = all(promotion.staged_dtype(c.dtype(n), dtype) is None for n in (grad, x))

    @quiet
    def kernel(v) -> None:
        a, b, target = v[grad], v[x], v[out]
        if chunked and a.shape == b.shape == target.shape and a.size > ELEMENTWISE_CHUNK \
                and _chunkable(a, target) and _chunkable(b, target):
            flat_a, flat_b, flat_out = a.reshape(-1), b.reshape(-1), target.reshape(-1)
            for start in range(0, flat_a.size, ELEMENTWISE_CHUNK):
                part = slice(start, start + ELEMENTWISE_CHUNK)
                np.copyto(flat_out[part], fn(native.cast(flat_a[part], compute),
                                             native.cast(flat_b[part], compute)),
                          casting="unsafe")
            return
        v.write(out, fn(v.compute(grad, compute), v.compute(x, compute)))
    return kernel


def _simple(derivative: Callable[[np.ndarray], np.ndarray], supported, x: str = "self",
            out: str = "gradInput", **rules: bool) -> Callable[[Call], Kernel]:
    """``gradInput = gradOutput * derivative(x)``."""
    def prepare(c: Call) -> Kernel:
        dtype = _prepare(c, "gradOutput", x, out, supported, **rules)
        return _elementwise(c, lambda g, value: g * _conj(derivative(value)), dtype, x=x,
                            out=out)
    return prepare


register("GeluBackward", "gradOutput: tensor, self: tensor, gradInput: tensor!")(
    _simple(gelu_grad, FLOAT_DTYPES))
register("FastGeluBackward", "gradOutput: tensor, self: tensor, gradInput: tensor!")(
    _simple(lambda x: swish_grad(x, FAST_GELU_COEFF), FLOAT_DTYPES, same_dtype=True,
            same_shape=True, exact=True))
register("SiluBackward", "gradOutput: tensor, self: tensor, gradInput: tensor!")(
    _simple(swish_grad, FLOAT_DTYPES, same_dtype=True, exact=True))
register("SigmoidBackward", "gradOutput: tensor, output: tensor, gradInput: tensor!")(
    _simple(lambda y: y * (1 - y), SIGMOID_DTYPES, x="output"))
register("TanhBackward", "gradOutput: tensor, output: tensor, gradInput: tensor!")(
    _simple(lambda y: 1 - y * y, TANH_DTYPES, x="output", same_dtype=True))
register("LogSigmoidBackward", "gradOutput: tensor, self: tensor, buffer: tensor, "
                               "gradInput: tensor!")(
    _simple(lambda x: sigmoid(-x), FLOAT_DTYPES, same_dtype=True, same_shape=True,
            exact=True))


register("MishBackward", "gradOutput: tensor, self: tensor, gradInput: tensor!")(
    _simple(mish_grad, HALF_FLOAT_DTYPES))
register("HardswishBackward", "gradOutput: tensor, self: tensor, out: tensor!")(
    _simple(hardswish_grad, HALF_FLOAT_DTYPES, out="out", same_dtype=True, same_shape=True,
            exact=True))
register("HardswishBackwardV2", "gradOutput: tensor, self: tensor, out: tensor!")(
    _simple(hardswish_grad_v2, HALF_FLOAT_DTYPES, out="out", same_dtype=True, same_shape=True,
            exact=True))
register("HardsigmoidBackward", "gradOutput: tensor, self: tensor, out: tensor!")(
    _simple(hardsigmoid_grad, HALF_FLOAT_DTYPES, out="out", same_shape=True))


@register("HardtanhBackward", "gradOutput: tensor, self: tensor, min: scalar = -1.0, "
                             "max: scalar = 1.0, out: tensor!")
def hardtanh_backward(c: Call) -> Kernel:
    """gradOutput where ``min <= x <= max``, else 0 (CANN's doc counts the ends in; torch's
    kernel leaves them out)."""
    dtype = _prepare(c, "gradOutput", "self", "out", HALF_FLOAT_DTYPES, same_dtype=True,
                     same_shape=True, exact=True)
    compute = promotion.compute_dtype(dtype)
    low, high = c.scalar("min", compute), c.scalar("max", compute)

    def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.where((x < low) | (x > high), compute.type(0), g)
    return _elementwise(c, fn, dtype, out="out")


@register("GeluBackwardV2", "gradOutput: tensor, self: tensor, approximate: str = 'none', "
                            "gradInput: tensor!")
def gelu_backward_v2(c: Call) -> Kernel:
    """GeluBackward with ``approximate`` "none" (the erf form) or "tanh"."""
    mode = c["approximate"]
    if mode not in GELU_MODES:
        raise c.fail("approximate", 'expected "none" or "tanh"')
    dtype = _prepare(c, "gradOutput", "self", "gradInput", FLOAT_DTYPES, exact=True)
    approximate = GELU_MODES[mode]
    return _elementwise(c, lambda g, x: g * gelu_grad(x, approximate), dtype)


@register("SwishBackward", "gradOutput: tensor, self: tensor, betaOptional: scalar?, "
                           "gradInput: tensor!")
def swish_backward(c: Call) -> Kernel:
    """The gradient of ``x * sigmoid(beta x)``; a null ``betaOptional`` is beta 1."""
    dtype = _prepare(c, "gradOutput", "self", "gradInput", FLOAT_DTYPES, same_dtype=True,
                     same_shape=True, exact=True)
    compute = promotion.compute_dtype(dtype)
    beta = c.scalar("betaOptional", compute) if c.has("betaOptional") else compute.type(1)
    return _elementwise(c, lambda g, x: g * swish_grad(x, beta), dtype)


@register("SoftplusBackward", "gradOutput: tensor, self: tensor, beta: scalar = 1, "
                              "threshold: scalar = 20, gradInput: tensor!")
def softplus_backward(c: Call) -> Kernel:
    """``gradOutput * sigmoid(beta x)``, or gradOutput where ``beta x > threshold``."""
    dtype = _prepare(c, "gradOutput", "self", "gradInput", FLOAT_DTYPES,
                     x_supported=SOFTPLUS_SELF_DTYPES)
    compute = promotion.compute_dtype(dtype)
    beta, limit = c.scalar("beta", compute), c.scalar("threshold", compute)

    def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        scaled = x * beta
        return np.where(scaled > limit, g, g * sigmoid(scaled))
    return _elementwise(c, fn, dtype)


def _shrink_backward(negative_lambd: str) -> Callable[[Call], Kernel]:
    """gradOutput where ``|x| > lambd``, else 0. A negative lambd is refused (Softshrink's
    doc) or counts as 0 (Hardshrink's): ``negative_lambd`` "refuse" or "clamp"."""
    def prepare(c: Call) -> Kernel:
        dtype = _prepare(c, "gradOutput", "self", "gradInput", HALF_FLOAT_DTYPES,
                         same_dtype=True, exact=True)
        compute = promotion.compute_dtype(dtype)
        lambd = c.scalar("lambd", compute)
        if negative_lambd == "refuse" and not lambd >= 0:
            raise c.fail("lambd", f"must be >= 0, got {lambd}")
        lambd = max(lambd, compute.type(0))

        def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
            return np.where((x >= -lambd) & (x <= lambd), compute.type(0), g)
        return _elementwise(c, fn, dtype)
    return prepare


# CANN names Softshrink's ``lambda``, a Python keyword: it is ``lambd`` here, as in torch
register("SoftshrinkBackward", "gradOutput: tensor, self: tensor, lambd: scalar = 0.5, "
                               "gradInput: tensor!")(_shrink_backward("refuse"))
register("HardshrinkBackward", "gradOutput: tensor, self: tensor, lambd: scalar = 0.5, "
                               "gradInput: tensor!")(_shrink_backward("clamp"))


@register("ThresholdBackward", "gradOutput: tensor, self: tensor, threshold: scalar, "
                               "out: tensor!")
def threshold_backward(c: Call) -> Kernel:
    """gradOutput where ``x > threshold``, else 0."""
    dtype = _prepare(c, "gradOutput", "self", "out", THRESHOLD_DTYPES)
    compute = promotion.compute_dtype(dtype)
    limit = c.scalar("threshold", promotion.result_type([(dtype, 1)], [c.dtype("threshold")]))

    def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.where(x <= limit, compute.type(0), g)
    return _elementwise(c, fn, dtype, out="out")


@register("LeakyReluBackward", "gradOutput: tensor, self: tensor, negativeSlope: scalar = 0.01, "
                               "selfIsResult: bool = False, out: tensor!")
def leaky_relu_backward(c: Call) -> Kernel:
    """gradOutput where ``x > 0``, else ``negativeSlope * gradOutput`` (``selfIsResult``:
    x is the forward's output, which needs a non-negative slope)."""
    dtype = _prepare(c, "gradOutput", "self", "out", FLOAT_DTYPES)
    compute = promotion.compute_dtype(dtype)
    slope = c.scalar("negativeSlope", compute)
    if c["selfIsResult"] and slope < 0:
        raise c.fail("negativeSlope", "must be >= 0 when selfIsResult is true")

    def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.where(x > 0, g, g * slope)
    return _elementwise(c, fn, dtype, out="out")


def _elu_grad(alpha: Any, scale: Any, input_scale: Any, is_result: bool
              ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """torch's elu_backward: ``scale`` above 0; below, from the input
    ``input_scale * alpha * scale * exp(x * input_scale)`` or from the result y
    ``input_scale * (y + alpha * scale)``."""
    def fn(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        if is_result:
            negative = input_scale * (x + alpha * scale)
        else:
            negative = input_scale * alpha * scale * np.exp(x * input_scale)
        return g * np.where(x > 0, scale, negative)
    return fn


@register("EluBackward", "gradOutput: tensor, alpha: scalar, scale: scalar, "
                         "inputScale: scalar, isResult: bool, "
                         "selfOrResult: tensor, gradInput: tensor!")
def elu_backward(c: Call) -> Kernel:
    """The gradient of Elu from its input, or from its output (``isResult``; alpha >= 0)."""
    dtype = _prepare(c, "gradOutput", "selfOrResult", "gradInput", FLOAT_DTYPES,
                     same_dtype=True, same_shape=True)
    compute = promotion.compute_dtype(dtype)
    alpha, scale, input_scale = (c.scalar(n, compute) for n in ("alpha", "scale", "inputScale"))
    if c["isResult"] and alpha < 0:
        raise c.fail("alpha", "must be >= 0 when isResult is true")
    return _elementwise(c, _elu_grad(alpha, scale, input_scale, c["isResult"]), dtype,
                        x="selfOrResult")


@register("SeluBackward", "gradOutput: tensor, result: tensor, gradInput: tensor!")
def selu_backward(c: Call) -> Kernel:
    """The gradient of Selu from its output y: ``scale`` where y > 0, else
    ``y + alpha * scale``; an integer result truncates into the integer output."""
    dtype = _prepare(c, "gradOutput", "result", "gradInput", SELU_DTYPES, same_dtype=True,
                     same_shape=True, exact=True)
    wide = np.dtype(np.float64) if dtype.kind in "iu" else dtype
    compute = promotion.compute_dtype(wide)
    grad = _elu_grad(compute.type(SELU_ALPHA), compute.type(SELU_SCALE), compute.type(1), True)
    return _elementwise(c, grad, wide, x="result")


# -- softmax ------------------------------------------------------------------------------------
def _softmax_backward(log: bool) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        dtype = _prepare(c, "gradOutput", "output", "out", FLOAT_DTYPES, same_dtype=True,
                         same_shape=True)
        shape = c.tensor("gradOutput").shape
        axis = c.normalize_dim("dim", c["dim"], len(shape))
        compute = promotion.compute_dtype(dtype)

        @quiet
        def kernel(v) -> None:
            g, y = v.compute("gradOutput", compute), v.compute("output", compute)
            if g.ndim == 0:
                g, y = g.reshape(1), y.reshape(1)
            # row sums in float64 (softmax's products and difference too: g - sum(g * y)
            # cancels)
            if log:  # d log_softmax: g - exp(y) * sum(g)
                result = g - np.exp(y) * g.sum(axis=axis, keepdims=True, dtype=np.float64)
            else:  # d softmax: y * (g - sum(g * y))
                total = (g.astype(np.float64) * y).sum(axis=axis, keepdims=True)
                result = y * (g - total).astype(compute)
            v.write("out", result.reshape(shape))
        return kernel
    return prepare


register("SoftmaxBackward", "gradOutput: tensor, output: tensor, dim: int, out: tensor!")(
    _softmax_backward(log=False))
register("LogSoftmaxBackward", "gradOutput: tensor, output: tensor, dim: int, out: tensor!")(
    _softmax_backward(log=True))


SCALED_SOFTMAX_MAX_LAST_DIM = 4096  # CANN: the last dim S2 is in (0, 4096]


@register("ScaledMaskedSoftmaxBackward", "gradOutput: tensor, y: tensor, mask: tensor, "
                                        "scale: float = 1.0, fixTriuMask: bool = False, "
                                        "out: tensor!")
def scaled_masked_softmax_backward(c: Call) -> Kernel:
    """The gradient of ScaledMaskedSoftmax's input: ``scale * y * (g - sum(g * y))`` over
    the last dim, 0 where ``mask`` (bool, broadcast over B and N) is set."""
    dtype = _prepare(c, "gradOutput", "y", "out", SCALED_SOFTMAX_DTYPES, same_dtype=True,
                     same_shape=True, exact=True)
    shape, _ = check_scaled_mask(c, "y")
    if not 0 < shape[-1] <= SCALED_SOFTMAX_MAX_LAST_DIM:
        raise c.fail("y", f"the last dim must be in (0, {SCALED_SOFTMAX_MAX_LAST_DIM}]")
    compute = promotion.compute_dtype(dtype)
    scale = compute.type(c["scale"])

    @quiet
    def kernel(v) -> None:
        g, y = v.compute("gradOutput", compute), v.compute("y", compute)
        # the products, their row sum and the difference in float64: g - sum(g * y) cancels
        total = (g.astype(np.float64) * y).sum(axis=-1, keepdims=True)
        result = y * (g - total).astype(compute) * scale
        v.write("out", np.where(v["mask"], compute.type(0), result))
    return kernel


# -- Prelu --------------------------------------------------------------------------------------
@register("PreluBackward", "gradOutput: tensor, self: tensor, weight: tensor, "
                           "gradInput: tensor!, gradWeight: tensor!")
def prelu_backward(c: Call) -> Kernel:
    """``gradInput = x > 0 ? g : weight[channel] * g``; ``gradWeight`` sums ``x * g`` where
    x <= 0 over everything but the channel dim (dim 1), in weight's shape."""
    dtype = _prepare(c, "gradOutput", "self", "gradInput", FLOAT_DTYPES, same_dtype=True,
                     exact=True)
    c.check_dtype("weight", {dtype})
    x, weight = c.tensor("self"), c.tensor("weight")
    if c.broadcast("gradOutput", "self") != x.shape:
        raise c.fail("gradOutput", f"must broadcast to self's shape {list(x.shape)}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if weight.numel not in (1, channels):
        raise c.fail("weight", f"must have 1 element or one per channel ({channels}, dim 1 "
                               f"of self {list(x.shape)}); it has {weight.numel}")
    c.check_out("gradWeight", weight.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    per_channel = weight.numel > 1
    weight_view = (1, channels) + (1,) * (x.ndim - 2) if per_channel else ()
    reduce_axes = tuple(i for i in range(x.ndim) if i != 1) if per_channel else None

    @quiet
    def kernel(v) -> None:
        value = v.compute("self", compute)
        g = array_module(value).broadcast_to(v.compute("gradOutput", compute), x.shape)
        w = v.compute("weight", compute).reshape(weight_view)
        positive = value > 0
        v.write("gradInput", np.where(positive, g, w * g))
        contribution = np.where(positive, compute.type(0), value * g)
        total = contribution.sum(axis=reduce_axes, dtype=np.float64)
        v.write("gradWeight", total.reshape(weight.shape))
    return kernel


# -- gated ----------------------------------------------------------------------------------------
def _glu_like_backward(grad: str, x: str, gate: str) -> Callable[[Call], Kernel]:
    """The gradient of ``out = a * sigmoid(b)`` (Glu) or ``silu(a) * b`` (SwiGlu), a and b
    the halves of ``x`` along ``dim``."""
    supported = FLOAT_DTYPES if gate == "glu" else HALF_FLOAT_DTYPES

    def prepare(c: Call) -> Kernel:
        dtype = c.check_dtype(x, supported)
        axis, half = _split_halves(c, x, c["dim"])
        c.check_dtype(grad, {dtype})
        if c.tensor(grad).shape != half:
            raise c.fail(grad, f"shape must be {list(half)} ({x}'s halved along dim)")
        c.check_out("out", c.tensor(x).shape, dtype, exact_dtype=True)
        compute = promotion.compute_dtype(dtype)

        @quiet
        def kernel(v) -> None:
            g = v.compute(grad, compute)
            first, second = gate_halves(v.compute(x, compute), axis, activate_left=True)
            if gate == "glu":
                s = sigmoid(second)
                parts = (g * s, g * first * s * sigmoid(-second))
            else:
                parts = (g * second * swish_grad(first), g * first * sigmoid(first))
            v.write("out", array_module(g).concatenate(parts, axis=axis))
        return kernel
    return prepare


register("GluBackward", "gradOut: tensor, self: tensor, dim: int = -1, out: tensor!")(
    _glu_like_backward("gradOut", "self", "glu"))
register("SwiGluGrad", "yGrad: tensor, x: tensor, dim: int = -1, out: tensor!")(
    _glu_like_backward("yGrad", "x", "swi_glu"))


def _ge_glu_backward(c: Call) -> Kernel:
    """From ``out = linear * gelu(activated)``: ``d linear = g * gelu`` (the forward's
    ``outGelu``), ``d activated = g * linear * gelu'(activated)``."""
    dtype = c.check_dtype("self", HALF_FLOAT_DTYPES)
    axis, half = _split_halves(c, "self", c["dim"])
    for name in ("gradOutput", "gelu"):
        c.check_dtype(name, {dtype})
        if c.tensor(name).shape != half:
            raise c.fail(name, f"shape must be {list(half)} (self's halved along dim)")
    approximate = c["approximate"]
    if approximate not in (GELU_NONE, GELU_TANH):
        raise c.fail("approximate", "expected 0 (none, the erf form) or 1 (tanh)")
    left = bool(c.values.get("activateLeft", False))
    c.check_out("gradInput", c.tensor("self").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    @quiet
    def kernel(v) -> None:
        g, activated_gelu = v.compute("gradOutput", compute), v.compute("gelu", compute)
        activated, linear = gate_halves(v.compute("self", compute), axis, left)
        grad_activated = g * linear * gelu_grad(activated, approximate)
        grad_linear = g * activated_gelu
        parts = (grad_activated, grad_linear) if left else (grad_linear, grad_activated)
        v.write("gradInput", array_module(g).concatenate(parts, axis=axis))
    return kernel


register("GeGluBackward", "gradOutput: tensor, self: tensor, gelu: tensor, dim: int = -1, "
                          "approximate: int = 1, gradInput: tensor!")(_ge_glu_backward)
register("GeGluV3Backward", "gradOutput: tensor, self: tensor, gelu: tensor, dim: int = -1, "
                            "approximate: int = 1, activateLeft: bool = False, "
                            "gradInput: tensor!")(_ge_glu_backward)


@register("SituGluGrad", "gradY: tensor, x: tensor, dim: int = -1, beta: float = 1.0, "
                         "linearBeta: float = 0.0, activateLeft: bool = True, out: tensor!")
def situ_glu_grad(c: Call) -> Kernel:
    """The gradient of SituGlu's input: ``d gate = g * up' * s * ((1 - t^2) + beta t (1 -
    s))``, ``d up = g * situ_a`` (times ``1 - tanh^2(up / linearBeta)`` for linearBeta >
    0), with t, s, situ_a, up' the forward's intermediates."""
    dtype = c.check_dtype("x", HALF_FLOAT_DTYPES)
    axis, half = _split_halves(c, "x", c["dim"])
    c.check_dtype("gradY", {dtype})
    if c.tensor("gradY").shape != half:
        raise c.fail("gradY", f"shape must be {list(half)} (x's halved along dim)")
    c.check_out("out", c.tensor("x").shape, dtype, exact_dtype=True)
    beta, linear_beta, left = float(c["beta"]), float(c["linearBeta"]), c["activateLeft"]
    # float64 inside: for gate < 0 the two terms of d gate cancel, and float32 leaves
    # small gradients with 1e-3 relative errors (CANN's ATK SituGluGrad cases 10-12)
    compute = np.dtype(np.float64)
    shape = c.tensor("x").shape

    @quiet
    def kernel(v) -> None:
        f = compute.type
        x = v.compute("x", compute)
        gate, up = situ_split(x, axis, left)
        g = v.compute("gradY", compute).reshape(gate.shape)
        t, s, situ, linear = situ_parts(gate, up, beta, linear_beta)
        grad_gate = g * linear * s * ((f(1) - t * t) + f(beta) * t * (f(1) - s))
        grad_up = g * situ
        if linear_beta > 0:
            scaled = np.tanh(up / f(linear_beta))
            grad_up = grad_up * (f(1) - scaled * scaled)
        parts = (grad_gate, grad_up) if left else (grad_up, grad_gate)
        v.write("out", array_module(g).concatenate(parts, axis=1).reshape(shape))
    return kernel



@register("ClippedSwigluGrad", "gradY: tensor, x: tensor, groupIndexOptional: tensor?, "
                               "dim: int = -1, alpha: float = 1.702, limit: float = 7.0, "
                               "bias: float = 1.0, interleaved: bool = True, "
                               "gradXOut: tensor!")
def clipped_swiglu_grad(c: Call) -> Kernel:
    """The gradient of ClippedSwiglu's input, with A' = min(A, limit), B' = clip(B, -limit,
    limit): ``d A = g (B' + bias) swish'(A')`` where A <= limit (the clamp passes it), ``d B =
    g A' sigmoid(alpha A')`` where |B| <= limit; rows past the group counts' sum are 0."""
    dtype = c.check_dtype("x", HALF_FLOAT_DTYPES)
    axis, half = _split_halves(c, "x", c["dim"])
    c.check_dtype("gradY", {dtype})
    if c.tensor("gradY").shape != half:
        raise c.fail("gradY", f"shape must be {list(half)} (x's halved along dim)")
    limit, alpha, bias, interleaved = clipped_swiglu_attributes(c)
    c.check_out("gradXOut", c.tensor("x").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    shape, f = c.tensor("x").shape, compute.type

    @quiet
    def kernel(v) -> None:
        merged = merged_view(v.compute("x", compute), axis)
        rows = clipped_rows(v, merged)
        a, b = clipped_split(merged[:rows], interleaved)
        g = v.compute("gradY", compute).reshape(merged.shape[0], -1)[:rows]
        clipped_a, clipped_b = np.minimum(a, f(limit)), np.clip(b, -f(limit), f(limit))
        grad_a = np.where(a <= f(limit), g * (clipped_b + f(bias))
                          * swish_grad(clipped_a, alpha), f(0))
        grad_b = np.where(abs(b) <= f(limit), g * clipped_a * sigmoid(clipped_a * f(alpha)),
                          f(0))
        result = array_module(merged).zeros(merged.shape, compute)
        first, second = clipped_split(result[:rows], interleaved)
        first[...], second[...] = grad_a, grad_b
        v.write("gradXOut", result.reshape(shape))
    return kernel
