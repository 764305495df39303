"""Indexing operators: advanced indexing (aclnnIndex, aclnnIndexPutImpl), index_add /
index_fill along a dim, take, the GatherV2/V3 gathers and masked_scatter, with CANN's
argument lists.

Semantics are CANN's, which are PyTorch's:

* ``Index``: ``out = self[indices[0], indices[1], ...]``. An empty tensor in ``indices``
  (no elements: torch_npu passes one for a ``:``) takes its dim whole; an integer tensor
  picks along its dim (negative values count from the end); a BOOL tensor is a mask over as
  many dims as it has. The picked dims broadcast together and land where NumPy and PyTorch
  put them (in place when adjacent, else first).
* ``IndexPutImpl``: ``selfRef[indices] = values`` (``accumulate`` false; where several
  positions repeat, the last value wins) or ``selfRef[indices] += values``, every repeat
  adding in order.
* ``IndexAdd``/``IndexAddV2``: ``out = self``, then ``out.index_add_(dim, index, source,
  alpha)``; ``IndexFill``/``IndexFillTensor``: ``out = self`` with the slices at ``index``
  along ``dim`` set to ``value`` (negative positions count from the end; positions out of
  range are skipped, as CANN documents).
* ``Take``: ``self.flatten()[index]``; ``GatherV2``: ``np.take(self, index, dim)`` (index of
  any rank); ``GatherV3`` adds TensorFlow's ``batchDims``.
* ``InplaceMaskedScatter``: ``selfRef.masked_scatter_(mask, source)``.
* ``ExpandIntoJaggedPermute``: fbgemm's jagged permute expansion (see its docstring).

Sums of half-precision values accumulate in float32 and round once into the result. A mask
decides how many elements an indexing picks, which phase 1 cannot see: an output sized for
the most elements (as the one-shot helper allocates it) receives them at its start and then
reports its real shape through its view shape (``aclGetViewShape``), as CANN's
data-dependent operators do (``report_shape``). Index values live in device memory: one out
of range is found by the kernel, which raises, so the stream fails and its next synchronize
names the operator, the argument and the value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import (
    ALL_DTYPES,
    BOOL_DTYPES,
    Call,
    Kernel,
    TensorArg,
    like,
)
from openacl.ops.fpstate import ignore_floating_point
from openacl.ops.movement import (
    BF16,
    C64,
    C128,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    INDEX_DTYPES,
    U8,
    _check_index_range,
    _fill_value,
)
from openacl.ops.registry import register, register_inplace
from openacl.tensor import AclTensor, contiguous_strides, lookup_tensor

# supported dtypes per aclnn document (numpy-holdable ones)
INDEX_SELF_DTYPES = F32 | F16 | BF16 | F64 | I32 | I64 | I16 | I8 | U8 | BOOL_DTYPES | C64
INDEX_INDICES_DTYPES = INDEX_DTYPES | BOOL_DTYPES
INDEX_PUT_DTYPES = F32 | F16 | F64 | I32 | I64 | I16 | I8 | U8 | BOOL_DTYPES | BF16
INDEX_ADD_DTYPES = F32 | F16 | I32 | I16 | I8 | U8 | F64 | I64 | BOOL_DTYPES | BF16
INDEX_ADD_FAST_DTYPES = F32 | F16 | I32 | I16 | BF16  # aclnnIndexAddV2's mode 0
INDEX_ADD_FAST_DIMS = (0, -2)  # mode 0 takes dim 0 or -2 only
INDEX_FILL_DTYPES = F16 | F32 | I32 | I64 | BOOL_DTYPES | BF16 | I8 | U8 | I16 | F64
TAKE_DTYPES = ALL_DTYPES
GATHER_V2_DTYPES = F32 | F16 | I64 | I32 | I16 | I8 | U8 | BOOL_DTYPES | F64 | C64 | C128 | BF16
GATHER_V3_DTYPES = F32 | F16 | I64 | I32 | I16 | I8 | U8 | BOOL_DTYPES | F64 | C64
GATHER_V3_MODES = (0, 1, 2)  # 0 scattered, 1 clustered indices (speed hints), 2 out-of-range
GATHER_V3_OUT_OF_RANGE = 2  # mode whose out-of-range indices gather zeros
MASKED_SCATTER_DTYPES = INDEX_PUT_DTYPES
MASK_DTYPES = BOOL_DTYPES | U8
MAX_INDEX_DIMS = 8
JAGGED_DTYPES = I32  # aclnnExpandIntoJaggedPermute's permute and offsets


# -- host round trips ---------------------------------------------------------------------------
def host(view: Any) -> np.ndarray:
    """A kernel's view as a host array: itself on the CPU backend, a copy from a device
    (these operators' work is data-dependent gathering, done on the host)."""
    if type(view) is np.ndarray or isinstance(view, np.generic):
        return view
    if isinstance(view, (list, tuple)):
        return np.asarray(view)
    return view.get()


def store(view: Any, result: Any) -> None:
    """Write the host array ``result`` into the kernel's output ``view`` (cast, broadcast);
    nothing to do when it already is that view."""
    if result is not view:
        with ignore_floating_point():  # (a sum beyond float16's range becomes inf)
            np.copyto(view, like(view, np.asarray(result)), casting="unsafe")


def grouped_sums(targets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct targets, the sum of the rows of each): the rows grouped by target with a
    stable sort and each group summed in its original order (bools: or-ed, as torch adds
    them)."""
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ufunc = np.logical_or if rows.dtype == np.bool_ else np.add
    return ordered[starts], ufunc.reduceat(rows[order], starts, axis=0)


def add_rows(total: np.ndarray, targets: np.ndarray, rows: np.ndarray) -> None:
    """``total[targets[i]] += rows[i]`` for every ``i``, repeated targets adding every row
    (``np.add.at``'s result at a fraction of its cost)."""
    if targets.size:
        hit, sums = grouped_sums(targets, rows)
        total[hit] += sums


def take_into(view: Any, source: np.ndarray, index: np.ndarray, axis: int | None) -> None:
    """``np.take(source, index, axis)`` of range-checked indices into the output ``view``:
    written in place when it is a host array (no intermediate copy), else stored."""
    if type(view) is np.ndarray and view.dtype == source.dtype:
        np.take(source, index, axis, out=view, mode="clip")  # (clip: checked, unbuffered)
    else:
        store(view, np.take(source, index, axis))


# -- data-dependent output shapes -----------------------------------------------------------------
def report_target(c: Call, name: str) -> AclTensor | None:
    """The caller's aclTensor behind output ``name`` (None in infer mode), whose view shape
    the kernel rewrites once it knows the real size; the output must be contiguous."""
    out = c[name]
    if out is None:
        return None
    if not out.meta.is_contiguous():
        raise c.fail(name, "must be contiguous: its real size is known only after the run")
    return lookup_tensor(out.meta.handle, name)


def report_shape(target: AclTensor | None, view: Any, result: Any, op: str, name: str) -> None:
    """Write ``result`` into the contiguous output ``view`` (sized for the most elements),
    then give the caller's tensor ``target`` the result's shape as its view shape."""
    result = np.asarray(result)
    if tuple(view.shape) == tuple(result.shape):
        store(view, result)
        return
    if result.size > view.size or target is None:
        raise RuntimeError(f"aclnn{op}: argument '{name}' has shape {list(view.shape)}, too "
                           f"small for the {list(result.shape)} result")
    flat = view.reshape(-1)  # (a view: the output is contiguous)
    store(flat[:result.size], result.reshape(-1))
    target.strides = tuple(contiguous_strides(result.shape))
    target.view_dims = tuple(int(n) for n in result.shape)


# -- advanced indexing ----------------------------------------------------------------------------
def _index_plan(c: Call, name: str, shape: tuple[int, ...], upper_bound: bool
                ) -> tuple[list[tuple[str, TensorArg]], tuple[int, ...], bool]:
    """Validate the tensor list ``name`` against ``shape``; returns the plan (per entry:
    "skip", "int" or "mask", with its tensor), the result shape and whether a mask makes it
    data-dependent. A mask's count is taken as its element count (the most it can pick)
    when ``upper_bound``, else left to the kernel (-1)."""
    entries: list[tuple[str, TensorArg]] = []
    picked: list[tuple[int, ...]] = []
    positions: list[int] = []
    dim, masked = 0, False
    for tensor in c[name]:
        if tensor.numel == 0 and tensor.ndim <= 1:
            entries.append(("skip", tensor))
            dim += 1
            continue
        c.check_dtype(name, INDEX_INDICES_DTYPES, tensor.dtype)
        if tensor.dtype == np.bool_:
            span = max(tensor.ndim, 1)
            if tensor.shape != shape[dim:dim + tensor.ndim]:
                raise c.fail(name, f"a mask of shape {list(tensor.shape)} must match dims "
                                   f"{dim}..{dim + span - 1} of {list(shape)}")
            entries.append(("mask", tensor))
            picked.append((tensor.numel if upper_bound else -1,))
            positions.extend(range(dim, dim + tensor.ndim))
            masked = True
            dim += tensor.ndim
        else:
            entries.append(("int", tensor))
            picked.append(tensor.shape)
            positions.append(dim)
            dim += 1
        if dim > max(len(shape), 1):
            raise c.fail(name, f"indexes {dim} dims; self has {len(shape)}")
    if len(c[name]) > max(len(shape), 1):
        raise c.fail(name, f"holds {len(c[name])} tensors; self has {len(shape)} dims")
    try:
        middle = tuple(np.broadcast_shapes(*[tuple(1 if n < 0 else n for n in p)
                                             for p in picked])) if picked else ()
    except ValueError:
        raise c.fail(name, f"index shapes {[list(p) for p in picked]} do not broadcast "
                           f"together") from None
    if masked and not upper_bound and middle:  # the mask's count: known to the kernel only
        middle = (*middle[:-1], -1)
    if not positions:
        return entries, shape, masked
    rest = [k for k in range(len(shape)) if k not in positions]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    if adjacent:
        before = [shape[k] for k in rest if k < positions[0]]
        after = [shape[k] for k in rest if k > positions[-1]]
        return entries, (*before, *middle, *after), masked
    return entries, (*middle, *(shape[k] for k in rest)), masked


def _index_tuple(op: str, name: str, entries: list[tuple[str, TensorArg]], views: list,
                 shape: tuple[int, ...]) -> tuple:
    """The NumPy indexing tuple of a plan, each integer index range-checked and wrapped."""
    key: list[Any] = []
    dim = 0
    for (kind, tensor), view in zip(entries, views, strict=True):
        if kind == "skip":
            key.append(slice(None))
            dim += 1
        elif kind == "mask":
            key.append(host(view))
            dim += tensor.ndim
        else:
            key.append(_check_index_range(op, name, host(view), shape[dim], negative=True))
            dim += 1
    return tuple(key)


def declare_sized_out(c: Call, name: str, shape: Sequence[int], dtype: np.dtype,
                      most: Sequence[int]) -> AclTensor | None:
    """Declare an output whose size the data decides: ``shape`` gives its known dims (-1 for
    a counted one), ``most`` the largest it can be, which the one-shot helper allocates.
    A caller's output needs the rank, dtype and known dims, and contiguous memory (the
    kernel checks that the count fits); returns its aclTensor for ``report_shape``."""
    out = c[name]
    if out is None:
        c.check_out(name, most, dtype, exact_dtype=True)
        return None
    if out.dtype != dtype:
        raise c.fail(name, f"dtype must be {dtype}")
    if out.ndim != len(shape) or any(n >= 0 and n != m for n, m in zip(shape, out.shape,
                                                                      strict=True)):
        raise c.fail(name, f"shape must be {['?' if n < 0 else n for n in shape]} (? counted "
                           f"from the data, at most {list(most)})")
    c.check_no_overlap(name, out)
    c.inferred[c.aliases.get(name, name)] = (out.shape, out.dtype)
    return report_target(c, name)


@register("Index", "self: tensor, indices: tensors, out: tensor!")
def index(c: Call) -> Kernel:
    """``out = self[indices]``: PyTorch's advanced indexing with a tensor per dim (an empty
    one takes its dim whole, a BOOL one is a mask)."""
    self = c.tensor("self")
    c.check_dtype("self", INDEX_SELF_DTYPES)
    if self.ndim > MAX_INDEX_DIMS:
        raise c.fail("self", f"must have at most {MAX_INDEX_DIMS} dims")
    entries, shape, masked = _index_plan(c, "indices", self.shape, upper_bound=False)
    target = None
    if masked:
        most = _index_plan(c, "indices", self.shape, upper_bound=True)[1]
        target = declare_sized_out(c, "out", shape, self.dtype, most)
    else:
        c.check_out("out", shape, self.dtype, exact_dtype=True)

    def kernel(v) -> None:
        x = host(v["self"])
        key = _index_tuple("Index", "indices", entries, v["indices"], self.shape)
        result = np.atleast_1d(x)[key] if self.ndim == 0 else x[key]
        report_shape(target, v["out"], result, "Index", "out")
    return kernel


def _index_put_impl(c: Call) -> Kernel:
    """``selfRef[indices] = values`` or, with ``accumulate``, ``selfRef[indices] += values``
    (every repeated position adds); ``values`` broadcasts to what the indices pick."""
    self = c.tensor("selfRef")
    c.check_dtype("selfRef", INDEX_PUT_DTYPES)
    values = c.tensor("values")
    if values.dtype != self.dtype:
        raise c.fail("values", f"dtype must equal selfRef's ({self.dtype})")
    if not 1 <= self.ndim <= MAX_INDEX_DIMS:
        raise c.fail("selfRef", f"must have 1 to {MAX_INDEX_DIMS} dims")
    entries, shape, masked = _index_plan(c, "indices", self.shape, upper_bound=False)
    if len(values.shape) > len(shape) or any(
            m != 1 and n >= 0 and m != n for m, n in zip(values.shape[::-1], shape[::-1],
                                                     strict=False)):
        raise c.fail("values", f"shape {list(values.shape)} does not broadcast to the "
                               f"indexed shape {['?' if n < 0 else n for n in shape]}")
    c.check_out("selfRef", self.shape, self.dtype, exact_dtype=True)
    accumulate = c["accumulate"]
    wide = promotion.compute_dtype(self.dtype)

    def kernel(v) -> None:
        x = host(v["selfRef"])
        key = _index_tuple("IndexPutImpl", "indices", entries, v["indices"], self.shape)
        source = host(v["values"])
        if not accumulate:
            x[key] = source
        elif wide != self.dtype:  # halves add in float32 and round once
            total = x.astype(wide)
            np.add.at(total, key, np.broadcast_to(source.astype(wide), total[key].shape))
            np.copyto(x, total, casting="unsafe")
        else:
            np.add.at(x, key, np.broadcast_to(source, x[key].shape))
        store(v["selfRef"], x)
    return kernel


register_inplace("IndexPutImpl", "selfRef: tensor!, indices: tensors, values: tensor, "
                                 "accumulate: bool = False, unsafe: bool = False",
                 _index_put_impl, selfRef="selfRef")


# -- along one dim: index_add, index_fill -----------------------------------------------------
def _index_add_checks(c: Call, index_ranks: Sequence[int]) -> tuple[TensorArg, int, Any]:
    self = c.tensor("self")
    c.check_dtype("self", INDEX_ADD_DTYPES)
    index = c.tensor("index")
    c.check_dtype("index", INDEX_DTYPES)
    source = c.tensor("source")
    if source.dtype != self.dtype:
        raise c.fail("source", f"dtype must equal self's ({self.dtype})")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if index.ndim not in index_ranks:
        raise c.fail("index", f"must have {' or '.join(map(str, index_ranks))} dims")
    if max(source.ndim, 1) != max(self.ndim, 1):
        raise c.fail("source", f"must have as many dims as self ({self.ndim})")
    source_shape = source.shape or (1,)
    self_shape = self.shape or (1,)
    for k, (n, m) in enumerate(zip(source_shape, self_shape, strict=True)):
        if k != dim and n != m:
            raise c.fail("source", f"size {n} of dim {k} differs from self's {m}")
    if source_shape[dim] != index.numel:
        raise c.fail("index", f"holds {index.numel} indices; source has {source_shape[dim]} "
                              f"along dim {dim}")
    alpha = c.scalar("alpha", self.dtype)
    c.check_out("out", self.shape, self.dtype, exact_dtype=True)
    return self, dim, alpha


def _index_add_kernel(op: str, self: TensorArg, dim: int, alpha: Any) -> Kernel:
    # floats sum in float64 and round once: slices of large values cancel (CANN's cases)
    wide = np.dtype(np.float64) if promotion.is_floating(self.dtype) else \
        promotion.compute_dtype(self.dtype)
    size = self.shape[dim] if self.ndim else 1

    def kernel(v) -> None:
        total = np.atleast_1d(host(v["self"])).astype(wide)
        idx = _check_index_range(op, "index", host(v["index"]).reshape(-1), size)
        source = np.atleast_1d(host(v["source"])).astype(wide)
        if self.dtype != np.bool_:
            source = source * alpha
        add_rows(np.moveaxis(total, dim, 0), idx, np.moveaxis(source, dim, 0))
        store(v["out"], total.reshape(self.shape))
    return kernel


@register("IndexAdd", "self: tensor, dim: int, index: tensor, source: tensor, "
                      "alpha: scalar = 1, out: tensor!")
def index_add(c: Call) -> Kernel:
    """``out = self`` with ``alpha * source`` added in at ``index`` along ``dim``
    (``Tensor.index_add``); repeated indices add every slice."""
    self, dim, alpha = _index_add_checks(c, (0, 1))
    return _index_add_kernel("IndexAdd", self, dim, alpha)


@register("IndexAddV2", "self: tensor, dim: int, index: tensor, source: tensor, "
                        "alpha: scalar = 1, mode: int = 1, out: tensor!")
def index_add_v2(c: Call) -> Kernel:
    """IndexAdd with a 1-D ``index`` and CANN's ``mode`` (0 its fast path, which takes
    dim 0 or -2 and float32/float16/bfloat16/int32/int16 only; the result is the same)."""
    self, dim, alpha = _index_add_checks(c, (1,))
    if c["mode"] == 0:
        if c["dim"] not in INDEX_ADD_FAST_DIMS and dim != 0 and dim != self.ndim - 2:
            raise c.fail("dim", f"mode 0 takes dim {' or '.join(map(str, INDEX_ADD_FAST_DIMS))}")
        c.check_dtype("self", INDEX_ADD_FAST_DTYPES)
    return _index_add_kernel("IndexAddV2", self, dim, alpha)


def _index_fill_kernel(op: str, self: TensorArg, dim: int, value: np.ndarray,
                       fixed: tuple[int, ...] | None, inplace: bool) -> Kernel:
    size = self.shape[dim] if self.ndim else 1
    source, target = ("selfRef", "selfRef") if inplace else ("self", "out")

    def kernel(v) -> None:
        out = host(v[source]).copy() if not inplace else host(v[target])
        idx = np.asarray(fixed, np.int64) if fixed is not None else \
            host(v["index"]).astype(np.int64).reshape(-1)
        idx = np.where(idx < 0, idx + size, idx)
        idx = idx[(idx >= 0) & (idx < size)]  # positions out of range are skipped
        view = np.moveaxis(np.atleast_1d(out) if self.ndim == 0 else out, dim, 0)
        view[idx] = value[()]
        store(v[target], out)
    return kernel


def _index_fill(c: Call, inplace: bool, tensor_index: bool) -> Kernel:
    name = "selfRef" if inplace else "self"
    self = c.tensor(name)
    c.check_dtype(name, INDEX_FILL_DTYPES)
    if self.ndim > MAX_INDEX_DIMS:
        raise c.fail(name, f"must have at most {MAX_INDEX_DIMS} dims")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if tensor_index:
        index = c.tensor("index")
        c.check_dtype("index", INDEX_DTYPES)
        if index.ndim > 1:
            raise c.fail("index", "must have 0 or 1 dims")
        fixed = None
    else:
        fixed = tuple(c["index"])
    value = _fill_value(c, "value", self.dtype)
    c.check_out(name if inplace else "out", self.shape, self.dtype, exact_dtype=True)
    op = ("Inplace" if inplace else "") + ("IndexFill" if tensor_index else "IndexFillTensor")
    return _index_fill_kernel(op, self, dim, value, fixed, inplace)


@register("IndexFill", "self: tensor, dim: int, index: tensor, value: scalar, out: tensor!")
def index_fill(c: Call) -> Kernel:
    """``out = self`` with the slices at ``index`` (a tensor) along ``dim`` set to
    ``value`` (``Tensor.index_fill``)."""
    return _index_fill(c, inplace=False, tensor_index=True)


@register("IndexFillTensor", "self: tensor, dim: int, index: int_array, value: scalar, "
                             "out: tensor!")
def index_fill_tensor(c: Call) -> Kernel:
    """IndexFill with the positions given as an aclIntArray."""
    return _index_fill(c, inplace=False, tensor_index=False)


def _inplace_index_fill(c: Call) -> Kernel:
    """``selfRef.index_fill_(dim, index, value)`` with a tensor ``index``."""
    return _index_fill(c, inplace=True, tensor_index=True)


def _inplace_index_fill_tensor(c: Call) -> Kernel:
    """``selfRef.index_fill_(dim, index, value)`` with an aclIntArray ``index``."""
    return _index_fill(c, inplace=True, tensor_index=False)


register_inplace("InplaceIndexFill", "selfRef: tensor!, dim: int, index: tensor, "
                                     "value: scalar", _inplace_index_fill, selfRef="selfRef")
register_inplace("InplaceIndexFillTensor", "selfRef: tensor!, dim: int, index: int_array, "
                                           "value: scalar", _inplace_index_fill_tensor,
                 selfRef="selfRef")


# -- take and the gathers ---------------------------------------------------------------------
@register("Take", "self: tensor, index: tensor, out: tensor!", silent=True)
def take(c: Call) -> Kernel:
    """``self.flatten()[index]``, shaped like ``index`` (``torch.take``; no negative
    indices, as CANN documents)."""
    self = c.tensor("self")
    c.check_dtype("self", TAKE_DTYPES)
    index = c.tensor("index")
    c.check_dtype("index", INDEX_DTYPES)
    c.check_out("out", index.shape, self.dtype, exact_dtype=True)
    count = self.numel

    def kernel(v) -> None:
        idx = _check_index_range("Take", "index", host(v["index"]), count)
        if not idx.size:
            return
        take_into(v["out"], host(v["self"]).reshape(-1), idx, None)
    return kernel


def _gather_v3_shape(c: Call, self: TensorArg, dim: int, index: TensorArg, batch: int
                     ) -> tuple[int, ...]:
    if not 0 <= batch <= min(dim, index.ndim):
        raise c.fail("batchDims", f"must be in [0, {min(dim, index.ndim)}] (at most dim and "
                                  f"the rank of index)")
    if index.shape[:batch] != self.shape[:batch]:
        raise c.fail("index", f"its first {batch} dims must equal self's "
                              f"{list(self.shape[:batch])}")
    return (*self.shape[:dim], *index.shape[batch:], *self.shape[dim + 1:])


def _gather_kernel(op: str, self: TensorArg, dim: int, batch: int, shape: tuple[int, ...],
                   zeros_out_of_range: bool) -> Kernel:
    size = self.shape[dim] if self.ndim else 1
    trailing = (1,) * (max(self.ndim, 1) - dim - 1)

    def kernel(v) -> None:
        x = np.atleast_1d(host(v["self"]))
        idx = host(v["index"]).astype(np.int64)
        bad = None
        if zeros_out_of_range:
            bad = (idx < 0) | (idx >= size)
            idx = np.where(bad, 0, idx)
        else:
            idx = _check_index_range(op, "index", idx, size)
        if not size or not math.prod(shape):
            result = np.zeros(shape, self.dtype)
        elif batch == 0 and bad is None:
            take_into(v["out"], x, idx, dim)
            return
        elif batch == 0:
            result = np.take(x, idx, dim)
        else:  # row b of the first batch dims gathers with index row b
            lead = math.prod(self.shape[:batch])
            rows = x.reshape(lead, *self.shape[batch:])
            picks = idx.reshape(lead, *idx.shape[batch:])
            result = np.stack([np.take(rows[b], picks[b], dim - batch) for b in range(lead)])
        result = np.reshape(result, shape)
        if bad is not None and bad.any():  # mode 2: an index out of range gathers zeros
            where = bad.reshape(*idx.shape[:batch], *(1,) * (dim - batch), *idx.shape[batch:],
                                *trailing)
            result = np.where(where, np.zeros((), self.dtype), result)
        store(v["out"], result)
    return kernel


@register("GatherV2", "self: tensor, dim: int, index: tensor, out: tensor!", silent=True)
def gather_v2(c: Call) -> Kernel:
    """The slices of ``self`` at ``index`` along ``dim``, index of any rank:
    ``out.shape = self.shape[:dim] + index.shape + self.shape[dim+1:]``."""
    self = c.tensor("self")
    c.check_dtype("self", GATHER_V2_DTYPES)
    index = c.tensor("index")
    c.check_dtype("index", INDEX_DTYPES)
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    shape = _gather_v3_shape(c, self, dim, index, 0) if self.ndim else index.shape
    c.check_out("out", shape, self.dtype, exact_dtype=True)
    return _gather_kernel("GatherV2", self, dim, 0, shape, False)


@register("GatherV3", "self: tensor, dim: int, index: tensor, batchDims: int = 0, "
                      "mode: int = 1, out: tensor!", silent=True)
def gather_v3(c: Call) -> Kernel:
    """GatherV2 with TensorFlow's ``batchDims`` (the first ``batchDims`` dims of ``index``
    match ``self``'s and gather row by row) and CANN's ``mode`` (0 and 1 are speed hints;
    2 gathers zeros for indices out of range)."""
    self = c.tensor("self")
    c.check_dtype("self", GATHER_V3_DTYPES)
    index = c.tensor("index")
    c.check_dtype("index", INDEX_DTYPES)
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if c["mode"] not in GATHER_V3_MODES:
        raise c.fail("mode", f"must be one of {list(GATHER_V3_MODES)}")
    batch = c["batchDims"]
    shape = _gather_v3_shape(c, self, dim, index, batch) if self.ndim else index.shape
    c.check_out("out", shape, self.dtype, exact_dtype=True)
    return _gather_kernel("GatherV3", self, dim, batch, shape,
                          c["mode"] == GATHER_V3_OUT_OF_RANGE)


# -- masked_scatter ---------------------------------------------------------------------------
def _inplace_masked_scatter(c: Call) -> Kernel:
    """``selfRef.masked_scatter_(mask, source)``: the positions where ``mask`` (broadcast to
    ``selfRef``) is true take ``source``'s first values, in row-major order."""
    self = c.tensor("selfRef")
    c.check_dtype("selfRef", MASKED_SCATTER_DTYPES)
    mask = c.tensor("mask")
    c.check_dtype("mask", MASK_DTYPES)
    source = c.tensor("source")
    if source.dtype != self.dtype:
        raise c.fail("source", f"dtype must equal selfRef's ({self.dtype})")
    if mask.ndim > self.ndim:
        raise c.fail("mask", f"has more dims than selfRef ({self.ndim})")
    if c.broadcast("selfRef", "mask") != self.shape:
        raise c.fail("mask", f"shape {list(mask.shape)} does not broadcast to selfRef's "
                             f"{list(self.shape)}")
    c.check_out("selfRef", self.shape, self.dtype, exact_dtype=True)

    def kernel(v) -> None:
        x = host(v["selfRef"])
        chosen = np.broadcast_to(host(v["mask"]).astype(bool), self.shape)
        count = int(np.count_nonzero(chosen))
        if count > source.numel:
            raise RuntimeError(f"aclnnInplaceMaskedScatter: argument 'source' holds "
                               f"{source.numel} elements; mask selects {count}")
        if count:
            x[chosen] = host(v["source"]).reshape(-1)[:count]
            store(v["selfRef"], x)
    return kernel


register_inplace("InplaceMaskedScatter", "selfRef: tensor!, mask: tensor, source: tensor",
                 _inplace_masked_scatter, selfRef="selfRef")


# -- jagged permutes ----------------------------------------------------------------------------
def _check_offsets(op: str, name: str, offsets: np.ndarray, total: int) -> None:
    """Kernel-side: ``offsets`` rise (never fall) from 0 and end at ``total``."""
    if offsets.size and (int(offsets[0]) != 0 or (np.diff(offsets) < 0).any() or
                         int(offsets[-1]) != total):
        raise ValueError(f"aclnn{op}: argument '{name}' = {offsets.tolist()[:8]}... must "
                         f"rise from 0 to outputSize ({total})")


@register("ExpandIntoJaggedPermute", "permute: tensor, inputOffset: tensor, "
                                     "outputOffset: tensor, outputSize: int, "
                                     "outputPermuteOut: tensor!", silent=True)
def expand_into_jagged_permute(c: Call) -> Kernel:
    """A table-level permutation expanded to element level (fbgemm's
    ``expand_into_jagged_permute``): segment ``i`` of the output, ``outputOffset[i]`` up to
    ``outputOffset[i+1]``, counts up from ``inputOffset[permute[i]]``."""
    permute = c.tensor("permute")
    dtype = c.check_dtype("permute", JAGGED_DTYPES)
    if permute.ndim != 1:
        raise c.fail("permute", "must have 1 dim")
    tables = permute.numel
    for name in ("inputOffset", "outputOffset"):
        offsets = c.tensor(name)
        if offsets.dtype != dtype:
            raise c.fail(name, f"dtype must equal permute's ({dtype})")
        if offsets.shape != (tables + 1,):
            raise c.fail(name, f"shape must be [{tables + 1}] (one more than permute)")
    size = c["outputSize"]
    if size < 0:
        raise c.fail("outputSize", "must be non-negative")
    c.check_out("outputPermuteOut", (size,), dtype, exact_dtype=True)

    def kernel(v) -> None:
        order = _check_index_range("ExpandIntoJaggedPermute", "permute", host(v["permute"]),
                                   tables)
        starts = host(v["inputOffset"]).astype(np.int64)
        bounds = host(v["outputOffset"]).astype(np.int64)
        _check_offsets("ExpandIntoJaggedPermute", "outputOffset", bounds, size)
        lengths = np.diff(bounds)
        segment = np.repeat(np.arange(tables), lengths)  # the segment of each position
        within = np.arange(size) - bounds[:-1][segment]
        store(v["outputPermuteOut"], starts[order][segment] + within)
    return kernel
