"""ONNX op lowerings and graph passes, each against onnxruntime; the real models end to end."""

from __future__ import annotations

import math
import time

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from model_files import MINILM, PPOCR_DET, real_model  # noqa: E402
from op_harness import agreement  # noqa: E402
from openacl.cli.zoo import synthetic_text_page  # noqa: E402
from openacl.errors import ACL_ERROR_PARSE_MODEL, AclError  # noqa: E402
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.passes import fold_onnx, optimize  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(0)
ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32}


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes, feeds, initializers=None, opset=17):
    """A model over ``feeds`` (name -> array); its outputs are the last node's, typed by
    onnxruntime's shape inference."""
    inputs = [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], a.shape)
              for n, a in feeds.items()]
    outputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
               for n in nodes[-1].output if n]
    graph = helper.make_graph(nodes, "test", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), n)
                               for n, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    return model


def _ours(model, feeds) -> list[np.ndarray]:
    """The outputs of ``model`` run by our InferenceSession (closed afterwards)."""
    session = InferenceSession(model)
    try:
        return session.run(None, feeds)
    finally:
        session.close()


def _compare(model, feeds, atol=1e-5, rtol=1e-5):
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    for ours, theirs in zip(_ours(model, feeds), expected, strict=True):
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def _node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


# -- elementwise and activations -----------------------------------------------------------------
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op):
    x = RNG.integers(0, 3, (2, 3)).astype(np.float32)
    _compare(_model([_node(op, ["x", "z"])], {"x": x, "z": x[:1] * 0 + 1}), {"x": x,
                                                                            "z": x[:1] * 0 + 1})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    feeds = {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random((4,)) > 0.5}
    _compare(_model([_node(op, ["a", "b"])], feeds), feeds)


@pytest.mark.parametrize("op, attrs", [("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
                                       ("HardSigmoid", {"alpha": 0.16666670143604279}),
                                       ("HardSigmoid", {}), ("HardSwish", {}),
                                       ("LeakyRelu", {"alpha": 0.2}), ("Erf", {}),
                                       ("Sigmoid", {}), ("Sqrt", {})])
def test_activations(op, attrs):
    x = _f32(2, 3, 8) * 4
    if op == "Sqrt":
        x = np.abs(x)
    _compare(_model([_node(op, ["x"], **attrs)], {"x": x}, opset=20), {"x": x})


def test_pow_with_a_constant_exponent_and_a_tensor_exponent():
    x = np.abs(_f32(3, 4)) + 0.5
    _compare(_model([_node("Pow", ["x", "e"])], {"x": x}, {"e": np.float32(2.0)}), {"x": x})
    feeds = {"x": x, "e": _f32(4)}
    _compare(_model([_node("Pow", ["x", "e"])], feeds), feeds)


def test_clip_constant_computed_and_missing_bounds():
    x = _f32(4, 5) * 3
    _compare(_model([_node("Clip", ["x", "lo", "hi"])], {"x": x},
                    {"lo": np.float32(-1), "hi": np.float32(0.5)}), {"x": x})
    _compare(_model([_node("Clip", ["x", "", "hi"])], {"x": x}, {"hi": np.float32(0.5)}),
             {"x": x})
    feeds = {"x": x, "v": np.array([-0.5, 0.2], np.float32)}  # a computed 0-d lower bound
    _compare(_model([_node("ReduceMin", ["v"], ["lo"], keepdims=0),
                     _node("Clip", ["x", "lo"])], feeds, opset=13), feeds)


def test_where_and_cast():
    feeds = {"c": RNG.random((2, 3)) > 0.5, "x": _f32(2, 3), "z": _f32(3)}
    _compare(_model([_node("Where", ["c", "x", "z"])], feeds), feeds)
    feeds = {"m": RNG.integers(0, 2, (2, 5)).astype(np.int64)}
    _compare(_model([_node("Cast", ["m"], to=TensorProto.BOOL)], feeds), feeds)
    _compare(_model([_node("Cast", ["m"], to=TensorProto.FLOAT)], feeds), feeds)


def test_max_min_of_one_and_two_inputs():
    feeds = {"a": _f32(3, 4), "b": _f32(4)}
    _compare(_model([_node("Max", ["a", "b"])], feeds), feeds)
    _compare(_model([_node("Min", ["a"])], {"a": feeds["a"]}), {"a": feeds["a"]})


# -- data movement --------------------------------------------------------------------------------
def test_transpose_concat_expand():
    x = _f32(2, 3, 4)
    _compare(_model([_node("Transpose", ["x"], perm=[0, 2, 1])], {"x": x}), {"x": x})
    _compare(_model([_node("Transpose", ["x"])], {"x": x}), {"x": x})
    feeds = {"a": _f32(2, 3), "b": _f32(2, 5)}
    _compare(_model([_node("Concat", ["a", "b"], axis=-1)], feeds), feeds)
    _compare(_model([_node("Expand", ["x", "s"])], {"x": x}, {"s": np.array([3, 1, 1, 4])}),
             {"x": x})


@pytest.mark.parametrize("axis, indices", [(0, np.array([[0, 2], [1, 1]])), (1, np.array(2)),
                                           (1, np.array([-1, 0])), (2, np.array([[3], [0]]))])
def test_gather_constant_indices(axis, indices):
    x = _f32(3, 4, 5)
    model = _model([_node("Gather", ["x", "i"], axis=axis)], {"x": x},
                   {"i": indices.astype(np.int64)})
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    session = InferenceSession(model)  # not folded: x is an input
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)
    session.close()


