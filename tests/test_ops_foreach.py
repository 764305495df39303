"""Foreach operators against PyTorch's ``torch._foreach_*`` CPU kernels, with CANN's
precision standard.

Goldens are torch's results computed in float64 (integers in int64) and rounded once to the
list's dtype. Lists hold tensors of different shapes (one of them 0-dim), as optimizers
pass a model's parameters; the bad inputs are the refusals CANN's documents list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
import torch

import openacl
from op_harness import (
    BF16,
    TORCH_DTYPES,
    assert_close,
    from_torch,
    random_array,
    strided,
    to_torch,
)
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from openacl.ops.foreach import ROUNDINGS
from openacl.tensor import Tensor, create_scalar, create_tensor, destroy_scalar

FLOATS = [np.dtype(np.float32), np.dtype(np.float16), BF16]
SHAPES = [(3, 5), (7,), ()]  # a list of parameters: a matrix, a vector, a 0-dim tensor
F32, I8, I16, I32, I64 = (np.dtype(t) for t in (np.float32, np.int8, np.int16, np.int32,
                                                 np.int64))


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _lists(count: int, dtype, low: float = -4.0, high: float = 4.0, seed: int = 0,
           shapes: Sequence[tuple[int, ...]] = SHAPES) -> list[list[np.ndarray]]:
    """``count`` lists of random arrays, one per shape of ``shapes``."""
    rng = np.random.default_rng(seed)
    return [[random_array(s, dtype, rng, low, high) for s in shapes] for _ in range(count)]


def _wide(arrays: Sequence[np.ndarray]) -> list[torch.Tensor]:
    """Torch tensors in float64 (integers: int64)."""
    tensors = [to_torch(a) for a in arrays]
    return [t.to(torch.float64 if t.dtype.is_floating_point else torch.int64) for t in tensors]


def _check(ours: Sequence[openacl.Tensor], golden: Sequence[torch.Tensor], dtype,
           what: str = "") -> None:
    """Our results against torch's float64 ones rounded once to ``dtype``."""
    assert len(ours) == len(golden), what
    for index, (mine, theirs) in enumerate(zip(ours, golden, strict=True)):
        expected = from_torch(theirs.to(TORCH_DTYPES[np.dtype(dtype)]))
        assert_close(mine.numpy(), expected, f"{what} [{index}]")


def _devices(*lists: Sequence[np.ndarray]) -> list[list[openacl.Tensor]]:
    return [[_dev(a) for a in arrays] for arrays in lists]


def _scalar_list(values, data_type) -> list[int]:
    return [create_scalar(v, data_type) for v in values]


def _error(call: Callable, code: int = ACLNN_ERR_PARAM_INVALID, argument: str | None = None
           ) -> AclError:
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code, info.value.message
    if argument is not None:
        assert f"'{argument}'" in info.value.message, info.value.message
    return info.value


