"""Goldens of the index / scatter / selection family (CANN's index/ operators): advanced
indexing, index_add / index_fill, take and the gathers, the scatters, masked_scatter,
nonzero, unique, medians and kthvalue, the repeat_interleave family and the embeddings.

Each is PyTorch in float64 (the driver widens the inputs). Where PyTorch leaves a choice
open the golden fixes the one CANN's document or OpenACL states: unique values ascending
(``sorted`` false leaves CANN's order open), and the index of a median or k-th value among
equal values is the one a stable sort puts at that position (NaN last; a slice holding NaN
has the first NaN as its median; an all-NaN slice's nanmedian is at index 0)."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import torch

from atk_driver import _to_torch, golden

SCATTER_REDUCE = {1: "add", 2: "multiply"}  # aclnnScatter / ScatterValue reduce values
SCATTER_REDUCE_TORCH = {0: "sum", 1: "sum", 2: "prod", 3: "amax", 4: "amin", 5: "mean"}
GATHER_OUT_OF_RANGE_MODE = 2  # aclnnGatherV3's mode that gathers zeros out of range


def _t(value):
    """A tensor input as the driver widens it; a 0-d one the driver drew as a numpy scalar
    (its comparisons and clips return scalars) made a 0-d tensor."""
    if isinstance(value, np.generic):
        return _to_torch(np.asarray(value))
    return value


def _rounded(value: torch.Tensor, dtype) -> torch.Tensor:
    """The float64 golden rounded once into the output dtype ``dtype``: what an exact
    (``md5``) comparison needs, a half-precision sum of two values being a tie to round."""
    if dtype is None or np.dtype(dtype).kind in "iub" or not value.is_floating_point():
        return value
    return torch.from_numpy(value.numpy().astype(dtype).astype(np.float64))


def _out_of_range(index: torch.Tensor, size: int, negative: bool = False) -> str | None:
    """Why a case cannot run: its drawn index values leave [0, size) (or [-size, size))."""
    low = -size if negative else 0
    if index.numel() and (int(index.min()) < low or int(index.max()) >= size):
        return (f"the drawn indices reach [{int(index.min())}, {int(index.max())}] for a dim "
                f"of size {size}: out of range, which CANN documents as unsupported (the "
                f"driver draws an integer range closed)")
    return None


def _key(x: torch.Tensor, indices: list) -> tuple:
    """aclnnIndex's tensor list as a torch index: an empty tensor takes its dim whole."""
    return tuple(slice(None) if t.numel() == 0 and t.dim() <= 1 else
                 t if t.dtype == torch.bool else t.long() for t in indices)


# -- advanced indexing ------------------------------------------------------------------------
@golden("Index")
def index(x, indices):
    return x[_key(x, indices)]


def _index_put_skip(inputs) -> str | None:
    x, indices = inputs[0], inputs[1]
    dim = 0
    for t in indices:
        if t.dtype.kind != "b":
            reason = _out_of_range(torch.from_numpy(t.astype("int64")), x.shape[dim], True)
            if reason:
                return reason
        dim += max(t.ndim, 1) if t.dtype.kind == "b" else 1
    return None


@golden("IndexPutImpl", skip=_index_put_skip)
def index_put_impl(x, indices, values, accumulate, unsafe):
    return x.clone().index_put_(_key(x, indices), values, accumulate=bool(accumulate))


# -- along one dim ------------------------------------------------------------------------------
@golden("IndexAdd", with_dtypes=True)
def index_add(dtypes, x, dim, index, source, alpha):
    x = _t(x)
    return _rounded(torch.index_add(x, dim, index.long().reshape(-1), source, alpha=alpha),
                    dtypes[0])  # (a float16 sum beyond 65504 is inf, as CANN's is)


@golden("IndexAddV2", with_dtypes=True)
def index_add_v2(dtypes, x, dim, index, source, alpha, mode):
    return index_add(dtypes, x, dim, index, source, alpha)


def _fill(x, dim, positions, value):
    size = x.shape[dim] if x.dim() else 1
    kept = [p + size if p < 0 else p for p in positions]
    kept = torch.tensor([p for p in kept if 0 <= p < size], dtype=torch.long)  # others skipped
    return x.index_fill(dim, kept, value)


@golden("IndexFill")
def index_fill(x, dim, index, value):
    x = _t(x)
    return _fill(x, dim, index.reshape(-1).tolist(), value)


