"""Loss operators: pointwise losses (MseLoss, L1Loss, SmoothL1Loss, SoftMarginLoss, KlDiv,
BinaryCrossEntropy, BinaryCrossEntropyWithLogits), Logit, the class-index losses (NLLLoss,
NLLLoss2d, CrossEntropyLoss, SoftmaxCrossEntropyWithLogits); their backward operators live in
``loss_backward.py``.

Argument lists, argument order and dtype lists are CANN's (``hicann/ops-nn`` ``loss/*/docs``,
``hicann/ops-math`` ``math/kl_div_v2``), plus float64 for every floating operator (the CPU
reference dtype); semantics are PyTorch's:

* ``reduction`` is CANN's int64: 0 none, 1 mean, 2 sum (KlDiv also 3, batchmean: the sum
  over ``self.size(0)``); CrossEntropyLoss takes it as a string (``"mean"``...). A reduced
  loss is a 0-dim result that fits any one-element ``out`` (CANN documents ``[1]`` for
  several). A mean over no element is NaN, a sum 0.
* Operands of a pointwise loss broadcast together and promote (torch's rules); float16 and
  bfloat16 are computed in float32, sums accumulate in float64, and the result is rounded
  once into ``out``.
* The BinaryCrossEntropy family promotes its operands (CANN's own cases mix float16,
  bfloat16 and float32 weights with any input dtype). BinaryCrossEntropy clamps each log
  at -100 (torch), so a probability of 0 or 1 gives a finite loss.
* KlDiv with ``logTarget`` false uses ``xlogy``: a target of 0 adds 0, a negative target
  NaN.
* Class-index losses: a target equal to ``ignoreIndex`` adds nothing (nor weight); any
  other target outside ``[0, C)`` is found by the kernel, which raises, so the stream fails
  naming the argument and the value. A mean divides by the summed weight of the counted
  targets (NaN when it is 0, as torch).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import FLOAT_DTYPES, Call, Kernel, array_module, as_array
from openacl.ops.fpstate import quiet
from openacl.ops.movement import _check_index_range
from openacl.ops.reduction import _declare_out, _store
from openacl.ops.registry import register

REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM, REDUCTION_BATCHMEAN = 0, 1, 2, 3
REDUCTION_NAMES = {"none": REDUCTION_NONE, "mean": REDUCTION_MEAN, "sum": REDUCTION_SUM}
BCE_LOG_FLOOR = -100.0  # torch clamps each log of BinaryCrossEntropy at -100
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)

LOSS_DTYPES = FLOAT_DTYPES  # FLOAT, FLOAT16, BFLOAT16 (+ float64)
L1_LOSS_DTYPES = FLOAT_DTYPES | {INT64}
CLASS_INDEX_DTYPES = frozenset(np.dtype(t) for t in (np.int64, np.uint8, np.int32))  # NLLLoss
CROSS_ENTROPY_TARGET_DTYPES = frozenset(np.dtype(t) for t in (np.int64, np.int32))
CROSS_ENTROPY_WEIGHT_DTYPES = frozenset({np.dtype(np.float32)})
SMOOTHING_RANGE = (0.0, 1.0)  # CrossEntropyLoss's labelSmoothing: [0, 1]
MARGIN_BLOCK_ELEMENTS = 1 << 22  # MultilabelMarginLoss: (rows, C, C) margins per pass, elements


# -- argument helpers (shared with loss_backward.py) -------------------------------------------
def reduction_arg(c: Call, name: str = "reduction", largest: int = REDUCTION_SUM) -> int:
    """The int ``reduction`` argument, checked to lie in ``[0, largest]``."""
    value = c[name]
    if not 0 <= value <= largest:
        listed = "|".join(str(v) for v in range(largest + 1))
        raise c.fail(name, f"must be one of {listed} (0 none, 1 mean, 2 sum"
                           f"{', 3 batchmean' if largest >= REDUCTION_BATCHMEAN else ''})")
    return value


def reduction_name_arg(c: Call, name: str = "reductionOptional") -> int:
    """A string reduction (``"mean"``, ``"sum"``, ``"none"``; null means ``"mean"``)."""
    value = c[name]
    if value is None:
        return REDUCTION_MEAN
    if value not in REDUCTION_NAMES:
        raise c.fail(name, f"must be one of {', '.join(REDUCTION_NAMES)}")
    return REDUCTION_NAMES[value]


def check_same_dtype(c: Call, dtype: np.dtype, *names: str, like: str = "self") -> None:
    """Each given tensor among ``names`` must have ``dtype`` (the doc's "same as self")."""
    for name in names:
        if c[name] is not None and c.dtype(name) != dtype:
            raise c.fail(name, f"dtype must equal {like}'s ({dtype})")


def promoted(c: Call, supported: frozenset, *names: str) -> np.dtype:
    """The promoted dtype of tensors ``names``; each and the result must be ``supported``."""
    present = [n for n in names if c[n] is not None]
    for name in present:
        c.check_dtype(name, supported)
    return c.check_dtype(present[-1], supported, c.result_type(*present))


def broadcast_to(c: Call, shape: tuple[int, ...], *names: str) -> None:
    """Each given tensor among ``names`` must broadcast to ``shape`` (without growing it)."""
    for name in names:
        if c[name] is None:
            continue
        try:
            fits = np.broadcast_shapes(c.tensor(name).shape, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise c.fail(name, f"shape cannot be broadcast to {list(shape)}")


def reduce_loss(loss, reduction: int, batch: int | None = None, axis: int | None = None):
    """``loss`` itself (none), or its float64 mean, sum, or sum over ``batch`` (batchmean),
    over every element (or along ``axis``)."""
    if reduction == REDUCTION_NONE:
        return loss
    total = np.sum(loss, axis=axis, dtype=FLOAT64 if loss.dtype.kind == "f" else None)
    if reduction == REDUCTION_MEAN:
        count = loss.size if axis is None else loss.shape[axis]
        return total / count if count else array_module(loss).full(np.shape(total), np.nan)
    if reduction == REDUCTION_BATCHMEAN and batch:
        return total / batch
    return total


def declare_loss_out(c: Call, name: str, shape: tuple[int, ...], dtype: np.dtype,
                     reduction: int) -> None:
    """Output ``name``: ``shape`` when not reduced, else 0-dim (or any one-element tensor)."""
    if reduction == REDUCTION_NONE:
        c.check_out(name, shape, dtype)
    else:
        _declare_out(c, name, (), dtype)


def gradient_scale(reduction: int, count: int, batch: int | None = None) -> float:
    """What a backward multiplies by: 1 / count for mean, 1 / batch for batchmean, else 1."""
    if reduction == REDUCTION_MEAN:
        return 1.0 / count if count else float("nan")
    if reduction == REDUCTION_BATCHMEAN and batch:
        return 1.0 / batch
    return 1.0


# -- pointwise losses ---------------------------------------------------------------------------
PointwiseLoss = Callable[..., object]  # (x, y, **attributes) -> elementwise loss


def _pointwise(c: Call, fn: PointwiseLoss, supported: frozenset = LOSS_DTYPES,
               largest: int = REDUCTION_SUM, out: str = "out", axis: int | None = None,
               wide: bool = False, **attributes: float) -> Kernel:
    """``out = reduce(fn(self, target))`` over the broadcast of self and target (every
    element, or only ``axis``); ``wide``: computed in float64."""
    dtype = promoted(c, supported, "self", "target")
    shape = c.broadcast("self", "target")
    reduction = reduction_arg(c, largest=largest)
    if axis is None:
        declare_loss_out(c, out, shape, dtype, reduction)
    elif not shape:
        raise c.fail("self", "must have at least 1 dim (the reduction is along dim 0)")
    else:
        c.check_out(out, shape if reduction == REDUCTION_NONE else shape[1:], dtype)
    compute = FLOAT64 if wide else promotion.compute_dtype(dtype)
    self_shape = c.tensor("self").shape
    batch = self_shape[0] if self_shape else None

    @quiet
    def kernel(v) -> None:
        loss = fn(v.compute("self", compute), v.compute("target", compute), **attributes)
        _store(v, out, reduce_loss(as_array(loss), reduction, batch, axis))
    return kernel


def fresh(value):
    """A ufunc's result as an array that may receive ``out=`` (numpy gives a 0-dim operand's
    result as a scalar)."""
    return np.asarray(value) if isinstance(value, np.generic) else value


def _squared_error(x, y):
    difference = fresh(np.subtract(x, y))
    return np.multiply(difference, difference, out=difference)


def _absolute_error(x, y):
    difference = fresh(np.subtract(x, y))
    return np.abs(difference, out=difference)


def _smooth_l1(x, y, beta: float):
    difference = np.abs(np.subtract(x, y))
    if beta == 0.0:  # the L1 loss (torch): no division by beta
        return difference
    # with m = min(|d|, beta): m (|d| - m / 2) / beta is 0.5 d^2 / beta below beta and
    # |d| - beta / 2 above it, without a select
    low = np.minimum(difference, difference.dtype.type(beta))
    if not difference.ndim:
        return low * (difference - low * low.dtype.type(0.5)) * low.dtype.type(1.0 / beta)
    half = np.multiply(low, low.dtype.type(0.5))  # fresh arrays, updated in place
    np.subtract(difference, half, out=difference)
    np.multiply(difference, low, out=difference)
    if beta != 1.0:
        np.multiply(difference, difference.dtype.type(1.0 / beta), out=difference)
    return difference


def softplus(z):
    """``log(1 + exp(z))`` without overflow: ``max(z, 0) + log1p(exp(-|z|))`` (numpy's
    logaddexp is ~5x slower)."""
    return np.maximum(z, z.dtype.type(0)) + np.log1p(np.exp(-np.abs(z)))


def _soft_margin(x, y):
    return softplus(-(y * x))


def _kl_div(x, y, log_target: bool):
    if log_target:
        return np.exp(y) * (y - x)
    # xlogy(y, y) - y * x: 0 where y == 0, NaN where y < 0 (log of a negative)
    entropy = np.where(y == 0, y.dtype.type(0), y * np.log(y))
    return entropy - y * x


@register("MseLoss", "self: tensor, target: tensor, reduction: int = 1, out: tensor!")
def mse_loss(c: Call) -> Kernel:
    """Mean squared error ``(self - target)^2``, reduced by ``reduction`` (0 none, 1 mean,
    2 sum)."""
    return _pointwise(c, _squared_error)


@register("MseLossOut", "self: tensor, target: tensor, reduction: int = 1, out: tensor!")
def mse_loss_out(c: Call) -> Kernel:
    """Squared error ``(self - target)^2`` whose mean or sum runs along dim 0 only (CANN's
    aclnn_mse_loss_out.cpp: out has the broadcast shape without its first dim)."""
    return _pointwise(c, _squared_error, axis=0)


@register("L1Loss", "self: tensor, target: tensor, reduction: int = 1, out: tensor!")
def l1_loss(c: Call) -> Kernel:
    """Mean absolute error ``|self - target|``; int64 operands stay integral (a mean needs
    one floating operand, as CANN's doc says)."""
    dtype = promoted(c, L1_LOSS_DTYPES, "self", "target")
    if reduction_arg(c) == REDUCTION_MEAN and not promotion.is_floating(dtype):
        raise c.fail("reduction", "a mean needs self or target to be floating")
    return _pointwise(c, _absolute_error, L1_LOSS_DTYPES)


@register("SmoothL1Loss", "self: tensor, target: tensor, reduction: int = 1, "
                          "beta: float = 1.0, result: tensor!")
def smooth_l1_loss(c: Call) -> Kernel:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (d = self - target);
    ``beta`` must be non-negative (0: the L1 loss)."""
    beta = c["beta"]
    if not beta >= 0.0:
        raise c.fail("beta", "must be non-negative")
    return _pointwise(c, _smooth_l1, out="result", beta=beta)


@register("SoftMarginLoss", "self: tensor, target: tensor, reduction: int = 1, out: tensor!")
def soft_margin_loss(c: Call) -> Kernel:
    """Two-class logistic loss ``log(1 + exp(-target * self))``."""
    return _pointwise(c, _soft_margin)


@register("KlDiv", "self: tensor, target: tensor, reduction: int = 1, logTarget: bool = False, "
                   "out: tensor!")
def kl_div(c: Call) -> Kernel:
    """Kullback-Leibler divergence of log-probabilities ``self`` from ``target``
    (``logTarget``: target holds log-probabilities); reduction 3 is batchmean."""
    # target (log target - self) cancels where the two are close: float32 loses ~1e-3
    # relative there (past CANN's standard in 5 of its cases); float64 does not
    return _pointwise(c, _kl_div, largest=REDUCTION_BATCHMEAN, wide=True,
                      log_target=bool(c["logTarget"]))


# -- binary cross entropy -----------------------------------------------------------------------
def bce_terms(x, y):
    """``-(y log x + (1 - y) log(1 - x))`` with each log clamped at -100 (torch)."""
    one = x.dtype.type(1)
    floor = x.dtype.type(BCE_LOG_FLOOR)
    return -(y * np.maximum(np.log(x), floor) + (one - y) * np.maximum(np.log1p(-x), floor))


def bce_with_logits_terms(x, y, pos_weight=None):
    """``-(p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x)))`` without overflow (p the
    positive-class weight, 1 when absent): ``(1 - y) x + (1 + (p - 1) y) softplus(-x)``."""
    one = x.dtype.type(1)
    softplus_neg = softplus(-x)
    if pos_weight is None:
        return (one - y) * x + softplus_neg
    return (one - y) * x + (one + (pos_weight - one) * y) * softplus_neg


@register("BinaryCrossEntropy", "self: tensor, target: tensor, weight: tensor?, "
                                "reduction: int = 1, out: tensor!")
def binary_cross_entropy(c: Call) -> Kernel:
    """Binary cross entropy of probabilities ``self`` against ``target``, times ``weight``
    (broadcast to self; null: 1)."""
    dtype = promoted(c, LOSS_DTYPES, "self", "target", "weight")
    shape = c.tensor("self").shape
    if c.tensor("target").shape != shape:
        raise c.fail("target", f"shape must equal self's {list(shape)}")
    broadcast_to(c, shape, "weight")
    reduction = reduction_arg(c)
    declare_loss_out(c, "out", shape, dtype, reduction)
    compute = promotion.compute_dtype(dtype)
    weighted = c.has("weight")

    @quiet
    def kernel(v) -> None:
        loss = bce_terms(v.compute("self", compute), v.compute("target", compute))
        if weighted:
            loss = loss * v.compute("weight", compute)
        _store(v, "out", reduce_loss(loss, reduction))
    return kernel


@register("BinaryCrossEntropyWithLogits", "self: tensor, target: tensor, "
                                          "weightOptional: tensor?, posWeightOptional: tensor?, "
                                          "reduction: int = 1, out: tensor!")
def binary_cross_entropy_with_logits(c: Call) -> Kernel:
    """Binary cross entropy of ``sigmoid(self)`` against ``target``, with optional weights
    and positive-class weights (each broadcast to self)."""
    dtype = promoted(c, LOSS_DTYPES, "self", "target", "weightOptional", "posWeightOptional")
    shape = c.tensor("self").shape
    if c.tensor("target").shape != shape:
        raise c.fail("target", f"shape must equal self's {list(shape)}")
    broadcast_to(c, shape, "weightOptional", "posWeightOptional")
    reduction = reduction_arg(c)
    declare_loss_out(c, "out", shape, dtype, reduction)
    compute = promotion.compute_dtype(dtype)
    weighted, positive = c.has("weightOptional"), c.has("posWeightOptional")

    @quiet
    def kernel(v) -> None:
        pos_weight = v.compute("posWeightOptional", compute) if positive else None
        loss = bce_with_logits_terms(v.compute("self", compute), v.compute("target", compute),
                                     pos_weight)
        if weighted:
            loss = loss * v.compute("weightOptional", compute)
        _store(v, "out", reduce_loss(loss, reduction))
    return kernel


# -- Logit ---------------------------------------------------------------------------------------
@register("Logit", "input: tensor, eps: float = -1.0, out: tensor!")
def logit(c: Call) -> Kernel:
    """``log(z / (1 - z))`` with ``z = clamp(input, eps, 1 - eps)``; a negative ``eps``
    clamps nothing (input outside [0, 1] then gives NaN)."""
    dtype = c.check_dtype("input", LOSS_DTYPES)
    c.check_out("out", c.tensor("input").shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    eps = c["eps"]

    @quiet
    def kernel(v) -> None:
        z = v.compute("input", compute)
        if eps >= 0.0:
            z = np.clip(z, compute.type(eps), compute.type(1.0 - eps))
        rest = np.subtract(compute.type(1), z)
        # near z = 1/2 the odds are near 1 and their log cancels: there log1p of
        # (2z - 1) / (1 - z) (2z - 1 is exact) keeps the relative precision
        centered = np.subtract(np.add(z, z), compute.type(1))
        near = np.abs(centered) < compute.type(0.5)
        v.write("out", np.where(near, np.log1p(centered / rest), np.log(z / rest)))
    return kernel


# -- class-index losses --------------------------------------------------------------------------
def check_class_index(op: str, target, mask, classes: int):
    """Targets made safe to gather: ignored ones become 0; the others must be in
    ``[0, classes)`` (else the kernel raises, naming the first bad value)."""
    _check_index_range(op, "target", target[mask], classes)
    return np.where(mask, target, target.dtype.type(0)).astype(np.int64, copy=False)


def nll_rows(op: str, x, target, weight, ignore_index: int, compute: np.dtype | None = None):
    """For class scores ``x`` (M, C) and targets (M,): ``(-x[m, t_m] w[t_m], w[t_m])``, both
    0 where the target is ``ignore_index``; the picked scores converted to ``compute``
    (default: x's dtype), the rest of x never read."""
    compute = x.dtype if compute is None else compute
    classes = x.shape[1]
    target = as_array(target).reshape(-1)
    mask = target != ignore_index
    safe = check_class_index(op, target, mask, classes)
    picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0].astype(compute)
    chosen = weight[safe] * mask if weight is not None else mask.astype(compute)
    return -(picked * chosen), chosen


