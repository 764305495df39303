"""Quantized matrix products: aclnnQuantMatmulV3, QuantMatmulV4, WeightQuantBatchMatmulV2 /
V3 and the scale encoder aclnnTransQuantParamV2, with CANN's argument lists.

``QuantMatmulV4(x1, x2, scale, offset, pertokenScaleOptional, bias, transposeX1,
transposeX2, out)`` (V3: without the per-token scale) computes, as CANN's formulas say:

* an INT32 bias is added to the exact integer product: ``(x1 @ x2 + bias) * scale``;
* a float bias (BFLOAT16, FLOAT16, FLOAT32) after the scales: ``x1 @ x2 * scale + bias``;
* ``pertokenScaleOptional`` (m,) multiplies each row after ``scale`` (n or 1,);
* ``offset`` (FLOAT32, n or 1) is added last, for an INT8 ``out`` only.

The arithmetic after the product runs in float32 (the product itself is exact: in float32
while k * 128 * 128 < 2^24, else in float64); an INT8 or INT32 ``out`` is rounded half to even
and saturated. ``scale`` is FLOAT32, BFLOAT16, or INT64/UINT64 as TransQuantParamV2 encodes
it (the float32's 19 high bits in bits 0-31, bit 46 set, a 9-bit offset in bits 37-45,
which applies to an INT8 ``out``). x1 and x2 are INT8, or INT32 carrying eight int4 values
each along their last dim (``quantization.pack_int4``'s layout); batch dims (2-6 dims in
all) broadcast. The INT4 dtype itself is refused (no host dtype: the INT32 carrier is its
form here). A one-shot call's ``out`` is INT8 when an offset is given, else BFLOAT16 when
scale or bias is BFLOAT16, else FLOAT16.

``QuantMatmulWeightNz(x1, x2, x1Scale, x2Scale, yScale, x1Offset, x2Offset, yOffset, bias,
transposeX1, transposeX2, groupSize, out)`` is QuantMatmulV4 (``x2Scale`` the scale,
``x1Scale`` the per-token scale, ``x2Offset`` the offset) with x2 in FRACTAL_NZ, as CANN's
aclnnTransMatmulWeight leaves it: the view the ND weight (batch, k, n) ((batch, n, k) with
transposeX2), the storage its 16 x C0 blocks ``(batch, ceil(W / C0), ceil(H / 16), 16, C0)``
for a view of (H, W) rows and columns, zero padded, C0 = 32 bytes (32 INT8 or 8 INT32
values; ``pack_weight_nz``, ``weight_nz``). ``yScale``, ``x1Offset`` and ``yOffset`` must be
null or empty and ``groupSize`` 0 (the A2/A3 and 310P forms; the 950's float8, MX and
per-group forms and the INT8 x INT32 MSD form are not implemented).

``WeightQuantBatchMatmulV2`` is the weight-only form: ``y = x @ ((weight + antiquantOffset)
* antiquantScale) + bias``, the weight (INT8, or int4 in INT32) dequantized per tensor, per
output channel or per group of ``antiquantGroupSize`` rows of k, in float32; with
``quantScaleOptional`` (TransQuantParamV2 words) the result is quantized again into INT8,
``round(y * quantScale + quantOffset)``. An optional tensor with no elements counts as
absent (CANN's ATK cases pass empty tensors for the parameters they leave out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.dtypes import Format
from openacl.ops.call import Call, Kernel, TensorArg, array_module, as_array
from openacl.ops.promotion import BFLOAT16
from openacl.ops.quantization import INT4_PER_INT32, unpack_int4
from openacl.ops.registry import register
from openacl.tensor import AclTensor, Tensor, contiguous_strides, create_tensor, to_device

__all__ = ["pack_weight_nz", "quant_matmul_v3", "quant_matmul_v4", "quant_matmul_weight_nz",
           "trans_quant_param_v2", "unpack_weight_nz", "weight_nz",
           "weight_quant_batch_matmul_v2", "weight_quant_batch_matmul_v3"]

FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)
INT8, INT32 = np.dtype(np.int8), np.dtype(np.int32)
INT64, UINT64 = np.dtype(np.int64), np.dtype(np.uint64)
MIN_DIMS, MAX_DIMS = 2, 6
OPERAND_DTYPES = frozenset({INT8, INT32})
SCALE_DTYPES = frozenset({FLOAT32, BFLOAT16, INT64, UINT64})
ENCODED_SCALE_DTYPES = frozenset({INT64, UINT64})
BIAS_DTYPES = frozenset({INT32, BFLOAT16, FLOAT16, FLOAT32})
OUT_DTYPES = frozenset({FLOAT16, BFLOAT16, INT8, INT32})
ROUNDED_OUT = {INT8: np.iinfo(np.int8), INT32: np.iinfo(np.int32)}
# TransQuantParamV2's 64-bit encoding of a float32 scale and a 9-bit offset
SCALE_BITS_MASK = 0xFFFFE000  # the float32's sign, exponent and 10 high mantissa bits
SCALE_FLAG = 1 << 46
OFFSET_SHIFT = 37
OFFSET_MASK = 0x1FF
OFFSET_SIGN = 0x100
OFFSET_MIN, OFFSET_MAX = -256, 255
KEEP_MASK = 0x4000FFFFFFFF  # the flag and the scale bits, before the offset is or-ed in
TRANS_OUT_DTYPES = frozenset({INT64, UINT64})
TRANS_MAX_DIMS = 2
ACTIVATION_DTYPES = frozenset({FLOAT16, BFLOAT16})
ANTIQUANT_OFFSET_DTYPES = ACTIVATION_DTYPES | {INT32}
WQ_BIAS_DTYPES = frozenset({FLOAT16, BFLOAT16, FLOAT32})
GROUP_MULTIPLE = 32  # antiquantGroupSize: 0, or a multiple of 32 in [32, k - 1]
FLOAT32_EXACT_INTEGER = 1 << 24  # every integer below this is exact in float32
INT8_PRODUCT_MAX = 128 * 128  # the largest |product| of two int8 values
INT4_PRODUCT_MAX = 8 * 8
INNER_PRECISE_MODES = (0, 1)  # WeightQuantBatchMatmulV3: high precision, high performance


# -- TransQuantParamV2 ------------------------------------------------------------------------
@register("TransQuantParamV2", "scale: tensor, offset: tensor?, out: tensor!")
def trans_quant_param_v2(c: Call) -> Kernel:
    """Encode FLOAT32 ``scale`` (and ``offset``, rounded and clipped to [-256, 255]) into the
    INT64 / UINT64 words the quantized products take: ``(bits(scale) & 0xFFFFE000) | 1 << 46
    | (offset & 0x1FF) << 37``; the result has the broadcast shape (1-2 dims). A one-shot
    call makes INT64."""
    c.check_dtype("scale", {FLOAT32})
    names = ["scale"]
    if c.has("offset"):
        c.check_dtype("offset", {FLOAT32})
        names.append("offset")
    for name in names:
        if not 1 <= c.tensor(name).ndim <= TRANS_MAX_DIMS:
            raise c.fail(name, f"must have 1 to {TRANS_MAX_DIMS} dims")
    shape = c.broadcast(*names)
    given = c["out"]
    dtype = INT64 if given is None else c.check_dtype("out", TRANS_OUT_DTYPES, given.dtype)
    c.check_out("out", shape, dtype, exact_dtype=True)

    def kernel(v) -> None:
        xp = array_module(v["out"])
        bits = xp.ascontiguousarray(as_array(v["scale"]), dtype=np.float32).view(np.uint32)
        words = (bits.astype(np.int64) & SCALE_BITS_MASK) | SCALE_FLAG
        if v.get("offset") is not None:
            offset = xp.clip(xp.rint(as_array(v["offset"])), OFFSET_MIN, OFFSET_MAX)
            words = (words & KEEP_MASK) | ((offset.astype(np.int64) & OFFSET_MASK)
                                           << OFFSET_SHIFT)
        v.write("out", xp.broadcast_to(words, shape).astype(np.uint64).view(dtype))
    return kernel


def decode_scale(words):
    """INT64/UINT64 TransQuantParamV2 words -> (float32 scale, float32 offset)."""
    wide = words.astype(np.int64)
    scale = (wide & SCALE_BITS_MASK).astype(np.uint32).view(np.float32)
    raw = (wide >> OFFSET_SHIFT) & OFFSET_MASK
    offset = (raw - ((raw & OFFSET_SIGN) << 1)).astype(np.float32)
    return scale, offset


# -- QuantMatmulV3, QuantMatmulV4 ---------------------------------------------------------------
def _operand_shape(c: Call, name: str) -> tuple[int, ...]:
    """An operand's logical shape: an INT32 one holds eight int4 values per element."""
    tensor = c.tensor(name)
    c.check_dtype(name, OPERAND_DTYPES)
    if not MIN_DIMS <= tensor.ndim <= MAX_DIMS:
        raise c.fail(name, f"must have {MIN_DIMS} to {MAX_DIMS} dims")
    if tensor.dtype == INT32:
        return (*tensor.shape[:-1], tensor.shape[-1] * INT4_PER_INT32)
    return tensor.shape


