"""The model pipeline: ONNX import, lowering, memory plan, engine; against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    ACL_ERROR_PARSE_MODEL,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    AclError,
)
from openacl.model.lowering import lower  # noqa: E402
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.plan import plan_memory  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare(model, feeds, atol=1e-5):
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    session = InferenceSession(model)
    try:
        got = session.run(None, feeds)
    finally:
        session.close()
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=atol)


def test_tiny_matmul_relu_matches_onnxruntime():
    weight = RNG.standard_normal((32, 64)).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["x", "W"], ["h"]),
                    helper.make_node("Relu", ["h"], ["y"])],
                   [("x", [1, 32])], [("y", [1, 64])], [("W", weight)])
    _compare(model, {"x": RNG.standard_normal((1, 32)).astype(np.float32)})


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_overflow_in_a_host_run_gives_inf_without_warnings(bias):
    # kernels behave as on a device: an overflow is inf, never a numpy RuntimeWarning (numpy
    # reports a BLAS product's overflow too: products are no "silent" steps)
    import warnings

    weight = np.full((2, 2), 3e38, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
    initializers = [("W", weight)]
    if bias:
        nodes.append(helper.make_node("Add", ["h", "b"], ["hb"]))
        initializers.append(("b", np.full(2, 3e38, np.float32)))
    nodes.append(helper.make_node("Relu", ["hb" if bias else "h"], ["y"]))
    session = InferenceSession(_model(nodes, [("x", [1, 2])], [("y", [1, 2])], initializers))
    try:
        x = np.array([[1.0, 0.5]], np.float32) if bias else np.array([[1.0, 1.0]], np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (y,) = session.run(None, {"x": x})
    finally:
        session.close()
    np.testing.assert_array_equal(y, [[np.inf, np.inf]])


def test_operators_declare_whether_they_may_warn():
    """``OpDef.silent`` (declared at registration) decides whether a run switches numpy's
    error state: a model of copies and maxima does not, one with a product does."""
    from openacl.ops import REGISTRY

    assert all(REGISTRY[name].silent for name in ("Relu", "InplaceRelu", "Permute", "Cat",
                                                  "Slice", "InplaceCopy", "GatherNd"))
    assert not any(REGISTRY[name].silent for name in ("Add", "Matmul", "Sigmoid", "Exp"))
    quiet = InferenceSession(_model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                                     helper.make_node("Relu", ["t"], ["y"])],
                                    [("x", [2, 3])], [("y", [3, 2])], []))
    loud = InferenceSession(_model([helper.make_node("Exp", ["x"], ["y"])],
                                   [("x", [2, 3])], [("y", [2, 3])], []))
    try:
        assert not quiet.engine._may_warn and loud.engine._may_warn
    finally:
        quiet.close()
        loud.close()


def test_mlp_with_gemm_and_softmax_matches_onnxruntime():
    w1 = (RNG.standard_normal((64, 128)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((10, 128)) * 0.1).astype(np.float32)  # transB
    b1, b2 = np.full(128, 0.1, np.float32), np.zeros(10, np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], alpha=0.5, beta=2.0),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1),
             helper.make_node("Softmax", ["y"], ["p"], axis=-1)]
    model = _model(nodes, [("x", [8, 64])], [("p", [8, 10])],
                   [("W1", w1), ("b1", b1), ("W2", w2), ("b2", b2)])
    _compare(model, {"x": RNG.standard_normal((8, 64)).astype(np.float32)})


def test_reshape_is_a_view_and_binary_ops_broadcast():
    shape = np.array([2, 6], np.int64)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Add", ["r", "b"], ["a"]),
             helper.make_node("Mul", ["a", "r"], ["y"])]
    graph = helper.make_graph(
        nodes, "test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
        [numpy_helper.from_array(shape, "shape"),
         numpy_helper.from_array(np.arange(6, dtype=np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    lowered = lower(import_onnx(model))
    assert lowered.views == {"r": "x"}
    _compare(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})


def test_memory_plan_reuses_dead_values():
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(6)]
    model = _model(nodes, [("v0", [256, 256])], [("v6", [256, 256])])
    lowered = lower(import_onnx(model))
    plan = plan_memory(lowered)
    size = 256 * 256 * 4
    assert plan.arena_bytes == 2 * size  # a chain needs two live buffers at a time
    assert plan.naive_bytes == 7 * size
    _compare(model, {"v0": RNG.standard_normal((256, 256)).astype(np.float32)})


def test_op_without_lowering_runs_on_the_host_and_a_bogus_attribute_is_named():
    model = _model([helper.make_node("Det", ["x"], ["y"])], [("x", [2, 2])], [("y", [])])
    x = RNG.standard_normal((2, 2)).astype(np.float32)
    (ours,) = InferenceSession(model).run(None, {"x": x})
    np.testing.assert_allclose(ours, np.linalg.det(x), rtol=1e-5)
    model = _model([helper.make_node("MatMul", ["x", "x"], ["y"], bogus=1)],
                   [("x", [2, 2])], [("y", [2, 2])])
    with pytest.raises(AclError) as info:
        InferenceSession(model)
    assert info.value.code == ACL_ERROR_PARSE_MODEL and "bogus" in str(info.value)


def test_bad_feeds_and_dynamic_inputs():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])
    session = InferenceSession(model)
    with pytest.raises(AclError) as info:
        session.run(None, {"x": np.ones((3, 2), np.float32)})
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH
    with pytest.raises(AclError):
        session.run(None, {})
    session.close()
    dynamic = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 3])],
                     [("y", ["N", 3])])
    session = InferenceSession(dynamic)  # specialised at each new shape
    assert session.get_inputs()[0].shape == ["N", 3]
    for rows in (1, 5):
        x = RNG.standard_normal((rows, 3)).astype(np.float32)
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))
    with pytest.raises(AclError) as info:
        session.run(None, {"x": np.ones((2, 4), np.float32)})
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH and "['N', 3]" in str(info.value)
    session.close()
    hinted = InferenceSession(dynamic, input_shapes={"x": (4, 3)})  # built at load
    assert hinted.engine is not None and hinted.get_inputs()[0].shape == ["N", 3]
    hinted.close()
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


@pytest.mark.parametrize("shapes, named", [
    ({"x": (4,)}, "'x' the shape [4]"),              # wrong rank: was an IndexError
    ({"x": (4, 3, 2)}, "'x' the shape [4, 3, 2]"),   # extra dims: were silently dropped
    ({"x": (4, -2)}, "'x' the shape [4, -2]"),
    ({"x": (4, 1.5)}, "'x' the shape [4, 1.5]"),
    ({"z": (4, 3)}, "names 'z', which is not a graph input"),  # was silently ignored
])
def test_bad_input_shapes_name_the_input(shapes, named):
    dynamic = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 3])],
                     [("y", ["N", 3])])
    with pytest.raises(AclError) as info:
        InferenceSession(dynamic, input_shapes=shapes)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and named in str(info.value)
    with pytest.raises(AclError) as info:
        import_onnx(dynamic, shapes)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and named in str(info.value)
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_import_leaves_the_callers_model_unchanged():
    dynamic = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 3])],
                     [("y", ["N", 3])])
    assert import_onnx(dynamic, {"x": (4, 3)}).value("x").shape == (4, 3)
    assert dynamic.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_session_outputs_by_name_and_unknown_names():
    model = _model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])],
                   [("x", [2, 3])], [("y", [2, 3]), ("z", [2, 3])])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    session = InferenceSession(model)
    try:
        y, z = session.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x, 0))
        np.testing.assert_array_equal(z, -x)
        (only_z,) = session.run(["z"], {"x": x})
        np.testing.assert_array_equal(only_z, -x)
        swapped = session.run(["z", "y"], {"x": x})
        np.testing.assert_array_equal(swapped[1], y)
        with pytest.raises(AclError) as info:
            session.run(["y", "w"], {"x": x})
        assert info.value.code == ACL_ERROR_MODEL_OUTPUT_NOT_MATCH and "'w'" in str(info.value)
    finally:
        session.close()


def test_weights_are_used_in_place_on_the_cpu_backend(backend):
    """On cpu the engine registers the initializers instead of copying them into device
    memory (an .om's mapping stays one mapping); on a device backend it copies them."""
    weight = RNG.standard_normal((256, 1024)).astype(np.float32)  # 1 MiB
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [1, 256])],
                   [("y", [1, 1024])], [("w", weight)])
    before = openacl.memory_stats()["allocated_bytes.all.current"]
    session = InferenceSession(model)
    try:
        allocated = openacl.memory_stats()["allocated_bytes.all.current"] - before
        assert session.engine.weights_bytes == weight.nbytes
        if backend == "cpu":
            assert allocated < weight.nbytes // 4  # the arena only
        else:
            assert allocated >= weight.nbytes
        x = RNG.standard_normal((1, 256)).astype(np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ weight, rtol=1e-4,
                                   atol=1e-4)
    finally:
        session.close()


