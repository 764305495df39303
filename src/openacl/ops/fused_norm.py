"""Fused normalization operators: GroupNormSilu, GroupNormSiluV2, GroupNormSwish (GroupNorm
followed by ``y * sigmoid(scale * y)``), DeepNorm (LayerNorm of ``alpha * x + gx``) and
AdaLayerNorm (LayerNorm modulated by ``1 + scale`` and ``shift``).

Each is its unfused composition (``torch.nn.functional.group_norm`` then ``silu``; the
residual-scaled LayerNorm of DeepNet), computed by the kernels of ``normalization.py``
in float32 and rounded once into each output.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.normalization import (
    FLOAT32,
    NORM_DTYPES,
    _channel_input,
    _moments,
    _param_dtype,
    _row_moments_blas,
    _rsqrt,
    group_norm_values,
)
from openacl.ops.registry import register

FLOAT64 = np.dtype(np.float64)
SWISH_FORMATS = ("NCHW", "ND", "NCL", "NCDHW")  # layouts with C at axis 1


def _swish(y: np.ndarray, scale: float) -> np.ndarray:
    """``y * sigmoid(scale * y)`` (silu when ``scale`` is 1), in place on ``y``."""
    xp = array_module(y)
    gate = xp.negative(y) * y.dtype.type(scale)
    xp.exp(gate, out=gate)
    gate += 1
    y /= gate
    return y


def _group_norm_act(c: Call, x: str, group_name: str, out: str, swish_scale: float | None,
                    stat_dtype_from_gamma: bool) -> Kernel:
    """Phase 1 shared by the GroupNorm + activation operators."""
    dtype, shape, channels = _channel_input(c, x, NORM_DTYPES)
    if min(shape[:2]) <= 0:
        raise c.fail(x, "its N and C dims must be positive")
    group = c[group_name]
    if group <= 0 or channels % group:
        raise c.fail(group_name, f"must be positive and divide C = {channels}")
    param_dtype = dtype
    for name in ("gamma", "beta"):
        if c[name] is not None:
            c.check_dtype(name, NORM_DTYPES)
            _param_dtype(c, name, dtype)
            if c.tensor(name).numel != channels:
                raise c.fail(name, f"must hold C = {channels} elements")
            param_dtype = c.tensor(name).dtype
    if c["gamma"] is not None and c["beta"] is not None and \
            c.tensor("gamma").dtype != c.tensor("beta").dtype:
        raise c.fail("beta", "dtype must equal gamma's")
    stat_dtype = param_dtype if stat_dtype_from_gamma else dtype
    c.check_out(out, shape, dtype, exact_dtype=True)
    c.check_out("meanOut", (shape[0], group), stat_dtype, exact_dtype=True)
    c.check_out("rstdOut", (shape[0], group), stat_dtype, exact_dtype=True)
    eps = c["eps"]

    def kernel(v) -> None:
        y, mean, rstd = group_norm_values(v, x, dtype, shape, group, eps)
        if swish_scale is not None:
            y = _swish(y, swish_scale)
        v.write(out, y.reshape(shape))
        v.write("meanOut", mean)
        v.write("rstdOut", rstd)
    return kernel


@register("GroupNormSilu", "self: tensor, gamma: tensor?, beta: tensor?, group: int, "
                           "eps: float = 1e-05, out: tensor!, meanOut: tensor!, "
                           "rstdOut: tensor!")
def group_norm_silu(c: Call) -> Kernel:
    """``silu(group_norm(self, group, gamma, beta, eps))``; mean and rstd (N, group)."""
    return _group_norm_act(c, "self", "group", "out", 1.0, stat_dtype_from_gamma=False)


@register("GroupNormSiluV2", "self: tensor, gamma: tensor?, beta: tensor?, group: int, "
                             "eps: float = 1e-05, activateSilu: bool = True, out: tensor!, "
                             "meanOut: tensor!, rstdOut: tensor!")
def group_norm_silu_v2(c: Call) -> Kernel:
    """GroupNormSilu whose silu is applied only when ``activateSilu``."""
    scale = 1.0 if c["activateSilu"] else None
    return _group_norm_act(c, "self", "group", "out", scale, stat_dtype_from_gamma=False)


@register("GroupNormSwish", "x: tensor, gamma: tensor, beta: tensor, numGroups: int, "
                            "dataFormatOptional: str? = None, eps: float = 1e-05, "
                            "activateSwish: bool = True, swishScale: float = 1.0, "
                            "yOut: tensor!, meanOut: tensor!, rstdOut: tensor!")
def group_norm_swish(c: Call) -> Kernel:
    """``y * sigmoid(swishScale * y)`` of ``y = group_norm(x)`` when ``activateSwish``;
    mean and rstd (N, numGroups) have gamma's dtype."""
    layout = c["dataFormatOptional"]
    if layout is not None and layout not in SWISH_FORMATS:
        raise c.fail("dataFormatOptional", f"must be one of {list(SWISH_FORMATS)} (C at "
                                           f"axis 1)")
    scale = float(c["swishScale"]) if c["activateSwish"] else None
    return _group_norm_act(c, "x", "numGroups", "yOut", scale, stat_dtype_from_gamma=True)


