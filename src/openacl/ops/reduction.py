"""Reduction operators: sums, means, extrema and their indices, products, moments, scans
(cumulative sum and maximum), sort, argsort and top-k, logical any/all, trace and dot.

Argument lists and dtype lists are CANN's (``hicann/ops-math``, each op's
``docs/aclnn<Name>.md`` and ``op_api``); semantics are PyTorch's:

* ``dim`` arrays may be negative, must not repeat, and an empty array reduces every dim
  (aclnnReduceSum/Mean/Amax/Amin/Any/All; Std/Var also take a null ``dim``), as CANN's
  op_api does; note ``torch.any(x, dim=())``/``torch.all`` reduce nothing. A 0-dim tensor
  accepts dim 0 and -1.
* Result dtypes as torch when ``dtype`` is not given (Pythonic face only; CANN's C face
  always passes one): sums, products and cumulative sums of integers and bool give int64,
  Mean needs a floating result, ArgMax/ArgMin give int64, Any/All give bool (uint8 for a
  uint8 input). An explicit ``dtype`` must equal ``out``'s dtype where CANN says so.
* float16/bfloat16 are computed in float32 and rounded once; sums, means, products and
  moments accumulate in float64 (int64 for integers, complex128 for complex).
* Empty inputs: a sum is 0, a product 1, a mean/std/var NaN, any False, all True;
  Amax/Amin/ArgMax/ArgMin over a zero-size dim are refused (torch and CANN agree).
* Sort and Topk order NaN above every number (torch); ties keep their input order.
* A one-element result may be written into any one-element ``out`` (CANN's
  CheckShapeAndScalarSame: aclnnProd documents its output shape as ``(1)``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from openacl import dtypes
from openacl.errors import AclError
from openacl.ops import native, promotion
from openacl.ops.call import (
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    REAL_DTYPES,
    WIDE_UNSIGNED_DTYPES,
    Call,
    Kernel,
    array_module,
    as_array,
    like,
)
from openacl.ops.fpstate import ignore_floating_point, quiet
from openacl.ops.registry import register

INT64 = np.dtype(np.int64)
BFLOAT16 = promotion.BFLOAT16
FLOAT64 = np.dtype(np.float64)
FLOAT32 = np.dtype(np.float32)
COMPLEX128 = np.dtype(np.complex128)
HALF_FLOAT_DTYPES = FLOAT_DTYPES - {FLOAT64}  # float16, bfloat16, float32

# supported dtypes of self, per CANN's docs (Ascend 910B and later)
SUM_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES
MEAN_DTYPES = REAL_DTYPES | COMPLEX_DTYPES
EXTREMUM_DTYPES = NUMERIC_DTYPES  # Amax, Amin
PROD_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES
ARG_DTYPES = REAL_DTYPES  # ArgMax, ArgMin (no bool)
ARG_OUT_DTYPES = frozenset({np.dtype(np.int32), INT64})
MOMENT_DTYPES = HALF_FLOAT_DTYPES  # Std, Var: FLOAT, FLOAT16, BFLOAT16
CUMSUM_DTYPES = REAL_DTYPES | COMPLEX_DTYPES  # no bool
TOPK_DTYPES = REAL_DTYPES | WIDE_UNSIGNED_DTYPES
SORT_DTYPES = (REAL_DTYPES - {FLOAT64}) | WIDE_UNSIGNED_DTYPES | BOOL_DTYPES
LOGICAL_DTYPES = NUMERIC_DTYPES  # Any, All
LOGICAL_OUT_DTYPES = frozenset({np.dtype(np.bool_), np.dtype(np.uint8)})
INDEX_DTYPES = frozenset({INT64})
MEAN_V2_DTYPES = REAL_DTYPES | COMPLEX_DTYPES  # no bool
EXTREMUM_DIM_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int64,
                                                      np.bool_, np.int32)) | {BFLOAT16}
ARGSORT_DTYPES = (REAL_DTYPES - {FLOAT64}) | WIDE_UNSIGNED_DTYPES
CUMMAX_DTYPES = NUMERIC_DTYPES
TRACE_DTYPES = NUMERIC_DTYPES | COMPLEX_DTYPES
DOT_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.int8, np.int32,
                                             np.uint8)) | {BFLOAT16}


# -- argument helpers ------------------------------------------------------------------------
def _axes(c: Call, name: str, ndim: int) -> tuple[int, ...]:
    """The reduced axes named by int array ``name``: normalized, unique; empty (or null,
    where the signature makes it optional) means every axis. A 0-dim tensor has no axes."""
    dims = c[name]
    normalized = [c.normalize_dim(name, d, ndim) for d in (dims or ())]
    if len(set(normalized)) != len(normalized):
        raise c.fail(name, "a dim appears more than once")
    if ndim == 0:
        return ()
    return tuple(sorted(normalized)) if normalized else tuple(range(ndim))


def _dim(c: Call, name: str, ndim: int) -> int:
    return c.normalize_dim(name, c[name], ndim)


def _reduced_shape(shape: Sequence[int], axes: Iterable[int], keep: bool) -> tuple[int, ...]:
    axes = set(axes)
    return tuple(1 if i in axes else s for i, s in enumerate(shape) if keep or i not in axes)


def _count(shape: Sequence[int], axes: Iterable[int]) -> int:
    return math.prod(shape[a] for a in axes)


def _refuse_empty_reduction(c: Call, shape: Sequence[int], axes: Iterable[int]) -> None:
    for axis in axes:
        if shape[axis] == 0:
            raise c.fail("self", f"cannot reduce dim {axis} of size 0 (the reduction has no "
                                 f"identity)")


def _dtype_arg(c: Call, name: str, supported: Iterable[np.dtype]) -> np.dtype | None:
    """The numpy dtype of aclDataType argument ``name`` (None when not given)."""
    value = c[name]
    if value is None:
        return None
    try:
        dtype = dtypes.to_numpy_dtype(value)
    except AclError as exc:
        raise c.fail(name, exc.message) from None
    if dtype not in frozenset(supported):
        names = ", ".join(sorted(str(d) for d in supported))
        raise c.fail(name, f"dtype {dtype} is not supported (supported: {names})")
    return dtype


def _declare_out(c: Call, name: str, shape: Sequence[int], dtype: np.dtype,
                 exact_dtype: bool = False) -> None:
    """``check_out``, except that a one-element result fits any one-element output."""
    out = c[name]
    if out is not None and out.shape != tuple(shape) and math.prod(shape) == 1 \
            and out.numel == 1:
        shape = out.shape
    c.check_out(name, shape, dtype, exact_dtype)


def _check_out_dtype(c: Call, name: str, allowed: Iterable[np.dtype]) -> None:
    if c[name] is not None:
        c.check_dtype(name, allowed)


def _int_default(dtype: np.dtype) -> np.dtype:
    """torch's result dtype of a sum/product/cumsum: integers and bool widen to int64."""
    return INT64 if promotion.category(dtype) <= promotion.INTEGER else dtype


