"""Fused normalization or activation + quantization: aclnnAddRmsNormQuant,
aclnnGroupNormSiluQuant, aclnnDequantSwigluQuantV2.

``AddRmsNormQuant(x1, x2, gamma, scales1, scales2Optional, zeroPoints1Optional,
zeroPoints2Optional, axis, epsilon, divMode, y1Out, y2Out, xOut)`` (CANN's formulas):

* ``x = x1 + x2`` (``xOut``);
* ``y = x / sqrt(mean(x^2 over gamma's dims) + epsilon) * gamma``, the norm over the
  trailing ``gamma.ndim`` dims of x;
* ``y1Out = round(y / scales1 + zeroPoints1)`` (``y * scales1`` when ``divMode`` is false),
  half to even, saturated to INT8; ``y2Out`` likewise with ``scales2Optional`` and
  ``zeroPoints2Optional``. Without ``scales2Optional`` CANN does not write ``y2Out``; nor do
  we.

The intermediate precision follows CANN's golden: a FLOAT16 sum is rounded to float16 and
so is the normalized value before the float16 product with gamma; a BFLOAT16 sum stays
float32 inside (only ``xOut`` is rounded) and the product with gamma is float32; the
statistics and the quantization are float32. ``axis`` is accepted as CANN does (only -1
takes effect there). INT8 is the only ``y1Out`` / ``y2Out`` dtype here: HIFLOAT8 has no host
dtype, and the float8 encodings of this operator are not documented to a checkable rule.

``GroupNormSiluQuant(self, gammaOptional, betaOptional, quantScale, group, eps, activateSilu,
out, meanOut, rstdOut)``: GroupNorm of an (N, C, ...) FLOAT16/BFLOAT16 input over ``group``
groups of C (a null gamma is ones, a null beta zeros, as CANN's host fills them), silu, then
``out = round(silu / quantScale)`` (quantScale FLOAT32 of 1 or C elements), half to even,
saturated to INT8; meanOut and rstdOut (N, group) in self's dtype. The chain runs in
float64 and is rounded once (the NPU's float32 chain has no documented order to mirror).
``activateSilu`` must be true and ``eps`` positive (CANN's checks). An empty input gives an
empty ``out``, meanOut zeros and rstdOut NaN (CANN's rule).
"""

from __future__ import annotations

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops.call import Call, Kernel, array_module, as_array, like
from openacl.ops.promotion import BFLOAT16
from openacl.ops.registry import register

__all__ = ["add_rms_norm_quant", "dequant_swiglu_quant_v2", "group_norm_silu_quant"]

FLOAT16, FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)
INT8, INT32 = np.dtype(np.int8), np.dtype(np.int32)
NORM_DTYPES = frozenset({FLOAT16, BFLOAT16, FLOAT32})
SCALE_DTYPES = NORM_DTYPES
ZERO_POINT_DTYPES = NORM_DTYPES | {INT32}
QUANT_OUT_DTYPES = frozenset({INT8})
INT8_INFO = np.iinfo(np.int8)
MIN_DIMS, MAX_DIMS = 1, 8
GROUP_NORM_DTYPES = frozenset({FLOAT16, BFLOAT16})
GROUP_NORM_MIN_DIMS = 2  # N, C, then any spatial dims


def _check_rank(c: Call, name: str) -> tuple[int, ...]:
    shape = c.tensor(name).shape
    if not MIN_DIMS <= len(shape) <= MAX_DIMS:
        raise c.fail(name, f"must have {MIN_DIMS} to {MAX_DIMS} dims, got {len(shape)}")
    return shape


def quantize_int8(xp, y, scale, zero_point, divide: bool):
    """``round(y / scale + zero_point)`` (``y * scale`` unless ``divide``) in y's dtype, half
    to even, saturated to INT8 (NaN -> 0)."""
    value = y / scale if divide else y * scale
    if zero_point is not None:
        value = value + zero_point
    value = xp.nan_to_num(xp.rint(value), nan=0.0, posinf=INT8_INFO.max,
                          neginf=INT8_INFO.min)
    return xp.clip(value, INT8_INFO.min, INT8_INFO.max).astype(INT8)


@register("AddRmsNormQuant",
          "x1: tensor, x2: tensor, gamma: tensor, scales1: tensor, scales2Optional: tensor?, "
          "zeroPoints1Optional: tensor?, zeroPoints2Optional: tensor?, axis: int = -1, "
          "epsilon: float = 1e-06, divMode: bool = True, y1Out: tensor!, y2Out: tensor!, "
          "xOut: tensor!")
