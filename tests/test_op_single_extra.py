"""The op types of openacl.aclop.types_extra (elementwise math and activations, shape ops,
DepthwiseConv2D) through openacl.op, against torch (numpy where torch has no such slice)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import openacl
from openacl import op
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
)
from test_op_single import Session, close, make_attr, rand

F16, F32 = np.float16, np.float32
NCHW, NHWC, HWCN = Format.ACL_FORMAT_NCHW, Format.ACL_FORMAT_NHWC, Format.ACL_FORMAT_HWCN


@pytest.fixture
def session(threaded_runtime):
    """test_op_single's Session: device tensors, descs and buffers released at the end."""
    s = Session()
    yield s
    s.close()


def run(session: Session, op_type: str, inputs: list[np.ndarray], outputs: list[tuple],
        formats: dict[int, Format] | None = None, **attrs) -> list[np.ndarray]:
    """execute_v2 of ``op_type``; ``outputs`` are (shape, dtype) pairs, ``formats`` the desc
    format of some inputs by position (ND otherwise)."""
    descs, buffers = [], []
    for k, array in enumerate(inputs):
        desc, buffer, _ = session.tensor(array)
        if formats and k in formats:
            desc = session.desc(array.dtype, array.shape, formats[k])
        descs.append(desc)
        buffers.append(buffer)
    outs = [session.output(shape, dtype) for shape, dtype in outputs]
    attr = make_attr(**attrs)
    try:
        op.execute_v2(op_type, descs, buffers, [d for d, _, _ in outs],
                      [b for _, b, _ in outs], attr, None)
    finally:
        if attr is not None:
            op.destroy_attr(attr)
    return [t.numpy() for _, _, t in outs]


def error(session: Session, op_type: str, inputs, outputs, formats=None,
          **attrs) -> openacl.AclError:
    with pytest.raises(openacl.AclError) as info:
        run(session, op_type, inputs, outputs, formats, **attrs)
    return info.value


def infer(session: Session, op_type: str, inputs: list[np.ndarray], count: int,
          **attrs) -> list[tuple]:
    """aclopInferShape of ``op_type`` (value inputs read from their buffers)."""
    made = [session.tensor(a) for a in inputs]
    attr = make_attr(**attrs)
    try:
        return op.infer_shape(op_type, [d for d, _, _ in made], [b for _, b, _ in made], count,
                              attr)
    finally:
        if attr is not None:
            op.destroy_attr(attr)


def t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


# -- elementwise --------------------------------------------------------------------------------
UNARY = {
    "Log1p": (torch.log1p, -0.9, 3.0), "Expm1": (torch.expm1, -3.0, 3.0),
    "Selu": (torch.selu, -3.0, 3.0), "Erfc": (torch.erfc, -3.0, 3.0),
    "LogSigmoid": (F.logsigmoid, -6.0, 6.0), "Softsign": (F.softsign, -5.0, 5.0),
    "Trunc": (torch.trunc, -5.0, 5.0),
}


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary_types_match_torch(session, op_type, dtype):
    reference, low, high = UNARY[op_type]
    x = rand(3, 5, 7, dtype=dtype, low=low, high=high)
    (y,) = run(session, op_type, [x], [(x.shape, dtype)])
    golden = reference(t(x).float()).to(torch.float16 if dtype == F16 else torch.float32)
    close(y, golden.numpy(), dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_trunc_keeps_integers_and_rounds_toward_zero(session, dtype):
    x = np.arange(-6 if dtype != np.uint8 else 0, 6, dtype=dtype).reshape(2, -1)
    (y,) = run(session, "Trunc", [x], [(x.shape, dtype)])
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, x)
    x = np.array([-2.5, -1.0, -0.4, 0.0, 0.7, 3.9, np.inf, -np.inf], F32)
    (y,) = run(session, "Trunc", [x], [(x.shape, F32)])
    np.testing.assert_array_equal(y, torch.trunc(t(x)).numpy())


