"""GPU benchmarks of the CUDA backend, each against its peer on the same GPU in one run.

1. Elementwise Add of 256M float32 elements (a repeatable aclnnAdd on a stream): achieved
   bandwidth (2 reads + 1 write) as a ratio to a device-to-device aclrtMemcpyAsync of the
   same bytes (1 read + 1 write). Target >= 0.8.
2. Matmul 8192^3 bfloat16 and 4096^3 float32 (repeatable aclnnMatmul): time ratio to
   ``cupy.matmul`` on the same operands. Target >= 0.95 of its speed.
3. H2D / D2H of 1 GiB with aclrtMemcpy from pinned (aclrtMallocHost) and pageable (numpy)
   host memory, GB/s, next to CuPy's own copies of the same buffers.
4. all-MiniLM-L6-v2 at batch 8 and 64, sequence 128: our InferenceSession on the GPU against
   PyTorch CUDA eager (transformers' BertModel of the same configuration) as a latency
   ratio. Target <= 1.0. The outputs are also compared with onnxruntime (CPU).

Device work is timed with CUDA events (ours through aclrtRecordEvent / EventElapsedTime,
the peers' through cupy/torch events), after warm-up, median over repeats.

Run (on a machine with an NVIDIA GPU and CuPy):
``python bench/gpu_bench.py --json results.json [--minilm PATH.onnx]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import openacl
from openacl import aclnn, rt
from openacl.runtime import memory

GIB = 1 << 30
BYTES_PER_GB = 1e9
ADD_ELEMENTS = 256 << 20
ADD_TARGET = 0.8
MATMUL_TARGET = 0.95
MINILM_TARGET = 1.0
REPEATS = 10
WARMUP = 3
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3


def _events_ms(stream: int, launch: Callable[[], None], repeats: int = REPEATS) -> float:
    """Median ms per launch, each timed between two of our events on ``stream``."""
    for _ in range(WARMUP):
        launch()
    rt.synchronize_stream(stream)
    start, end = rt.create_event(), rt.create_event()
    times = []
    for _ in range(repeats):
        rt.record_event(start, stream)
        launch()
        rt.record_event(end, stream)
        rt.synchronize_event(end)
        times.append(rt.event_elapsed_time(start, end))
    rt.destroy_event(start)
    rt.destroy_event(end)
    return statistics.median(times)


def _cupy_ms(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    import cupy

    for _ in range(WARMUP):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def bench_add(stream: int, elements: int = ADD_ELEMENTS) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    a = openacl.to_device(rng.standard_normal(elements, dtype=np.float32))
    b = openacl.to_device(rng.standard_normal(elements, dtype=np.float32))
    out = openacl.empty((elements,), np.float32)
    _, executor = aclnn.add_get_workspace_size(a, b, None, out)
    aclnn.set_executor_repeatable(executor)
    add_ms = _events_ms(stream, lambda: aclnn.add(0, 0, executor, stream))
    nbytes = elements * 4
    copy_ms = _events_ms(stream, lambda: rt.memcpy_async(out.data_ptr, nbytes, a.data_ptr,
                                                          nbytes, ACL_MEMCPY_DEVICE_TO_DEVICE,
                                                          stream))
    aclnn.add(0, 0, executor, stream)
    rt.synchronize_stream(stream)
    head = slice(0, 1 << 20)
    expected = a.numpy()[head] + b.numpy()[head]
    correct = bool(np.array_equal(out.numpy()[head], expected))
    add_gbs = 3 * nbytes / (add_ms / 1e3) / BYTES_PER_GB
    copy_gbs = 2 * nbytes / (copy_ms / 1e3) / BYTES_PER_GB
    aclnn.destroy_executor(executor)
    for t in (a, b, out):
        t.free()
    return {"elements": elements, "add_ms": add_ms, "add_GBps": add_gbs,
            "d2d_memcpy_ms": copy_ms, "d2d_memcpy_GBps": copy_gbs,
            "ratio": add_gbs / copy_gbs, "target": ADD_TARGET, "correct": correct}


def bench_matmul(stream: int, n: int, dtype: Any) -> dict[str, Any]:
    import cupy

    rng = np.random.default_rng(1)
    host_a = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    host_b = rng.standard_normal((n, n), dtype=np.float32).astype(dtype)
    a, b = openacl.to_device(host_a), openacl.to_device(host_b)
    out = openacl.empty((n, n), dtype)
    _, executor = aclnn.matmul_get_workspace_size(a, b, out, 0)
    aclnn.set_executor_repeatable(executor)
    ours_ms = _events_ms(stream, lambda: aclnn.matmul(0, 0, executor, stream))
    ca, cb = cupy.asarray(host_a), cupy.asarray(host_b)
    peer_ms = _cupy_ms(lambda: cupy.matmul(ca, cb))
    reference = cupy.matmul(ca.astype(cupy.float32), cb.astype(cupy.float32)).get()
    ours = out.numpy().astype(np.float32)
    relative = float(np.linalg.norm(ours - reference) / np.linalg.norm(reference))
    aclnn.destroy_executor(executor)
    for t in (a, b, out):
        t.free()
    flops = 2.0 * n ** 3
    return {"n": n, "dtype": str(np.dtype(dtype)), "ours_ms": ours_ms, "cupy_ms": peer_ms,
            "ours_TFLOPs": flops / (ours_ms / 1e3) / 1e12,
            "cupy_TFLOPs": flops / (peer_ms / 1e3) / 1e12,
            "ratio": peer_ms / ours_ms, "target": MATMUL_TARGET,
            "relative_error_vs_fp32": relative}


def _host_ms(fn: Callable[[], Any], repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def bench_copies(size: int = GIB) -> dict[str, Any]:
    import cupy

    device = rt.malloc(size)
    pinned = rt.malloc_host(size)
    pageable = np.ones(size, np.uint8)
    pageable_ptr = memory.register_buffer(pageable)
    cases = {
        "H2D pinned": lambda: rt.memcpy(device, size, pinned, size, ACL_MEMCPY_HOST_TO_DEVICE),
        "D2H pinned": lambda: rt.memcpy(pinned, size, device, size, ACL_MEMCPY_DEVICE_TO_HOST),
        "H2D pageable": lambda: rt.memcpy(device, size, pageable_ptr, size,
                                          ACL_MEMCPY_HOST_TO_DEVICE),
        "D2H pageable": lambda: rt.memcpy(pageable_ptr, size, device, size,
                                          ACL_MEMCPY_DEVICE_TO_HOST),
    }
    result = {name: size / (_host_ms(fn) / 1e3) / BYTES_PER_GB for name, fn in cases.items()}
    peer = cupy.empty(size, cupy.uint8)
    result["cupy H2D pageable"] = size / (_host_ms(lambda: peer.set(pageable)) / 1e3) \
        / BYTES_PER_GB
    result["cupy D2H pageable"] = size / (_host_ms(lambda: peer.get(out=pageable)) / 1e3) \
        / BYTES_PER_GB
    rt.free(device)
    rt.free_host(pinned)
    return {"bytes": size, "GBps": result}


def _torch_minilm(batch: int, seq: int):
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536,
                        max_position_embeddings=512)
    model = BertModel(config).eval().cuda()
    ids = torch.randint(0, 30522, (batch, seq), device="cuda")
    mask = torch.ones((batch, seq), dtype=torch.int64, device="cuda")

    def run():
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            return torch.nn.functional.normalize(pooled, dim=1)

    def timed() -> float:
        for _ in range(WARMUP):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)
    return timed


def bench_minilm(path: str, batch: int, seq: int = 128) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    feeds = {"input_ids": rng.integers(0, 30522, (batch, seq)).astype(np.int64),
             "attention_mask": np.ones((batch, seq), np.int64),
             "token_type_ids": np.zeros((batch, seq), np.int64)}
    shapes = {name: list(value.shape) for name, value in feeds.items()}
    session = openacl.InferenceSession(path, shapes)
    ours_ms = _host_ms(lambda: session.run(None, feeds), REPEATS)
    ours = session.run(None, feeds)[0]
    result: dict[str, Any] = {"batch": batch, "seq": seq, "ours_ms": ours_ms}
    try:
        import onnxruntime

        ort = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        golden = ort.run(None, feeds)[0]
        flat_a, flat_b = ours.reshape(-1).astype(np.float64), golden.reshape(-1)
        result["max_abs_diff_vs_onnxruntime"] = float(np.max(np.abs(ours - golden)))
        result["cosine_vs_onnxruntime"] = float(
            flat_a @ flat_b / (np.linalg.norm(flat_a) * np.linalg.norm(flat_b)))
    except Exception as exc:  # noqa: BLE001 - the agreement check is optional here
        result["onnxruntime_error"] = f"{type(exc).__name__}: {exc}"
    torch_ms = _torch_minilm(batch, seq)()
    result.update({"torch_cuda_eager_ms": torch_ms, "ratio": ours_ms / torch_ms,
                   "target": MINILM_TARGET})
    return result


def _section(results: dict[str, Any], name: str, fn: Callable[[], Any]) -> None:
    print(f"-- {name}", flush=True)
    start = time.perf_counter()
    try:
        results[name] = fn()
    except Exception as exc:  # noqa: BLE001 - record and go on: one run, many numbers
        traceback.print_exc()
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(results[name], indent=1, default=str), flush=True)
    print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the results to PATH")
    parser.add_argument("--minilm", metavar="ONNX", help="all-MiniLM-L6-v2.seq128.onnx")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (a smoke test of the script; no targets apply)")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    import cupy

    openacl.init({"backend": "cuda"})
    rt.set_device(0)
    stream = rt.create_stream()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "cupy": cupy.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "openacl": openacl.__version__,
    }
    import ml_dtypes

    if args.quick:
        sections = {
            "add_1M_f32": lambda: bench_add(stream, 1 << 20),
            "matmul_256_f32": lambda: bench_matmul(stream, 256, np.float32),
            "matmul_128_bf16": lambda: bench_matmul(stream, 128, ml_dtypes.bfloat16),
            "memcpy_16MiB": lambda: bench_copies(16 << 20),
        }
    else:
        sections = {
            "add_256M_f32": lambda: bench_add(stream),
            "matmul_4096_f32": lambda: bench_matmul(stream, 4096, np.float32),
            "matmul_8192_bf16": lambda: bench_matmul(stream, 8192, ml_dtypes.bfloat16),
            "memcpy_1GiB": bench_copies,
        }
    if args.minilm:
        sections["minilm_b8"] = lambda: bench_minilm(args.minilm, 8)
        sections["minilm_b64"] = lambda: bench_minilm(args.minilm, 64)
    for name, fn in sections.items():
        if name not in skip:
            _section(results, name, fn)
    rt.destroy_stream(stream)
    openacl.finalize()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print("\nsummary:")
    for name, value in results.items():
        if isinstance(value, dict) and "ratio" in value:
            print(f"  {name:20s} ratio {value['ratio']:.3f} (target {value['target']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
