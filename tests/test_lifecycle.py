"""init/finalize, reference counting, configuration (dict, file, environment), devices and
contexts."""

from __future__ import annotations

import json

import pytest

import openacl
from openacl import rt
from openacl.errors import (
    ACL_ERROR_FILE_ATTR_INVALID,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_FILE,
    ACL_ERROR_REPEAT_FINALIZE,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_UNINITIALIZE,
    AclError,
)
from openacl.runtime import core

MiB = 1 << 20
GiB = 1 << 30
ENV_NAMES = ("OPENACL_BACKEND", "OPENACL_DEVICE_COUNT", "OPENACL_STREAM_MODE",
             "OPENACL_MEMORY_LIMIT", "OPENACL_LOG_LEVEL")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def expect_error(code: int, fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, str(info.value)
    return info.value


def write_config(tmp_path, content) -> str:
    path = tmp_path / "acl.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


# -- init and finalize ------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: rt.malloc(16), rt.create_stream, rt.get_device_count, lambda: rt.set_device(0),
    rt.get_run_mode, lambda: openacl.create_tensor([2], openacl.ACL_FLOAT),
    openacl.memory_stats,
])
def test_calls_before_init(call):
    assert not openacl.is_initialized()
    err = expect_error(ACL_ERROR_UNINITIALIZE, call)
    assert "init" in err.message


def test_init_and_finalize():
    openacl.init()
    assert openacl.is_initialized()
    openacl.finalize()
    assert not openacl.is_initialized()
    expect_error(ACL_ERROR_UNINITIALIZE, rt.get_device_count)


def test_repeat_init_counts_references():
    openacl.init()
    expect_error(ACL_ERROR_REPEAT_INITIALIZE, openacl.init)
    err = expect_error(ACL_ERROR_REPEAT_INITIALIZE, openacl.init)
    assert "3" in err.message  # the reference count
    assert openacl.finalize_reference() == 2
    assert openacl.finalize_reference() == 1
    assert openacl.is_initialized()
    assert openacl.finalize_reference() == 0
    assert not openacl.is_initialized()
    expect_error(ACL_ERROR_REPEAT_FINALIZE, openacl.finalize_reference)


def test_finalize_twice():
    openacl.init()
    openacl.finalize()
    expect_error(ACL_ERROR_REPEAT_FINALIZE, openacl.finalize)


def test_finalize_before_init():
    expect_error(ACL_ERROR_REPEAT_FINALIZE, openacl.finalize)


def test_finalize_tears_down_whatever_the_count():
    openacl.init()
    expect_error(ACL_ERROR_REPEAT_INITIALIZE, openacl.init)
    openacl.finalize()
    assert not openacl.is_initialized()


def test_init_after_finalize_starts_afresh():
    openacl.init({"stream_mode": "inline"})
    rt.set_device(0)
    stream = rt.create_stream()
    openacl.finalize()
    openacl.init({"stream_mode": "inline"})
    expect_error(ACL_ERROR_RT_CONTEXT_NULL, rt.get_context)  # old thread state is stale
    rt.set_device(0)
    expect_error(ACL_ERROR_INVALID_PARAM, rt.synchronize_stream, stream)
    rt.free(rt.malloc(16))


def test_finalize_warns_about_leaks():
    openacl.init({"stream_mode": "inline"})
    rt.set_device(0)
    rt.malloc(100)
    with pytest.warns(openacl.LeakWarning, match="100 bytes"):
        openacl.finalize()


# -- configuration ----------------------------------------------------------------------------
def test_init_with_dict():
    openacl.init({"device_count": 3, "stream_mode": "inline", "memory_limit": "64MiB"})
    config = core.current().config
    assert (config.device_count, config.stream_mode, config.memory_limit) == (3, "inline",
                                                                               64 * MiB)
    assert rt.get_device_count() == 3


def test_init_with_file(tmp_path):
    path = write_config(tmp_path, {"device_count": 2, "stream_mode": "deterministic",
                                   "memory_limit": 1 << 24, "log_level": "error"})
    openacl.init(path)
    config = core.current().config
    assert (config.device_count, config.stream_mode, config.memory_limit,
            config.log_level) == (2, "deterministic", 1 << 24, "error")


def test_init_with_empty_file(tmp_path):
    openacl.init(write_config(tmp_path, ""))
    assert rt.get_device_count() == 1


def test_unknown_keys_are_ignored(tmp_path):
    settings = {"dump": {"dump_path": "/tmp", "dump_list": []}, "err_msg_mode": "1",
                "device_count": 2}
    openacl.init(write_config(tmp_path, settings))
    assert rt.get_device_count() == 2
    openacl.finalize()
    openacl.init(settings)
    assert rt.get_device_count() == 2


@pytest.mark.parametrize("key, value", [
    ("stream_mode", "bogus"), ("device_count", 0), ("device_count", "x"),
    ("device_count", 2.5), ("device_count", True), ("memory_limit", "lots"),
    ("memory_limit", 0), ("backend", "tpu"), ("log_level", "loud"), ("num_threads", 0),
    ("num_threads", "two"), ("num_threads", 1.5), ("num_threads", True),
])
def test_invalid_dict_value(key, value):
    err = expect_error(ACL_ERROR_INVALID_PARAM, openacl.init, {key: value})
    assert f"'{key}'" in err.message
    assert not openacl.is_initialized()


