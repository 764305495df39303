"""ONNX RNN, GRU and LSTM over their (static) sequence, onto aclnn operators.

An LSTM with constant weights, the default activations, no peepholes, no clip, layout 0 and
a full sequence, forward or bidirectional (what PyTorch and Keras export) is one
aclnnBidirectionLSTM step: its gate blocks reordered once, here, from ONNX's (i, o, f, c) to
PyTorch's (i, f, g, o), and the whole recurrence one kernel call. A GRU under the same
conditions with ``linear_before_reset`` = 1 (PyTorch's GRU) is one aclnnGRU step, its gates
reordered from ONNX's (z, r, h) to PyTorch's (r, z, n). Everything else is unrolled:

The input projection of every time step is one Matmul (``X @ W^T`` over all steps at once);
each step then adds ``H @ R^T`` and the biases, splits the gates, applies the activations
and updates the state; the outputs are concatenated views of the per-step states. Constant
weights, recurrence weights, biases and peepholes are transposed and summed at conversion
time.

Weights given as graph inputs (ONNX's node tests do) are sliced and transposed by steps
that run before the sequence. Supported: the default activations (Sigmoid / Tanh),
``direction`` forward, reverse and
bidirectional, ``layout`` 0 and 1, GRU's ``linear_before_reset``, LSTM peepholes, and a
``sequence_lens`` that is constant and full. Refused by name: other activations, ``clip``,
``input_forget``, ragged sequence lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, RefList, lowering, unsupported
from openacl.model.onnx_ops import KEEP_DTYPE, _constant_input

ONNX_TO_TORCH_LSTM = (0, 2, 3, 1)  # ONNX's gate blocks i, o, f, c in PyTorch's i, f, g, o
ONNX_TO_TORCH_GRU = (1, 0, 2)  # ONNX's z, r, h in PyTorch's r, z, n
LSTM_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32)})
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}  # gate blocks in W, R (ONNX orders: GRU z r h;
# LSTM i o f c)
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                       "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
ATTRIBUTES = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
              "hidden_size", "layout", "linear_before_reset", "input_forget"}


@dataclass
class _Weights:
    """One direction's constants, already in the layout the steps use."""

    w_t: str  # W^T (input, gates * hidden)
    r_t: str  # R^T (hidden, gates * hidden)
    bias: str | None  # Wb + Rb (gates * hidden), or Wb alone for GRU's h gate (see below)
    recurrent_h_bias: str | None  # GRU linear_before_reset: Rbh, added to H @ Rh^T
    peepholes: tuple[str, str, str] | None  # LSTM (Pi, Po, Pf)


def _check(node: Node) -> None:
    for name in node.attrs:
        if name not in ATTRIBUTES:
            raise unsupported(node, f"attribute {name!r}")
    activations = node.attrs.get("activations")
    if activations is not None:
        directions = 2 if node.attrs.get("direction") == "bidirectional" else 1
        if [str(a) for a in activations] != DEFAULT_ACTIVATIONS[node.op_type] * directions:
            raise unsupported(node, f"activations {list(activations)}")
    if "clip" in node.attrs:
        raise unsupported(node, "clip")
    if int(node.attrs.get("input_forget", 0)):
        raise unsupported(node, "input_forget=1")


def _input(node: Node, index: int) -> str | None:
    return node.inputs[index] if len(node.inputs) > index and node.inputs[index] else None


def _weights(node: Node, b: Builder, direction: int, hidden: int) -> _Weights:
    """One direction's weights: transposed and summed now when they are constants (the
    usual model), or by steps that run before the sequence when they are computed."""
    gates = GATES[node.op_type]
    dtype = b.value(node.inputs[0]).dtype
    lbr = node.op_type == "GRU" and int(node.attrs.get("linear_before_reset", 0))
    width = gates * hidden
    w_t = _transposed(b, node.inputs[1], direction, dtype)
    r_t = _transposed(b, node.inputs[2], direction, dtype)
    combined = recurrent_h = None
    if _input(node, 3):
        bias = b.constant_of(node.inputs[3])
        if bias is not None:
            wb, rb = bias[direction][:width], bias[direction][width:]
            total = (wb + rb).astype(dtype)
            if lbr:
                total[2 * hidden:] = wb[2 * hidden:]  # Rbh goes inside r * (H Rh^T + Rbh)
                recurrent_h = b.constant(rb[2 * hidden:].astype(dtype), "rbh")
            combined = b.constant(total, "bias")
        else:
            wb, rb = _pieces(b, node.inputs[3], direction, (width, width), dtype)
            combined = b.binary("Add", wb, rb, dtype)
            if lbr:
                _, _, wbh = _pieces(b, wb, None, (hidden,) * 3, dtype)
                _, _, recurrent_h = _pieces(b, rb, None, (hidden,) * 3, dtype)
                parts = _pieces(b, combined, None, (hidden,) * 3, dtype)
                combined = b.temp((width,), dtype)
                b.call("Cat", tensors=RefList([parts[0], parts[1], wbh]), dim=0,
                       out=Ref(combined))
    peepholes = None
    if node.op_type == "LSTM" and _input(node, 7):
        peepholes = tuple(_pieces(b, node.inputs[7], direction, (hidden,) * 3, dtype))
    return _Weights(w_t, r_t, combined, recurrent_h, peepholes)


