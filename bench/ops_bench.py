"""Operator dispatch cost and elementwise bandwidth, side by side with numpy and torch.

1. Dispatch cost of a one-element Add, per call: the one-shot helper (allocates its output),
   both phases (phase 1 + phase 2 each call), and phase 2 of a repeatable executor, in
   ``inline`` and ``threaded`` stream mode (threaded: enqueue cost, synchronized once at the
   end of each batch), against ``np.add(a, b, out=c)`` and torch eager ``torch.add(a, b,
   out=c)``. Target: phase 2 of a repeatable executor in inline mode within 10x of numpy.
2. Add of 16M float32 elements: a repeatable executor, synchronized, against
   ``np.add(a, b, out=c)`` (target >= 0.95 of numpy's speed).

The matmul/convolution and layernorm/softmax targets are in ops_linalg_bench.py and
ops_norm_bench.py.

Run: ``.venv/bin/python bench/ops_bench.py [--json PATH]``.
"""

from __future__ import annotations

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

DISPATCH_CALLS = 2_000  # calls per timed batch for the one-element Add
DISPATCH_REPEATS = 7
BIG_ELEMENTS = 16 << 20  # float32 elements of the bandwidth Add (64 MiB per operand)
BIG_REPEATS = 7
DISPATCH_TARGET = 10.0  # phase 2 (repeatable, inline) within this factor of numpy add
BANDWIDTH_TARGET = 0.95  # our Add speed as a fraction of numpy's


def _peers_one_element() -> dict[str, float]:
    a, b, c = (np.ones(1, np.float32) for _ in range(3))
    ta, tb, tc = (torch.ones(1) for _ in range(3))
    return time_interleaved({"numpy add": lambda: np.add(a, b, out=c),
                             "torch add": lambda: torch.add(ta, tb, out=tc)},
                            DISPATCH_REPEATS, calls=DISPATCH_CALLS)


def _dispatch(mode: str) -> dict[str, float]:
    with acl_runtime(stream_mode=mode):
        x = openacl.to_device(np.ones(1, np.float32))
        out = openacl.empty((1,), np.float32)
        _, repeatable = aclnn.add_get_workspace_size(x, x, None, out)
        aclnn.set_executor_repeatable(repeatable)

        def one_shot() -> None:
            openacl.ops.add(x, x)

        def both_phases() -> None:
            workspace_size, executor = aclnn.add_get_workspace_size(x, x, None, out)
            aclnn.add(0, workspace_size, executor, 0)

        def phase2() -> None:
            aclnn.add(0, 0, repeatable, 0)

        times = time_interleaved({"one-shot helper": one_shot,
                                  "phase 1 + phase 2": both_phases,
                                  "phase 2, repeatable": phase2},
                                 DISPATCH_REPEATS, calls=DISPATCH_CALLS)
        rt.synchronize_device()
        aclnn.destroy_executor(repeatable)
        assert out.numpy()[0] == 2.0
        x.free()
        out.free()
        return times


def _bandwidth() -> dict[str, float]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(BIG_ELEMENTS, dtype=np.float32)
    b = rng.standard_normal(BIG_ELEMENTS, dtype=np.float32)
    c = np.empty_like(a)
    with acl_runtime(stream_mode="inline"):
        x, y = openacl.to_device(a), openacl.to_device(b)
        out = openacl.empty(a.shape, np.float32)
        _, executor = aclnn.add_get_workspace_size(x, y, None, out)
        aclnn.set_executor_repeatable(executor)

        def ours() -> None:
            aclnn.add(0, 0, executor, 0)
            rt.synchronize_stream(0)

        times = time_interleaved({"openacl Add": ours,
                                  "numpy add": lambda: np.add(a, b, out=c)}, BIG_REPEATS)
        np.testing.assert_array_equal(out.numpy(), a + b)
        aclnn.destroy_executor(executor)
        for tensor in (x, y, out):
            tensor.free()
        return times


def main() -> None:
    args = parse_args(__doc__.split("\n")[0])
    peers = _peers_one_element()
    results: dict = {"peers_us": {k: v * US_PER_S for k, v in peers.items()}, "dispatch_us": {}}
    rows = []
    for mode in ("inline", "threaded"):
        times = _dispatch(mode)
        results["dispatch_us"][mode] = {k: v * US_PER_S for k, v in times.items()}
        for name, seconds in times.items():
            rows.append([f"{mode}: {name}", seconds * US_PER_S,
                         ratio(seconds, peers["numpy add"]),
                         ratio(seconds, peers["torch add"])])
    rows += [[name, seconds * US_PER_S, ratio(seconds, peers["numpy add"]),
              ratio(seconds, peers["torch add"])] for name, seconds in peers.items()]
    print_table("one-element Add, µs per call (ratio = ours / peer time)",
                ["case", "us/call", "x numpy add", "x torch add"], rows)
    inline_phase2 = results["dispatch_us"]["inline"]["phase 2, repeatable"]
    verdict = inline_phase2 / results["peers_us"]["numpy add"]
    print(f"target: inline phase 2 within {DISPATCH_TARGET:.0f}x of numpy add -> "
          f"{verdict:.1f}x {'PASS' if verdict <= DISPATCH_TARGET else 'BELOW TARGET'}")

    times = _bandwidth()
    nbytes = 3 * BIG_ELEMENTS * 4
    speed = ratio(times["numpy add"], times["openacl Add"])
    results["add_16m"] = {"openacl_ms": times["openacl Add"] * 1e3,
                          "numpy_ms": times["numpy add"] * 1e3, "speed_ratio": speed}
    print_table("Add of 16M float32 (speed ratio = numpy time / ours; target >= 0.95)",
                ["case", "ms", "GB/s", "speed ratio"],
                [["openacl Add (repeatable, synced)", times["openacl Add"] * 1e3,
                  nbytes / times["openacl Add"] / 1e9, speed],
                 ["numpy add(out=)", times["numpy add"] * 1e3,
                  nbytes / times["numpy add"] / 1e9, 1.0]])
    print(f"target: >= {BANDWIDTH_TARGET} -> {speed:.3f} "
          f"{'PASS' if speed >= BANDWIDTH_TARGET else 'BELOW TARGET'}")
    write_json(args.json, "ops_bench", results)


if __name__ == "__main__":
    main()