def test_gather_computed_indices_embedding_and_axis():
    table = _f32(10, 6)
    feeds = {"i": RNG.integers(0, 10, (2, 3)).astype(np.int64)}
    _compare(_model([_node("Gather", ["t", "i"])], feeds, {"t": table}), feeds)
    data = _f32(4, 10, 3)
    _compare(_model([_node("Gather", ["t", "i"], axis=1)], feeds, {"t": data}), feeds)


def test_gather_nd():
    feeds = {"x": _f32(3, 4, 5)}
    indices = np.array([[[0, 1]], [[2, -1]]], np.int64)
    _compare(_model([_node("GatherND", ["x", "i"])], feeds, {"i": indices}), feeds)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [1], [1]), ([0, -3], [2, 100], [0, 2], [1, 2]), ([3], [0], [1], [-1]),
    ([-1], [-100], [2], [-2]), ([0], [100], [0], [1])])
def test_slice(starts, ends, axes, steps):
    x = _f32(3, 4, 6)
    consts = {"s": np.array(starts), "e": np.array(ends), "a": np.array(axes),
              "p": np.array(steps)}
    _compare(_model([_node("Slice", ["x", "s", "e", "a", "p"])], {"x": x}, consts), {"x": x})


# -- reductions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                "ReduceL2", "ReduceSumSquare"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions(op, keepdims):
    x = _f32(2, 3, 4)
    model = _model([_node(op, ["x", "axes"], keepdims=keepdims)], {"x": x},
                   {"axes": np.array([-1, 1])}, opset=18)
    _compare(model, {"x": x})


def test_reduce_with_attribute_axes_and_all_axes():
    x = _f32(2, 3, 4)
    _compare(_model([_node("ReduceMean", ["x"], axes=[1])], {"x": x}, opset=13), {"x": x})
    _compare(_model([_node("ReduceSum", ["x"], keepdims=0)], {"x": x}, opset=13), {"x": x})


def test_layer_normalization_with_statistics():
    x = _f32(2, 5, 8)
    model = _model([_node("LayerNormalization", ["x", "g", "b"], ["y", "m", "r"], axis=-1,
                          epsilon=1e-6)], {"x": x}, {"g": _f32(8), "b": _f32(8)})
    _compare(model, {"x": x})
    model = _model([_node("LayerNormalization", ["x", "g"], axis=1)], {"x": x},
                   {"g": _f32(5, 8)})
    _compare(model, {"x": x})


def test_batch_normalization_inference():
    x = _f32(2, 4, 5, 5)
    consts = {"s": _f32(4), "b": _f32(4), "m": _f32(4), "v": np.abs(_f32(4)) + 0.1}
    _compare(_model([_node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)],
                    {"x": x}, consts), {"x": x})


