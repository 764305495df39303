"""Shared helpers for the benchmarks: timing, the printed table, ``--json`` output, runtime setup.

Every benchmark times OUR call and its numpy peer in the same process, interleaved repeat by
repeat (the order alternates), so drift of a noisy machine (frequency, a neighbour's load)
hits both sides alike. Figures are medians over repeats, after warm-up calls.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import openacl

US_PER_S = 1e6
MS_PER_S = 1e3
BYTES_PER_GB = 1e9  # bandwidth is reported in decimal GB/s, as memory vendors do
JSON_INDENT = 2

Timed = Callable[[], Any]


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line every benchmark takes: ``--json PATH``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    return parser.parse_args(argv)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def time_batch(fn: Timed, calls: int) -> float:
    """Seconds per call of ``fn``, over one batch of ``calls`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def time_interleaved(cases: Mapping[str, Timed], repeats: int, warmup: int = 3,
                     calls: int = 1) -> dict[str, float]:
    """Median seconds per call of each case, timed in alternating order repeat by repeat.

    Args:
        cases: name -> zero-argument callable.
        repeats: timed batches per case; the median over them is returned.
        warmup: untimed batches per case before timing.
        calls: calls per batch (raise it for sub-microsecond calls, so the clock's own
            cost does not dominate).
    """
    names = list(cases)
    for name in names:
        for _ in range(warmup):
            time_batch(cases[name], calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        order = names if repeat % 2 == 0 else names[::-1]
        for name in order:
            samples[name].append(time_batch(cases[name], calls))
    return {name: median(values) for name, values in samples.items()}


def time_median(fn: Timed, repeats: int, warmup: int = 3, calls: int = 1) -> float:
    """Median seconds per call of one callable (see ``time_interleaved``)."""
    return time_interleaved({"case": fn}, repeats, warmup, calls)["case"]


def ratio(ours: float, peer: float) -> float:
    return ours / peer if peer > 0 else float("inf")


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[_format_cell(value) for value in row] for row in rows]
    widths = [max(len(header), *(len(row[i]) for row in cells))
              for i, header in enumerate(headers)]
    print(f"\n{title}")
    print(_table_line(headers, widths))
    print("  ".join("-" * width for width in widths))
    for row in cells:
        print(_table_line(row, widths))


def _format_cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:#.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _table_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    first = cells[0].ljust(widths[0])
    rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
    return "  ".join([first, *rest])


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "openacl": openacl.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def write_json(path: str | None, benchmark: str, results: Any, **extra: Any) -> None:
    """Write ``results`` with the date and machine to ``path`` (nothing when path is None)."""
    if not path:
        return
    payload = {
        "benchmark": benchmark,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        **extra,
        "results": results,
    }
    with open(path, "w", encoding="utf-8") as out:
        json.dump(payload, out, indent=JSON_INDENT)
        out.write("\n")
    print(f"\nwrote {path}", file=sys.stderr)


def blas_kernels() -> str:
    """Which kernels numpy's BLAS runs here (threadpoolctl's view: library, CPU kernel
    family, threads), for a benchmark's output."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return ", ".join(f"{i.get('internal_api')} {i.get('architecture')} "
                     f"{i.get('num_threads')} threads" for i in threadpool_info()
                     if i.get("user_api") == "blas") or "none found"


# onnxruntime's intra-op workers keep spinning for 50-70 ms after its last call (measured on
# the 2-core VM: a 26 us model timed right after it took 45-54 us, 0.07 s later 26 us)
SETTLE_S = 0.25


def settle() -> None:
    """Wait until the runtime timed before has let go of the cores (its spinning workers
    asleep), so the next one is timed on a quiet machine, as a process running it alone."""
    time.sleep(SETTLE_S)


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values`` (the mean of latency ratios)."""
    return float(np.exp(np.mean(np.log(np.asarray(values, np.float64)))))


@contextlib.contextmanager
def acl_runtime(**config: Any) -> Iterator[None]:
    """``openacl.init(config)`` with device 0 current; finalized on exit."""
    openacl.init(config)
    try:
        openacl.rt.set_device(0)
        yield
    finally:
        openacl.finalize()
