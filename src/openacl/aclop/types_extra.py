"""Further op types whose aclnn operators already exist: elementwise math and activations
(Atan2, Log1p, Expm1, IsNan, IsInf, IsFinite, Softsign, Selu, Celu, Erfc, Trunc, Xlogy,
SquaredDifference, SoftShrink, HardShrink, LogSigmoid, BiasAdd), shape ops (Pack, Unpack,
PadD, Flatten, StridedSlice, StridedSliceD) and DepthwiseConv2D.

Each is declared with ``types._define`` as CANN's IR has it (``REG_OP`` in the
``*_proto.h`` files of hicann/ops-math and hicann/ops-nn; the file named in each lowering's
docstring) and lowered onto aclnn calls. ``openacl.aclop.types`` imports this module after
``types_more``, so its table holds these too.

Three are not in those repositories' IR and follow CANN's op library headers instead, as
SplitVD does: PadD and StridedSliceD (the attribute forms of Pad and StridedSlice: pad_ops.h
and selection_ops.h), and DepthwiseConv2D (nn_calculation_ops.h; its inputs, attributes and
filter layouts are those ops-nn's depthwise graph passes and their tests use).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from openacl.aclop.lowering import _Lowering
from openacl.aclop.types import (
    _attr,
    _binary,
    _channels_last,
    _conv_pads,
    _copy_of,
    _define,
    _hw,
    _nchw_input,
    _nchw_output,
    _nhwc_inferred,
    _reshaped,
    _unary,
)
from openacl.aclop.types_more import _pad_constant
from openacl.dtypes import DataType, Format
from openacl.tensor import contiguous_strides

TRUNC_DIVISION = 1  # aclnnDivMods' mode that truncates: trunc(x / 1) is Trunc
CHANNELS_FIRST_FORMATS = (Format.ACL_FORMAT_NCHW, Format.ACL_FORMAT_NCDHW)
CHANNELS_LAST_FORMATS = (Format.ACL_FORMAT_NHWC, Format.ACL_FORMAT_NDHWC)
BIAS_ADD_LAYOUTS = ("NHWC", "NCHW", "NDHWC", "NCDHW")  # BiasAdd's data_format values
BIAS_ADD_CHANNELS_FIRST = ("NCHW", "NCDHW")
STRIDED_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                       "shrink_axis_mask")
NEW_AXIS, SHRINK_AXIS = -1, -2  # StridedSlice's output dims that are not a dim of x


# -- elementwise (math/* of ops-math, activation/* of ops-nn) --------------------------------
def _predicate(lower: Callable[[_Lowering], None]) -> Callable[[_Lowering], None]:
    """IsNan / IsInf / IsFinite: y is DT_BOOL in CANN's IR, whatever x is."""
    @functools.wraps(lower)
    def checked(b: _Lowering) -> None:
        if not b.infer and b.outputs["y"].data_type != DataType.ACL_BOOL:
            raise b.fail_output("y", f"is {b.outputs['y'].data_type.name}; CANN's IR makes "
                                     f"it DT_BOOL")
        b.infer_dtypes["y"] = DataType.ACL_BOOL
        lower(b)
    return checked


def _foreach_unary(aclnn: str) -> Callable[[_Lowering], None]:
    """A unary op type computed by an aclnnForeach operator over a one-tensor list (Expm1,
    Erfc: aclnn has them only in that form)."""
    def lower(b: _Lowering) -> None:
        b.call(aclnn, {"x": "x", "out": "y"}, x=[b.x("x")], out=[b.y("y")])
    return lower


def _is_nan(b: _Lowering) -> None:
    """IsNan (math/is_nan/op_graph/is_nan_proto.h): x != x, true exactly at NaN."""
    b.call("NeTensor", {"self": "x", "other": "x"}, self=b.x("x"), other=b.x("x"),
           out=b.y("y"))


def _is_inf(b: _Lowering) -> None:
    """IsInf (math/is_inf/op_graph/is_inf_proto.h): +inf or -inf."""
    b.call("IsInf", x=b.x("x"), out=b.y("y"))


