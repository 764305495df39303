"""Reading and writing device memory from tests on any backend (through aclrtMemcpy, never
through host views, which only the cpu backend's device memory allows)."""

from __future__ import annotations

import numpy as np

from openacl import rt
from openacl.util import numpy_to_ptr

ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2


def read_device(ptr: int, size: int) -> bytes:
    """``size`` bytes at device address ``ptr``."""
    host = np.empty(size, np.uint8)
    if size:
        rt.memcpy(numpy_to_ptr(host), size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST)
    return host.tobytes()


def write_device(ptr: int, data: bytes | np.ndarray) -> None:
    """Copy ``data`` to device address ``ptr``."""
    host = np.ascontiguousarray(np.frombuffer(bytes(data), np.uint8))
    if host.size:
        rt.memcpy(ptr, host.size, numpy_to_ptr(host), host.size, ACL_MEMCPY_HOST_TO_DEVICE)


def to_host(array) -> np.ndarray:
    """A host copy of a kernel-side array: numpy as it is, a device array through ``get``."""
    return array if isinstance(array, np.ndarray) else array.get()