# -- convolution, pooling, resize, pad -------------------------------------------------------
@pytest.mark.parametrize("attrs, w_shape", [
    ({"pads": [1, 1, 1, 1]}, (6, 4, 3, 3)),
    ({"pads": [0, 1, 2, 1], "strides": [2, 1]}, (6, 4, 3, 3)),
    ({"group": 4, "pads": [2, 2, 2, 2], "dilations": [2, 2]}, (8, 1, 3, 3)),
    ({"group": 2, "auto_pad": "SAME_UPPER", "strides": [2, 2]}, (6, 2, 5, 5)),
    ({"auto_pad": "VALID"}, (3, 4, 1, 1))])
def test_conv2d(attrs, w_shape):
    x = _f32(1, 4, 9, 9)
    _compare(_model([_node("Conv", ["x", "w", "b"], **attrs)], {"x": x},
                    {"w": _f32(*w_shape), "b": _f32(w_shape[0])}), {"x": x}, atol=1e-4)


def test_conv1d_and_asymmetric_conv3d():
    x = _f32(1, 2, 10)
    _compare(_model([_node("Conv", ["x", "w"], pads=[2, 1])], {"x": x}, {"w": _f32(3, 2, 3)}),
             {"x": x}, atol=1e-4)
    x = _f32(1, 2, 4, 5, 5)
    _compare(_model([_node("Conv", ["x", "w"], pads=[0, 1, 1, 1, 0, 1])], {"x": x},
                    {"w": _f32(3, 2, 2, 3, 3)}), {"x": x}, atol=1e-4)


