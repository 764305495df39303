"""Quantization operators (AscendQuant, AscendQuantV3, AscendAntiQuant, DynamicQuant, the
quantized products QuantMatmulV3/V4/WeightNz and WeightQuantBatchMatmul) against
PyTorch references that follow CANN's formulas and goldens: the quantizers' arithmetic in
float32 (CANN's golden order; a float64 value could round the other way at a halfway
point), the integer results compared exactly; the dequantizer in float64, rounded once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.dtypes import Format
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from openacl.ops.quant_matmul import pack_weight_nz, unpack_weight_nz, weight_nz
from openacl.ops.quantization import pack_int4, unpack_int4
from openacl.tensor import Tensor, create_tensor

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
ROUNDING = {"round": torch.round, "floor": torch.floor, "ceil": torch.ceil,
            "trunc": torch.trunc}


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _error(fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value


def _torch_pack(values: torch.Tensor) -> np.ndarray:
    """int4 values -> int32 words, eight per word, the first in the lowest bits."""
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], -1, 8)
    words = (nibbles << (4 * torch.arange(8))).sum(-1)
    return words.numpy().astype(np.uint32).view(np.int32)


def test_int4_packing_round_trips_and_matches_cann_layout():
    values = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)
    packed = pack_int4(values)
    assert packed.dtype == np.int32 and packed.shape == (2, 1)
    assert np.array_equal(packed, _torch_pack(torch.from_numpy(values)))
    assert packed[1, 0] == 0x76543210
    assert np.array_equal(unpack_int4(packed), values)


def _quant_reference(x, scale, offset, sqrt_mode, mode, dst_type, axis=-1):
    values = to_torch(x).float()
    factor = to_torch(scale).float()
    shift = None if offset is None else to_torch(offset).float()
    if factor.dim() == 1:
        shape = [1] * values.dim()
        shape[axis] = factor.shape[0]
        factor = factor.reshape(shape)
        shift = None if shift is None else shift.reshape(shape)
    values = values * factor
    if sqrt_mode:
        values = values * factor
    if shift is not None:
        values = values + shift
    rounded = ROUNDING[mode](values)
    if dst_type == 3:
        return _torch_pack(rounded.clamp(-8, 7))
    return rounded.clamp(-128, 127).to(torch.int8).numpy()


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
@pytest.mark.parametrize("mode", list(ROUNDING))
@pytest.mark.parametrize("dst_type", [2, 3])
@pytest.mark.parametrize("sqrt_mode", [False, True])
def test_ascend_quant_matches_reference(dtype, mode, dst_type, sqrt_mode):
    rng = np.random.default_rng(1)
    x = random_array((3, 4, 16), dtype, rng, -60, 60)
    for scale_shape in [(16,), (1,), (1, 1, 16)]:
        scale = random_array(scale_shape, dtype, rng, -3, 3)
        offset = random_array(scale_shape, dtype, rng, -5, 5)
        got = openacl.ops.ascend_quant(_dev(x), _dev(scale), _dev(offset), sqrt_mode, mode,
                                       dst_type).numpy()
        want = _quant_reference(x, scale, offset, sqrt_mode, mode, dst_type)
        assert got.dtype == want.dtype and np.array_equal(got, want), (scale_shape, got, want)
    got = openacl.ops.ascend_quant(_dev(x), _dev(scale), None, sqrt_mode, mode, dst_type)
    assert np.array_equal(got.numpy(),
                          _quant_reference(x, scale, None, sqrt_mode, mode, dst_type))


def test_ascend_quant_float32_x_takes_a_half_precision_scale():
    x = random_array((5, 8), F32, np.random.default_rng(2), -9, 9)
    scale = np.full(8, 3.5, np.float16)
    got = openacl.ops.ascend_quant(_dev(x), _dev(scale), None, False, "round", 2).numpy()
    assert np.array_equal(got, _quant_reference(x, scale, None, False, "round", 2))


@pytest.mark.parametrize("axis", [-1, -2, 1, 2])
@pytest.mark.parametrize("dst_type", [2, 3])
def test_ascend_quant_v3_along_an_axis(axis, dst_type):
    rng = np.random.default_rng(3)
    x = random_array((2, 8, 16), F16, rng, -40, 40)
    size = x.shape[axis]
    for scale_shape in [(size,), (1,), tuple(size if i == axis % 3 else 1 for i in range(3))]:
        scale = random_array(scale_shape, F16, rng, 0.1, 3)
        offset = random_array(scale_shape, F16, rng, -3, 3)
        got = openacl.ops.ascend_quant_v3(_dev(x), _dev(scale), _dev(offset), True, "round",
                                          dst_type, axis).numpy()
        assert np.array_equal(got, _quant_reference(x, scale, offset, True, "round",
                                                    dst_type, axis)), scale_shape


def test_ascend_quant_saturates_and_zeroes_nan():
    x = np.array([1e6, -1e6, np.nan, 2.5, -2.5, 0.5, 1.5, np.inf], np.float32)
    got = openacl.ops.ascend_quant(_dev(x), _dev(np.ones(1, np.float32)), None, False,
                                   "round", 2).numpy()
    assert got.tolist() == [127, -128, 0, 2, -2, 0, 2, 127]
    packed = openacl.ops.ascend_quant(_dev(x), _dev(np.ones(1, np.float32)), None, False,
                                      "round", 3).numpy()
    assert unpack_int4(packed).tolist() == [7, -8, 0, 2, -2, 0, 2, 7]


def test_ascend_quant_errors():
    x, scale = _dev(np.ones((2, 8), np.float32)), _dev(np.ones(8, np.float32))
    y = openacl.empty((2, 8), np.int8)
    quant = aclnn.ascend_quant_get_workspace_size
    for args, code, name in [
        ((None, scale, None, False, "round", 2, y), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x, None, None, False, "round", 2, y), ACLNN_ERR_PARAM_NULLPTR, "'scale'"),
        ((x, scale, None, False, "round", 2, None), ACLNN_ERR_PARAM_NULLPTR, "'y'"),
        ((_dev(np.ones((2, 8), np.int32)), scale, None, False, "round", 2, y),
         ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((x, _dev(np.ones(3, np.float32)), None, False, "round", 2, y),
         ACLNN_ERR_PARAM_INVALID, "'scale'"),
        ((x, _dev(np.ones((2, 8), np.float32)), None, False, "round", 2, y),
         ACLNN_ERR_PARAM_INVALID, "'scale'"),                    # a non-1 leading dim
        ((x, scale, _dev(np.ones(8, np.float16)), False, "round", 2, y),
         ACLNN_ERR_PARAM_INVALID, "'offset'"),
        ((x, scale, None, False, "nearest", 2, y), ACLNN_ERR_PARAM_INVALID, "'roundMode'"),
        ((x, scale, None, False, "round", 29, y), ACLNN_ERR_PARAM_INVALID, "'dstType'"),
        ((x, scale, None, False, "round", 3, openacl.empty((2, 8), np.int32)),
         ACLNN_ERR_PARAM_INVALID, "'y'"),                        # must be [2, 1]
        ((_dev(np.ones((2, 6), np.float32)), _dev(np.ones(6, np.float32)), None, False,
          "round", 3, openacl.empty((2, 1), np.int32)), ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((_dev(np.ones((2, 8), np.float16)), scale, None, False, "round", 2, y),
         ACLNN_ERR_PARAM_INVALID, "'scale'"),                    # dtype differs from x's
    ]:
        error = _error(quant, *args)
        assert error.code == code and name in error.message, (args, error.message)
    error = _error(aclnn.ascend_quant_v3_get_workspace_size, _dev(np.ones((2, 3, 8),
                                                                          np.float32)),
                   scale, None, False, "round", 2, 0, openacl.empty((2, 3, 8), np.int8))
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'axis'" in error.message
    error = _error(aclnn.ascend_quant_v3_get_workspace_size, x, scale, None, False, "round", 2,
                   2, y)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'axis'" in error.message


# -- AscendAntiQuant ---------------------------------------------------------------------------
@pytest.mark.parametrize("scale_dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("dst", [(1, F16), (27, BF16)], ids=str)
@pytest.mark.parametrize("sqrt_mode", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_ascend_anti_quant_matches_torch(scale_dtype, dst, sqrt_mode, packed):
    dst_type, dtype = dst
    rng = np.random.default_rng(4)
    values = rng.integers(-8 if packed else -128, 8 if packed else 128, (3, 5, 16)).astype(
        np.int8)
    x = pack_int4(values) if packed else values
    for size in (16, 1):
        scale = random_array((size,), scale_dtype, rng, -2, 2)
        offset = random_array((size,), scale_dtype, rng, -4, 4)
        wide = (torch.from_numpy(values).double() + to_torch(offset).double()) * \
            to_torch(scale).double()
        if sqrt_mode:
            wide = wide * to_torch(scale).double()
        want = from_torch(wide.to(to_torch(np.zeros(0, dtype)).dtype))
        got = openacl.ops.ascend_anti_quant(_dev(x), _dev(scale), _dev(offset), dst_type,
                                            sqrt_mode).numpy()
        assert_close(got, want, f"anti quant {size}")
    got = openacl.ops.ascend_anti_quant(_dev(x), _dev(scale), None, dst_type, False).numpy()
    assert_close(got, from_torch((torch.from_numpy(values).double() * to_torch(
        scale).double()).to(to_torch(np.zeros(0, dtype)).dtype)))


def test_ascend_anti_quant_errors():
    x, scale = _dev(np.ones((2, 8), np.int8)), _dev(np.ones(8, np.float32))
    y = openacl.empty((2, 8), np.float16)
    anti = aclnn.ascend_anti_quant_get_workspace_size
    for args, code, name in [
        ((None, scale, None, 1, False, y), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x, None, None, 1, False, y), ACLNN_ERR_PARAM_NULLPTR, "'scale'"),
        ((_dev(np.ones((2, 8), np.float32)), scale, None, 1, False, y),
         ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((x, _dev(np.ones(8, np.float16)), None, 1, False, y), ACLNN_ERR_PARAM_INVALID,
         "'scale'"),
        ((x, _dev(np.ones(4, np.float32)), None, 1, False, y), ACLNN_ERR_PARAM_INVALID,
         "'scale'"),
        ((x, scale, _dev(np.ones(1, np.float32)), 1, False, y), ACLNN_ERR_PARAM_INVALID,
         "'offset'"),
        ((x, scale, None, 0, False, y), ACLNN_ERR_PARAM_INVALID, "'dstType'"),
        ((x, scale, None, 27, False, y), ACLNN_ERR_PARAM_INVALID, "'y'"),
        ((_dev(np.ones((2, 1), np.int32)), scale, None, 1, False, y),
         ACLNN_ERR_PARAM_INVALID, "'y'"),                         # [2, 8] int4 -> [2, 8]
    ]:
        if name == "'y'" and args[0] is not x:
            y_ok = _error(anti, args[0], scale, None, 1, False, openacl.empty((2, 1),
                                                                             np.float16))
            assert y_ok.code == code and name in y_ok.message
            continue
        error = _error(anti, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- DynamicQuant ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_dynamic_quant_matches_reference(dtype, smooth, packed):
    rng = np.random.default_rng(5)
    x = random_array((2, 3, 32), dtype, rng, -50, 50)
    scales = random_array((32,), dtype, rng, 0.5, 2) if smooth else None
    values = to_torch(x).float() * (to_torch(scales).float() if smooth else 1)
    row = values.abs().amax(-1, keepdim=True) / (7.0 if packed else 127.0)
    quantized = torch.round(values * (1 / row))
    x_dev = _dev(x)
    scale_dev = None if scales is None else _dev(scales)
    if packed:
        y = openacl.empty((2, 3, 4), np.int32)
        scale_out = openacl.empty((2, 3), np.float32)
        ws, exe = aclnn.dynamic_quant_get_workspace_size(x_dev, scale_dev, y, scale_out)
        aclnn.dynamic_quant(0, ws, exe, 0)
        want = _torch_pack(quantized.clamp(-8, 7))
    else:
        y, scale_out = openacl.ops.dynamic_quant(x_dev, scale_dev)
        want = quantized.clamp(-128, 127).to(torch.int8).numpy()
    assert np.array_equal(y.numpy(), want)
    assert_close(scale_out.numpy(), row.reshape(2, 3).numpy())


def test_dynamic_quant_zero_row_and_errors():
    x = np.zeros((2, 8), np.float16)
    x[1] = 1.0
    y, scale = openacl.ops.dynamic_quant(_dev(x), None)
    assert y.numpy()[0].tolist() == [0] * 8 and y.numpy()[1].tolist() == [127] * 8
    assert scale.numpy().tolist() == [0.0, np.float32(1 / 127)]
    x_dev = _dev(np.ones((2, 8), np.float16))
    y, s = openacl.empty((2, 8), np.int8), openacl.empty((2,), np.float32)
    fn = aclnn.dynamic_quant_get_workspace_size
    for args, code, name in [
        ((None, None, y, s), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x_dev, None, None, s), ACLNN_ERR_PARAM_NULLPTR, "'yOut'"),
        ((x_dev, None, y, None), ACLNN_ERR_PARAM_NULLPTR, "'scaleOut'"),
        ((_dev(np.ones((2, 8), np.float32)), None, y, s), ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((_dev(np.ones(8, np.float16)), None, y, s), ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((x_dev, _dev(np.ones(4, np.float16)), y, s), ACLNN_ERR_PARAM_INVALID,
         "'smoothScalesOptional'"),
        ((x_dev, None, openacl.empty((2, 8), np.int16), s), ACLNN_ERR_PARAM_INVALID,
         "'yOut'"),
        ((x_dev, None, y, openacl.empty((2, 1), np.float32)), ACLNN_ERR_PARAM_INVALID,
         "'scaleOut'"),
        ((_dev(np.ones((2, 6), np.float16)), None, openacl.empty((2, 1), np.int32), s),
         ACLNN_ERR_PARAM_INVALID, "'x'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- TransQuantParamV2, QuantMatmulV3, QuantMatmulV4 ------------------------------------------
def _encoded(scale: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    bits = torch.from_numpy(scale.astype(np.float32)).view(torch.int32).to(torch.int64)
    words = (bits & 0xFFFFE000) | (1 << 46)
    if offset is not None:
        nine = torch.from_numpy(offset).round().clamp(-256, 255).to(torch.int64) & 0x1FF
        words = (words & 0x4000FFFFFFFF) | (nine << 37)
    return words.numpy()


def test_trans_quant_param_v2_encodes_scale_and_offset():
    scale = np.array([0.5, -1.25e-3, 3.0e4], np.float32)
    offset = np.array([-300.0, 2.5, 100.4], np.float32)
    got = openacl.ops.trans_quant_param_v2(_dev(scale), _dev(offset)).numpy()
    assert got.dtype == np.int64 and np.array_equal(got, _encoded(scale, offset))
    alone = openacl.ops.trans_quant_param_v2(_dev(scale), None).numpy()
    assert np.array_equal(alone, _encoded(scale, None))
    out = openacl.empty((2, 3), np.uint64)
    broadcast = [_dev(scale.reshape(1, 3)), _dev(np.ones((2, 1), np.float32))]
    ws, exe = aclnn.trans_quant_param_v2_get_workspace_size(*broadcast, out)
    aclnn.trans_quant_param_v2(0, ws, exe, 0)
    assert out.numpy().view(np.int64)[1].tolist() == _encoded(scale, np.ones(3, np.float32)
                                                              ).tolist()
    error = _error(aclnn.trans_quant_param_v2_get_workspace_size, _dev(np.ones(3, np.float16)),
                   None, openacl.empty((3,), np.int64))
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'scale'" in error.message
    error = _error(aclnn.trans_quant_param_v2_get_workspace_size, _dev(scale), None,
                   openacl.empty((3,), np.int32))
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'out'" in error.message


def _qmm_reference(x1, x2, scale, offset, pertoken, bias, trans_a, trans_b, dtype):
    """CANN's formulas in float64 after the exact product, rounded once to ``dtype``."""
    a = torch.from_numpy(unpack_int4(x1) if x1.dtype == np.int32 else x1).double()
    b = torch.from_numpy(unpack_int4(x2) if x2.dtype == np.int32 else x2).double()
    value = (a.transpose(-1, -2) if trans_a else a) @ (b.transpose(-1, -2) if trans_b else b)
    if bias is not None and bias.dtype == np.int32:
        value = value + torch.from_numpy(bias).double()
    value = value * to_torch(scale).double()
    if pertoken is not None:
        value = value * torch.from_numpy(pertoken).double()[:, None]
    if bias is not None and bias.dtype != np.int32:
        value = value + to_torch(bias).double()
    if offset is not None:
        value = value + torch.from_numpy(offset).double()
    if dtype in (np.int8, np.int32):
        info = np.iinfo(dtype)
        return np.clip(np.rint(value.numpy()), info.min, info.max).astype(dtype)
    return _rounded(value, dtype)