def _accumulator(dtype: np.dtype) -> np.dtype:
    """The dtype a sum or product of ``dtype`` values accumulates in."""
    category = promotion.category(dtype)
    if category == promotion.COMPLEX:
        return COMPLEX128
    if category == promotion.FLOATING:
        return FLOAT64
    return INT64


def _store(v, name: str, value) -> None:
    """Write ``value`` into output ``name`` (a one-element result fits a one-element out)."""
    value = as_array(value)
    target = v[name]
    if value.shape != target.shape and value.size == target.size:
        value = value.reshape(target.shape)
    v.write(name, value)


def _sums(x, axes: tuple[int, ...], keep: bool, accumulate: np.dtype):
    """``np.sum(x, axes, keepdims=keep, dtype=accumulate)`` (dtype= widens buffer by buffer
    inside the reduction: no widened copy of the input); a float32 host array summed in
    float64 over its trailing axes (a global average pool) goes to the C kernels instead,
    one pass in float64 lanes."""
    lib = native.kernels()
    ndim = x.ndim
    if (lib is not None and accumulate == FLOAT64 and axes
            and axes == tuple(range(ndim - len(axes), ndim)) and x.size
            and native.host_float32(x)):
        lead = x.shape[:ndim - len(axes)]
        sums = np.empty(lead, np.float64)
        lib.row_sums(x, sums, x.size // max(math.prod(lead), 1))
        return sums.reshape(_reduced_shape(x.shape, axes, True)) if keep else sums
    return np.sum(x, axis=axes, keepdims=keep, dtype=accumulate)


# -- sum, mean, prod ---------------------------------------------------------------------------
@register("ReduceSum", "self: tensor, dims: int_array = [], keepDims: bool = False, "
                       "dtype: dtype?, out: tensor!")
def reduce_sum(c: Call) -> Kernel:
    """Sum over ``dims`` (empty: all); result in ``dtype`` (default: int64 for integer and
    bool input, else self's dtype)."""
    self = c.tensor("self")
    source = c.check_dtype("self", SUM_DTYPES)
    axes = _axes(c, "dims", self.ndim)
    keep = bool(c["keepDims"])
    requested = _dtype_arg(c, "dtype", SUM_DTYPES)
    result = _int_default(source) if requested is None else requested
    if promotion.category(source) == promotion.COMPLEX and \
            promotion.category(result) != promotion.COMPLEX:
        raise c.fail("dtype", f"a complex sum cannot be given dtype {result}")
    _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), result,
                 exact_dtype=requested is not None)
    accumulate = _accumulator(result)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(result, copy=False)
        _store(v, "out", _sums(x, axes, keep, accumulate))
    return kernel


