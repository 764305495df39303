"""The model runtime (``openacl.mdl``, aclmdl semantics) against onnxruntime.

Models are built with onnx.helper, converted in memory (import, lower, plan) and loaded from
a .om file and from memory when ``openacl.model.om`` is present, else straight from the
lowered graph (``load_lowered``). Inputs and outputs travel in datasets of DataBuffers over
device memory, as an ACL program passes them.
"""

from __future__ import annotations

import importlib.util
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl import mdl  # noqa: E402
from openacl.dtypes import DataType, Format  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_DESERIALIZE_MODEL,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
)
from openacl.model.lowering import lower  # noqa: E402
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.plan import plan_memory  # noqa: E402

HAVE_OM = importlib.util.find_spec("openacl.model.om") is not None
NO_OM = "openacl.model.om (the offline model file) is not in this tree yet"
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
THREAD_RUNS = 20  # executions per thread in the two-model concurrency test
JOIN_TIMEOUT_S = 60.0
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _rt(runtime):
    yield


# -- models -----------------------------------------------------------------------------------
def _onnx_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tiny_model():
    """The seed's model: x[1,32] @ W[32,64], then ReLU."""
    weight = RNG.standard_normal((32, 64)).astype(np.float32)
    return _onnx_model([helper.make_node("MatMul", ["x", "W"], ["h"]),
                        helper.make_node("Relu", ["h"], ["y"])],
                       [("x", [1, 32])], [("y", [1, 64])], [("W", weight)])


def mlp_model():
    """A Gemm MLP, 64-128-10, batch 8, with two outputs (hidden and logits)."""
    w1 = (RNG.standard_normal((64, 128)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((10, 128)) * 0.1).astype(np.float32)
    b1, b2 = np.full(128, 0.1, np.float32), np.full(10, -0.2, np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["hidden"]),
             helper.make_node("Gemm", ["hidden", "W2", "b2"], ["logits"], transB=1)]
    return _onnx_model(nodes, [("x", [8, 64])], [("hidden", [8, 128]), ("logits", [8, 10])],
                       [("W1", w1), ("b1", b1), ("W2", w2), ("b2", b2)])


