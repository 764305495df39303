"""AddRmsNormQuant against a torch reference that follows CANN's formula and its golden's
intermediate precision (float16 sums and products rounded to float16; statistics and
quantization in float32); the INT8 results compared exactly, xOut as CANN's standard says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close, random_array, to_torch
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

F16, F32, I32 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return None if array is None else openacl.to_device(np.asarray(array))


def _quant(y, scale, zero, div_mode):
    value = y / to_torch(scale).float() if div_mode else y * to_torch(scale).float()
    if zero is not None:
        value = value + to_torch(zero).float()
    return torch.clamp(torch.round(value), -128, 127).to(torch.int8).numpy()


def _reference(x1, x2, gamma, s1, s2, z1, z2, eps, div_mode):
    half = x1.dtype == F16
    a, b = to_torch(x1), to_torch(x2)
    total = (a + b).float() if half else a.float() + b.float()
    dims = tuple(range(x1.ndim - gamma.ndim, x1.ndim))
    variance = torch.mean(total.double() ** 2, dim=dims, keepdim=True).float() + eps
    normed = total * (1 / torch.sqrt(variance.double())).float()
    g = to_torch(gamma)
    y = (normed.half() * g.half()).float() if half else normed * g.float()
    y2 = None if s2 is None else _quant(y, s2, z2, div_mode)
    return _quant(y, s1, z1, div_mode), y2, total.double().numpy()


def _inputs(dtype, scale_dtype, zero_dtype, shape=(3, 5, 16), norm=(16,), seed=0):
    rng = np.random.default_rng(seed)
    x1, x2 = (random_array(shape, dtype, rng, -5, 5) for _ in range(2))
    gamma = random_array(norm, dtype, rng, -5, 5)
    s1 = random_array(norm, scale_dtype, rng, 0.05, 0.5)
    s2 = random_array(norm, scale_dtype, rng, -0.5, -0.05)
    if zero_dtype == I32:
        z1, z2 = (rng.integers(-5, 5, norm).astype(I32) for _ in range(2))
    else:
        z1, z2 = (random_array(norm, zero_dtype, rng, -5, 5) for _ in range(2))
    return x1, x2, gamma, s1, s2, z1, z2


@pytest.mark.parametrize("dtype,scale_dtype,zero_dtype", [
    (F16, F32, I32), (BF16, BF16, BF16), (F32, F32, F32), (F16, F16, F16), (BF16, F32, I32)],
    ids=str)
@pytest.mark.parametrize("div_mode", [True, False])
def test_add_rms_norm_quant_matches_the_reference(dtype, scale_dtype, zero_dtype, div_mode):
    args = _inputs(dtype, scale_dtype, zero_dtype)
    y1, y2, x = openacl.ops.add_rms_norm_quant(*map(_dev, args), -1, 1e-6, div_mode)
    want1, want2, want_x = _reference(*args, 1e-6, div_mode)
    assert y1.numpy().dtype == np.int8
    assert np.array_equal(y1.numpy(), want1) and np.array_equal(y2.numpy(), want2)
    assert x.numpy().dtype == dtype
    assert_close(x.numpy(), want_x.astype(dtype))


def test_add_rms_norm_quant_normalizes_over_all_of_gammas_dims():
    args = _inputs(F32, F32, None, shape=(2, 3, 4, 8), norm=(4, 8))
    args = args[:5] + (None, None)
    y1, y2, _ = openacl.ops.add_rms_norm_quant(*map(_dev, args), -1, 1e-6, True)
    want1, want2, _ = _reference(*args, 1e-6, True)
    assert np.array_equal(y1.numpy(), want1) and np.array_equal(y2.numpy(), want2)


def test_add_rms_norm_quant_leaves_y2_alone_without_scales2():
    x1, x2, gamma, s1, _, z1, _ = _inputs(F16, F32, I32)
    y1 = openacl.empty(x1.shape, np.int8)
    y2 = openacl.to_device(np.full(x1.shape, 7, np.int8))
    x = openacl.empty(x1.shape, F16)
    inputs = [_dev(a) for a in (x1, x2, gamma, s1)]  # held until the kernel ran
    zero = _dev(z1)
    with openacl.Stream() as stream:
        size, executor = openacl.aclnn.add_rms_norm_quant_get_workspace_size(
            *inputs, None, zero, None, -1, 1e-6, True, y1, y2, x)
        openacl.aclnn.add_rms_norm_quant(0, size, executor, stream)
        stream.synchronize()
    assert np.all(y2.numpy() == 7)
    assert np.array_equal(y1.numpy(), _reference(x1, x2, gamma, s1, None, z1, None, 1e-6,
                                                 True)[0])


def _error(*args) -> AclError:
    with pytest.raises(AclError) as info:
        openacl.ops.add_rms_norm_quant(*args)
    return info.value


def test_add_rms_norm_quant_refuses_bad_arguments():
    x1, x2, gamma, s1, s2, z1, z2 = map(_dev, _inputs(F16, F32, I32))
    err = _error(_dev(np.zeros((3, 5, 16), np.int32)), x2, gamma, s1, s2, z1, z2)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'x1'" in err.message
    err = _error(x1, _dev(np.zeros((3, 5, 16), BF16)), gamma, s1, s2, z1, z2)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'x2'" in err.message
    err = _error(x1, x2, _dev(np.ones(8, F16)), s1, s2, z1, z2)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'gamma'" in err.message
    err = _error(x1, x2, gamma, s1, _dev(np.ones(16, BF16)), z1, z2)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'scales2Optional'" in err.message
    err = _error(x1, x2, gamma, s1, s2, z1, _dev(np.ones(16, F32)))
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'zeroPoints2Optional'" in err.message
    err = _error(x1, x2, gamma, s1, s2, _dev(np.ones(4, I32)), z2)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'zeroPoints1Optional'" in err.message
    err = _error(x1, x2, gamma, None, s2, z1, z2)
    assert err.code == ACLNN_ERR_PARAM_NULLPTR and "'scales1'" in err.message


# -- GroupNormSiluQuant ------------------------------------------------------------------------
def _group_reference(x, gamma, beta, scale, group, eps):
    t = to_torch(x).double()
    n, c = x.shape[:2]
    y = torch.nn.functional.group_norm(t, group, None if gamma is None else to_torch(
        gamma).double(), None if beta is None else to_torch(beta).double(), eps)
    y = torch.nn.functional.silu(y).reshape(n, c, -1)
    q = torch.clamp(torch.round(y / to_torch(scale).double().reshape(-1, 1)), -128, 127)
    grouped = t.reshape(n, group, -1)
    rstd = 1 / torch.sqrt(grouped.var(-1, unbiased=False) + eps)
    return q.to(torch.int8).reshape(x.shape).numpy(), grouped.mean(-1).numpy(), rstd.numpy()


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_silu_quant_matches_torch(dtype, per_channel, affine):
    rng = np.random.default_rng(3)
    x = random_array((2, 6, 5, 3), dtype, rng, -5, 5)
    gamma = random_array((6,), dtype, rng, -2, 2) if affine else None
    beta = random_array((6,), dtype, rng, -2, 2) if affine else None
    scale = random_array((6 if per_channel else 1,), F32, rng, 0.01, 0.1)
    out, mean, rstd = openacl.ops.group_norm_silu_quant(
        _dev(x), _dev(gamma), _dev(beta), quantScale=_dev(scale), group=3, eps=1e-5)
    want, want_mean, want_rstd = _group_reference(x, gamma, beta, scale, 3, 1e-5)
    assert out.numpy().dtype == np.int8 and np.array_equal(out.numpy(), want)
    assert_close(mean.numpy(), want_mean.astype(dtype))
    assert_close(rstd.numpy(), want_rstd.astype(dtype))


def test_group_norm_silu_quant_refuses_bad_arguments():
    x = _dev(np.ones((2, 6, 4), F16))
    scale = _dev(np.ones(1, F32))

    def error(x, gamma, beta, scale, group, eps, silu) -> AclError:
        with pytest.raises(AclError) as info:  # (quantScale follows optionals: a keyword)
            openacl.ops.group_norm_silu_quant(x, gamma, beta, quantScale=scale, group=group,
                                              eps=eps, activateSilu=silu)
        return info.value

    for args, name in [((_dev(np.ones((2, 6, 4), F32)), None, None, scale, 3), "self"),
                       ((x, _dev(np.ones(5, F16)), None, scale, 3), "gammaOptional"),
                       ((x, None, _dev(np.ones(6, BF16)), scale, 3), "betaOptional"),
                       ((x, None, None, _dev(np.ones(4, F32)), 3), "quantScale"),
                       ((x, None, None, _dev(np.ones(1, F16)), 3), "quantScale"),
                       ((x, None, None, scale, 4), "group")]:
        err = error(*args, 1e-5, True)
        assert err.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in err.message
    err = error(x, None, None, scale, 3, 0.0, True)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'eps'" in err.message
    err = error(x, None, None, scale, 3, 1e-5, False)
    assert err.code == ACLNN_ERR_PARAM_INVALID and "'activateSilu'" in err.message
    err = error(x, None, None, None, 3, 1e-5, True)
    assert err.code == ACLNN_ERR_PARAM_NULLPTR and "'quantScale'" in err.message


# -- DequantSwigluQuantV2 -------------------------------------------------------------------------
def _swiglu_reference(x, weight, act, bias, q_scale, q_offset, counts, left, dynamic, mode,
                      limit=7.0, alpha=1.702, glu_bias=1.0):
    """CANN's formulas in float64 with numpy, group by group: (y before rounding, scales)."""
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    half = rows.shape[1] // 2
    y, scales = np.zeros((len(rows), half)), np.zeros(len(rows))
    start = 0
    for g, n in enumerate(counts):
        part = rows[start:start + n]
        if x.dtype == I32:
            if bias is not None and bias.dtype == I32:
                part = part + bias[g]
            part = part * weight[g]
            if act is not None:
                part = part * act[start:start + n, None]
            if bias is not None and bias.dtype != I32:
                part = part + bias[g].astype(np.float64)
        if mode == 1:
            a, b = part[:, 0::2], part[:, 1::2]
        elif left or mode in (2, 3):
            a, b = part[:, :half], part[:, half:]
        else:
            a, b = part[:, half:], part[:, :half]
        silu = a / (1 + np.exp(-a))
        if mode == 0:
            out = silu * b
        elif mode == 3:
            out = np.minimum(silu, limit) * np.clip(b, -limit, limit)
        else:
            a = np.minimum(a, limit)
            out = a / (1 + np.exp(-alpha * a)) * (np.clip(b, -limit, limit) + glu_bias)
        factor = None if q_scale is None else np.asarray(q_scale[g], np.float64).reshape(
            1, -1)
        if dynamic:
            out = out if factor is None else out * factor
            largest = np.abs(out).max(1)
            scales[start:start + n] = largest / 127
            out = out * (127 / largest[:, None])
        else:
            out = out / factor
            if q_offset is not None:
                out = out + np.asarray(q_offset[g], np.float64).reshape(1, -1)
        y[start:start + n] = out
        start += n
    return np.clip(y, -128, 127), scales


