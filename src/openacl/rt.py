"""The runtime functions by pyACL's names (``acl.rt.*``), in the Pythonic convention:
outputs are returned directly and failures raise ``openacl.AclError``.

Each function lives in the runtime module that owns its concept; this module only gathers
them under the namespace pyACL users know.
"""

from __future__ import annotations

from openacl._api import module_dir
from openacl.constants import ACL_HOST
from openacl.errors import expose
from openacl.runtime import core
from openacl.runtime.callback import (
    launch_callback,
    process_report,
    subscribe_report,
    unsubscribe_report,
)
from openacl.runtime.context import create_context, destroy_context, get_context, set_context
from openacl.runtime.device import (
    get_device,
    get_device_count,
    reset_device,
    reset_device_force,
    set_device,
    synchronize_device,
    synchronize_device_with_timeout,
)
from openacl.runtime.event import (
    create_event,
    create_event_with_flag,
    destroy_event,
    event_elapsed_time,
    query_event,
    query_event_status,
    record_event,
    reset_event,
    stream_wait_event,
    synchronize_event,
    synchronize_event_with_timeout,
)
from openacl.runtime.memory import (
    empty_cache,
    free,
    free_host,
    get_mem_info,
    malloc,
    malloc_host,
    memcpy,
    memcpy_async,
    memory_stats,
    memset,
    memset_async,
    record_stream,
)
from openacl.runtime.stream import (
    create_stream,
    destroy_stream,
    destroy_stream_force,
    launch_host_func,
    query_stream,
    stream_query,
    synchronize_stream,
    synchronize_stream_with_timeout,
)

malloc_cached = malloc  # aclrtMallocCached: the CPU backend has no cache-coherence choice


def get_run_mode() -> int:
    """``ACL_HOST`` (1): OpenACL programs always run on the host side."""
    core.current()
    return ACL_HOST


def get_soc_name() -> str:
    """A name for the backend's chip, in the place aclrtGetSocName reports the SoC."""
    return f"OpenACL-{core.current().backend.name.upper()}"


__all__ = [
    "create_context", "create_event", "create_event_with_flag", "create_stream",
    "destroy_context", "destroy_event", "destroy_stream", "destroy_stream_force",
    "empty_cache", "event_elapsed_time", "free", "free_host", "get_context", "get_device",
    "get_device_count", "get_mem_info", "get_run_mode", "get_soc_name", "launch_callback",
    "launch_host_func", "malloc", "malloc_cached", "malloc_host", "memcpy", "memcpy_async",
    "memory_stats", "memset", "memset_async", "process_report", "query_event",
    "query_event_status", "query_stream", "record_event", "record_stream", "reset_device",
    "reset_device_force", "reset_event", "set_context", "set_device", "stream_query",
    "stream_wait_event", "subscribe_report", "synchronize_device",
    "synchronize_device_with_timeout", "synchronize_event",
    "synchronize_event_with_timeout", "synchronize_stream",
    "synchronize_stream_with_timeout", "unsubscribe_report",
]
expose(globals(), __all__)  # an AclError leaving one records the recent error message

__dir__ = module_dir(globals())
