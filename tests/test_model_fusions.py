"""Graph fusions: Conv + constant affine / BatchNormalization folding, HardSwish, MatMul /
Gemm + bias + ReLU, attention's score scale, Add + LayerNormalization; each case checks the
node counts after ``optimize`` and the results against onnxruntime."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from openacl.model.fusions import (  # noqa: E402
    ADD_LAYER_NORM,
    FUSED_MATMUL,
    SILU,
    batch_shared_weight_products,
    fold_conv_affine,
    fold_matmul_scale,
    fuse_gelu_erf,
    fuse_hard_swish,
    fuse_layer_norm,
    fuse_matmul_epilogue,
    fuse_silu,
    pretranspose_gemm_weights,
)
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.passes import optimize  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(3)
X_SHAPE, C_OUT = [1, 3, 8, 8], 4


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _f32(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _model(nodes, initializers, outputs=("y",), input_shape=X_SHAPE, output_shapes=None):
    graph = helper.make_graph(
        nodes, "fusions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _optimized_ops(model):
    graph = optimize(import_onnx(model))
    graph.validate()
    return collections.Counter(node.op_type for node in graph.nodes)


def _check(model, expected_ops, atol=1e-5):
    assert _optimized_ops(model) == collections.Counter(expected_ops)
    x = _f32(*[d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim], low=-5,
             high=5)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    session = InferenceSession(model)
    try:
        got = session.run(None, {"x": x})
    finally:
        session.close()
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=atol)


def _conv(output="c", bias=True, weight="W"):
    return helper.make_node("Conv", ["x", weight, "B"] if bias else ["x", weight], [output],
                            pads=[1, 1, 1, 1], name=f"conv_{output}")


WEIGHTS = {"W": _f32(C_OUT, 3, 3, 3), "B": _f32(C_OUT)}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_conv_mul_add_fold_into_the_conv(bias):
    model = _model([_conv(bias=bias),
                    helper.make_node("Mul", ["c", "s"], ["m"]),
                    helper.make_node("Add", ["t", "m"], ["a"]),  # constant first
                    helper.make_node("Relu", ["a"], ["y"])],
                   {**WEIGHTS, "s": np.array([1.5], np.float32),
                    "t": _f32(1, C_OUT, 1, 1)})
    _check(model, ["Conv", "Relu"])


def test_conv_div_sub_and_batchnorm_fold():
    model = _model([_conv(), helper.make_node("Div", ["c", "d"], ["q"]),
                    helper.make_node("Sub", ["q", "e"], ["r"]),
                    helper.make_node("BatchNormalization", ["r", "g", "b", "mu", "var"], ["y"],
                                     epsilon=1e-3)],
                   {**WEIGHTS, "d": np.float32(2.0), "e": _f32(C_OUT, 1, 1),
                    "g": _f32(C_OUT), "b": _f32(C_OUT), "mu": _f32(C_OUT),
                    "var": _f32(C_OUT, low=0.5, high=2.0)})
    _check(model, ["Conv"])


@pytest.mark.parametrize("groups", [1, 3], ids=["one-group", "three-groups"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_conv_transpose_add_batchnorm_fold(groups, bias):
    # ConvTranspose's weight is (C_in, C_out / G, *kernel): output channel o scales dim 1
    # within its group (PP-OCR det's upsampling ConvTranspose -> Add -> BatchNormalization)
    c_out = 6
    weights = {"Wt": _f32(3, c_out // groups, 2, 2), "Bt": _f32(c_out),
               "t": _f32(1, c_out, 1, 1), "g": _f32(c_out), "b": _f32(c_out),
               "mu": _f32(c_out), "var": _f32(c_out, low=0.5, high=2.0)}
    inputs = ["x", "Wt", "Bt"] if bias else ["x", "Wt"]
    model = _model([helper.make_node("ConvTranspose", inputs, ["c"], strides=[2, 2],
                                     group=groups),
                    helper.make_node("Add", ["c", "t"], ["a"]),
                    helper.make_node("BatchNormalization", ["a", "g", "b", "mu", "var"],
                                     ["y"])], weights)
    _check(model, ["ConvTranspose"], atol=1e-4)


@pytest.mark.parametrize("case", ["conv-output-also-read", "non-constant", "constant-minus-x",
                                  "spatial-constant", "x-over-constant-is-fine",
                                  "x-over-a-zero"])
def test_affine_not_folded_where_it_would_change_results(case):
    nodes, extra, outputs, expected = [_conv()], {}, ("y",), ["Conv", "Mul"]
    if case == "conv-output-also-read":
        nodes.append(helper.make_node("Mul", ["c", "s"], ["y"]))
        nodes.append(helper.make_node("Relu", ["c"], ["z"]))
        extra, outputs, expected = {"s": np.float32(2.0)}, ("y", "z"), ["Conv", "Mul", "Relu"]
    elif case == "non-constant":
        nodes.append(helper.make_node("Mul", ["c", "c"], ["y"]))
    elif case == "constant-minus-x":
        nodes.append(helper.make_node("Sub", ["s", "c"], ["y"]))
        extra, expected = {"s": np.float32(2.0)}, ["Conv", "Sub"]
    elif case == "spatial-constant":  # varies along H: not one value per channel
        nodes.append(helper.make_node("Mul", ["c", "s"], ["y"]))
        extra = {"s": _f32(1, 1, 8, 1)}
    elif case == "x-over-a-zero":  # folded it would make 0 * inf = NaN where x / 0 is inf
        nodes.append(helper.make_node("Div", ["c", "s"], ["y"]))
        extra, expected = {"s": np.array([1, 0, 2, 4], np.float32).reshape(4, 1, 1)}, \
            ["Conv", "Div"]
    else:
        nodes.append(helper.make_node("Div", ["c", "s"], ["y"]))
        extra, expected = {"s": np.float32(4.0)}, ["Conv"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no floating-point warning while converting
        _check(_model(nodes, {**WEIGHTS, **extra}, outputs), expected)


def test_shared_weight_is_not_changed_for_the_other_conv():
    model = _model([_conv("c1"), _conv("c2"), helper.make_node("Mul", ["c1", "s"], ["m"]),
                    helper.make_node("Add", ["m", "c2"], ["y"])],
                   {**WEIGHTS, "s": np.float32(3.0)})
    graph = import_onnx(model)
    assert fold_conv_affine(graph) == 1
    np.testing.assert_array_equal(graph.initializers["W"], WEIGHTS["W"])
    _check(model, ["Conv", "Conv", "Add"])


def _hard_swish_nodes(order="x-first", last="Div"):
    product = ["x", "clipped"] if order == "x-first" else ["clipped", "x"]
    return [helper.make_node("Add", ["x", "three"], ["shifted"]),
            helper.make_node("Clip", ["shifted", "zero", "six"], ["clipped"]),
            helper.make_node("Mul", product, ["product"]),
            helper.make_node(last, ["product", "six" if last == "Div" else "sixth"], ["y"])]


HARD_SWISH_CONSTANTS = {"three": np.float32(3), "zero": np.float32(0), "six": np.float32(6),
                        "sixth": np.float32(1 / 6)}


@pytest.mark.parametrize("order, last", [("x-first", "Div"), ("x-second", "Div"),
                                         ("x-first", "Mul")])
def test_hard_swish_pattern_becomes_one_node(order, last):
    model = _model(_hard_swish_nodes(order, last), HARD_SWISH_CONSTANTS)
    graph = import_onnx(model)
    assert fuse_hard_swish(graph) == 1
    _check(model, ["HardSwish"])


@pytest.mark.parametrize("case", ["other-offset", "other-limit", "intermediate-read"])
def test_hard_swish_lookalikes_are_left_alone(case):
    constants, outputs = dict(HARD_SWISH_CONSTANTS), ("y",)
    nodes = _hard_swish_nodes()
    if case == "other-offset":
        constants["three"] = np.float32(2)
    elif case == "other-limit":
        nodes[1] = helper.make_node("Clip", ["shifted", "zero", "five"], ["clipped"])
        constants["five"] = np.float32(5)
    else:
        outputs = ("y", "clipped")
    model = _model(nodes, constants, outputs)
    assert fuse_hard_swish(import_onnx(model)) == 0
    _check(model, ["Add", "Clip", "Mul", "Div"])


# -- Gemm with a transposed constant, LayerNorm written out ------------------------------------
def test_gemm_transposed_weight_is_transposed_once_at_load():
    model = _model([helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)],
                   {"W": _f32(4, 6), "b": _f32(4)}, input_shape=[3, 6])
    graph = import_onnx(model)
    assert pretranspose_gemm_weights(graph) == 1
    gemm, = graph.nodes
    assert "transB" not in gemm.attrs and graph.initializers[gemm.inputs[1]].shape == (6, 4)
    session = InferenceSession(model)
    try:
        assert "Permute" not in [step.op for step in session.engine.lowered.steps]
    finally:
        session.close()
    _check(model, ["Gemm"])


def test_gemm_weight_read_twice_transposed_is_transposed_once_for_both():
    # an unrolled recurrence: every step's Gemm reads the one weight with transB
    model = _model([helper.make_node("Gemm", ["x", "W"], ["y1"], transB=1),
                    helper.make_node("MatMul", ["x", "Wt"], ["y2"]),
                    helper.make_node("Gemm", ["y2", "W"], ["y"], transB=1)],
                   {"W": _f32(6, 6), "Wt": _f32(6, 6)}, outputs=("y", "y1"),
                   input_shape=[30, 6])  # (rows outweigh W: the two Gemms stay two)
    graph = import_onnx(model)
    assert pretranspose_gemm_weights(graph) == 2
    first, _, second = graph.nodes
    assert first.inputs[1] == second.inputs[1] != "W"  # one shared transposed copy
    assert "W" not in {name for node in graph.nodes for name in node.inputs}
    _check(model, ["Gemm", "MatMul", "Gemm"])


def test_gemm_weight_another_reader_takes_as_it_is_is_left_alone():
    model = _model([helper.make_node("Gemm", ["x", "W"], ["y1"], transB=1),
                    helper.make_node("MatMul", ["x", "W"], ["y"])],
                   {"W": _f32(6, 6)}, outputs=("y", "y1"), input_shape=[3, 6])
    assert pretranspose_gemm_weights(import_onnx(model)) == 0


WRITTEN_LN_SHAPE = [2, 5, 8]


def _layer_norm_nodes(square="Pow", scale=True, bias=True, axes=(-1,)):
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=list(axes)),
             helper.make_node("Sub", ["x", "mean"], ["centred"]),
             helper.make_node("Pow", ["centred", "two"], ["squares"]) if square == "Pow"
             else helper.make_node("Mul", ["centred", "centred"], ["squares"]),
             helper.make_node("ReduceMean", ["squares"], ["variance"], axes=list(axes)),
             helper.make_node("Add", ["variance", "eps"], ["shifted"]),
             helper.make_node("Sqrt", ["shifted"], ["root"]),
             helper.make_node("Div", ["centred", "root"], ["normed" if scale or bias else "y"])]
    if scale:
        nodes.append(helper.make_node("Mul", ["normed", "gamma"], ["scaled" if bias else "y"]))
    if bias:
        nodes.append(helper.make_node("Add", ["scaled" if scale else "normed", "beta"], ["y"]))
    return nodes


WRITTEN_LN_CONSTANTS = {"two": np.float32(2), "eps": np.float32(1e-5), "gamma": _f32(8),
                "beta": _f32(8)}


@pytest.mark.parametrize("square,scale,bias,axes", [
    ("Pow", True, True, (-1,)), ("Mul", True, True, (-1,)), ("Pow", False, False, (-1,)),
    ("Pow", True, False, (1, 2))], ids=["pow", "mul", "bare", "two-axes"])
def test_layer_norm_written_out_becomes_one_node(square, scale, bias, axes):
    constants = dict(WRITTEN_LN_CONSTANTS)
    if axes == (1, 2):
        constants["gamma"] = _f32(5, 8)
    model = _model(_layer_norm_nodes(square, scale, bias, axes), constants,
                   input_shape=WRITTEN_LN_SHAPE)
    assert fuse_layer_norm(import_onnx(model)) == 1
    _check(model, ["LayerNormalization"])


@pytest.mark.parametrize("case", ["leading-axis", "mean-read-twice", "no-epsilon"])
def test_layer_norm_lookalikes_are_left_alone(case):
    nodes, outputs, constants = _layer_norm_nodes(), ("y",), dict(WRITTEN_LN_CONSTANTS)
    if case == "leading-axis":
        nodes = _layer_norm_nodes(axes=(1,))
    elif case == "mean-read-twice":
        outputs = ("y", "mean")
    else:
        nodes[4] = helper.make_node("Add", ["variance", "variance"], ["shifted"])
    model = _model(nodes, constants, outputs, input_shape=WRITTEN_LN_SHAPE)
    assert fuse_layer_norm(import_onnx(model)) == 0
    assert "LayerNormalization" not in _optimized_ops(model)
    _check(model, _optimized_ops(model).elements())


# -- SiLU ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["x-first", "x-second"])
def test_x_times_sigmoid_x_becomes_silu(order):
    product = ["x", "s"] if order == "x-first" else ["s", "x"]
    model = _model([helper.make_node("Sigmoid", ["x"], ["s"]),
                    helper.make_node("Mul", product, ["y"])], {})
    assert fuse_silu(import_onnx(model)) == 1
    _check(model, [SILU])


def test_silu_lookalikes_are_left_alone():
    read_twice = _model([helper.make_node("Sigmoid", ["x"], ["s"]),
                         helper.make_node("Mul", ["x", "s"], ["y"])], {}, outputs=("y", "s"))
    other_operand = _model([helper.make_node("Sigmoid", ["x"], ["s"]),
                            helper.make_node("Relu", ["x"], ["r"]),
                            helper.make_node("Mul", ["r", "s"], ["y"])], {})
    for model in (read_twice, other_operand):
        assert fuse_silu(import_onnx(model)) == 0
        _check(model, _optimized_ops(model).elements())


# -- GELU written with Erf ---------------------------------------------------------------------
GELU_CONSTANTS = {"sqrt2": np.float32(np.sqrt(2)), "rsqrt2": np.float32(np.sqrt(0.5)),
                  "one": np.float32(1), "half": np.float32(0.5), "two": np.float32(2)}


def _gelu_erf_nodes(form):
    """GELU's erf form in the groupings exporters write."""
    scale = (helper.make_node("Mul", ["rsqrt2", "x"], ["scaled"]) if form == "mul-rsqrt2"
             else helper.make_node("Div", ["x", "sqrt2"], ["scaled"]))
    head = [scale, helper.make_node("Erf", ["scaled"], ["erf"]),
            helper.make_node("Add", ["erf", "one"] if form != "one-first" else ["one", "erf"],
                             ["one_plus"])]
    if form == "half-first":  # (x * 0.5) * (1 + erf)
        return [helper.make_node("Mul", ["x", "half"], ["hx"]), *head,
                helper.make_node("Mul", ["hx", "one_plus"], ["y"])]
    if form == "half-inside":  # x * ((1 + erf) * 0.5)
        return [*head, helper.make_node("Mul", ["one_plus", "half"], ["h"]),
                helper.make_node("Mul", ["x", "h"], ["y"])]
    return [*head, helper.make_node("Mul", ["x", "one_plus"], ["m"]),  # (x * (1 + erf)) * 0.5
            helper.make_node("Mul", ["m", "half"], ["y"])]


