"""Model engine vs onnxruntime (and PyTorch where a model has a torch twin), in one run.

Models: the seed's tiny model (x[1,32] @ W[32,64], then ReLU) and an MLP (batch 64,
784-1024-1024-10 with ReLU), both built here with onnx.helper; plus the real models in
../shared/models when present (MiniLM batch 1 and 8, seq 128; PP-OCRv4 det 1x3x640x640),
skipped with a note otherwise. For each: latency medians with spread (p10-p90) over repeated
samples, one runtime after the other (a sample of a fast model times a batch of calls
lasting at least 5 ms), as a ratio to onnxruntime's ``run``; and peak RSS of a fresh
process per runtime that loads the model and runs it (``VmHWM``: ``ru_maxrss`` can carry
the parent's across exec):
ours on the .om converted beforehand (the deployment path: convert once, like ATC) and on
the .onnx converted in the process, onnxruntime on the .onnx.

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (a
user's machine sets neither) and prints the kernels numpy's BLAS then uses (threadpoolctl).

Run: ``.venv/bin/python bench/engine_bench.py [--json PATH] [--markdown PATH] [--png PATH]
[--quick]`` (``--png`` needs matplotlib: ``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import os
import sys

FORCED_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(name in os.environ for name in FORCED_BLAS):  # measure what a user's machine runs
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in FORCED_BLAS})

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import settle  # noqa: E402

SHARED_MODELS = Path(__file__).resolve().parent.parent.parent / "shared" / "models"
RUNS = 30  # timed samples per model and runtime (after WARMUP calls)
WARMUP = 3
MIN_SAMPLE_S = 0.005  # a sample times enough calls to last this long (fast models)
TARGETS = {"tiny": 1.0, "mlp": 1.0, "minilm-b1": 1.0, "minilm-b8": 1.0, "ppocr-det": 1.0}

_RSS_SCRIPT = """
import sys, numpy as np
kind, path, feeds_path = sys.argv[1:4]
feeds = dict(np.load(feeds_path))
if kind == "openacl":
    from openacl.model.session import InferenceSession
    session = InferenceSession(path, input_shapes={k: v.shape for k, v in feeds.items()})
else:
    import onnxruntime
    options = onnxruntime.SessionOptions(); options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(path, options)
for _ in range(5):
    session.run(None, feeds)
