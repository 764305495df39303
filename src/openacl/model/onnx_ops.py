"""ONNX operators lowered onto aclnn operators (one ``@lowering`` per ONNX op type).

Semantics follow the ONNX operator specification; each lowering refuses (``unsupported``)
any attribute or input form it does not implement, naming the node, op and attribute.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from openacl.model.fusions import FUSED_MATMUL, SILU
from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, RefList, Scalar, lowering, unsupported
from openacl.model.onnx_rules import onnx_slice as _onnx_slice

KEEP_DTYPE = 0  # cubeMathType: compute in the tensors' dtype
# dtypes Cast converts between (float8 and 4-bit types are storage formats here: no kernel
# computes in them)
CASTABLE = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128)) | {
    np.dtype(ml_dtypes.bfloat16)}


def _only(node: Node, *known: str) -> None:
    """Refuse attributes this lowering does not implement."""
    for name in node.attrs:
        if name not in known:
            raise unsupported(node, f"attribute {name!r}")


# -- elementwise ---------------------------------------------------------------------------------
_BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Max": "Maximum",
           "Min": "Minimum", "Pow": "PowTensorTensor", "Equal": "EqTensor",
           "Less": "LtTensor", "Greater": "GtTensor", "LessOrEqual": "LeTensor",
           "GreaterOrEqual": "GeTensor", "And": "LogicalAnd", "Or": "LogicalOr",
           "Xor": "LogicalXor"}
_WITH_ALPHA = {"Add", "Sub"}  # aclnn signatures that take an alpha scalar


@lowering(*_BINARY)
def binary(node: Node, b: Builder) -> None:
    _only(node)
    if node.op_type in ("Max", "Min") and len(node.inputs) != 2:
        if len(node.inputs) == 1:
            b.call("InplaceCopy", selfRef=Ref(node.outputs[0]), src=Ref(node.inputs[0]))
            return
        # a chain of pairwise extremes over the broadcast inputs
        result, dtype = node.inputs[0], b.value(node.outputs[0]).dtype
        for index, name in enumerate(node.inputs[1:]):
            target = node.outputs[0] if index == len(node.inputs) - 2 else b.temp(
                np.broadcast_shapes(b.value(result).shape, b.value(name).shape), dtype)
            b.call(_BINARY[node.op_type], self=Ref(result), other=Ref(name), out=Ref(target))
            result = target
        return
    x, y = node.inputs
    args = {"self": Ref(x), "other": Ref(y), "out": Ref(node.outputs[0])}
    op = _BINARY[node.op_type]
    if op == "PowTensorTensor":
        _pow(node, b, x, y)
        return
    if node.op_type in _WITH_ALPHA:
        args["alpha"] = None
    if node.op_type == "Div" and np.issubdtype(b.value(x).dtype, np.integer):
        b.call("DivMod", self=Ref(x), other=Ref(y), mode=1, out=Ref(node.outputs[0]))
        return  # ONNX integer Div truncates
    b.call(op, **args)


def _cast_to(b: Builder, name: str, dtype: np.dtype) -> str:
    """``name`` converted to ``dtype`` (itself when it already has it)."""
    value = b.value(name)
    if value.dtype == dtype:
        return name
    converted = b.temp(value.shape, dtype)
    b.call("Cast", self=Ref(name), dtype=dtype, out=Ref(converted))
    return converted


def _pow(node: Node, b: Builder, x: str, y: str) -> None:
    """ONNX Pow: the result has the base's type whatever the exponent's. A float base takes
    the exponent converted to its dtype; an integer base with a float exponent is raised in
    the exponent's dtype and the result truncated into the base's (ONNX's reference)."""
    out = node.outputs[0]
    base, power = b.value(x).dtype, b.value(y).dtype
    if np.issubdtype(base, np.integer) and np.issubdtype(power, np.floating):
        wide = b.temp(b.value(out).shape, power)
        b.call("PowTensorTensor", self=Ref(_cast_to(b, x, power)), exponent=Ref(y),
               out=Ref(wide))
        b.call("Cast", self=Ref(wide), dtype=base, out=Ref(out))
        return
    exponent = b.constant_of(y)
    if exponent is not None and exponent.size == 1 and \
            b.value(node.outputs[0]).shape == b.value(x).shape and \
            np.issubdtype(b.value(x).dtype, np.floating):
        b.call("PowTensorScalar", self=Ref(x),
               exponent=Scalar(exponent.reshape(()).item(), exponent.dtype.name),
               out=Ref(node.outputs[0]))
        return
    b.call("PowTensorTensor", self=Ref(x), exponent=Ref(_cast_to(b, y, base)), out=Ref(out))


_UNARY = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
          "Sqrt": "Sqrt", "Neg": "Neg", "Abs": "Abs", "Reciprocal": "Reciprocal",
          "Erf": "Erf", "Floor": "Floor", "Ceil": "Ceil", "Sin": "Sin", "Cos": "Cos",
          "Sign": "Sign", "Not": "LogicalNot", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos",
          "Atan": "Atan", "Sinh": "Sinh", "Cosh": "Cosh", "Asinh": "Asinh", "Acosh": "Acosh",
          "Atanh": "Atanh", "Round": "Round", "Mish": "Mish", "HardSwish": "Hardswish"}
