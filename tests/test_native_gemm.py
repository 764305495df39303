"""openacl._native's packed float32 GEMM and its thread pool, against float64 numpy.

Every shape class the tiling meets (empty, below one microkernel tile, ragged edges, K past
one K block), raw and packed operands on both sides, strided views, every epilogue flag,
each ISA kernel this CPU has, 1-3 pool threads, concurrent callers, a forked child, and the
refusals (wrong dtypes, shapes, sides, flags, an ISA change under a packed matrix).
"""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from openacl.ops import native

lib = native.kernels()
pytestmark = pytest.mark.skipif(lib is None, reason="the C extension openacl._native is not "
                                                    "built or is turned off")
ISAS = ("avx512", "avx2", "baseline")


@pytest.fixture
def pool_threads():
    """Sets the pool's thread count for a test, restoring it after."""
    before = lib.pool_threads()
    yield lib.pool_threads
    lib.pool_threads(before)


@pytest.fixture(params=ISAS)
def isa(request):
    """Each microkernel the CPU can run (the default one restored after)."""
    default = native.isa()
    if not native.set_isa(request.param):
        pytest.skip(f"this CPU has no {request.param} kernel")
    yield request.param
    native.set_isa(default)


def reference(a, b, bias=None, bias_rows=False, relu=False, base=None):
    exact = a.astype(np.float64) @ b.astype(np.float64)
    if base is not None:
        exact = exact + base
    if bias is not None:
        exact = exact + (bias[:, None] if bias_rows else bias[None, :])
    if relu:
        exact = np.where(exact < 0, 0.0, exact)
    return exact


def check(result, a, b, expected):
    """float32 accumulation: within K ulps of the sum of |a| |b| (each product rounded)."""
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + 1.0
    k = max(a.shape[1], 1)
    np.testing.assert_array_less(np.abs(result - expected), 4 * k * 2.0 ** -24 * scale)