@register("Mean", "self: tensor, dim: int_array = [], keepDim: bool = False, dtype: dtype?, "
                  "out: tensor!")
def mean(c: Call) -> Kernel:
    """Arithmetic mean over ``dim`` (empty: all); the result dtype must be floating or
    complex (torch), an empty reduction is NaN."""
    self = c.tensor("self")
    source = c.check_dtype("self", MEAN_DTYPES)
    axes = _axes(c, "dim", self.ndim)
    keep = bool(c["keepDim"])
    requested = _dtype_arg(c, "dtype", MEAN_DTYPES)
    result = source if requested is None else requested
    if promotion.category(result) < promotion.FLOATING:
        raise c.fail("dtype" if requested is not None else "self",
                     f"mean needs a floating or complex result dtype, got {result}")
    if not promotion.can_cast(source, result):
        raise c.fail("dtype", f"self's dtype {source} cannot be cast to {result}")
    _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), result)
    return _mean_kernel(self.shape, axes, keep, result)


def _mean_kernel(shape: Sequence[int], axes: tuple[int, ...], keep: bool,
                 result: np.dtype) -> Kernel:
    """out = the sum over ``axes`` (accumulated wide) / their element count (NaN if none),
    rounded once into ``result``; an integer ``result`` (MeanV2) takes the float64 mean
    truncated."""
    accumulate = _accumulator(result) if promotion.is_floating(result) or \
        promotion.category(result) == promotion.COMPLEX else FLOAT64
    count = _count(shape, axes)
    trailing = bool(axes) and axes == tuple(range(len(shape) - len(axes), len(shape)))

    def kernel(v) -> None:
        if trailing and count and result == FLOAT32:
            v.plan(kernel, lambda: _mean_rows_plan(v, count) or functools.partial(general, v))()
        else:
            general(v)

    def general(v) -> None:
        x = as_array(v["self"])
        if promotion.category(x.dtype) < promotion.FLOATING:  # (integers: cast first, as torch)
            x = x.astype(result, copy=False)
        # floats are summed wide as they are and rounded once into ``result``: a float64
        # mean asked for in bfloat16 is not rounded to bfloat16 element by element first
        total = _sums(x, axes, keep, accumulate)
        if count:
            with ignore_floating_point():
                total = total / count
        else:
            total = array_module(total).full(total.shape, np.nan, accumulate)
        _store(v, "out", total)
    return kernel


def _mean_rows_plan(v, count: int) -> Callable[[], None] | None:
    """The plan (``Views.plan``) of a float32 mean over trailing axes (a global average
    pool) on host arrays: the C kernel's float64 row sums into a buffer made once, then one
    division rounded once into the output, as the general kernel computes it; None where
    it does not apply."""
    lib = native.kernels()
    x, out = v["self"], v["out"]
    if lib is None or not native.host_float32(x, out) or not x.size or \
            np.may_share_memory(x, out):
        return None
    sums = np.empty(out.size, np.float64)
    rows, flat = functools.partial(lib.row_sums, x, sums, x.size // out.size), out.reshape(-1)

    def run() -> None:
        rows()
        np.divide(sums, count, out=flat, casting="unsafe")
    return run


@register("MeanV2", "self: tensor, dim: int_array = [], keepDim: bool = False, "
                    "noopWithEmptyAxes: bool = False, out: tensor!")
def mean_v2(c: Call) -> Kernel:
    """Mean over ``dim``; an empty ``dim`` reduces every dim, or none when
    ``noopWithEmptyAxes``. The result has self's dtype."""
    self = c.tensor("self")
    source = c.check_dtype("self", MEAN_V2_DTYPES)
    noop = bool(c["noopWithEmptyAxes"]) and not c["dim"]
    axes = () if noop else _axes(c, "dim", self.ndim)
    keep = bool(c["keepDim"])
    _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), source, exact_dtype=True)
    return _mean_kernel(self.shape, axes, keep, source)


