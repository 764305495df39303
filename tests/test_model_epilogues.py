"""Activations fused into the convolution before them (``openacl.model.epilogues``): the
lowered steps are rewritten to an in-place activation, the host engine applies it in the
convolution's tiles, and every kernel path gives the bits the two steps give unfused."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError  # noqa: E402
from openacl.model.epilogues import fused_steps, write_in_place  # noqa: E402
from openacl.model.ir import Graph, Lowered, Ref, Step, Value  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402
from openacl.ops.call import Epilogue  # noqa: E402
from openacl.ops.executor import find_executor  # noqa: E402

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _conv_relu_model(x_shape, w_shape, *, keep_conv: bool, transposed: bool = False,
                     activation: str = "Relu", **attributes) -> bytes:
    """x -> Conv(W, B) -> activation -> y; ``keep_conv``: the convolution's output is a
    graph output too (so nothing may be fused)."""
    spatial = len(x_shape) - 2
    c_out = w_shape[1] * attributes.get("group", 1) if transposed else w_shape[0]
    weights = np.random.default_rng(5)  # both models of a case hold the same weights
    weight = weights.standard_normal(w_shape).astype(np.float32)
    bias = weights.standard_normal(c_out).astype(np.float32)
    conv = helper.make_node("ConvTranspose" if transposed else "Conv", ["x", "w", "b"],
                            ["c"], kernel_shape=list(w_shape[2:]), **attributes)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if keep_conv:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    if activation == "Silu":  # the Sigmoid * x pattern the converter fuses into aclnnSilu
        nodes = [helper.make_node("Sigmoid", ["c"], ["s"]),
                 helper.make_node("Mul", ["c", "s"], ["y"])]
    elif activation == "LeakyRelu":
        nodes = [helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.1)]
    elif activation == "Gelu":  # written out with Erf, as exporters do: fused into GeluV2
        nodes = [helper.make_node("Div", ["c", "sqrt2"], ["d"]),
                 helper.make_node("Erf", ["d"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["f"]),
                 helper.make_node("Mul", ["c", "f"], ["g"]),
                 helper.make_node("Mul", ["g", "half"], ["y"])]
    else:
        nodes = [helper.make_node(activation, ["c"], ["y"])]
    graph = helper.make_graph(
        [conv, *nodes], f"conv{spatial}d_{activation}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))], outputs,
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b"),
         *(numpy_helper.from_array(np.float32(value), name) for name, value in
           (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5)))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _session(model, precision: str = "fp32") -> InferenceSession:
    return InferenceSession(model.SerializeToString(), precision=precision)


def _engine(session: InferenceSession, feeds):
    """The engine of the model's one stage (static shapes: no host nodes)."""
    stage = session.staged.prepare({})
    assert stage.engine is not None and not stage.host_nodes
    return stage.engine


