"""Bad pointers are errors, never segfaults: wild and null pointers, out-of-range lengths,
double frees, use after free, interior pointers, reused addresses, mismatched frees, and
memory that queued work still needs after the user dropped or freed it."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest

from device_io import read_device
from openacl import rt
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.util import bytes_to_ptr, numpy_to_ptr, ptr_to_numpy

GATE_WAIT_S = 5.0  # bounded wait for a gate task to start
SUBPROCESS_TIMEOUT_S = 60.0  # a child interpreter that runs one scenario
H2D, D2H, D2D = 1, 2, 3


def expect_invalid(fn, *args) -> str:
    """Call ``fn``; it must raise ACL_ERROR_INVALID_PARAM. Returns the message."""
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == ACL_ERROR_INVALID_PARAM, str(info.value)
    return info.value.message


# -- wild and null pointers ------------------------------------------------------------------
@pytest.mark.parametrize("wild", [0xDEADBEEF, 0x10, (1 << 47) + 12345])
def test_wild_pointer(runtime, wild):
    dev = rt.malloc(16)
    assert "wild pointer" in expect_invalid(rt.memcpy, dev, 16, wild, 16, D2D)
    assert "wild pointer" in expect_invalid(rt.memcpy, wild, 16, dev, 16, D2D)
    assert "wild pointer" in expect_invalid(rt.memset, wild, 16, 0, 16)
    assert "wild pointer" in expect_invalid(rt.free, wild)
    rt.free(dev)


def test_null_pointer(runtime):
    dev = rt.malloc(16)
    assert "null" in expect_invalid(rt.memcpy, dev, 16, 0, 16, D2D)
    assert "null" in expect_invalid(rt.memset, 0, 16, 0, 16)
    assert "null" in expect_invalid(rt.free, 0)
    assert "null" in expect_invalid(rt.free_host, 0)
    rt.free(dev)


def test_unregistered_numpy_array(runtime):
    array = np.arange(64, dtype=np.uint8)
    dev = rt.malloc(64)
    message = expect_invalid(rt.memcpy, dev, 64, array.ctypes.data, 64, H2D)
    assert "wild pointer" in message
    rt.free(dev)


def test_pointer_must_be_an_int(runtime):
    dev = rt.malloc(16)
    assert "'src'" in expect_invalid(rt.memcpy, dev, 16, "0x1000", 16, D2D)
    assert "'src'" in expect_invalid(rt.memcpy, dev, 16, 1.5, 16, D2D)
    rt.free(dev)


# -- bounds --------------------------------------------------------------------------------
def test_memcpy_past_the_end(runtime):
    a, b = rt.malloc(100), rt.malloc(100)
    message = expect_invalid(rt.memcpy, a, 200, b, 120, D2D)
    assert "by 20 bytes" in message
    message = expect_invalid(rt.memcpy, a + 90, 20, b, 20, D2D)
    assert "'dst'" in message and "by 10 bytes" in message
    assert "by 1 bytes" in expect_invalid(rt.memset, b + 50, 51, 0, 51)
    rt.free(a)
    rt.free(b)


def test_host_buffer_past_the_end(runtime):
    host = rt.malloc_host(64)
    array = np.zeros(10, np.uint8)
    assert "by 54 bytes" in expect_invalid(rt.memcpy, numpy_to_ptr(array), 64, host, 64, 0)
    rt.free_host(host)


def test_interior_pointer_copies_but_cannot_be_freed(runtime):
    dev = rt.malloc(64)
    rt.memcpy(dev + 16, 8, bytes_to_ptr(b"ABCDEFGH"), 8, H2D)
    assert read_device(dev + 16, 8) == b"ABCDEFGH"
    message = expect_invalid(rt.free, dev + 16)
    assert "start" in message
    rt.free(dev)


# -- double free and use after free ----------------------------------------------------------
def test_double_free(runtime):
    dev = rt.malloc(64)
    rt.free(dev)
    assert "double free" in expect_invalid(rt.free, dev)
    host = rt.malloc_host(64)
    rt.free_host(host)
    assert "double free" in expect_invalid(rt.free_host, host)


def test_use_after_free(runtime):
    src, dst = rt.malloc(64), rt.malloc(64)
    rt.free(src)
    assert "use after free" in expect_invalid(rt.memcpy, dst, 64, src, 64, D2D)
    assert "use after free" in expect_invalid(rt.memcpy, dst, 8, src + 8, 8, D2D)
    assert "use after free" in expect_invalid(rt.memset, src, 64, 0, 64)
    assert "use after free" in expect_invalid(ptr_to_numpy, src, (4,), np.uint8)
    rt.free(dst)


def test_reused_address_is_checked_against_the_new_allocation(runtime):
    old = rt.malloc(1024)
    rt.free(old)
    new = rt.malloc(256)
    assert new == old  # same stream: the cached block comes back
    data = bytes(range(200))
    rt.memcpy(new, 256, bytes_to_ptr(data), 200, H2D)  # fine within the new size
    assert "by 44 bytes" in expect_invalid(rt.memcpy, old + 200, 100, new, 100, D2D)
    assert "wild pointer" in expect_invalid(rt.memset, old + 512, 16, 0, 16)
    rt.free(new)


def test_free_with_the_wrong_function(runtime):
    dev, host = rt.malloc(64), rt.malloc_host(64)
    message = expect_invalid(rt.free_host, dev)
    assert "device memory" in message and "not host memory" in message
    message = expect_invalid(rt.free, host)
    assert "host memory" in message and "not device memory" in message
    array = np.zeros(8)
    message = expect_invalid(rt.free, numpy_to_ptr(array))
    assert "registered host buffer" in message
    rt.free(dev)  # both still live and freeable the right way
    rt.free_host(host)


# -- registered buffers and queued work ------------------------------------------------------
def test_garbage_collected_array_is_no_longer_addressable(runtime):
    array = np.arange(64, dtype=np.uint8)
    ptr = numpy_to_ptr(array)
    dev = rt.malloc(64)
    rt.memcpy(dev, 64, ptr, 64, H2D)
    del array
    gc.collect()
    assert "use after free" in expect_invalid(rt.memcpy, dev, 64, ptr, 64, H2D)
    rt.free(dev)


def test_queued_copy_keeps_a_dropped_array_alive(threaded_runtime, gate):
    array = np.arange(4096, dtype=np.uint8) * 3
    expected = array.copy()
    src = numpy_to_ptr(array)
    dev = rt.malloc(array.nbytes)
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    assert gate.entered.wait(GATE_WAIT_S)
    rt.memcpy_async(dev, array.nbytes, src, array.nbytes, H2D, stream)
    del array
    gc.collect()
    np.ones(4096 * 16, np.uint8)  # churn the heap while the copy waits
    gate.open()
    rt.synchronize_stream(stream)
    assert read_device(dev, expected.nbytes) == expected.tobytes()
    rt.destroy_stream(stream)
    rt.free(dev)


def test_queued_copy_from_freed_device_buffer(threaded_runtime, gate):
    expected = bytes(range(256)) * 4
    src = rt.malloc(len(expected))
    rt.memcpy(src, len(expected), bytes_to_ptr(expected), len(expected), H2D)
    out = bytearray(len(expected))
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    assert gate.entered.wait(GATE_WAIT_S)
    rt.memcpy_async(bytes_to_ptr(out), len(out), src, len(expected), D2H, stream)
    rt.free(src)
    again = rt.malloc(len(expected))  # must not get the block the copy still reads
    assert again != src
    rt.memset(again, len(expected), 0xEE, len(expected))
    gate.open()
    rt.synchronize_stream(stream)
    assert out == expected
    rt.free(again)
    rt.destroy_stream(stream)


def test_queued_copy_from_freed_host_buffer(threaded_runtime, gate):
    src = rt.malloc_host(512)
    ptr_to_numpy(src, (512,), np.uint8)[:] = 0x5A
    dev = rt.malloc(512)
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    assert gate.entered.wait(GATE_WAIT_S)
    rt.memcpy_async(dev, 512, src, 512, H2D, stream)
    rt.free_host(src)
    again = rt.malloc_host(512)
    assert again != src
    ptr_to_numpy(again, (512,), np.uint8)[:] = 0
    gate.open()
    rt.synchronize_stream(stream)
    assert read_device(dev, 512) == b"\x5a" * 512
    rt.free_host(again)
    rt.free(dev)
    rt.destroy_stream(stream)


READ_ONLY_SCRIPT = """
import sys
import numpy as np

