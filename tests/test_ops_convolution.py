"""Convolution against PyTorch CPU, with CANN's precision standard.

The golden is PyTorch computed in float64 from the same (rounded) inputs, then rounded to the
tested dtype: a higher-precision golden, as CANN's standard prescribes.
"""

from __future__ import annotations

import importlib
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, FLOATS, assert_close, random_array, strided
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

CONVOLUTION = importlib.import_module("openacl.ops.conv")

F32 = np.dtype(np.float32)
FORWARD = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


# every test on both kernel implementations: the C extension's and numpy's
pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _t64(array):
    return torch.from_numpy(np.asarray(array).astype(np.float64))


def _golden(x, w, b, stride, padding, dilation, transposed, output_padding, groups, dtype):
    spatial = x.ndim - 2
    bias = None if b is None else _t64(b)
    if transposed:
        result = TRANSPOSED[spatial](_t64(x), _t64(w), bias, stride, padding,
                                     output_padding, groups, dilation)
    else:
        result = FORWARD[spatial](_t64(x), _t64(w), bias, stride, padding, dilation, groups)
    return result.numpy().astype(dtype)


CASES = {
    # name: (input, weight, stride, padding, dilation, transposed, output_padding, groups)
    "1d": ((2, 4, 9), (6, 4, 3), [1], [1], [1], False, None, 1),
    "1d-stride-dilation-groups": ((2, 4, 11), (6, 2, 3), [2], [2], [2], False, None, 2),
    "2d": ((2, 3, 7, 8), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1], False, None, 1),
    "2d-stride-pad": ((1, 3, 9, 8), (4, 3, 3, 2), [2, 3], [1, 0], [1, 1], False, None, 1),
    "2d-dilation": ((1, 2, 9, 9), (3, 2, 3, 3), [1, 1], [2, 1], [2, 3], False, None, 1),
    "2d-groups": ((2, 6, 6, 7), (4, 3, 3, 3), [1, 2], [1, 1], [1, 1], False, None, 2),
    "2d-depthwise": ((2, 8, 7, 6), (8, 1, 3, 3), [1, 1], [1, 1], [1, 1], False, None, 8),
    "2d-depthwise-strided": ((1, 20, 9, 9), (20, 1, 3, 2), [2, 1], [1, 1], [2, 1], False,
                             None, 20),
    "2d-depthwise-5x5": ((2, 6, 9, 8), (6, 1, 5, 5), [1, 1], [2, 1], [1, 1], False, None, 6),
    "1d-depthwise-strided": ((2, 5, 13), (5, 1, 4), [3], [2], [2], False, None, 5),
    # silero's 258 channels of 1 x 5 at 8 positions: the C lanes over a plane of one row
    "1d-depthwise-lanes": ((1, 37, 8), (37, 1, 5), [1], [2], [1], False, None, 37),
    "1d-depthwise-wide": ((1, 6, 70), (6, 1, 3), [1], [1], [1], False, None, 6),
    "3d-depthwise-strided": ((1, 4, 5, 6, 5), (4, 1, 3, 2, 3), [2, 1, 2], [1, 0, 1],
                             [1, 2, 1], False, None, 4),
    "2d-1x1": ((2, 5, 4, 3), (7, 5, 1, 1), [1, 1], [0, 0], [1, 1], False, None, 1),
    "2d-1x1-strided": ((1, 5, 5, 4), (3, 5, 1, 1), [2, 1], [0, 0], [1, 1], False, None, 1),
    "2d-depth-multiplier": ((1, 3, 6, 6), (6, 1, 3, 3), [1, 1], [0, 0], [1, 1], False, None,
                            3),
    # stride 1, one group, >= SHIFTED_MIN_CHANNELS inputs: the shifted-windows kernel (the
    # test lowers SHIFTED_MIN_COLUMN_BYTES so that these small cases take it)
    "1d-shifted": ((2, 16, 9), (6, 16, 3), [1], [1], [2], False, None, 1),
    "2d-shifted": ((2, 16, 7, 8), (5, 16, 3, 3), [1, 1], [1, 1], [1, 1], False, None, 1),
    "2d-shifted-dilation-asym": ((1, 20, 9, 8), (4, 20, 3, 2), [1, 1], [2, 0], [2, 1], False,
                                 None, 1),
    "2d-shifted-1x1": ((1, 16, 5, 6), (7, 16, 1, 1), [1, 1], [0, 0], [1, 1], False, None, 1),
    "3d-shifted": ((1, 16, 4, 5, 4), (3, 16, 3, 2, 3), [1, 1, 1], [1, 0, 1], [1, 1, 2], False,
                   None, 1),
    "3d": ((1, 2, 5, 6, 5), (3, 2, 3, 2, 3), [1, 2, 1], [1, 0, 1], [1, 1, 2], False, None, 1),
    "1d-transposed": ((2, 4, 7), (4, 3, 3), [3], [1], [2], True, [1], 1),
    "2d-transposed": ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 0], [1, 1], True, [1, 1], 2),
    "2d-transposed-dilation": ((1, 2, 4, 4), (2, 3, 2, 3), [1, 2], [0, 2], [2, 1], True,
                               [0, 1], 1),
    # stride == kernel (dilation 1, no output padding): the taps tile the output
    "1d-transposed-tiled": ((2, 4, 5), (4, 2, 3), [3], [0], [1], True, [0], 2),
    "2d-transposed-tiled": ((2, 4, 3, 5), (4, 3, 2, 3), [2, 3], [0, 0], [1, 1], True,
                            [0, 0], 1),
    "2d-transposed-tiled-cropped": ((1, 2, 4, 3), (2, 3, 2, 2), [2, 2], [1, 0], [1, 1],
                                    True, [0, 0], 1),
    "2d-transposed-tiled-2x2-groups": ((2, 6, 4, 5), (6, 2, 2, 2), [2, 2], [0, 0], [1, 1],
                                       True, [0, 0], 3),
    "2d-transposed-tiled-1x3": ((1, 3, 4, 7), (3, 2, 1, 3), [1, 3], [0, 0], [1, 1], True,
                                [0, 0], 1),
    "3d-transposed-tiled": ((1, 2, 2, 3, 2), (2, 2, 2, 1, 2), [2, 1, 2], [0, 0, 0],
                            [1, 1, 1], True, [0, 0, 0], 2),
    "3d-transposed": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), [2, 1, 2], [0, 1, 0], [1, 1, 1], True,
                      [1, 0, 0], 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
