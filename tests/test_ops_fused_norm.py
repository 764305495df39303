"""GroupNormSilu(V2), GroupNormSwish and DeepNorm against PyTorch in float64, rounded once."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

NORM_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]
FLOAT32 = np.dtype(np.float32)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return None if array is None else openacl.to_device(np.asarray(array))


def _data(shape, dtype, seed):
    return random_array(shape, dtype, np.random.default_rng(seed))


def _wide(array):
    return None if array is None else to_torch(array).double()


def _rounded(tensor, dtype):
    return from_torch(tensor.detach().to(TORCH_DTYPES[np.dtype(dtype)]))


def _group_norm64(x, gamma, beta, group, eps, scale):
    n = x.shape[0]
    grouped = x.reshape(n, group, -1)
    mean, var = grouped.mean(-1), grouped.var(-1, unbiased=False)
    y = F.group_norm(x, group, gamma, beta, eps)
    if scale is not None:
        y = y * torch.sigmoid(scale * y)
    return y, mean, torch.rsqrt(var + eps)


def _expect(code, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message


@pytest.mark.parametrize("shape,group", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((3, 4), 4)],
                         ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_group_norm_silu_and_v2(shape, group, dtype):
    x, gamma, beta = _data(shape, dtype, 1), _data(shape[1:2], dtype, 2), \
        _data(shape[1:2], dtype, 3)
    want = _group_norm64(_wide(x), _wide(gamma), _wide(beta), group, 1e-5, 1.0)
    got = openacl.ops.group_norm_silu(_dev(x), _dev(gamma), _dev(beta), group=group, eps=1e-5)
    for ours, theirs in zip(got, want, strict=True):
        assert_close(ours.numpy(), _rounded(theirs, dtype), f"group_norm_silu {dtype}")
    plain = _group_norm64(_wide(x), _wide(gamma), _wide(beta), group, 1e-5, None)
    got = openacl.ops.group_norm_silu_v2(_dev(x), _dev(gamma), _dev(beta), group=group,
                                         eps=1e-5, activateSilu=False)
    assert_close(got[0].numpy(), _rounded(plain[0], dtype), "group_norm_silu_v2 off")


@pytest.mark.parametrize("scale", [1.0, -2.5, 0.0])
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_group_norm_swish_with_float32_affine(scale, dtype):
    x = _data((2, 6, 5), dtype, 4)
    gamma, beta = _data((6,), FLOAT32, 5), _data((6,), FLOAT32, 6)
    want = _group_norm64(_wide(x), _wide(gamma), _wide(beta), 3, 1e-5, scale)
    got = openacl.ops.group_norm_swish(_dev(x), _dev(gamma), _dev(beta), 3, "NCHW", 1e-5,
                                       True, scale)
    assert_close(got[0].numpy(), _rounded(want[0], dtype), f"swish {scale} {dtype}")
    for ours, theirs in zip(got[1:], want[1:], strict=True):  # statistics in gamma's dtype
        assert_close(ours.numpy(), _rounded(theirs, FLOAT32))


@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_deep_norm_is_layer_norm_of_alpha_x_plus_gx(shape, normalized, dtype):
    x, gx = _data(shape, dtype, 7), _data(shape, dtype, 8)
    beta, gamma = _data(normalized, dtype, 9), _data(normalized, dtype, 10)
    mean, rstd, y = openacl.ops.deep_norm(_dev(x), _dev(gx), _dev(beta), _dev(gamma), 0.3,
                                          1e-6)
    golden = torch.ops.aten.native_layer_norm(0.3 * _wide(x) + _wide(gx), list(normalized),
                                              _wide(gamma), _wide(beta), 1e-6)
    assert_close(y.numpy(), _rounded(golden[0], dtype), f"deep_norm {dtype}")
    assert_close(mean.numpy(), _rounded(golden[1], FLOAT32))
    assert_close(rstd.numpy(), _rounded(golden[2], FLOAT32))


def test_errors():
    x = _dev(np.ones((2, 4, 3), np.float32))
    gamma = _dev(np.ones(4, np.float32))
    out = openacl.empty((2, 4, 3), np.float32)
    stat = openacl.empty((2, 2), np.float32)
    phase1 = aclnn.group_norm_silu_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, None, gamma, gamma, 2, 1e-5, out, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, gamma, gamma, 3, 1e-5, out, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, _dev(np.ones(3, np.float32)), gamma, 2, 1e-5,
            out, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((2, 4, 3), np.int32)), gamma, gamma,
            2, 1e-5, out, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.group_norm_swish_get_workspace_size, x, gamma,
            gamma, 2, "NHWC", 1e-5, True, 1.0, out, stat, stat)
    y, rstd = openacl.empty((2, 4), np.float32), openacl.empty((2, 1), np.float32)
    x2 = _dev(np.ones((2, 4), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.deep_norm_get_workspace_size, x2,
            _dev(np.ones((2, 3), np.float32)), gamma, gamma, 0.3, 1e-6, rstd, rstd, y)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.deep_norm_get_workspace_size, x2, x2,
            _dev(np.ones(4, np.float16)), gamma, 0.3, 1e-6, rstd, rstd, y)


@pytest.mark.parametrize("shape,modulation", [((2, 5, 8), (2, 8)), ((2, 5, 8), (2, 1, 8)),
                                              ((5, 8), (8,)), ((2, 3, 4, 6), (2, 3, 6))],
                         ids=str)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_ada_layer_norm(shape, modulation, affine, dtype):
    x = _data(shape, dtype, 11)
    scale, shift = _data(modulation, dtype, 12), _data(modulation, dtype, 13)
    weight = _data(shape[-1:], dtype, 14) if affine else None
    bias = _data(shape[-1:], dtype, 15) if affine else None
    y = openacl.ops.ada_layer_norm(_dev(x), _dev(scale), _dev(shift), _dev(weight), _dev(bias),
                                   1e-5)
    rows = (*shape[:-2], 1, shape[-1])
    golden = F.layer_norm(_wide(x), shape[-1:], _wide(weight), _wide(bias), 1e-5)
    golden = golden * (1 + _wide(scale).reshape(rows)) + _wide(shift).reshape(rows)
    assert_close(y.numpy(), _rounded(golden, dtype), f"ada_layer_norm {dtype}")


def test_ada_layer_norm_errors():
    x = _dev(np.ones((2, 5, 8), np.float32))
    mod = _dev(np.ones((2, 8), np.float32))
    for args in ((x, _dev(np.ones((3, 8), np.float32)), mod, None, None, 1e-5),
                 (x, mod, _dev(np.ones((2, 8), np.float16)), None, None, 1e-5),
                 (x, mod, mod, _dev(np.ones(7, np.float32)), None, 1e-5),
                 (_dev(np.ones(8, np.float32)), mod, mod, None, None, 1e-5)):
        with pytest.raises(AclError) as info:
            openacl.ops.ada_layer_norm(*args)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID


# -- MaskedSoftmaxWithRelPosBias ----------------------------------------------------------------
@pytest.mark.parametrize("shape,mask,bias", [((2, 3, 4, 5, 6), (3, 5, 6), (4, 5, 6)),
                                             ((2, 3, 4, 5, 6), None, (1, 4, 5, 6)),
                                             ((6, 4, 5, 6), (3, 1, 5, 6), (1, 1, 4, 5, 6))],
                         ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_masked_softmax_with_rel_pos_bias(shape, mask, bias, dtype):
    x = _data(shape, dtype, 16)
    m = _data(mask, dtype, 17) if mask else None
    b = _data(bias, dtype, 18)
    out = openacl.ops.masked_softmax_with_rel_pos_bias(_dev(x), _dev(m), relativePosBias=_dev(b),
                                                     scaleValue=0.5, innerPrecisionMode=0)
    s1, s2 = shape[-2:]
    five = _wide(x).reshape(-1, 3, 4, s1, s2)
    logits = five * 0.5 + _wide(b).reshape(1, 1, -1, s1, s2)
    if m is not None:
        logits = logits + _wide(m).reshape(1, -1, 1, s1, s2)
    golden = torch.softmax(logits, -1).reshape(shape)
    assert_close(out.numpy(), _rounded(golden, dtype), f"masked softmax {dtype}")


def test_masked_softmax_with_rel_pos_bias_errors():
    x = _dev(np.ones((2, 3, 4, 5, 6), np.float32))
    bias = _dev(np.ones((4, 5, 6), np.float32))
    for source, mask, rel in ((_dev(np.ones((5, 6), np.float32)), None, bias),
                              (x, _dev(np.ones((2, 5, 6), np.float32)), bias),
                              (x, None, _dev(np.ones((4, 5, 7), np.float32))),
                              (x, None, _dev(np.ones((4, 5, 6), np.float16)))):
        with pytest.raises(AclError) as info:
            openacl.ops.masked_softmax_with_rel_pos_bias(source, mask, relativePosBias=rel)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(AclError) as info:
        openacl.ops.masked_softmax_with_rel_pos_bias(x, None, relativePosBias=None)
    assert info.value.code == ACLNN_ERR_PARAM_NULLPTR
