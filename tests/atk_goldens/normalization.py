"""Goldens of the normalization family (CANN's norm/ operators): vector norms, LayerNorm,
RmsNorm, BatchNorm, GroupNorm, InstanceNorm and their fused and backward forms. Each is
PyTorch in float64 (the driver widens the inputs)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

from atk_driver import golden

INFINITE_ORDER = 2**31 - 1  # the ATK's stand-in for an infinite norm order


def _order(p: float) -> float:
    return math.copysign(math.inf, p) if abs(p) >= INFINITE_ORDER else float(p)


def _dims(dim) -> list[int]:
    return [dim] if isinstance(dim, int) else list(dim)


# -- inputs CANN's harness converts before the call -------------------------------------------
def _numbers_from_strings(*positions: int):
    """A prepare for cases writing a float attribute at one of ``positions`` as a string
    ("1e-6"), which CANN's harness converts to its number."""
    def prepare(inputs):
        inputs = list(inputs)
        for position in positions:
            if position < len(inputs) and isinstance(inputs[position], str):
                inputs[position] = float(inputs[position])
        return inputs
    return prepare


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


@golden("AddRmsNorm", params=("x1", "x2", "gamma", "epsilon", "_kernelType"))
def add_rms_norm(x1, x2, gamma, eps=1e-6, kernel_type=None):
    y, rstd = _rms(x1 + x2, gamma, eps)
    return y, rstd, x1 + x2


def _grads(output, leaves, grad):
    """``d output / d leaves`` for incoming gradient ``grad`` (None for a leaf left out)."""
    wanted = [leaf for leaf in leaves if leaf is not None]
    found = iter(torch.autograd.grad(output, wanted, grad, allow_unused=True))
    return [None if leaf is None else next(found) for leaf in leaves]


def _leaf(tensor):
    return None if tensor is None else tensor.detach().clone().requires_grad_(True)


@golden("LayerNormBackward")
def layer_norm_backward(dy, x, normalized, mean, rstd, weight=None, bias=None, mask=None):
    normalized = _dims(normalized)
    xt, wt = _leaf(x), _leaf(weight)
    if wt is None:
        wt = torch.ones(normalized, dtype=torch.float64, requires_grad=True)
    y = (xt - mean.reshape(*x.shape[:x.dim() - len(normalized)], *[1] * len(normalized))) * \
        rstd.reshape(*x.shape[:x.dim() - len(normalized)], *[1] * len(normalized))
    # the gradient of the affine normalization with the given (not recomputed) statistics
    dims = list(range(x.dim() - len(normalized), x.dim()))
    n = math.prod(normalized)
    g = dy * wt.detach()
    r = rstd.reshape(y.shape[:x.dim() - len(normalized)] + (1,) * len(normalized))
    dx = r * (g - g.sum(dims, keepdim=True) / n - y.detach() * (g * y.detach()).sum(
        dims, keepdim=True) / n)
    lead = list(range(x.dim() - len(normalized)))
    dw = (dy * y.detach()).sum(lead) if lead else dy * y.detach()
    db = dy.sum(lead) if lead else dy
    return dx, dw, db


def _in_dtype(tensor, dtype):
    """``tensor`` rounded once to numpy ``dtype`` (and widened back): a float16 result past
    65504 is inf, as our output is (the comparison does not round the golden itself)."""
    if np.dtype(dtype) == np.float16:
        return tensor.to(torch.float16).double()
    return tensor


@golden("RmsNormGrad", with_dtypes=True)
def rms_norm_grad(dtypes, dy, x, rstd, gamma):
    lead = x.shape[:x.dim() - gamma.dim()]
    r = rstd.reshape(*lead, *[1] * gamma.dim())
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    g = dy * gamma
    dx = r * g - x * r ** 3 * (g * x).mean(dims, keepdim=True)
    dgamma = (dy * x * r).sum(list(range(len(lead)))) if lead else dy * x * r
    return _in_dtype(dx, dtypes[0]), dgamma


@golden("BatchNormBackward")
def batch_norm_backward(dy, x, weight, running_mean, running_var, save_mean, save_invstd,
                        training=True, eps=1e-5, mask=None):
    return torch.ops.aten.native_batch_norm_backward(
        dy, x, weight, running_mean, running_var, save_mean, save_invstd, training, eps,
        [True, True, True])