def add_rms_norm_quant(c: Call) -> Kernel:
    """``xOut = x1 + x2``; RMS-normalize it over gamma's dims, scale by gamma and quantize
    into INT8 ``y1Out`` (and ``y2Out`` with scales2Optional); see the module notes."""
    dtype = c.check_dtype("x1", NORM_DTYPES)
    shape = _check_rank(c, "x1")
    for name in ("x2", "gamma"):
        c.check_dtype(name, {dtype})
        _check_rank(c, name)
    if c.tensor("x2").shape != shape:
        raise c.fail("x2", f"shape must equal x1's {list(shape)}")
    norm_shape = c.tensor("gamma").shape
    if len(norm_shape) > len(shape) or shape[len(shape) - len(norm_shape):] != norm_shape:
        raise c.fail("gamma", f"shape must equal x1's trailing dims (x1 is {list(shape)})")
    scale_dtype = c.check_dtype("scales1", SCALE_DTYPES)
    zero_dtype = None
    for name in ("scales1", "scales2Optional", "zeroPoints1Optional", "zeroPoints2Optional"):
        if not c.has(name):
            continue
        if name.startswith("scales"):
            c.check_dtype(name, {scale_dtype})
        else:
            zero_dtype = c.check_dtype(name, ZERO_POINT_DTYPES if zero_dtype is None
                                       else {zero_dtype})
        if c.tensor(name).shape != norm_shape:
            raise c.fail(name, f"shape must equal gamma's {list(norm_shape)}")
    axis = c["axis"]
    if not -len(shape) <= axis < len(shape):
        raise c.fail("axis", f"must lie in [{-len(shape)}, {len(shape) - 1}]")
    dual = c.has("scales2Optional")
    out_dtype = INT8 if c["y1Out"] is None else c.check_dtype("y1Out", QUANT_OUT_DTYPES)
    if c["y2Out"] is not None and c.dtype("y2Out") != out_dtype:
        raise c.fail("y2Out", f"dtype must equal y1Out's ({out_dtype})")
    c.check_out("y1Out", shape, out_dtype, exact_dtype=True)
    c.check_out("y2Out", shape, out_dtype, exact_dtype=True)
    c.check_out("xOut", shape, dtype, exact_dtype=True)
    norm_axes = tuple(range(len(shape) - len(norm_shape), len(shape)))
    eps = np.float32(c["epsilon"])
    divide = bool(c["divMode"])

    def factor(v, name: str):
        return None if v.get(name) is None else as_array(v[name]).astype(FLOAT32)

    def kernel(v) -> None:
        if not v["xOut"].size:
            return
        xp = array_module(v["xOut"])
        x1, x2 = as_array(v["x1"]), as_array(v["x2"])
        if dtype == FLOAT16:  # CANN adds in float16; bfloat16 and float32 add in float32
            total = (x1 + x2).astype(FLOAT32)
        else:
            total = x1.astype(FLOAT32) + x2.astype(FLOAT32)
        v.write("xOut", total)
        square_mean = xp.mean(total.astype(np.float64) ** 2, axis=norm_axes, keepdims=True)
        # 1 / sqrt rounded once from float64 (float32 sqrt libraries differ in the last bit)
        variance = (square_mean.astype(FLOAT32) + eps).astype(np.float64)
        rstd = (1 / xp.sqrt(variance)).astype(FLOAT32)
        normed = total * rstd
        gamma = as_array(v["gamma"])
        if dtype == FLOAT16:
            y = (normed.astype(FLOAT16) * gamma).astype(FLOAT32)
        else:
            y = normed * gamma.astype(FLOAT32)
        v.write("y1Out", quantize_int8(xp, y, factor(v, "scales1"),
                                       factor(v, "zeroPoints1Optional"), divide))
        if dual:
            v.write("y2Out", quantize_int8(xp, y, factor(v, "scales2Optional"),
                                           factor(v, "zeroPoints2Optional"), divide))
    return kernel


@register("GroupNormSiluQuant",
          "self: tensor, gammaOptional: tensor?, betaOptional: tensor?, quantScale: tensor, "
          "group: int, eps: float = 1e-05, activateSilu: bool = True, out: tensor!, "
          "meanOut: tensor!, rstdOut: tensor!")
