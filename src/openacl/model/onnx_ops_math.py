"""ONNX lowerings of the remaining math and indexing ops that map onto one or a few aclnn
operators: variadic Sum/Mean, Mod, Round, the parameterised activations (Elu, Selu,
Softplus, Softsign, Mish, PRelu), Trilu, CumSum, ArgMax/ArgMin,
TopK, Split, IsNaN and IsInf (Einsum is in onnx_ops_einsum.py, GatherElements in
onnx_ops_index.py).

Semantics follow the ONNX operator specification; each lowering refuses what it does not
implement with ``unsupported`` (naming the node, the op and the attribute or input). ONNX's
backend node tests check every one of them (tests/test_onnx_node.py).
"""

from __future__ import annotations

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, RefList, Scalar, lowering, unsupported
from openacl.model.onnx_ops import _cast_to, _constant_input, _only, _wrap_negative


def _axis(node: Node, b: Builder, name: str = "axis", default: int = 0) -> int:
    rank = len(b.value(node.inputs[0]).shape)
    axis = int(node.attrs.get(name, default))
    return axis + rank if axis < 0 else axis


# -- variadic and binary arithmetic --------------------------------------------------------------
@lowering("Sum", "Mean")
def variadic(node: Node, b: Builder) -> None:
    """Sum / Mean of one or more broadcast inputs: a chain of Adds (then a division)."""
    _only(node)
    out = node.outputs[0]
    dtype = b.value(out).dtype
    if len(node.inputs) == 1:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(node.inputs[0]))
    else:
        total = node.inputs[0]
        for index, name in enumerate(node.inputs[1:]):
            last = index == len(node.inputs) - 2
            target = out if last else b.temp(np.broadcast_shapes(
                b.value(total).shape, b.value(name).shape), dtype)
            b.call("Add", self=Ref(total), other=Ref(name), alpha=None, out=Ref(target))
            total = target
    if node.op_type == "Mean" and len(node.inputs) > 1:
        b.call("InplaceDivs", selfRef=Ref(out), other=Scalar(len(node.inputs), dtype.name))


@lowering("Mod")
def mod(node: Node, b: Builder) -> None:
    """``fmod=0``: the remainder has the divisor's sign (Python's %); ``fmod=1``: the
    dividend's (C's fmod)."""
    _only(node, "fmod")
    op = "FmodTensor" if int(node.attrs.get("fmod", 0)) else "RemainderTensorTensor"
    if op == "RemainderTensorTensor" and np.issubdtype(b.value(node.outputs[0]).dtype,
                                                       np.floating):
        raise unsupported(node, "fmod=0 on floating-point inputs (ONNX requires fmod=1)")
    b.call(op, self=Ref(node.inputs[0]), other=Ref(node.inputs[1]), out=Ref(node.outputs[0]))


@lowering("IsNaN")
def is_nan(node: Node, b: Builder) -> None:
    """NaN is the one value not equal to itself."""
    _only(node)
    b.call("NeTensor", self=Ref(node.inputs[0]), other=Ref(node.inputs[0]),
           out=Ref(node.outputs[0]))


@lowering("IsInf")
def is_inf(node: Node, b: Builder) -> None:
    _only(node, "detect_negative", "detect_positive")
    negative = int(node.attrs.get("detect_negative", 1))
    positive = int(node.attrs.get("detect_positive", 1))
    x, out = node.inputs[0], node.outputs[0]
    if negative and positive:
        b.call("IsInf", x=Ref(x), out=Ref(out))
        return
    dtype = b.value(x).dtype.name
    # detecting neither sign: all false, as NaN equals nothing
    target = float("inf") if positive else float("-inf") if negative else float("nan")
    b.call("EqScalar", self=Ref(x), other=Scalar(target, dtype), out=Ref(out))


# -- activations with parameters ---------------------------------------------------------------
def _unary_scalars(node: Node, b: Builder, op: str, **scalars: float) -> None:
    dtype = b.value(node.outputs[0]).dtype.name
    b.call(op, self=Ref(node.inputs[0]),
           **{name: Scalar(value, dtype) for name, value in scalars.items()},
           out=Ref(node.outputs[0]))


