"""Tests for openacl.errors: the code table, AclError, and the per-thread recent error."""

from __future__ import annotations

import enum
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from openacl import errors
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_UNSUPPORTED_DATA_TYPE,
    ERROR_TABLE,
    AclError,
    error_meaning,
    error_name,
    get_recent_err_msg,
    invalid_param,
    set_recent_err_msg,
)

THREAD_TIMEOUT = 10.0  # seconds a helper thread may take before the test fails


@pytest.fixture(autouse=True)
def _clear_recent_error():
    get_recent_err_msg()
    yield
    get_recent_err_msg()


# Values as written in acl_base_rt.h, rt_error_codes.h, ge_error_codes.h (hicann/runtime)
# and op_errno.h (hicann/opbase).
HEADER_VALUES = {
    "ACL_SUCCESS": 0,
    "ACL_ERROR_NONE": 0,
    "ACL_ERROR_INVALID_PARAM": 100000,
    "ACL_ERROR_UNINITIALIZE": 100001,
    "ACL_ERROR_REPEAT_INITIALIZE": 100002,
    "ACL_ERROR_UNSUPPORTED_DATA_TYPE": 100026,
    "ACL_ERROR_FORMAT_NOT_MATCH": 100027,
    "ACL_ERROR_REPEAT_FINALIZE": 100037,
    "ACL_ERROR_DUMP_NOT_RUN": 100045,
    "ACL_ERROR_PROF_REPEAT_SUBSCRIBE": 148046,
    "ACL_ERROR_INVALID_BUNDLE_MODEL_ID": 148053,
    "ACL_ERROR_BAD_ALLOC": 200000,
    "ACL_ERROR_INVALID_RESOURCE_HANDLE": 200005,
    "ACL_ERROR_PROF_MODULES_UNSUPPORTED": 200007,
    "ACL_ERROR_STORAGE_OVER_LIMIT": 300000,
    "ACL_ERROR_INTERNAL_ERROR": 500000,
    "ACL_ERROR_PROFILING_FAILURE": 500005,
    "ACL_RT_SUCCESS": 0,
    "ACL_ERROR_RT_PARAM_INVALID": 107000,
    "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
    "ACL_ERROR_RT_CONTEXT_NULL": 107002,
    "ACL_ERROR_STREAM_CAPTURE_CONFLICT": 107032,
    "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED": 107036,
    "ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING": 107045,
    "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000,
    "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
    "ACL_ERROR_RT_DEVICE_OOM": 207018,
    "ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED": 207021,
    "ACL_ERROR_RT_INTERNAL_ERROR": 507000,
    "ACL_ERROR_RT_STREAM_NOT_COMPLETE": 507004,
    "ACL_ERROR_RT_EVENT_NOT_COMPLETE": 507006,
    "ACL_ERROR_RT_AICORE_EXCEPTION": 507015,
    "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046,
    "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT": 507047,
    "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR": 507054,
    "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR": 507057,
    "ACL_ERROR_RT_DRV_INTERNAL_ERROR": 507899,
    "ACL_ERROR_RT_COMM_OP_RETRY_FAIL": 507904,
    "ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT": 507905,
    "ACL_ERROR_RT_CCU_EXCEPTION": 507916,
    "ACL_ERROR_GE_PARAM_INVALID": 145000,
    "ACL_ERROR_GE_DATATYPE_INVALID": 145022,
    "ACL_ERROR_GE_MEMORY_ALLOCATION": 245000,
    "ACL_ERROR_GE_REDEPLOYING": 545602,
    "ACLNN_SUCCESS": 0,
    "ACLNN_ERR_PARAM_NULLPTR": 161001,
    "ACLNN_ERR_PARAM_INVALID": 161002,
    "ACLNN_ERR_RUNTIME_ERROR": 361001,
    "ACLNN_ERR_INNER": 561000,
    "ACLNN_ERR_INNER_INFERSHAPE_ERROR": 561001,
    "ACLNN_ERR_INNER_TILING_ERROR": 561002,
    "ACLNN_ERR_INNER_FIND_KERNEL_ERROR": 561003,
    "ACLNN_ERR_INNER_CREATE_EXECUTOR": 561101,
    "ACLNN_ERR_INNER_KEY_CONFLICT": 561105,
    "ACLNN_ERR_INNER_KEY_CONFILICT": 561105,
    "ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID": 561119,
}

