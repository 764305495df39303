"""aclnnSlogdet (ops/determinant.py) against torch.linalg.slogdet in float64 / complex128:
the matrices CANN's ATK harness builds (diagonal, a row swap, zero, a zero row, diagonally
dominant, nearly singular), random batches, complex input, outputs of another dtype,
strided views, and the argument checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import assert_close, random_array, strided
from openacl import aclnn, ops
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _golden(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wide = torch.from_numpy(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
    result = torch.linalg.slogdet(wide)
    return result.sign.numpy(), result.logabsdet.numpy()


def _patterns(n: int) -> list[np.ndarray]:
    """The suite harness's kinds of matrix (executor_aclnnSlogdet.py), built here afresh."""
    diag = np.diag(np.arange(1, n + 1, dtype=np.float32))
    swapped = diag[[1, 0, *range(2, n)]]
    near = (RNG.random((n, n), np.float32) - 0.5) * 0.2 + (n + 1) * np.eye(n, dtype=np.float32)
    zero_row = near.copy()
    zero_row[0] = 0
    ill = near.copy()
    ill[0] = near[1] + 0.2 * near[0]
    return [diag, swapped, np.zeros((n, n), np.float32), zero_row, near, ill]


@pytest.mark.parametrize("n", [2, 3, 16, 64])
def test_slogdet_of_the_suites_matrices(n):
    x = np.stack(_patterns(n))
    sign, log = (r.numpy() for r in ops.slogdet(x))
    want_sign, want_log = _golden(x)
    np.testing.assert_array_equal(sign, want_sign.astype(np.float32))
    assert sign[2] == 0 and sign[3] == 0 and np.isneginf(log[2]) and np.isneginf(log[3])
    assert sign[1] == -1  # one row swap of a positive diagonal
    finite = np.isfinite(want_log)
    assert_close(log[finite], want_log[finite].astype(np.float32), "logOut")


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 3, 4, 4), (128, 128), (3, 1, 2, 7, 7)])
def test_slogdet_of_random_batches_is_torchs(shape):
    x = random_array(shape, np.float32, RNG, -10, 10)
    sign, log = (r.numpy() for r in ops.slogdet(x))
    want_sign, want_log = _golden(x)
    assert sign.shape == shape[:-2] and sign.dtype == np.float32 and log.dtype == np.float32
    np.testing.assert_array_equal(sign, want_sign.astype(np.float32))
    assert_close(log, want_log.astype(np.float32), "logOut")


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.complex128])
def test_slogdet_of_double_and_complex_matrices(dtype):
    x = random_array((3, 6, 6), dtype, RNG, -2, 2)
    sign, log = (r.numpy() for r in ops.slogdet(x))
    want_sign, want_log = _golden(x)
    assert sign.dtype == np.dtype(dtype) and log.dtype == np.dtype(dtype)
    assert_close(sign, want_sign.astype(dtype), "signOut")
    if np.dtype(dtype).kind == "c":  # the log of |det|: real part only
        assert np.all(log.imag == 0)
    assert_close(log.real, want_log.astype(log.real.dtype), "logOut")


def _slogdet_into(x, sign_out, log_out) -> None:
    """aclnnSlogdet's two phases with the outputs given."""
    x = openacl.to_device(x) if isinstance(x, np.ndarray) else x
    ws, executor = aclnn.slogdet_get_workspace_size(x, sign_out, log_out)
    aclnn.slogdet(0, ws, executor, 0)


def test_slogdet_casts_into_outputs_of_another_dtype_and_reads_strided_views():
    x = random_array((2, 5, 5), np.float32, RNG)
    sign_out = openacl.to_device(np.zeros(2, np.float64))
    log_out = openacl.to_device(np.zeros(2, np.complex64))
    _slogdet_into(strided(x, "transpose"), sign_out, log_out)
    want_sign, want_log = _golden(np.swapaxes(np.swapaxes(x, -1, -2), -1, -2))
    np.testing.assert_array_equal(sign_out.numpy(), want_sign)
    np.testing.assert_allclose(log_out.numpy().real, want_log, rtol=1e-6)
    sign_out.free()
    log_out.free()


def test_slogdet_of_an_empty_batch_and_of_empty_matrices():
    sign, log = (r.numpy() for r in ops.slogdet(np.ones((0, 3, 3), np.float32)))
    assert sign.shape == (0,) and log.shape == (0,)
    sign, log = (r.numpy() for r in ops.slogdet(np.ones((2, 0, 0), np.float32)))
    np.testing.assert_array_equal(sign, [1, 1])  # det of a 0 x 0 matrix is 1 (torch's)
    np.testing.assert_array_equal(log, [0, 0])


def test_slogdet_checks_its_arguments():
    def refuses(name, x, sign_out, log_out, code=ACLNN_ERR_PARAM_INVALID):
        with pytest.raises(AclError) as info:
            _slogdet_into(x, sign_out, log_out)
        assert info.value.code == code and f"'{name}'" in info.value.message, \
            info.value.message

    square = np.eye(3, dtype=np.float32)
    scalar = {d: openacl.to_device(np.zeros((), d)) for d in (np.float32, np.float16,
                                                             np.complex64)}
    f32 = scalar[np.float32]
    batch = openacl.to_device(np.zeros(2, np.float32))
    try:
        refuses("self", square.astype(np.float16), f32, f32)
        refuses("self", np.ones(3, np.float32), f32, f32)
        refuses("self", np.ones((2, 3, 4), np.float32), batch, batch)
        refuses("self", None, f32, f32, ACLNN_ERR_PARAM_NULLPTR)
        refuses("signOut", square, None, f32, ACLNN_ERR_PARAM_NULLPTR)
        refuses("signOut", square, batch, f32)
        refuses("logOut", square, f32, batch)
        refuses("signOut", square, scalar[np.float16], f32)
        refuses("logOut", square.astype(np.complex64), scalar[np.complex64], f32)
    finally:
        for tensor in (*scalar.values(), batch):
            tensor.free()
