"""Linear algebra operators: Matmul, Mm, Mv, BatchMatMul, Addmm, Addmv, Addbmm, Baddbmm, Gemm
(and the in-place forms), FusedMatmul, Einsum.

Semantics are aclnn's, which are PyTorch's (``torch.matmul`` for Matmul: 1-D operands are
promoted to matrices and the added dim removed afterwards, batch dims broadcast). Inputs of
different dtypes are promoted as aclnn's deduction rule says (PyTorch's ``promote_types``).

``cubeMathType`` (int8) selects the Cube unit's compute logic on the NPU. On CPU:

=====================================  ============================================================
0 ``KEEP_DTYPE``                       compute in the (promoted) input dtype; float16 and bfloat16
                                       accumulate in float32 and round once, as PyTorch's CPU does
1 ``ALLOW_FP32_DOWN_PRECISION``        as KEEP_DTYPE (the CPU has no HFLOAT32 unit; full float32
                                       is within every tolerance HFLOAT32 is held to)
2 ``USE_FP16``                         float32/float64 inputs are rounded to float16 before the
                                       multiply (accumulation in float32), so the effect is real;
                                       other dtypes are left alone
3 ``USE_HF32``                         as ALLOW_FP32_DOWN_PRECISION
4 ``USE_FP32_ADD``                     as KEEP_DTYPE (high-precision accumulation); not accepted
                                       by BatchMatMul, whose documentation lists 0-3
=====================================  ============================================================

Any other value is ``ACLNN_ERR_PARAM_INVALID``. The CANN documents list BFLOAT16, FLOAT16 and
FLOAT32 for the matmul family; float64 is accepted too on CPU (it is what a host reference
computes in).

Kernels call numpy's matmul (BLAS) on the strided views directly; when the output is already
of the compute dtype the product is written into it with ``out=``, with no extra copy.
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import native, promotion
from openacl.ops.activation import gelu
from openacl.ops.call import (
    BOOL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    WIDE_UNSIGNED_DTYPES,
    Call,
    Kernel,
    TensorArg,
    array_module,
    as_array,
)
from openacl.ops.registry import register, register_inplace
from openacl.runtime import core

# cubeMathType values (aclnn's enumeration)
KEEP_DTYPE = 0
ALLOW_FP32_DOWN_PRECISION = 1
USE_FP16 = 2
USE_HF32 = 3
USE_FP32_ADD = 4
CUBE_MATH_NAMES = {KEEP_DTYPE: "KEEP_DTYPE", ALLOW_FP32_DOWN_PRECISION:
                   "ALLOW_FP32_DOWN_PRECISION", USE_FP16: "USE_FP16", USE_HF32: "USE_HF32",
                   USE_FP32_ADD: "USE_FP32_ADD"}
CUBE_MATH_TYPES = frozenset(CUBE_MATH_NAMES)
CUBE_MATH_TYPES_NO_FP32_ADD = CUBE_MATH_TYPES - {USE_FP32_ADD}

MATMUL_DTYPES = FLOAT_DTYPES
MATMUL_MAX_DIMS = 6  # aclnnMatmul takes 1-6 dim operands
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
TF32_MATH_TYPES = frozenset({ALLOW_FP32_DOWN_PRECISION, USE_HF32})
# aclnnEinsum's documented dtypes, plus bfloat16/float64 (host extensions) and int8/uint8
EINSUM_DTYPES = FLOAT_DTYPES | (INT_DTYPES - {np.dtype(np.int8), np.dtype(np.uint8)}) \
    | WIDE_UNSIGNED_DTYPES
EINSUM_LABELS = frozenset(string.ascii_letters)
ELLIPSIS = "..."
# aclnnAddmv: inputs of these dtypes, promoted to an output of one of the numeric ones
ADDMV_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES
ADDMV_OUT_DTYPES = FLOAT_DTYPES | INT_DTYPES


# -- shared helpers ----------------------------------------------------------------------------
def check_cube_math_type(c: Call, allowed: frozenset[int] = CUBE_MATH_TYPES) -> int:
    """Validate ``cubeMathType``; returns it."""
    value = c["cubeMathType"]
    if value not in allowed:
        listed = ", ".join(f"{v} ({CUBE_MATH_NAMES[v]})" for v in sorted(allowed))
        raise c.fail("cubeMathType", f"expected one of {listed}")
    return value


def operand_dtype(dtype: np.dtype, cube_math_type: int) -> np.dtype:
    """The dtype the operands are rounded to before the multiply (integers: their own)."""
    if cube_math_type == USE_FP16 and dtype.kind == "f" and dtype.itemsize >= 4:
        return FLOAT16
    return dtype


def _operand(array: np.ndarray, rounded: np.dtype, compute: np.dtype) -> np.ndarray:
    """``array`` rounded to ``rounded`` (the cubeMathType's operand dtype), then widened to
    ``compute``; no copy when nothing changes."""
    if not hasattr(array, "astype"):
        array = as_array(array)
    if array.dtype != rounded:
        array = array.astype(rounded)
    return native.cast(array, compute)  # (F16C for float16)


def matmul_into(out: np.ndarray, a: np.ndarray, b: np.ndarray, compute: np.dtype,
                tf32: bool = False) -> None:
    """``out[...] = a @ b`` computed in ``compute``; written in place (BLAS ``out=``) when the
    output already has that dtype. ``tf32``: float32 products may use TensorFloat-32 (the
    CUDA backend's reading of ALLOW_FP32_DOWN_PRECISION / USE_HF32; the CPU has no such
    unit and computes in full float32)."""
    xp = array_module(out)
    if xp is not np and compute == FLOAT32:
        with core.current().backend.fp32_matmul(tf32):
            _product(xp, out, a, b, compute)
        return
    _product(xp, out, a, b, compute)


def _product(xp, out, a, b, compute) -> None:
    if out.dtype == compute and out.ndim > 0:
        if (b.ndim == 2 and a.ndim > 2 and out.ndim == a.ndim and a.flags.c_contiguous
                and out.flags.c_contiguous):
            # a stack of matrices times one matrix is one taller product: one BLAS call
            # instead of one per matrix (measured, 8 x [128, 384] @ [384, 1536]: 5.8 -> 4.2 ms)
            rows = math.prod(a.shape[:-1])  # (not -1: a 0-size operand has no inferable dim)
            a, out = a.reshape(rows, a.shape[-1]), out.reshape(rows, out.shape[-1])
        if xp is np and native.matmul(a, b, out):
            return  # openacl's GEMM, on the C kernels' pool
        xp.matmul(a, b, out=out)
    else:
        result = xp.matmul(a, b)
        if not native.narrowed_into(out, result):  # (F16C for a float16 out)
            xp.copyto(out, result, casting="unsafe")


def _check_rank(c: Call, name: str, low: int, high: int | None = None) -> TensorArg:
    tensor = c.tensor(name)
    high = low if high is None else high
    if not low <= tensor.ndim <= high:
        expected = f"{low}" if low == high else f"{low} to {high}"
        raise c.fail(name, f"must have {expected} dims, got {tensor.ndim}")
    return tensor


def _matmul_dtype(c: Call, *names: str) -> np.dtype:
    for name in names:
        c.check_dtype(name, MATMUL_DTYPES)
    return c.result_type(*names)


def _reduce_dims(c: Call, left: str, right: str) -> None:
    """The reduce dim of ``left`` (its last) must equal that of ``right`` (its second to last,
    or its only dim)."""
    a, b = c.tensor(left), c.tensor(right)
    k_left = a.shape[-1]
    k_right = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if k_left != k_right:
        raise c.fail(right, f"its reduce dim ({k_right}) does not match the last dim of "
                            f"'{left}' {list(a.shape)} ({k_left})")


def _matmul_shape(c: Call, left: str, right: str) -> tuple[int, ...]:
    """``torch.matmul``'s result shape; broadcast errors name ``right``."""
    a, b = c.tensor(left).shape, c.tensor(right).shape
    _reduce_dims(c, left, right)
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return (*b[:-2], b[-1])
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise c.fail(right, f"batch dims {list(b[:-2])} cannot be broadcast with those of "
                            f"'{left}' {list(a[:-2])}") from None
    return (*batch, a[-2], b[-1])


def _product_kernel(c: Call, left: str, right: str, dtype: np.dtype) -> Kernel:
    """The kernel of every plain product: ``out = left @ right``."""
    cube = c["cubeMathType"]
    compute = promotion.compute_dtype(dtype)
    rounded = operand_dtype(dtype, cube)
    if c.tensor(left).ndim == 1 and c.tensor(right).ndim == 1:
        rounded = dtype  # cubeMathType does not apply to two 1-D operands (CANN's note)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _product_plan(v, left, right, rounded) or
               functools.partial(general, v))()

    def general(v) -> None:
        a, b, out = v[left], v[right], v["out"]
        # cuBLAS multiplies float16/bfloat16 accumulating in float32 and rounds once into a
        # result of that dtype itself: no widened copies of the operands on a device
        work = rounded if type(out) is not np.ndarray and out.dtype == rounded else compute
        if work == FLOAT32 and native.rows_times_packed(
                _operand(a, rounded, work), lambda: _packed_weight(v, right, rounded, work),
                out):
            return
        matmul_into(out, _operand(a, rounded, work), _operand(b, rounded, work), work,
                    tf32=cube in TF32_MATH_TYPES)
    return kernel


