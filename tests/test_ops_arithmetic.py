"""Arithmetic operators against PyTorch CPU, with CANN's precision standard."""

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


# -- binary, tensor-tensor -------------------------------------------------------------------
BINARY = {
    "add": lambda a, b: torch.add(a, b),
    "sub": lambda a, b: torch.sub(a, b),
    "mul": lambda a, b: torch.mul(a, b),
    "div": lambda a, b: torch.div(a, b),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmod_tensor": torch.fmod,
    "remainder_tensor_tensor": torch.remainder,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_binary_matches_torch(name, dtype):
    a = random_array((3, 4), dtype, np.random.default_rng(1))
    b = random_array((4,), dtype, np.random.default_rng(2))
    if name in ("fmod_tensor", "remainder_tensor_tensor", "div") and dtype.kind in "iub":
        b = np.where(b == 0, 1, b).astype(dtype)
    try:
        golden = from_torch(BINARY[name](to_torch(a), to_torch(b)))
    except RuntimeError:  # torch refuses this dtype: so must we
        with pytest.raises(AclError) as info:
            getattr(openacl.ops, name)(_dev(a), _dev(b))
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
        return
    result = getattr(openacl.ops, name)(_dev(a), _dev(b)).numpy()
    assert_close(result, golden, f"{name} {dtype}")


@pytest.mark.parametrize("dtypes", [(np.int32, np.float16), (np.uint8, np.int8),
                                    (np.bool_, np.int64), (np.float16, "bfloat16"),
                                    (np.int64, np.float32), (np.float32, np.float64)],
                         ids=str)
def test_add_promotes_like_torch(dtypes):
    import ml_dtypes
    left, right = (np.dtype(ml_dtypes.bfloat16) if d == "bfloat16" else np.dtype(d)
                   for d in dtypes)
    a, b = random_array((2, 3), left), random_array((2, 3), right)
    golden = from_torch(torch.add(to_torch(a), to_torch(b)))
    assert_close(openacl.ops.add(_dev(a), _dev(b)).numpy(), golden)


def test_add_with_alpha_and_scalar_forms():
    a, b = random_array((5,), np.float32), random_array((5,), np.float32)
    assert_close(openacl.ops.add(_dev(a), _dev(b), 2.5).numpy(),
                 from_torch(torch.add(to_torch(a), to_torch(b), alpha=2.5)))
    assert_close(openacl.ops.subs(_dev(a), 1.5, 2).numpy(),
                 from_torch(torch.sub(to_torch(a), 1.5, alpha=2)))
    ints = random_array((5,), np.int32)
    assert_close(openacl.ops.adds(_dev(ints), 2).numpy(),
                 from_torch(torch.add(to_torch(ints), 2)))
    # an int tensor plus a float scalar is float32, as in torch
    assert_close(openacl.ops.adds(_dev(ints), 0.5).numpy(),
                 from_torch(torch.add(to_torch(ints), 0.5)))
    assert_close(openacl.ops.muls(_dev(a), 3.0).numpy(), from_torch(to_torch(a) * 3.0))
    assert_close(openacl.ops.divs(_dev(ints), 4).numpy(), from_torch(to_torch(ints) / 4))


def test_integer_division_is_float():
    a, b = np.array([7, -7, 3], np.int32), np.array([2, 2, -4], np.int32)
    result = openacl.ops.div(_dev(a), _dev(b)).numpy()
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, np.array([3.5, -3.5, -0.75], np.float32))


@pytest.mark.parametrize("mode,torch_mode", [(0, None), (1, "trunc"), (2, "floor")])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16], ids=str)
def test_div_mod(mode, torch_mode, dtype):
    a = random_array((4, 5), dtype, np.random.default_rng(3), -9, 9)
    b = random_array((4, 5), dtype, np.random.default_rng(4), 1, 5)
    golden = from_torch(torch.div(to_torch(a), to_torch(b), rounding_mode=torch_mode))
    assert_close(openacl.ops.div_mod(_dev(a), _dev(b), mode).numpy(), golden)


