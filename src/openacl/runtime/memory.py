"""Memory API: device and host allocation, copies, fills, registration and statistics.

Design note (invariants)
------------------------
* Every pointer argument is resolved through the pointer table (``pointer_table.py``)
  before anything happens; bad pointers and lengths fail synchronously, with the
  argument's name, and never reach a stream.
* Device memory comes from the device's caching allocator (``allocator.py``), host memory
  from the runtime's pinned-host allocator. A malloc belongs to the calling thread's
  current stream (stream-ordered reuse). Async work that touches an allocation on another
  stream records that stream on the block automatically, so a free while that work is
  queued keeps the block out of reuse until the work has run.
* Queued work captures the byte views it touches (and, for registered buffers, a strong
  reference to the owner), so memory a task will touch stays alive until the task runs,
  even if the user frees or drops it first: no crash, no write into reused host memory.
* ``memcpy``/``memset`` are synchronous and, as in CANN, not ordered with stream work:
  synchronize the stream first. The ``kind`` is checked as an enum; the direction is taken
  from the pointers (CANN treats it the same way for ``aclrtMemcpy``).
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_STREAM_CONTEXT, AclError
from openacl.runtime import core, profiler, sanitizer
from openacl.runtime.context import current_context
from openacl.runtime.device import device as device_of
from openacl.runtime.pointer_table import MemoryKind, Region, as_address
from openacl.runtime.stream import Stream, resolve_stream

# aclrtMemMallocPolicy: base policies, plus the memory-type bits that may be OR-ed in
MALLOC_POLICIES = {
    0: "ACL_MEM_MALLOC_HUGE_FIRST",
    1: "ACL_MEM_MALLOC_HUGE_ONLY",
    2: "ACL_MEM_MALLOC_NORMAL_ONLY",
    3: "ACL_MEM_MALLOC_HUGE_FIRST_P2P",
    4: "ACL_MEM_MALLOC_HUGE_ONLY_P2P",
    5: "ACL_MEM_MALLOC_NORMAL_ONLY_P2P",
    6: "ACL_MEM_MALLOC_HUGE1G_ONLY",
    7: "ACL_MEM_MALLOC_HUGE1G_ONLY_P2P",
}
MALLOC_POLICY_TYPE_BITS = 0x0100 | 0x1000  # ACL_MEM_TYPE_LOW_BAND_WIDTH, _HIGH_BAND_WIDTH
MALLOC_POLICY_BASE_MASK = 0xFF
ACL_MEM_MALLOC_HUGE_FIRST = 0

MEMCPY_KINDS = {
    0: "ACL_MEMCPY_HOST_TO_HOST",
    1: "ACL_MEMCPY_HOST_TO_DEVICE",
    2: "ACL_MEMCPY_DEVICE_TO_HOST",
    3: "ACL_MEMCPY_DEVICE_TO_DEVICE",
    4: "ACL_MEMCPY_DEFAULT",
}

# aclrtMemAttr: which memory get_mem_info reports on (DDR: host, HBM: device)
MEM_ATTRS = {
    0: "ACL_DDR_MEM", 1: "ACL_HBM_MEM", 2: "ACL_DDR_MEM_HUGE", 3: "ACL_DDR_MEM_NORMAL",
    4: "ACL_HBM_MEM_HUGE", 5: "ACL_HBM_MEM_NORMAL", 6: "ACL_DDR_MEM_P2P_HUGE",
    7: "ACL_DDR_MEM_P2P_NORMAL", 8: "ACL_HBM_MEM_P2P_HUGE", 9: "ACL_HBM_MEM_P2P_NORMAL",
}
HOST_MEM_ATTRS = frozenset({0, 2, 3, 6, 7})
MAX_HELD_BUFFERS = 4096  # registrations of non-numpy buffers kept alive at once
MAX_HELD_BYTES = 1 << 30  # bytes those registrations may hold alive at once
BYTE_MASK = 0xFF


def _current_device():
    return current_context().device


def _stream_of_current_device(stream: object) -> Stream:
    """The stream argument of async memory work; CANN refuses a stream of another device."""
    target = resolve_stream(stream)
    device = _current_device()
    if target.device is not device:
        raise AclError(ACL_ERROR_RT_STREAM_CONTEXT,
                       f"argument 'stream' = {target.handle:#x} belongs to device "
                       f"{target.device.id}, but the current device is {device.id}")
    return target


def _check_policy(policy: object) -> int:
    value = core.as_index(policy)
    value = -1 if value is None else value
    base = value & MALLOC_POLICY_BASE_MASK if value >= 0 else -1
    extra = value & ~MALLOC_POLICY_BASE_MASK if value >= 0 else 0
    if base not in MALLOC_POLICIES or extra & ~MALLOC_POLICY_TYPE_BITS:
        names = ", ".join(f"{n}={v}" for v, n in MALLOC_POLICIES.items())
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'policy' = {policy!r} is invalid: expected one of {names}, "
                       f"optionally with ACL_MEM_TYPE_LOW_BAND_WIDTH/HIGH_BAND_WIDTH bits")
    return value


# -- allocation ---------------------------------------------------------------------------------
def malloc(size: int, policy: int = ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    """Allocate ``size`` bytes of device memory on the current device (aclrtMalloc).

    The address is aligned to at least 512 bytes. Raises ``ACL_ERROR_RT_MEMORY_ALLOCATION``
    with size, in-use and limit when the device is out of memory.
    """
    size = core.check_size(size, "size")
    _check_policy(policy)
    core.drain_deferred()
    device = _current_device()
    stream = resolve_stream(None)
    block = device.allocator.malloc(size, stream)
    try:
        buffer = device.runtime.backend.view(block.segment.handle, block.offset, size)
        region = Region(block.address, size, MemoryKind.DEVICE, buffer, device=device.id)
        device.runtime.pointers.add(region)
    except BaseException:
        device.allocator.free(block.address)
        raise
    if sanitizer.active:  # poisoned and shadowed (sanitizer.py)
        sanitizer.on_malloc(region, device.runtime.backend)
    return block.address


def free(dev_ptr: int) -> None:
    """Free device memory from ``malloc`` (aclrtFree); double frees are errors.

    Called from a garbage-collector finalizer while the runtime's tables are busy on this
    thread, the free is deferred to the next memory call (see ``core.run_or_defer``).
    """
    runtime = core.current()
    if runtime.busy():
        runtime.deferred.append(lambda: free(dev_ptr))
        return
    core.drain_deferred(runtime)
    try:
        region = runtime.pointers.remove(dev_ptr, "devPtr", MemoryKind.DEVICE)
    except AclError as exc:
        if sanitizer.active:  # an illegal or double free, reported with its call sites
            sanitizer.on_free(dev_ptr, None, exc)
        raise
    if sanitizer.active:
        sanitizer.on_free(dev_ptr, region)
    runtime.devices[region.device].allocator.free(region.start)


def malloc_host(size: int) -> int:
    """Allocate ``size`` bytes of page-locked host memory (aclrtMallocHost)."""
    size = core.check_size(size, "size")
    runtime = core.current()
    core.drain_deferred(runtime)
    block = runtime.host_allocator.malloc(size, None)
    try:
        buffer = runtime.backend.view(block.segment.handle, block.offset, size)
        region = runtime.pointers.add(Region(block.address, size, MemoryKind.HOST, buffer))
    except BaseException:
        runtime.host_allocator.free(block.address)
        raise
    if sanitizer.active:  # remembered for the leak check
        sanitizer.on_malloc_host(region)
    return block.address


def free_host(host_ptr: int) -> None:
    """Free host memory from ``malloc_host`` (aclrtFreeHost); deferred like ``free``."""
    runtime = core.current()
    if runtime.busy():
        runtime.deferred.append(lambda: free_host(host_ptr))
        return
    core.drain_deferred(runtime)
    try:
        region = runtime.pointers.remove(host_ptr, "hostPtr", MemoryKind.HOST)
    except AclError as exc:
        if sanitizer.active:
            sanitizer.on_free(host_ptr, None, exc)
        raise
    if sanitizer.active:
        sanitizer.on_free(host_ptr, region)
    runtime.host_allocator.free(region.start)


def _allocator_of(runtime: core.Runtime, region: Region):
    if region.kind is MemoryKind.DEVICE:
        return runtime.devices[region.device].allocator
    if region.kind is MemoryKind.HOST:
        return runtime.host_allocator
    return None


def _block_start(allocator, region: Region) -> int | None:
    return region.start if allocator is not None and allocator.block(region.start) else None


def use_on_stream(region: Region, stream: Stream) -> None:
    """Record that queued work on ``stream`` touches ``region`` (see the design note)."""
    runtime = stream.device.runtime
    allocator = _allocator_of(runtime, region)
    start = _block_start(allocator, region)
    if start is not None:
        allocator.record_stream(start, stream)


def record_stream(ptr: int, stream: int) -> None:
    """Declare that ``stream`` uses the allocation at ``ptr`` (torch's ``record_stream``)."""
    runtime = core.current()
    region, _ = runtime.pointers.resolve(ptr, 1, "ptr")
    use_on_stream(region, resolve_stream(stream))


# -- registered Python buffers ----------------------------------------------------------------
def _byte_bounds(array: np.ndarray) -> tuple[int, int]:
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy < 2
        byte_bounds = np.byte_bounds  # type: ignore[attr-defined]
    return byte_bounds(array)


def _array_owner(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory among numpy arrays (its last ndarray base)."""
    owner = array
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    return owner


def _share_region(runtime: Any, region: Region, owner: np.ndarray) -> None:
    """Make the registered ``region`` live as long as ``owner`` too (when it is not the
    array that registered it): two arrays over one buffer object (np.frombuffer of the same
    bytes) each keep the memory addressable; the pointer table's design note has the
    counting."""
    held = region.owner() if isinstance(region.owner, weakref.ref) else None
    if held is None and not isinstance(region.owner, weakref.ref):
        return  # held strongly (bytes, bytearray) until unregister_buffer
    if held is owner:
        return
    if runtime.pointers.share(region):
        weakref.finalize(owner, runtime.pointers.retire, region)


def register_buffer(obj: Any) -> int:
    """Make a Python buffer addressable by the runtime; returns its data address.

    numpy arrays are tracked by their owning array: the registration lasts while the array
    lives (nothing is kept alive by it). ``bytes``, ``bytearray`` and other buffer objects
    are kept alive, and a ``bytearray`` cannot be resized, until ``unregister_buffer``.
    """
    runtime = core.current()
    if isinstance(obj, np.ndarray):
        address = obj.__array_interface__["data"][0]
        view_low, view_high = _byte_bounds(obj)
        found = runtime.pointers.lookup(view_low, view_high - view_low) \
            if view_high > view_low else None
        if found is not None:  # already addressable (a view of runtime memory, or registered)
            if found.kind is MemoryKind.REGISTERED:
                _share_region(runtime, found, _array_owner(obj))  # another owner, maybe
            return address
        owner = obj
        while isinstance(owner.base, np.ndarray):
            if runtime.backend.owns(owner.base):
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'obj' is a view of runtime memory at {address:#x} "
                               f"that is no longer allocated (freed?)")
            owner = owner.base
        low, high = _byte_bounds(owner)
        if high <= low:
            return address
        buffer = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (high - low))
                                       .from_address(low))
        region = Region(low, high - low, MemoryKind.REGISTERED, buffer,
                        owner=weakref.ref(owner), writable=bool(owner.flags.writeable))
        added = runtime.pointers.add(region)
        if added is region:
            weakref.finalize(owner, runtime.pointers.retire, region)
        else:  # inside a region another array registered: this one holds it too
            _share_region(runtime, added, owner)
        return address
    try:
        view = memoryview(obj)
    except TypeError:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'obj' = {type(obj).__name__} object does not expose a buffer "
                       f"(expected numpy.ndarray, bytes, bytearray or memoryview)") from None
    if not view.c_contiguous:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       "argument 'obj' is a non-contiguous buffer; pass a contiguous one")
    flat = np.frombuffer(view.cast("B"), np.uint8)
    address = flat.__array_interface__["data"][0]
    if flat.size:
        alias = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * flat.size)
                                      .from_address(address))
        # pyACL lets programs write into bytes through bytes_to_ptr; other read-only
        # buffers (a read-only mmap, say) may not be mapped writable, so they stay read-only.
        region = runtime.pointers.add(Region(
            address, flat.size, MemoryKind.REGISTERED, alias, owner=(obj, view),
            writable=isinstance(obj, bytes) or not view.readonly))
        _hold(runtime, region)
    return address


def _hold(runtime: core.Runtime, region: Region) -> None:
    """Keep a held (strongly referenced) registration, forgetting the oldest ones beyond
    ``MAX_HELD_BUFFERS`` / ``MAX_HELD_BYTES``: a program that registers a new ``bytes`` per
    frame (pyACL's ``bytes_to_ptr(frame.tobytes())``) must not grow without bound. An old
    pointer then reads as freed (a clean error); queued work keeps its own reference."""
    held = runtime.held_buffers
    held.pop(region.start, None)
    held[region.start] = region
    total = sum(r.size for r in held.values())
    while len(held) > MAX_HELD_BUFFERS or (total > MAX_HELD_BYTES and len(held) > 1):
        _, oldest = held.popitem(last=False)
        total -= oldest.size
        if oldest.live:
            runtime.pointers.retire(oldest)


def unregister_buffer(ptr: int) -> None:
    """Forget a registration made by ``register_buffer`` (releases kept objects)."""
    runtime = core.current()
    region, _ = runtime.pointers.resolve(ptr, 1, "ptr")
    if region.kind is not MemoryKind.REGISTERED:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'ptr' = {ptr:#x} is {region.kind.value} memory, not a "
                       f"registered buffer")
    runtime.pointers.remove(region.start, "ptr", MemoryKind.REGISTERED)


def _pin(region: Region) -> Any:
    """A strong reference that keeps a region's memory alive while queued work uses it."""
    if isinstance(region.owner, weakref.ref):
        owner = region.owner()
        if owner is None:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"the registered buffer at {region.start:#x} was garbage-collected")
        return owner
    return region.owner


def pinned_view(region: Region, offset: int, nbytes: int) -> Any:
    """A byte view of ``region`` that itself keeps the memory alive (for views handed to
    users: ``ptr_to_numpy``, DLPack) and is read-only when the region is."""
    if region.kind is MemoryKind.REGISTERED:
        alias = (ctypes.c_uint8 * nbytes).from_address(region.start + offset)
        alias.openacl_owner = _pin(region)  # the view's base chain now holds the owner
        view = np.ctypeslib.as_array(alias)
    else:
        view = region.view(offset, nbytes)  # a slice of the segment: holds it
    if not region.writable:
        view = view.view()
        view.flags.writeable = False
    return view


# -- copies and fills --------------------------------------------------------------------------
def read_bytes(ptr: int, nbytes: int, argument: str) -> bytes:
    """The ``nbytes`` at ``ptr`` (any memory kind) as bytes, copied now: how host code reads
    a value it needs (an aclop value input, a model's dynamic-batch input, a staged model's
    inputs) whatever the backend; the sanitizer sees it as a synchronous read."""
    region, offset = core.current().pointers.resolve(ptr, nbytes, argument)
    if sanitizer.active:  # a read by this thread (or the stream task it runs in)
        sanitizer.host_accesses([(region, offset, nbytes, False)])
    host = np.empty(nbytes, np.uint8)
    core.current().backend._copy(host, region.view(offset, nbytes))
    return host.tobytes()


def _resolve_range(ptr: int, count: int, argument: str, write: bool = False
                   ) -> tuple[Region, Any, Any]:
    try:
        region, offset = core.current().pointers.resolve(ptr, count, argument, write)
    except AclError as exc:
        if sanitizer.active:  # an illegal read or write (memcheck)
            sanitizer.illegal_access(core.as_index(ptr) or 0, count, write, exc,
                                     f"argument '{argument}'")
        raise
    return region, region.view(offset, count), _pin(region)


def _sanitizer_accesses(plan: tuple, dst: int, src: int) -> list:
    """The (region, offset, nbytes, write) accesses of a copy plan (sanitizer.py)."""
    dst_region, dst_view, src_region, src_view, _ = plan
    return [(src_region, as_address(src, "src") - src_region.start, src_view.nbytes, False),
            (dst_region, as_address(dst, "dst") - dst_region.start, dst_view.nbytes, True)]


def _bounded_count(count: int, limit: int, limit_name: str) -> int:
    """Validate ``count`` and the caller's declared capacity ``limit``; returns count."""
    limit = core.check_size(limit, limit_name, allow_zero=True)
    count = core.check_size(count, "count", allow_zero=True)
    if count > limit:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'count' = {count} exceeds argument '{limit_name}' = {limit}")
    return count


def _copy_plan(dst: int, dest_max: int, src: int, count: int, kind: int):
    core.check_enum(kind, MEMCPY_KINDS, "kind")
    count = _bounded_count(count, dest_max, "destMax")
    if count == 0:
        return None
    dst_region, dst_view, dst_pin = _resolve_range(dst, count, "dst", write=True)
    src_region, src_view, src_pin = _resolve_range(src, count, "src")
    if sanitizer.active:  # a kind the pointers contradict (memcheck)
        sanitizer.check_kind(int(kind), dst_region, src_region)
    return dst_region, dst_view, src_region, src_view, (dst_pin, src_pin)


def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> None:
    """Copy ``count`` bytes now (aclrtMemcpy); ``count > destMax`` is an error."""
    plan = _copy_plan(dst, dest_max, src, count, kind)
    if plan is not None and sanitizer.active:
        sanitizer.host_accesses(_sanitizer_accesses(plan, dst, src))
    if plan is not None and profiler.active:  # timed on this thread (profiler.py)
        profiler.label("memcpy", profiler.direction(plan[0], plan[2]), plan[3].nbytes)
        profiler.run_here(core.current().backend._copy, plan[1], plan[3])
    elif plan is not None:
        core.current().backend._copy(plan[1], plan[3])


def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int,
                 stream: int) -> None:
    """Enqueue a copy of ``count`` bytes on ``stream`` (aclrtMemcpyAsync)."""
    target = _stream_of_current_device(stream)
    plan = _copy_plan(dst, dest_max, src, count, kind)
    if plan is None:
        return
    dst_region, dst_view, src_region, src_view, pins = plan
    use_on_stream(dst_region, target)
    use_on_stream(src_region, target)
    copy = core.current().backend._copy_async
    if profiler.active:
        profiler.label("memcpy", profiler.direction(dst_region, src_region), src_view.nbytes)
    if sanitizer.active:
        sanitizer.label("memcpy", _sanitizer_accesses(plan, dst, src))
    target.submit(lambda: (copy(dst_view, src_view), pins))


def _fill_plan(dev_ptr: int, max_count: int, value: int, count: int):
    count = _bounded_count(count, max_count, "maxCount")
    as_int = core.as_index(value)
    if as_int is None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'value' = {value!r} is not an integer")
    byte = as_int & BYTE_MASK  # like CUDA: each byte is set to the low byte
    if count == 0:
        return None
    region, view, pin = _resolve_range(dev_ptr, count, "devPtr", write=True)
    return region, view, byte, pin


def memset(dev_ptr: int, max_count: int, value: int, count: int) -> None:
    """Set ``count`` bytes to ``value`` now (aclrtMemset)."""
    plan = _fill_plan(dev_ptr, max_count, value, count)
    if plan is not None and sanitizer.active:
        sanitizer.host_accesses([(plan[0], as_address(dev_ptr, "devPtr") - plan[0].start,
                                  plan[1].nbytes, True)])
    if plan is not None:
        core.current().backend._fill(plan[1], plan[2])


def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream: int) -> None:
    """Enqueue a fill on ``stream`` (aclrtMemsetAsync)."""
    target = _stream_of_current_device(stream)
    plan = _fill_plan(dev_ptr, max_count, value, count)
    if plan is None:
        return
    region, view, byte, pin = plan
    use_on_stream(region, target)
    fill = core.current().backend._fill_async
    if profiler.active:
        profiler.label("memset", "device" if region.is_device else "host", view.nbytes)
    if sanitizer.active:
        sanitizer.label("memset", [(region, as_address(dev_ptr, "devPtr") - region.start,
                                    view.nbytes, True)])
    # host memory is filled by the host: after the stream's earlier work (a copy into it)
    target.submit(lambda: (fill(view, byte), pin), host=not region.is_device)


