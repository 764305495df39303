"""``openacl op gen-data / run / verify`` and openacl.tools.datagen, in-process."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from openacl.cli.main import main
from openacl.tools import datagen

BF16 = np.dtype(ml_dtypes.bfloat16)


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


CASE = {"seed": 3, "inputs": [
    {"name": "x", "shape": [8, 16], "dtype": "float16", "range": [1, 100]},
    {"name": "y", "shape": [4, 25], "dtype": "float32", "distribution": "normal",
     "mean": 2, "std": 0.5, "nan_ratio": 0.25, "inf_at": [[0, 1]], "neg_inf_at": [99]},
    {"name": "k", "shape": [3], "dtype": "int32", "range": [-2, 3]},
    {"name": "e", "shape": [0, 4], "dtype": "float16"},
    {"name": "one", "shape": [1], "dtype": "bfloat16"},
]}


# -- gen-data --------------------------------------------------------------------------------
def test_gen_data_is_deterministic(tmp_path, capsys):
    case = write_json(tmp_path / "case.json", CASE)
    assert main(["op", "gen-data", case, "-o", str(tmp_path / "a")]) == 0
    assert main(["op", "gen-data", case, "-o", str(tmp_path / "b")]) == 0
    assert main(["op", "gen-data", case, "-o", str(tmp_path / "c"), "--seed", "4"]) == 0
    assert "x: [8, 16] float16" in capsys.readouterr().out
    for name in ("x", "y", "k", "e", "one"):
        first = (tmp_path / "a" / "input" / f"{name}.bin").read_bytes()
        assert first == (tmp_path / "b" / "input" / f"{name}.bin").read_bytes()
    assert (tmp_path / "a/input/x.bin").read_bytes() != (tmp_path / "c/input/x.bin").read_bytes()
    x = datagen.read_bin(tmp_path / "a/input/x.bin", "float16", (8, 16))
    assert x.min() >= 1 and x.max() <= 100
    k = datagen.read_bin(tmp_path / "a/input/k.bin", "int32")
    assert set(k.tolist()) <= {-2, -1, 0, 1, 2}
    assert (tmp_path / "a/input/e.bin").stat().st_size == 0  # empty shape
    assert (tmp_path / "a/input/one.bin").stat().st_size == 2  # one bfloat16


def test_nan_and_inf_injection():
    y = datagen.generate_case(datagen.case_from_json(CASE))["y"]
    assert y.shape == (4, 25) and y.dtype == np.float32
    assert np.isnan(y).sum() == 25  # a quarter of 100 elements
    assert y[0, 1] == np.inf and y.reshape(-1)[99] == -np.inf
    finite = y[np.isfinite(y)]
    assert 1.0 < finite.mean() < 3.0  # normal(2, 0.5)


def test_fractions_are_disjoint_and_exact():
    spec = datagen.InputSpec("z", (10, 10), np.dtype(np.float16), nan_ratio=0.1,
                             inf_ratio=0.05, neg_inf_ratio=0.05)
    z = datagen.generate(spec, np.random.default_rng(0))
    assert (np.isnan(z).sum(), (z == np.inf).sum(), (z == -np.inf).sum()) == (10, 5, 5)


def test_one_input_rule_leaves_the_others_unchanged():
    changed = json.loads(json.dumps(CASE))
    changed["inputs"][0]["range"] = [-1, 1]
    before = datagen.generate_case(datagen.case_from_json(CASE))
    after = datagen.generate_case(datagen.case_from_json(changed))
    assert not np.array_equal(before["x"], after["x"])
    np.testing.assert_array_equal(before["k"], after["k"])


@pytest.mark.parametrize("entry, message", [
    ({"name": "x", "shape": [2], "dtype": "int32", "nan_ratio": 0.5}, "need a float dtype"),
    ({"name": "x", "shape": [2], "dtype": "float16", "distribution": "poisson"}, "poisson"),
    ({"name": "x", "shape": [2], "dtype": "float17"}, "unknown data type"),
    ({"name": "x", "shape": [2], "dtype": "float16", "nan_at": [5]}, "outside shape"),
])
def test_gen_data_rejects_bad_cases(tmp_path, capsys, entry, message):
    case = write_json(tmp_path / "bad.json", {"inputs": [entry]})
    assert main(["op", "gen-data", case, "-o", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_bin_and_npy_files(tmp_path):
    data = np.arange(6, dtype=np.float32).reshape(2, 3).astype(BF16)
    datagen.save_array(tmp_path / "d.bin", data)
    datagen.save_array(tmp_path / "d.npy", data)
    assert (tmp_path / "d.bin").read_bytes() == data.tobytes()  # raw, little-endian
    np.testing.assert_array_equal(datagen.load_array(tmp_path / "d.npy", "bfloat16"), data)
    np.testing.assert_array_equal(datagen.load_array(tmp_path / "d.bin", "bf16", (2, 3)), data)
    assert datagen.dtype_from_name("float") == np.float32  # CANN's "float" is float32
    assert datagen.dtype_from_name("DT_FLOAT16") == np.float16
    with pytest.raises(ValueError, match="whole number"):
        datagen.read_bin(tmp_path / "d.bin", "float64")
    with pytest.raises(ValueError, match="do not fill"):
        datagen.read_bin(tmp_path / "d.bin", "float16", (4, 4))


# -- run -------------------------------------------------------------------------------------
ADD = {"op": "Add",
       "input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"},
                      {"format": "ND", "shape": [8, 16], "type": "float16",
                       "data_distribution": ["normal"]}],
       "output_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}]}
MATMUL = {"op": "MatMul",
          "input_desc": [{"format": "ND", "shape": [4, 3], "type": "float", "name": "a"},
                         {"format": "ND", "shape": [5, 3], "type": "float", "name": "b"}],
          "output_desc": [{"format": "ND", "shape": [4, 5], "type": "float", "name": "c"}],
          "attr": [{"name": "transpose_x1", "type": "bool", "value": False},
                   {"name": "transpose_x2", "type": "bool", "value": True}]}


def test_run_add_float16(threaded_runtime, tmp_path, capsys):
    case = write_json(tmp_path / "add.json", ADD)  # one object: outputs straight in -o
    assert main(["op", "run", case, "-o", str(tmp_path / "out")]) == 0
    assert "case 0_Add: Add -> y [8, 16] float16" in capsys.readouterr().out
    x1 = datagen.read_bin(tmp_path / "out/input/x1.bin", "float16", (8, 16))
    x2 = datagen.read_bin(tmp_path / "out/input/x2.bin", "float16", (8, 16))
    y = datagen.read_bin(tmp_path / "out/output/y.bin", "float16", (8, 16))
    np.testing.assert_array_equal(y, x1 + x2)
    np.testing.assert_array_equal(np.load(tmp_path / "out/output/y.npy"), y)


def test_run_list_of_cases_with_attrs_and_data_file(threaded_runtime, tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    datagen.write_bin(tmp_path / "a.bin", a)
    matmul = {**MATMUL, "input_desc": [{**MATMUL["input_desc"][0], "data_file": "a.bin"},
                                       MATMUL["input_desc"][1]]}
    case = write_json(tmp_path / "cases.json", [ADD, {**matmul, "name": "mm"}])
    assert main(["op", "run", case, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out/0_Add/output/y.bin").exists()
    b = datagen.read_bin(tmp_path / "out/mm/input/b.bin", "float32", (5, 3))
    c = datagen.load_array(tmp_path / "out/mm/output/c.npy")
    np.testing.assert_array_equal(datagen.read_bin(tmp_path / "out/mm/input/a.bin", "float"),
                                  a.reshape(-1))
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-6)


def test_run_reads_input_dir_and_verifies(threaded_runtime, tmp_path, capsys):
    x1 = np.full((8, 16), 1.5, np.float16)
    x2 = np.full((8, 16), 2.0, np.float16)
    datagen.write_bin(tmp_path / "in/input/x1.bin", x1)  # the layout gen-data -o in writes
    datagen.write_bin(tmp_path / "in/input/x2.bin", x2)
    datagen.write_bin(tmp_path / "golden.bin", x1 + x2)
    case = write_json(tmp_path / "add.json", ADD)
    assert main(["op", "run", case, "-o", str(tmp_path / "out"), "--input-dir",
                 str(tmp_path / "in")]) == 0
    assert main(["op", "verify", str(tmp_path / "out/output/y.bin"),
                 str(tmp_path / "golden.bin"), "--dtype", "float16"]) == 0
    assert capsys.readouterr().out.strip().endswith("test pass")


# -- gen-data and run agree --------------------------------------------------------------------
MATMUL_PLAIN = {"op": "MatMul",  # no names: CANN's IR names x1, x2 -> y
                "input_desc": [{"format": "ND", "shape": [4, 3], "type": "float"},
                               {"format": "ND", "shape": [3, 5], "type": "float"}],
                "output_desc": [{"format": "ND", "shape": [4, 5], "type": "float"}]}
MATMUL_BIAS = {"op": "MatMul", "name": "with_bias",  # an absent optional input keeps its place
               "input_desc": [{"format": "ND", "shape": [2, 3], "type": "float"},
                              {"format": "ND", "shape": [3, 2], "type": "float"},
                              {"format": "RESERVED", "shape": [], "type": "UNDEFINED"}],
               "output_desc": [{"format": "ND", "shape": [2, 2], "type": "float"}]}


def test_io_names_one_rule_for_both_commands():
    from openacl.aclop import singleop

    descs = MATMUL_PLAIN["input_desc"]
    assert singleop.io_names("MatMul", descs) == ["x1", "x2"]
    assert singleop.io_names("MatMul", MATMUL["input_desc"]) == ["a", "b"]  # "name" wins
    assert singleop.io_names("MatMul", [{"name": "a"}, {}]) == ["a", "x2"]
    assert singleop.io_names("MatMul", MATMUL_PLAIN["output_desc"], outputs=True) == ["y"]
    assert singleop.io_names("ConcatD", [{}, {}, {}]) == ["x0", "x1", "x2"]  # dynamic input
    assert singleop.io_names("NoSuchOp", [{}, {}]) == ["x0", "x1"]  # no IR: x<i>
    with pytest.raises(ValueError, match="names repeat: x1"):
        singleop.io_names("Add", [{}, {"name": "x1"}])
    case = datagen.case_from_json(MATMUL_BIAS)
    assert [spec.name for spec in case.inputs] == ["x1", "x2"] and case.positions == (0, 1)


def test_gen_data_then_run_on_exactly_those_files(threaded_runtime, tmp_path, capsys):
    ops = write_json(tmp_path / "ops.json", [MATMUL_PLAIN, MATMUL_BIAS, ADD])
    out = tmp_path / "D"
    assert main(["op", "gen-data", ops, "-o", str(out)]) == 0
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*.bin"))
    assert written == ["0_MatMul/input/x1.bin", "0_MatMul/input/x2.bin", "2_Add/input/x1.bin",
                       "2_Add/input/x2.bin", "with_bias/input/x1.bin",
                       "with_bias/input/x2.bin"]
    before = {p: p.read_bytes() for p in out.rglob("*.bin")}
    # the run must read these files, not draw its own data: overwrite one with known values
    datagen.write_bin(out / "0_MatMul/input/x1.bin", np.arange(12, dtype=np.float32))
    assert main(["op", "run", ops, "--input-dir", str(out), "-o", str(out), "--seed",
                 "99"]) == 0
    for folder, shapes in (("0_MatMul", ((4, 3), (3, 5))), ("with_bias", ((2, 3), (3, 2)))):
        x1 = datagen.read_bin(out / folder / "input/x1.bin", "float32", shapes[0])
        x2 = datagen.read_bin(out / folder / "input/x2.bin", "float32", shapes[1])
        y = datagen.read_bin(out / folder / "output/y.bin", "float32")
        np.testing.assert_allclose(y.reshape(x1.shape[0], -1), x1 @ x2, rtol=1e-6)
    np.testing.assert_array_equal(datagen.read_bin(out / "0_MatMul/input/x1.bin", "float32"),
                                  np.arange(12, dtype=np.float32))
    x1 = datagen.read_bin(out / "2_Add/input/x1.bin", "float16")
    x2 = datagen.read_bin(out / "2_Add/input/x2.bin", "float16")
    assert (out / "2_Add/input/x1.bin").read_bytes() == before[out / "2_Add/input/x1.bin"]
    np.testing.assert_array_equal(datagen.read_bin(out / "2_Add/output/y.bin", "float16"),
                                  x1 + x2)


def test_run_without_input_dir_generates_what_gen_data_writes(threaded_runtime, tmp_path):
    ops = write_json(tmp_path / "ops.json", [ADD, MATMUL_PLAIN])
    assert main(["op", "gen-data", ops, "-o", str(tmp_path / "gen"), "--seed", "5"]) == 0
    assert main(["op", "run", ops, "-o", str(tmp_path / "run"), "--seed", "5"]) == 0
    for relative in ("0_Add/input/x1.bin", "0_Add/input/x2.bin", "1_MatMul/input/x2.bin"):
        assert (tmp_path / "gen" / relative).read_bytes() == \
            (tmp_path / "run" / relative).read_bytes(), relative


def test_gen_data_single_op_object_and_data_file(tmp_path, capsys):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    datagen.write_bin(tmp_path / "a.bin", a)
    case = {**MATMUL_PLAIN, "input_desc": [{**MATMUL_PLAIN["input_desc"][0],
                                            "data_file": "a.bin"},
                                           MATMUL_PLAIN["input_desc"][1]]}
    path = write_json(tmp_path / "mm.json", case)
    assert main(["op", "gen-data", path, "-o", str(tmp_path / "D")]) == 0
    assert "x1: [4, 3] float32" in capsys.readouterr().out
    assert (tmp_path / "D/input/x1.bin").read_bytes() == a.tobytes()  # copied, not drawn
    assert (tmp_path / "D/input/x2.bin").stat().st_size == 15 * 4


def test_cases_sharing_a_name_are_refused(tmp_path, capsys):
    path = write_json(tmp_path / "ops.json", [{**ADD, "name": "a"}, {**ADD, "name": "a"}])
    assert main(["op", "gen-data", path, "-o", str(tmp_path / "D")]) == 2
    assert "share a folder name: a" in capsys.readouterr().err
    assert main(["op", "run", path, "-o", str(tmp_path / "D")]) == 2
    assert not (tmp_path / "D").exists()


def test_default_output_is_build_for_gen_data_and_run(threaded_runtime, tmp_path,
                                                      monkeypatch):
    from openacl.aclop import singleop

    assert singleop.DEFAULT_OUTPUT_DIR == "build"
    monkeypatch.chdir(tmp_path)
    write_json(tmp_path / "add.json", ADD)
    assert main(["op", "gen-data", "add.json"]) == 0
    assert (tmp_path / "build/input/x1.bin").is_file()
    assert main(["op", "run", "add.json", "--input-dir", "build"]) == 0
    assert (tmp_path / "build/output/y.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add.json", "build"]


# -- --input-dir errors ------------------------------------------------------------------------
def _gen(tmp_path, cases):
    path = write_json(tmp_path / "ops.json", cases)
    assert main(["op", "gen-data", path, "-o", str(tmp_path / "D")]) == 0
    return path


def _run_fails(path, input_dir, out, capsys) -> str:
    capsys.readouterr()
    assert main(["op", "run", path, "--input-dir", str(input_dir), "-o", str(out)]) == 2
    assert not out.exists()  # nothing ran, nothing written
    return capsys.readouterr().err


def test_input_dir_missing_is_an_error(threaded_runtime, tmp_path, capsys):
    path = write_json(tmp_path / "add.json", ADD)
    err = _run_fails(path, tmp_path / "absent", tmp_path / "out", capsys)
    assert f"--input-dir '{tmp_path / 'absent'}': no such directory" in err


def test_input_dir_file_missing_or_wrong_size_is_an_error(threaded_runtime, tmp_path, capsys):
    path = _gen(tmp_path, [ADD, MATMUL_PLAIN])
    (tmp_path / "D/1_MatMul/input/x2.bin").unlink()
    err = _run_fails(path, tmp_path / "D", tmp_path / "out", capsys)
    assert f"{tmp_path / 'D/1_MatMul/input/x2.bin'}: missing" in err
    assert "needs 60 bytes, found 0 bytes" in err  # float32 [3, 5]
    datagen.write_bin(tmp_path / "D/1_MatMul/input/x2.bin", np.zeros(14, np.float32))
    err = _run_fails(path, tmp_path / "D", tmp_path / "out", capsys)
    assert f"{tmp_path / 'D/1_MatMul/input/x2.bin'}: input 'x2' (float32 [3, 5]) needs 60 " \
           f"bytes, found 56 bytes" in err
    assert "0_Add" not in err  # the good case is not blamed


def test_input_dir_with_other_names_is_an_error(threaded_runtime, tmp_path, capsys):
    """Yesterday's bug: gen-data wrote x0, x1 while op run wanted x1, x2 and silently drew
    random data; a .bin that is no input of the case is now refused."""
    path = _gen(tmp_path, ADD)
    (tmp_path / "D/input/x1.bin").rename(tmp_path / "D/input/x0.bin")
    err = _run_fails(path, tmp_path / "D", tmp_path / "out", capsys)
    assert "x1.bin: missing" in err
    assert "x0.bin: not an input of this case (its inputs: x1, x2)" in err
    err = _run_fails(path, tmp_path / "D/input", tmp_path / "out", capsys)  # one level down
    assert "no such directory" in err and "DIR/input" in err


def test_run_over_many_cases_shows_progress(threaded_runtime, tmp_path, monkeypatch):
    from openacl.cli import progress

    calls = []

    def recording_bar(iterable=None, **options):
        calls.append(options)
        return iterable

    monkeypatch.setattr(progress, "bar", recording_bar)
    path = write_json(tmp_path / "ops.json", [ADD, MATMUL_PLAIN, ADD | {"name": "third"}])
    assert main(["op", "run", path, "-o", str(tmp_path / "out")]) == 0
    assert main(["op", "gen-data", path, "-o", str(tmp_path / "out")]) == 0
    assert [(c["total"], c["desc"]) for c in calls] == [(3, "op run"), (3, "op gen-data")]


def test_run_without_a_runtime_initialises_one(tmp_path):
    case = write_json(tmp_path / "add.json", ADD)
    assert main(["op", "run", case, "-o", str(tmp_path / "out")]) == 0
    import openacl
    assert not openacl.is_initialized()


@pytest.mark.parametrize("case, message", [
    ({**ADD, "op": "NoSuchOp"}, "NoSuchOp"),
    ({**MATMUL, "attr": [{"name": "transpose_x1", "type": "tensor", "value": 1}]},
     "unknown type 'tensor'"),
    ({**ADD, "output_desc": [{"format": "ND", "shape": [8, 15], "type": "float16"}]},
     "output 'y'"),
])
def test_run_reports_an_unusable_case(threaded_runtime, tmp_path, capsys, case, message):
    path = write_json(tmp_path / "bad.json", [ADD, case])
    assert main(["op", "run", path, "-o", str(tmp_path / "out")]) == 2  # unusable input
    assert message in capsys.readouterr().err
    assert (tmp_path / "out/0_Add/output/y.bin").exists()  # the good case still ran


def test_run_exits_1_when_an_operator_fails_while_it_runs(threaded_runtime, tmp_path, capsys):
    """A kernel that raises is a failed operator (1), not unusable input (2)."""
    import openacl
    from openacl import custom
    from openacl.custom import REQUIRED, OpDef

    def tiling(context):
        context.set_block_dim(1)

    def kernel(x, z, workspace, tiling_data):
        raise RuntimeError("the kernel broke")

    op = OpDef("BrokenCustom")
    op.input("x").param_type(REQUIRED).data_type([openacl.ACL_FLOAT16])
    op.output("z").param_type(REQUIRED).data_type([openacl.ACL_FLOAT16])
    op.set_tiling(tiling).set_kernel(kernel)
    custom.register_op(op)
    try:
        broken = {"op": "BrokenCustom",
                  "input_desc": [{"format": "ND", "shape": [4], "type": "float16"}],
                  "output_desc": [{"format": "ND", "shape": [4], "type": "float16"}]}
        path = write_json(tmp_path / "broken.json", [ADD, broken])
        assert main(["op", "run", path, "-o", str(tmp_path / "out")]) == 1
        assert "the kernel broke" in capsys.readouterr().err
    finally:
        custom.unregister_op("BrokenCustom")


# -- verify ----------------------------------------------------------------------------------
def test_verify_cli_pass_and_fail(tmp_path, capsys):
    golden = np.linspace(1, 2, 64, dtype=np.float32).astype(np.float16)
    bad = golden.copy()
    bad[[5, 40]] += np.float16(0.25)
    datagen.write_bin(tmp_path / "golden.bin", golden)
    datagen.write_bin(tmp_path / "good.bin", golden)
    datagen.write_bin(tmp_path / "bad.bin", bad)
    args = [str(tmp_path / "golden.bin"), "--dtype", "float16"]
    assert main(["op", "verify", str(tmp_path / "good.bin"), *args]) == 0
    assert "test pass" in capsys.readouterr().out
    for standard in ("single_benchmark", "double_thousandth", "ratio", "mixed"):
        status = main(["op", "verify", str(tmp_path / "bad.bin"), *args, "--standard",
                       standard, "--shape", "8,8"])
        out = capsys.readouterr().out
        assert status == 1, standard
        assert "data index: (0, 5), expected: " in out and "data index: (5, 0)" in out
        assert "error ratio: 0.0312" in out and "MERE" in out and "[ERROR] result error" in out


def test_verify_cli_float32_golden_and_bad_files(tmp_path, capsys):
    golden = np.linspace(-1, 1, 16)
    datagen.write_bin(tmp_path / "g32.bin", golden.astype(np.float32))
    datagen.write_bin(tmp_path / "y.bin", golden.astype(np.float16))
    assert main(["op", "verify", str(tmp_path / "y.bin"), str(tmp_path / "g32.bin"),
                 "--dtype", "float16", "--golden-dtype", "float32"]) == 0
    assert main(["op", "verify", str(tmp_path / "missing.bin"), str(tmp_path / "g32.bin"),
                 "--dtype", "float16"]) == 2
    assert main(["op", "verify", str(tmp_path / "y.bin"), str(tmp_path / "g32.bin"),
                 "--dtype", "float16"]) == 2  # 16 float16 vs 32 "float16" elements
    assert "elements" in capsys.readouterr().err


def test_op_types_lists_every_type_with_its_ir(capsys):
    from openacl.aclop.types import OP_TYPES

    assert main(["op", "types"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(OP_TYPES) and lines == sorted(lines, key=lambda t: t.split("(")[0])
    assert main(["op", "types", "TopKV2", "Range", "Unpack", "Sort"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == ("TopKV2(x, k*) -> (values, indices)  sorted: Bool = True, dim: Int = "
                        "-1, largest: Bool = True, indices_dtype: Int = 3")
    assert shown[1] == "Range(start*, limit*, delta*) -> (y)  is_closed: Bool = False"
    assert shown[2] == "Unpack(x) -> (y...)  num: Int, axis: Int = 0"  # dynamic, required
    assert shown[3].endswith("y2_dtype: Type = ACL_INT32")


def test_op_types_names_an_unknown_type(capsys):
    assert main(["op", "types", "Add", "TopKv3"]) == 2
    err = capsys.readouterr().err
    assert "TopKv3" in err and "TopKV2" in err and "Add " not in err