def _product_plan(v, left: str, right: str, rounded: np.dtype) -> Callable[[], Any] | None:
    """A plain product's plan (``Views.plan``) for float32 host operands against a constant
    right operand: the packed GEMM's C call, checked once (``rows_times_packed_call``);
    None for anything else (the general kernel decides per call)."""
    a, out = v[left], v["out"]
    if rounded != FLOAT32 or type(out) is not np.ndarray or out.dtype != FLOAT32 or \
            type(a) is not np.ndarray or a.dtype != FLOAT32 or right not in v.constant:
        return None
    return native.rows_times_packed_call(
        a, lambda: _packed_weight(v, right, FLOAT32, FLOAT32), out)


def _packed_weight(v, name: str, rounded: np.dtype, compute: np.dtype):
    """A model's constant 2-d float32 host operand ``name`` packed once as the GEMM's right
    operand; None or False for any other (a per-call operand, another dtype or device)."""
    if name not in v.constant:
        return None
    return v.derive(("packed", name), (name,), lambda: _packable(
        _operand(v[name], rounded, compute)))


def _packable(matrix) -> native.PackedMatrix | bool:
    """``pack``'s result, or False (kept by ``derive``, so the refusal is decided once)."""
    if type(matrix) is not np.ndarray or matrix.ndim != 2 or matrix.dtype != FLOAT32:
        return False
    return native.pack(matrix, native.RIGHT) or False


