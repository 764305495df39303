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
FRAMEWORK_MODULES = frozenset({"call", "dispatch", "executor", "fpstate", "oneshot",
                               "promotion", "registry", "signature"})
FAMILIES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                        if info.name not in FRAMEWORK_MODULES and not info.name.startswith("_")))

__all__ = ["REGISTRY", "OpDef", "register", "register_inplace", "FAMILIES"]


def _load() -> None:
    for family in FAMILIES:
        importlib.import_module(f"openacl.ops.{family}")
    __all__.extend(op.snake_name for op in REGISTRY.values())


def __getattr__(name: str):
    """The one-shot helper ``openacl.ops.<name>``, made on first use (making all ~200 at
    import would cost ~0.4 MB that a model run never needs) and kept for the built-in
    operators; custom operators registered after import are found the same way."""
    from openacl.ops.dispatch import phase1, phase2
    from openacl.ops.oneshot import make_one_shot
    from openacl.ops.registry import by_snake_name

    op = by_snake_name(name)
    if op is None:
        raise AttributeError(f"module 'openacl.ops' has no attribute {name!r}")
    helper = make_one_shot(op, phase1, phase2)
    if op.name in BUILT_IN and REGISTRY.get(op.name) is op:
        globals()[name] = helper
    return helper


_load()
BUILT_IN = frozenset(REGISTRY)  # the families' operators
# a helper named like its family module (convolution) replaces the module attribute the
# import left here: __getattr__ is only asked for names the module does not have
globals().update({name: __getattr__(name) for name in set(FAMILIES) & {
    op.snake_name for op in REGISTRY.values()}})
