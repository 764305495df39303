"""Backends: the only code that touches hardware.

A backend implements small underscore hooks (raw allocation, copy, fill, queues); all
validation, caching, statistics and error translation live above it, in the runtime.
"""

from __future__ import annotations

from openacl.backends.base import Backend

BACKEND_NAMES = ("cpu", "cuda")


def create_backend(name: str, device_count: int, stream_mode: str) -> Backend:
    """Instantiate the backend called ``name`` (raises ``LookupError`` if it cannot run here)."""
    if name == "cpu":
        from openacl.backends.cpu import CpuBackend

        return CpuBackend(device_count, stream_mode)
    if name == "cuda":
        from openacl.backends.cuda import CudaBackend

        return CudaBackend(device_count, stream_mode)
    raise LookupError(f"unknown backend {name!r}; expected one of {BACKEND_NAMES}")


__all__ = ["Backend", "BACKEND_NAMES", "create_backend"]
