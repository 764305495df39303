"""ONNX quantization operators lowered onto aclnn operators, agreeing with onnxruntime to
the bit on integer QuantizeLinear / DequantizeLinear and the QOperator ops.

* QuantizeLinear: ``saturate(round_half_even(x / scale) + zero_point)``, per tensor, per
  axis or blocked (``block_size``), into int8, uint8, int16, uint16 or int4. Per tensor and
  per axis the quotient and its rounding are aclnnQuantize's (float32, zero points null, an
  INT32 result); blocked scales are expanded to the input's shape and divided (aclnnDiv,
  aclnnRound). The zero point is added after the rounding, in int64, then the sum is
  clamped and cast (onnxruntime's order; adding it before rounding would round ties the
  other way when it is odd). float8 e4m3fn / e5m2 and float4 e2m1 outputs are rounded to
  the format's grid (``saturate``), see ``_encode_float``.
* DequantizeLinear: ``(x - zero_point) * scale`` in float32 (exact for every 8/16-bit
  input), then cast to the output dtype (Cast, Sub, Mul); float8 / float4 / int4 inputs are
  decoded through a table of their 256 byte values first (IndexSelect), and constant ones
  of any format (uint4, int2...: weights) are computed here.
* DynamicQuantizeLinear: uint8 with ``scale = (max(x, 0) - min(x, 0)) / 255`` (1 when the
  range is empty, as onnxruntime's ``max == min ? 1.0f : ...``; ONNX's reference divides
  that 1 by 255 too), ``zero_point = round(clamp(-min / scale))`` and
  ``y = saturate(round(x / scale) + zero_point)`` (Amax, Amin, Div, Round, Clamp, Cast).
* MatMulInteger, ConvInteger: int32 results of ``(a - a_zero_point) @ (b - b_zero_point)``
  and the convolution of the shifted operands. The integer products are computed by the
  floating-point aclnnMatmul / aclnnConvolution in float32 when every partial sum is an
  integer below 2**24 (bounded here from the operands' ranges, or the constant weights'
  actual values), else in float64 (exact below 2**53): the result is the int32
  accumulation's, to the bit.
* QLinearMatMul, QLinearConv: that exact accumulation (plus QLinearConv's int32 bias),
  converted to float32, times ``a_scale * b_scale / y_scale`` (float32, onnxruntime's
  order), rounded half to even, plus ``y_zero_point``, saturated (onnxruntime's
  requantization; ONNX's reference adds the zero point before rounding).
* MatMulIntegerToFloat, QGemm: onnxruntime's contrib ops of those names, which
  ``fusions.fuse_qdq`` makes of QDQ groups (the importer takes no com.microsoft node): the
  exact product (QGemm: plus its int32 C) times ``a_scale * b_scale`` into float32, or
  requantized as QLinearMatMul is.

Scales and zero points may be constants (prepared here) or computed tensors (converted,
viewed and expanded by operators at run time).

A QDQ model (DequantizeLinear -> Conv / MatMul / Gemm -> QuantizeLinear) is not run as its
float op: ``fusions.fuse_qdq`` rewrites the groups onnxruntime fuses into the QLinear /
contrib ops above before constant folding could turn the weights' DequantizeLinear into
float constants (``passes.optimize`` leaves those for it), so the quantized values equal
onnxruntime's; run in float, a value within rounding of a halfway quotient could come out
one quantization step apart.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, Scalar, lowering, unsupported
from openacl.model.onnx_ops import KEEP_DTYPE, _cast_to, _only
from openacl.model.onnx_ops_nn import conv as _conv_lowering

FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
INT32, INT64 = np.dtype(np.int32), np.dtype(np.int64)
QUANTIZED = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
             for t in (np.int8, np.uint8, np.int16, np.uint16)}
DEQUANTIZED = {**QUANTIZED, INT32: (int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max))}
# storage formats the engine holds (one byte per element, an aclDataType each): no kernel
# computes in them, so their bytes are decoded through a 256-entry table and encoded from
# float16 bit patterns through a 65536-entry one
INT4 = np.dtype(ml_dtypes.int4)
INT_FORMATS = {INT4: (-8, 7)}
# float formats: (mantissa bits, smallest normal exponent, largest finite value)
FLOAT_FORMATS = {np.dtype(ml_dtypes.float8_e4m3fn): (3, -6, 448.0),
                 np.dtype(ml_dtypes.float8_e5m2): (2, -14, 57344.0),
                 np.dtype(ml_dtypes.float4_e2m1fn): (1, 0, 6.0)}
STORAGE = frozenset(INT_FORMATS) | frozenset(FLOAT_FORMATS)
EXACT_FLOAT32 = 1 << 24  # integers below this (in magnitude) add and multiply exactly
EXACT_FLOAT64 = 1 << 53
QUOTIENT_LIMIT = float(1 << 20)  # |x / scale| is clamped to this before the int32 cast
CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _input(node: Node, position: int) -> str:
    return node.inputs[position] if len(node.inputs) > position else ""


def _quantized_range(node: Node, dtype: np.dtype, table: dict = QUANTIZED) -> tuple[int, int]:
    if dtype not in table:
        raise unsupported(node, f"a {dtype} quantized tensor (int8, uint8, int16, uint16, "
                                f"int4, float8 e4m3fn / e5m2 and float4 e2m1 only: the "
                                f"engine has no aclDataType for the others)")
    return table[dtype]


def _decoded(b: Builder, name: str) -> str:
    """A storage-format tensor's values in float32: its bytes (a uint8 view) looked up in
    the format's 256-entry table (exact: every such value is a float32)."""
    value = b.value(name)
    count = math.prod(value.shape)
    raw = b.temp((count,), np.uint8)
    b.view(raw, name)
    index = b.temp((count,), INT32)
    b.call("Cast", self=Ref(raw), dtype=INT32, out=Ref(index))
    table = np.arange(256, dtype=np.uint8).view(value.dtype).astype(np.float32)
    real = b.temp((count,), FLOAT32)
    b.call("IndexSelect", self=Ref(b.constant(table, "decode")), dim=0, index=Ref(index),
           out=Ref(real))
    return b.reshaped(real, value.shape)


