"""The aclnn operator library: definitions, registry, executors, one-shot helpers.

Importing this package imports every operator family module in it (each registers its
operators with ``@register``), then generates the one-shot helpers ``openacl.ops.<name>``.
The two-phase API lives in ``openacl.aclnn``. Adding an operator touches one place: its
family module.
"""

from __future__ import annotations

import importlib
import pkgutil

from openacl.ops.registry import REGISTRY, OpDef, register, register_inplace

# modules of the framework itself; every other module in this package is an operator family
FRAMEWORK_MODULES = frozenset({"call", "dispatch", "executor", "oneshot", "promotion",
                               "registry", "signature"})
FAMILIES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                        if info.name not in FRAMEWORK_MODULES and not info.name.startswith("_")))

__all__ = ["REGISTRY", "OpDef", "register", "register_inplace", "FAMILIES"]


def _load() -> None:
    from openacl.ops.dispatch import phase1, phase2
    from openacl.ops.oneshot import make_one_shot

    for family in FAMILIES:
        importlib.import_module(f"openacl.ops.{family}")
    for op in REGISTRY.values():
        globals()[op.snake_name] = make_one_shot(op, phase1, phase2)
        __all__.append(op.snake_name)


_load()


def __getattr__(name: str):
    """One-shot helpers of operators registered after import (custom operators)."""
    from openacl.ops.dispatch import phase1, phase2
    from openacl.ops.oneshot import make_one_shot
    from openacl.ops.registry import by_snake_name

    op = by_snake_name(name)
    if op is None:
        raise AttributeError(f"module 'openacl.ops' has no attribute {name!r}")
    return make_one_shot(op, phase1, phase2)
