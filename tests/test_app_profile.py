"""Application profiling: ``openacl profile -- PROGRAM``, the runtime's profiler, acl.json's
profiler section, the records, the tables and the Chrome trace; the model form's additions."""

from __future__ import annotations

import glob
import json
import logging
import os
import sys
import textwrap

import numpy as np
import pytest

import openacl
from openacl.cli.main import main as cli_main
from openacl.cli.profile import chrome_trace, load_report, summary
from openacl.errors import AclError
from openacl.runtime import profiler

N = 1024  # float32 elements per buffer
NBYTES = N * 4
ADDS = 3
KERNEL_LAUNCHES = 2
BLOCK_DIM = 4

APP = f"""
import sys
import numpy as np
import openacl
from openacl import rt
from openacl.custom.kernel_launch import global_buffer, kernel

@kernel
def double(x, n):
    view = global_buffer(x, np.float32, n)
    view *= 2

openacl.init()
rt.set_device(0)
stream = rt.create_stream()
host = rt.malloc_host({NBYTES})
x, y, z = (openacl.empty(({N},), np.float32) for _ in range(3))
rt.memcpy_async(x.data_ptr, {NBYTES}, host, {NBYTES}, 1, stream)
rt.memcpy_async(y.data_ptr, {NBYTES}, host, {NBYTES}, 1, stream)
alpha = openacl.create_scalar(1.0, openacl.ACL_FLOAT)
for _ in range({ADDS}):
    size, executor = openacl.aclnn.add_get_workspace_size(x, y, alpha, z)
    openacl.aclnn.add(0, size, executor, stream)
for _ in range({KERNEL_LAUNCHES}):
    double[{BLOCK_DIM}, stream](z.data_ptr, {N})
rt.memcpy_async(host, {NBYTES}, z.data_ptr, {NBYTES}, 2, stream)
rt.synchronize_stream(stream)
status = int(sys.argv[1]) if len(sys.argv) > 1 else 0
if status:
    sys.exit(status)  # fails before finalize: the atexit handler writes the records
for tensor in (x, y, z):
    tensor.free()
rt.free_host(host)
rt.destroy_stream(stream)
rt.reset_device(0)
openacl.finalize()
"""

PYACL_APP = """
import json, os, sys
import numpy as np
import acl

model_dir = sys.argv[1]
with open(os.path.join(model_dir, "add_op.json"), "w") as f:
    json.dump([{"op": "Add",
                "input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"},
                               {"format": "ND", "shape": [8, 16], "type": "float16"}],
                "output_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}]}], f)
assert acl.init() == 0 and acl.rt.set_device(0) == 0
stream, ret = acl.rt.create_stream()
assert acl.op.set_model_dir(model_dir) == 0
x = np.ones((8, 16), np.float16)
buffers = []
for _ in range(3):
    ptr, ret = acl.rt.malloc(x.nbytes, 0)
    assert acl.rt.memcpy(ptr, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, 1) == 0
    buffers.append(acl.create_data_buffer(ptr, x.nbytes))
desc = acl.create_tensor_desc(1, [8, 16], 2)
attr = acl.op.create_attr()
assert acl.op.execute_v2("Add", [desc, desc], buffers[:2], [desc], buffers[2:], attr,
                         stream) == 0
assert acl.rt.synchronize_stream(stream) == 0
assert acl.rt.reset_device(0) == 0
assert acl.finalize() == 0
"""


