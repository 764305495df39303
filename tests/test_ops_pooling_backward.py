"""Backward pooling operators against torch.autograd, in float64 rounded once."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

import openacl
from op_harness import BF16, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]


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


# -- AvgPool2dBackward --------------------------------------------------------------------------
# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ([2], [], [0], False, True, 0),
    ([3, 3], [2, 2], [1, 1], False, True, 0),
    ([3, 3], [2, 2], [1, 1], False, False, 0),
    ([3, 2], [2, 1], [1, 1], True, False, 0),
    ([4], [3], [2], True, True, 5),
    ([3, 3], [1, 1], [1, 1], False, True, 0),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_avg_pool2d_backward_matches_autograd(case, dtype):
    kernel, stride, padding, ceil, include_pad, divisor = case
    x = _data((2, 3, 9, 10), dtype, 1)
    xt = _leaf(x)
    y = F.avg_pool2d(xt, kernel, stride or None, padding, ceil, include_pad, divisor or None)
    grad = _data(tuple(y.shape), dtype, 2)
    y.backward(to_torch(grad).double())
    result = openacl.ops.avg_pool2d_backward(_dev(grad), _dev(x), kernel, stride, padding,
                                             ceil, include_pad, divisor, 0)
    assert_close(result.numpy(), _rounded(xt.grad, dtype), f"avg backward {case} {dtype}")


def test_avg_pool2d_backward_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    grad = _dev(np.ones((1, 2, 3, 3), np.float32))
    out = openacl.empty((1, 2, 6, 6), np.float32)
    phase1 = aclnn.avg_pool2d_backward_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, None, x, [2], [2], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, [3], [2], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, [2], [2], [2], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, [2], [2], [0], False, True, 0, 7, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 2, 3, 3), np.float16)), x, [2],
            [2], [0], False, True, 0, 0, out)


# -- MaxPool2dWithIndicesBackward, AdaptiveMaxPool2dBackward ----------------------------------
@pytest.mark.parametrize("case", [([2], [], [0], [1], False), ([3, 3], [2, 2], [1, 1], [1, 1],
                                                                False),
                                  ([3, 2], [1, 1], [1, 0], [2, 1], True)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_max_pool2d_with_indices_backward_matches_autograd(case, dtype):
    kernel, stride, padding, dilation, ceil = case
    x = _data((2, 3, 8, 9), dtype, 3)
    xt = _leaf(x)
    y, indices = F.max_pool2d(xt, kernel, stride or None, padding, dilation, ceil,
                              return_indices=True)
    grad = _data(tuple(y.shape), dtype, 4)
    y.backward(to_torch(grad).double())
    for index_dtype in (np.int64, np.int32):
        result = openacl.ops.max_pool2d_with_indices_backward(
            _dev(grad), _dev(x), _dev(indices.numpy().astype(index_dtype)), kernel, stride,
            padding, dilation, ceil)
        assert_close(result.numpy(), _rounded(xt.grad, dtype), f"max backward {case}")


@pytest.mark.parametrize("out", [(4, 3), (5, 5), (12, 13)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_adaptive_max_pool2d_backward_matches_autograd(out, dtype):
    x = _data((2, 3, 9, 10), dtype, 5)
    xt = _leaf(x)
    y, indices = F.adaptive_max_pool2d(xt, out, return_indices=True)
    grad = _data(tuple(y.shape), dtype, 6)
    y.backward(to_torch(grad).double())
    result = openacl.ops.adaptive_max_pool2d_backward(_dev(grad), _dev(x),
                                                      _dev(indices.numpy()))
    assert_close(result.numpy(), _rounded(xt.grad, dtype))


def test_max_backward_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    grad = _dev(np.ones((1, 2, 3, 3), np.float32))
    indices = _dev(np.zeros((1, 2, 3, 3), np.int64))
    out = openacl.empty((1, 2, 6, 6), np.float32)
    phase1 = aclnn.max_pool2d_with_indices_backward_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, grad, x, None, [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, _dev(np.zeros((1, 2, 3, 3), np.float32)),
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, _dev(np.zeros((1, 2, 3), np.int64)), [2],
            [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, indices, [2], [3], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, aclnn.adaptive_max_pool2d_backward_get_workspace_size,
            grad, _dev(np.ones((1, 3, 6, 6), np.float32)), indices, out)


# -- MaxPool2dWithMaskBackward ----------------------------------------------------------------
@pytest.mark.parametrize("case", [([2], [], [0], False), ([3, 3], [2, 2], [1, 1], False),
                                  ([3, 2], [1, 1], [1, 0], True), ([4, 4], [3, 3], [2, 2], True),
                                  ([1], [2], [0], False)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_max_pool2d_with_mask_backward_matches_autograd(case, dtype):
    """The backward reads the mask the forward wrote (CANN's pair)."""
    kernel, stride, padding, ceil = case
    x = _data((2, 3, 8, 9), dtype, 3)
    xt = _leaf(x)
    y = F.max_pool2d(xt, kernel, stride or None, padding, 1, ceil)
    grad = _data(tuple(y.shape), dtype, 4)
    y.backward(to_torch(grad).double())
    source = _dev(x)
    _, mask = openacl.ops.max_pool2d_with_mask(source, kernel, stride, padding, [1], ceil)
    result = openacl.ops.max_pool2d_with_mask_backward(_dev(grad), source, mask, kernel,
                                                       stride, padding, [1], ceil)
    assert_close(result.numpy(), _rounded(xt.grad, dtype), f"mask backward {case}")


def test_max_pool2d_with_mask_backward_reads_cann_s_harness_mask_3d():
    """A mask built as CANN's ATK harness builds it (torch's int32 indices, zero-padded,
    viewed as int8), for a 3-D input."""
    x = _data((3, 7, 6), np.float32, 5)
    xt = _leaf(x)
    y, indices = F.max_pool2d(xt, 3, 2, 1, ceil_mode=True, return_indices=True)
    grad = _data(tuple(y.shape), np.float32, 6)
    y.backward(to_torch(grad).double())
    shape = (3, 9, (-(-y.shape[-2] * y.shape[-1] // 16) + 1) * 32)
    flat = np.zeros(np.prod(shape) // 4, "<i4")
    flat[:indices.numel()] = indices.numpy().reshape(-1)
    result = openacl.ops.max_pool2d_with_mask_backward(
        _dev(grad), _dev(x), _dev(flat.view(np.int8).reshape(shape)), [3], [2], [1], [1], True)
    assert_close(result.numpy(), _rounded(xt.grad, np.float32))


def test_max_pool2d_with_mask_backward_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    grad = _dev(np.ones((1, 2, 3, 3), np.float32))
    mask = _dev(np.zeros((1, 2, 4, 64), np.int8))
    out = openacl.empty((1, 2, 6, 6), np.float32)
    phase1 = aclnn.max_pool2d_with_mask_backward_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, None, x, mask, [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, grad, None, mask, [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, grad, x, None, [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, grad, x, mask, None, [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, grad, x, mask, [2], [2], [0], [1], False, None)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, _dev(np.zeros((1, 2, 4, 64), np.int32)),
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, _dev(np.zeros((1, 2, 3, 3), np.int8)),
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 2, 3, 3), np.float16)), x, mask,
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 2, 2, 2), np.float32)), x, mask,
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, _dev(np.ones((6, 6), np.float32)), mask,
            [2], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [2, 2, 2], [2], [0], [1], False,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [0], [2], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [2], [0], [0], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [2], [2], [2], [1], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [2], [2], [0], [2], False, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, grad, x, mask, [2], [2], [0], [1], False,
            openacl.empty((1, 2, 6, 6), np.float16))


# -- AdaptiveAvgPool2dBackward ----------------------------------------------------------------
@pytest.mark.parametrize("out", [(4, 3), (5, 5), (3, 10), (12, 13)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_adaptive_avg_pool2d_backward_matches_autograd(out, dtype):
    x = _data((2, 3, 9, 10), dtype, 7)
    xt = _leaf(x)
    y = F.adaptive_avg_pool2d(xt, out)
    grad = _data(tuple(y.shape), dtype, 8)
    y.backward(to_torch(grad).double())
    result = openacl.ops.adaptive_avg_pool2d_backward(_dev(grad), _dev(x))
    assert_close(result.numpy(), _rounded(xt.grad, dtype))


def test_adaptive_avg_pool2d_backward_keeps_inf_in_its_bin():
    """An inf gradient reaches only its own bin's members (a product's 0 * inf would make the
    whole row NaN)."""
    x = _data((1, 1, 5, 7), np.float32, 9)
    grad = _data((1, 1, 3, 3), np.float32, 10)
    grad[0, 0, 1, 1] = np.inf
    xt = _leaf(x)
    F.adaptive_avg_pool2d(xt, (3, 3)).backward(to_torch(grad).double())
    result = openacl.ops.adaptive_avg_pool2d_backward(_dev(grad), _dev(x)).numpy()
    assert not np.isnan(result).any()
    assert_close(result, _rounded(xt.grad, np.float32))


def test_adaptive_avg_pool2d_backward_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 6, 6), np.float32)
    phase1 = aclnn.adaptive_avg_pool2d_backward_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, phase1, None, x, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 3, 2, 2), np.float32)), x, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 2, 2, 2), BF16)), x, out)
    _expect(ACLNN_ERR_PARAM_INVALID, phase1, _dev(np.ones((1, 2, 2, 2), np.float32)), x,
            openacl.empty((1, 2, 2, 2), np.float32))
