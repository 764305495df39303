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

from collections.abc import Callable
from typing import Any

from openacl._api import module_dir
from openacl.errors import expose
from openacl.ops import BUILT_IN
from openacl.ops.executor import (  # noqa: F401 - re-exported as the aclnn executor API
    destroy_executor,
    set_executor_repeatable,
    set_input_tensor_addr,
    set_output_tensor_addr,
    set_tensor_addr,
)
from openacl.ops.faces import PHASE1_SUFFIX, resolve, snake_faces
from openacl.ops.registry import snake_case


def __getattr__(name: str) -> Callable[..., Any]:
    """Phase 1 or phase 2 of the operator ``name`` stands for, as the registry has it now
    (ops/faces.py: built once, kept here for built-in operators)."""
    op, kind, build = snake_faces(name)
    return resolve(globals(), name, op, kind, build, BUILT_IN)


EXECUTOR_FUNCTIONS = ["destroy_executor", "set_executor_repeatable", "set_input_tensor_addr",
                      "set_output_tensor_addr", "set_tensor_addr"]
# the executor functions and both phases of every built-in operator (named from the index:
# no operator family is imported for this; custom operators resolve through __getattr__)
__all__ = [*EXECUTOR_FUNCTIONS, "EXECUTOR_FUNCTIONS",
           *sorted(f"{snake_case(name)}{suffix}" for name in BUILT_IN
                   for suffix in (PHASE1_SUFFIX, ""))]
# an AclError leaving phase 1 or an executor function records the recent error message;
# phase 2 (the hot path of a repeatable executor) is left bare: its errors are raised only
expose(globals(), EXECUTOR_FUNCTIONS)
__dir__ = module_dir(globals())
