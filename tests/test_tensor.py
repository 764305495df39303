"""aclTensor, scalars, arrays and lists, TensorDesc and DataBuffer, and the Pythonic Tensor:
creation rules, getters, destruction, host round trips, strided views and DLPack."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import openacl
from openacl import rt
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.tensor import lookup_scalar, lookup_tensor_desc
from openacl.util import numpy_to_ptr

F32 = DataType.ACL_FLOAT
ND = Format.ACL_FORMAT_ND


def expect_invalid(fn, *args) -> str:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == ACL_ERROR_INVALID_PARAM, str(info.value)
    return info.value.message


@pytest.fixture
def storage(runtime):
    """A 24-byte device allocation (six float32)."""
    ptr = rt.malloc(24)
    yield ptr
    rt.free(ptr)


# -- aclTensor --------------------------------------------------------------------------------
def test_create_tensor_defaults(runtime):
    t = openacl.create_tensor([2, 3], F32)
    assert openacl.get_view_shape(t) == (2, 3)
    assert openacl.get_storage_shape(t) == (2, 3)
    assert openacl.get_view_strides(t) == (3, 1)
    assert openacl.get_view_offset(t) == 0
    assert openacl.get_format(t) == ND
    assert openacl.get_data_type(t) == F32
    assert openacl.get_raw_tensor_addr(t) == 0
    openacl.destroy_tensor(t)


def test_create_tensor_full(runtime, storage):
    t = openacl.create_tensor([3, 2], DataType.ACL_FLOAT16, [1, 3], 1, Format.ACL_FORMAT_NCHW,
                              [8], storage)
    assert openacl.get_view_shape(t) == (3, 2)
    assert openacl.get_view_strides(t) == (1, 3)
    assert openacl.get_view_offset(t) == 1
    assert openacl.get_storage_shape(t) == (8,)
    assert openacl.get_format(t) == Format.ACL_FORMAT_NCHW
    assert openacl.get_data_type(t) == DataType.ACL_FLOAT16
    assert openacl.get_raw_tensor_addr(t) == storage
    openacl.destroy_tensor(t)


def test_strided_view_defaults_storage_to_its_span(runtime):
    t = openacl.create_tensor([2, 2], F32, [4, 1], 5)
    assert openacl.get_storage_shape(t) == (11,)
    openacl.destroy_tensor(t)


def test_view_past_storage(runtime):
    message = expect_invalid(openacl.create_tensor, [2, 3], F32, [3, 1], 1, ND, [2, 3], 0)
    assert "'viewDims'" in message
    expect_invalid(openacl.create_tensor, [2, 3], F32, [4, 1], 0, ND, [6], 0)


def test_storage_bigger_than_allocation(runtime):
    small = rt.malloc(16)
    message = expect_invalid(openacl.create_tensor, [2, 3], F32, None, 0, ND, [2, 3], small)
    assert "tensorData" in message
    rt.free(small)


def test_storage_on_freed_or_wild_data(runtime):
    ptr = rt.malloc(24)
    rt.free(ptr)
    expect_invalid(openacl.create_tensor, [6], F32, None, 0, ND, [6], ptr)
    expect_invalid(openacl.create_tensor, [6], F32, None, 0, ND, [6], 0xDEAD0000)


@pytest.mark.parametrize("dims, strides, offset", [
    ([-1, 2], None, 0), ([2, 2], [-1, 1], 0), ([2, 2], [2, 1], -1),
    ([2, 2], [1], 0), ([2], [1, 1], 0), ([2.0], None, 0), ([True], None, 0),
])
def test_create_tensor_bad_arguments(runtime, dims, strides, offset):
    expect_invalid(openacl.create_tensor, dims, F32, strides, offset)


def test_stride_length_mismatch_names_stride(runtime):
    assert "'stride'" in expect_invalid(openacl.create_tensor, [2, 3], F32, [1])


def test_raw_tensor_addr(runtime, storage):
    t = openacl.create_tensor([6], F32)
    openacl.set_raw_tensor_addr(t, storage)
    assert openacl.get_raw_tensor_addr(t) == storage
    small = rt.malloc(8)
    expect_invalid(openacl.set_raw_tensor_addr, t, small)
    assert openacl.get_raw_tensor_addr(t) == storage
    openacl.set_raw_tensor_addr(t, 0)
    assert openacl.get_raw_tensor_addr(t) == 0
    openacl.destroy_tensor(t)
    rt.free(small)


def test_destroyed_tensor(runtime):
    t = openacl.create_tensor([2], F32)
    openacl.destroy_tensor(t)
    assert "'tensor'" in expect_invalid(openacl.get_view_shape, t)
    expect_invalid(openacl.destroy_tensor, t)
    expect_invalid(openacl.get_view_shape, 12345)


def test_handle_kind_is_checked(runtime):
    scalar = openacl.create_scalar(1, DataType.ACL_INT32)
    expect_invalid(openacl.get_view_shape, scalar)
    expect_invalid(openacl.destroy_tensor, scalar)
    openacl.destroy_scalar(scalar)


# -- scalars, arrays and lists ----------------------------------------------------------------
def test_scalars(runtime):
    s = openacl.create_scalar(3, DataType.ACL_INT8)
    value = lookup_scalar(s).value
    assert value == 3 and value.dtype == np.int8
    openacl.destroy_scalar(s)
    bf = openacl.create_scalar(1.5, DataType.ACL_BF16)
    assert lookup_scalar(bf).value.dtype == ml_dtypes.bfloat16
    assert float(lookup_scalar(bf).value) == 1.5
    openacl.destroy_scalar(bf)
    flag = openacl.create_scalar(True, DataType.ACL_BOOL)
    assert lookup_scalar(flag).value.dtype == np.bool_
    openacl.destroy_scalar(flag)
    expect_invalid(openacl.destroy_scalar, s)


@pytest.mark.parametrize("value, data_type", [
    (300, DataType.ACL_INT8), (-1, DataType.ACL_UINT8), (1.5, DataType.ACL_INT32),
    ("3", DataType.ACL_INT32), (1j, DataType.ACL_FLOAT),
])
def test_bad_scalars(runtime, value, data_type):
    assert "'value'" in expect_invalid(openacl.create_scalar, value, data_type)


def test_arrays(runtime):
    ints = openacl.create_int_array([1, 2, 3])
    floats = openacl.create_float_array([1.0, 2])
    bools = openacl.create_bool_array([True, False, True, True])
    empty = openacl.create_int_array([])
    assert openacl.get_int_array_size(ints) == 3
    assert openacl.get_float_array_size(floats) == 2
    assert openacl.get_bool_array_size(bools) == 4
    assert openacl.get_int_array_size(empty) == 0
    expect_invalid(openacl.get_float_array_size, ints)
    for destroy, handle in [(openacl.destroy_int_array, ints),
                            (openacl.destroy_float_array, floats),
                            (openacl.destroy_bool_array, bools),
                            (openacl.destroy_int_array, empty)]:
        destroy(handle)
    expect_invalid(openacl.get_int_array_size, ints)


@pytest.mark.parametrize("create, values", [
    (openacl.create_int_array, [1, 2.5]), (openacl.create_int_array, [True]),
    (openacl.create_int_array, [1 << 70]), (openacl.create_float_array, ["1"]),
    (openacl.create_bool_array, [1, 0]), (openacl.create_int_array, None),
])
def test_bad_arrays(runtime, create, values):
    expect_invalid(create, values)


def test_tensor_and_scalar_lists(runtime):
    tensors = [openacl.create_tensor([2], F32) for _ in range(3)]
    scalars = [openacl.create_scalar(i, DataType.ACL_INT64) for i in range(2)]
    tensor_list = openacl.create_tensor_list(tensors)
    scalar_list = openacl.create_scalar_list(scalars)
    assert openacl.get_tensor_list_size(tensor_list) == 3
    assert openacl.get_scalar_list_size(scalar_list) == 2
    assert "value[1]" in expect_invalid(openacl.create_tensor_list, [tensors[0], 0xBAD])
    assert "value[2]" in expect_invalid(openacl.create_tensor_list,
                                        [tensors[0], tensors[1], scalars[0]])
    assert "value[0]" in expect_invalid(openacl.create_scalar_list, [tensors[0]])
    openacl.destroy_tensor_list(tensor_list)
    openacl.destroy_scalar_list(scalar_list)
    expect_invalid(openacl.get_tensor_list_size, tensor_list)
    assert openacl.get_view_shape(tensors[0]) == (2,)  # lists do not own their elements


# -- TensorDesc (aclop) -----------------------------------------------------------------------
def test_tensor_desc_fixed_shape(runtime):
    desc = openacl.create_tensor_desc(DataType.ACL_FLOAT16, [2, 3], Format.ACL_FORMAT_NCHW)
    assert openacl.get_tensor_desc_type(desc) == DataType.ACL_FLOAT16
    assert openacl.get_tensor_desc_format(desc) == Format.ACL_FORMAT_NCHW
    assert openacl.get_tensor_desc_num_dims(desc) == 2
    assert openacl.get_tensor_desc_element_count(desc) == 6
    assert openacl.get_tensor_desc_size(desc) == 12
    assert openacl.get_tensor_desc_dim_v2(desc, 1) == 3
    assert openacl.get_tensor_desc_dim(desc, 0) == 2
    assert "'index'" in expect_invalid(openacl.get_tensor_desc_dim_v2, desc, 2)
    expect_invalid(openacl.get_tensor_desc_dim_v2, desc, -1)
    assert openacl.get_tensor_desc_dim_range(desc, 1) == (3, 3)
    openacl.destroy_tensor_desc(desc)
    expect_invalid(openacl.get_tensor_desc_type, desc)


def test_tensor_desc_dynamic_dims(runtime):
    desc = openacl.create_tensor_desc(F32, [-1, 4], ND)
    assert openacl.get_tensor_desc_num_dims(desc) == 2
    assert openacl.get_tensor_desc_dim_v2(desc, 0) == -1
    assert openacl.get_tensor_desc_element_count(desc) == 0
    assert openacl.get_tensor_desc_size(desc) == 0
    openacl.set_tensor_shape_range(desc, [[1, 8], [4, 4]])
    assert openacl.get_tensor_desc_dim_range(desc, 0) == (1, 8)
    expect_invalid(openacl.set_tensor_shape_range, desc, [[1, 8]])
    expect_invalid(openacl.set_tensor_shape_range, desc, [[8, 1], [4, 4]])
    openacl.set_tensor_shape(desc, [5, 4])
    assert openacl.get_tensor_desc_element_count(desc) == 20
    assert openacl.get_tensor_desc_size(desc) == 80
    openacl.destroy_tensor_desc(desc)


def test_set_tensor_shape_drops_stale_ranges(runtime):
    desc = openacl.create_tensor_desc(F32, [-1, 4], ND)
    openacl.set_tensor_shape_range(desc, [[1, 8], [4, 4]])
    openacl.set_tensor_shape(desc, [2, 3, 4])  # a new rank: the old ranges no longer apply
    assert openacl.get_tensor_desc_dim_range(desc, 2) == (4, 4)
    assert openacl.get_tensor_desc_dim_range(desc, 0) == (2, 2)
    openacl.destroy_tensor_desc(desc)


def test_tensor_desc_unknown_rank(runtime):
    desc = openacl.create_tensor_desc(F32, [-2], ND)
    assert openacl.get_tensor_desc_num_dims(desc) == -2
    assert openacl.get_tensor_desc_element_count(desc) == 0
    expect_invalid(openacl.get_tensor_desc_dim_v2, desc, 0)
    openacl.destroy_tensor_desc(desc)
    expect_invalid(openacl.create_tensor_desc, F32, [-2, 3], ND)
    expect_invalid(openacl.create_tensor_desc, F32, [-3], ND)


def test_tensor_desc_setters(runtime):
    desc = openacl.create_tensor_desc(DataType.ACL_INT32, [4], ND)
    assert openacl.get_tensor_desc_name(desc) == ""
    openacl.set_tensor_desc_name(desc, "x")
    assert openacl.get_tensor_desc_name(desc) == "x"
    openacl.set_tensor_format(desc, Format.ACL_FORMAT_NHWC)
    assert openacl.get_tensor_desc_format(desc) == Format.ACL_FORMAT_NHWC
    expect_invalid(openacl.set_tensor_format, desc, 12345)
    values = np.arange(4, dtype=np.int32)
    openacl.set_tensor_const(desc, numpy_to_ptr(values), values.nbytes)
    assert lookup_tensor_desc(desc).const_data == values.tobytes()
    expect_invalid(openacl.set_tensor_const, desc, numpy_to_ptr(values), 32)
    openacl.destroy_tensor_desc(desc)


# -- DataBuffer -------------------------------------------------------------------------------
def test_data_buffer(runtime):
    empty = openacl.create_data_buffer(0, 0)
    assert openacl.get_data_buffer_addr(empty) == 0
    assert openacl.get_data_buffer_size_v2(empty) == 0
    assert "'data'" in expect_invalid(openacl.create_data_buffer, 0, 16)
    ptr, other = rt.malloc(64), rt.malloc(32)
    buf = openacl.create_data_buffer(ptr, 64)
    assert (openacl.get_data_buffer_addr(buf), openacl.get_data_buffer_size(buf)) == (ptr, 64)
    expect_invalid(openacl.create_data_buffer, ptr, 128)
    openacl.update_data_buffer(buf, other, 32)
    assert (openacl.get_data_buffer_addr(buf), openacl.get_data_buffer_size(buf)) == (other, 32)
    expect_invalid(openacl.update_data_buffer, buf, other, 64)
    for handle in (buf, empty):
        openacl.destroy_data_buffer(handle)
    expect_invalid(openacl.get_data_buffer_addr, buf)
    rt.free(ptr)
    rt.free(other)


# -- the Pythonic Tensor ------------------------------------------------------------------------
@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.linspace(-2, 2, 7).astype(np.float16),
    np.arange(6).astype(ml_dtypes.bfloat16).reshape(2, 3),
    np.array([-128, 0, 127], dtype=np.int8),
    np.array([[1 << 40, -5]], dtype=np.int64),
    np.array([True, False, True]),
    np.array(3.5, dtype=np.float32),
    np.zeros((0, 3), dtype=np.float32),
], ids=["float32", "float16", "bfloat16", "int8", "int64", "bool", "0-dim", "empty"])
def test_to_device_round_trip(runtime, array):
    with openacl.to_device(array) as tensor:
        assert tensor.shape == array.shape
        assert tensor.dtype == array.dtype
        back = tensor.numpy()
        assert back.shape == array.shape and back.dtype == array.dtype
        np.testing.assert_array_equal(back, array)
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_to_device_on_stream(runtime):
    array = np.arange(1000, dtype=np.float32)
    stream = openacl.Stream()
    tensor = openacl.to_device(array, stream=stream)
    np.testing.assert_array_equal(tensor.numpy(stream=stream), array)
    np.testing.assert_array_equal(tensor.numpy(), array)
    tensor.free()
    stream.destroy()


def test_strided_views_over_an_allocation(runtime):
    base = openacl.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    transpose = openacl.Tensor(openacl.create_tensor([4, 3], F32, [1, 4], 0, ND, [3, 4],
                                                     base.data_ptr))
    np.testing.assert_array_equal(transpose.numpy(), np.arange(12).reshape(3, 4).T)
    window = openacl.Tensor(openacl.create_tensor([2, 2], F32, [4, 1], 5, ND, [12],
                                                  base.data_ptr))
    np.testing.assert_array_equal(window.numpy(), [[5, 6], [9, 10]])
    broadcast = openacl.Tensor(openacl.create_tensor([3, 2], F32, [0, 1], 2, ND, [12],
                                                     base.data_ptr))
    np.testing.assert_array_equal(broadcast.numpy(), [[2, 3]] * 3)
    for tensor in (transpose, window, broadcast):
        tensor.free()
    assert openacl.memory_stats()["allocation.all.current"] == 1  # views own no memory
    base.free()


def test_dlpack_export_is_zero_copy(runtime, host_addressable):
    tensor = openacl.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    view = np.from_dlpack(tensor)
    assert view.shape == (2, 3)
    view[1, 2] = 42.0
    assert tensor.numpy()[1, 2] == 42.0
    tensor.free()


def test_dlpack_export_of_strided_view(runtime, host_addressable):
    base = openacl.to_device(np.arange(12, dtype=np.int32).reshape(3, 4))
    transpose = openacl.Tensor(openacl.create_tensor([4, 3], DataType.ACL_INT32, [1, 4], 0,
                                                     ND, [3, 4], base.data_ptr))
    np.testing.assert_array_equal(np.from_dlpack(transpose), np.arange(12).reshape(3, 4).T)
    transpose.free()
    base.free()


def test_dlpack_export_of_device_memory(runtime, backend):
    """On cuda a tensor exports CUDA memory (kDLCUDA), zero-copy into CuPy."""
    if backend == "cpu":
        pytest.skip("host memory: test_dlpack_export_is_zero_copy")
    tensor = openacl.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert tensor.__dlpack_device__() == (2, 0)
    if backend == "cuda":  # the simulation's arrays cannot travel through a real capsule
        import cupy

        view = cupy.from_dlpack(tensor)
        view[1, 2] = 42.0
        assert tensor.numpy()[1, 2] == 42.0
    tensor.free()


def test_from_dlpack_wraps_without_copy(runtime):
    array = np.arange(8, dtype=np.float32)
    tensor = openacl.from_dlpack(array)
    assert tensor.data_ptr == array.ctypes.data
    assert tensor.shape == (8,) and tensor.data_type == F32
    array[3] = -1.0
    assert tensor.numpy()[3] == -1.0
    tensor.free()


def test_from_dlpack_strided(runtime):
    array = np.arange(10, dtype=np.int64)[::2]
    tensor = openacl.from_dlpack(array)
    assert tensor.strides == (2,)
    np.testing.assert_array_equal(tensor.numpy(), [0, 2, 4, 6, 8])
    tensor.free()


def test_from_dlpack_rejects_non_exporters(runtime):
    expect_invalid(openacl.from_dlpack, [1, 2, 3])


def test_tensor_free_is_idempotent(runtime):
    tensor = openacl.to_device(np.ones(4, np.float32))
    handle = tensor.handle
    tensor.free()
    tensor.free()
    assert tensor.handle is None
    expect_invalid(openacl.get_view_shape, handle)
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_tensor_context_manager(runtime):
    with openacl.to_device(np.ones(4, np.float32)) as tensor:
        assert int(tensor) == tensor.handle
        assert openacl.get_view_shape(tensor) == (4,)
    assert tensor.handle is None
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_empty(runtime):
    tensor = openacl.empty((2, 5), np.int16)
    assert tensor.shape == (2, 5) and tensor.dtype == np.int16 and tensor.nbytes == 20
    tensor.free()
