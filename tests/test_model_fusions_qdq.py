"""QDQ groups fused as onnxruntime fuses them (``fusions.fuse_qdq``): DequantizeLinear ->
Conv / MatMul / Gemm (-> a redundant Relu / Clip) -> QuantizeLinear becomes QLinearConv /
QLinearMatMul / QGemm, and a MatMul / Gemm of dequantized operands with no Q after its
MatMulIntegerToFloat / float QGemm, whose outputs equal onnxruntime's (graph optimizations
on, its default) to the bit: uint8 activations with int8 and uint8 weights, per tensor and
per channel, int32 biases, constant and computed weights, int8 activations where
onnxruntime allows them (Arm, or its ``session.qdqisint8allowed`` option, used here), the
float weights / biases / MatMul + Add it rewrites first (``quantize_weights_and_biases``),
and models quantized by ``onnxruntime.quantization.quantize_static``. Look-alikes
onnxruntime leaves unfused come out of ``optimize`` exactly as with the fusion off (their
values then agree within a quantization step, as two float convolutions do)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from openacl.model import fusions  # noqa: E402
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.passes import optimize  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402
from ort_exactness import assert_equal_or_skip, u8s8_saturates  # noqa: E402

RNG = np.random.default_rng(41)
U8, I8 = np.dtype(np.uint8), np.dtype(np.int8)
F32 = np.float32
INT8_OPTION = "session.qdqisint8allowed"  # onnxruntime's kOrtSessionOptionsQDQIsInt8Allowed


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


@pytest.fixture
def int8_allowed(monkeypatch):
    """int8 activations fused here as onnxruntime fuses them with its option on."""
    monkeypatch.setattr(fusions, "QDQ_INT8_ACTIVATIONS", True)
    return True


def _tensor_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _model(nodes, inputs, initializers, outputs, opset=13):
    """``inputs`` / ``outputs``: name -> (dtype, shape or None)."""
    graph = helper.make_graph(
        nodes, "qdq",
        [helper.make_tensor_value_info(n, _tensor_type(t), s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, _tensor_type(t), s) for n, (t, s) in outputs.items()],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _node(op, inputs, outputs, **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def _ops(model) -> collections.Counter:
    graph = optimize(import_onnx(model))
    graph.validate()
    return collections.Counter(node.op_type for node in graph.nodes)


def _ops_unfused(model, monkeypatch) -> collections.Counter:
    """The op counts ``optimize`` gives with the QDQ fusion off: a group left alone must
    come out exactly so (its weights folded or not as any other DequantizeLinear)."""
    with monkeypatch.context() as patch:
        patch.setattr(fusions, "fuse_qdq", lambda graph: 0)
        patch.setattr(fusions, "qdq_constant_dequantizers", lambda graph: [])
        return _ops(model)


def _constant_value(graph, name):
    """``name``'s value when constants alone make it (an initializer, or a chain of
    DequantizeLinear over initializers that folding left), else None."""
    if name in graph.initializers:
        return graph.initializers[name]
    node = next((n for n in graph.nodes if name in n.outputs), None)
    if node is None or node.op_type != "DequantizeLinear":
        return None
    x, scale, *zero = (graph.initializers.get(n) for n in node.inputs)
    if x is None or scale is None:
        return None
    shift = x.astype(np.float32) - (zero[0].astype(np.float32) if zero else 0)
    return shift * scale.astype(np.float32)


def _theirs(model, feeds, int8=False, optimized=True):
    options = ort.SessionOptions()
    if int8:
        options.add_session_config_entry(INT8_OPTION, "1")
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def _ours(model, feeds):
    session = InferenceSession(model)
    try:
        return session.run(None, feeds)
    finally:
        session.close()


def _exact(model, feeds, int8=False):
    """Our outputs equal onnxruntime's (its QDQ fusions on) to the bit."""
    for got, want in zip(_ours(model, feeds), _theirs(model, feeds, int8), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert_equal_or_skip(got, want)


def _within_a_step(model, feeds):
    """Unfused groups: the float op's rounding may land a halfway quotient one step away
    (onnxruntime's fused and unfused runs differ the same way), never more."""
    for got, want in zip(_ours(model, feeds), _theirs(model, feeds), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        steps = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert steps.max() <= 1 and np.mean(steps > 0) < 0.02, steps.max()


def _quantized(dtype, shape, low=None, high=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if low is None else low,
                        (info.max if high is None else high) + 1, shape).astype(dtype)


# -- Conv -------------------------------------------------------------------------------------
def _conv_case(x_dtype=U8, w_dtype=I8, per_channel=False, bias=True, attrs=None, c_in=6,
               c_out=8, spatial=(7, 6), weights="constant", between=None, y_zero=None,
               x_zero=True, bias_scale=1.0, bias_zero=None, extra_reader=False, y_scale=0.11):
    attrs = {"pads": [1] * (2 * len(spatial))} if attrs is None else attrs
    group = attrs.get("group", 1)
    kernel = (3,) * len(spatial)
    w_shape = (c_out, c_in // group, *kernel)
    x_shape = (2, c_in, *spatial)
    w_scale = (RNG.uniform(0.002, 0.01, c_out).astype(F32) if per_channel else F32(0.004))
    zero_low = 0 if w_dtype == I8 else 120
    w_zero = np.full(c_out if per_channel else (), zero_low, w_dtype)
    init = {"xs": F32(0.03), "ws": w_scale, "wz": w_zero, "ys": F32(y_scale),
            "yz": np.array(y_zero if y_zero is not None else (9 if x_dtype == U8 else -9),
                           x_dtype)}
    if x_zero:
        init["xz"] = np.array(131 if x_dtype == U8 else 3, x_dtype)
    inputs = {"x": (x_dtype, x_shape)}
    w = _quantized(w_dtype, w_shape)
    if weights == "constant":
        init["w"] = w
    else:  # fed at run time
        inputs["w"] = (w_dtype, w_shape)
    nodes = [_node("DequantizeLinear", ["x", "xs", "xz"] if x_zero else ["x", "xs"], ["xd"]),
             _node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0)]
    conv_inputs = ["xd", "wd"]
    if bias:
        init["b"] = RNG.integers(-4000, 4000, c_out).astype(np.int32)
        init["bs"] = (init["xs"] * w_scale * F32(bias_scale)).astype(F32)
        bias_inputs = ["b", "bs"]
        if bias_zero is not None:
            init["bz"] = np.full(np.shape(w_scale), bias_zero, np.int32)
            bias_inputs.append("bz")
        nodes.append(_node("DequantizeLinear", bias_inputs, ["bd"], axis=0))
        conv_inputs.append("bd")
    nodes.append(_node("Conv", conv_inputs, ["c"], **attrs))
    last = "c"
    if between == "Relu":
        nodes.append(_node("Relu", ["c"], ["r"]))
        last = "r"
    elif between == "Clip":
        init["lo"], init["hi"] = F32(0), F32(6)
        nodes.append(_node("Clip", ["c", "lo", "hi"], ["r"]))
        last = "r"
    nodes.append(_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    outputs = {"y": (x_dtype, None)}
    if extra_reader:
        outputs["c"] = (np.float32, None)
    feeds = {"x": _quantized(x_dtype, x_shape)}
    if weights != "constant":
        feeds["w"] = w
    return _model(nodes, inputs, init, outputs), feeds


@pytest.mark.parametrize("w_dtype", [I8, U8], ids=str)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_conv_group_becomes_qlinear_conv(w_dtype, per_channel, bias):
    model, feeds = _conv_case(w_dtype=w_dtype, per_channel=per_channel, bias=bias)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


@pytest.mark.parametrize("attrs", [{"strides": [2, 2]}, {"group": 2, "pads": [1, 0, 1, 0]},
                                   {"dilations": [2, 1], "pads": [2, 1, 2, 1]},
                                   {"auto_pad": "SAME_UPPER", "strides": [2, 1]}])
def test_conv_attributes_carry_over(attrs):
    model, feeds = _conv_case(per_channel=True, attrs=attrs)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


@pytest.mark.parametrize("spatial", [(9,), (4, 5, 3)], ids=["1d", "3d"])
def test_conv_1d_and_3d(spatial):
    model, feeds = _conv_case(per_channel=True, spatial=spatial)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


@pytest.mark.parametrize("w_dtype", [I8, U8], ids=str)
def test_computed_weights_are_fused_as_onnxruntime_fuses_them(w_dtype):
    """onnxruntime's selector takes any DequantizeLinear for the weights, a graph input's
    too: the group becomes a QLinearConv reading them at run time."""
    model, feeds = _conv_case(w_dtype=w_dtype, bias=False, weights="input")
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


def test_int8_activations_where_onnxruntime_allows_them(int8_allowed):
    model, feeds = _conv_case(x_dtype=I8, per_channel=True)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds, int8=True)


def test_missing_zero_points_are_zero():
    model, feeds = _conv_case(x_zero=False, y_zero=0)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


def test_a_bias_scale_within_a_percent_fuses():
    model, feeds = _conv_case(per_channel=True, bias_scale=1.005)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


@pytest.mark.parametrize("between, y_zero", [("Relu", 0), ("Clip", 0)])
def test_a_relu_or_clip_the_quantization_makes_redundant_is_absorbed(between, y_zero):
    # (Clip: 0 to 6 over 300 steps of 0.02, more than 255: it cuts nothing the Q keeps)
    model, feeds = _conv_case(per_channel=True, between=between, y_zero=y_zero,
                              y_scale=0.02 if between == "Clip" else 0.11)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


def test_shared_dequantizers_feed_every_group():
    """onnxruntime copies a DequantizeLinear read twice for each reader: two Convs over the
    same input and weights are two QLinearConvs, the input's float values still there for
    a third reader."""
    model, feeds = _conv_case(per_channel=True, bias=False)
    graph = model.graph
    graph.node.extend([_node("Conv", ["xd", "wd"], ["c2"], pads=[1, 1, 1, 1]),
                       _node("QuantizeLinear", ["c2", "ys", "yz"], ["y2"]),
                       _node("Relu", ["xd"], ["r"])])
    graph.output.extend([helper.make_tensor_value_info("y2", TensorProto.UINT8, None),
                         helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    assert _ops(model) == {"QLinearConv": 2, "DequantizeLinear": 1, "Relu": 1}
    _exact(model, feeds)


# -- MatMul ----------------------------------------------------------------------------------
def _matmul_case(a_dtype=U8, b_dtype=I8, per_column=False, a_shape=(2, 5, 16), b_shape=(16, 6),
                 weights="constant", between=None, y_zero=7):
    columns = b_shape[-1]
    init = {"as": F32(0.02), "az": np.array(100 if a_dtype == U8 else -3, a_dtype),
            "bs": RNG.uniform(0.004, 0.02, columns).astype(F32) if per_column else F32(0.01),
            "bz": np.full(columns if per_column else (), 0 if b_dtype == I8 else 128, b_dtype),
            "ys": F32(0.13), "yz": np.array(y_zero, a_dtype)}
    inputs = {"a": (a_dtype, a_shape)}
    b = _quantized(b_dtype, b_shape)
    feeds = {"a": _quantized(a_dtype, a_shape)}
    if weights == "constant":
        init["b"] = b
    else:
        inputs["b"] = (b_dtype, b_shape)
        feeds["b"] = b
    nodes = [_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             _node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=len(b_shape) - 1),
             _node("MatMul", ["ad", "bd"], ["m"])]
    last = "m"
    if between:
        nodes.append(_node(between, ["m"], ["r"]))
        last = "r"
    nodes.append(_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    return _model(nodes, inputs, init, {"y": (a_dtype, None)}), feeds


@pytest.mark.parametrize("b_dtype", [I8, U8], ids=str)
@pytest.mark.parametrize("per_column", [False, True], ids=["per-tensor", "per-column"])
@pytest.mark.parametrize("a_shape", [(2, 5, 16), (7, 16)], ids=["3d", "2d"])
def test_matmul_group_becomes_qlinear_matmul(b_dtype, per_column, a_shape):
    model, feeds = _matmul_case(b_dtype=b_dtype, per_column=per_column, a_shape=a_shape)
    assert _ops(model) == {"QLinearMatMul": 1}
    _exact(model, feeds)


def test_matmul_of_two_activations_and_batched_weights():
    model, feeds = _matmul_case(weights="input", b_shape=(2, 16, 6))
    assert _ops(model) == {"QLinearMatMul": 1}
    _exact(model, feeds)


def test_matmul_int8_where_allowed_and_relu_absorbed(int8_allowed):
    model, feeds = _matmul_case(a_dtype=I8, per_column=True, between="Relu", y_zero=-128)
    assert _ops(model) == {"QLinearMatMul": 1}
    _exact(model, feeds, int8=True)


def test_fusing_is_what_makes_halfway_quotients_agree():
    """Scales whose requantization multiplier is exactly 1/2: every odd sum is a tie the
    integer path rounds to even, while the float product lands either side of it, so
    onnxruntime's fused and unfused runs differ; ours is its fused result."""
    x_scale, w_scale = F32(0.1), F32(0.3)
    init = {"as": x_scale, "az": np.uint8(128), "b": _quantized(I8, (16, 4), -127),
            "bs": w_scale, "bz": np.int8(0), "ys": F32(2) * (x_scale * w_scale),
            "yz": np.uint8(128)}
    nodes = [_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             _node("DequantizeLinear", ["b", "bs", "bz"], ["bd"]),
             _node("MatMul", ["ad", "bd"], ["m"]),
             _node("QuantizeLinear", ["m", "ys", "yz"], ["y"])]
    model = _model(nodes, {"a": (U8, (64, 16))}, init, {"y": (U8, None)})
    feeds = {"a": _quantized(U8, (64, 16), 120, 136)}
    (fused,), (unfused,) = _theirs(model, feeds), _theirs(model, feeds, optimized=False)
    assert np.any(fused != unfused)
    _exact(model, feeds)


def test_matmul_without_a_q_becomes_matmul_integer_to_float():
    """No Q after: onnxruntime's MatMulIntegerToFloat, the integer product times
    ``a_scale * b_scale`` (per column too), read by whatever follows."""
    model, feeds = _matmul_case(per_column=True)
    nodes = list(model.graph.node)[:-1]
    nodes.append(_node("Neg", ["m"], ["y"]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    assert _ops(model) == {fusions.MATMUL_INTEGER_TO_FLOAT: 1, "Neg": 1}
    _exact(model, feeds)


def _gemm_case(a_dtype=U8, b_dtype=I8, per_column=False, bias=True, trans_b=0, alpha=1.0,
               q=True, bias_scale=1.0, weights="constant"):
    b_shape = (6, 16) if trans_b else (16, 6)
    init = {"as": F32(0.02), "az": np.array(100 if a_dtype == U8 else -3, a_dtype),
            "bs": RNG.uniform(0.004, 0.02, 6).astype(F32) if per_column else F32(0.01),
            "bz": np.full(6 if per_column else (), 0 if b_dtype == I8 else 128, b_dtype),
            "ys": F32(0.13), "yz": np.array(7, a_dtype)}
    inputs = {"a": (a_dtype, (5, 16))}
    b = _quantized(b_dtype, b_shape)
    feeds = {"a": _quantized(a_dtype, (5, 16))}
    if weights == "constant":
        init["b"] = b
    else:
        inputs["b"] = (b_dtype, b_shape)
        feeds["b"] = b
    nodes = [_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             _node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0 if trans_b else 1)]
    gemm_inputs = ["ad", "bd"]
    if bias:
        init["c"] = RNG.integers(-3000, 3000, 6).astype(np.int32)
        init["cs"] = (init["as"] * init["bs"] * F32(bias_scale)).astype(F32)
        nodes.append(_node("DequantizeLinear", ["c", "cs"], ["cd"], axis=0))
        gemm_inputs.append("cd")
    nodes.append(_node("Gemm", gemm_inputs, ["g" if q else "y"], transB=trans_b, alpha=alpha))
    outputs = {"y": (np.float32, None)}
    if q:
        nodes.append(_node("QuantizeLinear", ["g", "ys", "yz"], ["y"]))
        outputs = {"y": (a_dtype, None)}
    return _model(nodes, inputs, init, outputs), feeds


@pytest.mark.parametrize("q", [True, False], ids=["quantized", "float-out"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per-tensor", "per-column"])
@pytest.mark.parametrize("trans_b", [0, 1], ids=["B", "B-transposed"])
def test_gemm_group_becomes_qgemm(q, per_column, trans_b):
    model, feeds = _gemm_case(per_column=per_column, trans_b=trans_b, q=q)
    assert _ops(model) == {fusions.QGEMM: 1}
    _exact(model, feeds)


@pytest.mark.parametrize("case", ["uint8-weights", "int8", "no-bias-alpha", "computed-b"])
def test_gemm_variants(case):
    """uint8 weights; int8 activations (onnxruntime fuses a Gemm's everywhere); alpha
    (without a bias) in the multiplier; weights fed at run time and transposed."""
    kwargs = {"uint8-weights": {"b_dtype": U8}, "int8": {"a_dtype": I8},
              "no-bias-alpha": {"bias": False, "alpha": 0.75},
              "computed-b": {"weights": "input", "trans_b": 1}}[case]
    model, feeds = _gemm_case(**kwargs)
    expected = {fusions.QGEMM: 1} | ({"Transpose": 1} if case == "computed-b" else {})
    assert _ops(model) == expected
    _exact(model, feeds)


@pytest.mark.parametrize("kwargs", [{"alpha": 0.5}, {"bias_scale": 2.0}],
                         ids=["alpha-with-bias", "bias-scale-mismatched"])
def test_gemm_lookalikes_stay_float(kwargs):
    model, feeds = _gemm_case(**kwargs)
    assert fusions.QGEMM not in _ops(model)
    if "alpha" in kwargs:  # onnxruntime leaves it too
        _within_a_step(model, feeds)
    else:  # onnxruntime fuses it, dropping the bias's own scale: the model's values differ
        (want,) = _theirs(model, feeds, optimized=False)
        steps = np.abs(_ours(model, feeds)[0].astype(np.int64) - want.astype(np.int64))
        assert steps.max() <= 1


# -- onnxruntime's rewrites before its fusions ---------------------------------------------------
def _float_constants_case(weights_float=False, bias_float=True, x_dtype=U8, op="Conv"):
    """DQ(x) -> Conv / ConvTranspose with float32 constant weights and / or bias -> Q."""
    c_in, c_out = 4, 6
    w_shape = (c_out, c_in, 3, 3) if op == "Conv" else (c_in, c_out, 3, 3)
    init = {"xs": F32(0.04), "xz": np.array(120 if x_dtype == U8 else -8, x_dtype),
            "ys": F32(0.09), "yz": np.array(11 if x_dtype == U8 else -11, x_dtype),
            "B": (RNG.standard_normal(c_out) * 0.2).astype(F32)}
    nodes = [_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"])]
    if weights_float:
        init["W"] = (RNG.standard_normal(w_shape) * 0.2).astype(F32)
        weight = "W"
    else:
        init["w"] = _quantized(I8, w_shape, -127)
        init["ws"] = RNG.uniform(0.002, 0.01, c_out).astype(F32)
        init["wz"] = np.zeros(c_out, np.int8)
        nodes.append(_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0))
        weight = "wd"
    nodes.append(_node(op, ["xd", weight, "B"] if bias_float else ["xd", weight], ["c"],
                       pads=[1, 1, 1, 1]))
    nodes.append(_node("QuantizeLinear", ["c", "ys", "yz"], ["y"]))
    x_shape = (1, c_in, 6, 5)
    model = _model(nodes, {"x": (x_dtype, x_shape)}, init, {"y": (x_dtype, None)})
    return model, {"x": _quantized(x_dtype, x_shape)}


@pytest.mark.parametrize("weights_float, bias_float", [(False, True), (True, False),
                                                        (True, True)],
                         ids=["float-bias", "float-weights", "both-float"])
def test_float_weights_and_bias_are_quantized_as_onnxruntime_does(weights_float, bias_float):
    """onnxruntime's WeightBiasQuantization: a float bias becomes int32 over x_scale *
    w_scale, float weights int8 per tensor (its own scale and zero point); then the group
    is a QLinearConv."""
    model, feeds = _float_constants_case(weights_float, bias_float)
    assert _ops(model) == {"QLinearConv": 1}
    _exact(model, feeds)


@pytest.mark.parametrize("op, x_dtype", [("Conv", I8), ("ConvTranspose", U8)],
                         ids=["int8-conv", "conv-transpose"])
def test_weights_quantized_where_no_fusion_follows(op, x_dtype):
    """The quantization happens whether a fusion follows or not: an int8-activation Conv
    on x86 and a ConvTranspose run as float ops over the dequantized int8 weights, as in
    onnxruntime (so their values stay within a step of its, not many steps off)."""
    model, feeds = _float_constants_case(True, True, x_dtype, op)
    graph = optimize(import_onnx(model))
    assert op in {node.op_type for node in graph.nodes}
    weights = _constant_value(graph, next(n for n in graph.nodes if n.op_type == op).inputs[1])
    assert weights is not None and len(np.unique(weights)) <= 256  # int8 values, dequantized
    _within_a_step(model, feeds)


def test_matmul_add_becomes_qgemm():
    """onnxruntime's MatMulAddFusion makes MatMul + Add a Gemm before its QDQ fusions: with
    a Q after, a QGemm (the float bias quantized to int32); with none, a float Gemm (no
    MatMulIntegerToFloat)."""
    model, feeds = _matmul_case(per_column=True, a_shape=(7, 16))
    graph = model.graph
    graph.initializer.append(numpy_helper.from_array((RNG.standard_normal(6) * 0.3).astype(
        F32), "bias"))
    quantize = graph.node.pop()
    graph.node.extend([_node("Add", ["m", "bias"], ["s"]),
                       _node("QuantizeLinear", ["s", *quantize.input[1:]], ["y"])])
    assert _ops(model) == {fusions.QGEMM: 1}
    _exact(model, feeds)
    del graph.node[-1]
    graph.node[-1].output[0] = "y"
    graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    assert fusions.MATMUL_INTEGER_TO_FLOAT not in _ops(model)
    (got,), (want,) = _ours(model, feeds), _theirs(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- look-alikes -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["conv-output-read-twice", "bias-scale-mismatched",
                                  "bias-zero-point", "int8-activations", "relu-not-redundant",
                                  "clip-not-redundant", "float-weights",
                                  "weights-per-channel-along-axis-1"])
def test_lookalikes_stay_float(case, monkeypatch):
    expected = {"Conv": 1, "QuantizeLinear": 1}
    kwargs = {"per_channel": True}
    if case == "conv-output-read-twice":
        kwargs["extra_reader"] = True
    elif case == "bias-scale-mismatched":
        kwargs["bias_scale"] = 1.05
    elif case == "bias-zero-point":
        kwargs["bias_zero"] = 3
    elif case == "int8-activations":  # onnxruntime on x86 leaves these float
        kwargs["x_dtype"] = I8
    elif case in ("relu-not-redundant", "clip-not-redundant"):
        kwargs["between"] = case.split("-")[0].capitalize()
        expected[kwargs["between"]] = 1
    model, feeds = _conv_case(**kwargs)
    graph = model.graph
    if case == "float-weights":  # a float initializer, no DequantizeLinear
        weights = numpy_helper.to_array(next(t for t in graph.initializer if t.name == "w"))
        graph.initializer.append(numpy_helper.from_array(
            (weights * RNG.uniform(0.002, 0.01, (8, 1, 1, 1))).astype(F32), "wf"))
        next(n for n in graph.node if n.op_type == "Conv").input[1] = "wf"
    if case == "weights-per-channel-along-axis-1":  # a per-input-channel scale: the fused
        # op's weight scale is per output channel (onnxruntime fuses it, changing values)
        model, feeds = _conv_case(per_channel=True, bias=False, c_in=8)
        next(n for n in model.graph.node if n.input[0] == "w").attribute[0].i = 1
    if case == "int8-activations":
        monkeypatch.setattr(fusions, "QDQ_INT8_ACTIVATIONS", False)
    ops = _ops(model)
    assert ops == _ops_unfused(model, monkeypatch), ops  # as it would be without the fusion
    assert {op: ops[op] for op in expected} == expected, ops
    if case == "weights-per-channel-along-axis-1":
        (want,) = _theirs(model, feeds, optimized=False)
        steps = np.abs(_ours(model, feeds)[0].astype(np.int64) - want.astype(np.int64))
        assert steps.max() <= 1
    elif case == "conv-output-read-twice":
        got, want = _ours(model, feeds), _theirs(model, feeds)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-4)
        assert np.abs(got[0].astype(np.int64) - want[0].astype(np.int64)).max() <= 1
    else:
        _within_a_step(model, feeds)


def test_matmul_lookalikes_stay_float():
    model, feeds = _matmul_case(between="Relu")  # zero point 7: the Relu cuts values
    assert "QLinearMatMul" not in _ops(model)
    _within_a_step(model, feeds)
    # a Relu before anything but a Q keeps the MatMul float (GetQDQSelection), and so does
    # a product read by a Q and by another node
    for tail in (["Relu", "Neg"], ["Q", "Neg"]):
        model, feeds = _matmul_case()
        graph = model.graph
        del graph.node[-1]
        del graph.output[:]
        if tail[0] == "Relu":
            graph.node.extend([_node("Relu", ["m"], ["r"]), _node("Neg", ["r"], ["y"])])
            graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
        else:
            graph.node.extend([_node("QuantizeLinear", ["m", "ys", "yz"], ["y"]),
                               _node("Neg", ["m"], ["n"])])
            graph.output.extend([helper.make_tensor_value_info("y", TensorProto.UINT8, None),
                                 helper.make_tensor_value_info("n", TensorProto.FLOAT, None)])
        ops = _ops(model)
        assert {"MatMul", "FusedMatMul"} & set(ops) and not {
            "QLinearMatMul", fusions.MATMUL_INTEGER_TO_FLOAT} & set(ops), ops
        for got, want in zip(_ours(model, feeds), _theirs(model, feeds), strict=True):
            if want.dtype == np.float32:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
            else:
                assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
    model, feeds = _matmul_case(a_dtype=I8, y_zero=1)  # int8 activations on x86
    if not fusions.QDQ_INT8_ACTIVATIONS:
        assert "QLinearMatMul" not in _ops(model)
        _within_a_step(model, feeds)


# -- onnxruntime's quantizer -------------------------------------------------------------------
def _float_model(head="MatMul"):
    """Conv -> Relu -> Conv -> Flatten -> MatMul (or Gemm with a bias), float32."""
    init = {"W1": (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(F32),
            "B1": (RNG.standard_normal(8) * 0.1).astype(F32),
            "W2": (RNG.standard_normal((6, 8, 3, 3)) * 0.2).astype(F32),
            "B2": (RNG.standard_normal(6) * 0.1).astype(F32),
            "M": (RNG.standard_normal((6 * 4 * 4, 10)) * 0.1).astype(F32)}
    nodes = [_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             _node("Relu", ["c1"], ["r1"]),
             _node("Conv", ["r1", "W2", "B2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
             _node("Flatten", ["c2"], ["f"]),
             _node("MatMul", ["f", "M"], ["y"]) if head == "MatMul" else
             _node("Gemm", ["f", "Mt", "B3"], ["y"], transB=1)]
    init["Mt"], init["B3"] = np.ascontiguousarray(init["M"].T), (
        RNG.standard_normal(10) * 0.1).astype(F32)
    return _model(nodes, {"x": (np.float32, (1, 3, 8, 8))}, init,
                  {"y": (np.float32, (1, 10))}, opset=17)


@pytest.mark.parametrize("head", ["MatMul", "Gemm"])
@pytest.mark.parametrize("weight_type", ["QInt8", "QUInt8"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
@pytest.mark.parametrize("activation_type", ["QUInt8", "QInt8"])
def test_models_quantized_by_onnxruntime(tmp_path, monkeypatch, weight_type, per_channel,
                                         activation_type, head):
    quantization = pytest.importorskip("onnxruntime.quantization")
    if activation_type == "QInt8" and weight_type == "QUInt8":
        pytest.skip("int8 activations go with int8 weights")
    int8 = activation_type == "QInt8"
    monkeypatch.setattr(fusions, "QDQ_INT8_ACTIVATIONS", int8)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": RNG.standard_normal((1, 3, 8, 8)).astype(F32)}
                                 for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    source, target = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(_float_model(head), str(source))
    quantization.quantize_static(
        str(source), str(target), Reader(), quant_format=quantization.QuantFormat.QDQ,
        per_channel=per_channel, activation_type=getattr(quantization.QuantType,
                                                          activation_type),
        weight_type=getattr(quantization.QuantType, weight_type),
        op_types_to_quantize=["Conv", head])
    model = onnx.load(str(target))
    ops = _ops(model)
    head_op = "QLinearMatMul" if head == "MatMul" else fusions.QGEMM
    assert ops["QLinearConv"] == 2 and ops[head_op] == 1, ops
    assert not {"Conv", "MatMul", "Gemm"} & set(ops), ops
    feeds = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(F32)}
    _exact(model, feeds, int8=int8)


def test_fused_groups_survive_the_offline_file(tmp_path):
    """QLinearConv, QGemm and MatMulIntegerToFloat steps written into an .om replay."""
    from openacl.model.converter import convert_onnx

    cases = {"conv": _conv_case(per_channel=True), "gemm": _gemm_case(per_column=True,
                                                                       trans_b=1),
             "gemm-float": _gemm_case(q=False)}
    for name, (model, feeds) in cases.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        convert_onnx(path, tmp_path / f"{name}.om")
        session = InferenceSession(str(tmp_path / f"{name}.om"))
        try:
            got = session.run(None, feeds)
        finally:
            session.close()
        for ours, theirs in zip(got, _theirs(model, feeds), strict=True):
            assert_equal_or_skip(ours, theirs)


def test_a_fused_model_loads_twice(tmp_path):
    """One QDQ model loaded again after its first session is gone, in a process of its own
    (the default runtime, whose CPU engines use the weights where they are): the one-byte
    zero points, which CPython may back with one shared bytes object for both loads, are
    read through constants of each engine's own, never through the dead load's memory."""
    import subprocess
    import sys

    model, feeds = _matmul_case(weights="input")
    onnx.save(model, str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "feeds.npz", **feeds)
    (want,) = _theirs(model, feeds)
    if u8s8_saturates():  # onnxruntime is not exact here: a fresh load's result is the want
        (want,) = _ours(model, feeds)
    np.save(tmp_path / "want.npy", want)
    script = f"""
import gc, numpy as np
from openacl.model.session import InferenceSession
feeds = dict(np.load({str(tmp_path / "feeds.npz")!r}))
want = np.load({str(tmp_path / "want.npy")!r})
first = InferenceSession({str(tmp_path / "m.onnx")!r})
np.testing.assert_array_equal(first.run(None, feeds)[0], want)
second = InferenceSession({str(tmp_path / "m.onnx")!r})
first.close()
del first
gc.collect()
np.testing.assert_array_equal(second.run(None, feeds)[0], want)
second.close()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
