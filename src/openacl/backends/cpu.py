"""The CPU backend: device memory is numpy-owned host memory, streams are host queues.

Addresses are real (``ndarray.ctypes.data``), so pointers work with ctypes, DLPack and
``ptr_to_numpy``. Every allocation is aligned to ``ALLOCATION_ALIGNMENT``.
"""

from __future__ import annotations

import weakref

import numpy as np

from openacl.backends.base import Backend, quiet_floating_point
from openacl.backends.host_queue import HostQueue, make_executor

ALLOCATION_ALIGNMENT = 4096  # bytes; base alignment of every raw allocation (a page)


def _aligned_bytes(nbytes: int) -> tuple[int, np.ndarray]:
    try:
        raw = np.empty(nbytes + ALLOCATION_ALIGNMENT, dtype=np.uint8)
    except (MemoryError, ValueError) as exc:
        raise MemoryError(f"cannot reserve {nbytes} bytes of host memory") from exc
    base = raw.ctypes.data
    skip = (-base) % ALLOCATION_ALIGNMENT
    buffer = raw[skip : skip + nbytes]
    return base + skip, buffer


class CpuBackend(Backend):
    """numpy memory and worker-thread queues; every device shares the host's RAM."""

    name = "cpu"
    host_addressable = True

    def __init__(self, device_count: int, stream_mode: str) -> None:
        super().__init__(device_count)
        self.stream_mode = stream_mode
        self._executor = make_executor(stream_mode, quiet_floating_point)
        self._raw: dict[int, weakref.ref] = {}  # id -> raw arrays handed out, for owns()

    def _reserve(self, nbytes: int) -> tuple[int, np.ndarray]:
        address, buffer = _aligned_bytes(nbytes)
        for array in (buffer, buffer.base):
            self._raw[id(array)] = weakref.ref(array)
        return address, buffer

    def _release(self, handle: np.ndarray) -> None:
        for array in (handle, handle.base):
            self._raw.pop(id(array), None)  # numpy frees the bytes with the last view

    def _alloc(self, device: int, nbytes: int) -> tuple[int, np.ndarray]:
        return self._reserve(nbytes)

    def _free(self, device: int, handle: np.ndarray) -> None:
        self._release(handle)

    def _alloc_host(self, nbytes: int) -> tuple[int, np.ndarray]:
        return self._reserve(nbytes)

    def _free_host(self, handle: np.ndarray) -> None:
        self._release(handle)

    def owns(self, array: object) -> bool:
        ref = self._raw.get(id(array))
        return ref is not None and ref() is array

    def view(self, handle: np.ndarray, offset: int, nbytes: int) -> np.ndarray:
        return handle[offset : offset + nbytes]

    def _copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        np.copyto(dst, src)

    def _fill(self, dst: np.ndarray, byte: int) -> None:
        dst.fill(byte)

    def total_memory(self, device: int) -> int:
        return self.host_total_memory()

    def available_memory(self, device: int) -> int:
        return self.host_available_memory()

    def create_queue(self, device: int, name: str) -> HostQueue:
        return HostQueue(self._executor, name)

    def shutdown(self) -> None:
        self._executor.shutdown(timeout=5.0)