def _script(tmp_path, text: str, name: str = "app.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _prof_dir(output) -> str:
    found = glob.glob(os.path.join(str(output), "PROF_*"))
    assert len(found) == 1, found
    return found[0]


def _row(text: str, *words: str) -> list[str]:
    """The fields of the one line of ``text`` that holds every word of ``words``."""
    lines = [line.split() for line in text.splitlines() if all(w in line.split() for w in words)]
    assert len(lines) == 1, (words, text)
    return lines[0]


@pytest.fixture(autouse=True)
def _no_runtime_left():
    yield
    if openacl.is_initialized():
        openacl.finalize()
    assert not profiler.active


# -- the application form ----------------------------------------------------------------------
def test_profile_program_tables_records_and_trace(tmp_path, capsys):
    script = _script(tmp_path, APP)
    trace = tmp_path / "trace.json"
    assert cli_main(["profile", "--output", str(tmp_path / "out"), "--trace", str(trace),
                     "--", sys.executable, script]) == 0
    text = capsys.readouterr().out
    directory = _prof_dir(tmp_path / "out")
    assert os.path.isfile(os.path.join(directory, "summary.txt"))
    report = load_report(directory)
    assert len(report.runs) == 1
    run = report.runs[0]
    tasks = run["tasks"]
    adds = [t for t in tasks if t[:2] == ["aclnn", "aclnnAdd"]]
    kernels = [t for t in tasks if t[:2] == ["kernel", "double"]]
    assert len(adds) == ADDS and len(kernels) == KERNEL_LAUNCHES
    assert all(t[7] == {"block_dim": BLOCK_DIM} and t[8] for t in kernels)
    stream_copies = [t for t in tasks if t[0] == "memcpy" and t[2] is not None]
    assert sorted((t[1], t[6]) for t in stream_copies) == [("D2H", NBYTES), ("H2D", NBYTES),
                                                          ("H2D", NBYTES)]
    assert all(t[4] <= t[5] for t in tasks)
    assert len({t[2] for t in adds + kernels + stream_copies}) == 1  # all on one stream
    api = [call[0] for call in run["api"]]
    assert api.count("aclnnAddGetWorkspaceSize") == ADDS and api.count("aclnnAdd") == ADDS
    assert api.count("aclrtMemcpyAsync") == 3 and "aclrtSynchronizeStream" in api
    # the tables
    assert _row(text, "aclnn", "aclnnAdd")[2] == str(ADDS)
    assert _row(text, "kernel", "double")[2] == str(KERNEL_LAUNCHES)
    assert _row(text, "memcpy", "H2D")[2:4][1] == str(2 * NBYTES)
    assert _row(text, "memcpy", "D2H")[2:4] == ["1", str(NBYTES)]
    stream_row = [line for line in text.splitlines() if "stream 0x" in line]
    assert len(stream_row) == 1 and stream_row[0].split()[-3] == str(
        ADDS + KERNEL_LAUNCHES + 3)
    assert _row(text, "aclnnAddGetWorkspaceSize")[1] == str(ADDS)
    # the trace
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert all({"ts", "dur", "pid", "tid", "name"} <= set(e) and e["dur"] >= 0
               for e in complete)
    lanes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(name.startswith("device 0 stream") for name in lanes)
    assert "thread MainThread" in lanes
    assert sum(e["name"] == "aclnnAdd" and e["cat"] == "aclnn" for e in complete) == ADDS


def test_failing_program_status_passes_through_with_what_it_recorded(tmp_path, capsys):
    script = _script(tmp_path, APP)
    status = cli_main(["profile", "--output", str(tmp_path / "out"), "--", script, "3"])
    assert status == 3
    captured = capsys.readouterr()
    assert "exited with status 3" in captured.err
    assert _row(captured.out, "aclnn", "aclnnAdd")[2] == str(ADDS)  # atexit wrote them


def test_pyacl_program_under_openacl_compat(tmp_path, capsys):
    script = _script(tmp_path, PYACL_APP)
    models = tmp_path / "models"
    models.mkdir()
    assert cli_main(["profile", "--output", str(tmp_path / "out"), "--", sys.executable, "-m",
                     "openacl.compat", script, str(models)]) == 0
    text = capsys.readouterr().out
    assert _row(text, "aclrtMalloc")[1] == "3"
    assert _row(text, "aclopExecuteV2")[1] == "1"
    assert _row(text, "aclop", "Add")[2] == "1"  # the aclop execution as a range
    assert _row(text, "memcpy", "H2D")[2] == "3"  # synchronous copies, timed on the host
    run = load_report(_prof_dir(tmp_path / "out")).runs[0]
    assert [span[:2] for span in run["ranges"]] == [["aclop", "Add"]]


@pytest.mark.parametrize("argv", [["profile", "--"], ["profile"]])
def test_missing_program_is_exit_2(argv, capsys):
    assert cli_main(argv) == 2
    assert "openacl profile:" in capsys.readouterr().err


def test_unusable_output_is_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli_main(["profile", "--output", str(blocker), "--", "app.py"]) == 2
    assert "argument '--output'" in capsys.readouterr().err


def test_unstartable_program_is_exit_2(tmp_path, capsys):
    assert cli_main(["profile", "--output", str(tmp_path), "--",
                     str(tmp_path / "no-such-program")]) == 2
    assert "cannot run" in capsys.readouterr().err


def test_program_that_never_inits_reports_no_records(tmp_path, capsys):
    script = _script(tmp_path, "print('hello')\n")
    assert cli_main(["profile", "--output", str(tmp_path / "out"), "--", script]) == 0
    captured = capsys.readouterr()
    assert "hello" not in captured.err and "no records" in captured.err


# -- the runtime's profiler in this process ----------------------------------------------------
def test_profiler_off_records_nothing_and_wraps_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(profiler.ENV_VAR, raising=False)
    original = openacl.rt.memcpy_async

    def refuse(*_):
        raise AssertionError("the profiler was called while off")

    monkeypatch.setattr(profiler, "wrap", refuse)
    monkeypatch.setattr(profiler, "label", refuse)
    openacl.init()
    openacl.rt.set_device(0)
    assert not profiler.active and openacl.rt.memcpy_async is original
    x = openacl.to_device(np.ones(N, np.float32))
    y = openacl.ops.add(x, x)
    assert y.numpy()[0] == 2
    x.free()
    y.free()
    openacl.finalize()
    assert os.listdir(tmp_path) == []


def test_init_config_profile_key_and_api_restored(tmp_path):
    original = openacl.rt.malloc
    openacl.init({"profile": str(tmp_path)})
    assert profiler.active and openacl.rt.malloc is not original
    openacl.rt.set_device(0)
    pointer = openacl.rt.malloc(NBYTES)
    openacl.rt.memset_async(pointer, NBYTES, 0, NBYTES, 0)
    openacl.rt.synchronize_device()
    openacl.rt.free(pointer)
    openacl.finalize()
    assert not profiler.active and openacl.rt.malloc is original
    (file,) = glob.glob(str(tmp_path / "records-*.json"))
    run = json.loads(open(file).read())
    assert [t[:2] + t[6:7] for t in run["tasks"]] == [["memset", "device", NBYTES]]
    assert [call[0] for call in run["api"]].count("aclrtMalloc") == 1


def test_acl_json_profiler_section(tmp_path, caplog, capsys):
    config = tmp_path / "acl.json"
    output = tmp_path / "prof"
    config.write_text(json.dumps({"profiler": {
        "switch": "on", "output": str(output), "aicpu": "on",
        "aic_metrics": "PipeUtilization", "task_time": "on"}}))
    with caplog.at_level(logging.WARNING, logger="openacl"):
        openacl.init(str(config))
    notes = [r.getMessage() for r in caplog.records if "profiler keys ignored" in
             r.getMessage()]
    assert len(notes) == 1 and "aicpu, aic_metrics" in notes[0] and "task_time" not in notes[0]
    assert profiler.active
    openacl.rt.set_device(0)
    x = openacl.to_device(np.ones(N, np.float32))
    x.free()
    openacl.finalize()
    directory = _prof_dir(output)
    assert cli_main(["profile", "--report", directory]) == 0
    assert _row(capsys.readouterr().out, "memcpy", "H2D")[2:4] == ["1", str(NBYTES)]
    assert os.path.isfile(os.path.join(directory, "trace.json"))


@pytest.mark.parametrize("section", [{"switch": "off", "output": "x"}, {"output": "x"}])
def test_acl_json_profiler_switched_off(tmp_path, monkeypatch, section):
    monkeypatch.chdir(tmp_path)
    openacl.init({"profiler": section})
    assert not profiler.active
    openacl.finalize()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("section", [{"switch": "yes"}, "on", {"switch": "on", "output": 3}])
def test_bad_profiler_section_names_the_key(section):
    with pytest.raises(AclError, match="profiler"):
        openacl.init({"profiler": section})
    assert not openacl.is_initialized()


def test_unwritable_profile_directory_fails_init(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AclError, match="profile directory"):
        openacl.init({"profile": str(blocker / "sub")})
    assert not openacl.is_initialized() and not profiler.active


def test_host_func_and_chrome_trace_lanes(tmp_path):
    openacl.init({"profile": str(tmp_path), "stream_mode": "inline"})
    openacl.rt.set_device(0)

    def tick() -> None:
        pass

    openacl.rt.launch_host_func(0, tick)
    openacl.rt.synchronize_device()
    openacl.finalize()
    report = load_report(tmp_path)
    assert [t[:2] for t in report.runs[0]["tasks"]] == [["host_func", _qualname(tick)]]
    assert _row(summary(report), "host_func")[2] == "1"
    events = chrome_trace(report)["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "X" and e["cat"] == "host_func"] == [
        _qualname(tick)]


def _qualname(fn) -> str:
    return fn.__qualname__


def test_records_file_of_another_format_is_refused(tmp_path, capsys):
    (tmp_path / "records-1-1.json").write_text(json.dumps({"version": 99}))
    assert cli_main(["profile", "--report", str(tmp_path)]) == 2
    assert "version" in capsys.readouterr().err


# -- the model form ----------------------------------------------------------------------------
def _dynamic_batch_model(tmp_path) -> str:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from openacl.model.converter import convert_onnx

    weight = np.ones((8, 4), np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(weight, "w")])
    source = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), source)
    path = tmp_path / "dyn.om"
    convert_onnx(source, path, dynamic_batch=[1, 2, 4])
    return str(path)