# -- Matmul, Mm, BatchMatMul -------------------------------------------------------------------
@register("Matmul", "self: tensor, mat2: tensor, out: tensor!, cubeMathType: int = 0")
def matmul(c: Call) -> Kernel:
    """``out = self @ mat2`` with ``torch.matmul`` semantics (1-6 dims, batch broadcast)."""
    _check_rank(c, "self", 1, MATMUL_MAX_DIMS)
    _check_rank(c, "mat2", 1, MATMUL_MAX_DIMS)
    dtype = _matmul_dtype(c, "self", "mat2")
    check_cube_math_type(c)
    c.check_out("out", _matmul_shape(c, "self", "mat2"), dtype)
    return _product_kernel(c, "self", "mat2", dtype)


@register("Mm", "self: tensor, mat2: tensor, out: tensor!, cubeMathType: int = 0")
def mm(c: Call) -> Kernel:
    """``out = self @ mat2`` for two matrices."""
    _check_rank(c, "self", 2)
    _check_rank(c, "mat2", 2)
    dtype = _matmul_dtype(c, "self", "mat2")
    check_cube_math_type(c)
    c.check_out("out", _matmul_shape(c, "self", "mat2"), dtype)
    return _product_kernel(c, "self", "mat2", dtype)


def _check_batch(c: Call, left: str, right: str) -> int:
    """The batch of two 3-D operands: equal, or one of them 1 (it is broadcast)."""
    b1, b2 = c.tensor(left).shape[0], c.tensor(right).shape[0]
    if b1 != b2 and 1 not in (b1, b2):
        raise c.fail(right, f"batch {b2} does not match the batch {b1} of '{left}' "
                            f"(they must be equal or one of them 1)")
    return max(b1, b2) if 0 not in (b1, b2) else 0


@register("BatchMatMul", "self: tensor, mat2: tensor, out: tensor!, cubeMathType: int = 0")
def batch_mat_mul(c: Call) -> Kernel:
    """``out[b] = self[b] @ mat2[b]`` for 3-D operands; a batch of 1 is broadcast."""
    _check_rank(c, "self", 3)
    _check_rank(c, "mat2", 3)
    dtype = _matmul_dtype(c, "self", "mat2")
    check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    _check_batch(c, "self", "mat2")
    c.check_out("out", _matmul_shape(c, "self", "mat2"), dtype)
    return _product_kernel(c, "self", "mat2", dtype)


# -- Addmm, Addmv, Addbmm, Baddbmm, Gemm -----------------------------------------------------------
Operands = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _add_product_kernel(c: Call, left: str, right: str, dtype: np.dtype, *,
                        bias: str = "self", factors: tuple[float, float] | None = None,
                        operands: Operands | None = None) -> Kernel:
    """``out = beta * bias + alpha * (left @ right)``; with beta == 0 ``bias`` is ignored
    (NaN and inf in it do not propagate), as in PyTorch. ``factors`` (alpha, beta) are
    given for float attributes (Gemm), else read from the ``alpha`` and ``beta`` scalars;
    ``operands`` reshapes the two operands before the product (a transpose, Addbmm's
    batch folded into the reduce dim)."""
    cube = c["cubeMathType"]
    compute = promotion.compute_dtype(dtype)
    rounded = operand_dtype(dtype, cube)
    if factors is None:
        factors = (c.scalar("alpha", dtype), c.scalar("beta", dtype))
    alpha, beta = (np.asarray(f).astype(compute)[()] for f in factors)
    plain = operands is None and compute == rounded == FLOAT32 and alpha == 1 and \
        beta in (0, 1)  # what _add_product_plan takes

    def kernel(v) -> None:
        if plain:
            v.plan(kernel, lambda: _add_product_plan(v, left, right, bias, beta == 1) or
                   functools.partial(general, v))()
        else:
            general(v)

    def general(v) -> None:
        out = v["out"]
        a = _operand(v[left], rounded, compute)
        b = _operand(v[right], rounded, compute)
        if operands is not None:
            a, b = operands(a, b)
        addend = v[bias]
        direct = (out.dtype == compute and out.size > 0
                  and not np.may_share_memory(out, addend))
        product = out if direct else array_module(out).empty(out.shape, compute)
        packable = operands is None and compute == FLOAT32
        if not (packable and native.rows_times_packed(
                a, lambda: _packed_weight(v, right, rounded, compute), product)) and \
                not native.matmul(a, b, product):
            np.matmul(a, b, out=product)
        if alpha != 1:
            np.multiply(product, alpha, out=product)
        if beta != 0:
            term = as_array(addend).astype(compute, copy=False)
            product += term if beta == 1 else beta * term
        if not direct:
            np.copyto(out, product, casting="unsafe")
    return kernel


