"""Single operators by CANN op type (openacl.op, the aclop face) against numpy/torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import openacl
from openacl import op
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_FORMAT_NOT_MATCH,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
)
from openacl.ops.executor import OpExecutor
from openacl.runtime import core
from openacl.tensor import AclScalar, AclTensor

ND = Format.ACL_FORMAT_ND
RNG = np.random.default_rng(7)


class Session:
    """Device tensors, descs and buffers for one test; everything released at the end."""

    def __init__(self) -> None:
        self.tensors, self.descs, self.buffers = [], [], []

    def desc(self, dtype, dims, fmt=ND) -> int:
        handle = openacl.create_tensor_desc(dtype, list(dims), fmt)
        self.descs.append(handle)
        return handle

    def tensor(self, array: np.ndarray) -> tuple[int, int, openacl.Tensor]:
        tensor = openacl.to_device(array)
        self.tensors.append(tensor)
        buffer = openacl.create_data_buffer(tensor.data_ptr, max(tensor.nbytes, 0))
        self.buffers.append(buffer)
        return self.desc(array.dtype, array.shape), buffer, tensor

    def output(self, shape, dtype) -> tuple[int, int, openacl.Tensor]:
        tensor = openacl.empty(shape, dtype)
        self.tensors.append(tensor)
        buffer = openacl.create_data_buffer(tensor.data_ptr, tensor.nbytes)
        self.buffers.append(buffer)
        return self.desc(dtype, shape), buffer, tensor

    def close(self) -> None:
        for handle in self.buffers:
            openacl.destroy_data_buffer(handle)
        for handle in self.descs:
            openacl.destroy_tensor_desc(handle)
        for tensor in self.tensors:
            tensor.free()


@pytest.fixture
def session(threaded_runtime):
    s = Session()
    yield s
    s.close()


def make_attr(**attrs) -> int | None:
    if not attrs:
        return None
    handle = op.create_attr()
    for name, value in attrs.items():
        if isinstance(value, bool):
            op.set_attr_bool(handle, name, value)
        elif isinstance(value, DataType):
            op.set_attr_data_type(handle, name, value)
        elif isinstance(value, int):
            op.set_attr_int(handle, name, value)
        elif isinstance(value, float):
            op.set_attr_float(handle, name, value)
        elif isinstance(value, str):
            op.set_attr_string(handle, name, value)
        elif isinstance(value, list) and all(isinstance(v, int) for v in value):
            op.set_attr_list_int(handle, name, value)
        elif isinstance(value, list) and all(isinstance(v, list) for v in value):
            op.set_attr_list_list_int(handle, name, value)
        else:
            raise TypeError(name)
    return handle


def run(session: Session, op_type: str, inputs: list[np.ndarray], outputs: list[tuple],
        **attrs) -> list[np.ndarray]:
    """Run ``op_type`` through execute_v2; ``outputs`` are (shape, dtype) pairs."""
    ins = [session.tensor(a) for a in inputs]
    outs = [session.output(shape, dtype) for shape, dtype in outputs]
    attr = make_attr(**attrs)
    try:
        op.execute_v2(op_type, [d for d, _, _ in ins], [b for _, b, _ in ins],
                      [d for d, _, _ in outs], [b for _, b, _ in outs], attr, None)
    finally:
        if attr is not None:
            op.destroy_attr(attr)
    return [t.numpy() for _, _, t in outs]


def rand(*shape, dtype=np.float32, low=-2.0, high=2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(dtype)


def close(actual, expected, dtype=np.float32) -> None:
    tol = 1e-2 if np.dtype(dtype) == np.float16 else 1e-5
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol)


# -- elementwise ---------------------------------------------------------------------------------
BINARY = {
    "Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "RealDiv": np.divide, "Div": np.divide, "Maximum": np.maximum, "Minimum": np.minimum,
    "Pow": lambda a, b: np.power(np.abs(a), b), "FloorMod": np.mod, "Mod": np.fmod,
    "FloorDiv": np.floor_divide,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary(session, op_type, dtype):
    a, b = rand(2, 3, dtype=dtype), rand(3, dtype=dtype, low=0.5, high=2.0)
    if op_type == "Pow":
        a = np.abs(a) + dtype(0.1)
    (y,) = run(session, op_type, [a, b], [((2, 3), dtype)])
    close(y, BINARY[op_type](a.astype(np.float32), b.astype(np.float32)), dtype)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Maximum", "Minimum", "Div",
                                     "FloorDiv", "FloorMod"])
def test_binary_int32(session, op_type):
    a = RNG.integers(-20, 20, (2, 4)).astype(np.int32)
    b = RNG.integers(1, 6, (2, 4)).astype(np.int32)
    (y,) = run(session, op_type, [a, b], [((2, 4), np.int32)])
    expected = {**BINARY, "Div": lambda p, q: np.trunc(p / q).astype(np.int32)  # as TF's Div
                }[op_type](a, b)
    np.testing.assert_array_equal(y, expected)


UNARY = {
    "Neg": np.negative, "Abs": np.abs, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Rsqrt": lambda x: 1 / np.sqrt(x), "Reciprocal": np.reciprocal, "Tanh": np.tanh,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Relu": lambda x: np.maximum(x, 0),
    "Gelu": lambda x: torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy(),
    "Erf": lambda x: torch.erf(torch.from_numpy(x)).numpy(), "Sin": np.sin, "Cos": np.cos,
    "Floor": np.floor, "Ceil": np.ceil, "Sign": np.sign, "Square": np.square,
    "Softplus": lambda x: np.log1p(np.exp(x)),
    "Mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "Round": np.round,
    "Identity": lambda x: x,
}
POSITIVE = {"Log", "Sqrt", "Rsqrt", "Reciprocal"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary(session, op_type, dtype):
    x = rand(2, 5, dtype=dtype, low=0.2 if op_type in POSITIVE else -2.0)
    (y,) = run(session, op_type, [x], [((2, 5), dtype)])
    close(y, UNARY[op_type](x.astype(np.float32)), dtype)


def test_leaky_relu_and_elu_attributes(session):
    x = rand(4, 3)
    (y,) = run(session, "LeakyRelu", [x], [((4, 3), np.float32)], negative_slope=0.2)
    close(y, np.where(x > 0, x, 0.2 * x))
    (y,) = run(session, "LeakyRelu", [x], [((4, 3), np.float32)])  # CANN default 0.0
    close(y, np.maximum(x, 0))
    (y,) = run(session, "Elu", [x], [((4, 3), np.float32)], alpha=0.5)
    close(y, np.where(x > 0, x, 0.5 * (np.exp(x) - 1)))


COMPARE = {"Less": np.less, "Greater": np.greater, "Equal": np.equal,
           "LessEqual": np.less_equal, "GreaterEqual": np.greater_equal,
           "NotEqual": np.not_equal}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("op_type", sorted(COMPARE))
def test_compare(session, op_type, dtype):
    a = RNG.integers(0, 3, (3, 4)).astype(dtype)
    b = RNG.integers(0, 3, (3, 4)).astype(dtype)
    (y,) = run(session, op_type, [a, b], [((3, 4), np.bool_)])
    np.testing.assert_array_equal(y, COMPARE[op_type](a, b))


def test_logical_and_select(session):
    a, b = RNG.random((2, 3)) > 0.5, RNG.random((2, 3)) > 0.5
    (y,) = run(session, "LogicalAnd", [a, b], [((2, 3), np.bool_)])
    np.testing.assert_array_equal(y, a & b)
    (y,) = run(session, "LogicalOr", [a, b], [((2, 3), np.bool_)])
    np.testing.assert_array_equal(y, a | b)
    (y,) = run(session, "LogicalNot", [a], [((2, 3), np.bool_)])
    np.testing.assert_array_equal(y, ~a)
    x1, x2 = rand(2, 3), rand(2, 3)
    (y,) = run(session, "Select", [a, x1, x2], [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.where(a, x1, x2))
    (y,) = run(session, "SelectV2", [a, x1, x2], [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.where(a, x1, x2))


def test_clip_by_value(session):
    x = rand(3, 4)
    low, high = np.array(-0.5, np.float32), np.array(0.5, np.float32)
    (y,) = run(session, "ClipByValue", [x, low, high], [((3, 4), np.float32)])
    np.testing.assert_array_equal(y, np.clip(x, -0.5, 0.5))


# -- matmul ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["MatMul", "MatMulV2"])
@pytest.mark.parametrize("t1,t2", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(session, op_type, t1, t2):
    a, b = rand(3, 4), rand(4, 5)
    a_in, b_in = (a.T.copy() if t1 else a), (b.T.copy() if t2 else b)
    (y,) = run(session, op_type, [a_in, b_in], [((3, 5), np.float32)],
               transpose_x1=t1, transpose_x2=t2)
    close(y, a @ b)


def test_matmul_bias_and_float16(session):
    a, b, bias = rand(2, 3, dtype=np.float16), rand(3, 4, dtype=np.float16), \
        rand(4, dtype=np.float16)
    (y,) = run(session, "MatMulV2", [a, b, bias], [((2, 4), np.float16)])
    close(y, a.astype(np.float32) @ b.astype(np.float32) + bias, np.float16)


@pytest.mark.parametrize("op_type", ["BatchMatMul", "BatchMatMulV2"])
def test_batch_matmul_adjoints(session, op_type):
    a, b = rand(2, 4, 3), rand(2, 5, 4)
    (y,) = run(session, op_type, [a, b], [((2, 3, 5), np.float32)], adj_x1=True, adj_x2=True)
    close(y, a.transpose(0, 2, 1) @ b.transpose(0, 2, 1))


def test_batch_matmul_v2_broadcast_and_bias(session):
    a, b, bias = rand(2, 3, 4), rand(4, 5), rand(5)
    (y,) = run(session, "BatchMatMulV2", [a, b, bias], [((2, 3, 5), np.float32)])
    close(y, a @ b + bias)


# -- softmax, layer norm ---------------------------------------------------------------------------
@pytest.mark.parametrize("axes", [[-1], [0], [1]])
def test_softmax_axes(session, axes):
    x = rand(3, 4, 5)
    (y,) = run(session, "SoftmaxV2", [x], [((3, 4, 5), np.float32)], axes=axes)
    close(y, torch.softmax(torch.from_numpy(x), axes[0]).numpy())
    (y,) = run(session, "LogSoftmaxV2", [x], [((3, 4, 5), np.float32)], axes=axes)
    close(y, torch.log_softmax(torch.from_numpy(x), axes[0]).numpy())


def test_softmax_default_axis_float16(session):
    x = rand(2, 6, dtype=np.float16)
    (y,) = run(session, "SoftmaxV2", [x], [((2, 6), np.float16)])
    close(y, torch.softmax(torch.from_numpy(x.astype(np.float32)), -1).numpy(), np.float16)


@pytest.mark.parametrize("begin_norm,begin_params", [(-1, -1), (1, 1), (1, -1)])
def test_layer_norm_three_outputs(session, begin_norm, begin_params):
    x = rand(2, 3, 4)
    rank = x.ndim
    norm, params = begin_norm % rank, begin_params % rank
    gamma, beta = rand(*x.shape[params:]), rand(*x.shape[params:])
    stat = x.shape[:norm] + (1,) * (rank - norm)
    y, mean, var = run(session, "LayerNorm", [x, gamma, beta],
                       [(x.shape, np.float32), (stat, np.float32), (stat, np.float32)],
                       begin_norm_axis=begin_norm, begin_params_axis=begin_params,
                       epsilon=1e-5)
    axes = tuple(range(norm, rank))
    mu = x.mean(axis=axes, keepdims=True)
    variance = x.var(axis=axes, keepdims=True)
    close(mean, mu)
    close(var, variance)
    close(y, (x - mu) / np.sqrt(variance + 1e-5) * gamma + beta)


# -- cast and data movement ---------------------------------------------------------------------
def test_cast_dst_type(session):
    x = rand(3, 4) * 10
    (y,) = run(session, "Cast", [x], [((3, 4), np.float16)], dst_type=int(DataType.ACL_FLOAT16))
    np.testing.assert_array_equal(y, x.astype(np.float16))
    (y,) = run(session, "Cast", [x], [((3, 4), np.int32)], dst_type=DataType.ACL_INT32)
    np.testing.assert_array_equal(y, x.astype(np.int32))


def test_op_cast(session):
    x = rand(2, 3)
    dx, bx, _ = session.tensor(x)
    dy, by, ty = session.output((2, 3), np.float16)
    op.cast(dx, bx, dy, by, 0, None)
    np.testing.assert_array_equal(ty.numpy(), x.astype(np.float16))
    handle = op.create_handle_for_cast(dx, dy, 0)
    try:
        op.execute_with_handle(handle, [bx], [by], None)
    finally:
        op.destroy_handle(handle)
    np.testing.assert_array_equal(ty.numpy(), x.astype(np.float16))


def test_slice_and_slice_d(session):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    (y,) = run(session, "SliceD", [x], [((2, 2, 5), np.float32)], offsets=[1, 1, 0],
               size=[2, 2, -1])
    np.testing.assert_array_equal(y, x[1:3, 1:3, :])
    offsets, size = np.array([0, 2, 1], np.int32), np.array([3, 1, 3], np.int64)
    (y,) = run(session, "Slice", [x, offsets, size], [((3, 1, 3), np.float32)])
    np.testing.assert_array_equal(y, x[:, 2:3, 1:4])


@pytest.mark.parametrize("op_type", ["ConcatD", "ConcatV2D"])
def test_concat_d_n_inputs(session, op_type):
    pieces = [rand(2, k, 3) for k in (1, 2, 3)]
    (y,) = run(session, op_type, pieces, [((2, 6, 3), np.float32)], concat_dim=1, N=3)
    np.testing.assert_array_equal(y, np.concatenate(pieces, axis=1))


def test_concat_with_dim_input(session):
    pieces = [rand(2, 3), rand(1, 3)]
    dim = np.array([0], np.int32)
    (y,) = run(session, "ConcatV2", [*pieces, dim], [((3, 3), np.float32)])
    np.testing.assert_array_equal(y, np.concatenate(pieces))
    (y,) = run(session, "Concat", [dim, *pieces], [((3, 3), np.float32)])
    np.testing.assert_array_equal(y, np.concatenate(pieces))


def test_transpose_perm(session):
    x = rand(2, 3, 4)
    (y,) = run(session, "TransposeD", [x], [((4, 2, 3), np.float32)], perm=[2, 0, 1])
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1))
    (y,) = run(session, "Transpose", [x, np.array([1, 2, 0], np.int64)],
               [((3, 4, 2), np.float32)])
    np.testing.assert_array_equal(y, x.transpose(1, 2, 0))


REDUCE = {"ReduceSumD": np.sum, "ReduceMeanD": np.mean, "ReduceMaxD": np.max,
          "ReduceMinD": np.min}


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("op_type", sorted(REDUCE))
def test_reduce_d_keep_dims(session, op_type, keep):
    x = rand(2, 3, 4)
    expected = REDUCE[op_type](x, axis=(0, 2), keepdims=keep)
    (y,) = run(session, op_type, [x], [(expected.shape, np.float32)], axes=[0, -1],
               keep_dims=keep)
    close(y, expected)


def test_reduce_with_axes_input_and_noop(session):
    x = rand(3, 4)
    (y,) = run(session, "ReduceSum", [x, np.array([1], np.int32)], [((3,), np.float32)])
    close(y, x.sum(axis=1))
    (y,) = run(session, "ReduceMax", [x, np.array([], np.int32)], [((3, 4), np.float32)])
    np.testing.assert_array_equal(y, x)  # noop_with_empty_axes defaults to true
    (y,) = run(session, "ReduceMean", [x, np.array([], np.int32)], [((), np.float32)],
               noop_with_empty_axes=False)
    close(y, x.mean())
    b = RNG.random((3, 4)) > 0.3
    (y,) = run(session, "ReduceAll", [b, np.array([0], np.int64)], [((4,), np.bool_)])
    np.testing.assert_array_equal(y, b.all(axis=0))


def test_argmax(session):
    x = rand(3, 5)
    (y,) = run(session, "ArgMaxD", [x], [((3,), np.int32)], dimension=1,
               dtype=DataType.ACL_INT32)
    np.testing.assert_array_equal(y, x.argmax(axis=1))
    (y,) = run(session, "ArgMaxV2", [x, np.array([0], np.int32)], [((5,), np.int64)])
    np.testing.assert_array_equal(y, x.argmax(axis=0))
    (y,) = run(session, "ArgMin", [x, np.array([1], np.int32)], [((3,), np.int64)])
    np.testing.assert_array_equal(y, x.argmin(axis=1))


def test_fill_like_expand(session):
    (y,) = run(session, "Fill", [np.array([2, 3], np.int32), np.array(1.5, np.float32)],
               [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.full((2, 3), 1.5, np.float32))
    x = rand(2, 3)
    (y,) = run(session, "ZerosLike", [x], [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.zeros((2, 3)))
    (y,) = run(session, "OnesLike", [x.astype(np.int32)], [((2, 3), np.int32)])
    np.testing.assert_array_equal(y, np.ones((2, 3)))
    v = rand(3, 1)
    (y,) = run(session, "ExpandD", [v], [((2, 3, 4), np.float32)], shape=[2, 1, 4])
    np.testing.assert_array_equal(y, np.broadcast_to(v, (2, 3, 4)))
    (y,) = run(session, "Expand", [v, np.array([3, 4], np.int64)], [((3, 4), np.float32)])
    np.testing.assert_array_equal(y, np.broadcast_to(v, (3, 4)))
    (y,) = run(session, "BroadcastTo", [v, np.array([2, 3, 2], np.int32)],
               [((2, 3, 2), np.float32)])
    np.testing.assert_array_equal(y, np.broadcast_to(v, (2, 3, 2)))


def test_reshape_squeeze_unsqueeze_onehot_cumsum(session):
    x = rand(2, 1, 3)
    (y,) = run(session, "Reshape", [x, np.array([3, -1], np.int64)], [((3, 2), np.float32)])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = run(session, "Squeeze", [x], [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, x.reshape(2, 3))
    (y,) = run(session, "Unsqueeze", [x], [((2, 1, 1, 3), np.float32)], axes=[1])
    np.testing.assert_array_equal(y, x[:, None])
    labels = np.array([0, 2, 1], np.int32)
    on, off = np.array([1.0], np.float32), np.array([0.0], np.float32)
    (y,) = run(session, "OneHot", [labels, np.array([3], np.int32), on, off],
               [((3, 3), np.float32)])
    np.testing.assert_array_equal(y, np.eye(3, dtype=np.float32)[labels])
    (y,) = run(session, "Cumsum", [x, np.array([2], np.int32)], [((2, 1, 3), np.float32)])
    close(y, np.cumsum(x, axis=2))


# -- handles and shape inference ------------------------------------------------------------------
def test_handle_runs_many_times_with_new_buffers(session):
    da, _, _ = session.tensor(rand(3, 4))
    db, _, _ = session.tensor(rand(5, 4))
    dy, _, _ = session.output((3, 5), np.float32)
    attr = make_attr(transpose_x2=True)
    handle = op.create_handle("MatMulV2", [da, db], [dy], attr)
    op.destroy_attr(attr)  # the handle keeps what it needs
    try:
        stream = openacl.Stream()
        for _ in range(3):
            a, b = rand(3, 4), rand(5, 4)
            _, ba, _ = session.tensor(a)
            _, bb, _ = session.tensor(b)
            _, by, ty = session.output((3, 5), np.float32)
            op.execute_with_handle(handle, [ba, bb], [by], stream)
            close(ty.numpy(stream), a @ b.T)
        stream.destroy()
    finally:
        op.destroy_handle(handle)
    with pytest.raises(openacl.AclError) as info:
        op.execute_with_handle(handle, [ba, bb], [by], None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_handle_with_views_and_const_values(session):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    dx, _, _ = session.tensor(x)
    perm = np.array([1, 0], np.int64)
    dperm = session.desc(np.int64, [2])
    openacl.set_tensor_const(dperm, openacl.util.numpy_to_ptr(perm), perm.nbytes)
    dy, _, _ = session.output((6, 4), np.float32)
    handle = op.create_handle("Transpose", [dx, dperm], [dy], None)
    try:
        for k in range(2):
            data = x + k
            _, bx, _ = session.tensor(data)
            _, bp, _ = session.tensor(perm)
            _, by, ty = session.output((6, 4), np.float32)
            op.execute_with_handle(handle, [bx, bp], [by], None)
            np.testing.assert_array_equal(ty.numpy(), data.T)
    finally:
        op.destroy_handle(handle)
    # a value input without const data is read from its buffer at execute_with_handle
    dperm2 = session.desc(np.int64, [2])
    handle = op.create_handle("Transpose", [dx, dperm2], [dy], None)
    try:
        _, bx, _ = session.tensor(x)
        _, bp, _ = session.tensor(perm)
        _, by, ty = session.output((6, 4), np.float32)
        op.execute_with_handle(handle, [bx, bp], [by], None)
        np.testing.assert_array_equal(ty.numpy(), x.T)
        _, same, _ = session.tensor(np.array([0, 1], np.int64))  # gives [4, 6], not [6, 4]
        with pytest.raises(openacl.AclError) as info:
            op.execute_with_handle(handle, [bx, same], [by], None)
        assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
        assert "perm [0, 1]" in info.value.message and "[4, 6]" in info.value.message
        assert "[6, 4]" in info.value.message
    finally:
        op.destroy_handle(handle)


def test_infer_shape(session):
    da = session.desc(np.float32, [2, 3, 4])
    db = session.desc(np.float32, [2, 5, 4])
    attr = make_attr(adj_x2=True)
    assert op.infer_shape("BatchMatMul", [da, db], None, 1, attr) == \
        [((2, 3, 5), DataType.ACL_FLOAT)]
    op.destroy_attr(attr)
    dx = session.desc(np.float16, [2, 3, 4])
    dg, dbeta = session.desc(np.float16, [4]), session.desc(np.float16, [4])
    attr = make_attr(begin_norm_axis=-1, begin_params_axis=-1)
    outs = [session.desc(np.float16, [-1]) for _ in range(3)]
    result = op.infer_shape("LayerNorm", [dx, dg, dbeta], None, 3, attr, outs)
    op.destroy_attr(attr)
    assert result == [((2, 3, 4), DataType.ACL_FLOAT16), ((2, 3, 1), DataType.ACL_FLOAT16),
                      ((2, 3, 1), DataType.ACL_FLOAT16)]
    assert [openacl.get_tensor_desc_num_dims(d) for d in outs] == [3, 3, 3]
    assert openacl.get_tensor_desc_dim_v2(outs[1], 2) == 1
    # value inputs are read from their buffers
    dx2, bx2, _ = session.tensor(rand(3, 4))
    do, bo, _ = session.tensor(np.array([1, 0], np.int32))
    ds, bs, _ = session.tensor(np.array([2, -1], np.int32))
    assert op.infer_shape("Slice", [dx2, do, ds], [bx2, bo, bs], 1) == \
        [((2, 4), DataType.ACL_FLOAT)]
    assert op.infer_shape("ZerosLike", [dx2], [bx2], 1) == [((3, 4), DataType.ACL_FLOAT)]
    attr = make_attr(dimension=1)
    assert op.infer_shape("ArgMaxD", [dx2], None, 1, attr) == [((3,), DataType.ACL_INT64)]
    op.destroy_attr(attr)
    with pytest.raises(openacl.AclError) as info:
        op.infer_shape("Add", [dx2, dx2], None, 2)
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH


# -- errors ----------------------------------------------------------------------------------------
def _error(session, op_type, inputs, outputs, attr=None, stream=None) -> openacl.AclError:
    ins = [session.tensor(a) for a in inputs]
    outs = [session.output(shape, dtype) for shape, dtype in outputs]
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2(op_type, [d for d, _, _ in ins], [b for _, b, _ in ins],
                      [d for d, _, _ in outs], [b for _, b, _ in outs], attr, stream)
    return info.value


def test_unknown_op_type_lists_near_names(session):
    error = _error(session, "Matmul", [rand(2, 2), rand(2, 2)], [((2, 2), np.float32)])
    assert error.code == ACL_ERROR_OP_NOT_FOUND
    assert "'Matmul'" in error.message and "MatMul" in error.message.split("near it")[1]
    error = _error(session, "Softmax", [rand(2)], [((2,), np.float32)])
    assert "SoftmaxV2" in error.message


def test_wrong_input_and_output_counts(session):
    error = _error(session, "Add", [rand(2)], [((2,), np.float32)])
    assert error.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "Add" in error.message
    assert "x1, x2" in error.message
    error = _error(session, "Add", [rand(2), rand(2)], [])
    assert error.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "1 outputs (y)" in error.message
    error = _error(session, "LayerNorm", [rand(2, 3), rand(3), rand(3)], [((2, 3), np.float32)])
    assert error.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "mean" in error.message


def test_mismatched_tensors(session):
    error = _error(session, "Add", [rand(2, 3), rand(4)], [((2, 3), np.float32)])
    assert error.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'x2'" in error.message
    error = _error(session, "Add", [rand(2, 3), rand(3)], [((3, 3), np.float32)])
    assert error.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "'y'" in error.message
    error = _error(session, "MatMul", [rand(2, 3, 4), rand(4, 5)], [((2, 3, 5), np.float32)])
    assert error.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'x1'" in error.message
    error = _error(session, "Cast", [rand(2)], [((2,), np.float16)],
                   make_attr(dst_type=int(DataType.ACL_INT32)))
    assert error.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "dst_type" in error.message


def test_check_call_bind_checks_shapes_without_buffers(session):
    """check_call(bind=True) binds as execute_v2 does (what convert --singleop relies on);
    without it only counts, formats, dtypes and attributes are checked."""
    f32 = DataType.ACL_FLOAT
    x1, x2 = session.desc(f32, (4, 3)), session.desc(f32, (5, 3))
    y = session.desc(f32, (4, 5))
    op.check_call("MatMul", [x1, x2], [y])  # the k mismatch is not seen without binding
    with pytest.raises(openacl.AclError) as info:
        op.check_call("MatMul", [x1, x2], [y], bind=True)
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'x2'" in info.value.message
    attr = make_attr(transpose_x2=True)
    try:
        op.check_call("MatMul", [x1, x2], [y], attr, bind=True)  # k matches once transposed
    finally:
        op.destroy_attr(attr)
    assert op.find_op_type("MatMul").inputs == ("x1", "x2", "bias?")
    assert op.find_op_type("NoSuchOp") is None and op.find_op_type(None) is None


def test_attribute_errors(session):
    x, out = [rand(2, 3)], [((2, 3), np.float32)]
    error = _error(session, "Cast", x, out)
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'dst_type'" in error.message
    error = _error(session, "MatMul", [rand(2, 2), rand(2, 2)], [((2, 2), np.float32)],
                   make_attr(transpose_a=True))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'transpose_a'" in error.message
    assert "transpose_x1" in error.message
    error = _error(session, "MatMul", [rand(2, 2), rand(2, 2)], [((2, 2), np.float32)],
                   make_attr(transpose_x1=1))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "Bool" in error.message
    error = _error(session, "SoftmaxV2", x, out, make_attr(axes=[5]))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'axes'" in error.message
    error = _error(session, "SoftmaxV2", x, out, make_attr(axes=[0, 1]))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH
    error = _error(session, "ConcatD", [rand(2), rand(2)], [((4,), np.float32)],
                   make_attr(concat_dim=0, N=3))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'N'" in error.message
    error = _error(session, "SliceD", x, [((1, 3), np.float32)],
                   make_attr(offsets=[1, 0], size=[2, 3]))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'size'" in error.message
    error = _error(session, "Exp", x, out, make_attr(base=2.0))
    assert error.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'base'" in error.message


def test_buffer_smaller_than_desc(session):
    dx, bx, _ = session.tensor(rand(2, 3))
    dy, by, _ = session.output((2, 3), np.float32)
    small = openacl.empty((2,), np.float32)
    session.tensors.append(small)
    tiny = openacl.create_data_buffer(small.data_ptr, small.nbytes)
    session.buffers.append(tiny)
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Relu", [dx], [tiny], [dy], [by], None, None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "inputs[0]" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Relu", [dx], [bx], [dy], [tiny], None, None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "outputs[0]" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Relu", [dx], [bx, bx], [dy], [by], None, None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_desc_problems(session):
    dx, bx, _ = session.tensor(rand(2, 3))
    dy, by, _ = session.output((2, 3), np.float32)
    dynamic = session.desc(np.float32, [-1, 3])
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Relu", [dynamic], [bx], [dy], [by], None, None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "unknown dims" in info.value.message
    fractal = session.desc(np.float32, [2, 3], Format.ACL_FORMAT_FRACTAL_NZ)
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Relu", [fractal], [bx], [dy], [by], None, None)
    assert info.value.code == ACL_ERROR_FORMAT_NOT_MATCH


def test_no_handles_leak(session):
    x = rand(2, 3)
    run(session, "LayerNorm", [x, rand(3), rand(3)],
        [((2, 3), np.float32), ((2, 1), np.float32), ((2, 1), np.float32)],
        begin_norm_axis=1, begin_params_axis=1)
    run(session, "LeakyRelu", [x], [((2, 3), np.float32)], negative_slope=0.1)
    with pytest.raises(openacl.AclError):
        run(session, "SliceD", [x], [((1, 3), np.float32)], offsets=[1, 0], size=[5, 3])
    openacl.rt.synchronize_device()
    table = core.current().handles
    assert table.live(OpExecutor) == [] and table.live(AclScalar) == []
    assert table.live(op.OpAttr) == [] and table.live(op.OpHandle) == []
    assert len(table.live(AclTensor)) == len(session.tensors)  # only the Tensors' own


# -- attribute setters --------------------------------------------------------------------------
def test_attr_setters(threaded_runtime):
    attr = op.create_attr()
    op.set_attr_list_int(attr, "axes", 2, [0, 1])  # pyACL's (num, values) form
    op.set_attr_list_float(attr, "f", [1, 2.5])
    op.set_attr_list_bool(attr, "b", np.array([True, False]))
    op.set_attr_list_string(attr, "s", ["a"])
    op.set_attr_list_list_int(attr, "ll", [[1, 2], [3]])
    op.set_attr_string(attr, "fmt", "NHWC")
    op.set_attr_data_type(attr, "dtype", np.float16)
    target = core.current().handles.get(attr, op.OpAttr, "attr")
    assert target.values["axes"] == ("list_int", [0, 1])
    assert target.values["ll"] == ("list_list_int", [[1, 2], [3]])
    assert target.values["dtype"] == ("type", DataType.ACL_FLOAT16)
    bad = [
        (op.set_attr_bool, (attr, "x", 1), "attrValue"),
        (op.set_attr_int, (attr, "x", 1.5), "attrValue"),
        (op.set_attr_int, (attr, "x", True), "attrValue"),
        (op.set_attr_float, (attr, "x", "1"), "attrValue"),
        (op.set_attr_string, (attr, "x", 3), "attrValue"),
        (op.set_attr_int, (attr, "", 1), "attrName"),
        (op.set_attr_int, (attr, None, 1), "attrName"),
        (op.set_attr_list_int, (attr, "x", [1, "2"]), "values"),
        (op.set_attr_list_int, (attr, "x", 3, [1, 2]), "numValues"),
        (op.set_attr_list_int, (attr, "x", 5), "values"),
        (op.set_attr_list_bool, (attr, "x", [1, 0]), "values"),
        (op.set_attr_list_list_int, (attr, "x", [1, 2]), "values"),
        (op.set_attr_data_type, (attr, "x", "nonsense"), "attrValue"),
        (op.set_attr_int, (12345, "x", 1), "attr"),
    ]
    for setter, args, argument in bad:
        with pytest.raises(openacl.AclError) as info:
            setter(*args)
        assert info.value.code == ACL_ERROR_INVALID_PARAM, (setter, args)
        assert f"'{argument}'" in info.value.message, (setter, args, info.value.message)
    op.destroy_attr(attr)
    with pytest.raises(openacl.AclError) as info:
        op.destroy_attr(attr)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_table_is_consistent():
    assert len(op.OP_TYPES) >= 80
    for spec in op.OP_TYPES.values():
        assert spec.outputs
        assert len({a.name for a in spec.attrs}) == len(spec.attrs)
        assert spec.values <= {n.rstrip("?*") for n in spec.inputs}


# -- image op types (Conv2D, pooling, BatchNorm, ResizeBilinearV2) against torch ------------------
import torch.nn.functional as F  # noqa: E402


def _attr_of(**attrs) -> int:
    handle = op.create_attr()
    for name, value in attrs.items():
        if isinstance(value, str):
            op.set_attr_string(handle, name, value)
        elif isinstance(value, bool):
            op.set_attr_bool(handle, name, value)
        elif isinstance(value, float):
            op.set_attr_float(handle, name, value)
        elif isinstance(value, int):
            op.set_attr_int(handle, name, value)
        else:
            op.set_attr_list_int(handle, name, list(value))
    return handle


def _run_image(session, op_type, inputs, out_shapes, dtype=np.float32, formats=None, **attrs):
    """execute_v2 with inputs given as (array, format) or arrays; returns the outputs."""
    descs, buffers = [], []
    for k, array in enumerate(inputs):
        d, b, _ = session.tensor(array)
        if formats and formats[k] is not None:
            d = session.desc(array.dtype, array.shape, formats[k])
        descs.append(d)
        buffers.append(b)
    outs = [session.output(shape, dtype) for shape in out_shapes]
    attr = _attr_of(**attrs)
    try:
        op.execute_v2(op_type, descs, buffers, [d for d, _, _ in outs], [b for _, b, _ in outs],
                      attr, None)
    finally:
        op.destroy_attr(attr)
    return [t.numpy() for _, _, t in outs]


def _nchw(array):
    return torch.from_numpy(np.ascontiguousarray(array))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_matches_torch(session, layout):
    x = rand(2, 4, 9, 8)
    w = rand(6, 2, 3, 3)  # groups 2: in / groups = 2
    bias = rand(6)
    golden = F.conv2d(_nchw(x), _nchw(w), _nchw(bias), stride=(2, 1), padding=(1, 2),
                      dilation=(1, 2), groups=2).numpy()
    strides, dilations = [1, 1, 2, 1], [1, 1, 1, 2]
    if layout == "NHWC":
        x_in, w_in, fmt = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), Format.ACL_FORMAT_HWCN
        strides, dilations = [1, 2, 1, 1], [1, 1, 2, 1]
        out_shape = golden.transpose(0, 2, 3, 1).shape
    else:
        x_in, w_in, fmt, out_shape = x, w, Format.ACL_FORMAT_NCHW, golden.shape
    (y,) = _run_image(session, "Conv2D", [np.ascontiguousarray(x_in), np.ascontiguousarray(w_in),
                                          bias], [out_shape], formats=[None, fmt, None],
                      strides=strides, pads=[1, 1, 2, 2], dilations=dilations, groups=2,
                      data_format=layout)
    close(y.transpose(0, 3, 1, 2) if layout == "NHWC" else y, golden)


def test_conv2d_bad_paths(session):
    x, w = rand(1, 3, 5, 5), rand(4, 3, 3, 3)
    with pytest.raises(openacl.AclError) as info:  # asymmetric pads
        _run_image(session, "Conv2D", [x, w], [(1, 4, 4, 4)], strides=[1, 1, 1, 1],
                   pads=[0, 1, 0, 1], data_format="NCHW")
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "pads" in info.value.message
    with pytest.raises(openacl.AclError) as info:  # a stride on the channel axis
        _run_image(session, "Conv2D", [x, w], [(1, 4, 3, 3)], strides=[1, 2, 1, 1],
                   pads=[0, 0, 0, 0], data_format="NCHW")
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "strides" in info.value.message
    with pytest.raises(openacl.AclError) as info:  # an output desc of the wrong shape
        _run_image(session, "Conv2D", [x, w], [(1, 4, 5, 5)], strides=[1, 1, 1, 1],
                   pads=[0, 0, 0, 0], data_format="NCHW")
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
    with pytest.raises(openacl.AclError) as info:  # strides is required
        _run_image(session, "Conv2D", [x, w], [(1, 4, 3, 3)], pads=[0, 0, 0, 0])
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "strides" in info.value.message


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_max_pool_v3_and_max_pool(session, layout):
    x = rand(2, 3, 7, 8)
    golden = F.max_pool2d(_nchw(x), 3, 2, padding=1, ceil_mode=True).numpy()
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) \
        if layout == "NHWC" else (lambda a: a)
    from_layout = (lambda a: a.transpose(0, 3, 1, 2)) if layout == "NHWC" else (lambda a: a)
    window = [1, 1, 3, 3] if layout == "NCHW" else [1, 3, 3, 1]
    step = [1, 1, 2, 2] if layout == "NCHW" else [1, 2, 2, 1]
    (y,) = _run_image(session, "MaxPoolV3", [to_layout(x)], [to_layout(golden).shape],
                      ksize=window, strides=step, pads=[1, 1, 1, 1], ceil_mode=True,
                      data_format=layout)
    close(from_layout(y), golden)
    # TensorFlow's MaxPool with VALID and SAME padding (SAME: the extra pad at the end)
    valid = F.max_pool2d(_nchw(x), 2, 2).numpy()
    (y,) = _run_image(session, "MaxPool", [to_layout(x)], [to_layout(valid).shape],
                      ksize=window[:1] + [2 if k == 3 else k for k in window[1:]],
                      strides=step, padding="VALID", data_format=layout)
    close(from_layout(y), valid)
    same = F.max_pool2d(F.pad(_nchw(x), (0, 1, 0, 1), value=-np.inf), 2, 2).numpy()
    (y,) = _run_image(session, "MaxPool", [to_layout(x)], [to_layout(same).shape],
                      ksize=[2 if k == 3 else k for k in window], strides=step,
                      padding="SAME", data_format=layout)
    close(from_layout(y), same)


def test_avg_pool_v2_and_avg_pool(session):
    x = rand(1, 2, 6, 6)
    exclusive = F.avg_pool2d(_nchw(x), 3, 1, padding=1, count_include_pad=False).numpy()
    (y,) = _run_image(session, "AvgPoolV2", [x], [exclusive.shape], ksize=[1, 1, 3, 3],
                      strides=[1, 1, 1, 1], pads=[1, 1, 1, 1])
    close(y, exclusive)
    inclusive = F.avg_pool2d(_nchw(x), 3, 1, padding=1, count_include_pad=True).numpy()
    (y,) = _run_image(session, "AvgPoolV2", [x], [inclusive.shape], ksize=[1, 1, 3, 3],
                      strides=[1, 1, 1, 1], pads=[1, 1, 1, 1], exclusive=False)
    close(y, inclusive)
    glob = x.mean(axis=(2, 3), keepdims=True)
    (y,) = _run_image(session, "AvgPoolV2", [x], [glob.shape], ksize=[1, 1, 1, 1],
                      strides=[1, 1, 1, 1], global_pooling=True)
    close(y, glob)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    same = F.avg_pool2d(_nchw(x), 3, 1, padding=1, count_include_pad=False).numpy()
    (y,) = _run_image(session, "AvgPool", [nhwc], [same.transpose(0, 2, 3, 1).shape],
                      ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")
    close(y.transpose(0, 3, 1, 2), same)
    with pytest.raises(openacl.AclError) as info:  # SAME with an extra pad at the end
        _run_image(session, "AvgPool", [nhwc], [(1, 3, 3, 2)], ksize=[1, 3, 3, 1],
                   strides=[1, 2, 2, 1], padding="SAME")
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "symmetric" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        _run_image(session, "AvgPool", [nhwc], [(1, 3, 3, 2)], ksize=[1, 2, 2, 1],
                   strides=[1, 2, 2, 1], padding="FULL")
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "padding" in info.value.message


def test_batch_norm_inference(session):
    x, scale, offset = rand(2, 3, 4, 5), rand(3), rand(3)
    mean, variance = rand(3), rand(3, low=0.5, high=2.0)
    golden = F.batch_norm(_nchw(x), _nchw(mean), _nchw(variance), _nchw(scale), _nchw(offset),
                          False, 0.0, 1e-3).numpy()
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    outs = _run_image(session, "BatchNorm", [nhwc, scale, offset, mean, variance],
                      [nhwc.shape] + [(3,)] * 5, epsilon=1e-3, is_training=False)
    close(outs[0].transpose(0, 3, 1, 2), golden)
    for got, want in zip(outs[1:5], (mean, variance, mean, variance), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(outs[5], np.zeros(3, np.float32))
    with pytest.raises(openacl.AclError) as info:  # is_training defaults to true
        _run_image(session, "BatchNorm", [nhwc, scale, offset, mean, variance],
                   [nhwc.shape] + [(3,)] * 5)
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "is_training" in info.value.message


@pytest.mark.parametrize("align", [True, False])
def test_resize_bilinear_v2(session, align):
    x = rand(1, 2, 4, 5)
    golden = F.interpolate(_nchw(x), size=(7, 3), mode="bilinear", align_corners=align).numpy()
    size = np.array([7, 3], np.int32)
    attrs = {"align_corners": True} if align else {"half_pixel_centers": True}
    (y,) = _run_image(session, "ResizeBilinearV2", [x, size], [golden.shape],
                      formats=[Format.ACL_FORMAT_NCHW, None], **attrs)
    close(y, golden)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # ND reads as NHWC (TensorFlow)
    (y,) = _run_image(session, "ResizeBilinearV2", [nhwc, size], [(1, 7, 3, 2)], **attrs)
    close(y.transpose(0, 3, 1, 2), golden)
    with pytest.raises(openacl.AclError) as info:  # TensorFlow's legacy mapping
        _run_image(session, "ResizeBilinearV2", [nhwc, size], [(1, 7, 3, 2)])
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH


def test_unknown_op_type_suggests_only_close_names(session):
    for name, expected in (("Conv3D", "Conv2D"), ("maxpool", "MaxPool")):
        with pytest.raises(openacl.AclError) as info:
            op.execute_v2(name, [], [], [], [], None, None)
        assert info.value.code == ACL_ERROR_OP_NOT_FOUND
        assert expected in info.value.message.split("near it")[1]
    with pytest.raises(openacl.AclError) as info:
        op.execute_v2("Dropout", [], [], [], [], None, None)
    assert "near it" not in info.value.message  # nothing close: no unrelated suggestion
    from openacl.aclop.types import near_op_types
    assert "ConcatV2D" not in near_op_types("Conv2D") and near_op_types("Foo") == []


def test_infer_shape_of_nhwc_image_ops(session):
    dx, dw = session.desc(np.float32, [2, 9, 8, 4]), session.desc(np.float32, [3, 3, 4, 6])
    attr = _attr_of(strides=[1, 2, 2, 1], pads=[1, 1, 1, 1])  # data_format NHWC, the default
    try:
        assert op.infer_shape("Conv2D", [dx, dw], None, 1, attr) == \
            [((2, 5, 4, 6), DataType.ACL_FLOAT)]
    finally:
        op.destroy_attr(attr)
    attr = _attr_of(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
    try:
        assert op.infer_shape("MaxPool", [dx], None, 1, attr) == \
            [((2, 5, 4, 4), DataType.ACL_FLOAT)]
    finally:
        op.destroy_attr(attr)


# -- op types added on existing aclnn operators, against torch ------------------------------------
def _bits(*shape):
    return RNG.integers(-50, 50, shape).astype(np.int32)


DIRECT = {  # op type -> (torch function, inputs)
    "Acos": (torch.acos, lambda: [rand(3, 4, low=-0.9, high=0.9)]),
    "Asin": (torch.asin, lambda: [rand(3, 4, low=-0.9, high=0.9)]),
    "Atan": (torch.atan, lambda: [rand(3, 4)]),
    "Acosh": (torch.acosh, lambda: [rand(3, 4, low=1.1, high=3.0)]),
    "Asinh": (torch.asinh, lambda: [rand(3, 4)]),
    "Atanh": (torch.atanh, lambda: [rand(3, 4, low=-0.9, high=0.9)]),
    "Cosh": (torch.cosh, lambda: [rand(3, 4)]),
    "Sinh": (torch.sinh, lambda: [rand(3, 4)]),
    "Tan": (torch.tan, lambda: [rand(3, 4, low=-1.0, high=1.0)]),
    "HardSwish": (F.hardswish, lambda: [rand(3, 4, low=-4.0, high=4.0)]),
    "HardSigmoid": (F.hardsigmoid, lambda: [rand(3, 4, low=-4.0, high=4.0)]),
    "Relu6": (F.relu6, lambda: [rand(3, 4, low=-3.0, high=9.0)]),
    "Invert": (torch.bitwise_not, lambda: [_bits(3, 4)]),
    "BitwiseAnd": (torch.bitwise_and, lambda: [_bits(3, 4), _bits(4)]),
    "BitwiseOr": (torch.bitwise_or, lambda: [_bits(3, 4), _bits(3, 4)]),
    "BitwiseXor": (torch.bitwise_xor, lambda: [_bits(1, 4), _bits(3, 1)]),
}


@pytest.mark.parametrize("op_type", sorted(DIRECT))
def test_direct_op_types_match_torch(session, op_type):
    function, make = DIRECT[op_type]
    inputs = make()
    golden = function(*[torch.from_numpy(a) for a in inputs]).numpy()
    (y,) = run(session, op_type, inputs, [(golden.shape, golden.dtype)])
    close(y, golden)


def test_hard_sigmoid_refuses_other_slopes(session):
    with pytest.raises(openacl.AclError) as info:
        run(session, "HardSigmoid", [rand(4)], [((4,), np.float32)], alpha=0.2)
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "alpha" in info.value.message


def test_roll_tile_gather_v2(session):
    x = rand(3, 4)
    (y,) = run(session, "Roll", [x], [((3, 4), np.float32)], shifts=[1, -2], dims=[0, 1])
    np.testing.assert_array_equal(y, torch.roll(torch.from_numpy(x), (1, -2), (0, 1)).numpy())
    golden = np.tile(x, (2, 1, 3))
    (y,) = run(session, "TileD", [x], [(golden.shape, np.float32)], multiples=[2, 1, 3])
    np.testing.assert_array_equal(y, golden)
    (y,) = run(session, "Tile", [x, np.array([3, 2], np.int64)], [((9, 8), np.float32)])
    np.testing.assert_array_equal(y, np.tile(x, (3, 2)))
    indices = np.array([[2, 0], [1, 1], [0, 2]], np.int64)
    golden = np.take(rand(2, 3, 5), indices, axis=1)
    source = np.ascontiguousarray(RNG.uniform(size=(2, 3, 5)).astype(np.float32))
    golden = np.take(source, indices, axis=1)
    (y,) = run(session, "GatherV2", [source, indices, np.array([1], np.int32)],
               [(golden.shape, np.float32)])
    np.testing.assert_array_equal(y, golden)
    (y,) = run(session, "GatherV2", [source, np.array(2, np.int32), np.array([-1], np.int32)],
               [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, source[:, :, 2])
    with pytest.raises(openacl.AclError) as info:  # fewer multiples than dims
        run(session, "TileD", [x], [((3, 8), np.float32)], multiples=[2])
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "multiples" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        run(session, "GatherV2", [source, indices, np.array([3], np.int32)],
            [(golden.shape, np.float32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "axis" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        run(session, "GatherV2", [source, indices, np.array([1], np.int32)],
            [(golden.shape, np.float32)], batch_dims=1)
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "batch_dims" in info.value.message


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pooling_max_and_avg(session, layout):
    x = rand(2, 3, 7, 8)
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) \
        if layout == "NHWC" else (lambda a: a)
    from_layout = (lambda a: a.transpose(0, 3, 1, 2)) if layout == "NHWC" else (lambda a: a)
    golden = F.max_pool2d(_nchw(x), 3, 2, padding=1, ceil_mode=True).numpy()
    (y,) = _run_image(session, "Pooling", [to_layout(x)], [to_layout(golden).shape], mode=0,
                      window=[3, 3], stride=[2, 2], pad=[1, 1, 1, 1], data_format=layout)
    close(from_layout(y), golden)  # ceil_mode 0 is ceil
    golden = F.avg_pool2d(_nchw(x), 3, 2, padding=1, count_include_pad=True).numpy()
    (y,) = _run_image(session, "Pooling", [to_layout(x)], [to_layout(golden).shape], mode=1,
                      window=[3, 3], stride=[2, 2], pad=[1, 1, 1, 1], ceil_mode=1,
                      data_format=layout)
    close(from_layout(y), golden)  # Caffe's average counts the padding
    golden = x.mean(axis=(2, 3), keepdims=True)
    (y,) = _run_image(session, "Pooling", [to_layout(x)], [to_layout(golden).shape], mode=1,
                      global_pooling=True, data_format=layout)
    close(from_layout(y), golden)


def test_pooling_bad_paths(session):
    x = rand(1, 2, 6, 6)
    for attrs, name in (({"mode": 2}, "mode"), ({"ceil_mode": 2}, "ceil_mode"),
                        ({"dilation": [1, 1, 2, 2]}, "dilation"), ({"window": [2]}, "window"),
                        ({"mode": 1, "window": [2, 2], "pad": [0, 1, 0, 1]}, "pad"),
                        ({"data_format": "NCDHW"}, "data_format")):
        with pytest.raises(openacl.AclError) as info:
            _run_image(session, "Pooling", [x], [(1, 2, 6, 6)], **attrs)
        assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH, attrs
        assert name in info.value.message


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_backprop_input_is_the_input_gradient(session, layout):
    x = torch.from_numpy(rand(2, 4, 9, 8)).requires_grad_()
    w = rand(6, 2, 3, 3)  # groups 2
    y = F.conv2d(x, _nchw(w), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    dy = torch.from_numpy(rand(*y.shape))
    (golden,) = torch.autograd.grad(y, x, dy)
    strides, dilations, size = [1, 1, 2, 1], [1, 1, 1, 2], [2, 4, 9, 8]
    dy_in, w_in, fmt = dy.numpy(), w, Format.ACL_FORMAT_NCHW
    if layout == "NHWC":
        strides, dilations, size = [1, 2, 1, 1], [1, 1, 2, 1], [2, 9, 8, 4]
        dy_in, w_in = dy.numpy().transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
        fmt = Format.ACL_FORMAT_HWCN
    out_shape = tuple(size)
    (grad,) = _run_image(session, "Conv2DBackpropInput",
                         [np.array(size, np.int32), np.ascontiguousarray(w_in),
                          np.ascontiguousarray(dy_in)], [out_shape], formats=[None, fmt, None],
                         strides=strides, pads=[1, 1, 0, 0], dilations=dilations, groups=2,
                         data_format=layout)
    close(grad.transpose(0, 3, 1, 2) if layout == "NHWC" else grad, golden.numpy())
    with pytest.raises(openacl.AclError) as info:  # no Conv2D input of that size gives dy
        _run_image(session, "Conv2DBackpropInput",
                   [np.array([2, 4, 30, 8] if layout == "NCHW" else [2, 30, 8, 4], np.int32),
                    np.ascontiguousarray(w_in), np.ascontiguousarray(dy_in)],
                   [(2, 4, 30, 8) if layout == "NCHW" else (2, 30, 8, 4)],
                   formats=[None, fmt, None], strides=strides, pads=[1, 1, 0, 0],
                   dilations=dilations, groups=2, data_format=layout)
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "input_size" in info.value.message


def test_infer_shape_of_added_op_types(session):
    dx = session.desc(np.float32, [2, 3, 7, 8])
    for op_type, attrs, expected in (
            ("TileD", {"multiples": [1, 2, 1, 3]}, (2, 6, 7, 24)),
            ("Pooling", {"window": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]},
             (2, 3, 4, 5)),  # ceil: H (7 + 2 - 3) / 2 + 1, W ceil(7 / 2) + 1
            ("Pooling", {"window": [3, 3], "stride": [2, 2], "ceil_mode": 1}, (2, 3, 3, 3))):
        attr = _attr_of(**attrs)
        try:
            assert op.infer_shape(op_type, [dx], None, 1, attr) == \
                [(expected, DataType.ACL_FLOAT)], op_type
        finally:
            op.destroy_attr(attr)


# -- the types of openacl.aclop.types_more ---------------------------------------------------------
def test_pad_and_pad_v3_modes(session):
    x = rand(2, 3, 4)
    paddings = np.array([[0, 0], [1, 2], [2, 1]], np.int64)
    golden = np.pad(x, [(0, 0), (1, 2), (2, 1)])
    (y,) = run(session, "Pad", [x, paddings], [(golden.shape, np.float32)])
    np.testing.assert_array_equal(y, golden)
    value = np.array([1.5], np.float32)
    golden = np.pad(x, [(0, 0), (1, 2), (2, 1)], constant_values=1.5)
    (y,) = run(session, "PadV3", [x, paddings.ravel(), value], [(golden.shape, np.float32)])
    np.testing.assert_array_equal(y, golden)
    split = np.array([0, 1, 2, 0, 2, 1], np.int32)  # befores, then afters
    (y,) = run(session, "PadV3", [x, split, value], [(golden.shape, np.float32)],
               paddings_contiguous=False)
    np.testing.assert_array_equal(y, golden)
    for mode, numpy_mode in (("reflect", "reflect"), ("edge", "edge")):
        golden = np.pad(x, [(0, 0), (1, 2), (2, 1)], mode=numpy_mode)
        (y,) = run(session, "PadV3", [x, paddings.ravel()], [(golden.shape, np.float32)],
                   mode=mode)
        np.testing.assert_array_equal(y, golden)
    with pytest.raises(openacl.AclError) as info:
        run(session, "Pad", [x, np.array([1, 1], np.int64)], [((4, 3, 4), np.float32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "paddings" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        run(session, "PadV3", [x, paddings.ravel()], [(golden.shape, np.float32)],
            mode="symmetric")
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "mode" in info.value.message


def test_reverse_triangles_and_gathers(session):
    x = rand(3, 4, 5)
    (y,) = run(session, "ReverseV2", [x, np.array([0, -1], np.int32)], [(x.shape, np.float32)])
    np.testing.assert_array_equal(y, x[::-1, :, ::-1])
    for op_type, function in (("Tril", np.tril), ("Triu", np.triu)):
        (y,) = run(session, op_type, [x], [(x.shape, np.float32)], diagonal=1)
        np.testing.assert_array_equal(y, function(x, 1))
    index = RNG.integers(0, 3, (2, 4, 5)).astype(np.int64)
    (y,) = run(session, "GatherElements", [x, index], [(index.shape, np.float32)], dim=0)
    np.testing.assert_array_equal(y, np.take_along_axis(x, index, 0))
    indices = np.array([[0, 1], [2, 3]], np.int32)
    (y,) = run(session, "GatherNd", [x, indices], [((2, 5), np.float32)])
    np.testing.assert_array_equal(y, x[[0, 2], [1, 3]])
    with pytest.raises(openacl.AclError) as info:
        run(session, "ReverseV2", [x, np.array([0, 0], np.int32)], [(x.shape, np.float32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "axis" in info.value.message


def test_top_k_v2_and_sort(session):
    x = rand(3, 6)
    values, indices = run(session, "TopKV2", [x, np.array([2], np.int32)],
                          [((3, 2), np.float32), ((3, 2), np.int64)],
                          indices_dtype=int(DataType.ACL_INT64))
    golden = torch.topk(torch.from_numpy(x), 2)
    np.testing.assert_array_equal(values, golden.values.numpy())
    np.testing.assert_array_equal(indices, golden.indices.numpy())
    values, indices = run(session, "TopKV2", [x, np.array([2], np.int32)],
                          [((3, 2), np.float32), ((3, 2), np.int64)], largest=False,
                          indices_dtype=int(DataType.ACL_INT64))
    np.testing.assert_array_equal(values, torch.topk(torch.from_numpy(x), 2, largest=False)
                                  .values.numpy())
    y1, y2 = run(session, "Sort", [x], [((3, 6), np.float32), ((3, 6), np.int64)],
                 descending=True, y2_dtype=DataType.ACL_INT64)
    golden = torch.sort(torch.from_numpy(x), descending=True)
    np.testing.assert_array_equal(y1, golden.values.numpy())
    np.testing.assert_array_equal(y2, golden.indices.numpy())


@pytest.mark.parametrize("op_type", ["TopK", "TopKV2"])
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_int32_indices_by_default(session, op_type, largest):
    """CANN's IR defaults to int32 indices: aclnnTopk's int64 ones are narrowed through a
    scratch buffer of the call's own."""
    x = rand(4, 9)
    values, indices = run(session, op_type, [x, np.array(3, np.int32)],
                          [((4, 3), np.float32), ((4, 3), np.int32)], largest=largest)
    golden = torch.topk(torch.from_numpy(x), 3, largest=largest)
    np.testing.assert_array_equal(values, golden.values.numpy())
    np.testing.assert_array_equal(indices, golden.indices.numpy().astype(np.int32))
    assert indices.dtype == np.int32