def _assert_within_a_quantum(actual, expected):
    """INT8 results of a float32 chain: within one quantum of the float64 value rounded,
    exact where that value is not within 1e-3 of a rounding half."""
    exact = np.rint(expected)
    assert np.abs(actual.astype(np.int64) - exact).max() <= 1
    clear = np.abs(np.abs(expected - np.floor(expected)) - 0.5) > 1e-3
    np.testing.assert_array_equal(actual[clear], exact[clear].astype(np.int8))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("bias_dtype", [I32, BF16, F32], ids=str)
def test_dequant_swiglu_quant_v2_groups(mode, dynamic, bias_dtype):
    rng = np.random.default_rng(mode * 7 + dynamic)
    counts, h = [2, 0, 3, 1], 16
    groups, rows = len(counts), sum(counts)
    x = rng.integers(-50, 50, (rows, 2 * h)).astype(I32)
    weight = rng.uniform(0.01, 0.05, (groups, 2 * h)).astype(F32)
    act = rng.uniform(0.5, 2, rows).astype(F32)
    bias = (rng.integers(-5, 5, (groups, 2 * h)) if bias_dtype == I32 else
            rng.uniform(-1, 1, (groups, 2 * h))).astype(bias_dtype)
    q_scale = rng.uniform(0.02, 0.1, (groups, h) if dynamic or mode % 2 else groups
                          ).astype(F32)
    q_offset = None if dynamic else rng.uniform(-3, 3, q_scale.shape).astype(F32)
    left = mode != 1 and bool(rng.integers(2))
    y, scale = openacl.ops.dequant_swiglu_quant_v2(
        x, weight, act, bias, q_scale, q_offset, np.array(counts, np.int64), left,
        "dynamic" if dynamic else "static", 2, "rint", -1, mode, 6.5, 1.5, 0.5)
    want_y, want_scale = _swiglu_reference(x, weight, act, bias, q_scale, q_offset, counts,
                                           left, dynamic, mode, 6.5, 1.5, 0.5)
    _assert_within_a_quantum(y.numpy(), want_y)
    if dynamic:
        assert_close(scale.numpy(), want_scale.astype(F32), F32)


