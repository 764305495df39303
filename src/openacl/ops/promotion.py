"""Type promotion as aclnn documents it, which is PyTorch's.

* Categories order bool < integer < floating < complex. Two dtypes of one category promote
  to the smaller dtype that holds both (int8 + uint8 -> int16; float16 + bfloat16 ->
  float32); across categories the higher category's dtype wins (int64 + float16 -> float16).
* ``result_type`` weighs its participants like ``torch.result_type``: tensors with dims
  first; a 0-dim tensor, then a scalar (aclScalar, a "wrapped number"), only changes the
  result when it is of a higher category, and a floating or complex scalar then brings its
  category's default dtype (float32, complex64) rather than its own.
* uint16, uint32 and uint64 promote only with themselves and bool (PyTorch has no rule for
  mixing them with other integers); anything else is ``ACLNN_ERR_PARAM_INVALID``.
* ``can_cast`` is PyTorch's rule for writing a result into an output: never float to
  integer, never anything but bool to bool, never complex to real.
* Operands reach a kernel in the promoted dtype: CANN's API layer casts each tensor operand
  to it first (``l0op::Cast(x, promoteType)`` in hicann/ops-math's aclnn_add.cpp,
  aclnn_mul.cpp, floor_mod's aclnn_remainder.cpp...), and the kernel then widens float16 and
  bfloat16 to float32. Widening a float is exact, but an integer operand of a float16 or
  bfloat16 result is rounded to that dtype first (``staged_dtype``): bfloat16 0.5 + int32
  257 is 0.5 + 256, which rounds to 256.
"""

from __future__ import annotations

from collections.abc import Iterable

import ml_dtypes
import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError

BOOL, INTEGER, FLOATING, COMPLEX = range(4)
DEFAULT_FLOAT = np.dtype(np.float32)  # dtype a float scalar brings (torch's default dtype)
DEFAULT_INT = np.dtype(np.int64)
DEFAULT_COMPLEX = np.dtype(np.complex64)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
WIDE_UNSIGNED = frozenset(np.dtype(t) for t in (np.uint16, np.uint32, np.uint64))


def category(dtype: np.dtype) -> int:
    """BOOL, INTEGER, FLOATING or COMPLEX."""
    if dtype == np.bool_:
        return BOOL
    if dtype.kind in "iu":
        return INTEGER
    if dtype.kind == "c":
        return COMPLEX
    return FLOATING  # f, and ml_dtypes' bfloat16/float8 (kind "V")


def is_floating(dtype: np.dtype) -> bool:
    return category(dtype) == FLOATING


def _float_rank(dtype: np.dtype) -> int:
    return dtype.itemsize


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's ``promote_types`` for two dtypes; raises ``ACLNN_ERR_PARAM_INVALID``."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    cat_a, cat_b = category(a), category(b)
    for wide, other in ((a, b), (b, a)):
        if wide in WIDE_UNSIGNED and other != np.bool_:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"dtypes {a} and {b} cannot be promoted: uint16, uint32 and uint64 "
                           f"only mix with themselves and bool")
    if cat_a != cat_b:
        high, low = (a, b) if cat_a > cat_b else (b, a)
        if category(high) == COMPLEX and category(low) == FLOATING and low.itemsize > 4:
            return np.dtype(np.complex128)
        return high
    if cat_a == INTEGER:
        return np.promote_types(a, b)
    if cat_a == FLOATING:
        if {a, b} == {np.dtype(np.float16), BFLOAT16}:
            return DEFAULT_FLOAT
        return a if _float_rank(a) >= _float_rank(b) else b
    return a if a.itemsize >= b.itemsize else b  # complex


def _wrapped(dtype: np.dtype) -> np.dtype:
    """The dtype a scalar participates with: floating and complex scalars bring the default
    dtype of their category (PyTorch's wrapped numbers); bool and integer keep their own."""
    cat = category(dtype)
    return {FLOATING: DEFAULT_FLOAT, COMPLEX: DEFAULT_COMPLEX}.get(cat, dtype)


