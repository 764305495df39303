"""Pooling operators against PyTorch CPU, with CANN's precision standard."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _data(shape, dtype, seed=0):
    return random_array(shape, dtype, np.random.default_rng(seed))


# -- MaxPool2dWithIndices -----------------------------------------------------------------------
# (kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ([2], [], [0], [1], False),
    ([3, 3], [2, 2], [1, 1], [1, 1], False),
    ([3, 2], [2, 1], [1, 0], [1, 1], True),
    ([3], [2], [1], [2], False),
    ([2, 3], [3, 2], [1, 1], [2, 1], True),
    ([4, 4], [3, 3], [2, 2], [1, 1], True),
]


@pytest.mark.parametrize("case", MAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_max_pool2d_with_indices_matches_torch(case, dtype):
    kernel, stride, padding, dilation, ceil = case
    x = _data((2, 3, 9, 10), dtype)
    values, indices = F.max_pool2d(to_torch(x), kernel, stride or None, padding, dilation,
                                   ceil, return_indices=True)
    out, idx = openacl.ops.max_pool2d_with_indices(_dev(x), kernel, stride, padding, dilation,
                                                   ceil)
    assert_close(out.numpy(), from_torch(values), f"max_pool2d {case} {dtype}")
    np.testing.assert_array_equal(idx.numpy(), from_torch(indices))


def test_max_pool2d_with_indices_int32_indices_3d_input_and_infinities():
    x = _data((3, 6, 6), np.float32)
    x[0, :3, :3] = -np.inf  # a window of -inf only: PyTorch keeps its first valid index
    x[1, 2, 2] = np.inf
    out = openacl.empty((3, 3, 3), np.float32)
    indices = openacl.empty((3, 3, 3), np.int32)
    source = _dev(x)
    ws, exe = aclnn.max_pool2d_with_indices_get_workspace_size(source, [2], [2], [0], [1],
                                                               False, out, indices)
    aclnn.max_pool2d_with_indices(0, ws, exe, 0)
    values, golden = F.max_pool2d(to_torch(x), 2, 2, return_indices=True)
    assert_close(out.numpy(), from_torch(values))
    np.testing.assert_array_equal(indices.numpy(), from_torch(golden).astype(np.int32))


def test_max_pool_propagates_nan():
    x = _data((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = np.nan
    out, _ = openacl.ops.max_pool2d_with_indices(_dev(x), [2], [2], [0], [1], False)
    assert_close(out.numpy(), from_torch(F.max_pool2d(to_torch(x), 2)))


# -- MaxPool2dWithMask --------------------------------------------------------------------------
# (kernel, stride, padding, ceil_mode): dilation is 1 only
MASK_CASES = [
    ([2], [], [0], False),
    ([3, 3], [2, 2], [1, 1], False),
    ([3, 2], [2, 1], [1, 0], True),
    ([4, 4], [3, 3], [2, 2], True),
    ([5, 1], [1, 1], [2, 0], False),
]


def _mask_shape(lead, kernel, out_hw):
    """The documented mask shape (aclnnMaxPool2dWithMask.md)."""
    kh, kw = (kernel * 2)[:2]
    return (*lead, kh * kw, (-(-out_hw[0] * out_hw[1] // 16) + 1) * 32)


def _mask_int32(mask, count):
    """The int32 indices a multi-tap mask begins with (CANN's Atlas A2/A3 layout)."""
    return np.ascontiguousarray(mask).reshape(-1)[:count * 4].view("<i4")


@pytest.mark.parametrize("case", MASK_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_max_pool2d_with_mask_matches_torch(case, dtype):
    kernel, stride, padding, ceil = case
    x = _data((2, 3, 9, 10), dtype)
    values, indices = F.max_pool2d(to_torch(x), kernel, stride or None, padding, 1, ceil,
                                   return_indices=True)
    out, mask = openacl.ops.max_pool2d_with_mask(_dev(x), kernel, stride, padding, [1], ceil)
    assert_close(out.numpy(), from_torch(values), f"max_pool2d_with_mask {case} {dtype}")
    mask = mask.numpy()
    assert mask.dtype == np.int8
    assert mask.shape == _mask_shape((2, 3), kernel, values.shape[-2:])
    golden = from_torch(indices)
    np.testing.assert_array_equal(_mask_int32(mask, golden.size).reshape(golden.shape), golden)
    assert not mask.reshape(-1)[golden.size * 4:].any()  # the rest is zero


def test_max_pool2d_with_mask_3d_input_two_phase_and_strided_out():
    x = _data((3, 7, 8), np.float32)
    x[0, :2, :2] = -np.inf  # an all -inf window: PyTorch's first valid position
    x[1, 3, 3] = np.nan
    values, indices = F.max_pool2d(to_torch(x), 3, 2, 1, 1, True, return_indices=True)
    out = openacl.empty(tuple(values.shape), np.float32)
    mask = strided(np.ones(_mask_shape((3,), [3], values.shape[-2:]), np.int8))  # strided
    source = _dev(x)
    ws, exe = aclnn.max_pool2d_with_mask_get_workspace_size(source, [3], [2], [1], [1], True,
                                                            out, mask)
    aclnn.max_pool2d_with_mask(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(values))
    written = mask.numpy()
    golden = from_torch(indices)
    np.testing.assert_array_equal(_mask_int32(written, golden.size).reshape(golden.shape),
                                  golden)
    assert not written.reshape(-1)[golden.size * 4:].any()


def test_max_pool2d_with_mask_single_tap_kernel_sets_every_output_bit():
    """A 1 x 1 kernel: CANN's bit mask (16-bit words per output position and group of 16
    channels), each window's only position taken."""
    x = _data((2, 18, 5, 7), np.float32)
    out, mask = openacl.ops.max_pool2d_with_mask(_dev(x), [1], [2], [0], [1], False)
    np.testing.assert_array_equal(out.numpy(), x[..., ::2, ::2])
    outputs = 3 * 4
    mask = mask.numpy()
    assert mask.shape == (2, 18, 1, 64)
    words = mask.reshape(-1)[:2 * 2 * 32 * 2].view("<u2").reshape(2, 2, 32)
    np.testing.assert_array_equal(words[:, 0, :outputs], 0xFFFF)
    np.testing.assert_array_equal(words[:, 1, :outputs], 0b11)  # channels 16 and 17
    assert not words[..., outputs:].any() and not mask.reshape(-1)[2 * 2 * 64:].any()


def test_max_pool2d_with_mask_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 3, 3), np.float32)
    mask = openacl.empty((1, 2, 4, 64), np.int8)
    phase1 = aclnn.max_pool2d_with_mask_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", phase1, None, [2], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "kernelSize", phase1, x, None, [], [0], [1], False, out,
            mask)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "out", phase1, x, [2], [], [0], [1], False, None, mask)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "indices", phase1, x, [2], [], [0], [1], False, out, None)
    for bad in (np.float64, np.int32):
        _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 2, 6, 6), bad)),
                [2], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((6, 6), np.float32)),
            [2], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 1, 2, 6, 6), np.float32)),
            [2], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 0, 6, 6), np.float32)),
            [2], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "kernelSize", phase1, x, [2, 2, 2], [], [0], [1], False,
            out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "kernelSize", phase1, x, [0], [], [0], [1], False, out,
            mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "stride", phase1, x, [2], [0], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "stride", phase1, x, [2], [2, 2, 2], [0], [1], False, out,
            mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "padding", phase1, x, [2], [], [2], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "padding", phase1, x, [2], [], [-1], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "padding", phase1, x, [2], [], [], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "dilation", phase1, x, [2], [], [0], [2], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "dilation", phase1, x, [2], [], [0], [1, 1, 1], False, out,
            mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, x, [7], [], [0], [1], False, out, mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [2], [], [0], [1], False,
            openacl.empty((1, 2, 2, 2), np.float32), mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [2], [], [0], [1], False,
            openacl.empty((1, 2, 3, 3), np.float16), mask)
    _expect(ACLNN_ERR_PARAM_INVALID, "indices", phase1, x, [2], [], [0], [1], False, out,
            openacl.empty((1, 2, 4, 64), np.int32))
    _expect(ACLNN_ERR_PARAM_INVALID, "indices", phase1, x, [2], [], [0], [1], False, out,
            openacl.empty((1, 2, 3, 3), np.int8))


