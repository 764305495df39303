"""Values only the host handles (model/host_values.py): string tensors, sequences and maps
flow between host nodes and out of InferenceSession as onnxruntime returns them; a compiled
stage never sees them; the ACL model API refuses them by name."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import openacl  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model.host_values import kind, type_proto, type_string  # noqa: E402

ML = helper.make_opsetid("ai.onnx.ml", 2)


def _model(nodes, inputs, outputs, initializers=(), ml=False):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", 17), *([ML] if ml else [])]
    return helper.make_model(graph, opset_imports=opsets)


def _ort(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _same(ours, ref):
    if isinstance(ref, list):
        assert isinstance(ours, list) and len(ours) == len(ref)
        for a, b in zip(ours, ref, strict=True):
            _same(a, b)
    elif isinstance(ref, dict):
        assert ours == ref
    else:
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        assert (ours == ref).all()


def _ragged_split():
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=0),
             helper.make_node("SequenceAt", ["parts", "one"], ["second"]),
             helper.make_node("Add", ["second", "second"], ["y"]),
             helper.make_node("Identity", ["parts"], ["parts_out"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_sequence_value_info("parts_out", TensorProto.FLOAT, None)],
                  [helper.make_tensor("one", TensorProto.INT64, [], [1]),
                   helper.make_tensor("sizes", TensorProto.INT64, [2], [2, 3])])


def test_a_ragged_sequence_flows_between_host_nodes_and_out():
    model = _ragged_split()
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    ref = _ort(model).run(None, {"x": x})
    with openacl.InferenceSession(model) as session:
        for _ in range(2):  # the second run replays the cached stages
            ours = session.run(None, {"x": x})
            _same(ours, ref)
        assert [a.type for a in session.get_outputs()] == ["tensor(float)",
                                                           "seq(tensor(float))"]
        assert session.get_outputs()[1].shape == []


def _label_encoder():
    nodes = [helper.make_node("LabelEncoder", ["x"], ["codes"], domain="ai.onnx.ml",
                              keys_strings=["a", "b", "c"], values_int64s=[1, 2, 3],
                              default_int64=-1),
             helper.make_node("Add", ["codes", "codes"], ["doubled"]),
             helper.make_node("Identity", ["x"], ["echo"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.STRING, ["N"])],
                  [helper.make_tensor_value_info("doubled", TensorProto.INT64, None),
                   helper.make_tensor_value_info("echo", TensorProto.STRING, None)], ml=True)


@pytest.mark.parametrize("feed", [np.array(["a", "c", "zz"]),
                                  np.array(["a", "c", "zz"], dtype=object)])
def test_string_tensors_in_and_out(feed):
    model = _label_encoder()
    ref = _ort(model).run(None, {"x": feed})
    with openacl.InferenceSession(model) as session:
        ours = session.run(None, {"x": feed})
        assert ours[0].tolist() == ref[0].tolist() == [2, 6, -2]
        assert ours[1].dtype == object and ours[1].tolist() == ["a", "c", "zz"]
        assert [a.type for a in session.get_inputs()] == ["tensor(string)"]
        assert [a.type for a in session.get_outputs()] == ["tensor(int64)", "tensor(string)"]


def test_a_string_input_given_numbers_is_refused_by_name():
    with openacl.InferenceSession(_label_encoder()) as session:
        with pytest.raises(AclError, match="'x'"):
            session.run(None, {"x": np.zeros(3, np.float32)})


def test_the_acl_model_api_refuses_host_values_by_name(tmp_path):
    import onnx

    from openacl import mdl, rt
    from openacl.model.converter import convert_onnx

    onnx.save(_label_encoder(), str(tmp_path / "codes.onnx"))
    convert_onnx(tmp_path / "codes.onnx", tmp_path / "codes.om")
    with openacl.InferenceSession(str(tmp_path / "codes.om")) as session:  # it runs here
        assert session.run(None, {"x": np.array(["b"])})[0].tolist() == [4]
    openacl.init()
    rt.set_device(0)
    try:
        with pytest.raises(AclError) as info:
            mdl.load_from_file(str(tmp_path / "codes.om"))
        assert info.value.code == ACL_ERROR_FEATURE_UNSUPPORTED
        assert "'x' (tensor(string))" in str(info.value)
        assert "'echo' (tensor(string))" in str(info.value)
    finally:
        rt.reset_device(0)
        openacl.finalize()


def test_a_sequence_input_is_refused_by_name():
    nodes = [helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0)]
    model = _model(nodes, [helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT,
                                                                  None)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(AclError) as info:
        openacl.InferenceSession(model)
    assert info.value.code == ACL_ERROR_PARSE_MODEL
    assert "'parts' is a sequence_type" in str(info.value)


def test_type_names_follow_onnxruntime():
    assert type_string(type_proto([{3: np.float32(0.5)}])) == "seq(map(int64,tensor(float)))"
    assert type_string(type_proto([{"cat": 1.0}])) == "seq(map(string,tensor(double)))"
    assert type_string(type_proto(np.array(["a"], dtype=object))) == "tensor(string)"
    assert type_string(type_proto([np.zeros(2, np.int64)])) == "seq(tensor(int64))"
    assert type_string(type_proto([])) == "seq(tensor(float))"
    # a tensor's kind is its dtype and shape; a sequence's its type, whatever its length
    assert kind(np.zeros((2, 3), np.float32)) == (np.dtype(np.float32), (2, 3))
    assert kind([np.zeros(2)]) == kind([np.ones(2), np.ones(5)])
    assert kind([np.zeros(2)]) != kind([np.zeros(2, np.int64)])
