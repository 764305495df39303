"""aclnnScatter, aclnnScatterReduce (and their in-place forms) against PyTorch, aclnnScatterNd
against numpy, aclnnQuantize against CANN's golden formula; index values out of range are
refused by the kernel (a failed stream, never a write out of bounds)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError

RNG = np.random.default_rng(11)
TORCH_REDUCE = {1: "sum", 2: "prod", 3: "amax", 4: "amin", 5: "mean"}
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64),
          np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _exact(actual, golden):
    actual, golden = np.asarray(actual), np.asarray(golden)
    assert actual.dtype == golden.dtype and actual.shape == golden.shape
    np.testing.assert_array_equal(actual.astype(np.float64), golden.astype(np.float64))


def _fails_in_kernel(name, *args, match=""):
    stream = openacl.rt.create_stream()
    workspace_size, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args)
    getattr(aclnn, name)(0, workspace_size, executor, stream)
    try:
        with pytest.raises(AclError) as info:
            openacl.rt.synchronize_stream(stream)
    finally:
        openacl.rt.destroy_stream_force(stream)
    assert match in info.value.message, info.value.message


def _error(call, argument):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == ACLNN_ERR_PARAM_INVALID, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


def _operands(dtype, dim, shape=(4, 5, 3), index_shape=(3, 4, 2), unique=False):
    rng = np.random.default_rng(dim + 17)
    x = random_array(shape, dtype, rng, 1, 4)
    src = random_array((index_shape[0] + 1, *index_shape[1:]), dtype, rng, 1, 4)
    if unique:  # distinct positions along dim: the replacing result is defined
        index = np.stack([rng.permutation(shape[dim])[:index_shape[dim]]
                          for _ in range(int(np.prod(index_shape)) // index_shape[dim])])
        index = np.moveaxis(index.reshape(*(n for k, n in enumerate(index_shape) if k != dim),
                                          index_shape[dim]), -1, dim)
    else:
        index = rng.integers(0, shape[dim], index_shape)
    return x, index.astype(np.int64), src


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", [0, 1, 2])
def test_scatter_matches_torch(dtype, reduce):
    for dim in (0, 1, -1):
        x, index, src = _operands(dtype, dim % 3, unique=reduce == 0)
        got = openacl.ops.scatter(x, dim, index, src, reduce).numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's reduce= of scatter is deprecated
            args = {} if reduce == 0 else {"reduce": {1: "add", 2: "multiply"}[reduce]}
            want = from_torch(to_torch(x).scatter(dim, torch.from_numpy(index),
                                                  to_torch(src), **args))
        if reduce and dtype.itemsize == 2 and dtype.kind != "i":
            # torch sums halves in float32; here each repeated index's value is added in
            # the tensor's dtype, one after another (onnxruntime's and ONNX's order)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=1e-2)
        else:
            _exact(got, want)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.int64),
                                   np.dtype(np.float16)], ids=str)
@pytest.mark.parametrize("reduce", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(dtype, reduce, include_self):
    for dim in (0, 2):
        x, index, src = _operands(dtype, dim)
        got = openacl.ops.scatter_reduce(x, dim, index, src, reduce, include_self).numpy()
        want = to_torch(x).scatter_reduce(dim, torch.from_numpy(index), to_torch(src),
                                          TORCH_REDUCE[reduce], include_self=include_self)
        if dtype.kind == "f" and reduce in (1, 2, 5):  # (sums and products: see above)
            np.testing.assert_allclose(got.astype(np.float64),
                                       from_torch(want).astype(np.float64), rtol=2e-3)
        else:
            _exact(got, from_torch(want))


def test_sums_with_repeated_indices_add_in_index_order():
    """float32 sums of one value, then many tiny ones: the order decides the rounding."""
    x = np.zeros(2, np.float32)
    src = np.array([1e8] + [1.0] * 8 + [-1e8], np.float32)
    index = np.zeros(10, np.int64)
    want = np.float32(0)
    for value in src:
        want = np.float32(want + value)
    got = openacl.ops.scatter(x, 0, index, src, 1).numpy()
    assert got[0] == want and got[1] == 0


def test_strided_operands_and_in_place_forms():
    x, index, src = _operands(np.dtype(np.float32), 1, unique=True)
    want = to_torch(x).scatter(1, torch.from_numpy(index), to_torch(src)).numpy()
    got = openacl.ops.scatter(strided(x, "transpose"), 1, strided(index, "step"),
                              strided(src, "step"), 0).numpy()
    _exact(got, want)
    target = _dev(x)
    openacl.ops.inplace_scatter(target, 1, _dev(index), _dev(src), 0)
    _exact(target.numpy(), want)
    target = _dev(x)
    openacl.ops.inplace_scatter_reduce(target, 1, _dev(index), _dev(src), 3, True)
    _exact(target.numpy(), to_torch(x).scatter_reduce(1, torch.from_numpy(index),
                                                      to_torch(src), "amax").numpy())


def test_scatter_nd_matches_numpy():
    data = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    for depth in (1, 2, 3):
        positions = RNG.permutation(int(np.prod(data.shape[:depth])))[:3]
        indices = np.stack(np.unravel_index(positions, data.shape[:depth]), -1).reshape(
            3, 1, depth).astype(np.int64)
        updates = RNG.standard_normal((3, 1, *data.shape[depth:])).astype(np.float32)
        want = data.copy()
        for i in range(3):
            want[tuple(indices[i, 0])] = updates[i, 0]
        _exact(openacl.ops.scatter_nd(data, indices, updates).numpy(), want)
    ints = np.arange(6, dtype=np.int64)  # integer shape tensors pass through it too
    _exact(openacl.ops.scatter_nd(ints, np.array([[5], [0]]), np.array([-1, -2])).numpy(),
           np.array([-2, 1, 2, 3, 4, -1]))


def test_indices_out_of_range_fail_in_the_kernel():
    x, index, src = _operands(np.dtype(np.float32), 0)
    out = openacl.empty(x.shape, np.float32)
    bad = index.copy()
    bad[1, 2, 1] = 4
    _fails_in_kernel("scatter", _dev(x), 0, _dev(bad), _dev(src), 0, out,
                     match="aclnnScatter: argument 'index' holds index 4")
    bad[1, 2, 1] = -1
    _fails_in_kernel("scatter_reduce", _dev(x), 0, _dev(bad), _dev(src), 3, True, out,
                     match="index -1")
    _fails_in_kernel("scatter_nd", _dev(x), _dev(np.array([[1, 5]])),
                     _dev(np.zeros((1, 3), np.float32)), out, match="index 5")
    np.testing.assert_array_equal(openacl.ops.scatter(x, 0, index, src, 2).numpy().shape,
                                  x.shape)  # the device is still usable


def test_phase_one_refusals_name_the_argument():
    x, index, src = (_dev(a) for a in _operands(np.dtype(np.float32), 0))
    out = openacl.empty((4, 5, 3), np.float32)
    _error(lambda: aclnn.scatter_get_workspace_size(x, 0, index, src, 3, out), "reduce")
    _error(lambda: aclnn.scatter_get_workspace_size(x, 3, index, src, 0, out), "dim")
    _error(lambda: aclnn.scatter_get_workspace_size(x, 0, _dev(np.zeros((3, 4), np.int64)),
                                                    src, 0, out), "index")
    _error(lambda: aclnn.scatter_get_workspace_size(x, 0, _dev(np.zeros((3, 6, 2), np.int64)),
                                                    src, 0, out), "index")
    _error(lambda: aclnn.scatter_get_workspace_size(
        x, 0, index, _dev(np.zeros((4, 4, 2), np.float64)), 0, out), "src")
    _error(lambda: aclnn.scatter_reduce_get_workspace_size(x, 0, index, src, 6, True, out),
           "reduce")
    _error(lambda: aclnn.scatter_nd_get_workspace_size(
        x, _dev(np.zeros((2, 1), np.int64)), _dev(np.zeros((2, 5), np.float32)), out),
        "updates")
    _error(lambda: aclnn.scatter_nd_get_workspace_size(
        x, _dev(np.zeros((2, 4), np.int64)), _dev(np.zeros((2,), np.float32)), out),
        "indices")


# -- Quantize ---------------------------------------------------------------------------------
def _golden(x, scales, zero_points, dtype, axis):
    """CANN's golden: round(x / scales + zeroPoints) in float32, clipped to the dtype."""
    shape = [1] * x.ndim
    shape[axis] = scales.size
    value = x.astype(np.float32) / scales.astype(np.float32).reshape(
        shape if scales.size > 1 else ())
    if zero_points is not None:
        value = value + zero_points.astype(np.float32).reshape(
            shape if scales.size > 1 else ())
    info = np.iinfo(dtype)
    return np.clip(np.nan_to_num(np.rint(value).astype(np.float64)), info.min,
                   info.max).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_quantize_matches_cann_golden(dtype):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32) * 3
    x[0, 0, :3] = [0.25, 0.75, -0.25]  # halfway quotients round to even
    for scales, points, axis in [
            (np.array([0.5], np.float32), None, 0),
            (np.array([0.01], np.float32), np.array([3], np.int32), 2),
            (RNG.uniform(0.01, 0.1, 4).astype(np.float32), RNG.integers(-5, 5, 4).astype(
                np.int8), 1),
            (RNG.uniform(0.01, 0.1, 5).astype(np.float32), RNG.uniform(-3, 3, 5).astype(
                np.float32), -1)]:
        got = openacl.ops.quantize(x, scales, points, dtype=dtype, axis=axis).numpy()
        _exact(got, _golden(x, scales, points, np.dtype(dtype), axis % 3))
    half = x.astype(np.float16)
    got = openacl.ops.quantize(half, np.array([0.05], np.float16), dtype=dtype, axis=0)
    _exact(got.numpy(), _golden(half, np.array([0.05], np.float16), None, np.dtype(dtype), 0))


