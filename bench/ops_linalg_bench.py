"""Matmul and Convolution throughput, side by side with their peers in one run.

* aclnnMatmul fp32 at 1024^3 and 2048^3 (GFLOP/s) vs raw ``numpy.matmul`` on the same arrays
  into a preallocated output. Target ratio (ours/numpy GFLOP/s) >= ``MATMUL_TARGET``.
* aclnnConvolution fp32: 1x64x56x56 with 64 3x3 filters, padding 1; depthwise 3x3 on
  1x96x80x80 (groups 96, padding 1), vs ``torch.nn.functional.conv2d`` on CPU. Target ratio
  (ours/torch throughput) >= ``CONV_TARGET``.

OUR side runs phase 2 of a repeatable executor (phase 1 once, outside the clock) followed by
``synchronize_stream``, so the clock covers the enqueue, the kernel and the hand-off back.
Each case is timed in blocks of its own (see ``_time_blocks`` for why not interleaved call
by call); the median of the better of two alternating blocks is reported.

Run: ``.venv/bin/python bench/ops_linalg_bench.py [--json PATH]`` (always exits 0).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from _common import (
    MS_PER_S,
    acl_runtime,
    parse_args,
    print_table,
    ratio,
    time_median,
    write_json,
)

import openacl
from openacl import aclnn, rt

FLOPS_PER_MAC = 2
GIGA = 1e9
MATMUL_SIZES = (1024, 2048)
MATMUL_REPEATS = {1024: 15, 2048: 5}
CONV_REPEATS = 30
MATMUL_TARGET = 0.95
CONV_TARGET = 1.0
SEED = 0
BLOCK_ROUNDS = 2  # alternating blocks per case; the better block's median is reported


def _repeatable(get_workspace_size: Callable, launch: Callable, stream: int, *args
                ) -> Callable[[], None]:
    """Phase 1 once, executor made repeatable; returns the timed phase 2 + synchronize."""
    workspace_size, executor = get_workspace_size(*args)
    aclnn.set_executor_repeatable(executor)
    workspace = rt.malloc(workspace_size) if workspace_size else 0

    def run() -> None:
        launch(workspace, workspace_size, executor, stream)
        rt.synchronize_stream(stream)
    return run


def _time_blocks(cases: dict[str, Callable[[], None]], repeats: int, warmup: int
                 ) -> dict[str, float]:
    """Median seconds per call, each case timed in its own block (after its warm-up).

    Not interleaved call by call: torch's OpenMP workers and numpy's OpenBLAS workers spin
    for a while after each call, so alternating the two libraries makes each run against
    the other's spinning threads and measures that contention, not the kernels. Blocks are
    repeated in alternating order (``BLOCK_ROUNDS``) so slow drift still hits both sides.
    """
    samples: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_index in range(BLOCK_ROUNDS):
        for name in names if round_index % 2 == 0 else names[::-1]:
            samples[name].append(time_median(cases[name], repeats, warmup))
    return {name: min(values) for name, values in samples.items()}


def bench_matmul(stream: int, rng: np.random.Generator) -> list[dict]:
    rows = []
    for n in MATMUL_SIZES:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        peer_out = np.empty((n, n), np.float32)
        left, right = openacl.to_device(a), openacl.to_device(b)
        out = openacl.empty((n, n), np.float32)
        ours = _repeatable(aclnn.matmul_get_workspace_size, aclnn.matmul, stream, left, right,
                           out, 0)
        def peer(a=a, b=b, peer_out=peer_out) -> None:
            np.matmul(a, b, out=peer_out)

        seconds = _time_blocks({"ours": ours, "numpy": peer}, MATMUL_REPEATS[n], warmup=2)
        np.testing.assert_allclose(out.numpy(), peer_out, rtol=1e-3, atol=1e-2)
        flops = FLOPS_PER_MAC * n ** 3
        ours_gflops, peer_gflops = flops / seconds["ours"] / GIGA, flops / seconds["numpy"] / GIGA
        rows.append({"case": f"Matmul fp32 {n}^3", "ours": ours_gflops, "peer": peer_gflops,
                     "unit": "GFLOP/s", "peer_name": "numpy.matmul",
                     "ratio": ratio(ours_gflops, peer_gflops), "target": MATMUL_TARGET})
    return rows


CONV_CASES = {
    # name: (input shape, weight shape, padding, groups)
    "Conv 1x64x56x56, 64x3x3 pad 1": ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    "Depthwise 3x3 1x96x80x80": ((1, 96, 80, 80), (96, 1, 3, 3), 1, 96),
}


def bench_convolution(stream: int, rng: np.random.Generator) -> list[dict]:
    rows = []
    for name, (shape_x, shape_w, padding, groups) in CONV_CASES.items():
        x = rng.standard_normal(shape_x, dtype=np.float32)
        w = rng.standard_normal(shape_w, dtype=np.float32)
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        golden = torch.nn.functional.conv2d(tx, tw, None, 1, padding, 1, groups).numpy()
        inputs, weights = openacl.to_device(x), openacl.to_device(w)
        out = openacl.empty(golden.shape, np.float32)
        ours = _repeatable(aclnn.convolution_get_workspace_size, aclnn.convolution, stream,
                           inputs, weights, None, [1, 1], [padding, padding], [1, 1], False,
                           [0, 0], groups, out, 0)

        def peer(tx=tx, tw=tw, padding=padding, groups=groups) -> None:
            torch.nn.functional.conv2d(tx, tw, None, 1, padding, 1, groups)

        seconds = _time_blocks({"ours": ours, "torch": peer}, CONV_REPEATS, warmup=3)
        np.testing.assert_allclose(out.numpy(), golden, rtol=1e-3, atol=1e-3)
        rows.append({"case": name, "ours": seconds["ours"] * MS_PER_S,
                     "peer": seconds["torch"] * MS_PER_S, "unit": "ms",
                     "peer_name": "torch conv2d",
                     "ratio": ratio(seconds["torch"], seconds["ours"]), "target": CONV_TARGET})
    return rows


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(SEED)
    with acl_runtime():
        stream = rt.create_stream()
        rows = bench_convolution(stream, rng) + bench_matmul(stream, rng)
        rt.destroy_stream(stream)
    print_table(f"aclnn linalg/conv (torch threads: {torch.get_num_threads()})",
                ["case", "ours", "peer", "unit", "ratio", "target", "status"],
                [[r["case"], r["ours"], r["peer"], r["unit"], r["ratio"], r["target"],
                  "PASS" if r["ratio"] >= r["target"] else "SHORT"] for r in rows])
    print("ratio: Matmul = ours/numpy GFLOP/s; Convolution = torch time / our time")
    write_json(args.json, "ops_linalg_bench", rows, torch_threads=torch.get_num_threads())


if __name__ == "__main__":
    main()
