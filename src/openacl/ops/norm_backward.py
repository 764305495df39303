"""Backward normalization operators: LayerNormBackward, RmsNormGrad, BatchNormBackward,
GroupNormBackward.

Semantics are PyTorch's autograd formulas (``native_layer_norm_backward``,
``native_batch_norm_backward``, ``native_group_norm_backward``; RmsNormGrad is the gradient
of ``x * rstd * gamma``), computed from the statistics the caller passes (the forward's
mean / rstd), not recomputed. With ``g = gradOut * weight`` and ``xhat = (x - mean) * rstd``
over the normalized elements (``n`` of them):

    gradInput = rstd * (g - mean(g) - xhat * mean(g * xhat))

and the affine gradients are ``sum(gradOut * xhat)`` and ``sum(gradOut)`` over the other
axes. ``outputMask`` (three bools) says which gradients are computed; a masked-off output
may be null. Every dtype is computed in float64 and rounded once into each output.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops.call import Call, Kernel
from openacl.ops.normalization import (
    CHANNEL_AXIS,
    FLOAT32,
    NORM_DTYPES,
    _channel_input,
    _mean,
    _param_dtype,
    _param_shape,
    _rsqrt,
)
from openacl.ops.registry import register

MASK_LENGTH = 3  # outputMask: (gradInput, gradWeight, gradBias)
FLOAT64 = np.dtype(np.float64)
# gradients are computed in float64: their differences of large, nearly equal terms (g -
# mean(g) - xhat * mean(g * xhat)) lose in float32 what CANN's precision standard requires
COMPUTE = FLOAT64


def _output_mask(c: Call, name: str = "outputMask") -> tuple[bool, bool, bool]:
    mask = c[name]
    if mask is None:
        raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
    if len(mask) != MASK_LENGTH:
        raise c.fail(name, f"must hold {MASK_LENGTH} bools (input, weight, bias gradients)")
    return tuple(bool(m) for m in mask)


def _masked_out(c: Call, name: str, wanted: bool, shape, dtype: np.dtype) -> None:
    """Declare output ``name`` when its mask bit is set (a null one is then an error)."""
    if wanted:
        if c[name] is None and not c.infer:
            raise c.fail(name, "is null although outputMask asks for it",
                         ACLNN_ERR_PARAM_NULLPTR)
        c.check_out(name, shape, dtype, exact_dtype=True)


def _stat_dtype(c: Call, name: str, dtype: np.dtype) -> None:
    """A saved statistic: the input's dtype or float32 (at least the input's width)."""
    c.check_dtype(name, NORM_DTYPES)
    _param_dtype(c, name, dtype)


def normalized_grad(g: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, axes) -> np.ndarray:
    """``rstd * (g - mean(g) - xhat * mean(g * xhat))`` over ``axes`` (kept dims)."""
    return rstd * (g - _mean(g, axes) - xhat * _mean(g * xhat, axes))


# -- LayerNormBackward -------------------------------------------------------------------------
@register("LayerNormBackward",
          "gradOut: tensor, input: tensor, normalizedShape: int_array, mean: tensor, "
          "rstd: tensor, weightOptional: tensor?, biasOptional: tensor?, "
          "outputMask: bool_array = [True, True, True], gradInputOut: tensor!?, "
          "gradWeightOut: tensor!?, gradBiasOut: tensor!?")
def layer_norm_backward(c: Call) -> Kernel:
    """``torch.ops.aten.native_layer_norm_backward``: mean and rstd keep the normalized dims
    as 1; a null weight is ones; gradWeight and gradBias have the weight's dtype."""
    dtype = c.check_dtype("input", NORM_DTYPES)
    shape = c.tensor("input").shape
    c.check_dtype("gradOut", {dtype})
    if c.tensor("gradOut").shape != shape:
        raise c.fail("gradOut", f"shape must equal input's {list(shape)}")
    normalized = c["normalizedShape"]
    if normalized is None:
        raise c.fail("normalizedShape", "is null", ACLNN_ERR_PARAM_NULLPTR)
    normalized = tuple(normalized)
    if not normalized or len(normalized) > len(shape) or \
            shape[len(shape) - len(normalized):] != normalized:
        raise c.fail("normalizedShape", f"must be non-empty trailing dims of input "
                                        f"{list(shape)}")
    lead = shape[:len(shape) - len(normalized)]
    stat_shape = (*lead, *(1,) * len(normalized))
    for name in ("mean", "rstd"):
        _stat_dtype(c, name, dtype)
        if math.prod(c.tensor(name).shape) != math.prod(lead) or \
                len(c.tensor(name).shape) not in (len(lead), len(shape)):
            raise c.fail(name, f"shape must be {list(stat_shape)}")
    param_dtype = dtype
    for name in ("weightOptional", "biasOptional"):
        if c[name] is not None:
            c.check_dtype(name, NORM_DTYPES)
            _param_dtype(c, name, dtype)
            _param_shape(c, name, normalized)
            param_dtype = c.tensor(name).dtype
    mask = _output_mask(c)
    _masked_out(c, "gradInputOut", mask[0], shape, dtype)
    _masked_out(c, "gradWeightOut", mask[1], normalized, param_dtype)
    _masked_out(c, "gradBiasOut", mask[2], normalized, param_dtype)
    rows, width = math.prod(lead), math.prod(normalized)

    def kernel(v) -> None:
        dy = v.compute("gradOut", COMPUTE).reshape(rows, width)
        x = v.compute("input", COMPUTE).reshape(rows, width)
        mean = v.compute("mean", COMPUTE).reshape(rows, 1)
        rstd = v.compute("rstd", COMPUTE).reshape(rows, 1)
        xhat = (x - mean) * rstd
        if mask[0]:
            g = dy
            if v.get("weightOptional") is not None:
                g = dy * v.compute("weightOptional", COMPUTE).reshape(width)
            v.write("gradInputOut", normalized_grad(g, xhat, rstd, 1).reshape(shape))
        if mask[1]:
            v.write("gradWeightOut", (dy * xhat).sum(axis=0).reshape(normalized))
        if mask[2]:
            v.write("gradBiasOut", dy.sum(axis=0).reshape(normalized))
    return kernel