def test_pow_forms():
    a = random_array((3, 3), np.float32, low=0.5, high=2)
    e = random_array((3, 3), np.float32, low=-2, high=2)
    assert_close(openacl.ops.pow_tensor_tensor(_dev(a), _dev(e)).numpy(),
                 from_torch(torch.pow(to_torch(a), to_torch(e))))
    assert_close(openacl.ops.pow_tensor_scalar(_dev(a), 3).numpy(),
                 from_torch(torch.pow(to_torch(a), 3)))
    assert_close(openacl.ops.pow_scalar_tensor(2.0, _dev(e)).numpy(),
                 from_torch(torch.pow(2.0, to_torch(e))))
    ints = np.array([1, 2, 3], np.int64)
    assert_close(openacl.ops.pow_tensor_scalar(_dev(ints), 2).numpy(),
                 from_torch(torch.pow(to_torch(ints), 2)))


UNARY = ["neg", "abs", "reciprocal", "sqrt", "rsqrt", "exp", "log", "log2", "sin", "cos",
         "tanh", "erf", "floor", "ceil", "round", "sign", "tan", "asin", "acos", "atan", "sinh",
         "cosh", "asinh", "acosh", "atanh"]
UNARY_RANGES = {"asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atanh": (-0.9, 0.9),
                "acosh": (1.05, 4.0), "tan": (-1.4, 1.4)}


@pytest.mark.usefixtures("kernel_path")  # tanh, exp and erf of float32: C and numpy
@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.int32), np.dtype(np.int64)], ids=str)
def test_unary_matches_torch(name, dtype):
    low = 0.1 if name in ("sqrt", "rsqrt", "log", "log2", "reciprocal") else -3
    low, high = UNARY_RANGES.get(name, (low, 3))
    a = random_array((4, 6), dtype, np.random.default_rng(5), low, high)
    if dtype.kind == "i" and name in ("reciprocal", "rsqrt", "log", "log2"):
        a = np.where(a == 0, 1, a).astype(dtype)
    golden = from_torch(getattr(torch, name)(to_torch(a)))
    assert_close(getattr(openacl.ops, name)(_dev(a)).numpy(), golden, f"{name} {dtype}")


@pytest.mark.usefixtures("kernel_path")
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "erf", "neg", "floor"])
def test_unary_nan_inf(name):
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)
    with np.errstate(all="ignore"):
        golden = from_torch(getattr(torch, name)(to_torch(a)))
    assert_close(getattr(openacl.ops, name)(_dev(a)).numpy(), golden)
    in_place = _dev(a)  # the in-place operator: the C kernels' out is their x
    getattr(openacl.ops, f"inplace_{name}")(in_place)
    assert_close(in_place.numpy(), golden)


def test_maximum_minimum_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([0.0, np.nan, 1.0], np.float32)
    for name in ("maximum", "minimum"):
        assert_close(getattr(openacl.ops, name)(_dev(a), _dev(b)).numpy(),
                     from_torch(getattr(torch, name)(to_torch(a), to_torch(b))))


def test_clamp_family():
    a = np.array([np.nan, -5.0, -1.0, 0.5, 3.0, 9.0], np.float32)
    t = to_torch(a)
    assert_close(openacl.ops.clamp(_dev(a), -1.0, 2.0).numpy(),
                 from_torch(torch.clamp(t, -1.0, 2.0)))
    assert_close(openacl.ops.clamp(_dev(a), None, 2.0).numpy(), from_torch(torch.clamp(t, None,
                                                                                        2.0)))
    assert_close(openacl.ops.clamp_min(_dev(a), 0.0).numpy(), from_torch(torch.clamp_min(t, 0.0)))
    assert_close(openacl.ops.clamp_max(_dev(a), 0.0).numpy(), from_torch(torch.clamp_max(t, 0.0)))
    lo, hi = np.full(6, -2.0, np.float32), np.linspace(0, 5, 6).astype(np.float32)
    assert_close(openacl.ops.clamp_tensor(_dev(a), _dev(lo), _dev(hi)).numpy(),
                 from_torch(torch.clamp(t, to_torch(lo), to_torch(hi))))
    with pytest.raises(AclError) as info:
        openacl.ops.clamp(_dev(a), None, None)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("low, high", [(-1.0, 2.0), (2.0, -1.0), (None, 0.0), (0.0, None),
                                       (-np.inf, np.inf), (np.nan, 1.0), (0.0, np.nan)],
                         ids=str)