def test_convolution_matches_torch(name, dtype, with_bias, monkeypatch):
    if "shifted" in name:  # small cases take the path large ones do
        monkeypatch.setattr(CONVOLUTION, "SHIFTED_MIN_COLUMN_BYTES", 0)
    shape_x, shape_w, stride, padding, dilation, transposed, output_padding, groups = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # hash() is salted per process
    x = random_array(shape_x, dtype, rng, -2, 2)
    w = random_array(shape_w, dtype, rng, -1, 1)
    c_out = shape_w[1] * groups if transposed else shape_w[0]
    b = random_array((c_out,), dtype, rng, -1, 1) if with_bias else None
    golden = _golden(x, w, b, stride, padding, dilation, transposed, output_padding or [0] *
                     len(stride), groups, dtype)
    result = openacl.ops.convolution(_dev(x), _dev(w), None if b is None else _dev(b), stride,
                                     padding, dilation, transposed, output_padding, groups)
    assert_close(result.numpy(), golden, f"{name} {dtype}")


@pytest.mark.parametrize("name", ["1d", "1d-stride-dilation-groups", "2d", "2d-stride-pad",
                                  "2d-dilation", "2d-groups", "3d", "2d-1x1-strided"])
def test_im2col_gathered_and_copied_columns_agree(name, monkeypatch):
    """Small convolutions gather their columns by phase-1 indices, large ones copy strided
    windows (one image's 2-d columns a block of rows at a time): the same numbers every way
    (the copies forced here on small cases)."""
    shape_x, shape_w, stride, padding, dilation, _, _, groups = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x, w = random_array(shape_x, np.float32, rng, -2, 2), random_array(shape_w, np.float32,
                                                                        rng, -1, 1)
    b = random_array((shape_w[0],), np.float32, rng, -1, 1)
    results = []
    # gathered; copied whole; copied a few output rows at a time (one image, one group, 2-d)
    for gather, block in ((CONVOLUTION.GATHER_MAX_COLUMNS, CONVOLUTION.IM2COL_BLOCK_MIN_BYTES),
                          (0, 1 << 40), (0, 0)):
        monkeypatch.setattr(CONVOLUTION, "GATHER_MAX_COLUMNS", gather)
        monkeypatch.setattr(CONVOLUTION, "IM2COL_BLOCK_MIN_BYTES", block)
        monkeypatch.setattr(CONVOLUTION, "IM2COL_BLOCK_BYTES", 1)
        results.append(openacl.ops.convolution(_dev(x), _dev(w), _dev(b), stride, padding,
                                               dilation, False, None, groups).numpy())
    golden = _golden(x, w, b, stride, padding, dilation, False, [0] * len(stride), groups,
                     np.float32)
    for result in results:
        assert_close(result, golden, name)