@register("DeepNorm", "x: tensor, gx: tensor, beta: tensor, gamma: tensor, alpha: float = 0.3, "
                      "epsilon: float = 1e-06, meanOut: tensor!, rstdOut: tensor!, "
                      "yOut: tensor!")
def deep_norm(c: Call) -> Kernel:
    """LayerNorm over gamma's (trailing) dims of ``alpha * x + gx``, scaled by gamma and
    shifted by beta; meanOut and rstdOut are float32 with those dims kept as 1."""
    dtype = c.check_dtype("x", NORM_DTYPES)
    shape = c.tensor("x").shape
    for name in ("gx", "beta", "gamma"):
        c.check_dtype(name, {dtype})
    if c.tensor("gx").shape != shape:
        raise c.fail("gx", f"shape must equal x's {list(shape)}")
    normalized = c.tensor("gamma").shape
    if not normalized or len(normalized) > len(shape) or \
            shape[len(shape) - len(normalized):] != normalized:
        raise c.fail("gamma", f"shape must equal trailing dims of x {list(shape)}")
    if c.tensor("beta").shape != normalized:
        raise c.fail("beta", f"shape must equal gamma's {list(normalized)}")
    lead = shape[:len(shape) - len(normalized)]
    stat_shape = (*lead, *(1,) * len(normalized))
    c.check_out("yOut", shape, dtype, exact_dtype=True)
    c.check_out("meanOut", stat_shape, FLOAT32, exact_dtype=True)
    c.check_out("rstdOut", stat_shape, FLOAT32, exact_dtype=True)
    rows, width = math.prod(lead), math.prod(normalized)
    alpha, eps = c["alpha"], c["epsilon"]

    def kernel(v) -> None:
        x = v.compute("x", dtype) * FLOAT32.type(alpha) + v.compute("gx", dtype)
        x = x.reshape(rows, width)
        if array_module(x) is np and x.size:
            y = np.empty_like(x)
            mean, rstd = _row_moments_blas(x, y, np.full(width, 1.0 / width, FLOAT32), eps)
        else:
            mean, centred, variance = _moments(x, 1)
            rstd = _rsqrt(variance, eps)
            y = centred * rstd
        y = y * v.compute("gamma", FLOAT32).reshape(width) + \
            v.compute("beta", FLOAT32).reshape(width)
        v.write("yOut", y.reshape(shape))
        v.write("meanOut", mean.reshape(stat_shape))
        v.write("rstdOut", rstd.reshape(stat_shape))
    return kernel


@register("AdaLayerNorm", "x: tensor, scale: tensor, shift: tensor, weightOptional: tensor?, "
                          "biasOptional: tensor?, epsilon: float = 1e-05, out: tensor!")
def ada_layer_norm(c: Call) -> Kernel:
    """Adaptive LayerNorm (DiT): ``LayerNorm(x) * (1 + scale) + shift`` over the last dim H
    of ``x`` (B..., S, H); scale and shift are (B..., H) or (B..., 1, H), one row per batch
    shared by its S tokens; the optional LayerNorm weight / bias are (H,)."""
    dtype = c.check_dtype("x", NORM_DTYPES)
    shape = c.tensor("x").shape
    if len(shape) < 2:
        raise c.fail("x", "must be (B..., S, H): at least 2 dims")
    batch, hidden = shape[:-2], shape[-1]
    for name in ("scale", "shift"):
        c.check_dtype(name, {dtype})
        if c.tensor(name).shape not in ((*batch, hidden), (*batch, 1, hidden)):
            raise c.fail(name, f"shape must be {[*batch, hidden]} or {[*batch, 1, hidden]}")
    for name in ("weightOptional", "biasOptional"):
        if c[name] is not None:
            c.check_dtype(name, {dtype})
            if c.tensor(name).shape != (hidden,):
                raise c.fail(name, f"shape must be [{hidden}]")
    c.check_out("out", shape, dtype, exact_dtype=True)
    rows, eps = math.prod(shape[:-1]), c["epsilon"]
    modulation = (*batch, 1, hidden)

    def kernel(v) -> None:
        # float64: the modulation's shift can cancel most of the normalized value
        x = v.compute("x", FLOAT64).reshape(rows, hidden)
        _, centred, variance = _moments(x, 1)
        y = centred * _rsqrt(variance, eps)
        if v.get("weightOptional") is not None:
            y *= v.compute("weightOptional", FLOAT64)
        if v.get("biasOptional") is not None:
            y += v.compute("biasOptional", FLOAT64)
        y = y.reshape(shape) * (1 + v.compute("scale", FLOAT64).reshape(modulation))
        v.write("out", y + v.compute("shift", FLOAT64).reshape(modulation))
    return kernel


