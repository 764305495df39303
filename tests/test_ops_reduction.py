"""Reduction operators against PyTorch CPU, with CANN's precision standard."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import openacl
from op_harness import (
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

HALF_FLOATS = FLOATS[:3]  # float16, bfloat16, float32: what aclnnStd/Var support
DIM_CASES = [[], [0], [-1], [0, 2], [2, -3]]
SHAPE = (3, 4, 5)


# every test on both kernel implementations: the C extension's and numpy's
pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


class Device:
    """Device tensors kept alive for the whole test (phase 2 runs after phase 1 returns)."""

    def __init__(self) -> None:
        self.kept: list = []

    def __call__(self, array) -> openacl.Tensor:
        tensor = openacl.to_device(np.asarray(array))
        self.kept.append(tensor)
        return tensor

    def empty(self, shape, dtype) -> openacl.Tensor:
        tensor = openacl.empty(shape, dtype)
        self.kept.append(tensor)
        return tensor

    def keep(self, tensor):
        self.kept.append(tensor)
        return tensor


@pytest.fixture
def dev():
    return Device()


def _run(dev: Device, name: str, array, *args, **kwargs):
    """One-shot ``openacl.ops.<name>`` on a device copy of ``array``: numpy result(s)."""
    result = getattr(openacl.ops, name)(dev(array), *args, **kwargs)
    if isinstance(result, tuple):
        return tuple(t.numpy() for t in result)
    return result.numpy()


def _expect_error(code: int, argument: str | None, fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    if argument is not None:
        assert f"'{argument}'" in info.value.message, info.value.message
    return info.value


# -- ReduceSum ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_reduce_sum_matches_torch(dev, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(1))
    for dims in DIM_CASES:
        for keep in (False, True):
            golden = from_torch(torch.sum(to_torch(a), dim=dims, keepdim=keep))
            assert_close(_run(dev, "reduce_sum", a, dims, keep), golden,
                         f"sum {dtype} {dims} {keep}")


@pytest.mark.parametrize("source,target", [(np.int32, np.float32), (np.bool_, np.int64),
                                           (np.float32, np.float16), (np.int8, np.int8),
                                           (np.float32, np.int32), (np.float16, np.float64)],
                         ids=str)
def test_reduce_sum_dtype_argument(dev, source, target):
    a = random_array((6, 7), source, np.random.default_rng(2), -100, 100)
    golden = from_torch(torch.sum(to_torch(a), dim=[1], dtype=to_torch(
        np.zeros(1, target)).dtype))
    assert_close(_run(dev, "reduce_sum", a, [1], False, target), golden)


def test_reduce_sum_float16_accumulates_wide(dev):
    a = np.full(4096, 1.0 / 3, np.float16)
    golden = from_torch(torch.sum(to_torch(a)))
    assert_close(_run(dev, "reduce_sum", a), golden)


def test_reduce_sum_complex(dev):
    a = random_array((3, 4), np.complex64)
    assert_close(_run(dev, "reduce_sum", a, [0]), from_torch(torch.sum(to_torch(a), dim=0)))


# -- Mean --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mean_matches_torch(dev, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(3))
    for dims in DIM_CASES:
        for keep in (False, True):
            golden = from_torch(torch.mean(to_torch(a), dim=dims, keepdim=keep))
            assert_close(_run(dev, "mean", a, dims, keep), golden, f"mean {dtype} {dims}")


def test_mean_into_a_narrower_dtype_rounds_once(dev):
    """A float64 mean asked for in bfloat16 / float16 is the wide mean rounded once (torch's
    ``mean(dtype=)``), not a mean of elements each rounded to the narrow type first: values
    cancelling to near zero show the difference (CANN's ATK Mean case 55)."""
    a = np.random.default_rng(55).uniform(-1, 1, 255)
    a -= a.mean() - 0.0101  # a small mean of large terms
    for narrow, torch_dtype in ((ml_dtypes.bfloat16, torch.bfloat16),
                                (np.float16, torch.float16)):
        want = torch.mean(torch.from_numpy(a), dtype=torch_dtype).float().item()
        got = _run(dev, "mean", a, [], False, np.dtype(narrow))
        assert float(got) == want
        assert want == float(np.float64(a.mean()).astype(narrow))


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_mean_of_integers_needs_a_float_dtype(dev, dtype):
    a = random_array((4, 5), dtype, np.random.default_rng(4))
    golden = from_torch(torch.mean(to_torch(a), dim=[1], dtype=torch.float32))
    assert_close(_run(dev, "mean", a, [1], False, np.float32), golden)
    with pytest.raises(RuntimeError):
        torch.mean(to_torch(a))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.mean, dev(a))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dtype", openacl.ops.mean, dev(a), [], False,
                  np.int32)


