"""Convolution (aclnnConvolution): 1d/2d/3d, stride, padding, dilation, groups (depthwise
included), transposed with output padding, optional bias.

Semantics are PyTorch's ``aten::convolution``; arguments and limits are CANN's:

* ``input`` (N, C_in, *spatial) and ``weight`` have 3-5 dims, the same number; ``weight`` is
  (C_out, C_in / groups, *kernel), or (C_in, C_out / groups, *kernel) when ``transposed``.
* ``stride`` and ``dilation`` have one value > 0 per spatial dim. ``padding`` has one value
  >= 0 per spatial dim, or a (begin, end) pair per spatial dim for conv1d (2 values, not
  transposed) and conv2d (4 values: top, bottom, left, right). ``outputPadding`` (ignored
  unless ``transposed``) has one value per spatial dim, each smaller than the stride or the
  dilation of its dim; a null ``outputPadding`` means zeros. ``stride``, ``padding`` and
  ``dilation`` are required (null is ``ACLNN_ERR_PARAM_NULLPTR``); their ``= None`` in the
  signature only keeps the Python parameter order legal after the optional ``bias``.
* ``groups`` is in [1, 65535] and divides both channel counts.
* ``bias`` is optional, (C_out,).
* ``cubeMathType``: 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32, with
  the CPU meanings of ``linalg.py`` (USE_FP16 rounds float32/float64 operands to float16).

Kernels (no per-pixel Python loops):

* dense and grouped: im2col through ``sliding_window_view`` into one contiguous column
  buffer, then one batched matmul over the groups (BLAS); with one group and one image
  the product is written straight into the output.
* stride 1, one group, at least ``SHIFTED_MIN_CHANNELS`` input channels, and an im2col
  buffer of at least ``SHIFTED_MIN_COLUMN_BYTES``: no im2col. The padded input is
  flattened (``_FlatLayout``), and each kernel tap is one matmul of its (C_out, C_in)
  weight slice with a *shifted window* of that flat buffer (a strided view BLAS reads in
  place), accumulated on the padded output grid; the valid columns are copied out at the end.
  With few output channels the taps' weights are stacked into one taller matmul over the
  flat buffer and each tap's rows are added in at its offset (BLAS is slow on thin products).
* 1x1, stride 1, no padding, one group: a plain product of the weights with the input.
* depthwise (one input and one output channel per group), stride 1 and at most
  ``DEPTHWISE_FLAT_MAX_TAPS`` taps: a loop over the kernel taps, each a vectorized
  multiply-add over the flat layout's shifted windows (long contiguous rows), tile by tile
  (channels x grid columns) of about ``DEPTHWISE_TILE_ELEMENTS`` so that the accumulator
  stays in cache. Larger kernels and strides: per-tile column buffers (every tap's inputs)
  and one (1, taps) @ (taps, positions) product per channel.
* transposed: the adjoint; one batched matmul gives every tap's contribution, then col2im
  adds them in with a loop over the kernel taps only.

With the C kernels (``openacl.ops.native``; float32 host arrays) these paths change: a
dense (one group) 1-d or 2-d convolution with at least ``native.FEW_ROWS`` output channels
and ``native.FEW_COLUMNS`` output positions is the packed GEMM of its weight (a model's
packed once) with each image's im2col matrix, packed from the image block by block and
never stored, the bias added in the tiles (``_implicit_gemm``, ``conv2d_gemm``; a 1-d one
is one row, a 2-d one over a single column is laid out as a row); 2-d depthwise and
few-input-channel convolutions (``DIRECT_MAX_GROUP_CHANNELS``) sum their taps directly on
the pool (``conv2d_direct``); the stacked thin product's taps, bias and valid columns are
summed in one pass straight into the output (``shifted_sums``); and a stride-equals-kernel
transposed convolution writes each output row once (``tile_taps``). The numpy bodies above
remain the path everywhere else, and the reference the tests hold both to.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable

import numpy as np

from openacl.ops import native, promotion
from openacl.ops.call import FLOAT_DTYPES, Call, Epilogue, Kernel, array_module, as_array
from openacl.ops.linalg import CUBE_MATH_TYPES_NO_FP32_ADD, check_cube_math_type, operand_dtype
from openacl.ops.registry import register

CONV_DTYPES = FLOAT_DTYPES  # CANN: FLOAT, FLOAT16, BFLOAT16; float64 accepted on CPU
MIN_DIMS, MAX_DIMS = 3, 5  # conv1d .. conv3d: (N, C, *1-3 spatial dims)
MAX_GROUPS = 65535
# shifted windows replace im2col where its column buffer would be large (memory-bound copy)
# and the per-tap matmuls are not too thin for BLAS (measured: 96->24 3x3 at 160x160, 88 MB
# of columns, 33 -> 12 ms; 64->64 at 56x56, 7 MB, and 3->16 at 640x640 stay faster im2col)
SHIFTED_MIN_CHANNELS = 16
SHIFTED_MIN_COLUMN_BYTES = 16 << 20
# thin outputs stack every tap's weights into one matmul (measured, 3x3 96->24 at 160x160:
# 13.2 -> 8.5 ms; at 96->96 5x5 the 25x larger product costs more than it saves)
STACKED_MAX_ROWS = 288  # taps * C_out
STACKED_BLOCK_BYTES = 16 << 20  # the stacked product, per block of grid columns
STACKED_MIN_BLOCK = 1024
NATIVE_MAX_TAPS = 64  # taps per C tap-sum pass (their offsets live on the stack)
DIRECT_MAX_GROUP_CHANNELS = 4  # dense convolutions with more input channels go to BLAS
NATIVE_VECTOR_MARGIN = 16  # floats a C kernel's last partial vector may read past its data
# depthwise: stride 1 with up to 9 taps multiply-adds tap by tap over the flat layout; more
# taps, or a stride, use column buffers and a product (faster there, slower at 3x3 stride 1)
DEPTHWISE_FLAT_MAX_TAPS = 9
# im2col columns up to this many elements are gathered with indices made in phase 1: one
# take instead of a padded copy, a window view and a transposed copy (for small convolutions
# those calls cost more than the arithmetic; past this size the strided copy is faster)
GATHER_MAX_COLUMNS = 1 << 16
# columns larger than a cache holds (one image, one group, 2-d) are made a block of output
# rows at a time, IM2COL_BLOCK_BYTES per block (measured at 1-16 MB of columns: no gain, the
# products get thinner; at 162 MB, 8->8 3x39 at 172x264: one buffer 45 ms, 1 MB blocks 17)
IM2COL_BLOCK_MIN_BYTES = 32 << 20
IM2COL_BLOCK_BYTES = 1 << 20  # about a core's L2
DEPTHWISE_COLUMN_BYTES = 1 << 20  # column buffer per tile (measured: 1 MiB fits L2 here)
DEPTHWISE_TILE_ELEMENTS = 1 << 16  # output elements per multiply-add pass (depthwise);
# measured on PP-OCR's depthwise layers: 2^16 beats 2^14 (call overhead) and 2^18 (cache)


def _matmul(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``; on the host by ``native.product``/``native.matmul``
    (openacl's packed GEMM on the C kernels' pool where it takes the product)."""
    if xp is not np:
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    if out is None:
        return native.product(a, b)
    if not native.matmul(a, b, out):
        np.matmul(a, b, out=out)
    return out


