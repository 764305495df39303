"""The C-named aclnn face: same operators, CANN's return-code convention."""

from __future__ import annotations

import numpy as np
import pytest

import openacl
from openacl.compat import aclnn as c
from openacl.errors import (
    ACL_SUCCESS,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def test_every_operator_has_both_c_functions():
    for op in openacl.ops.REGISTRY.values():
        assert callable(getattr(c, f"{op.c_name}GetWorkspaceSize"))
        assert callable(getattr(c, op.c_name))


def test_two_phases_return_codes_and_never_raise():
    x = openacl.to_device(np.arange(4, dtype=np.float32))
    out = openacl.empty((4,), np.float32)
    workspace_size, executor, ret = c.aclnnMulGetWorkspaceSize(x, x, out)
    assert (workspace_size, ret) == (0, ACL_SUCCESS) and executor != 0
    assert c.aclnnMul(0, workspace_size, executor, 0) == ACL_SUCCESS
    np.testing.assert_array_equal(out.numpy(), np.arange(4) ** 2)
    assert c.aclnnMul(0, workspace_size, executor, 0) == ACLNN_ERR_INNER_NULLPTR
    assert "single-use" in openacl.get_recent_err_msg()
    assert c.aclnnMulGetWorkspaceSize(x, None, out) == (0, 0, ACLNN_ERR_PARAM_NULLPTR)
    assert "'other'" in openacl.get_recent_err_msg()
    assert c.aclnnMulGetWorkspaceSize(x)[-1] == ACLNN_ERR_PARAM_INVALID  # too few arguments
    assert openacl.get_recent_err_msg() is not None


def test_repeatable_executor_and_tensor_functions():
    dims = [2, 3]
    ptr = openacl.rt.malloc(24)
    tensor = c.aclCreateTensor(dims, openacl.ACL_FLOAT, None, 0, openacl.ACL_FORMAT_ND, dims, ptr)
    assert tensor != 0
    assert c.aclGetViewShape(tensor) == ((2, 3), ACL_SUCCESS)
    assert c.aclCreateTensor(dims, 99, None, 0, openacl.ACL_FORMAT_ND, dims, ptr) == 0
    assert "dataType" in openacl.get_recent_err_msg()
    out = openacl.empty((2, 3), np.float32)
    openacl.rt.memset(ptr, 24, 0, 24)
    _, executor, ret = c.aclnnExpGetWorkspaceSize(tensor, out)
    assert ret == ACL_SUCCESS
    assert c.aclSetAclOpExecutorRepeatable(executor) == ACL_SUCCESS
    for _ in range(3):
        assert c.aclnnExp(0, 0, executor, 0) == ACL_SUCCESS
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 3), np.float32))
    assert c.aclDestroyAclOpExecutor(executor) == ACL_SUCCESS
    assert c.aclnnExp(0, 0, executor, 0) == ACLNN_ERR_INNER_NULLPTR
    assert c.aclDestroyTensor(tensor) == ACL_SUCCESS
    assert c.aclDestroyTensor(tensor) != ACL_SUCCESS
    openacl.rt.free(ptr)
