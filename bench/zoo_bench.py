"""The zoo's real models (``openacl.cli.zoo``) on our engine and on onnxruntime, in one run.

For every model (or those of ``--models`` / ``--ci``): fetch it into the cache, load it with
``openacl.InferenceSession(path)`` (no ``input_shapes``) and with onnxruntime (CPU,
``--threads`` intra-op threads: the machine's cores by default), run the feeds of
``tests/zoo_cases.py``, check every output against onnxruntime's under the model's
tolerance, then time each runtime's ``run``: median latency over ``--runs`` samples after
warm-up, one runtime after the other (calls never interleaved: each keeps worker threads
spinning for a while after a call, and ``settle`` waits them out before each is timed), in
``--rounds`` alternating rounds (the ratio is the median of the rounds' ratios: on a shared
machine a neighbour's busy spell then slows both sides of one ratio), fewer samples for a
model whose call takes long (``--budget`` seconds per runtime and model, over all rounds).
A model that fails to load or run in openacl shows the first line of its error as its
status; the bench goes on.

Both runtimes get the same CPU threads (``--threads``: ``InferenceSession(path, threads=N)``
here, ``intra_op_num_threads`` there). Prints a table (model, ours ms, ort ms, ratio
ours/ort, load s, first run s, min cosine, max |diff|, status), the geometric mean and the
largest of the ratios, each failure's first line, and numpy's BLAS kernels; writes
``bench/results/zoo.json`` (``--json PATH`` elsewhere) and, with ``--png PATH``, a chart of
the ratios (matplotlib: ``pip install -e '.[bench]'``).

OpenBLAS tuning variables of the calling shell (``OPENBLAS_CORETYPE``,
``OPENBLAS_L2_SIZE``) are dropped before numpy loads, so both runtimes run on OpenBLAS's
own detection of this CPU, as a user's process would.

Run: ``.venv/bin/python bench/zoo_bench.py [--runs 20] [--rounds 3] [--ci] [--models a,b]
[--json PATH] [--png PATH]`` (``--replot --png PATH`` redraws the chart from ``--json``'s results).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # before numpy loads OpenBLAS
    os.environ.pop(_name, None)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]

from _common import blas_kernels, geometric_mean, print_table, ratio, settle, write_json  # noqa: E402

from zoo_cases import CASES, CI_MODELS, compare  # noqa: E402

RESULTS = BENCH / "results" / "zoo.json"
RUNS = 20  # timed samples per model and runtime
WARMUP = 2
BUDGET_S = 10.0  # timing time per model and runtime; slow models get fewer samples
ROUNDS = 3  # alternating timing rounds per model (bench_model)
MIN_RUNS = 3
SEED = 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _time(fn: Callable[[], Any], runs: int, budget_s: float) -> float:
    """Median seconds per call of ``fn``: ``WARMUP`` untimed calls (one for a slow model),
    then up to ``runs`` timed ones, as many as fit ``budget_s`` (at least ``MIN_RUNS``)."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    if first * WARMUP < budget_s / 4:  # a fast model: the rest of its warm-up
        for _ in range(WARMUP - 1):
            fn()
    count = int(min(runs, max(MIN_RUNS, budget_s / max(first, 1e-6))))
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def bench_model(key: str, runs: int, threads: int, budget_s: float,
                rounds: int = ROUNDS) -> dict[str, Any]:
    """One model's row: timings, agreement and status. The two runtimes are timed in
    ``rounds`` alternating rounds (onnxruntime, then ours); each one's time is the median
    of its rounds' medians and the ratio the median of the rounds' ratios, so a slow spell
    of a shared machine weighs on both sides of a ratio instead of on one runtime."""
    import onnxruntime

    import openacl
    from openacl.cli import zoo
    from openacl.errors import AclError

    case = CASES[key]
    row: dict[str, Any] = {"tolerance": case.tolerance, "ci": case.ci}
    try:
        path = str(zoo.fetch(key))
    except AclError as exc:
        return {**row, "status": f"not fetched: {_first_line(exc)}"}
    feeds = case.feeds(np.random.default_rng(SEED))
    row["feeds"] = {name: [str(value.dtype), list(value.shape)] for name, value in feeds.items()}
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    theirs = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    expected = theirs.run(None, feeds)
    start = time.perf_counter()
    try:
        ours = openacl.InferenceSession(path, threads=threads)
    except Exception as exc:  # noqa: BLE001 - the bench reports any failure and goes on
        return {**row, "status": f"load: {_first_line(exc)}"}
    row["load_s"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        got = ours.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        ours.close()
        return {**row, "status": f"run: {_first_line(exc)}"}
    row["first_run_s"] = time.perf_counter() - start
    outputs, wrong = {}, []
    for arg, mine, ref in zip(theirs.get_outputs(), got, expected, strict=False):
        agreement = compare(mine, ref, case.tolerance)
        outputs[arg.name] = {"cosine": agreement.cosine, "max_abs_diff": agreement.max_diff,
                             "bound": agreement.bound, "ok": agreement.ok}
        if not agreement.ok:
            wrong.append(f"{arg.name}: {agreement.detail}")
    if len(got) != len(expected):
        wrong.append(f"{len(got)} outputs, onnxruntime has {len(expected)}")
    row["outputs"] = outputs
    row["cosine"] = min((o["cosine"] for o in outputs.values()), default=0.0)
    row["max_abs_diff"] = max((o["max_abs_diff"] for o in outputs.values()), default=0.0)
    timings: dict[str, list[float]] = {"ours": [], "ort": []}
    for _ in range(rounds):  # adjacent in time: a neighbour's load hits both alike
        for name, session in (("ort", theirs), ("ours", ours)):
            settle()
            timings[name].append(_time(lambda s=session: s.run(None, feeds), runs,
                                       budget_s / rounds))
    row["ort_ms"] = float(np.median(timings["ort"])) * 1e3
    row["ours_ms"] = float(np.median(timings["ours"])) * 1e3
    row["ratio"] = float(np.median([ratio(mine, theirs) for mine, theirs
                                    in zip(timings["ours"], timings["ort"], strict=True)]))
    row["status"] = "ok" if not wrong else f"MISMATCH {wrong[0]}"
    ours.close()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="timed samples per runtime")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2,
                        help="CPU threads of both runtimes (default: the machine's cores)")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help="seconds of timing per model and runtime (slow models: fewer "
                             "samples)")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="alternating timing rounds per model (the ratio: their median)")
    parser.add_argument("--models", help="comma-separated zoo keys (default: all)")
    parser.add_argument("--ci", action="store_true", help="only zoo_cases.CI_MODELS")
    parser.add_argument("--json", default=str(RESULTS), help=f"default {RESULTS}")
    parser.add_argument("--png", help="also draw the ratios into this PNG (matplotlib)")
    parser.add_argument("--markdown", help="also write the ratios as a markdown table here")
    parser.add_argument("--replot", action="store_true",
                        help="measure nothing: draw --png / write --markdown from --json")
    args = parser.parse_args(argv)
    if args.replot:
        import json

        saved = json.loads(Path(args.json).read_text(encoding="utf-8"))
        if args.png:
            _chart({key: row["ratio"] for key, row in saved["results"].items()
                    if row.get("ratio")}, saved["threads"], args.png)
        if args.markdown:
            _markdown(saved["results"], args.markdown)
        return 0
    keys = (args.models.split(",") if args.models else
            list(CI_MODELS) if args.ci else list(CASES))
    unknown = [key for key in keys if key not in CASES]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(CASES)}")

    results, rows, notes = {}, [], []
    for key in keys:
        print(f"{key} ...", file=sys.stderr, flush=True)
        row = results[key] = bench_model(key, args.runs, args.threads, args.budget,
                                         args.rounds)
        status = row["status"]
        if status != "ok":
            notes.append(f"{key}: {status}")
        rows.append((key, row.get("ours_ms", ""), row.get("ort_ms", ""), row.get("ratio", ""),
                     row.get("load_s", ""), row.get("first_run_s", ""),
                     f"{row['cosine']:.6f}" if "cosine" in row else "",
                     f"{row['max_abs_diff']:.2g}" if "max_abs_diff" in row else "",
                     status.split(":")[0].split(" ")[0]))
    print_table(f"zoo: openacl vs onnxruntime ({args.threads} threads), median ms",
                ("model", "ours ms", "ort ms", "ratio", "load s", "1st run s", "cosine",
                 "max|diff|", "status"), rows)
    passed = sum(row["status"] == "ok" for row in results.values())
    ratios = {key: row["ratio"] for key, row in results.items() if row.get("ratio")}
    summary = {"geometric_mean_ratio": geometric_mean(list(ratios.values())) if ratios else None,
               "largest_ratio": max(ratios.items(), key=lambda kv: kv[1]) if ratios else None}
    print(f"\n{passed} of {len(results)} models agree with onnxruntime")
    if ratios:
        worst, largest = summary["largest_ratio"]
        print(f"geometric mean of the ratios {summary['geometric_mean_ratio']:.2f}, largest "
              f"{largest:.2f} ({worst})")
    print(f"numpy BLAS: {blas_kernels()}")
    for note in notes:
        print(f"  {note}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.json, "zoo", results, threads=args.threads, runs=args.runs,
               rounds=args.rounds,
               blas=blas_kernels(), **summary)
    if args.png and ratios:
        _chart(ratios, args.threads, args.png)
    if args.markdown:
        _markdown(results, args.markdown)
    return 0