def _encode_float(b: Builder, real: str, out: str, saturate: bool) -> None:
    """``out`` (a float8 / float4 tensor) = ``real`` (float32) rounded to the nearest value
    of the format, ties to even, as ml_dtypes' (and ONNX's) cast: ``saturate`` clamps to the
    largest finite value first (float4 always saturates; otherwise e4m3fn overflows to NaN
    and e5m2 to infinity). The value is rounded on its binade's grid
    (``rint(|v| / 2**(e - m)) * 2**(e - m)`` with ``e = max(floor(log2 |v|), e_min)``: a
    log2 off by one near a power of two rounds to that same power either way), which every
    float16 holds, and the float16's bit pattern (with the value's sign bit) indexes the
    byte table."""
    fmt = b.value(out).dtype
    mantissa, lowest, largest = FLOAT_FORMATS[fmt]
    shape = b.value(real).shape
    if saturate or fmt == np.dtype(ml_dtypes.float4_e2m1fn):
        clamped = b.temp(shape, FLOAT32)
        b.call("Clamp", self=Ref(real), clipValueMin=Scalar(-largest, "float32"),
               clipValueMax=Scalar(largest, "float32"), out=Ref(clamped))
        real = clamped
    size = b.temp(shape, FLOAT32)
    b.call("Abs", self=Ref(real), out=Ref(size))
    exponent = b.temp(shape, FLOAT32)
    b.call("Log2", self=Ref(size), out=Ref(exponent))
    b.call("InplaceFloor", selfRef=Ref(exponent))
    b.call("ClampMin", self=Ref(exponent), clipValueMin=Scalar(float(lowest), "float32"),
           out=Ref(exponent))
    b.call("InplaceSubs", selfRef=Ref(exponent), other=Scalar(float(mantissa), "float32"),
           alpha=None)
    step = b.temp(shape, FLOAT32)
    b.call("PowScalarTensor", self=Scalar(2.0, "float32"), exponent=Ref(exponent),
           out=Ref(step))
    rounded = b.temp(shape, FLOAT32)
    b.call("Div", self=Ref(size), other=Ref(step), out=Ref(rounded))
    b.call("InplaceRound", selfRef=Ref(rounded))
    b.call("InplaceMul", selfRef=Ref(rounded), other=Ref(step))
    infinite = b.temp(shape, np.bool_)
    b.call("IsInf", x=Ref(size), out=Ref(infinite))  # (inf / inf above is NaN)
    b.call("SWhere", condition=Ref(infinite), self=Ref(size), other=Ref(rounded),
           out=Ref(rounded))
    count = math.prod(shape)
    index = _half_bits(b, rounded, count)  # the magnitude's float16 bits, then the sign's
    sign = _half_bits(b, real, count)  # (from the value itself: -0.0 keeps its sign)
    b.call("InplaceBitwiseAndScalar", selfRef=Ref(sign), other=Scalar(0x8000, "int32"))
    b.call("InplaceBitwiseOrTensor", selfRef=Ref(index), other=Ref(sign))
    with np.errstate(all="ignore"):
        table = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32
                                                                             ).astype(fmt)
    encoded = b.temp((count,), np.uint8)
    b.call("IndexSelect", self=Ref(b.constant(table.view(np.uint8), "encode")), dim=0,
           index=Ref(index), out=Ref(encoded))
    b.view(out, encoded)


def _half_bits(b: Builder, real: str, count: int) -> str:
    """The float16 bit patterns of ``real`` (float32) as int32, flattened."""
    half = b.temp((count,), np.float16)
    b.call("Cast", self=Ref(b.reshaped(real, (count,))), dtype=np.dtype(np.float16),
           out=Ref(half))
    bits = b.temp((count,), np.uint16)
    b.view(bits, half)
    index = b.temp((count,), INT32)
    b.call("Cast", self=Ref(bits), dtype=INT32, out=Ref(index))
    return index


