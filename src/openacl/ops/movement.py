"""Data movement operators: casts and copies, concatenation, stacking and splits, views
made concrete (slice, permute, expand, flip, roll, flatten, channel shuffle), strided slice
assignment, the gradient of unfold, gathers and scatters, and upsampling. Pads live in
``padding.py``, fills, masks, Arange and OneHot in ``masking.py``.

Semantics are aclnn's, which are PyTorch's (``torch.cat``, ``stack``, ``split``,
``gather``, ``index_select``, ``F.embedding``, ``flip``, ``roll``, ``tril``/``triu``,
``nn.ChannelShuffle``, ``aten.unfold_backward``, ``F.interpolate``) or ONNX's (Flatten,
Slice). Every operator except the two upsamplers and UnfoldGrad moves values without
arithmetic, so results are bit-exact in every dtype. Dtype lists are the ones each aclnn
document gives, limited to what numpy can hold.

Index values live in device memory, which phase 1 cannot read: an index out of range is
found by the kernel, which raises, so the stream fails and its next synchronize reports the
operator, the argument and the offending value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.errors import AclError
from openacl.ops import promotion
from openacl.ops.call import (
    ALL_DTYPES,
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    MAX_DIMS,
    Call,
    Kernel,
    ScalarArg,
    TensorArg,
    array_module,
    as_array,
    like,
)
from openacl.ops.fpstate import ignore_floating_point
from openacl.ops.registry import register, register_inplace


def _dtypes(*names: str) -> frozenset[np.dtype]:
    return frozenset(np.dtype(promotion.BFLOAT16 if n == "bfloat16" else n) for n in names)


F16, BF16, F32, F64 = _dtypes("float16"), _dtypes("bfloat16"), _dtypes("float32"), \
    _dtypes("float64")
I8, U8, I16, U16 = _dtypes("int8"), _dtypes("uint8"), _dtypes("int16"), _dtypes("uint16")
I32, U32, I64, U64 = _dtypes("int32"), _dtypes("uint32"), _dtypes("int64"), _dtypes("uint64")
C64, C128 = _dtypes("complex64"), _dtypes("complex128")
INDEX_DTYPES = I32 | I64  # index tensors of Gather, IndexSelect, Embedding, GatherNd, ...

# supported dtypes per aclnn document (numpy-holdable ones)
CAT_DTYPES = ALL_DTYPES - C128
SLICE_DTYPES = FLOAT_DTYPES - F64 | I32 | I64 | I8 | U8 | BOOL_DTYPES
EXPAND_DTYPES = F16 | F32 | BF16 | U8 | I8 | I32 | I64 | BOOL_DTYPES
GATHER_DTYPES = ALL_DTYPES - COMPLEX_DTYPES
EMBEDDING_DTYPES = ALL_DTYPES - U16 - U32 - U64
SCATTER_UPDATE_DTYPES = I8 | U8 | F16 | F32 | I32 | BF16
FLIP_DTYPES = ALL_DTYPES - U16 - U32 - U64
ROLL_DTYPES = BF16 | F16 | F32 | I8 | U8 | I32 | I64 | U32 | BOOL_DTYPES | I16 | C64
TRIANGLE_DTYPES = ALL_DTYPES - C128
NEAREST_DTYPES = FLOAT_DTYPES | U8
BILINEAR_DTYPES = FLOAT_DTYPES
STACK_DTYPES = ALL_DTYPES
FLATTEN_DTYPES = ALL_DTYPES - F64 - COMPLEX_DTYPES
STRIDED_ASSIGN_DTYPES = F16 | F32 | BF16 | I32 | I64 | F64 | I8
CHANNEL_SHUFFLE_DTYPES = ALL_DTYPES - BF16 - U16 - U32 - U64
UNFOLD_GRAD_DTYPES = F32 | F16 | BF16

IMAGE_RANK = 4  # the upsamplers take (N, C, H, W)
SPATIAL_DIMS = 2  # outputSize / padding pairs of the 2-D operators
SCATTER_UPDATE_RANKS = (2, 8)  # aclnnInplaceScatterUpdate: rank of data and updates
CHANNEL_SHUFFLE_RANKS = (3, 7)  # aclnnChannelShuffle: rank of self


# -- registration ------------------------------------------------------------------------------
MAX_ARRAY_BYTES = np.iinfo(np.intp).max  # numpy cannot describe a bigger array, even empty
POINTER_KINDS = frozenset({"int_array", "float_array", "bool_array", "scalars"})




# -- shared helpers ---------------------------------------------------------------------------
def _convert(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` cast to ``dtype`` as PyTorch casts: complex to real keeps the real part,
    float to integer truncates, anything to bool tests for non-zero."""
    array = as_array(value)
    if array.dtype.kind == "c" and dtype.kind != "c" and dtype != np.bool_:
        array = array.real
    with ignore_floating_point():  # (np.errstate costs ten times as much per call)
        return array.astype(dtype, copy=False)


def _copy(target: np.ndarray, value: Any) -> None:
    """Store ``value`` (broadcast, cast as PyTorch does) into ``target``."""
    value = as_array(value)
    if value.dtype != target.dtype:
        value = _convert(value, target.dtype)
    np.copyto(target, value)


def _copies(pairs: Sequence[tuple[Any, Any]]) -> Callable[[], None]:
    """The plan (``Views.plan``) of a movement op that copies views of its inputs into its
    outputs: the (destination, source) views made once, then one ``copyto`` each (sources
    of the destination's dtype; ``_copy`` converts the others)."""
    calls = [functools.partial(np.copyto, target, value) if as_array(value).dtype ==
             target.dtype else functools.partial(_copy, target, value)
             for target, value in pairs]
    if len(calls) == 1:
        return calls[0]

    def run() -> None:
        for call in calls:
            call()
    return run


