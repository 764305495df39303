"""openacl's packed float32 GEMM (openacl._native, its own pool) against numpy's BLAS.

Shapes are the products of the engine's models (MiniLM's projections and feed-forward
layers at batch 1 and 8, a convolution's weight x im2col columns, a thin classifier head).
Each is timed three ways, interleaved: ours with the right operand packed once (a model's
constant weight), ours with both operands raw (packed as they are read), and ``np.matmul``
into a preallocated output; at 1 thread and at the cores this process may use (both pools
set to the same count; the other pool held at 1 thread while one is timed, so they do not
fight). Ratio = our time / numpy's (< 1: ours is faster).

Re-executes itself without ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (a user's machine
sets neither) and prints the kernels numpy's BLAS then uses.

Run: ``.venv/bin/python bench/gemm_bench.py [--json PATH] [--quick]``
"""

from __future__ import annotations

import os
import sys

FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in FORCED_BLAS})

import argparse  # noqa: E402

import numpy as np  # noqa: E402
from threadpoolctl import ThreadpoolController  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import blas_kernels, geometric_mean, print_table, ratio, time_interleaved, write_json  # noqa: E402

from openacl.ops import native  # noqa: E402
from openacl.runtime.threads import available_cores  # noqa: E402

SHAPES = {  # name: (M, K, N)
    "minilm b1 qkv": (128, 384, 384),
    "minilm b1 ffn up": (128, 384, 1536),
    "minilm b1 ffn down": (128, 1536, 384),
    "minilm b8 ffn up": (1024, 384, 1536),
    "conv 3x3 64ch 40x40": (64, 576, 1600),
    "conv 1x1 24ch 80x80": (24, 288, 6400),
    "head 64x1024x10": (64, 1024, 10),
}
QUICK = ("minilm b1 qkv", "conv 3x3 64ch 40x40")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--quick", action="store_true", help="two shapes, few repeats")
    args = parser.parse_args()
    lib = native.kernels()
    if lib is None:
        sys.exit("the C extension openacl._native is not built or is turned off")
    blas = ThreadpoolController().select(user_api="blas")
    rng = np.random.default_rng(0)
    rows, results = [], []
    shapes = {name: SHAPES[name] for name in QUICK} if args.quick else SHAPES
    for threads in sorted({1, available_cores()}):
        for name, (m, k, n) in shapes.items():
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            packed = native.pack(b, native.RIGHT)
            out = np.empty((m, n), np.float32)
            repeats = 5 if args.quick else max(7, min(60, int(4e9 / (m * k * n))))

            def ours_packed(a=a, packed=packed, out=out) -> None:
                native.gemm(a, packed, out)

            def ours_raw(a=a, b=b, out=out) -> None:
                native.gemm(a, b, out)

            def numpy_matmul(a=a, b=b, out=out) -> None:
                np.matmul(a, b, out=out)

            lib.pool_threads(threads)
            with blas.limit(limits=1):
                timed = time_interleaved({"packed": ours_packed, "raw": ours_raw}, repeats)
            lib.pool_threads(1)
            with blas.limit(limits=threads):
                timed["numpy"] = time_interleaved({"numpy": numpy_matmul}, repeats)["numpy"]
            gflops = {key: 2 * m * k * n / value / 1e9 for key, value in timed.items()}
            row = {"shape": name, "m": m, "k": k, "n": n, "threads": threads,
                   "gflops": gflops, "packed_ratio": ratio(timed["packed"], timed["numpy"]),
                   "raw_ratio": ratio(timed["raw"], timed["numpy"])}
            results.append(row)
            rows.append([name, threads, f"{gflops['packed']:.1f}", f"{gflops['raw']:.1f}",
                         f"{gflops['numpy']:.1f}", f"{row['packed_ratio']:.2f}",
                         f"{row['raw_ratio']:.2f}"])
    lib.pool_threads(available_cores())
    print_table(f"packed GEMM ({lib.gemm_info()['isa']} kernel) vs numpy's BLAS, GFLOP/s",
                ["shape", "threads", "ours packed", "ours raw", "numpy", "ratio packed",
                 "ratio raw"], rows)
    mean = geometric_mean([row["packed_ratio"] for row in results])
    print(f"geometric mean of the packed ratios {mean:.2f}; numpy BLAS: {blas_kernels()}")
    write_json(args.json, "gemm", results, kernel=lib.gemm_info(), blas=blas_kernels())


if __name__ == "__main__":
    main()