def nll_classes(c: Call, two_d: bool) -> int:
    """The class count of an NLLLoss-family call, after its shape checks: self (N, C) with
    target (N), or (C) with target () (``two_d``: self (N, C, H, W), target (N, H, W)), and
    one weight per class."""
    c.check_dtype("target", CLASS_INDEX_DTYPES)
    self, target = c.tensor("self"), c.tensor("target")
    if two_d:
        if self.ndim != 4 or target.shape != (self.shape[0], *self.shape[2:]):
            raise c.fail("target", f"self must be 4-D (N, C, H, W) and target 3-D (N, H, W); "
                                   f"self is {list(self.shape)}")
    elif self.ndim not in (1, 2) or target.shape != self.shape[:-1]:
        raise c.fail("target", f"self must be (N, C) with target (N), or (C) with target (); "
                               f"self is {list(self.shape)}")
    classes = self.shape[1] if self.ndim > 1 else self.shape[0]
    if c.tensor("weight").shape != (classes,):
        raise c.fail("weight", f"shape must be [{classes}] (one weight per class)")
    return classes


def _nll_prepare(c: Call, two_d: bool) -> Kernel:
    """NLLLoss (self (N, C) or (C)) and NLLLoss2d (self (N, C, H, W))."""
    dtype = c.check_dtype("self", LOSS_DTYPES)
    check_same_dtype(c, dtype, "weight")
    classes = nll_classes(c, two_d)
    target = c.tensor("target")
    reduction = reduction_arg(c)
    declare_loss_out(c, "out", target.shape, dtype, reduction)
    _declare_out(c, "totalWeightOut", (), dtype)
    compute = promotion.compute_dtype(dtype)
    ignore_index = c["ignoreIndex"]
    op = c.op_name

    @quiet
    def kernel(v) -> None:
        x = v["self"]  # only the picked scores are converted
        rows = np.moveaxis(x, 1, -1).reshape(-1, classes) if x.ndim > 1 else x.reshape(1, -1)
        losses, chosen = nll_rows(op, rows, v["target"], v.compute("weight", compute),
                                  ignore_index, compute)
        total_weight = np.sum(chosen, dtype=FLOAT64)
        if reduction == REDUCTION_NONE:
            _store(v, "out", losses.reshape(target.shape))
            # torch: the weight of a lone (C) sample, 0 for a batch that is not reduced
            _store(v, "totalWeightOut", total_weight if x.ndim == 1 else total_weight * 0)
            return
        total = np.sum(losses, dtype=FLOAT64)
        _store(v, "out", total / total_weight if reduction == REDUCTION_MEAN else total)
        _store(v, "totalWeightOut", total_weight)
    return kernel


