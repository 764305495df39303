"""The openacl command: info, demo, ops."""

from __future__ import annotations

import json

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


def test_demo_passes(capsys):
    assert main(["demo"]) == 0
    assert "demo PASSED" in capsys.readouterr().out


def test_ops_lists_operators(capsys):
    assert main(["ops", "--grep", "matmul"]) == 0
    out = capsys.readouterr().out
    assert "aclnnMatmul(self: tensor, mat2: tensor, out: tensor!" in out
    assert "openacl.aclnn.batch_mat_mul" in out
