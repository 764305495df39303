"""Host callbacks on a stream with CANN's subscribe/launch/process model.

Design note (invariants)
------------------------
* ``subscribe_report(thread_id, stream)`` names the host thread that runs the stream's
  callbacks; one thread per stream, a thread may serve many streams.
* ``launch_callback(fn, user_data, block_type, stream)`` enqueues a task. When the stream
  reaches it, the task hands ``(fn, user_data)`` to the subscribed thread's report queue;
  with ``ACL_CALLBACK_BLOCK`` the stream then waits until that thread has run it, with
  ``ACL_CALLBACK_NO_BLOCK`` it goes on at once. A blocked stream gives up (failing with
  ``ACL_ERROR_WAIT_CALLBACK_TIMEOUT``) once the stream is being destroyed or the
  subscription is gone, so finalize and destroy never hang on a callback nobody runs.
* ``process_report(timeout_ms)`` runs on the subscribed thread: it waits up to the timeout
  for the first callback, then runs it and every other one already delivered. A callback
  that raises fails the stream only when the stream waited for it (BLOCK); the exception
  is also re-raised to the processing thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_REPEAT_SUBSCRIBE,
    ACL_ERROR_STREAM_NOT_SUBSCRIBE,
    ACL_ERROR_THREAD_NOT_SUBSCRIBE,
    ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
    AclError,
)
from openacl.runtime import core, sanitizer
from openacl.runtime.stream import resolve_stream, timeout_seconds

CALLBACK_POLL_S = 0.05  # seconds between checks that a blocking callback can still run
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1
CALLBACK_BLOCK_TYPES = {ACL_CALLBACK_NO_BLOCK: "ACL_CALLBACK_NO_BLOCK",
                        ACL_CALLBACK_BLOCK: "ACL_CALLBACK_BLOCK"}


@dataclass(eq=False)
class _Report:
    fn: Callable[[Any], None]
    user_data: Any
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    task: Any = None  # the sanitizer's stamp of the delivering stream task (sanitizer.py)


class _Subscriptions:
    """Per-runtime registry: stream -> thread id, thread id -> report queue."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread_of_stream: dict[int, int] = {}
        self.reports: dict[int, queue.SimpleQueue] = {}


def _registry() -> _Subscriptions:
    runtime = core.current()
    with runtime.lock:
        registry = getattr(runtime, "callback_subscriptions", None)
        if registry is None:
            registry = runtime.callback_subscriptions = _Subscriptions()
        return registry


def _thread_id(thread_id: object) -> int:
    value = core.as_index(thread_id)
    if value is None or value < 0:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'threadId' = {thread_id!r} is not a thread id (an int)")
    return value


def subscribe_report(thread_id: int, stream: int) -> None:
    """Let thread ``thread_id`` run the callbacks of ``stream`` (aclrtSubscribeReport)."""
    tid = _thread_id(thread_id)
    target = resolve_stream(stream)
    registry = _registry()
    with registry.lock:
        current = registry.thread_of_stream.get(target.handle)
        if current is not None:
            raise AclError(ACL_ERROR_REPEAT_SUBSCRIBE,
                           f"argument 'stream' = {target.handle:#x} is already subscribed by "
                           f"thread {current}")
        registry.thread_of_stream[target.handle] = tid
        registry.reports.setdefault(tid, queue.SimpleQueue())


def unsubscribe_report(thread_id: int, stream: int) -> None:
    """Undo ``subscribe_report`` (aclrtUnSubscribeReport)."""
    tid = _thread_id(thread_id)
    target = resolve_stream(stream)
    registry = _registry()
    with registry.lock:
        if registry.thread_of_stream.get(target.handle) != tid:
            raise AclError(ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                           f"argument 'stream' = {target.handle:#x} is not subscribed by "
                           f"thread {tid}")
        del registry.thread_of_stream[target.handle]


def launch_callback(fn: Callable[[Any], None], user_data: Any, block_type: int,
                    stream: int) -> None:
    """Enqueue a host callback ``fn(user_data)`` on ``stream`` (aclrtLaunchCallback)."""
    if not callable(fn):
        raise AclError(ACL_ERROR_INVALID_PARAM, f"argument 'fn' = {fn!r} is not callable")
    block = core.check_enum(block_type, CALLBACK_BLOCK_TYPES, "blockType")
    target = resolve_stream(stream)
    registry = _registry()
    with registry.lock:
        tid = registry.thread_of_stream.get(target.handle)
        if tid is None:
            raise AclError(ACL_ERROR_STREAM_NOT_SUBSCRIBE,
                           f"argument 'stream' = {target.handle:#x} has no subscribed thread: "
                           f"call subscribe_report(thread_id, stream) first")
        reports = registry.reports[tid]
    report = _Report(fn, user_data)

    def deliver() -> None:
        if sanitizer.active:  # the callback runs in this task's place in the order
            report.task = sanitizer.current_task()
        reports.put(report)
        if block != ACL_CALLBACK_BLOCK:
            return
        while not report.done.wait(CALLBACK_POLL_S):
            if target.destroyed or registry.thread_of_stream.get(target.handle) != tid:
                raise AclError(ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
                               f"a blocking callback on stream {target.handle:#x} was never "
                               f"processed: the stream was destroyed or unsubscribed")
        if report.error is not None:
            raise report.error

    target.submit(deliver, host=True)


def process_report(timeout: int) -> None:
    """Run callbacks delivered to the calling thread, waiting up to ``timeout`` ms."""
    seconds = timeout_seconds(timeout)
    registry = _registry()
    tid = threading.get_ident()
    with registry.lock:
        reports = registry.reports.get(tid)
    if reports is None:
        raise AclError(ACL_ERROR_THREAD_NOT_SUBSCRIBE,
                       f"the calling thread {tid} is not subscribed to any stream")
    try:
        report = reports.get(timeout=seconds)
    except queue.Empty:
        raise AclError(ACL_ERROR_WAIT_CALLBACK_TIMEOUT,
                       f"no callback arrived within {timeout} ms") from None
    while True:
        try:
            if report.task is not None and sanitizer.active:
                sanitizer.run_as(report.task, report.fn, report.user_data)
            else:
                report.fn(report.user_data)
        except BaseException as exc:
            report.error = exc
            report.done.set()
            raise
        report.done.set()
        try:
            report = reports.get_nowait()
        except queue.Empty:
            return