def two_input_model():
    """y = relu(a + b) with a[4,16], b[4,16]: two inputs, for counts and index-by-name."""
    return _onnx_model([helper.make_node("Add", ["a", "b"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"])],
                       [("a", [4, 16]), ("b", [4, 16])], [("y", [4, 16])])


def _lowered(model):
    lowered = lower(import_onnx(model))
    return lowered, plan_memory(lowered)


def load(model, tmp_path=None, how: str = "auto") -> int:
    """Load ``model`` through the .om file when om.py exists (else in memory)."""
    lowered, plan = _lowered(model)
    if how == "lowered" or not HAVE_OM:
        return mdl.load_lowered(lowered, plan)
    from openacl.model import om

    path = tmp_path / "model.om"
    om.save_model(lowered, plan, path)
    if how == "mem":
        return mdl.load_from_mem(path.read_bytes())
    return mdl.load_from_file(path)


def reference(model, feeds):
    return ort.InferenceSession(model.SerializeToString()).run(None, feeds)


# -- datasets over device memory ----------------------------------------------------------------
class DeviceIO:
    """Input and output datasets over rt.malloc'd buffers sized from the model description."""

    def __init__(self, model_id: int) -> None:
        self.desc = mdl.create_desc()
        mdl.get_desc(self.desc, model_id)
        self.inputs = self._dataset(mdl.get_num_inputs(self.desc), mdl.get_input_size_by_index)
        self.outputs = self._dataset(mdl.get_num_outputs(self.desc),
                                     mdl.get_output_size_by_index)

    def _dataset(self, count, size_of):
        dataset = mdl.create_dataset()
        for index in range(count):
            size = size_of(self.desc, index)
            buffer = openacl.create_data_buffer(openacl.rt.malloc(size), size)
            mdl.add_dataset_buffer(dataset, buffer)
        return dataset

    def _buffer(self, dataset, index):
        buffer = mdl.get_dataset_buffer(dataset, index)
        return openacl.get_data_buffer_addr(buffer), openacl.get_data_buffer_size(buffer)

    def feed(self, *arrays: np.ndarray) -> None:
        for index, array in enumerate(arrays):
            host = np.ascontiguousarray(array, np.float32)
            address, size = self._buffer(self.inputs, index)
            openacl.rt.memcpy(address, size, openacl.util.numpy_to_ptr(host), host.nbytes,
                              ACL_MEMCPY_HOST_TO_DEVICE)

    def fetch(self) -> list[np.ndarray]:
        results = []
        for index in range(mdl.get_dataset_num_buffers(self.outputs)):
            dims = mdl.get_cur_output_dims(self.desc, index).dims
            host = np.empty(dims, np.float32)
            address, size = self._buffer(self.outputs, index)
            openacl.rt.memcpy(openacl.util.numpy_to_ptr(host), host.nbytes, address,
                              host.nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
            results.append(host)
        return results

    def close(self) -> None:
        for dataset in (self.inputs, self.outputs):
            for index in range(mdl.get_dataset_num_buffers(dataset)):
                buffer = mdl.get_dataset_buffer(dataset, index)
                openacl.rt.free(openacl.get_data_buffer_addr(buffer))
                openacl.destroy_data_buffer(buffer)
            mdl.destroy_dataset(dataset)
        mdl.destroy_desc(self.desc)


def _assert_close(got, expected):
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


# -- execution ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [tiny_model, mlp_model], ids=["matmul_relu", "gemm_mlp"])
def test_execute_matches_onnxruntime(build, tmp_path):
    model = build()
    model_id = load(model, tmp_path)
    io = DeviceIO(model_id)
    try:
        for _ in range(3):
            x = RNG.standard_normal(tuple(mdl.get_input_dims(io.desc, 0).dims))
            x = x.astype(np.float32)
            io.feed(x)
            mdl.execute(model_id, io.inputs, io.outputs)
            _assert_close(io.fetch(), reference(model, {"x": x}))
    finally:
        io.close()
        mdl.unload(model_id)


def test_execute_async_on_a_stream_matches_onnxruntime(tmp_path):
    model = mlp_model()
    model_id = load(model, tmp_path)
    io = DeviceIO(model_id)
    stream = openacl.rt.create_stream()
    try:
        x = RNG.standard_normal((8, 64)).astype(np.float32)
        io.feed(x)
        mdl.execute_async(model_id, io.inputs, io.outputs, stream)
        openacl.rt.synchronize_stream(stream)
        _assert_close(io.fetch(), reference(model, {"x": x}))
    finally:
        openacl.rt.destroy_stream(stream)
        io.close()
        mdl.unload(model_id)


def test_back_to_back_async_runs_on_two_streams_are_ordered(tmp_path):
    """Runs share the model's arena: a launch on a second stream waits for the first."""
    model = tiny_model()
    model_id = load(model, tmp_path)
    first, second = DeviceIO(model_id), DeviceIO(model_id)
    streams = [openacl.rt.create_stream(), openacl.rt.create_stream()]
    try:
        xs = [RNG.standard_normal((1, 32)).astype(np.float32) for _ in range(2)]
        first.feed(xs[0])
        second.feed(xs[1])
        for _ in range(5):
            mdl.execute_async(model_id, first.inputs, first.outputs, streams[0])
            mdl.execute_async(model_id, second.inputs, second.outputs, streams[1])
        for stream in streams:
            openacl.rt.synchronize_stream(stream)
        _assert_close(first.fetch(), reference(model, {"x": xs[0]}))
        _assert_close(second.fetch(), reference(model, {"x": xs[1]}))
    finally:
        for stream in streams:
            openacl.rt.destroy_stream(stream)
        first.close()
        second.close()
        mdl.unload(model_id)


def test_a_run_allocates_nothing_after_the_first(tmp_path):
    model_id = load(mlp_model(), tmp_path)
    io = DeviceIO(model_id)
    try:
        io.feed(RNG.standard_normal((8, 64)))
        mdl.execute(model_id, io.inputs, io.outputs)
        before = openacl.memory_stats()
        for _ in range(5):
            mdl.execute(model_id, io.inputs, io.outputs)
        after = openacl.memory_stats()
        for key in ("allocation.all.allocated", "allocated_bytes.all.current",
                    "segment.all.allocated"):
            assert after[key] == before[key], key
    finally:
        io.close()
        mdl.unload(model_id)


def test_two_models_from_two_threads_on_two_streams(tmp_path):
    models = [tiny_model(), mlp_model()]
    ids = []
    for i, model in enumerate(models):
        (tmp_path / str(i)).mkdir()
        ids.append(load(model, tmp_path / str(i)))
    context = openacl.rt.get_context()
    errors: list[BaseException] = []

    def worker(model, model_id):
        try:
            openacl.rt.set_context(context)
            stream = openacl.rt.create_stream()
            io = DeviceIO(model_id)
            try:
                shape = tuple(mdl.get_input_dims(io.desc, 0).dims)
                for _ in range(THREAD_RUNS):
                    x = RNG.standard_normal(shape).astype(np.float32)
                    io.feed(x)
                    mdl.execute_async(model_id, io.inputs, io.outputs, stream)
                    openacl.rt.synchronize_stream(stream)
                    _assert_close(io.fetch(), reference(model, {"x": x}))
            finally:
                io.close()
                openacl.rt.destroy_stream(stream)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=pair) for pair in zip(models, ids,
                                                                          strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
        assert not thread.is_alive(), "a worker hung"
    for model_id in ids:
        mdl.unload(model_id)
    if errors:
        raise errors[0]


def test_unload_frees_everything():
    baseline = openacl.memory_stats()["allocated_bytes.all.current"]
    model_id = load(mlp_model(), how="lowered")
    assert openacl.memory_stats()["allocated_bytes.all.current"] > baseline
    io = DeviceIO(model_id)
    io.feed(RNG.standard_normal((8, 64)))
    mdl.execute(model_id, io.inputs, io.outputs)
    io.close()
    mdl.unload(model_id)
    assert openacl.memory_stats()["allocated_bytes.all.current"] == baseline
    with pytest.raises(AclError) as info:
        mdl.unload(model_id)
    assert info.value.code == ACL_ERROR_INVALID_MODEL_ID


# -- the description -------------------------------------------------------------------------
def test_every_getter_describes_the_model():
    model_id = load(mlp_model(), how="lowered")
    desc = mdl.create_desc()
    try:
        mdl.get_desc(desc, model_id)
        assert (mdl.get_num_inputs(desc), mdl.get_num_outputs(desc)) == (1, 2)
        assert mdl.get_input_name_by_index(desc, 0) == "x"
        assert [mdl.get_output_name_by_index(desc, i) for i in range(2)] == ["hidden", "logits"]
        dims = mdl.get_input_dims(desc, 0)
        assert (dims.name, dims.dims, dims.dim_count) == ("x", (8, 64), 2)
        assert mdl.get_output_dims(desc, 1) == mdl.IODims("logits", (8, 10))
        assert mdl.get_cur_output_dims(desc, 0) == mdl.IODims("hidden", (8, 128))
        assert mdl.get_input_data_type(desc, 0) == DataType.ACL_FLOAT
        assert mdl.get_output_data_type(desc, 1) == DataType.ACL_FLOAT
        assert mdl.get_input_format(desc, 0) == Format.ACL_FORMAT_ND
        assert mdl.get_output_format(desc, 0) == Format.ACL_FORMAT_ND
        assert mdl.get_input_size_by_index(desc, 0) == 8 * 64 * 4
        assert mdl.get_output_size_by_index(desc, 0) == 8 * 128 * 4
        assert mdl.get_output_size_by_index(desc, 1) == 8 * 10 * 4
        assert mdl.get_input_index_by_name(desc, "x") == 0
        assert mdl.get_output_index_by_name(desc, "logits") == 1
        for getter, argument in ((mdl.get_input_size_by_index, 1),
                                 (mdl.get_output_dims, 2),
                                 (mdl.get_input_name_by_index, -1),
                                 (mdl.get_input_index_by_name, "nope"),
                                 (mdl.get_output_index_by_name, "x")):
            with pytest.raises(AclError) as info:
                getter(desc, argument)
            assert info.value.code == ACL_ERROR_INVALID_PARAM
        mdl.unload(model_id)
        assert mdl.get_num_outputs(desc) == 2  # a description is a snapshot
    finally:
        mdl.destroy_desc(desc)
    with pytest.raises(AclError) as info:
        mdl.get_num_inputs(desc)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_get_desc_of_two_inputs_and_an_empty_desc():
    model_id = load(two_input_model(), how="lowered")
    desc = mdl.create_desc()
    with pytest.raises(AclError) as info:
        mdl.get_num_inputs(desc)  # not filled yet
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    mdl.get_desc(desc, model_id)
    assert mdl.get_num_inputs(desc) == 2
    assert mdl.get_input_index_by_name(desc, "b") == 1
    with pytest.raises(AclError) as info:
        mdl.get_desc(desc, model_id + 1)
    assert info.value.code == ACL_ERROR_INVALID_MODEL_ID
    mdl.destroy_desc(desc)
    mdl.unload(model_id)


# -- datasets and errors --------------------------------------------------------------------
def test_dataset_functions():
    dataset = mdl.create_dataset()
    assert mdl.get_dataset_num_buffers(dataset) == 0
    pointer = openacl.rt.malloc(64)
    buffers = [openacl.create_data_buffer(pointer, 64), openacl.create_data_buffer(0, 0)]
    for buffer in buffers:
        assert mdl.add_dataset_buffer(dataset, buffer) == dataset
    assert mdl.get_dataset_num_buffers(dataset) == 2
    assert [mdl.get_dataset_buffer(dataset, i) for i in range(2)] == buffers
    with pytest.raises(AclError) as info:
        mdl.get_dataset_buffer(dataset, 2)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    with pytest.raises(AclError) as info:
        mdl.add_dataset_buffer(dataset, 12345)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    mdl.destroy_dataset(dataset)
    assert openacl.get_data_buffer_size(buffers[0]) == 64  # the buffers are the caller's
    for call in (lambda: mdl.get_dataset_num_buffers(dataset),
                 lambda: mdl.add_dataset_buffer(dataset, buffers[0]),
                 lambda: mdl.destroy_dataset(dataset)):
        with pytest.raises(AclError) as info:
            call()
        assert info.value.code == ACL_ERROR_INVALID_PARAM
    for buffer in buffers:
        openacl.destroy_data_buffer(buffer)
    openacl.rt.free(pointer)


def _codes(call) -> int:
    with pytest.raises(AclError) as info:
        call()
    return info.value.code


def test_execute_error_codes():
    model_id = load(tiny_model(), how="lowered")
    io = DeviceIO(model_id)
    io.feed(RNG.standard_normal((1, 32)))
    small = openacl.create_data_buffer(openacl.rt.malloc(64), 64)
    try:
        assert _codes(lambda: mdl.execute(0x7777, io.inputs, io.outputs)) == \
            ACL_ERROR_INVALID_MODEL_ID
        assert _codes(lambda: mdl.execute_async(-1, io.inputs, io.outputs, 0)) == \
            ACL_ERROR_INVALID_MODEL_ID
        # the wrong number of buffers
        extra = mdl.create_dataset()
        for _ in range(2):
            mdl.add_dataset_buffer(extra, mdl.get_dataset_buffer(io.inputs, 0))
        assert _codes(lambda: mdl.execute(model_id, extra, io.outputs)) == \
            ACL_ERROR_MODEL_INPUT_NOT_MATCH
        assert _codes(lambda: mdl.execute(model_id, io.inputs, extra)) == \
            ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
        empty = mdl.create_dataset()
        assert _codes(lambda: mdl.execute(model_id, empty, io.outputs)) == \
            ACL_ERROR_MODEL_INPUT_NOT_MATCH
        # a buffer smaller than the model needs (64 bytes; it needs 128 in, 256 out)
        too_small = mdl.create_dataset()
        mdl.add_dataset_buffer(too_small, small)
        assert _codes(lambda: mdl.execute(model_id, too_small, io.outputs)) == \
            ACL_ERROR_MODEL_INPUT_NOT_MATCH
        assert _codes(lambda: mdl.execute_async(model_id, io.inputs, too_small, 0)) == \
            ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
        # a buffer that claims more than its memory holds: the pointer table refuses it
        address = openacl.get_data_buffer_addr(small)
        liar = mdl.create_dataset()
        lying = openacl.create_data_buffer(address, 64)
        lying_meta = openacl.tensor.lookup_data_buffer(lying)
        lying_meta.size = 4096  # as a C program could pass it
        mdl.add_dataset_buffer(liar, lying)
        assert _codes(lambda: mdl.execute(model_id, liar, io.outputs)) == \
            ACL_ERROR_INVALID_PARAM
        # destroyed datasets and buffers
        mdl.destroy_dataset(empty)
        assert _codes(lambda: mdl.execute(model_id, empty, io.outputs)) == \
            ACL_ERROR_INVALID_PARAM
        gone = openacl.create_data_buffer(address, 64)
        holder = mdl.create_dataset()
        mdl.add_dataset_buffer(holder, gone)
        openacl.destroy_data_buffer(gone)
        assert _codes(lambda: mdl.execute(model_id, holder, io.outputs)) == \
            ACL_ERROR_INVALID_PARAM
        # nothing was enqueued by the failed calls: a good run still works
        mdl.execute(model_id, io.inputs, io.outputs)
        for dataset in (extra, too_small, liar, holder):
            mdl.destroy_dataset(dataset)
        openacl.destroy_data_buffer(lying)
    finally:
        openacl.rt.free(openacl.get_data_buffer_addr(small))
        openacl.destroy_data_buffer(small)
        io.close()
        mdl.unload(model_id)


def test_larger_buffers_are_accepted():
    model = tiny_model()
    model_id = load(model, how="lowered")
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    x = RNG.standard_normal((1, 32)).astype(np.float32)
    pointers = [openacl.rt.malloc(4096), openacl.rt.malloc(4096)]
    openacl.rt.memcpy(pointers[0], 4096, openacl.util.numpy_to_ptr(x), x.nbytes,
                      ACL_MEMCPY_HOST_TO_DEVICE)
    buffers = [openacl.create_data_buffer(p, 4096) for p in pointers]
    mdl.add_dataset_buffer(inputs, buffers[0])
    mdl.add_dataset_buffer(outputs, buffers[1])
    mdl.execute(model_id, inputs, outputs)
    y = np.empty((1, 64), np.float32)
    openacl.rt.memcpy(openacl.util.numpy_to_ptr(y), y.nbytes, pointers[1], y.nbytes,
                      ACL_MEMCPY_DEVICE_TO_HOST)
    _assert_close([y], reference(model, {"x": x}))
    for dataset in (inputs, outputs):
        mdl.destroy_dataset(dataset)
    for buffer, pointer in zip(buffers, pointers, strict=True):
        openacl.destroy_data_buffer(buffer)
        openacl.rt.free(pointer)
    mdl.unload(model_id)


def test_the_engine_launch_checks_before_enqueuing():
    lowered, plan = _lowered(tiny_model())
    from openacl.model.engine import Engine

    engine = Engine(lowered, plan)
    try:
        pointer = openacl.rt.malloc(256)
        with pytest.raises(AclError) as info:
            engine.launch([(pointer, 128)], [], None)
        assert info.value.code == ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
        with pytest.raises(AclError) as info:
            engine.launch([(pointer, 127)], [(pointer, 256)], None)
        assert info.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH
        with pytest.raises(AclError) as info:
            engine.launch([(pointer + 200, 128)], [(pointer, 256)], None)
        assert info.value.code == ACL_ERROR_INVALID_PARAM
        engine.launch([(pointer, 128)], [(pointer, 256)], None)  # in and out may overlap
        openacl.rt.synchronize_stream(0)
        openacl.rt.free(pointer)
    finally:
        engine.close()
    with pytest.raises(AclError) as info:
        engine.launch([], [], None)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


# -- files -------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_OM, reason=NO_OM)
def test_load_from_file_and_from_memory_agree(tmp_path):
    model = mlp_model()
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    expected = reference(model, {"x": x})
    for how in ("file", "mem"):
        model_id = load(model, tmp_path, how)
        io = DeviceIO(model_id)
        io.feed(x)
        mdl.execute(model_id, io.inputs, io.outputs)
        _assert_close(io.fetch(), expected)
        io.close()
        mdl.unload(model_id)


@pytest.mark.skipif(not HAVE_OM, reason=NO_OM)
def test_load_from_memory_by_address(tmp_path):
    from openacl.model import om

    lowered, plan = _lowered(tiny_model())
    om.save_model(lowered, plan, tmp_path / "m.om")
    data = (tmp_path / "m.om").read_bytes()
    host = np.frombuffer(data, np.uint8).copy()
    model_id = mdl.load_from_mem(openacl.util.numpy_to_ptr(host), host.nbytes)
    desc = mdl.create_desc()
    mdl.get_desc(desc, model_id)
    assert mdl.get_output_dims(desc, 0).dims == (1, 64)
    mdl.destroy_desc(desc)
    mdl.unload(model_id)


@pytest.mark.skipif(not HAVE_OM, reason=NO_OM)
def test_a_bad_file_gives_the_loader_codes(tmp_path):
    from openacl.model import om

    assert _codes(lambda: mdl.load_from_file(tmp_path / "missing.om")) == ACL_ERROR_INVALID_FILE
    garbage = tmp_path / "garbage.om"
    garbage.write_bytes(b"not a model at all" * 10)
    assert _codes(lambda: mdl.load_from_file(garbage)) == ACL_ERROR_INVALID_FILE
    assert _codes(lambda: mdl.load_from_mem(garbage.read_bytes())) == ACL_ERROR_INVALID_FILE
    lowered, plan = _lowered(tiny_model())
    om.save_model(lowered, plan, tmp_path / "good.om")
    data = (tmp_path / "good.om").read_bytes()
    truncated = tmp_path / "truncated.om"
    truncated.write_bytes(data[:-100])
    assert _codes(lambda: mdl.load_from_file(truncated)) == ACL_ERROR_DESERIALIZE_MODEL
    assert _codes(lambda: mdl.load_from_mem(data, len(data) - 1)) == \
        ACL_ERROR_DESERIALIZE_MODEL


def test_bad_load_arguments():
    with pytest.raises(AclError) as info:
        mdl.load_from_file(42)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    with pytest.raises(AclError) as info:
        mdl.load_from_mem(0x1234, 10)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    with pytest.raises(AclError) as info:
        mdl.load_from_mem(b"abc", 10)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_openacl_mdl_is_lazy():
    assert openacl.mdl is mdl
