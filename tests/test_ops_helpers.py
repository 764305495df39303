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
    from openacl.ops.catalog import OPERATORS, _fresh_table
    from openacl.ops.registry import builtin_module

    registered = {}
    for name, op in REGISTRY.items():  # listing the registry imports every family
        module = builtin_module(op)
        if module is not None:
            registered.setdefault(module, set()).add(name)
    indexed = {family: set(names) for family, names in OPERATORS.items()}
    assert registered == indexed, (
        "src/openacl/ops/catalog.py is stale (python -m openacl.ops.catalog --write); its "
        "table should be:\n" + _fresh_table())


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


RACE = """
import sys, threading, time
import numpy as np
import openacl
from openacl.ops import REGISTRY
openacl.init({"stream_mode": "inline", "backend": "cpu"}); openacl.rt.set_device(0)
paused, go = threading.Event(), threading.Event()

def tracer(frame, event, arg):  # stop linalg's import right after Addmm is registered
    if frame.f_code.co_filename.endswith("ops/linalg.py") and frame.f_code.co_name == "<module>":
        def local(frame, event, arg):
            if event == "line" and not paused.is_set() and dict.__contains__(REGISTRY, "Addmm"):
                paused.set(); go.wait()
            return local
        return local
    return None

def importer():
    sys.settrace(tracer)
    REGISTRY["Matmul"]  # the first lookup imports the family

results = {}
def caller():
    try:
        openacl.rt.set_device(0)
        x, m = (openacl.to_device(np.ones(shape, np.float32)) for shape in ((2, 3), (3, 4)))
        bias = openacl.to_device(np.ones(4, np.float32))
        results["value"] = float(openacl.ops.addmm(bias, x, m).numpy()[0, 0])
    except Exception as exc:
        results["value"] = repr(exc)

first = threading.Thread(target=importer); first.start(); paused.wait(30)
second = threading.Thread(target=caller); second.start()
time.sleep(0.3)
waited = second.is_alive()  # blocked on the family's import, not running half a module
go.set(); first.join(30); second.join(30)
print(waited, results["value"])
"""


def test_a_lookup_during_another_threads_family_import_waits_for_it():
    assert _fresh_process(RACE).split() == ["True", "4.0"]