def group_norm_silu_quant(c: Call) -> Kernel:
    """GroupNorm, silu and INT8 quantization ``round(silu / quantScale)``; see the module
    notes."""
    dtype = c.check_dtype("self", GROUP_NORM_DTYPES)
    shape = c.tensor("self").shape
    if not GROUP_NORM_MIN_DIMS <= len(shape) <= MAX_DIMS:
        raise c.fail("self", f"must have {GROUP_NORM_MIN_DIMS} to {MAX_DIMS} dims (N, C, ...)")
    batch, channels = shape[0], shape[1]
    for name in ("gammaOptional", "betaOptional"):
        if c.has(name):
            c.check_dtype(name, {dtype})
            if c.tensor(name).shape != (channels,):
                raise c.fail(name, f"must be 1-d with C = {channels} elements")
    c.check_dtype("quantScale", {FLOAT32})
    scale_shape = c.tensor("quantScale").shape
    if len(scale_shape) != 1 or scale_shape[0] not in (1, channels):
        raise c.fail("quantScale", f"must be 1-d with 1 or C = {channels} elements")
    group = c["group"]
    if group <= 0 or channels % group:
        raise c.fail("group", f"must be positive and divide C = {channels}")
    eps = c["eps"]
    if not eps > 0:
        raise c.fail("eps", "must be greater than 0")
    if not c["activateSilu"]:
        raise c.fail("activateSilu", "must be true (CANN supports only the silu form)")
    c.check_out("out", shape, INT8, exact_dtype=True)
    c.check_out("meanOut", (batch, group), dtype, exact_dtype=True)
    c.check_out("rstdOut", (batch, group), dtype, exact_dtype=True)
    wide = np.dtype(np.float64)

    def kernel(v) -> None:
        xp = array_module(v["out"])
        if not v["self"].size:
            v.write("meanOut", xp.zeros((batch, group), wide))
            v.write("rstdOut", xp.full((batch, group), np.nan, wide))
            return
        x = as_array(v["self"]).astype(wide).reshape(batch, group, -1)
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        rstd = 1 / xp.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
        y = (centred * rstd).reshape(batch, channels, -1)
        if v.get("gammaOptional") is not None:
            y = y * as_array(v["gammaOptional"]).astype(wide).reshape(channels, 1)
        if v.get("betaOptional") is not None:
            y = y + as_array(v["betaOptional"]).astype(wide).reshape(channels, 1)
        y = y / (1 + xp.exp(-y))
        scale = as_array(v["quantScale"]).astype(wide).reshape(-1, 1)
        v.write("out", quantize_int8(xp, y, scale, None, True).reshape(shape))
        v.write("meanOut", mean.reshape(batch, group))
        v.write("rstdOut", rstd.reshape(batch, group))
    return kernel


# -- DequantSwigluQuantV2 -----------------------------------------------------------------------
SWIGLU_X_DTYPES = frozenset({INT32, FLOAT16, BFLOAT16})
SWIGLU_BIAS_DTYPES = frozenset({FLOAT32, FLOAT16, BFLOAT16, INT32})
SWIGLU_GROUP_INDEX_DTYPES = frozenset({np.dtype(np.int64), INT32})
SWIGLU_MODES = (0, 1, 2, 3)  # SwiGLU; GPT-OSS even/odd; GPT-OSS halves; Step3.5
SWIGLU_QUANT_MODES = ("static", "dynamic")
SWIGLU_INT8_DST_TYPE = 2  # ACL_INT8: the one output type with a host dtype and a rule here
SWIGLU_MIN_DIMS = 2


def _swiglu_factor(c: Call, name: str, groups: int | None, width: int,
                   extra: tuple[tuple[int, ...], ...] = ()) -> tuple[int, ...] | None:
    """Check optional per-group factor ``name``: [groups, width] with a group index, else
    [width] or [1, width] (and any ``extra`` shapes); returns its shape, None when absent."""
    if not c.has(name):
        return None
    shape = c.tensor(name).shape
    accepted = ((groups, width), *extra) if groups is not None else (
        (width,), (1, width), *extra)
    if shape not in accepted:
        raise c.fail(name, f"shape must be one of {', '.join(str(list(s)) for s in accepted)}")
    return shape


def _swiglu(mode: int, a: np.ndarray, b: np.ndarray, limit: float, alpha: float,
            bias: float) -> np.ndarray:
    """The gated activation of ``swigluMode`` in float32 (CANN's formulas, its ATK order)."""
    one = FLOAT32.type(1)
    if mode == 0:
        return a / (one + np.exp(-a)) * b
    if mode == 3:
        gate = np.minimum(a / (one + np.exp(-a)), FLOAT32.type(limit))
        return gate * np.clip(b, FLOAT32.type(-limit), FLOAT32.type(limit))
    a = np.minimum(a, FLOAT32.type(limit))
    b = np.clip(b, FLOAT32.type(-limit), FLOAT32.type(limit))
    return a * (one / (one + np.exp(-(FLOAT32.type(alpha) * a)))) * (b + FLOAT32.type(bias))


