"""InferenceSession.run_async (onnxruntime's callback form, plus a Future) and IOBinding
(device tensors in and out, no host round trip)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
)

WEIGHT = np.random.default_rng(5).standard_normal((32, 16)).astype(np.float32)
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


@pytest.fixture
def session():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [numpy_helper.from_array(WEIGHT, "w")])
    session = openacl.InferenceSession(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]))
    yield session
    session.close()


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 32)).astype(np.float32)


def test_run_async_calls_back_and_resolves_its_future(session):
    done = threading.Event()
    seen = []

    def callback(outputs, user_data, error):
        seen.append((outputs, user_data, error))
        done.set()

    x = _x(1)
    future = session.run_async(None, {"x": x}, callback, user_data="tag")
    x[:] = 0  # the feeds were copied: reusing them at once is safe
    assert done.wait(WAIT_S)
    (outputs, user_data, error), = seen
    expected = np.maximum(_x(1) @ WEIGHT, 0)
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-5)
    assert user_data == "tag" and error == ""
    np.testing.assert_allclose(future.result(WAIT_S)[0], expected, rtol=1e-5, atol=1e-5)
    futures = [session.run_async(["y"], {"x": _x(seed)}) for seed in range(4)]
    for seed, pending in enumerate(futures):
        np.testing.assert_allclose(pending.result(WAIT_S)[0], np.maximum(_x(seed) @ WEIGHT, 0),
                                   rtol=1e-5, atol=1e-5)


def test_run_async_reports_errors_to_the_callback_and_the_future(session):
    done, seen = threading.Event(), []
    future = session.run_async(None, {"x": np.ones((3, 32), np.float32)},
                               lambda o, d, e: (seen.append((o, e)), done.set()))
    assert done.wait(WAIT_S)
    assert seen[0][0] == [] and "has shape [3, 32]; the model takes [2, 32]" in seen[0][1]
    with pytest.raises(AclError) as info:
        future.result(WAIT_S)
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH


def test_io_binding_runs_on_device_tensors(session):
    x = openacl.to_device(_x(2))
    binding = session.io_binding()
    binding.bind_input("x", x)
    binding.bind_output("y")  # allocated by the session
    session.run_with_iobinding(binding)
    (y,) = binding.get_outputs()
    assert isinstance(y, openacl.Tensor)
    np.testing.assert_allclose(y.numpy(), np.maximum(_x(2) @ WEIGHT, 0), rtol=1e-5, atol=1e-5)
    mine = openacl.empty((2, 16), np.float32)
    binding.bind_output("y", mine)
    stream = openacl.Stream()
    session.run_with_iobinding(binding, stream)  # enqueued: ready after synchronize
    stream.synchronize()
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], np.maximum(_x(2) @ WEIGHT, 0),
                               rtol=1e-5, atol=1e-5)
    assert binding.get_outputs()[0] is mine


def test_io_binding_refuses_what_does_not_fit(session):
    binding = session.io_binding()
    with pytest.raises(AclError) as info:
        binding.bind_input("nope", openacl.to_device(_x(0)))
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "x" in info.value.message
    with pytest.raises(AclError) as info:
        session.run_with_iobinding(binding)
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH and "not bound" in str(info.value)
    binding.bind_input("x", openacl.to_device(np.ones((2, 32), np.float64)))
    with pytest.raises(AclError) as info:
        session.run_with_iobinding(binding)
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH and "float64" in str(info.value)
    binding.bind_input("x", openacl.to_device(_x(0)))
    binding.bind_output("y", openacl.empty((3, 16), np.float32))
    with pytest.raises(AclError) as info:
        session.run_with_iobinding(binding)
    assert info.value.code == ACL_ERROR_MODEL_OUTPUT_NOT_MATCH


def test_io_binding_refuses_strided_tensors(session):
    base = openacl.to_device(np.ascontiguousarray(_x(3).T))  # (32, 2)
    transposed = openacl.Tensor(openacl.create_tensor(
        [2, 32], openacl.DataType.ACL_FLOAT, [1, 2], 0, openacl.ACL_FORMAT_ND, [32, 2],
        base.data_ptr), keepalive=base)
    binding = session.io_binding()
    binding.bind_input("x", transposed)
    with pytest.raises(AclError) as info:
        session.run_with_iobinding(binding)
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH and "strided" in str(info.value)


def test_run_async_reports_any_exception(session, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("kernel bug")

    monkeypatch.setattr(session, "run", broken)
    done, seen = threading.Event(), []
    future = session.run_async(None, {"x": _x(0)}, lambda o, d, e: (seen.append(e), done.set()))
    assert done.wait(WAIT_S) and seen == ["kernel bug"]
    with pytest.raises(RuntimeError):
        future.result(WAIT_S)
