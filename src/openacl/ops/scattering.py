"""Scatter operators: aclnnScatter / aclnnInplaceScatter, aclnnScatterReduce /
aclnnInplaceScatterReduce and aclnnScatterNd, with CANN's argument lists.

Semantics are CANN's, which for Scatter and ScatterReduce are PyTorch's (``Tensor.scatter``
with ``reduce``, ``Tensor.scatter_reduce`` with ``include_self``):

* ``Scatter`` / ``ScatterReduce`` along ``dim``:
  ``out[i][index[i][j][k]][k] = f(out[...], src[i][j][k])`` (dim 1 of a 3-d tensor) with
  ``out`` starting as a copy of ``self``. ``self``, ``index`` and ``src`` have the same
  number of dims; ``index.size(d) <= src.size(d)`` for every dim and
  ``index.size(d) <= self.size(d)`` for every other dim than ``dim``. ``reduce`` is
  0 none (replace), 1 add, 2 mul, and for ScatterReduce also 3 max, 4 min, 5 mean;
  ``includeSelf`` false starts every position that receives a value from the reduction's
  identity instead of ``self`` (a mean then averages the received values only).
* ``ScatterList``: a KV-cache style write of ``updates[b]`` into the tensor ``varRef[b]`` of
  a list along ``axis`` at ``indice[b]`` (see its docstring).
* ``ScatterNd``: ``out = data`` with ``out[indices[i..., :]] = updates[i...]``: the last
  dim of ``indices`` addresses the first ``indices.shape[-1]`` dims of ``data``, and
  ``updates`` has the shape ``indices.shape[:-1] + data.shape[indices.shape[-1]:]``.

Reductions apply the values in ``index`` order, one after another, as the reference
definitions loop (so floating-point sums round as theirs do; float16 and bfloat16 sums and
products run in float32 and round once, as PyTorch's CPU kernels and CANN's cases expect);
where several values replace
the same position (``reduce`` 0) the last one wins. Index values live in device memory:
an index outside ``[0, size)`` is found by the kernel, which raises, so the stream fails and
its next synchronize names the operator, the argument and the value (CANN's indices are
non-negative; a caller wraps negative ones first). Dtype lists are the CANN documents'; the
host kernels accept every dtype numpy holds for ScatterNd too (CANN lists FLOAT16, FLOAT,
BFLOAT16 and BOOL), as integer shape tensors pass through it in ONNX models.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import (
    ALL_DTYPES,
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    WIDE_UNSIGNED_DTYPES,
    Call,
    Kernel,
    TensorArg,
    array_module,
    as_array,
    like,
)
from openacl.ops.movement import (
    BF16,
    F16,
    F32,
    I8,
    I16,
    I32,
    I64,
    INDEX_DTYPES,
    U8,
    U16,
    U32,
    _check_index_range,
    _fill_value,
)
from openacl.ops.registry import register, register_inplace

# UINT8, INT8, INT16, INT32, INT64, BOOL, FLOAT16, FLOAT32, DOUBLE, COMPLEX64, COMPLEX128,
# BFLOAT16 (aclnnScatter, aclnnScatterReduce)
SCATTER_DTYPES = ALL_DTYPES - WIDE_UNSIGNED_DTYPES
SCATTER_ND_DTYPES = ALL_DTYPES
SCATTER_ND_UPDATE_DTYPES = F16 | BF16 | F32 | I64 | BOOL_DTYPES | I8  # (float8s: no numpy)
TF_SCATTER_ADD_DTYPES = F32 | F16 | BF16 | I32 | I8 | U8
# INT8, INT16, INT32, UINT8, UINT16, UINT32, FLOAT16, BFLOAT16, FLOAT (aclnnScatterList)
SCATTER_LIST_DTYPES = I8 | I16 | I32 | U8 | U16 | U32 | F16 | BF16 | F32
SCATTER_LIST_MASK_DTYPES = U8
SCATTER_LIST_UPDATE = "update"  # the one reduction aclnnScatterList takes
MAX_SCATTER_DIMS = 8

NONE, ADD, MUL, MAX, MIN, MEAN = range(6)  # CANN's reduce values
REDUCE_NAMES = {NONE: "none", ADD: "add", MUL: "mul", MAX: "max", MIN: "min", MEAN: "mean"}
SCATTER_REDUCES = frozenset({NONE, ADD, MUL})
SCATTER_REDUCE_REDUCES = frozenset(REDUCE_NAMES)
_UFUNCS = {ADD: np.add, MUL: np.multiply, MAX: np.maximum, MIN: np.minimum, MEAN: np.add}


# -- shared kernel helpers ----------------------------------------------------------------------
def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def _identity(dtype: np.dtype, reduce: int):
    """The value a reduction starts from when ``self`` is left out."""
    if reduce in (ADD, MEAN):
        return dtype.type(0)
    if reduce == MUL:
        return dtype.type(1)
    if dtype == np.bool_:
        return np.bool_(reduce == MIN)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.min if reduce == MAX else info.max)
    return dtype.type(-np.inf if reduce == MAX else np.inf)


def _in_rounds(xp, flat, targets, values, ufunc) -> None:
    """``flat[t] = ufunc(flat[t], v)`` for each (t, v) in order, for array modules without an
    unbuffered ``ufunc.at``: the pairs are grouped by how many earlier pairs hit the same
    position, and each group (distinct positions, so one fancy-indexed update) is applied in
    turn, which keeps every position's updates in their original order."""
    count = int(targets.size)
    if not count:
        return
    positions = xp.arange(count)
    order = xp.lexsort(xp.stack([positions, targets]))  # by target, then original position
    ordered = targets[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), ordered[1:] != ordered[:-1]])
    starts = xp.flatnonzero(first)
    occurrence = positions - starts[xp.cumsum(first) - 1]
    by_round = order[xp.argsort(occurrence)]
    bounds = [0, *xp.cumsum(xp.bincount(occurrence)).tolist()]
    for low, high in zip(bounds[:-1], bounds[1:], strict=True):
        chosen = by_round[low:high]
        where = targets[chosen]
        flat[where] = ufunc(flat[where], values[chosen])


