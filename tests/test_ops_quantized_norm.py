"""QuantizedBatchNorm against torch.quantized_batch_norm and its float64 formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

QUANTIZED = {np.dtype(np.uint8): torch.quint8, np.dtype(np.int8): torch.qint8,
             np.dtype(np.int32): torch.qint32}


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return None if array is None else openacl.to_device(np.asarray(array))


def _formula(x, mean, var, in_scale, in_zero, out_scale, out_zero, weight, bias, eps, dtype):
    shape = (-1, 1, 1)
    y = ((x.astype(np.float64) - in_zero) * in_scale - mean.reshape(shape)) / np.sqrt(
        var.reshape(shape).astype(np.float64) + eps)
    y = y * weight.reshape(shape) + bias.reshape(shape)
    info = np.iinfo(dtype)
    return np.clip(np.rint(y / out_scale + out_zero), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", list(QUANTIZED), ids=str)
@pytest.mark.parametrize("out_scale", [0.05, -0.3])
def test_quantized_batch_norm_matches_the_formula(dtype, out_scale):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -100), min(info.max, 100), (2, 3, 4, 5)).astype(dtype)
    mean, var = rng.uniform(-2, 2, 3).astype(np.float32), rng.uniform(0, 4, 3).astype(np.float32)
    weight, bias = rng.uniform(-2, 2, 3).astype(np.float32), rng.uniform(-1, 1, 3).astype(
        np.float32)
    in_zero, out_zero = (3, 7) if dtype != np.uint8 else (10, 128)
    result = openacl.ops.quantized_batch_norm(_dev(x), _dev(mean), _dev(var), 0.1, in_zero,
                                              out_scale, out_zero, _dev(weight), _dev(bias),
                                              1e-5).numpy()
    want = _formula(x, mean, var, 0.1, in_zero, out_scale, out_zero, weight, bias, 1e-5, dtype)
    assert result.dtype == dtype
    assert np.abs(result.astype(np.int64) - want.astype(np.int64)).max() == 0


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_batch_norm_agrees_with_torch():
    rng = np.random.default_rng(2)
    x = rng.uniform(-3, 3, (2, 3, 4, 4)).astype(np.float32)
    q = torch.quantize_per_tensor(torch.from_numpy(x), 0.05, 60, torch.quint8)
    mean, var = rng.uniform(-1, 1, 3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(
        np.float32)
    weight, bias = np.ones(3, np.float32), np.zeros(3, np.float32)
    golden = torch.quantized_batch_norm(q, torch.from_numpy(weight), torch.from_numpy(bias),
                                        torch.from_numpy(mean), torch.from_numpy(var), 1e-5,
                                        0.1, 100)
    ours = openacl.ops.quantized_batch_norm(_dev(q.int_repr().numpy()), _dev(mean), _dev(var),
                                            0.05, 60, 0.1, 100, _dev(weight), _dev(bias),
                                            1e-5).numpy()
    diff = np.abs(ours.astype(np.int64) - golden.int_repr().numpy().astype(np.int64))
    assert diff.max() <= 1  # (torch computes in float32; one quantum at a rounding tie)


def test_quantized_batch_norm_errors():
    x = _dev(np.zeros((1, 2, 3, 3), np.int8))
    c2 = _dev(np.ones(2, np.float32))
    bad = [
        (x, c2, c2, 0.1, 0, 0.0, 0),
        (x, c2, c2, 0.1, 200, 0.1, 0),
        (x, _dev(np.ones(3, np.float32)), c2, 0.1, 0, 0.1, 0),
        (_dev(np.zeros((2, 3, 3), np.int8)), c2, c2, 0.1, 0, 0.1, 0),
        (_dev(np.zeros((1, 2, 3, 3), np.float32)), c2, c2, 0.1, 0, 0.1, 0),
    ]
    for args in bad:
        with pytest.raises(AclError) as info:
            openacl.ops.quantized_batch_norm(*args)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(AclError) as info:
        openacl.ops.quantized_batch_norm(x, None, c2, 0.1, 0, 0.1, 0)
    assert info.value.code == ACLNN_ERR_PARAM_NULLPTR