def _vector(c: Call, name: str, sizes: tuple[int, ...], dtypes: frozenset) -> TensorArg | None:
    """An optional 1-d argument of one of ``sizes``."""
    if not c.has(name):
        return None
    tensor = c.tensor(name)
    c.check_dtype(name, dtypes)
    if tensor.ndim != 1 or tensor.shape[0] not in sizes:
        listed = " or ".join(str(s) for s in dict.fromkeys(sizes))
        raise c.fail(name, f"must be 1-d of size {listed}")
    return tensor


@dataclass(frozen=True)
class _Roles:
    """The arguments that play each part of the formulas (their names differ per operator)."""

    scale: str = "scale"
    offset: str = "offset"
    pertoken: str | None = "pertokenScaleOptional"
    bias: str = "bias"


V3_ROLES = _Roles(pertoken=None)
V4_ROLES = _Roles()
NZ_ROLES = _Roles(scale="x2Scale", offset="x2Offset", pertoken="x1Scale")


@dataclass(frozen=True)
class _Weight:
    """x2 as an operator other than V3/V4 gives it: its logical shape (INT32: eight int4
    values per element counted), whether it is transposed, and its values (views -> the
    array of the operand as stored, int4 still packed) in that shape."""

    shape: tuple[int, ...]
    transpose: bool
    values: Callable[[Any], Any]
    blocks: tuple[int, ...] = ()  # a FRACTAL_NZ weight: the shape of its storage