BINARY = {"Atan2": torch.atan2, "Xlogy": torch.xlogy,
          "SquaredDifference": lambda a, b: (a - b) ** 2}


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary_types_broadcast_and_match_torch(session, op_type, dtype):
    x1, x2 = rand(4, 1, 6, dtype=dtype), rand(3, 1, dtype=dtype, low=0.1, high=3.0)
    x1[0, 0, :2] = 0  # xlogy(0, y) is 0
    (y,) = run(session, op_type, [x1, x2], [((4, 3, 6), dtype)])
    golden = BINARY[op_type](t(x1).float(), t(x2).float())
    close(y, golden.to(torch.float16 if dtype == F16 else torch.float32).numpy(), dtype)


def test_squared_difference_of_integers_is_exact(session):
    x1 = np.array([[3, -4, 100]], np.int32)
    x2 = np.array([[1], [-4]], np.int32)
    (y,) = run(session, "SquaredDifference", [x1, x2], [((2, 3), np.int32)])
    np.testing.assert_array_equal(y, (x1 - x2) ** 2)


@pytest.mark.parametrize("dtype", [F32, F16])
def test_nan_inf_finite_predicates(session, dtype):
    x = np.array([[0.0, -1.5, np.nan, np.inf], [-np.inf, 7.0, -np.nan, 65504.0]], dtype)
    for op_type, reference in (("IsNan", torch.isnan), ("IsInf", torch.isinf),
                               ("IsFinite", torch.isfinite)):
        (y,) = run(session, op_type, [x], [(x.shape, np.bool_)])
        np.testing.assert_array_equal(y, reference(t(x)).numpy(), err_msg=op_type)
    (y,) = run(session, "IsFinite", [np.arange(4, dtype=np.int32)], [((4,), np.bool_)])
    assert y.all()
    assert infer(session, "IsNan", [x], 1) == [((2, 4), DataType.ACL_BOOL)]


def test_predicates_refuse_a_non_bool_output(session):
    x = rand(2, 2)
    for op_type in ("IsNan", "IsInf", "IsFinite"):
        exc = error(session, op_type, [x], [((2, 2), F32)])
        assert exc.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH and "DT_BOOL" in exc.message, op_type


@pytest.mark.parametrize("dtype", [F32, F16])
def test_celu_default_and_three_alphas(session, dtype):
    x = rand(4, 9, dtype=dtype, low=-4.0, high=4.0)
    (y,) = run(session, "Celu", [x], [(x.shape, dtype)])
    out = torch.float16 if dtype == F16 else torch.float32
    close(y, torch.celu(t(x).float()).to(out).numpy(), dtype)
    (y,) = run(session, "Celu", [x], [(x.shape, dtype)], alpha1=0.5, alpha2=2.0, alpha3=1.5)
    xf = t(x).float()
    golden = torch.where(xf >= 0, 1.5 * xf, 0.5 * torch.expm1(xf / 2.0))
    close(y, golden.to(out).numpy(), dtype)
    (y,) = run(session, "Celu", [x], [(x.shape, dtype)], alpha1=-0.8, alpha2=-0.8)
    close(y, torch.celu(xf, alpha=-0.8).to(out).numpy(), dtype)


def test_celu_refuses_a_zero_alpha2_or_alpha3(session):
    x = rand(3)
    for name in ("alpha2", "alpha3"):
        exc = error(session, "Celu", [x], [((3,), F32)], **{name: 0.0})
        assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and f"'{name}'" in exc.message


@pytest.mark.parametrize("dtype", [F32, F16])
def test_soft_and_hard_shrink(session, dtype):
    x = rand(5, 6, dtype=dtype)
    out = torch.float16 if dtype == F16 else torch.float32
    for op_type, reference in (("SoftShrink", F.softshrink), ("HardShrink", F.hardshrink)):
        (y,) = run(session, op_type, [x], [(x.shape, dtype)])
        close(y, reference(t(x).float(), 0.5).to(out).numpy(), dtype)
        (y,) = run(session, op_type, [x], [(x.shape, dtype)], lambd=1.25)
        close(y, reference(t(x).float(), 1.25).to(out).numpy(), dtype)
        exc = error(session, op_type, [x], [(x.shape, dtype)], lambd=-1.0)
        assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'lambd'" in exc.message


