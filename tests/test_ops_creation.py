"""Eye, Range, Linspace, InplaceOne and Repeat against PyTorch CPU; their refusals with
CANN's codes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from op_harness import (
    BF16,
    BOOL,
    FLOATS,
    INTS,
    TORCH_DTYPES,
    assert_close,
    from_torch,
    random_array,
    strided,
    to_torch,
)
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError

HALF_FLOATS = FLOATS[:3]


pytestmark = pytest.mark.filterwarnings("ignore:torch.range is deprecated")


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _dev(array):
    return openacl.to_device(np.asarray(array))


def _code(fn, *args) -> int:
    with pytest.raises(AclError) as info:
        fn(*args)
    return info.value.code


def _scalar(value):
    """An aclScalar of ``value`` (int64 or double), or ``value`` itself when None."""
    if value is None:
        return None
    kind = openacl.ACL_INT64 if isinstance(value, int) else openacl.ACL_DOUBLE
    return openacl.create_scalar(value, kind)


def _into(name: str, out: openacl.Tensor, *args) -> np.ndarray:
    """Run aclnn``name`` through the two-phase API into ``out``; its values."""
    workspace, executor = getattr(aclnn, f"{name}_get_workspace_size")(*args, out)
    getattr(aclnn, name)(0, workspace, executor, 0)
    openacl.rt.synchronize_device()
    return out.numpy()


# -- eye -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF_FLOATS + INTS + BOOL, ids=str)
@pytest.mark.parametrize("n,m", [(3, 3), (2, 5), (4, 1), (0, 3), (2, 0)])
def test_eye_matches_torch(dtype, n, m):
    expected = from_torch(torch.eye(n, m, dtype=TORCH_DTYPES[dtype]))
    np.testing.assert_array_equal(_into("eye", openacl.empty((n, m), dtype), n, m), expected)


def test_eye_default_dtype_strided_out_and_refusals():
    assert_close(openacl.ops.eye(3, 2).numpy(), from_torch(torch.eye(3, 2)))
    out = strided(np.full((3, 3), 7, np.float32))
    np.testing.assert_array_equal(_into("eye", out, 3, 3), np.eye(3, dtype=np.float32))
    assert _code(openacl.ops.eye, -1, 2) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.eye_get_workspace_size, 2, 3, openacl.empty((3, 2), np.float32)) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.eye_get_workspace_size, 2, 2, openacl.empty((2, 2), np.float64)) == \
        ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.eye_get_workspace_size, 2, 2, None) == ACLNN_ERR_PARAM_NULLPTR


# -- range and linspace --------------------------------------------------------------------------
@pytest.mark.parametrize("start,end,step", [(1, 4, 1), (0, 1, 0.3), (5, -3, -2), (-2.5, 7, 0.5),
                                            (3, 3, 1), (0, 10, 3)])
def test_range_matches_torch(start, end, step):
    golden = torch.range(start, end, step, dtype=torch.float64)
    assert_close(openacl.ops.range(start, end, step).numpy(),
                 from_torch(golden.float()), f"{start} {end} {step}")
    for dtype in (np.dtype(np.float16), BF16, np.dtype(np.float64)):
        out = openacl.empty((golden.numel(),), dtype)
        assert_close(_into("range", out, *map(_scalar, (start, end, step))),
                     from_torch(golden.to(TORCH_DTYPES[dtype])))
    if all(float(x).is_integer() for x in (start, end, step)):
        out = openacl.empty((golden.numel(),), np.int32)
        np.testing.assert_array_equal(_into("range", out, *map(_scalar, (start, end, step))),
                                      from_torch(torch.range(start, end, step,
                                                             dtype=torch.int32)))


def test_range_refusals():
    assert _code(openacl.ops.range, 0, 5, 0) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.range, 0, 5, -1) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.range, 0, float("inf"), 1) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.range_get_workspace_size, *map(_scalar, (0, 5, 1)),
                 openacl.empty((5,), np.float32)) == ACLNN_ERR_PARAM_INVALID  # has 6 values
    assert _code(aclnn.range_get_workspace_size, *map(_scalar, (0, 5, 1)),
                 openacl.empty((6,), np.int8)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.range_get_workspace_size, *map(_scalar, (0, None, 1)),
                 openacl.empty((6,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR


@pytest.mark.parametrize("start,end,steps", [(-24, 11, 15), (0, 1, 1), (3, -7.5, 64), (2, 2, 4),
                                             (-100, 110, 10), (0, 5, 0)])
def test_linspace_matches_torch(start, end, steps):
    golden = torch.linspace(start, end, steps, dtype=torch.float64)
    assert_close(openacl.ops.linspace(start, end, steps).numpy(), from_torch(golden.float()))
    for dtype in (np.dtype(np.float16), BF16, np.dtype(np.int32), np.dtype(np.int8)):
        out = openacl.empty((steps,), dtype)
        expected = torch.linspace(start, end, steps, dtype=TORCH_DTYPES[dtype]) \
            if dtype.kind == "i" else golden.to(TORCH_DTYPES[dtype])
        result = _into("linspace", out, _scalar(start), _scalar(end), steps)
        assert_close(result, from_torch(expected), str(dtype))


def test_linspace_refusals():
    assert _code(openacl.ops.linspace, 0, 1, -1) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.linspace_get_workspace_size, _scalar(0), _scalar(1), 4,
                 openacl.empty((5,), np.float32)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.linspace_get_workspace_size, _scalar(0), _scalar(1), 4,
                 openacl.empty((4,), np.int64)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.linspace_get_workspace_size, None, _scalar(1), 4,
                 openacl.empty((4,), np.float32)) == ACLNN_ERR_PARAM_NULLPTR


# -- inplace one -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
def test_inplace_one(dtype):
    target = _dev(random_array((3, 4), dtype))
    openacl.ops.inplace_one(target)
    np.testing.assert_array_equal(target.numpy(), np.ones((3, 4), dtype))
    view = strided(np.zeros((2, 3), dtype))
    openacl.ops.inplace_one(view)
    np.testing.assert_array_equal(view.numpy(), np.ones((2, 3), dtype))


def test_inplace_one_refusals():
    assert _code(aclnn.inplace_one_get_workspace_size, None) == ACLNN_ERR_PARAM_NULLPTR
    assert _code(openacl.ops.inplace_one, _dev(np.zeros(2, np.complex64))) == \
        ACLNN_ERR_PARAM_INVALID


# -- repeat --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + BOOL, ids=str)
@pytest.mark.parametrize("shape,repeats", [((3,), (2,)), ((2, 3), (2, 1)), ((2, 3), (3, 1, 2)),
                                           ((4,), (0,)), ((), (2, 3)), ((2, 1, 3), (1, 4, 1))])
def test_repeat_matches_torch(dtype, shape, repeats):
    x = random_array(shape, dtype, np.random.default_rng(2))
    expected = from_torch(to_torch(x).repeat(*repeats))
    np.testing.assert_array_equal(openacl.ops.repeat(_dev(x), list(repeats)).numpy(), expected)


def test_repeat_strided_input_and_refusals():
    x = random_array((2, 3), np.float32)
    np.testing.assert_array_equal(openacl.ops.repeat(strided(x, "transpose"), [2, 2]).numpy(),
                                  np.tile(x, (2, 2)))
    assert _code(openacl.ops.repeat, _dev(x), [2]) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.repeat, _dev(x), [2, -1]) == ACLNN_ERR_PARAM_INVALID
    assert _code(openacl.ops.repeat, _dev(x), [1] * 9) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.repeat_get_workspace_size, _dev(x), [2, 2],
                 openacl.empty((4, 6), np.float16)) == ACLNN_ERR_PARAM_INVALID
    assert _code(aclnn.repeat_get_workspace_size, _dev(x), None,
                 openacl.empty((4, 6), np.float32)) == ACLNN_ERR_PARAM_NULLPTR
