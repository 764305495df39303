"""More op types whose aclnn operator already exists: pads, splits, reverse, triangles,
gathers, top-k and sort (elements moved or selected), and Addcmul/Addcdiv, Swish, PRelu,
AdaptiveAvgPool2d, ResizeNearestNeighborV2, RmsNorm, GroupNorm, InstanceNorm, ReduceProd.

Each is declared with ``types._define`` as CANN's IR has it (``REG_OP`` in the
``*_proto.h`` files of hicann/ops-math and hicann/ops-nn; the file named in each lowering's
docstring) and lowered onto aclnn calls. ``openacl.aclop.types`` imports this module last, so
its table holds these too.

Also TopK and Range. aclnnTopk and aclnnSort write int64 indices: for the int32 indices
CANN's IR defaults to, they are written to a scratch buffer and cast into the output. A
ReduceProd over several axes that are not adjacent permutes them into a scratch copy first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.aclop.lowering import _Lowering
from openacl.aclop.types import (
    _KEEP,
    _attr,
    _channels_last,
    _copy_of,
    _define,
    _nchw_input,
    _nchw_output,
    _nhwc_inferred,
)
from openacl.dtypes import DataType
from openacl.tensor import contiguous_strides

PAD_MODES = {"reflect": "ReflectionPad", "edge": "ReplicationPad"}  # PadV3 mode -> aclnn
PAD_MODE_CONSTANT = "constant"
MAX_PADDED_TRAILING_DIMS = 3  # ReflectionPad / ReplicationPad take 1-d, 2-d or 3-d pads
INDEX_TYPES = {int(DataType.ACL_INT32): DataType.ACL_INT32,
               int(DataType.ACL_INT64): DataType.ACL_INT64}  # what top-k / sort indices are


# -- pads (conversion/pad, conversion/pad_v3) ---------------------------------------------
def _pairs(b: _Lowering, contiguous: bool = True) -> list[tuple[int, int]]:
    """The (before, after) pad of every dim of x from the ``paddings`` value input: [[b0,
    a0], [b1, a1], ...] (contiguous) or [b0, b1, ..., a0, a1, ...]."""
    values = list(b.values["paddings"])
    rank = len(b.shape("x"))
    if len(values) != 2 * rank:
        raise b.fail_input("paddings", f"holds {len(values)} values; x has {rank} dims, so "
                                       f"it needs {2 * rank} (a before and an after per dim)")
    if contiguous:
        return [(values[2 * d], values[2 * d + 1]) for d in range(rank)]
    return [(values[d], values[rank + d]) for d in range(rank)]


def _padded_shape(b: _Lowering, pairs: list[tuple[int, int]]) -> tuple[int, ...]:
    shape = tuple(d + before + after for d, (before, after) in zip(b.shape("x"), pairs,
                                                                   strict=True))
    if min(shape, default=1) < 0:
        raise b.fail_input("paddings", f"{pairs} cut x {list(b.shape('x'))} below zero")
    return shape


def _torch_pad(pairs: list[tuple[int, int]], dims: int) -> list[int]:
    """aclnn's pad list: the last ``dims`` dims, last first, (before, after) each."""
    return [v for before, after in reversed(pairs[len(pairs) - dims:]) for v in (before, after)]


def _pad_constant(b: _Lowering, pairs: list[tuple[int, int]], fill: str | None) -> None:
    """y = x padded with zeros, or with the one value of input ``fill``: y is filled with it
    (aclnnExpand of the value), then x is copied into y's interior (a strided view)."""
    shape = _padded_shape(b, pairs)
    if b.infer:
        b.inferred["y"] = (shape, b.operand("x").data_type)
        return
    if fill is None:
        b.call("ConstantPadNd", {"pad": "paddings"}, self=b.x("x"),
               pad=_torch_pad(pairs, len(pairs)), value=b.scalar(0, DataType.ACL_INT64),
               out=b.y("y"))
        return
    if math.prod(b.shape(fill)) != 1:
        raise b.fail_input(fill, f"must hold one value, not {list(b.shape(fill))}")
    if min(before for before, _ in pairs) < 0 or min(after for _, after in pairs) < 0:
        raise b.fail_input("paddings", "negative pads (crops) are supported without "
                                       "constant_values only")
    rank = len(shape)
    b.call("Expand", self=b.view(fill, [1] * rank, [0] * rank), size=list(shape),
           out=b.y("y"))
    strides = contiguous_strides(shape)
    offset = sum(before * stride for (before, _), stride in zip(pairs, strides, strict=True))
    b.call("InplaceCopy", selfRef=b.view_output("y", b.shape("x"), strides, offset),
           src=b.x("x"))