@lowering("Elu")
def elu(node: Node, b: Builder) -> None:
    _only(node, "alpha")
    _unary_scalars(node, b, "Elu", alpha=float(node.attrs.get("alpha", 1.0)), scale=1.0,
                   inputScale=1.0)


SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875  # ONNX defaults


@lowering("Selu")
def selu(node: Node, b: Builder) -> None:
    """gamma * (x if x > 0 else alpha * (exp(x) - 1)): Elu with scale gamma."""
    _only(node, "alpha", "gamma")
    _unary_scalars(node, b, "Elu", alpha=float(node.attrs.get("alpha", SELU_ALPHA)),
                   scale=float(node.attrs.get("gamma", SELU_GAMMA)), inputScale=1.0)


@lowering("Softplus")
def softplus(node: Node, b: Builder) -> None:
    """log(1 + exp(x)); aclnn's threshold form returns x past the threshold, where the two
    agree to the last bit (float32's exp(20) dwarfs 1)."""
    _only(node)
    _unary_scalars(node, b, "Softplus", beta=1.0, threshold=20.0)


@lowering("Softsign")
def softsign(node: Node, b: Builder) -> None:
    """x / (1 + |x|)."""
    _only(node)
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    denominator = b.temp(value.shape, value.dtype)
    b.call("Abs", self=Ref(x), out=Ref(denominator))
    b.call("InplaceAdds", selfRef=Ref(denominator), other=Scalar(1.0, value.dtype.name),
           alpha=None)
    b.call("Div", self=Ref(x), other=Ref(denominator), out=Ref(out))


@lowering("PRelu")
def prelu(node: Node, b: Builder) -> None:
    """x where x > 0, else slope * x, the slope broadcast (unidirectionally) against x:
    max(x, 0) + slope * min(x, 0)."""
    _only(node)
    x, slope, out = node.inputs[0], node.inputs[1], node.outputs[0]
    value = b.value(x)
    positive, negative = b.temp(value.shape, value.dtype), b.temp(value.shape, value.dtype)
    b.call("ClampMin", self=Ref(x), clipValueMin=Scalar(0, value.dtype.name),
           out=Ref(positive))
    b.call("ClampMax", self=Ref(x), clipValueMax=Scalar(0, value.dtype.name),
           out=Ref(negative))
    b.call("InplaceMul", selfRef=Ref(negative), other=Ref(slope))
    b.call("Add", self=Ref(positive), other=Ref(negative), alpha=None, out=Ref(out))


# -- triangular, cumulative, arg reductions, top-k -------------------------------------------
@lowering("Trilu")
def trilu(node: Node, b: Builder) -> None:
    _only(node, "upper")
    k = 0
    if len(node.inputs) > 1 and node.inputs[1]:
        k = int(_constant_input(node, b, 1, "k").reshape(()))
    op = "Triu" if int(node.attrs.get("upper", 1)) else "Tril"
    b.call(op, self=Ref(node.inputs[0]), diagonal=k, out=Ref(node.outputs[0]))


@lowering("CumSum")
def cumsum(node: Node, b: Builder) -> None:
    """aclnnCumsum along ``axis``; ``reverse`` sums from the end (the input flipped, the
    sums flipped back), ``exclusive`` leaves each element out (the input shifted by one
    along the axis, a zero first: the same additions in the same order as ONNX's)."""
    _only(node, "exclusive", "reverse")
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    rank = len(value.shape)
    axis = int(_constant_input(node, b, 1, "axis").reshape(()))
    axis = axis + rank if axis < 0 else axis
    reverse, exclusive = (bool(int(node.attrs.get(n, 0))) for n in ("reverse", "exclusive"))
    source = x
    if reverse:
        source = b.temp(value.shape, value.dtype)
        b.call("Flip", self=Ref(x), dims=(axis,), out=Ref(source))
    if exclusive:
        shifted = b.temp(value.shape, value.dtype)
        pad = [0, 0] * rank  # ConstantPadNd's order: the last dim first
        pad[2 * (rank - 1 - axis)], pad[2 * (rank - 1 - axis) + 1] = 1, -1
        b.call("ConstantPadNd", self=Ref(source), pad=tuple(pad),
               value=Scalar(0, value.dtype.name), out=Ref(shifted))
        source = shifted
    sums = b.temp(b.value(out).shape, b.value(out).dtype) if reverse else out
    b.call("Cumsum", self=Ref(source), dim=axis, dtype=b.value(out).dtype, out=Ref(sums))
    if reverse:
        b.call("Flip", self=Ref(sums), dims=(axis,), out=Ref(out))


