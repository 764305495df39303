"""The aclnn operator library, Pythonic face.

For every operator ``aclnnX`` (see ``openacl.ops.registry``) this module has

* ``x_get_workspace_size(<CANN's arguments>) -> (workspace_size, executor)`` (phase 1:
  validates synchronously, raises ``AclError`` 161001/161002), and
* ``x(workspace, workspace_size, executor, stream)`` (phase 2: enqueues, returns at once),

named by CANN's rule (``aclnnGeluV2`` -> ``gelu_v2``, ``aclnnInplaceAdd`` ->
``inplace_add``), plus the executor functions: ``set_executor_repeatable``,
``destroy_executor``, ``set_input_tensor_addr``, ``set_output_tensor_addr``,
``set_tensor_addr``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from openacl._api import module_dir
from openacl.errors import expose, public
from openacl.ops import REGISTRY
from openacl.ops.dispatch import bind_arguments, phase1, phase2
from openacl.ops.executor import (  # noqa: F401 - re-exported as the aclnn executor API
    destroy_executor,
    set_executor_repeatable,
    set_input_tensor_addr,
    set_output_tensor_addr,
    set_tensor_addr,
)
from openacl.ops.registry import OpDef
from openacl.ops.signature import python_signature


def _make_phase1(op: OpDef) -> Callable[..., tuple[int, int]]:
    signature = python_signature(op.params)

    def get_workspace_size(*args: Any, **kwargs: Any) -> tuple[int, int]:
        return phase1(op, bind_arguments(op, signature, args, kwargs))

    get_workspace_size.__name__ = f"{op.snake_name}_get_workspace_size"
    get_workspace_size.__qualname__ = get_workspace_size.__name__
    get_workspace_size.__signature__ = signature  # type: ignore[attr-defined]
    get_workspace_size.__doc__ = (f"Phase 1 of {op.c_name}: returns (workspace_size, "
                                  f"executor).\n\n{op.doc}")
    return public(get_workspace_size)


def _make_phase2(op: OpDef) -> Callable[..., None]:
    # a partial, not a closure: phase 2 is the hot path of a repeatable executor
    launch = functools.partial(phase2, op)
    launch.__name__ = launch.__qualname__ = op.snake_name
    launch.__doc__ = (f"Phase 2 of {op.c_name}: {op.snake_name}(workspace, workspace_size, "
                      f"executor, stream) enqueues the call bound by phase 1 on stream.")
    return launch


for _op in REGISTRY.values():
    globals()[f"{_op.snake_name}_get_workspace_size"] = _make_phase1(_op)
    globals()[_op.snake_name] = _make_phase2(_op)
del _op



def __getattr__(name: str) -> Callable[..., Any]:
    """Functions of operators registered after this module was imported (custom ops)."""
    from openacl.ops.registry import by_snake_name

    phase_one = name.endswith("_get_workspace_size")
    op = by_snake_name(name.removesuffix("_get_workspace_size") if phase_one else name)
    if op is None:
        raise AttributeError(f"module 'openacl.aclnn' has no operator function {name!r}")
    return _make_phase1(op) if phase_one else _make_phase2(op)


EXECUTOR_FUNCTIONS = ["destroy_executor", "set_executor_repeatable", "set_input_tensor_addr",
                      "set_output_tensor_addr", "set_tensor_addr"]
# the executor functions and both phases of every built-in operator (custom operators
# registered later are reached through __getattr__)
__all__ = [*EXECUTOR_FUNCTIONS, "EXECUTOR_FUNCTIONS",
           *sorted(name for op in REGISTRY.values()
                   for name in (f"{op.snake_name}_get_workspace_size", op.snake_name))]
# an AclError leaving phase 1 or an executor function records the recent error message;
# phase 2 (the hot path of a repeatable executor) is left bare: its errors are raised only
expose(globals(), EXECUTOR_FUNCTIONS)

__dir__ = module_dir(globals())
