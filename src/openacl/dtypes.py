"""aclDataType and aclFormat, and their mapping to numpy dtypes.

Member names and values are CANN's, from ``include/external/acl/acl_base_rt.h`` (included by
``acl/acl_base.h``) of hicann/runtime, package version 9.1.0, commit 681ef7610df1
(2026-08-22). Every member is also a module-level constant (``ACL_FLOAT``, ``ACL_FORMAT_ND``).

numpy holds the types it has natively; bfloat16, int4, uint1, complex32 and the float8,
float6 and float4 types come from ``ml_dtypes`` when the installed version has them. Types
with no numpy equivalent (ACL_STRING, ACL_HIFLOAT8, ACL_FLOAT4_E1M2, ACL_DT_UNDEFINED) raise
``ACL_ERROR_UNSUPPORTED_DATA_TYPE`` from ``to_numpy_dtype``.
"""

from __future__ import annotations

import enum
from typing import Any

import ml_dtypes
import numpy as np

from openacl._api import module_dir
from openacl.errors import (
    ACL_ERROR_UNSUPPORTED_DATA_TYPE,
    AclError,
    invalid_param,
)


class DataType(enum.IntEnum):
    """aclDataType: the element type of a tensor, scalar or buffer."""

    ACL_DT_UNDEFINED = -1  # unknown data type, the default
    ACL_FLOAT = 0  # float32
    ACL_FLOAT16 = 1
    ACL_INT8 = 2
    ACL_INT32 = 3
    ACL_UINT8 = 4
    ACL_INT16 = 6
    ACL_UINT16 = 7
    ACL_UINT32 = 8
    ACL_INT64 = 9
    ACL_UINT64 = 10
    ACL_DOUBLE = 11
    ACL_BOOL = 12
    ACL_STRING = 13
    ACL_COMPLEX64 = 16
    ACL_COMPLEX128 = 17
    ACL_BF16 = 27
    ACL_INT4 = 29
    ACL_UINT1 = 30
    ACL_COMPLEX32 = 33  # a pair of float16
    ACL_HIFLOAT8 = 34  # Huawei's HiFloat8
    ACL_FLOAT8_E5M2 = 35
    ACL_FLOAT8_E4M3FN = 36
    ACL_FLOAT8_E8M0 = 37
    ACL_FLOAT6_E3M2 = 38
    ACL_FLOAT6_E2M3 = 39
    ACL_FLOAT4_E2M1 = 40
    ACL_FLOAT4_E1M2 = 41


class Format(enum.IntEnum):
    """aclFormat: the memory layout of a tensor (note CANN spells 33 ``ACL_FRACTAL_Z_3D``)."""

    ACL_FORMAT_UNDEFINED = -1  # unknown format, the default
    ACL_FORMAT_NCHW = 0
    ACL_FORMAT_NHWC = 1
    ACL_FORMAT_ND = 2  # any number of dimensions, row-major
    ACL_FORMAT_NC1HWC0 = 3  # 5-D, C split into C1 blocks of C0
    ACL_FORMAT_FRACTAL_Z = 4  # convolution weight layout
    ACL_FORMAT_NC1HWC0_C04 = 12  # NC1HWC0 with C0 = 4
    ACL_FORMAT_HWCN = 16
    ACL_FORMAT_NDHWC = 27
    ACL_FORMAT_FRACTAL_NZ = 29  # internal fractal layout
    ACL_FORMAT_NCDHW = 30
    ACL_FORMAT_NDC1HWC0 = 32  # NC1HWC0 with a depth dimension
    ACL_FRACTAL_Z_3D = 33  # 3-D convolution weight layout
    ACL_FORMAT_NC = 35
    ACL_FORMAT_NCL = 47
    ACL_FORMAT_FRACTAL_NZ_C0_16 = 50
    ACL_FORMAT_FRACTAL_NZ_C0_32 = 51
    ACL_FORMAT_FRACTAL_NZ_C0_2 = 52
    ACL_FORMAT_FRACTAL_NZ_C0_4 = 53
    ACL_FORMAT_FRACTAL_NZ_C0_8 = 54


aclDataType = DataType
aclFormat = Format

# Every member as a module-level constant: ACL_FLOAT, ACL_FORMAT_ND, ...
globals().update(DataType.__members__)
globals().update(Format.__members__)