@pytest.mark.parametrize("form", ["half-last", "one-first", "mul-rsqrt2", "half-first",
                                  "half-inside"])
def test_gelu_written_with_erf_becomes_one_node(form):
    model = _model(_gelu_erf_nodes(form), GELU_CONSTANTS)
    assert fuse_gelu_erf(import_onnx(model)) == 1
    _check(model, ["Gelu"])


@pytest.mark.parametrize("case", ["divisor-two", "erf-read-twice", "half-is-not-half",
                                  "divided-the-other-way"])
def test_gelu_lookalikes_are_left_alone(case):
    nodes, outputs, constants = _gelu_erf_nodes("half-last"), ("y",), dict(GELU_CONSTANTS)
    if case == "divisor-two":
        nodes[0] = helper.make_node("Div", ["x", "two"], ["scaled"])
    elif case == "erf-read-twice":
        outputs = ("y", "erf")
    elif case == "half-is-not-half":
        constants["half"] = np.float32(0.25)
    else:
        nodes[0] = helper.make_node("Div", ["sqrt2", "x"], ["scaled"])
    model = _model(nodes, constants, outputs)
    assert fuse_gelu_erf(import_onnx(model)) == 0
    assert "Gelu" not in _optimized_ops(model)
    _check(model, _optimized_ops(model).elements())


