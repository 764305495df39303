"""Pooling operators: MaxPool, MaxPool2dWithIndices, MaxPool2dWithMask, AvgPool2d,
AdaptiveAvgPool2d, AdaptiveMaxPool2d.

Semantics are aclnn's, which are PyTorch's ``max_pool2d`` / ``avg_pool2d`` /
``adaptive_*_pool2d`` on the last two axes of a 3-D (C, H, W) or 4-D (N, C, H, W) tensor:

* Output size per spatial axis: ``floor_or_ceil((in + pad_before + pad_after - dilation *
  (kernel - 1) - 1) / stride) + 1``; in ceil mode a last window that would start inside the
  bottom/right padding (``(out - 1) * stride >= in + pad_before``) is dropped.
* Max pooling pads with -inf (the integer minimum for integer dtypes) and propagates NaN;
  indices are flat positions ``h * W + w`` in each (H, W) plane, the first maximum in
  row-major window order, as PyTorch's CPU kernel picks them. MaxPool2dWithMask records
  them in CANN's int8 mask instead (``encode_mask``).
* Average pooling pads with zeros; the divisor is ``divisorOverride`` when non-zero, else
  the window clipped to the padded input (``countIncludePad``) or to the input itself.
* Adaptive bins on an axis of size ``L`` into ``n`` outputs: ``[floor(i L / n),
  ceil((i + 1) L / n))``.

Kernels are vectorised: max pools combine one axis at a time, a strided whole-array pass
per kernel tap (kh + kw passes, ``_separable``); average pools add every tap in row-major
order, as PyTorch and onnxruntime do (kh * kw passes, ``_window_sum``); max with indices scans the
taps of one axis at a time too (``_scanned_argmax``), or, for few outputs, takes one
argmax over strided window views (``sliding_window_view``); adaptive bins are gathered per axis
(average: no prefix sums, so an inf stays in its own bin) or all at once (max); no Python
loop visits pixels.
float16/bfloat16 are computed in float32 and rounded once into the output.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import native, promotion
from openacl.ops.call import FLOAT_DTYPES, Call, Kernel, array_module, as_array, like
from openacl.ops.registry import register

SPATIAL_DIMS = 2  # pooling works on the last two axes (H, W)
HALF_FLOATS = frozenset({np.dtype(np.float16), promotion.BFLOAT16, np.dtype(np.float32)})
INDEX_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
# aclnnMaxPool also takes integer tensors
MAX_POOL_DTYPES = HALF_FLOATS | frozenset(np.dtype(t) for t in (
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64))
AUTO_PAD_NOTSET = 0  # aclnnMaxPool's autoPad: only "NOTSET" exists
# the padded (H, W) plane the kernels build; larger geometries (legal for a huge kernel with
# huge padding over a small input) are refused in phase 1 instead of exhausting host memory
MAX_PADDED_PLANE = 1 << 26  # elements
ADAPTIVE_BLOCK_ELEMENTS = 1 << 22  # input elements an adaptive average widens at a time
CUBE_MATH_TYPES = (0, 1, 2)  # KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16 (USE_HF32 refused)
# max with indices: the cost model choosing between an axis-by-axis scan and one argmax over
# gathered windows (``_scan_pays``), in elements visited, fitted to numpy on x86
SCAN_PASS_COST = 1 << 14  # the fixed cost of one tap's few numpy calls
SCAN_ELEMENT_COST = 1.5  # a scanned element against a gathered one
WINDOW_MAX_ELEMENTS = 1 << 26  # a larger window gather always scans (memory)


@dataclass(frozen=True)
class Axis:
    """The geometry of one spatial axis of a windowed pool."""

    size: int
    kernel: int
    stride: int
    pad_before: int
    pad_after: int
    dilation: int = 1
    ceil: bool = False

    @property
    def extent(self) -> int:
        """Input positions one dilated window spans."""
        return self.dilation * (self.kernel - 1) + 1

    @property
    def out(self) -> int:
        span = self.size + self.pad_before + self.pad_after - self.extent
        if span < 0:
            return 0
        if not self.ceil:
            return span // self.stride + 1
        out = -(-span // self.stride) + 1
        if (out - 1) * self.stride >= self.size + self.pad_before:
            out -= 1
        return out

    @property
    def starts(self) -> np.ndarray:
        """First input position (may be negative: padding) of each output's window."""
        return np.arange(self.out) * self.stride - self.pad_before


