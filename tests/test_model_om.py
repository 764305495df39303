"""The offline model file (.om) and ``openacl convert``: round trips against the ONNX path and
onnxruntime, memory-mapped weights, the CLI report, CANN files refused, and a mutation fuzzer
over real files (every load succeeds or fails with one of the three model-file codes)."""

from __future__ import annotations

import collections
import json
import math
import os
import random
import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import openacl  # noqa: E402
from openacl.cli.main import main  # noqa: E402
from openacl.errors import (  # noqa: E402
    ACL_ERROR_DESERIALIZE_MODEL,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model import om  # noqa: E402
from openacl.model.engine import Engine  # noqa: E402
from openacl.model.lowering import lower  # noqa: E402
from openacl.model.onnx_import import import_onnx  # noqa: E402
from openacl.model.plan import plan_memory  # noqa: E402
from openacl.model.session import InferenceSession  # noqa: E402

RNG = np.random.default_rng(0)
LOAD_CODES = {ACL_ERROR_INVALID_FILE, ACL_ERROR_DESERIALIZE_MODEL, ACL_ERROR_PARSE_MODEL}
FUZZ_CASES = 400  # seeded mutations per fuzz run
FUZZ_MEMORY_LIMIT = 8 << 20  # bytes of device memory the fuzzed engines may take
FUZZ_TRACED_CAP = 16 << 20  # bytes; most Python/numpy memory one fuzz case may allocate
FUZZ_CASE_SECONDS = 2.0  # slowest acceptable fuzz case


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _matmul_relu():
    weight = RNG.standard_normal((32, 64)).astype(np.float32)
    return _model([helper.make_node("MatMul", ["x", "W"], ["h"]),
                   helper.make_node("Relu", ["h"], ["y"])],
                  [("x", [1, 32])], [("y", [1, 64])], [("W", weight)])


def _gemm_mlp():
    """Gemm (alpha/beta) -> Relu -> Reshape (a view) -> Gemm (transB: a temporary) -> Softmax."""
    w1 = (RNG.standard_normal((16, 32)) * 0.2).astype(np.float32)
    w2 = (RNG.standard_normal((10, 16)) * 0.2).astype(np.float32)
    shape = np.array([8, 16], np.int64)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], alpha=0.5, beta=2.0),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["v"]),
             helper.make_node("Gemm", ["v", "W2", "b2"], ["y"], transB=1),
             helper.make_node("Softmax", ["y"], ["p"], axis=-1)]
    return _model(nodes, [("x", [4, 16])], [("p", [8, 10])],
                  [("W1", w1), ("b1", np.full(32, 0.1, np.float32)), ("shape", shape),
                   ("W2", w2), ("b2", np.linspace(-1, 1, 10).astype(np.float32))])


def _om_bytes(model) -> bytes:
    lowered = lower(import_onnx(model))
    return om.serialize_model(lowered, plan_memory(lowered), {"source_model": "test"})


def _om_bytes_with_gears(model) -> bytes:
    """A dynamic-batch file: the model at batch 4 with gears at batch 1 and 2."""
    name = model.graph.input[0].name
    features = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value

    def at(batch):
        lowered = lower(import_onnx(model, {name: (batch, features)}))
        return lowered, plan_memory(lowered)

    gears = [om.Gear(batch, *at(batch)) for batch in (1, 2)]
    return om.serialize_model(*at(4), {"dynamic_batch": [1, 2, 4]}, gears)


def _feeds(model):
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = RNG.standard_normal(shape).astype(np.float32)
    return feeds


def _run(source, feeds):
    session = InferenceSession(source)
    try:
        return session.run(None, feeds)
    finally:
        session.close()


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [_matmul_relu, _gemm_mlp])
def test_round_trip_matches_onnx_path_and_onnxruntime(build, tmp_path):
    model = build()
    feeds = _feeds(model)
    path = tmp_path / "model.om"
    data = _om_bytes(model)
    path.write_bytes(data)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    from_onnx = _run(model, feeds)
    for source in (path, str(path), data, bytearray(data)):
        got = _run(source, feeds)
        for ours, onnx_path, theirs in zip(got, from_onnx, expected, strict=True):
            np.testing.assert_array_equal(ours, onnx_path)
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    lowered, plan, metadata = om.load_model(path)
    assert metadata == {"source_model": "test"}
    assert "shape" not in lowered.graph.initializers  # only what the steps use is stored
    assert plan.arena_bytes <= plan.naive_bytes
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


