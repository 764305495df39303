"""pyACL's acl.op on OpenACL: single-op models (set_model_dir / load / openacl convert
--singleop), matching (100024 with the nearest candidates), handles, attributes, and every
error path returning a code."""

from __future__ import annotations

import json

import numpy as np
import pytest

import openacl
from openacl.aclop import singleop
from openacl.cli.main import main as cli_main
from openacl.compat.acl import op as acl_op
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_FILE_SIZE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
    ACL_ERROR_PARSE_FILE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
    get_recent_err_msg,
)
from openacl.util import bytes_to_ptr, numpy_to_ptr

ND = Format.ACL_FORMAT_ND
F16 = DataType.ACL_FLOAT16

ADD_OP = [{
    "op": "Add", "name": "add_fp16",
    "input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"},
                   {"format": "ND", "shape": [8, 16], "type": "float16"}],
    "output_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}],
}]


@pytest.fixture
def rt():
    openacl.init({"stream_mode": "inline"})
    openacl.rt.set_device(0)
    yield
    if openacl.is_initialized():
        openacl.finalize()


class Call:
    """Descs, buffers and device tensors of one test, released at the end."""

    def __init__(self) -> None:
        self.descs, self.buffers, self.tensors = [], [], []

    def desc(self, dtype, dims, fmt=ND) -> int:
        handle = openacl.create_tensor_desc(dtype, list(dims), fmt)
        self.descs.append(handle)
        return handle

    def tensor(self, array: np.ndarray) -> tuple[int, int, openacl.Tensor]:
        tensor = openacl.to_device(array)
        buffer = openacl.create_data_buffer(tensor.data_ptr, tensor.nbytes)
        self.tensors.append(tensor)
        self.buffers.append(buffer)
        return self.desc(array.dtype, array.shape), buffer, tensor

    def output(self, shape, dtype) -> tuple[int, int, openacl.Tensor]:
        return self.tensor(np.zeros(shape, dtype))

    def close(self) -> None:
        for handle in self.buffers:
            openacl.destroy_data_buffer(handle)
        for handle in self.descs:
            openacl.destroy_tensor_desc(handle)
        for tensor in self.tensors:
            tensor.free()


def _write(path, document) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def _add(call: Call, shape=(8, 16), dtype=np.float16, attr=0):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    da, ba, _ = call.tensor(a)
    db, bb, _ = call.tensor(b)
    dy, by, y = call.output(shape, dtype)
    ret = acl_op.execute_v2("Add", [da, db], [ba, bb], [dy], [by], attr, 0)
    return ret, a, b, y


def test_add_through_set_model_dir(rt, tmp_path):
    (tmp_path / "models").mkdir()
    _write(tmp_path / "models" / "add_op.json", ADD_OP)
    assert acl_op.set_model_dir(str(tmp_path / "models")) == ACL_SUCCESS
    call = Call()
    try:
        ret, a, b, y = _add(call)
        assert ret == ACL_SUCCESS
        openacl.rt.synchronize_device()
        np.testing.assert_allclose(y.numpy(), a + b, rtol=1e-3)
    finally:
        call.close()


@pytest.mark.parametrize("shape, dtype, expected", [
    ((4, 16), np.float16, "input[0] shape [4, 16] != [8, 16]"),
    ((8, 16), np.float32, "input[0] dtype float32 != float16"),
])
def test_mismatch_is_op_not_found_with_candidates(rt, tmp_path, shape, dtype, expected):
    assert acl_op.set_model_dir(_dir_with(tmp_path, ADD_OP)) == ACL_SUCCESS
    call = Call()
    try:
        ret, *_ = _add(call, shape, dtype)
        assert ret == ACL_ERROR_OP_NOT_FOUND
        message = get_recent_err_msg()
        assert "nearest candidates" in message and "add_fp16" in message
        assert expected in message
    finally:
        call.close()


def _dir_with(tmp_path, document, name="ops.json") -> str:
    directory = tmp_path / "m"
    directory.mkdir(exist_ok=True)
    _write(directory / name, document)
    return str(directory)


