"""Creation operators: tensors made from their arguments (Eye, Range, Linspace), filled
(InplaceOne) or tiled from another (Repeat).

Argument lists and dtype lists are CANN's (``hicann/ops-math``: ``math/eye``, ``math/range``,
``math/lin_space``, ``math/ones_like``, ``math/tile``); values are PyTorch's. Where CANN's
C face takes the output's dtype from ``out``, the one-shot helpers infer torch's default
(float32 for Eye, Range and Linspace).
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import (
    ALL_DTYPES,
    BOOL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    MAX_DIMS,
    Call,
    Kernel,
    array_module,
    as_array,
)
from openacl.ops.registry import register, register_inplace

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)
EYE_DTYPES = (FLOAT_DTYPES - {FLOAT64}) | (INT_DTYPES | BOOL_DTYPES)
RANGE_SCALAR_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES
RANGE_OUT_DTYPES = FLOAT_DTYPES | frozenset({np.dtype(np.int32), INT64})
LINSPACE_SCALAR_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES
LINSPACE_OUT_DTYPES = (FLOAT_DTYPES | INT_DTYPES) - {INT64}
ONE_DTYPES = (FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES) | {np.dtype(np.uint16)}
REPEAT_DTYPES = ALL_DTYPES  # every dtype, complex and uint16/32/64 included


def _out_dtype(c: Call, default: np.dtype, supported: frozenset[np.dtype]) -> np.dtype:
    """The output's dtype: the given out's (which must be supported), else ``default``."""
    if c["out"] is None:
        return default
    return c.check_dtype("out", supported)


# -- eye ---------------------------------------------------------------------------------------
@register("Eye", "n: int, m: int, out: tensor!")
def eye(c: Call) -> Kernel:
    """An ``n`` x ``m`` matrix with ones on the main diagonal, zeros elsewhere."""
    for name in ("n", "m"):
        if c[name] < 0:
            raise c.fail(name, "must be >= 0")
    dtype = _out_dtype(c, FLOAT32, EYE_DTYPES)
    c.check_out("out", (c["n"], c["m"]), dtype, exact_dtype=True)
    size = min(c["n"], c["m"])

    def kernel(v) -> None:
        out = v["out"]
        out[...] = 0
        diagonal = array_module(out).arange(size)
        out[diagonal, diagonal] = 1
    return kernel


# -- range and linspace ------------------------------------------------------------------------
@register("Range", "start: scalar, end: scalar, step: scalar, out: tensor!")
def range_(c: Call) -> Kernel:
    """``start, start + step, ...`` up to and including ``end`` (torch.range: its length
    is ``floor((end - start) / step) + 1``)."""
    for name in ("start", "end", "step"):
        c.check_dtype(name, RANGE_SCALAR_DTYPES)
    start, end, step = (float(c[n].value) for n in ("start", "end", "step"))
    if not all(math.isfinite(x) for x in (start, end, step)):
        raise c.fail("end", "start, end and step must be finite")
    if step == 0:
        raise c.fail("step", "must not be zero")
    if (end - start) * step < 0:
        raise c.fail("step", f"has the wrong sign to go from {start} to {end}")
    size = math.floor((end - start) / step) + 1
    dtype = _out_dtype(c, FLOAT32, RANGE_OUT_DTYPES)
    c.check_out("out", (size,), dtype, exact_dtype=True)
    accumulate = FLOAT64 if promotion.is_floating(dtype) or not (
        float(start).is_integer() and float(step).is_integer()) else INT64
    first = np.array(c["start"].value).astype(accumulate).item()  # Python numbers: they
    delta = np.array(c["step"].value).astype(accumulate).item()  # mix with device arrays

    def kernel(v) -> None:
        xp = array_module(v["out"])
        v.write("out", first + delta * xp.arange(size, dtype=accumulate))
    return kernel


@register("Linspace", "start: scalar, end: scalar, steps: int, out: tensor!")
def linspace(c: Call) -> Kernel:
    """``steps`` evenly spaced values from ``start`` to ``end`` (both included), computed as
    torch does: from ``start`` for the first half, from ``end`` for the second; the ends
    must be finite (an integer out takes them truncated, as torch casts them)."""
    for name in ("start", "end"):
        c.check_dtype(name, LINSPACE_SCALAR_DTYPES)
        if not math.isfinite(float(c[name].value)):
            raise c.fail(name, "must be finite")
    steps = c["steps"]
    if steps < 0:
        raise c.fail("steps", "must be >= 0")
    dtype = _out_dtype(c, FLOAT32, LINSPACE_OUT_DTYPES)
    out = c["out"]
    shape = out.shape if out is not None and out.numel == steps else (steps,)
    c.check_out("out", shape, dtype, exact_dtype=True)
    start, end = float(c["start"].value), float(c["end"].value)
    if not promotion.is_floating(dtype):  # torch casts the ends to an integer out's dtype
        start, end = float(math.trunc(start)), float(math.trunc(end))
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    halfway = steps // 2 if steps > 1 else 1  # one step: start

    def kernel(v) -> None:
        xp = array_module(v["out"])
        index = xp.arange(steps, dtype=FLOAT64)
        values = xp.where(index < halfway, start + step * index,
                          end - step * (steps - 1 - index))
        v.write("out", values.reshape(v["out"].shape))
    return kernel


# -- fill ----------------------------------------------------------------------------------------
def _inplace_one(c: Call) -> Kernel:
    """Set every element of ``selfRef`` to one."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", ONE_DTYPES)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        v["selfRef"][...] = 1
    return kernel


register_inplace("InplaceOne", "selfRef: tensor!", _inplace_one, selfRef="selfRef")


# -- repeat ----------------------------------------------------------------------------------------
@register("Repeat", "self: tensor, repeats: int_array, out: tensor!")
def repeat(c: Call) -> Kernel:
    """self tiled ``repeats[i]`` times along dim i (Tensor.repeat): ``repeats`` may be longer
    than self's rank (self is then viewed with leading dims of 1), not shorter."""
    self = c.tensor("self")
    dtype = c.check_dtype("self", REPEAT_DTYPES)
    repeats = tuple(c["repeats"])
    if len(repeats) < self.ndim:
        raise c.fail("repeats", f"must have at least self's {self.ndim} entries")
    if len(repeats) > MAX_DIMS:
        raise c.fail("repeats", f"must have at most {MAX_DIMS} entries")
    if any(r < 0 for r in repeats):
        raise c.fail("repeats", "entries must be >= 0")
    padded = (1,) * (len(repeats) - self.ndim) + self.shape
    c.check_out("out", tuple(r * d for r, d in zip(repeats, padded, strict=True)), dtype,
                exact_dtype=True)

    def kernel(v) -> None:
        x = as_array(v["self"]).reshape(padded)
        v.write("out", np.tile(x, repeats))
    return kernel