# (ONNX Round rounds half to even, as aclnnRound does)


@lowering(*_UNARY)
def unary(node: Node, b: Builder) -> None:
    _only(node)
    b.call(_UNARY[node.op_type], self=Ref(node.inputs[0]), out=Ref(node.outputs[0]))


@lowering(SILU)
def silu(node: Node, b: Builder) -> None:
    """The fused ``x * sigmoid(x)`` (``fusions.fuse_silu``) onto aclnnSilu."""
    b.call("Silu", self=Ref(node.inputs[0]), out=Ref(node.outputs[0]))


GELU_APPROXIMATE = {"none": 0, "tanh": 1}  # ONNX Gelu's approximate -> aclnnGeluV2's


@lowering("Gelu")
def gelu(node: Node, b: Builder) -> None:
    _only(node, "approximate")
    approximate = node.attrs.get("approximate", "none")
    if approximate not in GELU_APPROXIMATE:
        raise unsupported(node, f"approximate={approximate!r}")
    b.call("GeluV2", x=Ref(node.inputs[0]), approximate=GELU_APPROXIMATE[approximate],
           y=Ref(node.outputs[0]))


@lowering("HardSigmoid")
def hard_sigmoid(node: Node, b: Builder) -> None:
    """max(0, min(1, alpha * x + beta)) with the node's own alpha and beta (Muls, Adds,
    Clamp in place: aclnnHardsigmoid's fixed 1/6 would round differently)."""
    _only(node, "alpha", "beta")
    x, y = node.inputs[0], node.outputs[0]
    dtype = b.value(y).dtype.name
    alpha, beta = float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5))
    b.call("Muls", self=Ref(x), other=Scalar(alpha, dtype), out=Ref(y))
    b.call("InplaceAdds", selfRef=Ref(y), other=Scalar(beta, dtype), alpha=None)
    b.call("Clamp", self=Ref(y), clipValueMin=Scalar(0.0, dtype),
           clipValueMax=Scalar(1.0, dtype), out=Ref(y))


@lowering("LeakyRelu")
def leaky_relu(node: Node, b: Builder) -> None:
    _only(node, "alpha")
    dtype = b.value(node.outputs[0]).dtype.name
    b.call("LeakyRelu", self=Ref(node.inputs[0]),
           negativeSlope=Scalar(float(node.attrs.get("alpha", 0.01)), dtype),
           out=Ref(node.outputs[0]))