# -- MaxPool (ONNX-style) ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS + [np.dtype(t) for t in (np.int8, np.uint8,
                                                                       np.int32, np.int64)],
                         ids=str)
def test_max_pool_asymmetric_pads(dtype):
    x = _data((2, 3, 7, 8), dtype, 1)
    t = to_torch(x)
    low = torch.finfo(t.dtype).min if t.is_floating_point() else torch.iinfo(t.dtype).min
    # pads (top, left, bottom, right) = (1, 0, 2, 1) == F.pad's (left, right, top, bottom)
    golden = F.max_pool2d(F.pad(t, (0, 1, 1, 2), value=low), 3, 2)
    result = openacl.ops.max_pool(_dev(x), [3, 3], [2, 2], 0, [1, 0, 2, 1], [1, 1], 0)
    assert_close(result.numpy(), from_torch(golden), f"max_pool {dtype}")


@pytest.mark.parametrize("pads,ceil", [([], 0), ([1], 1), ([1, 0], 5)])
def test_max_pool_symmetric_pads_and_ceil_mode(pads, ceil):
    x = _data((1, 2, 8, 9), np.float32, 2)
    padding = (pads * 2)[:2] if pads else [0, 0]
    golden = F.max_pool2d(to_torch(x), [3, 2], [2, 2], padding, 1, bool(ceil))
    result = openacl.ops.max_pool(_dev(x), [3, 2], [2], 0, pads, [], ceil)
    assert_close(result.numpy(), from_torch(golden))


