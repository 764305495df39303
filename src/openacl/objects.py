"""Pythonic wrappers over the flat runtime functions: ``Context``, ``Stream``, ``Event``,
``DeviceBuffer`` and ``HostBuffer``.

Each holds the handle or pointer the flat API returned and converts to it with
``operator.index`` (so ``rt.synchronize_stream(stream)`` works), and releases it on
``destroy()``/``free()`` or at the end of a ``with`` block. Entering a ``Context`` or a
``Stream`` also makes it the calling thread's current one until the block ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openacl import rt
from openacl.constants import (
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_EVENT_TIME_LINE,
    ACL_MEMCPY_DEFAULT,
    ACL_STREAM_STATUS_COMPLETE,
)
from openacl.runtime import context as _context
from openacl.runtime import stream as _stream
from openacl.util import numpy_to_ptr, ptr_to_numpy


class Context:
    """A device context; ``with Context(1):`` runs the block on device 1."""

    def __init__(self, device_id: int = 0) -> None:
        previous = _context.current_context(required=False)
        self.handle = rt.create_context(device_id)
        if previous is not None:  # creating must not change the current context for good
            _context.set_current_context(previous)

    def __index__(self) -> int:
        return self.handle

    def __enter__(self) -> Context:
        _context.push_context(_context.lookup_context(self.handle))
        return self

    def __exit__(self, *exc: Any) -> None:
        _context.pop_context(_context.lookup_context(self.handle))
        self.destroy()

    def destroy(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            rt.destroy_context(handle)


class Stream:
    """An asynchronous stream; ``with Stream() as s:`` makes ``s`` current and, at the end,
    synchronizes and destroys it."""

    def __init__(self) -> None:
        self.handle = rt.create_stream()

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        if self.handle is None:
            return "<openacl.Stream (destroyed)>"
        return f"<openacl.Stream {self.handle:#x}>"

    def synchronize(self, timeout_ms: int = -1) -> None:
        rt.synchronize_stream_with_timeout(self.handle, timeout_ms)

    def done(self) -> bool:
        return rt.stream_query(self.handle) == ACL_STREAM_STATUS_COMPLETE

    def wait_event(self, event: Event | int) -> None:
        rt.stream_wait_event(self.handle, event)

    def record(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        rt.record_event(event, self.handle)
        return event

    def launch_host_func(self, fn: Any, *args: Any) -> None:
        rt.launch_host_func(self.handle, fn, *args)

    def destroy(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            rt.destroy_stream(handle)

    def __enter__(self) -> Stream:
        _stream.push_stream(_stream.resolve_stream(self.handle))
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        _stream.pop_stream(_stream.resolve_stream(self.handle))
        try:
            if exc_type is None:
                self.synchronize()
        finally:
            self.destroy()


class Event:
    """An event with timing; ``stream.record()`` returns one."""

    def __init__(self, flags: int = ACL_EVENT_TIME_LINE) -> None:
        self.handle = rt.create_event_with_flag(flags)

    def __index__(self) -> int:
        return self.handle

    def record(self, stream: Any = 0) -> Event:
        rt.record_event(self.handle, stream)
        return self

    def synchronize(self, timeout_ms: int = -1) -> None:
        rt.synchronize_event_with_timeout(self.handle, timeout_ms)

    def done(self) -> bool:
        return rt.query_event_status(self.handle) == ACL_EVENT_RECORDED_STATUS_COMPLETE

    def elapsed_time(self, end: Event | int) -> float:
        """Milliseconds from this event to ``end`` (both completed)."""
        return rt.event_elapsed_time(self.handle, end)

    def destroy(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            rt.destroy_event(handle)

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


class _Buffer:
    _free = staticmethod(rt.free)

    def __init__(self, ptr: int, size: int) -> None:
        self.ptr, self.size = ptr, size

    def __index__(self) -> int:
        return self.ptr

    def copy_from(self, source: Any, stream: Any = None) -> None:
        """Copy a host array or bytes-like object in (queued on ``stream`` if given)."""
        host = np.ascontiguousarray(source if isinstance(source, np.ndarray)
                                    else np.frombuffer(source, np.uint8))
        ptr = numpy_to_ptr(host)
        if stream is None:
            rt.memcpy(self.ptr, self.size, ptr, host.nbytes, ACL_MEMCPY_DEFAULT)
        else:
            rt.memcpy_async(self.ptr, self.size, ptr, host.nbytes, ACL_MEMCPY_DEFAULT, stream)

    def to_numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray:
        """A host copy of the contents, read as ``dtype`` (synchronous)."""
        data = np.empty(self.size, np.uint8)
        rt.memcpy(numpy_to_ptr(data), data.nbytes, self.ptr, self.size, ACL_MEMCPY_DEFAULT)
        out = data.view(dtype)
        return out if shape is None else out.reshape(shape)

    def free(self) -> None:
        if self.ptr is not None:
            ptr, self.ptr = self.ptr, None
            type(self)._free(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()


class DeviceBuffer(_Buffer):
    """``size`` bytes of device memory from ``rt.malloc``."""

    def __init__(self, size: int, policy: int = 0) -> None:
        super().__init__(rt.malloc(size, policy), size)


class HostBuffer(_Buffer):
    """``size`` bytes of pinned host memory from ``rt.malloc_host``; ``.numpy()`` is a view."""

    _free = staticmethod(rt.free_host)

    def __init__(self, size: int) -> None:
        super().__init__(rt.malloc_host(size), size)

    def numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray:
        """A zero-copy numpy view of the buffer."""
        itemsize = np.dtype(dtype).itemsize
        dims = (self.size // itemsize,) if shape is None else tuple(shape)
        return ptr_to_numpy(self.ptr, dims, dtype)
