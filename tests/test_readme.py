"""The README's Python examples run as written (keeps the README true)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README has no python examples"
    namespace: dict = {}
    for block in blocks:
        # dont_inherit: run each block as a script would, without this module's __future__ flags
        exec(compile(block, str(README), "exec", dont_inherit=True), namespace)  # noqa: S102


def test_readme_commands_match_ci():
    readme = README.read_text(encoding="utf-8")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    for command in re.findall(r"```sh\n(\.venv/bin/python -m pytest|python3 -m venv[^\n]*)\n",
                              readme):
        assert command in ci, f"README command not run by .ci/run: {command}"