@pytest.mark.parametrize("name", sorted(n for n in CASES if "shifted" in n))
@pytest.mark.parametrize("mode", ["tap-by-tap", "stacked-in-blocks", "stacked-one-block"])
def test_shifted_windows_both_accumulations(name, mode, monkeypatch):
    # the shifted-windows kernel sums its taps either one matmul per tap, or (thin outputs)
    # one stacked matmul per block of grid columns (2-d float32: of output rows, the taps
    # summed by the C kernels); force each, with many small blocks or one
    monkeypatch.setattr(CONVOLUTION, "SHIFTED_MIN_COLUMN_BYTES", 0)
    if mode == "tap-by-tap":
        monkeypatch.setattr(CONVOLUTION, "STACKED_MAX_ROWS", 0)
    elif mode == "stacked-in-blocks":
        monkeypatch.setattr(CONVOLUTION, "STACKED_BLOCK_BYTES", 1)
        monkeypatch.setattr(CONVOLUTION, "STACKED_MIN_BLOCK", 5)
    shape_x, shape_w, stride, padding, dilation, _, _, _ = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = random_array(shape_x, np.float32, rng, -2, 2)
    w = random_array(shape_w, np.float32, rng, -1, 1)
    b = random_array((shape_w[0],), np.float32, rng, -1, 1)
    golden = _golden(x, w, b, stride, padding, dilation, False, [0] * len(stride), 1,
                     np.float32)
    result = openacl.ops.convolution(_dev(x), _dev(w), _dev(b), stride, padding, dilation,
                                     False, None, 1)
    assert_close(result.numpy(), golden, f"{name} {mode}")


def test_float64_input_into_float32_output_sums_taps_in_float64(monkeypatch):
    # the stacked-taps path with a float64 compute dtype must not round each tap's product
    # to float32 before summing (the C tap sums are float32-only): review regression
    monkeypatch.setattr(CONVOLUTION, "SHIFTED_MIN_COLUMN_BYTES", 0)
    rng = np.random.default_rng(1)
    x = 1e6 + rng.standard_normal((1, 16, 20, 20))
    w = np.zeros((8, 16, 3, 3))
    w[:, :, 1, 1] = 4  # a Laplacian: the taps cancel the large offset
    w[:, :, 0, 1] = w[:, :, 2, 1] = w[:, :, 1, 0] = w[:, :, 1, 2] = -1
    out = openacl.empty((1, 8, 18, 18), np.float32)
    xd, wd = _dev(x), _dev(w)
    ws, exe = aclnn.convolution_get_workspace_size(xd, wd, None, [1, 1], [0, 0], [1, 1], False,
                                                   [0, 0], 1, out, 0)
    aclnn.convolution(0, ws, exe, 0)
    golden = F.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(out.numpy(), golden, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["2d-depthwise-5x5", "2d-depthwise-strided",
                                  "3d-depthwise-strided"])
@pytest.mark.parametrize("column_bytes", [1, 2000], ids=["row-tiles", "channel-tiles"])
def test_depthwise_columns_in_small_tiles(name, column_bytes, monkeypatch):
    # column buffers of one output row of one channel (the smallest tile), or of a few
    # whole planes: every tiling gives the same result
    monkeypatch.setattr(CONVOLUTION, "DEPTHWISE_COLUMN_BYTES", column_bytes)
    shape_x, shape_w, stride, padding, dilation, _, _, groups = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = random_array(shape_x, np.float32, rng, -2, 2)
    w = random_array(shape_w, np.float32, rng, -1, 1)
    golden = _golden(x, w, None, stride, padding, dilation, False, [0] * len(stride), groups,
                     np.float32)
    result = openacl.ops.convolution(_dev(x), _dev(w), None, stride, padding, dilation,
                                     False, None, groups)
    assert_close(result.numpy(), golden, f"{name} {column_bytes}")


