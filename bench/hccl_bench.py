"""HCCL all_reduce over 2 local ranks: ours (device buffers, a stream, synchronize) against the
same torch.distributed (gloo) all_reduce called directly, in the same processes.

For each size from 4 KiB to 256 MiB (float32, in place) both are timed interleaved, repeat by
repeat (``_common.time_interleaved``), and rank 0 prints the median time, the bus bandwidth
(``bytes / time * 2 (n - 1) / n``, NCCL-tests' definition) and the ratio of their throughputs,
ours / torch (target >= 0.9). Then the latency of a 4-byte all_reduce. When a 16 MiB
all_reduce takes longer than ``SLOW_16MIB_S`` the sizes stop at 64 MiB (the output says so).

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (a
user's machine sets neither); its ranks inherit that environment from ``openacl launch``.

Run: ``.venv/bin/python bench/hccl_bench.py [--max-mib 256] [--json PATH]``
"""

from __future__ import annotations

import os
import sys

FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in FORCED_BLAS})

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402

RANKS = 2
KIB, MIB = 1 << 10, 1 << 20
SIZES = [4 * KIB * 4 ** i for i in range(9)]  # 4 KiB .. 256 MiB, bytes
SLOW_CAP = 64 * MIB  # the largest size on a slow machine, bytes
SLOW_16MIB_S = 1.0  # a 16 MiB all_reduce slower than this makes the machine "slow", seconds
SIXTEEN_MIB = 16 * MIB
FLOAT32_BYTES = 4
LATENCY_CALLS = 100  # 4-byte all_reduces per timed batch
LATENCY_REPEATS = 9
LAUNCH_TIMEOUT_S = 900  # the whole run, seconds
RESULT_TAG = "HCCL_BENCH_RESULT "  # rank 0's line carrying the JSON results


def repeats_for(nbytes: int) -> int:
    """Timed batches per size: more for small sizes, at least 3."""
    return 21 if nbytes <= MIB else 9 if nbytes <= SIXTEEN_MIB else 3


def bus_bandwidth_gbs(nbytes: int, seconds: float, ranks: int = RANKS) -> float:
    return nbytes / seconds * 2 * (ranks - 1) / ranks / _common.BYTES_PER_GB


def worker(max_bytes: int) -> None:
    import torch
    import torch.distributed as dist

    import openacl
    from openacl import hccl

    openacl.init()
    openacl.rt.set_device(0)
    comm = hccl.comm_init_from_env()
    dist.init_process_group("gloo", store=dist.PrefixStore("bench-peer/", comm.store),
                            rank=comm.rank, world_size=comm.size)
    stream = openacl.Stream()
    rows, capped = [], False
    for nbytes in SIZES:
        if nbytes > max_bytes:
            break
        count = nbytes // FLOAT32_BYTES
        buffer = openacl.DeviceBuffer(nbytes)
        buffer.copy_from(np.ones(count, np.float32))
        tensor = torch.ones(count, dtype=torch.float32)

        def ours(buffer=buffer, count=count) -> None:
            hccl.all_reduce(buffer, buffer, count, hccl.HCCL_DATA_TYPE_FP32,
                            hccl.HCCL_REDUCE_SUM, comm, stream)
            stream.synchronize()

        def peer(tensor=tensor) -> None:
            dist.all_reduce(tensor)

        times = _common.time_interleaved({"ours": ours, "torch": peer}, repeats_for(nbytes),
                                         warmup=1)
        rows.append({"bytes": nbytes, "ours_s": times["ours"], "torch_s": times["torch"]})
        buffer.free()
        del tensor
        if nbytes == SIXTEEN_MIB:
            slow = torch.tensor([float(max(times.values()) > SLOW_16MIB_S)])
            dist.broadcast(slow, 0)  # every rank takes rank 0's decision
            if slow.item() and max_bytes > SLOW_CAP:
                max_bytes, capped = SLOW_CAP, True
    small = openacl.DeviceBuffer(FLOAT32_BYTES)
    scalar = torch.ones(1)

    def ours_small() -> None:
        hccl.all_reduce(small, small, 1, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm,
                        stream)
        stream.synchronize()

    latency = _common.time_interleaved({"ours": ours_small,
                                        "torch": lambda: dist.all_reduce(scalar)},
                                       LATENCY_REPEATS, calls=LATENCY_CALLS)
    small.free()
    stream.destroy()
    dist.destroy_process_group()
    comm.destroy()
    openacl.finalize()
    if comm.rank == 0:
        print(RESULT_TAG + json.dumps({"rows": rows, "latency": latency,
                                       "capped": capped}), flush=True)


def report(results: dict, json_path: str | None) -> None:
    table = []
    for row in results["rows"]:
        nbytes, ours, peer = row["bytes"], row["ours_s"], row["torch_s"]
        size = f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"
        table.append([size, ours * _common.MS_PER_S, peer * _common.MS_PER_S,
                      bus_bandwidth_gbs(nbytes, ours), bus_bandwidth_gbs(nbytes, peer),
                      _common.ratio(peer, ours)])
    _common.print_table(f"all_reduce float32 in place, {RANKS} ranks, gloo on loopback "
                        f"(ratio = our throughput / torch's, target >= 0.9)",
                        ["size", "ours ms", "torch ms", "ours busbw GB/s",
                         "torch busbw GB/s", "ratio"], table)
    if results["capped"]:
        print(f"\nslow machine: a 16 MiB all_reduce took over {SLOW_16MIB_S:g} s, so sizes "
              f"stop at {SLOW_CAP // MIB} MiB")
    latency = results["latency"]
    print(f"\n4-byte all_reduce latency: ours {latency['ours'] * _common.US_PER_S:.1f} us "
          f"(all_reduce + stream synchronize), torch.distributed "
          f"{latency['torch'] * _common.US_PER_S:.1f} us, ratio "
          f"{_common.ratio(latency['torch'], latency['ours']):.2f}")
    print(f"blas: {_common.blas_kernels()}")
    _common.write_json(json_path, "hccl", results, ranks=RANKS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-mib", type=int, default=SIZES[-1] // MIB,
                        help="largest all_reduce, MiB (default 256)")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.max_mib * MIB)
        return 0
    import contextlib
    import io

    from openacl.cli.launch import launch

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = launch(RANKS, [sys.executable, __file__, "--worker", "--max-mib",
                                str(args.max_mib)], timeout_s=LAUNCH_TIMEOUT_S, stdout=out)
    lines = out.getvalue().splitlines()
    found = [line.split(RESULT_TAG, 1)[1] for line in lines if RESULT_TAG in line]
    if status != 0 or not found:
        print("\n".join(lines), file=sys.stderr)
        print(f"hccl_bench: the ranks failed (status {status})", file=sys.stderr)
        return 1
    report(json.loads(found[0]), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
