"""Goldens of the pooling family (CANN's pooling/ operators): max, average, adaptive and
global pools in 2-d and 3-d and their backward forms. Each is PyTorch in float64."""

from __future__ import annotations

import torch

from atk_driver import golden


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


def _forward_indices(inputs) -> str | None:
    return ("CANN's harness makes these indices by running the forward pool on self; the "
            "case's own indices are random values of another shape, which no forward "
            "writes (the driver has no hook to derive an input)")


@golden("MaxPool2dWithIndicesBackward", skip=_forward_indices)
def max_pool2d_with_indices_backward(grad, x, indices, *attrs):
    pass


@golden("AdaptiveMaxPool2dBackward", skip=_forward_indices)
def adaptive_max_pool2d_backward(grad, x, indices, *attrs):
    pass


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


@golden("MaxPool3dWithArgmaxBackward", skip=_forward_indices)
def max_pool3d_with_argmax_backward(grad, x, indices, *attrs):
    pass


@golden("AdaptiveMaxPool3dBackward", skip=_forward_indices)
def adaptive_max_pool3d_backward(grad, x, indices, *attrs):
    pass
