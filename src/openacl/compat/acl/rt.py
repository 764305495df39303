"""``acl.rt``: every runtime function by pyACL's name and return shape.

Generated from one table over ``openacl.rt`` (the Pythonic runtime); see ``_face`` for the
shapes. ``stream, ret = acl.rt.create_stream()``, ``ret = acl.rt.memcpy(dst, dest_max, src,
count, kind)``, ``free, total, ret = acl.rt.get_mem_info(attr)``...

Callbacks follow pyACL's thread model: a thread (usually from ``acl.util.start_thread``)
loops on ``acl.rt.process_report(timeout)``; ``acl.rt.subscribe_report(thread_id, stream)``
binds it to a stream; ``acl.rt.launch_callback(fn, user_data, block_type, stream)`` makes
that thread call ``fn(user_data)`` when the stream reaches it. The invariants are in
``openacl.runtime.callback``.

As strict as CANN documents, no stricter: the ``kind`` of ``memcpy`` is checked as an enum
and the direction is taken from the pointers (a host buffer passed with
``ACL_MEMCPY_DEVICE_TO_HOST`` works); destroying a context destroys the streams still in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openacl import rt as _rt
from openacl._api import module_dir
from openacl.compat.acl import constants as _constants
from openacl.compat.acl._face import RET, VALUE, generate, outputs


def _launch_host_func(stream: int, fn: Callable[[Any], None], args: Any) -> None:
    """aclrtLaunchHostFunc(stream, fn, args): ``fn(args)`` on the stream's timeline."""
    _rt.launch_host_func(stream, fn, args)


_TABLE = [
    # devices
    ("set_device", _rt.set_device, RET),
    ("reset_device", _rt.reset_device, RET),
    ("reset_device_force", _rt.reset_device_force, RET),
    ("get_device", _rt.get_device, outputs("device_id")),
    ("get_device_count", _rt.get_device_count, outputs("count")),
    ("synchronize_device", _rt.synchronize_device, RET),
    ("synchronize_device_with_timeout", _rt.synchronize_device_with_timeout, RET),
    ("get_run_mode", _rt.get_run_mode, outputs("run_mode")),
    ("get_soc_name", _rt.get_soc_name, VALUE(None)),
    # contexts
    ("create_context", _rt.create_context, outputs("context")),
    ("destroy_context", _rt.destroy_context, RET),
    ("set_context", _rt.set_context, RET),
    ("get_context", _rt.get_context, outputs("context")),
    # streams
    ("create_stream", _rt.create_stream, outputs("stream")),
    ("destroy_stream", _rt.destroy_stream, RET),
    ("destroy_stream_force", _rt.destroy_stream_force, RET),
    ("synchronize_stream", _rt.synchronize_stream, RET),
    ("synchronize_stream_with_timeout", _rt.synchronize_stream_with_timeout, RET),
    ("stream_query", _rt.stream_query, outputs("status")),
    ("query_stream", _rt.query_stream, outputs("status")),
    ("launch_host_func", _launch_host_func, RET),
    # events
    ("create_event", _rt.create_event, outputs("event")),
    ("create_event_with_flag", _rt.create_event_with_flag, outputs("event")),
    ("destroy_event", _rt.destroy_event, RET),
    ("record_event", _rt.record_event, RET),
    ("reset_event", _rt.reset_event, RET),
    ("stream_wait_event", _rt.stream_wait_event, RET),
    ("synchronize_event", _rt.synchronize_event, RET),
    ("synchronize_event_with_timeout", _rt.synchronize_event_with_timeout, RET),
    ("query_event", _rt.query_event, outputs("status")),
    ("query_event_status", _rt.query_event_status, outputs("status")),
    ("event_elapsed_time", _rt.event_elapsed_time, outputs("time_ms", failure=(0.0,))),
    # memory
    ("malloc", _rt.malloc, outputs("dev_ptr")),
    ("malloc_cached", _rt.malloc_cached, outputs("dev_ptr")),
    ("malloc_host", _rt.malloc_host, outputs("host_ptr")),
    ("free", _rt.free, RET),
    ("free_host", _rt.free_host, RET),
    ("memcpy", _rt.memcpy, RET),
    ("memcpy_async", _rt.memcpy_async, RET),
    ("memset", _rt.memset, RET),
    ("memset_async", _rt.memset_async, RET),
    ("get_mem_info", _rt.get_mem_info, outputs("free", "total")),
    ("record_stream", _rt.record_stream, RET),
    ("memory_stats", _rt.memory_stats, outputs("stats", failure=({},))),
    ("empty_cache", _rt.empty_cache, outputs("released_bytes")),
    # host callbacks
    ("subscribe_report", _rt.subscribe_report, RET),
    ("unsubscribe_report", _rt.unsubscribe_report, RET),
    ("launch_callback", _rt.launch_callback, RET),
    ("process_report", _rt.process_report, RET),
]

FUNCTIONS = generate(_TABLE, globals())

for _name in _constants.ACL_NAMES:
    globals()[_name] = getattr(_constants, _name)

__all__ = [*FUNCTIONS, *_constants.ACL_NAMES]
del _name

__dir__ = module_dir(globals())
