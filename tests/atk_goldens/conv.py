"""Goldens of the convolution family (CANN's conv/ operators): Convolution,
ConvolutionBackward, ConvDepthwise2d, ConvTbc, ConvTbcBackward. Each is PyTorch in float64
(the driver widens the inputs); ``cubeMathType`` only selects the NPU's Cube logic and is
ignored (full precision is within every dtype's standard). The backward goldens are
``torch.autograd`` through the forward golden.

``padding`` follows CANN: one value per spatial dim, or (conv1d, conv2d) a (begin, end)
pair per dim, the input padded with zeros before a padding-free convolution; a transposed
convolution's padding crops its full result instead."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from atk_driver import BF16, golden

USE_FP16 = 2  # cubeMathType: the Cube's operands rounded to float16


def _pairs(padding, spatial: int) -> list[tuple[int, int]]:
    values = list(padding) if isinstance(padding, (list, tuple)) else [padding] * spatial
    if len(values) == spatial:
        return [(v, v) for v in values]
    return [(values[2 * i], values[2 * i + 1]) for i in range(spatial)]


def _forward(x, w, bias, stride, padding, dilation, transposed=False, output_padding=None,
             groups=1):
    """aclnnConvolution in torch: any rank, CANN's padding forms."""
    spatial = x.dim() - 2
    pairs = _pairs(padding, spatial)
    if not transposed:
        flat = [v for begin, end in reversed(pairs) for v in (begin, end)]
        conv = (F.conv1d, F.conv2d, F.conv3d)[spatial - 1]
        return conv(F.pad(x, flat), w, bias, stride, 0, dilation, groups)
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[spatial - 1]
    full = conv(x, w, bias, stride, 0, list(output_padding or [0] * spatial), groups,
                dilation)
    return full[(slice(None), slice(None),
                 *(slice(b, full.shape[2 + i] - a) for i, (b, a) in enumerate(pairs)))]


def _bias(bias, channels: int):
    """CANN's executors pass a bias of shape [] as a null tensor (the driver hands a 0-d
    input to a golden as shape [1]: anything but [channels] is that null bias)."""
    return None if bias is None or tuple(bias.shape) != (channels,) else bias


@golden("Convolution")
def convolution(x, w, bias, stride, padding, dilation, transposed=False, output_padding=None,
                groups=1, cube=0):
    channels = w.shape[1] * groups if transposed else w.shape[0]
    return _forward(x, w, _bias(bias, channels), stride, padding, dilation, transposed,
                    output_padding, groups)


@golden("ConvolutionBackward")
def convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed=False,
                         output_padding=None, groups=1, mask=(True, True, True), cube=0):
    """torch.autograd through the forward; cubeMathType 2 (USE_FP16) rounds the Cube's
    operands to float16 first, as CANN's executors do (the bias gradient is a plain sum)."""
    bias_grad = grad.sum(dim=(0, *range(2, grad.dim())))
    if cube == USE_FP16:
        grad, x, w = (t.half().double() for t in (grad, x, w))
    x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    _forward(x, w, None, stride, padding, dilation, transposed, output_padding,
             groups).backward(grad)
    return tuple(t for t, wanted in zip((x.grad, w.grad, bias_grad), mask, strict=True)
                 if wanted)


@golden("ConvDepthwise2d")
def conv_depthwise2d(x, w, kernel_size, bias, stride, padding, dilation, cube=0):
    return _forward(x, w, bias, stride, padding, dilation, groups=x.shape[1])


@golden("ConvTbc")
def conv_tbc(x, w, bias, pad, cube=0):
    return torch.conv_tbc(x, w, bias, pad)


@golden("ConvTbcBackward")
def conv_tbc_backward(grad, x, w, bias, pad, cube=0):
    x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    bias = bias.clone().requires_grad_(True)
    torch.conv_tbc(x, w, bias, pad).backward(grad)
    return x.grad, w.grad, bias.grad


