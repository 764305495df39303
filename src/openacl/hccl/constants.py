"""HCCL's enums and sizes with CANN's values, and the environment variables HCCL reads.

Where the values come from (names and numbers exactly as CANN spells them):

- ``HcclReduceOp``, ``HcclDataType`` 0-11, ``HCCL_ROOT_INFO_BYTES`` (4108):
  ``third_party/hccl/inc/hccl/hccl_types.h`` of Ascend/pytorch;
- ``HcclDataType`` 12 and 14-17 (INT128, HIF8, FP8E4M3, FP8E5M2, FP8E8M0; 13 is unused) and
  ``HCCL_DATA_TYPE_RESERVED = 255``: the ``HcclDataType`` of the current hicann/hccl headers;
- the result codes (``HCCL_SUCCESS`` .. ``HCCL_E_SUSPENDING``): ``openacl.errors``.

Timeouts: ``HCCL_CONNECT_TIMEOUT`` (building a communicator; CANN: [120, 7200] s, default
120) and ``HCCL_EXEC_TIMEOUT`` (one collective waiting for its peers; CANN: [68, 17340] s,
default 1800). Here any positive number of seconds is accepted, so tests can fail fast.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

HCCL_ROOT_INFO_BYTES = 4108  # sizeof(HcclRootInfo), bytes
HCCL_CONNECT_TIMEOUT_ENV = "HCCL_CONNECT_TIMEOUT"
HCCL_EXEC_TIMEOUT_ENV = "HCCL_EXEC_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT_S = 120.0  # CANN's default HCCL_CONNECT_TIMEOUT, seconds
DEFAULT_EXEC_TIMEOUT_S = 1800.0  # CANN's default HCCL_EXEC_TIMEOUT, seconds


class HcclReduceOp(enum.IntEnum):
    HCCL_REDUCE_SUM = 0
    HCCL_REDUCE_PROD = 1
    HCCL_REDUCE_MAX = 2
    HCCL_REDUCE_MIN = 3


class HcclDataType(enum.IntEnum):
    HCCL_DATA_TYPE_INT8 = 0
    HCCL_DATA_TYPE_INT16 = 1
    HCCL_DATA_TYPE_INT32 = 2
    HCCL_DATA_TYPE_FP16 = 3
    HCCL_DATA_TYPE_FP32 = 4
    HCCL_DATA_TYPE_INT64 = 5
    HCCL_DATA_TYPE_UINT64 = 6
    HCCL_DATA_TYPE_UINT8 = 7
    HCCL_DATA_TYPE_UINT16 = 8
    HCCL_DATA_TYPE_UINT32 = 9
    HCCL_DATA_TYPE_FP64 = 10
    HCCL_DATA_TYPE_BFP16 = 11
    HCCL_DATA_TYPE_INT128 = 12
    HCCL_DATA_TYPE_HIF8 = 14
    HCCL_DATA_TYPE_FP8E4M3 = 15
    HCCL_DATA_TYPE_FP8E5M2 = 16
    HCCL_DATA_TYPE_FP8E8M0 = 17


HCCL_DATA_TYPE_RESERVED = 255  # not a type: the end marker of the C enum
HCCL_REDUCE_RESERVED = 4  # not an op: the end marker of the C enum

# numpy element type of each HCCL type; None: no numpy type (moved as raw bytes only)
NUMPY_DTYPES: dict[HcclDataType, np.dtype | None] = {
    HcclDataType.HCCL_DATA_TYPE_INT8: np.dtype(np.int8),
    HcclDataType.HCCL_DATA_TYPE_INT16: np.dtype(np.int16),
    HcclDataType.HCCL_DATA_TYPE_INT32: np.dtype(np.int32),
    HcclDataType.HCCL_DATA_TYPE_FP16: np.dtype(np.float16),
    HcclDataType.HCCL_DATA_TYPE_FP32: np.dtype(np.float32),
    HcclDataType.HCCL_DATA_TYPE_INT64: np.dtype(np.int64),
    HcclDataType.HCCL_DATA_TYPE_UINT64: np.dtype(np.uint64),
    HcclDataType.HCCL_DATA_TYPE_UINT8: np.dtype(np.uint8),
    HcclDataType.HCCL_DATA_TYPE_UINT16: np.dtype(np.uint16),
    HcclDataType.HCCL_DATA_TYPE_UINT32: np.dtype(np.uint32),
    HcclDataType.HCCL_DATA_TYPE_FP64: np.dtype(np.float64),
    HcclDataType.HCCL_DATA_TYPE_BFP16: np.dtype(ml_dtypes.bfloat16),
    HcclDataType.HCCL_DATA_TYPE_INT128: None,
    HcclDataType.HCCL_DATA_TYPE_HIF8: None,
    HcclDataType.HCCL_DATA_TYPE_FP8E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    HcclDataType.HCCL_DATA_TYPE_FP8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    HcclDataType.HCCL_DATA_TYPE_FP8E8M0: np.dtype(ml_dtypes.float8_e8m0fnu),
}
INT128_BYTES = 16  # size of one HCCL_DATA_TYPE_INT128 element
HIF8_BYTES = 1  # size of one HCCL_DATA_TYPE_HIF8 element


def data_type_size(data_type: HcclDataType) -> int:
    """Bytes per element of an HCCL data type."""
    numpy_dtype = NUMPY_DTYPES[data_type]
    if numpy_dtype is not None:
        return numpy_dtype.itemsize
    return INT128_BYTES if data_type is HcclDataType.HCCL_DATA_TYPE_INT128 else HIF8_BYTES


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_EXEC_TIMEOUT_S",
    "HCCL_CONNECT_TIMEOUT_ENV",
    "HCCL_DATA_TYPE_RESERVED",
    "HCCL_EXEC_TIMEOUT_ENV",
    "HCCL_REDUCE_RESERVED",
    "HCCL_ROOT_INFO_BYTES",
    "NUMPY_DTYPES",
    "HcclDataType",
    "HcclReduceOp",
    "data_type_size",
]