@register("DequantSwigluQuantV2",
          "x: tensor, weightScaleOptional: tensor?, activationScaleOptional: tensor?, "
          "biasOptional: tensor?, quantScaleOptional: tensor?, quantOffsetOptional: tensor?, "
          "groupIndexOptional: tensor?, activateLeft: bool = False, "
          "quantModeOptional: str? = 'static', dstType: int = 2, "
          "roundModeOptional: str? = 'rint', activateDim: int = -1, swigluMode: int = 0, "
          "clampLimit: float = 7.0, gluAlpha: float = 1.702, gluBias: float = 1.0, "
          "yOut: tensor!, scaleOut: tensor!")
def dequant_swiglu_quant_v2(c: Call) -> Kernel:
    """Dequantize, gate, quantize each row of ``x`` [..., 2H] (CANN's formulas): an INT32
    ``x`` becomes ``(x [+ int32 bias]) * weightScale [* activationScale] [+ float bias]``
    (float16/bfloat16 ``x`` is taken as it is); the halves (``activateLeft``: the left one
    gated) or, for swigluMode 1, the even/odd columns go through the mode's SwiGLU; then
    ``static``: ``y / quantScale + quantOffset``, ``dynamic``: ``y * quantScale`` scaled
    per row by ``127 / max |row|`` (the scales ``max / 127`` to ``scaleOut``); rounded half
    to even and saturated to INT8 ``yOut`` [..., H]. ``groupIndexOptional`` holds each
    group's row count (MoE experts): group g's rows use row g of the factors; rows past
    the groups' sum are left as they are, as CANN documents. ``scaleOut`` is not written
    in static mode. On this host: ``activateDim`` the last dim, output INT8 with "rint"
    (the Ascend 950 float8/float4 outputs and non-last dims have no rule checkable here)."""
    x = c.tensor("x")
    c.check_dtype("x", SWIGLU_X_DTYPES)
    if not SWIGLU_MIN_DIMS <= x.ndim <= MAX_DIMS:
        raise c.fail("x", f"must have {SWIGLU_MIN_DIMS} to {MAX_DIMS} dims")
    if c.normalize_dim("activateDim", c["activateDim"], x.ndim) != x.ndim - 1:
        raise c.fail("activateDim", "only x's last dim is supported here")
    width = x.shape[-1]
    if width % 2:
        raise c.fail("x", f"last dim {width} must be even (two halves)")
    half, rows = width // 2, int(np.prod(x.shape[:-1]))
    mode = c["swigluMode"]
    if mode not in SWIGLU_MODES:
        raise c.fail("swigluMode", f"expected one of {list(SWIGLU_MODES)}")
    quant_mode = c["quantModeOptional"] or "static"
    if quant_mode not in SWIGLU_QUANT_MODES:
        raise c.fail("quantModeOptional", "expected 'static' or 'dynamic'")
    if c["dstType"] != SWIGLU_INT8_DST_TYPE:
        raise c.fail("dstType", "expected 2 (INT8): HIFLOAT8, FLOAT8 and FLOAT4 outputs "
                                "(Ascend 950) are not supported here")
    if (c["roundModeOptional"] or "rint") != "rint":
        raise c.fail("roundModeOptional", "an INT8 output takes 'rint' only")
    limit = float(c["clampLimit"])
    if mode != 0 and not 0 < limit < np.inf:
        raise c.fail("clampLimit", "must be greater than 0 and finite")
    groups = None
    if c.has("groupIndexOptional"):
        c.check_dtype("groupIndexOptional", SWIGLU_GROUP_INDEX_DTYPES)
        index = c.tensor("groupIndexOptional")
        if index.ndim != 1 or index.shape[0] < 1:
            raise c.fail("groupIndexOptional", "must be 1-d [groupNum] with groupNum >= 1 "
                                               "(the [groupNum, 2] form is not supported)")
        groups = index.shape[0]
    dequant = x.dtype == INT32
    if dequant and not c.has("weightScaleOptional"):
        raise c.fail("weightScaleOptional", "is null; an INT32 x needs it",
                     ACLNN_ERR_PARAM_NULLPTR)
    for name in ("weightScaleOptional", "activationScaleOptional", "biasOptional"):
        if c.has(name) and not dequant:
            raise c.fail(name, f"must be null for a {x.dtype} x (only INT32 x is dequantized)")
    weight_shape = _swiglu_factor(c, "weightScaleOptional", groups, width)
    if weight_shape is not None:
        c.check_dtype("weightScaleOptional", {FLOAT32})
    if c.has("activationScaleOptional"):
        c.check_dtype("activationScaleOptional", {FLOAT32})
        if c.tensor("activationScaleOptional").shape not in (x.shape[:-1], (rows,)):
            raise c.fail("activationScaleOptional", f"shape must be x's without its last dim, "
                                                    f"{list(x.shape[:-1])}")
    if _swiglu_factor(c, "biasOptional", groups, width) is not None:
        c.check_dtype("biasOptional", SWIGLU_BIAS_DTYPES)
    per_group = ((groups,),) if groups is not None else ((1,), (half,), (1, half))
    if c.has("quantScaleOptional"):
        c.check_dtype("quantScaleOptional", {FLOAT32})
        scale_shape = _swiglu_factor(c, "quantScaleOptional", groups, half, per_group)
    elif quant_mode == "static":
        raise c.fail("quantScaleOptional", "is null; static quantization needs it",
                     ACLNN_ERR_PARAM_NULLPTR)
    if c.has("quantOffsetOptional"):
        if quant_mode == "dynamic":
            raise c.fail("quantOffsetOptional", "must be null in dynamic mode")
        offset = c.tensor("quantOffsetOptional")
        if offset.dtype != FLOAT32 or offset.shape != scale_shape:
            raise c.fail("quantOffsetOptional", f"dtype and shape must be quantScale's "
                                                f"(float32, {list(scale_shape)})")
    c.check_out("yOut", (*x.shape[:-1], half), INT8, exact_dtype=True)
    c.check_out("scaleOut", x.shape[:-1], FLOAT32, exact_dtype=True)
    gate_first = bool(c["activateLeft"])
    alpha, glu_bias = float(c["gluAlpha"]), float(c["gluBias"])
    dynamic = quant_mode == "dynamic"

    # a factor is one value per group ([groups] / [1]) or one row of values per group
    scalar = {name: c.has(name) and c.tensor(name).ndim == 1 and (
        groups is not None or c.tensor(name).shape == (1,))
        for name in ("quantScaleOptional", "quantOffsetOptional")}
    grouped = groups is not None and groups > 1

    def per_row(v, name: str, group: np.ndarray) -> np.ndarray | None:
        """Factor ``name`` as one row per x row (its group's), or None when absent."""
        if v.get(name) is None:
            return None
        factor = as_array(v[name])
        factor = factor.reshape(-1, 1) if scalar.get(name) else factor.reshape(
            -1 if grouped else 1, factor.shape[-1])
        return factor[group] if grouped else factor

    def kernel(v) -> None:
        xp = array_module(v["yOut"])
        counts = (as_array(v["groupIndexOptional"]).astype(np.int64)
                  if v.get("groupIndexOptional") is not None else xp.asarray([rows]))
        group = xp.repeat(xp.arange(counts.shape[0]), xp.maximum(counts, 0))[:rows]
        taken = int(group.shape[0])  # rows past the groups' sum stay as they are
        values = as_array(v["x"]).reshape(rows, width)[:taken].astype(FLOAT32)
        bias = per_row(v, "biasOptional", group)
        with np.errstate(all="ignore"):
            if dequant:
                if bias is not None and bias.dtype == INT32:
                    values = values + bias.astype(FLOAT32)
                values = values * per_row(v, "weightScaleOptional", group)
                if v.get("activationScaleOptional") is not None:
                    values = values * as_array(v["activationScaleOptional"]).reshape(
                        rows, 1)[:taken]
                if bias is not None and bias.dtype != INT32:
                    values = values + bias.astype(FLOAT32)
            if mode == 1:
                a, b = values[:, 0::2], values[:, 1::2]
            else:
                a, b = (values[:, :half], values[:, half:]) if gate_first or mode else (
                    values[:, half:], values[:, :half])
            y = _swiglu(mode, a, b, limit, alpha, glu_bias)
            scale = per_row(v, "quantScaleOptional", group)
            if dynamic:
                if scale is not None:
                    y = y * scale
                largest = np.abs(y).max(axis=1, keepdims=True, initial=0.0)
                quantized = quantize_int8(xp, y, FLOAT32.type(127) / largest, None, False)
            else:
                quantized = quantize_int8(xp, y, scale, per_row(v, "quantOffsetOptional",
                                                                group), True)
        target = v["yOut"].reshape(rows, half)
        target[:taken] = like(target, quantized)
        if dynamic:
            scales = v["scaleOut"].reshape(rows)
            scales[:taken] = like(scales, (largest / FLOAT32.type(127)).reshape(-1))
    return kernel