@golden("QuantConvolution", with_dtypes=True)
def quant_convolution(dtypes, x, w, bias, scale, offset, stride, padding, dilation,
                      transposed=False, output_padding=None, groups=1, offsetx=0,
                      round_mode=None):
    """conv(x, w) * scale + bias: the convolution exact, the rest in float32 as CANN's
    golden computes it (a float64 sum could round past float16's range where float32's
    does not); the result dtype is the one-shot's (BFLOAT16 for a BFLOAT16 bias, else
    FLOAT16)."""
    channels = (1, -1) + (1,) * (x.dim() - 2)
    value = _forward(x, w, None, stride, padding, dilation, groups=groups).float()
    value = value * scale.float().reshape(channels)
    if bias is not None:
        value = value + bias.float().reshape(channels)
    half = torch.bfloat16 if dtypes[2] == BF16 else torch.float16
    # past the largest finite value rounding still gives it up to half an ulp further
    # (65504 up to 65520 in float16): those elements are given rounded
    beyond = value.abs() > torch.finfo(half).max
    return torch.where(beyond, value.to(half).double(), value.double())


def _bilinear(planes, ph, pw):
    """Samples of ``planes`` (N, G, C/G, H, W) at float positions (N, G, P): zero outside,
    each of the four neighbours checked on its own (CANN's DeformableOffsetBilinear)."""
    n, groups, channels, height, width = planes.shape
    flat = planes.reshape(n, groups, channels, -1)
    h0, w0 = ph.floor(), pw.floor()
    total = 0
    for dh, dw in ((0, 0), (0, 1), (1, 0), (1, 1)):
        hi, wi = h0 + dh, w0 + dw
        weight = (1 - (ph - h0 - dh).abs()) * (1 - (pw - w0 - dw).abs())
        inside = (hi >= 0) & (hi < height) & (wi >= 0) & (wi < width)
        index = (hi.clamp(0, height - 1) * width + wi.clamp(0, width - 1)).long()
        picked = torch.gather(flat, 3, index[:, :, None, :].expand(-1, -1, channels, -1))
        total = total + picked * (weight * inside)[:, :, None, :]
    return total


@golden("DeformableConv2d")
def deformable_conv2d(x, w, offset, bias, kernel_size, stride, padding, dilation, groups=1,
                      deformable_groups=1, modulated=True):
    """CANN's golden (conv/deformable_conv2d/tests/assets/golden.py) in float64: the
    x offsets, y offsets and masks of each (group, tap) sample x, then a convolution of the
    samples with stride = the kernel; returns (out, deformOut)."""
    n, channels, _, _ = x.shape
    kh, kw = kernel_size
    out_h, out_w = offset.shape[2:]
    taps = kh * kw
    field = offset.reshape(n, 3, deformable_groups, taps, out_h, out_w)
    tap_h = torch.arange(kh).repeat_interleave(kw) * dilation[2]
    tap_w = torch.arange(kw).repeat(kh) * dilation[3]
    base_h = tap_h[:, None, None] + (torch.arange(out_h) * stride[2] - padding[0])[:, None]
    base_w = tap_w[:, None, None] + (torch.arange(out_w) * stride[3] - padding[2])[None, :]
    ph = (base_h + field[:, 1]).reshape(n, deformable_groups, -1)
    pw = (base_w + field[:, 0]).reshape(n, deformable_groups, -1)
    planes = x.reshape(n, deformable_groups, channels // deformable_groups, *x.shape[2:])
    samples = _bilinear(planes, ph, pw) * field[:, 2].reshape(n, deformable_groups, 1, -1)
    samples = samples.reshape(n, channels, kh, kw, out_h, out_w)
    deform = samples.permute(0, 1, 4, 2, 5, 3).reshape(n, channels, out_h * kh, out_w * kw)
    return F.conv2d(deform, w, bias, (kh, kw), 0, 1, groups), deform