@register("NLLLoss", "self: tensor, target: tensor, weight: tensor, reduction: int = 1, "
                     "ignoreIndex: int = -100, out: tensor!, totalWeightOut: tensor!")
def nll_loss(c: Call) -> Kernel:
    """Negative log likelihood ``-weight[t] * self[n, t]`` of log-probabilities self (N, C)
    or (C) at class-index targets; ``totalWeightOut`` is the summed weight of the counted
    targets."""
    return _nll_prepare(c, two_d=False)


@register("NLLLoss2d", "self: tensor, target: tensor, weight: tensor, reduction: int = 1, "
                       "ignoreIndex: int = -100, out: tensor!, totalWeightOut: tensor!")
def nll_loss2d(c: Call) -> Kernel:
    """NLLLoss over images: self (N, C, H, W), target (N, H, W)."""
    return _nll_prepare(c, two_d=True)


def log_softmax_rows(x):
    """``(log_softmax(x, -1), logsumexp(x, -1))`` of rows ``x`` (M, C); the sum of exps in
    float64 (its log near 0 cancels), the result in x's dtype."""
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, x.dtype.type(0))  # an inf row keeps inf - inf out
    shifted = x - top
    total = np.sum(np.exp(shifted), axis=-1, keepdims=True, dtype=FLOAT64)
    log_total = np.log(total).astype(x.dtype, copy=False)
    return shifted - log_total, (top + log_total)[:, 0]