def _prod_prepare(c: Call, axes: tuple[int, ...], keep: bool) -> Kernel:
    self = c.tensor("self")
    source = c.check_dtype("self", PROD_DTYPES)
    requested = _dtype_arg(c, "dtype", PROD_DTYPES)
    result = _int_default(source) if requested is None else requested
    if not promotion.can_cast(source, result):
        raise c.fail("dtype", f"self's dtype {source} cannot be cast to {result}")
    _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), result,
                 exact_dtype=requested is not None)
    accumulate = _accumulator(result)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(result, copy=False).astype(accumulate, copy=False)
        _store(v, "out", quiet(lambda: np.prod(x, axis=axes, keepdims=keep))())
    return kernel


@register("Prod", "self: tensor, dtype: dtype?, out: tensor!")
def prod(c: Call) -> Kernel:
    """Product of all elements (a 0-dim result, or any one-element ``out``)."""
    return _prod_prepare(c, tuple(range(c.tensor("self").ndim)), False)


@register("ProdDim", "self: tensor, dim: int, keepDim: bool = False, dtype: dtype?, "
                     "out: tensor!")
def prod_dim(c: Call) -> Kernel:
    """Product over one dim."""
    ndim = c.tensor("self").ndim
    dim = _dim(c, "dim", ndim)
    return _prod_prepare(c, (dim,) if ndim else (), bool(c["keepDim"]))


# -- extrema and their indices -------------------------------------------------------------
def _extremum(reduce: Callable) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", EXTREMUM_DTYPES)
        axes = _axes(c, "dim", self.ndim)
        keep = bool(c["keepDim"])
        _refuse_empty_reduction(c, self.shape, axes)
        _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), source,
                     exact_dtype=True)
        compute = promotion.compute_dtype(source)

        short = len(axes) == 1 and 1 < self.shape[axes[0]] <= SHORT_AXIS and \
            self.numel >= SHORT_AXIS_ELEMENTS * self.shape[axes[0]]

        def kernel(v) -> None:
            x = as_array(v["self"]).astype(compute, copy=False)
            if short and type(x) is np.ndarray:
                _store(v, "out", _short_axis_extremum(x, axes[0], keep, ELEMENTWISE[reduce]))
                return
            _store(v, "out", reduce(x, axis=axes, keepdims=keep))
        return kernel
    return prepare


def _short_axis_extremum(x: np.ndarray, axis: int, keep: bool, elementwise: np.ufunc
                         ) -> np.ndarray:
    """Max or min over one short axis as elementwise passes over its slices: numpy reduces
    a short innermost axis element by element (a (20480, 3) max: 1 ms; its 3 slices: 50 us).
    The same values: maximum/minimum propagate NaN as max/min do, and are exact."""
    index = [slice(None)] * x.ndim
    index[axis] = 0
    result = x[tuple(index)].copy()
    for position in range(1, x.shape[axis]):
        index[axis] = position
        elementwise(result, x[tuple(index)], out=result)
    return np.expand_dims(result, axis) if keep else result


SHORT_AXIS = 16  # one reduced axis this short runs as slices (above: numpy's own loop wins)
SHORT_AXIS_ELEMENTS = 64  # ... when there are this many results at least
ELEMENTWISE = {np.max: np.maximum, np.min: np.minimum}
amax = register("Amax", "self: tensor, dim: int_array = [], keepDim: bool = False, "
                        "out: tensor!")(_extremum(np.max))
amin = register("Amin", "self: tensor, dim: int_array = [], keepDim: bool = False, "
                        "out: tensor!")(_extremum(np.min))