@pytest.mark.parametrize("attrs", [{"strides": [2, 2]},
                                   {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                    "output_padding": [1, 1]},
                                   {"strides": [2, 2], "group": 2, "pads": [0, 1, 1, 0]},
                                   # pads derived as ONNX derives them (tf2onnx writes these)
                                   {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
                                   {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
                                   {"strides": [2, 2], "output_shape": [10, 10]},
                                   {"strides": [2, 2], "output_shape": [11, 12]},
                                   {"strides": [3, 2], "output_shape": [14, 11]}])
def test_conv_transpose(attrs):
    x = _f32(1, 4, 5, 5)
    _compare(_model([_node("ConvTranspose", ["x", "w", "b"], **attrs)], {"x": x},
                    {"w": _f32(4, 3, 3, 3), "b": _f32(3 * attrs.get("group", 1))}), {"x": x},
             atol=1e-4)


def test_pools():
    x = _f32(1, 3, 8, 8)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        _compare(_model([_node(op, ["x"])], {"x": x}), {"x": x})
    _compare(_model([_node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                           pads=[1, 1, 1, 1])], {"x": x}), {"x": x})
    _compare(_model([_node("AveragePool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                           count_include_pad=1)], {"x": x}), {"x": x})
    _compare(_model([_node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                           pads=[0, 0, 1, 1])], {"x": x}), {"x": x})


POOL_CASES = [  # (op, input shape, attributes): what the pool operators take not as they are
    ("AveragePool", (1, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "auto_pad": "SAME_UPPER"}),  # tf2onnx's asymmetric pads
    ("AveragePool", (1, 3, 9, 9), {"kernel_shape": [2, 2], "strides": [2, 2],
                                   "auto_pad": "SAME_LOWER", "count_include_pad": 1}),
    ("AveragePool", (2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "ceil_mode": 1}),  # windows past the input
    ("AveragePool", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                   "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", (1, 2, 8, 8), {"kernel_shape": [3, 3], "pads": [2, 0, 1, 2]}),  # wide
    ("AveragePool", (1, 4, 20), {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}),  # 1-d
    ("AveragePool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2],
                                      "pads": [0, 1, 1, 1, 1, 1]}),  # 3-d
    ("AveragePool", (1, 2, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                   "pads": [1, 1, 1, 1]}),  # dilated: a depthwise sum
    ("MaxPool", (1, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 3, 9, 9), {"kernel_shape": [3, 3], "dilations": [2, 2],
                               "pads": [2, 1, 1, 2]}),
    ("MaxPool", (2, 4, 30), {"kernel_shape": [4], "strides": [3], "auto_pad": "SAME_UPPER"}),
    ("MaxPool", (1, 2, 5, 6, 7), {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2],
                                  "pads": [1, 0, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("op, shape, attrs", POOL_CASES)
def test_pools_of_any_geometry(op, shape, attrs):
    """1-d and 3-d pools, asymmetric and wide pads, ceil_mode's windows past the input,
    count_include_pad and dilations (AveragePool's since opset 19), as onnxruntime computes
    them."""
    x = _f32(*shape)
    _compare(_model([_node(op, ["x"], **attrs)], {"x": x}, opset=19), {"x": x})


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},  # rapid-table-det's DBNet
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
], ids=str)
def test_average_pool_to_the_bit(attrs):
    """A window's taps are added in onnxruntime's (and PyTorch's) row-major order: summed
    axis by axis the average differed in the last bit on ~4% of windows, and a model that
    quantises it afterwards (DynamicQuantizeLinear) turned that into whole quanta."""
    x = (np.maximum(RNG.standard_normal((1, 8, 41, 40)), 0) * 3).astype(np.float32)
    model = _model([_node("AveragePool", ["x"], **attrs)], {"x": x}, opset=19)
    (expected,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(_ours(model, {"x": x})[0], expected)


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 8, 9), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),  # 1-d
    ((1, 4, 9, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((2, 2, 11, 10), {"kernel_shape": [3, 3], "strides": [2, 1], "dilations": [2, 2]}),
    ((2, 2, 5, 6, 7), {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2],
                       "pads": [1, 1, 1, 1, 1, 1]}),
], ids=str)
def test_max_pool_indices_match_onnxruntime(shape, attrs):
    """MaxPool's Indices output: int64 indices into the whole (row-major) tensor, as
    SegNet-style models feed them to MaxUnpool; values and indices as onnxruntime's."""
    x = RNG.permutation(math.prod(shape)).astype(np.float32).reshape(shape)  # no ties
    _compare(_model([_node("MaxPool", ["x"], ["y", "i"], **attrs)], {"x": x}, opset=12),
             {"x": x})


def test_pool_refusals():
    x = _f32(1, 2, 6, 6)
    for attrs in ({"kernel_shape": [2, 2], "storage_order": 1},  # column-major indices
                  {"kernel_shape": [3, 3], "pads": [0, 0, 1, 1]},  # asymmetric pads
                  {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}):
        with pytest.raises(AclError, match="Indices output"):
            _ours(_model([_node("MaxPool", ["x"], ["y", "i"], **attrs)], {"x": x}), {"x": x})

    with pytest.raises(AclError, match="4-d pool"):
        x6 = _f32(1, 1, 3, 3, 3, 3)
        _ours(_model([_node("MaxPool", ["x"], kernel_shape=[2, 2, 2, 2])], {"x": x6}),
              {"x": x6})


@pytest.mark.parametrize("attrs, scales, sizes", [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, [1, 1, 2, 2], None),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, None, [1, 2, 18, 3]),
    ({"mode": "nearest"}, [1, 1, 4, 2], None),
    ({"mode": "linear"}, [1, 1, 2, 1.5], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None,
     [1, 2, 7, 11]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None,
     [1, 2, 4, 3])])
def test_resize(attrs, scales, sizes):
    x = _f32(1, 2, 6, 6)
    consts = {"roi": np.zeros(0, np.float32),
              "scales": np.array(scales or [], np.float32)}
    inputs = ["x", "roi", "scales"]
    if sizes is not None:
        consts["sizes"] = np.array(sizes, np.int64)
        inputs.append("sizes")
    _compare(_model([_node("Resize", inputs, **attrs)], {"x": x}, consts), {"x": x})


def test_resize_modes_it_cannot_honour_are_refused():
    x = _f32(1, 2, 6, 6)
    consts = {"roi": np.array([0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9], np.float32),
              "scales": np.array([1, 1, 1.5, 1.5], np.float32)}
    cases = [(["x", "roi", "scales"], {"coordinate_transformation_mode": "tf_crop_and_resize"},
              consts, "tf_crop_and_resize"),
             (["x", "", "", "sizes"], {"keep_aspect_ratio_policy": "not_larger"},
              {"sizes": np.array([1, 2, 9, 9], np.int64)}, "keep_aspect_ratio_policy"),
             ]
    for inputs, attrs, initializers, what in cases:
        feeds = {"x": x} if initializers or "scales" not in inputs else {
            "x": x, "scales": np.array([1, 1, 1.5, 1.5], np.float32)}
        with pytest.raises(AclError) as info:
            InferenceSession(_model([_node("Resize", inputs, **attrs)], feeds, initializers,
                                    opset=19), {k: v.shape for k, v in feeds.items()})
        assert info.value.code == ACL_ERROR_PARSE_MODEL and what in str(info.value)


