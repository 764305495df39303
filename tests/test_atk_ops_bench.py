"""bench/atk_ops_bench.py runs: a --quick pass over two operators prints their rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH_TIMEOUT = 300  # seconds


def test_atk_ops_bench_quick(tmp_path: Path) -> None:
    atk_cache = Path.home() / ".cache" / "openacl" / "atk"
    if not atk_cache.exists():
        pytest.skip("no fetched ATK cases (tools/atk.py fetch)")
    markdown = tmp_path / "table.md"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "atk_ops_bench.py"), "--quick",
                           "--ops", "Celu,MseLoss", "--markdown", str(markdown)],
                          capture_output=True, text=True, timeout=BENCH_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert "load average" in done.stdout and "2 timed" in done.stdout, done.stdout
    assert "| Celu |" in markdown.read_text(encoding="utf-8")
