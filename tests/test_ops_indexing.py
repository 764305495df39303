"""The indexing family (src/openacl/ops/indexing.py and repeating.py) against PyTorch:
aclnnIndex, IndexPutImpl, IndexAdd/IndexAddV2, IndexFill/IndexFillTensor and their in-place
forms, Take, GatherV2/GatherV3, InplaceMaskedScatter and the RepeatInterleave family.

References are torch's results in float64, rounded once into the output dtype (floats via
``assert_close``, CANN's precision standard; integers and bools exactly); refusals name
the argument with CANN's codes; an index out of range fails the stream in the kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, FLOATS, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

F32, I32, I64 = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)
VALUE_DTYPES = [*FLOATS[:3], np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), I32,
                I64, np.dtype(np.bool_)]
ADD_DTYPES = [*FLOATS[:3], np.dtype(np.int8), np.dtype(np.int16), I32, I64]
RNG = np.random.default_rng(7)
index_op = openacl.ops.index  # (ops/index.py was once the operator table, shadowing it)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _scalar(value, data_type=None):
    """An aclScalar handle for the two-phase calls (float32 for floats, int64 for ints)."""
    if data_type is None:
        data_type = openacl.ACL_FLOAT if isinstance(value, float) else openacl.ACL_INT64
    return openacl.create_scalar(value, data_type)


def _wide(array: np.ndarray) -> torch.Tensor:
    """``array`` as a float64 / int64 / bool torch tensor (the reference computes wide)."""
    array = np.asarray(array)
    if array.dtype == np.bool_:
        return torch.from_numpy(array.copy())
    if array.dtype.kind in "iu":
        return torch.from_numpy(array.astype(np.int64))
    return torch.from_numpy(array.astype(np.float64))


def _check(actual: np.ndarray, reference: torch.Tensor, dtype: np.dtype, what: str = "") -> None:
    """``actual`` against the wide ``reference`` rounded once into ``dtype``."""
    golden = from_torch(reference)
    golden = golden.astype(dtype) if dtype != BF16 else golden.astype(np.float32).astype(BF16)
    if dtype.kind in "iub":
        np.testing.assert_array_equal(actual, golden, err_msg=what)
        assert actual.dtype == dtype
    else:
        assert_close(actual, golden, what)


def _refused(call, argument: str, code: int = ACLNN_ERR_PARAM_INVALID) -> None:
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


def _fails_in_kernel(name: str, *args, match: str) -> None:
    """Phase 1 of ``aclnn.<name>`` accepts ``args``; the kernel refuses their values."""
    stream = openacl.rt.create_stream()
    try:
        workspace_size, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args)
        getattr(aclnn, name)(0, workspace_size, executor, stream)
        with pytest.raises(AclError) as info:
            openacl.rt.synchronize_stream(stream)
    finally:
        openacl.rt.destroy_stream_force(stream)
    assert match in info.value.message, info.value.message


# -- Index ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
def test_index_matches_torch(dtype):
    x = random_array((4, 5, 6), dtype, RNG)
    t = _wide(x)
    empty = np.zeros(0, np.int64)
    picks = [np.array([3, 0, 1]), np.array([[4, -1, 0]], np.int32)]
    cases = [
        ([picks[0]], (torch.tensor([3, 0, 1]),)),
        ([picks[0], picks[1]], (torch.tensor([3, 0, 1]), torch.tensor([[4, -1, 0]]))),
        ([empty, picks[1]], (slice(None), torch.tensor([[4, -1, 0]]))),
        ([picks[0], empty, np.array([5, 2, 2])],  # separated: the picked dims go first
         (torch.tensor([3, 0, 1]), slice(None), torch.tensor([5, 2, 2]))),
    ]
    for indices, key in cases:
        _check(index_op(x, indices).numpy(), t[key], dtype, str(key))


def test_index_with_a_mask_reports_the_selected_shape():
    x = random_array((3, 4, 5), F32, RNG)
    mask = RNG.random((4, 5)) < 0.4
    out = index_op(x, [np.zeros(0, np.int64), mask])
    want = to_torch(x)[:, torch.from_numpy(mask)]
    assert out.shape == tuple(want.shape)  # sized (3, 20), it now says (3, N)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    flat_mask = RNG.random((3, 4, 5)) < 0.5
    np.testing.assert_array_equal(index_op(x, [flat_mask]).numpy(),
                                  x[flat_mask])


def test_index_strided_operands_and_refusals():
    x = random_array((6, 5), F32, RNG)
    idx = np.array([5, 0, 3], np.int64)
    np.testing.assert_array_equal(index_op(strided(x, "transpose"), [strided(idx)]).numpy(),
                                  x[idx])
    out = openacl.empty((3, 5), np.float32)
    _refused(lambda: aclnn.index_get_workspace_size(None, [_dev(idx)], out), "self",
             ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: aclnn.index_get_workspace_size(_dev(x), [_dev(idx.astype(np.float32))],
                                                    out), "indices")
    _refused(lambda: aclnn.index_get_workspace_size(_dev(x), [_dev(idx)] * 3, out), "indices")
    _refused(lambda: aclnn.index_get_workspace_size(_dev(x), [_dev(idx)],
                                                    openacl.empty((3, 4), np.float32)), "out")
    _refused(lambda: aclnn.index_get_workspace_size(_dev(x.astype(np.uint32)), [_dev(idx)],
                                                    openacl.empty((3, 5), np.uint32)), "self")
    _refused(lambda: aclnn.index_get_workspace_size(_dev(x), [_dev(RNG.random(4) < 0.5)], out),
             "indices")  # a mask must match the dims it covers
    _fails_in_kernel("index", _dev(x), [_dev(np.array([6]))],
                     openacl.empty((1, 5), np.float32), match="holds index 6")


# -- IndexPutImpl -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_impl_matches_torch(dtype, accumulate):
    x = random_array((5, 4, 3), dtype, RNG)
    rows = np.array([4, 0, 4, 2]) if accumulate else np.array([4, 0, 1, 2])
    cols = np.array([1, 3, 1, 0])
    values = random_array((4, 3), dtype, RNG)
    target = _dev(x)
    openacl.ops.index_put_impl(target, [rows, cols], values, accumulate, False)
    want = _wide(x).index_put_((torch.from_numpy(rows), torch.from_numpy(cols)), _wide(values),
                               accumulate=accumulate)
    if dtype == np.bool_ and accumulate:
        want = want.bool()
    _check(target.numpy(), want, dtype)


def test_index_put_impl_broadcasts_values_and_takes_masks():
    x = random_array((4, 6), F32, RNG)
    mask = RNG.random(4) < 0.5
    target = _dev(x)
    openacl.ops.index_put_impl(target, [mask], np.array([7.0], np.float32), False, True)
    want = x.copy()
    want[mask] = 7.0
    np.testing.assert_array_equal(target.numpy(), want)
    bad = _dev(np.zeros((2, 3), np.float32))
    _refused(lambda: aclnn.index_put_impl_get_workspace_size(
        _dev(x), [_dev(np.array([1, 2]))], bad, False, False), "values")
    _refused(lambda: aclnn.index_put_impl_get_workspace_size(
        _dev(x), [_dev(np.array([1, 2]))], _dev(np.zeros(6, np.float16)), False, False),
        "values")


# -- IndexAdd -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ADD_DTYPES, ids=str)
def test_index_add_matches_torch(dtype):
    for dim in (0, 1, -1):
        x = random_array((4, 5, 3), dtype, RNG)
        size = x.shape[dim]
        index = RNG.integers(0, size, 6)
        shape = list(x.shape)
        shape[dim] = 6
        source = random_array(shape, dtype, RNG)
        alpha = 2 if dtype.kind in "iu" else 1.5
        got = openacl.ops.index_add(x, dim, index, source, alpha).numpy()
        want = torch.index_add(_wide(x), dim, torch.from_numpy(index), _wide(source),
                               alpha=alpha)
        _check(got, want, dtype, f"dim {dim}")
        if dim in (0, 1):  # IndexAddV2 mode 0 takes dim 0 or -2 (here: 1 of 3)
            got = openacl.ops.index_add_v2(x, dim if dim == 0 else -2, index, source, alpha,
                                           0 if dtype in ADD_DTYPES[:3] + [I32] else 1).numpy()
            _check(got, want, dtype, f"V2 dim {dim}")


def test_index_add_refusals():
    x, src = _dev(np.ones((3, 4), np.float32)), _dev(np.ones((2, 4), np.float32))
    out = openacl.empty((3, 4), np.float32)
    idx = _dev(np.array([0, 2]))
    one = _scalar(1.0)
    _refused(lambda: aclnn.index_add_get_workspace_size(x, 0, idx, None, one, out), "source",
             ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: aclnn.index_add_get_workspace_size(x, 2, idx, src, one, out), "dim")
    _refused(lambda: aclnn.index_add_get_workspace_size(x, 0, _dev(np.array([0, 1, 2])), src,
                                                        one, out), "index")
    _refused(lambda: aclnn.index_add_get_workspace_size(x, 1, idx, src, one, out), "source")
    _refused(lambda: aclnn.index_add_v2_get_workspace_size(x, 1, idx, _dev(np.ones((3, 2),
             np.float32)), one, 0, out), "dim")  # mode 0 takes dim 0 / -2 only
    _refused(lambda: aclnn.index_add_v2_get_workspace_size(
        _dev(np.ones((3, 4), np.int8)), 0, idx, _dev(np.ones((2, 4), np.int8)), _scalar(1), 0,
        openacl.empty((3, 4), np.int8)), "self")
    _fails_in_kernel("index_add", x, 0, _dev(np.array([0, 3])), src, one, out,
                     match="holds index 3")


# -- IndexFill ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
def test_index_fill_matches_torch(dtype):
    x = random_array((3, 4, 5), dtype, RNG)
    value = True if dtype == np.bool_ else (-3 if dtype.kind in "iu" and dtype.kind != "u"
                                            else 2)
    for dim in (0, 2, -2):
        size = x.shape[dim]
        positions = [0, -1, size + 3]  # negative counts from the end; out of range: skipped
        kept = torch.tensor([0, size - 1])
        want = _wide(x).index_fill(dim, kept, value)
        _check(openacl.ops.index_fill(x, dim, np.array(positions), value).numpy(), want,
               dtype, f"dim {dim}")
        _check(openacl.ops.index_fill_tensor(x, dim, positions, value).numpy(), want, dtype)
        target = _dev(x)
        openacl.ops.inplace_index_fill(target, dim, np.array(positions, np.int32), value)
        _check(target.numpy(), want, dtype)
        target = _dev(x)
        openacl.ops.inplace_index_fill_tensor(target, dim, positions, value)
        _check(target.numpy(), want, dtype)


def test_index_fill_refusals():
    x = _dev(np.ones((3, 4), np.int8))
    out = openacl.empty((3, 4), np.int8)
    first, half = _dev(np.array([0])), _dev(np.array([0.5]))
    _refused(lambda: aclnn.index_fill_get_workspace_size(x, 0, first, _scalar(300), out),
             "value")  # does not fit int8
    _refused(lambda: aclnn.index_fill_get_workspace_size(x, 0, half, _scalar(1), out), "index")
    _refused(lambda: aclnn.index_fill_tensor_get_workspace_size(x, 3, [0], _scalar(1), out), "dim")


# -- Take and the gathers ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
def test_take_and_gathers_match_torch(dtype):
    x = random_array((4, 5, 6), dtype, RNG)
    t = _wide(x)
    flat = RNG.integers(0, x.size, (3, 2))
    _check(openacl.ops.take(x, flat).numpy(), torch.take(t, torch.from_numpy(flat)), dtype)
    index = RNG.integers(0, 5, (2, 3)).astype(np.int32)
    want = torch.index_select(t, 1, torch.from_numpy(index.reshape(-1)).long()).reshape(
        4, 2, 3, 6)
    _check(openacl.ops.gather_v2(x, 1, index).numpy(), want, dtype)
    if dtype == BF16:  # not in aclnnGatherV3's list
        with pytest.raises(AclError, match="'self'"):
            openacl.ops.gather_v3(x, 1, index, 0, 1)
        return
    _check(openacl.ops.gather_v3(x, 1, index, 0, 1).numpy(), want, dtype)
    batched = RNG.integers(0, 6, (4, 3))  # batchDims 1: row b of x gathers with row b
    want = torch.stack([torch.index_select(t[b], 1, torch.from_numpy(batched[b]))
                        for b in range(4)])
    _check(openacl.ops.gather_v3(x, 2, batched, 1, 0).numpy(), want, dtype)


def test_gather_v3_mode_2_gathers_zeros_out_of_range():
    x = random_array((3, 4), F32, RNG)
    got = openacl.ops.gather_v3(x, 1, np.array([1, 7, -1]), 0, 2).numpy()
    want = np.stack([x[:, 1], np.zeros(3, np.float32), np.zeros(3, np.float32)], 1)
    np.testing.assert_array_equal(got, want)


def test_take_and_gather_refusals():
    x = _dev(np.ones((3, 4), np.float32))
    _refused(lambda: aclnn.take_get_workspace_size(x, _dev(np.array([0.0])),
                                                   openacl.empty((1,), np.float32)), "index")
    _refused(lambda: aclnn.gather_v2_get_workspace_size(x, 2, _dev(np.array([0])),
                                                        openacl.empty((3,), np.float32)), "dim")
    _refused(lambda: aclnn.gather_v3_get_workspace_size(
        x, 1, _dev(np.array([[0]])), 2, 1, openacl.empty((3, 1), np.float32)), "batchDims")
    _refused(lambda: aclnn.gather_v3_get_workspace_size(
        x, 1, _dev(np.array([0])), 0, 3, openacl.empty((3, 1), np.float32)), "mode")
    _fails_in_kernel("take", x, _dev(np.array([12])), openacl.empty((1,), np.float32),
                     match="holds index 12")


# -- InplaceMaskedScatter ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
def test_inplace_masked_scatter_matches_torch(dtype):
    x = random_array((3, 4, 5), dtype, RNG)
    mask = RNG.random((4, 5)) < 0.5  # broadcast over dim 0
    source = random_array((70,), dtype, RNG)
    target = _dev(x)
    openacl.ops.inplace_masked_scatter(target, mask, source)
    want = _wide(x).masked_scatter(torch.from_numpy(mask), _wide(source))
    _check(target.numpy(), want, dtype)
    uint8_mask = mask.astype(np.uint8)
    target = _dev(x)
    openacl.ops.inplace_masked_scatter(target, uint8_mask, source)
    _check(target.numpy(), want, dtype)


def test_inplace_masked_scatter_refusals():
    x = _dev(np.ones((3, 4), np.float32))
    _refused(lambda: aclnn.inplace_masked_scatter_get_workspace_size(
        x, _dev(np.ones((2, 4), bool)), _dev(np.ones(12, np.float32))), "mask")
    _refused(lambda: aclnn.inplace_masked_scatter_get_workspace_size(
        x, _dev(np.ones((3, 4), np.float32)), _dev(np.ones(12, np.float32))), "mask")
    _refused(lambda: aclnn.inplace_masked_scatter_get_workspace_size(
        x, _dev(np.ones((3, 4), bool)), _dev(np.ones(12, np.float16))), "source")
    _fails_in_kernel("inplace_masked_scatter", x, _dev(np.ones((3, 4), bool)),
                     _dev(np.ones(5, np.float32)), match="holds 5")


# -- RepeatInterleave ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=str)
def test_repeat_interleave_family_matches_torch(dtype):
    x = random_array((3, 4), dtype, RNG)
    t = _wide(x)
    counts = RNG.integers(0, 4, 12)
    _check(openacl.ops.repeat_interleave(x, counts, int(counts.sum())).numpy(),
           torch.repeat_interleave(t.reshape(-1), torch.from_numpy(counts)), dtype)
    _check(openacl.ops.repeat_interleave(x, np.array([3], np.int32), 36).numpy(),
           torch.repeat_interleave(t.reshape(-1), 3), dtype)
    rows = RNG.integers(0, 4, 4)
    _check(openacl.ops.repeat_interleave_with_dim(x, rows, 1, int(rows.sum())).numpy(),
           torch.repeat_interleave(t, torch.from_numpy(rows), 1), dtype)
    _check(openacl.ops.repeat_interleave_int(x, 2, 24).numpy(),
           torch.repeat_interleave(t.reshape(-1), 2), dtype)
    _check(openacl.ops.repeat_interleave_int_with_dim(x, 3, -2, 9).numpy(),
           torch.repeat_interleave(t, 3, 0), dtype)


@pytest.mark.parametrize("dtype", [I32, I64], ids=str)
def test_repeat_interleave_tensor_matches_torch(dtype):
    counts = RNG.integers(0, 5, 7).astype(dtype)
    got = openacl.ops.repeat_interleave_tensor(counts, int(counts.sum())).numpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, torch.repeat_interleave(torch.from_numpy(counts)))


def test_repeat_interleave_refusals():
    x = _dev(np.ones((3, 4), np.float32))
    out = openacl.empty((24,), np.float32)
    _refused(lambda: aclnn.repeat_interleave_get_workspace_size(
        x, _dev(np.array([1, 2])), 24, out), "repeats")
    _refused(lambda: aclnn.repeat_interleave_get_workspace_size(
        x, _dev(np.array([2.0])), 24, out), "repeats")
    _refused(lambda: aclnn.repeat_interleave_int_get_workspace_size(x, 2, 20, out), "outputSize")
    _refused(lambda: aclnn.repeat_interleave_int_get_workspace_size(x, -1, 0, out), "repeats")
    _refused(lambda: aclnn.repeat_interleave_int_with_dim_get_workspace_size(
        x, 2, 2, 8, openacl.empty((3, 8), np.float32)), "dim")
    _refused(lambda: aclnn.repeat_interleave_get_workspace_size(
        _dev(np.ones(3, np.complex64)), _dev(np.array([1])), 3,
        openacl.empty((3,), np.complex64)), "self")
    _fails_in_kernel("repeat_interleave", x, _dev(np.array([1])), 24, out,
                     match="differs from the sum")


# -- embeddings (src/openacl/ops/embeddings.py) ---------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag_matches_torch(dtype, mode):
    weight = random_array((7, 4), dtype, RNG)
    indices = RNG.integers(0, 7, 11)
    offsets = np.array([0, 3, 3, 8], np.int32)
    for last, padding in [(False, -1), (True, 2), (False, 9)]:
        weights = random_array((11,), dtype, RNG, 0, 1) if mode == 0 else None
        got = openacl.ops.embedding_bag(weight, indices, offsets, False, mode, False, weights,
                                        last, padding)
        rows = weight.shape[0]
        want = torch.embedding_bag(
            _wide(weight), torch.from_numpy(indices), torch.from_numpy(offsets).long(), False,
            mode, False, None if weights is None else _wide(weights), last,
            padding % rows if -rows <= padding < rows else None)
        _check(got[0].numpy(), want[0], dtype, f"output, last={last}, padding={padding}")
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        if mode:  # (torch leaves bagSize zero in sum mode)
            np.testing.assert_array_equal(got[2].numpy(), want[2].numpy())
        if mode == 2:
            np.testing.assert_array_equal(got[3].numpy(), want[3].numpy())


def test_embedding_bag_refusals():
    weight = _dev(np.ones((5, 3), np.float32))
    indices, offsets = _dev(np.array([0, 1, 2])), _dev(np.array([0, 2]))
    outs = (openacl.empty((2, 3), np.float32), openacl.empty((3,), np.int64),
            openacl.empty((2,), np.int64), openacl.empty((2,), np.int64))
    _refused(lambda: aclnn.embedding_bag_get_workspace_size(
        weight, indices, offsets, False, 1, False, _dev(np.ones(3, np.float32)), False, -1,
        *outs), "perSampleWeights")
    _refused(lambda: aclnn.embedding_bag_get_workspace_size(
        _dev(np.ones((5, 3), np.int32)), indices, offsets, False, 0, False, None, False, -1,
        *outs), "weight")
    _refused(lambda: aclnn.embedding_bag_get_workspace_size(
        weight, _dev(np.array([0, 1, 2], np.int8)), _dev(np.array([0, 2], np.int16)), False, 0,
        False, None, False, -1, *outs), "offsets")
    _refused(lambda: aclnn.embedding_bag_get_workspace_size(
        weight, indices, offsets, False, 0, False, None, False, -1,
        openacl.empty((3, 3), np.float32), *outs[1:]), "output")


@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_embedding_dense_backward_matches_torch(dtype):
    grad = random_array((2, 6, 5), dtype, RNG)
    indices = RNG.integers(0, 8, (2, 6))
    for padding, scale in [(-1, False), (3, True), (12, False)]:
        got = openacl.ops.embedding_dense_backward(grad, indices, 8, padding, scale).numpy()
        want = torch.ops.aten.embedding_dense_backward(
            _wide(grad), torch.from_numpy(indices), 8, padding if padding < 8 else -1, scale)
        _check(got, want, dtype, f"padding={padding}, scale={scale}")
    weight = torch.zeros(8, 5, dtype=torch.float64, requires_grad=True)  # it is the autograd
    torch.nn.functional.embedding(torch.from_numpy(indices), weight).backward(_wide(grad))
    _check(openacl.ops.embedding_dense_backward(grad, indices, 8, -1, False).numpy(),
           weight.grad, dtype, "autograd")


@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_embedding_renorm_matches_torch(dtype):
    weight = random_array((6, 4), dtype, RNG, -3, 3)
    for max_norm, norm_type in [(1.0, 2.0), (2.5, 1.0), (0.5, 3.0)]:
        target = _dev(weight)
        indices = np.array([0, 4, 4, 5])
        openacl.ops.embedding_renorm(target, indices, max_norm, norm_type)
        want = torch.embedding_renorm_(_wide(weight), torch.from_numpy(indices), max_norm,
                                       norm_type)
        _check(target.numpy(), want, dtype, f"max_norm={max_norm}, p={norm_type}")
    _refused(lambda: aclnn.embedding_renorm_get_workspace_size(
        _dev(np.ones(3, np.float32)), _dev(np.array([0])), 1.0, 2.0), "selfRef")
    _fails_in_kernel("embedding_renorm", _dev(weight), _dev(np.array([6])), 1.0, 2.0,
                     match="holds index 6")


# -- ExpandIntoJaggedPermute --------------------------------------------------------------------
def test_expand_into_jagged_permute_matches_fbgemm_semantics():
    lengths = np.array([3, 0, 2, 4], np.int32)  # table lengths
    input_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    permute = np.array([2, 0, 3, 1], np.int32)
    output_lengths = lengths[permute]
    output_offsets = np.concatenate([[0], np.cumsum(output_lengths)]).astype(np.int32)
    size = int(output_lengths.sum())
    got = openacl.ops.expand_into_jagged_permute(permute, input_offsets, output_offsets,
                                                 size).numpy()
    want = np.concatenate([np.arange(input_offsets[t], input_offsets[t] + lengths[t])
                           for t in permute]).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32
    _refused(lambda: aclnn.expand_into_jagged_permute_get_workspace_size(
        _dev(permute), _dev(input_offsets[:-1]), _dev(output_offsets), size,
        openacl.empty((size,), np.int32)), "inputOffset")
    _refused(lambda: aclnn.expand_into_jagged_permute_get_workspace_size(
        _dev(permute.astype(np.int64)), _dev(input_offsets), _dev(output_offsets), size,
        openacl.empty((size,), np.int64)), "permute")
    _fails_in_kernel("expand_into_jagged_permute", _dev(permute), _dev(input_offsets),
                     _dev(output_offsets), size + 1, openacl.empty((size + 1,), np.int32),
                     match="must rise from 0 to outputSize")
