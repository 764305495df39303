"""Connectionist temporal classification: aclnnCtcLoss and aclnnCtcLossBackward.

Argument lists and dtype lists are CANN's (``hicann/ops-nn`` ``loss/ctc_loss_v2`` and
``ctc_loss_v2_grad``); semantics are PyTorch's ``ctc_loss`` (``reduction='none'``):

* ``logProbs`` (T, N, C) or (T, C) log-probabilities; ``targets`` (N, S) padded or the
  concatenation of every sequence (1-D, ``sum(targetLengths)`` long), class indices in any
  integer, bool or float dtype (truncated); ``inputLengths`` and ``targetLengths`` N ints.
* Each sequence is extended with blanks (``blank, y1, blank, ..., yL, blank``: 2L + 1
  states) and the forward variables ``log_alpha`` (N, T, 2 max(L) + 1) are computed over
  time, one step for all sequences at once; ``negLogLikelihoodOut`` is
  ``-logsumexp`` of the last two states at each sequence's last step. States past a
  sequence's length and steps past its input length hold -inf. A sequence with input
  length 0 has loss 0 when its target is empty, else inf.
* The backward computes ``log_beta`` the same way from the end, gathers ``log_alpha +
  log_beta`` onto each class (a batched product with the states' one-hot classes) and gives
  ``(exp(lp) - exp(log(sum alpha beta) + nll - lp)) * gradOut``, 0 past each input length;
  ``logAlpha`` may carry more states than needed (CANN pads it to a multiple of 8).
* Computed in float64 for every dtype (``CTC_COMPUTE_DTYPE``), rounded once.
* ``zeroInfinity``: an infinite loss, and its gradient, become 0.
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import FLOAT_DTYPES, Call, Kernel, array_module, as_array
from openacl.ops.fpstate import quiet
from openacl.ops.movement import _check_index_range
from openacl.ops.registry import register

CTC_TARGET_DTYPES = frozenset(np.dtype(t) for t in (np.int64, np.int32, np.bool_, np.float32,
                                                    np.float16))
CTC_GRAD_TARGET_DTYPES = CTC_TARGET_DTYPES - {np.dtype(np.bool_)}
BATCHED_RANK, SINGLE_RANK = 3, 2  # logProbs (T, N, C) or (T, C)
# alpha and beta sum hundreds of log-probabilities along a path and the gradient takes exp of
# a difference of such sums: float32 loses ~1e-2 relative there, so every dtype computes in
# float64 and rounds once into the output
CTC_COMPUTE_DTYPE = np.dtype(np.float64)


def _logsumexp3(a, b, c):
    """Elementwise log(exp(a) + exp(b) + exp(c)), -inf when all three are -inf."""
    top = np.maximum(np.maximum(a, b), c)
    shift = np.where(np.isfinite(top), top, top.dtype.type(0))
    return shift + np.log(np.exp(a - shift) + np.exp(b - shift) + np.exp(c - shift))


class _Problem:
    """The checked geometry of one CTC call: lengths, the extended-label layout."""

    def __init__(self, c: Call, grad: bool) -> None:
        self.dtype = c.check_dtype("logProbs", FLOAT_DTYPES)
        c.check_dtype("targets", CTC_GRAD_TARGET_DTYPES if grad else CTC_TARGET_DTYPES)
        log_probs = c.tensor("logProbs")
        ranks = (BATCHED_RANK,) if grad else (BATCHED_RANK, SINGLE_RANK)
        if log_probs.ndim not in ranks or log_probs.shape[-1] == 0:
            raise c.fail("logProbs", "must be (T, N, C)" + ("" if grad else " or (T, C)") +
                         " with C > 0")
        self.batched = log_probs.ndim == BATCHED_RANK
        self.steps, self.classes = log_probs.shape[0], log_probs.shape[-1]
        self.batch = log_probs.shape[1] if self.batched else 1
        self.input_lengths = self._lengths(c, "inputLengths")
        self.target_lengths = self._lengths(c, "targetLengths")
        if any(not 0 <= n <= self.steps for n in self.input_lengths):
            raise c.fail("inputLengths", f"each must be in [0, {self.steps}] (T)")
        if any(n < 0 for n in self.target_lengths):
            raise c.fail("targetLengths", "must be non-negative")
        targets = c.tensor("targets")
        self.padded = targets.ndim == 2 or (not self.batched and targets.ndim == 1)
        if targets.ndim == 2:
            if targets.shape[0] != self.batch or max(self.target_lengths, default=0) > \
                    targets.shape[1]:
                raise c.fail("targets", f"a padded target must be (N={self.batch}, S) with S "
                                        f"at least max(targetLengths)")
        elif targets.ndim == 1:
            needed = max(self.target_lengths) if not self.batched else sum(self.target_lengths)
            if targets.shape[0] < needed or (self.batched and targets.shape[0] != needed):
                raise c.fail("targets", "a 1-D target must hold sum(targetLengths) labels")
        else:
            raise c.fail("targets", "must be (N, S) or 1-D")
        self.blank = c["blank"]
        if not 0 <= self.blank < self.classes:
            raise c.fail("blank", f"must be in [0, {self.classes}) (C)")
        self.zero_infinity = bool(c["zeroInfinity"])
        self.states = 2 * max(self.target_lengths, default=0) + 1
        self.op = c.op_name

    def _lengths(self, c: Call, name: str) -> tuple[int, ...]:
        lengths = c[name]
        if len(lengths) != self.batch:
            raise c.fail(name, f"must hold {self.batch} lengths (N)")
        return tuple(int(n) for n in lengths)

    def extended(self, targets):
        """(labels of the states (N, S'), state valid (N, S')): blanks at even states."""
        xp = array_module(targets)
        flat = as_array(targets).astype(np.int64)
        if self.padded:
            rows = flat.reshape(self.batch, -1)
        else:  # concatenated sequences: pad them into rows
            width = max(max(self.target_lengths, default=0), 1)
            rows = xp.zeros((self.batch, width), np.int64)
            start = 0
            for n, length in enumerate(self.target_lengths):
                rows[n, :length] = flat[start:start + length]
                start += length
        width = self.states // 2
        labels = xp.full((self.batch, self.states), self.blank, np.int64)
        lengths = xp.asarray(self.target_lengths, np.int64)[:, None]
        positions = xp.arange(width)[None, :]
        body = rows[:, :width] if width else rows[:, :0]
        used = positions < lengths
        _check_index_range(self.op, "targets", body[used], self.classes)
        labels[:, 1::2] = np.where(used, body, self.blank)
        valid = xp.arange(self.states)[None, :] < 2 * lengths + 1
        return labels, valid

    def skips(self, labels):
        """Where state s may be reached from s - 2 (a label differing from the one before)."""
        allowed = array_module(labels).zeros(labels.shape, bool)
        allowed[:, 2:] = (labels[:, 2:] != self.blank) & (labels[:, 2:] != labels[:, :-2])
        return allowed


def _emissions(log_probs, labels):
    """log_probs (T, N, C) at every state's label: (T, N, S')."""
    index = np.broadcast_to(labels[None], (log_probs.shape[0], *labels.shape))
    return np.take_along_axis(log_probs, index, axis=2)


@register("CtcLoss", "logProbs: tensor, targets: tensor, inputLengths: int_array, "
                     "targetLengths: int_array, blank: int = 0, zeroInfinity: bool = False, "
                     "negLogLikelihoodOut: tensor!, logAlphaOut: tensor!")
def ctc_loss(c: Call) -> Kernel:
    """CTC loss of each sequence (``negLogLikelihoodOut``: (N), 0-dim for a (T, C) input)
    and the forward variables ``logAlphaOut`` (N, T, 2 max(targetLengths) + 1)."""
    problem = _Problem(c, grad=False)
    c.check_out("negLogLikelihoodOut", (problem.batch,) if problem.batched else (),
                problem.dtype, exact_dtype=True)
    c.check_out("logAlphaOut", (problem.batch, problem.steps, problem.states), problem.dtype,
                exact_dtype=True)
    compute = CTC_COMPUTE_DTYPE

    @quiet
    def kernel(v) -> None:
        log_probs = v.compute("logProbs", compute)
        if not problem.batched:
            log_probs = log_probs[:, None, :]
        xp = array_module(log_probs)
        labels, valid = problem.extended(v["targets"])
        skip = problem.skips(labels)
        emit = _emissions(log_probs, labels)
        minus_inf = compute.type(-np.inf)
        alpha = xp.full((problem.batch, problem.steps, problem.states), minus_inf, compute)
        lengths = xp.asarray(problem.input_lengths)
        if problem.steps:
            first = xp.full((problem.batch, problem.states), minus_inf, compute)
            first[:, :2] = emit[0, :, :2]
            alpha[:, 0] = np.where(valid & (lengths[:, None] > 0), first, minus_inf)
        for t in range(1, problem.steps):
            previous = alpha[:, t - 1]
            one = np.concatenate([xp.full((problem.batch, 1), minus_inf, compute),
                                  previous[:, :-1]], axis=1)
            two = np.concatenate([xp.full((problem.batch, 2), minus_inf, compute),
                                  previous[:, :-2]], axis=1)
            step = _logsumexp3(previous, one, np.where(skip, two, minus_inf)) + emit[t]
            alpha[:, t] = np.where(valid & (t < lengths[:, None]), step, minus_inf)
        last_state = 2 * xp.asarray(problem.target_lengths)
        last_step = np.maximum(lengths - 1, 0)
        batch = xp.arange(problem.batch)
        end = alpha[batch, last_step]
        final = np.take_along_axis(end, last_state[:, None], axis=1)[:, 0]
        before = np.take_along_axis(end, np.maximum(last_state - 1, 0)[:, None], axis=1)[:, 0]
        before = np.where(last_state > 0, before, minus_inf)
        nll = -np.logaddexp(final, before)
        empty = lengths == 0
        nll = np.where(empty, np.where(last_state == 0, compute.type(0), compute.type(np.inf)),
                       nll)
        if problem.zero_infinity:
            nll = np.where(nll == np.inf, compute.type(0), nll)
        v.write("negLogLikelihoodOut", nll if problem.batched else nll.reshape(()))
        v.write("logAlphaOut", alpha)
    return kernel


@register("CtcLossBackward", "gradOut: tensor, logProbs: tensor, targets: tensor, "
                             "inputLengths: int_array, targetLengths: int_array, "
                             "negLogLikelihood: tensor, logAlpha: tensor, blank: int = 0, "
                             "zeroInfinity: bool = False, out: tensor!")
def ctc_loss_backward(c: Call) -> Kernel:
    """Gradient of CtcLoss with respect to logProbs (T, N, C), from the forward's loss and
    ``logAlpha`` (N, T, at least 2 max(targetLengths) + 1 states)."""
    problem = _Problem(c, grad=True)
    for name in ("gradOut", "negLogLikelihood", "logAlpha"):
        if c.dtype(name) != problem.dtype:
            raise c.fail(name, f"dtype must equal logProbs' ({problem.dtype})")
    for name in ("gradOut", "negLogLikelihood"):
        if c.tensor(name).numel != problem.batch:
            raise c.fail(name, f"must hold {problem.batch} values (N)")
    alpha_shape = c.tensor("logAlpha").shape
    if len(alpha_shape) != 3 or alpha_shape[:2] != (problem.batch, problem.steps) or \
            alpha_shape[2] < problem.states:
        raise c.fail("logAlpha", f"shape must be (N={problem.batch}, T={problem.steps}, at "
                                 f"least {problem.states} states)")
    c.check_out("out", c.tensor("logProbs").shape, problem.dtype, exact_dtype=True)
    compute = CTC_COMPUTE_DTYPE

    @quiet
    def kernel(v) -> None:
        log_probs = v.compute("logProbs", compute)
        xp = array_module(log_probs)
        labels, valid = problem.extended(v["targets"])
        skip = problem.skips(labels)
        emit = _emissions(log_probs, labels)
        minus_inf = compute.type(-np.inf)
        alpha = v.compute("logAlpha", compute)[:, :, :problem.states]
        lengths = xp.asarray(problem.input_lengths)[:, None]
        last_state = 2 * xp.asarray(problem.target_lengths)[:, None]
        states = xp.arange(problem.states)[None, :]
        # the state s + 2 may be left for s when s + 2 may be reached from s
        skip_back = np.concatenate([skip[:, 2:], xp.zeros((problem.batch, 2), bool)], axis=1)
        start = (states >= last_state - 1) & (states <= last_state)  # entered at the last step
        beta = xp.full((problem.batch, problem.steps, problem.states), minus_inf, compute)
        following = xp.full((problem.batch, problem.states), minus_inf, compute)
        for t in range(problem.steps - 1, -1, -1):
            one = np.concatenate([following[:, 1:], xp.full((problem.batch, 1), minus_inf,
                                                            compute)], axis=1)
            two = np.concatenate([following[:, 2:], xp.full((problem.batch, 2), minus_inf,
                                                            compute)], axis=1)
            step = _logsumexp3(following, one, np.where(skip_back, two, minus_inf)) + emit[t]
            step = np.where(t == lengths - 1, np.where(start, emit[t], minus_inf), step)
            following = np.where(valid & (t < lengths), step, minus_inf)
            beta[:, t] = following
        # (N, T, S'): only a sequence's own states count (logAlpha past them is not read)
        together = np.where(valid[:, None, :], alpha + beta, minus_inf)
        top = np.max(together, axis=2, keepdims=True)
        shift = np.where(np.isfinite(top), top, compute.type(0))
        one_hot = (labels[:, :, None] == xp.arange(problem.classes)[None, None, :]).astype(
            compute)
        sums = np.matmul(np.exp(together - shift), one_hot)  # (N, T, C)
        log_sums = np.log(sums) + shift
        nll = v.compute("negLogLikelihood", compute).reshape(-1)
        grad_out = v.compute("gradOut", compute).reshape(-1)
        lp = np.moveaxis(log_probs, 1, 0)  # (N, T, C)
        gradient = (np.exp(lp) - np.exp(log_sums + nll[:, None, None] - lp)) * \
            grad_out[:, None, None]
        keep = xp.arange(problem.steps)[None, :, None] < lengths[:, :, None]
        if problem.zero_infinity:
            keep = keep & (nll != np.inf)[:, None, None]
        v.write("out", np.moveaxis(np.where(keep, gradient, compute.type(0)), 0, 1))
    return kernel
