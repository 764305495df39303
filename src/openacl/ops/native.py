"""The optional C kernels (``openacl._native``): whether they are used, and for what.

Mechanism lives in ``_native.c`` (float32 loops over C-contiguous buffers); the policy is
here: the extension is imported once, on first use, and used only where its results match
the numpy kernels' (float32 host arrays; the callers check layout and aliasing). Set
``OPENACL_NATIVE=0`` to run the numpy kernels only; ``disabled()`` does the same for a block
(tests compare both paths). Where the extension was not built (no C compiler at install
time) everything runs on numpy, only slower.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

_lock = threading.Lock()
_module: ModuleType | None = None
_resolved = False
_disabled_depth = 0  # > 0 inside disabled()


def _load() -> ModuleType | None:
    if os.environ.get("OPENACL_NATIVE", "1").strip() == "0":
        return None
    try:
        from openacl import _native
    except ImportError:
        return None
    return _native


def kernels() -> ModuleType | None:
    """The extension module, or None when it is missing, turned off, or ``disabled()``."""
    global _module, _resolved
    if not _resolved:
        with _lock:
            if not _resolved:
                _module = _load()
                _resolved = True
    return None if _disabled_depth else _module


def built() -> bool:
    """Whether the extension can be imported (whatever OPENACL_NATIVE says)."""
    try:
        from openacl import _native  # noqa: F401
    except ImportError:
        return False
    return True


def describe() -> str:
    """One line for ``openacl info``: which float32 kernels the CPU backend runs."""
    if not built():
        return "numpy (the C extension openacl._native was not built: no C compiler?)"
    if kernels() is None:
        return "numpy (the C extension is built but turned off: OPENACL_NATIVE=0)"
    return ("native C (openacl._native: float16 conversions, GELU, Hardswish, Sigmoid, SiLU, "
            "Softmax, "
            "ScaledMaskedSoftmax, LayerNorm, AddLayerNorm, row sums, direct and thin "
            "convolutions, tiled ConvTranspose, the LSTM recurrences)")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the numpy kernels inside the block (process-wide; meant for tests)."""
    global _disabled_depth
    with _lock:
        _disabled_depth += 1
    try:
        yield
    finally:
        with _lock:
            _disabled_depth -= 1


HALF = np.dtype(np.float16)
SINGLE = np.dtype(np.float32)


def widened(array: np.ndarray) -> np.ndarray | None:
    """A float32 copy of a C-contiguous float16 host array by the CPU's F16C conversion
    (numpy's own loop is ~10x slower), or None where the C kernels cannot do it."""
    lib = kernels()
    if lib is None or type(array) is not np.ndarray or array.dtype != HALF or \
            not array.flags.c_contiguous:
        return None
    out = np.empty(array.shape, SINGLE)
    return out if lib.convert_half(array, out, True) else None


def cast(array: Any, dtype: np.dtype) -> Any:
    """``array.astype(dtype, copy=False)``, float16 -> float32 by F16C where it can
    (``widened``): the one place kernels widen half-precision operands."""
    if array.dtype == HALF and dtype == SINGLE:
        fast = widened(array)
        if fast is not None:
            return fast
    return array.astype(dtype, copy=False)


def narrowed_into(target: np.ndarray, value: np.ndarray) -> bool:
    """``target[...] = value`` for a C-contiguous float16 host ``target`` and a float32
    ``value`` of its shape, rounded to nearest even by F16C; False: not done."""
    lib = kernels()
    if lib is None or type(target) is not np.ndarray or type(value) is not np.ndarray or \
            target.dtype != HALF or value.dtype != SINGLE or target.shape != value.shape or \
            not (target.flags.c_contiguous and value.flags.c_contiguous):
        return False
    return bool(lib.convert_half(target, value, False))


def host_float32(*arrays) -> bool:
    """Every array is a C-contiguous float32 numpy array (what the C kernels take)."""
    return all(type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous
               for a in arrays)


def apart_or_same(out: np.ndarray, source: np.ndarray) -> bool:
    """``out`` shares no memory with ``source``, or is the very same elements (an in-place
    call): the two layouts the row kernels accept."""
    if not np.may_share_memory(out, source):
        return True
    return (out.__array_interface__["data"][0] == source.__array_interface__["data"][0]
            and out.nbytes == source.nbytes)