def test_sort_int32_indices_handle_reused(session):
    """A handle's scratch buffer is allocated per run: two runs with new data both right."""
    x = rand(3, 7)
    dx, _, _ = session.tensor(x)
    d1, _, _ = session.output((3, 7), np.float32)
    d2, _, _ = session.output((3, 7), np.int32)
    attr = make_attr(descending=True)
    handle = op.create_handle("Sort", [dx], [d1, d2], attr)
    try:
        for _ in range(3):
            data = rand(3, 7)
            _, bx, _ = session.tensor(data)
            _, b1, t1 = session.output((3, 7), np.float32)
            _, b2, t2 = session.output((3, 7), np.int32)
            op.execute_with_handle(handle, [bx], [b1, b2], None)
            golden = torch.sort(torch.from_numpy(data), descending=True)
            np.testing.assert_array_equal(t1.numpy(), golden.values.numpy())
            np.testing.assert_array_equal(t2.numpy(), golden.indices.numpy())
    finally:
        op.destroy_handle(handle)
        op.destroy_attr(attr)
    dy1 = session.desc(np.float32, [-1])
    dy2 = session.desc(np.float32, [-1])
    assert op.infer_shape("Sort", [dx], None, 2, None, [dy1, dy2]) == \
        [((3, 7), DataType.ACL_FLOAT), ((3, 7), DataType.ACL_INT32)]