def _fold(dtypes: Iterable[np.dtype]) -> np.dtype | None:
    result = None
    for dtype in dtypes:
        result = dtype if result is None else promote_types(result, dtype)
    return result


def _to_complex(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.complex128) if dtype.itemsize > 4 else DEFAULT_COMPLEX


def _combine_categories(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """PyTorch's combine_categories: ``higher`` has priority; ``lower`` only counts when it is
    of a higher category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if category(higher) == COMPLEX:
        return higher
    if category(lower) == COMPLEX:
        return _to_complex(higher) if category(higher) == FLOATING else lower
    if category(higher) == FLOATING:
        return higher
    if category(higher) == BOOL or category(lower) == FLOATING:
        return promote_types(higher, lower)
    return higher


def result_type(tensors: Iterable[tuple[np.dtype, int]] = (),
                scalars: Iterable[np.dtype] = ()) -> np.dtype:
    """The dtype of an elementwise result (``torch.result_type``).

    Args:
        tensors: ``(dtype, ndim)`` of each tensor participant.
        scalars: dtype of each scalar participant (aclScalar), weighed as wrapped numbers.
    """
    tensors = [(np.dtype(d), ndim) for d, ndim in tensors]
    dim_result = _fold(d for d, ndim in tensors if ndim > 0)
    zero_result = _fold(d for d, ndim in tensors if ndim == 0)
    scalar_result = _fold(_wrapped(np.dtype(s)) for s in scalars)
    result = _combine_categories(dim_result, _combine_categories(zero_result, scalar_result))
    if result is None:
        raise AclError(ACLNN_ERR_PARAM_INVALID, "no operand to infer a result dtype from")
    return result


def can_cast(source: np.dtype, target: np.dtype) -> bool:
    """Whether a result of ``source`` may be written into an output of ``target``."""
    src, dst = category(np.dtype(source)), category(np.dtype(target))
    if src == FLOATING and dst in (BOOL, INTEGER):
        return False
    if src == COMPLEX and dst != COMPLEX:
        return False
    if dst == BOOL and src != BOOL:
        return False
    return True


def staged_dtype(source: np.dtype, promoted: np.dtype) -> np.dtype | None:
    """The dtype an operand of ``source`` is rounded to before a kernel widens it into the
    compute dtype of ``promoted`` (see the module note): ``promoted`` itself when an integer
    or bool operand meets a float16/bfloat16 result, else None (the widening is exact or
    is the whole conversion)."""
    source, promoted = np.dtype(source), np.dtype(promoted)
    if category(source) <= INTEGER and category(promoted) == FLOATING and \
            promoted.itemsize < DEFAULT_FLOAT.itemsize:
        return promoted
    return None


def round_through(array, dtype: np.dtype):
    """``array`` rounded to ``dtype`` (float16 or bfloat16, round to nearest even) and
    returned in float32: how an integer operand reaches a half-precision kernel. Written on
    the array's own methods, so a device array stays on its device (device modules have no
    bfloat16: its rounding is done on the float32 bits)."""
    dtype = np.dtype(dtype)
    if dtype != BFLOAT16 or type(array) is np.ndarray:
        return array.astype(dtype).astype(DEFAULT_FLOAT)
    bits = array.astype(DEFAULT_FLOAT).view(np.uint32)
    rounded = (bits + (_BF16_HALF_ULP + ((bits >> _BF16_SHIFT) & np.uint32(1)))) & _BF16_MASK
    return rounded.view(DEFAULT_FLOAT)


_BF16_SHIFT = np.uint32(16)  # float32 bits a bfloat16 drops
_BF16_HALF_ULP = np.uint32(0x7FFF)  # just under half a bfloat16 ulp, in float32 bits
_BF16_MASK = np.uint32(0xFFFF0000)  # the bits a bfloat16 keeps


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes in: float16 and bfloat16 widen to float32, as PyTorch's
    CPU kernels do, then round once into the output."""
    dtype = np.dtype(dtype)
    if category(dtype) == FLOATING and dtype.itemsize < 4:
        return DEFAULT_FLOAT
    return dtype
