"""ONNX Einsum lowered onto permutes, sums and batched matrix products.

Any valid equation (explicit ``->`` or implicit output, ``...`` broadcast dims, repeated
labels within a term, any number of operands) becomes, for floating-point operands:

1. per operand: a ``...`` dim of size 1 where another operand has it larger is dropped
   (the operand is constant along it: broadcast); a label repeated within the term takes the
   diagonal (one IndexSelect of the flattened operand with positions computed here); a
   label no other operand and not the output has is summed out (ReduceSum);
2. operands contracted left to right: the labels both have and a later operand or the
   output needs are batch dims, the ones both have and nothing later needs are summed by
   the product: aclnnMatmul of (batch, rows, summed) by (batch, summed, columns), its
   operands permuted and viewed into that form (a product with nothing summed is a
   broadcast aclnnMul);
3. the result permuted into the output's label order (zero-copy when it already is).

So ``bij,bjk->bik`` is one Matmul, ``bhid,bhjd->bhij`` a permute and a Matmul, ``ij->ji`` a
Permute, ``i,i->`` a (1, n) by (n, 1) product. Integer operands go to aclnnEinsum (the
products above are floating-point operators).
"""

from __future__ import annotations

import math
import string

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, RefList, lowering, unsupported
from openacl.model.onnx_ops import KEEP_DTYPE, _cast_to, _only

LETTERS = frozenset(string.ascii_letters)
ELLIPSIS = "..."


