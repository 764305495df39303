"""Recurrent operators over a whole sequence: aclnnBidirectionLSTM and aclnnGRU.

Signature as CANN's ``aclnn_bidirection_lstm.h`` (ops-nn ``rnn/bidirection_lstm``): ``x``
(T, B, I), ``initH`` / ``initC`` (D, B, H) with D = 2 when ``bidirection``, ``wIh`` (4H, I),
``wHh`` (4H, H), the biases (4H) when ``isbias``, the reverse direction's weights when
``bidirection``; ``numLayers`` 1 and ``batchFirst`` false only (CANN's limits); outputs
``yOut`` (T, B, D * H), ``outputHOut`` / ``outputCOut`` (D, B, H). The gate blocks are
PyTorch's ``torch.nn.LSTM`` order (input, forget, cell, output), as its ``weight_ih_l0``.
CANN's kernel takes float16 (Atlas inference products); the CPU also takes float32. Every
dtype is computed in float32 and rounded once into the outputs. Shape errors are CANN's
ACLNN_ERR_INNER_TILING_ERROR (its tiling checks them); dtype and attribute errors
ACLNN_ERR_PARAM_INVALID.

aclnnGRU is ``torch.nn.GRU`` as CANN's ``aclnn_gru.h`` declares it (ops-nn ``rnn/gru``): a
``params`` list of ``W_ih, W_hh[, b_ih, b_hh]`` per layer and direction (gate order r, z,
n; the reset gate applied after the hidden product, ONNX's ``linear_before_reset`` = 1),
``hx`` optional, fixed-length sequences (a ``batchSizes`` PackedSequence is refused), its
parameter errors ACLNN_ERR_PARAM_INVALID as CANN documents them.

The kernels project every step's input at once (one product ``x @ W^T`` plus both biases),
then run the recurrence: one C call over the whole sequence (``_native.lstm_sequence``:
the recurrent product, the gates and the state update fused, per step) where the extension
is built, else a numpy loop over the steps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from openacl.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import native, promotion
from openacl.ops.activation import sigmoid
from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.registry import register

__all__: list[str] = []

LSTM_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32)})
LSTM_GATES = 4
PACK_AFTER_ROWS = 16  # steps * batch from which transposing R per call pays back
WEIGHTS = (("wIh", "wHh", "bIhOptional", "bHhOptional"),
           ("wIhReverseOptional", "wHhReverseOptional", "bIhReverseOptional",
            "bHhReverseOptional"))


def _check_shape(c: Call, name: str, shape: tuple[int, ...]) -> None:
    if c.tensor(name).shape != shape:
        raise c.fail(name, f"shape must be {list(shape)}", ACLNN_ERR_INNER_TILING_ERROR)


@register("BidirectionLSTM",
          "x: tensor, initH: tensor, initC: tensor, wIh: tensor, wHh: tensor, "
          "bIhOptional: tensor?, bHhOptional: tensor?, wIhReverseOptional: tensor?, "
          "wHhReverseOptional: tensor?, bIhReverseOptional: tensor?, "
          "bHhReverseOptional: tensor?, numLayers: int = 1, isbias: bool = True, "
          "batchFirst: bool = False, bidirection: bool = False, yOut: tensor!, "
          "outputHOut: tensor!, outputCOut: tensor!")
def bidirection_lstm(c: Call) -> Kernel:
    """A one-layer LSTM, forward or both directions, over the whole sequence."""
    dtype = c.check_dtype("x", LSTM_DTYPES)
    if c["numLayers"] != 1:
        raise c.fail("numLayers", "only 1 is supported (CANN's limit)")
    if c["batchFirst"]:
        raise c.fail("batchFirst", "only false is supported (CANN's limit)")
    directions = 2 if c["bidirection"] else 1
    shape = c.tensor("x").shape
    if len(shape) != 3:
        raise c.fail("x", "must be 3-D (time_step, batch_size, input_size)",
                     ACLNN_ERR_INNER_TILING_ERROR)
    steps, batch, features = shape
    if len(c.tensor("initH").shape) != 3:
        raise c.fail("initH", "must be 3-D (directions, batch_size, hidden_size)",
                     ACLNN_ERR_INNER_TILING_ERROR)
    hidden = c.tensor("initH").shape[2]
    state = (directions, batch, hidden)
    width = LSTM_GATES * hidden
    used = [WEIGHTS[d] if c["isbias"] else WEIGHTS[d][:2] for d in range(directions)]
    for name in ("initH", "initC"):
        c.check_dtype(name, (dtype,))
        _check_shape(c, name, state)
    for names in used:
        for name, expected in zip(names, ((width, features), (width, hidden), (width,),
                                          (width,)), strict=False):
            if c[name] is None:
                raise c.fail(name, "is required here (isbias / bidirection ask for it)")
            c.check_dtype(name, (dtype,))
            _check_shape(c, name, expected)
    if hidden == 0:
        raise c.fail("initH", "hidden_size must be positive", ACLNN_ERR_INNER_TILING_ERROR)
    c.check_out("yOut", (steps, batch, directions * hidden), dtype, exact_dtype=True)
    c.check_out("outputHOut", state, dtype, exact_dtype=True)
    c.check_out("outputCOut", state, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _lstm_plan(v, used, hidden) or functools.partial(general, v))()

    def general(v) -> None:
        x = v.compute("x", compute)
        xp = array_module(x)
        y = xp.empty((steps, batch, directions * hidden), compute)
        h_all = xp.array(v.compute("initH", compute), dtype=compute, copy=True)
        c_all = xp.array(v.compute("initC", compute), dtype=compute, copy=True)
        for direction, names in enumerate(used):
            w = v.derive(("w", direction), names[:1],
                         lambda n=names[0]: v.compute(n, compute).T)
            packed = v.derive(("packed w", direction), names[:1],
                              lambda w=w: native.pack(w, native.RIGHT))
            projected = native.packed_product(x.reshape(steps * batch, features), packed,
                                              w).reshape(steps, batch, width)
            if len(names) > 2:
                projected += v.derive(("bias", direction), names[2:], lambda n=names: (
                    v.compute(n[2], compute) + v.compute(n[3], compute)))
            _recurrence(v, names[1], compute, projected, h_all[direction], c_all[direction],
                        y, direction * hidden, reverse=direction == 1)
        v.write("yOut", y)
        v.write("outputHOut", h_all)
        v.write("outputCOut", c_all)
    return kernel


def _lstm_plan(v, used: list[tuple[str, ...]], hidden: int) -> Callable[[], None] | None:
    """BidirectionLSTM's plan (``Views.plan``) for float32 host arrays and constant weights
    (a model's): per direction one packed GEMM for the input projection with both biases
    fused, into a buffer made once, and one C recurrence writing straight into the outputs;
    None where it does not apply (the general kernel runs)."""
    lib = native.kernels()
    x, y, h_out, c_out = v["x"], v["yOut"], v["outputHOut"], v["outputCOut"]
    h0, c0 = v["initH"], v["initC"]
    names = [name for direction in used for name in direction]
    if lib is None or not native.host_float32(x, y, h_out, c_out, h0, c0) or \
            not v.constant.issuperset(names) or \
            any(np.may_share_memory(out, source) for out in (y, h_out, c_out)
                for source in (x, h0, c0)):
        return None
    steps, batch, features = x.shape
    width = LSTM_GATES * hidden
    projections, recurrences = [], []
    for direction, weights in enumerate(used):
        if not native.host_float32(*(v[name] for name in weights)):
            return None
        packed = v.derive(("packed w", direction), weights[:1],
                          lambda n=weights[0]: native.pack(v[n].T, native.RIGHT))
        bias = v.derive(("bias", direction), weights[2:], lambda n=weights: (
            v[n[2]] + v[n[3]])) if len(weights) > 2 else None
        projected = np.empty((steps * batch, width), np.float32)
        project = native.rows_times_packed_call(x.reshape(steps * batch, features),
                                                lambda packed=packed: packed, projected,
                                                bias=bias)
        if project is None:
            return None
        r, transposed = _recurrent_weights(v, ("r_t", weights[1]), weights[1:2],
                                           v[weights[1]], steps, batch)
        projections.append(project)
        recurrences.append((projected.reshape(steps, batch, width), r, h_out[direction],
                            c_out[direction], y, np.empty((batch, width), np.float32),
                            (steps, batch, hidden), (y.shape[2], direction * hidden),
                            direction == 1, transposed))

    def run() -> None:
        np.copyto(h_out, h0)
        np.copyto(c_out, c0)
        for project in projections:
            project()
        lib.lstm_sequences(recurrences)  # the directions at once (disjoint outputs)
    return run


def _recurrence(v, recurrent: str, compute: np.dtype, projected, h, c, y, offset: int,
                reverse: bool) -> None:
    """Steps of one direction: ``h`` and ``c`` (B, H) updated in place, h_t into ``y``'s
    columns ``offset:offset + H`` (the C recurrence's R: ``_recurrent_weights``)."""
    steps, batch, width = projected.shape
    hidden = width // LSTM_GATES
    lib = native.kernels()
    r = v.compute(recurrent, compute)
    if lib is not None and native.host_float32(projected, h, c, y):
        r, transposed = _recurrent_weights(v, ("r_t", recurrent), (recurrent,), r, steps, batch)
        gates = np.empty((batch, width), np.float32)
        lib.lstm_sequence(np.ascontiguousarray(projected), r, h, c, y, gates,
                          (steps, batch, hidden), (y.shape[2], offset), reverse, transposed)
        return
    xp = array_module(projected)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        gates = projected[t] + h @ r.T
        i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(LSTM_GATES))
        c[...] = sigmoid(f) * c + sigmoid(i) * xp.tanh(g)
        h[...] = sigmoid(o) * xp.tanh(c)
        y[t, :, offset:offset + hidden] = h


def _recurrent_weights(v, key: tuple, names: tuple[str, ...], r, steps: int,
                       batch: int) -> tuple[np.ndarray, bool]:
    """R as the C recurrence takes it, and whether it is transposed: R^T where that pays
    back (kept from the first run when the inputs ``names`` are constant, a model's weight;
    made per call for a long sequence), else R itself (dot products per gate row)."""
    transposed = v.constant.issuperset(names) or steps * batch >= PACK_AFTER_ROWS
    if transposed:
        r = v.derive(key, names, lambda: np.ascontiguousarray(r.T))
    return np.ascontiguousarray(r), transposed


# -- GRU --------------------------------------------------------------------------------------
GRU_GATES = 3
GRU_TRAIN_OUTPUTS = ("rOut", "zOut", "nOut", "hnOut", "hOut")


@register("GRU",
          "input: tensor, params: tensors, hx: tensor?, batchSizes: tensor?, "
          "hasBias: bool = True, numLayers: int = 1, dropout: float = 0.0, "
          "train: bool = False, bidirection: bool = False, batchFirst: bool = False, "
          "output: tensor!, hy: tensor!, rOut: tensors!?, zOut: tensors!?, nOut: tensors!?, "
          "hnOut: tensors!?, hOut: tensors!?")
def gru(c: Call) -> Kernel:
    """``torch.nn.GRU`` (CANN's aclnnGRU, fixed-length mode): stacked layers, both
    directions, ``hx`` optional (zeros), ``dropout`` without effect (as CANN says); with
    ``train`` the per-step gates r, z, n, ``W_hn h + b_hn`` and h, one (T, B, H) tensor per
    layer and direction."""
    dtype = c.check_dtype("input", LSTM_DTYPES)
    if c["batchSizes"] is not None:
        raise c.fail("batchSizes", "packed sequences (PackedSequence mode) are not "
                                   "supported: give null and a (T, B, I) input")
    layers = c["numLayers"]
    if layers < 1:
        raise c.fail("numLayers", "must be >= 1")
    shape = c.tensor("input").shape
    if len(shape) != 3:
        raise c.fail("input", "must be 3-D (time_step, batch_size, input_size), or "
                              "(batch_size, time_step, input_size) with batchFirst")
    steps, batch, features = (shape[1], shape[0], shape[2]) if c["batchFirst"] else shape
    directions = 2 if c["bidirection"] else 1
    per_direction = 4 if c["hasBias"] else 2
    params = c["params"]
    if params is None:
        raise c.fail("params", "is null", ACLNN_ERR_PARAM_NULLPTR)
    expected = 2 * (2 if c["hasBias"] else 1) * directions * layers
    if len(params) != expected:
        raise c.fail("params", f"must hold {expected} tensors (W_ih, W_hh[, b_ih, b_hh] per "
                               f"layer and direction); it holds {len(params)}")
    if any(p.ndim != 2 for p in params[:2]) or params[1].shape[1] * GRU_GATES != \
            params[1].shape[0]:
        raise c.fail("params", "params[1] (W_hh of layer 0) must be (3 * hidden_size, "
                               "hidden_size)")
    hidden = params[1].shape[1]
    if hidden == 0:
        raise c.fail("params", "hidden_size must be positive")
    width = GRU_GATES * hidden
    for index, tensor in enumerate(params):
        layer, rest = divmod(index, per_direction * directions)
        position = rest % per_direction
        inputs = features if layer == 0 else directions * hidden
        want = [(width, inputs), (width, hidden), (width,), (width,)][position]
        if tensor.dtype != dtype:
            raise c.fail("params", f"params[{index}] has dtype {tensor.dtype}; it must be "
                                   f"input's {dtype}")
        if tensor.shape != want:
            raise c.fail("params", f"params[{index}] has shape {list(tensor.shape)}; it must "
                                   f"be {list(want)}")
    state = (layers * directions, batch, hidden)
    if c["hx"] is not None:
        c.check_dtype("hx", (dtype,))
        if c.tensor("hx").shape != state:
            raise c.fail("hx", f"shape must be {list(state)}")
    out_shape = (batch, steps, directions * hidden) if c["batchFirst"] else \
        (steps, batch, directions * hidden)
    c.check_out("output", out_shape, dtype, exact_dtype=True)
    c.check_out("hy", state, dtype, exact_dtype=True)
    train = bool(c["train"])
    for name in GRU_TRAIN_OUTPUTS:
        if train:
            c.check_out_list(name, [(steps, batch, hidden)] * (directions * layers), dtype)
        elif c[name] is not None:
            raise c.fail(name, "must be null when train is false")
    compute = promotion.compute_dtype(dtype)
    batch_first, has_bias = bool(c["batchFirst"]), bool(c["hasBias"])

    def kernel(v) -> None:
        x = v.compute("input", compute)
        if batch_first:
            x = x.transpose(1, 0, 2)
        xp = array_module(x)
        arrays = v["params"]

        def param(index: int):
            # a weight in the compute dtype, widened once when the params are a model's constants
            return v.derive(("param", index), ("params",),
                            lambda: native.cast(arrays[index], compute))

        h_all = xp.zeros(state, compute) if v.get("hx") is None else xp.array(
            v.compute("hx", compute), dtype=compute, copy=True)
        gates_out = {name: v[name] for name in GRU_TRAIN_OUTPUTS} if train else None
        layer_input = x
        for layer in range(layers):
            y = xp.empty((steps, batch, directions * hidden), compute)
            native_calls = []  # the directions' C recurrences, run at once below
            for direction in range(directions):
                index = (layer * directions + direction) * per_direction
                weight = param(index).T
                packed = v.derive(("packed", index), ("params",),
                                  lambda w=weight: native.pack(w, native.RIGHT))
                projected = native.packed_product(layer_input.reshape(steps * batch, -1),
                                                  packed, weight).reshape(steps, batch, width)
                b_hh = None
                if has_bias:
                    projected += param(index + 2)
                    b_hh = param(index + 3)
                slot = layer * directions + direction
                call = _gru_recurrence(v, ("params", index + 1), param(index + 1), b_hh,
                                       projected, h_all[slot], y, direction * hidden,
                                       direction == 1, None if gates_out is None else
                                       {name: gates_out[name][slot] for name in gates_out})
                if call is not None:
                    native_calls.append(call)
            if native_calls:  # disjoint outputs: each its h and its columns of y
                native.kernels().gru_sequences(native_calls)
            layer_input = y
        v.write("output", layer_input.transpose(1, 0, 2) if batch_first else layer_input)
        v.write("hy", h_all)
    return kernel


def _gru_recurrence(v, key: tuple, r, b_hh, projected, h, y, offset: int, reverse: bool,
                    gates_out: dict | None) -> tuple | None:
    """One direction of one layer: ``h`` (B, H) updated in place, h_t into ``y``'s columns
    ``offset:offset + H``. Where the C recurrence takes it, the arguments of its call (the
    caller runs a layer's directions at once: ``gru_sequences``); else run here (the numpy
    loop; with ``gates_out`` (train) every step's gates written there) and None."""
    steps, batch, width = projected.shape
    hidden = width // GRU_GATES
    lib = native.kernels()
    if gates_out is None and lib is not None and native.host_float32(projected, h, y) and (
            b_hh is None or native.host_float32(b_hh)):
        r, transposed = _recurrent_weights(v, ("r_t", *key), ("params",), r, steps, batch)
        gates = np.empty((batch, width), np.float32)
        return (np.ascontiguousarray(projected), r, b_hh, h, y, gates, (steps, batch, hidden),
                (y.shape[2], offset), reverse, transposed)
    xp = array_module(projected)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        recurrent = h @ r.T
        if b_hh is not None:
            recurrent = recurrent + b_hh
        x_r, x_z, x_n = (projected[t][:, k * hidden:(k + 1) * hidden] for k in range(3))
        h_r, h_z, h_n = (recurrent[:, k * hidden:(k + 1) * hidden] for k in range(3))
        reset, update = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
        candidate = xp.tanh(x_n + reset * h_n)
        h[...] = (1 - update) * candidate + update * h
        y[t, :, offset:offset + hidden] = h
        if gates_out is not None:
            for name, value in (("rOut", reset), ("zOut", update), ("nOut", candidate),
                                ("hnOut", h_n), ("hOut", h)):
                gates_out[name][t] = value