@pytest.mark.parametrize("shape_x, shape_w, stride, padding, dilation", [
    ((2, 3, 400, 400), (3, 1, 3, 3), [2, 2], [1, 1], [2, 2]),
    ((1, 2, 70001), (2, 1, 3), [1], [1], [1]),
], ids=["2d", "1d"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_depthwise_planes_larger_than_a_tile(shape_x, shape_w, stride, padding, dilation,
                                              dtype):
    # a plane over DEPTHWISE_TILE_ELEMENTS is split by output rows, the last tile partial;
    # positive data keeps the results clear of cancellation near zero (the standard's
    # small-value rule)
    rng = np.random.default_rng(7)
    x = random_array(shape_x, dtype, rng, 0.5, 2)
    w = random_array(shape_w, dtype, rng, 0.1, 1)
    b = random_array((shape_w[0],), dtype, rng, 0.1, 1)
    groups = shape_w[0]
    golden = _golden(x, w, b, stride, padding, dilation, False, [0] * len(stride), groups,
                     dtype)
    result = openacl.ops.convolution(_dev(x), _dev(w), _dev(b), stride, padding, dilation,
                                     False, None, groups)
    assert_close(result.numpy(), golden, f"depthwise {shape_x} {dtype}")


def test_asymmetric_padding_four_values():
    x, w = random_array((1, 2, 6, 7), F32), random_array((3, 2, 3, 3), F32)
    result = openacl.ops.convolution(_dev(x), _dev(w), None, [1, 1], [1, 0, 2, 1], [1, 1])
    padded = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)))
    assert_close(result.numpy(), _golden(padded, w, None, [1, 1], [0, 0], [1, 1], False,
                                         [0, 0], 1, F32))


@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_input_weight_output(kind):
    x, w = random_array((2, 3, 6, 5), F32), random_array((4, 3, 3, 3), F32)
    b = random_array((4,), F32)
    inputs, weights, bias = strided(x, kind), strided(w, kind), strided(b)
    out = strided(np.zeros((2, 4, 6, 5), np.float32), kind)
    ws, exe = aclnn.convolution_get_workspace_size(inputs, weights, bias, [1, 1], [1, 1],
                                                   [1, 1], False, [0, 0], 1, out, 0)
    aclnn.convolution(0, ws, exe, 0)
    assert_close(out.numpy(), _golden(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, F32))


def test_empty_batch_and_half_input_into_float_output():
    x, w = np.zeros((0, 2, 5, 5), np.float32), random_array((3, 2, 3, 3), F32)
    assert openacl.ops.convolution(_dev(x), _dev(w), None, [1, 1], [0, 0], [1, 1]
                                   ).numpy().shape == (0, 3, 3, 3)
    x16, w16 = random_array((1, 2, 5, 5), np.float16), random_array((3, 2, 3, 3), np.float16)
    inputs, weights = _dev(x16), _dev(w16)
    out = openacl.empty((1, 3, 3, 3), np.float32)  # non-transposed output may differ in dtype
    ws, exe = aclnn.convolution_get_workspace_size(inputs, weights, None, [1, 1], [0, 0],
                                                   [1, 1], False, [0, 0], 1, out, 0)
    aclnn.convolution(0, ws, exe, 0)
    assert_close(out.numpy(), _golden(x16, w16, None, [1, 1], [0, 0], [1, 1], False, [0, 0],
                                      1, F32))


def test_use_fp16_rounds_float32_operands():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    keep = openacl.ops.convolution(_dev(x), _dev(w), None, [1, 1], [1, 1], [1, 1], False, None,
                                   1, 0).numpy()
    fp16 = openacl.ops.convolution(_dev(x), _dev(w), None, [1, 1], [1, 1], [1, 1], False, None,
                                   1, 2).numpy()
    rounded = _golden(x.astype(np.float16), w.astype(np.float16), None, [1, 1], [1, 1], [1, 1],
                      False, [0, 0], 1, F32)
    np.testing.assert_allclose(fp16, rounded, rtol=1e-5, atol=1e-5)
    assert not np.allclose(keep, fp16, rtol=1e-7, atol=0)


def _error(*args):
    with pytest.raises(AclError) as info:
        aclnn.convolution_get_workspace_size(*args)
    return info.value


