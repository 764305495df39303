"""Latency on a busy machine: openacl and onnxruntime with and without a competing process.

A small deployment box or a CI runner shares its cores: here one other process spins on a
core (``while True: pass``) while each runtime runs each model. For every model: the median
and p99 latency of ours with the default threads (the cores this process may use), ours with
``threads=1``, and onnxruntime (``--threads`` intra-op threads, default the cores), quiet and
contended; the ratios ours / onnxruntime under the same conditions, and our p99 / median.
Samples are taken one runtime after the other (never interleaved: each keeps worker threads
spinning for a while after a call).

Models: an MLP (batch 64, 784-1024-1024-10, built here), MiniLM b1 and PP-OCRv4 det from
``../shared/models`` when present, and zoo models (``--models``; fetched into the cache).

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (a
user's machine sets neither) and prints the kernels numpy's BLAS then uses (threadpoolctl).

Run: ``.venv/bin/python bench/contended_bench.py [--samples 40] [--models a,b] [--json PATH]``
"""

from __future__ import annotations

import os
import sys

FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in FORCED_BLAS})

import argparse  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]

from _common import blas_kernels, print_table, write_json  # noqa: E402

SHARED_MODELS = BENCH.parent.parent / "shared" / "models"
RESULTS = BENCH / "results" / "contended.json"
SAMPLES = 40
WARMUP = 3
DEFAULT_ZOO = ("silero-vad-v5", "ppocr-v4-rec", "nudenet")
SPIN = "while True: pass"


def _samples(fn: Callable[[], Any], count: int) -> tuple[float, float]:
    """(median, p99) seconds of ``count`` calls after warm-up."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), float(np.percentile(times, 99))


def _mlp(rng: np.random.Generator) -> tuple[Any, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper, numpy_helper

    sizes, nodes, inits, name = (784, 1024, 1024, 10), [], [], "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [name, f"w{i}"], [f"m{i}"]))
        name = f"m{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [name], [f"r{i}"]))
            name = f"r{i}"
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 784])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString(), {"x": rng.standard_normal((64, 784)).astype(np.float32)}


def _cases(zoo_keys: list[str]) -> list[tuple[str, Any, dict[str, np.ndarray]]]:
    from openacl.cli import zoo
    from zoo_cases import CASES

    rng = np.random.default_rng(0)
    cases = [("mlp", *_mlp(rng))]
    minilm = SHARED_MODELS / "all-MiniLM-L6-v2.seq128.onnx"
    if minilm.exists():
        ids = rng.integers(0, 30000, (1, 128), dtype=np.int64)
        cases.append(("minilm-b1", str(minilm), {"input_ids": ids,
                                                 "attention_mask": np.ones_like(ids),
                                                 "token_type_ids": np.zeros_like(ids)}))
    det = SHARED_MODELS / "ch_PP-OCRv4_det_infer.onnx"
    if det.exists():
        from openacl.cli.zoo import synthetic_text_page

        cases.append(("ppocr-det", str(det), {"x": synthetic_text_page(640)}))
    for key in zoo_keys:
        cases.append((key, str(zoo.fetch(key)), CASES[key].feeds(np.random.default_rng(0))))
    return cases


def _measure(cases, samples: int, threads: int) -> dict[str, dict[str, tuple[float, float]]]:
    import onnxruntime

    import openacl

    results: dict[str, dict[str, tuple[float, float]]] = {}
    for name, model, feeds in cases:
        row = results[name] = {}
        for label, count in (("ours", None), ("ours-1", 1)):
            session = openacl.InferenceSession(model, threads=count)
            row[label] = _samples(lambda s=session, f=feeds: s.run(None, f), samples)
            session.close()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        theirs = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        row["ort"] = _samples(lambda s=theirs, f=feeds: s.run(None, f), samples)
        del theirs
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=SAMPLES, help="timed calls per case")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2,
                        help="onnxruntime's intra-op threads (default: the machine's cores)")
    parser.add_argument("--models", default=",".join(DEFAULT_ZOO),
                        help="comma-separated zoo keys (default: %(default)s)")
    parser.add_argument("--json", default=str(RESULTS), help=f"default {RESULTS}")
    args = parser.parse_args(argv)
    cases = _cases([key for key in args.models.split(",") if key])
    print(f"numpy BLAS: {blas_kernels()}", file=sys.stderr)
    quiet = _measure(cases, args.samples, args.threads)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.5)
        busy = _measure(cases, args.samples, args.threads)
    finally:
        spinner.kill()
        spinner.wait()
    rows, results = [], {}
    for name, _, _ in cases:
        entry = results[name] = {}
        for phase, measured in (("quiet", quiet[name]), ("contended", busy[name])):
            ours, single, ort = measured["ours"], measured["ours-1"], measured["ort"]
            entry[phase] = {
                "ours_ms": ours[0] * 1e3, "ours_p99_ms": ours[1] * 1e3,
                "ours_1_thread_ms": single[0] * 1e3, "ours_1_thread_p99_ms": single[1] * 1e3,
                "ort_ms": ort[0] * 1e3, "ort_p99_ms": ort[1] * 1e3,
                "ratio": ours[0] / ort[0], "ratio_1_thread": single[0] / ort[0],
                "ours_p99_over_median": ours[1] / ours[0]}
            e = entry[phase]
            rows.append((name, phase, f"{e['ours_ms']:.3g}", f"{e['ours_1_thread_ms']:.3g}",
                         f"{e['ort_ms']:.3g}", f"{e['ratio']:.2f}", f"{e['ratio_1_thread']:.2f}",
                         f"{e['ours_p99_over_median']:.1f}"))
    print_table(f"openacl vs onnxruntime ({args.threads} threads), quiet and with one "
                f"competing busy process; median ms",
                ("model", "machine", "ours", "ours 1 thread", "ort", "ratio", "ratio 1 thread",
                 "our p99/median"), rows)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.json, "contended", results, threads=args.threads, samples=args.samples,
               blas=blas_kernels())
    return 0


if __name__ == "__main__":
    sys.exit(main())
