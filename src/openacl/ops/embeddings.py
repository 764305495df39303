"""Embedding operators beyond the lookup (aclnnEmbedding lives with the gathers in
movement.py): aclnnEmbeddingBag, EmbeddingDenseBackward and EmbeddingRenorm, with CANN's
argument lists.

Semantics are PyTorch's (``torch.embedding_bag``, ``torch.ops.aten.embedding_dense_backward``,
``torch.embedding_renorm_``):

* ``EmbeddingBag``: ``offsets`` cut the 1-D ``indices`` into bags (a 2-D ``indices`` is one
  bag per row, ``offsets`` unused); position ``i`` belongs to bag ``#{offsets <= i} - 1``,
  and with ``includeLastOffset`` the last offset starts no bag of its own (the last bag
  still runs to the end of ``indices``, as PyTorch's does). Each bag reduces its
  rows of ``weight``: mode 0 sums (times ``perSampleWeights``), 1 averages, any other takes
  the maximum per column, whose row ``maxIndices`` records. Rows equal to ``paddingIdx``
  are left out (a negative one counts from the end, as ATen's does; one outside
  [-numWeights, numWeights) names no row); an empty bag gives zeros. ``bagSize`` counts
  each bag's rows left in (CANN: "the size of each bag"; PyTorch leaves it zero in sum
  mode), ``maxIndices`` is meaningful in max mode only (zeros otherwise).
  ``scaleGradByFreq`` and ``sparse`` shape the backward pass and do not change the forward
  result.
* ``EmbeddingDenseBackward``: ``out[numWeights, D]`` sums the rows of ``grad`` of equal
  index; ``scaleGradByFreq`` divides each by its index's count; the ``paddingIdx`` row is
  zero (a negative ``paddingIdx`` means none).
* ``EmbeddingRenorm``: every row of ``selfRef`` named in ``indices`` whose ``normType``-norm
  exceeds ``maxNorm`` is scaled by ``maxNorm / (norm + 1e-7)``.

Sums of half-precision values accumulate in float32 and round once. Index values live in
device memory; one out of range fails the stream in the kernel, naming it.
"""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import BOOL_DTYPES, Call, Kernel
from openacl.ops.indexing import add_rows, host, store
from openacl.ops.movement import (
    BF16,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    INDEX_DTYPES,
    U8,
    _check_index_range,
)
from openacl.ops.registry import register, register_inplace

EMBEDDING_FLOAT_DTYPES = F32 | F16 | BF16
# EmbeddingBag's indices and offsets: integers, at least one of the two INT32 or INT64
# (CANN refuses "indices and offsets both not INT32 or INT64")
BAG_INDEX_DTYPES = I8 | U8 | I16 | I32 | I64
BACKWARD_INDEX_DTYPES = F32 | F16 | F64 | I32 | I64 | I16 | I8 | U8 | BOOL_DTYPES
SUM, MEAN = 0, 1  # EmbeddingBag modes; any other value is max
RENORM_EPSILON = 1e-7  # added to the norm before dividing (CANN's formula)
MAX_EMBEDDING_DIMS = 8


# -- EmbeddingBag ---------------------------------------------------------------------------------
def _bags(offsets: np.ndarray, count: int) -> np.ndarray:
    """The bag of each of ``count`` positions: how many offsets are at or before it, less
    one (-1, or the bag count: in none)."""
    starts = np.sort(offsets.astype(np.int64).reshape(-1))
    return np.searchsorted(starts, np.arange(count), side="right") - 1


@register("EmbeddingBag", "weight: tensor, indices: tensor, offsets: tensor, "
                          "scaleGradByFreq: bool = False, mode: int = 0, sparse: bool = False, "
                          "perSampleWeights: tensor?, includeLastOffset: bool = False, "
                          "paddingIdx: int = -1, output: tensor!, offset2bag: tensor!, "
                          "bagSize: tensor!, maxIndices: tensor!")
