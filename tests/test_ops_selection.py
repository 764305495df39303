"""The selection family (src/openacl/ops/selection.py) against PyTorch: aclnnNonzero,
NonzeroV2, Unique, Unique2, UniqueDim, Median, MedianDim, NanMedian, NanMedianDim and
Kthvalue.

Values are compared exactly (selection moves values, it computes none); an index of a
median or k-th value is checked to point at that value (torch leaves which of several
equal values open), and on data without ties equals torch's. Data-sized outputs report
their real shape as their view shape after the run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, FLOATS, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
INTS = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64)]
NONZERO_DTYPES = [*FLOATS, *INTS, np.dtype(np.bool_)]
MEDIAN_DTYPES = [*FLOATS[:3], *INTS]
RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _exact(actual, golden) -> None:
    actual, golden = np.asarray(actual), np.asarray(golden)
    assert actual.shape == golden.shape, (actual.shape, golden.shape)
    assert actual.dtype == golden.dtype, (actual.dtype, golden.dtype)
    np.testing.assert_array_equal(actual.astype(np.float64), golden.astype(np.float64))


def _refused(call, argument: str, code: int = ACLNN_ERR_PARAM_INVALID) -> None:
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == code, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


# -- Nonzero ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NONZERO_DTYPES, ids=str)
def test_nonzero_matches_torch(dtype):
    for shape in [(3, 4, 5), (7,), (), (2, 0, 3)]:
        x = random_array(shape, dtype, RNG, -1, 2)
        want = torch.nonzero(to_torch(x)).numpy()
        out = openacl.ops.nonzero(x)
        assert out.shape == want.shape  # sized (numel, ndim), it now says (N, ndim)
        _exact(out.numpy(), want)
        _exact(openacl.ops.nonzero_v2(x).numpy(), want.T)


def test_nonzero_reports_its_shape_through_the_two_phase_api():
    x = np.array([[0, 1.5], [2, 0], [0, 0], [3, 4]], np.float32)
    out = openacl.empty((8, 2), np.int64)  # CANN's example: numel rows
    device_x = _dev(x)
    workspace, executor = aclnn.nonzero_get_workspace_size(device_x, out)
    aclnn.nonzero(0, workspace, executor, None)
    openacl.rt.synchronize_device()
    assert openacl.get_view_shape(out) == (4, 2)
    _exact(out.numpy(), np.argwhere(x))
    _refused(lambda: aclnn.nonzero_get_workspace_size(_dev(x), openacl.empty((8, 3), np.int64)),
             "out")
    _refused(lambda: aclnn.nonzero_get_workspace_size(_dev(x), openacl.empty((8, 2), np.int32)),
             "out")
    _refused(lambda: aclnn.nonzero_get_workspace_size(None, out), "self",
             ACLNN_ERR_PARAM_NULLPTR)


# -- Unique -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NONZERO_DTYPES, ids=str)
def test_unique_matches_torch(dtype):
    x = random_array((4, 6), dtype, RNG, -3, 3)
    values, inverse, counts = torch.unique(to_torch(x), return_inverse=True,
                                           return_counts=True)
    for sorted_ in (True, False):  # CANN leaves an unsorted order open: ascending here
        got_values, got_inverse = openacl.ops.unique(x, sorted_, True)
        _exact(got_values.numpy(), from_torch(values))
        _exact(got_inverse.numpy(), inverse.numpy())
    got = openacl.ops.unique2(x, True, True, True)
    _exact(got[0].numpy(), from_torch(values))
    _exact(got[1].numpy(), inverse.numpy())
    _exact(got[2].numpy(), counts.numpy())


@pytest.mark.parametrize("dtype", [F32, BF16, np.dtype(np.int32), np.dtype(np.bool_)],
                         ids=str)
def test_unique_dim_matches_torch(dtype):
    base = random_array((3, 4), dtype, RNG, -1, 1)
    x = np.concatenate([base, base[:, ::-1], base], 1)  # repeated columns
    for dim in (0, 1, -1):
        values, inverse, counts = torch.unique(to_torch(x), dim=dim, return_inverse=True,
                                               return_counts=True)
        got = openacl.ops.unique_dim(x, True, True, dim)
        _exact(got[0].numpy(), from_torch(values))
        _exact(got[1].numpy(), inverse.numpy())
        _exact(got[2].numpy(), counts.numpy())


def test_unique_refusals():
    x = _dev(np.ones((2, 3), np.float32))
    values, counts = openacl.empty((6,), np.float32), openacl.empty((6,), np.int64)
    _refused(lambda: aclnn.unique_get_workspace_size(x, True, True, values,
                                                     openacl.empty((6,), np.int64)),
             "inverseOut")
    _refused(lambda: aclnn.unique_get_workspace_size(x, True, True, openacl.empty(
        (6,), np.float16), openacl.empty((2, 3), np.int64)), "valueOut")
    _refused(lambda: aclnn.unique2_get_workspace_size(
        x, True, True, True, values, openacl.empty((2, 3), np.int64), None), "countsOut",
        ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: aclnn.unique_dim_get_workspace_size(
        x, True, True, 2, openacl.empty((2, 3), np.float32), openacl.empty((3,), np.int64),
        counts), "dim")
    _refused(lambda: aclnn.unique_get_workspace_size(
        _dev(np.ones(3, np.complex64)), True, True, openacl.empty((3,), np.complex64),
        openacl.empty((3,), np.int64)), "self")


# -- medians and kthvalue -----------------------------------------------------------------------
def _points_at(index: np.ndarray, values: np.ndarray, x: np.ndarray, dim: int,
               keepdim: bool) -> None:
    """Each index picks its value (NaN where the value is NaN) out of ``x`` along ``dim``."""
    picked_index = index if keepdim else np.expand_dims(index, dim)
    picked = np.take_along_axis(x, picked_index, dim)
    picked = picked if keepdim else np.squeeze(picked, dim)
    np.testing.assert_array_equal(picked.astype(np.float64), values.astype(np.float64))


@pytest.mark.parametrize("dtype", MEDIAN_DTYPES, ids=str)
def test_medians_match_torch(dtype):
    x = random_array((5, 6, 7), dtype, RNG, -50, 50)
    t = to_torch(x)
    _exact(openacl.ops.median(x).numpy(), from_torch(torch.median(t)))
    _exact(openacl.ops.nan_median(x).numpy(), from_torch(torch.nanmedian(t)))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            want = torch.median(t, dim, keepdim)
            values, index = openacl.ops.median_dim(x, dim, keepdim)
            _exact(values.numpy(), from_torch(want.values))
            _points_at(index.numpy(), values.numpy(), x, dim, keepdim)
            values, index = openacl.ops.nan_median_dim(x, dim, keepdim)
            _exact(values.numpy(), from_torch(torch.nanmedian(t, dim, keepdim).values))
            _points_at(index.numpy(), values.numpy(), x, dim, keepdim)


@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_medians_with_nan(dtype):
    x = RNG.permutation(40).reshape(5, 8).astype(np.float32).astype(dtype)  # no ties
    x[1, 3] = x[2, 0] = x[2, 5] = np.nan
    x[4, :] = np.nan
    t = to_torch(x)
    _exact(openacl.ops.median(x).numpy(), from_torch(torch.median(t)))
    _exact(openacl.ops.nan_median(x).numpy(), from_torch(torch.nanmedian(t)))
    for name, reference in (("median_dim", torch.median), ("nan_median_dim", torch.nanmedian)):
        values, index = getattr(openacl.ops, name)(x, 1, False)
        want = reference(t, 1)
        _exact(values.numpy(), from_torch(want.values))
        rows_with_values = ~np.isnan(values.numpy().astype(np.float32))
        np.testing.assert_array_equal(index.numpy()[rows_with_values],
                                      want.indices.numpy()[rows_with_values])
    values, index = openacl.ops.nan_median_dim(x, 1, False)
    assert index.numpy()[4] == 0  # CANN's document: an all-NaN slice gives NaN at index 0


@pytest.mark.parametrize("dtype", MEDIAN_DTYPES, ids=str)
def test_kthvalue_matches_torch(dtype):
    x = random_array((4, 9, 5), dtype, RNG, -60, 60)
    t = to_torch(x)
    for k, dim, keepdim in [(1, 0, False), (5, 1, True), (5, -1, False), (9, 1, False)]:
        want = torch.kthvalue(t, k, dim, keepdim)
        values, index = openacl.ops.kthvalue(x, k, dim, keepdim)
        _exact(values.numpy(), from_torch(want.values))
        _points_at(index.numpy(), values.numpy(), x, dim, keepdim)
    distinct = RNG.permutation(45).reshape(9, 5).astype(np.int64)
    values, index = openacl.ops.kthvalue(distinct, 3, 0, False)
    want = torch.kthvalue(torch.from_numpy(distinct), 3, 0)
    _exact(index.numpy(), want.indices.numpy())


def test_median_and_kthvalue_refusals():
    x = _dev(np.ones((3, 4), np.float32))
    values, index = openacl.empty((3,), np.float32), openacl.empty((3,), np.int64)
    _refused(lambda: aclnn.kthvalue_get_workspace_size(x, 5, 1, False, values, index), "k")
    _refused(lambda: aclnn.kthvalue_get_workspace_size(x, 0, 1, False, values, index), "k")
    _refused(lambda: aclnn.median_dim_get_workspace_size(x, 2, False, values, index), "dim")
    _refused(lambda: aclnn.median_dim_get_workspace_size(
        x, 1, False, values, openacl.empty((3,), np.int32)), "indicesOut")
    _refused(lambda: aclnn.median_get_workspace_size(x, openacl.empty((), np.float16)),
             "valuesOut")
    _refused(lambda: aclnn.median_get_workspace_size(
        _dev(np.ones(3, np.float64)), openacl.empty((), np.float64)), "self")
    _refused(lambda: aclnn.nan_median_get_workspace_size(
        _dev(np.ones((0, 3), np.float32)), openacl.empty((), np.float32)), "self")
    one = openacl.empty((1,), np.float32)  # CANN's document: out of shape (1,)
    workspace, executor = aclnn.nan_median_get_workspace_size(x, one)
    aclnn.nan_median(0, workspace, executor, None)
    assert one.numpy().tolist() == [1.0]


# -- max unpooling (src/openacl/ops/unpooling.py) ---------------------------------------------
UNPOOL_DTYPES = [*FLOATS[:1], np.dtype(np.float16), np.dtype(np.float64), *INTS]


def _pooled(shape, spatial: int):
    """A max-pooled float64 input of ``shape`` and its indices (kernel 2, stride 2)."""
    x = torch.from_numpy(RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64))
    pool = torch.nn.functional.max_pool2d if spatial == 2 else torch.nn.functional.max_pool3d
    return pool(x, 2, 2, return_indices=True)


@pytest.mark.parametrize("dtype", UNPOOL_DTYPES, ids=str)
@pytest.mark.parametrize("spatial", [2, 3])
def test_max_unpool_matches_torch(dtype, spatial):
    full = (2, 3, 6, 4) if spatial == 2 else (2, 2, 4, 6, 4)
    values, indices = _pooled(full, spatial)
    x = values.numpy().astype(dtype)
    size = list(full[-spatial:])
    unpool = torch.nn.functional.max_unpool2d if spatial == 2 else \
        torch.nn.functional.max_unpool3d
    want = unpool(torch.from_numpy(x.astype(np.float64)), indices, 2, 2, output_size=size)
    if spatial == 2:
        got = openacl.ops.max_unpool2d(x, indices.numpy(), size)
        drop = openacl.ops.max_unpool2d(x[0], indices.numpy()[0], size)  # (C, H, W)
        _exact(drop.numpy(), want.numpy()[0].astype(dtype))
    else:
        got = openacl.ops.max_unpool3d(x, indices.numpy().astype(np.int32), size, [2, 2, 2],
                                       [0, 0, 0])
    _exact(got.numpy(), want.numpy().astype(dtype))


@pytest.mark.parametrize("dtype", [F32, np.dtype(np.float16), np.dtype(np.int32),
                                   np.dtype(np.bool_)], ids=str)
@pytest.mark.parametrize("spatial", [2, 3])
def test_max_unpool_backward_is_the_gradient(dtype, spatial):
    full = (2, 3, 6, 4) if spatial == 2 else (1, 2, 4, 6, 4)
    values, indices = _pooled(full, spatial)
    size = list(full[-spatial:])
    grad = random_array(full, dtype, RNG, -3, 3)
    if dtype != np.bool_:
        source = values.clone().requires_grad_(True)
        unpool = torch.nn.functional.max_unpool2d if spatial == 2 else \
            torch.nn.functional.max_unpool3d
        unpool(source, indices, 2, 2, output_size=size).backward(
            torch.from_numpy(grad.astype(np.float64)))
        want = source.grad.numpy().astype(dtype)
    else:
        want = np.take_along_axis(grad.reshape(*full[:-spatial], -1),
                                  indices.numpy().reshape(*full[:-spatial], -1),
                                  -1).reshape(values.shape)
    x = values.numpy().astype(dtype)
    if spatial == 2:
        got = openacl.ops.max_unpool2d_backward(grad, x, indices.numpy(), size)
    else:
        got = openacl.ops.max_unpool3d_backward(grad, x, indices.numpy(), size, [2, 2, 2],
                                                [0, 0, 0])
    _exact(got.numpy(), want)


def test_max_unpool_refusals():
    x, idx = _dev(np.ones((1, 2, 2, 2), np.float32)), _dev(np.zeros((1, 2, 2, 2), np.int64))
    out = openacl.empty((1, 2, 4, 4), np.float32)
    _refused(lambda: aclnn.max_unpool2d_get_workspace_size(x, idx, [4], out), "outputSize")
    _refused(lambda: aclnn.max_unpool2d_get_workspace_size(x, idx, [1, 2], out), "outputSize")
    _refused(lambda: aclnn.max_unpool2d_get_workspace_size(
        x, _dev(np.zeros((1, 2, 2), np.int64)), [4, 4], out), "indices")
    _refused(lambda: aclnn.max_unpool2d_get_workspace_size(
        _dev(np.ones((2, 2), np.float32)), _dev(np.zeros((2, 2), np.int64)), [4, 4],
        openacl.empty((4, 4), np.float32)), "self")
    _refused(lambda: aclnn.max_unpool3d_get_workspace_size(
        _dev(np.ones((1, 1, 2, 2, 2), np.float32)), _dev(np.zeros((1, 1, 2, 2, 2), np.int64)),
        [4, 4, 4], [0, 2, 2], [0, 0, 0], openacl.empty((1, 1, 4, 4, 4), np.float32)),
        "stride")
    _refused(lambda: aclnn.max_unpool2d_backward_get_workspace_size(
        _dev(np.ones((1, 2, 4, 3), np.float32)), x, idx, [4, 4],
        openacl.empty((1, 2, 2, 2), np.float32)), "gradOutput")
    bad = _dev(np.full((1, 2, 2, 2), 16, np.int64))
    stream = openacl.rt.create_stream()
    try:
        workspace, executor = aclnn.max_unpool2d_get_workspace_size(x, bad, [4, 4], out)
        aclnn.max_unpool2d(0, workspace, executor, stream)
        with pytest.raises(AclError, match="holds index 16"):
            openacl.rt.synchronize_stream(stream)
    finally:
        openacl.rt.destroy_stream_force(stream)


# -- ApplyTopKTopP ------------------------------------------------------------------------------
def _top_k_top_p_reference(logits: torch.Tensor, p, k) -> torch.Tensor:
    """CANN's document's formula in float64 (sort ascending, top-k, softmax mass, restore)."""
    ordered, order = torch.sort(logits, dim=-1, stable=True)
    width = logits.shape[-1]
    if k is not None:
        active = (k > 0) & (k < width)
        threshold = ordered.gather(-1, (width - k).clamp(0, width - 1).unsqueeze(-1))
        ordered = ordered.masked_fill(active.unsqueeze(-1) & (ordered < threshold), -np.inf)
    if p is not None:
        dropped = torch.softmax(ordered, -1).cumsum(-1) <= (1 - p.unsqueeze(-1))
        dropped[:, -1] = False
        ordered = ordered.masked_fill(dropped, -np.inf)
    return torch.empty_like(ordered).scatter(-1, order, ordered)


@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_apply_top_k_top_p_matches_the_formula(dtype):
    logits = RNG.permutation(6 * 40).reshape(6, 40).astype(np.float32) / 16  # no ties
    logits = logits.astype(dtype)
    k = np.array([1, 5, 0, 40, 12, -3], np.int32)  # 0, 40, -3: no top-k filtering
    p = np.array([0.9, 0.5, 0.3, 1.0, 0.0, 0.7], np.float32).astype(dtype)
    wide = torch.from_numpy(logits.astype(np.float64))
    for args, ref in [((p, k), (p, k)), ((None, k), (None, k)), ((p, None), (p, None))]:
        got = openacl.ops.apply_top_k_top_p(logits, *args).numpy()
        want = _top_k_top_p_reference(
            wide, None if ref[0] is None else torch.from_numpy(ref[0].astype(np.float64)),
            None if ref[1] is None else torch.from_numpy(ref[1].astype(np.int64)))
        _exact(got, from_torch(want).astype(np.float32).astype(dtype))
    kept = openacl.ops.apply_top_k_top_p(logits, None, k).numpy()
    assert (np.isfinite(kept.astype(np.float32)).sum(1) == [1, 5, 40, 40, 12, 40]).all()


def test_apply_top_k_top_p_refusals():
    logits = _dev(np.ones((3, 8), np.float32))
    out = openacl.empty((3, 8), np.float32)
    p, k = _dev(np.ones(3, np.float32)), _dev(np.ones(3, np.int32))
    _refused(lambda: aclnn.apply_top_k_top_p_get_workspace_size(logits, None, None, out), "k",
             ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: aclnn.apply_top_k_top_p_get_workspace_size(
        logits, _dev(np.ones(3, np.float16)), k, out), "p")
    _refused(lambda: aclnn.apply_top_k_top_p_get_workspace_size(
        logits, p, _dev(np.ones(3, np.int64)), out), "k")
    _refused(lambda: aclnn.apply_top_k_top_p_get_workspace_size(
        logits, p, _dev(np.ones(4, np.int32)), out), "k")
    _refused(lambda: aclnn.apply_top_k_top_p_get_workspace_size(
        _dev(np.ones(8, np.float32)), p, k, openacl.empty((8,), np.float32)), "logits")


# -- TopKTopPSampleV2 ---------------------------------------------------------------------------
def _sample(logits, k, p, q=None, min_p=None, *, need_logits=False, is_logits=True,
            sample_result=False, ks_max=1024):
    """The one-shot TopKTopPSampleV2 on host arrays; its four outputs as host arrays."""
    rows = len(logits)
    outs = openacl.ops.top_k_top_p_sample_v2(
        np.asarray(logits, np.float32), np.asarray(k, np.int32),
        np.full(rows, p, np.float32) if np.isscalar(p) else np.asarray(p, np.float32),
        None if q is None else np.asarray(q, np.float32),
        None if min_p is None else np.asarray(min_p, np.float32), 1e-8, need_logits, 32,
        ks_max, is_logits, sample_result)
    return [o.numpy() for o in outs]


def test_top_k_top_p_sample_v2_top_k_then_argmax():
    logits = [[1.0, 3.0, 2.0, 0.0], [5.0, 1.0, 4.0, 6.0]]
    selected, survivors, _, _ = _sample(logits, [2, 0], 1.0, need_logits=True)
    _exact(selected, np.array([1, 3]))  # row 1: k = 0 filters nothing
    _exact(survivors, np.array([[-np.inf, 3, 2, -np.inf], [5, 1, 4, 6]], np.float32))
    # probabilities given (inputIsLogits false): dropped positions hold 0, not -inf
    _, survivors, _, _ = _sample([[0.1, 0.5, 0.3, 0.1]], [2], 1.0, need_logits=True,
                                 is_logits=False)
    _exact(survivors, np.array([[0, 0.5, 0.3, 0]], np.float32))


def test_top_k_top_p_sample_v2_intermediate_results():
    """isNeedSampleResult: the surviving probabilities at each row's front, their
    positions beside them; logitsSelectIdx is not written."""
    _, _, positions, probs = _sample([[1.0, 3.0, 2.0, 0.0]], [2], 1.0, sample_result=True)
    two = np.exp([3.0, 2.0]) / np.exp([3.0, 2.0]).sum()
    _exact(positions, np.array([[1, 2, 0, 0]]))
    np.testing.assert_allclose(probs, [[two[0], two[1], 0, 0]], rtol=1e-6)
    # top-p on probabilities: 0.5 and 0.3 reach 0.7, the rest is dropped
    _, _, positions, probs = _sample([[0.1, 0.5, 0.3, 0.1]], [0], 0.7, is_logits=False,
                                     sample_result=True)
    _exact(positions, np.array([[1, 2, 0, 0]]))
    _exact(probs, np.array([[0.5, 0.3, 0, 0]], np.float32))
    # min-p alone (no top-k, no top-p): the row is not sorted; >= 0.5 * max survives
    _, _, positions, probs = _sample([[0.3, 0.1, 0.5, 0.2]], [0], 1.0, min_p=[0.5],
                                     is_logits=False, sample_result=True)
    _exact(positions, np.array([[0, 2, 0, 0]]))
    _exact(probs, np.array([[0.3, 0.5, 0, 0]], np.float32))
    # p <= 0 keeps the largest alone, with probability 1; min-p >= 1 likewise
    for p, min_p in [(0.0, None), (1.0, [1.0])]:
        _, _, positions, probs = _sample([[1.0, 3.0, 2.0, 0.0]], [3], p, min_p=min_p,
                                         sample_result=True)
        assert positions[0, 0] == 1 and (positions[0, 1:] == 0).all()
        assert (probs[0, 1:] == 0).all()
    assert probs[0, 0] == np.float32(np.exp(3.0) / np.exp([3.0, 2.0, 1.0]).sum())


def test_top_k_top_p_sample_v2_q_sample():
    """With q the sample is the argmax of probability / (|q| + eps), q aligned to the
    compacted, descending probabilities."""
    logits = [[1.0, 3.0, 2.0, 0.0]]
    (selected, *_) = _sample(logits, [2], 1.0, q=[[0.9, 0.1, 1.0, 1.0]])
    _exact(selected, np.array([2]))  # 0.27 / 0.1 beats 0.73 / 0.9
    (selected, *_) = _sample(logits, [2], 1.0, q=[[-0.1, 0.9, 1.0, 1.0]])
    _exact(selected, np.array([1]))  # |q| is used


@pytest.mark.parametrize("is_logits", [True, False])
def test_top_k_top_p_sample_v2_matches_the_row_by_row_golden(is_logits):
    """Random rows through every stage against the row-by-row float64 reference the ATK
    suite uses (tests/atk_goldens/indexing.py), with ties and every skip rule."""
    from atk_goldens.indexing import top_k_top_p_sample_v2 as reference

    rows, width = 40, 37
    logits = np.round(RNG.uniform(0, 8, (rows, width)), 1).astype(np.float32)  # ties
    if not is_logits:
        logits = logits / logits.sum(1, keepdims=True)
    k = RNG.integers(-3, 45, rows).astype(np.int32)
    p = RNG.choice([-0.5, 0.0, 0.3, 0.6, 0.95, 1.0, 2.0], rows).astype(np.float32)
    min_p = RNG.choice([-1.0, 0.0, 0.2, 0.7, 1.0, 1.5], rows).astype(np.float32)
    q = RNG.uniform(-1, 1, (rows, width)).astype(np.float32)
    wide = [torch.from_numpy(a.astype(np.float64)) for a in (logits, p, q, min_p)]
    for sample_result in (False, True):
        got = _sample(logits, k, p, q, min_p, need_logits=True, is_logits=is_logits,
                      sample_result=sample_result, ks_max=20)
        want = reference(wide[0], torch.from_numpy(k.astype(np.int64)), wide[1], wide[2],
                         wide[3], 1e-8, True, 32, 20, is_logits, sample_result)
        for mine, theirs in zip(got, want, strict=True):
            if theirs is None:
                continue
            theirs = theirs.numpy()
            if theirs.dtype == np.int64:
                _exact(mine, theirs)
            else:
                np.testing.assert_allclose(mine, theirs.astype(np.float32), rtol=1e-6)


def test_top_k_top_p_sample_v2_refusals():
    logits = _dev(np.ones((3, 8), np.float32))
    k, p = _dev(np.ones(3, np.int32)), _dev(np.ones(3, np.float32))
    outs = (openacl.empty((3,), np.int64), openacl.empty((3, 8), np.float32),
            openacl.empty((3, 8), np.int64), openacl.empty((3, 8), np.float32))

    def phase1(logits=logits, k=k, p=p, q=None, min_p=None, ks_max=1024, outs=outs):
        return aclnn.top_k_top_p_sample_v2_get_workspace_size(
            logits, k, p, q, min_p, 1e-8, False, 32, ks_max, True, False, *outs)

    phase1()  # the good call
    _refused(lambda: phase1(logits=None), "logits", ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: phase1(k=None), "topK", ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: phase1(p=None), "topP", ACLNN_ERR_PARAM_NULLPTR)
    _refused(lambda: phase1(logits=_dev(np.ones((3, 8), np.int32))), "logits")
    _refused(lambda: phase1(logits=_dev(np.ones(8, np.float32))), "logits")
    _refused(lambda: phase1(k=_dev(np.ones(3, np.int64))), "topK")
    _refused(lambda: phase1(k=_dev(np.ones(4, np.int32))), "topK")
    _refused(lambda: phase1(p=_dev(np.ones(3, np.float16))), "topP")
    _refused(lambda: phase1(min_p=_dev(np.ones((3, 2), np.float32))), "minPs")
    _refused(lambda: phase1(q=_dev(np.ones((3, 7), np.float32))), "q")
    _refused(lambda: phase1(q=_dev(np.ones((3, 8), np.float16))), "q")
    for ks_max in (0, 1025):
        _refused(lambda ks_max=ks_max: phase1(ks_max=ks_max), "ksMax")
    _refused(lambda: phase1(outs=(openacl.empty((3,), np.int32), *outs[1:])),
             "logitsSelectIdx")
