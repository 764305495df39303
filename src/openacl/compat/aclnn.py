"""C-named aclnn functions, generated from the same operator definitions as
``openacl.aclnn``: ``aclnnXGetWorkspaceSize(...) -> (workspace_size, executor, ret)`` and
``aclnnX(workspace, workspace_size, executor, stream) -> ret``, plus the executor and
aclTensor-family functions by their C names.
"""

from __future__ import annotations

from typing import Any

from openacl import tensor as _tensor
from openacl._api import module_dir
from openacl.compat.convention import returning_code, returning_handle, returning_outputs
from openacl.errors import ACLNN_ERR_PARAM_INVALID
from openacl.ops import BUILT_IN, REGISTRY
from openacl.ops import executor as _executor
from openacl.ops.dispatch import bind_arguments, phase1, phase2
from openacl.ops.faces import resolve
from openacl.ops.registry import OpDef
from openacl.ops.signature import python_signature


def _c_phase1(op: OpDef):
    signature = python_signature(op.params)

    def get_workspace_size(*args: Any, **kwargs: Any) -> tuple[int, int]:
        return phase1(op, bind_arguments(op, signature, args, kwargs))

    get_workspace_size.__name__ = f"{op.c_name}GetWorkspaceSize"
    get_workspace_size.__doc__ = f"{op.c_name}GetWorkspaceSize -> (workspace_size, executor, ret)"
    return returning_outputs(get_workspace_size, (0, 0), ACLNN_ERR_PARAM_INVALID)


def _c_phase2(op: OpDef):
    def launch(workspace: int, workspace_size: int, executor: Any, stream: Any) -> None:
        phase2(op, workspace, workspace_size, executor, stream)

    launch.__name__ = op.c_name
    launch.__doc__ = f"{op.c_name}(workspace, workspace_size, executor, stream) -> ret"
    return returning_code(launch, ACLNN_ERR_PARAM_INVALID)



aclSetAclOpExecutorRepeatable = returning_code(_executor.set_executor_repeatable)
aclDestroyAclOpExecutor = returning_code(_executor.destroy_executor)
aclSetInputTensorAddr = returning_code(_executor.set_input_tensor_addr)
aclSetOutputTensorAddr = returning_code(_executor.set_output_tensor_addr)
aclSetTensorAddr = returning_code(_executor.set_tensor_addr)

aclCreateTensor = returning_handle(_tensor.create_tensor)
aclCreateScalar = returning_handle(_tensor.create_scalar)
aclCreateIntArray = returning_handle(_tensor.create_int_array)
aclCreateFloatArray = returning_handle(_tensor.create_float_array)
aclCreateBoolArray = returning_handle(_tensor.create_bool_array)
aclCreateTensorList = returning_handle(_tensor.create_tensor_list)
aclCreateScalarList = returning_handle(_tensor.create_scalar_list)
aclDestroyTensor = returning_code(_tensor.destroy_tensor)
aclDestroyScalar = returning_code(_tensor.destroy_scalar)
aclDestroyIntArray = returning_code(_tensor.destroy_int_array)
aclDestroyFloatArray = returning_code(_tensor.destroy_float_array)
aclDestroyBoolArray = returning_code(_tensor.destroy_bool_array)
aclDestroyTensorList = returning_code(_tensor.destroy_tensor_list)
aclDestroyScalarList = returning_code(_tensor.destroy_scalar_list)
aclGetViewShape = returning_outputs(_tensor.get_view_shape, ((),))
aclGetStorageShape = returning_outputs(_tensor.get_storage_shape, ((),))
aclGetViewStrides = returning_outputs(_tensor.get_view_strides, ((),))
aclGetViewOffset = returning_outputs(_tensor.get_view_offset, (0,))
aclGetFormat = returning_outputs(_tensor.get_format, (-1,))
aclGetDataType = returning_outputs(_tensor.get_data_type, (-1,))
aclGetRawTensorAddr = returning_outputs(_tensor.get_raw_tensor_addr, (0,))
aclSetRawTensorAddr = returning_code(_tensor.set_raw_tensor_addr)
aclGetIntArraySize = returning_outputs(_tensor.get_int_array_size, (0,))
aclGetFloatArraySize = returning_outputs(_tensor.get_float_array_size, (0,))
aclGetBoolArraySize = returning_outputs(_tensor.get_bool_array_size, (0,))
aclGetTensorListSize = returning_outputs(_tensor.get_tensor_list_size, (0,))
aclGetScalarListSize = returning_outputs(_tensor.get_scalar_list_size, (0,))


# the C-named executor and aclTensor-family functions, and both phases of every built-in
# operator (custom operators registered later are reached through __getattr__)
__all__ = [
    *sorted(name for name in globals() if name.startswith("acl") and not name.startswith(
        "aclnn") and callable(globals()[name])),
    *sorted(f"aclnn{name}{suffix}" for name in BUILT_IN for suffix in ("GetWorkspaceSize", "")),
]
__dir__ = module_dir(globals())


def __getattr__(name: str) -> Any:
    """The C-named phase 1 or 2 of the operator ``name`` stands for, as the registry has it
    now (ops/faces.py: built once, kept here for built-in operators)."""
    suffix = "GetWorkspaceSize"
    op = None
    if name.startswith("aclnn"):
        op = REGISTRY.get(name[len("aclnn"):].removesuffix(suffix))
    if name.endswith(suffix):
        return resolve(globals(), name, op, "c_phase1", _c_phase1, BUILT_IN)
    return resolve(globals(), name, op, "c_phase2", _c_phase2, BUILT_IN)
