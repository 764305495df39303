"""ConvolutionBackward, ConvDepthwise2d, ConvTbc and ConvTbcBackward against PyTorch: the
gradients against torch.autograd of the float64 forward, rounded once to each output's
dtype, under CANN's precision standard."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
HALF_AND_SINGLE = [F16, BF16, F32]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _rand(shape, dtype, seed):
    return random_array(shape, dtype, np.random.default_rng(seed), -1, 1)


def _rounded(tensor: torch.Tensor, dtype) -> np.ndarray:
    return from_torch(tensor.detach().to(to_torch(np.zeros(0, dtype)).dtype))


def _error(fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value


def _autograd(x, w, stride, padding, dilation, transposed, output_padding, groups, seed):
    """(gradOutput, gradInput, gradWeight, gradBias) of a float64 torch convolution."""
    tx = to_torch(x).double().requires_grad_(True)
    tw = to_torch(w).double().requires_grad_(True)
    channels = w.shape[1] * groups if transposed else w.shape[0]
    tb = torch.zeros(channels, dtype=torch.float64, requires_grad=True)
    nd = x.ndim - 2
    if transposed:
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        y = conv(tx, tw, tb, stride, padding, output_padding, groups, dilation)
    else:
        y = (F.conv1d, F.conv2d, F.conv3d)[nd - 1](tx, tw, tb, stride, padding, dilation,
                                                   groups)
    grad = _rand(tuple(y.shape), x.dtype, seed)
    y.backward(to_torch(grad).double())
    return grad, tx.grad, tw.grad, tb.grad


CASES = [  # input, weight, stride, padding, dilation, transposed, outputPadding, groups
    ((2, 4, 9, 8), (6, 2, 3, 3), [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    ((2, 4, 10, 7), (6, 4, 3, 2), [3, 2], [2, 1], [1, 1], False, [0, 0], 1),  # uncovered rows
    ((1, 3, 11), (6, 1, 4), [2], [1], [2], False, [0], 3),
    ((2, 2, 4, 5, 6), (4, 2, 2, 3, 2), [1, 2, 1], [1, 0, 1], [1, 1, 2], False, [0, 0, 0], 1),
    ((1, 8, 6, 6), (8, 1, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 8),  # depthwise
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
    ((2, 4, 5, 6), (4, 3, 3, 2), [2, 3], [1, 1], [2, 1], True, [1, 2], 2),
    ((2, 4, 5, 6), (4, 3, 2, 2), [2, 2], [0, 0], [1, 1], True, [0, 0], 1),   # tiled taps
    ((1, 2, 7), (2, 3, 3), [3], [1], [1], True, [2], 1),
]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_AND_SINGLE, ids=str)
def test_convolution_backward_matches_autograd(case, dtype):
    x_shape, w_shape, stride, padding, dilation, transposed, output_padding, groups = case
    x, w = _rand(x_shape, dtype, 1), _rand(w_shape, dtype, 2)
    grad, gi, gw, gb = _autograd(x, w, stride, padding, dilation, transposed, output_padding,
                                 groups, 3)
    results = openacl.ops.convolution_backward(
        _dev(grad), _dev(x), _dev(w), [gb.shape[0]], stride, padding, dilation, transposed,
        output_padding, groups, [True, True, True], 0)
    for got, want, name in zip(results, (gi, gw, gb), ("gradInput", "gradWeight", "gradBias"),
                               strict=True):
        assert_close(got.numpy(), _rounded(want, dtype), f"{name} {case} {dtype}")


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False),
                                  (False, False, True), (False, True, True)], ids=str)
def test_convolution_backward_output_mask(mask):
    x, w = _rand((2, 3, 6, 6), F32, 4), _rand((4, 3, 3, 3), F32, 5)
    grad, *wanted = _autograd(x, w, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, 6)
    outputs = [openacl.empty(shape, F32) if keep else None
               for shape, keep in zip((x.shape, w.shape, (4,)), mask, strict=True)]
    tensors = [_dev(a) for a in (grad, x, w)]  # alive until the launch has run
    ws, exe = aclnn.convolution_backward_get_workspace_size(
        *tensors, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, list(mask), 0, *outputs)
    aclnn.convolution_backward(0, ws, exe, 0)
    for out, want in zip(outputs, wanted, strict=True):
        if out is not None:
            assert_close(out.numpy(), _rounded(want, F32))


def test_convolution_backward_asymmetric_padding_and_non_contiguous_outputs():
    x, w = _rand((1, 2, 7, 6), F32, 7), _rand((3, 2, 3, 2), F32, 8)
    tx = to_torch(x).double().requires_grad_(True)
    tw = to_torch(w).double().requires_grad_(True)
    y = F.conv2d(F.pad(tx, (1, 0, 2, 1)), tw, None, [2, 1])  # top 2, bottom 1, left 1
    grad = _rand(tuple(y.shape), F32, 9)
    y.backward(to_torch(grad).double())
    gi, gw, gb = openacl.ops.convolution_backward(
        _dev(grad), _dev(x), _dev(w), [3], [2, 1], [2, 1, 1, 0], [1, 1], False, [0, 0], 1,
        [True, True, True], 0)
    assert_close(gi.numpy(), _rounded(tx.grad, F32))
    assert_close(gw.numpy(), _rounded(tw.grad, F32))
    assert_close(gb.numpy(), _rounded(to_torch(grad).double().sum((0, 2, 3)), F32))


def test_convolution_backward_errors():
    x, w = _dev(np.ones((1, 2, 5, 5), np.float32)), _dev(np.ones((3, 2, 3, 3), np.float32))
    grad = _dev(np.ones((1, 3, 3, 3), np.float32))
    outs = [openacl.empty((1, 2, 5, 5), np.float32), openacl.empty((3, 2, 3, 3), np.float32),
            openacl.empty((3,), np.float32)]
    fn = aclnn.convolution_backward_get_workspace_size

    def args(**changes):
        base = dict(gradOutput=grad, input=x, weight=w, biasSizes=[3], stride=[1, 1],
                    padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=[0, 0],
                    groups=1, outputMask=[True, True, True], cubeMathType=0,
                    gradInput=outs[0], gradWeight=outs[1], gradBias=outs[2])
        base.update(changes)
        return list(base.values())

    for changes, code, name in [
        (dict(gradOutput=None), ACLNN_ERR_PARAM_NULLPTR, "'gradOutput'"),
        (dict(stride=None), ACLNN_ERR_PARAM_NULLPTR, "'stride'"),
        (dict(outputMask=None), ACLNN_ERR_PARAM_NULLPTR, "'outputMask'"),
        (dict(gradInput=None), ACLNN_ERR_PARAM_NULLPTR, "'gradInput'"),
        (dict(gradOutput=_dev(np.ones((1, 3, 2, 3), np.float32))), ACLNN_ERR_PARAM_INVALID,
         "'gradOutput'"),
        (dict(input=_dev(np.ones((1, 2, 5, 5), np.int32))), ACLNN_ERR_PARAM_INVALID,
         "'input'"),
        (dict(stride=[0, 1]), ACLNN_ERR_PARAM_INVALID, "'stride'"),
        (dict(padding=[1, 1, 1]), ACLNN_ERR_PARAM_INVALID, "'padding'"),
        (dict(groups=2), ACLNN_ERR_PARAM_INVALID, "'weight'"),
        (dict(groups=0), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (dict(outputMask=[True, True]), ACLNN_ERR_PARAM_INVALID, "'outputMask'"),
        (dict(biasSizes=[4]), ACLNN_ERR_PARAM_INVALID, "'biasSizes'"),
        (dict(cubeMathType=4), ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        (dict(gradWeight=openacl.empty((3, 2, 3, 3), np.float16)), ACLNN_ERR_PARAM_INVALID,
         "'gradWeight'"),
    ]:
        error = _error(fn, *args(**changes))
        assert error.code == code and name in error.message, (changes, error.message)


# -- ConvDepthwise2d ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_AND_SINGLE, ids=str)
@pytest.mark.parametrize("geometry", [([1, 1], [1, 1], [1, 1], 1), ([2, 1], [1, 0], [1, 2], 2),
                                      ([3, 3], [2, 2], [2, 1], 1)], ids=str)
def test_conv_depthwise2d_matches_torch(dtype, geometry):
    stride, padding, dilation, multiplier = geometry
    x = _rand((2, 3, 11, 10), dtype, 10)
    w = _rand((3 * multiplier, 1, 3, 2), dtype, 11)
    b = _rand((3 * multiplier,), dtype, 12)
    want = F.conv2d(to_torch(x).double(), to_torch(w).double(), to_torch(b).double(), stride,
                    padding, dilation, 3)
    got = openacl.ops.conv_depthwise2d(_dev(x), _dev(w), [3, 2], _dev(b), stride, padding,
                                       dilation).numpy()
    assert_close(got, _rounded(want, dtype), f"depthwise {geometry} {dtype}")
    no_bias = openacl.ops.conv_depthwise2d(_dev(x), _dev(w), [3, 2], None, stride, padding,
                                           dilation).numpy()
    assert_close(no_bias, _rounded(want - to_torch(b).double().reshape(-1, 1, 1), dtype))


def test_conv_depthwise2d_errors():
    x, w = _dev(np.ones((1, 2, 6, 6), np.float32)), _dev(np.ones((4, 1, 3, 3), np.float32))
    out = openacl.empty((1, 4, 4, 4), np.float32)
    fn = aclnn.conv_depthwise2d_get_workspace_size
    for args, code, name in [
        ((None, w, [3, 3], None, [1, 1], [0, 0], [1, 1], out, 0), ACLNN_ERR_PARAM_NULLPTR,
         "'self'"),
        ((x, w, None, None, [1, 1], [0, 0], [1, 1], out, 0), ACLNN_ERR_PARAM_NULLPTR,
         "'kernelSize'"),
        ((x, w, [3, 2], None, [1, 1], [0, 0], [1, 1], out, 0), ACLNN_ERR_PARAM_INVALID,
         "'kernelSize'"),
        ((x, _dev(np.ones((4, 2, 3, 3), np.float32)), [3, 3], None, [1, 1], [0, 0], [1, 1],
          out, 0), ACLNN_ERR_PARAM_INVALID, "'weight'"),
        ((x, _dev(np.ones((3, 1, 3, 3), np.float32)), [3, 3], None, [1, 1], [0, 0], [1, 1],
          out, 0), ACLNN_ERR_PARAM_INVALID, "'weight'"),           # 3 is no multiple of 2
        ((x, w, [3, 3], None, [64, 1], [0, 0], [1, 1], out, 0), ACLNN_ERR_PARAM_INVALID,
         "'stride'"),
        ((x, w, [3, 3], None, [1, 1], [256, 0], [1, 1], out, 0), ACLNN_ERR_PARAM_INVALID,
         "'padding'"),
        ((x, w, [3, 3], None, [1, 1], [0, 0], [0, 1], out, 0), ACLNN_ERR_PARAM_INVALID,
         "'dilation'"),
        ((x, w, [3, 3], None, [1, 1], [0, 0], [1, 1], openacl.empty((1, 4, 5, 5), np.float32),
          0), ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((_dev(np.ones((2, 6, 6), np.float32)), w, [3, 3], None, [1, 1], [0, 0], [1, 1], out,
          0), ACLNN_ERR_PARAM_INVALID, "'self'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- ConvTbc, ConvTbcBackward --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_AND_SINGLE, ids=str)
@pytest.mark.parametrize("shapes", [((9, 2, 5), (3, 5, 4), 1), ((7, 3, 8), (1, 8, 6), 0),
                                    ((4, 1, 2), (6, 2, 3), 2)], ids=str)
def test_conv_tbc_and_backward_match_torch(dtype, shapes):
    x_shape, w_shape, pad = shapes
    x, w, b = _rand(x_shape, dtype, 13), _rand(w_shape, dtype, 14), _rand(w_shape[2:], dtype, 15)
    tx, tw, tb = (to_torch(a).double().requires_grad_(True) for a in (x, w, b))
    y = torch.conv_tbc(tx, tw, tb, pad)
    got = openacl.ops.conv_tbc(_dev(x), _dev(w), _dev(b), pad).numpy()
    assert_close(got, _rounded(y, dtype), f"conv_tbc {shapes} {dtype}")
    grad = _rand(tuple(y.shape), dtype, 16)
    y.backward(to_torch(grad).double())
    results = openacl.ops.conv_tbc_backward(_dev(grad), _dev(x), _dev(w), _dev(b), pad)
    for out, t, name in zip(results, (tx, tw, tb), ("gradInput", "gradWeight", "gradBias"),
                            strict=True):
        assert_close(out.numpy(), _rounded(t.grad, dtype), f"{name} {shapes} {dtype}")


def test_conv_tbc_errors():
    x, w, b = (_dev(np.ones(s, np.float32)) for s in ((5, 2, 3), (2, 3, 4), (4,)))
    out = openacl.empty((4, 2, 4), np.float32)
    for args, code, name in [
        ((None, w, b, 0, out, 0), ACLNN_ERR_PARAM_NULLPTR, "'self'"),
        ((x, w, None, 0, out, 0), ACLNN_ERR_PARAM_NULLPTR, "'bias'"),
        ((x, _dev(np.ones((2, 2, 4), np.float32)), b, 0, out, 0), ACLNN_ERR_PARAM_INVALID,
         "'weight'"),
        ((x, w, _dev(np.ones(3, np.float32)), 0, out, 0), ACLNN_ERR_PARAM_INVALID, "'bias'"),
        ((x, w, b, -1, out, 0), ACLNN_ERR_PARAM_INVALID, "'pad'"),
        ((x, _dev(np.ones((9, 3, 4), np.float32)), b, 0, out, 0), ACLNN_ERR_PARAM_INVALID,
         "'weight'"),
        ((x, w, b, 1, out, 0), ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((_dev(np.ones((5, 2, 3), np.int32)), w, b, 0, out, 0), ACLNN_ERR_PARAM_INVALID,
         "'self'"),
    ]:
        error = _error(aclnn.conv_tbc_get_workspace_size, *args)
        assert error.code == code and name in error.message, (args, error.message)
    grads = [openacl.empty(s, np.float32) for s in ((5, 2, 3), (2, 3, 4), (4,))]
    error = _error(aclnn.conv_tbc_backward_get_workspace_size,
                   _dev(np.ones((3, 2, 4), np.float32)), x, w, b, 0, 0, *grads)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'self'" in error.message


# -- QuantConvolution -----------------------------------------------------------------------------
@pytest.mark.parametrize("bias_dtype", [F32, BF16, F16, np.dtype(np.int32), None], ids=str)
@pytest.mark.parametrize("shapes", [((2, 4, 7, 6), (6, 2, 3, 3), [1, 2], [1, 0], [1, 1], 2),
                                    ((1, 3, 4, 5, 6), (4, 3, 2, 3, 2), [1, 1, 2], [0, 1, 1],
                                     [2, 1, 1], 1)], ids=str)
def test_quant_convolution_matches_torch(bias_dtype, shapes):
    x_shape, w_shape, stride, padding, dilation, groups = shapes
    rng = np.random.default_rng(17)
    x = rng.integers(-128, 128, x_shape).astype(np.int8)
    w = rng.integers(-128, 128, w_shape).astype(np.int8)
    c_out = w_shape[0]
    scale = rng.uniform(1e-4, 1e-3, c_out).astype(np.float32)
    bias = None if bias_dtype is None else (
        rng.integers(-50, 50, c_out).astype(np.int32) if bias_dtype == np.int32 else
        random_array((c_out,), bias_dtype, rng, -2, 2))
    conv = (F.conv2d, F.conv3d)[len(x_shape) - 4]
    channels = (1, -1) + (1,) * (len(x_shape) - 2)
    want = conv(torch.from_numpy(x).double(), torch.from_numpy(w).double(), None, stride,
                padding, dilation, groups) * torch.from_numpy(scale).double().reshape(channels)
    if bias is not None:
        want = want + to_torch(bias).double().reshape(channels)
    dtype = BF16 if bias_dtype == BF16 else F16
    got = openacl.ops.quant_convolution(_dev(x), _dev(w), None if bias is None else _dev(bias),
                                        _dev(scale), None, stride, padding, dilation, False,
                                        None, groups, 0, None).numpy()
    assert_close(got, _rounded(want, dtype), f"{shapes} {bias_dtype}")


def test_quant_convolution_float32_output_and_errors():
    x, w = (_dev(np.ones(s, np.int8)) for s in ((1, 2, 5, 5), (3, 2, 3, 3)))
    scale = _dev(np.full(3, 0.5, np.float32))
    out = openacl.empty((1, 3, 3, 3), np.float32)
    ws, exe = aclnn.quant_convolution_get_workspace_size(x, w, None, scale, None, [1, 1],
                                                         [0, 0], [1, 1], False, None, 1, 0,
                                                         None, out)
    aclnn.quant_convolution(0, ws, exe, 0)
    assert np.all(out.numpy() == 9.0)                     # 18 ones * 0.5
    fn = aclnn.quant_convolution_get_workspace_size

    def args(**changes):
        base = dict(input=x, weight=w, bias=None, scale=scale, offset=None, stride=[1, 1],
                    padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=None,
                    groups=1, offsetx=0, roundMode=None, output=out)
        base.update(changes)
        return list(base.values())

    for changes, code, name in [
        (dict(input=None), ACLNN_ERR_PARAM_NULLPTR, "'input'"),
        (dict(scale=None), ACLNN_ERR_PARAM_NULLPTR, "'scale'"),
        (dict(input=_dev(np.ones((1, 2, 5, 5), np.float32))), ACLNN_ERR_PARAM_INVALID,
         "'input'"),
        (dict(scale=_dev(np.ones(2, np.float32))), ACLNN_ERR_PARAM_INVALID, "'scale'"),
        (dict(bias=_dev(np.ones(3, np.int8))), ACLNN_ERR_PARAM_INVALID, "'bias'"),
        (dict(transposed=True), ACLNN_ERR_PARAM_INVALID, "'transposed'"),
        (dict(offsetx=200), ACLNN_ERR_PARAM_INVALID, "'offsetx'"),
        (dict(groups=2), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (dict(stride=[1]), ACLNN_ERR_PARAM_INVALID, "'stride'"),
        (dict(output=openacl.empty((1, 3, 3, 3), np.int8)), ACLNN_ERR_PARAM_INVALID,
         "'output'"),
        (dict(output=openacl.empty((1, 3, 4, 4), np.float32)), ACLNN_ERR_PARAM_INVALID,
         "'output'"),
    ]:
        error = _error(fn, *args(**changes))
        assert error.code == code and name in error.message, (changes, error.message)


# -- DeformableConv2d -----------------------------------------------------------------------------
def _deformable_reference(x, w, offset, bias, kernel, stride, padding, dilation, groups, dg):
    """CANN's golden loop (conv/deformable_conv2d/tests/assets/golden.py) in float64."""
    n, channels, height, width = x.shape
    kh, kw = kernel
    out_h, out_w = offset.shape[2:]
    taps = kh * kw
    deform = np.zeros((n, channels, out_h * kh, out_w * kw))

    def value(b, ch, hi, wi):
        return x[b, ch, hi, wi] if 0 <= hi < height and 0 <= wi < width else 0.0
    for b, ch, i, j, ki, kj in itertools.product(range(n), range(channels), range(out_h),
                                                 range(out_w), range(kh), range(kw)):
        tap = ch // (channels // dg) * taps + ki * kw + kj
        ph = i * stride[2] - padding[0] + ki * dilation[2] + offset[b, dg * taps + tap, i, j]
        pw = j * stride[3] - padding[2] + kj * dilation[3] + offset[b, tap, i, j]
        h0, w0 = math.floor(ph), math.floor(pw)
        fh, fw = ph - h0, pw - w0
        top = value(b, ch, h0, w0) * (1 - fw) + value(b, ch, h0, w0 + 1) * fw
        bottom = value(b, ch, h0 + 1, w0) * (1 - fw) + value(b, ch, h0 + 1, w0 + 1) * fw
        deform[b, ch, i * kh + ki, j * kw + kj] = (top * (1 - fh) + bottom * fh) * offset[
            b, 2 * dg * taps + tap, i, j]
    out = F.conv2d(torch.from_numpy(deform), torch.from_numpy(w.astype(np.float64)),
                   None if bias is None else torch.from_numpy(bias.astype(np.float64)),
                   (kh, kw), 0, 1, groups)
    return out, torch.from_numpy(deform)


