"""Backward pooling operators: AvgPool2dBackward, MaxPool2dWithIndicesBackward,
MaxPool2dWithMaskBackward, AdaptiveAvgPool2dBackward, AdaptiveMaxPool2dBackward.

Each is the adjoint of its forward kernel in ``pooling.py`` (PyTorch's
``avg_pool2d_backward`` / ``max_pool2d_with_indices_backward`` /
``_adaptive_avg_pool2d_backward`` / ``adaptive_max_pool2d_backward``):

* average pooling: every window's gradient, divided by its divisor, is added to each input
  position of the window: one strided whole-array add per kernel tap and axis (the adjoint
  of the forward's separable sum), then the padding is cropped away;
* adaptive average pooling: each bin's gradient over its count added to its members, a BLAS
  product with each axis's averaging matrix for finite gradients, else one slice-add per
  bin (a product's zero weights would turn an inf into NaN outside its bin);
* max pooling: each output's gradient added at its recorded index (``h * W + w`` in its
  plane; the mask form's read out of its int8 mask, ``pooling.mask_indices``) with one
  ``bincount`` over every plane (several windows may pick one input).

Gradients are summed in float64 and rounded once into ``gradInput``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from openacl.ops.call import Call, Kernel, array_module, like
from openacl.ops.pooling import (
    CUBE_MATH_TYPES,
    HALF_FLOATS,
    INDEX_DTYPES,
    MASK_DTYPE,
    SPATIAL_DIMS,
    Axis,
    _avg_divisor,
    _bin_weights,
    _bins,
    _check_half_kernel_padding,
    _check_outputs,
    _ints,
    _padded_axes,
    _pair,
    _pool_input,
    mask_indices,
    mask_shape,
    max_pool_geometry,
)
from openacl.ops.registry import register

FLOAT64 = np.dtype(np.float64)


# -- phase-1 helpers ---------------------------------------------------------------------------
def _grad_like(c: Call, shape: Sequence[int], dtype: np.dtype, grad: str = "gradOutput",
               out: str = "gradInput") -> None:
    """``grad`` has the forward output's ``shape`` and the input's dtype; ``out`` is the
    input's shape and dtype."""
    c.check_dtype(grad, {dtype})
    if c.tensor(grad).shape != tuple(shape):
        raise c.fail(grad, f"shape must be the pooled output's {list(shape)}")
    c.check_out(out, c.tensor("self").shape, dtype, exact_dtype=True)


def _indices(c: Call, name: str, shape: Sequence[int], allowed=INDEX_DTYPES) -> None:
    c.check_dtype(name, allowed)
    if c.tensor(name).shape != tuple(shape):
        raise c.fail(name, f"shape must equal gradOutput's {list(shape)}")


# -- kernels -------------------------------------------------------------------------------------
def separable_adjoint(grad: np.ndarray, axes: Sequence[Axis]) -> np.ndarray:
    """The adjoint of ``pooling._separable``'s windowed sum over the last ``len(axes)``
    axes: ``grad`` (per output) added to every input position of its window, padding
    cropped. One strided add per kernel tap and axis (the taps of one axis never repeat a
    position, so each add is a plain slice update)."""
    xp = array_module(grad)
    result = grad
    lead = grad.ndim - len(axes)
    for k in range(len(axes) - 1, -1, -1):  # the forward's last pass is undone first
        axis = axes[k]
        padded = max(axis.pad_before + axis.size, (axis.out - 1) * axis.stride + axis.extent)
        shape = list(result.shape)
        shape[lead + k] = padded
        spread = xp.zeros(shape, result.dtype)
        for tap in range(axis.kernel):
            start = tap * axis.dilation
            index = [slice(None)] * result.ndim
            index[lead + k] = slice(start, start + (axis.out - 1) * axis.stride + 1, axis.stride)
            spread[tuple(index)] += result
        crop = [slice(None)] * result.ndim
        crop[lead + k] = slice(axis.pad_before, axis.pad_before + axis.size)
        result = spread[tuple(crop)]
    return result


