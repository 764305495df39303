"""The SyncBatchNorm pieces against torch in float64: the forward statistics and the
backward composed from them must equal torch.autograd of training-mode batch_norm."""

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
SHAPES = [(4, 3), (2, 3, 5), (2, 3, 4, 4)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return None if array is None else openacl.to_device(np.asarray(array))


def _data(shape, dtype, seed, low=-3.0, high=3.0):
    return random_array(shape, dtype, np.random.default_rng(seed), low, high)


def _rounded(tensor, dtype):
    return from_torch(tensor.detach().to(TORCH_DTYPES[np.dtype(dtype)]))


def _stats64(x):
    axes = [a for a in range(x.dim()) if a != 1]
    return x.mean(axes), torch.rsqrt(x.var(axes, unbiased=False) + 1e-5)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_stats_and_elemt_are_training_batch_norm(shape, dtype):
    x = _data(shape, dtype, 1)
    weight, bias = _data(shape[1:2], dtype, 2), _data(shape[1:2], dtype, 3)
    mean, invstd = openacl.ops.batch_norm_stats(_dev(x), 1e-5)
    want_mean, want_invstd = _stats64(to_torch(x).double())
    assert_close(mean.numpy(), _rounded(want_mean, FLOAT32))
    assert_close(invstd.numpy(), _rounded(want_invstd, FLOAT32))
    y = openacl.ops.batch_norm_elemt(_dev(x), _dev(weight), _dev(bias), mean=mean,
                                     invstd=invstd, eps=1e-5)
    golden = F.batch_norm(to_torch(x).double(), None, None, to_torch(weight).double(),
                          to_torch(bias).double(), True, 0.0, 1e-5)
    assert_close(y.numpy(), _rounded(golden, dtype), f"elemt {dtype}")


def test_gather_stats_with_counts_pools_devices():
    """Two devices' statistics gathered equal the statistics of their concatenated batch."""
    parts = [_data((3, 4, 5), FLOAT32, 4), _data((5, 4, 5), FLOAT32, 5)]
    stats = [_stats64(to_torch(p).double()) for p in parts]
    mean = np.stack([_rounded(m, FLOAT32) for m, _ in stats])
    invstd = np.stack([_rounded(i, FLOAT32) for _, i in stats])
    counts = np.array([15, 25], np.float32)
    running_mean, running_var = np.zeros(4, FLOAT32), np.ones(4, FLOAT32)
    rm, rv = _dev(running_mean), _dev(running_var)
    mean_all, invstd_all = openacl.ops.batch_norm_gather_stats_with_counts(
        _dev(parts[0]), _dev(mean), _dev(invstd), rm, rv, 0.1, 1e-5, counts=_dev(counts))
    whole = torch.cat([to_torch(p).double() for p in parts])
    want_mean, want_invstd = _stats64(whole)
    assert_close(mean_all.numpy(), _rounded(want_mean, FLOAT32))
    assert_close(invstd_all.numpy(), _rounded(want_invstd, FLOAT32))
    unbiased = whole.var([0, 2], unbiased=True)
    assert_close(rm.numpy(), _rounded(0.1 * want_mean, FLOAT32))
    assert_close(rv.numpy(), _rounded(0.9 + 0.1 * unbiased, FLOAT32))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_reduce_and_elemt_backward_are_autograd(shape, dtype):
    x, dy = _data(shape, dtype, 6), _data(shape, dtype, 7)
    weight = _data(shape[1:2], FLOAT32, 8)
    xt = to_torch(x).double().requires_grad_(True)
    wt = to_torch(weight).double().requires_grad_(True)
    bt = torch.zeros(shape[1], dtype=torch.float64, requires_grad=True)
    F.batch_norm(xt, None, None, wt, bt, True, 0.0, 1e-5).backward(to_torch(dy).double())
    mean, invstd = (_rounded(t, FLOAT32) for t in _stats64(xt.detach()))
    sum_dy, sum_dy_xmu, grad_weight, grad_bias = openacl.ops.batch_norm_reduce_backward(
        _dev(dy), _dev(x), _dev(mean), _dev(invstd), _dev(weight), True, True, True)
    assert_close(grad_weight.numpy(), _rounded(wt.grad, FLOAT32), "gradWeight")
    assert_close(grad_bias.numpy(), _rounded(bt.grad, FLOAT32), "gradBias")
    count = np.array([x.size // shape[1]], np.int32)
    grad = openacl.ops.batch_norm_elemt_backward(_dev(dy), _dev(x), _dev(mean), _dev(invstd),
                                                 _dev(weight), sumDy=sum_dy,
                                                 sumDyXmu=sum_dy_xmu, counter=_dev(count))
    assert_close(grad.numpy(), _rounded(xt.grad, dtype), f"gradInput {dtype}")


def test_errors():
    x = _dev(np.ones((2, 3, 4), np.float32))
    c3 = _dev(np.ones(3, np.float32))
    out = openacl.empty((3,), np.float32)
    with pytest.raises(AclError) as info:
        aclnn.batch_norm_stats_get_workspace_size(None, 1e-5, out, out)
    assert info.value.code == ACLNN_ERR_PARAM_NULLPTR
    bad = [
        lambda: openacl.ops.batch_norm_stats(_dev(np.ones(3, np.float32)), 1e-5),
        lambda: openacl.ops.batch_norm_elemt(x, None, None, mean=_dev(np.ones(4, np.float32)),
                                             invstd=c3),
        lambda: openacl.ops.batch_norm_gather_stats_with_counts(
            x, _dev(np.ones((2, 3), np.float32)), _dev(np.ones((2, 3), np.float32)), None, None,
            0.1, 1e-5, counts=_dev(np.ones(3, np.float32))),
        lambda: openacl.ops.batch_norm_reduce_backward(_dev(np.ones((2, 3, 5), np.float32)), x,
                                                       c3, c3, None, True, True, True),
        lambda: openacl.ops.batch_norm_elemt_backward(x, x, c3, c3, None, sumDy=c3,
                                                      sumDyXmu=c3,
                                                      counter=_dev(np.ones(1, np.int64))),
    ]
    for call in bad:
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
