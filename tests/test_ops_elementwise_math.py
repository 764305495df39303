"""Lerp(s), LogAddExp(2), XLogY* and NanToNum against PyTorch CPU (float64, rounded once
to the output dtype), with CANN's precision standard; their refusals with CANN's codes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import (
    BOOL,
    FLOATS,
    INTS,
    TORCH_DTYPES,
    assert_close,
    from_torch,
    random_array,
    to_torch,
)
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = FLOATS[:3]  # float16, bfloat16, float32
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _golden(fn, *arrays, dtype):
    """torch's result in float64 (integer inputs as they are), rounded once to ``dtype``."""
    wide = [to_torch(a).double() if np.asarray(a).dtype in FLOATS else to_torch(a)
            for a in arrays]
    return from_torch(fn(*wide).to(TORCH_DTYPES[np.dtype(dtype)]))


def _code(fn, *args) -> int:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value.code


# -- lerp --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_lerp_matches_torch(dtype):
    rng = np.random.default_rng(1)
    start, end = random_array((3, 4), dtype, rng), random_array((4,), dtype, rng)
    weight = random_array((3, 1), dtype, rng, -0.5, 1.5)
    expected = _golden(torch.lerp, start, end, weight, dtype=dtype)
    assert_close(openacl.ops.lerp(_dev(start), _dev(end), _dev(weight)).numpy(), expected)
    assert_close(openacl.ops.lerps(_dev(start), _dev(end), 0.75).numpy(),
                 _golden(lambda s, e: torch.lerp(s, e, 0.75), start, end, dtype=dtype))
    x = _dev(start)
    openacl.ops.inplace_lerps(x, _dev(end), 0.25)
    assert_close(x.numpy(), _golden(lambda s, e: torch.lerp(s, e, 0.25), start, end,
                                    dtype=dtype), "inplace")


def test_lerp_ends_are_exact_and_refusals():
    start, end = _dev(np.array([1.5, -3.0], np.float32)), _dev(np.array([7.25, 2.0], np.float32))
    np.testing.assert_array_equal(openacl.ops.lerps(start, end, 1.0).numpy(), [7.25, 2.0])
    np.testing.assert_array_equal(openacl.ops.lerps(start, end, 0.0).numpy(), [1.5, -3.0])
    half = _dev(np.ones(2, np.float16))
    assert _code(openacl.ops.lerp, start, half, start) == ACLNN_ERR_PARAM_INVALID
    ints = _dev(np.ones(2, np.int32))
    assert _code(openacl.ops.lerps, ints, ints, 0.5) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.lerps, start, _dev(np.ones(3, np.float32)), 0.5) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.lerps_get_workspace_size, start, end, None,
                 openacl.empty((2,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR
    with pytest.raises(AclError) as info:  # the in-place result must keep selfRef's shape
        openacl.ops.inplace_lerps(_dev(np.ones((1, 2), np.float32)),
                                  _dev(np.ones((3, 2), np.float32)), 0.5)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


# -- log-add-exp -------------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn", [("log_add_exp", torch.logaddexp),
                                     ("log_add_exp2", torch.logaddexp2)])
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_log_add_exp_matches_torch(name, fn, dtype):
    rng = np.random.default_rng(2)
    a, b = random_array((3, 4), dtype, rng, -30, 30), random_array((4,), dtype, rng, -30, 30)
    result = getattr(openacl.ops, name)(_dev(a), _dev(b)).numpy()
    out_dtype = dtype if dtype in HALF_FLOATS else np.dtype(np.float32)  # never float64
    expected = _golden(lambda x, y: fn(x.double(), y.double()), a, b, dtype=out_dtype)
    assert_close(result, expected, f"{name} {dtype}")


