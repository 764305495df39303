"""Stream conformance: FIFO order, queries, failure poisoning, timeouts and API error paths.

Every test that takes ``runtime`` runs in the three stream modes. ``inline`` runs a task on
the submitting thread, so a closed gate would block the test itself: there the gate is
opened before it is submitted and only the "while held" assertions are skipped.
"""

from __future__ import annotations

import threading
import time

import pytest

import openacl
from openacl import rt
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    ACL_ERROR_RT_AICPU_EXCEPTION,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    ACL_ERROR_UNINITIALIZE,
    AclError,
)

STREAM_COMPLETE, STREAM_NOT_READY = 0, 1  # aclrtStreamStatus
SHORT_TIMEOUT_MS = 50  # a sync that must time out waits this long
TIMEOUT_BOUND_S = 2.0  # a timed-out sync must return well within this
THREAD_TIMEOUT_S = 10.0  # a helper thread that takes longer fails the test
BOGUS_HANDLE = 12345


def hold(runtime: str, gate, stream) -> None:
    """Enqueue ``gate.task`` on ``stream``; in inline mode the gate opens first (see top)."""
    if runtime == "inline":
        gate.open()
    rt.launch_host_func(stream, gate.task)


def run_in_thread(fn):
    """Run ``fn`` on a new thread; return what it returned or raise what it raised."""
    box: dict = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            box["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(THREAD_TIMEOUT_S)
    assert not thread.is_alive(), "helper thread did not finish"
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- order and queries -----------------------------------------------------------------------
def test_fifo_order_of_100_tasks(runtime):
    stream = rt.create_stream()
    seen: list[int] = []
    for i in range(100):
        rt.launch_host_func(stream, seen.append, i)
    rt.synchronize_stream(stream)
    assert seen == list(range(100))


def test_fifo_order_holds_per_stream_with_interleaved_submission(runtime):
    streams = [rt.create_stream() for _ in range(3)]
    seen: dict[int, list[int]] = {s: [] for s in streams}
    for i in range(30):
        for s in streams:
            rt.launch_host_func(s, seen[s].append, i)
    for s in streams:
        rt.synchronize_stream(s)
    assert all(values == list(range(30)) for values in seen.values())


def test_default_stream_runs_host_funcs(runtime):
    seen: list[int] = []
    rt.launch_host_func(0, seen.append, 7)
    rt.synchronize_stream(0)
    assert seen == [7]


def test_query_before_and_after(runtime, gate):
    stream = rt.create_stream()
    assert rt.stream_query(stream) == STREAM_COMPLETE  # nothing submitted yet
    hold(runtime, gate, stream)
    if runtime != "inline":
        assert rt.stream_query(stream) == STREAM_NOT_READY
        assert rt.query_stream(stream) == STREAM_NOT_READY
    gate.open()
    rt.synchronize_stream(stream)
    assert rt.stream_query(stream) == STREAM_COMPLETE


def test_launch_host_func_rejects_non_callable(runtime):
    with pytest.raises(AclError) as info:
        rt.launch_host_func(0, "not a function")
    assert info.value.code == ACL_ERROR_INVALID_PARAM


# -- failure poisoning and recovery ------------------------------------------------------------
def fail(message: str) -> None:
    raise ValueError(message)


def test_failed_task_skips_later_tasks_and_sync_raises(runtime):
    stream = rt.create_stream()
    ran: list[str] = []
    rt.launch_host_func(stream, ran.append, "before")
    rt.launch_host_func(stream, fail, "boom-4711")
    rt.launch_host_func(stream, ran.append, "after")
    with pytest.raises(AclError) as info:
        rt.synchronize_stream(stream)
    assert info.value.code == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "boom-4711" in info.value.message and "ValueError" in info.value.message
    assert isinstance(info.value.__cause__, ValueError)
    assert ran == ["before"]
    with pytest.raises(AclError):  # the failure is sticky
        rt.synchronize_stream(stream)


def test_task_raising_acl_error_keeps_its_code(runtime):
    stream = rt.create_stream()

    def task() -> None:
        raise AclError(ACL_ERROR_RT_AICPU_EXCEPTION, "kernel said no")

    rt.launch_host_func(stream, task)
    with pytest.raises(AclError) as info:
        rt.synchronize_stream(stream)
    assert info.value.code == ACL_ERROR_RT_AICPU_EXCEPTION
    assert "kernel said no" in info.value.message


def test_event_before_failure_syncs_event_after_raises(runtime):
    stream = rt.create_stream()
    before, after = rt.create_event(), rt.create_event()
    rt.record_event(before, stream)
    rt.launch_host_func(stream, fail, "late failure")
    rt.record_event(after, stream)
    with pytest.raises(AclError) as info:
        rt.synchronize_event(after)
    assert info.value.code == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "late failure" in info.value.message
    rt.synchronize_event(before)  # recorded before the failure: fine


def test_failure_leaves_other_streams_working(runtime):
    broken, healthy = rt.create_stream(), rt.create_stream()
    rt.launch_host_func(broken, fail, "only this stream")
    ran: list[int] = []
    rt.launch_host_func(healthy, ran.append, 1)
    rt.synchronize_stream(healthy)
    rt.launch_host_func(0, ran.append, 2)
    rt.synchronize_stream(0)
    assert ran == [1, 2]
    with pytest.raises(AclError):
        rt.synchronize_stream(broken)


def test_failed_stream_can_be_destroyed_and_replaced(runtime):
    broken = rt.create_stream()
    rt.launch_host_func(broken, fail, "dead stream")
    with pytest.raises(AclError):
        rt.synchronize_stream(broken)
    rt.destroy_stream(broken)
    fresh = rt.create_stream()
    ran: list[int] = []
    rt.launch_host_func(fresh, ran.append, 1)
    rt.synchronize_stream(fresh)
    assert ran == [1]


def test_recent_error_message_is_returned_once(runtime):
    openacl.get_recent_err_msg()
    stream = rt.create_stream()
    rt.launch_host_func(stream, fail, "remember-me")
    with pytest.raises(AclError):
        rt.synchronize_stream(stream)
    message = openacl.get_recent_err_msg()
    assert message is not None and "remember-me" in message
    assert openacl.get_recent_err_msg() is None


# -- timeouts --------------------------------------------------------------------------------
def skip_inline(runtime: str) -> None:
    if runtime == "inline":
        pytest.skip("inline mode runs every task at submission: a stream is never pending")


def test_stream_sync_times_out_within_bound(runtime, gate):
    skip_inline(runtime)
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    start = time.monotonic()
    with pytest.raises(AclError) as info:
        rt.synchronize_stream_with_timeout(stream, SHORT_TIMEOUT_MS)
    waited = time.monotonic() - start
    assert info.value.code == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert SHORT_TIMEOUT_MS / 1000 * 0.8 <= waited < TIMEOUT_BOUND_S
    gate.open()
    rt.synchronize_stream_with_timeout(stream, 5000)  # the timeout did not poison it


def test_device_sync_times_out(runtime, gate):
    skip_inline(runtime)
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    start = time.monotonic()
    with pytest.raises(AclError) as info:
        rt.synchronize_device_with_timeout(SHORT_TIMEOUT_MS)
    assert info.value.code == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert time.monotonic() - start < TIMEOUT_BOUND_S
    gate.open()
    rt.synchronize_device_with_timeout(5000)


def test_minus_one_waits_forever(runtime, gate):
    skip_inline(runtime)
    stream = rt.create_stream()
    ran: list[int] = []
    rt.launch_host_func(stream, gate.task)
    rt.launch_host_func(stream, ran.append, 1)
    opener = threading.Timer(0.1, gate.open)
    opener.start()
    try:
        rt.synchronize_stream_with_timeout(stream, -1)
        assert ran == [1]
        rt.synchronize_device_with_timeout(-1)
    finally:
        opener.cancel()


@pytest.mark.parametrize("timeout", [-2, "x", 1.5, None])
def test_invalid_timeouts(runtime, timeout):
    stream = rt.create_stream()
    for call in (
        lambda: rt.synchronize_stream_with_timeout(stream, timeout),
        lambda: rt.synchronize_device_with_timeout(timeout),
    ):
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == ACL_ERROR_INVALID_PARAM
        assert "timeout" in info.value.message


# -- API error paths ---------------------------------------------------------------------------
STREAM_CALLS = {
    "destroy": rt.destroy_stream,
    "synchronize": rt.synchronize_stream,
    "query": rt.stream_query,
    "launch": lambda s: rt.launch_host_func(s, print),
}


@pytest.mark.parametrize("call", STREAM_CALLS.values(), ids=STREAM_CALLS.keys())
def test_destroyed_stream_handle_is_rejected(runtime, call):
    stream = rt.create_stream()
    rt.destroy_stream(stream)
    with pytest.raises(AclError) as info:
        call(stream)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'stream'" in info.value.message


@pytest.mark.parametrize("call", STREAM_CALLS.values(), ids=STREAM_CALLS.keys())
def test_bogus_stream_handle_is_rejected(runtime, call):
    with pytest.raises(AclError) as info:
        call(BOGUS_HANDLE)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'stream'" in info.value.message


def test_destroyed_stream_object_is_rejected(runtime):
    stream = openacl.Stream()
    stream.destroy()
    with pytest.raises(AclError) as info:
        rt.synchronize_stream(stream)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'stream'" in info.value.message


def test_default_stream_cannot_be_destroyed(runtime):
    with pytest.raises(AclError) as info:
        rt.destroy_stream(0)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    rt.synchronize_stream(0)  # still usable


def test_event_handle_passed_as_stream_names_the_kind(runtime):
    event = rt.create_event()
    with pytest.raises(AclError) as info:
        rt.synchronize_stream(event)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'stream'" in info.value.message and "Event" in info.value.message


def test_destroy_stream_waits_for_queued_work(runtime, gate):
    stream = rt.create_stream()
    ran: list[int] = []
    hold(runtime, gate, stream)
    rt.launch_host_func(stream, ran.append, 1)
    opener = threading.Timer(0.05, gate.open)
    opener.start()
    rt.destroy_stream(stream)
    assert ran == [1]
    opener.cancel()


def test_destroy_stream_force_returns_at_once_and_queued_work_still_runs(runtime, gate):
    stream = rt.create_stream()
    ran = threading.Event()
    hold(runtime, gate, stream)
    rt.launch_host_func(stream, ran.set)
    rt.destroy_stream_force(stream)  # must not wait for the gate
    with pytest.raises(AclError) as info:
        rt.launch_host_func(stream, print)  # the handle is gone at once
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    gate.open()
    assert ran.wait(THREAD_TIMEOUT_S)


def test_create_stream_before_init():
    assert not openacl.is_initialized()
    with pytest.raises(AclError) as info:
        rt.create_stream()
    assert info.value.code == ACL_ERROR_UNINITIALIZE


def test_create_stream_without_current_context():
    openacl.init({"device_count": 2})
    try:
        with pytest.raises(AclError) as info:
            run_in_thread(rt.create_stream)  # a new thread has no context until set_device
        assert info.value.code == ACL_ERROR_RT_CONTEXT_NULL
    finally:
        openacl.finalize()


# -- a synchronizing thread runs queued work itself (host_queue's design note) ----------------
def _gated_queue() -> tuple:
    """A threaded queue in the backends' quiet floating point whose worker is held, entering
    it, until the event is set (a helping test thread enters it at once)."""
    import contextlib

    from openacl.backends.base import quiet_floating_point
    from openacl.backends.host_queue import HostQueue, ThreadedExecutor

    started, tester = threading.Event(), threading.current_thread()

    @contextlib.contextmanager
    def gated():
        if threading.current_thread() is not tester:
            started.wait(THREAD_TIMEOUT_S)
        with quiet_floating_point():
            yield

    executor = ThreadedExecutor(gated)
    return HostQueue(executor, "gated"), executor, started


def test_help_runs_unstarted_tasks_on_the_waiting_thread_in_order():
    import numpy as np

    queue, executor, started = _gated_queue()
    ran: list[tuple[int, str, str]] = []

    def task(value: int) -> None:
        ran.append((value, threading.current_thread().name, np.geterr()["divide"]))

    try:
        values = [queue.submit(task) for _ in range(3)]
        with np.errstate(divide="raise"):
            queue.help(values[1])  # the worker has not started: this thread runs 1 and 2
            assert np.geterr()["divide"] == "raise"  # its own state back after
        me = threading.current_thread().name
        assert ran == [(1, me, "ignore"), (2, me, "ignore")]  # quiet, as on a worker
        assert queue.timeline.value == 2 and not queue.done()
        started.set()  # the worker takes what is left, in order
        assert queue.timeline.wait(values[2], THREAD_TIMEOUT_S)
        assert [r[0] for r in ran] == [1, 2, 3] and ran[2][1] == "openacl-gated"
        queue.help(values[2])  # nothing left to run: returns at once
    finally:
        started.set()
        queue.close()
        executor.shutdown(THREAD_TIMEOUT_S)


def test_help_leaves_the_queue_to_a_worker_that_is_running_a_task():
    queue, executor, started = _gated_queue()
    started.set()
    entered, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def blocking(value: int) -> None:
        entered.set()
        release.wait(THREAD_TIMEOUT_S)

    try:
        queue.submit(blocking)
        assert entered.wait(THREAD_TIMEOUT_S)
        last = queue.submit(lambda value: ran.append(threading.current_thread().name))
        queue.help(last)  # the worker holds the run lock: not taken from it, not reordered
        assert ran == [] and queue.timeline.value == 0
        release.set()
        assert queue.timeline.wait(last, THREAD_TIMEOUT_S)
        assert ran == ["openacl-gated"]
    finally:
        release.set()
        queue.close()
        executor.shutdown(THREAD_TIMEOUT_S)


def test_stream_sync_helps_only_without_a_timeout(threaded_runtime, monkeypatch):
    """A synchronize with a time limit must not run a long task itself (it could not return
    in time); one without runs the queue's unstarted work on the calling thread."""
    stream = rt.create_stream()
    queue = openacl.runtime.stream.resolve_stream(stream).queue
    helped: list[int] = []
    real_help = queue.help
    monkeypatch.setattr(queue, "help", lambda value: (helped.append(value), real_help(value)))
    ran: list[int] = []
    rt.launch_host_func(stream, ran.append, 1)
    rt.synchronize_stream_with_timeout(stream, 5000)
    assert helped == []
    rt.launch_host_func(stream, ran.append, 2)
    rt.synchronize_stream(stream)
    assert helped == [2] and ran == [1, 2]
    rt.destroy_stream(stream)
