"""Foreach operators: one elementwise operator applied to every tensor of a tensor list
(``aclnnForeachAbs(x, out)``, ``aclnnForeachAddList(x1, x2, alpha, out)``, ...), the fused
multi-tensor steps optimizers run over all of a model's parameters at once.

The 69 operators CANN tests (plus the in-place forms and NonFiniteCheckAndUnscale it also
documents) come from the tables at the end of this module: each names the per-tensor
function (the very numpy kernels of the single-tensor operators in ``arithmetic.py`` and
``activation.py`` where those exist) and how every argument reaches it:

=================  =========================================================================
``list``           a tensor list, one tensor per index (``x2``, ``weight`` of LerpList)
``tensor``         an aclTensor of one element, the same value at every index (the V1
                   ``scalar`` / ``alpha`` forms; read at launch, like any tensor)
``tensor_each``    an aclTensor of one element per list index (``scalars`` of AddcmulList)
``scalar``         an aclScalar, the same value at every index (the V2 forms)
``scalars``        an aclScalarList, one value per index (the ScalarList forms)
=================  =========================================================================

Rules, from CANN's aclnn documents (hicann/ops-nn ``foreach/*/docs``): every list holds
tensors of one dtype, the lists pair up index by index with equal shapes (no broadcasting),
and ``out[i]`` has the shape and the dtype of the first list's tensor ``i`` (ForeachCopy
may convert float32 <-> float16/bfloat16). CANN reports a shape or a within-list dtype
mismatch at tiling (561002); here every refusal is phase 1's ``ACLNN_ERR_PARAM_INVALID``.
float16 and bfloat16 are computed in float32 and rounded once into the output, as CANN's
kernels and torch's ``_foreach_*`` do; a bfloat16 list takes a float32 scalar unrounded.
float32 and int32 lists are computed straight into their outputs (``out=``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.ops import native, promotion
from openacl.ops._special import erfc
from openacl.ops.activation import sigmoid
from openacl.ops.arithmetic import _UNARY, _integer_power
from openacl.ops.call import (
    Call,
    Kernel,
    ScalarArg,
    TensorArg,
    _byte_span,
    array_module,
    like,
)
from openacl.ops.fpstate import quiet
from openacl.ops.registry import register, register_inplace

# dtype groups of the documents
F16, BF16, F32 = np.dtype(np.float16), promotion.BFLOAT16, np.dtype(np.float32)
F64 = np.dtype(np.float64)
I8, U8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32,
                                                 np.int64))
FLOATS = frozenset({F16, BF16, F32})
FLOATS_I32 = FLOATS | {I32}
FLOATS_SMALL_INTS = FLOATS_I32 | {I16, I8, U8}  # Add/Sub/Mul lists, Neg
COPY_DTYPES = FLOATS | {I8, U8, I16, np.dtype(np.uint16), I32, np.dtype(np.uint32), I64,
                        F64, np.dtype(np.bool_)}
COPY_CONVERSIONS = {F32: frozenset({F16, BF16}), F16: frozenset({F32})}  # besides x's own
TENSOR_SCALARS = frozenset({F32, F16, I32})  # an aclTensor scalar / alpha
V2_SCALARS = frozenset({F32, F16, I32, F64, I64})  # an aclScalar
V2_FLOAT_SCALARS = frozenset({F32, F16, F64})
LIST_SCALARS = frozenset({F32, I64})  # an aclScalarList
LIST_SCALARS_F64 = LIST_SCALARS | {F64}
NORM_ORDERS = frozenset({F32, F64, I64})  # ForeachNorm's p
ROUND_MODE_DTYPES = frozenset({I8, I64})

# aclnnForeachRoundOffNumber's roundMode (CANN's RoundMode values; others: no rounding)
ROUND_RINT, ROUND_FLOOR, ROUND_CEIL, ROUND_HALF_AWAY = 1, 2, 3, 4
ROUND_TRUNC, ROUND_ODD, ROUND_FRACTION = 5, 6, 7


@dataclass(frozen=True)
class Operand:
    """How argument ``name`` reaches the per-tensor function (see the module table)."""

    name: str
    kind: str  # "list", "tensor", "tensor_each", "scalar", "scalars"
    dtypes: frozenset = frozenset()  # allowed dtypes of a scalar operand (any: empty)


def _list(name: str) -> Operand:
    return Operand(name, "list")


# -- phase 1 -------------------------------------------------------------------------------
def _check_list(c: Call, name: str, supported, dtype: np.dtype | None = None,
                shapes: Sequence[tuple[int, ...]] | None = None) -> list[TensorArg]:
    """Tensor list ``name``: dtypes in ``supported``, all alike (equal to ``dtype`` when
    given), and one tensor per entry of ``shapes`` with that shape, when given."""
    tensors = c[name]
    if not isinstance(tensors, list):
        raise c.fail(name, "a tensor list is required here")
    first = c.check_dtype(name, supported, tensors[0].dtype)
    expected = first if dtype is None else dtype
    for index, tensor in enumerate(tensors):
        if tensor.dtype != expected:
            raise c.fail(name, f"{name}[{index}] has dtype {tensor.dtype}; every tensor must "
                               f"have dtype {expected}")
    if shapes is not None:
        if len(tensors) != len(shapes):
            raise c.fail(name, f"must hold {len(shapes)} tensors, one per tensor of the "
                               f"first list; it holds {len(tensors)}")
        for index, (tensor, shape) in enumerate(zip(tensors, shapes, strict=True)):
            if tensor.shape != shape:
                raise c.fail(name, f"{name}[{index}] has shape {list(tensor.shape)}; expected "
                                   f"{list(shape)}")
    return tensors


def _declare_outs(c: Call, name: str, shapes: Sequence[tuple[int, ...]],
                  dtypes: Sequence[np.dtype] | np.dtype, any_shape_of_one: bool = False
                  ) -> None:
    """Declare output list ``name``: tensor ``i`` of ``shapes[i]`` and its dtype (one dtype,
    or a set of allowed ones per the first entry: ForeachCopy). ``any_shape_of_one``: any
    shape holding one element is accepted (ForeachNorm); ``shapes`` are then inferred."""
    allowed = frozenset({np.dtype(dtypes)}) if isinstance(dtypes, np.dtype) else frozenset(
        dtypes)
    inferred = np.dtype(dtypes) if isinstance(dtypes, np.dtype) else next(iter(dtypes))
    outs = c[name]
    if outs is None:
        if not c.infer:
            raise c.fail(name, "is null")
        c.inferred[c._name(name)] = [(tuple(shape), inferred) for shape in shapes]
        return
    if len(outs) != len(shapes):
        raise c.fail(name, f"must hold {len(shapes)} tensors, one per input tensor; it holds "
                           f"{len(outs)}")
    for index, (out, shape) in enumerate(zip(outs, shapes, strict=True)):
        fits = out.numel == 1 if any_shape_of_one else out.shape == tuple(shape)
        if not fits:
            wanted = "1 element" if any_shape_of_one else f"shape {list(shape)}"
            raise c.fail(name, f"{name}[{index}] has shape {list(out.shape)}; expected "
                               f"{wanted}")
        if out.dtype not in allowed:
            names = ", ".join(sorted(str(d) for d in allowed))
            raise c.fail(name, f"{name}[{index}] has dtype {out.dtype}; expected {names}")
    _check_apart(c, name, outs)
    if any(o.dtype != outs[0].dtype for o in outs):
        raise c.fail(name, "every tensor must have the same dtype")
    c.inferred[c._name(name)] = [(o.shape, o.dtype) for o in outs]


def _same_view(a: TensorArg, b: TensorArg) -> bool:
    meta, other = a.meta, b.meta
    return (meta.data == other.data and meta.offset == other.offset and a.dtype == b.dtype
            and meta.strides == other.strides and a.shape == b.shape)


def _check_apart(c: Call, name: str, outs: list[TensorArg]) -> None:
    """``Call.check_no_overlap`` for every tensor of ``outs`` in one vectorized pass over
    the inputs' memory spans (pairwise it would be quadratic in a long parameter list): an
    output that meets an input other than the very same view, or writes an element twice,
    goes through ``check_no_overlap``, which refuses it naming the input."""
    inputs = [t for t in c.tensors() if not t.output]
    known = [(span, t) for t in inputs if (span := _byte_span(t)) is not None]
    starts = np.array([span[0] for span, _ in known], np.int64)
    ends = np.array([span[1] for span, _ in known], np.int64)
    for out in outs:
        span = _byte_span(out)
        doubled = out.numel and any(s == 0 and d > 1 for s, d in
                                    zip(out.meta.strides, out.shape, strict=True))
        hits = () if span is None else np.flatnonzero((starts < span[1]) & (ends > span[0]))
        if doubled or any(not _same_view(known[h][1], out) for h in hits):
            c.check_no_overlap(name, out)


def _scalar_value(c: Call, name: str, arg: Any, allowed: frozenset, dtype: np.dtype,
                  compute: np.dtype, what: str) -> Any:
    """An aclScalar (``arg``) as a ``compute`` number: its dtype in ``allowed`` (when not
    empty) and castable to ``dtype``, an integer in ``dtype``'s range."""
    if not isinstance(arg, ScalarArg):
        raise c.fail(name, "a scalar is required here")
    if allowed and arg.dtype not in allowed:
        names = ", ".join(sorted(str(d) for d in allowed))
        raise c.fail(name, f"{what} has dtype {arg.dtype}; supported: {names}")
    if not promotion.can_cast(arg.dtype, dtype):
        raise c.fail(name, f"{what}: a {arg.dtype} scalar cannot be used with {dtype} tensors")
    if np.dtype(compute).kind in "iu":
        info = np.iinfo(compute)
        if not info.min <= int(arg.value) <= info.max:
            raise c.fail(name, f"{what} = {arg.value} overflows {compute}")
    return np.array(arg.value).astype(compute)[()]