def int_list(c: Call, name: str, count: int, default: int, minimum: int) -> tuple[int, ...]:
    values = c[name]
    if values is None:
        return (default,) * count
    if len(values) != count:
        raise c.fail(name, f"must have {count} values (one per spatial dim), got {len(values)}")
    for value in values:
        if value < minimum:
            raise c.fail(name, f"values must be >= {minimum}")
    return tuple(int(v) for v in values)


def padding_pairs(c: Call, spatial: int, transposed: bool) -> tuple[tuple[int, int], ...]:
    """(begin, end) padding per spatial dim from CANN's accepted lengths."""
    values = c["padding"]
    if values is None:
        return ((0, 0),) * spatial
    pairs_allowed = spatial in (1, 2) and not (transposed and spatial == 1)
    if len(values) == spatial:
        pairs = tuple((int(v), int(v)) for v in values)
    elif pairs_allowed and len(values) == 2 * spatial:
        pairs = tuple((int(values[2 * i]), int(values[2 * i + 1])) for i in range(spatial))
    else:
        lengths = f"{spatial} or {2 * spatial}" if pairs_allowed else f"{spatial}"
        raise c.fail("padding", f"must have {lengths} values for a {spatial}d convolution "
                                f"{'(transposed) ' if transposed else ''}, got {len(values)}")
    if any(v < 0 for pair in pairs for v in pair):
        raise c.fail("padding", "values must be >= 0")
    return pairs


def conv_attributes(c: Call, spatial: int, transposed: bool):
    """aclnnConvolution's ``stride``, ``dilation``, ``padding`` ((begin, end) pairs),
    ``outputPadding`` (zeros unless transposed) and ``groups``, validated."""
    stride = int_list(c, "stride", spatial, 1, 1)
    dilation = int_list(c, "dilation", spatial, 1, 1)
    pads = padding_pairs(c, spatial, transposed)
    output_padding = (int_list(c, "outputPadding", spatial, 0, 0) if transposed
                      else (0,) * spatial)
    for op, s, d in zip(output_padding, stride, dilation, strict=True):
        if op >= max(s, d):
            raise c.fail("outputPadding", "each value must be smaller than the stride or the "
                                          "dilation of its dim")
    groups = c["groups"]
    if groups is None or not 1 <= groups <= MAX_GROUPS:
        raise c.fail("groups", f"must be in [1, {MAX_GROUPS}]")
    return stride, dilation, pads, output_padding, groups


@register("Convolution", "input: tensor, weight: tensor, bias: tensor?, "
                         "stride: int_array = None, padding: int_array = None, "
                         "dilation: int_array = None, transposed: bool = False, "
                         "outputPadding: int_array?, groups: int = 1, output: tensor!, "
                         "cubeMathType: int = 0", epilogues=tuple(native.ACTIVATIONS))
def convolution(c: Call) -> Kernel:
    """N-d convolution (1d/2d/3d), optionally transposed, grouped, with bias; a model
    engine's fused activation (``Views.epilogue``) in the GEMM's and the direct sums'
    tiles, or by the activation's own step after the other paths."""
    x, w = c.tensor("input"), c.tensor("weight")
    if not MIN_DIMS <= x.ndim <= MAX_DIMS:
        raise c.fail("input", f"must have {MIN_DIMS} to {MAX_DIMS} dims (N, C, spatial...)")
    if w.ndim != x.ndim:
        raise c.fail("weight", f"must have as many dims as 'input' ({x.ndim})")
    c.check_dtype("input", CONV_DTYPES)
    c.check_dtype("weight", CONV_DTYPES)
    dtype = c.result_type("input", "weight")
    transposed = bool(c["transposed"])
    cube = check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    spatial = x.ndim - 2
    stride, dilation, pads, output_padding, groups = conv_attributes(c, spatial, transposed)

    n, c_in, in_size = x.shape[0], x.shape[1], x.shape[2:]
    kernel_size = w.shape[2:]
    if transposed:
        if w.shape[0] != c_in:
            raise c.fail("weight", f"dim 0 must equal the input channels {c_in} when "
                                   f"transposed")
        if c_in % groups:
            raise c.fail("groups", f"must divide the input channels {c_in}")
        c_out = w.shape[1] * groups
    else:
        if w.shape[0] % groups:
            raise c.fail("groups", f"must divide the output channels {w.shape[0]}")
        if w.shape[1] * groups != c_in:
            raise c.fail("weight", f"dim 1 ({w.shape[1]}) x groups ({groups}) must equal the "
                                   f"input channels {c_in}")
        c_out = w.shape[0]
    if c.has("bias"):
        bias = c.tensor("bias")
        c.check_dtype("bias", CONV_DTYPES)
        if bias.shape != (c_out,):
            raise c.fail("bias", f"must have shape [{c_out}] (the output channels)")

    extent = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel_size, strict=True))
    if transposed:
        out_size = tuple((i - 1) * s + e + op - b - a for i, s, e, op, (b, a) in zip(
            in_size, stride, extent, output_padding, pads, strict=True))
    else:
        padded = tuple(i + b + a for i, (b, a) in zip(in_size, pads, strict=True))
        if any(p < e for p, e in zip(padded, extent, strict=True)):
            raise c.fail("weight", f"the (dilated) kernel {list(extent)} is larger than the "
                                   f"padded input {list(padded)}")
        out_size = tuple((p - e) // s + 1 for p, e, s in zip(padded, extent, stride,
                                                             strict=True))
    if any(o <= 0 for o in out_size):
        raise c.fail("output", f"the computed spatial size {list(out_size)} is too small")
    c.check_out("output", (n, c_out, *out_size), dtype, exact_dtype=transposed)

    geometry = Geometry(groups, stride, dilation, pads, output_padding, tuple(kernel_size),
                         tuple(out_size), c.has("bias"))
    compute = promotion.compute_dtype(dtype)
    rounded = operand_dtype(dtype, cube)
    body, direct = choose_body((n, c_in, *in_size), tuple(w.shape), geometry, compute,
                               transposed)

    # (a 1-d depthwise one goes to the C tap sums where they are: no gather plan)
    gather = body.args[0] if isinstance(body, functools.partial) and not (
        direct and len(in_size) == 1 and native.kernels() is not None) else None
    # dense 1-d and 2-d float32 on the host: the packed GEMM over im2col packed from the
    # image (few output positions, as on a 1x1 map, are a matrix-vector product: numpy's)
    plane = _as_plane(geometry, tuple(in_size)) if (
        not transposed and groups == 1 and not direct and compute == np.float32
        and c_out >= native.FEW_ROWS and math.prod(out_size) >= native.FEW_COLUMNS) else None

    def kernel(v) -> None:
        epilogue = v.epilogue
        if plane is not None:
            planned = v.plan(("implicit", kernel), lambda: _implicit_gemm_call(
                v, plane, geometry.bias, rounded, compute, epilogue) or False)
            if planned:
                planned()
                return
            if _implicit_gemm(v, plane, geometry.bias, rounded, compute, epilogue):
                return
        if gather is not None:  # small: a replay plan made at these views' first call
            plan = v.derived.get(kernel)
            if plan is None:
                plan = v.derived[kernel] = _gather_plan(v, gather, geometry, rounded,
                                                        compute, lambda: run_views(v, None))
            plan()
            if epilogue is not None:
                epilogue.run()
            return
        run_views(v, epilogue)

    def run_views(v, epilogue: Epilogue | None) -> None:
        out = v["output"]
        if out.size == 0:
            return
        xs = cast_operand(v["input"], rounded, compute)
        # a model's weights (fp16 mode: float16) are widened once and kept
        ws = v.derive(("cast", "weight"), ("weight",),
                      lambda: cast_operand(v["weight"], rounded, compute))
        bias_values = v.derive(("cast", "bias"), ("bias",),
                               lambda: cast_operand(v["bias"], compute, compute)) \
            if geometry.bias else None
        # a float16 host output: the float32 kernels into a float32 buffer, rounded once
        # into out at the end (F16C; numpy's casts, and the bodies' own, are much slower)
        final = out
        if type(out) is np.ndarray and out.dtype == np.float16 and compute == np.float32 \
                and out.flags.c_contiguous and native.kernels() is not None:
            out = np.empty(out.shape, compute)
        done = run_body(body, direct, out, xs, ws, bias_values, geometry, compute,
                        epilogue if out is final else None)
        if out is not final and not native.narrowed_into(final, out):
            np.copyto(final, out, casting="unsafe")
        if epilogue is not None and not done:
            epilogue.run()
    return kernel