def _out_like(c: Call, shape: Sequence[int], dtype: np.dtype, name: str = "out") -> None:
    """Declare output ``name`` of ``shape``; its dtype must equal ``dtype`` (movement ops
    never cast)."""
    c.check_out(name, shape, dtype, exact_dtype=True)


def _dims(c: Call, name: str, ndim: int, unique: bool = True) -> tuple[int, ...]:
    """An int array of dims, each normalised against ``ndim``; duplicates refused."""
    dims = tuple(c.normalize_dim(name, d, ndim) for d in c[name])
    if unique and len(set(dims)) != len(dims):
        raise c.fail(name, "a dim appears more than once")
    return dims


def _require_rank(c: Call, name: str, ranks: Sequence[int]) -> TensorArg:
    tensor = c.tensor(name)
    if tensor.ndim not in ranks:
        raise c.fail(name, f"must have {' or '.join(map(str, ranks))} dims")
    return tensor


def _require_broadcast_to(c: Call, name: str, target: str) -> None:
    """Tensor ``name`` must broadcast to tensor ``target``'s shape (an in-place operand)."""
    shape = c.tensor(target).shape
    if c.broadcast(target, name) != shape:
        raise c.fail(name, f"shape {list(c.tensor(name).shape)} cannot be broadcast to "
                           f"{target}'s {list(shape)}")


def _fill_value(c: Call, name: str, dtype: np.dtype) -> np.ndarray:
    """Scalar ``name`` as a 0-dim array of ``dtype``, refused where PyTorch's ``fill_``
    refuses it (a complex value into a real tensor, an integer or finite float that does
    not fit)."""
    scalar: ScalarArg = c[name]
    value = scalar.value
    if isinstance(value, complex) and dtype.kind != "c":
        if dtype != np.bool_:
            raise c.fail(name, f"a complex value cannot fill a {dtype} tensor")
    elif dtype.kind in "iu" and not isinstance(value, bool):
        info = np.iinfo(dtype)
        if math.isfinite(value) and not info.min <= math.trunc(value) <= info.max:
            raise c.fail(name, f"{value!r} does not fit in {dtype} "
                               f"[{info.min}, {info.max}]")
        if not math.isfinite(value):
            raise c.fail(name, f"{value!r} cannot be converted to {dtype}")
    elif promotion.category(dtype) == promotion.FLOATING and isinstance(value, (int, float)):
        limit = float(np.finfo(np.float32 if dtype == promotion.BFLOAT16 else dtype).max)
        if math.isfinite(value) and abs(value) > limit:
            raise c.fail(name, f"{value!r} overflows {dtype}")
    return _convert(np.array(value), dtype)


FEW_INDICES = 16  # index arrays up to this size are range-checked in Python


def _check_index_range(op: str, name: str, index: np.ndarray, size: int,
                       negative: bool = False) -> np.ndarray:
    """Kernel-side range check: values in ``[0, size)`` (``[-size, size)`` when
    ``negative``, wrapped); raises ``IndexError`` naming the first bad value."""
    index = as_array(index).astype(np.int64, copy=False)
    low = -size if negative else 0
    if not negative and index.size <= FEW_INDICES and type(index) is np.ndarray:
        for value in index.reshape(-1).tolist():  # (cheaper than three ufuncs here)
            if not 0 <= value < size:
                raise IndexError(f"aclnn{op}: argument '{name}' holds index {value}, out of "
                                 f"range [0, {size}) for a dim of size {size}")
        return index
    bad = (index < low) | (index >= size)
    if bad.any():
        value = int(index[bad].reshape(-1)[0])
        raise IndexError(f"aclnn{op}: argument '{name}' holds index {value}, out of range "
                         f"[{low}, {size}) for a dim of size {size}")
    return np.where(index < 0, index + size, index) if negative else index


# -- Cast and copies ---------------------------------------------------------------------------
@register("Cast", "self: tensor, dtype: dtype, out: tensor!")
def cast(c: Call) -> Kernel:
    """Convert ``self`` to ``dtype`` (float to integer truncates; complex to real keeps the
    real part; anything to bool tests for non-zero)."""
    c.check_dtype("self", ALL_DTYPES)
    try:
        target = dtypes.to_numpy_dtype(c["dtype"])
    except AclError as exc:
        raise c.fail("dtype", exc.message) from None
    c.check_dtype("dtype", ALL_DTYPES, target)
    _out_like(c, c.tensor("self").shape, target)

    def kernel(v) -> None:
        _copy(v["out"], v["self"])
    return kernel


def _inplace_copy(c: Call) -> Kernel:
    """Copy ``src`` into ``selfRef``: ``src`` broadcasts to ``selfRef``'s shape and is cast
    to its dtype; ``selfRef`` may be any strided view."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", ALL_DTYPES)
    c.check_dtype("src", ALL_DTYPES)
    _require_broadcast_to(c, "src", "selfRef")
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        _copy(v["selfRef"], v["src"])  # numpy copies through a temporary when views overlap
    return kernel


register_inplace("InplaceCopy", "selfRef: tensor!, src: tensor", _inplace_copy, silent=True,
                 selfRef="selfRef")


# -- Cat and splits ------------------------------------------------------------------------------
def _is_legacy_empty(tensor: TensorArg) -> bool:
    """PyTorch's cat skips 1-D tensors of size 0 whatever the other shapes."""
    return tensor.shape == (0,)


