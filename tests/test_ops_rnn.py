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


# -- GRU ----------------------------------------------------------------------------------------
def _gru_case(steps, batch, features, hidden, layers, bidirectional, bias, batch_first,
              dtype=np.float32, seed=0, with_hx=True):
    """(input, params, hx) and torch.nn.GRU's float64 (output, hy) rounded to dtype."""
    rng = np.random.default_rng(seed)
    directions = 2 if bidirectional else 1
    torch.manual_seed(seed)  # the weights: torch's init, not whatever state earlier tests left
    reference = torch.nn.GRU(features, hidden, layers, bias=bias, batch_first=batch_first,
                             bidirectional=bidirectional, dtype=torch.float64)
    params = [p.detach().numpy().astype(dtype) for p in reference.all_weights for p in p]
    with torch.no_grad():  # the rounded weights back into the reference
        for p, array in zip((p for w in reference.all_weights for p in w), params,
                            strict=True):
            p.copy_(torch.from_numpy(array.astype(float)))
    shape = (batch, steps, features) if batch_first else (steps, batch, features)
    x = rng.uniform(-1, 1, shape).astype(dtype)
    hx = rng.uniform(-1, 1, (layers * directions, batch, hidden)).astype(dtype)
    with torch.no_grad():
        y, hy = reference(torch.from_numpy(x.astype(float)),
                          torch.from_numpy(hx.astype(float)) if with_hx else None)
    return (x, params, hx if with_hx else None), [y.numpy().astype(dtype),
                                                  hy.numpy().astype(dtype)]


def _run_gru(x, params, hx, bias, layers, bidirectional, batch_first, train=False):
    return openacl.ops.gru(_dev(x), [_dev(p) for p in params],
                           None if hx is None else _dev(hx), None, bias, layers, 0.0, train,
                           bidirectional, batch_first)


@pytest.mark.parametrize("layers,bidirectional,bias,batch_first,with_hx", [
    (1, False, True, False, True), (1, True, True, False, True), (2, True, False, True, True),
    (2, False, True, False, False), (1, True, True, True, False)],
    ids=["forward", "bidirectional", "2-layers-no-bias-batch-first", "2-layers-no-hx",
         "bidirectional-batch-first-no-hx"])
def test_gru_matches_torch(layers, bidirectional, bias, batch_first, with_hx):
    (x, params, hx), golden = _gru_case(7, 3, 5, 16, layers, bidirectional, bias, batch_first,
                                        with_hx=with_hx)
    result = _run_gru(x, params, hx, bias, layers, bidirectional, batch_first)
    for got, want, name in zip(result, golden, ("output", "hy"), strict=True):
        assert_close(got.numpy(), want, f"gru {name}")


def test_gru_float16_and_a_long_sequence():
    (x, params, hx), golden = _gru_case(24, 2, 4, 8, 1, True, True, False, np.float16, seed=2)
    for got, want in zip(_run_gru(x, params, hx, True, 1, True, False), golden, strict=True):
        assert_close(got.numpy(), want, "gru fp16")


def test_gru_train_outputs_are_the_steps_gates():
    """train: r, z, n, W_hn h + b_hn and h of every step, checked against a float64
    recomputation of the gates from torch's own hidden states."""
    (x, params, hx), (y, _) = _gru_case(5, 2, 3, 4, 1, False, True, False, seed=4)
    result = _run_gru(x, params, hx, True, 1, False, False, train=True)
    output, hy, r_out, z_out, n_out, hn_out, h_out = result
    w_ih, w_hh, b_ih, b_hh = (p.astype(float) for p in params)
    previous = np.concatenate([hx.astype(float), y.astype(float)[:-1]])  # h_{t-1} per step
    gx = x.astype(float) @ w_ih.T + b_ih
    gh = previous @ w_hh.T + b_hh
    sig = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    r, z = sig(gx[..., :4] + gh[..., :4]), sig(gx[..., 4:8] + gh[..., 4:8])
    n = np.tanh(gx[..., 8:] + r * gh[..., 8:])
    for got, want, name in ((r_out[0], r, "r"), (z_out[0], z, "z"), (n_out[0], n, "n"),
                            (hn_out[0], gh[..., 8:], "hn"), (h_out[0], y, "h")):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_gru_refusals_name_the_argument():
    (x, params, hx), _ = _gru_case(3, 2, 4, 8, 1, False, True, False)
    with pytest.raises(AclError) as info:
        _run_gru(x, params[:3], hx, True, 1, False, False)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'params'" in info.value.message
    with pytest.raises(AclError) as info:
        _run_gru(x, params, hx[:, :1], True, 1, False, False)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'hx'" in info.value.message
    bad = list(params)
    bad[1] = np.zeros((24, 7), np.float32)
    with pytest.raises(AclError) as info:
        _run_gru(x, bad, hx, True, 1, False, False)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "params[1]" in info.value.message
    with pytest.raises(AclError) as info:
        openacl.ops.gru(_dev(x), [_dev(p) for p in params], _dev(hx),
                        _dev(np.array([3, 3], np.int64)), True, 1, 0.0, False, False, False)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "batchSizes" in info.value.message
