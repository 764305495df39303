"""Helpers for operator tests: run an op through OpenACL, run its PyTorch reference, compare
with CANN's precision standard for the dtype.

The comparison is ``openacl.tools.verify.single_benchmark`` (CANN's single-benchmark MERE/MARE
standard with its small-value rule; integers and bool exact; NaN and inf in the same places
with the same sign): the library is the one implementation, this module only asserts on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch

import openacl
from openacl.tensor import Tensor, create_tensor
from openacl.tools.verify import single_benchmark, verify

BF16 = np.dtype(ml_dtypes.bfloat16)
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


def agreement(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float]:
    """(cosine similarity, max absolute difference) of two model outputs, in float64."""
    a, b = ours.astype(np.float64).ravel(), theirs.astype(np.float64).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), float(np.abs(a - b).max())


def relative_errors(actual: np.ndarray, golden: np.ndarray) -> tuple[float, float]:
    """(MERE, MARE) of ``actual`` against ``golden`` under CANN's single-benchmark standard."""
    report = single_benchmark(actual, golden, np.asarray(golden).dtype)
    return report.mere, report.mare


def assert_close(actual: Any, golden: Any, what: str = "") -> None:
    """Compare under CANN's precision standard for the golden's dtype; ints/bool exact."""
    actual, golden = np.asarray(actual), np.asarray(golden)
    assert actual.shape == golden.shape, f"{what}: shape {actual.shape} != {golden.shape}"
    assert actual.dtype == golden.dtype, f"{what}: dtype {actual.dtype} != {golden.dtype}"
    report = verify(actual, golden, golden.dtype, "single_benchmark")
    assert report.passed, f"{what}:\n{report.format()}"


def outputs(result: Any) -> list[np.ndarray]:
    """The numpy values of a one-shot helper's result (one Tensor or a tuple of them)."""
    items = result if isinstance(result, tuple) else (result,)
    return [t.numpy() for t in items]
