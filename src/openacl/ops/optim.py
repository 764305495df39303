"""Optimizer steps (CANN's optim/ family): ApplyAdamW, ApplyAdamWV2, ApplyFusedEmaAdam.

Each updates its state tensors in place (``varRef``, ``mRef``, ``vRef``, ...), computing in
float32 (float64 for float64 state) and rounding once into each tensor, as a fused kernel
does. The formulas are the aclnn documents' (torch.optim.AdamW's for the two AdamW forms:
decoupled weight decay applied to the weight before the step, AMSGrad keeping the running
maximum of v, ``maximize`` negating the gradient).
"""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import ACLNN_ERR_PARAM_NULLPTR, Call, Kernel
from openacl.ops.registry import register_inplace

__all__: list[str] = []

STATE_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32))
STEP_DTYPES = frozenset({np.dtype(np.int64), np.dtype(np.float32)})
EMA_STEP_DTYPES = frozenset({np.dtype(np.int64)})
EMA_MODES = {0: "L2", 1: "AdamW"}  # ApplyFusedEmaAdam's mode: weight decay as L2 or decoupled


def _states(c: Call, names: tuple[str, ...], like: str) -> np.dtype:
    """Every tensor of ``names`` has ``like``'s dtype (one of STATE_DTYPES) and shape."""
    dtype = c.check_dtype(like, STATE_DTYPES)
    shape = c.tensor(like).shape
    for name in names:
        if c[name] is None:
            raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
        if c.dtype(name) != dtype:
            raise c.fail(name, f"dtype must be {like}'s {dtype}")
        if c.tensor(name).shape != shape:
            raise c.fail(name, f"shape must be {like}'s {list(shape)}")
    return dtype


def _one_element(c: Call, name: str, allowed: frozenset) -> None:
    c.check_dtype(name, allowed)
    if c.tensor(name).numel != 1:
        raise c.fail(name, f"must hold one element, not {list(c.tensor(name).shape)}")


def _item(view: object) -> float:
    """The one value of a one-element tensor (read on the host)."""
    host = view if isinstance(view, np.ndarray) else view.get()
    return float(host.reshape(-1)[0])


def _adamw_step(v, compute: np.dtype, corrections: tuple[float, float], lr: float,
                beta1: float, beta2: float, weight_decay: float, eps: float, maximize: bool,
                running_max: tuple[str, str] | None) -> None:
    """One AdamW step on the views of ``v`` (torch.optim.AdamW's single-tensor update) with
    bias corrections ``(1 - beta1^t, 1 - beta2^t)``. ``running_max`` (AMSGrad): the view
    holding the previous maximum of v and the view that gets the new one."""
    var, m, s = (v.compute(n, compute) for n in ("varRef", "mRef", "vRef"))
    grad = v.compute("grad", compute)
    if maximize:
        grad = -grad
    var = var * compute.type(1 - lr * weight_decay)
    m = m * compute.type(beta1) + grad * compute.type(1 - beta1)
    s = s * compute.type(beta2) + grad * grad * compute.type(1 - beta2)
    second = s
    if running_max is not None:
        source, target = running_max
        second = np.maximum(v.compute(source, compute), s)
        if target == "vRef":
            s = second
        else:
            v.write(target, second)
    denom = np.sqrt(second / compute.type(corrections[1])) + compute.type(eps)
    v.write("varRef", var - compute.type(lr / corrections[0]) * m / denom)
    v.write("mRef", m)
    v.write("vRef", s)


def _apply_adam_w_v2(c: Call) -> Kernel:
    """AdamW with scalar hyper-parameters and the step count t in a one-element tensor;
    with amsgrad, ``maxGradNormOptionalRef`` keeps the running maximum of v. grad may be
    of another float dtype than the state (CANN's own cases pass float32 and float16
    gradients to bfloat16 state)."""
    dtype = _states(c, ("mRef", "vRef"), "varRef")
    c.check_dtype("grad", STATE_DTYPES)
    if c.tensor("grad").shape != c.tensor("varRef").shape:
        raise c.fail("grad", f"shape must be varRef's {list(c.tensor('varRef').shape)}")
    amsgrad, maximize = bool(c["amsgrad"]), bool(c["maximize"])
    if amsgrad:
        _states(c, ("maxGradNormOptionalRef",), "varRef")
    _one_element(c, "step", STEP_DTYPES)
    for name in ("varRef", "mRef", "vRef") + (("maxGradNormOptionalRef",) if amsgrad else ()):
        c.check_out(name, c.tensor(name).shape, dtype, exact_dtype=True)
    lr, beta1, beta2 = float(c["lr"]), float(c["beta1"]), float(c["beta2"])
    weight_decay, eps = float(c["weightDecay"]), float(c["eps"])
    compute = promotion.compute_dtype(dtype)
    running_max = ("maxGradNormOptionalRef",) * 2 if amsgrad else None

    def kernel(v) -> None:
        step = _item(v["step"])
        if not step > 0:
            raise ValueError(f"step must be > 0, got {step}")
        _adamw_step(v, compute, (1 - beta1 ** step, 1 - beta2 ** step), lr, beta1, beta2,
                    weight_decay, eps, maximize, running_max)
    return kernel


