"""Gated activations: an input split in two halves along a dim, one half activated and
multiplied by the other (Glu, SwiGlu, GeGlu, GeGluV3, GeluMul, FatreluMul, SituGlu,
ClippedSwiglu).

Semantics, argument names and order are CANN's (hicann/ops-nn activation/*/docs). Each
splits ``self`` (or ``x`` / ``input``) into a first half A and a second half B along
``dim`` (GeluMul and FatreluMul: the last dim); SituGlu and ClippedSwiglu view the input
as CANN's kernel does, ``[prod(shape[:dim]), prod(shape[dim:])]``, and split that view's
second axis (ClippedSwiglu's ``interleaved``: even and odd elements of it). float16 and
bfloat16 compute in float32 and round once into the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.ops import promotion
from openacl.ops.activation import GELU_NONE, GELU_TANH, gelu, sigmoid
from openacl.ops.call import FLOAT_DTYPES, Call, Kernel, array_module
from openacl.ops.fpstate import quiet
from openacl.ops.registry import register

__all__ = ["split_halves", "gate_halves", "merged_view", "situ_parts", "situ_split",
           "clipped_swiglu_attributes", "clipped_rows", "clipped_split"]

HALF_FLOAT_DTYPES = FLOAT_DTYPES - {np.dtype(np.float64)}  # CANN's FLOAT, FLOAT16, BFLOAT16
GELU_MODES = {"none": GELU_NONE, "tanh": GELU_TANH}  # GeluMul's approximateOptional
GATED_LAST_DIM_MAX = 1024  # GeluMul / FatreluMul: the last dim is even and at most this
GROUP_INDEX_MAX = 8192  # ClippedSwiglu: at most this many groups
GROUP_INDEX_DTYPES = frozenset({np.dtype(np.int64)})
CLIPPED_SWIGLU_ALPHA, CLIPPED_SWIGLU_LIMIT, CLIPPED_SWIGLU_BIAS = 1.702, 7.0, 1.0  # suggested


# -- shapes -------------------------------------------------------------------------------------
def split_halves(c: Call, name: str, dim: Any, min_rank: int = 1) -> tuple[int, tuple[int, ...]]:
    """Validate that tensor ``name`` splits in two along ``dim``: (axis, shape of a half).
    A 0-dim tensor is refused unless ``min_rank`` is 0 (then dims -1 and 0 are accepted,
    and the split fails on its size 1)."""
    shape = c.tensor(name).shape
    if len(shape) < min_rank:
        raise c.fail(name, f"must have at least {min_rank} dim(s), got {list(shape)}")
    if not isinstance(dim, int):
        raise c.fail("dim", "an integer is required")
    axis = c.normalize_dim("dim", dim, len(shape))
    size = shape[axis] if shape else 1
    if size % 2:
        raise c.fail(name, f"dim {dim} of shape {list(shape)} has odd size {size}: it must "
                           f"split in two halves")
    return axis, shape[:axis] + (size // 2,) + shape[axis + 1:]


def _halves(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    half = x.shape[axis] // 2
    index = [slice(None)] * x.ndim
    first, second = list(index), list(index)
    first[axis], second[axis] = slice(0, half), slice(half, None)
    return x[tuple(first)], x[tuple(second)]


def gate_halves(x: np.ndarray, axis: int, activate_left: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """(activated half, linear half) of ``x`` split along ``axis``."""
    first, second = _halves(x, axis)
    return (first, second) if activate_left else (second, first)


def merged_view(x: np.ndarray, axis: int) -> np.ndarray:
    """CANN's 2-d view of a SituGlu / ClippedSwiglu input: ``[prod(shape[:dim]), rest]``."""
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _float_halves(c: Call, name: str, out: str, dim: Any, supported=HALF_FLOAT_DTYPES,
                  min_rank: int = 1, exact: bool = True) -> tuple[int, np.dtype]:
    """Common phase 1: a floating input split along ``dim``, an output of half its shape;
    returns (axis, compute dtype)."""
    dtype = c.check_dtype(name, supported)
    axis, half = split_halves(c, name, dim, min_rank)
    c.check_out(out, half, dtype, exact_dtype=exact)
    return axis, promotion.compute_dtype(dtype)


