"""Collectives: each call validates now, then runs as one task on an ACL stream.

Design note (invariants)
------------------------
* Validation is synchronous, on the calling thread, before anything is enqueued: the
  communicator, the enums, counts against the buffers (through the pointer table, so a
  count beyond an allocation is ``HCCL_E_PARA`` and never a wild read), ranks, the stream.
  A refused call enqueues nothing and raises ``HcclError`` (``result.py``).
* The transfer itself runs on the stream's worker thread, as the stream's next task: it sees
  every earlier task of that stream (a ``memcpy_async`` into the send buffer) and every
  later task, event and synchronize sees its result. Buffers are viewed zero-copy as torch
  tensors and handed to the communicator's process group; the task blocks until the group
  finishes, at most ``HCCL_EXEC_TIMEOUT`` seconds.
* A transfer that fails (a peer died, a timeout, mismatched calls) fails its stream with
  ``result.stream_failure``: later tasks of the stream are skipped and the next synchronize
  raises the ACL code with the HCCL name in the message (``runtime/stream.py``'s policy).
* Every rank must issue a communicator's collectives in the same order with matching
  counts, types and roots (``comm.py``). A count of 0 is the same on every rank, so it
  enqueues nothing; ``all_to_all_v`` always takes part, whatever its own counts.
* Reductions over types gloo cannot reduce are widened and narrowed back: int16/uint16 in
  int32, uint32 in int64 (sums and products wrap exactly as in the narrow type), uint64 as
  int64 bits (max/min with the sign bit flipped so that signed order is unsigned order).
  Send buffers are never written; in place (``send == recv``) is allowed.
* Per-call costs dominate small messages, so what is safe to reuse is made once: the options
  objects, one per (kind, reduce op), shared and never written after they are made; and
  all_reduce's torch view of its receive buffer, cached per communicator
  (``Communicator.tensors``) under the region object, offset, size and type. An entry is
  used only for that same live region (validation, pointer resolution included, still runs
  on every call); a freed region's entry, which still holds its memory, is dropped at the
  next miss and every entry at destroy. At most ``TENSOR_CACHE_ENTRIES`` entries, each of at
  most ``TENSOR_CACHE_MAX_BYTES`` (larger buffers are not cached: their per-call cost is
  negligible next to the transfer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from openacl.errors import HCCL_E_NOT_SUPPORT, HCCL_E_PARA, HCCL_E_PTR
from openacl.hccl import transport
from openacl.hccl.comm import Communicator, lookup
from openacl.hccl.constants import (
    NUMPY_DTYPES,
    HcclDataType,
    HcclReduceOp,
    data_type_size,
)
from openacl.hccl.result import HcclError, bad_argument, hccl_api, stream_failure
from openacl.runtime import core, memory, profiler
from openacl.runtime.pointer_table import MemoryKind, Region
from openacl.runtime.stream import Stream, resolve_stream

TORCH_REDUCE_OPS = {
    HcclReduceOp.HCCL_REDUCE_SUM: "SUM",
    HcclReduceOp.HCCL_REDUCE_PROD: "PRODUCT",
    HcclReduceOp.HCCL_REDUCE_MAX: "MAX",
    HcclReduceOp.HCCL_REDUCE_MIN: "MIN",
}
WIDER_CARRIERS = {  # narrow type -> the type gloo reduces it in
    np.dtype(np.int16): np.dtype(np.int32),
    np.dtype(np.uint16): np.dtype(np.int32),
    np.dtype(np.uint32): np.dtype(np.int64),
}
UINT64 = np.dtype(np.uint64)
INT64 = np.dtype(np.int64)
SIGN_BIT = np.int64(np.iinfo(np.int64).min)  # xor-ing it maps unsigned order to signed order
ORDER_OPS = frozenset({HcclReduceOp.HCCL_REDUCE_MAX, HcclReduceOp.HCCL_REDUCE_MIN})
NOT_REDUCIBLE = frozenset({  # moved as bytes, never reduced here
    HcclDataType.HCCL_DATA_TYPE_INT128, HcclDataType.HCCL_DATA_TYPE_HIF8,
    HcclDataType.HCCL_DATA_TYPE_FP8E4M3, HcclDataType.HCCL_DATA_TYPE_FP8E5M2,
    HcclDataType.HCCL_DATA_TYPE_FP8E8M0,
})
TENSOR_CACHE_ENTRIES = 16  # torch views of receive buffers a communicator keeps
TENSOR_CACHE_MAX_BYTES = 1 << 20  # largest buffer whose view is kept, bytes
DATA_TYPES = {member.value: member for member in HcclDataType}
P2P_TAG = 0  # HCCL has no tags: one point-to-point channel per pair of ranks


class _Buffer(NamedTuple):
    region: Region
    offset: int  # of the range in the region, bytes
    view: np.ndarray  # uint8 bytes of exactly the range the collective touches


# -- validation ------------------------------------------------------------------------------------
def _data_type(value: Any, argument: str = "dataType") -> HcclDataType:
    data_type = DATA_TYPES.get(core.as_index(value))  # a dict: HcclDataType(n) is slower
    if data_type is None:
        names = ", ".join(f"{t.name}={t.value}" for t in HcclDataType)
        raise bad_argument(argument, value, f"expected an HcclDataType: {names}")
    return data_type


def _reduce_op(value: Any, data_type: HcclDataType) -> HcclReduceOp:
    number = core.as_index(value)
    try:
        op = HcclReduceOp(number)
    except ValueError:
        names = ", ".join(f"{o.name}={o.value}" for o in HcclReduceOp)
        raise bad_argument("op", value, f"expected an HcclReduceOp: {names}") from None
    if data_type in NOT_REDUCIBLE:
        raise bad_argument("dataType", data_type.name, f"{op.name} over this type is not "
                           f"supported (it is moved, never reduced, here)", HCCL_E_NOT_SUPPORT)
    return op


def _count(value: Any, argument: str) -> int:
    number = core.as_index(value)
    if number is None or number < 0:
        raise bad_argument(argument, value, "expected an element count >= 0")
    return number


def _rank(value: Any, comm: Communicator, argument: str, not_self: bool = False) -> int:
    number = core.as_index(value)
    if number is None or not 0 <= number < comm.size:
        raise bad_argument(argument, value, f"expected a rank of {comm.describe()}: "
                           f"0 .. {comm.size - 1}")
    if not_self and number == comm.rank:
        raise bad_argument(argument, value, "is this rank itself")
    return number


def _stream(value: Any, comm: Communicator) -> Stream:
    stream = resolve_stream(value)
    if stream.device.id != comm.device_id:
        raise bad_argument("stream", value, f"belongs to device {stream.device.id}, but "
                           f"{comm.describe()} is on device {comm.device_id}")
    return stream


def _buffer(ptr: Any, nbytes: int, argument: str, comm: Communicator,
            write: bool) -> _Buffer:
    """The device memory ``[ptr, ptr + nbytes)`` of the communicator's device."""
    if ptr is None or (isinstance(ptr, int) and ptr == 0):
        raise bad_argument(argument, ptr, "a null pointer", HCCL_E_PTR)
    region, offset = core.current().pointers.resolve(ptr, nbytes, argument, write)
    if region.kind is not MemoryKind.DEVICE:
        raise bad_argument(argument, ptr, f"is {region.kind.value} memory; HCCL buffers are "
                           f"device memory (rt.malloc)")
    if region.device != comm.device_id:
        raise bad_argument(argument, ptr, f"is memory of device {region.device}, but "
                           f"{comm.describe()} is on device {comm.device_id}")
    return _Buffer(region, offset, memory.pinned_view(region, offset, nbytes))