def test_a_constant_output_is_read_not_written():
    """An output that folding turned into an initializer (Shape of a static input)."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])],
        "constant_out", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    session = InferenceSession(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]))
    try:
        shape, _ = session.run(None, {"x": np.ones((2, 3), np.float32)})
        np.testing.assert_array_equal(shape, [2, 3])
    finally:
        session.close()


def test_a_failing_kernel_names_its_node_and_operator():
    # a host run turns a kernel's exception into the stream failure code, naming the step
    weight = RNG.standard_normal((4, 4)).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["x", "W"], ["h"], name="product"),
                    helper.make_node("Sigmoid", ["h"], ["y"], name="squash")],
                   [("x", [1, 4])], [("y", [1, 4])], [("W", weight)])
    session = InferenceSession(model)
    try:
        engine = session.engine
        if not engine.runs_here(None):
            pytest.skip("device backends run the steps on a stream, not this host path")
        host = engine._prepare_host()
        index = next(i for i, step in enumerate(engine.lowered.steps) if step.node == "squash")

        def broken() -> None:
            raise ValueError("boom")

        host.kernels[index] = broken
        with pytest.raises(AclError) as caught:
            session.run(None, {"x": np.ones((1, 4), np.float32)})
    finally:
        session.close()
    assert caught.value.code == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "'squash'" in caught.value.message and "aclnnSigmoid" in caught.value.message
    assert "ValueError: boom" in caught.value.message
