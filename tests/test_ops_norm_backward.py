"""Backward normalization operators against torch.autograd, in float64 rounded once."""

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


def _data(shape, dtype, seed, low=-3.0, high=3.0):
    return random_array(shape, dtype, np.random.default_rng(seed), low, high)


def _leaf(array):
    """A float64 leaf tensor holding ``array``'s values."""
    return to_torch(array).double().requires_grad_(True)


def _rounded(tensor, dtype):
    return from_torch(tensor.detach().to(TORCH_DTYPES[np.dtype(dtype)]))


def _expect(code, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message


# -- LayerNormBackward ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_backward_matches_autograd(shape, normalized, dtype, affine):
    x, dy = _data(shape, dtype, 1), _data(shape, dtype, 2)
    weight = _data(normalized, dtype, 3) if affine else None
    bias = _data(normalized, dtype, 4) if affine else None
    xt = _leaf(x)
    wt = _leaf(weight) if affine else None
    bt = _leaf(bias) if affine else None
    dims = list(range(len(shape) - len(normalized), len(shape)))
    mean = xt.detach().mean(dims, keepdim=True)
    rstd = torch.rsqrt(xt.detach().var(dims, unbiased=False, keepdim=True) + 1e-5)
    y = F.layer_norm(xt, normalized, wt, bt, 1e-5)
    y.backward(to_torch(dy).double())
    grads = openacl.ops.layer_norm_backward(
        _dev(dy), _dev(x), list(normalized), _dev(_rounded(mean, FLOAT32)),
        _dev(_rounded(rstd, FLOAT32)), _dev(weight), _dev(bias), [True, affine, affine])
    grads = grads if affine else (grads,)  # (one result is returned as it is)
    assert_close(grads[0].numpy(), _rounded(xt.grad, dtype), f"gradInput {dtype}")
    if affine:
        assert_close(grads[1].numpy(), _rounded(wt.grad, dtype), "gradWeight")
        assert_close(grads[2].numpy(), _rounded(bt.grad, dtype), "gradBias")


def test_layer_norm_backward_errors():
    x = _dev(np.ones((2, 4), np.float32))
    stat = _dev(np.ones((2, 1), np.float32))
    grad = openacl.empty((2, 4), np.float32)
    phase1 = aclnn.layer_norm_backward_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, None, x, [4], stat, stat, None, None,
            [True, False, False], grad, None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, x, [4], stat, stat, None, None,
            [True, False, False], None, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, [3], stat, stat, None, None,
            [True, False, False], grad, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, [4], _dev(np.ones((4, 1), np.float32)),
            stat, None, None, [True, False, False], grad, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, [4], stat, stat, None, None, [True],
            grad, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((2, 4), np.int32)), x, [4], stat,
            stat, None, None, [True, False, False], grad, None, None)


# -- RmsNormGrad ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,gamma_shape", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                               ((6,), (6,))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_rms_norm_grad_matches_autograd(shape, gamma_shape, dtype):
    x, dy, gamma = _data(shape, dtype, 5), _data(shape, dtype, 6), _data(gamma_shape, dtype, 7)
    xt, gt = _leaf(x), _leaf(gamma)
    dims = list(range(len(shape) - len(gamma_shape), len(shape)))
    rstd = torch.rsqrt(xt.square().mean(dims, keepdim=True) + 1e-6)
    (xt * rstd * gt).backward(to_torch(dy).double())
    rstd32 = _rounded(rstd, FLOAT32)
    dx, dgamma = openacl.ops.rms_norm_grad(_dev(dy), _dev(x), _dev(rstd32), _dev(gamma))
    assert_close(dx.numpy(), _rounded(xt.grad, dtype), f"dx {dtype}")
    assert_close(dgamma.numpy(), _rounded(gt.grad, FLOAT32), "dgamma")


def test_rms_norm_grad_errors():
    x = _dev(np.ones((2, 4), np.float16))
    rstd, gamma = _dev(np.ones((2, 1), np.float32)), _dev(np.ones(4, np.float16))
    dx, dgamma = openacl.empty((2, 4), np.float16), openacl.empty((4,), np.float32)
    phase1 = aclnn.rms_norm_grad_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, x, None, gamma, dx, dgamma)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, _dev(np.ones((2, 1), np.float16)), gamma,
            dx, dgamma)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, _dev(np.ones((3, 1), np.float32)), gamma,
            dx, dgamma)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, rstd, _dev(np.ones(3, np.float16)), dx,
            dgamma)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, rstd, gamma, dx,
            openacl.empty((4,), np.float16))