def test_clamp_large_float32_matches_torch(low, high):
    """A tensor past the C kernels' pool threshold (the one-pass C clamp, chunked on the
    pool) with NaN, inf and -0 inputs: bounds out of order give the high one, a NaN bound
    gives NaN (numpy's path), as torch.clamp; in place too."""
    a = np.random.default_rng(4).uniform(-4, 4, 100_003).astype(np.float32)
    a[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 2.0]
    expected = from_torch(torch.clamp(to_torch(a), low, high))
    np.testing.assert_array_equal(openacl.ops.clamp(_dev(a), low, high).numpy(), expected)
    x = _dev(a)
    bounds = [None if b is None else openacl.create_scalar(b, openacl.ACL_FLOAT)
              for b in (low, high)]
    ws, exe = aclnn.clamp_get_workspace_size(x, *bounds, x)
    aclnn.clamp(0, ws, exe, 0)
    np.testing.assert_array_equal(x.numpy(), expected)


def test_addcmul_addcdiv():
    s, t1 = random_array((2, 3), np.float32), random_array((2, 3), np.float32)
    t2 = random_array((3,), np.float32, low=1, high=2)
    assert_close(openacl.ops.addcmul(_dev(s), _dev(t1), _dev(t2), 0.5).numpy(),
                 from_torch(torch.addcmul(to_torch(s), to_torch(t1), to_torch(t2), value=0.5)))
    assert_close(openacl.ops.addcdiv(_dev(s), _dev(t1), _dev(t2), 2.0).numpy(),
                 from_torch(torch.addcdiv(to_torch(s), to_torch(t1), to_torch(t2), value=2.0)))


# -- views, empty, 0-dim ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_inputs_and_output(kind):
    a, b = random_array((3, 4), np.float32), random_array((3, 4), np.float32)
    out = strided(np.zeros((3, 4), np.float32), kind)
    left, right = strided(a, kind), strided(b, kind)  # tensors must outlive phase 2
    ws, exe = aclnn.mul_get_workspace_size(left, right, out)
    aclnn.mul(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), a * b)


def test_empty_and_zero_dim():
    empty = np.zeros((0, 3), np.float32)
    assert openacl.ops.add(_dev(empty), _dev(np.ones(3, np.float32))).numpy().shape == (0, 3)
    zero_dim = np.array(2.5, np.float32)
    result = openacl.ops.mul(_dev(zero_dim), _dev(np.array([2.0, 4.0], np.float32))).numpy()
    np.testing.assert_array_equal(result, [5.0, 10.0])
    assert openacl.ops.exp(_dev(zero_dim)).numpy().shape == ()


def test_zero_dim_tensor_does_not_promote_dimensioned_operand():
    a = random_array((4,), np.float16)
    b = np.array(3.0, np.float64)
    result = openacl.ops.add(_dev(a), _dev(b)).numpy()
    assert result.dtype == np.float16  # torch: a 0-dim tensor of the same category does not
    assert_close(result, from_torch(torch.add(to_torch(a), to_torch(b))))


# -- the two-phase API and its errors ---------------------------------------------------------
def test_two_phase_add_and_out_dtype_cast():
    a, b = random_array((2, 2), np.int32), random_array((2, 2), np.int32)
    out = openacl.empty((2, 2), np.float32)  # int result written into a float output
    alpha = openacl.create_scalar(2, openacl.ACL_INT32)
    left, right = _dev(a), _dev(b)
    ws, exe = aclnn.add_get_workspace_size(left, right, alpha, out)
    assert ws == 0
    aclnn.add(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), (a + 2 * b).astype(np.float32))


def test_phase_one_errors():
    a = _dev(np.ones((2, 3), np.float32))
    good_out = openacl.empty((2, 3), np.float32)
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(None, a, None, good_out)
    assert info.value.code == ACLNN_ERR_PARAM_NULLPTR and "'self'" in info.value.message
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(a, _dev(np.ones(4, np.float32)), None, good_out)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "broadcast" in info.value.message
    with pytest.raises(AclError) as info:
        aclnn.add_get_workspace_size(a, a, None, openacl.empty((3, 2), np.float32))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'out'" in info.value.message
    with pytest.raises(AclError) as info:  # float result into an int output
        aclnn.add_get_workspace_size(a, a, None, openacl.empty((2, 3), np.int32))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "cast" in info.value.message
    with pytest.raises(AclError) as info:  # float alpha with integer tensors
        ints = _dev(np.ones(3, np.int32))
        aclnn.add_get_workspace_size(ints, ints, openacl.create_scalar(1.5, openacl.ACL_FLOAT),
                                     openacl.empty((3,), np.int32))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'alpha'" in info.value.message
    with pytest.raises(AclError) as info:  # bool subtraction is refused, as in torch
        flags = _dev(np.ones(3, np.bool_))
        aclnn.sub_get_workspace_size(flags, flags, None, openacl.empty((3,), np.bool_))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    with pytest.raises(AclError) as info:
        aclnn.div_mod_get_workspace_size(a, a, 7, good_out)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'mode'" in info.value.message
    with pytest.raises(AclError) as info:  # u32 does not mix with other integers
        aclnn.add_get_workspace_size(_dev(np.ones(3, np.uint32)), _dev(np.ones(3, np.int32)),
                                     None, openacl.empty((3,), np.int64))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