def test_resize_by_scales_computed_at_run_time_runs_on_the_host():
    x = _f32(1, 2, 6, 6)
    feeds = {"x": x, "scales": np.array([1, 1, 1.5, 1.5], np.float32)}
    _compare(_model([_node("Resize", ["x", "", "scales"], mode="linear")], feeds, opset=19),
             feeds)


def test_pad_constant_and_reflect():
    x = _f32(1, 2, 4, 5)
    pads = {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1])}
    _compare(_model([_node("Pad", ["x", "p", "v"])], {"x": x},
                    {**pads, "v": np.float32(1.5)}), {"x": x})
    _compare(_model([_node("Pad", ["x", "p"], mode="reflect")], {"x": x}, pads), {"x": x})


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype, axis", [(np.float32, 1), (np.float32, -1), (np.int64, 0)])
def test_cumsum_modes(exclusive, reverse, dtype, axis):
    x = RNG.integers(-5, 6, (3, 4, 5)).astype(dtype) if dtype == np.int64 else _f32(3, 4, 5)
    model = _model([_node("CumSum", ["x", "a"], exclusive=exclusive, reverse=reverse)],
                   {"x": x}, {"a": np.array(axis, np.int64)})
    _compare(model, {"x": x})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_extremes_select_last_index(op, keepdims):
    """Ties everywhere (a few integer values): the last index of the extreme, as
    onnxruntime picks it."""
    x = RNG.integers(0, 3, (4, 6, 5)).astype(np.float32)
    for axis in (0, 1, -1):
        _compare(_model([_node(op, ["x"], axis=axis, keepdims=keepdims,
                               select_last_index=1)], {"x": x}), {"x": x})


@pytest.mark.parametrize("fill", [2.5, float("inf"), float("nan")])
@pytest.mark.parametrize("pads", [[0, 0, 1, 2, 0, 0, 2, 1], [0, 1, -1, 2, 1, 0, 2, -2]])
def test_pad_with_a_computed_fill(fill, pads):
    """A constant_value computed in the graph (attention graphs compute theirs): the padding
    takes it exactly, inf and NaN included, with negative pads cropping."""
    x = _f32(2, 3, 4, 5)
    v = np.array([fill], np.float32)
    nodes = [_node("Squeeze", ["v"], ["fill"]), _node("Pad", ["x", "p", "fill"])]
    model = _model(nodes, {"x": x, "v": v}, {"p": np.array(pads, np.int64)})
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x, "v": v})
    np.testing.assert_array_equal(_ours(model, {"x": x, "v": v})[0], expected[0])


def test_pad_computed_fill_must_be_one_value():
    x = _f32(1, 2, 3)
    v = np.ones(2, np.float32)
    model = _model([_node("Pad", ["x", "p", "v"])], {"x": x, "v": v},
                   {"p": np.array([0, 1, 1, 0, 0, 0], np.int64)})
    with pytest.raises(AclError, match="constant_value") as info:
        _ours(model, {"x": x, "v": v})
    assert info.value.code == ACL_ERROR_PARSE_MODEL


# -- passes ---------------------------------------------------------------------------------------
def _shape_plumbing_model():
    """y = Reshape(x, Concat(Shape(x)[0], -1)) + Range(0, Size(x)/Shape(x)[0]) as float:
    everything but the Reshape and the Add folds."""
    nodes = [_node("Shape", ["x"], ["shape"]),
             _node("Gather", ["shape", "zero"], ["batch"], axis=0),
             _node("Unsqueeze", ["batch", "zero"], ["batch1"]),
             _node("Concat", ["batch1", "minus1"], ["target"], axis=0),
             _node("Reshape", ["x", "target"], ["flat"]),
             _node("Size", ["x"], ["size"]),
             _node("Div", ["size", "batch"], ["width"]),
             _node("Range", ["zero", "width", "one"], ["positions"]),
             _node("Cast", ["positions"], ["pos_f"], to=TensorProto.FLOAT),
             _node("Neg", ["pos_f"], ["unused"]),
             _node("Add", ["flat", "pos_f"], ["y"])]
    consts = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64),
              "minus1": np.array([-1], np.int64)}
    return _model(nodes, {"x": _f32(2, 3, 4)}, consts)