def test_attr_mismatch_and_unknown_op_type(rt, tmp_path):
    described = [{**ADD_OP[0], "op": "AddV2"}, {
        "op": "MatMul", "input_desc": [{"format": "ND", "shape": [2, 3], "type": "float32"},
                                       {"format": "ND", "shape": [3, 4], "type": "float32"}],
        "output_desc": [{"format": "ND", "shape": [2, 4], "type": "float32"}],
        "attr": [{"name": "transpose_x1", "type": "bool", "value": False}]}]
    acl_op.set_model_dir(_dir_with(tmp_path, described))
    call = Call()
    try:
        x1, b1, _ = call.tensor(np.ones((2, 3), np.float32))
        x2, b2, _ = call.tensor(np.ones((3, 4), np.float32))
        y, by, _ = call.output((2, 4), np.float32)
        attr = acl_op.create_attr()
        assert acl_op.set_attr_bool(attr, "transpose_x2", True) == ACL_SUCCESS
        assert acl_op.execute_v2("MatMul", [x1, x2], [b1, b2], [y], [by], attr, 0) == \
            ACL_ERROR_OP_NOT_FOUND
        assert "attr 'transpose_x2' = True != False" in get_recent_err_msg()
        assert acl_op.set_attr_bool(attr, "transpose_x2", 0) == ACL_SUCCESS  # pyACL's int
        assert acl_op.execute_v2("MatMul", [x1, x2], [b1, b2], [y], [by], attr, 0) == \
            ACL_SUCCESS  # the default value written out matches the model
        acl_op.destroy_attr(attr)
        ret, *_ = _add(call)
        assert ret == ACL_ERROR_OP_NOT_FOUND
        assert "no model of op type Add" in get_recent_err_msg()
    finally:
        call.close()


def test_dynamic_dims_match_any_size_within_range(rt, tmp_path):
    dynamic = [{"op": "Add",
                "input_desc": [{"format": "ND", "shape": [-1, 16], "type": "float16",
                                "shape_range": [[1, 8], [16, 16]]}] * 2,
                "output_desc": [{"format": "ND", "shape": [-1, 16], "type": "float16"}]}]
    acl_op.set_model_dir(_dir_with(tmp_path, dynamic))
    call = Call()
    try:
        assert _add(call, (5, 16))[0] == ACL_SUCCESS
        assert _add(call, (9, 16))[0] == ACL_ERROR_OP_NOT_FOUND
        assert "range [[1, 8], [16, 16]]" in get_recent_err_msg()
    finally:
        call.close()


def test_without_models_calls_run_directly(rt):
    call = Call()
    try:
        assert _add(call, (3, 5), np.float32)[0] == ACL_SUCCESS
    finally:
        call.close()


def test_slice_through_handle_with_const_inputs(rt, tmp_path):
    slice_op = [{"op": "Slice",
                 "input_desc": [{"format": "ND", "shape": [4, 6], "type": "float32"},
                                {"format": "ND", "shape": [2], "type": "int32"},
                                {"format": "ND", "shape": [2], "type": "int32"}],
                 "output_desc": [{"format": "ND", "shape": [2, 3], "type": "float32"}]}]
    acl_op.set_model_dir(_dir_with(tmp_path, slice_op))
    call = Call()
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    offsets, size = np.array([1, 2], np.int32), np.array([2, 3], np.int32)
    try:
        dx, bx, _ = call.tensor(x)
        do, bo, _ = call.tensor(offsets)
        ds, bs, _ = call.tensor(size)
        openacl.set_tensor_const(do, numpy_to_ptr(offsets), offsets.nbytes)
        openacl.set_tensor_const(ds, numpy_to_ptr(size), size.nbytes)
        dy, by, y = call.output((2, 3), np.float32)
        handle, ret = acl_op.create_handle("Slice", [dx, do, ds], [dy], 0)
        assert ret == ACL_SUCCESS and handle
        for _ in range(2):
            assert acl_op.execute_with_handle(handle, [bx, bo, bs], [by], 0) == ACL_SUCCESS
        openacl.rt.synchronize_device()
        np.testing.assert_array_equal(y.numpy(), x[1:3, 2:5])
        assert acl_op.destroy_handle(handle) is None
        dz, _, _ = call.output((2, 2), np.float32)  # not the model's output shape
        assert acl_op.create_handle("Slice", [dx, do, ds], [dz], 0) == \
            (0, ACL_ERROR_OP_NOT_FOUND)
    finally:
        call.close()


