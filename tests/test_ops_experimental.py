"""CANN's experimental element-wise operators (ops/experimental.py): ApplyGradientDescent,
FusedMulAddN and AddMatMatElementsPlus against their documents' formulas in float64 (torch),
integer wrap-around, strided views, and their argument checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close, random_array, strided, to_torch
from openacl import aclnn, ops
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

FLOATS = [np.float32, np.float16, BF16]
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _wide(array: np.ndarray) -> torch.Tensor:
    return to_torch(np.asarray(array).astype(np.float64))


def _phase1(op: str, *args) -> None:
    """Phase 1 of aclnn ``op`` with every argument given, outputs included (device tensors
    for host arrays); the executor is run so that it is not left behind."""
    on_device = [openacl.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    ws, executor = getattr(aclnn, f"{op}_get_workspace_size")(*on_device)
    getattr(aclnn, op)(0, ws, executor, 0)


def _refuses(call, name: str, code: int = ACLNN_ERR_PARAM_INVALID) -> None:
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code and f"'{name}'" in info.value.message, info.value.message


# -- ApplyGradientDescent ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("alpha_shape", [(1,), ()])
def test_apply_gradient_descent_is_var_minus_alpha_delta(dtype, alpha_shape):
    var = random_array((3, 5, 4), dtype, RNG, -2, 2)
    delta = random_array((3, 5, 4), dtype, RNG, -1, 1)
    alpha = np.full(alpha_shape, 0.3, np.float32).astype(dtype)
    ref = openacl.to_device(var.copy())
    result = ops.apply_gradient_descent(ref, alpha, delta)
    golden = _wide(var) - _wide(alpha).reshape(-1)[0] * _wide(delta)
    assert_close(ref.numpy(), golden.numpy().astype(dtype), "var")
    assert result is ref or np.array_equal(np.asarray(result.numpy()), ref.numpy())
    ref.free()


def test_apply_gradient_descent_updates_a_strided_var_in_place():
    var = random_array((4, 6), np.float32, RNG)
    delta = random_array((4, 6), np.float32, RNG)
    view = strided(var)
    ops.apply_gradient_descent(view, np.array([0.5], np.float32), strided(delta))
    np.testing.assert_allclose(view.numpy(), var - np.float32(0.5) * delta, rtol=1e-6)


def test_apply_gradient_descent_checks_its_arguments():
    f32 = np.ones((2, 3), np.float32)
    one = np.array([0.1], np.float32)
    ref = openacl.to_device(f32.copy())
    try:
        _refuses(lambda: ops.apply_gradient_descent(
            openacl.to_device(np.ones((2, 3), np.int32)), np.array([1], np.int32),
            np.ones((2, 3), np.int32)), "var")
        _refuses(lambda: ops.apply_gradient_descent(ref, one.astype(np.float16), f32), "alpha")
        _refuses(lambda: ops.apply_gradient_descent(ref, one, f32.astype(np.float16)),
                 "delta")
        _refuses(lambda: ops.apply_gradient_descent(ref, one, np.ones((3, 2), np.float32)),
                 "delta")
        _refuses(lambda: ops.apply_gradient_descent(ref, np.ones(2, np.float32), f32),
                 "alpha")
        _refuses(lambda: ops.apply_gradient_descent(
            openacl.to_device(np.array(1.0, np.float32)), one, np.array(1.0, np.float32)),
            "var")
        _refuses(lambda: ops.apply_gradient_descent(ref, None, f32), "alpha",
                 ACLNN_ERR_PARAM_NULLPTR)
        _refuses(lambda: ops.apply_gradient_descent(None, one, f32), "var",
                 ACLNN_ERR_PARAM_NULLPTR)
    finally:
        ref.free()


# -- FusedMulAddN -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x3_shape", [(1,), (1, 1), ()])
def test_fused_mul_add_n_is_x1_times_x3_plus_x2(dtype, x3_shape):
    x1, x2 = (random_array((7, 9), dtype, RNG, -5, 5) for _ in range(2))
    x3 = np.full(x3_shape, -1.75, np.float32).astype(dtype)
    y = ops.fused_mul_add_n(x1, x2, x3).numpy()
    golden = _wide(x1) * _wide(x3).reshape(-1)[0] + _wide(x2)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, golden.numpy().astype(dtype), "y")


@pytest.mark.parametrize("dtype", [np.int32, np.int16])
def test_fused_mul_add_n_integers_wrap_after_the_product_and_the_sum(dtype):
    info = np.iinfo(dtype)
    x1 = np.array([info.max, info.min, 3, -7, info.max // 2 + 1], dtype)
    x2 = np.array([1, -1, info.max, 5, info.max], dtype)
    x3 = np.array([3], dtype)
    y = ops.fused_mul_add_n(x1, x2, x3).numpy()
    wide = x1.astype(np.int64) * 3
    expected = (wide.astype(dtype).astype(np.int64) + x2).astype(dtype)  # two wraps
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, expected)


def test_fused_mul_add_n_reads_strided_inputs_and_writes_an_empty_output():
    x1, x2 = random_array((3, 8), np.float32, RNG), random_array((3, 8), np.float32, RNG)
    y = ops.fused_mul_add_n(strided(x1), strided(x2, "transpose"), np.array([2.0], np.float32))
    np.testing.assert_allclose(y.numpy(), x1 * 2 + x2, rtol=1e-6)
    empty = ops.fused_mul_add_n(np.ones((0, 4), np.float32), np.ones((0, 4), np.float32),
                                np.array([2.0], np.float32))
    assert empty.numpy().shape == (0, 4)
    y = openacl.to_device(np.zeros((4, 6), np.float32))
    x1 = random_array((4, 6), np.float32, RNG)
    _phase1("fused_mul_add_n", x1, x1, np.array([3.0], np.float32), y)  # into a given y
    np.testing.assert_allclose(y.numpy(), x1 * 4, rtol=1e-6)
    y.free()


def test_fused_mul_add_n_checks_its_arguments():
    f32, one = np.ones((2, 3), np.float32), np.array([2.0], np.float32)
    _refuses(lambda: ops.fused_mul_add_n(f32.astype(np.float64), f32.astype(np.float64),
                                         one.astype(np.float64)), "x1")
    _refuses(lambda: ops.fused_mul_add_n(f32, f32.astype(np.float16), one), "x2")
    _refuses(lambda: ops.fused_mul_add_n(f32, f32, one.astype(np.int32)), "x3")
    _refuses(lambda: ops.fused_mul_add_n(f32, np.ones((1, 3), np.float32), one), "x2")
    _refuses(lambda: ops.fused_mul_add_n(f32, f32, np.ones(2, np.float32)), "x3")
    _refuses(lambda: _phase1("fused_mul_add_n", f32, f32, one, f32.astype(np.float16)), "y")
    _refuses(lambda: _phase1("fused_mul_add_n", f32, f32, one, np.ones((3, 2), np.float32)),
             "y")
    _refuses(lambda: _phase1("fused_mul_add_n", f32, f32, one, None), "y",
             ACLNN_ERR_PARAM_NULLPTR)
    _refuses(lambda: ops.fused_mul_add_n(f32, f32, None), "x3", ACLNN_ERR_PARAM_NULLPTR)


# -- AddMatMatElementsPlus ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", [((4, 6), (4, 6), (4, 6)), ((3, 1, 5), (4, 1), (1, 5)),
                                    ((5,), (2, 3, 1), (3, 5))])
def test_add_mat_mat_elements_plus_broadcasts_as_addcmul(dtype, shapes):
    c, a, b = (random_array(shape, dtype, RNG, -2, 2) for shape in shapes)
    beta = np.array([0.5], np.float32).astype(dtype)
    alpha = np.array([[1.5]], np.float32).astype(dtype)
    out = ops.add_mat_mat_elements_plus(c, a, b, beta, alpha).numpy()
    golden = torch.addcmul(_wide(c) * 0.5, _wide(a), _wide(b), value=1.5)
    assert out.dtype == np.dtype(dtype) and out.shape == tuple(golden.shape)
    assert_close(out, golden.numpy().astype(dtype), "cOut")


def test_add_mat_mat_elements_plus_checks_its_arguments():
    f32, one = np.ones((2, 3), np.float32), np.array([1.0], np.float32)
    _refuses(lambda: ops.add_mat_mat_elements_plus(
        f32.astype(np.int32), f32.astype(np.int32), f32.astype(np.int32),
        one.astype(np.int32), one.astype(np.int32)), "c")
    _refuses(lambda: ops.add_mat_mat_elements_plus(f32, f32.astype(np.float16), f32, one,
                                                   one), "a")
    _refuses(lambda: ops.add_mat_mat_elements_plus(f32, f32, f32, one.astype(np.float16),
                                                   one), "beta")
    _refuses(lambda: ops.add_mat_mat_elements_plus(f32, f32, f32, one,
                                                   np.ones(3, np.float32)), "alpha")
    _refuses(lambda: ops.add_mat_mat_elements_plus(f32, f32, np.ones((2, 4), np.float32),
                                                   one, one), "c")
    _refuses(lambda: _phase1("add_mat_mat_elements_plus", f32, f32, f32, one, one,
                             np.ones((1, 3), np.float32)), "cOut")
    _refuses(lambda: _phase1("add_mat_mat_elements_plus", f32, f32, f32, one, one,
                             f32.astype(np.float16)), "cOut")
    _refuses(lambda: ops.add_mat_mat_elements_plus(f32, f32, f32, None, one), "beta",
             ACLNN_ERR_PARAM_NULLPTR)
