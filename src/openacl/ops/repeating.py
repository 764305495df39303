"""The repeat_interleave family: aclnnRepeatInterleave, RepeatInterleaveWithDim (repeats in
a tensor), RepeatInterleaveInt, RepeatInterleaveIntWithDim (one repeat count) and
RepeatInterleaveTensor (``torch.repeat_interleave(repeats)``), with CANN's argument lists.

Semantics are PyTorch's ``torch.repeat_interleave``: each element (without a dim: of the
flattened ``self``) or each slice along ``dim`` is repeated ``repeats[i]`` times, or
``repeats`` times for a single count. ``outputSize`` is the length of the result along
that dim, which CANN's document requires to equal the repeats' sum: phase 1 checks it when
the count is an integer; repeats in a tensor live in device memory, so the kernel checks
it then (a mismatch fails the stream naming ``outputSize`` and the sum), as it checks that
no repeat count is negative. Values are moved, never computed: results are exact.
"""

from __future__ import annotations

import numpy as np

from openacl.ops.call import BOOL_DTYPES, Call, Kernel, TensorArg
from openacl.ops.indexing import host, store
from openacl.ops.movement import BF16, F16, F32, I8, I16, I32, I64, INDEX_DTYPES, U8
from openacl.ops.registry import register

REPEAT_DTYPES = U8 | I8 | I16 | I32 | I64 | BOOL_DTYPES | F16 | BF16 | F32
REPEATS_DTYPES = INDEX_DTYPES
MAX_REPEAT_DIMS = 8


def _counts(op: str, repeats: np.ndarray, length: int, output_size: int) -> np.ndarray:
    """Kernel-side checks of a repeats tensor: non-negative, summing to ``outputSize``;
    returns the counts as int64 (one per element, a single count broadcast)."""
    counts = repeats.astype(np.int64).reshape(-1)
    if (counts < 0).any():
        raise ValueError(f"aclnn{op}: argument 'repeats' holds {int(counts[counts < 0][0])}; "
                         f"repeat counts must be non-negative")
    if counts.size == 1:
        counts = np.full(length, counts[0], np.int64)
    if int(counts.sum()) != output_size:
        raise ValueError(f"aclnn{op}: argument 'outputSize' = {output_size} differs from the "
                         f"sum of the repeats ({int(counts.sum())})")
    return counts


def _self(c: Call, min_dims: int) -> TensorArg:
    self = c.tensor("self")
    c.check_dtype("self", REPEAT_DTYPES)
    if not min_dims <= self.ndim <= MAX_REPEAT_DIMS:
        raise c.fail("self", f"must have {min_dims} to {MAX_REPEAT_DIMS} dims")
    return self


def _repeats_tensor(c: Call, length: int, what: str) -> TensorArg:
    repeats = c.tensor("repeats")
    c.check_dtype("repeats", REPEATS_DTYPES)
    if repeats.ndim > 1:
        raise c.fail("repeats", "must have 0 or 1 dims")
    if repeats.numel not in (1, length) and not (length == 0 and repeats.numel == 0):
        raise c.fail("repeats", f"must hold 1 or {length} counts ({what})")
    if repeats.numel == 0 and length:
        raise c.fail("repeats", f"is empty; self has {length} {what}")
    return repeats


def _output_size(c: Call) -> int:
    size = c["outputSize"]
    if size < 0:
        raise c.fail("outputSize", "must be non-negative")
    return size


def _repeat_kernel(op: str, self: TensorArg, dim: int | None, length: int, output_size: int,
                   fixed: int | None) -> Kernel:
    """Repeat along ``dim`` (None: the flattened ``self``) by the repeats tensor, or by the
    count ``fixed``."""
    def kernel(v) -> None:
        x = host(v["self"])
        x = x.reshape(-1) if dim is None else x
        counts = np.full(length, fixed, np.int64) if fixed is not None else \
            _counts(op, host(v["repeats"]), length, output_size)
        store(v["out"], np.repeat(x, counts, axis=0 if dim is None else dim))
    return kernel