# -- MatMul / Gemm + bias + ReLU ---------------------------------------------------------------
MM_SHAPE, MM_IN, MM_OUT = [2, 3, 5], 5, 4
MM_WEIGHTS = {"W": _f32(MM_IN, MM_OUT), "b": _f32(MM_OUT), "b2": _f32(1, MM_OUT),
              "Wt": _f32(MM_OUT, MM_IN), "full": _f32(3, MM_OUT)}


def _matmul_nodes(bias="b", bias_first=False, relu=True):
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm")]
    last = "h"
    if bias:
        nodes.append(helper.make_node("Add", [bias, "h"] if bias_first else ["h", bias],
                                      ["hb"], name="add"))
        last = "hb"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["y"], name="relu"))
    else:
        nodes[-1].output[0] = "y"
    return nodes


@pytest.mark.parametrize("bias, bias_first, relu", [
    ("b", False, True), ("b", True, True), ("b2", False, True), (None, False, True),
    ("b", False, False)], ids=["bias-relu", "bias-first", "row-bias", "relu-only", "bias-only"])
def test_matmul_bias_relu_become_one_node(bias, bias_first, relu):
    model = _model(_matmul_nodes(bias, bias_first, relu), MM_WEIGHTS, input_shape=MM_SHAPE)
    graph = import_onnx(model)
    assert fuse_matmul_epilogue(graph) == 1
    (node,) = graph.nodes
    assert node.op_type == FUSED_MATMUL
    assert node.attrs["fusedOpType"] == ("relu" if relu else "")
    _check(model, [FUSED_MATMUL])


