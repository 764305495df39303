"""Events: snapshots of a stream's timeline, for cross-stream waits, queries and timing.

Design note (invariants)
------------------------
* ``record_event(event, stream)`` enqueues a marker task and stores a new immutable
  ``RecordPoint`` (stream, value, time-stamp slot) in the event. Completion of the event is
  ``stream timeline >= value``; nothing else is consulted.
* ``stream_wait_event(stream, event)`` captures the event's *current* point when it is
  called and enqueues a wait for it, so re-recording the event afterwards does not change
  what was waited on. Waiting on an event never recorded is a no-op (CUDA and ACL agree).
* Time-stamps are taken by the marker task when it runs (``queue.stamp``: the host clock on
  the CPU backend, a CUDA event on the GPU), so elapsed time measures the work between two
  markers, not host submission.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    AclError,
)
from openacl.runtime import core, sanitizer
from openacl.runtime.stream import Stream, resolve_stream, timeout_seconds

ACL_EVENT_SYNC = 0x00000001
ACL_EVENT_CAPTURE_STREAM_PROGRESS = 0x00000002
ACL_EVENT_TIME_LINE = 0x00000008
ACL_EVENT_EXTERNAL = 0x00000020
EVENT_FLAGS = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE \
    | ACL_EVENT_EXTERNAL

# aclrtEventRecordedStatus
ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
# aclrtEventStatus (aclrtQueryEvent, deprecated in CANN but still used by samples)
ACL_EVENT_STATUS_COMPLETE = 0
ACL_EVENT_STATUS_NOT_READY = 1


@dataclass(eq=False)
class RecordPoint:
    """Where an event was recorded: a value on a stream's timeline."""

    stream: Stream
    value: int = 0
    timestamp: float | None = field(default=None)

    def done(self) -> bool:
        return self.stream.queue.done(self.value)


class Event:
    """An aclrtEvent."""

    def __init__(self, flags: int = ACL_EVENT_TIME_LINE) -> None:
        runtime = core.current()
        self.flags = flags
        self.point: RecordPoint | None = None
        self.handle = runtime.handles.add(self)

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<Event {self.handle:#x} flags={self.flags:#x}>"

    def record(self, stream: Stream) -> None:
        point = RecordPoint(stream)
        queue = stream.queue

        def stamp() -> None:
            point.timestamp = queue.stamp()

        point.value = stream.submit(stamp)
        self.point = point
        if sanitizer.active:  # the record's snapshot of the stream's clock
            sanitizer.on_record(point)

    def done(self) -> bool:
        point = self.point
        if point is not None and point.done():
            if sanitizer.active:  # the host saw it complete (a query)
                sanitizer.on_host_join(point=point)
            return True
        return point is None

    def synchronize(self, timeout: float | None = None) -> None:
        point = self.point
        if point is None and sanitizer.active:
            sanitizer.on_unrecorded_event(self, "synchronize")
        if point is not None:
            point.stream.wait_value(point.value, timeout, f"event {self.handle:#x}",
                                    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT)
            if sanitizer.active:
                sanitizer.on_host_join(point=point)


def lookup_event(handle: object, argument: str = "event") -> Event:
    return core.current().handles.get(handle, Event, argument)


def create_event() -> int:
    """Create an event (aclrtCreateEvent)."""
    return Event().handle


def create_event_with_flag(flag: int) -> int:
    """Create an event with ``ACL_EVENT_*`` flags (aclrtCreateEventWithFlag)."""
    value = core.as_index(flag)
    if value is None or value <= 0 or value & ~EVENT_FLAGS:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'flag' = {flag!r} is invalid: expected a non-empty "
                       f"combination of ACL_EVENT_SYNC (0x1), ACL_EVENT_CAPTURE_STREAM_PROGRESS "
                       f"(0x2), ACL_EVENT_TIME_LINE (0x8), ACL_EVENT_EXTERNAL (0x20)")
    return Event(value).handle


def destroy_event(event: int) -> None:
    target = lookup_event(event)
    core.current().handles.remove(target.handle)


def record_event(event: int, stream: int) -> None:
    """Record ``event`` at the current end of ``stream`` (aclrtRecordEvent)."""
    lookup_event(event).record(resolve_stream(stream))


def reset_event(event: int, stream: int) -> None:
    """Return ``event`` to the never-recorded state (aclrtResetEvent)."""
    target = lookup_event(event)
    resolve_stream(stream)
    target.point = None


def stream_wait_event(stream: int, event: int) -> None:
    """Make ``stream`` wait for ``event``'s current record point (aclrtStreamWaitEvent)."""
    waiter = resolve_stream(stream)
    target = lookup_event(event)
    point = target.point
    if point is None and sanitizer.active:
        sanitizer.on_unrecorded_event(target, "stream wait")
    if point is None or point.stream is waiter:
        return  # nothing recorded, or already ordered by the stream's FIFO
    if sanitizer.active:
        sanitizer.on_event_wait(waiter, point)
    timeline, value = point.stream.queue.timeline, point.value
    waiter.submit(lambda: timeline.wait(value))


def synchronize_event(event: int) -> None:
    """Block until ``event`` completes; raises the failure of its stream if it failed."""
    lookup_event(event).synchronize()


def synchronize_event_with_timeout(event: int, timeout: int) -> None:
    """Like ``synchronize_event`` with a limit in ms (-1 waits forever)."""
    lookup_event(event).synchronize(timeout_seconds(timeout))


def query_event_status(event: int) -> int:
    """``ACL_EVENT_RECORDED_STATUS_COMPLETE`` (1) or ``..._NOT_READY`` (0)."""
    done = lookup_event(event).done()
    return ACL_EVENT_RECORDED_STATUS_COMPLETE if done else ACL_EVENT_RECORDED_STATUS_NOT_READY


def query_event(event: int) -> int:
    """``ACL_EVENT_STATUS_COMPLETE`` (0) or ``ACL_EVENT_STATUS_NOT_READY`` (1)."""
    return ACL_EVENT_STATUS_COMPLETE if lookup_event(event).done() else ACL_EVENT_STATUS_NOT_READY


def event_elapsed_time(start: int, end: int) -> float:
    """Milliseconds between two completed records (aclrtEventElapsedTime)."""
    stamps = []
    for argument, handle in (("start", start), ("end", end)):
        target = lookup_event(handle, argument)
        if not target.flags & ACL_EVENT_TIME_LINE:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument '{argument}' = {target.handle:#x} was created with flags "
                           f"{target.flags:#x}, without ACL_EVENT_TIME_LINE: it takes no time")
        point = target.point
        if point is None:
            raise AclError(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                           f"argument '{argument}' = {target.handle:#x} was never recorded")
        if not point.done() or point.timestamp is None:
            raise AclError(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                           f"argument '{argument}' = {target.handle:#x} has not completed yet; "
                           f"synchronize it first")
        stamps.append(point)
    return stamps[1].stream.queue.elapsed_ms(stamps[0].timestamp, stamps[1].timestamp)