# Bytes per element as CANN's aclDataTypeSize returns them (runtime
# src/acl/aclrt_impl/data_buffer.cpp, same commit). Note its quirks, mirrored here:
# STRING and DT_UNDEFINED are 0; INT4 and UINT1 are 1 (not a fraction); COMPLEX32 is 4;
# the float6/float4 types are not listed in CANN's switch and fall into its default branch,
# sizeof(int64_t) = 8.
_CANN_DEFAULT_SIZE = 8  # bytes, CANN's `default:` branch of aclDataTypeSize
_CANN_SIZES: dict[DataType, int] = {
    DataType.ACL_DT_UNDEFINED: 0,
    DataType.ACL_STRING: 0,
    DataType.ACL_UINT1: 1,
    DataType.ACL_INT4: 1,
    DataType.ACL_BOOL: 1,
    DataType.ACL_INT8: 1,
    DataType.ACL_UINT8: 1,
    DataType.ACL_HIFLOAT8: 1,
    DataType.ACL_FLOAT8_E5M2: 1,
    DataType.ACL_FLOAT8_E4M3FN: 1,
    DataType.ACL_FLOAT8_E8M0: 1,
    DataType.ACL_FLOAT16: 2,
    DataType.ACL_INT16: 2,
    DataType.ACL_UINT16: 2,
    DataType.ACL_BF16: 2,
    DataType.ACL_FLOAT: 4,
    DataType.ACL_INT32: 4,
    DataType.ACL_UINT32: 4,
    DataType.ACL_COMPLEX32: 4,
    DataType.ACL_COMPLEX128: 16,
    DataType.ACL_INT64: 8,
    DataType.ACL_UINT64: 8,
    DataType.ACL_DOUBLE: 8,
    DataType.ACL_COMPLEX64: 8,
    DataType.ACL_FLOAT6_E3M2: _CANN_DEFAULT_SIZE,
    DataType.ACL_FLOAT6_E2M3: _CANN_DEFAULT_SIZE,
    DataType.ACL_FLOAT4_E2M1: _CANN_DEFAULT_SIZE,
    DataType.ACL_FLOAT4_E1M2: _CANN_DEFAULT_SIZE,
}

# numpy's own types.
_NUMPY_NATIVE: dict[DataType, type] = {
    DataType.ACL_FLOAT: np.float32,
    DataType.ACL_FLOAT16: np.float16,
    DataType.ACL_INT8: np.int8,
    DataType.ACL_INT32: np.int32,
    DataType.ACL_UINT8: np.uint8,
    DataType.ACL_INT16: np.int16,
    DataType.ACL_UINT16: np.uint16,
    DataType.ACL_UINT32: np.uint32,
    DataType.ACL_INT64: np.int64,
    DataType.ACL_UINT64: np.uint64,
    DataType.ACL_DOUBLE: np.float64,
    DataType.ACL_BOOL: np.bool_,
    DataType.ACL_COMPLEX64: np.complex64,
    DataType.ACL_COMPLEX128: np.complex128,
}

# ml_dtypes type names; one missing from the installed ml_dtypes leaves that type unsupported.
# The OCP MX float8/6/4 formats have no inf (and float6/float4 no NaN), hence ml_dtypes' "fn";
# float8_e8m0fnu is the unsigned E8M0 scale type.
_ML_DTYPES_NAMES: dict[DataType, str] = {
    DataType.ACL_BF16: "bfloat16",
    DataType.ACL_INT4: "int4",
    DataType.ACL_UINT1: "uint1",
    DataType.ACL_COMPLEX32: "complex32",
    DataType.ACL_FLOAT8_E5M2: "float8_e5m2",
    DataType.ACL_FLOAT8_E4M3FN: "float8_e4m3fn",
    DataType.ACL_FLOAT8_E8M0: "float8_e8m0fnu",
    DataType.ACL_FLOAT6_E3M2: "float6_e3m2fn",
    DataType.ACL_FLOAT6_E2M3: "float6_e2m3fn",
    DataType.ACL_FLOAT4_E2M1: "float4_e2m1fn",
}


def _build_numpy_tables() -> tuple[dict[DataType, np.dtype], dict[np.dtype, DataType]]:
    to_numpy = {data_type: np.dtype(scalar) for data_type, scalar in _NUMPY_NATIVE.items()}
    for data_type, name in _ML_DTYPES_NAMES.items():
        scalar = getattr(ml_dtypes, name, None)
        if scalar is not None:
            to_numpy[data_type] = np.dtype(scalar)
    from_numpy = {dtype: data_type for data_type, dtype in to_numpy.items()}
    return to_numpy, from_numpy


_TO_NUMPY, _FROM_NUMPY = _build_numpy_tables()

# Names to_format accepts: the member name and the short name ("ND", "FRACTAL_Z_3D").
_FORMAT_BY_NAME: dict[str, Format] = {}
for _member in Format:
    _FORMAT_BY_NAME[_member.name] = _member
    _FORMAT_BY_NAME[_member.name.removeprefix("ACL_").removeprefix("FORMAT_")] = _member
del _member


def _describe(member: enum.IntEnum) -> str:
    return f"{member.name} ({int(member)})"


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _parse_numpy_dtype(value: Any) -> np.dtype | None:
    """``np.dtype(value)`` for a dtype, scalar type or dtype name; None when it is none of them."""
    if value is None or isinstance(value, (bool, int, float, complex, np.generic, enum.Enum)):
        return None  # np.dtype(None) would be float64; numbers are not dtypes
    try:
        return np.dtype(value)
    except (TypeError, ValueError):
        pass
    if isinstance(value, str):
        scalar = getattr(ml_dtypes, value, None)
        if isinstance(scalar, type):
            return np.dtype(scalar)
    return None


