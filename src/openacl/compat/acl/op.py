"""pyACL's ``acl.op``: single operators by op type, with pyACL's conventions.

Every function returns what pyACL returns (``ret``; ``(handle, ret)``; None for a ``void``
C function) and nothing raises for a bad argument: the code comes back and the message is
kept for ``acl.get_recent_err_msg()``. The computation is ``openacl.op``'s.

Single-op models (``openacl.singleop`` holds the design note): ``set_model_dir`` and
``load`` register single-op descriptions (CANN's ``atc --singleop`` JSON, or our compiled
files from ``openacl convert --singleop``) with the current runtime. Once one is registered,
``execute``/``execute_v2``/``create_handle``/``cast`` run a call only if it matches one of
them (ACL_ERROR_OP_NOT_FOUND, 100024, with the nearest candidates otherwise), as ACL
matches calls against the ``.om`` files it loaded. With none registered a call runs
directly, as CANN's online-compile path would. ``compile`` registers the call it compiled
(without turning matching on). The registry lives until ``finalize``, as CANN's does until
``aclFinalize``.

Signatures are pyACL's (hiascend "pyACL API reference", 算子加载与执行 / aclopAttr /
aclopHandle): note ``set_attr_data_type`` returns ``(attr, ret)``, and the ``set_attr_list_*``
setters take ``(attr, name, values)`` as well as the older ``(attr, name, num, values)``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from openacl import op as _op
from openacl import singleop as _singleop
from openacl._api import module_dir
from openacl.compat.acl._face import HANDLE, RET, VOID, outputs
from openacl.compat.acl._face import generate as _generate
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_INVALID_FILE_SIZE, ACL_ERROR_INVALID_PARAM, AclError
from openacl.op.attr import _bad, _is_int
from openacl.runtime import core
from openacl.tensor import lookup_tensor_desc

ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR = 0, 1, 2  # aclopEngineType
ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED = 0, 1  # aclopCompileType
ENGINE_TYPES = (ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR)

# -- the registry of single-op models, one per runtime ---------------------------------------
_registries: weakref.WeakKeyDictionary[Any, _singleop.SingleOpRegistry] = \
    weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry() -> _singleop.SingleOpRegistry:
    """The current runtime's single-op models (created empty on first use)."""
    runtime = core.current()
    with _registries_lock:
        found = _registries.get(runtime)
        if found is None:
            found = _registries[runtime] = _singleop.SingleOpRegistry()
        return found


def _spec(desc: Any, argument: str) -> _singleop.TensorSpec:
    try:
        target = lookup_tensor_desc(desc, argument)
    except AclError as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM, exc.message) from None
    if target.data_type == DataType.ACL_DT_UNDEFINED:
        return _singleop.TensorSpec(DataType.ACL_DT_UNDEFINED, Format.ACL_FORMAT_UNDEFINED, ())
    return _singleop.TensorSpec(target.data_type, target.format, tuple(target.dims),
                                tuple(tuple(r) for r in target.dim_ranges), target.name)


def _specs(descs: Any, argument: str) -> list[_singleop.TensorSpec]:
    if descs is None or isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad(argument, descs, "expected a list of tensor desc handles")
    return [_spec(d, f"{argument}[{i}]") for i, d in enumerate(descs)]


def _call_signature(op_type: Any, input_desc: Any, output_desc: Any, attr: Any
                    ) -> tuple[str, list, list, dict]:
    if not isinstance(op_type, str) or not op_type:
        raise _bad("opType", op_type, "expected the op type name, a non-empty string")
    return (op_type, _specs(input_desc, "inputDesc"), _specs(output_desc, "outputDesc"),
            _op.attr_values(attr))


def _require_model(op_type: Any, input_desc: Any, output_desc: Any, attr: Any) -> None:
    """With single-op models registered, the call must match one (else 100024)."""
    models = registry()
    if models.active:
        models.match(*_call_signature(op_type, input_desc, output_desc, attr))


# -- single-op models --------------------------------------------------------------------------
def _set_model_dir(model_dir: str) -> None:
    """aclopSetModelDir: register every single-op model under ``model_dir`` (three levels)."""
    if not isinstance(model_dir, str) or not model_dir:
        raise _bad("modelDir", model_dir, "expected a directory path")
    registry().add(_singleop.load_dir(model_dir))