def test_save_model_round_trips_every_field(tmp_path):
    lowered = lower(import_onnx(_gemm_mlp()))
    plan = plan_memory(lowered)
    size = om.save_model(lowered, plan, tmp_path / "m.om", {"precision": "fp32"})
    assert size == (tmp_path / "m.om").stat().st_size
    assert (tmp_path / "m.om").read_bytes() == om.serialize_model(lowered, plan,
                                                                  {"precision": "fp32"})
    loaded, loaded_plan, _ = om.load_model(tmp_path / "m.om")
    assert loaded.steps == lowered.steps and loaded.views == lowered.views
    assert loaded_plan == plan
    assert loaded.graph.inputs == lowered.graph.inputs
    for name, array in loaded.graph.initializers.items():
        np.testing.assert_array_equal(array, lowered.graph.initializers[name])
        assert array.ctypes.data % om.BLOB_ALIGNMENT == 0
    with pytest.raises(AclError) as info:
        om.save_model(lowered, plan, tmp_path / "missing" / "m.om")
    assert info.value.name == "ACL_ERROR_WRITE_FILE"


def test_weights_are_memory_mapped_from_files_and_views_of_buffers(tmp_path):
    data = _om_bytes(_gemm_mlp())
    path = tmp_path / "m.om"
    path.write_bytes(data)
    lowered, _, _ = om.load_model(path)
    for array in lowered.graph.initializers.values():
        assert isinstance(array, np.memmap) and not array.flags.writeable
    lowered, _, _ = om.load_model(path, mmap=False)
    assert not any(isinstance(a, np.memmap) for a in lowered.graph.initializers.values())
    lowered, _, _ = om.load_model(data)
    weight = lowered.graph.initializers["W1"]
    base = weight
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, (bytes, memoryview))  # a view of the caller's bytes: no copy


def test_om_session_input_shapes_must_match(tmp_path):
    path = tmp_path / "m.om"
    path.write_bytes(_om_bytes(_matmul_relu()))
    InferenceSession(path, input_shapes={"x": (1, 32)}).close()
    with pytest.raises(AclError) as info:
        InferenceSession(path, input_shapes={"x": (2, 32)})
    assert info.value.code == ACL_ERROR_INVALID_PARAM and "--input-shape" in str(info.value)


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_converts_and_prints_the_report(tmp_path, capsys):
    model = _gemm_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    source = tmp_path / "mlp.onnx"
    onnx.save(model, source)
    output = tmp_path / "mlp.om"
    assert main(["convert", str(source), "-o", str(output), "--input-shape", "x:4,16"]) == 0
    report = capsys.readouterr().out
    for text in ("ONNX nodes: 5 (Gemm 2, Relu 1, Reshape 1, Softmax 1)", "aclnn steps:",
                 "Addmm 2", "weights:", "arena:", "activation memory", " MB -> ", "x:4,16"):
        assert text in report, report
    feeds = {"x": RNG.standard_normal((4, 16)).astype(np.float32)}
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(_run(output, feeds)[0], expected[0], rtol=1e-5, atol=1e-6)
    assert om.load_model(output)[2]["input_shapes"] == {"x": [4, 16]}


@pytest.mark.parametrize("argv", [
    ["convert"],
    ["convert", "{missing}"],
    ["convert", "{model}", "--input-shape", "x:4;16"],
    ["convert", "{model}", "--input-shape", "x:5~2,16"],
    ["convert", "{model}", "--input-shape", "x:4,16", "--precision", "fp16"],
    ["convert", "{model}", "--input-shape", "x:4,16", "--dynamic-batch", "1,2,4"],
])
def test_cli_bad_arguments_exit_2(argv, tmp_path, capsys):
    model = _matmul_relu()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(model, tmp_path / "m.onnx")
    argv = [a.format(model=tmp_path / "m.onnx", missing=tmp_path / "no.onnx") for a in argv]
    assert main(argv + ["-o", str(tmp_path / "out.om")]) == 2
    assert "openacl convert:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["convert", str(tmp_path / "m.onnx"), "--precision", "fp8"])
    assert info.value.code == 2