# -- an integer operand of a half-precision result is cast to it first (CANN's API layer) ------
HALF_FLOATS = ("float16", "bfloat16")
STAGED_INTS = (np.int8, np.int16, np.int32, np.int64)
STAGED_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                 "maximum": np.maximum, "minimum": np.minimum, "fmod_tensor": np.fmod,
                 "remainder_tensor_tensor": np.remainder}


def _half(name: str) -> np.dtype:
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _as_cann(fn, first: np.ndarray, second: np.ndarray, promoted: np.dtype) -> np.ndarray:
    """CANN's result: both operands cast to the promoted dtype, computed in float32, rounded
    once into the promoted dtype (aclnn_add.cpp, aclnn_remainder.cpp: l0op::Cast first)."""
    wide = [x.astype(promoted).astype(np.float32) for x in (first, second)]
    with np.errstate(all="ignore"):
        return fn(*wide).astype(promoted)


def test_integer_operand_rounds_to_the_half_dtype_first():
    bf16 = _half("bfloat16")
    # the numbers: int32 1825 is bfloat16 1824, and 257 is 256
    result = openacl.ops.remainder_tensor_tensor(_dev(np.array([1824], bf16)),
                                                 _dev(np.array([1825], np.int32))).numpy()
    assert result.dtype == bf16 and float(result[0]) == 0.0
    for first, second in ((np.array([0.5], bf16), np.array([257], np.int32)),
                          (np.array([257], np.int32), np.array([0.5], bf16))):
        assert float(openacl.ops.add(_dev(first), _dev(second)).numpy()[0]) == 256.0
        golden = from_torch(torch.add(to_torch(first), to_torch(second)))
        assert float(golden[0]) == 256.0  # torch casts to the common dtype first too
    # float16: int32 2049 is 2048
    f16 = np.dtype(np.float16)
    assert float(openacl.ops.sub(_dev(np.array([2049], np.int32)),
                                 _dev(np.array([0.5], f16))).numpy()[0]) == 2048.0


@pytest.mark.parametrize("name", sorted(STAGED_BINARY))
@pytest.mark.parametrize("half", HALF_FLOATS)
@pytest.mark.parametrize("integer", STAGED_INTS, ids=str)
@pytest.mark.parametrize("int_first", [True, False], ids=["int_first", "half_first"])
def test_integer_operand_of_half_result_sweep(name, half, integer, int_first):
    promoted = _half(half)
    rng = np.random.default_rng(7)
    info = np.iinfo(integer)
    low, high = max(info.min, -5000), min(info.max, 5000)
    ints = rng.integers(low, high, size=64).astype(integer)
    ints[ints == 0] = 1  # divisors stay nonzero in both orders
    ints[:4] = np.clip(np.array([1825, 257, 2049, -2051]), low, high - 1)
    halves = rng.uniform(-3000, 3000, size=64).astype(promoted)
    halves[halves == 0] = promoted.type(0.5)
    halves[:4] = np.array([1824, 0.5, 0.5, 3.0]).astype(promoted)
    first, second = (ints, halves) if int_first else (halves, ints)
    result = getattr(openacl.ops, name)(_dev(first), _dev(second)).numpy()
    assert result.dtype == promoted
    expected = _as_cann(STAGED_BINARY[name], first, second, promoted)
    np.testing.assert_array_equal(result.astype(np.float32), expected.astype(np.float32))