# -- Amax / Amin -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_amax_amin_match_torch(dev, name, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(5))
    for dims in DIM_CASES:
        for keep in (False, True):
            golden = from_torch(getattr(torch, name)(to_torch(a), dim=dims, keepdim=keep))
            assert_close(_run(dev, name, a, dims, keep), golden, f"{name} {dtype} {dims}")


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_),
                                   np.dtype(np.float16)], ids=str)
def test_amax_amin_over_a_short_axis_match_torch(dev, name, dtype):
    # one short reduced axis with many results runs as passes over its slices
    rng = np.random.default_rng(9)
    a = random_array((4, 40, 3, 3), dtype, rng)
    if dtype.kind == "f":
        a[0, 0, 1, 2] = np.nan  # propagates, as torch's does
        a[1, 1, 0] = [0.0, -0.0, 0.0]
    for dims in ([3], [2], [0], [-1]):
        for keep in (False, True):
            golden = from_torch(getattr(torch, name)(to_torch(a), dim=dims, keepdim=keep))
            assert_close(_run(dev, name, a, dims, keep), golden, f"{name} {dtype} {dims}")


@pytest.mark.parametrize("name", ["amax", "amin", "arg_max", "arg_min"])
def test_extrema_propagate_nan(dev, name):
    a = np.array([[1.0, np.nan, 3.0, np.nan], [5.0, -1.0, 2.0, 0.0]], np.float32)
    torch_name = name.replace("_", "")
    golden = from_torch(getattr(torch, torch_name)(to_torch(a), dim=1))
    args = [[1]] if name.startswith("am") else [1]
    assert_close(_run(dev, name, a, *args), golden)


# -- Prod --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_prod_matches_torch(dev, dtype):
    low, high = (0.5, 1.5) if dtype.kind == "f" or dtype == ml_dtypes.bfloat16 else (-2, 2)
    a = random_array((3, 4, 2), dtype, np.random.default_rng(6), low, high)
    assert_close(_run(dev, "prod", a), from_torch(torch.prod(to_torch(a))), f"prod {dtype}")
    for dim in (0, -1, 1):
        for keep in (False, True):
            golden = from_torch(torch.prod(to_torch(a), dim=dim, keepdim=keep))
            assert_close(_run(dev, "prod_dim", a, dim, keep), golden, f"prod {dtype} {dim}")


def test_prod_with_dtype_and_one_element_out(dev):
    a = random_array((2, 3), np.int32, low=1, high=3)
    out = dev.empty((1,), np.float32)  # CANN documents aclnnProd's output shape as (1)
    ws, exe = aclnn.prod_get_workspace_size(dev(a), openacl.ACL_FLOAT, out)
    aclnn.prod(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), [np.prod(a)])
    golden = from_torch(torch.prod(to_torch(a), dim=1, dtype=torch.float64))
    assert_close(_run(dev, "prod_dim", a, 1, False, np.float64), golden)


# -- ArgMax / ArgMin ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["arg_max", "arg_min"])
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_arg_extrema_match_torch(dev, name, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(7))  # small values: many ties
    fn = getattr(torch, name.replace("_", ""))
    for dim in (0, 1, -1):
        for keep in (False, True):
            golden = from_torch(fn(to_torch(a), dim=dim, keepdim=keep))
            result = _run(dev, name, a, dim, keep)
            assert_close(result, golden, f"{name} {dtype} {dim} {keep}")


def test_arg_max_into_int32_out(dev):
    a = random_array((4, 6), np.float32)
    out = dev.empty((4,), np.int32)
    ws, exe = aclnn.arg_max_get_workspace_size(dev(a), 1, False, out)
    aclnn.arg_max(0, ws, exe, 0)
    np.testing.assert_array_equal(out.numpy(), np.argmax(a, axis=1).astype(np.int32))


# -- Std / Var ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_std_var_match_torch(dev, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(8))
    t = to_torch(a)
    for dims in DIM_CASES + [None]:
        for keep in (False, True):
            torch_dims = dims if dims else None
            for correction in (0, 1, 2):
                assert_close(_run(dev, "std", a, dims, correction, keep),
                             from_torch(torch.std(t, dim=torch_dims, correction=correction,
                                                  keepdim=keep)), f"std {dims} {correction}")
                assert_close(_run(dev, "var_correction", a, dims, correction, keep),
                             from_torch(torch.var(t, dim=torch_dims, correction=correction,
                                                  keepdim=keep)), f"var {dims} {correction}")
            for unbiased in (False, True):
                assert_close(_run(dev, "var", a, dims, unbiased, keep),
                             from_torch(torch.var(t, dim=torch_dims, unbiased=unbiased,
                                                  keepdim=keep)), f"var {dims} {unbiased}")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_std_var_degenerate_divisor(dev):
    a = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]], np.float32)
    for correction in (3, 4):
        golden = from_torch(torch.var(to_torch(a), dim=1, correction=correction))
        assert_close(_run(dev, "var_correction", a, [1], correction), golden)
        golden = from_torch(torch.std(to_torch(a), dim=1, correction=correction))
        assert_close(_run(dev, "std", a, [1], correction), golden)


