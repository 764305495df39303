"""Pointer helpers: make Python buffers addressable, and view runtime memory from numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openacl import dtypes
from openacl._api import module_dir
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core, sanitizer
from openacl.runtime.memory import pinned_view, register_buffer, unregister_buffer


def numpy_to_ptr(array: np.ndarray) -> int:
    """The address of ``array``'s data, registered so runtime calls accept it."""
    if not isinstance(array, np.ndarray):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'array' = {type(array).__name__} object is not a numpy array")
    return register_buffer(array)


def bytes_to_ptr(data: bytes | bytearray | memoryview) -> int:
    """The address inside a bytes-like object; writes through it land in the object."""
    return register_buffer(data)


def ptr_to_numpy(ptr: int, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A zero-copy numpy view of host-visible memory at ``ptr`` (bounds-checked).

    On the CPU backend device memory is host memory, so device pointers work too.
    """
    np_dtype = dtypes.to_numpy_dtype(dtypes.to_data_type(dtype, "dtype"))
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise AclError(ACL_ERROR_INVALID_PARAM, f"argument 'shape' = {list(shape)} has a "
                                                f"negative dim")
    nbytes = int(np.prod(dims, dtype=np.int64)) * np_dtype.itemsize
    runtime = core.current()
    region, offset = runtime.pointers.resolve(ptr, nbytes, "ptr")
    if region.is_device and not runtime.backend.host_addressable:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'ptr' = {ptr:#x} is device memory of the "
                       f"{runtime.backend.name} backend; copy it to the host first")
    if region.is_device and sanitizer.active:  # memcheck: the host touches device memory
        sanitizer.host_access(region, offset, nbytes)
    return np.asarray(pinned_view(region, offset, nbytes)).view(np_dtype).reshape(dims)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A copy of ``size`` bytes at ``ptr``."""
    size = core.check_size(size, "size", allow_zero=True)
    return ptr_to_numpy(ptr, (size,), np.uint8).tobytes()


__all__ = ["numpy_to_ptr", "bytes_to_ptr", "ptr_to_numpy", "ptr_to_bytes", "register_buffer",
           "unregister_buffer"]

__dir__ = module_dir(globals())