def _quant_matmul(c: Call, roles: _Roles, weight: _Weight | None = None) -> Kernel:
    a = _operand_shape(c, "x1")
    b = _operand_shape(c, "x2") if weight is None else weight.shape
    if c.dtype("x1") != c.dtype("x2"):
        raise c.fail("x2", f"dtype must equal x1's ({c.dtype('x1')})")
    trans_a = bool(c["transposeX1"])
    trans_b = bool(c["transposeX2"]) if weight is None else weight.transpose
    m, k = (a[-1], a[-2]) if trans_a else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if trans_b else (b[-2], b[-1])
    if k != k2:
        raise c.fail("x2", f"its reduce dim ({k2}) does not match x1's ({k})")
    try:
        batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        raise c.fail("x2", f"batch dims {list(b[:-2])} cannot be broadcast with x1's "
                           f"{list(a[:-2])}") from None
    scale = _vector(c, roles.scale, (1, n), SCALE_DTYPES)
    offset = _vector(c, roles.offset, (1, n), frozenset({FLOAT32}))
    per_token = _vector(c, roles.pertoken, (m,), frozenset({FLOAT32})) \
        if roles.pertoken else None
    bias = None
    if c.has(roles.bias):
        bias = c.tensor(roles.bias)
        c.check_dtype(roles.bias, BIAS_DTYPES)
        if bias.shape not in ((n,), (batch[0] if len(batch) == 1 else -1, 1, n)):
            raise c.fail(roles.bias, f"must be [{n}], or [batch, 1, {n}] for a 3-d result")
    given = c["out"]
    if given is not None:
        dtype = c.check_dtype("out", OUT_DTYPES, given.dtype)
    elif offset is not None:
        dtype = INT8
    else:
        dtypes = {scale.dtype} | ({bias.dtype} if bias is not None else set())
        dtype = BFLOAT16 if BFLOAT16 in dtypes else FLOAT16
    if offset is not None and dtype != INT8:
        raise c.fail(roles.offset, "must be null unless out is INT8")
    c.check_out("out", (*batch, m, n), dtype, exact_dtype=True)
    encoded = scale.dtype in ENCODED_SCALE_DTYPES
    integer_bias = bias is not None and bias.dtype == INT32

    # the integer product is exact in float32 while |sum| < 2^24, else in float64
    largest = (INT4_PRODUCT_MAX if c.dtype("x1") == INT32 else INT8_PRODUCT_MAX) * k
    exact = FLOAT32 if largest < FLOAT32_EXACT_INTEGER else np.dtype(np.float64)

    def operand(v, name: str, transpose: bool):
        values = as_array(v[name] if weight is None or name == "x1" else weight.values(v))
        if values.dtype == INT32:
            values = unpack_int4(values)
        values = values.astype(exact)
        return values.swapaxes(-1, -2) if transpose else values

    def kernel(v) -> None:
        xp = array_module(v["out"])
        product = xp.matmul(operand(v, "x1", trans_a), operand(v, "x2", trans_b))
        if integer_bias:  # (exactly: a float32 product is below 2^24, the bias int32)
            product = product.astype(np.float64) + as_array(v[roles.bias]).reshape(bias.shape)
        factor = as_array(v[roles.scale])
        shift = None
        if encoded:
            factor, packed_offset = decode_scale(factor)
            shift = packed_offset if dtype == INT8 else None
        value = product.astype(np.float32) * factor.astype(np.float32)
        if per_token is not None:
            value *= as_array(v[roles.pertoken]).astype(np.float32)[:, None]
        if bias is not None and not integer_bias:
            value += as_array(v[roles.bias]).astype(np.float32).reshape(bias.shape)
        if offset is not None:
            shift = as_array(v[roles.offset]).astype(np.float32)
        if shift is not None:
            value += shift
        limits = ROUNDED_OUT.get(dtype)
        if limits is not None:
            value = xp.clip(xp.nan_to_num(xp.rint(value), nan=0.0), limits.min, limits.max)
        v.write("out", value)
    return kernel