def test_convolution_errors():
    x, w = _dev(np.ones((1, 4, 6, 6), np.float32)), _dev(np.ones((2, 4, 3, 3), np.float32))
    out = openacl.empty((1, 2, 4, 4), np.float32)
    good = [x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out, 0]

    def with_(index, value):
        args = list(good)
        args[index] = value
        return args

    cases = [
        (with_(0, None), ACLNN_ERR_PARAM_NULLPTR, "'input'"),
        (with_(1, None), ACLNN_ERR_PARAM_NULLPTR, "'weight'"),
        (with_(9, None), ACLNN_ERR_PARAM_NULLPTR, "'output'"),
        (with_(3, None), ACLNN_ERR_PARAM_NULLPTR, "'stride'"),
        (with_(4, None), ACLNN_ERR_PARAM_NULLPTR, "'padding'"),
        (with_(5, None), ACLNN_ERR_PARAM_NULLPTR, "'dilation'"),
        (with_(6, None), ACLNN_ERR_PARAM_INVALID, "'transposed'"),
        (with_(0, _dev(np.ones((4, 6, 6), np.float32))), ACLNN_ERR_PARAM_INVALID, "'weight'"),
        (with_(0, _dev(np.ones((1, 4, 6, 6), np.int32))), ACLNN_ERR_PARAM_INVALID, "'input'"),
        (with_(0, _dev(np.ones((6, 6), np.float32))), ACLNN_ERR_PARAM_INVALID, "'input'"),
        (with_(2, _dev(np.ones(3, np.float32))), ACLNN_ERR_PARAM_INVALID, "'bias'"),
        (with_(3, [1]), ACLNN_ERR_PARAM_INVALID, "'stride'"),
        (with_(3, [0, 1]), ACLNN_ERR_PARAM_INVALID, "'stride'"),
        (with_(4, [1, 1, 1]), ACLNN_ERR_PARAM_INVALID, "'padding'"),
        (with_(4, [-1, 0]), ACLNN_ERR_PARAM_INVALID, "'padding'"),
        (with_(5, [1, 0]), ACLNN_ERR_PARAM_INVALID, "'dilation'"),
        (with_(8, 0), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (with_(8, 70000), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (with_(8, 3), ACLNN_ERR_PARAM_INVALID, "'groups'"),
        (with_(8, 2), ACLNN_ERR_PARAM_INVALID, "'weight'"),         # 4 != 4 * 2 channels
        (with_(9, openacl.empty((1, 2, 5, 5), np.float32)), ACLNN_ERR_PARAM_INVALID,
         "'output'"),
        (with_(9, openacl.empty((1, 2, 4, 4), np.int32)), ACLNN_ERR_PARAM_INVALID, "'output'"),
        (with_(10, 4), ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        (with_(1, _dev(np.ones((2, 4, 9, 9), np.float32))), ACLNN_ERR_PARAM_INVALID,
         "'weight'"),                                                # kernel > input
    ]
    for args, code, name in cases:
        error = _error(*args)
        assert error.code == code and name in error.message, (name, error.message)
    # transposed: output padding must be smaller than stride or dilation; exact output dtype
    t_out = openacl.empty((1, 2, 8, 8), np.float32)
    tw = _dev(np.ones((4, 2, 3, 3), np.float32))
    bad_pad = _error(x, tw, None, [1, 1], [0, 0], [1, 1], True, [1, 0], 1, t_out, 0)
    assert bad_pad.code == ACLNN_ERR_PARAM_INVALID and "'outputPadding'" in bad_pad.message
    half_out = _error(x, tw, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1,
                      openacl.empty((1, 2, 8, 8), np.float16), 0)
    assert half_out.code == ACLNN_ERR_PARAM_INVALID and "'output'" in half_out.message


def test_bfloat16_transposed_with_bias_two_phase_repeatable():
    x, w = random_array((1, 2, 3, 3), BF16), random_array((2, 2, 2, 2), BF16)
    b = random_array((2,), BF16)
    inputs, weights, bias = _dev(x), _dev(w), _dev(b)
    out = openacl.empty((1, 2, 6, 6), BF16)
    ws, exe = aclnn.convolution_get_workspace_size(inputs, weights, bias, [2, 2], [0, 0],
                                                   [1, 1], True, [0, 0], 1, out, 1)
    aclnn.set_executor_repeatable(exe)
    for _ in range(2):
        aclnn.convolution(0, ws, exe, 0)
    golden = _golden(x, w, b, [2, 2], [0, 0], [1, 1], True, [0, 0], 1, BF16)
    assert_close(out.numpy(), golden)
    aclnn.destroy_executor(exe)


def _bound_runs_pack_once(exe, constant: bool, out, expected) -> None:
    """Run the convolution's kernel as the engine does (bound to its views; the weight and
    bias constant or not) twice, exactly right each time, its weight packed (once) just
    when it is constant."""
    from openacl.ops import native
    from openacl.ops.executor import find_executor

    run = find_executor(exe).bound_kernel(
        None, frozenset({"weight", "bias"}) if constant else frozenset())
    if type(run.args[0]["output"]) is not np.ndarray:
        pytest.skip("the CUDA backends convolve with their own library")
    for _ in range(2):
        run()
        np.testing.assert_array_equal(out.numpy(), expected)
    packed = [value for value in run.args[0].derived.values()
              if isinstance(value, native.PackedMatrix)]
    assert len(packed) == (constant and native.kernels() is not None)


IMPLICIT_GEMM = {  # x, weight, stride, padding, dilation
    "2d": ((2, 12, 30, 28), (16, 12, 3, 3), [2, 2], [1, 1], [1, 1]),
    "1d": ((2, 6, 70), (10, 6, 5), [2], [3], [2]),
    # TensorFlow's 1-d convolution: a 2-d one over a single column, run laid out as a row
    "2d-one-column": ((1, 8, 90, 1), (12, 8, 5, 1), [1, 1], [2, 0], [1, 1]),
}


@pytest.mark.parametrize("constant", [False, True], ids=["weight-per-call", "model-weight"])
@pytest.mark.parametrize("name", sorted(IMPLICIT_GEMM))
def test_dense_convolution_by_the_packed_gemm(constant, name):
    """A dense 1-d or 2-d float32 convolution runs as the packed GEMM over im2col packed
    from the image; a model's constant weight (the engine's bound kernels) is packed once
    and the second run uses the packed copy. Small integers: every sum exact."""
    shape_x, shape_w, stride, padding, dilation = IMPLICIT_GEMM[name]
    rng = np.random.default_rng(11)
    x = rng.integers(-3, 4, shape_x).astype(np.float32)
    w = rng.integers(-2, 3, shape_w).astype(np.float32)
    b = rng.integers(-5, 6, shape_w[0]).astype(np.float32)
    expected = FORWARD[len(shape_x) - 2](_t64(x), _t64(w), _t64(b), stride, padding,
                                         dilation).numpy().astype(np.float32)
    out = openacl.empty(expected.shape, np.float32)
    tensors = [_dev(x), _dev(w), _dev(b)]  # (alive while the kernel runs)
    ws, exe = aclnn.convolution_get_workspace_size(*tensors, stride, padding, dilation, False,
                                                   [0] * len(stride), 1, out, 0)
    _bound_runs_pack_once(exe, constant, out, expected)


THIN = {  # x, weight, stride, padding, bias: few output positions, many output channels
    "1d-4-positions": ((1, 129, 4), (128, 129, 3), [1], [1], True),
    "1d-1-position": ((1, 64, 1), (128, 64, 3), [1], [1], True),
    "1d-strided": ((1, 128, 4), (64, 128, 3), [2], [1], False),
    "2d-2x2": ((1, 8, 3, 3), (32, 8, 3, 3), [2, 2], [1, 1], True),
}


@pytest.mark.parametrize("constant", [False, True], ids=["weight-per-call", "model-weight"])
@pytest.mark.parametrize("name", sorted(THIN))
def test_thin_convolution_by_the_transposed_packed_product(constant, name):
    """A convolution of one image with few output positions (silero's 1-d layers) and a
    model's constant weight computes positions x (taps, channels) against the weight
    reordered and packed once, the bias fused; a weight per call keeps the plain product.
    Both runs of the kernel, small integers: every sum exact."""
    shape_x, shape_w, stride, padding, with_bias = THIN[name]
    rng = np.random.default_rng(12)
    x = rng.integers(-3, 4, shape_x).astype(np.float32)
    w = rng.integers(-2, 3, shape_w).astype(np.float32)
    b = rng.integers(-5, 6, shape_w[0]).astype(np.float32)
    spatial = len(shape_x) - 2
    expected = FORWARD[spatial](_t64(x), _t64(w), _t64(b) if with_bias else None, stride,
                                padding, [1] * spatial).numpy().astype(np.float32)
    out = openacl.empty(expected.shape, np.float32)
    tensors = [_dev(x), _dev(w), _dev(b) if with_bias else None]
    ws, exe = aclnn.convolution_get_workspace_size(*tensors, stride, padding, [1] * spatial,
                                                   False, [0] * spatial, 1, out, 0)
    _bound_runs_pack_once(exe, constant, out, expected)