@golden("GroupNormBackward")
def group_norm_backward(dy, x, mean, rstd, gamma, n, c, hxw, group, mask=None):
    return torch.ops.aten.native_group_norm_backward(dy, x, mean.reshape(n, group),
                                                     rstd.reshape(n, group), gamma, n, c,
                                                     hxw, group, [True, True, True])


def _layer_norm(x, normalized, weight=None, bias=None, eps=1e-5):
    normalized = _dims(normalized)
    dims = list(range(x.dim() - len(normalized), x.dim()))
    mean = x.mean(dims, keepdim=True)
    rstd = torch.rsqrt(x.var(dims, unbiased=False, keepdim=True) + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


def _module_form(inputs) -> str | None:
    if len(inputs) == 4:  # torch.nn.LayerNorm(normalizedShape, eps, elementwiseAffine)
        return ("the torch.nn.LayerNorm module form (input, normalizedShape, eps, "
                "elementwiseAffine) binds to no aclnnLayerNorm argument order")
    return None


@golden("LayerNorm", skip=_module_form)
def layer_norm(x, normalized, weight=None, bias=None, eps=1e-5):
    return _layer_norm(x, normalized, weight, bias, eps)


@golden("LayerNormWithImplMode")
def layer_norm_with_impl_mode(x, normalized, weight=None, bias=None, eps=1e-5, mode=0):
    return _layer_norm(x, normalized, weight, bias, eps)


@golden("AddLayerNorm")
def add_layer_norm(x1, x2, gamma, beta, bias=None, eps=1e-5, additional=False):
    x = x1 + x2 + (0 if bias is None else bias)
    y, mean, rstd = _layer_norm(x, list(gamma.shape), gamma, beta, eps)
    return y, mean, rstd, x if additional else None


@golden("BatchNorm")
def batch_norm(x, weight, bias, running_mean, running_var, training=False, momentum=0.1,
               eps=1e-5):
    y, mean, invstd = torch.ops.aten.native_batch_norm(
        x, weight, bias, running_mean.clone(), running_var.clone(), training, momentum, eps)
    return (y, mean, invstd) if training else y


@golden("GroupNorm")
def group_norm(x, gamma, beta, n, c, hxw, group, eps=1e-5):
    return torch.ops.aten.native_group_norm(x, gamma, beta, n, c, hxw, group, eps)


@golden("InstanceNorm")
def instance_norm(x, gamma, beta, data_format="NCHW", eps=1e-5):
    channel_last = data_format == "NHWC"
    dims = [1, 2] if channel_last else [2, 3]
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, unbiased=False, keepdim=True)
    shape = [1, 1, 1, -1] if channel_last else [1, -1, 1, 1]
    y = (x - mean) * torch.rsqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)
    return y, mean, var


def _group_norm_act(x, gamma, beta, group, eps, scale):
    n, c = x.shape[:2]
    grouped = x.reshape(n, group, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + eps)
    affine = [1, c] + [1] * (x.dim() - 2)
    y = ((grouped - mean[..., None]) * rstd[..., None]).reshape(x.shape)
    y = y * gamma.reshape(affine) + beta.reshape(affine)
    if scale is not None:
        y = y * torch.sigmoid(scale * y)
    return y, mean, rstd


@golden("GroupNormSilu")
def group_norm_silu(x, gamma, beta, group, eps=1e-5):
    return _group_norm_act(x, gamma, beta, group, eps, 1.0)


@golden("GroupNormSiluV2")
def group_norm_silu_v2(x, gamma, beta, group, eps=1e-5, activate=True):
    return _group_norm_act(x, gamma, beta, group, eps, 1.0 if activate else None)


@golden("GroupNormSwish")
def group_norm_swish(x, gamma, beta, group, layout=None, eps=1e-5, activate=True, scale=1.0):
    return _group_norm_act(x, gamma, beta, group, eps, float(scale) if activate else None)