@register("QuantMatmulV3", "x1: tensor, x2: tensor, scale: tensor, offset: tensor?, "
                           "bias: tensor?, transposeX1: bool = False, "
                           "transposeX2: bool = False, out: tensor!")
def quant_matmul_v3(c: Call) -> Kernel:
    """``out = (x1 @ x2 [+ int32 bias]) * scale [+ float bias] [+ offset]`` for INT8 (or
    int4 in INT32) operands; see the module notes."""
    return _quant_matmul(c, V3_ROLES)


@register("QuantMatmulV4", "x1: tensor, x2: tensor, scale: tensor, offset: tensor?, "
                           "pertokenScaleOptional: tensor?, bias: tensor?, "
                           "transposeX1: bool = False, transposeX2: bool = False, "
                           "out: tensor!")
def quant_matmul_v4(c: Call) -> Kernel:
    """QuantMatmulV3 with a per-token (per-row) scale ``pertokenScaleOptional`` (m,) applied
    after ``scale``."""
    return _quant_matmul(c, V4_ROLES)


# -- QuantMatmulWeightNz ------------------------------------------------------------------------
NZ_ROWS = 16  # rows of a FRACTAL_NZ block
NZ_ROW_BYTES = 32  # a block row is 32 bytes: C0 = 32 INT8 or 8 INT32 (64 int4) values
NZ_WEIGHT_DTYPES = frozenset({INT8, INT32})
NZ_ABSENT = ("yScale", "x1Offset", "yOffset")  # CANN: null or an empty tensor (not supported)


def _nz_c0(dtype: np.dtype) -> int:
    return NZ_ROW_BYTES // np.dtype(dtype).itemsize


