"""Convolutions in other argument lists and layouts: aclnnConvDepthwise2d (a depthwise 2-d
convolution with its kernel size spelled out), aclnnConvTbc / aclnnConvTbcBackward (a
1-d convolution over (time, batch, channel) tensors, ``torch.conv_tbc``) and
aclnnQuantConvolution (INT8 operands, per-channel scale; conv.py's im2col in float64) and
aclnnDeformableConv2d (DCNv2: bilinear samples at learned offsets, then a product).

ConvDepthwise2d is aclnnConvolution's phase 1 and kernels run under this operator's
argument names (``self`` -> input, ``out`` -> output, groups = the input channels). ConvTbc
is one (time * batch, C_in) @ (C_in, C_out) product per kernel tap over contiguous slabs of
the zero-padded input (no column buffer), and ConvTbcBackward runs ``conv_backward.py``'s
gradients on (batch, channel, time) views of the TBC tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import Call, Kernel, TensorArg, array_module, as_array
from openacl.ops.conv import (
    CONV_DTYPES,
    Geometry,
    cast_operand,
    convolution,
    im2col,
    int_list,
    padding_pairs,
)
from openacl.ops.conv_backward import back_geometry, gradients
from openacl.ops.linalg import CUBE_MATH_TYPES_NO_FP32_ADD, check_cube_math_type, operand_dtype
from openacl.ops.promotion import BFLOAT16
from openacl.ops.quant_matmul import ENCODED_SCALE_DTYPES, decode_scale
from openacl.ops.registry import register

__all__ = ["conv_depthwise2d", "conv_tbc", "conv_tbc_backward", "deformable_conv2d",
           "quant_convolution"]

DEPTHWISE_DIMS = 4  # (N, C, H, W)
DEPTHWISE_SPATIAL = 2
# CANN's documented ranges for ConvDepthwise2d's attributes (inclusive)
DEPTHWISE_STRIDE_RANGE = (1, 63)
DEPTHWISE_PADDING_RANGE = (0, 255)
DEPTHWISE_DILATION_RANGE = (1, 255)
TBC_DIMS = 3  # (time, batch, channels); weight (kernel, C_in, C_out)
NCL_OF_TBC = (1, 2, 0)  # (T, B, C) -> (B, C, T)
OIK_OF_KIO = (2, 1, 0)  # weight (K, C_in, C_out) -> (C_out, C_in, K)
INT8 = np.dtype(np.int8)
FLOAT16, FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)
QUANT_CONV_DIMS = (4, 5)  # 2-d and 3-d
QUANT_CONV_SCALE_DTYPES = frozenset({FLOAT32, np.dtype(np.int64), np.dtype(np.uint64)})
QUANT_CONV_BIAS_DTYPES = frozenset({BFLOAT16, FLOAT16, FLOAT32, np.dtype(np.int32)})
QUANT_CONV_OUT_DTYPES = frozenset({BFLOAT16, FLOAT16, FLOAT32})
QUANT_OFFSET_X_RANGE = (-128, 127)
NCHW_LENGTH = 4  # DeformableConv2d's stride, padding and dilation


def _as_convolution(c: Call, renames: dict[str, str], fixed: dict[str, Any]) -> Kernel:
    """aclnnConvolution's phase 1 on this call: ``renames`` map Convolution's argument names
    to this operator's (its kernel reads them under Convolution's), ``fixed`` are the values
    of Convolution's arguments this operator does not take."""
    c.aliases.update(renames)
    c.values.update(fixed)
    return convolution(c)


def _check_range(c: Call, name: str, bounds: tuple[int, int]) -> None:
    values = c[name]
    if values is not None and len(values) != DEPTHWISE_SPATIAL:
        raise c.fail(name, f"must have {DEPTHWISE_SPATIAL} values (H, W)")
    low, high = bounds
    if values is not None and not all(low <= v <= high for v in values):
        raise c.fail(name, f"values must be in [{low}, {high}]")


