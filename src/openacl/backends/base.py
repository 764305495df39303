"""The backend interface: raw hooks the runtime's policy code calls.

Hooks never validate user input and never raise ``AclError``; they report trouble with
ordinary Python exceptions (``MemoryError`` for a failed raw allocation) and the runtime
translates them.
"""

from __future__ import annotations

from typing import Any

from openacl.backends.host_queue import HostQueue


class Backend:
    """Mechanism for one kind of hardware. Subclasses fill in the hooks below."""

    name = "abstract"

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

    def _copy(self, dst: Any, src: Any) -> None:
        """Copy between two byte views of equal length (any memory kinds)."""
        raise NotImplementedError

    def _fill(self, dst: Any, byte: int) -> None:
        """Set every byte of a view to ``byte``."""
        raise NotImplementedError

    def total_memory(self, device: int) -> int:
        """Physical memory of ``device`` in bytes."""
        raise NotImplementedError

    def available_memory(self, device: int) -> int:
        """Memory the hardware could still hand out, in bytes."""
        raise NotImplementedError

    # -- execution -----------------------------------------------------------------------
    def create_queue(self, device: int, name: str) -> HostQueue:
        """An in-order execution queue for one stream."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop execution resources (worker threads); queued work is drained first."""
