"""Regression tests for the runtime review: memory safety at the edges, re-entry from
finalizers, finalize while work is queued, and cache behaviour of short-lived streams."""

from __future__ import annotations

import gc
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

import openacl
from openacl import rt, util
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core

N = 4096  # bytes moved by the copy tests


def test_ptr_to_numpy_view_keeps_a_registered_owner_alive(threaded_runtime):
    owner = np.full(1 << 16, 7, np.uint8)
    alive = weakref.ref(owner)
    view = util.ptr_to_numpy(util.numpy_to_ptr(owner), (1 << 16,), np.uint8)
    del owner
    gc.collect()
    assert alive() is not None  # the view holds it
    assert (view[:8] == 7).all()
    del view
    gc.collect()
    assert alive() is None  # and only the view did


def test_ptr_to_numpy_of_a_read_only_mapping_is_read_only(threaded_runtime, tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(64)))
    mapped = np.memmap(path, dtype=np.uint8, mode="r")
    view = util.ptr_to_numpy(util.numpy_to_ptr(mapped), (64,), np.uint8)
    with pytest.raises(ValueError):
        view[0] = 1
    assert view[5] == 5


def test_a_view_of_freed_runtime_memory_cannot_be_registered(threaded_runtime, host_addressable):
    ptr = rt.malloc(1024)
    stale = util.ptr_to_numpy(ptr, (1024,), np.uint8)
    rt.free(ptr)
    with pytest.raises(AclError) as info:
        util.numpy_to_ptr(stale)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "no longer allocated" in str(info.value)
    again = rt.malloc(1024)  # the allocator is unharmed
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 1024
    rt.free(again)


def test_a_free_while_the_allocator_is_busy_is_deferred_not_reentered(threaded_runtime):
    ptr = rt.malloc(1024)
    allocator = core.current().devices[0].allocator
    with allocator._lock:  # what a finalizer firing inside malloc sees
        rt.free(ptr)
        assert allocator.stats()["allocation.all.current"] == 1  # not yet
    other = rt.malloc(2048)  # the next memory call runs the deferred free first
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 2048
    rt.free(other)


def test_tensor_finalizer_inside_the_tables_defers(threaded_runtime):
    tensor = openacl.to_device(np.ones(4, np.float32))
    pointers = core.current().pointers
    with pointers._lock:
        del tensor
        gc.collect()
        assert core.current().deferred  # queued, not run under the lock
    core.drain_deferred()
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_free_with_work_still_queued_on_its_stream_is_not_reused_early(threaded_runtime, gate):
    stream = openacl.Stream()
    source = rt.malloc(N)
    rt.memset(source, N, 0xAA, N)
    out = np.zeros(N, np.uint8)
    rt.launch_host_func(stream, gate.task)
    with stream:
        first = rt.malloc(N)
        rt.memcpy(first, N, source, N, 3)
        rt.memcpy_async(util.numpy_to_ptr(out), N, first, N, 2, stream)
        rt.free(first)
        second = rt.malloc(N)  # must not be handed the block the queued copy reads
        rt.memset(second, N, 0x55, N)
        gate.open()
    assert (out == 0xAA).all()
    rt.free(second)
    rt.free(source)


def test_finalize_drains_before_the_runtime_goes_away():
    openacl.init()
    rt.set_device(0)
    stream = rt.create_stream()
    out, src = np.zeros(4, np.uint8), np.full(4, 9, np.uint8)
    out_ptr, src_ptr = util.numpy_to_ptr(out), util.numpy_to_ptr(src)

    def late_copy() -> None:
        time.sleep(0.1)
        rt.memcpy(out_ptr, 4, src_ptr, 4, 0)  # the runtime is still there while draining

    rt.launch_host_func(stream, late_copy)
    openacl.finalize()
    assert (out == 9).all()


def test_finalize_does_not_hang_on_a_blocking_callback_nobody_runs():
    openacl.init()
    rt.set_device(0)
    stream = rt.create_stream()
    rt.subscribe_report(threading.get_ident(), stream)  # this thread never processes
    rt.launch_callback(lambda data: None, None, openacl.ACL_CALLBACK_BLOCK, stream)
    started = time.monotonic()
    openacl.finalize()
    assert time.monotonic() - started < 5.0


def test_pointer_arguments_accept_index_objects_and_reject_others(threaded_runtime):
    buffer = openacl.DeviceBuffer(64)
    rt.memset(buffer, 64, 1, 64)  # a DeviceBuffer is its pointer
    rt.memset(np.int64(buffer.ptr), 64, 2, 64)
    assert (buffer.to_numpy() == 2).all()
    for bad in (1.5, None, "0x10"):
        with pytest.raises(AclError) as info:
            rt.free(bad)
        assert info.value.code == ACL_ERROR_INVALID_PARAM and "devPtr" in str(info.value)
    buffer.free()


def test_one_stream_per_request_does_not_grow_the_cache(threaded_runtime):
    for _ in range(20):
        with openacl.Stream():
            rt.free(rt.malloc(4096))
    stats = openacl.memory_stats()
    assert stats["segment.all.current"] <= 1
    assert stats["allocated_bytes.all.current"] == 0


def test_a_limit_smaller_than_a_segment_still_allocates():
    openacl.init({"memory_limit": "16MiB"})
    rt.set_device(0)
    medium = rt.malloc(2 << 20)  # would normally carve a 20 MiB segment
    rt.free(medium)
    openacl.finalize()
    openacl.init({"memory_limit": "1MiB"})
    rt.set_device(0)
    rt.free(rt.malloc(512))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", openacl.LeakWarning)
        openacl.finalize()


def test_elapsed_time_needs_the_time_line_flag(threaded_runtime):
    start = rt.create_event_with_flag(openacl.ACL_EVENT_SYNC)
    end = rt.create_event_with_flag(openacl.ACL_EVENT_SYNC)
    rt.record_event(start, 0)
    rt.record_event(end, 0)
    rt.synchronize_event(end)
    with pytest.raises(AclError) as info:
        rt.event_elapsed_time(start, end)
    assert "ACL_EVENT_TIME_LINE" in str(info.value)


def test_bytes_registrations_are_bounded(threaded_runtime, monkeypatch):
    from openacl.runtime import memory

    monkeypatch.setattr(memory, "MAX_HELD_BUFFERS", 8)
    frames = [bytes([i]) * 64 for i in range(20)]  # alive here, so no address is reused
    pointers = [util.bytes_to_ptr(frame) for frame in frames]  # a frame per call
    assert len(core.current().held_buffers) == 8
    latest = pointers[-1]
    assert util.ptr_to_bytes(latest, 64) == bytes([19]) * 64
    with pytest.raises(AclError):  # the oldest registrations were forgotten
        util.ptr_to_bytes(pointers[0], 64)
