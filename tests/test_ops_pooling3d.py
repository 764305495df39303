"""3-d pooling, forward and backward, against PyTorch in float64 rounded once."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

import openacl
from op_harness import BF16, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]
SHAPE = (2, 3, 7, 8, 9)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return None if array is None else openacl.to_device(np.asarray(array))


def _data(shape, dtype, seed):
    return random_array(shape, dtype, np.random.default_rng(seed))


def _leaf(array):
    return to_torch(array).double().requires_grad_(True)


def _rounded(tensor, dtype):
    return from_torch(tensor.detach().to(TORCH_DTYPES[np.dtype(dtype)]))


def _expect(code, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message


# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [([3], [2], [1], False, True, 0), ([3, 2, 2], [2, 1, 2], [1, 1, 0], True, False, 0),
             ([2], [], [0], False, True, 5)]


@pytest.mark.parametrize("case", AVG_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_avg_pool3d_and_backward_match_torch(case, dtype):
    kernel, stride, padding, ceil, include_pad, divisor = case
    x = _data(SHAPE, dtype, 1)
    xt = _leaf(x)
    y = F.avg_pool3d(xt, kernel, stride or None, padding, ceil, include_pad, divisor or None)
    out = openacl.ops.avg_pool3d(_dev(x), kernel, stride, padding, ceil, include_pad, divisor)
    assert_close(out.numpy(), _rounded(y, dtype), f"avg_pool3d {case} {dtype}")
    grad = _data(tuple(y.shape), dtype, 2)
    y.backward(to_torch(grad).double())
    result = openacl.ops.avg_pool3d_backward(_dev(grad), _dev(x), kernel, stride, padding,
                                             ceil, include_pad, divisor)
    assert_close(result.numpy(), _rounded(xt.grad, dtype), f"avg_pool3d_backward {case}")


# (kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [([3], [2], [1], [1], False), ([2, 3, 2], [1, 2, 2], [1, 1, 0], [2, 1, 1], True),
             ([2], [], [0], [1], False)]


@pytest.mark.parametrize("case", MAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_max_pool3d_with_argmax_and_backward_match_torch(case, dtype):
    kernel, stride, padding, dilation, ceil = case
    x = _data(SHAPE, dtype, 3)
    xt = _leaf(x)
    y, indices = F.max_pool3d(xt, kernel, stride or None, padding, dilation, ceil,
                              return_indices=True)
    out, idx = openacl.ops.max_pool3d_with_argmax(_dev(x), kernel, stride, padding, dilation,
                                                  ceil)
    assert_close(out.numpy(), _rounded(y, dtype))
    assert idx.numpy().dtype == np.int32
    np.testing.assert_array_equal(idx.numpy(), indices.numpy())
    grad = _data(tuple(y.shape), dtype, 4)
    y.backward(to_torch(grad).double())
    result = openacl.ops.max_pool3d_with_argmax_backward(
        _dev(grad), _dev(x), _dev(indices.numpy().astype(np.int32)), kernel, stride, padding,
        dilation, ceil)
    assert_close(result.numpy(), _rounded(xt.grad, dtype))


@pytest.mark.parametrize("out", [(3, 4, 5), (7, 8, 9), (10, 3, 12), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_adaptive_pool3d_and_backward_match_torch(out, dtype):
    x = _data(SHAPE, dtype, 5)
    xt = _leaf(x)
    y = F.adaptive_avg_pool3d(xt, out)
    assert_close(openacl.ops.adaptive_avg_pool3d(_dev(x), list(out)).numpy(), _rounded(y, dtype))
    grad = _data(tuple(y.shape), dtype, 6)
    y.backward(to_torch(grad).double())
    result = openacl.ops.adaptive_avg_pool3d_backward(_dev(grad), _dev(x))
    assert_close(result.numpy(), _rounded(xt.grad, dtype))
    xt = _leaf(x)
    y, indices = F.adaptive_max_pool3d(xt, out, return_indices=True)
    values, idx = openacl.ops.adaptive_max_pool3d(_dev(x), list(out))
    assert_close(values.numpy(), _rounded(y, dtype))
    np.testing.assert_array_equal(idx.numpy(), indices.numpy())
    y.backward(to_torch(grad).double())
    result = openacl.ops.adaptive_max_pool3d_backward(_dev(grad), _dev(x),
                                                      _dev(indices.numpy()))
    assert_close(result.numpy(), _rounded(xt.grad, dtype))


def test_adaptive_max_pool3d_ties_on_many_planes_take_the_first():
    """Ties over more than 8192 windows (numpy 2.4's unravel_index went wrong there)."""
    x = np.random.default_rng(7).integers(0, 3, (24, 17, 1, 64, 1)).astype(np.float32)
    _, idx = openacl.ops.adaptive_max_pool3d(_dev(x), [1, 13, 1])
    _, golden = F.adaptive_max_pool3d(to_torch(x).double(), (1, 13, 1), return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), golden.numpy())


def test_pool3d_errors():
    x = _dev(np.ones((1, 2, 4, 4, 4), np.float32))
    out = openacl.empty((1, 2, 2, 2, 2), np.float32)
    idx = openacl.empty((1, 2, 2, 2, 2), np.int32)
    _expect(ACLNN_ERR_PARAM_NULLPTR, aclnn.avg_pool3d_get_workspace_size, None, [2], [2], [0],
            False, True, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.avg_pool3d_get_workspace_size,
            _dev(np.ones((2, 4, 4), np.float32)), [2], [2], [0], False, True, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.avg_pool3d_get_workspace_size, x, [2, 2], [2], [0],
            False, True, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.avg_pool3d_get_workspace_size, x, [2], [2], [2],
            False, True, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.avg_pool3d_get_workspace_size, x, [5], [1], [0],
            False, True, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.max_pool3d_with_argmax_get_workspace_size, x, [2],
            [2], [0], [1], False, out, openacl.empty((1, 2, 2, 2, 2), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.max_pool3d_with_argmax_get_workspace_size,
            _dev(np.ones((1, 2, 4, 4, 4), np.int32)), [2], [2], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.adaptive_avg_pool3d_get_workspace_size, x, [2, 2],
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.adaptive_max_pool3d_get_workspace_size, x,
            [2, 2, 0], out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.avg_pool3d_backward_get_workspace_size,
            _dev(np.ones((1, 2, 3, 3, 3), np.float32)), x, [2], [2], [0], False, True, 0,
            openacl.empty((1, 2, 4, 4, 4), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.max_pool3d_with_argmax_backward_get_workspace_size,
            _dev(np.ones((1, 2, 2, 2, 2), np.float32)), x,
            _dev(np.zeros((1, 2, 2, 2), np.int32)), [2], [2], [0], [1], False,
            openacl.empty((1, 2, 4, 4, 4), np.float32))