def _check_tensor_scalar(c: Call, operand: Operand, dtype: np.dtype, count: int) -> None:
    """An aclTensor holding the operand's value(s): ``count`` elements, an allowed dtype
    castable to the lists' ``dtype``."""
    tensor = c[operand.name]
    if not isinstance(tensor, TensorArg):
        raise c.fail(operand.name, "a tensor is required here")
    if tensor.numel != count:
        raise c.fail(operand.name, f"must hold {count} element(s), one "
                                   f"{'per list tensor' if count > 1 else 'value'}; it "
                                   f"holds {tensor.numel}")
    allowed = operand.dtypes or frozenset({dtype})
    c.check_dtype(operand.name, allowed)
    if not promotion.can_cast(tensor.dtype, dtype):
        raise c.fail(operand.name, f"a {tensor.dtype} value cannot be used with {dtype} "
                                   f"tensors")


def _widen(array: Any, dtype: np.dtype, compute: np.dtype) -> Any:
    """``array`` in ``compute`` for a result of ``dtype``, as ``Views.compute`` reads a
    tensor: an integer reaching a half-precision result is rounded to it first."""
    if promotion.staged_dtype(array.dtype, dtype) is not None:
        return promotion.round_through(array, dtype)
    return native.cast(array, compute)


Reader = Callable[[Any, int], Any]  # (views, list index) -> the operand of that index


