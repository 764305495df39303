"""Event conformance: cross-stream ordering, re-recording, queries, timing, flags, lifetime.

Gates force the overlaps. ``inline`` runs each task on the submitting thread, so there the
gate is opened before it is submitted and the "while held" assertions are skipped;
``deterministic`` runs every stream on one worker in submission order, so a closed gate
holds every stream, which the assertions below allow for.
"""

from __future__ import annotations

import time

import pytest

import openacl
from openacl import rt
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
    AclError,
)

STREAM_COMPLETE, STREAM_NOT_READY = 0, 1  # aclrtStreamStatus
RECORDED_COMPLETE, RECORDED_NOT_READY = 1, 0  # aclrtEventRecordedStatus
LEGACY_COMPLETE, LEGACY_NOT_READY = 0, 1  # aclrtEventStatus (aclrtQueryEvent)
SHORT_TIMEOUT_MS = 50  # a wait that must time out waits this long
SETTLE_TIMEOUT_MS = 2000  # a wait that must succeed gets this long
SLEEP_S = 0.05  # work between two timing events


def hold(runtime: str, gate, stream) -> None:
    """Enqueue ``gate.task`` on ``stream``; in inline mode the gate opens first (see top)."""
    if runtime == "inline":
        gate.open()
    rt.launch_host_func(stream, gate.task)


def skip_inline(runtime: str) -> None:
    if runtime == "inline":
        pytest.skip("inline mode runs every task at submission: nothing is ever pending")


# -- cross-stream ordering ---------------------------------------------------------------------
def test_wait_event_orders_streams_across_a_gate(runtime, gate):
    a, b = rt.create_stream(), rt.create_stream()
    event = rt.create_event()
    ran: list[str] = []
    hold(runtime, gate, a)
    rt.record_event(event, a)
    rt.stream_wait_event(b, event)
    rt.launch_host_func(b, ran.append, "b")
    if runtime != "inline":
        with pytest.raises(AclError) as info:  # gives B 50 ms to run too early
            rt.synchronize_stream_with_timeout(b, SHORT_TIMEOUT_MS)
        assert info.value.code == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert ran == []
        assert rt.stream_query(b) == STREAM_NOT_READY
        assert rt.query_event_status(event) == RECORDED_NOT_READY
        assert rt.query_event(event) == LEGACY_NOT_READY
    gate.open()
    rt.synchronize_stream_with_timeout(b, SETTLE_TIMEOUT_MS)
    assert ran == ["b"]
    assert rt.stream_query(b) == STREAM_COMPLETE
    assert rt.query_event_status(event) == RECORDED_COMPLETE
    assert rt.query_event(event) == LEGACY_COMPLETE


def test_rerecord_after_wait_does_not_change_what_was_waited_on(runtime, gate):
    # B is held by its own gate until E has been re-recorded behind A's closed gate, so a
    # wait that read the event late would wait for A's gate.
    gate_b = type(gate)()
    a, b = rt.create_stream(), rt.create_stream()
    event = rt.create_event()
    ran: list[str] = []
    try:
        hold(runtime, gate_b, b)
        rt.record_event(event, a)  # point 1
        rt.stream_wait_event(b, event)
        rt.launch_host_func(b, ran.append, "b")
        hold(runtime, gate, a)
        rt.record_event(event, a)  # point 2, behind the closed gate
        gate_b.open()
        rt.synchronize_stream_with_timeout(b, SETTLE_TIMEOUT_MS)
        assert ran == ["b"]
        if runtime != "inline":
            assert rt.query_event_status(event) == RECORDED_NOT_READY  # now means point 2
    finally:
        gate_b.open()
    gate.open()
    rt.synchronize_event_with_timeout(event, SETTLE_TIMEOUT_MS)


def test_wait_on_never_recorded_event_is_a_no_op(runtime):
    stream = rt.create_stream()
    event = rt.create_event()
    ran: list[int] = []
    rt.stream_wait_event(stream, event)
    rt.launch_host_func(stream, ran.append, 1)
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert ran == [1]


def test_record_and_wait_on_default_stream(runtime):
    stream = rt.create_stream()
    event = rt.create_event()
    ran: list[str] = []
    rt.launch_host_func(0, ran.append, "default")
    rt.record_event(event, 0)
    rt.stream_wait_event(stream, event)
    rt.launch_host_func(stream, ran.append, "other")
    rt.synchronize_stream_with_timeout(stream, SETTLE_TIMEOUT_MS)
    assert ran == ["default", "other"]
    rt.synchronize_event(event)
    assert rt.query_event_status(event) == RECORDED_COMPLETE


# -- queries -----------------------------------------------------------------------------------
def test_event_queries_before_during_and_after(runtime, gate):
    stream = rt.create_stream()
    event = rt.create_event()
    assert rt.query_event_status(event) == RECORDED_COMPLETE  # never recorded
    assert rt.query_event(event) == LEGACY_COMPLETE
    hold(runtime, gate, stream)
    rt.record_event(event, stream)
    if runtime != "inline":
        assert rt.query_event_status(event) == RECORDED_NOT_READY
        assert rt.query_event(event) == LEGACY_NOT_READY
    gate.open()
    rt.synchronize_event(event)
    assert rt.query_event_status(event) == RECORDED_COMPLETE
    assert rt.query_event(event) == LEGACY_COMPLETE


