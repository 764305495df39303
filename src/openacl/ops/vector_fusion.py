"""Fused vector operators of CANN's vfusion/ family: Modulate (a diffusion transformer's
adaptive scale and shift) and ScaledMaskedSoftmaxBackward (the gradient of
ScaledMaskedSoftmax), each one pass over its tensors."""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.registry import register

__all__: list[str] = []

VECTOR_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32))
MODULATE_RANK = 3  # self is (batch, sequence, hidden)
SOFTMAX_RANK = 4  # (B, N, S1, S2)
MAX_SOFTMAX_AXIS = 4096  # CANN: the last dim S2 in (0, 4096]
BOOL = np.dtype(np.bool_)


def _modulation(c: Call, name: str, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether optional ``name`` is given, after checking it is (B, 1, D) or (B, D)."""
    if c[name] is None:
        return False
    if c.dtype(name) != dtype:
        raise c.fail(name, f"dtype must be self's {dtype}")
    batch, _, hidden = shape
    if c.tensor(name).shape not in ((batch, 1, hidden), (batch, hidden)):
        raise c.fail(name, f"shape must be ({batch}, 1, {hidden}) or ({batch}, {hidden})")
    return True


@register("Modulate", "self: tensor, scaleOptional: tensor?, shiftOptional: tensor?, "
                      "out: tensor!")
def modulate(c: Call) -> Kernel:
    """out = self * (1 + scale) + shift, scale and shift (B, 1, D) or (B, D) broadcast over
    self's (B, L, D) sequence; either may be absent."""
    dtype = c.check_dtype("self", VECTOR_DTYPES)
    shape = c.tensor("self").shape
    if len(shape) != MODULATE_RANK:
        raise c.fail("self", f"must be 3-d (batch, sequence, hidden), not {list(shape)}")
    scaled = _modulation(c, "scaleOptional", shape, dtype)
    shifted = _modulation(c, "shiftOptional", shape, dtype)
    c.check_out("out", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    batch, _, hidden = shape

    def kernel(v) -> None:
        result = v.compute("self", compute)
        if scaled:
            result = result * (v.compute("scaleOptional", compute).reshape(batch, 1, hidden)
                               + compute.type(1))
        if shifted:
            result = result + v.compute("shiftOptional", compute).reshape(batch, 1, hidden)
        v.write("out", result)
    return kernel


@register("ScaledMaskedSoftmaxBackward", "gradOutput: tensor, y: tensor, mask: tensor, "
                                         "scale: float = 1.0, fixTriuMask: bool = False, "
                                         "out: tensor!")
def scaled_masked_softmax_backward(c: Call) -> Kernel:
    """out = (gradOutput * y - sum(gradOutput * y, -1) * y) * scale, 0 where mask is true:
    the gradient of ScaledMaskedSoftmax's input given its output y. mask (bool) broadcasts
    over the first two dims; ``fixTriuMask`` (a generated causal mask) is only False, as on
    CANN."""
    dtype = c.check_dtype("gradOutput", VECTOR_DTYPES)
    shape = c.tensor("gradOutput").shape
    if len(shape) != SOFTMAX_RANK:
        raise c.fail("gradOutput", f"must be 4-d (B, N, S1, S2), not {list(shape)}")
    if not 0 < shape[-1] <= MAX_SOFTMAX_AXIS:
        raise c.fail("gradOutput", f"its last dim must be in (0, {MAX_SOFTMAX_AXIS}]")
    if c.dtype("y") != dtype or c.tensor("y").shape != shape:
        raise c.fail("y", f"must be {dtype} {list(shape)} as gradOutput")
    c.check_dtype("mask", {BOOL})
    if c.broadcast("gradOutput", "mask") != shape:
        raise c.fail("mask", f"shape {list(c.tensor('mask').shape)} does not broadcast to "
                             f"{list(shape)}")
    if c["fixTriuMask"]:
        raise c.fail("fixTriuMask", "only False is supported (as on CANN)")
    c.check_out("out", shape, dtype, exact_dtype=True)
    compute = np.dtype(np.float64)  # the row sum cancels against y: float32 loses digits
    scale = compute.type(float(c["scale"]))

    def kernel(v) -> None:
        grad, y = v.compute("gradOutput", compute), v.compute("y", compute)
        product = grad * y
        result = (product - product.sum(axis=-1, keepdims=True) * y) * scale
        v.write("out", array_module(result).where(v["mask"], compute.type(0), result))
    return kernel
