"""Goldens of the pooling family (CANN's pooling/ operators): max, average, adaptive and
global pools in 2-d and 3-d and their backward forms. Each is PyTorch in float64."""

from __future__ import annotations

import math

import numpy as np
import torch

from atk_driver import MAX_CASE_BYTES, golden


def _spatial(x):
    return list(range(2, x.dim()))


@golden("GlobalAveragePool")
def global_average_pool(x):
    return x.mean(_spatial(x), keepdim=True)


@golden("GlobalMaxPool")
def global_max_pool(x):
    return x.amax(_spatial(x), keepdim=True)  # (torch's amax propagates NaN)


def _malformed(*positions: int, arrays=()):
    """A skip for cases whose scalar attribute at one of ``positions`` is a list (a range
    or a one-item choice) or whose array attribute at one of ``arrays`` holds lists, which
    the driver passes as written (CANN's harness draws from them)."""
    def skip(inputs) -> str | None:
        for position in positions:
            if position < len(inputs) and isinstance(inputs[position], list):
                return f"attribute {position} is written as {inputs[position]!r}"
        for position in arrays:
            value = inputs[position] if position < len(inputs) else None
            if isinstance(value, list) and any(isinstance(item, list) for item in value):
                return f"array attribute {position} is written as {value!r}"
        return None
    return skip


def _pair(values, fallback):
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        return list(fallback)
    return values * 2 if len(values) == 1 else values[:2]


@golden("MaxPool")
def max_pool(x, kernel, strides=(), auto_pad=0, pads=(), dilations=(), ceil_mode=0):
    kernel = _pair(kernel, (1, 1))
    pads = list(pads) if isinstance(pads, (list, tuple)) else [pads]
    if len(pads) == 4:
        top, left, bottom, right = pads
    else:
        top, left = _pair(pads, (0, 0))
        bottom, right = top, left
    padded = torch.nn.functional.pad(x, (left, right, top, bottom), value=-torch.inf)
    return torch.nn.functional.max_pool2d(padded, kernel, _pair(strides, (1, 1)), 0, 1,
                                          bool(ceil_mode))


@golden("MaxPool2dWithIndices", skip=_malformed(5))
def max_pool2d_with_indices(x, kernel, stride=(), padding=(0,), dilation=(1,), ceil=False):
    kernel = _pair(kernel, (1, 1))
    return torch.nn.functional.max_pool2d(x, kernel, _pair(stride, kernel),
                                          _pair(padding, (0, 0)), _pair(dilation, (1, 1)),
                                          bool(ceil), return_indices=True)


@golden("AvgPool2d", skip=_malformed(4, 5, 6, arrays=(1, 2, 3)))
def avg_pool2d(x, kernel, strides=(), paddings=(0,), ceil=False, include_pad=True,
               divisor=0, cube_math_type=0):
    kernel = _pair(kernel, (1, 1))
    return torch.nn.functional.avg_pool2d(x, kernel, _pair(strides, kernel),
                                          _pair(paddings, (0, 0)), ceil, include_pad,
                                          divisor or None)


