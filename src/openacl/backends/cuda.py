"""The CUDA backend, through CuPy: device memory from cudaMalloc, pinned host memory,
cudaMemcpyAsync copies, CUDA streams and events.

Design note (invariants)
------------------------
* Every runtime stream owns one non-blocking CUDA stream (``cupy.cuda.Stream``): it never
  waits implicitly for the legacy default stream, which only the synchronous copies and
  fills use. Work reaches it through a
  ``CudaQueue``: the queue's executor (the runtime's stream mode) runs each task's *host
  part* in submission order with the CUDA stream and device current, so kernels, copies and
  fills the task issues are enqueued on that stream and return at once.
* A task's value on the queue's timeline is signalled by ``cudaLaunchHostFunc`` enqueued
  right after the task: "task ``v`` is done" means its GPU work has finished, which is what
  every synchronize, event, query and allocator marker of the runtime waits for. Values are
  signalled in order because the host functions run in stream order. The host function
  holds the task until then, so the buffers its closure pins (a registered numpy array a
  copy reads) outlive the GPU's use of them.
* Host tasks (``launch_host_func``, callbacks) first wait until the queue's previous task is
  done, so they see the GPU's results, exactly as a CUDA host function would. They wait on
  the timeline (a Python condition), never in a CUDA call holding the GIL: the host
  functions that signal the timeline need the GIL.
* A failed CUDA call inside a task raises a CuPy exception in that task; the stream's
  failure policy (``openacl.runtime.stream``) turns it into the 507015 family at
  synchronize, with CUDA's message.
* CuPy is imported when this backend is created, never by ``import openacl``.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from openacl import log
from openacl.backends.base import Backend, quiet_floating_point
from openacl.backends.host_queue import HostQueue, Task, make_executor

MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: the direction follows from the addresses (UVA)


def import_cupy() -> Any:
    """CuPy, or ``LookupError`` saying why the CUDA backend cannot run here."""
    try:
        import cupy
    except ImportError as exc:
        raise LookupError("CuPy is not installed (pip install 'openacl[cuda]' for the "
                          "cupy-cuda12x/cupy-cuda13x wheel)") from exc
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError, a missing driver library...
        raise LookupError(f"CuPy {cupy.__version__} finds no usable NVIDIA GPU: "
                          f"{type(exc).__name__}: {exc}") from exc
    if count < 1:
        raise LookupError(f"CuPy {cupy.__version__} finds no NVIDIA GPU")
    return cupy


class DeviceAllocation:
    """One cudaMalloc'ed range; the handle the allocator keeps for a segment."""

    __slots__ = ("address", "nbytes", "device", "__weakref__")

    def __init__(self, address: int, nbytes: int, device: int) -> None:
        self.address = address
        self.nbytes = nbytes
        self.device = device


class CudaQueue(HostQueue):
    """A host queue whose tasks enqueue GPU work on one CUDA stream (see the design note)."""

    def __init__(self, executor: Any, name: str, cupy: Any, device: int) -> None:
        self._cupy = cupy
        self.device = device
        self._in_flight: collections.deque[tuple[int, Task]] = collections.deque()
        with cupy.cuda.Device(device):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        super().__init__(executor, name)

    def submit(self, task: Task, host: bool = False) -> int:
        if host:
            return super().submit(self._after_gpu(task))
        return super().submit(task)

    def _after_gpu(self, task: Task) -> Task:
        timeline = self.timeline

        def host_task(value: int) -> None:
            timeline.wait(value - 1)  # the GPU work of every earlier task has finished
            task(value)
        return host_task

    def run(self, value: int, task: Task) -> None:
        self._release_finished()
        with self._cupy.cuda.Device(self.device):
            try:
                with self.stream:
                    task(value)
            except BaseException:  # noqa: BLE001 - the owner's guard should have caught it
                log.logger().exception("unguarded task failed on %s", self.name)
            finally:
                # the task (and the memory its closure pins) lives until the GPU is done: it
                # waits in _in_flight, dropped here on the executor's thread, never on CUDA's
                # (a host function must not release objects whose finalizers call CUDA)
                self._in_flight.append((value, task))
                try:
                    self.stream.launch_host_func(_signal, (self.timeline, value))
                except Exception:  # noqa: BLE001 - a broken context: never leave waiters hanging
                    log.logger().exception("cudaLaunchHostFunc failed on %s", self.name)
                    self.timeline.signal(value)

    def _release_finished(self) -> None:
        done = self.timeline.value
        while self._in_flight and self._in_flight[0][0] <= done:
            self._in_flight.popleft()

    def close(self) -> None:
        super().close()
        self._release_finished()

    # -- timing (events) -------------------------------------------------------------------
    def stamp(self) -> Any:
        """A CUDA event recorded on the stream now (called from inside a task)."""
        event = self._cupy.cuda.Event(block=False, disable_timing=False)
        event.record(self.stream)
        return event

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self._cupy.cuda.get_elapsed_time(start, end))