def _pad(b: _Lowering) -> None:
    """Pad (conversion/pad/op_graph/pad_proto.h): zeros around x, paddings [rank, 2]."""
    _pad_constant(b, _pairs(b), None)


def _pad_v3(b: _Lowering) -> None:
    """PadV3 (conversion/pad_v3/op_graph/pad_v3_proto.h): mode constant (constant_values,
    default 0), reflect or edge; the latter two pad at most the last three dims, as the
    aclnn Reflection/ReplicationPad operators do."""
    pairs = _pairs(b, bool(b.attr("paddings_contiguous")))
    mode = b.attr("mode")
    if mode == PAD_MODE_CONSTANT:
        _pad_constant(b, pairs, "constant_values" if b.has("constant_values") else None)
        return
    if mode not in PAD_MODES:
        raise b.fail_attr("mode", f"expected one of {[PAD_MODE_CONSTANT, *PAD_MODES]}")
    padded = [d for d, pair in enumerate(pairs) if pair != (0, 0)]
    dims = min(MAX_PADDED_TRAILING_DIMS, len(pairs))
    if padded and padded[0] < len(pairs) - dims:
        raise b.fail_input("paddings", f"mode {mode!r} pads only the last {dims} dims; "
                                       f"dim {padded[0]} is padded")
    dims = max(1, len(pairs) - padded[0]) if padded else 1
    if len(pairs) <= dims:  # the aclnn pads need a leading (batch or channel) dim
        dims = len(pairs) - 1
    if dims < 1:
        raise b.fail_input("x", f"mode {mode!r} needs x of 2 dims or more")
    b.call(f"{PAD_MODES[mode]}{dims}d", {"padding": "paddings"}, self=b.x("x"),
           padding=_torch_pad(pairs, dims), out=b.y("y"))


# -- moving and selecting elements ----------------------------------------------------------
def _reverse_v2(b: _Lowering) -> None:
    """ReverseV2 (index/reverse_v2): x reversed along the dims of the axis input."""
    rank = len(b.shape("x"))
    axes = [b.axis("axis", a, rank, input_name=True) for a in b.values["axis"]]
    if len(set(axes)) != len(axes):
        raise b.fail_input("axis", f"names a dim twice: {list(b.values['axis'])}")
    if not axes:
        _copy_of(b, b.x("x"))
        return
    b.call("Flip", {"dims": "axis"}, self=b.x("x"), dims=axes, out=b.y("y"))


def _triangle(aclnn: str) -> Callable[[_Lowering], None]:
    """Tril / Triu (conversion/tril, conversion/triu): the diagonal attribute as aclnn's."""
    def lower(b: _Lowering) -> None:
        b.call(aclnn, self=b.x("x"), diagonal=b.attr("diagonal"), out=b.y("y"))
    return lower


def _gather_elements(b: _Lowering) -> None:
    """GatherElements (index/gather_elements): y[i][j] = x[index[i][j]][j] along dim."""
    b.call("Gather", self=b.x("x"), dim=b.attr("dim"), index=b.x("index"), out=b.y("y"))


def _gather_nd(b: _Lowering) -> None:
    """GatherNd (index/gather_nd): slices of x at the index tuples of indices' last dim."""
    b.call("GatherNd", {"negativeIndexSupport": "negative_index_support"}, self=b.x("x"),
           indices=b.x("indices"), negativeIndexSupport=b.attr("negative_index_support"),
           out=b.y("y"))


def _indices_type(b: _Lowering, name: str, dtype_attr: str | None) -> DataType:
    """The dtype of indices output ``name``: DT_INT32 or DT_INT64, as the attribute
    ``dtype_attr`` says (TopK, which has none, writes int32); a desc of the other one is
    taken when the attribute was left at its default."""
    if dtype_attr is None:
        wanted, explicit = DataType.ACL_INT32, True
    else:
        wanted = INDEX_TYPES.get(int(b.attr(dtype_attr)))
        if wanted is None:
            raise b.fail_attr(dtype_attr, "indices are DT_INT32 (3) or DT_INT64 (9)")
        explicit = dtype_attr in b.explicit
    if b.infer:
        return wanted
    given = b.outputs[name].data_type
    if given not in INDEX_TYPES.values() or (explicit and given != wanted):
        expected = wanted.name if explicit else "DT_INT32 or DT_INT64"
        raise b.fail_output(name, f"is {given.name}; the indices are {expected}")
    return given