@register("RepeatInterleave", "self: tensor, repeats: tensor, outputSize: int, out: tensor!")
def repeat_interleave(c: Call) -> Kernel:
    """Each element of the flattened ``self`` repeated ``repeats[i]`` times (one count:
    every element that often); ``out`` is 1-D of ``outputSize`` elements."""
    self = _self(c, 0)
    _repeats_tensor(c, self.numel, "elements")
    size = _output_size(c)
    c.check_out("out", (size,), self.dtype, exact_dtype=True)
    return _repeat_kernel("RepeatInterleave", self, None, self.numel, size, None)


@register("RepeatInterleaveWithDim", "self: tensor, repeats: tensor, dim: int, "
                                     "outputSize: int, out: tensor!")
def repeat_interleave_with_dim(c: Call) -> Kernel:
    """Each slice of ``self`` along ``dim`` repeated ``repeats[i]`` times; ``out`` has
    ``outputSize`` slices there."""
    self = _self(c, 1)
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    _repeats_tensor(c, self.shape[dim], f"slices along dim {dim}")
    size = _output_size(c)
    shape = tuple(size if k == dim else n for k, n in enumerate(self.shape))
    c.check_out("out", shape, self.dtype, exact_dtype=True)
    return _repeat_kernel("RepeatInterleaveWithDim", self, dim, self.shape[dim], size, None)


def _int_repeats(c: Call, length: int) -> int:
    repeats = c["repeats"]
    if repeats < 0:
        raise c.fail("repeats", "must be a non-negative count")
    size = _output_size(c)
    if size != length * repeats:
        raise c.fail("outputSize", f"must equal {length} * repeats = {length * repeats}")
    return repeats


@register("RepeatInterleaveInt", "self: tensor, repeats: int, outputSize: int, out: tensor!")
def repeat_interleave_int(c: Call) -> Kernel:
    """Each element of the flattened ``self`` repeated ``repeats`` times."""
    self = _self(c, 0)
    repeats = _int_repeats(c, self.numel)
    c.check_out("out", (self.numel * repeats,), self.dtype, exact_dtype=True)
    return _repeat_kernel("RepeatInterleaveInt", self, None, self.numel, c["outputSize"],
                          repeats)


@register("RepeatInterleaveIntWithDim", "self: tensor, repeats: int, dim: int, "
                                        "outputSize: int, out: tensor!")
def repeat_interleave_int_with_dim(c: Call) -> Kernel:
    """Each slice of ``self`` along ``dim`` repeated ``repeats`` times."""
    self = _self(c, 1)
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    repeats = _int_repeats(c, self.shape[dim])
    shape = tuple(n * repeats if k == dim else n for k, n in enumerate(self.shape))
    c.check_out("out", shape, self.dtype, exact_dtype=True)
    return _repeat_kernel("RepeatInterleaveIntWithDim", self, dim, self.shape[dim],
                          c["outputSize"], repeats)


@register("RepeatInterleaveTensor", "repeats: tensor, outputSize: int, out: tensor!")
def repeat_interleave_tensor(c: Call) -> Kernel:
    """``i`` repeated ``repeats[i]`` times for each ``i`` (``torch.repeat_interleave``
    of a repeats tensor); ``out`` has the repeats' dtype and ``outputSize`` elements."""
    repeats = c.tensor("repeats")
    dtype = c.check_dtype("repeats", REPEATS_DTYPES)
    if repeats.ndim != 1:
        raise c.fail("repeats", "must have 1 dim")
    size = _output_size(c)
    c.check_out("out", (size,), dtype, exact_dtype=True)
    length = repeats.numel

    def kernel(v) -> None:
        counts = _counts("RepeatInterleaveTensor", host(v["repeats"]), length, size)
        store(v["out"], np.repeat(np.arange(length, dtype=dtype), counts))
    return kernel