# Names that share a number with an earlier, current name.
ALIASES = {
    "ACL_ERROR_NONE": "ACL_SUCCESS",
    "ACL_RT_SUCCESS": "ACL_SUCCESS",
    "ACLNN_SUCCESS": "ACL_SUCCESS",
    "ACLNN_ERR_INNER_KEY_CONFILICT": "ACLNN_ERR_INNER_KEY_CONFLICT",
}


def _module_codes() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(errors).items()
        if name.startswith(("ACL_", "ACLNN_")) and type(value) is int
    }


@pytest.mark.parametrize(("name", "value"), sorted(HEADER_VALUES.items()))
def test_constant_matches_header(name, value):
    assert getattr(errors, name) == value


@pytest.mark.parametrize(("name", "value"), sorted(HEADER_VALUES.items()))
def test_error_name_of_header_code(name, value):
    assert error_name(value) == ALIASES.get(name, name)


def test_every_constant_is_in_the_table_and_back():
    constants = _module_codes()
    for name, code in constants.items():
        assert code in ERROR_TABLE, name
        if name not in ALIASES:
            assert ERROR_TABLE[code][0] == name
    for code, (name, meaning) in ERROR_TABLE.items():
        assert constants[name] == code
        assert meaning and "\n" not in meaning


def test_table_size_and_families():
    codes = set(ERROR_TABLE)
    assert set(range(100000, 100046)) <= codes
    assert set(range(148046, 148054)) <= codes
    assert set(range(200000, 200008)) <= codes
    assert set(range(500000, 500006)) <= codes
    assert set(range(107000, 107046)) <= codes
    assert set(range(207000, 207022)) <= codes
    assert set(range(507000, 507058)) <= codes
    assert set(range(507899, 507917)) <= codes
    assert {561000, 561001, 561002, 561003} | set(range(561101, 561120)) <= codes


@pytest.mark.parametrize(
    "code", [100046, 148045, 200008, 300001, 500006, 107046, 207022, 507058, 507898, 145004,
             161000, 161003, 361000, 561004, 561100, 561120, 1, -1]
)  # fmt: skip
def test_numbers_not_in_the_headers_are_unknown(code):
    assert code not in ERROR_TABLE
    assert error_name(code) == f"ACL_ERROR_UNKNOWN({code})"
    assert error_meaning(code) == "unknown error code"


def test_error_name_never_raises():
    class BadIndex:
        def __index__(self):
            raise RuntimeError("boom")

        def __repr__(self):
            raise RuntimeError("boom")

    assert error_name("abc") == "ACL_ERROR_UNKNOWN('abc')"
    assert error_name(None) == "ACL_ERROR_UNKNOWN(None)"
    assert error_name(1.5) == "ACL_ERROR_UNKNOWN(1.5)"
    assert error_name(True) == "ACL_ERROR_UNKNOWN(True)"
    assert error_name(BadIndex()).startswith("ACL_ERROR_UNKNOWN(")
    assert error_meaning("abc") == "unknown error code"


def test_error_name_accepts_integer_likes():
    np = pytest.importorskip("numpy")

    class Code(enum.IntEnum):
        OOM = 207001

    assert error_name(np.int32(161001)) == "ACLNN_ERR_PARAM_NULLPTR"
    assert error_name(Code.OOM) == "ACL_ERROR_RT_MEMORY_ALLOCATION"


def test_meanings():
    assert error_meaning(0) == "success"
    assert "timed out" in error_meaning(507046)
    assert "null" in error_meaning(161001)