def _with_indices(b: _Lowering, name: str, dtype_attr: str | None,
                  call: Callable[[Any], None]) -> None:
    """Run ``call(indices_tensor)``, an aclnn call writing int64 indices, for output
    ``name``: straight into it when it is int64, else into a scratch buffer cast into it."""
    data_type = _indices_type(b, name, dtype_attr)
    b.infer_dtypes[name] = data_type
    if b.infer or data_type == DataType.ACL_INT64:
        call(b.y(name))
        return
    wide = b.tensor(b.scratch(b.outputs[name].dims, DataType.ACL_INT64))
    call(wide)
    b.call("Cast", {"self": name}, self=wide, dtype=data_type, out=b.y(name))


def _top_k(dtype_attr: str | None) -> Callable[[_Lowering], None]:
    """TopK (math/topk) and TopKV2 (math/top_k_v2): the k largest (or smallest) along dim,
    sorted or not, with their indices."""
    def lower(b: _Lowering) -> None:
        k = b.values["k"]
        if len(k) != 1:
            raise b.fail_input("k", f"must hold one value, not {list(k)}")
        names = {"dim": "dim", "largest": "largest", "sorted": "sorted"}
        _with_indices(b, "indices", dtype_attr, lambda indices: b.call(
            "Topk", names, self=b.x("x"), k=k[0], dim=b.attr("dim"),
            largest=bool(b.attr("largest")), sorted=bool(b.attr("sorted")),
            valuesOut=b.y("values"), indicesOut=indices))
    return lower


def _sort(b: _Lowering) -> None:
    """Sort (math/sort): values y1 and their indices y2 along axis."""
    names = {"dim": "axis", "descending": "descending", "stable": "stable"}
    _with_indices(b, "y2", "y2_dtype", lambda indices: b.call(
        "Sort", names, self=b.x("x"), stable=bool(b.attr("stable")), dim=b.attr("axis"),
        descending=bool(b.attr("descending")), valuesOut=b.y("y1"), indicesOut=indices))