@pytest.mark.parametrize("kernel,stride,pads,ceil", [
    ([3, 3], [1, 1], [1, 1, 1, 1], 0),  # PP-OCRv6's 3x3 stride 1
    ([3, 3], [2, 2], [1, 0, 2, 1], 0),
    ([2, 3], [2, 3], [0, 1, 0, 1], 1),
    ([5, 1], [1, 2], [2, 0, 2, 0], 0),
])
def test_float32_max_pool_agrees_with_torch_and_the_numpy_path(kernel, stride, pads, ceil):
    """float32 host planes take the C kernels' one-pass max pool: NaN and infinities as
    torch (a NaN in a window wins), and the very values of the separable numpy passes."""
    x = _data((2, 3, 11, 13), np.float32, 4)
    x[0, 0, 2, 4], x[1, 2, 5, 6], x[0, 1, 0, 0] = np.nan, np.inf, -np.inf
    top, left, bottom, right = pads
    t = F.pad(to_torch(x), (left, right, top, bottom), value=float("-inf"))
    golden = F.max_pool2d(t, kernel, stride, 0, 1, bool(ceil))
    result = openacl.ops.max_pool(_dev(x), kernel, stride, 0, pads, [1, 1], ceil).numpy()
    assert_close(result, from_torch(golden))
    assert np.isnan(result).any() and np.isposinf(result).any()
    from openacl.ops.pooling import Axis, _max_values
    axes = [Axis(n, k, s, before, after, 1, bool(ceil)) for n, k, s, before, after in zip(
        x.shape[2:], kernel, stride, (top, left), (bottom, right), strict=True)]
    np.testing.assert_array_equal(result, _max_values(x, axes))


# -- AvgPool2d ----------------------------------------------------------------------------------
# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ([2], [], [0], False, True, 0),
    ([3, 3], [2, 2], [1, 1], False, True, 0),
    ([3, 3], [2, 2], [1, 1], False, False, 0),
    ([3, 2], [2, 1], [1, 1], True, True, 0),
    ([3, 2], [2, 1], [1, 1], True, False, 0),
    ([4], [3], [2], True, True, 5),
    ([2, 3], [1, 2], [0, 1], False, False, -3),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_avg_pool2d_matches_torch(case, dtype):
    kernel, stride, padding, ceil, include_pad, divisor = case
    x = _data((2, 3, 9, 10), dtype, 3)
    golden = F.avg_pool2d(to_torch(x), kernel, stride or None, padding, ceil, include_pad,
                          divisor or None)
    result = openacl.ops.avg_pool2d(_dev(x), kernel, stride, padding, ceil, include_pad,
                                    divisor, 0)
    assert_close(result.numpy(), from_torch(golden), f"avg_pool2d {case} {dtype}")