def _element_counts(value: Any, size: int, argument: str) -> list[int]:
    """``size`` counts or displacements: a sequence of ints, or a pointer to uint64s."""
    pointer = core.as_index(value)
    if pointer is not None:
        if pointer == 0:
            raise bad_argument(argument, value, "a null pointer", HCCL_E_PTR)
        raw = memory.read_bytes(value, size * UINT64.itemsize, argument)
        values = [int(v) for v in np.frombuffer(raw, UINT64)]
    else:
        try:
            values = [_count(v, argument) for v in value]
        except TypeError:
            raise bad_argument(argument, value, f"expected {size} counts (a sequence or a "
                               f"pointer to uint64s)") from None
    if len(values) != size:
        raise bad_argument(argument, value, f"expected {size} entries, one per rank")
    return values


def _recv_tensor(comm: Communicator, buffer: _Buffer, dtype: np.dtype) -> Any:
    """A torch tensor over ``buffer`` read as ``dtype``, cached per communicator (design
    note): made once per (region, offset, size, type) while the region is live."""
    cache = comm.tensors
    key = (id(buffer.region), buffer.offset, buffer.view.nbytes, dtype)
    entry = cache.get(key)
    if entry is not None and entry[0] is buffer.region:
        return entry[1]
    # Threads may share a communicator: every step below is one dict operation, and pop
    # tolerates an entry another thread removed first.
    for stale, (region, _) in list(cache.items()):
        if not region.live:
            cache.pop(stale, None)  # freed buffers: dropped at the first miss after the free
    tensor = transport.typed_tensor(buffer.view.view(dtype))
    if buffer.view.nbytes <= TENSOR_CACHE_MAX_BYTES:
        while len(cache) >= TENSOR_CACHE_ENTRIES:
            cache.pop(next(iter(cache), None), None)  # the oldest entry
        cache[key] = (buffer.region, tensor)
    return tensor


