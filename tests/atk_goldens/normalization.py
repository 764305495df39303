"""Goldens of the normalization family (CANN's norm/ operators): vector norms, LayerNorm,
RmsNorm, BatchNorm, GroupNorm, InstanceNorm and their fused and backward forms. Each is
PyTorch in float64 (the driver widens the inputs)."""

from __future__ import annotations

import math

import torch

from atk_driver import golden

INFINITE_ORDER = 2**31 - 1  # the ATK's stand-in for an infinite norm order


def _order(p: float) -> float:
    return math.copysign(math.inf, p) if abs(p) >= INFINITE_ORDER else float(p)


def _dims(dim) -> list[int]:
    return [dim] if isinstance(dim, int) else list(dim)


@golden("Norm")
def norm(x, p=2.0, dim=(), keepdim=False):
    return torch.linalg.vector_norm(x, _order(p), _dims(dim) or None, keepdim)


@golden("LinalgVectorNorm")
def linalg_vector_norm(x, ord=2.0, dim=(), keepdim=False, dtype=None):
    return torch.linalg.vector_norm(x, _order(ord), _dims(dim) or None, keepdim)


def _rms(x, gamma, eps):
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    rstd = torch.rsqrt(x.square().mean(dims, keepdim=True) + eps)
    return x * rstd * gamma, rstd


@golden("RmsNorm")
def rms_norm(x, gamma, eps=1e-6):
    return _rms(x, gamma, eps)


@golden("GemmaRmsNorm")
def gemma_rms_norm(x, gamma, eps=1e-6):
    return _rms(x, 1 + gamma, eps)


@golden("AddRmsNorm")
def add_rms_norm(x1, x2, gamma, eps=1e-6, kernel_type=None):
    y, rstd = _rms(x1 + x2, gamma, eps)
    return y, rstd, x1 + x2