@lowering("ArgMax", "ArgMin")
def arg_extreme(node: Node, b: Builder) -> None:
    """The first index of the extreme (aclnn's, as ONNX's default); ``select_last_index``:
    the first in the input flipped along the axis, counted back from the end."""
    _only(node, "axis", "keepdims", "select_last_index")
    x, out, axis = node.inputs[0], node.outputs[0], _axis(node, b)
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if not int(node.attrs.get("select_last_index", 0)):
        b.call(node.op_type, self=Ref(x), dim=axis, keepdim=keep, out=Ref(out))
        return
    value = b.value(x)
    flipped = b.temp(value.shape, value.dtype)
    b.call("Flip", self=Ref(x), dims=(axis,), out=Ref(flipped))
    result = b.value(out)
    first = b.temp(result.shape, result.dtype)
    b.call(node.op_type, self=Ref(flipped), dim=axis, keepdim=keep, out=Ref(first))
    last = value.shape[axis] - 1
    b.call("Rsubs", self=Ref(first), other=Scalar(last, result.dtype.name),
           alpha=Scalar(1, result.dtype.name), out=Ref(out))


@lowering("TopK")
def top_k(node: Node, b: Builder) -> None:
    _only(node, "axis", "largest", "sorted")
    k = int(_constant_input(node, b, 1, "K").reshape(-1)[0])
    if not int(node.attrs.get("sorted", 1)):
        raise unsupported(node, "sorted=0")
    b.call("Topk", self=Ref(node.inputs[0]), k=k, dim=_axis(node, b, default=-1),
           largest=bool(int(node.attrs.get("largest", 1))), sorted=True,
           valuesOut=Ref(node.outputs[0]), indicesOut=Ref(node.outputs[1]))


# -- split ------------------------------------------------------------------------------------
@lowering("Split")
def split(node: Node, b: Builder) -> None:
    """Pieces along ``axis``: the sizes from the ``split`` input/attribute, else the output
    shapes (equal pieces, the last one smaller, or ``num_outputs`` of them)."""
    _only(node, "axis", "split", "num_outputs")
    axis = _axis(node, b)
    sizes = [b.value(name).shape[axis] for name in node.outputs]
    b.call("SplitWithSize", self=Ref(node.inputs[0]), splitSize=tuple(sizes), dim=axis,
           out=RefList(list(node.outputs)))


# -- bitwise, more activations -------------------------------------------------------------------
_BITWISE = {"BitwiseAnd": "BitwiseAndTensor", "BitwiseOr": "BitwiseOrTensor",
            "BitwiseXor": "BitwiseXorTensor"}


@lowering(*_BITWISE, "BitwiseNot")
def bitwise(node: Node, b: Builder) -> None:
    _only(node)
    if node.op_type == "BitwiseNot":
        b.call("BitwiseNot", self=Ref(node.inputs[0]), out=Ref(node.outputs[0]))
        return
    b.call(_BITWISE[node.op_type], self=Ref(node.inputs[0]), other=Ref(node.inputs[1]),
           out=Ref(node.outputs[0]))