def test_constant_folding_and_dead_code():
    model = _shape_plumbing_model()
    graph = optimize(import_onnx(fold_onnx(model)))
    assert [n.op_type for n in graph.nodes] == ["Reshape", "Add"]
    assert "unused" not in graph.values and "one" not in graph.initializers
    np.testing.assert_array_equal(graph.initializers["pos_f"], np.arange(12, dtype=np.float32))
    x = _f32(2, 3, 4)
    _compare(model, {"x": x})


def test_folding_leaves_large_results_as_nodes():
    model = _model([_node("Expand", ["c", "s"], ["big"]), _node("Add", ["x", "big"])],
                   {"x": _f32(1024, 2048)},
                   {"c": np.float32(1), "s": np.array([1024, 2048])})
    graph = optimize(import_onnx(fold_onnx(model)))
    assert [n.op_type for n in graph.nodes] == ["Expand", "Add"]


# -- real models ---------------------------------------------------------------------------------
def _real_model(file: str, feeds: dict) -> None:
    path = real_model(file)
    start = time.perf_counter()
    session = InferenceSession(path, input_shapes={k: v.shape for k, v in feeds.items()})
    try:
        ours = session.run(None, feeds)[0]
    finally:
        session.close()
    theirs = ort.InferenceSession(path).run(None, feeds)[0]
    cosine, max_abs = agreement(ours, theirs)
    assert ours.shape == theirs.shape
    assert cosine >= 0.9999 and max_abs <= 1e-4, (cosine, max_abs)
    assert time.perf_counter() - start < 30


def test_minilm_matches_onnxruntime():
    ids = RNG.integers(0, 30522, (1, 128)).astype(np.int64)
    mask = np.ones((1, 128), np.int64)
    mask[:, 90:] = 0
    _real_model(MINILM, {"input_ids": ids, "attention_mask": mask,
                         "token_type_ids": np.zeros((1, 128), np.int64)})


def test_ppocr_det_matches_onnxruntime():
    _real_model(PPOCR_DET, {"x": synthetic_text_page(320)})


# -- recurrent -----------------------------------------------------------------------------------
def _recurrent_model(op: str, gates: int, attrs: dict, peepholes: bool, layout: int = 0,
                     sizes: tuple[int, int, int, int] = (5, 3, 4, 6)):
    steps, batch, features, hidden = sizes
    directions = 2 if attrs.get("direction") == "bidirectional" else 1
    rng = np.random.default_rng(7)
    weights = {
        "W": rng.standard_normal((directions, gates * hidden, features)).astype(np.float32),
        "R": rng.standard_normal((directions, gates * hidden, hidden)).astype(np.float32),
        "B": rng.standard_normal((directions, 2 * gates * hidden)).astype(np.float32)}
    inputs = ["x", "W", "R", "B", "", "h0"]
    if op == "LSTM":
        inputs.append("c0")
        if peepholes:
            weights["P"] = rng.standard_normal((directions, 3 * hidden)).astype(np.float32)
            inputs.append("P")
    x_shape = [batch, steps, features] if layout else [steps, batch, features]
    state_shape = [batch, directions, hidden] if layout else [directions, batch, hidden]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                    helper.make_tensor_value_info("h0", TensorProto.FLOAT, state_shape)]
    if op == "LSTM":
        graph_inputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, state_shape))
    outputs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, inputs, outputs, hidden_size=hidden, layout=layout, **attrs)
    graph = helper.make_graph(
        [node], op.lower(), graph_inputs,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
             "h0": rng.standard_normal(state_shape).astype(np.float32)}
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal(state_shape).astype(np.float32)
    return model, feeds