def _granularity(node: Node, b: Builder, param: str, x_shape: tuple[int, ...]
                 ) -> tuple[str, int, int]:
    """("tensor" | "axis" | "block", axis, block size) of a scale / zero point."""
    shape = b.value(param).shape
    block = int(node.attrs.get("block_size", 0) or 0)
    if math.prod(shape) == 1 and not block:
        return "tensor", 0, 0
    rank = len(x_shape)
    axis = int(node.attrs.get("axis", 1))
    if not -rank <= axis < rank:
        raise unsupported(node, f"axis={axis} for a {rank}-d input")
    axis %= rank
    if not block:
        if len(shape) != 1 or shape[0] != x_shape[axis]:
            raise unsupported(node, f"a {list(shape)} scale for a {list(x_shape)} input "
                                    f"along axis {axis}")
        return "axis", axis, 0
    blocks = -(-x_shape[axis] // block)
    expected = tuple(blocks if k == axis else n for k, n in enumerate(x_shape))
    if block < 0 or tuple(shape) != expected:
        raise unsupported(node, f"block_size={block} with a {list(shape)} scale for a "
                                f"{list(x_shape)} input along axis {axis}")
    return "block", axis, block


def _param(node: Node, b: Builder, name: str, x_shape: tuple[int, ...], dtype: np.dtype,
           hint: str) -> str:
    """Scale or zero point ``name`` in ``dtype``, shaped to broadcast against ``x_shape``
    (a 0-d value, a 1-d one viewed along the axis, or blocks expanded to the input)."""
    kind, axis, block = _granularity(node, b, name, x_shape)
    rank = len(x_shape)
    along = tuple(x_shape[axis] if k == axis else 1 for k in range(rank))
    constant = b.constant_of(name)
    if constant is not None:
        array = np.asarray(constant).astype(dtype)
        if kind == "tensor":
            array = array.reshape(())
        elif kind == "axis":
            array = array.reshape(along)
        else:
            array = np.repeat(array, block, axis=axis).take(range(x_shape[axis]), axis=axis)
        return b.constant(np.ascontiguousarray(array), hint)
    source = _decoded(b, name) if b.value(name).dtype in STORAGE else name
    converted = _cast_to(b, source, dtype)
    if kind == "tensor":
        return b.reshaped(converted, ())
    if kind == "axis":
        return b.reshaped(converted, along)
    shape = b.value(converted).shape
    split = (*shape[:axis + 1], 1, *shape[axis + 1:])
    wide = (*shape[:axis + 1], block, *shape[axis + 1:])
    spread = b.temp(wide, dtype)
    b.call("Expand", self=Ref(b.reshaped(converted, split)), size=wide, out=Ref(spread))
    full = (*shape[:axis], shape[axis] * block, *shape[axis + 1:])
    spread = b.reshaped(spread, full)
    if full[axis] == x_shape[axis]:
        return spread
    trimmed = b.temp(x_shape, dtype)
    b.call("Slice", self=Ref(spread), dim=axis, start=0, end=x_shape[axis], step=1,
           out=Ref(trimmed))
    return trimmed


def _is_zero(b: Builder, name: str) -> bool:
    """A missing zero point, or a constant one that is all zeros."""
    if not name:
        return True
    constant = b.constant_of(name)
    return constant is not None and not np.any(constant)


def _saturate_into(b: Builder, rounded: str, zero_point: str | None, qrange: tuple[int, int],
                   out: str) -> None:
    """``out = clamp(rounded + zero_point, qrange)`` cast into ``out``'s dtype; ``rounded``
    is an integer tensor (the zero point is added in int64: no overflow)."""
    value = b.value(rounded)
    total = rounded
    if zero_point is not None:
        total = b.temp(value.shape, INT64)
        b.call("Add", self=Ref(rounded), other=Ref(zero_point), alpha=None, out=Ref(total))
    dtype = b.value(total).dtype.name
    clamped = b.temp(value.shape, b.value(total).dtype)
    b.call("Clamp", self=Ref(total), clipValueMin=Scalar(qrange[0], dtype),
           clipValueMax=Scalar(qrange[1], dtype), out=Ref(clamped))
    if b.value(out).dtype == INT4:  # its byte: the low nibble (ml_dtypes' layout)
        b.call("InplaceBitwiseAndScalar", selfRef=Ref(clamped), other=Scalar(0x0F, dtype))
        raw = b.temp(value.shape, np.uint8)
        b.call("Cast", self=Ref(clamped), dtype=np.dtype(np.uint8), out=Ref(raw))
        b.view(out, raw)
        return
    b.call("Cast", self=Ref(clamped), dtype=b.value(out).dtype, out=Ref(out))


def _round_to_int32(b: Builder, real: str) -> str:
    """``real`` rounded half to even and converted to int32 (clamped first so that the cast
    is defined; the clamp is far outside every quantized range plus its zero point)."""
    value = b.value(real)
    b.call("InplaceRound", selfRef=Ref(real))
    b.call("Clamp", self=Ref(real), clipValueMin=Scalar(-QUOTIENT_LIMIT, value.dtype.name),
           clipValueMax=Scalar(QUOTIENT_LIMIT, value.dtype.name), out=Ref(real))
    whole = b.temp(value.shape, INT32)
    b.call("Cast", self=Ref(real), dtype=INT32, out=Ref(whole))
    return whole


# -- QuantizeLinear / DequantizeLinear ------------------------------------------------------------
@lowering("QuantizeLinear")
def quantize_linear(node: Node, b: Builder) -> None:
    _only(node, "axis", "saturate", "block_size", "output_dtype", "precision")
    x, scale, zero_point = node.inputs[0], node.inputs[1], _input(node, 2)
    out = node.outputs[0]
    target = b.value(out).dtype
    qrange = INT_FORMATS.get(target) or (None if target in FLOAT_FORMATS else
                                         _quantized_range(node, target))
    x_shape = b.value(x).shape
    precision = FLOAT32
    if node.attrs.get("precision"):
        from onnx import helper

        precision = np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attrs["precision"])))
        if not np.issubdtype(precision, np.floating) and precision.kind != "V":
            raise unsupported(node, f"precision={precision}")
    kind, axis, _ = _granularity(node, b, scale, x_shape)
    zero = _is_zero(b, zero_point)
    if qrange is not None and precision == FLOAT32 and _quantize_per_tensor(
            node, b, x, scale, zero_point, x_shape, qrange, out):
        return
    if qrange is None:  # float8 / float4: x / scale, (float4: + zero point), then encoded
        quotient = b.temp(x_shape, precision)
        b.call("Div", self=Ref(_cast_to(b, x, precision)),
               other=Ref(_param(node, b, scale, x_shape, precision, "scale")),
               out=Ref(quotient))
        real = _cast_to(b, quotient, FLOAT32)
        if not zero and target == np.dtype(ml_dtypes.float4_e2m1fn):  # (ONNX's reference
            b.call("InplaceAdd", selfRef=Ref(real), alpha=None,  # adds it for float4 only)
                   other=Ref(_param(node, b, zero_point, x_shape, FLOAT32, "zero_point")))
        _encode_float(b, real, out, bool(int(node.attrs.get("saturate", 1))))
        return
    if kind != "block" and precision == FLOAT32 and target not in INT_FORMATS:
        # aclnnQuantize: x / scales rounded half to even (float32), per tensor or axis
        flat_x = b.reshaped(_cast_to(b, x, FLOAT32), x_shape or (1,))
        scales = b.reshaped(_param(node, b, scale, x_shape, FLOAT32, "scale"),
                       (x_shape[axis] if kind == "axis" else 1,))
        direct = zero and target in (np.dtype(np.int8), np.dtype(np.uint8))
        result = b.written_as(out, x_shape or (1,)) if direct else b.temp(x_shape or (1,), INT32)
        b.call("Quantize", x=Ref(flat_x), scales=Ref(scales), zeroPoints=None,
               dtype=target if direct else INT32, axis=axis if kind == "axis" else 0,
               out=Ref(result))
        if direct:
            return
        rounded = b.reshaped(result, x_shape)
    else:
        quotient = b.temp(x_shape, precision)
        b.call("Div", self=Ref(_cast_to(b, x, precision)),
               other=Ref(_param(node, b, scale, x_shape, precision, "scale")),
               out=Ref(quotient))
        rounded = _round_to_int32(b, quotient)
    points = None if zero else _param(node, b, zero_point, x_shape, INT64, "zero_point")
    _saturate_into(b, rounded, points, qrange, out)