def test_gemm_relu_fuses_and_gemm_alone_stays_addmm():
    transposed = [helper.make_node("Gemm", ["x", "Wt", "b"], ["g"], transB=1, name="gemm"),
                  helper.make_node("Relu", ["g"], ["y"], name="relu")]
    _check(_model(transposed, MM_WEIGHTS, input_shape=[3, MM_IN]), [FUSED_MATMUL])
    alone = [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="gemm")]
    _check(_model(alone, MM_WEIGHTS, input_shape=[3, MM_IN]), ["Gemm"])
    scaled = [helper.make_node("Gemm", ["x", "W", "b"], ["g"], alpha=2.0, name="gemm"),
              helper.make_node("Relu", ["g"], ["y"], name="relu")]
    _check(_model(scaled, MM_WEIGHTS, input_shape=[3, MM_IN]), ["Gemm", "Relu"])


@pytest.mark.parametrize("case", ["full-bias", "input-bias", "product-read-twice",
                                  "weight-input", "relu-read-twice"])
def test_matmul_lookalikes_are_left_alone(case):
    nodes, weights, outputs, inputs = _matmul_nodes(), dict(MM_WEIGHTS), ("y",), MM_SHAPE
    expected = ["MatMul", "Add", "Relu"]
    if case == "full-bias":  # a per-element [M, N] addend is not one bias row
        nodes[1] = helper.make_node("Add", ["h", "full"], ["hb"])
    elif case == "input-bias":  # x + x @ W: the addend is no constant
        nodes = [helper.make_node("MatMul", ["x", "W2"], ["h"]),
                 helper.make_node("Add", ["h", "x"], ["y"])]
        weights["W2"] = _f32(MM_IN, MM_IN)
        expected = ["MatMul", "Add"]
    elif case == "product-read-twice":
        outputs = ("y", "h")
    elif case == "weight-input":  # W @ x: the constant is on the left
        nodes = [helper.make_node("MatMul", ["Wl", "x"], ["h"]),
                 helper.make_node("Relu", ["h"], ["y"])]
        weights["Wl"] = _f32(4, 2)
        inputs, expected = [2, 3], ["MatMul", "Relu"]
    else:  # the bias sum feeds the Relu and a graph output: the bias fuses, the Relu stays
        outputs = ("y", "hb")
        expected = [FUSED_MATMUL, "Relu"]
    model = _model(nodes, weights, outputs, input_shape=inputs)
    _check(model, expected)


