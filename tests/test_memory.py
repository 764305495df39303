"""The public memory API on the CPU backend: malloc/free, every memcpy kind, memset, policies,
get_mem_info, out-of-memory, statistics, record_stream, buffer wrappers and registration."""

from __future__ import annotations

import os

import numpy as np
import pytest

import openacl
from device_io import read_device
from openacl import rt
from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_MEMORY_ALLOCATION, AclError
from openacl.util import bytes_to_ptr, numpy_to_ptr, ptr_to_bytes, ptr_to_numpy

MiB = 1 << 20
GATE_WAIT_S = 5.0  # bounded wait for a gate task to start
H2H, H2D, D2H, D2D, DEFAULT = range(5)


def expect_error(code: int, fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, str(info.value)
    return info.value


def device_with(data: bytes) -> int:
    ptr = rt.malloc(len(data))
    rt.memcpy(ptr, len(data), bytes_to_ptr(data), len(data), H2D)
    return ptr


def host_view(ptr: int, size: int) -> np.ndarray:
    return ptr_to_numpy(ptr, (size,), np.uint8)


@pytest.fixture
def limited_runtime():
    """Inline runtime, one device with a 64 MiB memory limit."""
    openacl.init({"stream_mode": "inline", "device_count": 1, "memory_limit": "64MiB"})
    rt.set_device(0)
    yield


# -- every memcpy kind -------------------------------------------------------------------------
def test_memcpy_host_to_host(runtime):
    src, dst = rt.malloc_host(64), rt.malloc_host(64)
    host_view(src, 64)[:] = np.arange(64, dtype=np.uint8)
    rt.memcpy(dst, 64, src, 64, H2H)
    assert host_view(dst, 64).tolist() == list(range(64))
    rt.free_host(src)
    rt.free_host(dst)


def test_memcpy_host_to_device_and_back(runtime):
    src = np.arange(32, dtype=np.float32)
    dev = rt.malloc(src.nbytes)
    rt.memcpy(dev, src.nbytes, numpy_to_ptr(src), src.nbytes, H2D)
    out = np.zeros_like(src)
    rt.memcpy(numpy_to_ptr(out), out.nbytes, dev, src.nbytes, D2H)
    np.testing.assert_array_equal(out, src)
    rt.free(dev)


def test_memcpy_device_to_device_same_device(runtime):
    a = device_with(b"openacl!" * 8)
    b = rt.malloc(64)
    rt.memcpy(b, 64, a, 64, D2D)
    assert read_device(b, 64) == b"openacl!" * 8
    rt.free(a)
    rt.free(b)


def test_memcpy_device_to_device_across_devices(runtime, two_devices):
    on_0 = device_with(bytes(range(100)))
    rt.set_device(1)
    on_1 = rt.malloc(100)
    assert rt.get_device() == 1
    rt.set_device(0)
    rt.memcpy(on_1, 100, on_0, 100, D2D)
    assert read_device(on_1, 100) == bytes(range(100))
    rt.memcpy(on_0, 100, bytes_to_ptr(bytes(100)), 100, H2D)
    rt.memcpy(on_0, 100, on_1, 100, D2D)
    assert read_device(on_0, 100) == bytes(range(100))
    assert openacl.memory_stats(1)["allocated_bytes.all.current"] == 512
    rt.free(on_1)
    rt.free(on_0)


def test_memcpy_device_to_device_from_second_context(runtime, two_devices):
    on_0 = device_with(b"\x07" * 16)
    with openacl.Context(1):
        on_1 = rt.malloc(16)
        assert rt.get_device() == 1
        rt.memcpy(on_1, 16, on_0, 16, D2D)
    assert read_device(on_1, 16) == b"\x07" * 16
    rt.free(on_1)
    rt.free(on_0)


def test_memcpy_default_kind(runtime):
    data = np.arange(10, dtype=np.int64)
    dev = rt.malloc(data.nbytes)
    rt.memcpy(dev, data.nbytes, numpy_to_ptr(data), data.nbytes, DEFAULT)
    out = np.empty_like(data)
    rt.memcpy(numpy_to_ptr(out), out.nbytes, dev, out.nbytes, DEFAULT)
    np.testing.assert_array_equal(out, data)
    rt.free(dev)


def test_memcpy_partial_count(runtime):
    dev = device_with(bytes(range(16)))
    out = bytearray(16)
    rt.memcpy(bytes_to_ptr(out), 16, dev + 4, 8, D2H)
    assert out == bytes(range(4, 12)) + bytes(8)
    rt.free(dev)


def test_memcpy_async_on_stream(runtime):
    src = np.arange(256, dtype=np.uint8)
    dev = rt.malloc(256)
    out = np.zeros(256, np.uint8)
    stream = rt.create_stream()
    rt.memcpy_async(dev, 256, numpy_to_ptr(src), 256, H2D, stream)
    rt.memcpy_async(numpy_to_ptr(out), 256, dev, 256, D2H, stream)
    rt.synchronize_stream(stream)
    np.testing.assert_array_equal(out, src)
    rt.destroy_stream(stream)
    rt.free(dev)


# -- memset -----------------------------------------------------------------------------------
def test_memset_uses_low_byte(runtime):
    dev = rt.malloc(32)
    rt.memset(dev, 32, 0x1AB, 32)
    assert read_device(dev, 32) == b"\xab" * 32
    rt.memset(dev, 32, -1, 8)
    assert read_device(dev, 32) == b"\xff" * 8 + b"\xab" * 24
    rt.free(dev)


def test_memset_async(runtime):
    dev = rt.malloc(64)
    stream = rt.create_stream()
    rt.memset_async(dev, 64, 0x42, 64, stream)
    rt.synchronize_stream(stream)
    assert read_device(dev, 64) == b"B" * 64
    rt.destroy_stream(stream)
    rt.free(dev)


def test_memset_count_above_max(runtime):
    dev = rt.malloc(16)
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.memset, dev, 8, 0, 16)
    assert "'count'" in err.message and "'maxCount'" in err.message
    rt.free(dev)