@register("ConvDepthwise2d", "self: tensor, weight: tensor, kernelSize: int_array, "
                             "bias: tensor?, stride: int_array = None, "
                             "padding: int_array = None, dilation: int_array = None, "
                             "out: tensor!, cubeMathType: int = 0")
def conv_depthwise2d(c: Call) -> Kernel:
    """Depthwise 2-d convolution: ``weight`` (C_out, 1, kH, kW), C_out a multiple of the
    input channels, each input channel convolved with its C_out / C_in kernels;
    ``kernelSize`` must be (kH, kW). ``stride`` in [1, 63], ``padding`` in [0, 255] and
    ``dilation`` in [1, 255], two values each."""
    x, w = c.tensor("self"), c.tensor("weight")
    if x.ndim != DEPTHWISE_DIMS:
        raise c.fail("self", f"must have {DEPTHWISE_DIMS} dims (N, C, H, W)")
    if w.ndim != DEPTHWISE_DIMS or w.shape[1] != 1 or x.shape[1] == 0 or \
            w.shape[0] % x.shape[1]:
        raise c.fail("weight", f"must be [C_out, 1, kH, kW] with C_out a multiple of the "
                               f"input channels {x.shape[1] if x.ndim > 1 else '?'}")
    if tuple(c["kernelSize"]) != w.shape[2:]:
        raise c.fail("kernelSize", f"must equal the weight's kernel {list(w.shape[2:])}")
    _check_range(c, "stride", DEPTHWISE_STRIDE_RANGE)
    _check_range(c, "padding", DEPTHWISE_PADDING_RANGE)
    _check_range(c, "dilation", DEPTHWISE_DILATION_RANGE)
    return _as_convolution(c, {"input": "self", "output": "out"},
                           {"transposed": False, "outputPadding": None,
                            "groups": x.shape[1]})


# -- ConvTbc, ConvTbcBackward ------------------------------------------------------------------
def _tbc_geometry(c: Call, x: TensorArg, w: TensorArg, bias: str) -> Geometry:
    """Validate a TBC convolution: ``x`` (T, B, C_in), ``w`` (K, C_in, C_out), ``bias``
    (C_out,), ``pad`` >= 0; the geometry of its (B, C, T) view."""
    if x.ndim != TBC_DIMS:
        raise c.fail(x.name, f"must have {TBC_DIMS} dims (time, batch, channels)")
    if w.ndim != TBC_DIMS or w.shape[1] != x.shape[2]:
        raise c.fail("weight", f"must be [kernel, C_in ({x.shape[2]}), C_out]")
    if c.tensor(bias).shape != (w.shape[2],):
        raise c.fail(bias, f"must have shape [{w.shape[2]}] (the weight's last dim)")
    pad = c["pad"]
    if pad < 0:
        raise c.fail("pad", "must be >= 0")
    if w.shape[0] < 1:
        raise c.fail("weight", "the kernel must have at least one tap")
    length = x.shape[0] + 2 * pad - w.shape[0] + 1
    if length < 0:
        raise c.fail("weight", f"the kernel ({w.shape[0]}) is longer than the padded input "
                               f"({x.shape[0] + 2 * pad})")
    return Geometry(1, (1,), (1,), ((pad, pad),), (0,), (w.shape[0],), (length,), False)


def _tbc_dtypes(c: Call, *names: str) -> tuple[np.dtype, np.dtype, np.dtype]:
    """The promoted dtype of ``names``, its compute dtype and the operand rounding."""
    for name in names:
        c.check_dtype(name, CONV_DTYPES)
    dtype = c.result_type(*names)
    cube = check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    compute = promotion.compute_dtype(dtype)
    return dtype, compute, operand_dtype(dtype, cube)


@register("ConvTbc", "self: tensor, weight: tensor, bias: tensor, pad: int = 0, out: tensor!, "
                     "cubeMathType: int = 0")