def _is_finite(b: _Lowering) -> None:
    """IsFinite (math/is_finite/op_graph/is_finite_proto.h): neither NaN nor infinite."""
    b.call("IsFinite", self=b.x("x"), out=b.y("y"))


def _softsign(b: _Lowering) -> None:
    """Softsign (activation/softsign/op_graph/softsign_proto.h): x / (1 + |x|), in three
    aclnn steps into y (|x|, + 1, x divided by it)."""
    y = b.y("y")
    b.call("Abs", self=b.x("x"), out=y)
    if b.infer:  # the first step says y's shape and dtype; the others keep them
        return
    b.call("Adds", self=y, other=b.scalar(1.0), alpha=b.scalar(1.0), out=y)
    b.call("Div", self=b.x("x"), other=y, out=y)


def _celu(b: _Lowering) -> None:
    """Celu (activation/celu/op_graph/celu_proto.h): alpha3 * x where x >= 0, else
    alpha1 * (exp(x / alpha2) - 1); aclnnElu with scale alpha3, alpha alpha1 / alpha3 and
    inputScale 1 / alpha2 computes exactly that for every alpha2 and nonzero alpha3."""
    alpha1, alpha2, alpha3 = (float(b.attr(n)) for n in ("alpha1", "alpha2", "alpha3"))
    if alpha2 == 0:
        raise b.fail_attr("alpha2", "must not be 0 (x is divided by it)")
    if alpha3 == 0:
        raise b.fail_attr("alpha3", "0 (a zero positive part) is not supported here: "
                                    "aclnnElu scales both parts by it")
    b.call("Elu", {"alpha": "alpha1", "scale": "alpha3", "inputScale": "alpha2"},
           self=b.x("x"), alpha=b.scalar(alpha1 / alpha3), scale=b.scalar(alpha3),
           inputScale=b.scalar(1.0 / alpha2), out=b.y("y"))


def _trunc(b: _Lowering) -> None:
    """Trunc (math/trunc/op_graph/trunc_proto.h): x rounded toward zero; aclnnDivMods of x
    by 1 with the truncating mode (exact: x / 1 is x), integers unchanged."""
    integer = b.operand("input_x").dtype.kind in "iub"
    one = b.scalar(1, DataType.ACL_INT64) if integer else b.scalar(1.0)
    b.call("DivMods", {"self": "input_x", "out": "output_y"}, self=b.x("input_x"), other=one,
           mode=TRUNC_DIVISION, out=b.y("output_y"))


def _squared_difference(b: _Lowering) -> None:
    """SquaredDifference (math/squared_difference/op_graph/squared_difference_proto.h):
    (x1 - x2) ** 2, broadcasting: the difference into y, then y * y."""
    y = b.y("y")
    b.call("Sub", self=b.x("x1"), other=b.x("x2"), alpha=b.scalar(1, DataType.ACL_INT64),
           out=y)
    if not b.infer:
        b.call("Mul", self=y, other=y, out=y)


def _shrink(aclnn: str) -> Callable[[_Lowering], None]:
    """SoftShrink / HardShrink (activation/hard_shrink/op_graph/hard_shrink_proto.h;
    SoftShrink in common/inc/op_graph/op_nn_proto_extend.h): lambd as aclnn's."""
    def lower(b: _Lowering) -> None:
        if b.attr("lambd") < 0:
            raise b.fail_attr("lambd", "must be >= 0")
        b.call(aclnn, {"self": "input_x", "out": "output_y", "lambd": "lambd"},
               self=b.x("input_x"), lambd=b.scalar(float(b.attr("lambd"))),
               out=b.y("output_y"))
    return lower