# -- BiasAdd ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F16])
def test_bias_add_on_the_channel_dim(session, dtype):
    x, bias = rand(2, 3, 4, 5, dtype=dtype), rand(5, dtype=dtype)
    (y,) = run(session, "BiasAdd", [x, bias], [(x.shape, dtype)])  # NHWC: the last dim
    close(y, (t(x) + t(bias)).numpy(), dtype)
    bias3 = rand(3, dtype=dtype)
    (y,) = run(session, "BiasAdd", [x, bias3], [(x.shape, dtype)], data_format="NCHW")
    close(y, (t(x) + t(bias3)[:, None, None]).numpy(), dtype)
    (y,) = run(session, "BiasAdd", [x, bias3], [(x.shape, dtype)], formats={0: NCHW})
    close(y, (t(x) + t(bias3)[:, None, None]).numpy(), dtype)  # x's format decides
    x5, bias2 = rand(2, 2, 3, 4, 5, dtype=dtype), rand(2, dtype=dtype)
    (y,) = run(session, "BiasAdd", [x5, bias2], [(x5.shape, dtype)], data_format="NCDHW")
    close(y, (t(x5) + t(bias2)[:, None, None, None]).numpy(), dtype)


def test_bias_add_integers_and_bad_calls(session):
    x, bias = np.arange(12, dtype=np.int32).reshape(3, 4), np.array([1, -2, 3, -4], np.int32)
    (y,) = run(session, "BiasAdd", [x, bias], [((3, 4), np.int32)])
    np.testing.assert_array_equal(y, x + bias)
    exc = error(session, "BiasAdd", [x, bias], [((3, 4), np.int32)], data_format="HWCN")
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'data_format'" in exc.message
    exc = error(session, "BiasAdd", [x, bias[:3]], [((3, 4), np.int32)])  # C is 4
    assert exc.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'bias'" in exc.message


# -- shape ops ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_pack_stacks_n_inputs(session, axis):
    xs = [rand(3, 4) for _ in range(3)]
    golden = torch.stack([t(x) for x in xs], dim=axis).numpy()
    attrs = {} if axis == 0 else {"axis": axis, "N": 3}
    (y,) = run(session, "Pack", xs, [(golden.shape, F32)], **attrs)
    np.testing.assert_array_equal(y, golden)


def test_pack_float16_infer_and_bad_calls(session):
    xs = [rand(2, 5, dtype=F16) for _ in range(2)]
    (y,) = run(session, "Pack", xs, [((2, 2, 5), F16)], axis=1)
    np.testing.assert_array_equal(y, np.stack(xs, axis=1))
    assert infer(session, "Pack", xs, 1, axis=-1) == [((2, 5, 2), DataType.ACL_FLOAT16)]
    exc = error(session, "Pack", xs, [((2, 2, 5), F16)], N=3)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'N'" in exc.message
    exc = error(session, "Pack", xs, [((2, 2, 5), F16)], axis=3)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'axis'" in exc.message
    exc = error(session, "Pack", [xs[0], rand(2, 4, dtype=F16)], [((2, 2, 5), F16)])
    assert exc.code == ACL_ERROR_OP_INPUT_NOT_MATCH


@pytest.mark.parametrize("axis", [0, -1, 1])
def test_unpack_writes_every_slice(session, axis):
    x = rand(3, 4, 2, dtype=F16)
    pieces = torch.unbind(t(x), dim=axis)
    attrs = {"num": len(pieces)} | ({} if axis == 0 else {"axis": axis})
    ys = run(session, "Unpack", [x], [(p.shape, F16) for p in pieces], **attrs)
    for y, golden in zip(ys, pieces, strict=True):
        np.testing.assert_array_equal(y, golden.numpy())
    assert infer(session, "Unpack", [x], len(pieces), **attrs) == \
        [(tuple(pieces[0].shape), DataType.ACL_FLOAT16)] * len(pieces)