def _readers(c: Call, operands: Sequence[Operand], dtype: np.dtype, compute: np.dtype,
             shapes: list[tuple[int, ...]]) -> list[Reader]:
    """Validate every operand after the first list and say how phase 2 reads it."""
    count = len(shapes)
    readers: list[Reader] = []
    for operand in operands:
        name = operand.name
        if operand.kind == "list":
            _check_list(c, name, {dtype}, dtype, shapes)
            readers.append(lambda v, i, n=name: _widen(v[n][i], dtype, compute))
        elif operand.kind in ("tensor", "tensor_each"):
            each = operand.kind == "tensor_each"
            _check_tensor_scalar(c, operand, dtype, count if each else 1)
            readers.append(lambda v, i, n=name, e=each: _widen(
                v[n].reshape(-1)[i if e else 0], dtype, compute))
        elif operand.kind == "scalar":
            value = _scalar_value(c, name, c[name], operand.dtypes, dtype, compute, name)
            readers.append(lambda v, i, value=value: value)
        else:  # "scalars"
            scalars = c[name]
            if not isinstance(scalars, list):
                raise c.fail(name, "a scalar list is required here")
            if len(scalars) != count:
                raise c.fail(name, f"must hold {count} scalars, one per list tensor; it "
                                   f"holds {len(scalars)}")
            values = [_scalar_value(c, name, s, operand.dtypes, dtype, compute,
                                    f"{name}[{i}]") for i, s in enumerate(scalars)]
            readers.append(lambda v, i, values=values: values[i])
    return readers


def _store(target: Any, value: Any) -> None:
    """``target[...] = value``, cast (and rounded once) into ``target``'s dtype."""
    if target.dtype == np.float16 and native.narrowed_into(target, value):
        return
    np.copyto(target, like(target, value), casting="unsafe")