# -- Cumsum ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_cumsum_matches_torch(dev, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(9))
    for dim in (0, 1, -1):
        golden = from_torch(torch.cumsum(to_torch(a), dim=dim))
        assert_close(_run(dev, "cumsum", a, dim), golden, f"cumsum {dtype} {dim}")


def test_cumsum_dtype_and_zero_dim(dev):
    a = random_array((5, 6), np.int8, low=-100, high=100)
    golden = from_torch(torch.cumsum(to_torch(a), dim=1, dtype=torch.int8))  # wraps
    assert_close(_run(dev, "cumsum", a, 1, np.int8), golden)
    golden = from_torch(torch.cumsum(to_torch(a), dim=0, dtype=torch.float32))
    assert_close(_run(dev, "cumsum", a, 0, np.float32), golden)
    zero_dim = np.array(2.5, np.float32)
    assert_close(_run(dev, "cumsum", zero_dim, -1),
                 from_torch(torch.cumsum(to_torch(zero_dim), dim=-1)))


# -- Sort / Topk -------------------------------------------------------------------------------
SORT_TYPES = [d for d in FLOATS + INTS + BOOL if d != np.float64]


@pytest.mark.parametrize("dtype", SORT_TYPES, ids=str)
def test_sort_matches_torch_stable(dev, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(10))  # many ties
    for dim in (0, -1, 1):
        for descending in (False, True):
            values, indices = torch.sort(to_torch(a), dim=dim, descending=descending,
                                         stable=True)
            got_values, got_indices = _run(dev, "sort", a, True, dim, descending)
            assert_close(got_values, from_torch(values), f"sort {dtype} {dim} {descending}")
            np.testing.assert_array_equal(got_indices, from_torch(indices))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64], ids=str)
def test_sort_and_topk_wide_unsigned(dev, dtype):
    a = np.array([[7, 3, 9, 3], [0, 65535, 2, 2]], dtype)
    values, indices = _run(dev, "sort", a, True, 1, True)
    order = np.argsort(-a.astype(np.int64), axis=1, kind="stable")
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(a, order, 1))
    values, indices = _run(dev, "topk", a, 2, 1, True, True)
    np.testing.assert_array_equal(indices, order[:, :2])
    np.testing.assert_array_equal(values, np.take_along_axis(a, order[:, :2], 1))


def test_sort_and_topk_put_nan_above_everything(dev):
    a = np.array([1.0, np.nan, 3.0, 3.0, np.nan, -1.0, -np.inf, np.inf], np.float32)
    for descending in (False, True):
        values, indices = torch.sort(to_torch(a), descending=descending, stable=True)
        got_values, got_indices = _run(dev, "sort", a, True, 0, descending)
        assert_close(got_values, from_torch(values))
        np.testing.assert_array_equal(got_indices, from_torch(indices))
    for largest in (True, False):
        values, _ = torch.topk(to_torch(a), 4, largest=largest)
        got_values, got_indices = _run(dev, "topk", a, 4, 0, largest, True)
        assert_close(got_values, from_torch(values))
        assert_close(a[got_indices], got_values)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_topk_matches_torch(dev, dtype):
    rng = np.random.default_rng(11)
    distinct = rng.permutation(60).reshape(3, 4, 5).astype(np.float32) - 30
    if dtype == np.uint8:
        distinct = distinct + 30
    a = distinct.astype(dtype)
    for dim, k in ((0, 2), (-1, 3), (1, 4), (2, 0)):
        for largest in (True, False):
            values, indices = torch.topk(to_torch(a), k, dim=dim, largest=largest)
            got_values, got_indices = _run(dev, "topk", a, k, dim, largest, True)
            assert_close(got_values, from_torch(values), f"topk {dtype} {dim} {k}")
            np.testing.assert_array_equal(got_indices, from_torch(indices))


def test_topk_ties_give_valid_indices(dev):
    a = random_array((4, 9), np.int32, np.random.default_rng(12), 0, 3)
    values, _ = torch.topk(to_torch(a), 5, dim=1)
    got_values, got_indices = _run(dev, "topk", a, 5, 1, True, False)
    assert_close(got_values, from_torch(values))
    np.testing.assert_array_equal(np.take_along_axis(a, got_indices, 1), got_values)
    assert all(len(set(row)) == 5 for row in got_indices.tolist())


# -- Any / All ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_any_all_match_torch(dev, name, dtype):
    a = random_array(SHAPE, dtype, np.random.default_rng(13), -1, 1)
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        a[0, 0, 0] = np.nan
        a = np.where(np.random.default_rng(14).random(SHAPE) < 0.3, 0, a).astype(dtype)
    for dims in DIM_CASES:
        for keep in (False, True):
            # CANN: an empty dim reduces every dim (torch.any(x, dim=()) reduces none)
            golden = from_torch(getattr(torch, name)(to_torch(a), dim=tuple(dims) or tuple(
                range(a.ndim)), keepdim=keep))
            assert_close(_run(dev, name, a, dims, keep), golden, f"{name} {dtype} {dims}")