def _transposed(b: Builder, name: str, direction: int, dtype: np.dtype) -> str:
    """W[direction]^T (or R's) as a (columns, rows) value."""
    constant = b.constant_of(name)
    if constant is not None:
        return b.constant(np.ascontiguousarray(constant[direction].T.astype(dtype)), "w_t")
    _, rows, columns = b.value(name).shape
    matrix = b.temp((rows, columns), dtype)
    b.call("Slice", self=Ref(name), dim=0, start=direction, end=direction + 1, step=1,
           out=Ref(_viewed(b, matrix, (1, rows, columns), dtype)))
    transposed = b.temp((columns, rows), dtype)
    b.call("Permute", self=Ref(matrix), dims=(1, 0), out=Ref(transposed))
    return transposed


def _pieces(b: Builder, name: str, direction: int | None, sizes: tuple[int, ...],
            dtype: np.dtype) -> list[str]:
    """Row ``direction`` of a (directions, n) value (or a 1-d value itself) cut into
    consecutive pieces of ``sizes``."""
    if direction is None:
        row = name
    else:
        length = b.value(name).shape[1]
        row = b.temp((length,), dtype)
        b.call("Slice", self=Ref(name), dim=0, start=direction, end=direction + 1, step=1,
               out=Ref(_viewed(b, row, (1, length), dtype)))
    parts = [b.temp((size,), dtype) for size in sizes]
    b.call("SplitWithSize", self=Ref(row), splitSize=tuple(sizes), dim=0, out=RefList(parts))
    return parts


def _initial(node: Node, b: Builder, index: int, direction: int, shape: tuple[int, int],
             dtype: np.dtype, batch_first: bool) -> str:
    """``initial_h`` / ``initial_c`` of one direction as a (batch, hidden) value."""
    name = _input(node, index)
    if name is None:
        return b.constant(np.zeros(shape, dtype), "zeros")
    value = b.value(name)
    state = b.temp(shape, dtype)
    axis = 1 if batch_first else 0  # layout 1 puts the direction second: (batch, dir, h)
    b.call("Slice", self=Ref(name), dim=axis, start=direction, end=direction + 1, step=1,
           out=Ref(_viewed(b, state, (1, *shape) if axis == 0 else
                           (shape[0], 1, shape[1]), value.dtype)))
    return state


def _viewed(b: Builder, source: str, shape: tuple[int, ...], dtype: np.dtype) -> str:
    """A new value of ``shape`` sharing ``source``'s memory."""
    view = b.temp(shape, dtype)
    b.view(view, source)
    return view


def _step_gates(b: Builder, projected: str, t: int, state: str, weights: _Weights,
                batch: int, width: int, dtype: np.dtype) -> tuple[str, str]:
    """Step ``t``'s input part (X_t W^T + biases) and recurrent part (H R^T), each
    (batch, width)."""
    gates = b.temp((batch, width), dtype)
    b.call("Slice", self=Ref(projected), dim=0, start=t * batch, end=(t + 1) * batch, step=1,
           out=Ref(gates))
    recurrent = b.temp((batch, width), dtype)
    b.call("Matmul", self=Ref(state), mat2=Ref(weights.r_t), out=Ref(recurrent),
           cubeMathType=KEEP_DTYPE)
    return gates, recurrent


def _split(b: Builder, source: str, count: int, batch: int, hidden: int,
           dtype: np.dtype) -> list[str]:
    parts = [b.temp((batch, hidden), dtype) for _ in range(count)]
    b.call("SplitWithSize", self=Ref(source), splitSize=(hidden,) * count, dim=1,
           out=RefList(parts))
    return parts


