"""``acl``: pyACL's top-level module, over OpenACL's runtime and tensor code.

Run an unchanged pyACL program with ``python -m openacl.compat SCRIPT.py ARGS...`` (or
``openacl run-pyacl``): its ``import acl`` resolves to this package. Nothing installs it as a
top-level ``acl`` by default, so a machine with real CANN keeps its own.

pyACL's conventions (checked against the pyACL API reference, "aclpythondevg"): handles and
pointers are ints; a function with outputs returns ``(outputs..., ret)``
(``dim_size, ret = acl.get_tensor_desc_dim_v2(desc, 0)``); a constructor returns the handle,
0 on failure (``acl.create_data_buffer``, including ``(0, 0)``); getters that C declares
returning the value return it alone (``acl.get_tensor_desc_size(desc)``); ``void`` C
functions return None (``acl.destroy_tensor_desc``, ``acl.set_tensor_desc_name``). Nothing
raises for a bad argument: the code (or the placeholder) comes back and the message is kept
for ``acl.get_recent_err_msg()``.

Submodules: ``acl.rt`` (runtime), ``acl.util`` (pointers, threads), ``acl.media`` (DVPP
memory), ``acl.op`` (single-op models, when present), ``acl.mdl`` (the model runtime).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from openacl import dtypes as _dtypes
from openacl import log as _log
from openacl import rt as _rt
from openacl import tensor as _tensor
from openacl._api import module_dir
from openacl.compat.acl import constants as _constants
from openacl.compat.acl import mdl, media, rt, util
from openacl.compat.acl._face import HANDLE, RET, VALUE, VOID, generate, outputs
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.errors import get_recent_err_msg as get_recent_err_msg  # aclGetRecentErrMsg
from openacl.runtime import core as _core

MIN_DIM_RANGE_NUM = 2  # aclGetTensorDescDimRange: dimRange must hold at least [min, max]
ACL_DEBUG, ACL_INFO, ACL_WARNING, ACL_ERROR = range(4)  # aclLogLevel (aclAppLog's levels)
APP_LOG_LEVELS = {ACL_DEBUG: _log.LEVELS["debug"], ACL_INFO: _log.LEVELS["info"],
                  ACL_WARNING: _log.LEVELS["warning"], ACL_ERROR: _log.LEVELS["error"]}


def _init(config_path: str | None = None) -> None:
    """aclInit: ``config_path`` may be omitted, None or "" (defaults), or a JSON file."""
    _core.init(config_path or None)


def _finalize() -> None:
    """aclFinalize: tears down at once; allocations still alive are released and logged."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _core.LeakWarning)
        _core.finalize()
    for warning in caught:
        _log.logger().warning("acl.finalize: %s", warning.message)


def _finalize_reference() -> int:
    """aclFinalizeReference: undo one init; returns the reference count left."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _core.LeakWarning)
        count = _core.finalize_reference()
    for warning in caught:
        _log.logger().warning("acl.finalize_reference: %s", warning.message)
    return count


def _get_tensor_desc_num_dims(desc: int) -> int:
    """aclGetTensorDescNumDims: unknown rank reads ACL_UNKNOWN_RANK, (size_t)-2."""
    count = _tensor.get_tensor_desc_num_dims(desc)
    return count % _constants.SIZE_T_MODULUS


def _get_tensor_desc_dim_range(desc: int, index: int, dim_range_num: int) -> list[int]:
    """aclGetTensorDescDimRange: ``[min, max]`` of dim ``index`` (``[1, -1]``: unbounded)."""
    if not isinstance(dim_range_num, int) or dim_range_num < MIN_DIM_RANGE_NUM:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'dimRangeNum' = {dim_range_num!r} is invalid: it must be "
                       f">= {MIN_DIM_RANGE_NUM}")
    return list(_tensor.get_tensor_desc_dim_range(desc, index))


def _set_tensor_shape_range(desc: int, dim_range_num: int,
                            dim_range: Sequence[Sequence[int]]) -> None:
    """aclSetTensorShapeRange: ``dim_range`` holds ``dim_range_num`` ``[min, max]`` pairs."""
    if not isinstance(dim_range, Sequence) or dim_range_num != len(dim_range):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'dimRangeNum' = {dim_range_num!r} does not match "
                       f"argument 'dimRange' = {dim_range!r}")
    _tensor.set_tensor_shape_range(desc, dim_range)


def _app_log(log_level: int, message: str, *_where: object) -> None:
    """aclAppLog: an application's message, logged on the "openacl" logger at ``log_level``
    (ACL_DEBUG 0 .. ACL_ERROR 3); pyACL's optional func/file/line are accepted."""
    if log_level not in APP_LOG_LEVELS:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'logLevel' = {log_level!r} is invalid: expected one of "
                       f"{sorted(APP_LOG_LEVELS)} (ACL_DEBUG .. ACL_ERROR)")
    _log.logger().log(APP_LOG_LEVELS[log_level], "%s", message)