SHAPES = [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (5, 7, 3), (6, 16, 8), (7, 17, 33),
          (13, 385, 50), (64, 576, 100), (130, 40, 70), (2, 1000, 3)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("packed", ["none", "a", "b", "both"])
def test_products_match_float64(isa, pool_threads, m, k, n, packed):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    left = native.pack(a, native.LEFT) if packed in ("a", "both") else a
    right = native.pack(b, native.RIGHT) if packed in ("b", "both") else b
    for threads in (1, 2, 3):
        pool_threads(threads)
        out = np.full((m, n), np.nan, np.float32)
        assert native.gemm(left, right, out)
        check(out, a, b, reference(a, b))


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("k", [1, 3, 6, 385, 771])
def test_tiles_of_fewer_rows_than_the_microkernel(isa, pool_threads, m, k):
    """Each kernel for a tile of fewer than 6 rows (its partial sums per row, K not a
    multiple of their count, K past one block), with every epilogue, on a packed and a raw
    B, full and ragged column panels, 1 and 2 threads."""
    rng = np.random.default_rng(m * 100 + k)
    for n in (5, 16, 40):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        bias = rng.standard_normal(n, dtype=np.float32)
        base = rng.standard_normal((m, n), dtype=np.float32)
        for right in (b, native.pack(b, native.RIGHT)):
            for threads in (1, 2):
                pool_threads(threads)
                out = base.copy()
                assert native.gemm(a, right, out, bias=bias, relu=True, accumulate=True)
                check(out, a, b, reference(a, b, bias, relu=True, base=base))
                out = np.full((m, n), np.nan, np.float32)
                assert native.gemm(a, right, out)
                check(out, a, b, reference(a, b))


def test_strided_operands_and_output_rows(pool_threads):
    rng = np.random.default_rng(1)
    a_storage = rng.standard_normal((50, 90), dtype=np.float32)
    b_storage = rng.standard_normal((50, 90), dtype=np.float32)
    a = a_storage[1:37:2, 3:48]           # rows apart, contiguous along K
    a_transposed = a_storage[:45, :18].T  # columns contiguous: packed per call
    b = b_storage[2:47, 5:75]             # rows apart, contiguous along N
    b_transposed = np.ascontiguousarray(b_storage[2:47, 5:75].T).T  # columns 45 apart
    wide = np.zeros((18, 100), np.float32)
    out = wide[:, 10:10 + 70]
    pool_threads(2)
    for left in (a, a_transposed):
        out[...] = np.nan
        assert native.gemm(left, b, out)
        check(out, left, b, reference(left, b))
        out[...] = np.nan
        lib.gemm(left, b_transposed, out, None, 0)  # gathered as it is packed
        check(out, left, b, reference(left, b))
    assert not wide[:, :10].any() and not wide[:, 80:].any()  # nothing written past out
    spread = rng.standard_normal((150, 100), dtype=np.float32)
    b_gathered = spread[2:142:2, 5:95:2].T  # (45, 70): neither rows nor columns contiguous
    for right, dense in ((b_transposed, b), (b_gathered, b_gathered),
                         (native.pack(b_gathered, native.RIGHT), b_gathered)):
        out[...] = np.nan
        assert native.gemm(a, right, out)
        check(out, a, dense, reference(a, dense))


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias_rows", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_epilogues(isa, relu, bias_rows, accumulate, packed):
    rng = np.random.default_rng(2)
    m, k, n = 23, 400, 37  # ragged tiles and two K blocks
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(m if bias_rows else n, dtype=np.float32)
    base = rng.standard_normal((m, n), dtype=np.float32)
    out = base.copy() if accumulate else np.empty((m, n), np.float32)
    right = native.pack(b, native.RIGHT) if packed else b
    assert native.gemm(a, right, out, bias=bias, bias_rows=bias_rows, relu=relu,
                       accumulate=accumulate)
    expected = reference(a, b, bias, bias_rows, relu, base if accumulate else None)
    check(out, a, b, expected)
    if relu:
        assert (out >= 0).all()


def test_k_zero_gives_the_epilogue_of_zero():
    bias = np.arange(5, dtype=np.float32) - 2
    out = np.full((3, 5), 7, np.float32)
    assert native.gemm(np.empty((3, 0), np.float32), np.empty((0, 5), np.float32), out,
                       bias=bias, relu=True)
    np.testing.assert_array_equal(out, np.maximum(np.broadcast_to(bias, (3, 5)), 0))
    out[...] = 7
    assert native.gemm(np.empty((3, 0), np.float32), np.empty((0, 5), np.float32), out,
                       accumulate=True)
    assert (out == 7).all()


def test_nan_and_inf_propagate_and_relu_keeps_nan():
    a = np.array([[np.nan, 1], [np.inf, 1], [1, 1]], np.float32)
    b = np.array([[1, -1], [1, -1]], np.float32)
    out = np.empty((3, 2), np.float32)
    assert native.gemm(a, b, out, relu=True)
    assert np.isnan(out[0]).all()
    assert out[1, 0] == np.inf and out[1, 1] == 0  # -inf clamps to 0
    np.testing.assert_array_equal(out[2], [2, 0])


def test_batched_products_in_one_call(isa, pool_threads):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 13, 40), dtype=np.float32)
    b = rng.standard_normal((5, 40, 21), dtype=np.float32)
    shared = rng.standard_normal((40, 21), dtype=np.float32)
    for threads in (1, 2):
        pool_threads(threads)
        out = np.empty((5, 13, 21), np.float32)
        lib.gemm(a, b, out, None, 0)
        check(out.reshape(-1, 21)[:13], a[0], b[0], reference(a[0], b[0]))
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
        for right in (shared, native.pack(shared, native.RIGHT)):
            out[...] = np.nan
            assert native.gemm(a[2], right, out[2])
            lib.gemm(a, right if isinstance(right, np.ndarray) else
                     (right.data, 40, 21, 1, right.nr, right.kc), out, None, 0)
            np.testing.assert_allclose(out, a.astype(np.float64) @ shared, rtol=1e-5,
                                       atol=1e-4)
        transposed = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
        lib.gemm(transposed, b, out, None, 0)  # columns contiguous: A packed per product
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_batched_matmul_broadcasts_like_numpy(pool_threads, monkeypatch):
    small = native.SMALL_PRODUCT
    monkeypatch.setattr(native, "SMALL_PRODUCT", 0)  # these shapes are below it
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 37, 29), dtype=np.float32)
    b = rng.standard_normal((3, 29, 41), dtype=np.float32)
    out = np.empty((2, 3, 37, 41), np.float32)
    pool_threads(2)
    assert native.matmul(a, b, out)  # b's batch repeats: one call per index of the first
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    assert native.matmul(a[:1, :1], b[:1], out[:1, :1])  # broadcast by size-1 dims
    np.testing.assert_allclose(out[0, 0], a[0, 0].astype(np.float64) @ b[0], rtol=1e-5,
                               atol=1e-4)
    assert not native.matmul(a, b, np.empty((2, 3, 37, 41), np.float64))  # not float32
    square = rng.standard_normal((4, 40, 40), dtype=np.float32)
    assert not native.matmul(square, square, square)  # out overlaps an operand
    monkeypatch.setattr(native, "SMALL_PRODUCT", small)
    assert not native.matmul(a, b, out)  # below the threshold: numpy's
    monkeypatch.setattr(native, "SMALL_PRODUCT", 0)
    tall = rng.standard_normal((4, 300, 8), dtype=np.float32)
    assert not native.matmul(tall, np.ones((4, 8, 4), np.float32),
                             np.empty((4, 300, 4), np.float32))  # 4 columns: numpy's
    assert native.matmul(tall, tall.swapaxes(1, 2), out := np.empty((4, 300, 300),
                                                                     np.float32))
    np.testing.assert_allclose(out, tall.astype(np.float64) @ tall.swapaxes(1, 2), rtol=1e-5,
                               atol=1e-4)  # a transposed B (attention's K^T)