@register("Cat", "tensors: tensors, dim: int, out: tensor!", silent=True)
def cat(c: Call) -> Kernel:
    """Concatenate ``tensors`` along ``dim``; dtypes promote as in ``torch.cat``."""
    tensors: list[TensorArg] = c["tensors"]
    result = _promoted_list(c, "tensors", CAT_DTYPES)
    used = [i for i, t in enumerate(tensors) if not _is_legacy_empty(t)]
    if not used:
        shape: tuple[int, ...] = (0,)
        dim = 0
    else:
        first = tensors[used[0]]
        if first.ndim == 0:
            raise c.fail("tensors", "zero-dimensional tensors cannot be concatenated")
        dim = c.normalize_dim("dim", c["dim"], first.ndim)
        for i in used:
            other = tensors[i].shape
            if len(other) != first.ndim or any(a != b for k, (a, b) in enumerate(
                    zip(other, first.shape, strict=True)) if k != dim):
                raise c.fail("tensors", f"tensors[{i}] has shape {list(other)}; every tensor "
                                        f"must match {list(first.shape)} except in dim {dim}")
        shape = tuple(sum(tensors[i].shape[dim] for i in used) if k == dim else n
                      for k, n in enumerate(first.shape))
    c.check_out("out", shape, result)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _copies(pieces(v)))()

    def pieces(v) -> list[tuple[Any, Any]]:
        out, arrays = v["out"], v["tensors"]
        pairs, start = [], 0
        for i in used:
            size = arrays[i].shape[dim]
            pairs.append((out[(slice(None),) * dim + (slice(start, start + size),)],
                          arrays[i]))
            start += size
        return pairs
    return kernel


@register("Stack", "tensors: tensors, dim: int, out: tensor!", silent=True)
def stack(c: Call) -> Kernel:
    """Join ``tensors`` (all of one shape) along a new dim ``dim`` in
    ``[-(rank + 1), rank]``; dtypes promote as in ``torch.stack``."""
    tensors: list[TensorArg] = c["tensors"]
    result = _promoted_list(c, "tensors", STACK_DTYPES)
    first = tensors[0]
    for i, tensor in enumerate(tensors):
        if tensor.shape != first.shape:
            raise c.fail("tensors", f"tensors[{i}] has shape {list(tensor.shape)}; every "
                                    f"tensor must have tensors[0]'s {list(first.shape)}")
    dim = c.normalize_dim("dim", c["dim"], first.ndim + 1)
    shape = (*first.shape[:dim], len(tensors), *first.shape[dim:])
    c.check_out("out", shape, result)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _copies([
            (v["out"][(slice(None),) * dim + (i, Ellipsis)], array)  # (a view, even 0-dim)
            for i, array in enumerate(v["tensors"])]))()
    return kernel


def _promoted_list(c: Call, name: str, supported: frozenset[np.dtype]) -> np.dtype:
    """The dtype the tensors of list ``name`` promote to (each in ``supported``)."""
    result = None
    for tensor in c[name]:
        c.check_dtype(name, supported, tensor.dtype)
        try:
            result = tensor.dtype if result is None else promotion.promote_types(
                result, tensor.dtype)
        except AclError as exc:
            raise c.fail(name, exc.message) from None
    return result


def _split(c: Call, sizes: list[int], dim: int) -> Kernel:
    self = c.tensor("self")
    shapes = [tuple(s if k == dim else n for k, n in enumerate(self.shape)) for s in sizes]
    c.check_out_list("out", shapes, self.dtype)
    starts = np.cumsum([0, *sizes]).tolist()

    def kernel(v) -> None:
        v.plan(kernel, lambda: _copies([
            (out, v["self"][(slice(None),) * dim + (slice(starts[i], starts[i + 1]),)])
            for i, out in enumerate(v["out"])]))()
    return kernel


def _split_dim(c: Call) -> tuple[TensorArg, int]:
    self = c.tensor("self")
    c.check_dtype("self", ALL_DTYPES)
    if self.ndim == 0:
        raise c.fail("self", "a zero-dimensional tensor cannot be split")
    return self, c.normalize_dim("dim", c["dim"], self.ndim)


