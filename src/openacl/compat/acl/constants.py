"""The constants pyACL programs use, as plain ints, by CANN's names.

The official samples usually define their own ``constant.py`` (``ACL_MEM_MALLOC_HUGE_FIRST``,
``ACL_MEMCPY_HOST_TO_DEVICE``, ``ACL_FORMAT_ND``, ``NPY_FLOAT32 = 11``...), but much user code
writes ``acl.ACL_MEMCPY_HOST_TO_DEVICE``, ``acl.rt.ACL_MEM_MALLOC_HUGE_FIRST`` or
``ret != acl.ACL_ERROR_NONE``; ``acl`` and ``acl.rt`` therefore carry every ``ACL_*`` name of
this module. Nothing is typed here: the values come from ``openacl.constants`` (memory,
stream, event, callback enums, data types, formats), ``openacl.errors`` (every error code)
and numpy (the ``NPY_*`` type numbers ``acl.util.ptr_to_numpy`` takes).
"""

from __future__ import annotations

import numpy as _np

from openacl import constants as _constants
from openacl import errors as _errors
from openacl._api import module_dir
from openacl.tensor import ACL_UNKNOWN_RANK as _UNKNOWN_RANK

for _source in (_constants, _errors):
    for _name in dir(_source):
        _value = getattr(_source, _name)
        if _name.startswith(("ACL_", "ACLNN_")) and isinstance(_value, int):
            globals()[_name] = int(_value)

SIZE_T_MODULUS = 1 << 64  # size_t wraps negative C values: (size_t)-2 == 2**64 - 2
ACL_UNKNOWN_RANK = _UNKNOWN_RANK % SIZE_T_MODULUS  # 0xFFFFFFFFFFFFFFFE, as pyACL reports it

# numpy's C type numbers (NPY_BOOL = 0 ... NPY_FLOAT = 11, NPY_HALF = 23), as pyACL's
# ptr_to_numpy takes them; the first numpy type code of each number wins.
NPY_DTYPES: dict[int, _np.dtype] = {}
for _code in "?" + _np.typecodes["AllInteger"] + _np.typecodes["AllFloat"]:
    NPY_DTYPES.setdefault(_np.dtype(_code).num, _np.dtype(_code))
NPY_BOOL = _np.dtype(_np.bool_).num
NPY_BYTE = NPY_INT8 = _np.dtype(_np.byte).num
NPY_UBYTE = NPY_UINT8 = _np.dtype(_np.ubyte).num
NPY_SHORT = NPY_INT16 = _np.dtype(_np.short).num
NPY_USHORT = NPY_UINT16 = _np.dtype(_np.ushort).num
NPY_INT = NPY_INT32 = _np.dtype(_np.intc).num
NPY_UINT = NPY_UINT32 = _np.dtype(_np.uintc).num
NPY_LONG = _np.dtype("l").num
NPY_ULONG = _np.dtype("L").num
NPY_LONGLONG = _np.dtype("q").num
NPY_ULONGLONG = _np.dtype("Q").num
NPY_INT64 = _np.dtype(_np.int64).num
NPY_UINT64 = _np.dtype(_np.uint64).num
NPY_HALF = NPY_FLOAT16 = _np.dtype(_np.float16).num
NPY_FLOAT = NPY_FLOAT32 = _np.dtype(_np.float32).num
NPY_DOUBLE = NPY_FLOAT64 = _np.dtype(_np.float64).num

ACL_NAMES = sorted(name for name in globals() if name.startswith(("ACL_", "ACLNN_")))
__all__ = [*ACL_NAMES, *sorted(name for name in globals() if name.startswith("NPY_")
                               and name != "NPY_DTYPES")]
del _source, _name, _value, _code

__dir__ = module_dir(globals())
