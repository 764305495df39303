"""Goldens of the activation family (CANN's activation/ operators): the elementwise
activations, softmax, the gated forms (Glu, GeGlu, SituGlu, ClippedSwiglu ...) and the
Backward operators. Each is PyTorch in float64 (the driver widens the inputs); a backward
golden is torch.autograd's gradient of the forward, so it checks the derivative, not a
transcription of CANN's formula."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from atk_driver import golden

GELU_MODES = {0: "none", 1: "tanh"}  # aclnnGeluV2 / GeGlu's approximate
FAST_GELU_COEFF = 1.702
SELU_ALPHA = 1.6732632423543772848170429916717
MASKED_SCORE = -10000.0  # what CANN's ScaledMaskedSoftmax writes at masked positions


def _mode(approximate) -> str:
    return approximate if isinstance(approximate, str) else GELU_MODES[int(approximate)]


def _halves(x: torch.Tensor, dim: int, activate_left: bool = False):
    """(activated half, linear half) of ``x`` split along ``dim``."""
    first, second = x.chunk(2, dim)
    return (first, second) if activate_left else (second, first)


def _merged(x: torch.Tensor, dim: int) -> torch.Tensor:
    """CANN's 2-d view of a SituGlu / ClippedSwiglu input: [prod(shape[:dim]), rest]."""
    dim = dim % max(x.dim(), 1)
    return x.reshape(math.prod(x.shape[:dim]), math.prod(x.shape[dim:]))


def _rounded(value: torch.Tensor, dtype) -> torch.Tensor:
    """``value`` rounded once to numpy ``dtype`` (float16, bfloat16, float32), as float64."""
    name = "bfloat16" if str(dtype) == "bfloat16" else str(dtype)
    return value.to(getattr(torch, name)).double()


def _split_shape(x: torch.Tensor, dim: int) -> list[int]:
    shape = list(x.shape)
    shape[dim % len(shape)] //= 2
    return shape


# -- elementwise --------------------------------------------------------------------------------
golden("Relu")(torch.relu)
golden("Sigmoid")(torch.sigmoid)
golden("Silu")(F.silu)
golden("Hardsigmoid")(F.hardsigmoid)
golden("Hardswish")(F.hardswish)
golden("Mish")(F.mish)
golden("Selu")(torch.selu)
golden("Erfinv")(torch.erfinv)
golden("LogSigmoid")(F.logsigmoid)


@golden("Gelu")
def gelu(x):
    return F.gelu(x, approximate="tanh")


@golden("GeluV2")
def gelu_v2(x, approximate=0):
    return F.gelu(x, approximate=_mode(approximate))


@golden("FastGelu")
def fast_gelu(x):
    return x / (1 + torch.exp(-FAST_GELU_COEFF * x))  # CANN's formula (its executor's)


@golden("SquaredRelu")
def squared_relu(x):
    return torch.relu(x) ** 2


@golden("LeakyRelu")
def leaky_relu(x, slope=0.01):
    return F.leaky_relu(x, slope)


@golden("Softplus")
def softplus(x, beta=1.0, threshold=20.0):
    return F.softplus(x, beta, threshold)


