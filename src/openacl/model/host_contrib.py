"""onnxruntime's contrib ops (domain ``com.microsoft``) run on the host with numpy.

``contrib_node(node, model, constants)`` returns the host runner of a contrib node this
module implements, or None (``host_nodes.host_node`` then falls back to onnx's reference
evaluator, which knows none of them). A runner is a ``host_nodes._HostNode``: ``run(env)``
returns the node's outputs by name, a failure is an AclError naming the node.

Design note (invariants)
------------------------
* The reference is onnxruntime's CPU kernel on x86-64, not the op's prose: the models that
  carry these ops were quantised by onnxruntime's tools and are checked against its CPU
  provider. Each kernel is reproduced to the rounding, so on a model of float32 inputs the
  outputs are those onnxruntime computes, bit for bit where its arithmetic is known (see
  each op), and the few places where onnxruntime itself is machine- or thread-dependent are
  named. (On ARM, MLAS and the compiler fuse more multiply-adds: the last bit may differ.)
* Integer GEMMs are exact: the quantised operands, zero points subtracted, are small
  integers held in float32 (|a| <= 255, |w| <= 255). A float32 BLAS matmul over a block of
  K rows with ``K * 255 * max|w| < 2**24`` is exact, whatever its order of summation and
  FMAs, since every partial sum is an integer below 2**24 (``IntegerWeights``: blocks of
  514 rows or more for full-range int8 weights, 1028 for onnxruntime's reduce_range); the
  blocks are summed in float64 (exact) and rounded once to float32, as MLAS's int32 ->
  float conversion rounds its accumulator (whose int32 overflow, K > 33000, is not
  reproduced). On CPUs with AVX-512 VNNI and an int8 matrix the product is the C kernels'
  int8 GEMM instead (vpdpbusd: u8 x s8 summed in int32, the zero point taken off by column
  sums, converted once): the same float32 values. The C recurrence sums in int32 exactly
  too: from int16 row pairs (vpmaddwd), or with VNNI from row quads of an int8 matrix.
* Fused multiply-adds of MLAS's FMA3 kernels (the logistic and tanh polynomials) run in
  float64 and are rounded once to float32: the product of two float32 values is exact in
  float64, so only the sum rounds twice, which differs from one rounding in about 2**-29 of
  the cases (none in 300 000 points checked against onnxruntime's Sigmoid and Tanh).
* Attributes are read and checked when the runner is built (at the stage's build, an
  AclError ``ACL_ERROR_PARSE_MODEL`` for one onnxruntime refuses or that is not supported
  here); inputs are checked on every run (``ACL_ERROR_INVALID_PARAM`` naming the input,
  its value and what it must be).
* Constant inputs (the quantised weights, an initializer or a folded constant) are prepared
  once (zero points subtracted, as float32) and kept while the same array comes back.

DynamicQuantizeLSTM (com.microsoft, opset 1)
--------------------------------------------
onnxruntime's ``contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc`` over the deep-CPU
LSTM (``providers/cpu/rnn/uni_directional_lstm.cc``, ``rnn_helpers.cc``), as it is:

* Inputs: X float32 [seq, batch, input]; W int8/uint8 [dirs, input, 4*hidden] and R
  [dirs, hidden, 4*hidden] (transposed against ONNX LSTM's, gates i, o, f, c along the last
  axis); B [dirs, 8*hidden] (Wb then Rb, summed in float32); sequence_lens int32 [batch]
  (each in [0, seq]); initial_h / initial_c [dirs, batch, hidden]; P [dirs, 3*hidden]
  (i, o, f); W_scale / R_scale float32 [dirs] (per tensor) or [dirs, 4*hidden] (per column);
  W_zero_point / R_zero_point of the weights' type, [dirs] or [dirs, 4*hidden]. A per-column
  zero point must be one value for the whole tensor (uint8) or all zero (int8), and only its
  first value per direction is used, as onnxruntime does.
* X is quantised once per direction, over the rows of the longest sequence
  (``max(sequence_lens)`` steps, every batch entry, padding included): uint8 with
  onnxruntime's ``GetQuantizationParameter``: the range [min(x, 0), max(x, 0)], scale
  ``(max - min) / 255`` (1 when the range is empty), zero point ``round_half_even(clamp(0 -
  min / scale, 0, 255))``, then ``clamp(round_half_even(x / scale) + zp, 0, 255)``. The
  hidden state is quantised the same way at every step, over the batch rows of the step.
* ``X @ W`` is the exact int32 product scaled by ``float32(x_scale * w_scale)`` (per tensor
  or per column); every step adds ``float32(int32 H @ R) * float32(h_scale * r_scale)`` with
  a separate multiply and add (MLAS's output processor, built without FMA on x86-64).
* Gates as the deep-CPU kernel orders them: peephole products added before the bias, the
  bias added and the sum clipped to [-clip, clip] (clip defaults to FLT_MAX, so an inf
  becomes FLT_MAX), ``f`` on i, f (or ``1 - i`` with input_forget), ``g`` on c, ``C = C_prev
  * f + i * c``, the output gate's peephole on the new C, ``H = h(C) * o``. Sigmoid and tanh
  are MLAS's rational approximations (bit-exact here); relu, affine, leakyrelu,
  thresholdedrelu, hardsigmoid and softsign are exact float32 arithmetic; scaledtanh, elu and
  softplus go through float32 exp/log, which may differ from the C library's by an ulp.
* sequence_lens: a batch entry stops after its length (its Y rows zero, its state kept); the
  reverse direction reads each entry's first ``len`` steps backwards; Y past the longest
  sequence is zero; Y_h / Y_c of a zero-length entry are zero.
* Thread-dependence of onnxruntime: with an intra-op thread pool of ``n > 1`` threads and a
  batch of more than 4 (or 2 to 4 with hidden <= 256), onnxruntime splits the batch into
  slices of ``ceil(batch / n)`` rows and quantises each slice's hidden state on its own
  (``slice_rows``). ``ONNXRUNTIME_THREADS`` (default 1) is the ``n`` reproduced: by default
  the results are onnxruntime's with one intra-op thread and, whatever its threads, for
  batch 1 and for hidden > 256 up to batch 4; set it to onnxruntime's thread count to match
  a threaded session at any batch.
* Where onnxruntime reads memory it never wrote (the hidden state of a zero-length entry
  when Y is not an output, Y_c when the sequence is empty), zero is used.
* int8 weights on x86 CPUs without VNNI: MLAS's u8 x s8 kernels sum pairs of products in
  int16 with saturation (``vpmaddubsw``), so onnxruntime's own result there departs from the
  exact one when |w| > 64 (onnxruntime's ``reduce_range`` exists for that); this module
  computes the exact sum, which onnxruntime gives on VNNI and AMX CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_PARSE_MODEL
from openacl.model.host_nodes import _HostNode
from openacl.ops import native

__all__ = ["CONTRIB_OPS", "ONNXRUNTIME_THREADS", "contrib_node", "dynamic_quantize_lstm",
           "slice_rows"]

MS_DOMAIN = "com.microsoft"
F32 = np.float32
F64 = np.float64
FLT_MAX = float(np.finfo(np.float32).max)
ONNXRUNTIME_THREADS = 1  # the intra-op threads of the onnxruntime session reproduced


def slice_rows(batch: int, hidden: int, threads: int) -> int:
    """The batch rows whose hidden state onnxruntime's deep-CPU LSTM quantises together
    (``UniDirectionalLstm::SetNumThreads``: one slice per thread when it splits the batch)."""
    if threads > 1 and (batch > 4 or (batch >= 2 and hidden <= 256)):
        return -(-batch // threads)
    return max(batch, 1)


def contrib_node(node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> Any:
    """The host runner of the contrib op ``node`` (of the StagedModel ``model``), or None
    when this module does not implement it."""
    kind = CONTRIB_OPS.get((node.domain, node.op_type))
    return None if kind is None else kind(node, model, constants)


# --- MLAS's float arithmetic ---------------------------------------------------------------

def _fma(a: np.ndarray, b: Any, c: Any) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (see the design note)."""
    return (np.asarray(a, F64) * np.asarray(b, F64) + np.asarray(c, F64)).astype(F32)