@pytest.mark.parametrize("op,gates,attrs,peepholes,layout", [
    ("LSTM", 4, {"direction": "bidirectional"}, True, 0),
    ("LSTM", 4, {"direction": "reverse"}, False, 1),
    ("LSTM", 4, {"direction": "bidirectional"}, False, 0),
    ("LSTM", 4, {"direction": "forward"}, False, 0),
    ("GRU", 3, {"direction": "bidirectional", "linear_before_reset": 1}, False, 0),
    ("GRU", 3, {"direction": "forward"}, False, 1),
    ("RNN", 1, {"direction": "bidirectional"}, False, 0),
], ids=["lstm-bidir-peepholes", "lstm-reverse-batch-first", "lstm-bidir", "lstm-forward",
        "gru-lbr-bidir",
        "gru-batch-first", "rnn-bidir"])
def test_recurrent_with_constant_weights_matches_onnxruntime(op, gates, attrs, peepholes,
                                                              layout):
    model, feeds = _recurrent_model(op, gates, attrs, peepholes, layout)
    if layout:  # onnxruntime runs layout 0 only: the same model sequence-major, transposed
        reference, _ = _recurrent_model(op, gates, attrs, peepholes, 0)
        seq_major = {"x": feeds["x"].transpose(1, 0, 2),
                     **{k: v.transpose(1, 0, 2) for k, v in feeds.items() if k != "x"}}
        y, *states = ort.InferenceSession(reference.SerializeToString()).run(None, seq_major)
        expected = [y.transpose(2, 0, 1, 3), *(s.transpose(1, 0, 2) for s in states)]
    else:
        expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    for ours, theirs in zip(_ours(model, feeds), expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("sizes", [(16, 1, 96, 64), (7, 3, 40, 33)], ids=["oww", "ragged"])
def test_lstm_on_the_packed_projection_matches_onnxruntime(direction, sizes):
    """An LSTM whose input projection suits the packed GEMM (openWakeWord's: 16 steps, 96
    features, 64 units): the engine's plan projects with both biases fused and writes the
    recurrence straight into the outputs, run after run."""
    model, feeds = _recurrent_model("LSTM", 4, {"direction": direction}, False, 0, sizes)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    with InferenceSession(model) as session:
        for _ in range(2):
            for ours, theirs in zip(session.run(None, feeds), expected, strict=True):
                np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,gates,step,attrs", [
    ("LSTM", 4, "BidirectionLSTM", {}), ("GRU", 3, "GRU", {"linear_before_reset": 1})],
    ids=["lstm", "gru"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_recurrence_runs_as_one_whole_sequence_step(op, gates, step, attrs, direction):
    """No peepholes, layout 0 (and PyTorch's GRU, linear_before_reset): one aclnn step for
    the whole sequence (weights reordered at load), also without a bias and initial states
    (zeros, as ONNX says)."""
    model, feeds = _recurrent_model(op, gates, {"direction": direction, **attrs}, False)
    node = model.graph.node[0]
    node.input[3:] = [""] * (len(node.input) - 3)  # no B, no initial states
    del model.graph.input[1:]
    feeds = {"x": feeds["x"]}
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    session = InferenceSession(model)
    try:
        assert [s.op for s in session.engine.lowered.steps if s.op != "Permute"] == [step]
        for ours, theirs in zip(session.run(None, feeds), expected, strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    finally:
        session.close()


def test_recurrent_refusals_name_the_attribute():
    model, _ = _recurrent_model("LSTM", 4, {"direction": "forward", "clip": 1.0}, False)
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert info.value.code == ACL_ERROR_PARSE_MODEL and "clip" in info.value.message
    model, _ = _recurrent_model("GRU", 3, {"activations": ["Relu", "Tanh"]}, False)
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert "activations" in info.value.message


def test_is_inf_detecting_neither_sign_is_all_false():
    x = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    for negative, positive in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = helper.make_node("IsInf", ["x"], ["y"], detect_negative=negative,
                                detect_positive=positive)
        graph = helper.make_graph([node], "isinf",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                                  [helper.make_tensor_value_info("y", TensorProto.BOOL, [4])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        expected = [False, bool(positive), bool(negative), False]
        assert _ours(model, {"x": x})[0].tolist() == expected, (negative, positive)


def test_bfloat16_weights_survive_the_offline_file(tmp_path):
    weights = RNG.standard_normal((4, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["w"], ["y"], to=TensorProto.BFLOAT16)], "bf16", [],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4, 8])],
        [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "bf16.onnx")
    from openacl.model.converter import convert_onnx

    convert_onnx(tmp_path / "bf16.onnx", tmp_path / "bf16.om")
    (y,) = _ours(str(tmp_path / "bf16.om"), {})
    np.testing.assert_array_equal(y.astype(np.float32),
                                  weights.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("attrs,scales", [
    ({"mode": "cubic"}, [1, 1, 1.5, 0.75]),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 2]),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 0.75, 1.5]),
    ({"mode": "linear", "antialias": 1}, [1, 1, 0.5, 0.6]),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 1.75, 2.5]),
    ({"mode": "nearest", "nearest_mode": "ceil",
      "coordinate_transformation_mode": "half_pixel"}, [1, 1, 2.5, 0.5]),
    ({"mode": "linear", "axes": [3]}, [1.5]),
], ids=["cubic", "cubic-corners", "cubic-exclude", "antialias", "asymmetric", "nearest-ceil",
        "axes"])
