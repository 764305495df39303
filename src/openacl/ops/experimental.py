"""Operators of CANN's ``experimental/`` tree (ops-nn's experimental/optim, ops-math's
experimental/math) that have an aclnn interface: ApplyGradientDescent, FusedMulAddN and
AddMatMatElementsPlus.

All three are element-wise with a multiplier held in a one-element tensor of the data's
dtype (the kernel reads its first element). Floating dtypes compute in float32 (float16
and bfloat16 are widened, as the kernels cast them) and round once into the output;
FusedMulAddN's integer dtypes compute natively and wrap on overflow, as its kernel's
Muls -> Add does. No dtype is promoted: every tensor must carry the first one's dtype.
"""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import ACLNN_ERR_PARAM_NULLPTR, Call, Kernel, as_array
from openacl.ops.registry import register, register_inplace

__all__: list[str] = []

FLOATS = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32))
FUSED_MUL_ADD_N_DTYPES = FLOATS | frozenset(np.dtype(t) for t in (np.int32, np.int16))
WIDE_INT = np.dtype(np.int64)  # integers compute here, then wrap into their own dtype
MIN_VAR_DIMS = 1  # ApplyGradientDescent's var and delta: 1 to 8 dims


def _same_dtype(c: Call, names: tuple[str, ...], like: str) -> None:
    """Every tensor of ``names`` has ``like``'s dtype (CANN's OP_CHECK_DTYPE_NOT_MATCH)."""
    dtype = c.dtype(like)
    for name in names:
        if c[name] is not None and c.dtype(name) != dtype:
            raise c.fail(name, f"dtype {c.dtype(name)} must equal {like}'s {dtype}")


def _one_element(c: Call, name: str) -> None:
    """``name`` is a scalar tensor: exactly one element, whatever its shape ([], [1], [1, 1])."""
    if c.tensor(name).numel != 1:
        raise c.fail(name, f"must hold exactly one element, not shape "
                           f"{list(c.tensor(name).shape)}")


def _first(view: object, dtype: np.dtype) -> np.generic:
    """The first element of a one-element tensor, in ``dtype`` (read on the host)."""
    host = view if isinstance(view, np.ndarray) else view.get()
    return np.asarray(host).reshape(-1)[:1].astype(dtype)[0]


def _apply_gradient_descent(c: Call) -> Kernel:
    """var = var - alpha * delta in place; alpha a one-element tensor, delta var's shape;
    all three share one dtype."""
    if c["var"] is None:
        raise c.fail("var", "is null", ACLNN_ERR_PARAM_NULLPTR)
    dtype = c.check_dtype("var", FLOATS)
    _same_dtype(c, ("alpha", "delta"), "var")
    shape = c.tensor("var").shape
    if len(shape) < MIN_VAR_DIMS:
        raise c.fail("var", f"must have {MIN_VAR_DIMS} to 8 dims, not {len(shape)}")
    if c.tensor("delta").shape != shape:
        raise c.fail("delta", f"shape {list(c.tensor('delta').shape)} must equal var's "
                              f"{list(shape)}")
    _one_element(c, "alpha")
    c.check_out("var", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        alpha = _first(v["alpha"], compute)
        v.write("var", v.compute("var", compute) - alpha * v.compute("delta", compute))
    return kernel


register_inplace("ApplyGradientDescent", "var: tensor!, alpha: tensor, delta: tensor",
                 _apply_gradient_descent, var="var")


@register("FusedMulAddN", "x1: tensor, x2: tensor, x3: tensor, y: tensor!")
def fused_mul_add_n(c: Call) -> Kernel:
    """y = x1 * x3[0] + x2 (the fused mul + addn of two): x1, x2 and y of one shape, x3 a
    one-element tensor; one dtype for all four. Integers wrap as the kernel's do."""
    dtype = c.check_dtype("x1", FUSED_MUL_ADD_N_DTYPES)
    _same_dtype(c, ("x2", "x3", "y"), "x1")
    shape = c.tensor("x1").shape
    if c.tensor("x2").shape != shape:
        raise c.fail("x2", f"shape {list(c.tensor('x2').shape)} must equal x1's "
                           f"{list(shape)} (no broadcast)")
    _one_element(c, "x3")
    c.check_out("y", shape, dtype, exact_dtype=True)
    compute = WIDE_INT if dtype.kind == "i" else promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        scale = _first(v["x3"], compute)
        x1 = as_array(v["x1"]).astype(compute)
        if dtype.kind == "i":  # Muls then Add, each wrapping into the dtype
            product = (x1 * scale).astype(dtype)
            v.write("y", product.astype(compute) + as_array(v["x2"]).astype(compute))
            return
        v.write("y", x1 * scale + as_array(v["x2"]).astype(compute))
    return kernel


@register("AddMatMatElementsPlus", "c: tensor, a: tensor, b: tensor, beta: tensor, "
                                   "alpha: tensor, cOut: tensor!")
def add_mat_mat_elements_plus(c: Call) -> Kernel:
    """cOut = c * beta + alpha * (a * b), element-wise with a, b and c broadcast together
    (addcmul's rule); beta and alpha one-element tensors; one dtype for all six."""
    dtype = c.check_dtype("c", FLOATS)
    _same_dtype(c, ("a", "b", "beta", "alpha", "cOut"), "c")
    _one_element(c, "beta")
    _one_element(c, "alpha")
    shape = c.broadcast("a", "b", "c")
    c.check_out("cOut", shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    def kernel(v) -> None:
        beta, alpha = _first(v["beta"], compute), _first(v["alpha"], compute)
        product = v.compute("a", compute) * v.compute("b", compute) * alpha
        v.write("cOut", v.compute("c", compute) * beta + product)
    return kernel