def _foreach(fn: Callable[..., Any], supported, operands: Sequence[Operand] = (),
             to_float: bool = False, integer_fn: Callable[..., Any] | None = None,
             first: str = "x", position: int = 0) -> Callable[[Call], Kernel]:
    """``out[i] = fn(first[i], *operands at i)`` for every index ``i``, computed in the
    compute dtype of the first list's dtype (float32 for ``to_float`` integer lists;
    ``integer_fn`` instead of ``fn`` for integer lists). ``position``: where the first
    list's tensor goes among ``fn``'s arguments (ForeachPowScalarAndTensor: last)."""
    fn = quiet(fn)

    def prepare(c: Call) -> Kernel:
        tensors = _check_list(c, first, supported)
        dtype = tensors[0].dtype
        integer = promotion.category(dtype) <= promotion.INTEGER
        compute = promotion.DEFAULT_FLOAT if to_float and integer else \
            promotion.compute_dtype(dtype)
        shapes = [t.shape for t in tensors]
        readers = _readers(c, operands, dtype, compute, shapes)
        readers.insert(position, lambda v, i: _widen(v[first][i], dtype, compute))
        _declare_outs(c, "out", shapes, dtype)
        apply = integer_fn if integer and integer_fn is not None else fn
        into = _writes_out(apply) and compute == dtype  # float32, int32 ...: no conversion

        def kernel(v) -> None:
            for index, target in enumerate(v["out"]):
                operands = [read(v, index) for read in readers]
                if into and type(target) is np.ndarray:
                    apply(*operands, out=target)
                    continue
                if target.ndim == 0:  # read flat: 1-d is what every elementwise kernel takes
                    operands = [o if isinstance(o, np.generic) else o.reshape(-1)
                                for o in operands]
                _store(target, apply(*operands).reshape(target.shape))
        return kernel
    return prepare


# -- per-tensor functions the single-tensor operators do not have ------------------------------
# Each takes ``out=``: a float32 or int32 list computes straight into its output tensors.
def _scratch(out: Any, *kept: Any) -> Any:
    """``out`` when the first steps of a kernel may write there before it reads ``kept``
    for the last time (``out`` shares no memory with them), else None: a new array."""
    if out is None or any(np.may_share_memory(out, k) for k in kept
                          if not isinstance(k, np.generic)):
        return None
    return out


def _add(x: Any, other: Any, alpha: Any, out: Any = None) -> Any:
    """``x + alpha * other``, as aclnnAdd's kernel computes it (alpha 1: one pass)."""
    if np.ndim(alpha) == 0 and alpha == 1:
        return np.add(x, other, out=out)
    return np.add(x, np.multiply(other, alpha, out=_scratch(out, x)), out=out)


def _sub(x: Any, other: Any, alpha: Any, out: Any = None) -> Any:
    if np.ndim(alpha) == 0 and alpha == 1:
        return np.subtract(x, other, out=out)
    return np.subtract(x, np.multiply(other, alpha, out=_scratch(out, x)), out=out)


def _addcmul(x: Any, tensor1: Any, tensor2: Any, value: Any, out: Any = None) -> Any:
    """``x + value * (tensor1 * tensor2)``, as aclnnAddcmul's kernel computes it."""
    term = np.multiply(tensor1, tensor2, out=_scratch(out, x))
    term *= value
    return np.add(x, term, out=out)


def _addcdiv(x: Any, tensor1: Any, tensor2: Any, value: Any, out: Any = None) -> Any:
    term = np.true_divide(tensor1, tensor2, out=_scratch(out, x))
    term *= value
    return np.add(x, term, out=out)


def _lerp(start: Any, end: Any, weight: Any, out: Any = None) -> Any:
    """``start + weight * (end - start)``, evaluated from the nearer end as torch's lerp
    does (exact at weight 0 and 1)."""
    difference = np.subtract(end, start)
    if np.ndim(weight) == 0:  # one weight: one branch for the whole tensor
        if abs(weight) < 0.5:
            difference *= weight
            return np.add(start, difference, out=out)
        difference *= 1 - weight
        return np.subtract(end, difference, out=out)
    xp = array_module(difference)
    result = xp.where(xp.abs(weight) < 0.5, start + weight * difference,
                      end - difference * (1 - weight))
    if out is None:
        return result
    out[...] = result
    return out