def embedding_bag(c: Call) -> Kernel:
    """Sums, means or maxima of bags of ``weight`` rows (``torch.embedding_bag``); also the
    bag of each index, each bag's size and, in max mode, the row of each maximum."""
    weight = c.tensor("weight")
    c.check_dtype("weight", EMBEDDING_FLOAT_DTYPES)
    if weight.ndim != 2:
        raise c.fail("weight", "must have 2 dims (numWeights, embeddingDim)")
    indices = c.tensor("indices")
    c.check_dtype("indices", BAG_INDEX_DTYPES)
    offsets = c.tensor("offsets")
    c.check_dtype("offsets", BAG_INDEX_DTYPES)
    if indices.dtype not in INDEX_DTYPES and offsets.dtype not in INDEX_DTYPES:
        raise c.fail("offsets", f"indices ({indices.dtype}) and offsets ({offsets.dtype}): "
                                f"one of them must be int32 or int64")
    if indices.ndim > 2:
        raise c.fail("indices", "must have at most 2 dims")
    if offsets.ndim != 1 and indices.ndim < 2:
        raise c.fail("offsets", "must have 1 dim")
    mode, last = c["mode"], c["includeLastOffset"]
    if indices.ndim == 2:
        if last:
            raise c.fail("includeLastOffset", "must be false for a 2-D indices")
        bags, count = indices.shape[0], indices.numel
    else:
        bags, count = offsets.numel - (1 if last else 0), indices.numel
        if bags < 0:
            raise c.fail("offsets", "is empty; includeLastOffset needs at least one offset")
    per_sample = c["perSampleWeights"]
    if per_sample is not None:
        if per_sample.dtype != weight.dtype:
            raise c.fail("perSampleWeights", f"dtype must equal weight's ({weight.dtype})")
        if per_sample.shape != indices.shape:
            raise c.fail("perSampleWeights", f"shape must equal indices' "
                                             f"{list(indices.shape)}")
        if mode != SUM:
            raise c.fail("perSampleWeights", "is taken in sum mode (mode 0) only")
    rows, width = weight.shape
    index_dtype = promotion.promote_types(indices.dtype, offsets.dtype)
    c.check_out("output", (bags, width), weight.dtype, exact_dtype=True)
    c.check_out("offset2bag", (count,), index_dtype, exact_dtype=True)
    c.check_out("bagSize", (bags,), index_dtype, exact_dtype=True)
    maximum = mode not in (SUM, MEAN)
    c.check_out("maxIndices", (bags, width) if maximum else (bags,), index_dtype,
                exact_dtype=True)
    padding = c["paddingIdx"] % rows if rows and -rows <= c["paddingIdx"] < rows else None
    wide = promotion.compute_dtype(weight.dtype)

    def kernel(v) -> None:
        idx = _check_index_range("EmbeddingBag", "indices", host(v["indices"]).reshape(-1),
                                 rows)
        if indices.ndim == 2:
            bag = np.repeat(np.arange(bags), indices.shape[1])
        else:
            bag = np.minimum(_bags(host(v["offsets"]), count), bags - 1)
        kept = (bag >= 0) & (bag < bags) & (idx != padding if padding is not None else True)
        picked = host(v["weight"])[idx[kept]].astype(wide)
        where = bag[kept]
        sizes = np.bincount(where, minlength=bags)[:bags]
        biggest = np.zeros((bags, width), np.int64)
        result = np.zeros((bags, width), wide)
        if len(where):  # bags are runs of positions: reduce each run at once
            starts = np.flatnonzero(np.concatenate(([True], where[1:] != where[:-1])))
            present = where[starts]
            if mode in (SUM, MEAN):
                if per_sample is not None:
                    picked = picked * host(v["perSampleWeights"]).reshape(-1)[kept].astype(
                        wide)[:, None]
                result[present] = np.add.reduceat(picked, starts, axis=0)
                if mode == MEAN:
                    result = result / np.maximum(sizes, 1)[:, None]
            else:
                result[present] = np.maximum.reduceat(picked, starts, axis=0)
                # the row of the first element reaching each bag's maximum, per column
                many = len(where)
                first = np.where(picked == result[where], np.arange(many)[:, None], many)
                biggest[present] = idx[kept][np.minimum.reduceat(first, starts, axis=0)]
        store(v["output"], result)
        store(v["offset2bag"], np.clip(bag, 0, max(bags - 1, 0)) if bags else bag)
        store(v["bagSize"], sizes)
        store(v["maxIndices"], biggest if maximum else np.zeros(bags, np.int64))
    return kernel


