"""KernelLaunch: run a kernel directly on a stream, ``kernel<<<blockDim, l2ctrl, stream>>>``.

::

    @kernel
    def add_kernel(x, y, z, n):
        block, blocks = get_block_idx(), get_block_num()
        per_block = -(-n // blocks)
        start, stop = block * per_block, min(n, (block + 1) * per_block)
        xs = global_buffer(x, np.float16, n)          # GlobalTensor.SetGlobalBuffer
        ...

    add_kernel[block_dim, stream](x_ptr, y_ptr, z_ptr, n)         # or [block_dim, l2ctrl, stream]

Arguments are passed as given: device pointers stay ints (a kernel views them with
``global_buffer``, bounds-checked), ``openacl.Tensor`` objects become numpy views, scalars
stay scalars. The launch is asynchronous; a block that raises fails the stream with
``ACL_ERROR_RT_AICORE_EXCEPTION`` (507015), the block's message and its traceback in the
kernel's own code (file, line, source line; ``blocks.py``).

Memory a launch may touch is captured when it is launched: every int argument that points
into a live allocation pins that allocation and records the launch's stream on it, and
``global_buffer`` inside the kernel resolves against those captured allocations first. So
memory freed (and even handed out again) while the launch is queued is never written by
it: the free waits for the stream (stream-ordered reuse), and the kernel still sees the
memory it was given.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.custom.blocks import get_block_idx, run_blocks
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.ops.call import as_array
from openacl.runtime import core, profiler, sanitizer
from openacl.runtime.memory import pinned_view, use_on_stream
from openacl.runtime.stream import resolve_stream
from openacl.tensor import Tensor, lookup_tensor, tensor_view

_launch = threading.local()  # .regions: the allocations captured by the running launch


def global_buffer(ptr: int, dtype: Any, length: int, offset: int = 0) -> np.ndarray:
    """A bounds-checked numpy view of ``length`` elements of ``dtype`` at element ``offset``
    of device memory ``ptr`` (Ascend C's ``GlobalTensor<T>::SetGlobalBuffer``)."""
    np_dtype = dtypes.to_numpy_dtype(dtypes.to_data_type(dtype, "dtype"))
    length = core.check_size(length, "length", allow_zero=True)
    offset = core.check_size(offset, "offset", allow_zero=True)
    nbytes = length * np_dtype.itemsize
    address = ptr + offset * np_dtype.itemsize
    if nbytes == 0:
        return core.current().backend.empty_array((0,), np_dtype)
    for region in getattr(_launch, "regions", ()):
        if region.start <= address and address + nbytes <= region.end:
            return _viewed(region, address - region.start, nbytes, np_dtype)
    try:
        region, start = core.current().pointers.resolve(address, nbytes, "ptr")
    except AclError as exc:
        if sanitizer.active:  # memcheck: the kernel's illegal access, with its block
            sanitizer.illegal_access(address, nbytes, None, exc, "global_buffer")
        raise
    return _viewed(region, start, nbytes, np_dtype)


def _viewed(region: Any, offset: int, nbytes: int, np_dtype: np.dtype) -> np.ndarray:
    """The view ``global_buffer`` returns; the sanitizer snapshots its bytes."""
    view = as_array(pinned_view(region, offset, nbytes))
    if sanitizer.active and region.is_device:
        sanitizer.global_buffer_view(region, offset, view, np_dtype.itemsize)
    return view.view(np_dtype)


def _run_with_regions(fn: Callable[..., Any], regions: tuple, *args: Any) -> None:
    """One block of a launch, with the launch's captured allocations visible."""
    outer = getattr(_launch, "regions", ())
    _launch.regions = regions
    if sanitizer.active:  # the block's writes are found when it ends (sanitizer.py)
        sanitizer.begin_block(get_block_idx())
    try:
        fn(*args)
    finally:
        _launch.regions = outer
        if sanitizer.active:
            sanitizer.end_block()


def _capture(address: int, stream, regions: list) -> None:
    """Pin the live allocation ``address`` points into, for the launch on ``stream``."""
    region = core.current().pointers.lookup(address)
    if region is not None and region not in regions:
        use_on_stream(region, stream)
        regions.append(region)


def _convert(argument: Any, index: int, stream, regions: list) -> Any:
    """What a kernel receives for one launch argument (resolved at launch, synchronously)."""
    if isinstance(argument, Tensor):
        view, keep = tensor_view(lookup_tensor(argument.handle, f"args[{index}]"),
                                 f"args[{index}]", write=True)
        if keep is not None:
            use_on_stream(keep[0], stream)
        return view
    if isinstance(argument, int) and not isinstance(argument, bool):
        _capture(argument, stream, regions)  # maybe a device pointer
        return argument
    if isinstance(argument, (bool, float, complex, np.generic, str, bytes, type(None))):
        return argument
    if isinstance(argument, np.ndarray):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument args[{index}] is a host numpy array: copy it to the device "
                       f"(openacl.to_device) and pass the Tensor or its pointer")
    index_value = core.as_index(argument)
    if index_value is not None:  # DeviceBuffer, HostBuffer and other pointer-likes
        _capture(index_value, stream, regions)
        return index_value
    return argument


def _check_block_dim(block_dim: Any) -> int:
    value = core.as_index(block_dim)
    if value is None or value < 1:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'blockDim' = {block_dim!r} is invalid: a kernel launches on "
                       f"at least one block")
    return value


class _Launch:
    def __init__(self, kernel: KernelFunction, block_dim: int, stream: Any) -> None:
        self.kernel, self.block_dim, self.stream = kernel, block_dim, stream

    def __call__(self, *args: Any) -> None:
        target = resolve_stream(self.stream)
        regions: list = []
        converted = tuple(_convert(a, i, target, regions) for i, a in enumerate(args))
        body = functools.partial(_run_with_regions, self.kernel.fn, tuple(regions))
        if profiler.active:
            profiler.label("kernel", self.kernel.__name__, detail={"block_dim": self.block_dim})
        if sanitizer.active:
            sanitizer.label("kernel", (), kernel=self.kernel.__name__)
        target.submit(functools.partial(run_blocks, body, self.block_dim, converted,
                                        self.kernel.__name__))


class KernelFunction:
    """A function marked as a kernel; launch it with ``kernel[block_dim, stream](...)``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise AclError(ACL_ERROR_INVALID_PARAM, f"argument 'fn' = {fn!r} is not callable")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __getitem__(self, launch: Any) -> _Launch:
        parts = launch if isinstance(launch, tuple) else (launch,)
        if len(parts) == 2:
            block_dim, stream = parts
        elif len(parts) == 3:
            block_dim, _l2ctrl, stream = parts  # l2ctrl is reserved (nullptr) in CANN too
        else:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"kernel {self.__name__}: launch with [block_dim, stream] or "
                           f"[block_dim, l2ctrl, stream], not {launch!r}")
        return _Launch(self, _check_block_dim(block_dim), stream)

    def __call__(self, *args: Any) -> None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"kernel {self.__name__} runs on a device: launch it with "
                       f"{self.__name__}[block_dim, stream](...)")


def kernel(fn: Callable[..., Any]) -> KernelFunction:
    """Mark ``fn`` as a kernel (the ``__global__ __aicore__`` of Ascend C)."""
    return KernelFunction(fn)


def launch_kernel(fn: KernelFunction | Callable[..., Any], block_dim: int, stream: Any,
                  *args: Any) -> None:
    """``fn<<<block_dim, nullptr, stream>>>(*args)`` as a plain call."""
    target = fn if isinstance(fn, KernelFunction) else KernelFunction(fn)
    target[block_dim, stream](*args)