register_inplace("ApplyAdamWV2", "varRef: tensor!, mRef: tensor!, vRef: tensor!, "
                 "maxGradNormOptionalRef: tensor!?, grad: tensor, step: tensor, "
                 "lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, "
                 "weightDecay: float = 0.01, eps: float = 1e-08, amsgrad: bool = False, "
                 "maximize: bool = False", _apply_adam_w_v2, varRef="varRef", mRef="mRef",
                 vRef="vRef", maxGradNormOptionalRef="maxGradNormOptionalRef")


ADAMW_SCALARS = ("beta1Power", "beta2Power", "lr", "weightDecay", "beta1", "beta2", "eps")


def _apply_adam_w(c: Call) -> Kernel:
    """AdamW with every hyper-parameter in a one-element tensor of the state's dtype and
    the powers beta1^(t-1), beta2^(t-1) given (this step's are ``beta1Power * beta1``);
    with amsgrad, vRef gets max(maxGradNormOptional, v)."""
    dtype = _states(c, ("mRef", "vRef", "grad"), "varRef")
    for name in ADAMW_SCALARS:
        _one_element(c, name, frozenset({dtype}))
    amsgrad, maximize = bool(c["amsgrad"]), bool(c["maximize"])
    if amsgrad:
        _states(c, ("maxGradNormOptional",), "varRef")
    for name in ("varRef", "mRef", "vRef"):
        c.check_out(name, c.tensor(name).shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    running_max = ("maxGradNormOptional", "vRef") if amsgrad else None

    def kernel(v) -> None:
        value = {name: _item(v[name]) for name in ADAMW_SCALARS}
        beta1, beta2 = value["beta1"], value["beta2"]
        corrections = (1 - value["beta1Power"] * beta1, 1 - value["beta2Power"] * beta2)
        _adamw_step(v, compute, corrections, value["lr"], beta1, beta2,
                    value["weightDecay"], value["eps"], maximize, running_max)
    return kernel


register_inplace("ApplyAdamW", "varRef: tensor!, mRef: tensor!, vRef: tensor!, "
                 "beta1Power: tensor, beta2Power: tensor, lr: tensor, weightDecay: tensor, "
                 "beta1: tensor, beta2: tensor, eps: tensor, grad: tensor, "
                 "maxGradNormOptional: tensor?, amsgrad: bool = False, "
                 "maximize: bool = False", _apply_adam_w, varRef="varRef", mRef="mRef",
                 vRef="vRef")


def _apply_fused_ema_adam(c: Call) -> Kernel:
    """Adam (mode 0: weight decay as L2 on the gradient; 1: decoupled, AdamW) with optional
    bias correction, then the EMA copy of the weight: s = emaDecay * s + (1 - emaDecay) *
    var (the aclnn document's formulas)."""
    dtype = _states(c, ("varRef", "mRef", "vRef", "sRef"), "grad")
    c.check_dtype("step", EMA_STEP_DTYPES)  # its first element is the step count
    if c.tensor("step").numel < 1:
        raise c.fail("step", "is empty; its first element is the step count")
    mode = int(c["mode"])
    if mode not in EMA_MODES:
        raise c.fail("mode", f"expected one of {sorted(EMA_MODES)} (0 L2, 1 AdamW)")
    for name in ("varRef", "mRef", "vRef", "sRef"):
        c.check_out(name, c.tensor(name).shape, dtype, exact_dtype=True)
    lr, decay, beta1, beta2 = (float(c[n]) for n in ("lr", "emaDecay", "beta1", "beta2"))
    eps, weight_decay, bias_correction = float(c["eps"]), float(c["weightDecay"]), bool(
        c["biasCorrection"])
    compute = promotion.compute_dtype(dtype)
    one = compute.type(1)

    def kernel(v) -> None:
        step = _item(v["step"])
        corrections = (1 - beta1 ** step, 1 - beta2 ** step) if bias_correction else (1, 1)
        var, m, s, ema = (v.compute(n, compute) for n in ("varRef", "mRef", "vRef", "sRef"))
        grad = v.compute("grad", compute)
        if mode == 0:
            grad = grad + compute.type(weight_decay) * var
        m = compute.type(beta1) * m + (one - compute.type(beta1)) * grad
        s = compute.type(beta2) * s + (one - compute.type(beta2)) * grad * grad
        denom = np.sqrt(s / compute.type(corrections[1])) + compute.type(eps)
        update = (m / compute.type(corrections[0])) / denom
        if mode == 1:
            update = update + compute.type(weight_decay) * var
        var = var - compute.type(lr) * update
        v.write("varRef", var)
        v.write("mRef", m)
        v.write("vRef", s)
        v.write("sRef", compute.type(decay) * ema + (one - compute.type(decay)) * var)
    return kernel


register_inplace("ApplyFusedEmaAdam", "grad: tensor, varRef: tensor!, mRef: tensor!, "
                 "vRef: tensor!, sRef: tensor!, step: tensor, lr: float = 0.001, "
                 "emaDecay: float = 0.9999, beta1: float = 0.9, beta2: float = 0.999, "
                 "eps: float = 1e-08, mode: int = 1, biasCorrection: bool = True, "
                 "weightDecay: float = 0.0", _apply_fused_ema_adam, varRef="varRef",
                 mRef="mRef", vRef="vRef", sRef="sRef")