# -- EmbeddingDenseBackward ----------------------------------------------------------------------
@register("EmbeddingDenseBackward", "grad: tensor, indices: tensor, numWeights: int, "
                                    "paddingIdx: int = -1, scaleGradByFreq: bool = False, "
                                    "out: tensor!")
def embedding_dense_backward(c: Call) -> Kernel:
    """The gradient of aclnnEmbedding's weight: ``out[numWeights, D]`` sums the rows of
    ``grad`` by index (``aten.embedding_dense_backward``)."""
    grad = c.tensor("grad")
    c.check_dtype("grad", EMBEDDING_FLOAT_DTYPES)
    indices = c.tensor("indices")
    c.check_dtype("indices", BACKWARD_INDEX_DTYPES)
    if not 2 <= grad.ndim <= MAX_EMBEDDING_DIMS:
        raise c.fail("grad", f"must have 2 to {MAX_EMBEDDING_DIMS} dims")
    if grad.numel // max(grad.shape[-1], 1) != indices.numel and grad.shape[-1]:
        raise c.fail("grad", f"must hold one row per index ({indices.numel}): shape "
                             f"{list(indices.shape)} + [embeddingDim]")
    count = c["numWeights"]
    if count < 0:
        raise c.fail("numWeights", "must be non-negative")
    width = grad.shape[-1]
    c.check_out("out", (count, width), grad.dtype, exact_dtype=True)
    padding, scale = c["paddingIdx"], c["scaleGradByFreq"]
    wide = promotion.compute_dtype(grad.dtype)

    def kernel(v) -> None:
        idx = host(v["indices"]).reshape(-1).astype(np.int64)
        _check_index_range("EmbeddingDenseBackward", "indices", idx, count)
        rows = host(v["grad"]).reshape(-1, width).astype(wide)
        if scale:
            rows = rows / np.bincount(idx, minlength=count)[idx][:, None]
        result = np.zeros((count, width), wide)
        add_rows(result, idx, rows)
        if 0 <= padding < count:
            result[padding] = 0
        store(v["out"], result)
    return kernel


# -- EmbeddingRenorm -----------------------------------------------------------------------------
def _norms(rows: np.ndarray, p: float) -> np.ndarray:
    if p == 0:
        return np.count_nonzero(rows, axis=-1).astype(rows.dtype)
    if np.isinf(p):
        return np.abs(rows).max(-1) if rows.shape[-1] else np.zeros(len(rows), rows.dtype)
    return (np.abs(rows) ** p).sum(-1) ** (1.0 / p)


def _embedding_renorm(c: Call) -> Kernel:
    """Scale each row of ``selfRef`` named in ``indices`` whose ``normType``-norm exceeds
    ``maxNorm`` down to ``maxNorm`` (``torch.embedding_renorm_``)."""
    self = c.tensor("selfRef")
    c.check_dtype("selfRef", EMBEDDING_FLOAT_DTYPES)
    if self.ndim != 2:
        raise c.fail("selfRef", "must have 2 dims")
    c.tensor("indices")
    c.check_dtype("indices", INDEX_DTYPES)
    c.check_out("selfRef", self.shape, self.dtype, exact_dtype=True)
    limit, p = c["maxNorm"], c["normType"]
    wide = promotion.compute_dtype(self.dtype)

    def kernel(v) -> None:
        table = host(v["selfRef"])
        idx = np.unique(_check_index_range("EmbeddingRenorm", "indices", host(v["indices"]),
                                           self.shape[0]))
        rows = table[idx].astype(wide)
        norms = _norms(rows, p)
        over = norms > limit
        rows[over] = rows[over] * (limit / (norms[over] + RENORM_EPSILON))[:, None]
        table[idx] = rows.astype(self.dtype)
        store(v["selfRef"], table)
    return kernel


register_inplace("EmbeddingRenorm", "selfRef: tensor!, indices: tensor, maxNorm: float, "
                                    "normType: float = 2.0", _embedding_renorm,
                 selfRef="selfRef")