_TABLE = [
    ("init", _init, RET),
    ("app_log", _app_log, VOID),
    ("finalize", _finalize, RET),
    ("finalize_reference", _finalize_reference, outputs("count")),
    ("get_soc_name", _rt.get_soc_name, VALUE(None)),
    ("data_type_size", _dtypes.data_type_size, VALUE(0)),
    # aclDataBuffer
    ("create_data_buffer", _tensor.create_data_buffer, HANDLE),
    ("destroy_data_buffer", _tensor.destroy_data_buffer, RET),
    ("get_data_buffer_addr", _tensor.get_data_buffer_addr, VALUE(0)),
    ("get_data_buffer_size", _tensor.get_data_buffer_size, VALUE(0)),
    ("get_data_buffer_size_v2", _tensor.get_data_buffer_size_v2, VALUE(0)),
    ("update_data_buffer", _tensor.update_data_buffer, RET),
    # aclTensorDesc
    ("create_tensor_desc", _tensor.create_tensor_desc, HANDLE),
    ("destroy_tensor_desc", _tensor.destroy_tensor_desc, VOID),
    ("get_tensor_desc_type", _tensor.get_tensor_desc_type, VALUE(int(_dtypes.DataType(-1)))),
    ("get_tensor_desc_format", _tensor.get_tensor_desc_format, VALUE(int(_dtypes.Format(-1)))),
    ("get_tensor_desc_size", _tensor.get_tensor_desc_size, VALUE(0)),
    ("get_tensor_desc_element_count", _tensor.get_tensor_desc_element_count, VALUE(0)),
    ("get_tensor_desc_num_dims", _get_tensor_desc_num_dims, VALUE(0)),
    ("get_tensor_desc_dim", _tensor.get_tensor_desc_dim, VALUE(-1)),
    ("get_tensor_desc_dim_v2", _tensor.get_tensor_desc_dim_v2, outputs("dim_size")),
    ("get_tensor_desc_dim_range", _get_tensor_desc_dim_range,
     outputs("dim_range", failure=([],))),
    ("set_tensor_shape_range", _set_tensor_shape_range, RET),
    ("get_tensor_desc_name", _tensor.get_tensor_desc_name, VALUE("")),
    ("set_tensor_desc_name", _tensor.set_tensor_desc_name, VOID),
    ("set_tensor_shape", _tensor.set_tensor_shape, RET),
    ("set_tensor_format", _tensor.set_tensor_format, RET),
    ("set_tensor_const", _tensor.set_tensor_const, RET),
]

FUNCTIONS = [*generate(_TABLE, globals()), "get_recent_err_msg"]

for _name in _constants.ACL_NAMES:
    globals()[_name] = getattr(_constants, _name)
del _name

__all__ = [*FUNCTIONS, *_constants.ACL_NAMES, "constants", "mdl", "media", "rt", "util"]

# acl.op (single-op models) lives in its own module; it is part of `acl` when present.
try:
    from openacl.compat.acl import op as op  # noqa: E402
except ModuleNotFoundError as _exc:
    if _exc.name != f"{__name__}.op":
        raise
else:
    __all__.append("op")

__dir__ = module_dir(globals())