# -- phase-1 helpers ---------------------------------------------------------------------------
def _ints(c: Call, name: str, lengths: Sequence[int], minimum: int,
          default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """An int array argument whose length is one of ``lengths`` and items >= ``minimum``."""
    values = c[name]
    if values is None:
        if default is not None:
            return default
        raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
    if len(values) not in lengths:
        raise c.fail(name, f"length must be one of {list(lengths)}")
    if any(value < minimum for value in values):
        raise c.fail(name, f"every element must be >= {minimum}")
    return tuple(int(v) for v in values)


def _pair(values: tuple[int, ...], fallback: tuple[int, int]) -> tuple[int, int]:
    """(H, W) from an array of length 0 (``fallback``), 1 (both) or 2."""
    return spread(values, fallback)


def spread(values: tuple[int, ...], fallback: tuple[int, ...]) -> tuple[int, ...]:
    """One value per spatial axis (as many as ``fallback`` has) from an array of length 0
    (``fallback``), 1 (every axis) or one per axis."""
    if not values:
        return tuple(fallback)
    return tuple(values) * len(fallback) if len(values) == 1 else tuple(values)


def _pool_input(c: Call, name: str, supported, allow_empty: bool = False,
                spatial: int = SPATIAL_DIMS) -> np.dtype:
    """An input of ``spatial`` + 1 or + 2 dims ((C, H, W) / (N, C, H, W), or with D) whose
    non-batch dims are positive; returns its dtype."""
    dtype = c.check_dtype(name, supported)
    shape = c.tensor(name).shape
    if len(shape) not in (spatial + 1, spatial + 2):
        layout = "C, H, W" if spatial == SPATIAL_DIMS else "C, D, H, W"
        raise c.fail(name, f"must be {spatial + 1}-D ({layout}) or {spatial + 2}-D (N, "
                           f"{layout}), got {len(shape)}-D")
    if not allow_empty and any(d <= 0 for d in shape[-spatial - 1:]):
        raise c.fail(name, "its channel and spatial dims must be positive")
    return dtype


def symmetric_axes(c: Call, kernel: Sequence[int], stride: Sequence[int],
                   padding: Sequence[int], dilation: Sequence[int], ceil: bool,
                   name: str = "self") -> tuple[Axis, ...]:
    """The axes of the trailing ``len(kernel)`` dims of ``name``, padded alike at both
    ends."""
    sizes = c.tensor(name).shape[-len(kernel):]
    return tuple(Axis(*geometry, ceil) for geometry in zip(
        sizes, kernel, stride, padding, padding, dilation, strict=True))


def _check_outputs(c: Call, axes: Sequence[Axis], name: str, dtype: np.dtype) -> tuple:
    """The pooled output shape of input ``name`` over ``axes`` (its trailing dims)."""
    outs = [a.out for a in axes]
    shape = (*c.tensor(name).shape[:-len(axes)], *outs)
    if any(out <= 0 for out in outs):
        raise c.fail(name, f"the pooled output size {outs} is not positive "
                           f"(kernel, stride, padding and dilation leave no window)")
    plane = math.prod(_padded_size(a) for a in axes)
    if plane > MAX_PADDED_PLANE:
        raise c.fail(name, f"the padded window plane of {plane} elements exceeds this "
                           f"implementation's limit of {MAX_PADDED_PLANE}")
    return shape


def _max_fill(dtype: np.dtype):
    return -np.inf if promotion.is_floating(dtype) else np.iinfo(dtype).min


# -- kernels (over the last len(axes) dims: (H, W) or (D, H, W)) -------------------------------
def _padded_size(axis: Axis) -> int:
    """Positions of the padded axis that some window may reach."""
    return max(axis.pad_before + axis.size, (axis.out - 1) * axis.stride + axis.extent)


def _windows(x: np.ndarray, axes: Sequence[Axis], fill) -> np.ndarray:
    """Strided view of every pooling window: ``(..., *outs, *kernel)``."""
    x = _padded(x, axes, fill)
    dims = tuple(range(-len(axes), 0))
    view = array_module(x).lib.stride_tricks.sliding_window_view(
        x, tuple(a.extent for a in axes), axis=dims)
    picks = tuple(slice(None, (a.out - 1) * a.stride + 1, a.stride) for a in axes) + \
        tuple(slice(None, None, a.dilation) for a in axes)
    return view[(Ellipsis, *picks)]


def _padded(x: np.ndarray, axes: Sequence[Axis], fill) -> np.ndarray:
    """``x`` with the padding every window may reach filled with ``fill`` (``x`` itself
    when no window leaves it)."""
    sizes = tuple(_padded_size(a) for a in axes)
    if sizes == tuple(a.size for a in axes) and not any(a.pad_before for a in axes):
        return x
    padded = array_module(x).full((*x.shape[:-len(axes)], *sizes), fill, x.dtype)
    inner = tuple(slice(a.pad_before, a.pad_before + a.size) for a in axes)
    padded[(Ellipsis, *inner)] = x
    return padded


def _separable(x: np.ndarray, axes: Sequence[Axis], fill, combine) -> np.ndarray:
    """``combine`` (np.maximum or np.add) over every window, one axis at a time, the last
    first: kernel-size strided passes per axis (kh + kw passes over the data, not kh * kw,
    and each a whole-array ufunc: no per-window loop). Max is exactly separable; a sum
    differs from a window-at-once sum only in the order of its float additions."""
    x = _padded(x, axes, fill)
    for k in range(len(axes) - 1, -1, -1):
        axis, dim = axes[k], x.ndim - len(axes) + k
        result = None
        for tap in range(axis.kernel):
            start = tap * axis.dilation
            index = [slice(None)] * x.ndim
            index[dim] = slice(start, start + (axis.out - 1) * axis.stride + 1, axis.stride)
            part = x[tuple(index)]
            result = part.copy() if result is None else combine(result, part, out=result)
        x = result
    return x


def _window_sum(x: np.ndarray, axes: Sequence[Axis]) -> np.ndarray:
    """The sum of every window (zero padding), its taps added to a zero accumulator in
    row-major order, as PyTorch's and onnxruntime's CPU pools add them: ``_separable``'s
    axis-by-axis sum differs in the last bit on a few percent of the windows, which a model
    that quantises the average afterwards turns into whole quanta. One whole-array pass per
    tap (kh * kw of them)."""
    x = _padded(x, axes, 0)
    xp = array_module(x)
    total = xp.zeros((*x.shape[:-len(axes)], *(a.out for a in axes)), x.dtype)
    for taps in itertools.product(*(range(a.kernel) for a in axes)):
        index = [Ellipsis]
        for axis, tap in zip(axes, taps, strict=True):
            start = tap * axis.dilation
            index.append(slice(start, start + (axis.out - 1) * axis.stride + 1, axis.stride))
        xp.add(total, x[tuple(index)], out=total)
    return total


def _max_values(x: np.ndarray, axes: Sequence[Axis]) -> np.ndarray:
    return _separable(x, axes, _max_fill(x.dtype), array_module(x).maximum)


def _first_valid(axis: Axis) -> np.ndarray:
    """Per output, the first window position inside the input (PyTorch's index when every
    value of a window is -inf)."""
    starts = axis.starts
    skip = np.maximum(0, -starts)
    return starts + -(-skip // axis.dilation) * axis.dilation


def torch_argmax(windows: np.ndarray) -> np.ndarray:
    """Per window (last axis), the index PyTorch's CPU pools pick: the first maximum, but
    the last NaN when the window holds one (their ``val > max || isnan(val)`` scan)."""
    xp = array_module(windows)
    arg = windows.argmax(axis=-1)
    if windows.dtype.kind == "f":
        nan = xp.isnan(windows)
        if bool(nan.any()):
            last = windows.shape[-1] - 1 - nan[..., ::-1].argmax(axis=-1)
            arg = xp.where(nan.any(axis=-1), last, arg)
    return arg


def unravel(flat: np.ndarray, dims: Sequence[int]) -> list[np.ndarray]:
    """``np.unravel_index(flat, dims)`` by integer division (numpy 2.4's unravel_index
    returns wrong coordinates past its first 8192 elements for a multi-dim ``flat``)."""
    coordinates = []
    for dim in reversed(dims[1:]):
        coordinates.append(flat % dim)
        flat = flat // dim
    coordinates.append(flat)
    return coordinates[::-1]


def _max_with_indices(x: np.ndarray, axes: Sequence[Axis]) -> tuple[np.ndarray, np.ndarray]:
    """Max values and flat indices (``h * W + w``, or ``(d * H + h) * W + w``) of every
    window, the first maximum in window order (PyTorch's pick, ``torch_argmax``)."""
    n = len(axes)
    taps = math.prod(a.kernel for a in axes)
    if _scan_pays(math.prod(x.shape[:-n]), axes):
        values, arg = _scanned_argmax(x, axes)
    else:
        windows = _windows(x, axes, _max_fill(x.dtype))
        flat = windows.reshape(*windows.shape[:-n], taps)
        arg = torch_argmax(flat)
        values = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    offsets = unravel(arg, tuple(a.kernel for a in axes))
    index, outside = None, None
    for k, (axis, offset) in enumerate(zip(axes, offsets, strict=True)):
        shape = [1] * n
        shape[k] = axis.out
        # (int32: a padded plane has at most MAX_PADDED_PLANE elements)
        position = like(offset, axis.starts.reshape(shape).astype(np.int32)) + \
            offset * axis.dilation
        if _padded_size(axis) != axis.size or axis.pad_before:  # some window leaves it
            out_k = (position < 0) | (position >= axis.size)
            outside = out_k if outside is None else outside | out_k
        index = position if index is None else index * axis.size + position
    if outside is not None and outside.any():  # all -inf: PyTorch's first valid position
        first = None
        for k, axis in enumerate(axes):
            shape = [1] * n
            shape[k] = axis.out
            position = like(arg, _first_valid(axis).reshape(shape).astype(np.int32))
            first = position if first is None else first * axis.size + position
        index = np.where(outside, first, index)
    return values, index


def _scan_pays(planes: int, axes: Sequence[Axis]) -> bool:
    """Whether ``_scanned_argmax`` beats one argmax over the gathered windows: a scan
    visits each axis's intermediate (later axes pooled) once per tap of that axis, plus a
    fixed cost per tap; the gather copies every window, dearer per element for small
    windows (short inner loops); a gather over WINDOW_MAX_ELEMENTS always scans."""
    taps = math.prod(a.kernel for a in axes)
    gathered = planes * math.prod(a.out for a in axes) * taps
    if gathered > WINDOW_MAX_ELEMENTS:
        return True
    size, scan = planes * math.prod(_padded_size(a) for a in axes), 0.0
    for axis in reversed(axes):
        size = size // _padded_size(axis) * axis.out
        scan += axis.kernel * (size * SCAN_ELEMENT_COST + SCAN_PASS_COST)
    return scan < gathered * (1 + 4 / math.sqrt(taps))


def _scanned_argmax(x: np.ndarray, axes: Sequence[Axis]) -> tuple[np.ndarray, np.ndarray]:
    """Window maxima and the tap (row-major window position) each came from, one axis at
    a time, the last first (kh + kw strided whole-array passes for a 2-d window, not
    kh * kw, and no window copy), each pass PyTorch's scan ``val > max || isnan(val)``
    over the axis's taps in order: a compare, a maximum and a branch-free select per tap.

    Separable as PyTorch's row-major scan is: the first maximum of a window lies in the
    first row holding the window's maximum, at that row's first maximum; a NaN is the
    last NaN of the last row holding one. Padding is -inf, which never wins the strict
    compare over a real value (``_max_with_indices`` moves an all -inf window's pick)."""
    xp = array_module(x)
    values = _padded(x, axes, _max_fill(x.dtype))
    nan = x.dtype.kind == "f" and bool(xp.isnan(x).any())
    arg, later = None, 1  # the tap over the axes scanned so far, and their tap count
    for k in range(len(axes) - 1, -1, -1):
        axis, dim = axes[k], values.ndim - len(axes) + k
        best = best_arg = None
        for tap in range(axis.kernel):
            start = tap * axis.dilation
            index = [slice(None)] * values.ndim
            index[dim] = slice(start, start + (axis.out - 1) * axis.stride + 1, axis.stride)
            part, offset = values[tuple(index)], np.int32(tap * later)
            if best is None:
                best = part.copy()
                best_arg = xp.zeros(part.shape, np.int32) if arg is None else \
                    arg[tuple(index)].copy()
                continue
            take = xp.greater(part, best)
            if nan:
                take |= xp.isnan(part)
            xp.maximum(best, part, out=best)  # (NaN propagates, as the scan keeps it)
            # best_arg = take ? candidate : best_arg, branch-free
            step = xp.subtract(offset, best_arg) if arg is None else \
                xp.subtract(arg[tuple(index)] + offset, best_arg)
            step *= take
            best_arg += step
        values, arg, later = best, best_arg, later * axis.kernel
    return values, arg


def _compute_input(v, name: str, dtype: np.dtype) -> np.ndarray:
    return v.compute(name, dtype) if promotion.is_floating(dtype) else as_array(v[name])


# -- MaxPool (ONNX-style arguments) --------------------------------------------------------------
def _padded_axes(c: Call, kernel: tuple[int, int], stride: tuple[int, int],
                 pads: tuple[int, int, int, int], dilation: tuple[int, int], ceil: bool
                 ) -> tuple[Axis, Axis]:
    """(H, W) axes of input ``self``; ``pads`` is (top, left, bottom, right)."""
    height, width = c.tensor("self").shape[-SPATIAL_DIMS:]
    return (Axis(height, kernel[0], stride[0], pads[0], pads[2], dilation[0], ceil),
            Axis(width, kernel[1], stride[1], pads[1], pads[3], dilation[1], ceil))


def _check_half_kernel_padding(c: Call, name: str, padding: tuple[int, int],
                               kernel: tuple[int, int]) -> None:
    if any(p * 2 > k for p, k in zip(padding, kernel, strict=True)):
        raise c.fail(name, f"padding must be at most half the kernel size {list(kernel)}")


# -- MaxPool (ONNX-style arguments) --------------------------------------------------------------
@register("MaxPool", "self: tensor, kernelShape: int_array, strides: int_array = [], "
                     "autoPad: int = 0, pads: int_array = [], dilations: int_array = [], "
                     "ceilMode: int = 0, out: tensor!")
def max_pool(c: Call) -> Kernel:
    """Max pooling with ONNX-style attributes: ``pads`` of length 4 is (top, left, bottom,
    right), length 2 is (top/bottom, left/right); ``ceilMode`` non-zero rounds up."""
    dtype = _pool_input(c, "self", MAX_POOL_DTYPES)
    kernel = _pair(_ints(c, "kernelShape", (1, 2), 1), (1, 1))
    stride = _pair(_ints(c, "strides", (0, 1, 2), 1, ()), (1, 1))
    if c["autoPad"] != AUTO_PAD_NOTSET:
        raise c.fail("autoPad", "only 0 (NOTSET) is supported")
    pads = _ints(c, "pads", (0, 1, 2, 4), 0, ())
    if len(pads) == 4:
        top, left, bottom, right = pads
    else:
        top, left = _pair(pads, (0, 0))
        bottom, right = top, left
    if top + bottom > kernel[0] or left + right > kernel[1]:
        raise c.fail("pads", f"the padding of an axis must not exceed its kernel size "
                             f"{list(kernel)}")
    dilations = _ints(c, "dilations", (0, 1, 2, 4), 1, ())
    if any(d != 1 for d in dilations):
        raise c.fail("dilations", "only 1 is supported")
    axes = _padded_axes(c, kernel, stride, (top, left, bottom, right), (1, 1),
                        bool(c["ceilMode"]))
    c.check_out("out", _check_outputs(c, axes, "self", dtype), dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        planned = v.plan(kernel_fn, lambda: _native_max_pool_call(v, axes) or False)
        if planned:
            planned()
            return
        v.write("out", _max_values(_compute_input(v, "self", dtype), axes))
    return kernel_fn


def _native_max_pool_call(v, axes: Sequence[Axis]):
    """The C kernels' one-pass max pooling of float32 host planes (``Views.plan``: checked
    once), or None where it does not apply (other dtypes, devices, overlapping arrays):
    numpy's separable passes then, with the same values (max is exact; a NaN wins)."""
    x, out = v["self"], v["out"]
    lib = native.kernels()
    if lib is None or len(axes) != 2 or x.ndim < 3 or out.size == 0 or \
            not native.host_float32(x, out) or np.may_share_memory(x, out) or \
            any(axis.dilation != 1 for axis in axes):
        return None
    height, width = axes
    planes = math.prod(x.shape[:-2])
    return functools.partial(lib.max_pool2d, x, out, (planes, height.size, width.size),
                             (height.kernel, width.kernel), (height.stride, width.stride),
                             (height.pad_before, width.pad_before), (height.out, width.out))


def max_pool_geometry(c: Call, unit_dilation: bool = False
                      ) -> tuple[np.dtype, tuple[int, int], tuple[Axis, Axis], tuple[int, ...]]:
    """Phase 1 shared by the max pools with indices or a mask and their backward forms:
    ``self``'s dtype, the (kH, kW) kernel, the (H, W) axes and the pooled shape. The mask
    forms take dilation 1 only (``unit_dilation``), as CANN documents."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    kernel = _pair(_ints(c, "kernelSize", (1, 2), 1), (1, 1))
    stride = _pair(_ints(c, "stride", (0, 1, 2), 1, ()), kernel)
    padding = _pair(_ints(c, "padding", (1, 2), 0), (0, 0))
    _check_half_kernel_padding(c, "padding", padding, kernel)
    dilation = _pair(_ints(c, "dilation", (1, 2), 1), (1, 1))
    if unit_dilation and dilation != (1, 1):
        raise c.fail("dilation", "only 1 is supported")
    axes = _padded_axes(c, kernel, stride, (*padding, *padding), dilation, c["ceilMode"])
    return dtype, kernel, axes, _check_outputs(c, axes, "self", dtype)


@register("MaxPool2dWithIndices",
          "self: tensor, kernelSize: int_array, stride: int_array = [], "
          "padding: int_array = [0], dilation: int_array = [1], ceilMode: bool = False, "
          "out: tensor!, indices: tensor!")
def max_pool2d_with_indices(c: Call) -> Kernel:
    """``torch.nn.functional.max_pool2d(..., return_indices=True)``; indices int32 or int64."""
    dtype, _, axes, shape = max_pool_geometry(c)
    c.check_out("out", shape, dtype, exact_dtype=True)
    index_dtype = np.dtype(np.int64)
    if c["indices"] is not None:
        index_dtype = c.check_dtype("indices", INDEX_DTYPES)
    c.check_out("indices", shape, index_dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        values, indices = _max_with_indices(v.compute("self", dtype), axes)
        v.write("out", values)
        v.write("indices", indices)
    return kernel_fn


# -- MaxPool2dWithMask: CANN's int8 "mask" in place of the indices -----------------------------
MASK_DTYPE = np.dtype(np.int8)
MASK_BLOCK = 16  # outputs per 16-bit word of the mask's rows
MASK_INDEX = np.dtype("<i4")  # the int32 argmax the mask's bytes begin with


def mask_shape(lead: Sequence[int], kernel: tuple[int, int], outs: Sequence[int]
               ) -> tuple[int, ...]:
    """The mask's documented shape ``(*lead, kH * kW, (ceil(Ho * Wo / 16) + 1) * 32)``: per
    plane one row per kernel tap of 16-bit words, a bit per output and a word to spare, as
    int8 bytes."""
    words = -(-math.prod(outs) // MASK_BLOCK) + 1
    return (*lead, kernel[0] * kernel[1], words * MASK_BLOCK * 2)


def encode_mask(mask: np.ndarray, indices: np.ndarray, kernel: tuple[int, int],
                width: int) -> None:
    """Write into ``mask`` (the flat int8 bytes of a mask of ``mask_shape``, rows of
    ``width`` bytes) the mask of flat ``indices`` (``h * W + w`` per plane, shaped
    ``(*lead, Ho, Wo)``).

    A kernel of several taps: CANN's Atlas A2/A3 path (``aclnn_max_pool2d_with_indices.cpp``
    points MaxPool3DWithArgmaxV2's int32 argmax at the mask's memory, its backward reads
    that memory back as int32, and CANN's ATK harness builds the mask so): the indices as
    little-endian int32 in (N, C, Ho, Wo) order from the first byte, the rest zero (the
    mask has at least ``4 * N * C * Ho * Wo + 64`` bytes when kH * kW >= 2). A 1 x 1 kernel,
    which CANN sends to its bit-mask path instead (the indices would not fit):
    MaxPoolWithArgmaxV1's NC1HWC0 mask, 16-bit words ``(N, ceil(C / 16), taps, (ceil(Ho *
    Wo / 16) + 1) * 16)`` whose bit c0 says channel ``16 c1 + c0`` took that tap at that
    output; a window of one position always takes it, so every present channel's bit is
    set at every output."""
    if kernel[0] * kernel[1] > 1:
        used = indices.size * MASK_INDEX.itemsize
        mask[:used].view(MASK_INDEX)[...] = indices.reshape(-1)
        mask[used:] = 0
        return
    lead = indices.shape[:-SPATIAL_DIMS]
    batch, channels = (1, *lead)[-2:]
    groups = -(-channels // MASK_BLOCK)
    positions = width // 2
    bits = np.full(groups, (1 << MASK_BLOCK) - 1, np.dtype("<u2"))
    bits[-1] = (1 << (channels - (groups - 1) * MASK_BLOCK)) - 1  # the last group's channels
    words = np.zeros((groups, positions), np.dtype("<u2"))
    words[:, :math.prod(indices.shape[-SPATIAL_DIMS:])] = bits[:, None]
    size = batch * words.nbytes  # (<= the mask's bytes: C >= ceil(C / 16))
    mask[:size] = like(mask, np.tile(words.reshape(-1).view(MASK_DTYPE), batch))
    mask[size:] = 0


def _write_mask(v, name: str, indices: np.ndarray, kernel: tuple[int, int]) -> None:
    """Output ``name`` = the mask of ``indices`` (``encode_mask``), written in place when
    the output is contiguous (a mask is some 2 kH kW bytes per output: no second copy)."""
    target = v[name]
    if target.flags.c_contiguous:
        encode_mask(target.reshape(-1), indices, kernel, target.shape[-1])
        return
    flat = array_module(target).empty(target.size, MASK_DTYPE)
    encode_mask(flat, indices, kernel, target.shape[-1])
    v.write(name, flat.reshape(target.shape))


def mask_indices(mask, kernel: tuple[int, int], axes: Sequence[Axis], planes: int
                 ) -> np.ndarray:
    """The (planes, Ho * Wo) flat indices a MaxPool2dWithMask mask records (the inverse of
    ``encode_mask``); a 1 x 1 kernel's from the geometry, its only choice."""
    xp = array_module(mask)
    outputs = math.prod(a.out for a in axes)
    if kernel[0] * kernel[1] == 1:
        height, width = axes
        plane = like(mask, (height.starts[:, None] * width.size + width.starts[None, :]))
        return xp.broadcast_to(plane.reshape(1, outputs), (planes, outputs))
    flat = xp.ascontiguousarray(mask).reshape(-1)[:planes * outputs * MASK_INDEX.itemsize]
    return flat.view(MASK_INDEX).reshape(planes, outputs)


