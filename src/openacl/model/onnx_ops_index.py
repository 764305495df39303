"""ONNX gathers and scatters with index tensors: GatherElements, GatherND (``batch_dims``),
ScatterElements (and the deprecated Scatter) and ScatterND, every ``reduction``.

* GatherElements: aclnnGather (``torch.gather``) along ``axis``.
* GatherND: aclnnGatherNd (negative indices counted from the end by the operator,
  ``negativeIndexSupport``); ``batch_dims`` > 0 flattens the batch dims into one and puts
  each row's batch number in front of its index tuple, so one GatherNd serves every batch.
* ScatterElements: aclnnScatter (``reduce`` 0 none, 1 add, 2 mul) or aclnnScatterReduce
  (3 max, 4 min) along ``axis``, ``includeSelf`` true (ONNX starts from ``data``).
* ScatterND: ``reduction="none"`` is aclnnScatterNd; the reductions view ``data`` as rows
  (the addressed dims) by columns (the rest), turn each index tuple into its row number,
  and scatter-reduce whole rows along dim 0 (aclnnScatter / aclnnScatterReduce).

Negative indices count from the end of their dim, as ONNX allows ([-s, s-1]); constant
index tensors are wrapped here, computed ones by a few elementwise operators before the
scatter. An index still out of range is refused by the operator's kernel at run time: the
run fails with an ``AclError`` naming the operator and the value, never writing out of
bounds. (A ScatterND reduction's out-of-range tuple is first mapped to the row count, an
index its scatter refuses, so that no wrong row is addressed.)
"""

from __future__ import annotations

import math

import numpy as np

from openacl.model.ir import Node
from openacl.model.lowering import Builder, Ref, RefList, Scalar, lowering, unsupported
from openacl.model.onnx_ops import _cast_to, _only, _wrap_negative

# ONNX reduction -> (aclnn operator, its reduce value)
SCATTER_REDUCTIONS = {"none": ("Scatter", 0), "add": ("Scatter", 1), "mul": ("Scatter", 2),
                      "max": ("ScatterReduce", 3), "min": ("ScatterReduce", 4)}
INT64 = np.dtype(np.int64)


def _axis(node: Node, b: Builder, rank: int) -> int:
    axis = int(node.attrs.get("axis", 0))
    if not -rank <= axis < max(rank, 1):
        raise unsupported(node, f"axis={axis} for a {rank}-d input")
    return axis % max(rank, 1)


