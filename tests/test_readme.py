"""The README's and docs/'s examples run as written (keeps the documentation true).

* Every ```python block runs, the blocks of one page in order in one namespace.
* Every ```sh block of the README and docs/ runs with bash (``-e -o pipefail``) in a fresh
  folder with this interpreter's ``bin`` first on PATH (where ``openacl`` is installed),
  except the two set-up commands, which ``.ci/run`` runs; a block makes the files it uses.
  ```bash blocks are shown, not run (they need the repository's folders or a GPU).
* The README's two commands are the ones ``.ci/run`` runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SHARED = ROOT.parent / "shared"
SETUP_COMMANDS = ("python3 -m venv", ".venv/bin/pip install")  # run by .ci/run, not here
SHELL_BLOCK_TIMEOUT_S = 300


def _blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_blocks_run(page):
    blocks = _blocks(page, "python")
    if page == README:
        assert blocks, "the README has no python examples"
    namespace: dict = {}
    for block in blocks:
        # dont_inherit: run each block as a script would, without this module's __future__ flags
        exec(compile(block, str(page), "exec", dont_inherit=True), namespace)  # noqa: S102


SHELL_BLOCKS = [(page, index, block) for page in PAGES
                for index, block in enumerate(_blocks(page, "sh"))
                if not block.lstrip().startswith(SETUP_COMMANDS)]


@pytest.mark.parametrize(("page", "index", "block"), SHELL_BLOCKS,
                         ids=[f"{page.stem}-{index}" for page, index, _ in SHELL_BLOCKS])
def test_shell_blocks_run(page, index, block, tmp_path):
    from openacl.cli import zoo

    if "ppocr-det" in block and zoo.cached("ppocr-det") is None and not (
            SHARED / "models").is_dir():
        pytest.skip("needs PP-OCRv4 det in the cache: `openacl fetch ppocr-det`")
    work = tmp_path / "work"
    work.mkdir()
    if (SHARED / "models").is_dir():  # openacl fetch looks in ../shared/models
        (tmp_path / "shared").symlink_to(SHARED)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=work, env=env,
                          capture_output=True, text=True, timeout=SHELL_BLOCK_TIMEOUT_S)
    assert done.returncode == 0, (f"{page.name} block {index} failed:\n{block}\n{done.stdout}\n"
                                  f"{done.stderr}")


def test_readme_commands_match_ci():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [block.strip() for block in _blocks(README, "sh")
                if block.lstrip().startswith(SETUP_COMMANDS)]
    assert len(commands) == 2, commands
    for command in commands:
        assert command in ci, f"README command not run by .ci/run: {command}"
