"""Tests for openacl.dtypes: aclDataType / aclFormat and their numpy mapping."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from openacl import dtypes
from openacl.dtypes import (
    DataType,
    Format,
    aclDataType,
    aclFormat,
    data_type_size,
    from_numpy_dtype,
    to_data_type,
    to_format,
    to_numpy_dtype,
)
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_UNSUPPORTED_DATA_TYPE,
    AclError,
    get_recent_err_msg,
)

# aclDataType and aclFormat as written in acl_base_rt.h (hicann/runtime).
HEADER_DATA_TYPES = {
    "ACL_DT_UNDEFINED": -1,
    "ACL_FLOAT": 0,
    "ACL_FLOAT16": 1,
    "ACL_INT8": 2,
    "ACL_INT32": 3,
    "ACL_UINT8": 4,
    "ACL_INT16": 6,
    "ACL_UINT16": 7,
    "ACL_UINT32": 8,
    "ACL_INT64": 9,
    "ACL_UINT64": 10,
    "ACL_DOUBLE": 11,
    "ACL_BOOL": 12,
    "ACL_STRING": 13,
    "ACL_COMPLEX64": 16,
    "ACL_COMPLEX128": 17,
    "ACL_BF16": 27,
    "ACL_INT4": 29,
    "ACL_UINT1": 30,
    "ACL_COMPLEX32": 33,
    "ACL_HIFLOAT8": 34,
    "ACL_FLOAT8_E5M2": 35,
    "ACL_FLOAT8_E4M3FN": 36,
    "ACL_FLOAT8_E8M0": 37,
    "ACL_FLOAT6_E3M2": 38,
    "ACL_FLOAT6_E2M3": 39,
    "ACL_FLOAT4_E2M1": 40,
    "ACL_FLOAT4_E1M2": 41,
}

HEADER_FORMATS = {
    "ACL_FORMAT_UNDEFINED": -1,
    "ACL_FORMAT_NCHW": 0,
    "ACL_FORMAT_NHWC": 1,
    "ACL_FORMAT_ND": 2,
    "ACL_FORMAT_NC1HWC0": 3,
    "ACL_FORMAT_FRACTAL_Z": 4,
    "ACL_FORMAT_NC1HWC0_C04": 12,
    "ACL_FORMAT_HWCN": 16,
    "ACL_FORMAT_NDHWC": 27,
    "ACL_FORMAT_FRACTAL_NZ": 29,
    "ACL_FORMAT_NCDHW": 30,
    "ACL_FORMAT_NDC1HWC0": 32,
    "ACL_FRACTAL_Z_3D": 33,
    "ACL_FORMAT_NC": 35,
    "ACL_FORMAT_NCL": 47,
    "ACL_FORMAT_FRACTAL_NZ_C0_16": 50,
    "ACL_FORMAT_FRACTAL_NZ_C0_32": 51,
    "ACL_FORMAT_FRACTAL_NZ_C0_2": 52,
    "ACL_FORMAT_FRACTAL_NZ_C0_4": 53,
    "ACL_FORMAT_FRACTAL_NZ_C0_8": 54,
}

# aclDataTypeSize as implemented in runtime src/acl/aclrt_impl/data_buffer.cpp.
CANN_SIZES = {
    "ACL_DT_UNDEFINED": 0,
    "ACL_FLOAT": 4,
    "ACL_FLOAT16": 2,
    "ACL_INT8": 1,
    "ACL_INT32": 4,
    "ACL_UINT8": 1,
    "ACL_INT16": 2,
    "ACL_UINT16": 2,
    "ACL_UINT32": 4,
    "ACL_INT64": 8,
    "ACL_UINT64": 8,
    "ACL_DOUBLE": 8,
    "ACL_BOOL": 1,
    "ACL_STRING": 0,
    "ACL_COMPLEX64": 8,
    "ACL_COMPLEX128": 16,
    "ACL_BF16": 2,
    "ACL_INT4": 1,
    "ACL_UINT1": 1,
    "ACL_COMPLEX32": 4,
    "ACL_HIFLOAT8": 1,
    "ACL_FLOAT8_E5M2": 1,
    "ACL_FLOAT8_E4M3FN": 1,
    "ACL_FLOAT8_E8M0": 1,
    "ACL_FLOAT6_E3M2": 8,  # CANN's default branch
    "ACL_FLOAT6_E2M3": 8,
    "ACL_FLOAT4_E2M1": 8,
    "ACL_FLOAT4_E1M2": 8,
}

NATIVE = {
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

ML_DTYPES = {
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

EXPECTED_NUMPY = {
    **{member: np.dtype(scalar) for member, scalar in NATIVE.items()},
    **{
        member: np.dtype(getattr(ml_dtypes, name))
        for member, name in ML_DTYPES.items()
        if hasattr(ml_dtypes, name)
    },
}

NEVER_HOLDABLE = [
    DataType.ACL_DT_UNDEFINED,
    DataType.ACL_STRING,
    DataType.ACL_HIFLOAT8,
    DataType.ACL_FLOAT4_E1M2,
]


@pytest.fixture(autouse=True)
def _clear_recent_error():
    yield
    get_recent_err_msg()


def test_data_type_members_match_header():
    assert {m.name: m.value for m in DataType} == HEADER_DATA_TYPES


def test_format_members_match_header():
    assert {m.name: m.value for m in Format} == HEADER_FORMATS


def test_aliases_and_module_constants():
    assert aclDataType is DataType
    assert aclFormat is Format
    for name in HEADER_DATA_TYPES:
        assert getattr(dtypes, name) is DataType[name]
    for name in HEADER_FORMATS:
        assert getattr(dtypes, name) is Format[name]
    assert dtypes.ACL_FLOAT == 0
    assert dtypes.ACL_FORMAT_ND == 2
    assert dtypes.ACL_FRACTAL_Z_3D == 33


@pytest.mark.parametrize("member", sorted(EXPECTED_NUMPY), ids=lambda m: m.name)
def test_round_trip_through_numpy(member):
    dtype = to_numpy_dtype(member)
    assert dtype == EXPECTED_NUMPY[member]
    assert from_numpy_dtype(dtype) is member
    assert from_numpy_dtype(dtype.type) is member
    assert from_numpy_dtype(dtype.name) is member
    assert to_numpy_dtype(int(member)) == dtype


def test_every_holdable_type_is_covered():
    holdable = set(DataType) - set(NEVER_HOLDABLE)
    missing_from_ml_dtypes = {m for m, name in ML_DTYPES.items() if not hasattr(ml_dtypes, name)}
    assert set(EXPECTED_NUMPY) == holdable - missing_from_ml_dtypes


def test_bfloat16_is_ml_dtypes_bfloat16():
    dtype = to_numpy_dtype(DataType.ACL_BF16)
    assert dtype.type is ml_dtypes.bfloat16
    assert from_numpy_dtype("bfloat16") is DataType.ACL_BF16
    assert from_numpy_dtype(ml_dtypes.bfloat16) is DataType.ACL_BF16
    assert dtype != np.dtype(np.float16)


def test_float8_names():
    assert to_numpy_dtype(dtypes.ACL_FLOAT8_E4M3FN).type is ml_dtypes.float8_e4m3fn
    assert to_numpy_dtype(dtypes.ACL_FLOAT8_E5M2).type is ml_dtypes.float8_e5m2
    assert to_numpy_dtype(dtypes.ACL_FLOAT8_E8M0).type is ml_dtypes.float8_e8m0fnu


def test_values_survive_the_round_trip():
    values = np.array([0.0, 1.0, -2.5, 3.0], dtype=to_numpy_dtype(DataType.ACL_BF16))
    assert values.astype(np.float32).tolist() == [0.0, 1.0, -2.5, 3.0]
    assert from_numpy_dtype(values.dtype) is DataType.ACL_BF16


@pytest.mark.parametrize(
    ("dtype_like", "expected"),
    [
        ("float16", DataType.ACL_FLOAT16),
        ("float32", DataType.ACL_FLOAT),
        ("int64", DataType.ACL_INT64),
        ("bool", DataType.ACL_BOOL),
        (np.float32, DataType.ACL_FLOAT),
        (np.dtype("uint16"), DataType.ACL_UINT16),
        (float, DataType.ACL_DOUBLE),
        (bool, DataType.ACL_BOOL),
        (complex, DataType.ACL_COMPLEX128),
        (ml_dtypes.float8_e5m2, DataType.ACL_FLOAT8_E5M2),
    ],
)
def test_from_numpy_dtype_accepts_dtype_type_and_string(dtype_like, expected):
    assert from_numpy_dtype(dtype_like) is expected


@pytest.mark.parametrize("member", NEVER_HOLDABLE, ids=lambda m: m.name)
def test_types_numpy_cannot_hold(member):
    with pytest.raises(AclError) as info:
        to_numpy_dtype(member)
    assert info.value.code == ACL_ERROR_UNSUPPORTED_DATA_TYPE
    assert member.name in info.value.message
    assert str(int(member)) in info.value.message


@pytest.mark.parametrize("name", sorted(CANN_SIZES))
def test_data_type_size(name):
    member = DataType[name]
    assert data_type_size(member) == CANN_SIZES[name]
    assert data_type_size(int(member)) == CANN_SIZES[name]


@pytest.mark.parametrize("member", sorted(EXPECTED_NUMPY), ids=lambda m: m.name)
def test_size_matches_numpy_itemsize_except_cann_default(member):
    if member.name.startswith(("ACL_FLOAT6", "ACL_FLOAT4")):
        pytest.skip("CANN's aclDataTypeSize returns its default 8 for float6/float4")
    assert data_type_size(member) == to_numpy_dtype(member).itemsize


@pytest.mark.parametrize("value", [5, 14, 42, -2, 1000, np.int32(99)])
def test_unknown_int_data_type(value):
    with pytest.raises(AclError) as info:
        to_numpy_dtype(value)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'dataType'" in info.value.message
    assert f"= {int(value)}" in info.value.message or repr(value) in info.value.message


def test_data_type_size_rejects_unknown_int():
    with pytest.raises(AclError) as info:
        data_type_size(5)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "5" in info.value.message


@pytest.mark.parametrize("value", ["U5", "not_a_dtype", None, object(), ">f4", "float8_e4m3fnuz"])
def test_from_numpy_dtype_rejects(value):
    with pytest.raises(AclError) as info:
        from_numpy_dtype(value)
    assert info.value.code == ACL_ERROR_UNSUPPORTED_DATA_TYPE
    assert repr(value)[:20] in info.value.message


def test_to_data_type_accepts():
    assert to_data_type(DataType.ACL_INT8) is DataType.ACL_INT8
    assert to_data_type(3) is DataType.ACL_INT32
    assert to_data_type(np.int64(27)) is DataType.ACL_BF16
    assert to_data_type("ACL_FLOAT16") is DataType.ACL_FLOAT16
    assert to_data_type(np.float16) is DataType.ACL_FLOAT16
    assert to_data_type(np.dtype("int8")) is DataType.ACL_INT8
    assert to_data_type("bfloat16") is DataType.ACL_BF16


@pytest.mark.parametrize("value", [5, True, None, 1.5, "floaty", [1]])
def test_to_data_type_rejects_with_argument_name(value):
    with pytest.raises(AclError) as info:
        to_data_type(value, argument="selfType")
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'selfType'" in info.value.message
    assert repr(value) in info.value.message


def test_to_data_type_numpy_dtype_without_acl_type():
    with pytest.raises(AclError) as info:
        to_data_type(np.dtype("U5"), argument="out")
    assert info.value.code == ACL_ERROR_UNSUPPORTED_DATA_TYPE
    assert "'out'" in info.value.message
    assert "<U5" in info.value.message


def test_to_format_accepts():
    assert to_format(Format.ACL_FORMAT_NCHW) is Format.ACL_FORMAT_NCHW
    assert to_format(2) is Format.ACL_FORMAT_ND
    assert to_format(np.int64(29)) is Format.ACL_FORMAT_FRACTAL_NZ
    assert to_format("ACL_FORMAT_NHWC") is Format.ACL_FORMAT_NHWC
    assert to_format("nd") is Format.ACL_FORMAT_ND
    assert to_format("FRACTAL_Z_3D") is Format.ACL_FRACTAL_Z_3D
    assert to_format("ACL_FRACTAL_Z_3D") is Format.ACL_FRACTAL_Z_3D


@pytest.mark.parametrize("value", [5, 28, 100, -2, True, None, 2.0, "NCHWX", np.float32])
def test_to_format_rejects(value):
    with pytest.raises(AclError) as info:
        to_format(value, argument="storageFormat")
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'storageFormat'" in info.value.message
    assert repr(value) in info.value.message


def test_to_format_default_argument_name():
    with pytest.raises(AclError) as info:
        to_format(7)
    assert "argument 'format' = 7 is invalid" in info.value.message
