"""3-d pooling, forward and backward: AvgPool3d, MaxPool3dWithArgmax, AdaptiveAvgPool3d,
AdaptiveMaxPool3d, AvgPool3dBackward, MaxPool3dWithArgmaxBackward,
AdaptiveAvgPool3dBackward, AdaptiveMaxPool3dBackward.

Semantics are PyTorch's ``avg_pool3d`` / ``max_pool3d(..., return_indices=True)`` /
``adaptive_*_pool3d`` and their gradients on the last three axes of a 4-D (C, D, H, W) or
5-D (N, C, D, H, W) tensor; indices are flat ``(d * H + h) * W + w`` positions in each
(D, H, W) volume. The kernels are the 2-d ones of ``pooling.py`` and
``pooling_backward.py``, which work over any number of trailing axes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from openacl.ops.call import Call, Kernel, array_module, like
from openacl.ops.pooling import (
    HALF_FLOATS,
    INDEX_DTYPES,
    _avg_divisor,
    _check_outputs,
    _ints,
    _max_with_indices,
    _pool_input,
    _separable,
    adaptive_average,
    adaptive_max,
    spread,
    symmetric_axes,
)
from openacl.ops.pooling_backward import (
    FLOAT64,
    _grad_like,
    _indices,
    _scatter_kernel,
    adaptive_average_adjoint,
    separable_adjoint,
)
from openacl.ops.registry import register

VOLUME_DIMS = 3  # (D, H, W)
ONE_OR_THREE = (1, 3)
NONE_ONE_OR_THREE = (0, 1, 3)
INT32 = np.dtype(np.int32)


# -- phase-1 helpers ---------------------------------------------------------------------------
def _triple(c: Call, name: str, lengths, minimum: int, fallback) -> tuple[int, int, int]:
    return spread(_ints(c, name, lengths, minimum, () if 0 in lengths else None), fallback)


def _half_kernel(c: Call, name: str, padding: Sequence[int], kernel: Sequence[int]) -> None:
    if any(p * 2 > k for p, k in zip(padding, kernel, strict=True)):
        raise c.fail(name, f"padding must be at most half the kernel size {list(kernel)}")


def _avg_geometry(c: Call):
    """AvgPool3d's (and its backward's) dtype, axes and divisor."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    kernel = _triple(c, "kernelSize", ONE_OR_THREE, 1, (1, 1, 1))
    stride = _triple(c, "stride", NONE_ONE_OR_THREE, 1, kernel)
    padding = _triple(c, "padding", ONE_OR_THREE, 0, (0, 0, 0))
    _half_kernel(c, "padding", padding, kernel)
    if any(k > s for k, s in zip(kernel, c.tensor("self").shape[-VOLUME_DIMS:], strict=True)):
        raise c.fail("kernelSize", "must not exceed self's (D, H, W)")
    axes = symmetric_axes(c, kernel, stride, padding, (1, 1, 1), c["ceilMode"])
    shape = _check_outputs(c, axes, "self", dtype)
    return dtype, axes, shape, _avg_divisor(axes, c["countIncludePad"], c["divisorOverride"])


