"""``InferenceSession`` as a program meets it: feeds checked like onnxruntime checks them, and
a session's implicit runtime (started when the program has not called ``openacl.init``)
held while the session lives and given back by ``close`` (runtime/core's implicit holds)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import openacl  # noqa: E402
from openacl import rt  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_REPEAT_FINALIZE,
    ACL_ERROR_REPEAT_INITIALIZE,
    AclError,
)


def _add_model() -> bytes:
    """y = a + b over float32 [2, 3]."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "add",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString()


FEEDS = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), 2, np.float32)}


# -- feeds ------------------------------------------------------------------------------------
def test_run_refuses_an_unknown_feed_name_naming_it_and_the_inputs():
    with openacl.InferenceSession(_add_model()) as session:
        with pytest.raises(AclError) as caught:
            session.run(None, {**FEEDS, "c": FEEDS["a"]})
        assert caught.value.code == ACL_ERROR_MODEL_INPUT_NOT_MATCH
        assert "['c']" in str(caught.value) and "['a', 'b']" in str(caught.value)
        (y,) = session.run(None, FEEDS)  # the session still works
        np.testing.assert_array_equal(y, np.full((2, 3), 3, np.float32))


@pytest.mark.parametrize("feeds", [[FEEDS["a"], FEEDS["b"]], None, "a"])
def test_run_refuses_a_feed_that_is_not_a_dict(feeds):
    with openacl.InferenceSession(_add_model()) as session:
        with pytest.raises(AclError) as caught:
            session.run(None, feeds)
        assert caught.value.code == ACL_ERROR_INVALID_PARAM
        assert "argument 'feeds'" in str(caught.value) and "['a', 'b']" in str(caught.value)


def test_run_async_checks_feeds_before_it_starts():
    with openacl.InferenceSession(_add_model()) as session:
        with pytest.raises(AclError, match="does not have"):
            session.run_async(None, {"x": FEEDS["a"]})


def test_a_mapping_that_is_not_a_dict_is_accepted():
    from types import MappingProxyType

    with openacl.InferenceSession(_add_model()) as session:
        (y,) = session.run(None, MappingProxyType(FEEDS))
    np.testing.assert_array_equal(y, np.full((2, 3), 3, np.float32))


# -- the implicit runtime ---------------------------------------------------------------------
def test_a_session_starts_the_runtime_and_close_gives_it_back():
    assert not openacl.is_initialized()
    session = openacl.InferenceSession(_add_model())
    assert openacl.is_initialized() and rt.get_device() == 0
    session.close()
    assert not openacl.is_initialized()
    session.close()  # idempotent


def test_init_after_a_session_is_not_a_repeat():
    session = openacl.InferenceSession(_add_model())
    openacl.init()  # the program's own init adopts the session's runtime
    session.close()
    assert openacl.is_initialized()  # the program's init keeps it
    with pytest.raises(AclError) as caught:
        openacl.init()  # a true repeat is still one
    assert caught.value.code == ACL_ERROR_REPEAT_INITIALIZE
    assert openacl.finalize_reference() == 1
    assert openacl.finalize_reference() == 0
    assert not openacl.is_initialized()


def test_init_with_other_settings_after_a_session_says_why():
    with openacl.InferenceSession(_add_model()):
        with pytest.raises(AclError) as caught:
            openacl.init({"stream_mode": "inline"})
        assert caught.value.code == ACL_ERROR_REPEAT_INITIALIZE
        assert "before making sessions" in str(caught.value)


def test_the_runtime_lives_while_any_session_or_init_holds_it():
    first = openacl.InferenceSession(_add_model())
    second = openacl.InferenceSession(_add_model())
    first.close()
    assert second.run(None, FEEDS)[0][0, 0] == 3
    second.close()
    assert not openacl.is_initialized()
    openacl.init()
    session = openacl.InferenceSession(_add_model())
    assert openacl.finalize_reference() == 0
    assert openacl.is_initialized()  # the session still holds it
    assert session.run(None, FEEDS)[0][0, 0] == 3
    session.close()
    assert not openacl.is_initialized()


def test_finalize_reference_without_the_programs_init_is_refused():
    with openacl.InferenceSession(_add_model()):
        with pytest.raises(AclError) as caught:
            openacl.finalize_reference()
        assert caught.value.code == ACL_ERROR_REPEAT_FINALIZE


def test_close_after_finalize_does_nothing():
    session = openacl.InferenceSession(_add_model())
    with pytest.warns(openacl.LeakWarning):  # the session's arena, released by finalize
        openacl.finalize()  # tears down at once, whatever holds it
    session.close()
    assert not openacl.is_initialized()
    openacl.init()  # a fresh runtime: the stale hold is not counted against it
    assert openacl.finalize_reference() == 0


def test_a_session_keeps_the_programs_device_and_context():
    openacl.init()
    rt.set_device(0)
    context = rt.get_context()
    openacl.InferenceSession(_add_model()).close()
    assert rt.get_context() == context  # not reset by the session
    rt.reset_device(0)
    openacl.finalize()


def test_a_session_that_fails_to_load_gives_the_runtime_back():
    with pytest.raises(AclError):
        openacl.InferenceSession(b"not a model")
    assert not openacl.is_initialized()


# -- load errors ------------------------------------------------------------------------------
def test_an_onnx_model_without_onnx_installed_says_how_to_install_it(monkeypatch):
    model = _add_model()
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    with pytest.raises(AclError) as caught:
        openacl.InferenceSession(model)
    assert "pip install 'openacl[onnx]'" in str(caught.value)
    assert not openacl.is_initialized()


def test_input_shapes_that_leave_inputs_out_name_every_one_with_its_rank():
    dynamic = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", 3])
               for name in "abc"]
    graph = helper.make_graph(
        [helper.make_node("Sum", ["a", "b", "c"], ["y"])], "sum3", dynamic,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(AclError) as caught:
        openacl.InferenceSession(model, input_shapes={"a": (2, 3)})
    assert caught.value.code == ACL_ERROR_INVALID_PARAM
    assert "2 inputs need shapes: b (rank 2: n,3), c (rank 2: n,3)" in str(caught.value)


def test_output_names_given_as_one_string_is_refused():
    with openacl.InferenceSession(_add_model()) as session:
        with pytest.raises(AclError, match="give a list of names"):
            session.run("y", FEEDS)
        assert session.run(["y"], FEEDS)[0][0, 0] == 3
