"""The op types: ``OP_TYPES``, one declaration per CANN op type (``_define``: inputs,
outputs, attributes, value inputs) next to the lowering that computes it with aclnn calls.

Names and defaults come from the CANN IR, ``REG_OP(...)`` in the ``*_proto.h`` files of
hicann/ops-math and hicann/ops-nn. ``_spec`` finds an op type by name, falling back to a
registered custom operator (``_custom_spec``). Adding an op type touches this module only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.aclop.attr import _bad
from openacl.aclop.lowering import _Lowering
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_OP_NOT_FOUND, AclError
from openacl.ops import REGISTRY
from openacl.tensor import contiguous_strides

SUGGESTIONS = 6  # op types listed when an op type is unknown
NEAR_EDITS = 1  # edits (case ignored) within which an op type is suggested...
NEAR_EDIT_RATIO = 4  # ...or one per this many characters of the name, if more
NEAR_PREFIX = 4  # shortest name that counts as a prefix of another (Softmax / SoftmaxV2)
REQUIRED = "<required>"  # an attribute without a default (REQUIRED_ATTR)
CUSTOM_ATTR_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str",
                     "list_int": "list_int", "list_float": "list_float",
                     "list_bool": "list_bool"}  # custom OpDef attr kind -> aclop attr kind


@dataclass(frozen=True)
class AttrDef:
    """One attribute of an op type: CANN name, kind (``ATTR_KINDS``) and default."""

    name: str
    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class OpType:
    """One CANN op type and how it maps onto aclnn.

    ``inputs`` are CANN's input names in IR order: ``"bias?"`` is an optional input,
    ``"x*"`` a dynamic one (one or more). ``values`` are the inputs read on the host:
    integers, or also floats where ``real_values`` (Range's start, limit and delta).
    ``lower(b)`` issues the aclnn calls through the ``_Lowering`` ``b``. ``rule``, where
    given, returns ``{output: (shape, DataType)}`` for lowerings that write in place.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[AttrDef, ...]
    lower: Callable[[_Lowering], None]
    values: frozenset[str] = frozenset()
    rule: Callable[[_Lowering], dict[str, tuple[tuple[int, ...], DataType]]] | None = None
    real_values: bool = False

    def attr(self, name: str) -> AttrDef | None:
        return next((a for a in self.attrs if a.name == name), None)


OP_TYPES: dict[str, OpType] = {}


def _define(name: str, inputs: str, outputs: str, lower: Callable[[_Lowering], None],
            attrs: Sequence[AttrDef] = (), values: str = "", rule=None,
            real_values: bool = False) -> None:
    if name in OP_TYPES:
        raise ValueError(f"op type {name} is defined twice")
    OP_TYPES[name] = OpType(name, tuple(inputs.split()), tuple(outputs.split()), tuple(attrs),
                            lower, frozenset(values.split()), rule, real_values)


# -- lowerings ---------------------------------------------------------------------------------
def _unary(aclnn: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call(aclnn, self=b.x("x"), out=b.y("y"))
    return lower


def _binary(aclnn: str, **extra: Any) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call(aclnn, self=b.x("x1"), other=b.x("x2"), out=b.y("y"), **extra)
    return lower


def _pow(b: _Lowering) -> None:
    b.call("PowTensorTensor", self=b.x("x"), exponent=b.x("exponent"), out=b.y("y"))


def _integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iub"


def _div(b: _Lowering) -> None:
    """Div / RealDiv: true division for floats; integers truncate, as TensorFlow's Div."""
    if _integer(b.operand("x1").dtype) and _integer(b.operand("x2").dtype):
        b.call("DivMod", self=b.x("x1"), other=b.x("x2"), mode=1, out=b.y("y"))
    else:
        b.call("Div", self=b.x("x1"), other=b.x("x2"), out=b.y("y"))


# -- lowerings with attributes ---------------------------------------------------------------
def _exp_log(aclnn: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.only_default("base", "scale", "shift")
        _unary(aclnn)(b)
    return lower


def _transposed(b: _Lowering, name: str, transpose: bool) -> int:
    """Input ``name`` with its last two dims swapped when ``transpose`` (a strided view)."""
    dims = b.shape(name)
    if not transpose:
        return b.x(name)
    strides = list(contiguous_strides(dims))
    view = list(dims)
    view[-1], view[-2] = view[-2], view[-1]
    strides[-1], strides[-2] = strides[-2], strides[-1]
    return b.view(name, view, strides)


def _matmul(first: str, second: str, batched: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        for name in ("x1", "x2"):
            rank = len(b.shape(name))
            if (rank != 2) if not batched else (rank < 2):
                raise b.fail_input(name, f"has {rank} dims {list(b.shape(name))}; "
                                         f"{b.op_type} takes {'2' if not batched else '>= 2'}")
        if b.has("offset_w"):
            raise b.fail_input("offset_w", "quantized matmul (offset_w) is not supported")
        if b.spec.attr("offset_x") is not None:
            b.only_default("offset_x")
        b.call("Matmul", {"self": "x1", "mat2": "x2"},
               self=_transposed(b, "x1", b.attr(first)),
               mat2=_transposed(b, "x2", b.attr(second)), out=b.y("y"), cubeMathType=0)
        if b.has("bias") and not b.infer:
            b.call("InplaceAdd", selfRef=b.y("y"), other=b.x("bias"), alpha=None)
    return lower


def _softmax(aclnn: str, x: str, y: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        axes = b.attr("axes")
        if len(axes) != 1:
            raise b.fail_attr("axes", "exactly one axis is supported (aclnn softmax takes one "
                                      "dim)")
        b.call(aclnn, {"dim": "axes"}, self=b.x(x), dim=axes[0], out=b.y(y))
    return lower


def _layer_norm(b: _Lowering) -> None:
    """LayerNorm: y, mean and variance over the dims from begin_norm_axis on (mean and
    variance keep them as 1, CANN's infershape); gamma/beta cover the dims from
    begin_params_axis on and are broadcast over the rest."""
    shape = b.shape("x")
    rank = len(shape)
    norm = b.axis("begin_norm_axis", b.attr("begin_norm_axis"), rank)
    params = b.axis("begin_params_axis", b.attr("begin_params_axis"), rank)
    if params < norm:
        raise b.fail_attr("begin_params_axis", f"must not come before begin_norm_axis {norm}")
    normalized = shape[norm:]
    weights = []
    for name in ("gamma", "beta"):
        if b.shape(name) != shape[params:]:
            raise b.fail_input(name, f"shape {list(b.shape(name))} must be x's dims from "
                                     f"begin_params_axis: {list(shape[params:])}")
        if params == norm:
            weights.append(b.x(name))
        else:  # broadcast over the leading normalized dims with zero strides
            strides = [0] * (params - norm) + list(contiguous_strides(shape[params:]))
            weights.append(b.view(name, normalized, strides))
    b.call("LayerNorm", {"normalizedShape": "begin_norm_axis", "eps": "epsilon"},
           input=b.x("x"), normalizedShape=list(normalized), weightOptional=weights[0],
           biasOptional=weights[1], eps=b.attr("epsilon"), out=b.y("y"),
           meanOutOptional=b.y("mean"), rstdOutOptional=None)
    b.call("VarCorrection", self=b.x("x"), dim=list(range(norm, rank)), correction=0,
           keepdim=True, out=b.y("variance"))


def _cast(b: _Lowering) -> None:
    try:
        target = dtypes.to_data_type(b.attr("dst_type"), "dst_type")
    except AclError:
        raise b.fail_attr("dst_type", "is not an aclDataType") from None
    if not b.infer and b.outputs["y"].data_type != target:
        raise b.fail_output("y", f"dtype {b.outputs['y'].data_type.name} differs from "
                                 f"dst_type {target.name}")
    b.call("Cast", {"dtype": "dst_type"}, self=b.x("x"), dtype=target, out=b.y("y"))


def _copy_of(b: _Lowering, view: int) -> None:
    """Output y = ``view`` of input x (a copy through aclnnCast to x's own dtype)."""
    b.call("Cast", {"self": "x"}, self=view, dtype=b.operand("x").data_type,
           out=b.y("y"))


def _slice_from(offsets_name: str, size_name: str, from_inputs: bool
                ) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        shape = b.shape("x")
        get = b.values.__getitem__ if from_inputs else b.attr
        fail = b.fail_input if from_inputs else b.fail_attr
        offsets, size = list(get(offsets_name)), list(get(size_name))
        for name, value in ((offsets_name, offsets), (size_name, size)):
            if len(value) != len(shape):
                raise fail(name, f"has {len(value)} entries; x has {len(shape)} dims")
        dims = []
        for k, (start, count, extent) in enumerate(zip(offsets, size, shape, strict=True)):
            if not 0 <= start <= extent:
                raise fail(offsets_name, f"entry {k} = {start} is outside dim {k} of size "
                                         f"{extent}")
            count = extent - start if count == -1 else count
            if count < 0 or start + count > extent:
                raise fail(size_name, f"entry {k} = {size[k]} runs past dim {k} of size "
                                      f"{extent} from offset {start}")
            dims.append(count)
        strides = contiguous_strides(shape)
        offset = sum(s * o for s, o in zip(strides, offsets, strict=True)) if all(dims) else 0
        _copy_of(b, b.view("x", dims, strides, offset))
    return lower


def _reshaped(b: _Lowering, dims: Sequence[int]) -> None:
    if math.prod(dims) != math.prod(b.shape("x")):
        raise b.fail_output("y", f"shape {list(dims)} does not hold the "
                                 f"{math.prod(b.shape('x'))} elements of x")
    _copy_of(b, b.view("x", dims))


def _reshape(b: _Lowering) -> None:
    b.only_default("axis", "num_axes")
    shape, target = b.shape("x"), list(b.values["shape"])
    target = [shape[k] if d == 0 and k < len(shape) else d for k, d in enumerate(target)]
    if target.count(-1) > 1:
        raise b.fail_input("shape", f"{target} has more than one -1")
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(shape) // known if known else 0
    _reshaped(b, target)


def _squeeze(b: _Lowering) -> None:
    shape = b.shape("x")
    axes = {b.axis("axis", a, len(shape)) for a in b.attr("axis")}
    for a in axes:
        if shape[a] != 1:
            raise b.fail_attr("axis", f"dim {a} has size {shape[a]}, not 1")
    keep = [d for k, d in enumerate(shape) if (k not in axes if axes else d != 1)]
    _reshaped(b, keep)


def _unsqueeze(b: _Lowering) -> None:
    dims = list(b.shape("x"))
    rank = len(dims) + len(b.attr("axes"))
    for a in sorted(b.axis("axes", a, rank) for a in b.attr("axes")):
        dims.insert(a, 1)
    _reshaped(b, dims)


def _concat(dim_from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        pieces = b.inputs["x"]
        count = b.attrs.get("N")
        if count is not None and count != len(pieces) and "N" in b.explicit:
            raise b.fail_attr("N", f"but {len(pieces)} x inputs were given")
        if dim_from_input:
            values = b.values["concat_dim"]
            if len(values) != 1:
                raise b.fail_input("concat_dim", f"must hold one value, not {list(values)}")
            dim = values[0]
        else:
            dim = b.attr("concat_dim")
        b.call("Cat", {"dim": "concat_dim"}, tensors=b.xs("x"), dim=dim, out=b.y("y"))
    return lower


def _transpose(from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        perm = b.values["perm"] if from_input else b.attr("perm")
        b.call("Permute", {"dims": "perm"}, self=b.x("x"), dims=list(perm),
               out=b.y("y"))
    return lower


REDUCTIONS = {"Sum": ("ReduceSum", "dims", "keepDims"), "Mean": ("Mean", "dim", "keepDim"),
              "Max": ("Amax", "dim", "keepDim"), "Min": ("Amin", "dim", "keepDim"),
              "All": ("All", "dim", "keepdim"), "Any": ("Any", "dim", "keepdim")}


def _reduce(kind: str, axes_from_input: bool) -> Callable[[_Lowering], None]:
    aclnn, dims_arg, keep_arg = REDUCTIONS[kind]

    def lower(b: _Lowering) -> None:
        axes = list(b.values["axes"] if axes_from_input else b.attr("axes"))
        if not axes and b.attrs.get("noop_with_empty_axes", False):
            _copy_of(b, b.x("x"))  # empty axes with noop_with_empty_axes: no reduction
            return
        extra = {"dtype": None} if aclnn in ("ReduceSum", "Mean") else {}
        b.call(aclnn, {dims_arg: "axes", keep_arg: "keep_dims"}, self=b.x("x"),
               **{dims_arg: axes, keep_arg: b.attr("keep_dims")}, **extra, out=b.y("y"))
    return lower


def _arg_extremum(aclnn: str, from_input: bool) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        if from_input:
            values = b.values["dimension"]
            if len(values) != 1:
                raise b.fail_input("dimension", f"must hold one value, not {list(values)}")
            dim = values[0]
        else:
            dim = b.attr("dimension")
        wanted = dtypes.to_data_type(b.attr("dtype"), "dtype")
        if wanted not in (DataType.ACL_INT32, DataType.ACL_INT64):
            raise b.fail_attr("dtype", "must be ACL_INT32 or ACL_INT64")
        if not b.infer and b.outputs["y"].data_type != wanted:
            raise b.fail_output("y", f"dtype {b.outputs['y'].data_type.name} differs from "
                                     f"the dtype attribute {wanted.name}")
        b.infer_dtypes["y"] = wanted
        b.call(aclnn, {"dim": "dimension"}, self=b.x("x"), dim=dim, keepdim=False,
               out=b.y("y"))
    return lower


def _select(condition: str, first: str, second: str, out: str) -> Callable[[_Lowering], None]:
    def lower(b: _Lowering) -> None:
        b.call("SWhere", condition=b.x(condition), self=b.x(first), other=b.x(second),
               out=b.y(out))
    return lower


def _fill(b: _Lowering) -> None:
    b.call("Expand", {"size": "dims"}, self=b.x("value"), size=list(b.values["dims"]),
           out=b.y("y"))


def _expand(from_input: bool) -> Callable[[_Lowering], None]:
    """Expand (ONNX): the output is the broadcast of x's shape and ``shape``."""
    def lower(b: _Lowering) -> None:
        shape = list(b.values["shape"] if from_input else b.attr("shape"))
        try:
            target = np.broadcast_shapes(tuple(b.shape("x")), tuple(shape))
        except ValueError:
            reason = f"{shape} does not broadcast with x's shape {list(b.shape('x'))}"
            raise (b.fail_input("shape", reason) if from_input
                   else b.fail_attr("shape", reason)) from None
        b.call("Expand", {"size": "shape"}, self=b.x("x"), size=list(target),
               out=b.y("y"))
    return lower


def _like_rule(b: _Lowering) -> dict[str, tuple[tuple[int, ...], DataType]]:
    return {"y": (b.shape("x"), b.operand("x").data_type)}


def _zeros_like(b: _Lowering) -> None:
    b.call("InplaceZero", selfRef=b.y("y"))


def _ones_like(b: _Lowering) -> None:
    b.call("InplaceFillScalar", selfRef=b.y("y"), value=b.scalar(1, DataType.ACL_INT64))


def _scalar_attrs(aclnn: str, **mapping: str) -> Callable[[_Lowering], None]:
    """A unary aclnn op whose aclScalar arguments come from float attributes."""
    def lower(b: _Lowering) -> None:
        scalars = {param: b.scalar(b.attr(attr)) for param, attr in mapping.items()}
        b.call(aclnn, dict(mapping), self=b.x("x"), out=b.y("y"), **scalars)
    return lower


def _softplus(b: _Lowering) -> None:
    """Softplus: log(1 + exp(x)), aclnnSoftplus with beta 1 and its default threshold."""
    b.call("Softplus", self=b.x("x"), beta=b.scalar(1.0), threshold=b.scalar(20.0),
           out=b.y("y"))


def _round(b: _Lowering) -> None:
    b.only_default("decimals")
    _unary("Round")(b)


def _clip(b: _Lowering) -> None:
    b.call("ClampTensor", self=b.x("x"), clipValueMin=b.x("clip_value_min"),
           clipValueMax=b.x("clip_value_max"), out=b.y("y"))


def _square(b: _Lowering) -> None:
    b.call("Mul", self=b.x("x"), other=b.x("x"), out=b.y("y"))


def _one_hot(b: _Lowering) -> None:
    depth = b.values["depth"]
    if len(depth) != 1:
        raise b.fail_input("depth", f"must hold one value, not {list(depth)}")
    b.call("OneHot", {"numClasses": "depth"}, self=b.x("x"), numClasses=depth[0],
           onValue=b.x("on_value"), offValue=b.x("off_value"), axis=b.attr("axis"),
           out=b.y("y"))


def _cumsum(b: _Lowering) -> None:
    b.only_default("exclusive", "reverse")
    axis = b.values["axis"]
    if len(axis) != 1:
        raise b.fail_input("axis", f"must hold one value, not {list(axis)}")
    b.call("Cumsum", {"dim": "axis"}, self=b.x("x"), dim=axis[0], dtype=None,
           out=b.y("y"))


def _identity(b: _Lowering) -> None:
    _copy_of(b, b.x("x"))


# -- image ops (Conv2D, pooling, BatchNorm, ResizeBilinearV2): NCHW or NHWC ----------------
LAYOUTS = ("NCHW", "NHWC")  # data_format values; the aclnn operators compute NCHW
SPATIAL = 2  # H and W
PADDING_MODES = ("SAME", "VALID")  # TensorFlow's padding attribute (MaxPool, AvgPool)
V2_PADDING_MODES = ("CALCULATED", "SAME", "VALID")  # padding_mode of MaxPoolV3 / AvgPoolV2


def _channels_last(b: _Lowering, name: str = "x", attr: str | None = "data_format") -> bool:
    """Whether input ``name`` is NHWC (by ``attr``, else by its desc's format; ND reads as
    NHWC, TensorFlow's layout) after checking it is 4-D."""
    if len(b.shape(name)) != 4:
        raise b.fail_input(name, f"has {len(b.shape(name))} dims {list(b.shape(name))}; "
                                 f"{b.op_type} takes a 4-D tensor")
    if attr is None:
        layout = b.operand(name).format
        if layout not in (Format.ACL_FORMAT_NCHW, Format.ACL_FORMAT_NHWC, Format.ACL_FORMAT_ND):
            raise b.fail_input(name, f"has format {layout.name}; NCHW or NHWC is supported")
        return layout != Format.ACL_FORMAT_NCHW
    if b.attr(attr) not in LAYOUTS:
        raise b.fail_attr(attr, f"expected one of {list(LAYOUTS)}")
    return b.attr(attr) == "NHWC"


def _hw(b: _Lowering, attr: str, last: bool) -> tuple[int, int]:
    """The H and W entries of a 4-value attribute given in data_format order (N and C must
    be 1), or of a 2-value one."""
    values = list(b.attr(attr))
    if len(values) == SPATIAL:
        return values[0], values[1]
    if len(values) != 4:
        raise b.fail_attr(attr, "expected 4 values in data_format order (or 2: H, W)")
    n, c = (values[0], values[3]) if last else (values[0], values[1])
    if n != 1 or c != 1:
        raise b.fail_attr(attr, "its N and C entries must be 1")
    return (values[1], values[2]) if last else (values[2], values[3])


def _nchw_input(b: _Lowering, name: str, last: bool) -> int:
    """Input ``name`` as an NCHW tensor: itself, or a strided view of its NHWC buffer."""
    if not last:
        return b.x(name)
    n, h, w, c = b.shape(name)
    sn, sh, sw, sc = contiguous_strides((n, h, w, c))
    return b.view(name, (n, c, h, w), (sn, sc, sh, sw))


def _nchw_output(b: _Lowering, name: str, last: bool) -> Any:
    """Output ``name`` as an NCHW tensor (a strided view of an NHWC buffer)."""
    if not last or b.infer:
        return b.y(name)
    dims = b.outputs[name].dims
    if len(dims) != 4:
        raise b.fail_output(name, f"has {len(dims)} dims {list(dims)}; expected 4")
    n, h, w, c = dims
    sn, sh, sw, sc = contiguous_strides(dims)
    return b.view_output(name, (n, c, h, w), (sn, sc, sh, sw))


def _nhwc_inferred(b: _Lowering, name: str, last: bool) -> None:
    """While inferring an NHWC op, turn the NCHW shape the aclnn call gave into NHWC."""
    if b.infer and last and name in b.inferred:
        (n, c, h, w), data_type = b.inferred[name]
        b.inferred[name] = ((n, h, w, c), data_type)


_FILTER_VIEWS = {  # filter format -> its dims' positions of (out, in, kh, kw)
    Format.ACL_FORMAT_NCHW: (0, 1, 2, 3), Format.ACL_FORMAT_HWCN: (3, 2, 0, 1),
    Format.ACL_FORMAT_NHWC: (0, 3, 1, 2)}


def _filter(b: _Lowering, last: bool) -> int:
    """The filter as (out, in / groups, kh, kw), read by its desc's format (NCHW, HWCN or
    NHWC; ND follows data_format: NCHW, else HWCN as TensorFlow's filters)."""
    layout = b.operand("filter").format
    if layout == Format.ACL_FORMAT_ND:
        layout = Format.ACL_FORMAT_HWCN if last else Format.ACL_FORMAT_NCHW
    if layout not in _FILTER_VIEWS:
        raise b.fail_input("filter", f"has format {layout.name}; NCHW, HWCN or NHWC is "
                                     f"supported")
    dims = b.shape("filter")
    if len(dims) != 4:
        raise b.fail_input("filter", f"has {len(dims)} dims {list(dims)}; expected 4")
    order = _filter_order(b, last)
    strides = contiguous_strides(dims)
    return b.view("filter", [dims[k] for k in order], [strides[k] for k in order])


def _filter_order(b: _Lowering, last: bool) -> tuple[int, int, int, int]:
    """The filter's dims' positions of (out, in / groups, kh, kw) (see ``_filter``)."""
    layout = b.operand("filter").format
    if layout == Format.ACL_FORMAT_ND:
        layout = Format.ACL_FORMAT_HWCN if last else Format.ACL_FORMAT_NCHW
    return _FILTER_VIEWS[layout]


def _conv_pads(b: _Lowering) -> list[int]:
    """A float 2-d convolution's pads [top, bottom, left, right], checked: equal pairs
    (aclnnConvolution pads symmetrically), no quantized inputs (offset_w, offset_x)."""
    if b.has("offset_w"):
        raise b.fail_input("offset_w", "quantized convolution (offset_w) is not supported")
    b.only_default("offset_x")
    pads = list(b.attr("pads"))
    if len(pads) != 4:
        raise b.fail_attr("pads", "expected 4 values: top, bottom, left, right")
    if pads[0] != pads[1] or pads[2] != pads[3]:
        raise b.fail_attr("pads", "only symmetric padding (top == bottom, left == right) "
                                  "is supported")
    return pads


def _conv2d(b: _Lowering) -> None:
    """Conv2D: pads are [top, bottom, left, right] (``_conv_pads``); strides and dilations
    in data_format order."""
    last = _channels_last(b)
    pads = _conv_pads(b)
    b.call("Convolution", {"stride": "strides", "padding": "pads", "dilation": "dilations",
                           "groups": "groups", "weight": "filter"},
           input=_nchw_input(b, "x", last), weight=_filter(b, last),
           bias=b.x("bias") if b.has("bias") else None, stride=list(_hw(b, "strides", last)),
           padding=[pads[0], pads[2]], dilation=list(_hw(b, "dilations", last)),
           transposed=False, outputPadding=None, groups=b.attr("groups"),
           output=_nchw_output(b, "y", last), cubeMathType=0)
    _nhwc_inferred(b, "y", last)


def _pool_pads(b: _Lowering, mode: str, kernel: tuple[int, int], stride: tuple[int, int],
               last: bool, mode_attr: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for ``mode``: SAME pads as TensorFlow (the extra row or
    column at the end), VALID none, CALCULATED the ``pads`` attribute."""
    if mode == "VALID":
        return 0, 0, 0, 0
    if mode == "CALCULATED":
        pads = list(b.attr("pads"))
        if len(pads) != 4:
            raise b.fail_attr("pads", "expected 4 values: top, bottom, left, right")
        return tuple(pads)  # type: ignore[return-value]
    if mode != "SAME":
        raise b.fail_attr(mode_attr, "expected SAME or VALID" if mode_attr == "padding"
                          else f"expected one of {list(V2_PADDING_MODES)}")
    shape = b.shape("x")
    sizes = shape[1:3] if last else shape[2:4]
    pads = []
    for size, k, s in zip(sizes, kernel, stride, strict=True):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    return tuple(pads)  # type: ignore[return-value]


def _pool(kind: str, v2: bool) -> Callable[[_Lowering], None]:
    """MaxPool / AvgPool (TensorFlow's: padding SAME or VALID, NHWC by default) and their
    V3 / V2 forms (padding_mode, pads, global_pooling, ceil_mode...), on aclnnMaxPool /
    aclnnAvgPool2d."""
    def lower(b: _Lowering) -> None:
        last = _channels_last(b)
        kernel, stride = _hw(b, "ksize", last), _hw(b, "strides", last)
        ceil = bool(b.attrs.get("ceil_mode", False))
        mode_attr = "padding_mode" if v2 else "padding"
        if v2 and b.attr("global_pooling"):
            shape = b.shape("x")
            kernel, stride, pads = (tuple(shape[1:3] if last else shape[2:4]), (1, 1),
                                    (0, 0, 0, 0))
        else:
            pads = _pool_pads(b, b.attr(mode_attr), kernel, stride, last, mode_attr)
        top, bottom, left, right = pads
        x, y = _nchw_input(b, "x", last), _nchw_output(b, "y", last)
        if kind == "max":
            b.call("MaxPool", {"kernelShape": "ksize", "strides": "strides", "pads": "pads"},
                   self=x, kernelShape=list(kernel), strides=list(stride), autoPad=0,
                   pads=[top, left, bottom, right], dilations=[1, 1], ceilMode=int(ceil),
                   out=y)
        else:
            if top != bottom or left != right:
                raise b.fail_attr(mode_attr, f"gives pads {list(pads)}; only symmetric "
                                             f"padding is supported for average pooling")
            # exclusive (V2) and TensorFlow's AvgPool leave padding out of the count
            include = not b.attr("exclusive") if v2 else False
            b.call("AvgPool2d", {"kernelSize": "ksize", "strides": "strides",
                                 "paddings": "pads", "divisorOverride": "divisor_override"},
                   self=x, kernelSize=list(kernel), strides=list(stride),
                   paddings=[top, left], ceilMode=ceil, countIncludePad=include,
                   divisorOverride=b.attr("divisor_override") if v2 else 0, cubeMathType=0,
                   out=y)
        _nhwc_inferred(b, "y", last)
    return lower


def _batch_norm(b: _Lowering) -> None:
    """BatchNorm for inference (is_training false): y normalized with mean and variance;
    batch_mean / batch_variance and reserve_space_1 / _2 are copies of them, reserve_space_3
    is zeros (our choice: CANN leaves its reserve spaces unspecified)."""
    last = _channels_last(b)
    if b.attr("is_training"):
        raise b.fail_attr("is_training", "only inference (false) is supported here")
    for name in ("mean", "variance"):
        if not b.has(name):
            raise b.fail_input(name, "is required when is_training is false")
    b.call("BatchNorm", {"weight": "scale", "bias": "offset", "runningMean": "mean",
                         "runningVar": "variance", "eps": "epsilon"},
           input=_nchw_input(b, "x", last), weight=b.x("scale"), bias=b.x("offset"),
           runningMean=b.x("mean"), runningVar=b.x("variance"), training=False,
           momentum=0.0, eps=b.attr("epsilon"), output=_nchw_output(b, "y", last),
           saveMean=None, saveInvstd=None)
    _nhwc_inferred(b, "y", last)
    for source, outputs in (("mean", ("batch_mean", "reserve_space_1")),
                            ("variance", ("batch_variance", "reserve_space_2"))):
        for name in outputs:
            b.call("Cast", {"self": source}, self=b.x(source),
                   dtype=b.operand(source).data_type, out=b.y(name))
    if b.infer:
        b.inferred["reserve_space_3"] = (b.shape("mean"), b.operand("mean").data_type)
    else:
        b.call("InplaceZero", selfRef=b.y("reserve_space_3"))


def _resize_bilinear(b: _Lowering) -> None:
    """ResizeBilinearV2 on aclnnUpsampleBilinear2d: align_corners, or half_pixel_centers
    (torch's align_corners=False); x's desc format says NCHW or NHWC (ND: NHWC)."""
    last = _channels_last(b, attr=None)
    size = list(b.values["size"])
    if len(size) != SPATIAL or min(size) <= 0:
        raise b.fail_input("size", f"must hold two positive values (height, width), not "
                                   f"{size}")
    align, half_pixel = b.attr("align_corners"), b.attr("half_pixel_centers")
    if align and half_pixel:
        raise b.fail_attr("half_pixel_centers", "must be false when align_corners is true")
    if not align and not half_pixel:
        raise b.fail_attr("half_pixel_centers", "false with align_corners false (the legacy "
                                                "TensorFlow mapping) is not supported; set "
                                                "one of them")
    b.only_default("scales")
    wanted = dtypes.to_data_type(b.attr("dtype"), "dtype")
    if not b.infer and b.outputs["y"].data_type != wanted:
        raise b.fail_output("y", f"dtype {b.outputs['y'].data_type.name} differs from the "
                                 f"dtype attribute {wanted.name}")
    b.infer_dtypes["y"] = wanted
    b.call("UpsampleBilinear2d", {"outputSize": "size", "alignCorners": "align_corners"},
           self=_nchw_input(b, "x", last), outputSize=size, alignCorners=bool(align),
           scalesH=0.0, scalesW=0.0, out=_nchw_output(b, "y", last))
    _nhwc_inferred(b, "y", last)


POOLING_MODES = {0: "max", 1: "avg"}  # Pooling's mode attribute
POOLING_CEIL, POOLING_FLOOR = 0, 1  # Pooling's ceil_mode attribute (0 is ceil, Caffe's)


def _pooling(b: _Lowering) -> None:
    """Pooling (Caffe's): mode 0 max / 1 avg, window and stride as (H, W), pad as [top,
    bottom, left, right], ceil_mode 0 ceil / 1 floor; average pooling counts the padding
    (Caffe's divisor). On aclnnMaxPool / aclnnAvgPool2d."""
    last = _channels_last(b)
    mode = POOLING_MODES.get(b.attr("mode"))
    if mode is None:
        raise b.fail_attr("mode", "expected 0 (max) or 1 (avg)")
    if b.attr("ceil_mode") not in (POOLING_CEIL, POOLING_FLOOR):
        raise b.fail_attr("ceil_mode", "expected 0 (ceil) or 1 (floor)")
    if any(d != 1 for d in b.attr("dilation")):
        raise b.fail_attr("dilation", "only 1 (no dilation) is supported")
    if b.attr("global_pooling"):
        shape = b.shape("x")
        kernel, stride, pads = list(shape[1:3] if last else shape[2:4]), [1, 1], [0, 0, 0, 0]
    else:
        kernel, stride, pads = list(b.attr("window")), list(b.attr("stride")), \
            list(b.attr("pad"))
        for name, value, count in (("window", kernel, SPATIAL), ("stride", stride, SPATIAL),
                                   ("pad", pads, 4)):
            if len(value) != count:
                raise b.fail_attr(name, f"expected {count} values")
    top, bottom, left, right = pads
    ceil = b.attr("ceil_mode") == POOLING_CEIL
    x, y = _nchw_input(b, "x", last), _nchw_output(b, "y", last)
    names = {"kernelShape": "window", "kernelSize": "window", "strides": "stride",
             "pads": "pad", "paddings": "pad"}
    if mode == "max":
        b.call("MaxPool", names, self=x, kernelShape=kernel, strides=stride, autoPad=0,
               pads=[top, left, bottom, right], dilations=[1, 1], ceilMode=int(ceil), out=y)
    else:
        if top != bottom or left != right:
            raise b.fail_attr("pad", "only symmetric padding is supported for average "
                                     "pooling")
        b.call("AvgPool2d", names, self=x, kernelSize=kernel, strides=stride,
               paddings=[top, left], ceilMode=ceil, countIncludePad=True, divisorOverride=0,
               cubeMathType=0, out=y)
    _nhwc_inferred(b, "y", last)


def _conv2d_backprop_input(b: _Lowering) -> None:
    """Conv2DBackpropInput: the gradient of Conv2D with respect to its input, a transposed
    convolution (aclnnConvolution with transposed) of out_backprop by Conv2D's filter, to
    the input_size (data_format order) that Conv2D's input had."""
    last = _channels_last(b, "out_backprop")
    size = list(b.values["input_size"])
    if len(size) != 4:
        raise b.fail_input("input_size", f"must hold 4 values in data_format order, not "
                                         f"{size}")
    height, width = (size[1], size[2]) if last else (size[2], size[3])
    pads = list(b.attr("pads"))
    if len(pads) != 4:
        raise b.fail_attr("pads", "expected 4 values: top, bottom, left, right")
    stride, dilation = _hw(b, "strides", last), _hw(b, "dilations", last)
    weight = _filter(b, last)
    kernel = [b.shape("filter")[k] for k in _filter_order(b, last)[2:]]
    dy = b.shape("out_backprop")
    grad = (dy[1], dy[2]) if last else (dy[2], dy[3])
    padding = []
    for axis, (want, have, s, d, k, (begin, end)) in enumerate(zip(
            (height, width), grad, stride, dilation, kernel,
            ((pads[0], pads[1]), (pads[2], pads[3])), strict=True)):
        extra = want - ((have - 1) * s + d * (k - 1) + 1 - begin - end)
        if not 0 <= extra < max(s, d):
            raise b.fail_input("input_size", f"{'HW'[axis]} = {want} cannot be the input of "
                                             f"a Conv2D giving out_backprop's {have} "
                                             f"(kernel {k}, stride {s}, pads {begin}, {end})")
        padding.append(extra)
    b.call("Convolution", {"stride": "strides", "padding": "pads", "dilation": "dilations",
                           "groups": "groups", "weight": "filter", "input": "out_backprop",
                           "outputPadding": "input_size"},
           input=_nchw_input(b, "out_backprop", last), weight=weight, bias=None,
           stride=list(stride), padding=pads, dilation=list(dilation), transposed=True,
           outputPadding=padding, groups=b.attr("groups"), output=_nchw_output(b, "y", last),
           cubeMathType=0)
    _nhwc_inferred(b, "y", last)


def _tile(from_input: bool) -> Callable[[_Lowering], None]:
    """Tile / TileD: y repeats x ``multiples`` times along each dim (a leading multiple per
    extra dim adds one); an aclnnExpand of x viewed as (1, d0, 1, d1...) into y viewed as
    (m0, d0, m1, d1...), the same bytes as y's (m0 * d0, m1 * d1...)."""
    def lower(b: _Lowering) -> None:
        multiples = list(b.values["multiples"] if from_input else b.attr("multiples"))
        fail = b.fail_input if from_input else b.fail_attr
        dims = list(b.shape("x"))
        if len(multiples) < len(dims) or min(multiples, default=1) < 0:
            raise fail("multiples", f"needs one value >= 0 per dim of x {dims}")
        dims = [1] * (len(multiples) - len(dims)) + dims
        tiled = [m * d for m, d in zip(multiples, dims, strict=True)]
        if b.infer:
            b.inferred["y"] = (tuple(tiled), b.operand("x").data_type)
            return
        pairs = [v for m, d in zip(multiples, dims, strict=True) for v in (m, d)]
        source = [v for s in contiguous_strides(dims) for v in (0, s)]
        b.call("Expand", {"size": "multiples"},
               self=b.view("x", [v if k % 2 else 1 for k, v in enumerate(pairs)], source),
               size=pairs, out=b.view_output("y", pairs, contiguous_strides(pairs)))
    return lower


def _gather_v2(b: _Lowering) -> None:
    """GatherV2 (batch_dims 0): y = x's slices at indices along axis, shaped
    x[:axis] + indices + x[axis + 1:]; an aclnnIndexSelect of the flattened indices."""
    b.only_default("batch_dims", "is_preprocessed", "negative_index_support")
    values = b.values["axis"]
    if len(values) != 1:
        raise b.fail_input("axis", f"must hold one value, not {list(values)}")
    shape = b.shape("x")
    axis = b.axis("axis", values[0], len(shape), input_name=True)
    indices = b.shape("indices")
    count = math.prod(indices)
    result = (*shape[:axis], *indices, *shape[axis + 1:])
    if b.infer:
        b.inferred["y"] = (result, b.operand("x").data_type)
        return
    flat = (*shape[:axis], count, *shape[axis + 1:])
    b.call("IndexSelect", {"dim": "axis", "index": "indices"}, self=b.x("x"), dim=axis,
           index=b.view("indices", [count]),
           out=b.view_output("y", flat, contiguous_strides(flat)))


def _hard_sigmoid(b: _Lowering) -> None:
    b.only_default("alpha", "beta")  # aclnnHardsigmoid is x / 6 + 1 / 2, clamped
    b.call("Hardsigmoid", self=b.x("input_x"), out=b.y("output_y"))


def _relu6(b: _Lowering) -> None:
    b.call("Clamp", self=b.x("x"), clipValueMin=b.scalar(0.0), clipValueMax=b.scalar(6.0),
           out=b.y("y"))


def _roll(b: _Lowering) -> None:
    b.call("Roll", {"x": "x"}, x=b.x("x"), shifts=list(b.attr("shifts")),
           dims=list(b.attr("dims")), out=b.y("y"))


# -- the table: names verified against CANN's REG_OP definitions (see the module docstring) ----
def _attr(name: str, kind: str, default: Any = REQUIRED) -> AttrDef:
    return AttrDef(name, kind, default)


_EXP_LOG_ATTRS = (_attr("base", "float", -1.0), _attr("scale", "float", 1.0),
                  _attr("shift", "float", 0.0))
_KEEP = _attr("keep_dims", "bool", False)

for _name, _aclnn in (("Add", "Add"), ("AddV2", "Add"), ("Sub", "Sub"), ("Mul", "Mul"),
                      ("Maximum", "Maximum"), ("Minimum", "Minimum"),
                      ("Less", "LtTensor"), ("Greater", "GtTensor"), ("Equal", "EqTensor"),
                      ("LessEqual", "LeTensor"), ("GreaterEqual", "GeTensor"),
                      ("NotEqual", "NeTensor"), ("LogicalAnd", "LogicalAnd"),
                      ("LogicalOr", "LogicalOr"), ("FloorMod", "RemainderTensorTensor"),
                      ("Mod", "FmodTensor")):
    _define(_name, "x1 x2", "y", _binary(_aclnn))
_define("FloorDiv", "x1 x2", "y", _binary("DivMod", mode=2))
_define("RealDiv", "x1 x2", "y", _div)
_define("Div", "x1 x2", "y", _div)
_define("Pow", "x exponent", "y", _pow)
for _name, _aclnn in (("Neg", "Neg"), ("Abs", "Abs"), ("Sqrt", "Sqrt"), ("Rsqrt", "Rsqrt"),
                      ("Reciprocal", "Reciprocal"), ("Tanh", "Tanh"), ("Sigmoid", "Sigmoid"),
                      ("Relu", "Relu"), ("Gelu", "Gelu"), ("Erf", "Erf"), ("Sin", "Sin"),
                      ("Cos", "Cos"), ("Floor", "Floor"), ("Ceil", "Ceil"), ("Sign", "Sign"),
                      ("Mish", "Mish"),
                      ("LogicalNot", "LogicalNot")):
    _define(_name, "x", "y", _unary(_aclnn))
_define("Exp", "x", "y", _exp_log("Exp"), _EXP_LOG_ATTRS)
_define("Log", "x", "y", _exp_log("Log"), _EXP_LOG_ATTRS)
_define("Round", "x", "y", _round, (_attr("decimals", "int", 0),))
_define("Square", "x", "y", _square)
_define("Softplus", "x", "y", _softplus)
_define("LeakyRelu", "x", "y", _scalar_attrs("LeakyRelu", negativeSlope="negative_slope"),
        (_attr("negative_slope", "float", 0.0),))
_define("Elu", "x", "y", _scalar_attrs("Elu", alpha="alpha", scale="scale",
                                       inputScale="input_scale"),
        (_attr("alpha", "float", 1.0), _attr("scale", "float", 1.0),
         _attr("input_scale", "float", 1.0)))
_define("ClipByValue", "x clip_value_min clip_value_max", "y", _clip)
_define("MatMul", "x1 x2 bias?", "y", _matmul("transpose_x1", "transpose_x2", False),
        (_attr("transpose_x1", "bool", False), _attr("transpose_x2", "bool", False)))
_define("MatMulV2", "x1 x2 bias? offset_w?", "y",
        _matmul("transpose_x1", "transpose_x2", False),
        (_attr("transpose_x1", "bool", False), _attr("transpose_x2", "bool", False),
         _attr("offset_x", "int", 0)))
_define("BatchMatMul", "x1 x2", "y", _matmul("adj_x1", "adj_x2", True),
        (_attr("adj_x1", "bool", False), _attr("adj_x2", "bool", False)))
_define("BatchMatMulV2", "x1 x2 bias? offset_w?", "y", _matmul("adj_x1", "adj_x2", True),
        (_attr("adj_x1", "bool", False), _attr("adj_x2", "bool", False),
         _attr("offset_x", "int", 0)))
_define("SoftmaxV2", "x", "y", _softmax("Softmax", "x", "y"),
        (_attr("axes", "list_int", [-1]), _attr("half_to_float", "bool", False)))
_define("LogSoftmaxV2", "logits", "logsoftmax", _softmax("LogSoftmax", "logits", "logsoftmax"),
        (_attr("axes", "list_int", [-1]),))
_define("LayerNorm", "x gamma beta", "y mean variance", _layer_norm,
        (_attr("begin_norm_axis", "int", 0), _attr("begin_params_axis", "int", 0),
         _attr("epsilon", "float", 1e-7)))
_define("Cast", "x", "y", _cast, (_attr("dst_type", "int"),))
_define("Slice", "x offsets size", "y", _slice_from("offsets", "size", True),
        values="offsets size")
_define("SliceD", "x", "y", _slice_from("offsets", "size", False),
        (_attr("offsets", "list_int"), _attr("size", "list_int")))
_define("ConcatD", "x*", "y", _concat(False),
        (_attr("concat_dim", "int"), _attr("N", "int", 1)))
_define("ConcatV2D", "x*", "y", _concat(False),
        (_attr("concat_dim", "int"), _attr("N", "int", 1)))
_define("ConcatV2", "x* concat_dim", "y", _concat(True), (_attr("N", "int", 1),),
        values="concat_dim")
_define("Concat", "concat_dim x*", "y", _concat(True), (_attr("N", "int", 1),),
        values="concat_dim")
_define("Transpose", "x perm", "y", _transpose(True), values="perm")
_define("TransposeD", "x", "y", _transpose(False), (_attr("perm", "list_int"),))
for _kind in ("Sum", "Max", "Min"):
    _define(f"Reduce{_kind}D", "x", "y", _reduce(_kind, False),
            (_attr("axes", "list_int"), _KEEP))
_define("ReduceMeanD", "x", "y", _reduce("Mean", False),
        (_attr("axes", "list_int"), _KEEP, _attr("noop_with_empty_axes", "bool", False)))
for _kind in ("Sum", "Mean", "Max", "Min"):
    _define(f"Reduce{_kind}", "x axes", "y", _reduce(_kind, True),
            (_KEEP, _attr("noop_with_empty_axes", "bool", True)), values="axes")
for _kind in ("All", "Any"):
    _define(f"Reduce{_kind}", "x axes", "y", _reduce(_kind, True), (_KEEP,), values="axes")
_define("ArgMaxD", "x", "y", _arg_extremum("ArgMax", False),
        (_attr("dimension", "int"), _attr("dtype", "type", DataType.ACL_INT64)))
_define("ArgMaxV2", "x dimension", "y", _arg_extremum("ArgMax", True),
        (_attr("dtype", "type", DataType.ACL_INT64),), values="dimension")
_define("ArgMin", "x dimension", "y", _arg_extremum("ArgMin", True),
        (_attr("dtype", "type", DataType.ACL_INT64),), values="dimension")
_define("Select", "condition x1 x2", "y", _select("condition", "x1", "x2", "y"))
_define("SelectV2", "condition then else", "result",
        _select("condition", "then", "else", "result"))
_define("Fill", "dims value", "y", _fill, values="dims")
_define("ZerosLike", "x", "y", _zeros_like, rule=_like_rule)
_define("OnesLike", "x", "y", _ones_like, rule=_like_rule)
_define("ExpandD", "x", "y", _expand(False), (_attr("shape", "list_int"),))
_define("Expand", "x shape", "y", _expand(True), values="shape")
_define("BroadcastTo", "x shape", "y", _expand(True), values="shape")
_define("Identity", "x", "y", _identity)
_define("Reshape", "x shape", "y", _reshape,
        (_attr("axis", "int", 0), _attr("num_axes", "int", -1)), values="shape")
_define("Squeeze", "x", "y", _squeeze, (_attr("axis", "list_int", []),))
_define("Unsqueeze", "x", "y", _unsqueeze, (_attr("axes", "list_int", []),))
_define("OneHot", "x depth on_value off_value", "y", _one_hot, (_attr("axis", "int", -1),),
        values="depth")
_define("Cumsum", "x axis", "y", _cumsum,
        (_attr("exclusive", "bool", False), _attr("reverse", "bool", False)), values="axis")
_define("Conv2D", "x filter bias? offset_w?", "y", _conv2d,
        (_attr("strides", "list_int"), _attr("pads", "list_int"),
         _attr("dilations", "list_int", [1, 1, 1, 1]), _attr("groups", "int", 1),
         _attr("data_format", "str", "NHWC"), _attr("offset_x", "int", 0)))
_TF_POOL_ATTRS = (_attr("ksize", "list_int"), _attr("strides", "list_int"),
                  _attr("padding", "str"), _attr("data_format", "str", "NHWC"))
_V2_POOL_ATTRS = (_attr("ksize", "list_int"), _attr("strides", "list_int"),
                  _attr("padding_mode", "str", "CALCULATED"),
                  _attr("pads", "list_int", [0, 0, 0, 0]), _attr("data_format", "str", "NCHW"),
                  _attr("global_pooling", "bool", False), _attr("ceil_mode", "bool", False))
_define("MaxPool", "x", "y", _pool("max", False), _TF_POOL_ATTRS)
_define("MaxPoolV3", "x", "y", _pool("max", True), _V2_POOL_ATTRS)
_define("AvgPool", "x", "y", _pool("avg", False), _TF_POOL_ATTRS)
_define("AvgPoolV2", "x", "y", _pool("avg", True),
        (*_V2_POOL_ATTRS, _attr("exclusive", "bool", True),
         _attr("divisor_override", "int", 0)))
_define("BatchNorm", "x scale offset mean? variance?",
        "y batch_mean batch_variance reserve_space_1 reserve_space_2 reserve_space_3",
        _batch_norm, (_attr("epsilon", "float", 1e-4), _attr("data_format", "str", "NHWC"),
                      _attr("is_training", "bool", True),
                      _attr("exponential_avg_factor", "float", 1.0)))
_define("ResizeBilinearV2", "x size", "y", _resize_bilinear,
        (_attr("align_corners", "bool", False), _attr("half_pixel_centers", "bool", False),
         _attr("dtype", "type", DataType.ACL_FLOAT), _attr("scales", "list_float", [0.0, 0.0])),
        values="size")
for _name, _aclnn in (("Acos", "Acos"), ("Asin", "Asin"), ("Atan", "Atan"),
                      ("Acosh", "Acosh"), ("Asinh", "Asinh"), ("Atanh", "Atanh"),
                      ("Cosh", "Cosh"), ("Sinh", "Sinh"), ("Tan", "Tan"),
                      ("HardSwish", "Hardswish"), ("Invert", "BitwiseNot")):
    _define(_name, "x", "y", _unary(_aclnn))
for _name, _aclnn in (("BitwiseAnd", "BitwiseAndTensor"), ("BitwiseOr", "BitwiseOrTensor"),
                      ("BitwiseXor", "BitwiseXorTensor")):
    _define(_name, "x1 x2", "y", _binary(_aclnn))
_define("Relu6", "x", "y", _relu6)
_define("HardSigmoid", "input_x", "output_y", _hard_sigmoid,
        (_attr("alpha", "float", 0.16666666), _attr("beta", "float", 0.5)))
_define("Roll", "x", "y", _roll, (_attr("shifts", "list_int"), _attr("dims", "list_int", [])))
_define("TileD", "x", "y", _tile(False), (_attr("multiples", "list_int"),))
_define("Tile", "x multiples", "y", _tile(True), values="multiples")
_define("GatherV2", "x indices axis", "y", _gather_v2,
        (_attr("batch_dims", "int", 0), _attr("is_preprocessed", "bool", False),
         _attr("negative_index_support", "bool", False)), values="axis")
_define("Pooling", "x", "y", _pooling,
        (_attr("mode", "int", 0), _attr("global_pooling", "bool", False),
         _attr("window", "list_int", [1, 1]), _attr("stride", "list_int", [1, 1]),
         _attr("pad", "list_int", [0, 0, 0, 0]), _attr("dilation", "list_int", [1, 1, 1, 1]),
         _attr("ceil_mode", "int", 0), _attr("data_format", "str", "NCHW")))
_define("Conv2DBackpropInput", "input_size filter out_backprop", "y", _conv2d_backprop_input,
        (_attr("strides", "list_int"), _attr("pads", "list_int"),
         _attr("dilations", "list_int", [1, 1, 1, 1]), _attr("groups", "int", 1),
         _attr("data_format", "str", "NHWC")), values="input_size")
del _name, _aclnn, _kind

from openacl.aclop import types_extra, types_more  # noqa: E402, F401  (define their op types)


# -- finding an op type ------------------------------------------------------------------------
def _spec(op_type: Any) -> OpType:
    if not isinstance(op_type, str) or not op_type:
        raise _bad("opType", op_type, "expected a non-empty op type name")
    spec = OP_TYPES.get(op_type) or _custom_spec(op_type)
    if spec is None:
        near = near_op_types(op_type)
        hint = f"; near it: {', '.join(near)}" if near else ""
        raise AclError(ACL_ERROR_OP_NOT_FOUND,
                       f"op type '{op_type}' is not a single operator OpenACL can run "
                       f"({len(OP_TYPES)} are: see openacl.op.OP_TYPES){hint}")
    return spec


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, 1):
        current = [i]
        for j, right in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (left != right)))
        previous = current
    return previous[-1]


def near_op_types(op_type: str) -> list[str]:
    """Op types close to ``op_type``, closest first: the same name in another case, names
    within ``max(NEAR_EDITS, len // NEAR_EDIT_RATIO)`` edits (case ignored), and names one
    is a prefix of (``Softmax`` / ``SoftmaxV2``); never merely similar-looking ones."""
    wanted = op_type.lower()
    limit = max(NEAR_EDITS, len(wanted) // NEAR_EDIT_RATIO)
    scored = []
    for name in OP_TYPES:
        other = name.lower()
        distance = _edit_distance(wanted, other)
        prefix = min(len(wanted), len(other)) >= NEAR_PREFIX and \
            (other.startswith(wanted) or wanted.startswith(other))
        if distance <= limit or prefix:
            scored.append((distance, name))
    return [name for _, name in sorted(scored)[:SUGGESTIONS]]


def _custom_spec(op_type: str) -> OpType | None:
    """A registered custom operator run by name: its declaration is its IR, and its aclnn
    operator (same name, same argument names) computes it."""
    definition = REGISTRY.get(op_type)
    declaration = getattr(definition, "ir", None)
    if declaration is None:
        return None
    suffix = {"optional": "?", "dynamic": "*"}
    inputs = tuple(p.name + suffix.get(p.kind, "") for p in declaration.inputs)
    outputs = tuple(p.name for p in declaration.outputs)
    attrs = tuple(AttrDef(a.name, CUSTOM_ATTR_KINDS[a.kind],
                          REQUIRED if a.required else a.default) for a in declaration.attrs)

    def lower(b: _Lowering) -> None:
        raw: dict[str, Any] = {}
        for param in declaration.inputs:
            if param.kind == "dynamic":
                raw[param.name] = b.xs(param.name)
            elif b.has(param.name):
                raw[param.name] = b.x(param.name)
        raw.update({a.name: b.attr(a.name) for a in declaration.attrs})
        raw.update({name: b.y(name) for name in outputs})
        b.call(op_type, **raw)

    return OpType(op_type, inputs, outputs, attrs, lower)
