"""Fills and selections against PyTorch CPU, bit-exact in every dtype: InplaceFillScalar /
InplaceFillTensor / InplaceZero, InplaceMaskedFillScalar / Tensor, InplaceFillDiagonal,
DiagFlat, MaskedSelect, and the bounds: Hardtanh, ClampMinTensor, ClampMaxTensor and their
in-place forms (clamping moves values too: the result is one of the inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, FLOATS, INTS, from_torch, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from test_ops_movement import ALL, _data, _dev, _error, _exact, _rt, _two_phase  # noqa: F401

MASKED_FILL = [np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64),
               np.dtype(np.float32), np.dtype(np.float16), BF16]
CLAMP = FLOATS + INTS  # Hardtanh / Clamp*Tensor: no bool self
RNG = np.random.default_rng(11)


def _scalar_of(value, dtype):
    """An aclScalar of ``value`` typed like a PyTorch Python number for ``dtype``."""
    kind = np.bool_ if dtype == np.bool_ else (np.float64 if dtype.kind in "fV" else np.int64)
    return openacl.create_scalar(value, openacl.dtypes.from_numpy_dtype(np.dtype(kind)))


def _mask(shape):
    return RNG.random(shape) < 0.5


# -- fills ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL + [np.dtype(np.complex64)], ids=str)
def test_inplace_fill_scalar_and_zero(dtype):
    values = _data((3, 4), dtype)
    value = True if dtype == np.bool_ else (1.5 - 2j if dtype.kind == "c" else 3)
    target = strided(values, "transpose")
    scalar = openacl.create_scalar(value, openacl.dtypes.from_numpy_dtype(
        np.dtype(np.bool_) if dtype == np.bool_ else
        (np.dtype(np.complex64) if dtype.kind == "c" else np.dtype(np.int64))))
    _two_phase("inplace_fill_scalar", target, scalar)
    _exact(target.numpy(), np.full((3, 4), value, dtype))
    _two_phase("inplace_zero", target)
    _exact(target.numpy(), np.zeros((3, 4), dtype))


def test_fill_casts_like_torch_and_errors():
    ints = _dev(np.ones(3, np.int32))
    _exact(openacl.ops.inplace_fill_scalar(ints, 2.7).numpy(),
           from_torch(torch.ones(3, dtype=torch.int32).fill_(2.7)))
    zero_dim = _dev(np.array(1.0, np.float16))
    _exact(openacl.ops.inplace_fill_scalar(zero_dim, -0.5).numpy(), np.array(-0.5, np.float16))
    empty = _dev(np.zeros((0,), np.float32))
    assert openacl.ops.inplace_zero(empty).numpy().shape == (0,)
    int8 = _dev(np.ones(2, np.int8))
    _error(lambda: aclnn.inplace_fill_scalar_get_workspace_size(int8, openacl.create_scalar(
        300, openacl.ACL_INT64)), argument="value")
    _error(lambda: aclnn.inplace_fill_scalar_get_workspace_size(_dev(np.ones(2, np.float16)),
                                                                openacl.create_scalar(
                                                                    1e6, openacl.ACL_FLOAT)),
           argument="value")
    _error(lambda: aclnn.inplace_fill_scalar_get_workspace_size(ints, openacl.create_scalar(
        1j, openacl.ACL_COMPLEX64)), argument="value")
    _error(lambda: aclnn.inplace_fill_scalar_get_workspace_size(ints, None),
           ACLNN_ERR_PARAM_NULLPTR, "value")
    _error(lambda: aclnn.inplace_zero_get_workspace_size(None), ACLNN_ERR_PARAM_NULLPTR,
           "selfRef")
    _error(lambda: aclnn.inplace_zero_get_workspace_size(_dev(np.ones(2, np.uint32))),
           argument="selfRef")


FILL_TENSOR = [d for d in ALL] + [np.dtype(np.complex64)]


@pytest.mark.parametrize("dtype", FILL_TENSOR, ids=str)
def test_inplace_fill_tensor_matches_torch(dtype):
    values = _data((3, 4), dtype)
    fill = _data((1,), dtype, 1, 3)
    target = strided(values, "transpose")
    _two_phase("inplace_fill_tensor", target, _dev(fill))
    golden = to_torch(values).fill_(to_torch(fill.reshape(())))
    _exact(target.numpy(), from_torch(golden))
    zero_dim = openacl.ops.inplace_fill_tensor(_dev(values), _dev(fill.reshape(())))
    _exact(zero_dim.numpy(), from_torch(golden))


def test_inplace_fill_tensor_casts_and_errors():
    ints = _dev(np.ones(3, np.int32))
    _exact(openacl.ops.inplace_fill_tensor(ints, _dev(np.array(2.7, np.float32))).numpy(),
           from_torch(torch.ones(3, dtype=torch.int32).fill_(torch.tensor(2.7))))
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(None, ints),
           ACLNN_ERR_PARAM_NULLPTR, "selfRef")
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(ints, None),
           ACLNN_ERR_PARAM_NULLPTR, "value")
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(ints, _dev(np.ones(2, np.int32))),
           argument="value")
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(
        ints, _dev(np.ones((1, 1), np.int32))), argument="value")
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(
        ints, _dev(np.array(1j, np.complex64))), argument="value")
    _error(lambda: aclnn.inplace_fill_tensor_get_workspace_size(
        _dev(np.ones(2, np.uint16)), _dev(np.array(1, np.uint16))), argument="selfRef")


@pytest.mark.parametrize("dtype", MASKED_FILL, ids=str)
def test_inplace_masked_fill_matches_torch(dtype):
    values = _data((3, 4, 5), dtype)
    fill = True if dtype == np.bool_ else (2.5 if dtype.kind in "fV" else -3)
    for mask_shape in ((3, 4, 5), (4, 1), (5,), ()):
        mask = _mask(mask_shape)
        golden = from_torch(to_torch(values).masked_fill(torch.from_numpy(np.array(mask)), fill))
        target = strided(values, "step")
        _two_phase("inplace_masked_fill_scalar", target, _dev(mask), _scalar_of(fill, dtype))
        _exact(target.numpy(), golden, f"scalar {mask_shape}")
        value = np.array(fill, dtype)
        result = openacl.ops.inplace_masked_fill_tensor(_dev(values), _dev(mask), _dev(value))
        _exact(result.numpy(), golden, f"tensor {mask_shape}")


def test_inplace_masked_fill_casts_and_errors():
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    mask = np.array([True, False, True])
    golden = from_torch(torch.from_numpy(ints).masked_fill(torch.from_numpy(mask), 2.7))
    _exact(openacl.ops.inplace_masked_fill_scalar(_dev(ints), _dev(mask), 2.7).numpy(), golden)
    target, good = _dev(ints), _dev(mask)
    one = openacl.create_scalar(1, openacl.ACL_INT64)
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(None, good, one),
           ACLNN_ERR_PARAM_NULLPTR, "selfRef")
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(target, None, one),
           ACLNN_ERR_PARAM_NULLPTR, "mask")
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(target, good, None),
           ACLNN_ERR_PARAM_NULLPTR, "value")
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(
        target, _dev(mask.astype(np.uint8)), one), argument="mask")
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(
        target, _dev(np.ones((4, 3), bool)), one), argument="mask")  # would grow selfRef
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(
        _dev(np.ones(3, np.int16)), good, one), argument="selfRef")
    _error(lambda: aclnn.inplace_masked_fill_scalar_get_workspace_size(
        _dev(np.ones(3, np.int8)), good, openacl.create_scalar(300, openacl.ACL_INT64)),
        argument="value")
    _error(lambda: aclnn.inplace_masked_fill_tensor_get_workspace_size(
        target, good, _dev(np.ones(2, np.int32))), argument="value")


FILL_DIAGONAL = [d for d in ALL if d != np.dtype(np.float64)] + [np.dtype(np.float64),
                                                                 np.dtype(np.complex64)]
DIAGONAL_SHAPES = [((5, 5), False), ((7, 3), True), ((7, 3), False), ((3, 6), True),
                   ((4, 4, 4), False), ((3, 3, 3, 3), True), ((9, 2), True), ((2, 1), True)]


@pytest.mark.parametrize("dtype", FILL_DIAGONAL, ids=str)
def test_inplace_fill_diagonal_matches_torch(dtype):
    fill = True if dtype == np.bool_ else 3
    for shape, wrap in DIAGONAL_SHAPES:
        values = _data(shape, dtype)
        golden = from_torch(to_torch(values).fill_diagonal_(fill, wrap))
        target = strided(values, "transpose") if len(shape) == 2 else _dev(values)
        _two_phase("inplace_fill_diagonal", target, _scalar_of(fill, dtype), wrap)
        _exact(target.numpy(), golden, f"{shape} wrap={wrap}")


def test_inplace_fill_diagonal_errors():
    square = _dev(np.zeros((3, 3), np.float32))
    two = openacl.create_scalar(2, openacl.ACL_INT64)
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(None, two, False),
           ACLNN_ERR_PARAM_NULLPTR, "selfRef")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(square, None, False),
           ACLNN_ERR_PARAM_NULLPTR, "fillValue")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(
        _dev(np.zeros(3, np.float32)), two, False), argument="selfRef")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(
        _dev(np.zeros((3, 3, 2), np.float32)), two, False), argument="selfRef")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(
        _dev(np.zeros((3, 3), np.int8)), openacl.create_scalar(200, openacl.ACL_INT64), False),
        argument="fillValue")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(
        _dev(np.zeros((3, 3), np.uint32)), two, False), argument="selfRef")
    _error(lambda: aclnn.inplace_fill_diagonal_get_workspace_size(square, two, 1),
           argument="wrap")


@pytest.mark.parametrize("dtype", FILL_DIAGONAL, ids=str)
def test_diag_flat_matches_torch(dtype):
    for shape in ((4,), (2, 3), ()):
        values = _data(shape, dtype)
        for diagonal in (0, 2, -3):
            golden = from_torch(torch.diagflat(to_torch(values), diagonal))
            result = openacl.ops.diag_flat(strided(values, "step"), diagonal)
            _exact(result.numpy(), golden, f"{shape} {diagonal}")


def test_diag_flat_errors():
    x = _dev(np.ones(3, np.float32))
    _error(lambda: aclnn.diag_flat_get_workspace_size(None, 0, x), ACLNN_ERR_PARAM_NULLPTR,
           "self")
    _error(lambda: aclnn.diag_flat_get_workspace_size(x, 0, openacl.empty((4, 4), np.float32)),
           argument="out")
    _error(lambda: aclnn.diag_flat_get_workspace_size(x, 0, openacl.empty((3, 3), np.float16)),
           argument="out")
    _error(lambda: aclnn.diag_flat_get_workspace_size(_dev(np.ones(3, np.uint16)), 0, x),
           argument="self")


# -- selection ---------------------------------------------------------------------------------
MASKED_SELECT = FLOATS + INTS + [np.dtype(np.bool_)]


@pytest.mark.parametrize("dtype", MASKED_SELECT, ids=str)
def test_masked_select_matches_torch(dtype):
    values = _data((3, 4), dtype)
    for mask_shape, mask_dtype in (((3, 4), np.bool_), ((4,), np.uint8), ((2, 3, 1), np.bool_)):
        mask = _mask(mask_shape)
        golden = from_torch(torch.masked_select(to_torch(values), torch.from_numpy(mask)))
        size = int(np.prod(np.broadcast_shapes(values.shape, mask_shape)))
        out = openacl.empty((size,), dtype)
        _two_phase("masked_select", strided(values, "transpose"),
                   _dev(mask.astype(mask_dtype)), out)
        result = out.numpy()
        _exact(result[:golden.size], golden, f"{mask_shape} {mask_dtype}")
        assert not result[golden.size:].astype(bool).any()  # the rest is zero


def test_masked_select_special_values_and_errors():
    values = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    result = openacl.ops.masked_select(_dev(values), _dev(np.array([True, True, False, True])))
    _exact(result.numpy(), np.array([np.nan, np.inf, 1.0, 0.0], np.float32))
    x, mask = _dev(np.ones((2, 3), np.float32)), _dev(np.ones((2, 3), bool))
    out = openacl.empty((6,), np.float32)
    _error(lambda: aclnn.masked_select_get_workspace_size(None, mask, out),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, None, out),
           ACLNN_ERR_PARAM_NULLPTR, "mask")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, mask, None),
           ACLNN_ERR_PARAM_NULLPTR, "out")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, _dev(np.ones(4, bool)), out),
           argument="mask")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, _dev(np.ones(3, np.int32)), out),
           argument="mask")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, mask,
                                                          openacl.empty((2, 3), np.float32)),
           argument="out")
    _error(lambda: aclnn.masked_select_get_workspace_size(x, mask,
                                                          openacl.empty((6,), np.int32)),
           argument="out")


# -- bounds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", CLAMP, ids=str)
def test_hardtanh_matches_torch(dtype):
    values = _data((4, 5), dtype, -6, 6)
    values.flat[:2] = [np.nan, -np.inf] if dtype.kind in "fV" else values.flat[:2]
    for low, high in ((-2, 3), (0, 0), (-1, 1)):
        low = max(low, 0) if dtype.kind == "u" else low  # (torch wraps -2 into a uint8)
        golden = from_torch(torch.clamp(to_torch(values), low, high))
        lo, hi = _scalar_of(low, dtype), _scalar_of(high, dtype)
        _exact(openacl.ops.hardtanh(strided(values, "step"), low, high).numpy(), golden)
        target = strided(values, "transpose")
        _two_phase("inplace_hardtanh", target, lo, hi)
        _exact(target.numpy(), golden)


def test_hardtanh_errors():
    x = _dev(np.ones(3, np.float32))
    lo, hi = (openacl.create_scalar(v, openacl.ACL_FLOAT) for v in (-1.0, 1.0))
    _error(lambda: aclnn.hardtanh_get_workspace_size(None, lo, hi, x), ACLNN_ERR_PARAM_NULLPTR,
           "self")
    _error(lambda: aclnn.hardtanh_get_workspace_size(x, None, hi, x), ACLNN_ERR_PARAM_NULLPTR,
           "clipValueMin")
    _error(lambda: aclnn.hardtanh_get_workspace_size(x, hi, lo, x), argument="clipValueMin")
    _error(lambda: aclnn.hardtanh_get_workspace_size(x, lo, hi, openacl.empty((3,), np.float64)),
           argument="out")
    _error(lambda: aclnn.hardtanh_get_workspace_size(_dev(np.ones(3, bool)), lo, hi, x),
           argument="self")
    _error(lambda: aclnn.inplace_hardtanh_get_workspace_size(_dev(np.ones(3, np.int32)), lo,
                                                             hi), argument="selfRef")


@pytest.mark.parametrize("dtype", CLAMP, ids=str)
def test_clamp_tensor_bounds_match_torch(dtype):
    values = _data((3, 4), dtype, -6, 6)
    for bound_dtype in (dtype, np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.bool_)):
        bound = _data((4,), bound_dtype, -3, 3)
        for name, fn in (("clamp_min_tensor", torch.clamp_min), ("clamp_max_tensor",
                                                                 torch.clamp_max)):
            golden = from_torch(fn(to_torch(values), to_torch(bound)))
            result = getattr(openacl.ops, name)(strided(values, "step"), _dev(bound))
            _exact(result.numpy(), golden, f"{name} {bound_dtype}")
            if golden.dtype == dtype:
                target = strided(values, "transpose")
                _two_phase(f"inplace_{name}", target, _dev(bound))
                _exact(target.numpy(), golden, f"inplace {name} {bound_dtype}")


def test_clamp_tensor_nan_broadcast_and_errors():
    x = np.array([[np.nan, 1.0, 5.0]], np.float32)
    bound = np.array([[0.0], [np.nan]], np.float32)
    golden = from_torch(torch.clamp_min(torch.from_numpy(x), torch.from_numpy(bound)))
    _exact(openacl.ops.clamp_min_tensor(_dev(x), _dev(bound)).numpy(), golden)
    good, out = _dev(np.ones(3, np.float32)), openacl.empty((3,), np.float32)
    _error(lambda: aclnn.clamp_min_tensor_get_workspace_size(None, good, out),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.clamp_max_tensor_get_workspace_size(good, good, None),
           ACLNN_ERR_PARAM_NULLPTR, "out")
    _error(lambda: aclnn.clamp_min_tensor_get_workspace_size(good, _dev(np.ones(4, np.float32)),
                                                             out))
    _error(lambda: aclnn.clamp_min_tensor_get_workspace_size(_dev(np.ones(3, bool)), good, out),
           argument="self")
    _error(lambda: aclnn.inplace_clamp_max_tensor_get_workspace_size(
        _dev(np.ones(3, np.int32)), good), argument="selfRef")  # a float result