def _load(model: Any, model_size: int) -> None:
    """aclopLoad: register the single-op model held in memory at ``model`` (an address, as
    ``acl.util.bytes_to_ptr`` gives; a bytes object is accepted too) of ``model_size``
    bytes."""
    size = core.check_size(model_size, "modelSize")
    if size > _singleop.MAX_FILE_BYTES:
        raise AclError(ACL_ERROR_INVALID_FILE_SIZE,
                       f"argument 'modelSize' = {size}: single-op models are at most "
                       f"{_singleop.MAX_FILE_BYTES} bytes")
    if isinstance(model, (bytes, bytearray, memoryview)):
        if size > len(model):
            raise _bad("modelSize", size, f"the model holds only {len(model)} bytes")
        data, source = bytes(model[:size]), "<model bytes>"
    else:
        from openacl.util import ptr_to_bytes

        data = ptr_to_bytes(model, size)
        source = f"<model at {model:#x}>" if _is_int(model) else "<model>"
    registry().add(_singleop.load_bytes(data, source))


# -- running ---------------------------------------------------------------------------------
def _execute_v2(op_type: str, input_desc: Sequence[int], inputs: Sequence[int],
               output_desc: Sequence[int], outputs: Sequence[int], attr: int,
               stream: int) -> None:
    """aclopExecuteV2 (asynchronous)."""
    _require_model(op_type, input_desc, output_desc, attr)
    _op.execute_v2(op_type, input_desc, inputs, output_desc, outputs, attr, stream)


def _execute(op_type: str, input_desc: Sequence[int], inputs: Sequence[int],
            output_desc: Sequence[int], outputs: Sequence[int], attr: int,
            stream: int) -> None:
    """aclopExecute (deprecated by CANN in favour of execute_v2; the same call here)."""
    _execute_v2(op_type, input_desc, inputs, output_desc, outputs, attr, stream)


def _create_handle(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
                  op_attr: int) -> int:
    """aclopCreateHandle: an op bound once for execute_with_handle."""
    _require_model(op_type, input_desc, output_desc, op_attr)
    return _op.create_handle(op_type, input_desc, output_desc, op_attr)


def _cast_attrs(dst_desc: Any) -> dict[str, tuple[str, Any]]:
    return {"dst_type": ("int", int(lookup_tensor_desc(dst_desc, "dstDesc").data_type))}


def _require_cast_model(src_desc: Any, dst_desc: Any) -> None:
    models = registry()
    if models.active:
        models.match("Cast", _specs([src_desc], "srcDesc"), _specs([dst_desc], "dstDesc"),
                     _cast_attrs(dst_desc))


def _create_handle_for_cast(src_desc: int, dst_desc: int, truncate: int) -> int:
    """aclopCreateHandleForCast."""
    _require_cast_model(src_desc, dst_desc)
    return _op.create_handle_for_cast(src_desc, dst_desc, truncate)


def _cast(src_desc: int, src_buffer: int, dst_desc: int, dst_buffer: int, truncate: int,
         stream: int) -> None:
    """aclopCast (asynchronous)."""
    _require_cast_model(src_desc, dst_desc)
    _op.cast(src_desc, src_buffer, dst_desc, dst_buffer, truncate, stream)


def _infer_shape(op_type: str, in_desc_list: Sequence[int], in_list: Sequence[int],
                num_outputs: int, out_desc_list: Sequence[int], attr: int) -> None:
    """aclopInferShape: the output descs' dims are updated in place."""
    if out_desc_list is None or isinstance(out_desc_list, (str, bytes)) or \
            not hasattr(out_desc_list, "__len__"):
        raise _bad("outDescList", out_desc_list, "expected a list of tensor desc handles")
    _op.infer_shape(op_type, in_desc_list, in_list, num_outputs, attr, list(out_desc_list))


def _update_params(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
                  attr: int) -> None:
    """aclopUpdateParams: checks the call (there is no tiling to update here)."""
    _call_signature(op_type, input_desc, output_desc, attr)
    _op.check_call(op_type, input_desc, output_desc, attr)


