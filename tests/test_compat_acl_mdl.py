"""pyACL's ``acl.mdl``: an unchanged sample-style inference program, run through
``python -m openacl.compat``, and the return conventions checked in process.

The program follows the official samples' flow (acl.init, set_device, create_context,
create_stream, mdl.load_from_file, get_desc, datasets over malloc'd device buffers, memcpy
in, execute, memcpy out, destroy everything, finalize) and asserts its results itself.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from openacl.compat import acl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
)

HAVE_OM = importlib.util.find_spec("openacl.model.om") is not None
NO_OM = "openacl.model.om (the offline model file) is not in this tree yet"
SUBPROCESS_TIMEOUT_S = 120  # a hung program fails its test instead of hanging the suite
RNG = np.random.default_rng(11)


def _mlp():
    w1 = (RNG.standard_normal((64, 128)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((10, 128)) * 0.1).astype(np.float32)
    b1, b2 = np.full(128, 0.05, np.float32), np.zeros(10, np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])],
        [numpy_helper.from_array(a, n) for n, a in
         (("W1", w1), ("b1", b1), ("W2", w2), ("b2", b2))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _convert(model, path) -> None:
    from openacl.model import om
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx
    from openacl.model.plan import plan_memory

    lowered = lower(import_onnx(model))
    om.save_model(lowered, plan_memory(lowered), path)


INFERENCE_PROGRAM = """
    import sys
    import numpy as np
    import acl

    ACL_MEM_MALLOC_HUGE_FIRST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_FLOAT = 0
    DEVICE_ID = 0
    model_path, x_path, y_path = sys.argv[1:4]
    x = np.load(x_path)
    expected = np.load(y_path)


    def check(ret, what):
        if ret != 0:
            raise RuntimeError(f"{what} failed: {ret} {acl.get_recent_err_msg()}")


    class Net:
        def __init__(self):
            check(acl.init(), "init")
            check(acl.rt.set_device(DEVICE_ID), "set_device")
            self.context, ret = acl.rt.create_context(DEVICE_ID)
            check(ret, "create_context")
            self.stream, ret = acl.rt.create_stream()
            check(ret, "create_stream")
            self.model_id, ret = acl.mdl.load_from_file(model_path)
            check(ret, "load_from_file")
            self.model_desc = acl.mdl.create_desc()
            check(acl.mdl.get_desc(self.model_desc, self.model_id), "get_desc")
            self.input_dataset = self._dataset(acl.mdl.get_num_inputs(self.model_desc),
                                               acl.mdl.get_input_size_by_index)
            self.output_dataset = self._dataset(acl.mdl.get_num_outputs(self.model_desc),
                                                acl.mdl.get_output_size_by_index)

        def _dataset(self, count, size_of):
            dataset = acl.mdl.create_dataset()
            for i in range(count):
                size = size_of(self.model_desc, i)
                buffer, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
                check(ret, "malloc")
                data = acl.create_data_buffer(buffer, size)
                _, ret = acl.mdl.add_dataset_buffer(dataset, data)
                check(ret, "add_dataset_buffer")
            return dataset

        def describe(self):
            dims, ret = acl.mdl.get_input_dims(self.model_desc, 0)
            check(ret, "get_input_dims")
            assert dims == {"name": "x", "dimCount": 2, "dims": [4, 64]}, dims
            dims, ret = acl.mdl.get_cur_output_dims(self.model_desc, 0)
            check(ret, "get_cur_output_dims")
            assert dims["dims"] == [4, 10], dims
            assert acl.mdl.get_input_name_by_index(self.model_desc, 0) == "x"
            assert acl.mdl.get_output_name_by_index(self.model_desc, 0) == "y"
            assert acl.mdl.get_input_data_type(self.model_desc, 0) == ACL_FLOAT
            assert acl.mdl.get_input_format(self.model_desc, 0) == 2  # ACL_FORMAT_ND
            index, ret = acl.mdl.get_input_index_by_name(self.model_desc, "x")
            assert (index, ret) == (0, 0)
            assert acl.mdl.get_dataset_num_buffers(self.input_dataset) == 1

        def forward(self, array, asynchronous=False):
            data = acl.mdl.get_dataset_buffer(self.input_dataset, 0)
            host = np.ascontiguousarray(array, np.float32)
            check(acl.rt.memcpy(acl.get_data_buffer_addr(data),
                                acl.get_data_buffer_size_v2(data),
                                acl.util.numpy_to_ptr(host), host.nbytes,
                                ACL_MEMCPY_HOST_TO_DEVICE), "memcpy in")
            if asynchronous:
                check(acl.mdl.execute_async(self.model_id, self.input_dataset,
                                            self.output_dataset, self.stream), "execute_async")
                check(acl.rt.synchronize_stream(self.stream), "synchronize_stream")
            else:
                check(acl.mdl.execute(self.model_id, self.input_dataset, self.output_dataset),
                      "execute")
            out = acl.mdl.get_dataset_buffer(self.output_dataset, 0)
            size = acl.get_data_buffer_size_v2(out)
            result = bytes(size)
            check(acl.rt.memcpy(acl.util.bytes_to_ptr(result), size,
                                acl.get_data_buffer_addr(out), size,
                                ACL_MEMCPY_DEVICE_TO_HOST), "memcpy out")
            return np.frombuffer(result, np.float32).reshape(4, 10)

        def errors(self):
            assert acl.mdl.execute(0x1234, self.input_dataset, self.output_dataset) == 100011
            assert "modelId" in acl.get_recent_err_msg()
            empty = acl.mdl.create_dataset()
            assert acl.mdl.execute(self.model_id, empty, self.output_dataset) == 100017
            check(acl.mdl.destroy_dataset(empty), "destroy_dataset")
            assert acl.mdl.execute(self.model_id, empty, self.output_dataset) == 100000
            assert acl.mdl.get_input_size_by_index(self.model_desc, 5) == 0
            assert acl.mdl.get_input_data_type(self.model_desc, 5) == -1
            _, ret = acl.mdl.load_from_file(model_path + ".missing")
            assert ret == 100003, ret

        def load_from_memory(self):
            with open(model_path, "rb") as file:
                blob = file.read()
            model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(blob), len(blob))
            check(ret, "load_from_mem")
            assert model_id != self.model_id
            check(acl.mdl.unload(model_id), "unload")
            assert acl.mdl.unload(model_id) == 100011

        def release(self):
            for dataset in (self.input_dataset, self.output_dataset):
                for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
                    data = acl.mdl.get_dataset_buffer(dataset, i)
                    check(acl.rt.free(acl.get_data_buffer_addr(data)), "free")
                    check(acl.destroy_data_buffer(data), "destroy_data_buffer")
                check(acl.mdl.destroy_dataset(dataset), "destroy_dataset")
            check(acl.mdl.destroy_desc(self.model_desc), "destroy_desc")
            check(acl.mdl.unload(self.model_id), "unload")
            check(acl.rt.destroy_stream(self.stream), "destroy_stream")
            check(acl.rt.destroy_context(self.context), "destroy_context")
            check(acl.rt.reset_device(DEVICE_ID), "reset_device")
            check(acl.finalize(), "finalize")


    net = Net()
    net.describe()
    for asynchronous in (False, True, False):
        np.testing.assert_allclose(net.forward(x, asynchronous), expected, rtol=1e-5, atol=1e-5)
    net.errors()
    net.load_from_memory()
    net.release()
    print("mdl inference OK")
