"""The aclnn operator library: definitions, registry, executors, one-shot helpers.

Every module in this package that is not part of the framework is an operator family that
registers its operators with ``@register`` when imported. The registry imports a family the
first time one of its operators is looked up (``index.py`` says which registers which), or
all of them when it is listed whole; ``openacl.ops.<name>`` one-shot helpers are made on
first use. The two-phase API lives in ``openacl.aclnn``. Adding an operator touches its
family module and the index (a test says when the index is stale).
"""

from __future__ import annotations

import pkgutil

from openacl.ops.index import OPERATORS
from openacl.ops.registry import REGISTRY, OpDef, register, register_inplace, snake_case

# modules of the framework itself; every other module in this package is an operator family
FRAMEWORK_MODULES = frozenset({"call", "dispatch", "executor", "fpstate", "index", "oneshot",
                               "promotion", "registry", "signature"})
FAMILIES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                        if info.name not in FRAMEWORK_MODULES and not info.name.startswith("_")))
BUILT_IN = frozenset(name for names in OPERATORS.values() for name in names)

REGISTRY.index.update({name: f"{__name__}.{family}" for family, names in OPERATORS.items()
                       for name in names})
__all__ = ["REGISTRY", "OpDef", "register", "register_inplace", "FAMILIES",
           *sorted(snake_case(name) for name in BUILT_IN)]


def __getattr__(name: str):
    """The one-shot helper ``openacl.ops.<name>``, made on first use (making all ~200 at
    import would cost memory a model run never needs) and kept for the built-in operators;
    custom operators registered after import are found the same way."""
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
