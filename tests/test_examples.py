"""Every example's run.sh passes (CI runs them through this file), and a verify script
fails a wrong output with exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RUN_TIMEOUT_S = 60  # each run.sh takes about a second; the margin is for a loaded CI machine
RUN_SCRIPTS = sorted(EXAMPLES.glob("*/run.sh"))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable}


def test_every_example_is_collected():
    names = {script.parent.name for script in RUN_SCRIPTS}
    assert {"add_custom", "add_kernel_launch", "layernorm_custom", "softmax_custom",
            "hccl_data_parallel"} <= names


@pytest.mark.parametrize("script", RUN_SCRIPTS, ids=lambda script: script.parent.name)
def test_example_run_sh_passes(script: Path, tmp_path: Path):
    # from another working directory: run.sh must find its own files
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line == f"{script.parent.name}: test pass", output


def test_verify_script_fails_a_wrong_output(tmp_path: Path):
    golden = np.random.default_rng(0).uniform(1, 100, 1000).astype(np.float16)
    wrong = golden.copy()
    wrong[:10] += 1  # 1 % of the elements off: over the 0.1 % the ratio rule allows
    golden.tofile(tmp_path / "golden.bin")
    wrong.tofile(tmp_path / "output.bin")
    script = EXAMPLES / "add_custom" / "scripts" / "verify_result.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "output.bin"),
                             str(tmp_path / "golden.bin"), "--dtype", "float16"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[ERROR] result error" in result.stdout