# -- MaskedSoftmaxWithRelPosBias --------------------------------------------------------------
ATTENTION_RANKS = (4, 5)  # (B*W, N, S1, S2) or (B, W, N, S1, S2)


def _window_shape(c: Call, name: str, kept: int, s1: int, s2: int) -> tuple[int, ...] | None:
    """A mask (``kept`` = 1: W kept) or bias (``kept`` = 2: N kept) as its 5-D broadcast
    shape (1, W, 1, S1, S2) / (1, 1, N, S1, S2), or None when absent."""
    if c[name] is None:
        return None
    shape = c.tensor(name).shape
    if len(shape) not in (3, 4, 5) or shape[-2:] != (s1, s2):
        raise c.fail(name, f"must be 3-D to 5-D ending in (S1, S2) = ({s1}, {s2})")
    lead = shape[:-2]  # (W), (W, 1), (1, W, 1) for a mask; (N), (1, N), (1, 1, N) for a bias
    if sum(d != 1 for d in lead) > 1:
        raise c.fail(name, "only its W (mask) or N (bias) dim may exceed 1")
    return tuple(math.prod(lead) if i == kept else 1 for i in range(3)) + (s1, s2)


@register("MaskedSoftmaxWithRelPosBias",
          "x: tensor, attenMaskOptional: tensor?, relativePosBias: tensor, "
          "scaleValue: float = 1.0, innerPrecisionMode: int = 0, out: tensor!")
def masked_softmax_with_rel_pos_bias(c: Call) -> Kernel:
    """``softmax(scaleValue * x + attenMask + relativePosBias)`` over the last dim (Swin
    Transformer's window attention): the mask is per window W, the bias per head N."""
    dtype = c.check_dtype("x", NORM_DTYPES)
    shape = c.tensor("x").shape
    if len(shape) not in ATTENTION_RANKS:
        raise c.fail("x", "must be (B*W, N, S1, S2) or (B, W, N, S1, S2)")
    s1, s2 = shape[-2:]
    for name in ("attenMaskOptional", "relativePosBias"):
        if c[name] is not None:
            c.check_dtype(name, {dtype})
    mask = _window_shape(c, "attenMaskOptional", 1, s1, s2)
    bias = _window_shape(c, "relativePosBias", 2, s1, s2)
    heads = shape[-3]
    windows = mask[1] if mask is not None else (shape[1] if len(shape) == 5 else 1)
    if len(shape) == 4 and shape[0] % windows:
        raise c.fail("attenMaskOptional", f"its W = {windows} must divide B*W = {shape[0]}")
    if len(shape) == 5 and mask is not None and mask[1] not in (1, shape[1]):
        raise c.fail("attenMaskOptional", f"its W must be 1 or x's {shape[1]}")
    if bias[2] not in (1, heads):
        raise c.fail("relativePosBias", f"its N must be 1 or x's {heads}")
    c.check_out("out", shape, dtype, exact_dtype=True)
    five = shape if len(shape) == 5 else (shape[0] // windows, windows, *shape[1:])
    scale = c["scaleValue"]

    def kernel(v) -> None:
        xp = array_module(v["x"])
        logits = v.compute("x", dtype).reshape(five) * FLOAT32.type(scale)
        if mask is not None:
            logits = logits + v.compute("attenMaskOptional", FLOAT32).reshape(mask)
        logits = logits + v.compute("relativePosBias", FLOAT32).reshape(bias)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        exp = xp.exp(shifted)
        v.write("out", (exp / exp.sum(axis=-1, keepdims=True)).reshape(shape))
    return kernel