# -- adaptive pooling ---------------------------------------------------------------------------
@pytest.mark.parametrize("size,out", [((8, 8), (4, 2)), ((7, 10), (3, 4)), ((5, 5), (5, 5)),
                                      ((6, 9), (1, 1)), ((3, 4), (5, 7))], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_adaptive_avg_pool2d_matches_torch(size, out, dtype):
    x = _data((2, 3, *size), dtype, 4)
    golden = F.adaptive_avg_pool2d(to_torch(x), out)
    assert_close(openacl.ops.adaptive_avg_pool2d(_dev(x), list(out)).numpy(), from_torch(golden))


@pytest.mark.parametrize("size,out", [((8, 8), (4, 2)), ((7, 10), (3, 4)), ((3, 4), (5, 7)),
                                      ((6, 9), (1, 1))], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS + [np.dtype(np.float64)], ids=str)
def test_adaptive_max_pool2d_matches_torch(size, out, dtype):
    x = _data((2, 3, *size), dtype, 5)
    values, indices = F.adaptive_max_pool2d(to_torch(x), out, return_indices=True)
    result, idx = openacl.ops.adaptive_max_pool2d(_dev(x), list(out))
    assert_close(result.numpy(), from_torch(values))
    np.testing.assert_array_equal(idx.numpy(), from_torch(indices))


def test_adaptive_pools_take_3d_input():
    x = _data((3, 7, 5), np.float32, 6)
    assert_close(openacl.ops.adaptive_avg_pool2d(_dev(x), [2, 3]).numpy(),
                 from_torch(F.adaptive_avg_pool2d(to_torch(x), (2, 3))))
    values, indices = F.adaptive_max_pool2d(to_torch(x), (2, 3), return_indices=True)
    result, idx = openacl.ops.adaptive_max_pool2d(_dev(x), [2, 3])
    assert_close(result.numpy(), from_torch(values))
    np.testing.assert_array_equal(idx.numpy(), from_torch(indices))


# -- non-contiguous input ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_input(kind):
    x = _data((2, 3, 6, 8), np.float32, 7)
    t = to_torch(x)
    source = strided(x, kind)  # kept referenced until the results were read
    out, idx = openacl.ops.max_pool2d_with_indices(source, [3], [2], [1], [1], True)
    values, indices = F.max_pool2d(t, 3, 2, 1, 1, True, return_indices=True)
    assert_close(out.numpy(), from_torch(values))
    np.testing.assert_array_equal(idx.numpy(), from_torch(indices))
    assert_close(openacl.ops.avg_pool2d(source, [2], [], [1], False, False, 0, 0).numpy(),
                 from_torch(F.avg_pool2d(t, 2, None, 1, False, False)))
    assert_close(openacl.ops.adaptive_avg_pool2d(source, [4, 3]).numpy(),
                 from_torch(F.adaptive_avg_pool2d(t, (4, 3))))
    result, idx = openacl.ops.adaptive_max_pool2d(source, [4, 3])
    assert_close(result.numpy(), from_torch(F.adaptive_max_pool2d(t, (4, 3))))
    assert_close(openacl.ops.max_pool(source, [2, 2], [], 0, [], [], 0).numpy(),
                 from_torch(F.max_pool2d(t, 2, 1)))


def test_non_contiguous_output():
    x = _data((1, 2, 6, 6), np.float32, 8)
    out = strided(np.zeros((1, 2, 3, 3), np.float32), "transpose")
    source = _dev(x)
    ws, exe = aclnn.avg_pool2d_get_workspace_size(source, [2], [], [0], False, True, 0, 0, out)
    aclnn.avg_pool2d(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(F.avg_pool2d(to_torch(x), 2)))


# -- phase-1 errors ---------------------------------------------------------------------------
def _expect(code, argument, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


def test_max_pool2d_with_indices_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 3, 3), np.float32)
    idx = openacl.empty((1, 2, 3, 3), np.int64)
    phase1 = aclnn.max_pool2d_with_indices_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", phase1, None, [2], [], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "kernelSize", phase1, x, None, [], [0], [1], False, out,
            idx)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "out", phase1, x, [2], [], [0], [1], False, None, idx)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "indices", phase1, x, [2], [], [0], [1], False, out, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 2, 6, 6), np.float64)),
            [2], [], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((6, 6), np.float32)),
            [2], [], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "kernelSize", phase1, x, [2, 2, 2], [], [0], [1], False,
            out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "kernelSize", phase1, x, [0], [], [0], [1], False, out,
            idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "stride", phase1, x, [2], [0], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "padding", phase1, x, [2], [], [2], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "padding", phase1, x, [2], [], [], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "dilation", phase1, x, [2], [], [0], [0], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, x, [7], [], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [3], [], [0], [1], False, out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [2], [], [0], [1], False,
            openacl.empty((1, 2, 3, 3), np.float16), idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "indices", phase1, x, [2], [], [0], [1], False, out,
            openacl.empty((1, 2, 3, 3), np.float32))
    _expect(ACLNN_ERR_PARAM_INVALID, "ceilMode", phase1, x, [2], [], [0], [1], 1, out, idx)