def _integer_pow(base: Any, exponent: Any) -> Any:
    """torch's integer pow (``arithmetic._integer_power``) with a scalar base or exponent
    made an array of the other operand's module (a device list's scalar base included)."""
    xp = array_module(exponent if np.ndim(base) == 0 else base)
    return _integer_power(xp.asarray(base), xp.asarray(exponent))


_WRITE_OUT = frozenset({_add, _sub, _addcmul, _addcdiv, _lerp})  # besides numpy's ufuncs


def _writes_out(fn: Callable) -> bool:
    """Whether ``fn`` (or the ufunc it wraps, as ``quiet`` does) takes ``out=``."""
    inner = inspect.unwrap(fn)
    return isinstance(inner, np.ufunc) or inner in _WRITE_OUT


# -- operators over one list --------------------------------------------------------------------
_UNARY_FOREACH = {
    # name: (per-tensor function, supported dtypes, integer lists compute in float32)
    "Abs": (_UNARY["Abs"][0], FLOATS, False),
    "Acos": (_UNARY["Acos"][0], FLOATS, False),
    "Asin": (_UNARY["Asin"][0], FLOATS, False),
    "Atan": (_UNARY["Atan"][0], FLOATS, False),
    "Cos": (_UNARY["Cos"][0], FLOATS, False),
    "Cosh": (_UNARY["Cosh"][0], FLOATS, False),
    "Erf": (_UNARY["Erf"][0], FLOATS, False),
    "Erfc": (erfc, FLOATS, False),
    "Exp": (_UNARY["Exp"][0], FLOATS | {I16, I8, U8}, True),
    "Expm1": (np.expm1, FLOATS | {I16, I8, U8}, True),
    "Log": (_UNARY["Log"][0], FLOATS, False),
    "Log10": (np.log10, FLOATS, False),
    "Log1p": (np.log1p, FLOATS, False),
    "Log2": (_UNARY["Log2"][0], FLOATS, False),
    "Neg": (_UNARY["Neg"][0], FLOATS_SMALL_INTS, False),
    "Reciprocal": (_UNARY["Reciprocal"][0], FLOATS, False),
    "Sigmoid": (sigmoid, FLOATS, False),
    "Sign": (_UNARY["Sign"][0], FLOATS | {I8, I32, I64}, False),
    "Sin": (_UNARY["Sin"][0], FLOATS, False),
    "Sinh": (_UNARY["Sinh"][0], FLOATS, False),
    "Sqrt": (_UNARY["Sqrt"][0], FLOATS, False),
    "Tan": (_UNARY["Tan"][0], FLOATS, False),
    "Tanh": (_UNARY["Tanh"][0], FLOATS, False),
}
for _name, (_fn, _supported, _to_float) in _UNARY_FOREACH.items():
    register(f"Foreach{_name}", "x: tensors, out: tensors!")(
        _foreach(_fn, _supported, to_float=_to_float))


@register("ForeachCopy", "x: tensors, out: tensors!", silent=True)
def foreach_copy(c: Call) -> Kernel:
    """``out[i] = x[i]``; a float32 list may be copied into float16/bfloat16 tensors and a
    float16 list into float32 ones (rounded to nearest even)."""
    tensors = _check_list(c, "x", COPY_DTYPES)
    dtype = tensors[0].dtype
    outs = c["out"]
    target = outs[0].dtype if outs else dtype
    if target != dtype and target not in COPY_CONVERSIONS.get(dtype, ()):
        raise c.fail("out", f"a {dtype} list cannot be copied into {target} tensors")
    _declare_outs(c, "out", [t.shape for t in tensors], (target,))

    def kernel(v) -> None:
        for source, out in zip(v["x"], v["out"], strict=True):
            _store(out, source)
    return kernel


def _zero(c: Call) -> Kernel:
    """``x[i] = 0`` for every tensor of ``x``, in place."""
    _check_list(c, "out", FLOATS | {I16, I32})

    def kernel(v) -> None:
        for tensor in v["out"]:
            tensor[...] = 0
    return kernel


register_inplace("ForeachZeroInplace", "x: tensors!", _zero, silent=True, out="x")


