"""Dynamic-shape offline models (ATC's shape ranges): ``openacl convert --input-shape
"x:1~8,-1"`` writes a format-2 .om that ``InferenceSession`` and the aclmdl API run at any
shape inside the ranges; a pyACL program sets the input dims with
``acl.mdl.set_dataset_tensor_desc`` and reads the output dims with
``acl.mdl.get_dataset_tensor_desc`` at two sizes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import om  # noqa: E402
from openacl.model.converter import convert_onnx, format_report  # noqa: E402

RNG = np.random.default_rng(5)
SUBPROCESS_TIMEOUT_S = 120
WEIGHT = (RNG.standard_normal((16, 320)) * 0.1).astype(np.float32)  # big: a shared weight


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


def _model():
    """y = relu(x @ W) summed over the sequence: x [batch, seq, 16] -> y [batch, 320]."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "ranged", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                        ["batch", "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 320])],
        [numpy_helper.from_array(WEIGHT, "W"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _expected(x):
    return np.maximum(x @ WEIGHT, 0).sum(axis=1)


@pytest.fixture
def ranged_om(tmp_path):
    source = tmp_path / "ranged.onnx"
    onnx.save(_model(), source)
    output = tmp_path / "ranged.om"
    report = convert_onnx(source, output, {"x": ((1, 8), -1, 16)})
    assert report.shape_ranges == {"x": "1~8,-1,16"}
    assert "shape ranges: x:1~8,-1,16" in format_report(report)
    return output


def test_session_runs_a_shape_range_model_at_several_shapes(ranged_om):
    session = openacl.InferenceSession(str(ranged_om))
    assert session.get_inputs()[0].shape == ["batch", "seq", 16]
    for batch, seq in ((1, 3), (8, 40), (2, 1)):
        x = RNG.standard_normal((batch, seq, 16)).astype(np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], _expected(x), rtol=1e-5,
                                   atol=1e-5)
    with pytest.raises(AclError) as info:
        session.run(None, {"x": np.zeros((9, 2, 16), np.float32)})
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "1~8,-1,16" in info.value.message
    with pytest.raises(AclError) as info:
        session.run(None, {"x": np.zeros((2, 2, 15), np.float32)})
    assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH
    session.close()


def test_the_file_keeps_the_weights_once_and_refuses_a_compiled_reader(ranged_om):
    data = ranged_om.read_bytes()
    assert data[8:10] == om.STAGED_MAJOR.to_bytes(2, "little")
    model = om.load_offline(str(ranged_om))
    assert model.staged is not None and list(model.staged.weights) == ["W"]
    np.testing.assert_array_equal(model.staged.weights["W"], WEIGHT)
    assert model.staged.ranges == {"x": [(1, 8), (1, -1), (16, 16)]}
    with pytest.raises(AclError) as info:
        om.load_model_gears(str(ranged_om))
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "dynamic input shapes" in str(
        info.value)


def test_damaged_dynamic_files_are_clean_errors(ranged_om, tmp_path):
    import json
    import struct
    import zlib

    data = bytearray(ranged_om.read_bytes())
    header = om.HEADER.unpack_from(data)
    json_offset, json_bytes = header[4], header[5]
    document = json.loads(bytes(data[json_offset:json_offset + json_bytes]))
    cases = {"onnx": lambda d: d["staged"].__setitem__("onnx", "@@not base64@@"),
             "protobuf": lambda d: d["staged"].__setitem__("onnx", "AAAA"),
             "range": lambda d: d["staged"]["ranges"].__setitem__("x", [[3, 2]]),
             "input": lambda d: d["staged"]["ranges"].__setitem__("nope", [[1, 1]]),
             "weight": lambda d: d["staged"]["weights"]["W"].__setitem__("nbytes", 7)}
    for name, mutate in cases.items():
        changed = json.loads(json.dumps(document))
        mutate(changed)
        text = json.dumps(changed).encode()
        blob = bytes(data[header[6]:])
        blob_offset = (om.HEADER_BYTES + len(text) + om.BLOB_ALIGNMENT - 1) // \
            om.BLOB_ALIGNMENT * om.BLOB_ALIGNMENT
        head = om.HEADER.pack(om.MAGIC, om.STAGED_MAJOR, 0, om.HEADER_BYTES, om.HEADER_BYTES,
                              len(text), blob_offset, len(blob), zlib.crc32(text),
                              zlib.crc32(blob))
        mutated = head + text + bytes(blob_offset - om.HEADER_BYTES - len(text)) + blob
        with pytest.raises(AclError) as info:
            om.load_offline(mutated)
        assert info.value.code == ACL_ERROR_PARSE_MODEL, (name, info.value)
    future = bytearray(data)
    struct.pack_into("<H", future, 8, 3)
    with pytest.raises(AclError) as info:
        om.load_offline(bytes(future))
    assert info.value.code == ACL_ERROR_INVALID_FILE and "reads 1.x and 2.x" in str(info.value)


def test_bad_ranges_name_the_input(tmp_path):
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    for shapes, named in (({"x": ((4, 2), 3, 16)},  "'x' the dim (4, 2)"),
                          ({"x": (1, -3, 16)}, "'x' the dim -3"),
                          ({"z": (1, 2, 16)}, "names ['z']"),
                          ({"x": (1, 16)}, "'x' 2 dims")):
        with pytest.raises(AclError) as info:
            convert_onnx(source, tmp_path / "m.om", shapes)
        assert info.value.code == ACL_ERROR_INVALID_PARAM and named in str(info.value), shapes


def test_model_left_dynamic_converts_to_a_dynamic_file(tmp_path):
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    report = convert_onnx(source, tmp_path / "m.om")  # batch and seq left dynamic
    assert report.shape_ranges == {"x": "-1,-1,16"}
    x = RNG.standard_normal((3, 5, 16)).astype(np.float32)
    session = openacl.InferenceSession(str(tmp_path / "m.om"))
    np.testing.assert_allclose(session.run(None, {"x": x})[0], _expected(x), rtol=1e-5,
                               atol=1e-5)
    session.close()


def test_cli_convert_parses_atc_ranges(tmp_path):
    from openacl.cli.convert import parse_input_shapes

    assert parse_input_shapes("x:1~8,3,-1,-1;m:1,128") == {
        "x": ((1, 8), 3, -1, -1), "m": (1, 128)}
    for bad in ("x:8~1,3", "x:1~a", "x:-2,3", "x"):
        with pytest.raises(ValueError):
            parse_input_shapes(bad)
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    done = subprocess.run([sys.executable, "-m", "openacl.cli.main", "convert", str(source),
                           "-o", str(tmp_path / "m.om"), "--input-shape", "x:1~4,-1,16"],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "shape ranges: x:1~4,-1,16" in done.stdout


PYACL_PROGRAM = '''
import numpy as np
import acl

WEIGHT = np.load(WEIGHT_PATH)
ret = acl.init(); assert ret == 0
assert acl.rt.set_device(0) == 0
context, ret = acl.rt.create_context(0); assert ret == 0
model_id, ret = acl.mdl.load_from_file(MODEL_PATH); assert ret == 0
desc = acl.mdl.create_desc()
assert acl.mdl.get_desc(desc, model_id) == 0
dims, ret = acl.mdl.get_input_dims(desc, 0)
assert ret == 0 and dims["dims"] == [-1, -1, 16], dims
dims_range, ret = acl.mdl.get_input_dims_range(desc, 0)
assert ret == 0 and dims_range == {"rangeCount": 3, "range": [[1, 8], [1, -1], [16, 16]]}
capacity_in, capacity_out = 8 * 64 * 16 * 4, 8 * 320 * 4
dev_in, ret = acl.rt.malloc(capacity_in, 0); assert ret == 0
dev_out, ret = acl.rt.malloc(capacity_out, 0); assert ret == 0
inputs = acl.mdl.create_dataset()
_, ret = acl.mdl.add_dataset_buffer(inputs, acl.create_data_buffer(dev_in, capacity_in))
outputs = acl.mdl.create_dataset()
_, ret = acl.mdl.add_dataset_buffer(outputs, acl.create_data_buffer(dev_out, capacity_out))
ret = acl.mdl.execute(model_id, inputs, outputs)
assert ret == 100000, ret  # no dims set for the dynamic input: ACL_ERROR_INVALID_PARAM
for batch, seq in ((2, 5), (8, 64)):
    x = np.random.default_rng(batch).standard_normal((batch, seq, 16)).astype(np.float32)
    ptr = acl.util.bytes_to_ptr(x.tobytes())
    assert acl.rt.memcpy(dev_in, capacity_in, ptr, x.nbytes, 1) == 0
    tensor_desc = acl.create_tensor_desc(0, [batch, seq, 16], 2)
    _, ret = acl.mdl.set_dataset_tensor_desc(inputs, tensor_desc, 0); assert ret == 0
    ret = acl.mdl.execute(model_id, inputs, outputs)
    assert ret == 0, (ret, acl.get_recent_err_msg())
    out_desc = acl.mdl.get_dataset_tensor_desc(outputs, 0)
    out_dims = [acl.get_tensor_desc_dim_v2(out_desc, i)[0]
                for i in range(acl.get_tensor_desc_num_dims(out_desc))]
    assert out_dims == [batch, 320], out_dims
    cur, ret = acl.mdl.get_cur_output_dims(desc, 0); assert cur["dims"] == [batch, 320]
    host = bytes(batch * 320 * 4)
    out_ptr = acl.util.bytes_to_ptr(host)
    assert acl.rt.memcpy(out_ptr, len(host), dev_out, len(host), 2) == 0
    y = np.frombuffer(host, np.float32).reshape(batch, 320)
    expected = np.maximum(x @ WEIGHT, 0).sum(axis=1)
    assert np.allclose(y, expected, rtol=1e-5, atol=1e-5)
    acl.destroy_tensor_desc(tensor_desc)
big = acl.create_tensor_desc(0, [9, 2, 16], 2)
_, ret = acl.mdl.set_dataset_tensor_desc(inputs, big, 0)
assert acl.mdl.execute(model_id, inputs, outputs) == 100000  # outside the range
assert "outside the range" in acl.get_recent_err_msg()
acl.destroy_tensor_desc(big)
for dataset in (inputs, outputs):
    for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
        acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, i))
    acl.mdl.destroy_dataset(dataset)
acl.rt.free(dev_in); acl.rt.free(dev_out)
acl.mdl.destroy_desc(desc)
assert acl.mdl.unload(model_id) == 0
acl.rt.destroy_context(context); acl.rt.reset_device(0); acl.finalize()
print("pyacl shape range: ok")
'''


def test_pyacl_program_runs_a_shape_range_model_at_two_sizes(ranged_om, tmp_path):
    weight_path = tmp_path / "w.npy"
    np.save(weight_path, WEIGHT)
    script = tmp_path / "app.py"
    script.write_text(f"MODEL_PATH = {str(ranged_om)!r}\nWEIGHT_PATH = {str(weight_path)!r}\n"
                      + textwrap.dedent(PYACL_PROGRAM), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "openacl.compat", str(script)],
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pyacl shape range: ok" in done.stdout


# -- ATC's gears: --dynamic-dims and --dynamic-image-size -------------------------------------
def test_dynamic_dims_gears_run_through_the_acl_face(tmp_path):
    from openacl import mdl
    from openacl.tensor import create_data_buffer

    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    output = tmp_path / "gears.om"
    report = convert_onnx(source, output, {"x": (-1, -1, 16)},
                          dynamic_dims=[[1, 4], [2, 8], [4, 8]])
    assert report.gears == [[1, 4], [2, 8], [4, 8]]
    session = openacl.InferenceSession(str(output))
    x = RNG.standard_normal((2, 8, 16)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], _expected(x), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(AclError) as info:  # inside the range, but not a gear
        session.run(None, {"x": np.zeros((2, 4, 16), np.float32)})
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "gears" in info.value.message
    session.close()
    model = mdl.load_from_file(str(output))
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    assert mdl.get_num_inputs(desc) == 2  # x and ascend_mbatch_shape_data
    dynamic = mdl.get_input_index_by_name(desc, mdl.ACL_DYNAMIC_TENSOR_NAME)
    assert mdl.get_input_dynamic_gear_count(desc, -1) == 3
    assert [d.dims for d in mdl.get_input_dynamic_dims(desc, -1, 3)] == [
        (1, 4, 16), (2, 8, 16), (4, 8, 16)]
    x_dev, y_dev, d_dev = (openacl.rt.malloc(n) for n in (4 * 8 * 16 * 4, 4 * 320 * 4, 16))
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    mdl.add_dataset_buffer(inputs, create_data_buffer(x_dev, 4 * 8 * 16 * 4))
    mdl.add_dataset_buffer(inputs, create_data_buffer(d_dev, 16))
    mdl.add_dataset_buffer(outputs, create_data_buffer(y_dev, 4 * 320 * 4))
    for gear in ((4, 8, 16), (1, 4, 16)):
        x = RNG.standard_normal(gear).astype(np.float32)
        openacl.rt.memcpy(x_dev, x.nbytes, openacl.util.numpy_to_ptr(x), x.nbytes, 1)
        mdl.set_input_dynamic_dims(model, inputs, dynamic, gear)
        mdl.execute(model, inputs, outputs)
        y = np.empty((gear[0], 320), np.float32)
        openacl.rt.memcpy(openacl.util.numpy_to_ptr(y), y.nbytes, y_dev, y.nbytes, 2)
        np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-5)
        assert mdl.get_cur_output_dims(desc, 0).dims == (gear[0], 320)
    with pytest.raises(AclError) as info:
        mdl.set_input_dynamic_dims(model, inputs, dynamic, (3, 8, 16))
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "gears" in info.value.message
    with pytest.raises(AclError) as info:  # the other kind of gear: mutually exclusive
        mdl.set_dynamic_hw_size(model, inputs, dynamic, 4, 8)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    with pytest.raises(AclError):
        mdl.set_dynamic_batch_size(model, inputs, dynamic, 2)
    mdl.unload(model)
    for pointer in (x_dev, y_dev, d_dev):
        openacl.rt.free(pointer)
    mdl.destroy_desc(desc)


def test_dynamic_image_size_gears(tmp_path):
    from openacl import mdl

    nodes = [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Relu", ["p"], ["y"])]
    graph = helper.make_graph(nodes, "img", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, "h", "w"])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    source = tmp_path / "img.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    output = tmp_path / "img.om"
    convert_onnx(source, output, {"x": (1, 3, -1, -1)}, dynamic_image_size=[(8, 8), (16, 12)])
    model = mdl.load_from_file(str(output))
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    assert mdl.get_dynamic_hw(desc, -1) == [(8, 8), (16, 12)]
    assert mdl.get_input_dims(desc, 0).dims == (1, 3, -1, -1)
    mdl.unload(model)
    mdl.destroy_desc(desc)
    session = openacl.InferenceSession(str(output))
    x = RNG.standard_normal((1, 3, 16, 12)).astype(np.float32)
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)
    session.close()
    for bad in ({"dynamic_image_size": [(8,)]}, {"dynamic_image_size": [(8, 8), (8, 8)]},
                {"dynamic_dims": [[1, 2]], "dynamic_image_size": [(8, 8)]}):
        with pytest.raises(AclError) as info:
            convert_onnx(source, tmp_path / "bad.om", {"x": (1, 3, -1, -1)}, **bad)
        assert info.value.code == ACL_ERROR_INVALID_PARAM, bad


