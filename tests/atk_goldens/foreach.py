"""Goldens of the Foreach family (CANN's foreach/ operators): each applies the single-tensor
formula of the operator's aclnn document to every tensor of its lists, in float64 (integer
lists in int64) with PyTorch, and returns one expected tensor per list index.

Arguments come as the ATK lists them, which is the aclnn argument order: a tensor list is a
list of tensors, a V1 ``scalar`` / ``alpha`` an aclTensor of one element (a tensor here),
a V2 one a Python number, a ScalarList a list of numbers, and the ``scalars`` of
Addcmul/AddcdivList(ScalarList) a tensor of one value per list index."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from atk_driver import golden as register_golden

ROUND_RINT, ROUND_FLOOR, ROUND_CEIL, ROUND_HALF_AWAY = 1, 2, 3, 4  # CANN's roundMode values
ROUND_TRUNC, ROUND_ODD, ROUND_FRACTION = 5, 6, 7


def _saturated(expected: torch.Tensor, dtype: np.dtype | None) -> Any:
    """``expected`` with the values that overflow ``dtype`` (the output's, a float) made the
    infinities they round to there: a float16 result of 7.7e6 is inf, as it must be."""
    if dtype is None or np.dtype(dtype).kind in "iub" or not expected.dtype.is_floating_point:
        return expected
    wide = expected.numpy()
    with np.errstate(over="ignore"):
        rounded = wide.astype(dtype).astype(np.float64)
    return np.where(np.isinf(rounded) & np.isfinite(wide), rounded, wide)


def golden(op: str) -> Callable[[Callable], Callable]:
    """Register the golden of ``op``: its results saturated to the output dtype, which is the
    dtype of the operator's (first) tensor list."""
    def register(fn: Callable) -> Callable:
        def saturating(dtypes: list, *inputs: Any) -> list:
            listed = next((d for d in dtypes if isinstance(d, list)), [None])
            return [_saturated(t, listed[0]) for t in fn(*inputs)]
        register_golden(op, with_dtypes=True)(saturating)
        return fn
    return register


def _value(scalar) -> float | int:
    """A V1 scalar (a one-element tensor) or a V2 one (a number) as a number."""
    return scalar.reshape(-1)[0].item() if isinstance(scalar, torch.Tensor) else scalar


def _values(scalars, count: int) -> list:
    """A ScalarList (numbers) or a tensor of one value per index, as ``count`` numbers."""
    if isinstance(scalars, torch.Tensor):
        return scalars.reshape(-1).tolist()[:count]
    return list(scalars)


# -- one list --------------------------------------------------------------------------------
_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Abs": torch.abs, "Acos": torch.acos, "Asin": torch.asin, "Atan": torch.atan,
    "Cos": torch.cos, "Cosh": torch.cosh, "Erf": torch.erf, "Erfc": torch.erfc,
    "Exp": torch.exp, "Expm1": torch.expm1, "Log": torch.log, "Log10": torch.log10,
    "Log1p": torch.log1p, "Log2": torch.log2, "Neg": torch.neg,
    "Reciprocal": torch.reciprocal, "Sigmoid": torch.sigmoid, "Sign": torch.sign,
    "Sin": torch.sin, "Sinh": torch.sinh, "Sqrt": torch.sqrt, "Tan": torch.tan,
    "Tanh": torch.tanh,
}
for _name, _fn in _UNARY.items():
    golden(f"Foreach{_name}")(lambda x, fn=_fn: [fn(t) for t in x])


@golden("ForeachCopy")
def foreach_copy(x):
    return [t.clone() for t in x]


@golden("ForeachZeroInplace")
def foreach_zero_inplace(x):
    return [torch.zeros_like(t) for t in x]


@golden("ForeachNorm")
def foreach_norm(x, order):
    return [torch.linalg.vector_norm(t, float(order)) for t in x]


