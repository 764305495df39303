"""Normalization operators against PyTorch CPU, with CANN's precision standard."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

NORM_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]
FLOAT32 = np.dtype(np.float32)


# every test on both kernel implementations: the C extension's and numpy's
pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _data(shape, dtype, seed=0, low=-4.0, high=4.0):
    return random_array(shape, dtype, np.random.default_rng(seed), low, high)


def _torch_or_none(array):
    return None if array is None else to_torch(array)


# -- LayerNorm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                              ((5, 6), (5, 6)), ((2, 3, 2, 5), (5,))], ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_layer_norm_matches_native_layer_norm(shape, normalized, affine, dtype):
    x = _data(shape, dtype, 1)
    weight = _data(normalized, dtype, 2) if affine != "none" else None
    bias = _data(normalized, dtype, 3) if affine == "both" else None
    golden = torch.ops.aten.native_layer_norm(to_torch(x), list(normalized),
                                              _torch_or_none(weight), _torch_or_none(bias), 1e-5)
    result = openacl.ops.layer_norm(_dev(x), list(normalized),
                                    None if weight is None else _dev(weight),
                                    None if bias is None else _dev(bias), 1e-5)
    for got, want, name in zip(result, golden, ("out", "mean", "rstd"), strict=True):
        assert_close(got.numpy(), from_torch(want), f"layer_norm {name} {dtype}")


def test_layer_norm_float32_affine_with_half_input_and_optional_outputs_absent():
    x = _data((3, 10), np.float16, 4)
    weight, bias = _data((10,), np.float32, 5), _data((10,), np.float32, 6)
    golden = F.layer_norm(to_torch(x).float(), (10,), to_torch(weight), to_torch(bias), 1e-3)
    out = openacl.empty((3, 10), np.float16)
    source, w, b = _dev(x), _dev(weight), _dev(bias)
    ws, exe = aclnn.layer_norm_get_workspace_size(source, [10], w, b, 1e-3, out, None, None)
    aclnn.layer_norm(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(golden.half()))


def test_layer_norm_long_rows_take_pairwise_sums():
    from openacl.ops.normalization import BLAS_ROW_LIMIT
    x = _data((2, BLAS_ROW_LIMIT + 8), np.float32, 29, -3, 5)
    golden = torch.ops.aten.native_layer_norm(to_torch(x), [x.shape[1]], None, None, 1e-5)
    result = openacl.ops.layer_norm(_dev(x), [x.shape[1]], None, None, 1e-5)
    for got, want in zip(result, golden, strict=True):
        assert_close(got.numpy(), from_torch(want))


# -- AddLayerNorm -------------------------------------------------------------------------------
def _add_layer_norm_golden(x1, x2, gamma, beta, bias, eps):
    """float64 torch: (y, mean, rstd, x) with x = x1 + x2 + bias."""
    x = torch.from_numpy(np.asarray(x1, np.float64)) + torch.from_numpy(
        np.asarray(x2, np.float64))
    if bias is not None:
        x = x + torch.from_numpy(np.asarray(bias, np.float64))
    y, mean, rstd = torch.ops.aten.native_layer_norm(
        x, list(gamma.shape), torch.from_numpy(np.asarray(gamma, np.float64)),
        torch.from_numpy(np.asarray(beta, np.float64)), eps)
    return y.numpy(), mean.numpy(), rstd.numpy(), x.numpy()


@pytest.mark.parametrize("shape,normalized", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                              ((7,), (7,)), ((2, 5, 384), (384,))], ids=str)
@pytest.mark.parametrize("bias", ["none", "row", "full"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=str)
def test_add_layer_norm_matches_torch(shape, normalized, bias, dtype):
    x1, x2 = _data(shape, dtype, 41), _data(shape, dtype, 42)
    gamma, beta = _data(normalized, dtype, 43), _data(normalized, dtype, 44)
    b = None if bias == "none" else _data(normalized if bias == "row" else shape, dtype, 45)
    y, mean, rstd, x = _add_layer_norm_golden(x1, x2, gamma, beta, b, 1e-5)
    result = openacl.ops.add_layer_norm(_dev(x1), _dev(x2), _dev(gamma), _dev(beta),
                                        None if b is None else _dev(b), 1e-5, True)
    dtype = np.dtype(dtype)
    for got, want, name in ((result[0], y.astype(dtype), "y"), (result[3], x.astype(dtype), "x"),
                            (result[1], mean.astype(np.float32), "mean"),
                            (result[2], rstd.astype(np.float32), "rstd")):
        assert_close(got.numpy(), want, f"add_layer_norm {name} {dtype} {bias}")


def test_add_layer_norm_in_place_and_x_out_untouched_without_additional_output():
    x1, x2 = _data((6, 32), np.float32, 46), _data((6, 32), np.float32, 47)
    gamma, beta = _data((32,), np.float32, 48), _data((32,), np.float32, 49)
    y, mean, rstd, _ = _add_layer_norm_golden(x1, x2, gamma, beta, None, 1e-6)
    first, second, g, b = _dev(x1), _dev(x2), _dev(gamma), _dev(beta)
    mean_out, rstd_out = openacl.empty((6, 1), np.float32), openacl.empty((6, 1), np.float32)
    x_out = openacl.to_device(np.full((6, 32), 7.0, np.float32))
    ws, exe = aclnn.add_layer_norm_get_workspace_size(
        first, second, g, b, None, 1e-6, False, first, mean_out, rstd_out,
        x_out)  # yOut is x1 itself
    aclnn.add_layer_norm(0, ws, exe, 0)
    assert_close(first.numpy(), y.astype(np.float32), "in place")
    assert_close(mean_out.numpy(), mean.astype(np.float32), "mean")
    assert (x_out.numpy() == 7.0).all()  # additionalOutput false: xOut not written


def test_add_layer_norm_errors():
    x = _dev(np.ones((2, 3, 4), np.float32))
    g = _dev(np.ones(4, np.float32))
    out, x_out = openacl.empty((2, 3, 4), np.float32), openacl.empty((2, 3, 4), np.float32)
    stat = openacl.empty((2, 3, 1), np.float32)
    phase1 = aclnn.add_layer_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "x2", phase1, x, None, g, g, None, 1e-5, False, out, stat,
            stat, x_out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "xOut", phase1, x, x, g, g, None, 1e-5, False, out, stat,
            stat, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "x2", phase1, x, _dev(np.ones((2, 3, 5), np.float32)), g,
            g, None, 1e-5, False, out, stat, stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, x, _dev(np.ones(3, np.float32)),
            _dev(np.ones(3, np.float32)), None, 1e-5, False, out, stat, stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "beta", phase1, x, x, g, _dev(np.ones((1, 4), np.float32)),
            None, 1e-5, False, out, stat, stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "biasOptional", phase1, x, x, g, g,
            _dev(np.ones((3, 4), np.float32)), 1e-5, False, out, stat, stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "x1", phase1, _dev(np.ones((2, 4), np.float64)),
            _dev(np.ones((2, 4), np.float64)), g, g, None, 1e-5, False,
            openacl.empty((2, 4), np.float64), openacl.empty((2, 1), np.float32),
            openacl.empty((2, 1), np.float32), openacl.empty((2, 4), np.float64))
    _expect(ACLNN_ERR_PARAM_INVALID, "x2", phase1, x, _dev(np.ones((2, 3, 4), np.float16)), g,
            g, None, 1e-5, False, out, stat, stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "meanOut", phase1, x, x, g, g, None, 1e-5, False, out,
            openacl.empty((2, 3), np.float32), stat, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "rstdOut", phase1, x, x, g, g, None, 1e-5, False, out,
            stat, openacl.empty((2, 3, 1), np.float16), x_out)


# -- RmsNorm -----------------------------------------------------------------------------------
def _rms_golden(x, gamma, eps):
    xf = to_torch(x).float()
    dims = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rstd = torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + eps)
    y = xf * rstd * to_torch(gamma).float()
    return from_torch(y.to(to_torch(x).dtype)), from_torch(rstd)


@pytest.mark.parametrize("shape,gamma_shape", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                               ((7,), (7,))], ids=str)
@pytest.mark.parametrize("dtypes", [(np.float16, np.float16), (BF16, BF16),
                                    (np.float32, np.float32), (np.float16, np.float32),
                                    (BF16, np.float32)], ids=str)
def test_rms_norm_matches_reference(shape, gamma_shape, dtypes):
    x = _data(shape, dtypes[0], 7)
    gamma = _data(gamma_shape, dtypes[1], 8)
    y, rstd = openacl.ops.rms_norm(_dev(x), _dev(gamma), 1e-6)
    golden_y, golden_rstd = _rms_golden(x, gamma, 1e-6)
    assert_close(y.numpy(), golden_y)
    assert_close(rstd.numpy(), golden_rstd)
    if dtypes[0] == dtypes[1] == np.float32:  # and PyTorch's own rms_norm agrees
        assert_close(y.numpy(), from_torch(F.rms_norm(to_torch(x), gamma_shape,
                                                      to_torch(gamma), 1e-6)))


# -- BatchNorm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 4), (2, 3, 2, 2, 3)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_batch_norm_inference_matches_torch(shape, affine, dtype):
    channels = shape[1]
    x = _data(shape, dtype, 9)
    mean = _data((channels,), dtype, 10, -1, 1)
    var = _data((channels,), dtype, 11, 0.5, 2)
    weight = _data((channels,), dtype, 12) if affine else None
    bias = _data((channels,), dtype, 13) if affine else None
    golden = F.batch_norm(to_torch(x).float(), to_torch(mean).float(), to_torch(var).float(),
                          None if weight is None else to_torch(weight).float(),
                          None if bias is None else to_torch(bias).float(), False, 0.1, 1e-5)
    result = openacl.ops.batch_norm(_dev(x), None if weight is None else _dev(weight),
                                    None if bias is None else _dev(bias), _dev(mean),
                                    _dev(var), False, 0.1, 1e-5)
    assert_close(result.numpy(), from_torch(golden.to(to_torch(x).dtype)))


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(np.float32)], ids=str)
def test_batch_norm_training_updates_running_stats(dtype):
    x = _data((4, 3, 5, 5), dtype, 14)
    weight, bias = _data((3,), dtype, 15), _data((3,), dtype, 16)
    running_mean = _data((3,), np.float32, 17, -1, 1)
    running_var = _data((3,), np.float32, 18, 0.5, 2)
    t_mean, t_var = to_torch(running_mean), to_torch(running_var)
    golden = torch.ops.aten.native_batch_norm(to_torch(x).float(), to_torch(weight).float(),
                                              to_torch(bias).float(), t_mean, t_var, True, 0.3,
                                              1e-5)
    rm, rv = _dev(running_mean), _dev(running_var)
    out, save_mean, save_invstd = openacl.ops.batch_norm(_dev(x), _dev(weight), _dev(bias), rm,
                                                         rv, True, 0.3, 1e-5)
    assert_close(out.numpy(), from_torch(golden[0]).astype(dtype))
    assert_close(save_mean.numpy(), from_torch(golden[1]).astype(dtype))
    assert_close(save_invstd.numpy(), from_torch(golden[2]).astype(dtype))
    assert_close(rm.numpy(), from_torch(t_mean))
    assert_close(rv.numpy(), from_torch(t_var))


# -- GroupNorm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,group", [((2, 6, 4, 4), 3), ((3, 4), 2), ((2, 8, 3), 8),
                                         ((2, 6, 2, 2, 2), 1)], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_group_norm_matches_native_group_norm(shape, group, dtype):
    n, c = shape[:2]
    hxw = int(np.prod(shape[2:]))
    x = _data(shape, dtype, 19)
    gamma, beta = _data((c,), dtype, 20), _data((c,), dtype, 21)
    golden = torch.ops.aten.native_group_norm(to_torch(x), to_torch(gamma), to_torch(beta), n,
                                              c, hxw, group, 1e-5)
    result = openacl.ops.group_norm(_dev(x), _dev(gamma), _dev(beta), n, c, hxw, group, 1e-5)
    for got, want, name in zip(result, golden, ("out", "mean", "rstd"), strict=True):
        assert_close(got.numpy(), from_torch(want), f"group_norm {name} {dtype}")


# -- InstanceNorm ------------------------------------------------------------------------------
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(np.float32)], ids=str)
def test_instance_norm_matches_torch(data_format, dtype):
    nchw = _data((2, 3, 4, 5), dtype, 22)
    x = nchw if data_format == "NCHW" else np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    gamma, beta = _data((3,), dtype, 23), _data((3,), dtype, 24)
    t = to_torch(nchw).float()
    golden = F.instance_norm(t, weight=to_torch(gamma).float(), bias=to_torch(beta).float(),
                             eps=1e-5)
    mean = t.mean((2, 3), keepdim=True)
    var = t.var((2, 3), unbiased=False, keepdim=True)
    y, got_mean, got_var = openacl.ops.instance_norm(_dev(x), _dev(gamma), _dev(beta),
                                                     data_format, 1e-5)
    if data_format == "NHWC":
        golden, mean, var = (g.permute(0, 2, 3, 1) for g in (golden, mean, var))
    for got, want in ((y, golden), (got_mean, mean), (got_var, var)):
        assert_close(got.numpy(), from_torch(want.to(to_torch(x).dtype)))


# -- non-contiguous input and output ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_input(kind):
    x = _data((2, 4, 6), np.float32, 25)
    t = to_torch(x)
    source = strided(x, kind)  # kept referenced until the results were read
    gamma = _data((6,), np.float32, 26)
    out, mean, rstd = openacl.ops.layer_norm(source, [6], None, None, 1e-5)
    golden = torch.ops.aten.native_layer_norm(t, [6], None, None, 1e-5)
    assert_close(out.numpy(), from_torch(golden[0]))
    assert_close(rstd.numpy(), from_torch(golden[2]))
    y, _ = openacl.ops.rms_norm(source, _dev(gamma), 1e-6)
    assert_close(y.numpy(), _rms_golden(x, gamma, 1e-6)[0])
    channel = _data((4,), np.float32, 27)
    golden = torch.ops.aten.native_group_norm(t, to_torch(channel), to_torch(channel), 2, 4, 6,
                                              2, 1e-5)
    result = openacl.ops.group_norm(source, _dev(channel), _dev(channel), 2, 4, 6, 2, 1e-5)
    assert_close(result[0].numpy(), from_torch(golden[0]))
    var = np.abs(channel) + 0.5
    golden = F.batch_norm(t, to_torch(channel), to_torch(var), None, None, False, 0.1, 1e-5)
    assert_close(openacl.ops.batch_norm(source, None, None, _dev(channel), _dev(var), False, 0.1,
                                        1e-5).numpy(), from_torch(golden))


def test_non_contiguous_output():
    x = _data((3, 5), np.float32, 28)
    out = strided(np.zeros((3, 5), np.float32), "transpose")
    source = _dev(x)
    ws, exe = aclnn.layer_norm_get_workspace_size(source, [5], None, None, 1e-5, out, None, None)
    aclnn.layer_norm(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(F.layer_norm(to_torch(x), (5,))))
    out = strided(np.zeros((3, 5), np.float32), "transpose")
    rstd = strided(np.zeros((3, 1), np.float32), "step")
    source, gamma = _dev(x), _dev(np.ones(5, np.float32))
    ws, exe = aclnn.rms_norm_get_workspace_size(source, gamma, 1e-6, out, rstd)
    aclnn.rms_norm(0, ws, exe, 0)
    golden_y, golden_rstd = _rms_golden(x, np.ones(5, np.float32), 1e-6)
    assert_close(out.numpy(), golden_y)
    assert_close(rstd.numpy(), golden_rstd)


# -- phase-1 errors ---------------------------------------------------------------------------
def _expect(code, argument, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


def test_layer_norm_errors():
    x = _dev(np.ones((2, 3, 4), np.float32))
    out = openacl.empty((2, 3, 4), np.float32)
    stat = openacl.empty((2, 3, 1), np.float32)
    phase1 = aclnn.layer_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "input", phase1, None, [4], None, None, 1e-5, out, None,
            None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "normalizedShape", phase1, x, None, None, None, 1e-5, out,
            None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "out", phase1, x, [4], None, None, 1e-5, None, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "input", phase1, _dev(np.ones((2, 4), np.float64)), [4],
            None, None, 1e-5, openacl.empty((2, 4), np.float64), None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "normalizedShape", phase1, x, [], None, None, 1e-5, out,
            None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "normalizedShape", phase1, x, [3], None, None, 1e-5, out,
            None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "normalizedShape", phase1, x, [1, 2, 3, 4], None, None,
            1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "weightOptional", phase1, x, [4],
            _dev(np.ones(3, np.float32)), None, 1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "biasOptional", phase1, x, [4], None,
            _dev(np.ones(4, np.int32)), 1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [4], None, None, 1e-5,
            openacl.empty((2, 3, 4), np.float16), None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "meanOutOptional", phase1, x, [4], None, None, 1e-5, out,
            openacl.empty((2, 3), np.float32), stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "eps", phase1, x, [4], None, None, "small", out, None,
            None)


def test_rms_norm_errors():
    x = _dev(np.ones((2, 4), np.float16))
    gamma = _dev(np.ones(4, np.float16))
    y, rstd = openacl.empty((2, 4), np.float16), openacl.empty((2, 1), np.float32)
    phase1 = aclnn.rms_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "x", phase1, None, gamma, 1e-6, y, rstd)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "gamma", phase1, x, None, 1e-6, y, rstd)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "rstdOut", phase1, x, gamma, 1e-6, y, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "x", phase1, _dev(np.ones((2, 4), np.int32)), gamma, 1e-6,
            y, rstd)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, _dev(np.ones(4, BF16)), 1e-6, y, rstd)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, _dev(np.ones(3, np.float16)), 1e-6, y,
            rstd)
    _expect(ACLNN_ERR_PARAM_INVALID, "rstdOut", phase1, x, gamma, 1e-6, y,
            openacl.empty((2, 1), np.float16))
    _expect(ACLNN_ERR_PARAM_INVALID, "yOut", phase1, x, gamma, 1e-6,
            openacl.empty((4, 2), np.float16), rstd)


def test_batch_norm_errors():
    x = _dev(np.ones((2, 3, 4), np.float32))
    c3 = _dev(np.ones(3, np.float32))
    out = openacl.empty((2, 3, 4), np.float32)
    phase1 = aclnn.batch_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "input", phase1, None, c3, c3, c3, c3, False, 0.1, 1e-5,
            out, None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "runningMean", phase1, x, c3, c3, None, c3, False, 0.1,
            1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "output", phase1, x, c3, c3, c3, c3, False, 0.1, 1e-5,
            None, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "input", phase1, _dev(np.ones(3, np.float32)), c3, c3, c3,
            c3, False, 0.1, 1e-5, openacl.empty((3,), np.float32), None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "input", phase1, _dev(np.ones((2, 3), np.int64)), c3, c3,
            c3, c3, False, 0.1, 1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "weight", phase1, x, _dev(np.ones(4, np.float32)), c3, c3,
            c3, False, 0.1, 1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "runningVar", phase1, x, c3, c3, c3,
            _dev(np.ones(3, np.float64)), False, 0.1, 1e-5, out, None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "saveMean", phase1, x, c3, c3, c3, c3, True, 0.1, 1e-5,
            out, openacl.empty((4,), np.float32), openacl.empty((3,), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, "input", phase1, _dev(np.ones((1, 3), np.float32)), c3,
            c3, c3, c3, True, 0.1, 1e-5, openacl.empty((1, 3), np.float32), None, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "training", phase1, x, c3, c3, c3, c3, 1, 0.1, 1e-5, out,
            None, None)


def test_group_norm_errors():
    x = _dev(np.ones((2, 4, 3), np.float32))
    c4 = _dev(np.ones(4, np.float32))
    out = openacl.empty((2, 4, 3), np.float32)
    stat = openacl.empty((2, 2), np.float32)
    phase1 = aclnn.group_norm_get_workspace_size
    args = [x, c4, c4, 2, 4, 3, 2, 1e-5, out, stat, stat]

    def call(index, value):
        changed = list(args)
        changed[index] = value
        return phase1, *changed

    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", *call(0, None))
    _expect(ACLNN_ERR_PARAM_NULLPTR, "gamma", *call(1, None))
    _expect(ACLNN_ERR_PARAM_NULLPTR, "rstdOut", *call(10, None))
    _expect(ACLNN_ERR_PARAM_INVALID, "self", *call(0, _dev(np.ones((2, 4, 3), np.float64))))
    _expect(ACLNN_ERR_PARAM_INVALID, "self", *call(0, _dev(np.ones(4, np.float32))))
    _expect(ACLNN_ERR_PARAM_INVALID, "N", *call(3, 3))
    _expect(ACLNN_ERR_PARAM_INVALID, "C", *call(4, 5))
    _expect(ACLNN_ERR_PARAM_INVALID, "HxW", *call(5, 4))
    _expect(ACLNN_ERR_PARAM_INVALID, "group", *call(6, 0))
    _expect(ACLNN_ERR_PARAM_INVALID, "group", *call(6, 3))
    _expect(ACLNN_ERR_PARAM_INVALID, "eps", *call(7, 0.0))
    _expect(ACLNN_ERR_PARAM_INVALID, "beta", *call(2, _dev(np.ones(3, np.float32))))
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", *call(1, _dev(np.ones(4, np.float16))))
    _expect(ACLNN_ERR_PARAM_INVALID, "meanOut", *call(9, openacl.empty((2, 4), np.float32)))
    _expect(ACLNN_ERR_PARAM_INVALID, "out", *call(8, openacl.empty((2, 4, 3), np.float16)))


def test_instance_norm_errors():
    x = _dev(np.ones((2, 3, 4, 4), np.float32))
    c3 = _dev(np.ones(3, np.float32))
    y = openacl.empty((2, 3, 4, 4), np.float32)
    stat = openacl.empty((2, 3, 1, 1), np.float32)
    phase1 = aclnn.instance_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "x", phase1, None, c3, c3, "NCHW", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "beta", phase1, x, c3, None, "NCHW", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "variance", phase1, x, c3, c3, "NCHW", 1e-5, y, stat, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "x", phase1, _dev(np.ones((2, 3, 4), np.float32)), c3, c3,
            "NCHW", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "x", phase1, _dev(np.ones((2, 3, 4, 4), BF16)), c3, c3,
            "NCHW", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "dataFormat", phase1, x, c3, c3, "NDHWC", 1e-5, y, stat,
            stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, _dev(np.ones(4, np.float32)), c3,
            "NCHW", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, c3, c3, "NHWC", 1e-5, y, stat, stat)
    _expect(ACLNN_ERR_PARAM_INVALID, "mean", phase1, x, c3, c3, "NCHW", 1e-5, y,
            openacl.empty((2, 3), np.float32), stat)


def test_empty_batch():
    x = np.zeros((0, 3, 4), np.float32)
    golden = torch.ops.aten.native_layer_norm(to_torch(x), [4], None, None, 1e-5)
    result = openacl.ops.layer_norm(_dev(x), [4], None, None, 1e-5)
    for got, want in zip(result, golden, strict=True):
        assert got.numpy().shape == tuple(want.shape)
    gamma = _dev(np.ones(3, np.float32))
    out, mean, rstd = openacl.ops.group_norm(_dev(x), gamma, gamma, 0, 3, 4, 3, 1e-5)
    assert out.numpy().shape == (0, 3, 4) and mean.numpy().shape == (0, 3)


# -- GemmaRmsNorm, AddRmsNorm -------------------------------------------------------------------
def _rms64(x, gamma, eps):
    """RmsNorm in float64: (y, rstd) as float64 torch tensors."""
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    rstd = torch.rsqrt(x.square().mean(dims, keepdim=True) + eps)
    return x * rstd * gamma, rstd


def _rounded(tensor, dtype):
    return from_torch(tensor.to(to_torch(np.zeros(1, dtype)).dtype))


@pytest.mark.parametrize("shape,gamma_shape", [((4, 16), (16,)), ((2, 3, 8), (3, 8))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_gemma_rms_norm_scales_by_one_plus_gamma(shape, gamma_shape, dtype):
    x, gamma = _data(shape, dtype, 20), _data(gamma_shape, dtype, 21, -1, 1)
    y, rstd = openacl.ops.gemma_rms_norm(_dev(x), _dev(gamma), 1e-6)
    want_y, want_rstd = _rms64(to_torch(x).double(), 1 + to_torch(gamma).double(), 1e-6)
    assert_close(y.numpy(), _rounded(want_y, dtype), f"gemma y {dtype}")
    assert_close(rstd.numpy(), _rounded(want_rstd, FLOAT32))


@pytest.mark.parametrize("shape,gamma_shape", [((4, 16), (16,)), ((2, 3, 8), (3, 8)),
                                               ((5,), (5,))], ids=str)
@pytest.mark.parametrize("dtype", NORM_FLOATS, ids=str)
def test_add_rms_norm_matches_add_then_rms_norm(shape, gamma_shape, dtype):
    x1, x2 = _data(shape, dtype, 22), _data(shape, dtype, 23)
    gamma = _data(gamma_shape, dtype, 24)
    y, rstd, x = openacl.ops.add_rms_norm(_dev(x1), _dev(x2), _dev(gamma), 1e-6)
    total = to_torch(x1).double() + to_torch(x2).double()
    want_y, want_rstd = _rms64(total, to_torch(gamma).double(), 1e-6)
    assert_close(y.numpy(), _rounded(want_y, dtype), f"add_rms y {dtype}")
    assert_close(rstd.numpy(), _rounded(want_rstd, FLOAT32))
    assert_close(x.numpy(), _rounded(total, dtype))


def test_add_rms_norm_errors():
    x = _dev(np.ones((2, 4), np.float16))
    gamma = _dev(np.ones(4, np.float16))
    y, rstd = openacl.empty((2, 4), np.float16), openacl.empty((2, 1), np.float32)
    x_out = openacl.empty((2, 4), np.float16)
    phase1 = aclnn.add_rms_norm_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "x2", phase1, x, None, gamma, 1e-6, y, rstd, x_out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "xOut", phase1, x, x, gamma, 1e-6, y, rstd, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "x2", phase1, x, _dev(np.ones((2, 4), np.float32)), gamma,
            1e-6, y, rstd, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "x2", phase1, x, _dev(np.ones((1, 4), np.float16)), gamma,
            1e-6, y, rstd, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "gamma", phase1, x, x, _dev(np.ones(3, np.float16)), 1e-6,
            y, rstd, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "epsilon", phase1, x, x, gamma, -1.0, y, rstd, x_out)
    _expect(ACLNN_ERR_PARAM_INVALID, "xOut", phase1, x, x, gamma, 1e-6, y, rstd,
            openacl.empty((2, 4), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, "x", aclnn.gemma_rms_norm_get_workspace_size,
            _dev(np.ones((2, 4), np.int8)), gamma, 1e-6, y, rstd)


# -- LayerNormWithImplMode ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_layer_norm_with_impl_mode_is_layer_norm(mode):
    x, weight, bias = _data((3, 8), np.float16, 30), _data((8,), np.float16, 31), \
        _data((8,), np.float16, 32)
    out, mean, rstd = openacl.ops.layer_norm_with_impl_mode(_dev(x), [8], _dev(weight),
                                                            _dev(bias), 1e-5, implMode=mode)
    golden = torch.ops.aten.native_layer_norm(to_torch(x).double(), [8],
                                              to_torch(weight).double(),
                                              to_torch(bias).double(), 1e-5)
    for got, want in zip((out, mean, rstd), golden, strict=True):
        assert_close(got.numpy(), _rounded(want, np.float16))


def test_layer_norm_with_impl_mode_errors():
    x = _dev(np.ones((2, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    phase1 = aclnn.layer_norm_with_impl_mode_get_workspace_size
    _expect(ACLNN_ERR_PARAM_INVALID, "implMode", phase1, x, [4], None, None, 1e-5, out, None,
            None, 3)
    _expect(ACLNN_ERR_PARAM_INVALID, "input", phase1, x, [4], None, None, 1e-5, out, None,
            None, 2)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "input", phase1, None, [4], None, None, 1e-5, out, None,
            None, 0)