# -- Add + LayerNormalization (a transformer's residual then norm) ---------------------------------
LN_WEIGHTS = {"W": _f32(MM_OUT, MM_OUT), "b": _f32(MM_OUT), "gamma": _f32(MM_OUT),
              "beta": _f32(MM_OUT), "row": _f32(1, MM_OUT), "wide_gamma": _f32(3, MM_OUT)}
LN_SHAPE = [2, 3, MM_OUT]


def _residual_norm_nodes(outputs=("y",), bias="beta", scale="gamma", addend="x"):
    """x @ W + b (+ addend), LayerNormalization over the last dim."""
    inputs = ["s", scale] + ([bias] if bias else [])
    return [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
            helper.make_node("Add", ["hb", addend], ["s"], name="residual"),
            helper.make_node("LayerNormalization", inputs, list(outputs), axis=-1,
                             epsilon=1e-5, name="norm")]


@pytest.mark.parametrize("bias", ["beta", ""], ids=["with-beta", "no-beta"])
def test_residual_add_and_layer_norm_become_one_node_with_the_matmul_bias(bias):
    model = _model(_residual_norm_nodes(bias=bias), LN_WEIGHTS, input_shape=LN_SHAPE)
    graph = optimize(import_onnx(model))
    ops = collections.Counter(node.op_type for node in graph.nodes)
    assert ops == collections.Counter([FUSED_MATMUL, ADD_LAYER_NORM])
    matmul = next(n for n in graph.nodes if n.op_type == FUSED_MATMUL)
    norm = next(n for n in graph.nodes if n.op_type == ADD_LAYER_NORM)
    assert matmul.inputs[2] == "" and norm.inputs[4]  # the bias moved into the norm
    _check(model, [FUSED_MATMUL, ADD_LAYER_NORM])


