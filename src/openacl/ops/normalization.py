"""Normalization operators: LayerNorm, AddLayerNorm, RmsNorm (and GemmaRmsNorm, AddRmsNorm),
BatchNorm, GroupNorm, InstanceNorm.

Semantics are aclnn's, which are PyTorch's (``native_layer_norm``, ``native_group_norm``,
``native_batch_norm``, ``instance_norm``; RmsNorm is ``x * rsqrt(mean(x^2) + eps) *
gamma``). Statistics use the biased variance; BatchNorm in training mode updates the running
variance with the unbiased one, as PyTorch does. float16/bfloat16 are computed in float32
and rounded once into each output.

BatchNorm's ``runningMean`` / ``runningVar`` are inputs CANN's kernel updates in place
(training mode). The signature language has no "input, also written" kind, so they are
declared as inputs and written through their (writable) views here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import native, promotion
from openacl.ops.call import Call, Kernel, array_module
from openacl.ops.registry import register

NORM_DTYPES = frozenset({np.dtype(np.float16), promotion.BFLOAT16, np.dtype(np.float32)})
INSTANCE_NORM_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32)})
FLOAT32 = np.dtype(np.float32)
CHANNEL_AXIS = 1  # BatchNorm / GroupNorm: (N, C, ...)
MIN_NORM_RANK, MAX_NORM_RANK = 2, 8  # BatchNorm and GroupNorm inputs
INSTANCE_NORM_RANK = 4
# LayerNorm rows up to this many elements take the BLAS/einsum moments (float32 accumulators
# are exact enough there); longer rows use numpy's pairwise sums
BLAS_ROW_LIMIT = 1 << 16
INSTANCE_NORM_FORMATS = {"NCHW": (1, (2, 3)), "NHWC": (3, (1, 2))}  # channel axis, reduced


# -- phase-1 helpers ---------------------------------------------------------------------------
def _param_dtype(c: Call, name: str, dtype: np.dtype, allow_float32: bool = True) -> None:
    """An affine parameter / statistic: the input's dtype (or float32, where CANN allows)."""
    if c[name] is None:
        return
    allowed = {dtype, FLOAT32} if allow_float32 else {dtype}
    actual = c.tensor(name).dtype
    if actual not in allowed:
        names = " or ".join(sorted(str(d) for d in allowed))
        raise c.fail(name, f"dtype {actual} must be {names} (the dtype of the input)")


def _param_shape(c: Call, name: str, shape: tuple[int, ...]) -> None:
    if c[name] is not None and c.tensor(name).shape != tuple(shape):
        raise c.fail(name, f"shape must be {list(shape)}")


def _optional(v, name: str) -> np.ndarray | None:
    return None if v.get(name) is None else v.compute(name, FLOAT32)