# -- Glu, SwiGlu --------------------------------------------------------------------------------
def _gated(gate: Callable[[np.ndarray], np.ndarray], supported, exact: bool,
           input_name: str) -> Callable[[Call], Kernel]:
    """``out = first half * gate(second half)`` along ``dim`` (``gate`` applied to the
    second half: Glu's sigmoid) or, for SwiGlu, ``silu(first) * second``."""
    def prepare(c: Call) -> Kernel:
        axis, compute = _float_halves(c, input_name, "out", c["dim"], supported, exact=exact)

        @quiet
        def kernel(v) -> None:
            first, second = _halves(v.compute(input_name, compute), axis)
            v.write("out", gate(first, second))
        return kernel
    return prepare


register("Glu", "self: tensor, dim: int = -1, out: tensor!")(
    _gated(lambda a, b: a * sigmoid(b), FLOAT_DTYPES, False, "self"))
register("SwiGlu", "x: tensor, dim: int = -1, out: tensor!")(
    _gated(lambda a, b: a * sigmoid(a) * b, HALF_FLOAT_DTYPES, True, "x"))


# -- GeGlu, GeGluV3 -----------------------------------------------------------------------------
def _approximate(c: Call, name: str = "approximate") -> int:
    value = c[name]
    if value not in (GELU_NONE, GELU_TANH):
        raise c.fail(name, "expected 0 (none, the erf form) or 1 (tanh)")
    return value


def _ge_glu(c: Call) -> Kernel:
    """``outGelu = gelu(activated half)``, ``out = linear half * outGelu``."""
    dtype = c.check_dtype("self", HALF_FLOAT_DTYPES)
    axis, half = split_halves(c, "self", c["dim"], min_rank=0)
    approximate = _approximate(c)
    left = bool(c.values.get("activateLeft", False))
    for name in ("out", "outGelu"):
        c.check_out(name, half, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)

    @quiet
    def kernel(v) -> None:
        x = v.compute("self", compute)
        activated, linear = gate_halves(x, axis, left)
        activated_gelu = gelu(array_module(x).ascontiguousarray(activated), approximate)
        v.write("outGelu", activated_gelu.reshape(half))
        v.write("out", (activated_gelu * linear).reshape(half))
    return kernel


register("GeGlu", "self: tensor, dim: int = -1, approximate: int = 1, out: tensor!, "
                  "outGelu: tensor!")(_ge_glu)
register("GeGluV3", "self: tensor, dim: int = -1, approximate: int = 1, "
                    "activateLeft: bool = False, out: tensor!, outGelu: tensor!")(_ge_glu)


