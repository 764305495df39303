"""Devices: ids ``0..N-1`` of the backend, each with its caching allocator and contexts.

Design note (invariants)
------------------------
* ``set_device`` is reference counted like aclrtSetDevice: each call makes the device's
  default context current for the calling thread and adds one reference; ``reset_device``
  drops one, and at zero destroys the default context and its streams. Contexts the user
  created with ``create_context`` live until ``destroy_context`` (or ``finalize``).
  Device memory is not freed by a reset: allocations are the program's to free, and
  ``finalize`` reports the ones it never freed.
* Device objects are created on first use under the runtime lock and live until finalize.
"""

from __future__ import annotations

import functools
import time

from openacl.errors import ACL_ERROR_RT_INVALID_DEVICEID, AclError
from openacl.runtime import core
from openacl.runtime.allocator import CachingAllocator
from openacl.runtime.context import Context, current_context, set_current_context
from openacl.runtime.stream import timeout_seconds


class Device:
    """One device of the backend."""

    def __init__(self, runtime: core.Runtime, device_id: int) -> None:
        self.id = device_id
        self.runtime = runtime
        backend = runtime.backend
        self.allocator = CachingAllocator(
            functools.partial(backend._alloc, device_id),
            functools.partial(backend._free, device_id),
            limit=runtime.config.memory_limit,
            name=f"device {device_id}",
        )
        self.refcount = 0
        self.default_context = None  # openacl.runtime.context.Context
        self.contexts: set = set()

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for every stream of every context of this device, ``timeout`` s in all."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for context in list(self.contexts):
            context.synchronize(deadline)

    def shutdown(self, timeout: float) -> None:
        for context in list(self.contexts):
            context.destroy(timeout)
        self.default_context = None


def check_device_id(device_id: object, argument: str = "deviceId") -> int:
    """Validate a device id against the backend's device count."""
    runtime = core.current()
    count = runtime.backend.device_count
    as_int = core.as_index(device_id)
    if as_int is None or not 0 <= as_int < count:
        raise AclError(ACL_ERROR_RT_INVALID_DEVICEID,
                       f"argument '{argument}' = {device_id!r} is invalid: the "
                       f"{runtime.backend.name} backend has devices 0..{count - 1}")
    return as_int


def device(device_id: object, argument: str = "deviceId") -> Device:
    """The ``Device`` object for an id, created on first use."""
    runtime = core.current()
    index = check_device_id(device_id, argument)
    with runtime.lock:
        found = runtime.devices.get(index)
        if found is None:
            found = runtime.devices[index] = Device(runtime, index)
        return found


def set_device(device_id: int) -> None:
    """Open ``device_id`` for this thread and make its default context current."""
    dev = device(device_id)
    with dev.runtime.lock:
        dev.refcount += 1
        if dev.default_context is None:
            dev.default_context = Context(dev, is_default=True)
        context = dev.default_context
    set_current_context(context)


def reset_device(device_id: int) -> None:
    """Drop one reference of ``set_device``; at zero, destroy the default context."""
    dev = device(device_id)
    with dev.runtime.lock:
        if dev.refcount == 0:
            return
        dev.refcount -= 1
        if dev.refcount > 0 or dev.default_context is None:
            return
        context, dev.default_context = dev.default_context, None
    context.destroy(core.FINALIZE_DRAIN_TIMEOUT)


def reset_device_force(device_id: int) -> None:
    """Reset ``device_id`` whatever its reference count (aclrtResetDeviceForce)."""
    dev = device(device_id)
    with dev.runtime.lock:
        dev.refcount = 1
    reset_device(device_id)


def get_device() -> int:
    """The device of the calling thread's current context."""
    return current_context().device.id


def get_device_count() -> int:
    """Number of devices of the selected backend."""
    return core.current().backend.device_count


def synchronize_device() -> None:
    """Wait for all work on the current device (aclrtSynchronizeDevice)."""
    current_context().device.synchronize()


def synchronize_device_with_timeout(timeout_ms: int) -> None:
    """Like ``synchronize_device`` with a limit in ms (-1 waits forever) for all streams."""
    current_context().device.synchronize(timeout_seconds(timeout_ms))