def _polynomial(x2: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """Horner's rule over float32 coefficients, highest first, with fused multiply-adds."""
    value = _fma(x2, coefficients[0], coefficients[1])
    for coefficient in coefficients[2:]:
        value = _fma(value, x2, coefficient)
    return value


def _f32(*values: float) -> tuple[float, ...]:
    return tuple(float(F32(v)) for v in values)


LOGISTIC_P = _f32(4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                  8.51377133304701e-03, 2.48287947061529e-01)
LOGISTIC_Q = _f32(6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                  1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01)
TANH_P = _f32(-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
              5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
              4.89352455891786e-03)
TANH_Q = _f32(1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
              4.89352518554385e-03)


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """``MlasComputeLogistic`` (its FMA3 kernel): a rational approximation on [-18, 18]."""
    x = np.clip(np.asarray(x, F32), F32(-18.0), F32(18.0))
    x2 = x * x
    p = _polynomial(x2, LOGISTIC_P) * x
    q = _polynomial(x2, LOGISTIC_Q)
    return np.clip(p / q + F32(0.5), F32(0.0), F32(1.0))


def mlas_tanh(x: np.ndarray) -> np.ndarray:
    """``MlasComputeTanh`` (its FMA3 kernel): a rational approximation on [-9, 9]."""
    x = np.clip(np.asarray(x, F32), F32(-9.0), F32(9.0))
    x2 = x * x
    return (_polynomial(x2, TANH_P) * x) / _polynomial(x2, TANH_Q)


def _exp_sigmoid(x: np.ndarray) -> np.ndarray:
    """The deep-CPU kernel's scalar Sigmoid (behind its ScaledTanh)."""
    with np.errstate(over="ignore"):
        e = np.exp(np.where(x >= 0, -x, x))
        return np.where(x >= 0, F32(1) / (F32(1) + e), e / (F32(1) + e)).astype(F32)


Activation = Callable[[np.ndarray, np.float32, np.float32], np.ndarray]

ACTIVATIONS: dict[str, Activation] = {  # rnn_helpers.cc's names, lower case
    "sigmoid": lambda x, a, b: mlas_logistic(x),
    "tanh": lambda x, a, b: mlas_tanh(x),
    "relu": lambda x, a, b: np.where(x > 0, x, F32(0)),
    "affine": lambda x, a, b: a * x + b,
    "leakyrelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "thresholdedrelu": lambda x, a, b: np.where(x > a, x, F32(0)),
    "scaledtanh": lambda x, a, b: a * (F32(2) * _exp_sigmoid(F32(2) * (b * x)) - F32(1)),
    "hardsigmoid": lambda x, a, b: np.minimum(F32(1), np.maximum(F32(0), a * x + b)),
    "elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, F32(0))) - F32(1))),
    "softsign": lambda x, a, b: x / (F32(1) + np.abs(x)),
    "softplus": lambda x, a, b: np.log(F32(1) + np.exp(x)),
}
# which of (alpha, beta) each function takes, and their defaults (rnn_helpers.cc)
ACTIVATION_ARGS = {"affine": (True, True), "leakyrelu": (True, False),
                   "thresholdedrelu": (True, False), "scaledtanh": (True, True),
                   "hardsigmoid": (True, True), "elu": (True, False)}
ACTIVATION_DEFAULTS = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}


