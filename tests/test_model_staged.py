"""The staged engine: models whose shapes or control flow are known only at run time, each
checked against onnxruntime on small ONNX models built here."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import AclError  # noqa: E402
from openacl.model.staged import StagedModel  # noqa: E402

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = h.make_graph(nodes, "t", inputs, outputs, list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(model, feeds, staged=None):
    staged = staged or StagedModel(model)
    ours = staged.run(feeds)
    theirs = _ort(model, feeds)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return staged


def _mlp():
    w = numpy_helper.from_array(RNG.standard_normal((8, 16)).astype(np.float32), "w")
    return _model([h.make_node("MatMul", ["x", "w"], ["y0"]), h.make_node("Relu", ["y0"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, ["batch", 8])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["batch", 16])], [w])


def test_dynamic_batch_specialises_per_signature_and_caches():
    model = _mlp()
    staged = StagedModel(model, cache_size=2)
    for batch in (1, 3, 1, 5):
        _check(model, {"x": RNG.standard_normal((batch, 8)).astype(np.float32)}, staged)
    assert staged.stages_built == 3  # batch 1 is seen again before 5 evicts batch 3
    assert len(staged._cache) == 2


def test_seen_signature_builds_nothing():
    model = _mlp()
    staged = StagedModel(model)
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    staged.run({"x": x})
    built = staged.stages_built
    for _ in range(3):
        staged.run({"x": x})
    assert staged.stages_built == built == 1


def test_reshape_fed_by_computed_values():
    # y = reshape(x, [n, -1]) where n comes from a computed int (ReduceMax of an int input)
    nodes = [h.make_node("ReduceMax", ["k"], ["kmax"], keepdims=1),
             h.make_node("Concat", ["kmax", "minus1"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["y"])]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [12]),
                           h.make_tensor_value_info("k", T.INT64, [2])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)],
                   [numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
    staged = StagedModel(model)
    x = np.arange(12, dtype=np.float32)
    _check(model, {"x": x, "k": np.array([2, 3], np.int64)}, staged)
    _check(model, {"x": x, "k": np.array([4, 1], np.int64)}, staged)


def _if_model():
    then = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)],
                        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e0"]),
                          h.make_node("Concat", ["e0", "e0"], ["e"], axis=0)], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             h.make_node("Relu", ["y"], ["z"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["n"])],
                  [h.make_tensor_value_info("z", T.FLOAT, None)],
                  [numpy_helper.from_array(np.array(0, np.float32), "zero")])


def test_if_on_a_computed_condition_takes_both_branches():
    model = _if_model()
    staged = StagedModel(model)
    _check(model, {"x": np.array([1, 2, -0.5], np.float32)}, staged)  # then: shape [3]
    _check(model, {"x": np.array([-1, -2, 0.5], np.float32)}, staged)  # else: shape [6]
    built = staged.stages_built
    _check(model, {"x": np.array([3, 4, 5], np.float32)}, staged)
    assert staged.stages_built == built  # both branches cached


def _pass_through_if_model():
    """y = x if sum(x) > 0 else -x, at a static shape: the then branch only passes x on."""
    then = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)],
                  [numpy_helper.from_array(np.array(0, np.float32), "zero")])


def test_a_branch_that_passes_a_value_on_is_a_copy_not_an_engine():
    model = _pass_through_if_model()
    staged = StagedModel(model)
    x = np.array([1, 2, -0.5], np.float32)
    _check(model, {"x": x}, staged)
    _check(model, {"x": -x}, staged)
    root = next(iter(staged._cache.values()))
    kinds = {child.engine is None and bool(child.renames) for child in root.children.values()}
    assert kinds == {True, False}  # the Identity branch copies; the Neg branch is an engine
    first = staged.run({"x": x})[0]
    assert not np.shares_memory(first, x)  # the feed passed on is copied
    first[:] = 99  # the caller owns what a run returns
    np.testing.assert_array_equal(staged.run({"x": x})[0], x)
    np.testing.assert_array_equal(x, [1, 2, -0.5])


def test_a_seen_signature_still_takes_any_layout_and_checks_the_rest():
    model = _pass_through_if_model()
    staged = StagedModel(model)
    x = np.array([1, 2, -0.5], np.float32)
    staged.run({"x": x})
    strided = np.array([1, 0, 2, 0, -0.5, 0], np.float32)[::2]  # not C-contiguous
    _check(model, {"x": strided}, staged)
    with pytest.raises(AclError, match="input 'x' must be float32; got float64"):
        staged.run({"x": x.astype(np.float64)})
    with pytest.raises(AclError, match="input 'x' has shape \\[4\\]"):
        staged.run({"x": np.ones(4, np.float32)})
    with pytest.raises(AclError, match="input 'x' is missing"):
        staged.run({})


def test_if_condition_of_the_wrong_dtype_is_a_clear_error():
    then = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)])
    model = _model([h.make_node("ReduceSum", ["x"], ["c"], keepdims=0),
                    h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=then)],
                   [h.make_tensor_value_info("x", T.FLOAT, [3])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(AclError, match="condition 'c' must be one bool element; it is float32"):
        StagedModel(model).run({"x": np.ones(3, np.float32)})


def _loop_model(trip_input=True, cond=True):
    body = h.make_graph(
        [h.make_node("Add", ["acc", "step"], ["acc2"]),
         h.make_node("Mul", ["acc2", "acc2"], ["sq"]),
         h.make_node("ReduceSum", ["acc2"], ["total"], keepdims=0),
         h.make_node("Less", ["total", "limit"], ["c2"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("acc", T.FLOAT, None)],
        [h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("acc2", T.FLOAT, None),
         h.make_tensor_value_info("sq", T.FLOAT, None)])
    inputs = ["m" if trip_input else "", "cond" if cond else "", "x"]
    node = h.make_node("Loop", inputs, ["final", "squares"], body=body)
    graph_inputs = [h.make_tensor_value_info("x", T.FLOAT, ["n"]),
                    h.make_tensor_value_info("step", T.FLOAT, ["n"])]
    if trip_input:
        graph_inputs.append(h.make_tensor_value_info("m", T.INT64, []))
    if cond:
        graph_inputs.append(h.make_tensor_value_info("cond", T.BOOL, []))
    return _model([node], graph_inputs,
                  [h.make_tensor_value_info("final", T.FLOAT, None),
                   h.make_tensor_value_info("squares", T.FLOAT, None)],
                  [numpy_helper.from_array(np.array(20, np.float32), "limit")])


@pytest.mark.parametrize("trip", [0, 1, 4, 50])
def test_loop_with_trip_count_condition_and_scan_outputs(trip):
    model = _loop_model()
    feeds = {"x": np.array([0.5, 1.0], np.float32), "step": np.array([1.0, 0.5], np.float32),
             "m": np.array(trip, np.int64), "cond": np.array(True)}
    if trip == 0:
        final, = StagedModel(model).run(feeds)[:1]
        np.testing.assert_array_equal(final, feeds["x"])
        return
    _check(model, feeds)


def test_loop_without_condition_input():
    model = _loop_model(cond=False)
    feeds = {"x": np.array([0.5, 1.0], np.float32), "step": np.array([1.0, 0.5], np.float32),
             "m": np.array(3, np.int64)}
    _check(model, feeds)


def test_loop_negative_trip_count_is_a_clear_error():
    model = _loop_model()
    feeds = {"x": np.array([0.5], np.float32), "step": np.array([1.0], np.float32),
             "m": np.array(-2, np.int64), "cond": np.array(True)}
    with pytest.raises(AclError, match="trip count 'm' is -2"):
        StagedModel(model).run(feeds)


def test_scan_cumulative_sum_both_directions():
    body = h.make_graph([h.make_node("Add", ["state", "xi"], ["state2"]),
                         h.make_node("Identity", ["state2"], ["out"])], "body",
                        [h.make_tensor_value_info("state", T.FLOAT, [2]),
                         h.make_tensor_value_info("xi", T.FLOAT, [2])],
                        [h.make_tensor_value_info("state2", T.FLOAT, [2]),
                         h.make_tensor_value_info("out", T.FLOAT, [2])])
    for direction in (0, 1):
        node = h.make_node("Scan", ["s0", "xs"], ["final", "outs"], body=body, num_scan_inputs=1,
                           scan_input_directions=[direction], scan_output_directions=[direction])
        model = _model([node], [h.make_tensor_value_info("s0", T.FLOAT, [2]),
                                h.make_tensor_value_info("xs", T.FLOAT, ["t", 2])],
                       [h.make_tensor_value_info("final", T.FLOAT, None),
                        h.make_tensor_value_info("outs", T.FLOAT, None)])
        _check(model, {"s0": np.zeros(2, np.float32),
                       "xs": RNG.standard_normal((5, 2)).astype(np.float32)})


def test_nonzero_then_compiled_ops():
    nodes = [h.make_node("Greater", ["x", "zero"], ["mask"]),
             h.make_node("NonZero", ["mask"], ["idx"]),
             h.make_node("Transpose", ["idx"], ["idx_t"]),
             h.make_node("GatherND", ["x", "idx_t"], ["vals"]),
             h.make_node("Mul", ["vals", "vals"], ["y"])]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 5])],
                   [h.make_tensor_value_info("y", T.FLOAT, None),
                    h.make_tensor_value_info("idx", T.INT64, None)],
                   [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    staged = StagedModel(model)
    for _ in range(2):
        _check(model, {"x": RNG.standard_normal((4, 5)).astype(np.float32)}, staged)


def test_topk_with_a_run_time_k():
    model = _model([h.make_node("TopK", ["x", "k"], ["v", "i"])],
                   [h.make_tensor_value_info("x", T.FLOAT, [3, 10]),
                    h.make_tensor_value_info("k", T.INT64, [1])],
                   [h.make_tensor_value_info("v", T.FLOAT, None),
                    h.make_tensor_value_info("i", T.INT64, None)])
    staged = StagedModel(model)
    x = RNG.standard_normal((3, 10)).astype(np.float32)
    for k in (2, 5):
        _check(model, {"x": x, "k": np.array([k], np.int64)}, staged)


def test_bad_feeds_name_the_input():
    staged = StagedModel(_mlp())
    with pytest.raises(AclError, match="input 'x' has shape \\[2, 3\\]; the model takes "
                                       "\\['batch', 8\\]"):
        staged.run({"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(AclError, match="input 'x' must be float32; got float64"):
        staged.run({"x": np.zeros((2, 8))})
    with pytest.raises(AclError, match="input 'x' is missing"):
        staged.run({})
    with pytest.raises(AclError, match="are not inputs of the model"):
        staged.run({"x": np.zeros((2, 8), np.float32), "y": np.zeros(1)})
    with pytest.raises(AclError, match="cache_size"):
        StagedModel(_mlp(), cache_size=0)


def test_declared_minus_one_dim_is_dynamic():
    model = _model([h.make_node("Reshape", ["x", "shape"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, [-1, 4])],
                   [h.make_tensor_value_info("y", T.FLOAT, [-1, 2])],
                   [numpy_helper.from_array(np.array([-1, 2], np.int64), "shape")])
    _check(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})


def test_declared_output_shape_that_contradicts_the_computed_one():
    model = _model([h.make_node("Relu", ["x"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                   [h.make_tensor_value_info("y", T.FLOAT, [7, 9])])
    _check(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})


def test_opset_9_model_is_upgraded():
    model = _model([h.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
                   [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 2])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)],
                   [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")],
                   opset=9)
    staged = StagedModel(model)
    assert staged.source_opset == 9
    _check(model, {"x": RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)}, staged)


def test_inference_session_without_shapes_runs_a_dynamic_model(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp(), path)
    session = openacl.InferenceSession(str(path))
    assert session.get_inputs()[0].shape == ["batch", 8]
    for batch in (1, 4):
        x = RNG.standard_normal((batch, 8)).astype(np.float32)
        (ours,) = session.run(None, {"x": x})
        (theirs,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_a_lowering_that_needs_a_constant_input_gets_the_computed_value():
    # CumSum's axis and Pad's pads given as graph inputs: the lowerings need constants, so
    # the nodes move to a stage keyed by those values
    model = _model([h.make_node("CumSum", ["x", "axis"], ["c"]),
                    h.make_node("Pad", ["c", "pads"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, [3, 4]),
                    h.make_tensor_value_info("axis", T.INT64, []),
                    h.make_tensor_value_info("pads", T.INT64, [4])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)])
    staged = StagedModel(model)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for axis, pads in ((0, [0, 1, 1, 0]), (1, [1, 0, 0, 2])):
        _check(model, {"x": x, "axis": np.array(axis, np.int64),
                       "pads": np.array(pads, np.int64)}, staged)


def test_converter_report_says_an_opset_was_upgraded(tmp_path):
    from openacl.model.converter import convert_onnx, format_report

    model = _model([h.make_node("Relu", ["x"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)], opset=9)
    onnx.save(model, tmp_path / "old.onnx")
    report = convert_onnx(tmp_path / "old.onnx", tmp_path / "old.om")
    assert (report.source_opset, report.opset) == (9, 11)
    assert "ONNX opset 9 upgraded to 11 by onnx.version_converter" in format_report(report)


def test_a_run_time_shape_beyond_the_memory_limit_is_a_clean_error():
    openacl.finalize()  # the fixture's runtime, replaced by one with a small limit
    openacl.init({"memory_limit": 4 << 20})
    openacl.rt.set_device(0)
    staged = StagedModel(_mlp())
    staged.run({"x": np.ones((2, 8), np.float32)})
    with pytest.raises(AclError) as info:  # 2M rows: an arena of 192 MB > 4 MiB
        staged.run({"x": np.ones((1 << 21, 8), np.float32)})
    assert info.value.code == 207001, info.value  # ACL_ERROR_RT_MEMORY_ALLOCATION
    staged.run({"x": np.ones((3, 8), np.float32)})  # the model still runs
    staged.close()


def test_weight_only_subgraphs_fold_once_and_are_shared_by_every_specialisation():
    weight = (RNG.standard_normal((16, 300)) * 0.1).astype(np.float32)  # big: a shared weight
    model = _model([h.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
                    h.make_node("MatMul", ["x", "wt"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, ["n", 300])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["n", 16])],
                   [numpy_helper.from_array(weight, "w")])
    staged = StagedModel(model)
    assert list(staged.weights) == ["wt"]  # folded at load; the original is gone
    folded = staged.weights["wt"]
    for rows in (1, 3):
        _check(model, {"x": RNG.standard_normal((rows, 300)).astype(np.float32)}, staged)
    from openacl.runtime import core

    if core.current().backend.name == "cpu":  # a device backend copies weights to the device
        for stage in staged._cache.values():
            arrays = stage.engine.lowered.graph.initializers.values()
            assert any(a is folded or a.base is folded for a in arrays)


def test_the_callers_model_is_never_changed():
    model = _model([h.make_node("Constant", [], ["two"], value_float=2.0),
                    h.make_node("Mul", ["x", "two"], ["y"])],
                   [h.make_tensor_value_info("x", T.FLOAT, ["n"])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)])
    before = model.SerializeToString()
    _check(model, {"x": np.arange(3, dtype=np.float32)})
    assert model.SerializeToString() == before


def _body_model(staged):
    """The StagedModel of the first Loop's body in ``staged``'s (single) root stage."""
    stage, = staged._cache.values()
    loop, = [host for host in stage.host_nodes if type(host).__name__ == "LoopNode"]
    return loop.body._model


def test_a_loop_counter_used_as_a_slice_bound_stops_keying_stages():
    """Slice(table, i, i + 1) in a Loop body: the counter keys a few stages, then becomes
    volatile and the Slice runs on the host; the body compiles a bounded number of stages
    however many iterations run."""
    from openacl.model.staged import VOLATILE_AFTER

    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    body = h.make_graph(
        [h.make_node("Unsqueeze", ["i", "zero"], ["start"]),
         h.make_node("Add", ["start", "one"], ["end"]),
         h.make_node("Slice", ["table", "start", "end", "zero"], ["row"]),
         h.make_node("Add", ["acc", "row"], ["acc2"]),
         h.make_node("Identity", ["c"], ["c2"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("acc", T.FLOAT, [1, 4])],
        [h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("acc2", T.FLOAT, [1, 4]),
         h.make_tensor_value_info("row", T.FLOAT, [1, 4])], [one, zero])
    model = _model([h.make_node("Loop", ["m", "", "acc0"], ["total", "rows"], body=body)],
                   [h.make_tensor_value_info("table", T.FLOAT, [30, 4]),
                    h.make_tensor_value_info("acc0", T.FLOAT, [1, 4]),
                    h.make_tensor_value_info("m", T.INT64, [])],
                   [h.make_tensor_value_info("total", T.FLOAT, None),
                    h.make_tensor_value_info("rows", T.FLOAT, None)])
    feeds = {"table": RNG.standard_normal((30, 4)).astype(np.float32),
             "acc0": np.zeros((1, 4), np.float32), "m": np.array(30, np.int64)}
    staged = _check(model, feeds)
    inner = _body_model(staged)
    assert "i" in inner.volatile or "start" in inner.volatile
    built = inner.stages_built
    assert built <= VOLATILE_AFTER + 4, built  # 30 iterations, not 30 stages
    _check(model, feeds, staged)  # a second run builds nothing more
    assert inner.stages_built == built


def test_a_weight_the_loop_carries_unchanged_is_folded_once():
    """A carried value the body hands back as it is, first fed from an initializer, is a
    weight of the body: its Transpose folds at load and runs in no iteration."""
    w = numpy_helper.from_array(RNG.standard_normal((4, 4)).astype(np.float32), "w")
    body = h.make_graph(
        [h.make_node("Transpose", ["wc"], ["wt"], perm=[1, 0]),
         h.make_node("MatMul", ["acc", "wt"], ["acc2"]),
         h.make_node("Identity", ["c"], ["c2"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("wc", T.FLOAT, [4, 4]),
         h.make_tensor_value_info("acc", T.FLOAT, [1, 4])],
        [h.make_tensor_value_info("c2", T.BOOL, []),
         h.make_tensor_value_info("wc", T.FLOAT, [4, 4]),
         h.make_tensor_value_info("acc2", T.FLOAT, [1, 4])])
    model = _model([h.make_node("Loop", ["m", "", "w", "x"], ["w_out", "y"], body=body)],
                   [h.make_tensor_value_info("x", T.FLOAT, [1, 4]),
                    h.make_tensor_value_info("m", T.INT64, [])],
                   [h.make_tensor_value_info("w_out", T.FLOAT, None),
                    h.make_tensor_value_info("y", T.FLOAT, None)], [w])
    feeds = {"x": RNG.standard_normal((1, 4)).astype(np.float32), "m": np.array(3, np.int64)}
    staged = _check(model, feeds)
    inner = _body_model(staged)
    assert "wc" not in inner.input_names
    ops = [step.op for stage in inner._cache.values() if stage.engine is not None
           for step in stage.engine.lowered.steps]
    assert ops and "Permute" not in ops, ops


def test_a_seen_whole_model_signature_runs_its_engine_and_eviction_forgets_it():
    """A dynamic-batch model whose specialisation is one engine: a seen batch goes straight
    to that engine; one evicted from the cache is built again, never run closed."""
    model = _mlp()
    staged = StagedModel(model, cache_size=1)
    for batch in (1, 2, 1, 1):
        _check(model, {"x": RNG.standard_normal((batch, 8)).astype(np.float32)}, staged)
    assert staged.stages_built == 3  # 1, 2, then 1 again (evicted by 2); the last is seen
    assert len(staged._singles) == 1
    with pytest.raises(AclError) as info:  # the fast path still checks what it is given
        staged.run({"x": np.zeros((1, 8), np.float64)})
    assert "'x'" in info.value.message


SLICES = [  # data shape, starts, ends, axes, steps
    ((5, 6), [1], [4], None, None),
    ((5, 6), [-3, 0], [100, -1], [1, 0], None),
    ((5, 6), [4], [-100], [0], [-2]),
    ((5, 6), [2, 5], [2, 0], [-1, 0], [1, -1]),
    ((4,), [0], [np.iinfo(np.int64).max], [0], [3]),
    ((3, 4), [5], [9], [1], None),  # past the end: empty
]


@pytest.mark.parametrize("shape, starts, ends, axes, steps", SLICES)
def test_host_slice_computes_what_the_evaluator_does(shape, starts, ends, axes, steps):
    from onnx.reference import ReferenceEvaluator

    from openacl.model.host_nodes import FAST_HOST_OPS

    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    bounds = [np.array(b, np.int64) for b in (starts, ends, axes, steps) if b is not None]
    names = ["data", "starts", "ends", *(["axes"] if axes is not None else []),
             *(["steps"] if steps is not None else [])]
    node = h.make_node("Slice", names, ["y"])
    model = _model([node], [h.make_tensor_value_info(n, T.FLOAT if n == "data" else T.INT64,
                                                     None) for n in names],
                   [h.make_tensor_value_info("y", T.FLOAT, None)])
    feeds = dict(zip(names, [data, *bounds], strict=True))
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    got = FAST_HOST_OPS["Slice"](data, *bounds)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (0, 5, 1, np.int64), (10, 2, -3, np.int64), (3, 3, 1, np.int32), (-4, 7, 5, np.int32)])
def test_host_range_computes_what_the_evaluator_does(start, limit, delta, dtype):
    from onnx.reference import ReferenceEvaluator

    from openacl.model.host_nodes import FAST_HOST_OPS

    values = [np.array(x, dtype) for x in (start, limit, delta)]
    kind = T.INT64 if dtype == np.int64 else T.INT32
    model = _model([h.make_node("Range", ["s", "l", "d"], ["y"])],
                   [h.make_tensor_value_info(n, kind, []) for n in ("s", "l", "d")],
                   [h.make_tensor_value_info("y", kind, None)], opset=17)
    feeds = dict(zip(("s", "l", "d"), values, strict=True))
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    got = FAST_HOST_OPS["Range"](*values)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert FAST_HOST_OPS["Range"](*values[:2], np.array(0, dtype)) is None  # the evaluator's


def test_host_slice_leaves_odd_bounds_to_the_evaluator():
    from openacl.model.host_nodes import FAST_HOST_OPS

    data = np.zeros((3, 4), np.float32)
    one = np.array([1], np.int64)
    assert FAST_HOST_OPS["Slice"](data, one, one, one, np.array([0], np.int64)) is None
    assert FAST_HOST_OPS["Slice"](data, one, one, np.array([5], np.int64)) is None
    assert FAST_HOST_OPS["Slice"](data, np.array([0.5]), one) is None