def test_unpack_bad_calls(session):
    x = rand(3, 4)
    exc = error(session, "Unpack", [x], [((4,), F32)] * 2, num=2)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'num'" in exc.message
    exc = error(session, "Unpack", [x], [((4,), F32)] * 2, num=3)  # two descs for three
    assert exc.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH
    exc = error(session, "Unpack", [x], [((3,), F32)] * 4, num=4, axis=2)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'axis'" in exc.message
    exc = error(session, "Unpack", [x], [((3,), F32)] * 4, axis=1)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'num'" in exc.message  # required


@pytest.mark.parametrize("dtype", [F32, F16, np.int32])
def test_pad_d_pads_with_zeros(session, dtype):
    x = (rand(2, 3, 4) * 10).astype(dtype)
    paddings = [[1, 0], [0, 2], [3, 1]]
    golden = np.pad(x, paddings)
    (y,) = run(session, "PadD", [x], [(golden.shape, dtype)], paddings=paddings)
    np.testing.assert_array_equal(y, golden)
    (y,) = run(session, "PadD", [x], [((2, 3, 2), dtype)], paddings=[[0, 0], [0, 0], [-1, -1]])
    np.testing.assert_array_equal(y, x[:, :, 1:3])  # negative pads crop, as Pad's


def test_pad_d_bad_paddings(session):
    x = rand(2, 3)
    for paddings in ([[1, 1]], [[1, 1], [1, 1, 1]], [[0, 0], [-2, -2]]):
        exc = error(session, "PadD", [x], [((4, 5), F32)], paddings=paddings)
        assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'paddings'" in exc.message
    exc = error(session, "PadD", [x], [((4, 5), F32)])
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'paddings'" in exc.message  # required


@pytest.mark.parametrize("axis", [None, 0, 2, 3, -1, -3])
def test_flatten_axis(session, axis):
    x = rand(2, 3, 4, dtype=F16)
    rank = x.ndim
    cut = 1 if axis is None else (axis + rank if axis < 0 else axis)
    golden = x.reshape(int(np.prod(x.shape[:cut])), -1)
    attrs = {} if axis is None else {"axis": axis}
    (y,) = run(session, "Flatten", [x], [(golden.shape, F16)], **attrs)
    np.testing.assert_array_equal(y, golden)
    if axis is None:
        assert infer(session, "Flatten", [x], 1) == [((2, 12), DataType.ACL_FLOAT16)]


def test_flatten_bad_axis(session):
    exc = error(session, "Flatten", [rand(2, 3)], [((6, 1), F32)], axis=3)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'axis'" in exc.message


# StridedSlice specs: (shape, begin, end, strides, masks, the numpy index they stand for)
SLICES = [
    ((5, 6), [1, 0], [4, 6], [1, 2], {}, (slice(1, 4), slice(0, 6, 2))),
    ((5, 6), [-1, 5], [-6, 0], [-2, -1], {}, (slice(-1, -6, -2), slice(5, 0, -1))),
    ((5, 6), [9, -9], [0, 9], [-1, 1], {}, (slice(9, 0, -1), slice(-9, 9))),  # clamped
    ((4, 5, 6), [1, 0, 0], [0, 3, 0], [1, 1, 1], {"begin_mask": 2, "end_mask": 5},
     (slice(1, None), slice(None, 3), slice(None))),
    ((4, 5, 6), [2, 0], [0, 0], [1, -1], {"shrink_axis_mask": 1, "end_mask": 2,
                                          "begin_mask": 2}, (2, slice(None, None, -1))),
    ((4, 5, 6), [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1},
     (Ellipsis, slice(1, 3))),
    ((4, 5, 6), [0, 0, -1], [0, 0, 0], [1, 1, 1],
     {"new_axis_mask": 2, "ellipsis_mask": 1, "shrink_axis_mask": 4},
     (Ellipsis, None, -1)),
    ((4, 5, 6), [1, 0, 0, 2], [3, 0, 0, 5], [1, 1, 1, 2],
     {"new_axis_mask": 2, "ellipsis_mask": 4}, (slice(1, 3), None, Ellipsis, slice(2, 5, 2))),
    ((4, 5), [3], [2], [1], {}, (slice(3, 2),)),  # empty
    ((3, 4), [1, 2], [0, 0], [1, 1], {"shrink_axis_mask": 3}, (1, 2)),  # 0-dim y
]