# -- information ---------------------------------------------------------------------------------
def get_mem_info(attr: int) -> tuple[int, int]:
    """``(free, total)`` bytes of the current device (HBM attrs) or the host (DDR attrs).

    Device figures honour the configured ``memory_limit``: total is the limit, free is what
    the caching allocator could still reserve (cached-but-unused blocks count as in use).
    """
    which = core.check_enum(attr, MEM_ATTRS, "attr")
    device = _current_device()
    backend = device.runtime.backend
    if which in HOST_MEM_ATTRS:
        return backend.host_available_memory(), backend.host_total_memory()
    physical_free = backend.available_memory(device.id)
    limit = device.allocator.limit
    if limit is None:
        return physical_free, backend.total_memory(device.id)
    return max(0, min(limit - device.allocator.reserved_bytes, physical_free)), limit


def _device_for_stats(device_id: int | None):
    if device_id is None:
        return _current_device()
    return device_of(device_id, "device")


def memory_stats(device_id: int | None = None) -> dict[str, int]:
    """Flat caching-allocator statistics (``allocated_bytes.all.current`` style)."""
    return _device_for_stats(device_id).allocator.stats()


def host_memory_stats() -> dict[str, int]:
    """Statistics of the pinned host pool, same keys as ``memory_stats``."""
    return core.current().host_allocator.stats()


def empty_cache(device_id: int | None = None) -> int:
    """Release cached, unused device segments; returns the bytes given back."""
    return _device_for_stats(device_id).allocator.empty_cache()


def reset_peak_memory_stats(device_id: int | None = None) -> None:
    _device_for_stats(device_id).allocator.reset_peak_stats()