def test_top_k_indices_dtype_errors(session):
    x, k = rand(3, 6), np.array([2], np.int32)
    with pytest.raises(openacl.AclError) as info:  # the attribute asks int64, the desc int32
        run(session, "TopKV2", [x, k], [((3, 2), np.float32), ((3, 2), np.int32)],
            indices_dtype=int(DataType.ACL_INT64))
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
    assert "'indices'" in info.value.message and "ACL_INT64" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        run(session, "TopKV2", [x, k], [((3, 2), np.float32), ((3, 2), np.int32)],
            indices_dtype=int(DataType.ACL_FLOAT))
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH
    assert "indices_dtype" in info.value.message
    with pytest.raises(openacl.AclError) as info:  # TopK's indices are int32 only
        run(session, "TopK", [x, k], [((3, 2), np.float32), ((3, 2), np.int64)])
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "ACL_INT32" in info.value.message
    with pytest.raises(openacl.AclError) as info:
        run(session, "Sort", [x], [((3, 6), np.float32), ((3, 6), np.float32)])
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "'y2'" in info.value.message


def test_addcmul_addcdiv_swish_prelu(session):
    data, x1, x2 = rand(2, 3), rand(2, 3), rand(1, 3, low=0.5, high=2.0)
    value = np.array([0.5], np.float32)
    (y,) = run(session, "Addcmul", [data, x1, x2, value], [((2, 3), np.float32)])
    close(y, data + 0.5 * x1 * x2)
    (y,) = run(session, "Addcdiv", [data, x1, x2, value], [((2, 3), np.float32)])
    close(y, data + 0.5 * x1 / x2)
    x = rand(2, 3, 4)
    (y,) = run(session, "Swish", [x], [(x.shape, np.float32)], scale=1.5)
    t = torch.from_numpy(x)
    close(y, (t * torch.sigmoid(1.5 * t)).numpy())
    weight = rand(3, low=0.0, high=0.5)
    (y,) = run(session, "PRelu", [x, weight], [(x.shape, np.float32)])
    close(y, torch.nn.functional.prelu(t, torch.from_numpy(weight)).numpy())


