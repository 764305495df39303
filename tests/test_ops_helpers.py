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
    assert callable(openacl.ops.convolution)  # (its family module is ops.conv)


def test_helpers_are_made_on_first_use_only():
    code = ("import openacl.ops as ops; names = dict(vars(ops)); "
            "print(sum(callable(names.get(op.snake_name)) and "
            "getattr(names.get(op.snake_name), '__module__', '') == 'openacl.ops.oneshot' "
            "for op in ops.REGISTRY.values()))")
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert made == "0"


def test_the_index_says_which_family_registers_each_built_in():
    from openacl.ops.index import OPERATORS, _fresh_table
    from openacl.ops.registry import builtin_module

    registered = {}
    for name, op in REGISTRY.items():  # listing the registry imports every family
        module = builtin_module(op)
        if module is not None:
            registered.setdefault(module, set()).add(name)
    indexed = {family: set(names) for family, names in OPERATORS.items()}
    assert registered == indexed, (
        "src/openacl/ops/index.py is stale; replace its table with:\n" + _fresh_table())


def _fresh_process(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_lookup_imports_only_the_family_of_its_operator():
    families = _fresh_process(
        "import sys, openacl.ops as ops; before = set(sys.modules); ops.REGISTRY['Matmul']; "
        "print(sorted(m.rsplit('.', 1)[1] for m in set(sys.modules) - before "
        "if m.startswith('openacl.ops.')))")
    assert "linalg" in families and "pooling" not in families and "movement" not in families


def test_a_later_operator_named_like_an_unloaded_built_in_is_refused():
    message = _fresh_process(
        "import openacl.ops as ops\n"
        "from openacl.ops.registry import OpDef, add_op\n"
        "try:\n"
        "    add_op(OpDef('Softmax', (), lambda call: None))\n"
        "except ValueError as exc:\n"
        "    print(exc)\n")
    assert "registered twice" in message