@pytest.mark.parametrize("case", ["stats-read", "broadcast-add", "computed-scale",
                                  "sum-read-twice", "matmul-product-read-twice"])
def test_add_layer_norm_lookalikes(case):
    nodes, outputs, expected = _residual_norm_nodes(), ("y",), None
    weights = dict(LN_WEIGHTS)
    if case == "stats-read":  # Mean is a graph output: aclnnAddLayerNorm's stats differ
        nodes = _residual_norm_nodes(outputs=("y", "mean"))
        outputs = ("y", "mean")
        expected = [FUSED_MATMUL, "Add", "LayerNormalization"]
    elif case == "broadcast-add":  # h + row: the addends' shapes differ
        nodes = _residual_norm_nodes(addend="row")
        expected = [FUSED_MATMUL, "Add", "LayerNormalization"]
    elif case == "computed-scale":  # the scale is computed, not a constant
        nodes = [*_residual_norm_nodes()[:3],
                 helper.make_node("ReduceMean", ["x"], ["g3"], axes=[0, 1], keepdims=0),
                 helper.make_node("LayerNormalization", ["s", "g3", "beta"], ["y"], axis=-1)]
        expected = [FUSED_MATMUL, "Add", "ReduceMean", "LayerNormalization"]
    elif case == "sum-read-twice":  # the residual sum is also an output
        outputs = ("y", "s")
        expected = [FUSED_MATMUL, "Add", "LayerNormalization"]
    else:  # the biased product is read again: its bias stays in the FusedMatMul
        outputs = ("y", "hb")
        expected = [FUSED_MATMUL, ADD_LAYER_NORM]
    model = _model(nodes, weights, outputs, input_shape=LN_SHAPE)
    _check(model, expected)
    if case == "matmul-product-read-twice":
        graph = optimize(import_onnx(model))
        matmul = next(n for n in graph.nodes if n.op_type == FUSED_MATMUL)
        assert matmul.inputs[2] == "b"


