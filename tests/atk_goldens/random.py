"""Goldens of the random family (ops/random.py).

CANN judges most of these cases by distribution (``random_bm``) or by the NPU's own bits
(``md5``), which no other generator reproduces; here the seeded operators are checked by
what must hold whatever the bits: the support of the values, the distribution's moments
within ``SIGMAS`` standard errors, the mask and the scaling agreeing with each other.
The mask-driven operators (DropoutDoMask, DropoutBackward) are exact functions of their
inputs and get a float64 golden.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from atk_driver import golden

SIGMAS = 6.0  # how far a sample moment may stray, in standard errors
MASK_ALIGN_BITS = 128


def _bits(mask: torch.Tensor, numel: int) -> torch.Tensor:
    packed = np.asarray(mask, np.uint8).reshape(-1)
    return torch.from_numpy(np.unpackbits(packed, bitorder="little")[:numel].astype(bool))


def _near(value: float, expected: float, stderr: float, what: str) -> None:
    assert abs(value - expected) <= SIGMAS * stderr + 1e-9, (
        f"{what}: {value} is more than {SIGMAS} standard errors ({stderr:.3g}) from "
        f"{expected}")


def _fraction_check(fraction: float, probability: float, count: int, what: str) -> None:
    if count:
        _near(fraction, probability, math.sqrt(probability * (1 - probability) / count) +
              1.0 / count, what)


def _check_bernoulli(outputs, inputs) -> None:
    (out,) = outputs[:1]
    values = out.astype(np.float64)
    assert np.isin(values, (0.0, 1.0)).all(), "Bernoulli gave values other than 0 and 1"
    prob = inputs[1]
    if isinstance(prob, np.ndarray):
        p = np.broadcast_to(prob.astype(np.float64), values.shape)
        assert (values[p == 0] == 0).all() and (values[p == 1] == 1).all()
        _fraction_check(values.mean(), float(p.mean()), values.size, "mean of Bernoulli")
    else:
        _fraction_check(values.mean(), float(prob), values.size, "mean of Bernoulli")


for _name in ("Bernoulli", "BernoulliTensor"):
    golden(_name, check=_check_bernoulli)(lambda *inputs: None)


def _check_dropout(outputs, inputs) -> None:
    out, mask = outputs
    source, p, train = inputs[0], float(inputs[1]), bool(inputs[2])
    wide = source.astype(np.float64)
    if not train or p == 0:
        np.testing.assert_array_equal(out.astype(np.float64), wide)
        return
    if p == 1:
        assert not out.astype(np.float64).any()
        return
    assert mask.size == -(-source.size // MASK_ALIGN_BITS) * MASK_ALIGN_BITS // 8
    keep = _bits(mask, source.size).numpy().reshape(source.shape)
    expected = np.where(keep, wide / (1 - p), 0.0).astype(out.dtype).astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=1e-2, atol=0)
    _fraction_check(1 - keep.mean(), p, keep.size, "dropped fraction")


golden("Dropout", check=_check_dropout)(lambda *inputs: None)


def _check_gen_mask(outputs, inputs) -> None:
    (mask,) = outputs
    numel, p = math.prod(inputs[0]), float(inputs[1])
    assert mask.size == -(-numel // MASK_ALIGN_BITS) * MASK_ALIGN_BITS // 8, "mask size"
    bits = np.unpackbits(mask.reshape(-1), bitorder="little")
    assert not bits[numel:].any(), "bits past the elements are set"
    _fraction_check(1 - bits[:numel].mean() if numel else p, p, numel, "dropped fraction")


for _name in ("DropoutGenMask", "DropoutGenMaskV2", "DropoutGenMaskV2Tensor"):
    golden(_name, check=_check_gen_mask)(lambda *inputs: None)


@golden("DropoutDoMask")
def dropout_do_mask(x, mask, prob):
    if prob == 1:
        return torch.zeros_like(x)
    return torch.where(_bits(mask, x.numel()).reshape(x.shape), x / (1 - prob), 0.0)


@golden("DropoutBackward")
def dropout_backward(grad, mask, scale):
    return torch.where(_bits(mask, grad.numel()).reshape(grad.shape), grad * scale, 0.0)


def _check_normal(outputs, inputs) -> None:
    (out,) = outputs
    mean, std = float(inputs[1]), float(inputs[2])
    values = out.astype(np.float64).reshape(-1)
    if values.size < 2:
        assert np.isfinite(values).all()
        return
    _near(values.mean(), mean, std / math.sqrt(values.size) + abs(mean) * 2 ** -7,
          "sample mean")
    if values.size >= 100:
        _near(values.std(), std, std / math.sqrt(2 * values.size) + std * 2 ** -6,
              "sample std")


for _name in ("InplaceNormal", "InplaceNormalTensor"):
    golden(_name, check=_check_normal)(lambda *inputs: None)


def _check_random(outputs, inputs) -> None:
    (out,) = outputs
    low, high = int(inputs[1]), int(inputs[2])
    values = out.astype(np.float64) if out.dtype.kind != "c" else out.real
    if out.dtype == np.bool_:  # whether each drawn integer is nonzero
        possible = {True} if high - low > 1 or low != 0 else set()
        possible |= {False} if low <= 0 <= high - 1 else set()
        assert set(values.astype(bool).tolist()) <= possible, "bool values out of range"
        return
    if out.dtype.kind in "fc" and out.dtype.itemsize <= 2:  # float16/bfloat16 round them
        spacing = np.maximum(np.abs(values) * 2.0 ** -7, 1.0)
        assert ((values >= low - spacing) & (values <= high - 1 + spacing)).all()
        return
    assert (values == np.round(values)).all(), "InplaceRandom gave non-integral values"
    assert ((values >= low) & (values <= high - 1)).all(), (
        f"values outside [{low}, {high - 1}]: {values.min()} .. {values.max()}")


for _name in ("InplaceRandom", "InplaceRandomTensor"):
    golden(_name, check=_check_random)(lambda *inputs: None)


def _check_uniform(outputs, inputs) -> None:
    (out,) = outputs
    low, high = float(inputs[1]), float(inputs[2])
    values = out.astype(np.float64)
    slack = max(abs(low), abs(high)) * 2.0 ** -7 if out.dtype.itemsize <= 2 else 0.0
    assert ((values >= low - slack) & (values <= high + slack)).all(), (
        f"values outside [{low}, {high}): {values.min()} .. {values.max()}")


golden("InplaceUniform", check=_check_uniform)(lambda *inputs: None)


def _check_multinomial(outputs, inputs) -> None:
    (out,) = outputs
    weights = inputs[0].astype(np.float64)
    samples, replacement = int(inputs[1]), bool(inputs[2])
    rows = weights.reshape(-1, weights.shape[-1])
    picked = out.reshape(rows.shape[0], samples)
    assert ((picked >= 0) & (picked < rows.shape[1])).all(), "indices out of range"
    for row, chosen in zip(rows, picked, strict=True):
        if not replacement:
            assert len(set(chosen.tolist())) == samples, "a category drawn twice"
        if (row > 0).sum() >= (1 if replacement else samples):
            assert (row[chosen] > 0).all(), "a category of weight 0 was drawn"


for _name in ("Multinomial", "MultinomialTensor"):
    golden(_name, check=_check_multinomial)(lambda *inputs: None)


def _check_randperm(outputs, inputs) -> None:
    (out,) = outputs
    n = int(inputs[0])
    np.testing.assert_array_equal(np.sort(out.astype(np.int64)), np.arange(n))


golden("Randperm", check=_check_randperm)(lambda *inputs: None)

del _name