@golden("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(x, output_size):
    return torch.nn.functional.adaptive_avg_pool2d(x, list(output_size))


@golden("AdaptiveMaxPool2d")
def adaptive_max_pool2d(x, output_size):
    return torch.nn.functional.adaptive_max_pool2d(x, list(output_size), return_indices=True)


@golden("AvgPool2dBackward")
def avg_pool2d_backward(grad, x, kernel, stride=(), padding=(0,), ceil=False, include_pad=True,
                        divisor=0, cube_math_type=0):
    kernel = _pair(kernel, (1, 1))
    return torch.ops.aten.avg_pool2d_backward(grad, x, kernel, _pair(stride, kernel),
                                              _pair(padding, (0, 0)), ceil, include_pad,
                                              divisor or None)


@golden("AdaptiveAvgPool2dBackward")
def adaptive_avg_pool2d_backward(grad, x):
    return torch.ops.aten._adaptive_avg_pool2d_backward(grad, x)


def _max_pool_args(kernel, stride, padding, dilation):
    """torch's (kernel, stride, padding, dilation) from aclnn's arrays (stride [] is the
    kernel)."""
    kernel = _pair(kernel, (1, 1))
    return kernel, _pair(stride, kernel), _pair(padding, (0, 0)), _pair(dilation, (1, 1))


def _forward_pool_indices(x, kernel, stride, padding, dilation, ceil) -> torch.Tensor:
    """Torch's max_pool2d indices of ``x`` (a numpy array), run in float32 as CANN's
    harnesses run the forward pool."""
    source = torch.from_numpy(np.asarray(x, np.float32))
    return torch.nn.functional.max_pool2d(source, *_max_pool_args(kernel, stride, padding,
                                                                  dilation),
                                          ceil_mode=bool(ceil), return_indices=True)[1]


def _indices_from_forward(inputs):
    """CANN's harness (executor_aclnnMaxPool2dWithIndicesBackward.py): ``indices`` is the
    forward pool's on ``self``, cast to the case's indices dtype. A case whose indices are
    ``"null"`` stays one of CANN's null-pointer cases."""
    grad, x, indices, *attrs = inputs
    if x is None or indices is None:
        return inputs
    made = _forward_pool_indices(x, *attrs[:5]).numpy().astype(indices.dtype)
    return [grad, x, made, *attrs]


@golden("MaxPool2dWithIndicesBackward", skip=_malformed(7), prepare=_indices_from_forward)
def max_pool2d_with_indices_backward(grad, x, indices, kernel, stride=(), padding=(0,),
                                     dilation=(1,), ceil=False):
    return torch.ops.aten.max_pool2d_with_indices_backward(
        grad, x, *_max_pool_args(kernel, stride, padding, dilation), bool(ceil), indices)


# -- MaxPool2dWithMask and its backward ----------------------------------------------------------
MASK_BLOCK = 16  # outputs per 16-bit word of a mask row (aclnnMaxPool2dWithMask.md)


def _harness_mask(indices: torch.Tensor, kernel) -> torch.Tensor:
    """The mask CANN's harness gives MaxPool2dWithMaskBackward
    (executor_aclnnMaxPool2dWithMaskBackward.py): torch's indices as int32, flattened,
    zero-padded to the documented mask shape ``(*lead, kH * kW, (ceil(Ho * Wo / 16) + 1) *
    32)`` and viewed as int8 (what aclnnMaxPool2dWithMask writes on Atlas A2/A3)."""
    kernel = _pair(kernel, (1, 1))
    *lead, height, width = indices.shape
    shape = (*lead, kernel[0] * kernel[1],
             (math.ceil(height * width / MASK_BLOCK) + 1) * 2 * MASK_BLOCK)
    flat = indices.to(torch.int32).flatten()
    padding = torch.zeros(math.prod(shape) // 4 - flat.numel(), dtype=torch.int32)
    return torch.cat((flat, padding)).view(torch.int8).reshape(shape)


def _pooled(size, kernel, stride, pad, ceil) -> int:
    """CANN's PoolingOutShape (dilation 1)."""
    span = size + 2 * pad - kernel
    if span < 0:
        return 0
    out = (span + (stride - 1 if ceil else 0)) // stride + 1
    return out - 1 if ceil and (out - 1) * stride >= size + pad else out


def _mask_over_budget(inputs) -> str | None:
    """A case whose int8 mask output (``kH * kW`` rows of about 2 bytes per output, per
    plane: up to ~60x the input for ATK's large kernels) exceeds the budget a case's inputs
    have here; decided once the attributes are bound."""
    x, kernel, stride, padding, _dilation, ceil = inputs[:6]
    arrays = (kernel, stride, padding)
    if not all(isinstance(a, (list, tuple)) and all(isinstance(v, int) for v in a)
               for a in arrays) or not isinstance(ceil, bool):
        return None
    kernel, stride, padding, _ = _max_pool_args(kernel, stride, padding, (1,))
    outs = [_pooled(size, *geometry, ceil) for size, *geometry in
            zip(x.shape[-2:], kernel, stride, padding, strict=True)]
    size = math.prod(x.shape[:-2]) * kernel[0] * kernel[1] * \
        (math.ceil(math.prod(outs) / MASK_BLOCK) + 1) * 2 * MASK_BLOCK
    if size > MAX_CASE_BYTES:
        return (f"the int8 mask output of {size >> 20} MiB exceeds the "
                f"{MAX_CASE_BYTES >> 20} MiB a case may take here")
    return None


def _mask_skip(inputs) -> str | None:
    return _malformed(5)(inputs) or _mask_over_budget(inputs)


@golden("MaxPool2dWithMask", skip=_mask_skip)
def max_pool2d_with_mask(x, kernel, stride=(), padding=(0,), dilation=(1,), ceil=False):
    """CANN's harness compares ``out`` only (its golden returns torch's values); the mask
    is checked too, against the layout its backward harness builds from torch's indices
    (``_harness_mask``), except for a 1 x 1 kernel, whose mask is CANN's bit mask (each
    window's one position taken)."""
    values, indices = torch.nn.functional.max_pool2d(
        x, *_max_pool_args(kernel, stride, padding, dilation), ceil_mode=bool(ceil),
        return_indices=True)
    single = _pair(kernel, (1, 1)) == [1, 1]
    return values, None if single else _harness_mask(indices, kernel)


def _mask_from_forward(inputs):
    """CANN's harness: ``indices`` is the forward pool's mask on ``self``, built from
    torch's indices (``_harness_mask``). A case whose mask is ``"null"`` stays one of
    CANN's null-pointer cases."""
    grad, x, indices, *attrs = inputs
    if x is None or indices is None:
        return inputs
    mask = _harness_mask(_forward_pool_indices(x, *attrs[:5]), attrs[0])
    return [grad, x, mask.numpy(), *attrs]


@golden("MaxPool2dWithMaskBackward", skip=_malformed(7), prepare=_mask_from_forward)
def max_pool2d_with_mask_backward(grad, x, mask, kernel, stride=(), padding=(0,),
                                  dilation=(1,), ceil=False):
    """CANN's golden: torch's max_pool2d_with_indices_backward at the forward's indices."""
    args = _max_pool_args(kernel, stride, padding, dilation)
    indices = torch.nn.functional.max_pool2d(x, *args, ceil_mode=bool(ceil),
                                             return_indices=True)[1]
    return torch.ops.aten.max_pool2d_with_indices_backward(grad, x, *args, bool(ceil),
                                                           indices)


def _adaptive_from_forward(pool):
    """CANN's harness (executor_aclnnAdaptiveMaxPool{2,3}dBackward.py): the forward
    adaptive pool of ``self`` at the case's output size, run in float32; its output becomes
    ``gradOutput`` (in self's dtype) and its indices, as INT32, ``indices``."""
    def prepare(inputs):
        grad, x, indices, output_size = inputs
        if x is None or grad is None or indices is None:
            return inputs
        source = torch.from_numpy(np.asarray(x, np.float32))
        values, made = pool(source, list(output_size), return_indices=True)
        return [values.numpy().astype(np.asarray(x).dtype), x,
                made.numpy().astype(np.int32), output_size]
    return prepare


@golden("AdaptiveMaxPool2dBackward", params=("gradOutput", "self", "indices", "_outputSize"),
        prepare=_adaptive_from_forward(torch.nn.functional.adaptive_max_pool2d))
def adaptive_max_pool2d_backward(grad, x, indices, _output_size):
    return torch.ops.aten.adaptive_max_pool2d_backward(grad, x, indices.long())


def _triple(values, fallback):
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        return list(fallback)
    return values * 3 if len(values) == 1 else values[:3]


@golden("AvgPool3d")
def avg_pool3d(x, kernel, stride=(), padding=(0,), ceil=False, include_pad=True, divisor=0):
    kernel = _triple(kernel, (1, 1, 1))
    return torch.nn.functional.avg_pool3d(x, kernel, _triple(stride, kernel),
                                          _triple(padding, (0, 0, 0)), ceil, include_pad,
                                          divisor or None)


@golden("MaxPool3dWithArgmax")
def max_pool3d_with_argmax(x, kernel, stride=(), padding=(0,), dilation=(1,), ceil=False):
    kernel = _triple(kernel, (1, 1, 1))
    return torch.nn.functional.max_pool3d(x, kernel, _triple(stride, kernel),
                                          _triple(padding, (0, 0, 0)),
                                          _triple(dilation, (1, 1, 1)), ceil,
                                          return_indices=True)


@golden("AdaptiveAvgPool3d")
def adaptive_avg_pool3d(x, output_size):
    return torch.nn.functional.adaptive_avg_pool3d(x, list(output_size))


@golden("AdaptiveMaxPool3d")
def adaptive_max_pool3d(x, output_size):
    return torch.nn.functional.adaptive_max_pool3d(x, list(output_size), return_indices=True)


@golden("AvgPool3dBackward")
def avg_pool3d_backward(grad, x, kernel, stride=(), padding=(0,), ceil=False,
                        include_pad=True, divisor=0):
    kernel = _triple(kernel, (1, 1, 1))
    return torch.ops.aten.avg_pool3d_backward(grad, x, kernel, _triple(stride, kernel),
                                              _triple(padding, (0, 0, 0)), ceil, include_pad,
                                              divisor or None)


@golden("AdaptiveAvgPool3dBackward")
def adaptive_avg_pool3d_backward(grad, x):
    return torch.ops.aten._adaptive_avg_pool3d_backward(grad, x)


def _pool3d_args(kernel, stride, padding, dilation):
    kernel = _triple(kernel, (1, 1, 1))
    return kernel, _triple(stride, kernel), _triple(padding, (0, 0, 0)), _triple(dilation,
                                                                                (1, 1, 1))


def _argmax3d_from_forward(inputs):
    """CANN's harness (executor_aclnnMaxPool3dWithArgmaxBackward.py): ``indices`` is the
    forward MaxPool3d's on ``self`` in float32, as INT32."""
    grad, x, indices, *attrs = inputs
    if x is None or indices is None:
        return inputs
    source = torch.from_numpy(np.asarray(x, np.float32))
    made = torch.nn.functional.max_pool3d(source, *_pool3d_args(*attrs[:4]),
                                          ceil_mode=bool(attrs[4]) if len(attrs) > 4
                                          else False, return_indices=True)[1]
    return [grad, x, made.numpy().astype(np.int32), *attrs]


@golden("MaxPool3dWithArgmaxBackward", skip=_malformed(7), prepare=_argmax3d_from_forward)
def max_pool3d_with_argmax_backward(grad, x, indices, kernel, stride=(), padding=(0,),
                                    dilation=(1,), ceil=False):
    return torch.ops.aten.max_pool3d_with_indices_backward(
        grad, x, *_pool3d_args(kernel, stride, padding, dilation), bool(ceil),
        indices.long())


@golden("AdaptiveMaxPool3dBackward", params=("gradOutput", "self", "indices", "_outputSize"),
        prepare=_adaptive_from_forward(torch.nn.functional.adaptive_max_pool3d))
def adaptive_max_pool3d_backward(grad, x, indices, _output_size):
    return torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices.long())
