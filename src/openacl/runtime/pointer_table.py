"""The pointer table: every address the runtime accepts is resolved and bounds-checked here.

Design note (invariants)
------------------------
* A ``Region`` is a live, non-overlapping byte range the user may address: a device
  allocation, a host allocation, or a registered Python buffer. Regions never overlap;
  registering a buffer inside an existing registered region reuses that region.
* ``resolve(address, nbytes)`` succeeds only if ``[address, address + nbytes)`` lies inside
  one live region, so a wild pointer, an out-of-range length or a use after free is an
  ``AclError`` (``ACL_ERROR_INVALID_PARAM``), never a segfault. The returned region holds a
  reference to the memory's owner, so memory captured by queued work outlives a free.
* Recently removed ranges are remembered (bounded) only to word error messages
  ("was freed" rather than "unknown address"); they are never resolved.
* A region may be read-only (a read-only mapping, say): ``resolve(..., write=True)`` refuses
  it, so a copy into it is an error instead of a segfault.
* One lock guards the table; lookups are O(log n) by bisection over sorted start addresses.
  A registered buffer that dies is *retired* from a weakref finalizer, which may run inside
  any allocation, even on a thread holding the lock: retiring only appends to a queue, and
  every table operation drains that queue under the lock before it looks anything up.
* A registered region may be shared by several owners (two arrays over one ``bytes``
  object): each is counted (``holders``, changed only under the lock, by ``share`` and the
  drain), and the region is dropped when the last one has been retired.
"""

from __future__ import annotations

import bisect
import collections
import enum
import threading
from dataclasses import dataclass
from typing import Any

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError

FREED_HISTORY = 4096  # number of removed regions remembered for error messages