@golden("IndexFillTensor")
def index_fill_tensor(x, dim, index, value):
    x = _t(x)
    return _fill(x, dim, list(index), value)


# -- take and the gathers -------------------------------------------------------------------------
@golden("Take")
def take(x, index):
    x = _t(x)
    return torch.take(x, index.long())


def _gather(x, dim, index, batch, zeros_out_of_range=False):
    dim = dim % max(x.dim(), 1)
    size = x.shape[dim]
    index = index.long()
    bad = (index < 0) | (index >= size)
    picks = index.clamp(0, max(size - 1, 0)) if zeros_out_of_range else index
    lead = x.shape[:batch]
    rows = x.reshape(-1, *x.shape[batch:])
    chosen = picks.reshape(-1, *picks.shape[batch:])
    out = torch.stack([torch.index_select(rows[b], dim - batch, chosen[b].reshape(-1)).reshape(
        *x.shape[batch:dim], *picks.shape[batch:], *x.shape[dim + 1:])
        for b in range(rows.shape[0])])
    out = out.reshape(*lead, *x.shape[batch:dim], *index.shape[batch:], *x.shape[dim + 1:])
    if zeros_out_of_range:
        where = bad.reshape(*index.shape[:batch], *(1,) * (dim - batch), *index.shape[batch:],
                            *(1,) * (x.dim() - dim - 1))
        out = torch.where(where, torch.zeros((), dtype=x.dtype), out)
    return out


@golden("GatherV2")
def gather_v2(x, dim, index):
    return _gather(x, dim, index, 0)


@golden("GatherV3")
def gather_v3(x, dim, index, batch_dims, mode):
    return _gather(x, dim, index, batch_dims, mode == GATHER_OUT_OF_RANGE_MODE)


# -- scatters ------------------------------------------------------------------------------------
@golden("Scatter", with_dtypes=True)
def scatter(dtypes, x, dim, index, src, reduce):
    """Exact (md5) cases: a float32 sum is float32's, added in index order (what CANN and
    torch compute); halves sum in float32 and round once."""
    x = _t(x)
    if reduce and dtypes[0] == np.float32:
        x, src = x.float(), src.float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's reduce= of scatter is deprecated
        if reduce:
            out = x.scatter(dim, index.long(), src, reduce=SCATTER_REDUCE[reduce])
        else:
            out = x.scatter(dim, index.long(), src)
    return _rounded(out, dtypes[0])


@golden("ScatterReduce")
def scatter_reduce(x, dim, index, src, reduce, include_self):
    return x.scatter_reduce(dim, index.long(), src, SCATTER_REDUCE_TORCH[reduce],
                            include_self=bool(include_self))


@golden("ScatterAdd", with_dtypes=True)
def scatter_add(dtypes, x, dim, index, src):
    return _rounded(_t(x).scatter_add(dim, index.long(), src), dtypes[0])