def test_concurrent_callers_and_a_forked_child(pool_threads):
    pool_threads(2)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 200), dtype=np.float32)
    b = native.pack(rng.standard_normal((200, 96), dtype=np.float32), native.RIGHT)
    dense = rng.standard_normal((200, 96), dtype=np.float32)
    weights = b  # the same packed matrix serves every caller
    expected = reference(a, dense)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                out = np.empty((64, 96), np.float32)
                native.gemm(a, dense, out)
                results.append(np.abs(out - expected).max())
                native.gemm(a, weights, np.empty((64, 96), np.float32))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and len(results) == 80
    assert max(results) < 1e-3
    if "fork" not in multiprocessing.get_all_start_methods():
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as child:  # the child starts its own workers
        value = child.apply_async(_child_product).get(timeout=60)
    assert value < 1e-3


def _child_product() -> float:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((50, 300), dtype=np.float32)
    b = rng.standard_normal((300, 70), dtype=np.float32)
    out = np.empty((50, 70), np.float32)
    lib.gemm(a, b, out, None, 0)
    return float(np.abs(out - a.astype(np.float64) @ b).max())


def test_the_wrapper_declines_what_the_kernel_cannot_take():
    a = np.ones((4, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    assert not native.gemm(a.astype(np.float64), b, np.empty((4, 3), np.float32))
    assert not native.gemm(a, b, np.empty((4, 4), np.float32))          # wrong shape
    assert not native.gemm(a, b, np.empty((3, 4), np.float32).T)        # rows not contiguous
    assert not native.gemm(a, b, np.empty((4, 3), np.float32), bias=np.ones(4, np.float32))
    assert not native.gemm(native.pack(b, native.RIGHT), b, np.empty((5, 3), np.float32))
    shared = np.ones((5, 5), np.float32)
    assert not native.gemm(shared, shared, shared)                       # out is an operand
    assert native.pack(a.astype(np.float16), native.LEFT) is None


def test_the_kernel_refuses_bad_arguments_naming_them():
    a = np.ones((4, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    out = np.empty((4, 3), np.float32)
    with pytest.raises(TypeError, match="'a' must be a float32"):
        lib.gemm(a.astype(np.float64), b, out, None, 0)
    with pytest.raises(TypeError, match="'b' must have 2 or 3 dims"):
        lib.gemm(a, np.ones(5, np.float32), out, None, 0)
    with pytest.raises(ValueError, match="a batch of 2 products"):
        lib.gemm(np.ones((3, 4, 5), np.float32), b, np.empty((2, 4, 3), np.float32), None, 0)
    with pytest.raises(ValueError, match="a batch of 1 products"):
        lib.gemm(np.ones((2, 4, 5), np.float32), b, out, None, 0)
    overlapping = np.lib.stride_tricks.as_strided(np.empty(40, np.float32), (2, 4, 3),
                                                  (12, 12, 4))
    with pytest.raises(ValueError, match="its matrices overlap"):
        lib.gemm(a, b, overlapping, None, 0)
    with pytest.raises(TypeError, match="'matrix' must have 2 dims"):
        lib.gemm_pack(np.ones((2, 5, 3), np.float32), 1, np.empty(1, np.float32))
    with pytest.raises(ValueError, match="inner sizes differ"):
        lib.gemm(a, np.ones((4, 3), np.float32), out, None, 0)
    with pytest.raises(ValueError, match="'out' must be a 4 x 3"):
        lib.gemm(a, b, np.empty((4, 4), np.float32), None, 0)
    with pytest.raises(ValueError, match="'flags' = 2 is invalid"):
        lib.gemm(a, b, out, None, 2)
    with pytest.raises(ValueError, match="'bias' must be 3 float32"):
        lib.gemm(a, b, out, np.ones(4, np.float32), 0)
    packed = native.pack(b, native.RIGHT)
    with pytest.raises(ValueError, match="'a' was packed as side 1"):
        lib.gemm((packed.data, 5, 3, 1, packed.nr, packed.kc), b, out, None, 0)
    with pytest.raises(ValueError, match="packed data must be"):
        lib.gemm(a, (packed.data[:-1], 5, 3, 1, packed.nr, packed.kc), out, None, 0)
    with pytest.raises(TypeError, match="a packed matrix is"):
        lib.gemm(a, (packed.data, 5), out, None, 0)
    with pytest.raises(ValueError, match="'side' = 2 is invalid"):
        lib.gemm_pack(b, 2, packed.data)
    with pytest.raises(ValueError, match="'threads' = 0 is invalid"):
        lib.pool_threads(0)
    with pytest.raises(ValueError, match="'threads' = 257 is invalid"):
        lib.pool_threads(257)
    with pytest.raises(ValueError, match="'isa' = 'sse9' is invalid"):
        native.set_isa("sse9")


def test_a_packed_matrix_is_refused_after_an_isa_change():
    current = native.isa()
    if current == "baseline":
        pytest.skip("this CPU runs only the baseline kernel")
    packed = native.pack(np.ones((5, 3), np.float32), native.RIGHT)
    native.set_isa("baseline")
    try:
        assert not native.gemm(np.ones((2, 5), np.float32), packed,
                               np.empty((2, 3), np.float32))
        with pytest.raises(ValueError, match="packed for the baseline kernel"):
            lib.gemm(np.ones((2, 5), np.float32),
                     (packed.data, 5, 3, 1, packed.nr, packed.kc),
                     np.empty((2, 3), np.float32), None, 0)
    finally:
        native.set_isa(current)


# -- the convolution as the GEMM over im2col packed from the image (conv2d_gemm) -------------
CONVOLUTIONS = [
    # (N, C, H, W), C_out, (KH, KW), stride, (top, left) pad, dilation, (bottom, right) pad
    ((1, 5, 9, 11), 7, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),  # below the serial limit
    ((2, 8, 40, 37), 13, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),  # ragged tiles, 2 images
    ((1, 3, 64, 70), 16, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),  # a stem, stride 2
    ((1, 6, 33, 30), 12, (5, 3), (2, 1), (2, 0), (1, 2), (0, 3)),  # asymmetric everything
    ((1, 50, 30, 30), 20, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),  # K past one K block
    ((1, 16, 40, 40), 32, (1, 1), (1, 1), (0, 0), (1, 1), (0, 0)),  # pointwise
    ((1, 4, 20, 24), 9, (3, 3), (1, 1), (5, 6), (1, 1), (5, 6)),  # padding past the reach
    # stride 1 over the padded grid (conv_grid_run), each of its buffers' cases:
    ((2, 6, 20, 24), 10, (3, 1), (1, 1), (1, 0), (1, 1), (1, 0)),  # one column: no compaction
    ((1, 5, 12, 40), 7, (3, 3), (1, 1), (2, 2), (2, 2), (2, 2)),  # dilated
    ((1, 4, 20, 34), 6, (3, 3), (1, 1), (0, 0), (1, 1), (0, 0)),  # unpadded, slack after
    ((1, 3, 16, 48), 5, (5, 5), (1, 1), (2, 1), (1, 1), (0, 3)),  # asymmetric padding
    ((2, 70, 9, 64), 4, (1, 1), (1, 1), (0, 0), (1, 1), (0, 0)),  # the image in place, K > kc
]


def _conv_reference(x, w, bias, stride, pad, dilation, after, relu):
    import torch
    import torch.nn.functional as F

    padded = F.pad(torch.from_numpy(x).double(), (pad[1], after[1], pad[0], after[0]))
    result = F.conv2d(padded, torch.from_numpy(w).double(),
                      None if bias is None else torch.from_numpy(bias).double(), stride, 0,
                      dilation).numpy()
    return np.maximum(result, 0) if relu else result


@pytest.mark.parametrize("case", CONVOLUTIONS)
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_gemm_matches_torch(case, packed, relu, isa, pool_threads):
    """Exact (small integers) against torch, each ISA, 1 and 3 threads, raw and packed
    weights, bias per output channel and ReLU in the tiles."""
    shape, c_out, kernel, stride, pad, dilation, after = case
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 5, shape).astype(np.float32)
    w = rng.integers(-3, 4, (c_out, shape[1], *kernel)).astype(np.float32)
    bias = rng.integers(-9, 10, c_out).astype(np.float32)
    expected = _conv_reference(x, w, bias, stride, pad, dilation, after, relu)
    matrix = w.reshape(c_out, -1)
    weight = native.pack(matrix, native.LEFT) if packed else matrix
    for threads in (1, 3):
        pool_threads(threads)
        out = np.full(expected.shape, np.nan, np.float32)
        assert native.conv2d(x, weight, bias, out, kernel, stride, pad, dilation, relu=relu)
        np.testing.assert_array_equal(out, expected, f"{case} x{threads}")


def test_conv2d_gemm_refusals():
    x, w = np.ones((1, 2, 5, 5), np.float32), np.ones((3, 18), np.float32)
    out = np.empty((1, 3, 5, 5), np.float32)
    args = ((1, 2, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    lib.conv2d_gemm(x, w, None, out, *args, 0)
    assert out[0, 0, 2, 2] == 18 and out[0, 0, 0, 0] == 8
    with pytest.raises(ValueError, match="must be > 0"):
        lib.conv2d_gemm(x, w, None, out, (1, 2, 5, 5), (3, 3), (0, 1), (1, 1), (1, 1),
                        (5, 5), 0)
    with pytest.raises(ValueError, match="'weight' must be one C_out x 18 matrix"):
        lib.conv2d_gemm(x, np.ones((3, 17), np.float32), None, out, *args, 0)
    with pytest.raises(ValueError, match="'x' must be 50 float32 values"):
        lib.conv2d_gemm(np.ones(49, np.float32), w, None, out, *args, 0)
    with pytest.raises(ValueError, match="'out' must be N x C_out x OH x OW"):
        lib.conv2d_gemm(x, w, None, np.empty((1, 3, 5, 4), np.float32), *args, 0)
    with pytest.raises(ValueError, match="'bias' must be 3 float32 values"):
        lib.conv2d_gemm(x, w, np.ones(2, np.float32), out, *args, 0)
    with pytest.raises(ValueError, match="'flags' = 16 is invalid"):
        lib.conv2d_gemm(x, w, None, out, *args, 16)
    with pytest.raises(OverflowError):
        lib.conv2d_gemm(x, w, None, out, (1, 2, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1),
                        (1 << 40, 1 << 40), 0)
    # the wrapper declines what the kernel cannot take: overlap, dtypes, shapes
    assert not native.conv2d(x, w, None, x.reshape(1, 2, 5, 5)[:, :1], (3, 3), (1, 1),
                             (1, 1), (1, 1))
    assert not native.conv2d(x.astype(np.float64), w, None, out, (3, 3), (1, 1), (1, 1),
                             (1, 1))
    assert not native.conv2d(x, w[:, :17], None, out, (3, 3), (1, 1), (1, 1), (1, 1))