# -- views, empty and 0-dim --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_inputs_and_outputs(dev, kind):
    a = random_array((4, 6), np.float32, np.random.default_rng(15))
    t = to_torch(a)
    view = dev.keep(strided(a, kind))
    checks = [
        ("reduce_sum", ([1], False), torch.sum(t, dim=1)),
        ("mean", ([0], True), torch.mean(t, dim=0, keepdim=True)),
        ("amax", ([-1], False), torch.amax(t, dim=-1)),
        ("arg_min", (0, False), torch.argmin(t, dim=0)),
        ("std", ([1], 1, False), torch.std(t, dim=1)),
        ("cumsum", (1,), torch.cumsum(t, dim=1)),
        ("all", ([0], False), torch.all(t, dim=0)),
    ]
    for name, args, golden in checks:
        assert_close(getattr(openacl.ops, name)(view, *args).numpy(), from_torch(golden), name)
    values, indices = openacl.ops.sort(view, True, 1, True)
    golden_values, golden_indices = torch.sort(t, dim=1, descending=True, stable=True)
    assert_close(values.numpy(), from_torch(golden_values))
    np.testing.assert_array_equal(indices.numpy(), from_torch(golden_indices))
    # strided outputs
    out = dev.keep(strided(np.zeros((4, 6), np.float32), kind))
    ws, exe = aclnn.cumsum_get_workspace_size(view, 0, openacl.ACL_FLOAT, out)
    aclnn.cumsum(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(torch.cumsum(t, dim=0)))
    values_out = dev.keep(strided(np.zeros((4, 6), np.float32), kind))
    indices_out = dev.keep(strided(np.zeros((4, 6), np.int64), kind))
    ws, exe = aclnn.sort_get_workspace_size(view, True, 0, False, values_out, indices_out)
    aclnn.sort(0, ws, exe, 0)
    golden_values, golden_indices = torch.sort(t, dim=0, stable=True)
    assert_close(values_out.numpy(), from_torch(golden_values))
    np.testing.assert_array_equal(indices_out.numpy(), from_torch(golden_indices))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_empty_reductions(dev):
    empty = np.zeros((0, 3), np.float32)
    t = to_torch(empty)
    for name, args, golden in [
        ("reduce_sum", ([0], False), torch.sum(t, dim=0)),
        ("reduce_sum", ([], False), torch.sum(t)),
        ("mean", ([0], False), torch.mean(t, dim=0)),
        ("prod_dim", (0, False), torch.prod(t, dim=0)),
        ("prod", (), torch.prod(t)),
        ("std", ([0], 1, False), torch.std(t, dim=0)),
        ("var", (None, True, False), torch.var(t)),
        ("any", ([0], False), torch.any(t, dim=0)),
        ("all", ([0], True), torch.all(t, dim=0, keepdim=True)),
        ("amax", ([1], False), torch.amax(t, dim=1)),
        ("arg_max", (1, True), torch.argmax(t, dim=1, keepdim=True)),
        ("cumsum", (0,), torch.cumsum(t, dim=0)),
    ]:
        assert_close(_run(dev, name, empty, *args), from_torch(golden), name)
    values, indices = _run(dev, "sort", empty, False, 0, False)
    assert values.shape == indices.shape == (0, 3)
    values, indices = _run(dev, "topk", empty, 0, 1, True, True)
    assert values.shape == indices.shape == (0, 0)
    for name, args in [("amax", ([0], False)), ("amin", ([], False)), ("arg_min", (0, False))]:
        with pytest.raises((RuntimeError, IndexError)):  # torch refuses too
            getattr(torch, name.replace("_", ""))(t, *args[:1])
        _expect_error(ACLNN_ERR_PARAM_INVALID, "self", getattr(openacl.ops, name),
                      dev(empty), *args)


def test_zero_dim_tensors(dev):
    a = np.array(-1.5, np.float32)
    t = to_torch(a)
    for name, args, golden in [
        ("reduce_sum", ([0], True), torch.sum(t, dim=0, keepdim=True)),
        ("mean", ([-1], False), torch.mean(t, dim=-1)),
        ("amin", ([], False), torch.amin(t)),
        ("prod", (), torch.prod(t)),
        ("prod_dim", (0, True), torch.prod(t, dim=0, keepdim=True)),
        ("arg_max", (0, False), torch.argmax(t, dim=0)),
        ("var", ([0], False, False), torch.var(t, dim=0, unbiased=False)),
        ("any", ([0], False), torch.any(t, dim=0)),
    ]:
        assert_close(_run(dev, name, a, *args), from_torch(golden), name)
    values, indices = _run(dev, "sort", a, False, -1, True)
    assert values.shape == () and values == a and indices == 0
    values, indices = _run(dev, "topk", a, 1, 0, True, True)
    assert values.shape == () and values == a and indices == 0
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dims", openacl.ops.reduce_sum, dev(a), [1])