# -- timing ------------------------------------------------------------------------------------
def test_elapsed_time_covers_the_work_between_records(runtime):
    stream = rt.create_stream()
    start, end = rt.create_event(), rt.create_event()
    rt.record_event(start, stream)
    rt.launch_host_func(stream, time.sleep, SLEEP_S)
    rt.record_event(end, stream)
    rt.synchronize_event(end)
    elapsed_ms = rt.event_elapsed_time(start, end)
    assert elapsed_ms >= SLEEP_S * 1000 * 0.9
    assert rt.event_elapsed_time(start, start) == 0


def test_elapsed_time_with_event_objects(runtime):
    with openacl.Stream() as stream:
        start = stream.record()
        stream.launch_host_func(time.sleep, SLEEP_S)
        end = stream.record()
        end.synchronize(SETTLE_TIMEOUT_MS)
        assert start.done() and end.done()
        assert start.elapsed_time(end) >= SLEEP_S * 1000 * 0.9
        start.destroy()
        end.destroy()


def test_elapsed_time_of_never_recorded_event(runtime):
    recorded, never = rt.create_event(), rt.create_event()
    rt.record_event(recorded, 0)
    rt.synchronize_event(recorded)
    for args, argument in (((never, recorded), "'start'"), ((recorded, never), "'end'")):
        with pytest.raises(AclError) as info:
            rt.event_elapsed_time(*args)
        assert info.value.code == ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
        assert argument in info.value.message


def test_elapsed_time_of_incomplete_event(runtime, gate):
    skip_inline(runtime)
    stream = rt.create_stream()
    start, end = rt.create_event(), rt.create_event()
    rt.record_event(start, stream)
    rt.launch_host_func(stream, gate.task)
    rt.record_event(end, stream)
    with pytest.raises(AclError) as info:
        rt.event_elapsed_time(start, end)
    assert info.value.code == ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
    gate.open()
    rt.synchronize_event(end)
    assert rt.event_elapsed_time(start, end) >= 0


# -- synchronize with timeout ------------------------------------------------------------------
def test_event_sync_times_out(runtime, gate):
    skip_inline(runtime)
    stream = rt.create_stream()
    event = rt.create_event()
    rt.launch_host_func(stream, gate.task)
    rt.record_event(event, stream)
    begin = time.monotonic()
    with pytest.raises(AclError) as info:
        rt.synchronize_event_with_timeout(event, SHORT_TIMEOUT_MS)
    assert info.value.code == ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    assert time.monotonic() - begin < SETTLE_TIMEOUT_MS / 1000
    gate.open()
    rt.synchronize_event_with_timeout(event, -1)


@pytest.mark.parametrize("timeout", [-2, "x", None])
def test_event_sync_invalid_timeout(runtime, timeout):
    event = rt.create_event()
    with pytest.raises(AclError) as info:
        rt.synchronize_event_with_timeout(event, timeout)
    assert info.value.code == ACL_ERROR_INVALID_PARAM


# -- creation, reset, destruction --------------------------------------------------------------
@pytest.mark.parametrize("flag", [0x1, 0x2, 0x8, 0x20, 0x1 | 0x8, 0x2 | 0x20, 0x2B])
def test_create_event_with_valid_flags(runtime, flag):
    event = rt.create_event_with_flag(flag)
    rt.record_event(event, 0)
    rt.synchronize_event(event)
    rt.destroy_event(event)


@pytest.mark.parametrize("flag", [0, 0x4, 0x100, 0x8 | 0x4, -1, "x", None])
def test_create_event_with_invalid_flags(runtime, flag):
    with pytest.raises(AclError) as info:
        rt.create_event_with_flag(flag)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'flag'" in info.value.message


def test_reset_event_returns_it_to_never_recorded(runtime, gate):
    a, b = rt.create_stream(), rt.create_stream()
    event = rt.create_event()
    ran: list[int] = []
    hold(runtime, gate, a)
    rt.record_event(event, a)
    rt.reset_event(event, a)
    assert rt.query_event_status(event) == RECORDED_COMPLETE
    assert rt.query_event(event) == LEGACY_COMPLETE
    rt.synchronize_event_with_timeout(event, SHORT_TIMEOUT_MS)  # nothing to wait for
    with pytest.raises(AclError) as info:
        rt.event_elapsed_time(event, event)
    assert info.value.code == ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
    rt.stream_wait_event(b, event)  # a no-op
    rt.launch_host_func(b, ran.append, 1)
    if runtime == "threaded":  # deterministic holds every stream behind the gate
        rt.synchronize_stream_with_timeout(b, SETTLE_TIMEOUT_MS)
        assert ran == [1]
    gate.open()
    rt.synchronize_stream_with_timeout(b, SETTLE_TIMEOUT_MS)
    assert ran == [1]


EVENT_CALLS = {
    "record": lambda e: rt.record_event(e, 0),
    "reset": lambda e: rt.reset_event(e, 0),
    "query_status": rt.query_event_status,
    "query": rt.query_event,
    "synchronize": rt.synchronize_event,
    "wait": lambda e: rt.stream_wait_event(0, e),
    "destroy": rt.destroy_event,
}


@pytest.mark.parametrize("call", EVENT_CALLS.values(), ids=EVENT_CALLS.keys())
def test_destroyed_event_is_rejected(runtime, call):
    event = rt.create_event()
    rt.record_event(event, 0)
    rt.destroy_event(event)
    with pytest.raises(AclError) as info:
        call(event)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "'event'" in info.value.message


def test_stream_handle_passed_as_event_names_the_kind(runtime):
    stream = rt.create_stream()
    with pytest.raises(AclError) as info:
        rt.synchronize_event(stream)
    assert info.value.code == ACL_ERROR_INVALID_PARAM
    assert "Stream" in info.value.message