def _run_direction(node: Node, b: Builder, x: str, direction: int, reverse: bool,
                   steps: int, batch: int, hidden: int, batch_first: bool
                   ) -> tuple[list[str], str, str | None]:
    """Every step of one direction: (H_t by time index, last H, last C)."""
    op, dtype = node.op_type, b.value(x).dtype
    gates = GATES[op]
    width = gates * hidden
    weights = _weights(node, b, direction, hidden)
    features = b.value(x).shape[-1]
    flat = _viewed(b, x, (steps * batch, features), dtype)
    projected = b.temp((steps * batch, width), dtype)
    b.call("Matmul", self=Ref(flat), mat2=Ref(weights.w_t), out=Ref(projected),
           cubeMathType=KEEP_DTYPE)
    if weights.bias is not None:
        b.call("InplaceAdd", selfRef=Ref(projected), other=Ref(weights.bias), alpha=None)
    h = _initial(node, b, 5, direction, (batch, hidden), dtype, batch_first)
    c = _initial(node, b, 6, direction, (batch, hidden), dtype, batch_first) \
        if op == "LSTM" else None
    outputs: list[str | None] = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        x_part, r_part = _step_gates(b, projected, t, h, weights, batch, width, dtype)
        if op == "RNN":
            h = b.unary("Tanh", b.binary("Add", x_part, r_part, dtype), dtype)
        elif op == "GRU":
            xz, xr, xh = _split(b, x_part, 3, batch, hidden, dtype)
            rz, rr, rh = _split(b, r_part, 3, batch, hidden, dtype)
            z = b.unary("Sigmoid", b.binary("Add", xz, rz, dtype), dtype)
            r = b.unary("Sigmoid", b.binary("Add", xr, rr, dtype), dtype)
            if int(node.attrs.get("linear_before_reset", 0)):
                if weights.recurrent_h_bias is not None:
                    b.call("InplaceAdd", selfRef=Ref(rh), other=Ref(weights.recurrent_h_bias),
                           alpha=None)
                candidate = b.binary("Add", xh, b.binary("Mul", r, rh, dtype), dtype)
            else:  # (r * H) @ Rh^T: the reset gate applies before the recurrence
                rh_t = _viewed(b, weights.r_t, (hidden, width), dtype)
                reset = b.binary("Mul", r, h, dtype)
                recurrent = b.temp((batch, width), dtype)
                b.call("Matmul", self=Ref(reset), mat2=Ref(rh_t), out=Ref(recurrent),
                       cubeMathType=KEEP_DTYPE)
                candidate = b.binary("Add", xh, _split(b, recurrent, 3, batch, hidden,
                                                          dtype)[2], dtype)
            candidate = b.unary("Tanh", candidate, dtype)
            # H = (1 - z) * candidate + z * H = candidate + z * (H - candidate)
            h = b.binary("Add", candidate,
                         b.binary("Mul", z, b.binary("Sub", h, candidate, dtype), dtype), dtype)
        else:
            summed = b.binary("Add", x_part, r_part, dtype)
            gate_i, gate_o, gate_f, gate_c = _split(b, summed, 4, batch, hidden, dtype)
            if weights.peepholes is not None:
                p_i, p_o, p_f = weights.peepholes
                gate_i = b.binary("Add", gate_i, b.binary("Mul", c, p_i, dtype), dtype)
                gate_f = b.binary("Add", gate_f, b.binary("Mul", c, p_f, dtype), dtype)
            i = b.unary("Sigmoid", gate_i, dtype)
            f = b.unary("Sigmoid", gate_f, dtype)
            cell = b.unary("Tanh", gate_c, dtype)
            c = b.binary("Add", b.binary("Mul", f, c, dtype),
                        b.binary("Mul", i, cell, dtype), dtype)
            if weights.peepholes is not None:
                gate_o = b.binary("Add", gate_o, b.binary("Mul", c, p_o, dtype), dtype)
            o = b.unary("Sigmoid", gate_o, dtype)
            h = b.binary("Mul", o, b.unary("Tanh", c, dtype), dtype)
        outputs[t] = h
    return outputs, h, c


def _concat(b: Builder, parts: list[str], part_shape: tuple[int, ...], dim: int, out: str,
            dtype: np.dtype) -> None:
    views = [_viewed(b, part, part_shape, dtype) for part in parts]
    if len(views) == 1:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(views[0]))
    else:
        b.call("Cat", tensors=RefList(views), dim=dim, out=Ref(out))