def _round(t: torch.Tensor, mode: int) -> torch.Tensor:
    """CANN's RoundOffNumber: its roundMode's rounding (7: the fraction), others none;
    integers stay (mode 7: 0)."""
    if not t.dtype.is_floating_point:
        return torch.zeros_like(t) if mode == ROUND_FRACTION else t
    truncated = torch.trunc(t)
    odd = torch.where((truncated != t) & (torch.fmod(truncated, 2) == 0),
                      truncated + torch.sign(t), truncated)
    rounding = {ROUND_RINT: torch.round(t), ROUND_FLOOR: torch.floor(t),
                ROUND_CEIL: torch.ceil(t), ROUND_TRUNC: truncated, ROUND_ODD: odd,
                ROUND_HALF_AWAY: torch.sign(t) * torch.floor(t.abs() + 0.5),
                ROUND_FRACTION: t - truncated}
    return rounding.get(mode, t)


@golden("ForeachRoundOffNumber")
def foreach_round_off_number(x, mode):
    return [_round(t, int(_value(mode))) for t in x]


golden("ForeachRoundOffNumberV2")(foreach_round_off_number)


# -- lists and scalars ------------------------------------------------------------------------
def _pow(base, exponent):
    """torch.pow; an integer tensor to a negative integer power as torch's tensor pow does
    (0, or +-1 for a base of +-1)."""
    if not isinstance(exponent, torch.Tensor):
        reference = base if isinstance(base, torch.Tensor) else exponent
        exponent = torch.tensor(exponent, dtype=reference.dtype)
    if not isinstance(base, torch.Tensor):
        base = torch.tensor(base, dtype=exponent.dtype)
    return torch.pow(base, exponent)


_BINARY: dict[str, Callable] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
    "Maximum": lambda a, b: torch.maximum(a, torch.as_tensor(b, dtype=a.dtype)),
    "Minimum": lambda a, b: torch.minimum(a, torch.as_tensor(b, dtype=a.dtype)),
    "Pow": _pow,
}
for _name, _fn in _BINARY.items():
    golden(f"Foreach{_name}List")(
        lambda x1, x2, *alpha, fn=_fn: [fn(a, _value(alpha[0]) * b if alpha else b)
                                        for a, b in zip(x1, x2, strict=True)])
    golden(f"Foreach{_name}Scalar")(
        lambda x, scalar, fn=_fn: [fn(t, _value(scalar)) for t in x])
    golden(f"Foreach{_name}ScalarV2")(
        lambda x, scalar, fn=_fn: [fn(t, _value(scalar)) for t in x])
    golden(f"Foreach{_name}ScalarList")(
        lambda x, scalars, fn=_fn: [fn(t, s) for t, s in zip(x, _values(scalars, len(x)),
                                                               strict=True)])
for _name in ("Add", "Sub"):
    golden(f"Foreach{_name}ListV2")(
        lambda x1, x2, alpha, fn=_BINARY[_name]: [fn(a, _value(alpha) * b)
                                                  for a, b in zip(x1, x2, strict=True)])


@golden("ForeachPowScalarAndTensor")
def foreach_pow_scalar_and_tensor(scalar, x):
    return [_pow(scalar, t) for t in x]


def _lerp(start, end, weight):
    return start + weight * (end - start)


@golden("ForeachLerpList")
def foreach_lerp_list(x1, x2, weight):
    return [_lerp(a, b, w) for a, b, w in zip(x1, x2, weight, strict=True)]


@golden("ForeachLerpScalar")
def foreach_lerp_scalar(x1, x2, weight):
    return [_lerp(a, b, weight) for a, b in zip(x1, x2, strict=True)]


_TERNARY: dict[str, Callable] = {"Addcmul": torch.mul, "Addcdiv": torch.div}
for _name, _fn in _TERNARY.items():
    def _each_index(x1, x2, x3, scalars, fn=_fn):
        values = _values(scalars, len(x1))
        return [a + v * fn(b, c) for a, b, c, v in zip(x1, x2, x3, values, strict=True)]

    def _one_value(x1, x2, x3, scalar, fn=_fn):
        return [a + _value(scalar) * fn(b, c) for a, b, c in zip(x1, x2, x3, strict=True)]

    golden(f"Foreach{_name}List")(_each_index)
    golden(f"Foreach{_name}ScalarList")(_each_index)
    golden(f"Foreach{_name}Scalar")(_one_value)
    golden(f"Foreach{_name}ScalarV2")(_one_value)

del _name, _fn, _each_index, _one_value
