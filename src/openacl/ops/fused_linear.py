"""The vocabulary-parallel linear + cross-entropy pieces (Megatron's
``fused_vocab_parallel_cross_entropy`` split at its communication points):
aclnnFusedLinearOnlineMaxSum (the forward's local logits statistics) and
aclnnFusedLinearCrossEntropyLossGrad (the gradients of input and weight).

The logits ``input @ weight^T`` are computed in float32 from the FLOAT16 / BFLOAT16 operands
(BLAS, float32 accumulation); the statistics and gradients follow CANN's formulas and its
ATK golden: a target is on this shard when ``vocabStartIndex <= target < vocabEndIndex``
(the golden's half-open range), and ``targetMaskOut`` packs one bit per row, row ``8 j + i``
in bit ``i`` of byte ``j``.
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import Call, Kernel, array_module, as_array
from openacl.ops.promotion import BFLOAT16
from openacl.ops.registry import register

__all__ = ["fused_linear_cross_entropy_loss_grad", "fused_linear_online_max_sum"]

FLOAT32 = np.dtype(np.float32)
HALF_DTYPES = frozenset({np.dtype(np.float16), BFLOAT16})
INDEX_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
UINT8, BOOL = np.dtype(np.uint8), np.dtype(np.bool_)
BITS_PER_BYTE = 8
MAX_HIDDEN = 65534  # input.size(1) <= 65534
MIN_VOCAB = 128  # FusedLinearCrossEntropyLossGrad: weight.size(0) >= 128


def _operands(c: Call) -> tuple[int, int, int]:
    """input (B, H) and weight (V, H) of one half-precision dtype; returns (B, H, V)."""
    x, w = c.tensor("input"), c.tensor("weight")
    c.check_dtype("input", HALF_DTYPES)
    for name, tensor in (("input", x), ("weight", w)):
        if tensor.ndim != 2:
            raise c.fail(name, "must have 2 dims")
    if w.dtype != x.dtype:
        raise c.fail("weight", f"dtype must equal input's ({x.dtype})")
    if w.shape[1] != x.shape[1]:
        raise c.fail("weight", f"dim 1 must equal input's ({x.shape[1]})")
    return x.shape[0], x.shape[1], w.shape[0]


def _logits(v) -> np.ndarray:
    """``input @ weight^T`` in float32."""
    return array_module(v["input"]).matmul(as_array(v["input"]).astype(FLOAT32),
                                           as_array(v["weight"]).astype(FLOAT32).T)


@register("FusedLinearOnlineMaxSum",
          "input: tensor, weight: tensor, target: tensor, vocabStartIndex: int = 0, "
          "vocabEndIndex: int = 0, logitsMaxLocalOut: tensor!, sumExpLogitsLocalOut: tensor!, "
          "predictedLogitsLocalOut: tensor!, targetMaskOut: tensor!, maskedTargetOut: tensor!, "
          "vocabParallelLogitsOutOptional: tensor!?")
def fused_linear_online_max_sum(c: Call) -> Kernel:
    """Local statistics of ``logits = input @ weight^T`` for this vocabulary shard: each
    row's max, the sum of ``exp(logits - max)``, the target's ``logits - max`` (0 off the
    shard), the off-shard bit mask and the local target index (0 off the shard); the logits
    themselves into ``vocabParallelLogitsOutOptional`` when it is given."""
    rows, hidden, vocab = _operands(c)
    if hidden > MAX_HIDDEN:
        raise c.fail("input", f"dim 1 must be <= {MAX_HIDDEN}")
    if vocab < 1:
        raise c.fail("weight", "dim 0 (the shard's vocabulary) must be > 0")
    target = c.tensor("target")
    c.check_dtype("target", INDEX_DTYPES)
    if target.shape != (rows,):
        raise c.fail("target", f"must be 1-d of input's rows ({rows})")
    start, end = c["vocabStartIndex"], c["vocabEndIndex"]
    if start < 0 or not start <= end <= start + vocab:
        raise c.fail("vocabEndIndex", f"must be in [vocabStartIndex ({start}), "
                                      f"vocabStartIndex + weight.size(0) ({start + vocab})]")
    for name in ("logitsMaxLocalOut", "sumExpLogitsLocalOut", "predictedLogitsLocalOut"):
        c.check_out(name, (rows,), FLOAT32, exact_dtype=True)
    c.check_out("targetMaskOut", (-(-rows // BITS_PER_BYTE),), UINT8, exact_dtype=True)
    c.check_out("maskedTargetOut", (rows,), target.dtype, exact_dtype=True)
    c.check_out("vocabParallelLogitsOutOptional", (rows, vocab), c.dtype("input"),
                exact_dtype=True)

    def kernel(v) -> None:
        xp = array_module(v["logitsMaxLocalOut"])
        logits = _logits(v)
        if v.get("vocabParallelLogitsOutOptional") is not None:
            v.write("vocabParallelLogitsOutOptional", logits)
        peak = logits.max(axis=-1, initial=-np.inf)
        shifted = logits - peak[:, None]
        indices = as_array(v["target"]).astype(np.int64)
        off = (indices < start) | (indices >= end)
        local = xp.where(off, 0, indices - start)
        picked = shifted[xp.arange(rows), xp.clip(local, 0, vocab - 1)] if rows else peak
        v.write("logitsMaxLocalOut", peak)
        v.write("sumExpLogitsLocalOut", xp.exp(shifted).sum(axis=-1))
        v.write("predictedLogitsLocalOut", xp.where(off, 0, picked))
        v.write("targetMaskOut", xp.packbits(off, bitorder="little"))
        v.write("maskedTargetOut", local)
    return kernel


@register("FusedLinearCrossEntropyLossGrad",
          "grad: tensor, input: tensor, weight: tensor, targetMask: tensor, "
          "maskedTarget: tensor, labelSmoothing: float = 0.0, logitsMaxOptional: tensor?, "
          "sumExpLogitsOptional: tensor?, softmaxOptional: tensor?, inputGradOut: tensor!, "
          "weightGradOut: tensor!")
def fused_linear_cross_entropy_loss_grad(c: Call) -> Kernel:
    """The gradients of input and weight of a vocabulary-parallel cross entropy: the
    softmax (``softmaxOptional``, or recomputed from the logits with ``logitsMaxOptional``
    and ``sumExpLogitsOptional``) minus one at each on-shard target, times ``grad``, then
    ``inputGrad = g @ weight`` and ``weightGrad = g^T @ input``. ``targetMask`` holds one
    bit per row (UINT8, bit ``i`` of byte ``j`` for row ``8 j + i``), or one BOOL per row
    (CANN's ATK cases give it so); ``labelSmoothing`` must be 0, as CANN supports."""
    rows, hidden, vocab = _operands(c)
    if vocab < MIN_VOCAB:
        raise c.fail("weight", f"dim 0 (the shard's vocabulary) must be >= {MIN_VOCAB}")
    grad = c.tensor("grad")
    c.check_dtype("grad", {FLOAT32})
    if grad.shape != (rows,):
        raise c.fail("grad", f"must be 1-d of input's rows ({rows})")
    mask = c.tensor("targetMask")
    c.check_dtype("targetMask", {UINT8, BOOL})
    if mask.ndim != 1 or (mask.dtype == BOOL and mask.shape[0] != rows) or (
            mask.dtype == UINT8 and mask.shape[0] * BITS_PER_BYTE < rows):
        raise c.fail("targetMask", f"must hold a bit (UINT8) or a BOOL for each of the "
                                   f"{rows} rows")
    c.check_dtype("maskedTarget", INDEX_DTYPES)
    if c.tensor("maskedTarget").shape != (rows,):
        raise c.fail("maskedTarget", f"must be 1-d of input's rows ({rows})")
    if c["labelSmoothing"] != 0:
        raise c.fail("labelSmoothing", "only 0 is supported (as in CANN)")
    given = c.has("softmaxOptional")
    if given:
        c.check_dtype("softmaxOptional", {FLOAT32})
        if c.tensor("softmaxOptional").shape != (rows, vocab):
            raise c.fail("softmaxOptional", f"must be [{rows}, {vocab}]")
    else:
        for name in ("logitsMaxOptional", "sumExpLogitsOptional"):
            if not c.has(name):
                raise c.fail(name, "is needed when softmaxOptional is null")
            c.check_dtype(name, {FLOAT32})
            if c.tensor(name).shape != (rows,):
                raise c.fail(name, f"must be 1-d of input's rows ({rows})")
    dtype = c.dtype("input")
    c.check_out("inputGradOut", (rows, hidden), dtype, exact_dtype=True)
    c.check_out("weightGradOut", (vocab, hidden), dtype, exact_dtype=True)
    packed = mask.dtype == UINT8

    def kernel(v) -> None:
        xp = array_module(v["inputGradOut"])
        if given:
            softmax = as_array(v["softmaxOptional"]).astype(FLOAT32)  # (a copy: updated)
        else:
            peak = as_array(v["logitsMaxOptional"]).astype(FLOAT32)[:, None]
            total = as_array(v["sumExpLogitsOptional"]).astype(FLOAT32)[:, None]
            softmax = xp.exp(_logits(v) - peak) / total
        bits = as_array(v["targetMask"])
        off = (xp.unpackbits(bits, count=rows, bitorder="little") if packed else bits).astype(
            bool)
        if rows:
            local = xp.clip(as_array(v["maskedTarget"]).astype(np.int64), 0, vocab - 1)
            softmax[xp.arange(rows), local] -= (~off).astype(FLOAT32)
        softmax *= as_array(v["grad"]).astype(FLOAT32)[:, None]
        v.write("inputGradOut", softmax @ as_array(v["weight"]).astype(FLOAT32))
        v.write("weightGradOut", softmax.T @ as_array(v["input"]).astype(FLOAT32))
    return kernel
