"""Fused vector operators of CANN's vfusion/ family: Modulate, a diffusion transformer's
adaptive scale and shift in one pass. (The family's ScaledMaskedSoftmaxBackward lives
next to its forward operator, in activation_backward.py.)"""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import Call, Kernel
from openacl.ops.registry import register

__all__: list[str] = []

VECTOR_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32))
MODULATE_RANK = 3  # self is (batch, sequence, hidden)


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
