"""Host callbacks: subscribe_report / launch_callback / process_report, in every stream mode.

A ``Reporter`` is a Python thread that loops ``process_report`` until stopped; the tests
subscribe it to a stream by its ``threading.get_ident()``. In inline mode a BLOCK callback
blocks the submitting thread until the reporter has run it, which is fine because the
reporter is already running.
"""

from __future__ import annotations

import threading

import pytest

from openacl import rt
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_REPEAT_SUBSCRIBE,
    ACL_ERROR_STREAM_NOT_SUBSCRIBE,
    ACL_ERROR_THREAD_NOT_SUBSCRIBE,
    ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
    AclError,
)

ACL_CALLBACK_NO_BLOCK, ACL_CALLBACK_BLOCK = 0, 1
POLL_MS = 20  # process_report timeout per loop of the reporter thread
SETTLE_TIMEOUT_MS = 2000  # a sync that must succeed gets this long
WAIT_S = 5.0  # bound on every host-side wait in these tests


class Reporter:
    """A thread that runs callbacks delivered to it until ``stop()``."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    @property
    def thread_id(self) -> int:
        return self.thread.ident

    def subscribe(self, stream) -> None:
        rt.subscribe_report(self.thread_id, stream)
        self._subscribed.set()

    def _loop(self) -> None:
        if not self._subscribed.wait(WAIT_S):
            return
        while not self._stop.is_set():
            try:
                rt.process_report(POLL_MS)
            except AclError as exc:
                if exc.code != ACL_ERROR_WAIT_CALLBACK_TIMEOUT:
                    self.errors.append(exc)
            except Exception as exc:  # noqa: BLE001 - a callback's own exception, kept for asserts
                self.errors.append(exc)

    def stop(self) -> None:
        self._subscribed.set()
        self._stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "reporter thread did not stop"


@pytest.fixture
def reporter():
    r = Reporter()
    yield r
    r.stop()


def test_block_callback_runs_before_later_tasks(runtime, reporter):
    stream = rt.create_stream()
    reporter.subscribe(stream)
    seen: list[tuple] = []

    def callback(user_data) -> None:
        seen.append(("callback", user_data, threading.get_ident()))

    rt.launch_callback(callback, "payload", ACL_CALLBACK_BLOCK, stream)
    rt.launch_host_func(stream, lambda: seen.append(("task", len(seen))))
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert seen == [("callback", "payload", reporter.thread_id), ("task", 1)]
    assert reporter.errors == []


def test_no_block_callback_does_not_hold_the_stream(runtime, reporter):
    # The callback waits for a task queued after it: only a stream that goes on without
    # waiting for the callback lets that task run.
    stream = rt.create_stream()
    reporter.subscribe(stream)
    later_task_ran, callback_done = threading.Event(), threading.Event()
    callback_saw: list[bool] = []

    def callback(_) -> None:
        callback_saw.append(later_task_ran.wait(WAIT_S))
        callback_done.set()

    rt.launch_callback(callback, None, ACL_CALLBACK_NO_BLOCK, stream)
    rt.launch_host_func(stream, later_task_ran.set)
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert later_task_ran.is_set()
    assert callback_done.wait(WAIT_S)
    assert callback_saw == [True]


def test_block_callback_failure_fails_the_stream(runtime, reporter):
    stream = rt.create_stream()
    reporter.subscribe(stream)

    def callback(_) -> None:
        raise ValueError("callback exploded")

    rt.launch_callback(callback, None, ACL_CALLBACK_BLOCK, stream)
    with pytest.raises(AclError) as info:
        rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert "callback exploded" in info.value.message


def test_one_thread_serves_two_streams(runtime, reporter):
    a, b = rt.create_stream(), rt.create_stream()
    reporter.subscribe(a)
    reporter.subscribe(b)
    seen: list[str] = []
    rt.launch_callback(seen.append, "a", ACL_CALLBACK_BLOCK, a)
    rt.launch_callback(seen.append, "b", ACL_CALLBACK_BLOCK, b)
    rt.synchronize_stream_with_timeout(a, SETTLE_TIMEOUT_MS)
    rt.synchronize_stream_with_timeout(b, SETTLE_TIMEOUT_MS)
    assert sorted(seen) == ["a", "b"]


# -- error paths -------------------------------------------------------------------------------
def test_launch_on_unsubscribed_stream(runtime):
    stream = rt.create_stream()
    with pytest.raises(AclError) as info:
        rt.launch_callback(print, None, ACL_CALLBACK_BLOCK, stream)
    assert info.value.code == ACL_ERROR_STREAM_NOT_SUBSCRIBE


def test_process_report_on_unsubscribed_thread(runtime):
    with pytest.raises(AclError) as info:
        rt.process_report(10)
    assert info.value.code == ACL_ERROR_THREAD_NOT_SUBSCRIBE


def test_repeat_subscribe(runtime):
    stream = rt.create_stream()
    rt.subscribe_report(threading.get_ident(), stream)
    with pytest.raises(AclError) as info:
        rt.subscribe_report(threading.get_ident(), stream)
    assert info.value.code == ACL_ERROR_REPEAT_SUBSCRIBE


def test_process_report_times_out(runtime):
    stream = rt.create_stream()
    rt.subscribe_report(threading.get_ident(), stream)
    with pytest.raises(AclError) as info:
        rt.process_report(10)
    assert info.value.code == ACL_ERROR_WAIT_CALLBACK_TIMEOUT


@pytest.mark.parametrize("block_type", [2, -1, "1", None])
def test_invalid_block_type(runtime, reporter, block_type):
    stream = rt.create_stream()
    reporter.subscribe(stream)
    with pytest.raises(AclError) as info:
        rt.launch_callback(print, None, block_type, stream)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "blockType" in info.value.message


def test_non_callable_callback(runtime, reporter):
    stream = rt.create_stream()
    reporter.subscribe(stream)
    with pytest.raises(AclError) as info:
        rt.launch_callback("print", None, ACL_CALLBACK_BLOCK, stream)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_unsubscribe_then_launch(runtime, reporter):
    stream = rt.create_stream()
    reporter.subscribe(stream)
    rt.unsubscribe_report(reporter.thread_id, stream)
    with pytest.raises(AclError) as info:
        rt.launch_callback(print, None, ACL_CALLBACK_NO_BLOCK, stream)
    assert info.value.code == ACL_ERROR_STREAM_NOT_SUBSCRIBE
    with pytest.raises(AclError) as info:  # and it cannot be unsubscribed twice
        rt.unsubscribe_report(reporter.thread_id, stream)
    assert info.value.code == ACL_ERROR_STREAM_NOT_SUBSCRIBE


def test_callbacks_on_default_stream(runtime, reporter):
    reporter.subscribe(0)
    seen: list[int] = []
    rt.launch_callback(seen.append, 5, ACL_CALLBACK_BLOCK, 0)
    rt.synchronize_stream_with_timeout(0, SETTLE_TIMEOUT_MS)
    assert seen == [5]