def _quantize_per_tensor(node: Node, b: Builder, x: str, scale: str, zero_point: str,
                         x_shape: tuple[int, ...], qrange: tuple[int, int], out: str) -> bool:
    """QuantizeLinear by one scale and a constant zero point (every activation a QDQ model
    quantises) in float32 passes, as onnxruntime's MLAS kernel computes it: ``x / scale``,
    then ``_saturate_float``. False when the case is another (the general chain runs)."""
    offset = _constant_point(b, zero_point)
    if offset is None or _granularity(node, b, scale, x_shape)[0] != "tensor" or \
            b.value(out).dtype in INT_FORMATS or not x_shape:
        return False
    quotient = b.temp(x_shape, FLOAT32)
    b.call("Div", self=Ref(_cast_to(b, x, FLOAT32)),
           other=Ref(_param(node, b, scale, x_shape, FLOAT32, "scale")), out=Ref(quotient))
    _saturate_float(b, quotient, offset, qrange, out)
    return True


def _constant_point(b: Builder, zero_point: str) -> int | None:
    """A missing or constant one-value zero point as an int (None for anything else)."""
    if not zero_point:
        return 0
    value = b.constant_of(zero_point)
    if value is None or np.size(value) != 1:
        return None
    return int(np.asarray(value).reshape(()))


def _saturate_float(b: Builder, real: str, offset: int, qrange: tuple[int, int],
                    out: str) -> None:
    """``out = saturate(round_half_even(real) + offset)`` from a float32 tensor that may be
    overwritten, in float32 passes: rounded, saturated to the range less the offset (NaN to
    its low end, where MLAS's min/max order sends it), the offset added (exact: small
    integers in float32), cast."""
    low, high = float(qrange[0] - offset), float(qrange[1] - offset)
    b.call("InplaceRound", selfRef=Ref(real))
    b.call("InplaceNanToNum", selfRef=Ref(real), nan=low, posinf=high, neginf=low)
    b.call("Clamp", self=Ref(real), clipValueMin=Scalar(low, "float32"),
           clipValueMax=Scalar(high, "float32"), out=Ref(real))
    if offset:
        b.call("InplaceAdds", selfRef=Ref(real), other=Scalar(float(offset), "float32"),
               alpha=None)
    b.call("Cast", self=Ref(real), dtype=b.value(out).dtype, out=Ref(out))