def _clip(x: np.ndarray, bias: np.ndarray | None, clip: np.float32) -> np.ndarray:
    """``clip_add_bias`` / ``clip_ignore_bias``: the gate's input clipped to [-clip, clip]
    (their comparisons kept, so a NaN goes where theirs goes)."""
    if bias is None:
        return np.where(x > clip, clip, np.where(x < -clip, -clip, x))
    x = x + bias
    x = np.where(x < clip, x, clip)  # std::min(clip, x)
    return np.where(-clip < x, x, -clip)  # std::max(-clip, x)


# --- dynamic quantisation ------------------------------------------------------------------

def quantize_uint8(values: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """onnxruntime's ``GetQuantizationParameter<uint8_t>`` and ``MlasQuantizeLinear`` over
    the whole of ``values``: (the quantised values as float32 integers, scale, zero
    point)."""
    values = np.asarray(values, F32)
    low = min(F32(values.min()), F32(0)) if values.size else F32(0)
    high = max(F32(values.max()), F32(0)) if values.size else F32(0)
    scale = F32(1) if high == low else F32((high - low) / F32(255))
    zero = int(np.rint(np.clip(F32(0) - low / scale, F32(0), F32(255))))
    quantized = np.clip(np.rint(values / scale), F32(-zero), F32(255 - zero)) + F32(zero)
    return quantized.astype(F32), scale, zero


def quad_blocks(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An int8-valued matrix (K, N) as the C kernels' VNNI layout: column blocks of
    ``QUAD_COLUMNS`` (zero columns after N), each (ceil(K / 4), QUAD_COLUMNS, 4) int8: four
    consecutive rows of a column in one 32-bit lane (one vpdpbusd), zero rows after K; and
    each block's column sums (int32), which take the other operand's zero point off."""
    rows, columns = matrix.shape
    blocks, quad_rows = -(-columns // QUAD_COLUMNS), -(-rows // 4)
    padded = np.zeros((4 * quad_rows, blocks * QUAD_COLUMNS), np.int8)
    padded[:rows, :columns] = matrix
    sums = padded.sum(axis=0, dtype=np.int32).reshape(blocks, QUAD_COLUMNS)
    quads = padded.reshape(quad_rows, 4, blocks, QUAD_COLUMNS).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(quads), sums


class IntegerWeights:
    """A quantised weight matrix (K, N) with its zero point taken, as float32 integers, and
    the rows of the blocks whose float32 products are exact (see the design note)."""

    def __init__(self, weight: np.ndarray, zero_point: int) -> None:
        self.matrix = np.ascontiguousarray(weight.astype(F32) - F32(zero_point))
        largest = int(np.abs(self.matrix).max()) if self.matrix.size else 0
        self.block = max(1, ((1 << 24) - 1) // (255 * max(largest, 1)))
        self.narrow = not self.matrix.size or (self.matrix.min() >= -128 and
                                               self.matrix.max() <= 127)  # fits int8
        self._unit_pairs: np.ndarray | None = None
        self._unit_quads: tuple[np.ndarray, np.ndarray] | None = None
        self._column_quads: tuple[np.ndarray, np.ndarray] | None = None
        self._packed: native.PackedMatrix | None = None

    def pairs(self) -> np.ndarray:
        """The matrix (K, N) as row pairs (ceil(K / 2), N, 2), rows 2p and 2p + 1
        interleaved, a zero row after an odd K: the C recurrence's layout (one vpmaddwd per
        pair of rows); int8 where every value fits (half the bytes to read per step), else
        int16 (|values| <= 255)."""
        rows, columns = self.matrix.shape
        padded = np.zeros((rows + rows % 2, columns), np.int8 if self.narrow else np.int16)
        padded[:rows] = self.matrix
        return padded.reshape(-1, 2, columns).transpose(0, 2, 1)

    @property
    def unit_pairs(self) -> np.ndarray:
        """``pairs()`` of a recurrent matrix (H, 4H) with its columns regrouped as the C
        recurrence reads them: blocks of ``UNIT_BLOCK`` hidden units, each block holding
        its units' columns of the four gates in turn (the last block: the units left), so
        that the columns of a run of whole blocks are contiguous (a task of the step's
        parallel product streams one run). Made on first use."""
        if self._unit_pairs is None:
            self._unit_pairs = np.ascontiguousarray(self.pairs()[:, self._unit_order()])
        return self._unit_pairs

    def _unit_order(self) -> list[int]:
        """A recurrent matrix's columns in unit blocks: per block of ``UNIT_BLOCK`` hidden
        units, its units' columns of gate i, o, f, then c."""
        hidden = self.matrix.shape[1] // 4
        return [gate * hidden + unit
                for block in range(0, hidden, UNIT_BLOCK)
                for gate in range(4)
                for unit in range(block, min(block + UNIT_BLOCK, hidden))]

    @property
    def unit_quads(self) -> tuple[np.ndarray, np.ndarray] | None:
        """A recurrent matrix (H, 4H) for the C recurrence's VNNI kernel, or None where a
        value does not fit int8: ``quad_blocks`` of ``unit_pairs``' columns (blocks of
        ``UNIT_BLOCK`` units, 4 * UNIT_BLOCK columns, are its blocks). Made on first use."""
        if self._unit_quads is None and self.narrow:
            self._unit_quads = quad_blocks(self.matrix[:, self._unit_order()])
        return self._unit_quads

    @property
    def column_quads(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The matrix as ``quad_blocks`` of its own columns, for the VNNI product
        (``product``), or None where a value does not fit int8. Made on first use."""
        if self._column_quads is None and self.narrow:
            self._column_quads = quad_blocks(self.matrix)
        return self._column_quads

    def product(self, a: np.ndarray, a_zero: int) -> np.ndarray:
        """MLAS's int32 accumulator of ``(a - a_zero) @ matrix``, as float32 (``a``: uint8
        values as float32): on CPUs with AVX-512 VNNI and an int8 matrix, by the C
        kernels' int8 GEMM; else by float32 products, exact in blocks (design note)."""
        rows, columns = self.matrix.shape
        lead = a.shape[:-1]
        lib = native.kernels()
        if USE_VNNI and lib is not None and lib.dq_lstm_vnni() and self.column_quads and \
                rows <= VNNI_MAX_DEPTH:
            count = math.prod(lead)
            padded = np.zeros((count, -(-rows // 4) * 4), np.uint8)
            padded[:, :rows] = a.reshape(count, rows)
            out = np.empty((count, columns), F32)
            lib.int8_gemm(padded, int(a_zero), *self.column_quads, out, (count, rows, columns))
            return out.reshape(*lead, columns)
        a = a.reshape(-1, rows) - F32(a_zero)
        if rows <= self.block:
            if self._packed is None:  # packed for the GEMM once, on first use
                self._packed = native.pack(self.matrix, native.RIGHT)
            return native.packed_product(a, self._packed, self.matrix).reshape(*lead, columns)
        total = np.zeros((a.shape[0], columns), F64)
        for start in range(0, rows, self.block):
            total += native.product(a[:, start:start + self.block],
                                    self.matrix[start:start + self.block])
        return total.astype(F32).reshape(*lead, columns)


UNIT_BLOCK = 16  # hidden units per column block of unit_pairs (_native.c's DQ_UNITS)
QUAD_COLUMNS = 4 * UNIT_BLOCK  # columns per block of quad_blocks (_native.c's QUAD_COLUMNS)
VNNI_MAX_DEPTH = 65000  # rows the int8 GEMM sums exactly in int32 (K * 255 * 128 < 2**31)
USE_VNNI = True  # the recurrence's VNNI kernel where the CPU has it (tests compare both)


# --- DynamicQuantizeLSTM ------------------------------------------------------------------

class _Direction:
    """One direction's constants in the layout the steps use."""

    def __init__(self, w: IntegerWeights, w_scale: np.ndarray, r: IntegerWeights,
                 r_scale: np.ndarray, bias: np.ndarray | None, peepholes: np.ndarray | None,
                 hidden: int) -> None:
        self.w = w  # (input, 4*hidden)
        self.r = r  # (hidden, 4*hidden)
        self.w_scale = w_scale  # float32 (1,) or (4*hidden,)
        self.r_scale = r_scale
        if bias is not None:
            fused = bias[:4 * hidden] + bias[4 * hidden:]  # Wb + Rb, float32
            self.bias = tuple(fused[k * hidden:(k + 1) * hidden] for k in range(4))
        else:
            self.bias = (None,) * 4  # i, o, f, c
        self.peepholes = None if peepholes is None else tuple(
            peepholes[k * hidden:(k + 1) * hidden] for k in range(3))  # i, o, f


def _lstm_direction(x: np.ndarray, lengths: np.ndarray, weights: _Direction, h0: np.ndarray,
                    c0: np.ndarray, reverse: bool, acts: list[tuple[Activation, Any, Any]],
                    clip: np.float32, input_forget: bool, want_y: bool,
                    rows_per_slice: int | None = None, deferred: list | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One direction of onnxruntime's quantised deep-CPU LSTM: (Y [seq, batch, hidden],
    Y_h, Y_c [batch, hidden]). ``rows_per_slice``: the batch rows whose hidden state is
    quantised together (``slice_rows``; default: the whole batch). With ``deferred``, the C
    steps' call is appended there instead of made (the caller runs a layer's directions at
    once): the arrays returned hold the results only after it."""
    seq, batch, _ = x.shape
    hidden = weights.r.matrix.shape[0]
    longest = int(lengths.max()) if batch else 0
    y = np.zeros((seq, batch, hidden), F32)
    h = np.array(h0, F32)  # the step's previous hidden state, as onnxruntime's buffer holds it
    c = np.array(c0, F32)
    h_last = np.zeros((batch, hidden), F32)
    if longest == 0:
        return y, h_last, np.zeros((batch, hidden), F32)
    steps = np.arange(longest)[:, None]  # the time index each step reads, per batch row
    if reverse:
        steps = np.where(steps < lengths[None, :], lengths[None, :] - 1 - steps, steps)
    rows = np.arange(batch)[None, :]
    inputs = x[steps, rows]  # (longest, batch, input): onnxruntime's reversed copy
    quantized, x_scale, x_zero = quantize_uint8(inputs)
    gates_x = weights.w.product(quantized, x_zero) * (x_scale * weights.w_scale)
    rows_per_slice = rows_per_slice or batch
    if _native_steps(gates_x, lengths, weights, h, c, y if want_y else None, acts, clip,
                     input_forget, rows_per_slice, reverse, deferred):
        return y, h, c
    f_act, g_act, h_act = acts
    b_i, b_o, b_f, b_c = weights.bias
    for step in range(longest):
        recurrent = np.empty((batch, 4 * hidden), F32)
        for start in range(0, batch, rows_per_slice):
            part = slice(start, start + rows_per_slice)
            q, h_scale, h_zero = quantize_uint8(h[part])
            recurrent[part] = weights.r.product(q, h_zero) * (h_scale * weights.r_scale)
        gates = gates_x[step] + recurrent
        g_i, g_o, g_f, g_c = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
        if weights.peepholes is not None:
            g_i = g_i + c * weights.peepholes[0]
        i = f_act[0](_clip(g_i, b_i, clip), *f_act[1:])
        if input_forget:
            f = F32(1) - i
        else:
            if weights.peepholes is not None:
                g_f = g_f + c * weights.peepholes[2]
            f = f_act[0](_clip(g_f, b_f, clip), *f_act[1:])
        cell = g_act[0](_clip(g_c, b_c, clip), *g_act[1:])
        c_new = c * f + i * cell
        if weights.peepholes is not None:
            g_o = g_o + c_new * weights.peepholes[1]
        o = f_act[0](_clip(g_o, b_o, clip), *f_act[1:])
        h_new = h_act[0](c_new, *h_act[1:]) * o
        active = (step < lengths)[:, None]
        c = np.where(active, c_new, c)
        h_last = np.where(active, h_new, h_last)
        if want_y:  # Y's rows are the next step's input; a finished entry's are zero
            h = np.where(active, h_new, F32(0))
            y[steps[step], rows[0]] = h
        else:  # onnxruntime steps on Y_h's buffer, where a finished entry keeps its state
            h = h_last
    return y, h_last, np.where((lengths > 0)[:, None], c, F32(0))


DEFAULT_LSTM_ACTIVATIONS = ("sigmoid", "tanh", "tanh")


def _native_steps(gates_x: np.ndarray, lengths: np.ndarray, weights: _Direction, h: np.ndarray,
                  c: np.ndarray, y: np.ndarray | None, acts: list, clip: np.float32,
                  input_forget: bool, rows_per_slice: int, reverse: bool,
                  deferred: list | None = None) -> bool:
    """The steps in one C call (``_native.dq_lstm_sequence``, the same rounding as the
    loop below; MLAS's polynomials with true fused multiply-adds) for the common case:
    default activations, no peepholes, no input_forget, every sequence full, the hidden
    state quantised whole. ``h`` and ``c`` hold the final state after; False: not done."""
    lib = native.kernels()
    seq, batch, _ = gates_x.shape
    if (lib is None or input_forget or weights.peepholes is not None or seq == 0
            or rows_per_slice < batch or not np.all(lengths == seq)
            or [f for f, _, _ in acts] != [ACTIVATIONS[n] for n in DEFAULT_LSTM_ACTIVATIONS]):
        return False
    bias = None if weights.bias[0] is None else np.concatenate(weights.bias).astype(F32)
    quads = weights.r.unit_quads if lib.dq_lstm_vnni() and USE_VNNI else None
    call = (np.ascontiguousarray(gates_x, F32), weights.r.unit_pairs,
            np.ascontiguousarray(weights.r_scale, F32), bias, h, c, y,
            (seq, batch, weights.r.matrix.shape[0]), float(clip), reverse, *(quads or ()))
    if deferred is not None:
        deferred.append(call)
    else:
        lib.dq_lstm_sequence(*call)
    return True


def dynamic_quantize_lstm(x: np.ndarray, directions: list[_Direction], lengths: np.ndarray,
                          h0: np.ndarray, c0: np.ndarray, reverse: list[bool],
                          acts: list[tuple[Activation, Any, Any]], clip: float,
                          input_forget: bool, want_y: bool, rows_per_slice: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y [seq, dirs, batch, hidden], Y_h, Y_c [dirs, batch, hidden] of checked inputs."""
    ys, hs, cs = [], [], []
    deferred: list = []  # the directions' C steps, run at once: one direction per core
    for d, weights in enumerate(directions):
        y, h, c = _lstm_direction(x, lengths, weights, h0[d], c0[d], reverse[d],
                                  acts[3 * d:3 * d + 3], F32(clip), input_forget, want_y,
                                  rows_per_slice, deferred if len(directions) > 1 else None)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    if deferred:
        native.kernels().dq_lstm_sequences(deferred)
    return np.stack(ys, axis=1), np.stack(hs), np.stack(cs)


LSTM_ATTRIBUTES = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                   "hidden_size", "input_forget", "layout"}
LSTM_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "W_scale",
               "W_zero_point", "R_scale", "R_zero_point")
REQUIRED = {"X", "W", "R", "W_scale", "W_zero_point", "R_scale", "R_zero_point"}
WEIGHT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))