def test_max_pool_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 5, 5), np.float32)
    phase1 = aclnn.max_pool_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", phase1, None, [2], [], 0, [], [], 0, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "out", phase1, x, [2], [], 0, [], [], 0, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 2, 6, 6), np.bool_)),
            [2], [], 0, [], [], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "autoPad", phase1, x, [2], [], 1, [], [], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "strides", phase1, x, [2], [1, 1, 1], 0, [], [], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "pads", phase1, x, [2], [], 0, [1, 1, 1], [], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "pads", phase1, x, [2], [], 0, [2, 0, 1, 0], [], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "dilations", phase1, x, [2], [], 0, [], [2], 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [2], [2], 0, [], [], 0, out)


def test_avg_pool2d_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 3, 3), np.float32)
    phase1 = aclnn.avg_pool2d_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", phase1, None, [2], [], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "paddings", phase1, x, [2], [], None, False, True, 0, 0,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 2, 6, 6), np.int32)),
            [2], [], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((1, 2, 0, 6), np.float32)),
            [2], [], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "kernelSize", phase1, x, [], [], [0], False, True, 0, 0,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, "strides", phase1, x, [2], [-1], [0], False, True, 0, 0,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, "paddings", phase1, x, [2], [], [-1], False, True, 0, 0,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, "paddings", phase1, x, [2], [], [2], False, True, 0, 0,
            out)
    _expect(ACLNN_ERR_PARAM_INVALID, "cubeMathType", phase1, x, [2], [], [0], False, True, 0,
            3, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [3], [], [0], False, True, 0, 0, out)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", phase1, x, [2], [], [0], False, True, 0, 0,
            openacl.empty((1, 2, 3, 3), np.float16))


def test_adaptive_pool_errors():
    x = _dev(np.ones((1, 2, 6, 6), np.float32))
    out = openacl.empty((1, 2, 3, 3), np.float32)
    idx = openacl.empty((1, 2, 3, 3), np.int64)
    avg, mx = aclnn.adaptive_avg_pool2d_get_workspace_size, \
        aclnn.adaptive_max_pool2d_get_workspace_size
    _expect(ACLNN_ERR_PARAM_NULLPTR, "self", avg, None, [3, 3], out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "outputSize", avg, x, None, out)
    _expect(ACLNN_ERR_PARAM_NULLPTR, "indicesOut", mx, x, [3, 3], out, None)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", avg, _dev(np.ones((1, 2, 6, 6), np.float64)),
            [3, 3], out)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", mx, _dev(np.ones((1, 2, 6, 6), np.int32)),
            [3, 3], out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "self", avg, _dev(np.ones((1, 1, 2, 6, 6), np.float32)),
            [3, 3], out)
    _expect(ACLNN_ERR_PARAM_INVALID, "outputSize", avg, x, [3], out)
    _expect(ACLNN_ERR_PARAM_INVALID, "outputSize", mx, x, [0, 3], out, idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "out", avg, x, [2, 3], out)
    _expect(ACLNN_ERR_PARAM_INVALID, "outputOut", mx, x, [3, 3],
            openacl.empty((1, 2, 3, 3), np.float16), idx)
    _expect(ACLNN_ERR_PARAM_INVALID, "indicesOut", mx, x, [3, 3], out,
            openacl.empty((1, 2, 3, 3), np.int32))


def test_empty_batch():
    x = np.zeros((0, 2, 6, 6), np.float32)
    out, idx = openacl.ops.max_pool2d_with_indices(_dev(x), [2], [], [0], [1], False)
    assert out.numpy().shape == idx.numpy().shape == (0, 2, 3, 3)
    assert openacl.ops.avg_pool2d(_dev(x), [2], [], [0], False, True, 0, 0).numpy().shape == \
        (0, 2, 3, 3)
    assert openacl.ops.adaptive_avg_pool2d(_dev(x), [4, 5]).numpy().shape == (0, 2, 4, 5)
    result, idx = openacl.ops.adaptive_max_pool2d(_dev(x), [4, 5])
    assert result.numpy().shape == idx.numpy().shape == (0, 2, 4, 5)