def _split_sizes(b: _Lowering, dim: int, sizes: list[int] | None) -> list[int]:
    """The sizes of the ``num_split`` pieces along ``dim``: equal ones (``sizes`` None), or
    ``size_splits`` where one entry may be -1 (the rest of the dim)."""
    count, length = b.attr("num_split"), b.shape("x")[dim]
    if count < 1:
        raise b.fail_attr("num_split", "must be at least 1")
    if sizes is None:
        if length % count:
            raise b.fail_attr("num_split", f"must divide dim {dim} of x ({length})")
        return [length // count] * count
    if len(sizes) != count:
        raise b.fail_input("size_splits", f"holds {len(sizes)} sizes; num_split is {count}")
    if sizes.count(-1) > 1 or min(sizes, default=0) < -1:
        raise b.fail_input("size_splits", f"{sizes}: sizes are >= 0, one may be -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = length - (sum(sizes) + 1)
    if sum(sizes) != length or min(sizes, default=0) < 0:
        raise b.fail_input("size_splits", f"{sizes} do not add up to dim {dim} of x "
                                          f"({length})")
    return sizes


def _split(dim_from: str, sizes_from: str | None) -> Callable[[_Lowering], None]:
    """SplitD / Split / SplitV (conversion/split_d, split, split_v) and SplitVD (not in these
    repositories' IR: the attributes of CANN's split_v_d kernel): x cut along
    split_dim (an attribute, or a value input) into num_split outputs y0, y1..., equal or
    by size_splits; aclnnSplitWithSize."""
    def lower(b: _Lowering) -> None:
        rank = len(b.shape("x"))
        if dim_from == "attr":
            dim = b.axis("split_dim", b.attr("split_dim"), rank)
        else:
            values = b.values["split_dim"]
            if len(values) != 1:
                raise b.fail_input("split_dim", f"must hold one value, not {list(values)}")
            dim = b.axis("split_dim", values[0], rank, input_name=True)
        sizes = None
        if sizes_from == "input":
            sizes = list(b.values["size_splits"])
        elif sizes_from == "attr":
            sizes = list(b.attr("size_splits"))
        sizes = _split_sizes(b, dim, sizes)
        b.call("SplitWithSize", {"dim": "split_dim", "splitSize": "size_splits"},
               self=b.x("x"), splitSize=sizes, dim=dim, out=b.ys("y", len(sizes)))
    return lower


# -- arithmetic, activations, pooling, resize, norms --------------------------------------------
def _add_product(divide: bool) -> Callable[[_Lowering], None]:
    """Addcmul / Addcdiv (math/addcmul, math/addcdiv): y = input_data + value * (x1 op x2),
    value a tensor (CANN's IR; aclnn's takes a scalar): three broadcasting aclnn steps
    into y."""
    def lower(b: _Lowering) -> None:
        names = ("input_data", "x1", "x2", "value")
        try:
            shape = np.broadcast_shapes(*(tuple(b.shape(n)) for n in names))
        except ValueError:
            raise b.fail_input("x2", "the inputs " + ", ".join(
                f"{n} {list(b.shape(n))}" for n in names) + " do not broadcast") from None
        if b.infer:
            b.inferred["y"] = (tuple(shape), b.operand("input_data").data_type)
            return
        y = b.y("y")
        b.call("Div" if divide else "Mul", self=b.x("x1"), other=b.x("x2"), out=y)
        b.call("Mul", self=y, other=b.x("value"), out=y)
        b.call("Add", self=b.x("input_data"), other=y, alpha=b.scalar(1, DataType.ACL_INT64),
               out=y)
    return lower


def _swish(b: _Lowering) -> None:
    """Swish (activation/swish): x * sigmoid(scale * x)."""
    b.call("Swish", {"betaOptional": "scale"}, self=b.x("x"),
           betaOptional=b.scalar(float(b.attr("scale"))), out=b.y("y"))


def _prelu(b: _Lowering) -> None:
    """PRelu (activation/p_relu)."""
    b.call("Prelu", self=b.x("x"), weight=b.x("weight"), out=b.y("y"))


def _adaptive_avg_pool2d(b: _Lowering) -> None:
    """AdaptiveAvgPool2d (pooling/adaptive_avg_pool2d): output_size as (H, W)."""
    b.call("AdaptiveAvgPool2d", {"outputSize": "output_size"}, self=b.x("x"),
           outputSize=list(b.attr("output_size")), out=b.y("y"))


def _resize_nearest(b: _Lowering) -> None:
    """ResizeNearestNeighborV2 (op_nn_proto_extend.h): TensorFlow's legacy nearest mapping
    (align_corners and half_pixel_centers false: source = floor(destination * in / out)),
    which is aclnnUpsampleNearest2d's; x's desc format says NCHW or NHWC (ND: NHWC)."""
    last = _channels_last(b, attr=None)
    size = list(b.values["size"])
    if len(size) != 2 or min(size) <= 0:
        raise b.fail_input("size", f"must hold two positive values (height, width), not "
                                   f"{size}")
    for name in ("align_corners", "half_pixel_centers"):
        if b.attr(name):
            raise b.fail_attr(name, "only the legacy mapping (align_corners and "
                                    "half_pixel_centers false) is computed here")
    b.only_default("scales")
    b.call("UpsampleNearest2d", {"outputSize": "size"}, self=_nchw_input(b, "x", last),
           outputSize=size, out=_nchw_output(b, "y", last))
    _nhwc_inferred(b, "y", last)


def _rms_norm(b: _Lowering) -> None:
    """RmsNorm (norm/rms_norm): y and rstd over gamma's trailing dims."""
    b.call("RmsNorm", x=b.x("x"), gamma=b.x("gamma"), epsilon=float(b.attr("epsilon")),
           yOut=b.y("y"), rstdOut=b.y("rstd"))


def _group_norm(b: _Lowering) -> None:
    """GroupNorm (experimental/norm/group_norm): x [N, C, *], num_groups groups; outputs y,
    mean and rstd per (N, group)."""
    shape = b.shape("x")
    if len(shape) < 2:
        raise b.fail_input("x", f"has {len(shape)} dims {list(shape)}; GroupNorm takes "
                                f"[N, C, ...]")
    groups = b.attr("num_groups")
    if groups <= 0 or shape[1] % groups:
        raise b.fail_attr("num_groups", f"must divide C = {shape[1]}")
    b.call("GroupNorm", {"group": "num_groups", "eps": "eps"}, self=b.x("x"),
           gamma=b.x("gamma") if b.has("gamma") else None,
           beta=b.x("beta") if b.has("beta") else None, N=shape[0], C=shape[1],
           HxW=math.prod(shape[2:]), group=groups, eps=float(b.attr("eps")),
           out=b.y("y"), meanOut=b.y("mean"), rstdOut=b.y("rstd"))


def _instance_norm(b: _Lowering) -> None:
    """InstanceNorm (norm/instance_norm): y, mean and variance per (N, C)."""
    b.call("InstanceNorm", {"dataFormat": "data_format", "eps": "epsilon"}, x=b.x("x"),
           gamma=b.x("gamma"), beta=b.x("beta"), dataFormat=b.attr("data_format"),
           eps=float(b.attr("epsilon")), y=b.y("y"), mean=b.y("mean"),
           variance=b.y("variance"))


def _reduce_prod(b: _Lowering) -> None:
    """ReduceProd (math/reduce_prod): the product over the axes, one rounding whatever their
    number: one axis or every axis is one aclnnProdDim / aclnnProd; adjacent axes are one
    axis of a view of x; others are permuted last into a scratch copy first. Empty axes
    with noop_with_empty_axes copy x."""
    shape = b.shape("x")
    rank = len(shape)
    axes = sorted({b.axis("axes", a, rank, input_name=True) for a in b.values["axes"]})
    keep = bool(b.attr("keep_dims"))
    if not axes and b.attr("noop_with_empty_axes"):
        _copy_of(b, b.x("x"))
        return
    if not axes or (len(axes) == rank and not keep):
        b.call("Prod", self=b.x("x"), dtype=None, out=b.y("y"))
        return
    if len(axes) == 1:
        b.call("ProdDim", {"dim": "axes", "keepDim": "keep_dims"}, self=b.x("x"),
               dim=axes[0], keepDim=keep, dtype=None, out=b.y("y"))
        return
    kept = [d for i, d in enumerate(shape) if i not in axes]
    reduced = math.prod(shape[i] for i in axes)
    if b.infer:
        b.inferred["y"] = (tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep
                           else tuple(kept), b.operand("x").data_type)
        return
    if axes == list(range(axes[0], axes[-1] + 1)):  # adjacent: one axis of a view of x
        merged = [*shape[:axes[0]], reduced, *shape[axes[-1] + 1:]]
        source, dim = b.view("x", merged, contiguous_strides(merged)), axes[0]
    else:  # the reduced axes permuted last, into a scratch copy
        order = [i for i in range(rank) if i not in axes] + axes
        copy = b.scratch([shape[i] for i in order], b.operand("x").data_type)
        b.call("Permute", {"dims": "axes"}, self=b.x("x"), dims=order,
               out=b.tensor(copy))
        source, dim = b.tensor(copy, [*kept, reduced]), len(kept)
    b.call("ProdDim", {"dim": "axes"}, self=source, dim=dim, keepDim=False, dtype=None,
           out=b.view_output("y", kept, contiguous_strides(kept)))


def _range_length(b: _Lowering, start: float, limit: float, delta: float,
                  out_type: DataType) -> int:
    """The length of Range's sequence, as CANN's shape inference (range_infershape.cpp)
    computes it: in int64 for integer outputs, else in floating point; closed adds limit."""
    if delta == 0:
        raise b.fail_input("delta", "is zero")
    if (limit > start and delta < 0) or (limit < start and delta > 0):
        raise b.fail_input("delta", f"= {delta} steps away from limit {limit} (start "
                                    f"{start})")
    span = limit - start
    if out_type in (DataType.ACL_INT32, DataType.ACL_INT64):
        span, delta = int(span), int(delta)
        if b.attr("is_closed"):
            return abs(span) // abs(delta) + 1
        return -(-abs(span) // abs(delta))  # ceil
    if b.attr("is_closed"):
        return int(span / delta + 1)
    return math.ceil(span / delta)


def _range_type(b: _Lowering) -> DataType:
    """Range's output dtype as CANN infers it: the inputs' when all three agree, else
    float32."""
    found = {b.operand(name).data_type for name in ("start", "limit", "delta")}
    return found.pop() if len(found) == 1 else DataType.ACL_FLOAT


def _range_rule(b: _Lowering) -> dict[str, tuple[tuple[int, ...], DataType]]:
    out_type = b.outputs["y"].data_type if b.outputs else _range_type(b)
    values = []
    for name in ("start", "limit", "delta"):
        found = b.values[name]
        if len(found) != 1:
            raise b.fail_input(name, f"must hold one value, not {list(found)}")
        values.append(found[0])
    return {"y": ((_range_length(b, *values, out_type),), out_type)}


def _range(b: _Lowering) -> None:
    """Range (math/range): start, start + delta, ... up to limit (included when is_closed):
    aclnnArange, or aclnnRange for the closed form."""
    start, limit, delta = (b.values[name][0] for name in ("start", "limit", "delta"))
    data_type = b.outputs["y"].data_type
    scalar_type = DataType.ACL_DOUBLE if data_type in (
        DataType.ACL_FLOAT16, DataType.ACL_BF16, DataType.ACL_FLOAT, DataType.ACL_DOUBLE) \
        else DataType.ACL_INT64
    b.call("Range" if b.attr("is_closed") else "Arange",
           {"start": "start", "end": "limit", "step": "delta"},
           start=b.scalar(start, scalar_type), end=b.scalar(limit, scalar_type),
           step=b.scalar(delta, scalar_type), out=b.y("y"))


_define("Pad", "x paddings", "y", _pad, values="paddings")
_define("PadV3", "x paddings constant_values?", "y", _pad_v3,
        (_attr("mode", "str", PAD_MODE_CONSTANT), _attr("paddings_contiguous", "bool", True)),
        values="paddings")
_define("ReverseV2", "x axis", "y", _reverse_v2, values="axis")
_define("SplitD", "x", "y*", _split("attr", None),
        (_attr("split_dim", "int"), _attr("num_split", "int")))
_define("Split", "split_dim x", "y*", _split("input", None), (_attr("num_split", "int"),),
        values="split_dim")
_define("SplitV", "x size_splits split_dim", "y*", _split("input", "input"),
        (_attr("num_split", "int"),), values="size_splits split_dim")
_define("SplitVD", "x", "y*", _split("attr", "attr"),
        (_attr("size_splits", "list_int"), _attr("split_dim", "int"),
         _attr("num_split", "int")))
_define("Tril", "x", "y", _triangle("Tril"), (_attr("diagonal", "int", 0),))
_define("Triu", "x", "y", _triangle("Triu"), (_attr("diagonal", "int", 0),))
_define("GatherElements", "x index", "y", _gather_elements, (_attr("dim", "int", 0),))
_define("GatherNd", "x indices", "y", _gather_nd,
        (_attr("negative_index_support", "bool", False),))
_define("TopK", "x k", "values indices", _top_k(None),
        (_attr("sorted", "bool", True), _attr("largest", "bool", True),
         _attr("dim", "int", -1)), values="k")
_define("TopKV2", "x k", "values indices", _top_k("indices_dtype"),
        (_attr("sorted", "bool", True), _attr("dim", "int", -1),
         _attr("largest", "bool", True), _attr("indices_dtype", "int", int(DataType.ACL_INT32))),
        values="k")
_define("Sort", "x", "y1 y2", _sort,
        (_attr("axis", "int", -1), _attr("descending", "bool", False),
         _attr("stable", "bool", False), _attr("y2_dtype", "type", DataType.ACL_INT32)))
_define("Addcmul", "input_data x1 x2 value", "y", _add_product(False))
_define("Addcdiv", "input_data x1 x2 value", "y", _add_product(True))
_define("Swish", "x", "y", _swish, (_attr("scale", "float", 1.0),))
_define("PRelu", "x weight", "y", _prelu)
_define("AdaptiveAvgPool2d", "x", "y", _adaptive_avg_pool2d,
        (_attr("output_size", "list_int"),))
_define("ResizeNearestNeighborV2", "x size", "y", _resize_nearest,
        (_attr("align_corners", "bool", False), _attr("half_pixel_centers", "bool", False),
         _attr("scales", "list_float", [0.0, 0.0])), values="size")
_define("RmsNorm", "x gamma", "y rstd", _rms_norm, (_attr("epsilon", "float", 1e-6),))
_define("GroupNorm", "x gamma? beta?", "y mean rstd", _group_norm,
        (_attr("num_groups", "int"), _attr("eps", "float", 1e-5)))
_define("InstanceNorm", "x gamma beta", "y mean variance", _instance_norm,
        (_attr("data_format", "str", "NDHWC"), _attr("epsilon", "float", 1e-6)))
_define("ReduceProd", "x axes", "y", _reduce_prod,
        (_KEEP, _attr("noop_with_empty_axes", "bool", True)), values="axes")
_define("Range", "start limit delta", "y", _range, (_attr("is_closed", "bool", False),),
        values="start limit delta", rule=_range_rule, real_values=True)