# -- attention's scores scaled by a constant: folded into the query projection ---------------------
ATTENTION_WEIGHTS = {"Wq": _f32(8, 8), "bq": _f32(8), "Wk": _f32(8, 8), "scale": np.float32(0.35),
                     "heads": np.array([2, 3, 2, 4], np.int64), "other": _f32(2, 2, 3, 3)}


def _attention_nodes(scale_first=False, extra_output=False):
    """q = (x @ Wq + bq) in heads, k = x @ Wk in heads; y = q @ k^T * scale."""
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["q0"]),
             helper.make_node("Add", ["q0", "bq"], ["q1"]),
             helper.make_node("Reshape", ["q1", "heads"], ["q2"]),
             helper.make_node("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["x", "Wk"], ["k0"]),
             helper.make_node("Reshape", ["k0", "heads"], ["k1"]),
             helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("Mul", ["scale", "scores"] if scale_first else ["scores", "scale"],
                              ["y"])]
    return nodes, (("y", "q") if extra_output else ("y",))


@pytest.mark.parametrize("scale_first", [False, True])
def test_attention_scale_folds_into_the_query_projection(scale_first):
    nodes, outputs = _attention_nodes(scale_first)
    model = _model(nodes, ATTENTION_WEIGHTS, outputs, input_shape=[2, 3, 8])
    graph = optimize(import_onnx(model))
    assert "Mul" not in {node.op_type for node in graph.nodes}
    query = next(n for n in graph.nodes if n.op_type == FUSED_MATMUL and n.inputs[2])
    np.testing.assert_allclose(graph.initializers[query.inputs[1]],
                               ATTENTION_WEIGHTS["Wq"] * np.float32(0.35), rtol=1e-6)
    _check(model, [FUSED_MATMUL, "MatMul", "MatMul", "Reshape", "Reshape", "Transpose",
                   "Transpose"])


@pytest.mark.parametrize("case", ["query-read-twice", "scale-not-constant", "scale-tensor"])
def test_matmul_scale_lookalikes(case):
    nodes, outputs = _attention_nodes(extra_output=case == "query-read-twice")
    weights = dict(ATTENTION_WEIGHTS)
    if case == "scale-not-constant":  # the scale is computed from the input
        nodes[-1] = helper.make_node("Mul", ["scores", "s"], ["y"])
        nodes.insert(-1, helper.make_node("ReduceMax", ["x"], ["s"], keepdims=0))
    elif case == "scale-tensor":  # a per-element constant, not one scalar
        nodes[-1] = helper.make_node("Mul", ["scores", "other"], ["y"])
    model = _model(nodes, weights, outputs, input_shape=[2, 3, 8])
    graph = import_onnx(model)
    optimize(graph)
    assert fold_matmul_scale(graph) == 0
    assert "Mul" in {node.op_type for node in graph.nodes}
    session = InferenceSession(model)
    x = _f32(2, 3, 8)
    try:
        ours = session.run(None, {"x": x})
    finally:
        session.close()
    theirs = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# -- products that share a weight ------------------------------------------------------------