# -- RmsNormGrad --------------------------------------------------------------------------------
@register("RmsNormGrad", "dy: tensor, x: tensor, rstd: tensor, gamma: tensor, dxOut: tensor!, "
                         "dgammaOut: tensor!")
def rms_norm_grad(c: Call) -> Kernel:
    """The gradient of ``y = x * rstd * gamma`` with ``rstd = 1 / sqrt(mean(x^2) + eps)``:
    ``dx = rstd * dy * gamma - x * rstd^3 * mean(dy * gamma * x)``, ``dgamma = sum(dy * x *
    rstd)`` (float32) over the leading dims. ``rstd`` (float32) is x's leading dims, with
    or without the normalized dims kept as 1."""
    dtype = c.check_dtype("x", NORM_DTYPES)
    shape = c.tensor("x").shape
    c.check_dtype("dy", {dtype})
    if c.tensor("dy").shape != shape:
        raise c.fail("dy", f"shape must equal x's {list(shape)}")
    c.check_dtype("gamma", NORM_DTYPES)
    _param_dtype(c, "gamma", dtype)
    gamma_shape = c.tensor("gamma").shape
    if not gamma_shape or len(gamma_shape) > len(shape) or \
            shape[len(shape) - len(gamma_shape):] != gamma_shape:
        raise c.fail("gamma", f"shape must equal trailing dims of x {list(shape)}")
    lead = shape[:len(shape) - len(gamma_shape)]
    c.check_dtype("rstd", {FLOAT32})
    rstd_shape = c.tensor("rstd").shape
    if math.prod(rstd_shape) != math.prod(lead) or len(rstd_shape) not in (len(lead),
                                                                          len(shape)):
        raise c.fail("rstd", f"shape must be {list(lead)} (x's leading dims)")
    c.check_out("dxOut", shape, dtype, exact_dtype=True)
    c.check_out("dgammaOut", gamma_shape, FLOAT32, exact_dtype=True)
    rows, width = math.prod(lead), math.prod(gamma_shape)

    def kernel(v) -> None:
        dy = v.compute("dy", COMPUTE).reshape(rows, width)
        x = v.compute("x", COMPUTE).reshape(rows, width)
        rstd = v.compute("rstd", COMPUTE).reshape(rows, 1)
        g = dy * v.compute("gamma", COMPUTE).reshape(width)
        dx = rstd * g - x * (rstd * rstd * rstd) * _mean(g * x, 1)
        v.write("dxOut", dx.reshape(shape))
        v.write("dgammaOut", (dy * x * rstd).sum(axis=0).reshape(gamma_shape))
    return kernel


