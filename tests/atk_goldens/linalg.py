"""Goldens of the matmul family (CANN's matmul/ operators): Matmul, Mm, Mv, BatchMatMul,
Addmm, Addmv, Addbmm, Baddbmm, Gemm, Einsum, FusedLinearOnlineMaxSum and
FusedLinearCrossEntropyLossGrad. Each is PyTorch in float64 (the
driver widens the inputs); ``cubeMathType`` only selects the NPU's Cube logic (on CPU the
full-precision product stays within every dtype's standard) and is ignored here.

CANN's ATK lists the output tensor (``out``) among the inputs of these operators, in its
argument position; the ``params`` name it so that the inputs after it bind to the right
arguments."""

from __future__ import annotations

import numpy as np
import torch

from atk_driver import golden


@golden("Matmul", params=("self", "mat2", "out", "cubeMathType"))
def matmul(a, b, out=None, cube=0):
    return torch.matmul(a, b)


@golden("Mm", params=("self", "mat2", "out", "cubeMathType"))
def mm(a, b, out=None, cube=0):
    return a @ b


@golden("Mv", params=("self", "vec", "out", "cubeMathType"))
def mv(a, v, out=None, cube=0):
    return torch.mv(a, v)


@golden("BatchMatMul", params=("self", "mat2", "out", "cubeMathType"))
def batch_mat_mul(a, b, out=None, cube=0):
    return torch.matmul(a, b)


def _scaled(beta, bias, alpha, product):
    """``beta * bias + alpha * product``; beta == 0 ignores bias (torch's rule)."""
    return alpha * product + (beta * bias if beta != 0 else 0)


@golden("Addmm", params=("self", "mat1", "mat2", "beta", "alpha", "out", "cubeMathType"))
def addmm(bias, a, b, beta=1, alpha=1, out=None, cube=0):
    return torch.broadcast_to(_scaled(beta, bias, alpha, a @ b), (a.shape[0], b.shape[1]))


@golden("Addmv", params=("self", "mat", "vec", "alpha", "beta", "out", "cubeMathType"))
def addmv(bias, a, v, alpha=1, beta=1, out=None, cube=0):
    return torch.broadcast_to(_scaled(beta, bias, alpha, a @ v), (a.shape[0],))


@golden("Addbmm", params=("self", "batch1", "batch2", "beta", "alpha", "out", "cubeMathType"))
def addbmm(bias, b1, b2, beta=1, alpha=1, out=None, cube=0):
    product = torch.matmul(b1, b2).sum(0)
    return torch.broadcast_to(_scaled(beta, bias, alpha, product), product.shape)


@golden("Baddbmm", params=("self", "batch1", "batch2", "beta", "alpha", "out",
                           "cubeMathType"))
def baddbmm(bias, b1, b2, beta=1, alpha=1, out=None, cube=0):
    product = torch.matmul(b1, b2)
    return torch.broadcast_to(_scaled(beta, bias, alpha, product), product.shape)


@golden("Gemm", params=("A", "B", "C", "alpha", "beta", "transA", "transB", "out",
                        "cubeMathType"))
def gemm(a, b, c, alpha=1.0, beta=1.0, trans_a=0, trans_b=0, out=None, cube=0):
    product = (a.T if trans_a else a) @ (b.T if trans_b else b)
    return torch.broadcast_to(_scaled(beta, c, alpha, product), product.shape)


@golden("Einsum")
def einsum(tensors, equation):
    return torch.einsum(equation, *tensors)


@golden("FusedLinearOnlineMaxSum", params=(
    "input", "weight", "target", "vocabStartIndex", "vocabEndIndex",
    "vocabParallelLogitsOutOptional"))
def fused_linear_online_max_sum(x, w, target, start=0, end=0, with_logits=False):
    """CANN's golden: the logits in float64 rounded to float32, a target on the shard when
    start <= target < end, the mask packed a bit per row (row 8 j + i: bit i of byte j).
    The ATK's vocabParallelLogitsOutFlag sits where the optional logits output is: the
    one-shot call always makes it, and it is checked when the flag asks for it."""
    logits = (x @ w.T).float().double()
    peak = logits.max(-1)[0]
    shifted = logits - peak[:, None]
    off = (target < start) | (target >= end)
    local = torch.where(off, 0, target - start)
    picked = torch.where(off, 0.0, shifted[torch.arange(len(target)), local.clamp(
        0, logits.shape[1] - 1)])
    bits = np.packbits(off.numpy(), bitorder="little")
    results = (peak, shifted.exp().sum(-1), picked, bits, local)
    return (*results, logits) if with_logits else results


@golden("FusedLinearCrossEntropyLossGrad")
def fused_linear_cross_entropy_loss_grad(grad, x, w, mask, local, smoothing=0.0, peak=None,
                                         total=None, softmax=None):
    rows = grad.shape[0]
    off = mask.bool() if mask.dtype == torch.bool else torch.from_numpy(np.unpackbits(
        mask.numpy().astype(np.uint8), count=rows, bitorder="little").astype(bool))
    if softmax is not None and softmax.dim() == 2:
        probabilities = softmax.clone()
    else:
        probabilities = (x @ w.T - peak[:, None]).exp() / total[:, None]
    probabilities[torch.arange(rows), local.clamp(0, w.shape[0] - 1)] -= (~off).double()
    probabilities = probabilities * grad[:, None]
    return probabilities @ w, probabilities.T @ x
