"""Histc and Bincount against PyTorch CPU; their refusals with CANN's codes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import INTS, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HISTC_FLOATS = [np.dtype(np.float16), np.dtype(np.float32)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _code(fn, *args) -> int:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value.code


# -- histc -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HISTC_FLOATS, ids=str)
@pytest.mark.parametrize("bins,low,high", [(10, -2.0, 2.0), (7, 0.0, 3.5), (100, 0, 0),
                                           (1, -4.0, 4.0), (3, 5.0, 9.0)])
def test_histc_matches_torch(dtype, bins, low, high):
    x = random_array((6, 50), dtype, np.random.default_rng(1))
    if low != high:  # NaN is left out; the top edge goes to the last bin
        x[0, :3] = [np.nan, low, high]  # (torch refuses NaN data when it takes its range)
    expected = from_torch(torch.histc(to_torch(x).double(), bins, low, high).to(
        to_torch(x).dtype))
    assert_close(openacl.ops.histc(_dev(x), bins, low, high).numpy(), expected)


def test_histc_of_integers_degenerate_range_and_strided_input():
    ints = random_array((40,), np.int32, np.random.default_rng(2), 0, 9)
    expected = torch.histc(to_torch(ints).double(), 5, 0, 10).to(torch.int32)
    np.testing.assert_array_equal(openacl.ops.histc(_dev(ints), 5, 0, 10).numpy(),
                                  from_torch(expected))
    flat = np.full((4,), 3.0, np.float32)  # data range empty too: [2, 4]
    np.testing.assert_array_equal(openacl.ops.histc(_dev(flat), 4).numpy(),
                                  from_torch(torch.histc(to_torch(flat), 4)))
    x = random_array((3, 5), np.float32)
    np.testing.assert_array_equal(openacl.ops.histc(strided(x), 6, -4, 4).numpy(),
                                  from_torch(torch.histc(to_torch(x), 6, -4, 4)))


def test_histc_refusals():
    x = _dev(np.ones(5, np.float32))
    assert _code(openacl.ops.histc, x, 0) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.histc, x, 4, 3.0, 1.0) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.histc, x, 4, 0.0, float("inf")) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.histc, _dev(np.ones(5, np.float64)), 4) == ACLNN_ERR_PARAM_INVALID
    low, high = openacl.create_scalar(0.0, openacl.ACL_FLOAT), openacl.create_scalar(
        1.0, openacl.ACL_FLOAT)
    assert _code(aclnn.histc_get_workspace_size, x, 4, low, high,
                 openacl.empty((5,), np.float32)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.histc_get_workspace_size, x, 4, None, high,
                 openacl.empty((4,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR


# -- bincount ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("weights", [None, np.float32, np.float64, np.int32, np.bool_])
def test_bincount_matches_torch(dtype, weights):
    rng = np.random.default_rng(3)
    x = random_array((200,), dtype, rng, 0, 9)
    w = random_array((200,), weights, rng) if weights is not None else None
    expected = from_torch(torch.bincount(to_torch(x), None if w is None else to_torch(w), 12))
    result = openacl.ops.bincount(_dev(x), None if w is None else _dev(w), 12).numpy()
    assert_close(result, expected, f"{dtype} {weights}")


def test_bincount_into_a_given_out_and_refusals():
    x = np.array([0, 4, 4, 1], np.int64)
    out, source = openacl.empty((7,), np.int32), _dev(x)  # (kept alive until it ran)
    workspace, executor = aclnn.bincount_get_workspace_size(source, None, 2, out)
    aclnn.bincount(0, workspace, executor, 0)
    openacl.rt.synchronize_device()
    np.testing.assert_array_equal(out.numpy(), [1, 1, 0, 0, 2, 0, 0])  # zeros past the max
    with pytest.raises(AclError):  # out shorter than max(self) + 1: the stream fails
        openacl.ops.bincount(_dev(x), None, 3).numpy()
        openacl.rt.synchronize_device()
    with pytest.raises(AclError):  # negative values
        openacl.ops.bincount(_dev(np.array([1, -1], np.int32)), None, 3).numpy()
        openacl.rt.synchronize_device()
    assert _code(openacl.ops.bincount, _dev(np.ones((2, 2), np.int32))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.bincount, _dev(np.ones(3, np.float32))) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.bincount, _dev(x), _dev(np.ones(3, np.float32))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.bincount, _dev(x), None, -1) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.bincount_get_workspace_size, _dev(x), None, 8,
                 openacl.empty((7,), np.int64)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.bincount_get_workspace_size, None, None, 8,
                 openacl.empty((8,), np.int64)) == ACLNN_ERR_PARAM_NULLPTR
