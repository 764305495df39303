"""The pyACL face: unchanged pyACL-style programs (following the official samples' flows) run
through ``python -m openacl.compat`` in a subprocess, or in-process through ``run_script``.

Each program asserts what it expects itself; a program that raises fails its test. "Nothing
raises for a bad argument" is checked by running whole error-path programs to the end.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import openacl
from openacl.compat import acl
from openacl.compat.runner import run_script

SUBPROCESS_TIMEOUT_S = 60  # a hung program fails its test instead of hanging the suite


def _write(tmp_path, source: str, name: str = "sample.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _run_subprocess(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *command], capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S)


# -- host/device memory with every memcpy kind, the resnet sample's flow --------------------
MEMORY_PROGRAM = """
    import numpy as np
    import acl
    from constant import (ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_HOST_TO_HOST,
                          ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,
                          ACL_MEMCPY_DEVICE_TO_DEVICE, NPY_FLOAT32)

    DEVICE_ID = 0
    assert acl.init("") == 0
    assert acl.rt.set_device(DEVICE_ID) == 0
    context, ret = acl.rt.create_context(DEVICE_ID)
    assert ret == 0 and context != 0
    run_mode, ret = acl.rt.get_run_mode()
    assert (run_mode, ret) == (acl.ACL_HOST, 0)
    free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert ret == 0 and 0 < free <= total

    data = np.arange(16, dtype=np.float32)
    host_in = data.tobytes()
    size = len(host_in)
    in_ptr = acl.util.bytes_to_ptr(host_in)
    dev_a, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    dev_b, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    host_ptr, ret = acl.rt.malloc_host(size)
    assert ret == 0

    assert acl.rt.memcpy(dev_a, size, in_ptr, size, ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(dev_b, size, dev_a, size, ACL_MEMCPY_DEVICE_TO_DEVICE) == 0
    assert acl.rt.memcpy(host_ptr, size, dev_b, size, ACL_MEMCPY_DEVICE_TO_HOST) == 0
    out = bytearray(size)
    out_ptr = acl.util.bytes_to_ptr(out)
    assert acl.rt.memcpy(out_ptr, size, host_ptr, size, ACL_MEMCPY_HOST_TO_HOST) == 0
    assert np.array_equal(np.frombuffer(out, np.float32), data)

    # writes through bytes_to_ptr land in the bytes object itself
    target = bytes(size)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(target), size, dev_a, size,
                         ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert target == host_in
    # sloppy but tolerated by real pyACL: a host source with a device-to-host kind
    again = bytes(size)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(again), size, in_ptr, size,
                         ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert again == host_in
    assert acl.rt.memcpy(dev_b, size, in_ptr, size, acl.ACL_MEMCPY_DEFAULT) == 0

    copy = acl.util.ptr_to_bytes(dev_b, size)
    assert isinstance(copy, bytes) and copy == host_in
    view = acl.util.ptr_to_numpy(host_ptr, (4, 4), NPY_FLOAT32)
    assert view.shape == (4, 4) and view.dtype == np.float32
    assert np.array_equal(view.ravel(), data)
    array = np.zeros(16, np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(array), size, dev_a, size,
                         ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert np.array_equal(array, data)
    strided = np.arange(32, dtype=np.float32)[::2]
    contiguous_ptr = acl.util.numpy_contiguous_to_ptr(strided)
    assert acl.rt.memcpy(dev_a, size, contiguous_ptr, size, ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert np.array_equal(np.frombuffer(acl.util.ptr_to_bytes(dev_a, size), np.float32),
                          strided)

    assert acl.rt.memset(dev_a, size, 0, size) == 0
    assert acl.util.ptr_to_bytes(dev_a, size) == bytes(size)
    assert acl.rt.free(dev_a) == 0
    assert acl.rt.free_host(host_ptr) == 0
    dvpp_ptr, ret = acl.media.dvpp_malloc(256)
    assert ret == 0 and dvpp_ptr != 0
    assert acl.media.dvpp_free(dvpp_ptr) == 0
    assert acl.rt.destroy_context(context) == 0
    assert acl.rt.reset_device(DEVICE_ID) == 0
    assert acl.finalize() == 0  # dev_b is still allocated: released, logged, no exception
    print("memory flow OK")
"""

SAMPLE_CONSTANTS = """
    ACL_MEM_MALLOC_HUGE_FIRST = 0
    ACL_MEMCPY_HOST_TO_HOST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3
    NPY_FLOAT32 = 11
"""


def test_memory_flow_with_every_memcpy_kind_in_a_subprocess(tmp_path):
    _write(tmp_path, SAMPLE_CONSTANTS, "constant.py")
    script = _write(tmp_path, MEMORY_PROGRAM)
    result = _run_subprocess("-m", "openacl.compat", str(script))
    assert result.returncode == 0, result.stderr
    assert "memory flow OK" in result.stdout
    assert "never freed" in result.stderr  # the leak at finalize is logged, not raised


# -- async memset and memcpy on two streams ordered by an event -------------------------------
ASYNC_PROGRAM = """
    import acl

    SIZE = 1 << 16
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    context, ret = acl.rt.create_context(0)
    producer, ret = acl.rt.create_stream()
    assert ret == 0
    consumer, ret = acl.rt.create_stream()
    assert ret == 0 and producer != consumer
    src, _ = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    dst, _ = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    start, ret = acl.rt.create_event()
    assert ret == 0
    filled, ret = acl.rt.create_event()
    assert ret == 0

    for round_value in (0x11, 0x5A):
        assert acl.rt.record_event(start, producer) == 0
        assert acl.rt.memset_async(src, SIZE, round_value, SIZE, producer) == 0
        assert acl.rt.record_event(filled, producer) == 0
        assert acl.rt.stream_wait_event(consumer, filled) == 0
        assert acl.rt.memcpy_async(dst, SIZE, src, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE,
                                   consumer) == 0
        assert acl.rt.synchronize_stream(consumer) == 0
        assert acl.util.ptr_to_bytes(dst, SIZE) == bytes([round_value]) * SIZE

    assert acl.rt.synchronize_event(filled) == 0
    status, ret = acl.rt.query_event_status(filled)
    assert (status, ret) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    elapsed_ms, ret = acl.rt.event_elapsed_time(start, filled)
    assert ret == 0 and elapsed_ms >= 0.0
    status, ret = acl.rt.stream_query(consumer)
    assert (status, ret) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
    for event in (start, filled):
        assert acl.rt.destroy_event(event) == 0
    for stream in (producer, consumer):
        assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.free(src) == 0 and acl.rt.free(dst) == 0
    assert acl.rt.destroy_context(context) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
"""


def test_async_memset_and_memcpy_on_two_streams_with_events(tmp_path):
    assert run_script(_write(tmp_path, ASYNC_PROGRAM)) == 0


# -- an acllite-style resource class, torn down in __del__ -------------------------------------
ACLLITE_PROGRAM = """
    import sys
    import acl

    class AclLiteResource:
        def __init__(self, device_id=0):
            self.device_id = device_id
            self.context = None
            self.stream = None
            self.run_mode = None

        def init(self):
            ret = acl.init()
            assert ret == 0, ret
            assert acl.rt.set_device(self.device_id) == 0
            self.context, ret = acl.rt.create_context(self.device_id)
            assert ret == 0
            self.stream, ret = acl.rt.create_stream()
            assert ret == 0
            self.run_mode, ret = acl.rt.get_run_mode()
            assert ret == 0
            self.extra_stream, ret = acl.rt.create_stream()  # never destroyed by hand

        def __del__(self):
            codes = []
            if self.stream:
                codes.append(acl.rt.destroy_stream(self.stream))
            if self.context:
                # a stream is still alive in the context: CANN destroys it with the context
                codes.append(acl.rt.destroy_context(self.context))
            codes.append(acl.rt.reset_device(self.device_id))
            codes.append(acl.finalize())
            print("teardown", codes)

    def main():
        resource = AclLiteResource()
        resource.init()
        buffer, ret = acl.rt.malloc(1024, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ret == 0  # left allocated: finalize releases it
        print("run mode", resource.run_mode, "args", sys.argv[1:])

    if __name__ == "__main__":
        main()
"""


def test_acllite_resource_class_tears_down_in_del(tmp_path):
    script = _write(tmp_path, ACLLITE_PROGRAM)
    result = _run_subprocess("-m", "openacl.compat", str(script), "--model", "x.om")
    assert result.returncode == 0, result.stderr
    assert "run mode 1 args ['--model', 'x.om']" in result.stdout
    assert "teardown [0, 0, 0, 0]" in result.stdout


# -- error paths: codes and messages, nothing raises ------------------------------------------
ERROR_PROGRAM = """
    import acl

    UNINITIALIZE = 100001
    INVALID_PARAM = 100000

    def expect(ret, code, *words):
        message = acl.get_recent_err_msg()
        assert ret == code, (ret, code, message)
        for word in words:
            assert word in message, (word, message)

    # before init
    dev_ptr, ret = acl.rt.malloc(64, 0)
    assert dev_ptr == 0
    expect(ret, UNINITIALIZE, "init")
    expect(acl.rt.set_device(0), UNINITIALIZE)
    stream, ret = acl.rt.create_stream()
    assert stream == 0
    expect(ret, UNINITIALIZE)
    assert acl.create_tensor_desc(acl.ACL_FLOAT, [2], acl.ACL_FORMAT_ND) == 0
    expect(UNINITIALIZE, UNINITIALIZE)
    expect(acl.finalize(), acl.ACL_ERROR_REPEAT_FINALIZE)

    assert acl.init() == 0
    expect(acl.init(), acl.ACL_ERROR_REPEAT_INITIALIZE)
    assert acl.rt.set_device(0) == 0
    dev_ptr, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    host = bytes(64)
    host_ptr = acl.util.bytes_to_ptr(host)

    expect(acl.rt.memcpy(0xDEAD0000, 64, host_ptr, 64, 1), INVALID_PARAM, "dst")
    expect(acl.rt.memcpy(dev_ptr, 64, host_ptr, 64, 9), INVALID_PARAM, "kind")
    expect(acl.rt.memcpy(dev_ptr, 32, host_ptr, 64, 1), INVALID_PARAM, "destMax")
    expect(acl.rt.memcpy(dev_ptr, 128, host_ptr, 128, 1), INVALID_PARAM, "past the end")
    expect(acl.rt.memset(dev_ptr, 64, 0, 65), INVALID_PARAM, "maxCount")
    dev_ptr2, ret = acl.rt.malloc(0, 0)
    assert dev_ptr2 == 0
    expect(ret, INVALID_PARAM, "size")
    assert acl.rt.free(dev_ptr) == 0
    assert acl.rt.free(dev_ptr) != 0  # double free: a code, not a crash
    assert acl.get_recent_err_msg()
    assert acl.rt.set_device("zero") == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert "deviceId" in acl.get_recent_err_msg()
    expect(acl.rt.set_device(), INVALID_PARAM)  # so is a missing argument
    assert acl.rt.destroy_stream(12345) != 0 and acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(12345) != 0 and acl.get_recent_err_msg()

    assert acl.create_tensor_desc(999, [2], acl.ACL_FORMAT_ND) == 0
    assert "dataType" in acl.get_recent_err_msg()
    desc = acl.create_tensor_desc(acl.ACL_FLOAT, [2, 3], acl.ACL_FORMAT_ND)
    dim, ret = acl.get_tensor_desc_dim_v2(desc, 5)
    assert dim == 0
    expect(ret, INVALID_PARAM, "index")
    assert acl.get_tensor_desc_type(4242) == acl.ACL_DT_UNDEFINED
    assert acl.get_recent_err_msg()
    assert acl.destroy_tensor_desc(4242) is None  # a void C function: None, message kept
    assert acl.get_recent_err_msg()
    dim_range, ret = acl.get_tensor_desc_dim_range(desc, 0, 1)
    assert dim_range == []
    expect(ret, INVALID_PARAM, "dimRangeNum")
    acl.destroy_tensor_desc(desc)

    assert acl.util.ptr_to_numpy(host_ptr, (4,), 777) is None
    assert "type" in acl.get_recent_err_msg()
    assert acl.util.ptr_to_numpy(0, (4,), 11) is None
    assert acl.get_recent_err_msg()
    assert acl.util.numpy_to_ptr([1, 2, 3]) == 0
    assert acl.get_recent_err_msg()
    expect(acl.util.stop_thread(987654321), INVALID_PARAM, "start_thread")
    thread_id, ret = acl.util.start_thread("not callable", [])
    assert thread_id == 0
    expect(ret, INVALID_PARAM)
    expect(acl.rt.launch_callback(print, [], 1, 0), acl.ACL_ERROR_STREAM_NOT_SUBSCRIBE)
    assert acl.get_recent_err_msg() is None  # each message is returned once
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
"""


def test_error_paths_return_codes_and_messages_and_never_raise(tmp_path):
    assert run_script(_write(tmp_path, ERROR_PROGRAM)) == 0


# -- aclDataBuffer and aclTensorDesc ------------------------------------------------------------
TENSOR_DESC_PROGRAM = """
    import numpy as np
    import acl

    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    empty = acl.create_data_buffer(0, 0)
    assert empty != 0
    assert acl.get_data_buffer_addr(empty) == 0 and acl.get_data_buffer_size_v2(empty) == 0
    dev_ptr, _ = acl.rt.malloc(24, 0)
    assert acl.update_data_buffer(empty, dev_ptr, 24) == 0
    assert acl.get_data_buffer_addr(empty) == dev_ptr
    assert acl.get_data_buffer_size(empty) == acl.get_data_buffer_size_v2(empty) == 24
    assert acl.destroy_data_buffer(empty) == 0
    assert acl.destroy_data_buffer(empty) != 0

    desc = acl.create_tensor_desc(acl.ACL_FLOAT16, [2, 3], acl.ACL_FORMAT_NCHW)
    assert desc != 0
    assert type(acl.get_tensor_desc_type(desc)) is int
    assert acl.get_tensor_desc_type(desc) == acl.ACL_FLOAT16
    assert acl.get_tensor_desc_format(desc) == acl.ACL_FORMAT_NCHW
    assert acl.get_tensor_desc_num_dims(desc) == 2
    assert acl.get_tensor_desc_element_count(desc) == 6
    assert acl.get_tensor_desc_size(desc) == 12
    assert acl.get_tensor_desc_dim(desc, 1) == 3
    assert acl.get_tensor_desc_dim_v2(desc, 0) == (2, 0)
    assert acl.get_tensor_desc_dim_range(desc, 1, 2) == ([3, 3], 0)
    assert acl.set_tensor_desc_name(desc, "x") is None
    assert acl.get_tensor_desc_name(desc) == "x"
    assert acl.set_tensor_shape(desc, [-1, 4]) == 0
    assert acl.set_tensor_shape_range(desc, 2, [[1, 8], [4, 4]]) == 0
    assert acl.get_tensor_desc_dim_range(desc, 0, 2) == ([1, 8], 0)
    assert acl.get_tensor_desc_size(desc) == 0  # unknown until the dynamic dim is known
    assert acl.set_tensor_format(desc, acl.ACL_FORMAT_ND) == 0
    assert acl.get_tensor_desc_format(desc) == acl.ACL_FORMAT_ND
    const = np.ones(4, np.float16).tobytes()
    assert acl.set_tensor_const(desc, acl.util.bytes_to_ptr(const), len(const)) == 0
    assert acl.destroy_tensor_desc(desc) is None

    unknown_rank = acl.create_tensor_desc(acl.ACL_FLOAT, [-2], acl.ACL_FORMAT_ND)
    assert acl.get_tensor_desc_num_dims(unknown_rank) == acl.ACL_UNKNOWN_RANK
    assert acl.ACL_UNKNOWN_RANK == 0xFFFFFFFFFFFFFFFE
    acl.destroy_tensor_desc(unknown_rank)
    assert acl.data_type_size(acl.ACL_FLOAT16) == 2
    assert acl.data_type_size(acl.ACL_INT64) == 8
    assert isinstance(acl.get_soc_name(), str) and acl.rt.get_soc_name() == acl.get_soc_name()
    assert acl.rt.free(dev_ptr) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
"""


def test_data_buffer_and_tensor_desc_functions(tmp_path):
    assert run_script(_write(tmp_path, TENSOR_DESC_PROGRAM)) == 0


# -- callbacks: start_thread + subscribe_report + launch_callback + process_report ------------
CALLBACK_PROGRAM = """
    import threading
    import acl

    seen = []
    state = {"run": True}

    def callback(user_data):
        seen.append((threading.get_ident(), list(user_data)))

    def process_thread(args_list):
        context, timeout_ms = args_list
        assert acl.rt.set_context(context) == 0
        while state["run"]:
            acl.rt.process_report(timeout_ms)  # returns a timeout code while idle

    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    context, _ = acl.rt.create_context(0)
    stream, _ = acl.rt.create_stream()
    thread_id, ret = acl.util.start_thread(process_thread, [context, 20])
    assert ret == 0 and thread_id != 0
    assert acl.rt.subscribe_report(thread_id, stream) == 0
    assert acl.rt.subscribe_report(thread_id, stream) == acl.ACL_ERROR_REPEAT_SUBSCRIBE
    assert acl.rt.launch_callback(callback, ["frame", 1], acl.ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.launch_callback(callback, ["frame", 2], acl.ACL_CALLBACK_BLOCK, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert seen == [(thread_id, ["frame", 1]), (thread_id, ["frame", 2])]
    hosted = []
    assert acl.rt.launch_host_func(stream, hosted.append, "args") == 0
    assert acl.rt.synchronize_stream(stream) == 0 and hosted == ["args"]
    assert acl.rt.unsubscribe_report(thread_id, stream) == 0
    state["run"] = False
    assert acl.util.stop_thread(thread_id) == 0
    assert acl.rt.destroy_stream(stream) == 0
    assert acl.rt.destroy_context(context) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
"""


def test_callbacks_run_on_the_subscribed_start_thread(tmp_path):
    assert run_script(_write(tmp_path, CALLBACK_PROGRAM)) == 0


# -- the surface ------------------------------------------------------------------------------
def test_util_functions_are_listed_by_dir():
    names = {"bytes_to_ptr", "ptr_to_bytes", "numpy_to_ptr", "numpy_contiguous_to_ptr",
             "ptr_to_numpy", "start_thread", "stop_thread"}
    assert names <= set(dir(acl.util))
    assert all(callable(getattr(acl.util, name)) for name in names)


def test_every_runtime_function_has_its_pyacl_name():
    pythonic = {name for name in openacl.rt.__all__ if callable(getattr(openacl.rt, name))}
    assert pythonic <= set(acl.rt.FUNCTIONS)
    assert acl.rt.create_stream.__name__ == "create_stream"
    assert "stream, ret" in acl.rt.create_stream.__doc__


def test_constants_are_plain_ints_on_acl_and_acl_rt():
    assert type(acl.ACL_FLOAT) is int and acl.ACL_FLOAT == 0
    assert acl.ACL_MEMCPY_HOST_TO_DEVICE == acl.rt.ACL_MEMCPY_HOST_TO_DEVICE == 1
    assert acl.rt.ACL_MEM_MALLOC_HUGE_FIRST == 0
    assert acl.ACL_ERROR_NONE == acl.ACL_SUCCESS == 0
    assert acl.ACL_ERROR_UNINITIALIZE == 100001
    assert acl.constants.NPY_FLOAT == acl.constants.NPY_FLOAT32 == 11
    assert acl.constants.NPY_HALF == 23 and acl.constants.NPY_BOOL == 0
    assert "mdl" in acl.__all__ and callable(acl.mdl.execute)  # acl.mdl is provided


# -- the runner ---------------------------------------------------------------------------------
RUNNER_PROGRAM = """
    import sys
    import acl
    import acl.rt
    from acl import util
    assert __name__ == "__main__"
    assert acl.rt is util is not None or True
    print("argv", sys.argv[1:])
    import acl.mdl
    assert callable(acl.mdl.execute)
    try:
        import acl.no_such_module
    except ModuleNotFoundError:
        pass
    else:
        raise AssertionError("acl.no_such_module should not exist")
    if len(sys.argv) > 1:
        sys.exit(sys.argv[1] if not sys.argv[1].isdigit() else int(sys.argv[1]))
"""


def test_runner_sets_argv_and_returns_the_exit_code(tmp_path, capsys):
    script = _write(tmp_path, RUNNER_PROGRAM)
    saved_argv = list(sys.argv)
    assert run_script(script) == 0
    assert run_script(script, ["7", "--flag"]) == 7
    assert "argv ['7', '--flag']" in capsys.readouterr().out
    assert run_script(script, ["failed"]) == 1
    assert "failed" in capsys.readouterr().err
    assert sys.argv == saved_argv
    assert "acl" not in sys.modules and "acl.rt" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        import acl as _  # noqa: F401 - nothing is installed as a top-level `acl`


def test_runner_exit_codes_from_both_command_lines(tmp_path):
    script = _write(tmp_path, RUNNER_PROGRAM)
    result = _run_subprocess("-m", "openacl.compat", str(script), "3")
    assert result.returncode == 3, result.stderr
    cli = _run_subprocess("-m", "openacl.cli.main", "run-pyacl", str(script), "4", "-h")
    assert cli.returncode == 4, cli.stderr
    assert "argv ['4', '-h']" in cli.stdout
    missing = _run_subprocess("-m", "openacl.compat", str(tmp_path / "missing.py"))
    assert missing.returncode == 2 and "can't open file" in missing.stderr


# -- single-op models through the runner: Add by set_model_dir + execute_v2, Slice by handle ---
SINGLE_OP_PROGRAM = """
    import json, os, sys
    import numpy as np
    import acl

    ACL_FLOAT16, ACL_FLOAT, ACL_INT32, ACL_FORMAT_ND = 1, 0, 3, 2
    HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
    model_dir = sys.argv[1]
    with open(os.path.join(model_dir, "add_op.json"), "w") as f:
        json.dump([{"op": "Add",
                    "input_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"},
                                   {"format": "ND", "shape": [8, 16], "type": "float16"}],
                    "output_desc": [{"format": "ND", "shape": [8, 16], "type": "float16"}]},
                   {"op": "Slice",
                    "input_desc": [{"format": "ND", "shape": [4, 6], "type": "float32"},
                                   {"format": "ND", "shape": [2], "type": "int32"},
                                   {"format": "ND", "shape": [2], "type": "int32"}],
                    "output_desc": [{"format": "ND", "shape": [2, 3], "type": "float32"}]}],
                  f)
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert acl.op.set_model_dir(model_dir) == 0

    def device_copy(array):
        ptr, ret = acl.rt.malloc(array.nbytes, 0)
        assert ret == 0
        assert acl.rt.memcpy(ptr, array.nbytes, acl.util.numpy_to_ptr(array), array.nbytes,
                             HOST_TO_DEVICE) == 0
        return ptr, acl.create_data_buffer(ptr, array.nbytes)

    x = np.random.default_rng(0).random((8, 16)).astype(np.float16)
    y = np.ones((8, 16), np.float16)
    desc = acl.create_tensor_desc(ACL_FLOAT16, [8, 16], ACL_FORMAT_ND)
    (px, bx), (py, by) = device_copy(x), device_copy(y)
    pz, ret = acl.rt.malloc(x.nbytes, 0)
    bz = acl.create_data_buffer(pz, x.nbytes)
    attr = acl.op.create_attr()
    assert acl.op.execute_v2("Add", [desc, desc], [bx, by], [desc], [bz], attr, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    z = np.empty_like(x)
    acl.rt.memcpy(acl.util.numpy_to_ptr(z), z.nbytes, pz, z.nbytes, DEVICE_TO_HOST)
    assert np.array_equal(z, x + y)
    wrong = acl.create_tensor_desc(ACL_FLOAT16, [8, 8], ACL_FORMAT_ND)
    assert acl.op.execute_v2("Add", [wrong, wrong], [bx, by], [wrong], [bz], attr,
                             stream) == 100024
    assert "Add" in acl.get_recent_err_msg()

    source = np.arange(24, dtype=np.float32).reshape(4, 6)
    offsets, size = np.array([1, 2], np.int32), np.array([2, 3], np.int32)
    dx = acl.create_tensor_desc(ACL_FLOAT, [4, 6], ACL_FORMAT_ND)
    do = acl.create_tensor_desc(ACL_INT32, [2], ACL_FORMAT_ND)
    ds = acl.create_tensor_desc(ACL_INT32, [2], ACL_FORMAT_ND)
    assert acl.set_tensor_const(do, acl.util.numpy_to_ptr(offsets), offsets.nbytes) == 0
    assert acl.set_tensor_const(ds, acl.util.numpy_to_ptr(size), size.nbytes) == 0
    dy = acl.create_tensor_desc(ACL_FLOAT, [2, 3], ACL_FORMAT_ND)
    (ps, bs), (po, bo), (pn, bn) = device_copy(source), device_copy(offsets), device_copy(size)
    pout, ret = acl.rt.malloc(24, 0)
    bout = acl.create_data_buffer(pout, 24)
    handle, ret = acl.op.create_handle("Slice", [dx, do, ds], [dy], attr)
    assert ret == 0
    for _ in range(2):
        assert acl.op.execute_with_handle(handle, [bs, bo, bn], [bout], stream) == 0
    acl.rt.synchronize_stream(stream)
    out = np.empty((2, 3), np.float32)
    acl.rt.memcpy(acl.util.numpy_to_ptr(out), 24, pout, 24, DEVICE_TO_HOST)
    assert np.array_equal(out, source[1:3, 2:5])
    acl.op.destroy_handle(handle)
    acl.op.destroy_attr(attr)
    for ptr in (px, py, pz, ps, po, pn, pout):
        acl.rt.free(ptr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    print("single-op sample passed")
"""


def test_single_op_sample_runs_through_the_runner(tmp_path):
    script = _write(tmp_path, SINGLE_OP_PROGRAM, "single_op.py")
    models = tmp_path / "op_models"
    models.mkdir()
    done = _run_subprocess("-m", "openacl.compat", str(script), str(models))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "single-op sample passed" in done.stdout


# -- a Slice handle over host-placed inputs, offsets and size read at run time ------------------
# Our rewrite of the flow of Ascend/samples' python/level1_single_api/4_op_dev/2_verify_op/
# acl_execute_slice: single-op models compiled from a JSON description, a handle created with
# non-const offsets/size descs, buffers over host bytes (bytes_to_ptr), output counted.
RUNTIME_SLICE_PROGRAM = """
import json, os, subprocess, sys
import numpy as np
import acl

here = os.path.dirname(os.path.abspath(__file__))
spec = [{"op": "Slice",
         "input_desc": [{"format": "ND", "shape": [64, 96], "type": "float16"},
                        {"format": "ND", "shape": [2], "type": "int32"},
                        {"format": "ND", "shape": [2], "type": "int32"}],
         "output_desc": [{"format": "ND", "shape": [48, 80], "type": "float16"}]}]
with open(os.path.join(here, "slice.json"), "w") as f:
    json.dump(spec, f)
models = os.path.join(here, "models")
subprocess.run([sys.executable, "-m", "openacl.cli.main", "convert", "--singleop",
                os.path.join(here, "slice.json"), "-o", models], check=True,
               capture_output=True)
acl.app_log(1, "slice sample starting")  # aclAppLog, as acllite's logger calls it
assert acl.app_log(9, "no such level") is None
assert "logLevel" in acl.get_recent_err_msg()

assert acl.init() == 0
assert acl.rt.set_device(0) == 0
context, ret = acl.rt.create_context(0)
stream, ret = acl.rt.create_stream()
assert acl.op.set_model_dir(models) == 0
attr = acl.op.create_attr()
dx = acl.create_tensor_desc(1, [64, 96], 2)
do = acl.create_tensor_desc(3, [2], 2)
ds = acl.create_tensor_desc(3, [2], 2)
dy = acl.create_tensor_desc(1, [48, 80], 2)
out_size = acl.get_tensor_desc_size(dy)
out_ptr, ret = acl.rt.malloc(out_size, 0)
out_buffer = acl.create_data_buffer(out_ptr, out_size)
handle, ret = acl.op.create_handle("Slice", [dx, do, ds], [dy], attr)
assert ret == 0, acl.get_recent_err_msg()

x = np.arange(64 * 96, dtype=np.float16).reshape(64, 96)
x_bytes = x.tobytes()
x_buffer = acl.create_data_buffer(acl.util.bytes_to_ptr(x_bytes), len(x_bytes))
keep = []


def run(offsets, size):
    buffers = [x_buffer]
    for values in (offsets, size):
        data = np.array(values, np.int32).tobytes()
        keep.append(data)
        buffers.append(acl.create_data_buffer(acl.util.bytes_to_ptr(data), len(data)))
    ret = acl.op.execute_with_handle(handle, buffers, [out_buffer], stream)
    assert acl.rt.synchronize_stream(stream) == 0
    for buffer in buffers[1:]:
        acl.destroy_data_buffer(buffer)
    return ret


for offsets in ([0, 0], [16, 16], [3, 5]):
    assert run(offsets, [48, 80]) == 0, acl.get_recent_err_msg()
    out = np.frombuffer(acl.util.ptr_to_bytes(out_ptr, out_size), np.float16).reshape(48, 80)
    r, c = offsets
    assert np.array_equal(out, x[r:r + 48, c:c + 80])
assert run([0, 0], [32, 80]) == 100022  # the output desc says [48, 80]
message = acl.get_recent_err_msg()
assert "[32, 80]" in message and "[48, 80]" in message, message

acl.op.destroy_handle(handle)  # void in pyACL
for buffer in (x_buffer, out_buffer):
    acl.destroy_data_buffer(buffer)
for desc in (dx, do, ds, dy):
    acl.destroy_tensor_desc(desc)
acl.op.destroy_attr(attr)
assert acl.rt.free(out_ptr) == 0
assert acl.rt.destroy_stream(stream) == 0
assert acl.rt.destroy_context(context) == 0
assert acl.rt.reset_device(0) == 0
assert acl.finalize() == 0
print("runtime slice OK")
"""


def test_slice_handle_with_runtime_values_sample_flow(tmp_path, capsys):
    assert run_script(_write(tmp_path, RUNTIME_SLICE_PROGRAM)) == 0
    assert "runtime slice OK" in capsys.readouterr().out
