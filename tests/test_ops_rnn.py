"""aclnnBidirectionLSTM against torch.nn.LSTM (float64, rounded once to the dtype) under
CANN's precision standard, on both kernel paths (the C recurrence and numpy's), and its
phase-1 errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import assert_close
from openacl.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclError
from openacl.runtime import memory

ACL_MEMCPY_HOST_TO_DEVICE = 1

pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.ascontiguousarray(array))


def _lstm_case(steps, batch, features, hidden, bidirectional, bias, dtype, scale=1.0, seed=0):
    """(inputs in CANN's argument order, torch's float64 outputs rounded to dtype)."""
    rng = np.random.default_rng(seed)
    directions = 2 if bidirectional else 1

    def data(*shape):
        return (rng.uniform(-1, 1, shape) * scale).astype(dtype)

    x = data(steps, batch, features)
    h0, c0 = data(directions, batch, hidden), data(directions, batch, hidden)
    weights = []
    for _ in range(2):
        weights.extend([data(4 * hidden, features), data(4 * hidden, hidden),
                        data(4 * hidden), data(4 * hidden)])
    for d in range(2):
        if not bias:
            weights[4 * d + 2:4 * d + 4] = [None, None]
        if d >= directions:
            weights[4 * d:4 * d + 4] = [None] * 4
    arrays = [x, h0, c0, *weights]
    return arrays, _reference(arrays, bias, bidirectional)


def _reference(arrays, bias, bidirectional):
    """torch.nn.LSTM in float64 on ``arrays`` (CANN's argument order), rounded to their
    dtype: (y, h, c)."""
    x, h0, c0 = arrays[:3]
    features, hidden = x.shape[2], h0.shape[2]
    reference = torch.nn.LSTM(features, hidden, bias=bias, bidirectional=bidirectional,
                              dtype=torch.float64)
    with torch.no_grad():
        for d in range(2 if bidirectional else 1):
            w_ih, w_hh, b_ih, b_hh = arrays[3 + 4 * d:7 + 4 * d]
            suffix = "_l0" + ("_reverse" if d else "")
            for name, array in (("weight_ih", w_ih), ("weight_hh", w_hh), ("bias_ih", b_ih),
                                ("bias_hh", b_hh)):
                if array is not None:
                    getattr(reference, name + suffix).copy_(torch.from_numpy(
                        array.astype(float)))
        y, (h, c) = reference(torch.from_numpy(x.astype(float)),
                              (torch.from_numpy(h0.astype(float)),
                               torch.from_numpy(c0.astype(float))))
    return [t.numpy().astype(x.dtype) for t in (y, h, c)]


def _run(arrays, bias, bidirectional, num_layers=1, batch_first=False):
    tensors = [None if a is None else _dev(a) for a in arrays]
    return openacl.ops.bidirection_lstm(*tensors, num_layers, bias, batch_first, bidirectional)


@pytest.mark.parametrize("steps,batch,features,hidden", [(9, 3, 5, 16), (1, 1, 4, 8),
                                                          (4, 2, 7, 33)], ids=str)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_matches_torch(steps, batch, features, hidden, bidirectional, bias):
    arrays, golden = _lstm_case(steps, batch, features, hidden, bidirectional, bias,
                                np.float32)
    for got, want, name in zip(_run(arrays, bias, bidirectional), golden, ("y", "h", "c"),
                               strict=True):
        assert_close(got.numpy(), want, f"lstm {name}")


def test_lstm_float16_computes_in_float32_and_rounds_once():
    arrays, golden = _lstm_case(6, 2, 5, 12, True, True, np.float16, seed=3)
    for got, want, name in zip(_run(arrays, True, True), golden, ("y", "h", "c"), strict=True):
        assert_close(got.numpy(), want, f"lstm fp16 {name}")


def test_lstm_saturated_gates_stay_finite():
    """Pre-activations of +-100: the gates saturate to 0 and 1, tanh to +-1, never NaN."""
    arrays, golden = _lstm_case(5, 2, 6, 8, False, True, np.float32, scale=20.0, seed=5)
    results = [r.numpy() for r in _run(arrays, True, False)]
    assert all(np.isfinite(r).all() for r in results)
    for got, want in zip(results, golden, strict=True):
        assert_close(got, want)


def test_lstm_nan_input_propagates():
    arrays, _ = _lstm_case(3, 1, 4, 8, False, True, np.float32)
    arrays[0][1, 0, 2] = np.nan
    y, h, c = (r.numpy() for r in _run(arrays, True, False))
    assert np.isfinite(y[0]).all() and np.isnan(y[1:]).all() and np.isnan(h).all()


def _error(arrays, bias=True, bidirectional=False, **kwargs):
    with pytest.raises(AclError) as info:
        _run(arrays, bias, bidirectional, **kwargs)
    return info.value


def test_lstm_refuses_what_cann_refuses():
    arrays, _ = _lstm_case(3, 2, 4, 8, False, True, np.float32)
    error = _error(arrays, num_layers=2)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "numLayers" in error.message
    error = _error(arrays, batch_first=True)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "batchFirst" in error.message
    both, _ = _lstm_case(3, 2, 4, 8, True, True, np.float32)
    error = _error(both[:7] + [None] * 4, bidirectional=True)  # no reverse weights given
    assert error.code == ACLNN_ERR_PARAM_INVALID and "wIhReverseOptional" in error.message


def test_lstm_shape_errors_name_the_argument():
    arrays, _ = _lstm_case(3, 2, 4, 8, False, True, np.float32)
    bad = list(arrays)
    bad[4] = np.zeros((32, 7), np.float32)  # wHh must be (4H, H) = (32, 8)
    error = _error(bad)
    assert error.code == ACLNN_ERR_INNER_TILING_ERROR and "wHh" in error.message
    bad = list(arrays)
    bad[2] = np.zeros((1, 3, 8), np.float32)  # initC's batch differs from initH's
    error = _error(bad)
    assert error.code == ACLNN_ERR_INNER_TILING_ERROR and "initC" in error.message
    bad = list(arrays)
    bad[0] = bad[0].astype(np.float64)
    error = _error(bad)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'x'" in error.message


def test_a_repeatable_call_reads_weights_changed_between_launches():
    """A plain aclnn call promises nothing about its inputs (``Views.constant`` is empty):
    launched again after wHh's memory changed, it computes with the new values, not with
    a transposed copy kept from the first launch."""
    from openacl import aclnn

    arrays, _ = _lstm_case(20, 1, 4, 8, False, True, np.float32)  # long: R^T per call
    tensors = [None if a is None else _dev(a) for a in arrays]
    y, h, c = (openacl.empty(shape, np.float32) for shape in ((20, 1, 8), (1, 1, 8),
                                                              (1, 1, 8)))
    ws, exe = aclnn.bidirection_lstm_get_workspace_size(*tensors, 1, True, False, False,
                                                        y, h, c)
    aclnn.set_executor_repeatable(exe)
    aclnn.bidirection_lstm(0, ws, exe, 0)
    openacl.rt.synchronize_stream(0)
    first = y.numpy()
    changed = list(arrays)
    changed[4] = (arrays[4] * -0.5).astype(np.float32)
    memory.memcpy(tensors[4].data_ptr, tensors[4].nbytes, memory.register_buffer(changed[4]),
                  changed[4].nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
    aclnn.bidirection_lstm(0, ws, exe, 0)
    openacl.rt.synchronize_stream(0)
    assert not np.allclose(y.numpy(), first)
    assert_close(y.numpy(), _reference(changed, True, False)[0])
    aclnn.destroy_executor(exe)


def test_the_model_engine_binds_weights_as_constant():
    """The engine promises its initializers never change: the LSTM step's views name the
    weights constant, so R^T is made once, at the first run, and kept."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    weights = {"W": rng.standard_normal((1, 32, 5)).astype(np.float32),
               "R": rng.standard_normal((1, 32, 8)).astype(np.float32)}
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=8)
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = openacl.InferenceSession(model)
    try:
        x = rng.standard_normal((3, 1, 5)).astype(np.float32)
        first = session.run(None, {"x": x})[0]
        engine = session.engine
        step = [i for i, s in enumerate(engine.lowered.steps) if s.op == "BidirectionLSTM"][0]
        views = engine._host.kernels[step].args[0]
        assert {"wIh", "wHh"} <= views.constant and "x" not in views.constant
        derived = dict(views.derived)
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], first)
        assert all(views.derived[key] is value for key, value in derived.items())
    finally:
        session.close()
