"""CachingAllocator over a fake raw layer: sizes, pools, best fit, split/merge, stream-ordered
reuse, record_stream, out-of-memory handling and statistics (no real memory, no threads)."""

from __future__ import annotations

import pytest

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_MEMORY_ALLOCATION, AclError
from openacl.runtime.allocator import CachingAllocator, round_size, segment_size

KiB = 1 << 10
MiB = 1 << 20
FAKE_BASE = 0x7000_0000_0000  # first fake address
FAKE_GAP = 1 << 30  # fake segments lie this far apart, so they never touch


class FakeRaw:
    """Hands out fake addresses; records every raw alloc and free."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity  # bytes outstanding before MemoryError; None: unlimited
        self.allocs: list[int] = []  # sizes asked for
        self.frees: list[int] = []  # handles given back
        self.live: dict[int, int] = {}  # handle -> size
        self._next = FAKE_BASE

    def alloc(self, nbytes: int) -> tuple[int, int]:
        if self.capacity is not None and sum(self.live.values()) + nbytes > self.capacity:
            raise MemoryError(f"fake raw layer: no room for {nbytes} bytes")
        address, self._next = self._next, self._next + FAKE_GAP
        self.allocs.append(nbytes)
        self.live[address] = nbytes
        return address, address  # the handle is the address

    def free(self, handle: int) -> None:
        assert handle in self.live, f"raw free of unknown handle {handle:#x}"
        del self.live[handle]
        self.frees.append(handle)


class FakeStream:
    """A stream whose completion the test controls."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = True

    def marker(self):
        return lambda: self.done

    def __repr__(self) -> str:
        return f"<FakeStream {self.name}>"


@pytest.fixture
def raw():
    return FakeRaw()


@pytest.fixture
def alloc(raw):
    return CachingAllocator(raw.alloc, raw.free, name="fake")


def expect_error(code: int, fn, *args) -> AclError:
    with pytest.raises(AclError) as info:
        fn(*args)
    assert info.value.code == code, str(info.value)
    return info.value


# -- sizes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("size, rounded", [(1, 512), (511, 512), (512, 512), (513, 1024),
                                           (1000, 1024), (MiB, MiB), (MiB + 1, MiB + 512)])
def test_round_size(size, rounded):
    assert round_size(size) == rounded


@pytest.mark.parametrize("rounded, segment", [
    (512, 2 * MiB), (MiB, 2 * MiB),  # small: 2 MiB segments
    (MiB + 512, 20 * MiB), (10 * MiB - 512, 20 * MiB),  # medium: 20 MiB segments
    (10 * MiB, 10 * MiB), (10 * MiB + 512, 12 * MiB), (11 * MiB, 12 * MiB),  # own segment
])
def test_segment_size(rounded, segment):
    assert segment_size(rounded) == segment


# -- pools, best fit, split and merge -----------------------------------------------------------
def test_small_and_large_pools(alloc, raw):
    own = alloc.malloc(11 * MiB)  # first, or it would fit the rest of the 20 MiB segment
    small = alloc.malloc(1000)
    medium = alloc.malloc(3 * MiB)
    assert raw.allocs == [12 * MiB, 2 * MiB, 20 * MiB]
    assert own.size == 12 * MiB  # rest 1 MiB: not split
    assert small.segment.small and not medium.segment.small and not own.segment.small
    stats = alloc.stats()
    assert stats["segment.small_pool.current"] == 1
    assert stats["segment.large_pool.current"] == 2
    assert stats["reserved_bytes.small_pool.current"] == 2 * MiB
    assert stats["reserved_bytes.large_pool.current"] == 32 * MiB


def test_small_request_never_uses_large_pool(alloc, raw):
    alloc.free(alloc.malloc(2 * MiB).address)  # a cached 20 MiB large-pool block
    alloc.malloc(512)
    assert raw.allocs == [20 * MiB, 2 * MiB]


def test_best_fit_takes_smallest_block(alloc):
    big = alloc.malloc(4 * KiB)
    alloc.malloc(512)  # separators keep the free blocks apart
    fitting = alloc.malloc(KiB)
    alloc.malloc(512)
    alloc.free(big.address)
    alloc.free(fitting.address)
    assert alloc.malloc(700).address == fitting.address


def test_best_fit_prefers_lowest_address(alloc):
    first = alloc.malloc(KiB)
    alloc.malloc(512)
    second = alloc.malloc(KiB)
    alloc.malloc(512)
    alloc.free(second.address)
    alloc.free(first.address)
    assert alloc.malloc(KiB).address == first.address


def test_small_pool_splits_down_to_512(alloc, raw):
    a = alloc.malloc(MiB)  # rest 1 MiB: split
    b = alloc.malloc(MiB - 512)  # rest 512: still split
    c = alloc.malloc(512)  # exactly the last piece
    assert (a.size, b.size, c.size) == (MiB, MiB - 512, 512)
    assert b.address == a.address + MiB and c.address == b.address + MiB - 512
    assert raw.allocs == [2 * MiB]