# -- argument checks --------------------------------------------------------------------------
def test_count_above_dest_max(runtime):
    a, b = rt.malloc(64), rt.malloc(64)
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.memcpy, a, 32, b, 64, D2D)
    assert "'count'" in err.message and "'destMax'" in err.message
    expect_error(ACL_ERROR_INVALID_PARAM, rt.memcpy_async, a, 32, b, 64, D2D, 0)
    rt.free(a)
    rt.free(b)


@pytest.mark.parametrize("kind", [5, -1, "x", None])
def test_invalid_memcpy_kind(runtime, kind):
    a, b = rt.malloc(16), rt.malloc(16)
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.memcpy, a, 16, b, 16, kind)
    assert "'kind'" in err.message
    rt.free(a)
    rt.free(b)


def test_zero_count_is_a_no_op(runtime):
    dev = device_with(b"\x01" * 16)
    other = device_with(b"\x02" * 16)
    rt.memcpy(dev, 16, other, 0, D2D)
    rt.memset(dev, 16, 0, 0)
    rt.memcpy_async(dev, 16, other, 0, D2D, 0)
    rt.synchronize_stream(0)
    assert read_device(dev, 16) == b"\x01" * 16
    rt.free(dev)
    rt.free(other)


@pytest.mark.parametrize("size", [0, -1])
def test_malloc_bad_size(runtime, size):
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.malloc, size)
    assert "'size'" in err.message
    expect_error(ACL_ERROR_INVALID_PARAM, rt.malloc_host, size)


@pytest.mark.parametrize("policy", [*range(8), 0x100, 0x1000 | 2, 0x100 | 0x1000 | 7])
def test_malloc_policies_accepted(runtime, policy):
    rt.free(rt.malloc(16, policy))


@pytest.mark.parametrize("policy", [0x2000, 99, 8, -1, "x"])
def test_malloc_policies_rejected(runtime, policy):
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.malloc, 16, policy)
    assert "'policy'" in err.message


def test_malloc_alignment(runtime):
    ptrs = [rt.malloc(size) for size in (1, 3, 100, 513, 4097, 2 * MiB, 3 * MiB + 5)]
    ptrs.append(rt.malloc_host(7))
    assert all(ptr % 512 == 0 for ptr in ptrs)
    for ptr in ptrs[:-1]:
        rt.free(ptr)
    rt.free_host(ptrs[-1])


# -- get_mem_info -----------------------------------------------------------------------------
def test_get_mem_info_honours_memory_limit(limited_runtime):
    free, total = rt.get_mem_info(1)  # ACL_HBM_MEM
    assert (free, total) == (64 * MiB, 64 * MiB)
    ptr = rt.malloc(1000)  # reserves a 2 MiB segment
    assert rt.get_mem_info(1) == (62 * MiB, 64 * MiB)
    rt.free(ptr)
    assert rt.get_mem_info(1) == (62 * MiB, 64 * MiB)  # cached blocks still count
    openacl.empty_cache()
    assert rt.get_mem_info(1) == (64 * MiB, 64 * MiB)


def test_get_mem_info_host(runtime):
    free, total = rt.get_mem_info(0)  # ACL_DDR_MEM
    assert total == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < free <= total


@pytest.mark.parametrize("attr", [10, -1, "hbm"])
def test_get_mem_info_invalid_attr(runtime, attr):
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.get_mem_info, attr)
    assert "'attr'" in err.message


