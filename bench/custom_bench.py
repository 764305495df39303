"""A custom operator against the built-in one: AddCustom vs Add on float16.

AddCustom is the operator of ``examples/add_custom/op`` (loaded with
``openacl.custom.load_package``: OpDef, tiling, a kernel on 8 blocks run on the block
thread pool); Add is the built-in aclnnAdd (one numpy call, computed in float32 and
rounded once). Both run through a repeatable executor, phase 2 + ``synchronize_stream``
per call, in ``inline`` stream mode, interleaved repeat by repeat, on [8, 2048] (the
sample's shape) and [64, 1M]; ``np.add(x, y, out=z)`` on float16 is shown for reference.
Target: AddCustom at most 1.2x the built-in Add's time at [64, 1M].

Run: ``.venv/bin/python bench/custom_bench.py [--json PATH]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from _common import (
    MS_PER_S,
    US_PER_S,
    acl_runtime,
    parse_args,
    print_table,
    ratio,
    time_interleaved,
    write_json,
)

import openacl
from openacl import aclnn, custom, rt

OP_PACKAGE = Path(__file__).resolve().parent.parent / "examples" / "add_custom" / "op"
SMALL_SHAPE = (8, 2048)
LARGE_SHAPE = (64, 1 << 20)
SMALL_CALLS, SMALL_REPEATS = 200, 7  # calls per timed batch, batches (median)
LARGE_CALLS, LARGE_REPEATS = 1, 5
TARGET = 1.2  # AddCustom time / Add time at LARGE_SHAPE


def _measure(shape: tuple[int, int], calls: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x_host = rng.uniform(1, 100, shape).astype(np.float16)
    y_host = rng.uniform(1, 100, shape).astype(np.float16)
    z_host = np.empty_like(x_host)
    x, y = openacl.to_device(x_host), openacl.to_device(y_host)
    z_custom, z_builtin = openacl.empty(shape, np.float16), openacl.empty(shape, np.float16)
    _, custom_executor = aclnn.add_custom_get_workspace_size(x, y, z_custom)
    _, builtin_executor = aclnn.add_get_workspace_size(x, y, None, z_builtin)
    for executor in (custom_executor, builtin_executor):
        aclnn.set_executor_repeatable(executor)

    # bound once, as an application holds them: a custom op's functions are looked up by
    # name through the registry on every ``aclnn.<name>`` access
    add_custom, add = aclnn.add_custom, aclnn.add

    def run_custom() -> None:
        add_custom(0, 0, custom_executor, 0)
        rt.synchronize_stream(0)

    def run_builtin() -> None:
        add(0, 0, builtin_executor, 0)
        rt.synchronize_stream(0)

    times = time_interleaved({"AddCustom": run_custom, "Add": run_builtin,
                              "numpy add": lambda: np.add(x_host, y_host, out=z_host)},
                             repeats, warmup=1, calls=calls)
    np.testing.assert_array_equal(z_custom.numpy(), x_host + y_host)
    np.testing.assert_array_equal(z_builtin.numpy(), z_custom.numpy())
    for executor in (custom_executor, builtin_executor):
        aclnn.destroy_executor(executor)
    for tensor in (x, y, z_custom, z_builtin):
        tensor.free()
    return times


def main() -> None:
    args = parse_args(__doc__.split("\n")[0])
    results = {}
    rows = []
    with acl_runtime(stream_mode="inline"):
        custom.load_package(OP_PACKAGE)
        try:
            for shape, calls, repeats in ((SMALL_SHAPE, SMALL_CALLS, SMALL_REPEATS),
                                          (LARGE_SHAPE, LARGE_CALLS, LARGE_REPEATS)):
                times = _measure(shape, calls, repeats)
                label = f"[{shape[0]}, {shape[1]}]"
                results[label] = {"addcustom_us": times["AddCustom"] * US_PER_S,
                                  "add_us": times["Add"] * US_PER_S,
                                  "numpy_us": times["numpy add"] * US_PER_S,
                                  "ratio": ratio(times["AddCustom"], times["Add"])}
                unit, scale = ("us", US_PER_S) if shape == SMALL_SHAPE else ("ms", MS_PER_S)
                rows.append([f"{label} float16 ({unit})", times["AddCustom"] * scale,
                             times["Add"] * scale, times["numpy add"] * scale,
                             results[label]["ratio"]])
        finally:
            custom.unregister_op("AddCustom")
    print_table("AddCustom (custom op, 8 blocks) vs built-in Add: phase 2 of a repeatable "
                "executor + synchronize (ratio = AddCustom / Add time)",
                ["shape", "AddCustom", "Add", "numpy add", "ratio"], rows)
    large = results[f"[{LARGE_SHAPE[0]}, {LARGE_SHAPE[1]}]"]["ratio"]
    print(f"target: AddCustom <= {TARGET}x Add at {list(LARGE_SHAPE)} -> {large:.2f}x "
          f"{'PASS' if large <= TARGET else 'BELOW TARGET'}")
    write_json(args.json, "custom_bench", results)


if __name__ == "__main__":
    main()