# -- phase-1 errors ----------------------------------------------------------------------------
def test_null_arguments(dev):
    x = dev(np.ones((2, 3), np.float32))
    out = dev.empty((2,), np.float32)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "self", aclnn.reduce_sum_get_workspace_size,
                  None, [1], False, openacl.ACL_FLOAT, out)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "dims", aclnn.reduce_sum_get_workspace_size,
                  x, None, False, openacl.ACL_FLOAT, out)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "out", aclnn.reduce_sum_get_workspace_size,
                  x, [1], False, openacl.ACL_FLOAT, None)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "dim", aclnn.amax_get_workspace_size,
                  x, None, False, out)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "out", aclnn.mean_get_workspace_size,
                  x, [1], False, openacl.ACL_FLOAT, None)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "self", aclnn.arg_max_get_workspace_size,
                  None, 0, False, out)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "indicesOut", aclnn.sort_get_workspace_size,
                  x, False, 0, False, dev.empty((2, 3), np.float32), None)
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "valuesOut", aclnn.topk_get_workspace_size,
                  x, 1, 1, True, True, None, dev.empty((2, 1), np.int64))
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "dim", aclnn.any_get_workspace_size,
                  x, None, False, dev.empty((2,), np.bool_))
    # Std and Var take a null dim (every dim)
    ws, exe = aclnn.std_get_workspace_size(x, None, 1, False, dev.empty((), np.float32))
    aclnn.std(0, ws, exe, 0)
    # a missing attribute is refused, not guessed
    _expect_error(ACLNN_ERR_PARAM_INVALID, "keepDims", aclnn.reduce_sum_get_workspace_size,
                  x, [1], None, openacl.ACL_FLOAT, out)


def test_invalid_dims(dev):
    x = dev(np.ones((2, 3), np.float32))
    out = dev.empty((2,), np.float32)
    for dims in ([2], [-3], [1, -1]):
        error = _expect_error(ACLNN_ERR_PARAM_INVALID, "dims",
                              aclnn.reduce_sum_get_workspace_size, x, dims, False,
                              openacl.ACL_FLOAT, out)
        assert str(dims[-1]) in error.message or "more than once" in error.message
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.mean_get_workspace_size, x, [0, 0],
                  False, openacl.ACL_FLOAT, dev.empty((3,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.amin_get_workspace_size, x, [5],
                  False, out)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.arg_min_get_workspace_size, x, 2,
                  False, out)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.prod_dim_get_workspace_size, x, -3,
                  False, openacl.ACL_FLOAT, out)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.std_get_workspace_size, x, [1, 1], 1,
                  False, out)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.cumsum_get_workspace_size, x, 2,
                  openacl.ACL_FLOAT, dev.empty((2, 3), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.sort_get_workspace_size, x, False, 2,
                  False, dev.empty((2, 3), np.float32), dev.empty((2, 3), np.int64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.all_get_workspace_size, x, [-3],
                  False, dev.empty((2,), np.bool_))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dims", aclnn.reduce_sum_get_workspace_size, x,
                  [0.5], False, openacl.ACL_FLOAT, out)


