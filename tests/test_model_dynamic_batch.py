"""Dynamic batch: --dynamic-batch gears in the converter, the .om file (weights stored once),
InferenceSession, and aclmdlGetDynamicBatch / aclmdlSetDynamicBatchSize /
aclmdlGetCurOutputDims in both faces."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl import mdl  # noqa: E402
from openacl.cli.main import main  # noqa: E402
from openacl.compat.acl import mdl as acl_mdl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import om  # noqa: E402
from openacl.model.converter import convert_onnx  # noqa: E402
from openacl.util import numpy_to_ptr  # noqa: E402

WEIGHT = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
H2D, D2H = 1, 2


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


@pytest.fixture
def onnx_path(tmp_path):
    """y = relu(x @ W) with x[batch, 8], and s = sum(y) (an output without the batch)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
         helper.make_node("ReduceSum", ["y"], ["s"], keepdims=1)], "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(WEIGHT, "w")])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def om_path(onnx_path, tmp_path):
    path = tmp_path / "dyn.om"
    report = convert_onnx(onnx_path, path, dynamic_batch=[4, 1, 2])
    assert report.dynamic_batch == [1, 2, 4] and report.input_shapes == {"x": [4, 8]}
    return path


def _expected(x):
    y = np.maximum(x @ WEIGHT, 0)
    return y, y.sum(keepdims=True).reshape(1, 1)


def test_the_weights_are_stored_once(onnx_path, om_path, tmp_path):
    static = tmp_path / "static.om"
    convert_onnx(onnx_path, static, {"x": (4, 8)})
    lowered, _, metadata, gears = om.load_model_gears(om_path)
    assert metadata["dynamic_batch"] == [1, 2, 4] and [g.batch for g in gears] == [1, 2]
    weights = [np.asarray(g.lowered.graph.initializers["w"]) for g in gears]
    weights.append(np.asarray(lowered.graph.initializers["w"]))
    assert all(w.ctypes.data == weights[0].ctypes.data for w in weights)  # one blob entry
    assert om_path.stat().st_size < static.stat().st_size + 4096  # graphs only, not weights


