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


def _bisected_codes(state, qmap, absmax, block):
    """uint8 codes of ``state`` (flat) by the document's bisection of qmap for state /
    absmax: halve [0, 255] eight times, take the nearer end (the lower on a tie); a signed
    map's code then moves one step to keep the value's sign (CANN's golden)."""
    scale = torch.where(absmax == 0, torch.ones_like(absmax), absmax)
    normalized = state / torch.repeat_interleave(scale, block)[:state.numel()]
    codes = []
    for x in normalized.tolist():
        low, high = 0, qmap.numel() - 1
        for _ in range(8):  # as the kernel: may end on one entry (low == high)
            middle = (low + high) // 2
            low, high = (middle, high) if x > qmap[middle] else (low, middle)
        code = low if abs(x - qmap[low]) <= abs(x - qmap[high]) else high
        if bool((qmap < 0).any()) and x * qmap[code] < 0:
            code = min(max(code + (1 if x > 0 else -1), 0), qmap.numel() - 1)
        codes.append(code)
    return torch.tensor(codes)


@golden("ApplyAdamWQuant")
def apply_adam_w_quant(var, grad, m, v, qmap_m, qmap_v, absmax_m, absmax_v, step, lr, beta1,
                       beta2, weight_decay, eps, gnorm_scale, quant_mode, block_size):
    t = float(step.reshape(-1)[0]) + 1  # CANN's kernel counts this step as step + 1
    correction1, correction2 = 1 - beta1 ** t, (1 - beta2 ** t) ** 0.5
    size = var.numel()
    m_state = qmap_m[m.reshape(-1).long()] * torch.repeat_interleave(absmax_m.reshape(-1),
                                                                      block_size)[:size]
    v_state = qmap_v[v.reshape(-1).long()] * torch.repeat_interleave(absmax_v.reshape(-1),
                                                                      block_size)[:size]
    g = grad.reshape(-1) * gnorm_scale
    m_state = beta1 * m_state + (1 - beta1) * g
    v_state = beta2 * v_state + (1 - beta2) * g * g
    w = var.reshape(-1) - lr * correction2 / correction1 * m_state / (
        torch.sqrt(v_state) + eps * correction2)
    if weight_decay > 0:
        w = w * (1 - lr * weight_decay)
    blocks = absmax_m.numel()
    new_m = torch.stack([m_state[i * block_size:(i + 1) * block_size].abs().max()
                         for i in range(blocks)])
    new_v = torch.stack([v_state[i * block_size:(i + 1) * block_size].max()
                         for i in range(blocks)])
    return (w.reshape(var.shape), _bisected_codes(m_state, qmap_m, new_m, block_size)
            .reshape(m.shape), _bisected_codes(v_state, qmap_v, new_v, block_size)
            .reshape(v.shape), new_m.reshape(absmax_m.shape), new_v.reshape(absmax_v.shape))


@golden("AdvanceStep")
def advance_step(tokens, sampled, positions, seq_lens, slots, tables, num_seqs, num_queries,
                 block_size):
    tokens, positions, seq_lens, slots = (t.clone() for t in (tokens, positions, seq_lens,
                                                              slots))
    for i in range(num_queries):
        position = int(seq_lens[i])
        tokens[i] = sampled[i, 0]
        positions[i] = position
        seq_lens[i] = position + 1
        slots[i] = tables[i, position // block_size] * block_size + position % block_size
    tokens[num_queries:num_seqs] = 0
    positions[num_queries:num_seqs] = 0
    slots[num_queries:num_seqs] = -1
    return tokens, positions, seq_lens, slots


@golden("AdvanceStepV2")
def advance_step_v2(tokens, sampled, positions, seq_lens, slots, tables, spec_token,
                    accepted, num_seqs, num_queries, block_size):
    per_seq = 1 + spec_token.shape[1]
    new_tokens = torch.empty((num_seqs, per_seq), dtype=torch.int64)
    new_positions = positions.clone()
    new_slots = slots.clone()
    for i in range(num_seqs):
        row = [int(x) for x in sampled[i]]
        last = row.index(-1) - 1 if -1 in row else per_seq - 1
        new_tokens[i, 0] = row[last]  # -1 (the first sample rejected) is the last column
        new_tokens[i, 1:] = spec_token[i]
        for j in range(i * per_seq, (i + 1) * per_seq):
            position = int(positions[j]) + int(accepted[i]) + 1
            new_positions[j] = position
            new_slots[j] = (tables[i, position // block_size] * block_size
                            + position % block_size)
    return new_tokens.reshape(tokens.shape), new_positions, new_positions + 1, new_slots