def test_invalid_dtypes(dev):
    x = dev(np.ones((2, 3), np.float32))
    f64 = dev(np.ones((2, 3), np.float64))
    flags = dev(np.ones((2, 3), np.bool_))
    wide = dev(np.ones((2, 3), np.uint32))
    # ReduceSum: dtype must be supported and equal to out's dtype
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.reduce_sum_get_workspace_size, x, [1],
                  False, openacl.ACL_FLOAT16, dev.empty((2,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dtype", aclnn.reduce_sum_get_workspace_size, x,
                  [1], False, openacl.ACL_UINT32, dev.empty((2,), np.uint32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.reduce_sum_get_workspace_size, wide,
                  [1], False, openacl.ACL_INT64, dev.empty((2,), np.int64))
    # Mean: a float result cannot go into an integer out
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.mean_get_workspace_size, x, [1],
                  False, openacl.ACL_FLOAT, dev.empty((2,), np.int32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.mean_get_workspace_size, flags, [1],
                  False, openacl.ACL_FLOAT, dev.empty((2,), np.float32))
    # Amax: out must have self's dtype
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.amax_get_workspace_size, x, [1],
                  False, dev.empty((2,), np.float64))
    # ArgMax: int32/int64 out, no bool input
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.arg_max_get_workspace_size, x, 1,
                  False, dev.empty((2,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.arg_max_get_workspace_size, flags,
                  1, False, dev.empty((2,), np.int64))
    # Std/Var: FLOAT, FLOAT16, BFLOAT16 only (CANN's list)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.std_get_workspace_size, f64, [1],
                  1, False, dev.empty((2,), np.float64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.var_get_workspace_size, x, [1],
                  True, False, dev.empty((2,), np.float64))
    # Cumsum: no bool input; dtype equals out's dtype
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.cumsum_get_workspace_size, flags, 0,
                  openacl.ACL_INT64, dev.empty((2, 3), np.int64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.cumsum_get_workspace_size, x, 0,
                  openacl.ACL_DOUBLE, dev.empty((2, 3), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dtype", aclnn.cumsum_get_workspace_size, x, 0,
                  openacl.ACL_INT32, dev.empty((2, 3), np.int32))
    # Prod: dtype equals out's dtype
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.prod_get_workspace_size, x,
                  openacl.ACL_FLOAT, dev.empty((), np.float64))
    # Sort/Topk: values keep self's dtype, indices are int64
    _expect_error(ACLNN_ERR_PARAM_INVALID, "valuesOut", aclnn.sort_get_workspace_size, x,
                  False, 0, False, dev.empty((2, 3), np.float64), dev.empty((2, 3), np.int64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "indicesOut", aclnn.topk_get_workspace_size, x,
                  2, 1, True, True, dev.empty((2, 2), np.float32), dev.empty((2, 2), np.int32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.sort_get_workspace_size, f64,
                  False, 0, False, dev.empty((2, 3), np.float64), dev.empty((2, 3), np.int64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", aclnn.topk_get_workspace_size, flags,
                  1, 1, True, True, dev.empty((2, 1), np.bool_), dev.empty((2, 1), np.int64))
    # Any/All: bool or uint8 out
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.any_get_workspace_size, x, [1],
                  False, dev.empty((2,), np.float32))


def test_invalid_shapes_and_attributes(dev):
    x = dev(np.ones((2, 3), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.reduce_sum_get_workspace_size, x, [1],
                  True, openacl.ACL_FLOAT, dev.empty((2,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.amax_get_workspace_size, x, [], False,
                  dev.empty((2,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.std_get_workspace_size, x, [0], 1,
                  True, dev.empty((3,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.cumsum_get_workspace_size, x, 0,
                  openacl.ACL_FLOAT, dev.empty((3, 2), np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "indicesOut", aclnn.sort_get_workspace_size, x,
                  False, 0, False, dev.empty((2, 3), np.float32), dev.empty((3, 2), np.int64))
    for k in (-1, 4):
        _expect_error(ACLNN_ERR_PARAM_INVALID, "k", aclnn.topk_get_workspace_size, x, k, 1,
                      True, True, dev.empty((2, 1), np.float32), dev.empty((2, 1), np.int64))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "valuesOut", aclnn.topk_get_workspace_size, x, 2,
                  1, True, True, dev.empty((2, 3), np.float32), dev.empty((2, 2), np.int64))
    # a one-element out fits a one-element result, a bigger one does not
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.prod_get_workspace_size, x,
                  openacl.ACL_FLOAT, dev.empty((2,), np.float32))


# -- Max/Min, MaxV2, MaxDim/MinDim, MeanV2 -----------------------------------------------------
def _golden64(fn, array, dtype):
    """torch's result on the float64 widening of ``array``, rounded once to ``dtype``."""
    wide = to_torch(array).double() if np.asarray(array).dtype in FLOATS else to_torch(array)
    return from_torch(fn(wide).to(to_torch(np.zeros(1, dtype)).dtype))


@pytest.mark.parametrize("name,fn", [("max", torch.max), ("min", torch.min)])
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_whole_max_min_match_torch(dev, name, fn, dtype):
    x = random_array(SHAPE, dtype, np.random.default_rng(40))
    assert_close(_run(dev, name, x), from_torch(fn(to_torch(x))), f"{name} {dtype}")
    out = dev.empty((1,), dtype)  # CANN documents out as shape (1): any one-element out
    ws, exe = getattr(aclnn, f"{name}_get_workspace_size")(dev(x), out)
    getattr(aclnn, name)(0, ws, exe, 0)
    openacl.rt.synchronize_device()
    assert_close(out.numpy(), from_torch(fn(to_torch(x))).reshape(1))


def test_whole_max_propagates_nan_and_refuses_empty(dev):
    x = np.array([1.0, np.nan, 3.0], np.float32)
    assert np.isnan(_run(dev, "max", x)) and np.isnan(_run(dev, "min", x))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.max,
                  dev(np.zeros((0, 3), np.float32)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.min,
                  dev(np.zeros(3, np.complex64)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.max_get_workspace_size,
                  dev(x), dev.empty((1,), np.float16))


@pytest.mark.parametrize("dims", DIM_CASES, ids=str)
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("noop", [False, True])
def test_max_v2_matches_torch(dev, dims, keep, noop):
    x = random_array(SHAPE, np.float32, np.random.default_rng(41))
    result = _run(dev, "max_v2", x, dims, keep, noop)
    if not dims and noop:
        expected = x
    else:
        expected = from_torch(torch.amax(to_torch(x), dim=dims or list(range(3)), keepdim=keep))
    assert_close(result, expected, f"{dims} {keep} {noop}")


@pytest.mark.parametrize("name,fn", [("max_dim", torch.max), ("min_dim", torch.min)])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), FLOATS[1],
                                   np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)],
                         ids=str)
@pytest.mark.parametrize("dim,keep", [(0, False), (-1, True), (1, False)])
def test_max_min_dim_match_torch(dev, name, fn, dtype, dim, keep):
    x = random_array(SHAPE, dtype, np.random.default_rng(42), -3, 3)  # many ties
    values, indices = _run(dev, name, x, dim, keep)
    golden = fn(to_torch(x), dim, keep)
    assert_close(values, from_torch(golden.values))
    np.testing.assert_array_equal(indices, from_torch(golden.indices))


def test_max_dim_nan_int32_indices_and_refusals(dev):
    x = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 7.0, 7.0, 0.0]], np.float32)
    values, indices = _run(dev, "max_dim", x, 1)
    golden = torch.max(to_torch(x), 1)
    assert_close(values, from_torch(golden.values))
    np.testing.assert_array_equal(indices, from_torch(golden.indices))
    out, index = dev.empty((2,), np.float32), dev.empty((2,), np.int32)
    ws, exe = aclnn.min_dim_get_workspace_size(dev(x), 1, False, out, index)
    aclnn.min_dim(0, ws, exe, 0)
    openacl.rt.synchronize_device()
    np.testing.assert_array_equal(index.numpy(), from_torch(torch.min(to_torch(x), 1).indices))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.max_dim, dev(x), 2)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.max_dim,
                  dev(np.zeros(SHAPE, np.int8)), 0)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "indices", aclnn.max_dim_get_workspace_size,
                  dev(x), 1, False, out, dev.empty((2,), np.float32))
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "indices", aclnn.max_dim_get_workspace_size,
                  dev(x), 1, False, out, None)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dims", DIM_CASES, ids=str)
