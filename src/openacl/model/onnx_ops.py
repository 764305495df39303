"""ONNX operators lowered onto aclnn operators (one ``@lowering`` per ONNX op type).

Semantics follow the ONNX operator specification; each lowering refuses (``unsupported``)
any attribute or input form it does not implement, naming the node, op and attribute.
"""

from __future__ import annotations

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, Scalar, lowering, unsupported

KEEP_DTYPE = 0  # cubeMathType: compute in the tensors' dtype


def _only(node: Node, *known: str) -> None:
    """Refuse attributes this lowering does not implement."""
    for name in node.attrs:
        if name not in known:
            raise unsupported(node, f"attribute {name!r}")


# -- elementwise ---------------------------------------------------------------------------------
_BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Max": "Maximum",
           "Min": "Minimum", "Pow": "PowTensorTensor"}
_WITH_ALPHA = {"Add", "Sub"}  # aclnn signatures that take an alpha scalar


@lowering(*_BINARY)
def binary(node: Node, b: Builder) -> None:
    _only(node)
    if node.op_type in ("Max", "Min") and len(node.inputs) != 2:
        raise unsupported(node, f"{len(node.inputs)} inputs (only 2)")
    x, y = node.inputs
    args = {"self": Ref(x), "other": Ref(y), "out": Ref(node.outputs[0])}
    op = _BINARY[node.op_type]
    if op == "PowTensorTensor":
        args = {"self": Ref(x), "exponent": Ref(y), "out": Ref(node.outputs[0])}
    if node.op_type in _WITH_ALPHA:
        args["alpha"] = None
    if node.op_type == "Div" and np.issubdtype(b.value(x).dtype, np.integer):
        b.call("DivMod", self=Ref(x), other=Ref(y), mode=1, out=Ref(node.outputs[0]))
        return  # ONNX integer Div truncates
    b.call(op, **args)


_UNARY = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
          "Sqrt": "Sqrt", "Neg": "Neg", "Abs": "Abs", "Reciprocal": "Reciprocal",
          "Erf": "Erf", "Floor": "Floor", "Ceil": "Ceil", "Sin": "Sin", "Cos": "Cos",
          "Sign": "Sign", "Not": "LogicalNot"}


@lowering(*_UNARY)
def unary(node: Node, b: Builder) -> None:
    _only(node)
    b.call(_UNARY[node.op_type], self=Ref(node.inputs[0]), out=Ref(node.outputs[0]))


# -- linear algebra ------------------------------------------------------------------------------
@lowering("MatMul")
def matmul(node: Node, b: Builder) -> None:
    _only(node)
    b.call("Matmul", self=Ref(node.inputs[0]), mat2=Ref(node.inputs[1]),
           out=Ref(node.outputs[0]), cubeMathType=KEEP_DTYPE)


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
    b.call("Addmm", self=Ref(c), mat1=Ref(operands[0]), mat2=Ref(operands[1]),
           beta=Scalar(beta, dtype), alpha=Scalar(alpha, dtype), out=Ref(out),
           cubeMathType=KEEP_DTYPE)


# -- shape only (zero-copy views) -----------------------------------------------------------
@lowering("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def view(node: Node, b: Builder) -> None:
    _only(node, "allowzero", "axis", "axes")
    b.view(node.outputs[0], node.inputs[0])


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