@lowering("DequantizeLinear")
def dequantize_linear(node: Node, b: Builder) -> None:
    _only(node, "axis", "block_size", "output_dtype")
    x, scale, zero_point = node.inputs[0], node.inputs[1], _input(node, 2)
    out = node.outputs[0]
    x_value = b.value(x)
    if x_value.dtype not in DEQUANTIZED and _dequantize_constant(node, b):
        return  # constant weights of a storage format (float8, int4...): computed here
    shape = x_value.shape
    if x_value.dtype in STORAGE:
        real = _decoded(b, x)
    else:
        _quantized_range(node, x_value.dtype, DEQUANTIZED)
        real = b.temp(shape, FLOAT32)
        b.call("Cast", self=Ref(x), dtype=FLOAT32, out=Ref(real))
    if not _is_zero(b, zero_point) and x_value.dtype not in FLOAT_FORMATS:
        # (a float8 / float4 zero point must be 0: ONNX's reference leaves it out)
        b.call("InplaceSub", selfRef=Ref(real),
               other=Ref(_param(node, b, zero_point, shape, FLOAT32, "zero_point")),
               alpha=None)
    factor = _param(node, b, scale, shape, FLOAT32, "scale")
    if b.value(out).dtype == FLOAT32:
        b.call("Mul", self=Ref(real), other=Ref(factor), out=Ref(out))
        return
    b.call("InplaceMul", selfRef=Ref(real), other=Ref(factor))
    b.call("Cast", self=Ref(real), dtype=b.value(out).dtype, out=Ref(out))


def _dequantize_constant(node: Node, b: Builder) -> bool:
    """A DequantizeLinear of constants only (weights stored as float8 or 4/2-bit integers,
    which no kernel here reads): ONNX's formula computed here in float32 (exact: every such
    value and zero point is a small float32), the result a constant the output views."""
    names = [name for name in node.inputs[:3] if name]
    arrays = [b.constant_of(name) for name in names]
    if any(array is None for array in arrays):
        return False
    x = arrays[0].astype(np.float32)
    shape = x.shape

    def spread(position: int) -> np.ndarray:
        kind, axis, block = _granularity(node, b, names[position], shape)
        array = np.asarray(arrays[position]).astype(np.float32)
        if kind == "tensor":
            return array.reshape(())
        if kind == "axis":
            return array.reshape(tuple(shape[axis] if k == axis else 1
                                       for k in range(len(shape))))
        return np.repeat(array, block, axis=axis).take(range(shape[axis]), axis=axis)

    integer = np.dtype(arrays[0].dtype).kind in "iu" or "int" in np.dtype(arrays[0].dtype).name
    real = x - spread(2) if len(arrays) > 2 and integer else x  # float8/4 zero points are 0
    result = (real * spread(1)).astype(b.value(node.outputs[0]).dtype)
    b.view(node.outputs[0], b.constant(np.ascontiguousarray(result), "dequantized"))
    return True


@lowering("DynamicQuantizeLinear")
def dynamic_quantize_linear(node: Node, b: Builder) -> None:
    _only(node)
    x = node.inputs[0]
    y, y_scale, y_zero_point = (list(node.outputs) + ["", "", ""])[:3]
    value = b.value(x)
    if value.dtype != FLOAT32:
        raise unsupported(node, f"a {value.dtype} input (float32 only)")
    dims = tuple(range(len(value.shape)))
    high, low = b.temp((), FLOAT32), b.temp((), FLOAT32)
    source = x if value.shape else b.reshaped(x, (1,))
    b.call("Amax", self=Ref(source), dim=dims or (0,), keepDim=False, out=Ref(high))
    b.call("Amin", self=Ref(source), dim=dims or (0,), keepDim=False, out=Ref(low))
    b.call("ClampMin", self=Ref(high), clipValueMin=Scalar(0.0, "float32"), out=Ref(high))
    b.call("ClampMax", self=Ref(low), clipValueMax=Scalar(0.0, "float32"), out=Ref(low))
    span = b.temp((), FLOAT32)
    b.call("Sub", self=Ref(high), other=Ref(low), alpha=None, out=Ref(span))
    empty = b.temp((), np.bool_)
    b.call("EqScalar", self=Ref(span), other=Scalar(0.0, "float32"), out=Ref(empty))
    b.call("SWhere", condition=Ref(empty), self=Ref(b.constant(np.float32(255.0), "qspan")),
           other=Ref(span), out=Ref(span))  # an empty range: scale 1 (onnxruntime's)
    scale = y_scale or b.temp((), FLOAT32)
    b.call("Divs", self=Ref(span), other=Scalar(255.0, "float32"), out=Ref(scale))
    start = b.temp((), FLOAT32)  # qmin - min / scale, clamped to [0, 255], rounded
    b.call("Div", self=Ref(low), other=Ref(scale), out=Ref(start))
    b.call("InplaceMuls", selfRef=Ref(start), other=Scalar(-1.0, "float32"))
    b.call("Clamp", self=Ref(start), clipValueMin=Scalar(0.0, "float32"),
           clipValueMax=Scalar(255.0, "float32"), out=Ref(start))
    b.call("InplaceRound", selfRef=Ref(start))
    if y_zero_point:
        b.call("Cast", self=Ref(start), dtype=b.value(y_zero_point).dtype,
               out=Ref(y_zero_point))
    if not y:
        return
    quotient = b.temp(value.shape, FLOAT32)
    b.call("Div", self=Ref(x), other=Ref(scale), out=Ref(quotient))
    b.call("InplaceRound", selfRef=Ref(quotient))
    b.call("InplaceAdd", selfRef=Ref(quotient), other=Ref(start), alpha=None)
    b.call("Clamp", self=Ref(quotient), clipValueMin=Scalar(0.0, "float32"),
           clipValueMax=Scalar(255.0, "float32"), out=Ref(quotient))
    b.call("Cast", self=Ref(quotient), dtype=b.value(y).dtype, out=Ref(y))


