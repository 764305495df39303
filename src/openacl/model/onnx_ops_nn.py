"""ONNX neural-network operators lowered onto aclnn: convolutions, normalizations, pooling,
resizing and padding (the ONNX operator specification's semantics; anything the aclnn
operator cannot honour exactly is refused with ``unsupported``).
"""

from __future__ import annotations

import math

import numpy as np

from openacl.errors import ACL_ERROR_PARSE_MODEL, AclError
from openacl.model.fusions import ADD_LAYER_NORM
from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, Scalar, lowering, unsupported
from openacl.model.onnx_ops import KEEP_DTYPE, _cast_to, _constant_input, _only

SPATIAL_2D = 2  # (H, W): the dims of the 2-d pooling and resize operators


# -- padding helpers ----------------------------------------------------------------------------
def _spatial_ints(node: Node, name: str, spatial: int, default: int) -> list[int]:
    values = [int(v) for v in node.attrs.get(name, [default] * spatial)]
    if len(values) != spatial:
        raise unsupported(node, f"{name}={values} for {spatial} spatial dims")
    return values


def _pads(node: Node, in_size, kernel, strides, dilations) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial dim from ``pads`` or ``auto_pad``."""
    spatial = len(in_size)
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        return [(0, 0)] * spatial
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for size, k, s, d in zip(in_size, kernel, strides, dilations, strict=True):
            out = -(-size // s)
            total = max(0, (out - 1) * s + d * (k - 1) + 1 - size)
            small = total // 2
            pairs.append((small, total - small) if auto_pad == "SAME_UPPER"
                         else (total - small, small))
        return pairs
    if auto_pad != "NOTSET":
        raise unsupported(node, f"auto_pad={auto_pad!r}")
    pads = [int(p) for p in node.attrs.get("pads", [0] * (2 * spatial))]
    if len(pads) != 2 * spatial or any(p < 0 for p in pads):
        raise unsupported(node, f"pads={pads}")
    return [(pads[i], pads[i + spatial]) for i in range(spatial)]


def _torch_pad(pairs: list[tuple[int, int]]) -> tuple[int, ...]:
    """(begin, end) pairs, first spatial dim first -> F.pad's order (last dim first)."""
    return tuple(v for begin, end in reversed(pairs) for v in (begin, end))


def _padded(b: Builder, x: str, pairs: list[tuple[int, int]], fill: float) -> str:
    """A new value: ``x`` with its trailing dims padded by the (begin, end) ``pairs`` (one per
    dim from the last ``len(pairs)``; negative ones crop) of ``fill`` (aclnnConstantPadNd)."""
    value = b.value(x)
    lead = len(value.shape) - len(pairs)
    shape = (*value.shape[:lead], *(n + p + q for n, (p, q) in
                                    zip(value.shape[lead:], pairs, strict=True)))
    padded = b.temp(shape, value.dtype)
    b.call("ConstantPadNd", self=Ref(x), pad=_torch_pad(pairs),
           value=Scalar(fill, value.dtype.name), out=Ref(padded))
    return padded


# -- convolution --------------------------------------------------------------------------------
def _conv_operands(node: Node, b: Builder, what: str) -> tuple:
    """Conv / ConvTranspose inputs: (x, weight, bias or None, x's Value, spatial dims,
    kernel size), with the rank and ``kernel_shape`` checked."""
    x, weight = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    x_value = b.value(x)
    spatial = len(x_value.shape) - 2
    if not 1 <= spatial <= 3:
        raise unsupported(node, f"a {spatial}-d {what}")
    kernel = list(b.value(weight).shape[2:])
    if [int(k) for k in node.attrs.get("kernel_shape", kernel)] != kernel:
        raise unsupported(node, f"kernel_shape {node.attrs['kernel_shape']} that differs "
                                f"from the weight's {kernel}")
    return x, weight, bias, x_value, spatial, kernel