def test_quantize_refusals_name_the_argument():
    x = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((2, 3), np.int8)
    scales = _dev(np.ones(3, np.float32))
    _error(lambda: aclnn.quantize_get_workspace_size(x, _dev(np.ones(2, np.float32)), None,
                                                     np.int8, 1, out), "scales")
    _error(lambda: aclnn.quantize_get_workspace_size(x, scales, _dev(np.ones(2, np.int32)),
                                                     np.int8, 1, out), "zeroPoints")
    _error(lambda: aclnn.quantize_get_workspace_size(x, scales, None, np.int16, 1,
                                                     openacl.empty((2, 3), np.int16)), "dtype")
    _error(lambda: aclnn.quantize_get_workspace_size(x, scales, None, np.int8, 2, out), "axis")
    _error(lambda: aclnn.quantize_get_workspace_size(  # bfloat16 scales: all three must be
        _dev(np.ones((2, 3), np.float16)), _dev(np.ones(3, BF16)), None, np.int8, 1, out),
        "scales")


# -- ScatterAdd, ScatterValue, ScatterNdUpdate, TfScatterAdd ---------------------------------------
def _rounded(reference: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    """A float64 / int64 torch result rounded once into ``dtype``."""
    return from_torch(reference).astype(np.float32 if dtype == BF16 else dtype).astype(dtype)


def _matches(actual: np.ndarray, golden: np.ndarray) -> None:
    """Floats under CANN's precision standard, integers and bools exactly."""
    if golden.dtype.kind in "iub":
        _exact(actual, golden)
    else:
        assert_close(actual, golden)


def _wide(array: np.ndarray) -> torch.Tensor:
    array = np.asarray(array)
    return torch.from_numpy(array.astype(np.int64 if array.dtype.kind in "iu" else
                                         np.float64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_add_matches_torch_in_float64(dtype):
    for dim in (0, 2):
        x, index, src = _operands(dtype, dim)
        got = openacl.ops.scatter_add(x, dim, index, src).numpy()
        want = _rounded(_wide(x).scatter_add(dim, torch.from_numpy(index), _wide(src)), dtype)
        _matches(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", [0, 1, 2])
def test_scatter_value_matches_torch(dtype, reduce):
    x, index, _ = _operands(dtype, 1, unique=reduce == 0)
    value = 3 if dtype.kind in "iu" else 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = {} if reduce == 0 else {"reduce": {1: "add", 2: "multiply"}[reduce]}
        want = _rounded(_wide(x).scatter(1, torch.from_numpy(index), value, **args), dtype)
    _matches(openacl.ops.scatter_value(x, 1, index, value, reduce).numpy(), want)
    target = _dev(x)
    openacl.ops.inplace_scatter_value(target, 1, _dev(index), value, reduce)
    _matches(target.numpy(), want)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16,
                                   np.dtype(np.int64), np.dtype(np.int8),
                                   np.dtype(np.bool_)], ids=str)
def test_scatter_nd_update_matches_indexing(dtype):
    data = random_array((4, 5, 6), dtype, RNG)
    for depth in (1, 2):
        positions = RNG.permutation(int(np.prod(data.shape[:depth])))[:3]
        indices = np.stack(np.unravel_index(positions, data.shape[:depth]), -1)
        updates = random_array((3, *data.shape[depth:]), dtype, RNG)
        target = _dev(data)
        openacl.ops.scatter_nd_update(target, indices.astype(np.int32), updates)
        want = data.copy()
        want[tuple(indices.T)] = updates
        _exact(target.numpy(), want)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16,
                                   np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8)],
                         ids=str)