@pytest.mark.parametrize("half", HALF_FLOATS)
def test_integer_operand_rounds_first_in_other_ops(half):
    promoted = _half(half)
    big = np.array([257 if half == "bfloat16" else 2049], np.int32)
    staged = big.astype(promoted).astype(np.float32)
    one = np.array([1.0], promoted)
    point_five = np.array([0.5], promoted)
    # div_mod (every mode), pow, addcmul, addcdiv: all read the int operand rounded first
    for mode, fn in ((0, np.true_divide), (1, lambda a, b: np.trunc(a / b)),
                     (2, lambda a, b: np.floor(a / b))):
        divisor = np.array([0.75], promoted)
        got = openacl.ops.div_mod(_dev(big), _dev(divisor), mode).numpy()
        want = fn(staged, divisor.astype(np.float32)).astype(promoted)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    exponent = np.array([2.0 if half == "bfloat16" else 0.5], promoted)
    got = openacl.ops.pow_tensor_tensor(_dev(big), _dev(exponent)).numpy()
    want = np.power(staged, exponent.astype(np.float32)).astype(promoted)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    for op, combine in ((openacl.ops.addcmul, np.multiply), (openacl.ops.addcdiv, np.divide)):
        got = op(_dev(point_five), _dev(big), _dev(one), 1).numpy()
        want = (np.float32(0.5) + combine(staged, np.float32(1.0))).astype(promoted)
        assert float(got[0]) == float(want[0]), op


# -- Atan2, Log1p, Rsub(s), FloorDivide(s) -----------------------------------------------------
def _golden(fn, *arrays, dtype=None):
    """torch's result computed in float64 (ints as they are), rounded once to ``dtype``."""
    wide = [to_torch(a).double() if np.asarray(a).dtype in FLOATS else to_torch(a)
            for a in arrays]
    result = fn(*wide)
    if dtype is not None:
        result = result.to(TORCH_DTYPES[np.dtype(dtype)])
    return from_torch(result)


def _code(fn, *args) -> int:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value.code


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_atan2_matches_torch(dtype):
    a = random_array((3, 4), dtype, np.random.default_rng(5))
    b = random_array((4,), dtype, np.random.default_rng(6))
    golden = from_torch(torch.atan2(to_torch(a), to_torch(b)))  # torch's result dtype
    expected = _golden(torch.atan2, a, b, dtype=golden.dtype)
    assert_close(openacl.ops.atan2(_dev(a), _dev(b)).numpy(), expected, f"atan2 {dtype}")
    if dtype in FLOATS:
        x = _dev(a)
        openacl.ops.inplace_atan2(x, _dev(b))
        assert_close(x.numpy(), expected, "inplace atan2")


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_log1p_matches_torch(dtype):
    a = random_array((4, 5), dtype, np.random.default_rng(7), -0.9, 6)
    expected = from_torch(torch.log1p(to_torch(a)))
    expected = _golden(torch.log1p, a, dtype=expected.dtype)
    assert_close(openacl.ops.log1p(_dev(a)).numpy(), expected, f"log1p {dtype}")


def test_log1p_inplace_needs_a_float_tensor():
    a = random_array((3,), np.float32, low=0, high=3)
    x = _dev(a)
    openacl.ops.inplace_log1p(x)
    assert_close(x.numpy(), _golden(torch.log1p, a, dtype=np.float32))
    assert _code(openacl.ops.inplace_log1p, _dev(np.arange(3, dtype=np.int32))) == \
        ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_rsub_and_rsubs_match_torch(dtype):
    a = random_array((2, 3), dtype, np.random.default_rng(8))
    b = random_array((3,), dtype, np.random.default_rng(9))
    alpha = 2 if dtype.kind in "iu" else 1.5
    assert_close(openacl.ops.rsub(_dev(a), _dev(b), alpha).numpy(),
                 _golden(lambda x, y: torch.rsub(x, y, alpha=alpha), a, b, dtype=dtype))
    assert_close(openacl.ops.rsub(_dev(a), _dev(b)).numpy(),
                 _golden(torch.rsub, a, b, dtype=dtype))
    assert_close(openacl.ops.rsubs(_dev(a), 3, alpha).numpy(),
                 _golden(lambda x: torch.rsub(x, 3, alpha=alpha), a, dtype=dtype))