def parse_equation(node: Node, equation: str, ranks: list[int]
                   ) -> tuple[list[list[str]], list[str]]:
    """The labels of each operand's dims and of the output's, ``...`` expanded into labels
    ``"...0"``, ``"...1"``... aligned from the right (ONNX/numpy broadcasting)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise unsupported(node, f"equation {equation!r} for {len(ranks)} operands")
    spans: list[int] = []
    labels: list[list[str]] = []
    for term, rank in zip(terms, ranks, strict=True):
        letters = term.replace(ELLIPSIS, "")
        if any(ch not in LETTERS for ch in letters) or term.count(ELLIPSIS) > 1:
            raise unsupported(node, f"equation term {term!r}")
        span = rank - len(letters) if ELLIPSIS in term else 0
        if span < 0 or (ELLIPSIS not in term and len(letters) != rank):
            raise unsupported(node, f"term {term!r} for a {rank}-d operand")
        spans.append(span)
    width = max(spans, default=0)
    for term, span in zip(terms, spans, strict=True):
        head, _, tail = term.partition(ELLIPSIS)
        broadcast = [f"{ELLIPSIS}{k}" for k in range(width - span, width)]
        labels.append(list(head) + (broadcast if ELLIPSIS in term else []) + list(tail))
    dims = [f"{ELLIPSIS}{k}" for k in range(width)]
    if arrow:
        letters = rhs.replace(ELLIPSIS, "")
        if any(ch not in LETTERS for ch in letters) or rhs.count(ELLIPSIS) > 1 or \
                len(set(letters)) != len(letters):
            raise unsupported(node, f"equation output {rhs!r}")
        if width and ELLIPSIS not in rhs:
            raise unsupported(node, f"equation {equation!r} (its '...' dims are not in the "
                                    f"output)")
        head, _, tail = rhs.partition(ELLIPSIS)
        output = list(head) + (dims if ELLIPSIS in rhs else []) + list(tail)
        known = {label for term in labels for label in term}
        if any(label not in known for label in output):
            raise unsupported(node, f"equation output {rhs!r} with a label no operand has")
    else:  # implicit: the broadcast dims, then the labels used once, alphabetically
        counts: dict[str, int] = {}
        for term in terms:
            for ch in term.replace(ELLIPSIS, ""):
                counts[ch] = counts.get(ch, 0) + 1
        output = dims + sorted(ch for ch, n in counts.items() if n == 1)
    return labels, output


class _Operand:
    """A value with one label per dim."""

    def __init__(self, name: str, labels: list[str]) -> None:
        self.name, self.labels = name, labels


@lowering("Einsum")
def einsum(node: Node, b: Builder) -> None:
    _only(node, "equation")
    out = node.outputs[0]
    dtype = b.value(out).dtype
    equation = node.attrs["equation"]
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    inputs = [_cast_to(b, name, dtype) for name in node.inputs]
    if dtype.kind in "iub":
        b.call("Einsum", tensors=RefList(tuple(inputs)), equation=equation, output=Ref(out))
        return
    labels, output = parse_equation(node, equation, [len(b.value(n).shape) for n in inputs])
    sizes: dict[str, int] = {}
    for name, term in zip(inputs, labels, strict=True):
        for label, size in zip(term, b.value(name).shape, strict=True):
            known = sizes.get(label, size)
            # a letter's sizes must agree; the '...' dims broadcast (size 1 stretches)
            if known != size and (not label.startswith(ELLIPSIS) or 1 not in (known, size)):
                raise unsupported(node, f"label {label!r} of sizes {known} and {size}")
            sizes[label] = max(known, size)
    operands = [_Operand(name, term) for name, term in zip(inputs, labels, strict=True)]
    for index, operand in enumerate(operands):
        _drop_broadcast(b, operand, sizes)
        _take_diagonal(b, operand)
        others = {label for k, o in enumerate(operands) if k != index for label in o.labels}
        _sum_out(b, operand, [label for label in operand.labels
                              if label not in others and label not in output])
    result = operands[0]
    for position in range(1, len(operands)):
        later = set(output) | {label for o in operands[position + 1:] for label in o.labels}
        result = _contract(b, result, operands[position], later)
    _sum_out(b, result, [label for label in result.labels if label not in output])
    _finish(b, result, output, out)


def _permuted(b: Builder, operand: _Operand, order: list[str]) -> str:
    """``operand`` with its dims in the label order ``order`` (itself when they are)."""
    if order == operand.labels:
        return operand.name
    value = b.value(operand.name)
    dims = tuple(operand.labels.index(label) for label in order)
    moved = b.temp(tuple(value.shape[d] for d in dims), value.dtype)
    b.call("Permute", self=Ref(operand.name), dims=dims, out=Ref(moved))
    return moved


def _drop_broadcast(b: Builder, operand: _Operand, sizes: dict[str, int]) -> None:
    shape = b.value(operand.name).shape
    keep = [k for k, label in enumerate(operand.labels)
            if not (shape[k] == 1 and sizes[label] > 1)]
    if len(keep) == len(operand.labels):
        return
    operand.name = b.reshaped(operand.name, tuple(shape[k] for k in keep))
    operand.labels = [operand.labels[k] for k in keep]


def _take_diagonal(b: Builder, operand: _Operand) -> None:
    """Repeated labels: the elements where their indices agree (``ii->i``)."""
    if len(set(operand.labels)) == len(operand.labels):
        return
    value = b.value(operand.name)
    unique = list(dict.fromkeys(operand.labels))
    size_of = dict(zip(operand.labels, value.shape, strict=True))
    grid = np.indices([size_of[label] for label in unique], dtype=np.int64)
    strides = [math.prod(value.shape[k + 1:]) for k in range(len(value.shape))]
    positions = sum(grid[unique.index(label)] * stride
                    for label, stride in zip(operand.labels, strides, strict=True))
    flat = b.reshaped(operand.name, (math.prod(value.shape),))
    picked = b.temp((positions.size,), value.dtype)
    b.call("IndexSelect", self=Ref(flat), dim=0,
           index=Ref(b.constant(np.asarray(positions, np.int64).reshape(-1), "diagonal")),
           out=Ref(picked))
    operand.name = b.reshaped(picked, tuple(size_of[label] for label in unique))
    operand.labels = unique


def _sum_out(b: Builder, operand: _Operand, labels: list[str]) -> None:
    if not labels:
        return
    value = b.value(operand.name)
    dims = tuple(operand.labels.index(label) for label in labels)
    kept = [k for k in range(len(operand.labels)) if k not in dims]
    summed = b.temp(tuple(value.shape[k] for k in kept), value.dtype)
    b.call("ReduceSum", self=Ref(operand.name), dims=dims, keepDims=False, dtype=value.dtype,
           out=Ref(summed))
    operand.name, operand.labels = summed, [operand.labels[k] for k in kept]


def _contract(b: Builder, left: _Operand, right: _Operand, later: set[str]) -> _Operand:
    """The product of two operands, summed over the labels both have and ``later`` does
    not need; the result has the batch labels, then left's, then right's."""
    _sum_out(b, left, [label for label in left.labels
                       if label not in right.labels and label not in later])
    _sum_out(b, right, [label for label in right.labels
                        if label not in left.labels and label not in later])
    batch = [label for label in left.labels if label in right.labels and label in later]
    summed = [label for label in left.labels if label in right.labels and label not in later]
    rows = [label for label in left.labels if label not in right.labels]
    columns = [label for label in right.labels if label not in left.labels]
    size = dict(zip(left.labels, b.value(left.name).shape, strict=True))
    size.update(zip(right.labels, b.value(right.name).shape, strict=True))
    batch_shape = tuple(size[label] for label in batch)
    m = math.prod(size[label] for label in rows)
    n = math.prod(size[label] for label in columns)
    k = math.prod(size[label] for label in summed)
    dtype = b.value(left.name).dtype
    a = b.reshaped(_permuted(b, left, batch + rows + summed), (*batch_shape, m, k))
    c = b.reshaped(_permuted(b, right, batch + summed + columns), (*batch_shape, k, n))
    product = b.temp((*batch_shape, m, n), dtype)
    if summed:
        b.call("Matmul", self=Ref(a), mat2=Ref(c), out=Ref(product), cubeMathType=KEEP_DTYPE)
    else:  # nothing summed: an outer product per batch, broadcast
        b.call("Mul", self=Ref(a), other=Ref(c), out=Ref(product))
    shape = (*batch_shape, *(size[label] for label in rows),
             *(size[label] for label in columns))
    return _Operand(b.reshaped(product, shape), batch + rows + columns)


def _finish(b: Builder, result: _Operand, output: list[str], out: str) -> None:
    """Write ``result`` into ``out`` in the output's label order."""
    if result.labels == output:
        b.view(out, result.name)
        return
    dims = tuple(result.labels.index(label) for label in output)
    b.call("Permute", self=Ref(result.name), dims=dims, out=Ref(out))