def conv_tbc(c: Call) -> Kernel:
    """``torch.conv_tbc``: ``out[t, b, o] = bias[o] + sum_{k, i} self[t + k - pad, b, i] *
    weight[k, i, o]``; self (T, B, C_in), weight (K, C_in, C_out), out (T + 2 pad - K + 1,
    B, C_out) of self's and weight's promoted dtype (bias may differ)."""
    x, w = c.tensor("self"), c.tensor("weight")
    g = _tbc_geometry(c, x, w, "bias")
    dtype, compute, rounded = _tbc_dtypes(c, "self", "weight")
    c.check_dtype("bias", CONV_DTYPES)
    c.check_out("out", (g.out_size[0], x.shape[1], w.shape[2]), dtype)

    pad, taps, length = c["pad"], w.shape[0], g.out_size[0]

    def kernel(v) -> None:
        out = v["out"]
        if out.size == 0:
            return
        xp = array_module(out)
        xs = cast_operand(v["self"], rounded, compute)
        ws = cast_operand(v["weight"], rounded, compute)
        steps, batch, channels = xs.shape
        # tap k reads padded rows [k, k + length): one contiguous (length * B, C_in) slab
        padded = xp.zeros((steps + 2 * pad, batch, channels), compute)
        padded[pad:pad + steps] = xs
        flat = padded.reshape(-1, channels)
        rows = length * batch
        total = flat[:rows] @ ws[0]
        for tap in range(1, taps):
            total += flat[tap * batch:tap * batch + rows] @ ws[tap]
        total += cast_operand(v["bias"], compute, compute)
        v.write("out", total.reshape(out.shape))
    return kernel


@register("ConvTbcBackward", "self: tensor, input: tensor, weight: tensor, bias: tensor, "
                             "pad: int = 0, cubeMathType: int = 0, gradInput: tensor!, "
                             "gradWeight: tensor!, gradBias: tensor!")
def conv_tbc_backward(c: Call) -> Kernel:
    """The gradients of ConvTbc: ``self`` is the output's gradient (T_out, B, C_out);
    gradInput (T, B, C_in), gradWeight (K, C_in, C_out) and gradBias (C_out,) take the
    dtypes of input, weight and bias."""
    grad, x, w = c.tensor("self"), c.tensor("input"), c.tensor("weight")
    g = _tbc_geometry(c, x, w, "bias")
    _, compute, rounded = _tbc_dtypes(c, "self", "input", "weight")
    expected = (g.out_size[0], x.shape[1], w.shape[2])
    if grad.shape != expected:
        raise c.fail("self", f"must have the forward result's shape {list(expected)}")
    c.check_out("gradInput", x.shape, x.dtype, exact_dtype=True)
    c.check_out("gradWeight", w.shape, w.dtype, exact_dtype=True)
    c.check_out("gradBias", (w.shape[2],), c.dtype("bias"), exact_dtype=True)
    back = back_geometry(g, (x.shape[0],), False)

    def kernel(v) -> None:
        gradients(v["self"].transpose(NCL_OF_TBC), v["input"].transpose(NCL_OF_TBC),
                  v["weight"].transpose(OIK_OF_KIO),
                  [v["gradInput"].transpose(NCL_OF_TBC), v["gradWeight"].transpose(OIK_OF_KIO),
                   v["gradBias"]], g, back, False, rounded, compute)
    return kernel


# -- QuantConvolution ---------------------------------------------------------------------------
@register("QuantConvolution",
          "input: tensor, weight: tensor, bias: tensor?, scale: tensor = None, offset: tensor?, "
          "stride: int_array = None, padding: int_array = None, dilation: int_array = None, "
          "transposed: bool = False, outputPadding: int_array?, groups: int = 1, "
          "offsetx: int = 0, roundMode: str?, output: tensor!")
