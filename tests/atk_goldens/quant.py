"""Goldens of the quantization family (CANN's quant/ operators): AscendQuant(V3),
AscendAntiQuant, DynamicQuant, Quantize.

The quantizers' results are integers compared exactly, so their goldens follow CANN's own
ATK goldens step by step: the arithmetic in float32 (where a float64 value would round the
other way at a halfway point), then the rounding and the saturation. int4 results are
packed eight to an int32, the first in the lowest bits (CANN's ``pack_int4_to_int32``)."""

from __future__ import annotations

import json

import numpy as np
import torch

from atk_driver import golden

INT8_RANGE = (-128, 127)
INT4_RANGE = (-8, 7)
NIBBLES = 8  # int4 values per int32
ROUNDING = {"round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
DST_INT8, DST_INT32 = 2, 3
DST_FLOAT16, DST_BFLOAT16 = 1, 27


def _f32(t) -> np.ndarray:
    return t.numpy().astype(np.float32)


def _pack(values: np.ndarray) -> np.ndarray:
    nibbles = (values.astype(np.int64) & 0xF).reshape(-1, NIBBLES)
    words = np.zeros(nibbles.shape[0], np.int64)
    for i in range(NIBBLES):
        words |= nibbles[:, i] << (4 * i)
    return words.astype(np.uint32).view(np.int32).reshape(*values.shape[:-1],
                                                          values.shape[-1] // NIBBLES)


def _unpack(words: np.ndarray) -> np.ndarray:
    shape = words.shape or (1,)
    nibbles = (words.astype(np.int64).reshape(-1, 1) >> (4 * np.arange(NIBBLES))) & 0xF
    return np.where(nibbles >= 8, nibbles - 16, nibbles).reshape(*shape[:-1],
                                                                 shape[-1] * NIBBLES)


def _saturated(values: np.ndarray, dst_type: int) -> np.ndarray:
    if dst_type == DST_INT32:
        return _pack(np.clip(values, *INT4_RANGE))
    return np.clip(values, *INT8_RANGE).astype(np.int8)


def _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, axis):
    values = _f32(x)
    factor, shift = _f32(scale), None if offset is None else _f32(offset)
    if factor.ndim == 1:
        shape = [1] * values.ndim
        shape[axis] = factor.shape[0]
        factor = factor.reshape(shape)
        shift = None if shift is None else shift.reshape(shape)
    values = values * factor
    if sqrt_mode:
        values = values * factor
    if shift is not None:
        values = values + shift
    return _saturated(ROUNDING[round_mode](values), dst_type)


@golden("AscendQuant")
def ascend_quant(x, scale, offset, sqrt_mode=False, round_mode="round", dst_type=DST_INT8):
    return _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, -1)


@golden("AscendQuantV3")
def ascend_quant_v3(x, scale, offset, sqrt_mode=False, round_mode="round", dst_type=DST_INT8,
                    axis=-1):
    return _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, axis)


def _non_bool_sqrt_mode(inputs) -> str | None:
    if not isinstance(inputs[4], bool):
        return (f"sqrtMode {inputs[4]!r}: the ATK's boundary value for a C bool (true there, "
                f"as any non-zero value) reaches the operator as that value, not a bool")
    return None


@golden("AscendAntiQuant", with_dtypes=True, skip=_non_bool_sqrt_mode)
def ascend_anti_quant(dtypes, x, scale, offset, dst_type=DST_FLOAT16, sqrt_mode=False):
    values = torch.from_numpy(_unpack(x.numpy())) if dtypes[0] == np.int32 else x
    values = values.double() + (0 if offset is None else offset)
    values = values * scale
    if sqrt_mode:
        values = values * scale
    values = values.reshape(values.shape if dtypes[0] == np.int32 or x.dim() else ())
    return _overflowing(values, dst_type)


@golden("DynamicQuant")
def dynamic_quant(x, smooth=None):
    values = _f32(x) * (1 if smooth is None else _f32(smooth))
    scale = np.abs(values).max(axis=-1, keepdims=True) / np.float32(INT8_RANGE[1])
    quantized = np.clip(np.rint(values * (np.float32(1) / scale)), *INT8_RANGE)
    return quantized.astype(np.int8), scale.reshape(scale.shape[:-1])


