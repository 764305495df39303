"""Data movement operators against PyTorch CPU: bit-exact in every dtype (the upsamplers'
bilinear mode and float Arange by CANN's precision standard)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

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
from openacl.errors import (
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    AclError,
)

ALL = FLOATS + INTS + BOOL  # the dtypes torch and numpy share
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _data(shape, dtype, low=-4, high=4):
    return random_array(shape, dtype, np.random.default_rng(sum(shape) + 3), low, high)


def _exact(actual, golden, what=""):
    actual, golden = np.asarray(actual), np.asarray(golden)
    assert actual.dtype == golden.dtype, f"{what}: dtype {actual.dtype} != {golden.dtype}"
    assert actual.shape == golden.shape, f"{what}: shape {actual.shape} != {golden.shape}"
    if golden.dtype.kind == "f" or golden.dtype == BF16:  # bits, so -0.0 counts; NaN by place
        nan = np.isnan(golden.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(actual.astype(np.float64)), nan, err_msg=what)
        actual = np.where(nan, 0, actual).astype(golden.dtype).view(f"u{golden.dtype.itemsize}")
        golden = np.where(nan, 0, golden).astype(golden.dtype).view(f"u{golden.dtype.itemsize}")
    np.testing.assert_array_equal(actual, golden, err_msg=what)


def _two_phase(name, *args):
    """Both phases on the default stream; the caller keeps ``args`` alive until synced."""
    workspace_size, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args)
    assert workspace_size == 0
    getattr(aclnn, name)(0, workspace_size, executor, 0)


def _fails_in_kernel(name, *args, match=""):
    """Phase 1 accepts (it cannot see index values); the kernel raises; the stream's
    synchronize reports it."""
    stream = openacl.rt.create_stream()
    workspace_size, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args)
    getattr(aclnn, name)(0, workspace_size, executor, stream)
    with pytest.raises(AclError) as info:
        openacl.rt.synchronize_stream(stream)
    assert match in info.value.message


def _error(call, code=ACLNN_ERR_PARAM_INVALID, argument=None):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code, info.value.message
    if argument is not None:
        assert f"'{argument}'" in info.value.message, info.value.message
    return info.value


# -- Cast and InplaceCopy ---------------------------------------------------------------------
@pytest.mark.parametrize("source", ALL, ids=str)
def test_cast_matches_torch(source):
    values = _data((3, 5), source, 0 if source.kind != "i" else -4, 4)
    tensor = _dev(values)
    for target in ALL:
        data = values
        if source.kind in "fV" and target.kind == "u":  # negative float -> unsigned is UB
            data = np.abs(values)
        golden = from_torch(to_torch(data).to(to_torch(np.zeros(0, target)).dtype))
        src = tensor if data is values else _dev(data)
        _exact(openacl.ops.cast(src, openacl.dtypes.from_numpy_dtype(target)).numpy(), golden,
               f"{source}->{target}")


def test_cast_special_values_and_wide_types():
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 65520.0, 1e-8], np.float32)
    for target in (np.float16, BF16, np.float64, np.bool_):
        golden = from_torch(to_torch(special).to(to_torch(np.zeros(0, target)).dtype))
        _exact(openacl.ops.cast(_dev(special), openacl.dtypes.from_numpy_dtype(target)).numpy(),
               golden, str(target))
    complex_values = np.array([1.5 + 2j, -3 - 1j, 0j], np.complex64)
    _exact(openacl.ops.cast(_dev(complex_values), openacl.ACL_FLOAT).numpy(),
           complex_values.real.astype(np.float32))
    _exact(openacl.ops.cast(_dev(complex_values), openacl.ACL_BOOL).numpy(),
           np.array([True, True, False]))
    wide = np.array([0, 7, 65535], np.uint16)  # torch lacks most uint16 ops; numpy is the oracle
    _exact(openacl.ops.cast(_dev(wide), openacl.ACL_UINT64).numpy(), wide.astype(np.uint64))
    _exact(openacl.ops.cast(_dev(wide), openacl.ACL_INT32).numpy(), wide.astype(np.int32))


def test_cast_two_phase_non_contiguous_and_errors():
    values = _data((3, 4), np.float32)
    src, out = strided(values, "transpose"), strided(np.zeros((3, 4), np.float16), "step")
    _two_phase("cast", src, openacl.ACL_FLOAT16, out)
    _exact(out.numpy(), values.astype(np.float16))
    good = _dev(values)
    _error(lambda: aclnn.cast_get_workspace_size(None, openacl.ACL_FLOAT, good),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.cast_get_workspace_size(good, openacl.ACL_INT32, good), argument="out")
    _error(lambda: aclnn.cast_get_workspace_size(good, 9999, good), argument="dtype")
    _error(lambda: aclnn.cast_get_workspace_size(good, openacl.ACL_FLOAT,
                                                 openacl.empty((4, 3), np.float32)),
           argument="out")


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_inplace_copy_broadcast_cast_and_strided_target(dtype):
    src_values = _data((4,), dtype)
    for target_dtype in (dtype, np.dtype(np.float64), np.dtype(np.int64)):
        if dtype.kind in "fV" and target_dtype.kind == "i":
            continue  # float -> int truncation is covered by Cast
        target = strided(np.zeros((3, 4), target_dtype), "transpose")
        src = _dev(src_values)
        _two_phase("inplace_copy", target, src)
        golden = torch.zeros(3, 4, dtype=to_torch(np.zeros(0, target_dtype)).dtype)
        golden.copy_(to_torch(src_values))
        _exact(target.numpy(), from_torch(golden), f"{dtype}->{target_dtype}")


def test_inplace_copy_strided_source_zero_dim_and_errors():
    values = _data((3, 4), np.int32)
    target, src = openacl.empty((3, 4), np.int32), strided(values, "step")
    _two_phase("inplace_copy", target, src)
    _exact(target.numpy(), values)
    scalar_target, scalar = openacl.empty((), np.float32), _dev(np.array(2.5, np.float32))
    _two_phase("inplace_copy", scalar_target, scalar)
    assert scalar_target.numpy() == np.float32(2.5)
    result = openacl.ops.inplace_copy(_dev(np.zeros((2, 2), np.float32)), scalar)
    _exact(result.numpy(), np.full((2, 2), 2.5, np.float32))
    _error(lambda: aclnn.inplace_copy_get_workspace_size(None, scalar), ACLNN_ERR_PARAM_NULLPTR,
           "selfRef")
    _error(lambda: aclnn.inplace_copy_get_workspace_size(target, _dev(np.ones(5, np.int32))),
           argument="src")
    _error(lambda: aclnn.inplace_copy_get_workspace_size(scalar_target, target), argument="src")


# -- Cat and splits ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cat_matches_torch(dtype):
    for dim in (1, -1, 0):
        parts = [_data(tuple(n if k == dim % 3 else 2 + k for k in range(3)), dtype)
                 for n in (1, 3, 2)]
        golden = from_torch(torch.cat([to_torch(p) for p in parts], dim))
        _exact(openacl.ops.cat([_dev(p) for p in parts], dim).numpy(), golden, f"dim {dim}")


def test_cat_promotes_skips_legacy_empty_and_takes_views():
    a, b = _data((2, 3), np.int32), _dev(_data((1, 3), np.float16))
    golden = from_torch(torch.cat([to_torch(a), to_torch(_data((1, 3), np.float16))]))
    _exact(openacl.ops.cat([strided(a, "transpose"), b], 0).numpy(), golden)
    legacy = _dev(np.zeros((0,), np.int32))
    _exact(openacl.ops.cat([legacy, _dev(a), legacy], 0).numpy(), a)
    empty = _dev(np.zeros((0, 3), np.int32))
    assert openacl.ops.cat([empty, empty], 0).numpy().shape == (0, 3)
    out = strided(np.zeros((2, 6), np.float64), "step")  # int result into a wider out
    inputs = [_dev(a), strided(a, "step")]
    _two_phase("cat", inputs, 1, out)
    _exact(out.numpy(), np.concatenate([a, a], 1).astype(np.float64))


def test_cat_errors():
    a = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((4, 3), np.float32)
    _error(lambda: aclnn.cat_get_workspace_size(None, 0, out), ACLNN_ERR_PARAM_NULLPTR,
           "tensors")
    _error(lambda: aclnn.cat_get_workspace_size([], 0, out), argument="tensors")
    _error(lambda: aclnn.cat_get_workspace_size([a, _dev(np.ones((2, 4), np.float32))], 0, out),
           argument="tensors")
    _error(lambda: aclnn.cat_get_workspace_size([a, a], 2, out), argument="dim")
    _error(lambda: aclnn.cat_get_workspace_size([a, a], 0, openacl.empty((4, 3), np.int32)),
           argument="out")
    _error(lambda: aclnn.cat_get_workspace_size([a, a], 0, openacl.empty((4, 4), np.float32)),
           argument="out")
    _error(lambda: aclnn.cat_get_workspace_size([a, _dev(np.ones((2, 3), np.complex128))], 0,
                                                out), argument="tensors")


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_split_tensor_and_split_with_size_match_torch(dtype):
    values = _data((7, 4), dtype)
    x = strided(values, "step")
    golden = [from_torch(t) for t in torch.split(to_torch(values), 3, 0)]
    outs = [openacl.empty(g.shape, dtype) for g in golden]
    _two_phase("split_tensor", x, 3, 0, outs)
    for out, expected in zip(outs, golden, strict=True):
        _exact(out.numpy(), expected)
    sizes = [1, 0, 3]
    golden = [from_torch(t) for t in torch.split(to_torch(values), sizes, 1)]
    outs = [openacl.empty(g.shape, dtype) for g in golden]
    _two_phase("split_with_size", x, sizes, -1, outs)
    for out, expected in zip(outs, golden, strict=True):
        _exact(out.numpy(), expected)


def test_split_empty_and_errors():
    empty = _dev(np.zeros((0, 3), np.float32))
    out = [openacl.empty((0, 3), np.float32)]
    _two_phase("split_tensor", empty, 2, 0, out)
    x = _dev(np.ones((5, 2), np.float32))
    pieces = [openacl.empty((3, 2), np.float32), openacl.empty((2, 2), np.float32)]
    _error(lambda: aclnn.split_tensor_get_workspace_size(None, 3, 0, pieces),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.split_tensor_get_workspace_size(x, 3, 0, None),
           ACLNN_ERR_PARAM_NULLPTR, "out")
    _error(lambda: aclnn.split_tensor_get_workspace_size(x, 0, 0, pieces), argument="splitSections")
    _error(lambda: aclnn.split_tensor_get_workspace_size(x, 3, 2, pieces), argument="dim")
    _error(lambda: aclnn.split_tensor_get_workspace_size(x, 2, 0, pieces), argument="out")
    _error(lambda: aclnn.split_tensor_get_workspace_size(
        x, 3, 0, [pieces[0], openacl.empty((2, 2), np.int32)]), argument="out")
    _error(lambda: aclnn.split_with_size_get_workspace_size(x, [3, 3], 0, pieces),
           argument="splitSize")
    _error(lambda: aclnn.split_with_size_get_workspace_size(x, [6, -1], 0, pieces),
           argument="splitSize")


# -- views made concrete ----------------------------------------------------------------------
SLICE_SUPPORTED = [d for d in ALL if d not in (np.dtype(np.float64), np.dtype(np.int16))]


@pytest.mark.parametrize("dtype", SLICE_SUPPORTED, ids=str)
def test_slice_matches_torch(dtype):
    values = _data((4, 9), dtype)
    t = to_torch(values)
    x = strided(values, "transpose")
    for dim, start, end, step in [(1, 1, 7, 2), (1, -4, 100, 1), (0, -100, -1, 3),
                                  (-1, 5, 2, 1), (0, 9, 12, 1), (1, 0, -20, 1)]:
        golden = from_torch(t.narrow(dim, 0, t.shape[dim])[(slice(None),) * (dim % 2) +
                                                           (slice(start, end, step),)])
        _exact(openacl.ops.slice(x, dim, start, end, step).numpy(), golden,
               f"{dim} {start}:{end}:{step}")


def test_slice_errors():
    x = _dev(np.ones((4, 3), np.float32))
    out = openacl.empty((2, 3), np.float32)
    _error(lambda: aclnn.slice_get_workspace_size(x, 0, 0, 2, 0, out), argument="step")
    _error(lambda: aclnn.slice_get_workspace_size(x, 2, 0, 2, 1, out), argument="dim")
    _error(lambda: aclnn.slice_get_workspace_size(x, 0, 0, 3, 1, out), argument="out")
    _error(lambda: aclnn.slice_get_workspace_size(_dev(np.ones(3)), 0, 0, 2, 1, out),
           argument="self")  # float64 is not in aclnnSlice's list
    _error(lambda: aclnn.slice_get_workspace_size(_dev(np.float32(1)), 0, 0, 1, 1, out),
           argument="self")


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_permute_flip_roll_match_torch(dtype):
    values = _data((2, 3, 4), dtype)
    t, x = to_torch(values), strided(values, "step")
    _exact(openacl.ops.permute(x, [2, 0, 1]).numpy(), from_torch(t.permute(2, 0, 1)))
    _exact(openacl.ops.permute(x, [-1, 1, 0]).numpy(), from_torch(t.permute(-1, 1, 0)))
    _exact(openacl.ops.flip(x, [0, -1]).numpy(), from_torch(torch.flip(t, [0, -1])))
    _exact(openacl.ops.flip(x, []).numpy(), values)
    if dtype not in (np.dtype(np.float64),):  # aclnnRoll lists no DOUBLE
        _exact(openacl.ops.roll(x, [1, -5], [2, 0]).numpy(),
               from_torch(torch.roll(t, [1, -5], [2, 0])))
        _exact(openacl.ops.roll(x, [7], []).numpy(), from_torch(torch.roll(t, 7)))


EXPAND_SUPPORTED = [d for d in ALL if d not in (np.dtype(np.float64), np.dtype(np.int16))]


@pytest.mark.parametrize("dtype", EXPAND_SUPPORTED, ids=str)
def test_expand_matches_torch(dtype):
    values = _data((3, 1), dtype)
    t = to_torch(values)
    x = strided(values, "step")
    for size in ([3, 4], [2, 3, 5], [-1, 2], [0, 3, 2]):
        _exact(openacl.ops.expand(x, size).numpy(), from_torch(t.expand(*size)), str(size))


def test_view_ops_on_zero_dim_and_empty():
    scalar = _dev(np.array(3, np.int32))
    _exact(openacl.ops.permute(scalar, []).numpy(), np.array(3, np.int32))
    _exact(openacl.ops.flip(scalar, [0]).numpy(), np.array(3, np.int32))
    _exact(openacl.ops.expand(scalar, [2, 2]).numpy(), np.full((2, 2), 3, np.int32))
    empty = _dev(np.zeros((0, 4), np.float32))
    assert openacl.ops.roll(empty, [1], [0]).numpy().shape == (0, 4)
    assert openacl.ops.permute(empty, [1, 0]).numpy().shape == (4, 0)
    assert openacl.ops.flip(empty, [1]).numpy().shape == (0, 4)


def test_view_op_errors():
    x = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((3, 2), np.float32)
    _error(lambda: aclnn.permute_get_workspace_size(x, [0], out), argument="dims")
    _error(lambda: aclnn.permute_get_workspace_size(x, [0, 0], out), argument="dims")
    _error(lambda: aclnn.permute_get_workspace_size(x, [0, 2], out), argument="dims")
    _error(lambda: aclnn.permute_get_workspace_size(x, [1, 0], None), ACLNN_ERR_PARAM_NULLPTR,
           "out")
    _error(lambda: aclnn.flip_get_workspace_size(x, [1, -1], x), argument="dims")
    _error(lambda: aclnn.roll_get_workspace_size(x, [1, 2], [0], x), argument="shifts")
    _error(lambda: aclnn.roll_get_workspace_size(x, [1, 2], [], x), argument="shifts")
    _error(lambda: aclnn.roll_get_workspace_size(x, [1], [5], x), argument="dims")
    _error(lambda: aclnn.expand_get_workspace_size(x, [3], x), argument="size")
    _error(lambda: aclnn.expand_get_workspace_size(x, [2, 4], openacl.empty((2, 4), np.float32)),
           argument="size")
    _error(lambda: aclnn.expand_get_workspace_size(x, [-1, 2, 3], x), argument="size")
    _error(lambda: aclnn.expand_get_workspace_size(x, [2, 3], openacl.empty((2, 3), np.float16)),
           argument="out")
    uint16 = _dev(np.ones(3, np.uint16))
    _error(lambda: aclnn.flip_get_workspace_size(uint16, [0], uint16), argument="self")


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_tril_triu_match_torch(dtype):
    values = _data((2, 4, 5), dtype)
    t, x = to_torch(values), strided(values, "transpose")
    for diagonal in (0, 1, -2, 9):
        _exact(openacl.ops.tril(x, diagonal).numpy(), from_torch(torch.tril(t, diagonal)))
        _exact(openacl.ops.triu(x, diagonal).numpy(), from_torch(torch.triu(t, diagonal)))
    target = strided(values, "step")
    _two_phase("inplace_triu", target, 1)
    _exact(target.numpy(), from_torch(torch.triu(t, 1)))
    _error(lambda: aclnn.tril_get_workspace_size(_dev(values[0, 0]), 0, _dev(values[0, 0])),
           argument="self")


# -- Stack, Flatten, SliceV2, StridedSliceAssignV2, ChannelShuffle, UnfoldGrad ------------------
@pytest.mark.parametrize("dtype", ALL + [np.dtype(np.complex128)], ids=str)
def test_stack_matches_torch(dtype):
    parts = [_data((2, 3), dtype, -4 - k, 4 + k) for k in range(3)]
    for dim in (0, 1, 2, -1, -3):
        golden = from_torch(torch.stack([to_torch(p) for p in parts], dim))
        inputs = [strided(parts[0], "step"), _dev(parts[1]), strided(parts[2], "transpose")]
        _exact(openacl.ops.stack(inputs, dim).numpy(), golden, f"dim {dim}")


def test_stack_promotes_zero_dim_two_phase_and_errors():
    a, b = _data((3,), np.int32), _data((3,), np.float16)
    golden = from_torch(torch.stack([to_torch(a), to_torch(b)], 1))
    _exact(openacl.ops.stack([_dev(a), _dev(b)], 1).numpy(), golden)
    scalars = [_dev(np.array(v, np.int64)) for v in (1, 2)]
    _exact(openacl.ops.stack(scalars, 0).numpy(), np.array([1, 2], np.int64))
    out = strided(np.zeros((2, 3), np.float64), "step")
    _two_phase("stack", [_dev(a), _dev(a)], 0, out)
    _exact(out.numpy(), np.stack([a, a]).astype(np.float64))
    good = openacl.empty((2, 3), np.int32)
    _error(lambda: aclnn.stack_get_workspace_size(None, 0, good), ACLNN_ERR_PARAM_NULLPTR,
           "tensors")
    _error(lambda: aclnn.stack_get_workspace_size([_dev(a), _dev(np.ones(4, np.int32))], 0,
                                                  good), argument="tensors")
    _error(lambda: aclnn.stack_get_workspace_size([_dev(a), _dev(a)], 2, good), argument="dim")
    _error(lambda: aclnn.stack_get_workspace_size([_dev(a), _dev(a)], 0,
                                                  openacl.empty((3, 2), np.int32)),
           argument="out")
    _error(lambda: aclnn.stack_get_workspace_size([_dev(b), _dev(b)], 0, good), argument="out")


FLATTEN_SUPPORTED = [d for d in ALL if d != np.dtype(np.float64)]


@pytest.mark.parametrize("dtype", FLATTEN_SUPPORTED, ids=str)
def test_flatten_matches_onnx_flatten(dtype):
    values = _data((2, 3, 4, 5), dtype)
    t = to_torch(values)
    for axis in range(-4, 4):
        rows = int(np.prod(values.shape[:axis % 4]))
        golden = from_torch(t.reshape(rows, -1))
        _exact(openacl.ops.flatten(strided(values, "transpose"), axis).numpy(), golden,
               f"axis {axis}")
    _exact(openacl.ops.flatten(_dev(values[0, 0, 0]), 0).numpy(), values[0, 0, 0][None, :])
    _exact(openacl.ops.flatten(_dev(values[0, 0, 0, 0]), -1).numpy(),
           values[0, 0, 0, 0].reshape(1, 1))


def test_flatten_errors():
    x = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((2, 3), np.float32)
    _error(lambda: aclnn.flatten_get_workspace_size(None, 1, out), ACLNN_ERR_PARAM_NULLPTR,
           "self")
    _error(lambda: aclnn.flatten_get_workspace_size(x, 2, out), argument="axis")
    _error(lambda: aclnn.flatten_get_workspace_size(_dev(np.ones(3, np.float32)), 1, out),
           argument="axis")
    _error(lambda: aclnn.flatten_get_workspace_size(x, 0, out), argument="out")
    _error(lambda: aclnn.flatten_get_workspace_size(x, 1, openacl.empty((2, 3), np.int32)),
           argument="out")
    _error(lambda: aclnn.flatten_get_workspace_size(_dev(np.ones((2, 3))), 1, out),
           argument="self")


@pytest.mark.parametrize("dtype", SLICE_SUPPORTED, ids=str)
def test_slice_v2_matches_torch(dtype):
    values = _data((5, 6, 7), dtype)
    t = to_torch(values)
    cases = [([1, -3], [100, -1], [0, 2], [1, 2]), ([0], [4], [-2], [3]),
             ([-9, 2, 6], [9, 2, 3], [1, 0, 2], [2, 1, 1]), ([], [], [], [])]
    for starts, ends, axes, steps in cases:
        index = [slice(None)] * 3
        for s, e, a, p in zip(starts, ends, axes, steps, strict=True):
            index[a] = slice(s, e, p)
        golden = from_torch(t[tuple(index)])
        result = openacl.ops.slice_v2(strided(values, "step"), starts, ends, axes, steps)
        _exact(result.numpy(), golden, str((starts, ends, axes, steps)))


def test_slice_v2_errors():
    x = _dev(np.ones((4, 5), np.float32))
    out = openacl.empty((2, 5), np.float32)
    call = aclnn.slice_v2_get_workspace_size
    _error(lambda: call(x, None, [2], [0], [1], out), ACLNN_ERR_PARAM_NULLPTR, "starts")
    _error(lambda: call(x, [0], [2, 3], [0], [1], out), argument="ends")
    _error(lambda: call(x, [0, 0], [2, 2], [0, -2], [1, 1], out), argument="axes")
    _error(lambda: call(x, [0], [2], [2], [1], out), argument="axes")
    _error(lambda: call(x, [0], [2], [0], [0], out), argument="steps")
    _error(lambda: call(x, [0], [3], [0], [1], out), argument="out")
    _error(lambda: call(_dev(np.ones((4, 5))), [0], [2], [0], [1], out), argument="self")


STRIDED_ASSIGN = [np.dtype(t) for t in (np.float16, np.float32, np.int32, np.int64, np.float64,
                                        np.int8)] + [BF16]


@pytest.mark.parametrize("dtype", STRIDED_ASSIGN, ids=str)
def test_strided_slice_assign_v2_matches_torch(dtype):
    values = _data((6, 5, 4), dtype)
    cases = [([1, 0], [6, 3], [2, 1], [0, 1]), ([-3, 1], [100, 3], [1, 1], [-1, 0]),
             ([0, 0, 0], [6, 5, 4], [3, 2, 1], None)]
    for begin, end, strides, axes in cases:
        golden = to_torch(values).clone()
        index = [slice(None)] * 3
        for b, e, s, a in zip(begin, end, strides, axes or range(len(begin)), strict=True):
            index[a] = slice(b, e, s)
        window = golden[tuple(index)]
        update = _data(tuple(window.shape), dtype, 10, 20)
        golden[tuple(index)] = to_torch(update)
        target = strided(values, "transpose")
        _two_phase("strided_slice_assign_v2", target, _dev(update), begin, end, strides, axes)
        _exact(target.numpy(), from_torch(golden), str((begin, end, strides, axes)))


def test_strided_slice_assign_v2_errors():
    var = _dev(np.zeros((4, 6), np.float32))
    value = _dev(np.ones((2, 6), np.float32))
    call = aclnn.strided_slice_assign_v2_get_workspace_size
    _error(lambda: call(None, value, [0], [2], [1], [0]), ACLNN_ERR_PARAM_NULLPTR, "varRef")
    _error(lambda: call(var, None, [0], [2], [1], [0]), ACLNN_ERR_PARAM_NULLPTR, "inputValue")
    _error(lambda: call(var, value, [0], [3], [1], [0]), argument="inputValue")
    _error(lambda: call(var, _dev(np.ones((2, 3), np.float32)), [0], [6], [2], [1]),
           argument="strides")  # the last dim's stride must be 1
    _error(lambda: call(var, _dev(np.ones((2, 6), np.float16)), [0], [2], [1], [0]),
           argument="inputValue")
    _error(lambda: call(var, value, [0], [2], [1], [0, 1]), argument="axesOptional")
    _error(lambda: call(_dev(np.zeros((4, 6), np.uint8)), _dev(np.ones((2, 6), np.uint8)), [0],
                        [2], [1], [0]), argument="varRef")


SHUFFLE_SUPPORTED = [d for d in ALL if d != BF16] + [np.dtype(np.complex64)]


@pytest.mark.parametrize("dtype", SHUFFLE_SUPPORTED, ids=str)
def test_channel_shuffle_matches_torch(dtype):
    for shape, groups in (((2, 6, 3), 3), ((1, 8, 2, 3), 2), ((2, 6, 1, 2, 2), 6),
                          ((1, 4, 2), 1)):
        values = _data(shape, dtype)
        t = to_torch(values)
        golden = from_torch(t.reshape(shape[0], groups, shape[1] // groups, *shape[2:])
                            .transpose(1, 2).reshape(shape))
        if dtype.kind in "f":
            torch_shuffled = from_torch(torch.nn.ChannelShuffle(groups)(t))
            _exact(golden, torch_shuffled)
        _exact(openacl.ops.channel_shuffle(strided(values, "step"), groups).numpy(), golden)


def test_channel_shuffle_errors():
    x = _dev(np.ones((1, 6, 2), np.float32))
    call = aclnn.channel_shuffle_get_workspace_size
    _error(lambda: call(None, 2, x), ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: call(x, 4, x), argument="groups")
    _error(lambda: call(x, 0, x), argument="groups")
    _error(lambda: call(_dev(np.ones((6, 2), np.float32)), 2, x), argument="self")
    _error(lambda: call(x, 2, openacl.empty((1, 6, 2), np.float16)), argument="out")
    _error(lambda: call(x, 2, openacl.empty((1, 2, 6), np.float32)), argument="out")


UNFOLD_CASES = [((7,), 0, 2, 2), ((3, 10), 1, 3, 2), ((3, 10), 1, 4, 1), ((6, 4, 3), 1, 2, 1),
                ((5, 9), 0, 2, 3), ((2, 9, 4), 2, 4, 5), ((4, 12), 1, 12, 1)]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32)], ids=str)
def test_unfold_grad_matches_autograd(dtype):
    rng = np.random.default_rng(3)
    for sizes, dim, size, step in UNFOLD_CASES:
        leaf = torch.zeros(sizes, dtype=torch.float64, requires_grad=True)
        windows = leaf.unfold(dim, size, step)
        grad = rng.uniform(-3, 3, windows.shape).astype(np.float32).astype(dtype)
        windows.backward(torch.from_numpy(grad.astype(np.float64)))
        golden = leaf.grad.numpy().astype(dtype)
        result = openacl.ops.unfold_grad(strided(grad, "step"), list(sizes), dim, size, step)
        assert_close(result.numpy(), golden, str((sizes, dim, size, step)))


def test_unfold_grad_errors():
    grad = _dev(np.ones((3, 4, 3), np.float32))  # inputSizes (3, 10), dim 1, size 3, step 2
    out = openacl.empty((3, 10), np.float32)
    call = aclnn.unfold_grad_get_workspace_size
    _two_phase("unfold_grad", grad, [3, 10], 1, 3, 2, out)
    _error(lambda: call(None, [3, 10], 1, 3, 2, out), ACLNN_ERR_PARAM_NULLPTR, "gradOut")
    _error(lambda: call(grad, [3, 10], 1, 3, 3, out), argument="gradOut")
    _error(lambda: call(grad, [3, 10], 1, 11, 2, out), argument="size")
    _error(lambda: call(grad, [3, 10], 1, 3, 0, out), argument="step")
    _error(lambda: call(grad, [2, 3, 10], 0, 3, 2, out), argument="dim")
    _error(lambda: call(_dev(np.ones((3, 4, 3))), [3, 10], 1, 3, 2, out), argument="gradOut")
    _error(lambda: call(grad, [3, 10], 1, 3, 2, openacl.empty((3, 10), np.float16)),
           argument="gradIn")


# -- gathers and scatters ---------------------------------------------------------------------
GATHER_SUPPORTED = ALL


@pytest.mark.parametrize("dtype", GATHER_SUPPORTED, ids=str)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=str)
def test_gather_family_matches_torch(dtype, index_dtype):
    values = _data((4, 5), dtype)
    t, x = to_torch(values), strided(values, "transpose")
    index = RNG.integers(0, 4, (3, 5)).astype(index_dtype)
    index_t = torch.from_numpy(index.astype(np.int64))
    _exact(openacl.ops.gather(x, 0, strided(index, "step")).numpy(),
           from_torch(torch.gather(t, 0, index_t)))
    small = RNG.integers(0, 5, (2, 3)).astype(index_dtype)  # smaller than self in dim 0
    _exact(openacl.ops.gather(x, -1, _dev(small)).numpy(),
           from_torch(torch.gather(t, 1, torch.from_numpy(small.astype(np.int64)))))
    picks = np.array([4, 0, 2, 2], index_dtype)
    _exact(openacl.ops.index_select(x, 1, _dev(picks)).numpy(),
           from_torch(torch.index_select(t, 1, torch.from_numpy(picks.astype(np.int64)))))
    ids = np.array([[3, 0], [1, 1], [2, 3]], index_dtype)
    _exact(openacl.ops.embedding(x, _dev(ids)).numpy(),
           from_torch(F.embedding(torch.from_numpy(ids.astype(np.int64)), t)))
    pairs = np.array([[0, 4], [3, 1], [-1, -5]], index_dtype)
    _exact(openacl.ops.gather_nd(x, _dev(pairs), True).numpy(),
           from_torch(t[torch.from_numpy(pairs[:, 0].astype(np.int64)),
                        torch.from_numpy(pairs[:, 1].astype(np.int64))]))
    rows = np.array([[[2]], [[0]]], index_dtype)
    _exact(openacl.ops.gather_nd(x, _dev(rows), False).numpy(),
           from_torch(t[torch.from_numpy(rows[..., 0].astype(np.int64))]))


def test_gather_family_zero_dim_and_empty():
    scalar = _dev(np.array(2.5, np.float32))
    zero = _dev(np.array(0, np.int64))
    _exact(openacl.ops.gather(scalar, 0, zero).numpy(), np.array(2.5, np.float32))
    _exact(openacl.ops.index_select(scalar, 0, zero).numpy(), np.array(2.5, np.float32))
    x = _dev(np.arange(6, dtype=np.int16).reshape(2, 3))
    none = _dev(np.zeros((0,), np.int64))
    assert openacl.ops.index_select(x, 0, none).numpy().shape == (0, 3)
    assert openacl.ops.embedding(x, none).numpy().shape == (0, 3)
    _exact(openacl.ops.index_select(x, 0, _dev(np.array(1, np.int32))).numpy(),
           np.array([[3, 4, 5]], np.int16))


def test_gather_family_index_out_of_range_fails_the_stream():
    x = _dev(np.arange(12, dtype=np.float32).reshape(3, 4))
    out = openacl.empty((2, 4), np.float32)
    _fails_in_kernel("gather", x, 0, _dev(np.array([[0, 1, 2, 3], [3, 0, 0, 0]])), out,
                     match="index 3")
    _fails_in_kernel("gather", x, 0, _dev(np.array([[0, -1, 0, 0]] * 2)), out, match="-1")
    _fails_in_kernel("index_select", x, 0, _dev(np.array([1, 5])), out, match="index 5")
    _fails_in_kernel("embedding", x, _dev(np.array([0, 3])), out, match="'indices'")
    pairs = _dev(np.array([[0, 0], [-1, 0]]))
    _fails_in_kernel("gather_nd", x, pairs, False, openacl.empty((2,), np.float32),
                     match="-1")
    _fails_in_kernel("gather_nd", x, _dev(np.array([[0, 4], [0, 0]])), True,
                     openacl.empty((2,), np.float32), match="index 4")


def test_gather_family_errors():
    x = _dev(np.ones((3, 4), np.float32))
    index = _dev(np.zeros((2, 4), np.int64))
    out = openacl.empty((2, 4), np.float32)
    _error(lambda: aclnn.gather_get_workspace_size(x, 0, None, out), ACLNN_ERR_PARAM_NULLPTR,
           "index")
    _error(lambda: aclnn.gather_get_workspace_size(x, 2, index, out), argument="dim")
    _error(lambda: aclnn.gather_get_workspace_size(x, 0, _dev(np.zeros((2, 4), np.float32)),
                                                   out), argument="index")
    _error(lambda: aclnn.gather_get_workspace_size(x, 0, _dev(np.zeros(4, np.int64)), out),
           argument="index")
    _error(lambda: aclnn.gather_get_workspace_size(x, 0, _dev(np.zeros((2, 5), np.int64)), out),
           argument="index")
    _error(lambda: aclnn.gather_get_workspace_size(x, 0, index, openacl.empty((2, 4), np.int32)),
           argument="out")
    _error(lambda: aclnn.index_select_get_workspace_size(x, 0, index, out), argument="index")
    _error(lambda: aclnn.embedding_get_workspace_size(_dev(np.ones(3)), index, out),
           argument="weight")
    _error(lambda: aclnn.embedding_get_workspace_size(x, _dev(np.zeros(2, np.int16)), out),
           argument="indices")
    _error(lambda: aclnn.gather_nd_get_workspace_size(x, _dev(np.zeros((2, 3), np.int64)),
                                                      False, out), argument="indices")
    _error(lambda: aclnn.gather_nd_get_workspace_size(x, index, "yes", out),
           argument="negativeIndexSupport")


def _scatter_update_golden(data, indices, updates, axis):
    result = data.copy()
    axis %= data.ndim
    span = updates.shape[axis]
    for row in range(updates.shape[0]):
        batch, offset = (indices[row] if indices.ndim == 2 else (row, indices[row]))
        window = (batch,) + (slice(None),) * (axis - 1) + (slice(offset, offset + span),)
        result[window] = updates[row]
    return result


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16,
                                   np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)],
                         ids=str)
def test_inplace_scatter_update(dtype):
    data = _data((3, 2, 6, 4), dtype)
    updates = _data((3, 2, 2, 4), dtype, 10, 20)
    offsets = np.array([4, 0, 2], np.int64)
    target = strided(data, "step")
    _two_phase("inplace_scatter_update", target, _dev(offsets), _dev(updates), -2)
    _exact(target.numpy(), _scatter_update_golden(data, offsets, updates, -2))
    pairs = np.array([[2, 1], [0, 0]], np.int32)
    last = _data((2, 2, 6, 3), dtype, 10, 20)
    target = _dev(data)
    _two_phase("inplace_scatter_update", target, _dev(pairs), _dev(last), 3)
    _exact(target.numpy(), _scatter_update_golden(data, pairs, last, 3))


def test_inplace_scatter_update_errors():
    data = _dev(np.zeros((2, 5, 3), np.float32))
    updates = _dev(np.ones((2, 2, 3), np.float32))
    offsets = _dev(np.array([0, 1], np.int64))
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(None, offsets, updates, 1),
           ACLNN_ERR_PARAM_NULLPTR, "data")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(data, offsets, updates, 0),
           argument="axis")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(data, offsets, updates, 3),
           argument="axis")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(
        data, offsets, _dev(np.ones((2, 2, 4), np.float32)), 1), argument="updates")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(
        data, offsets, _dev(np.ones((2, 2, 3), np.float16)), 1), argument="updates")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(
        data, _dev(np.array([0, 1, 2])), updates, 1), argument="indices")
    _error(lambda: aclnn.inplace_scatter_update_get_workspace_size(
        _dev(np.zeros((2, 5, 3))), offsets, _dev(np.ones((2, 2, 3))), 1), argument="data")
    _fails_in_kernel("inplace_scatter_update", data, _dev(np.array([0, 4])), updates, 1,
                     match="offset 4")


# -- generators ------------------------------------------------------------------------------
ARANGE_CASES = [(0, 10, 3), (5, -3, -2), (1.5, 4.0, 0.5), (0, 1, 0.1), (-2.5, 2.5, 0.7),
                (3, 3, 1)]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32),
                                   np.dtype(np.float64), np.dtype(np.int32),
                                   np.dtype(np.int64)], ids=str)
def test_arange_matches_torch(dtype):
    torch_dtype = to_torch(np.zeros(0, dtype)).dtype
    for start, end, step in ARANGE_CASES:
        if dtype.kind in "iu" and int(step) == 0:
            continue  # torch truncates the step to 0 and refuses; so does Arange (below)
        golden = from_torch(torch.arange(start, end, step, dtype=torch_dtype))
        out = openacl.empty(golden.shape, dtype)
        scalars = [openacl.create_scalar(v, openacl.ACL_FLOAT if isinstance(v, float)
                                         else openacl.ACL_INT64) for v in (start, end, step)]
        _two_phase("arange", *scalars, out)
        result = out.numpy()
        if dtype.kind in "iu":
            _exact(result, golden, f"{start} {end} {step}")
        else:
            assert_close(result, golden, f"{start} {end} {step}")


def test_arange_one_shot_dtype_and_errors():
    assert openacl.ops.arange(0, 4, 1).numpy().dtype == np.int64
    assert openacl.ops.arange(0, 2, 0.5).numpy().dtype == np.float32
    out = openacl.empty((3,), np.float32)
    one = openacl.create_scalar(1, openacl.ACL_INT64)
    zero = openacl.create_scalar(0, openacl.ACL_INT64)
    three = openacl.create_scalar(3, openacl.ACL_INT64)
    _error(lambda: aclnn.arange_get_workspace_size(zero, three, zero, out), argument="step")
    _error(lambda: aclnn.arange_get_workspace_size(three, zero, one, out), argument="step")
    half = openacl.create_scalar(0.5, openacl.ACL_FLOAT)
    _error(lambda: aclnn.arange_get_workspace_size(zero, three, half,
                                                   openacl.empty((6,), np.int32)),
           argument="step")
    _error(lambda: aclnn.arange_get_workspace_size(zero, three, one, openacl.empty((4,))),
           argument="out")
    _error(lambda: aclnn.arange_get_workspace_size(zero, three, one,
                                                   openacl.empty((3,), np.int8)), argument="out")
    _error(lambda: aclnn.arange_get_workspace_size(None, three, one, out),
           ACLNN_ERR_PARAM_NULLPTR, "start")


@pytest.mark.parametrize("self_dtype", [np.uint8, np.int32, np.int64], ids=str)
def test_one_hot_matches_torch(self_dtype):
    labels = np.array([[0, 3, 1], [2, 2, 4]], self_dtype)
    on, off = _dev(np.array([1], np.int64)), _dev(np.array([0], np.int64))
    golden = from_torch(F.one_hot(torch.from_numpy(labels.astype(np.int64)), 5))
    _exact(openacl.ops.one_hot(_dev(labels), 5, on, off, -1).numpy(), golden)
    _exact(openacl.ops.one_hot(strided(labels, "transpose"), 5, on, off, 0).numpy(),
           np.moveaxis(golden, -1, 0))


def test_one_hot_values_out_of_range_and_errors():
    labels = _dev(np.array([1, 7, 0], np.int32))
    on, off = _dev(np.array([2.5], np.float16)), _dev(np.array([-1.0, 9.0], np.float16))
    result = openacl.ops.one_hot(labels, 3, on, off, 1).numpy()
    expected = np.array([[-1, 2.5, -1], [-1, -1, -1], [2.5, -1, -1]], np.float16)
    _exact(result, expected)  # 7 >= numClasses encodes as all offValue (CANN's rule)
    out = openacl.empty((3, 3), np.float16)
    _error(lambda: aclnn.one_hot_get_workspace_size(labels, -1, on, off, -1, out),
           argument="numClasses")
    _error(lambda: aclnn.one_hot_get_workspace_size(labels, 3, on, off, 2, out), argument="axis")
    _error(lambda: aclnn.one_hot_get_workspace_size(labels, 3, on, _dev(np.zeros(1, np.int32)),
                                                    -1, out), argument="offValue")
    _error(lambda: aclnn.one_hot_get_workspace_size(labels, 3, on, off, -1,
                                                    openacl.empty((3, 4), np.float16)),
           argument="out")
    _error(lambda: aclnn.one_hot_get_workspace_size(_dev(np.array([1], np.int16)), 3, on, off,
                                                    -1, out), argument="self")
    _error(lambda: aclnn.one_hot_get_workspace_size(labels, 3, None, off, -1, out),
           ACLNN_ERR_PARAM_NULLPTR, "onValue")


# -- upsampling -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.uint8)], ids=str)
def test_upsample_nearest2d_matches_torch(dtype):
    values = _data((2, 3, 5, 4), dtype, 0, 200)
    t, x = to_torch(values), strided(values, "transpose")
    for size in ([10, 8], [15, 12], [10, 4], [7, 3], [5, 4], [2, 9], [1, 1]):  # whole factors too
        golden = from_torch(F.interpolate(t, size=size, mode="nearest"))
        _exact(openacl.ops.upsample_nearest2d(x, size).numpy(), golden, str(size))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_upsample_bilinear2d_matches_torch(dtype):
    values = _data((2, 3, 5, 4), dtype)
    t, x = to_torch(values), strided(values, "step")
    for size in ([10, 8], [3, 7], [5, 4], [1, 1]):
        for align in (False, True):
            golden = from_torch(F.interpolate(t, size=size, mode="bilinear",
                                              align_corners=align))
            assert_close(openacl.ops.upsample_bilinear2d(x, size, align, 0.0, 0.0).numpy(),
                         golden, f"{size} {align}")
    golden = from_torch(F.interpolate(t, scale_factor=(1.7, 2.5), mode="bilinear",
                                      recompute_scale_factor=False))
    assert_close(openacl.ops.upsample_bilinear2d(x, list(golden.shape[2:]), False, 1.7,
                                                 2.5).numpy(), golden, "scales")


def test_upsample_errors():
    x = _dev(np.ones((1, 2, 3, 3), np.float32))
    out = openacl.empty((1, 2, 6, 6), np.float32)
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(None, [6, 6], out),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(x, [6], out),
           argument="outputSize")
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(x, [6, 0], out),
           argument="outputSize")
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(
        _dev(np.ones((2, 3, 3), np.float32)), [6, 6], out), argument="self")
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(x, [6, 5], out), argument="out")
    _error(lambda: aclnn.upsample_nearest2d_get_workspace_size(
        _dev(np.ones((1, 2, 3, 3), np.int32)), [6, 6], out), argument="self")
    _error(lambda: aclnn.upsample_bilinear2d_get_workspace_size(
        _dev(np.ones((1, 2, 3, 3), np.uint8)), [6, 6], False, 0.0, 0.0, out), argument="self")
    _error(lambda: aclnn.upsample_bilinear2d_get_workspace_size(x, [6, 6], False, -1.0, 0.0,
                                                                out), argument="scalesH")
    _error(lambda: aclnn.upsample_bilinear2d_get_workspace_size(x, [6, 6], 1, 0.0, 0.0, out),
           argument="alignCorners")
    _error(lambda: aclnn.upsample_bilinear2d_get_workspace_size(
        x, [6, 6], False, 0.0, 0.0, openacl.empty((1, 2, 6, 6), np.float16)), argument="out")


def test_every_movement_operator_is_registered():
    expected = {"Cast", "InplaceCopy", "Cat", "SplitTensor", "SplitWithSize", "Slice", "Permute",
                "Expand", "Gather", "IndexSelect", "Embedding", "GatherNd",
                "InplaceScatterUpdate", "ConstantPadNd", "ReflectionPad2d", "Flip", "Roll",
                "Tril", "Triu", "InplaceTril", "InplaceTriu", "Arange", "InplaceFillScalar",
                "InplaceZero", "OneHot", "UpsampleNearest2d", "UpsampleBilinear2d"}
    assert expected <= set(openacl.ops.REGISTRY)
