"""Helpers for operator tests: run an op through OpenACL, run its PyTorch reference, compare
with CANN's precision standard for the dtype.

CANN's single-benchmark standard (compared with a golden): mean relative error (MERE) and max
relative error (MARE) below a per-dtype threshold; integers and bool exact. Relative error
is ``|actual - golden| / max(|golden|, small)`` where ``small`` is CANN's small-value
threshold for the dtype, so values near zero are judged by absolute error. NaN and inf must
appear in the same places with the same sign.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch

import openacl
from openacl.tensor import Tensor, create_tensor

BF16 = np.dtype(ml_dtypes.bfloat16)
# dtype -> (MERE threshold, MARE threshold, small-value threshold)
PRECISION = {
    np.dtype(np.float16): (2.0 ** -10, 10 * 2.0 ** -10, 2.0 ** -11),
    BF16: (2.0 ** -7, 10 * 2.0 ** -7, 2.0 ** -8),
    np.dtype(np.float32): (2.0 ** -13, 10 * 2.0 ** -13, 2.0 ** -14),
    np.dtype(np.float64): (2.0 ** -13, 10 * 2.0 ** -13, 2.0 ** -14),
    np.dtype(np.complex64): (2.0 ** -13, 10 * 2.0 ** -13, 2.0 ** -14),
    np.dtype(np.complex128): (2.0 ** -13, 10 * 2.0 ** -13, 2.0 ** -14),
}
TORCH_DTYPES = {
    np.dtype(np.bool_): torch.bool, np.dtype(np.int8): torch.int8,
    np.dtype(np.uint8): torch.uint8, np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
    np.dtype(np.float16): torch.float16, BF16: torch.bfloat16,
    np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
    np.dtype(np.complex64): torch.complex64, np.dtype(np.complex128): torch.complex128,
}
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
INTS = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64)]
BOOL = [np.dtype(np.bool_)]


def random_array(shape: Sequence[int], dtype: Any, rng: np.random.Generator | None = None,
                 low: float = -4.0, high: float = 4.0) -> np.ndarray:
    """Random data of ``dtype``: uniform floats in [low, high), small ints, random bools."""
    rng = rng or np.random.default_rng(0)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(low), info.min), min(int(high), info.max)
        return rng.integers(lo, hi + 1, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(dtype)
    return rng.uniform(low, high, shape).astype(np.float32).astype(dtype)


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor with the same dtype (bfloat16 via float32, exactly)."""
    array = np.asarray(array)
    if array.dtype == BF16:
        return torch.from_numpy(np.array(array, np.float32, order="C")).to(torch.bfloat16)
    return torch.from_numpy(np.array(array, order="C", copy=True))  # keeps 0-dim 0-dim


def from_torch(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.to(torch.float32).numpy().astype(BF16)
    return tensor.numpy()


def strided(array: np.ndarray, kind: str = "step") -> Tensor:
    """A non-contiguous device view holding ``array``'s values.

    ``step``: every other element of a twice-as-long last dim, with a storage offset;
    ``transpose``: a transposed view of the transposed data (2-D and up).
    """
    array = np.asarray(array)
    if kind == "transpose" and array.ndim >= 2:
        base = openacl.to_device(np.ascontiguousarray(np.swapaxes(array, -1, -2)))
        strides = list(base.strides)
        strides[-1], strides[-2] = strides[-2], strides[-1]
        handle = create_tensor(array.shape, array.dtype, strides, 0, openacl.ACL_FORMAT_ND,
                               base.shape, base.data_ptr)
        return Tensor(handle, keepalive=base)
    offset = 3
    padded_shape = (*array.shape[:-1], array.shape[-1] * 2) if array.ndim else (2,)
    padded = np.zeros((offset + int(np.prod(padded_shape)),), array.dtype)
    body = padded[offset:].reshape(padded_shape)
    if array.ndim:
        body[..., ::2] = array
    else:
        body[0] = array
    base = openacl.to_device(padded)
    contiguous = [int(np.prod(padded_shape[i + 1:])) for i in range(len(padded_shape))]
    strides = [s * (2 if i == len(padded_shape) - 1 else 1) for i, s in enumerate(contiguous)]
    handle = create_tensor(array.shape, array.dtype, strides if array.ndim else [], offset,
                           openacl.ACL_FORMAT_ND, (padded.size,), base.data_ptr)
    return Tensor(handle, keepalive=base)


def relative_errors(actual: np.ndarray, golden: np.ndarray) -> tuple[float, float]:
    """(MERE, MARE) of ``actual`` against ``golden`` under CANN's standard."""
    dtype = np.asarray(golden).dtype
    small = PRECISION.get(dtype, (0, 0, 1e-30))[2]
    a = np.asarray(actual).astype(np.complex128 if dtype.kind == "c" else np.float64)
    g = np.asarray(golden).astype(a.dtype)
    finite = np.isfinite(g)
    if not finite.any():
        return 0.0, 0.0
    error = np.abs(a[finite] - g[finite]) / np.maximum(np.abs(g[finite]), small)
    return float(error.mean()), float(error.max())


def assert_close(actual: Any, golden: Any, what: str = "") -> None:
    """Compare under CANN's precision standard for the golden's dtype; ints/bool exact."""
    actual, golden = np.asarray(actual), np.asarray(golden)
    assert actual.shape == golden.shape, f"{what}: shape {actual.shape} != {golden.shape}"
    assert actual.dtype == golden.dtype, f"{what}: dtype {actual.dtype} != {golden.dtype}"
    if golden.dtype not in PRECISION:
        np.testing.assert_array_equal(actual, golden, err_msg=what)
        return
    a64 = actual.astype(np.complex128 if golden.dtype.kind == "c" else np.float64)
    g64 = golden.astype(a64.dtype)
    np.testing.assert_array_equal(np.isnan(a64), np.isnan(g64), err_msg=f"{what}: NaN places")
    infinite = np.isinf(g64)
    np.testing.assert_array_equal(a64[infinite], g64[infinite], err_msg=f"{what}: inf values")
    assert not np.isinf(a64[~infinite & ~np.isnan(g64)]).any(), f"{what}: unexpected inf"
    mere, mare = relative_errors(actual, golden)
    mere_max, mare_max, _ = PRECISION[golden.dtype]
    assert mere <= mere_max and mare <= mare_max, (
        f"{what}: MERE {mere:.3g} (limit {mere_max:.3g}), MARE {mare:.3g} "
        f"(limit {mare_max:.3g}) for {golden.dtype}")


def outputs(result: Any) -> list[np.ndarray]:
    """The numpy values of a one-shot helper's result (one Tensor or a tuple of them)."""
    items = result if isinstance(result, tuple) else (result,)
    return [t.numpy() for t in items]
