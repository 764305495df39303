"""The aclnn operator library: definitions, registry, executors, one-shot helpers.

Importing this package registers every operator family. ``openacl.ops.<name>(...)`` are the
one-shot helpers; the two-phase API lives in ``openacl.aclnn``.
"""

from __future__ import annotations

from openacl.ops import arithmetic  # noqa: F401 - registers operators
from openacl.ops.registry import REGISTRY, OpDef, register, register_inplace

__all__ = ["REGISTRY", "OpDef", "register", "register_inplace"]


def _install_one_shots() -> None:
    from openacl.ops.dispatch import phase1, phase2
    from openacl.ops.oneshot import make_one_shot

    for op in REGISTRY.values():
        globals()[op.snake_name] = make_one_shot(op, phase1, phase2)
        __all__.append(op.snake_name)


_install_one_shots()