def _unmatched_dtype_reason(dtype: np.dtype) -> str:
    if not dtype.isnative:
        return f"numpy dtype {dtype.str} has a non-native byte order"
    return f"numpy dtype {dtype} has no matching aclDataType"


def _valid_values(enum_type: type[enum.IntEnum]) -> str:
    return ", ".join(str(int(member)) for member in enum_type)


def to_data_type(value: Any, argument: str = "dataType") -> DataType:
    """Validate and convert ``value`` to a DataType.

    Accepts a DataType, an int that is an aclDataType value, a member name ("ACL_FLOAT16")
    or anything numpy understands as a dtype (np.float16, "bfloat16", np.dtype("int8")).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming ``argument`` and the value when it is not a
            data type; ACL_ERROR_UNSUPPORTED_DATA_TYPE when it is a numpy dtype that has no
            aclDataType (a string dtype, float8_e4m3fnuz, non-native byte order...).
    """
    if isinstance(value, DataType):
        return value
    if _is_integer(value):
        try:
            return DataType(int(value))
        except ValueError:
            reason = f"not an aclDataType value (valid: {_valid_values(DataType)})"
            raise invalid_param(argument, value, reason) from None
    if isinstance(value, str) and value in DataType.__members__:
        return DataType[value]
    dtype = _parse_numpy_dtype(value)
    if dtype is None:
        reason = "expected an aclDataType, its int value or name, or a numpy dtype"
        raise invalid_param(argument, value, reason)
    found = _FROM_NUMPY.get(dtype)
    if found is None:
        reason = _unmatched_dtype_reason(dtype)
        raise invalid_param(argument, value, reason, code=ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return found


def to_format(value: Any, argument: str = "format") -> Format:
    """Validate and convert ``value`` (a Format, its int value, or a name such as "ND" or
    "ACL_FORMAT_NCHW", any case) to a Format.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming ``argument`` and the value.
    """
    if isinstance(value, Format):
        return value
    if _is_integer(value):
        try:
            return Format(int(value))
        except ValueError:
            reason = f"not an aclFormat value (valid: {_valid_values(Format)})"
            raise invalid_param(argument, value, reason) from None
    if isinstance(value, str) and value.upper() in _FORMAT_BY_NAME:
        return _FORMAT_BY_NAME[value.upper()]
    raise invalid_param(argument, value, "expected an aclFormat, its int value or its name")


def to_numpy_dtype(data_type: Any) -> np.dtype:
    """The numpy dtype that holds elements of ``data_type`` (ml_dtypes for bfloat16 etc.).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM when ``data_type`` is not a data type;
            ACL_ERROR_UNSUPPORTED_DATA_TYPE when numpy cannot hold it (ACL_STRING,
            ACL_HIFLOAT8, ACL_FLOAT4_E1M2, ACL_DT_UNDEFINED, or a type the installed
            ml_dtypes lacks).
    """
    member = to_data_type(data_type)
    dtype = _TO_NUMPY.get(member)
    if dtype is None:
        raise AclError(
            ACL_ERROR_UNSUPPORTED_DATA_TYPE,
            f"argument 'dataType' = {_describe(member)} is invalid: numpy (with ml_dtypes "
            f"{ml_dtypes.__version__}) has no dtype for it",
        )
    return dtype


def from_numpy_dtype(dtype_like: Any) -> DataType:
    """The DataType of a numpy dtype, scalar type or dtype name ("float16", "bfloat16").

    Raises:
        AclError: ACL_ERROR_UNSUPPORTED_DATA_TYPE naming the value when it is not a dtype
            or has no aclDataType.
    """
    dtype = _parse_numpy_dtype(dtype_like)
    found = None if dtype is None else _FROM_NUMPY.get(dtype)
    if found is None:
        reason = "not a numpy dtype" if dtype is None else _unmatched_dtype_reason(dtype)
        raise invalid_param("dtype", dtype_like, reason, code=ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    return found


def data_type_size(data_type: Any) -> int:
    """Bytes per element, exactly as CANN's ``aclDataTypeSize`` returns them.

    Mirrors CANN (runtime ``aclDataTypeSizeImpl``), quirks included: ACL_DT_UNDEFINED and
    ACL_STRING are 0; the sub-byte ACL_INT4 and ACL_UINT1 are 1; ACL_FLOAT6_E3M2,
    ACL_FLOAT6_E2M3, ACL_FLOAT4_E2M1 and ACL_FLOAT4_E1M2 are absent from CANN's switch and
    get its default, 8. To size numpy storage use ``to_numpy_dtype(t).itemsize`` instead.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM when ``data_type`` is not a data type.
    """
    return _CANN_SIZES[to_data_type(data_type)]

__all__ = [
    "DataType", "Format", "aclDataType", "aclFormat", "to_data_type", "to_format",
    "to_numpy_dtype", "from_numpy_dtype", "data_type_size",
    *(member.name for member in DataType), *(member.name for member in Format),
]
__dir__ = module_dir(globals())