def _whole_sequence_inputs(node: Node, b: Builder) -> tuple | None:
    """(weights W and R, bias B or None, directions) of an LSTM or GRU that one
    whole-sequence step can run (see the module note), or None."""
    direction = str(node.attrs.get("direction", "forward"))
    x = node.inputs[0]
    weights = [b.constant_of(node.inputs[i]) for i in (1, 2)]
    bias_name = _input(node, 3)
    bias = None if bias_name is None else b.constant_of(bias_name)
    peepholes = node.op_type == "LSTM" and _input(node, 7) is not None
    if (direction not in ("forward", "bidirectional") or int(node.attrs.get("layout", 0))
            or b.value(x).dtype not in LSTM_DTYPES or any(w is None for w in weights)
            or peepholes or (bias_name is not None and bias is None)):
        return None
    if _input(node, 4) is not None:
        lengths = b.constant_of(node.inputs[4])
        if lengths is None or not np.all(lengths == b.value(x).shape[0]):
            return None
    return weights, bias, 2 if direction == "bidirectional" else 1


def _reordered(array: np.ndarray, hidden: int, order: tuple[int, ...], dtype: np.dtype
               ) -> np.ndarray:
    """(G*H, ...) gate blocks of ``array`` in ``order``, contiguous, of ``dtype``."""
    blocks = array.reshape(len(order), hidden, *array.shape[1:])[list(order)]
    return np.ascontiguousarray(blocks.reshape(array.shape).astype(dtype))


def _sequence_output(b: Builder, y: str, sequence: str, shape: tuple[int, ...],
                     dtype: np.dtype) -> None:
    """ONNX's Y (T, D, B, H) from a (T, B, D * H) sequence output."""
    steps, batch, directions, hidden = shape
    if directions == 1:  # (T, B, H) is (T, 1, B, H)
        b.view(y, sequence)
    else:  # (T, B, 2, H) -> (T, 2, B, H)
        b.call("Permute", self=Ref(_viewed(b, sequence, (steps, batch, 2, hidden), dtype)),
               dims=(0, 2, 1, 3), out=Ref(y))


def _whole_sequence_gru(node: Node, b: Builder) -> bool:
    """Lower a GRU with ``linear_before_reset`` = 1 onto one aclnnGRU step when it can be
    (see the module note); False leaves it to the unrolled lowering."""
    if node.op_type != "GRU" or not int(node.attrs.get("linear_before_reset", 0)):
        return False
    found = _whole_sequence_inputs(node, b)
    if found is None:
        return False
    (w, r), bias, directions = found
    x = node.inputs[0]
    dtype = b.value(x).dtype
    steps, batch, _ = b.value(x).shape
    hidden = int(node.attrs["hidden_size"])
    width = 3 * hidden
    state = (directions, batch, hidden)
    params = []
    for d in range(directions):
        arrays = [w[d], r[d]]
        if bias is not None:
            arrays += [bias[d][:width], bias[d][width:]]
        params += [b.constant(_reordered(a, hidden, ONNX_TO_TORCH_GRU, dtype), "gru_w")
                   for a in arrays]
    initial = _input(node, 5)
    if initial is not None and (b.value(initial).shape != state or
                                b.value(initial).dtype != dtype):
        return False
    y, y_h = (node.outputs + ["", ""])[:2]
    sequence = b.temp((steps, batch, directions * hidden), dtype)
    b.call("GRU", input=Ref(x), params=RefList(params), hx=Ref(initial) if initial else None,
           batchSizes=None, hasBias=bias is not None, numLayers=1, dropout=0.0, train=False,
           bidirection=directions == 2, batchFirst=False, output=Ref(sequence),
           hy=Ref(y_h or b.temp(state, dtype)), rOut=None, zOut=None, nOut=None,
           hnOut=None, hOut=None)
    if y:
        _sequence_output(b, y, sequence, (steps, batch, directions, hidden), dtype)
    return True


