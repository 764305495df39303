"""Vector norms: Norm (``torch.norm``) and LinalgVectorNorm (``torch.linalg.vector_norm``).

Both reduce ``|x|`` over the dims named by an int array (empty: every dim) with the order
``p`` an aclScalar: 0 counts the non-zero elements, +inf is the largest ``|x|``, -inf the
smallest, any other ``p`` is ``(sum |x|^p)^(1/p)``. CANN's ATK cases pass
``INT32_MAX`` for an infinite order, so any order at or beyond ``INFINITE_ORDER`` counts as
+inf (and its negative as -inf). Sums accumulate in the compute dtype (float32; every term
is >= 0, so nothing cancels) and round once into ``out``.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import promotion
from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.reduction import _axes, _dtype_arg, _reduced_shape
from openacl.ops.registry import register, register_inplace

NORM_DTYPES = frozenset({np.dtype(np.float16), promotion.BFLOAT16, np.dtype(np.float32)})
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INFINITE_ORDER = float(2**31 - 1)  # INT32_MAX: the ATK's stand-in for an infinite order
# aclnnLinalgVectorNorm's (self dtype -> dtype argument) combinations
VECTOR_NORM_COMPUTE = {np.dtype(np.float32): {FLOAT32},
                       np.dtype(np.float16): {np.dtype(np.float16), FLOAT32},
                       promotion.BFLOAT16: {promotion.BFLOAT16, FLOAT32}}


def order(c: Call, name: str) -> float:
    """The norm order of aclScalar ``name`` as a float, infinite orders made ``inf``."""
    value = c[name]
    if value is None:
        raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
    if value.dtype.kind not in "iuf":
        raise c.fail(name, "the norm order must be a real number")
    p = float(value.value)
    if math.isnan(p):
        raise c.fail(name, "the norm order must not be NaN")
    if abs(p) >= INFINITE_ORDER:
        return math.copysign(math.inf, p)
    return p


def vector_norm(x: np.ndarray, p: float, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    """``||x||_p`` over ``axes``, accumulated in ``x``'s dtype: every term is >= 0, so a
    (pairwise) float32 sum loses nothing to cancellation and needs no float64 copy."""
    xp = array_module(x)
    if x.ndim == 0:
        axes = ()
    magnitude = xp.abs(x)
    if p == math.inf:
        return magnitude.max(axis=axes, keepdims=keep) if axes else magnitude
    if p == -math.inf:
        return magnitude.min(axis=axes, keepdims=keep) if axes else magnitude
    if p == 0:
        return (magnitude != 0).sum(axis=axes, keepdims=keep, dtype=x.dtype)
    if p == 1:
        return magnitude.sum(axis=axes, keepdims=keep)
    if p == 2:
        trailing = tuple(range(x.ndim - len(axes), x.ndim))
        if xp is np and axes == trailing:  # one pass: a row-wise dot product (BLAS-fast)
            rows = x.reshape(-1, math.prod(x.shape[a] for a in axes))
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            return norms.reshape(tuple(1 if a in axes else d for a, d in enumerate(x.shape))
                                 if keep else x.shape[:x.ndim - len(axes)])
        return xp.sqrt(xp.square(magnitude).sum(axis=axes, keepdims=keep))
    return xp.power(xp.power(magnitude, p).sum(axis=axes, keepdims=keep), 1.0 / p)


def _prepare(c: Call, p_name: str, dim_name: str, keep_name: str, out_dtype: np.dtype
             ) -> Kernel:
    """Shared phase 1: ``self`` checked, the reduced axes and ``out`` declared."""
    shape = c.tensor("self").shape
    if c[dim_name] is None:
        raise c.fail(dim_name, "is null", ACLNN_ERR_PARAM_NULLPTR)
    axes = _axes(c, dim_name, len(shape))
    p = order(c, p_name)
    if math.isinf(p) and any(shape[a] == 0 for a in axes):
        raise c.fail("self", "an infinite-order norm over a zero-size dim has no value")
    keep = bool(c[keep_name])
    c.check_out("out", _reduced_shape(shape, axes, keep), out_dtype)
    if c["out"] is not None:
        c.check_dtype("out", NORM_DTYPES)

    def kernel(v) -> None:
        v.write("out", vector_norm(v.compute("self", out_dtype), p, axes, keep))
    return kernel


@register("Norm", "self: tensor, pScalar: scalar, dim: int_array, keepdim: bool = False, "
                  "out: tensor!")
def norm(c: Call) -> Kernel:
    """``torch.norm(self, p, dim, keepdim)``: the vector p-norm over ``dim``."""
    dtype = c.check_dtype("self", NORM_DTYPES)
    return _prepare(c, "pScalar", "dim", "keepdim", dtype)


@register("LinalgVectorNorm", "self: tensor, ord: scalar, dims: int_array, "
                              "keepDims: bool = False, dtype: dtype, out: tensor!")
def linalg_vector_norm(c: Call) -> Kernel:
    """``torch.linalg.vector_norm(self, ord, dims, keepDims, dtype=dtype)``: ``self`` is cast
    to ``dtype`` (its own, or float32) before the norm; ``out`` has ``dtype``."""
    source = c.check_dtype("self", NORM_DTYPES)
    dtype = _dtype_arg(c, "dtype", NORM_DTYPES)
    if dtype not in VECTOR_NORM_COMPUTE[source]:
        raise c.fail("dtype", f"a {source} self is computed in "
                              f"{' or '.join(sorted(map(str, VECTOR_NORM_COMPUTE[source])))}")
    if c["out"] is not None and c.tensor("out").dtype != dtype:
        raise c.fail("out", f"dtype must equal the dtype argument {dtype}")
    return _prepare(c, "ord", "dims", "keepDims", dtype)


# -- Renorm --------------------------------------------------------------------------------------
RENORM_EPS = 1e-7  # added to a slice's norm before dividing by it (PyTorch's renorm)


@register("Renorm", "self: tensor, p: scalar, dim: int, maxNorm: scalar, out: tensor!")
def renorm(c: Call) -> Kernel:
    """``torch.renorm``: every slice ``self.select(dim, i)`` whose p-norm exceeds
    ``maxNorm`` is scaled to ``maxNorm / (norm + 1e-7)`` times itself; others stay."""
    dtype = c.check_dtype("self", NORM_DTYPES)
    shape = c.tensor("self").shape
    dim = c.normalize_dim("dim", c["dim"], len(shape))
    p = order(c, "p")
    if p < 0:
        raise c.fail("p", "the norm order must be >= 0")
    limit = c["maxNorm"]
    if limit is None:
        raise c.fail("maxNorm", "is null", ACLNN_ERR_PARAM_NULLPTR)
    if limit.dtype.kind not in "iuf" or not float(limit.value) >= 0:
        raise c.fail("maxNorm", "must be a real number >= 0")
    max_norm = float(limit.value)
    c.check_out("out", shape, dtype, exact_dtype=True)
    others = tuple(a for a in range(len(shape)) if a != dim)

    def kernel(v) -> None:
        x = v.compute("self", FLOAT64)
        xp = array_module(x)
        if x.ndim == 0 or not x.size:
            v.write("out", x)
            return
        norms = vector_norm(x, p, others, keep=True)
        scale = xp.where(norms > max_norm, max_norm / (norms + RENORM_EPS), 1.0)
        v.write("out", x * scale)
    return kernel


register_inplace("InplaceRenorm", "selfRef: tensor!, p: scalar, dim: int, maxNorm: scalar",
                 renorm, self="selfRef", out="selfRef")
