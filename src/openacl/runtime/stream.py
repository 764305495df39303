"""Streams: asynchronous in-order work queues, and the per-thread current stream.

Design note (invariants)
------------------------
* A ``Stream`` wraps one backend queue (see ``openacl.backends.host_queue`` for the
  timeline invariants). Everything here is policy: handles, validation, error reporting.
* Failure: the first task that raises poisons the stream. Later tasks are skipped (their
  values still complete, so nothing waiting hangs). Every synchronize of the stream, and of
  an event recorded on it at or after the failing task, raises an ``AclError`` with the
  original code (an ``AclError`` raised by the task keeps its code; any other exception
  becomes ``STREAM_TASK_FAILED``) and message, chained to the original. The failure is
  sticky: destroy the stream and create another (for a default stream, reset the device or
  destroy the context). Other streams are unaffected.
* Stream ``0`` means the default stream of the calling thread's current context. ``None``
  (an omitted argument in the Pythonic API) means the thread's current stream: the top of
  its ``with stream:`` stack, else that same default stream.
* A stream belongs to the context that was current when it was created; destroying the
  context destroys the stream. ``destroy_stream`` waits for the queued work, as CANN's
  aclrtDestroyStream does; ``destroy_stream_force`` does not (the work still runs in the
  background); destroying a context, resetting a device and ``finalize`` wait with a bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    AclError,
)
from openacl.runtime import core, profiler, sanitizer
from openacl.runtime.context import current_context

STREAM_TASK_FAILED = ACL_ERROR_RT_AICORE_EXCEPTION  # code for a task that raised non-AclError
ACL_STREAM_STATUS_COMPLETE = 0
ACL_STREAM_STATUS_NOT_READY = 1
MS_PER_S = 1000.0

_tls = threading.local()


def timeout_seconds(timeout_ms: object, argument: str = "timeout") -> float | None:
    """ACL timeouts are ms with -1 meaning forever; returns seconds or None."""
    value = core.as_index(timeout_ms)
    if value is None or value < -1:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {timeout_ms!r} is invalid: expected a number "
                       f"of milliseconds >= 0, or -1 to wait forever")
    return None if value == -1 else value / MS_PER_S


def failure_error(prefix: str, exc: BaseException) -> AclError:
    """The error a synchronize raises for a task failure."""
    if isinstance(exc, AclError):
        return AclError(exc.code, f"{prefix}: {exc.message}")
    return AclError(STREAM_TASK_FAILED, f"{prefix}: {type(exc).__name__}: {exc}")


class Stream:
    """An asynchronous in-order queue of work (aclrtStream)."""

    def __init__(self, context, is_default: bool = False) -> None:
        self.context = context
        self.device = context.device
        self.is_default = is_default
        self.destroyed = False
        self.failure: tuple[int, BaseException] | None = None  # (task value, exception)
        runtime = self.device.runtime
        self.handle = runtime.handles.add(self)
        name = f"stream-{self.handle:#x}" + ("-default" if is_default else "")
        self.queue = runtime.backend.create_queue(self.device.id, name)
        if not is_default:
            context.streams.add(self)

    def __index__(self) -> int:
        return 0 if self.is_default else self.handle

    def __repr__(self) -> str:
        kind = "default " if self.is_default else ""
        return f"<{kind}Stream {self.handle:#x} device={self.device.id}>"

    # -- the allocator's StreamLike protocol ------------------------------------------------
    def marker(self) -> Callable[[], bool]:
        value = self.queue.submitted
        queue = self.queue
        return lambda: queue.done(value)

    # -- work ------------------------------------------------------------------------------
    def submit(self, task: Callable[[], None], host: bool = False) -> int:
        """Enqueue ``task``; returns its position on the stream's timeline. ``host`` marks a
        task that reads the results of earlier work on the host (a host function or a
        callback): on a device backend it runs only once that work has finished."""
        if profiler.active:  # a task labelled by its enqueuer is timed (profiler.py)
            task = profiler.wrap(task, self)
        if self.destroyed:
            raise AclError(ACL_ERROR_INVALID_PARAM, f"stream {self.handle:#x} was destroyed")

        def guarded(value: int) -> None:
            # the failure policy (see the design note): skip after a failure, record the first
            if self.failure is not None:
                return
            try:
                task()
            except BaseException as exc:  # noqa: BLE001 - a task failure poisons the stream
                self.failure = (value, exc)

        if sanitizer.active:  # the task's place in the happens-before order (sanitizer.py)
            return self.queue.submit(sanitizer.wrap(guarded, self), host)
        return self.queue.submit(guarded, host)

    def wait_value(self, value: int, timeout: float | None, what: str,
                   timeout_code: int = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) -> None:
        """Block until task ``value`` has run; raise its failure if it (or one before) failed.
        With no time limit the waiting thread first runs, itself, the tasks up to ``value``
        that no worker has started (``HostQueue.help``): no thread hand-off."""
        if timeout is None:
            self.queue.help(value)
        if not self.queue.timeline.wait(value, timeout):
            raise AclError(timeout_code,
                           f"{what} did not complete within {timeout * MS_PER_S:.0f} ms "
                           f"(stream {self.handle:#x} has run {self.queue.timeline.value} of "
                           f"{self.queue.submitted} tasks)")
        self.raise_failure(value)

    def raise_failure(self, upto: int | None = None) -> None:
        failure = self.failure
        if failure is not None and (upto is None or failure[0] <= upto):
            value, exc = failure
            raise failure_error(f"stream {self.handle:#x} failed at task {value}", exc) from exc

    def synchronize(self, timeout: float | None = None) -> None:
        if not sanitizer.active:
            self.wait_value(self.queue.submitted, timeout, f"stream {self.handle:#x}")
            return
        try:
            self.wait_value(self.queue.submitted, timeout, f"stream {self.handle:#x}")
        finally:
            if self.queue.done():  # waited for everything, even if a task failed
                sanitizer.on_host_join(self)

    def query(self) -> int:
        """``ACL_STREAM_STATUS_COMPLETE`` or ``ACL_STREAM_STATUS_NOT_READY``."""
        if not self.queue.done():
            return ACL_STREAM_STATUS_NOT_READY
        if sanitizer.active:  # the host saw it complete: what it did precedes what follows
            sanitizer.on_host_join(self)
        return ACL_STREAM_STATUS_COMPLETE

    def shutdown(self, drain_timeout: float | None = 0.0) -> None:
        """Stop accepting work and release the handle. Queued work still runs; wait up to
        ``drain_timeout`` seconds for it (0: don't wait, None: wait until done)."""
        if self.destroyed:
            return
        self.destroyed = True
        if sanitizer.active:  # synccheck: queued work nobody synchronized
            sanitizer.on_stream_shutdown(self, self.queue.submitted - self.queue.timeline.value)
        self.queue.close()
        drained = self.queue.done() or (
            drain_timeout != 0.0 and self.queue.timeline.wait(self.queue.submitted,
                                                               drain_timeout))
        if drained and sanitizer.active:
            sanitizer.on_host_join(self)
        if drained:  # its cached memory may now serve the context's other streams
            successor = None if self.is_default else self.context.default_stream
            self.device.allocator.retire_stream(self, successor)
        self.context.streams.discard(self)
        self.device.runtime.handles.remove(self.handle)


# -- the per-thread current stream -------------------------------------------------------------
def _stack() -> list[Stream]:
    return core.thread_stack(_tls)


def push_stream(stream: Stream) -> None:
    _stack().append(stream)


def pop_stream(stream: Stream) -> None:
    stack = _stack()
    if stack and stack[-1] is stream:
        stack.pop()


def resolve_stream(stream: object = None, argument: str = "stream") -> Stream:
    """The ``Stream`` meant by a stream argument (handle, object, 0 or None)."""
    if type(stream) is int and stream == 0:  # the hot path: the default stream
        return current_context().default_stream
    if stream is None:
        stack = _stack()
        if stack and not stack[-1].destroyed:
            return stack[-1]
        return current_context().default_stream
    if isinstance(stream, Stream):
        if stream.destroyed:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument '{argument}' = {stream.handle:#x} was destroyed")
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool) and stream == 0:
        return current_context().default_stream
    return core.current().handles.get(stream, Stream, argument)


# -- the flat API ----------------------------------------------------------------------------
def create_stream() -> int:
    """Create a stream in the current context (aclrtCreateStream)."""
    return Stream(current_context()).handle


def destroy_stream(stream: int) -> None:
    """Destroy a stream once its queued work has run (aclrtDestroyStream)."""
    target = resolve_stream(stream)
    if target.is_default:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       "argument 'stream' = 0 is the default stream; it cannot be destroyed")
    target.shutdown(drain_timeout=None)