@register("SplitTensor", "self: tensor, splitSections: int, dim: int, out: tensors!")
def split_tensor(c: Call) -> Kernel:
    """Split ``self`` along ``dim`` into pieces of ``splitSections`` (the last may be
    smaller), as ``torch.split(self, splitSections, dim)``."""
    self, dim = _split_dim(c)
    length, section = self.shape[dim], c["splitSections"]
    if section < 0 or (section == 0 and length != 0):
        raise c.fail("splitSections", f"must be > 0 to split a dim of size {length}")
    count = max(-(-length // section), 1) if section else 1
    sizes = [min(section, length - i * section) for i in range(count)] if length else [0]
    return _split(c, sizes, dim)


@register("SplitWithSize", "self: tensor, splitSize: int_array, dim: int, out: tensors!")
def split_with_size(c: Call) -> Kernel:
    """Split ``self`` along ``dim`` into pieces of the given sizes
    (``torch.split_with_sizes``)."""
    self, dim = _split_dim(c)
    sizes = list(c["splitSize"])
    if not sizes or any(s < 0 for s in sizes) or sum(sizes) != self.shape[dim]:
        raise c.fail("splitSize", f"sizes must be >= 0 and sum to {self.shape[dim]}, the "
                                  f"size of dim {dim}")
    return _split(c, sizes, dim)


# -- views made concrete ----------------------------------------------------------------------
@register("Slice", "self: tensor, dim: int, start: int, end: int, step: int, out: tensor!",
          silent=True)
def slice_(c: Call) -> Kernel:
    """``self[..., start:end:step, ...]`` along ``dim``; start and end are clamped as in
    Python slicing, ``step`` must be positive."""
    self = c.tensor("self")
    c.check_dtype("self", SLICE_DTYPES)
    if self.ndim == 0:
        raise c.fail("self", "a zero-dimensional tensor cannot be sliced")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if c["step"] <= 0:
        raise c.fail("step", "must be > 0")
    window = slice(*slice(c["start"], c["end"], c["step"]).indices(self.shape[dim]))
    length = len(range(window.start, window.stop, window.step))
    _out_like(c, tuple(length if k == dim else n for k, n in enumerate(self.shape)),
              self.dtype)
    index = (slice(None),) * dim + (window,)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _copies([(v["out"], v["self"][index])]))()
    return kernel


def _strided_windows(c: Call, shape: tuple[int, ...], names: tuple[str, str, str, str],
                     ) -> tuple[tuple[slice, ...], tuple[int, ...]]:
    """The index and shape of a multi-axis strided slice: ``names`` are the (begin, end,
    step, axes) arrays; begin and end clamp into each dim as Python slicing does, steps
    must be positive, axes distinct (axes None: the first ``len(begin)`` dims)."""
    begin_name, end_name, step_name, axes_name = names
    begins, ends, steps = (list(c[n]) for n in (begin_name, end_name, step_name))
    axes_value = c[axes_name]
    axes = list(range(len(begins))) if axes_value is None else list(axes_value)
    for name, items in ((end_name, ends), (step_name, steps), (axes_name, axes)):
        if len(items) != len(begins):
            raise c.fail(name, f"must hold as many entries as {begin_name} ({len(begins)})")
    axes = [c.normalize_dim(axes_name, a, len(shape)) for a in axes]
    if len(set(axes)) != len(axes):
        raise c.fail(axes_name, "an axis appears more than once")
    if any(s <= 0 for s in steps):
        raise c.fail(step_name, "every step must be > 0")
    index, out = [slice(None)] * len(shape), list(shape)
    for axis, begin, end, step in zip(axes, begins, ends, steps, strict=True):
        window = slice(*slice(begin, end, step).indices(shape[axis]))
        index[axis] = window
        out[axis] = len(range(window.start, window.stop, window.step))
    return tuple(index), tuple(out)


@register("SliceV2", "self: tensor, starts: int_array, ends: int_array, axes: int_array, "
                     "steps: int_array, out: tensor!", silent=True)
def slice_v2(c: Call) -> Kernel:
    """``self`` sliced along each of ``axes`` from ``starts`` to ``ends`` by ``steps``
    (ONNX's Slice with positive steps; starts and ends clamp into each dim)."""
    self = c.tensor("self")
    c.check_dtype("self", SLICE_DTYPES)
    if self.ndim == 0:
        raise c.fail("self", "a zero-dimensional tensor cannot be sliced")
    index, shape = _strided_windows(c, self.shape, ("starts", "ends", "steps", "axes"))
    _out_like(c, shape, self.dtype)

    def kernel(v) -> None:
        np.copyto(v["out"], v["self"][index])
    return kernel


def _strided_slice_assign(c: Call) -> Kernel:
    """Write ``inputValue`` into ``varRef[begin:end:strides]`` along ``axesOptional`` (the
    first ``len(begin)`` dims when absent); ``inputValue`` has the slice's shape and the
    stride of varRef's last dim must be 1."""
    target = c.tensor("varRef")
    c.check_dtype("varRef", STRIDED_ASSIGN_DTYPES)
    value = c.tensor("inputValue")
    if value.dtype != target.dtype:
        raise c.fail("inputValue", f"dtype must equal varRef's ({target.dtype})")
    if target.ndim == 0:
        raise c.fail("varRef", "must have at least 1 dim")
    index, shape = _strided_windows(c, target.shape,
                                    ("begin", "end", "strides", "axesOptional"))
    if index[-1].step not in (None, 1):
        raise c.fail("strides", "the stride of varRef's last dim must be 1")
    if value.shape != shape:
        raise c.fail("inputValue", f"shape must be the slice's {list(shape)}")
    c.check_out("varRef", target.shape, target.dtype, exact_dtype=True)

    def kernel(v) -> None:
        np.copyto(v["varRef"][index], v["inputValue"])
    return kernel


register_inplace("StridedSliceAssignV2", "varRef: tensor!, inputValue: tensor, "
                                         "begin: int_array, end: int_array, "
                                         "strides: int_array, axesOptional: int_array?",
                 _strided_slice_assign, silent=True, varRef="varRef")


@register("Flatten", "self: tensor, axis: int, out: tensor!", silent=True)
def flatten(c: Call) -> Kernel:
    """``self`` as a 2-D tensor: dims before ``axis`` make the rows, the rest the columns
    (ONNX's Flatten; a 0- or 1-dim self takes only axis 0)."""
    self = c.tensor("self")
    c.check_dtype("self", FLATTEN_DTYPES)
    axis = c.normalize_dim("axis", c["axis"], self.ndim)
    if self.ndim <= 1 and axis > 0:
        raise c.fail("axis", f"must be 0 or -1 for a {self.ndim}-dim self")
    shape = (math.prod(self.shape[:axis]), math.prod(self.shape[axis:]))
    _out_like(c, shape, self.dtype)

    def kernel(v) -> None:
        np.copyto(v["out"], v["self"].reshape(shape))
    return kernel


@register("Permute", "self: tensor, dims: int_array, out: tensor!", silent=True)
def permute(c: Call) -> Kernel:
    """Reorder the dims of ``self``: ``out.shape[i] = self.shape[dims[i]]``."""
    self = c.tensor("self")
    c.check_dtype("self", ALL_DTYPES)
    if len(c["dims"]) != self.ndim:
        raise c.fail("dims", f"must name each of the {self.ndim} dims of self once")
    dims = _dims(c, "dims", self.ndim)
    _out_like(c, tuple(self.shape[d] for d in dims) if self.ndim else (), self.dtype)

    def kernel(v) -> None:
        v.plan(kernel, lambda: _copies([
            (v["out"], np.transpose(v["self"], dims) if dims else v["self"])]))()
    return kernel


@register("Expand", "self: tensor, size: int_array, out: tensor!", silent=True)
def expand(c: Call) -> Kernel:
    """Broadcast ``self`` to ``size`` (``-1`` keeps a dim; new dims lead), as
    ``Tensor.expand``."""
    self = c.tensor("self")
    c.check_dtype("self", EXPAND_DTYPES)
    size = list(c["size"])
    lead = len(size) - self.ndim
    if lead < 0:
        raise c.fail("size", f"has {len(size)} entries; self has {self.ndim} dims")
    shape = []
    for k, wanted in enumerate(size):
        have = self.shape[k - lead] if k >= lead else None
        if wanted == -1 and have is not None:
            wanted = have
        elif wanted < 0 or (have is not None and have not in (1, wanted)):
            raise c.fail("size", f"entry {k} = {wanted} cannot expand a dim of size "
                                 f"{'(new)' if have is None else have}")
        shape.append(wanted)
    _out_like(c, shape, self.dtype)

    def kernel(v) -> None:
        np.copyto(v["out"], v["self"])  # copyto broadcasts
    return kernel


@register("Flip", "self: tensor, dims: int_array, out: tensor!")
def flip(c: Call) -> Kernel:
    """Reverse ``self`` along each of ``dims``."""
    self = c.tensor("self")
    c.check_dtype("self", FLIP_DTYPES)
    dims = _dims(c, "dims", self.ndim)
    _out_like(c, self.shape, self.dtype)

    def kernel(v) -> None:
        x = v["self"]
        np.copyto(v["out"], np.flip(x, dims) if x.ndim and dims else x)
    return kernel


@register("Roll", "x: tensor, shifts: int_array, dims: int_array, out: tensor!")
def roll(c: Call) -> Kernel:
    """Rotate ``x`` by ``shifts`` along ``dims``; with no dims, the flattened tensor is
    rotated by ``shifts[0]`` (``torch.roll``)."""
    x = c.tensor("x")
    c.check_dtype("x", ROLL_DTYPES)
    shifts = list(c["shifts"])
    dims = _dims(c, "dims", x.ndim, unique=False)
    if not shifts or (dims and len(dims) != len(shifts)) or (not dims and len(shifts) != 1):
        raise c.fail("shifts", f"must have one entry per dim in dims ({len(dims)}), or "
                               f"exactly one when dims is empty")
    _out_like(c, x.shape, x.dtype)

    def kernel(v) -> None:
        data = v["x"]
        if data.size == 0:
            return
        if dims:
            np.copyto(v["out"], np.roll(data, shifts, dims))
        else:
            np.copyto(v["out"], np.roll(data.reshape(-1), shifts[0]).reshape(data.shape))
    return kernel


def _triangle(keep_lower: bool):
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        c.check_dtype("self", TRIANGLE_DTYPES)
        if self.ndim < 2:
            raise c.fail("self", "must have at least 2 dims")
        _out_like(c, self.shape, self.dtype)
        diagonal = c["diagonal"]

        def kernel(v) -> None:
            x = v["self"]
            rows, cols = x.shape[-2:]
            keep = np.tri(rows, cols, diagonal if keep_lower else diagonal - 1, dtype=bool)
            if not keep_lower:
                keep = ~keep
            np.copyto(v["out"], np.where(like(x, keep), x, x.dtype.type(0)))
        return kernel
    return prepare


tril = register("Tril", "self: tensor, diagonal: int, out: tensor!")(_triangle(True))
triu = register("Triu", "self: tensor, diagonal: int, out: tensor!")(_triangle(False))
register_inplace("InplaceTril", "selfRef: tensor!, diagonal: int", tril, self="selfRef",
                 out="selfRef")
register_inplace("InplaceTriu", "selfRef: tensor!, diagonal: int", triu, self="selfRef",
                 out="selfRef")


@register("ChannelShuffle", "self: tensor, groups: int, out: tensor!", silent=True)
def channel_shuffle(c: Call) -> Kernel:
    """Split the channels (dim 1) of ``self`` into ``groups`` groups and interleave them:
    channel ``g * (C / groups) + k`` moves to ``k * groups + g`` (``nn.ChannelShuffle``)."""
    self = c.tensor("self")
    low, high = CHANNEL_SHUFFLE_RANKS
    if not low <= self.ndim <= high:
        raise c.fail("self", f"must have {low} to {high} dims")
    c.check_dtype("self", CHANNEL_SHUFFLE_DTYPES)
    groups, channels = c["groups"], self.shape[1]
    if groups <= 0 or channels % groups:
        raise c.fail("groups", f"must be > 0 and divide the {channels} channels")
    _out_like(c, self.shape, self.dtype)
    batch, rest = self.shape[0], self.shape[2:]
    split = (batch, groups, channels // groups, *rest)

    def kernel(v) -> None:
        x = v["self"].reshape(split)
        np.copyto(v["out"], np.swapaxes(x, 1, 2).reshape(self.shape))
    return kernel


@register("UnfoldGrad", "gradOut: tensor, inputSizes: int_array, dim: int, size: int, "
                        "step: int, gradIn: tensor!")
def unfold_grad(c: Call) -> Kernel:
    """The gradient of ``Tensor.unfold(dim, size, step)``: each input position gets the
    sum of the windows' gradients that cover it (``aten.unfold_backward``). CANN finds
    the shape conditions in its tiling (ACLNN_ERR_INNER_TILING_ERROR); here phase 1 checks
    them, so they are ACLNN_ERR_PARAM_INVALID as every argument check is."""
    grad = c.tensor("gradOut")
    dtype = c.check_dtype("gradOut", UNFOLD_GRAD_DTYPES)
    sizes = tuple(c["inputSizes"])
    if not 1 <= len(sizes) <= MAX_DIMS - 1 or any(n < 0 for n in sizes):
        raise c.fail("inputSizes", f"must hold 1 to {MAX_DIMS - 1} sizes >= 0")
    rank = len(sizes)
    dim = c["dim"] + rank if c["dim"] < 0 else c["dim"]
    if dim not in (rank - 1, rank - 2):
        raise c.fail("dim", f"must be {rank - 1} or {rank - 2} (one of the last two of "
                            f"inputSizes)")
    size, step = c["size"], c["step"]
    if not 0 < size <= sizes[dim]:
        raise c.fail("size", f"must be in [1, {sizes[dim]}], the size of dim {dim}")
    if step <= 0:
        raise c.fail("step", "must be > 0")
    count = (sizes[dim] - size) // step + 1
    expected = (*sizes[:dim], count, *sizes[dim + 1:], size)
    if grad.shape != expected:
        raise c.fail("gradOut", f"shape must be {list(expected)} (inputSizes with dim {dim} "
                                f"holding the {count} windows, then the window)")
    _out_like(c, sizes, dtype, "gradIn")
    compute = promotion.compute_dtype(dtype)
    lead = (slice(None),) * dim

    def kernel(v) -> None:
        g = v.compute("gradOut", dtype)  # widened once (F16C for float16)
        total = array_module(g).zeros(sizes, compute)
        if size <= count:  # one strided add per position within the window
            for k in range(size):
                total[lead + (slice(k, k + step * (count - 1) + 1, step),)] += g[..., k]
        else:  # one add per window
            for i in range(count):
                window = np.moveaxis(g[lead + (i,)], -1, dim)
                total[lead + (slice(i * step, i * step + size),)] += window
        v.write("gradIn", total)
    return kernel


# -- gathers and scatters ---------------------------------------------------------------------
def _index_tensor(c: Call, name: str) -> TensorArg:
    c.check_dtype(name, INDEX_DTYPES)
    return c.tensor(name)


@register("Gather", "self: tensor, dim: int, index: tensor, out: tensor!")
def gather(c: Call) -> Kernel:
    """``out[i][j] = self[index[i][j]][j]`` for dim 0 (``torch.gather``)."""
    self = c.tensor("self")
    c.check_dtype("self", GATHER_DTYPES)
    index = _index_tensor(c, "index")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if max(index.ndim, 1) != max(self.ndim, 1):
        raise c.fail("index", f"must have as many dims as self ({self.ndim})")
    for k in range(index.ndim):
        if k != dim and index.shape[k] > self.shape[k]:
            raise c.fail("index", f"size {index.shape[k]} of dim {k} exceeds self's "
                                  f"{self.shape[k]}")
    _out_like(c, index.shape, self.dtype)
    limit = self.shape[dim] if self.ndim else 1

    def kernel(v) -> None:
        x, idx = np.atleast_1d(v["self"]), np.atleast_1d(v["index"])
        idx = _check_index_range("Gather", "index", idx, limit)
        window = tuple(slice(None) if k == dim else slice(0, n) for k, n in enumerate(idx.shape))
        np.copyto(v["out"], np.take_along_axis(x[window], idx, dim).reshape(index.shape))
    return kernel


@register("IndexSelect", "self: tensor, dim: int, index: tensor, out: tensor!",
          silent=True)
def index_select(c: Call) -> Kernel:
    """The entries of ``self`` at ``index`` along ``dim`` (``torch.index_select``)."""
    self = c.tensor("self")
    c.check_dtype("self", ALL_DTYPES)
    index = _index_tensor(c, "index")
    if index.ndim > 1:
        raise c.fail("index", "must have 0 or 1 dims")
    dim = c.normalize_dim("dim", c["dim"], self.ndim)
    if self.ndim == 0 and index.numel != 1:
        raise c.fail("index", "must hold one index for a zero-dimensional self")
    shape = tuple(index.numel if k == dim else n for k, n in enumerate(self.shape))
    _out_like(c, shape, self.dtype)
    limit = self.shape[dim] if self.ndim else 1

    def kernel(v) -> None:
        v.plan(kernel, lambda: _index_select_plan(v, dim, limit) or
               functools.partial(general, v))()

    def general(v) -> None:
        idx = _check_index_range("IndexSelect", "index", v["index"].reshape(-1), limit)
        np.copyto(v["out"], np.take(np.atleast_1d(v["self"]), idx, dim).reshape(shape))
    return kernel


def _index_select_plan(v, dim: int, limit: int) -> Callable[[], Any] | None:
    """IndexSelect's plan (``Views.plan``) on host arrays: ``take`` straight into the
    output; a constant index is range-checked once, and one that picks a run of
    consecutive entries is a copy of that slice. None where it does not apply."""
    x, out, index = v["self"], v["out"], v["index"]
    if type(x) is not np.ndarray or type(out) is not np.ndarray or x.ndim == 0 or \
            type(index) is not np.ndarray or out.dtype != x.dtype or \
            np.may_share_memory(out, x):
        return None
    if "index" not in v.constant:
        def computed() -> None:  # (clip: the indices were just checked)
            np.take(x, _check_index_range("IndexSelect", "index", index.reshape(-1), limit),
                    dim, out, "clip")
        return computed
    picked = _check_index_range("IndexSelect", "index", index.reshape(-1), limit)
    if picked.size and np.array_equal(picked, np.arange(picked[0], picked[0] + picked.size)):
        start = int(picked[0])
        run = x[(slice(None),) * dim + (slice(start, start + picked.size),)]
        return functools.partial(np.copyto, out, run)
    return functools.partial(np.take, x, picked.astype(np.intp), dim, out, "clip")


@register("Embedding", "weight: tensor, indices: tensor, out: tensor!", silent=True)
def embedding(c: Call) -> Kernel:
    """Rows of the 2-D ``weight`` picked by ``indices`` (``F.embedding``)."""
    weight = c.tensor("weight")
    c.check_dtype("weight", EMBEDDING_DTYPES)
    if weight.ndim != 2:
        raise c.fail("weight", "must have 2 dims (num_embeddings, embedding_dim)")
    indices = _index_tensor(c, "indices")
    _out_like(c, (*indices.shape, weight.shape[1]), weight.dtype)

    def kernel(v) -> None:
        idx = _check_index_range("Embedding", "indices", v["indices"], weight.shape[0])
        np.copyto(v["out"], np.take(v["weight"], idx, 0))
    return kernel


@register("GatherNd", "self: tensor, indices: tensor, negativeIndexSupport: bool, "
                      "out: tensor!", silent=True)
def gather_nd(c: Call) -> Kernel:
    """Slices of ``self`` addressed by the last dim of ``indices``:
    ``out[i...] = self[indices[i..., 0], ..., indices[i..., c-1]]``. Negative indices count
    from the end only when ``negativeIndexSupport``."""
    self = c.tensor("self")
    c.check_dtype("self", GATHER_DTYPES)
    indices = _index_tensor(c, "indices")
    if self.ndim < 1:
        raise c.fail("self", "must have at least 1 dim")
    if indices.ndim < 1 or not 1 <= indices.shape[-1] <= self.ndim:
        raise c.fail("indices", f"must have at least 1 dim, its last dim in [1, {self.ndim}]")
    depth = indices.shape[-1]
    shape = (*indices.shape[:-1], *self.shape[depth:])
    _out_like(c, shape, self.dtype)
    negative = c["negativeIndexSupport"]

    def kernel(v) -> None:
        idx = as_array(v["indices"]).reshape(-1, depth)
        columns = [_check_index_range("GatherNd", "indices", idx[:, k], self.shape[k],
                                      negative) for k in range(depth)]
        np.copyto(v["out"], v["self"][tuple(columns)].reshape(shape))
    return kernel


def _inplace_scatter_update(c: Call) -> Kernel:
    """Write ``updates`` into ``data`` along ``axis`` (aclnn's ScatterUpdate, no PyTorch
    counterpart). With 1-D ``indices``, batch row ``i`` is written at offset
    ``indices[i]``: ``data[i, ..., indices[i] + k, ...] = updates[i, ..., k, ...]``; with
    ``indices`` of shape ``(n, 2)``, row ``i`` of updates goes to batch ``indices[i][0]``
    at offset ``indices[i][1]``."""
    data = c.tensor("data")
    updates = c.tensor("updates")
    c.check_dtype("data", SCATTER_UPDATE_DTYPES)
    if updates.dtype != data.dtype:
        raise c.fail("updates", f"dtype must equal data's ({data.dtype})")
    indices = _index_tensor(c, "indices")
    low, high = SCATTER_UPDATE_RANKS
    if not low <= data.ndim <= high:
        raise c.fail("data", f"must have {low} to {high} dims")
    if updates.ndim != data.ndim:
        raise c.fail("updates", f"must have as many dims as data ({data.ndim})")
    rank = data.ndim
    if not -rank < c["axis"] < rank or c["axis"] == 0:
        raise c.fail("axis", f"must be in ({-rank}, {rank}) and not 0")
    axis = c["axis"] % rank
    rows = updates.shape[0]
    if indices.ndim == 1:
        if indices.shape[0] != rows or rows > data.shape[0]:
            raise c.fail("indices", f"must hold one offset per batch row of updates ({rows}); "
                                    f"data has {data.shape[0]} rows")
    elif indices.ndim == 2:
        if indices.shape != (rows, 2):
            raise c.fail("indices", f"must have shape [{rows}, 2] (batch, offset) pairs")
    else:
        raise c.fail("indices", "must have 1 or 2 dims")
    for k in range(1, rank):
        bad = updates.shape[k] > data.shape[k] if k == axis else \
            updates.shape[k] != data.shape[k]
        if bad:
            raise c.fail("updates", f"shape {list(updates.shape)} does not fit data "
                                    f"{list(data.shape)} in dim {k}")
    c.check_out("data", data.shape, data.dtype, exact_dtype=True)
    span, length = updates.shape[axis], data.shape[axis]

    def kernel(v) -> None:
        target, source = v["data"], v["updates"]
        idx = as_array(v["indices"]).astype(np.int64).reshape(rows, -1)
        batches = idx[:, 0] if idx.shape[1] == 2 else like(idx, np.arange(rows))
        offsets = idx[:, -1]
        _check_index_range("InplaceScatterUpdate", "indices", batches, data.shape[0])
        bad = (offsets < 0) | (offsets + span > length)
        if bad.any():
            raise IndexError(f"aclnnInplaceScatterUpdate: argument 'indices' holds offset "
                             f"{int(offsets[bad][0])}; with {span} updates along axis {axis} "
                             f"it must be in [0, {length - span}]")
        for row in range(rows):
            window = (int(batches[row]),) + (slice(None),) * (axis - 1) + (
                slice(int(offsets[row]), int(offsets[row]) + span),)
            target[window] = source[row]
    return kernel


register_inplace("InplaceScatterUpdate", "data: tensor!, indices: tensor, updates: tensor, "
                                         "axis: int", _inplace_scatter_update, data="data")


# -- upsampling -------------------------------------------------------------------------------
def _upsample_shape(c: Call, supported: frozenset[np.dtype]) -> tuple[int, ...]:
    self = _require_rank(c, "self", (IMAGE_RANK,))
    c.check_dtype("self", supported)
    if self.numel == 0:
        raise c.fail("self", "must not be empty")
    size = list(c["outputSize"])
    if len(size) != SPATIAL_DIMS or any(n <= 0 for n in size):
        raise c.fail("outputSize", "must hold 2 sizes (H, W), each > 0")
    shape = (*self.shape[:2], *size)
    _out_like(c, shape, self.dtype)
    return shape


def _nearest_source(in_size: int, out_size: int) -> np.ndarray:
    """PyTorch's nearest source index, computed in float32 as its CPU kernel does."""
    if out_size == in_size:
        return np.arange(out_size)
    if out_size == 2 * in_size:
        return np.arange(out_size) >> 1
    scale = np.float32(in_size) / np.float32(out_size)
    index = np.floor(np.arange(out_size, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(index, in_size - 1)


@register("UpsampleNearest2d", "self: tensor, outputSize: int_array, out: tensor!")
def upsample_nearest2d(c: Call) -> Kernel:
    """Nearest-neighbour resize of (N, C, H, W) to ``outputSize``
    (``F.interpolate(mode="nearest")``)."""
    shape = _upsample_shape(c, NEAREST_DTYPES)
    height, width = c.tensor("self").shape[2:]
    rows = _nearest_source(height, shape[2])
    cols = _nearest_source(width, shape[3])
    factors = (_whole_factor(rows, height), _whole_factor(cols, width))

    def kernel(v) -> None:
        out = v["out"]
        if None not in factors and out.flags.c_contiguous:  # no gather: ~10x faster
            wide = np.repeat(v["self"], factors[1], axis=3)  # (N, C, H, W * kw)
            np.copyto(out.reshape(*out.shape[:2], height, factors[0], out.shape[3]),
                      wide[:, :, :, None, :])  # each wide row kh times
            return
        np.copyto(out, v["self"][:, :, like(out, rows[:, None]), like(out, cols[None, :])])
    return kernel


def _whole_factor(source: np.ndarray, in_size: int) -> int | None:
    """k when output position i reads input i // k (a whole scale factor), else None."""
    factor, remainder = divmod(len(source), in_size)
    if remainder or not np.array_equal(source, np.arange(len(source)) // factor):
        return None
    return factor


def _linear_weights(in_size: int, out_size: int, align_corners: bool, scale: float,
                    compute: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices (low, high) and the weight of high, as PyTorch's CPU kernel forms
    them (``area_pixel_compute_scale`` / ``area_pixel_compute_source_index``)."""
    if align_corners:
        ratio = compute.type((in_size - 1) / (out_size - 1)) if out_size > 1 else compute.type(0)
        source = np.arange(out_size, dtype=compute) * ratio
    else:
        ratio = compute.type(1.0 / scale) if scale > 0 else (
            compute.type(in_size) / compute.type(out_size))
        source = np.maximum(ratio * (np.arange(out_size, dtype=compute) + compute.type(0.5))
                            - compute.type(0.5), compute.type(0))
    low = source.astype(np.int64)
    high = low + (low < in_size - 1)
    weight = np.minimum(source - low.astype(compute), compute.type(1))
    return low, high, weight


@register("UpsampleBilinear2d", "self: tensor, outputSize: int_array, alignCorners: bool, "
                                "scalesH: float, scalesW: float, out: tensor!")
def upsample_bilinear2d(c: Call) -> Kernel:
    """Bilinear resize of (N, C, H, W) to ``outputSize``
    (``F.interpolate(mode="bilinear", align_corners=...)``); a positive ``scalesH`` /
    ``scalesW`` replaces ``in / out`` as the scale when corners are not aligned."""
    shape = _upsample_shape(c, BILINEAR_DTYPES)
    for name in ("scalesH", "scalesW"):
        if c[name] < 0:
            raise c.fail(name, "must not be negative")
    height, width = c.tensor("self").shape[2:]
    dtype = c.tensor("self").dtype
    compute = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    align = c["alignCorners"]
    top, bottom, dy = _linear_weights(height, shape[2], align, c["scalesH"], compute)
    left, right, dx = _linear_weights(width, shape[3], align, c["scalesW"], compute)
    dy, dx = dy[:, None], dx[None, :]

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute)
        top_at, bottom_at, left_at, right_at, dx_at, dy_at = (
            like(x, a) for a in (top, bottom, left, right, dx, dy))
        upper, lower = x[:, :, top_at], x[:, :, bottom_at]  # width first, then height, as torch
        upper = (1 - dx_at) * upper[:, :, :, left_at] + dx_at * upper[:, :, :, right_at]
        lower = (1 - dx_at) * lower[:, :, :, left_at] + dx_at * lower[:, :, :, right_at]
        np.copyto(v["out"], ((1 - dy_at) * upper + dy_at * lower).astype(dtype))
    return kernel