def _reduction(node: Node) -> str:
    reduction = node.attrs.get("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    if reduction not in SCATTER_REDUCTIONS:
        raise unsupported(node, f"reduction={reduction!r}")
    return reduction


def _wrapped_indices(b: Builder, indices: str, size: int) -> str:
    """``indices`` with negatives counted from the end of a dim of ``size``: a constant
    wrapped here (out-of-range values left for the kernel to refuse), else computed."""
    constant = b.constant_of(indices)
    if constant is not None:
        return b.constant(np.where(constant < 0, constant + size, constant).astype(
            constant.dtype), "indices")
    return _wrap_negative(b, indices, size)


def _wrapped_tuples(b: Builder, indices: str, sizes: tuple[int, ...]) -> str:
    """Index tuples (the last dim of ``indices``) with negatives counted from the end of
    each addressed dim: ``indices + sizes * (indices < 0)``."""
    constant = b.constant_of(indices)
    limits = np.array(sizes, np.int64)
    if constant is not None:
        return b.constant(np.where(constant < 0, constant + limits, constant).astype(
            constant.dtype), "indices")
    value = b.value(indices)
    negative = b.temp(value.shape, np.bool_)
    b.call("LtScalar", self=Ref(indices), other=Scalar(0, value.dtype.name), out=Ref(negative))
    shift = b.temp(value.shape, value.dtype)
    b.call("Cast", self=Ref(negative), dtype=value.dtype, out=Ref(shift))
    b.call("InplaceMul", selfRef=Ref(shift), other=Ref(b.constant(limits.astype(value.dtype),
                                                                  "dim_sizes")))
    wrapped = b.temp(value.shape, value.dtype)
    b.call("Add", self=Ref(indices), other=Ref(shift), alpha=None, out=Ref(wrapped))
    return wrapped


# -- gathers ------------------------------------------------------------------------------------
@lowering("GatherElements")
def gather_elements(node: Node, b: Builder) -> None:
    """``out[i][j] = data[indices[i][j]][j]`` along ``axis`` (``torch.gather``)."""
    _only(node, "axis")
    data, indices = node.inputs
    shape = b.value(data).shape
    axis = _axis(node, b, len(shape))
    if len(b.value(indices).shape) != len(shape):
        raise unsupported(node, "indices of another rank than data")
    index = _wrapped_indices(b, _cast_to(b, indices, INT64), shape[axis] if shape else 1)
    b.call("Gather", self=Ref(data), dim=axis, index=Ref(index), out=Ref(node.outputs[0]))


@lowering("GatherND")
def gather_nd(node: Node, b: Builder) -> None:
    """aclnnGatherNd; with ``batch_dims`` the batch dims become one and each index tuple
    gains its batch number in front."""
    _only(node, "batch_dims")
    data, indices = node.inputs
    out = node.outputs[0]
    batch = int(node.attrs.get("batch_dims", 0))
    data_shape, index_shape = b.value(data).shape, b.value(indices).shape
    if batch == 0:
        b.call("GatherNd", self=Ref(data), indices=Ref(indices), negativeIndexSupport=True,
               out=Ref(out))
        return
    depth = index_shape[-1] if index_shape else 0
    if not 0 < batch < len(index_shape) or batch + depth > len(data_shape) or \
            tuple(data_shape[:batch]) != tuple(index_shape[:batch]):
        raise unsupported(node, f"batch_dims={batch} with data {list(data_shape)} and "
                                f"indices {list(index_shape)}")
    rows = math.prod(data_shape[:batch])
    middle = math.prod(index_shape[batch:-1])
    dtype = b.value(indices).dtype
    flat_data = b.reshaped(data, (rows, *data_shape[batch:]))
    tuples = b.reshaped(indices, (rows, middle, depth))
    numbers = b.constant(np.broadcast_to(np.arange(rows, dtype=dtype).reshape(rows, 1, 1),
                                         (rows, middle, 1)).copy(), "batch_numbers")
    batched = b.temp((rows, middle, depth + 1), dtype)
    b.call("Cat", tensors=RefList((numbers, tuples)), dim=2, out=Ref(batched))
    result = b.written_as(out, (rows, middle, *data_shape[batch + depth:]))
    b.call("GatherNd", self=Ref(flat_data), indices=Ref(batched), negativeIndexSupport=True,
           out=Ref(result))


# -- scatters -----------------------------------------------------------------------------------
@lowering("ScatterElements", "Scatter")
def scatter_elements(node: Node, b: Builder) -> None:
    """``out = data``, then ``out[indices[i][j]][j] = f(out[...], updates[i][j])`` along
    ``axis`` for ``reduction`` none, add, mul, max or min."""
    _only(node, "axis", "reduction")
    data, indices, updates = node.inputs
    out = node.outputs[0]
    shape = b.value(data).shape
    axis = _axis(node, b, len(shape))
    index_shape, update_shape = b.value(indices).shape, b.value(updates).shape
    if index_shape != update_shape or len(index_shape) != len(shape):
        raise unsupported(node, f"indices {list(index_shape)} and updates "
                                f"{list(update_shape)} that differ or whose rank is not "
                                f"data's ({len(shape)})")
    op, reduce = SCATTER_REDUCTIONS[_reduction(node)]
    index = _wrapped_indices(b, indices, shape[axis] if shape else 1)
    extra = {"includeSelf": True} if op == "ScatterReduce" else {}
    b.call(op, self=Ref(data), dim=axis, index=Ref(index), src=Ref(updates), reduce=reduce,
           **extra, out=Ref(out))


@lowering("ScatterND")
def scatter_nd(node: Node, b: Builder) -> None:
    """``out = data``, then ``out[indices[i...]] = f(out[...], updates[i...])``."""
    _only(node, "reduction")
    data, indices, updates = node.inputs
    out = node.outputs[0]
    shape = b.value(data).shape
    index_shape = b.value(indices).shape
    depth = index_shape[-1] if index_shape else 0
    if not index_shape or not 1 <= depth <= len(shape):
        raise unsupported(node, f"indices {list(index_shape)} for data {list(shape)}")
    expected = (*index_shape[:-1], *shape[depth:])
    if b.value(updates).shape != expected:
        raise unsupported(node, f"updates {list(b.value(updates).shape)} (indices "
                                f"{list(index_shape)} and data {list(shape)} need "
                                f"{list(expected)})")
    reduction = _reduction(node)
    sizes = tuple(shape[:depth])
    count = math.prod(index_shape[:-1])
    if count == 0:
        b.call("InplaceCopy", selfRef=Ref(out), src=Ref(data))
        return
    if reduction == "none":
        b.call("ScatterNd", data=Ref(data), indices=Ref(_wrapped_tuples(b, indices, sizes)),
               updates=Ref(updates), out=Ref(out))
        return
    rows, width = math.prod(sizes), math.prod(shape[depth:])
    row_numbers = _row_numbers(b, b.reshaped(indices, (count, depth)), sizes)
    spread = b.temp((count, width), INT64)
    b.call("Expand", self=Ref(b.reshaped(row_numbers, (count, 1))), size=(count, width),
           out=Ref(spread))
    op, reduce = SCATTER_REDUCTIONS[reduction]
    extra = {"includeSelf": True} if op == "ScatterReduce" else {}
    b.call(op, self=Ref(b.reshaped(data, (rows, width))), dim=0, index=Ref(spread),
           src=Ref(b.reshaped(updates, (count, width))), reduce=reduce, **extra,
           out=Ref(b.written_as(out, (rows, width))))


def _row_numbers(b: Builder, tuples: str, sizes: tuple[int, ...]) -> str:
    """The row-major number of each index tuple (rows of ``tuples``, negatives counted from
    the end); a tuple with any entry out of range becomes ``prod(sizes)``, a row number the
    scatter refuses."""
    count, depth = b.value(tuples).shape
    rows = math.prod(sizes)
    strides = np.array([math.prod(sizes[k + 1:]) for k in range(depth)], np.int64)
    limits = np.array(sizes, np.int64)
    constant = b.constant_of(tuples)
    if constant is not None:
        wrapped = np.where(constant < 0, constant + limits, constant).astype(np.int64)
        valid = ((wrapped >= 0) & (wrapped < limits)).all(axis=1)
        return b.constant(np.where(valid, wrapped @ strides, rows).astype(np.int64), "rows")
    wrapped = _cast_to(b, _wrapped_tuples(b, tuples, sizes), INT64)
    low = b.temp((count, depth), np.bool_)
    b.call("GeScalar", self=Ref(wrapped), other=Scalar(0, "int64"), out=Ref(low))
    high = b.temp((count, depth), np.bool_)
    b.call("LtTensor", self=Ref(wrapped), other=Ref(b.constant(limits, "dim_sizes")),
           out=Ref(high))
    b.call("InplaceLogicalAnd", selfRef=Ref(low), other=Ref(high))
    valid = b.temp((count,), np.bool_)
    b.call("All", self=Ref(low), dim=(1,), keepdim=False, out=Ref(valid))
    weighted = b.temp((count, depth), INT64)
    b.call("Mul", self=Ref(wrapped), other=Ref(b.constant(strides, "row_strides")),
           out=Ref(weighted))
    numbers = b.temp((count,), INT64)
    b.call("ReduceSum", self=Ref(weighted), dims=(1,), keepDims=False, dtype=INT64,
           out=Ref(numbers))
    checked = b.temp((count,), INT64)
    b.call("SWhere", condition=Ref(valid), self=Ref(numbers),
           other=Ref(b.constant(np.array(rows, np.int64), "row_count")), out=Ref(checked))
    return checked