def _add_product_plan(v, left: str, right: str, bias: str, add: bool
                      ) -> Callable[[], Any] | None:
    """The plan (``Views.plan``) of ``out = left @ right (+ bias)`` for float32 host
    matrices, alpha 1, beta 1 (``add``) or 0: one C call with the bias fused where the
    product suits the packed GEMM (a constant right operand packed once), else numpy's
    product (one row: BLAS's matrix-vector product) and one add. None where it does not
    apply (the general kernel runs)."""
    out, a, b = v["out"], v[left], v[right]
    addend = v.get(bias) if add else None
    if not native.host_float32(out) or out.ndim != 2 or out.size == 0 or \
            any(type(m) is not np.ndarray or m.dtype != FLOAT32 or m.ndim != 2 or
                np.may_share_memory(out, m) for m in (a, b)):
        return None
    if addend is not None and (type(addend) is not np.ndarray or addend.dtype != FLOAT32 or
                               np.may_share_memory(out, addend)):
        return None
    rows, cols = out.shape
    row = addend if addend is not None and addend.ndim and addend.flags.c_contiguous and \
        addend.size == cols and addend.shape[-1] == cols else None  # (one per column)
    product = native.rows_times_packed_call(
        a, lambda: _packed_weight(v, right, FLOAT32, FLOAT32), out, bias=row)
    if product is None and native.suits(rows, cols, a.shape[1]):
        product = native.gemm_call(a, b, out, bias=row)
    if product is not None and (addend is None or row is not None):
        return product  # (the bias, if any, fused)
    if product is None:
        product = functools.partial(np.matmul, a, b, out=out)
    if addend is None:
        return product

    def then_add() -> None:
        product()
        np.add(out, addend, out=out)
    return then_add


def _check_bias(c: Call, result: tuple[int, ...]) -> None:
    """``self`` must broadcast to the product's shape (one way: self -> product)."""
    _broadcasts_to(c, "self", result)


@register("Addmm", "self: tensor, mat1: tensor, mat2: tensor, beta: scalar = 1, "
                   "alpha: scalar = 1, out: tensor!, cubeMathType: int = 0")
def addmm(c: Call) -> Kernel:
    """``out = beta * self + alpha * (mat1 @ mat2)`` for matrices; self broadcasts."""
    _check_rank(c, "self", 1, 2)
    _check_rank(c, "mat1", 2)
    _check_rank(c, "mat2", 2)
    dtype = _matmul_dtype(c, "self", "mat1", "mat2")
    check_cube_math_type(c)
    shape = _matmul_shape(c, "mat1", "mat2")
    _check_bias(c, shape)
    c.check_out("out", shape, dtype)
    return _add_product_kernel(c, "mat1", "mat2", dtype)


@register("Baddbmm", "self: tensor, batch1: tensor, batch2: tensor, beta: scalar = 1, "
                     "alpha: scalar = 1, out: tensor!, cubeMathType: int = 0")
def baddbmm(c: Call) -> Kernel:
    """``out = beta * self + alpha * (batch1 @ batch2)`` for 3-D batches; self broadcasts."""
    _check_rank(c, "self", 1, 3)
    _check_rank(c, "batch1", 3)
    _check_rank(c, "batch2", 3)
    dtype = _matmul_dtype(c, "self", "batch1", "batch2")
    check_cube_math_type(c)
    _check_batch(c, "batch1", "batch2")
    shape = _matmul_shape(c, "batch1", "batch2")
    _check_bias(c, shape)
    c.check_out("out", shape, dtype)
    return _add_product_kernel(c, "batch1", "batch2", dtype)


register_inplace("InplaceAddmm", "selfRef: tensor!, mat1: tensor, mat2: tensor, "
                 "beta: scalar = 1, alpha: scalar = 1, cubeMathType: int = 0", addmm,
                 self="selfRef", out="selfRef")
register_inplace("InplaceBaddbmm", "selfRef: tensor!, batch1: tensor, batch2: tensor, "
                 "beta: scalar = 1, alpha: scalar = 1, cubeMathType: int = 0", baddbmm,
                 self="selfRef", out="selfRef")


@register("Mv", "self: tensor, vec: tensor, out: tensor!, cubeMathType: int = 0")
def mv(c: Call) -> Kernel:
    """``out = self @ vec``: a matrix [N, M] times a vector [M] of the same dtype."""
    _check_rank(c, "self", 2)
    _check_rank(c, "vec", 1)
    dtype = c.check_dtype("self", MATMUL_DTYPES)
    if c.dtype("vec") != dtype:
        raise c.fail("vec", f"dtype must equal self's ({dtype})")
    check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    c.check_out("out", _matmul_shape(c, "self", "vec"), dtype)
    return _product_kernel(c, "self", "vec", dtype)