@dataclasses.dataclass(frozen=True)
class _Plane:
    """A 1-d or 2-d convolution as the 2-d one ``native.conv2d`` runs: the image's (H, W),
    the kernel, stride, (top, left) padding, dilation and output size."""

    size: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]
    dilation: tuple[int, int]
    out_size: tuple[int, int]


def _as_plane(g: Geometry, in_size: tuple[int, ...]) -> _Plane | None:
    """The 2-d view of a convolution for the implicit GEMM, rows made long: a 1-d one is one
    row (H = 1), and a 2-d one over a single column (W = KW = OW = 1, as TensorFlow's
    exports write a 1-d convolution) is that column laid out as a row (the same memory).
    None for 3-d."""
    column = len(in_size) == 2 and in_size[1] == g.kernel_size[1] == g.out_size[1] == 1 \
        and g.pads[1] == (0, 0)
    if len(in_size) == 1 or column:  # the first spatial dim as one row
        return _Plane((1, in_size[0]), (1, g.kernel_size[0]), (1, g.stride[0]),
                      (0, g.pads[0][0]), (1, g.dilation[0]), (1, g.out_size[0]))
    if len(in_size) != 2:
        return None
    return _Plane(in_size, g.kernel_size, g.stride, (g.pads[0][0], g.pads[1][0]), g.dilation,
                  g.out_size)


def _activation(epilogue: Epilogue | None) -> tuple[str | None, float]:
    """The C kernels' activation (a ``native.ACTIVATIONS`` name, or None) and parameter for
    ``epilogue``."""
    return (None, 0.0) if epilogue is None else (epilogue.name, float(epilogue.alpha))


def _implicit_gemm(v, plane: _Plane, has_bias: bool, rounded: np.dtype,
                   compute: np.dtype, epilogue: Epilogue | None = None) -> bool:
    """A dense float32 host convolution by ``native.conv2d`` (the packed GEMM over im2col
    packed from each image; a constant weight packed once, the bias and the ``epilogue``
    in the tiles); False where it cannot run (nothing written): another body then does."""
    call = _implicit_gemm_call(v, plane, has_bias, rounded, compute, epilogue, planned=False)
    if call is None:
        return False
    call()
    return True


def _implicit_gemm_call(v, plane: _Plane, has_bias: bool, rounded: np.dtype,
                        compute: np.dtype, epilogue: Epilogue | None = None,
                        planned: bool = True) -> Callable[[], None] | None:
    """``_implicit_gemm``'s C call, checked now; None where it does not apply (another
    dtype, layout or overlap). ``planned`` (``Views.plan``: the call is kept and replayed)
    needs a model's constant weight and bias, whose packed and cast forms it keeps; else a
    weight that may change is read in place (A's rows are contiguous) and the bias cast
    afresh, for this one call."""
    out, x = v["output"], v["input"]
    if out.size == 0 or not native.host_float32(out, x) or rounded != compute:
        return None
    if planned and ("weight" not in v.constant or (has_bias and "bias" not in v.constant)):
        return None
    n, c_out = out.shape[:2]

    def matrix() -> np.ndarray:
        return np.ascontiguousarray(cast_operand(v["weight"], rounded, compute)).reshape(
            c_out, -1)
    # a model's weight packed once
    weight = v.derive(("packed", "weight"), ("weight",), lambda: native.pack(
        matrix(), native.LEFT)) if "weight" in v.constant else matrix()
    bias = v.derive(("cast", "bias"), ("bias",), lambda: cast_operand(
        v["bias"], compute, compute)) if has_bias else None
    if weight is None or (has_bias and not native.host_float32(bias)):
        return None
    activation, alpha = _activation(epilogue)
    return native.conv2d_call(x.reshape(n, x.shape[1], *plane.size), weight, bias,
                              out.reshape(n, c_out, *plane.out_size), plane.kernel,
                              plane.stride, plane.pad, plane.dilation, activation=activation,
                              alpha=alpha)