def test_resize_modes_through_interpolation_matrices(attrs, scales):
    """Modes the upsample operators do not cover, as one matmul per axis (constant scales)."""
    x = _f32(2, 3, 8, 10)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    model = _model([node], {"x": x}, {"scales": np.array(scales, np.float32)}, opset=19)
    _compare(model, {"x": x}, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode,shape,pads,axes", [
    ("edge", (1, 2, 4, 5), [0, 1, 2, 1, 0, 0, 1, 3], None),
    ("wrap", (3, 4, 5), [1, 0, 2, 2, 0, 1], None),
    ("reflect", (3, 4, 5), [0, 2, 0, 0, 3, 0], None),
    ("edge", (3, 4, 5), [-1, 2, 0, 1, -2, 0], None),  # negative pads crop
    ("edge", (2, 3, 4), [1, 2, 2, 0], [0, -1]),
    ("constant", (2, 3, 4), [1, 1, 0, 2], [1, 2]),
], ids=["edge", "wrap", "reflect-3d", "edge-crop", "edge-axes", "constant-axes"])
def test_pad_modes_as_index_selects(mode, shape, pads, axes):
    x = _f32(*shape)
    inputs, initializers = ["x", "p"], {"p": np.array(pads, np.int64)}
    if axes is not None:
        inputs += ["", "axes"]
        initializers["axes"] = np.array(axes, np.int64)
    model = _model([_node("Pad", inputs, mode=mode)], {"x": x}, initializers, opset=19)
    _compare(model, {"x": x})


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), (None, 1)],
                         ids=["one-kept", "two-dropped", "all"])
def test_more_reductions_with_constant_axes(op, axes, keepdims):
    x = (np.abs(_f32(3, 4, 5)) + 0.5) if op in ("ReduceLogSum", "ReduceProd") else _f32(3, 4, 5)
    if op == "ReduceLogSumExp":
        x = x * 40  # large values: the max shift keeps exp from overflowing
    inputs, initializers = ["x"], {}
    if axes is not None:
        inputs.append("axes")
        initializers["axes"] = np.array(axes, np.int64)
    model = _model([_node(op, inputs, keepdims=keepdims)], {"x": x}, initializers, opset=18)
    _compare(model, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("repeats", [[2, 3], [1, 1], [3, 1], [0, 2]], ids=str)
def test_tile_with_constant_repeats(repeats):
    x = _f32(2, 3)
    model = _model([_node("Tile", ["x", "r"])], {"x": x}, {"r": np.array(repeats, np.int64)})
    _compare(model, {"x": x})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_constant_depth_and_values(axis):
    indices = np.array([[0, 3, -1], [2, -4, 1]], np.int64)
    model = _model([_node("OneHot", ["i", "depth", "values"], axis=axis)], {"i": indices},
                   {"depth": np.array(4, np.int64), "values": np.array([-1.0, 2.5], np.float32)})
    _compare(model, {"i": indices})