def test_large_pool_splits_only_above_1mib(alloc, raw):
    first = alloc.malloc(2 * MiB)  # 20 MiB segment, rest 18 MiB: split
    assert first.size == 2 * MiB
    alloc.free(first.address)  # merges back into one 20 MiB block
    whole = alloc.malloc(19 * MiB)  # rest exactly 1 MiB: not split
    assert (whole.address, whole.size) == (first.address, 20 * MiB)
    assert alloc.stats()["allocated_bytes.large_pool.current"] == 20 * MiB
    alloc.free(whole.address)
    part = alloc.malloc(19 * MiB - 512)  # rest 1 MiB + 512: split
    assert (part.address, part.size) == (first.address, 19 * MiB - 512)
    assert raw.allocs == [20 * MiB]


def test_free_merges_both_neighbours_and_empty_cache_returns_segment(alloc, raw):
    a, b, c = (alloc.malloc(512) for _ in range(3))
    alloc.free(a.address)
    alloc.free(c.address)  # merges with the rest of the segment
    assert alloc.empty_cache() == 0  # segment still split around b
    assert raw.frees == []
    alloc.free(b.address)  # merges with a and with c+rest: one whole block
    assert alloc.empty_cache() == 2 * MiB
    assert raw.frees == [a.segment.handle]
    assert list(alloc.segments()) == []
    stats = alloc.stats()
    assert stats["num_device_free"] == 1
    assert stats["reserved_bytes.all.current"] == 0


def test_empty_cache_keeps_segments_in_use(alloc, raw):
    kept = alloc.malloc(512)
    alloc.free(alloc.malloc(3 * MiB).address)
    assert alloc.empty_cache() == 20 * MiB
    assert raw.frees == [FAKE_BASE + FAKE_GAP]
    assert alloc.block(kept.address) is kept


# -- stream-ordered reuse ---------------------------------------------------------------------
def test_same_stream_reuses_address(alloc, raw):
    stream = FakeStream("a")
    first = alloc.malloc(1000, stream)
    alloc.free(first.address)
    assert alloc.malloc(1000, stream).address == first.address
    assert raw.allocs == [2 * MiB]


def test_no_cross_stream_reuse(alloc, raw):
    a, b = FakeStream("a"), FakeStream("b")
    first = alloc.malloc(1000, a)
    alloc.free(first.address)
    second = alloc.malloc(1000, b)
    assert second.address != first.address
    assert second.segment is not first.segment
    assert raw.allocs == [2 * MiB, 2 * MiB]
    assert alloc.malloc(1000, None).segment not in (first.segment, second.segment)


def test_record_stream_keeps_block_pending_until_marker_done(alloc, raw):
    owner, user = FakeStream("owner"), FakeStream("user")
    user.done = False
    block = alloc.malloc(1000, owner)
    alloc.record_stream(block.address, user)
    alloc.free(block.address)
    stats = alloc.stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["active_bytes.all.current"] == 1024
    assert stats["active.all.current"] == 1
    other = alloc.malloc(1000, owner)
    assert other.address != block.address  # pending: not reused
    user.done = True
    again = alloc.malloc(1000, owner)
    assert again.address == block.address
    assert alloc.stats()["active_bytes.all.current"] == 2048
    assert raw.allocs == [2 * MiB]


def test_record_stream_on_own_stream_adds_nothing(alloc):
    stream = FakeStream("a")
    block = alloc.malloc(1000, stream)
    alloc.record_stream(block.address, stream)
    alloc.free(block.address)
    assert alloc.malloc(1000, stream).address == block.address


def test_free_waits_for_work_queued_on_its_own_stream(alloc):
    # synchronous copies are not stream-ordered: a block its own stream may still touch
    # must not reach a new user before that work is done
    stream = FakeStream("a")
    block = alloc.malloc(1000, stream)
    stream.done = False
    alloc.free(block.address)
    assert alloc.stats()["active_bytes.all.current"] == 1024
    assert alloc.malloc(1000, stream).address != block.address
    stream.done = True
    assert alloc.malloc(1000, stream).address == block.address


def test_pending_block_is_released_by_process_pending(alloc):
    owner, user = FakeStream("owner"), FakeStream("user")
    user.done = False
    block = alloc.malloc(512, owner)
    alloc.record_stream(block.address, user)
    alloc.free(block.address)
    expect_error(ACL_ERROR_INVALID_PARAM, alloc.free, block.address)  # pending: not live
    user.done = True
    alloc.process_pending()
    assert alloc.stats()["active_bytes.all.current"] == 0
    assert alloc.empty_cache() == 2 * MiB


def test_record_stream_of_unknown_address(alloc):
    expect_error(ACL_ERROR_INVALID_PARAM, alloc.record_stream, 0x1234, FakeStream("a"))