# -- the task --------------------------------------------------------------------------------------
def _wait(work: Any, comm: Communicator) -> None:
    work.wait(comm.exec_timeout)


def _options(kind: str, **fields: Any) -> Any:
    _, dist = transport.torch_distributed()
    options = getattr(dist, kind)()
    for name, value in fields.items():
        setattr(options, name, value)
    return options


_reduce_options_cache: dict[tuple[str, HcclReduceOp], Any] = {}


def _reduce_options(kind: str, op: HcclReduceOp) -> Any:
    """The ``kind`` options object reducing with ``op``, made once and shared: the process
    group copies what it reads, and nothing here writes an options object after this."""
    key = (kind, op)
    options = _reduce_options_cache.get(key)
    if options is None:
        options = _options(kind, reduceOp=transport.reduce_op(TORCH_REDUCE_OPS[op]))
        _reduce_options_cache[key] = options
    return options


def _enqueue(comm: Communicator, stream: Stream, name: str, nbytes: int,
             buffers: Sequence[_Buffer], run: Callable[[], None]) -> None:
    """Submit ``run`` as ``stream``'s next task (see the design note)."""
    for buffer in buffers:
        memory.use_on_stream(buffer.region, stream)

    def task() -> None:
        try:
            if comm.group is None:
                raise HcclError(HCCL_E_PARA, f"{comm.describe()} was destroyed before this "
                                             f"collective ran; synchronize before destroying")
            run()
        except Exception as exc:  # noqa: BLE001 - the transport raises plain RuntimeErrors
            raise stream_failure(f"{name} on {comm.describe()}", exc) from exc

    if profiler.active:
        profiler.label("hccl", name, nbytes)
    stream.submit(task)


def _load(source: np.ndarray, dtype: np.dtype, op: HcclReduceOp,
          into: np.ndarray | None = None) -> np.ndarray:
    """The array gloo reduces for ``source`` bytes of ``dtype`` (design note): ``into``'s own
    memory when the type needs no carrier, else a new array."""
    wide = WIDER_CARRIERS.get(dtype)
    if wide is not None:
        return source.view(dtype).astype(wide)
    if dtype == UINT64 and op in ORDER_OPS:
        return source.view(INT64) ^ SIGN_BIT
    carrier = INT64 if dtype == UINT64 else dtype
    if into is None:
        return source.view(carrier).copy()
    if into.ctypes.data != source.ctypes.data:
        np.copyto(into, source)
    return into.view(carrier)