def _rounded(tensor, dtype):
    return from_torch(tensor.to(to_torch(np.zeros(0, dtype)).dtype))


@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)],
                         ids=str)
@pytest.mark.parametrize("form", ["int32 bias", "float bias", "bf16 bias", "no bias"])
@pytest.mark.parametrize("scale_dtype", [F32, BF16], ids=str)
def test_quant_matmul_v3_matches_reference(trans, form, scale_dtype):
    rng = np.random.default_rng(6)
    trans_a, trans_b = trans
    x1 = rng.integers(-128, 128, (6, 40) if not trans_a else (40, 6)).astype(np.int8)
    x2 = rng.integers(-128, 128, (40, 9) if not trans_b else (9, 40)).astype(np.int8)
    scale = random_array((9,), scale_dtype, rng, 1e-4, 1e-2)
    bias = {"int32 bias": rng.integers(-500, 500, 9).astype(np.int32),
            "float bias": random_array((9,), F32, rng, -3, 3),
            "bf16 bias": random_array((9,), BF16, rng, -3, 3), "no bias": None}[form]
    got = openacl.ops.quant_matmul_v3(_dev(x1), _dev(x2), _dev(scale), None,
                                      None if bias is None else _dev(bias), trans_a,
                                      trans_b).numpy()
    dtype = BF16 if BF16 in (scale.dtype, getattr(bias, "dtype", None)) else F16
    assert_close(got, _qmm_reference(x1, x2, scale, None, None, bias, trans_a, trans_b, dtype))


