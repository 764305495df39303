"""Running a kernel over its blocks: the CPU's AI cores.

Design note (invariants)
------------------------
* A launch runs ``kernel`` once per block index ``0..block_dim-1``. Blocks run in parallel
  on one process-wide pool of worker threads (numpy releases the GIL in its loops, so large
  blocks really overlap); a launch returns when every block has finished, so a stream task
  that launches a kernel completes only after all its blocks did.
* ``get_block_idx()`` / ``get_block_num()`` (Ascend C's GetBlockIdx / GetBlockNum) read a
  thread-local set around each block, so a kernel may call them anywhere below it.
* If blocks raise, the launch raises ``AclError`` ``ACL_ERROR_RT_AICORE_EXCEPTION`` (507015)
  naming the kernel and the first failing block with its message and its traceback, trimmed
  to the frames outside openacl (the kernel's file, line and source line: what its author
  fixes); the stream that ran the launch fails with it (see ``runtime/stream.py``).
* Blocks must touch disjoint slices of their outputs (the kernel author's contract, as on
  the device); the pool never runs two blocks of one launch on one thread at once.
"""

from __future__ import annotations

import concurrent.futures
import threading
import traceback
from collections.abc import Callable
from typing import Any

from openacl.errors import ACL_ERROR_RT_AICORE_EXCEPTION, AclError
from openacl.runtime import sanitizer
from openacl.runtime.frames import in_package

MAX_POOL_THREADS = 32  # upper bound on block worker threads, whatever the core count
MAX_TRACEBACK_FRAMES = 8  # innermost user frames shown for a failing block

_local = threading.local()
_pool_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def get_block_idx() -> int:
    """Index of the block the calling kernel code runs in (GetBlockIdx)."""
    return getattr(_local, "block_idx", 0)


def get_block_num() -> int:
    """Number of blocks of the current launch (GetBlockNum)."""
    return getattr(_local, "block_num", 1)


def get_tiling_key() -> int:
    """The tiling key the op's tiling function chose (Ascend C's TILING_KEY_IS)."""
    return getattr(_local, "tiling_key", 0)


def _pool_threads() -> int:
    from openacl.runtime.threads import configured

    return max(1, min(MAX_POOL_THREADS, configured()))


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_pool_threads(),
                                                         thread_name_prefix="openacl-block")
        return _pool


def _run_block(kernel: Callable[..., Any], index: int, count: int, args: tuple,
               tiling_key: int = 0) -> None:
    outer = (get_block_idx(), get_block_num(), get_tiling_key())  # a launch inside a block
    _local.block_idx, _local.block_num, _local.tiling_key = index, count, tiling_key
    try:
        kernel(*args)
    finally:
        _local.block_idx, _local.block_num, _local.tiling_key = outer


def _is_openacl_frame(frame: traceback.FrameSummary) -> bool:
    return in_package(frame.filename)


def block_traceback(exc: BaseException) -> str:
    """The traceback of a block's exception as the kernel's author reads it: the frames below
    the launch machinery (the worker thread and openacl's block runner) less openacl's own,
    innermost ``MAX_TRACEBACK_FRAMES`` of them (every frame when none is left), each with its
    file, line and source line."""
    frames = traceback.extract_tb(exc.__traceback__)
    start = 0
    for position, frame in enumerate(frames):
        if _is_openacl_frame(frame):
            start = position + 1
        elif start:
            break  # the first frame the launch machinery called: the kernel
    user = [frame for frame in frames[start:] if not _is_openacl_frame(frame)] or list(frames)
    return "".join(traceback.format_list(user[-MAX_TRACEBACK_FRAMES:])).rstrip("\n")


def run_blocks(kernel: Callable[..., Any], block_dim: int, args: tuple, name: str,
               tiling_key: int = 0) -> None:
    """Run ``kernel(*args)`` once per block; raise 507015 if any block raised."""
    if block_dim == 1 or sanitizer.active or \
            threading.current_thread().name.startswith("openacl-block"):
        # one block, a launch from inside a block, or the sanitizer (which attributes each
        # write to its block): run here, in order
        futures = None
        errors = []
        for index in range(block_dim):
            try:
                _run_block(kernel, index, block_dim, args, tiling_key)
            except BaseException as exc:  # noqa: BLE001 - reported below, per block
                errors.append((index, exc))
    else:
        pool = _shared_pool()
        futures = [pool.submit(_run_block, kernel, index, block_dim, args, tiling_key)
                   for index in range(block_dim)]
        errors = [(index, future.exception()) for index, future in enumerate(futures)
                  if future.exception() is not None]
    if errors:
        index, exc = errors[0]
        more = f" ({len(errors) - 1} more block(s) failed)" if len(errors) > 1 else ""
        trace = block_traceback(exc)
        where = f"\ntraceback of block {index} (most recent call last):\n{trace}" if trace \
            else ""
        raise AclError(ACL_ERROR_RT_AICORE_EXCEPTION,
                       f"kernel {name} block {index}/{block_dim} failed: "
                       f"{type(exc).__name__}: {exc}{more}{where}") from exc