def _bias_add(b: _Lowering) -> None:
    """BiasAdd (math/bias_add/op_graph/bias_add_proto.h): y = x + bias along x's channel
    dim: dim 1 when x's format is NCHW / NCDHW (or ND with data_format NCHW / NCDHW), the
    last dim otherwise; bias is 1-D, broadcast over the other dims by zero strides."""
    layout = b.attr("data_format")
    if layout not in BIAS_ADD_LAYOUTS:
        raise b.fail_attr("data_format", f"expected one of {list(BIAS_ADD_LAYOUTS)}")
    shape, fmt = b.shape("x"), b.operand("x").format
    first = fmt in CHANNELS_FIRST_FORMATS or (fmt not in CHANNELS_LAST_FORMATS and
                                              layout in BIAS_ADD_CHANNELS_FIRST)
    if len(shape) < (2 if first else 1):
        raise b.fail_input("x", f"has {len(shape)} dims {list(shape)}; it needs a channel "
                                f"dim ({'dim 1' if first else 'the last dim'})")
    axis = 1 if first else len(shape) - 1
    if len(b.shape("bias")) != 1 or b.shape("bias")[0] != shape[axis]:
        raise b.fail_input("bias", f"shape {list(b.shape('bias'))} must be [C] = "
                                   f"[{shape[axis]}], dim {axis} of x {list(shape)}")
    trailing = len(shape) - 1 - axis
    bias = b.view("bias", [shape[axis]] + [1] * trailing, [1] + [0] * trailing)
    b.call("Add", {"other": "bias"}, self=b.x("x"), other=bias,
           alpha=b.scalar(1, DataType.ACL_INT64), out=b.y("y"))


# -- shape ops (conversion/* of ops-math) -------------------------------------------------------
def _pack(b: _Lowering) -> None:
    """Pack (conversion/pack/op_graph/pack_proto.h): the N inputs stacked along a new dim
    ``axis`` in [-(R + 1), R + 1)."""
    pieces = b.inputs["x"]
    if "N" in b.explicit and b.attr("N") != len(pieces):
        raise b.fail_attr("N", f"but {len(pieces)} x inputs were given")
    rank = len(pieces[0].dims)
    axis = b.axis("axis", b.attr("axis"), rank + 1)
    b.call("Stack", {"dim": "axis"}, tensors=b.xs("x"), dim=axis, out=b.y("y"))


def _unpack(b: _Lowering) -> None:
    """Unpack (conversion/unpack/op_graph/unpack_proto.h): x cut along ``axis`` into its
    ``num`` slices y0, y1..., each without that dim (a copy of a strided view per slice)."""
    shape = b.shape("x")
    if not shape:
        raise b.fail_input("x", "is 0-dim; Unpack needs a dim to unpack")
    axis = b.axis("axis", b.attr("axis"), len(shape))
    count = b.attr("num")
    if count != shape[axis]:
        raise b.fail_attr("num", f"must be dim {axis} of x {list(shape)}: {shape[axis]}")
    strides = contiguous_strides(shape)
    dims = [d for k, d in enumerate(shape) if k != axis]
    kept = [s for k, s in enumerate(strides) if k != axis]
    for k, y in enumerate(b.ys("y", count)):
        b.call("Cast", {"self": "x"}, self=b.view("x", dims, kept, k * strides[axis]),
               dtype=b.operand("x").data_type, out=y)


def _pad_d(b: _Lowering) -> None:
    """PadD (CANN's pad_ops.h; Pad with its paddings as a ListListInt attribute): zeros
    around x, paddings [[before, after]] per dim."""
    paddings, shape = b.attr("paddings"), b.shape("x")
    if len(paddings) != len(shape) or any(len(pair) != 2 for pair in paddings):
        raise b.fail_attr("paddings", f"needs one [before, after] pair per dim of x "
                                      f"{list(shape)}")
    pairs = [(int(before), int(after)) for before, after in paddings]
    if any(d + before + after < 0 for d, (before, after) in zip(shape, pairs, strict=True)):
        raise b.fail_attr("paddings", f"cuts x {list(shape)} below zero")
    _pad_constant(b, pairs, None)