def test_rsub_refusals():
    flags = _dev(np.array([True, False]))
    assert _code(openacl.ops.rsub, flags, flags) == ACLNN_ERR_PARAM_INVALID
    a = _dev(np.ones((2, 3), np.float32))
    assert _code(openacl.ops.rsub, a, _dev(np.ones((4,), np.float32))) == ACLNN_ERR_PARAM_INVALID
    out = openacl.empty((2, 3), np.float32)
    assert _code(aclnn.rsub_get_workspace_size, a, a, None, out) == ACLNN_ERR_PARAM_NULLPTR
    one = openacl.create_scalar(1, openacl.ACL_INT64)
    assert _code(aclnn.rsub_get_workspace_size, None, a, one, out) == ACLNN_ERR_PARAM_NULLPTR


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_floor_divide_matches_torch(dtype):
    a = random_array((3, 4), dtype, np.random.default_rng(10), -9, 9)
    b = random_array((3, 4), dtype, np.random.default_rng(11), 1, 5)
    if dtype.kind == "i":
        b = np.where(np.random.default_rng(12).random(b.shape) < 0.5, -b, b).astype(dtype)
    expected = _golden(torch.floor_divide, a, b, dtype=dtype)
    assert_close(openacl.ops.floor_divide(_dev(a), _dev(b)).numpy(), expected)
    assert_close(openacl.ops.floor_divides(_dev(a), 3).numpy(),
                 _golden(lambda x: torch.floor_divide(x, 3), a, dtype=dtype))
    x = _dev(a)
    openacl.ops.inplace_floor_divide(x, _dev(b))
    assert_close(x.numpy(), expected, "inplace")


def test_floor_divide_refusals():
    flags = _dev(np.array([True, False]))
    assert _code(openacl.ops.floor_divide, flags, flags) == ACLNN_ERR_PARAM_INVALID
    a = _dev(np.ones((2, 3), np.float32))
    assert _code(openacl.ops.floor_divide, a, _dev(np.ones((4,), np.float32))) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.floor_divide_get_workspace_size, a, a, None) == ACLNN_ERR_PARAM_NULLPTR
    assert _code(aclnn.floor_divide_get_workspace_size, a, a,
                 openacl.empty((2, 3), np.int32)) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.atan2, _dev(np.ones(2, np.complex64)),
                 _dev(np.ones(2, np.complex64))) == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("mode,torch_mode", [(0, None), (1, "trunc"), (2, "floor")])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.int64], ids=str)
def test_div_mods_and_inplace_forms(mode, torch_mode, dtype):
    dtype = np.dtype(dtype)
    a = random_array((4, 5), dtype, np.random.default_rng(13), -9, 9)
    divisor = 3 if dtype.kind == "i" else 2.5
    expected = _golden(lambda x: torch.div(x, divisor, rounding_mode=torch_mode), a,
                       dtype=np.float32 if mode == 0 and dtype.kind == "i" else dtype)
    assert_close(openacl.ops.div_mods(_dev(a), divisor, mode).numpy(), expected)
    if mode or dtype.kind == "f":
        x = _dev(a)
        openacl.ops.inplace_div_mods(x, divisor, mode)
        assert_close(x.numpy(), expected, "inplace")
    assert _code(openacl.ops.div_mods, _dev(a), 2, 3) == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), FLOATS[1],
                                   np.dtype(np.int32), np.dtype(np.int8)], ids=str)
def test_add_v3_matches_torch(dtype):
    other = random_array((3, 4), dtype, np.random.default_rng(14))
    alpha = 2 if dtype.kind == "i" else 1.5
    expected = _golden(lambda y: torch.add(3, y, alpha=alpha), other, dtype=dtype)
    assert_close(openacl.ops.add_v3(3, _dev(other), alpha).numpy(), expected)
    target = _dev(other)
    openacl.ops.inplace_add_v3(3, target, alpha)
    assert_close(target.numpy(), expected, "inplace")


def test_add_v3_refusals():
    other = _dev(np.ones(3, np.int16))
    assert _code(openacl.ops.add_v3, 1, other) == ACLNN_ERR_PARAM_INVALID  # int16: not CANN's
    floats = _dev(np.ones(3, np.float32))
    assert _code(aclnn.add_v3_get_workspace_size, None, floats, None,
                 openacl.empty((3,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR
    assert _code(aclnn.add_v3_get_workspace_size, openacl.create_scalar(1.0, openacl.ACL_FLOAT),
                 floats, openacl.create_scalar(1.0, openacl.ACL_FLOAT),
                 openacl.empty((4,), np.float32)) == ACLNN_ERR_PARAM_INVALID