@pytest.mark.parametrize("out_dtype", [np.int8, np.int32, F16, BF16], ids=str)
def test_quant_matmul_v3_out_dtypes_offset_and_batches(out_dtype):
    rng = np.random.default_rng(7)
    x1 = rng.integers(-128, 128, (2, 1, 5, 16)).astype(np.int8)
    x2 = rng.integers(-128, 128, (3, 16, 4)).astype(np.int8)      # batches broadcast
    scale = np.array([2e-3], np.float32)
    offset = np.array([1.5, -2.0, 0.25, 4.0], np.float32) if out_dtype == np.int8 else None
    out = openacl.empty((2, 3, 5, 4), out_dtype)
    tensors = [_dev(x1), _dev(x2), _dev(scale), None if offset is None else _dev(offset)]
    ws, exe = aclnn.quant_matmul_v3_get_workspace_size(*tensors, None, False, False, out)
    aclnn.quant_matmul_v3(0, ws, exe, 0)
    want = _qmm_reference(x1, x2, scale, offset, None, None, False, False, np.dtype(out_dtype))
    if np.dtype(out_dtype).kind == "i":
        assert np.array_equal(out.numpy(), want)
    else:
        assert_close(out.numpy(), want)


def test_quant_matmul_v4_per_token_int4_and_encoded_scale():
    rng = np.random.default_rng(8)
    a4, b4 = (rng.integers(-8, 8, s).astype(np.int8) for s in ((7, 32), (32, 16)))
    x1, x2 = pack_int4(a4), pack_int4(b4)
    scale = random_array((16,), F32, rng, 0.01, 0.1)
    pertoken = random_array((7,), F32, rng, 0.5, 2)
    bias = random_array((16,), BF16, rng, -1, 1)
    got = openacl.ops.quant_matmul_v4(_dev(x1), _dev(x2), _dev(scale), None, _dev(pertoken),
                                      _dev(bias), False, False).numpy()
    assert_close(got, _qmm_reference(x1, x2, scale, None, pertoken, bias, False, False, BF16))
    # a TransQuantParamV2 scale: the truncated float32 and, for an INT8 out, its offset
    x1, x2 = (rng.integers(-128, 128, s).astype(np.int8) for s in ((4, 24), (24, 6)))
    raw, shift = random_array((6,), F32, rng, 1e-3, 1e-2), np.full(6, 3.0, np.float32)
    words = openacl.ops.trans_quant_param_v2(_dev(raw), _dev(shift))
    out = openacl.empty((4, 6), np.int8)
    tensors = [_dev(x1), _dev(x2)]
    ws, exe = aclnn.quant_matmul_v4_get_workspace_size(*tensors, words, None, None, None,
                                                       False, False, out)
    aclnn.quant_matmul_v4(0, ws, exe, 0)
    truncated = (raw.view(np.uint32) & 0xFFFFE000).view(np.float32)
    assert np.array_equal(out.numpy(), _qmm_reference(x1, x2, truncated, shift, None, None,
                                                      False, False, np.dtype(np.int8)))