"""


@pytest.mark.skipif(not HAVE_OM, reason=NO_OM)
def test_sample_inference_program_in_a_subprocess(tmp_path):
    model = _mlp()
    _convert(model, tmp_path / "mlp.om")
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    (y,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    script = tmp_path / "infer.py"
    script.write_text(textwrap.dedent(INFERENCE_PROGRAM))
    result = subprocess.run(
        [sys.executable, "-m", "openacl.compat", str(script), str(tmp_path / "mlp.om"),
         str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert "mdl inference OK" in result.stdout


# -- the conventions, in process --------------------------------------------------------------
@pytest.fixture
def acl_runtime():
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    yield
    acl.finalize()


def test_return_shapes(acl_runtime):
    from openacl import mdl
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx

    model_id = mdl.load_lowered(lower(import_onnx(_mlp())))
    desc = acl.mdl.create_desc()
    assert isinstance(desc, int) and desc != 0
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.get_num_inputs(desc) == 1
    assert acl.mdl.get_output_size_by_index(desc, 0) == 4 * 10 * 4
    dims, ret = acl.mdl.get_output_dims(desc, 0)
    assert (dims, ret) == ({"name": "y", "dimCount": 2, "dims": [4, 10]}, 0)
    assert acl.mdl.get_output_data_type(desc, 0) == 0
    assert type(acl.mdl.get_output_format(desc, 0)) is int
    assert acl.mdl.get_output_index_by_name(desc, "nope") == (0, ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_desc(desc, 0x99) == ACL_ERROR_INVALID_MODEL_ID
    dataset = acl.mdl.create_dataset()
    assert acl.mdl.add_dataset_buffer(dataset, 0x42) == (0, ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_dataset_buffer(dataset, 0) == 0
    buffer = acl.create_data_buffer(0, 0)
    assert acl.mdl.add_dataset_buffer(dataset, buffer) == (dataset, 0)
    assert acl.mdl.get_dataset_buffer(dataset, 0) == buffer
    assert acl.mdl.execute(model_id, dataset, dataset) == ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert acl.mdl.destroy_dataset(dataset) == 0
    assert acl.destroy_data_buffer(buffer) == 0
    assert acl.mdl.destroy_desc(desc) == 0
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.unload(model_id) == ACL_ERROR_INVALID_MODEL_ID
    assert set(acl.mdl.__all__) >= {"load_from_file", "load_from_mem", "execute",
                                    "execute_async", "get_cur_output_dims"}
    assert "mdl" in acl.__all__


def test_recovered_internal_errors_leave_no_recent_message(acl_runtime):
    """An error an internal handler recovers from is not the recent error: after unload, a
    successful get_cur_output_dims (its model lookup fails and falls back to the desc)."""
    import openacl
    from openacl import mdl
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx

    model_id = mdl.load_lowered(lower(import_onnx(_mlp())))
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.unload(model_id) == 0
    acl.get_recent_err_msg()
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    assert ret == 0 and dims["dims"] == [4, 10]
    assert acl.get_recent_err_msg() is None
    # the Pythonic face: the same call, and a failing one that records its own message
    assert mdl.get_cur_output_dims(desc, 0).dims == (4, 10)
    assert openacl.get_recent_err_msg() is None
    with pytest.raises(openacl.AclError):
        mdl.get_cur_output_dims(desc, 5)
    message = openacl.get_recent_err_msg()
    assert message is not None and "5" in message and "MODEL_ID" not in message
    # a compat call that fails records its message; the next success does not clear it,
    # but nothing recovered in between overwrites it
    assert acl.mdl.unload(model_id) == ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.get_cur_output_dims(desc, 0)[1] == 0
    assert "ACL_ERROR_INVALID_MODEL_ID" in acl.get_recent_err_msg()
    assert acl.mdl.destroy_desc(desc) == 0


def test_recovered_error_in_a_lowering_leaves_no_message(acl_runtime):
    """A nearest Resize by 1.5 is tried on the upsample operator first, which refuses it
    (an AclError the lowering recovers from), then lowered as matrices: loading and running
    it leave no recent message behind."""
    import openacl
    from openacl import mdl
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx

    scales = numpy_helper.from_array(np.array([1, 1, 1.5, 1.5], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 6, 6])], [scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    openacl.get_recent_err_msg()
    model_id = mdl.load_lowered(lower(import_onnx(model)))
    assert openacl.get_recent_err_msg() is None
    assert acl.mdl.unload(model_id) == 0
    assert acl.get_recent_err_msg() is None