# -- quantized products -------------------------------------------------------------------------
SCALE_BITS = 0xFFFFE000
SCALE_FLAG = 1 << 46
OFFSET_SHIFT, OFFSET_BITS = 37, 0x1FF


@golden("TransQuantParamV2")
def trans_quant_param_v2(scale, offset=None):
    words = (np.ascontiguousarray(_f32(scale)).view(np.uint32).astype(np.int64)
             & SCALE_BITS) | SCALE_FLAG
    if offset is not None:
        nine = np.clip(np.rint(_f32(offset)), -256, 255).astype(np.int64) & OFFSET_BITS
        words = (words & 0x4000FFFFFFFF) | (nine << OFFSET_SHIFT)
    return np.broadcast_to(words, np.broadcast_shapes(words.shape, (
        () if offset is None else tuple(offset.shape))))


def _placeholder(value) -> bool:
    """The ATK's stand-in for a null optional tensor: a bool tensor of shape []."""
    return value is not None and value.dtype == np.bool_ and value.ndim == 0


def _quant_matmul(dtypes, x1, x2, scale, offset, pertoken, bias, trans_a, trans_b):
    """CANN's formulas (see ops/quant_matmul.py) in float64 after the exact product; an
    integer result rounded half to even and saturated. The result dtype is the one-shot's:
    INT8 with an offset, else BFLOAT16 when scale or bias is, else FLOAT16."""
    a, b = (torch.from_numpy(_unpack(t.numpy())) if d == np.int32 else t
            for t, d in ((x1, dtypes[0]), (x2, dtypes[1])))
    a = a.double().transpose(-1, -2) if trans_a else a.double()
    b = b.double().transpose(-1, -2) if trans_b else b.double()
    value = a @ b
    integer_bias = bias is not None and dtypes[5] == np.int32
    if integer_bias:
        value = value + bias
    value = value * scale.float().double()
    if pertoken is not None:
        value = value * pertoken[:, None]
    if bias is not None and not integer_bias:
        value = value + bias
    if offset is not None:
        value = torch.nan_to_num(value + offset, nan=0.0)
        return np.clip(np.rint(value.numpy()), *INT8_RANGE)
    return value


@golden("QuantMatmulV3", with_dtypes=True)
def quant_matmul_v3(dtypes, x1, x2, scale, offset=None, bias=None, trans_a=False,
                    trans_b=False):
    full = [*dtypes[:4], None, *dtypes[4:]]  # no per-token scale: bias is input 5 there
    return _quant_matmul(full, x1, x2, scale, offset, None, bias, trans_a, trans_b)


def _int4_packed(inputs):
    """CANN's V4 harness packs an INT32 x1 / x2 (one int4 value an element) eight to an
    int32 along the last dim (npu_convert_weight_to_int4pack): the operator's form."""
    inputs = list(inputs)
    for i in (0, 1):
        if isinstance(inputs[i], np.ndarray) and inputs[i].dtype == np.int32:
            inputs[i] = _pack(inputs[i])
    return inputs


# the ATK lists isNz (the harness's choice of x2's layout, not an aclnn argument; the values
# are the same) and the out tensor (its dtype; the one-shot infers its own) after the inputs
@golden("QuantMatmulV4", with_dtypes=True, prepare=_int4_packed,
        params=("x1", "x2", "scale", "offset", "pertokenScaleOptional", "bias", "transposeX1",
                "transposeX2", "_isNz", "out"))
def quant_matmul_v4(dtypes, x1, x2, scale, offset=None, pertoken=None, bias=None,
                    trans_a=False, trans_b=False, is_nz=False, out=None):
    return _quant_matmul(dtypes, x1, x2, scale, offset, pertoken, bias, trans_a, trans_b)


NZ_ROWS, NZ_ROW_BYTES = 16, 32  # FRACTAL_NZ: 16-row blocks of 32-byte rows
NZ_NULL = (2, 4, 5, 6, 7)  # x1Scale, yScale, x1Offset, x2Offset, yOffset