def test_profile_model_prints_inputs_and_gear(tmp_path, capsys):
    model = _dynamic_batch_model(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((2, 8), np.float32))
    assert cli_main(["profile", model, "--runs", "2", "--input",
                     f"x={tmp_path / 'x.npy'}"]) == 0
    text = capsys.readouterr().out
    assert "inputs: x float32 [2, 8]" in text
    assert "gear: batch 2 (the model's batch sizes: [1, 2, 4]" in text
    assert "2 run(s)" in text
    assert cli_main(["profile", model, "--runs", "1", "--input-shape", "x:1,8"]) == 0
    assert "gear: batch 1 (" in capsys.readouterr().out  # the shape picks the gear


def _staged_model(tmp_path, dims) -> str:
    """y = Loop(3 times: v = v * 2) of relu(x): a Loop runs on the host between stages."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["v_in", "two"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Loop", ["trips", "keep", "r"], ["y"], body=body, name="loop")],
        "staged", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(3, np.int64), "trips"),
         numpy_helper.from_array(np.array(True), "keep")])
    path = tmp_path / "staged.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_profile_a_model_that_runs_in_stages(tmp_path, capsys):
    """Every stage engine's steps and the host node between them, for the session's
    profile() and the command alike; a dynamic input without a shape is named."""
    from openacl.model.session import InferenceSession

    model = _staged_model(tmp_path, [4])
    with InferenceSession(model) as session:
        assert session.staged is not None and session.graph is None
        profile = session.profile(runs=2, warmup=1)
        ops = [record.op for record in profile.records if record.run == 0]
        assert ops == ["Relu", "Loop (host)"]
        assert [record.step for record in profile.records if record.run == 1] == [0, 1]
        assert "Loop (host)" in profile.table()
        names = {event["name"] for event in profile.chrome_trace()["traceEvents"]
                 if event["ph"] == "X"}
        assert names == {"aclnnRelu", "Loop (host)"}
    assert cli_main(["profile", model, "--runs", "2"]) == 0
    text = capsys.readouterr().out
    assert "inputs: x float32 [4]" in text and "Loop (host)" in text and "2 run(s)" in text
    dynamic = _staged_model(tmp_path, ["n"])
    assert cli_main(["profile", dynamic, "--runs", "1"]) == 2
    assert "1 input needs a shape: x (rank 1: n); give them with input_shapes / " \
           "--input-shape \"x:N\"" in capsys.readouterr().err
    assert cli_main(["profile", dynamic, "--runs", "1", "--input-shape", "x:5"]) == 0
    assert "inputs: x float32 [5]" in capsys.readouterr().out


def test_profile_engine_reports_every_run_for_the_progress_bar(tmp_path):
    from openacl.model.profile import profile_engine
    from openacl.model.session import InferenceSession

    session = InferenceSession(_dynamic_batch_model(tmp_path))
    try:
        calls = []
        feeds = {"x": np.ones((4, 8), np.float32)}
        profile_engine(session.engine, feeds, runs=3, warmup=2, on_run=lambda: calls.append(1))
        assert len(calls) == 5
    finally:
        session.close()


def test_model_execute_is_a_range_over_its_tasks(tmp_path):
    model_path = _dynamic_batch_model(tmp_path)
    from openacl import mdl

    openacl.init({"profile": str(tmp_path / "prof")})
    openacl.rt.set_device(0)
    model = mdl.load_from_file(model_path)
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    index = mdl.get_input_index_by_name(desc, mdl.ACL_DYNAMIC_TENSOR_NAME)
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    sizes = [mdl.get_input_size_by_index(desc, 0), 8, mdl.get_output_size_by_index(desc, 0)]
    buffers = [openacl.create_data_buffer(openacl.rt.malloc(size), size) for size in sizes]
    mdl.add_dataset_buffer(inputs, buffers[0])
    mdl.add_dataset_buffer(inputs, buffers[1])
    mdl.add_dataset_buffer(outputs, buffers[2])
    mdl.set_dynamic_batch_size(model, inputs, index, 2)
    mdl.execute(model, inputs, outputs)
    mdl.unload(model)
    for buffer in buffers:
        openacl.rt.free(openacl.get_data_buffer_addr(buffer))
    openacl.finalize()
    run = load_report(tmp_path / "prof").runs[0]
    (span,) = run["ranges"]
    assert span[:2] == ["model", "dyn"]
    inside = [t for t in run["tasks"] if t[2] == span[2]]
    assert inside and all(span[3] <= t[4] <= t[5] <= span[4] for t in inside)
    assert {t[0] for t in inside} >= {"aclnn", "memcpy"}
    assert "aclmdlExecute" in [call[0] for call in run["api"]]


def test_inference_session_runs_are_model_tasks(tmp_path):
    """A session's run (the API most programs use) is recorded as one model task on the
    calling thread, from an .om and from an ONNX model."""
    from openacl.model.session import InferenceSession

    model_path = _dynamic_batch_model(tmp_path)
    openacl.init({"profile": str(tmp_path / "prof")})
    with InferenceSession(model_path) as session:
        for batch in (1, 2, 4):
            session.run(None, {"x": np.ones((batch, 8), np.float32)})
    with InferenceSession(str(tmp_path / "dyn.onnx")) as session:
        session.run(None, {"x": np.ones((3, 8), np.float32)})
    openacl.finalize()
    run = load_report(tmp_path / "prof").runs[0]
    models = [task for task in run["tasks"] if task[0] == "model"]
    assert [task[1] for task in models] == ["dyn"] * 4
    assert all(task[2] is None and task[4] <= task[5] for task in models)  # host, timed


@pytest.mark.parametrize("argv", [["python", "app.py"], ["app.py", "--runs", "2"]])
def test_a_program_given_without_its_dashes_gets_the_hint(argv, capsys):
    assert cli_main(["profile", *argv]) == 2
    assert f"put -- before it (openacl profile -- {' '.join(argv)})" in capsys.readouterr().err
