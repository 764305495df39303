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


def availability() -> dict[str, str]:
    """Each backend and whether it can run here ("available ..." or "unavailable: why");
    probing CUDA imports CuPy, so this is for tools (``openacl info``), not ``init``."""
    from openacl.backends.cuda import import_cupy

    result = {"cpu": "available"}
    try:
        cupy = import_cupy()
    except LookupError as exc:
        result["cuda"] = f"unavailable: {exc}"
    else:
        count = cupy.cuda.runtime.getDeviceCount()
        result["cuda"] = f"available: {count} GPU(s), CuPy {cupy.__version__}"
    return result


__all__ = ["Backend", "BACKEND_NAMES", "availability", "create_backend"]
