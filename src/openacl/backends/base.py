"""The backend interface: raw hooks the runtime's policy code calls.

Hooks never validate user input and never raise ``AclError``; they report trouble with
ordinary Python exceptions (``MemoryError`` for a failed raw allocation) and the runtime
translates them.
"""

from __future__ import annotations

import contextlib
import os
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import numpy as np

from openacl.backends.host_queue import HostQueue


def quiet_floating_point() -> ContextManager:
    """Kernels behave like the device's: inf/NaN results, no floating-point warnings; the
    context every stream task runs in (numpy's error state is per thread; inline mode keeps
    the caller's)."""
    return np.errstate(all="ignore")


def _meminfo_bytes(field: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Backend:
    """Mechanism for one kind of hardware. Subclasses fill in the hooks below."""

    name = "abstract"
    # capabilities (what callers branch on, instead of the name):
    host_addressable = False  # device memory is host memory: the host reads it in place

    def __init__(self, device_count: int) -> None:
        self.device_count = device_count

    # -- memory --------------------------------------------------------------------------
    def _alloc(self, device: int, nbytes: int) -> tuple[int, Any]:
        """Reserve ``nbytes`` of device memory: returns ``(address, handle)``."""
        raise NotImplementedError

    def _free(self, device: int, handle: Any) -> None:
        """Return memory obtained from ``_alloc``."""
        raise NotImplementedError

    def _alloc_host(self, nbytes: int) -> tuple[int, Any]:
        """Reserve ``nbytes`` of page-locked host memory: returns ``(address, handle)``."""
        raise NotImplementedError

    def _free_host(self, handle: Any) -> None:
        raise NotImplementedError

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is one of this backend's raw allocations."""
        return False

    def view(self, handle: Any, offset: int, nbytes: int) -> Any:
        """A byte view of ``nbytes`` at ``offset`` inside an allocation handle."""
        raise NotImplementedError

    def strided(self, buffer: Any, dtype: np.dtype, dims: tuple[int, ...],
                strides: tuple[int, ...], offset: int) -> Any:
        """The array of ``dtype`` elements read from the byte view ``buffer`` with byte
        ``strides``, starting ``offset`` bytes in (works for every dtype, ml_dtypes' too)."""
        return np.ndarray(shape=dims, dtype=dtype, buffer=buffer, offset=offset,
                          strides=strides)

    def empty_array(self, dims: tuple[int, ...], dtype: np.dtype) -> Any:
        """An array with no elements (a view of an empty tensor: no memory behind it)."""
        return np.empty(dims, dtype)

    def fp32_matmul(self, tf32: bool) -> contextlib.AbstractContextManager:
        """The context every float32 matmul is issued in; ``tf32``: it may use
        TensorFloat-32 (no effect here)."""
        return contextlib.nullcontext()

    def array_module(self, array: Any) -> Any:
        """The array namespace (``xp``) of a view this backend made: numpy or cupy."""
        return np

    def _copy(self, dst: Any, src: Any) -> None:
        """Copy between two byte views of equal length (any memory kinds); done on return."""
        raise NotImplementedError

    def _copy_async(self, dst: Any, src: Any) -> None:
        """Enqueue the same copy on the current stream (called from inside a queue task)."""
        self._copy(dst, src)

    def _fill(self, dst: Any, byte: int) -> None:
        """Set every byte of a view to ``byte``; done on return."""
        raise NotImplementedError

    def _fill_async(self, dst: Any, byte: int) -> None:
        """Enqueue the same fill on the current stream (called from inside a queue task)."""
        self._fill(dst, byte)

    def device_name(self, device: int) -> str:
        """The device's name, as ``openacl info`` shows it."""
        return f"OpenACL-{self.name.upper()}"

    def total_memory(self, device: int) -> int:
        """Physical memory of ``device`` in bytes."""
        raise NotImplementedError

    def available_memory(self, device: int) -> int:
        """Memory the hardware could still hand out, in bytes."""
        raise NotImplementedError

    def host_total_memory(self) -> int:
        """Physical host RAM in bytes (the DDR figures of aclrtGetMemInfo)."""
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def host_available_memory(self) -> int:
        """Host RAM still available, in bytes (MemAvailable where /proc/meminfo has it)."""
        available = _meminfo_bytes("MemAvailable")
        if available is None:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        return available

    # -- execution -----------------------------------------------------------------------
    def create_queue(self, device: int, name: str) -> HostQueue:
        """An in-order execution queue for one stream."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop execution resources (worker threads); queued work is drained first."""