def quant_convolution(c: Call) -> Kernel:
    """Per-channel quantized 2-d / 3-d convolution of INT8 ``input`` and ``weight``:
    ``output = conv(input, weight) * scale + bias``, the convolution exact (float64), then
    float32 (scale FLOAT32, or TransQuantParamV2's INT64/UINT64 words) into FLOAT16,
    BFLOAT16 or FLOAT32. CANN reserves ``offset``, ``transposed`` (must be false) and
    ``outputPadding``; ``offsetx`` must be in [-128, 127] and ``roundMode`` only matters
    for the float8 outputs, which are refused (no host dtype). A one-shot call's output is
    BFLOAT16 for a BFLOAT16 bias, else FLOAT16 (CANN's golden)."""
    x, w = c.tensor("input"), c.tensor("weight")
    for name in ("input", "weight"):
        c.check_dtype(name, {INT8})
    if x.ndim not in QUANT_CONV_DIMS or w.ndim != x.ndim:
        raise c.fail("input", "input and weight must both have 4 (2-d) or 5 (3-d) dims")
    if c["transposed"]:
        raise c.fail("transposed", "is reserved by CANN: must be false")
    if not QUANT_OFFSET_X_RANGE[0] <= c["offsetx"] <= QUANT_OFFSET_X_RANGE[1]:
        raise c.fail("offsetx", f"must be in [{QUANT_OFFSET_X_RANGE[0]}, "
                                f"{QUANT_OFFSET_X_RANGE[1]}]")
    spatial = x.ndim - 2
    groups = c["groups"]
    if groups < 1 or w.shape[0] % groups or w.shape[1] * groups != x.shape[1]:
        raise c.fail("groups", f"must be >= 1, divide C_out ({w.shape[0]}) and make "
                               f"groups * weight's C ({w.shape[1]}) = input's C ({x.shape[1]})")
    c_out = w.shape[0]
    scale = c.tensor("scale")
    c.check_dtype("scale", QUANT_CONV_SCALE_DTYPES)
    if scale.shape != (c_out,):
        raise c.fail("scale", f"must have shape [{c_out}] (the output channels)")
    bias_dtype = None
    if c.has("bias"):
        bias_dtype = c.check_dtype("bias", QUANT_CONV_BIAS_DTYPES)
        if c.tensor("bias").shape != (c_out,):
            raise c.fail("bias", f"must have shape [{c_out}] (the output channels)")
    stride = int_list(c, "stride", spatial, 1, 1)
    dilation = int_list(c, "dilation", spatial, 1, 1)
    pads = padding_pairs(c, spatial, False)
    extent = tuple(d * (k - 1) + 1 for d, k in zip(dilation, w.shape[2:], strict=True))
    out_size = tuple((i + b + a - e) // s + 1 for i, (b, a), e, s in zip(
        x.shape[2:], pads, extent, stride, strict=True))
    if any(o <= 0 for o in out_size):
        raise c.fail("weight", f"the (dilated) kernel {list(extent)} is larger than the padded "
                               f"input: output size {list(out_size)}")
    given = c["output"]
    if given is not None:
        dtype = c.check_dtype("output", QUANT_CONV_OUT_DTYPES, given.dtype)
    else:
        dtype = BFLOAT16 if bias_dtype == BFLOAT16 else FLOAT16
    c.check_out("output", (x.shape[0], c_out, *out_size), dtype, exact_dtype=True)
    g = Geometry(groups, stride, dilation, pads, (0,) * spatial, tuple(w.shape[2:]), out_size,
                 False)
    encoded = scale.dtype in ENCODED_SCALE_DTYPES
    wide = np.dtype(np.float64)
    channels = (1, -1) + (1,) * spatial

    def kernel(v) -> None:
        out = v["output"]
        if out.size == 0:
            return
        product = array_module(out).empty(out.shape, wide)
        im2col(product, cast_operand(v["input"], wide, wide),
               cast_operand(v["weight"], wide, wide), None, g, wide)
        factor = as_array(v["scale"])
        factor = decode_scale(factor)[0] if encoded else factor.astype(np.float32)
        value = product.astype(np.float32) * factor.reshape(channels)
        if v.get("bias") is not None:
            value += as_array(v["bias"]).astype(np.float32).reshape(channels)
        v.write("output", value)
    return kernel