@pytest.mark.parametrize("shape", [None, "x:-1,16", "x:1~8,16"])
def test_cli_dynamic_dims_make_a_dynamic_shape_file(shape, tmp_path, capsys):
    model = _matmul_relu()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(model, tmp_path / "m.onnx")
    argv = ["convert", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out.om")]
    assert main(argv + (["--input-shape", shape] if shape else [])) == 0
    assert "shape ranges: x:" in capsys.readouterr().out
    assert om.load_offline(str(tmp_path / "out.om")).staged is not None


# -- refused files -------------------------------------------------------------------------------
def _cann_om() -> bytes:
    """A file with CANN's ModelFileHeader (magic 0x444F4D49 'IMOD', 256 bytes)."""
    payload = b"\x00" * 128
    header = struct.pack("<III64sIBBBB32sI", 0x444F4D49, 256, 0x10000000, b"", len(payload),
                         0, 1, 0, 0, b"resnet50", 42)
    return header.ljust(256, b"\x00") + payload


def test_cann_om_files_are_recognised_and_refused(tmp_path):
    path = tmp_path / "resnet50.om"
    path.write_bytes(_cann_om())
    for source in (path, _cann_om()):
        with pytest.raises(AclError) as info:
            om.load_model(source)
        assert info.value.code == ACL_ERROR_INVALID_FILE
        assert "CANN offline model" in str(info.value) and "openacl convert" in str(info.value)
    with pytest.raises(AclError) as info:
        InferenceSession(path)
    assert info.value.code == ACL_ERROR_INVALID_FILE and "CANN" in str(info.value)


def test_missing_foreign_and_future_files_are_invalid(tmp_path):
    with pytest.raises(AclError) as info:
        om.load_model(tmp_path / "nothing.om")
    assert info.value.code == ACL_ERROR_INVALID_FILE
    with pytest.raises(AclError) as info:
        om.load_model(b"PK\x03\x04 a zip file")
    assert info.value.code == ACL_ERROR_INVALID_FILE and "not an OpenACL" in str(info.value)
    data = bytearray(_om_bytes(_matmul_relu()))
    struct.pack_into("<H", data, 8, max(om.READABLE_MAJORS) + 1)
    with pytest.raises(AclError) as info:
        om.load_model(bytes(data))
    assert info.value.code == ACL_ERROR_INVALID_FILE and "format 3." in str(info.value)
    with pytest.raises(AclError) as info:
        om.load_model(12345)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


# -- hostile files -------------------------------------------------------------------------------
def _split(data: bytes) -> tuple[dict, bytes]:
    fields = om.HEADER.unpack_from(data)
    json_offset, json_bytes, blob_offset = fields[4], fields[5], fields[6]
    return json.loads(data[json_offset:json_offset + json_bytes]), data[blob_offset:]


def _pack(document: dict, blob: bytes) -> bytes:
    """A well-formed container around ``document`` (as a hostile writer would make one)."""
    text = json.dumps(document).encode()
    blob_offset = -(-(om.HEADER_BYTES + len(text)) // om.BLOB_ALIGNMENT) * om.BLOB_ALIGNMENT
    header = om.HEADER.pack(om.MAGIC, om.VERSION_MAJOR, om.VERSION_MINOR, om.HEADER_BYTES,
                            om.HEADER_BYTES, len(text), blob_offset, len(blob),
                            zlib.crc32(text), zlib.crc32(blob))
    return header + text + bytes(blob_offset - om.HEADER_BYTES - len(text)) + blob


def _edit(data: bytes, change) -> bytes:
    document, blob = _split(data)
    change(document)
    return _pack(document, blob)


def _steps(doc):
    return doc["graph"]["steps"]


HOSTILE = {
    "truncated": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: d[:-10]),
    "trailing bytes": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: d + b"\x00"),
    "header only": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: d[:40]),
    "json checksum": (ACL_ERROR_DESERIALIZE_MODEL,
                      lambda d: d[:70] + bytes([d[70] ^ 1]) + d[71:]),
    "weights checksum": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: d[:-5] + b"\xff" + d[-4:]),
    "json offset past the end": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: d[:16] + struct.pack(
        "<Q", 1 << 60) + d[24:]),
    "not json": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: _pack_text(b"{\"graph\": [", d)),
    "deep json": (ACL_ERROR_DESERIALIZE_MODEL, lambda d: _pack_text(b"[" * 100000, d)),
    "huge dims": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc["graph"]["values"][
        "x"].update(shape=[1 << 30, 1 << 30, 1 << 30]))),
    "negative dim": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc["graph"][
        "values"]["x"].update(shape=[-4, 16]))),
    "weight outside the blob": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc[
        "graph"]["initializers"]["W1"].update(offset=1 << 40))),
    "negative weight offset": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc[
        "graph"]["initializers"]["W1"].update(offset=-64))),
    "unknown op": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: _steps(doc)[0].update(
        op="FormatHardDisk"))),
    "unknown argument": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: _steps(doc)[
        0]["args"].append(["evil", 1]))),
    "undefined value": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: _steps(doc)[0][
        "args"].__setitem__(1, ["mat1", {"value": "ghost"}]))),
    "integer as a tensor": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: _steps(doc)[
        0]["args"].__setitem__(1, ["mat1", 7]))),
    "swapped steps": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: _steps(doc).reverse())),
    "view cycle": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc["graph"][
        "views"].update(x="v"))),
    "offset outside the arena": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc[
        "plan"]["offsets"].update(x=doc["plan"]["arena_bytes"]))),
    "live values overlap": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc["plan"][
        "offsets"].update({name: 0 for name in doc["plan"]["offsets"]}))),
    "huge arena": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc["plan"].update(
        arena_bytes=1 << 50))),
    "missing field": (ACL_ERROR_PARSE_MODEL, lambda d: _edit(d, lambda doc: doc.pop("plan"))),
}