def test_acl_error_fields_and_str():
    error = AclError(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of memory: 1024 bytes requested")
    assert isinstance(error, Exception)
    assert error.code == 207001
    assert error.name == "ACL_ERROR_RT_MEMORY_ALLOCATION"
    assert error.message == "out of memory: 1024 bytes requested"
    assert str(error) == (
        "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): out of memory: 1024 bytes requested"
    )


def test_acl_error_unknown_code():
    error = AclError(999999, "strange")
    assert error.name == "ACL_ERROR_UNKNOWN(999999)"
    assert str(error) == "ACL_ERROR_UNKNOWN(999999) (999999): strange"


def test_acl_error_chains_with_raise_from():
    with pytest.raises(AclError) as info:
        try:
            raise KeyError("ptr")
        except KeyError as e:
            raise AclError(ACL_ERROR_INVALID_PARAM, "unknown pointer") from e
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


def test_an_error_leaving_a_public_function_records_it_and_reading_clears_it():
    assert get_recent_err_msg() is None
    error = AclError(ACL_ERROR_INVALID_PARAM, "bad size")
    assert get_recent_err_msg() is None  # building records nothing: it may be recovered from

    @errors.public
    def fails():
        raise error

    with pytest.raises(AclError):
        fails()
    assert get_recent_err_msg() == str(error)
    assert get_recent_err_msg() is None


def test_only_the_outermost_public_call_records():
    @errors.public
    def inner():
        raise AclError(ACL_ERROR_INVALID_PARAM, "inner")

    @errors.public
    def recovers():
        try:
            inner()
        except AclError:
            return "recovered"

    @errors.public
    def translates():
        try:
            inner()
        except AclError as exc:
            raise AclError(ACL_ERROR_UNSUPPORTED_DATA_TYPE, f"outer: {exc.message}") from exc

    assert recovers() == "recovered" and get_recent_err_msg() is None
    with pytest.raises(AclError):
        translates()
    assert get_recent_err_msg() == "ACL_ERROR_UNSUPPORTED_DATA_TYPE (100026): outer: inner"
    with pytest.raises(AclError):
        inner()
    assert get_recent_err_msg() == "ACL_ERROR_INVALID_PARAM (100000): inner"


def test_compat_wrapper_records_the_error_it_returns():
    from openacl.compat.convention import returning_code

    def fails():
        raise AclError(ACL_ERROR_INVALID_PARAM, "from compat")

    assert returning_code(fails)() == ACL_ERROR_INVALID_PARAM
    assert get_recent_err_msg() == "ACL_ERROR_INVALID_PARAM (100000): from compat"


def test_set_recent_err_msg_keeps_the_last_one():
    set_recent_err_msg("first")
    set_recent_err_msg("second")
    assert get_recent_err_msg() == "second"
    assert get_recent_err_msg() is None


def test_recent_error_is_per_thread():
    set_recent_err_msg(str(AclError(ACL_ERROR_INVALID_PARAM, "main thread error")))
    seen: dict[str, object] = {}

    def worker():
        seen["before"] = get_recent_err_msg()
        set_recent_err_msg(str(AclError(ACL_ERROR_RT_MEMORY_ALLOCATION, "worker error")))
        seen["own"] = get_recent_err_msg()
        seen["after"] = get_recent_err_msg()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(THREAD_TIMEOUT)
    assert not thread.is_alive()
    assert seen["before"] is None
    assert seen["own"] == "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): worker error"
    assert seen["after"] is None
    assert get_recent_err_msg() == "ACL_ERROR_INVALID_PARAM (100000): main thread error"


def test_pickle_round_trip():
    error = invalid_param("size", 0, "size must be > 0")
    get_recent_err_msg()
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is AclError
    assert (clone.code, clone.name, clone.message) == (error.code, error.name, error.message)
    assert str(clone) == str(error)
    assert clone.args == error.args
    assert get_recent_err_msg() is None  # unpickling is not a new error


class _SubError(AclError):
    pass


def test_pickle_keeps_subclass_and_extra_attributes():
    error = _SubError(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "no float4 here")
    error.argument = "dataType"
    clone = pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(clone) is _SubError
    assert clone.argument == "dataType"
    assert str(clone) == str(error)


def test_invalid_param_message():
    error = invalid_param("size", 0, "size must be > 0")
    assert isinstance(error, AclError)
    assert error.code == ACL_ERROR_INVALID_PARAM
    assert error.message == "argument 'size' = 0 is invalid: size must be > 0"
    assert get_recent_err_msg() is None  # built, not raised out of the API


def test_invalid_param_custom_code_and_string_value():
    error = invalid_param("dtype", "float7", "no such dtype", code=ACL_ERROR_UNSUPPORTED_DATA_TYPE)
    assert error.code == ACL_ERROR_UNSUPPORTED_DATA_TYPE
    assert error.name == "ACL_ERROR_UNSUPPORTED_DATA_TYPE"
    assert "argument 'dtype' = 'float7' is invalid: no such dtype" in str(error)


def test_invalid_param_long_or_broken_values():
    long_error = invalid_param("data", list(range(10_000)), "too long")
    assert len(long_error.message) < 400
    assert long_error.message.startswith("argument 'data' = [0, 1, 2")

    class NoRepr:
        def __repr__(self):
            raise RuntimeError("boom")

    broken = invalid_param("thing", NoRepr(), "is broken")
    assert "<NoRepr object>" in broken.message


def test_errors_module_imports_only_stdlib():
    path = Path(errors.__file__)
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('errors_alone', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "heavy = {'numpy', 'ml_dtypes', 'cupy', 'torch'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
