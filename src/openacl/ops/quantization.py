"""Quantization operators: aclnnQuantize with CANN's argument list.

``Quantize(x, scales, zeroPoints, dtype, axis, out)``: ``out = round(x / scales +
zeroPoints)`` saturated into ``dtype`` (CANN's formula and golden: the quotient and the sum
in float32, rounded half to even, clipped to the integer range; NaN becomes 0 in INT32).
``scales`` and ``zeroPoints`` are 1-d, of size 1 (per tensor) or of the size of ``x``'s dim
``axis`` (per channel, broadcast over the other dims). Dtypes as CANN documents them:
``x`` FLOAT32, FLOAT16, BFLOAT16; ``scales`` the same (equal to ``x``'s unless ``x`` is
FLOAT32); ``zeroPoints`` INT32, INT8, UINT8, FLOAT32, BFLOAT16 or null; ``dtype`` INT8,
UINT8 or INT32 (the float8 and hifloat8 outputs are storage formats no kernel here computes
in, so they are refused).

The ONNX converter calls it with ``zeroPoints`` null and an INT32 output, and adds ONNX's
zero point after the rounding (``QuantizeLinear`` rounds ``x / scale`` alone): the two
orders differ where the quotient is exactly halfway and the zero point odd.
"""

from __future__ import annotations

import numpy as np

from openacl import dtypes
from openacl.errors import AclError
from openacl.ops.call import Call, Kernel, as_array
from openacl.ops.promotion import BFLOAT16
from openacl.ops.registry import register

FLOAT32 = np.dtype(np.float32)
QUANTIZE_X_DTYPES = frozenset({FLOAT32, np.dtype(np.float16), BFLOAT16})
QUANTIZE_ZERO_POINT_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int8),
                                        np.dtype(np.uint8), FLOAT32, BFLOAT16})
QUANTIZE_OUT_DTYPES = frozenset({np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)})
MAX_QUANTIZE_DIMS = 8


@register("Quantize", "x: tensor, scales: tensor, zeroPoints: tensor?, dtype: dtype, "
                      "axis: int, out: tensor!")
def quantize(c: Call) -> Kernel:
    """``round(x / scales + zeroPoints)`` saturated into ``dtype`` (INT8, UINT8, INT32), per
    tensor or per channel along ``axis``."""
    x = c.tensor("x")
    c.check_dtype("x", QUANTIZE_X_DTYPES)
    if not 1 <= x.ndim <= MAX_QUANTIZE_DIMS:
        raise c.fail("x", f"must have 1 to {MAX_QUANTIZE_DIMS} dims")
    scales = c.tensor("scales")
    c.check_dtype("scales", QUANTIZE_X_DTYPES)
    if x.dtype != FLOAT32 and scales.dtype != x.dtype:
        raise c.fail("scales", f"dtype must equal x's ({x.dtype}) when x is not float32")
    axis = c.normalize_dim("axis", c["axis"], x.ndim)
    if scales.ndim != 1 or scales.shape[0] not in (1, x.shape[axis]):
        raise c.fail("scales", f"must be 1-d of size 1 or {x.shape[axis]} (x's dim {axis})")
    if c.has("zeroPoints"):
        points = c.tensor("zeroPoints")
        c.check_dtype("zeroPoints", QUANTIZE_ZERO_POINT_DTYPES)
        if points.shape != scales.shape:
            raise c.fail("zeroPoints", f"shape must equal scales' {list(scales.shape)}")
    try:
        target = dtypes.to_numpy_dtype(c["dtype"])
    except AclError as exc:
        raise c.fail("dtype", exc.message) from None
    c.check_dtype("dtype", QUANTIZE_OUT_DTYPES, target)
    c.check_out("out", x.shape, target, exact_dtype=True)
    per_channel = scales.shape[0] != 1
    shape = [1] * x.ndim
    shape[axis] = scales.shape[0]
    info = np.iinfo(target)

    def kernel(v) -> None:
        def broadcast(name: str):
            value = as_array(v[name]).astype(FLOAT32)
            return value.reshape(shape) if per_channel else value.reshape(())

        with np.errstate(all="ignore"):
            quotient = as_array(v["x"]).astype(FLOAT32) / broadcast("scales")
            if v.get("zeroPoints") is not None:
                quotient = quotient + broadcast("zeroPoints")
            rounded = np.rint(quotient).astype(np.float64)  # int32's bounds are exact here
            if target == np.int32:
                rounded = np.nan_to_num(rounded, nan=0.0)
            np.copyto(v["out"], np.clip(rounded, info.min, info.max).astype(target))
    return kernel