def _flatten(b: _Lowering) -> None:
    """Flatten (common/inc/op_graph/op_math_proto_extend.h): x as a 2-D
    (d0 * ... * d(axis-1), d(axis) * ... * dn); axis in [-r, r]."""
    shape = b.shape("x")
    rank = len(shape)
    axis = b.attr("axis")
    if not -rank <= axis <= rank:
        raise b.fail_attr("axis", f"must be in [{-rank}, {rank}] for x {list(shape)}")
    axis = axis + rank if axis < 0 else axis
    _reshaped(b, [math.prod(shape[:axis]), math.prod(shape[axis:])])


@dataclass(frozen=True)
class _SliceDim:
    """One dim of x as a strided slice selects it: first index, count and step (a shrunk
    dim selects one index, step 1)."""

    start: int
    count: int
    step: int


def _dense_slice(b: _Lowering, fail: Callable[[str, str], Exception], begin: list[int],
                 end: list[int], strides: list[int], masks: dict[str, int]
                 ) -> tuple[list[_SliceDim], list[int]]:
    """TensorFlow's strided-slice rules (CANN's infershape follows them): the sparse spec
    (begin, end, strides and the five masks) made dense over x's dims; returns each dim's
    slice and the output's dims in order, as indices into them (``NEW_AXIS`` for a new dim
    of 1, shrunk dims left out)."""
    shape = b.shape("x")
    rank = len(shape)
    if not len(begin) == len(end) == len(strides):
        raise fail("end", f"begin, end and strides hold {len(begin)}, {len(end)} and "
                          f"{len(strides)} values; they must be as many")
    ellipsis, new_axis = masks["ellipsis_mask"], masks["new_axis_mask"]
    count = len(begin)
    bits = [1 << i for i in range(count)]
    if ellipsis & (ellipsis - 1):
        raise b.fail_attr("ellipsis_mask", "sets more than one ellipsis")
    seen, after_ellipsis = False, 0
    for bit in bits:
        if seen and new_axis & bit:
            after_ellipsis += 1
        seen = seen or bool(ellipsis & bit)
    entries = list(range(count)) + ([] if seen else [None])  # None: the implied ellipsis
    total = count + (0 if seen else 1)
    dense: list[tuple[int, int, int, bool, bool, bool] | None] = [None] * rank
    order: list[int] = []
    full = 0
    for i in entries:
        if i is None or ellipsis & bits[i]:
            following = total - (i if i is not None else count)
            stop = min(rank - following + 1 + after_ellipsis, rank)
            for d in range(full, stop):
                dense[d] = (0, 0, 1, True, True, False)
                order.append(d)
            full = max(full, stop)
            continue
        if new_axis & bits[i]:
            order.append(NEW_AXIS)
            continue
        if full >= rank:
            raise fail("begin", f"indexes {count} entries into x of {rank} dims")
        shrink = bool(masks["shrink_axis_mask"] & bits[i])
        dense[full] = (begin[i], end[i], strides[i], bool(masks["begin_mask"] & bits[i]),
                       bool(masks["end_mask"] & bits[i]), shrink)
        order.append(SHRINK_AXIS if shrink else full)
        full += 1
    return [_slice_dim(fail, d, shape[d], *dense[d]) for d in range(rank)], \
        [d for d in order if d != SHRINK_AXIS]


