"""Scale, SignBitsPack, PdistForward and AffineGrid against independent oracles (PyTorch CPU
in float64, rounded once to the output dtype; bit packing by hand), with CANN's precision
standard, and their refusals with CANN's codes naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, TORCH_DTYPES, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]
PDIST_FLOATS = [np.dtype(np.float16), np.dtype(np.float32)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _rounded(tensor: torch.Tensor, dtype) -> np.ndarray:
    return from_torch(tensor.to(TORCH_DTYPES[np.dtype(dtype)]))


def _wide(array) -> torch.Tensor:
    return to_torch(array).double()


def _refusal(fn, *args, **kwargs) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args, **kwargs)
    return info.value


# -- Scale -----------------------------------------------------------------------------------------
SCALE_LAYOUTS = [  # x shape, scale shape, axis, numAxes, scaleFromBlob, scale's broadcast view
    ((2, 3, 4, 5), (3, 4), 1, 2, True, (1, 3, 4, 1)),
    ((2, 3, 4, 5), (4, 5), -2, -1, True, (1, 1, 4, 5)),
    ((2, 3, 4, 5), (), 2, 0, True, (1, 1, 1, 1)),
    ((2, 3, 4, 5), (3,), 1, 7, False, (1, 3, 1, 1)),  # numAxes ignored without scaleFromBlob
    ((2, 3, 4, 5), (1,), 3, 0, False, (1, 1, 1, 1)),
    ((6, 7), (6, 7), 0, 2, False, (6, 7)),
]


@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("layout", SCALE_LAYOUTS, ids=lambda lay: f"{lay[0]}-{lay[1]}-{lay[2]}")
def test_scale_matches_broadcast_multiply_add(dtype, layout):
    x_shape, scale_shape, axis, num_axes, from_blob, view = layout
    rng = np.random.default_rng(3)
    x, s, b = (random_array(shape, dtype, rng) for shape in (x_shape, scale_shape, scale_shape))
    expected = _wide(x) * _wide(s).reshape(view) + _wide(b).reshape(view)
    got = openacl.ops.scale(_dev(x), _dev(s), _dev(b), axis, num_axes, from_blob)
    assert_close(got.numpy(), _rounded(expected, dtype))
    no_bias = openacl.ops.scale(_dev(x), _dev(s), None, axis, num_axes, from_blob)
    assert_close(no_bias.numpy(), _rounded(_wide(x) * _wide(s).reshape(view), dtype))


def test_scale_refusals_name_the_argument():
    x = _dev(np.ones((2, 3, 4), np.float32))
    s = _dev(np.ones((3,), np.float32))
    cases = [  # (arguments, the argument named)
        ((_dev(np.ones((2, 3, 4), np.int32)), s, None, 1, 1, True), "x"),
        ((x, _dev(np.ones((3,), np.float16)), None, 1, 1, True), "scale"),
        ((x, s, _dev(np.ones((4,), np.float32)), 1, 1, True), "bias"),
        ((x, s, None, 3, 1, True), "axis"),
        ((x, s, None, -4, 1, True), "axis"),
        ((x, s, None, 1, -2, True), "numAxes"),
        ((x, s, None, 1, 3, True), "numAxes"),  # axis + numAxes past x's rank
        ((x, s, None, 1, 0, True), "scale"),  # numAxes 0 takes a one-element scale
        ((x, _dev(np.ones((4,), np.float32)), None, 1, 1, True), "scale"),
        ((x, _dev(np.ones((3, 4, 1), np.float32)), None, 1, 1, False), "scale"),
        ((x, _dev(np.ones((2,), np.float32)), None, 1, 1, False), "scale"),
    ]
    for arguments, name in cases:
        error = _refusal(openacl.ops.scale, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID, (arguments, error)
        assert f"'{name}'" in str(error), (name, str(error))
    wrong_out = openacl.empty((2, 3, 4), np.float16)
    assert _refusal(aclnn.scale_get_workspace_size, x, s, None, 1, 1, True,
                    wrong_out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.scale_get_workspace_size, x, None, None, 1, 1, True,
                    openacl.empty((2, 3, 4), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR


def test_scale_takes_empty_tensors():
    x = _dev(np.ones((0, 3), np.float32))
    assert openacl.ops.scale(x, _dev(np.ones(3, np.float32)), None, 1, 1, True).shape == (0, 3)


# -- SignBitsPack ----------------------------------------------------------------------------------
def _packed_by_hand(values: np.ndarray, size: int) -> np.ndarray:
    """Byte i, bit k (LSB first) = element 8 i + k is not negative; zero padding."""
    bits = [0 if v < 0 else 1 for v in values.astype(np.float64)]
    bits += [0] * (-len(bits) % 8)
    packed = [sum(bit << k for k, bit in enumerate(bits[i:i + 8])) for i in range(0, len(bits), 8)]
    return np.array(packed, np.uint8).reshape(size, -1)


def test_sign_bits_pack_torch_npu_example():
    """torch_npu's documented example: 14 values, size 2 -> [[159], [15]]."""
    values = np.array([5, 4, 3, 2, 0, -1, -2, 4, 3, 2, 1, 0, -1, -2], np.float32)
    np.testing.assert_array_equal(openacl.ops.sign_bits_pack(_dev(values), 2).numpy(),
                                  [[159], [15]])