@golden("ScatterValue")
def scatter_value(x, dim, index, value, reduce):
    x = _t(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if reduce:
            return x.scatter(dim, index.long(), value, reduce=SCATTER_REDUCE[reduce])
        return x.scatter(dim, index.long(), value)


def _nd_key(indices: torch.Tensor) -> tuple:
    return tuple(indices.long().unbind(-1))


def _nd_skip(inputs) -> str | None:
    var, indices = inputs[0], inputs[1]
    depth = indices.shape[-1] if indices.ndim else 1
    for k in range(min(depth, var.ndim)):
        reason = _out_of_range(torch.from_numpy(indices[..., k].astype("int64")), var.shape[k])
        if reason:
            return reason
    return None


@golden("ScatterNdUpdate", skip=_nd_skip)
def scatter_nd_update(var, indices, updates):
    """CANN updates "one by one": where indices repeat, the last update stays."""
    out = var.clone()
    depth = indices.shape[-1]
    rows = indices.long().reshape(-1, depth)
    values = updates.reshape(rows.shape[0], *var.shape[depth:])
    for i in range(rows.shape[0]):
        out[tuple(rows[i].tolist())] = values[i]
    return out


@golden("TfScatterAdd")
def tf_scatter_add(var, indices, updates):
    rows_form = tuple(updates.shape) == (*indices.shape, *var.shape[1:])
    key = (indices.long(),) if rows_form else _nd_key(indices)
    return var.clone().index_put_(key, updates, accumulate=True)


@golden("InplaceMaskedScatter")
def inplace_masked_scatter(x, mask, source):
    return x.masked_scatter(mask.bool(), source)


# -- nonzero and unique ---------------------------------------------------------------------------
@golden("Nonzero")
def nonzero(x):
    x = _t(x)
    return torch.nonzero(x)


@golden("NonzeroV2")
def nonzero_v2(x):
    x = _t(x)
    return torch.nonzero(x).T


@golden("Unique")
def unique(x, sorted_, return_inverse):
    x = _t(x)
    return torch.unique(x, sorted=True, return_inverse=True)


@golden("Unique2")
def unique2(x, sorted_, return_inverse, return_counts):
    x = _t(x)
    return torch.unique(x, sorted=True, return_inverse=True, return_counts=True)


@golden("UniqueDim")
def unique_dim(x, sorted_, return_inverse, dim):
    return torch.unique(x, dim=dim, return_inverse=True, return_counts=True)


# -- medians and kthvalue -----------------------------------------------------------------------
def _stable_pick(x, dim, rank, keepdim, k=0):
    """(value, index) per slice along ``dim`` (None: all of ``x``) under the stable-sort
    convention of the module docstring."""
    whole = dim is None
    rows = x.reshape(1, -1) if whole else x.movedim(dim, -1)
    values, order = torch.sort(rows, dim=-1, stable=True)  # NaN last
    length = rows.shape[-1]
    nans = torch.isnan(rows).sum(-1) if rows.is_floating_point() else torch.zeros(
        rows.shape[:-1], dtype=torch.long)
    if rank == "kth":
        position = torch.full_like(nans, k - 1)
    elif rank == "median":
        position = torch.where(nans > 0, length - nans, torch.full_like(nans, (length - 1) // 2))
    else:
        position = ((length - nans - 1) // 2).clamp(min=0)
    index = order.gather(-1, position.unsqueeze(-1)).squeeze(-1)
    value = values.gather(-1, position.unsqueeze(-1)).squeeze(-1)
    if rank == "nanmedian":
        index = torch.where(nans == length, torch.zeros_like(index), index)
    if whole:
        return value.reshape(()), index.reshape(())
    if keepdim:
        value, index = value.unsqueeze(dim), index.unsqueeze(dim)
    return value, index


@golden("Median")
def median(x):
    x = _t(x)
    return torch.median(x)


@golden("NanMedian")
def nan_median(x):
    x = _t(x)
    return torch.nanmedian(x)


@golden("MedianDim")
def median_dim(x, dim, keepdim):
    return _stable_pick(x, dim, "median", keepdim)


@golden("NanMedianDim")
def nan_median_dim(x, dim, keepdim):
    return _stable_pick(x, dim, "nanmedian", keepdim)


def _keepdim_skip(inputs) -> str | None:
    if not isinstance(inputs[3], bool):
        return (f"the ATK file gives keepdim as {inputs[3]!r}, not a bool (an abnormal-input "
                f"case)")
    return None


@golden("Kthvalue", skip=_keepdim_skip)
def kthvalue(x, k, dim, keepdim):
    return _stable_pick(x, dim, "kth", keepdim, k)


# -- repeat_interleave --------------------------------------------------------------------------
def _repeat_output_size(repeats_at: int, dim_at: int | None = None):
    """A prepare setting ``outputSize`` (the last input) as CANN's harnesses
    (executor_aclnnRepeatInterleave*.py, ``init_by_input_data``) do: the length of torch's
    repeat_interleave of the drawn input with the drawn repeats (along the drawn ``dim``;
    the flattened input without one); the file's value is a placeholder. Repeats that fit
    neither one value nor the repeated length keep the file's outputSize (the operator
    refuses them in phase 1)."""
    def prepare(inputs):
        x, repeats = inputs[0], inputs[repeats_at]
        counts = np.asarray(repeats).astype(np.int64).reshape(-1)
        if dim_at is None:
            length = int(np.asarray(x).size)
        else:
            dim = int(inputs[dim_at])
            if not -x.ndim <= dim < max(x.ndim, 1):
                return inputs
            length = int(x.shape[dim]) if x.ndim else 1
        if counts.size == 1:
            total = int(counts[0]) * length
        elif counts.size == length:
            total = int(counts.sum())
        else:
            return inputs
        return [*inputs[:-1], total]
    return prepare


def _repeat_tensor_output_size(inputs):
    """CANN's harness (executor_aclnnRepeatInterleaveTensor.py): ``outputSize`` is the
    length of torch's repeat_interleave of the drawn repeats, their sum."""
    repeats = inputs[0]
    if repeats is None:
        return inputs
    return [repeats, int(np.asarray(repeats).astype(np.int64).sum()), *inputs[2:]]


@golden("RepeatInterleave", prepare=_repeat_output_size(1))
def repeat_interleave(x, repeats, output_size):
    return torch.repeat_interleave(_t(x).reshape(-1), _t(repeats).long().reshape(-1))


@golden("RepeatInterleaveWithDim", prepare=_repeat_output_size(1, 2))
def repeat_interleave_with_dim(x, repeats, dim, output_size):
    return torch.repeat_interleave(x, _t(repeats).long().reshape(-1), dim)


@golden("RepeatInterleaveInt", prepare=_repeat_output_size(1))
def repeat_interleave_int(x, repeats, output_size):
    return torch.repeat_interleave(_t(x).reshape(-1), repeats)


@golden("RepeatInterleaveIntWithDim", prepare=_repeat_output_size(1, 2))
def repeat_interleave_int_with_dim(x, repeats, dim, output_size):
    return torch.repeat_interleave(x, repeats, dim)


@golden("RepeatInterleaveTensor", prepare=_repeat_tensor_output_size)
def repeat_interleave_tensor(repeats, output_size):
    return torch.repeat_interleave(repeats.long())


# -- embeddings -----------------------------------------------------------------------------------
EMBEDDING_BAG_SUM, EMBEDDING_BAG_MEAN = 0, 1


EMBEDDING_BAG_NO_PADDING = 20000  # CANN's harness: a negative paddingIdx becomes this
EMBEDDING_BAG_WIDENED = (np.int8, np.uint8, np.int16)  # indices dtypes it casts to int32


def _embedding_bag_inputs(inputs):
    """CANN's harness (executor_aclnnEmbeddingBag.py, ``init_by_input_data``): outside sum
    mode perSampleWeights is absent; includeLastOffset is false; a negative paddingIdx
    becomes 20000 (no row: the weights have fewer); int8 / uint8 / int16 indices become
    int32; offsets become the sorted distinct values of the drawn ones and 0 (so they
    start at 0 and rise), in the offsets' dtype."""
    (weight, indices, offsets, scale_grad, mode, sparse, per_sample, _last,
     padding_idx, *rest) = inputs
    if indices is None or offsets is None:
        return inputs
    if mode != EMBEDDING_BAG_SUM:
        per_sample = None
    if padding_idx < 0:
        padding_idx = EMBEDDING_BAG_NO_PADDING
    if indices.dtype in EMBEDDING_BAG_WIDENED:
        indices = indices.astype(np.int32)
    starts = np.unique(np.concatenate([np.asarray(offsets).astype(np.int64).reshape(-1), [0]]))
    return [weight, indices, starts.astype(offsets.dtype), scale_grad, mode, sparse,
            per_sample, False, padding_idx, *rest]


def _embedding_bag_skip(inputs) -> str | None:
    weight, indices = inputs[0], inputs[1]
    if weight is None or indices is None:
        return None
    return _out_of_range(torch.from_numpy(np.asarray(indices).astype(np.int64)),
                         weight.shape[0])


@golden("EmbeddingBag", skip=_embedding_bag_skip, prepare=_embedding_bag_inputs)
def embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample,
                  include_last_offset, padding_idx):
    rows = weight.shape[0]
    padding = padding_idx % rows if -rows <= padding_idx < rows else None
    output, offset2bag, bag_size, max_indices = torch.embedding_bag(
        weight, indices.long(), offsets.long(), False, mode, False, per_sample,
        include_last_offset, padding)
    maximum = mode not in (EMBEDDING_BAG_SUM, EMBEDDING_BAG_MEAN)
    # bagSize: torch leaves it zero in sum mode; maxIndices: meaningful in max mode only
    return (output, offset2bag, None if mode == EMBEDDING_BAG_SUM else bag_size,
            max_indices if maximum else None)


def _dense_backward_skip(inputs) -> str | None:
    if not isinstance(inputs[4], bool):
        return f"scaleGradByFreq is given as {inputs[4]!r}, not a bool (an abnormal case)"
    return _out_of_range(torch.from_numpy(np.asarray(inputs[1]).astype(np.int64)), inputs[2])


@golden("EmbeddingDenseBackward", skip=_dense_backward_skip)
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    padding = padding_idx if 0 <= padding_idx < num_weights else -1
    return torch.ops.aten.embedding_dense_backward(grad, indices.long(), num_weights, padding,
                                                   scale_grad_by_freq)


@golden("EmbeddingRenorm")
def embedding_renorm(x, indices, max_norm, norm_type):
    return torch.embedding_renorm_(x.clone(), indices.long(), max_norm, norm_type)


# -- max unpooling ------------------------------------------------------------------------------
def _unpool_skip(spatial: int, at: int):
    def skip(inputs) -> str | None:
        size = int(np.prod(inputs[at + 2 if at else 2]))
        return _out_of_range(torch.from_numpy(np.asarray(inputs[at + 1]).astype(np.int64)),
                             size)
    return skip


def _planes(x: torch.Tensor, spatial: int) -> torch.Tensor:
    return x.reshape(*x.shape[:-spatial], -1)


def _unpool_golden(x, indices, output_size, spatial):
    out = torch.zeros(*x.shape[:-spatial], int(np.prod(output_size)), dtype=x.dtype)
    out = out.scatter(-1, _planes(indices.long(), spatial), _planes(x, spatial))
    return out.reshape(*x.shape[:-spatial], *output_size)


def _unpool_identity(spatial: int):
    """A prepare as CANN's harnesses (executor_aclnnMaxUnpool2d.py / 3d.py,
    ``init_by_input_data``) derive the inputs: ``indices`` is ``torch.arange`` over one
    input plane (int64, as torch makes it) expanded over the batch and channels,
    ``outputSize`` the input's own spatial size (so every index is a valid, distinct
    position of its output plane), and for 3d ``stride`` and ``padding`` [1, 2, 3]. The
    file's indices (drawn from [0, "inf"]) and sizes are placeholders."""
    def prepare(inputs):
        x, indices, output_size, *rest = inputs
        if x is None or indices is None or x.ndim < spatial:
            return inputs
        plane = x.shape[-spatial:]
        made = np.broadcast_to(np.arange(int(np.prod(plane)), dtype=np.int64).reshape(plane),
                               x.shape).copy()
        if spatial == 3:
            rest = [[1, 2, 3], [1, 2, 3]]
        return [x, made, [int(d) for d in plane], *rest]
    return prepare


@golden("MaxUnpool2d", prepare=_unpool_identity(2))
def max_unpool2d(x, indices, output_size):
    return _unpool_golden(x, indices, output_size, 2)


@golden("MaxUnpool3d", prepare=_unpool_identity(3))
def max_unpool3d(x, indices, output_size, stride, padding):
    return _unpool_golden(x, indices, output_size, 3)


def _unpool_backward_golden(grad, x, indices, spatial):
    picked = _planes(grad, spatial).gather(-1, _planes(indices.long(), spatial))
    return picked.reshape(x.shape)


@golden("MaxUnpool2dBackward", skip=_unpool_skip(2, 1))
def max_unpool2d_backward(grad, x, indices, output_size):
    return _unpool_backward_golden(grad, x, indices, 2)


@golden("MaxUnpool3dBackward", skip=_unpool_skip(3, 1))
def max_unpool3d_backward(grad, x, indices, output_size, stride, padding):
    return _unpool_backward_golden(grad, x, indices, 3)


# -- jagged permutes ------------------------------------------------------------------------------
# CANN's harness (executor_aclnnExpandIntoJaggedPermute.py): the fixed inputs it writes for
# an outputOffset of 23 entries
JAGGED_FIXED_TABLES = 23
JAGGED_FIXED_PERMUTE = [0, 11, 1, 12, 2, 13, 3, 14, 4, 15, 5, 16, 6, 17, 7, 18, 8, 19, 9, 20,
                        10, 21]
JAGGED_FIXED_INPUT_OFFSETS = [0, 4860, 9720, 14580, 19440, 24300, 29160, 34020, 38880, 43740,
                              48600, 53460, 58899, 64338, 69777, 75216, 80655, 86094, 91533,
                              96972, 102411, 107850, 113289]
JAGGED_FIXED_OUTPUT_OFFSETS = [0, 4860, 10299, 15159, 20598, 25458, 30897, 35757, 41196, 46056,
                               51495, 56355, 61794, 66654, 72093, 76953, 82392, 87252, 92691,
                               97551, 102990, 107850, 113289]
JAGGED_FIXED_SIZE = 113289


def _jagged_tables(inputs) -> tuple[int, int] | None:
    """(outputSize n, outputOffset's length k) of a case, None where a tensor is absent."""
    if any(v is None for v in inputs[:3]):
        return None
    return int(inputs[3]), int(np.asarray(inputs[2]).shape[0])


def _jagged_skip(inputs) -> str | None:
    tables = _jagged_tables(inputs)
    if tables is not None and tables[1] != JAGGED_FIXED_TABLES and (
            tables[1] < 2 or tables[0] < tables[1] - 1):
        return (f"outputSize {tables[0]} cannot hold {tables[1] - 1} strictly increasing "
                f"segments: CANN's harness raises for it")
    return None


def _jagged_inputs(inputs):
    """CANN's harness (``init_by_input_data``): with ``n`` = outputSize and ``k`` =
    outputOffset's length, outputOffset becomes 0, ``k - 2`` distinct sorted points drawn
    from 1..n-1, and ``n`` (strictly increasing), and permute a random permutation of
    ``k - 1`` tables, both in their dtypes; inputOffset stays as drawn. (For ``k`` = 23 it
    writes fixed tensors instead.) The draws are seeded by the case's drawn values, as
    torch's are by the harness's fixed seed."""
    tables = _jagged_tables(inputs)
    if tables is None:
        return inputs
    permute, input_offsets, output_offsets, size = inputs[:4]
    n, k = tables
    if k == JAGGED_FIXED_TABLES:
        return [np.asarray(JAGGED_FIXED_PERMUTE).astype(permute.dtype),
                np.asarray(JAGGED_FIXED_INPUT_OFFSETS).astype(input_offsets.dtype),
                np.asarray(JAGGED_FIXED_OUTPUT_OFFSETS).astype(output_offsets.dtype),
                JAGGED_FIXED_SIZE, *inputs[4:]]
    seed = zlib.crc32(b"".join(np.ascontiguousarray(v).tobytes() for v in inputs[:3]))
    rng = np.random.default_rng(seed)
    points = np.sort(rng.permutation(n - 1)[:k - 2] + 1)
    bounds = np.concatenate([[0], points, [n]]).astype(output_offsets.dtype)
    order = rng.permutation(k - 1).astype(permute.dtype)
    return [order, input_offsets, bounds, size, *inputs[4:]]


@golden("ExpandIntoJaggedPermute", skip=_jagged_skip, prepare=_jagged_inputs)
def expand_into_jagged_permute(permute, input_offsets, output_offsets, output_size):
    pieces = [torch.arange(int(input_offsets[int(p)]),
                           int(input_offsets[int(p)]) + int(output_offsets[i + 1] -
                                                            output_offsets[i]))
              for i, p in enumerate(permute.tolist())]
    return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)


# -- top-k / top-p ------------------------------------------------------------------------------
@golden("ApplyTopKTopP")
def apply_top_k_top_p(logits, p, k):
    """CANN's formula (its document) in float64."""
    ordered, order = torch.sort(logits, dim=-1, stable=True)
    width = logits.shape[-1]
    if k is not None:
        k = k.long()
        active = (k > 0) & (k < width)
        threshold = ordered.gather(-1, (width - k).clamp(0, width - 1).unsqueeze(-1))
        ordered = ordered.masked_fill(active.unsqueeze(-1) & (ordered < threshold),
                                      float("-inf"))
    if p is not None:
        dropped = torch.softmax(ordered, -1).cumsum(-1) <= (1 - p.unsqueeze(-1))
        dropped[:, -1] = False
        ordered = ordered.masked_fill(dropped, float("-inf"))
    return torch.empty_like(ordered).scatter(-1, order, ordered)


# -- ScatterList ------------------------------------------------------------------------------
def _scatter_list_skip(inputs) -> str | None:
    var, indice, updates, mask = inputs[:4]
    if mask is not None and np.asarray(mask).dtype != np.uint8:
        return (f"the file's mask is {np.asarray(mask).dtype}; CANN's document takes UINT8 "
                f"only")
    if np.asarray(indice).ndim not in (1, 2):
        return (f"indice has {np.asarray(indice).ndim} dims; CANN's document takes 1 or 2 "
                f"(an abnormal case)")
    starts = np.asarray(indice).astype(np.int64).reshape(len(var), -1)
    axis = inputs[5] % np.asarray(updates).ndim
    room, span = np.asarray(var[0]).shape[axis - 1], np.asarray(updates).shape[axis]
    lengths = starts[:, 1] if starts.shape[1] == 2 else np.full(len(var), span)
    if np.any(starts[:, 0] < 0) or np.any(lengths < 0) or np.any(lengths > span) or np.any(
            starts[:, 0] + lengths > room):
        return "the drawn offsets / lengths leave varRef (CANN: out of range unsupported)"
    return None


@golden("ScatterList", skip=_scatter_list_skip)
def scatter_list(var, indice, updates, mask, reduce, axis):
    axis = axis % updates.dim()
    rows = indice.long().reshape(len(var), -1)
    out = [t.clone() for t in var]
    for b, target in enumerate(out):
        if mask is not None and int(mask[b]) != 1:
            continue
        start = int(rows[b, 0])
        length = int(rows[b, 1]) if rows.shape[1] == 2 else updates.shape[axis]
        target.narrow(axis - 1, start, length).copy_(updates[b].narrow(axis - 1, 0, length))
    return tuple(out)


# -- TopKTopPSampleV2 -----------------------------------------------------------------------------
def _sample_row(row, k, p, min_p, q_row, eps, ks_max, input_is_logits):
    """One row through CANN's stages, as its ATK executor runs them: (kept probabilities,
    their positions in the row, the sampled position)."""
    width = row.numel()
    use_k = 1 <= k <= min(ks_max, width)
    use_p = p < 1
    values, positions = torch.sort(row, descending=True, stable=True)
    if use_k:
        values, positions = values[:k], positions[:k]
    if input_is_logits:
        values = torch.softmax(values, -1)
    if use_p:
        keep = torch.zeros(values.numel(), dtype=torch.bool)
        if p > 0:
            keep = (values.cumsum(-1) - values) < p
        else:
            keep[0] = True
        values, positions = values[keep].clone(), positions[keep]
        if p <= 0 and input_is_logits:
            values[0] = 1.0
    if not use_k and not use_p and min_p < 1:  # nothing sorted it
        positions = torch.arange(width)
        values = torch.softmax(row, -1) if input_is_logits else row
    if 0 < min_p < 1:
        keep = values >= values.max() * min_p
    else:
        keep = torch.ones(values.numel(), dtype=torch.bool)
        if min_p >= 1:
            keep[1:] = False
    values, positions = values[keep], positions[keep]
    scores = values if q_row is None else values / (q_row[:values.numel()].abs() + eps)
    return values, positions, positions[scores.argmax()]


@golden("TopKTopPSampleV2")
def top_k_top_p_sample_v2(logits, top_k, top_p, q, min_ps, eps, is_need_logits, top_k_guess,
                          ks_max, input_is_logits, is_need_sample_result):
    """Row by row in the inputs' precision (float64 here); the outputs a mode leaves alone
    are not checked (None)."""
    rows, width = logits.shape
    ks_cap = min(-(-ks_max // 8) * 8, 1024)
    selected = torch.zeros(rows, dtype=torch.long)
    survivors = torch.full((rows, width), float("-inf") if input_is_logits else 0.0,
                           dtype=logits.dtype)
    positions_out = torch.zeros((rows, width), dtype=torch.long)
    values_out = torch.zeros((rows, width), dtype=logits.dtype)
    for b in range(rows):
        min_p = float(min_ps.reshape(-1)[b]) if min_ps is not None else -1.0
        q_row = None if q is None or is_need_sample_result else q[b]
        values, positions, choice = _sample_row(logits[b], int(top_k[b]), float(top_p[b]),
                                                min_p, q_row, eps, ks_cap, input_is_logits)
        selected[b] = choice
        survivors[b, positions] = logits[b, positions]
        values_out[b, :values.numel()] = values
        positions_out[b, :positions.numel()] = positions
    return (None if is_need_sample_result else selected,
            survivors if is_need_logits else None,
            positions_out if is_need_sample_result else None,
            values_out if is_need_sample_result else None)