@lowering("Conv")
def conv(node: Node, b: Builder) -> None:
    """aclnnConvolution; asymmetric pads go to CANN's (top, bottom, left, right) form for
    conv1d/2d, and through an explicit ConstantPadNd for conv3d."""
    _only(node, "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
    x, weight, bias, x_value, spatial, kernel = _conv_operands(node, b, "convolution")
    strides = _spatial_ints(node, "strides", spatial, 1)
    dilations = _spatial_ints(node, "dilations", spatial, 1)
    pairs = _pads(node, x_value.shape[2:], kernel, strides, dilations)
    if all(begin == end for begin, end in pairs):
        padding = tuple(begin for begin, _ in pairs)
    elif spatial <= 2:
        padding = tuple(v for pair in pairs for v in pair)
    else:
        x, padding = _padded(b, x, pairs, 0), (0,) * spatial
    b.call("Convolution", input=Ref(x), weight=Ref(weight),
           bias=Ref(bias) if bias else None, stride=tuple(strides), padding=padding,
           dilation=tuple(dilations), transposed=False, outputPadding=None,
           groups=int(node.attrs.get("group", 1)), output=Ref(node.outputs[0]),
           cubeMathType=KEEP_DTYPE)


@lowering("ConvTranspose")
def conv_transpose(node: Node, b: Builder) -> None:
    """aclnnConvolution with ``transposed``. Pads as ONNX derives them: explicit ``pads``,
    else from ``output_shape`` or SAME auto-padding, the total ``stride * (in - 1) +
    output_padding + dilated kernel - output_shape`` split as SAME_UPPER (the odd one at
    the end) or otherwise at the start (ONNX's reference and onnxruntime); an output
    larger than the pads give grows output_padding."""
    _only(node, "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides",
          "output_padding", "output_shape")
    x, weight, bias, x_value, spatial, kernel = _conv_operands(node, b,
                                                               "transposed convolution")
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise unsupported(node, f"auto_pad={auto_pad!r}")
    strides = _spatial_ints(node, "strides", spatial, 1)
    dilations = _spatial_ints(node, "dilations", spatial, 1)
    output_padding = _spatial_ints(node, "output_padding", spatial, 0)
    in_size = x_value.shape[2:]
    spans = [(n - 1) * s + d * (k - 1) + 1 for n, s, d, k in  # the transposed sums' extent
             zip(in_size, strides, dilations, kernel, strict=True)]
    given = "output_shape" in node.attrs or auto_pad in ("SAME_UPPER", "SAME_LOWER")
    if given and "pads" not in node.attrs:
        wanted = [int(v) for v in node.attrs["output_shape"]][-spatial:] \
            if "output_shape" in node.attrs else [n * s for n, s in zip(in_size, strides,
                                                                        strict=True)]
        pairs = []
        for span, op, size in zip(spans, output_padding, wanted, strict=True):
            total = span + op - size
            small = total // 2
            pairs.append((small, total - small) if auto_pad == "SAME_UPPER"
                         else (total - small, small))
    else:
        pairs = _pads(node, in_size, kernel, strides, dilations) if auto_pad != "VALID" \
            else [(0, 0)] * spatial
    out_size = tuple(b.value(node.outputs[0]).shape[2:])
    for i, (p, q) in enumerate(pairs):
        if q < 0:  # an output past the transposed sums: more output padding (bias only)
            output_padding[i], pairs[i] = output_padding[i] - q, (p, 0)
        reached = spans[i] + output_padding[i] - sum(pairs[i])
        if out_size[i] > reached:
            output_padding[i] += out_size[i] - reached
    if any(p < 0 for p, _ in pairs) or any(
            op >= max(s, d) for op, s, d in zip(output_padding, strides, dilations,
                                                strict=True)):
        raise unsupported(node, f"pads {pairs} with output padding {output_padding} (the "
                                f"output shape {list(out_size)} asks more than the strides "
                                f"and dilations give)")
    if all(begin == end for begin, end in pairs):
        padding = tuple(begin for begin, _ in pairs)
    elif spatial == SPATIAL_2D:
        padding = tuple(v for pair in pairs for v in pair)
    else:
        raise unsupported(node, f"asymmetric pads {pairs} in a {spatial}-d transposed "
                                f"convolution")
    expected = tuple((n - 1) * s + d * (k - 1) + 1 + op - p - q for n, s, d, k, op, (p, q) in
                     zip(in_size, strides, dilations, kernel, output_padding, pairs,
                         strict=True))
    if out_size != expected:
        raise unsupported(node, f"an output size {list(out_size)} other than the attributes "
                                f"give ({list(expected)})")
    b.call("Convolution", input=Ref(x), weight=Ref(weight),
           bias=Ref(bias) if bias else None, stride=tuple(strides), padding=padding,
           dilation=tuple(dilations), transposed=True, outputPadding=tuple(output_padding),
           groups=int(node.attrs.get("group", 1)), output=Ref(node.outputs[0]),
           cubeMathType=KEEP_DTYPE)


# -- normalization -------------------------------------------------------------------------------
@lowering("BatchNormalization")
def batch_normalization(node: Node, b: Builder) -> None:
    """Inference batch normalization (aclnnBatchNorm, training false)."""
    _only(node, "epsilon", "momentum", "training_mode")
    if int(node.attrs.get("training_mode", 0)):
        raise unsupported(node, "training_mode=1")
    if any(node.outputs[1:]):
        raise unsupported(node, "the running-statistics outputs (training)")
    x, scale, bias, mean, var = node.inputs[:5]
    b.call("BatchNorm", input=Ref(x), weight=Ref(scale), bias=Ref(bias),
           runningMean=Ref(mean), runningVar=Ref(var), training=False,
           momentum=float(node.attrs.get("momentum", 0.9)),
           eps=float(node.attrs.get("epsilon", 1e-5)), output=Ref(node.outputs[0]),
           saveMean=None, saveInvstd=None)


@lowering("LayerNormalization")
def layer_normalization(node: Node, b: Builder) -> None:
    """aclnnLayerNorm over the dims from ``axis`` on; Mean and InvStdDev outputs map to
    its mean and rstd (same kept-dim shapes)."""
    _only(node, "axis", "epsilon", "stash_type")
    if int(node.attrs.get("stash_type", 1)) != 1:
        raise unsupported(node, f"stash_type={node.attrs['stash_type']}")
    x = node.inputs[0]
    shape = b.value(x).shape
    axis = int(node.attrs.get("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    normalized = tuple(shape[axis:])
    params = []
    for position in (1, 2):
        name = node.inputs[position] if len(node.inputs) > position else ""
        if name and b.value(name).shape != normalized:
            array = b.constant_of(name)
            if array is None or math.prod(array.shape) > math.prod(normalized):
                raise unsupported(node, f"a computed or non-broadcastable scale/bias {name!r}")
            name = b.constant(np.broadcast_to(array, normalized).copy(), "norm_param")
        params.append(Ref(name) if name else None)
    outputs = list(node.outputs) + [""] * (3 - len(node.outputs))
    b.call("LayerNorm", input=Ref(x), normalizedShape=normalized, weightOptional=params[0],
           biasOptional=params[1], eps=float(node.attrs.get("epsilon", 1e-5)),
           out=Ref(outputs[0]),
           meanOutOptional=Ref(outputs[1]) if outputs[1] else None,
           rstdOutOptional=Ref(outputs[2]) if outputs[2] else None)


@lowering(ADD_LAYER_NORM)
def add_layer_norm(node: Node, b: Builder) -> None:
    """The fusions' ``AddLayerNorm(a, b, scale, beta, bias)``: aclnnAddLayerNorm, its
    statistics and sum into temporaries nothing reads (additionalOutput off)."""
    _only(node, "epsilon", "axis")
    first, second, gamma, beta, bias = node.inputs
    shape, dtype = b.value(first).shape, b.value(first).dtype
    lead = len(shape) - len(b.value(gamma).shape)
    stats = (*shape[:lead], *(1,) * (len(shape) - lead))
    b.call("AddLayerNorm", x1=Ref(first), x2=Ref(second), gamma=Ref(gamma), beta=Ref(beta),
           biasOptional=Ref(bias) if bias else None, epsilon=float(node.attrs["epsilon"]),
           additionalOutput=False, yOut=Ref(node.outputs[0]),
           meanOut=Ref(b.temp(stats, np.float32)), rstdOut=Ref(b.temp(stats, np.float32)),
           xOut=Ref(b.temp(shape, dtype)))


# -- pooling ------------------------------------------------------------------------------------
@lowering("GlobalAveragePool", "GlobalMaxPool")
def global_pool(node: Node, b: Builder) -> None:
    _only(node)
    x = node.inputs[0]
    axes = tuple(range(2, len(b.value(x).shape)))
    if node.op_type == "GlobalAveragePool":
        b.call("Mean", self=Ref(x), dim=axes, keepDim=True, dtype=None,
               out=Ref(node.outputs[0]))
    else:
        b.call("Amax", self=Ref(x), dim=axes, keepDim=True, out=Ref(node.outputs[0]))


class _PoolPlan:
    """A pool's geometry per spatial dim, 1-d pools as 2-d ones over a plane of one row:
    kernel, strides, dilations, (begin, end) pads, the end pads' ceil_mode overhang (how far
    ONNX's last windows reach past the input and its pads) and the output size; ``x`` and
    ``out`` the 2-d or 3-d values the pool operator reads and writes (views of a 1-d
    pool's)."""

    def __init__(self, node: Node, b: Builder) -> None:
        x, out = node.inputs[0], node.outputs[0]
        x_shape, out_shape = b.value(x).shape, b.value(out).shape
        spatial = len(x_shape) - 2
        if spatial not in (1, 2, 3):
            raise unsupported(node, f"a {spatial}-d pool (1-d, 2-d or 3-d)")
        kernel = [int(k) for k in node.attrs["kernel_shape"]]
        if len(kernel) != spatial:
            raise unsupported(node, f"kernel_shape={kernel} for {spatial} spatial dims")
        strides = _spatial_ints(node, "strides", spatial, 1)
        dilations = _spatial_ints(node, "dilations", spatial, 1)
        pairs = _pads(node, x_shape[2:], kernel, strides, dilations)
        out_size = list(out_shape[2:])
        overhang = [max(0, (o - 1) * s + d * (k - 1) + 1 - (n + p + q))
                    for o, s, d, k, n, (p, q) in zip(out_size, strides, dilations, kernel,
                                                     x_shape[2:], pairs, strict=True)]
        if spatial == 1:  # (N, C, L) pooled as (N, C, 1, L)
            kernel, strides, dilations = [1, *kernel], [1, *strides], [1, *dilations]
            pairs, overhang, out_size = [(0, 0), *pairs], [0, *overhang], [1, *out_size]
            x = b.reshaped(x, (*x_shape[:2], 1, x_shape[2]))
            out = b.written_as(out, (*out_shape[:2], 1, out_shape[2]))
        self.x, self.out, self.kernel, self.strides = x, out, kernel, strides
        self.in_size = list(b.value(x).shape[2:])
        self.dilations, self.pairs, self.overhang, self.out_size = (dilations, pairs,
                                                                    overhang, out_size)

    @property
    def spatial(self) -> int:
        return len(self.kernel)

    def padded(self, b: Builder, fill: float) -> str:
        """x with its pads and the ceil_mode overhang written out as ``fill``."""
        return _padded(b, self.x, [(p, q + e) for (p, q), e in
                                   zip(self.pairs, self.overhang, strict=True)], fill)


@lowering("AveragePool")
def average_pool(node: Node, b: Builder) -> None:
    """AveragePool of 1 to 3 spatial dims. Symmetric pads of at most half the kernel and no
    ceil_mode overhang are the pool operator's own; any other pads (SAME_UPPER/LOWER,
    asymmetric, wide) and ceil_mode's windows past the input are written out as zeros and
    the window sums divided by ONNX's divisor per output, computed here: the window's
    input elements, its pads too with count_include_pad, never the overhang."""
    _only(node, "auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
          "pads", "strides")
    plan = _PoolPlan(node, b)
    include = bool(int(node.attrs.get("count_include_pad", 0)))
    if any(d != 1 for d in plan.dilations):
        _dilated_average(node, b, plan, include)
        return
    pool = "AvgPool2d" if plan.spatial == 2 else "AvgPool3d"
    simple = not any(plan.overhang) and all(
        p == q and 2 * p <= k for (p, q), k in zip(plan.pairs, plan.kernel, strict=True))
    source, paddings = plan.x, tuple(p for p, _ in plan.pairs)
    if not simple:
        source, paddings = plan.padded(b, 0.0), (0,) * plan.spatial
    value = b.value(plan.out)
    factor = None if simple else _average_factor(plan, include)
    target = plan.out if factor is None else b.temp(value.shape, value.dtype)
    if plan.spatial == 2:
        b.call(pool, self=Ref(source), kernelSize=tuple(plan.kernel),
               strides=tuple(plan.strides), paddings=paddings, ceilMode=False,
               countIncludePad=include or not simple, divisorOverride=0,
               cubeMathType=KEEP_DTYPE, out=Ref(target))
    else:
        b.call(pool, self=Ref(source), kernelSize=tuple(plan.kernel),
               stride=tuple(plan.strides), padding=paddings, ceilMode=False,
               countIncludePad=include or not simple, divisorOverride=0, out=Ref(target))
    if factor is not None:
        scale = b.constant(factor.astype(value.dtype).reshape(
            (1, 1, *factor.shape)), "pool_divisor")
        b.call("Mul", self=Ref(target), other=Ref(scale), out=Ref(plan.out))


def _average_divisor(plan: _PoolPlan, include: bool) -> np.ndarray:
    """ONNX's divisor per output position: the window's input elements, and its pads with
    count_include_pad, never the ceil_mode overhang (onnxruntime's pool), dilated taps
    only."""
    counted = []
    for n, (p, q), e, k, s, d, o in zip(plan.in_size, plan.pairs, plan.overhang, plan.kernel,
                                        plan.strides, plan.dilations, plan.out_size,
                                        strict=True):
        line = np.zeros(p + n + q + e, np.float64)
        line[p:p + n] = 1.0
        if include:
            line[:p] = line[p + n:p + n + q] = 1.0
        counted.append(np.array([line[j * s:j * s + d * (k - 1) + 1:d].sum()
                                 for j in range(o)]))
    divisor = counted[0]
    for axis in counted[1:]:
        divisor = np.multiply.outer(divisor, axis)
    return divisor


def _per_divisor(numerator: float, divisor: np.ndarray) -> np.ndarray:
    """numerator / divisor, NaN where a window lies wholly in the padding (0 / 0 there)."""
    factor = np.full(divisor.shape, np.nan)
    np.divide(numerator, divisor, out=factor, where=divisor > 0)
    return factor


def _average_factor(plan: _PoolPlan, include: bool) -> np.ndarray | None:
    """kernel size / ONNX's divisor per output position, for a pool over the zero-padded
    input (whose operator divides every window by the kernel size); None where that is 1
    everywhere."""
    factor = _per_divisor(math.prod(plan.kernel), _average_divisor(plan, include))
    return None if np.all(factor == 1.0) else factor


def _dilated_average(node: Node, b: Builder, plan: _PoolPlan, include: bool) -> None:
    """A dilated average pool (the pool operators have no dilation): the window sums as a
    depthwise convolution of the zero-padded input with a kernel of ones, dilated, then
    divided by ONNX's divisor per output position."""
    value = b.value(plan.x)
    channels = value.shape[1]
    ones = b.constant(np.ones((channels, 1, *plan.kernel), value.dtype), "pool_window")
    sums = b.temp(b.value(plan.out).shape, value.dtype)
    attrs = {"kernel_shape": list(plan.kernel), "strides": list(plan.strides),
             "dilations": list(plan.dilations), "group": channels}
    conv(Node("Conv", node.name, [plan.padded(b, 0.0), ones], [sums], attrs), b)
    scale = _per_divisor(1.0, _average_divisor(plan, include))
    divisor = b.constant(scale.astype(value.dtype).reshape((1, 1, *scale.shape)),
                         "pool_divisor")
    b.call("Mul", self=Ref(sums), other=Ref(divisor), out=Ref(plan.out))


@lowering("MaxPool")
def max_pool(node: Node, b: Builder) -> None:
    """MaxPool of 1 to 3 spatial dims. Pads beyond what the pool operator takes (wider than
    half the kernel, or any with dilations or in 3-d) and ceil_mode's windows past the input
    are written out as -inf first, so every window is the operator's."""
    _only(node, "auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides",
          "storage_order")
    plan = _PoolPlan(node, b)
    if len(node.outputs) > 1 and node.outputs[1]:
        _max_pool_with_indices(node, b, plan)
        return
    plain = plan.spatial == 2 and all(d == 1 for d in plan.dilations)
    wide = any(max(p, q) > k // 2 for (p, q), k in zip(plan.pairs, plan.kernel, strict=True))
    source, pairs = plan.x, plan.pairs
    if any(plan.overhang) or wide or (not plain and any(p or q for p, q in plan.pairs)):
        source, pairs = plan.padded(b, float("-inf")), [(0, 0)] * plan.spatial
    if plain:
        (top, bottom), (left, right) = pairs
        b.call("MaxPool", self=Ref(source), kernelShape=tuple(plan.kernel),
               strides=tuple(plan.strides), autoPad=0, pads=(top, left, bottom, right),
               dilations=(1, 1), ceilMode=0, out=Ref(plan.out))
        return
    value = b.value(plan.out)  # the dilated or 3-d pool also writes indices: scratch
    indices = b.temp(value.shape, np.dtype(np.int32))
    op = "MaxPool2dWithIndices" if plan.spatial == 2 else "MaxPool3dWithArgmax"
    b.call(op, self=Ref(source), kernelSize=tuple(plan.kernel), stride=tuple(plan.strides),
           padding=(0,) * plan.spatial, dilation=tuple(plan.dilations), ceilMode=False,
           out=Ref(plan.out), indices=Ref(indices))


def _max_pool_with_indices(node: Node, b: Builder, plan: _PoolPlan) -> None:
    """MaxPool's values and its Indices output: 1-d to 3-d pools by the pool operators that
    return each window's argmax (MaxPool2dWithIndices, MaxPool3dWithArgmax: an index into
    the image's plane or volume), made ONNX's index into the whole tensor (row-major, so
    plus (n * C + c) * plane) in int64. The operators pad symmetrically, at most half the
    kernel, within the input; other pads, ceil_mode's windows past the input and the
    column-major storage_order would index a padded or transposed input: refused."""
    if int(node.attrs.get("storage_order", 0)):
        raise unsupported(node, "the Indices output with storage_order=1")
    if any(plan.overhang) or any(p != q or p > k // 2 for (p, q), k in
                                 zip(plan.pairs, plan.kernel, strict=True)):
        raise unsupported(node, f"the Indices output with pads {plan.pairs} (symmetric, at "
                                f"most half the kernel {plan.kernel}, no ceil_mode "
                                f"overhang)")
    shape = b.value(plan.out).shape
    indices = b.temp(shape, np.dtype(np.int32))
    op = "MaxPool2dWithIndices" if plan.spatial == 2 else "MaxPool3dWithArgmax"
    b.call(op, self=Ref(plan.x), kernelSize=tuple(plan.kernel), stride=tuple(plan.strides),
           padding=tuple(p for p, _ in plan.pairs), dilation=tuple(plan.dilations),
           ceilMode=False, out=Ref(plan.out), indices=Ref(indices))
    batch, channels = shape[:2]
    plane = math.prod(plan.in_size)
    offsets = (np.arange(batch * channels, dtype=np.int64) * plane).reshape(
        batch, channels, *([1] * plan.spatial))
    target = node.outputs[1]
    if b.value(target).shape != shape:  # a 1-d pool, pooled as a plane of one row
        target = b.written_as(target, shape)
    b.call("Cast", self=Ref(indices), dtype=b.value(target).dtype, out=Ref(target))
    b.call("InplaceAdd", selfRef=Ref(target), other=Ref(b.constant(offsets, "pool_offsets")),
           alpha=None)


# -- resize --------------------------------------------------------------------------------------
_HALF_PIXEL = ("half_pixel", "pytorch_half_pixel")


RESIZE_ATTRIBUTES = ("mode", "coordinate_transformation_mode", "nearest_mode",
                     "cubic_coeff_a", "exclude_outside", "antialias")


@lowering("Resize")
def resize(node: Node, b: Builder) -> None:
    """Resizes of the last two dims. The common 4-d cases map onto the upsample operators:
    ``nearest`` onto aclnnUpsampleNearest2d (floor(dst * in / out)) where ONNX picks the
    same pixels (``asymmetric`` + ``floor`` with integer factors, half-pixel rounding
    modes for integer upscales), ``linear`` onto aclnnUpsampleBilinear2d with
    ``half_pixel`` / ``pytorch_half_pixel`` or ``align_corners``. Every other mode
    (cubic, antialias, exclude_outside, the other coordinate transforms and rounding
    modes, the ``axes`` attribute) is a linear map per axis: one Matmul per resized axis
    with the interpolation matrix ``_interpolation_matrix`` computes at conversion time."""
    _only(node, "mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
          "exclude_outside", "extrapolation_value", "antialias", "keep_aspect_ratio_policy",
          "axes")
    x, out = node.inputs[0], node.outputs[0]
    in_shape, out_shape = b.value(x).shape, b.value(out).shape
    if node.attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise unsupported(node, f"keep_aspect_ratio_policy="
                                f"{node.attrs['keep_aspect_ratio_policy']!r}")
    if node.attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        raise unsupported(node, "coordinate_transformation_mode='tf_crop_and_resize'")
    fast = len(in_shape) == 2 + SPATIAL_2D and in_shape[:2] == out_shape[:2] and \
        "axes" not in node.attrs and not int(node.attrs.get("antialias", 0)) and \
        not int(node.attrs.get("exclude_outside", 0))
    try:
        if fast:
            _resize_upsample(node, b, x, out, in_shape, out_shape)
            return
    except AclError:
        pass  # not one of the upsample operators' cases: the general form below
    _resize_by_matrices(node, b, x, out, in_shape, out_shape)


def _resize_scales(node: Node, b: Builder, rank: int) -> list[float | None]:
    """Per dim, the scale the node gives (None where it gives sizes or nothing)."""
    scales = _constant_input(node, b, 2, "scales")
    if scales is None or not scales.size:
        return [None] * rank
    axes = [int(a) % rank for a in node.attrs.get("axes", range(rank))]
    per_dim: list[float | None] = [1.0] * rank
    for axis, scale in zip(axes, scales.reshape(-1).tolist(), strict=True):
        per_dim[axis] = float(scale)
    return per_dim


def _interpolation_matrix(node: Node, size: int, out_size: int, scale: float | None
                          ) -> np.ndarray:
    """The (out_size, size) matrix of this node's 1-d resize: ONNX's reference Resize
    applied to the identity (a resize is linear in its input), so every mode, coordinate
    transform, rounding mode and antialias setting is ONNX's own."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    attrs = {k: node.attrs[k] for k in RESIZE_ATTRIBUTES if k in node.attrs}
    if scale is not None:
        extra = numpy_helper.from_array(np.array([scale, 1.0], np.float32), "scales")
        inputs = ["x", "", "scales"]
    else:
        extra = numpy_helper.from_array(np.array([out_size, size], np.int64), "sizes")
        inputs = ["x", "", "", "sizes"]
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], **attrs)], "resize_matrix",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [size, size])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], [extra])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (matrix,) = ReferenceEvaluator(model).run(None, {"x": np.eye(size)})
    if matrix.shape != (out_size, size):
        raise unsupported(node, f"a resize of {size} to {out_size} elements that ONNX's "
                                f"reference computes as {matrix.shape[0]}")
    return matrix


def _resize_by_matrices(node: Node, b: Builder, x: str, out: str,
                        in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> None:
    rank = len(in_shape)
    scales = _resize_scales(node, b, rank)
    resized = [d for d in range(rank) if in_shape[d] != out_shape[d]
               or (scales[d] is not None and scales[d] != 1.0)]
    if any(d < rank - 2 for d in resized):
        raise unsupported(node, f"a resize of dims {resized} of {list(in_shape)} (only the "
                                f"last two)")
    dtype = b.value(x).dtype
    if not np.issubdtype(dtype, np.floating):
        raise unsupported(node, f"a {dtype} resize (floating point only)")
    current, shape = x, tuple(in_shape)
    if not resized:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(x))
        return
    for dim in resized:
        matrix = _interpolation_matrix(node, in_shape[dim], out_shape[dim], scales[dim])
        shape = tuple(out_shape[k] if k == dim else shape[k] for k in range(rank))
        target = out if dim == resized[-1] else b.temp(shape, dtype)
        if dim == rank - 1:  # rows: X @ M^T
            weights = b.constant(np.ascontiguousarray(matrix.T).astype(dtype), "resize_w")
            b.call("Matmul", self=Ref(current), mat2=Ref(weights), out=Ref(target),
                   cubeMathType=KEEP_DTYPE)
        else:  # columns: M @ X, M broadcast over the leading dims
            weights = b.constant(matrix.astype(dtype), "resize_h")
            b.call("Matmul", self=Ref(weights), mat2=Ref(current), out=Ref(target),
                   cubeMathType=KEEP_DTYPE)
        current = target


def _resize_upsample(node: Node, b: Builder, x: str, out: str, in_shape: tuple[int, ...],
                     out_shape: tuple[int, ...]) -> None:
    """The upsample operators' cases (raises ``unsupported`` otherwise)."""
    scales = _constant_input(node, b, 2, "scales")
    if scales is not None and scales.size:
        if scales.size != len(in_shape) or scales[0] != 1 or scales[1] != 1:
            raise unsupported(node, f"scales {scales.tolist()}")
        factors = [float(s) for s in scales[2:]]
    else:
        factors = [o / i for i, o in zip(in_shape[2:], out_shape[2:], strict=True)]
    mode = node.attrs.get("mode", "nearest")
    transform = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    pairs = list(zip(in_shape[2:], out_shape[2:], strict=True))
    if mode == "nearest":
        rounding = node.attrs.get("nearest_mode", "round_prefer_floor")
        integer_factor = all(f == o / i and (o % i == 0 or i % o == 0)
                             for f, (i, o) in zip(factors, pairs, strict=True))
        upscale = all(o % i == 0 for i, o in pairs)
        same = integer_factor and (
            (transform == "asymmetric" and rounding == "floor")
            or (transform in _HALF_PIXEL and rounding in ("round_prefer_floor",
                                                          "round_prefer_ceil") and upscale))
        if not same:
            raise unsupported(node, f"nearest resize with {transform!r} / {rounding!r} and "
                                    f"scales {factors} (only the pixels floor(dst * in / out) "
                                    f"picks)")
        b.call("UpsampleNearest2d", self=Ref(x), outputSize=tuple(out_shape[2:]),
               out=Ref(out))
        return
    if mode == "linear":
        if transform == "align_corners":
            align, scale_args = True, (0.0, 0.0)
        elif transform == "half_pixel" or (transform == "pytorch_half_pixel" and
                                           all(o > 1 for _, o in pairs)):
            align, scale_args = False, tuple(factors)
        else:
            raise unsupported(node, f"linear resize with coordinate_transformation_mode="
                                    f"{transform!r}")
        b.call("UpsampleBilinear2d", self=Ref(x), outputSize=tuple(out_shape[2:]),
               alignCorners=align, scalesH=scale_args[0], scalesW=scale_args[1],
               out=Ref(out))
        return
    raise unsupported(node, f"mode={mode!r}")


# -- padding ---------------------------------------------------------------------------------
@lowering("Pad")
def pad(node: Node, b: Builder) -> None:
    """Constant mode through aclnnConstantPadNd; reflect on the last two dims of a 4-d
    tensor through aclnnReflectionPad2d; reflect, edge and wrap in general as one
    IndexSelect per padded axis with the source index of every output position (computed
    here: negative pads crop). ``pads`` (and ``axes``) must be constants."""
    _only(node, "mode")
    x, out = node.inputs[0], node.outputs[0]
    shape = b.value(x).shape
    pads = _constant_input(node, b, 1, "pads")
    if pads is None:
        raise unsupported(node, "missing pads")
    pads = [int(p) for p in pads.reshape(-1)]
    rank = len(shape)
    axes = _constant_input(node, b, 3, "axes")
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes.reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise unsupported(node, f"pads {pads} for axes {axes}")
    pairs = [(0, 0)] * rank
    for index, axis in enumerate(axes):
        pairs[axis] = (pads[index], pads[index + len(axes)])
    pads = [before for before, _ in pairs] + [after for _, after in pairs]
    mode = node.attrs.get("mode", "constant")
    if mode == "constant":
        fill_input = node.inputs[2] if len(node.inputs) > 2 else ""
        if fill_input and b.constant_of(fill_input) is None:
            _pad_computed_fill(b, x, fill_input, pairs, out)
            return
        value = _constant_input(node, b, 2, "constant_value")
        fill = 0 if value is None or not value.size else value.reshape(()).item()
        b.call("ConstantPadNd", self=Ref(x), pad=_torch_pad(pairs),
               value=Scalar(fill, b.value(x).dtype.name), out=Ref(out))
        return
    if mode == "reflect" and rank == 2 + SPATIAL_2D and pairs[:2] == [(0, 0), (0, 0)] and \
            all(p >= 0 for p in pads):
        b.call("ReflectionPad2d", self=Ref(x), padding=_torch_pad(pairs[2:]), out=Ref(out))
        return
    if mode not in PAD_INDEX:
        raise unsupported(node, f"mode={mode!r}")
    padded = [axis for axis, pair in enumerate(pairs) if pair != (0, 0)]
    if not padded:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(x))
        return
    current, current_shape = x, tuple(shape)
    for axis in padded:
        size, (before, after) = current_shape[axis], pairs[axis]
        if mode == "reflect" and (size < 2 or max(before, after) >= size):
            raise unsupported(node, f"reflect pads {pairs[axis]} of a dim of {size}")
        positions = np.arange(-before, size + after, dtype=np.int64)
        index = PAD_INDEX[mode](positions, size)
        current_shape = tuple(len(index) if k == axis else n for k, n in enumerate(current_shape))
        target = out if axis == padded[-1] else b.temp(current_shape, b.value(x).dtype)
        b.call("IndexSelect", self=Ref(current), dim=axis,
               index=Ref(b.constant(index, "pad_index")), out=Ref(target))
        current = target


def _pad_computed_fill(b: Builder, x: str, fill: str, pairs: list[tuple[int, int]],
                       out: str) -> None:
    """Constant padding with a computed fill value (a one-element tensor, as attention
    graphs compute it): padded with zeros, then the fill taken where a constant mask marks
    the padding (aclnnSWhere: exact for any fill, inf and NaN included)."""
    value = b.value(out)
    padded = _padded(b, x, pairs, 0)
    mask = np.ones(value.shape, np.bool_)
    mask[tuple(slice(max(before, 0), size - max(after, 0))
               for (before, after), size in zip(pairs, value.shape, strict=True))] = False
    fill_value = b.value(fill)
    if math.prod(fill_value.shape) != 1:
        raise AclError(ACL_ERROR_PARSE_MODEL, f"node {b.node.name!r} (Pad): constant_value "
                                              f"{fill!r} holds {math.prod(fill_value.shape)} "
                                              f"values; it must hold one")
    fill = _cast_to(b, fill, value.dtype)
    b.call("SWhere", condition=Ref(b.constant(mask, "pad_mask")), self=Ref(fill),
           other=Ref(padded), out=Ref(out))


def _reflect(positions: np.ndarray, size: int) -> np.ndarray:
    period = 2 * (size - 1)
    folded = np.mod(positions, period)
    return np.where(folded < size, folded, period - folded)


# mode -> source index of each output position (positions may lie outside [0, size))
PAD_INDEX = {"reflect": _reflect,
             "edge": lambda positions, size: np.clip(positions, 0, size - 1),
             "wrap": lambda positions, size: np.mod(positions, size)}