def test_missing_file(tmp_path):
    err = expect_error(ACL_ERROR_INVALID_FILE, openacl.init, str(tmp_path / "nope.json"))
    assert "nope.json" in err.message
    assert not openacl.is_initialized()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"device_count": 2,}'])
def test_malformed_file(tmp_path, text):
    expect_error(ACL_ERROR_PARSE_FILE, openacl.init, write_config(tmp_path, text))
    assert not openacl.is_initialized()


@pytest.mark.parametrize("config", [123, ["device_count", 2]])
def test_config_of_the_wrong_type(config):
    err = expect_error(ACL_ERROR_INVALID_PARAM, openacl.init, config)
    assert "'configPath'" in err.message
    assert not openacl.is_initialized()


def test_bad_value_in_file(tmp_path):
    path = write_config(tmp_path, {"stream_mode": "bogus"})
    err = expect_error(ACL_ERROR_FILE_ATTR_INVALID, openacl.init, path)
    assert "'stream_mode'" in err.message and "acl.json" in err.message


def test_environment_overrides_file_and_dict(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENACL_STREAM_MODE", "inline")
    monkeypatch.setenv("OPENACL_DEVICE_COUNT", "3")
    monkeypatch.setenv("OPENACL_MEMORY_LIMIT", "1GiB")
    settings = {"stream_mode": "threaded", "device_count": 1, "memory_limit": "64MiB"}
    for config in (settings, write_config(tmp_path, settings)):
        openacl.init(config)
        runtime = core.current()
        assert (runtime.config.stream_mode, runtime.config.device_count,
                runtime.config.memory_limit) == ("inline", 3, GiB)
        assert rt.get_device_count() == 3
        rt.set_device(2)
        assert rt.get_mem_info(1)[1] == GiB
        openacl.finalize()


def test_invalid_environment_value(monkeypatch):
    monkeypatch.setenv("OPENACL_DEVICE_COUNT", "many")
    err = expect_error(ACL_ERROR_INVALID_PARAM, openacl.init)
    assert "'device_count'" in err.message and "environment" in err.message


# -- devices and contexts ---------------------------------------------------------------------
def test_device_count_and_run_mode(runtime, backend):
    # the cpu backend has the configured two devices; cuda has the machine's GPUs
    expected = 2 if backend == "cpu" else openacl.runtime.core.current().backend.device_count
    assert rt.get_device_count() == expected
    assert rt.get_run_mode() == 1
    assert rt.get_device() == 0


@pytest.mark.parametrize("device_id", [2, -1, 100, "0", None])
def test_device_id_out_of_range(runtime, device_id):
    err = expect_error(ACL_ERROR_RT_INVALID_DEVICEID, rt.set_device, device_id)
    assert "'deviceId'" in err.message
    expect_error(ACL_ERROR_RT_INVALID_DEVICEID, rt.create_context, device_id)
    assert rt.get_device() == 0


def test_set_device_switches_device(runtime, two_devices):
    rt.set_device(1)
    assert rt.get_device() == 1
    rt.set_device(0)
    assert rt.get_device() == 0


def test_create_set_get_destroy_context(runtime, two_devices):
    default = rt.get_context()
    created = rt.create_context(1)
    assert created != default
    assert rt.get_context() == created and rt.get_device() == 1
    rt.set_context(default)
    assert rt.get_context() == default and rt.get_device() == 0
    rt.set_context(created)
    assert rt.get_device() == 1
    rt.set_context(default)
    rt.destroy_context(created)
    expect_error(ACL_ERROR_INVALID_PARAM, rt.set_context, created)
    expect_error(ACL_ERROR_INVALID_PARAM, rt.destroy_context, created)
    assert rt.get_context() == default


def test_destroying_the_current_context_leaves_none(runtime):
    created = rt.create_context(0)
    rt.destroy_context(created)
    expect_error(ACL_ERROR_RT_CONTEXT_NULL, rt.get_context)
    expect_error(ACL_ERROR_RT_CONTEXT_NULL, rt.malloc, 16)


def test_destroy_default_context(runtime):
    err = expect_error(ACL_ERROR_INVALID_PARAM, rt.destroy_context, rt.get_context())
    assert "default context" in err.message


def test_context_object(runtime, two_devices):
    with openacl.Context(1) as ctx:
        assert rt.get_context() == int(ctx) and rt.get_device() == 1
    assert rt.get_device() == 0
    assert ctx.handle is None


def test_bad_context_handles(runtime):
    expect_error(ACL_ERROR_INVALID_PARAM, rt.set_context, 0x1234)
    expect_error(ACL_ERROR_INVALID_PARAM, rt.set_context, rt.create_stream())
    expect_error(ACL_ERROR_INVALID_PARAM, rt.destroy_context, "ctx")


def test_the_leak_warning_points_at_the_programs_finalize_line():
    """Whatever wrappers stand between (errors.public), the LeakWarning names the caller's
    file and line, where the program finalizes (pyACL's face logs it instead)."""
    import warnings as warnings_module

    for finalize in (openacl.finalize, core.finalize):
        openacl.init()
        openacl.rt.set_device(0)
        openacl.rt.malloc(1024)
        with warnings_module.catch_warnings(record=True) as caught:
            warnings_module.simplefilter("always")
            finalize()
        (warning,) = [w for w in caught if issubclass(w.category, openacl.LeakWarning)]
        assert warning.filename == __file__, (finalize, warning.filename)
