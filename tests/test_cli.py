"""The openacl command: info, demo, ops."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

import fake_cupy
from conftest import cuda_unavailable
from openacl.cli.main import main


def test_info_json(capsys, monkeypatch):
    monkeypatch.setenv("OPENACL_DEVICE_COUNT", "2")
    monkeypatch.setenv("OPENACL_MEMORY_LIMIT", "1GiB")
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "cpu" and len(info["devices"]) == 2
    assert info["devices"][1]["memory_total"] == 1 << 30


def test_info_table_and_bad_config(capsys, tmp_path):
    assert main(["info"]) == 0
    assert "Memory in use / total" in capsys.readouterr().out
    bad = tmp_path / "acl.json"
    bad.write_text("{not json")
    assert main(["info", "--config", str(bad)]) == 1
    assert "ACL_ERROR_PARSE_FILE" in capsys.readouterr().err


def test_info_says_whether_cuda_can_run(capsys, monkeypatch):
    assert main(["info", "--json"]) == 0
    states = json.loads(capsys.readouterr().out)["backends"]
    assert states["cpu"] == "available"
    reason = cuda_unavailable()
    assert states["cuda"].startswith("unavailable" if reason else "available")
    if reason:  # asking for the backend that cannot run is a clear ACL error
        monkeypatch.setenv("OPENACL_BACKEND", "cuda")
        assert main(["info"]) == 1
        err = capsys.readouterr().err
        assert "ACL_ERROR_RT_NO_DEVICE" in err and "backend 'cuda'" in err


def test_info_on_the_cuda_backend_lists_gpus(capsys, monkeypatch):
    monkeypatch.setenv("OPENACL_BACKEND", "cuda")
    with fake_cupy.installed():
        assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "cuda" and info["backends"]["cuda"].startswith("available: 1")
    assert [d["name"] for d in info["devices"]] == ["fake GPU (tests/fake_cupy.py)"]
    assert info["devices"][0]["memory_total"] == fake_cupy.DEVICE_MEMORY


def test_demo_passes(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "demo PASSED" in out and "tiny model executed: matches numpy" in out
    assert "PP-OCRv4 det ran on a synthetic" in out or "PP-OCRv4 det skipped" in out
    assert "demo PASSED (4 steps)" in out or "demo PASSED (1 of 4 steps skipped: " \
        "PP-OCRv4 det" in out


def test_demo_says_which_steps_it_skipped(capsys, monkeypatch):
    from openacl.cli import demo

    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    assert demo.run(elements=1024) is True
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("demo PASSED (2 of 4 steps skipped: tiny model, PP-OCRv4 det (the "
                    "converter needs onnx (pip install 'openacl[onnx]')))")


def test_demo_counts_a_model_it_could_not_fetch_as_skipped(capsys, monkeypatch):
    from openacl.cli import demo, zoo
    from openacl.errors import ACL_ERROR_INVALID_FILE, AclError

    def offline(name):
        raise AclError(ACL_ERROR_INVALID_FILE, f"{name}: no network here")

    pytest.importorskip("onnx")
    monkeypatch.setattr(zoo, "fetch", offline)
    assert demo.run(elements=1024) is True
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("demo PASSED (1 of 4 steps skipped: PP-OCRv4 det (")
    assert "no network here" in last


def test_ops_lists_operators(capsys):
    assert main(["ops", "--grep", "matmul"]) == 0
    out = capsys.readouterr().out
    assert "aclnnMatmul(self: tensor, mat2: tensor, out: tensor!" in out
    assert "openacl.aclnn.batch_mat_mul" in out


def test_version(capsys):
    import openacl

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"openacl {openacl.__version__}"


def test_help_lists_every_subcommand_in_plain_text(capsys):
    from openacl.cli.main import build_parser

    parser = build_parser()
    commands = next(action for action in parser._actions
                    if isinstance(action, argparse._SubParsersAction))
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for name in commands.choices:
        assert f"\n    {name}" in text, f"openacl --help does not list {name}"
    assert "run-pyacl" in text

    def walk(parser, path):
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}")

    for path, sub in walk(parser, "openacl"):  # every subcommand's help, nested ones too
        help_text = sub.format_help()
        for markup in ("``", "::"):
            assert markup not in help_text, f"reST markup {markup!r} in {path} --help"


def test_bare_openacl_prints_the_help(capsys):
    assert main([]) == 0
    assert "commands:" in capsys.readouterr().out


def test_output_piped_into_a_reader_that_stops_is_no_traceback():
    import subprocess

    program = ("import argparse; from openacl.cli import run_handler; "
               "args = argparse.Namespace(handler=lambda a: [print('x' * 99) for _ in "
               "range(100000)] and 0); raise SystemExit(run_handler(args))")
    done = subprocess.run(f"{sys.executable} -c \"{program}\" | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.count("\n") == 1  # 10 MB printed into a reader gone after one line
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