def destroy_stream_force(stream: int) -> None:
    """Destroy a stream without waiting for its queued work (aclrtDestroyStreamForce);
    that work still runs in the background."""
    target = resolve_stream(stream)
    if target.is_default:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       "argument 'stream' = 0 is the default stream; it cannot be destroyed")
    target.shutdown(drain_timeout=0.0)


def synchronize_stream(stream: int) -> None:
    """Wait for all work on ``stream``; raises its failure, if any."""
    resolve_stream(stream).synchronize()


def synchronize_stream_with_timeout(stream: int, timeout: int) -> None:
    """Like ``synchronize_stream`` with a limit in ms (-1 waits forever); 507046 on timeout."""
    seconds = timeout_seconds(timeout)
    resolve_stream(stream).synchronize(seconds)


def stream_query(stream: int) -> int:
    """``ACL_STREAM_STATUS_COMPLETE`` (0) or ``ACL_STREAM_STATUS_NOT_READY`` (1)."""
    return resolve_stream(stream).query()


query_stream = stream_query


def launch_host_func(stream: int, func: Callable, *args) -> None:
    """Run ``func(*args)`` on the stream's timeline (aclrtLaunchHostFunc)."""
    if not callable(func):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'fn' = {func!r} is not callable")
    if profiler.active:
        profiler.label("host_func", getattr(func, "__qualname__", type(func).__name__))
    resolve_stream(stream).submit(lambda: func(*args), host=True)