@lowering("Clip")
def clip(node: Node, b: Builder) -> None:
    """min(max(x, min), max); constant bounds become scalars, others ClampTensor."""
    _only(node, "min", "max")
    x, y = node.inputs[0], node.outputs[0]
    dtype = b.value(y).dtype.name
    bounds = list(node.inputs[1:3]) + [""] * (3 - len(node.inputs))
    if "min" in node.attrs or "max" in node.attrs:  # opset < 11
        low, high = node.attrs.get("min"), node.attrs.get("max")
        b.call("Clamp", self=Ref(x), out=Ref(y),
               clipValueMin=None if low is None else Scalar(float(low), dtype),
               clipValueMax=None if high is None else Scalar(float(high), dtype))
        return
    constants = [b.constant_of(name) if name else None for name in bounds[:2]]
    if all(name == "" or array is not None
           for name, array in zip(bounds[:2], constants, strict=True)):
        scalars = [None if array is None else Scalar(array.reshape(()).item(), dtype)
                   for array in constants]
        if scalars == [None, None]:
            b.call("InplaceCopy", selfRef=Ref(y), src=Ref(x))
            return
        b.call("Clamp", self=Ref(x), clipValueMin=scalars[0], clipValueMax=scalars[1],
               out=Ref(y))
        return
    b.call("ClampTensor", self=Ref(x), out=Ref(y),
           clipValueMin=Ref(bounds[0]) if bounds[0] else None,
           clipValueMax=Ref(bounds[1]) if bounds[1] else None)


@lowering("Where")
def where(node: Node, b: Builder) -> None:
    _only(node)
    condition, x, y = node.inputs
    b.call("SWhere", condition=Ref(condition), self=Ref(x), other=Ref(y),
           out=Ref(node.outputs[0]))


@lowering("Cast", "CastLike")
def cast(node: Node, b: Builder) -> None:
    _only(node, "to", "saturate")
    source, target = b.value(node.inputs[0]), b.value(node.outputs[0])
    for dtype in (source.dtype, target.dtype):
        if dtype not in CASTABLE:
            raise unsupported(node, f"a cast from or to {dtype}")
    if source.dtype == target.dtype:
        b.view(node.outputs[0], node.inputs[0])
        return
    b.call("Cast", self=Ref(node.inputs[0]), dtype=target.dtype, out=Ref(node.outputs[0]))


# -- linear algebra ------------------------------------------------------------------------------
@lowering("MatMul")
def matmul(node: Node, b: Builder) -> None:
    _only(node)
    b.call("Matmul", self=Ref(node.inputs[0]), mat2=Ref(node.inputs[1]),
           out=Ref(node.outputs[0]), cubeMathType=KEEP_DTYPE)


@lowering(FUSED_MATMUL)
def fused_matmul(node: Node, b: Builder) -> None:
    """The fusions' ``FusedMatMul(x, W, bias)``: aclnnFusedMatmul on matrices (x's leading
    dims flattened into rows through views: its operands have equal batch dims)."""
    _only(node, "fusedOpType")
    x, weight, bias = node.inputs
    out = node.outputs[0]
    shape, dtype = b.value(x).shape, b.value(x).dtype
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    columns = b.value(weight).shape[1]
    if len(shape) != 2:
        matrix = b.temp((rows, shape[-1]), dtype)
        b.view(matrix, x)
        x, product = matrix, b.temp((rows, columns), dtype)
    else:
        product = out
    b.call("FusedMatmul", x1=Ref(x), x2=Ref(weight), bias=Ref(bias) if bias else None,
           x3=None, fusedOpType=node.attrs["fusedOpType"], cubeMathType=KEEP_DTYPE,
           y=Ref(product))
    if product != out:
        b.view(out, product)


@lowering("Gemm")
def gemm(node: Node, b: Builder) -> None:
    """Y = alpha * A' @ B' + beta * C (A', B' optionally transposed)."""
    _only(node, "alpha", "beta", "transA", "transB")
    a, w = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    out = node.outputs[0]
    operands = []
    for name, flag in ((a, "transA"), (w, "transB")):
        if node.attrs.get(flag, 0):
            value = b.value(name)
            transposed = b.temp(value.shape[::-1], value.dtype)
            b.call("Permute", self=Ref(name), dims=(1, 0), out=Ref(transposed))
            name = transposed
        operands.append(name)
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    dtype = b.value(out).dtype.name
    if c is None:
        b.call("Matmul", self=Ref(operands[0]), mat2=Ref(operands[1]), out=Ref(out),
               cubeMathType=KEEP_DTYPE)
        if alpha != 1.0:
            b.call("InplaceMuls", selfRef=Ref(out), other=Scalar(alpha, dtype))
        return
    if not b.value(c).shape:  # a 0-d bias: Addmm takes 1 or 2 dims
        vector = b.temp((1,), b.value(c).dtype)
        b.view(vector, c)
        c = vector
    b.call("Addmm", self=Ref(c), mat1=Ref(operands[0]), mat2=Ref(operands[1]),
           beta=Scalar(beta, dtype), alpha=Scalar(alpha, dtype), out=Ref(out),
           cubeMathType=KEEP_DTYPE)