def _reduce_into(flat, targets, values, reduce: int, include_self: bool) -> None:
    """Scatter ``values`` into the contiguous 1-d ``flat`` at ``targets`` with ``reduce``."""
    xp = array_module(flat)
    if reduce == NONE:
        flat[targets] = values
        return
    wide = promotion.compute_dtype(flat.dtype)
    if wide != flat.dtype and reduce in (ADD, MUL, MEAN):  # halves: float32, rounded once
        work = flat.astype(wide)
        _reduce_into(work, targets, values.astype(wide), reduce, include_self)
        flat[...] = work.astype(flat.dtype)
        return
    if not include_self:
        flat[targets] = _identity(flat.dtype, reduce)
    ufunc = _UFUNCS[reduce]
    if xp is np:
        ufunc.at(flat, targets, values)  # unbuffered: repeated targets apply in order
    else:
        _in_rounds(xp, flat, targets, values, ufunc)
    if reduce == MEAN:
        counts = xp.bincount(targets, minlength=flat.size)
        if include_self:
            counts = counts + 1
        hit = xp.flatnonzero(counts > (1 if include_self else 0))
        if flat.dtype.kind in "iu":
            flat[hit] = xp.floor_divide(flat[hit], counts[hit].astype(flat.dtype))
        else:
            flat[hit] = (flat[hit] / counts[hit]).astype(flat.dtype)


# -- Scatter and ScatterReduce --------------------------------------------------------------------
def _scatter_checks(c: Call, reduces: frozenset[int], reduce: int | None = None,
                    with_src: bool = True) -> tuple[TensorArg, TensorArg, int, int]:
    """Validate self/index/src/dim/reduce (and the output); returns (self, index, dim,
    reduce). ``reduce`` given: the operator has no such argument (ScatterAdd); without
    ``with_src`` a scalar ``value`` stands for src (ScatterValue)."""
    self = c.tensor("self")
    c.check_dtype("self", SCATTER_DTYPES)
    index = c.tensor("index")
    c.check_dtype("index", INDEX_DTYPES)
    src = c.tensor("src") if with_src else index
    if with_src and src.dtype != self.dtype:
        raise c.fail("src", f"dtype must equal self's ({self.dtype})")
    if not index.ndim == src.ndim == self.ndim:
        raise c.fail("index", f"self, index and src must have the same number of dims "
                              f"({self.ndim}, {index.ndim}, {src.ndim})")
    if self.ndim > MAX_SCATTER_DIMS:
        raise c.fail("self", f"must have at most {MAX_SCATTER_DIMS} dims")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    for k in range(index.ndim):
        if index.shape[k] > src.shape[k]:
            raise c.fail("index", f"size {index.shape[k]} of dim {k} exceeds src's "
                                  f"{src.shape[k]}")
        if k != dim and index.shape[k] > self.shape[k]:
            raise c.fail("index", f"size {index.shape[k]} of dim {k} exceeds self's "
                                  f"{self.shape[k]}")
    reduce = c["reduce"] if reduce is None else reduce
    if reduce not in reduces:
        listed = ", ".join(f"{r} ({REDUCE_NAMES[r]})" for r in sorted(reduces))
        raise c.fail("reduce", f"expected one of {listed}")
    if reduce != NONE and self.dtype in COMPLEX_DTYPES and reduce in (MAX, MIN):
        raise c.fail("self", f"complex values have no {REDUCE_NAMES[reduce]}")
    c.check_out("out", self.shape, self.dtype, exact_dtype=True)
    return self, index, dim, reduce