@register("CrossEntropyLoss", "input: tensor, target: tensor, weightOptional: tensor?, "
                              "reductionOptional: str? = 'mean', ignoreIndex: int = -100, "
                              "labelSmoothing: float = 0.0, lseSquareScaleForZloss: float = 0.0, "
                              "returnZloss: bool = False, lossOut: tensor!, logProbOut: tensor!, "
                              "zlossOut: tensor!, lseForZlossOut: tensor!")
def cross_entropy_loss(c: Call) -> Kernel:
    """Cross entropy of logits ``input`` (N, C) at class indices ``target`` (N), with class
    weights and label smoothing as torch's ``cross_entropy``; also the log-probabilities,
    the z-loss ``lseSquareScaleForZloss * logsumexp^2`` (reduced as the loss, a mean over
    the counted rows) and the logsumexp of each row."""
    dtype = c.check_dtype("input", LOSS_DTYPES)
    c.check_dtype("target", CROSS_ENTROPY_TARGET_DTYPES)
    if c.has("weightOptional"):
        c.check_dtype("weightOptional", CROSS_ENTROPY_WEIGHT_DTYPES)
    x, target = c.tensor("input"), c.tensor("target")
    if x.ndim != 2 or x.shape[1] == 0:
        raise c.fail("input", "must be 2-D (N, C) with C > 0")
    rows, classes = x.shape
    if target.shape != (rows,):
        raise c.fail("target", f"shape must be [{rows}] (one class index per row)")
    if c.has("weightOptional") and c.tensor("weightOptional").shape != (classes,):
        raise c.fail("weightOptional", f"shape must be [{classes}] (one weight per class)")
    reduction = reduction_name_arg(c)
    smoothing = c["labelSmoothing"]
    if not SMOOTHING_RANGE[0] <= smoothing <= SMOOTHING_RANGE[1]:
        raise c.fail("labelSmoothing", "must be in [0, 1]")
    zscale = c["lseSquareScaleForZloss"]
    declare_loss_out(c, "lossOut", (rows,), dtype, reduction)
    c.check_out("logProbOut", (rows, classes), dtype, exact_dtype=True)
    declare_loss_out(c, "zlossOut", (rows,), dtype, reduction)
    c.check_out("lseForZlossOut", (rows,), dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    weighted, ignore_index, op = c.has("weightOptional"), c["ignoreIndex"], c.op_name

    @quiet
    def kernel(v) -> None:
        log_prob, lse = log_softmax_rows(v.compute("input", compute))
        weight = v.compute("weightOptional", compute) if weighted else None
        losses, chosen = nll_rows(op, log_prob, v["target"], weight, ignore_index)
        counted_rows = as_array(v["target"]).reshape(-1) != ignore_index
        if smoothing:  # plus smoothing / C times the (weighted) loss of every class
            scaled = log_prob * weight if weighted else log_prob
            smooth = -np.sum(scaled, axis=1, dtype=FLOAT64) * counted_rows
            losses = (1.0 - smoothing) * losses + (smoothing / classes) * smooth
        zloss = zscale * lse.astype(FLOAT64) ** 2 * counted_rows
        if reduction == REDUCTION_NONE:
            _store(v, "lossOut", losses)
            _store(v, "zlossOut", zloss)
        else:
            total = np.sum(losses, dtype=FLOAT64)
            ztotal = np.sum(zloss)
            if reduction == REDUCTION_MEAN:
                total = total / np.sum(chosen, dtype=FLOAT64)
                ztotal = ztotal / np.sum(counted_rows, dtype=FLOAT64)
            _store(v, "lossOut", total)
            _store(v, "zlossOut", ztotal)
        v.write("logProbOut", log_prob)
        v.write("lseForZlossOut", lse)
    return kernel


@register("SoftmaxCrossEntropyWithLogits", "features: tensor, labels: tensor, loss: tensor!, "
                                           "backprop: tensor!")
def softmax_cross_entropy_with_logits(c: Call) -> Kernel:
    """``loss = -sum(labels * log_softmax(features), 1)`` per row of features (N, C) and
    ``backprop = softmax(features) - labels``, its gradient (TensorFlow's fused op)."""
    dtype = c.check_dtype("features", LOSS_DTYPES)
    check_same_dtype(c, dtype, "labels", like="features")
    features = c.tensor("features")
    if features.ndim != 2:
        raise c.fail("features", "must be 2-D (N, C)")
    if c.tensor("labels").shape != features.shape:
        raise c.fail("labels", f"shape must equal features' {list(features.shape)}")
    c.check_out("loss", features.shape[:1], dtype, exact_dtype=True)
    c.check_out("backprop", features.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    @quiet
    def kernel(v) -> None:
        x = v.compute("features", compute)
        if x.size == 0:
            _store(v, "loss", np.sum(x, axis=1))
            return
        log_prob, _ = log_softmax_rows(x)
        labels = v.compute("labels", compute)
        v.write("loss", -np.sum(labels * log_prob, axis=1, dtype=FLOAT64))
        v.write("backprop", np.exp(log_prob) - labels)
    return kernel


@register("MultilabelMarginLoss", "self: tensor, target: tensor, reduction: int = 1, "
                                  "out: tensor!, isTarget: tensor!")
def multilabel_margin_loss(c: Call) -> Kernel:
    """``sum over target classes j and other classes i of max(0, 1 - (x[j] - x[i])) / C``
    per sample of self (N, C) or (C); target holds class indices up to its first -1.
    ``isTarget`` is the 0/1 mask of each sample's target classes (self's dtype)."""
    dtype = c.check_dtype("self", LOSS_DTYPES)
    c.check_dtype("target", CROSS_ENTROPY_TARGET_DTYPES)
    self = c.tensor("self")
    if self.ndim not in (1, 2) or self.shape[-1] == 0:
        raise c.fail("self", "must be (N, C) or (C) with C > 0")
    if c.tensor("target").shape != self.shape:
        raise c.fail("target", f"shape must equal self's {list(self.shape)}")
    reduction = reduction_arg(c)
    declare_loss_out(c, "out", self.shape[:-1], dtype, reduction)
    c.check_out("isTarget", self.shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    classes = self.shape[-1]
    op = c.op_name

    @quiet
    def kernel(v) -> None:
        x = v.compute("self", compute).reshape(-1, classes)
        labels = as_array(v["target"]).reshape(-1, classes).astype(np.int64, copy=False)
        counted = np.cumprod(labels != -1, axis=1).astype(bool)  # the labels before a -1
        safe = check_class_index(op, labels, counted, classes)
        xp = array_module(x)
        marks = xp.zeros((x.shape[0], classes + 1), compute)  # column C takes the padding
        np.put_along_axis(marks, np.where(counted, safe, classes), compute.type(1), axis=1)
        is_target = marks[:, :classes]
        picked = np.take_along_axis(x, safe, axis=1)
        losses = xp.zeros(x.shape[0], FLOAT64)
        block = max(1, MARGIN_BLOCK_ELEMENTS // (classes * classes))
        for start in range(0, x.shape[0], block):  # (rows, j, i) margins, bounded memory
            rows = slice(start, start + block)
            margins = compute.type(1) - picked[rows, :, None] + x[rows, None, :]
            keep = counted[rows, :, None] & (is_target[rows, None, :] == 0) & (margins > 0)
            # selected, not multiplied by the mask: a NaN margin (inf - inf) is not > 0 and
            # counts nothing, as torch's loop skips it
            losses[rows] = np.sum(xp.where(keep, margins, compute.type(0)), axis=(1, 2),
                                  dtype=FLOAT64) / classes
        _store(v, "out", reduce_loss(losses, reduction).reshape(
            () if reduction != REDUCTION_NONE else self.shape[:-1]))
        v.write("isTarget", is_target.reshape(self.shape))
    return kernel


@register("FusedCrossEntropyLossWithMaxSum",
          "logitsMax: tensor, sumExpLogits: tensor, predictedLogits: tensor, "
          "labelSmoothing: float = 0.0, inputOptional: tensor?, weightOptional: tensor?, "
          "vocabParallelLogitsOptional: tensor?, lossOut: tensor!, softMaxOutOptional: tensor!?")
def fused_cross_entropy_loss_with_max_sum(c: Call) -> Kernel:
    """The last step of a vocabulary-parallel cross entropy (Megatron's): ``lossOut =
    log(sumExpLogits) - predictedLogits`` per row and, given the logits (N, V),
    ``softMaxOutOptional = exp(logits - logitsMax) / sumExpLogits``. The matmul operands
    ``inputOptional`` and ``weightOptional`` are not read (CANN computes from the logits)."""
    for name in ("logitsMax", "sumExpLogits", "predictedLogits"):
        c.check_dtype(name, CROSS_ENTROPY_WEIGHT_DTYPES)
    rows = c.tensor("logitsMax").shape
    if len(rows) != 1:
        raise c.fail("logitsMax", "must be 1-D (one maximum per row)")
    for name in ("sumExpLogits", "predictedLogits"):
        if c.tensor(name).shape != rows:
            raise c.fail(name, f"shape must equal logitsMax's {list(rows)}")
    if c["labelSmoothing"] != 0.0:
        raise c.fail("labelSmoothing", "only 0 is supported (CANN's kernel has no smoothing)")
    float32 = np.dtype(np.float32)
    c.check_out("lossOut", rows, float32, exact_dtype=True)
    # (the C face may pass logits without an output for the softmax: then none is written)
    with_softmax = c.has("vocabParallelLogitsOptional") and (
        c.infer or c.has("softMaxOutOptional"))
    if with_softmax:
        logits = c.tensor("vocabParallelLogitsOptional")
        c.check_dtype("vocabParallelLogitsOptional", LOSS_DTYPES)
        if logits.ndim != 2 or logits.shape[0] != rows[0]:
            raise c.fail("vocabParallelLogitsOptional", f"must be 2-D with {rows[0]} rows")
        c.check_out("softMaxOutOptional", logits.shape, float32, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        total = v.compute("sumExpLogits", float32)
        v.write("lossOut", np.log(total) - v.compute("predictedLogits", float32))
        if with_softmax:
            shifted = v.compute("vocabParallelLogitsOptional", float32) - \
                v.compute("logitsMax", float32)[:, None]
            v.write("softMaxOutOptional", np.exp(shifted) / total[:, None])
    return kernel
