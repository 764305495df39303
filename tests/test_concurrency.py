"""Threads, contexts and devices: per-thread current state, device reference counting, a
multi-thread multi-stream copy stress test, and what finalize does with live work and memory.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import openacl
from device_io import read_device
from openacl import rt
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_INVALID_DEVICEID,
    AclError,
)
from openacl.runtime.stream import resolve_stream
from openacl.util import numpy_to_ptr

H2D, D2H, D2D = 1, 2, 3  # aclrtMemcpyKind
THREADS = 4  # host threads in the stress test
STREAMS_PER_THREAD = 3
ROUNDS = 20  # copy rounds per stream in the stress test
ELEMENTS = 2048  # int32 elements per buffer in the stress test
THREAD_TIMEOUT_S = 10.0  # a helper thread that takes longer fails the test
SETTLE_TIMEOUT_MS = 2000  # a sync that must succeed gets this long
SLEEP_S = 0.05  # delay that keeps a task queued


def hold(runtime: str, gate, stream) -> None:
    """Enqueue ``gate.task``; inline mode runs tasks at submission, so open the gate first."""
    if runtime == "inline":
        gate.open()
    rt.launch_host_func(stream, gate.task)


def run_threads(target, count: int) -> list:
    """Run ``target(index)`` on ``count`` threads; return results or raise the first error."""
    results: list = [None] * count
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            results[index] = target(index)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + THREAD_TIMEOUT_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a helper thread did not finish"
    if errors:
        raise errors[0]
    return results


def run_in_thread(fn):
    return run_threads(lambda _: fn(), 1)[0]


def expect_code(code: int, fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, str(info.value)
    return info.value


# -- per-thread current context and stream ---------------------------------------------------
def test_new_thread_has_no_context(runtime):
    expect_code(ACL_ERROR_RT_CONTEXT_NULL, run_in_thread, rt.get_context)
    expect_code(ACL_ERROR_RT_CONTEXT_NULL, run_in_thread, rt.get_device)
    rt.get_context()  # the main thread still has one


def test_set_context_in_another_thread(runtime):
    context = rt.get_context()

    def body():
        rt.set_context(context)
        stream = rt.create_stream()
        seen: list[int] = []
        rt.launch_host_func(stream, seen.append, 1)
        rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
        rt.destroy_stream(stream)
        return rt.get_context(), rt.get_device(), seen

    assert run_in_thread(body) == (context, 0, [1])


def test_set_device_is_per_thread(runtime, two_devices):
    def body():
        rt.set_device(1)
        try:
            return rt.get_device()
        finally:
            rt.reset_device(1)

    assert run_in_thread(body) == 1
    assert rt.get_device() == 0


def test_with_stream_makes_it_current_and_destroys_it(runtime, gate):
    default = resolve_stream(None)
    data = np.arange(16, dtype=np.float32)
    with openacl.Stream() as stream:
        handle = stream.handle
        assert resolve_stream(None) is resolve_stream(handle)
        hold(runtime, gate, stream)  # the current stream is busy...
        tensor = openacl.to_device(data, stream=None)  # ...yet this copy is synchronous
        assert read_device(tensor.data_ptr, data.nbytes) == data.tobytes()
        tensor.free()
        gate.open()
    assert resolve_stream(None) is default
    expect_code(ACL_ERROR_INVALID_PARAM, rt.synchronize_stream, handle)


def test_current_stream_is_per_thread(runtime):
    with openacl.Stream() as stream:
        mine = resolve_stream(stream.handle)

        def other_thread_stream():
            rt.set_device(0)
            try:
                return resolve_stream(None)
            finally:
                rt.reset_device(0)

        theirs = run_in_thread(other_thread_stream)
        assert theirs is not mine and theirs.is_default


def test_nested_with_streams_restore_the_outer_one(runtime):
    with openacl.Stream() as outer:
        with openacl.Stream() as inner:
            assert resolve_stream(None) is resolve_stream(inner.handle)
        assert resolve_stream(None) is resolve_stream(outer.handle)


def test_with_context_switches_device_and_back(runtime, two_devices):
    assert rt.get_device() == 0
    with openacl.Context(1) as context:
        assert rt.get_device() == 1
        assert rt.get_context() == context.handle
    assert rt.get_device() == 0


@pytest.mark.parametrize("device_id", [-1, 2, "0", 1.0, None])
def test_invalid_device_ids(runtime, device_id):
    error = expect_code(ACL_ERROR_RT_INVALID_DEVICEID, rt.set_device, device_id)
    assert "deviceId" in error.message
    expect_code(ACL_ERROR_RT_INVALID_DEVICEID, rt.create_context, device_id)


def test_reset_device_destroys_default_context_streams(runtime):
    stream = rt.create_stream()
    context = rt.get_context()
    rt.reset_device(0)  # the fixture's set_device was the only reference
    expect_code(ACL_ERROR_INVALID_PARAM, rt.synchronize_stream, stream)
    expect_code(ACL_ERROR_RT_CONTEXT_NULL, rt.get_context)
    expect_code(ACL_ERROR_INVALID_PARAM, rt.set_context, context)
    rt.set_device(0)  # a fresh default context
    assert rt.get_context() != context
    rt.synchronize_stream(0)


def test_reset_device_drains_queued_work(runtime):
    ran: list[int] = []
    stream = rt.create_stream()
    rt.launch_host_func(stream, time.sleep, SLEEP_S)
    rt.launch_host_func(stream, ran.append, 1)
    rt.reset_device(0)
    assert ran == [1]


def test_set_device_twice_reset_once_keeps_the_context(runtime):
    rt.set_device(0)
    stream = rt.create_stream()
    context = rt.get_context()
    rt.reset_device(0)
    assert rt.get_context() == context
    rt.synchronize_stream(stream)
    rt.reset_device(0)
    expect_code(ACL_ERROR_INVALID_PARAM, rt.synchronize_stream, stream)


# -- many threads, many streams ---------------------------------------------------------------
def _copy_round_trip(thread_index: int) -> None:
    """H2D, D2D, D2H and a memset on each of this thread's streams; check every byte."""
    rt.set_device(0)
    streams = [rt.create_stream() for _ in range(STREAMS_PER_THREAD)]
    nbytes = ELEMENTS * 4
    try:
        jobs = []
        for index, stream in enumerate(streams):
            for round_ in range(ROUNDS):
                tag = (thread_index * STREAMS_PER_THREAD + index) * ROUNDS + round_
                source = np.arange(ELEMENTS, dtype=np.int32) + tag * ELEMENTS
                result = np.zeros_like(source)
                filled = np.zeros(nbytes, np.uint8)
                first, second, third = rt.malloc(nbytes), rt.malloc(nbytes), rt.malloc(nbytes)
                rt.memcpy_async(first, nbytes, numpy_to_ptr(source), nbytes, H2D, stream)
                rt.memcpy_async(second, nbytes, first, nbytes, D2D, stream)
                rt.memcpy_async(numpy_to_ptr(result), nbytes, second, nbytes, D2H, stream)
                rt.memset_async(third, nbytes, tag + 1, nbytes, stream)
                rt.memcpy_async(numpy_to_ptr(filled), nbytes, third, nbytes, D2H, stream)
                jobs.append((tag, source, result, filled, (first, second, third)))
        for stream in streams:
            rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS * 5)
        for tag, source, result, filled, pointers in jobs:
            np.testing.assert_array_equal(result, source)
            assert (filled == (tag + 1) & 0xFF).all()
            for ptr in pointers:
                rt.free(ptr)
    finally:
        for stream in streams:
            rt.destroy_stream(stream)
        rt.reset_device(0)


