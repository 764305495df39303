"""A CPU stand-in for CuPy, so the CUDA backend's code runs in CI without a GPU.

It is a test double, not an emulator of CUDA: device memory is host memory with real
addresses, every stream operation completes when it is issued (host functions run at once),
and events read the host clock. What it does check is the contract kernels and the runtime
must keep to run on real CuPy:

* device arrays are not numpy arrays: numpy's ``__array__`` conversion raises ``TypeError``
  (as CuPy's does), so a kernel that calls ``np.asarray`` on a device array, or mixes a host
  ``numpy.ndarray`` into a device computation, fails here as it would on a GPU;
* numpy functions and ufuncs reach device arrays only through ``__array_function__`` /
  ``__array_ufunc__`` and only when CuPy 14 has a function of that name
  (``tests/data/cupy14_names.txt``, read from the cupy-cuda12x 14.2.0 wheel);
* the ``cupy.cuda`` and ``cupy.cuda.runtime`` calls the backend makes exist with CuPy's
  signatures (``UnownedMemory(ptr, size, owner, device_id)``, ``memcpyAsync(dst, src, size,
  kind, stream)``, ``Stream.launch_host_func(callback, arg)``...).

``installed()`` puts ``cupy``, ``cupy.cuda``, ``cupy.cuda.runtime``, ``cupyx``,
``cupyx.scipy`` and ``cupyx.scipy.special`` into ``sys.modules`` for a ``with`` block.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import itertools
import math
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

CUPY_NAMES = frozenset(
    (Path(__file__).parent / "data" / "cupy14_names.txt").read_text().split())
CREATION = frozenset({"asarray", "array", "ascontiguousarray", "asanyarray"})
DEVICE_MEMORY = 16 << 30
ALIGNMENT = 512


class CUDARuntimeError(RuntimeError):
    pass


# -- memory: host buffers with real addresses --------------------------------------------------
class _Memory:
    """Every live fake allocation (device or pinned), found by address."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.blocks: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()
        self.in_use = 0

    def alloc(self, nbytes: int) -> int:
        raw = np.empty(nbytes + ALIGNMENT, np.uint8)
        skip = (-raw.ctypes.data) % ALIGNMENT
        buffer = raw[skip:skip + nbytes]
        address = buffer.ctypes.data
        with self.lock:
            bisect.insort(self.starts, address)
            self.blocks[address] = buffer
            self.in_use += nbytes
        return address

    def free(self, address: int) -> None:
        with self.lock:
            buffer = self.blocks.pop(address)
            self.starts.remove(address)
            self.in_use -= buffer.nbytes

    def bytes_at(self, address: int, nbytes: int) -> np.ndarray:
        """A uint8 view of ``nbytes`` at ``address`` inside a live allocation (it keeps the
        allocation's buffer alive)."""
        with self.lock:
            index = bisect.bisect_right(self.starts, address) - 1
            if index >= 0:
                start = self.starts[index]
                buffer = self.blocks[start]
                if address + nbytes <= start + buffer.nbytes:
                    return buffer[address - start:address - start + nbytes]
        raise CUDARuntimeError(f"cudaErrorIllegalAddress: {address:#x} (+{nbytes}) is not "
                               f"inside a live allocation")


MEMORY = _Memory()
_streams = itertools.count(1)
_tls = threading.local()


class UnownedMemory:
    def __init__(self, ptr: int, size: int, owner: Any, device_id: int = -1) -> None:
        self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id


class MemoryPointer:
    def __init__(self, mem: Any, offset: int) -> None:
        self.mem, self.offset = mem, offset
        self.ptr = mem.ptr + offset

    def __add__(self, offset: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self.offset + offset)


