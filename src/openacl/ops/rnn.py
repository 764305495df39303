"""Recurrent operators over a whole sequence: aclnnBidirectionLSTM.

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

The kernel projects every step's input at once (one product ``x @ W^T`` plus both biases),
then runs the recurrence: one C call over the whole sequence (``_native.lstm_sequence``:
the recurrent product, the gates and the state update fused, per step) where the extension
is built, else a numpy loop over the steps.
"""

from __future__ import annotations

import numpy as np

from openacl.errors import ACLNN_ERR_INNER_TILING_ERROR
from openacl.ops import native, promotion
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
        x = v.compute("x", compute)
        xp = array_module(x)
        y = xp.empty((steps, batch, directions * hidden), compute)
        h_all = xp.array(v.compute("initH", compute), dtype=compute, copy=True)
        c_all = xp.array(v.compute("initC", compute), dtype=compute, copy=True)
        for direction, names in enumerate(used):
            w = v.derive(("w", direction), names[:1],
                         lambda n=names[0]: v.compute(n, compute).T)
            projected = (x.reshape(steps * batch, features) @ w).reshape(steps, batch, width)
            if len(names) > 2:
                projected += v.derive(("bias", direction), names[2:], lambda n=names: (
                    v.compute(n[2], compute) + v.compute(n[3], compute)))
            _recurrence(v, names[1], compute, projected, h_all[direction], c_all[direction],
                        y, direction * hidden, reverse=direction == 1)
        v.write("yOut", y)
        v.write("outputHOut", h_all)
        v.write("outputCOut", c_all)
    return kernel


def _recurrence(v, recurrent: str, compute: np.dtype, projected, h, c, y, offset: int,
                reverse: bool) -> None:
    """Steps of one direction: ``h`` and ``c`` (B, H) updated in place, h_t into ``y``'s
    columns ``offset:offset + H``. The C recurrence takes R^T where it pays back: kept from
    the first run for a constant ``recurrent`` (a model's weight), made per call for a long
    sequence, else R itself (dot products per gate row)."""
    steps, batch, width = projected.shape
    hidden = width // LSTM_GATES
    lib = native.kernels()
    r = v.compute(recurrent, compute)
    if lib is not None and native.host_float32(projected, h, c, y):
        transposed = recurrent in v.constant or steps * batch >= PACK_AFTER_ROWS
        if transposed:
            r = v.derive(("r_t", recurrent), (recurrent,), lambda: np.ascontiguousarray(r.T))
        gates = np.empty((batch, width), np.float32)
        lib.lstm_sequence(np.ascontiguousarray(projected), np.ascontiguousarray(r), h, c, y,
                          gates, (steps, batch, hidden), (y.shape[2], offset), reverse,
                          transposed)
        return
    xp = array_module(projected)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        gates = projected[t] + h @ r.T
        i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(LSTM_GATES))
        c[...] = _sigmoid(f, xp) * c + _sigmoid(i, xp) * xp.tanh(g)
        h[...] = _sigmoid(o, xp) * xp.tanh(c)
        y[t, :, offset:offset + hidden] = h


def _sigmoid(x, xp):
    """1 / (1 + exp(-x)) without overflow warnings (exp of a large -x is inf: the result 0)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + xp.exp(-x))
