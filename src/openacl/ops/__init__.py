"""The aclnn operator library: definitions, registry, executors, one-shot helpers.

Every module in this package that is not part of the framework is an operator family that
registers its operators with ``@register`` when imported. The registry imports a family the
first time one of its operators is looked up (``catalog.py`` says which registers which), or
all of them when it is listed whole; ``openacl.ops.<name>`` one-shot helpers are made on
first use. The two-phase API lives in ``openacl.aclnn``. Adding an operator touches its
family module and the index (a test says when the index is stale).
"""

from __future__ import annotations

import pkgutil

from openacl.ops.catalog import OPERATORS
from openacl.ops.registry import REGISTRY, OpDef, register, register_inplace, snake_case

# modules of the framework itself; every other module in this package is an operator family
FRAMEWORK_MODULES = frozenset({"call", "catalog", "dispatch", "executor", "faces", "fpstate",
                               "oneshot", "promotion", "registry", "signature"})
FAMILIES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                        if info.name not in FRAMEWORK_MODULES and not info.name.startswith("_")))
BUILT_IN = frozenset(name for names in OPERATORS.values() for name in names)

REGISTRY.index.update({name: f"{__name__}.{family}" for family, names in OPERATORS.items()
                       for name in names})
__all__ = ["REGISTRY", "OpDef", "register", "register_inplace", "FAMILIES",
           *sorted(snake_case(name) for name in BUILT_IN)]


def __getattr__(name: str):
    """The one-shot helper ``openacl.ops.<name>`` of the operator ``name`` stands for, as
    the registry has it now (ops/faces.py: made on first use, not at import, and kept here
    for built-in operators); custom operators registered after import are found the same
    way, and are gone once unregistered."""
    from openacl.ops.faces import resolve
    from openacl.ops.oneshot import one_shot_face
    from openacl.ops.registry import by_snake_name

    return resolve(globals(), name, by_snake_name(name), "one_shot", one_shot_face, BUILT_IN)