def _nz_blocks(weight: np.ndarray) -> np.ndarray:
    """An ND weight (batch..., H, W) as CANN's FRACTAL_NZ: [h, w] at [w // C0, h // 16,
    h % 16, w % C0], C0 = 32 bytes, zero padded (aclnnQuantMatmulWeightNz.md: x2 is
    (batch, n1, k1, k0 = 16, n0 = 32), or (batch, k1, n1, n0 = 16, k0 = 32) transposed)."""
    *batch, rows, cols = weight.shape
    c0 = NZ_ROW_BYTES // weight.dtype.itemsize
    blocks = np.zeros((*batch, -(-cols // c0), -(-rows // NZ_ROWS), NZ_ROWS, c0), weight.dtype)
    h, w = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    blocks[..., w // c0, h // NZ_ROWS, h % NZ_ROWS, w % c0] = weight
    return blocks


def _weight_nz(inputs):
    """CANN's harness (executor_aclnnQuantMatmulWeightNz.py) passes x1Scale, yScale,
    x1Offset, x2Offset and yOffset as null and x2 in FRACTAL_NZ (its get_format of input 1):
    x2 becomes a tensor of the ND view over NZ storage; the golden takes the ND x2 (_x2)."""
    import openacl
    from openacl.dtypes import Format
    from openacl.tensor import Tensor, create_tensor

    inputs = list(inputs)
    for i in NZ_NULL:
        inputs[i] = None
    weight = inputs[1]
    storage = openacl.to_device(_nz_blocks(weight))
    handle = create_tensor(weight.shape, weight.dtype, None, 0, Format.ACL_FORMAT_FRACTAL_NZ,
                           storage.shape, storage.data_ptr)
    inputs[1] = Tensor(handle, keepalive=storage)
    return [*inputs, weight]


@golden("QuantMatmulWeightNz", with_dtypes=True, prepare=_weight_nz,
        params=("x1", "x2", "x1Scale", "x2Scale", "yScale", "x1Offset", "x2Offset", "yOffset",
                "bias", "transposeX1", "transposeX2", "groupSize", "_x2"))
def quant_matmul_weight_nz(dtypes, x1, x2, x1_scale, x2_scale, y_scale, x1_offset, x2_offset,
                           y_offset, bias, trans_a, trans_b, group_size, x2_nd):
    """CANN's golden: ``x1 @ x2 * x2Scale + bias`` (the harness's nulls absent)."""
    full = [dtypes[0], dtypes[12], dtypes[3], dtypes[6], dtypes[2], dtypes[8]]
    return _quant_matmul(full, x1, x2_nd, x2_scale, x2_offset, x1_scale, bias, trans_a,
                         trans_b)


def _given(tensor):
    """An optional tensor with elements (the ATK passes empty ones for those left out)."""
    return tensor if tensor is not None and tensor.numel() else None


@golden("WeightQuantBatchMatmulV2", with_dtypes=True)
def weight_quant_batch_matmul_v2(dtypes, x, weight, scale, offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, group=0):
    w = torch.from_numpy(_unpack(weight.numpy())) if dtypes[1] == np.int32 else weight
    w = w.double()
    k, n = w.shape
    rows = (torch.arange(k) // group) if group else torch.zeros(k, dtype=torch.int64)
    table = lambda t: t.reshape(-1, t.shape[-1]).expand(-1, n)[rows]  # noqa: E731
    if _given(offset) is not None:
        w = w + table(offset)
    value = x @ (w * table(scale))
    if _given(bias) is not None:
        value = value + bias.reshape(-1)
    if _given(quant_scale) is not None:  # TransQuantParamV2 words: the float32 in bits 0-31
        words = quant_scale.numpy().astype(np.int64) & SCALE_BITS
        value = value * torch.from_numpy(words.astype(np.uint32).view(np.float32)).double(
            ).reshape(-1)
        if _given(quant_offset) is not None:
            value = value + quant_offset.reshape(-1)
        return np.clip(np.rint(value.numpy()), *INT8_RANGE)
    return value


@golden("WeightQuantBatchMatmulV3", with_dtypes=True)
def weight_quant_batch_matmul_v3(dtypes, x, weight, scale, offset=None, quant_scale=None,
                                 quant_offset=None, bias=None, group=0, inner_precise=0):
    return weight_quant_batch_matmul_v2(dtypes, x, weight, scale, offset, quant_scale,
                                        quant_offset, bias, group)


# -- fake quantizers ------------------------------------------------------------------------------
def _inverted_range(inputs) -> str | None:
    low, high = inputs[4], inputs[5]
    if low > high:
        return (f"quantMin {low} > quantMax {high}: documented as invalid "
                f"(ACLNN_ERR_PARAM_INVALID), which aclnn returns")
    return None


def _fake_quant(x, scale, zero, low, high, axis=None):
    """CANN's formula in float32: q = rint(x / scale) + zero; (clip(q) - zero) * scale."""
    values = _f32(x)
    shape = [1] * values.ndim
    if axis is not None and values.ndim:
        shape[axis] = -1
    scale, zero = _f32(scale).reshape(shape), _f32(zero).reshape(shape)
    quantized = np.rint(values / scale) + zero
    return ((np.clip(quantized, low, high) - zero) * scale,
            (quantized >= low) & (quantized <= high))


@golden("FakeQuantPerTensorAffineCachemask", skip=_inverted_range)
def fake_quant_per_tensor_affine_cachemask(x, scale, zero, enabled=1.0, low=-128, high=127):
    if enabled < 1:
        return x, np.ones(tuple(x.shape), bool)
    return _fake_quant(x, scale, zero, low, high)


@golden("FakeQuantPerChannelAffineCachemask", skip=_inverted_range)
def fake_quant_per_channel_affine_cachemask(x, scale, zero, axis=0, low=-128, high=127):
    return _fake_quant(x, scale, zero, low, high, axis)


def _unordered_groups(inputs) -> str | None:
    ends, rows = inputs[2], inputs[0].shape[0]
    if ends.size and (np.any(np.diff(ends) < 0) or ends[-1] != rows or ends.min() < 0):
        return (f"groupIndex {ends.tolist()} is not non-decreasing ending at S = {rows}, "
                f"which CANN requires (its executor asserts it): the result is undefined")
    return None


@golden("GroupQuant", skip=_unordered_groups)
def group_quant(x, scale, ends, offset=None, dst_type=DST_INT8):
    values, factors = _f32(x), _f32(scale)
    group = (ends.numpy()[None, :] <= np.arange(values.shape[0])[:, None]).sum(axis=1)
    values = values * factors[group]
    if offset is not None:
        values = values + _f32(offset).reshape(())
    return _saturated(np.rint(values), dst_type)


@golden("DequantBias", with_dtypes=True)
def dequant_bias(dtypes, x, weight_scale, activate_scale=None, bias=None, output_dtype=1):
    value = x.double()
    if bias is not None and dtypes[3] == np.int32:
        value = value + bias
    value = value * weight_scale
    if activate_scale is not None:
        value = value * activate_scale[:, None]
    if bias is not None and dtypes[3] != np.int32:
        value = value + bias
    return _overflowing(value, output_dtype)


def _overflowing(value, dst_type):
    """``value`` with what lies past the output dtype's largest finite value (dstType 1
    FLOAT16, 27 BFLOAT16) given rounded into it: infinite, or the largest value itself up
    to half an ulp beyond it, as rounding gives."""
    half = torch.float16 if dst_type == DST_FLOAT16 else torch.bfloat16
    beyond = value.abs() > torch.finfo(half).max
    return torch.where(beyond, value.to(half).double(), value)


@golden("Quantize", with_dtypes=True)
def quantize(dtypes, x, scales, zero_points, dtype, axis):
    """round(x / scales + zeroPoints) in float32 (CANN's golden), saturated into ``dtype``;
    scales per tensor or along ``axis``, a zero scale acting as 1; NaN is 0."""
    from openacl import dtypes as acl_dtypes

    target = np.dtype(acl_dtypes.to_numpy_dtype(dtype))
    values = _f32(x)
    shape = [1] * values.ndim
    if scales.numel() > 1:
        shape[axis] = -1
    divisor = _f32(scales).reshape(shape if scales.numel() > 1 else ())
    value = values / np.where(divisor == 0, np.float32(1), divisor)  # CANN: 0 acts as 1
    if zero_points is not None:
        points = zero_points.numpy().astype(dtypes[2]).astype(np.float32)
        value = value + points.reshape(shape if scales.numel() > 1 else ())
    info = np.iinfo(target)
    return np.clip(np.nan_to_num(np.rint(value).astype(np.float64)), info.min,
                   info.max).astype(target)


@golden("FlatQuant")
def flat_quant(x, p1, p2, clip_ratio=1.0):
    """CANN's golden: P1 @ (x @ P2) in float32 rounded to float16, each row's scale
    max |x''| / (7 / clipRatio); out = round(x'' / scale) in int4, packed into int32."""
    product = torch.matmul(p1.float(), torch.matmul(x.float(), p2.float())).half().float()
    scale = product.flatten(1).abs().max(dim=1)[0] / (7 / clip_ratio)
    quotient = (product / scale[:, None, None]).numpy()
    return _pack(np.clip(np.nan_to_num(np.rint(quotient), nan=0.0), *INT4_RANGE)), scale


# -- fused normalization + quantization (quantized_fused.py) ------------------------------------
def _rms_quant(y: torch.Tensor, scale, zero_point, div_mode: bool) -> torch.Tensor:
    """CANN's golden's quantization: float32 ``y / scale + zero_point``, round half to even,
    saturate to int8."""
    value = torch.div(y, scale.float()) if div_mode else torch.mul(y, scale.float())
    if zero_point is not None:
        value = value + zero_point.float()
    return torch.clamp(torch.round(value), *INT8_RANGE).to(torch.int8)


@golden("AddRmsNormQuant", with_dtypes=True,
        params=("x1", "x2", "gamma", "scales1", "scales2Optional", "zeroPoints1Optional",
                "zeroPoints2Optional", "axis", "epsilon", "divMode", "_kernelType"))
def add_rms_norm_quant(dtypes, x1, x2, gamma, scales1, scales2, zero_points1, zero_points2,
                       axis, epsilon, div_mode, _kernel_type):
    """CANN's ATK golden step by step: a float16 sum and normalized value rounded to float16
    (the product with gamma in float16), a bfloat16 one kept float32 inside; statistics in
    float32. (CANN's harness zeroes y2 on both sides; we check it with scales2 given.)"""
    half = dtypes[0] == np.float16
    norm_dims = tuple(range(x1.dim() - gamma.dim(), x1.dim()))
    if half:
        total = (x1.half() + x2.half()).float()
    else:
        total = x1.float() + x2.float()
    variance = torch.mean(total.double() ** 2, dim=norm_dims, keepdim=True).float() + epsilon
    rstd = (1 / torch.sqrt(variance.double())).float()  # rounded once, as the operator does
    normed = total * rstd
    y = (normed.half() * gamma.half()).float() if half else normed * gamma.float()
    y1 = _rms_quant(y, scales1, zero_points1, div_mode)
    y2 = None if scales2 is None else _rms_quant(y, scales2, zero_points2, div_mode)
    return y1, y2, total


@golden("GroupNormSiluQuant")
def group_norm_silu_quant(x, gamma, beta, quant_scale, group, eps, activate_silu):
    """CANN's formula in float64 (its harness: GroupNorm, silu, torch's qint8 quantization
    per tensor or per channel, zero point 0): round(silu / quantScale), saturated."""
    n, c = x.shape[0], x.shape[1]
    grouped = x.reshape(n, group, -1)
    mean = grouped.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt(grouped.var(-1, unbiased=False, keepdim=True) + eps)
    y = ((grouped - mean) * rstd).reshape(n, c, -1)
    if gamma is not None:
        y = y * gamma.reshape(c, 1)
    if beta is not None:
        y = y + beta.reshape(c, 1)
    if activate_silu:
        y = y * torch.sigmoid(y)
    y = torch.clamp(torch.round(y / quant_scale.reshape(-1, 1)), *INT8_RANGE)
    return y.to(torch.int8).reshape(x.shape), mean.reshape(n, group), rstd.reshape(n, group)


# -- DequantSwigluQuantV2 -------------------------------------------------------------------------
def _swiglu_groups(inputs):
    """CANN's harness: the group index written as a JSON list becomes an INT64 tensor; a
    dynamic case's quant offset is passed as null."""
    inputs = list(inputs)
    if isinstance(inputs[6], str):
        inputs[6] = np.array(json.loads(inputs[6]), np.int64)
    if inputs[8] == "dynamic":
        inputs[5] = None
    return inputs


@golden("DequantSwigluQuantV2", with_dtypes=True, prepare=_swiglu_groups,
        standard="stand_quantize")
def dequant_swiglu_quant_v2(dtypes, x, weight_scale, activation_scale, bias, quant_scale,
                            quant_offset, group_index, activate_left, quant_mode, dst_type,
                            round_mode, activate_dim, swiglu_mode, clamp_limit, glu_alpha,
                            glu_bias):
    """CANN's ATK golden, group by group in float32 in its order; the scales are checked in
    dynamic mode only. The INT8 result is judged within one quantum (CANN's quantization
    standard): torch's and numpy's float32 exp differ in the last bit, which moves about
    one value in a million across a rounding half."""
    rows = x.reshape(-1, x.shape[-1]).float()
    counts = group_index.tolist() if group_index is not None else [rows.shape[0]]
    half = rows.shape[1] // 2
    y = torch.zeros(rows.shape[0], half)
    scales = torch.zeros(rows.shape[0])

    def row_of(factor, g, width):
        if factor is None:
            return None
        factor = factor.float()
        if factor.dim() == 1 and factor.numel() != width:
            return factor[g if group_index is not None else 0].reshape(1, 1)
        return factor.reshape(-1, width)[g if factor.numel() > width else 0]

    start = 0
    for g, count in enumerate(int(n) for n in counts):
        part = rows[start:start + count]
        if dtypes[0] == np.int32:
            if bias is not None and dtypes[3] == np.int32:
                part = part + row_of(bias, g, rows.shape[1])
            part = part * row_of(weight_scale, g, rows.shape[1])
            if activation_scale is not None:
                part = part * activation_scale.float().reshape(-1, 1)[start:start + count]
            if bias is not None and dtypes[3] != np.int32:
                part = part + row_of(bias, g, rows.shape[1])
        if swiglu_mode == 1:
            gate, linear = part[:, 0::2], part[:, 1::2]
        elif activate_left or swiglu_mode in (2, 3):
            gate, linear = part[:, :half], part[:, half:]
        else:
            gate, linear = part[:, half:], part[:, :half]
        if swiglu_mode == 0:
            out = torch.nn.functional.silu(gate) * linear
        elif swiglu_mode == 3:
            out = torch.nn.functional.silu(gate).clamp(max=clamp_limit) * linear.clamp(
                -clamp_limit, clamp_limit)
        else:
            gate = gate.clamp(max=clamp_limit)
            out = gate * torch.sigmoid(glu_alpha * gate) * (
                linear.clamp(-clamp_limit, clamp_limit) + glu_bias)
        if quant_mode == "dynamic":
            if quant_scale is not None:
                out = out * row_of(quant_scale, g, half)
            largest = out.abs().amax(-1)
            scales[start:start + count] = largest / 127
            out = out * (127 / largest).unsqueeze(1)
        else:
            out = out / row_of(quant_scale, g, half)
            if quant_offset is not None:
                out = out + row_of(quant_offset, g, half)
        y[start:start + count] = torch.round(out.clamp(-128, 127))
        start += count
    shape = (*x.shape[:-1], half)
    return (y.to(torch.int8).reshape(shape),
            scales.reshape(x.shape[:-1]) if quant_mode == "dynamic" else None)