# -- exact integer products ---------------------------------------------------------------------
def _shift_bound(b: Builder, name: str, zero_point: str) -> int:
    """The largest ``|value - zero_point|`` the quantized tensor ``name`` can hold."""
    low, high = _quantized_range(b.node, b.value(name).dtype)
    constant = b.constant_of(zero_point) if zero_point else None
    if not zero_point:
        points = np.zeros(1)
    elif constant is not None:
        points = np.asarray(constant, np.float64).reshape(-1)
    else:
        points = np.array([low, high], np.float64)
    return int(max(np.max(np.abs(high - points)), np.max(np.abs(points - low))))


def _shifted(b: Builder, name: str, zero_point: str, dtype: np.dtype,
             along: tuple[int, ...] | None) -> str:
    """``name - zero_point`` in ``dtype``; ``along`` shapes a 1-d zero point (None: use it
    as it broadcasts). A constant ``name`` is shifted here."""
    shape = b.value(name).shape
    constant = b.constant_of(name)
    points = b.constant_of(zero_point) if zero_point else None
    if constant is not None and (not zero_point or points is not None):
        shifted = np.asarray(constant, dtype)
        if zero_point:
            offsets = np.asarray(points, dtype)
            if along is not None and offsets.ndim == 1 and offsets.size > 1:
                offsets = offsets.reshape(along)
            shifted = shifted - offsets
        return b.constant(np.ascontiguousarray(shifted), "shifted")
    real = b.temp(shape, dtype)
    b.call("Cast", self=Ref(name), dtype=dtype, out=Ref(real))
    if zero_point:
        offsets = _converted(b, zero_point, dtype)
        if along is not None and len(b.value(offsets).shape) == 1 and \
                b.value(offsets).shape[0] > 1:
            offsets = b.reshaped(offsets, along)
        b.call("InplaceSub", selfRef=Ref(real), other=Ref(offsets), alpha=None)
    return real


def _converted(b: Builder, name: str, dtype: np.dtype) -> str:
    """``name`` in ``dtype``: a constant converted here into one of our own (a one-byte
    initializer can share its memory with another one: CPython's cached one-byte bytes
    objects back both, and a registration must not hang on the other's lifetime), else a
    Cast at run time."""
    constant = b.constant_of(name)
    if constant is not None:
        return b.constant(np.ascontiguousarray(np.asarray(constant, dtype)), "converted")
    return _cast_to(b, name, dtype)


def _column_bound(b: Builder, name: str, zero_point: str, reduce_axes: tuple[int, ...],
                  along: tuple[int, ...] | None, terms: int) -> int:
    """The largest sum of ``|w - zero_point|`` over one output's ``terms`` weights (the
    constant weights' own, else every term at its dtype's extreme)."""
    constant = b.constant_of(name)
    points = b.constant_of(zero_point) if zero_point else None
    if constant is None or (zero_point and points is None):
        return terms * _shift_bound(b, name, zero_point)
    shifted = np.asarray(constant, np.int64)
    if zero_point:
        offsets = np.asarray(points, np.int64)
        if along is not None and offsets.ndim == 1 and offsets.size > 1:
            offsets = offsets.reshape(along)
        shifted = shifted - offsets
    return int(np.abs(shifted).sum(axis=reduce_axes).max(initial=0))


def _exact_dtype(node: Node, bound: int) -> np.dtype:
    if bound < EXACT_FLOAT32:
        return FLOAT32
    if bound < EXACT_FLOAT64:
        return FLOAT64
    raise unsupported(node, f"integer products whose sums may reach {bound} (beyond float64's "
                            f"exact integers)")