# -- out of memory ------------------------------------------------------------------------------
def _fill_then_cache(alloc) -> int:
    """Reserve two small segments; the second one ends up cached on stream "x"."""
    alloc.malloc(MiB)
    alloc.malloc(MiB)  # rest of the first segment
    cached_stream = FakeStream("x")
    alloc.free(alloc.malloc(512, cached_stream).address)
    return 2 * MiB


def test_limit_releases_cache_and_retries(raw):
    alloc = CachingAllocator(raw.alloc, raw.free, limit=4 * MiB, name="fake")
    _fill_then_cache(alloc)
    block = alloc.malloc(512, FakeStream("y"))  # needs the cached segment's room
    stats = alloc.stats()
    assert stats["num_alloc_retries"] == 1
    assert stats["num_ooms"] == 0
    assert stats["num_device_free"] == 1
    assert block.segment.handle in raw.live


def test_limit_exhausted_raises_207001(raw):
    alloc = CachingAllocator(raw.alloc, raw.free, limit=4 * MiB, name="fake")
    _fill_then_cache(alloc)
    err = expect_error(ACL_ERROR_RT_MEMORY_ALLOCATION, alloc.malloc, 3 * MiB)
    assert "3145728 bytes" in err.message  # requested
    assert f"in use {2 * MiB} bytes" in err.message
    assert f"limit {4 * MiB} bytes" in err.message
    stats = alloc.stats()
    assert stats["num_alloc_retries"] == 1
    assert stats["num_ooms"] == 1
    assert stats["reserved_bytes.all.current"] == 2 * MiB  # the cache went back


def test_raw_memory_error_is_handled_like_the_limit():
    raw = FakeRaw(capacity=4 * MiB)
    alloc = CachingAllocator(raw.alloc, raw.free, name="fake")
    _fill_then_cache(alloc)
    alloc.malloc(512, FakeStream("y"))
    assert alloc.stats()["num_alloc_retries"] == 1
    err = expect_error(ACL_ERROR_RT_MEMORY_ALLOCATION, alloc.malloc, 5000)
    assert "5000 bytes" in err.message and f"in use {2 * MiB + 512} bytes" in err.message
    assert "limit none" in err.message
    assert alloc.stats()["num_ooms"] == 1


# -- statistics -------------------------------------------------------------------------------
def test_stats_after_scripted_sequence(alloc):
    small = alloc.malloc(1000)
    alloc.malloc(3 * MiB - 100)
    alloc.free(small.address)
    stats = alloc.stats()
    expected = {
        "allocated_bytes.all.current": 3 * MiB,
        "allocated_bytes.all.peak": 3 * MiB + 1024,
        "allocated_bytes.all.allocated": 3 * MiB + 1024,
        "allocated_bytes.all.freed": 1024,
        "allocated_bytes.small_pool.current": 0,
        "reserved_bytes.small_pool.current": 2 * MiB,
        "reserved_bytes.large_pool.current": 20 * MiB,
        "reserved_bytes.all.current": 22 * MiB,
        "segment.small_pool.current": 1,
        "segment.large_pool.current": 1,
        "requested_bytes.all.current": 3 * MiB - 100,
        "requested_bytes.all.allocated": 3 * MiB - 100 + 1000,
        "active_bytes.all.current": 3 * MiB,
        "allocation.all.current": 1,
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "num_device_alloc": 2,
        "num_device_free": 0,
    }
    assert {key: stats[key] for key in expected} == expected
    assert alloc.empty_cache() == 2 * MiB
    stats = alloc.stats()
    assert stats["num_device_free"] == 1
    assert stats["segment.small_pool.current"] == 0
    assert stats["reserved_bytes.all.peak"] == 22 * MiB


def test_reset_peak_stats(alloc):
    alloc.free(alloc.malloc(MiB).address)
    alloc.malloc(512)
    assert alloc.stats()["allocated_bytes.all.peak"] == MiB
    alloc.reset_peak_stats()
    stats = alloc.stats()
    assert stats["allocated_bytes.all.peak"] == 512
    assert stats["allocated_bytes.all.allocated"] == MiB + 512  # totals are kept


# -- argument errors --------------------------------------------------------------------------
def test_free_unknown_address(alloc):
    err = expect_error(ACL_ERROR_INVALID_PARAM, alloc.free, 0xDEAD000)
    assert "0xdead000" in err.message


def test_double_free(alloc):
    block = alloc.malloc(512)
    alloc.free(block.address)
    expect_error(ACL_ERROR_INVALID_PARAM, alloc.free, block.address)


def test_free_inside_a_block(alloc):
    block = alloc.malloc(2048)
    expect_error(ACL_ERROR_INVALID_PARAM, alloc.free, block.address + 512)


@pytest.mark.parametrize("size", [0, -1, -512])
def test_malloc_non_positive_size(alloc, raw, size):
    err = expect_error(ACL_ERROR_INVALID_PARAM, alloc.malloc, size)
    assert "'size'" in err.message
    assert raw.allocs == []