def test_threads_times_streams_copy_stress(runtime):
    start = time.monotonic()
    run_threads(_copy_round_trip, THREADS)
    rt.synchronize_device_with_timeout(SETTLE_TIMEOUT_MS)
    stats = openacl.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["active_bytes.all.current"] == 0
    assert time.monotonic() - start < 3.0


def test_threads_share_one_stream_in_submission_order(runtime):
    stream = rt.create_stream()
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def append(item) -> None:
        with lock:
            seen.append(item)

    def submit(thread_index: int) -> None:
        for i in range(50):
            rt.launch_host_func(stream, append, (thread_index, i))

    run_threads(submit, THREADS)
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert len(seen) == THREADS * 50
    for thread_index in range(THREADS):
        assert [i for t, i in seen if t == thread_index] == list(range(50))


def test_free_while_queued_is_inactive_after_synchronize(runtime, gate):
    stream = rt.create_stream()
    nbytes = 1024
    ptr = rt.malloc(nbytes)  # belongs to the default stream; used on another one below
    hold(runtime, gate, stream)
    rt.memset_async(ptr, nbytes, 7, nbytes, stream)
    rt.free(ptr)  # the block stays pending until the memset has run
    gate.open()
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    stats = openacl.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["active_bytes.all.current"] == 0


# -- finalize ----------------------------------------------------------------------------------
def test_finalize_warns_about_leaked_allocations(runtime):
    rt.malloc(100)
    rt.malloc(3000)
    with pytest.warns(openacl.LeakWarning, match=r"\b2 allocation"):
        openacl.finalize()


def test_finalize_drains_queued_work(runtime):
    ran: list[str] = []
    stream = rt.create_stream()
    rt.launch_host_func(stream, time.sleep, SLEEP_S)
    rt.launch_host_func(stream, ran.append, "stream")
    rt.launch_host_func(0, time.sleep, SLEEP_S)
    rt.launch_host_func(0, ran.append, "default")
    openacl.finalize()
    assert sorted(ran) == ["default", "stream"]