def _whole_extremum(reduce: Callable) -> Callable[[Call], Kernel]:
    """Max/Min of every element: a 0-dim result (or any one-element ``out``)."""
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", EXTREMUM_DTYPES)
        if self.numel == 0:
            raise c.fail("self", "is empty: the maximum and minimum have no identity")
        _declare_out(c, "out", (), source, exact_dtype=True)
        compute = promotion.compute_dtype(source)

        def kernel(v) -> None:
            _store(v, "out", reduce(as_array(v["self"]).astype(compute, copy=False)))
        return kernel
    return prepare


max_ = register("Max", "self: tensor, out: tensor!")(_whole_extremum(np.max))
min_ = register("Min", "self: tensor, out: tensor!")(_whole_extremum(np.min))


@register("MaxV2", "self: tensor, dims: int_array = [], keepDims: bool = False, "
                   "noopWithEmptyDims: bool = False, out: tensor!")
def max_v2(c: Call) -> Kernel:
    """Maximum over ``dims``; an empty ``dims`` reduces every dim, or none when
    ``noopWithEmptyDims`` (out is then a copy of self)."""
    self = c.tensor("self")
    source = c.check_dtype("self", EXTREMUM_DTYPES)
    noop = bool(c["noopWithEmptyDims"]) and not c["dims"]
    axes = () if noop else _axes(c, "dims", self.ndim)
    keep = bool(c["keepDims"])
    _refuse_empty_reduction(c, self.shape, axes)
    _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), source, exact_dtype=True)
    compute = promotion.compute_dtype(source)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute, copy=False)
        _store(v, "out", np.max(x, axis=axes, keepdims=keep) if axes else x)
    return kernel


def _extremum_with_index(find: Callable) -> Callable[[Call], Kernel]:
    """MaxDim/MinDim: the extremum along ``dim`` and its index (the first one; a NaN wins,
    as in torch.max / torch.min)."""
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", EXTREMUM_DIM_DTYPES)
        if self.ndim == 0:
            raise c.fail("self", "must have 1 to 8 dims")
        dim = _dim(c, "dim", self.ndim)
        keep = bool(c["keepdim"])
        _refuse_empty_reduction(c, self.shape, (dim,))
        shape = _reduced_shape(self.shape, (dim,), keep)
        _declare_out(c, "out", shape, source, exact_dtype=True)
        c.check_out("indices", shape, INT64)
        _check_out_dtype(c, "indices", ARG_OUT_DTYPES)
        compute = promotion.compute_dtype(source)

        def kernel(v) -> None:
            x = as_array(v["self"])
            index = find(x.astype(compute, copy=False), axis=dim, keepdims=True)
            values = np.take_along_axis(x, index, axis=dim)
            v.write("out", values if keep else np.squeeze(values, dim))
            v.write("indices", index if keep else np.squeeze(index, dim))
        return kernel
    return prepare


max_dim = register("MaxDim", "self: tensor, dim: int, keepdim: bool = False, out: tensor!, "
                             "indices: tensor!")(_extremum_with_index(np.argmax))
min_dim = register("MinDim", "self: tensor, dim: int, keepdim: bool = False, out: tensor!, "
                             "indices: tensor!")(_extremum_with_index(np.argmin))


def _arg_extremum(find: Callable) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", ARG_DTYPES)
        dim = _dim(c, "dim", self.ndim)
        keep = bool(c["keepdim"])
        axes = (dim,) if self.ndim else ()
        _refuse_empty_reduction(c, self.shape, axes)
        _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), INT64)
        _check_out_dtype(c, "out", ARG_OUT_DTYPES)
        compute = promotion.compute_dtype(source)

        def kernel(v) -> None:
            if not axes:
                _store(v, "out", np.zeros((), INT64))
                return
            x = as_array(v["self"]).astype(compute, copy=False)
            _store(v, "out", find(x, axis=dim, keepdims=keep))  # first NaN wins, as torch
        return kernel
    return prepare


arg_max = register("ArgMax", "self: tensor, dim: int, keepdim: bool = False, out: tensor!")(
    _arg_extremum(np.argmax))
arg_min = register("ArgMin", "self: tensor, dim: int, keepdim: bool = False, out: tensor!")(
    _arg_extremum(np.argmin))


