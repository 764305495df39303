"""Goldens of the movement family (CANN's conversion/ operators): casts and copies, cat,
stack and splits, views made concrete, gathers, pads and their Backward operators,
fills, masked fill / select, and the clamps with tensor bounds. Each is PyTorch in float64
(the driver widens the inputs and compares at our output's dtype); a backward golden is
torch.autograd's gradient of the forward pad."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from atk_driver import golden
from openacl import dtypes

PAD_MODES = {"Reflection": "reflect", "Replication": "replicate", "Circular": "circular"}


def _real(x: torch.Tensor) -> torch.Tensor:
    """A float64 copy of an integer or bool tensor (torch's pads take floats only)."""
    return x.double() if not (x.is_floating_point() or x.is_complex()) else x


def _rounded(fn):
    """``fn``'s float64 result rounded into the first input's dtype (``with_dtypes``): a
    scalar written into a tensor takes its dtype there, which an exact (md5) case sees."""
    def golden_in_dtype(kinds, *args):
        result = fn(*args).numpy()
        with np.errstate(all="ignore"):
            return result.astype(kinds[0]) if kinds[0] is not None else result
    golden_in_dtype.__doc__ = fn.__doc__
    return golden_in_dtype


def _as_int(value):
    """An attribute ATK sometimes writes as a one-element list (``[-2]``)."""
    return value[0] if isinstance(value, (list, tuple)) else value


# -- casts, copies, cat, stack, splits ----------------------------------------------------------
@golden("Cast", with_dtypes=True)
def cast(kinds, x, dtype):
    target = dtypes.to_numpy_dtype(dtypes.to_data_type(dtype, "dtype"))
    source = np.asarray(x.numpy() if hasattr(x, "numpy") else x)  # (a 0-dim complex: numpy)
    if kinds[0] is not None:
        source = source.astype(kinds[0])
    if source.dtype.kind == "c" and target.kind != "c" and target != np.bool_:
        source = source.real
    with np.errstate(all="ignore"):
        return np.array(source.astype(target))


@golden("InplaceCopy")
def inplace_copy(target, src):
    return src.expand(target.shape).to(target.dtype)


@golden("Cat")
def cat(tensors, dim):
    return torch.cat([t for t in tensors if t.shape != (0,)] or tensors, dim)


@golden("Stack")
def stack(tensors, dim):
    return torch.stack(tensors, dim)


@golden("Flip")
def flip(x, dims):
    return torch.flip(x, [_as_int(d) for d in (dims if isinstance(dims, (list, tuple))
                                                else [dims])])


@golden("SplitWithSize")
def split_with_size(x, sizes, dim):
    return tuple(torch.split(x, list(sizes), _as_int(dim)))


@golden("Flatten")
def flatten(x, axis):
    axis = axis % max(x.dim(), 1)
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


# -- views made concrete ------------------------------------------------------------------------
@golden("Slice")
def slice_(x, dim, start, end, step):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _strided(shape, begins, ends, steps, axes):
    index = [slice(None)] * len(shape)
    for axis, begin, end, step in zip(axes, begins, ends, steps, strict=True):
        index[axis] = slice(begin, end, step)
    return tuple(index)


@golden("SliceV2")
def slice_v2(x, starts, ends, axes, steps):
    return x[_strided(x.shape, starts, ends, steps, axes)]


@golden("StridedSliceAssignV2")
def strided_slice_assign_v2(var, value, begin, end, strides, axes=None):
    axes = list(range(len(begin))) if axes is None else axes
    result = var.clone()
    result[_strided(var.shape, begin, end, strides, axes)] = value
    return result


@golden("Permute")
def permute(x, dims):
    return x.permute(*dims) if dims else x


@golden("Expand")
def expand(x, size):
    return x.expand(*size)


golden("Tril")(torch.tril)
golden("Triu")(torch.triu)


@golden("ChannelShuffle")
def channel_shuffle(x, groups):
    return torch.nn.ChannelShuffle(groups)(x)


@golden("UnfoldGrad")
def unfold_grad(grad, sizes, dim, size, step):
    return torch.ops.aten.unfold_backward(grad, list(sizes), dim, size, step)


# -- gathers ---------------------------------------------------------------------------------
def _index_beyond(inputs) -> str | None:
    """ATK writes an index range as [0, n] meaning [0, n): the driver draws n too, which no
    gather takes (CANN's kernel would read past the dim)."""
    x, dim, index = inputs[:3]
    if x is None or index is None:
        return None  # a null tensor: CANN's error case, run as one
    size = x.shape[dim] if x.ndim else 1
    if index.size and (index.max() >= size or index.min() < -size):
        return f"a drawn index is out of range for a dim of size {size} (ATK's [0, n] is " \
               f"half-open; the driver draws n too)"
    return None


@golden("Gather", skip=_index_beyond)
def gather(x, dim, index):
    return torch.gather(x, dim, index) if x.dim() else x.reshape(index.shape)


@golden("IndexSelect")
def index_select(x, dim, index):
    return torch.index_select(x.reshape(-1) if x.dim() == 0 else x, dim, index.reshape(-1))


@golden("Embedding")
def embedding(weight, indices):
    return F.embedding(indices, weight)


@golden("GatherNd")
def gather_nd(x, indices, negative):
    depth = indices.shape[-1]
    columns = tuple(indices[..., k] for k in range(depth))
    return x[columns]


@golden("InplaceScatterUpdate")
def inplace_scatter_update(data, indices, updates, axis):
    result = data.clone()
    axis = _as_int(axis) % data.dim()
    span = updates.shape[axis]
    for row in range(updates.shape[0]):
        batch, offset = (indices[row].tolist() if indices.dim() == 2 else
                         (row, int(indices[row])))
        window = (batch,) + (slice(None),) * (axis - 1) + (slice(offset, offset + span),)
        result[window] = updates[row]
    return result


@golden("OneHot")
def one_hot(x, classes, on, off, axis):
    axis = x.dim() if axis == -1 else axis
    labels = x.unsqueeze(axis)
    positions = torch.arange(classes).reshape([-1 if k == axis else 1
                                               for k in range(x.dim() + 1)])
    return torch.where(labels == positions, on.reshape(-1)[0], off.reshape(-1)[0])


def _wrong_way(inputs) -> str | None:
    start, end, step = inputs
    if step == 0 or (end - start) * step < 0:
        return "start, end and step are drawn independently and go the wrong way " \
               "(aclnnArange refuses it, as documented)"
    return None


@golden("Arange", skip=_wrong_way)
def arange(start, end, step):
    return torch.arange(start, end, step, dtype=torch.float64)


# -- pads ------------------------------------------------------------------------------------
def constant_pad_nd(x, pad, value):
    return F.pad(_real(x), list(pad), mode="constant", value=value)


golden("ConstantPadNd", with_dtypes=True)(_rounded(constant_pad_nd))


def _pad_golden(mode: str):
    def pad(x, padding):
        return F.pad(_real(x), list(padding), mode=mode)
    return pad


def _pad_backward_golden(mode: str):
    def pad_backward(grad, x, padding):
        leaf = _real(x).detach().requires_grad_()
        F.pad(leaf, list(padding), mode=mode).backward(grad)
        return leaf.grad
    return pad_backward


for _name, _mode in PAD_MODES.items():
    for _kind in (1, 2, 3):
        if _name == "Circular" and _kind == 1:
            continue
        golden(f"{_name}Pad{_kind}d")(_pad_golden(_mode))
        golden(f"{_name}Pad{_kind}dBackward")(_pad_backward_golden(_mode))


# -- fills, masks, clamps -----------------------------------------------------------------------
@golden("InplaceZero")
def inplace_zero(x):
    return torch.zeros_like(x)


def inplace_fill_scalar(x, value):
    return torch.full_like(x, value)


golden("InplaceFillScalar", with_dtypes=True)(_rounded(inplace_fill_scalar))


@golden("InplaceFillTensor")
def inplace_fill_tensor(x, value):
    return torch.full_like(x, value.reshape(-1)[0].item())


def inplace_fill_diagonal(x, value, wrap):
    return x.clone().fill_diagonal_(value, wrap)


golden("InplaceFillDiagonal", with_dtypes=True)(_rounded(inplace_fill_diagonal))


@golden("DiagFlat")
def diag_flat(x, diagonal):
    return torch.diagflat(x, diagonal)


def inplace_masked_fill_scalar(x, mask, value):
    return x.masked_fill(mask.bool(), value)


golden("InplaceMaskedFillScalar", with_dtypes=True)(_rounded(inplace_masked_fill_scalar))


@golden("InplaceMaskedFillTensor")
def inplace_masked_fill_tensor(x, mask, value):
    return x.masked_fill(mask.bool(), value.reshape(()))


@golden("MaskedSelect")
def masked_select(x, mask):
    """The selection, then zeros up to the broadcast size (aclnn's out holds that many)."""
    picked = torch.masked_select(x, mask.bool())
    size = math.prod(torch.broadcast_shapes(x.shape, mask.shape))
    return torch.cat([picked, torch.zeros(size - picked.numel(), dtype=picked.dtype)])


def hardtanh(x, low, high):
    return torch.clamp(x, low, high)


golden("Hardtanh", with_dtypes=True)(_rounded(hardtanh))


golden("ClampMinTensor")(torch.clamp_min)
golden("ClampMaxTensor")(torch.clamp_max)
