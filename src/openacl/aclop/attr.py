"""aclopAttr: an op call's attribute set (``create_attr``, ``set_attr_*``) and the kinds
an attribute value can have (``ATTR_KINDS``); also the argument checks the aclop face shares
(``_bad``, ``_is_int``...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core

ATTR_KINDS = ("bool", "int", "float", "str", "type", "list_bool", "list_int", "list_float",
              "list_str", "list_list_int")
ATTR_KIND_NAMES = {"bool": "Bool", "int": "Int", "float": "Float", "str": "String",
                   "type": "Type", "list_bool": "ListBool", "list_int": "ListInt",
                   "list_float": "ListFloat", "list_str": "ListString",
                   "list_list_int": "ListListInt"}
COMPATIBLE_KINDS = {"int": {"type"}, "type": {"int"}}  # dst_type is an Int holding a DataType


class OpAttr:
    """aclopAttr: attribute name -> (kind, value); kinds are ``ATTR_KINDS``."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[str, Any]] = {}
        self.handle = core.current().handles.add(self)

    def __repr__(self) -> str:
        return f"<aclopAttr {self.values!r}>"


def _bad(argument: str, value: Any, reason: str) -> AclError:
    return AclError(ACL_ERROR_INVALID_PARAM,
                    f"argument '{argument}' = {value!r} is invalid: {reason}")


def _lookup_attr(attr: Any) -> OpAttr:
    return core.current().handles.get(attr, OpAttr, "attr")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _set(attr: Any, name: Any, kind: str, value: Any) -> None:
    target = _lookup_attr(attr)
    if not isinstance(name, str) or not name:
        raise _bad("attrName", name, "expected a non-empty string")
    target.values[name] = (kind, value)


def _scalar(value: Any, check: Callable[[Any], bool], convert: Callable[[Any], Any],
            what: str) -> Any:
    if not check(value):
        raise _bad("attrValue", value, f"expected {what}")
    return convert(value)


def _list(args: tuple, check: Callable[[Any], bool], convert: Callable[[Any], Any],
          what: str) -> list:
    """The values of a list setter: ``(values)`` or pyACL's ``(num, values)``."""
    if len(args) == 1:
        values = args[0]
    elif len(args) == 2:
        num, values = args
        if not _is_int(num):
            raise _bad("numValues", num, "expected an integer")
    else:
        raise _bad("values", args, "expected (values) or (numValues, values)")
    if isinstance(values, np.ndarray):
        values = values.reshape(-1).tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise _bad("values", values, f"expected a list of {what}")
    if len(args) == 2 and int(args[0]) != len(values):
        raise _bad("numValues", args[0], f"but values has {len(values)} entries")
    for item in values:
        if not check(item):
            raise _bad("values", values, f"element {item!r} is not {what}")
    return [convert(v) for v in values]


def attr_values(attr: Any) -> dict[str, tuple[str, Any]]:
    """The attributes set on an aclopAttr: name -> (kind, value); ``{}`` for None or 0."""
    return {} if attr is None or attr == 0 else dict(_lookup_attr(attr).values)


def create_attr() -> int:
    """aclopCreateAttr: an empty attribute set; returns its handle."""
    return OpAttr().handle


def destroy_attr(attr: int) -> None:
    """aclopDestroyAttr."""
    core.current().handles.remove(_lookup_attr(attr).handle)


def set_attr_bool(attr: int, name: str, value: bool) -> None:
    _set(attr, name, "bool", _scalar(value, _is_bool, bool, "a bool"))


def set_attr_int(attr: int, name: str, value: int) -> None:
    _set(attr, name, "int", _scalar(value, _is_int, int, "an integer"))


def set_attr_float(attr: int, name: str, value: float) -> None:
    _set(attr, name, "float", _scalar(value, _is_number, float, "a number"))


def set_attr_string(attr: int, name: str, value: str) -> None:
    _set(attr, name, "str", _scalar(value, lambda v: isinstance(v, str), str, "a string"))


def set_attr_data_type(attr: int, name: str, value: Any) -> None:
    """aclopSetAttrDataType: ``value`` is an aclDataType (or its int, or a numpy dtype)."""
    _set(attr, name, "type", dtypes.to_data_type(value, "attrValue"))


def set_attr_list_bool(attr: int, name: str, *values: Any) -> None:
    """``(attr, name, values)`` or pyACL's ``(attr, name, num_values, values)``."""
    _set(attr, name, "list_bool", _list(values, _is_bool, bool, "a bool"))


def set_attr_list_int(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_int", _list(values, _is_int, int, "an integer"))


def set_attr_list_float(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_float", _list(values, _is_number, float, "a number"))


def set_attr_list_string(attr: int, name: str, *values: Any) -> None:
    _set(attr, name, "list_str", _list(values, lambda v: isinstance(v, str), str, "a string"))


def set_attr_list_list_int(attr: int, name: str, values: Sequence[Sequence[int]]) -> None:
    """aclopSetAttrListListInt: a list of int lists."""
    rows = _list((values,), lambda v: isinstance(v, (list, tuple, np.ndarray)), list,
                 "a list of integers")
    _set(attr, name, "list_list_int",
         [_list((row,), _is_int, int, "an integer") for row in rows])