def test_convert_singleop_then_set_model_dir(rt, tmp_path, capsys):
    source = _write(tmp_path / "ops.json", ADD_OP)
    out = tmp_path / "compiled"
    assert cli_main(["convert", "--singleop", source, "-o", str(out)]) == 0
    compiled = json.loads((out / "0_add_fp16.op.json").read_text())
    assert compiled["format"] == singleop.COMPILED_FORMAT
    assert compiled["version"] == singleop.COMPILED_VERSION
    assert json.loads((out / "index.json").read_text())["ops"][0]["op"] == "Add"
    assert acl_op.set_model_dir(str(out)) == ACL_SUCCESS
    call = Call()
    try:
        assert _add(call)[0] == ACL_SUCCESS
        assert _add(call, (2, 2))[0] == ACL_ERROR_OP_NOT_FOUND
    finally:
        call.close()


def test_convert_without_singleop_converts_onnx(tmp_path, capsys):
    assert cli_main(["convert", str(tmp_path / "model.onnx")]) == 2  # ONNX path: no such file
    err = capsys.readouterr().err
    assert "model.onnx" in err and ("cannot read ONNX model" in err or "does not exist" in err)


def test_convert_bad_json_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert cli_main(["convert", "--singleop", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert "not valid JSON" in capsys.readouterr().err


MATMUL_4x3 = {"op": "MatMul", "name": "mm",
              "input_desc": [{"format": "ND", "shape": [4, 3], "type": "float"},
                             {"format": "ND", "shape": [5, 3], "type": "float"}],
              "output_desc": [{"format": "ND", "shape": [4, 5], "type": "float"}]}


def test_convert_singleop_validates_every_op_and_writes_nothing(tmp_path, capsys):
    ops = [ADD_OP[0], {**ADD_OP[0], "op": "NoSuchOp", "name": ""}, MATMUL_4x3,
           {**ADD_OP[0], "name": "", "output_desc": [{"format": "ND", "shape": [8, 15],
                                                       "type": "float16"}]}]
    source = _write(tmp_path / "ops.json", ops)
    out = tmp_path / "compiled"
    assert cli_main(["convert", "--singleop", source, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "3 of 4 op(s) are invalid, nothing was written" in err
    assert "op 1 (NoSuchOp): op type 'NoSuchOp' is not a single operator" in err
    assert "op 2 (MatMul, 'mm'): MatMul: input 'x2' does not match" in err  # k: 3 vs 5
    assert "op 3 (Add): Add: output 'y' does not match" in err
    assert "op 0" not in err
    assert not out.exists()
    with pytest.raises(openacl.AclError) as info:  # the library call: one error, first code
        singleop.compile_singleop(source, out)
    assert info.value.code == ACL_ERROR_OP_NOT_FOUND
    assert not openacl.is_initialized()  # its own runtime, torn down


def test_convert_singleop_accepts_what_op_run_runs(tmp_path, capsys):
    ops = [{**MATMUL_4x3, "attr": [{"name": "transpose_x2", "type": "bool", "value": True}]},
           {**MATMUL_4x3, "name": "dynamic",  # unknown dims: checked without binding
            "input_desc": [{"format": "ND", "shape": [-1, 3], "type": "float"},
                           {"format": "ND", "shape": [3, 5], "type": "float"}],
            "output_desc": [{"format": "ND", "shape": [-1, 5], "type": "float"}]},
           {"op": "Slice", "name": "value_inputs",  # offsets/size decide the shape
            "input_desc": [{"format": "ND", "shape": [4, 6], "type": "float"},
                           {"format": "ND", "shape": [2], "type": "int64"},
                           {"format": "ND", "shape": [2], "type": "int64"}],
            "output_desc": [{"format": "ND", "shape": [2, 3], "type": "float"}]}]
    source = _write(tmp_path / "ops.json", ops)
    out = tmp_path / "compiled"
    assert cli_main(["convert", "--singleop", source, "-o", str(out)]) == 0, \
        capsys.readouterr().err
    assert len(json.loads((out / "index.json").read_text())["ops"]) == 3


def test_convert_singleop_refuses_a_bad_attr_of_a_known_op(rt, tmp_path, capsys):
    source = _write(tmp_path / "ops.json", [{**MATMUL_4x3, "attr": [
        {"name": "no_such_attr", "type": "bool", "value": True}]}])
    assert cli_main(["convert", "--singleop", source, "-o", str(tmp_path / "o")]) == 2
    assert "no_such_attr" in capsys.readouterr().err
    assert openacl.is_initialized()  # the caller's runtime is left alone


def _compiled(version=singleop.COMPILED_VERSION, shape=(8, 16)) -> dict:
    desc = {**ADD_OP[0], "output_desc": [{"format": "ND", "shape": list(shape),
                                          "type": "float16"}]}
    return {"format": singleop.COMPILED_FORMAT, "version": version, "desc": desc}


@pytest.mark.parametrize("content, code, words", [
    ("{ truncated", ACL_ERROR_PARSE_FILE, "not valid JSON"),
    (json.dumps(_compiled(version=99)), ACL_ERROR_PARSE_FILE, "version 99 is not supported"),
    (json.dumps(_compiled(shape=(1 << 41, 16))), ACL_ERROR_PARSE_FILE, "out of range"),
    (json.dumps(_compiled(shape=(1 << 30, 1 << 30, 1 << 30))), ACL_ERROR_PARSE_FILE,
     "more than"),
    (json.dumps(_compiled(shape=[1] * 200)), ACL_ERROR_PARSE_FILE, "at most 128"),
    ("[" * 100000 + "]" * 100000, ACL_ERROR_PARSE_FILE, "JSON"),
    (json.dumps({**ADD_OP[0], "attr": [{"name": "x", "type": "tensor", "value": 1}]}),
     ACL_ERROR_PARSE_FILE, "unknown type 'tensor'"),
    (json.dumps({"op": "Add", "input_desc": "x", "output_desc": []}), ACL_ERROR_PARSE_FILE,
     "must be a list"),
])
def test_hostile_files_return_clean_codes(rt, tmp_path, content, code, words):
    directory = tmp_path / "hostile"
    directory.mkdir()
    (directory / "op.json").write_text(content)
    assert acl_op.set_model_dir(str(directory)) == code
    assert words in get_recent_err_msg()
    assert not acl_op.registry().active  # nothing half-registered


def test_oversized_and_missing_files(rt, tmp_path, monkeypatch):
    assert acl_op.set_model_dir(str(tmp_path / "absent")) == ACL_ERROR_INVALID_FILE
    monkeypatch.setattr(singleop, "MAX_FILE_BYTES", 64)
    assert acl_op.set_model_dir(_dir_with(tmp_path, ADD_OP)) == ACL_ERROR_INVALID_FILE_SIZE
    assert acl_op.set_model_dir(None) == ACL_ERROR_INVALID_PARAM


def test_load_from_memory(rt, tmp_path):
    data = bytearray(json.dumps(_compiled()).encode())
    assert acl_op.load(bytes_to_ptr(data), len(data)) == ACL_SUCCESS
    assert acl_op.registry().active
    call = Call()
    try:
        assert _add(call)[0] == ACL_SUCCESS
    finally:
        call.close()
    assert acl_op.load(bytes(data), len(data) + 1) == ACL_ERROR_INVALID_PARAM
    assert acl_op.load(b"\x00\xffOM binary", 10) == ACL_ERROR_PARSE_FILE
    assert ".om" in get_recent_err_msg()
    assert acl_op.load(12345, 10) == ACL_ERROR_INVALID_PARAM  # a wild pointer


def test_attr_setters_three_and_four_argument_forms(rt):
    attr = acl_op.create_attr()
    assert attr
    assert acl_op.set_attr_list_int(attr, "axes", [0, 1]) == ACL_SUCCESS
    assert acl_op.set_attr_list_int(attr, "axes", 2, [0, 1]) == ACL_SUCCESS
    assert acl_op.set_attr_list_int(attr, "axes", 3, [0, 1]) == ACL_ERROR_INVALID_PARAM
    assert acl_op.set_attr_list_float(attr, "f", 2, [0.5, 1]) == ACL_SUCCESS
    assert acl_op.set_attr_list_bool(attr, "b", [True, 0]) == ACL_SUCCESS
    assert acl_op.set_attr_list_bool(attr, "b", 2, [1, False]) == ACL_SUCCESS
    assert acl_op.set_attr_list_string(attr, "s", 1, ["x"]) == ACL_SUCCESS
    assert acl_op.set_attr_list_list_int(attr, "ll", [[1, 2], [3]]) == ACL_SUCCESS
    assert acl_op.set_attr_list_list_int(attr, "ll", 2, [2, 1], [[1, 2], [3]]) == ACL_SUCCESS
    assert acl_op.set_attr_list_list_int(attr, "ll", 2, [2, 2], [[1, 2], [3]]) == \
        ACL_ERROR_INVALID_PARAM
    assert acl_op.set_attr_int(attr, "i", 3) == ACL_SUCCESS
    assert acl_op.set_attr_float(attr, "f1", 1.5) == ACL_SUCCESS
    assert acl_op.set_attr_string(attr, "s1", "x") == ACL_SUCCESS
    assert acl_op.set_attr_data_type(attr, "dt", int(F16)) == (attr, ACL_SUCCESS)
    assert acl_op.set_attr_int(attr, "i", "three") == ACL_ERROR_INVALID_PARAM
    assert acl_op.set_attr_bool(attr, "b1", 2) == ACL_ERROR_INVALID_PARAM
    assert acl_op.destroy_attr(attr) is None
    assert acl_op.set_attr_int(attr, "i", 3) == ACL_ERROR_INVALID_PARAM  # destroyed


def test_error_paths_return_codes(rt):
    call = Call()
    try:
        x, bx, _ = call.tensor(np.ones((2, 2), np.float32))
        y, by, _ = call.output((2, 2), np.float32)
        assert acl_op.execute_v2("NoSuchOp", [x], [bx], [y], [by], 0, 0) == \
            ACL_ERROR_OP_NOT_FOUND
        assert acl_op.execute("Add", [x], [bx], [y], [by], 0, 0) != ACL_SUCCESS
        assert acl_op.execute_v2("Add", None, [bx], [y], [by], 0, 0) == ACL_ERROR_INVALID_PARAM
        assert acl_op.execute_v2("Add", [x, 12345], [bx, bx], [y], [by], 0, 0) == \
            ACL_ERROR_INVALID_PARAM
        assert acl_op.execute_with_handle(999, [bx], [by], 0) == ACL_ERROR_INVALID_PARAM
        assert acl_op.destroy_handle(999) is None
        assert acl_op.destroy_attr(999) is None
        assert acl_op.create_handle("Add", [x], [y], 0)[1] != ACL_SUCCESS
        assert acl_op.infer_shape("Add", [x, x], [bx, bx], 1, None, 0) == \
            ACL_ERROR_INVALID_PARAM
        assert acl_op.update_params("Add", [x, x], [y], 0) == ACL_SUCCESS
        attr = acl_op.create_attr()
        acl_op.set_attr_int(attr, "no_such_attr", 1)
        assert acl_op.update_params("Add", [x, x], [y], attr) == ACL_ERROR_OP_ATTR_NOT_MATCH
        acl_op.destroy_attr(attr)
        assert acl_op.compile("Add", [x, x], [y], 0, 7, 0, None) == ACL_ERROR_INVALID_PARAM
        assert acl_op.compile("Add", [x, x], [y], 0, 0, 1, None) == ACL_ERROR_INVALID_PARAM
        assert acl_op.execute_v2("Add", [x], [bx], [y], [by], 0, 0, "extra") == \
            ACL_ERROR_INVALID_PARAM  # a wrong argument count is a code too
    finally:
        call.close()


def test_infer_shape_cast_and_compile(rt):
    call = Call()
    try:
        x, bx, _ = call.tensor(np.ones((2, 3), np.float32))
        out = call.desc(np.float32, [1])
        assert acl_op.infer_shape("Add", [x, x], [bx, bx], 1, [out], 0) == ACL_SUCCESS
        assert openacl.get_tensor_desc_num_dims(out) == 2
        h, bh, half = call.output((2, 3), np.float16)
        assert acl_op.cast(x, bx, h, bh, 0, 0) == ACL_SUCCESS
        openacl.rt.synchronize_device()
        assert half.numpy().dtype == np.float16 and (half.numpy() == 1).all()
        handle, ret = acl_op.create_handle_for_cast(x, h, 0)
        assert ret == ACL_SUCCESS
        acl_op.destroy_handle(handle)
        y, by, _ = call.output((2, 3), np.float32)
        assert acl_op.compile("Add", [x, x], [y], 0, 0, 0, None) == ACL_SUCCESS
        assert not acl_op.registry().active  # compiling alone turns no matching on
        assert len(acl_op.registry().descriptions()) == 1
        acl_op.load(json.dumps(ADD_OP).encode(), len(json.dumps(ADD_OP)))
        assert acl_op.execute_v2("Add", [x, x], [bx, bx], [y], [by], 0, 0) == ACL_SUCCESS
        assert acl_op.cast(x, bx, h, bh, 0, 0) == ACL_ERROR_OP_NOT_FOUND  # no Cast model
    finally:
        call.close()


def test_uninitialized_returns_code(tmp_path):
    assert acl_op.set_model_dir(str(tmp_path)) == ACL_ERROR_UNINITIALIZE
    assert acl_op.create_attr() == 0


def test_registry_is_per_runtime(tmp_path):
    openacl.init({"stream_mode": "inline"})
    try:
        acl_op.set_model_dir(_dir_with(tmp_path, ADD_OP))
        assert acl_op.registry().active
    finally:
        openacl.finalize()
    openacl.init({"stream_mode": "inline"})
    try:
        assert not acl_op.registry().active
    finally:
        openacl.finalize()


def test_three_level_search_and_om_files_skipped(rt, tmp_path):
    deep = tmp_path / "a" / "b" / "c" / "d"  # a, a/b, a/b/c are read; a/b/c/d is not
    deep.mkdir(parents=True)
    _write(tmp_path / "a" / "b" / "c" / "add.json", ADD_OP)
    _write(deep / "mul.json", [{**ADD_OP[0], "op": "Mul"}])
    (tmp_path / "a" / "x.om").write_bytes(b"\x00om")
    assert acl_op.set_model_dir(str(tmp_path / "a")) == ACL_SUCCESS
    assert {d.op_type for d in acl_op.registry().descriptions()} == {"Add"}


# -- a handle whose value inputs are read at run time (the acl_execute_slice sample's flow) -----
def _slice_handle_call(call: Call, x: np.ndarray, out_shape):
    """Descs and buffers of a Slice over ``x`` with offsets/size in device buffers."""
    dx, bx, _ = call.tensor(x)
    do, ds = call.desc(np.int32, [2]), call.desc(np.int32, [2])
    dy, by, y = call.output(out_shape, x.dtype)
    handle, ret = acl_op.create_handle("Slice", [dx, do, ds], [dy], 0)
    assert ret == ACL_SUCCESS, get_recent_err_msg()
    return handle, bx, by, y


def _run_slice(call: Call, handle, bx, by, offsets, size) -> int:
    _, bo, _ = call.tensor(np.array(offsets, np.int32))
    _, bs, _ = call.tensor(np.array(size, np.int32))
    return acl_op.execute_with_handle(handle, [bx, bo, bs], [by], 0)


def test_slice_handle_binds_value_inputs_at_execute(rt):
    from openacl.aclop import OpHandle
    from openacl.runtime import core
    call = Call()
    x = np.random.default_rng(1).standard_normal((700, 3100)).astype(np.float16)
    try:
        handle, bx, by, y = _slice_handle_call(call, x, (600, 3000))
        program = core.current().handles.get(handle, OpHandle, "handle").program
        assert program.runtime_values == ["offsets", "size"] and not program._by_values
        for offsets in ([0, 0], [100, 100], [0, 0]):
            assert _run_slice(call, handle, bx, by, offsets, [600, 3000]) == ACL_SUCCESS
            openacl.rt.synchronize_device()
            np.testing.assert_array_equal(
                y.numpy(), x[offsets[0]:offsets[0] + 600, offsets[1]:offsets[1] + 3000])
        assert len(program._by_values) == 2  # bound once per distinct set of values
        assert _run_slice(call, handle, bx, by, [100, 7], [-1, 3000]) == ACL_SUCCESS
        openacl.rt.synchronize_device()
        np.testing.assert_array_equal(y.numpy(), x[100:700, 7:3007])
        # values whose result contradicts the declared output desc: both shapes named
        assert _run_slice(call, handle, bx, by, [0, 0], [300, 3000]) == \
            ACL_ERROR_OP_OUTPUT_NOT_MATCH
        message = get_recent_err_msg()
        assert "[300, 3000]" in message and "[600, 3000]" in message and "size" in message
        # values outside x: the input named
        assert _run_slice(call, handle, bx, by, [200, 0], [600, 3000]) == \
            ACL_ERROR_OP_INPUT_NOT_MATCH
        assert "size" in get_recent_err_msg()
        assert len(program._by_values) == 3
        assert acl_op.destroy_handle(handle) is None and not program._by_values
    finally:
        call.close()


def test_slice_handle_keeps_a_bounded_number_of_bindings(rt, monkeypatch):
    from openacl.aclop import program as program_module
    monkeypatch.setattr(program_module, "BOUND_PER_HANDLE", 2)
    call = Call()
    x = np.arange(60, dtype=np.float32).reshape(6, 10)
    try:
        handle, bx, by, y = _slice_handle_call(call, x, (2, 3))
        for start in range(4):
            assert _run_slice(call, handle, bx, by, [start, start], [2, 3]) == ACL_SUCCESS
            openacl.rt.synchronize_device()
            np.testing.assert_array_equal(y.numpy(), x[start:start + 2, start:start + 3])
        from openacl.aclop import OpHandle
        from openacl.runtime import core
        program = core.current().handles.get(handle, OpHandle, "handle").program
        assert list(program._by_values) == [((2, 2), (2, 3)), ((3, 3), (2, 3))]
        acl_op.destroy_handle(handle)
    finally:
        call.close()


def test_slice_handle_bad_value_inputs(rt):
    call = Call()
    x = np.zeros((4, 6), np.float32)
    try:
        dx, bx, _ = call.tensor(x)
        dy, by, _ = call.output((2, 3), np.float32)
        do, ds = call.desc(np.float32, [2]), call.desc(np.int32, [2])  # offsets not integer
        assert acl_op.create_handle("Slice", [dx, do, ds], [dy], 0)[1] == \
            ACL_ERROR_OP_INPUT_NOT_MATCH
        assert "offsets" in get_recent_err_msg()
        do = call.desc(np.int32, [2])
        handle, ret = acl_op.create_handle("Slice", [dx, do, ds], [dy], 0)
        assert ret == ACL_SUCCESS
        _, small, _ = call.tensor(np.zeros(1, np.int32))  # 4 bytes for 8 the desc needs
        _, bs, _ = call.tensor(np.array([2, 3], np.int32))
        assert acl_op.execute_with_handle(handle, [bx, small, bs], [by], 0) == \
            ACL_ERROR_INVALID_PARAM
        acl_op.destroy_handle(handle)
    finally:
        call.close()
