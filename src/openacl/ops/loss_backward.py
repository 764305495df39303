"""Backward operators of the losses in ``loss.py``: the gradient of each loss with respect to
its input, as torch.autograd computes it.

Argument lists and dtype lists are CANN's (``hicann/ops-nn`` ``loss/*_grad*/docs``). Rules:

* ``reduction`` as in the forward (0 none, 1 mean, 2 sum; KlDiv 3 batchmean). A mean
  divides by the element count of the forward's loss (the broadcast of self and target),
  batchmean by ``self.size(0)``.
* ``gradOutput`` broadcasts against the operands (a reduced loss's gradient is one element;
  CANN broadcasts any compatible shape); the result has the broadcast shape of every
  operand, or self's shape where CANN says so (BinaryCrossEntropy*, KlDiv, NLLLoss*,
  CrossEntropyLossGrad, LogitGrad).
* BinaryCrossEntropyBackward divides by ``max(x (1 - x), 1e-12)`` (torch's clamp), so a
  probability of exactly 0 or 1 gives a large finite gradient.
* float16 and bfloat16 are computed in float32 and rounded once into the output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openacl.ops import promotion
from openacl.ops.activation import sigmoid
from openacl.ops.call import Call, Kernel, array_module, as_array
from openacl.ops.fpstate import quiet
from openacl.ops.loss import (
    CROSS_ENTROPY_WEIGHT_DTYPES,
    FLOAT64,
    LOSS_DTYPES,
    REDUCTION_BATCHMEAN,
    REDUCTION_MEAN,
    REDUCTION_NONE,
    broadcast_to,
    check_class_index,
    check_same_dtype,
    fresh,
    gradient_scale,
    nll_classes,
    promoted,
    reduction_arg,
    reduction_name_arg,
)
from openacl.ops.movement import _check_index_range
from openacl.ops.registry import register

BCE_GRAD_EPSILON = 1e-12  # torch clamps x (1 - x) at this in binary_cross_entropy_backward
CROSS_ENTROPY_TARGET_DTYPES = frozenset({np.dtype(np.int64)})  # CrossEntropyLossGrad's target

PointwiseGrad = Callable[..., object]  # (x, y, **attributes) -> d loss / d x, elementwise


# -- pointwise losses ---------------------------------------------------------------------------
def _pointwise_backward(c: Call, derivative: PointwiseGrad, grad: str = "gradOutput",
                        out: str = "out", same_dtype: bool = False, largest: int = 2,
                        **attributes: float) -> Kernel:
    """``out = grad * derivative(self, target) * scale`` over the broadcast of the three;
    ``same_dtype``: grad and target must have self's dtype (else they promote)."""
    if same_dtype:
        dtype = c.check_dtype("self", LOSS_DTYPES)
        check_same_dtype(c, dtype, grad, "target")
    else:
        dtype = promoted(c, LOSS_DTYPES, grad, "self", "target")
    shape = c.broadcast(grad, "self", "target")
    reduction = reduction_arg(c, largest=largest)
    c.check_out(out, shape, dtype)
    compute = promotion.compute_dtype(dtype)
    count = int(np.prod(c.broadcast("self", "target")))
    self_shape = c.tensor("self").shape
    scale = compute.type(gradient_scale(reduction, count, self_shape[0] if self_shape else 0))

    @quiet
    def kernel(v) -> None:
        slope = derivative(v.compute("self", compute), v.compute("target", compute),
                           **attributes)
        upstream = v.compute(grad, compute)
        if type(slope) is type(upstream) and slope.shape == shape and slope.ndim:
            np.multiply(slope, upstream, out=slope)  # (the slope is a fresh array)
            gradient = slope
        else:
            gradient = slope * upstream
        if scale != 1:
            gradient = np.multiply(gradient, scale, out=gradient) if gradient.ndim else \
                gradient * scale
        v.write(out, gradient)
    return kernel


def _mse_slope(x, y):
    difference = fresh(np.subtract(x, y))
    return np.add(difference, difference, out=difference)


def _l1_slope(x, y):
    return np.sign(x - y)


def _smooth_l1_slope(x, y, beta: float):
    difference = np.subtract(x, y)
    if beta == 0.0:
        return np.sign(difference)
    # d / beta below beta, sign(d) above it: d / beta clipped to [-1, 1]
    scaled = np.multiply(difference, x.dtype.type(1.0 / beta))
    return np.clip(scaled, x.dtype.type(-1), x.dtype.type(1))


def _soft_margin_slope(x, y):
    return -y * sigmoid(-(y * x))


def _kl_div_slope(x, y, log_target: bool):
    return -np.exp(y) if log_target else -y