def _scatter_kernel(op: str, self: TensorArg, index: TensorArg, dim: int, reduce: int,
                    include_self: bool, value: np.ndarray | None = None) -> Kernel:
    """The kernel of Scatter/ScatterReduce (``src`` read from the views) and of
    ScatterValue (the scalar ``value`` everywhere)."""
    shape = self.shape if self.ndim else (1,)
    index_shape = index.shape if index.ndim else (1,)
    strides = _row_major_strides(shape)
    size = shape[dim]

    def kernel(v) -> None:
        out = v["out"]
        result = as_array(v["self"]).copy()  # C order: its flat view is a view
        if math.prod(index_shape):
            idx = as_array(v["index"]).reshape(index_shape)
            targets = _check_index_range(op, "index", idx, size) * strides[dim]
            for k, n in enumerate(index_shape):
                if k != dim:
                    along = np.arange(n, dtype=np.int64).reshape(
                        [n if j == k else 1 for j in range(len(index_shape))])
                    targets = targets + like(targets, along * strides[k])
            if value is None:
                source = as_array(v["src"])
                values = source.reshape(source.shape or (1,))[tuple(slice(0, n)
                                                                    for n in index_shape)]
            else:
                values = like(result, np.full(index_shape, value, self.dtype))
            _reduce_into(result.reshape(-1), targets.reshape(-1), values.reshape(-1), reduce,
                         include_self)
        np.copyto(out, result.reshape(out.shape))
    return kernel


@register("Scatter", "self: tensor, dim: int, index: tensor, src: tensor, reduce: int = 0, "
                     "out: tensor!")
def scatter(c: Call) -> Kernel:
    """``out = self`` with ``src``'s values written (``reduce`` 0), added (1) or multiplied
    (2) in at ``index`` along ``dim`` (``Tensor.scatter``)."""
    self, index, dim, reduce = _scatter_checks(c, SCATTER_REDUCES)
    return _scatter_kernel("Scatter", self, index, dim, reduce, include_self=True)


@register("ScatterReduce", "self: tensor, dim: int, index: tensor, src: tensor, reduce: int, "
                           "includeSelf: bool = True, out: tensor!")
def scatter_reduce(c: Call) -> Kernel:
    """``out = self`` with ``src`` reduced in at ``index`` along ``dim``: ``reduce`` 0 none,
    1 add, 2 mul, 3 max, 4 min, 5 mean; ``includeSelf`` false leaves ``self``'s values out of
    the positions that receive any (``Tensor.scatter_reduce``)."""
    self, index, dim, reduce = _scatter_checks(c, SCATTER_REDUCE_REDUCES)
    return _scatter_kernel("ScatterReduce", self, index, dim, reduce,
                           include_self=bool(c["includeSelf"]))


register_inplace("InplaceScatter", "selfRef: tensor!, dim: int, index: tensor, src: tensor, "
                                   "reduce: int = 0", scatter, self="selfRef", out="selfRef")
register_inplace("InplaceScatterReduce", "selfRef: tensor!, dim: int, index: tensor, "
                                         "src: tensor, reduce: int, includeSelf: bool = True",
                 scatter_reduce, self="selfRef", out="selfRef")


@register("ScatterAdd", "self: tensor, dim: int, index: tensor, src: tensor, out: tensor!")
def scatter_add(c: Call) -> Kernel:
    """``out = self`` with ``src`` added in at ``index`` along ``dim``
    (``Tensor.scatter_add``)."""
    self, index, dim, _ = _scatter_checks(c, SCATTER_REDUCES, reduce=ADD)
    return _scatter_kernel("ScatterAdd", self, index, dim, ADD, include_self=True)


@register("ScatterValue", "self: tensor, dim: int, index: tensor, value: scalar, "
                          "reduce: int = 0, out: tensor!")