def _pack_text(text: bytes, data: bytes) -> bytes:
    _, blob = _split(data)
    blob_offset = -(-(om.HEADER_BYTES + len(text)) // om.BLOB_ALIGNMENT) * om.BLOB_ALIGNMENT
    return om.HEADER.pack(om.MAGIC, 1, 0, om.HEADER_BYTES, om.HEADER_BYTES, len(text),
                          blob_offset, len(blob), zlib.crc32(text), zlib.crc32(blob)) + \
        text + bytes(blob_offset - om.HEADER_BYTES - len(text)) + blob


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_give_the_model_file_codes(case):
    code, mutate = HOSTILE[case]
    data = mutate(_om_bytes(_gemm_mlp()))
    with pytest.raises(AclError) as info:
        om.load_model(data)
    assert info.value.code == code, str(info.value)


# -- the mutation fuzzer -------------------------------------------------------------------------
HOSTILE_VALUES = [-1, 0, 1, 7, 2**31, 2**63, -(2**63), 10**30, 1e308, -0.5, math.inf, math.nan,
                  "", "Bogus", "float32", "x", None, True, [], {}, [1, 2, 3], [[1]],
                  {"value": "nope"}, {"value": "x"}, {"values": ["x", "x"]},
                  {"scalar": 1e300, "dtype": "int8"}, {"scalar": "s", "dtype": "float32"},
                  "x" * 5000, [2**40] * 4]


def _paths(node, prefix=()):
    """Every (path, container) below ``node``: the places a mutation may hit."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for key, child in items:
        found.append(prefix + (key,))
        found.extend(_paths(child, prefix + (key,)))
    return found


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def _json_mutation(rng: random.Random, doc: dict) -> str:
    graph, plan = doc["graph"], doc["plan"]
    steps = graph["steps"]
    kind = rng.choice(["leaf", "leaf", "leaf", "delete", "huge dims", "negative offset",
                       "unknown op", "swap steps", "drop step", "undefined ref", "arena",
                       "offsets collide", "rename value", "view", "dtype"])
    if kind in ("leaf", "delete"):
        path = rng.choice(_paths(doc))
        parent = _get(doc, path[:-1])
        if kind == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(HOSTILE_VALUES)
    elif kind == "huge dims":
        value = rng.choice(list(graph["values"].values()) + list(graph["initializers"].values()))
        value["shape"] = [rng.choice([2**40, 2**62, 10**6, 0, -1]) for _ in value["shape"]]
    elif kind == "negative offset":
        table = rng.choice([graph["initializers"], plan["offsets"]])
        entry = rng.choice(list(table))
        if isinstance(table[entry], dict):
            table[entry]["offset"] = rng.choice([-64, -1, 2**62])
        else:
            table[entry] = rng.choice([-512, -1, 2**62])
    elif kind == "unknown op":
        rng.choice(steps)["op"] = rng.choice(["Bogus", "", "__import__", "aclnnAdd", "Add"])
    elif kind == "swap steps" and len(steps) > 1:
        i, j = rng.sample(range(len(steps)), 2)
        steps[i], steps[j] = steps[j], steps[i]
    elif kind == "drop step" and steps:
        steps.pop(rng.randrange(len(steps)))
    elif kind == "undefined ref":
        args = rng.choice(steps)["args"]
        args[rng.randrange(len(args))][1] = {"value": rng.choice(["ghost", "W1", "p", "x"])}
    elif kind == "arena":
        plan["arena_bytes"] = rng.choice([0, 1, 511, 2**40, 2**63, -1,
                                          plan["arena_bytes"] // 2])
    elif kind == "offsets collide":
        for name in plan["offsets"]:
            plan["offsets"][name] = rng.choice([0, 512])
    elif kind == "rename value":
        name = rng.choice(list(graph["values"]))
        graph["values"][name + "'"] = graph["values"].pop(name)
    elif kind == "view":
        names = list(graph["values"]) + list(graph["initializers"])
        graph["views"][rng.choice(names)] = rng.choice(names)
    elif kind == "dtype":
        rng.choice(list(graph["values"].values()))["dtype"] = rng.choice(
            ["float64", "int8", "object", "V1000000000", "bfloat16", "bool"])
    return f"json {kind}"


def _mutate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["bit flips", "bit flips json", "truncate", "insert", "delete", "header",
                       "json", "json", "json", "json"])
    buffer = bytearray(data)
    if kind == "bit flips":
        for _ in range(rng.randint(1, 8)):
            buffer[rng.randrange(len(buffer))] ^= 1 << rng.randrange(8)
        return kind, bytes(buffer)
    if kind == "bit flips json":  # a corrupt JSON text behind a valid checksum
        document, blob = _split(data)
        text = bytearray(json.dumps(document).encode())
        for _ in range(rng.randint(1, 4)):
            text[rng.randrange(len(text))] ^= 1 << rng.randrange(8)
        return kind, _pack_text(bytes(text), data)
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data))]
    if kind == "insert":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + rng.randbytes(rng.randint(1, 16)) + data[at:]
    if kind == "delete":
        at = rng.randrange(len(data))
        return kind, data[:at] + data[at + rng.randint(1, 64):]
    if kind == "header":
        offsets = [8, 10, 12, 16, 24, 32, 40, 48, 52]
        formats = ["<H", "<H", "<I", "<Q", "<Q", "<Q", "<Q", "<I", "<I"]
        index = rng.randrange(len(offsets))
        fmt = formats[index]
        limit = (1 << (8 * struct.calcsize(fmt))) - 1
        old = struct.unpack_from(fmt, buffer, offsets[index])[0]
        new = rng.choice([0, 1, limit, old + 1, max(old - 1, 0), old + 64, len(data),
                          rng.randrange(limit)]) & limit
        struct.pack_into(fmt, buffer, offsets[index], new)
        return f"header @{offsets[index]}", bytes(buffer)
    document, blob = _split(data)
    label = _json_mutation(rng, document)
    return label, _pack(document, blob)


def _attempt(data: bytes, path, feeds) -> str:
    """Load (from a file or from memory), build and run: the outcome's label."""
    tracemalloc.start()
    try:
        try:
            if path is not None:
                path.write_bytes(data)
            lowered, plan, _ = om.load_model(path if path is not None else data)
        except AclError as exc:
            assert exc.code in LOAD_CODES and om.UNCHECKED not in str(exc), f"load: {exc}"
            return exc.name
        try:
            engine = Engine(lowered, plan)
        except AclError as exc:
            return f"loaded, engine refused ({exc.name})"
        try:
            engine.run(feeds)
            return "loaded and ran"
        except AclError as exc:
            return f"loaded, run failed ({exc.name})"
        finally:
            engine.close()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= FUZZ_TRACED_CAP, f"a fuzz case allocated {peak} bytes"


def test_mutation_fuzzer_over_real_files(tmp_path):
    openacl.finalize()
    openacl.init({"stream_mode": "inline", "device_count": 1,
                  "memory_limit": FUZZ_MEMORY_LIMIT})
    openacl.rt.set_device(0)
    rng = random.Random(20240601)
    models = [_gemm_mlp(), _matmul_relu()]
    sources = [(_om_bytes(model), _feeds(model)) for model in models]
    gears_feeds = {"x": RNG.standard_normal((4, 32)).astype(np.float32)}
    sources.append((_om_bytes_with_gears(_matmul_relu()), gears_feeds))
    outcomes: collections.Counter[str] = collections.Counter()
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    slowest = 0.0
    for case in range(FUZZ_CASES):
        data, feeds = sources[case % len(sources)]
        kind, mutated = _mutate(rng, data)
        started = time.perf_counter()
        try:
            outcome = _attempt(mutated, tmp_path / "f.om" if case % 2 else None, feeds)
        except Exception as exc:  # noqa: BLE001 - report the case that escaped
            raise AssertionError(f"case {case} ({kind}): {type(exc).__name__}: {exc}") from exc
        slowest = max(slowest, time.perf_counter() - started)
        outcomes[outcome] += 1
        by_kind[kind.split(" @")[0]][outcome] += 1
    print(f"\nfuzz: {FUZZ_CASES} cases, slowest {slowest * 1000:.0f} ms")
    for outcome, count in outcomes.most_common():
        print(f"  {count:4d}  {outcome}")
    for kind, counter in sorted(by_kind.items()):
        print(f"  {kind}: {dict(counter)}")
    assert slowest < FUZZ_CASE_SECONDS
    for name in ("ACL_ERROR_INVALID_FILE", "ACL_ERROR_DESERIALIZE_MODEL",
                 "ACL_ERROR_PARSE_MODEL", "loaded and ran"):
        assert outcomes[name] > 0, outcomes
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0


# -- the mutation fuzzer over dynamic-shape (format 2) files ----------------------------------
# seeded mutations of a dynamic-shape file per run (OPENACL_FUZZ_CASES=N runs more, offline)
STAGED_FUZZ_CASES = int(os.environ.get("OPENACL_FUZZ_CASES", "200"))


def _staged_bytes(tmp_path) -> bytes:
    """A dynamic-shape file (format 2): the Gemm MLP with its batch as a range."""
    from openacl.model.converter import convert_onnx

    model = _gemm_mlp()
    source, output = tmp_path / "ranged.onnx", tmp_path / "ranged.om"
    onnx.save(model, source)
    first = model.graph.input[0]
    dims = [d.dim_value for d in first.type.tensor_type.shape.dim]
    convert_onnx(source, output, {first.name: ((1, 8), *dims[1:])})
    return output.read_bytes()


def _proto_mutation(rng: random.Random, document: dict) -> str:
    """Change the stored ONNX graph itself: an op type, an input name, an attribute, a
    node dropped, or raw bytes of the protobuf flipped."""
    import base64

    from onnx import ModelProto

    raw = base64.b64decode(document["staged"]["onnx"])
    kind = rng.choice(["op", "input", "attribute", "drop node", "bytes"])
    if kind == "bytes":
        buffer = bytearray(raw)
        for _ in range(rng.randint(1, 6)):
            buffer[rng.randrange(len(buffer))] ^= 1 << rng.randrange(8)
        raw = bytes(buffer)
    else:
        proto = ModelProto()
        proto.ParseFromString(raw)
        node = rng.choice(proto.graph.node)
        if kind == "op":
            node.op_type = rng.choice(["Bogus", "Loop", "If", "Relu", "Concat", ""])
        elif kind == "input" and node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(["ghost", "", "x", "y"])
        elif kind == "attribute" and node.attribute:
            attr = rng.choice(node.attribute)
            attr.i = rng.choice([-1, 0, 2**40, 7])
        else:
            proto.graph.node.remove(node)
        raw = proto.SerializeToString()
    document["staged"]["onnx"] = base64.b64encode(raw).decode()
    return f"proto {kind}"


def _staged_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["bit flips", "truncate", "header", "leaf", "leaf", "proto", "proto",
                       "proto"])
    if kind in ("bit flips", "truncate", "header"):
        return _mutate_bytes(rng, data, kind)
    document, blob = _split(data)
    if kind == "leaf":
        path = rng.choice(_paths(document))
        _get(document, path[:-1])[path[-1]] = rng.choice(HOSTILE_VALUES)
        label = "json leaf"
    else:
        label = _proto_mutation(rng, document)
    text = json.dumps(document).encode()
    blob_offset = -(-(om.HEADER_BYTES + len(text)) // om.BLOB_ALIGNMENT) * om.BLOB_ALIGNMENT
    header = om.HEADER.pack(om.MAGIC, om.STAGED_MAJOR, om.STAGED_MINOR, om.HEADER_BYTES,
                            om.HEADER_BYTES, len(text), blob_offset, len(blob),
                            zlib.crc32(text), zlib.crc32(blob))
    return label, header + text + bytes(blob_offset - om.HEADER_BYTES - len(text)) + blob


def _mutate_bytes(rng: random.Random, data: bytes, kind: str) -> tuple[str, bytes]:
    buffer = bytearray(data)
    if kind == "bit flips":
        for _ in range(rng.randint(1, 8)):
            buffer[rng.randrange(len(buffer))] ^= 1 << rng.randrange(8)
        return kind, bytes(buffer)
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data))]
    offset = rng.choice([8, 10, 16, 24, 32, 40])
    fmt = "<H" if offset in (8, 10) else "<Q"
    struct.pack_into(fmt, buffer, offset, rng.choice([0, 1, 3, len(data), 2**15]))
    return kind, bytes(buffer)