@golden("Elu", with_dtypes=True)
def elu(dtypes, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """Rounded to the output dtype (a negative input scale's exp passes its range)."""
    return _rounded(torch.ops.aten.elu(x, alpha, scale, input_scale), dtypes[0])


@golden("Celu", with_dtypes=True)
def celu(dtypes, x, alpha=1.0):
    """Rounded to the output dtype: a negative alpha's exp(x / alpha) passes float16's
    range, where the float64 golden stays finite."""
    return _rounded(F.celu(x, alpha), dtypes[0])


@golden("Swish")
def swish(x, beta=1.0):
    return x * torch.sigmoid(float(beta) * x)


@golden("Heaviside")
def heaviside(x, values):
    return torch.heaviside(x, values)


@golden("AddRelu")
def add_relu(x, other, alpha=1):
    return torch.relu(x + alpha * other)


@golden("Prelu")
def prelu(x, weight):
    return torch.prelu(x, weight.reshape(-1))


@golden("Softshrink")
def softshrink(x, lambd=0.5):
    return F.softshrink(x, lambd)


@golden("Hardshrink")
def hardshrink(x, lambd=0.5):
    return F.hardshrink(x, lambd)


@golden("Threshold")
def threshold(x, limit, value):
    return F.threshold(x, limit, value)


# -- softmax ------------------------------------------------------------------------------------
@golden("Softmax")
def softmax(x, dim):
    return torch.softmax(x, dim)


@golden("LogSoftmax")
def log_softmax(x, dim):
    return torch.log_softmax(x, dim)


@golden("ScaledMaskedSoftmax")
def scaled_masked_softmax(x, mask, scale=1.0, fix_triu_mask=False):
    return torch.softmax((x * scale).masked_fill(mask, MASKED_SCORE), -1)


# -- gated ----------------------------------------------------------------------------------------
@golden("Glu")
def glu(x, dim=-1):
    return F.glu(x, dim)


@golden("SwiGlu")
def swi_glu(x, dim=-1):
    first, second = x.chunk(2, dim)
    return F.silu(first) * second


def _ge_glu(x, dim, approximate, activate_left):
    activated, linear = _halves(x, dim, activate_left)
    activated = F.gelu(activated, approximate=_mode(approximate))
    return activated * linear, activated


@golden("GeGlu")
def ge_glu(x, dim=-1, approximate=1):
    return _ge_glu(x, dim, approximate, False)


@golden("GeGluV3")
def ge_glu_v3(x, dim=-1, approximate=1, activate_left=False):
    return _ge_glu(x, dim, approximate, activate_left)


@golden("GeluMul")
def gelu_mul(x, approximate=None):
    first, second = x.chunk(2, -1)
    return F.gelu(first, approximate=approximate or "none") * second


@golden("FatreluMul")
def fatrelu_mul(x, limit):
    first, second = x.chunk(2, -1)
    return torch.where(first < limit.reshape(()), 0.0, first) * second


def _situ(gate, up, beta, linear_beta):
    situ = beta * torch.tanh(gate / beta) * torch.sigmoid(gate)
    return situ * (linear_beta * torch.tanh(up / linear_beta) if linear_beta > 0 else up)


@golden("SituGlu")
def situ_glu(x, dim=-1, beta=1.0, linear_beta=0.0, activate_left=True):
    gate, up = _halves(_merged(x, dim), 1, activate_left)
    return _situ(gate, up, beta, linear_beta).reshape(_split_shape(x, dim))


@golden("ClippedSwiglu")
def clipped_swiglu(x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                   interleaved=True):
    merged = _merged(x, dim)
    rows = merged.shape[0]
    if group_index is not None:
        rows = int(min(group_index.clamp(min=0).sum().item(), rows))
    part = merged[:rows]
    gate, linear = (part[:, 0::2], part[:, 1::2]) if interleaved else part.chunk(2, 1)
    gate = gate.clamp(max=limit)
    result = torch.zeros(merged.shape[0], merged.shape[1] // 2, dtype=x.dtype)
    result[:rows] = gate * torch.sigmoid(alpha * gate) * (linear.clamp(-limit, limit) + bias)
    return result.reshape(_split_shape(x, dim))


# -- backward -------------------------------------------------------------------------------------
for _name in ("SigmoidBackward", "TanhBackward", "SiluBackward", "HardswishBackward",
              "HardsigmoidBackward"):  # (gradOutput, x or y): aten's own backward
    golden(_name)(getattr(torch.ops.aten, _name.replace("Backward", "_backward").lower()))
del _name


def _autograd(forward, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """d forward(x) / dx applied to ``grad``."""
    wide = x.detach().double().requires_grad_(True)
    (result,) = torch.autograd.grad(forward(wide), wide, grad.double())
    return result


@golden("GeluBackward")
def gelu_backward(grad, x):
    return torch.ops.aten.gelu_backward(grad, x)


@golden("GeluBackwardV2")
def gelu_backward_v2(grad, x, approximate="none"):
    return torch.ops.aten.gelu_backward(grad, x, approximate=approximate)


@golden("FastGeluBackward")
def fast_gelu_backward(grad, x):
    return _autograd(fast_gelu, x, grad)


@golden("SwishBackward")
def swish_backward(grad, x, beta=1.0):
    return _autograd(lambda t: swish(t, 1.0 if beta is None else beta), x, grad)


@golden("SoftplusBackward")
def softplus_backward(grad, x, beta=1.0, threshold=20.0):
    x = torch.as_tensor(x).double()  # (a 0-d bool input reaches here as a numpy bool)
    return torch.ops.aten.softplus_backward(grad, x, beta, threshold)


@golden("SoftshrinkBackward")
def softshrink_backward(grad, x, lambd=0.5):
    return torch.ops.aten.softshrink_backward(grad, x, lambd)


@golden("ThresholdBackward")
def threshold_backward(grad, x, limit):
    return torch.ops.aten.threshold_backward(grad, x, limit)


def _not_a_bool(position: int):
    """A skip for cases whose bool attribute at ``position`` is something else (a few
    LeakyReluBackward cases give selfIsResult as the list ["inf"])."""
    def skip(inputs):
        value = inputs[position] if position < len(inputs) else False
        if not isinstance(value, bool):
            return f"attribute {position} is {value!r}, not a bool: no aclnn call takes that"
        return None
    return skip


@golden("LeakyReluBackward", skip=_not_a_bool(3))
def leaky_relu_backward(grad, x, slope=0.01, self_is_result=False):
    return torch.ops.aten.leaky_relu_backward(grad, x, slope, bool(self_is_result))


@golden("EluBackward")
def elu_backward(grad, alpha, scale, input_scale, is_result, x):
    return torch.ops.aten.elu_backward(grad, alpha, scale, input_scale, is_result, x)


@golden("SeluBackward")
def selu_backward(grad, result):
    scale = 1.0507009873554804934193349852946
    return torch.ops.aten.elu_backward(grad, SELU_ALPHA, scale, 1.0, True, result)


@golden("LogSigmoidBackward")
def log_sigmoid_backward(grad, x, buffer=None):
    return grad * torch.sigmoid(-x)  # (torch's CPU kernel reads its own forward's buffer)


@golden("SoftmaxBackward")
def softmax_backward(grad, y, dim):
    return torch.ops.aten._softmax_backward_data(grad, y, dim, torch.float64)


@golden("LogSoftmaxBackward", with_dtypes=True)
def log_softmax_backward(dtypes, grad, y, dim):
    """Rounded to the output dtype: the ATK's outputs reach 1000, whose exp overflows past
    every dtype (the float64 golden is then finite where any output dtype is inf)."""
    result = torch.ops.aten._log_softmax_backward_data(grad, y, dim, torch.float64)
    return _rounded(result, dtypes[0])


@golden("PreluBackward")
def prelu_backward(grad, x, weight):
    tx = x.detach().clone().requires_grad_(True)
    tw = weight.detach().reshape(-1).clone().requires_grad_(True)
    torch.prelu(tx, tw).backward(grad.expand(x.shape))
    return tx.grad, tw.grad.reshape(weight.shape)


def _ge_glu_backward(grad, x, gelu_out, dim, approximate, activate_left):
    """CANN's (its executor's): the linear half's gradient is ``grad * gelu`` with the
    *given* gelu (the forward's outGelu), the activated half's is autograd's of gelu."""
    activated, linear = _halves(x, dim, activate_left)
    grad_activated = _autograd(lambda t: F.gelu(t, approximate=_mode(approximate)),
                               activated, grad * linear)
    parts = [grad_activated, grad * gelu_out]
    return torch.cat(parts if activate_left else parts[::-1], dim)


@golden("GeGluBackward")
def ge_glu_backward(grad, x, gelu_out, dim=-1, approximate=1):
    return _ge_glu_backward(grad, x, gelu_out, dim, approximate, False)


@golden("GeGluV3Backward")
def ge_glu_v3_backward(grad, x, gelu_out, dim=-1, approximate=1, activate_left=False):
    return _ge_glu_backward(grad, x, gelu_out, dim, approximate, activate_left)


@golden("SituGluGrad")
def situ_glu_grad(grad, x, dim=-1, beta=1.0, linear_beta=0.0, activate_left=True):
    return _autograd(lambda t: situ_glu(t, dim, beta, linear_beta, activate_left), x,
                     grad.reshape(_split_shape(x, dim)))


@golden("RReluWithNoise")
def rrelu_with_noise(x, noise, lower=0.125, upper=1 / 3, training=False, seed=0, offset=0):
    """Eval mode (every ATK case): leaky relu with slope (lower + upper) / 2. (Training
    draws from the Philox stream; tests/test_ops_activation.py checks it.)"""
    return torch.ops.aten.rrelu_with_noise(x, noise.clone(), lower, upper, bool(training))


@golden("MishBackward")
def mish_backward(grad, x):
    return _autograd(F.mish, x, grad)


@golden("HardshrinkBackward")
def hardshrink_backward(grad, x, lambd=0.5):
    return torch.ops.aten.hardshrink_backward(grad, x, max(lambd, 0.0))


@golden("GluBackward")
def glu_backward(grad, x, dim=-1):
    return torch.ops.aten.glu_backward(grad, x, dim)


@golden("SwiGluGrad")
def swi_glu_grad(grad, x, dim=-1):
    return _autograd(lambda t: swi_glu(t, dim), x, grad)


@golden("LogSigmoidForward")
def log_sigmoid_forward(x):
    return F.logsigmoid(x)  # (its buffer output is CANN's unused scratch: not compared)



@golden("ScaledMaskedSoftmaxBackward")
def scaled_masked_softmax_backward(grad, y, mask, scale=1.0, fix_triu_mask=False):
    result = torch.ops.aten._softmax_backward_data(grad, y, -1, torch.float64) * scale
    return result.masked_fill(mask, 0.0)


@golden("HardswishBackwardV2")
def hardswish_backward_v2(grad, x):
    slope = torch.where(x <= -3, 0.0, torch.where(x < 3, x / 3 + 0.5, 1.0))
    return grad * slope  # CANN's formula (at +-3 exactly it differs from torch's)


@golden("Shrink")
def shrink(x, lambd=0.5, bias=0.0):
    return torch.where(x > lambd, x - bias, torch.where(x < -lambd, x + bias, x * 0))


@golden("ClippedSwigluGrad")
def clipped_swiglu_grad(grad, x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                        interleaved=True):
    return _autograd(lambda t: clipped_swiglu(t, group_index, dim, alpha, limit, bias,
                                              interleaved), x, grad)


@golden("SwigluGroup")
def swiglu_group(x, weight=None, group_index=None, clamp_limit=-1.0):
    a, b = x.chunk(2, -1)
    if clamp_limit != -1.0:
        a, b = a.clamp(max=clamp_limit), b.clamp(-clamp_limit, clamp_limit)
    values = (F.silu(a) * b).reshape(-1, a.shape[-1])
    if weight is not None:
        values = values * weight.reshape(-1, 1)
    if group_index is not None:
        values[int(min(group_index.clamp(min=0).sum().item(), values.shape[0])):] = 0
    return values.reshape(a.shape)


@golden("HardtanhBackward")
def hardtanh_backward(grad, x, low=-1.0, high=1.0):
    return torch.where((x < low) | (x > high), 0.0, grad)  # CANN's doc: the ends count in
