"""Goldens of the operators CANN files under ``experimental/`` (ops/experimental.py:
ApplyGradientDescent, FusedMulAddN, AddMatMatElementsPlus; ops/determinant.py: Slogdet,
whose ATK suite lives in ops-math's experimental/math/slogdet): the aclnn documents'
formulas in float64, torch.linalg.slogdet for Slogdet."""

from __future__ import annotations

import numpy as np
import torch

from atk_driver import golden


def _first(tensor: torch.Tensor) -> torch.Tensor:
    """The one element of a scalar tensor ([], [1] or [1, 1]) the kernels read."""
    return tensor.reshape(-1)[0]


@golden("ApplyGradientDescent")
def apply_gradient_descent(var, alpha, delta):
    return var - _first(alpha) * delta


@golden("FusedMulAddN", with_dtypes=True)
def fused_mul_add_n(dtypes, x1, x2, x3):
    if dtypes[0].kind == "i":  # Muls then Add, each wrapping into the integer dtype
        wrap = torch.from_numpy(np.zeros(0, dtypes[0])).dtype
        return ((x1 * _first(x3)).to(wrap).to(torch.int64) + x2).to(wrap)
    return x1 * _first(x3) + x2


@golden("AddMatMatElementsPlus")
def add_mat_mat_elements_plus(c, a, b, beta, alpha):
    return c * _first(beta) + _first(alpha) * (a * b)


@golden("Slogdet")
def slogdet(self):
    # The suite's own harness replaces the drawn matrices by its patterns (diagonal,
    # swapped, zero, near-singular) chosen by case id; the golden gets no case id, so the
    # drawn uniform [-10, 10] matrices are judged instead (the patterns are in
    # tests/test_ops_determinant.py).
    result = torch.linalg.slogdet(self)
    return result.sign, result.logabsdet
