"""Public names are chosen: every public module has an explicit ``__all__`` whose names
exist, and ``dir()`` shows those names (and dunders) only, not the helpers and modules it
imports (numpy as np, logging, typing names...)."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_MODULES = [
    "openacl", "openacl.rt", "openacl.aclnn", "openacl.mdl", "openacl.op", "openacl.util",
    "openacl.dtypes", "openacl.errors", "openacl.tensor", "openacl.constants",
    "openacl.custom", "openacl.tools", "openacl.tools.verify", "openacl.tools.datagen",
    "openacl.hccl",
    "openacl.compat", "openacl.compat.aclnn", "openacl.compat.hccl", "openacl.compat.acl",
    "openacl.compat.acl.rt", "openacl.compat.acl.op", "openacl.compat.acl.mdl",
    "openacl.compat.acl.util", "openacl.compat.acl.media", "openacl.compat.acl.constants",
]
IMPLEMENTATION_NAMES = {"np", "numpy", "logging", "warnings", "annotations", "Any",
                        "Callable", "Sequence", "functools", "bind_arguments", "core",
                        "FUNCTIONS", "expose", "public"}


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_the_module_shows_only_its_chosen_names(name):
    module = importlib.import_module(name)
    chosen = module.__all__
    assert isinstance(chosen, list) and len(set(chosen)) == len(chosen), name
    for attribute in chosen:
        assert hasattr(module, attribute), f"{name}.__all__ names {attribute!r}, which is missing"
    shown = {n for n in dir(module) if not n.startswith("_")}
    assert shown <= set(chosen), f"{name}: dir() shows {sorted(shown - set(chosen))[:10]}"
    leaked = set(chosen) & IMPLEMENTATION_NAMES
    assert not leaked, f"{name}.__all__ holds implementation names {sorted(leaked)}"