# -- BatchNormBackward ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 4)], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_matches_autograd(shape, dtype, training):
    channels = shape[1]
    x, dy = _data(shape, dtype, 8), _data(shape, dtype, 9)
    weight = _data((channels,), FLOAT32, 10)
    running_mean = _data((channels,), FLOAT32, 11, -1, 1)
    running_var = _data((channels,), FLOAT32, 12, 0.5, 2)
    xt, wt, bt = _leaf(x), _leaf(weight), _leaf(np.zeros(channels, FLOAT32))
    axes = [a for a in range(len(shape)) if a != 1]
    mean = xt.detach().mean(axes)
    invstd = torch.rsqrt(xt.detach().var(axes, unbiased=False) + 1e-5)
    y = F.batch_norm(xt, to_torch(running_mean).double(), to_torch(running_var).double(), wt,
                     bt, training, 0.0, 1e-5)
    y.backward(to_torch(dy).double())
    grads = openacl.ops.batch_norm_backward(
        _dev(dy), _dev(x), _dev(weight), _dev(running_mean), _dev(running_var),
        _dev(_rounded(mean, FLOAT32)), _dev(_rounded(invstd, FLOAT32)), training, 1e-5,
        [True, True, True])
    assert_close(grads[0].numpy(), _rounded(xt.grad, dtype), f"gradInput {dtype}")
    assert_close(grads[1].numpy(), _rounded(wt.grad, FLOAT32), "gradWeight")
    assert_close(grads[2].numpy(), _rounded(bt.grad, FLOAT32), "gradBias")


def test_batch_norm_backward_errors():
    x = _dev(np.ones((2, 3, 4), np.float32))
    stat = _dev(np.ones(3, np.float32))
    grad = openacl.empty((2, 3, 4), np.float32)
    phase1 = aclnn.batch_norm_backward_get_workspace_size
    mask = [True, False, False]
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, x, None, None, None, None, stat, True, 1e-5,
            mask, grad, None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, x, None, stat, None, None, None, False, 1e-5,
            mask, grad, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, None, None, None,
            _dev(np.ones(4, np.float32)), stat, True, 1e-5, mask, grad, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, _dev(np.ones((2, 3, 5), np.float32)), None,
            None, None, stat, stat, True, 1e-5, mask, grad, None, None)


# -- GroupNormBackward ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape,group", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((3, 4), 1)],
                         ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_group_norm_backward_matches_autograd(shape, group, dtype):
    batch, channels = shape[:2]
    spatial = int(np.prod(shape[2:]))
    x, dy = _data(shape, dtype, 13), _data(shape, dtype, 14)
    gamma, beta = _data((channels,), dtype, 15), _data((channels,), dtype, 16)
    xt, gt, bt = _leaf(x), _leaf(gamma), _leaf(beta)
    grouped = xt.detach().reshape(batch, group, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + 1e-5)
    F.group_norm(xt, group, gt, bt, 1e-5).backward(to_torch(dy).double())
    grads = openacl.ops.group_norm_backward(
        _dev(dy), _dev(x), _dev(_rounded(mean, FLOAT32)), _dev(_rounded(rstd, FLOAT32)),
        _dev(gamma), N=batch, C=channels, HxW=spatial, group=group)
    assert_close(grads[0].numpy(), _rounded(xt.grad, dtype), f"gradInput {dtype}")
    assert_close(grads[1].numpy(), _rounded(gt.grad, dtype), "gradGamma")
    assert_close(grads[2].numpy(), _rounded(bt.grad, dtype), "gradBeta")


def test_group_norm_backward_errors():
    x = _dev(np.ones((2, 4, 3), np.float32))
    stat = _dev(np.ones((2, 2), np.float32))
    grad = openacl.empty((2, 4, 3), np.float32)
    phase1 = aclnn.group_norm_backward_get_workspace_size
    mask = [True, False, False]
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, x, None, stat, None, 2, 4, 3, 2, mask, grad,
            None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, stat, stat, None, 2, 4, 3, 3, mask, grad,
            None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, stat, stat, None, 2, 5, 3, 2, mask, grad,
            None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, _dev(np.ones((2, 3), np.float32)), stat,
            None, 2, 4, 3, 2, mask, grad, None, None)


# -- AddLayerNormGrad, DeepNormGrad ---------------------------------------------------------
def _row_stats(x, dims):
    mean = x.detach().mean(dims, keepdim=True)
    rstd = torch.rsqrt(x.detach().var(dims, unbiased=False, keepdim=True) + 1e-5)
    return _rounded(mean, FLOAT32), _rounded(rstd, FLOAT32)


@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                              ((9,), (9,))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_add_layer_norm_grad_matches_autograd(shape, normalized, dtype):
    x1, x2, dy, dsum = (_data(shape, dtype, seed) for seed in (20, 21, 22, 23))
    gamma, beta = _data(normalized, dtype, 24), _data(normalized, dtype, 25)
    x1t, x2t, gt, bt = _leaf(x1), _leaf(x2), _leaf(gamma), _leaf(beta)
    x = x1t + x2t
    y = F.layer_norm(x, normalized, gt, bt, 1e-5)
    torch.autograd.backward([y, x], [to_torch(dy).double(), to_torch(dsum).double()])
    dims = list(range(len(shape) - len(normalized), len(shape)))
    mean, rstd = _row_stats(x, dims)
    dx, dgamma, dbeta = openacl.ops.add_layer_norm_grad(
        _dev(dy), _dev(x1), _dev(x2), _dev(rstd), _dev(mean), _dev(gamma), _dev(dsum))
    assert_close(dx.numpy(), _rounded(x1t.grad, dtype), f"dx {dtype}")
    assert_close(dgamma.numpy(), _rounded(gt.grad, FLOAT32), "dgamma")
    assert_close(dbeta.numpy(), _rounded(bt.grad, FLOAT32), "dbeta")