def _store(work: np.ndarray, target: np.ndarray, dtype: np.dtype, op: HcclReduceOp) -> None:
    """Write reduced ``work`` (from ``_load``) into ``target`` bytes as ``dtype``."""
    if work.ctypes.data == target.ctypes.data and work.nbytes == target.nbytes:
        return  # reduced in place
    if dtype in WIDER_CARRIERS:
        target.view(dtype)[...] = work.astype(dtype)  # integer narrowing wraps, as it must
    elif dtype == UINT64 and op in ORDER_OPS:
        target.view(INT64)[...] = work ^ SIGN_BIT
    else:
        target.view(work.dtype)[...] = work


def _reduction_type(data_type: HcclDataType) -> np.dtype:
    numpy_dtype = NUMPY_DTYPES[data_type]
    assert numpy_dtype is not None  # NOT_REDUCIBLE types were refused by _reduce_op
    return numpy_dtype


# -- the collectives -------------------------------------------------------------------------------
@hccl_api
def all_reduce(send_buf: int, recv_buf: int, count: int, data_type: int, op: int,
               comm: Any, stream: Any = None) -> None:
    """Reduce ``count`` elements over all ranks into every rank's ``recv_buf``
    (HcclAllReduce); ``send_buf == recv_buf`` works in place."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    reduce_op = _reduce_op(op, dtype)
    count = _count(count, "count")
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    send = _buffer(send_buf, nbytes, "sendBuf", target, write=False)
    if recv_buf is send_buf and send.region.writable:  # in place: resolved once
        recv = send
    else:
        recv = _buffer(recv_buf, nbytes, "recvBuf", target, write=True)
    numpy_dtype = _reduction_type(dtype)
    options = _reduce_options("AllreduceOptions", reduce_op)
    if numpy_dtype in WIDER_CARRIERS or numpy_dtype == UINT64:
        def run() -> None:
            work = _load(send.view, numpy_dtype, reduce_op, into=recv.view)
            _wait(target.group.allreduce([transport.typed_tensor(work)], options), target)
            _store(work, recv.view, numpy_dtype, reduce_op)
    else:  # reduced in recv_buf's own memory (the common case: no carrier, see _load)
        tensors = [_recv_tensor(target, recv, numpy_dtype)]
        copy_in = send.region is not recv.region or send.offset != recv.offset

        def run() -> None:
            if copy_in:
                np.copyto(recv.view, send.view)
            _wait(target.group.allreduce(tensors, options), target)

    _enqueue(target, queue, "HcclAllReduce", nbytes, (send,) if recv is send else (send, recv),
             run)


@hccl_api
def broadcast(buf: int, count: int, data_type: int, root: int, comm: Any,
              stream: Any = None) -> None:
    """Copy ``count`` elements of ``buf`` from rank ``root`` to every rank (HcclBroadcast)."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    count = _count(count, "count")
    root = _rank(root, target, "root")
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    data = _buffer(buf, nbytes, "buf", target, write=True)

    def run() -> None:
        options = _options("BroadcastOptions", rootRank=root, rootTensor=0)
        _wait(target.group.broadcast([transport.byte_tensor(data.view)], options), target)

    _enqueue(target, queue, "HcclBroadcast", nbytes, (data,), run)


