"""Cost of ``rt.malloc`` + ``rt.free`` served from the caching allocator vs ``np.empty``.

Operators and models allocate their outputs and workspaces on every call, so a cached
malloc/free pair should cost about what a numpy user pays for a fresh array. After a
warm-up the requested sizes (1 KiB from the small pool, 4 MiB from a 20 MiB large-pool
segment) are served from cached segments: the allocator statistics are printed before and
after the timed loop to show that no new segment was reserved (``num_device_alloc`` stays
constant). ``np.empty`` does not touch its pages either, so neither side pays for faults.

Run: ``.venv/bin/python bench/bench_malloc.py [--json PATH]``.
"""

from __future__ import annotations

import numpy as np
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
from openacl import rt

SIZES = {"1 KiB": 1 << 10, "4 MiB": 4 << 20}  # label -> bytes per allocation
CALLS = 1_000  # malloc+free pairs (or np.empty calls) per timed batch
REPEATS = 21  # timed batches per case (median)
WARMUP = 3  # untimed batches per case; the first one fills the cache
CACHE_STATS = ("num_device_alloc", "segment.all.current", "reserved_bytes.all.current")


def _cache_stats() -> dict[str, int]:
    stats = openacl.memory_stats()
    return {key: stats[key] for key in CACHE_STATS}


def measure(nbytes: int) -> dict[str, object]:
    """Median microseconds of a cached malloc+free pair and of ``np.empty``, same size."""
    def malloc_free() -> None:
        rt.free(rt.malloc(nbytes))

    def numpy_empty() -> None:
        np.empty(nbytes, np.uint8)

    malloc_free()  # reserve the segment now, so the timed loop can only hit the cache
    before = _cache_stats()
    seconds = time_interleaved({"ours": malloc_free, "numpy": numpy_empty}, REPEATS, WARMUP,
                               calls=CALLS)
    after = _cache_stats()
    return {"bytes": nbytes, "ours_us": seconds["ours"] * US_PER_S,
            "numpy_us": seconds["numpy"] * US_PER_S,
            "ratio": ratio(seconds["ours"], seconds["numpy"]),
            "cache_hit": before["num_device_alloc"] == after["num_device_alloc"],
            "stats_before": before, "stats_after": after}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    with acl_runtime():
        results = {label: measure(nbytes) for label, nbytes in SIZES.items()}
    rows = [(label, r["ours_us"], r["numpy_us"], r["ratio"],
             f"{r['stats_before']['num_device_alloc']} -> "
             f"{r['stats_after']['num_device_alloc']}",
             f"{r['stats_before']['segment.all.current']} -> "
             f"{r['stats_after']['segment.all.current']}",
             "yes" if r["cache_hit"] else "NO")
            for label, r in results.items()]
    print_table(f"cached rt.malloc + rt.free pair vs np.empty, ratio = ours / numpy time "
                f"(median of {REPEATS} x {CALLS})",
                ("size", "ours us/pair", "np.empty us", "ratio", "num_device_alloc",
                 "segments", "cache hit"), rows)
    write_json(args.json, "bench_malloc", results)


if __name__ == "__main__":
    main()