def _compile(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int], attr: int,
            engine_type: int, compile_flag: int, op_path: str | None = None) -> None:
    """aclopCompile: check the call and register it as a compiled single-op model (a later
    matching call finds it; compiling alone does not turn matching on)."""
    if engine_type not in ENGINE_TYPES or not _is_int(engine_type):
        raise _bad("engineType", engine_type, "expected ACL_ENGINE_SYS (0), ACL_ENGINE_AICORE "
                                              "(1) or ACL_ENGINE_VECTOR (2)")
    if compile_flag != ACL_COMPILE_SYS or not _is_int(compile_flag):
        raise _bad("compileFlag", compile_flag, "only ACL_COMPILE_SYS (0) is supported (CANN "
                                                "does not support ACL_COMPILE_UNREGISTERED)")
    signature = _call_signature(op_type, input_desc, output_desc, attr)
    _op.check_call(op_type, input_desc, output_desc, attr)
    registry().add([_singleop.description_of_call(*signature)], activate=False)


# -- attributes --------------------------------------------------------------------------------
def _as_bool(value: Any) -> Any:
    """pyACL documents bool attr values as int: 0 and 1 are accepted as False and True."""
    return bool(value) if _is_int(value) and value in (0, 1) else value


def _set_attr_bool(attr: int, attr_name: str, attr_value: Any) -> None:
    """aclopSetAttrBool (``attr_value`` a bool, or the int 0/1 pyACL documents)."""
    _op.set_attr_bool(attr, attr_name, _as_bool(attr_value))


def _set_attr_list_bool(attr: int, attr_name: str, *values: Any) -> None:
    """aclopSetAttrListBool: ``(attr, name, values)`` or ``(attr, name, num, values)``."""
    if values and isinstance(values[-1], (list, tuple)):
        values = (*values[:-1], [_as_bool(v) for v in values[-1]])
    _op.set_attr_list_bool(attr, attr_name, *values)


def _set_attr_data_type(attr: int, attr_name: str, attr_value: int) -> int:
    """aclopSetAttrDataType; pyACL returns ``(attr, ret)``."""
    _op.set_attr_data_type(attr, attr_name, attr_value)
    return attr


def _set_attr_list_list_int(attr: int, attr_name: str, *values: Any) -> None:
    """aclopSetAttrListListInt: ``(attr, name, values)`` or the C-shaped
    ``(attr, name, num_lists, num_values, values)``."""
    if len(values) == 3:
        num_lists, num_values, rows = values
        if not _is_int(num_lists) or not hasattr(rows, "__len__") or num_lists != len(rows):
            raise _bad("numLists", num_lists, f"but values has {_len(rows)} lists")
        if not hasattr(num_values, "__len__") or list(num_values) != [_len(r) for r in rows]:
            raise _bad("numValues", num_values, "must give the length of each list")
    elif len(values) == 1:
        rows = values[0]
    else:
        raise _bad("values", values, "expected (values) or (numLists, numValues, values)")
    _op.set_attr_list_list_int(attr, attr_name, rows)


def _len(value: Any) -> int | None:
    return len(value) if hasattr(value, "__len__") else None


_TABLE = [
    ("set_model_dir", _set_model_dir, RET),
    ("load", _load, RET),
    ("create_attr", _op.create_attr, HANDLE),
    ("destroy_attr", _op.destroy_attr, VOID),
    ("set_attr_bool", _set_attr_bool, RET),
    ("set_attr_int", _op.set_attr_int, RET),
    ("set_attr_float", _op.set_attr_float, RET),
    ("set_attr_string", _op.set_attr_string, RET),
    ("set_attr_data_type", _set_attr_data_type, outputs("attr")),
    ("set_attr_list_bool", _set_attr_list_bool, RET),
    ("set_attr_list_int", _op.set_attr_list_int, RET),
    ("set_attr_list_float", _op.set_attr_list_float, RET),
    ("set_attr_list_string", _op.set_attr_list_string, RET),
    ("set_attr_list_list_int", _set_attr_list_list_int, RET),
    ("execute", _execute, RET),
    ("execute_v2", _execute_v2, RET),
    ("create_handle", _create_handle, outputs("handle")),
    ("create_handle_for_cast", _create_handle_for_cast, outputs("handle")),
    ("execute_with_handle", _op.execute_with_handle, RET),
    ("destroy_handle", _op.destroy_handle, VOID),
    ("cast", _cast, RET),
    ("infer_shape", _infer_shape, RET),
    ("update_params", _update_params, RET),
    ("compile", _compile, RET),
]

__all__ = [*_generate(_TABLE, globals()), "registry", "ACL_ENGINE_SYS", "ACL_ENGINE_AICORE",
           "ACL_ENGINE_VECTOR", "ACL_COMPILE_SYS", "ACL_COMPILE_UNREGISTERED"]

__dir__ = module_dir(globals())
