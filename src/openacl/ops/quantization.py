"""Quantization operators: aclnnQuantize, AscendQuant, AscendQuantV3, AscendAntiQuant,
DynamicQuant, GroupQuant, DequantBias, FlatQuant and FakeQuantPerTensorAffineCachemask /
FakeQuantPerChannelAffineCachemask (quantization-aware training's fake quantizers) with
CANN's argument lists.

``Quantize(x, scales, zeroPoints, dtype, axis, out)``: ``out = round(x / scales +
zeroPoints)`` saturated into ``dtype`` (CANN's formula and golden: the quotient and the sum
in float32, rounded half to even, clipped to the integer range; NaN becomes 0 in INT32).
``scales`` and ``zeroPoints`` are 1-d, of size 1 (per tensor) or of the size of ``x``'s dim
``axis`` (per channel, broadcast over the other dims); a scale of 0 acts as 1 (CANN's
rule: no inf or NaN). Dtypes as CANN documents them: ``x`` FLOAT32, FLOAT16, BFLOAT16;
``scales`` the same (any combination, except that a BFLOAT16 ``scales`` or ``zeroPoints``
needs all three BFLOAT16); ``zeroPoints`` INT32, INT8, UINT8, FLOAT32, BFLOAT16 or null;
``dtype`` INT8, UINT8 or INT32 (the float8 and hifloat8 outputs are storage formats no
kernel here computes in, so they are refused).

The ONNX converter calls it with ``zeroPoints`` null and an INT32 output, and adds ONNX's
zero point after the rounding (``QuantizeLinear`` rounds ``x / scale`` alone): the two
orders differ where the quotient is exactly halfway and the zero point odd.
"""

from __future__ import annotations

import numpy as np

from openacl import dtypes
from openacl.dtypes import DataType
from openacl.errors import AclError
from openacl.ops.call import Call, Kernel, TensorArg, array_module, as_array
from openacl.ops.promotion import BFLOAT16
from openacl.ops.registry import register

FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)
INT8 = np.dtype(np.int8)
INT32 = np.dtype(np.int32)
QUANTIZE_X_DTYPES = frozenset({FLOAT32, np.dtype(np.float16), BFLOAT16})
QUANTIZE_ZERO_POINT_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int8),
                                        np.dtype(np.uint8), FLOAT32, BFLOAT16})
QUANTIZE_OUT_DTYPES = frozenset({np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)})
MAX_QUANTIZE_DIMS = 8