def _slice_dim(fail: Callable[[str, str], Exception], d: int, extent: int, start: int,
               stop: int, step: int, begin_masked: bool, end_masked: bool, shrink: bool
               ) -> _SliceDim:
    """One dense dim's slice, TensorFlow's canonical form: negative indices count from the
    end, indices are clamped, masked ones take the whole dim in the step's direction."""
    if step == 0:
        raise fail("strides", f"entry for dim {d} is 0")
    if shrink:
        if step < 0:
            raise fail("strides", f"entry for the shrunk dim {d} is {step}; a shrunk dim "
                                  f"takes a positive stride")
        index = start + extent if start < 0 else start
        if not 0 <= index < extent:
            raise fail("begin", f"index {start} of the shrunk dim {d} is outside its "
                                f"size {extent}")
        return _SliceDim(index, 1, 1)
    low, high = (0, extent) if step > 0 else (-1, extent - 1)

    def canonical(value: int, masked: bool, is_end: bool) -> int:
        if masked:
            return (high if is_end else low) if step > 0 else (low if is_end else high)
        value = value + extent if value < 0 else value
        return min(max(value, low), high)

    first, last = canonical(start, begin_masked, False), canonical(stop, end_masked, True)
    span = last - first
    count = 0 if (span <= 0 if step > 0 else span >= 0) else -(-span // step)
    return _SliceDim(first, count, step)


def _strided_slice(from_inputs: bool) -> Callable[[_Lowering], None]:
    """StridedSlice (conversion/strided_slice/op_graph/strided_slice_proto.h: begin, end
    and strides are value inputs) and StridedSliceD (CANN's selection_ops.h: they are
    attributes); every mask is honoured. y is a copy of a strided view of x; the dims with
    a negative step are viewed forward and flipped into y (aclnnFlip)."""
    def lower(b: _Lowering) -> None:
        get = b.values.__getitem__ if from_inputs else b.attr
        fail = b.fail_input if from_inputs else b.fail_attr
        masks = {name: b.attr(name) for name in STRIDED_SLICE_MASKS}
        for name, value in masks.items():
            if value < 0:
                raise b.fail_attr(name, "a bitmask is >= 0")
        dims, order = _dense_slice(b, fail, list(get("begin")), list(get("end")),
                                   list(get("strides")), masks)
        strides = contiguous_strides(b.shape("x"))
        empty = any(dim.count == 0 for dim in dims)
        offset = 0
        for dim, stride in zip(dims, strides, strict=True):
            lowest = dim.start + (dim.count - 1) * dim.step if dim.step < 0 else dim.start
            offset += lowest * stride
        view_dims = [1 if d == NEW_AXIS else dims[d].count for d in order]
        view_strides = [0 if d == NEW_AXIS else strides[d] * abs(dims[d].step)
                        for d in order]
        flipped = [k for k, d in enumerate(order) if d != NEW_AXIS and dims[d].step < 0]
        view = b.view("x", view_dims, view_strides, 0 if empty else offset)
        if flipped and not empty:
            b.call("Flip", self=view, dims=flipped, out=b.y("y"))
        else:
            _copy_of(b, view)
    return lower


# -- convolution ----------------------------------------------------------------------------
def _depthwise_filter(b: _Lowering, channels: int) -> int:
    """DepthwiseConv2D's filter as aclnnConvolution's (C * M, 1, kh, kw) for groups = C:
    HWCN is [kh, kw, C, M] (output channel c * M + m, TensorFlow's layout), NCHW is
    [M, C, kh, kw] read as [M * C, 1, kh, kw] (ops-nn's depthwise fusion pass reshapes both
    so; ND reads as HWCN). A filter already in that form (C of 1) is taken as it is."""
    dims, layout = b.shape("filter"), b.operand("filter").format
    if len(dims) != 4:
        raise b.fail_input("filter", f"has {len(dims)} dims {list(dims)}; expected 4")
    if layout in (Format.ACL_FORMAT_HWCN, Format.ACL_FORMAT_ND):
        kh, kw, c, m = dims
        view = ([c * m, 1, kh, kw], [1, 0, kw * c * m, c * m])
    elif layout == Format.ACL_FORMAT_NCHW:
        m, c, kh, kw = dims
        view = ([m * c, 1, kh, kw], [kh * kw, 0, kw, 1])
    else:
        raise b.fail_input("filter", f"has format {layout.name}; HWCN or NCHW is supported")
    if c not in (channels, 1) or (c * m) % channels:
        raise b.fail_input("filter", f"shape {list(dims)} ({layout.name}) does not fit x's "
                                     f"{channels} channels")
    return b.view("filter", *view)


def _depthwise_conv2d(b: _Lowering) -> None:
    """DepthwiseConv2D (CANN's nn_calculation_ops.h; not in these repositories' IR: the
    inputs and attributes ops-nn's conv/convolution_forward depthwise passes and their tests
    build it with): each input channel convolved with its own filters (aclnnConvolution
    with groups = channels); pads [top, bottom, left, right] (equal pairs, as Conv2D's),
    strides and dilations in data_format order; bias [C * M]."""
    last = _channels_last(b)
    pads = _conv_pads(b)
    channels = b.shape("x")[3 if last else 1]
    b.call("Convolution", {"stride": "strides", "padding": "pads", "dilation": "dilations",
                           "weight": "filter"},
           input=_nchw_input(b, "x", last), weight=_depthwise_filter(b, channels),
           bias=b.x("bias") if b.has("bias") else None, stride=list(_hw(b, "strides", last)),
           padding=[pads[0], pads[2]], dilation=list(_hw(b, "dilations", last)),
           transposed=False, outputPadding=None, groups=channels,
           output=_nchw_output(b, "y", last), cubeMathType=0)
    _nhwc_inferred(b, "y", last)


# -- the table ------------------------------------------------------------------------------
_define("Atan2", "x1 x2", "y", _binary("Atan2"))  # math/atan2/op_graph/atan2_proto.h
_define("Xlogy", "x1 x2", "y", _binary("XLogYTensor"))  # math/xlogy/op_graph/xlogy_proto.h
_define("SquaredDifference", "x1 x2", "y", _squared_difference)
_define("Log1p", "x", "y", _unary("Log1p"))  # math/log1p/op_graph/log1p_proto.h
_define("Selu", "x", "y", _unary("Selu"))  # activation/selu/op_graph/selu_proto.h
# activation/log_sigmoid/op_graph/log_sigmoid_proto.h
_define("LogSigmoid", "x", "y", _unary("LogSigmoid"))
_define("Expm1", "x", "y", _foreach_unary("ForeachExpm1"))  # math/expm1/op_graph/expm1_proto.h
_define("Erfc", "x", "y", _foreach_unary("ForeachErfc"))  # math/erfc/op_graph/erfc_proto.h
_define("IsNan", "x", "y", _predicate(_is_nan))
_define("IsInf", "x", "y", _predicate(_is_inf))
_define("IsFinite", "x", "y", _predicate(_is_finite))
_define("Softsign", "x", "y", _softsign)
_define("Celu", "x", "y", _celu, (_attr("alpha1", "float", 1.0), _attr("alpha2", "float", 1.0),
                                  _attr("alpha3", "float", 1.0)))
_define("Trunc", "input_x", "output_y", _trunc)
_define("SoftShrink", "input_x", "output_y", _shrink("Softshrink"),
        (_attr("lambd", "float", 0.5),))
_define("HardShrink", "input_x", "output_y", _shrink("Hardshrink"),
        (_attr("lambd", "float", 0.5),))
_define("BiasAdd", "x bias", "y", _bias_add, (_attr("data_format", "str", "NHWC"),))
_define("Pack", "x*", "y", _pack, (_attr("axis", "int", 0), _attr("N", "int", 1)))
_define("Unpack", "x", "y*", _unpack, (_attr("num", "int"), _attr("axis", "int", 0)))
_define("PadD", "x", "y", _pad_d, (_attr("paddings", "list_list_int"),))
_define("Flatten", "x", "y", _flatten, (_attr("axis", "int", 1),))
_STRIDED_SLICE_MASK_ATTRS = tuple(_attr(name, "int", 0) for name in STRIDED_SLICE_MASKS)
_define("StridedSlice", "x begin end strides", "y", _strided_slice(True),
        _STRIDED_SLICE_MASK_ATTRS, values="begin end strides")
_define("StridedSliceD", "x", "y", _strided_slice(False),
        (_attr("begin", "list_int"), _attr("end", "list_int"), _attr("strides", "list_int"),
         *_STRIDED_SLICE_MASK_ATTRS))
_define("DepthwiseConv2D", "x filter bias? offset_w?", "y", _depthwise_conv2d,
        (_attr("strides", "list_int"), _attr("dilations", "list_int", [1, 1, 1, 1]),
         _attr("pads", "list_int"), _attr("data_format", "str", "NHWC"),
         _attr("offset_x", "int", 0)))
