"""Padding operators against PyTorch CPU: ConstantPadNd and the reflection, replication
and circular pads of 1-3 trailing dims, bit-exact in every dtype; their Backward operators
against torch.autograd in float64, rounded once to the dtype (CANN's precision standard)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from op_harness import BF16, FLOATS, INTS, assert_close, from_torch, strided, to_torch
from openacl import aclnn
from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from test_ops_movement import ALL, _data, _dev, _error, _exact, _rt, _two_phase  # noqa: F401

MODES = {"reflection": "reflect", "replication": "replicate", "circular": "circular"}
CIRCULAR = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.int8),
            np.dtype(np.int32)]
GRAD = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
CIRCULAR_GRAD = GRAD[:3]
# (kind, shape, padding): every rank each operator takes, pads up to the dim's size
CASES = [
    (1, (3, 5), [2, 4]), (1, (2, 3, 6), [5, 0]), (1, (2, 3, 6), [-2, 3]),
    (2, (3, 4, 5), [1, 2, 3, 0]), (2, (2, 3, 4, 5), [4, 4, 3, 3]),
    (2, (2, 3, 4, 5), [-1, 2, 1, -2]),
    (3, (2, 3, 4, 5), [1, 0, 2, 3, 1, 2]), (3, (1, 2, 3, 4, 5), [4, 1, 0, 3, 2, 2]),
    (3, (1, 2, 3, 4, 5), [-1, 2, 2, -1, 0, 1]),
]


def _name(mode: str, kind: int) -> str:
    return f"{mode}_pad{kind}d"


def _fits(mode: str, shape, padding) -> bool:
    """Pads the mode takes: reflection smaller than the dim, circular at most the dim."""
    for k, pad in enumerate(padding):
        size = shape[-1 - k // 2]
        if (mode == "reflection" and pad >= size) or (mode == "circular" and pad > size):
            return False
    return True


def _torch_pad(values: np.ndarray, padding, mode: str) -> np.ndarray:
    t = to_torch(values)
    wide = t.double() if not t.is_floating_point() else t  # torch pads floats only
    return from_torch(F.pad(wide, padding, mode=MODES[mode]).to(t.dtype))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", FLOATS + INTS + [np.dtype(np.bool_), np.dtype(np.complex64)],
                         ids=str)
def test_pads_match_torch(mode, dtype):
    if mode == "circular" and dtype not in CIRCULAR:
        pytest.skip("aclnnCircularPad*d takes float16, bfloat16, float32, int8, int32")
    for kind, shape, padding in CASES:
        if mode == "circular" and kind == 1 or not _fits(mode, shape, padding):
            continue
        values = _data(shape, dtype)
        if dtype == np.bool_ or dtype.kind == "c":
            t = torch.from_numpy(values.astype(np.float64 if dtype == np.bool_ else values.dtype))
            golden = F.pad(t, padding, mode=MODES[mode]).numpy().astype(dtype)
        else:
            golden = _torch_pad(values, padding, mode)
        result = getattr(openacl.ops, _name(mode, kind))(strided(values, "step"), padding)
        _exact(result.numpy(), golden, f"{mode}{kind}d {shape} {padding}")


@pytest.mark.parametrize("mode", list(MODES))
def test_pad_two_phase_large_pads_and_empty_batch(mode):
    values = _data((2, 3, 4), np.float32)
    padding = [4, 4, 3, 2] if mode != "reflection" else [3, 3, 2, 2]
    golden = _torch_pad(values, padding, mode)
    out = strided(np.zeros(golden.shape, np.float32), "transpose")
    _two_phase(f"{mode}_pad2d", _dev(values), padding, out)
    _exact(out.numpy(), golden)
    if mode == "replication":  # any size: the edge repeats
        _exact(openacl.ops.replication_pad1d(_dev(values), [9, 11]).numpy(),
               _torch_pad(values, [9, 11], mode))
    empty = getattr(openacl.ops, _name(mode, 3))(_dev(np.zeros((0, 1, 2, 2, 2), np.float32)),
                                                 [1, 1, 1, 1, 1, 1])
    assert empty.numpy().shape == (0, 1, 4, 4, 4)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", GRAD, ids=str)
def test_pad_backward_matches_autograd(mode, dtype):
    if mode == "circular" and dtype not in CIRCULAR_GRAD:
        pytest.skip("aclnnCircularPad*dBackward takes float16, bfloat16, float32")
    rng = np.random.default_rng(5)
    for kind, shape, padding in CASES:
        if mode == "circular" and kind == 1 or not _fits(mode, shape, padding):
            continue
        values = _data(shape, dtype)
        leaf = torch.from_numpy(values.astype(np.float64)).requires_grad_()
        padded = F.pad(leaf, padding, mode=MODES[mode])
        grad = rng.uniform(-2, 2, padded.shape).astype(np.float32).astype(dtype)
        padded.backward(torch.from_numpy(grad.astype(np.float64)))
        golden = leaf.grad.numpy().astype(dtype)
        result = getattr(openacl.ops, _name(mode, kind) + "_backward")(
            strided(grad, "step"), _dev(values), padding)
        assert_close(result.numpy(), golden, f"{mode}{kind}d backward {shape} {padding}")


def test_pad_backward_two_phase_complex_and_special_values():
    values = (_data((2, 5), np.float32) + 1j * _data((2, 5), np.float32)).astype(np.complex64)
    grad = np.full((2, 9), 1 - 2j, np.complex64)
    grad[0, 0] = np.inf
    leaf = torch.from_numpy(values.astype(np.complex128)).requires_grad_()
    F.pad(leaf, [2, 2], mode="reflect").backward(torch.from_numpy(grad.astype(np.complex128)))
    out = openacl.empty((2, 5), np.complex64)
    _two_phase("reflection_pad1d_backward", _dev(grad), _dev(values), [2, 2], out)
    np.testing.assert_array_equal(out.numpy(), leaf.grad.numpy().astype(np.complex64))


def test_pad_errors():
    x = _dev(np.ones((1, 3, 4), np.float32))
    out = openacl.empty((1, 3, 6), np.float32)
    _error(lambda: aclnn.reflection_pad1d_get_workspace_size(None, [1, 1], out),
           ACLNN_ERR_PARAM_NULLPTR, "self")
    _error(lambda: aclnn.reflection_pad1d_get_workspace_size(x, None, out),
           ACLNN_ERR_PARAM_NULLPTR, "padding")
    _error(lambda: aclnn.reflection_pad1d_get_workspace_size(x, [1, 1], None),
           ACLNN_ERR_PARAM_NULLPTR, "out")
    _error(lambda: aclnn.reflection_pad1d_get_workspace_size(x, [1, 1, 0, 0], out),
           argument="padding")
    _error(lambda: aclnn.reflection_pad1d_get_workspace_size(x, [4, 0], out),
           argument="padding")  # reflection: smaller than the dim
    _error(lambda: aclnn.circular_pad2d_get_workspace_size(x, [5, 0, 0, 0], out),
           argument="padding")  # circular: at most the dim
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [-3, -1], out),
           argument="padding")  # nothing left
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [-5, 3], out),
           argument="padding")  # the crop takes the whole dim
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [1 << 40, 1 << 40], out),
           argument="out")  # (checked without making anything of that size)
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [1 << 62, 1 << 62], out),
           argument="padding")
    _error(lambda: aclnn.replication_pad2d_get_workspace_size(_dev(np.ones((3, 4), np.float32)),
                                                              [1, 1, 0, 0], out), argument="self")
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [1, 1],
                                                              openacl.empty((1, 3, 7),
                                                                            np.float32)),
           argument="out")
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(x, [1, 1],
                                                              openacl.empty((1, 3, 6),
                                                                            np.float16)),
           argument="out")
    _error(lambda: aclnn.replication_pad1d_get_workspace_size(
        _dev(np.ones((1, 0, 4), np.float32)), [1, 1], out), argument="self")  # (no batch dim)
    _error(lambda: aclnn.circular_pad2d_get_workspace_size(
        _dev(np.ones((1, 3, 4), np.float64)), [1, 1, 0, 0], out), argument="self")
    grad = _dev(np.ones((1, 3, 6), np.float32))
    _error(lambda: aclnn.reflection_pad1d_backward_get_workspace_size(
        _dev(np.ones((1, 3, 7), np.float32)), x, [1, 1], openacl.empty((1, 3, 4), np.float32)),
        argument="gradOutput")
    _error(lambda: aclnn.reflection_pad1d_backward_get_workspace_size(
        _dev(np.ones((1, 3, 6), np.float16)), x, [1, 1], openacl.empty((1, 3, 4), np.float32)),
        argument="gradOutput")
    _error(lambda: aclnn.reflection_pad1d_backward_get_workspace_size(
        grad, _dev(np.ones((1, 3, 4), np.int32)), [1, 1], openacl.empty((1, 3, 4), np.int32)),
        argument="self")
    _error(lambda: aclnn.reflection_pad1d_backward_get_workspace_size(
        grad, x, [1, 1], openacl.empty((1, 3, 5), np.float32)), argument="gradInput")
    _error(lambda: aclnn.replication_pad1d_backward_get_workspace_size(grad, x, [1, 1], None),
           ACLNN_ERR_PARAM_NULLPTR, "gradInput")


# -- padding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_constant_pad_nd_matches_torch(dtype):
    values = _data((2, 3, 4), dtype)
    t, x = to_torch(values), strided(values, "transpose")
    fill = True if dtype == np.bool_ else 2
    for pad in ([1, 2], [0, 1, 2, 0], [1, -2, -1, 1, 0, 2], []):
        golden = from_torch(F.pad(t, pad, mode="constant", value=fill))
        _exact(openacl.ops.constant_pad_nd(x, pad, fill).numpy(), golden, str(pad))


def test_constant_pad_nd_values_empty_and_errors():
    x = _dev(np.ones((2, 2), np.int32))
    _exact(openacl.ops.constant_pad_nd(x, [1, 0], 2.7).numpy(),
           from_torch(F.pad(torch.ones(2, 2, dtype=torch.int32), [1, 0], value=2.7)))
    empty = _dev(np.zeros((0, 2), np.float32))
    _exact(openacl.ops.constant_pad_nd(empty, [0, 0, 1, 1], -1.0).numpy(),
           np.full((2, 2), -1.0, np.float32))
    out = openacl.empty((2, 3), np.int32)
    zero = openacl.create_scalar(0, openacl.ACL_INT64)
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(x, [1], zero, out), argument="pad")
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(x, [1, 0, 0, 0, 0, 0], zero, out),
           argument="pad")
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(x, [-3, 0], zero, out),
           argument="pad")
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(x, [1, 0], None, out),
           ACLNN_ERR_PARAM_NULLPTR, "value")
    big = openacl.create_scalar(1000, openacl.ACL_INT64)
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(
        _dev(np.ones(2, np.int8)), [1, 0], big, openacl.empty((3,), np.int8)), argument="value")
    _error(lambda: aclnn.constant_pad_nd_get_workspace_size(x, [1, 1], zero, out),
           argument="out")


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_reflection_pad2d_matches_torch(dtype):
    values = _data((2, 3, 4, 5), dtype)
    t, x = to_torch(values), strided(values, "step")
    for padding in ([1, 2, 3, 0], [4, 4, 3, 3], [-1, 2, 1, -2]):
        golden = t.double() if dtype.kind in "iu" or dtype == np.bool_ else t
        golden = F.pad(golden, padding, mode="reflect").to(t.dtype)  # torch: floats only
        _exact(openacl.ops.reflection_pad2d(x, padding).numpy(), from_torch(golden),
               str(padding))
    three = values[0]
    _exact(openacl.ops.reflection_pad2d(_dev(three), [2, 1, 0, 3]).numpy(),
           from_torch(F.pad(t[0].double(), [2, 1, 0, 3], mode="reflect").to(t.dtype)))
    flags = np.array([[[True, False, False]]])
    _exact(openacl.ops.reflection_pad2d(_dev(flags), [2, 2, 0, 0]).numpy(),
           np.pad(flags, [(0, 0), (0, 0), (2, 2)], mode="reflect"))


def test_reflection_pad2d_errors():
    x = _dev(np.ones((1, 3, 4), np.float32))
    out = openacl.empty((1, 3, 6), np.float32)
    _error(lambda: aclnn.reflection_pad2d_get_workspace_size(x, [1, 1], out), argument="padding")
    _error(lambda: aclnn.reflection_pad2d_get_workspace_size(x, [4, 0, 0, 0], out),
           argument="padding")
    _error(lambda: aclnn.reflection_pad2d_get_workspace_size(x, [0, 0, 3, 0], out),
           argument="padding")
    _error(lambda: aclnn.reflection_pad2d_get_workspace_size(_dev(np.ones((3, 4), np.float32)),
                                                             [1, 1, 0, 0], out), argument="self")
    _error(lambda: aclnn.reflection_pad2d_get_workspace_size(x, [1, 1, 0, 0],
                                                             openacl.empty((1, 3, 7), np.float32)),
           argument="out")
    assert openacl.ops.reflection_pad2d(_dev(np.zeros((0, 1, 3, 3), np.float32)),
                                        [1, 1, 1, 1]).numpy().shape == (0, 1, 5, 5)