def _integer_matmul(node: Node, b: Builder, a: str, a_zero: str, w: str, w_zero: str,
                    extra: int = 0) -> str:
    """The exact ``(a - a_zero) @ (w - w_zero)`` as a float tensor of integer values (exact
    still after adding integers up to ``extra`` in magnitude)."""
    a_shape, w_shape = b.value(a).shape, b.value(w).shape
    if len(a_shape) < 2 or len(w_shape) < 2:
        raise unsupported(node, f"operands {list(a_shape)} and {list(w_shape)} (2-d or more)")
    depth = a_shape[-1]
    rows = (*([1] * (len(a_shape) - 2)), a_shape[-2], 1)  # a 1-d zero point: one per row
    bound = _shift_bound(b, a, a_zero) * _column_bound(
        b, w, w_zero, (len(w_shape) - 2,), None, depth)
    dtype = _exact_dtype(node, bound + extra)
    left = _shifted(b, a, a_zero, dtype, rows)
    right = _shifted(b, w, w_zero, dtype, None)
    shape = np.broadcast_shapes(a_shape[:-2], w_shape[:-2]) + (a_shape[-2], w_shape[-1])
    product = b.temp(tuple(shape), dtype)
    b.call("Matmul", self=Ref(left), mat2=Ref(right), out=Ref(product),
           cubeMathType=KEEP_DTYPE)
    return product


def _integer_conv(node: Node, b: Builder, x: str, x_zero: str, w: str, w_zero: str,
                  bias: str) -> str:
    """The exact convolution of ``x - x_zero`` with ``w - w_zero`` (plus an int32 bias) as a
    float tensor of integer values (the Conv lowering's padding, strides, groups)."""
    w_shape = b.value(w).shape
    if len(w_shape) < 3:
        raise unsupported(node, f"a {list(w_shape)} weight")
    channels = (w_shape[0], *([1] * (len(w_shape) - 1)))  # a 1-d zero point: one per output
    terms = math.prod(w_shape[1:])
    bound = _shift_bound(b, x, x_zero) * _column_bound(
        b, w, w_zero, tuple(range(1, len(w_shape))), channels, terms)
    bias_constant = b.constant_of(bias) if bias else None
    if bias:
        bound += int(np.abs(bias_constant.astype(np.int64)).max(initial=0)) \
            if bias_constant is not None else int(np.iinfo(np.int32).max)
    dtype = _exact_dtype(node, bound)
    inputs = [_shifted(b, x, x_zero, dtype, None), _shifted(b, w, w_zero, dtype, channels)]
    if bias:
        inputs.append(_converted(b, bias, dtype))
    out_shape = b.value(node.outputs[0]).shape
    result = b.temp(out_shape, dtype)
    attrs = {k: v for k, v in node.attrs.items() if k in CONV_ATTRIBUTES}
    _conv_lowering(Node("Conv", node.name, inputs, [result], attrs), b)
    return result


def _integer_result(b: Builder, real: str, out: str) -> None:
    b.call("Cast", self=Ref(real), dtype=b.value(out).dtype, out=Ref(out))


@lowering("MatMulInteger")
def matmul_integer(node: Node, b: Builder) -> None:
    _only(node)
    a, w = node.inputs[0], node.inputs[1]
    product = _integer_matmul(node, b, a, _input(node, 2), w, _input(node, 3))
    _integer_result(b, product, node.outputs[0])


@lowering("ConvInteger")
def conv_integer(node: Node, b: Builder) -> None:
    _only(node, *CONV_ATTRIBUTES)
    x, w = node.inputs[0], node.inputs[1]
    total = _integer_conv(node, b, x, _input(node, 2), w, _input(node, 3), "")
    _integer_result(b, total, node.outputs[0])


# -- QLinearMatMul / QLinearConv ------------------------------------------------------------------
def _multiplier(node: Node, b: Builder, scales: list[tuple[str, tuple[int, ...] | None]],
                ) -> str:
    """``scales[0] * scales[1] / scales[2]`` in float32 (onnxruntime's order; without a
    third scale, the product alone), each 1-d scale viewed with its ``along`` shape first
    (None: as it is)."""
    shaped = []
    for name, along in scales:
        constant = b.constant_of(name)
        if constant is not None:
            array = np.asarray(constant).astype(np.float32)
            if array.size == 1:
                array = array.reshape(())
            elif along is not None and array.ndim == 1:
                array = array.reshape(along)
            shaped.append(array)
        else:
            shaped.append(None)
    if all(s is not None for s in shaped):
        product = shaped[0] * shaped[1]
        return b.constant(product / shaped[2] if len(shaped) > 2 else product, "multiplier")
    names = []
    for (name, along), array in zip(scales, shaped, strict=True):
        if array is not None:
            names.append(b.constant(array, "scale"))
            continue
        converted = _cast_to(b, name, FLOAT32)
        shape = b.value(converted).shape
        if math.prod(shape) == 1:
            shape = ()
        elif along is not None and len(shape) == 1:
            shape = along
        names.append(b.reshaped(converted, shape))
    product = b.binary("Mul", names[0], names[1], FLOAT32)
    return b.binary("Div", product, names[2], FLOAT32) if len(names) > 2 else product


def _requantize(node: Node, b: Builder, accumulated: str, multiplier: str, zero_point: str,
                out: str) -> None:
    """``out = saturate(round(float32(accumulated) * multiplier) + zero_point)``."""
    qrange = _quantized_range(node, b.value(out).dtype)
    shape = b.value(accumulated).shape
    real = _cast_to(b, accumulated, FLOAT32)
    scaled = b.temp(shape, FLOAT32)
    b.call("Mul", self=Ref(real), other=Ref(multiplier), out=Ref(scaled))
    offset = _constant_point(b, zero_point)
    if offset is not None and b.value(out).dtype not in INT_FORMATS:
        _saturate_float(b, scaled, offset, qrange, out)
        return
    rounded = _round_to_int32(b, scaled)
    points = None
    if not _is_zero(b, zero_point):
        size = math.prod(b.value(zero_point).shape)
        if size != 1:
            raise unsupported(node, f"a {list(b.value(zero_point).shape)} output zero point "
                                    f"(per tensor only)")
        points = b.reshaped(_converted(b, zero_point, INT64), ())
    _saturate_into(b, rounded, points, qrange, out)