def choose_body(x_shape: tuple[int, ...], w_shape: tuple[int, ...], g: Geometry,
                compute: np.dtype, transposed: bool) -> tuple[Callable, bool]:
    """The kernel body for a convolution of these shapes (see the module notes), and whether
    the C kernels' direct tap sums may replace it (``run_body``)."""
    n, c_in, *in_size = x_shape
    spatial = len(in_size)
    taps, locations = math.prod(g.kernel_size), math.prod(g.out_size)
    unit_stride = all(s == 1 for s in g.stride)
    depthwise = w_shape[1] == 1 and w_shape[0] == g.groups
    pointwise = taps == 1 and unit_stride and not any(b or a for b, a in g.pads)
    # (a pointwise one is a plain product, im2col's reshape, unless its few positions make
    # it thin: the gather plan's transposed product then, _thin_plan)
    small = (not pointwise or locations <= THIN_LOCATIONS) and \
        taps * c_in * n * locations <= GATHER_MAX_COLUMNS
    if transposed:
        body = transposed_conv
    elif small and spatial != 2:  # (2-d depthwise and few-channel ones have C kernels)
        body = functools.partial(_gathered, _gather_indices(tuple(in_size), g.pads, g))
    elif depthwise:
        flat = unit_stride and taps <= DEPTHWISE_FLAT_MAX_TAPS
        body = _depthwise_flat if flat else _depthwise_columns
    elif (g.groups == 1 and c_in >= SHIFTED_MIN_CHANNELS and unit_stride
          and c_in * taps * n * locations * compute.itemsize >= SHIFTED_MIN_COLUMN_BYTES):
        body = _shifted_windows
    elif small:
        body = functools.partial(_gathered, _gather_indices(tuple(in_size), g.pads, g))
    else:
        body = im2col
    # the C kernels' direct tap sums: depthwise, or few input channels per group (a stem
    # convolution's 3 colour planes), where im2col would copy more than it multiplies; a
    # 1-d depthwise one too, as a 2-d one over a plane of one row (``_direct_native``)
    direct = not transposed and (
        (spatial == 2 and (body in _DEPTHWISE_BODIES or (
            w_shape[1] <= DIRECT_MAX_GROUP_CHANNELS and w_shape[1] * taps <= NATIVE_MAX_TAPS)))
        or (spatial == 1 and depthwise and taps <= NATIVE_MAX_TAPS))
    return body, direct


def run_body(body: Callable, direct: bool, out, xs, ws, bias, g: Geometry,
             compute: np.dtype, epilogue: Epilogue | None = None) -> bool:
    """``out`` = the convolution by ``body`` (``choose_body``), on the arrays' own module:
    on a device one im2col matmul (grouped: depthwise too), as the host-cache tilings of
    the other bodies only add kernel launches there; the C direct tap sums where allowed,
    ``epilogue`` then applied in their rows. Whether an ``epilogue`` was given and applied."""
    transposed = body is transposed_conv
    run = body if type(out) is np.ndarray or transposed else im2col
    if type(xs) is not np.ndarray and isinstance(run, functools.partial):
        run = im2col  # the gather indices are host arrays
    if (direct and not transposed and native.host_float32(out, xs)
            and native.kernels() is not None):
        _direct_native(out, xs, ws, bias, g, compute, epilogue)
        return epilogue is not None
    run(out, xs, ws, bias, g, compute)
    return False


class Geometry:
    """The attributes a kernel needs (resolved and validated by phase 1)."""

    def __init__(self, groups, stride, dilation, pads, output_padding, kernel_size, out_size,
                 bias) -> None:
        self.groups = groups
        self.stride = stride
        self.dilation = dilation
        self.pads = pads
        self.output_padding = output_padding
        self.kernel_size = kernel_size
        self.out_size = out_size
        self.bias = bias


def cast_operand(array, rounded: np.dtype, compute: np.dtype) -> np.ndarray:
    array = as_array(array)
    if array.dtype != rounded:
        array = array.astype(rounded)
    return native.cast(array, compute)  # (F16C for float16)


def _pad(x: np.ndarray, pads, compute: np.dtype) -> np.ndarray:
    if not any(b or a for b, a in pads):
        return x
    padded = array_module(x).zeros(
        (*x.shape[:2], *(i + b + a for i, (b, a) in zip(x.shape[2:], pads, strict=True))),
        compute)
    padded[(slice(None), slice(None),
            *(slice(b, b + i) for i, (b, _) in zip(x.shape[2:], pads, strict=True)))] = x
    return padded


def _tap_slices(tap, g: Geometry) -> tuple[slice, ...]:
    """The input positions kernel tap ``tap`` reads for every output position."""
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s) for k, d, s, o in zip(
        tap, g.dilation, g.stride, g.out_size, strict=True))


def _finish(out: np.ndarray, result: np.ndarray, bias, compute) -> None:
    if bias is not None:
        result += bias.reshape((-1,) + (1,) * (result.ndim - 2))
    if result is not out:
        np.copyto(out, result, casting="unsafe")