@register("Addmv", "self: tensor, mat: tensor, vec: tensor, alpha: scalar = 1, "
                   "beta: scalar = 1, out: tensor!, cubeMathType: int = 0")
def addmv(c: Call) -> Kernel:
    """``out = beta * self + alpha * (mat @ vec)``; self (1-d) broadcasts. Floats, integers
    (an integer product wraps in its dtype, as torch's) and bool inputs that promote to a
    number; note CANN's order: alpha before beta."""
    _check_rank(c, "self", 1)
    _check_rank(c, "mat", 2)
    _check_rank(c, "vec", 1)
    for name in ("self", "mat", "vec"):
        c.check_dtype(name, ADDMV_DTYPES)
    dtype = c.check_dtype("out", ADDMV_OUT_DTYPES, c.result_type("self", "mat", "vec"))
    check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    shape = _matmul_shape(c, "mat", "vec")
    _check_bias(c, shape)
    c.check_out("out", shape, dtype)
    return _add_product_kernel(c, "mat", "vec", dtype)


def _fold_batch(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[B, N, M] and [B, M, P] -> [N, B * M] and [B * M, P]: the sum over the batch of the
    products is one product over the folded reduce dim."""
    batch, rows, depth = a.shape
    return (a.transpose(1, 0, 2).reshape(rows, batch * depth),
            b.reshape(batch * depth, b.shape[2]))


@register("Addbmm", "self: tensor, batch1: tensor, batch2: tensor, beta: scalar = 1, "
                    "alpha: scalar = 1, out: tensor!, cubeMathType: int = 0")
def addbmm(c: Call) -> Kernel:
    """``out = beta * self + alpha * sum_b(batch1[b] @ batch2[b])``; self broadcasts to
    [N, P]. beta == 0 ignores self."""
    _check_rank(c, "self", 1, 2)
    b1, b2 = _check_rank(c, "batch1", 3), _check_rank(c, "batch2", 3)
    dtype = _matmul_dtype(c, "self", "batch1", "batch2")
    check_cube_math_type(c)
    if b1.shape[0] != b2.shape[0]:
        raise c.fail("batch2", f"batch {b2.shape[0]} must equal batch1's {b1.shape[0]}")
    _reduce_dims(c, "batch1", "batch2")
    shape = (b1.shape[1], b2.shape[2])
    _check_bias(c, shape)
    c.check_out("out", shape, dtype)
    return _add_product_kernel(c, "batch1", "batch2", dtype, operands=_fold_batch)


register_inplace("InplaceAddbmm", "selfRef: tensor!, batch1: tensor, batch2: tensor, "
                 "beta: scalar = 1, alpha: scalar = 1, cubeMathType: int = 0", addbmm,
                 self="selfRef", out="selfRef")


def _transposer(trans_a: bool, trans_b: bool) -> Operands | None:
    if not (trans_a or trans_b):
        return None
    return lambda a, b: (a.T if trans_a else a, b.T if trans_b else b)


@register("Gemm", "A: tensor, B: tensor, C: tensor, alpha: float = 1.0, beta: float = 1.0, "
                  "transA: int = 0, transB: int = 0, out: tensor!, cubeMathType: int = 0")
def gemm(c: Call) -> Kernel:
    """``out = alpha * op(A) @ op(B) + beta * C``, op a transpose where ``transA`` /
    ``transB`` is non-zero (A is then [K, M], B [N, K]); C broadcasts to [M, N]."""
    a, b = _check_rank(c, "A", 2), _check_rank(c, "B", 2)
    _check_rank(c, "C", 2)
    dtype = _matmul_dtype(c, "A", "B", "C")
    check_cube_math_type(c)
    trans_a, trans_b = bool(c["transA"]), bool(c["transB"])
    m, k_a = a.shape[::-1] if trans_a else a.shape
    k_b, n = b.shape[::-1] if trans_b else b.shape
    if k_a != k_b:
        raise c.fail("B", f"its reduce dim ({k_b}) does not match A's ({k_a}; transA="
                          f"{c['transA']}, transB={c['transB']})")
    _broadcasts_to(c, "C", (m, n))
    c.check_out("out", (m, n), dtype)
    return _add_product_kernel(c, "A", "B", dtype, bias="C",
                               factors=(c["alpha"], c["beta"]),
                               operands=_transposer(trans_a, trans_b))


# -- FusedMatmul -------------------------------------------------------------------------------
FUSED_OP_TYPES = ("", "16cast32", "add", "mul", "gelu_erf", "gelu_tanh", "relu")
FUSED_BIAS_TYPES = frozenset({"", "16cast32", "relu", "add", "mul"})  # bias applies to these
FUSED_X3_TYPES = frozenset({"add", "mul"})
FUSED_GELU = {"gelu_erf": 0, "gelu_tanh": 1}  # aclnnGeluV2's approximate values
HALF_DTYPES = frozenset({np.dtype(np.float16), np.dtype("bfloat16")})


def _fused_rank_limit(fused: str) -> int:
    """The most dims x1, x2 and y may have for ``fused`` (the least is 2)."""
    return {"": MATMUL_MAX_DIMS, "relu": MATMUL_MAX_DIMS, "add": 3, "mul": 3}.get(fused, 2)


@register("FusedMatmul", "x1: tensor, x2: tensor, bias: tensor?, x3: tensor?, "
                         "fusedOpType: str, cubeMathType: int, y: tensor!")
def fused_matmul(c: Call) -> Kernel:
    """``y = OP(x1 @ x2 + bias, x3)``: a matmul with its epilogue. ``fusedOpType`` "" (none),
    "relu", "add" (+ x3), "mul" (* x3), "16cast32" (a float16/bfloat16 product written as
    float32), "gelu_erf" / "gelu_tanh" (of ``x1 @ x2``; ``bias`` must be null). x1 and x2
    have equal batch dims (no broadcast): 2-6 dims for "" and "relu", 2-3 for "add"/"mul",
    2 otherwise. On CPU every mode takes float32 and float64 with any cubeMathType (CANN's
    950 takes float32 only with USE_HF32, and gelu/16cast32 only in half precision)."""
    fused = c["fusedOpType"]
    if fused not in FUSED_OP_TYPES:
        raise c.fail("fusedOpType", f"expected one of {', '.join(map(repr, FUSED_OP_TYPES))}")
    x1, x2 = c.tensor("x1"), c.tensor("x2")
    high = _fused_rank_limit(fused)
    _check_rank(c, "x1", 2, high)
    _check_rank(c, "x2", 2, high)
    if x2.ndim != x1.ndim or x2.shape[:-2] != x1.shape[:-2]:
        raise c.fail("x2", f"batch dims must equal those of 'x1' {list(x1.shape)} (no "
                           f"broadcast)")
    dtype = _matmul_dtype(c, "x1", "x2")
    cube = check_cube_math_type(c)
    shape = _matmul_shape(c, "x1", "x2")
    if fused in FUSED_GELU and c.has("bias"):
        raise c.fail("bias", f"must be null for fusedOpType {fused!r}", ACLNN_ERR_PARAM_NULLPTR)
    bias = c.has("bias") and fused in FUSED_BIAS_TYPES
    if bias:
        _check_rank(c, "bias", 1, 2)
        c.check_dtype("bias", MATMUL_DTYPES)
        _broadcasts_to(c, "bias", shape)
    x3 = fused in FUSED_X3_TYPES
    if x3:
        if not c.has("x3"):
            raise c.fail("x3", f"is null; fusedOpType {fused!r} needs it",
                         ACLNN_ERR_PARAM_NULLPTR)
        _check_rank(c, "x3", 2, 3)
        c.check_dtype("x3", MATMUL_DTYPES)
        third = c.tensor("x3").shape
        if third[-2:] != shape[-2:] or (len(third) == 3 and (
                len(shape) != 3 or third[0] not in (1, shape[0]))):
            raise c.fail("x3", f"must be [M, N] or [batch or 1, M, N] of y {list(shape)}")
    if fused == "16cast32":
        c.check_dtype("x1", HALF_DTYPES)
    out_dtype = FLOAT32 if fused == "16cast32" else dtype
    c.check_out("y", shape, out_dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    rounded = operand_dtype(dtype, cube)
    gelu_form = FUSED_GELU.get(fused)
    # operands and result already in the compute dtype: on the host, no cast and no copy
    # (a model's small products pay for every Python call: the tiny model's latency)
    plain = x1.dtype == x2.dtype == rounded == compute == out_dtype
    zero = compute.type(0)

    addends = (("bias",) if bias else ()) + (("x3",) if x3 else ())

    def writable(v, y) -> bool:
        """The product may go straight into y: contiguous, and y is no addend read after
        the product (y == x3 is a legal in-place call)."""
        return y.flags.c_contiguous and not (addends and any(
            np.may_share_memory(y, v[name]) for name in addends))

    relu_only = fused == "relu" and not bias  # the tiny model's step: two numpy calls
    # a model's constant weight: packed once for openacl's GEMM, bias and ReLU in its tiles
    packable = (compute == FLOAT32 and out_dtype == FLOAT32 and x2.ndim == 2 and
                math.prod(shape) * x1.shape[-1] >= native.PACKED_MIN_PRODUCT and
                shape[-1] >= native.FEW_COLUMNS)

    def planned(v) -> Callable[[], Any] | None:
        """The packed product's plan (``Views.plan``): a constant weight (and bias) packed
        once, the C call with the bias and ReLU in its tiles, then the rest of the
        epilogue; None where it does not apply."""
        y, a = v["y"], v["x1"]
        if "x2" not in v.constant or (bias and "bias" not in v.constant) or \
                type(y) is not np.ndarray or not writable(v, y) or \
                type(a) is not np.ndarray or a.dtype != FLOAT32:
            return None
        weight = v.derive(("packed", "x2"), ("x2",), lambda: native.pack(
            _operand(v["x2"], rounded, compute), native.RIGHT))
        row = v.derive(("bias row", "bias"), ("bias",), lambda: native.bias_vector(
            v["bias"], shape[-1])) if bias else None
        if weight is None or (bias and row is None):
            return None
        call = native.rows_times_packed_call(a, lambda: weight, y, bias=row,
                                             relu=fused == "relu")
        if call is None or not (x3 or gelu_form is not None):
            return call

        def then_epilogue() -> None:
            call()
            epilogue(np, v, y, fused_bias=True)
        return then_epilogue

    def packed_product(v, y) -> bool:
        """y = x1 @ W (+ bias) (ReLU) by the packed GEMM; False: not taken (nothing done)."""
        if "x2" not in v.constant or type(y) is not np.ndarray or not writable(v, y):
            return False
        weight = v.derive(("packed", "x2"), ("x2",), lambda: native.pack(
            _operand(v["x2"], rounded, compute), native.RIGHT))
        if weight is None:
            return False
        row = None
        if bias:
            row = v.derive(("bias row", "bias"), ("bias",),
                           lambda: native.bias_vector(v["bias"], shape[-1]))
            if row is None:
                return False
        if not native.gemm(_operand(v["x1"], rounded, compute), weight, y, bias=row,
                           relu=fused == "relu"):
            return False
        if x3 or gelu_form is not None:
            epilogue(np, v, y, fused_bias=True)
        return True

    def small_planned(v) -> Callable[[], Any] | None:
        """A small product's plan (one numpy's BLAS takes: ``native.suits`` declines it) on
        host operands already in the compute dtype: numpy's matmul straight into y, then
        the epilogue's ufuncs in place, on the arrays found once; None where it does not
        apply (the general kernel then decides per call)."""
        y, a, w = v["y"], v["x1"], v["x2"]
        if gelu_form is not None or type(y) is not np.ndarray or \
                type(a) is not np.ndarray or type(w) is not np.ndarray or \
                not writable(v, y) or native.suits(math.prod(shape[:-1]), shape[-1],
                                                   x1.shape[-1]) or native.suits(
                    shape[-2], shape[-1], math.prod(shape[:-2]) * x1.shape[-1]):
            return None  # (either way _product might hand it to the packed GEMM)
        addend = v["bias"] if bias else None
        other = v["x3"] if x3 else None
        if any(t is not None and (type(t) is not np.ndarray or t.dtype != compute)
               for t in (addend, other)):
            return None
        relu = fused == "relu"
        combine = np.add if fused == "add" else np.multiply

        def run() -> None:
            np.matmul(a, w, out=y)
            if addend is not None:
                np.add(y, addend, out=y)
            if relu:
                np.maximum(y, zero, out=y)  # NaN stays NaN, as torch.relu
            elif other is not None:
                combine(y, other, out=y)
        return run

    def kernel(v) -> None:
        if packable:
            v.plan(kernel, lambda: planned(v) or functools.partial(general, v))()
        elif plain:
            v.plan(kernel, lambda: small_planned(v) or functools.partial(general, v))()
        else:
            general(v)

    def general(v) -> None:
        y = v["y"]
        if packable and packed_product(v, y):
            return
        if plain and type(y) is np.ndarray and writable(v, y):
            _product(np, y, v["x1"], v["x2"], compute)
            if relu_only:
                np.maximum(y, zero, out=y)
            else:
                epilogue(np, v, y)
            return
        xp = array_module(y)
        direct = y.dtype == compute and writable(v, y)
        product = y if direct else xp.empty(y.shape, compute)
        # a model's weight (fp16 mode: float16) is widened once and kept
        weight = v.derive(("widened", "x2"), ("x2",), lambda: _operand(v["x2"], rounded,
                                                                         compute))
        matmul_into(product, _operand(v["x1"], rounded, compute), weight, compute,
                    tf32=cube in TF32_MATH_TYPES)
        epilogue(xp, v, product)
        if not direct and not native.narrowed_into(y, product):
            xp.copyto(y, product, casting="unsafe")

    def epilogue(xp, v, product, fused_bias: bool = False) -> None:
        """What follows the product; ``fused_bias``: the GEMM added the bias and the ReLU."""
        if bias and not fused_bias:
            product += as_array(v["bias"]).astype(compute, copy=False)
        if fused == "relu" and not fused_bias:
            xp.maximum(product, zero, out=product)  # NaN stays NaN, as torch.relu
        elif x3:
            other = as_array(v["x3"]).astype(compute, copy=False)
            if fused == "add":
                product += other
            else:
                product *= other
        elif gelu_form is not None:
            product[...] = gelu(product, gelu_form)
    return kernel


def _broadcasts_to(c: Call, name: str, shape: tuple[int, ...]) -> None:
    try:
        ok = tuple(np.broadcast_shapes(c.tensor(name).shape, shape)) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise c.fail(name, f"cannot be broadcast to the product's shape {list(shape)}")


# -- Einsum --------------------------------------------------------------------------------------
def _parse_term(c: Call, term: str, ndim: int | None, index: int | None
                ) -> tuple[list[str], int]:
    """Labels of one term (``ELLIPSIS`` stands for its broadcast dims) and how many dims the
    ellipsis covers."""
    where = "the output" if index is None else f"operand {index}"
    body = term.replace(ELLIPSIS, ".")
    if body.count(".") > 1 or (body.count(".") == 1 and ELLIPSIS not in term):
        raise c.fail("equation", f"term {term!r} of {where} has a malformed or repeated "
                                 f"ellipsis")
    labels: list[str] = []
    for char in body:
        if char == ".":
            labels.append(ELLIPSIS)
        elif char in EINSUM_LABELS:
            labels.append(char)
        else:
            raise c.fail("equation", f"term {term!r} of {where} has the invalid subscript "
                                     f"{char!r} (labels are letters a-z, A-Z)")
    named = len(labels) - labels.count(ELLIPSIS)
    if ndim is None:
        return labels, 0
    covered = ndim - named
    if covered < 0 or (covered > 0 and ELLIPSIS not in labels):
        raise c.fail("tensors", f"operand {index} has {ndim} dims but its term {term!r} "
                                f"names {named}")
    return labels, covered


def _einsum_plan(c: Call, equation: str, shapes: Sequence[tuple[int, ...]]
                 ) -> tuple[str, tuple[int, ...], int]:
    """Validate ``equation`` against the operands' shapes (``torch.einsum``'s rules); returns
    the equation for numpy, the output shape and how many leading dims of numpy's result
    are to be summed."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    if "->" in rhs or (arrow and "-" in rhs) or "-" in lhs or ">" in lhs:
        raise c.fail("equation", "expected 'term,term...->output' with one arrow")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise c.fail("equation", f"has {len(terms)} operand terms but 'tensors' holds "
                                 f"{len(shapes)} tensors")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipsis_shapes = []
    for index, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        labels, covered = _parse_term(c, term, len(shape), index)
        position = 0
        for label in labels:
            if label == ELLIPSIS:
                ellipsis_shapes.append(shape[position:position + covered])
                position += covered
                continue
            size = shape[position]
            position += 1
            counts[label] = counts.get(label, 0) + 1
            known = sizes.setdefault(label, size)
            if known != size and 1 not in (known, size):
                raise c.fail("tensors", f"label {label!r} has size {size} in operand {index} "
                                        f"but {known} elsewhere (sizes must match or be 1)")
            sizes[label] = max(known, size) if 0 not in (known, size) else 0
    try:
        batch = tuple(np.broadcast_shapes(*ellipsis_shapes)) if ellipsis_shapes else ()
    except ValueError:
        raise c.fail("tensors", "the dims covered by '...' cannot be broadcast together"
                     ) from None
    summed_batch = 0  # leading '...' dims the kernel sums (torch sums them when the output
    if arrow:         # term does not keep them; numpy would refuse)
        out_labels, _ = _parse_term(c, rhs, None, None)
        named = [label for label in out_labels if label != ELLIPSIS]
        if len(set(named)) != len(named):
            raise c.fail("equation", f"the output term {rhs!r} repeats a label")
        for label in named:
            if label not in sizes:
                raise c.fail("equation", f"output label {label!r} does not appear in any "
                                         f"operand term")
        if ELLIPSIS not in out_labels and ellipsis_shapes:
            summed_batch = len(batch)
            rhs = ELLIPSIS + rhs
    else:
        once = sorted(label for label, count in counts.items() if count == 1)
        out_labels = ([ELLIPSIS] if ellipsis_shapes else []) + once
        rhs = ("..." if ellipsis_shapes else "") + "".join(once)
    shape: list[int] = []
    for label in out_labels:
        shape.extend(batch if label == ELLIPSIS else (sizes[label],))
    return f"{lhs}->{rhs}", tuple(shape), summed_batch


