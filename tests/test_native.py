"""The C kernels (openacl._native) called directly: results against float64 references
(torch) with CANN's float32 standard, NaN/inf, in-place calls, every row-length tail, and
the argument checks that keep a bad call from reading or writing outside its buffers.

The operators that use these kernels are tested on both implementations through the
``kernel_path`` fixture (test_ops_activation, test_ops_convolution, test_ops_normalization).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from op_harness import assert_close
from openacl.ops import native

if not native.built():  # a CI install sets OPENACL_REQUIRE_NATIVE=1: there it must be built
    if os.environ.get("OPENACL_REQUIRE_NATIVE") == "1":
        raise RuntimeError("openacl._native is not built, and OPENACL_REQUIRE_NATIVE=1")
    pytest.skip("openacl._native is not built (no C compiler at install time); the numpy "
                "kernels run instead", allow_module_level=True)

from openacl import _native  # noqa: E402

F32 = np.float32
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-40, 12.4, 12.6,
                     -12.6, 20.0, -20.0, 88.0, -88.0, 100.0, -100.0, 3.4e38, -3.4e38], F32)


def _random(shape, scale=4.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(F32)


def _t64(array):
    return torch.from_numpy(np.asarray(array, np.float64))


def _golden(fn, x):
    return fn(_t64(x)).numpy().astype(F32)


def test_openacl_native_env_turns_the_extension_off():
    code = "from openacl.ops import native; print(native.kernels() is None, native.built())"
    env = dict(os.environ, OPENACL_NATIVE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True"]
    assert native.kernels() is _native
    with native.disabled():
        assert native.kernels() is None
    assert "native C" in native.describe()


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1000, 65537])
def test_gelu_erf_matches_float64_torch(size):
    x = _random(size, seed=size)
    out = np.empty_like(x)
    _native.gelu_erf(x, out)
    assert_close(out, _golden(F.gelu, x), f"gelu size {size}")


def test_gelu_erf_specials_and_in_place():
    x = SPECIALS.copy()
    _native.gelu_erf(x, x)
    assert np.isnan(x[0]) and x[1] == np.inf and x[2] == 0.0
    finite = np.isfinite(SPECIALS)
    # atol: torch's float64 GELU cancels to 0 below x ~ -8 where the true value is ~1e-35
    np.testing.assert_allclose(x[finite], _golden(F.gelu, SPECIALS[finite]), rtol=2e-6,
                               atol=1e-34)


def test_gelu_erf_far_tail_matches_the_numpy_kernel():
    # where x * Phi(x) is tiny but a normal float32 (torch's float64 GELU cancels to 0
    # there): the C and numpy kernels agree to the rounding of exp's argument, ~x^2 eps
    from openacl.ops.activation import _gelu_erf

    x = -np.linspace(8.0, 13.1, 4001).astype(F32)
    out = np.empty_like(x)
    _native.gelu_erf(x, out)
    expected = _gelu_erf(x.copy())
    tiny = np.finfo(F32).tiny
    normal = (np.abs(expected) > tiny) & (np.abs(out) > tiny)
    assert normal[:3000].all()  # down to x = -11.9 at least, nothing flushed
    np.testing.assert_allclose(out[normal], expected[normal], rtol=2e-5)
    assert (out <= 0).all()


# the standalone Tanh, Exp and Erf kernels: their error bound in float32 ulps of the
# float64 result (the docstrings' bounds), over a dense sweep and float32's whole range
ULP_BOUNDS = {"tanh": (torch.tanh, 5.0), "exp": (torch.exp, 2.0), "erf": (torch.erf, 3.0)}


def _sweep() -> np.ndarray:
    decades = np.float32(10) ** np.linspace(-38, 1.5, 40001).astype(F32)
    return np.concatenate([np.linspace(-12, 12, 400_001, dtype=F32), decades, -decades,
                           np.linspace(-104, 89, 40001, dtype=F32)])


@pytest.mark.parametrize("name", sorted(ULP_BOUNDS))
def test_tanh_exp_erf_within_their_ulp_bounds(name):
    reference, bound = ULP_BOUNDS[name]
    x = _sweep()
    out = np.empty_like(x)
    getattr(_native, name)(x, out)
    exact = reference(_t64(x)).numpy()
    normal = (np.abs(exact) >= np.finfo(F32).tiny) & (np.abs(exact) <= np.finfo(F32).max)
    spacing = np.spacing(np.abs(exact[normal]).astype(F32)).astype(np.float64)
    ulps = np.abs(out[normal].astype(np.float64) - exact[normal]) / spacing
    worst = ulps.argmax()
    assert ulps[worst] <= bound, f"{name}: {ulps[worst]:.2f} ulp at x = {x[normal][worst]}"
    # below float32's normal range a result is 0 or that tiny value; above it, inf
    tiny = np.abs(exact) < np.finfo(F32).tiny
    assert np.all(np.abs(out[tiny] - exact[tiny]) <= np.finfo(F32).tiny)
    assert np.all(out[~normal & ~tiny] == np.inf)


@pytest.mark.parametrize("name", sorted(ULP_BOUNDS))
def test_tanh_exp_erf_specials_and_in_place(name):
    x = SPECIALS.copy()
    expected = {"tanh": [1, -1, 0, -0.0], "exp": [np.inf, 0, 1, 1], "erf": [1, -1, 0, -0.0]}
    getattr(_native, name)(x, x)
    assert np.isnan(x[0])
    np.testing.assert_array_equal(x[1:5], np.array(expected[name], F32))
    if name != "exp":  # odd functions keep the sign of zero
        assert np.signbit(x[4]) and not np.signbit(x[3])


@pytest.mark.parametrize("size", [1, 17, 4099])
def test_hardswish_matches_torch_with_specials(size):
    x = np.concatenate([_random(size, 5.0), SPECIALS])
    out = np.empty_like(x)
    _native.hardswish(x, out)
    # -inf * 0 is NaN in both; 3.4e38 must not overflow on the way
    assert_close(out, _golden(F.hardswish, x), "hardswish")


@pytest.mark.parametrize("length", [1, 2, 15, 16, 17, 33, 128, 1000])
def test_softmax_rows_every_tail(length):
    x = _random((7, length), 6.0, seed=length)
    out = np.empty_like(x)
    _native.softmax_rows(x, out, length)
    assert_close(out, _golden(lambda t: torch.softmax(t, -1), x), f"softmax {length}")
    _native.softmax_rows(x, x, length)  # in place
    np.testing.assert_array_equal(x, out)


def test_softmax_rows_specials_like_torch():
    rows = np.array([[1, 2, np.nan, 3], [1, np.inf, 2, 3], [-np.inf] * 4,
                     [0, -np.inf, 0, -1e30], [-200, 0, -100, -80]], F32)
    out = np.empty_like(rows)
    _native.softmax_rows(rows, out, 4)
    golden = torch.softmax(torch.from_numpy(rows), -1).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(golden))
    ok = ~np.isnan(golden)
    np.testing.assert_allclose(out[ok], golden[ok], rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("length", [1, 7, 16, 384, 4097])
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm_rows_matches_torch(length, affine):
    x = _random((5, length), 3.0, seed=length) + F32(10.0)  # an offset: centring matters
    weight = _random(length, 1.0, seed=1) if affine in ("weight", "both") else None
    bias = _random(length, 1.0, seed=2) if affine in ("bias", "both") else None
    out, mean, rstd = np.empty_like(x), np.empty(5, F32), np.empty(5, F32)
    _native.layer_norm_rows(x, weight, bias, out, mean, rstd, length, 1e-5)
    golden, golden_mean, golden_rstd = torch.native_layer_norm(
        _t64(x), [length], None if weight is None else _t64(weight),
        None if bias is None else _t64(bias), 1e-5)
    assert_close(out, golden.numpy().astype(F32), "y")
    assert_close(mean, golden_mean.numpy().ravel().astype(F32), "mean")
    assert_close(rstd, golden_rstd.numpy().ravel().astype(F32), "rstd")


@pytest.mark.parametrize("length", [1, 15, 16, 17, 1600, 65537])
def test_row_sums_accumulate_in_float64(length):
    x = _random((3, length), 1.0, seed=length) + F32(1000.0)  # float32 sums would drift
    out = np.empty(3, np.float64)
    _native.row_sums(x, out, length)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-13)
    with pytest.raises(TypeError, match="'out' must be a float64 buffer"):
        _native.row_sums(x, np.empty(3, F32), length)
    with pytest.raises(ValueError, match="'out' holds 2 float64 values, 3 needed"):
        _native.row_sums(x, np.empty(2, np.float64), length)


DIRECT = [
    # (N, C, H, W), (C_out, groups), (KH, KW), stride, padding (top, left), dilation
    ((1, 3, 9, 11), (3, 3), (3, 3), (1, 1), (1, 1), (1, 1)),  # depthwise
    ((2, 4, 8, 8), (4, 4), (5, 5), (1, 1), (2, 2), (1, 1)),
    ((1, 2, 10, 9), (2, 2), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((1, 2, 12, 13), (2, 2), (3, 2), (2, 3), (0, 1), (2, 3)),
    ((1, 1, 5, 5), (1, 1), (5, 5), (1, 1), (0, 0), (1, 1)),
    ((1, 3, 4, 4), (3, 3), (3, 3), (1, 1), (3, 3), (1, 1)),  # padding wider than the reach
    ((1, 2, 40, 40), (2, 2), (9, 9), (1, 1), (4, 4), (1, 1)),  # 81 taps: two passes
    ((1, 2, 23, 21), (2, 2), (9, 9), (2, 2), (4, 4), (1, 1)),
    ((2, 3, 33, 31), (16, 1), (3, 3), (2, 2), (1, 1), (1, 1)),  # a stem: 3 colour planes
    ((1, 3, 20, 20), (8, 1), (7, 7), (2, 2), (3, 3), (1, 1)),  # 147 taps: three passes
    ((1, 4, 9, 10), (6, 2), (3, 3), (1, 1), (1, 1), (1, 2)),  # grouped, 2 in / 3 out
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape, channels, kernel, stride, padding, dilation", DIRECT)
def test_conv2d_direct_matches_torch(shape, channels, kernel, stride, padding, dilation,
                                     bias):
    c_out, groups = channels
    x = _random(shape, 2.0)
    weight = _random((c_out, shape[1] // groups, *kernel), 1.0, seed=3)
    b = _random(c_out, 1.0, seed=4) if bias else None
    golden = F.conv2d(_t64(x), _t64(weight), None if b is None else _t64(b), stride, padding,
                      dilation, groups).numpy().astype(F32)
    out = np.full(golden.shape, np.nan, F32)
    _native.conv2d_direct(x, weight, b, out, shape, channels, kernel, stride, padding,
                          dilation, golden.shape[2:])
    assert_close(out, golden, f"direct {shape} {channels} {kernel}")


# past the serial threshold: items of row blocks (several per plane) on the pool
DIRECT_LARGE = [
    ((1, 4, 150, 130), (4, 4), (3, 3), (1, 1), (1, 1), (1, 1)),  # flat, 3 blocks a plane
    ((1, 3, 101, 90), (16, 1), (3, 3), (2, 2), (1, 1), (1, 1)),  # a stem, by rows
    ((2, 2, 120, 100), (2, 2), (9, 9), (1, 1), (4, 4), (1, 1)),  # 81 taps a block
    ((1, 6, 90, 77), (9, 3), (3, 3), (2, 1), (1, 2), (1, 2)),  # grouped, ragged last block
    # depthwise on planes up to 16 wide: by channel lanes (a vector's width of channels at
    # once), ragged last lane group, strides, dilations, padding past the kernel, a batch
    ((2, 37, 14, 14), (37, 37), (5, 5), (1, 1), (2, 2), (1, 1)),
    ((1, 20, 15, 13), (20, 20), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((1, 33, 9, 16), (33, 33), (3, 7), (1, 2), (1, 3), (2, 1)),
    ((1, 300, 7, 7), (300, 300), (5, 5), (1, 1), (2, 2), (1, 1)),  # items on the pool
    ((1, 5, 6, 40), (5, 5), (1, 1), (3, 3), (0, 0), (1, 1)),  # 1 x 1, 14 wide by stride
]
GEMM_ISAS = ("avx512", "avx2", "baseline")


@pytest.mark.parametrize("isa", GEMM_ISAS)
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape, channels, kernel, stride, padding, dilation", DIRECT_LARGE)
def test_conv2d_direct_in_blocks_on_the_pool(shape, channels, kernel, stride, padding,
                                             dilation, threads, isa):
    """The tap sums of each vector width (they follow the GEMM's ISA), on 1 and 3 threads;
    small integers, so every sum is exact and any misplaced tap shows."""
    default, before = native.isa(), _native.pool_threads()
    if not native.set_isa(isa):
        pytest.skip(f"this CPU has no {isa} kernels")
    try:
        _native.pool_threads(threads)
        c_out, groups = channels
        rng = np.random.default_rng(5)
        x = rng.integers(-4, 5, shape).astype(F32)
        weight = rng.integers(-3, 4, (c_out, shape[1] // groups, *kernel)).astype(F32)
        b = rng.integers(-8, 9, c_out).astype(F32)
        golden = F.conv2d(_t64(x), _t64(weight), _t64(b), stride, padding, dilation,
                          groups).numpy().astype(F32)
        out = np.full(golden.shape, np.nan, F32)
        _native.conv2d_direct(x, weight, b, out, shape, channels, kernel, stride, padding,
                              dilation, golden.shape[2:])
        np.testing.assert_array_equal(out, golden, f"direct {shape} {isa} x{threads}")
    finally:
        _native.pool_threads(before)
        native.set_isa(default)


def test_conv2d_direct_nan_and_inf_propagate():
    x = np.zeros((1, 1, 5, 5), F32)
    x[0, 0, 0, 0], x[0, 0, 4, 4] = np.nan, np.inf
    out = np.empty((1, 1, 5, 5), F32)
    _native.conv2d_direct(x, np.ones((1, 1, 3, 3), F32), None, out, (1, 1, 5, 5), (1, 1),
                          (3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    assert np.isnan(out[0, 0, :2, :2]).all() and np.isinf(out[0, 0, 3:, 3:]).all()
    assert (out[0, 0, 0, 3:] == 0).all()


# -- bad calls: errors, never reads or writes outside the buffers ------------------------------
def test_elementwise_argument_checks():
    x = np.ones(8, F32)
    with pytest.raises(TypeError, match="'x' must be a float32 buffer"):
        _native.gelu_erf(np.ones(8), np.ones(8, F32))
    with pytest.raises(TypeError, match="'out' must be a float32 buffer"):
        _native.hardswish(x, np.ones(8, np.int32))
    with pytest.raises(ValueError, match="'out' holds 4 float32 values, 8 needed"):
        _native.gelu_erf(x, np.ones(4, F32))
    with pytest.raises((ValueError, BufferError)):
        _native.gelu_erf(np.ones(16, F32)[::2], np.ones(8, F32))  # not contiguous
    read_only = np.ones(8, F32)
    read_only.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        _native.gelu_erf(x, read_only)
    with pytest.raises(TypeError):
        _native.gelu_erf(b"\x00" * 32, x)  # bytes: format 'B'
    with pytest.raises(TypeError):
        _native.gelu_erf(x)


def test_row_kernel_argument_checks():
    x = np.ones((3, 4), F32)
    with pytest.raises(ValueError, match="'length' must be > 0, got 0"):
        _native.softmax_rows(x, x, 0)
    with pytest.raises(ValueError, match="not whole rows of 'length' 5"):
        _native.softmax_rows(x, np.empty_like(x), 5)
    with pytest.raises(ValueError, match="'out' holds 4 float32 values, 12 needed"):
        _native.softmax_rows(x, np.empty(4, F32), 4)
    stats = np.empty(3, F32)
    with pytest.raises(ValueError, match="'weight' holds 2 float32 values, 4 needed"):
        _native.layer_norm_rows(x, np.ones(2, F32), None, np.empty_like(x), stats, stats, 4,
                                1e-5)
    with pytest.raises(ValueError, match="'rstd' holds 1 float32 values, 3 needed"):
        _native.layer_norm_rows(x, None, None, np.empty_like(x), stats, np.empty(1, F32), 4,
                                1e-5)
    with pytest.raises(TypeError, match="'bias' must be a float32 buffer"):
        _native.layer_norm_rows(x, None, np.ones(4), np.empty_like(x), stats, stats, 4, 1e-5)


def test_max_pool2d_argument_checks():
    x, out = np.arange(32, dtype=F32).reshape(2, 4, 4), np.empty((2, 2, 2), F32)
    _native.max_pool2d(x, out, (2, 4, 4), (2, 2), (2, 2), (0, 0), (2, 2))
    np.testing.assert_array_equal(out[0], [[5, 7], [13, 15]])
    with pytest.raises(ValueError, match="must be > 0"):
        _native.max_pool2d(x, out, (2, 4, 4), (2, 0), (2, 2), (0, 0), (2, 2))
    with pytest.raises(ValueError, match="'x' holds 32 float32 values, 48 needed"):
        _native.max_pool2d(x, out, (3, 4, 4), (2, 2), (2, 2), (0, 0), (2, 2))
    with pytest.raises(ValueError, match="'out' holds 8 float32 values, 18 needed"):
        _native.max_pool2d(x, out, (2, 4, 4), (2, 2), (1, 1), (0, 0), (3, 3))
    with pytest.raises(TypeError, match="'x' must be a float32 buffer"):
        _native.max_pool2d(x.astype(np.float64), out, (2, 4, 4), (2, 2), (2, 2), (0, 0),
                           (2, 2))
    huge = 1 << 40
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.max_pool2d(x, out, (huge, huge, 4), (2, 2), (2, 2), (0, 0), (2, 2))
    # an output past the image's reach only reads guarded positions: -inf where none
    wide = np.empty((2, 3, 3), F32)
    _native.max_pool2d(x, wide, (2, 4, 4), (1, 1), (3, 3), (1, 1), (3, 3))
    assert wide[0, 0, 0] == -np.inf and wide[0, 1, 1] == x[0, 2, 2]


def test_conv2d_direct_argument_checks():
    x, w, out = np.ones((1, 2, 4, 4), F32), np.ones((2, 1, 3, 3), F32), np.empty((1, 2, 4, 4), F32)
    shape, channels, rest = (1, 2, 4, 4), (2, 2), ((3, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    _native.conv2d_direct(x, w, None, out, shape, channels, *rest)
    assert out[0, 0, 1, 1] == 9.0 and out[0, 0, 0, 0] == 4.0
    with pytest.raises(ValueError, match="must be > 0"):
        _native.conv2d_direct(x, w, None, out, shape, channels, (3, 3), (0, 1), (1, 1),
                              (1, 1), (4, 4))
    with pytest.raises(ValueError, match="groups 2 must divide the input channels 3"):
        _native.conv2d_direct(x, w, None, out, (1, 3, 4, 4), channels, *rest)
    with pytest.raises(ValueError, match="'x' holds 32 float32 values, 64 needed"):
        _native.conv2d_direct(x, w, None, out, (1, 4, 4, 4), (4, 4), *rest)
    with pytest.raises(ValueError, match="'weight' holds 18 float32 values, 36 needed"):
        _native.conv2d_direct(x, w, None, out, shape, (2, 1), *rest)
    with pytest.raises(ValueError, match="'out' holds 32 float32 values, 50 needed"):
        _native.conv2d_direct(x, w, None, out, shape, channels, *rest[:4], (5, 5))
    with pytest.raises(ValueError, match="'bias' holds 1 float32 values, 2 needed"):
        _native.conv2d_direct(x, w, np.ones(1, F32), out, shape, channels, *rest)
    huge = 1 << 40
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.conv2d_direct(x, w, None, out, (huge, huge, 4, 4), (huge, huge), *rest)
    with pytest.raises(OverflowError, match="sizes overflow"):  # the scratch plane's span
        _native.conv2d_direct(x, w, None, out, shape, channels, (3, 3), (1 << 62, 1), (1, 1),
                              (1, 1), (4, 4))
    # spans that fit alone but whose scratch total (plane + margin + sums) would wrap: a
    # review found this allocating 72 bytes and writing far past them
    one, row = np.zeros((1, 1, 1, 1), F32), (2 ** 62 + 2) // 3
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.conv2d_direct(one, np.zeros((1, 1, 1, 2), F32), None, one.copy(), (1, 1, 1, 1),
                              (1, 1), (1, 2), (1, 1), (0, 0), (1, row - 2), (1, 1))


def test_shifted_sums_against_numpy_and_checks():
    rng = np.random.default_rng(5)
    channels, slab, rows, pitch, cols, taps = 3, 44, 4, 9, 7, [0, 1, 9, 10]
    source = rng.standard_normal(channels * slab + 16).astype(F32)  # +16: the last vector
    out = np.full((channels, 6, cols), np.nan, F32)
    bias = np.array([1, 2, 3], F32)
    _native.shifted_sums(source, out, bias, taps, (channels, slab), (rows, pitch),
                         (cols, 6 * cols, 2))
    for c in range(channels):
        for r in range(rows):
            base = c * slab + r * pitch
            expected = bias[c] + sum(source[base + t:base + t + cols] for t in taps)
            np.testing.assert_allclose(out[c, 2 + r], expected, rtol=1e-5, atol=1e-6)
    assert np.isnan(out[:, :2]).all()  # rows before first_row untouched
    args = (bias, taps, (channels, slab), (rows, pitch), (cols, 6 * cols, 2))
    with pytest.raises(ValueError, match="'source' holds 120 float32 values, 147 needed"):
        _native.shifted_sums(source[:120], out, *args)
    with pytest.raises(ValueError, match="'out' holds 100 float32 values, 126 needed"):
        _native.shifted_sums(source, out.reshape(-1)[:100], *args)
    with pytest.raises(ValueError, match="'offsets' must be >= 0, got -1 at 1"):
        _native.shifted_sums(source, out, bias, [0, -1], *args[2:])
    with pytest.raises(ValueError, match="1 to 64 taps, got 65"):
        _native.shifted_sums(source, out, bias, [0] * 65, *args[2:])
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.shifted_sums(source, out, bias, taps, (channels, 1 << 62), (rows, pitch),
                             (cols, 6 * cols, 2))
    with pytest.raises(ValueError, match="must be > 0"):
        _native.shifted_sums(source, out, bias, taps, (0, slab), (rows, pitch),
                             (cols, 6 * cols, 2))
    # bounds whose additions would wrap to small, valid-looking values (found in review:
    # a write before the output and a read before the source)
    huge = 2 ** 63 - 1
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.shifted_sums(np.zeros(16, F32), np.empty(0, F32), None, [0], (2, 0), (2, 0),
                             (1, huge, huge))
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.shifted_sums(np.ones(1, F32), np.zeros(1, F32), None, [huge - 7],
                             (2, huge - 6), (1, 0), (1, 0, 0))


def test_add_layer_norm_rows_bias_forms_and_checks():
    rng = np.random.default_rng(6)
    x1, x2 = (rng.standard_normal((3, 20)).astype(F32) for _ in range(2))
    gamma, beta = rng.standard_normal(20).astype(F32), rng.standard_normal(20).astype(F32)
    for bias in (None, rng.standard_normal(20).astype(F32),
                 rng.standard_normal((3, 20)).astype(F32)):
        y, x, mean, rstd = np.empty_like(x1), np.empty_like(x1), np.empty(3, F32), np.empty(3, F32)
        _native.add_layer_norm_rows(x1, x2, bias, gamma, beta, y, x, mean, rstd, 20, 1e-5)
        total = x1 + x2 + (0 if bias is None else bias)
        golden = F.layer_norm(_t64(total), [20], _t64(gamma), _t64(beta), 1e-5).numpy()
        np.testing.assert_allclose(x, total, rtol=1e-6)
        assert_close(y, golden.astype(F32), "add_layer_norm y")
        np.testing.assert_allclose(mean, total.astype(np.float64).mean(axis=1), rtol=1e-5,
                                   atol=1e-6)
    stats = np.empty(3, F32)
    with pytest.raises(ValueError, match="'x2' holds 40 float32 values, 60 needed"):
        _native.add_layer_norm_rows(x1, x2[:2], None, gamma, beta, y, None, stats, stats, 20,
                                    1e-5)
    with pytest.raises(ValueError, match="'gamma' holds 10 float32 values, 20 needed"):
        _native.add_layer_norm_rows(x1, x2, None, gamma[:10], beta, y, None, stats, stats, 20,
                                    1e-5)
    with pytest.raises(ValueError, match="not whole rows of 'length' 7"):
        _native.add_layer_norm_rows(x1, x2, None, gamma, beta, y, None, stats, stats, 7, 1e-5)
    with pytest.raises(TypeError, match="'y' must be a float32 buffer"):
        _native.add_layer_norm_rows(x1, x2, None, gamma, beta, y.astype(np.float64), None,
                                    stats, stats, 20, 1e-5)


def test_tile_taps_interleaves_and_checks():
    rng = np.random.default_rng(7)
    for kernel in ((2, 2), (3, 1), (1, 3)):
        taps = rng.standard_normal((4, kernel[0] * kernel[1], 2, 3, 5)).astype(F32)
        bias = rng.standard_normal(4).astype(F32)
        out = np.empty((2, 4, 3 * kernel[0], 5 * kernel[1]), F32)
        _native.tile_taps(taps, bias, out, (4, *kernel), (2, 3, 5))
        expected = np.empty_like(out)
        for a in range(kernel[0]):
            for b in range(kernel[1]):
                expected[:, :, a::kernel[0], b::kernel[1]] = (
                    taps[:, a * kernel[1] + b].transpose(1, 0, 2, 3) + bias[None, :, None, None])
        np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="'out' holds 10 float32 values, 360 needed"):
        _native.tile_taps(taps, bias, np.empty(10, F32), (4, 1, 3), (2, 3, 5))
    with pytest.raises(ValueError, match="'bias' holds 2 float32 values, 4 needed"):
        _native.tile_taps(taps, bias[:2], out, (4, 1, 3), (2, 3, 5))
    with pytest.raises(ValueError, match="every size must be > 0"):
        _native.tile_taps(taps, bias, out, (4, 0, 3), (2, 3, 5))
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.tile_taps(taps, bias, out, (1 << 40, 1 << 40, 3), (2, 3, 5))


def test_masked_softmax_checks():
    x = np.zeros((1, 2, 3, 4), F32)
    mask = np.zeros((1, 1, 3, 4), np.bool_)
    out = np.empty_like(x)
    _native.masked_softmax(x, mask, out, (1, 2, 3, 4), (1, 1), 1.0)
    np.testing.assert_allclose(out, 0.25)
    with pytest.raises(TypeError, match="'mask' must be a bool buffer"):
        _native.masked_softmax(x, mask.astype(np.uint8), out, (1, 2, 3, 4), (1, 1), 1.0)
    with pytest.raises(ValueError, match="'mask' holds 12 values, 24 needed"):
        _native.masked_softmax(x, mask, out, (1, 2, 3, 4), (1, 2), 1.0)
    with pytest.raises(ValueError, match="first two dims 1 or x's"):
        _native.masked_softmax(x, mask, out, (1, 2, 3, 4), (1, 3), 1.0)
    with pytest.raises(ValueError, match="'out' holds 24 float32 values, 48 needed"):
        _native.masked_softmax(np.zeros(48, F32), np.zeros(48, np.bool_), out, (2, 2, 3, 4),
                               (2, 2), 1.0)
    with pytest.raises(OverflowError, match="sizes overflow"):
        _native.masked_softmax(x, mask, out, (1 << 40, 1 << 40, 3, 4), (1, 1), 1.0)


def _f16c() -> bool:
    probe = np.zeros(1, np.float16)
    return bool(_native.convert_half(probe, np.zeros(1, np.float32), True))


@pytest.mark.parametrize("size", [1, 7, 8, 9, 1000, 4099])
def test_half_conversions_match_numpy_to_the_bit(size):
    """float32 -> float16 rounds to nearest even as numpy does (halfway cases, subnormals,
    overflow to inf, the largest finite value), float16 -> float32 is exact; NaN stays NaN."""
    if not _f16c():
        pytest.skip("this CPU has no F16C: the conversions report it and numpy converts")
    rng = np.random.default_rng(size)
    single = (rng.standard_normal(size) * rng.choice([1e-7, 1e-3, 1, 1e3, 7e4], size)).astype(
        np.float32)
    specials = np.array([np.inf, -np.inf, 65504, 65520, -65519.9, 2.0 ** -24, 2.0 ** -25,
                         1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -0.0, 6e-8], np.float32)
    single[:min(size, specials.size)] = specials[:size]
    half = np.empty(size, np.float16)
    assert native.narrowed_into(half, single)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(half.view(np.uint16), single.astype(np.float16).view(
            np.uint16))
    np.testing.assert_array_equal(native.widened(half), half.astype(np.float32))
    nan = np.array([np.nan] * 9, np.float32)
    narrowed = np.empty(9, np.float16)
    assert native.narrowed_into(narrowed, nan) and np.isnan(narrowed).all()
    assert np.isnan(native.widened(narrowed)).all()


def test_half_conversions_check_their_buffers():
    with pytest.raises(ValueError, match="float16"):
        _native.convert_half(np.zeros(4, np.float16), np.zeros(5, np.float32), True)
    with pytest.raises(TypeError, match="float16"):
        _native.convert_half(np.zeros(4, np.float32), np.zeros(4, np.float32), True)
    with pytest.raises((TypeError, BufferError, ValueError)):  # read-only half target
        _native.convert_half(np.zeros(4, np.float16)[::2], np.zeros(2, np.float32), False)
    # what the helpers refuse, they leave to numpy
    assert native.widened(np.zeros(4, np.float32)) is None
    assert native.widened(np.zeros((4, 4), np.float16)[:, ::2]) is None
    assert not native.narrowed_into(np.zeros(3, np.float16), np.zeros(4, np.float32))


@pytest.mark.parametrize("kernel,stride,pad,dilation", [
    ((3, 3), (1, 1), (1, 1), (1, 1)), ((1, 3), (1, 1), (0, 1), (1, 1)),
    ((3, 2), (2, 3), (1, 0), (1, 2)), ((5, 5), (1, 1), (2, 2), (2, 1)),
    ((2, 2), (2, 2), (0, 0), (1, 1))], ids=str)
def test_im2col_matches_a_padded_window_copy(kernel, stride, pad, dilation):
    rng = np.random.default_rng(sum(kernel + stride + pad + dilation))
    channels, height, width = 3, 9, 11
    x = rng.standard_normal((channels, height, width)).astype(np.float32)
    # the output size with padding `pad` before and as much after (the reference's padding)
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel, strict=True)]
    out_h = (height + 2 * pad[0] - extent[0]) // stride[0] + 1
    out_w = (width + 2 * pad[1] - extent[1]) // stride[1] + 1
    padded = np.zeros((channels, height + 2 * pad[0], width + 2 * pad[1]), np.float32)
    padded[:, pad[0]:pad[0] + height, pad[1]:pad[1] + width] = x
    want = np.empty((channels, *kernel, out_h, out_w), np.float32)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows = slice(i * dilation[0], i * dilation[0] + (out_h - 1) * stride[0] + 1, stride[0])
            cols = slice(j * dilation[1], j * dilation[1] + (out_w - 1) * stride[1] + 1, stride[1])
            want[:, i, j] = padded[:, rows, cols]
    got = np.full((channels * kernel[0] * kernel[1], out_h * out_w), np.nan, np.float32)
    _native.im2col(x, got, x.shape, kernel, stride, pad, dilation, (out_h, out_w))
    np.testing.assert_array_equal(got, want.reshape(got.shape))


def test_im2col_argument_checks():
    x, out = np.zeros((2, 4, 4), np.float32), np.zeros((18, 16), np.float32)
    geometry = ((2, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    _native.im2col(x, out, *geometry)
    with pytest.raises(ValueError, match="holds"):  # out too small for the columns
        _native.im2col(x, np.zeros((18, 15), np.float32), *geometry)
    with pytest.raises(ValueError, match="holds"):  # x smaller than its declared image
        _native.im2col(np.zeros((2, 4, 3), np.float32), out, *geometry)
    with pytest.raises(ValueError, match="geometry"):
        _native.im2col(x, out, (2, 4, 4), (0, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    with pytest.raises(ValueError, match="geometry"):
        _native.im2col(x, out, (2, 4, 4), (3, 3), (1, 1), (-1, 1), (1, 1), (4, 4))
    with pytest.raises(OverflowError):
        _native.im2col(x, out, (2, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (2 ** 62, 4))


@pytest.mark.parametrize("name", ["gelu_erf", "hardswish", "sigmoid", "silu", "tanh", "exp",
                                  "erf"])
def test_elementwise_on_the_pool_matches_one_thread(name):
    """Past POOL_MIN_ELEMENTS a call is cut into chunks on the pool (a ragged last one
    here): the same values as on one thread, bit for bit, in place too; and against torch."""
    kernel, before = getattr(_native, name), _native.pool_threads()
    x = _random(200_003, 6.0)
    try:
        _native.pool_threads(1)
        serial = np.empty_like(x)
        kernel(x, serial)
        _native.pool_threads(3)
        pooled = np.full_like(x, np.nan)
        kernel(x, pooled)
        in_place = x.copy()
        kernel(in_place, in_place)
    finally:
        _native.pool_threads(before)
    np.testing.assert_array_equal(pooled, serial)
    np.testing.assert_array_equal(in_place, serial)
    golden = {"gelu_erf": F.gelu, "hardswish": F.hardswish, "sigmoid": F.sigmoid,
              "silu": F.silu, "tanh": torch.tanh, "exp": torch.exp, "erf": torch.erf}[name]
    # (hardswish near -3: x + 3 cancels, so its golden is torch's float32 one)
    source = torch.from_numpy(x) if name == "hardswish" else _t64(x)
    assert_close(pooled, golden(source).numpy().astype(F32), name)


def test_softmax_rows_on_the_pool_matches_one_thread():
    before = _native.pool_threads()
    x = _random((1001, 97), 5.0)  # 97,097 values: 337 rows a task, a ragged last one
    try:
        _native.pool_threads(1)
        serial = np.empty_like(x)
        _native.softmax_rows(x, serial, 97)
        _native.pool_threads(3)
        pooled = np.full_like(x, np.nan)
        _native.softmax_rows(x, pooled, 97)
    finally:
        _native.pool_threads(before)
    np.testing.assert_array_equal(pooled, serial)
    assert_close(pooled, torch.softmax(_t64(x), -1).numpy().astype(F32), "softmax")


@pytest.mark.parametrize("size", [5, 200_003])  # one call on the caller; chunks on the pool
def test_leaky_relu_matches_torch_with_specials(size):
    x = np.concatenate([_random(size, 4.0), SPECIALS])
    out = np.full_like(x, 7.0)
    _native.leaky_relu(x, out, 0.2)
    assert_close(out, F.leaky_relu(_t64(x), 0.2).numpy().astype(F32), "leaky_relu")
    in_place = x.copy()
    _native.leaky_relu(in_place, in_place, 0.2)
    np.testing.assert_array_equal(in_place, out)
    with pytest.raises(ValueError, match="'out' holds 4 float32 values"):
        _native.leaky_relu(x, np.empty(4, F32), 0.2)


@pytest.mark.parametrize("gate_count", [4, 3])
def test_recurrences_at_once_equal_one_by_one(gate_count):
    """A bidirectional layer's two directions run at once on the pool (lstm_sequences /
    gru_sequences) give what the two calls give one after the other, to the bit; the
    directions write their own halves of one y."""
    rng = np.random.default_rng(3)
    steps, batch, hidden = 7, 2, 24
    width = gate_count * hidden
    one, call = ((_native.lstm_sequence, _native.lstm_sequences) if gate_count == 4
                 else (_native.gru_sequence, _native.gru_sequences))
    projected = [rng.standard_normal((steps, batch, width)).astype(F32) for _ in range(2)]
    weights = [rng.standard_normal((hidden, width)).astype(F32) * 0.2 for _ in range(2)]
    bias = rng.standard_normal(width).astype(F32)

    def arguments(direction, h, c, y):
        state = (h[direction], c[direction]) if gate_count == 4 else (bias, h[direction])
        return (projected[direction], weights[direction], *state, y,
                np.empty((batch, width), F32), (steps, batch, hidden),
                (2 * hidden, direction * hidden), direction == 1, True)

    results = []
    for together in (False, True):
        h = rng.standard_normal((2, batch, hidden)).astype(F32) if not results else \
            results[0][3].copy()
        start = h.copy()
        c = np.ones((2, batch, hidden), F32)
        y = np.full((steps, batch, 2 * hidden), np.nan, F32)
        calls = [arguments(d, h, c, y) for d in range(2)]
        if together:
            call(calls)
        else:
            for args in calls:
                one(*args)
        results.append((h, c, y, start))
    for ours, theirs in zip(results[0][:3], results[1][:3], strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.isnan(results[1][2]).any()
    with pytest.raises(TypeError, match="list"):
        call(tuple(calls))
    with pytest.raises(ValueError, match="bad sizes"):
        bad = list(calls[0])
        bad[6] = (steps, batch, -1)
        call([calls[1], tuple(bad)])
