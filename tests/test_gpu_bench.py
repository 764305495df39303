"""bench/gpu_bench.py runs end to end (quick sizes) over the fake CuPy: the GPU check is one
prepared script, so it must not fail on its own bugs when a GPU is finally there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import fake_cupy

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_gpu_bench_quick_over_fake_cupy(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("gpu_bench", None)
    with fake_cupy.installed():
        import gpu_bench

        assert gpu_bench.main(["--quick", "--json", str(tmp_path / "gpu.json")]) == 0
    results = json.loads((tmp_path / "gpu.json").read_text())
    for name in ("add_1M_f32", "matmul_256_f32", "matmul_128_bf16", "memcpy_16MiB"):
        assert "error" not in results[name], (name, results[name])
    assert results["add_1M_f32"]["correct"] is True
    assert results["matmul_256_f32"]["relative_error_vs_fp32"] < 1e-5
    assert results["matmul_128_bf16"]["relative_error_vs_fp32"] < 1e-2
    assert set(results["memcpy_16MiB"]["GBps"]) >= {"H2D pinned", "D2H pageable"}
    assert results["gpu"].startswith("fake GPU")


def test_model_carry_round_trip(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    sys.path.insert(0, str(BENCH))
    try:
        import gpu_model_carry
    finally:
        sys.path.remove(str(BENCH))
    import numpy as np

    weight = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    mask = np.full((4,), -3.4e38, np.float32)  # too big for float16: must stay float32
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 128])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(mask, "mask")])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), source)
    gpu_model_carry.pack(str(source), str(tmp_path / "p.onnx"))
    gpu_model_carry.unpack(str(tmp_path / "p.onnx"), str(tmp_path / "u.onnx"))
    packed = {t.name: t.data_type for t in onnx.load(tmp_path / "p.onnx").graph.initializer}
    assert packed == {"w": onnx.TensorProto.FLOAT16, "mask": onnx.TensorProto.FLOAT}
    restored = {t.name: numpy_helper.to_array(t)
                for t in onnx.load(tmp_path / "u.onnx").graph.initializer}
    assert restored["w"].dtype == np.float32
    np.testing.assert_array_equal(restored["w"], weight.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(restored["mask"], mask)


def test_gpu_check_uses_the_projects_venv(tmp_path):
    """The check runs the project's .venv interpreter (where the README installs openacl),
    not whatever python3 is first on PATH, like the examples' run.sh."""
    import shutil
    import subprocess

    (tmp_path / "bench").mkdir()
    shutil.copy(BENCH / "gpu_check.sh", tmp_path / "bench")
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    calls = tmp_path / "calls.log"
    venv_python.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    venv_python.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "PYTHON"}
    done = subprocess.run(["bash", str(tmp_path / "bench" / "gpu_check.sh"),
                           str(tmp_path / "results")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "python: .venv/bin/python" in done.stdout
    assert "bench/gpu_bench.py" in calls.read_text()  # the bench ran with the venv's python