# -- streams, events, devices ------------------------------------------------------------------
class Stream:
    null: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int | None = None
                 ) -> None:
        self.ptr = 0 if null else next(_streams)
        self.non_blocking = non_blocking

    def __enter__(self) -> Stream:
        _tls.__dict__.setdefault("streams", []).append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _tls.streams.pop()

    def launch_host_func(self, callback: Any, arg: Any) -> None:
        callback(arg)  # every earlier operation has already completed

    def synchronize(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return True

    def record(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        pass


Stream.null = Stream(null=True)


def get_current_stream() -> Stream:
    stack = getattr(_tls, "streams", None)
    return stack[-1] if stack else Stream.null


class Event:
    def __init__(self, block: bool = False, disable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.time: float | None = None
        self.disable_timing = disable_timing

    def record(self, stream: Stream | None = None) -> None:
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return True


def get_elapsed_time(start: Event, end: Event) -> float:
    if start.time is None or end.time is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: event not recorded")
    return (end.time - start.time) * 1000.0


class Device:
    def __init__(self, device: int = 0) -> None:
        if not 0 <= device < _runtime.getDeviceCount():
            raise CUDARuntimeError(f"cudaErrorInvalidDevice: {device}")
        self.id = device

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def use(self) -> None:
        pass


# -- the runtime module ------------------------------------------------------------------------
def _make_runtime() -> types.ModuleType:
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.CUDARuntimeError = CUDARuntimeError
    runtime.getDeviceCount = lambda: 1
    runtime.malloc = MEMORY.alloc
    runtime.free = MEMORY.free
    runtime.hostAlloc = lambda size, flags: MEMORY.alloc(size)
    runtime.freeHost = MEMORY.free

    def memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
        if kind != 4:
            raise CUDARuntimeError(f"fake cupy: expected cudaMemcpyDefault (4), got {kind}")
        ctypes.memmove(dst, src, size)

    runtime.memcpyAsync = memcpy_async
    runtime.memcpy = lambda dst, src, size, kind: memcpy_async(dst, src, size, kind, 0)
    runtime.memsetAsync = lambda ptr, value, size, stream: ctypes.memset(ptr, value, size)
    runtime.memset = lambda ptr, value, size: ctypes.memset(ptr, value, size)
    runtime.streamSynchronize = lambda stream: None
    runtime.deviceSynchronize = lambda: None
    runtime.memGetInfo = lambda: (DEVICE_MEMORY - MEMORY.in_use, DEVICE_MEMORY)
    runtime.getDeviceProperties = lambda device: {"name": b"fake GPU (tests/fake_cupy.py)"}
    return runtime


_runtime = _make_runtime()


# -- device arrays -----------------------------------------------------------------------------
def _culprit() -> str:
    """Where in openacl the offending call was made (the innermost frame of src/openacl)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "openacl" in name and "fake_cupy" not in name:
            return f" [at {Path(name).name}:{frame.f_lineno} in {frame.f_code.co_name}]"
        frame = frame.f_back
    return ""


def _unwrap(value: Any, allow_host: bool = False) -> Any:
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, np.ndarray) and not allow_host:
        raise TypeError(f"Unsupported type {type(value)} (fake cupy: a host numpy array "
                        f"mixed into a device computation)" + _culprit())
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, allow_host) for v in value)
    return value


def _wrap(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ndarray._of(value)
    if isinstance(value, np.generic):
        return ndarray._of(np.asarray(value))  # CuPy's reductions give 0-d arrays
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    if any(s == 0 for s in shape):
        return 0, 0
    low = sum(st * (n - 1) for n, st in zip(shape, strides, strict=True) if st < 0)
    high = sum(st * (n - 1) for n, st in zip(shape, strides, strict=True) if st > 0)
    return low, high + itemsize


class ndarray:  # noqa: N801 - CuPy's name
    """A device array: a numpy view kept out of numpy's reach."""

    __array_priority__ = 100

    def __init__(self, shape: Any, dtype: Any = float, memptr: MemoryPointer | None = None,
                 strides: Any = None, order: str = "C") -> None:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = np.dtype(dtype)
        if memptr is None:
            self._a = np.empty(shape, dtype, order=order)
            return
        if strides is None:
            strides = np.empty(shape, dtype).strides if shape else ()
        low, high = _span(shape, tuple(strides), dtype.itemsize)
        if high == low:
            self._a = np.empty(shape, dtype)
            return
        raw = MEMORY.bytes_at(memptr.ptr + low, high - low)
        self._a = np.ndarray(shape, dtype, buffer=raw, offset=-low, strides=strides)

    @classmethod
    def _of(cls, array: np.ndarray) -> ndarray:
        self = cls.__new__(cls)
        self._a = array
        return self

    # numpy interop: refused conversion, dispatch by CuPy's names
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly." + _culprit())

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any):
        if ufunc.__name__ not in CUPY_NAMES:
            return NotImplemented
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o) for o in kwargs["out"])
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        return _wrap(result)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any):
        if func.__name__ not in CUPY_NAMES and func.__name__ not in _SUBMODULE_NAMES:
            return NotImplemented
        return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))

    # attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: _wrap(self._a.T))
    mT = property(lambda self: _wrap(np.swapaxes(self._a, -1, -2)))
    real = property(lambda self: _wrap(self._a.real))
    device = property(lambda self: Device(0))
    imag = property(lambda self: _wrap(self._a.imag))

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(UnownedMemory(self._a.ctypes.data, self._a.nbytes, self), 0)

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None):
        if out is not None:
            np.copyto(out, self._a)
            return out
        return np.array(self._a, order=order)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        np.copyto(self._a, arr)

    def item(self, *args: Any) -> Any:
        return self._a.item(*args)

    def tolist(self) -> Any:
        return self._a.tolist()

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Iterator[Any]:
        return (_wrap(row) for row in self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[_unwrap(key)] = _unwrap(value)

    def __repr__(self) -> str:
        return f"fake_cupy.ndarray({self._a!r})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _NDARRAY_METHODS:
            raise AttributeError(f"fake cupy.ndarray has no attribute {name!r}")
        method = getattr(self._a, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _wrap(method(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))
        return call


_NDARRAY_METHODS = frozenset(
    "all any argmax argmin argpartition argsort astype clip compress conj conjugate copy "
    "cumprod cumsum diagonal dot fill flatten max mean min nonzero partition prod ptp put "
    "ravel repeat reshape round sort squeeze std sum swapaxes take trace transpose var "
    "view".split())
_SUBMODULE_NAMES = frozenset({"as_strided", "sliding_window_view", "norm", "einsum"})


def _binary(name: str, reflected: bool = False):
    ufunc = getattr(np, name)
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


for _dunder, _ufunc in {"add": "add", "sub": "subtract", "mul": "multiply",
                        "truediv": "true_divide", "floordiv": "floor_divide", "mod": "remainder",
                        "pow": "power", "matmul": "matmul", "and": "bitwise_and",
                        "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
                        "rshift": "right_shift"}.items():
    setattr(ndarray, f"__{_dunder}__", _binary(_ufunc))
    setattr(ndarray, f"__r{_dunder}__", _binary(_ufunc, reflected=True))
for _dunder, _ufunc in {"lt": "less", "le": "less_equal", "gt": "greater",
                        "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}.items():
    setattr(ndarray, f"__{_dunder}__", _binary(_ufunc))
ndarray.__neg__ = lambda self: np.negative(self)
ndarray.__pos__ = lambda self: np.positive(self)
ndarray.__abs__ = lambda self: np.absolute(self)
ndarray.__invert__ = lambda self: np.invert(self)
ndarray.__hash__ = None  # type: ignore[assignment]


def _inplace(ufunc: np.ufunc):
    def apply(self: ndarray, other: Any) -> ndarray:
        ufunc(self, other, out=self)
        return self
    return apply


for _dunder, _ufunc in {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                        "truediv": np.true_divide, "floordiv": np.floor_divide,
                        "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
                        "or": np.bitwise_or, "xor": np.bitwise_xor}.items():
    setattr(ndarray, f"__i{_dunder}__", _inplace(_ufunc))


# -- the module --------------------------------------------------------------------------------
def _module_function(name: str):
    numpy_fn = getattr(np, name)
    allow_host = name in CREATION

    def call(*args: Any, **kwargs: Any) -> Any:
        args = _unwrap(args, allow_host)
        kwargs = {k: _unwrap(v, allow_host) for k, v in kwargs.items()}
        result = numpy_fn(*args, **kwargs)
        if allow_host and isinstance(result, np.ndarray):
            result = np.array(result, copy=True)  # a "device copy"
        return _wrap(result)
    call.__name__ = name
    return call


def _make_modules() -> dict[str, types.ModuleType]:
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "14.2.0+fake"
    cupy.ndarray = ndarray
    cupy.get_array_module = lambda *arrays: cupy if any(
        isinstance(a, ndarray) for a in arrays) else np

    def module_getattr(name: str) -> Any:
        if name not in CUPY_NAMES or not hasattr(np, name):
            raise AttributeError(f"module 'cupy' (fake) has no attribute {name!r}")
        value = getattr(np, name)
        if isinstance(value, np.ufunc) or callable(value) and not isinstance(value, type):
            return _module_function(name)
        return value  # dtypes, constants

    cupy.__getattr__ = module_getattr
    lib = types.ModuleType("cupy.lib")
    tricks = types.ModuleType("cupy.lib.stride_tricks")
    for name in ("sliding_window_view", "as_strided"):
        numpy_fn = getattr(np.lib.stride_tricks, name)
        setattr(tricks, name, lambda x, *args, _fn=numpy_fn, **kwargs: _wrap(
            _fn(_unwrap(x), *args, **kwargs)))
    lib.stride_tricks = tricks
    cupy.lib = lib
    cuda = types.ModuleType("cupy.cuda")
    for item in (UnownedMemory, MemoryPointer, Stream, Event, Device, get_current_stream,
                 get_elapsed_time):
        setattr(cuda, item.__name__, item)
    cuda.runtime = _runtime
    cupy.cuda = cuda
    core = types.ModuleType("cupy._core")
    linalg = types.ModuleType("cupy._core._routines_linalg")
    linalg.COMPUTE_TYPE_DEFAULT, linalg.COMPUTE_TYPE_TF32 = 1, 7  # CuPy 14's values
    linalg.compute_types = {}  # dtype -> compute type; the calls are what tests look at
    linalg.log = []  # (dtype, compute type) of every set_compute_type call
    linalg.get_compute_type = lambda dtype: linalg.compute_types.get(np.dtype(dtype), 1)

    def set_compute_type(dtype: Any, compute_type: int) -> None:
        linalg.compute_types[np.dtype(dtype)] = compute_type
        linalg.log.append((np.dtype(dtype), compute_type))

    linalg.set_compute_type = set_compute_type
    core._routines_linalg = linalg
    cupy._core = core
    cupyx = types.ModuleType("cupyx")
    scipy = types.ModuleType("cupyx.scipy")
    special = types.ModuleType("cupyx.scipy.special")
    erf, erfc = np.frompyfunc(math.erf, 1, 1), np.frompyfunc(math.erfc, 1, 1)
    special.erf = lambda x: _wrap(np.asarray(erf(_unwrap(x))).astype(x.dtype))
    special.erfc = lambda x: _wrap(np.asarray(erfc(_unwrap(x))).astype(x.dtype))
    cupyx.scipy, scipy.special = scipy, special
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.runtime": _runtime, "cupyx": cupyx,
            "cupyx.scipy": scipy, "cupyx.scipy.special": special}


MODULES = _make_modules()


@contextlib.contextmanager
def installed() -> Iterator[types.ModuleType]:
    """The fake CuPy importable as ``cupy`` (and ``cupyx.scipy.special``) inside the block."""
    saved = {name: sys.modules.get(name) for name in MODULES}
    sys.modules.update(MODULES)
    try:
        yield MODULES["cupy"]
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