def _whole_sequence_lstm(node: Node, b: Builder) -> bool:
    """Lower an LSTM onto one aclnnBidirectionLSTM step when it can be (see the module
    note); False leaves it to the unrolled lowering."""
    found = None if node.op_type != "LSTM" else _whole_sequence_inputs(node, b)
    if found is None:
        return False
    weights, bias, directions = found
    x = node.inputs[0]
    dtype = b.value(x).dtype
    steps, batch, _ = b.value(x).shape
    hidden = int(node.attrs["hidden_size"])
    state = (directions, batch, hidden)

    def reordered(array: np.ndarray) -> np.ndarray:  # (4H, ...) blocks in PyTorch's order
        return _reordered(array, hidden, ONNX_TO_TORCH_LSTM, dtype)

    args: dict[str, Ref | None] = {}
    names = (("wIh", "wHh", "bIhOptional", "bHhOptional"),
             ("wIhReverseOptional", "wHhReverseOptional", "bIhReverseOptional",
              "bHhReverseOptional"))
    for d in range(2):
        for position, name in enumerate(names[d]):
            array = None
            if d < directions:
                array = weights[position][d] if position < 2 else (
                    None if bias is None else bias[d][(position - 2) * 4 * hidden:
                                                      (position - 1) * 4 * hidden])
            args[name] = None if array is None else Ref(b.constant(reordered(array), "lstm_w"))
    initial = []
    for index in (5, 6):
        name = _input(node, index)
        if name is not None and (b.value(name).shape != state or b.value(name).dtype != dtype):
            return False
        initial.append(name or b.constant(np.zeros(state, dtype), "zeros"))
    y, y_h = (node.outputs + ["", ""])[:2]
    y_c = node.outputs[2] if len(node.outputs) > 2 else ""
    sequence = b.temp((steps, batch, directions * hidden), dtype)
    b.call("BidirectionLSTM", x=Ref(x), initH=Ref(initial[0]), initC=Ref(initial[1]), **args,
           numLayers=1, isbias=bias is not None, batchFirst=False,
           bidirection=directions == 2, yOut=Ref(sequence),
           outputHOut=Ref(y_h or b.temp(state, dtype)),
           outputCOut=Ref(y_c or b.temp(state, dtype)))
    if y:
        _sequence_output(b, y, sequence, (steps, batch, directions, hidden), dtype)
    return True


@lowering("RNN", "GRU", "LSTM")
def recurrent(node: Node, b: Builder) -> None:
    _check(node)
    if _whole_sequence_lstm(node, b) or _whole_sequence_gru(node, b):
        return
    x = node.inputs[0]
    dtype = b.value(x).dtype
    batch_first = int(node.attrs.get("layout", 0)) == 1
    direction = str(node.attrs.get("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise unsupported(node, f"direction={direction!r}")
    if batch_first:  # work in (seq, batch, features); the outputs are permuted back
        batch, steps, features = b.value(x).shape
        seq_major = b.temp((steps, batch, features), dtype)
        b.call("Permute", self=Ref(x), dims=(1, 0, 2), out=Ref(seq_major))
        x = seq_major
    steps, batch, _ = b.value(x).shape
    hidden = int(node.attrs["hidden_size"])
    lengths = _constant_input(node, b, 4, "sequence_lens")
    if lengths is not None and not np.all(lengths == steps):
        raise unsupported(node, f"sequence_lens {lengths.tolist()} shorter than the sequence")
    runs = [(0, direction == "reverse")] if direction != "bidirectional" else \
        [(0, False), (1, True)]
    results = [_run_direction(node, b, x, d, reverse, steps, batch, hidden, batch_first)
               for d, reverse in runs]
    directions = len(runs)
    y, y_h = (node.outputs + ["", ""])[:2]
    y_c = node.outputs[2] if len(node.outputs) > 2 else ""
    if y:
        per_step = []
        for t in range(steps):
            step = b.temp((1, directions, batch, hidden), dtype)
            _concat(b, [r[0][t] for r in results], (1, 1, batch, hidden), 1, step, dtype)
            per_step.append(step)
        target = b.temp((steps, directions, batch, hidden), dtype) if batch_first else y
        _concat(b, per_step, (1, directions, batch, hidden), 0, target, dtype)
        if batch_first:
            b.call("Permute", self=Ref(target), dims=(2, 0, 1, 3), out=Ref(y))
    for name, index in ((y_h, 1), (y_c, 2)):
        if not name:
            continue
        target = b.temp((directions, batch, hidden), dtype) if batch_first else name
        _concat(b, [r[index] for r in results], (1, batch, hidden), 0, target, dtype)
        if batch_first:
            b.call("Permute", self=Ref(target), dims=(1, 0, 2), out=Ref(name))
