"""Goldens of the optimizer steps (ops/optim.py) and the fused vector operators
(ops/vector_fusion.py: Modulate): torch.optim.AdamW's update in float64 for the AdamW forms, the
aclnn documents' formulas for the others."""

from __future__ import annotations

import torch

from atk_driver import golden


def _adamw(var, m, v, grad, corrections, lr, beta1, beta2, weight_decay, eps, maximize,
           previous_max=None):
    grad = -grad if maximize else grad
    var = var * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    second = v if previous_max is None else torch.maximum(previous_max, v)
    var = var - lr / corrections[0] * m / (torch.sqrt(second / corrections[1]) + eps)
    return var, m, v, second


@golden("ApplyAdamWV2")
def apply_adam_w_v2(var, m, v, max_v, grad, step, lr, beta1, beta2, weight_decay, eps,
                    amsgrad, maximize):
    t = float(step.reshape(-1)[0])
    var, m, v, second = _adamw(var, m, v, grad, (1 - beta1 ** t, 1 - beta2 ** t), lr, beta1,
                               beta2, weight_decay, eps, maximize,
                               max_v if amsgrad else None)
    return var, m, v, (second if amsgrad else None)


@golden("ApplyAdamW")
def apply_adam_w(var, m, v, beta1_power, beta2_power, lr, weight_decay, beta1, beta2, eps,
                 grad, max_v, amsgrad, maximize):
    item = {name: float(t.reshape(-1)[0]) for name, t in (
        ("p1", beta1_power), ("p2", beta2_power), ("lr", lr), ("wd", weight_decay),
        ("b1", beta1), ("b2", beta2), ("eps", eps))}
    corrections = (1 - item["p1"] * item["b1"], 1 - item["p2"] * item["b2"])
    var, m, v, second = _adamw(var, m, v, grad, corrections, item["lr"], item["b1"],
                               item["b2"], item["wd"], item["eps"], maximize,
                               max_v if amsgrad else None)
    return var, m, (second if amsgrad else v)


@golden("ApplyFusedEmaAdam")
def apply_fused_ema_adam(grad, var, m, v, s, step, lr, ema_decay, beta1, beta2, eps, mode,
                         bias_correction, weight_decay):
    t = float(step.reshape(-1)[0])
    c1, c2 = (1 - beta1 ** t, 1 - beta2 ** t) if bias_correction else (1.0, 1.0)
    if mode == 0:
        grad = grad + weight_decay * var
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    update = (m / c1) / (torch.sqrt(v / c2) + eps)
    if mode == 1:
        update = update + weight_decay * var
    var = var - lr * update
    return var, m, v, ema_decay * s + (1 - ema_decay) * var


@golden("Modulate")
def modulate(x, scale, shift):
    batch, _, hidden = x.shape
    if scale is not None:
        x = x * (1 + scale.reshape(batch, 1, hidden))
    if shift is not None:
        x = x + shift.reshape(batch, 1, hidden)
    return x