@pytest.mark.parametrize("case", range(len(SLICES)))
def test_strided_slice_and_strided_slice_d_match_numpy(session, case):
    shape, begin, end, strides, masks, index = SLICES[case]
    x = rand(*shape)
    golden = x[index]
    (y,) = run(session, "StridedSliceD", [x], [(golden.shape, F32)], begin=begin, end=end,
               strides=strides, **masks)
    np.testing.assert_array_equal(y, golden)
    values = [np.array(v, np.int64 if case % 2 else np.int32) for v in (begin, end, strides)]
    (y,) = run(session, "StridedSlice", [x, *values], [(golden.shape, F32)], **masks)
    np.testing.assert_array_equal(y, golden)
    assert infer(session, "StridedSlice", [x, *values], 1, **masks) == \
        [(golden.shape, DataType.ACL_FLOAT)]


def test_strided_slice_float16_and_bad_calls(session):
    x = rand(4, 6, dtype=F16)
    (y,) = run(session, "StridedSliceD", [x], [((2, 3), F16)], begin=[3, 5], end=[0, 0],
               strides=[-2, -2])
    np.testing.assert_array_equal(y, x[3:0:-2, 5:0:-2])
    exc = error(session, "StridedSliceD", [x], [((4, 6), F32)], begin=[0, 0], end=[4, 6],
                strides=[1, 0])
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'strides'" in exc.message
    exc = error(session, "StridedSliceD", [x], [((4, 6), F32)], begin=[0, 0], end=[4, 6],
                strides=[1, 1], ellipsis_mask=3)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'ellipsis_mask'" in exc.message
    exc = error(session, "StridedSliceD", [x], [((4, 6), F32)], begin=[0, 0, 0], end=[4, 6, 1],
                strides=[1, 1, 1])
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'begin'" in exc.message
    exc = error(session, "StridedSliceD", [x], [((6,), F32)], begin=[7, 0], end=[0, 0],
                strides=[1, 1], shrink_axis_mask=1)
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'begin'" in exc.message
    values = [np.array(v, np.int32) for v in ([0, 0], [4, 6], [1, 0])]
    exc = error(session, "StridedSlice", [x, *values], [((4, 6), F16)])
    assert exc.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'strides'" in exc.message
    exc = error(session, "StridedSliceD", [x], [((2, 6), F16)], begin=[0, 0], end=[4, 6],
                strides=[1, 1])  # the desc is not the slice's shape
    assert exc.code == ACL_ERROR_OP_OUTPUT_NOT_MATCH


def test_handles_run_strided_slice_and_unpack_with_new_buffers(session):
    """A handle binds StridedSlice's value inputs at each run (they are not const) and runs
    Unpack's dynamic outputs again with new buffers."""
    x = rand(4, 6)
    dx, _, _ = session.tensor(x)
    dvalues = [session.desc(np.int32, [2]) for _ in range(3)]
    dy, _, _ = session.output((2, 3), F32)
    handle = op.create_handle("StridedSlice", [dx, *dvalues], [dy], None)
    try:
        for spec, index in ((([3, 5], [-5, -7], [-2, -2]), np.s_[3::-2, 5::-2]),
                            (([0, 1], [4, 6], [2, 2]), np.s_[0:4:2, 1:6:2])):
            data = rand(4, 6)
            ins = [session.tensor(data)] + [session.tensor(np.array(v, np.int32)) for v in spec]
            _, by, ty = session.output((2, 3), F32)
            op.execute_with_handle(handle, [b for _, b, _ in ins], [by], None)
            np.testing.assert_array_equal(ty.numpy(), data[index])
    finally:
        op.destroy_handle(handle)
    douts = [session.output((6,), F32)[0] for _ in range(4)]
    attr = make_attr(num=4)
    handle = op.create_handle("Unpack", [dx], douts, attr)
    op.destroy_attr(attr)
    try:
        for _ in range(2):
            data = rand(4, 6)
            _, bx, _ = session.tensor(data)
            outs = [session.output((6,), F32) for _ in range(4)]
            op.execute_with_handle(handle, [bx], [b for _, b, _ in outs], None)
            for k, (_, _, ty) in enumerate(outs):
                np.testing.assert_array_equal(ty.numpy(), data[k])
    finally:
        op.destroy_handle(handle)


