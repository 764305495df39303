"""Running an operator's two phases; shared by the aclnn namespace, the C-named functions
and the one-shot helpers."""

from __future__ import annotations

import inspect
from typing import Any

from openacl.errors import ACLNN_ERR_INNER, ACLNN_ERR_PARAM_INVALID, AclError
from openacl.ops.executor import OpExecutor, find_executor
from openacl.ops.registry import OpDef


def phase1(op: OpDef, raw: dict[str, Any]) -> tuple[int, int]:
    """Validate and bind one call of ``op``: returns ``(workspace_size, executor handle)``."""
    try:
        call, kernel = op.bind(raw)
    except AclError:
        raise
    except Exception as exc:  # noqa: BLE001 - an operator bug must still be a clean AclError
        raise AclError(ACLNN_ERR_INNER, f"{op.c_name}: internal error in phase 1: "
                                        f"{type(exc).__name__}: {exc}") from exc
    executor = OpExecutor(op.name, call, kernel)
    return executor.workspace_bytes, executor.handle


def phase2(op: OpDef, workspace: int, workspace_size: int, executor: Any, stream: Any) -> None:
    """Enqueue a bound call; the executor must come from ``op``'s phase 1."""
    exe = find_executor(executor)
    if exe.op_name != op.name:
        raise AclError(ACLNN_ERR_PARAM_INVALID,
                       f"{op.c_name}: argument 'executor' was made by aclnn{exe.op_name}")
    exe.launch(workspace, workspace_size, stream)


def bind_arguments(op: OpDef, signature: inspect.Signature, args: tuple,
                   kwargs: dict[str, Any], defaults: bool = False) -> dict[str, Any]:
    """Match a call's arguments to ``op``'s parameters; a wrong count or an unknown keyword
    is ``ACLNN_ERR_PARAM_INVALID`` naming the expected arguments (not a bare TypeError)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        expected = ", ".join(signature.parameters)
        raise AclError(ACLNN_ERR_PARAM_INVALID,
                       f"{op.c_name}: {exc}; the arguments are ({expected})") from None
    if defaults:
        bound.apply_defaults()
    return dict(bound.arguments)