def test_out_of_memory_through_public_api():
    openacl.init({"stream_mode": "inline", "device_count": 1, "memory_limit": "4MiB"})
    rt.set_device(0)
    held = rt.malloc(1000)
    err = expect_error(ACL_ERROR_RT_MEMORY_ALLOCATION, rt.malloc, 8 * MiB)
    assert "8388608 bytes" in err.message
    assert "in use 1024 bytes" in err.message
    assert "limit 4194304 bytes" in err.message
    stats = openacl.memory_stats()
    assert stats["num_ooms"] == 1 and stats["num_alloc_retries"] == 1
    rt.free(held)


# -- statistics and cache ---------------------------------------------------------------------
def test_memory_stats_back_to_zero(runtime):
    ptrs = [rt.malloc(size) for size in (10, 5000, 3 * MiB)]
    stats = openacl.memory_stats()
    assert stats["allocated_bytes.all.current"] == 512 + 5120 + 3 * MiB
    assert stats["requested_bytes.all.current"] == 10 + 5000 + 3 * MiB
    for ptr in ptrs:
        rt.free(ptr)
    stats = openacl.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["allocation.all.current"] == 0
    assert stats["reserved_bytes.all.current"] == 22 * MiB
    assert openacl.empty_cache() == 22 * MiB
    assert openacl.memory_stats()["reserved_bytes.all.current"] == 0
    openacl.reset_peak_memory_stats()
    assert openacl.memory_stats()["allocated_bytes.all.peak"] == 0


def test_host_memory_stats(runtime):
    ptr = rt.malloc_host(100)
    assert openacl.host_memory_stats()["allocated_bytes.all.current"] == 512
    rt.free_host(ptr)
    assert openacl.host_memory_stats()["allocated_bytes.all.current"] == 0


def test_record_stream_delays_reuse(threaded_runtime, gate):
    ptr = rt.malloc(1000)
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    assert gate.entered.wait(GATE_WAIT_S)
    rt.record_stream(ptr, stream)
    rt.free(ptr)
    assert openacl.memory_stats()["active_bytes.all.current"] == 1024
    other = rt.malloc(1000)
    assert other != ptr  # the stream may still use ptr's block
    gate.open()
    rt.synchronize_stream(stream)
    assert rt.malloc(1000) == ptr
    rt.destroy_stream(stream)


def test_record_stream_bad_pointer(runtime):
    expect_error(ACL_ERROR_INVALID_PARAM, rt.record_stream, 0xDEAD0000, 0)


# -- wrappers and registration ----------------------------------------------------------------
def test_device_buffer(runtime):
    data = np.arange(16, dtype=np.int32)
    with openacl.DeviceBuffer(data.nbytes) as buf:
        buf.copy_from(data)
        np.testing.assert_array_equal(buf.to_numpy(np.int32), data)
        np.testing.assert_array_equal(buf.to_numpy(np.int32, (4, 4)), data.reshape(4, 4))
        stream = openacl.Stream()
        buf.copy_from(bytes(64), stream=stream)
        stream.synchronize()
        assert not buf.to_numpy().any()
        stream.destroy()
    assert buf.ptr is None
    buf.free()  # idempotent
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_host_buffer_numpy_is_a_view(runtime):
    with openacl.HostBuffer(32) as buf:
        view = buf.numpy()
        view[:] = 7
        assert ptr_to_bytes(buf.ptr, 32) == b"\x07" * 32
        buf.copy_from(np.full(8, 2.5, np.float32))
        np.testing.assert_array_equal(buf.numpy(np.float32), np.full(8, 2.5, np.float32))
        assert view[0] == 0  # the view sees the copy (2.5f is 00 00 20 40)
    assert openacl.host_memory_stats()["allocated_bytes.all.current"] == 0


def test_bytearray_registration_receives_writes(runtime):
    dev = device_with(b"hello, device!!!")
    out = bytearray(16)
    rt.memcpy(bytes_to_ptr(out), 16, dev, 16, D2H)
    assert out == b"hello, device!!!"
    rt.free(dev)


def test_bytes_to_ptr_of_bytes_reads(runtime):
    data = b"\x01\x02\x03\x04"
    ptr = bytes_to_ptr(data)
    assert ptr_to_bytes(ptr, 4) == data
    assert ptr_to_bytes(ptr + 1, 2) == b"\x02\x03"
    assert ptr_to_bytes(ptr, 0) == b""


def test_bytes_to_ptr_rejects_non_buffers(runtime):
    expect_error(ACL_ERROR_INVALID_PARAM, bytes_to_ptr, 12)
    expect_error(ACL_ERROR_INVALID_PARAM, numpy_to_ptr, b"not an array")