# -- BatchNormBackward --------------------------------------------------------------------------
@register("BatchNormBackward",
          "gradOut: tensor, input: tensor, weight: tensor?, runningMean: tensor?, "
          "runningVar: tensor?, saveMean: tensor?, saveInvstd: tensor?, "
          "training: bool = True, eps: float = 1e-05, "
          "outputMask: bool_array = [True, True, True], gradInput: tensor!?, "
          "gradWeight: tensor!?, gradBias: tensor!?")
def batch_norm_backward(c: Call) -> Kernel:
    """``torch.ops.aten.native_batch_norm_backward``: training uses saveMean / saveInvstd
    (required); inference uses runningMean / runningVar (required) with ``eps``, and then
    ``gradInput = gradOut * weight * invstd``."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    c.check_dtype("gradOut", {dtype})
    if c.tensor("gradOut").shape != shape:
        raise c.fail("gradOut", f"shape must equal input's {list(shape)}")
    training = bool(c["training"])
    needed = ("saveMean", "saveInvstd") if training else ("runningMean", "runningVar")
    for name in needed:
        if c[name] is None:
            raise c.fail(name, f"is required when training is {str(training).lower()}",
                         ACLNN_ERR_PARAM_NULLPTR)
    for name in ("weight", "runningMean", "runningVar", "saveMean", "saveInvstd"):
        if c[name] is not None:
            c.check_dtype(name, NORM_DTYPES)
            _param_dtype(c, name, dtype)
            _param_shape(c, name, (channels,))
    param_dtype = dtype if c["weight"] is None else c.tensor("weight").dtype
    mask = _output_mask(c)
    _masked_out(c, "gradInput", mask[0], shape, dtype)
    _masked_out(c, "gradWeight", mask[1], (channels,), param_dtype)
    _masked_out(c, "gradBias", mask[2], (channels,), param_dtype)
    axes = tuple(a for a in range(len(shape)) if a != CHANNEL_AXIS)
    broadcast = (channels, *(1,) * (len(shape) - 2))
    eps = c["eps"]

    def kernel(v) -> None:
        dy, x = v.compute("gradOut", COMPUTE), v.compute("input", COMPUTE)
        if training:
            mean = v.compute("saveMean", COMPUTE).reshape(broadcast)
            invstd = v.compute("saveInvstd", COMPUTE).reshape(broadcast)
        else:
            mean = v.compute("runningMean", COMPUTE).reshape(broadcast)
            invstd = _rsqrt(v.compute("runningVar", COMPUTE), eps).reshape(broadcast)
        weight = None if v.get("weight") is None else v.compute("weight", COMPUTE).reshape(
            broadcast)
        xhat = (x - mean) * invstd
        if mask[0]:
            g = dy if weight is None else dy * weight
            v.write("gradInput", normalized_grad(g, xhat, invstd, axes) if training
                    else g * invstd)
        if mask[1]:
            v.write("gradWeight", (dy * xhat).sum(axis=axes))
        if mask[2]:
            v.write("gradBias", dy.sum(axis=axes))
    return kernel


# -- GroupNormBackward --------------------------------------------------------------------------
@register("GroupNormBackward",
          "gradOut: tensor, input: tensor, mean: tensor, rstd: tensor, gamma: tensor?, "
          "N: int, C: int, HxW: int, group: int, "
          "outputMask: bool_array = [True, True, True], gradInput: tensor!?, "
          "gradGammaOut: tensor!?, gradBetaOut: tensor!?")
def group_norm_backward(c: Call) -> Kernel:
    """``torch.ops.aten.native_group_norm_backward``: mean and rstd are (N, group); a null
    gamma is ones."""
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    c.check_dtype("gradOut", {dtype})
    if c.tensor("gradOut").shape != shape:
        raise c.fail("gradOut", f"shape must equal input's {list(shape)}")
    batch, spatial, group = shape[0], math.prod(shape[2:]), c["group"]
    for name, expected in (("N", batch), ("C", channels), ("HxW", spatial)):
        if c[name] != expected:
            raise c.fail(name, f"must be {expected} for input of shape {list(shape)}")
    if group <= 0 or channels % group:
        raise c.fail("group", f"must be positive and divide C = {channels}")
    for name in ("mean", "rstd"):
        _stat_dtype(c, name, dtype)
        if c.tensor(name).numel != batch * group:
            raise c.fail(name, f"must hold N * group = {batch * group} elements")
    if c["gamma"] is not None:
        c.check_dtype("gamma", NORM_DTYPES)
        _param_dtype(c, "gamma", dtype)
        _param_shape(c, "gamma", (channels,))
    mask = _output_mask(c)
    _masked_out(c, "gradInput", mask[0], shape, dtype)
    _masked_out(c, "gradGammaOut", mask[1], (channels,), dtype)
    _masked_out(c, "gradBetaOut", mask[2], (channels,), dtype)
    per_group = channels // group

    def kernel(v) -> None:
        grouped = (batch, group, per_group, spatial)
        dy = v.compute("gradOut", COMPUTE).reshape(grouped)
        x = v.compute("input", COMPUTE).reshape(grouped)
        mean = v.compute("mean", COMPUTE).reshape(batch, group, 1, 1)
        rstd = v.compute("rstd", COMPUTE).reshape(batch, group, 1, 1)
        xhat = (x - mean) * rstd
        if mask[0]:
            g = dy
            if v.get("gamma") is not None:
                g = dy * v.compute("gamma", COMPUTE).reshape(1, group, per_group, 1)
            v.write("gradInput", normalized_grad(g, xhat, rstd, (2, 3)).reshape(shape))
        if mask[1]:
            v.write("gradGammaOut", (dy * xhat).sum(axis=(0, 3)).reshape(-1))
        if mask[2]:
            v.write("gradBetaOut", dy.sum(axis=(0, 3)).reshape(-1))
    return kernel


# -- AddLayerNormGrad, DeepNormGrad ---------------------------------------------------------------
def _row_norm_geometry(c: Call, dy: str, inputs: tuple[str, ...]):
    """Phase 1 of the fused LayerNorm gradients: ``dy`` and ``inputs`` alike, gamma their
    trailing dims, mean / rstd float32 with one value per row; returns (dtype, shape,
    gamma's shape, rows, width)."""
    dtype = c.check_dtype(dy, NORM_DTYPES)
    shape = c.tensor(dy).shape
    for name in inputs:
        c.check_dtype(name, {dtype})
        if c.tensor(name).shape != shape:
            raise c.fail(name, f"shape must equal {dy}'s {list(shape)}")
    c.check_dtype("gamma", {dtype})
    normalized = c.tensor("gamma").shape
    if not normalized or len(normalized) > len(shape) or \
            shape[len(shape) - len(normalized):] != normalized:
        raise c.fail("gamma", f"shape must equal trailing dims of {dy} {list(shape)}")
    rows = math.prod(shape[:len(shape) - len(normalized)])
    for name in ("mean", "rstd"):
        c.check_dtype(name, {FLOAT32})
        if c.tensor(name).numel != rows:
            raise c.fail(name, f"must hold one value per normalized row ({rows})")
    return dtype, shape, normalized, rows, math.prod(normalized)


def _row_norm_grads(v, x: np.ndarray, rows: int, width: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gradient at the normalized input, dgamma, dbeta) of LayerNorm rows ``x`` (rows,
    width) from dy, gamma and the saved mean / rstd."""
    dy = v.compute("dy", COMPUTE).reshape(rows, width)
    mean = v.compute("mean", COMPUTE).reshape(rows, 1)
    rstd = v.compute("rstd", COMPUTE).reshape(rows, 1)
    xhat = (x.reshape(rows, width) - mean) * rstd
    g = dy * v.compute("gamma", COMPUTE).reshape(width)
    return normalized_grad(g, xhat, rstd, 1), (dy * xhat).sum(axis=0), dy.sum(axis=0)


@register("AddLayerNormGrad",
          "dy: tensor, x1: tensor, x2: tensor, rstd: tensor, mean: tensor, gamma: tensor, "
          "dsumOptional: tensor?, dxOut: tensor!, dgammaOut: tensor!, dbetaOut: tensor!")
def add_layer_norm_grad(c: Call) -> Kernel:
    """The gradient of AddLayerNorm at ``x = x1 + x2`` (the same for x1 and x2), plus the
    gradient ``dsumOptional`` that reached ``x`` directly; dgamma / dbeta are float32."""
    optional = ("dsumOptional",) if c["dsumOptional"] is not None else ()
    dtype, shape, normalized, rows, width = _row_norm_geometry(c, "dy", ("x1", "x2", *optional))
    c.check_out("dxOut", shape, dtype, exact_dtype=True)
    c.check_out("dgammaOut", normalized, FLOAT32, exact_dtype=True)
    c.check_out("dbetaOut", normalized, FLOAT32, exact_dtype=True)

    def kernel(v) -> None:
        x = v.compute("x1", COMPUTE) + v.compute("x2", COMPUTE)
        dx, dgamma, dbeta = _row_norm_grads(v, x, rows, width)
        dx = dx.reshape(shape)
        if v.get("dsumOptional") is not None:
            dx += v.compute("dsumOptional", COMPUTE)
        v.write("dxOut", dx)
        v.write("dgammaOut", dgamma.reshape(normalized))
        v.write("dbetaOut", dbeta.reshape(normalized))
    return kernel


@register("DeepNormGrad",
          "dy: tensor, x: tensor, gx: tensor, gamma: tensor, mean: tensor, rstd: tensor, "
          "alpha: float = 0.3, dxOut: tensor!, dgxOut: tensor!, dbetaOut: tensor!, "
          "dgammaOut: tensor!")
def deep_norm_grad(c: Call) -> Kernel:
    """The gradient of DeepNorm (LayerNorm of ``alpha * x + gx``): ``dgx`` the LayerNorm
    input gradient, ``dx = alpha * dgx``; dbeta / dgamma are float32."""
    dtype, shape, normalized, rows, width = _row_norm_geometry(c, "dy", ("x", "gx"))
    c.check_out("dxOut", shape, dtype, exact_dtype=True)
    c.check_out("dgxOut", shape, dtype, exact_dtype=True)
    c.check_out("dbetaOut", normalized, FLOAT32, exact_dtype=True)
    c.check_out("dgammaOut", normalized, FLOAT32, exact_dtype=True)
    alpha = c["alpha"]

    def kernel(v) -> None:
        x = alpha * v.compute("x", COMPUTE) + v.compute("gx", COMPUTE)
        dgx, dgamma, dbeta = _row_norm_grads(v, x, rows, width)
        v.write("dxOut", (alpha * dgx).reshape(shape))
        v.write("dgxOut", dgx.reshape(shape))
        v.write("dbetaOut", dbeta.reshape(normalized))
        v.write("dgammaOut", dgamma.reshape(normalized))
    return kernel


# -- GroupNormSwishGrad ------------------------------------------------------------------------
@register("GroupNormSwishGrad",
          "dy: tensor, mean: tensor, rstd: tensor, x: tensor, gamma: tensor, beta: tensor, "
          "numGroups: int, dataFormatOptional: str? = None, swishScale: float = 1.0, "
          "dgammaIsRequire: bool = True, dbetaIsRequire: bool = True, dxOut: tensor!, "
          "dgammaOut: tensor!?, dbetaOut: tensor!?")
def group_norm_swish_grad(c: Call) -> Kernel:
    """The gradient of GroupNormSwish (``z = y * sigmoid(s * y)``, ``y = GroupNorm(x) *
    gamma + beta``) from the saved (N, numGroups) mean and rstd: the swish's derivative
    ``sig + s * y * sig * (1 - sig)`` times dy, then GroupNorm's backward."""
    dtype, shape, channels = _channel_input(c, "x", NORM_DTYPES)
    c.check_dtype("dy", {dtype})
    if c.tensor("dy").shape != shape:
        raise c.fail("dy", f"shape must equal x's {list(shape)}")
    group = c["numGroups"]
    if group <= 0 or channels % group:
        raise c.fail("numGroups", f"must be positive and divide C = {channels}")
    batch = shape[0]
    for name in ("mean", "rstd"):
        _stat_dtype(c, name, dtype)
        if c.tensor(name).numel != batch * group:
            raise c.fail(name, f"must hold N * numGroups = {batch * group} elements")
    for name in ("gamma", "beta"):
        c.check_dtype(name, NORM_DTYPES)
        _param_dtype(c, name, dtype)
        _param_shape(c, name, (channels,))
    layout = c["dataFormatOptional"]
    if layout is not None and layout not in ("NCHW", "ND", "NCL", "NCDHW"):
        raise c.fail("dataFormatOptional", "must be a layout with C at axis 1 (NCHW, ND)")
    param_dtype = c.tensor("gamma").dtype
    c.check_out("dxOut", shape, dtype, exact_dtype=True)
    wanted = (bool(c["dgammaIsRequire"]), bool(c["dbetaIsRequire"]))
    _masked_out(c, "dgammaOut", wanted[0], (channels,), param_dtype)
    _masked_out(c, "dbetaOut", wanted[1], (channels,), param_dtype)
    scale, per_group = c["swishScale"], channels // group

    def kernel(v) -> None:
        grouped = (batch, group, per_group, -1)
        per_channel = (1, group, per_group, 1)
        x = v.compute("x", COMPUTE).reshape(grouped)
        mean = v.compute("mean", COMPUTE).reshape(batch, group, 1, 1)
        rstd = v.compute("rstd", COMPUTE).reshape(batch, group, 1, 1)
        gamma = v.compute("gamma", COMPUTE).reshape(per_channel)
        xhat = (x - mean) * rstd
        y = xhat * gamma + v.compute("beta", COMPUTE).reshape(per_channel)
        gate = 1.0 / (1.0 + np.exp(-scale * y))
        dnorm = v.compute("dy", COMPUTE).reshape(grouped) * (gate + scale * y * gate *
                                                            (1.0 - gate))
        v.write("dxOut", normalized_grad(dnorm * gamma, xhat, rstd, (2, 3)).reshape(shape))
        if wanted[0]:
            v.write("dgammaOut", (dnorm * xhat).sum(axis=(0, 3)).reshape(-1))
        if wanted[1]:
            v.write("dbetaOut", dnorm.sum(axis=(0, 3)).reshape(-1))
    return kernel
