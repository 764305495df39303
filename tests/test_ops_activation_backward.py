"""Activation Backward operators against torch.autograd, with CANN's precision standard.

Each golden is the gradient torch.autograd computes through the forward in float64, rounded
once to the output dtype; bad arguments give AclError with CANN's codes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, assert_close, from_torch, random_array, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from test_ops_activation import _clipped_reference, _situ_reference

HALF_FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32)]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _grad(forward, x: np.ndarray, g: np.ndarray, dtype) -> np.ndarray:
    """d forward(x) / dx applied to g, by autograd in float64, rounded to ``dtype``."""
    wide = torch.from_numpy(np.asarray(x, np.float64)).requires_grad_(True)
    (result,) = torch.autograd.grad(forward(wide), wide,
                                    torch.from_numpy(np.asarray(g, np.float64)))
    return from_torch(result.to(to_torch(np.zeros(1, dtype)).dtype))


def _pair(shape, dtype, seed, low=-5.0, high=5.0):
    rng = np.random.default_rng(seed)
    return random_array(shape, dtype, rng, low, high), random_array(shape, dtype, rng, -2, 2)


# op name -> (one-shot call(g, x), torch forward of x)
FROM_INPUT = {
    "gelu_backward": (lambda g, x: openacl.ops.gelu_backward(g, x), F.gelu),
    "gelu_backward_v2_none": (lambda g, x: openacl.ops.gelu_backward_v2(g, x, "none"), F.gelu),
    "gelu_backward_v2_tanh": (lambda g, x: openacl.ops.gelu_backward_v2(g, x, "tanh"),
                              lambda t: F.gelu(t, approximate="tanh")),
    "fast_gelu_backward": (lambda g, x: openacl.ops.fast_gelu_backward(g, x),
                           lambda t: t * torch.sigmoid(1.702 * t)),
    "silu_backward": (lambda g, x: openacl.ops.silu_backward(g, x), F.silu),
    "swish_backward": (lambda g, x: openacl.ops.swish_backward(g, x, 1.5),
                       lambda t: t * torch.sigmoid(1.5 * t)),
    "swish_backward_null_beta": (lambda g, x: openacl.ops.swish_backward(g, x, None), F.silu),
    "softplus_backward": (lambda g, x: openacl.ops.softplus_backward(g, x, 2.0, 3.0),
                          lambda t: F.softplus(t, 2.0, 3.0)),
    "softshrink_backward": (lambda g, x: openacl.ops.softshrink_backward(g, x, 1.5),
                            lambda t: F.softshrink(t, 1.5)),
    "threshold_backward": (lambda g, x: openacl.ops.threshold_backward(g, x, 0.5),
                           lambda t: F.threshold(t, 0.5, -2.0)),
    "leaky_relu_backward": (lambda g, x: openacl.ops.leaky_relu_backward(g, x, 0.2, False),
                            lambda t: F.leaky_relu(t, 0.2)),
    "elu_backward": (lambda g, x: openacl.ops.elu_backward(g, 0.7, 1.3, 0.9, False, x),
                     lambda t: torch.ops.aten.elu(t, 0.7, 1.3, 0.9)),
    "log_sigmoid_backward": (lambda g, x: openacl.ops.log_sigmoid_backward(g, x, x),
                             F.logsigmoid),
    "mish_backward": (lambda g, x: openacl.ops.mish_backward(g, x), F.mish),
    "hardswish_backward": (lambda g, x: openacl.ops.hardswish_backward(g, x), F.hardswish),
    "hardtanh_backward": (lambda g, x: openacl.ops.hardtanh_backward(g, x, -1.5, 2.0),
                          lambda t: F.hardtanh(t, -1.5, 2.0)),
    "hardswish_backward_v2": (lambda g, x: openacl.ops.hardswish_backward_v2(g, x),
                              F.hardswish),
    "hardsigmoid_backward": (lambda g, x: openacl.ops.hardsigmoid_backward(g, x),
                             F.hardsigmoid),
    "hardshrink_backward": (lambda g, x: openacl.ops.hardshrink_backward(g, x, 1.5),
                            lambda t: F.hardshrink(t, 1.5)),
}


@pytest.mark.parametrize("name", sorted(FROM_INPUT))
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_backward_from_input_matches_autograd(name, dtype):
    run, forward = FROM_INPUT[name]
    x, g = _pair((4, 9), dtype, 1)
    assert_close(run(_dev(g), _dev(x)).numpy(), _grad(forward, x, g, dtype), f"{name} {dtype}")


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# op name -> (one-shot call(g, y), torch forward giving y, aten's backward of (g, y)): the
# operators take the forward's output y, which is rounded to the dtype; their golden is
# autograd's own backward formula (the aten function autograd calls) at that rounded y
FROM_OUTPUT = {
    "sigmoid_backward": (lambda g, y: openacl.ops.sigmoid_backward(g, y), torch.sigmoid,
                         torch.ops.aten.sigmoid_backward),
    "tanh_backward": (lambda g, y: openacl.ops.tanh_backward(g, y), torch.tanh,
                      torch.ops.aten.tanh_backward),
    "selu_backward": (lambda g, y: openacl.ops.selu_backward(g, y), torch.selu,
                      lambda g, y: torch.ops.aten.elu_backward(g, SELU_ALPHA, SELU_SCALE, 1.0,
                                                               True, y)),
    "elu_backward_result": (lambda g, y: openacl.ops.elu_backward(g, 0.7, 1.3, 0.9, True, y),
                            lambda t: torch.ops.aten.elu(t, 0.7, 1.3, 0.9),
                            lambda g, y: torch.ops.aten.elu_backward(g, 0.7, 1.3, 0.9, True,
                                                                     y)),
    "leaky_relu_backward_result": (
        lambda g, y: openacl.ops.leaky_relu_backward(g, y, 0.2, True),
        lambda t: F.leaky_relu(t, 0.2),
        lambda g, y: torch.ops.aten.leaky_relu_backward(g, y, 0.2, True)),
}


def _rounded_output(forward, x: np.ndarray) -> np.ndarray:
    return from_torch(forward(to_torch(x).double()).to(to_torch(x).dtype))


@pytest.mark.parametrize("name", sorted(FROM_OUTPUT))
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_backward_from_output_matches_autograd(name, dtype):
    run, forward, backward = FROM_OUTPUT[name]
    x, g = _pair((3, 11), dtype, 2, -3, 3)
    y = _rounded_output(forward, x)
    wide = [torch.from_numpy(np.asarray(a, np.float64)) for a in (g, y)]
    golden = from_torch(backward(*wide).to(to_torch(x).dtype))
    assert_close(run(_dev(g), _dev(y)).numpy(), golden, f"{name} {dtype}")
    if dtype == np.float32:  # the formula is autograd's: the same at the exact output
        exact = torch.from_numpy(np.asarray(x, np.float64))
        assert torch.allclose(backward(wide[0], forward(exact)),
                              torch.from_numpy(_grad(forward, x, g, np.float64)))


def test_float64_and_broadcast():
    x, g = _pair((3, 1, 5), np.float64, 3)
    grad = random_array((4, 5), np.float64, np.random.default_rng(4))
    result = openacl.ops.gelu_backward(_dev(grad), _dev(x)).numpy()
    wide = torch.from_numpy(x).requires_grad_(True)
    F.gelu(wide).expand(3, 4, 5).backward(torch.from_numpy(grad).expand(3, 4, 5))
    golden = torch.ops.aten.gelu_backward(torch.from_numpy(grad), torch.from_numpy(x))
    assert result.shape == (3, 4, 5)
    assert_close(result, golden.numpy())
    y = np.tanh(x)
    assert_close(openacl.ops.sigmoid_backward(_dev(g), _dev(y)).numpy(),
                 torch.ops.aten.sigmoid_backward(torch.from_numpy(g),
                                                 torch.from_numpy(y)).numpy())


def test_sigmoid_backward_complex():
    g = random_array((6,), np.complex64, np.random.default_rng(5), -1, 1)
    y = random_array((6,), np.complex64, np.random.default_rng(6), -1, 1)
    golden = torch.ops.aten.sigmoid_backward(to_torch(g).to(torch.complex128),
                                             to_torch(y).to(torch.complex128))
    assert_close(openacl.ops.sigmoid_backward(_dev(g), _dev(y)).numpy(),
                 golden.to(torch.complex64).numpy())


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8], ids=str)
def test_threshold_backward_integers_exact(dtype):
    x, g = _pair((5, 6), dtype, 7, -50, 50)
    golden = torch.ops.aten.threshold_backward(to_torch(g), to_torch(x), 3)
    np.testing.assert_array_equal(openacl.ops.threshold_backward(_dev(g), _dev(x), 3).numpy(),
                                  golden.numpy())


SOFTMAX_BACKWARD = {"softmax": torch.ops.aten._softmax_backward_data,
                    "log_softmax": torch.ops.aten._log_softmax_backward_data}


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_backward_matches_autograd(name, dtype, dim):
    x, g = _pair((3, 4, 6), dtype, 8, -3, 3)
    forward = getattr(torch, name)
    y = _rounded_output(lambda t: forward(t, dim), x)
    wide = [torch.from_numpy(np.asarray(a, np.float64)) for a in (g, y)]
    golden = SOFTMAX_BACKWARD[name](*wide, dim, torch.float64)
    run = getattr(openacl.ops, f"{name}_backward")
    assert_close(run(_dev(g), _dev(y), dim).numpy(),
                 from_torch(golden.to(to_torch(x).dtype)), f"{name} {dim} {dtype}")
    if dtype == np.float32:  # aten's formula is autograd's
        exact = forward(torch.from_numpy(np.asarray(x, np.float64)), dim)
        assert torch.allclose(SOFTMAX_BACKWARD[name](wide[0], exact, dim, torch.float64),
                              torch.from_numpy(_grad(lambda t: forward(t, dim), x, g,
                                                     np.float64)))


@pytest.mark.parametrize("shape,weight_shape", [((2, 3, 4), (3,)), ((2, 3, 4, 5), (1,)),
                                                ((6,), (1,)), ((2, 4), (4,))])
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_prelu_backward_matches_autograd(shape, weight_shape, dtype):
    x, g = _pair(shape, dtype, 9)
    w = random_array(weight_shape, dtype, np.random.default_rng(10), 0.1, 1)
    grad_input, grad_weight = openacl.ops.prelu_backward(_dev(g), _dev(x), _dev(w))
    tx = torch.from_numpy(np.asarray(x, np.float64)).requires_grad_(True)
    tw = torch.from_numpy(np.asarray(w, np.float64)).requires_grad_(True)
    torch.prelu(tx, tw).backward(torch.from_numpy(np.asarray(g, np.float64)))
    torch_dtype = to_torch(np.zeros(1, dtype)).dtype
    assert_close(grad_input.numpy(), from_torch(tx.grad.to(torch_dtype)), "gradInput")
    assert_close(grad_weight.numpy(), from_torch(tw.grad.to(torch_dtype)), "gradWeight")


def _gelu_gated(x, dim, approximate, left):
    first, second = x.chunk(2, dim)
    activated, linear = (first, second) if left else (second, first)
    gelu = F.gelu(activated, approximate="tanh" if approximate else "none")
    return gelu * linear, gelu


@pytest.mark.parametrize("approximate", [0, 1])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_ge_glu_backward_matches_autograd(approximate, left, dtype):
    dim = 1
    x = random_array((3, 8, 5), dtype, np.random.default_rng(11), -3, 3)
    g = random_array((3, 4, 5), dtype, np.random.default_rng(12), -2, 2)
    _, gelu = openacl.ops.ge_glu_v3(_dev(x), dim, approximate, left)
    result = openacl.ops.ge_glu_v3_backward(_dev(g), _dev(x), gelu, dim, approximate, left)
    golden = _grad(lambda t: _gelu_gated(t, dim, approximate, left)[0], x, g, dtype)
    assert_close(result.numpy(), golden, f"GeGluV3Backward {approximate} {left}")
    if not left:
        result = openacl.ops.ge_glu_backward(_dev(g), _dev(x), gelu, dim, approximate)
        assert_close(result.numpy(), golden, f"GeGluBackward {approximate}")


@pytest.mark.parametrize("linear_beta", [0.0, 2.5])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_situ_glu_grad_matches_autograd(linear_beta, left, dtype):
    x = random_array((2, 6, 3), dtype, np.random.default_rng(13), -3, 3)
    g = random_array((2, 3, 3), dtype, np.random.default_rng(14), -2, 2)
    result = openacl.ops.situ_glu_grad(_dev(g), _dev(x), 1, 1.5, linear_beta, left)
    golden = _grad(lambda t: _situ_reference(t, 1, 1.5, linear_beta, left), x, g, dtype)
    assert_close(result.numpy(), golden, f"SituGluGrad {linear_beta} {left}")


def test_situ_glu_grad_keeps_cancelling_gradients_accurate():
    """For a negative gate the two terms of d gate cancel; in float32 that left 1e-3
    relative errors on small gradients (CANN's ATK SituGluGrad cases 10-12). Every element
    must be within float32's own rounding of the float64 gradient."""
    rng = np.random.default_rng(10)
    x = rng.uniform(-5, 5, (64, 256)).astype(np.float32)
    g = rng.uniform(-5, 5, (64, 128)).astype(np.float32)
    result = openacl.ops.situ_glu_grad(_dev(g), _dev(x), -1, 0.37, 0.0, True).numpy()
    golden = _grad(lambda t: _situ_reference(t, -1, 0.37, 0.0, True), x, g, np.float64)
    np.testing.assert_allclose(result, golden.astype(np.float32), rtol=2e-6, atol=1e-30)


def test_empty_tensors():
    empty = _dev(np.zeros((0, 3), np.float32))
    assert openacl.ops.silu_backward(empty, empty).numpy().shape == (0, 3)
    assert openacl.ops.softmax_backward(empty, empty, 1).numpy().shape == (0, 3)


# -- phase-1 errors -----------------------------------------------------------------------------
def _raises(code, argument, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    assert f"'{argument}'" in info.value.message, info.value.message


def test_phase_one_errors():
    x = _dev(np.ones((2, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    ints = _dev(np.ones((2, 4), np.int32))
    half = _dev(np.ones((2, 4), np.float16))
    _raises(ACLNN_ERR_PARAM_NULLPTR, "gradOutput", aclnn.gelu_backward_get_workspace_size,
            None, x, out)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "gradInput", aclnn.silu_backward_get_workspace_size,
            x, x, None)
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.gelu_backward_get_workspace_size, x, ints,
            out)
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.silu_backward_get_workspace_size, x, half,
            out)  # dtypes must match
    _raises(ACLNN_ERR_PARAM_INVALID, "gradInput", aclnn.silu_backward_get_workspace_size, x,
            x, openacl.empty((4, 2), np.float32))
    _raises(ACLNN_ERR_PARAM_INVALID, "approximate",
            aclnn.gelu_backward_v2_get_workspace_size, x, x, "erf", out)
    _raises(ACLNN_ERR_PARAM_INVALID, "lambd", aclnn.softshrink_backward_get_workspace_size,
            x, x, openacl.create_scalar(-1.0, openacl.ACL_FLOAT), out)
    _raises(ACLNN_ERR_PARAM_INVALID, "negativeSlope",
            aclnn.leaky_relu_backward_get_workspace_size, x, x,
            openacl.create_scalar(-0.1, openacl.ACL_FLOAT), True, out)
    one = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
    _raises(ACLNN_ERR_PARAM_INVALID, "alpha", aclnn.elu_backward_get_workspace_size, x,
            openacl.create_scalar(-1.0, openacl.ACL_FLOAT), one, one, True, x, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.softmax_backward_get_workspace_size, x, x, 2,
            out)
    _raises(ACLNN_ERR_PARAM_INVALID, "weight", aclnn.prelu_backward_get_workspace_size,
            _dev(np.ones((2, 3, 4), np.float32)), _dev(np.ones((2, 3, 4), np.float32)),
            _dev(np.ones(2, np.float32)), openacl.empty((2, 3, 4), np.float32),
            openacl.empty((2,), np.float32))
    _raises(ACLNN_ERR_PARAM_INVALID, "gradOutput", aclnn.ge_glu_backward_get_workspace_size,
            x, x, x, -1, 1, out)  # gradOutput must be self halved
    _raises(ACLNN_ERR_PARAM_INVALID, "approximate", aclnn.ge_glu_backward_get_workspace_size,
            _dev(np.ones((2, 2), np.float32)), x, _dev(np.ones((2, 2), np.float32)), -1, 3, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "gradOut", aclnn.glu_backward_get_workspace_size,
            x, x, -1, out)  # gradOut must be self halved
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.hardswish_backward_get_workspace_size,
            x, _dev(np.ones((2, 4), np.float16)), out)
    _raises(ACLNN_ERR_PARAM_INVALID, "x", aclnn.situ_glu_grad_get_workspace_size,
            _dev(np.ones((2, 2), np.float32)), _dev(np.ones((2, 5), np.float32)), -1, 1.0,
            0.0, True, openacl.empty((2, 5), np.float32))  # odd split


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
def test_large_inputs_go_chunk_by_chunk(dtype):
    # over ELEMENTWISE_CHUNK elements, contiguous and of one shape: evaluated in chunks
    x, g = _pair((3, 40_001), dtype, 15, -8, 8)
    wide = [torch.from_numpy(np.asarray(a, np.float64)) for a in (g, x)]
    torch_dtype = to_torch(x).dtype
    for run, reference in (
            (openacl.ops.gelu_backward, torch.ops.aten.gelu_backward),
            (openacl.ops.silu_backward, torch.ops.aten.silu_backward),
            (lambda a, b: openacl.ops.threshold_backward(a, b, 0.5),
             lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.5))):
        golden = from_torch(reference(*wide).to(torch_dtype))
        assert_close(run(_dev(g), _dev(x)).numpy(), golden, f"{reference} {dtype}")