@register("MaxPool2dWithMask",
          "self: tensor, kernelSize: int_array, stride: int_array = [], "
          "padding: int_array = [0], dilation: int_array = [1], ceilMode: bool = False, "
          "out: tensor!, indices: tensor!")
def max_pool2d_with_mask(c: Call) -> Kernel:
    """MaxPool2dWithIndices (dilation 1 only) whose ``indices`` is CANN's int8 mask of
    ``mask_shape`` (the layout: ``encode_mask``), what MaxPool2dWithMaskBackward reads."""
    dtype, kernel, axes, shape = max_pool_geometry(c, unit_dilation=True)
    c.check_out("out", shape, dtype, exact_dtype=True)
    if c["indices"] is not None:
        c.check_dtype("indices", {MASK_DTYPE})
    c.check_out("indices", mask_shape(shape[:-SPATIAL_DIMS], kernel, shape[-SPATIAL_DIMS:]),
                MASK_DTYPE, exact_dtype=True)

    def kernel_fn(v) -> None:
        values, indices = _max_with_indices(v.compute("self", dtype), axes)
        v.write("out", values)
        _write_mask(v, "indices", indices, kernel)
    return kernel_fn


@register("AvgPool2d",
          "self: tensor, kernelSize: int_array, strides: int_array = [], "
          "paddings: int_array = [0], ceilMode: bool = False, countIncludePad: bool = True, "
          "divisorOverride: int = 0, cubeMathType: int = 0, out: tensor!")