@pytest.mark.parametrize("dtype", PDIST_FLOATS, ids=str)
@pytest.mark.parametrize("count, size", [(64, 4), (37, 5), (8, 1), (0, 3)])
def test_sign_bits_pack_matches_hand_packing(dtype, count, size):
    values = random_array((count,), dtype, np.random.default_rng(count))
    values[:4] = np.array([-0.0, 0.0, np.inf, -np.inf], dtype)[:count]
    got = openacl.ops.sign_bits_pack(_dev(values), size).numpy()
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, _packed_by_hand(values, size))


def test_sign_bits_pack_refusals():
    x = _dev(np.ones(16, np.float32))
    for arguments, name in [((_dev(np.ones((2, 8), np.float32)), 1), "self"),
                            ((_dev(np.ones(16, BF16)), 1), "self"),
                            ((x, 0), "size"), ((x, -1), "size"), ((x, 3), "size")]:
        error = _refusal(openacl.ops.sign_bits_pack, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    for out in (openacl.empty((2, 1), np.int8), openacl.empty((1, 2), np.uint8),
                openacl.empty((2,), np.uint8)):
        assert _refusal(aclnn.sign_bits_pack_get_workspace_size, x, 2,
                        out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.sign_bits_pack_get_workspace_size, x, 2,
                    None).code == ACLNN_ERR_PARAM_NULLPTR


# -- PdistForward ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", PDIST_FLOATS, ids=str)
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, 3.0, 61.0, float("inf")])
def test_pdist_matches_torch(dtype, p):
    x = random_array((9, 13), dtype, np.random.default_rng(5), -100, 100)
    x[2, :] = x[5, :]  # a zero distance
    expected = torch.nn.functional.pdist(_wide(x), p)
    assert_close(openacl.ops.pdist_forward(_dev(x), p).numpy(), _rounded(expected, dtype))


def test_pdist_specials_and_degenerate_shapes():
    x = np.array([[0.0, 1.0], [np.nan, 1.0], [3.0, 5.0]], np.float32)
    for p in (0.0, 2.0, 7.0, float("inf")):
        got = openacl.ops.pdist_forward(_dev(x), p).numpy()
        np.testing.assert_array_equal(np.isnan(got), [True, False, True])
    assert openacl.ops.pdist_forward(_dev(np.ones((1, 4), np.float32)), 2.0).shape == (0,)
    empty_rows = openacl.ops.pdist_forward(_dev(np.ones((4, 0), np.float32)), 3.0).numpy()
    np.testing.assert_array_equal(empty_rows, np.zeros(6, np.float32))


