"""Norm and LinalgVectorNorm against torch.linalg.vector_norm in float64, rounded once."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

NORM_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]
ORDERS = [2.0, 1.0, 0.0, 3.0, 0.5, math.inf, -math.inf]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _golden(x, p, dims, keep, dtype):
    wide = to_torch(x).double()
    result = torch.linalg.vector_norm(wide, p, dims or None, keep)
    return from_torch(result.to(TORCH_DTYPES[np.dtype(dtype)]))


@pytest.mark.parametrize("p", ORDERS, ids=str)
@pytest.mark.parametrize("dims,keep", [([1], False), ([0, -1], True), ([], False)], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_norm_matches_torch(p, dims, keep, dtype):
    x = random_array((3, 5, 4), dtype, np.random.default_rng(1), -2, 2)
    x[0, 0, 0] = 0  # p = 0 counts non-zeros
    result = openacl.ops.norm(_dev(x), p, dims, keep)
    assert_close(result.numpy(), _golden(x, p, dims, keep, dtype), f"norm p={p} {dtype}")


@pytest.mark.parametrize("source,dtype", [(np.float32, np.float32), (np.float16, np.float32),
                                          (np.float16, np.float16), (BF16, np.float32),
                                          (BF16, BF16)], ids=str)
def test_linalg_vector_norm_computes_in_dtype(source, dtype):
    x = random_array((4, 6), source, np.random.default_rng(2))
    result = openacl.ops.linalg_vector_norm(_dev(x), 2.0, [1], False, dtype=np.dtype(dtype))
    assert result.numpy().dtype == np.dtype(dtype)
    assert_close(result.numpy(), _golden(x, 2.0, [1], False, dtype))


def test_infinite_order_as_int32_max_and_special_values():
    x = np.array([[1.0, -np.inf, 2.0], [np.nan, 1.0, 0.0]], np.float32)
    for p in (2.0, 1.0, float(2**31 - 1), -float(2**31 - 1)):
        want = _golden(x, math.copysign(math.inf, p) if abs(p) > 1e9 else p, [1], False,
                       np.float32)
        assert_close(openacl.ops.norm(_dev(x), p, [1], False).numpy(), want)


def test_two_phase_form_writes_out():
    x = random_array((2, 3), np.float32, np.random.default_rng(3))
    out = openacl.empty((2, 1), np.float32)
    p = openacl.create_scalar(2.0, openacl.ACL_FLOAT)
    source = _dev(x)
    ws, exe = aclnn.norm_get_workspace_size(source, p, [1], True, out)
    aclnn.norm(0, ws, exe, 0)
    assert_close(out.numpy(), _golden(x, 2.0, [1], True, np.float32))


def test_errors():
    x = _dev(np.ones((2, 3), np.float32))
    cases = [
        (lambda: openacl.ops.norm(None, 2.0, [0], False), ACLNN_ERR_PARAM_NULLPTR),
        (lambda: openacl.ops.norm(x, 2.0, None, False), ACLNN_ERR_PARAM_NULLPTR),
        (lambda: openacl.ops.norm(_dev(np.ones(3, np.int32)), 2.0, [0], False),
         ACLNN_ERR_PARAM_INVALID),
        (lambda: openacl.ops.norm(x, 2.0, [2], False), ACLNN_ERR_PARAM_INVALID),
        (lambda: openacl.ops.norm(x, 2.0, [1, -1], False), ACLNN_ERR_PARAM_INVALID),
        (lambda: openacl.ops.norm(x, math.nan, [1], False), ACLNN_ERR_PARAM_INVALID),
        (lambda: openacl.ops.norm(_dev(np.ones((2, 0), np.float32)), math.inf, [1], False),
         ACLNN_ERR_PARAM_INVALID),
        (lambda: openacl.ops.linalg_vector_norm(x, 2.0, [1], False, dtype=np.float16),
         ACLNN_ERR_PARAM_INVALID),
    ]
    for call, code in cases:
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == code
    two = openacl.create_scalar(2.0, openacl.ACL_FLOAT)
    out = openacl.empty((2,), np.float16)  # dtype argument float32, out float16
    with pytest.raises(AclError) as info:
        aclnn.linalg_vector_norm_get_workspace_size(x, two, [1], False, openacl.ACL_FLOAT,
                                                    out)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    out = openacl.empty((3,), np.float32)  # wrong shape
    with pytest.raises(AclError) as info:
        aclnn.norm_get_workspace_size(x, two, [1], False, out)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


# -- Renorm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("p,dim,max_norm", [(1.0, 0, 5.0), (2.0, 1, 1.0), (3.0, -1, 0.5),
                                            (math.inf, 2, 0.3), (2.0, 0, 0.0)], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_renorm_and_inplace_renorm_match_torch(p, dim, max_norm, dtype):
    x = random_array((3, 4, 5), dtype, np.random.default_rng(4), -2, 2)
    golden = from_torch(torch.renorm(to_torch(x).double(), p, dim, max_norm)
                        .to(TORCH_DTYPES[np.dtype(dtype)]))
    assert_close(openacl.ops.renorm(_dev(x), p, dim, max_norm).numpy(), golden)
    target = _dev(x)
    openacl.ops.inplace_renorm(target, p, dim, max_norm)
    assert_close(target.numpy(), golden)


def test_renorm_errors():
    x = _dev(np.ones((2, 3), np.float32))
    for args in ((x, -1.0, 0, 1.0), (x, 2.0, 2, 1.0), (x, 2.0, 0, -1.0),
                 (_dev(np.ones((2, 3), np.int32)), 2.0, 0, 1.0)):
        with pytest.raises(AclError) as info:
            openacl.ops.renorm(*args)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(AclError) as info:
        openacl.ops.renorm(None, 2.0, 0, 1.0)
    assert info.value.code == ACLNN_ERR_PARAM_NULLPTR