@hccl_api
def all_gather(send_buf: int, recv_buf: int, send_count: int, data_type: int, comm: Any,
               stream: Any = None) -> None:
    """Gather ``send_count`` elements of every rank, in rank order, into every rank's
    ``recv_buf`` (``send_count * rank_size`` elements) (HcclAllGather)."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    count = _count(send_count, "sendCount")
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    send = _buffer(send_buf, nbytes, "sendBuf", target, write=False)
    recv = _buffer(recv_buf, nbytes * target.size, "recvBuf", target, write=True)

    def run() -> None:
        chunks = [transport.byte_tensor(recv.view[r * nbytes:(r + 1) * nbytes])
                  for r in range(target.size)]
        _wait(target.group.allgather([chunks], [transport.byte_tensor(send.view)]), target)

    _enqueue(target, queue, "HcclAllGather", nbytes * target.size, (send, recv), run)


@hccl_api
def reduce_scatter(send_buf: int, recv_buf: int, recv_count: int, data_type: int, op: int,
                   comm: Any, stream: Any = None) -> None:
    """Reduce ``recv_count * rank_size`` elements over all ranks; rank r keeps block r in
    ``recv_buf`` (HcclReduceScatter)."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    reduce_op = _reduce_op(op, dtype)
    count = _count(recv_count, "recvCount")
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    send = _buffer(send_buf, nbytes * target.size, "sendBuf", target, write=False)
    recv = _buffer(recv_buf, nbytes, "recvBuf", target, write=True)
    numpy_dtype = _reduction_type(dtype)

    def run() -> None:
        work = _load(send.view, numpy_dtype, reduce_op)
        out = np.empty(count, work.dtype)
        blocks = [transport.typed_tensor(work[r * count:(r + 1) * count])
                  for r in range(target.size)]
        options = _reduce_options("ReduceScatterOptions", reduce_op)
        _wait(target.group.reduce_scatter([transport.typed_tensor(out)], [blocks], options),
              target)
        _store(out, recv.view, numpy_dtype, reduce_op)

    _enqueue(target, queue, "HcclReduceScatter", nbytes * target.size, (send, recv), run)


@hccl_api
def reduce(send_buf: int, recv_buf: int, count: int, data_type: int, op: int, root: int,
           comm: Any, stream: Any = None) -> None:
    """Reduce ``count`` elements over all ranks into ``recv_buf`` of rank ``root``
    (HcclReduce); other ranks may pass a null ``recv_buf``."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    reduce_op = _reduce_op(op, dtype)
    count = _count(count, "count")
    root = _rank(root, target, "root")
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    send = _buffer(send_buf, nbytes, "sendBuf", target, write=False)
    is_root = target.rank == root
    recv = _buffer(recv_buf, nbytes, "recvBuf", target, write=True) if is_root else None
    numpy_dtype = _reduction_type(dtype)

    def run() -> None:
        work = _load(send.view, numpy_dtype, reduce_op,
                     into=recv.view if recv is not None else None)
        options = _options("ReduceOptions", rootRank=root, rootTensor=0,
                           reduceOp=transport.reduce_op(TORCH_REDUCE_OPS[reduce_op]))
        _wait(target.group.reduce([transport.typed_tensor(work)], options), target)
        if recv is not None:
            _store(work, recv.view, numpy_dtype, reduce_op)

    buffers = (send,) if recv is None else (send, recv)
    _enqueue(target, queue, "HcclReduce", nbytes, buffers, run)


@hccl_api
def send(send_buf: int, count: int, data_type: int, dest_rank: int, comm: Any,
         stream: Any = None) -> None:
    """Send ``count`` elements to rank ``dest_rank``, which calls ``recv`` (HcclSend)."""
    _point_to_point("HcclSend", send_buf, "sendBuf", count, data_type, dest_rank, "destRank",
                    comm, stream)


@hccl_api
def recv(recv_buf: int, count: int, data_type: int, src_rank: int, comm: Any,
         stream: Any = None) -> None:
    """Receive ``count`` elements from rank ``src_rank``'s ``send`` (HcclRecv)."""
    _point_to_point("HcclRecv", recv_buf, "recvBuf", count, data_type, src_rank, "srcRank",
                    comm, stream)