@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_deep_norm_grad_matches_autograd(shape, normalized, dtype):
    x, gx, dy = (_data(shape, dtype, seed) for seed in (26, 27, 28))
    gamma, beta = _data(normalized, dtype, 29), _data(normalized, dtype, 30)
    xt, gxt, gt, bt = _leaf(x), _leaf(gx), _leaf(gamma), _leaf(beta)
    inner = 0.3 * xt + gxt
    F.layer_norm(inner, normalized, gt, bt, 1e-5).backward(to_torch(dy).double())
    dims = list(range(len(shape) - len(normalized), len(shape)))
    mean, rstd = _row_stats(inner, dims)
    dx, dgx, dbeta, dgamma = openacl.ops.deep_norm_grad(
        _dev(dy), _dev(x), _dev(gx), _dev(gamma), _dev(mean), _dev(rstd), 0.3)
    assert_close(dx.numpy(), _rounded(xt.grad, dtype), f"dx {dtype}")
    assert_close(dgx.numpy(), _rounded(gxt.grad, dtype), f"dgx {dtype}")
    assert_close(dgamma.numpy(), _rounded(gt.grad, FLOAT32), "dgamma")
    assert_close(dbeta.numpy(), _rounded(bt.grad, FLOAT32), "dbeta")


def test_fused_layer_norm_grad_errors():
    x = _dev(np.ones((2, 4), np.float32))
    gamma, stat = _dev(np.ones(4, np.float32)), _dev(np.ones((2, 1), np.float32))
    out, g = openacl.empty((2, 4), np.float32), openacl.empty((4,), np.float32)
    phase1 = aclnn.add_layer_norm_grad_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, None, x, stat, stat, gamma, None, out, g, g)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, _dev(np.ones((2, 3), np.float32)), x, stat,
            stat, gamma, None, out, g, g)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, x, _dev(np.ones((3, 1), np.float32)), stat,
            gamma, None, out, g, g)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, x, x, _dev(np.ones((2, 1), np.float16)), stat,
            gamma, None, out, g, g)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.deep_norm_grad_get_workspace_size, x, x, x,
            _dev(np.ones(3, np.float32)), stat, stat, 0.3, out, out, g, g)


# -- GroupNormSwishGrad -------------------------------------------------------------------------
@pytest.mark.parametrize("shape,group", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((3, 4), 1)],
                         ids=str)
@pytest.mark.parametrize("scale", [1.0, -1.5])
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_group_norm_swish_grad_matches_autograd(shape, group, scale, dtype):
    batch, channels = shape[:2]
    x, dy = _data(shape, dtype, 31), _data(shape, dtype, 32)
    gamma, beta = _data((channels,), dtype, 33), _data((channels,), dtype, 34)
    xt, gt, bt = _leaf(x), _leaf(gamma), _leaf(beta)
    grouped = xt.detach().reshape(batch, group, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + 1e-5)
    y = F.group_norm(xt, group, gt, bt, 1e-5)
    (y * torch.sigmoid(scale * y)).backward(to_torch(dy).double())
    dx, dgamma, dbeta = openacl.ops.group_norm_swish_grad(
        _dev(dy), _dev(_rounded(mean, FLOAT32)), _dev(_rounded(rstd, FLOAT32)), _dev(x),
        _dev(gamma), _dev(beta), group, "NCHW", scale, True, True)
    assert_close(dx.numpy(), _rounded(xt.grad, dtype), f"dx {dtype}")
    assert_close(dgamma.numpy(), _rounded(gt.grad, dtype), "dgamma")
    assert_close(dbeta.numpy(), _rounded(bt.grad, dtype), "dbeta")


def test_group_norm_swish_grad_errors():
    x = _dev(np.ones((2, 4, 3), np.float32))
    stat, c4 = _dev(np.ones((2, 2), np.float32)), _dev(np.ones(4, np.float32))
    out = openacl.empty((2, 4, 3), np.float32)
    phase1 = aclnn.group_norm_swish_grad_get_workspace_size
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, stat, stat, x, c4, c4, 3, None, 1.0, False,
            False, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, stat, stat, x, c4, c4, 2, "NHWC", 1.0, False,
            False, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, x, _dev(np.ones(3, np.float32)), stat, x, c4, c4,
            2, None, 1.0, False, False, out, None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, x, stat, stat, x, c4, c4, 2, None, 1.0, True,
            False, out, None, None)