# -- one list ------------------------------------------------------------------------------------
UNARY = {  # name: (torch reference, value range)
    "abs": (torch.abs, (-4, 4)), "acos": (torch.acos, (-0.99, 0.99)),
    "asin": (torch.asin, (-0.99, 0.99)), "atan": (torch.atan, (-4, 4)),
    "cos": (torch.cos, (-4, 4)), "cosh": (torch.cosh, (-4, 4)), "erf": (torch.erf, (-3, 3)),
    "erfc": (torch.erfc, (-3, 3)), "exp": (torch.exp, (-4, 4)),
    "expm1": (torch.expm1, (-4, 4)), "log": (torch.log, (0.05, 4)),
    "log10": (torch.log10, (0.05, 4)), "log1p": (torch.log1p, (-0.9, 4)),
    "log2": (torch.log2, (0.05, 4)), "neg": (torch.neg, (-4, 4)),
    "reciprocal": (torch.reciprocal, (0.25, 4)), "sigmoid": (torch.sigmoid, (-8, 8)),
    "sign": (torch.sign, (-4, 4)), "sin": (torch.sin, (-4, 4)), "sinh": (torch.sinh, (-4, 4)),
    "sqrt": (torch.sqrt, (0, 4)), "tan": (torch.tan, (-1.2, 1.2)),
    "tanh": (torch.tanh, (-4, 4)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_unary_matches_torch(name, dtype):
    reference, (low, high) = UNARY[name]
    (x,) = _lists(1, dtype, low, high, seed=len(name))
    ours = getattr(openacl.ops, f"foreach_{name}")(x)
    _check(ours, getattr(torch, f"_foreach_{name}")(_wide(x)), dtype, name)


@pytest.mark.parametrize(("name", "dtype", "low", "high"), [
    ("neg", I8, -100, 100), ("neg", np.dtype(np.uint8), 0, 255), ("neg", I16, -900, 900),
    ("neg", I32, -10 ** 6, 10 ** 6), ("sign", I8, -5, 5), ("sign", I32, -5, 5),
    ("sign", I64, -5, 5), ("exp", I8, -2, 3), ("exp", I16, -3, 9), ("expm1", I8, -2, 3)])
def test_unary_integer_lists_keep_their_dtype(name, dtype, low, high):
    """Integer lists give integer results (CANN's documents); exp of an integer list is
    computed in float32 and truncated into it."""
    (x,) = _lists(1, dtype, low, high)
    ours = getattr(openacl.ops, f"foreach_{name}")(x)
    reference = getattr(torch, name)
    for mine, source in zip(ours, x, strict=True):
        wide = to_torch(source).to(torch.float64 if name.startswith("exp") else torch.int64)
        np.testing.assert_array_equal(mine.numpy(), from_torch(
            reference(wide).to(TORCH_DTYPES[dtype])), err_msg=name)


def test_unary_writes_strided_outputs_and_reads_strided_inputs():
    (x,) = _lists(1, F32, shapes=[(4, 6), (5,)])
    inputs = [strided(a, kind) for a, kind in zip(x, ("transpose", "step"), strict=True)]
    outs = [strided(np.zeros_like(a)) for a in x]
    workspace, executor = aclnn.foreach_sqrt_get_workspace_size(inputs, outs)
    aclnn.foreach_sqrt(0, workspace, executor, 0)
    openacl.rt.synchronize_stream(0)
    _check(outs, [torch.sqrt(t) for t in _wide(x)], F32, "sqrt")


def test_an_out_list_may_be_the_input_list():
    (x,) = _lists(1, F32, 0.1, 4)
    tensors = [_dev(a) for a in x]
    workspace, executor = aclnn.foreach_log_get_workspace_size(tensors, tensors)
    aclnn.foreach_log(0, workspace, executor, 0)
    openacl.rt.synchronize_stream(0)
    _check(tensors, torch._foreach_log(_wide(x)), F32, "log in place")


@pytest.mark.parametrize("dtype", [*FLOATS, I16, I32], ids=str)
def test_zero_inplace(dtype):
    (x,) = _lists(1, dtype)
    tensors = [_dev(a) for a in x]
    result = openacl.ops.foreach_zero_inplace(tensors)
    assert result is tensors or list(result) == tensors
    for tensor, source in zip(tensors, x, strict=True):
        np.testing.assert_array_equal(tensor.numpy(), np.zeros_like(source))


@pytest.mark.parametrize(("source", "target"), [
    (F32, F32), (F32, np.dtype(np.float16)), (F32, BF16), (np.dtype(np.float16), F32),
    (I64, I64), (np.dtype(np.bool_), np.dtype(np.bool_)), (np.dtype(np.float64),) * 2])
def test_copy_and_its_conversions(source, target):
    (x,) = _lists(1, source)
    inputs, outs = [_dev(a) for a in x], [openacl.empty(a.shape, target) for a in x]
    workspace, executor = aclnn.foreach_copy_get_workspace_size(inputs, outs)
    aclnn.foreach_copy(0, workspace, executor, 0)
    openacl.rt.synchronize_stream(0)
    for out, a in zip(outs, x, strict=True):
        np.testing.assert_array_equal(out.numpy(), a.astype(target))


@pytest.mark.parametrize("order", [2.0, 1.0, 3.0, 0.5, 0.0, float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_norm_matches_torch(order, dtype):
    (x,) = _lists(1, dtype, seed=3)
    ours = openacl.ops.foreach_norm(x, order)
    assert all(t.shape == () for t in ours)
    golden = [torch.linalg.vector_norm(t, order) for t in _wide(x)]
    _check(ours, golden, dtype, f"norm {order}")


def test_norm_of_large_values_does_not_overflow_and_takes_an_int64_order():
    x = [np.full((8,), 3e38, np.float32), np.array([1e-30, -2e-30], np.float32)]
    ours = openacl.ops.foreach_norm(x, np.int64(2))
    _check(ours, [torch.linalg.vector_norm(t, 2) for t in _wide(x)], F32, "norm")


@pytest.mark.parametrize("mode", sorted(ROUNDINGS) + [0, 9])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_round_off_number_modes(mode, dtype):
    values = np.array([-2.5, -1.5, -1.2, -0.5, 0.0, 0.4, 0.5, 1.5, 2.5, 2.7, 3.0, 7.25],
                      np.float32).astype(dtype)
    expected = {1: np.rint, 2: np.floor, 3: np.ceil, 4: lambda v: np.sign(v) * np.floor(
        np.abs(v) + 0.5), 5: np.trunc, 6: lambda v: np.array([-3, -1, -1, -1, 0, 1, 1, 1, 3,
                                                              3, 3, 7], np.float64),
        7: lambda v: v - np.trunc(v)}.get(mode, lambda v: v)(values.astype(np.float64))
    v1 = openacl.ops.foreach_round_off_number([values], np.array([mode], np.int8))
    v2 = openacl.ops.foreach_round_off_number_v2([values], mode)
    for ours in (v1[0], v2[0]):
        assert_close(ours.numpy(), expected.astype(dtype), f"mode {mode}")


def test_round_off_number_of_int16_is_the_input_but_the_fraction_is_zero():
    x = np.array([-3, 0, 7], np.int16)
    np.testing.assert_array_equal(openacl.ops.foreach_round_off_number_v2([x], 2)[0].numpy(), x)
    np.testing.assert_array_equal(openacl.ops.foreach_round_off_number_v2([x], 7)[0].numpy(),
                                  np.zeros(3, np.int16))


# -- lists and scalars ---------------------------------------------------------------------------
BINARY = {  # name: (torch._foreach_ function, list dtypes besides the floats, value range)
    "add": (torch._foreach_add, [I8, np.dtype(np.uint8), I16, I32], (-4, 4)),
    "sub": (torch._foreach_sub, [I8, I16, I32], (-4, 4)),
    "mul": (torch._foreach_mul, [I32], (-4, 4)),
    "div": (torch._foreach_div, [], (0.5, 4)),
    "maximum": (torch._foreach_maximum, [I32], (-4, 4)),
    "minimum": (torch._foreach_minimum, [I32], (-4, 4)),
    "pow": (torch._foreach_pow, [I32], (0.5, 3)),
}
INT_SCALARS = {"add", "sub", "mul", "maximum", "minimum", "pow"}


def _binary_cases(int_forms: Callable[[str], list]) -> list:
    return [(name, dtype) for name in sorted(BINARY)
            for dtype in FLOATS + int_forms(name)]


@pytest.mark.parametrize(("name", "dtype"), _binary_cases(lambda n: BINARY[n][1]), ids=str)
def test_list_forms_match_torch(name, dtype):
    reference, _, (low, high) = BINARY[name]
    x1, x2 = _lists(2, dtype, low, high, seed=5)
    if name == "pow" and dtype.kind == "i":
        x1, x2 = _lists(1, dtype, -3, 3, seed=6)[0], _lists(1, dtype, -1, 4, seed=7)[0]
    if name in ("add", "sub"):
        alpha = np.array([3], I32 if dtype.kind in "iu" else np.float32)
        ours = getattr(openacl.ops, f"foreach_{name}_list")(x1, x2, alpha)
        _check(ours, reference(_wide(x1), _wide(x2), alpha=alpha.item()), dtype, name)
        alpha = (2 if dtype.kind == "u" else -2) if dtype.kind in "iu" else 0.75
        v2 = getattr(openacl.ops, f"foreach_{name}_list_v2")(x1, x2, alpha)
        _check(v2, reference(_wide(x1), _wide(x2), alpha=alpha), dtype, f"{name} V2")
        return
    ours = getattr(openacl.ops, f"foreach_{name}_list")(x1, x2)
    _check(ours, reference(_wide(x1), _wide(x2)), dtype, name)


def _scalar_int_forms(name: str) -> list:
    return [d for d in BINARY[name][1] if d == I32 or (name == "add" and d != np.uint8)]


@pytest.mark.parametrize(("name", "dtype"), _binary_cases(_scalar_int_forms), ids=str)
def test_scalar_forms_match_torch(name, dtype):
    """Scalar (a one-element aclTensor), ScalarV2 (an aclScalar) and ScalarList."""
    reference, _, (low, high) = BINARY[name]
    (x,) = _lists(1, dtype, low, high, seed=8)
    integer = dtype.kind in "iu"
    value = 2 if integer else -1.5 if name not in ("pow", "div") else 1.5
    tensor_scalar = np.array([value], I32 if integer else np.float32)
    golden = reference(_wide(x), value)
    _check(getattr(openacl.ops, f"foreach_{name}_scalar")(x, tensor_scalar), golden, dtype,
           f"{name} Scalar")
    if name != "pow" or not integer:  # ForeachPowScalarV2 takes floating lists only
        _check(getattr(openacl.ops, f"foreach_{name}_scalar_v2")(x, value), golden, dtype,
               f"{name} ScalarV2")
    if name == "add" and dtype in (I8, I16):
        return  # ForeachAddScalarList takes float and int32 lists
    values = [value, 3 if integer else 2.5, -1 if integer else 0.5][:len(x)]
    if name == "pow" and integer:
        values = [2, 3, 0]
    scalars = [np.int64(v) if integer else np.float32(v) for v in values]  # aclScalars
    ours = getattr(openacl.ops, f"foreach_{name}_scalar_list")(x, scalars)
    _check(ours, reference(_wide(x), values), dtype, f"{name} ScalarList")


def test_a_bfloat16_list_takes_a_float32_scalar_unrounded():
    x = [np.full((4,), 3.0, BF16)]
    ours = openacl.ops.foreach_mul_scalar(x, np.array([1.00390625], np.float32))
    # 3 * 1.00390625 rounds to 3.015625; the scalar rounded to bfloat16 first (1.0): 3.0
    np.testing.assert_array_equal(ours[0].numpy(), np.full((4,), 3.015625, BF16))


@pytest.mark.parametrize("dtype", [*FLOATS, I32], ids=str)
def test_pow_scalar_and_tensor_matches_torch(dtype):
    integer = dtype.kind == "i"
    (x,) = _lists(1, dtype, -3 if integer else -2, 4 if integer else 2, seed=9)
    base = 2 if integer else 1.5
    _check(openacl.ops.foreach_pow_scalar_and_tensor(base, x),
           torch._foreach_pow(base, _wide(x)), dtype, "pow scalar and tensor")


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_lerp_matches_torch(dtype):
    x1, x2 = _lists(2, dtype, seed=10)
    (weight,) = _lists(1, dtype, -1, 2, seed=11)
    _check(openacl.ops.foreach_lerp_list(x1, x2, weight),
           torch._foreach_lerp(_wide(x1), _wide(x2), _wide(weight)), dtype, "lerp list")
    for value in (0.25, 0.75, 1.0, -2.0):
        _check(openacl.ops.foreach_lerp_scalar(x1, x2, value),
               torch._foreach_lerp(_wide(x1), _wide(x2), value), dtype, f"lerp {value}")


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtype", [*FLOATS, I32], ids=str)
def test_addc_forms_match_torch(name, dtype):
    if name == "addcdiv" and dtype == I32:
        pytest.skip("ForeachAddcdiv takes floating lists only")
    reference = getattr(torch, f"_foreach_{name}")
    integer = dtype.kind == "i"
    x1, x2 = _lists(2, dtype, seed=12)
    (x3,) = _lists(1, dtype, 1, 4, seed=13)
    wide = [_wide(x) for x in (x1, x2, x3)]
    value = 3 if integer else -0.5
    golden = reference(*wide, value)
    _check(getattr(openacl.ops, f"foreach_{name}_scalar")(x1, x2, x3, np.array([value], dtype
                                                                            if integer or dtype
                                                                            != BF16 else F32)),
           golden, dtype, f"{name} Scalar")
    _check(getattr(openacl.ops, f"foreach_{name}_scalar_v2")(x1, x2, x3, value), golden, dtype,
           f"{name} ScalarV2")
    values = [2, -1, 3] if integer else [0.5, -2.0, 1.25]
    for form in ("list", "scalar_list"):  # scalars: a tensor of one value per list index
        ours = getattr(openacl.ops, f"foreach_{name}_{form}")(x1, x2, x3,
                                                              np.array(values, dtype))
        _check(ours, reference(*wide, values), dtype, f"{name} {form}")


# -- refusals -------------------------------------------------------------------------------------
def test_null_and_empty_lists_are_refused():
    x = [_dev(np.ones((2, 3), np.float32))]
    out = [_dev(np.ones((2, 3), np.float32))]
    _error(lambda: aclnn.foreach_abs_get_workspace_size(None, out), ACLNN_ERR_PARAM_NULLPTR,
           "x")
    _error(lambda: aclnn.foreach_abs_get_workspace_size(x, None), ACLNN_ERR_PARAM_NULLPTR,
           "out")
    _error(lambda: aclnn.foreach_abs_get_workspace_size([], out), argument="x")
    _error(lambda: aclnn.foreach_add_scalar_v2_get_workspace_size(x, None, out),
           ACLNN_ERR_PARAM_NULLPTR, "scalar")


def test_dtypes_outside_the_documents_are_refused():
    ints = [_dev(np.ones((2,), np.int32))]
    _error(lambda: openacl.ops.foreach_sqrt(ints), argument="x")  # Sqrt: floating only
    _error(lambda: openacl.ops.foreach_div_list(ints, ints), argument="x1")
    doubles = [_dev(np.ones((2,), np.float64))]
    _error(lambda: openacl.ops.foreach_abs(doubles), argument="x")
    _error(lambda: openacl.ops.foreach_round_off_number([np.ones(2, np.float32)],
                                                        np.array([1], np.int32)),
           argument="roundMode")
    _error(lambda: openacl.ops.foreach_addcdiv_scalar_v2(*[[np.ones(2, np.float32)]] * 3,
                                                         np.int64(2)), argument="scalar")


def test_mixed_lists_and_mismatched_lengths_and_shapes_are_refused():
    a, b = np.ones((2, 3), np.float32), np.ones((3,), np.float32)
    _error(lambda: openacl.ops.foreach_exp([a, b.astype(np.float16)]), argument="x")
    _error(lambda: openacl.ops.foreach_mul_list([a, b], [a]), argument="x2")
    _error(lambda: openacl.ops.foreach_mul_list([a, b], [a, a]), argument="x2")
    _error(lambda: openacl.ops.foreach_mul_list([a], [a.astype(np.float16)]), argument="x2")
    _error(lambda: openacl.ops.foreach_lerp_list([a], [a], [b]), argument="weight")
    outs = [_dev(np.ones((3, 2), np.float32))]
    _error(lambda: aclnn.foreach_abs_get_workspace_size([_dev(a)], outs), argument="out")
    outs = [_dev(np.ones((2, 3), np.float16))]
    _error(lambda: aclnn.foreach_abs_get_workspace_size([_dev(a)], outs), argument="out")
    outs = [_dev(a), _dev(a)]
    _error(lambda: aclnn.foreach_abs_get_workspace_size([_dev(a)], outs), argument="out")


def test_bad_scalars_are_refused():
    a = np.ones((2, 3), np.float32)
    ints = [np.ones((2,), np.int32)]
    _error(lambda: openacl.ops.foreach_add_scalar([a], np.ones(2, np.float32)),
           argument="scalar")  # two elements
    _error(lambda: openacl.ops.foreach_add_list([a], [a], np.ones((1, 2), np.float32)),
           argument="alpha")
    _error(lambda: openacl.ops.foreach_addcmul_list([a, a], [a, a], [a, a],
                                                    np.ones(3, np.float32)), argument="scalars")
    _error(lambda: openacl.ops.foreach_mul_scalar_v2(ints, 1.5), argument="scalar")
    _error(lambda: openacl.ops.foreach_mul_scalar(ints, np.ones(1, np.float32)),
           argument="scalar")
    _error(lambda: openacl.ops.foreach_add_scalar_v2([np.ones(2, np.int8)], 300),
           argument="scalar")  # overflows int8
    _error(lambda: openacl.ops.foreach_add_scalar_list([a, a], [1.0]), argument="scalars")
    _error(lambda: openacl.ops.foreach_add_scalar_list([a, a], [np.float16(1), np.float16(2)]),
           argument="scalars")  # ForeachAddScalarList's scalars: float32 or int64
    scalars = _scalar_list([1.0, 2.0, 3.0], openacl.ACL_FLOAT)  # an aclScalarList's scalars
    outs = [_dev(a), _dev(a)]
    try:
        _error(lambda: aclnn.foreach_add_scalar_list_get_workspace_size(
            [_dev(a), _dev(a)], scalars, outs), argument="scalars")
    finally:
        for handle in scalars:
            destroy_scalar(handle)


def test_copy_and_norm_outputs_are_checked():
    a = np.ones((2, 3), np.float32)
    _error(lambda: aclnn.foreach_copy_get_workspace_size(
        [_dev(a)], [_dev(a.astype(np.int32))]), argument="out")
    _error(lambda: aclnn.foreach_copy_get_workspace_size(
        [_dev(a.astype(np.float16))], [_dev(a.astype(BF16))]), argument="out")
    order = create_scalar(2.0, openacl.ACL_FLOAT)
    try:
        _error(lambda: aclnn.foreach_norm_get_workspace_size(
            [_dev(a)], order, [_dev(np.ones(2, np.float32))]), argument="out")
        workspace, executor = aclnn.foreach_norm_get_workspace_size(
            [_dev(a)], order, [_dev(np.ones((1, 1), np.float32))])  # any shape of 1 element
        aclnn.destroy_executor(executor)
    finally:
        destroy_scalar(order)


def test_an_out_tensor_partly_over_an_input_is_refused_and_long_lists_bind_quickly():
    base = _dev(np.arange(8, dtype=np.float32))
    views = [Tensor(create_tensor((6,), np.float32, [1], offset, openacl.ACL_FORMAT_ND, (8,),
                                  base.data_ptr), keepalive=base) for offset in (0, 2)]
    _error(lambda: aclnn.foreach_neg_get_workspace_size([views[0]], [views[1]]),
           argument="out")
    many = [_dev(np.ones((4,), np.float32)) for _ in range(300)]  # a model's parameters
    workspace, executor = aclnn.foreach_neg_get_workspace_size(many, many)  # in place: fine
    aclnn.destroy_executor(executor)


# -- the in-place forms --------------------------------------------------------------------------
INPLACE = {  # one-shot name: (extra arguments, torch reference over float64 lists)
    "foreach_add_list_inplace": (lambda x2: [x2, np.array([2.0], np.float32)],
                                 lambda x1, x2: torch._foreach_add(x1, x2, alpha=2.0)),
    "foreach_sub_list_inplace": (lambda x2: [x2, np.array([2.0], np.float32)],
                                 lambda x1, x2: torch._foreach_sub(x1, x2, alpha=2.0)),
    "foreach_mul_list_inplace": (lambda x2: [x2], torch._foreach_mul),
    "foreach_div_list_inplace": (lambda x2: [x2], torch._foreach_div),
    "foreach_mul_scalar_inplace": (lambda x2: [np.array([-1.5], np.float32)],
                                   lambda x1, x2: torch._foreach_mul(x1, -1.5)),
    "foreach_sub_scalar_inplace": (lambda x2: [np.array([-1.5], np.float32)],
                                   lambda x1, x2: torch._foreach_sub(x1, -1.5)),
    "foreach_log_inplace": (lambda x2: [], lambda x1, x2: torch._foreach_log(x1)),
    "foreach_a_cos_inplace": (lambda x2: [], lambda x1, x2: torch._foreach_acos(x1)),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_inplace_forms_write_their_first_list(name, dtype):
    extra, reference = INPLACE[name]
    x1, x2 = _lists(2, dtype, 0.1, 0.95, seed=14)
    tensors = [_dev(a) for a in x1]
    result = getattr(openacl.ops, name)(tensors, *extra(x2))
    assert list(result) == tensors
    _check(tensors, reference(_wide(x1), _wide(x2)), dtype, name)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("poison", [None, np.inf, np.nan])
def test_non_finite_check_and_unscale_matches_torch(dtype, poison):
    (grads,) = _lists(1, dtype, seed=15)
    if poison is not None:
        grads[0].reshape(-1)[3] = poison
    tensors = [_dev(a) for a in grads]
    found, scale = _dev(np.zeros(1, np.float32)), np.array([0.125], np.float32)
    openacl.ops.foreach_non_finite_check_and_unscale(tensors, found, scale)
    wide = _wide(grads)
    found_torch = torch.zeros(1, dtype=torch.float32)  # (torch: float32 foundInf, invScale)
    torch._amp_foreach_non_finite_check_and_unscale_(wide, found_torch, torch.tensor([0.125]))
    _check(tensors, wide, dtype, "unscaled")
    assert found.numpy()[0] == found_torch.item()
    _error(lambda: openacl.ops.foreach_non_finite_check_and_unscale(
        tensors, found, np.array([0.125], np.float16)), argument="invScale")
    _error(lambda: openacl.ops.foreach_non_finite_check_and_unscale(
        tensors, _dev(np.zeros(2, np.float32)), scale), argument="foundInf")