# -- shape only (zero-copy views) -----------------------------------------------------------
@lowering("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def view(node: Node, b: Builder) -> None:
    _only(node, "allowzero", "axis", "axes")
    b.view(node.outputs[0], node.inputs[0])


@lowering("Dropout")
def dropout(node: Node, b: Builder) -> None:
    """Inference: the output is the input (a view) and the optional mask all true (ONNX:
    nothing is dropped unless ``training_mode`` is true; with a ratio of 0 nothing is
    dropped either). ``training_mode`` must be a constant: a true one with a non-zero (or
    computed) ratio would draw random masks, which is refused."""
    _only(node, "seed", "ratio")
    training = _constant_input(node, b, 2, "training_mode")
    if training is not None and bool(training.reshape(-1)[0]):
        ratio = _constant_input(node, b, 1, "ratio")
        if ratio is None or float(ratio.reshape(-1)[0]) != 0.0:
            raise unsupported(node, "training_mode=true with a non-zero ratio (random "
                                    "dropout)")
    b.view(node.outputs[0], node.inputs[0])
    if len(node.outputs) > 1 and node.outputs[1]:
        mask = node.outputs[1]
        b.call("InplaceFillScalar", selfRef=Ref(mask),
               value=Scalar(True, b.value(mask).dtype.name))


# -- data movement ---------------------------------------------------------------------------
@lowering("Transpose")
def transpose(node: Node, b: Builder) -> None:
    _only(node, "perm")
    rank = len(b.value(node.inputs[0]).shape)
    perm = [int(p) for p in node.attrs.get("perm", range(rank - 1, -1, -1))]
    b.call("Permute", self=Ref(node.inputs[0]), dims=tuple(perm), out=Ref(node.outputs[0]))


@lowering("Concat")
def concat(node: Node, b: Builder) -> None:
    _only(node, "axis")
    inputs = tuple(name for name in node.inputs if name and b.value(name).nbytes)
    if not inputs:
        inputs = tuple(name for name in node.inputs if name)
    if len(inputs) == 1:
        b.call("InplaceCopy", selfRef=Ref(node.outputs[0]), src=Ref(inputs[0]))
        return
    b.call("Cat", tensors=RefList(inputs), dim=int(node.attrs["axis"]),
           out=Ref(node.outputs[0]))


@lowering("Expand")
def expand(node: Node, b: Builder) -> None:
    _only(node)
    shape = b.value(node.outputs[0]).shape
    if b.value(node.inputs[0]).shape == shape:
        b.view(node.outputs[0], node.inputs[0])
        return
    b.call("Expand", self=Ref(node.inputs[0]), size=tuple(shape), out=Ref(node.outputs[0]))


def _constant_input(node: Node, b: Builder, position: int, what: str) -> np.ndarray | None:
    """Input ``position`` as a constant (None when absent); a computed one is refused."""
    if len(node.inputs) <= position or not node.inputs[position]:
        return None
    array = b.constant_of(node.inputs[position])
    if array is None:
        raise unsupported(node, f"a computed (non-constant) {what} input")
    return array


def _wrap_negative(b: Builder, indices: str, size: int) -> str:
    """Computed indices with negatives counted from the end (ONNX allows [-size, size)):
    ``indices + size * (indices < 0)``; anything still out of range is refused at run time
    by the gather's own range check."""
    value = b.value(indices)
    negative = b.temp(value.shape, np.dtype(np.bool_))
    b.call("LtScalar", self=Ref(indices), other=Scalar(0, value.dtype.name),
           out=Ref(negative))
    shift = b.temp(value.shape, value.dtype)
    b.call("Cast", self=Ref(negative), dtype=value.dtype, out=Ref(shift))
    b.call("InplaceMuls", selfRef=Ref(shift), other=Scalar(size, value.dtype.name))
    wrapped = b.temp(value.shape, value.dtype)
    b.call("Add", self=Ref(indices), other=Ref(shift), alpha=None, out=Ref(wrapped))
    return wrapped


@lowering("Gather")
def gather(node: Node, b: Builder) -> None:
    """ONNX Gather: IndexSelect on the flattened indices, its output a view of the result
    (Embedding for 2-D data along axis 0). Constant negative indices are wrapped here; a
    computed negative index is refused at run time by the kernel's range check."""
    _only(node, "axis")
    data, indices = node.inputs
    out = node.outputs[0]
    shape = b.value(data).shape
    axis = int(node.attrs.get("axis", 0))
    axis = axis + len(shape) if axis < 0 else axis
    constant = b.constant_of(indices)
    if constant is not None:
        wrapped = np.where(constant < 0, constant + shape[axis], constant).astype(np.int64)
    else:
        indices = _wrap_negative(b, indices, shape[axis])
    if axis == 0 and len(shape) == 2:
        source = indices if constant is None else b.constant(wrapped, "indices")
        b.call("Embedding", weight=Ref(data), indices=Ref(source), out=Ref(out))
        return
    if constant is not None:
        indices = b.constant(wrapped.reshape(-1), "indices")
    index_value = b.value(indices)
    if constant is None:
        flat = b.temp((int(np.prod(index_value.shape)),), index_value.dtype)
        b.view(flat, indices)
        indices = flat
    count = b.value(indices).shape[0]
    result = b.temp((*shape[:axis], count, *shape[axis + 1:]), b.value(out).dtype)
    b.view(result, out)
    b.call("IndexSelect", self=Ref(data), dim=axis, index=Ref(indices), out=Ref(result))


@lowering("Slice")
def slice_(node: Node, b: Builder) -> None:
    """Constant starts/ends/axes/steps: one aclnnSlice per sliced axis (chained through
    temporaries); a negative step becomes an IndexSelect with the constant positions."""
    _only(node)
    x, out = node.inputs[0], node.outputs[0]
    shape = list(b.value(x).shape)
    starts = _constant_input(node, b, 1, "starts")
    ends = _constant_input(node, b, 2, "ends")
    axes = _constant_input(node, b, 3, "axes")
    steps = _constant_input(node, b, 4, "steps")
    starts, ends = starts.reshape(-1).tolist(), ends.reshape(-1).tolist()
    axes = list(range(len(starts))) if axes is None else axes.reshape(-1).tolist()
    steps = [1] * len(starts) if steps is None else steps.reshape(-1).tolist()
    plans = []
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = axis + len(shape) if axis < 0 else axis
        window = _onnx_slice(int(start), int(end), int(step), shape[axis])
        positions = range(shape[axis])[window]
        if len(positions) == shape[axis] and step > 0:
            continue  # the whole axis
        plans.append((axis, window, positions))
    if not plans:
        b.view(out, x)
        return
    dtype = b.value(out).dtype
    current = x
    for index, (axis, window, positions) in enumerate(plans):
        shape[axis] = len(positions)
        target = out if index == len(plans) - 1 else b.temp(tuple(shape), dtype)
        if window.step > 0:
            b.call("Slice", self=Ref(current), dim=axis, start=window.start, end=window.stop,
                   step=window.step, out=Ref(target))
        else:
            positions = b.constant(np.array(list(positions), np.int64), "positions")
            b.call("IndexSelect", self=Ref(current), dim=axis, index=Ref(positions),
                   out=Ref(target))
        current = target


# -- reductions ------------------------------------------------------------------------------
_REDUCE = {"ReduceMean": "Mean", "ReduceSum": "ReduceSum", "ReduceMax": "Amax",
           "ReduceMin": "Amin", "ReduceL2": "ReduceSum", "ReduceSumSquare": "ReduceSum",
           "ReduceL1": "ReduceSum", "ReduceLogSum": "ReduceSum", "ReduceLogSumExp": "ReduceSum",
           "ReduceProd": "ProdDim"}
_SQUARED = {"ReduceL2", "ReduceSumSquare"}  # reduce x * x
_TRANSFORMED = _SQUARED | {"ReduceL1", "ReduceLogSumExp"}  # reduce f(x), not x


@lowering(*_REDUCE)
def reduce(node: Node, b: Builder) -> None:
    """Axes from the attribute (older opsets) or a constant input; an empty axes list
    reduces everything unless ``noop_with_empty_axes``."""
    _only(node, "axes", "keepdims", "noop_with_empty_axes")
    x, out = node.inputs[0], node.outputs[0]
    rank = len(b.value(x).shape)
    if "axes" in node.attrs:
        axes = [int(a) for a in node.attrs["axes"]]
    else:
        constant = _constant_input(node, b, 1, "axes")
        axes = [] if constant is None else [int(a) for a in constant.reshape(-1)]
    if not axes:
        if int(node.attrs.get("noop_with_empty_axes", 0)):
            if node.op_type in _TRANSFORMED or node.op_type == "ReduceLogSum":
                raise unsupported(node, f"noop_with_empty_axes with {node.op_type}")
            b.view(out, x)
            return
        axes = list(range(rank))
    axes = sorted({a + rank if a < 0 else a for a in axes})
    keep = bool(int(node.attrs.get("keepdims", 1)))
    dtype = b.value(out).dtype
    source, shift = x, None
    if node.op_type in _SQUARED:
        source = b.binary("Mul", x, x)
    elif node.op_type == "ReduceL1":
        source = b.unary("Abs", x)
    elif node.op_type == "ReduceLogSumExp":  # log(sum(exp(x - max))) + max: no overflow
        shift = b.temp(tuple(1 if k in axes else n for k, n in enumerate(b.value(x).shape)),
                       b.value(x).dtype)
        b.call("Amax", self=Ref(x), dim=tuple(axes), keepDim=True, out=Ref(shift))
        source = b.unary("Exp", b.binary("Sub", x, shift))
    op = _REDUCE[node.op_type]
    if op == "ProdDim":  # one dim at a time, the last keeping the requested dims
        _reduce_product(b, source, axes, keep, out)
        return
    if op == "Mean":
        b.call("Mean", self=Ref(source), dim=tuple(axes), keepDim=keep, dtype=dtype,
               out=Ref(out))
    elif op == "ReduceSum":
        b.call("ReduceSum", self=Ref(source), dims=tuple(axes), keepDims=keep, dtype=dtype,
               out=Ref(out))
    else:
        b.call(op, self=Ref(source), dim=tuple(axes), keepDim=keep, out=Ref(out))
    if node.op_type == "ReduceL2":
        b.call("InplaceSqrt", selfRef=Ref(out))
    elif node.op_type in ("ReduceLogSum", "ReduceLogSumExp"):
        b.call("InplaceLog", selfRef=Ref(out))
        if shift is not None:
            kept = shift if keep else b.temp(b.value(out).shape, b.value(shift).dtype)
            if not keep:
                b.view(kept, shift)
            b.call("InplaceAdd", selfRef=Ref(out), other=Ref(kept), alpha=None)


def _reduce_product(b: Builder, source: str, axes: list[int], keep: bool, out: str) -> None:
    """ReduceProd over several axes as ProdDim one axis at a time (keeping dims, then the
    result viewed without them when ``keepdims`` is 0)."""
    current, shape = source, list(b.value(source).shape)
    dtype = b.value(out).dtype
    for index, axis in enumerate(axes):
        shape[axis] = 1
        last = index == len(axes) - 1
        target = out if last and keep else b.temp(tuple(shape), dtype)
        b.call("ProdDim", self=Ref(current), dim=axis, keepDim=True, dtype=dtype,
               out=Ref(target))
        current = target
    if not keep:
        b.view(out, current)


# -- activations with attributes ------------------------------------------------------------
@lowering("Softmax", "LogSoftmax")
def softmax(node: Node, b: Builder) -> None:
    _only(node, "axis")
    rank = len(b.value(node.inputs[0]).shape)
    default = -1 if b.graph.opset >= 13 else 1
    axis = int(node.attrs.get("axis", default))
    if b.graph.opset < 13 and axis % max(rank, 1) != rank - 1:
        raise unsupported(node, f"opset-{b.graph.opset} axis {axis} (flattening semantics)")
    op = "Softmax" if node.op_type == "Softmax" else "LogSoftmax"
    b.call(op, self=Ref(node.inputs[0]), dim=axis, out=Ref(node.outputs[0]))
