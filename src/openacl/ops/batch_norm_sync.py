"""The pieces of synchronized (multi-device) batch normalization: BatchNormStats,
BatchNormGatherStatsWithCounts, BatchNormElemt, BatchNormReduceBackward,
BatchNormElemtBackward.

Semantics are PyTorch's ``batch_norm_stats`` / ``batch_norm_gather_stats_with_counts`` /
``batch_norm_elemt`` / ``batch_norm_backward_reduce`` / ``batch_norm_backward_elemt`` (what
``torch.nn.SyncBatchNorm`` calls between its all-gathers), over axis 1 of a 2-8 dim input:

* stats: per-channel ``mean`` and ``invstd = 1 / sqrt(biased var + eps)`` (float32);
* gather: the per-device ``(mean, invstd, count)`` rows combined into the global mean and
  invstd (``var_i = 1 / invstd_i^2 - eps``, then the pooled variance); the running
  statistics, when given, move by ``momentum`` towards them (the variance unbiased);
* elemt: ``(x - mean) * invstd * weight + bias``;
* reduce backward: ``sumDy = sum(dy)``, ``sumDyXmu = sum(dy * (x - mean))``, ``gradWeight =
  sumDyXmu * invstd``, ``gradBias = sumDy``;
* elemt backward: ``(dy - sumDy / n - (x - mean) * invstd^2 * sumDyXmu / n) * invstd *
  weight`` with ``n = sum(counter)``, the elements per channel over every device.

Sums are float64, rounded once into each output.
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import Call, Kernel
from openacl.ops.normalization import (
    CHANNEL_AXIS,
    FLOAT32,
    NORM_DTYPES,
    _channel_input,
    _moments,
    _param_dtype,
    _rsqrt,
)
from openacl.ops.registry import register

FLOAT64 = np.dtype(np.float64)
COUNTER_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.float16), FLOAT32})


def _channels(c: Call, names, channels: int, dtype: np.dtype) -> None:
    """Per-channel tensors: a float dtype (the input's or float32), ``channels`` elements."""
    for name in names:
        if c[name] is None:
            continue
        c.check_dtype(name, NORM_DTYPES)
        _param_dtype(c, name, dtype)
        if c.tensor(name).numel != channels or c.tensor(name).ndim != 1:
            raise c.fail(name, f"must be 1-D with C = {channels} elements")


def _axes(shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reduced axes, per-channel broadcast shape) of an (N, C, ...) input."""
    reduce = tuple(a for a in range(len(shape)) if a != CHANNEL_AXIS)
    return reduce, (shape[CHANNEL_AXIS], *(1,) * (len(shape) - 2))


@register("BatchNormStats", "input: tensor, eps: float = 1e-05, mean: tensor!, "
                            "invstd: tensor!")
def batch_norm_stats(c: Call) -> Kernel:
    """Per-channel mean and invstd (float32) of this device's batch."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    c.check_out("mean", (channels,), FLOAT32, exact_dtype=True)
    c.check_out("invstd", (channels,), FLOAT32, exact_dtype=True)
    reduce, _ = _axes(shape)
    eps = c["eps"]

    def kernel(v) -> None:
        mean, _, variance = _moments(v.compute("input", FLOAT64), reduce)
        v.write("mean", mean.reshape(channels))
        v.write("invstd", _rsqrt(variance, eps).reshape(channels))
    return kernel


@register("BatchNormGatherStatsWithCounts",
          "input: tensor, mean: tensor, invstd: tensor, runningMean: tensor?, "
          "runningVar: tensor?, momentum: float = 0.1, eps: float = 1e-05, counts: tensor, "
          "meanAll: tensor!, invstdAll: tensor!")
def batch_norm_gather_stats_with_counts(c: Call) -> Kernel:
    """The global mean and invstd from every device's (mean, invstd, count); the running
    statistics (inputs written in place, as BatchNorm's) are updated when given."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    devices = None
    for name in ("mean", "invstd"):
        c.check_dtype(name, NORM_DTYPES)
        stat = c.tensor(name).shape
        if len(stat) != 2 or stat[1] != channels or (devices is not None and
                                                     stat[0] != devices):
            raise c.fail(name, f"shape must be (devices, C = {channels}), the same for mean "
                               f"and invstd")
        devices = stat[0]
    c.check_dtype("counts", NORM_DTYPES)
    if c.tensor("counts").shape != (devices,):
        raise c.fail("counts", f"must be 1-D with one count per device ({devices})")
    _channels(c, ("runningMean", "runningVar"), channels, dtype)
    c.check_out("meanAll", (channels,), dtype)
    c.check_out("invstdAll", (channels,), dtype)
    momentum, eps = c["momentum"], c["eps"]

    def kernel(v) -> None:
        mean = v.compute("mean", FLOAT64)
        invstd = v.compute("invstd", FLOAT64)
        counts = v.compute("counts", FLOAT64)[:, None]
        total = counts.sum()
        mean_all = (counts * mean).sum(axis=0) / total
        variance = 1.0 / (invstd * invstd) - eps
        var_all = (counts * (variance + (mean - mean_all) ** 2)).sum(axis=0) / total
        v.write("meanAll", mean_all)
        v.write("invstdAll", _rsqrt(var_all, eps))
        unbiased = var_all * (total / max(total - 1.0, 1.0))
        for name, batch in (("runningMean", mean_all), ("runningVar", unbiased)):
            target = v.get(name)
            if target is not None:
                updated = (1 - momentum) * target.astype(FLOAT64) + momentum * batch
                np.copyto(target, updated, casting="unsafe")
    return kernel


@register("BatchNormElemt", "input: tensor, weight: tensor?, bias: tensor?, mean: tensor, "
                            "invstd: tensor, eps: float = 1e-05, output: tensor!")
def batch_norm_elemt(c: Call) -> Kernel:
    """``(input - mean) * invstd * weight + bias`` per channel (``eps`` is not used: invstd
    already holds it, as in PyTorch)."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    _channels(c, ("weight", "bias", "mean", "invstd"), channels, dtype)
    c.check_out("output", shape, dtype, exact_dtype=True)
    _, broadcast = _axes(shape)

    def kernel(v) -> None:
        y = (v.compute("input", FLOAT64) - v.compute("mean", FLOAT64).reshape(broadcast)) * \
            v.compute("invstd", FLOAT64).reshape(broadcast)
        if v.get("weight") is not None:
            y *= v.compute("weight", FLOAT64).reshape(broadcast)
        if v.get("bias") is not None:
            y += v.compute("bias", FLOAT64).reshape(broadcast)
        v.write("output", y)
    return kernel


@register("BatchNormReduceBackward",
          "gradOut: tensor, input: tensor, mean: tensor, invstd: tensor, weight: tensor?, "
          "inputG: bool = True, weightG: bool = True, biasG: bool = True, sumDy: tensor!?, "
          "sumDyXmu: tensor!?, gradWeight: tensor!?, gradBias: tensor!?")
def batch_norm_reduce_backward(c: Call) -> Kernel:
    """This device's per-channel gradient sums (``inputG``), weight and bias gradients, in
    the dtype of weight (of mean without one)."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    if channels <= 0:
        raise c.fail("input", "its channel dim must be positive")
    c.check_dtype("gradOut", {dtype})
    if c.tensor("gradOut").shape != shape:
        raise c.fail("gradOut", f"shape must equal input's {list(shape)}")
    _channels(c, ("mean", "invstd", "weight"), channels, dtype)
    wanted = {"sumDy": c["inputG"], "sumDyXmu": c["inputG"], "gradWeight": c["weightG"],
              "gradBias": c["biasG"]}
    param_dtype = c.tensor("weight" if c["weight"] is not None else "mean").dtype
    for name, flag in wanted.items():
        if flag:
            c.check_out(name, (channels,), param_dtype)
    reduce, broadcast = _axes(shape)

    def kernel(v) -> None:
        dy = v.compute("gradOut", FLOAT64)
        centred = v.compute("input", FLOAT64) - v.compute("mean", FLOAT64).reshape(broadcast)
        sum_dy = dy.sum(axis=reduce)
        sum_dy_xmu = (dy * centred).sum(axis=reduce)
        results = {"sumDy": sum_dy, "sumDyXmu": sum_dy_xmu,
                   "gradWeight": sum_dy_xmu * v.compute("invstd", FLOAT64),
                   "gradBias": sum_dy}
        for name, flag in wanted.items():
            if flag and v.get(name) is not None:
                v.write(name, results[name])
    return kernel


@register("BatchNormElemtBackward",
          "gradOut: tensor, input: tensor, mean: tensor, invstd: tensor, weight: tensor?, "
          "sumDy: tensor, sumDyXmu: tensor, counter: tensor, gradInput: tensor!")
def batch_norm_elemt_backward(c: Call) -> Kernel:
    """The input gradient from the all-reduced sums; ``counter`` holds every device's
    elements per channel."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    if channels <= 0:
        raise c.fail("input", "its channel dim must be positive")
    c.check_dtype("gradOut", {dtype})
    if c.tensor("gradOut").shape != shape:
        raise c.fail("gradOut", f"shape must equal input's {list(shape)}")
    _channels(c, ("mean", "invstd", "weight", "sumDy", "sumDyXmu"), channels, dtype)
    c.check_dtype("counter", COUNTER_DTYPES)
    c.check_out("gradInput", shape, dtype, exact_dtype=True)
    _, broadcast = _axes(shape)

    def kernel(v) -> None:
        def channel(name: str) -> np.ndarray:
            return v.compute(name, FLOAT64).reshape(broadcast)

        count = v.compute("counter", FLOAT64).sum()
        invstd = channel("invstd")
        centred = v.compute("input", FLOAT64) - channel("mean")
        grad = v.compute("gradOut", FLOAT64) - channel("sumDy") / count - \
            centred * invstd * invstd * channel("sumDyXmu") / count
        grad *= invstd
        if v.get("weight") is not None:
            grad *= channel("weight")
        v.write("gradInput", grad)
    return kernel