def _norm_of(x: Any, order: float) -> Any:
    """The ``order``-norm of all of ``x``'s elements (torch.linalg.vector_norm), summed in
    float64 (a float32 value's square cannot overflow there): max |x| for inf, min |x| for
    -inf, the count of non-zeros for 0."""
    xp = array_module(x)
    flat = x.reshape(-1)
    if flat.size == 0:
        return xp.zeros((), np.float64)
    if math.isinf(order):
        magnitude = xp.abs(flat)
        return (magnitude.max() if order > 0 else magnitude.min()).astype(np.float64)
    wide = flat.astype(np.float64)
    if order == 2:  # (a BLAS dot is no faster at these sizes and contends for the cores)
        return xp.sqrt(xp.sum(xp.square(wide)))
    if order == 0:
        return xp.asarray(xp.count_nonzero(wide), dtype=np.float64)
    magnitude = xp.abs(wide)
    if order == 1:
        return magnitude.sum()
    return xp.sum(magnitude ** order) ** (1.0 / order)


@register("ForeachNorm", "x: tensors, scalar: scalar, out: tensors!")
def foreach_norm(c: Call) -> Kernel:
    """``out[i] = (sum |x[i]|^p)^(1/p)`` with ``p`` = ``scalar`` (inf: max |x|, -inf:
    min |x|, 0: the count of non-zeros), each into a one-element tensor of x's dtype."""
    tensors = _check_list(c, "x", FLOATS)
    dtype = tensors[0].dtype
    order = float(_scalar_value(c, "scalar", c["scalar"], NORM_ORDERS, F64, F64, "p"))
    _declare_outs(c, "out", [()] * len(tensors), dtype, any_shape_of_one=True)

    @quiet
    def kernel(v) -> None:
        for source, out in zip(v["x"], v["out"], strict=True):
            _store(out, _norm_of(source, order).reshape(out.shape))
    return kernel


# -- RoundOffNumber ------------------------------------------------------------------------------
def _round_half_away(x: Any) -> Any:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _round_odd(x: Any) -> Any:
    """Round to odd: integers stay, anything else goes to the odd one of its two neighbours
    (CANN's CAST_ODD)."""
    truncated = np.trunc(x)
    even = np.fmod(truncated, 2) == 0
    return array_module(x).where((truncated != x) & even, truncated + np.sign(x), truncated)


def _fraction(x: Any) -> Any:
    """``x - trunc(x)`` (CANN's CAST_FRAC)."""
    return x - np.trunc(x)


ROUNDINGS: dict[int, Callable[[Any], Any]] = {
    ROUND_RINT: np.rint, ROUND_FLOOR: np.floor, ROUND_CEIL: np.ceil,
    ROUND_HALF_AWAY: _round_half_away, ROUND_TRUNC: np.trunc, ROUND_ODD: _round_odd,
    ROUND_FRACTION: _fraction,
}


def _rounded(x: Any, mode: int) -> Any:
    """``x`` (float32, or int16: unchanged but for mode 7, which gives 0) rounded by
    ``mode``; modes outside 1..7 leave it as it is."""
    if x.dtype.kind in "iu":
        return x * 0 if mode == ROUND_FRACTION else x
    fn = ROUNDINGS.get(mode)
    return x if fn is None else fn(x)


def _round_off(mode_from_tensor: bool) -> Callable[[Call], Kernel]:
    def prepare(c: Call) -> Kernel:
        tensors = _check_list(c, "x", FLOATS | {I16})
        dtype = tensors[0].dtype
        compute = promotion.compute_dtype(dtype)
        if mode_from_tensor:
            _check_tensor_scalar(c, Operand("roundMode", "tensor", frozenset({I8})), I8, 1)
        else:
            fixed = int(_scalar_value(c, "roundMode", c["roundMode"], ROUND_MODE_DTYPES, I64,
                                      I64, "roundMode"))
        _declare_outs(c, "out", [t.shape for t in tensors], dtype)

        @quiet
        def kernel(v) -> None:
            mode = int(v["roundMode"].reshape(-1)[0]) if mode_from_tensor else fixed
            for source, out in zip(v["x"], v["out"], strict=True):
                _store(out, _rounded(native.cast(source, compute), mode))
        return kernel
    return prepare


register("ForeachRoundOffNumber", "x: tensors, roundMode: tensor, out: tensors!")(
    _round_off(True))
register("ForeachRoundOffNumberV2", "x: tensors, roundMode: scalar, out: tensors!")(
    _round_off(False))