import openacl
from openacl import rt
from openacl.util import numpy_to_ptr

array = np.load(sys.argv[1], mmap_mode="r")  # a read-only mapping: a write would segfault
openacl.init({"stream_mode": "inline"})
rt.set_device(0)
dev = rt.malloc(array.nbytes)
rt.memcpy(dev, array.nbytes, numpy_to_ptr(array), array.nbytes, 1)  # reading is fine
for name, call in [("memcpy", lambda: rt.memcpy(numpy_to_ptr(array), array.nbytes, dev,
                                                array.nbytes, 2)),
                   ("memset", lambda: rt.memset(numpy_to_ptr(array), array.nbytes, 0, 1))]:
    try:
        call()
        print(name, "no error")
    except openacl.AclError as err:
        print(name, err.code)
"""


def test_write_into_read_only_mapping_is_an_error_not_a_segfault(tmp_path):
    path = tmp_path / "data.npy"
    np.save(path, np.arange(4096, dtype=np.uint8))
    done = subprocess.run([sys.executable, "-c", READ_ONLY_SCRIPT, str(path)],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, f"crashed with {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == ["memcpy", "100000", "memset", "100000"]


def test_two_arrays_over_one_buffer_each_keep_it_addressable(runtime):
    """np.frombuffer of one bytes object twice: the first array's death must not retire the
    memory the second still uses; the region goes when both have."""
    import gc

    from openacl.runtime import core, memory

    data = bytes(range(64))
    first, second = np.frombuffer(data, np.uint8), np.frombuffer(data, np.uint8)
    view = second[8:]  # a view of the second: the same owner, not a third holder
    pointer = memory.register_buffer(first)
    assert memory.register_buffer(second) == pointer
    memory.register_buffer(view)
    del first
    gc.collect()
    assert memory.read_bytes(pointer, 64, "ptr") == data
    del second, view
    gc.collect()
    assert core.current().pointers.lookup(pointer, 64) is None