def _shape(array: np.ndarray) -> str:
    return f"{array.dtype} {list(array.shape)}"


class DynamicQuantizeLSTMNode(_HostNode):
    """com.microsoft DynamicQuantizeLSTM as onnxruntime's CPU kernel computes it."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        from onnx import helper

        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for name in attrs:
            if name not in LSTM_ATTRIBUTES:
                raise self.fail(ACL_ERROR_PARSE_MODEL, f"has an unknown attribute {name!r}")
        direction = attrs.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        if direction not in ("forward", "reverse", "bidirectional"):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"direction {direction!r} is not one of 'forward', 'reverse', "
                            f"'bidirectional'")
        self.dirs = 2 if direction == "bidirectional" else 1
        self.reverse = [False, True] if self.dirs == 2 else [direction == "reverse"]
        if "hidden_size" not in attrs or int(attrs["hidden_size"]) <= 0:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"hidden_size must be a positive integer; it is "
                            f"{attrs.get('hidden_size', 'missing')}")
        self.hidden = int(attrs["hidden_size"])
        self.clip = float(attrs.get("clip", FLT_MAX))
        if not self.clip > 0:
            raise self.fail(ACL_ERROR_PARSE_MODEL, f"clip must be > 0; it is {self.clip}")
        self.input_forget = bool(int(attrs.get("input_forget", 0)))
        if int(attrs.get("layout", 0)) != 0:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"layout {int(attrs['layout'])} is not supported (onnxruntime "
                            f"takes layout 0 only)")
        self.acts = self._activations(attrs)
        inputs = list(node.input) + [""] * (len(LSTM_INPUTS) - len(node.input))
        if len(inputs) > len(LSTM_INPUTS):
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"has {len(node.input)} inputs; it takes at most "
                            f"{len(LSTM_INPUTS)}")
        self.inputs = dict(zip(LSTM_INPUTS, inputs, strict=True))
        missing = [name for name in LSTM_INPUTS if name in REQUIRED and not self.inputs[name]]
        if missing:
            raise self.fail(ACL_ERROR_PARSE_MODEL, f"lacks the required input(s) {missing}")
        self._prepared: dict[str, tuple[Any, ...]] = {}  # input -> (W, scale, zero, prepared)

    def _activations(self, attrs: Mapping[str, Any]) -> list[tuple[Activation, Any, Any]]:
        names = [n.decode() if isinstance(n, bytes) else str(n)
                 for n in attrs.get("activations", [])]
        if not names:
            names = ["sigmoid", "tanh", "tanh"] * self.dirs
        if len(names) != 3 * self.dirs:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"activations {names} must name {3 * self.dirs} functions")
        alphas = [float(a) for a in attrs.get("activation_alpha", [])]
        betas = [float(b) for b in attrs.get("activation_beta", [])]
        result = []
        for name in names:
            key = name.lower()
            if key not in ACTIVATIONS:
                raise self.fail(ACL_ERROR_PARSE_MODEL,
                                f"activation {name!r} is not one of {sorted(ACTIVATIONS)}")
            needs_alpha, needs_beta = ACTIVATION_ARGS.get(key, (False, False))
            alpha, beta = ACTIVATION_DEFAULTS.get(key, (0.0, 0.0))
            if needs_alpha and alphas:
                alpha = alphas.pop(0)
            if needs_beta and betas:
                beta = betas.pop(0)
            result.append((ACTIVATIONS[key], F32(alpha), F32(beta)))
        return result

    def _input(self, name: str, env: Mapping[str, np.ndarray]) -> np.ndarray | None:
        source = self.inputs[name]
        return None if not source else np.asarray(self.value(source, env))

    def _bad(self, name: str, array: np.ndarray, must: str) -> Exception:
        return self.fail(ACL_ERROR_INVALID_PARAM,
                         f"input {name} {self.inputs[name]!r} is {_shape(array)}; it must be "
                         f"{must}")

    def _float(self, name: str, array: np.ndarray | None, shape: tuple[int, ...]
               ) -> np.ndarray | None:
        if array is not None and (array.dtype != F32 or array.shape != shape):
            raise self._bad(name, array, f"float32 {list(shape)}")
        return array

    def _weights(self, name: str, env: Mapping[str, np.ndarray], rows: int
                 ) -> tuple[list[IntegerWeights], np.ndarray]:
        """(W or R per direction with its zero point taken, their float32 scales (dirs, 1
        or 4*hidden)), prepared once per array."""
        dirs, gates = self.dirs, 4 * self.hidden
        weight = self._input(name, env)
        scale = self._input(f"{name}_scale", env)
        zero = self._input(f"{name}_zero_point", env)
        if weight.dtype not in WEIGHT_DTYPES or weight.shape != (dirs, rows, gates):
            raise self._bad(name, weight, f"int8 or uint8 [{dirs}, {rows}, {gates}]")
        for part, array, dtypes in ((f"{name}_scale", scale, (np.dtype(F32),)),
                                    (f"{name}_zero_point", zero, (weight.dtype,))):
            if array.dtype not in dtypes or array.shape not in ((dirs,), (dirs, gates)):
                raise self._bad(part, array, f"{dtypes[0]} [{dirs}] (per tensor) or "
                                             f"[{dirs}, {gates}] (per column)")
        cached = self._prepared.get(name)
        if cached is not None and all(a is b for a, b in zip(cached[:3], (weight, scale, zero),
                                                             strict=True)):
            return cached[3]
        if zero.ndim == 2:  # onnxruntime reads one zero point per direction
            if weight.dtype == np.int8 and np.any(zero != 0):
                raise self._bad(f"{name}_zero_point", zero,
                                "all zero when per column (int8 weights)")
            if np.any(zero != zero.reshape(-1)[0]):
                raise self._bad(f"{name}_zero_point", zero,
                                "one value for the whole tensor when per column (uint8 "
                                "weights)")
        points = zero.reshape(dirs, -1)[:, 0]
        prepared = ([IntegerWeights(weight[d], int(points[d])) for d in range(dirs)],
                    scale.reshape(dirs, -1).astype(F32))
        self._prepared[name] = (weight, scale, zero, prepared)
        return prepared

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        dirs, hidden = self.dirs, self.hidden
        x = self._input("X", env)
        if x.dtype != F32 or x.ndim != 3:
            raise self._bad("X", x, "float32 [seq_length, batch_size, input_size]")
        seq, batch, size = x.shape
        w, w_scale = self._weights("W", env, size)
        r, r_scale = self._weights("R", env, hidden)
        w_dtype, r_dtype = self._input("W", env).dtype, self._input("R", env).dtype
        if w_dtype != r_dtype:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"W is {w_dtype} and R is {r_dtype}; they must be one type")
        bias = self._float("B", self._input("B", env), (dirs, 8 * hidden))
        peepholes = self._float("P", self._input("P", env), (dirs, 3 * hidden))
        state = (dirs, batch, hidden)
        h0 = self._float("initial_h", self._input("initial_h", env), state)
        c0 = self._float("initial_c", self._input("initial_c", env), state)
        lengths = self._input("sequence_lens", env)
        if lengths is None:
            lengths = np.full(batch, seq, np.int64)
        else:
            if lengths.dtype != np.int32 or lengths.shape != (batch,):
                raise self._bad("sequence_lens", lengths, f"int32 [{batch}]")
            if np.any((lengths < 0) | (lengths > seq)):
                raise self.fail(ACL_ERROR_INVALID_PARAM,
                                f"input sequence_lens {self.inputs['sequence_lens']!r} is "
                                f"{lengths.tolist()}; each must be in [0, {seq}]")
            lengths = lengths.astype(np.int64)
        directions = [_Direction(w[d], w_scale[d], r[d], r_scale[d],
                                 None if bias is None else bias[d],
                                 None if peepholes is None else peepholes[d], hidden)
                      for d in range(dirs)]
        zeros = np.zeros(state, F32)
        want_y = bool(self.node.output) and bool(self.node.output[0])
        y, y_h, y_c = dynamic_quantize_lstm(
            x, directions, lengths, zeros if h0 is None else h0, zeros if c0 is None else c0,
            self.reverse, self.acts, self.clip, self.input_forget, want_y,
            slice_rows(batch, hidden, ONNXRUNTIME_THREADS))
        return {name: value for name, value in zip(self.node.output, (y, y_h, y_c),
                                                   strict=False) if name}


CONTRIB_OPS: dict[tuple[str, str], type[_HostNode]] = {
    (MS_DOMAIN, "DynamicQuantizeLSTM"): DynamicQuantizeLSTMNode,
}
