"""The sanitizer (runtime/sanitizer.py) and ``openacl sanitize`` (cli/sanitize.py): a planted
bug per kind, found with the right file and line; correct programs report nothing; off, it
holds no state and no hook is reached."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import openacl
from openacl import aclnn, rt
from openacl.custom import get_block_idx, global_buffer, kernel
from openacl.runtime import sanitizer
from openacl.util import ptr_to_bytes, ptr_to_numpy

ALL_TOOLS = "memcheck,racecheck,initcheck,synccheck"
NBYTES = 1024
H2D, D2H = 1, 2  # ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST
POLL_S = 0.01  # between looks at the findings while a gate holds a stream
WAIT_S = 10.0  # a finding that takes longer than this to appear is a bug
RUN_TIMEOUT_S = 120
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
THIS_FILE = str(Path(__file__).resolve())


def _line(marker: str) -> int:
    """The line of this file holding ``# <marker>`` (planted bugs are found by their line)."""
    for number, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(f"no line marked {marker}")


def _start(spec: str = ALL_TOOLS, mode: str = "threaded") -> None:
    openacl.init({"sanitize": spec, "stream_mode": mode})
    rt.set_device(0)


def _finish() -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", openacl.LeakWarning)
        openacl.finalize()
    return sanitizer.findings()


def _of(found: list[dict], kind: str) -> list[dict]:
    return [finding for finding in found if finding["kind"] == kind]


def _lines(finding: dict, role: str | None = None) -> list[int]:
    return [site["line"] for site in finding["sites"] if site["file"] == THIS_FILE
            and (role is None or site["role"] == role)]


@pytest.fixture(params=["threaded", "inline", "deterministic"])
def mode(request):
    return request.param


# -- memcheck -----------------------------------------------------------------------------------
@kernel
def _overrun(x: int, n: int) -> None:
    global_buffer(x, np.float32, n + 1)  # OOB


@kernel
def _overlapping(z: int, n: int) -> None:
    half = n // 2
    view = global_buffer(z, np.float32, half, offset=get_block_idx() * (half - 1))  # OVERLAP
    view[:] = get_block_idx() + 1


@kernel
def _disjoint(z: int, n: int) -> None:
    half = n // 2
    view = global_buffer(z, np.float32, half, offset=get_block_idx() * half)
    view[:] = 0.0  # zeros over fresh memory: still seen as written (the poison)


def test_kernel_out_of_bounds_names_the_kernel_line_and_block(mode):
    _start("memcheck", mode)
    stream = rt.create_stream()
    x = rt.malloc(16 * 4)
    _overrun[2, stream](x, 16)  # LAUNCH
    with pytest.raises(openacl.AclError):
        rt.synchronize_stream(stream)
    found = _of(_finish(), "illegal_read_write")
    assert {site.get("block") for f in found for site in f["sites"]} >= {0, 1}
    assert _lines(found[0], "global_buffer") == [_line("OOB")]
    assert _lines(found[0], "kernel") == [_line("LAUNCH")]
    assert found[0]["size"] == 17 * 4 and found[0]["address"] == x


def test_two_blocks_writing_the_same_bytes_is_multi_core_corruption():
    _start("memcheck")
    stream = rt.create_stream()
    z = rt.malloc(64 * 4)
    _overlapping[2, stream](z, 64)
    rt.synchronize_stream(stream)
    found = _of(_finish(), "multi_core_corruption")
    assert len(found) == 1
    assert found[0]["size"] == 4 and found[0]["address"] == z + 31 * 4
    blocks = {site.get("block") for site in found[0]["sites"]}
    assert blocks >= {0, 1}
    assert _lines(found[0], "write") == [_line("OVERLAP")]


def test_double_and_illegal_free_name_both_frees():
    _start("memcheck")
    pointer = rt.malloc(NBYTES)
    rt.free(pointer)  # FIRST FREE
    with pytest.raises(openacl.AclError):
        rt.free(pointer)  # SECOND FREE
    with pytest.raises(openacl.AclError):
        rt.free(pointer + 8)  # WILD FREE
    found = _finish()
    double, = _of(found, "double_free")
    assert _lines(double, "freed") == [_line("SECOND FREE")]
    assert _lines(double, "first freed") == [_line("FIRST FREE")]
    illegal, = _of(found, "illegal_free")
    assert _lines(illegal) == [_line("WILD FREE")]