def nz_shape(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    """The FRACTAL_NZ storage shape of an ND matrix (batch..., H, W) of ``dtype``:
    ``(batch..., ceil(W / C0), ceil(H / 16), 16, C0)`` (CANN's GetWeightNzShape)."""
    *batch, rows, cols = shape
    c0 = _nz_c0(dtype)
    return (*batch, -(-cols // c0), -(-rows // NZ_ROWS), NZ_ROWS, c0)


def pack_weight_nz(weight: np.ndarray) -> np.ndarray:
    """An ND weight (batch..., H, W), INT8 or INT32 (packed int4), in FRACTAL_NZ: element
    [h, w] at [w // C0, h // 16, h % 16, w % C0], the padding zero; what
    aclnnTransMatmulWeight stores for it (the host side of ``weight_nz``)."""
    weight = np.asarray(weight)
    if weight.dtype not in NZ_WEIGHT_DTYPES or weight.ndim < 2:
        raise ValueError(f"pack_weight_nz takes an INT8 or INT32 array of 2 or more dims, "
                         f"not {weight.dtype} of shape {list(weight.shape)}")
    *batch, cols1, rows1, _, c0 = nz_shape(weight.shape, weight.dtype)
    padded = np.zeros((*batch, rows1 * NZ_ROWS, cols1 * c0), weight.dtype)
    padded[..., :weight.shape[-2], :weight.shape[-1]] = weight
    blocks = padded.reshape(*batch, rows1, NZ_ROWS, cols1, c0)
    return np.ascontiguousarray(np.moveaxis(blocks, -2, -4))  # (.., W1, H1, 16, C0)


def unpack_weight_nz(blocks: Any, rows: int, cols: int) -> Any:
    """FRACTAL_NZ blocks (batch..., W1, H1, 16, C0) -> the ND matrix (batch..., rows, cols)
    (any array module)."""
    *batch, cols1, rows1, height, c0 = blocks.shape
    nd = blocks.swapaxes(-4, -3).swapaxes(-3, -2)  # (.., H1, 16, W1, C0)
    return nd.reshape(*batch, rows1 * height, cols1 * c0)[..., :rows, :cols]


def weight_nz(weight: np.ndarray) -> Tensor:
    """A device tensor of ``weight`` as aclnnTransMatmulWeight leaves an INT8 (or INT32
    packed int4) ND weight: view the ND shape, format FRACTAL_NZ, storage
    ``pack_weight_nz(weight)``; pass it as QuantMatmulWeightNz's x2 (ND shape (k, n), or
    (n, k) with transposeX2)."""
    weight = np.asarray(weight)
    blocks = to_device(pack_weight_nz(weight))
    handle = create_tensor(weight.shape, weight.dtype, None, 0, Format.ACL_FORMAT_FRACTAL_NZ,
                           blocks.shape, blocks.data_ptr)
    return Tensor(handle, keepalive=blocks)


def _nz_weight(c: Call) -> _Weight:
    """x2 of QuantMatmulWeightNz: checked as CANN checks it, and read from its NZ storage."""
    x2 = c.tensor("x2")
    c.check_dtype("x2", NZ_WEIGHT_DTYPES)
    if x2.meta.format != Format.ACL_FORMAT_FRACTAL_NZ:
        raise c.fail("x2", f"its format is {x2.meta.format.name}; it must be FRACTAL_NZ "
                           f"(aclnnTransMatmulWeight's layout; see weight_nz)")
    if not MIN_DIMS <= x2.ndim <= MAX_DIMS:
        raise c.fail("x2", f"its view must have {MIN_DIMS} to {MAX_DIMS} dims (the ND shape)")
    view, strides = list(x2.shape), x2.meta.strides
    transpose = bool(c["transposeX2"])
    if strides[-2] == 1 and strides[-1] == view[-2]:  # a transposed view: CANN swaps it back
        view[-2], view[-1], transpose = view[-1], view[-2], not transpose
    if 1 in view[-2:]:
        raise c.fail("x2", f"k and n must exceed 1 for the NZ layout (view {view})")
    blocks = nz_shape(tuple(view), x2.dtype)
    if math.prod(x2.meta.storage_dims) != math.prod(blocks):
        raise c.fail("x2", f"storage {list(x2.meta.storage_dims)} does not hold the NZ blocks "
                           f"{list(blocks)} of its view {view}")
    rows, cols = view[-2:]
    logical = (*view[:-1], view[-1] * (INT4_PER_INT32 if x2.dtype == INT32 else 1))
    return _Weight(logical, transpose, lambda v: unpack_weight_nz(v["x2"], rows, cols),
                   blocks)


@register("QuantMatmulWeightNz",
          "x1: tensor, x2: tensor, x1Scale: tensor?, x2Scale: tensor, yScale: tensor?, "
          "x1Offset: tensor?, x2Offset: tensor?, yOffset: tensor?, bias: tensor?, "
          "transposeX1: bool = False, transposeX2: bool = False, groupSize: int = 0, "
          "out: tensor!")
def quant_matmul_weight_nz(c: Call) -> Kernel:
    """QuantMatmulV4 on a FRACTAL_NZ x2 (see the module notes): ``out = (x1 @ x2 [+ int32
    bias]) * x2Scale [* x1Scale] [+ float bias] [+ x2Offset]``."""
    for name in NZ_ABSENT:
        if c.has(name) and c.tensor(name).numel:
            raise c.fail(name, "must be null or empty (not supported)")
    if c["groupSize"] != 0:
        raise c.fail("groupSize", "must be 0 (per-group quantization is not supported)")
    weight = _nz_weight(c)
    kernel = _quant_matmul(c, NZ_ROLES, weight)
    # phase 2 reads the storage: this call's snapshot of x2 becomes a view of its blocks, so
    # the executor bounds-checks, keeps alive and hands the kernel the NZ data (an
    # aclSetInputTensorAddr naming x2's tensor then finds its view differs: pass none)
    x2 = c.tensor("x2")
    meta = x2.meta
    x2.meta = AclTensor(weight.blocks, meta.data_type, contiguous_strides(weight.blocks),
                        meta.offset, meta.format, meta.storage_dims, meta.data)
    return kernel


# -- WeightQuantBatchMatmulV2 ---------------------------------------------------------------------
def _present(c: Call, name: str) -> bool:
    """An optional argument that is given and holds elements (see the module notes)."""
    return c.has(name) and c.tensor(name).numel > 0


def _row_parameter(c: Call, name: str, rows: tuple[int, ...], n: int) -> tuple[int, int]:
    """A (rows, n) parameter: 1-d of 1 or n, or 2-d with one of ``rows`` rows and 1 or n
    columns; returns the (rows, columns) it broadcasts as."""
    shape = c.tensor(name).shape
    if len(shape) == 1 and shape[0] in (1, n):
        return 1, shape[0]
    if len(shape) == 2 and shape[0] in rows and shape[1] in (1, n):
        return shape
    raise c.fail(name, f"must be [{n}], [1], or [{' or '.join(map(str, rows))}, {n}]")


@register("WeightQuantBatchMatmulV2",
          "x: tensor, weight: tensor, antiquantScale: tensor, "
          "antiquantOffsetOptional: tensor?, quantScaleOptional: tensor?, "
          "quantOffsetOptional: tensor?, biasOptional: tensor?, antiquantGroupSize: int = 0, "
          "y: tensor!")
def weight_quant_batch_matmul_v2(c: Call) -> Kernel:
    """``y = x @ ((weight + antiquantOffset) * antiquantScale) + bias`` (then, with a
    quantScaleOptional, quantized into INT8); x (m, k) FLOAT16/BFLOAT16, weight (k, n)
    INT8 or (k, n / 8) INT32 of packed int4. See the module notes."""
    x, w = c.tensor("x"), c.tensor("weight")
    c.check_dtype("x", ACTIVATION_DTYPES)
    c.check_dtype("weight", OPERAND_DTYPES)
    for name, tensor in (("x", x), ("weight", w)):
        if tensor.ndim != 2:
            raise c.fail(name, "must have 2 dims")
    k, n = w.shape[0], w.shape[1] * (INT4_PER_INT32 if w.dtype == INT32 else 1)
    m = x.shape[0]
    if x.shape[1] != k:
        raise c.fail("weight", f"its k ({k}) does not match x's ({x.shape[1]})")
    group = c["antiquantGroupSize"]
    if group and (group % GROUP_MULTIPLE or not GROUP_MULTIPLE <= group < k):
        raise c.fail("antiquantGroupSize", f"must be 0 or a multiple of {GROUP_MULTIPLE} in "
                                           f"[{GROUP_MULTIPLE}, k - 1 = {k - 1}]")
    groups = -(-k // group) if group else 1
    scale = c.tensor("antiquantScale")
    c.check_dtype("antiquantScale", ACTIVATION_DTYPES | ENCODED_SCALE_DTYPES)
    if scale.dtype in ACTIVATION_DTYPES and scale.dtype != x.dtype:
        raise c.fail("antiquantScale", f"dtype must equal x's ({x.dtype})")
    scale_shape = _row_parameter(c, "antiquantScale", (groups,) if group else (1,), n)
    if group and scale_shape != (groups, n):
        raise c.fail("antiquantScale", f"must be [{groups}, {n}] (one row per group of "
                                       f"{group} rows of k)")
    offset = _present(c, "antiquantOffsetOptional")
    if offset:
        c.check_dtype("antiquantOffsetOptional", ANTIQUANT_OFFSET_DTYPES)
        if c.tensor("antiquantOffsetOptional").shape != scale.shape:
            raise c.fail("antiquantOffsetOptional", f"shape must equal antiquantScale's "
                                                    f"{list(scale.shape)}")
    quant = _present(c, "quantScaleOptional")
    quant_shape = None
    if quant:
        c.check_dtype("quantScaleOptional", ENCODED_SCALE_DTYPES)
        quant_shape = _row_parameter(c, "quantScaleOptional", (1,), n)
    quant_offset = quant and _present(c, "quantOffsetOptional")
    if quant_offset:
        c.check_dtype("quantOffsetOptional", {FLOAT32})
        if c.tensor("quantOffsetOptional").shape != c.tensor("quantScaleOptional").shape:
            raise c.fail("quantOffsetOptional", "shape must equal quantScaleOptional's")
    bias = _present(c, "biasOptional")
    if bias:
        c.check_dtype("biasOptional", WQ_BIAS_DTYPES)
        _row_parameter(c, "biasOptional", (1,), n)
    dtype = INT8 if quant else x.dtype
    c.check_out("y", (m, n), dtype, exact_dtype=True)
    encoded = scale.dtype in ENCODED_SCALE_DTYPES

    def kernel(v) -> None:
        xp = array_module(v["y"])
        weight = as_array(v["weight"])
        weight = (unpack_int4(weight) if weight.dtype == INT32 else weight).astype(FLOAT32)
        factor = as_array(v["antiquantScale"])
        factor = (decode_scale(factor)[0] if encoded else factor.astype(FLOAT32)).reshape(
            scale_shape)
        if group:  # row r of k takes group r // groupSize's parameters
            rows = xp.arange(k) // group
        if offset:
            shift = as_array(v["antiquantOffsetOptional"]).astype(FLOAT32).reshape(
                scale_shape)
            weight += shift[rows] if group else shift
        weight *= factor[rows] if group else factor
        value = xp.matmul(as_array(v["x"]).astype(FLOAT32), weight)
        if bias:
            value += as_array(v["biasOptional"]).astype(FLOAT32).reshape(-1)
        if quant:
            value = value * decode_scale(as_array(v["quantScaleOptional"]))[0].reshape(
                quant_shape)
            if quant_offset:
                value += as_array(v["quantOffsetOptional"]).astype(FLOAT32).reshape(
                    quant_shape)
            value = xp.clip(xp.nan_to_num(xp.rint(value), nan=0.0), -128, 127)
        v.write("y", value)
    return kernel


@register("WeightQuantBatchMatmulV3",
          "x: tensor, weight: tensor, antiquantScale: tensor, "
          "antiquantOffsetOptional: tensor?, quantScaleOptional: tensor?, "
          "quantOffsetOptional: tensor?, biasOptional: tensor?, antiquantGroupSize: int = 0, "
          "innerPrecise: int = 0, y: tensor!")
def weight_quant_batch_matmul_v3(c: Call) -> Kernel:
    """WeightQuantBatchMatmulV2 with ``innerPrecise``: 0 (high precision) or 1 (high
    performance) selects the NPU's computation; on CPU both compute in float32."""
    if c["innerPrecise"] not in INNER_PRECISE_MODES:
        raise c.fail("innerPrecise", "must be 0 (high precision) or 1 (high performance)")
    return weight_quant_batch_matmul_v2(c)