@pytest.mark.parametrize("dtype", HALF_AND_SINGLE, ids=str)
@pytest.mark.parametrize("geometry", [
    ((2, 4, 7, 6), 6, (3, 2), [1, 1, 2, 1], [1, 0, 2, 1], [1, 1, 1, 2], 2, 2),
    ((1, 2, 5, 5), 3, (3, 3), [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], 1, 1),
], ids=str)
def test_deformable_conv2d_matches_cann_golden(dtype, geometry):
    x_shape, c_out, kernel, stride, padding, dilation, groups, dg = geometry
    rng = np.random.default_rng(18)
    x = random_array(x_shape, dtype, rng, -1, 1)
    w = random_array((c_out, x_shape[1] // groups, *kernel), dtype, rng, -1, 1)
    bias = random_array((c_out,), dtype, rng, -1, 1)
    out_h = (x_shape[2] + padding[0] + padding[1] - (kernel[0] - 1) * dilation[2] - 1) \
        // stride[2] + 1
    out_w = (x_shape[3] + padding[2] + padding[3] - (kernel[1] - 1) * dilation[3] - 1) \
        // stride[3] + 1
    offset = random_array((x_shape[0], 3 * dg * kernel[0] * kernel[1], out_h, out_w), dtype,
                          rng, -2, 2)
    out, deform = openacl.ops.deformable_conv2d(_dev(x), _dev(w), _dev(offset), _dev(bias),
                                                list(kernel), stride, padding, dilation,
                                                groups, dg, True)
    wide = [a.astype(np.float64) for a in (x, w, offset, bias)]
    want_out, want_deform = _deformable_reference(wide[0], wide[1], wide[2], wide[3], kernel,
                                                  stride, padding, dilation, groups, dg)
    assert_close(out.numpy(), _rounded(want_out, dtype), f"out {geometry}")
    assert_close(deform.numpy(), _rounded(want_deform, dtype), f"deformOut {geometry}")


def test_deformable_conv2d_errors():
    x, w = _dev(np.ones((1, 2, 5, 5), np.float32)), _dev(np.ones((3, 2, 3, 3), np.float32))
    offset = _dev(np.zeros((1, 27, 3, 3), np.float32))
    out = openacl.empty((1, 3, 3, 3), np.float32)
    fn = aclnn.deformable_conv2d_get_workspace_size

    def args(**changes):
        base = dict(x=x, weight=w, offset=offset, biasOptional=None, kernelSize=[3, 3],
                    stride=[1, 1, 1, 1], padding=[0, 0, 0, 0], dilation=[1, 1, 1, 1],
                    groups=1, deformableGroups=1, modulated=True, out=out,
                    deformOutOptional=None)
        base.update(changes)
        return list(base.values())

    for changes, code, name in [
        (dict(offset=None), ACLNN_ERR_PARAM_NULLPTR, "'offset'"),
        (dict(kernelSize=[3, 2]), ACLNN_ERR_PARAM_INVALID, "'kernelSize'"),
        (dict(stride=[2, 1, 1, 1]), ACLNN_ERR_PARAM_INVALID, "'stride'"),
        (dict(dilation=[1, 1, 0, 1]), ACLNN_ERR_PARAM_INVALID, "'dilation'"),
        (dict(padding=[0, 0, 0]), ACLNN_ERR_PARAM_INVALID, "'padding'"),
        (dict(offset=_dev(np.zeros((1, 18, 3, 3), np.float32))), ACLNN_ERR_PARAM_INVALID,
         "'offset'"),
        (dict(modulated=False), ACLNN_ERR_PARAM_INVALID, "'modulated'"),
        (dict(deformableGroups=3), ACLNN_ERR_PARAM_INVALID, "'deformableGroups'"),
        (dict(groups=2), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (dict(weight=_dev(np.ones((3, 2, 3, 3), np.float16))), ACLNN_ERR_PARAM_INVALID,
         "'weight'"),
        (dict(out=openacl.empty((1, 3, 4, 4), np.float32)), ACLNN_ERR_PARAM_INVALID, "'out'"),
    ]:
        error = _error(fn, *args(**changes))
        assert error.code == code and name in error.message, (changes, error.message)
