"""Bandwidth of synchronous ``rt.memcpy`` (and ``memcpy_async`` + synchronize) vs ``np.copyto``.

On the CPU backend a host-to-device or device-to-host copy is a host memory copy, so numpy's
own copy of the same number of bytes is the ceiling: OUR copies should reach at least
``TARGET_RATIO`` of its bandwidth, the rest being what validation, pointer resolution and
(for the async row) the stream hand-off cost. All buffers are allocated and pre-faulted
before timing, so page faults are not measured on either side.

Run: ``.venv/bin/python bench/bench_memcpy.py [--json PATH]`` (always exits 0).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from _common import (
    BYTES_PER_GB,
    MS_PER_S,
    acl_runtime,
    parse_args,
    print_table,
    ratio,
    time_interleaved,
    write_json,
)

from openacl import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, rt, util

COPY_BYTES = 64 << 20  # bytes per copy: far beyond the last-level cache, so DRAM-bound
REPEATS = 15  # timed copies per case (median)
WARMUP = 3  # untimed copies per case
TARGET_RATIO = 0.9  # OUR bandwidth / numpy's, at least
FILL_BYTE = 0x5A  # value written to pre-fault the source buffers
PATTERN_STRIDE = 4096  # bytes between the marks of the check pattern (one per page)
BYTE_MAX = 0xFF


def _prefaulted(nbytes: int) -> np.ndarray:
    array = np.empty(nbytes, np.uint8)
    array.fill(FILL_BYTE)
    return array


def _cases(device: int, registered_src: int, registered_dst: int, pinned: int,
           stream: int) -> dict[str, Callable[[], None]]:
    """Row name -> OUR copy of ``COPY_BYTES`` bytes."""
    n = COPY_BYTES

    def copy_async() -> None:
        rt.memcpy_async(device, n, registered_src, n, ACL_MEMCPY_HOST_TO_DEVICE, stream)
        rt.synchronize_stream(stream)

    return {
        "H2D memcpy, src numpy_to_ptr":
            lambda: rt.memcpy(device, n, registered_src, n, ACL_MEMCPY_HOST_TO_DEVICE),
        "H2D memcpy, src malloc_host":
            lambda: rt.memcpy(device, n, pinned, n, ACL_MEMCPY_HOST_TO_DEVICE),
        "D2H memcpy, dst numpy_to_ptr":
            lambda: rt.memcpy(registered_dst, n, device, n, ACL_MEMCPY_DEVICE_TO_HOST),
        "H2D memcpy_async + sync": copy_async,
    }


def _check_copies_land(device: int, src: np.ndarray, dst: np.ndarray, pinned: int) -> None:
    """One checked round trip, so the timed calls are known to move the bytes."""
    src[::PATTERN_STRIDE] = np.arange(src[::PATTERN_STRIDE].size) % (BYTE_MAX + 1)
    rt.memcpy(device, COPY_BYTES, util.numpy_to_ptr(src), COPY_BYTES,
              ACL_MEMCPY_HOST_TO_DEVICE)
    rt.memcpy(util.numpy_to_ptr(dst), COPY_BYTES, device, COPY_BYTES,
              ACL_MEMCPY_DEVICE_TO_HOST)
    if not np.array_equal(src, dst):
        raise SystemExit("bench_memcpy: the D2H copy does not match the H2D source")
    rt.memcpy(device, COPY_BYTES, pinned, COPY_BYTES, ACL_MEMCPY_HOST_TO_DEVICE)
    device_view = util.ptr_to_numpy(device, (COPY_BYTES,), np.uint8)
    if not np.array_equal(device_view, util.ptr_to_numpy(pinned, (COPY_BYTES,), np.uint8)):
        raise SystemExit("bench_memcpy: the pinned H2D copy did not land")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    peer_src, peer_dst = _prefaulted(COPY_BYTES), _prefaulted(COPY_BYTES)
    rows, results = [], []
    with acl_runtime():
        src, dst = _prefaulted(COPY_BYTES), _prefaulted(COPY_BYTES)
        device = rt.malloc(COPY_BYTES)
        pinned = rt.malloc_host(COPY_BYTES)
        rt.memset(device, COPY_BYTES, 0, COPY_BYTES)  # pre-fault device memory
        util.ptr_to_numpy(pinned, (COPY_BYTES,), np.uint8).fill(FILL_BYTE)
        stream = rt.create_stream()
        _check_copies_land(device, src, dst, pinned)
        ours = _cases(device, util.numpy_to_ptr(src), util.numpy_to_ptr(dst), pinned, stream)

        def numpy_copy() -> None:
            np.copyto(peer_dst, peer_src)

        for name, copy in ours.items():
            seconds = time_interleaved({"ours": copy, "numpy": numpy_copy}, REPEATS, WARMUP)
            ours_gbps = COPY_BYTES / seconds["ours"] / BYTES_PER_GB
            peer_gbps = COPY_BYTES / seconds["numpy"] / BYTES_PER_GB
            share = ratio(ours_gbps, peer_gbps)
            status = "PASS" if share >= TARGET_RATIO else "BELOW TARGET"
            rows.append((name, ours_gbps, peer_gbps, share, status))
            results.append({"case": name, "bytes": COPY_BYTES, "ours_gbps": ours_gbps,
                            "numpy_gbps": peer_gbps, "ratio": share, "status": status,
                            "ours_ms": seconds["ours"] * MS_PER_S,
                            "numpy_ms": seconds["numpy"] * MS_PER_S})
        rt.destroy_stream(stream)
        rt.free_host(pinned)
        rt.free(device)
    print_table(f"memcpy of {COPY_BYTES >> 20} MiB vs np.copyto (median of {REPEATS}; "
                f"ratio = ours/numpy bandwidth, target >= {TARGET_RATIO})",
                ("case", "ours GB/s", "numpy GB/s", "ratio", "status"), rows)
    write_json(args.json, "bench_memcpy", results, target_ratio=TARGET_RATIO)


if __name__ == "__main__":
    main()