def _point_to_point(name: str, buf: int, buf_argument: str, count: int, data_type: int,
                    peer_rank: int, peer_argument: str, comm: Any, stream: Any) -> None:
    """HcclSend (the peer receives ``buf``) or HcclRecv (``buf`` is written), validated in
    the arguments' order and enqueued as one task."""
    target = lookup(comm)
    dtype = _data_type(data_type)
    count = _count(count, "count")
    peer = _rank(peer_rank, target, peer_argument, not_self=True)
    queue = _stream(stream, target)
    if count == 0:
        return
    nbytes = count * data_type_size(dtype)
    receiving = name == "HcclRecv"
    data = _buffer(buf, nbytes, buf_argument, target, write=receiving)

    def run() -> None:  # the group as it is when the task runs, as every collective reads it
        transfer = target.group.recv if receiving else target.group.send
        _wait(transfer([transport.byte_tensor(data.view)], peer, P2P_TAG), target)

    _enqueue(target, queue, name, nbytes, (data,), run)


@hccl_api
def all_to_all_v(send_buf: int, send_counts: Any, sdispls: Any, send_type: int,
                 recv_buf: int, recv_counts: Any, rdispls: Any, recv_type: int, comm: Any,
                 stream: Any = None) -> None:
    """Send ``send_counts[j]`` elements from ``send_buf + sdispls[j]`` to rank j and receive
    ``recv_counts[i]`` elements from rank i at ``recv_buf + rdispls[i]`` (HcclAlltoAllV).
    Counts and displacements are in elements: sequences, or pointers to rank_size uint64s."""
    target = lookup(comm)
    stype = _data_type(send_type, "sendType")
    rtype = _data_type(recv_type, "recvType")
    if data_type_size(stype) != data_type_size(rtype) or stype is not rtype:
        raise HcclError(HCCL_E_PARA, f"argument 'recvType' = {rtype.name} differs from "
                                     f"argument 'sendType' = {stype.name}")
    size = target.size
    counts_out = _element_counts(send_counts, size, "sendCounts")
    displs_out = _element_counts(sdispls, size, "sdispls")
    counts_in = _element_counts(recv_counts, size, "recvCounts")
    displs_in = _element_counts(rdispls, size, "rdispls")
    queue = _stream(stream, target)
    item = data_type_size(stype)
    send_extent = max((d + c for d, c in zip(displs_out, counts_out, strict=True) if c),
                      default=0)
    recv_extent = max((d + c for d, c in zip(displs_in, counts_in, strict=True) if c),
                      default=0)
    buffers = []
    send = recv = None
    if send_extent:
        send = _buffer(send_buf, send_extent * item, "sendBuf", target, write=False)
        buffers.append(send)
    if recv_extent:
        recv = _buffer(recv_buf, recv_extent * item, "recvBuf", target, write=True)
        buffers.append(recv)

    def run() -> None:
        pieces = [send.view[d * item:(d + c) * item]
                  for d, c in zip(displs_out, counts_out, strict=True)] if send else []
        outgoing = np.concatenate(pieces) if pieces else np.empty(0, np.uint8)
        incoming = np.empty(sum(counts_in) * item, np.uint8)
        _wait(target.group.alltoall_base(transport.byte_tensor(incoming),
                                         transport.byte_tensor(outgoing),
                                         [c * item for c in counts_in],
                                         [c * item for c in counts_out],
                                         _options("AllToAllOptions")), target)
        start = 0
        for displacement, count in zip(displs_in, counts_in, strict=True):
            if count:
                recv.view[displacement * item:(displacement + count) * item] = \
                    incoming[start:start + count * item]
            start += count * item

    nbytes = (sum(counts_out) + sum(counts_in)) * item
    _enqueue(target, queue, "HcclAlltoAllV", nbytes, buffers, run)


@hccl_api
def barrier(comm: Any, stream: Any = None) -> None:
    """Block the stream until every rank of ``comm`` has reached its barrier (HcclBarrier)."""
    target = lookup(comm)
    queue = _stream(stream, target)

    def run() -> None:
        _wait(target.group.barrier(_options("BarrierOptions")), target)

    _enqueue(target, queue, "HcclBarrier", 0, (), run)


__all__ = [
    "all_gather",
    "all_reduce",
    "all_to_all_v",
    "barrier",
    "broadcast",
    "recv",
    "reduce",
    "reduce_scatter",
    "send",
]