def scatter_value(c: Call) -> Kernel:
    """``out = self`` with the scalar ``value`` written (``reduce`` 0), added (1) or
    multiplied (2) in at ``index`` along ``dim`` (``Tensor.scatter(dim, index, value)``)."""
    self, index, dim, reduce = _scatter_checks(c, SCATTER_REDUCES, with_src=False)
    value = _fill_value(c, "value", self.dtype)
    return _scatter_kernel("ScatterValue", self, index, dim, reduce, include_self=True,
                           value=value)


register_inplace("InplaceScatterValue", "selfRef: tensor!, dim: int, index: tensor, "
                                        "value: scalar, reduce: int = 0", scatter_value,
                 self="selfRef", out="selfRef")


# -- ScatterNd ----------------------------------------------------------------------------------
def _scatter_nd(c: Call, op: str, data_name: str, out_name: str, dtypes: frozenset[np.dtype],
                reduce: int, rows_form: bool = False) -> Kernel:
    """Validate and build ScatterNd-style ``out = data`` with ``updates`` written (``reduce``
    NONE) or added (ADD) at the rows ``indices[..., :]`` address. ``rows_form``: also take
    ``updates.shape = indices.shape + data.shape[1:]`` (indices into dim 0, TensorFlow's
    scatter_add)."""
    data = c.tensor(data_name)
    c.check_dtype(data_name, dtypes)
    indices = c.tensor("indices")
    c.check_dtype("indices", INDEX_DTYPES)
    updates = c.tensor("updates")
    if updates.dtype != data.dtype:
        raise c.fail("updates", f"dtype must equal {data_name}'s ({data.dtype})")
    if data.ndim < 1:
        raise c.fail(data_name, "must have at least 1 dim")
    rows_shape = (*indices.shape, *data.shape[1:])
    if rows_form and updates.shape == rows_shape:
        depth, count = 1, indices.numel
    else:
        if indices.ndim < 1 or indices.shape[-1] > data.ndim:
            raise c.fail("indices", f"must have at least 1 dim, its last dim at most "
                                    f"{data.ndim}")
        depth = indices.shape[-1]
        count = math.prod(indices.shape[:-1])
        expected = (*indices.shape[:-1], *data.shape[depth:])
        if updates.shape != expected:
            also = f" or {list(rows_shape)}" if rows_form else ""
            raise c.fail("updates", f"shape must be {list(expected)} (indices.shape[:-1] + "
                                    f"{data_name}.shape[{depth}:]){also}")
    c.check_out(out_name, data.shape, data.dtype, exact_dtype=True)
    lead_shape = data.shape[:depth]
    lead_strides = _row_major_strides(lead_shape)
    rows, width = math.prod(lead_shape), math.prod(data.shape[depth:])

    def kernel(v) -> None:
        result = as_array(v[data_name]).copy()  # C order: its row table is a view
        if count and width:
            idx = as_array(v["indices"]).reshape(count, depth)
            targets = like(idx, np.zeros(count, np.int64))
            for k in range(depth):
                column = _check_index_range(op, "indices", idx[:, k], lead_shape[k])
                targets = targets + column * lead_strides[k]
            source = as_array(v["updates"]).reshape(count, width)
            table = result.reshape(rows, width)
            if reduce == NONE:
                table[targets] = source
            else:  # TfScatterAdd: float sums in float64, rounded once (its cases cancel)
                columns = like(idx, np.arange(width, dtype=np.int64))
                flat = (targets[:, None] * width + columns[None, :]).reshape(-1)
                if promotion.is_floating(data.dtype):
                    result = result.astype(np.float64)
                    source = source.astype(np.float64)
                _reduce_into(result.reshape(-1), flat, source.reshape(-1), reduce, True)
        np.copyto(v[out_name], result, casting="unsafe")
    return kernel


@register("ScatterNd", "data: tensor, indices: tensor, updates: tensor, out: tensor!")
def scatter_nd(c: Call) -> Kernel:
    """``out = data`` with ``out[indices[i..., 0], ..., indices[i..., k-1]] = updates[i...]``
    (``k = indices.shape[-1]``; indices non-negative)."""
    return _scatter_nd(c, "ScatterNd", "data", "out", SCATTER_ND_DTYPES, NONE)


def _scatter_nd_update(c: Call) -> Kernel:
    """``varRef[indices[i..., :]] = updates[i...]`` in place (ScatterNd written into
    ``varRef``)."""
    return _scatter_nd(c, "ScatterNdUpdate", "varRef", "varRef", SCATTER_ND_UPDATE_DTYPES,
                       NONE)


