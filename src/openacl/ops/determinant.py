"""Determinants: aclnnSlogdet (torch.linalg.slogdet), the sign and the natural log of the
absolute value of the determinant of each square matrix of a batch.

CANN computes it as LogMatrixDeterminant (an LU factorisation with partial pivoting) in
self's dtype, then casts into the outputs' dtypes. Here the factorisation runs in float64
(complex128 for complex input): a float32 LU of a 512 x 512 matrix loses digits in the
sum of 512 logarithms that a user compares with torch's float64 answer. It runs on the
host, as CANN's LogMatrixDeterminant runs on the AI CPU: one pivoted elimination per matrix,
its results (one pair per matrix) written back to the device. A singular matrix
gives sign 0 and log -inf; an n = 0 matrix has determinant 1 (torch's rule).
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import COMPLEX_DTYPES, Call, Kernel, as_array
from openacl.ops.registry import register

__all__: list[str] = []

SLOGDET_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                                 np.complex128))
MATRIX_DIMS = 2  # the trailing (n, n) of self
WIDE = {"f": np.dtype(np.float64), "c": np.dtype(np.complex128)}  # the LU's dtype by kind


@register("Slogdet", "self: tensor, signOut: tensor!, logOut: tensor!")
def slogdet(c: Call) -> Kernel:
    """signOut = sign(det(self)), logOut = log|det(self)| per (n, n) matrix of self (shape
    (*, n, n)); both outputs have self's batch shape and a dtype of SLOGDET_DTYPES, complex
    when self is (the sign is then det / |det|, the log's imaginary part 0)."""
    dtype = c.check_dtype("self", SLOGDET_DTYPES)
    shape = c.tensor("self").shape
    if len(shape) < MATRIX_DIMS:
        raise c.fail("self", f"must have at least {MATRIX_DIMS} dims (*, n, n), not "
                             f"{len(shape)}")
    if shape[-1] != shape[-2]:
        raise c.fail("self", f"must be a batch of square matrices; the last two dims are "
                             f"{shape[-2]} by {shape[-1]}")
    complex_input = dtype in COMPLEX_DTYPES
    for name in ("signOut", "logOut"):
        if c[name] is not None:
            out_dtype = c.check_dtype(name, SLOGDET_DTYPES)
            if complex_input and out_dtype not in COMPLEX_DTYPES:
                raise c.fail(name, f"dtype {out_dtype} must be complex, as self's "
                                   f"{dtype} is")
        c.check_out(name, shape[:-MATRIX_DIMS], dtype)
    wide = WIDE[dtype.kind]

    def kernel(v) -> None:
        x = as_array(v["self"])
        if x.size == 0 and shape[-1] != 0:
            return  # an empty batch: nothing to write
        host = x if isinstance(x, np.ndarray) else x.get()
        sign, log = np.linalg.slogdet(host.astype(wide))
        v.write("signOut", sign)
        v.write("logOut", log)
    return kernel