def test_session_picks_the_gear_by_the_batch(om_path):
    session = openacl.InferenceSession(str(om_path))
    try:
        assert session.batch_sizes == [1, 2, 4]
        for batch in (1, 4, 2, 1):
            x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
            y, s = session.run(None, {"x": x})
            expected_y, expected_s = _expected(x)
            np.testing.assert_allclose(y, expected_y, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(s, expected_s, rtol=1e-5, atol=1e-4)
        with pytest.raises(AclError) as info:
            session.run(None, {"x": np.ones((3, 8), np.float32)})
        assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH and "[1, 2, 4]" in str(
            info.value)
    finally:
        session.close()


def _buffer(size):
    return openacl.create_data_buffer(openacl.rt.malloc(size), size)


def test_mdl_set_dynamic_batch_size_and_current_output_dims(om_path):
    model = mdl.load_from_file(om_path)
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    assert mdl.get_num_inputs(desc) == 2 and mdl.get_dynamic_batch(desc) == [1, 2, 4]
    index = mdl.get_input_index_by_name(desc, mdl.ACL_DYNAMIC_TENSOR_NAME)
    assert index == 1 and mdl.get_input_dims(desc, 0).dims == (-1, 8)
    assert mdl.get_input_size_by_index(desc, 0) == 4 * 8 * 4  # the largest gear's
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    x_buffer, batch_buffer = _buffer(mdl.get_input_size_by_index(desc, 0)), _buffer(8)
    for buffer in (x_buffer, batch_buffer):
        mdl.add_dataset_buffer(inputs, buffer)
    y_buffer, s_buffer = (_buffer(mdl.get_output_size_by_index(desc, i)) for i in range(2))
    for buffer in (y_buffer, s_buffer):
        mdl.add_dataset_buffer(outputs, buffer)
    for batch in (2, 1, 4):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        openacl.rt.memcpy(openacl.get_data_buffer_addr(x_buffer), x.nbytes, numpy_to_ptr(x),
                          x.nbytes, H2D)
        mdl.set_dynamic_batch_size(model, inputs, index, batch)
        mdl.execute(model, inputs, outputs)
        assert mdl.get_cur_output_dims(desc, 0).dims == (batch, 4)
        y = np.empty((batch, 4), np.float32)
        openacl.rt.memcpy(numpy_to_ptr(y), y.nbytes, openacl.get_data_buffer_addr(y_buffer),
                          y.nbytes, D2H)
        np.testing.assert_allclose(y, _expected(x)[0], rtol=1e-5, atol=1e-5)
    for bad in ((model, inputs, index, 3), (model, inputs, 0, 2)):
        with pytest.raises(AclError) as info:
            mdl.set_dynamic_batch_size(*bad)
        assert info.value.code == ACL_ERROR_INVALID_PARAM
    openacl.rt.memset(openacl.get_data_buffer_addr(batch_buffer), 8, 0, 8)  # batch 0
    with pytest.raises(AclError) as info:
        mdl.execute(model, inputs, outputs)
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "set_dynamic_batch_size" in str(
        info.value)
    mdl.unload(model)
    assert mdl.get_dynamic_batch(desc) == [1, 2, 4]  # the description outlives the model


def test_pyacl_face_and_static_models(om_path, onnx_path, tmp_path):
    model, ret = acl_mdl.load_from_file(str(om_path))
    assert ret == 0
    desc = acl_mdl.create_desc()
    assert acl_mdl.get_desc(desc, model) == 0
    assert acl_mdl.get_dynamic_batch(desc) == ({"batchCount": 3, "batch": [1, 2, 4]}, 0)
    dataset = acl_mdl.create_dataset()
    assert acl_mdl.set_dynamic_batch_size(model, dataset, 1, 2) == ACL_ERROR_INVALID_PARAM
    static = tmp_path / "static.om"
    convert_onnx(onnx_path, static, {"x": (2, 8)})
    fixed, _ = acl_mdl.load_from_file(str(static))
    assert acl_mdl.get_desc(desc, fixed) == 0
    assert acl_mdl.get_dynamic_batch(desc) == ({"batchCount": 0, "batch": []}, 0)
    assert acl_mdl.set_dynamic_batch_size(fixed, dataset, 0, 2) == ACL_ERROR_INVALID_PARAM
    assert acl_mdl.unload(model) == 0 and acl_mdl.unload(fixed) == 0


def test_bad_batch_sizes_and_inconsistent_gears(onnx_path, tmp_path):
    for sizes in ([], [0, 2], [2, 2], [1.5]):
        with pytest.raises(AclError) as info:
            convert_onnx(onnx_path, tmp_path / "bad.om", dynamic_batch=sizes)
        assert info.value.code == ACL_ERROR_INVALID_PARAM
    # -1 without gears is a shape range (any batch): a dynamic-shape file, not gears
    report = convert_onnx(onnx_path, tmp_path / "ranged.om", {"x": (-1, 8)})
    assert report.shape_ranges == {"x": "-1,8"} and not report.dynamic_batch
    two_dynamic = onnx.load(onnx_path)  # only dim 0 may vary: another dynamic dim is named
    two_dynamic.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "features"
    onnx.save(two_dynamic, tmp_path / "two.onnx")
    with pytest.raises(AclError) as info:
        convert_onnx(tmp_path / "two.onnx", tmp_path / "bad.om", dynamic_batch=[1, 2])
    assert info.value.code == ACL_ERROR_PARSE_MODEL and "only dim 0" in str(info.value)
    convert_onnx(tmp_path / "two.onnx", tmp_path / "ok.om", {"x": (-1, 8)}, [1, 2])
    lowered, plan, _, gears = om.load_model_gears(convert_onnx_and_load(onnx_path, tmp_path))
    mislabelled = [om.Gear(3, gears[0].lowered, gears[0].plan)]  # batch 1 graphs called 3
    data = om.serialize_model(lowered, plan, {}, mislabelled)
    with pytest.raises(AclError) as info:
        om.load_model(data)
    assert info.value.code == ACL_ERROR_PARSE_MODEL and "gears[0]" in str(info.value)
    twice = om.serialize_model(lowered, plan, {}, [gears[0], gears[0]])
    with pytest.raises(AclError) as info:
        om.load_model(twice)
    assert "repeats" in str(info.value)


def convert_onnx_and_load(onnx_path, tmp_path):
    path = tmp_path / "gears.om"
    convert_onnx(onnx_path, path, dynamic_batch=[1, 2])
    return path


def test_cli_dynamic_batch(onnx_path, tmp_path, capsys):
    out = tmp_path / "cli.om"
    assert main(["convert", str(onnx_path), "-o", str(out), "--input-shape", "x:-1,8",
                 "--dynamic-batch", "1,2,4"]) == 0
    assert "dynamic batch: [1, 2, 4]" in capsys.readouterr().out
    assert om.load_model_gears(out)[2]["dynamic_batch"] == [1, 2, 4]
    assert main(["convert", str(onnx_path), "-o", str(out), "--dynamic-batch", "0,2"]) != 0
    assert main(["convert", str(onnx_path), "-o", str(out), "--dynamic-batch", "a"]) != 0
    assert main(["convert", str(onnx_path), "-o", str(out), "--input-shape", "x:-2,8"]) != 0


def test_a_model_from_a_mutable_buffer_is_copied(om_path):
    """The engine uses the weights in place on cpu: a bytearray source must not be aliased."""
    data = bytearray(om_path.read_bytes())
    session = openacl.InferenceSession(data)
    try:
        data[:] = bytes(len(data))  # the caller reuses its buffer
        x = np.ones((4, 8), np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], _expected(x)[0],
                                   rtol=1e-5, atol=1e-5)
    finally:
        session.close()


def test_load_from_mem_reads_device_memory(om_path):
    data = np.frombuffer(om_path.read_bytes(), np.uint8)
    device = openacl.rt.malloc(data.nbytes)
    openacl.rt.memcpy(device, data.nbytes, numpy_to_ptr(data), data.nbytes, H2D)
    model = mdl.load_from_mem(device, data.nbytes)
    openacl.rt.free(device)  # the model holds its own copy
    desc = mdl.create_desc()
    mdl.get_desc(desc, model)
    assert mdl.get_dynamic_batch(desc) == [1, 2, 4]
    mdl.unload(model)