def _signal(finished: tuple[Any, int]) -> None:
    """cudaLaunchHostFunc's callback: mark a task done (touches only the timeline)."""
    timeline, value = finished
    timeline.signal(value)


class CudaBackend(Backend):
    """CuPy memory, copies and streams on the machine's NVIDIA GPUs."""

    name = "cuda"

    def __init__(self, device_count: int, stream_mode: str) -> None:
        cupy = import_cupy()
        super().__init__(cupy.cuda.runtime.getDeviceCount())
        self.cupy = cupy
        self.stream_mode = stream_mode
        self._executor = make_executor(stream_mode, quiet_floating_point)
        self._raw: dict[int, Any] = {}  # id -> handles handed out, for owns()
        self._lock = threading.Lock()
        self._compute_type_lock = threading.Lock()

    # -- memory ----------------------------------------------------------------------------
    def _alloc(self, device: int, nbytes: int) -> tuple[int, DeviceAllocation]:
        runtime = self.cupy.cuda.runtime
        try:
            with self.cupy.cuda.Device(device):
                address = runtime.malloc(nbytes)
        except self.cupy.cuda.runtime.CUDARuntimeError as exc:
            raise MemoryError(f"cudaMalloc of {nbytes} bytes on GPU {device}: {exc}") from exc
        return address, DeviceAllocation(address, nbytes, device)

    def _free(self, device: int, handle: DeviceAllocation) -> None:
        with self.cupy.cuda.Device(device):
            self.cupy.cuda.runtime.free(handle.address)

    def _alloc_host(self, nbytes: int) -> tuple[int, np.ndarray]:
        runtime = self.cupy.cuda.runtime
        try:
            address = runtime.hostAlloc(nbytes, 0)  # cudaHostAllocDefault: page-locked
        except runtime.CUDARuntimeError as exc:
            raise MemoryError(f"cudaHostAlloc of {nbytes} bytes: {exc}") from exc
        buffer = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
        with self._lock:
            self._raw[id(buffer)] = buffer
        return address, buffer

    def _free_host(self, handle: np.ndarray) -> None:
        with self._lock:
            self._raw.pop(id(handle), None)
        self.cupy.cuda.runtime.freeHost(handle.ctypes.data)

    def owns(self, array: object) -> bool:
        return self._raw.get(id(array)) is array

    def view(self, handle: Any, offset: int, nbytes: int) -> Any:
        if isinstance(handle, np.ndarray):  # pinned host memory
            return handle[offset : offset + nbytes]
        cupy = self.cupy
        memory = cupy.cuda.UnownedMemory(handle.address, handle.nbytes, handle, handle.device)
        return cupy.ndarray((nbytes,), cupy.uint8, cupy.cuda.MemoryPointer(memory, offset))

    def strided(self, buffer: Any, dtype: np.dtype, dims: tuple[int, ...],
                strides: tuple[int, ...], offset: int) -> Any:
        if isinstance(buffer, np.ndarray):
            return super().strided(buffer, dtype, dims, strides, offset)
        return self.cupy.ndarray(dims, dtype, buffer.data + offset, strides)

    def _copy_async(self, dst: Any, src: Any) -> None:
        """Enqueue a copy on the current CUDA stream (inside a task: the queue's)."""
        self.cupy.cuda.runtime.memcpyAsync(_address(dst), _address(src), dst.nbytes,
                                           MEMCPY_DEFAULT,
                                           self.cupy.cuda.get_current_stream().ptr)

    def _copy(self, dst: Any, src: Any) -> None:
        """A synchronous copy (aclrtMemcpy) on the legacy default stream of the device that
        holds the memory (GPU to GPU: the destination's)."""
        runtime = self.cupy.cuda.runtime
        with self.cupy.cuda.Device(_device_of(dst, src)):
            runtime.memcpyAsync(_address(dst), _address(src), dst.nbytes, MEMCPY_DEFAULT, 0)
            runtime.streamSynchronize(0)

    def _fill_async(self, dst: Any, byte: int) -> None:
        if isinstance(dst, np.ndarray):
            dst.fill(byte)
            return
        self.cupy.cuda.runtime.memsetAsync(_address(dst), byte, dst.nbytes,
                                           self.cupy.cuda.get_current_stream().ptr)

    def _fill(self, dst: Any, byte: int) -> None:
        if isinstance(dst, np.ndarray):
            dst.fill(byte)
            return
        runtime = self.cupy.cuda.runtime
        with self.cupy.cuda.Device(_device_of(dst)):
            runtime.memsetAsync(_address(dst), byte, dst.nbytes, 0)
            runtime.streamSynchronize(0)

    def device_name(self, device: int) -> str:
        name = self.cupy.cuda.runtime.getDeviceProperties(device)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def total_memory(self, device: int) -> int:
        with self.cupy.cuda.Device(device):
            return int(self.cupy.cuda.runtime.memGetInfo()[1])

    def available_memory(self, device: int) -> int:
        with self.cupy.cuda.Device(device):
            return int(self.cupy.cuda.runtime.memGetInfo()[0])

    def empty_array(self, dims: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.cupy.ndarray(dims, dtype)

    @contextlib.contextmanager
    def fp32_matmul(self, tf32: bool) -> Iterator[None]:
        """Every float32 matmul is issued inside: with ``tf32`` it uses TensorFloat-32
        (cuBLAS's TF32 compute type). CuPy keeps the compute type in a process global, so
        all float32 matmuls take one lock (held only while the matmul is enqueued) and a
        TF32 one sets and restores the type inside it: no other stream's float32 product
        can run in TF32 by accident."""
        linalg = self.cupy._core._routines_linalg
        with self._compute_type_lock:
            if not tf32:
                yield
                return
            previous = linalg.get_compute_type(np.float32)
            linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32)
            try:
                yield
            finally:
                linalg.set_compute_type(np.float32, previous)

    def array_module(self, array: Any) -> Any:
        return np if isinstance(array, np.ndarray) else self.cupy

    # -- execution -------------------------------------------------------------------------
    def create_queue(self, device: int, name: str) -> CudaQueue:
        return CudaQueue(self._executor, name, self.cupy, device)

    def shutdown(self) -> None:
        self._executor.shutdown(timeout=5.0)


def _device_of(*views: Any) -> int:
    """The GPU of the first device view (0 when they are all host memory)."""
    for view in views:
        if not isinstance(view, np.ndarray):
            return view.device.id
    return 0


def _address(view: Any) -> int:
    if isinstance(view, np.ndarray):
        return view.ctypes.data
    return view.data.ptr


__all__ = ["CudaBackend", "CudaQueue", "import_cupy"]
