"""Selection operators: the positions of non-zero elements (aclnnNonzero, NonzeroV2), the
distinct elements (Unique, Unique2, UniqueDim), medians (Median, MedianDim, NanMedian,
NanMedianDim), the k-th smallest (Kthvalue) and top-k / top-p filtering of logits
(ApplyTopKTopP) and sampling (TopKTopPSampleV2), with CANN's argument lists.

Semantics are CANN's, which are PyTorch's (``torch.nonzero``, ``torch.unique``,
``torch.median``, ``torch.nanmedian``, ``torch.kthvalue``):

* A median is the lower one of an even count: the element at sorted position
  ``(n - 1) // 2``. ``Median`` gives NaN for a slice holding a NaN (its index is the first
  NaN's); ``NanMedian`` leaves NaNs out (a slice of NaNs only gives NaN at index 0, as
  CANN's document shows). Kthvalue sorts NaN last. The index is the element's position in
  ``self``; among equal values it is the one a stable sort puts there.
* ``Unique`` returns its values sorted ascending whether ``sorted`` is set or not (CANN
  leaves the order of an unsorted result open; Ascend 950 sorts too); ``UniqueDim`` finds the
  distinct slices along ``dim``, ordered lexicographically.

How many elements Nonzero and Unique return depends on the data: the outputs are sized for
the most (``numel`` non-zeros, ``numel`` distinct values), receive the result at their start
and then report their real shape as their view shape, which ``aclGetViewShape`` reads after
the stream is synchronized, as CANN's example does (``indexing.report_shape``).
"""

from __future__ import annotations

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import promotion
from openacl.ops.call import ALL_DTYPES, COMPLEX_DTYPES, Call, Kernel
from openacl.ops.fpstate import ignore_floating_point
from openacl.ops.indexing import declare_sized_out, host, report_shape, store
from openacl.ops.movement import BF16, F16, F32, I8, I16, I32, I64, U8, U16, U32, U64
from openacl.ops.registry import register

INDEX_OUT_DTYPE = np.dtype(np.int64)  # positions, inverse indices and counts
NONZERO_DTYPES = ALL_DTYPES - COMPLEX_DTYPES
UNIQUE_DTYPES = ALL_DTYPES - COMPLEX_DTYPES
MEDIAN_DTYPES = F32 | F16 | U8 | I8 | I16 | I32 | I64 | BF16
KTHVALUE_DTYPES = BF16 | F16 | F32 | I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64
MAX_SELECTION_DIMS = 8
TOP_DTYPES = BF16 | F16 | F32  # ApplyTopKTopP's logits and p
TOP_K_DTYPES = I32


# -- Nonzero ------------------------------------------------------------------------------------
def _nonzero(c: Call, op: str, transposed: bool) -> Kernel:
    self = c.tensor("self")
    c.check_dtype("self", NONZERO_DTYPES)
    if self.ndim > MAX_SELECTION_DIMS:
        raise c.fail("self", f"must have at most {MAX_SELECTION_DIMS} dims")
    rank, count = self.ndim, self.numel
    shape, most = ((rank, -1), (rank, count)) if transposed else ((-1, rank), (count, rank))
    target = declare_sized_out(c, "out", shape, INDEX_OUT_DTYPE, most)

    def kernel(v) -> None:
        x = host(v["self"])
        positions = np.stack(np.nonzero(x)) if rank else np.zeros((0, int(bool(x))),
                                                                   np.int64)
        result = positions.astype(np.int64)  # (rank, N)
        report_shape(target, v["out"], result if transposed else result.T, op, "out")
    return kernel


@register("Nonzero", "self: tensor, out: tensor!")
def nonzero(c: Call) -> Kernel:
    """The positions of the non-zero elements of ``self``, one row of coordinates each:
    ``out`` is (N, self.dim()) (``torch.nonzero``); sized (self.numel(), self.dim()), it
    reports its real shape afterwards."""
    return _nonzero(c, "Nonzero", transposed=False)


@register("NonzeroV2", "self: tensor, out: tensor!")
def nonzero_v2(c: Call) -> Kernel:
    """Nonzero with one column per element: ``out`` is (self.dim(), N)."""
    return _nonzero(c, "NonzeroV2", transposed=True)


# -- Unique ----------------------------------------------------------------------------------------
def _sortable(x: np.ndarray) -> np.ndarray:
    """``x`` in a dtype numpy sorts natively (bfloat16 widened exactly to float32)."""
    return x.astype(np.float32) if x.dtype == promotion.BFLOAT16 else x