# -- GeluMul, FatreluMul (the last dim) ---------------------------------------------------------
def _last_dim_halves(c: Call, name: str) -> tuple[np.dtype, tuple[int, ...]]:
    dtype = c.check_dtype(name, HALF_FLOAT_DTYPES)
    shape = c.tensor(name).shape
    if len(shape) < 2:
        raise c.fail(name, f"must have 2 to 8 dims, got {list(shape)}")
    if shape[-1] % 2 or shape[-1] > GATED_LAST_DIM_MAX:
        raise c.fail(name, f"the last dim ({shape[-1]}) must be even and at most "
                           f"{GATED_LAST_DIM_MAX}")
    half = shape[:-1] + (shape[-1] // 2,)
    c.check_out("out", half, dtype, exact_dtype=True)
    return promotion.compute_dtype(dtype), half


@register("GeluMul", "input: tensor, approximateOptional: str? = None, out: tensor!")
def gelu_mul(c: Call) -> Kernel:
    """``gelu(x1) * x2`` of the last dim's halves; "none" (the default) or "tanh"."""
    compute, _ = _last_dim_halves(c, "input")
    mode = c["approximateOptional"] or "none"
    if mode not in GELU_MODES:
        raise c.fail("approximateOptional", 'expected "none" or "tanh"')
    approximate = GELU_MODES[mode]

    @quiet
    def kernel(v) -> None:
        first, second = _halves(v.compute("input", compute), -1)
        v.write("out", gelu(array_module(first).ascontiguousarray(first), approximate) * second)
    return kernel


@register("FatreluMul", "input: tensor, threshold: tensor, out: tensor!")
def fatrelu_mul(c: Call) -> Kernel:
    """``threshold(x1) * x2`` of the last dim's halves: x1 where ``x1 >= threshold``, else
    0; ``threshold`` one finite element of input's dtype."""
    compute, _ = _last_dim_halves(c, "input")
    if c.dtype("threshold") != c.dtype("input"):
        raise c.fail("threshold", f"dtype must be input's ({c.dtype('input')})")
    if c.tensor("threshold").numel != 1:
        raise c.fail("threshold", "must hold exactly one element")

    @quiet
    def kernel(v) -> None:
        first, second = _halves(v.compute("input", compute), -1)
        limit = v.compute("threshold", compute).reshape(())
        v.write("out", np.where(first < limit, compute.type(0), first) * second)
    return kernel


# -- SituGlu ------------------------------------------------------------------------------------
def situ_parts(gate: np.ndarray, up: np.ndarray, beta: float, linear_beta: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """SituGlu's intermediates: (t = tanh(gate / beta), s = sigmoid(gate), situ_a =
    beta * t * s, up' = linearBeta * tanh(up / linearBeta) or up)."""
    dtype = gate.dtype.type
    t = np.tanh(gate / dtype(beta))
    s = sigmoid(gate)
    situ = dtype(beta) * t * s
    linear = dtype(linear_beta) * np.tanh(up / dtype(linear_beta)) if linear_beta > 0 else up
    return t, s, situ, linear


def situ_split(x: np.ndarray, axis: int, activate_left: bool) -> tuple[np.ndarray, np.ndarray]:
    """(gate, up) halves of CANN's 2-d view of ``x``."""
    return gate_halves(merged_view(x, axis), 1, activate_left)


@register("SituGlu", "x: tensor, dim: int = -1, beta: float = 1.0, linearBeta: float = 0.0, "
                     "activateLeft: bool = True, out: tensor!")
def situ_glu(c: Call) -> Kernel:
    """``y = beta * tanh(gate / beta) * sigmoid(gate) * up'`` with ``up'`` =
    ``linearBeta * tanh(up / linearBeta)`` for linearBeta > 0, else up."""
    axis, compute = _float_halves(c, "x", "out", c["dim"])
    beta, linear_beta, left = float(c["beta"]), float(c["linearBeta"]), c["activateLeft"]
    half = c.inferred["out"][0]

    @quiet
    def kernel(v) -> None:
        gate, up = situ_split(v.compute("x", compute), axis, left)
        _, _, situ, linear = situ_parts(gate, up, beta, linear_beta)
        v.write("out", (situ * linear).reshape(half))
    return kernel


# -- ClippedSwiglu ------------------------------------------------------------------------------
@register("ClippedSwiglu", "x: tensor, groupIndexOptional: tensor?, dim: int = -1, "
                           "alpha: float = 1.702, limit: float = 7.0, bias: float = 1.0, "
                           "interleaved: bool = True, out: tensor!")
def clipped_swiglu(c: Call) -> Kernel:
    """GPT-OSS's SwiGlu: ``A = min(A, limit)``, ``B = clip(B, -limit, limit)``, ``y = A *
    sigmoid(alpha * A) * (B + bias)``, A and B the halves (``interleaved``: even and odd
    elements) of CANN's 2-d view; with ``groupIndexOptional`` only its sum of rows of that
    view are computed, the rest are 0."""
    axis, compute = _float_halves(c, "x", "out", c["dim"])
    limit, alpha, bias, interleaved = clipped_swiglu_attributes(c)
    half = c.inferred["out"][0]
    f = compute.type

    @quiet
    def kernel(v) -> None:
        merged = merged_view(v.compute("x", compute), axis)
        rows = clipped_rows(v, merged)
        gate, linear = clipped_split(merged[:rows], interleaved)
        gate = np.minimum(gate, f(limit))
        result = array_module(merged).zeros((merged.shape[0], merged.shape[1] // 2), compute)
        result[:rows] = gate * sigmoid(gate * f(alpha)) * (
            np.clip(linear, -f(limit), f(limit)) + f(bias))
        v.write("out", result.reshape(half))
    return kernel


def clipped_swiglu_attributes(c: Call) -> tuple[float, float, float, bool]:
    """ClippedSwiglu's (and its gradient's) checked (limit, alpha, bias, interleaved)."""
    limit = float(c["limit"])
    if not limit > 0:
        raise c.fail("limit", f"must be > 0, got {limit}")
    if c.has("groupIndexOptional"):
        c.check_dtype("groupIndexOptional", GROUP_INDEX_DTYPES)
        groups = c.tensor("groupIndexOptional")
        if groups.ndim != 1 or groups.numel > GROUP_INDEX_MAX:
            raise c.fail("groupIndexOptional", f"must be 1-d with at most {GROUP_INDEX_MAX} "
                                               f"elements, got {list(groups.shape)}")
    return limit, float(c["alpha"]), float(c["bias"]), c["interleaved"]


def clipped_rows(v, merged: np.ndarray) -> int:
    """The rows of CANN's 2-d view that are computed: the group counts' sum, at most all."""
    rows = merged.shape[0]
    if v.get("groupIndexOptional") is not None:
        rows = min(int(v["groupIndexOptional"].clip(0, None).sum()), rows)
    return rows


def clipped_split(x: np.ndarray, interleaved: bool) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of a 2-d view: even and odd columns (``interleaved``), else its halves."""
    return (x[:, 0::2], x[:, 1::2]) if interleaved else _halves(x, 1)


NO_CLAMP = -1.0  # SwigluGroup's clampLimit that turns the clamp off


@register("SwigluGroup", "x: tensor, weightOptional: tensor?, groupIndexOptional: tensor?, "
                         "clampLimit: float = -1.0, out: tensor!")
def swiglu_group(c: Call) -> Kernel:
    """MoE's SwiGlu over the last dim's halves: ``silu(A) * B`` (A clamped above and B both
    ways by ``clampLimit`` when it is not -1), times a float32 weight per token; with
    ``groupIndexOptional`` only the first ``min(sum, tokens)`` tokens are computed, the rest
    are 0."""
    axis, compute = _float_halves(c, "x", "out", -1)
    limit = float(c["clampLimit"])
    if limit != NO_CLAMP and not limit > 0:
        raise c.fail("clampLimit", f"must be -1 (no clamp) or > 0, got {limit}")
    tokens = math.prod(c.tensor("x").shape[:-1])
    if c.has("weightOptional"):
        c.check_dtype("weightOptional", {np.dtype(np.float32)})
        if c.tensor("weightOptional").numel != tokens:
            raise c.fail("weightOptional", f"must hold one weight per token ({tokens})")
    if c.has("groupIndexOptional"):
        c.check_dtype("groupIndexOptional", GROUP_INDEX_DTYPES)
        if c.tensor("groupIndexOptional").ndim != 1 or not c.tensor("groupIndexOptional").numel:
            raise c.fail("groupIndexOptional", "must be a non-empty 1-d tensor")
    half = c.inferred["out"][0]
    f = compute.type

    @quiet
    def kernel(v) -> None:
        merged = v.compute("x", compute).reshape(tokens, -1)
        rows = clipped_rows(v, merged)
        a, b = _halves(merged[:rows], 1)
        if limit != NO_CLAMP:
            a, b = np.minimum(a, f(limit)), np.clip(b, -f(limit), f(limit))
        values = a * sigmoid(a) * b
        if v.get("weightOptional") is not None:
            values = values * v.compute("weightOptional", compute).reshape(-1, 1)[:rows]
        result = array_module(merged).zeros((tokens, merged.shape[1] // 2), compute)
        result[:rows] = values
        v.write("out", result.reshape(half))
    return kernel