def test_dequant_swiglu_quant_v2_float_input_and_untouched_rows():
    """A bfloat16 x is gated as it is; rows past the groups' sum keep what yOut held, and a
    static call leaves scaleOut alone."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, (2, 3, 8)).astype(BF16)
    q_scale = np.array([0.05], F32)
    y_out, scale_out = openacl.to_device(np.full((2, 3, 4), 7, np.int8)), openacl.to_device(
        np.full((2, 3), 9.0, F32))
    from openacl import aclnn

    inputs = [_dev(a) for a in (x, q_scale, np.array([1.0], F32), np.array([4], np.int64))]
    workspace, executor = aclnn.dequant_swiglu_quant_v2_get_workspace_size(
        inputs[0], None, None, None, *inputs[1:], True, "static", 2, "rint", -1, 0, 7.0,
        1.702, 1.0, y_out, scale_out)
    aclnn.dequant_swiglu_quant_v2(0, workspace, executor, None)
    openacl.rt.synchronize_device()
    want, _ = _swiglu_reference(x.astype(np.float64), None, None, None, [q_scale],
                                [np.array([1.0])], [4], True, False, 0)
    got = y_out.numpy().reshape(6, 4)
    _assert_within_a_quantum(got[:4], want[:4])
    assert (got[4:] == 7).all() and (scale_out.numpy() == 9).all()
    # no group index: one group of every row, dynamic with no quant scale
    y, scale = openacl.ops.dequant_swiglu_quant_v2(x, quantModeOptional="dynamic")
    want, want_scale = _swiglu_reference(x.astype(np.float64), None, None, None, None, None,
                                         [6], False, True, 0)
    _assert_within_a_quantum(y.numpy().reshape(6, 4), want)
    assert_close(scale.numpy().reshape(6), want_scale.astype(F32), F32)


def test_dequant_swiglu_quant_v2_errors():
    x = _dev(np.ones((4, 8), I32))
    weight, scale = _dev(np.ones(8, F32)), _dev(np.ones(1, F32))

    def call(code, name, *args, **kwargs):
        arguments = dict(x=x, weightScaleOptional=weight, quantScaleOptional=scale)
        arguments.update(kwargs)
        with pytest.raises(AclError) as info:
            openacl.ops.dequant_swiglu_quant_v2(**arguments)
        assert info.value.code == code, info.value.message
        assert f"'{name}'" in info.value.message, info.value.message

    openacl.ops.dequant_swiglu_quant_v2(x, weight, quantScaleOptional=scale)  # the good call
    call(ACLNN_ERR_PARAM_NULLPTR, "x", x=None)
    call(ACLNN_ERR_PARAM_NULLPTR, "weightScaleOptional", weightScaleOptional=None)
    call(ACLNN_ERR_PARAM_NULLPTR, "quantScaleOptional", quantScaleOptional=None)
    invalid = ACLNN_ERR_PARAM_INVALID
    call(invalid, "x", x=_dev(np.ones((4, 8), F32)))
    call(invalid, "x", x=_dev(np.ones(8, I32)))
    call(invalid, "x", x=_dev(np.ones((4, 7), I32)), weightScaleOptional=_dev(np.ones(7, F32)))
    call(invalid, "weightScaleOptional", x=_dev(np.ones((4, 8), F16)))
    call(invalid, "weightScaleOptional", weightScaleOptional=_dev(np.ones(4, F32)))
    call(invalid, "activationScaleOptional", activationScaleOptional=_dev(np.ones(3, F32)))
    call(invalid, "swigluMode", swigluMode=4)
    call(invalid, "quantModeOptional", quantModeOptional="per-token")
    call(invalid, "dstType", dstType=35)
    call(invalid, "roundModeOptional", roundModeOptional="floor")
    call(invalid, "activateDim", activateDim=0)
    call(invalid, "activateDim", activateDim=2)
    call(invalid, "clampLimit", swigluMode=1, clampLimit=0.0)
    call(invalid, "groupIndexOptional", groupIndexOptional=_dev(np.ones((2, 2), np.int64)))
    call(invalid, "weightScaleOptional", groupIndexOptional=_dev(np.ones(2, np.int64)))
    call(invalid, "quantOffsetOptional", quantOffsetOptional=_dev(np.ones(2, F32)))
    call(invalid, "quantOffsetOptional", quantModeOptional="dynamic",
         quantOffsetOptional=_dev(np.ones(1, F32)))