def test_adaptive_pool_resize_nearest_reduce_prod(session):
    x = rand(1, 2, 6, 7)
    t = torch.from_numpy(x)
    (y,) = run(session, "AdaptiveAvgPool2d", [x], [((1, 2, 3, 2), np.float32)],
               output_size=[3, 2])
    close(y, torch.nn.functional.adaptive_avg_pool2d(t, (3, 2)).numpy())
    golden = torch.nn.functional.interpolate(t, size=(9, 5), mode="nearest").numpy()
    ins = [session.tensor(x), session.tensor(np.array([9, 5], np.int32))]
    nchw = session.desc(np.float32, x.shape, Format.ACL_FORMAT_NCHW)
    outs = [session.output((1, 2, 9, 5), np.float32)]
    out_desc = session.desc(np.float32, (1, 2, 9, 5), Format.ACL_FORMAT_NCHW)
    op.execute_v2("ResizeNearestNeighborV2", [nchw, ins[1][0]], [b for _, b, _ in ins],
                  [out_desc], [outs[0][1]], None, None)
    np.testing.assert_array_equal(outs[0][2].numpy(), golden)
    (y,) = run(session, "ReduceProd", [x, np.array([2], np.int32)], [((1, 2, 7), np.float32)])
    close(y, np.prod(x, axis=2))
    (y,) = run(session, "ReduceProd", [x, np.array([], np.int32)], [(x.shape, np.float32)])
    np.testing.assert_array_equal(y, x)
    with pytest.raises(openacl.AclError) as info:
        run(session, "ReduceProd", [x, np.array([1, 4], np.int32)], [((1, 6), np.float32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "axes" in info.value.message


@pytest.mark.parametrize("axes", [[1, 2], [0, 2], [3, 1], [0, 1, 3], [-1, 0]])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_prod_several_axes(session, axes, keep):
    """Adjacent axes reduce through a view, others through a permuted scratch copy; one
    rounding either way (float16 checked against the float64 product rounded once)."""
    x = rand(2, 3, 4, 5, low=0.6, high=1.6).astype(np.float16)
    golden = np.prod(x.astype(np.float64), axis=tuple(axes), keepdims=keep)
    (y,) = run(session, "ReduceProd", [x, np.array(axes, np.int64)],
               [(golden.shape, np.float16)], keep_dims=keep)
    close(y, golden.astype(np.float16), np.float16)
    dx = session.desc(np.float16, x.shape)
    _, ba, _ = session.tensor(np.array(axes, np.int64))
    da = session.desc(np.int64, [len(axes)])
    attr = make_attr(keep_dims=keep)
    try:
        assert op.infer_shape("ReduceProd", [dx, da], [0, ba], 1, attr) == \
            [(golden.shape, DataType.ACL_FLOAT16)]
    finally:
        op.destroy_attr(attr)


RANGES = [  # (start, limit, delta, dtype, is_closed)
    (0, 10, 3, np.int32, False), (10, 0, -3, np.int64, False), (10, 1, -3, np.int32, False),
    (0, 9, 3, np.int32, True), (0.5, 2.0, 0.25, np.float32, False),
    (0.5, 2.0, 0.25, np.float32, True), (1.0, -1.0, -0.3, np.float16, False),
    (2.0, 5.0, 0.5, np.float64, False),
]


@pytest.mark.parametrize("start,limit,delta,dtype,closed", RANGES)
def test_range(session, start, limit, delta, dtype, closed):
    """Range's value inputs are real numbers; its length is CANN's shape inference's."""
    end = limit + (delta / 2 if closed else 0)
    golden = np.arange(start, end, delta, dtype=np.float64)
    values = [np.array(v, dtype) for v in (start, limit, delta)]
    (y,) = run(session, "Range", values, [(golden.shape, dtype)], is_closed=closed)
    close(y, golden.astype(dtype), dtype) if np.dtype(dtype).kind == "f" else \
        np.testing.assert_array_equal(y, golden.astype(dtype))
    descs, buffers = zip(*[session.tensor(v)[:2] for v in values], strict=True)
    attr = make_attr(is_closed=closed)
    try:
        assert op.infer_shape("Range", list(descs), list(buffers), 1, attr) == \
            [(golden.shape, DataType(openacl.dtypes.from_numpy_dtype(dtype)))]
    finally:
        op.destroy_attr(attr)


def test_range_mixed_types_and_errors(session):
    values = [np.array(1, np.int32), np.array(4.0, np.float32), np.array(1, np.int32)]
    descs, buffers = zip(*[session.tensor(v)[:2] for v in values], strict=True)
    assert op.infer_shape("Range", list(descs), list(buffers), 1) == \
        [((3,), DataType.ACL_FLOAT)]  # mixed input types: float32, as CANN infers
    for start, limit, delta, word in [(0, 5, 0, "zero"), (0, 5, -1, "steps away"),
                                      (5, 0, 1, "steps away")]:
        with pytest.raises(openacl.AclError) as info:
            run(session, "Range", [np.array(v, np.int32) for v in (start, limit, delta)],
                [((5,), np.int32)])
        assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH
        assert "'delta'" in info.value.message and word in info.value.message
    with pytest.raises(openacl.AclError) as info:  # the desc's length is not the sequence's
        run(session, "Range", [np.array(v, np.int32) for v in (0, 5, 1)], [((4,), np.int32)])
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
    with pytest.raises(openacl.AclError) as info:  # one value each
        run(session, "Range", [np.array([0, 1], np.int32), np.array(5, np.int32),
                               np.array(1, np.int32)], [((5,), np.int32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'start'" in info.value.message
    with pytest.raises(openacl.AclError) as info:  # other op types still take only integers
        run(session, "Transpose", [rand(2, 3), np.array([1.0, 0.0], np.float32)],
            [((3, 2), np.float32)])
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "integer" in info.value.message


def test_rms_group_and_instance_norm(session):
    x, gamma = rand(2, 3, 8), rand(8, low=0.5, high=1.5)
    y, rstd = run(session, "RmsNorm", [x, gamma], [((2, 3, 8), np.float32),
                                                   ((2, 3, 1), np.float32)], epsilon=1e-5)
    wide = x.astype(np.float64)
    golden_rstd = 1 / np.sqrt((wide ** 2).mean(-1, keepdims=True) + 1e-5)
    close(rstd, golden_rstd)
    close(y, wide * golden_rstd * gamma)
    x = rand(2, 4, 3, 3)
    weight, bias = rand(4), rand(4)
    y, mean, rstd = run(session, "GroupNorm", [x, weight, bias],
                        [(x.shape, np.float32), ((2, 2), np.float32), ((2, 2), np.float32)],
                        num_groups=2, eps=1e-5)
    golden = torch.nn.functional.group_norm(torch.from_numpy(x), 2, torch.from_numpy(weight),
                                            torch.from_numpy(bias), 1e-5)
    close(y, golden.numpy())
    close(mean, x.reshape(2, 2, -1).mean(-1))
    with pytest.raises(openacl.AclError) as info:
        run(session, "GroupNorm", [x, weight, bias],
            [(x.shape, np.float32), ((2, 3), np.float32), ((2, 3), np.float32)], num_groups=3)
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "num_groups" in info.value.message
    x = rand(2, 3, 4, 5)
    gamma, beta = rand(3), rand(3)
    y, mean, variance = run(session, "InstanceNorm", [x, gamma, beta],
                            [(x.shape, np.float32), ((2, 3, 1, 1), np.float32),
                             ((2, 3, 1, 1), np.float32)], data_format="NCHW", epsilon=1e-5)
    golden = torch.nn.functional.instance_norm(torch.from_numpy(x), weight=torch.from_numpy(
        gamma), bias=torch.from_numpy(beta), eps=1e-5)
    close(y, golden.numpy())


def test_split_types_write_every_output(session):
    x = rand(4, 6)
    outputs = [((4, 2), np.float32)] * 3
    pieces = np.split(x, 3, axis=1)
    for y, golden in zip(run(session, "SplitD", [x], outputs, split_dim=1, num_split=3),
                         pieces, strict=True):
        np.testing.assert_array_equal(y, golden)
    ys = run(session, "Split", [np.array([-1], np.int32), x], outputs, num_split=3)
    for y, golden in zip(ys, pieces, strict=True):
        np.testing.assert_array_equal(y, golden)
    sizes = [((1, 6), np.float32), ((3, 6), np.float32)]
    ys = run(session, "SplitV", [x, np.array([1, -1], np.int64), np.array([0], np.int32)],
             sizes, num_split=2)
    np.testing.assert_array_equal(ys[0], x[:1])
    np.testing.assert_array_equal(ys[1], x[1:])
    ys = run(session, "SplitVD", [x], sizes, size_splits=[1, 3], split_dim=0, num_split=2)
    np.testing.assert_array_equal(ys[1], x[1:])
    d = session.tensor(x)[0]
    attr = make_attr(split_dim=1, num_split=3)
    try:
        assert op.infer_shape("SplitD", [d], None, 3, attr) == [
            ((4, 2), DataType.ACL_FLOAT)] * 3
    finally:
        op.destroy_attr(attr)
    with pytest.raises(openacl.AclError) as info:  # 6 is not cut into 4 equal pieces
        run(session, "SplitD", [x], [((4, 1), np.float32)] * 4, split_dim=1, num_split=4)
    assert info.value.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "num_split" in info.value.message
    with pytest.raises(openacl.AclError) as info:  # two descs for three pieces
        run(session, "SplitD", [x], outputs[:2], split_dim=1, num_split=3)
    assert info.value.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
    with pytest.raises(openacl.AclError) as info:
        run(session, "SplitV", [x, np.array([1, 2], np.int64), np.array([0], np.int32)],
            sizes, num_split=2)
    assert info.value.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "size_splits" in info.value.message


def test_both_faces_refuse_a_call_no_loaded_model_matches(session, tmp_path):
    import json

    from openacl.aclop import models
    from openacl.compat.acl import op as acl_op

    spec = [{"op": "Add", "input_desc": [{"format": "ND", "shape": [2, 3], "type": "float"}] * 2,
             "output_desc": [{"format": "ND", "shape": [2, 3], "type": "float"}]}]
    (tmp_path / "add.json").write_text(json.dumps(spec))
    x = rand(2, 3)
    run(session, "Mul", [x, x], [((2, 3), np.float32)])  # nothing loaded: runs directly
    op.set_model_dir(str(tmp_path))
    assert models.registry().active and acl_op.registry() is models.registry()
    (y,) = run(session, "Add", [x, x], [((2, 3), np.float32)])
    np.testing.assert_array_equal(y, x + x)
    with pytest.raises(openacl.AclError) as info:
        run(session, "Mul", [x, x], [((2, 3), np.float32)])
    assert info.value.code == ACL_ERROR_OP_NOT_FOUND
    ins = [session.tensor(x), session.tensor(x)]
    outs = [session.output((2, 3), np.float32)]
    assert acl_op.execute_v2("Mul", [d for d, _, _ in ins], [b for _, b, _ in ins],
                             [d for d, _, _ in outs], [b for _, b, _ in outs], None,
                             None) == ACL_ERROR_OP_NOT_FOUND
