"""Dynamic shapes: what a new signature costs, what a seen one costs, what a cache holds.

For MiniLM (batch dynamic, sequence exported at 128) and PP-OCRv4 det (N, H, W dynamic) from
../shared/models (skipped with a note when absent), in one run:
* first run at a new signature: ``InferenceSession(path)`` without shapes, the wall time of
  the first ``run`` at each of a few new shapes (the specialisation is built there), next
  to onnxruntime's first run at that shape;
* steady state at a seen signature: that session vs the static path (the model compiled
  for those shapes, ``compile_onnx`` + ``Engine``, as ``input_shapes=`` converted it before
  the staged engine) vs onnxruntime, medians over repeated runs, printed as ratios;
* peak and current RSS of a fresh process (``VmHWM`` / ``VmRSS``) holding 1 and 4 cached
  specialisations.

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (a
user's machine has neither; here they force old OpenBLAS kernels) and prints the BLAS
kernel numpy then uses (threadpoolctl).
Run: ``.venv/bin/python bench/dynamic_bench.py [--json PATH] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHARED_MODELS = Path(__file__).resolve().parent.parent.parent / "shared" / "models"
FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
RUNS = 20
WARMUP = 2

_RSS_SCRIPT = """
import sys, numpy as np
from openacl.model.session import InferenceSession
path, count, kind, here = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, here)
from dynamic_bench import feeds
session = InferenceSession(path)
for index in range(count):
    session.run(None, feeds(kind, index))
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(int(status["VmHWM"].split()[0]) // 1024, int(status["VmRSS"].split()[0]) // 1024)
"""


def feeds(kind: str, index: int) -> dict[str, np.ndarray]:
    """The ``index``-th signature of a model: MiniLM batch x seq, PP-OCR det H x W."""
    rng = np.random.default_rng(index)
    if kind == "minilm":
        batch, seq = [(1, 128), (2, 128), (4, 128), (8, 128), (3, 128)][index % 5]  # seq fixed
        ids = rng.integers(1000, 5000, (batch, seq)).astype(np.int64)
        return {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids)}
    side = [(640, 640), (480, 640), (320, 320), (640, 480), (960, 640)][index % 5]
    return {"x": rng.random((1, 3, *side), dtype=np.float32)}


def _median_ms(fn, runs: int) -> float:
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def _rss(path: str, count: int, kind: str) -> tuple[int, int] | None:
    here = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, path, str(count), kind, here],
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return None
    peak, current = done.stdout.split()[-2:]
    return int(peak), int(current)


def main() -> None:
    if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
        env = {k: v for k, v in os.environ.items() if k not in FORCED_BLAS}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--quick", action="store_true", help="MiniLM only, fewer runs")
    args = parser.parse_args()
    import onnxruntime
    from _common import blas_kernels

    from openacl.model.converter import compile_onnx
    from openacl.model.engine import Engine
    from openacl.model.session import InferenceSession

    print(f"numpy BLAS: {blas_kernels()}")
    models = [("minilm", SHARED_MODELS / "all-MiniLM-L6-v2.seq128.onnx"),
              ("ppocr-det", SHARED_MODELS / "ch_PP-OCRv4_det_infer.onnx")]
    if args.quick:
        models = models[:1]
    runs = 5 if args.quick else RUNS
    results = {}
    for kind, path in models:
        if not path.exists():
            print(f"{kind}: {path} is absent, skipped")
            continue
        kind_feeds = "minilm" if kind == "minilm" else "ppocr"
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        theirs = onnxruntime.InferenceSession(str(path), options)
        ours = InferenceSession(str(path))
        first = []
        for index in range(4):
            sample = feeds(kind_feeds, index)
            start = time.perf_counter()
            ours.run(None, sample)
            ours_ms = (time.perf_counter() - start) * 1e3
            start = time.perf_counter()
            theirs.run(None, sample)
            theirs_ms = (time.perf_counter() - start) * 1e3
            shape = list(next(iter(sample.values())).shape)
            first.append({"shape": shape, "openacl_first_ms": ours_ms, "ort_first_ms": theirs_ms})
            print(f"{kind} {shape}: first run {ours_ms:.0f} ms (onnxruntime {theirs_ms:.0f} ms)")
        sample = feeds(kind_feeds, 0)
        _, lowered, plan = compile_onnx(str(path), {k: v.shape for k, v in sample.items()})
        static = Engine(lowered, plan)
        staged_ms = _median_ms(lambda s=sample, m=ours: m.run(None, s), runs)
        static_ms = _median_ms(lambda s=sample, m=static: m.run(s), runs)
        ort_ms = _median_ms(lambda s=sample, m=theirs: m.run(None, s), runs)
        static.close()
        ours.close()
        rss1 = _rss(str(path), 1, kind_feeds)
        rss4 = _rss(str(path), 4, kind_feeds)
        results[kind] = {"first_runs": first, "seen_signature_ms": staged_ms,
                         "static_path_ms": static_ms, "onnxruntime_ms": ort_ms,
                         "seen_vs_static": staged_ms / static_ms,
                         "seen_vs_onnxruntime": staged_ms / ort_ms,
                         "rss_mb_1_specialisation": rss1, "rss_mb_4_specialisations": rss4}
        print(f"{kind}: seen signature {staged_ms:.2f} ms, static path {static_ms:.2f} ms "
              f"({staged_ms / static_ms:.2f}x), onnxruntime {ort_ms:.2f} ms "
              f"({staged_ms / ort_ms:.2f}x)")
        print(f"{kind}: RSS MB (peak, current) with 1 specialisation {rss1}, with 4 {rss4}")
    if args.json:
        Path(args.json).write_text(json.dumps({"blas": blas_kernels(), **results}, indent=2)
                                   + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