def as_address(value: Any, argument: str) -> int:
    """A pointer argument as an int: ints and objects with ``__index__`` (np.int64, the
    buffer wrappers); anything else is an ``AclError`` naming the argument."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    index = getattr(value, "__index__", None)
    result = index() if index is not None and not isinstance(value, bool) else None
    if not isinstance(result, int):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {value!r} is not a pointer (an int)")
    return result


class MemoryKind(enum.Enum):
    DEVICE = "device"
    HOST = "host"
    REGISTERED = "registered host buffer"


@dataclass(eq=False)
class Region:
    """A live addressable byte range and the byte view that backs it."""

    start: int
    size: int
    kind: MemoryKind
    buffer: Any  # backend byte view of exactly ``size`` bytes
    device: int | None = None
    owner: Any = None  # keeps registered Python objects (and their exports) alive
    writable: bool = True
    live: bool = True  # False once removed from the table (freed, retired, unregistered)
    holders: int = 1  # registered buffers: owners whose retirement drops it at zero

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def is_device(self) -> bool:
        return self.kind is MemoryKind.DEVICE

    def view(self, offset: int, nbytes: int) -> Any:
        return self.buffer[offset : offset + nbytes]


class PointerTable:
    """Address -> region map with bounds checks."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._starts: list[int] = []
        self._regions: dict[int, Region] = {}
        self._freed: collections.OrderedDict[int, tuple[int, MemoryKind]] = (
            collections.OrderedDict())
        self._retired: collections.deque[Region] = collections.deque()

    def busy(self) -> bool:
        """Whether the calling thread is inside a table operation (see core.run_or_defer)."""
        return self._lock._is_owned()  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self._regions)

    def retire(self, region: Region) -> None:
        """Drop ``region`` at the next table operation (safe from finalizers)."""
        self._retired.append(region)

    def share(self, region: Region) -> bool:
        """Count one more owner of registered ``region`` (whose finalizer will ``retire``
        it once); False when the region is already gone."""
        with self._lock:
            self._drain_retired()
            if self._regions.get(region.start) is not region:
                return False
            region.holders += 1
            return True

    def _drain_retired(self) -> None:
        while self._retired:
            region = self._retired.popleft()
            region.holders -= 1
            if region.holders <= 0 and self._regions.get(region.start) is region:
                self._drop(region)

    def add(self, region: Region) -> Region:
        """Insert a region; a registered buffer inside an existing one returns that one."""
        with self._lock:
            self._drain_retired()
            covering = self._find(region.start, region.size)
            if covering is not None and region.kind is MemoryKind.REGISTERED \
                    and covering.kind is MemoryKind.REGISTERED:
                return covering
            for other in self._overlapping(region.start, region.end):
                if region.kind is MemoryKind.REGISTERED and other.kind is MemoryKind.REGISTERED:
                    self._drop(other)  # an older view of memory now registered whole
                    continue
                raise AclError(
                    ACL_ERROR_INVALID_PARAM,
                    f"cannot register [{region.start:#x}, {region.end:#x}): it overlaps the "
                    f"{other.kind.value} at [{other.start:#x}, {other.end:#x})")
            bisect.insort(self._starts, region.start)
            self._regions[region.start] = region
            self._freed.pop(region.start, None)
            return region

    def remove(self, address: int, argument: str, kind: MemoryKind | None = None) -> Region:
        """Remove the region that starts exactly at ``address`` (a free)."""
        address = as_address(address, argument)
        with self._lock:
            self._drain_retired()
            region = self._regions.get(address)
            if region is None or (kind is not None and region.kind is not kind):
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               self._describe_bad(address, argument, kind, freeing=True))
            self._drop(region)
            return region

    def resolve(self, address: int, nbytes: int, argument: str, write: bool = False
                ) -> tuple[Region, int]:
        """The region holding ``[address, address + nbytes)`` and the offset of ``address``;
        with ``write`` the region must be writable."""
        address = as_address(address, argument)
        if nbytes < 0:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument '{argument}': byte count {nbytes} is negative")
        with self._lock:
            self._drain_retired()
            region = self._find(address, max(nbytes, 1))
            if region is None:
                containing = self._find(address, 1)
                if containing is not None:
                    raise AclError(
                        ACL_ERROR_INVALID_PARAM,
                        f"argument '{argument}' = {address:#x}: {nbytes} bytes from there run "
                        f"past the end of the {containing.kind.value} "
                        f"[{containing.start:#x}, {containing.end:#x}) of {containing.size} "
                        f"bytes by {address + nbytes - containing.end} bytes")
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               self._describe_bad(address, argument, None, freeing=False))
            if write and not region.writable:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument '{argument}' = {address:#x} lies in a read-only "
                               f"{region.kind.value} [{region.start:#x}, {region.end:#x})")
            return region, address - region.start

    def lookup(self, address: int, nbytes: int = 1) -> Region | None:
        """The region holding ``[address, address + nbytes)``, or None (no error)."""
        with self._lock:
            self._drain_retired()
            return self._find(address, max(nbytes, 1))

    def regions(self) -> list[Region]:
        with self._lock:
            self._drain_retired()
            return list(self._regions.values())

    def clear(self) -> None:
        with self._lock:
            self._starts.clear()
            self._regions.clear()
            self._freed.clear()
            self._retired.clear()

    # -- internals (lock held) ---------------------------------------------------------------
    def _find(self, address: int, nbytes: int) -> Region | None:
        index = bisect.bisect_right(self._starts, address) - 1
        if index < 0:
            return None
        region = self._regions[self._starts[index]]
        if address + nbytes <= region.end:
            return region
        return None

    def _overlapping(self, start: int, end: int) -> list[Region]:
        index = max(bisect.bisect_right(self._starts, start) - 1, 0)
        found = []
        for region_start in self._starts[index:]:
            if region_start >= end:
                break
            region = self._regions[region_start]
            if region.end > start:
                found.append(region)
        return found

    def _drop(self, region: Region) -> None:
        region.live = False
        index = bisect.bisect_left(self._starts, region.start)
        del self._starts[index]
        del self._regions[region.start]
        self._freed[region.start] = (region.size, region.kind)
        if len(self._freed) > FREED_HISTORY:
            self._freed.popitem(last=False)

    def _describe_bad(self, address: int, argument: str, kind: MemoryKind | None,
                      freeing: bool) -> str:
        head = f"argument '{argument}' = {address:#x}"
        if address == 0:
            return f"{head} is a null pointer"
        live = self._find(address, 1)
        if live is not None and freeing:
            if kind is not None and live.kind is not kind:
                return (f"{head} is {live.kind.value} memory, not {kind.value} memory: "
                        f"free it with the matching function")
            return (f"{head} points inside the {live.kind.value} that starts at "
                    f"{live.start:#x}; free takes the start address")
        if address in self._freed:
            size, freed_kind = self._freed[address]
            what = "double free" if freeing else "use after free"
            return f"{head}: {what} of {freed_kind.value} memory ({size} bytes)"
        for start, (size, freed_kind) in reversed(self._freed.items()):
            if start <= address < start + size:
                return (f"{head}: use after free, it lies in freed {freed_kind.value} memory "
                        f"[{start:#x}, {start + size:#x})")
        return f"{head} is not an address the runtime knows (wild pointer)"
