"""Precision modes: fp16 and mixed (sensitive ops in float32), against fp32 and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from model_files import MINILM, PPOCR_DET, real_model  # noqa: E402
from op_harness import agreement  # noqa: E402
from openacl.cli.main import main  # noqa: E402
from openacl.cli.zoo import synthetic_text_page  # noqa: E402
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError  # noqa: E402
from openacl.model import om  # noqa: E402
from openacl.model.converter import compile_onnx, convert_onnx  # noqa: E402

RNG = np.random.default_rng(11)
# the documented fp16 agreement bounds (fp32 mode: cosine >= 0.9999, max |diff| <= 1e-4)
FP16_COSINE = 0.9999
FP16_MAX_ABS = {"minilm": 1e-3, "ppocr": 0.1}  # PP-OCR: a probability map in [0, 1]


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _model():
    """x @ W -> LayerNormalization -> Softmax, with a constant beyond float16's range."""
    w = RNG.standard_normal((16, 32)).astype(np.float32)
    scale, bias = np.ones(32, np.float32), np.full(32, 1e6, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "scale", "zero"], ["n"], axis=-1),
             helper.make_node("Min", ["n", "big"], ["c"]),  # a bound beyond float16's range
             helper.make_node("Softmax", ["c"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "precision", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(a, n) for n, a in (("w", w), ("scale", scale),
                                                     ("zero", np.zeros(32, np.float32)),
                                                     ("big", bias))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("precision", ["fp16", "mixed"])
def test_half_precision_keeps_float32_at_the_interface(precision, tmp_path):
    path = tmp_path / f"m_{precision}.om"
    model = _model()
    onnx.save(model, tmp_path / "m.onnx")
    report = convert_onnx(tmp_path / "m.onnx", path, precision=precision)
    assert report.precision == precision
    lowered, _, metadata = om.load_model(path)
    assert metadata["precision"] == precision
    assert lowered.graph.initializers["w"].dtype == np.float16
    assert lowered.graph.initializers["big"].max() == 65504  # saturated, not inf
    assert lowered.graph.value("x").dtype == np.float32
    assert lowered.graph.value("y").dtype == np.float32
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    session = openacl.InferenceSession(str(path))
    try:
        (y,) = session.run(None, {"x": x})
    finally:
        session.close()
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=2e-2, atol=2e-3)


def test_mixed_computes_the_sensitive_ops_in_float32():
    graph, lowered, _ = compile_onnx(_model(), None, "mixed")
    layer_norm = next(s for s in lowered.steps if s.op == "LayerNorm")
    softmax = next(s for s in lowered.steps if s.op == "Softmax")
    for step in (layer_norm, softmax):
        tensor = dict(step.args)["input" if step is layer_norm else "self"].value
        assert graph.value(tensor).dtype == np.float32, step
    matmul = next(s for s in lowered.steps if s.op == "Matmul")
    assert graph.value(dict(matmul.args)["out"].value).dtype == np.float16
    _, fp16, _ = compile_onnx(_model(), None, "fp16")
    norm16 = next(s for s in fp16.steps if s.op == "LayerNorm")
    assert fp16.graph.value(dict(norm16.args)["input"].value).dtype == np.float16


def test_bad_precision_is_refused(tmp_path, capsys):
    onnx.save(_model(), tmp_path / "m.onnx")
    with pytest.raises(AclError) as info:
        convert_onnx(tmp_path / "m.onnx", tmp_path / "m.om", precision="int8")
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "int8" in info.value.message
    assert main(["convert", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "h.om"),
                 "--precision", "fp16"]) == 0
    assert "precision: fp16" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["minilm", "ppocr"])
def test_real_models_in_fp16_agree_with_onnxruntime(name, tmp_path):
    source = real_model({"minilm": MINILM, "ppocr": PPOCR_DET}[name])
    if name == "minilm":
        mask = np.ones((1, 128), np.int64)
        mask[:, 100:] = 0
        feeds = {"input_ids": RNG.integers(0, 30522, (1, 128)).astype(np.int64),
                 "attention_mask": mask, "token_type_ids": np.zeros((1, 128), np.int64)}
    else:
        feeds = {"x": synthetic_text_page(320)}
    path = tmp_path / f"{name}.om"
    convert_onnx(source, path, {k: v.shape for k, v in feeds.items()}, precision="fp16")
    session = openacl.InferenceSession(str(path))
    try:
        ours = session.run(None, feeds)[0]
    finally:
        session.close()
    theirs = ort.InferenceSession(source).run(None, feeds)[0]
    cosine, max_abs = agreement(ours, theirs)
    assert cosine >= FP16_COSINE and max_abs <= FP16_MAX_ABS[name], (cosine, max_abs)


def test_fp16_weights_are_widened_once_and_results_match_numpys_conversions():
    """fp16 mode on the CPU: a Conv's and a MatMul's float16 weights are widened to float32
    at the first run and kept (the engine's constants), and the F16C conversions give the
    numpy conversions' results to the bit."""
    from openacl.ops import native

    rng = np.random.default_rng(5)
    conv_w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "cw")
    mat_w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "mw")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("MatMul", ["c", "mw"], ["y"])], "half",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [conv_w, mat_w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, 3, 6, 8)).astype(np.float32)
    session = openacl.InferenceSession(model, precision="fp16")
    try:
        first = session.run(None, {"x": x})[0]
        engine = session.engine
        ops = [step.op for step in engine.lowered.steps]
        assert "Convolution" in ops and ("FusedMatmul" in ops or "Matmul" in ops), ops
        for op in ("Convolution", "FusedMatmul"):
            for index in [i for i, name in enumerate(ops) if name == op]:
                views = engine._host.kernels[index].args[0]
                widened = [value for key, value in views.derived.items()
                           if getattr(value, "dtype", None) is not None]
                assert widened and all(a.dtype == np.float32 for a in widened), (op, views.derived)
        with native.disabled():
            slow = openacl.InferenceSession(model, precision="fp16")
            try:  # (the C and numpy convolutions sum in another order: float16 ulps)
                np.testing.assert_allclose(slow.run(None, {"x": x})[0], first, rtol=2e-3,
                                           atol=2e-3)
            finally:
                slow.close()
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], first)
    finally:
        session.close()