def _rsqrt(variance: np.ndarray, eps: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(variance + variance.dtype.type(eps))


def _mean(x: np.ndarray, axis) -> np.ndarray:
    """Mean over ``axis`` keeping dims; an empty reduction is NaN (as in PyTorch) without
    numpy's "mean of empty slice" warning."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    count = math.prod(x.shape[a] for a in axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(x, axis=axes, keepdims=True) / x.dtype.type(count)


def _moments(x: np.ndarray, axis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, centred x, biased variance) over ``axis``, keeping dims; two passes."""
    mean = _mean(x, axis)
    centred = x - mean
    return mean, centred, _mean(np.square(centred), axis)


# -- LayerNorm ------------------------------------------------------------------------------------
@register("LayerNorm", "input: tensor, normalizedShape: int_array, weightOptional: tensor?, "
                       "biasOptional: tensor?, eps: float = 1e-05, out: tensor!, "
                       "meanOutOptional: tensor!?, rstdOutOptional: tensor!?")
def layer_norm(c: Call) -> Kernel:
    """Normalize over the trailing ``normalizedShape`` dims; mean and rstd keep those dims as 1
    (``torch.ops.aten.native_layer_norm``)."""
    dtype = c.check_dtype("input", NORM_DTYPES)
    shape = c.tensor("input").shape
    normalized = c["normalizedShape"]
    if normalized is None:
        raise c.fail("normalizedShape", "is null", ACLNN_ERR_PARAM_NULLPTR)
    normalized = tuple(normalized)
    if not normalized:
        raise c.fail("normalizedShape", "must have at least one dim")
    if len(normalized) > len(shape) or shape[len(shape) - len(normalized):] != normalized:
        raise c.fail("normalizedShape", f"must equal the trailing dims of input "
                                        f"{list(shape)}")
    for name in ("weightOptional", "biasOptional"):
        _param_dtype(c, name, dtype)
        _param_shape(c, name, normalized)
    if c["weightOptional"] is not None and c["biasOptional"] is not None and \
            c.tensor("weightOptional").dtype != c.tensor("biasOptional").dtype:
        raise c.fail("biasOptional", "dtype must equal weightOptional's")
    c.check_out("out", shape, dtype, exact_dtype=True)
    lead = shape[:len(shape) - len(normalized)]
    stat_shape = (*lead, *(1,) * len(normalized))
    c.check_out("meanOutOptional", stat_shape, dtype)
    c.check_out("rstdOutOptional", stat_shape, dtype)
    rows, width = math.prod(lead), math.prod(normalized)
    eps = c["eps"]
    compute = promotion.compute_dtype(dtype)
    mean_weights = np.full(width, 1.0 / width, compute) if width else None

    def kernel(v) -> None:
        v.plan(kernel, lambda: _native_layer_norm(v, rows, width, eps) or
               functools.partial(general, v))()

    def general(v) -> None:
        x = v.compute("input", dtype).reshape(rows, width)
        target = v["out"]
        xp = array_module(x)
        direct = target.dtype == compute and target.flags.c_contiguous and x.size
        y = target.reshape(rows, width) if direct else xp.empty((rows, width), compute)
        if x.size and width <= BLAS_ROW_LIMIT and xp is np:
            mean, rstd = _row_moments_blas(x, y, mean_weights, eps)
        else:
            mean, centred, variance = _moments(x, 1)
            rstd = _rsqrt(variance, eps)
            np.multiply(centred, rstd, out=y)
        weight, bias = _optional(v, "weightOptional"), _optional(v, "biasOptional")
        if weight is not None:
            y *= weight.reshape(width)
        if bias is not None:
            y += bias.reshape(width)
        if not direct:
            v.write("out", y.reshape(shape))
        if v.get("meanOutOptional") is not None:
            v.write("meanOutOptional", mean.reshape(stat_shape))
        if v.get("rstdOutOptional") is not None:
            v.write("rstdOutOptional", rstd.reshape(stat_shape))
    return kernel


IMPL_MODES = (0, 1, 2)  # high precision, high performance, keep float16
IMPL_MODE_FLOAT16 = 2


@register("LayerNormWithImplMode",
          "input: tensor, normalizedShape: int_array, weightOptional: tensor?, "
          "biasOptional: tensor?, eps: float = 1e-05, out: tensor!, meanOutOptional: tensor!?, "
          "rstdOutOptional: tensor!?, implMode: int = 0")
def layer_norm_with_impl_mode(c: Call) -> Kernel:
    """LayerNorm with CANN's kernel choice ``implMode``: 0 high precision, 1 high
    performance, 2 float16 arithmetic (every tensor float16). On CPU all three compute in
    float32 and round once, the high-precision result."""
    mode = c["implMode"]
    if mode not in IMPL_MODES:
        raise c.fail("implMode", f"must be one of {list(IMPL_MODES)}")
    if mode == IMPL_MODE_FLOAT16:
        for name in ("input", "weightOptional", "biasOptional"):
            if c[name] is not None and c.tensor(name).dtype != np.float16:
                raise c.fail(name, "implMode 2 (float16 arithmetic) needs float16 tensors")
    return layer_norm(c)


def _native_layer_norm(v, rows: int, width: int, eps: float) -> Callable[[], Any] | None:
    """LayerNorm's plan by the C extension (``Views.plan``), for float32 host rows written
    into a float32 output apart from the input or the input itself, with float32
    parameters (a constant one of another dtype converted once); None where it does not
    apply (the numpy kernel runs). Mean and rstd go straight into their outputs where those
    are float32 host arrays, else through scratch rows copied after the call."""
    lib = native.kernels()
    x, target = v["input"], v["out"]
    if lib is None or not x.size or not native.host_float32(x, target) or \
            not native.apart_or_same(target, x):
        return None  # (a partial overlap: the numpy kernel reads x whole first)
    params = []
    for name in ("weightOptional", "biasOptional"):
        param = v.get(name)
        if param is not None and not native.host_float32(param):
            if type(param) is not np.ndarray or name not in v.constant:
                return None
            param = v.derive(("float32", name), (name,),
                             lambda param=param: np.ascontiguousarray(param, np.float32))
        params.append(param)
    statistics, copies = [], []
    for name in ("meanOutOptional", "rstdOutOptional"):
        out = v.get(name)
        if out is not None and native.host_float32(out) and \
                not np.may_share_memory(out, target) and not np.may_share_memory(out, x):
            statistics.append(out)
        else:
            scratch = np.empty(rows, np.float32)
            statistics.append(scratch)
            if out is not None:
                copies.append((name, scratch, out.shape))
    call = functools.partial(lib.layer_norm_rows, x, params[0], params[1], target,
                             statistics[0], statistics[1], width, eps)
    if not copies:
        return call

    def with_statistics() -> None:
        call()
        for name, scratch, shape in copies:
            v.write(name, scratch.reshape(shape))
    return with_statistics


def _row_moments_blas(x: np.ndarray, y: np.ndarray, mean_weights: np.ndarray, eps: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Row means (a BLAS matrix-vector product) and rstd of ``x``; leaves ``(x - mean) *
    rstd`` in ``y``. Three passes over the data, the fewest numpy allows."""
    mean = (x @ mean_weights)[:, None]
    np.subtract(x, mean, out=y)
    variance = np.einsum("ij,ij->i", y, y)[:, None]
    variance *= mean_weights[0]
    rstd = _rsqrt(variance, eps)
    y *= rstd
    return mean, rstd


# -- AddLayerNorm --------------------------------------------------------------------------------
@register("AddLayerNorm", "x1: tensor, x2: tensor, gamma: tensor, beta: tensor, "
                          "biasOptional: tensor?, epsilon: float = 1e-05, "
                          "additionalOutput: bool = False, yOut: tensor!, meanOut: tensor!, "
                          "rstdOut: tensor!, xOut: tensor!")
def add_layer_norm(c: Call) -> Kernel:
    """``x = x1 + x2 + biasOptional``, then LayerNorm of ``x`` over gamma's dims (the
    trailing ones): ``yOut = (x - mean) * rstd * gamma + beta``; meanOut and rstdOut (float32)
    keep the normalized dims as 1; ``xOut`` receives ``x`` when ``additionalOutput`` is true.
    The residual-add-then-norm step of a transformer layer, one pass where there were two."""
    dtype = c.check_dtype("x1", NORM_DTYPES)
    shape = c.tensor("x1").shape
    if not 1 <= len(shape) <= MAX_NORM_RANK:
        raise c.fail("x1", f"must have 1 to {MAX_NORM_RANK} dims")
    if c.tensor("x2").shape != shape:
        raise c.fail("x2", f"shape must equal x1's {list(shape)}")
    normalized = c.tensor("gamma").shape
    if not normalized or len(normalized) > len(shape) or \
            shape[len(shape) - len(normalized):] != normalized:
        raise c.fail("gamma", f"shape must equal trailing dims of x1 {list(shape)}")
    if c.tensor("beta").shape != normalized:
        raise c.fail("beta", f"shape must equal gamma's {list(normalized)}")
    for name in ("x2", "gamma", "beta", "biasOptional"):
        if c[name] is not None:
            c.check_dtype(name, NORM_DTYPES)
            _param_dtype(c, name, dtype, allow_float32=name in ("gamma", "beta"))
    if c["biasOptional"] is not None and c.tensor("biasOptional").shape not in (normalized,
                                                                                  shape):
        raise c.fail("biasOptional", f"shape must be gamma's {list(normalized)} or x1's "
                                     f"{list(shape)}")
    lead = shape[:len(shape) - len(normalized)]
    stat_shape = (*lead, *(1,) * len(normalized))
    c.check_out("yOut", shape, dtype, exact_dtype=True)
    c.check_out("xOut", shape, dtype, exact_dtype=True)
    c.check_out("meanOut", stat_shape, FLOAT32, exact_dtype=True)
    c.check_out("rstdOut", stat_shape, FLOAT32, exact_dtype=True)
    rows, width = math.prod(lead), math.prod(normalized)
    eps, keep_sum = c["epsilon"], bool(c["additionalOutput"])
    bias_full = c["biasOptional"] is not None and c.tensor("biasOptional").shape == shape

    def kernel(v) -> None:
        if not rows * width:
            return
        if _native_add_layer_norm(v, rows, width, eps, keep_sum):
            return
        x = v.compute("x1", FLOAT32) + v.compute("x2", FLOAT32)
        if v.get("biasOptional") is not None:
            x += v.compute("biasOptional", FLOAT32).reshape(shape if bias_full else normalized)
        if keep_sum:
            v.write("xOut", x)
        x = x.reshape(rows, width)
        if array_module(x) is np:
            y = np.empty_like(x)
            mean, rstd = _row_moments_blas(x, y, np.full(width, 1.0 / width, FLOAT32), eps)
        else:  # a device array: its own reductions
            mean, centred, variance = _moments(x, 1)
            rstd = _rsqrt(variance, eps)
            y = centred * rstd
        y *= v.compute("gamma", FLOAT32).reshape(width)
        y += v.compute("beta", FLOAT32).reshape(width)
        v.write("yOut", y.reshape(shape))
        v.write("meanOut", mean.reshape(stat_shape))
        v.write("rstdOut", rstd.reshape(stat_shape))
    return kernel


def _native_add_layer_norm(v, rows: int, width: int, eps: float, keep_sum: bool) -> bool:
    """AddLayerNorm by the C kernels: float32 host tensors, outputs apart from the inputs
    or the very same; False where that does not hold (the numpy kernel runs)."""
    lib = native.kernels()
    names = ("x1", "x2", "gamma", "beta", "yOut", "meanOut", "rstdOut") + (
        ("biasOptional",) if v.get("biasOptional") is not None else ()) + (
        ("xOut",) if keep_sum else ())
    arrays = {name: v[name] for name in names}
    if lib is None or not native.host_float32(*arrays.values()):
        return False
    for out in ("yOut", "xOut") if keep_sum else ("yOut",):
        for source in ("x1", "x2", "biasOptional"):
            if source in arrays and not native.apart_or_same(arrays[out], arrays[source]):
                return False
    lib.add_layer_norm_rows(arrays["x1"], arrays["x2"], arrays.get("biasOptional"),
                            arrays["gamma"], arrays["beta"], arrays["yOut"],
                            arrays.get("xOut"), arrays["meanOut"], arrays["rstdOut"], width,
                            eps)
    return True


# -- RmsNorm ----------------------------------------------------------------------------------
def _rms_geometry(c: Call, x: str, gamma: str) -> tuple[np.dtype, tuple[int, ...], int, int,
                                                         tuple[int, ...]]:
    """Phase 1 shared by the RmsNorm family: ``x`` and ``gamma`` (its trailing dims, the
    dtype of ``x`` or float32); returns (dtype, shape, rows, width, rstd shape)."""
    dtype = c.check_dtype(x, NORM_DTYPES)
    c.check_dtype(gamma, NORM_DTYPES)
    _param_dtype(c, gamma, dtype)
    shape, gamma_shape = c.tensor(x).shape, c.tensor(gamma).shape
    if not gamma_shape or len(gamma_shape) > len(shape) or \
            shape[len(shape) - len(gamma_shape):] != gamma_shape:
        raise c.fail(gamma, f"shape must equal trailing dims of {x} {list(shape)}")
    lead = shape[:len(shape) - len(gamma_shape)]
    stat_shape = (*lead, *(1,) * len(gamma_shape))
    return dtype, shape, math.prod(lead), math.prod(gamma_shape), stat_shape


def _rms_normalized(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(``x * rstd``, rstd) of (rows, width) ``x``: ``rstd = 1 / sqrt(mean(x^2) + eps)``."""
    rstd = _rsqrt(_mean(np.square(x), 1), eps)
    return x * rstd, rstd


@register("RmsNorm", "x: tensor, gamma: tensor, epsilon: float = 1e-06, yOut: tensor!, "
                     "rstdOut: tensor!")
def rms_norm(c: Call) -> Kernel:
    """``x * rsqrt(mean(x^2 over gamma's dims) + epsilon) * gamma``; rstdOut is float32 with
    gamma's dims kept as 1."""
    return _rms_family(c, "x", gamma_offset=0.0)


@register("GemmaRmsNorm", "x: tensor, gamma: tensor, epsilon: float = 1e-06, yOut: tensor!, "
                          "rstdOut: tensor!")
def gemma_rms_norm(c: Call) -> Kernel:
    """RmsNorm scaled by ``1 + gamma`` (Gemma's parametrisation of the weight)."""
    return _rms_family(c, "x", gamma_offset=1.0)


@register("AddRmsNorm", "x1: tensor, x2: tensor, gamma: tensor, epsilon: float = 1e-06, "
                        "yOut: tensor!, rstdOut: tensor!, xOut: tensor!")
def add_rms_norm(c: Call) -> Kernel:
    """``x = x1 + x2`` (written to ``xOut``), then RmsNorm of ``x`` with ``gamma``: the
    residual-add-then-norm step of a transformer layer in one operator."""
    if c.tensor("x2").dtype != c.tensor("x1").dtype:
        raise c.fail("x2", f"dtype must equal x1's {c.tensor('x1').dtype}")
    if c.tensor("x2").shape != c.tensor("x1").shape:
        raise c.fail("x2", f"shape must equal x1's {list(c.tensor('x1').shape)}")
    return _rms_family(c, "x1", gamma_offset=0.0, addend="x2")


def _rms_family(c: Call, x_name: str, gamma_offset: float, addend: str | None = None
                ) -> Kernel:
    """RmsNorm, GemmaRmsNorm (``gamma_offset`` 1) and AddRmsNorm (``addend`` added first)."""
    dtype, shape, rows, width, stat_shape = _rms_geometry(c, x_name, "gamma")
    if addend is not None and not c["epsilon"] >= 0:  # (AddRmsNorm's doc requires it)
        raise c.fail("epsilon", "must be >= 0")
    c.check_out("yOut", shape, dtype, exact_dtype=True)
    c.check_out("rstdOut", stat_shape, FLOAT32, exact_dtype=True)
    if addend is not None:
        c.check_out("xOut", shape, dtype, exact_dtype=True)
    eps = c["epsilon"]

    def kernel(v) -> None:
        x = v.compute(x_name, dtype)
        if addend is not None:
            x = x + v.compute(addend, dtype)
            v.write("xOut", x)
        y, rstd = _rms_normalized(x.reshape(rows, width), eps)
        gamma = v.compute("gamma", FLOAT32).reshape(width)
        if gamma_offset:
            gamma = gamma + FLOAT32.type(gamma_offset)
        v.write("yOut", (y * gamma).reshape(shape))
        v.write("rstdOut", rstd.reshape(stat_shape))
    return kernel


# -- BatchNorm -------------------------------------------------------------------------------
def _channel_input(c: Call, name: str, supported) -> tuple[np.dtype, tuple[int, ...], int]:
    dtype = c.check_dtype(name, supported)
    shape = c.tensor(name).shape
    if not MIN_NORM_RANK <= len(shape) <= MAX_NORM_RANK:
        raise c.fail(name, f"must have {MIN_NORM_RANK} to {MAX_NORM_RANK} dims, got "
                           f"{len(shape)}")
    return dtype, shape, shape[CHANNEL_AXIS]


@register("BatchNorm", "input: tensor, weight: tensor?, bias: tensor?, runningMean: tensor?, "
                       "runningVar: tensor?, training: bool = False, momentum: float = 0.1, "
                       "eps: float = 1e-05, output: tensor!, saveMean: tensor!?, "
                       "saveInvstd: tensor!?")
def batch_norm(c: Call) -> Kernel:
    """Batch normalization over every axis but 1 (``torch.ops.aten.native_batch_norm``).

    Inference (``training`` false) normalizes with ``runningMean`` / ``runningVar`` (both
    required) and leaves ``saveMean`` / ``saveInvstd`` alone. Training normalizes with the
    batch statistics, writes them to ``saveMean`` and ``saveInvstd`` (1 / sqrt(var + eps))
    and, when given, updates the running statistics in place with ``momentum``.
    """
    dtype, shape, channels = _channel_input(c, "input", NORM_DTYPES)
    for name in ("weight", "bias", "runningMean", "runningVar"):
        if c[name] is not None:
            c.check_dtype(name, NORM_DTYPES)
        _param_dtype(c, name, dtype)
        _param_shape(c, name, (channels,))
    training = c["training"]
    if not training:
        for name in ("runningMean", "runningVar"):
            if c[name] is None:
                raise c.fail(name, "is required when training is false",
                             ACLNN_ERR_PARAM_NULLPTR)
    c.check_out("output", shape, dtype, exact_dtype=True)
    per_channel = math.prod(shape) // channels if channels else 0
    if training:
        if per_channel <= 1 and math.prod(shape):
            raise c.fail("input", "training needs more than one value per channel")
        c.check_out("saveMean", (channels,), dtype)
        c.check_out("saveInvstd", (channels,), dtype)
    momentum, eps = c["momentum"], c["eps"]
    reduce_axes = tuple(a for a in range(len(shape)) if a != CHANNEL_AXIS)
    broadcast = (channels, *(1,) * (len(shape) - 2))

    def kernel(v) -> None:
        x = v.compute("input", dtype)
        if training:
            mean, centred, variance = _moments(x, reduce_axes)
            mean, variance = mean.reshape(channels), variance.reshape(channels)
            invstd = _rsqrt(variance, eps)
            y = centred * invstd.reshape(broadcast)
            _update_running(v, mean, variance, per_channel, momentum)
            if v.get("saveMean") is not None:
                v.write("saveMean", mean)
            if v.get("saveInvstd") is not None:
                v.write("saveInvstd", invstd)
        else:
            mean, scale, shift = v.derive(
                ("inference affine",), tuple(n for n in STATISTICS if v.get(n) is not None),
                lambda: _inference_affine(v, eps, broadcast))
            out = v["output"]
            if type(out) is np.ndarray and type(x) is np.ndarray and \
                    out.dtype == x.dtype == FLOAT32 and out.shape == x.shape:
                # (x - mean) * (invstd * weight) + bias in three passes into the output
                # (a model's BatchNorm after an activation, which conversion cannot fold)
                np.subtract(x, mean, out=out)
                np.multiply(out, scale, out=out)
                if shift is not None:
                    np.add(out, shift, out=out)
                return
            y = (x - mean) * scale
            if shift is not None:
                y += shift
            v.write("output", y)
            return
        weight, bias = _optional(v, "weight"), _optional(v, "bias")
        if weight is not None:
            y *= weight.reshape(broadcast)
        if bias is not None:
            y += bias.reshape(broadcast)
        v.write("output", y)
    return kernel


STATISTICS = ("runningMean", "runningVar", "weight", "bias")  # inference's parameters


def _inference_affine(v, eps: float, broadcast: tuple[int, ...]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Inference BatchNorm's per-channel (mean, invstd * weight, bias), float32, shaped to
    broadcast over the input (kept while the parameters are a model's constants)."""
    mean = v.compute("runningMean", FLOAT32)
    scale = _rsqrt(v.compute("runningVar", FLOAT32), eps)
    weight, bias = _optional(v, "weight"), _optional(v, "bias")
    if weight is not None:
        scale = scale * weight
    return (mean.reshape(broadcast), scale.reshape(broadcast),
            None if bias is None else bias.reshape(broadcast))


def _update_running(v, mean: np.ndarray, variance: np.ndarray, count: int,
                    momentum: float) -> None:
    """PyTorch's running-statistics update: the variance enters unbiased."""
    for name, batch in (("runningMean", mean),
                        ("runningVar", variance * (count / max(count - 1, 1)))):
        target = v.get(name)
        if target is not None:
            updated = (1 - momentum) * target.astype(FLOAT32) + momentum * batch
            np.copyto(target, updated, casting="unsafe")


# -- GroupNorm -------------------------------------------------------------------------------
@register("GroupNorm", "self: tensor, gamma: tensor, beta: tensor, N: int, C: int, HxW: int, "
                       "group: int, eps: float = 1e-05, out: tensor!, meanOut: tensor!, "
                       "rstdOut: tensor!")
def group_norm(c: Call) -> Kernel:
    """``torch.ops.aten.native_group_norm``: mean and rstd of shape (N, group)."""
    dtype, shape, channels = _channel_input(c, "self", NORM_DTYPES)
    batch, spatial, group = shape[0], math.prod(shape[2:]), c["group"]
    for name, expected in (("N", batch), ("C", channels), ("HxW", spatial)):
        if c[name] != expected:
            raise c.fail(name, f"must be {expected} for self of shape {list(shape)}")
    if group <= 0:
        raise c.fail("group", "must be positive")
    if channels % group:
        raise c.fail("group", f"must divide C = {channels}")
    if not c["eps"] > 0:
        raise c.fail("eps", "must be positive")
    for name in ("gamma", "beta"):
        c.check_dtype(name, {dtype})
        if c.tensor(name).shape != (channels,):
            raise c.fail(name, f"must be 1-D with C = {channels} elements")
    c.check_out("out", shape, dtype, exact_dtype=True)
    c.check_out("meanOut", (batch, group), dtype, exact_dtype=True)
    c.check_out("rstdOut", (batch, group), dtype, exact_dtype=True)
    eps = c["eps"]

    def kernel(v) -> None:
        y, mean, rstd = group_norm_values(v, "self", dtype, shape, group, eps)
        v.write("out", y.reshape(shape))
        v.write("meanOut", mean)
        v.write("rstdOut", rstd)
    return kernel


def group_norm_values(v, name: str, dtype: np.dtype, shape, group: int, eps: float,
                      gamma: str | None = "gamma", beta: str | None = "beta"
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y (N, C, spatial), mean (N, group), rstd (N, group)) of GroupNorm over input
    ``name``; a null ``gamma`` / ``beta`` (or None) is ones / zeros."""
    batch, channels, spatial = shape[0], shape[CHANNEL_AXIS], math.prod(shape[2:])
    x = v.compute(name, dtype).reshape(batch, group, channels // group * spatial)
    mean, centred, variance = _moments(x, 2)
    rstd = _rsqrt(variance, eps)
    y = (centred * rstd).reshape(batch, channels, spatial)
    if gamma is not None and v.get(gamma) is not None:
        y *= v.compute(gamma, FLOAT32).reshape(channels, 1)
    if beta is not None and v.get(beta) is not None:
        y += v.compute(beta, FLOAT32).reshape(channels, 1)
    return y, mean.reshape(batch, group), rstd.reshape(batch, group)


# -- InstanceNorm --------------------------------------------------------------------------------
@register("InstanceNorm", "x: tensor, gamma: tensor, beta: tensor, dataFormat: str = 'NCHW', "
                          "eps: float = 1e-05, y: tensor!, mean: tensor!, variance: tensor!")
def instance_norm(c: Call) -> Kernel:
    """Normalize each (sample, channel) over H and W (``torch.nn.functional.instance_norm``);
    ``mean`` and ``variance`` (biased) keep the reduced dims as 1."""
    dtype = c.check_dtype("x", INSTANCE_NORM_DTYPES)
    shape = c.tensor("x").shape
    if len(shape) != INSTANCE_NORM_RANK:
        raise c.fail("x", f"must be 4-D, got {len(shape)}-D")
    data_format = c["dataFormat"]
    if data_format not in INSTANCE_NORM_FORMATS:
        raise c.fail("dataFormat", f"must be one of {sorted(INSTANCE_NORM_FORMATS)}")
    channel_axis, reduce_axes = INSTANCE_NORM_FORMATS[data_format]
    channels = shape[channel_axis]
    for name in ("gamma", "beta"):
        c.check_dtype(name, {dtype})
        _param_shape(c, name, (channels,))
    c.check_out("y", shape, dtype, exact_dtype=True)
    stat_shape = tuple(1 if a in reduce_axes else d for a, d in enumerate(shape))
    c.check_out("mean", stat_shape, dtype, exact_dtype=True)
    c.check_out("variance", stat_shape, dtype, exact_dtype=True)
    broadcast = tuple(channels if a == channel_axis else 1 for a in range(len(shape)))
    eps = c["eps"]

    def kernel(v) -> None:
        mean, centred, variance = _moments(v.compute("x", dtype), reduce_axes)
        y = centred * _rsqrt(variance, eps)
        y = y * v.compute("gamma", FLOAT32).reshape(broadcast) + \
            v.compute("beta", FLOAT32).reshape(broadcast)
        v.write("y", y)
        v.write("mean", mean)
        v.write("variance", variance)
    return kernel