def test_mean_v2_matches_torch(dev, dtype, dims):
    x = random_array(SHAPE, dtype, np.random.default_rng(43))
    for keep, noop in ((False, False), (True, False), (False, True)):
        result = _run(dev, "mean_v2", x, dims, keep, noop)
        if not dims and noop:
            expected = x
        else:
            axes = dims or list(range(3))
            expected = _golden64(lambda t, a=axes, k=keep: torch.mean(t, a, k), x, dtype)
        assert_close(result, expected, f"{dims} {keep} {noop}")


def test_mean_v2_integers_and_refusals(dev):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    result = _run(dev, "mean_v2", x, [1])
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, (x.astype(np.float64).mean(1)).astype(np.int32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.mean_v2, dev(x), [0, 0])
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.mean_v2,
                  dev(np.ones(3, np.bool_)), [0])
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.mean_v2_get_workspace_size,
                  dev(x), [1], False, False, dev.empty((3,), np.float32))


# -- CumsumV2, Cummax, Argsort --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_v2_matches_torch(dev, dtype, exclusive, reverse):
    x = random_array(SHAPE, dtype, np.random.default_rng(44))
    dim = 1

    def golden(t):
        if reverse:
            t = torch.flip(t, [dim])
        sums = torch.cumsum(t, dim)
        if exclusive:
            sums = sums - t
        return torch.flip(sums, [dim]) if reverse else sums
    assert_close(_run(dev, "cumsum_v2", x, dim, exclusive, reverse), _golden64(golden, x, dtype))


def test_cumsum_v2_exclusive_keeps_infinities_and_refusals(dev):
    x = np.array([np.inf, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(_run(dev, "cumsum_v2", x, 0, True, False), [0, np.inf, np.inf])
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.cumsum_v2, dev(x), 1)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.cumsum_v2,
                  dev(np.ones(3, np.bool_)), 0)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.cumsum_v2_get_workspace_size,
                  dev(x), 0, False, False, dev.empty((3,), np.float64))


@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
@pytest.mark.parametrize("dim", [0, -1])
def test_cummax_matches_torch(dev, dtype, dim):
    x = random_array(SHAPE, dtype, np.random.default_rng(45), -2, 2)  # ties
    if dtype in FLOATS:
        x[1, 1, :2] = np.nan
    values, indices = _run(dev, "cummax", x, dim)
    golden = torch.cummax(to_torch(x), dim)
    assert_close(values, from_torch(golden.values))
    np.testing.assert_array_equal(indices, from_torch(golden.indices))