def _tf_scatter_add(c: Call) -> Kernel:
    """``varRef[indices[i...]] += updates[i...]`` in place, TensorFlow's scatter_add (rows of
    dim 0) or scatter_nd_add (the last dim of ``indices`` addresses the leading dims);
    repeated positions add every update, in order."""
    return _scatter_nd(c, "TfScatterAdd", "varRef", "varRef", TF_SCATTER_ADD_DTYPES, ADD,
                       rows_form=True)


register_inplace("ScatterNdUpdate", "varRef: tensor!, indices: tensor, updates: tensor",
                 _scatter_nd_update, varRef="varRef")
register_inplace("TfScatterAdd", "varRef: tensor!, indices: tensor, updates: tensor",
                 _tf_scatter_add, varRef="varRef")


# -- ScatterList -------------------------------------------------------------------------------
def _scatter_list(c: Call) -> Kernel:
    """Write ``updates[b]`` into ``varRef[b]`` along ``axis`` for every batch ``b`` whose
    ``maskOptional[b]`` is 1 (all without a mask): from offset ``indice[b]`` (1-D indice:
    all of the update; 2-D: ``indice[b] = (offset, length)``, the first ``length`` slices
    of it). ``axis`` counts in ``updates``' dims (default -2) and may not be its batch dim."""
    var = c["varRef"]
    updates = c.tensor("updates")
    c.check_dtype("updates", SCATTER_LIST_DTYPES)
    batch = len(var)
    shape = var[0].shape
    for item in var:
        if item.shape != shape or item.dtype != updates.dtype:
            raise c.fail("varRef", f"every tensor must have shape {list(shape)} and updates' "
                                   f"dtype {updates.dtype}")
    if not shape or updates.ndim != len(shape) + 1 or updates.shape[0] != batch:
        raise c.fail("updates", f"shape must be [{batch}] + a varRef tensor's shape "
                                f"{list(shape)} (varRef tensors need at least 1 dim)")
    axis = c["axis"] + updates.ndim if c["axis"] < 0 else c["axis"]
    if not 0 < axis < updates.ndim:
        raise c.fail("axis", f"must be in (0, {updates.ndim}) after wrapping (not the batch "
                             f"dim)")
    for k, (n, m) in enumerate(zip(updates.shape[1:], shape, strict=True)):
        if (n > m) if k == axis - 1 else (n != m):
            raise c.fail("updates", f"dim {k + 1} ({n}) does not fit varRef's dim {k} ({m})")
    indice = c.tensor("indice")
    c.check_dtype("indice", INDEX_DTYPES)
    if indice.shape not in ((batch,), (batch, 2)):
        raise c.fail("indice", f"shape must be [{batch}] (offsets) or [{batch}, 2] (offset, "
                               f"length)")
    if c["maskOptional"] is not None:
        c.check_dtype("maskOptional", SCATTER_LIST_MASK_DTYPES)
        if c.tensor("maskOptional").shape != (batch,):
            raise c.fail("maskOptional", f"shape must be [{batch}]")
    if (c["reduceOptional"] or SCATTER_LIST_UPDATE) != SCATTER_LIST_UPDATE:
        raise c.fail("reduceOptional", f"only {SCATTER_LIST_UPDATE!r} is supported")
    c.check_out_list("varRef", [shape] * batch, updates.dtype)
    span, room = updates.shape[axis], shape[axis - 1]
    masked = c["maskOptional"] is not None

    def kernel(v) -> None:
        starts = as_array(v["indice"]).reshape(batch, -1)
        chosen = as_array(v["maskOptional"]) == 1 if masked else None
        source = v["updates"]
        for b in range(batch):
            if chosen is not None and not bool(chosen[b]):
                continue
            start = int(starts[b, 0])
            length = int(starts[b, 1]) if starts.shape[1] == 2 else span
            if start < 0 or length < 0 or length > span or start + length > room:
                raise IndexError(f"aclnnScatterList: argument 'indice' holds offset {start} "
                                 f"and length {length} for batch {b}; updates have {span} "
                                 f"along axis {axis} and varRef {room}")
            into = (slice(None),) * (axis - 1) + (slice(start, start + length),)
            v["varRef"][b][into] = source[b][(slice(None),) * (axis - 1) + (slice(0, length),)]
    return kernel


register_inplace("ScatterList", "varRef: tensors!, indice: tensor, updates: tensor, "
                                "maskOptional: tensor?, reduceOptional: str? = 'update', "
                                "axis: int = -2", _scatter_list, varRef="varRef")