def avg_pool2d(c: Call) -> Kernel:
    """``torch.nn.functional.avg_pool2d``; ``divisorOverride`` 0 means none. ``cubeMathType``
    is accepted (0-2) and changes nothing on CPU: the sum is always taken in float32."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    kernel = _pair(_ints(c, "kernelSize", (1, 2), 1), (1, 1))
    stride = _pair(_ints(c, "strides", (0, 1, 2), 1), kernel)
    padding = _pair(_ints(c, "paddings", (1, 2), 0), (0, 0))
    _check_half_kernel_padding(c, "paddings", padding, kernel)
    if c["cubeMathType"] not in CUBE_MATH_TYPES:
        raise c.fail("cubeMathType", f"expected one of {list(CUBE_MATH_TYPES)} (KEEP_DTYPE, "
                                     f"ALLOW_FP32_DOWN_PRECISION, USE_FP16)")
    axes = _padded_axes(c, kernel, stride, (*padding, *padding), (1, 1), c["ceilMode"])
    c.check_out("out", _check_outputs(c, axes, "self", dtype), dtype, exact_dtype=True)
    divisor = _avg_divisor(axes, c["countIncludePad"], c["divisorOverride"])

    def kernel_fn(v) -> None:
        x = v.compute("self", dtype)
        v.write("out", _window_sum(x, axes) / like(x, divisor))
    return kernel_fn


def _avg_divisor(axes: Sequence[Axis], count_include_pad: bool, override: int
                 ) -> np.ndarray | int:
    """The (*outs) divisor of each average, as PyTorch computes it."""
    if override:
        return override
    divisor = np.ones((), np.float32)
    for axis in axes:
        starts = axis.starts
        ends = np.minimum(starts + axis.kernel, axis.size + axis.pad_after)
        if not count_include_pad:
            starts, ends = np.maximum(starts, 0), np.minimum(ends, axis.size)
        divisor = np.multiply.outer(divisor, (ends - starts).astype(np.float32))
    return divisor


# -- adaptive pooling ----------------------------------------------------------------------------
def _bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """Start (inclusive) and end (exclusive) of each adaptive bin."""
    index = np.arange(out)
    return index * size // out, -(-(index + 1) * size // out)


def _output_size(c: Call) -> tuple[int, int]:
    out_h, out_w = _ints(c, "outputSize", (2,), 1)
    return out_h, out_w


@register("AdaptiveAvgPool2d", "self: tensor, outputSize: int_array, out: tensor!")
def adaptive_avg_pool2d(c: Call) -> Kernel:
    """``torch.nn.functional.adaptive_avg_pool2d``."""
    dtype = _pool_input(c, "self", HALF_FLOATS)
    out_size = _output_size(c)
    shape = c.tensor("self").shape
    c.check_out("out", (*shape[:-SPATIAL_DIMS], *out_size), dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        v.write("out", adaptive_average(v.compute("self", dtype), out_size))
    return kernel_fn


def adaptive_average(x: np.ndarray, out_size: Sequence[int]) -> np.ndarray:
    """Float64 averages over the adaptive bins of the last ``len(out_size)`` axes (float64:
    a float32 mean of values that cancel would miss CANN's small-value standard).

    Bins that tile every axis evenly: one reshape and one float64 mean. Otherwise, finite
    data: one BLAS product per axis with its (out, size) averaging matrix, a block
    of planes at a time. Data holding inf or NaN: each bin summed from its own members, one
    axis at a time, since a product's zero weights would make ``0 * inf`` NaN in bins that
    do not hold it (as a prefix sum's ``inf - inf`` did)."""
    xp = array_module(x)
    spatial = x.shape[x.ndim - len(out_size):]
    if all(size % out == 0 for size, out in zip(spatial, out_size, strict=True)):
        tiles = [d for size, out in zip(spatial, out_size, strict=True)
                 for d in (out, size // out)]  # equal bins: one reshape, one reduction
        grouped = x.reshape(*x.shape[:x.ndim - len(out_size)], *tiles)
        axes = tuple(range(grouped.ndim - 2 * len(out_size) + 1, grouped.ndim, 2))
        return grouped.mean(axis=axes, dtype=np.float64)
    if not bool(xp.isfinite(x).all()):
        for k, out in enumerate(out_size):
            x = _bin_means(x, x.ndim - len(out_size) + k, out)
        return x
    planes = x.reshape(-1, *spatial)
    weights = [like(x, _bin_weights(size, out)) for size, out in zip(spatial, out_size,
                                                                    strict=True)]
    result = xp.empty((planes.shape[0], *out_size), np.float64)
    step = max(1, ADAPTIVE_BLOCK_ELEMENTS // max(1, math.prod(spatial)))
    for first in range(0, planes.shape[0], step):
        block = planes[first:first + step].astype(np.float64)
        block = block @ weights[-1].T  # the last axis: (..., size) @ (size, out)
        for k in range(len(spatial) - 2, -1, -1):  # earlier axes: (out, size) @ (size, rest)
            lead, tail = block.shape[:k + 2], block.shape[k + 2:]  # (block dim first)
            product = weights[k] @ block.reshape(*lead, -1)
            block = product.reshape(*lead[:-1], out_size[k], *tail)
        result[first:first + step] = block
    return result.reshape(*x.shape[:x.ndim - len(out_size)], *out_size)


def _bin_weights(size: int, out: int) -> np.ndarray:
    """The (out, size) matrix averaging each adaptive bin of an axis."""
    starts, ends = _bins(size, out)
    positions = np.arange(size)[None, :]
    inside = (positions >= starts[:, None]) & (positions < ends[:, None])
    return inside / (ends - starts)[:, None].astype(np.float64)


def _bin_means(x: np.ndarray, axis: int, out: int) -> np.ndarray:
    """The mean of each adaptive bin of ``axis``: a reshape when the bins tile the axis
    evenly, else one gather of every bin's members (padded slots masked to zero)."""
    size, tail = x.shape[axis], x.shape[axis + 1:]
    if size % out == 0:
        return x.reshape(*x.shape[:axis], out, size // out, *tail).mean(axis=axis + 1,
                                                                        dtype=np.float64)
    xp = array_module(x)
    starts, ends = _bins(size, out)
    members = _bin_members(size, out)
    gathered = xp.take(x, like(x, members.reshape(-1)), axis=axis)
    gathered = gathered.reshape(*x.shape[:axis], *members.shape, *tail)
    trailing = (1,) * len(tail)
    counts = ends - starts
    valid = (np.arange(members.shape[1])[None, :] < counts[:, None]).reshape(
        *members.shape, *trailing)
    total = xp.where(like(x, valid), gathered, 0).sum(axis=axis + 1, dtype=np.float64)
    return total / like(x, counts.reshape(out, *trailing).astype(np.float64))


@register("AdaptiveMaxPool2d",
          "self: tensor, outputSize: int_array, outputOut: tensor!, indicesOut: tensor!")
def adaptive_max_pool2d(c: Call) -> Kernel:
    """``torch.nn.functional.adaptive_max_pool2d(..., return_indices=True)``; int64 indices."""
    dtype = _pool_input(c, "self", FLOAT_DTYPES)
    out_size = _output_size(c)
    shape = (*c.tensor("self").shape[:-SPATIAL_DIMS], *out_size)
    c.check_out("outputOut", shape, dtype, exact_dtype=True)
    c.check_out("indicesOut", shape, np.dtype(np.int64), exact_dtype=True)
    sizes = c.tensor("self").shape[-SPATIAL_DIMS:]

    def kernel_fn(v) -> None:
        values, indices = adaptive_max(v.compute("self", dtype), sizes, out_size)
        v.write("outputOut", values)
        v.write("indicesOut", indices)
    return kernel_fn


def adaptive_max(x: np.ndarray, sizes: Sequence[int], out_size: Sequence[int]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Max values and flat indices over the adaptive bins of the trailing axes: one gather
    of every bin's members (``pooling._bin_members``, whose repeats change neither the
    maximum nor its first position), then one argmax."""
    n = len(sizes)
    members = [_bin_members(size, out) for size, out in zip(sizes, out_size, strict=True)]
    index = []
    for k, member in enumerate(members):  # (out_k, width_k) at dims (2k, 2k + 1)
        shape = [1] * (2 * n)
        shape[2 * k], shape[2 * k + 1] = member.shape
        index.append(like(x, member.reshape(shape)))
    gathered = x[(Ellipsis, *index)]  # (..., o0, w0, o1, w1, o2, w2)
    lead = gathered.ndim - 2 * n
    order = [*range(lead), *(lead + 2 * k for k in range(n)), *(lead + 2 * k + 1
                                                                for k in range(n))]
    windows = gathered.transpose(order).reshape(*gathered.shape[:lead], *out_size, -1)
    arg = torch_argmax(windows)
    values = np.take_along_axis(windows, arg[..., None], axis=-1)[..., 0]
    offsets = unravel(arg, tuple(m.shape[1] for m in members))
    flat = None
    for k, (member, offset) in enumerate(zip(members, offsets, strict=True)):
        shape = [1] * n
        shape[k] = member.shape[0]
        rows = like(x, np.arange(member.shape[0]).reshape(shape))
        position = like(x, member)[rows, offset]
        flat = position if flat is None else flat * sizes[k] + position
    return values, flat


def _bin_members(size: int, out: int) -> np.ndarray:
    """``(out, widest bin)`` input positions of each bin, the last one repeated to pad (a
    repeat changes neither the maximum nor its first position)."""
    starts, ends = _bins(size, out)
    width = int((ends - starts).max())
    return np.minimum(starts[:, None] + np.arange(width)[None, :], ends[:, None] - 1)


# -- global pooling --------------------------------------------------------------------------
GLOBAL_AVG_DTYPES = HALF_FLOATS | {np.dtype(np.float64)}
GLOBAL_MAX_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
GLOBAL_RANKS = (4, 8)  # (N, C, *spatial) with 2 to 6 spatial dims


def _global_pool(c: Call, supported, reduce) -> Kernel:
    """Phase 1 of the global pools: ``out`` keeps N and C and has every spatial dim 1."""
    dtype = c.check_dtype("self", supported)
    shape = c.tensor("self").shape
    if not GLOBAL_RANKS[0] <= len(shape) <= GLOBAL_RANKS[1]:
        raise c.fail("self", f"must have {GLOBAL_RANKS[0]} to {GLOBAL_RANKS[1]} dims, got "
                             f"{len(shape)}")
    if any(d <= 0 for d in shape[2:]):
        raise c.fail("self", "its spatial dims must be positive")
    c_shape = (*shape[:2], *(1,) * (len(shape) - 2))
    c.check_out("out", c_shape, dtype, exact_dtype=True)

    def kernel_fn(v) -> None:
        x = v.compute("self", dtype)
        planes = x.reshape(*shape[:2], -1)  # one contiguous reduction per (N, C) plane
        v.write("out", reduce(planes, axis=-1).reshape(c_shape))
    return kernel_fn


@register("GlobalAveragePool", "self: tensor, out: tensor!")
def global_average_pool(c: Call) -> Kernel:
    """The mean of every (N, C) plane over all its spatial dims (ONNX GlobalAveragePool)."""
    return _global_pool(c, GLOBAL_AVG_DTYPES, np.mean)


@register("GlobalMaxPool", "self: tensor, out: tensor!")
def global_max_pool(c: Call) -> Kernel:
    """The maximum of every (N, C) plane over all its spatial dims; NaN propagates."""
    return _global_pool(c, GLOBAL_MAX_DTYPES, np.max)
