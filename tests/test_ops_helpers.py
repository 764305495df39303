"""The one-shot helpers ``openacl.ops.<name>``: one per registered operator, made on first
use and kept (none is built at import: a model run never needs them)."""

from __future__ import annotations

import subprocess
import sys

import openacl.ops
from openacl.ops.registry import REGISTRY


def test_every_operator_has_its_helper_and_it_is_kept():
    for op in REGISTRY.values():
        helper = getattr(openacl.ops, op.snake_name)
        assert callable(helper) and getattr(openacl.ops, op.snake_name) is helper, op.name
        assert op.snake_name in openacl.ops.__all__
    # the family module named like its operator does not hide the helper
    assert callable(openacl.ops.convolution)


def test_helpers_are_made_on_first_use_only():
    code = ("import openacl.ops as ops; names = vars(ops); "
            "print(sum(callable(names.get(op.snake_name)) and "
            "getattr(names.get(op.snake_name), '__module__', '') == 'openacl.ops.oneshot' "
            "for op in ops.REGISTRY.values()))")
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert made == "1"  # convolution only (it must replace its family module's attribute)
