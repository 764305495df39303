"""Activation operators against PyTorch CPU, with CANN's precision standard.

Goldens are torch's results computed in float64 and rounded to the input's dtype, as CANN's
golden data are computed at higher precision: torch's own float16/bfloat16 log_softmax and
its vectorized float32 erf-form GELU are less accurate than CANN's standard allows (MARE
0.09 and 0.003 against the float64 result), while ours stay within it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import FLOATS, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from openacl.ops.activation import ELEMENTWISE_CHUNK

# every test on both kernel implementations: the C extension's and numpy's
pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


# one-shot name -> (openacl call on a device tensor, torch reference)
ELEMENTWISE = {
    "relu": (lambda t: openacl.ops.relu(t), torch.relu),
    "gelu": (lambda t: openacl.ops.gelu(t), lambda x: F.gelu(x, approximate="tanh")),
    "gelu_v2_none": (lambda t: openacl.ops.gelu_v2(t, 0), lambda x: F.gelu(x)),
    "gelu_v2_tanh": (lambda t: openacl.ops.gelu_v2(t, 1),
                     lambda x: F.gelu(x, approximate="tanh")),
    "silu": (lambda t: openacl.ops.silu(t), F.silu),
    "sigmoid": (lambda t: openacl.ops.sigmoid(t), torch.sigmoid),
    "hardsigmoid": (lambda t: openacl.ops.hardsigmoid(t), F.hardsigmoid),
    "hardswish": (lambda t: openacl.ops.hardswish(t), F.hardswish),
    "mish": (lambda t: openacl.ops.mish(t), F.mish),
    "leaky_relu": (lambda t: openacl.ops.leaky_relu(t, 0.2),
                   lambda x: F.leaky_relu(x, 0.2)),
    "softplus": (lambda t: openacl.ops.softplus(t, 2.0, 3.0),
                 lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
    "elu": (lambda t: openacl.ops.elu(t, 0.5, 2.0, 1.5),
            lambda x: torch.ops.aten.elu(x, 0.5, 2.0, 1.5)),
    "selu": (lambda t: openacl.ops.selu(t), torch.selu),
    "celu": (lambda t: openacl.ops.celu(t, 1.5), lambda x: F.celu(x, 1.5)),
    "celu_negative_alpha": (lambda t: openacl.ops.celu(t, -2.0), lambda x: F.celu(x, -2.0)),
    "swish": (lambda t: openacl.ops.swish(t, 1.7), lambda x: x * torch.sigmoid(1.7 * x)),
    "swish_null_beta": (lambda t: openacl.ops.swish(t, None), F.silu),
    "fast_gelu": (lambda t: openacl.ops.fast_gelu(t), lambda x: x / (1 + torch.exp(-1.702 * x))),
    "squared_relu": (lambda t: openacl.ops.squared_relu(t), lambda x: torch.relu(x) ** 2),
    "log_sigmoid": (lambda t: openacl.ops.log_sigmoid(t), F.logsigmoid),
    "softshrink": (lambda t: openacl.ops.softshrink(t, 1.5), lambda x: F.softshrink(x, 1.5)),
    "hardshrink": (lambda t: openacl.ops.hardshrink(t, 1.5), lambda x: F.hardshrink(x, 1.5)),
    "threshold": (lambda t: openacl.ops.threshold(t, 0.5, -3.0),
                  lambda x: F.threshold(x, 0.5, -3.0)),
    "shrink": (lambda t: openacl.ops.shrink(t, 1.5, 0.25),
               lambda x: torch.where(x > 1.5, x - 0.25, torch.where(x < -1.5, x + 0.25,
                                                                      x * 0))),
}


def _golden(reference, array):
    """torch's result computed in float64 (complex128), rounded to the input's dtype."""
    tensor = to_torch(array)
    wide = torch.complex128 if tensor.dtype.is_complex else torch.float64
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        return from_torch(reference(tensor.to(wide)).to(tensor.dtype))
    return from_torch(reference(tensor))


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_elementwise_matches_torch(name, dtype):
    run, reference = ELEMENTWISE[name]
    a = random_array((3, 7), dtype, np.random.default_rng(11), -6, 6)
    assert_close(run(_dev(a)).numpy(), _golden(reference, a), f"{name} {dtype}")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_nan_inf_and_extremes(name):
    run, reference = ELEMENTWISE[name]
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e4, -1e4, 30.0, -30.0, -100.0, 100.0],
                 np.float32)
    if name == "gelu_v2_none":
        # torch's erf-form kernel gives NaN for +inf and -inf (inf * 0); we give the limits,
        # inf and 0. Every other value must agree.
        limits = openacl.ops.gelu_v2(_dev(np.array([np.inf, -np.inf], np.float32)), 0).numpy()
        np.testing.assert_array_equal(limits, [np.inf, 0.0])
        a = a[np.isfinite(a) | np.isnan(a)]
    with np.errstate(all="ignore"):
        golden = _golden(reference, a)
    assert_close(run(_dev(a)).numpy(), golden, name)


def test_sigmoid_family_large_magnitudes():
    a = np.array([-1e30, -1000.0, -88.0, 88.0, 1000.0, 1e30], np.float32)
    for name in ("sigmoid", "silu", "softplus", "mish", "gelu", "gelu_v2_none"):
        run, reference = ELEMENTWISE[name]
        assert_close(run(_dev(a)).numpy(), _golden(reference, a), name)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64], ids=str)
def test_relu_integers_exact(dtype):
    a = random_array((4, 5), dtype, np.random.default_rng(2), -50, 50)
    assert_close(openacl.ops.relu(_dev(a)).numpy(), from_torch(torch.relu(to_torch(a))))


def test_hardsigmoid_int32_truncates_float_result():
    # CANN lists INT32 for Hardsigmoid (output dtype = input dtype); torch has no int kernel:
    # the value is the float result truncated into int32.
    a = np.arange(-5, 6, dtype=np.int32)
    golden = F.hardsigmoid(torch.from_numpy(a).float()).to(torch.int32).numpy()
    np.testing.assert_array_equal(openacl.ops.hardsigmoid(_dev(a)).numpy(), golden)


def test_sigmoid_complex():
    a = random_array((6,), np.complex64, np.random.default_rng(3), -2, 2)
    assert_close(openacl.ops.sigmoid(_dev(a)).numpy(), from_torch(torch.sigmoid(to_torch(a))))


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "mish", "softmax"])
def test_integer_input_refused(name):
    a = _dev(np.ones((2, 2), np.int16 if name == "relu" else np.int32))
    args = (a, 0) if name == "softmax" else (a,)
    with pytest.raises(AclError) as info:
        getattr(openacl.ops, name)(*args)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'self'" in info.value.message


# -- Prelu --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,weight_size", [((2, 3, 4, 4), 3), ((2, 3, 4), 1), ((5,), 1),
                                               ((), 1), ((4, 3), 3)])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_prelu_matches_torch(shape, weight_size, dtype):
    a = random_array(shape, dtype, np.random.default_rng(4))
    w = random_array((weight_size,), dtype, np.random.default_rng(5), 0, 1)
    golden = _golden(lambda x: torch.prelu(x, to_torch(w).to(x.dtype)), a)
    assert_close(openacl.ops.prelu(_dev(a), _dev(w)).numpy(), golden, f"prelu {shape}")


def test_prelu_weight_count_checked():
    with pytest.raises(AclError) as info:
        openacl.ops.prelu(_dev(np.ones((2, 3, 4), np.float32)), _dev(np.ones(4, np.float32)))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'weight'" in info.value.message
    with pytest.raises(AclError) as info:  # a 1-D input has one channel, as in torch
        openacl.ops.prelu(_dev(np.ones(4, np.float32)), _dev(np.ones(4, np.float32)))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID


# -- Softmax / LogSoftmax -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_every_dim(name, dtype):
    a = random_array((2, 3, 5), dtype, np.random.default_rng(6), -8, 8)
    for dim in (0, 1, 2, -1, -3):
        golden = _golden(lambda x, d=dim: getattr(torch, name)(x, d), a)
        assert_close(getattr(openacl.ops, name)(_dev(a), dim).numpy(), golden,
                     f"{name} dim={dim} {dtype}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_stability_nan_inf_empty_zero_dim(name):
    fn, reference = getattr(openacl.ops, name), getattr(torch, name)
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1e30, 0.0]], np.float32)
    assert_close(fn(_dev(big), 1).numpy(), from_torch(reference(to_torch(big), 1)))
    special = np.array([[np.nan, 1.0, 2.0], [np.inf, 1.0, 0.0], [-np.inf, -np.inf, -np.inf],
                        [-np.inf, 0.0, 1.0]], np.float32)
    assert_close(fn(_dev(special), 1).numpy(), from_torch(reference(to_torch(special), 1)))
    zero_dim = np.array(3.0, np.float32)
    assert_close(fn(_dev(zero_dim), 0).numpy(), from_torch(reference(to_torch(zero_dim), 0)))
    assert_close(fn(_dev(zero_dim), -1).numpy(), from_torch(reference(to_torch(zero_dim), -1)))
    for shape, dim in (((0, 4), 1), ((3, 0), 1), ((0,), 0)):
        assert fn(_dev(np.zeros(shape, np.float32)), dim).numpy().shape == shape


def test_softmax_bound_kernel_reads_new_values():
    """The float32 row kernel, planned once on a bound kernel's views, reads the values the
    input holds at each run."""
    from openacl.ops.executor import find_executor

    rng = np.random.default_rng(3)
    a = rng.uniform(-4, 4, (3, 7)).astype(np.float32)
    x, out = openacl.to_device(a), openacl.empty((3, 7), np.float32)
    ws, exe = aclnn.softmax_get_workspace_size(x, -1, out)
    run = find_executor(exe).bound_kernel(None, frozenset())
    views = run.args[0]
    if type(views["out"]) is not np.ndarray:
        pytest.skip("a device backend: no host views")
    for _ in range(3):
        run()
        assert_close(out.numpy(), from_torch(torch.softmax(to_torch(a).double(), -1).float()))
        a = rng.uniform(-4, 4, a.shape).astype(np.float32)
        views["self"][...] = a


def test_softmax_out_dtype_cast():
    a = random_array((3, 4), np.float32)
    out = openacl.empty((3, 4), np.float16)
    x = _dev(a)
    ws, exe = aclnn.softmax_get_workspace_size(x, 1, out)
    aclnn.softmax(0, ws, exe, 0)
    assert_close(out.numpy(), from_torch(torch.softmax(to_torch(a), 1).half()))


# -- in-place forms -----------------------------------------------------------------------------
INPLACE = {
    "inplace_relu": ((), torch.relu),
    "inplace_sigmoid": ((), torch.sigmoid),
    "inplace_hardsigmoid": ((), F.hardsigmoid),
    "inplace_hardswish": ((), F.hardswish),
    "inplace_mish": ((), F.mish),
    "inplace_leaky_relu": ((0.3,), lambda x: F.leaky_relu(x, 0.3)),
    "inplace_elu": ((1.5, 1.0, 1.0), lambda x: F.elu(x, 1.5)),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), FLOATS[1]], ids=str)
def test_inplace_variants(name, dtype):
    extra, reference = INPLACE[name]
    a = random_array((4, 5), dtype, np.random.default_rng(7), -5, 5)
    target = _dev(a)
    result = getattr(openacl.ops, name)(target, *extra)
    assert result is target
    assert_close(target.numpy(), _golden(reference, a), name)


def test_inplace_names_follow_cann():
    assert list(aclnn.inplace_hardsigmoid_get_workspace_size.__signature__.parameters) == [
        "self"]
    assert list(aclnn.inplace_relu_get_workspace_size.__signature__.parameters) == ["selfRef"]
    assert list(aclnn.gelu_v2_get_workspace_size.__signature__.parameters) == [
        "x", "approximate", "y"]
    assert list(aclnn.elu_get_workspace_size.__signature__.parameters) == [
        "self", "alpha", "scale", "inputScale", "out"]
    for absent in ("inplace_gelu", "inplace_silu", "inplace_softplus", "inplace_softmax"):
        assert not hasattr(aclnn, f"{absent}_get_workspace_size")


def test_inplace_on_strided_view():
    a = random_array((3, 4), np.float32, np.random.default_rng(8))
    view = strided(a, "step")
    slope = openacl.create_scalar(0.1, openacl.ACL_FLOAT)
    ws, exe = aclnn.inplace_leaky_relu_get_workspace_size(view, slope)
    aclnn.inplace_leaky_relu(0, ws, exe, 0)
    assert_close(view.numpy(), from_torch(F.leaky_relu(to_torch(a), 0.1)))


# -- views, empty, 0-dim ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
@pytest.mark.parametrize("name", ["gelu", "sigmoid", "softmax"])
def test_non_contiguous_input_and_output(kind, name):
    a = random_array((3, 4), np.float32, np.random.default_rng(9))
    source, out = strided(a, kind), strided(np.zeros((3, 4), np.float32), kind)
    if name == "softmax":
        ws, exe = aclnn.softmax_get_workspace_size(source, 0, out)
        aclnn.softmax(0, ws, exe, 0)
        golden = torch.softmax(to_torch(a), 0)
    else:
        ws, exe = getattr(aclnn, f"{name}_get_workspace_size")(source, out)
        getattr(aclnn, name)(0, ws, exe, 0)
        golden = (F.gelu(to_torch(a), approximate="tanh") if name == "gelu"
                  else torch.sigmoid(to_torch(a)))
    assert_close(out.numpy(), from_torch(golden), f"{name} {kind}")


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_empty_and_zero_dim(name):
    run, reference = ELEMENTWISE[name]
    assert run(_dev(np.zeros((0, 3), np.float32))).numpy().shape == (0, 3)
    zero_dim = np.array(-0.75, np.float32)
    result = run(_dev(zero_dim)).numpy()
    assert result.shape == ()
    assert_close(result, _golden(reference, zero_dim), name)


# -- phase-1 errors -----------------------------------------------------------------------------
def _raises(code, argument, fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    if argument:
        assert f"'{argument}'" in info.value.message, info.value.message
    return info.value


def test_phase_one_errors():
    x = _dev(np.ones((2, 3), np.float32))
    out = openacl.empty((2, 3), np.float32)
    slope = openacl.create_scalar(0.1, openacl.ACL_FLOAT)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "self", aclnn.relu_get_workspace_size, None, out)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "out", aclnn.gelu_get_workspace_size, x, None)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "negativeSlope", aclnn.leaky_relu_get_workspace_size,
            x, None, out)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "self", aclnn.inplace_hardsigmoid_get_workspace_size,
            None)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "weight", aclnn.prelu_get_workspace_size, x, None, out)
    # wrong output shape / dtype
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.sigmoid_get_workspace_size, x,
            openacl.empty((3, 2), np.float32))
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.gelu_get_workspace_size, x,
            openacl.empty((2, 3), np.float16))  # Gelu: out dtype must equal self's
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.hardswish_get_workspace_size, x,
            openacl.empty((2, 3), np.int32))  # float result into an int output
    _raises(ACLNN_ERR_PARAM_INVALID, "y", aclnn.gelu_v2_get_workspace_size, x, 0,
            openacl.empty((2, 3), np.float64))
    # attributes
    _raises(ACLNN_ERR_PARAM_INVALID, "approximate", aclnn.gelu_v2_get_workspace_size, x, 2,
            out)
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.softmax_get_workspace_size, x, 2, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.log_softmax_get_workspace_size, x, -3, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.softmax_get_workspace_size, x, 1.5, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.softmax_get_workspace_size, x, None, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "approximate", aclnn.gelu_v2_get_workspace_size, x, None,
            out)
    # dtypes
    ints = _dev(np.ones((2, 3), np.int32))
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.sigmoid_get_workspace_size, ints, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "x", aclnn.gelu_v2_get_workspace_size, ints, 0,
            openacl.empty((2, 3), np.int32))
    _raises(ACLNN_ERR_PARAM_INVALID, "selfRef", aclnn.inplace_elu_get_workspace_size, ints,
            slope, slope, slope)
    complex_scalar = openacl.create_scalar(1 + 1j, openacl.ACL_COMPLEX64)
    _raises(ACLNN_ERR_PARAM_INVALID, "negativeSlope", aclnn.leaky_relu_get_workspace_size,
            x, complex_scalar, out)


CHUNKED = {"relu": torch.relu, "gelu": lambda x: F.gelu(x, approximate="tanh"),
           "gelu_v2": F.gelu,  # the erf form
           "silu": F.silu, "sigmoid": torch.sigmoid, "hardsigmoid": F.hardsigmoid,
           "hardswish": F.hardswish, "mish": F.mish}


@pytest.mark.parametrize("name", sorted(CHUNKED))
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), FLOATS[1]], ids=str)
@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_elementwise_over_many_chunks(name, dtype, inplace):
    # more than two ELEMENTWISE_CHUNKs and a partial one: evaluated chunk by chunk; positive
    # inputs keep every result clear of the precision standard's small-value rule
    size = 2 * ELEMENTWISE_CHUNK + 123
    a = random_array((size,), dtype, np.random.default_rng(5), 0.1, 6).reshape(-1, 1)
    target = _dev(a)
    if inplace and hasattr(openacl.ops, f"inplace_{name}"):
        getattr(openacl.ops, f"inplace_{name}")(target)
        result = target
    else:
        extra = (0,) if name == "gelu_v2" else ()
        result = getattr(openacl.ops, name)(target, *extra)
    assert_close(result.numpy(), _golden(CHUNKED[name], a), f"{name} {dtype}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), FLOATS[1]], ids=str)
def test_softmax_over_row_blocks(name, dtype):
    # last dim of a large contiguous tensor: blocks of ELEMENTWISE_CHUNK // 130 rows, the
    # last one partial
    a = random_array((2, 300, 130), dtype, np.random.default_rng(9), -3, 3)
    golden = _golden(lambda x: getattr(torch, name)(x, -1), a)
    assert_close(getattr(openacl.ops, name)(_dev(a), -1).numpy(), golden, f"{name} {dtype}")


def test_softmax_large_blocks_rows_far_apart_and_specials():
    # over ELEMENTWISE_CHUNK the last-dim softmax goes block by block, shifting a float32
    # block by its own maximum; rows far below it, and blocks with NaN/inf, are redone
    # exactly (each case in its own block of 256 rows of 128)
    rng = np.random.default_rng(21)
    a = rng.normal(0.0, 4.0, (4, 256, 128)).astype(np.float32)
    a[0, ::3] -= 200.0  # rows whose every exp underflows against the block maximum
    a[0, 1::7] -= 30.0  # rows just past the redo threshold
    a[1, 5, 7] = np.nan
    a[2, 9, :] = -np.inf
    a[3, 100, 3] = np.inf
    golden = from_torch(torch.softmax(to_torch(a.astype(np.float64)), -1).float())
    assert_close(openacl.ops.softmax(_dev(a), -1).numpy(), golden, "blocks")
    half, source = openacl.empty(a.shape, np.float16), _dev(a)
    ws, exe = aclnn.softmax_get_workspace_size(source, 2, half)
    aclnn.softmax(0, ws, exe, 0)
    assert_close(half.numpy(), golden.astype(np.float16), "float16 out")
    # out == self: the rows redone exactly still read their own inputs
    ws, exe = aclnn.softmax_get_workspace_size(source, 2, source)
    aclnn.softmax(0, ws, exe, 0)
    assert_close(source.numpy(), golden, "in place")


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "strided-output", "same-tensor"])
def test_gelu_erf_chunks_tails_and_layouts(dtype, layout):
    # float32 writes chunk by chunk straight into y (y may be x itself); other dtypes and
    # layouts go through a computed result: every path agrees with torch's float64 GELU,
    # negative tails included
    a = random_array((3, 40_001), dtype, np.random.default_rng(5), -12, 8)
    golden = from_torch(F.gelu(to_torch(a.astype(np.float64))).to(to_torch(a).dtype))
    source = _dev(a)
    if layout == "contiguous":
        out = openacl.empty(a.shape, dtype)
    elif layout == "strided-output":
        out = strided(np.zeros(a.shape, dtype), "step")
    else:
        out = source
    ws, exe = aclnn.gelu_v2_get_workspace_size(source, 0, out)
    aclnn.gelu_v2(0, ws, exe, 0)
    assert_close(out.numpy(), golden, f"gelu {dtype} {layout}")


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
def test_hardswish_written_into_its_output_over_chunks(inplace):
    # float32 Hardswish writes chunk by chunk straight into the output (or self): both
    # sides of the gate, and its flat parts, against torch in float64
    a = random_array((2, 50_001), np.float32, np.random.default_rng(8), -6, 6)
    golden = from_torch(F.hardswish(to_torch(a.astype(np.float64))).float())
    target = _dev(a)
    if inplace:
        openacl.ops.inplace_hardswish(target)
        result = target
    else:
        result = openacl.ops.hardswish(target)
    assert_close(result.numpy(), golden, f"hardswish {inplace}")


# -- ScaledMaskedSoftmax ------------------------------------------------------------------------
def _scaled_masked_golden(x, mask, scale, dtype):
    scores = torch.from_numpy(np.asarray(x, np.float64)) * scale
    scores = scores.masked_fill(torch.from_numpy(np.array(mask)), -10000.0)  # CANN's fill
    return torch.softmax(scores, -1).numpy().astype(dtype)


@pytest.mark.parametrize("mask_shape", [(2, 3, 8, 40), (2, 1, 8, 40), (1, 3, 8, 40),
                                        (1, 1, 8, 40)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, FLOATS[1]], ids=str)
def test_scaled_masked_softmax_matches_torch(mask_shape, dtype):
    rng = np.random.default_rng(11)
    x = random_array((2, 3, 8, 40), dtype, rng, -6, 6)
    mask = rng.random(mask_shape) < 0.3
    mask[..., 0, :] = True  # a row masked everywhere: uniform, as CANN's -10000 fill gives
    result = openacl.ops.scaled_masked_softmax(_dev(x), _dev(mask), 0.125, False)
    golden = _scaled_masked_golden(x, np.broadcast_to(mask, x.shape), 0.125, np.dtype(dtype))
    assert_close(result.numpy(), golden, f"scaled_masked_softmax {dtype} {mask_shape}")


def test_scaled_masked_softmax_in_place_and_errors():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 2, 4, 16)).astype(np.float32)
    mask = rng.random((1, 1, 4, 16)) < 0.5
    target, m = _dev(x), _dev(mask)
    ws, exe = aclnn.scaled_masked_softmax_get_workspace_size(target, m, 2.0, False, target)
    aclnn.scaled_masked_softmax(0, ws, exe, 0)
    assert_close(target.numpy(), _scaled_masked_golden(x, np.broadcast_to(mask, x.shape), 2.0,
                                                       np.dtype(np.float32)), "in place")
    y = openacl.empty((1, 2, 4, 16), np.float32)
    phase1 = aclnn.scaled_masked_softmax_get_workspace_size
    _raises(ACLNN_ERR_PARAM_NULLPTR, "mask", phase1, target, None, 1.0, False, y)
    _raises(ACLNN_ERR_PARAM_INVALID, "fixTriuMask", phase1, target, m, 1.0, True, y)
    _raises(ACLNN_ERR_PARAM_INVALID, "mask", phase1, target,
            _dev(np.zeros((1, 2, 4, 16), np.float32)), 1.0, False, y)  # not bool
    _raises(ACLNN_ERR_PARAM_INVALID, "mask", phase1, target,
            _dev(np.zeros((1, 3, 4, 16), np.bool_)), 1.0, False, y)  # 3 channels
    _raises(ACLNN_ERR_PARAM_INVALID, "mask", phase1, target,
            _dev(np.zeros((1, 1, 4, 8), np.bool_)), 1.0, False, y)  # last dims differ
    _raises(ACLNN_ERR_PARAM_INVALID, "x", phase1, _dev(np.zeros((2, 4, 16), np.float32)), m,
            1.0, False, openacl.empty((2, 4, 16), np.float32))  # 3 dims
    _raises(ACLNN_ERR_PARAM_INVALID, "x", phase1, _dev(x.astype(np.float64)), m, 1.0, False,
            openacl.empty((1, 2, 4, 16), np.float64))
    _raises(ACLNN_ERR_PARAM_INVALID, "y", phase1, target, m, 1.0, False,
            openacl.empty((1, 2, 4, 16), np.float16))


# -- Softplus past exp's range: inf below the threshold, as CANN's kernel and torch -----------
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"], ids=str)
def test_softplus_overflows_below_a_high_threshold(dtype):
    import ml_dtypes
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    # beta * x = 90 and 100: past float32's exp range (~88.7), but not above threshold 200
    a = np.array([45.0, 50.0, 44.0, 1.0, -60.0], dtype)
    result = openacl.ops.softplus(_dev(a), 2.0, 200.0).numpy()
    golden = from_torch(F.softplus(to_torch(a).float(), beta=2.0, threshold=200.0))
    assert np.isinf(result[:2].astype(np.float32)).all() and np.isinf(golden[:2]).all()
    assert np.isfinite(result[2:].astype(np.float32)).all()
    assert_close(result[2:], golden[2:].astype(dtype))
    # above the threshold x itself comes back
    above = openacl.ops.softplus(_dev(a), 2.0, 80.0).numpy().astype(np.float32)
    np.testing.assert_array_equal(above[:2], a[:2].astype(np.float32))


def test_softplus_nan_threshold_computes_everywhere():
    a = np.array([100.0, 30.0, 0.0, -5.0, np.nan], np.float32)
    result = openacl.ops.softplus(_dev(a), 1.0, float("nan")).numpy()
    golden = from_torch(F.softplus(to_torch(a), beta=1.0, threshold=float("nan")))
    assert np.isinf(result[0]) and np.isinf(golden[0])  # no value exceeds a NaN threshold
    np.testing.assert_allclose(result[1:4], golden[1:4], rtol=1e-6)
    assert np.isnan(result[4])
    # float64 (the CPU reference dtype) overflows where float64's exp does, as torch's
    wide = np.array([700.0, 710.0], np.float64)
    result = openacl.ops.softplus(_dev(wide), 1.0, 1000.0).numpy()
    assert result[0] == pytest.approx(700.0) and np.isinf(result[1])


# -- Erfinv, Selu on integers, Heaviside, AddRelu, in-place forms of the new operators ----------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_erfinv_matches_torch(dtype):
    a = random_array((5, 40), dtype, np.random.default_rng(31), -0.999, 0.999)
    assert_close(openacl.ops.erfinv(_dev(a)).numpy(), _golden(torch.erfinv, a), f"{dtype}")
    edges = np.array([1.0, -1.0, 0.0, 1.5, np.nan, 1 - 2.0 ** -20, -(1 - 2.0 ** -20)], dtype)
    assert_close(openacl.ops.erfinv(_dev(edges)).numpy(), _golden(torch.erfinv, edges))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_], ids=str)
def test_erfinv_of_integers_is_float32(dtype):
    a = np.array([0, 1, 1, 0], dtype) if dtype == np.bool_ else np.array([-1, 0, 1, 2], dtype)
    result = openacl.ops.erfinv(_dev(a)).numpy()
    golden = torch.erfinv(torch.from_numpy(a))
    assert result.dtype == np.float32
    assert_close(result, golden.numpy())


@pytest.mark.parametrize("dtype", [np.int32, np.int8], ids=str)
def test_selu_integers_truncate_the_float_result(dtype):
    a = np.arange(-4, 5, dtype=dtype)
    golden = torch.selu(torch.from_numpy(a).double()).to(torch.int32).numpy().astype(dtype)
    np.testing.assert_array_equal(openacl.ops.selu(_dev(a)).numpy(), golden)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), FLOATS[0], FLOATS[1]], ids=str)
def test_heaviside_broadcasts(dtype):
    rng = np.random.default_rng(32)
    x = np.round(random_array((3, 1, 5), dtype, rng, -2, 2).astype(np.float32)).astype(dtype)
    x[0, 0, 0] = np.nan
    values = random_array((4, 5), dtype, rng)
    golden = torch.heaviside(to_torch(x).double(), to_torch(values).double()).to(
        to_torch(x).dtype)
    assert_close(openacl.ops.heaviside(_dev(x), _dev(values)).numpy(), from_torch(golden))


@pytest.mark.parametrize("dtype", [np.float32, FLOATS[1], np.int32, np.int8, np.uint8,
                                   np.int64], ids=str)
def test_add_relu_matches_torch(dtype):
    rng = np.random.default_rng(33)
    a, b = random_array((4, 6), dtype, rng, -5, 5), random_array((6,), dtype, rng, 0, 5)
    alpha = 2 if np.dtype(dtype).kind in "iu" else 0.5
    wide = torch.float64 if np.dtype(dtype).kind not in "iu" else torch.int64
    golden = torch.relu(to_torch(a).to(wide) + alpha * to_torch(b).to(wide))
    golden = from_torch(golden.to(to_torch(a).dtype))
    result = openacl.ops.add_relu(_dev(a), _dev(b), alpha).numpy()
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(result, golden)
    else:
        assert_close(result, golden)


NEW_INPLACE = {
    "inplace_selu": ((), torch.selu),
    "inplace_celu": ((0.8,), lambda x: F.celu(x, 0.8)),
    "inplace_threshold": ((0.5, 7.0), lambda x: F.threshold(x, 0.5, 7.0)),
    "inplace_erfinv": ((), lambda x: torch.erfinv(x / 6)),
}


@pytest.mark.parametrize("name", sorted(NEW_INPLACE))
def test_new_inplace_variants(name):
    extra, reference = NEW_INPLACE[name]
    a = random_array((4, 5), np.float32, np.random.default_rng(34), -5, 5)
    if name == "inplace_erfinv":
        a = a / np.float32(6)
        reference = torch.erfinv
    target = _dev(a)
    assert getattr(openacl.ops, name)(target, *extra) is target
    assert_close(target.numpy(), _golden(reference, a), name)
    other = _dev(np.ones(5, np.float32))
    target = _dev(a)
    openacl.ops.inplace_add_relu(target, other, -1.0)
    assert_close(target.numpy(), _golden(lambda x: torch.relu(x - 1), a))


def test_log_sigmoid_forward_and_signatures():
    a = random_array((3, 4), np.float32, np.random.default_rng(35), -30, 30)
    out = openacl.empty((3, 4), np.float32)
    buffer = openacl.empty((3, 4), np.float32)
    source = _dev(a)
    ws, exe = aclnn.log_sigmoid_forward_get_workspace_size(source, out, buffer)
    aclnn.log_sigmoid_forward(0, ws, exe, 0)
    assert_close(out.numpy(), _golden(F.logsigmoid, a))
    assert list(aclnn.celu_get_workspace_size.__signature__.parameters) == [
        "self", "alpha", "out"]
    assert list(aclnn.squared_relu_get_workspace_size.__signature__.parameters) == [
        "input", "out"]
    assert list(aclnn.inplace_celu_get_workspace_size.__signature__.parameters) == [
        "selfRef", "alpha"]


def test_new_forward_errors():
    x = _dev(np.ones((2, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    zero = openacl.create_scalar(0.0, openacl.ACL_FLOAT)
    ints = _dev(np.ones((2, 4), np.int32))
    _raises(ACLNN_ERR_PARAM_INVALID, "alpha", aclnn.celu_get_workspace_size, x, zero, out)
    _raises(ACLNN_ERR_PARAM_NULLPTR, "alpha", aclnn.celu_get_workspace_size, x, None, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "lambd", aclnn.softshrink_get_workspace_size, x,
            openacl.create_scalar(-0.5, openacl.ACL_FLOAT), out)
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.swish_get_workspace_size, ints, None,
            openacl.empty((2, 4), np.int32))
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.selu_get_workspace_size, x,
            openacl.empty((2, 4), np.float16))  # Selu: out dtype must equal self's
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.selu_get_workspace_size,
            _dev(np.ones(3, np.int16)), openacl.empty((3,), np.int16))
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.erfinv_get_workspace_size, x,
            openacl.empty((2, 4), np.int32))
    _raises(ACLNN_ERR_PARAM_INVALID, "values", aclnn.heaviside_get_workspace_size, x,
            _dev(np.ones(3, np.float32)), out)  # shapes do not broadcast
    _raises(ACLNN_ERR_PARAM_NULLPTR, "other", aclnn.add_relu_get_workspace_size, x, None,
            zero, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "threshold", aclnn.threshold_get_workspace_size,
            ints, openacl.create_scalar(1 + 1j, openacl.ACL_COMPLEX64), zero, out)


# -- gated activations ----------------------------------------------------------------------
def _gated_golden(fn, a, *args):
    wide = to_torch(a).double()
    results = fn(wide, *args)
    if isinstance(results, tuple):
        return [from_torch(r.to(to_torch(a).dtype)) for r in results]
    return from_torch(results.to(to_torch(a).dtype))


def _situ_reference(x, dim, beta, linear_beta, left):
    dim %= x.dim()
    merged = x.reshape(int(np.prod(x.shape[:dim])), -1)
    first, second = merged.chunk(2, 1)
    gate, up = (first, second) if left else (second, first)
    up = linear_beta * torch.tanh(up / linear_beta) if linear_beta > 0 else up
    shape = list(x.shape)
    shape[dim] //= 2
    return (beta * torch.tanh(gate / beta) * torch.sigmoid(gate) * up).reshape(shape)


def _clipped_reference(x, groups, dim, alpha, limit, bias, interleaved):
    dim %= x.dim()
    merged = x.reshape(int(np.prod(x.shape[:dim])), -1)
    rows = min(int(groups.sum()), merged.shape[0]) if groups is not None else merged.shape[0]
    part = merged[:rows]
    a, b = (part[:, ::2], part[:, 1::2]) if interleaved else part.chunk(2, 1)
    a = a.clamp(max=limit)
    result = torch.zeros(merged.shape[0], merged.shape[1] // 2, dtype=x.dtype)
    result[:rows] = a * torch.sigmoid(alpha * a) * (b.clamp(-limit, limit) + bias)
    shape = list(x.shape)
    shape[dim] //= 2
    return result.reshape(shape)


GATED = {
    "glu": (lambda t: openacl.ops.glu(t, 1), lambda x: F.glu(x, 1)),
    "swi_glu": (lambda t: openacl.ops.swi_glu(t, -1),
                lambda x: F.silu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1]),
    "ge_glu": (lambda t: openacl.ops.ge_glu(t, 0, 0),
               lambda x: (x.chunk(2, 0)[0] * F.gelu(x.chunk(2, 0)[1]),
                          F.gelu(x.chunk(2, 0)[1]))),
    "ge_glu_v3_left_tanh": (
        lambda t: openacl.ops.ge_glu_v3(t, 2, 1, True),
        lambda x: (F.gelu(x.chunk(2, 2)[0], approximate="tanh") * x.chunk(2, 2)[1],
                   F.gelu(x.chunk(2, 2)[0], approximate="tanh"))),
    "gelu_mul_tanh": (lambda t: openacl.ops.gelu_mul(t, "tanh"),
                      lambda x: F.gelu(x.chunk(2, -1)[0], approximate="tanh")
                      * x.chunk(2, -1)[1]),
    "gelu_mul_none": (lambda t: openacl.ops.gelu_mul(t, None),
                      lambda x: F.gelu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1]),
    "situ_glu": (lambda t: openacl.ops.situ_glu(t, 1, 1.5, 2.0, False),
                 lambda x: _situ_reference(x, 1, 1.5, 2.0, False)),
    "situ_glu_plain_up": (lambda t: openacl.ops.situ_glu(t, -1, 0.5, 0.0, True),
                          lambda x: _situ_reference(x, -1, 0.5, 0.0, True)),
    "clipped_swiglu": (lambda t: openacl.ops.clipped_swiglu(t, None, 1, 1.702, 2.0, 1.0, True),
                       lambda x: _clipped_reference(x, None, 1, 1.702, 2.0, 1.0, True)),
    "clipped_swiglu_halves": (
        lambda t: openacl.ops.clipped_swiglu(t, None, -1, 1.5, 3.0, 0.5, False),
        lambda x: _clipped_reference(x, None, -1, 1.5, 3.0, 0.5, False)),
}


@pytest.mark.parametrize("name", sorted(GATED))
@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_gated_matches_torch(name, dtype):
    run, reference = GATED[name]
    a = random_array((4, 6, 8), dtype, np.random.default_rng(36), -4, 4)
    result = run(_dev(a))
    results = [r.numpy() for r in result] if isinstance(result, tuple) else [result.numpy()]
    goldens = _gated_golden(reference, a)
    goldens = goldens if isinstance(goldens, list) else [goldens]
    for ours, golden in zip(results, goldens, strict=True):
        assert_close(ours, golden, f"{name} {dtype}")


def test_glu_float64_and_fatrelu_mul():
    a = random_array((3, 10), np.float64, np.random.default_rng(37))
    assert_close(openacl.ops.glu(_dev(a), -1).numpy(), F.glu(torch.from_numpy(a), -1).numpy())
    for dtype in FLOATS[:3]:
        x = random_array((5, 8), dtype, np.random.default_rng(38))
        limit = np.array([0.25], dtype)
        golden = _gated_golden(lambda t: torch.where(t.chunk(2, -1)[0] < 0.25, 0.0,
                                                     t.chunk(2, -1)[0]) * t.chunk(2, -1)[1], x)
        assert_close(openacl.ops.fatrelu_mul(_dev(x), _dev(limit)).numpy(), golden, str(dtype))


def test_clipped_swiglu_group_index_zeroes_the_rest():
    a = random_array((6, 4, 8), np.float32, np.random.default_rng(39), -9, 9)
    groups = np.array([1, 2], np.int64)
    result = openacl.ops.clipped_swiglu(_dev(a), _dev(groups), 1, 1.702, 7.0, 1.0, True)
    golden = _clipped_reference(torch.from_numpy(a).double(), torch.from_numpy(groups), 1,
                                1.702, 7.0, 1.0, True)
    assert_close(result.numpy(), golden.float().numpy())
    assert not result.numpy()[3:].any()


def test_gated_errors():
    x = _dev(np.ones((2, 5), np.float32))
    even = _dev(np.ones((2, 4), np.float32))
    half = openacl.empty((2, 2), np.float32)
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.glu_get_workspace_size, x, -1,
            openacl.empty((2, 2), np.float32))  # odd split
    _raises(ACLNN_ERR_PARAM_INVALID, "dim", aclnn.glu_get_workspace_size, even, 2, half)
    _raises(ACLNN_ERR_PARAM_INVALID, "out", aclnn.glu_get_workspace_size, even, -1,
            openacl.empty((2, 4), np.float32))
    _raises(ACLNN_ERR_PARAM_NULLPTR, "outGelu", aclnn.ge_glu_get_workspace_size, even, -1, 1,
            half, None)
    _raises(ACLNN_ERR_PARAM_INVALID, "approximate", aclnn.ge_glu_get_workspace_size, even, -1,
            2, half, openacl.empty((2, 2), np.float32))
    _raises(ACLNN_ERR_PARAM_INVALID, "self", aclnn.ge_glu_get_workspace_size,
            _dev(np.ones((2, 4), np.float64)), -1, 1, openacl.empty((2, 2), np.float64),
            openacl.empty((2, 2), np.float64))
    _raises(ACLNN_ERR_PARAM_INVALID, "approximateOptional", aclnn.gelu_mul_get_workspace_size,
            even, "erf", half)
    _raises(ACLNN_ERR_PARAM_INVALID, "input", aclnn.gelu_mul_get_workspace_size,
            _dev(np.ones(4, np.float32)), None, openacl.empty((2,), np.float32))  # 1-d
    _raises(ACLNN_ERR_PARAM_INVALID, "threshold", aclnn.fatrelu_mul_get_workspace_size, even,
            _dev(np.ones(2, np.float32)), half)
    _raises(ACLNN_ERR_PARAM_INVALID, "limit", aclnn.clipped_swiglu_get_workspace_size, even,
            None, -1, 1.0, 0.0, 1.0, True, half)
    _raises(ACLNN_ERR_PARAM_INVALID, "groupIndexOptional",
            aclnn.clipped_swiglu_get_workspace_size, even, _dev(np.ones(2, np.int32)), -1,
            1.0, 7.0, 1.0, True, half)
    _raises(ACLNN_ERR_PARAM_INVALID, "x", aclnn.situ_glu_get_workspace_size, x, -1, 1.0, 0.0,
            True, openacl.empty((2, 2), np.float32))


# -- RReluWithNoise -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_rrelu_with_noise_eval_matches_torch(dtype):
    a = random_array((4, 7), dtype, np.random.default_rng(40), -5, 5)
    noise = _dev(np.zeros((4, 7), dtype))
    result = openacl.ops.r_relu_with_noise(_dev(a), noise, 0.1, 0.3, False, 1, 0)
    golden = _golden(lambda x: torch.ops.aten.rrelu_with_noise(
        x, torch.zeros_like(x), 0.1, 0.3, False), a)
    assert_close(result.numpy(), golden)
    assert not noise.numpy().astype(np.float32).any()  # eval mode leaves noise alone


def test_rrelu_with_noise_training_is_reproducible_from_seed_and_offset():
    a = random_array((64, 64), np.float32, np.random.default_rng(41), -5, 5)
    runs = []
    for seed, offset in ((3, 0), (3, 0), (3, 8), (4, 0)):
        noise = _dev(np.zeros(a.shape, np.float32))
        out = openacl.ops.r_relu_with_noise(_dev(a), noise, 0.1, 0.3, True, seed, offset)
        runs.append((out.numpy(), noise.numpy()))
    (out, noise), same, shifted, other = runs
    np.testing.assert_array_equal(out, same[0])
    np.testing.assert_array_equal(noise, same[1])
    assert not np.array_equal(noise, shifted[1]) and not np.array_equal(noise, other[1])
    negative = a <= 0
    np.testing.assert_array_equal(noise[~negative], 1.0)
    slopes = noise[negative]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.01  # uniform on [0.1, 0.3]
    np.testing.assert_allclose(out, np.where(negative, a * noise, a), rtol=1e-6)
    # offset 8 reads the stream 8 words on: the same slopes, 8 elements later
    flat, later = noise.reshape(-1), shifted[1].reshape(-1)
    both = negative.reshape(-1)[8:] & negative.reshape(-1)[:-8]
    np.testing.assert_array_equal(flat[8:][both], later[:-8][both])
    target = _dev(a)
    openacl.ops.inplace_r_relu_with_noise(target, _dev(np.zeros(a.shape, np.float32)), 0.1,
                                          0.3, True, 3, 0)
    np.testing.assert_array_equal(target.numpy(), out)


def test_rrelu_with_noise_errors():
    x = _dev(np.ones((2, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    low, high = (openacl.create_scalar(v, openacl.ACL_FLOAT) for v in (0.1, 0.3))
    phase1 = aclnn.r_relu_with_noise_get_workspace_size
    _raises(ACLNN_ERR_PARAM_NULLPTR, "noise", phase1, x, None, low, high, True, 0, 0, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "noise", phase1, x, _dev(np.ones(3, np.float32)), low,
            high, True, 0, 0, out)  # fewer elements than self
    _raises(ACLNN_ERR_PARAM_INVALID, "noise", phase1, x, _dev(np.ones((2, 4), np.float16)),
            low, high, True, 0, 0, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "offset", phase1, x, x, low, high, True, 0, -1, out)
    _raises(ACLNN_ERR_PARAM_INVALID, "self", phase1, _dev(np.ones((2, 4), np.float64)), x,
            low, high, True, 0, 0, openacl.empty((2, 4), np.float64))


@pytest.mark.parametrize("name", ["erfinv", "celu", "swish", "softshrink", "threshold",
                                  "log_sigmoid", "selu"])
def test_new_activations_over_many_chunks(name):
    a = random_array((2 * ELEMENTWISE_CHUNK + 77,), np.float32, np.random.default_rng(42),
                     -0.99 if name == "erfinv" else -8, 0.99 if name == "erfinv" else 8)
    run, reference = ELEMENTWISE.get(name, (openacl.ops.erfinv, torch.erfinv))
    assert_close(run(_dev(a)).numpy(), _golden(reference, a), name)


@pytest.mark.parametrize("clamp", [-1.0, 2.0])
@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
def test_swiglu_group_matches_torch(clamp, dtype):
    rng = np.random.default_rng(43)
    x = random_array((3, 4, 10), dtype, rng, -4, 4)
    weight = random_array((3, 4), np.float32, rng, 0, 2)
    groups = np.array([2, 3], np.int64)
    result = openacl.ops.swiglu_group(_dev(x), _dev(weight), _dev(groups), clamp).numpy()
    a, b = to_torch(x).double().chunk(2, -1)
    if clamp > 0:
        a, b = a.clamp(max=clamp), b.clamp(-clamp, clamp)
    golden = (F.silu(a) * b * torch.from_numpy(weight).double()[..., None]).reshape(12, 5)
    golden[5:] = 0  # tokens past the group counts' sum
    assert_close(result, from_torch(golden.reshape(3, 4, 5).to(to_torch(x).dtype)))
    plain = openacl.ops.swiglu_group(_dev(x), None, None, -1.0).numpy()
    assert_close(plain, _gated_golden(lambda t: F.silu(t.chunk(2, -1)[0]) * t.chunk(2, -1)[1],
                                      x))
    with pytest.raises(AclError) as info:
        openacl.ops.swiglu_group(_dev(x), None, None, 0.0)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'clampLimit'" in info.value.message
    with pytest.raises(AclError) as info:
        openacl.ops.swiglu_group(_dev(x), _dev(np.ones(5, np.float32)), None, -1.0)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'weightOptional'" in info.value.message