@register("Einsum", "tensors: tensors, equation: str, output: tensor!")
def einsum(c: Call) -> Kernel:
    """Einstein summation (``torch.einsum``): ``tensors`` in the terms of ``equation``.

    CANN's kernel registers "abcd,abced->abce" and "a,b->ab"; on CPU any equation
    ``torch.einsum`` accepts is computed (a label's sizes must match or be 1). The operands
    and the output share one dtype.
    """
    tensors: list[TensorArg] = c["tensors"]
    equation = c["equation"]
    if equation is None:
        raise c.fail("equation", "is null", code=ACLNN_ERR_PARAM_NULLPTR)
    dtype = tensors[0].dtype
    for index, tensor in enumerate(tensors):
        if tensor.dtype not in EINSUM_DTYPES:
            names = ", ".join(sorted(str(d) for d in EINSUM_DTYPES))
            raise c.fail("tensors", f"operand {index} has dtype {tensor.dtype}, which is not "
                                    f"supported (supported: {names})")
        if tensor.dtype != dtype:
            raise c.fail("tensors", f"operand {index} has dtype {tensor.dtype} but operand 0 "
                                    f"has {dtype}; all must be the same")
    plan, shape, summed = _einsum_plan(c, equation, [t.shape for t in tensors])
    c.check_out("output", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        arrays = [as_array(a).astype(compute, copy=False) for a in v["tensors"]]
        result = np.einsum(plan, *arrays, optimize="greedy" if len(arrays) > 1 else False)
        if summed:
            result = result.sum(axis=tuple(range(summed)), dtype=compute)
        v.write("output", result)
    return kernel
