#!/usr/bin/env python3
"""add_custom launched directly on a stream: the application side of the KernelLaunch
sample.

init -> set device -> create a stream -> malloc host and device memory -> read input/*.bin
-> memcpy to the device -> ``add_custom[BLOCK_DIM, stream](x, y, z, n)`` (the
``add_custom<<<blockDim, nullptr, stream>>>(x, y, z)`` of Ascend C) -> synchronize -> memcpy
back -> write output/output_z.bin -> free -> reset -> finalize. Exits 0 on success.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from add_custom_kernel import add_custom

import openacl
from openacl import rt
from openacl.util import ptr_to_numpy

SAMPLE_DIR = Path(__file__).resolve().parent
DEVICE_ID = 0
SHAPE = (8, 2048)
DTYPE = np.float16
BLOCK_DIM = 8  # blocks (AI cores) the kernel is launched on
SYNC_TIMEOUT_MS = 5000


def info_log(message: str) -> None:
    print(f"[INFO]  {message}", flush=True)


def main() -> int:
    total_length = math.prod(SHAPE)
    size = total_length * np.dtype(DTYPE).itemsize
    openacl.init()
    try:
        rt.set_device(DEVICE_ID)
        stream = rt.create_stream()
        info_log(f"Set device[{DEVICE_ID}], create stream success")

        x_host, y_host, z_host = (rt.malloc_host(size) for _ in range(3))
        x_device, y_device, z_device = (rt.malloc(size, openacl.ACL_MEM_MALLOC_HUGE_FIRST)
                                        for _ in range(3))
        for host, name in ((x_host, "input_x.bin"), (y_host, "input_y.bin")):
            ptr_to_numpy(host, (total_length,), DTYPE)[:] = np.fromfile(
                SAMPLE_DIR / "input" / name, dtype=DTYPE)
        rt.memcpy(x_device, size, x_host, size, openacl.ACL_MEMCPY_HOST_TO_DEVICE)
        rt.memcpy(y_device, size, y_host, size, openacl.ACL_MEMCPY_HOST_TO_DEVICE)
        info_log(f"Copy inputs to the device success ({2 * size} bytes)")

        add_custom[BLOCK_DIM, stream](x_device, y_device, z_device, total_length)
        info_log(f"Launch add_custom[{BLOCK_DIM}, stream] on {total_length} elements success")
        rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
        info_log("Synchronize stream success")

        rt.memcpy(z_host, size, z_device, size, openacl.ACL_MEMCPY_DEVICE_TO_HOST)
        ptr_to_numpy(z_host, (total_length,), DTYPE).tofile(SAMPLE_DIR / "output" /
                                                             "output_z.bin")
        info_log("Write output success")

        for device in (x_device, y_device, z_device):
            rt.free(device)
        for host in (x_host, y_host, z_host):
            rt.free_host(host)
        rt.destroy_stream(stream)
        rt.reset_device(DEVICE_ID)
        info_log("Destroy resource success")
        return 0
    except (openacl.AclError, OSError, ValueError) as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    finally:
        openacl.finalize()


if __name__ == "__main__":
    sys.exit(main())
