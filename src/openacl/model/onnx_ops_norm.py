"""ONNX LRN (local response normalization across channels) lowered onto aclnn operators.

CANN has no aclnn LRN (its LRN is a graph operator), so the lowering composes it:
``y = x * (bias + alpha / size * square_sum) ** -beta`` (onnxruntime's form of ONNX's
``x / (...) ** beta``) where ``square_sum[n, c, ...]`` sums ``x ** 2`` over the channels
``[c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]`` clipped to the tensor: the
channel window sum is one aclnnMatmul of a constant (C, C) band matrix with the squares
viewed as (N, C, spatial); then aclnnMuls, aclnnAdds, aclnnPowTensorScalar and aclnnMul.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, Scalar, lowering, unsupported
from openacl.model.onnx_ops import KEEP_DTYPE, _only


@lowering("LRN")
def lrn(node: Node, b: Builder) -> None:
    _only(node, "alpha", "beta", "bias", "size")
    x, out = node.inputs[0], node.outputs[0]
    value = b.value(x)
    shape, dtype = value.shape, value.dtype
    if len(shape) < 2 or not np.issubdtype(dtype, np.floating) and dtype.kind != "V":
        raise unsupported(node, f"a {len(shape)}-d {dtype} input (N, C, ... floating point)")
    if "size" not in node.attrs or int(node.attrs["size"]) < 1:
        raise unsupported(node, f"size={node.attrs.get('size')}")
    size = int(node.attrs["size"])
    alpha = float(node.attrs.get("alpha", 1e-4))
    beta = float(node.attrs.get("beta", 0.75))
    bias = float(node.attrs.get("bias", 1.0))
    channels = shape[1]
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    offsets = np.arange(channels)[None, :] - np.arange(channels)[:, None]  # c' - c
    band = ((offsets >= -before) & (offsets <= after)).astype(dtype)
    grid = (shape[0], channels, math.prod(shape[2:]))
    squares = b.binary("Mul", x, x)
    flat = b.temp(grid, dtype)
    b.view(flat, squares)
    sums = b.temp(grid, dtype)
    b.call("Matmul", self=Ref(b.constant(band, "lrn_band")), mat2=Ref(flat), out=Ref(sums),
           cubeMathType=KEEP_DTYPE)
    name = dtype.name
    b.call("InplaceMuls", selfRef=Ref(sums), other=Scalar(alpha / size, name))
    b.call("InplaceAdds", selfRef=Ref(sums), other=Scalar(bias, name), alpha=None)
    factor = b.temp(grid, dtype)
    b.call("PowTensorScalar", self=Ref(sums), exponent=Scalar(-beta, name), out=Ref(factor))
    scale = b.temp(shape, dtype)
    b.view(scale, factor)
    b.call("Mul", self=Ref(x), other=Ref(scale), out=Ref(out))