def test_tf_scatter_add_matches_torch(dtype):
    var = random_array((6, 4), dtype, RNG, 0, 5)
    rows = np.array([[1, 4], [1, 0]])  # TensorFlow's scatter_add: indices into dim 0
    updates = random_array((2, 2, 4), dtype, RNG, 0, 5)
    target = _dev(var)
    openacl.ops.tf_scatter_add(target, rows, updates)
    want = _wide(var).index_put_((torch.from_numpy(rows),), _wide(updates), accumulate=True)
    _matches(target.numpy(), _rounded(want, dtype))
    pairs = np.array([[5, 3], [0, 0], [5, 3]], np.int32)  # scatter_nd_add: (row, column)
    values = random_array((3,), dtype, RNG, 0, 5)
    target = _dev(var)
    openacl.ops.tf_scatter_add(target, pairs, values)
    want = _wide(var).index_put_(tuple(torch.from_numpy(pairs.astype(np.int64)).T),
                                 _wide(values), accumulate=True)
    _matches(target.numpy(), _rounded(want, dtype))


def test_new_scatter_refusals():
    x, index, src = (_dev(a) for a in _operands(np.dtype(np.float32), 0))
    out = openacl.empty((4, 5, 3), np.float32)
    _error(lambda: aclnn.scatter_add_get_workspace_size(x, 3, index, src, out), "dim")
    _error(lambda: aclnn.scatter_add_get_workspace_size(
        x, 0, index, _dev(np.zeros((4, 4, 2), np.float16)), out), "src")
    value = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
    _error(lambda: aclnn.scatter_value_get_workspace_size(x, 0, index, value, 3, out), "reduce")
    var = _dev(np.zeros((4, 5), np.float32))
    _error(lambda: aclnn.scatter_nd_update_get_workspace_size(
        var, _dev(np.zeros((2, 1), np.int64)), _dev(np.zeros((2, 4), np.float32))), "updates")
    _error(lambda: aclnn.scatter_nd_update_get_workspace_size(
        _dev(np.zeros((4, 5), np.int32)), _dev(np.zeros((2, 1), np.int64)),
        _dev(np.zeros((2, 5), np.int32))), "varRef")
    _error(lambda: aclnn.tf_scatter_add_get_workspace_size(
        var, _dev(np.zeros((2,), np.int64)), _dev(np.zeros((3, 5), np.float32))), "updates")
    _fails_in_kernel("scatter_nd_update", var, _dev(np.array([[4]])),
                     _dev(np.zeros((1, 5), np.float32)), match="index 4")