# -- DeformableConv2d ----------------------------------------------------------------------------
def _nchw_attribute(c: Call, name: str, minimum: int) -> tuple[int, int]:
    """stride / dilation: four values in NCHW order, N and C 1; returns (H, W)."""
    values = c[name]
    if len(values) != NCHW_LENGTH or values[0] != 1 or values[1] != 1 or min(values) < minimum:
        raise c.fail(name, f"must be 4 values (N, C, H, W), N and C 1, each >= {minimum}")
    return values[2], values[3]


def _deformed(x, offset, g: Geometry, taps: tuple[int, int], dg: int, compute):
    """deformOut as (N, dg, C/dg, kH * kW, outH, outW): every kernel tap's bilinear sample
    of x at its offset position (zero outside the input), times its mask."""
    xp = array_module(x)
    n, channels, height, width = x.shape
    kh, kw = taps
    out_h, out_w = g.out_size
    k = kh * kw
    field = offset.reshape(n, 3, dg, k, out_h, out_w)  # (x offsets, y offsets, masks)
    rows = (xp.arange(out_h) * g.stride[0] - g.pads[0][0])[:, None] + \
        (xp.arange(kh) * g.dilation[0]).repeat(kw)[:, None, None]  # (k, outH, 1)
    cols = (xp.arange(out_w) * g.stride[1] - g.pads[1][0])[None, :] + \
        xp.tile(xp.arange(kw) * g.dilation[1], kh)[:, None, None]  # (k, 1, outW)
    ph = rows.astype(compute) + field[:, 1]
    pw = cols.astype(compute) + field[:, 0]
    h0, w0 = xp.floor(ph), xp.floor(pw)
    dh, dw = ph - h0, pw - w0
    h0, w0 = h0.astype(np.int64), w0.astype(np.int64)
    planes = x.reshape(n, dg, channels // dg, height * width)
    sampled = xp.zeros((n, dg, channels // dg, k * out_h * out_w), compute)
    for step_h, step_w, weight in ((0, 0, (1 - dh) * (1 - dw)), (0, 1, (1 - dh) * dw),
                                   (1, 0, dh * (1 - dw)), (1, 1, dh * dw)):
        hi, wi = h0 + step_h, w0 + step_w
        inside = (hi >= 0) & (hi < height) & (wi >= 0) & (wi < width)
        index = (xp.clip(hi, 0, height - 1) * width + xp.clip(wi, 0, width - 1)).reshape(
            n, dg, 1, -1)
        corner = xp.take_along_axis(planes, index, axis=3)
        sampled += corner * xp.where(inside, weight, 0).reshape(n, dg, 1, -1)
    sampled *= field[:, 2].reshape(n, dg, 1, -1)
    return sampled.reshape(n, dg, channels // dg, k, out_h, out_w)


@register("DeformableConv2d",
          "x: tensor, weight: tensor, offset: tensor, biasOptional: tensor?, "
          "kernelSize: int_array = None, stride: int_array = None, padding: int_array = None, "
          "dilation: int_array = None, groups: int = 1, deformableGroups: int = 1, "
          "modulated: bool = True, out: tensor!, deformOutOptional: tensor!?")
def deformable_conv2d(c: Call) -> Kernel:
    """Modulated deformable 2-d convolution (DCNv2): each kernel tap samples ``x``
    bilinearly at its grid position plus its offset (zero outside), times its mask, then a
    (grouped) convolution with ``weight``. ``offset`` is (N, 3 * deformableGroups * kH * kW,
    outH, outW): the x offsets, the y offsets, then the masks, each indexed by
    ``group * kH * kW + tap`` (CANN's kernel and golden). ``stride`` and ``dilation`` are
    NCHW (N, C 1), ``padding`` (top, bottom, left, right); ``modulated`` must be true (CANN
    supports only that). ``deformOutOptional`` gets the samples, (N, C, outH * kH,
    outW * kW)."""
    x, w, offset = c.tensor("x"), c.tensor("weight"), c.tensor("offset")
    dtype = c.check_dtype("x", CONV_DTYPES)
    for name, tensor in (("x", x), ("weight", w), ("offset", offset)):
        if tensor.ndim != DEPTHWISE_DIMS:
            raise c.fail(name, "must have 4 dims (NCHW)")
        if tensor.dtype != dtype:
            raise c.fail(name, f"dtype must equal x's ({dtype})")
    kernel_size = c["kernelSize"]
    if kernel_size is None or len(kernel_size) != 2 or tuple(kernel_size) != w.shape[2:]:
        raise c.fail("kernelSize", f"must be the weight's kernel {list(w.shape[2:])}")
    stride = _nchw_attribute(c, "stride", 1)
    dilation = _nchw_attribute(c, "dilation", 1)
    padding = c["padding"]
    if len(padding) != NCHW_LENGTH or min(padding) < 0:
        raise c.fail("padding", "must be 4 values (top, bottom, left, right), each >= 0")
    groups, dg = c["groups"], c["deformableGroups"]
    n, channels, height, width = x.shape
    c_out = w.shape[0]
    if groups < 1 or channels % groups or c_out % groups or w.shape[1] * groups != channels:
        raise c.fail("groups", f"must divide C_in ({channels}) and C_out ({c_out}), with "
                               f"weight's dim 1 ({w.shape[1]}) = C_in / groups")
    if dg < 1 or channels % dg:
        raise c.fail("deformableGroups", f"must divide C_in ({channels})")
    if not c["modulated"]:
        raise c.fail("modulated", "must be true (CANN supports only the modulated form)")
    kh, kw = kernel_size
    pads = ((padding[0], padding[1]), (padding[2], padding[3]))
    out_size = tuple((size + b + a - (k - 1) * d - 1) // s + 1 for size, (b, a), k, d, s in zip(
        (height, width), pads, (kh, kw), dilation, stride, strict=True))
    if min(out_size) <= 0:
        raise c.fail("weight", f"the output size {list(out_size)} is empty")
    if offset.shape != (n, 3 * dg * kh * kw, *out_size):
        raise c.fail("offset", f"must be [{n}, {3 * dg * kh * kw}, {out_size[0]}, "
                               f"{out_size[1]}] (x offsets, y offsets, masks)")
    if c.has("biasOptional"):
        if c.tensor("biasOptional").shape != (c_out,) or c.dtype("biasOptional") != dtype:
            raise c.fail("biasOptional", f"must be [{c_out}] of x's dtype")
    c.check_out("out", (n, c_out, *out_size), dtype, exact_dtype=True)
    c.check_out("deformOutOptional", (n, channels, out_size[0] * kh, out_size[1] * kw), dtype,
                exact_dtype=True)
    g = Geometry(groups, stride, dilation, pads, (0, 0), (kh, kw), out_size, False)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        xp = array_module(v["out"])
        samples = _deformed(cast_operand(v["x"], compute, compute),
                            cast_operand(v["offset"], compute, compute), g, (kh, kw), dg,
                            compute).reshape(n, channels, kh, kw, *out_size)
        if v.get("deformOutOptional") is not None:
            v.write("deformOutOptional", samples.transpose(0, 1, 4, 2, 5, 3).reshape(
                n, channels, out_size[0] * kh, out_size[1] * kw))
        columns = samples.reshape(n, groups, channels // groups * kh * kw, -1)
        weights = cast_operand(v["weight"], compute, compute).reshape(groups, c_out // groups,
                                                                      -1)
        result = xp.matmul(weights[None], columns).reshape(n, c_out, *out_size)
        if v.get("biasOptional") is not None:
            result = result + cast_operand(v["biasOptional"], compute, compute).reshape(
                -1, 1, 1)
        v.write("out", result)
    return kernel