def test_cummax_refusals(dev):
    x = np.ones(SHAPE, np.float32)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.cummax, dev(x), 3)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "indicesOut", aclnn.cummax_get_workspace_size,
                  dev(x), 0, dev.empty(SHAPE, np.float32), dev.empty(SHAPE, np.int16))
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "valuesOut", aclnn.cummax_get_workspace_size,
                  dev(x), 0, None, dev.empty(SHAPE, np.int64))


@pytest.mark.parametrize("dtype", FLOATS[:3] + INTS, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_matches_torch_stable(dev, dtype, descending):
    x = random_array(SHAPE, dtype, np.random.default_rng(46), -3, 3)
    if dtype in FLOATS:
        x[0, 0, :2] = np.nan
    for dim in (0, -1):
        result = _run(dev, "argsort", x, dim, descending)
        expected = torch.sort(to_torch(x), dim=dim, descending=descending, stable=True)[1]
        np.testing.assert_array_equal(result, from_torch(expected))


def test_argsort_refusals(dev):
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.argsort,
                  dev(np.ones(3, np.bool_)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.argsort,
                  dev(np.ones(3, np.float32)), 1)
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.argsort_get_workspace_size,
                  dev(np.ones(3, np.float32)), 0, False, dev.empty((3,), np.int32))


# -- Trace, Dot ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_trace_matches_torch(dev, dtype):
    for shape in ((4, 4), (3, 5), (6, 2)):
        x = random_array(shape, dtype, np.random.default_rng(47))
        # CANN takes a bool matrix (an int64 count); torch has no bool trace
        golden = from_torch(torch.trace(to_torch(x).long() if dtype == np.bool_ else
                                        to_torch(x)))
        assert_close(_run(dev, "trace", x), golden if dtype == np.bool_ else
                     _golden64(torch.trace, x, golden.dtype))


def test_trace_refusals(dev):
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.trace, dev(np.ones(3)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "out", aclnn.trace_get_workspace_size,
                  dev(np.ones((2, 2), np.int32)), dev.empty((), np.int32))


@pytest.mark.parametrize("dtype", [np.dtype(t) for t in (np.float16, np.float32, np.int8,
                                                         np.int32, np.uint8)] + [FLOATS[1]],
                         ids=str)
def test_dot_matches_torch(dev, dtype):
    rng = np.random.default_rng(48)
    x, y = random_array((37,), dtype, rng), random_array((37,), dtype, rng)
    golden = _golden64(lambda a, b=y: torch.dot(a, to_torch(b).to(a.dtype)), x, dtype) \
        if dtype in FLOATS else from_torch(torch.dot(to_torch(x), to_torch(y)))
    assert_close(_run(dev, "dot", x, dev(y)), golden, str(dtype))


def test_dot_refusals(dev):
    x = dev(np.ones(3, np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "tensor", openacl.ops.dot, x,
                  dev(np.ones(3, np.float16)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "tensor", openacl.ops.dot, x,
                  dev(np.ones(4, np.float32)))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.dot,
                  dev(np.ones((3, 1), np.float32)), dev(np.ones((3, 1), np.float32)))
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "tensor", aclnn.dot_get_workspace_size, x, None,
                  dev.empty((), np.float32))


# -- StdMeanCorrection ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("dims", DIM_CASES + [None], ids=str)
@pytest.mark.parametrize("correction,keep", [(1, False), (0, True), (2, False)])
def test_std_mean_correction_matches_torch(dev, dtype, dims, correction, keep):
    x = random_array(SHAPE, dtype, np.random.default_rng(49))
    spread, average = _run(dev, "std_mean_correction", x, dims, correction, keep)
    axes = dims or list(range(3))
    wide = to_torch(x).double()
    golden_std, golden_mean = torch.std_mean(wide, axes, correction=correction, keepdim=keep)
    torch_dtype = to_torch(np.zeros(1, dtype)).dtype
    assert_close(spread, from_torch(golden_std.to(torch_dtype)), "std")
    assert_close(average, from_torch(golden_mean.to(torch_dtype)), "mean")


def test_std_mean_correction_refusals(dev):
    x = dev(np.ones(SHAPE, np.float32))
    _expect_error(ACLNN_ERR_PARAM_INVALID, "dim", openacl.ops.std_mean_correction, x, [0, 0])
    _expect_error(ACLNN_ERR_PARAM_INVALID, "self", openacl.ops.std_mean_correction,
                  dev(np.ones(SHAPE, np.float64)), [0])
    _expect_error(ACLNN_ERR_PARAM_INVALID, "meanOut",
                  aclnn.std_mean_correction_get_workspace_size, x, [0], 1, False,
                  dev.empty((4, 5), np.float32), dev.empty((3, 5), np.float32))
    _expect_error(ACLNN_ERR_PARAM_NULLPTR, "stdOut",
                  aclnn.std_mean_correction_get_workspace_size, x, [0], 1, False, None,
                  dev.empty((4, 5), np.float32))