# -- operators over lists and scalars ---------------------------------------------------------
Form = tuple[str, str, tuple[Operand, ...], frozenset]  # first list, signature, operands, dtypes


def _register_forms(name: str, fn: Callable, forms: dict[str, Form],
                    integer_fn: Callable | None = None) -> None:
    """Foreach<name><form> for each form of ``forms``."""
    for form, (first, signature, operands, supported) in forms.items():
        register(f"Foreach{name}{form}", f"{first}: tensors, {signature}, out: tensors!")(
            _foreach(fn, supported, operands, integer_fn=integer_fn, first=first))


def _scalar_forms(supported: tuple[frozenset, frozenset, frozenset],
                  scalars: tuple[frozenset, frozenset, frozenset], first: str = "x"
                  ) -> dict[str, Form]:
    """The Scalar (an aclTensor), ScalarV2 (an aclScalar) and ScalarList (an aclScalarList)
    forms: the lists' and the scalars' dtypes of each, in that order."""
    return {
        "Scalar": (first, "scalar: tensor", (Operand("scalar", "tensor", scalars[0]),),
                   supported[0]),
        "ScalarV2": (first, "scalar: scalar", (Operand("scalar", "scalar", scalars[1]),),
                     supported[1]),
        "ScalarList": (first, "scalars: scalars",
                       (Operand("scalars", "scalars", scalars[2]),), supported[2]),
    }


def _list_form(supported: frozenset) -> dict[str, Form]:
    return {"List": ("x1", "x2: tensors", (_list("x2"),), supported)}


for _name, _fn, _plain, _lists, _scalar_lists in (
        ("Add", _add, np.add, FLOATS_SMALL_INTS, FLOATS_SMALL_INTS),
        ("Sub", _sub, np.subtract, FLOATS_SMALL_INTS, FLOATS_I32)):
    _register_forms(_name, _fn, {
        "List": ("x1", "x2: tensors, alpha: tensor",
                 (_list("x2"), Operand("alpha", "tensor", TENSOR_SCALARS)), _lists),
        "ListV2": ("x1", "x2: tensors, alpha: scalar",
                   (_list("x2"), Operand("alpha", "scalar", V2_SCALARS)), _lists),
    })
    _register_forms(_name, _plain, _scalar_forms(
        (_scalar_lists, _scalar_lists, FLOATS_I32), (TENSOR_SCALARS, V2_SCALARS, LIST_SCALARS)))
_register_forms("Mul", np.multiply, {**_list_form(FLOATS_SMALL_INTS), **_scalar_forms(
    (FLOATS_I32,) * 3, (TENSOR_SCALARS, V2_SCALARS, LIST_SCALARS_F64))})
_register_forms("Div", np.true_divide, {**_list_form(FLOATS), **_scalar_forms(
    (FLOATS,) * 3, (frozenset({F16, F32}), V2_FLOAT_SCALARS, frozenset({F32})))})
for _name, _fn in (("Maximum", np.maximum), ("Minimum", np.minimum)):
    _register_forms(_name, _fn, {**_list_form(FLOATS_I32), **_scalar_forms(
        (FLOATS_I32,) * 3, (TENSOR_SCALARS, V2_SCALARS, LIST_SCALARS_F64))})
_register_forms("Pow", np.power, {**_list_form(FLOATS_I32), **_scalar_forms(
    (FLOATS_I32, FLOATS, FLOATS_I32), (TENSOR_SCALARS, V2_FLOAT_SCALARS, LIST_SCALARS))},
    integer_fn=_integer_pow)
register("ForeachPowScalarAndTensor", "scalar: scalar, x: tensors, out: tensors!")(
    _foreach(np.power, FLOATS_I32, (Operand("scalar", "scalar", frozenset({F32, F64, I64})),),
             integer_fn=_integer_pow, position=1))

register("ForeachLerpList", "x1: tensors, x2: tensors, weight: tensors, out: tensors!")(
    _foreach(_lerp, FLOATS, (_list("x2"), _list("weight")), first="x1"))
register("ForeachLerpScalar", "x1: tensors, x2: tensors, weight: scalar, out: tensors!")(
    _foreach(_lerp, FLOATS, (_list("x2"), Operand("weight", "scalar", frozenset({F32, F64}))),
             first="x1"))