@pytest.mark.parametrize("dtype", HALF_FLOATS + [np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize("dim", [0, -1])
def test_glu_and_swi_glu_backward_match_autograd(dtype, dim):
    x = random_array((4, 6), dtype, np.random.default_rng(16), -4, 4)
    g = random_array((2, 6) if dim == 0 else (4, 3), dtype, np.random.default_rng(17), -2, 2)
    golden = _grad(lambda t: F.glu(t, dim), x, g, dtype)
    assert_close(openacl.ops.glu_backward(_dev(g), _dev(x), dim).numpy(), golden, "Glu")
    if dtype != np.float64:
        golden = _grad(lambda t: F.silu(t.chunk(2, dim)[0]) * t.chunk(2, dim)[1], x, g, dtype)
        assert_close(openacl.ops.swi_glu_grad(_dev(g), _dev(x), dim).numpy(), golden, "SwiGlu")


def test_mish_derivative_next_to_its_root():
    # mish' crosses 0 near x = -1.19: recomputed in float64 there (float32 would cancel)
    x = np.linspace(-1.3, -1.1, 20_001).astype(np.float32)
    g = np.ones_like(x)
    assert_close(openacl.ops.mish_backward(_dev(g), _dev(x)).numpy(),
                 _grad(F.mish, x, g, np.float32))



@pytest.mark.parametrize("mask_shape", [(2, 3, 4, 16), (1, 3, 4, 16), (1, 1, 4, 16)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_scaled_masked_softmax_backward_matches_autograd(mask_shape, dtype):
    rng = np.random.default_rng(18)
    x = random_array((2, 3, 4, 16), dtype, rng, -3, 3)
    mask = rng.random(mask_shape) < 0.3
    forward = openacl.ops.scaled_masked_softmax(_dev(x), _dev(mask), 0.5, False)
    y, g = forward.numpy(), random_array((2, 3, 4, 16), dtype, rng, -2, 2)
    result = openacl.ops.scaled_masked_softmax_backward(_dev(g), _dev(y), _dev(mask), 0.5,
                                                        False)
    wide_y = torch.from_numpy(np.asarray(y, np.float64))
    wide_g = torch.from_numpy(np.asarray(g, np.float64))
    golden = torch.ops.aten._softmax_backward_data(wide_g, wide_y, -1, torch.float64) * 0.5
    golden = golden.masked_fill(torch.from_numpy(np.broadcast_to(mask, x.shape).copy()), 0.0)
    assert_close(result.numpy(), from_torch(golden.to(to_torch(x).dtype)), str(mask_shape))
    if dtype == np.float32:  # the formula is autograd's through the forward
        masks = torch.from_numpy(np.broadcast_to(mask, x.shape).copy())
        exact = _grad(lambda t: torch.softmax((t * 0.5).masked_fill(masks, -10000.0), -1), x,
                      g, np.float64)
        exact[np.broadcast_to(mask, x.shape)] = 0.0  # (autograd: ~0 there, CANN: exactly 0)
        assert np.allclose(golden.numpy(), exact, atol=1e-5)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("groups", [None, (1, 2)], ids=str)
@pytest.mark.parametrize("dtype", HALF_FLOATS, ids=str)
def test_clipped_swiglu_grad_matches_autograd(interleaved, groups, dtype):
    x = random_array((5, 4, 6), dtype, np.random.default_rng(19), -9, 9)
    g = random_array((5, 2, 6), dtype, np.random.default_rng(20), -2, 2)
    index = None if groups is None else np.array(groups, np.int64)
    result = openacl.ops.clipped_swiglu_grad(_dev(g), _dev(x), None if index is None else
                                             _dev(index), 1, 1.702, 4.0, 1.0, interleaved)
    groups_t = None if index is None else torch.from_numpy(index)
    golden = _grad(lambda t: _clipped_reference(t, groups_t, 1, 1.702, 4.0, 1.0, interleaved),
                   x, g, dtype)
    assert_close(result.numpy(), golden, f"ClippedSwigluGrad {interleaved} {groups}")


def test_hardtanh_backward_counts_its_ends_in():
    x = np.array([-1.0, 1.0, 0.5, 1.5, -2.0], np.float32)
    g = np.full(5, 3.0, np.float32)
    result = openacl.ops.hardtanh_backward(_dev(g), _dev(x), -1.0, 1.0).numpy()
    np.testing.assert_array_equal(result, [3.0, 3.0, 3.0, 0.0, 0.0])  # CANN's doc, not torch's