# -- DepthwiseConv2D ----------------------------------------------------------------------------
def _depthwise_golden(x_nchw, weight, bias, stride, pad, dilation):
    """torch's grouped convolution in float32, weight (C * M, 1, kh, kw)."""
    return F.conv2d(t(x_nchw).float(), t(weight).float(),
                    None if bias is None else t(bias).float(), stride=stride, padding=pad,
                    dilation=dilation, groups=x_nchw.shape[1])


@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_depthwise_conv2d_hwcn_filter_matches_torch(session, layout, dtype):
    c, m = 3, 2
    x_nchw = rand(2, c, 9, 8, dtype=dtype)
    hwcn = rand(3, 3, c, m, dtype=dtype)  # [kh, kw, C, M]: output channel c * M + m
    weight = np.ascontiguousarray(hwcn.reshape(3, 3, c * m).transpose(2, 0, 1)[:, None])
    bias = rand(c * m, dtype=dtype)
    golden = _depthwise_golden(x_nchw, weight, bias, (2, 1), (1, 1), (1, 2))
    last = layout == "NHWC"
    x = np.ascontiguousarray(x_nchw.transpose(0, 2, 3, 1)) if last else x_nchw
    out = golden.permute(0, 2, 3, 1) if last else golden
    strides, dilations = ([1, 2, 1, 1], [1, 1, 2, 1]) if last else ([1, 1, 2, 1],
                                                                  [1, 1, 1, 2])
    attrs = {"strides": strides, "dilations": dilations, "pads": [1, 1, 1, 1]}
    if not last:
        attrs["data_format"] = "NCHW"
    (y,) = run(session, "DepthwiseConv2D", [x, hwcn, bias], [(tuple(out.shape), dtype)],
               formats={1: HWCN}, **attrs)
    close(y, out.to(torch.float16 if dtype == F16 else torch.float32).numpy(), dtype)
    assert infer(session, "DepthwiseConv2D", [x, hwcn, bias], 1, **attrs) == \
        [(tuple(out.shape), DataType.ACL_FLOAT16 if dtype == F16 else DataType.ACL_FLOAT)]


def test_depthwise_conv2d_nchw_filters_and_defaults(session):
    x = rand(1, 4, 6, 6, dtype=F16)
    filt = rand(1, 4, 3, 3, dtype=F16)  # NCHW [M = 1, C, kh, kw]
    golden = _depthwise_golden(x, filt.reshape(4, 1, 3, 3), None, 1, 0, 1)
    (y,) = run(session, "DepthwiseConv2D", [x, filt], [((1, 4, 4, 4), F16)],
               formats={1: NCHW}, strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NCHW")
    close(y, golden.half().numpy(), F16)
    torch_style = rand(8, 1, 3, 3, dtype=F16)  # already [C * M, 1, kh, kw]
    golden = _depthwise_golden(x, torch_style, None, 1, 0, 1)
    (y,) = run(session, "DepthwiseConv2D", [x, torch_style], [((1, 8, 4, 4), F16)],
               formats={1: NCHW}, strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], data_format="NCHW")
    close(y, golden.half().numpy(), F16)