@golden("DeepNorm", prepare=_numbers_from_strings(4, 5))
def deep_norm(x, gx, beta, gamma, alpha=0.3, eps=1e-6):
    y, mean, rstd = _layer_norm(alpha * x + gx, list(gamma.shape), gamma, beta, float(eps))
    return mean, rstd, y


def _channel_axes(x):
    return [a for a in range(x.dim()) if a != 1], [1, -1] + [1] * (x.dim() - 2)


@golden("BatchNormStats")
def batch_norm_stats(x, eps=1e-5):
    axes, _ = _channel_axes(x)
    return x.mean(axes), torch.rsqrt(x.var(axes, unbiased=False) + eps)


@golden("BatchNormElemt")
def batch_norm_elemt(x, weight, bias, mean, invstd, eps=1e-5):
    _, per_channel = _channel_axes(x)
    y = (x - mean.reshape(per_channel)) * invstd.reshape(per_channel)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    return y if bias is None else y + bias.reshape(per_channel)


@golden("BatchNormGatherStatsWithCounts")
def batch_norm_gather_stats_with_counts(x, mean, invstd, running_mean, running_var,
                                        momentum=0.1, eps=1e-5, counts=None):
    weights = counts[:, None]
    total = counts.sum()
    mean_all = (weights * mean).sum(0) / total
    var_all = (weights * (1 / invstd ** 2 - eps + (mean - mean_all) ** 2)).sum(0) / total
    return mean_all, torch.rsqrt(var_all + eps)


@golden("BatchNormReduceBackward")
def batch_norm_reduce_backward(dy, x, mean, invstd, weight, input_g=True, weight_g=True,
                               bias_g=True):
    axes, per_channel = _channel_axes(x)
    sum_dy = dy.sum(axes)
    sum_dy_xmu = (dy * (x - mean.reshape(per_channel))).sum(axes)
    outputs = ([sum_dy, sum_dy_xmu] if input_g else []) + \
        ([sum_dy_xmu * invstd] if weight_g else []) + ([sum_dy] if bias_g else [])
    return tuple(outputs)


@golden("BatchNormElemtBackward")
def batch_norm_elemt_backward(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, counter):
    _, per_channel = _channel_axes(x)
    n = counter.double().sum()
    r = invstd.reshape(per_channel)
    grad = (dy - sum_dy.reshape(per_channel) / n - (x - mean.reshape(per_channel)) * r * r *
            sum_dy_xmu.reshape(per_channel) / n) * r
    return grad if weight is None else grad * weight.reshape(per_channel)


def _row_norm_grads(dy, x, gamma, mean, rstd):
    """(d x, dgamma, dbeta) of LayerNorm rows of ``x`` from the saved statistics."""
    lead = x.shape[:x.dim() - gamma.dim()]
    keep = (*lead, *[1] * gamma.dim())
    dims = list(range(len(lead), x.dim()))
    r = rstd.reshape(keep)
    xhat = (x - mean.reshape(keep)) * r
    g = dy * gamma
    dx = r * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))
    axes = list(range(len(lead)))
    return dx, (dy * xhat).sum(axes) if axes else dy * xhat, dy.sum(axes) if axes else dy


@golden("AddLayerNormGrad")
def add_layer_norm_grad(dy, x1, x2, rstd, mean, gamma, dsum=None):
    dx, dgamma, dbeta = _row_norm_grads(dy, x1 + x2, gamma, mean, rstd)
    return (dx if dsum is None else dx + dsum), dgamma, dbeta


DEEP_NORM_EPSILON = 1e-6  # CANN's harness (executor_aclnnDeepNormGrad.py): its forward's eps


def _torch_in(value: np.ndarray) -> torch.Tensor:
    """A drawn array as a torch tensor of its own dtype (bfloat16 through float32, exact)."""
    if value.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(value.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(value))