for _name, _fn, _supported, _scalar_dtypes, _v2_dtypes in (
        ("Addcmul", _addcmul, FLOATS_I32, TENSOR_SCALARS, V2_SCALARS),
        ("Addcdiv", _addcdiv, FLOATS, frozenset({F32, F16}), V2_FLOAT_SCALARS)):
    _lists = "x2: tensors, x3: tensors"
    _pair = (_list("x2"), _list("x3"))
    _each = Operand("scalars", "tensor_each", _supported)  # one value per index, x1's dtype
    _register_forms(_name, _fn, {
        "List": ("x1", f"{_lists}, scalars: tensor", (*_pair, _each), _supported),
        "Scalar": ("x1", f"{_lists}, scalar: tensor",
                   (*_pair, Operand("scalar", "tensor", _scalar_dtypes)), _supported),
        "ScalarList": ("x1", f"{_lists}, scalars: tensor", (*_pair, _each), _supported),
        "ScalarV2": ("x1", f"{_lists}, scalar: scalar",
                     (*_pair, Operand("scalar", "scalar", _v2_dtypes)), _supported),
    })
del _name, _fn, _plain, _lists, _scalar_lists, _supported, _scalar_dtypes, _v2_dtypes, _pair
del _each, _to_float


# -- the in-place forms CANN documents (x1 / x is written) -------------------------------------
for _name, _signature, _fn, _supported, _operands in (
        ("AddListInplace", "x1: tensors!, x2: tensors, alpha: tensor", _add, FLOATS_I32,
         (_list("x2"), Operand("alpha", "tensor", TENSOR_SCALARS))),
        ("SubListInplace", "x1: tensors!, x2: tensors, alpha: tensor", _sub, FLOATS_I32,
         (_list("x2"), Operand("alpha", "tensor", TENSOR_SCALARS))),
        ("MulListInplace", "x1: tensors!, x2: tensors", np.multiply, FLOATS_I32,
         (_list("x2"),)),
        ("DivListInplace", "x1: tensors!, x2: tensors", np.true_divide, FLOATS, (_list("x2"),)),
        ("MulScalarInplace", "x: tensors!, scalar: tensor", np.multiply, FLOATS_I32,
         (Operand("scalar", "tensor", TENSOR_SCALARS),)),
        ("SubScalarInplace", "x: tensors!, scalar: tensor", np.subtract, FLOATS_I32,
         (Operand("scalar", "tensor", TENSOR_SCALARS),)),
        ("LogInplace", "x: tensors!", _UNARY["Log"][0], FLOATS, ()),
        ("ACosInplace", "x: tensors!", _UNARY["Acos"][0], FLOATS, ())):
    _first = _signature.partition(":")[0]
    register_inplace(f"Foreach{_name}", _signature,
                     _foreach(_fn, _supported, _operands, first=_first), out=_first)
del _name, _signature, _fn, _supported, _operands, _first

MAX_UNSCALED_TENSORS = 256  # aclnnForeachNonFiniteCheckAndUnscale's longest scaledGrads


def _non_finite_check_and_unscale(c: Call) -> Kernel:
    """``scaledGrads[i] *= invScale`` for every tensor, and ``foundInf = 1.0`` when any
    holds an inf or a NaN (else ``foundInf`` is left as it is): the unscaling step of
    mixed-precision training (torch's ``_amp_foreach_non_finite_check_and_unscale_``)."""
    grads = _check_list(c, "scaledGrads", FLOATS)
    if len(grads) > MAX_UNSCALED_TENSORS:
        raise c.fail("scaledGrads", f"holds {len(grads)} tensors; at most "
                                    f"{MAX_UNSCALED_TENSORS}")
    for name in ("foundInf", "invScale"):
        _check_tensor_scalar(c, Operand(name, "tensor", frozenset({F32})), F32, 1)
    dtype = grads[0].dtype
    compute = promotion.compute_dtype(dtype)

    @quiet
    def kernel(v) -> None:
        scale = v["invScale"].reshape(-1)[0]
        found = False
        for grad in v["scaledGrads"]:
            wide = _widen(grad, dtype, compute)
            found = found or not bool(array_module(wide).isfinite(wide).all())
            _store(grad, np.multiply(wide, scale))
        if found:
            v["foundInf"][...] = 1.0
    return kernel


register_inplace("ForeachNonFiniteCheckAndUnscale", "scaledGrads: tensors!, foundInf: tensor!, "
                 "invScale: tensor", _non_finite_check_and_unscale,
                 scaledGrads="scaledGrads", foundInf="foundInf")