@register("MseLossBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                             "reduction: int = 1, out: tensor!")
def mse_loss_backward(c: Call) -> Kernel:
    """Gradient of MseLoss: ``2 (self - target) * gradOutput`` (over N for a mean);
    gradOutput and target have self's dtype."""
    return _pointwise_backward(c, _mse_slope, same_dtype=True)


@register("L1LossBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                            "reduction: int = 1, gradInput: tensor!")
def l1_loss_backward(c: Call) -> Kernel:
    """Gradient of L1Loss: ``sign(self - target) * gradOutput`` (over N for a mean)."""
    return _pointwise_backward(c, _l1_slope, out="gradInput")


@register("SmoothL1LossBackward", "gradOut: tensor, self: tensor, target: tensor, "
                                  "reduction: int = 1, beta: float = 1.0, gradInput: tensor!")
def smooth_l1_loss_backward(c: Call) -> Kernel:
    """Gradient of SmoothL1Loss: ``d / beta`` where ``|d| < beta``, else ``sign(d)``."""
    beta = c["beta"]
    if not beta >= 0.0:
        raise c.fail("beta", "must be non-negative")
    return _pointwise_backward(c, _smooth_l1_slope, grad="gradOut", out="gradInput",
                               beta=beta)


@register("SoftMarginLossBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                                    "reduction: int = 1, out: tensor!")
def soft_margin_loss_backward(c: Call) -> Kernel:
    """Gradient of SoftMarginLoss: ``-target * sigmoid(-target * self) * gradOutput``."""
    return _pointwise_backward(c, _soft_margin_slope)


@register("KlDivBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                           "reduction: int = 1, logTarget: bool = False, out: tensor!")
def kl_div_backward(c: Call) -> Kernel:
    """Gradient of KlDiv with respect to self: ``-target`` (``-exp(target)`` for a log
    target) times gradOutput; out has self's shape and dtype."""
    self = c.tensor("self")
    shape = c.broadcast("gradOutput", "self", "target")
    if shape != self.shape:
        raise c.fail("self", f"gradOutput and target must broadcast to self's shape "
                             f"{list(self.shape)}")
    c.check_out("out", self.shape, c.check_dtype("self", LOSS_DTYPES), exact_dtype=True)
    return _pointwise_backward(c, _kl_div_slope, largest=REDUCTION_BATCHMEAN,
                               log_target=bool(c["logTarget"]))


# -- binary cross entropy -----------------------------------------------------------------------
def _bce_prepare(c: Call, names: tuple[str, ...], wide: bool = False
                 ) -> tuple[np.dtype, float]:
    """Shared checks: operands promote and broadcast to self, out has self's shape;
    returns (compute dtype, gradient scale). ``wide``: compute in float64."""
    dtype = promoted(c, LOSS_DTYPES, "gradOutput", "self", "target", *names)
    shape = c.tensor("self").shape
    broadcast_to(c, shape, "gradOutput", "target", *names)
    reduction = reduction_arg(c)
    c.check_out("out", shape, dtype)
    compute = FLOAT64 if wide else promotion.compute_dtype(dtype)
    return compute, compute.type(gradient_scale(reduction, int(np.prod(shape))))


@register("BinaryCrossEntropyBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                                        "weightOptional: tensor?, reduction: int = 1, "
                                        "out: tensor!")
def binary_cross_entropy_backward(c: Call) -> Kernel:
    """Gradient of BinaryCrossEntropy: ``grad * weight * (x - t) / max(x (1 - x), 1e-12)``."""
    compute, scale = _bce_prepare(c, ("weightOptional",))
    weighted = c.has("weightOptional")
    epsilon = compute.type(BCE_GRAD_EPSILON)

    @quiet
    def kernel(v) -> None:
        x, t = v.compute("self", compute), v.compute("target", compute)
        gradient = v.compute("gradOutput", compute) * (x - t) / np.maximum(
            (compute.type(1) - x) * x, epsilon)
        if weighted:
            gradient = gradient * v.compute("weightOptional", compute)
        v.write("out", gradient * scale)
    return kernel


@register("BinaryCrossEntropyWithLogitsBackward",
          "gradOutput: tensor, self: tensor, target: tensor, weightOptional: tensor?, "
          "posWeightOptional: tensor?, reduction: int = 1, out: tensor!")
def binary_cross_entropy_with_logits_backward(c: Call) -> Kernel:
    """Gradient of BinaryCrossEntropyWithLogits: ``grad * weight * ((p t + 1 - t)
    sigmoid(x) - p t)`` (p the positive weight; without it ``sigmoid(x) - t``)."""
    # (p t + 1 - t) sigmoid(x) - p t cancels where the two terms are close: float32 loses
    # ~1e-4 relative there, past CANN's standard for small gradients; float64 does not
    compute, scale = _bce_prepare(c, ("weightOptional", "posWeightOptional"), wide=True)
    weighted, positive = c.has("weightOptional"), c.has("posWeightOptional")

    @quiet
    def kernel(v) -> None:
        x, t = v.compute("self", compute), v.compute("target", compute)
        if positive:
            pt = v.compute("posWeightOptional", compute) * t
            slope = (pt + compute.type(1) - t) * sigmoid(x) - pt
        else:
            slope = sigmoid(x) - t
        gradient = v.compute("gradOutput", compute) * slope
        if weighted:
            gradient = gradient * v.compute("weightOptional", compute)
        v.write("out", gradient * scale)
    return kernel


# -- LogitGrad ------------------------------------------------------------------------------------
@register("LogitGrad", "x: tensor, dy: tensor, eps: float = -1.0, out: tensor!")
def logit_grad(c: Call) -> Kernel:
    """Gradient of Logit: ``dy / (x (1 - x))`` inside ``[eps, 1 - eps]`` and 0 outside it;
    a negative ``eps`` gives NaN for x outside [0, 1]."""
    dtype = c.check_dtype("x", LOSS_DTYPES)
    check_same_dtype(c, dtype, "dy", like="x")
    shape = c.tensor("x").shape
    if c.tensor("dy").shape != shape:
        raise c.fail("dy", f"shape must equal x's {list(shape)}")
    c.check_out("out", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    eps = c["eps"]

    @quiet
    def kernel(v) -> None:
        x, dy = v.compute("x", compute), v.compute("dy", compute)
        denominator = np.subtract(compute.type(1), x)
        denominator = np.multiply(denominator, x, out=denominator if denominator.ndim else None)
        if eps < 0.0:  # x (1 - x) < 0 exactly where x is outside [0, 1]
            outside, fill = denominator < 0, compute.type(np.nan)
        else:
            outside, fill = (x < eps) | (x > 1.0 - eps), compute.type(0)
        gradient = np.divide(dy, denominator, out=denominator if denominator.ndim else None)
        v.write("out", np.where(outside, fill, gradient) if outside.any() else gradient)
    return kernel


# -- class-index losses --------------------------------------------------------------------------
def _nll_backward_prepare(c: Call, two_d: bool) -> Kernel:
    """NLLLossBackward (self (N, C) or (C)) and NLLLoss2dBackward (self (N, C, H, W)): the
    gradient is ``-weight[t] * grad`` at each row's target class (over totalWeight for a
    mean), 0 elsewhere and for ignored targets."""
    dtype = c.check_dtype("self", LOSS_DTYPES)
    check_same_dtype(c, dtype, "gradOutput", "weight", "totalWeight")
    classes = nll_classes(c, two_d)
    self, target, grad = c.tensor("self"), c.tensor("target"), c.tensor("gradOutput")
    if c.tensor("totalWeight").numel != 1:
        raise c.fail("totalWeight", "must hold one element")
    reduction = reduction_arg(c)
    per_row = reduction == REDUCTION_NONE and self.ndim > 1
    if per_row and grad.shape != target.shape:
        raise c.fail("gradOutput", f"shape must be {list(target.shape)} (the unreduced loss)")
    if not per_row and grad.numel != 1:
        raise c.fail("gradOutput", "must hold one element (the gradient of a reduced loss)")
    c.check_out("out", self.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    ignore_index, op = c["ignoreIndex"], c.op_name

    @quiet
    def kernel(v) -> None:
        labels = as_array(v["target"]).reshape(-1)
        mask = labels != ignore_index
        safe = check_class_index(op, labels, mask, classes)
        chosen = v.compute("weight", compute)[safe] * mask
        g = v.compute("gradOutput", compute).reshape(-1)
        if reduction == REDUCTION_MEAN:
            g = g / v.compute("totalWeight", compute).reshape(-1)
        flat = array_module(g).zeros((safe.shape[0], classes), compute)
        np.put_along_axis(flat, safe[:, None], (-(g * chosen))[:, None], axis=1)
        if self.ndim <= 2:
            v.write("out", flat.reshape(self.shape))
        else:  # rows are (N, H, W) positions: classes go back to dim 1
            v.write("out", np.moveaxis(flat.reshape(*target.shape, classes), -1, 1))
    return kernel


@register("NLLLossBackward", "gradOutput: tensor, self: tensor, target: tensor, weight: tensor, "
                             "reduction: int, ignoreIndex: int, totalWeight: tensor, "
                             "out: tensor!")
def nll_loss_backward(c: Call) -> Kernel:
    """Gradient of NLLLoss with respect to self (N, C) or (C)."""
    return _nll_backward_prepare(c, two_d=False)


@register("NLLLoss2dBackward", "gradOutput: tensor, self: tensor, target: tensor, "
                               "weight: tensor, reduction: int, ignoreIndex: int, "
                               "totalWeight: tensor, out: tensor!")
def nll_loss2d_backward(c: Call) -> Kernel:
    """Gradient of NLLLoss2d with respect to self (N, C, H, W)."""
    return _nll_backward_prepare(c, two_d=True)


@register("CrossEntropyLossGrad",
          "gradLoss: tensor, logProb: tensor, target: tensor, weightOptional: tensor?, "
          "gradZlossOptional: tensor?, lseForZlossOptional: tensor?, "
          "reductionOptional: str? = 'mean', ignoreIndex: int = -100, "
          "labelSmoothing: float = 0.0, lseSquareScaleForZloss: float = 0.0, out: tensor!")
def cross_entropy_loss_grad(c: Call) -> Kernel:
    """Gradient of CrossEntropyLoss with respect to its logits, from the forward's
    log-probabilities: ``softmax * sum(a) - a`` with ``a`` the per-class coefficients of the
    loss (target class, label smoothing, weights, ignored rows), plus the z-loss term
    ``2 scale lse * zgrad * softmax`` when ``lseForZlossOptional`` is given and the scale is
    not 0."""
    dtype = c.check_dtype("logProb", LOSS_DTYPES)
    check_same_dtype(c, dtype, "gradLoss", "gradZlossOptional", "lseForZlossOptional",
                     like="logProb")
    c.check_dtype("target", CROSS_ENTROPY_TARGET_DTYPES | {np.dtype(np.int32)})
    if c.has("weightOptional"):
        c.check_dtype("weightOptional", CROSS_ENTROPY_WEIGHT_DTYPES)
    log_prob = c.tensor("logProb")
    if log_prob.ndim != 2 or log_prob.shape[1] == 0:
        raise c.fail("logProb", "must be 2-D (N, C) with C > 0")
    rows, classes = log_prob.shape
    if c.tensor("target").shape != (rows,):
        raise c.fail("target", f"shape must be [{rows}] (one class index per row)")
    if c.has("weightOptional") and c.tensor("weightOptional").shape != (classes,):
        raise c.fail("weightOptional", f"shape must be [{classes}] (one weight per class)")
    reduction = reduction_name_arg(c)
    smoothing, zscale = c["labelSmoothing"], c["lseSquareScaleForZloss"]
    if not 0.0 <= smoothing <= 1.0:
        raise c.fail("labelSmoothing", "must be in [0, 1]")
    # the z-loss inputs count only with a scale (CANN: otherwise they have no effect)
    with_zloss = zscale != 0.0 and c.has("lseForZlossOptional")
    with_zgrad = with_zloss and c.has("gradZlossOptional")
    for name in ("gradLoss", "gradZlossOptional") if with_zloss else ("gradLoss",):
        grad = c[name]
        if grad is not None and grad.shape != (rows,) and (
                reduction == REDUCTION_NONE or grad.numel != 1):
            raise c.fail(name, f"shape must be [{rows}] for reduction none, else one element")
    if with_zloss and c.tensor("lseForZlossOptional").numel not in (1, rows):
        raise c.fail("lseForZlossOptional", f"shape must be [{rows}]")
    c.check_out("out", log_prob.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    weighted, ignore_index, op = c.has("weightOptional"), c["ignoreIndex"], c.op_name

    @quiet
    def kernel(v) -> None:
        prob = np.exp(v.compute("logProb", compute))
        labels = as_array(v["target"]).reshape(-1)
        mask = labels != ignore_index
        safe = check_class_index(op, labels, mask, classes)
        weight = v.compute("weightOptional", compute) if weighted else None
        chosen = weight[safe] * mask if weighted else mask.astype(compute)
        grad = v.compute("gradLoss", compute).reshape(-1)
        if reduction == REDUCTION_MEAN:
            grad = grad / np.sum(chosen, dtype=FLOAT64).astype(compute)
        row_grad = grad * mask  # (N,) or one element, broadcast over rows
        target_coeff = compute.type(1.0 - smoothing) * row_grad * chosen
        coeff = np.zeros_like(prob)
        np.put_along_axis(coeff, safe[:, None], target_coeff[:, None], axis=1)
        if smoothing:
            smooth = (row_grad * compute.type(smoothing / classes))[:, None]
            coeff = coeff + (smooth * weight if weighted else smooth)
        total = np.sum(coeff, axis=1, keepdims=True, dtype=FLOAT64).astype(compute)
        gradient = prob * total - coeff
        if with_zloss:
            zgrad = v.compute("gradLoss", compute).reshape(-1)
            if with_zgrad:
                zgrad = zgrad + v.compute("gradZlossOptional", compute).reshape(-1)
            if reduction == REDUCTION_MEAN:
                zgrad = zgrad / np.sum(mask, dtype=FLOAT64).astype(compute)
            lse = v.compute("lseForZlossOptional", compute).reshape(-1)
            lse_grad = compute.type(2 * zscale) * lse * mask * zgrad
            gradient = gradient + prob * lse_grad[:, None]
        v.write("out", gradient)
    return kernel



# -- ChamferDistanceBackward ----------------------------------------------------------------------
CHAMFER_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float16))
CHAMFER_INDEX_DTYPES = frozenset({np.dtype(np.int32)})
POINT_DIMS = 2  # ChamferDistance works on 2-d points: (B, N, 2)


@register("ChamferDistanceBackward", "xyz1: tensor, xyz2: tensor, idx1: tensor, idx2: tensor, "
                                     "gradDist1: tensor, gradDist2: tensor, gradXyz1: tensor!, "
                                     "gradXyz2: tensor!")
def chamfer_distance_backward(c: Call) -> Kernel:
    """Gradient of the Chamfer distance ``dist1[i] = min_j |p1_i - p2_j|^2`` (idx1 the
    argmin) and ``dist2`` likewise: ``2 g1_i (p1_i - p2_idx1[i])`` into point i of xyz1 and
    its negative into point idx1[i] of xyz2, and the same for dist2 the other way round."""
    dtype = promoted(c, CHAMFER_DTYPES, "xyz1", "xyz2", "gradDist1", "gradDist2")
    c.check_dtype("idx1", CHAMFER_INDEX_DTYPES)
    c.check_dtype("idx2", CHAMFER_INDEX_DTYPES)
    xyz1, xyz2 = c.tensor("xyz1"), c.tensor("xyz2")
    for name, points in (("xyz1", xyz1), ("xyz2", xyz2)):
        if points.ndim != 3 or points.shape[2] != POINT_DIMS:
            raise c.fail(name, f"shape must be (B, N, {POINT_DIMS})")
    if xyz2.shape[0] != xyz1.shape[0]:
        raise c.fail("xyz2", f"batch must equal xyz1's ({xyz1.shape[0]})")
    for name, points in (("idx1", xyz1), ("gradDist1", xyz1), ("idx2", xyz2),
                         ("gradDist2", xyz2)):
        if c.tensor(name).shape != points.shape[:2]:
            raise c.fail(name, f"shape must be {list(points.shape[:2])}")
    c.check_out("gradXyz1", xyz1.shape, dtype)
    c.check_out("gradXyz2", xyz2.shape, dtype)
    # a point may take the pushes of many others, of both signs: float32 sums lose ~1e-3
    # relative there, so the gradients accumulate in float64 and are rounded once
    compute = FLOAT64
    op = c.op_name

    def pull(points, index, size: int):
        """points[b, index[b, i]] for every b, i (index checked to lie in [0, size))."""
        index = _check_index_range(op, "idx", as_array(index), size)
        return np.take_along_axis(points, index[:, :, None], axis=1), index

    def push(grad, index, values) -> None:
        """grad[b, index[b, i]] -= values[b, i] (several i may name one point)."""
        batch = array_module(grad).arange(grad.shape[0])[:, None] * grad.shape[1]
        flat = grad.reshape(-1, POINT_DIMS)
        np.add.at(flat, (index + batch).reshape(-1), -values.reshape(-1, POINT_DIMS))

    @quiet
    def kernel(v) -> None:
        p1, p2 = v.compute("xyz1", compute), v.compute("xyz2", compute)
        nearest2, index1 = pull(p2, v["idx1"], p2.shape[1])
        nearest1, index2 = pull(p1, v["idx2"], p1.shape[1])
        step1 = compute.type(2) * v.compute("gradDist1", compute)[:, :, None] * (p1 - nearest2)
        step2 = compute.type(2) * v.compute("gradDist2", compute)[:, :, None] * (p2 - nearest1)
        grad1, grad2 = step1.copy(), step2.copy()
        push(grad2, index1, step1)
        push(grad1, index2, step2)
        v.write("gradXyz1", grad1)
        v.write("gradXyz2", grad2)
    return kernel