CASES = {
    # (x shape, weight shape, attributes): which kernel path the convolution takes
    "implicit-gemm": ((1, 16, 12, 12), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "implicit-gemm-1d": ((2, 8, 40), (16, 8, 5), {"pads": [2, 2]}),
    "depthwise": ((1, 16, 20, 20), (16, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 16}),
    "depthwise-stride-2": ((1, 8, 15, 17), (8, 1, 5, 5),
                           {"pads": [2, 2, 2, 2], "group": 8, "strides": [2, 2]}),
    "few-channels": ((1, 3, 17, 16), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "gathered": ((1, 6, 3, 3), (4, 6, 2, 2), {}),
    "grouped": ((1, 8, 9, 9), (8, 4, 3, 3), {"group": 2}),
}


# ONNX activation -> the step the engine fuses, and its epilogue
FUSED = {"Relu": ("InplaceRelu", "relu"), "HardSwish": ("InplaceHardswish", "hardswish"),
         "Sigmoid": ("InplaceSigmoid", "sigmoid"), "Silu": ("Silu", "silu"),
         "LeakyRelu": ("InplaceLeakyRelu", "leaky_relu"), "Gelu": ("GeluV2", "gelu_erf")}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("activation", sorted(FUSED))
def test_a_fused_activation_gives_the_bits_of_the_two_steps(case, activation):
    x_shape, w_shape, attributes = CASES[case]
    x = RNG.standard_normal(x_shape).astype(np.float32)
    x.reshape(-1)[::11] = np.nan
    fused = _session(_conv_relu_model(x_shape, w_shape, keep_conv=False,
                                      activation=activation, **attributes))
    plain = _session(_conv_relu_model(x_shape, w_shape, keep_conv=True,
                                      activation=activation, **attributes))
    np.testing.assert_array_equal(fused.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    engine = _engine(fused, {"x": x})
    step_op, epilogue = FUSED[activation]
    ops = [step.op for step in engine.lowered.steps]
    producer = ops.index("Convolution")
    assert ops[producer + 1] == step_op
    views = engine._host.kernels[producer].args[0]
    assert views.epilogue.name == epilogue
    assert views.epilogue.alpha == (pytest.approx(0.1) if activation == "LeakyRelu" else 0)


@pytest.mark.parametrize("case", ["implicit-gemm", "depthwise", "gathered"])
@pytest.mark.parametrize("activation", ["HardSwish", "Relu"])
def test_a_fused_activation_in_fp16_mode(case, activation):
    """float16 outputs: the kernels compute into a float32 buffer and round it once; the
    activation then runs on the float16 result, as the unfused step does."""
    x_shape, w_shape, attributes = CASES[case]
    x = RNG.standard_normal(x_shape).astype(np.float32)
    fused = _session(_conv_relu_model(x_shape, w_shape, keep_conv=False,
                                      activation=activation, **attributes), "fp16")
    plain = _session(_conv_relu_model(x_shape, w_shape, keep_conv=True,
                                      activation=activation, **attributes), "fp16")
    y_fused = fused.run(None, {"x": x})[0]
    y_plain, conv = plain.run(None, {"x": x})
    np.testing.assert_array_equal(y_fused, y_plain)
    assert (conv < 0).any() and (y_fused >= (-0.375 if activation == "HardSwish" else 0)).all()


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_relu_gives_the_bits_of_the_two_steps(case):
    x_shape, w_shape, attributes = CASES[case]
    x = RNG.standard_normal(x_shape).astype(np.float32)
    x.reshape(-1)[::7] = np.nan  # NaN stays NaN through the fused ReLU, as through Relu
    fused = _session(_conv_relu_model(x_shape, w_shape, keep_conv=False, **attributes))
    plain = _session(_conv_relu_model(x_shape, w_shape, keep_conv=True, **attributes))
    y_fused = fused.run(None, {"x": x})[0]
    y_plain, conv = plain.run(None, {"x": x})
    np.testing.assert_array_equal(y_fused, y_plain)
    np.testing.assert_array_equal(y_fused, np.maximum(conv, np.float32(0)))
    assert np.isnan(y_fused).any() and (y_fused[~np.isnan(y_fused)] >= 0).all()

    engine = _engine(fused, {"x": x})
    ops = [step.op for step in engine.lowered.steps]
    assert "Relu" not in ops and ops.count("InplaceRelu") == 1
    assert fused_steps(engine.lowered.steps) == {ops.index("InplaceRelu") - 1: ("relu", 0.0)}
    conv_kernel = engine._host.kernels[ops.index("InplaceRelu") - 1]
    assert conv_kernel.args[0].epilogue.name == "relu"
    assert [step.op for step in _engine(plain, {"x": x}).lowered.steps].count("Relu") == 1


def test_a_fused_relu_after_a_transposed_convolution():
    x_shape, w_shape = (1, 4, 6, 6), (4, 3, 3, 3)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    fused = _session(_conv_relu_model(x_shape, w_shape, keep_conv=False, transposed=True,
                                      strides=[2, 2]))
    plain = _session(_conv_relu_model(x_shape, w_shape, keep_conv=True, transposed=True,
                                      strides=[2, 2]))
    y_plain, conv = plain.run(None, {"x": x})
    np.testing.assert_array_equal(fused.run(None, {"x": x})[0], y_plain)
    assert (conv < 0).any() and (y_plain >= 0).all()


def _lowered(steps, outputs=("y",), views=None) -> Lowered:
    values = {name: Value(name, np.dtype(np.float32), (1, 2, 3, 3))
              for name in ("x", "w", "c", "y", "z")}
    graph = Graph("g", ["x"], list(outputs), values, [])
    return Lowered(graph, list(steps), dict(views or {}))


CONV = Step("Convolution", (("input", Ref("x")), ("weight", Ref("w")), ("output", Ref("c"))))
RELU = Step("Relu", (("self", Ref("c")), ("out", Ref("y"))))


def test_write_in_place_rewrites_a_convolution_and_its_relu():
    lowered = _lowered([CONV, RELU])
    assert write_in_place(lowered) == 1
    assert lowered.steps == [
        Step("Convolution", (("input", Ref("x")), ("weight", Ref("w")), ("output", Ref("y")))),
        Step("InplaceRelu", (("selfRef", Ref("y")),))]


@pytest.mark.parametrize("why", ["another reader", "a graph output", "a view", "not adjacent"])
def test_write_in_place_leaves_a_value_others_see(why):
    steps, outputs, views = [CONV, RELU], ("y",), {}
    if why == "another reader":
        steps.append(Step("Neg", (("self", Ref("c")), ("out", Ref("z")))))
    elif why == "a graph output":
        outputs = ("y", "c")
    elif why == "a view":
        views = {"z": "c"}
    else:
        steps.insert(1, Step("Neg", (("self", Ref("x")), ("out", Ref("z")))))
    lowered = _lowered(steps, outputs, views)
    before = list(lowered.steps)
    assert write_in_place(lowered) == 0
    assert lowered.steps == before


def test_an_epilogue_the_operator_does_not_apply_is_refused():
    x_shape, w_shape, attributes = CASES["gathered"]
    session = _session(_conv_relu_model(x_shape, w_shape, keep_conv=True, **attributes))
    x = RNG.standard_normal(x_shape).astype(np.float32)
    engine = _engine(session, {"x": x})
    relu_index = [step.op for step in engine.lowered.steps].index("Relu")
    executor = find_executor(engine._executors[relu_index][0])
    with pytest.raises(AclError) as info:
        executor.bound_kernel(epilogue=Epilogue("relu"))
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    assert "'epilogue' = 'relu'" in str(info.value) and "aclnnRelu" in str(info.value)


def test_write_in_place_through_a_view_of_the_output():
    """A Relu reading the convolution's output through a view of the same shape (an
    Identity, a no-op Reshape): the view goes, the convolution writes the Relu's output."""
    relu = Step("Relu", (("self", Ref("z")), ("out", Ref("y"))))
    lowered = _lowered([CONV, relu], views={"z": "c"})
    assert write_in_place(lowered) == 1
    assert lowered.views == {}
    assert lowered.steps[1] == Step("InplaceRelu", (("selfRef", Ref("y")),))
    assert dict(lowered.steps[0].args)["output"] == Ref("y")


def test_write_in_place_drops_a_view_nothing_reads():
    relu = Step("Relu", (("self", Ref("z")), ("out", Ref("y"))))
    lowered = _lowered([CONV, relu], views={"z": "c", "q": "c"})
    assert write_in_place(lowered) == 1
    assert lowered.views == {}


@pytest.mark.parametrize("why", ["a second view", "the view is read again", "a graph output"])
def test_write_in_place_leaves_a_view_others_see(why):
    relu = Step("Relu", (("self", Ref("z")), ("out", Ref("y"))))
    steps, views, outputs = [CONV, relu], {"z": "c"}, ("y",)
    if why == "a second view":  # read by a step
        views["w"] = "c"
        steps.append(Step("Neg", (("self", Ref("w")), ("out", Ref("x")))))
    elif why == "the view is read again":
        steps.append(Step("Neg", (("self", Ref("z")), ("out", Ref("x")))))
    else:
        outputs = ("y", "z")
    lowered = _lowered(steps, outputs, views)
    before = list(lowered.steps)
    assert write_in_place(lowered) == 0
    assert lowered.steps == before and lowered.views == views


def test_gelu_erf_is_fused_and_its_tanh_form_is_not():
    gelu = Step("GeluV2", (("x", Ref("c")), ("approximate", 0), ("y", Ref("y"))))
    lowered = _lowered([CONV, gelu])
    assert write_in_place(lowered) == 1
    assert lowered.steps[1] == Step("GeluV2", (("x", Ref("y")), ("approximate", 0),
                                               ("y", Ref("y"))))
    assert fused_steps(lowered.steps) == {0: ("gelu_erf", 0.0)}
    tanh = Step("GeluV2", (("x", Ref("c")), ("approximate", 1), ("y", Ref("y"))))
    assert write_in_place(_lowered([CONV, tanh])) == 0
