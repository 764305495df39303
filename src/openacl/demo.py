"""The classic ACL flow, end to end, with real data and a checked result.

init -> set device -> create context and stream -> malloc device and host memory ->
memcpy host to device -> run work on the stream -> synchronize -> memcpy device to host ->
check -> free -> destroy -> reset device -> finalize.

Run it with ``openacl demo`` or ``python -m openacl.demo``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

import openacl
from openacl import rt
from openacl.constants import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE
from openacl.util import ptr_to_numpy

DEMO_ELEMENTS = 1 << 20  # float32 elements moved through the device (4 MiB)


def _saxpy_on_device(x_ptr: int, y_ptr: int, count: int, alpha: float) -> Callable[[], None]:
    """A stream task: y = alpha * x + y on device memory (the 'kernel' of the demo)."""

    def kernel() -> None:
        x = ptr_to_numpy(x_ptr, (count,), np.float32)
        y = ptr_to_numpy(y_ptr, (count,), np.float32)
        np.multiply(x, np.float32(alpha), out=x)
        np.add(x, y, out=y)

    return kernel


def run(elements: int = DEMO_ELEMENTS, out=sys.stdout) -> bool:
    """Run the demo; returns True when the device result matches numpy exactly."""
    started = time.perf_counter()

    def step(text: str) -> None:
        print(f"[{(time.perf_counter() - started) * 1e3:8.2f} ms] {text}", file=out)

    nbytes = elements * np.dtype(np.float32).itemsize
    openacl.init()
    step(f"init: backend {rt.get_soc_name()}, {rt.get_device_count()} device(s)")
    rt.set_device(0)
    context = rt.create_context(0)
    stream = rt.create_stream()
    step(f"device 0 set; context {context:#x}, stream {stream:#x} created")

    x_dev, y_dev = rt.malloc(nbytes), rt.malloc(nbytes)
    host = rt.malloc_host(nbytes)
    host_view = ptr_to_numpy(host, (elements,), np.float32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(elements, dtype=np.float32)
    y = rng.standard_normal(elements, dtype=np.float32)
    step(f"malloc: 2 x {nbytes >> 20} MiB device, {nbytes >> 20} MiB pinned host")

    host_view[:] = x
    rt.memcpy(x_dev, nbytes, host, nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
    host_view[:] = y
    rt.memcpy_async(y_dev, nbytes, host, nbytes, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    rt.launch_host_func(stream, _saxpy_on_device(x_dev, y_dev, elements, 2.0))
    rt.memcpy_async(host, nbytes, y_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    step("queued on the stream: memcpy H2D, y = 2x + y, memcpy D2H")
    rt.synchronize_stream(stream)
    step("stream synchronized")

    expected = np.float32(2.0) * x + y
    ok = bool(np.array_equal(host_view, expected))
    step(f"check against numpy: {'exact match' if ok else 'MISMATCH'} "
         f"(y[:3] = {np.array2string(host_view[:3], precision=4)})")

    rt.free(x_dev)
    rt.free(y_dev)
    rt.free_host(host)
    rt.destroy_stream(stream)
    rt.destroy_context(context)
    stats = openacl.memory_stats(0)
    rt.reset_device(0)
    openacl.finalize()
    step(f"freed, destroyed, reset, finalized; device bytes in use at the end: "
         f"{stats['allocated_bytes.all.current']}")
    print("demo " + ("PASSED" if ok else "FAILED"), file=out)
    return ok


def main() -> int:
    return 0 if run() else 1


if __name__ == "__main__":
    sys.exit(main())
