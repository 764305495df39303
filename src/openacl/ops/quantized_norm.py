"""Quantized normalization: QuantizedBatchNorm (``torch.quantized_batch_norm``).

An integer NCHW input is dequantized (``(x - inputZeroPoint) * inputScale``), normalized
per channel with the given mean and variance, scaled by weight and shifted by bias, and
quantized back: ``round(y / outputScale + outputZeroPoint)``, half to even, saturated to
the input's integer type. The float steps are float64.
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.registry import register

QUANTIZED_DTYPES = frozenset(np.dtype(t) for t in (np.int8, np.uint8, np.int32))
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
QUANTIZED_RANK = 4  # NCHW


def _real(c: Call, name: str) -> float:
    value = c[name]
    if value is None or value.dtype.kind not in "iuf":
        raise c.fail(name, "must be a real number")
    return float(value.value)


def _zero_point(c: Call, name: str, dtype: np.dtype) -> int:
    """An integer zero point inside ``dtype``'s range (CANN's rule)."""
    value = c[name]
    if value is None or value.dtype.kind not in "iu" and not float(value.value).is_integer():
        raise c.fail(name, "must be an integer")
    info = np.iinfo(dtype)
    point = int(value.value)
    if not info.min <= point <= info.max:
        raise c.fail(name, f"must lie in {dtype}'s range [{info.min}, {info.max}]")
    return point


@register("QuantizedBatchNorm",
          "input: tensor, mean: tensor, var: tensor, inputScale: scalar, "
          "inputZeroPoint: scalar, outputScale: scalar, outputZeroPoint: scalar, "
          "weight: tensor?, bias: tensor?, epsilon: float = 1e-05, output: tensor!")
def quantized_batch_norm(c: Call) -> Kernel:
    """Batch normalization (inference) of a quantized NCHW tensor; a null weight is ones, a
    null bias zeros."""
    dtype = c.check_dtype("input", QUANTIZED_DTYPES)
    shape = c.tensor("input").shape
    if len(shape) != QUANTIZED_RANK:
        raise c.fail("input", f"must be 4-D (NCHW), got {len(shape)}-D")
    channels = shape[1]
    for name in ("mean", "var", "weight", "bias"):
        if c[name] is None:
            continue
        c.check_dtype(name, {FLOAT32})
        if c.tensor(name).shape != (channels,):
            raise c.fail(name, f"must be 1-D with C = {channels} elements")
    in_scale, out_scale = _real(c, "inputScale"), _real(c, "outputScale")
    if out_scale == 0:
        raise c.fail("outputScale", "must not be 0")
    in_zero = _zero_point(c, "inputZeroPoint", dtype)
    out_zero = _zero_point(c, "outputZeroPoint", dtype)
    c.check_out("output", shape, dtype, exact_dtype=True)
    eps = c["epsilon"]
    info = np.iinfo(dtype)
    per_channel = (channels, 1, 1)

    def kernel(v) -> None:
        xp = array_module(v["input"])
        x = (v.compute("input", FLOAT64) - in_zero) * in_scale
        mean = v.compute("mean", FLOAT64).reshape(per_channel)
        std = xp.sqrt(v.compute("var", FLOAT64).reshape(per_channel) + eps)
        y = (x - mean) / std
        if v.get("weight") is not None:
            y = y * v.compute("weight", FLOAT64).reshape(per_channel)
        if v.get("bias") is not None:
            y = y + v.compute("bias", FLOAT64).reshape(per_channel)
        q = xp.rint(y / out_scale + out_zero)
        q = xp.nan_to_num(q, nan=0.0, posinf=info.max, neginf=info.min)
        v.write("output", xp.clip(q, info.min, info.max).astype(dtype))
    return kernel