# -- moments -------------------------------------------------------------------------------------
def _moment(root: bool, correction_of: Callable[[Call], int]) -> Callable[[Call], Kernel]:
    """Variance (``root``: standard deviation) over ``dim`` with divisor
    ``max(0, N - correction)``, as torch: a zero divisor gives inf, or NaN for 0/0."""
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", MOMENT_DTYPES)
        axes = _axes(c, "dim", self.ndim)
        keep = bool(c["keepdim"])
        correction = correction_of(c)
        _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), source)
        _check_out_dtype(c, "out", MOMENT_DTYPES)
        count = _count(self.shape, axes)
        divisor = max(0, count - correction)

        def kernel(v) -> None:
            x = as_array(v["self"]).astype(FLOAT64)

            def compute() -> np.ndarray:
                centred = x - np.sum(x, axis=axes, keepdims=True) / count
                value = np.sum(centred * centred, axis=axes, keepdims=keep) / divisor
                return np.sqrt(value) if root else value
            _store(v, "out", quiet(compute)())
        return kernel
    return prepare


def _correction(c: Call) -> int:
    return int(c["correction"])


def _unbiased(c: Call) -> int:
    return 1 if c["unbiased"] else 0


std = register("Std", "self: tensor, dim: int_array?, correction: int = 1, "
                      "keepdim: bool = False, out: tensor!")(_moment(True, _correction))
var = register("Var", "self: tensor, dim: int_array?, unbiased: bool = True, "
                      "keepdim: bool = False, out: tensor!")(_moment(False, _unbiased))
var_correction = register("VarCorrection", "self: tensor, dim: int_array?, correction: int = 1, "
                                           "keepdim: bool = False, out: tensor!")(
    _moment(False, _correction))


@register("StdMeanCorrection", "self: tensor, dim: int_array?, correction: int = 1, "
                              "keepdim: bool = False, stdOut: tensor!, meanOut: tensor!")
def std_mean_correction(c: Call) -> Kernel:
    """The standard deviation (divisor ``max(0, N - correction)``) and the mean over ``dim``
    (null or empty: every dim), as torch.std_mean."""
    self = c.tensor("self")
    source = c.check_dtype("self", MOMENT_DTYPES)
    axes = _axes(c, "dim", self.ndim)
    keep = bool(c["keepdim"])
    shape = _reduced_shape(self.shape, axes, keep)
    for name in ("stdOut", "meanOut"):
        _declare_out(c, name, shape, source)
        _check_out_dtype(c, name, MOMENT_DTYPES)
    count = _count(self.shape, axes)
    divisor = max(0, count - int(c["correction"]))

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(FLOAT64)

        def compute() -> tuple[np.ndarray, np.ndarray]:
            mean_kept = np.sum(x, axis=axes, keepdims=True) / count
            centred = x - mean_kept
            spread = np.sqrt(np.sum(centred * centred, axis=axes, keepdims=keep) / divisor)
            return spread, mean_kept if keep else np.sum(x, axis=axes) / count
        spread, average = quiet(compute)()
        _store(v, "stdOut", spread)
        _store(v, "meanOut", average)
    return kernel


# -- cumulative sum ------------------------------------------------------------------------------
@register("Cumsum", "self: tensor, dim: int, dtype: dtype?, out: tensor!")
def cumsum(c: Call) -> Kernel:
    """Running sum along ``dim``; ``dtype`` (default: int64 for integers, else self's) must
    equal out's dtype."""
    self = c.tensor("self")
    source = c.check_dtype("self", CUMSUM_DTYPES)
    dim = _dim(c, "dim", self.ndim)
    requested = _dtype_arg(c, "dtype", CUMSUM_DTYPES)
    result = _int_default(source) if requested is None else requested
    if not promotion.can_cast(source, result):
        raise c.fail("dtype", f"self's dtype {source} cannot be cast to {result}")
    c.check_out("out", self.shape, result, exact_dtype=requested is not None)
    accumulate = _accumulator(result)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(result, copy=False).astype(accumulate, copy=False)
        v.write("out", x if x.ndim == 0 else np.cumsum(x, axis=dim))
    return kernel


@register("CumsumV2", "self: tensor, dim: int, exclusive: bool = False, reverse: bool = False, "
                     "out: tensor!")
