"""Model profiling: per-step records, summaries, the Chrome trace, the CLI, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.cli.main import main as cli_main  # noqa: E402
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError  # noqa: E402
from openacl.model.profile import load_feeds, profile_engine, synthetic_feeds  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(0)
WEIGHT = RNG.standard_normal((32, 64)).astype(np.float32)
BIAS = RNG.standard_normal(64).astype(np.float32)


def _model():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
         # Sub, not Add: three steps to profile (MatMul + Add + Relu would fuse into one)
         helper.make_node("Sub", ["h", "b"], ["hb"], name="bias"),
         helper.make_node("Relu", ["hb"], ["y"], name="relu")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
        [numpy_helper.from_array(WEIGHT, "W"), numpy_helper.from_array(BIAS, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _expected(x):
    return np.maximum(x.astype(np.float64) @ WEIGHT - BIAS, 0)


@pytest.fixture
def session(threaded_runtime):
    session = InferenceSession(_model())
    yield session
    session.close()


def test_profile_records_every_step_of_every_run(session):
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    profile = session.profile({"x": x}, runs=3, warmup=2)
    steps = session.engine.lowered.steps
    assert len(profile.records) == 3 * len(steps)
    assert [r.run for r in profile.records] == [run for run in range(3) for _ in steps]
    assert [r.op for r in profile.records[:len(steps)]] == [step.op for step in steps]
    assert {r.node for r in profile.records} == {"matmul", "bias", "relu"}
    assert all(r.end_ns >= r.start_ns for r in profile.records)
    assert len(profile.run_ns) == 3
    # the cpu backend runs the kernels on the calling thread; a device on its default stream
    cpu = openacl.runtime.core.current().backend.name == "cpu"
    assert profile.lane.startswith("host" if cpu else "default stream")
    by_op = profile.summary("op")
    assert {entry.name for entry in by_op} == {step.op for step in steps}
    assert sum(entry.share for entry in by_op) == pytest.approx(1.0)
    assert all(entry.calls == 1 for entry in by_op)
    assert by_op == sorted(by_op, key=lambda entry: entry.total_ns, reverse=True)
    assert {entry.name for entry in profile.summary("node")} == {"matmul", "bias", "relu"}
    # profiling leaves the results right
    np.testing.assert_allclose(session.run(None, {"x": x})[0], _expected(x), rtol=1e-5,
                               atol=1e-5)


def test_profile_memory_is_the_plan(session):
    profile = session.profile(runs=1)
    engine = session.engine
    assert profile.weights_bytes == engine.weights_bytes >= WEIGHT.nbytes + BIAS.nbytes
    assert profile.arena_bytes == engine.plan.arena_bytes > 0
    assert profile.device_bytes == (profile.weights_bytes + profile.arena_bytes
                                    + profile.workspace_bytes)
    assert profile.peak_rss_bytes is None or profile.peak_rss_bytes > 10 << 20
    table = profile.table(top=1)
    assert "aclnn operator" in table and "memory: weights" in table
    assert "more)" in table  # three operators, one shown
    assert table.splitlines()[2].split()[0] == profile.summary()[0].name


def test_chrome_trace_has_one_event_per_step(session, tmp_path):
    profile = session.profile(runs=2)
    path = tmp_path / "trace.json"
    profile.write_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(profile.records)
    assert min(e["ts"] for e in events) == 0
    starts = [e["ts"] for e in events]
    assert starts == sorted(starts)  # one lane, in order
    assert all(e["dur"] >= 0 and e["name"].startswith("aclnn") for e in events)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names == {"device 0", profile.lane}


def test_profile_on_a_stream_times_each_launch(session):
    stream = openacl.rt.create_stream()
    try:
        x = RNG.standard_normal((4, 32)).astype(np.float32)
        profile = profile_engine(session.engine, {"x": x}, runs=2, warmup=0, stream=stream)
        assert profile.lane.startswith("stream 0x")
        assert len(profile.records) == 2 * len(session.engine.lowered.steps)
        outputs = session.engine.run_profiled({"x": x}, lambda *_: None, stream)
        np.testing.assert_allclose(outputs[0], _expected(x), rtol=1e-5, atol=1e-5)
    finally:
        openacl.rt.destroy_stream(stream)


@pytest.mark.parametrize("kwargs, argument", [({"runs": 0}, "runs"), ({"warmup": -1}, "warmup"),
                                              ({"runs": 2.5}, "runs")])
def test_bad_profile_arguments(session, kwargs, argument):
    with pytest.raises(AclError) as info:
        session.profile(**kwargs)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert repr(argument) in str(info.value)


def test_bad_summary_key_and_feeds(session, tmp_path):
    with pytest.raises(AclError) as info:
        session.profile(runs=1).summary("layer")
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "'layer'" in str(info.value)
    for pair in ("x", "nope=a.npy", f"x={tmp_path / 'missing.npy'}"):
        with pytest.raises(AclError) as info:
            load_feeds([pair], session.graph)
        assert info.value.code == ACL_ERROR_INVALID_PARAM and repr(pair) in str(info.value)


def test_synthetic_feeds_match_the_inputs(session):
    feeds = synthetic_feeds(session.graph)
    assert feeds["x"].shape == (4, 32) and feeds["x"].dtype == np.float32


def test_profile_command(tmp_path, capsys):
    source = tmp_path / "tiny.onnx"
    onnx.save(_model(), source)
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    trace = tmp_path / "trace.json"
    assert cli_main(["profile", str(source), "--runs", "2", "--by", "node", "--top", "0",
                     "--input", f"x={tmp_path / 'x.npy'}", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "2 run(s)" in out and "matmul" in out and "relu" in out and "Chrome trace" in out
    assert len([e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]) > 0
    assert not openacl.is_initialized()  # the command finalizes what it started


def test_profile_command_bad_input(tmp_path, capsys):
    source = tmp_path / "tiny.onnx"
    onnx.save(_model(), source)
    assert cli_main(["profile", str(source), "--input", "y=oops.npy"]) == 2
    assert "'y=oops.npy'" in capsys.readouterr().err
    assert cli_main(["profile", str(tmp_path / "absent.om")]) == 2
    assert cli_main(["profile", str(source), "--input-shape", "x:4,"]) == 2
    assert cli_main(["profile", str(source), "--runs", "0"]) == 2
    assert "'runs'" in capsys.readouterr().err
    assert not openacl.is_initialized()


def test_cli_profile_of_a_dynamic_model_names_the_inputs_that_need_shapes(tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "dyn",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    source = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    assert cli_main(["profile", str(source)]) == 2
    err = capsys.readouterr().err
    assert "2 inputs need shapes: a (rank 2: n,4), b (rank 2: ?,4)" in err
    assert cli_main(["profile", str(source), "--input-shape", "a:2,4;b:2,4", "--runs", "1"]) == 0
    assert "inputs: a float32 [2, 4], b float32 [2, 4]" in capsys.readouterr().out
