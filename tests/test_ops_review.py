"""Regression tests for the operator-library review: overlapping outputs, integer pow,
scalar overflow, executor address updates, aclop handle leaks, custom-op error codes and
KernelLaunch memory capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from device_io import read_device
from op_harness import from_torch, to_torch
from openacl import aclnn, custom, rt
from openacl.errors import (
    ACLNN_ERR_INNER_INFERSHAPE_ERROR,
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    AclError,
)
from openacl.tensor import Tensor, create_tensor


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _view(base: Tensor, shape, strides, offset) -> Tensor:
    handle = create_tensor(shape, base.data_type, strides, offset, openacl.ACL_FORMAT_ND,
                           (int(np.prod(base.shape)),), base.data_ptr)
    return Tensor(handle, keepalive=base)


def test_an_output_partly_overlapping_an_input_is_refused():
    buffer = openacl.to_device(np.arange(6, dtype=np.float32))
    tail = _view(buffer, (3,), (1,), 1)  # elements 1..3
    head = _view(buffer, (3,), (1,), 0)  # elements 0..2: overlaps tail partly
    ones = openacl.to_device(np.ones(3, np.float32))
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(tail, ones, None, head)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "overlaps" in info.value.message


def test_the_same_view_as_input_and_output_is_an_in_place_call():
    data = openacl.to_device(np.arange(4, dtype=np.float32))
    ones = openacl.to_device(np.ones(4, np.float32))
    workspace_size, executor = aclnn.add_get_workspace_size(data, ones, None, data)
    aclnn.add(0, workspace_size, executor, 0)
    np.testing.assert_array_equal(data.numpy(), np.arange(4) + 1)


def test_an_output_with_a_zero_stride_is_refused():
    base = openacl.to_device(np.zeros(4, np.float32))
    broadcast = _view(base, (3, 4), (0, 1), 0)
    source = openacl.to_device(np.ones((3, 4), np.float32))
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(source, source, None, broadcast)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "zero stride" in info.value.message


def test_integer_pow_with_negative_exponents_follows_torch():
    base = np.array([1, -1, -1, 2, 3, 0], np.int64)
    exponent = np.array([-1, -1, -2, -1, 2, 3], np.int64)
    golden = from_torch(torch.pow(to_torch(base), to_torch(exponent)))
    result = openacl.ops.pow_tensor_tensor(openacl.to_device(base), openacl.to_device(exponent))
    np.testing.assert_array_equal(result.numpy(), golden)
    with pytest.raises(AclError) as info:  # knowable in phase 1 for a scalar exponent
        openacl.ops.pow_tensor_scalar(openacl.to_device(base), -1)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'exponent'" in info.value.message


def test_an_out_of_range_integer_scalar_is_refused():
    small = openacl.to_device(np.array([0, 1, 5], np.int8))
    with pytest.raises(AclError) as info:
        openacl.ops.clamp_min(small, openacl.create_scalar(300, openacl.ACL_INT64))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "overflow" in info.value.message


def test_a_failed_address_update_leaves_the_tensor_alone():
    x = openacl.to_device(np.ones(8, np.float32))
    out = openacl.empty((8,), np.float32)
    _, executor = aclnn.exp_get_workspace_size(x, out)
    aclnn.set_executor_repeatable(executor)
    too_small = rt.malloc(4)
    before = openacl.get_raw_tensor_addr(x)
    with pytest.raises(AclError) as info:
        aclnn.set_input_tensor_addr(executor, 0, x, too_small)
    assert "'addr'" in info.value.message
    assert openacl.get_raw_tensor_addr(x) == before
    aclnn.destroy_executor(executor)
    rt.free(too_small)


def test_create_handle_for_cast_leaks_no_attribute():
    from openacl import op
    from openacl.aclop import OpAttr
    from openacl.runtime import core

    src = openacl.create_tensor_desc(openacl.ACL_FLOAT, [4], openacl.ACL_FORMAT_ND)
    dst = openacl.create_tensor_desc(openacl.ACL_FLOAT16, [4], openacl.ACL_FORMAT_ND)
    before = len(core.current().handles.live(OpAttr))
    for _ in range(3):
        op.destroy_handle(op.create_handle_for_cast(src, dst))
    assert len(core.current().handles.live(OpAttr)) == before


def _declare(name: str, tiling, infer=None) -> custom.OpDef:
    declaration = custom.OpDef(name)
    declaration.input("x").data_type([openacl.ACL_FLOAT])
    declaration.output("y").data_type([openacl.ACL_FLOAT])
    declaration.set_tiling(tiling).set_kernel(lambda x, y, workspace, tiling: None)
    if infer is not None:
        declaration.set_infer_shape(infer)
    return declaration


def test_custom_tiling_and_infer_shape_failures_carry_their_codes():
    def broken_tiling(context):
        raise ZeroDivisionError("no cores")

    def broken_infer(context):
        context.output_shapes[0] = (-3,)

    custom.register_op(_declare("ReviewTilingFails", broken_tiling))
    custom.register_op(_declare("ReviewInferFails", lambda ctx: None, broken_infer))
    x = openacl.to_device(np.ones(4, np.float32))
    y = openacl.empty((4,), np.float32)
    try:
        with pytest.raises(AclError) as info:
            aclnn.review_tiling_fails_get_workspace_size(x, y)
        assert info.value.code == ACLNN_ERR_INNER_TILING_ERROR
        assert "broken_tiling" in info.value.message
        with pytest.raises(AclError) as info:
            aclnn.review_infer_fails_get_workspace_size(x, y)
        assert info.value.code == ACLNN_ERR_INNER_INFERSHAPE_ERROR
    finally:
        custom.unregister_op("ReviewTilingFails")
        custom.unregister_op("ReviewInferFails")


def test_tensor_repr_after_finalize_does_not_raise():
    tensor = openacl.to_device(np.ones(2, np.float32))
    with pytest.warns(openacl.LeakWarning):  # the tensor outlives the runtime on purpose
        openacl.finalize()
    openacl.init()
    assert "finalized" in repr(tensor)


def test_kernel_launch_keeps_its_memory_when_freed_while_queued(gate):
    @custom.kernel
    def fill_seven(pointer, count):
        custom.global_buffer(pointer, np.float32, count)[:] = 7

    stream = rt.create_stream()
    target = rt.malloc(1024)
    rt.launch_host_func(stream, gate.task)
    fill_seven[1, stream](target, 256)
    rt.free(target)
    newcomer = rt.malloc(1024)  # must not be the block the queued kernel writes
    rt.memset(newcomer, 1024, 0, 1024)
    gate.open()
    rt.synchronize_stream(stream)
    assert read_device(newcomer, 1024) == bytes(1024)
    rt.free(newcomer)


def test_in_place_arguments_count_as_inputs_and_outputs():
    target = openacl.to_device(np.zeros(4, np.float32))
    other = openacl.to_device(np.ones(4, np.float32))
    moved = openacl.to_device(np.full(4, 10, np.float32))
    _, executor = aclnn.inplace_add_get_workspace_size(target, other, None)
    aclnn.set_executor_repeatable(executor)
    aclnn.set_input_tensor_addr(executor, 0, target, moved.data_ptr)  # index 0 is selfRef
    aclnn.inplace_add(0, 0, executor, 0)
    np.testing.assert_array_equal(moved.numpy(), np.full(4, 11, np.float32))
    np.testing.assert_array_equal(other.numpy(), np.ones(4, np.float32))
    aclnn.destroy_executor(executor)


def test_a_wrong_argument_list_is_an_acl_error_in_every_face():
    from openacl.compat import aclnn as c_aclnn

    x = openacl.to_device(np.ones(2, np.float32))
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(x)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'other'" in info.value.message
    with pytest.raises(AclError) as info:
        openacl.ops.add(x, x, bogus=1)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "bogus" in info.value.message
    assert c_aclnn.aclnnAddGetWorkspaceSize(x)[-1] == ACLNN_ERR_PARAM_INVALID