def cumsum_v2(c: Call) -> Kernel:
    """Running sum along ``dim`` in self's dtype; ``exclusive``: each element left out of
    its own sum (the first is 0); ``reverse``: summed from the end (tf.cumsum)."""
    self = c.tensor("self")
    source = c.check_dtype("self", CUMSUM_DTYPES)
    dim = _dim(c, "dim", self.ndim)
    exclusive, reverse = bool(c["exclusive"]), bool(c["reverse"])
    c.check_out("out", self.shape, source, exact_dtype=True)
    accumulate = _accumulator(source)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(accumulate)
        if x.ndim == 0:
            v.write("out", x * 0 if exclusive else x)
            return
        if reverse:
            x = np.flip(x, dim)
        sums = np.cumsum(x, axis=dim)
        if exclusive:  # shifted by one (no subtraction: inf - inf would be NaN)
            xp = array_module(sums)
            head = xp.zeros_like(np.take(sums, like(sums, np.arange(1)), axis=dim))
            sums = xp.concatenate([head, np.take(sums, like(sums, np.arange(
                x.shape[dim] - 1)), axis=dim)], axis=dim)
        v.write("out", np.flip(sums, dim) if reverse else sums)
    return kernel


@register("Cummax", "self: tensor, dim: int, valuesOut: tensor!, indicesOut: tensor!")
def cummax(c: Call) -> Kernel:
    """Running maximum along ``dim`` and the index it was taken from (torch.cummax: on a
    tie the later index, a NaN sticks and its latest index is taken)."""
    self = c.tensor("self")
    source = c.check_dtype("self", CUMMAX_DTYPES)
    dim = _dim(c, "dim", self.ndim)
    c.check_out("valuesOut", self.shape, source, exact_dtype=True)
    c.check_out("indicesOut", self.shape, INT64)
    _check_out_dtype(c, "indicesOut", ARG_OUT_DTYPES)
    compute = promotion.compute_dtype(source)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute, copy=False)
        if x.ndim == 0:
            v.write("valuesOut", x)
            v.write("indicesOut", 0)
            return
        values = np.maximum.accumulate(x, axis=dim)
        # an element updates the running maximum exactly when it equals the new maximum
        updated = values == x
        if promotion.is_floating(source):
            updated = updated | np.isnan(x)
        positions = array_module(x).arange(x.shape[dim]).reshape(
            [-1 if k == dim else 1 for k in range(x.ndim)])
        v.write("valuesOut", values)
        v.write("indicesOut", np.maximum.accumulate(np.where(updated, positions, 0), axis=dim))
    return kernel


# -- sort and top-k -----------------------------------------------------------------------------
def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices that sort ``x`` along ``axis``, ties in input order, NaN above everything."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # sort the reversed axis ascending, then reverse: descending with ties still in order
    order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return x.shape[axis] - 1 - order


def _sorted_outputs(v, compute: np.dtype, axis: int | None, descending: bool,
                    k: int | None = None) -> None:
    values = as_array(v["self"])
    if axis is None:  # a 0-dim tensor: itself, at index 0
        v.write("valuesOut", values)
        v.write("indicesOut", np.zeros((), INT64))
        return
    order = _stable_order(values.astype(compute, copy=False), axis, descending)
    if k is not None:
        order = np.take(order, like(order, np.arange(k)), axis=axis)
    v.write("valuesOut", np.take_along_axis(values, order, axis=axis))
    v.write("indicesOut", order)


@register("Sort", "self: tensor, stable: bool = False, dim: int = -1, descending: bool = False, "
                  "valuesOut: tensor!, indicesOut: tensor!")
def sort(c: Call) -> Kernel:
    """Sort along ``dim``; the order is always stable (a legal result when not asked)."""
    self = c.tensor("self")
    source = c.check_dtype("self", SORT_DTYPES)  # 'stable' needs nothing: we always are
    dim = _dim(c, "dim", self.ndim)
    descending = bool(c["descending"])
    c.check_out("valuesOut", self.shape, source, exact_dtype=True)
    c.check_out("indicesOut", self.shape, INT64, exact_dtype=True)
    compute = promotion.compute_dtype(source)
    axis = dim if self.ndim else None

    def kernel(v) -> None:
        _sorted_outputs(v, compute, axis, descending)
    return kernel


