"""The CPU thread setting (runtime/threads.py): init's num_threads, OPENACL_NUM_THREADS,
InferenceSession(threads=N), and numpy's BLAS pool kept to it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
threadpoolctl = pytest.importorskip("threadpoolctl")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError  # noqa: E402
from openacl.ops import native  # noqa: E402
from openacl.runtime import core, threads  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_blas_threads():
    """Tests change the process's BLAS pool: put it back as it was."""
    with threadpoolctl.threadpool_limits(limits=None, user_api="blas"):
        yield
    threads._current = None  # the pool was restored behind threads.apply's back


def _blas_threads() -> set[int]:
    return {info["num_threads"] for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas"}


def _matmul_model():
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_default_is_the_cores_this_process_may_use(threaded_runtime, monkeypatch):
    for name in threads.BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert core.current().config.num_threads is None
    assert threads.configured() == threads.available_cores() >= 1


def test_a_blas_count_the_user_gave_is_respected(threaded_runtime, monkeypatch):
    """OPENBLAS_NUM_THREADS (then OMP_NUM_THREADS) is the default where openacl's own
    setting is not given; a bad value is ignored."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.configured() == 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "lots")
    assert threads.configured() == 3
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    assert threads.configured() == threads.available_cores()


def test_init_setting_and_its_environment_variable(monkeypatch):
    openacl.init({"num_threads": 1})
    try:
        assert threads.configured() == 1
    finally:
        openacl.finalize()
    monkeypatch.setenv("OPENACL_NUM_THREADS", "3")
    openacl.init({"num_threads": 1})
    try:
        assert threads.configured() == 3
    finally:
        openacl.finalize()


def _run_threads() -> int:
    """The threads a run's products use: the C kernels' pool (numpy's BLAS then held at one
    thread, so the two never spin against each other), else numpy's BLAS pool."""
    lib = native.kernels()
    if lib is not None:
        assert _blas_threads() <= {1}
        return lib.pool_threads()
    (count,) = _blas_threads()
    return count


def test_a_session_runs_with_its_threads(threaded_runtime):
    if not _blas_threads():
        pytest.skip("numpy's BLAS is not one threadpoolctl controls")
    x = np.ones((64, 64), np.float32)
    one = openacl.InferenceSession(_matmul_model(), threads=1)
    default = openacl.InferenceSession(_matmul_model(), threads=3)
    try:
        np.testing.assert_allclose(one.run(None, {"x": x})[0], 64.0)
        assert _run_threads() == 1
        np.testing.assert_allclose(default.run(None, {"x": x})[0], 64.0)
        assert _run_threads() == 3
        one.run(None, {"x": x})
        assert _run_threads() == 1
    finally:
        one.close()
        default.close()


@pytest.mark.parametrize("value", [0, -1, 2.0, "2", True, threads.MAX_THREADS + 1])
def test_bad_thread_counts_are_refused(threaded_runtime, value):
    with pytest.raises(AclError) as info:
        openacl.InferenceSession(_matmul_model(), threads=value)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'threads'" in info.value.message and repr(value) in info.value.message