def test_pdist_refusals():
    x = _dev(np.ones((3, 2), np.float32))
    for arguments, name in [((_dev(np.ones((3, 2), BF16)), 2.0), "self"),
                            ((_dev(np.ones(3, np.float32)), 2.0), "self"),
                            ((x, -1.0), "pScalar")]:
        error = _refusal(openacl.ops.pdist_forward, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    for out in (openacl.empty((3,), np.float16), openacl.empty((4,), np.float32)):
        assert _refusal(aclnn.pdist_forward_get_workspace_size, x, 2.0,
                        out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.pdist_forward_get_workspace_size, x, None,
                    openacl.empty((3,), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR


# -- AffineGrid ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("size", [(3, 2, 5, 7), (2, 1, 1, 4), (2, 3, 4, 1, 6), (1, 1, 2, 3, 4)],
                         ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(dtype, size, align_corners):
    coords = len(size) - 2
    theta = random_array((size[0], coords, coords + 1), dtype, np.random.default_rng(7))
    with np.errstate(all="ignore"), torch.no_grad():
        expected = torch.nn.functional.affine_grid(_wide(theta), list(size),
                                                   align_corners=align_corners)
    got = openacl.ops.affine_grid(_dev(theta), size, align_corners)
    assert_close(got.numpy(), _rounded(expected, dtype))


def test_affine_grid_refusals():
    theta = _dev(np.ones((2, 2, 3), np.float32))
    for arguments, name in [((_dev(np.ones((2, 2, 3), np.int32)), (2, 1, 4, 4)), "theta"),
                            ((theta, (2, 1, 4)), "size"),
                            ((theta, (2, 1, 4, 4, 4, 4)), "size"),
                            ((theta, (2, 1, 4, 4, 4)), "theta"),  # 3-D takes (N, 3, 4)
                            ((theta, (3, 1, 4, 4)), "theta")]:  # N differs
        error = _refusal(openacl.ops.affine_grid, *arguments, False)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    for out in (openacl.empty((2, 4, 4, 2), np.float16), openacl.empty((2, 4, 4, 3), np.float32)):
        assert _refusal(aclnn.affine_grid_get_workspace_size, theta, (2, 1, 4, 4), False,
                        out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.affine_grid_get_workspace_size, theta, None, False,
                    openacl.empty((2, 4, 4, 2), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR


# -- AddLora ---------------------------------------------------------------------------------------
def _lora_oracle(y, x, weight_b, indices, weight_a, layer, scale, offset, width):
    """Row by row in float64: y_b's slice += x_b A^T B^T * scale for a valid index."""
    out = y.astype(np.float64)
    for b, adapter in enumerate(indices):
        if not 0 <= adapter < weight_b.shape[0]:
            continue
        z = x[b].astype(np.float64)
        if weight_a is not None:
            z = weight_a[adapter, layer].astype(np.float64) @ z
        z = weight_b[adapter, layer].astype(np.float64) @ z * scale
        out[b, offset:offset + width] += z[:width]
    return out.astype(np.float16)


@pytest.mark.parametrize("with_a", [True, False], ids=["shrink-expand", "expand-only"])
@pytest.mark.parametrize("offset, slice_size", [(0, -1), (16, 32), (8, 16)])
def test_add_lora_matches_row_oracle(with_a, offset, slice_size):
    rng = np.random.default_rng(11)
    batch, h1, h2, h3, rank, adapters, layers = 7, 32, 32, 64, 16, 3, 2
    h1 = h1 if with_a else rank
    y = random_array((batch, h3), np.float16, rng, -1, 1)
    x = random_array((batch, h1), np.float16, rng, -1, 1)
    weight_b = random_array((adapters, layers, h2, rank), np.float16, rng, -1, 1)
    weight_a = random_array((adapters, layers, rank, h1), np.float16, rng, -1, 1) if with_a \
        else None
    indices = np.array([0, 2, -1, 1, 2, 3, 0], np.int32)  # -1 and 3 (= W): no adapter
    got = openacl.ops.add_lora(_dev(y), _dev(x), _dev(weight_b), _dev(indices),
                               None if weight_a is None else _dev(weight_a), 1, 0.5, offset,
                               slice_size)
    width = h2 if slice_size == -1 else slice_size
    assert_close(got.numpy(), _lora_oracle(y, x, weight_b, indices, weight_a, 1, 0.5, offset,
                                           width))
    np.testing.assert_array_equal(got.numpy()[2], y[2])


def test_add_lora_refusals():
    y, x = _dev(np.zeros((4, 64), np.float16)), _dev(np.zeros((4, 32), np.float16))
    wb, wa = _dev(np.zeros((2, 3, 32, 16), np.float16)), _dev(np.zeros((2, 3, 16, 32), np.float16))
    idx = _dev(np.zeros(4, np.int32))
    cases = [  # (arguments, the argument named)
        ((_dev(np.zeros((4, 64), np.float32)), x, wb, idx, wa), {}, "y"),
        ((y, x, wb, _dev(np.zeros(4, np.int64)), wa), {}, "indices"),
        ((y, _dev(np.zeros((5, 32), np.float16)), wb, idx, wa), {}, "x"),
        ((y, x, wb, _dev(np.zeros(3, np.int32)), wa), {}, "indices"),
        ((y, x, _dev(np.zeros((2, 3, 16), np.float16)), idx, wa), {}, "weightB"),
        ((y, x, wb, idx, _dev(np.zeros((2, 3, 16, 48), np.float16))), {}, "weightAOptional"),
        ((y, x, wb, idx, None), {}, "x"),  # without weightA, x's H1 must be R
        ((y, x, wb, idx, wa), {"layerIdx": 3}, "layerIdx"),
        ((y, x, wb, idx, wa), {"yOffset": 40}, "yOffset"),
        ((y, x, wb, idx, wa), {"ySliceSize": 48}, "ySliceSize"),
    ]
    for arguments, options, name in cases:
        error = _refusal(openacl.ops.add_lora, *arguments, **options)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    assert _refusal(aclnn.add_lora_get_workspace_size, y, x, None, idx, wa, 0, 1.0, 0, -1,
                    openacl.empty((4, 64), np.float16)).code == ACLNN_ERR_PARAM_NULLPTR


# -- GroupedBiasAddGrad ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
def test_grouped_bias_add_grad_sums_row_ranges(dtype, index_dtype):
    grad = random_array((12, 5), dtype, np.random.default_rng(2))
    ends = np.array([3, 3, 8, 6, 12, 20], index_dtype)  # an empty group, one ending before
    expected = []                                        # its start, one past the rows
    start = 0
    for end in ends:
        expected.append(_wide(grad)[start:min(end, 12)].sum(0) if end > start
                        else torch.zeros(5, dtype=torch.float64))
        start = int(end)
    got = openacl.ops.grouped_bias_add_grad(_dev(grad), _dev(ends))
    assert_close(got.numpy(), _rounded(torch.stack(expected), dtype))


@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_grouped_bias_add_grad_without_groups_sums_dim_1(dtype):
    grad = random_array((4, 7, 3), dtype, np.random.default_rng(4))
    got = openacl.ops.grouped_bias_add_grad(_dev(grad), None)
    assert_close(got.numpy(), _rounded(_wide(grad).sum(1), dtype))


def test_grouped_bias_add_grad_refusals():
    flat, cube = _dev(np.ones((6, 4), np.float32)), _dev(np.ones((2, 3, 4), np.float32))
    ends = _dev(np.array([2, 6], np.int64))
    for arguments, name in [((_dev(np.ones((6, 4), np.float64)), ends), "gradY"),
                            ((flat, _dev(np.array([2, 6], np.int16))), "groupIdxOptional"),
                            ((cube, ends), "gradY"), ((flat, None), "gradY"),
                            ((flat, _dev(np.ones((1, 2), np.int64))), "groupIdxOptional"),
                            ((flat, _dev(np.arange(2049, dtype=np.int64))), "groupIdxOptional")]:
        error = _refusal(openacl.ops.grouped_bias_add_grad, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    for out in (openacl.empty((2, 4), np.float16), openacl.empty((3, 4), np.float32)):
        assert _refusal(aclnn.grouped_bias_add_grad_get_workspace_size, flat, ends,
                        out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.grouped_bias_add_grad_get_workspace_size, None, ends,
                    openacl.empty((2, 4), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR


# -- ExpSegsumBackward -----------------------------------------------------------------------------
def _exp_segsum(x: torch.Tensor) -> torch.Tensor:
    """Mamba-2's exp(segsum(x)): out[..., i, j] = exp(x[j+1] + ... + x[i]) for i >= j, else 0."""
    steps = x.shape[-1]
    spread = x[..., None].expand(*x.shape, steps)
    spread = spread.masked_fill(~torch.ones(steps, steps, dtype=torch.bool).tril(-1), 0)
    segments = spread.cumsum(-2).masked_fill(~torch.ones(steps, steps, dtype=torch.bool).tril(),
                                             -torch.inf)
    return segments.exp()


@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 6), (2, 1, 3, 5)], ids=str)
def test_exp_segsum_backward_is_autograds_gradient(dtype, shape):
    """The gradient autograd finds through the forward ExpSegsum, given its output."""
    rng = np.random.default_rng(9)
    x = torch.from_numpy(rng.uniform(-0.5, 0.5, shape)).requires_grad_()
    forward = _exp_segsum(x)
    grad_output = random_array(forward.shape, dtype, rng, -1, 1)
    grad_self = forward.detach().numpy().astype(np.float32).astype(dtype)  # (rounded)
    (expected,) = torch.autograd.grad((forward * _wide(grad_output)).sum(), x)
    got = openacl.ops.exp_segsum_backward(_dev(grad_output), _dev(grad_self)).numpy()
    scale = np.abs(expected.numpy()).max()
    np.testing.assert_allclose(got.astype(np.float64), expected.numpy(), rtol=2e-2,
                               atol=2e-2 * scale)
    # and exactly CANN's masked-cumsum formula in float64, rounded once
    steps = shape[-1]
    product = _wide(grad_output) * _wide(grad_self)
    cells = torch.ones(steps, steps, dtype=torch.bool).tril(-1)
    formula = (product.masked_fill(~cells, 0).flip(-2).cumsum(-2).flip(-2)
               .masked_fill(~cells, 0).sum(-1))
    assert_close(got, _rounded(formula, dtype))


def test_exp_segsum_backward_refusals_and_empty():
    good = _dev(np.ones((1, 2, 3, 3), np.float32))
    for arguments, name in [((_dev(np.ones((1, 2, 3, 3), np.float64)), good), "gradOutput"),
                            ((_dev(np.ones((2, 3, 3), np.float32)),) * 2, "gradOutput"),
                            ((_dev(np.ones((1, 2, 3, 4), np.float32)),) * 2, "gradOutput"),
                            ((good, _dev(np.ones((1, 2, 3, 3), np.float16))), "gradSelf"),
                            ((good, _dev(np.ones((1, 1, 3, 3), np.float32))), "gradSelf")]:
        error = _refusal(openacl.ops.exp_segsum_backward, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    assert _refusal(aclnn.exp_segsum_backward_get_workspace_size, good, good,
                    openacl.empty((1, 2, 3, 3), np.float32)).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.exp_segsum_backward_get_workspace_size, good, None,
                    openacl.empty((1, 2, 3), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR
    empty = _dev(np.ones((0, 2, 3, 3), np.float32))
    assert openacl.ops.exp_segsum_backward(empty, empty).shape == (0, 2, 3)


# -- Sinkhorn -------------------------------------------------------------------------------------
def _sinkhorn_oracle(cost: torch.Tensor, tol: float) -> torch.Tensor:
    """The doc's iteration in float64, written with torch."""
    gibbs = cost.exp()
    rows, columns = gibbs.shape
    d1, error = torch.ones(columns, dtype=torch.float64), float("inf")
    while error > tol:
        d0 = 1 / (rows * ((d1 * gibbs).sum(1) + 1e-8))
        new = 1 / (columns * ((d0[:, None] * gibbs).sum(0) + 1e-8))
        error, d1 = (d1 - new).abs().mean().item(), new
    return d1 * gibbs * d0[:, None]


@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("shape, tol", [((6, 4), 1e-6), ((30, 8), 1e-3), ((1, 5), None)],
                         ids=str)
def test_sinkhorn_matches_the_iteration_and_balances(dtype, shape, tol):
    cost = random_array(shape, dtype, np.random.default_rng(13), 0, 1)
    got = openacl.ops.sinkhorn(_dev(cost), tol).numpy()
    expected = _sinkhorn_oracle(_wide(cost), 1e-4 if tol is None else tol)
    assert_close(got, _rounded(expected, dtype))
    plan = got.astype(np.float64)
    np.testing.assert_allclose(plan.sum(0), 1 / shape[1], rtol=2e-2)  # columns: 1/C each
    if tol == 1e-6:
        np.testing.assert_allclose(plan.sum(1), 1 / shape[0], rtol=2e-2)  # rows: 1/R each


def test_sinkhorn_refusals_and_empty():
    for cost, name in [(np.ones((3, 3), np.float64), "cost"), (np.ones(3, np.float32), "cost"),
                       (np.ones((2, 4097), np.float32), "cost")]:
        error = _refusal(openacl.ops.sinkhorn, _dev(cost), None)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    cost = _dev(np.ones((3, 3), np.float32))
    for out in (openacl.empty((3, 3), np.int32), openacl.empty((3, 2), np.float32)):
        assert _refusal(aclnn.sinkhorn_get_workspace_size, cost, None,
                        out).code == ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.sinkhorn_get_workspace_size, None, None,
                    openacl.empty((3, 3), np.float32)).code == ACLNN_ERR_PARAM_NULLPTR
    assert openacl.ops.sinkhorn(_dev(np.ones((0, 3), np.float32)), None).shape == (0, 3)


# -- TransformBiasRescaleQkv -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("shape, heads", [((2, 5, 24), 2), ((1, 3, 9), 3), ((3, 0, 12), 4)],
                         ids=str)
def test_transform_bias_rescale_qkv_matches_torch(dtype, shape, heads):
    rng = np.random.default_rng(17)
    qkv, bias = random_array(shape, dtype, rng), random_array(shape[-1:], dtype, rng)
    expected = torch._transform_bias_rescale_qkv(_wide(qkv), _wide(bias), heads)
    got = openacl.ops.transform_bias_rescale_qkv(_dev(qkv), _dev(bias), heads)
    for ours, theirs, name in zip(got, expected, ("q", "k", "v"), strict=True):
        assert_close(ours.numpy(), _rounded(theirs, dtype), name)


def test_transform_bias_rescale_qkv_refusals():
    qkv, bias = _dev(np.ones((2, 3, 12), np.float32)), _dev(np.ones(12, np.float32))
    for arguments, name in [((_dev(np.ones((2, 3, 12), np.int32)), bias, 2), "qkv"),
                            ((_dev(np.ones((6, 12), np.float32)), bias, 2), "qkv"),
                            ((qkv, _dev(np.ones(12, np.float16)), 2), "qkvBias"),
                            ((qkv, _dev(np.ones(6, np.float32)), 2), "qkvBias"),
                            ((qkv, bias, 0), "numHeads"), ((qkv, bias, 3), "numHeads")]:
        error = _refusal(openacl.ops.transform_bias_rescale_qkv, *arguments)
        assert error.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in str(error), error
    outs = [openacl.empty((2, 2, 3, 2), np.float32) for _ in range(3)]
    assert _refusal(aclnn.transform_bias_rescale_qkv_get_workspace_size, qkv, bias, 2,
                    openacl.empty((2, 2, 3, 2), np.float16), *outs[1:]).code == \
        ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.transform_bias_rescale_qkv_get_workspace_size, qkv, bias, 2,
                    openacl.empty((2, 3, 2, 2), np.float32), *outs[1:]).code == \
        ACLNN_ERR_PARAM_INVALID
    assert _refusal(aclnn.transform_bias_rescale_qkv_get_workspace_size, qkv, None, 2,
                    *outs).code == ACLNN_ERR_PARAM_NULLPTR