def _max_geometry(c: Call):
    """MaxPool3dWithArgmax's (and its backward's) dtype, axes and output shape."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    kernel = _triple(c, "kernelSize", ONE_OR_THREE, 1, (1, 1, 1))
    stride = _triple(c, "stride", NONE_ONE_OR_THREE, 1, kernel)
    padding = _triple(c, "padding", ONE_OR_THREE, 0, (0, 0, 0))
    _half_kernel(c, "padding", padding, kernel)
    dilation = _triple(c, "dilation", ONE_OR_THREE, 1, (1, 1, 1))
    axes = symmetric_axes(c, kernel, stride, padding, dilation, c["ceilMode"])
    return dtype, axes, _check_outputs(c, axes, "self", dtype)


def _output_size3(c: Call) -> tuple[int, int, int]:
    return _ints(c, "outputSize", (VOLUME_DIMS,), 1)


def _volume_check(c: Call, name: str) -> None:
    """D * H * W must fit an int32 index (CANN's limit)."""
    if math.prod(c.tensor(name).shape[-VOLUME_DIMS:]) > np.iinfo(np.int32).max:
        raise c.fail(name, "D * H * W must not exceed the int32 maximum")


# -- forward ----------------------------------------------------------------------------------
@register("AvgPool3d", "self: tensor, kernelSize: int_array, stride: int_array = [], "
                       "padding: int_array = [0], ceilMode: bool = False, "
                       "countIncludePad: bool = True, divisorOverride: int = 0, out: tensor!")
def avg_pool3d(c: Call) -> Kernel:
    """``torch.nn.functional.avg_pool3d``; ``divisorOverride`` 0 means none. Sums are
    float64, rounded once into ``out``."""
    dtype, axes, shape, divisor = _avg_geometry(c)
    c.check_out("out", shape, dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        x = v.compute("self", FLOAT64)
        v.write("out", _separable(x, axes, 0, array_module(x).add) / like(x, divisor))
    return kernel_fn


@register("MaxPool3dWithArgmax",
          "self: tensor, kernelSize: int_array, stride: int_array = [], "
          "padding: int_array = [0], dilation: int_array = [1], ceilMode: bool = False, "
          "out: tensor!, indices: tensor!")
def max_pool3d_with_argmax(c: Call) -> Kernel:
    """``torch.nn.functional.max_pool3d(..., return_indices=True)``; indices int32 (CANN's
    default) or int64, flat in each (D, H, W) volume; NaN propagates."""
    dtype, axes, shape = _max_geometry(c)
    _volume_check(c, "self")
    c.check_out("out", shape, dtype, exact_dtype=True)
    index_dtype = INT32 if c["indices"] is None else c.check_dtype("indices", INDEX_DTYPES)
    c.check_out("indices", shape, index_dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        values, indices = _max_with_indices(v.compute("self", dtype), axes)
        v.write("out", values)
        v.write("indices", indices)
    return kernel_fn


@register("AdaptiveAvgPool3d", "self: tensor, outputSize: int_array, out: tensor!")
def adaptive_avg_pool3d(c: Call) -> Kernel:
    """``torch.nn.functional.adaptive_avg_pool3d``."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    out_size = _output_size3(c)
    shape = c.tensor("self").shape
    c.check_out("out", (*shape[:-VOLUME_DIMS], *out_size), dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        v.write("out", adaptive_average(v.compute("self", dtype), out_size))
    return kernel_fn


@register("AdaptiveMaxPool3d",
          "self: tensor, outputSize: int_array, outputOut: tensor!, indicesOut: tensor!")
def adaptive_max_pool3d(c: Call) -> Kernel:
    """``torch.nn.functional.adaptive_max_pool3d(..., return_indices=True)``; indices int32
    (CANN's default) or int64, flat in each (D, H, W) volume."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    _volume_check(c, "self")
    out_size = _output_size3(c)
    shape = (*c.tensor("self").shape[:-VOLUME_DIMS], *out_size)
    c.check_out("outputOut", shape, dtype, exact_dtype=True)
    index_dtype = INT32 if c["indicesOut"] is None else c.check_dtype("indicesOut",
                                                                      INDEX_DTYPES)
    c.check_out("indicesOut", shape, index_dtype, exact_dtype=True)
    sizes = c.tensor("self").shape[-VOLUME_DIMS:]

    def kernel_fn(v) -> None:
        values, indices = adaptive_max(v.compute("self", dtype), sizes, out_size)
        v.write("outputOut", values)
        v.write("indicesOut", indices)
    return kernel_fn


# -- backward ---------------------------------------------------------------------------------
@register("AvgPool3dBackward",
          "gradOutput: tensor, self: tensor, kernelSize: int_array, stride: int_array = [], "
          "padding: int_array = [0], ceilMode: bool = False, countIncludePad: bool = True, "
          "divisorOverride: int = 0, output: tensor!")
def avg_pool3d_backward(c: Call) -> Kernel:
    """The gradient of AvgPool3d with respect to ``self``."""
    dtype, axes, shape, divisor = _avg_geometry(c)
    _grad_like(c, shape, dtype, out="output")

    def kernel_fn(v) -> None:
        grad = v.compute("gradOutput", FLOAT64)
        v.write("output", separable_adjoint(grad / like(grad, divisor), axes))
    return kernel_fn


@register("MaxPool3dWithArgmaxBackward",
          "gradOutput: tensor, self: tensor, indices: tensor, kernelSize: int_array, "
          "stride: int_array = [], padding: int_array = [0], dilation: int_array = [1], "
          "ceilMode: bool = False, gradInput: tensor!")
def max_pool3d_with_argmax_backward(c: Call) -> Kernel:
    """The gradient of MaxPool3dWithArgmax: ``gradOutput`` added at ``indices``."""
    dtype, axes, shape = _max_geometry(c)
    _grad_like(c, shape, dtype)
    _indices(c, "indices", shape)
    return _scatter_kernel(c.tensor("self").shape, VOLUME_DIMS)


@register("AdaptiveAvgPool3dBackward", "gradOutput: tensor, self: tensor, out: tensor!")
def adaptive_avg_pool3d_backward(c: Call) -> Kernel:
    """The gradient of AdaptiveAvgPool3d; the output size is gradOutput's (D, H, W)."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    shape, grad_shape = c.tensor("self").shape, c.tensor("gradOutput").shape
    if len(grad_shape) != len(shape) or grad_shape[:-VOLUME_DIMS] != shape[:-VOLUME_DIMS] \
            or any(d <= 0 for d in grad_shape[-VOLUME_DIMS:]):
        raise c.fail("gradOutput", f"shape must be self's {list(shape[:-VOLUME_DIMS])} "
                                   f"followed by a positive output (D, H, W)")
    _grad_like(c, grad_shape, dtype, out="out")
    sizes = shape[-VOLUME_DIMS:]

    def kernel_fn(v) -> None:
        v.write("out", adaptive_average_adjoint(v.compute("gradOutput", FLOAT64), sizes))
    return kernel_fn


@register("AdaptiveMaxPool3dBackward",
          "gradOutput: tensor, self: tensor, indices: tensor, gradInput: tensor!")
def adaptive_max_pool3d_backward(c: Call) -> Kernel:
    """The gradient of AdaptiveMaxPool3d: ``gradOutput`` added at ``indices``."""
    dtype = _pool_input(c, "self", HALF_FLOATS, spatial=VOLUME_DIMS)
    shape, grad_shape = c.tensor("self").shape, c.tensor("gradOutput").shape
    if len(grad_shape) != len(shape) or grad_shape[:-VOLUME_DIMS] != shape[:-VOLUME_DIMS]:
        raise c.fail("gradOutput", f"shape must be self's {list(shape[:-VOLUME_DIMS])} "
                                   f"followed by the output (D, H, W)")
    _grad_like(c, grad_shape, dtype)
    _indices(c, "indices", grad_shape)
    return _scatter_kernel(shape, VOLUME_DIMS)