@lowering("Celu")
def celu(node: Node, b: Builder) -> None:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): Elu with input scale 1 / alpha."""
    _only(node, "alpha")
    alpha = float(node.attrs.get("alpha", 1.0))
    _unary_scalars(node, b, "Elu", alpha=alpha, scale=1.0, inputScale=1.0 / alpha)


@lowering("ThresholdedRelu")
def thresholded_relu(node: Node, b: Builder) -> None:
    """x where x > alpha, else 0."""
    _only(node, "alpha")
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    keep = b.temp(value.shape, np.dtype(np.bool_))
    b.call("GtScalar", self=Ref(x), other=Scalar(float(node.attrs.get("alpha", 1.0)),
                                                  value.dtype.name), out=Ref(keep))
    zero = b.constant(np.zeros((), value.dtype), "zero")
    b.call("SWhere", condition=Ref(keep), self=Ref(x), other=Ref(zero), out=Ref(out))


# -- layout and gathers -------------------------------------------------------------------------
@lowering("DepthToSpace", "SpaceToDepth")
def depth_space(node: Node, b: Builder) -> None:
    """A reshape, a permute and a reshape (DCR / CRD orders as ONNX defines them)."""
    _only(node, "blocksize", "mode")
    x, out = node.inputs[0], node.outputs[0]
    n, c, h, w = b.value(x).shape
    block = int(node.attrs["blocksize"])
    dtype = b.value(x).dtype
    if node.op_type == "DepthToSpace":
        if node.attrs.get("mode", "DCR") == "DCR":
            split, dims = (n, block, block, c // block ** 2, h, w), (0, 3, 4, 1, 5, 2)
        else:
            split, dims = (n, c // block ** 2, block, block, h, w), (0, 1, 4, 2, 5, 3)
    else:
        split, dims = (n, c, h // block, block, w // block, block), (0, 3, 5, 1, 2, 4)
    viewed = b.temp(split, dtype)
    b.view(viewed, x)
    moved = b.temp(tuple(split[d] for d in dims), dtype)
    b.call("Permute", self=Ref(viewed), dims=dims, out=Ref(moved))
    b.view(out, moved)


@lowering("InstanceNormalization")
def instance_norm(node: Node, b: Builder) -> None:
    _only(node, "epsilon")
    x, scale, bias = node.inputs
    shape, dtype = b.value(x).shape, b.value(x).dtype
    if len(shape) != 4:
        raise unsupported(node, f"a {len(shape)}-d input (4-d only)")
    stats = (shape[0], shape[1], 1, 1)
    mean, variance = b.temp(stats, dtype), b.temp(stats, dtype)
    b.call("InstanceNorm", x=Ref(x), gamma=Ref(scale), beta=Ref(bias), dataFormat="NCHW",
           eps=float(node.attrs.get("epsilon", 1e-5)), y=Ref(node.outputs[0]),
           mean=Ref(mean), variance=Ref(variance))


@lowering("Hardmax")
def hardmax(node: Node, b: Builder) -> None:
    """1 at the first maximum along ``axis``, 0 elsewhere: OneHot of ArgMax."""
    _only(node, "axis")
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    axis = _axis(node, b, default=-1)
    index = b.temp(tuple(n for k, n in enumerate(value.shape) if k != axis),
                   np.dtype(np.int64))
    b.call("ArgMax", self=Ref(x), dim=axis, keepdim=False, out=Ref(index))
    on, off = (b.constant(np.array([v], value.dtype), name) for v, name in ((1, "on"),
                                                                          (0, "off")))
    b.call("OneHot", self=Ref(index), numClasses=value.shape[axis], onValue=Ref(on),
           offValue=Ref(off), axis=axis, out=Ref(out))


@lowering("Shrink")
def shrink(node: Node, b: Builder) -> None:
    """x + bias where x < -lambd, x - bias where x > lambd, else 0."""
    _only(node, "bias", "lambd")
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    bias, lambd = float(node.attrs.get("bias", 0.0)), float(node.attrs.get("lambd", 0.5))
    low, high = b.temp(value.shape, np.dtype(np.bool_)), b.temp(value.shape, np.dtype(np.bool_))
    b.call("LtScalar", self=Ref(x), other=Scalar(-lambd, "float64"), out=Ref(low))
    b.call("GtScalar", self=Ref(x), other=Scalar(lambd, "float64"), out=Ref(high))
    raised, lowered = b.temp(value.shape, value.dtype), b.temp(value.shape, value.dtype)
    b.call("Adds", self=Ref(x), other=Scalar(bias, "float64"), alpha=None, out=Ref(raised))
    b.call("Subs", self=Ref(x), other=Scalar(bias, "float64"), alpha=None, out=Ref(lowered))
    zero = b.constant(np.zeros((), value.dtype), "zero")
    upper = b.temp(value.shape, value.dtype)
    b.call("SWhere", condition=Ref(high), self=Ref(lowered), other=Ref(zero), out=Ref(upper))
    b.call("SWhere", condition=Ref(low), self=Ref(raised), other=Ref(upper), out=Ref(out))


@lowering("LpNormalization")
def lp_normalization(node: Node, b: Builder) -> None:
    """x / ||x||_p along ``axis`` (p 1 or 2)."""
    _only(node, "axis", "p")
    x, out = node.inputs[0], node.outputs[0]
    value, p = b.value(x), int(node.attrs.get("p", 2))
    if p not in (1, 2):
        raise unsupported(node, f"p={p}")
    axis = _axis(node, b, default=-1)
    magnitude = b.unary("Abs", x) if p == 1 else b.binary("Mul", x, x)
    norm = b.temp(tuple(1 if k == axis else n for k, n in enumerate(value.shape)), value.dtype)
    b.call("ReduceSum", self=Ref(magnitude), dims=(axis,), keepDims=True, dtype=value.dtype,
           out=Ref(norm))
    if p == 2:
        b.call("InplaceSqrt", selfRef=Ref(norm))
    # a zero vector stays zero (ONNX's reference), not 0 / 0
    floor = b.temp(b.value(norm).shape, value.dtype)
    b.call("ClampMin", self=Ref(norm),
           clipValueMin=Scalar(float(np.finfo(value.dtype).tiny), value.dtype.name),
           out=Ref(floor))
    b.call("Div", self=Ref(x), other=Ref(floor), out=Ref(out))


@lowering("EyeLike")
def eye_like(node: Node, b: Builder) -> None:
    """The identity of the input's 2-d shape (diagonal ``k``), in ``dtype`` (default the
    input's): a constant."""
    _only(node, "dtype", "k")
    from onnx import helper

    rows, columns = b.value(node.inputs[0]).shape
    dtype = b.value(node.outputs[0]).dtype if "dtype" not in node.attrs else np.dtype(
        helper.tensor_dtype_to_np_dtype(int(node.attrs["dtype"])))
    eye = b.constant(np.eye(rows, columns, int(node.attrs.get("k", 0)), dtype), "eye")
    b.call("InplaceCopy", selfRef=Ref(node.outputs[0]), src=Ref(eye))