def test_log_add_exp_specials_and_refusals():
    a = np.repeat(SPECIALS, SPECIALS.size)
    b = np.tile(SPECIALS, SPECIALS.size)
    assert_close(openacl.ops.log_add_exp(_dev(a), _dev(b)).numpy(),
                 _golden(torch.logaddexp, a, b, dtype=np.float32))
    big = _dev(np.array([1000.0, -1000.0], np.float32))  # no overflow in exp
    assert_close(openacl.ops.log_add_exp(big, big).numpy(),
                 np.array([1000.0 + np.log(2), -1000.0 + np.log(2)], np.float32))
    x = _dev(np.ones(2, np.float32))
    assert _code(aclnn.log_add_exp_get_workspace_size, x, x,
                 openacl.empty((2,), np.int32)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.log_add_exp_get_workspace_size, x, x,
                 openacl.empty((2,), np.float64)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.log_add_exp_get_workspace_size, x, None,
                 openacl.empty((2,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR
    assert _code(openacl.ops.log_add_exp, x, _dev(np.ones(3, np.float32))) == \
        ACLNN_ERR_PARAM_INVALID


# -- xlogy -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_xlogy_matches_torch(dtype):
    rng = np.random.default_rng(3)
    x, y = random_array((3, 4), dtype, rng, -2, 4), random_array((4,), dtype, rng, 0, 5)
    out_dtype = from_torch(torch.xlogy(to_torch(x), to_torch(y))).dtype
    assert_close(openacl.ops.x_log_y_tensor(_dev(x), _dev(y)).numpy(),
                 _golden(torch.xlogy, x, y, dtype=out_dtype), f"xlogy {dtype}")
    assert_close(openacl.ops.x_log_y_scalar_other(_dev(x), 3).numpy(),
                 _golden(lambda t: torch.xlogy(t, 3), x, dtype=out_dtype))
    scalar_self = from_torch(torch.xlogy(2, to_torch(y))).dtype
    assert_close(openacl.ops.x_log_y_scalar_self(2, _dev(y)).numpy(),
                 _golden(lambda t: torch.xlogy(2, t), y, dtype=scalar_self))


def test_xlogy_zero_and_nan_rules_and_inplace():
    x = np.array([0, 0, 0, 1, 2, 0], np.float32)
    y = np.array([0, np.nan, np.inf, 0, -1, 3], np.float32)
    assert_close(openacl.ops.x_log_y_tensor(_dev(x), _dev(y)).numpy(),
                 from_torch(torch.xlogy(to_torch(x), to_torch(y))))
    target = _dev(x)
    openacl.ops.inplace_x_log_y_tensor(target, _dev(y))
    assert_close(target.numpy(), from_torch(torch.xlogy(to_torch(x), to_torch(y))))
    target = _dev(x)
    openacl.ops.inplace_x_log_y_scalar_other(target, 2.0)
    assert_close(target.numpy(), from_torch(torch.xlogy(to_torch(x), 2.0)))
    ints = _dev(np.ones(3, np.int32))
    assert _code(openacl.ops.inplace_x_log_y_tensor, ints, ints) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.x_log_y_tensor, _dev(np.ones(2, np.complex64)), ints) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.x_log_y_tensor_get_workspace_size, None, ints,
                 openacl.empty((3,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR


# -- nan_to_num --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_nan_to_num_matches_torch(dtype):
    values = np.concatenate([SPECIALS, random_array((10,), np.float32)]).astype(dtype)
    for nan, posinf, neginf in ((0.0, 100.0, -100.0), (1.5, 1e10, -1e10), (-2.0, 3.0, 4.0)):
        expected = from_torch(torch.nan_to_num(to_torch(values), nan, posinf, neginf))
        assert_close(openacl.ops.nan_to_num(_dev(values), nan, posinf, neginf).numpy(),
                     expected, f"{dtype} {nan} {posinf} {neginf}")
        target = _dev(values)
        openacl.ops.inplace_nan_to_num(target, nan, posinf, neginf)
        assert_close(target.numpy(), expected, "inplace")


@pytest.mark.parametrize("dtype", INTS + BOOL, ids=str)
def test_nan_to_num_copies_integers(dtype):
    values = random_array((7,), dtype)
    np.testing.assert_array_equal(openacl.ops.nan_to_num(_dev(values), 1.0, 2.0, 3.0).numpy(),
                                  values)


def test_nan_to_num_refusals():
    x = _dev(np.ones(3, np.float32))
    assert _code(aclnn.nan_to_num_get_workspace_size, x, 0.0, 1.0, -1.0,
                 openacl.empty((3,), np.float16)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.nan_to_num_get_workspace_size, x, 0.0, 1.0, -1.0,
                 openacl.empty((4,), np.float32)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.nan_to_num_get_workspace_size, None, 0.0, 1.0, -1.0,
                 openacl.empty((3,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR
    assert _code(openacl.ops.nan_to_num, _dev(np.ones(3, np.float64)), 0.0, 1.0, -1.0) == \
        ACLNN_ERR_PARAM_INVALID


# -- cross product -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS + [np.dtype(np.float64)] + INTS, ids=str)
def test_linalg_cross_matches_torch(dtype):
    rng = np.random.default_rng(4)
    a, b = random_array((4, 3, 2), dtype, rng), random_array((1, 3, 2), dtype, rng)
    golden_dtype = dtype
    expected = _golden(lambda x, y: torch.linalg.cross(*torch.broadcast_tensors(x, y), dim=1),
                       a, b, dtype=golden_dtype)
    assert_close(openacl.ops.linalg_cross(_dev(a), _dev(b), 1).numpy(), expected, str(dtype))


def test_linalg_cross_refusals():
    a = _dev(np.ones((2, 3), np.float32))
    assert _code(openacl.ops.linalg_cross, a, _dev(np.ones((2, 3), np.float16))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.linalg_cross, a, a, 0) == ACLNN_ERR_PARAM_INVALID  # size 2
    assert _code(openacl.ops.linalg_cross, a, a, 2) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.linalg_cross, _dev(np.ones((2, 3), np.bool_)),
                 _dev(np.ones((2, 3), np.bool_))) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.linalg_cross_get_workspace_size, a, a, -1, None) == \
        ACLNN_ERR_PARAM_NULLPTR


# -- angle and polar ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS + INTS + BOOL + [np.dtype(np.complex64)], ids=str)
def test_angle_v2_matches_torch(dtype):
    x = random_array((4, 5), dtype, np.random.default_rng(5))
    if dtype in FLOATS:
        x[0, :4] = [np.nan, -0.0, -np.inf, np.inf]
    expected = from_torch(torch.angle(to_torch(x)))
    out_dtype = np.dtype(np.float32) if expected.dtype == np.float32 else dtype
    assert_close(openacl.ops.angle_v2(_dev(x)).numpy(),
                 _golden(torch.angle, x, dtype=out_dtype) if dtype in FLOATS else expected,
                 str(dtype))


def test_polar_matches_torch_and_refusals():
    rng = np.random.default_rng(6)
    modulus, argument = random_array((3, 4), np.float32, rng, 0, 3), random_array(
        (4,), np.float32, rng)
    expected = torch.polar(*torch.broadcast_tensors(to_torch(modulus).double(),
                                                    to_torch(argument).double()))
    assert_close(openacl.ops.polar(_dev(modulus), _dev(argument)).numpy(),
                 from_torch(expected.to(torch.complex64)))
    assert _code(openacl.ops.polar, _dev(modulus.astype(np.float16)), _dev(argument)) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.polar_get_workspace_size, _dev(modulus), _dev(argument),
                 openacl.empty((3, 4), np.complex128)) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.angle_v2, _dev(np.ones(2, np.float64))) == ACLNN_ERR_PARAM_INVALID