def _deep_norm_statistics(inputs):
    """CANN's harness (executor_aclnnDeepNormGrad.py, ``init_by_input_data``): mean and
    rstd are the forward DeepNorm's of ``alpha * x + gx`` over gamma's dims (kept as 1),
    with eps 1e-6, computed in the inputs' dtype as its torch code does and cast to
    float32; the file's mean and rstd are float16 placeholders. (Its beta is an input of
    that forward only: the harness drops it from the aclnn call.)"""
    dy, x, gx, beta, gamma, mean, rstd, *rest = inputs
    if x is None or gx is None or gamma is None:
        return inputs
    alpha = float(rest[0]) if rest else 0.3
    dims = tuple(range(-1, -gamma.ndim - 1, -1))
    total = _torch_in(x) * alpha + _torch_in(gx)
    made_mean = torch.mean(total, dims, keepdim=True)
    variance = torch.mean(torch.pow(total - made_mean, 2), dims, keepdim=True)
    made_rstd = 1 / torch.sqrt(variance + DEEP_NORM_EPSILON)
    return [dy, x, gx, beta, gamma, made_mean.float().numpy(), made_rstd.float().numpy(),
            *rest]


# CANN's ATK lists beta (the forward's) before gamma; the harness drops beta from the call
@golden("DeepNormGrad", params=("dy", "x", "gx", "_beta", "gamma", "mean", "rstd", "alpha"),
        prepare=_deep_norm_statistics)
def deep_norm_grad(dy, x, gx, _beta, gamma, mean, rstd, alpha=0.3):
    dgx, dgamma, dbeta = _row_norm_grads(dy, alpha * x + gx, gamma, mean, rstd)
    return alpha * dgx, dgx, dbeta, dgamma


@golden("Renorm")
def renorm(x, p, dim, max_norm):
    return torch.renorm(x, _order(p), dim, max_norm)


@golden("AdaLayerNorm")
def ada_layer_norm(x, scale, shift, weight=None, bias=None, eps=1e-5):
    y, _, _ = _layer_norm(x, [x.shape[-1]], weight, bias, eps)
    rows = (*x.shape[:-2], 1, x.shape[-1])
    return y * (1 + scale.reshape(rows)) + shift.reshape(rows)


@golden("QuantizedBatchNorm", with_dtypes=True)
def quantized_batch_norm(dtypes, x, mean, var, in_scale, in_zero, out_scale, out_zero,
                         weight=None, bias=None, eps=1e-5):
    shape = (1, -1, 1, 1)
    y = ((x.double() - in_zero) * in_scale - mean.reshape(shape)) / torch.sqrt(
        var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    info = np.iinfo(dtypes[0])
    return torch.clamp(torch.round(y / out_scale + out_zero), info.min, info.max)


@golden("GroupNormSwishGrad")
def group_norm_swish_grad(dy, mean, rstd, x, gamma, beta, group, layout=None, scale=1.0,
                          need_gamma=True, need_beta=True):
    n, c = x.shape[:2]
    grouped = (n, group, c // group, -1)
    per_channel = (1, group, c // group, 1)
    xhat = (x.reshape(grouped) - mean.reshape(n, group, 1, 1)) * rstd.reshape(n, group, 1, 1)
    y = xhat * gamma.reshape(per_channel) + beta.reshape(per_channel)
    gate = torch.sigmoid(scale * y)
    dnorm = dy.reshape(grouped) * (gate + scale * y * gate * (1 - gate))
    g = dnorm * gamma.reshape(per_channel)
    r = rstd.reshape(n, group, 1, 1)
    dx = r * (g - g.mean((2, 3), keepdim=True) - xhat * (g * xhat).mean((2, 3), keepdim=True))
    outputs = [dx.reshape(x.shape)]
    if need_gamma:
        outputs.append((dnorm * xhat).sum((0, 3)).reshape(-1))
    if need_beta:
        outputs.append(dnorm.sum((0, 3)).reshape(-1))
    return tuple(outputs)


@golden("MaskedSoftmaxWithRelPosBias")
def masked_softmax_with_rel_pos_bias(x, mask, bias, scale=1.0, mode=0):
    s1, s2 = x.shape[-2:]
    windows = 1 if mask is None else mask.numel() // (s1 * s2)
    five = x.reshape(-1, windows, *x.shape[-3:]) if x.dim() == 4 else x
    logits = five * scale + bias.reshape(1, 1, -1, s1, s2)
    if mask is not None:
        logits = logits + mask.reshape(1, -1, 1, s1, s2)
    return torch.softmax(logits, -1).reshape(x.shape)