# int4 packed into an INT32 carrier: eight 4-bit values per element, the first lowest
INT4_PER_INT32 = 8
INT4_BITS = 4
INT4_MIN, INT4_MAX = -8, 7
INT4_MASK = 0xF
INT4_SIGN = 0x8
ROUND_MODES = {"round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
ASCEND_QUANT_X_DTYPES = QUANTIZE_X_DTYPES
# dstType -> the output dtype and the range its values saturate to
QUANT_TARGETS = {int(DataType.ACL_INT8): (INT8, -128, 127),
                 int(DataType.ACL_INT32): (INT32, INT4_MIN, INT4_MAX)}
ANTI_QUANT_X_DTYPES = frozenset({INT8, INT32})
ANTI_QUANT_SCALE_DTYPES = frozenset({FLOAT32, BFLOAT16})
ANTI_QUANT_TARGETS = {int(DataType.ACL_FLOAT16): FLOAT16, int(DataType.ACL_BF16): BFLOAT16}
DYNAMIC_QUANT_X_DTYPES = frozenset({FLOAT16, BFLOAT16})
DYNAMIC_QUANT_MAX = {INT8: 127.0, INT32: float(INT4_MAX)}  # dtypeMax of the formula
MIN_DYNAMIC_QUANT_DIMS = 2
FAKE_QUANT_DTYPES = frozenset({FLOAT16, FLOAT32})
GROUP_INDEX_DTYPES = frozenset({INT32, np.dtype(np.int64)})
DEQUANT_SCALE_DTYPES = frozenset({FLOAT32, BFLOAT16})
DEQUANT_BIAS_DTYPES = frozenset({FLOAT32, BFLOAT16, FLOAT16, INT32})
FLAT_QUANT_DIMS = 3  # x (M, N1, N2)


@register("Quantize", "x: tensor, scales: tensor, zeroPoints: tensor?, dtype: dtype, "
                      "axis: int, out: tensor!")
def quantize(c: Call) -> Kernel:
    """``round(x / scales + zeroPoints)`` saturated into ``dtype`` (INT8, UINT8, INT32), per
    tensor or per channel along ``axis``."""
    x = c.tensor("x")
    c.check_dtype("x", QUANTIZE_X_DTYPES)
    if not 1 <= x.ndim <= MAX_QUANTIZE_DIMS:
        raise c.fail("x", f"must have 1 to {MAX_QUANTIZE_DIMS} dims")
    scales = c.tensor("scales")
    c.check_dtype("scales", QUANTIZE_X_DTYPES)
    given = [t for t in (x, scales, c["zeroPoints"]) if t is not None]
    if any(t.dtype == BFLOAT16 for t in given[1:]) and any(t.dtype != BFLOAT16 for t in given):
        raise c.fail("scales", "x, scales and zeroPoints must all be BFLOAT16 when scales or "
                               "zeroPoints is (CANN's rule; other float combinations are free)")
    axis = c.normalize_dim("axis", c["axis"], x.ndim)
    if scales.ndim != 1 or scales.shape[0] not in (1, x.shape[axis]):
        raise c.fail("scales", f"must be 1-d of size 1 or {x.shape[axis]} (x's dim {axis})")
    if c.has("zeroPoints"):
        points = c.tensor("zeroPoints")
        c.check_dtype("zeroPoints", QUANTIZE_ZERO_POINT_DTYPES)
        if points.shape != scales.shape:
            raise c.fail("zeroPoints", f"shape must equal scales' {list(scales.shape)}")
    try:
        target = dtypes.to_numpy_dtype(c["dtype"])
    except AclError as exc:
        raise c.fail("dtype", exc.message) from None
    c.check_dtype("dtype", QUANTIZE_OUT_DTYPES, target)
    c.check_out("out", x.shape, target, exact_dtype=True)
    per_channel = scales.shape[0] != 1
    shape = [1] * x.ndim
    shape[axis] = scales.shape[0]
    info = np.iinfo(target)

    def kernel(v) -> None:
        def broadcast(name: str):
            value = as_array(v[name]).astype(FLOAT32)
            return value.reshape(shape) if per_channel else value.reshape(())

        with np.errstate(all="ignore"):
            divisor = broadcast("scales")
            divisor = np.where(divisor == 0, FLOAT32.type(1), divisor)  # CANN: 0 acts as 1
            quotient = as_array(v["x"]).astype(FLOAT32) / divisor
            if v.get("zeroPoints") is not None:
                quotient = quotient + broadcast("zeroPoints")
            rounded = np.rint(quotient).astype(np.float64)  # int32's bounds are exact here
            if target == np.int32:
                rounded = np.nan_to_num(rounded, nan=0.0)
            np.copyto(v["out"], np.clip(rounded, info.min, info.max).astype(target))
    return kernel


# -- int4 in INT32 carriers ---------------------------------------------------------------------
def pack_int4(values: np.ndarray) -> np.ndarray:
    """int4 values (-8..7, any integer dtype) -> INT32, eight along the last dim per element
    (the first in the lowest bits): CANN's host layout of an int4 tensor. Byte by byte (two
    values a byte, little-endian words), without wide intermediates."""
    xp = array_module(values)
    pairs = values.astype(np.int8).reshape(*values.shape[:-1], values.shape[-1] // 2, 2)
    low = pairs[..., 0].view(np.uint8) & INT4_MASK
    high = pairs[..., 1].view(np.uint8) << INT4_BITS
    packed = xp.ascontiguousarray(low | high)
    return packed.view("<i4").astype(np.int32, copy=False)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """INT32 carriers -> their eight int4 values each, as int8 (the last dim grows 8x)."""
    xp = array_module(packed)
    data = xp.ascontiguousarray(packed, dtype="<i4")
    if not data.ndim:
        data = data.reshape(1)
    octets = data.view(np.uint8)
    values = xp.empty((*octets.shape, 2), np.uint8)
    values[..., 0] = octets & INT4_MASK
    values[..., 1] = octets >> INT4_BITS
    signed = (values ^ INT4_SIGN).view(np.int8) - np.int8(INT4_SIGN)
    return signed.reshape(*data.shape[:-1], data.shape[-1] * INT4_PER_INT32)


def _saturate(values: np.ndarray, low: int, high: int, dtype: np.dtype) -> np.ndarray:
    """Rounded float32 values clipped into [low, high] (NaN -> 0) as ``dtype``; int4
    targets come back packed into INT32. ``values`` is overwritten."""
    clipped = np.clip(np.nan_to_num(values, copy=False, nan=0.0), low, high, out=values)
    if dtype == INT32:
        return pack_int4(clipped.astype(np.int8))
    return clipped.astype(dtype)


def _packed_shape(c: Call, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its last dim divided by eight (int4 packed into INT32)."""
    if not shape or shape[-1] % INT4_PER_INT32:
        raise c.fail(name, f"the last dim must be a multiple of {INT4_PER_INT32} for an INT32 "
                           f"(packed int4) result")
    return (*shape[:-1], shape[-1] // INT4_PER_INT32)


# -- AscendQuant, AscendQuantV3 --------------------------------------------------------------
def _factor_shape(c: Call, name: str, x: TensorArg, axis: int) -> tuple[int, ...]:
    """``scale`` / ``offset``: 1-d of size 1 or x's dim ``axis``, or of x's rank with that
    dim equal to x's (or 1) and every other dim 1. Returns the shape it broadcasts as."""
    tensor = c.tensor(name)
    size = x.shape[axis]
    broadcast = [1] * x.ndim
    if tensor.ndim == 1 and tensor.shape[0] in (1, size):
        broadcast[axis] = tensor.shape[0]
        return tuple(broadcast)
    if tensor.ndim == x.ndim and tensor.shape[axis] in (1, size) and all(
            d == 1 for i, d in enumerate(tensor.shape) if i != axis):
        return tensor.shape
    raise c.fail(name, f"must be 1-d of size 1 or {size}, or {x.ndim}-d with dim {axis} of "
                       f"size 1 or {size} and every other dim 1 (x {list(x.shape)})")


def _check_like_scale(c: Call, name: str, scale: TensorArg) -> None:
    """Optional ``name`` (an offset) must have ``scale``'s dtype and shape."""
    if c.has(name):
        tensor = c.tensor(name)
        if tensor.dtype != scale.dtype or tensor.shape != scale.shape:
            raise c.fail(name, f"dtype and shape must equal scale's ({scale.dtype}, "
                               f"{list(scale.shape)})")


def _quant_target(c: Call, name: str) -> tuple[np.dtype, int, int]:
    value = c[name]
    target = QUANT_TARGETS.get(value)
    if target is None:
        raise c.fail(name, "expected 2 (INT8) or 3 (INT32: int4 packed eight to an element); "
                           "INT4 (29) and the float8 types have no host dtype here")
    return target


def _ascend_quant(c: Call, axis_name: str | None) -> Kernel:
    x = c.tensor("x")
    c.check_dtype("x", ASCEND_QUANT_X_DTYPES)
    if not 1 <= x.ndim <= MAX_QUANTIZE_DIMS:
        raise c.fail("x", f"must have 1 to {MAX_QUANTIZE_DIMS} dims")
    if axis_name is None:
        axis = x.ndim - 1
    else:
        axis = c.normalize_dim(axis_name, c[axis_name], x.ndim)
        if axis < x.ndim - 2:
            raise c.fail(axis_name, "must name one of x's last two dims")
    scale = c.tensor("scale")
    c.check_dtype("scale", ASCEND_QUANT_X_DTYPES)
    if scale.dtype != x.dtype and (axis_name is not None or x.dtype != FLOAT32):
        raise c.fail("scale", f"dtype must equal x's ({x.dtype})")
    shape = _factor_shape(c, "scale", x, axis)
    _check_like_scale(c, "offset", scale)
    round_mode = ROUND_MODES.get(c["roundMode"])
    if round_mode is None:
        raise c.fail("roundMode", f"expected one of {', '.join(ROUND_MODES)}")
    dtype, low, high = _quant_target(c, "dstType")
    out_shape = _packed_shape(c, "x", x.shape) if dtype == INT32 else x.shape
    c.check_out("y", out_shape, dtype, exact_dtype=True)
    sqrt_mode = bool(c["sqrtMode"])

    def kernel(v) -> None:
        factor = as_array(v["scale"]).astype(FLOAT32).reshape(shape)
        with np.errstate(all="ignore"):  # one float32 buffer, updated in place
            value = np.multiply(as_array(v["x"]), factor, dtype=FLOAT32)
            if sqrt_mode:
                value *= factor
            if v.get("offset") is not None:
                value += as_array(v["offset"]).astype(FLOAT32).reshape(shape)
            round_mode(value, out=value)
            v.write("y", _saturate(value, low, high, dtype))
    return kernel


@register("AscendQuant", "x: tensor, scale: tensor, offset: tensor?, sqrtMode: bool = False, "
                         "roundMode: str = 'round', dstType: int = 2, y: tensor!")
def ascend_quant(c: Call) -> Kernel:
    """``y = roundMode(x * scale [* scale] + offset)`` saturated into INT8, or int4 packed
    into INT32 (``dstType`` 3); scale/offset per tensor or along x's last dim."""
    return _ascend_quant(c, None)


@register("AscendQuantV3", "x: tensor, scale: tensor, offset: tensor?, sqrtMode: bool = False, "
                           "roundMode: str = 'round', dstType: int = 2, axis: int = -1, "
                           "y: tensor!")
def ascend_quant_v3(c: Call) -> Kernel:
    """AscendQuant with scale/offset along x's dim ``axis`` (one of its last two)."""
    return _ascend_quant(c, "axis")


# -- AscendAntiQuant ------------------------------------------------------------------------------
@register("AscendAntiQuant", "x: tensor, scale: tensor, offset: tensor?, dstType: int = 1, "
                             "sqrtMode: bool = False, y: tensor!")
def ascend_anti_quant(c: Call) -> Kernel:
    """``y = (x + offset) * scale [* scale]`` into FLOAT16 (``dstType`` 1) or BFLOAT16 (27);
    an INT32 ``x`` holds eight int4 values per element. scale/offset are 1-d of size 1 or
    the (unpacked) last dim of x."""
    x = c.tensor("x")
    c.check_dtype("x", ANTI_QUANT_X_DTYPES)
    if x.ndim > MAX_QUANTIZE_DIMS:
        raise c.fail("x", f"must have at most {MAX_QUANTIZE_DIMS} dims")
    packed = x.dtype == INT32
    shape = x.shape or (1,)
    if packed:
        shape = (*shape[:-1], shape[-1] * INT4_PER_INT32)
    scale = c.tensor("scale")
    c.check_dtype("scale", ANTI_QUANT_SCALE_DTYPES)
    if scale.ndim != 1 or scale.shape[0] not in (1, shape[-1]):
        raise c.fail("scale", f"must be 1-d of size 1 or {shape[-1]} (x's last dim"
                              f"{', unpacked' if packed else ''})")
    _check_like_scale(c, "offset", scale)
    target = ANTI_QUANT_TARGETS.get(c["dstType"])
    if target is None:
        raise c.fail("dstType", "expected 1 (FLOAT16) or 27 (BFLOAT16)")
    out_shape = shape if packed or x.ndim else ()
    c.check_out("y", out_shape, target, exact_dtype=True)
    sqrt_mode = bool(c["sqrtMode"])

    def kernel(v) -> None:
        values = as_array(v["x"])
        values = (unpack_int4(values.reshape(shape[:-1] + (-1,))) if packed
                  else values).astype(FLOAT32)
        factor = as_array(v["scale"]).astype(FLOAT32)
        with np.errstate(all="ignore"):
            if v.get("offset") is not None:
                values = values + as_array(v["offset"]).astype(FLOAT32)
            values = values * factor
            if sqrt_mode:
                values = values * factor
        v.write("y", values.reshape(out_shape))
    return kernel


# -- DynamicQuant -------------------------------------------------------------------------------
@register("DynamicQuant", "x: tensor, smoothScalesOptional: tensor?, yOut: tensor!, "
                          "scaleOut: tensor!")
def dynamic_quant(c: Call) -> Kernel:
    """Per-token symmetric quantization: each row (x's last dim) of ``x * smoothScales``
    scaled by ``max |row| / dtypeMax`` (127 for INT8, 7 for int4 packed into an INT32
    ``yOut``) and rounded half to even; the scales go to ``scaleOut`` (float32, x's shape
    without its last dim). A one-shot call makes an INT8 ``yOut``."""
    x = c.tensor("x")
    c.check_dtype("x", DYNAMIC_QUANT_X_DTYPES)
    if not MIN_DYNAMIC_QUANT_DIMS <= x.ndim <= MAX_QUANTIZE_DIMS:
        raise c.fail("x", f"must have {MIN_DYNAMIC_QUANT_DIMS} to {MAX_QUANTIZE_DIMS} dims")
    if c.has("smoothScalesOptional"):
        smooth = c.tensor("smoothScalesOptional")
        if smooth.dtype != x.dtype or smooth.shape != x.shape[-1:]:
            raise c.fail("smoothScalesOptional", f"must be [{x.shape[-1]}] of x's dtype "
                                                 f"({x.dtype})")
    given = c["yOut"]
    dtype = INT8 if given is None else given.dtype
    if dtype not in DYNAMIC_QUANT_MAX:
        raise c.fail("yOut", "dtype must be INT8 or INT32 (int4 packed eight to an element)")
    out_shape = _packed_shape(c, "x", x.shape) if dtype == INT32 else x.shape
    c.check_out("yOut", out_shape, dtype, exact_dtype=True)
    c.check_out("scaleOut", x.shape[:-1], FLOAT32, exact_dtype=True)
    bound = DYNAMIC_QUANT_MAX[dtype]
    low = -bound - 1

    def kernel(v) -> None:
        values = as_array(v["x"]).astype(FLOAT32)
        if v.get("smoothScalesOptional") is not None:
            values = values * as_array(v["smoothScalesOptional"]).astype(FLOAT32)
        with np.errstate(all="ignore"):
            scale = np.abs(values).max(axis=-1, keepdims=True, initial=0.0) / FLOAT32.type(
                bound)
            quotient = values * (FLOAT32.type(1) / scale)
        v.write("yOut", _saturate(np.rint(quotient, out=quotient), low, bound, dtype))
        v.write("scaleOut", scale.reshape(x.shape[:-1]))
    return kernel


# -- FakeQuantPerTensorAffineCachemask, FakeQuantPerChannelAffineCachemask ---------------------
def _fake_quant(c: Call, axis: int | None) -> Kernel:
    """Shared phase 1 and kernel: per tensor (``axis`` None) or along ``axis``."""
    x = c.tensor("self")
    c.check_dtype("self", FAKE_QUANT_DTYPES)
    c.check_dtype("scale", FAKE_QUANT_DTYPES)
    c.check_dtype("zeroPoint", {INT32})
    size = 1 if axis is None else x.shape[axis] if x.ndim else 1
    for name in ("scale", "zeroPoint"):
        tensor = c.tensor(name)
        if tensor.ndim != 1 or tensor.shape[0] != size:
            where = "1" if axis is None else f"{size} (self's dim {axis})"
            raise c.fail(name, f"must be 1-d of size {where}")
    low, high = c["quantMin"], c["quantMax"]
    if low > high:
        raise c.fail("quantMin", f"must be <= quantMax ({high})")
    c.check_out("out", x.shape, x.dtype, exact_dtype=True)
    c.check_out("mask", x.shape, np.dtype(np.bool_), exact_dtype=True)
    shape = [1] * x.ndim
    if axis is not None and x.ndim:
        shape[axis] = size
    enabled = axis is not None or c["fakeQuantEnabled"] >= 1

    def kernel(v) -> None:
        values = as_array(v["self"]).astype(FLOAT32)
        if not enabled:  # a copy, every element kept
            v.write("out", values)
            v.write("mask", True)
            return
        scale = as_array(v["scale"]).astype(FLOAT32).reshape(shape)
        zero = as_array(v["zeroPoint"]).astype(FLOAT32).reshape(shape)
        with np.errstate(all="ignore"):
            quantized = np.rint(values / scale) + zero
            v.write("mask", (quantized >= low) & (quantized <= high))
            v.write("out", (np.clip(quantized, low, high) - zero) * scale)
    return kernel


@register("FakeQuantPerTensorAffineCachemask",
          "self: tensor, scale: tensor, zeroPoint: tensor, fakeQuantEnabled: float = 1.0, "
          "quantMin: int = -128, quantMax: int = 127, out: tensor!, mask: tensor!")
def fake_quant_per_tensor_affine_cachemask(c: Call) -> Kernel:
    """``q = rint(self / scale) + zeroPoint``, ``out = (clip(q, quantMin, quantMax) -
    zeroPoint) * scale`` and ``mask = quantMin <= q <= quantMax`` (scale and zeroPoint of
    size 1), in float32; ``fakeQuantEnabled`` < 1 copies self and sets every mask bit."""
    return _fake_quant(c, None)


@register("FakeQuantPerChannelAffineCachemask",
          "self: tensor, scale: tensor, zeroPoint: tensor, axis: int = 0, "
          "quantMin: int = -128, quantMax: int = 127, out: tensor!, mask: tensor!")
def fake_quant_per_channel_affine_cachemask(c: Call) -> Kernel:
    """FakeQuantPerTensorAffineCachemask with one scale and zero point per index of
    self's dim ``axis``."""
    ndim = c.tensor("self").ndim
    return _fake_quant(c, c.normalize_dim("axis", c["axis"], ndim) if ndim else 0)


# -- GroupQuant ---------------------------------------------------------------------------------
@register("GroupQuant", "x: tensor, scale: tensor, groupIndex: tensor, "
                        "offsetOptional: tensor?, dstType: int = 2, y: tensor!")
def group_quant(c: Call) -> Kernel:
    """Grouped quantization of the rows of ``x`` (S, H): ``groupIndex`` (E,) holds each
    group's end row (non-decreasing, the last S), group e's rows use ``scale[e]`` (E, H):
    ``y = round(x * scale[e] + offset)`` saturated into INT8, or int4 packed into INT32
    (``dstType`` 3). ``offsetOptional`` is one value of scale's dtype. Rows past the last
    end (an invalid groupIndex) use the last group."""
    x, scale, index = c.tensor("x"), c.tensor("scale"), c.tensor("groupIndex")
    c.check_dtype("x", ASCEND_QUANT_X_DTYPES)
    c.check_dtype("scale", ASCEND_QUANT_X_DTYPES)
    c.check_dtype("groupIndex", GROUP_INDEX_DTYPES)
    for name, tensor in (("x", x), ("scale", scale)):
        if tensor.ndim != 2:
            raise c.fail(name, "must have 2 dims")
    if scale.shape[1] != x.shape[1]:
        raise c.fail("scale", f"dim 1 must equal x's ({x.shape[1]})")
    if index.shape != scale.shape[:1]:
        raise c.fail("groupIndex", f"must be 1-d of scale's dim 0 ({scale.shape[0]})")
    if c.has("offsetOptional"):
        offset = c.tensor("offsetOptional")
        if offset.dtype != scale.dtype or offset.numel != 1:
            raise c.fail("offsetOptional", f"must be one value of scale's dtype ({scale.dtype})")
    dtype, low, high = _quant_target(c, "dstType")
    out_shape = _packed_shape(c, "x", x.shape) if dtype == INT32 else x.shape
    c.check_out("y", out_shape, dtype, exact_dtype=True)
    groups = scale.shape[0]

    def kernel(v) -> None:
        xp = array_module(v["y"])
        ends = as_array(v["groupIndex"]).astype(np.int64)
        rows = xp.arange(x.shape[0])
        # row r belongs to the first group whose end is past it
        group = (ends[None, :] <= rows[:, None]).sum(axis=1)
        factor = as_array(v["scale"]).astype(FLOAT32)[xp.minimum(group, groups - 1)] \
            if groups else xp.zeros(x.shape, FLOAT32)
        with np.errstate(all="ignore"):
            value = as_array(v["x"]).astype(FLOAT32) * factor
            if v.get("offsetOptional") is not None:
                value = value + as_array(v["offsetOptional"]).astype(FLOAT32).reshape(())
            v.write("y", _saturate(np.rint(value), low, high, dtype))
    return kernel


# -- DequantBias --------------------------------------------------------------------------------
@register("DequantBias", "x: tensor, weightScale: tensor, activateScaleOptional: tensor?, "
                         "biasOptional: tensor?, outputDtype: int = 1, out: tensor!")
def dequant_bias(c: Call) -> Kernel:
    """INT32 ``x`` (M, N) back to FLOAT16 (``outputDtype`` 1) or BFLOAT16 (27):
    ``(x + bias) * weightScale * activateScale`` for an INT32 bias, ``x * weightScale *
    activateScale + bias`` for a float one; weightScale (N,) per column, activateScale (M,)
    per row, in float32."""
    x = c.tensor("x")
    c.check_dtype("x", {INT32})
    if x.ndim != 2:
        raise c.fail("x", "must have 2 dims (M, N)")
    m, n = x.shape
    for name, size, allowed in (("weightScale", n, DEQUANT_SCALE_DTYPES),
                                ("activateScaleOptional", m, {FLOAT32}),
                                ("biasOptional", n, DEQUANT_BIAS_DTYPES)):
        if c.has(name):
            c.check_dtype(name, allowed)
            if c.tensor(name).shape != (size,):
                raise c.fail(name, f"must be 1-d of size {size}")
    target = ANTI_QUANT_TARGETS.get(c["outputDtype"])
    if target is None:
        raise c.fail("outputDtype", "expected 1 (FLOAT16) or 27 (BFLOAT16)")
    c.check_out("out", x.shape, target, exact_dtype=True)
    integer_bias = c.has("biasOptional") and c.dtype("biasOptional") == INT32

    def kernel(v) -> None:
        values = as_array(v["x"])
        bias = v.get("biasOptional")
        if integer_bias:
            values = values.astype(np.int64) + as_array(bias)
        values = values.astype(FLOAT32) * as_array(v["weightScale"]).astype(FLOAT32)
        if v.get("activateScaleOptional") is not None:
            values = values * as_array(v["activateScaleOptional"]).astype(FLOAT32)[:, None]
        if bias is not None and not integer_bias:
            values = values + as_array(bias).astype(FLOAT32)
        v.write("out", values)
    return kernel


# -- FlatQuant --------------------------------------------------------------------------------
@register("FlatQuant", "x: tensor, kroneckerP1: tensor, kroneckerP2: tensor, "
                       "clipRatio: float = 1.0, out: tensor!, quantScale: tensor!")
def flat_quant(c: Call) -> Kernel:
    """Per-token int4 quantization after two Kronecker factors: ``x'' = P1 @ (x @ P2)`` for
    x (M, N1, N2), rounded to FLOAT16 as CANN's golden does, ``quantScale[m] = max |x''[m]|
    * clipRatio / 7`` and ``out = round(x'' / quantScale)`` in -8..7, packed eight to an
    INT32 (M, N1, N2 / 8). The INT4 and FLOAT4_E2M1 outputs (and the per-group mode they
    take) are refused: no host dtype holds them."""
    x = c.tensor("x")
    c.check_dtype("x", DYNAMIC_QUANT_X_DTYPES)
    if x.ndim != FLAT_QUANT_DIMS:
        raise c.fail("x", "must have 3 dims (M, N1, N2)")
    _, n1, n2 = x.shape
    for name, size in (("kroneckerP1", n1), ("kroneckerP2", n2)):
        if c.tensor(name).shape != (size, size) or c.dtype(name) != x.dtype:
            raise c.fail(name, f"must be [{size}, {size}] of x's dtype ({x.dtype})")
    ratio = c["clipRatio"]
    if not 0 < ratio <= 1:
        raise c.fail("clipRatio", "must be in (0, 1]")
    given = c["out"]
    if given is not None and given.dtype != INT32:
        raise c.fail("out", "dtype must be INT32 (int4 packed eight to an element); INT4 and "
                            "FLOAT4_E2M1 have no host dtype here")
    c.check_out("out", _packed_shape(c, "x", x.shape), INT32, exact_dtype=True)
    c.check_out("quantScale", x.shape[:1], FLOAT32, exact_dtype=True)
    divisor = FLOAT32.type(INT4_MAX / ratio)

    def kernel(v) -> None:
        xp = array_module(v["out"])
        values = as_array(v["x"]).astype(FLOAT32)
        product = xp.matmul(as_array(v["kroneckerP1"]).astype(FLOAT32),
                            xp.matmul(values, as_array(v["kroneckerP2"]).astype(FLOAT32)))
        product = product.astype(FLOAT16).astype(FLOAT32)
        scale = np.abs(product).reshape(product.shape[0], -1).max(axis=1, initial=0.0) / divisor
        with np.errstate(all="ignore"):
            quotient = product / scale[:, None, None]
        v.write("quantScale", scale)
        v.write("out", _saturate(np.rint(quotient, out=quotient), INT4_MIN, INT4_MAX, INT32))
    return kernel