# -- ScatterList --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16,
                                   np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)],
                         ids=str)
def test_scatter_list_writes_each_batch_at_its_offset(dtype):
    batch, shape = 3, (4, 6, 5)
    var = [random_array(shape, dtype, RNG) for _ in range(batch)]
    updates = random_array((batch, 4, 2, 5), dtype, RNG)
    for indice, mask in [(np.array([0, 4, 2]), None),
                         (np.array([[1, 2], [5, 1], [0, 0]], np.int32),
                          np.array([1, 0, 1], np.uint8))]:
        targets = [_dev(t) for t in var]
        openacl.ops.scatter_list(targets, indice, updates, mask, "update", -2)
        for b in range(batch):
            want = var[b].copy()
            if mask is None or mask[b] == 1:
                start, length = (indice[b], 2) if indice.ndim == 1 else indice[b]
                want[:, start:start + length] = updates[b][:, :length]
            _exact(targets[b].numpy(), want)
    targets = [_dev(t) for t in var]  # axis 1 of updates: dim 0 of each varRef tensor
    short = random_array((batch, 3, 6, 5), dtype, RNG)
    openacl.ops.scatter_list(targets, np.array([1, 0, 1]), short, None, "update", 1)
    want = var[0].copy()
    want[1:4] = short[0]
    _exact(targets[0].numpy(), want)


def test_scatter_list_refusals():
    var = [_dev(np.zeros((4, 6), np.float32)) for _ in range(2)]
    updates = _dev(np.zeros((2, 4, 2), np.float32))
    indice = _dev(np.array([0, 1]))
    _error(lambda: aclnn.scatter_list_get_workspace_size(var, indice, updates, None, "sum", -1),
           "reduceOptional")
    _error(lambda: aclnn.scatter_list_get_workspace_size(var, indice, updates, None, "update",
                                                         0), "axis")
    _error(lambda: aclnn.scatter_list_get_workspace_size(
        var, indice, updates, _dev(np.ones(2, np.int32)), "update", -1), "maskOptional")
    _error(lambda: aclnn.scatter_list_get_workspace_size(
        var, _dev(np.zeros((2, 3), np.int64)), updates, None, "update", -1), "indice")
    _error(lambda: aclnn.scatter_list_get_workspace_size(
        var, indice, _dev(np.zeros((2, 4, 7), np.float32)), None, "update", -1), "updates")
    _fails_in_kernel("scatter_list", var, _dev(np.array([0, 5])), updates, None, "update", -1,
                     match="holds offset 5")
