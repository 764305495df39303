"""Linear algebra operators against PyTorch CPU, with CANN's precision standard."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import openacl
from op_harness import BF16, FLOATS, assert_close, from_torch, random_array, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

F32 = np.dtype(np.float32)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _rand(shape, dtype, seed):
    return random_array(shape, dtype, np.random.default_rng(seed), -2, 2)


def _golden_matmul(a, b):
    return from_torch(torch.matmul(to_torch(a), to_torch(b)))


# -- Matmul --------------------------------------------------------------------------------------
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),            # 1-D @ 1-D -> 0-dim
    ((4,), (4, 5)),          # 1-D @ 2-D
    ((3, 4), (4,)),          # 2-D @ 1-D
    ((2, 3, 4), (4,)),       # batched @ 1-D
    ((4,), (2, 4, 5)),       # 1-D @ batched
    ((2, 1, 3, 4), (5, 4, 6)),  # batch broadcast
    ((2, 3, 3, 4), (4, 5)),  # a stack @ one matrix: folded into one taller product
    ((2, 0, 4), (4, 3)),     # ... with no rows
    ((2, 3, 0), (0, 4)),     # ... with an empty reduce dim: zeros
    ((1, 2, 1, 2, 3, 4), (2, 1, 2, 1, 4, 2)),  # 6 dims
    ((0, 4), (4, 3)),        # empty rows
    ((3, 0), (0, 2)),        # empty reduce dim: zeros
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_matmul_matches_torch(shapes, dtype):
    a, b = _rand(shapes[0], dtype, 1), _rand(shapes[1], dtype, 2)
    assert_close(openacl.ops.matmul(_dev(a), _dev(b)).numpy(), _golden_matmul(a, b),
                 f"matmul {shapes} {dtype}")


@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_matmul_non_contiguous_inputs_and_output(kind):
    a, b = _rand((2, 5, 6), F32, 3), _rand((6, 4), F32, 4)
    left, right = strided(a, kind), strided(b, kind)
    out = strided(np.zeros((2, 5, 4), np.float32), kind)
    ws, exe = aclnn.matmul_get_workspace_size(left, right, out, 0)
    aclnn.matmul(0, ws, exe, 0)
    assert_close(out.numpy(), _golden_matmul(a, b))


def test_matmul_transposed_operands_bf16_into_float_out():
    a, b = _rand((7, 3), BF16, 5), _rand((3, 9), BF16, 6)
    left, right = strided(a, "transpose"), strided(b, "transpose")
    out = openacl.empty((7, 9), np.float32)  # the bf16 result written into float32
    ws, exe = aclnn.matmul_get_workspace_size(left, right, out, 1)
    aclnn.matmul(0, ws, exe, 0)
    golden = torch.matmul(to_torch(a).float(), to_torch(b).float()).numpy()
    assert_close(out.numpy(), golden)


def test_matmul_promotes_mixed_dtypes():
    a, b = _rand((3, 4), np.float16, 7), _rand((4, 2), np.float32, 8)
    result = openacl.ops.matmul(_dev(a), _dev(b)).numpy()
    assert result.dtype == np.float32
    assert_close(result, a.astype(np.float32) @ b)


@pytest.mark.parametrize("cube", [0, 1, 2, 3, 4])
def test_matmul_cube_math_types(cube):
    a, b = _rand((8, 16), F32, 9), _rand((16, 8), F32, 10)
    result = openacl.ops.matmul(_dev(a), _dev(b), cube).numpy()
    if cube == 2:  # USE_FP16: the operands are rounded to float16 first
        rounded = a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(
            np.float32)
        np.testing.assert_allclose(result, rounded, rtol=1e-6, atol=1e-6)
        assert not np.allclose(result, a @ b, rtol=1e-7, atol=0)
    else:
        assert_close(result, _golden_matmul(a, b))


@pytest.mark.parametrize("cube", [0, 1, 2, 3])
def test_cube_math_type_selects_tf32_on_cuda(cube, backend):
    """ALLOW_FP32_DOWN_PRECISION and USE_HF32 let a float32 product use TensorFloat-32 on the
    CUDA backend (cuBLAS's TF32 compute type, restored afterwards); the others never do."""
    if backend != "cuda-sim":
        pytest.skip("the compute-type calls are observed through the fake CuPy")
    linalg = sys.modules["cupy"]._core._routines_linalg
    linalg.log.clear()
    a, b = _rand((8, 16), F32, 9), _rand((16, 8), F32, 10)
    openacl.ops.matmul(_dev(a), _dev(b), cube).numpy()
    if cube in (1, 3):
        assert linalg.log == [(F32, linalg.COMPUTE_TYPE_TF32), (F32, 1)]
    else:
        assert linalg.log == []
    assert linalg.get_compute_type(np.float32) == 1


def test_mm_and_batch_mat_mul():
    a, b = _rand((3, 4), F32, 11), _rand((4, 5), F32, 12)
    assert_close(openacl.ops.mm(_dev(a), _dev(b)).numpy(), _golden_matmul(a, b))
    for dtype in FLOATS:
        x, y = _rand((3, 2, 4), dtype, 13), _rand((1, 4, 5), dtype, 14)  # batch 1 broadcast
        assert_close(openacl.ops.batch_mat_mul(_dev(x), _dev(y)).numpy(),
                     _golden_matmul(x, y), f"bmm {dtype}")


# -- Addmm, Baddbmm ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("bias_shape", [(3, 5), (5,), (1, 5), (3, 1)], ids=str)
def test_addmm_matches_torch(dtype, bias_shape):
    s, m1, m2 = _rand(bias_shape, dtype, 15), _rand((3, 4), dtype, 16), _rand((4, 5), dtype, 17)
    golden = from_torch(torch.addmm(to_torch(s), to_torch(m1), to_torch(m2), beta=0.5,
                                    alpha=2.0))
    assert_close(openacl.ops.addmm(_dev(s), _dev(m1), _dev(m2), 0.5, 2.0).numpy(), golden,
                 f"addmm {dtype} {bias_shape}")


def test_addmm_beta_zero_ignores_nan_and_inplace():
    s = np.full((2, 3), np.nan, np.float32)
    m1, m2 = _rand((2, 4), F32, 18), _rand((4, 3), F32, 19)
    result = openacl.ops.addmm(_dev(s), _dev(m1), _dev(m2), 0, 1).numpy()
    assert_close(result, from_torch(torch.addmm(to_torch(s), to_torch(m1), to_torch(m2),
                                                beta=0)))
    base = _rand((2, 3), F32, 20)
    target, left, right = _dev(base), _dev(m1), _dev(m2)
    beta = openacl.create_scalar(1.5, openacl.ACL_FLOAT)
    alpha = openacl.create_scalar(-1, openacl.ACL_INT64)
    ws, exe = aclnn.inplace_addmm_get_workspace_size(target, left, right, beta, alpha, 0)
    aclnn.inplace_addmm(0, ws, exe, 0)
    assert_close(target.numpy(), from_torch(torch.addmm(to_torch(base), to_torch(m1),
                                                        to_torch(m2), beta=1.5, alpha=-1)))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_baddbmm_matches_torch(dtype):
    s, b1, b2 = _rand((1, 5), dtype, 21), _rand((2, 3, 4), dtype, 22), _rand((2, 4, 5), dtype,
                                                                            23)
    golden = from_torch(torch.baddbmm(to_torch(s), to_torch(b1), to_torch(b2), beta=2.0,
                                      alpha=0.5))
    assert_close(openacl.ops.baddbmm(_dev(s), _dev(b1), _dev(b2), 2.0, 0.5).numpy(), golden,
                 f"baddbmm {dtype}")


def test_inplace_baddbmm_with_strided_operands():
    base, b1, b2 = _rand((2, 3, 5), F32, 24), _rand((2, 3, 4), F32, 25), _rand((2, 4, 5), F32,
                                                                              26)
    target, left, right = strided(base), strided(b1, "transpose"), strided(b2)
    one = openacl.create_scalar(1, openacl.ACL_INT32)
    ws, exe = aclnn.inplace_baddbmm_get_workspace_size(target, left, right, one, one, 1)
    aclnn.inplace_baddbmm(0, ws, exe, 0)
    assert_close(target.numpy(), from_torch(torch.baddbmm(to_torch(base), to_torch(b1),
                                                          to_torch(b2))))


# -- Einsum --------------------------------------------------------------------------------------
EINSUM_CASES = [
    ("abcd,abced->abce", [(1, 2, 3, 4), (1, 2, 3, 5, 4)]),  # CANN's registered equations
    ("a,b->ab", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),          # implicit output
    ("ii->i", [(4, 4)]),                  # diagonal
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij->ij", [(2, 3, 4)]),           # ellipsis dims summed (torch)
    ("i,i->", [(3,), (1,)]),              # a size-1 label broadcasts
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
@pytest.mark.parametrize("dtype", [*FLOATS, np.dtype(np.int32), np.dtype(np.int64)], ids=str)
def test_einsum_matches_torch(equation, shapes, dtype):
    arrays = [_rand(shape, dtype, 30 + i) for i, shape in enumerate(shapes)]
    # golden in float64 (torch rounds float16 between the contractions of a 3-operand
    # equation); torch widens some integer reductions to int64 where aclnnEinsum keeps the
    # operands' dtype, so the golden is cast back to it
    wide = [a.astype(np.float64) if dtype.kind != "i" else a for a in arrays]
    golden = from_torch(torch.einsum(equation, *[to_torch(a) for a in wide])).astype(dtype)
    assert_close(openacl.ops.einsum([_dev(a) for a in arrays], equation).numpy(), golden,
                 f"einsum {equation} {dtype}")


def test_einsum_strided_operands_two_phase():
    a, b = _rand((3, 4), F32, 40), _rand((4, 5), F32, 41)
    left, right = strided(a, "transpose"), strided(b)
    out = openacl.empty((3, 5), np.float32)
    ws, exe = aclnn.einsum_get_workspace_size([left, right], "ij,jk->ik", out)
    aclnn.einsum(0, ws, exe, 0)
    assert_close(out.numpy(), a @ b)


# -- phase-1 errors ------------------------------------------------------------------------------
def _error(fn, *args):
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value


def test_matmul_family_errors():
    a, b = _dev(np.ones((2, 3), np.float32)), _dev(np.ones((3, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    for args, code, name in [
        ((None, b, out, 0), ACLNN_ERR_PARAM_NULLPTR, "'self'"),
        ((a, None, out, 0), ACLNN_ERR_PARAM_NULLPTR, "'mat2'"),
        ((a, b, None, 0), ACLNN_ERR_PARAM_NULLPTR, "'out'"),
        ((a, a, out, 0), ACLNN_ERR_PARAM_INVALID, "'mat2'"),           # reduce dims differ
        ((a, b, openacl.empty((4, 2), np.float32), 0), ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((a, b, openacl.empty((2, 4), np.int32), 0), ACLNN_ERR_PARAM_INVALID, "'out'"),
        ((a, b, out, 5), ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        ((a, b, out, -1), ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        ((_dev(np.ones((2, 3), np.int32)), b, out, 0), ACLNN_ERR_PARAM_INVALID, "'self'"),
        ((_dev(np.float32(1)), b, out, 0), ACLNN_ERR_PARAM_INVALID, "'self'"),  # 0-dim
        ((_dev(np.ones((1,) * 7, np.float32)), b, out, 0), ACLNN_ERR_PARAM_INVALID, "'self'"),
        ((_dev(np.ones((2, 2, 3), np.float32)), _dev(np.ones((3, 3, 4), np.float32)), out, 0),
         ACLNN_ERR_PARAM_INVALID, "'mat2'"),                              # batch mismatch
    ]:
        error = _error(aclnn.matmul_get_workspace_size, *args)
        assert error.code == code and name in error.message, (args, error.message)
    error = _error(aclnn.mm_get_workspace_size, _dev(np.ones(3, np.float32)), b, out, 0)
    assert error.code == ACLNN_ERR_PARAM_INVALID and "'self'" in error.message
    bad_batch = _error(aclnn.batch_mat_mul_get_workspace_size,
                       _dev(np.ones((2, 2, 3), np.float32)), _dev(np.ones((3, 3, 4), np.float32)),
                       openacl.empty((3, 2, 4), np.float32), 0)
    assert bad_batch.code == ACLNN_ERR_PARAM_INVALID and "'mat2'" in bad_batch.message
    fp32_add = _error(aclnn.batch_mat_mul_get_workspace_size,
                      _dev(np.ones((1, 2, 3), np.float32)), _dev(np.ones((1, 3, 4), np.float32)),
                      openacl.empty((1, 2, 4), np.float32), 4)
    assert fp32_add.code == ACLNN_ERR_PARAM_INVALID and "'cubeMathType'" in fp32_add.message


def test_addmm_baddbmm_errors():
    m1, m2 = _dev(np.ones((2, 3), np.float32)), _dev(np.ones((3, 4), np.float32))
    one = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
    out = openacl.empty((2, 4), np.float32)
    bad_bias = _error(aclnn.addmm_get_workspace_size, _dev(np.ones((3, 4), np.float32)), m1, m2,
                      one, one, out, 0)
    assert bad_bias.code == ACLNN_ERR_PARAM_INVALID and "'self'" in bad_bias.message
    null_beta = _error(aclnn.addmm_get_workspace_size, _dev(np.ones(4, np.float32)), m1, m2,
                       None, one, out, 0)
    assert null_beta.code == ACLNN_ERR_PARAM_NULLPTR and "'beta'" in null_beta.message
    complex_alpha = openacl.create_scalar(1j, openacl.ACL_COMPLEX64)
    bad_alpha = _error(aclnn.addmm_get_workspace_size, _dev(np.ones(4, np.float32)), m1, m2,
                       one, complex_alpha, out, 0)
    assert bad_alpha.code == ACLNN_ERR_PARAM_INVALID and "'alpha'" in bad_alpha.message
    not_3d = _error(aclnn.baddbmm_get_workspace_size, _dev(np.ones(4, np.float32)), m1, m2,
                    one, one, out, 0)
    assert not_3d.code == ACLNN_ERR_PARAM_INVALID and "'batch1'" in not_3d.message
    inplace_shape = _error(aclnn.inplace_addmm_get_workspace_size,
                           _dev(np.ones((1, 4), np.float32)), m1, m2, one, one, 0)
    assert inplace_shape.code == ACLNN_ERR_PARAM_INVALID and "'selfRef'" in inplace_shape.message


def test_einsum_errors():
    a, b = _dev(np.ones((2, 3), np.float32)), _dev(np.ones((3, 4), np.float32))
    out = openacl.empty((2, 4), np.float32)
    for args, code, name in [
        ((None, "ij,jk->ik", out), ACLNN_ERR_PARAM_NULLPTR, "'tensors'"),
        (([a, b], "ij,jk->ik", None), ACLNN_ERR_PARAM_NULLPTR, "'output'"),
        (([a, b], "ij->ij", out), ACLNN_ERR_PARAM_INVALID, "'equation'"),      # 1 term, 2 ops
        (([a, b], "ij,jk->iz", out), ACLNN_ERR_PARAM_INVALID, "'equation'"),   # unknown label
        (([a, b], "ij,jk->ii", out), ACLNN_ERR_PARAM_INVALID, "'equation'"),   # repeated
        (([a, b], "i1,jk->ik", out), ACLNN_ERR_PARAM_INVALID, "'equation'"),   # bad char
        (([a, b], "ijk,jk->ik", out), ACLNN_ERR_PARAM_INVALID, "'tensors'"),   # rank
        (([a, a], "ij,jk->ik", out), ACLNN_ERR_PARAM_INVALID, "'tensors'"),    # size clash
        (([a, _dev(np.ones((3, 4), np.float16))], "ij,jk->ik", out), ACLNN_ERR_PARAM_INVALID,
         "'tensors'"),                                                         # mixed dtypes
        (([a, b], "ij,jk->ik", openacl.empty((2, 4), np.float16)), ACLNN_ERR_PARAM_INVALID,
         "'output'"),
        (([a, b], "ij,jk->ki", out), ACLNN_ERR_PARAM_INVALID, "'output'"),
        (([_dev(np.ones(3, np.bool_))], "i->i", openacl.empty((3,), np.bool_)),
         ACLNN_ERR_PARAM_INVALID, "'tensors'"),
    ]:
        error = _error(aclnn.einsum_get_workspace_size, *args)
        assert error.code == code and name in error.message, (args, error.message)


# -- FusedMatmul ---------------------------------------------------------------------------------
def _golden_fused(x1, x2, bias, x3, fused):
    """OP(x1 @ x2 + bias, x3) in float64, rounded once to the inputs' dtype."""
    product = torch.matmul(to_torch(x1).double(), to_torch(x2).double())
    if bias is not None:
        product = product + to_torch(bias).double()
    if fused == "relu":
        product = torch.relu(product)
    elif fused == "add":
        product = product + to_torch(x3).double()
    elif fused == "mul":
        product = product * to_torch(x3).double()
    elif fused in ("gelu_erf", "gelu_tanh"):
        product = torch.nn.functional.gelu(
            product, approximate="tanh" if fused == "gelu_tanh" else "none")
    dtype = torch.float32 if fused == "16cast32" else to_torch(x1).dtype
    return from_torch(product.to(dtype))


@pytest.mark.parametrize("fused, shape1, shape2, bias_shape, x3_shape", [
    ("", (3, 4), (4, 5), (5,), None),
    ("", (2, 1, 3, 4), (2, 1, 4, 5), None, None),           # batch dims, no bias
    ("relu", (3, 4), (4, 5), (1, 5), None),
    ("relu", (2, 3, 3, 4), (2, 3, 4, 5), (5,), None),
    ("add", (3, 4), (4, 5), (5,), (3, 5)),
    ("add", (2, 3, 4), (2, 4, 5), None, (1, 3, 5)),          # x3's batch of 1 broadcast
    ("mul", (2, 3, 4), (2, 4, 5), (3, 5), (3, 5)),           # 2-D x3 for a 3-D y
    ("gelu_erf", (3, 4), (4, 5), None, None),
    ("gelu_tanh", (3, 4), (4, 5), None, None),
], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_fused_matmul_matches_torch(fused, shape1, shape2, bias_shape, x3_shape, dtype):
    x1, x2 = _rand(shape1, dtype, 1), _rand(shape2, dtype, 2)
    bias = None if bias_shape is None else _rand(bias_shape, dtype, 3)
    x3 = None if x3_shape is None else _rand(x3_shape, dtype, 4)
    result = openacl.ops.fused_matmul(
        _dev(x1), _dev(x2), None if bias is None else _dev(bias), None if x3 is None else
        _dev(x3), fusedOpType=fused, cubeMathType=0)
    assert_close(result.numpy(), _golden_fused(x1, x2, bias, x3, fused), f"{fused} {dtype}")


@pytest.mark.parametrize("fused, bias_shape, x3", [
    ("", (256,), False), ("relu", (1, 256), False), ("relu", None, False),
    ("add", (256,), True), ("mul", (256,), True), ("gelu_erf", None, False),
    ("gelu_tanh", None, False),
], ids=str)
@pytest.mark.parametrize("rows", [256, 2])
def test_fused_matmul_with_a_constant_weight(fused, bias_shape, x3, rows):
    """A model's constant weight (the engine's bound kernels): packed once for openacl's
    GEMM, bias and ReLU in its tiles; the second run uses the packed copy. Two rows (a
    decoder's tokens) too: the few-row kernels."""
    from openacl.ops import native
    from openacl.ops.executor import find_executor

    rng = np.random.default_rng(5)

    def integers(shape):  # small integers: every product and sum exact in float32
        return rng.integers(-3, 4, shape).astype(np.float32)

    x1, x2 = integers((rows, 16)), integers((16, 256))
    bias = None if bias_shape is None else integers(bias_shape)
    third = integers((rows, 256)) if x3 else None
    y = openacl.empty((rows, 256), np.float32)
    tensors = [_dev(x1), _dev(x2), None if bias is None else _dev(bias),
               None if third is None else _dev(third)]  # (alive while the kernel runs)
    ws, exe = aclnn.fused_matmul_get_workspace_size(*tensors, fused, 0, y)
    run = find_executor(exe).bound_kernel(None, frozenset({"x2", "bias"}))
    if type(run.args[0]["y"]) is not np.ndarray:
        pytest.skip("the CUDA backends multiply with cuBLAS; the packed GEMM is the CPU's")
    expected = _golden_fused(x1, x2, bias, third, fused)
    for _ in range(2):
        run()
        assert_close(y.numpy(), expected, fused)
    packed = [value for value in run.args[0].derived.values()
              if isinstance(value, native.PackedMatrix)]
    assert len(packed) == (native.kernels() is not None)


@pytest.mark.parametrize("fused, bias_shape, x3", [
    ("", (5,), False), ("relu", (1, 5), False), ("relu", None, False), ("add", None, True),
    ("mul", (5,), True),
], ids=str)
def test_fused_matmul_small_bound_kernel_reads_new_values(fused, bias_shape, x3):
    """A small product (numpy's matmul, planned once on the bound views) computes from the
    values its inputs hold at each run, not those of the first."""
    from openacl.ops.executor import find_executor

    rng = np.random.default_rng(9)
    x1, x2 = _rand((3, 4), np.float32, 1), _rand((4, 5), np.float32, 2)
    bias = None if bias_shape is None else _rand(bias_shape, np.float32, 3)
    third = _rand((3, 5), np.float32, 4) if x3 else None
    y = openacl.empty((3, 5), np.float32)
    tensors = [_dev(x1), _dev(x2), None if bias is None else _dev(bias),
               None if third is None else _dev(third)]
    ws, exe = aclnn.fused_matmul_get_workspace_size(*tensors, fused, 0, y)
    run = find_executor(exe).bound_kernel(None, frozenset({"x2", "bias"}))
    views = run.args[0]
    if type(views["y"]) is not np.ndarray:
        pytest.skip("the CUDA backends multiply with cuBLAS")
    for _ in range(3):
        run()
        assert_close(y.numpy(), _golden_fused(x1, x2, bias, third, fused), fused)
        x1 = rng.uniform(-2, 2, x1.shape).astype(np.float32)
        views["x1"][...] = x1
        if x3:
            third = rng.uniform(-2, 2, third.shape).astype(np.float32)
            views["x3"][...] = third


def test_fused_matmul_16cast32_relu_nan_and_ignored_operands():
    x1, x2 = _rand((3, 4), np.float16, 1), _rand((4, 5), np.float16, 2)
    bias = _rand((5,), np.float16, 3)
    y, operands = openacl.empty((3, 5), np.float32), [_dev(x1), _dev(x2), _dev(bias)]
    ws, exe = aclnn.fused_matmul_get_workspace_size(*operands, None, "16cast32", 0, y)
    aclnn.fused_matmul(0, ws, exe, 0)
    assert_close(y.numpy(), _golden_fused(x1, x2, bias, None, "16cast32"))
    # relu keeps NaN (as torch.relu); an x3 given with "relu" is ignored (CANN: pass null)
    nan = np.array([[np.nan, 1.0], [-1.0, 2.0]], np.float32)
    eye = np.eye(2, dtype=np.float32)
    got = openacl.ops.fused_matmul(_dev(nan), _dev(eye), None, _dev(np.full((2, 2), 9.0,
                                   np.float32)), fusedOpType="relu", cubeMathType=0).numpy()
    np.testing.assert_array_equal(got, [[np.nan, np.nan], [0.0, 2.0]])  # NaN * 0 is NaN


def test_fused_matmul_errors():
    a, b = _dev(np.ones((2, 3), np.float32)), _dev(np.ones((3, 4), np.float32))
    bias = _dev(np.ones(4, np.float32))
    out = openacl.empty((2, 4), np.float32)
    a3, b3 = _dev(np.ones((2, 2, 3), np.float32)), _dev(np.ones((2, 3, 4), np.float32))
    out3 = openacl.empty((2, 2, 4), np.float32)
    half = _dev(np.ones((2, 3), np.float16))
    for args, code, name in [
        ((None, b, bias, None, "", 0, out), ACLNN_ERR_PARAM_NULLPTR, "'x1'"),
        ((a, b, bias, None, None, 0, out), ACLNN_ERR_PARAM_NULLPTR, "'fusedOpType'"),
        ((a, b, bias, None, "sigmoid", 0, out), ACLNN_ERR_PARAM_INVALID, "'fusedOpType'"),
        ((a, b, bias, None, "gelu_erf", 0, out), ACLNN_ERR_PARAM_NULLPTR, "'bias'"),
        ((a, b, None, None, "add", 0, out), ACLNN_ERR_PARAM_NULLPTR, "'x3'"),
        ((a, b, None, _dev(np.ones((2, 5), np.float32)), "mul", 0, out),
         ACLNN_ERR_PARAM_INVALID, "'x3'"),
        ((a, b, None, _dev(np.ones((3, 2, 4), np.float32)), "add", 0, out),
         ACLNN_ERR_PARAM_INVALID, "'x3'"),                   # 3-D x3 for a 2-D y
        ((a, b, _dev(np.ones(5, np.float32)), None, "", 0, out), ACLNN_ERR_PARAM_INVALID,
         "'bias'"),
        ((a, b, _dev(np.ones((1, 1, 4), np.float32)), None, "", 0, out),
         ACLNN_ERR_PARAM_INVALID, "'bias'"),                 # 3 dims
        ((a3, b, None, None, "", 0, out3), ACLNN_ERR_PARAM_INVALID, "'x2'"),  # no broadcast
        ((a3, b3, None, None, "gelu_tanh", 0, out3), ACLNN_ERR_PARAM_INVALID, "'x1'"),  # 2-D
        ((a, a, None, None, "", 0, out), ACLNN_ERR_PARAM_INVALID, "'x2'"),    # reduce dims
        ((a, b, None, None, "16cast32", 0, out), ACLNN_ERR_PARAM_INVALID, "'x1'"),  # fp32 in
        ((half, _dev(np.ones((3, 4), np.float16)), None, None, "16cast32", 0,
          openacl.empty((2, 4), np.float16)), ACLNN_ERR_PARAM_INVALID, "'y'"),
        ((a, b, None, None, "relu", 0, openacl.empty((2, 4), np.float16)),
         ACLNN_ERR_PARAM_INVALID, "'y'"),                    # y must have the result dtype
        ((a, b, None, None, "relu", 7, out), ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        ((a, b, None, None, "relu", 0, None), ACLNN_ERR_PARAM_NULLPTR, "'y'"),
    ]:
        error = _error(aclnn.fused_matmul_get_workspace_size, *args)
        assert error.code == code and name in error.message, (args[4], error.message)


@pytest.mark.parametrize("fused, alias", [("add", "x3"), ("mul", "x3"), ("", "bias"),
                                          ("relu", "bias")])
def test_fused_matmul_y_may_be_its_own_addend(fused, alias):
    # y == x3 (or y == bias) is a legal in-place call: the addend is read after the product
    x1, x2 = _rand((3, 4), F32, 1), _rand((4, 5), F32, 2)
    addend = _rand((3, 5), F32, 3)
    target = _dev(addend)
    operands = [_dev(x1), _dev(x2)]
    bias, x3 = (target, None) if alias == "bias" else (None, target)
    ws, exe = aclnn.fused_matmul_get_workspace_size(*operands, bias, x3, fused, 0, target)
    aclnn.fused_matmul(0, ws, exe, 0)
    golden = _golden_fused(x1, x2, addend if alias == "bias" else None,
                           addend if alias == "x3" else None, fused)
    assert_close(target.numpy(), golden, f"{fused} y is {alias}")


# -- Mv, Addmv, Addbmm, Gemm ---------------------------------------------------------------------
def _golden(fn, *arrays, dtype, **kwargs):
    """``fn`` of the arrays in float64 (or int64 for integers), rounded once into ``dtype``."""
    wide = torch.float64 if np.dtype(dtype).kind == "f" or dtype == BF16 else None
    tensors = [to_torch(a).to(wide) if wide else to_torch(a) for a in arrays]
    result = fn(*tensors, **kwargs)
    return from_torch(result.to(to_torch(np.zeros(0, dtype)).dtype))


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16), F32], ids=str)
@pytest.mark.parametrize("shape", [(5, 7), (1, 1), (0, 3), (4, 0)], ids=str)
def test_mv_matches_torch(dtype, shape):
    a, v = _rand(shape, dtype, 30), _rand(shape[1:], dtype, 31)
    assert_close(openacl.ops.mv(_dev(a), _dev(v)).numpy(), _golden(torch.mv, a, v, dtype=dtype),
                 f"mv {shape} {dtype}")


@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(t) for t in (np.int8, np.uint8,
                                                                  np.int16, np.int32,
                                                                  np.int64)], ids=str)
@pytest.mark.parametrize("factors", [(1, 1), (-2, 0), (2, -1)], ids=str)
def test_addmv_matches_torch(dtype, factors):
    alpha, beta = factors
    if dtype == np.uint8:
        alpha, beta = abs(alpha), abs(beta)
    s, m, v = _rand((6,), dtype, 32), _rand((6, 9), dtype, 33), _rand((9,), dtype, 34)
    if dtype.kind in "iu":  # the product wraps in the dtype, as torch's
        golden = from_torch(torch.addmv(to_torch(s), to_torch(m), to_torch(v), alpha=alpha,
                                        beta=beta))
    else:
        golden = _golden(torch.addmv, s, m, v, dtype=dtype, alpha=alpha, beta=beta)
    got = openacl.ops.addmv(_dev(s), _dev(m), _dev(v), alpha, beta).numpy()
    assert_close(got, golden, f"addmv {dtype} {factors}")


def test_addmv_broadcasts_self_and_ignores_it_when_beta_is_zero():
    m, v = _rand((4, 3), F32, 35), _rand((3,), F32, 36)
    one = np.array([1.5], np.float32)
    assert_close(openacl.ops.addmv(_dev(one), _dev(m), _dev(v), 2.0, 1.0).numpy(),
                 (2 * (m.astype(np.float64) @ v) + 1.5).astype(np.float32))
    nan = np.full(4, np.nan, np.float32)
    got = openacl.ops.addmv(_dev(nan), _dev(m), _dev(v), 1.0, 0.0).numpy()
    assert_close(got, (m.astype(np.float64) @ v).astype(np.float32))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("bias_shape", [(3, 5), (5,), (3, 1)], ids=str)
def test_addbmm_matches_torch(dtype, bias_shape):
    s, b1, b2 = (_rand(bias_shape, dtype, 37), _rand((4, 3, 6), dtype, 38),
                 _rand((4, 6, 5), dtype, 39))
    golden = _golden(torch.addbmm, s, b1, b2, dtype=dtype, beta=0.5, alpha=-2.0)
    got = openacl.ops.addbmm(_dev(s), _dev(b1), _dev(b2), 0.5, -2.0).numpy()
    assert_close(got, golden, f"addbmm {dtype} {bias_shape}")


def test_inplace_addbmm_and_empty_batch():
    s, b1, b2 = _rand((3, 5), F32, 40), _rand((2, 3, 4), F32, 41), _rand((2, 4, 5), F32, 42)
    target = _dev(s)
    openacl.ops.inplace_addbmm(target, _dev(b1), _dev(b2), 1.0, 1.0)
    assert_close(target.numpy(), _golden(torch.addbmm, s, b1, b2, dtype=F32))
    empty1, empty2 = np.zeros((0, 3, 4), np.float32), np.zeros((0, 4, 5), np.float32)
    assert_close(openacl.ops.addbmm(_dev(s), _dev(empty1), _dev(empty2), 2.0, 1.0).numpy(),
                 2 * s)


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16), F32], ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=str)
@pytest.mark.parametrize("c_shape", [(3, 5), (1, 5), (3, 1)], ids=str)
def test_gemm_matches_torch(dtype, trans, c_shape):
    trans_a, trans_b = trans
    a = _rand((4, 3) if trans_a else (3, 4), dtype, 43)
    b = _rand((5, 4) if trans_b else (4, 5), dtype, 44)
    c = _rand(c_shape, dtype, 45)

    def reference(a, b, c):
        return 1.5 * (a.T if trans_a else a) @ (b.T if trans_b else b) + 0.5 * c
    got = openacl.ops.gemm(_dev(a), _dev(b), _dev(c), 1.5, 0.5, trans_a, trans_b).numpy()
    assert_close(got, _golden(reference, a, b, c, dtype=dtype), f"gemm {dtype} {trans}")


def test_mv_addmv_addbmm_gemm_errors():
    f32 = np.ones((2, 3), np.float32)
    one = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
    for fn, args, code, name in [
        (aclnn.mv_get_workspace_size, (None, _dev(np.ones(3, np.float32)),
                                       openacl.empty((2,), np.float32), 0),
         ACLNN_ERR_PARAM_NULLPTR, "'self'"),
        (aclnn.mv_get_workspace_size, (_dev(f32), _dev(np.ones(2, np.float32)),
                                       openacl.empty((2,), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'vec'"),                                # reduce dims
        (aclnn.mv_get_workspace_size, (_dev(f32), _dev(np.ones(3, np.float16)),
                                       openacl.empty((2,), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'vec'"),                                # dtypes differ
        (aclnn.mv_get_workspace_size, (_dev(f32), _dev(np.ones(3, np.float32)),
                                       openacl.empty((2,), np.float32), 4),
         ACLNN_ERR_PARAM_INVALID, "'cubeMathType'"),
        (aclnn.mv_get_workspace_size, (_dev(np.ones((2, 3), np.int32)),
                                       _dev(np.ones(3, np.int32)),
                                       openacl.empty((2,), np.int32), 0),
         ACLNN_ERR_PARAM_INVALID, "'self'"),
        (aclnn.addmv_get_workspace_size, (_dev(np.ones(3, np.float32)), _dev(f32),
                                          _dev(np.ones(3, np.float32)), one, one,
                                          openacl.empty((2,), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'self'"),                               # no broadcast
        (aclnn.addmv_get_workspace_size, (_dev(np.ones(2, np.float32)), _dev(f32),
                                          _dev(np.ones(3, np.float32)), None, one,
                                          openacl.empty((2,), np.float32), 0),
         ACLNN_ERR_PARAM_NULLPTR, "'alpha'"),
        (aclnn.addmv_get_workspace_size, (_dev(np.ones(2, bool)), _dev(np.ones((2, 3), bool)),
                                          _dev(np.ones(3, bool)), one, one,
                                          openacl.empty((2,), bool), 0),
         ACLNN_ERR_PARAM_INVALID, "'out'"),                                # bool result
        (aclnn.addbmm_get_workspace_size, (_dev(np.ones((2, 4), np.float32)),
                                           _dev(np.ones((2, 2, 3), np.float32)),
                                           _dev(np.ones((3, 3, 4), np.float32)), one, one,
                                           openacl.empty((2, 4), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'batch2'"),                             # batches differ
        (aclnn.gemm_get_workspace_size, (_dev(f32), _dev(f32), _dev(np.ones((2, 3),
                                                                             np.float32)),
                                         1.0, 1.0, 0, 0, openacl.empty((2, 3), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'B'"),                                  # K mismatch
        (aclnn.gemm_get_workspace_size, (_dev(f32), _dev(f32), _dev(np.ones((3, 2),
                                                                             np.float32)),
                                         1.0, 1.0, 0, 1, openacl.empty((2, 2), np.float32), 0),
         ACLNN_ERR_PARAM_INVALID, "'C'"),                                  # no broadcast
        (aclnn.gemm_get_workspace_size, (_dev(f32), _dev(f32), None, 1.0, 1.0, 0, 1,
                                         openacl.empty((2, 2), np.float32), 0),
         ACLNN_ERR_PARAM_NULLPTR, "'C'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (fn.__name__, error.message)


# -- FusedLinearOnlineMaxSum, FusedLinearCrossEntropyLossGrad --------------------------------
def _shard(dtype, seed, rows=12, hidden=16, vocab=130):
    rng = np.random.default_rng(seed)
    x, w = _rand((rows, hidden), dtype, seed), _rand((vocab, hidden), dtype, seed + 1)
    target = rng.integers(0, 400, rows).astype(np.int64)
    target[:3] = [100, 229, 230]  # the shard's first and last index, and one past it
    return x, w, target


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16)], ids=str)
def test_fused_linear_online_max_sum_matches_torch(dtype):
    x, w, target = _shard(dtype, 50)
    logits = (to_torch(x).double() @ to_torch(w).double().T).float().double()
    peak = logits.max(-1)[0]
    shifted = logits - peak[:, None]
    tt = torch.from_numpy(target)
    off = (tt < 100) | (tt >= 230)
    local = torch.where(off, 0, tt - 100)
    got = openacl.ops.fused_linear_online_max_sum(_dev(x), _dev(w), _dev(target), 100, 230)
    assert len(got) == 6
    for out, want in zip(got[:3], (peak, shifted.exp().sum(-1), torch.where(
            off, 0.0, shifted[torch.arange(12), local])), strict=True):
        assert_close(out.numpy(), want.float().numpy())
    assert np.array_equal(got[3].numpy(), np.packbits(off.numpy(), bitorder="little"))
    assert np.array_equal(got[4].numpy(), local.numpy())
    assert_close(got[5].numpy(), from_torch(logits.to(to_torch(np.zeros(0, dtype)).dtype)))


def test_fused_linear_online_max_sum_without_the_logits_output_and_errors():
    x, w, target = _shard(BF16, 51)
    outs = [openacl.empty((12,), np.float32) for _ in range(3)] + [
        openacl.empty((2,), np.uint8), openacl.empty((12,), np.int64)]
    tensors = [_dev(x), _dev(w), _dev(target)]
    ws, exe = aclnn.fused_linear_online_max_sum_get_workspace_size(*tensors, 0, 130, *outs,
                                                                   None)
    aclnn.fused_linear_online_max_sum(0, ws, exe, 0)
    peak = (to_torch(x).double() @ to_torch(w).double().T).max(-1)[0]
    assert_close(outs[0].numpy(), peak.float().numpy())
    fn = aclnn.fused_linear_online_max_sum_get_workspace_size
    for args, name in [
        ((tensors[0], _dev(np.ones((130, 8), BF16)), tensors[2], 0, 130, *outs, None),
         "'weight'"),
        ((tensors[0], _dev(np.ones((130, 16), np.float16)), tensors[2], 0, 130, *outs, None),
         "'weight'"),
        ((tensors[0], tensors[1], _dev(np.ones(5, np.int64)), 0, 130, *outs, None), "'target'"),
        ((tensors[0], tensors[1], _dev(np.ones(12, np.float32)), 0, 130, *outs, None),
         "'target'"),
        ((*tensors, 10, 200, *outs, None), "'vocabEndIndex'"),
        ((*tensors, 0, 130, *outs[:3], openacl.empty((12,), np.uint8), outs[4], None),
         "'targetMaskOut'"),
    ]:
        error = _error(fn, *args)
        assert error.code == ACLNN_ERR_PARAM_INVALID and name in error.message, error.message


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16)], ids=str)
@pytest.mark.parametrize("form", ["softmax", "recomputed", "bool mask"])
def test_fused_linear_cross_entropy_loss_grad_matches_torch(dtype, form):
    x, w, target = _shard(dtype, 52)
    tt = torch.from_numpy(target)
    off = (tt < 100) | (tt >= 230)
    local = torch.where(off, 0, tt - 100).to(torch.int32)
    grad = np.random.default_rng(53).uniform(0, 1, 12).astype(np.float32)
    logits = to_torch(x).double() @ to_torch(w).double().T
    peak, total = logits.max(-1)[0], (logits - logits.max(-1)[0][:, None]).exp().sum(-1)
    probabilities = torch.softmax(logits, -1)
    mask = off.numpy() if form == "bool mask" else np.packbits(off.numpy(), bitorder="little")
    inputs = [_dev(grad), _dev(x), _dev(w), _dev(mask), _dev(local.numpy()), 0.0]
    if form == "recomputed":
        inputs += [_dev(peak.float().numpy()), _dev(total.float().numpy()), None]
    else:
        inputs += [None, None, _dev(probabilities.float().numpy())]
    grad_input, grad_weight = openacl.ops.fused_linear_cross_entropy_loss_grad(*inputs)
    wanted = probabilities.clone()
    wanted[torch.arange(12), local.long()] -= (~off).double()
    wanted = wanted * torch.from_numpy(grad).double()[:, None]
    half = to_torch(np.zeros(0, dtype)).dtype
    assert_close(grad_input.numpy(), from_torch((wanted @ to_torch(w).double()).to(half)))
    assert_close(grad_weight.numpy(), from_torch((wanted.T @ to_torch(x).double()).to(half)))


def test_fused_linear_cross_entropy_loss_grad_errors():
    x, w, target = _shard(BF16, 54)
    grad, local = _dev(np.ones(12, np.float32)), _dev(np.zeros(12, np.int32))
    mask, softmax = _dev(np.zeros(2, np.uint8)), _dev(np.zeros((12, 130), np.float32))
    outs = [openacl.empty((12, 16), BF16), openacl.empty((130, 16), BF16)]
    fn = aclnn.fused_linear_cross_entropy_loss_grad_get_workspace_size
    xd, wd = _dev(x), _dev(w)
    for args, code, name in [
        ((None, xd, wd, mask, local, 0.0, None, None, softmax, *outs),
         ACLNN_ERR_PARAM_NULLPTR, "'grad'"),
        ((grad, xd, wd, mask, local, 0.1, None, None, softmax, *outs),
         ACLNN_ERR_PARAM_INVALID, "'labelSmoothing'"),
        ((grad, xd, wd, mask, local, 0.0, None, None, None, *outs),
         ACLNN_ERR_PARAM_INVALID, "'logitsMaxOptional'"),
        ((grad, xd, wd, _dev(np.zeros(1, np.uint8)), local, 0.0, None, None, softmax, *outs),
         ACLNN_ERR_PARAM_INVALID, "'targetMask'"),
        ((grad, xd, _dev(np.ones((64, 16), BF16)), mask, local, 0.0, None, None, softmax,
          *outs), ACLNN_ERR_PARAM_INVALID, "'weight'"),           # vocab < 128
        ((grad, xd, wd, mask, local, 0.0, None, None, _dev(np.zeros((12, 4), np.float32)),
          *outs), ACLNN_ERR_PARAM_INVALID, "'softmaxOptional'"),
        ((grad, xd, wd, mask, local, 0.0, None, None, softmax, outs[0],
          openacl.empty((130, 16), np.float32)), ACLNN_ERR_PARAM_INVALID, "'weightGradOut'"),
    ]:
        error = _error(fn, *args)
        assert error.code == code and name in error.message, (name, error.message)


@pytest.mark.parametrize("rows, cols", [(1, 768), (2, 768), (5, 768), (7, 768), (1, 8)])
@pytest.mark.parametrize("op", ["matmul", "addmm"])
def test_few_rows_times_a_constant_weight(op, rows, cols):
    """A model's constant right operand (the engine's bound kernels) is packed once, at its
    first product, which then runs on the packed GEMM, one row included (its kernels for
    tiles of fewer than 6 rows: a decoder's tokens, a matrix-vector product); a product too
    thin for it (fewer than 16 columns) stays numpy's and packs nothing. Small integers:
    every sum exact."""
    from openacl.ops import native
    from openacl.ops.executor import find_executor

    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (rows, 256)).astype(np.float32)
    w = rng.integers(-3, 4, (256, cols)).astype(np.float32)
    bias = rng.integers(-5, 6, (cols,)).astype(np.float32)
    out = openacl.empty((rows, cols), np.float32)
    tensors = [_dev(a), _dev(w), _dev(bias)]  # (alive while the kernel runs)
    if op == "matmul":
        ws, exe = aclnn.matmul_get_workspace_size(tensors[0], tensors[1], out, 0)
        expected = a.astype(np.float64) @ w
    else:
        one = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
        ws, exe = aclnn.addmm_get_workspace_size(tensors[2], tensors[0], tensors[1], one, one,
                                                 out, 0)
        expected = a.astype(np.float64) @ w + bias
    name = "mat2"
    run = find_executor(exe).bound_kernel(None, frozenset({name, "self"} if op == "addmm"
                                                          else {name}))
    if type(run.args[0]["out"]) is not np.ndarray:
        pytest.skip("the CUDA backends multiply with cuBLAS; the packed GEMM is the CPU's")
    for _ in range(2):
        run()
        np.testing.assert_array_equal(out.numpy(), expected.astype(np.float32))
    packed = [value for value in run.args[0].derived.values()
              if isinstance(value, native.PackedMatrix)]
    # packed only where the packed GEMM takes the product
    assert len(packed) == (native.kernels() is not None and cols >= native.FEW_COLUMNS)