@lowering("QLinearMatMul")
def qlinear_matmul(node: Node, b: Builder) -> None:
    _only(node)
    a, a_scale, a_zero, w, w_scale, w_zero, y_scale, y_zero = (list(node.inputs) +
                                                               [""] * 8)[:8]
    a_shape = b.value(a).shape
    product = _integer_matmul(node, b, a, a_zero, w, w_zero)
    rows = (*([1] * (len(a_shape) - 2)), a_shape[-2], 1)
    multiplier = _multiplier(node, b, [(a_scale, rows), (w_scale, None), (y_scale, rows)])
    _requantize(node, b, product, multiplier, y_zero, node.outputs[0])


@lowering("QLinearConv")
def qlinear_conv(node: Node, b: Builder) -> None:
    _only(node, *CONV_ATTRIBUTES)
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = (list(node.inputs) +
                                                                     [""] * 9)[:9]
    total = _integer_conv(node, b, x, x_zero, w, w_zero, bias)
    spatial = len(b.value(w).shape) - 2
    channels = (1, b.value(w).shape[0], *([1] * spatial))
    multiplier = _multiplier(node, b, [(x_scale, None), (w_scale, channels), (y_scale, None)])
    _requantize(node, b, total, multiplier, y_zero, node.outputs[0])


# -- onnxruntime's contrib ops, as fusions.fuse_qdq makes them of QDQ groups --------------------
def _scaled_into(b: Builder, accumulated: str, multiplier: str, out: str) -> None:
    """``out = float32(accumulated) * multiplier`` (onnxruntime's scale output processor)."""
    real = _cast_to(b, accumulated, FLOAT32)
    b.call("Mul", self=Ref(real), other=Ref(multiplier), out=Ref(out))


@lowering("MatMulIntegerToFloat")
def matmul_integer_to_float(node: Node, b: Builder) -> None:
    """com.microsoft MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point,
    b_zero_point): the exact integer product times ``a_scale * b_scale`` (float32; a 1-d
    b_scale per column), into float32. (A bias input is not taken: onnxruntime's kernel
    adds it in the same fused step.)"""
    _only(node)
    a, w, a_scale, w_scale, a_zero, w_zero, bias = (list(node.inputs) + [""] * 7)[:7]
    if bias:
        raise unsupported(node, "a bias input")
    if b.value(node.outputs[0]).dtype != FLOAT32:
        raise unsupported(node, f"a {b.value(node.outputs[0]).dtype} output (float32 only)")
    product = _integer_matmul(node, b, a, a_zero, w, w_zero)
    _scaled_into(b, product, _multiplier(node, b, [(a_scale, None), (w_scale, None)]),
                 node.outputs[0])


@lowering("QGemm")
def qgemm(node: Node, b: Builder) -> None:
    """com.microsoft QGemm (A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale,
    y_zero_point) with A and B as they multiply (transA = transB = 0) and alpha 1: the
    exact ``(A - a_zp) @ (B - b_zp) + C`` (C int32, broadcast), then onnxruntime's
    requantization by ``a_scale * b_scale / y_scale`` or, without y_scale, times
    ``a_scale * b_scale`` into float32 (b_scale 1-d: per column)."""
    _only(node, "alpha", "transA", "transB")
    if any(int(node.attrs.get(k, 0)) for k in ("transA", "transB")) or \
            float(node.attrs.get("alpha", 1.0)) != 1.0:
        raise unsupported(node, "transA / transB / alpha (the fusion applies them first)")
    a, a_scale, a_zero, w, w_scale, w_zero, bias, y_scale, y_zero = (list(node.inputs) +
                                                                     [""] * 9)[:9]
    if len(b.value(a).shape) != 2 or len(b.value(w).shape) != 2:
        raise unsupported(node, "operands that are not matrices")
    extra = 0
    if bias:
        constant = b.constant_of(bias)
        extra = int(np.abs(np.asarray(constant, np.int64)).max(initial=0)) \
            if constant is not None else int(np.iinfo(np.int32).max)
    total = _integer_matmul(node, b, a, a_zero, w, w_zero, extra)
    if bias:
        b.call("InplaceAdd", selfRef=Ref(total), other=Ref(_converted(b, bias,
                                                                     b.value(total).dtype)),
               alpha=None)
    out = node.outputs[0]
    if y_scale:
        multiplier = _multiplier(node, b, [(a_scale, None), (w_scale, None), (y_scale, None)])
        _requantize(node, b, total, multiplier, y_zero, out)
        return
    if b.value(out).dtype != FLOAT32:
        raise unsupported(node, f"a {b.value(out).dtype} output without y_scale")
    _scaled_into(b, total, _multiplier(node, b, [(a_scale, None), (w_scale, None)]), out)
