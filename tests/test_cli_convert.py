"""``openacl convert`` / ``atc`` with ATC's command line, ``openacl inspect``, and what model
load errors say (issue 16: first contact)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.cli.convert import atc_main, parse_input_shapes  # noqa: E402
from openacl.cli.main import main  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import om, onnx_import  # noqa: E402
from openacl.model.describe import describe_model  # noqa: E402

RNG = np.random.default_rng(16)
SUBPROCESS_TIMEOUT_S = 120  # one conversion in a fresh interpreter
ATC = os.path.join(os.path.dirname(sys.executable), "atc")  # the console script


def _model(dynamic: bool = False) -> onnx.ModelProto:
    """x [B,32] -> MatMul W -> Relu -> + mask [B,64] -> y; B (and mask's 64) dynamic."""
    batch = "batch" if dynamic else 1
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Add", ["r", "mask"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 32]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT,
                                       [batch, "seq" if dynamic else 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64])],
        [numpy_helper.from_array(RNG.standard_normal((32, 64)).astype(np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def static_onnx(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    return path


@pytest.fixture
def dynamic_onnx(tmp_path):
    path = tmp_path / "d.onnx"
    onnx.save(_model(True), path)
    return path


def _feeds(batch: int = 1) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((batch, 32)).astype(np.float32),
            "mask": RNG.standard_normal((batch, 64)).astype(np.float32)}


def _run(path, feeds, names=None):
    session = openacl.InferenceSession(str(path))
    try:
        return session.run(names, feeds)
    finally:
        session.close()


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


# -- ATC's command line --------------------------------------------------------------------------
def test_atc_command_line_as_tutorials_write_it(static_onnx, tmp_path, capsys):
    output = tmp_path / "yolo"
    argv = [f"--model={static_onnx}", "--framework=5", f"--output={output}",
            "--input_shape=x:1,32;mask:1,64", "--input_format=NCHW",
            "--soc_version=Ascend310P3", "--precision_mode=force_fp32", "--log=error"]
    assert atc_main(argv) == 0
    report = capsys.readouterr().out
    assert "soc_version Ascend310P3" in report and "input_format NCHW" in report
    path = tmp_path / "yolo.om"  # ATC's rule: .om added to --output
    assert path.exists()
    metadata = om.load_model(path)[2]
    assert metadata["options"]["soc_version"] == "Ascend310P3"
    assert metadata["options"]["input_format"] == "NCHW"
    assert metadata["options"]["framework"] == 5 and metadata["precision"] == "fp32"
    assert metadata["format_version"] == f"{om.VERSION_MAJOR}.{om.VERSION_MINOR}"
    feeds = _feeds()
    weight = numpy_helper.to_array(onnx.load(static_onnx).graph.initializer[0])
    expected = np.maximum(feeds["x"] @ weight, 0) + feeds["mask"]
    np.testing.assert_allclose(_run(path, feeds)[0], expected, rtol=1e-5, atol=1e-5)


def test_flag_value_and_flag_equals_value_and_both_spellings(static_onnx, tmp_path, capsys):
    for spelling in (["--input_shape", "x:1,32;mask:1,64"], ["--input-shape=x:1,32;mask:1,64"]):
        output = tmp_path / "a.om"
        assert main(["convert", "--model", str(static_onnx), "--output", str(output),
                     *spelling]) == 0
        assert om.load_model(output)[2]["input_shapes"] == {"x": [1, 32], "mask": [1, 64]}
    capsys.readouterr()


@pytest.mark.parametrize("mode,precision", [
    ("force_fp32", "fp32"), ("must_keep_origin_dtype", "fp32"), ("force_fp16", "fp16"),
    ("allow_mix_precision", "mixed"), ("allow_fp32_to_fp16", "mixed")])
def test_precision_mode_maps_to_precision(mode, precision, static_onnx, tmp_path, capsys):
    output = tmp_path / "p.om"
    assert main(["convert", str(static_onnx), "-o", str(output),
                 f"--precision_mode={mode}"]) == 0
    metadata = om.load_model(output)[2]
    assert metadata["precision"] == precision
    assert metadata["options"]["precision_mode"] == mode
    assert f"precision: {precision}" in capsys.readouterr().out


def test_dynamic_batch_size_alias_makes_gears(dynamic_onnx, tmp_path, capsys):
    output = tmp_path / "b.om"
    assert atc_main([f"--model={dynamic_onnx}", "--framework=5", f"--output={output}",
                     "--input_shape=x:-1,32;mask:-1,64", "--dynamic_batch_size=1,2,4"]) == 0
    assert "dynamic batch: [1, 2, 4]" in capsys.readouterr().out
    description = describe_model(output)
    assert description["model_type"] == "dynamic batch"
    assert description["gears"] == {"kind": "batch", "values": [[1], [2], [4]]}


def test_dynamic_dims_alias(dynamic_onnx, tmp_path, capsys):
    output = tmp_path / "dd.om"
    assert main(["convert", str(dynamic_onnx), "-o", str(output),
                 "--input_shape=x:-1,32;mask:-1,-1", "--dynamic_dims=1,1,8;2,2,64"]) == 0
    assert "gears" in capsys.readouterr().out
    assert describe_model(output)["model_type"] == "dynamic dims"


def test_out_nodes_choose_the_outputs(static_onnx, dynamic_onnx, tmp_path, capsys):
    output = tmp_path / "o.om"
    assert main(["convert", str(static_onnx), "-o", str(output),
                 "--out_nodes=relu:0;y"]) == 0
    assert "outputs (--out_nodes): r, y" in capsys.readouterr().out
    feeds = _feeds()
    r, y = _run(output, feeds)
    expected_r = np.maximum(feeds["x"] @ numpy_helper.to_array(
        onnx.load(static_onnx).graph.initializer[0]), 0)
    np.testing.assert_allclose(r, expected_r, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, expected_r + feeds["mask"], rtol=1e-5, atol=1e-5)
    staged = tmp_path / "os.om"  # a dynamic-shape model: ONNX output names (ATC's ONNX form)
    assert main(["convert", str(dynamic_onnx), "-o", str(staged), "--out_nodes", "h"]) == 0
    assert [item["name"] for item in describe_model(staged)["outputs"]] == ["h"]
    assert describe_model(staged)["op_counts"] == {"onnx": {"MatMul": 1}}
    (h,) = _run(staged, _feeds(3))
    assert h.shape == (3, 64)


@pytest.mark.parametrize("argv,named", [
    (["--framework=3"], "--framework=3 (TensorFlow)"),
    (["--framework=0"], "--framework=0 (Caffe)"),
    (["--framework=1"], "--framework=1 (MindSpore)"),
    (["--framework=9"], "--framework=9 is not one of"),
    (["--insert_op_conf=aipp.cfg"], "--insert_op_conf=aipp.cfg"),
    (["--input_shape=x:0,32"], "'0'"),
    (["--input_shape=x:-2,32"], "'-2'"),
    (["--input_shape=x:0~4,32"], "'0~4'"),
    (["--input_shape=x:4~2,32"], "'4~2'"),
    (["--input_shape=x:1,32;x:1,32"], "names 'x' twice"),
    (["--dynamic_batch_size=1,a"], "--dynamic-batch '1,a'"),
    (["--dynamic_dims=1;b"], "--dynamic-dims '1;b'"),
    (["--out_nodes=nope:0"], "'nope:0'"),
    (["--out_nodes=relu:5"], "'relu:5'"),
    (["--out_nodes=;"], "--out_nodes"),
    (["--precision=fp16", "--precision_mode=force_fp32"], "disagree"),
    (["--model=other.onnx"], "two models given"),
    (["--mode=3"], "--mode=3 (pre-check only)"),
    (["--mode=1"], "--json=FILE"),
])
def test_bad_values_exit_2_and_name_the_flag(argv, named, static_onnx, tmp_path, capsys):
    assert main(["convert", str(static_onnx), "-o", str(tmp_path / "x.om"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("openacl convert: ") and named in err, err
    assert not (tmp_path / "x.om").exists()


@pytest.mark.parametrize("argv,named", [
    (["--bogus"], "--bogus"), (["--input_shapee=x:1"], "--input_shapee"),
    (["--precision_mode=allow_fp32_to_bf16"], "allow_fp32_to_bf16"),
    (["--input_format=NC1HWC0"], "NC1HWC0"), (["--log=verbose"], "verbose")])
def test_unknown_flags_and_choices_show_converts_usage(argv, named, static_onnx, capsys):
    for run, prog in ((lambda a: main(["convert", *a]), "openacl convert"), (atc_main, "atc")):
        with pytest.raises(SystemExit) as info:
            run([str(static_onnx), *argv])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"usage: {prog} " in err and named in err and f"{prog}: error:" in err, err


def test_log_info_reports_the_phases(static_onnx, tmp_path, capsys):
    assert main(["convert", str(static_onnx), "-o", str(tmp_path / "l.om"), "--log=info"]) == 0
    err = capsys.readouterr().err
    for phase in ("read model", "fold constants", "lower to aclnn", "plan memory",
                  "write .om"):
        assert f"convert: {phase}" in err, err
    assert main(["convert", str(static_onnx), "-o", str(tmp_path / "q.om")]) == 0
    assert "convert:" not in capsys.readouterr().err  # no --log: nothing on stderr


def test_atc_console_script_runs(static_onnx, tmp_path):
    if not os.path.exists(ATC):
        pytest.skip("the atc console script is not installed (pip install -e .)")
    done = subprocess.run([ATC, f"--model={static_onnx}", "--framework=5",
                           f"--output={tmp_path / 'sub'}", "--soc_version=Ascend310P3"],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "sub.om").exists() and "converted" in done.stdout
    done = subprocess.run([ATC, "--bogus"], capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 2 and "usage: atc" in done.stderr and "--bogus" in done.stderr


def test_atc_mode_1_writes_json_and_mode_6_displays(static_onnx, tmp_path, capsys):
    model = tmp_path / "m.om"
    assert atc_main([f"--model={static_onnx}", f"--output={model}"]) == 0
    target = tmp_path / "m.json"
    assert atc_main(["--mode=1", f"--om={model}", f"--json={target}"]) == 0
    assert json.loads(target.read_text())["inputs"][0]["name"] == "x"
    capsys.readouterr()
    assert atc_main(["--mode=6", f"--om={model}"]) == 0
    assert "aclnn ops:" in capsys.readouterr().out


# -- --input-shape and the inputs that need shapes ----------------------------------------------
def test_parse_input_shapes_refuses_zero_and_negative_dims():
    assert parse_input_shapes("x:1~8,3,-1,-1;m:1,128") == {
        "x": ((1, 8), 3, -1, -1), "m": (1, 128)}
    for bad in ("x:0,3", "x:-2,3", "x:0~8", "x:-1~8", "x:8~1", "x:1,a", "x"):
        with pytest.raises(ValueError, match="--input-shape"):
            parse_input_shapes(bad)
    with pytest.raises(ValueError, match="fixed dims >= 1"):
        parse_input_shapes("x:-1,3", allow_dynamic=False)


def test_missing_shapes_name_every_input_with_its_rank(dynamic_onnx):
    with pytest.raises(AclError) as info:
        onnx_import.import_onnx(str(dynamic_onnx))
    message = str(info.value)
    assert info.value.code == ACL_ERROR_PARSE_MODEL
    assert "2 inputs need shapes" in message
    assert "x (rank 2: batch,32)" in message and "mask (rank 2: batch,seq)" in message
    assert '--input-shape "x:N,32;mask:N,N"' in message
    with pytest.raises(AclError) as info:  # one given: the other is still named
        onnx_import.import_onnx(str(dynamic_onnx), {"x": (2, 32)})
    assert "1 input needs a shape: mask (rank 2: batch,seq)" in str(info.value)


def test_dynamic_batch_names_every_input_with_other_dynamic_dims(dynamic_onnx, tmp_path,
                                                                 capsys):
    assert main(["convert", str(dynamic_onnx), "-o", str(tmp_path / "b.om"),
                 "--dynamic-batch", "1,2"]) == 2
    err = capsys.readouterr().err
    assert "mask (rank 2: batch,seq)" in err and '"mask:-1,N"' in err and "x (" not in err


# -- inspect -------------------------------------------------------------------------------------
def test_inspect_om_text_and_json(static_onnx, tmp_path, capsys):
    model = tmp_path / "i.om"
    assert atc_main([f"--model={static_onnx}", f"--output={model}", "--soc_version=Ascend910B",
                     "--input_format=ND"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(model)]) == 0
    text = capsys.readouterr().out
    for part in ("offline model format 1.2, static", "x: float32 [1,32]", "y: float32 [1,64]",
                 "aclnn ops:", "weights:", "arena:", "soc_version=Ascend910B",
                 "input_format=ND"):
        assert part in text, text
    assert main(["inspect", str(model), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "offline model" and document["model_type"] == "static"
    assert document["inputs"][1] == {"name": "mask", "dtype": "float32", "dims": [1, 64],
                                     "ranges": [[1, 1], [64, 64]]}
    assert document["options"]["soc_version"] == "Ascend910B"
    assert document["weights_bytes"] == 32 * 64 * 4 and document["arena_bytes"] > 0
    assert sum(document["op_counts"]["aclnn"].values()) == len(document["graph"]["op"])


def test_inspect_onnx_and_dynamic_shape_om(dynamic_onnx, tmp_path, capsys):
    assert main(["inspect", str(dynamic_onnx), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "onnx model" and document["model_type"] == "dynamic shape"
    assert document["inputs"][1]["dims"] == ["batch", "seq"]
    assert document["op_counts"] == {"onnx": {"MatMul": 1, "Relu": 1, "Add": 1}}
    assert document["opset"] == 17 and document["weights_bytes"] == 32 * 64 * 4
    assert main(["inspect", str(dynamic_onnx)]) == 0
    assert "mask: float32 [batch,seq]" in capsys.readouterr().out
    model = tmp_path / "r.om"
    assert main(["convert", str(dynamic_onnx), "-o", str(model),
                 "--input-shape", "x:1~8,32;mask:1~8,1~128"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(model)]) == 0
    text = capsys.readouterr().out
    assert "format 2.1, dynamic shape" in text and "range 1~8,1~128" in text
    assert "planned per input shape at run time" in text


def test_inspect_onnx_counts_weights_held_in_constant_nodes(tmp_path, capsys):
    """Exporters such as Paddle2ONNX keep every weight in a Constant node, no initializer."""
    weight = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], value=weight),
         helper.make_node("MatMul", ["x", "w"], ["y"])], "constants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(np.zeros(4, np.float32), "unused")])
    source = tmp_path / "constants.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    assert main(["inspect", str(source), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["weights_bytes"] == 16 * 8 * 4 + 4 * 4 and document["weights_count"] == 2


def test_inspect_old_files_without_options_still_load(static_onnx, tmp_path, capsys):
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx
    from openacl.model.plan import plan_memory

    lowered = lower(import_onnx(str(static_onnx)))
    data = bytearray(om.serialize_model(lowered, plan_memory(lowered), {"source_model": "m"}))
    data[10:12] = (1).to_bytes(2, "little")  # a 1.1 file: no options in its metadata
    path = tmp_path / "old.om"
    path.write_bytes(bytes(data))
    assert main(["inspect", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format_version"] == "1.1" and document["options"] == {}
    assert _run(path, _feeds())[0].shape == (1, 64)


def test_inspect_refuses_bad_files_exit_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "none.om")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("openacl inspect: ") and "does not exist" in err


# -- what load errors say ------------------------------------------------------------------------
def _load_error(source) -> AclError:
    with pytest.raises(AclError) as info:
        openacl.InferenceSession(str(source))
    return info.value


def test_missing_om_is_not_an_onnx_error(tmp_path, capsys):
    error = _load_error(tmp_path / "gone.om")
    assert error.code == ACL_ERROR_INVALID_FILE and "does not exist" in str(error)
    assert "ONNX" not in str(error)
    assert main(["convert", str(tmp_path / "gone.onnx")]) == 2
    assert "model file" in capsys.readouterr().err


def test_text_file_named_om_says_what_it_is(tmp_path):
    path = tmp_path / "notes.om"
    path.write_text("hello, this is not a model\n")
    error = _load_error(path)
    assert error.code == ACL_ERROR_INVALID_FILE and "text file" in str(error)
    assert "Wire format" not in str(error)
    with pytest.raises(AclError) as info:
        om.load_offline(path)
    assert "not an OpenACL offline model" in str(info.value)


def test_empty_onnx_is_not_opset_0(tmp_path, capsys):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    error = _load_error(path)
    assert "empty (0 bytes)" in str(error) and "opset 0" not in str(error)
    assert main(["convert", str(path)]) == 2
    assert "empty (0 bytes)" in capsys.readouterr().err
    with pytest.raises(AclError) as info:  # bytes that decode to an empty ModelProto
        onnx_import._load(b"\x00")
    assert "opset 0" not in str(info.value) and "not an ONNX model" in str(info.value)


def test_truncated_and_corrupt_om_have_one_prefix(static_onnx, tmp_path):
    model = tmp_path / "t.om"
    assert main(["convert", str(static_onnx), "-o", str(model)]) == 0
    data = model.read_bytes()
    truncated = tmp_path / "trunc.om"
    truncated.write_bytes(data[:200])
    error = _load_error(truncated)
    assert "truncated" in str(error) and str(error).count("offline model") == 1, error
    document = json.loads(data[64:64 + int.from_bytes(data[24:32], "little")])
    document["graph"]["steps"][0]["op"] = "NoSuchOp"
    text = json.dumps(document).encode()
    header = bytearray(data[:64])
    blob_offset = -(-(64 + len(text)) // om.BLOB_ALIGNMENT) * om.BLOB_ALIGNMENT
    blob = data[int.from_bytes(data[32:40], "little"):]
    header[24:32] = len(text).to_bytes(8, "little")
    header[32:40] = blob_offset.to_bytes(8, "little")
    header[48:52] = zlib.crc32(text).to_bytes(4, "little")
    bad = bytes(header) + text + bytes(blob_offset - 64 - len(text)) + blob
    for source in (bad, tmp_path / "bad.om"):
        if not isinstance(source, bytes):
            source.write_bytes(bad)
        with pytest.raises(AclError) as info:
            om.load_offline(source)
        message = str(info.value)
        assert info.value.code == ACL_ERROR_PARSE_MODEL and "NoSuchOp" in message
        assert message.count("offline model") == 1, message


def test_om_given_to_convert_says_it_is_an_offline_model(static_onnx, tmp_path, capsys):
    model = tmp_path / "c.om"
    assert main(["convert", str(static_onnx), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["convert", str(model), "-o", str(tmp_path / "again.om")]) == 2
    assert "is an OpenACL offline model (.om), not an ONNX model" in capsys.readouterr().err


# -- without onnx --------------------------------------------------------------------------------
def test_without_onnx_the_install_line_is_an_acl_error(static_onnx, tmp_path, monkeypatch,
                                                       capsys):
    model = tmp_path / "s.om"
    assert main(["convert", str(static_onnx), "-o", str(model)]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(AclError) as info:
        onnx_import.require_onnx()
    assert info.value.code == ACL_ERROR_FEATURE_UNSUPPORTED
    assert "pip install 'openacl[onnx]'" in str(info.value)
    assert main(["convert", str(static_onnx), "-o", str(tmp_path / "n.om")]) == 2
    assert "pip install 'openacl[onnx]'" in capsys.readouterr().err
    assert main(["inspect", str(static_onnx)]) == 2
    assert "pip install 'openacl[onnx]'" in capsys.readouterr().err
    assert main(["inspect", str(model)]) == 0  # a compiled .om needs no onnx
    assert _run(model, _feeds())[0].shape == (1, 64)


def test_an_empty_om_and_a_truncated_onnx_say_what_they_are(static_onnx, tmp_path, capsys):
    empty = tmp_path / "empty.om"
    empty.write_bytes(b"")
    assert main(["inspect", str(empty)]) == 2
    assert "is empty (0 bytes): not an offline model" in capsys.readouterr().err
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(static_onnx.read_bytes()[:-40])
    assert main(["inspect", str(truncated)]) == 2
    assert "probably truncated or damaged" in capsys.readouterr().err


def test_atc_version_typo_suggestions_and_a_missing_output_folder(static_onnx, tmp_path,
                                                                   capsys):
    with pytest.raises(SystemExit) as done:
        atc_main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("atc (openacl ")
    with pytest.raises(SystemExit):
        atc_main([f"--model={static_onnx}", "--framwork=5"])
    assert "did you mean --framework?" in capsys.readouterr().err
    assert atc_main([f"--model={static_onnx}", "--framework=5",
                     f"--output={tmp_path / 'no' / 'such' / 'det'}"]) == 2
    err = capsys.readouterr().err
    assert f"the folder {str(tmp_path / 'no' / 'such')!r} does not exist" in err
    assert not (tmp_path / "no").exists()