@lowering("Tile")
def tile(node: Node, b: Builder) -> None:
    """x repeated ``repeats`` times per dim: x viewed with a 1 before every dim, expanded to
    the repeats, viewed back (constant repeats)."""
    _only(node)
    x, out = node.inputs[0], node.outputs[0]
    shape, dtype = b.value(x).shape, b.value(x).dtype
    repeats = [int(r) for r in _constant_input(node, b, 1, "repeats").reshape(-1)]
    if len(repeats) != len(shape) or min(repeats, default=1) < 0:
        raise unsupported(node, f"repeats {repeats} for a {len(shape)}-d input")
    spread = tuple(d for n in shape for d in (1, n))
    expanded = tuple(d for r, n in zip(repeats, shape, strict=True) for d in (r, n))
    if 0 in expanded:
        return  # an empty result: nothing to write
    if not shape:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(x))
        return
    viewed = b.temp(spread, dtype)
    b.view(viewed, x)
    wide = b.temp(expanded, dtype)
    b.call("Expand", self=Ref(viewed), size=expanded, out=Ref(wide))
    b.view(out, wide)


@lowering("OneHot")
def one_hot(node: Node, b: Builder) -> None:
    """``values[1]`` at each index's class along ``axis``, ``values[0]`` elsewhere; negative
    indices count from ``depth`` (constant depth and values)."""
    _only(node, "axis")
    indices, out = node.inputs[0], node.outputs[0]
    depth = int(_constant_input(node, b, 1, "depth").reshape(-1)[0])
    values = _constant_input(node, b, 2, "values").reshape(-1)
    dtype = b.value(out).dtype
    rank = len(b.value(out).shape)
    axis = int(node.attrs.get("axis", -1))
    wide = _cast_to(b, indices, np.dtype(np.int64))
    wrapped = _wrap_negative(b, wide, depth)
    off, on = (b.constant(np.array([v], dtype), name) for v, name in ((values[0], "off"),
                                                                      (values[1], "on")))
    b.call("OneHot", self=Ref(wrapped), numClasses=depth, onValue=Ref(on), offValue=Ref(off),
           axis=axis % rank if axis < 0 else axis, out=Ref(out))
