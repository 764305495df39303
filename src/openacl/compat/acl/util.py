"""``acl.util``: pointers to and from Python objects, and pyACL's helper threads.

- ``bytes_to_ptr(data)`` -> ptr: the real address inside a ``bytes``/``bytearray``; writes
  through it (``acl.rt.memcpy`` into it) land in the object, as in pyACL.
- ``ptr_to_bytes(ptr, size)`` -> bytes: a copy.
- ``numpy_to_ptr(array)`` / ``numpy_contiguous_to_ptr(array)`` -> ptr (the second one makes a
  C-contiguous copy first when the array is not, and keeps it alive).
- ``ptr_to_numpy(ptr, shape, npy_type)`` -> ndarray: zero-copy, ``npy_type`` a numpy C type
  number (``NPY_FLOAT`` = 11, ``NPY_HALF`` = 23; ``constants.NPY_*``).
- ``thread_id, ret = start_thread(func, args_list)`` runs ``func(args_list)`` on a new
  thread; its id is the thread id ``acl.rt.subscribe_report`` takes. ``ret =
  stop_thread(thread_id)`` waits for it to end.

Converters return their result, or a placeholder (0 or None) with the message kept for
``acl.get_recent_err_msg()``; nothing raises for a bad argument.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openacl import util as _util
from openacl._api import module_dir
from openacl.compat.acl._face import RET, VALUE, generate, outputs
from openacl.compat.acl.constants import NPY_DTYPES
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime.memory import register_buffer

_threads: dict[int, threading.Thread] = {}  # start_thread's threads by id, until stopped
_threads_lock = threading.Lock()


def _numpy_contiguous_to_ptr(array: np.ndarray) -> int:
    """The address of ``array``'s data, or of a C-contiguous copy kept alive with it."""
    if not isinstance(array, np.ndarray):
        return _util.numpy_to_ptr(array)  # raises the "not a numpy array" error
    if array.flags.c_contiguous:
        return _util.numpy_to_ptr(array)
    return register_buffer(memoryview(np.ascontiguousarray(array)))


def _npy_dtype(npy_type: Any) -> np.dtype:
    dtype = NPY_DTYPES.get(npy_type) if isinstance(npy_type, int) else None
    if dtype is None:
        known = ", ".join(f"{number}={dtype.name}" for number, dtype in sorted(NPY_DTYPES.items()))
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'type' = {npy_type!r} is not a numpy type number: expected "
                       f"one of {known}")
    return dtype


def _ptr_to_numpy(ptr: int, shape: Sequence[int], npy_type: int) -> np.ndarray:
    """A zero-copy numpy view of ``shape`` elements of numpy type number ``npy_type``."""
    return _util.ptr_to_numpy(ptr, shape, _npy_dtype(npy_type))


def _start_thread(func: Callable[[Any], Any], args_list: Any) -> int:
    """Start a thread running ``func(args_list)``; returns its id (``threading`` ident)."""
    if not callable(func):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'thr_func' = {func!r} is not callable")
    thread = threading.Thread(target=func, args=(args_list,), name="acl.util.start_thread",
                              daemon=True)
    thread.start()
    with _threads_lock:
        _threads[thread.ident] = thread
    return thread.ident


def _stop_thread(thread_id: int) -> None:
    """Wait for a thread of ``start_thread`` to end (pyACL's stop_thread joins)."""
    with _threads_lock:
        thread = _threads.pop(thread_id, None) if isinstance(thread_id, int) else None
    if thread is None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'thr_id' = {thread_id!r} is not a thread started by "
                       f"acl.util.start_thread (or it was already stopped)")
    if thread is not threading.current_thread():
        thread.join()


_TABLE = [
    ("bytes_to_ptr", _util.bytes_to_ptr, VALUE(0)),
    ("ptr_to_bytes", _util.ptr_to_bytes, VALUE(None)),
    ("numpy_to_ptr", _util.numpy_to_ptr, VALUE(0)),
    ("numpy_contiguous_to_ptr", _numpy_contiguous_to_ptr, VALUE(0)),
    ("ptr_to_numpy", _ptr_to_numpy, VALUE(None)),
    ("start_thread", _start_thread, outputs("thread_id")),
    ("stop_thread", _stop_thread, RET),
]

FUNCTIONS = generate(_TABLE, globals())
__all__ = list(FUNCTIONS)

__dir__ = module_dir(globals())
