"""pyACL's ``acl.op``: single operators by op type, with pyACL's conventions.

Every function returns what pyACL returns (``ret``; ``(handle, ret)``; None for a ``void``
C function) and nothing raises for a bad argument: the code comes back and the message is
kept for ``acl.get_recent_err_msg()``. The computation is ``openacl.op``'s.

Single-op models and the rule that a call must match a loaded one live in
``openacl.op`` (``aclop/models.py`` holds the design note), so both faces refuse the same
calls: once ``set_model_dir`` or ``load`` registered a model, ``execute``/``execute_v2``/
``create_handle``/``cast`` run a call only if it matches one of them (100024 otherwise).

Signatures are pyACL's (hiascend "pyACL API reference", 算子加载与执行 / aclopAttr /
aclopHandle): note ``set_attr_data_type`` returns ``(attr, ret)``, and the ``set_attr_list_*``
setters take ``(attr, name, values)`` as well as the older ``(attr, name, num, values)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openacl import op as _op
from openacl._api import module_dir
from openacl.aclop import (  # aclopEngineType / aclopCompileType, as pyACL has them
    ACL_COMPILE_SYS,
    ACL_COMPILE_UNREGISTERED,
    ACL_ENGINE_AICORE,
    ACL_ENGINE_SYS,
    ACL_ENGINE_VECTOR,
)
from openacl.aclop import models as _models
from openacl.aclop.attr import _bad, _is_int
from openacl.compat.acl._face import HANDLE, RET, VOID, outputs
from openacl.compat.acl._face import generate as _generate

registry = _models.registry  # the current runtime's single-op models (aclop/models.py)


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
    _models.call_signature(op_type, input_desc, output_desc, attr)
    _op.check_call(op_type, input_desc, output_desc, attr)


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
    ("set_model_dir", _op.set_model_dir, RET),
    ("load", _op.load, RET),
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
    ("execute", _op.execute_v2, RET),  # deprecated by CANN for execute_v2: the same call
    ("execute_v2", _op.execute_v2, RET),
    ("create_handle", _op.create_handle, outputs("handle")),
    ("create_handle_for_cast", _op.create_handle_for_cast, outputs("handle")),
    ("execute_with_handle", _op.execute_with_handle, RET),
    ("destroy_handle", _op.destroy_handle, VOID),
    ("cast", _op.cast, RET),
    ("infer_shape", _infer_shape, RET),
    ("update_params", _update_params, RET),
    ("compile", _op.compile, RET),
]

__all__ = [*_generate(_TABLE, globals()), "registry", "ACL_ENGINE_SYS", "ACL_ENGINE_AICORE",
           "ACL_ENGINE_VECTOR", "ACL_COMPILE_SYS", "ACL_COMPILE_UNREGISTERED"]

__dir__ = module_dir(globals())