@register("Argsort", "self: tensor, dim: int = -1, descending: bool = False, out: tensor!")
def argsort(c: Call) -> Kernel:
    """The indices that sort self along ``dim`` (stable: ties in input order)."""
    self = c.tensor("self")
    source = c.check_dtype("self", ARGSORT_DTYPES)
    dim = _dim(c, "dim", self.ndim)
    descending = bool(c["descending"])
    c.check_out("out", self.shape, INT64, exact_dtype=True)
    compute = promotion.compute_dtype(source)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(compute, copy=False)
        v.write("out", _stable_order(x, dim, descending) if x.ndim else 0)
    return kernel


@register("Topk", "self: tensor, k: int, dim: int = -1, largest: bool = True, "
                  "sorted: bool = True, valuesOut: tensor!, indicesOut: tensor!")
def topk(c: Call) -> Kernel:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, sorted
    (also when ``sorted`` is False: any order is allowed then)."""
    self = c.tensor("self")
    source = c.check_dtype("self", TOPK_DTYPES)
    dim = _dim(c, "dim", self.ndim)
    k = int(c["k"])
    size = self.shape[dim] if self.ndim else 1
    if not 0 <= k <= size:
        raise c.fail("k", f"k must be in [0, {size}] (the size of dim {dim})")
    largest = bool(c["largest"])  # 'sorted' needs nothing: results always are
    shape = tuple(k if i == dim else s for i, s in enumerate(self.shape))
    c.check_out("valuesOut", shape, source, exact_dtype=True)
    c.check_out("indicesOut", shape, INT64, exact_dtype=True)
    compute = promotion.compute_dtype(source)
    axis = dim if self.ndim else None

    def kernel(v) -> None:
        _sorted_outputs(v, compute, axis, largest, k)
    return kernel


# -- any / all ------------------------------------------------------------------------------------
def _logical(reduce: Callable) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        self = c.tensor("self")
        source = c.check_dtype("self", LOGICAL_DTYPES)
        axes = _axes(c, "dim", self.ndim)
        keep = bool(c["keepdim"])
        result = np.dtype(np.uint8) if source == np.uint8 else np.dtype(np.bool_)
        _declare_out(c, "out", _reduced_shape(self.shape, axes, keep), result)
        _check_out_dtype(c, "out", LOGICAL_OUT_DTYPES)
        compute = promotion.compute_dtype(source)

        def kernel(v) -> None:
            truth = as_array(v["self"]).astype(compute, copy=False) != 0
            _store(v, "out", reduce(truth, axis=axes, keepdims=keep))
        return kernel
    return prepare


any_ = register("Any", "self: tensor, dim: int_array = [], keepdim: bool = False, "
                       "out: tensor!")(_logical(np.any))
all_ = register("All", "self: tensor, dim: int_array = [], keepdim: bool = False, "
                       "out: tensor!")(_logical(np.all))


# -- trace and dot ------------------------------------------------------------------------------
@register("Trace", "self: tensor, out: tensor!")
def trace(c: Call) -> Kernel:
    """Sum of the main diagonal of a 2-d self: 0-dim, in self's dtype for floats and complex,
    int64 for integers and bool (torch.trace)."""
    self = c.tensor("self")
    source = c.check_dtype("self", TRACE_DTYPES)
    if self.ndim != 2:
        raise c.fail("self", "must be 2-d")
    result = _int_default(source)
    _declare_out(c, "out", (), result, exact_dtype=True)
    accumulate = _accumulator(result)

    def kernel(v) -> None:
        _store(v, "out", np.trace(as_array(v["self"]).astype(accumulate)))
    return kernel


@register("Dot", "self: tensor, tensor: tensor, out: tensor!")
def dot(c: Call) -> Kernel:
    """Inner product of two 1-d tensors of one dtype and length, in that dtype (integers
    wrap, as torch.dot's do)."""
    self = c.tensor("self")
    source = c.check_dtype("self", DOT_DTYPES)
    other = c.tensor("tensor")
    if other.dtype != source:
        raise c.fail("tensor", f"dtype must equal self's ({source})")
    if self.ndim != 1 or other.ndim != 1:
        raise c.fail("self" if self.ndim != 1 else "tensor", "must be 1-d")
    if self.shape != other.shape:
        raise c.fail("tensor", f"must have self's shape {list(self.shape)}")
    _declare_out(c, "out", (), source, exact_dtype=True)
    accumulate = _accumulator(source)

    def kernel(v) -> None:
        x = as_array(v["self"]).astype(accumulate)
        y = as_array(v["tensor"]).astype(accumulate)
        _store(v, "out", np.dot(x, y))
    return kernel
