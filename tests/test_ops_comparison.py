"""Comparison, logical, bitwise, where and IsInf operators against PyTorch CPU (exact)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import (
    BF16,
    BOOL,
    FLOATS,
    INTS,
    assert_close,
    from_torch,
    random_array,
    strided,
    to_torch,
)
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _ties(shape, dtype, seed):
    """Small integer values in ``dtype`` so that equal pairs occur."""
    values = random_array(shape, np.int8, np.random.default_rng(seed), -3, 3)
    return values.astype(np.float32).astype(dtype) if np.dtype(dtype) != np.bool_ else (
        values > 0)


COMPARISONS = {"eq": torch.eq, "ne": torch.ne, "gt": torch.gt, "ge": torch.ge, "lt": torch.lt,
               "le": torch.le}
ALL_REAL = FLOATS + INTS + BOOL


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", ALL_REAL, ids=str)
def test_compare_tensor_matches_torch(name, dtype):
    a, b = _ties((3, 4), dtype, 1), _ties((4,), dtype, 2)  # broadcast
    golden = from_torch(COMPARISONS[name](to_torch(a), to_torch(b)))
    assert_close(getattr(openacl.ops, f"{name}_tensor")(_dev(a), _dev(b)).numpy(), golden)


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", ALL_REAL, ids=str)
def test_compare_scalar_matches_torch(name, dtype):
    a = _ties((2, 5), dtype, 3)
    for scalar in (1, 0.5, -2, True):
        golden = from_torch(COMPARISONS[name](to_torch(a), scalar))
        result = getattr(openacl.ops, f"{name}_scalar")(_dev(a), scalar).numpy()
        assert_close(result, golden, f"{name} {dtype} {scalar!r}")


def test_compare_rounds_operands_to_the_promoted_dtype():
    # a float scalar meets float16 data in float16, as in torch
    halves = np.array([0.1, 0.2, 1.0], np.float16)
    assert_close(openacl.ops.eq_scalar(_dev(halves), 0.1).numpy(),
                 from_torch(to_torch(halves) == 0.1))
    # an int32 tensor against a 0-dim float16 tensor compares in float16
    ints, half = np.array([2049, 2047, 3000], np.int32), np.array(2048.0, np.float16)
    for name in ("eq", "gt", "le"):
        assert_close(getattr(openacl.ops, f"{name}_tensor")(_dev(ints), _dev(half)).numpy(),
                     from_torch(COMPARISONS[name](to_torch(ints), to_torch(half))))
    # an int32 tensor against a float scalar compares in float32 (2049 != 2048.0)
    assert_close(openacl.ops.eq_scalar(_dev(ints), 2048.0).numpy(),
                 from_torch(to_torch(ints) == 2048.0))
    # an integer scalar out of range wraps into the tensor's dtype, as in torch
    small = np.array([-24, 1, 127], np.int8)
    assert_close(openacl.ops.eq_scalar(_dev(small), 1000).numpy(),
                 from_torch(to_torch(small) == 1000))
    unsigned = np.array([1, 255], np.uint8)
    assert_close(openacl.ops.gt_scalar(_dev(unsigned), -1).numpy(),
                 from_torch(to_torch(unsigned) > -1))


def test_compare_mixed_dtypes_and_zero_dim():
    a, b = _ties((3, 1), np.int16, 4), _ties((1, 4), BF16, 5)
    for name in COMPARISONS:
        assert_close(getattr(openacl.ops, f"{name}_tensor")(_dev(a), _dev(b)).numpy(),
                     from_torch(COMPARISONS[name](to_torch(a), to_torch(b))), name)
    zero_dim = np.array(1.0, np.float32)
    result = openacl.ops.ge_tensor(_dev(zero_dim), _dev(zero_dim)).numpy()
    assert result.shape == () and result.dtype == np.bool_ and result
    assert openacl.ops.lt_scalar(_dev(np.zeros((0, 3), np.float32)), 1).numpy().shape == (0, 3)


def test_compare_nan_inf():
    a = np.array([np.nan, np.inf, -np.inf, 1.0, np.nan], np.float32)
    b = np.array([np.nan, np.inf, 0.0, np.nan, 1.0], np.float32)
    for name, reference in COMPARISONS.items():
        assert_close(getattr(openacl.ops, f"{name}_tensor")(_dev(a), _dev(b)).numpy(),
                     from_torch(reference(to_torch(a), to_torch(b))), name)
        assert_close(getattr(openacl.ops, f"{name}_scalar")(_dev(a), float("inf")).numpy(),
                     from_torch(reference(to_torch(a), float("inf"))), name)


def test_eq_ne_complex_and_ordered_refuses_complex():
    a = np.array([1 + 1j, 2 - 1j, 0j], np.complex64)
    b = np.array([1 + 1j, 2 + 1j, 0j], np.complex64)
    assert_close(openacl.ops.eq_tensor(_dev(a), _dev(b)).numpy(), from_torch(
        torch.eq(to_torch(a), to_torch(b))))
    assert_close(openacl.ops.ne_scalar(_dev(a), 1 + 1j).numpy(), from_torch(to_torch(a) != 1 + 1j))
    with pytest.raises(AclError) as info:
        openacl.ops.gt_tensor(_dev(a), _dev(b))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'self'" in info.value.message
    with pytest.raises(AclError) as info:
        openacl.ops.lt_scalar(_dev(np.ones(3, np.float32)), 1j)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'other'" in info.value.message


def test_wide_unsigned_compare_with_themselves():
    a = np.array([0, 2**32 - 1, 7], np.uint32)
    b = np.array([1, 2**32 - 1, 3], np.uint32)
    np.testing.assert_array_equal(openacl.ops.ge_tensor(_dev(a), _dev(b)).numpy(), a >= b)
    np.testing.assert_array_equal(openacl.ops.eq_scalar(_dev(a), 7).numpy(), a == 7)


@pytest.mark.parametrize("out_dtype", [np.float32, np.int32, np.bool_, np.float16], ids=str)
def test_compare_out_takes_any_dtype(out_dtype):
    a, b = _ties((2, 3), np.float32, 6), _ties((2, 3), np.float32, 7)
    out = openacl.empty((2, 3), out_dtype)
    left, right = _dev(a), _dev(b)
    ws, exe = aclnn.gt_tensor_get_workspace_size(left, right, out)
    aclnn.gt_tensor(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), (a > b).astype(out_dtype))


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("form", ["tensor", "scalar"])
def test_inplace_compare(name, form):
    a = _ties((3, 4), np.float32, 8)
    other = _ties((4,), np.float32, 9) if form == "tensor" else 0.0
    target = _dev(a)
    operand = _dev(other) if form == "tensor" else other
    getattr(openacl.ops, f"inplace_{name}_{form}")(target, operand)
    golden = getattr(to_torch(a), f"{name}_")(to_torch(other) if form == "tensor" else other)
    assert_close(target.numpy(), from_torch(golden), f"inplace {name} {form}")


def test_inplace_compare_broadcast_must_keep_self_shape():
    small, big = _dev(np.ones((4,), np.float32)), _dev(np.ones((3, 4), np.float32))
    with pytest.raises(AclError) as info:
        aclnn.inplace_eq_tensor_get_workspace_size(small, big)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'selfRef'" in info.value.message


# -- logical ------------------------------------------------------------------------------------
LOGICAL = {"logical_and": torch.logical_and, "logical_or": torch.logical_or,
           "logical_xor": torch.logical_xor}
LOGICAL_PAIRS = [(np.float32, np.float32), (np.int32, np.bool_), (BF16, np.int8),
                 (np.float16, np.float64), (np.complex64, np.uint8), (np.bool_, np.bool_)]


@pytest.mark.parametrize("name", sorted(LOGICAL))
@pytest.mark.parametrize("dtypes", LOGICAL_PAIRS, ids=str)
def test_logical_binary(name, dtypes):
    a = _ties((3, 4), dtypes[0], 10)
    b = _ties((3, 1), dtypes[1], 11)
    if np.dtype(dtypes[0]).kind == "f":
        a[0, 0] = np.nan  # NaN is true
    golden = from_torch(LOGICAL[name](to_torch(a), to_torch(b)))
    assert_close(getattr(openacl.ops, name)(_dev(a), _dev(b)).numpy(), golden, name)


@pytest.mark.parametrize("dtype", ALL_REAL, ids=str)
def test_logical_not(dtype):
    a = _ties((2, 5), dtype, 12)
    assert_close(openacl.ops.logical_not(_dev(a)).numpy(),
                 from_torch(torch.logical_not(to_torch(a))))


def test_logical_out_dtype_and_inplace():
    a, b = _ties((2, 3), np.float32, 13), _ties((2, 3), np.int32, 14)
    out = openacl.empty((2, 3), np.float32)
    left, right = _dev(a), _dev(b)
    ws, exe = aclnn.logical_or_get_workspace_size(left, right, out)
    aclnn.logical_or(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), np.logical_or(a, b).astype(np.float32))
    for name in ("and", "or"):
        target = _dev(a)
        getattr(openacl.ops, f"inplace_logical_{name}")(target, _dev(b))
        golden = getattr(to_torch(a), f"logical_{name}_")(to_torch(b))
        assert_close(target.numpy(), from_torch(golden), name)
    target = _dev(a)
    openacl.ops.inplace_logical_not(target)
    assert_close(target.numpy(), from_torch(to_torch(a).logical_not_()))
    assert not hasattr(aclnn, "inplace_logical_xor_get_workspace_size")  # CANN has none


# -- bitwise ------------------------------------------------------------------------------------
BITWISE = {"bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
           "bitwise_xor": torch.bitwise_xor}


@pytest.mark.parametrize("name", sorted(BITWISE))
@pytest.mark.parametrize("dtype", INTS + BOOL, ids=str)
def test_bitwise_matches_torch(name, dtype):
    a = random_array((3, 4), dtype, np.random.default_rng(15), -100, 100)
    b = random_array((4,), dtype, np.random.default_rng(16), -100, 100)
    assert_close(getattr(openacl.ops, f"{name}_tensor")(_dev(a), _dev(b)).numpy(),
                 from_torch(BITWISE[name](to_torch(a), to_torch(b))), name)
    scalar = True if dtype == np.bool_ else 6
    assert_close(getattr(openacl.ops, f"{name}_scalar")(_dev(a), scalar).numpy(),
                 from_torch(BITWISE[name](to_torch(a), scalar)), f"{name} scalar")
    target = _dev(a)
    getattr(openacl.ops, f"inplace_{name}_tensor")(target, _dev(b))
    assert_close(target.numpy(), from_torch(BITWISE[name](to_torch(a), to_torch(b))))


def test_bitwise_promotion_and_tensor_out():
    a = np.array([-1, 5, 12], np.int8)
    b = np.array([300, 3, 10], np.int32)
    result = openacl.ops.bitwise_and_tensor(_dev(a), _dev(b)).numpy()
    assert_close(result, from_torch(torch.bitwise_and(to_torch(a), to_torch(b))))
    assert result.dtype == np.int32
    assert_close(openacl.ops.bitwise_and_tensor_out(_dev(a), _dev(b)).numpy(), result)
    target = _dev(b)
    openacl.ops.inplace_bitwise_and_tensor_out(target, _dev(a))
    np.testing.assert_array_equal(target.numpy(), result)
    target = _dev(a)
    openacl.ops.inplace_bitwise_or_scalar(target, 16)
    np.testing.assert_array_equal(target.numpy(), a | 16)
    wide = np.array([2**32 - 1, 6], np.uint32)
    np.testing.assert_array_equal(
        openacl.ops.bitwise_xor_tensor(_dev(wide), _dev(wide[::-1].copy())).numpy(),
        wide ^ wide[::-1])


@pytest.mark.parametrize("dtype", INTS + BOOL, ids=str)
def test_bitwise_not(dtype):
    a = random_array((2, 3), dtype, np.random.default_rng(17), -100, 100)
    assert_close(openacl.ops.bitwise_not(_dev(a)).numpy(),
                 from_torch(torch.bitwise_not(to_torch(a))))


def test_bitwise_refuses_floats():
    floats, ints = _dev(np.ones(3, np.float32)), _dev(np.ones(3, np.int32))
    for call, argument in ((lambda: openacl.ops.bitwise_and_tensor(floats, ints), "'self'"),
                           (lambda: openacl.ops.bitwise_or_scalar(ints, 1.5), "'other'"),
                           (lambda: openacl.ops.bitwise_not(floats), "'self'")):
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == ACLNN_ERR_PARAM_INVALID and argument in info.value.message


# -- where and IsInf ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_s_where_matches_torch(dtype):
    condition = random_array((3, 1), np.bool_, np.random.default_rng(18))
    a = random_array((1, 4), dtype, np.random.default_rng(19))
    b = random_array((3, 4), dtype, np.random.default_rng(20))
    golden = from_torch(torch.where(to_torch(condition), to_torch(a), to_torch(b)))
    assert_close(openacl.ops.s_where(_dev(condition), _dev(a), _dev(b)).numpy(), golden)


def test_s_where_uint8_condition_promotion_and_errors():
    condition = np.array([1, 0, 7], np.uint8)
    a, b = np.array([1, 2, 3], np.int32), np.array([0.5, 0.25, 0.125], np.float32)
    golden = from_torch(torch.where(to_torch(condition).bool(), to_torch(a), to_torch(b)))
    result = openacl.ops.s_where(_dev(condition), _dev(a), _dev(b)).numpy()
    assert result.dtype == np.float32
    assert_close(result, golden)
    with pytest.raises(AclError) as info:
        openacl.ops.s_where(_dev(np.ones(3, np.float32)), _dev(a), _dev(b))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'condition'" in info.value.message
    with pytest.raises(AclError) as info:
        openacl.ops.s_where(_dev(np.ones(3, np.bool_)), _dev(a), _dev(np.ones(4, np.int32)))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "broadcast" in info.value.message


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_is_inf(dtype):
    if np.dtype(dtype).kind == "f" or dtype == BF16:
        a = np.array([np.inf, -np.inf, np.nan, 0.0, 1e4, -3.0]).astype(dtype)
    else:
        a = random_array((6,), dtype)
    assert_close(openacl.ops.is_inf(_dev(a)).numpy(), from_torch(torch.isinf(to_torch(a))))


def test_is_inf_out_must_be_bool_and_no_is_nan():
    x = _dev(np.ones(3, np.float32))
    with pytest.raises(AclError) as info:
        aclnn.is_inf_get_workspace_size(x, openacl.empty((3,), np.float32))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'out'" in info.value.message
    assert not hasattr(aclnn, "is_nan_get_workspace_size")  # CANN has no aclnnIsNan


# -- views and empty tensors --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous(kind):
    a, b = _ties((3, 4), np.float32, 21), _ties((3, 4), np.float32, 22)
    left, right = strided(a, kind), strided(b, kind)
    out = strided(np.zeros((3, 4), np.bool_), kind)
    ws, exe = aclnn.le_tensor_get_workspace_size(left, right, out)
    aclnn.le_tensor(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), a <= b)
    condition = strided(a > 0, kind)
    where_out = strided(np.zeros((3, 4), np.float32), kind)
    ws, exe = aclnn.s_where_get_workspace_size(condition, left, right, where_out)
    aclnn.s_where(0, ws, exe, 0)
    np.testing.assert_array_equal(where_out.numpy(), np.where(a > 0, a, b))


def test_empty_and_zero_dim():
    empty = _dev(np.zeros((0, 2), np.int32))
    assert openacl.ops.bitwise_and_tensor(empty, _dev(np.ones(2, np.int32))).numpy().shape == (
        0, 2)
    assert openacl.ops.logical_not(empty).numpy().shape == (0, 2)
    assert openacl.ops.is_inf(_dev(np.zeros((2, 0), np.float16))).numpy().shape == (2, 0)
    zero_dim = np.array(5, np.int64)
    assert openacl.ops.bitwise_not(_dev(zero_dim)).numpy() == ~zero_dim
    assert openacl.ops.s_where(_dev(np.array(True)), _dev(zero_dim),
                               _dev(np.array(0, np.int64))).numpy() == 5


# -- phase-1 errors -----------------------------------------------------------------------------
def test_phase_one_errors():
    x = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((2, 3), np.bool_)
    for fn, args, argument in (
        (aclnn.eq_tensor_get_workspace_size, (None, x, out), "self"),
        (aclnn.eq_tensor_get_workspace_size, (x, None, out), "other"),
        (aclnn.gt_scalar_get_workspace_size, (x, None, out), "other"),
        (aclnn.lt_tensor_get_workspace_size, (x, x, None), "out"),
        (aclnn.logical_not_get_workspace_size, (None, out), "self"),
        (aclnn.s_where_get_workspace_size, (None, x, x, openacl.empty((2, 3), np.float32)),
         "condition"),
        (aclnn.is_inf_get_workspace_size, (None, out), "x"),
        (aclnn.inplace_ge_scalar_get_workspace_size, (None, None), "selfRef"),
    ):
        with pytest.raises(AclError) as info:
            fn(*args)
        assert info.value.code == ACLNN_ERR_PARAM_NULLPTR, info.value.message
        assert f"'{argument}'" in info.value.message
    four = _dev(np.ones(4, np.float32))
    ints = _dev(np.ones((2, 3), np.int32))
    for fn, args, argument in (
        (aclnn.ge_tensor_get_workspace_size, (x, four, out), "other"),  # broadcast
        (aclnn.ne_tensor_get_workspace_size, (x, x, openacl.empty((3, 2), np.bool_)), "out"),
        (aclnn.logical_and_get_workspace_size, (x, four, out), "other"),
        (aclnn.bitwise_and_tensor_get_workspace_size, (ints, ints, out), "out"),  # int->bool
        (aclnn.bitwise_not_get_workspace_size, (ints, openacl.empty((2, 3), np.int64)), "out"),
        (aclnn.eq_tensor_get_workspace_size,  # u32 mixes only with itself
         (_dev(np.ones(3, np.uint32)), _dev(np.ones(3, np.int32)),
          openacl.empty((3,), np.bool_)), "other"),
    ):
        with pytest.raises(AclError) as info:
            fn(*args)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID, info.value.message
        assert f"'{argument}'" in info.value.message, info.value.message


# -- IsFinite / IsPosInf / IsNegInf, IsClose, Equal --------------------------------------------
SPECIAL_VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -65504.0], np.float32)


def _code(fn, *args) -> int:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value.code


@pytest.mark.parametrize("name,fn", [("is_finite", torch.isfinite), ("is_pos_inf", torch.isposinf),
                                     ("is_neg_inf", torch.isneginf)])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_classification_matches_torch(name, fn, dtype):
    values = SPECIAL_VALUES.astype(dtype).reshape(7, 1) * np.ones((1, 3), dtype)
    result = getattr(openacl.ops, name)(_dev(values)).numpy()
    np.testing.assert_array_equal(result, from_torch(fn(to_torch(values))))
    ints = random_array((5,), np.int32)  # integers: always finite (torch's rule)
    np.testing.assert_array_equal(getattr(openacl.ops, name)(_dev(ints)).numpy(),
                                  from_torch(fn(to_torch(ints))))
    assert _code(getattr(openacl.ops, name), _dev(np.ones(3, np.complex64))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(getattr(aclnn, f"{name}_get_workspace_size"), _dev(values),
                 openacl.empty((7, 3), np.float32)) == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
@pytest.mark.parametrize("rtol,atol,equal_nan", [(1e-5, 1e-8, False), (0.1, 0.5, True),
                                                 (0.0, 0.0, False)])
def test_is_close_matches_torch(dtype, rtol, atol, equal_nan):
    rng = np.random.default_rng(4)
    a = random_array((4, 6), dtype, rng)
    b = (a.astype(np.float64) + rng.choice([0, 1e-6, 0.3, 1.0], a.shape)).astype(dtype) \
        if dtype.kind != "b" else random_array((4, 6), dtype, rng)
    if dtype in FLOATS:
        a[0, :4], b[0, :4] = [np.nan, np.inf, np.nan, -np.inf], [np.nan, np.inf, 1, np.inf]
    expected = from_torch(torch.isclose(to_torch(a), to_torch(b), rtol, atol, equal_nan))
    np.testing.assert_array_equal(
        openacl.ops.is_close(_dev(a), _dev(b), rtol, atol, equal_nan).numpy(), expected)


def test_is_close_refusals():
    a = _dev(np.ones((2, 3), np.float32))
    assert _code(openacl.ops.is_close, a, _dev(np.ones((2, 3), np.float16))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.is_close, a, a, -1.0) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.is_close, a, _dev(np.ones((4,), np.float32))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.is_close_get_workspace_size, a, None, 1e-5, 1e-8, False,
                 openacl.empty((2, 3), np.bool_)) == ACLNN_ERR_PARAM_NULLPTR


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_equal_matches_torch(dtype):
    a = random_array((3, 4), dtype, np.random.default_rng(5))
    b = a.copy()
    b[2, 3] = not b[2, 3] if dtype.kind == "b" else b[2, 3] + 1
    for left, right in ((a, a), (a, b), (a, a[:2]), (a, a.astype(np.float32))):
        result = openacl.ops.equal(_dev(left), _dev(right)).numpy()
        assert result.shape == (1,) and result.dtype == np.bool_
        same = left.shape == right.shape and torch.equal(to_torch(left).double(),
                                                          to_torch(right).double())
        assert bool(result[0]) == same


def test_equal_nan_and_refusals():
    a = _dev(np.array([1.0, np.nan], np.float32))
    assert not openacl.ops.equal(a, a).numpy()[0]  # NaN is never equal, as in torch.equal
    assert _code(aclnn.equal_get_workspace_size, a, a, openacl.empty((2,), np.bool_)) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.equal_get_workspace_size, a, None, openacl.empty((1,), np.bool_)) == \
        ACLNN_ERR_PARAM_NULLPTR
    assert _code(openacl.ops.equal, a, _dev(np.ones(2, np.complex64))) == ACLNN_ERR_PARAM_INVALID
