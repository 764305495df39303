"""One face generator: the functions by which an operator is called, made once per operator
and resolved against the live registry.

An operator has five faces: phase 1 and phase 2 of the Pythonic two-phase API
(``openacl.aclnn.add_get_workspace_size`` / ``add``), the one-shot helper
(``openacl.ops.add``) and the C-named pair (``openacl.compat.aclnn.aclnnAddGetWorkspaceSize``
/ ``aclnnAdd``, built by the compat layer's convention: ``build`` is the caller's).

Design note (invariants)
------------------------
* A namespace resolves a name through ``resolve``: the operator the name stands for is
  looked up in the registry *at that moment*, so an operator registered later is found and
  one unregistered (``custom.unregister_op``) is gone from every namespace at once.
* A face is built once per operator definition (cached by identity; the entry goes with
  the definition) under one lock. A namespace keeps the faces of built-in operators in its
  globals (they are never unregistered), so later lookups are plain attribute reads; a
  custom operator's faces are never kept there.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

from openacl.ops.registry import REGISTRY, OpDef, by_snake_name
from openacl.ops.signature import python_signature

__all__ = ["face", "resolve", "phase1_face", "phase2_face", "snake_faces"]

Builder = Callable[[OpDef], Callable[..., Any]]
PHASE1_SUFFIX = "_get_workspace_size"

_faces: dict[tuple[int, str], tuple[weakref.ref, Callable[..., Any]]] = {}
_lock = threading.Lock()


def face(op: OpDef, kind: str, build: Builder) -> Callable[..., Any]:
    """The ``kind`` face of ``op`` (``build(op)`` the first time)."""
    key = (id(op), kind)
    with _lock:
        found = _faces.get(key)
        if found is not None and found[0]() is op:
            return found[1]
    made = build(op)
    with _lock:
        found = _faces.get(key)
        if found is not None and found[0]() is op:
            return found[1]  # another thread built it meanwhile: one face per operator
        _faces[key] = (weakref.ref(op, functools.partial(_forget, key, _faces, _lock)), made)
    return made


def _forget(key: tuple[int, str], faces: dict, lock: threading.Lock, _: weakref.ref) -> None:
    """Drop the faces of a definition that is gone (its weakref's callback; the table and
    lock are bound in, as module globals may be torn down first at exit)."""
    with lock:
        entry = faces.get(key)
        if entry is not None and entry[0]() is None:
            del faces[key]


def resolve(namespace: dict[str, Any], name: str, op: OpDef | None, kind: str,
            build: Builder, builtin: frozenset[str]) -> Callable[..., Any]:
    """Face ``kind`` of ``op`` (found by the caller for ``name``), kept in ``namespace``
    when ``op`` is the built-in operator of that name; AttributeError when there is none."""
    if op is None:
        raise AttributeError(f"module '{namespace.get('__name__')}' has no attribute {name!r}")
    made = face(op, kind, build)
    if op.name in builtin and REGISTRY.get(op.name) is op:
        namespace[name] = made
    return made


# -- the Pythonic two-phase faces -------------------------------------------------------------
def phase1_face(op: OpDef) -> Callable[..., tuple[int, int]]:
    """``<snake>_get_workspace_size(<CANN's arguments>) -> (workspace_size, executor)``."""
    from openacl.errors import public
    from openacl.ops.dispatch import bind_arguments, phase1

    signature = python_signature(op.params)

    def get_workspace_size(*args: Any, **kwargs: Any) -> tuple[int, int]:
        return phase1(op, bind_arguments(op, signature, args, kwargs))

    get_workspace_size.__name__ = f"{op.snake_name}{PHASE1_SUFFIX}"
    get_workspace_size.__qualname__ = get_workspace_size.__name__
    get_workspace_size.__signature__ = signature  # type: ignore[attr-defined]
    get_workspace_size.__doc__ = (f"Phase 1 of {op.c_name}: returns (workspace_size, "
                                  f"executor).\n\n{op.doc}")
    return public(get_workspace_size)


def phase2_face(op: OpDef) -> Callable[..., None]:
    """``<snake>(workspace, workspace_size, executor, stream)``: a partial, not a closure
    (phase 2 is the hot path of a repeatable executor)."""
    from openacl.ops.dispatch import phase2

    launch = functools.partial(phase2, op)
    launch.__name__ = launch.__qualname__ = op.snake_name  # type: ignore[attr-defined]
    launch.__doc__ = (f"Phase 2 of {op.c_name}: {op.snake_name}(workspace, workspace_size, "
                      f"executor, stream) enqueues the call bound by phase 1 on stream.")
    return launch


def snake_faces(name: str) -> tuple[OpDef | None, str, Builder]:
    """The operator, face kind and builder a Pythonic two-phase name stands for."""
    if name.endswith(PHASE1_SUFFIX):
        return by_snake_name(name.removesuffix(PHASE1_SUFFIX)), "phase1", phase1_face
    return by_snake_name(name), "phase2", phase2_face