# VmHWM (peak RSS of this process image); ru_maxrss may carry the parent's across exec
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(hwm.split()[1]) // 1024)
"""


def _tiny_model(rng):
    from onnx import TensorProto, helper, numpy_helper

    weight = rng.standard_normal((32, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(weight, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal((1, 32)).astype(np.float32)}


def _mlp_model(rng):
    from onnx import TensorProto, helper, numpy_helper

    sizes = [784, 1024, 1024, 10]
    nodes, inits, current = [], [], "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        w = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        b = np.zeros(n_out, np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [current, f"W{i}", f"b{i}"], [f"g{i}"]))
        current = f"g{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [current], [f"r{i}"]))
            current = f"r{i}"
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 784])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT,
                                                             [64, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal((64, 784)).astype(np.float32)}


def _real_models(rng, quick: bool):
    models = []
    minilm = SHARED_MODELS / "all-MiniLM-L6-v2.seq128.onnx"
    if minilm.exists():
        for batch in ((1,) if quick else (1, 8)):
            ids = rng.integers(1000, 5000, (batch, 128)).astype(np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                     "token_type_ids": np.zeros_like(ids)}
            models.append((f"minilm-b{batch}", str(minilm), feeds,
                           {k: v.shape for k, v in feeds.items()}))
    ppocr = SHARED_MODELS / "ch_PP-OCRv4_det_infer.onnx"
    if ppocr.exists() and not quick:
        x = rng.random((1, 3, 640, 640), dtype=np.float32)
        models.append(("ppocr-det", str(ppocr), {"x": x}, {"x": x.shape}))
    return models


def _time(fn, runs: int) -> tuple[float, float, float]:
    """Per-call (median, p10, p90) seconds of ``fn`` over ``runs`` samples. A sample times a
    batch of calls lasting at least ``MIN_SAMPLE_S`` (one call of a microsecond model is
    below the clock's and the scheduler's noise). The runtimes are timed one after the
    other, never interleaved: each keeps worker threads spinning for a while after a call
    (OpenBLAS's, onnxruntime's pool), and alternating samples measured each slowed by the
    other's (onnxruntime's MiniLM 15 -> 45 ms)."""
    for _ in range(WARMUP):
        fn()
    start = time.perf_counter()
    fn()
    batch = max(1, int(MIN_SAMPLE_S / max(time.perf_counter() - start, 1e-7)))
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - start) / batch)
    samples.sort()
    return (statistics.median(samples), samples[len(samples) // 10],
            samples[(len(samples) * 9) // 10])


def _peak_rss(kind: str, path: str, feeds: dict) -> int | None:
    with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as handle:
        np.savez(handle, **feeds)
    try:
        done = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, kind, path, handle.name],
                              capture_output=True, text=True, timeout=600, check=False)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    finally:
        os.unlink(handle.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--markdown", help="write a markdown table here")
    parser.add_argument("--png", help="draw the latency ratios and peak RSS here (matplotlib)")
    parser.add_argument("--quick", action="store_true", help="fewer runs, small models only")
    args = parser.parse_args()
    import onnx
    import onnxruntime

    from openacl.model.converter import convert_onnx
    from openacl.model.session import InferenceSession

    rng = np.random.default_rng(0)
    runs = 10 if args.quick else RUNS
    cases = []
    workdir = Path(tempfile.mkdtemp(prefix="openacl-bench-"))
    for name, build in (("tiny", _tiny_model), ("mlp", _mlp_model)):
        model, feeds = build(rng)
        path = workdir / f"{name}.onnx"
        onnx.save(model, path)
        cases.append((name, str(path), feeds, None))
    cases += _real_models(rng, args.quick)
    rows, results = [], {}
    from openacl.errors import AclError

    for name, path, feeds, shapes in cases:
        try:
            ours = InferenceSession(path, input_shapes=shapes)
        except AclError as exc:  # a model the converter cannot take yet: say why
            results[name] = {"error": str(exc)}
            rows.append((name, "not converted", "", "", "", "", str(exc)[:80]))
            continue
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        theirs = onnxruntime.InferenceSession(path, options)
        expected = theirs.run(None, feeds)[0]
        got = ours.run(None, feeds)[0]
        diff = float(np.abs(got.astype(np.float64) - expected).max())
        settle()
        t_ours = _time(lambda s=ours, f=feeds: s.run(None, f), runs)
        settle()
        t_theirs = _time(lambda s=theirs, f=feeds: s.run(None, f), runs)
        ours.close()
        ratio = t_ours[0] / t_theirs[0]
        rss_ours = _peak_rss("openacl", path, feeds)
        om_path = str(workdir / f"{name}.om")
        convert_onnx(path, om_path, {k: v.shape for k, v in feeds.items()})
        rss_om = _peak_rss("openacl", om_path, feeds)  # the deployment path: convert once
        rss_theirs = _peak_rss("onnxruntime", path, feeds)
        target = TARGETS.get(name)
        verdict = "" if target is None else ("PASS" if ratio <= target else "SHORT")
        results[name] = {"openacl_ms": t_ours[0] * 1e3, "openacl_p10_p90_ms":
                         [t_ours[1] * 1e3, t_ours[2] * 1e3], "onnxruntime_ms": t_theirs[0] * 1e3,
                         "ratio": ratio, "target": target, "max_abs_diff": diff,
                         "peak_rss_mb": {"openacl_om": rss_om, "openacl_onnx": rss_ours,
                                         "onnxruntime": rss_theirs}}
        rows.append((name, f"{t_ours[0] * 1e3:.3f} ({t_ours[1] * 1e3:.3f}-"
                     f"{t_ours[2] * 1e3:.3f})", f"{t_theirs[0] * 1e3:.3f}", f"{ratio:.2f}",
                     f"<= {target} {verdict}" if target else "", f"{diff:.1e}",
                     f"{rss_om} / {rss_ours} / {rss_theirs}"))
    headers = ("model", "openacl ms (p10-p90)", "onnxruntime ms", "ratio", "target",
               "max |diff|", "peak RSS MB (.om / .onnx / ort)")
    table = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    print("\n".join(table))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(table) + "\n", encoding="utf-8")
    from _common import blas_kernels

    print(f"numpy BLAS: {blas_kernels()}")
    if args.json:
        Path(args.json).write_text(json.dumps({**results, "blas": blas_kernels()}, indent=2)
                                   + "\n", encoding="utf-8")
    if args.png:
        _chart({k: v for k, v in results.items() if "ratio" in v}, Path(args.png))


def _chart(results: dict, path: Path) -> None:
    """Two panels: latency as a multiple of onnxruntime's (with each target), and peak RSS
    of a fresh process per runtime."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(11, 0.6 * len(names) + 1.8))
    rows = np.arange(len(names))
    speed.barh(rows, [results[n]["ratio"] for n in names], color="#4c72b0")
    for row, name in enumerate(names):
        target = results[name]["target"]
        if target:
            speed.plot([target, target], [row - 0.4, row + 0.4], color="#c44e52", lw=2)
        speed.text(results[name]["ratio"], row, f" {results[name]['ratio']:.2f}x",
                   va="center", fontsize=9)
    speed.axvline(1.0, color="grey", lw=0.8, ls="--")
    speed.set_yticks(rows, names)
    speed.invert_yaxis()
    speed.set_xlabel("latency / onnxruntime's (lower is better; red: target)")
    height = 0.27
    for offset, (runtime, label, colour) in enumerate((
            ("openacl_om", "openacl (.om)", "#4c72b0"),
            ("openacl_onnx", "openacl (.onnx, converted in process)", "#8da0cb"),
            ("onnxruntime", "onnxruntime", "#dd8452"))):
        values = [results[n]["peak_rss_mb"][runtime] or 0 for n in names]
        memory.barh(rows + (offset - 1) * height, values, height, label=label,
                    color=colour)
    memory.set_yticks(rows, names)
    memory.invert_yaxis()
    memory.set_xlabel("peak RSS of a fresh process, MB")
    memory.legend(loc="upper right", fontsize=8)
    figure.suptitle("OpenACL engine vs onnxruntime (CPU)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