STEPS, DEPTH, UNITS = 6, 64, 48


def _unrolled(recurrent=True, bias_per_step=False):
    """An unrolled recurrence as torch.onnx writes one: per time step, the step's row of x
    (Gather) times the input weight (Gemm, transB), plus the previous state times the
    recurrent weight (a chain: no step's product can be batched with the next's)."""
    nodes, initializers = [], {"W": _f32(UNITS, DEPTH), "B": _f32(UNITS), "R": _f32(UNITS, UNITS),
                               "state0": np.zeros((1, UNITS), np.float32)}
    state = "state0"
    for step in range(STEPS):
        initializers[f"t{step}"] = np.array([step], np.int64)
        bias = f"B{step}" if bias_per_step else "B"
        if bias_per_step:
            initializers[bias] = _f32(UNITS)
        nodes += [helper.make_node("Gather", ["x", f"t{step}"], [f"x{step}"], axis=0),
                  helper.make_node("Gemm", [f"x{step}", "W", bias], [f"p{step}"], transB=1,
                                   name=f"input_{step}")]
        if recurrent:
            nodes += [helper.make_node("MatMul", [state, "R"], [f"r{step}"]),
                      helper.make_node("Add", [f"p{step}", f"r{step}"], [f"s{step}"]),
                      helper.make_node("Tanh", [f"s{step}"], [f"h{step}"])]
            state = f"h{step}"
        else:
            state = f"p{step}"
    nodes.append(helper.make_node("Identity", [state], ["y"]))
    return _model(nodes, initializers, input_shape=[STEPS, DEPTH])


def test_input_projections_of_an_unrolled_recurrence_are_one_product():
    model = _unrolled()
    graph = import_onnx(model)
    assert batch_shared_weight_products(graph) == STEPS - 1
    graph.validate()  # sorted: the stacked product after every Gather it reads
    ops = collections.Counter(node.op_type for node in graph.nodes)
    assert ops["Gemm"] == 1 and ops["Concat"] == 1 and ops["Split"] == 1
    assert ops["MatMul"] == STEPS  # the recurrent products depend on each other
    ops = _optimized_ops(model)
    assert ops["Concat"] == 1 and ops["Split"] == 1
    x = _f32(STEPS, DEPTH)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    with InferenceSession(model) as session:
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected[0], rtol=1e-5,
                                   atol=1e-5)


def test_products_that_depend_on_each_other_or_differ_are_not_batched():
    chain = import_onnx(_unrolled(recurrent=False))  # step t reads... only x: batched
    assert batch_shared_weight_products(chain) == STEPS - 1
    biases = import_onnx(_unrolled(bias_per_step=True))  # a bias each: different products
    assert batch_shared_weight_products(biases) == 0
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"]),
             helper.make_node("MatMul", ["a", "W"], ["b"]),   # reads the first product
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("MatMul", ["c", "W"], ["y"])]   # and through a Relu
    dependent = import_onnx(_model(nodes, {"W": _f32(DEPTH, DEPTH)}, input_shape=[4, DEPTH]))
    assert batch_shared_weight_products(dependent) == 0
    rows = [helper.make_node("MatMul", ["x", "W"], ["a"]),
            helper.make_node("MatMul", ["x", "W"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["y"])]
    small = import_onnx(_model(rows, {"W": _f32(DEPTH, 2)}, input_shape=[512, DEPTH]))
    assert batch_shared_weight_products(small) == 0  # rows outweigh the weight
    large = import_onnx(_model(rows, {"W": _f32(DEPTH, DEPTH)}, input_shape=[2, DEPTH]))
    assert batch_shared_weight_products(large) == 1
