"""Statistics operators: histograms of values (Histc) and counts of non-negative integers
(Bincount).

Argument lists and dtype lists are CANN's (``hicann/ops-math`` ``math/histogram_v2``,
``math/bincount``); values are PyTorch's (``torch.histc``, ``torch.bincount``).

Bincount's length depends on the data (``max(self) + 1``, at least ``minlength``), which
phase 1 cannot read: ``out`` must be long enough (the kernel refuses a shorter one, so the
stream fails naming the value), and counts past the data's maximum are zero. The one-shot
helper sizes ``out`` by ``minlength``: pass one that covers the data.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import (
    BOOL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    Call,
    Kernel,
    array_module,
    as_array,
    like,
)
from openacl.ops.registry import register

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)
HISTC_DTYPES = frozenset({np.dtype(np.float16), FLOAT32}) | INT_DTYPES
BINCOUNT_DTYPES = INT_DTYPES
BINCOUNT_WEIGHT_DTYPES = (FLOAT_DTYPES - {promotion.BFLOAT16}) | INT_DTYPES | BOOL_DTYPES
BINCOUNT_OUT_DTYPES = frozenset({np.dtype(np.int32), INT64, FLOAT32, FLOAT64})
HISTC_WIDEN = 1.0  # torch.histc widens an empty range [v, v] to [v - 1, v + 1]


# -- histc ---------------------------------------------------------------------------------------
def _histogram(x, bins: int, low: float, high: float):
    """Counts of ``x`` (float64) in ``bins`` equal bins over [low, high]: a value on the top
    edge goes to the last bin; values outside, and NaN, are left out."""
    xp = array_module(x)
    inside = (x >= low) & (x <= high)
    position = xp.floor((x[inside] - low) * bins / (high - low)).astype(INT64)  # (torch's
    # order of operations: a value on a bin edge lands in the same bin)
    position = xp.minimum(position, bins - 1)
    return xp.bincount(position, minlength=bins)[:bins]


@register("Histc", "self: tensor, bins: int = 100, min: scalar = 0, max: scalar = 0, "
                   "out: tensor!")
def histc(c: Call) -> Kernel:
    """A histogram of self's values in ``bins`` equal bins over [min, max]; min == max takes
    the data's own range (widened by one each way when that is empty too), as torch.histc."""
    c.tensor("self")  # (a null self is refused here, with its name)
    dtype = c.check_dtype("self", HISTC_DTYPES)
    bins = c["bins"]
    if bins <= 0:
        raise c.fail("bins", "must be > 0")
    for name in ("min", "max"):
        if not promotion.can_cast(c[name].dtype, FLOAT32) or \
                not math.isfinite(float(c[name].value)):
            raise c.fail(name, "must be a finite number")
    low, high = float(c["min"].value), float(c["max"].value)
    if low > high:
        raise c.fail("max", f"must not be below min ({low})")
    out = c["out"]
    result = dtype if out is None else c.check_dtype("out", HISTC_DTYPES)
    if not promotion.can_cast(result, dtype):
        raise c.fail("out", f"a {result} histogram cannot be converted to self's {dtype}")
    c.check_out("out", (bins,), result, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute, copy=False).reshape(-1).astype(FLOAT64)
        first, last = low, high
        if first == last and x.size:
            xp = array_module(x)
            finite = x[xp.isfinite(x)]
            if finite.size:
                first, last = float(finite.min()), float(finite.max())
        if first == last:
            first, last = first - HISTC_WIDEN, last + HISTC_WIDEN
        v.write("out", _histogram(x, bins, first, last))
    return kernel


# -- bincount --------------------------------------------------------------------------------------
def _bincount_result(weights: np.dtype | None) -> np.dtype:
    """torch.bincount's dtype: int64 counts, float32 sums of float32 weights, else float64."""
    if weights is None:
        return INT64
    return FLOAT32 if weights == FLOAT32 else FLOAT64


@register("Bincount", "self: tensor, weights: tensor?, minlength: int = 0, out: tensor!")
def bincount(c: Call) -> Kernel:
    """How often each value 0, 1, ... occurs in the 1-d ``self`` (the sum of its
    ``weights`` when given); ``out`` is at least ``minlength`` and ``max(self) + 1`` long."""
    self = c.tensor("self")
    c.check_dtype("self", BINCOUNT_DTYPES)
    if self.ndim != 1:
        raise c.fail("self", "must be 1-d")
    weighted = c.has("weights")
    if weighted:
        c.check_dtype("weights", BINCOUNT_WEIGHT_DTYPES)
        if c.tensor("weights").shape != self.shape:
            raise c.fail("weights", f"must have self's shape {list(self.shape)}")
    minlength = c["minlength"]
    if minlength < 0:
        raise c.fail("minlength", "must be >= 0")
    result = _bincount_result(c.dtype("weights") if weighted else None)
    out = c["out"]
    if out is not None:
        result = c.check_dtype("out", BINCOUNT_OUT_DTYPES)
        if out.ndim != 1 or out.shape[0] < minlength:
            raise c.fail("out", f"must be 1-d with at least minlength ({minlength}) elements")
    length = out.shape[0] if out is not None else minlength
    c.check_out("out", (length,), result, exact_dtype=True)

    def kernel(v) -> None:
        values = as_array(v["self"]).astype(INT64)
        xp = array_module(values)
        if values.size and int(values.min()) < 0:
            raise ValueError(f"aclnnBincount: argument 'self' holds {int(values.min())}; "
                             f"its values must be non-negative")
        needed = int(values.max()) + 1 if values.size else 0
        if needed > length:
            raise ValueError(f"aclnnBincount: argument 'out' has {length} elements; "
                             f"self's maximum {needed - 1} needs {needed}")
        weight = as_array(v["weights"]).astype(FLOAT64) if weighted else None
        counts = xp.bincount(values, weights=weight, minlength=length) if values.size else \
            like(values, np.zeros(length, FLOAT64 if weighted else INT64))
        v.write("out", counts)
    return kernel