def test_depthwise_conv2d_bad_calls(session):
    x, filt = rand(1, 5, 5, 2, dtype=F16), rand(3, 3, 2, 1, dtype=F16)
    base = {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1]}
    exc = error(session, "DepthwiseConv2D", [x, filt], [((1, 5, 5, 2), F16)], {1: HWCN},
                **base | {"pads": [1, 0, 1, 1]})
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'pads'" in exc.message
    exc = error(session, "DepthwiseConv2D", [x, filt], [((1, 5, 5, 2), F16)], {1: HWCN},
                **base | {"data_format": "NCDHW"})
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'data_format'" in exc.message
    exc = error(session, "DepthwiseConv2D", [x, filt], [((1, 5, 5, 2), F16)], {1: HWCN},
                **base | {"offset_x": 3})
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'offset_x'" in exc.message
    exc = error(session, "DepthwiseConv2D", [x, rand(3, 3, 3, 1, dtype=F16)],
                [((1, 5, 5, 2), F16)], {1: HWCN}, **base)
    assert exc.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'filter'" in exc.message
    exc = error(session, "DepthwiseConv2D", [x, filt], [((1, 5, 5, 2), F16)],
                {1: Format.ACL_FORMAT_NHWC}, **base)
    assert exc.code == ACL_ERROR_OP_INPUT_NOT_MATCH and "'filter'" in exc.message
    exc = error(session, "DepthwiseConv2D", [x, filt], [((1, 5, 5, 2), F16)], {1: HWCN},
                pads=[1, 1, 1, 1])
    assert exc.code == ACL_ERROR_OP_ATTR_NOT_MATCH and "'strides'" in exc.message  # required


# -- the table ----------------------------------------------------------------------------------
def test_declarations_follow_cann_ir():
    """Inputs, outputs and attributes (names, kinds, defaults) as the REG_OPs have them."""
    expected = {
        "Atan2": ("x1 x2", "y", {}), "Xlogy": ("x1 x2", "y", {}),
        "SquaredDifference": ("x1 x2", "y", {}), "Trunc": ("input_x", "output_y", {}),
        "Celu": ("x", "y", {"alpha1": ("float", 1.0), "alpha2": ("float", 1.0),
                            "alpha3": ("float", 1.0)}),
        "SoftShrink": ("input_x", "output_y", {"lambd": ("float", 0.5)}),
        "HardShrink": ("input_x", "output_y", {"lambd": ("float", 0.5)}),
        "BiasAdd": ("x bias", "y", {"data_format": ("str", "NHWC")}),
        "Pack": ("x*", "y", {"axis": ("int", 0), "N": ("int", 1)}),
        "Unpack": ("x", "y*", {"num": ("int", None), "axis": ("int", 0)}),
        "Flatten": ("x", "y", {"axis": ("int", 1)}),
        "StridedSlice": ("x begin end strides", "y",
                         {m: ("int", 0) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                                  "new_axis_mask", "shrink_axis_mask")}),
        "DepthwiseConv2D": ("x filter bias? offset_w?", "y",
                            {"strides": ("list_int", None),
                             "dilations": ("list_int", [1, 1, 1, 1]),
                             "pads": ("list_int", None), "data_format": ("str", "NHWC"),
                             "offset_x": ("int", 0)}),
    }
    for name, (inputs, outputs, attrs) in expected.items():
        spec = op.OP_TYPES[name]
        assert spec.inputs == tuple(inputs.split()) and spec.outputs == tuple(outputs.split())
        got = {a.name: (a.kind, None if a.default == "<required>" else a.default)
               for a in spec.attrs}
        assert got == attrs, name
    for name in ("Log1p", "Expm1", "IsNan", "IsInf", "IsFinite", "Softsign", "Selu", "Erfc",
                 "LogSigmoid"):
        spec = op.OP_TYPES[name]
        assert (spec.inputs, spec.outputs, spec.attrs) == (("x",), ("y",), ()), name
    assert op.OP_TYPES["StridedSlice"].values == {"begin", "end", "strides"}
    assert [a.name for a in op.OP_TYPES["StridedSliceD"].attrs][:3] == \
        ["begin", "end", "strides"]
    assert op.OP_TYPES["PadD"].attrs[0].kind == "list_list_int"