def test_leak_check_lists_allocations_never_freed():
    _start("memcheck,leak-check")
    rt.malloc(NBYTES)  # LEAKED
    rt.malloc_host(NBYTES)  # LEAKED HOST
    freed = rt.malloc(NBYTES)
    rt.free(freed)
    found = _of(_finish(), "leak")
    assert sorted(line for f in found for line in _lines(f, "allocated")) == sorted(
        [_line("LEAKED"), _line("LEAKED HOST")])
    _start("memcheck")  # leak-check off: not reported
    rt.malloc(NBYTES)
    assert _of(_finish(), "leak") == []


def test_host_access_to_device_memory(host_addressable):
    _start("memcheck")
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    ptr_to_numpy(host, (NBYTES,), np.uint8)[:] = 1  # host memory: fine
    ptr_to_numpy(device, (NBYTES // 4,), np.float32)  # HOST VIEW
    ptr_to_bytes(device, 16)  # HOST BYTES
    found = _of(_finish(), "host_access")
    assert sorted(line for f in found for line in _lines(f)) == sorted(
        [_line("HOST VIEW"), _line("HOST BYTES")])


def test_memcpy_kind_contradicting_the_pointers_is_a_warning():
    _start("memcheck")
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    rt.memset(device, NBYTES, 0, NBYTES)
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # right kind
    rt.memcpy(host, NBYTES, device, NBYTES, H2D)  # WRONG KIND
    found, = _of(_finish(), "memcpy_direction")
    assert found["severity"] == "warn" and _lines(found) == [_line("WRONG KIND")]
    assert "D2H" in found["message"]


def test_copy_out_of_bounds_is_an_illegal_read():
    _start("memcheck")
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(2 * NBYTES)
    with pytest.raises(openacl.AclError):
        rt.memcpy(host, 2 * NBYTES, device, 2 * NBYTES, D2H)  # COPY OOB
    found, = _of(_finish(), "illegal_read")
    assert _lines(found) == [_line("COPY OOB")]


# -- racecheck ---------------------------------------------------------------------------------
def _two_streams_copy(with_event: bool, gate=None, gated: str = "reader") -> list[dict]:
    """A write on one stream and a read on another; ``gate`` holds the ``gated`` stream
    until the other has run, so the write runs first ("reader") or last ("writer")."""
    _start("racecheck")
    writer, reader = rt.create_stream(), rt.create_stream()
    device = rt.malloc(NBYTES)
    source, target = rt.malloc_host(NBYTES), rt.malloc_host(NBYTES)
    if gate is not None:
        rt.launch_host_func(reader if gated == "reader" else writer, gate.task)
    rt.memcpy_async(device, NBYTES, source, NBYTES, H2D, writer)  # RACE WRITE
    if with_event:
        event = rt.create_event()
        rt.record_event(event, writer)
        rt.stream_wait_event(reader, event)
    rt.memcpy_async(target, NBYTES, device, NBYTES, D2H, reader)  # RACE READ
    if gate is not None:
        rt.synchronize_stream(writer if gated == "reader" else reader)
        gate.open()
    rt.synchronize_device()
    return _finish()


def test_two_streams_without_an_event_race(gate):
    race, = _of(_two_streams_copy(with_event=False, gate=gate, gated="reader"), "race")
    assert _lines(race, "read") == [_line("RACE READ")]
    assert _lines(race, "previous write") == [_line("RACE WRITE")]
    assert "RAW" in race["message"] and race["size"] == NBYTES


def test_race_found_whichever_runs_first(gate):
    race, = _of(_two_streams_copy(with_event=False, gate=gate, gated="writer"), "race")
    assert "WAR" in race["message"]
    assert _lines(race, "write") == [_line("RACE WRITE")]
    assert _lines(race, "previous read") == [_line("RACE READ")]


def test_an_event_between_two_streams_orders_them(mode):
    del mode
    assert _of(_two_streams_copy(with_event=True), "race") == []


def test_synchronize_orders_the_host_after_a_stream(mode):
    _start("racecheck", mode)
    stream = rt.create_stream()
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    rt.memset_async(device, NBYTES, 1, NBYTES, stream)
    rt.synchronize_stream(stream)
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # ordered by the synchronize
    rt.memset_async(device, NBYTES, 2, NBYTES, stream)  # SYNC WRITE
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # UNSYNCED READ
    rt.synchronize_stream(stream)
    race, = _of(_finish(), "race")  # RAW or WAR, as the two happened to run
    assert sorted(_lines(race)) == [_line("SYNC WRITE"), _line("UNSYNCED READ")]


def test_a_query_that_finds_the_work_done_orders_the_host(gate):
    _start("racecheck")
    stream = rt.create_stream()
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    rt.launch_host_func(stream, gate.task)
    rt.memset_async(device, NBYTES, 1, NBYTES, stream)
    event = rt.create_event()
    rt.record_event(event, stream)
    assert rt.query_event_status(event) == 0  # not ready: no order yet
    gate.open()
    deadline = time.monotonic() + WAIT_S
    while rt.query_event_status(event) != 1:
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # after the event completed: ordered
    rt.memset_async(device, NBYTES, 2, NBYTES, stream)
    while rt.stream_query(stream) != 0:
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # after the stream was seen idle
    assert _finish() == []


def test_aclnn_output_read_on_another_stream_races(gate):
    _start("racecheck")
    compute, copy = rt.create_stream(), rt.create_stream()
    rt.launch_host_func(copy, gate.task)  # the read runs after the write
    a = openacl.to_device(np.ones(8, np.float32))
    out = openacl.empty((8,), np.float32)
    size, executor = aclnn.add_get_workspace_size(a, a, None, out)
    aclnn.add(0, size, executor, compute)  # ACLNN WRITE
    host = rt.malloc_host(32)
    rt.memcpy_async(host, 32, out.data_ptr, 32, D2H, copy)  # ACLNN READ
    rt.synchronize_stream(compute)
    gate.open()
    rt.synchronize_device()
    race, = _of(_finish(), "race")
    assert _lines(race, "previous write") == [_line("ACLNN WRITE")]
    assert _lines(race, "read") == [_line("ACLNN READ")]


# -- initcheck ----------------------------------------------------------------------------------
def test_read_of_never_written_memory_and_none_after_a_memset(mode):
    _start("initcheck", mode)
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # UNINIT READ
    written = rt.malloc(NBYTES)
    rt.memset(written, NBYTES, 0, NBYTES)
    rt.memcpy(host, NBYTES, written, NBYTES, D2H)
    found, = _of(_finish(), "uninitialized_read")
    assert _lines(found, "read") == [_line("UNINIT READ")]
    assert found["allocation"]["address"] == device


def test_kernel_writes_of_zeros_count_as_writes():
    _start("initcheck,memcheck")
    stream = rt.create_stream()
    z = rt.malloc(64 * 4)
    host = rt.malloc_host(64 * 4)
    _disjoint[2, stream](z, 64)
    rt.memcpy_async(host, 64 * 4, z, 64 * 4, D2H, stream)
    rt.synchronize_stream(stream)
    assert _finish() == []


def test_writes_the_hooks_do_not_see_are_told_from_the_poison(host_addressable):
    _start("initcheck")
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    data = np.arange(NBYTES // 2, dtype=np.uint8)  # holds 0xA5, the poison, twice
    assert (data == sanitizer.POISON_BYTE).sum() == 2
    ptr_to_numpy(device, (NBYTES // 2,), np.uint8)[:] = data  # unhooked: a host view
    rt.memcpy(host, NBYTES // 2, device, NBYTES // 2, D2H)
    assert _of(sanitizer.findings(), "uninitialized_read") == []
    rt.memcpy(host, NBYTES, device, NBYTES, D2H)  # HALF WRITTEN
    found, = _of(_finish(), "uninitialized_read")
    assert found["address"] == device and "512 uninitialized byte(s)" in found["message"]
    assert _lines(found, "read") == [_line("HALF WRITTEN")]


# -- synccheck ----------------------------------------------------------------------------------
def _wait_for(kind: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not _of(sanitizer.findings(), kind):
        assert time.monotonic() < deadline, f"no {kind} finding"
        time.sleep(POLL_S)


def test_destroy_stream_with_queued_work(gate):
    _start("synccheck")
    stream = rt.create_stream()
    rt.launch_host_func(stream, gate.task)
    destroyer = threading.Thread(target=rt.destroy_stream, args=(stream,))
    destroyer.start()
    _wait_for("unsynchronized_destroy")
    gate.open()
    destroyer.join(WAIT_S)
    other = rt.create_stream()
    rt.synchronize_stream(other)
    rt.destroy_stream(other)  # drained: fine
    found, = _of(_finish(), "unsynchronized_destroy")
    assert "1 task(s)" in found["message"]


def test_wait_on_a_never_recorded_event():
    _start("synccheck")
    stream = rt.create_stream()
    event = rt.create_event()
    rt.stream_wait_event(stream, event)  # NEVER RECORDED
    rt.record_event(event, stream)
    rt.stream_wait_event(stream, event)
    rt.synchronize_stream(stream)
    found, = _of(_finish(), "unrecorded_event")
    assert _lines(found) == [_line("NEVER RECORDED")]


# -- correct programs ---------------------------------------------------------------------------
def test_add_custom_demo_flow_reports_nothing(monkeypatch):
    from openacl.cli import demo

    monkeypatch.setenv(sanitizer.ENV_VAR, ALL_TOOLS + ",leak-check")
    assert demo._add_custom_flow(lambda message: None)
    assert sanitizer.findings() == []


def test_every_example_reports_nothing(tmp_path):
    environ = {**os.environ, "PYTHON": sys.executable,
               sanitizer.ENV_VAR: ALL_TOOLS + ",leak-check",
               sanitizer.OUTPUT_ENV_VAR: str(tmp_path / "findings")}
    scripts = sorted(EXAMPLES.glob("*/run.sh"))
    assert len(scripts) >= 4
    for script in scripts:  # copies: run.sh rewrites its folder's input/ and output/
        folder = tmp_path / script.parent.name
        shutil.copytree(script.parent, folder, ignore=shutil.ignore_patterns("input",
                                                                             "output"))
        result = subprocess.run(["bash", str(folder / "run.sh")], env=environ,
                                capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        assert result.returncode == 0, result.stdout + result.stderr
    sessions, found = sanitizer.read_records(tmp_path / "findings")
    assert len(sessions) >= len(scripts) and found == []


# -- off: zero cost -----------------------------------------------------------------------------
def test_off_holds_no_state_and_reaches_no_hook(monkeypatch):
    def unreachable(*args, **kwargs):
        raise AssertionError("a sanitizer hook ran while the sanitizer was off")

    for name, value in vars(sanitizer).items():
        if inspect.isfunction(value) and value.__module__ == sanitizer.__name__ and \
                name not in ("start", "stop", "findings", "parse_spec", "spec_string"):
            monkeypatch.setattr(sanitizer, name, unreachable)
    openacl.init()
    rt.set_device(0)
    stream = rt.create_stream()
    z = rt.malloc(64 * 4)
    host = rt.malloc_host(64 * 4)
    _disjoint[2, stream](z, 64)
    event = rt.create_event()
    rt.record_event(event, stream)
    other = rt.create_stream()
    rt.stream_wait_event(other, event)
    rt.memcpy_async(host, 64 * 4, z, 64 * 4, D2H, other)
    a = openacl.to_device(np.ones(4, np.float32))
    size, executor = aclnn.add_get_workspace_size(a, a, None, a)
    aclnn.add(0, size, executor, other)
    rt.synchronize_stream(other)
    rt.query_event_status(event)
    ptr_to_numpy(host, (4,), np.float32)
    rt.free(z)
    with pytest.raises(openacl.AclError):
        rt.free(z)
    rt.free_host(host)
    a.free()
    rt.destroy_stream(stream)
    openacl.finalize()
    assert not sanitizer.active and sanitizer._state is None


# -- configuration -------------------------------------------------------------------------------
def test_spec_syntax():
    assert sanitizer.parse_spec("") == sanitizer.Options(frozenset({"memcheck"}), False)
    assert sanitizer.parse_spec("racecheck, leak-check=yes") == sanitizer.Options(
        frozenset({"racecheck"}), True)
    assert sanitizer.parse_spec(["initcheck", "synccheck", "leak-check=no"]).tools == {
        "initcheck", "synccheck"}
    with pytest.raises(ValueError, match="not a sanitizer tool"):
        sanitizer.parse_spec("memchek")
    with pytest.raises(openacl.AclError, match="sanitize"):
        openacl.init({"sanitize": "memchek"})


def test_findings_go_to_the_output_directory_as_json_lines(tmp_path, monkeypatch):
    monkeypatch.setenv(sanitizer.OUTPUT_ENV_VAR, str(tmp_path))
    _start("memcheck")
    with pytest.raises(openacl.AclError):
        rt.free(0x1234)
    _finish()
    files = [name for name in os.listdir(tmp_path) if sanitizer.is_records_file(name)]
    assert len(files) == 1
    records = [json.loads(line) for line in (tmp_path / files[0]).read_text().splitlines()]
    assert records[0]["type"] == "session" and records[0]["tools"] == ["memcheck"]
    assert [r["kind"] for r in records[1:]] == ["illegal_free"]


# -- the command -------------------------------------------------------------------------------
def _sanitize(tmp_path: Path, source: str, *options: str) -> subprocess.CompletedProcess:
    program = tmp_path / "app.py"
    program.write_text(source)
    return subprocess.run([sys.executable, "-m", "openacl.cli.main", "sanitize", *options,
                           "--", str(program)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


CLEAN = """
import openacl
from openacl import rt
openacl.init()
rt.set_device(0)
p = rt.malloc(64)
rt.memset(p, 64, 0, 64)
rt.free(p)
openacl.finalize()
"""
LEAKY = CLEAN.replace("rt.free(p)\n", "")
WRONG_KIND = CLEAN.replace("rt.free(p)\n", "h = rt.malloc_host(64)\n"
                                           "rt.memcpy(h, 64, p, 64, 1)\nrt.free(p)\n")


def test_cli_exit_statuses_and_log_file(tmp_path):
    clean = _sanitize(tmp_path, CLEAN, "--leak-check", "yes")
    assert clean.returncode == 0, clean.stderr
    assert "1 process(es) checked" in clean.stderr and "0 error(s)" in clean.stderr
    leaky = _sanitize(tmp_path, LEAKY, "--leak-check", "yes")
    assert leaky.returncode == 1
    assert "====== ERROR: leak" in leaky.stderr and "app.py:6" in leaky.stderr
    assert _sanitize(tmp_path, LEAKY).returncode == 0  # leak-check defaults to no
    log = tmp_path / "report.txt"
    warned = _sanitize(tmp_path, WRONG_KIND, "--log-file", str(log))
    assert warned.returncode == 1 and "WARNING: memcpy direction" in log.read_text()
    assert "memcpy direction" not in warned.stderr
    quiet = _sanitize(tmp_path, WRONG_KIND, "--log-level", "error")
    assert quiet.returncode == 0, quiet.stderr
    failed = _sanitize(tmp_path, LEAKY + "raise SystemExit(3)\n", "--leak-check", "yes")
    assert failed.returncode == 3


def test_cli_without_a_program(tmp_path):
    result = subprocess.run([sys.executable, "-m", "openacl.cli.main", "sanitize", "--"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 2 and "no program after '--'" in result.stderr
    bad = subprocess.run([sys.executable, "-m", "openacl.cli.main", "sanitize", "--tool",
                          "nocheck", "--", "x.py"], capture_output=True, text=True,
                         timeout=RUN_TIMEOUT_S)
    assert bad.returncode == 2


def _report_once(seen: threading.Event) -> None:
    """A report thread: run the first callback delivered to it."""
    deadline = time.monotonic() + WAIT_S
    while not seen.is_set() and time.monotonic() < deadline:
        try:
            rt.process_report(int(POLL_S * 1000))
        except openacl.AclError:
            continue


def test_host_callbacks_run_in_their_tasks_place():
    _start("racecheck,initcheck")
    stream = rt.create_stream()
    device = rt.malloc(NBYTES)
    host = rt.malloc_host(NBYTES)
    seen = threading.Event()

    def callback(_: object) -> None:  # reads what the stream wrote before it: ordered
        rt.memcpy(host, NBYTES, device, NBYTES, D2H)
        seen.set()

    reporter = threading.Thread(target=_report_once, args=(seen,))
    reporter.start()
    rt.subscribe_report(reporter.ident, stream)
    rt.memset_async(device, NBYTES, 3, NBYTES, stream)
    rt.launch_callback(callback, None, 1, stream)  # ACL_CALLBACK_BLOCK
    rt.synchronize_stream(stream)
    reporter.join(WAIT_S)
    rt.unsubscribe_report(reporter.ident, stream)
    assert seen.is_set() and _finish() == []


# -- aclop executions and model runs ---------------------------------------------------------------
def _aclop_add_then_read(with_event: bool, gate=None) -> list[dict]:
    """An aclop Add on one stream and a read of its output on another (held by ``gate``
    until the Add has run), ordered by an event or not."""
    from openacl import op

    _start("racecheck,initcheck")
    compute, copy = rt.create_stream(), rt.create_stream()
    if gate is not None:
        rt.launch_host_func(copy, gate.task)
    a = openacl.to_device(np.ones(8, np.float32))
    out = openacl.empty((8,), np.float32)
    desc = openacl.create_tensor_desc(np.float32, [8], openacl.Format.ACL_FORMAT_ND)
    x = openacl.create_data_buffer(a.data_ptr, a.nbytes)
    y = openacl.create_data_buffer(out.data_ptr, out.nbytes)
    op.execute_v2("Add", [desc, desc], [x, x], [desc], [y], None, compute)  # ACLOP WRITE
    if with_event:
        event = rt.create_event()
        rt.record_event(event, compute)
        rt.stream_wait_event(copy, event)
    host = rt.malloc_host(out.nbytes)
    rt.memcpy_async(host, out.nbytes, out.data_ptr, out.nbytes, D2H, copy)  # ACLOP READ
    if gate is not None:
        rt.synchronize_stream(compute)
        gate.open()
    rt.synchronize_device()
    return _finish()


def test_aclop_output_read_on_another_stream_races(gate):
    race, = _of(_aclop_add_then_read(with_event=False, gate=gate), "race")
    assert "RAW" in race["message"] and race["size"] == 32
    assert _lines(race, "previous write") == [_line("ACLOP WRITE")]
    assert _lines(race, "read") == [_line("ACLOP READ")]


def test_aclop_output_read_after_an_event_is_ordered(mode):
    del mode
    assert _aclop_add_then_read(with_event=True) == []


def _transpose_with_perm_written_on_a_stream(synchronize: bool) -> list[dict]:
    """Transpose's ``perm`` (a value input, read on the host at execute_v2) copied in on a
    stream; the host waits for the copy by a plain threading event (no happens-before) or by
    synchronizing the stream."""
    from openacl import op

    _start("racecheck,initcheck")
    stream = rt.create_stream()
    x = openacl.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = openacl.empty((3, 2), np.float32)
    perm = np.array([1, 0], np.int64)
    device_perm = rt.malloc(perm.nbytes)
    source = _pinned(perm)
    rt.memcpy_async(device_perm, perm.nbytes, source, perm.nbytes, H2D, stream)  # PERM WRITE
    copied = threading.Event()
    rt.launch_host_func(stream, copied.set)
    assert copied.wait(WAIT_S)  # it ran, but the sanitizer is not told
    if synchronize:
        rt.synchronize_stream(stream)
    descs = [openacl.create_tensor_desc(np.float32, [2, 3], openacl.Format.ACL_FORMAT_ND),
             openacl.create_tensor_desc(np.int64, [2], openacl.Format.ACL_FORMAT_ND)]
    out_desc = openacl.create_tensor_desc(np.float32, [3, 2], openacl.Format.ACL_FORMAT_ND)
    buffers = [openacl.create_data_buffer(x.data_ptr, x.nbytes),
               openacl.create_data_buffer(device_perm, perm.nbytes)]
    y = openacl.create_data_buffer(out.data_ptr, out.nbytes)
    op.execute_v2("Transpose", descs, buffers, [out_desc], [y], None, stream)  # PERM READ
    rt.synchronize_stream(stream)
    np.testing.assert_array_equal(out.numpy(), np.arange(6).reshape(2, 3).T)
    return _finish()


def _pinned(array: np.ndarray) -> int:
    """A pinned host copy of ``array``: its address."""
    host = rt.malloc_host(array.nbytes)
    ptr_to_numpy(host, array.shape, array.dtype)[...] = array
    return host


def test_aclop_value_input_read_on_the_host_races_with_its_stream_writer():
    race, = _of(_transpose_with_perm_written_on_a_stream(synchronize=False), "race")
    assert "RAW" in race["message"] and race["size"] == 16
    assert _lines(race, "previous write") == [_line("PERM WRITE")]
    assert _lines(race, "read") == [_line("PERM READ")]


def test_aclop_value_input_read_after_a_synchronize_is_ordered():
    assert _transpose_with_perm_written_on_a_stream(synchronize=True) == []


def _relu_model(tmp_path: Path) -> str:
    from onnx import TensorProto, helper

    from openacl.model import om
    from openacl.model.lowering import lower
    from openacl.model.onnx_import import import_onnx
    from openacl.model.plan import plan_memory

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    lowered = lower(import_onnx(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)])))
    path = tmp_path / "relu.om"
    om.save_model(lowered, plan_memory(lowered), path)
    return str(path)


def _model_run_then_read(tmp_path: Path, with_event: bool, gate=None) -> list[dict]:
    from openacl import mdl

    path = _relu_model(tmp_path)
    _start("racecheck,initcheck")
    run, copy = rt.create_stream(), rt.create_stream()
    if gate is not None:
        rt.launch_host_func(copy, gate.task)
    model = mdl.load_from_file(path)
    x, y = rt.malloc(32), rt.malloc(32)
    rt.memset(x, 32, 0, 32)
    inputs, outputs = mdl.create_dataset(), mdl.create_dataset()
    mdl.add_dataset_buffer(inputs, openacl.create_data_buffer(x, 32))
    mdl.add_dataset_buffer(outputs, openacl.create_data_buffer(y, 32))
    mdl.execute_async(model, inputs, outputs, run)  # MODEL WRITE
    if with_event:
        event = rt.create_event()
        rt.record_event(event, run)
        rt.stream_wait_event(copy, event)
    host = rt.malloc_host(32)
    rt.memcpy_async(host, 32, y, 32, D2H, copy)  # MODEL READ
    if gate is not None:
        rt.synchronize_stream(run)
        gate.open()
    rt.synchronize_device()
    mdl.unload(model)
    return _finish()


def test_model_output_read_on_another_stream_races(gate, tmp_path):
    race, = _of(_model_run_then_read(tmp_path, with_event=False, gate=gate), "race")
    assert "RAW" in race["message"] and race["size"] == 32
    assert _lines(race, "previous write") == [_line("MODEL WRITE")]
    assert _lines(race, "read") == [_line("MODEL READ")]


def test_model_output_read_after_an_event_is_ordered(tmp_path):
    assert _model_run_then_read(tmp_path, with_event=True) == []
