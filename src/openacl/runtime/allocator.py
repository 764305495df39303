"""The caching allocator: policy over injected raw memory hooks.

Design note (invariants)
------------------------
* Raw memory comes only from ``raw_alloc(nbytes) -> (address, handle)`` and goes back only
  through ``raw_free(handle)``; the allocator never touches the bytes. Tests inject a fake
  raw layer that hands out fake addresses (STYLE.md rule 9).
* A *segment* is one raw allocation. It belongs to one pool (small or large) and to one
  stream: every block carved from it is reused only by allocations on that stream, so work
  queued on the stream that freed a block is always ordered before the block's next user
  (stream-ordered reuse).
* Sizes: requests round up to ``MIN_BLOCK_SIZE``. Requests up to ``SMALL_SIZE`` come from
  ``SMALL_SEGMENT_SIZE`` segments, requests below ``MIN_LARGE_ALLOC`` from
  ``LARGE_SEGMENT_SIZE`` segments, larger ones get a segment of their own rounded up to
  ``ROUND_LARGE``. A cached block is chosen best-fit (smallest size, then lowest address)
  and split when the rest is worth keeping; a freed block merges with free neighbours.
* A block used by another stream must be declared with ``record_stream``. Freeing such a
  block takes a completion marker of each recorded stream; the block stays *pending* (not
  reusable, still counted active) until every marker reports done.
* On exhaustion (the configured limit or the raw layer says no) the allocator releases
  every cached whole segment and retries once, then fails with
  ``ACL_ERROR_RT_MEMORY_ALLOCATION`` naming the size, what is in use and the limit.
* One ``threading.RLock`` guards all state; raw hooks and marker checks run under it and
  must not call back into the allocator. ``busy()`` tells whether the calling thread holds
  it: a garbage-collector finalizer that wants to free memory while it is held defers the
  free (``openacl.runtime.core.run_or_defer``) instead of re-entering.
* A block freed while work queued on its *own* stream may still touch it also waits for
  that work (a pending marker), because synchronous copies are not stream-ordered: its next
  user could otherwise write it before the queued work has read it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_MEMORY_ALLOCATION, AclError

MIN_BLOCK_SIZE = 512  # bytes; every request rounds up to a multiple of this
SMALL_SIZE = 1 << 20  # bytes; largest request served by the small pool
SMALL_SEGMENT_SIZE = 2 << 20  # bytes; segment size of the small pool
MIN_LARGE_ALLOC = 10 << 20  # bytes; requests from here on get a segment of their own
LARGE_SEGMENT_SIZE = 20 << 20  # bytes; segment carved by medium (1-10 MiB) requests
ROUND_LARGE = 2 << 20  # bytes; own-segment requests round up to a multiple of this

POOLS = ("small_pool", "large_pool")
_ALLOC_EVENT_STATS = (("allocation", 0), ("allocated_bytes", 1), ("requested_bytes", 2),
                      ("active", 0), ("active_bytes", 1))
STAT_NAMES = (
    "allocation",
    "segment",
    "active",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "requested_bytes",
)
STAT_FIELDS = ("current", "peak", "allocated", "freed")


class StreamLike(Protocol):
    """What the allocator needs of a stream: identity (hashable) and completion markers."""

    def marker(self) -> Callable[[], bool]:
        """A callable that reports whether all work queued so far has completed."""


def round_size(size: int) -> int:
    """The size a request of ``size`` bytes occupies in the cache."""
    return max(MIN_BLOCK_SIZE, -(-size // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE)


def segment_size(rounded: int) -> int:
    """The raw allocation made when no cached block fits a rounded request."""
    if rounded <= SMALL_SIZE:
        return SMALL_SEGMENT_SIZE
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT_SIZE
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


def _pool_name(small: bool) -> str:
    return POOLS[0] if small else POOLS[1]


@dataclass(eq=False)
class Segment:
    """One raw allocation."""

    address: int
    size: int
    handle: Any
    small: bool
    stream: Hashable


@dataclass(eq=False)
class Block:
    """A piece of a segment, handed out to one user at a time."""

    segment: Segment
    address: int
    size: int
    requested: int = 0
    allocated: bool = False
    pending: bool = False
    prev: Block | None = None
    next: Block | None = None
    recorded_streams: set = field(default_factory=set)

    @property
    def offset(self) -> int:
        """Byte offset of the block inside its segment."""
        return self.address - self.segment.address

    @property
    def stream(self) -> Hashable:
        return self.segment.stream

    @property
    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None


class _Stat:
    __slots__ = STAT_FIELDS

    def __init__(self) -> None:
        self.current = self.peak = self.allocated = self.freed = 0

    def increase(self, amount: int) -> None:
        self.current += amount
        self.allocated += amount
        if self.current > self.peak:
            self.peak = self.current

    def decrease(self, amount: int) -> None:
        self.current -= amount
        self.freed += amount


class CachingAllocator:
    """Caching allocator over ``raw_alloc`` / ``raw_free`` with an optional byte limit."""

    def __init__(
        self,
        raw_alloc: Callable[[int], tuple[int, Any]],
        raw_free: Callable[[Any], None],
        limit: int | None = None,
        name: str = "device",
    ) -> None:
        self.name = name
        self.limit = limit
        self._raw_alloc = raw_alloc
        self._raw_free = raw_free
        self._lock = threading.RLock()
        # pool name -> stream -> sorted [(size, address)] of free blocks
        self._free: dict[str, dict[Hashable, list[tuple[int, int]]]] = {p: {} for p in POOLS}
        self._blocks: dict[int, Block] = {}  # address -> block, every block of every segment
        self._segments: dict[int, Segment] = {}
        self._pending: list[tuple[Block, list[Callable[[], bool]]]] = []
        self._stats = {(n, p): _Stat() for n in STAT_NAMES for p in ("all",) + POOLS}
        # (stat name, small?) -> the two stats an event updates: "all" and its pool's
        self._stat_pairs = {
            (n, small): (self._stats[(n, "all")], self._stats[(n, _pool_name(small))])
            for n in STAT_NAMES for small in (True, False)}
        # (small?, keep_active?) -> the (stat, unit) pairs an allocation or free updates;
        # unit 0 counts blocks, 1 their bytes, 2 the bytes requested
        self._alloc_stats = {
            (small, keep_active): tuple(
                (stat, unit) for name, unit in _ALLOC_EVENT_STATS
                if not (keep_active and name.startswith("active"))
                for stat in self._stat_pairs[(name, small)])
            for small in (True, False) for keep_active in (True, False)}
        self._counters = {"num_alloc_retries": 0, "num_ooms": 0, "num_device_alloc": 0,
                          "num_device_free": 0}

    # -- public policy -------------------------------------------------------------------
    def malloc(self, size: int, stream: Hashable = None) -> Block:
        """Hand out a block of at least ``size`` bytes for use on ``stream``."""
        if size <= 0:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'size' = {size} is invalid: size must be > 0")
        rounded = round_size(size)
        small = rounded <= SMALL_SIZE
        with self._lock:
            self._process_pending()
            block = self._take_cached(rounded, small, stream)
            if block is None:
                block = self._new_segment(size, rounded, small, stream)
            block = self._split(block, rounded)
            block.allocated = True
            block.requested = size
            self._count_alloc(block, +1)
            return block

    def free(self, address: int) -> Block:
        """Return the block at ``address``; reusable on its stream once recorded work is done."""
        with self._lock:
            block = self._allocated_block(address)
            block.allocated = False
            users = set(block.recorded_streams)
            if hasattr(block.stream, "marker"):
                users.add(block.stream)
            markers = [m for m in (s.marker() for s in users) if not m()]
            block.recorded_streams = set()
            self._count_alloc(block, -1, keep_active=bool(markers))
            if markers:
                block.pending = True
                self._pending.append((block, markers))
                self._process_pending()
            else:
                self._release_block(block)
            return block

    def busy(self) -> bool:
        """Whether the calling thread is inside an allocator operation."""
        return self._lock._is_owned()  # type: ignore[attr-defined]

    def record_stream(self, address: int, stream: StreamLike) -> None:
        """Declare that ``stream`` uses the allocated block at ``address``."""
        with self._lock:
            block = self._allocated_block(address)
            if stream != block.stream:
                block.recorded_streams.add(stream)

    def retire_stream(self, stream: Hashable, successor: Hashable = None) -> None:
        """``stream`` is gone and its work is done: give back its cached whole segments and
        hand its partly used ones to ``successor``, so short-lived streams (one per request)
        do not leave memory cached under keys nobody allocates with again."""
        with self._lock:
            for pool in self._free.values():
                keep, _ = self._release_whole(pool.pop(stream, []))
                if keep:
                    merged = pool.setdefault(successor, [])
                    merged.extend(keep)
                    merged.sort()
            for segment in self._segments.values():
                if segment.stream is stream:
                    segment.stream = successor

    def empty_cache(self) -> int:
        """Give every cached whole segment back to the raw layer; returns bytes released."""
        with self._lock:
            self._process_pending()
            return self._release_cached_segments()

    def process_pending(self) -> None:
        """Make pending blocks whose recorded streams have finished reusable."""
        with self._lock:
            self._process_pending()

    def block(self, address: int) -> Block | None:
        """The allocated block that starts at ``address``, if any."""
        block = self._blocks.get(address)
        return block if block is not None and block.allocated else None

    def allocated_blocks(self) -> list[Block]:
        with self._lock:
            return [b for b in self._blocks.values() if b.allocated]

    def segments(self) -> Iterator[Segment]:
        with self._lock:
            return iter(list(self._segments.values()))

    @property
    def reserved_bytes(self) -> int:
        return self._stats[("reserved_bytes", "all")].current

    @property
    def allocated_bytes(self) -> int:
        return self._stats[("allocated_bytes", "all")].current

    def stats(self) -> dict[str, int]:
        """Flat statistics: ``allocated_bytes.all.current``, ``num_ooms``, ...

        Pending blocks whose streams have finished are released first, so ``active_*``
        reflects completed work.
        """
        with self._lock:
            self._process_pending()
            out: dict[str, int] = {}
            for (name, pool), stat in self._stats.items():
                for attr in STAT_FIELDS:
                    out[f"{name}.{pool}.{attr}"] = getattr(stat, attr)
            out.update(self._counters)
            return out

    def reset_peak_stats(self) -> None:
        with self._lock:
            for stat in self._stats.values():
                stat.peak = stat.current

    def release_all(self) -> None:
        """Drop every segment, allocated or not (runtime shutdown)."""
        with self._lock:
            for segment in list(self._segments.values()):
                self._raw_free(segment.handle)
            self._segments.clear()
            self._blocks.clear()
            self._pending.clear()
            for pool in self._free.values():
                pool.clear()

    # -- mechanism -----------------------------------------------------------------------
    def _allocated_block(self, address: int) -> Block:
        block = self._blocks.get(address)
        if block is None or not block.allocated:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'address' = {address:#x} is not an allocation of the "
                           f"{self.name} allocator")
        return block

    def _take_cached(self, rounded: int, small: bool, stream: Hashable) -> Block | None:
        free = self._free[_pool_name(small)].get(stream)
        if not free:
            return None
        index = bisect.bisect_left(free, (rounded, 0))
        if index == len(free):
            return None
        _, address = free.pop(index)
        return self._blocks[address]

    def _new_segment(self, size: int, rounded: int, small: bool, stream: Hashable) -> Block:
        nbytes = segment_size(rounded)
        segment = self._try_raw_alloc(nbytes, small, stream)
        if segment is None:
            self._counters["num_alloc_retries"] += 1
            self._release_cached_segments()
            segment = self._try_raw_alloc(nbytes, small, stream)
        if segment is None and rounded < nbytes:
            # a limit tighter than the segment size: reserve just what was asked for
            segment = self._try_raw_alloc(rounded, small, stream)
        if segment is None:
            self._counters["num_ooms"] += 1
            limit = "none" if self.limit is None else f"{self.limit} bytes"
            raise AclError(
                ACL_ERROR_RT_MEMORY_ALLOCATION,
                f"{self.name} out of memory: cannot allocate {size} bytes (a {nbytes}-byte "
                f"segment); in use {self.allocated_bytes} bytes, reserved "
                f"{self.reserved_bytes} bytes, limit {limit}",
            )
        block = Block(segment=segment, address=segment.address, size=segment.size)
        self._blocks[block.address] = block
        return block

    def _try_raw_alloc(self, nbytes: int, small: bool, stream: Hashable) -> Segment | None:
        if self.limit is not None and self.reserved_bytes + nbytes > self.limit:
            return None
        try:
            address, handle = self._raw_alloc(nbytes)
        except MemoryError:
            return None
        segment = Segment(address=address, size=nbytes, handle=handle, small=small,
                          stream=stream)
        self._segments[address] = segment
        self._counters["num_device_alloc"] += 1
        self._bump("segment", small, 1)
        self._bump("reserved_bytes", small, nbytes)
        return segment

    def _split(self, block: Block, rounded: int) -> Block:
        remaining = block.size - rounded
        worth_keeping = (remaining >= MIN_BLOCK_SIZE if block.segment.small
                         else remaining > SMALL_SIZE)
        if not worth_keeping:
            return block
        rest = Block(segment=block.segment, address=block.address + rounded, size=remaining,
                     prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = rounded
        self._blocks[rest.address] = rest
        self._insert_free(rest)
        return block

    def _release_block(self, block: Block) -> None:
        """A block nobody uses any more: merge with free neighbours, then cache it."""
        block.pending = False
        for neighbour in (block.prev, block.next):
            if neighbour is not None and self._is_free(neighbour):
                self._remove_free(neighbour)
                self._merge(block, neighbour)
        self._insert_free(block)

    def _merge(self, block: Block, neighbour: Block) -> None:
        if neighbour is block.prev:
            del self._blocks[block.address]
            block.address = neighbour.address
            block.prev = neighbour.prev
            if block.prev is not None:
                block.prev.next = block
            self._blocks[block.address] = block
        else:
            block.next = neighbour.next
            if block.next is not None:
                block.next.prev = block
            del self._blocks[neighbour.address]
        block.size += neighbour.size

    @staticmethod
    def _is_free(block: Block) -> bool:
        return not block.allocated and not block.pending

    def _free_list(self, block: Block) -> list[tuple[int, int]]:
        return self._free[_pool_name(block.segment.small)].setdefault(block.stream, [])

    def _insert_free(self, block: Block) -> None:
        bisect.insort(self._free_list(block), (block.size, block.address))

    def _remove_free(self, block: Block) -> None:
        free = self._free_list(block)
        index = bisect.bisect_left(free, (block.size, block.address))
        del free[index]

    def _process_pending(self) -> None:
        still_pending = []
        for block, markers in self._pending:
            if all(done() for done in markers):
                self._bump("active", block.segment.small, -1)
                self._bump("active_bytes", block.segment.small, -block.size)
                self._release_block(block)
            else:
                still_pending.append((block, markers))
        self._pending = still_pending

    def _release_cached_segments(self) -> int:
        released = 0
        for pool in self._free.values():
            for stream, free in pool.items():
                pool[stream], freed = self._release_whole(free)
                released += freed
        return released

    def _release_whole(self, free: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], int]:
        """Give back the segments of ``free`` entries that are whole free segments; returns
        the entries kept (pieces of split segments) and the bytes released."""
        keep, released = [], 0
        for size, address in free:
            block = self._blocks[address]
            if block.is_split:
                keep.append((size, address))
                continue
            segment = block.segment
            del self._blocks[address]
            del self._segments[segment.address]
            self._raw_free(segment.handle)
            self._counters["num_device_free"] += 1
            self._bump("segment", segment.small, -1)
            self._bump("reserved_bytes", segment.small, -segment.size)
            released += segment.size
        return keep, released

    def _count_alloc(self, block: Block, sign: int, keep_active: bool = False) -> None:
        """Account one allocation (+1) or free (-1): the hot path, so no calls per stat."""
        amounts = (sign, sign * block.size, sign * block.requested)
        for stat, unit in self._alloc_stats[(block.segment.small, keep_active)]:
            amount = amounts[unit]
            stat.current += amount
            if amount >= 0:
                stat.allocated += amount
                if stat.current > stat.peak:
                    stat.peak = stat.current
            else:
                stat.freed -= amount

    def _bump(self, name: str, small: bool, amount: int) -> None:
        for stat in self._stat_pairs[(name, small)]:
            if amount >= 0:
                stat.increase(amount)
            else:
                stat.decrease(-amount)