def _markdown(results: dict[str, dict[str, Any]], path: str) -> None:
    """The ratios as a markdown table (the README's), slowest first."""
    rows = sorted(results.items(), key=lambda kv: -(kv[1].get("ratio") or 0))
    lines = ["| model | openacl ms | onnxruntime ms | ratio |", "|---|---|---|---|"]
    for key, row in rows:
        if row.get("ratio"):
            lines.append(f"| {key} | {row['ours_ms']:.3g} | {row['ort_ms']:.3g} | "
                         f"{row['ratio']:.2f} |")
        else:
            lines.append(f"| {key} | - | - | {row.get('status', '')} |")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


def _chart(ratios: dict[str, float], threads: int, path: str) -> None:
    """A horizontal bar per model: its latency ratio to onnxruntime (log scale, 1 marked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    order = sorted(ratios, key=ratios.get)
    figure, axes = plt.subplots(figsize=(8, 0.28 * len(order) + 1.2))
    colours = ["tab:green" if ratios[k] <= 1.0 else "tab:orange" if ratios[k] <= 1.5
               else "tab:red" for k in order]
    axes.barh(order, [ratios[k] for k in order], color=colours)
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log")
    ticks = [t for t in (0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 32)
             if min(ratios.values()) / 1.5 <= t <= max(ratios.values()) * 1.5]
    axes.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel(f"openacl latency / onnxruntime latency ({threads} threads; < 1: faster)")
    axes.set_title(f"zoo: {len(order)} real models, geometric mean "
                   f"{geometric_mean(list(ratios.values())):.2f}")
    axes.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