def _unique_flat(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values ascending, inverse indices shaped like ``x``, counts); NaNs are each their
    own value, as PyTorch keeps them."""
    flat = x.reshape(-1)
    keys = _sortable(flat)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if ordered.size:
        fresh = np.empty(ordered.size, bool)
        fresh[0] = True
        fresh[1:] = ordered[1:] != ordered[:-1]  # (NaN != NaN: every NaN stays)
    else:
        fresh = np.zeros(0, bool)
    group = np.cumsum(fresh) - 1
    inverse = np.empty(flat.size, np.int64)
    inverse[order] = group
    starts = np.flatnonzero(fresh)
    counts = np.diff(np.append(starts, ordered.size)).astype(np.int64)
    return flat[order[starts]], inverse.reshape(x.shape), counts


def _unique(c: Call, op: str, with_counts: bool) -> Kernel:
    self = c.tensor("self")
    c.check_dtype("self", UNIQUE_DTYPES)
    if self.ndim > MAX_SELECTION_DIMS:
        raise c.fail("self", f"must have at most {MAX_SELECTION_DIMS} dims")
    count = self.numel
    values = declare_sized_out(c, "valueOut", (-1,), self.dtype, (count,))
    c.check_out("inverseOut", self.shape, INDEX_OUT_DTYPE, exact_dtype=True)
    counts = declare_sized_out(c, "countsOut", (-1,), INDEX_OUT_DTYPE, (count,)) \
        if with_counts else None

    def kernel(v) -> None:
        found, inverse, tally = _unique_flat(host(v["self"]))
        report_shape(values, v["valueOut"], found, op, "valueOut")
        store(v["inverseOut"], inverse)
        if with_counts:
            report_shape(counts, v["countsOut"], tally, op, "countsOut")
    return kernel


@register("Unique", "self: tensor, sorted: bool = True, returnInverse: bool = False, "
                    "valueOut: tensor!, inverseOut: tensor!")
def unique(c: Call) -> Kernel:
    """The distinct elements of ``self`` (ascending) and, for each element, the position of
    its value among them (``torch.unique``); ``valueOut`` sized ``self.numel()`` reports
    its real length afterwards."""
    return _unique(c, "Unique", with_counts=False)


@register("Unique2", "self: tensor, sorted: bool = True, returnInverse: bool = False, "
                     "returnCounts: bool = False, valueOut: tensor!, inverseOut: tensor!, "
                     "countsOut: tensor!")
def unique2(c: Call) -> Kernel:
    """Unique with the number of times each distinct value occurs (``countsOut``, as long
    as ``valueOut``)."""
    return _unique(c, "Unique2", with_counts=True)


@register("UniqueDim", "self: tensor, sorted: bool = True, returnInverse: bool = False, "
                       "dim: int = 0, valueOut: tensor!, inverseOut: tensor!, "
                       "countsOut: tensor!")
def unique_dim(c: Call) -> Kernel:
    """The distinct slices of ``self`` along ``dim``, ordered lexicographically, with each
    slice's position among them and their counts (``torch.unique(dim=...)``)."""
    self = c.tensor("self")
    c.check_dtype("self", UNIQUE_DTYPES)
    if not 1 <= self.ndim <= MAX_SELECTION_DIMS:
        raise c.fail("self", f"must have 1 to {MAX_SELECTION_DIMS} dims")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    size = self.shape[dim]
    shape = tuple(-1 if k == dim else n for k, n in enumerate(self.shape))
    values = declare_sized_out(c, "valueOut", shape, self.dtype, self.shape)
    c.check_out("inverseOut", (size,), INDEX_OUT_DTYPE, exact_dtype=True)
    counts = declare_sized_out(c, "countsOut", (-1,), INDEX_OUT_DTYPE, (size,))

    def kernel(v) -> None:
        x = np.moveaxis(host(v["self"]), dim, 0)
        rows = _sortable(x.reshape(size, -1))
        order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(size)
        ordered = rows[order]
        fresh = np.ones(size, bool)
        if size:
            fresh[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
        group = np.cumsum(fresh) - 1
        inverse = np.empty(size, np.int64)
        inverse[order] = group
        starts = np.flatnonzero(fresh)
        tally = np.diff(np.append(starts, size)).astype(np.int64)
        found = np.moveaxis(x[order[starts]], 0, dim)
        report_shape(values, v["valueOut"], found, "UniqueDim", "valueOut")
        store(v["inverseOut"], inverse)
        report_shape(counts, v["countsOut"], tally, "UniqueDim", "countsOut")
    return kernel


# -- medians and the k-th smallest ----------------------------------------------------------------
def _rows(x: np.ndarray, dim: int | None) -> np.ndarray:
    """``x`` as (slices, length): one row per slice along ``dim`` (all of it for None)."""
    if dim is None:
        return _sortable(x.reshape(1, -1))
    moved = np.moveaxis(np.atleast_1d(x), dim, -1)
    return _sortable(moved.reshape(-1, moved.shape[-1]))


def _select(rows: np.ndarray, rank: str, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (value, index) of the ``rank`` element: "median" (lower median, NaN if the
    row holds one), "nanmedian" (of the non-NaN values) or "kth" (``k``-th smallest,
    1-based, NaN last). The value comes from a partition (linear time, NaN last as in a
    sort); its index is the one a stable sort would put there: the j-th occurrence of the
    value, j being its position less the count of smaller elements."""
    length = rows.shape[-1]
    nan = np.isnan(rows) if rows.dtype.kind == "f" else None
    nans = nan.sum(-1) if nan is not None else np.zeros(len(rows), np.int64)
    if rank == "kth":
        position = np.full(len(rows), k - 1)
    elif rank == "median":
        position = np.where(nans > 0, length - nans, (length - 1) // 2)  # the first NaN
    else:
        position = np.maximum((length - nans - 1) // 2, 0)
    value = np.empty(len(rows), rows.dtype)
    for at in np.unique(position):  # one partition per distinct position (usually one)
        chosen = position == at
        value[chosen] = np.partition(rows[chosen], int(at), axis=-1)[:, int(at)]
    target = value[:, None]
    if nan is not None:
        missing = np.isnan(value)[:, None]
        equal = np.where(missing, nan, rows == target)
        smaller = np.where(missing[:, 0], length - nans, (rows < target).sum(-1))
    else:
        equal, smaller = rows == target, (rows < target).sum(-1)
    occurrence = position - smaller
    index = np.argmax(np.cumsum(equal, -1) > occurrence[:, None], -1)
    if rank == "nanmedian":
        index = np.where(nans == length, 0, index)  # all NaN: NaN at index 0
    return value, index.astype(np.int64)


def _reduced_shape(shape: tuple[int, ...], dim: int, keep: bool) -> tuple[int, ...]:
    if not shape:
        return ()
    return tuple(1 if k == dim else n for k, n in enumerate(shape) if keep or k != dim)


def _whole_median(c: Call, out: str, rank: str) -> Kernel:
    self = c.tensor("self")
    c.check_dtype("self", MEDIAN_DTYPES)
    if self.numel == 0:
        raise c.fail("self", "is empty: it has no median")
    given = c[out]
    shape = (1,) if given is not None and given.shape == (1,) else ()  # CANN's doc: (1,)
    c.check_out(out, shape, self.dtype, exact_dtype=True)

    def kernel(v) -> None:
        value, _ = _select(_rows(host(v["self"]), None), rank)
        store(v[out], value.reshape(shape))
    return kernel


def _median_dim(c: Call, op: str, rank: str, keep_name: str, k: int = 0,
                dtypes: frozenset[np.dtype] = MEDIAN_DTYPES) -> Kernel:
    self = c.tensor("self")
    c.check_dtype("self", dtypes)
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    length = self.shape[dim] if self.ndim else 1
    if length == 0:
        raise c.fail("self", f"has no elements along dim {dim}")
    if rank == "kth" and not 1 <= k <= length:
        raise c.fail("k", f"must be in [1, {length}] (the size of dim {dim})")
    shape = _reduced_shape(self.shape, dim, c[keep_name])
    c.check_out("valuesOut", shape, self.dtype, exact_dtype=True)
    c.check_out("indicesOut", shape, INDEX_OUT_DTYPE, exact_dtype=True)

    def kernel(v) -> None:
        value, index = _select(_rows(host(v["self"]), dim), rank, k)
        store(v["valuesOut"], value.reshape(shape))
        store(v["indicesOut"], index.reshape(shape))
    return kernel


@register("Median", "self: tensor, valuesOut: tensor!")
def median(c: Call) -> Kernel:
    """The lower median of all of ``self`` (NaN if it holds one) (``torch.median``)."""
    return _whole_median(c, "valuesOut", "median")


@register("MedianDim", "self: tensor, dim: int, keepDim: bool = False, valuesOut: tensor!, "
                       "indicesOut: tensor!")
def median_dim(c: Call) -> Kernel:
    """The lower median of each slice along ``dim`` and its index
    (``torch.median(dim=...)``)."""
    return _median_dim(c, "MedianDim", "median", "keepDim")


@register("NanMedian", "self: tensor, out: tensor!")
def nan_median(c: Call) -> Kernel:
    """The lower median of the non-NaN values of ``self`` (``torch.nanmedian``)."""
    return _whole_median(c, "out", "nanmedian")


@register("NanMedianDim", "self: tensor, dim: int, keepDim: bool = False, "
                          "valuesOut: tensor!, indicesOut: tensor!")
def nan_median_dim(c: Call) -> Kernel:
    """NanMedian of each slice along ``dim``, with its index."""
    return _median_dim(c, "NanMedianDim", "nanmedian", "keepDim")


@register("Kthvalue", "self: tensor, k: int, dim: int = -1, keepdim: bool = False, "
                      "valuesOut: tensor!, indicesOut: tensor!")
def kthvalue(c: Call) -> Kernel:
    """The ``k``-th smallest element of each slice along ``dim`` and its index
    (``torch.kthvalue``)."""
    return _median_dim(c, "Kthvalue", "kth", "keepdim", c["k"], KTHVALUE_DTYPES)



# -- top-k / top-p filtering --------------------------------------------------------------------


def _top_k_top_p(logits: np.ndarray, p: np.ndarray | None, k: np.ndarray | None
                 ) -> np.ndarray:
    """CANN's ApplyTopKTopP formula on float rows: sort ascending (stable), drop what lies
    below the k-th largest, then the smallest values whose softmax mass stays within 1 - p
    (the largest is always kept); dropped positions become -inf, in the original order."""
    order = np.argsort(logits, axis=-1, kind="stable")
    ordered = np.take_along_axis(logits, order, -1)
    rows, width = ordered.shape
    if k is not None:
        k = k.astype(np.int64).reshape(-1)
        active = (k > 0) & (k < width)  # other k: no top-k filtering
        threshold = ordered[np.arange(rows), np.clip(width - k, 0, width - 1)]
        below = active[:, None] & (ordered < threshold[:, None])
        ordered = np.where(below, -np.inf, ordered)
    if p is not None:  # the mass in float64: the cut is a comparison, best made exactly
        shifted = ordered.astype(np.float64) - ordered.max(-1, keepdims=True)
        weights = np.exp(shifted)
        probs = weights / weights.sum(-1, keepdims=True)
        dropped = np.cumsum(probs, -1) <= (1 - p.astype(np.float64).reshape(-1, 1))
        dropped[:, -1] = False  # every row keeps its largest
        ordered = np.where(dropped, -np.inf, ordered)
    out = np.empty_like(ordered)
    np.put_along_axis(out, order, ordered, -1)
    return out


@register("ApplyTopKTopP", "logits: tensor, p: tensor?, k: tensor?, out: tensor!")
def apply_top_k_top_p(c: Call) -> Kernel:
    """``logits`` with every value outside the top ``k[b]`` of its row, or outside the
    smallest set of largest values whose probability reaches ``p[b]``, set to -inf
    (CANN's formula; k <= 0 or k >= the row length filters nothing)."""
    logits = c.tensor("logits")
    c.check_dtype("logits", TOP_DTYPES)
    if logits.ndim != 2:
        raise c.fail("logits", "must have 2 dims (batch, vocabulary)")
    if c["p"] is None and c["k"] is None:
        raise c.fail("k", "is null, and so is p: give at least one", ACLNN_ERR_PARAM_NULLPTR)
    rows = logits.shape[0]
    for name, dtypes in (("p", frozenset({logits.dtype})), ("k", TOP_K_DTYPES)):
        if c[name] is not None:
            c.check_dtype(name, dtypes)
            if c.tensor(name).shape != (rows,):
                raise c.fail(name, f"shape must be [{rows}] (one per row of logits)")
    c.check_out("out", logits.shape, logits.dtype, exact_dtype=True)
    wide = promotion.compute_dtype(logits.dtype)
    has_p, has_k = c["p"] is not None, c["k"] is not None

    def kernel(v) -> None:
        with ignore_floating_point():  # (-inf rows: exp and the max meet inf - inf)
            result = _top_k_top_p(host(v["logits"]).astype(wide),
                                  host(v["p"]).astype(wide) if has_p else None,
                                  host(v["k"]) if has_k else None)
        store(v["out"], result)
    return kernel


# -- TopKTopPSampleV2 ---------------------------------------------------------------------------
SAMPLE_KS_MAX_LIMIT = 1024  # ksMax's range is [1, 1024], aligned up to a multiple of 8
SAMPLE_MAX_VOCABULARY = 1 << 20
SAMPLE_Q_DTYPES = F32
SAMPLE_BLOCK_ELEMENTS = 1 << 20  # rows sampled together: about 8 MiB per float64 array


def _compact(keep: np.ndarray, *rows: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """``rows`` with each row's kept entries moved to its front, in their order; and the
    count kept per row (entries past it are left-overs, to be masked)."""
    order = np.argsort(~keep, axis=-1, kind="stable")
    return [np.take_along_axis(r, order, -1) for r in rows], keep.sum(-1)


def _softmax_rows(x: np.ndarray, live: np.ndarray) -> np.ndarray:
    """The softmax of each row over its ``live`` entries (0 elsewhere), max-shifted."""
    masked = np.where(live, x, -np.inf)
    weights = np.exp(masked - masked.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def _top_k_top_p_sample(x: np.ndarray, k: np.ndarray, p: np.ndarray, min_p: np.ndarray,
                        q: np.ndarray | None, eps: float, ks_cap: int, input_is_logits: bool
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CANN's TopKTopPSampleV2 stages on float64 rows ``x`` (batch, vocabulary), every row
    at once: (the selected index per row, the surviving values and their positions in ``x``
    compacted to each row's front, their count per row).

    Stages, per row: sort descending (stable); top-k keeps the first k when 1 <= k <=
    ks_cap (else the whole row); the values become probabilities by a softmax over those
    kept (``input_is_logits``) or are taken as they are; top-p (p < 1) keeps the prefix
    whose exclusive running sum stays below p (p <= 0: the largest alone, with probability
    1 for logits); a row with neither top-k nor top-p is not sorted; min-p (0 < min_p < 1)
    keeps the values >= min_p times the largest (min_p >= 1: the largest alone); the
    sample is the argmax of the values divided by ``|q| + eps`` (q aligned to the compacted
    values), or of the values without q.
    """
    rows, width = x.shape
    cols = np.arange(width)
    order = np.argsort(-x, axis=-1, kind="stable")
    values = np.take_along_axis(x, order, -1)
    use_k = (k >= 1) & (k <= min(ks_cap, width))
    live = cols < np.where(use_k, k, width)[:, None]
    if input_is_logits:
        values = _softmax_rows(values, live)
    use_p = p < 1
    exclusive = np.cumsum(np.where(live, values, 0), -1) - values
    keep = np.where(use_p[:, None], exclusive < p[:, None], True) & live
    keep[p <= 0] = cols == 0
    (values, order), _ = _compact(keep, values, order)
    if input_is_logits:
        values[p <= 0, 0] = 1.0
    # a row with neither top-k nor top-p (and min-p below 1) is never sorted
    plain = ~use_k & ~use_p & (min_p < 1)
    if plain.any():
        whole = np.ones((int(plain.sum()), width), bool)
        values[plain] = _softmax_rows(x[plain], whole) if input_is_logits else x[plain]
        order[plain] = cols
        keep[plain] = True
    count = keep.sum(-1)
    present = cols < count[:, None]
    largest = np.where(present, values, -np.inf).max(-1)
    with ignore_floating_point():  # (0 * -inf for an empty row: no threshold)
        threshold = largest * min_p
    above = values >= threshold[:, None]
    band = ((min_p > 0) & (min_p < 1))[:, None]
    kept = present & np.where(band, above, True)
    kept[min_p >= 1] = cols == 0
    (values, order), count = _compact(kept, values, order)
    present = cols < count[:, None]
    scores = values if q is None else values / (np.abs(q) + eps)
    choice = np.where(present, scores, -np.inf).argmax(-1)
    selected = order[np.arange(rows), choice]
    return selected, values, order, count


@register("TopKTopPSampleV2",
          "logits: tensor, topK: tensor, topP: tensor, q: tensor?, minPs: tensor?, "
          "eps: float = 1e-8, isNeedLogits: bool = False, topKGuess: int = 32, "
          "ksMax: int = 1024, inputIsLogits: bool = True, isNeedSampleResult: bool = False, "
          "logitsSelectIdx: tensor!, logitsTopKPSelect: tensor!, logitsIdx: tensor!, "
          "logitsSortMasked: tensor!")
def top_k_top_p_sample_v2(c: Call) -> Kernel:
    """Top-k, top-p and min-p filtering of each row of ``logits``, then a sample (CANN's
    document and its ATK golden): ``logitsSelectIdx`` the sampled position per row;
    ``logitsTopKPSelect`` (isNeedLogits) the logits that survive the filters, the others
    -inf (inputIsLogits) or 0; with isNeedSampleResult, ``logitsSortMasked`` the surviving
    probabilities compacted to each row's front (then 0) and ``logitsIdx`` their positions,
    and no sample. Outputs a mode does not produce are left as they are, as on the device.
    ``topKGuess`` only steers the device's search: the result does not depend on it."""
    logits = c.tensor("logits")
    dtype = c.check_dtype("logits", TOP_DTYPES)
    if logits.ndim != 2 or logits.numel == 0:
        raise c.fail("logits", "must be a non-empty 2-dim tensor (batch, vocabulary)")
    rows, width = logits.shape
    if width > SAMPLE_MAX_VOCABULARY:
        raise c.fail("logits", f"vocabulary size must be at most {SAMPLE_MAX_VOCABULARY}")
    c.check_dtype("topK", TOP_K_DTYPES)
    for name in ("topK", "topP", "minPs"):
        if c[name] is None:
            continue
        if name != "topK":
            c.check_dtype(name, frozenset({dtype}))
        accepted = ((rows,), (rows, 1)) if name == "minPs" else ((rows,),)
        if c.tensor(name).shape not in accepted:
            raise c.fail(name, f"shape must be [{rows}] (one per row of logits)")
    if c["q"] is not None:
        c.check_dtype("q", SAMPLE_Q_DTYPES)
        if c.tensor("q").shape != (rows, width):
            raise c.fail("q", f"shape must be that of logits, {[rows, width]}")
    ks_max = c["ksMax"]
    if not 1 <= ks_max <= SAMPLE_KS_MAX_LIMIT:
        raise c.fail("ksMax", f"must be in [1, {SAMPLE_KS_MAX_LIMIT}]")
    ks_cap = min(-(-ks_max // 8) * 8, SAMPLE_KS_MAX_LIMIT)
    c.check_out("logitsSelectIdx", (rows,), INDEX_OUT_DTYPE, exact_dtype=True)
    c.check_out("logitsTopKPSelect", (rows, width), np.dtype(np.float32), exact_dtype=True)
    c.check_out("logitsIdx", (rows, width), INDEX_OUT_DTYPE, exact_dtype=True)
    c.check_out("logitsSortMasked", (rows, width), np.dtype(np.float32), exact_dtype=True)
    eps, input_is_logits = float(c["eps"]), bool(c["inputIsLogits"])
    need_logits, need_sample_result = bool(c["isNeedLogits"]), bool(c["isNeedSampleResult"])
    has_q, has_min_p = c["q"] is not None and not need_sample_result, c["minPs"] is not None

    def kernel(v) -> None:
        logits_rows, top_k, top_p = host(v["logits"]), host(v["topK"]), host(v["topP"])
        min_ps = host(v["minPs"]).reshape(rows) if has_min_p else np.full(rows, -1.0)
        q = host(v["q"]) if has_q else None
        step = max(1, SAMPLE_BLOCK_ELEMENTS // width)  # float64 temporaries stay bounded
        for start in range(0, rows, step):
            block = slice(start, min(start + step, rows))
            x = logits_rows[block].astype(np.float64)
            with ignore_floating_point():  # (exp of -inf rows, a q of 0 with eps 0)
                selected, values, positions, count = _top_k_top_p_sample(
                    x, top_k[block].astype(np.int64), top_p[block].astype(np.float64),
                    min_ps[block].astype(np.float64),
                    None if q is None else q[block].astype(np.float64), eps, ks_cap,
                    input_is_logits)
            present = np.arange(width) < count[:, None]
            if need_sample_result:
                store(v["logitsSortMasked"][block], np.where(present, values, 0))
                store(v["logitsIdx"][block], np.where(present, positions, 0))
            else:
                store(v["logitsSelectIdx"][block], selected)
            if need_logits:
                survivors = np.full(x.shape, -np.inf if input_is_logits else 0.0)
                np.put_along_axis(survivors, positions, np.where(
                    present, np.take_along_axis(x, positions, -1), survivors[:, :1]), -1)
                store(v["logitsTopKPSelect"][block], survivors)
    return kernel