def test_quant_matmul_errors():
    x1, x2 = _dev(np.ones((4, 8), np.int8)), _dev(np.ones((8, 3), np.int8))
    scale = _dev(np.ones(3, np.float32))
    out = openacl.empty((4, 3), np.float16)
    fn = aclnn.quant_matmul_v4_get_workspace_size
    for args, code, name in [
        ((None, x2, scale, None, None, None, False, False, out), ACLNN_ERR_PARAM_NULLPTR,
         "'x1'"),
        ((x1, x2, None, None, None, None, False, False, out), ACLNN_ERR_PARAM_NULLPTR,
         "'scale'"),
        ((_dev(np.ones((4, 8), np.float16)), x2, scale, None, None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'x1'"),
        ((x1, _dev(np.ones((8, 3), np.int32)), scale, None, None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'x2'"),                       # dtypes differ
        ((x1, x2, scale, None, None, None, True, False, out), ACLNN_ERR_PARAM_INVALID,
         "'x2'"),                                                # k mismatch
        ((x1, x2, _dev(np.ones(2, np.float32)), None, None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'scale'"),
        ((x1, x2, _dev(np.ones(3, np.float16)), None, None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'scale'"),
        ((x1, x2, scale, _dev(np.ones(3, np.float32)), None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'offset'"),                   # only for an INT8 out
        ((x1, x2, scale, None, _dev(np.ones(3, np.float32)), None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'pertokenScaleOptional'"),
        ((x1, x2, scale, None, None, _dev(np.ones(4, np.int32)), False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'bias'"),
        ((x1, x2, scale, None, None, None, False, False, openacl.empty((4, 3), np.float32)),
         ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((x1, x2, scale, None, None, None, False, False, openacl.empty((3, 4), np.float16)),
         ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((_dev(np.ones(8, np.int8)), x2, scale, None, None, None, False, False, out),
         ACLNN_ERR_PARAM_INVALID, "'x1'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- WeightQuantBatchMatmulV2 ----------------------------------------------------------------
def _wq_reference(x, weight, scale, offset, bias, group, dtype):
    w = torch.from_numpy(unpack_int4(weight) if weight.dtype == np.int32 else weight).double()
    k, n = w.shape
    rows = torch.arange(k) // group if group else torch.zeros(k, dtype=torch.int64)

    def table(t):
        return to_torch(t).double().reshape(-1, t.shape[-1]).expand(-1, n)[rows]
    if offset is not None:
        w = w + table(offset)
    value = to_torch(x).double() @ (w * table(scale))
    if bias is not None:
        value = value + to_torch(bias).double().reshape(-1)
    return _rounded(value, dtype)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("mode", ["per tensor", "per channel", "per group", "int4 per group"])
@pytest.mark.parametrize("with_offset", [False, True])
def test_weight_quant_batch_matmul_v2_matches_reference(dtype, mode, with_offset):
    rng = np.random.default_rng(9)
    m, k, n = 5, 96, 16
    x = random_array((m, k), dtype, rng, -1, 1)
    values = rng.integers(-8 if "int4" in mode else -128, 8 if "int4" in mode else 128,
                          (k, n)).astype(np.int8)
    weight = pack_int4(values) if "int4" in mode else values
    group = 32 if "group" in mode else 0
    shape = {"per tensor": (1,), "per channel": (1, n)}.get(mode, (k // 32, n))
    scale = random_array(shape, dtype, rng, 0.001, 0.02)
    offset = random_array(shape, dtype, rng, -4, 4) if with_offset else None
    bias = random_array((n,), F32, rng, -1, 1)
    got = openacl.ops.weight_quant_batch_matmul_v2(
        _dev(x), _dev(weight), _dev(scale), None if offset is None else _dev(offset), None,
        None, _dev(bias), group).numpy()
    assert_close(got, _wq_reference(x, weight, scale, offset, bias, group, dtype), mode)


def test_weight_quant_batch_matmul_v2_quantizes_its_output():
    rng = np.random.default_rng(10)
    x = random_array((4, 32), F16, rng, -1, 1)
    weight = rng.integers(-128, 128, (32, 8)).astype(np.int8)
    scale = random_array((8,), F16, rng, 0.01, 0.05)
    words = openacl.ops.trans_quant_param_v2(_dev(np.full(8, 4.0, np.float32)), None)
    shift = np.full(8, 1.5, np.float32)
    empty = _dev(np.zeros((0, 0), np.float16))  # counts as absent
    tensors = [_dev(x), _dev(weight), _dev(scale)]
    got = openacl.ops.weight_quant_batch_matmul_v2(*tensors, empty, words, _dev(shift), None, 0)
    dequantized = _wq_reference(x, weight, scale, None, None, 0, F32).astype(np.float64)
    want = np.clip(np.rint(dequantized * 4.0 + 1.5), -128, 127).astype(np.int8)
    assert got.numpy().dtype == np.int8
    assert np.abs(got.numpy().astype(int) - want).max() <= 1  # float32 vs float64 rounding


def test_weight_quant_batch_matmul_v2_errors():
    x, w = _dev(np.ones((4, 64), np.float16)), _dev(np.ones((64, 8), np.int8))
    scale = _dev(np.ones(8, np.float16))
    y = openacl.empty((4, 8), np.float16)
    fn = aclnn.weight_quant_batch_matmul_v2_get_workspace_size
    for args, code, name in [
        ((None, w, scale, None, None, None, None, 0, y), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x, w, None, None, None, None, None, 0, y), ACLNN_ERR_PARAM_NULLPTR,
         "'antiquantScale'"),
        ((_dev(np.ones((4, 64), np.float32)), w, scale, None, None, None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((x, _dev(np.ones((64, 8), np.float16)), scale, None, None, None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'weight'"),
        ((x, _dev(np.ones((32, 8), np.int8)), scale, None, None, None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'weight'"),
        ((x, w, _dev(np.ones(8, BF16)), None, None, None, None, 0, y), ACLNN_ERR_PARAM_INVALID,
         "'antiquantScale'"),
        ((x, w, _dev(np.ones(3, np.float16)), None, None, None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'antiquantScale'"),
        ((x, w, scale, _dev(np.ones(1, np.float16)), None, None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'antiquantOffsetOptional'"),
        ((x, w, scale, None, None, None, None, 48, y), ACLNN_ERR_PARAM_INVALID,
         "'antiquantGroupSize'"),
        ((x, w, scale, None, None, None, None, 32, y), ACLNN_ERR_PARAM_INVALID,
         "'antiquantScale'"),                                    # per group needs [2, 8]
        ((x, w, scale, None, _dev(np.ones(8, np.float32)), None, None, 0, y),
         ACLNN_ERR_PARAM_INVALID, "'quantScaleOptional'"),
        ((x, w, scale, None, None, None, _dev(np.ones(8, np.int32)), 0, y),
         ACLNN_ERR_PARAM_INVALID, "'biasOptional'"),
        ((x, w, scale, None, None, None, None, 0, openacl.empty((4, 8), np.int8)),
         ACLNN_ERR_PARAM_INVALID, "'y'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- FakeQuantPerTensorAffineCachemask, FakeQuantPerChannelAffineCachemask ----------------------
@pytest.mark.parametrize("dtype", [F16, F32], ids=str)
def test_fake_quant_per_tensor_matches_torch(dtype):
    x = random_array((3, 4, 5), dtype, np.random.default_rng(11), -6, 6)
    got, mask = openacl.ops.fake_quant_per_tensor_affine_cachemask(
        _dev(x), _dev(np.array([0.05], dtype)), _dev(np.array([7], np.int32)), 1.0, -64, 63)
    want, want_mask = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(
        to_torch(x).float(), float(dtype.type(0.05)), 7, -64, 63)
    assert_close(got.numpy(), _rounded(want.double(), dtype))
    assert np.array_equal(mask.numpy(), want_mask.numpy())
    copy, everything = openacl.ops.fake_quant_per_tensor_affine_cachemask(
        _dev(x), _dev(np.array([0.05], dtype)), _dev(np.array([7], np.int32)), 0.5, -64, 63)
    assert np.array_equal(copy.numpy(), x) and everything.numpy().all()


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_fake_quant_per_channel_matches_torch(axis):
    x = random_array((3, 4, 5), F32, np.random.default_rng(12), -6, 6)
    size = x.shape[axis]
    scale = np.linspace(0.02, 0.2, size).astype(np.float32)
    zero = np.arange(size, dtype=np.int32) - 1
    got, mask = openacl.ops.fake_quant_per_channel_affine_cachemask(
        _dev(x), _dev(scale), _dev(zero), axis, -20, 20)
    want, want_mask = torch.ops.aten.fake_quantize_per_channel_affine_cachemask(
        to_torch(x), torch.from_numpy(scale), torch.from_numpy(zero), axis % 3, -20, 20)
    assert_close(got.numpy(), want.numpy())
    assert np.array_equal(mask.numpy(), want_mask.numpy())


def test_fake_quant_errors():
    x = _dev(np.ones((2, 3), np.float32))
    one, zero = _dev(np.ones(1, np.float32)), _dev(np.zeros(1, np.int32))
    outs = [openacl.empty((2, 3), np.float32), openacl.empty((2, 3), np.bool_)]
    tensor_fn = aclnn.fake_quant_per_tensor_affine_cachemask_get_workspace_size
    for args, code, name in [
        ((None, one, zero, 1.0, 0, 9, *outs), ACLNN_ERR_PARAM_NULLPTR, "'self'"),
        ((_dev(np.ones((2, 3), np.int32)), one, zero, 1.0, 0, 9, *outs),
         ACLNN_ERR_PARAM_INVALID, "'self'"),
        ((x, _dev(np.ones(2, np.float32)), zero, 1.0, 0, 9, *outs), ACLNN_ERR_PARAM_INVALID,
         "'scale'"),
        ((x, one, _dev(np.zeros(1, np.float32)), 1.0, 0, 9, *outs), ACLNN_ERR_PARAM_INVALID,
         "'zeroPoint'"),
        ((x, one, zero, 1.0, 9, 0, *outs), ACLNN_ERR_PARAM_INVALID, "'quantMin'"),
        ((x, one, zero, 1.0, 0, 9, outs[0], openacl.empty((2, 3), np.int8)),
         ACLNN_ERR_PARAM_INVALID, "'mask'"),
    ]:
        error = _error(tensor_fn, *args)
        assert error.code == code and name in error.message, (args, error.message)
    channel_fn = aclnn.fake_quant_per_channel_affine_cachemask_get_workspace_size
    scale3, zero3 = _dev(np.ones(3, np.float32)), _dev(np.zeros(3, np.int32))
    error = _error(channel_fn, x, scale3, zero3, 2, 0, 9, *outs)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'axis'" in error.message
    error = _error(channel_fn, x, scale3, zero3, 0, 0, 9, *outs)   # dim 0 has size 2
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'scale'" in error.message


# -- GroupQuant, DequantBias ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
@pytest.mark.parametrize("dst_type", [2, 3])
def test_group_quant_matches_reference(dtype, dst_type):
    rng = np.random.default_rng(13)
    x = random_array((10, 16), dtype, rng, -30, 30)
    scale = random_array((4, 16), dtype, rng, 0.05, 2)
    ends = np.array([3, 3, 7, 10], np.int64)           # an empty group included
    offset = random_array((1,), dtype, rng, -2, 2)
    got = openacl.ops.group_quant(_dev(x), _dev(scale), _dev(ends), _dev(offset),
                                  dst_type).numpy()
    group = np.searchsorted(ends, np.arange(10), side="right")
    values = to_torch(x).float() * to_torch(scale).float()[torch.from_numpy(group)] + \
        to_torch(offset).float()
    rounded = torch.round(values)
    want = _torch_pack(rounded.clamp(-8, 7)) if dst_type == 3 else \
        rounded.clamp(-128, 127).to(torch.int8).numpy()
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bias_dtype", [None, np.dtype(np.int32), F32, F16, BF16], ids=str)
@pytest.mark.parametrize("dst", [(1, F16), (27, BF16)], ids=str)
def test_dequant_bias_matches_torch(bias_dtype, dst):
    rng = np.random.default_rng(14)
    x = rng.integers(-5000, 5000, (6, 8)).astype(np.int32)
    weight_scale = random_array((8,), F32 if dst[0] == 1 else BF16, rng, 1e-3, 1e-2)
    activate = random_array((6,), F32, rng, 0.5, 2)
    bias = None if bias_dtype is None else (
        rng.integers(-50, 50, 8).astype(np.int32) if bias_dtype == np.int32 else
        random_array((8,), bias_dtype, rng, -3, 3))
    got = openacl.ops.dequant_bias(_dev(x), _dev(weight_scale), _dev(activate),
                                   None if bias is None else _dev(bias), dst[0]).numpy()
    value = torch.from_numpy(x).double()
    if bias is not None and bias.dtype == np.int32:
        value = value + torch.from_numpy(bias).double()
    value = value * to_torch(weight_scale).double() * torch.from_numpy(activate).double()[:, None]
    if bias is not None and bias.dtype != np.int32:
        value = value + to_torch(bias).double()
    assert_close(got, _rounded(value, dst[1]))


def test_group_quant_and_dequant_bias_errors():
    x, scale = _dev(np.ones((4, 8), np.float32)), _dev(np.ones((2, 8), np.float32))
    ends, y = _dev(np.array([2, 4], np.int64)), openacl.empty((4, 8), np.int8)
    fn = aclnn.group_quant_get_workspace_size
    for args, code, name in [
        ((None, scale, ends, None, 2, y), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x, scale, None, None, 2, y), ACLNN_ERR_PARAM_NULLPTR, "'groupIndex'"),
        ((x, _dev(np.ones((2, 4), np.float32)), ends, None, 2, y), ACLNN_ERR_PARAM_INVALID,
         "'scale'"),
        ((x, scale, _dev(np.array([4], np.int64)), None, 2, y), ACLNN_ERR_PARAM_INVALID,
         "'groupIndex'"),
        ((x, scale, _dev(np.array([2, 4], np.float32)), None, 2, y), ACLNN_ERR_PARAM_INVALID,
         "'groupIndex'"),
        ((x, scale, ends, _dev(np.ones(2, np.float32)), 2, y), ACLNN_ERR_PARAM_INVALID,
         "'offsetOptional'"),
        ((x, scale, ends, None, 29, y), ACLNN_ERR_PARAM_INVALID, "'dstType'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)
    xi, ws = _dev(np.ones((4, 8), np.int32)), _dev(np.ones(8, np.float32))
    out = openacl.empty((4, 8), np.float16)
    fn = aclnn.dequant_bias_get_workspace_size
    for args, code, name in [
        ((None, ws, None, None, 1, out), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((x, ws, None, None, 1, out), ACLNN_ERR_PARAM_INVALID, "'x'"),
        ((xi, _dev(np.ones(4, np.float32)), None, None, 1, out), ACLNN_ERR_PARAM_INVALID,
         "'weightScale'"),
        ((xi, ws, _dev(np.ones(8, np.float32)), None, 1, out), ACLNN_ERR_PARAM_INVALID,
         "'activateScaleOptional'"),
        ((xi, ws, None, _dev(np.ones(8, np.int8)), 1, out), ACLNN_ERR_PARAM_INVALID,
         "'biasOptional'"),
        ((xi, ws, None, None, 0, out), ACLNN_ERR_PARAM_INVALID, "'outputDtype'"),
        ((xi, ws, None, None, 27, out), ACLNN_ERR_PARAM_INVALID, "'out'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- Quantize: CANN's dtype combinations -------------------------------------------------------
def test_quantize_mixes_float_dtypes_and_treats_a_zero_scale_as_one():
    """CANN's aclnnQuantize: x and scales combine freely unless one of scales / zeroPoints
    is BFLOAT16 (then all three are); a scale of 0 acts as 1 (no inf or NaN)."""
    x = np.array([[1.25, -2.5, 3.5], [0.5, 7.0, -9.0]], np.float16)
    scales = np.array([0.5, 0.0, 2.0], np.float32)
    got = openacl.ops.quantize(_dev(x), _dev(scales), None, dtype=np.int8, axis=1).numpy()
    divisor = torch.tensor([0.5, 1.0, 2.0])
    want = torch.round(torch.from_numpy(x.astype(np.float32)) / divisor).to(torch.int8).numpy()
    assert np.array_equal(got, want)
    mixed = openacl.ops.quantize(_dev(x.astype(BF16)), _dev(np.array([0.25], np.float16)),
                                 None, dtype=np.int8, axis=0).numpy()
    assert np.array_equal(mixed, np.clip(np.rint(x.astype(np.float32) / 0.25), -128, 127))
    error = _error(aclnn.quantize_get_workspace_size, _dev(x), _dev(np.ones(3, BF16)), None,
                   np.int8, 1, openacl.empty((2, 3), np.int8))
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'scales'" in error.message


# -- FlatQuant ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_flat_quant_matches_torch(dtype, ratio):
    rng = np.random.default_rng(19)
    x = random_array((5, 4, 16), dtype, rng, -3, 3)
    p1, p2 = random_array((4, 4), dtype, rng, -1, 1), random_array((16, 16), dtype, rng, -1, 1)
    out, scale = openacl.ops.flat_quant(_dev(x), _dev(p1), _dev(p2), ratio)
    product = (to_torch(p1).float() @ (to_torch(x).float() @ to_torch(p2).float())).half(
        ).float()
    want_scale = product.flatten(1).abs().amax(1) / (7 / ratio)
    assert_close(scale.numpy(), want_scale.numpy())
    want = torch.round(product / want_scale[:, None, None]).clamp(-8, 7)
    got = unpack_int4(out.numpy()).astype(np.int64)
    assert out.numpy().shape == (5, 4, 2) and np.abs(got - want.numpy()).max() <= 1


def test_flat_quant_errors():
    x, p1, p2 = (_dev(np.ones(s, np.float16)) for s in ((2, 4, 16), (4, 4), (16, 16)))
    outs = [openacl.empty((2, 4, 2), np.int32), openacl.empty((2,), np.float32)]
    fn = aclnn.flat_quant_get_workspace_size
    for args, code, name in [
        ((None, p1, p2, 1.0, *outs), ACLNN_ERR_PARAM_NULLPTR, "'x'"),
        ((_dev(np.ones((2, 4, 16), np.float32)), p1, p2, 1.0, *outs), ACLNN_ERR_PARAM_INVALID,
         "'x'"),
        ((x, _dev(np.ones((3, 3), np.float16)), p2, 1.0, *outs), ACLNN_ERR_PARAM_INVALID,
         "'kroneckerP1'"),
        ((x, p1, _dev(np.ones((16, 16), BF16)), 1.0, *outs), ACLNN_ERR_PARAM_INVALID,
         "'kroneckerP2'"),
        ((x, p1, p2, 0.0, *outs), ACLNN_ERR_PARAM_INVALID, "'clipRatio'"),
        ((x, p1, p2, 1.0, openacl.empty((2, 4, 16), np.int8), outs[1]),
         ACLNN_ERR_PARAM_INVALID, "'out'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


def test_weight_quant_batch_matmul_v3_takes_inner_precise():
    rng = np.random.default_rng(20)
    x = random_array((3, 64), F16, rng, -1, 1)
    weight = rng.integers(-128, 128, (64, 8)).astype(np.int8)
    scale = random_array((8,), F16, rng, 0.01, 0.05)
    want = _wq_reference(x, weight, scale, None, None, 0, F16)
    for mode in (0, 1):
        got = openacl.ops.weight_quant_batch_matmul_v3(_dev(x), _dev(weight), _dev(scale), None,
                                                       None, None, None, 0, mode).numpy()
        assert_close(got, want)
    error = _error(aclnn.weight_quant_batch_matmul_v3_get_workspace_size, _dev(x),
                   _dev(weight), _dev(scale), None, None, None, None, 0, 2,
                   openacl.empty((3, 8), np.float16))
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'innerPrecise'" in error.message


# -- QuantMatmulWeightNz --------------------------------------------------------------------------
def _nz_pack(weight: np.ndarray) -> np.ndarray:
    """The test's own FRACTAL_NZ packing, element by element from CANN's doc: a view of
    (H, W) -> (W1, H1, 16, C0) blocks, [h, w] at [w // C0, h // 16, h % 16, w % C0], C0 = 32
    bytes (32 INT8, 8 INT32), the padding zero."""
    *batch, rows, cols = weight.shape
    c0 = 32 // weight.dtype.itemsize
    out = np.zeros((*batch, -(-cols // c0), -(-rows // 16), 16, c0), weight.dtype)
    for h in range(rows):
        for w in range(cols):
            out[..., w // c0, h // 16, h % 16, w % c0] = weight[..., h, w]
    return out


def _nz_tensor(weight: np.ndarray, blocks: np.ndarray | None = None,
               fmt=Format.ACL_FORMAT_FRACTAL_NZ, view=None, strides=None) -> Tensor:
    """A device tensor as aclnnTransMatmulWeight leaves x2: ND view, NZ storage."""
    storage = openacl.to_device(_nz_pack(weight) if blocks is None else blocks)
    handle = create_tensor(weight.shape if view is None else view, weight.dtype, strides, 0,
                           fmt, storage.shape, storage.data_ptr)
    return Tensor(handle, keepalive=storage)


def test_nz_packing_matches_the_documented_layout():
    rng = np.random.default_rng(11)
    w8 = rng.integers(-128, 128, (2, 40, 50)).astype(np.int8)
    assert pack_weight_nz(w8).shape == (2, 2, 3, 16, 32)          # (batch, n1, k1, 16, 32)
    assert np.array_equal(pack_weight_nz(w8), _nz_pack(w8))
    assert np.array_equal(unpack_weight_nz(pack_weight_nz(w8), 40, 50), w8)
    w32 = pack_int4(rng.integers(-8, 8, (17, 72)).astype(np.int8))  # (17, 9) words: C0 = 8
    assert pack_weight_nz(w32).shape == (2, 2, 16, 8)
    assert np.array_equal(pack_weight_nz(w32), _nz_pack(w32))


@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)],
                         ids=str)
@pytest.mark.parametrize("form", ["int32 bias", "bf16 bias", "per-token", "encoded int8"])
def test_quant_matmul_weight_nz_matches_reference(trans, form):
    rng = np.random.default_rng(12)
    trans_a, trans_b = trans
    m, k, n = 5, 40, 50                               # k and n not multiples of 16 / 32
    x1 = rng.integers(-128, 128, (2, m, k) if not trans_a else (2, k, m)).astype(np.int8)
    x2 = rng.integers(-128, 128, (k, n) if not trans_b else (n, k)).astype(np.int8)
    scale = random_array((n,), F32, rng, 1e-4, 1e-2)
    pertoken = bias = offset = None
    if form == "int32 bias":
        bias = rng.integers(-500, 500, n).astype(np.int32)
    elif form == "bf16 bias":
        bias = random_array((n,), BF16, rng, -3, 3)
    elif form == "per-token":
        pertoken = random_array((m,), F32, rng, 0.5, 2)
    args = dict(x1=_dev(x1), x2=_nz_tensor(x2), x2Scale=_dev(scale),
                x1Scale=None if pertoken is None else _dev(pertoken),
                bias=None if bias is None else _dev(bias), transposeX1=trans_a,
                transposeX2=trans_b)
    if form == "encoded int8":
        offset = np.full(n, -3.0, np.float32)
        args["x2Scale"] = openacl.ops.trans_quant_param_v2(_dev(scale), None)
        args["x2Offset"] = _dev(offset)
        scale = (scale.view(np.uint32) & 0xFFFFE000).view(np.float32)
    got = openacl.ops.quant_matmul_weight_nz(**args).numpy()
    dtype = np.dtype(np.int8) if offset is not None else BF16 if bias is not None and \
        bias.dtype == BF16 else F16
    want = _qmm_reference(x1, x2, scale, offset, pertoken, bias, trans_a, trans_b, dtype)
    if dtype == np.int8:
        assert np.array_equal(got, want)
    else:
        assert_close(got, want)


def test_quant_matmul_weight_nz_int4_batches_and_the_two_phase_api():
    rng = np.random.default_rng(13)
    a4 = rng.integers(-8, 8, (3, 1, 6, 64)).astype(np.int8)
    b4 = rng.integers(-8, 8, (2, 64, 72)).astype(np.int8)
    x1, x2 = pack_int4(a4), pack_int4(b4)              # x2 (2, 64, 9) INT32: C0 = 8 words
    scale = random_array((72,), F32, rng, 0.01, 0.1)
    out = openacl.empty((3, 2, 6, 72), np.float16)
    tensors = [_dev(x1), _nz_tensor(x2), None, _dev(scale)]     # alive until phase 2
    ws, exe = aclnn.quant_matmul_weight_nz_get_workspace_size(
        *tensors, None, None, None, None, None, False, False, 0, out)
    aclnn.quant_matmul_weight_nz(0, ws, exe, 0)
    assert_close(out.numpy(), _qmm_reference(x1, x2, scale, None, None, None, False, False,
                                             F16))
    # a transposed view of an NZ (n, k) weight: CANN swaps it back and flips transposeX2
    w = rng.integers(-128, 128, (48, 40)).astype(np.int8)          # (n, k)
    view = _nz_tensor(w, view=(40, 48), strides=(1, 40))
    x1 = rng.integers(-128, 128, (5, 40)).astype(np.int8)
    got = openacl.ops.quant_matmul_weight_nz(_dev(x1), view, x2Scale=_dev(scale[:48]),
                                             transposeX2=False).numpy()
    assert_close(got, _qmm_reference(x1, w, scale[:48], None, None, None, False, True, F16))
    # the library's own helper gives the same tensor
    got = openacl.ops.quant_matmul_weight_nz(_dev(x1), weight_nz(w), x2Scale=_dev(scale[:48]),
                                             transposeX2=True).numpy()
    assert_close(got, _qmm_reference(x1, w, scale[:48], None, None, None, False, True, F16))


def test_quant_matmul_weight_nz_errors():
    rng = np.random.default_rng(14)
    w = rng.integers(-4, 4, (40, 48)).astype(np.int8)
    x1, x2 = _dev(np.ones((4, 40), np.int8)), _nz_tensor(w)
    scale = _dev(np.ones(48, np.float32))
    out = openacl.empty((4, 48), np.float16)
    fn = aclnn.quant_matmul_weight_nz_get_workspace_size

    def call(**changes):
        args = dict(x1=x1, x2=x2, x1Scale=None, x2Scale=scale, yScale=None, x1Offset=None,
                    x2Offset=None, yOffset=None, bias=None, transposeX1=False,
                    transposeX2=False, groupSize=0, out=out)
        args.update(changes)
        return _error(fn, *args.values())

    one = _dev(np.ones(48, np.float32))
    for changes, code, name in [
        (dict(x1=None), ACLNN_ERR_PARAM_NULLPTR, "'x1'"),
        (dict(x2=None), ACLNN_ERR_PARAM_NULLPTR, "'x2'"),
        (dict(x2Scale=None), ACLNN_ERR_PARAM_NULLPTR, "'x2Scale'"),
        (dict(out=None), ACLNN_ERR_PARAM_NULLPTR, "'out'"),
        (dict(x2=_dev(w)), ACLNN_ERR_PARAM_INVALID, "'x2'"),             # ND, not NZ
        (dict(x2=_nz_tensor(w.astype(np.float16))), ACLNN_ERR_PARAM_INVALID, "'x2'"),
        (dict(x2=_nz_tensor(w, view=(40 * 48,), strides=(1,))), ACLNN_ERR_PARAM_INVALID,
         "'x2'"),                                                        # a 1-d view
        (dict(x2=_nz_tensor(w, _nz_pack(w)[:, :2])), ACLNN_ERR_PARAM_INVALID, "'x2'"),
        (dict(x2=_nz_tensor(w[:, :1].copy())), ACLNN_ERR_PARAM_INVALID, "'x2'"),  # n == 1
        (dict(x1=_dev(np.ones((4, 32), np.int8))), ACLNN_ERR_PARAM_INVALID, "'x2'"),  # k
        (dict(x1=_dev(np.ones((4, 40), np.float16))), ACLNN_ERR_PARAM_INVALID, "'x1'"),
        (dict(x1=_dev(np.ones((4, 5), np.int32))), ACLNN_ERR_PARAM_INVALID, "'x2'"),  # dtypes
        (dict(x2Scale=_dev(np.ones(48, np.float16))), ACLNN_ERR_PARAM_INVALID, "'x2Scale'"),
        (dict(x2Scale=_dev(np.ones(5, np.float32))), ACLNN_ERR_PARAM_INVALID, "'x2Scale'"),
        (dict(x1Scale=_dev(np.ones(3, np.float32))), ACLNN_ERR_PARAM_INVALID, "'x1Scale'"),
        (dict(x2Offset=one), ACLNN_ERR_PARAM_INVALID, "'x2Offset'"),    # FLOAT16 out
        (dict(yScale=_dev(np.ones((1, 48), np.int64))), ACLNN_ERR_PARAM_INVALID, "'yScale'"),
        (dict(x1Offset=one), ACLNN_ERR_PARAM_INVALID, "'x1Offset'"),
        (dict(yOffset=one), ACLNN_ERR_PARAM_INVALID, "'yOffset'"),
        (dict(groupSize=32), ACLNN_ERR_PARAM_INVALID, "'groupSize'"),
        (dict(bias=_dev(np.ones(40, np.int32))), ACLNN_ERR_PARAM_INVALID, "'bias'"),
        (dict(out=openacl.empty((4, 48), np.float32)), ACLNN_ERR_PARAM_INVALID, "'out'"),
        (dict(out=openacl.empty((4, 64), np.float16)), ACLNN_ERR_PARAM_INVALID, "'out'"),
    ]:
        error = call(**changes)
        assert error.code == code and name in error.message, (changes, error.message)
    # empty yScale / x1Offset / yOffset count as null, as CANN reads them
    empty = _dev(np.ones(0, np.float32))
    ws, exe = fn(x1, x2, None, scale, empty, empty, None, empty, None, False, False, 0, out)
    aclnn.quant_matmul_weight_nz(0, ws, exe, 0)
    assert_close(out.numpy(), _qmm_reference(np.ones((4, 40), np.int8), w,
                                             np.ones(48, np.float32), None, None, None,
                                             False, False, F16))
