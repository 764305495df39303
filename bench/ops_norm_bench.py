"""LayerNorm 128x384 and Softmax 12x128x128 (float32), side by side with torch CPU.

Each case runs OUR operator as phase 2 of a repeatable executor in ``inline`` stream mode,
synchronized (so the time is dispatch + kernel), next to torch eager on the same data
(``torch.nn.functional.layer_norm`` with weight and bias; ``torch.softmax`` on the last
dim), interleaved repeat by repeat. A third column times our kernel body alone (the
numpy work, called directly on the executor's views) to separate dispatch from compute.
Ratio = torch time / ours (speed ratio; target >= 1.0). Outputs are checked against torch.

torch runs with its default intra-op threads (printed; ``ratio``, the target's figure) and
again with one thread (``ratio 1T``), since numpy's kernels are single-threaded.
The Softmax row is skipped with a message when ``openacl.ops.softmax`` does not exist.

Run: ``.venv/bin/python bench/ops_norm_bench.py [--json PATH]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from _common import (
    US_PER_S,
    acl_runtime,
    parse_args,
    print_table,
    ratio,
    time_interleaved,
    write_json,
)

import openacl
from openacl import aclnn, rt
from openacl.ops.executor import find_executor
from openacl.runtime.stream import resolve_stream

LAYER_NORM_SHAPE = (128, 384)
SOFTMAX_SHAPE = (12, 128, 128)
EPS = 1e-5
CALLS = 20  # calls per timed batch
REPEATS = 15  # timed batches per case (median)
TARGET = 1.0  # torch time / ours, at least
CHECK_RTOL, CHECK_ATOL = 1e-4, 1e-5  # float32 agreement with torch before timing


def _kernel_only(executor: int) -> Callable[[], None]:
    """Our kernel body on the executor's resolved views, without any dispatch."""
    exe = find_executor(executor)
    views, _ = exe._views(resolve_stream(0))  # the views phase 2 would hand the kernel
    return lambda: exe.kernel(views)


def _measure(name: str, executor: int, launch: Callable[[int], None],
             torch_fn: Callable[[], object]) -> dict[str, float]:
    aclnn.set_executor_repeatable(executor)

    def ours() -> None:
        launch(executor)
        rt.synchronize_stream(0)

    times = time_interleaved({"ours": ours, "kernel": _kernel_only(executor),
                              "torch": torch_fn}, REPEATS, calls=CALLS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # numpy is single-threaded: also compare like with like
    try:
        single = time_interleaved({"ours": ours, "torch": torch_fn}, REPEATS, calls=CALLS)
    finally:
        torch.set_num_threads(threads)
    aclnn.destroy_executor(executor)
    return {"case": name, **{f"{k}_us": v * US_PER_S for k, v in times.items()},
            "torch_1thread_us": single["torch"] * US_PER_S,
            "speed_ratio": ratio(times["torch"], times["ours"]),
            "kernel_speed_ratio": ratio(times["torch"], times["kernel"]),
            "speed_ratio_1thread": ratio(single["torch"], single["ours"])}


def _layer_norm(rng: np.random.Generator) -> dict[str, float]:
    x = rng.standard_normal(LAYER_NORM_SHAPE, dtype=np.float32)
    weight = rng.standard_normal(LAYER_NORM_SHAPE[-1:], dtype=np.float32)
    bias = rng.standard_normal(LAYER_NORM_SHAPE[-1:], dtype=np.float32)
    tx, tw, tb = (torch.from_numpy(a) for a in (x, weight, bias))
    source, w, b = (openacl.to_device(a) for a in (x, weight, bias))
    out = openacl.empty(LAYER_NORM_SHAPE, np.float32)
    width = list(LAYER_NORM_SHAPE[-1:])
    _, executor = aclnn.layer_norm_get_workspace_size(source, width, w, b, EPS, out, None, None)
    aclnn.set_executor_repeatable(executor)
    aclnn.layer_norm(0, 0, executor, 0)
    golden = torch.nn.functional.layer_norm(tx, width, tw, tb, EPS).numpy()
    np.testing.assert_allclose(out.numpy(), golden, CHECK_RTOL, CHECK_ATOL)
    return _measure(f"LayerNorm {LAYER_NORM_SHAPE[0]}x{LAYER_NORM_SHAPE[1]} (affine)", executor,
                    lambda e: aclnn.layer_norm(0, 0, e, 0),
                    lambda: torch.nn.functional.layer_norm(tx, width, tw, tb, EPS))


def _softmax(rng: np.random.Generator) -> dict[str, float] | None:
    if not hasattr(openacl.ops, "softmax"):
        print("skipping Softmax: openacl.ops.softmax does not exist yet")
        return None
    x = rng.standard_normal(SOFTMAX_SHAPE, dtype=np.float32)
    tx = torch.from_numpy(x)
    source, out = openacl.to_device(x), openacl.empty(SOFTMAX_SHAPE, np.float32)
    _, executor = aclnn.softmax_get_workspace_size(source, -1, out)
    aclnn.set_executor_repeatable(executor)
    aclnn.softmax(0, 0, executor, 0)
    np.testing.assert_allclose(out.numpy(), torch.softmax(tx, -1).numpy(), CHECK_RTOL,
                               CHECK_ATOL)
    shape = "x".join(str(d) for d in SOFTMAX_SHAPE)
    return _measure(f"Softmax {shape} (last dim)", executor,
                    lambda e: aclnn.softmax(0, 0, e, 0), lambda: torch.softmax(tx, -1))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(0)
    with acl_runtime(stream_mode="inline"):
        results = [r for r in (_layer_norm(rng), _softmax(rng)) if r is not None]
    rows = [[r["case"], r["ours_us"], r["kernel_us"], r["torch_us"], r["speed_ratio"],
             r["kernel_speed_ratio"], r["torch_1thread_us"], r["speed_ratio_1thread"],
             "PASS" if r["speed_ratio"] >= TARGET else "BELOW TARGET"]
            for r in results]
    print_table(f"float32, µs per call, median of {REPEATS} batches of {CALLS}; ratio = torch "
                f"time / ours (target >= {TARGET}); torch threads: {torch.get_num_threads()}",
                ["case", "ours us", "kernel us", "torch us", "ratio", "kernel ratio",
                 "torch 1T us", "ratio 1T", "status"], rows)
    write_json(args.json, "ops_norm_bench", results, target_ratio=TARGET,
               torch_threads=torch.get_num_threads(), torch_version=torch.__version__)


if __name__ == "__main__":
    main()