@pytest.mark.parametrize("size,out", [((1, 5), (1, 3)), ((7, 10), (3, 4)), ((3, 4), (5, 7))],
                         ids=str)
def test_adaptive_avg_pool2d_keeps_inf_in_its_own_bins(size, out):
    """An inf in an early bin made every later bin of its row NaN (a prefix sum's inf - inf):
    [1, 2, inf, 3, 4] pooled to 3 gave [1.5, inf, nan]; torch gives [1.5, inf, 3.5]."""
    x = _data((1, 2, *size), np.float32, 7)
    if size == (1, 5):
        x[0, 0, 0] = [1, 2, np.inf, 3, 4]
    else:
        x[..., 0, 1] = np.inf
        x[0, 1, -1, 0] = -np.inf
    result = openacl.ops.adaptive_avg_pool2d(_dev(x), list(out)).numpy()
    golden = from_torch(F.adaptive_avg_pool2d(to_torch(x).double(), out).float())
    assert_close(result, golden)
    if size == (1, 5):
        np.testing.assert_array_equal(result[0, 0, 0], [1.5, np.inf, 3.5])


# -- global pooling -----------------------------------------------------------------------------
def _rounded(tensor, dtype):
    return from_torch(tensor.to(to_torch(np.zeros(1, dtype)).dtype))


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 2, 3, 4, 5), (2, 1, 2, 2, 2, 2)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS + [np.dtype(np.float64)], ids=str)
def test_global_average_and_max_pool(shape, dtype):
    x = _data(shape, dtype, 8)
    x.reshape(-1)[1] = np.inf  # one plane's max and mean become inf, the others stay finite
    wide, dims = to_torch(x).double(), list(range(2, len(shape)))
    assert_close(openacl.ops.global_average_pool(_dev(x)).numpy(),
                 _rounded(wide.mean(dims, keepdim=True), dtype), f"global avg {dtype}")
    if dtype != BF16:  # (GlobalMaxPool: float16, float32, float64)
        assert_close(openacl.ops.global_max_pool(_dev(x)).numpy(),
                     _rounded(wide.amax(dims, keepdim=True), dtype), f"global max {dtype}")


def test_global_pool_propagates_nan_and_errors():
    x = _data((1, 2, 3, 3), np.float32, 9)
    x[0, 0, 1, 1] = np.nan
    result = openacl.ops.global_max_pool(_dev(x)).numpy()
    assert np.isnan(result[0, 0, 0, 0]) and result[0, 1, 0, 0] == x[0, 1].max()
    for fn in (openacl.ops.global_average_pool, openacl.ops.global_max_pool):
        with pytest.raises(AclError) as info:
            fn(None)
        assert info.value.code == ACLNN_ERR_PARAM_NULLPTR
        for bad in (np.ones((2, 3, 4), np.float32), np.ones((2, 3, 4, 4), np.int32)):
            with pytest.raises(AclError) as info:
                fn(_dev(bad))
            assert info.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(AclError) as info:
        openacl.ops.global_max_pool(_dev(np.ones((1, 1, 2, 2), BF16)))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    out = openacl.empty((1, 2, 1, 2), np.float32)
    source = _dev(x)
    with pytest.raises(AclError) as info:
        aclnn.global_average_pool_get_workspace_size(source, out)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


def test_max_pool_indices_of_nan_windows_are_torch_s_last_nan():
    """PyTorch's CPU pools scan ``val > max || isnan(val)``: a window holding NaN reports its
    last NaN."""
    x = _data((2, 3, 9, 4), np.float32, 10)
    x[0, 0, 2, 1] = x[0, 0, 5, 3] = np.nan
    x[1, 1] = np.nan
    _, idx = openacl.ops.max_pool2d_with_indices(_dev(x), [3], [2], [1], [1], False)
    _, golden = F.max_pool2d(to_torch(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), from_torch(golden))
    _, idx = openacl.ops.adaptive_max_pool2d(_dev(x), [2, 3])
    _, golden = F.adaptive_max_pool2d(to_torch(x), (2, 3), return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), from_torch(golden))