def test_dynamic_shape_calls_name_what_is_wrong(ranged_om):
    from openacl import mdl
    from openacl.compat import acl
    from openacl.errors import ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    from openacl.tensor import create_data_buffer, create_tensor_desc

    model = mdl.load_from_file(str(ranged_om))
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    assert mdl.get_input_dims_range(desc, 0).range == ((1, 8), (1, -1), (16, 16))
    assert mdl.get_input_dims_v2(desc, 0).dims == (-1, -1, 16)
    assert mdl.get_input_dynamic_gear_count(desc, -1) == 0 and mdl.get_dynamic_hw(desc) == []
    for call in (lambda: mdl.get_input_dims_range(desc, 5),
                 lambda: mdl.get_input_dynamic_dims(desc, -1, 2)):
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == ACL_ERROR_INVALID_PARAM
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    assert mdl.get_dataset_tensor_desc(outputs, 0) == 0  # nothing set yet: CANN's null
    for bad in ((123456, 0), (create_tensor_desc(0, [1, 2, 16], 2), -1)):
        with pytest.raises(AclError) as info:
            mdl.set_dataset_tensor_desc(inputs, *bad)
        assert info.value.code == ACL_ERROR_INVALID_PARAM
    with pytest.raises(AclError) as info:
        mdl.get_dataset_tensor_desc(outputs, -3)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert acl.mdl.set_dataset_tensor_desc(inputs, 123456, 0)[1] == ACL_ERROR_INVALID_PARAM
    assert acl.mdl.get_input_dims_range(desc, 9) == (
        {"rangeCount": 0, "range": []}, ACL_ERROR_INVALID_PARAM)
    # an output buffer too small for the real output: the run fails, naming the output
    x_dev, y_dev = openacl.rt.malloc(2 * 3 * 16 * 4), openacl.rt.malloc(4)
    mdl.add_dataset_buffer(inputs, create_data_buffer(x_dev, 2 * 3 * 16 * 4))
    mdl.add_dataset_buffer(outputs, create_data_buffer(y_dev, 4))
    mdl.set_dataset_tensor_desc(inputs, create_tensor_desc(0, [2, 3, 16], 2), 0)
    with pytest.raises(AclError) as info:
        mdl.execute(model, inputs, outputs)
    assert info.value.code == ACL_ERROR_MODEL_OUTPUT_NOT_MATCH and "'y'" in info.value.message
    mdl.unload(model)
    openacl.rt.free(x_dev)
    openacl.rt.free(y_dev)
    mdl.destroy_desc(desc)
