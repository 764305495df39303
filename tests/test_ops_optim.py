"""Optimizer steps (ops/optim.py) against torch.optim.AdamW in float64, FusedEmaAdam
against its document's formulas, and Modulate (ops/vector_fusion.py) against torch; their
argument checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close
from openacl import ops
from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _state(shape, dtype):
    w, m = RNG.normal(size=shape), RNG.normal(size=shape)
    v = np.abs(RNG.normal(size=shape))
    return [a.astype(dtype) for a in (w, m, v, v * 1.5)], RNG.normal(size=shape).astype(dtype)


def _torch_adamw(w, m, v, max_v, g, step, lr, betas, weight_decay, eps, amsgrad, maximize):
    wide = [torch.from_numpy(a.astype(np.float64)) for a in (w, m, v, max_v, g)]
    param = torch.nn.Parameter(wide[0].clone())
    opt = torch.optim.AdamW([param], lr=lr, betas=betas, weight_decay=weight_decay, eps=eps,
                            amsgrad=amsgrad, maximize=maximize)
    param.grad = wide[4]
    opt.state[param] = {"step": torch.tensor(float(step - 1)), "exp_avg": wide[1].clone(),
                        "exp_avg_sq": wide[2].clone()}
    if amsgrad:
        opt.state[param]["max_exp_avg_sq"] = wide[3].clone()
    opt.step()
    state = opt.state[param]
    return (param.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy(),
            state["max_exp_avg_sq"].numpy() if amsgrad else max_v.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_apply_adam_w_v2_is_torch_adamw(dtype, amsgrad, maximize):
    (w, m, v, max_v), g = _state((6, 9), dtype)
    refs = [openacl.to_device(a.copy()) for a in (w, m, v, max_v)]
    ops.apply_adam_wv2(*refs, grad=g, step=np.array([4], np.int64), lr=0.01, beta1=0.9,
                       beta2=0.99, weightDecay=0.05, eps=1e-6, amsgrad=amsgrad,
                       maximize=maximize)
    golden = _torch_adamw(w, m, v, max_v, g, 4, 0.01, (0.9, 0.99), 0.05, 1e-6, amsgrad,
                          maximize)
    for ref, expected, name in zip(refs, golden, ("var", "m", "v", "max_v"), strict=True):
        assert_close(ref.numpy(), expected.astype(dtype), name)
        ref.free()


def test_apply_adam_w_takes_its_hyper_parameters_as_tensors():
    (w, m, v, max_v), g = _state((5, 4), np.float32)
    refs = [openacl.to_device(a.copy()) for a in (w, m, v)]
    one = {name: np.array([value], np.float32) for name, value in (
        ("beta1Power", 0.9 ** 2), ("beta2Power", 0.99 ** 2), ("lr", 0.01),
        ("weightDecay", 0.05), ("beta1", 0.9), ("beta2", 0.99), ("eps", 1e-6))}
    ops.apply_adam_w(*refs, **one, grad=g, maxGradNormOptional=max_v, amsgrad=True)
    var, m2, v2, max2 = _torch_adamw(w, m, v, max_v, g, 3, 0.01, (0.9, 0.99), 0.05, 1e-6,
                                     True, False)
    assert_close(refs[0].numpy(), var.astype(np.float32), "var")
    assert_close(refs[1].numpy(), m2.astype(np.float32), "m")
    assert_close(refs[2].numpy(), max2.astype(np.float32), "v holds the running maximum")
    for ref in refs:
        ref.free()


@pytest.mark.parametrize("mode,bias_correction", [(0, True), (1, True), (1, False)])
def test_apply_fused_ema_adam_follows_its_formulas(mode, bias_correction):
    shape = (8, 5)
    grad, var, m, s = (RNG.normal(size=shape) for _ in range(4))
    v = np.abs(RNG.normal(size=shape))
    refs = [openacl.to_device(a.astype(np.float32)) for a in (var, m, v, s)]
    ops.apply_fused_ema_adam(grad.astype(np.float32), *refs, np.array([3], np.int64), 1e-3,
                             0.99, 0.9, 0.999, 1e-8, mode, bias_correction, 0.01)
    g = grad.astype(np.float32).astype(np.float64)
    var, m, v, s = (a.astype(np.float32).astype(np.float64) for a in (var, m, v, s))
    c1, c2 = (1 - 0.9 ** 3, 1 - 0.999 ** 3) if bias_correction else (1, 1)
    if mode == 0:
        g = g + 0.01 * var
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    update = (m / c1) / (np.sqrt(v / c2) + 1e-8) + (0.01 * var if mode == 1 else 0)
    var = var - 1e-3 * update
    s = 0.99 * s + 0.01 * var
    for ref, expected in zip(refs, (var, m, v, s), strict=True):
        assert_close(ref.numpy(), expected.astype(np.float32))
        ref.free()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("two_d", [False, True])
def test_modulate(dtype, two_d):
    x = RNG.normal(size=(2, 5, 8)).astype(dtype)
    shape = (2, 8) if two_d else (2, 1, 8)
    scale, shift = (RNG.normal(size=shape).astype(dtype) for _ in range(2))
    out = ops.modulate(x, scale, shift).numpy()
    wide = [torch.from_numpy(a.astype(np.float64)) for a in (x, scale, shift)]
    golden = wide[0] * (1 + wide[1].reshape(2, 1, 8)) + wide[2].reshape(2, 1, 8)
    assert_close(out, golden.numpy().astype(dtype))
    only_shift = ops.modulate(x, None, shift).numpy()
    assert_close(only_shift, (wide[0] + wide[2].reshape(2, 1, 8)).numpy().astype(dtype))


@pytest.mark.parametrize("call,name", [
    (lambda: ops.modulate(np.ones((2, 3), np.float32), None, None), "self"),
    (lambda: ops.modulate(np.ones((2, 3, 4), np.float32), np.ones((3, 4), np.float32), None),
     "scaleOptional"),
])
def test_bad_arguments_are_refused_naming_them(call, name):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in info.value.message


def test_bad_optimizer_arguments_are_refused_naming_them():
    refs = [openacl.to_device(np.ones(4, np.float32)) for _ in range(4)]
    try:
        with pytest.raises(AclError) as info:
            ops.apply_fused_ema_adam(np.ones(4, np.float32), *refs, np.array([1], np.int64),
                                     mode=2)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'mode'" in info.value.message
        with pytest.raises(AclError) as info:
            ops.apply_adam_wv2(*refs[:3], None, grad=np.ones(5, np.float32),
                               step=np.array([1], np.int64))
        assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'grad'" in info.value.message
        with pytest.raises(AclError) as info:  # amsgrad needs the running maximum
            ops.apply_adam_wv2(*refs[:3], None, grad=np.ones(4, np.float32),
                               step=np.array([1], np.int64), amsgrad=True)
        assert "maxGradNormOptionalRef" in info.value.message
    finally:
        for ref in refs:
            ref.free()
