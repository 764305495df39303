"""``openacl op new``: a generated project passes its own tests and run.sh, and bad flags
exit 2 with a message naming the flag (never a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openacl.cli import scaffold
from openacl.cli.main import main

REPO = Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
PYTEST_TIMEOUT_S = 120  # the generated tests take about a second
RUN_SH_TIMEOUT_S = 60  # run.sh: three short processes per dtype column

PROJECTS = {
    # AddCustom-like: 2 in / 1 out, two dtype columns, an optional float alpha
    "add_like": ["AddLikeCustom", "--input", "x:float16,float32", "--input", "y:float16,float32",
                 "--output-tensor", "z:float16,float32", "--attr", "alpha:float=1.0"],
    # 1 in / 2 out, integers, no attributes
    "one_in_two_out": ["DupCustom", "--input", "x:int32", "--output-tensor", "first:int32",
                       "--output-tensor", "second:int32"],
    # required parameters only, with a str attribute (and REQUIRED / list / bool ones)
    "str_attr": ["ModeCustom", "--input", "a:float32,bfloat16", "--input", "b:float32,float32",
                 "--output-tensor", "y:float32,bfloat16", "--attr", "mode:str=linear",
                 "--attr", "axes:list_int=0,1", "--attr", "scale:int", "--attr",
                 "flag:bool=false"],
}


def _new(argv: list[str], capsys) -> tuple[int, str, str]:
    status = main(["op", "new", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("name", PROJECTS)
def test_generated_project_passes_its_tests(name: str, tmp_path: Path, capsys):
    project = tmp_path / name
    status, out, err = _new([*PROJECTS[name], "-o", str(project)], capsys)
    assert status == 0, err
    for relative in ("op/__init__.py", "golden.py", "tests/test_op.py", "scripts/gen_data.py",
                     "scripts/run_op.py", "scripts/verify_result.py", "run.sh", "README.md"):
        assert (project / relative).is_file(), relative
    assert "TODO(author)" in (project / "op" / "__init__.py").read_text()
    env = {**os.environ, "PYTHON": PYTHON}
    tests = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            str(project / "tests")], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    run = subprocess.run(["bash", str(project / "run.sh")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=RUN_SH_TIMEOUT_S)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1].endswith(": test pass")


def test_run_sh_fails_on_a_wrong_kernel(tmp_path: Path, capsys):
    project = tmp_path / "broken"
    assert _new([*PROJECTS["one_in_two_out"], "-o", str(project)], capsys)[0] == 0
    golden = project / "golden.py"
    golden.write_text(golden.read_text().replace(
        "for name in INPUTS)", "for name in INPUTS) + 1"))  # golden and kernel now disagree
    run = subprocess.run(["bash", str(project / "run.sh")], env={**os.environ,
                                                                 "PYTHON": PYTHON},
                         capture_output=True, text=True, timeout=RUN_SH_TIMEOUT_S)
    assert run.returncode == 1
    assert run.stdout.strip().splitlines()[-1] == "DupCustom: test failed"


def test_default_directory_is_the_snake_name(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, out, _ = _new(["MyFancyOp", "--input", "x:float32", "--output-tensor", "y:float32"],
                          capsys)
    assert status == 0
    assert (tmp_path / "my_fancy_op" / "op" / "__init__.py").is_file()
    assert "my_fancy_op" in out


@pytest.mark.parametrize("argv, flag, words", [
    (["addCustom", "--input", "x:float16", "--output-tensor", "z:float16"], "OP_TYPE",
     "CamelCase"),
    (["Add_Custom", "--input", "x:float16", "--output-tensor", "z:float16"], "OP_TYPE",
     "CamelCase"),
    (["Add", "--input", "x:float16", "--output-tensor", "z:float16"], "OP_TYPE", "built-in"),
    (["OpA", "--input", "1x:float16", "--output-tensor", "z:float16"], "--input", "identifier"),
    (["OpA", "--input", "lambda:float16", "--output-tensor", "z:float16"], "--input", "identifier"),
    (["OpA", "--input", "tiling:float16", "--output-tensor", "z:float16"], "--input", "reserved"),
    (["OpA", "--input", "x:float99", "--output-tensor", "z:float16"], "--input", "float99"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:complex64"], "--output-tensor",
     "complex64"),
    (["OpA", "--input", "x", "--output-tensor", "z:float16"], "--input", "data types"),
    (["OpA", "--input", "x:float16,float32", "--output-tensor", "z:float16"],
     "--input/--output-tensor", "same number"),
    (["OpA", "--input", "x:float16,float16", "--output-tensor", "z:float16,float16"],
     "--input/--output-tensor", "repeat"),
    (["OpA", "--input", "x:float16", "--output-tensor", "x:float16"],
     "--input/--output-tensor/--attr", "distinct"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "alpha:double=1"],
     "--attr", "int, float, bool, str, list_int"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "alpha"], "--attr",
     "type must be"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "alpha:float=abc"],
     "--attr", "not a float"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "alpha:float=inf"],
     "--attr", "finite"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "n:int=1.5"],
     "--attr", "not an int"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "f:bool=maybe"],
     "--attr", "not a bool"),
    (["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "--attr", "v:list_int=1,b"],
     "--attr", "not an int"),
])
def test_bad_flags_exit_2_naming_the_flag(argv, flag, words, tmp_path: Path, capsys):
    status, _, err = _new([*argv, "-o", str(tmp_path / "project")], capsys)
    assert status == 2
    assert err.startswith("openacl op new: ") and flag in err and words in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "project").exists()


def test_missing_output_flag_is_exit_2_naming_it(capsys):
    assert main(["op", "new", "OpA", "--input", "x:float16"]) == 2
    assert "--output-tensor is required" in capsys.readouterr().err


def test_dash_o_and_output_are_the_project_directory(tmp_path: Path, capsys):
    for flag in ("-o", "--output"):
        project = tmp_path / f"project{flag}"
        status, out, err = _new(["OpA", "--input-tensor", "x:float16", "--output-tensor",
                                 "z:float16", flag, str(project)], capsys)
        assert status == 0, err
        assert (project / "op" / "__init__.py").is_file() and str(project) in out
        readme = (project / "README.md").read_text()
        assert "--output-tensor z:float16" in readme  # the command that made it


def test_output_given_a_tensor_points_to_output_tensor(tmp_path: Path, monkeypatch, capsys):
    """The old meaning of --output (a tensor) is refused with the new flag named."""
    monkeypatch.chdir(tmp_path)
    status, _, err = _new(["OpA", "--input", "x:float16", "--output-tensor", "y:float16",
                           "--output", "z:float16,float32"], capsys)
    assert status == 2
    assert "-o/--output 'z:float16,float32'" in err and "--output-tensor z:float16" in err
    assert not any(tmp_path.iterdir())  # nothing written, not even a "z:float16" folder
    # the old spelling alone (no --output-tensor at all) gets the same hint
    status, _, err = _new(["OpA", "--input", "x:float16", "--output", "z:float16"], capsys)
    assert status == 2 and "declare an output tensor with --output-tensor z:float16" in err
    status, _, err = _new(["OpA", "--input", "x:float16"], capsys)
    assert status == 2 and "--output-tensor is required" in err


def test_existing_directory_needs_force(tmp_path: Path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    argv = ["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "-o", str(project)]
    status, _, err = _new(argv, capsys)
    assert status == 2 and "-o" in err and "--force" in err
    assert not (project / "op").exists()
    status, _, err = _new([*argv, "--force"], capsys)
    assert status == 0, err
    assert (project / "op" / "__init__.py").is_file()
    assert (project / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("")
    status, _, err = _new([*argv[:-1], str(tmp_path / "file")], capsys)
    assert status == 2 and "not a directory" in err


def test_empty_existing_directory_is_fine(tmp_path: Path, capsys):
    status, _, err = _new(["OpA", "--input", "x:float16", "--output-tensor", "z:float16", "-o",
                           str(tmp_path)], capsys)
    assert status == 0, err


def test_attr_specs_parse():
    assert scaffold.parse_attr("alpha:float=1.0") == scaffold.AttrSpec("alpha", "float",
                                                                      True, 1.0)
    required = scaffold.parse_attr("axes:list_int")
    assert not required.has_default and required.test_value == [1, 2]
    assert scaffold.parse_attr("axes:list_int=[0, 2]").default == [0, 2]
    assert scaffold.parse_attr("axes:list_int=").default == []
    assert scaffold.parse_attr("w:list_float=0.5,1").default == [0.5, 1.0]
    assert scaffold.parse_attr("m:list_bool=true,0").default == [True, False]
    assert scaffold.parse_attr("mode:str='a b'").default == "a b"
    assert scaffold.parse_attr("mode:str=").default == ""
    assert scaffold.parse_attr("flag:bool=Yes").default is True


def test_spec_columns_and_aliases():
    spec = scaffold.build_spec("OpA", ["x:half,float"], ["y:fp16,fp32"], ["alpha:float"])
    assert spec.columns == [{"x": "float16", "y": "float16"}, {"x": "float32", "y": "float32"}]
    assert spec.snake_name == "op_a" and spec.scales_by_alpha
    files = scaffold.render(spec)
    assert "op.attr(\"alpha\").attr_type(REQUIRED).float()" in files["op/__init__.py"]
    assert "aclnnOpAGetWorkspaceSize(x, alpha, y)" in files["op/__init__.py"]
    for relative, text in files.items():
        if relative.endswith(".py"):
            compile(text, relative, "exec")  # every generated module is valid Python


def test_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["op", "new", "--help"])
    assert "openacl op new AddCustom --input x:float16,float32" in capsys.readouterr().out