def scatter_at_indices(grad: np.ndarray, indices: np.ndarray, plane: int) -> np.ndarray:
    """(planes, k) ``grad`` summed per plane at flat positions ``indices`` (planes, k) of a
    ``plane``-element input plane: a (planes, plane) float64 array. Indices outside the
    plane (no forward kernel writes them) contribute nothing."""
    xp = array_module(grad)
    planes = grad.shape[0]
    index = indices.astype(np.int64)
    weights = grad.astype(FLOAT64)
    outside = (index < 0) | (index >= plane)
    if bool(outside.any()):
        index, weights = xp.where(outside, 0, index), xp.where(outside, 0.0, weights)
    flat = index + like(grad, np.arange(planes, dtype=np.int64)[:, None] * plane)
    return xp.bincount(flat.reshape(-1), weights=weights.reshape(-1),
                       minlength=planes * plane).reshape(planes, plane)


def adaptive_average_adjoint(grad: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """The adjoint of ``pooling.adaptive_average``: each bin's gradient over its count
    added to its members, for input spatial ``sizes`` (float64)."""
    xp = array_module(grad)
    grad = grad.astype(FLOAT64)
    lead = grad.ndim - len(sizes)
    finite = bool(xp.isfinite(grad).all())
    for k, size in enumerate(sizes):
        axis = lead + k
        out = grad.shape[axis]
        if finite:
            weights = _bin_weights(size, out)  # (out, size)
            moved = xp.moveaxis(grad, axis, -1)
            grad = xp.moveaxis(moved @ like(grad, weights), -1, axis)
            continue
        starts, ends = _bins(size, out)
        shape = list(grad.shape)
        shape[axis] = size
        spread = xp.zeros(shape, FLOAT64)
        for b in range(out):  # (an inf stays inside its own bin)
            target = [slice(None)] * grad.ndim
            target[axis] = slice(int(starts[b]), int(ends[b]))
            source = [slice(None)] * grad.ndim
            source[axis] = slice(b, b + 1)
            spread[tuple(target)] += grad[tuple(source)] / float(ends[b] - starts[b])
        grad = spread
    return grad


# -- AvgPool2dBackward ---------------------------------------------------------------------------
@register("AvgPool2dBackward",
          "gradOutput: tensor, self: tensor, kernelSize: int_array, stride: int_array = [], "
          "padding: int_array = [0], ceilMode: bool = False, countIncludePad: bool = True, "
          "divisorOverride: int = 0, cubeMathType: int = 0, gradInput: tensor!")
def avg_pool2d_backward(c: Call) -> Kernel:
    """The gradient of AvgPool2d with respect to ``self``."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    kernel = _pair(_ints(c, "kernelSize", (1, 2), 1), (1, 1))
    stride = _pair(_ints(c, "stride", (0, 1, 2), 1), kernel)
    padding = _pair(_ints(c, "padding", (1, 2), 0), (0, 0))
    _check_half_kernel_padding(c, "padding", padding, kernel)
    if c["cubeMathType"] not in CUBE_MATH_TYPES:
        raise c.fail("cubeMathType", f"expected one of {list(CUBE_MATH_TYPES)}")
    axes = _padded_axes(c, kernel, stride, (*padding, *padding), (1, 1), c["ceilMode"])
    _grad_like(c, _check_outputs(c, axes, "self", dtype), dtype)
    divisor = _avg_divisor(axes, c["countIncludePad"], c["divisorOverride"])

    def kernel_fn(v) -> None:
        grad = v.compute("gradOutput", FLOAT64)
        v.write("gradInput", separable_adjoint(grad / like(grad, divisor), axes))
    return kernel_fn


# -- MaxPool2dWithIndicesBackward, MaxPool2dWithMaskBackward -----------------------------------
@register("MaxPool2dWithIndicesBackward",
          "gradOutput: tensor, self: tensor, indices: tensor, kernelSize: int_array, "
          "stride: int_array = [], padding: int_array = [0], dilation: int_array = [1], "
          "ceilMode: bool = False, gradInput: tensor!")
def max_pool2d_with_indices_backward(c: Call) -> Kernel:
    """The gradient of MaxPool2dWithIndices: ``gradOutput`` added at ``indices``."""
    dtype, _, _, shape = max_pool_geometry(c)
    _grad_like(c, shape, dtype)
    _indices(c, "indices", shape)
    return _scatter_kernel(c.tensor("self").shape)


@register("MaxPool2dWithMaskBackward",
          "gradOutput: tensor, self: tensor, indices: tensor, kernelSize: int_array, "
          "stride: int_array = [], padding: int_array = [0], dilation: int_array = [1], "
          "ceilMode: bool = False, gradInput: tensor!")
def max_pool2d_with_mask_backward(c: Call) -> Kernel:
    """The gradient of MaxPool2dWithMask: ``gradOutput`` added at the positions its int8
    mask ``indices`` records (``pooling.mask_indices``); dilation 1 only."""
    dtype, kernel, axes, shape = max_pool_geometry(c, unit_dilation=True)
    _grad_like(c, shape, dtype)
    c.check_dtype("indices", {MASK_DTYPE})
    expected = mask_shape(shape[:-SPATIAL_DIMS], kernel, shape[-SPATIAL_DIMS:])
    if c.tensor("indices").shape != expected:
        raise c.fail("indices", f"shape must be MaxPool2dWithMask's mask shape "
                                f"{list(expected)}")
    return _scatter_kernel(c.tensor("self").shape, indices=lambda mask, planes: mask_indices(
        mask, kernel, axes, planes))


def _scatter_kernel(shape: Sequence[int], spatial: int = SPATIAL_DIMS,
                    indices: Callable[[np.ndarray, int], np.ndarray] | None = None) -> Kernel:
    """``gradOutput`` summed into ``gradInput`` (``shape``) at the flat positions input
    ``indices`` holds, or ``indices(its array, planes)`` gives as (planes, outputs)."""
    plane = math.prod(shape[-spatial:])
    planes = math.prod(shape[:-spatial])

    def kernel_fn(v) -> None:
        grad = v.compute("gradOutput", FLOAT64)
        index = v["indices"].reshape(planes, -1) if indices is None else \
            indices(v["indices"], planes)
        flat = scatter_at_indices(grad.reshape(planes, -1), index, plane)
        v.write("gradInput", flat.reshape(shape))
    return kernel_fn


# -- adaptive pooling backward -----------------------------------------------------------------
@register("AdaptiveAvgPool2dBackward", "gradOutput: tensor, self: tensor, out: tensor!")
def adaptive_avg_pool2d_backward(c: Call) -> Kernel:
    """The gradient of AdaptiveAvgPool2d; the output size is gradOutput's (H, W)."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    grad_shape = c.tensor("gradOutput").shape
    shape = c.tensor("self").shape
    if len(grad_shape) != len(shape) or grad_shape[:-SPATIAL_DIMS] != shape[:-SPATIAL_DIMS] \
            or any(d <= 0 for d in grad_shape[-SPATIAL_DIMS:]):
        raise c.fail("gradOutput", f"shape must be self's {list(shape[:-SPATIAL_DIMS])} "
                                   f"followed by a positive output (H, W)")
    _grad_like(c, grad_shape, dtype, out="out")
    sizes = shape[-SPATIAL_DIMS:]

    def kernel_fn(v) -> None:
        v.write("out", adaptive_average_adjoint(v.compute("gradOutput", FLOAT64), sizes))
    return kernel_fn


@register("AdaptiveMaxPool2dBackward",
          "gradOutput: tensor, self: tensor, indices: tensor, gradInput: tensor!")
def adaptive_max_pool2d_backward(c: Call) -> Kernel:
    """The gradient of AdaptiveMaxPool2d: ``gradOutput`` added at ``indices``."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    grad_shape = c.tensor("gradOutput").shape
    shape = c.tensor("self").shape
    if len(grad_shape) != len(shape) or grad_shape[:-SPATIAL_DIMS] != shape[:-SPATIAL_DIMS]:
        raise c.fail("gradOutput", f"shape must be self's {list(shape[:-SPATIAL_DIMS])} "
                                   f"followed by the output (H, W)")
    _grad_like(c, grad_shape, dtype)
    _indices(c, "indices", grad_shape)
    return _scatter_kernel(shape)