def im2col(out, x, w, bias, g: Geometry, compute) -> None:
    """Dense or grouped convolution: columns (G, C_in/G * taps, N * L) @ one matmul."""
    n, c_in = x.shape[:2]
    c_out, spatial = w.shape[0], x.ndim - 2
    groups, taps = g.groups, math.prod(g.kernel_size)
    xp = array_module(x)
    if (groups == 1 and taps == 1 and all(s == 1 for s in g.stride)
            and not any(b or a for b, a in g.pads)):  # 1x1: the input is its own columns
        direct = out.dtype == compute and out.flags.c_contiguous
        result = out if direct else xp.empty(out.shape, compute)
        _matmul(xp, w.reshape(c_out, c_in), x.reshape(n, c_in, -1),
                  out=result.reshape(n, c_out, -1))
        _finish(out, result, bias, compute)
        return
    locations = math.prod(g.out_size)
    lib = native.kernels()
    if (groups == 1 and spatial == 2 and lib is not None and out.flags.c_contiguous
            and native.host_float32(x, out) and c_in * taps * locations * compute.itemsize
            <= IM2COL_BLOCK_MIN_BYTES):  # the C im2col: no padded copy, rows as memcpy runs
        # image by image (a batch too: one image's columns stay in cache, where the strided
        # copy of the whole batch's was 15x slower than torch at 8 x 64 ch 28x28)
        columns = np.empty((c_in * taps, locations), compute)
        weights = w.reshape(c_out, c_in * taps)
        # the bias added in the GEMM's tiles, not in another pass over the output
        row = native.bias_vector(bias, c_out) if native.suits(c_out, locations,
                                                              c_in * taps) else None
        for image in range(n):
            lib.im2col(x[image:image + 1], columns, x.shape[1:], g.kernel_size, g.stride,
                       tuple(b for b, _ in g.pads), g.dilation, g.out_size)
            target = out[image].reshape(c_out, locations)
            if row is None or not native.gemm(weights, columns, target, bias=row,
                                              bias_rows=True):
                _matmul(np, weights, columns, out=target)
                _finish(out[image:image + 1], out[image:image + 1], bias, compute)
        return
    windows = windows_of(x, g, compute)
    c_group = c_in // groups
    if (n == 1 and groups == 1 and spatial == 2 and xp is np
            and c_in * taps * locations * compute.itemsize > IM2COL_BLOCK_MIN_BYTES):
        _im2col_in_row_blocks(out, windows[0, 0], w.reshape(c_out, c_in * taps), bias, g,
                              compute)
        return
    columns = columns_of(windows, g, compute)
    weights = w.reshape(groups, c_out // groups, c_group * taps)
    if groups == 1 and n == 1 and out.dtype == compute and out.flags.c_contiguous:
        _matmul(xp, weights[0], columns[0], out=out.reshape(c_out, locations))
        _finish(out, out, bias, compute)
        return
    result = _matmul(xp, weights, columns)  # (G, C_out/G, N * L)
    result = result.reshape(c_out, n, *g.out_size).swapaxes(0, 1)
    _finish(out, result, bias, compute)


def windows_of(x, g: Geometry, compute):
    """Every output position's input window, (N, G, C/G, *out_size, *kernel): strided views
    of the zero-padded input (stride-th positions, dilation-th elements)."""
    spatial = x.ndim - 2
    padded = _pad(x, g.pads, compute)
    extent = tuple(d * (k - 1) + 1 for d, k in zip(g.dilation, g.kernel_size, strict=True))
    windows = array_module(x).lib.stride_tricks.sliding_window_view(
        padded, extent, axis=tuple(range(2, 2 + spatial)))
    windows = windows[(slice(None), slice(None),
                       *(slice(None, s * (o - 1) + 1, s) for s, o in zip(
                           g.stride, g.out_size, strict=True)),
                       *(slice(None, None, d) for d in g.dilation))]
    return windows.reshape(x.shape[0], g.groups, x.shape[1] // g.groups, *g.out_size,
                           *g.kernel_size)


def columns_of(windows, g: Geometry, compute):
    """The im2col columns of ``windows_of``' result: (G, C/G * taps, N * L), the reduce axis
    ordered (C/G, *kernel) as a weight's (C_out/G, C/G, *kernel) flattens."""
    n, groups, c_group = windows.shape[:3]
    spatial = len(g.kernel_size)
    order = (1, 2, *range(3 + spatial, 3 + 2 * spatial), 0, *range(3, 3 + spatial))
    xp = array_module(windows)
    columns = xp.empty((groups, c_group, *g.kernel_size, n, *g.out_size), compute)
    xp.copyto(columns, windows.transpose(order))
    return columns.reshape(groups, c_group * math.prod(g.kernel_size),
                           n * math.prod(g.out_size))


def _im2col_in_row_blocks(out, windows, weights, bias, g: Geometry, compute) -> None:
    """One image, one group, 2-d: the columns of a few output rows at a time
    (``IM2COL_BLOCK_BYTES`` of them), each block one product, so that the columns stay in
    cache instead of one buffer of every row's."""
    c_in, out_h, out_w = windows.shape[0], *g.out_size
    c_out, depth = weights.shape
    rows = max(1, IM2COL_BLOCK_BYTES // (depth * out_w * compute.itemsize))
    columns = np.empty((c_in, *g.kernel_size, rows, out_w), compute)
    block = np.empty((c_out, rows * out_w), compute)
    target = out[0]
    for first in range(0, out_h, rows):
        count = min(rows, out_h - first)
        part = columns[:, :, :, :count]
        np.copyto(part, windows[:, first:first + count].transpose(0, 3, 4, 1, 2))
        product = block[:, :count * out_w]
        _matmul(np, weights, part.reshape(depth, count * out_w), out=product)
        if bias is not None:
            product += bias.reshape(-1, 1)
        np.copyto(target[:, first:first + count], product.reshape(c_out, count, out_w),
                  casting="unsafe")


def _gather_indices(in_size: tuple[int, ...], pads, g: Geometry) -> np.ndarray:
    """Flat positions in the zero-padded plane that each (tap, output position) reads:
    ``(taps, L)``, taps in kernel order (``im2col``'s column order)."""
    padded = tuple(size + before + after for size, (before, after) in zip(in_size, pads,
                                                                           strict=True))
    index = np.zeros((1, 1), np.intp)
    for size, kernel, dilation, stride, out in zip(padded, g.kernel_size, g.dilation,
                                                   g.stride, g.out_size, strict=True):
        positions = (np.arange(kernel) * dilation)[:, None] + (np.arange(out) * stride)[None]
        # (taps so far, L so far) x (kernel, out) -> (taps * kernel, L * out), row-major
        index = (index[:, None, :, None] * size + positions[None, :, None, :]).reshape(
            index.shape[0] * kernel, index.shape[1] * out)
    return index


def _gather_plan(v, index: np.ndarray, g: Geometry, rounded: np.dtype, compute: np.dtype,
                 general: Callable[[], None]) -> Callable[[], None]:
    """What a small convolution's call does on these views (their arrays never change: see
    ``Views.derived``): for one image on host arrays already in the compute dtype, a
    zero-padded buffer, the columns and the product's target made once, then per call one
    copy in, one ``take`` and one (per group, batched) ``matmul`` straight into the output;
    anything else runs ``general``."""
    x, w, out = v["input"], v["weight"], v["output"]
    bias = v.get("bias")
    arrays = [a for a in (x, w, out, bias) if a is not None]
    if (x.shape[0] != 1 or out.size == 0 or rounded != compute
            or any(type(a) is not np.ndarray or a.dtype != compute for a in arrays)
            or not out.flags.c_contiguous):
        return general
    c_in, c_out = x.shape[1], w.shape[0]
    taps, locations = index.shape
    padded = np.zeros((c_in, *(size + b + a for size, (b, a) in zip(
        x.shape[2:], g.pads, strict=True))), compute)
    interior = padded[(slice(None), *(slice(b, b + size) for size, (b, _) in zip(
        x.shape[2:], g.pads, strict=True)))]
    flat = padded.reshape(c_in, -1)
    thin = _thin_plan(v, index, g, padded, interior) if compute == np.float32 else None
    if thin is not None:
        return thin
    columns = np.empty((c_in, taps, locations), compute)
    groups = g.groups  # grouped and depthwise: one batched product over the groups
    weights = w.reshape(groups, c_out // groups, c_in // groups * taps)
    product, source = out.reshape(groups, c_out // groups, locations), x[0]
    rows = columns.reshape(groups, c_in // groups * taps, locations)
    shift = None if bias is None else bias.reshape(groups, c_out // groups, 1)

    def replay() -> None:
        np.copyto(interior, source)
        np.take(flat, index, axis=1, out=columns)
        _matmul(np, weights, rows, out=product)
        if shift is not None:
            np.add(product, shift, out=product)
    return replay


# Output positions up to this many make a convolution "thin": its product is computed
# transposed, (positions x C*taps) @ (C*taps x C_out) against the weight packed once, so the
# many output channels are the GEMM's columns and the few positions its rows (measured,
# silero's 129 -> 128 channels, 3 taps, 4 positions: the whole call 27 -> 12 us; numpy's
# 128 x 387 @ 387 x 4 alone takes 16).
THIN_LOCATIONS = 8


def _thin_plan(v, index: np.ndarray, g: Geometry, padded: np.ndarray,
               interior: np.ndarray) -> Callable[[], None] | None:
    """``_gather_plan``'s product for a thin float32 convolution of one group with a
    constant weight, as ``THIN_LOCATIONS`` says: per call one copy in, one ``take`` of the
    rows (position-major, taps then channels) and one packed GEMM with the bias fused, then
    one transposing copy (none for a single position); None where it does not apply."""
    x, w, out, bias = v["input"], v["weight"], v["output"], v.get("bias")
    taps, locations = index.shape
    c_in, c_out = x.shape[1], w.shape[0]
    if g.groups != 1 or locations > THIN_LOCATIONS or c_out < native.FEW_COLUMNS or \
            "weight" not in v.constant or (bias is not None and not native.host_float32(bias)):
        return None

    def reordered() -> native.PackedMatrix | bool:  # (taps, C_in) x C_out, packed once
        matrix = np.ascontiguousarray(
            w.reshape(c_out, c_in, taps).transpose(2, 1, 0).reshape(taps * c_in, c_out))
        return native.pack(matrix, native.RIGHT) or False

    weight = v.derive(("thin", "weight"), ("weight",), reordered)
    if not weight:
        return None
    rows = np.empty((locations, taps, c_in), np.float32)
    across = padded.reshape(c_in, -1).T  # (padded positions, C_in): a view
    positions = np.ascontiguousarray(index.T)  # (L, taps)
    if locations == 1:  # (1, C_out) is the output's own layout
        result, spread = out.reshape(1, c_out), None
    else:
        result = np.empty((locations, c_out), np.float32)
        spread = out.reshape(c_out, locations)
    product = native.gemm_call(rows.reshape(locations, taps * c_in), weight, result,
                               bias=bias)
    if product is None:
        return None
    source = x[0]

    def replay() -> None:
        np.copyto(interior, source)
        np.take(across, positions, axis=0, out=rows, mode="clip")  # (in the plane)
        product()
        if spread is not None:
            np.copyto(spread, result.T)
    return replay


def _gathered(index: np.ndarray, out, x, w, bias, g: Geometry, compute) -> None:
    """``im2col`` for small convolutions: the columns are one gather of the padded input
    by the indices phase 1 made (``_gather_indices``)."""
    n, c_in = x.shape[:2]
    c_out, groups = w.shape[0], g.groups
    padded = _pad(x, g.pads, compute)
    columns = padded.reshape(n, c_in, -1)[:, :, index]  # (N, C, taps, L)
    taps, locations = index.shape
    if n > 1:
        columns = columns.transpose(1, 2, 0, 3)  # (C, taps, N, L)
    columns = columns.reshape(groups, c_in // groups * taps, n * locations)
    weights = w.reshape(groups, c_out // groups, c_in // groups * taps)
    if groups == 1 and n == 1 and out.dtype == compute and out.flags.c_contiguous:
        _matmul(np, weights[0], columns[0], out=out.reshape(c_out, locations))
        _finish(out, out, bias, compute)
        return
    result = _matmul(np, weights, columns).reshape(c_out, n, *g.out_size).swapaxes(0, 1)
    _finish(out, result, bias, compute)


class _FlatLayout:
    """Stride 1: the zero-padded input flattened to one row per (image, channel), so that
    kernel tap t reads the window ``flat[:, offsets[t]:offsets[t] + grid_length]`` for every
    output position at once, on a grid of whole padded rows (``valid`` drops the extra
    columns)."""

    def __init__(self, spatial: tuple[int, ...], g: Geometry, rows: int, compute) -> None:
        self.padded = tuple(size + before + after for size, (before, after) in zip(
            spatial, g.pads, strict=True))
        plane = math.prod(self.padded)
        self.grid_length = g.out_size[0] * math.prod(self.padded[1:])
        dim_strides = [math.prod(self.padded[i + 1:]) for i in range(len(self.padded))]
        self.taps = list(itertools.product(*(range(k) for k in g.kernel_size)))
        self.offsets = [sum(t * d * stride for t, d, stride in zip(
            tap, g.dilation, dim_strides, strict=True)) for tap in self.taps]
        # the last tap's window runs past the plane by less than a row: zeros there
        self.flat = np.zeros((rows, plane + max(0, self.offsets[-1] + self.grid_length
                                                - plane)), compute)
        self.image = self.flat[:, :plane].reshape(rows, *self.padded)
        self.interior = (slice(None), *(slice(before, before + size) for size, (before, _) in
                                        zip(spatial, g.pads, strict=True)))
        self.out_size = g.out_size

    def window(self, tap: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        base = self.offsets[tap]
        return self.flat[:, base + start:base + (self.grid_length if stop is None else stop)]

    def valid(self, grid: np.ndarray, leading: tuple[int, ...]) -> np.ndarray:
        """The output positions of a (rows, grid_length) result, as (*leading, *out_size)."""
        shaped = grid.reshape(*leading, self.out_size[0], *self.padded[1:])
        return shaped[(*(slice(None),) * (len(leading) + 1),
                       *(slice(0, size) for size in self.out_size[1:]))]


def _shifted_windows(out, x, w, bias, g: Geometry, compute) -> None:
    """Stride-1 dense convolution as matmuls over shifted views of the flattened padded
    input (see the module notes); image by image."""
    n, c_in = x.shape[:2]
    c_out = w.shape[0]
    layout = _FlatLayout(x.shape[2:], g, c_in, compute)
    taps = len(layout.taps)
    weights = np.ascontiguousarray(w.reshape(c_out, c_in, taps).transpose(2, 0, 1))
    grid = np.empty((c_out, layout.grid_length), compute)
    accumulate = _stacked_taps if taps * c_out <= STACKED_MAX_ROWS else _tap_by_tap
    lib = native.kernels()
    straight = (lib is not None and accumulate is _stacked_taps and x.ndim == 4
                and compute == np.float32 and taps <= NATIVE_MAX_TAPS
                and native.host_float32(out))
    bias_values = None if bias is None or not straight else np.ascontiguousarray(bias,
                                                                                np.float32)
    for index in range(n):
        layout.image[layout.interior] = x[index]
        if straight:  # the tap sums, bias and valid columns in one pass, into the output
            _stacked_taps_into(lib, out[index], weights, layout, bias_values)
            continue
        accumulate(grid, weights, layout, compute)
        result = layout.valid(grid, (c_out,))
        if bias is not None:
            result += bias.reshape((-1,) + (1,) * (result.ndim - 1))
        np.copyto(out[index], result, casting="unsafe")


def _tap_by_tap(grid, weights, layout: _FlatLayout, compute) -> None:
    """``grid`` = the sum over taps of one (C_out, C_in) matmul each with its window."""
    partial = np.empty(grid.shape, compute) if len(weights) > 1 else None
    _matmul(np, weights[0], layout.window(0), out=grid)
    for tap in range(1, len(weights)):
        _matmul(np, weights[tap], layout.window(tap), out=partial)
        grid += partial


def _stacked_taps(grid, weights, layout: _FlatLayout, compute) -> None:
    """Thin outputs: one (taps * C_out, C_in) matmul of every tap's weights with the flat
    input, then each tap's rows added in at its offset; block by block of grid columns so
    that the stacked product stays within ``STACKED_BLOCK_BYTES``."""
    taps, c_out, c_in = weights.shape
    stacked = weights.reshape(taps * c_out, c_in)
    reach = layout.offsets[-1]  # how far past its block the last tap reads
    length = layout.grid_length
    block = min(length, max(STACKED_MIN_BLOCK,
                            STACKED_BLOCK_BYTES // (taps * c_out * grid.itemsize)))
    product = np.empty((taps, c_out, block + reach), compute)
    rows = product.reshape(taps * c_out, block + reach)
    for start in range(0, length, block):
        width = min(block, length - start)
        _matmul(np, stacked, layout.flat[:, start:start + width + reach],
                  out=rows[:, :width + reach])
        acc = grid[:, start:start + width]
        for tap, offset in enumerate(layout.offsets):
            contribution = product[tap, :, offset:offset + width]
            if tap == 0:
                np.copyto(acc, contribution)
            else:
                acc += contribution


def _stacked_taps_into(lib, out: np.ndarray, weights, layout: _FlatLayout, bias) -> None:
    """``_stacked_taps`` for a 2-d float32 image written straight into ``out`` (C_out, OH,
    OW) by the C kernels: blocks of whole output rows, each one product of the stacked
    weights with the rows' flat window, then ``shifted_sums`` adds every tap's rows at its
    offset, with the bias, into the output rows (the padded columns never leave the
    product)."""
    taps, c_out, c_in = weights.shape
    stacked = weights.reshape(taps * c_out, c_in)
    out_h, out_w = layout.out_size
    pitch, reach = layout.padded[1], layout.offsets[-1]
    block_rows = max(1, min(out_h, STACKED_BLOCK_BYTES // (taps * c_out * 4) // pitch))
    slab = block_rows * pitch + reach  # product columns per tap and channel
    # shifted_sums' last partial vector reads up to NATIVE_VECTOR_MARGIN values further
    product = np.empty(taps * c_out * slab + NATIVE_VECTOR_MARGIN, np.float32)
    rows = product[:taps * c_out * slab].reshape(taps * c_out, slab)
    offsets = [tap * c_out * slab + offset for tap, offset in enumerate(layout.offsets)]
    for first in range(0, out_h, block_rows):
        count = min(block_rows, out_h - first)
        span = count * pitch + reach
        _matmul(np, stacked, layout.flat[:, first * pitch:first * pitch + span],
                  out=rows[:, :span])
        lib.shifted_sums(product, out, bias, offsets, (c_out, slab), (count, pitch),
                         (out_w, out_h * out_w, first))


def _depthwise_flat(out, x, w, bias, g: Geometry, compute) -> None:
    """Stride-1 depthwise: a multiply-add per tap over the flat layout's windows (long
    contiguous rows), tile by tile (channel rows x grid columns) to stay in cache."""
    n, channels = x.shape[:2]
    rows = n * channels
    layout = _FlatLayout(x.shape[2:], g, rows, compute)
    layout.image.reshape(n, channels, *layout.padded)[(slice(None), *layout.interior)] = x
    weights = np.tile(w.reshape(channels, -1), (n, 1))  # (N * C, taps)
    grid_length = layout.grid_length
    result = np.empty((rows, grid_length), compute)
    if grid_length >= DEPTHWISE_TILE_ELEMENTS:
        row_block, column_block = 1, DEPTHWISE_TILE_ELEMENTS
    else:
        row_block, column_block = DEPTHWISE_TILE_ELEMENTS // grid_length, grid_length
    scratch = np.empty((min(row_block, rows), column_block), compute)
    for first in range(0, rows, row_block):
        block = slice(first, first + row_block)
        for start in range(0, grid_length, column_block):
            stop = min(start + column_block, grid_length)
            acc = result[block, start:stop]
            tmp = scratch[:acc.shape[0], :stop - start]
            for tap in range(len(layout.taps)):
                source = layout.window(tap, start, stop)[block]
                factor = weights[block, tap:tap + 1]
                if tap == 0:
                    np.multiply(source, factor, out=acc)
                else:
                    np.multiply(source, factor, out=tmp)
                    acc += tmp
    _finish(out, layout.valid(result, (n, channels)), bias, compute)


def _depthwise_columns(out, x, w, bias, g: Geometry, compute) -> None:
    """One input and one output channel per group, any stride: each kernel tap's inputs
    copied into a column buffer, then one (1, taps) @ (taps, positions) product per channel
    (a batched BLAS call per block). A copy and a shared product cost less than a
    multiply-add per tap (measured, 5x5 192 ch 40x40: 5.7 -> 4.0 ms; 3x3 stride 2 32 ch
    320x320: 7.3 -> 6.5 ms). Tile by tile (channels x output rows) of about
    ``DEPTHWISE_COLUMN_BYTES`` of columns, so that they stay in cache."""
    n, channels = x.shape[:2]
    padded = _pad(x, g.pads, compute)
    taps = list(itertools.product(*(range(k) for k in g.kernel_size)))
    weights = w.reshape(channels, 1, len(taps))
    rows, row_elements = g.out_size[0], math.prod(g.out_size[1:])
    channel_bytes = len(taps) * rows * row_elements * compute.itemsize
    if channel_bytes <= DEPTHWISE_COLUMN_BYTES:
        channel_block, row_block = min(channels, DEPTHWISE_COLUMN_BYTES // channel_bytes), rows
    else:
        channel_block = 1
        row_block = max(1, DEPTHWISE_COLUMN_BYTES // (channel_bytes // rows))
    result = out if out.dtype == compute and out.flags.c_contiguous else np.empty(out.shape,
                                                                                   compute)
    columns = np.empty((channel_block, len(taps), row_block, *g.out_size[1:]), compute)
    product = np.empty((channel_block, 1, row_block * row_elements), compute)
    tap_slices = [_tap_slices(tap, g) for tap in taps]
    step, dilation = g.stride[0], g.dilation[0]
    for image, start, first in itertools.product(range(n), range(0, channels, channel_block),
                                                 range(0, rows, row_block)):
        block = slice(start, min(start + channel_block, channels))
        last = min(first + row_block, rows)
        count, positions = block.stop - start, (last - first) * row_elements
        tile = columns[:count, :, :last - first]
        for index, (tap, slices) in enumerate(zip(taps, tap_slices, strict=True)):
            origin = tap[0] * dilation
            row_slice = slice(origin + step * first, origin + step * (last - 1) + 1, step)
            np.copyto(tile[:, index], padded[(image, block, row_slice, *slices[1:])])
        tile = tile.reshape(count, len(taps), positions)  # a partial row tile: a compact copy
        target = result[image, block, first:last]
        if row_block == rows:  # whole planes: straight into the (contiguous) result
            _matmul(np, weights[block], tile, out=target.reshape(count, 1, positions))
        else:
            partial = product[:count, :, :positions]
            _matmul(np, weights[block], tile, out=partial)
            np.copyto(target, partial.reshape(target.shape))
    _finish(out, result, bias, compute)


_DEPTHWISE_BODIES = (_depthwise_flat, _depthwise_columns)


def _direct_native(out, x, w, bias, g: Geometry, compute,
                   epilogue: Epilogue | None = None) -> None:
    """2-d float32 grouped convolution by the C kernels' direct tap sums (any stride,
    padding and dilation; the bias and the ``epilogue`` in the same pass): depthwise, or
    few channels."""
    if x.ndim == 3:  # a 1-d convolution as a 2-d one over a plane of one row
        x, w, out = x[:, :, None, :], w[:, :, None, :], out[:, :, None, :]
        g = Geometry(g.groups, (1, *g.stride), (1, *g.dilation), ((0, 0), *g.pads),
                     (0, *g.output_padding) if g.output_padding else g.output_padding,
                     (1, *g.kernel_size), (1, *g.out_size), g.bias)
    n, channels, height, width = x.shape
    activation, alpha = _activation(epilogue)
    apart = not np.may_share_memory(out, x)  # the kernel reads x while it writes out
    result = out if apart else np.empty(out.shape, np.float32)
    weights = np.ascontiguousarray(w, np.float32)
    bias_values = None if bias is None else np.ascontiguousarray(bias, np.float32)
    native.kernels().conv2d_direct(
        x, weights, bias_values, result, (n, channels, height, width), (w.shape[0], g.groups),
        g.kernel_size, g.stride, (g.pads[0][0], g.pads[1][0]), g.dilation, g.out_size,
        native.activation_code(activation), alpha)
    if result is not out:
        np.copyto(out, result)


def transposed_conv(out, x, w, bias, g: Geometry, compute) -> None:
    """Transposed convolution as the adjoint of the dense one: every tap's contribution from
    one batched matmul, then col2im with a loop over the kernel taps."""
    n, c_in, *in_size = x.shape
    groups = g.groups
    c_group = c_in // groups
    o_group = w.shape[1]
    taps = math.prod(g.kernel_size)
    locations = math.prod(in_size)
    # weight (C_in, C_out/G, *k) -> (G, C_out/G * taps, C_in/G)
    weights = w.reshape(groups, c_group, o_group * taps).transpose(0, 2, 1)
    inputs = x.reshape(n, groups, c_group, locations).transpose(1, 2, 0, 3).reshape(
        groups, c_group, n * locations)
    xp = array_module(x)
    contributions = _matmul(xp, weights, inputs).reshape(
        groups, o_group, taps, n, *in_size)
    if not any(g.output_padding) and all(s == k and d == 1 for s, k, d in zip(
            g.stride, g.kernel_size, g.dilation, strict=True)):
        _tiled_taps(out, contributions, bias, g, in_size, compute)
        return
    full_size = tuple((i - 1) * s + d * (k - 1) + 1 + op for i, s, d, k, op in zip(
        in_size, g.stride, g.dilation, g.kernel_size, g.output_padding, strict=True))
    full = xp.zeros((n, groups, o_group, *full_size), compute)
    # contribution of tap t lands at input position * stride + tap * dilation
    moved = np.moveaxis(contributions, 3, 0)  # (N, G, C_out/G, taps, *in)
    for index, tap in enumerate(itertools.product(*(range(k) for k in g.kernel_size))):
        target = tuple(slice(k * d, k * d + s * (i - 1) + 1, s) for k, d, s, i in zip(
            tap, g.dilation, g.stride, in_size, strict=True))
        full[(slice(None), slice(None), slice(None), *target)] += moved[:, :, :, index]
    full = full.reshape(n, groups * o_group, *full_size)
    _finish(out, _cropped(full, g), bias, compute)


def _tiled_taps(out, contributions, bias, g: Geometry, in_size, compute) -> None:
    """Stride equal to the kernel (dilation 1, no output padding: upsampling): the taps tile
    the output without overlapping, so each tap's contribution is written (with the bias
    added on the way) into its own strided slice, with no zeroed buffer and no adds
    (measured, 24 ch 2x2 stride 2 160 -> 320: 5.4 -> 2.6 ms)."""
    groups, o_group, _, n = contributions.shape[:4]
    xp = array_module(out)
    tiled = tuple(i * k for i, k in zip(in_size, g.kernel_size, strict=True))
    direct = out.dtype == compute and tiled == g.out_size
    lib = native.kernels()
    if (direct and lib is not None and len(in_size) == 2 and compute == np.float32
            and native.host_float32(out, contributions)):  # each output row written once
        lib.tile_taps(contributions, None if bias is None else np.ascontiguousarray(
            bias, np.float32), out, (groups * o_group, *g.kernel_size), (n, *in_size))
        return
    full = out if direct else xp.empty((n, groups * o_group, *tiled), compute)
    by_channel = None if bias is None else bias.reshape(-1, *(1,) * len(in_size))
    for index, tap in enumerate(itertools.product(*(range(k) for k in g.kernel_size))):
        target = full[(slice(None), slice(None),
                       *(slice(t, None, k) for t, k in zip(tap, g.kernel_size, strict=True)))]
        source = xp.moveaxis(contributions[:, :, index], 2, 0).reshape(target.shape)
        if by_channel is None:
            xp.copyto(target, source, casting="unsafe")
        else:
            xp.add(source, by_channel, out=target, casting="unsafe")
    if not direct:
        _finish(out, _cropped(full, g), None, compute)


def _cropped(full, g: Geometry):
    """A transposed convolution's full result without its padding: the output window."""
    return full[(slice(None), slice(None), *(slice(b, b + o) for (b, _), o in zip(
        g.pads, g.out_size, strict=True)))]
