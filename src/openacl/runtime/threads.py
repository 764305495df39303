"""The CPU threads openacl's work uses: one setting, the C kernels' pool kept to it.

Design note (invariants)
------------------------
* The setting: ``init``'s ``num_threads`` (the config key, or ``OPENACL_NUM_THREADS``), else
  a count the user already gave numpy's BLAS (``OPENBLAS_NUM_THREADS``, then
  ``OMP_NUM_THREADS``: a shared box's usual knob is respected, not overridden), else the
  cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` where that is
  missing). ``InferenceSession(path, threads=N)`` overrides it for that session's runs,
  as onnxruntime's ``intra_op_num_threads`` does. A session (and a model ``mdl`` loads)
  reads the setting once, when made: reading it (the environment, the affinity) costs
  ~5 us, half a tiny model's run.
* What runs on threads: the C kernels' own pool (``_native_pool.c``) runs the float32
  products and convolutions on the packed GEMM; numpy's BLAS (OpenBLAS) pool is held at one
  thread meanwhile, so the two never spin against each other (with both at 2 threads
  MiniLM b1 took 59-78 ms instead of 40, measured); the products the GEMM leaves to numpy
  (small, thin, non-float32) run on that one thread. Where the extension is missing or
  ``OPENACL_NATIVE=0``, numpy's BLAS pool gets the setting instead. The custom-op block
  pool is sized by the setting too. The BLAS pool is set through threadpoolctl (its
  libraries found once, at the first run) and only when the count wanted differs from the
  one it has: a run pays a comparison (and a C call that reads the pool's count), a change
  one ctypes call. Two sessions with different counts running in turn resize the C pool
  at each run (its workers stopped and started: about a millisecond on a loaded VM).
* On a machine another process keeps busy, fewer threads than cores is steadier: spinning
  workers fight the other process for the cores (the C pool's spin up to 1 ms, yielding
  to any runnable thread; ``threads=1`` is the setting for a shared or small box; see the
  README).
* The BLAS pool is process-wide: sessions with different counts running at the same moment
  from two threads share it (the last one set wins); a count is a limit for the process's
  work, not a reservation of cores.
* Nothing here runs at import: threadpoolctl is imported on the first run that needs it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError

__all__ = ["MAX_THREADS", "NATIVE_POOL_MAX", "apply", "available_cores", "check_threads",
           "configured", "native_module", "size_native_pool"]

MAX_THREADS = 1024  # a sanity bound on the setting

_lock = threading.Lock()
_blas: list[Any] | None = None  # threadpoolctl's BLAS library controllers, found once
_current: int | None = None  # the count the BLAS pool was last set to here


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def check_threads(value: Any, name: str = "threads") -> int | None:
    """``value`` as a thread count (an int in [1, MAX_THREADS]) or None (the setting).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming ``name`` and the value.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{name}' = {value!r} is invalid: give an int in "
                       f"[1, {MAX_THREADS}] (or None: the init setting, else the cores "
                       f"this process may use, {available_cores()})")
    return value


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def configured() -> int:
    """The process's setting: ``init``'s ``num_threads``, else the BLAS count the environment
    gives (``BLAS_THREAD_VARIABLES``, a positive int), else the available cores."""
    from openacl.runtime import core

    if core.is_initialized():
        count = core.current().config.num_threads
        if count is not None:
            return count
    for name in BLAS_THREAD_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and 1 <= int(value) <= MAX_THREADS:
            return int(value)
    return available_cores()


def apply(count: int | None = None) -> int:
    """Keep the C kernels' pool at ``count`` threads (None: ``configured()``) and numpy's
    BLAS pool at one (at ``count`` where the C kernels are missing or off); returns the
    count. Cheap when nothing changes (see the design note)."""
    global _blas, _current
    wanted = configured() if count is None else count
    pool = native_module()
    if pool is not None and pool.pool_threads() != min(wanted, NATIVE_POOL_MAX):
        pool.pool_threads(min(wanted, NATIVE_POOL_MAX))
    blas_wanted = wanted if pool is None else 1
    if blas_wanted == _current:
        return wanted
    with _lock:
        if _blas is None:
            _blas = _blas_controllers()
        for controller in _blas:
            controller.set_num_threads(blas_wanted)
        _current = blas_wanted
    return wanted


def size_native_pool(lib: Any) -> None:
    """Give a freshly loaded C kernel pool the setting, unless a run has sized it already
    (direct aclnn calls then use the cores as the engine's runs do)."""
    if _current is None:
        lib.pool_threads(min(configured(), NATIVE_POOL_MAX))


_NO_POOL = object()
_pool: Any = None  # openacl._native once looked up (_NO_POOL: missing or turned off)


def native_module() -> Any:
    """openacl._native (the C kernels and their pool), or None where it was not built or
    ``OPENACL_NATIVE=0`` turns it off; looked up once (``ops/native.py`` loads it here)."""
    global _pool
    if _pool is None:
        _pool = _NO_POOL
        if os.environ.get("OPENACL_NATIVE", "1").strip() != "0":
            try:
                from openacl import _native
            except ImportError:
                pass
            else:
                _pool = _native
    return None if _pool is _NO_POOL else _pool


NATIVE_POOL_MAX = 256  # _native_pool.h's POOL_MAX_THREADS


def _blas_controllers() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process (empty when
    threadpoolctl is missing: numpy's BLAS then keeps its own count)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    return list(ThreadpoolController().select(user_api="blas").lib_controllers)