def test_mutation_fuzzer_over_dynamic_shape_files(tmp_path):
    """Hostile format-2 files: loading gives only the model file codes; a file that loads
    either runs at a shape inside its range or fails with an AclError, never a crash."""
    from openacl.model.staged import StagedModel

    openacl.finalize()
    openacl.init({"stream_mode": "inline", "device_count": 1,
                  "memory_limit": FUZZ_MEMORY_LIMIT})
    openacl.rt.set_device(0)
    rng = random.Random(20261201)
    data = _staged_bytes(tmp_path)
    feeds = _feeds(_gemm_mlp())
    outcomes: collections.Counter[str] = collections.Counter()
    for case in range(STAGED_FUZZ_CASES):
        kind, mutated = _staged_mutation(rng, data)
        try:
            try:
                model = om.load_offline(mutated)
            except AclError as exc:
                assert exc.code in LOAD_CODES and om.UNCHECKED not in str(exc), f"load: {exc}"
                outcomes[exc.name] += 1
                continue
            if model.staged is None:
                outcomes["a compiled model"] += 1
                continue
            staged = None
            try:
                staged = StagedModel(model.staged.proto, weights=model.staged.weights,
                                     ranges=model.staged.ranges)
                staged.run(feeds)
                outcomes["loaded and ran"] += 1
            except AclError as exc:
                outcomes[f"loaded, refused ({exc.name})"] += 1
            finally:
                if staged is not None:
                    staged.close()
        except Exception as exc:  # noqa: BLE001 - report the case that escaped
            raise AssertionError(f"case {case} ({kind}): {type(exc).__name__}: {exc}") from exc
    print(f"\nstaged fuzz: {dict(outcomes)}")
    assert outcomes["ACL_ERROR_PARSE_MODEL"] > 0 and outcomes["loaded and ran"] > 0, outcomes
    assert openacl.memory_stats()["allocated_bytes.all.current"] == 0
