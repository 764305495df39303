"""One rank of a multi-process HCCL test: ``openacl launch -n N hccl_worker.py SCENARIO DIR``.

Each scenario checks its results against numpy on every rank and ends by printing
``PASS <scenario>``; any mismatch raises, which makes the rank (and the launch) fail.
``DIR`` is a scratch folder the ranks share (root info is handed over through a file there).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import openacl
from openacl import hccl, rt
from openacl.compat import acl
from openacl.compat import hccl as chccl
from openacl.util import numpy_to_ptr

COUNT = 37  # elements per collective: odd, so no size is accidentally a multiple of anything
EXEC_TIMEOUT_S = 30.0  # the collectives of a healthy run finish long before this
FILE_WAIT_S = 30.0  # longest wait for the root's file, seconds
POLL_S = 0.02
REDUCIBLE = [t for t in hccl.HcclDataType if hccl.constants.NUMPY_DTYPES[t] is not None
             and t not in hccl.collectives.NOT_REDUCIBLE]
OPS = list(hccl.HcclReduceOp)
RANK = int(os.environ.get("RANK", "0"))
SIZE = int(os.environ.get("WORLD_SIZE", "1"))


def np_type(data_type: hccl.HcclDataType) -> np.dtype:
    return hccl.constants.NUMPY_DTYPES[data_type]


def rank_data(data_type: hccl.HcclDataType, rank: int, count: int = COUNT,
              salt: int = 0) -> np.ndarray:
    """Values every rank can recompute for any rank: small integers (exact in every float
    type, products of 4 included), and for the wide unsigned types values above the signed
    range, so max/min over uint64 and wrapping sums are exercised."""
    dtype = np_type(data_type)
    rng = np.random.default_rng(1000 * rank + 7 * int(data_type) + salt)
    if dtype.kind == "u":
        values = rng.integers(0, 4, count).astype(dtype)
        if dtype.itemsize >= 2:
            top = np.array(np.iinfo(dtype).max, dtype)
            values[::5] = top - rng.integers(0, 3, values[::5].size).astype(dtype)
        return values
    values = rng.integers(-3, 4, count)
    if dtype.kind == "i" and dtype.itemsize >= 2:
        values[::7] = np.iinfo(dtype).max - rank  # sums wrap around
    return values.astype(dtype)


def expected(data_type: hccl.HcclDataType, op: hccl.HcclReduceOp, arrays: list) -> np.ndarray:
    dtype = np_type(data_type)
    stack = np.stack(arrays)
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        stack = stack.astype(np.float64)
    with np.errstate(over="ignore"):
        result = {hccl.HCCL_REDUCE_SUM: lambda: np.sum(stack, axis=0, dtype=stack.dtype),
                  hccl.HCCL_REDUCE_PROD: lambda: np.prod(stack, axis=0, dtype=stack.dtype),
                  hccl.HCCL_REDUCE_MAX: lambda: stack.max(axis=0),
                  hccl.HCCL_REDUCE_MIN: lambda: stack.min(axis=0)}[op]()
    return result.astype(dtype)


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    if got.dtype == ml_dtypes.bfloat16:
        got, want = got.astype(np.float32), want.astype(np.float32)
    if not np.array_equal(got, want):
        raise AssertionError(f"rank {RANK}: {name}: got {got[:8]}..., want {want[:8]}...")


def device(array: np.ndarray) -> openacl.DeviceBuffer:
    buffer = openacl.DeviceBuffer(max(array.nbytes, 1))
    buffer.copy_from(np.ascontiguousarray(array).view(np.uint8))
    return buffer


def read(buffer: openacl.DeviceBuffer, dtype: np.dtype, count: int) -> np.ndarray:
    return buffer.to_numpy(np.uint8)[:count * dtype.itemsize].view(dtype)


def shared_root_info(folder: Path, name: str) -> bytes:
    """Rank 0 makes root info and writes it; the others wait for the file."""
    path = folder / f"{name}.rootinfo"
    if RANK == 0:
        info = hccl.get_root_info()
        partial = path.with_suffix(".partial")
        partial.write_bytes(info)
        partial.rename(path)
        return info
    deadline = time.monotonic() + FILE_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(POLL_S)
    return path.read_bytes()


# -- scenarios ---------------------------------------------------------------------------------
def scenario_collectives(folder: Path, quick: bool = False) -> None:
    comm = hccl.comm_init_from_env(exec_timeout=EXEC_TIMEOUT_S)
    assert (hccl.get_rank_id(comm), hccl.get_rank_size(comm)) == (RANK, SIZE)
    stream = openacl.Stream()
    types = [hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_DATA_TYPE_INT32] if quick else REDUCIBLE
    # all_reduce: every reducible type and op, out of place, against numpy
    for data_type in types:
        for op in OPS:
            arrays = [rank_data(data_type, r) for r in range(SIZE)]
            send, recv = device(arrays[RANK]), openacl.DeviceBuffer(arrays[RANK].nbytes)
            hccl.all_reduce(send, recv, COUNT, data_type, op, comm, stream)
            stream.synchronize()
            check(f"all_reduce {data_type.name} {op.name}", read(recv, np_type(data_type),
                                                                 COUNT),
                  expected(data_type, op, arrays))
            check("all_reduce leaves sendBuf", read(send, np_type(data_type), COUNT),
                  arrays[RANK])
            send.free()
            recv.free()
    # in place (send == recv), including the widened and the sign-flipped carriers
    for data_type, op in [(hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM),
                          (hccl.HCCL_DATA_TYPE_INT16, hccl.HCCL_REDUCE_SUM),
                          (hccl.HCCL_DATA_TYPE_UINT64, hccl.HCCL_REDUCE_MAX)]:
        arrays = [rank_data(data_type, r, salt=1) for r in range(SIZE)]
        buffer = device(arrays[RANK])
        hccl.all_reduce(buffer, buffer, COUNT, data_type, op, comm, stream)
        stream.synchronize()
        check(f"in-place all_reduce {data_type.name}", read(buffer, np_type(data_type), COUNT),
              expected(data_type, op, arrays))
        buffer.free()
    # broadcast from every root: a float type, bfloat16, and INT128 (moved as bytes)
    for data_type in [hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_DATA_TYPE_BFP16,
                      hccl.HCCL_DATA_TYPE_INT128]:
        size = hccl.data_type_size(data_type)
        for root in range(SIZE):
            mine = np.random.default_rng(RANK * 31 + root).integers(0, 255, COUNT * size,
                                                                       dtype=np.uint8)
            theirs = np.random.default_rng(root * 31 + root).integers(0, 255, COUNT * size,
                                                                         dtype=np.uint8)
            buffer = device(mine)
            hccl.broadcast(buffer, COUNT, data_type, root, comm, stream)
            stream.synchronize()
            check(f"broadcast {data_type.name} root {root}", buffer.to_numpy(np.uint8), theirs)
            buffer.free()
    # all_gather, out of place and in place (sendBuf is this rank's block of recvBuf)
    for data_type in [hccl.HCCL_DATA_TYPE_INT8, hccl.HCCL_DATA_TYPE_FP16,
                      hccl.HCCL_DATA_TYPE_INT128]:
        size = hccl.data_type_size(data_type)
        blocks = [np.full(COUNT * size, r + 1, np.uint8) for r in range(SIZE)]
        send, recv = device(blocks[RANK]), openacl.DeviceBuffer(COUNT * size * SIZE)
        hccl.all_gather(send, recv, COUNT, data_type, comm, stream)
        stream.synchronize()
        check(f"all_gather {data_type.name}", recv.to_numpy(np.uint8), np.concatenate(blocks))
        inplace = device(np.zeros(COUNT * size * SIZE, np.uint8))
        rt.memcpy(int(inplace) + RANK * COUNT * size, COUNT * size, send, COUNT * size, 4)
        hccl.all_gather(int(inplace) + RANK * COUNT * size, inplace, COUNT, data_type, comm,
                        stream)
        stream.synchronize()
        check("in-place all_gather", inplace.to_numpy(np.uint8), np.concatenate(blocks))
        for buffer in (send, recv, inplace):
            buffer.free()
    # reduce_scatter: every op over a plain, a widened and the uint64 carrier
    for data_type in types[:2] if quick else [hccl.HCCL_DATA_TYPE_FP32,
                                              hccl.HCCL_DATA_TYPE_UINT16,
                                              hccl.HCCL_DATA_TYPE_UINT64]:
        for op in OPS:
            arrays = [rank_data(data_type, r, COUNT * SIZE, salt=2) for r in range(SIZE)]
            send, recv = device(arrays[RANK]), openacl.DeviceBuffer(arrays[RANK].nbytes)
            hccl.reduce_scatter(send, recv, COUNT, data_type, op, comm, stream)
            stream.synchronize()
            want = expected(data_type, op, arrays)[RANK * COUNT:(RANK + 1) * COUNT]
            check(f"reduce_scatter {data_type.name} {op.name}",
                  read(recv, np_type(data_type), COUNT), want)
            send.free()
            recv.free()
    # reduce to every root; the other ranks pass a null recvBuf
    for data_type, op in [(hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM),
                          (hccl.HCCL_DATA_TYPE_UINT64, hccl.HCCL_REDUCE_MIN)]:
        for root in range(SIZE):
            arrays = [rank_data(data_type, r, salt=3) for r in range(SIZE)]
            send = device(arrays[RANK])
            recv = openacl.DeviceBuffer(arrays[RANK].nbytes) if RANK == root else None
            hccl.reduce(send, recv or 0, COUNT, data_type, op, root, comm, stream)
            stream.synchronize()
            check("reduce leaves sendBuf", read(send, np_type(data_type), COUNT), arrays[RANK])
            if recv is not None:
                check(f"reduce {data_type.name} root {root}",
                      read(recv, np_type(data_type), COUNT), expected(data_type, op, arrays))
                recv.free()
            send.free()
    # send/recv around a ring, on two streams of this rank (sends and receives overlap)
    receiving = openacl.Stream()
    outgoing = device(np.full(COUNT, RANK, np.int64))
    incoming = openacl.DeviceBuffer(COUNT * 8)
    hccl.send(outgoing, COUNT, hccl.HCCL_DATA_TYPE_INT64, (RANK + 1) % SIZE, comm, stream)
    hccl.recv(incoming, COUNT, hccl.HCCL_DATA_TYPE_INT64, (RANK - 1) % SIZE, comm, receiving)
    stream.synchronize()
    receiving.synchronize()
    check("send/recv ring", incoming.to_numpy(np.int64), np.full(COUNT, (RANK - 1) % SIZE))
    # all_to_all_v: rank i sends j+1 elements to rank j, with gaps between the blocks
    item = np.dtype(np.int32)
    send_counts = [j + 1 for j in range(SIZE)]
    sdispls = [sum(send_counts[:j]) + 2 * j for j in range(SIZE)]
    recv_counts = [RANK + 1] * SIZE
    rdispls = [i * (RANK + 3) for i in range(SIZE)]
    outgoing_values = np.full(sdispls[-1] + send_counts[-1], -1, np.int32)
    for j in range(SIZE):
        outgoing_values[sdispls[j]:sdispls[j] + send_counts[j]] = 100 * RANK + j
    send = device(outgoing_values)
    recv = device(np.full(rdispls[-1] + recv_counts[-1], -7, np.int32))
    counts_in = np.array(recv_counts, np.uint64)  # one argument as a pointer to uint64s
    hccl.all_to_all_v(send, send_counts, sdispls, hccl.HCCL_DATA_TYPE_INT32, recv,
                      numpy_to_ptr(counts_in), rdispls, hccl.HCCL_DATA_TYPE_INT32, comm, stream)
    stream.synchronize()
    want = np.full(rdispls[-1] + recv_counts[-1], -7, np.int32)
    for i in range(SIZE):
        want[rdispls[i]:rdispls[i] + recv_counts[i]] = 100 * i + RANK
    check("all_to_all_v", read(recv, item, want.size), want)
    hccl.barrier(comm, stream)
    stream.synchronize()
    if not quick:
        _two_communicators_and_ordering(folder, comm, stream)
        _compat_face(folder)
    stream.destroy()
    receiving.destroy()
    comm.destroy()


def _two_communicators_and_ordering(folder: Path, comm: hccl.Communicator,
                                    stream: openacl.Stream) -> None:
    # a second communicator from root info, used on its own stream at the same time
    other = hccl.comm_init_root_info(SIZE, shared_root_info(folder, "second"), RANK,
                                     exec_timeout=EXEC_TIMEOUT_S)
    second = openacl.Stream()
    a, b = device(np.full(COUNT, RANK + 1, np.float32)), device(np.full(COUNT, 10.0, np.float32))
    hccl.all_reduce(a, a, COUNT, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm, stream)
    hccl.all_reduce(b, b, COUNT, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_MAX, other, second)
    stream.synchronize()
    second.synchronize()
    check("first communicator", a.to_numpy(np.float32), np.full(COUNT, SIZE * (SIZE + 1) / 2))
    check("second communicator", b.to_numpy(np.float32), np.full(COUNT, 10.0))
    # stream order: a late memcpy_async into sendBuf, then the collective, then an event
    host = np.full(COUNT, RANK + 5, np.float32)
    late = threading.Event()
    stream.launch_host_func(lambda: (time.sleep(0.2), late.set()))
    rt.memcpy_async(a, COUNT * 4, numpy_to_ptr(host), COUNT * 4, 1, stream)
    hccl.all_reduce(a, b, COUNT, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, other, stream)
    done = stream.record()
    done.synchronize()
    assert late.is_set()
    check("collective after memcpy_async", b.to_numpy(np.float32),
          np.full(COUNT, sum(r + 5 for r in range(SIZE)), np.float32))
    done.destroy()
    second.destroy()
    other.destroy()
    a.free()
    b.free()


def _compat_face(folder: Path) -> None:
    info, ret = chccl.HcclGetRootInfo() if RANK == 0 else (None, 0)
    assert ret == chccl.HCCL_SUCCESS
    if RANK == 0:
        (folder / "compat.rootinfo.partial").write_bytes(info)
        (folder / "compat.rootinfo.partial").rename(folder / "compat.rootinfo")
    info = shared_root_info(folder, "compat")
    comm, ret = chccl.HcclCommInitRootInfo(SIZE, info, RANK)
    assert ret == 0 and isinstance(comm, int) and comm != 0, (comm, ret)
    assert chccl.HcclGetRankSize(comm) == (SIZE, 0)
    assert chccl.HcclGetRankId(comm) == (RANK, 0)
    stream, ret = acl.rt.create_stream()
    buffer = device(np.full(COUNT, RANK, np.int32))
    ret = chccl.HcclAllReduce(int(buffer), int(buffer), COUNT, chccl.HCCL_DATA_TYPE_INT32,
                              chccl.HCCL_REDUCE_SUM, comm, stream)
    assert ret == 0, (ret, chccl.get_recent_err_msg())
    assert acl.rt.synchronize_stream(stream) == 0
    check("HcclAllReduce", buffer.to_numpy(np.int32), np.full(COUNT, sum(range(SIZE))))
    ret = chccl.HcclAllReduce(int(buffer), int(buffer), COUNT + 1, chccl.HCCL_DATA_TYPE_INT32,
                              chccl.HCCL_REDUCE_SUM, comm, stream)
    message = chccl.get_recent_err_msg()
    assert ret == chccl.HCCL_E_PARA and "HCCL_E_PARA (1)" in message, (ret, message)
    assert chccl.HcclBarrier(comm, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert chccl.HcclCommDestroy(comm) == 0
    assert chccl.HcclCommDestroy(comm) == chccl.HCCL_E_PARA
    assert acl.rt.destroy_stream(stream) == 0
    buffer.free()


def scenario_peer_exits(folder: Path) -> None:
    """Rank 1 leaves right after joining; rank 0's collective fails, it does not hang."""
    comm = hccl.comm_init_from_env(exec_timeout=EXEC_TIMEOUT_S)
    if RANK == 1:
        os._exit(0)  # a clean exit: the launcher must keep rank 0 running to see its error
    time.sleep(0.3)
    buffer = device(np.ones(COUNT, np.float32))
    stream, bystander = openacl.Stream(), openacl.Stream()
    start = time.monotonic()
    hccl.all_reduce(buffer, buffer, COUNT, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM,
                    comm, stream)
    try:
        stream.synchronize()
    except openacl.AclError as exc:
        assert exc.code in set(hccl.STREAM_FAILURE_CODES.values()), exc
        assert "HCCL_E_" in exc.message and "HcclAllReduce" in exc.message, exc
    else:
        raise AssertionError("all_reduce with a dead peer succeeded")
    elapsed = time.monotonic() - start
    assert elapsed < EXEC_TIMEOUT_S, elapsed
    bystander.launch_host_func(lambda: None)
    bystander.synchronize()  # other streams are unaffected
    print(f"dead peer detected after {elapsed:.2f} s")


def scenario_stalled_peer(folder: Path) -> None:
    """Rank 1 stays alive but never calls: rank 0 times out after HCCL_EXEC_TIMEOUT."""
    exec_timeout = float(os.environ["HCCL_EXEC_TIMEOUT"])
    comm = hccl.comm_init_from_env()
    p2p = hccl.comm_init_from_env(name="p2p")
    done = folder / "stalled.done"
    if RANK == 1:  # alive, never calling: until rank 0 is done (bounded)
        deadline = time.monotonic() + FILE_WAIT_S
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return
    buffer = device(np.ones(COUNT, np.float32))
    for name, call in [
        ("HcclAllReduce", lambda s: hccl.all_reduce(buffer, buffer, COUNT,
                                                    hccl.HCCL_DATA_TYPE_FP32,
                                                    hccl.HCCL_REDUCE_SUM, comm, s)),
        ("HcclRecv", lambda s: hccl.recv(buffer, COUNT, hccl.HCCL_DATA_TYPE_FP32, 1, p2p, s)),
    ]:
        stream = openacl.Stream()
        start = time.monotonic()
        call(stream)
        try:
            stream.synchronize()
        except openacl.AclError as exc:
            elapsed = time.monotonic() - start
            assert exc.code == openacl.errors.ACL_ERROR_RT_TASK_TIMEOUT, exc
            assert exc.message.startswith("stream") and "HCCL_E_TIMEOUT" in exc.message, exc
            assert name in exc.message, exc
            assert exec_timeout * 0.8 <= elapsed < exec_timeout + 5, elapsed
        else:
            raise AssertionError(f"{name} with a stalled peer succeeded")
    done.touch()


def scenario_cluster(folder: Path) -> None:
    """HcclCommInitClusterInfo over a rank table file."""
    comm = hccl.comm_init_cluster_info(os.environ["RANK_TABLE_FILE"], RANK,
                                       exec_timeout=EXEC_TIMEOUT_S)
    assert (comm.rank, comm.size) == (RANK, SIZE)
    buffer = device(np.full(COUNT, 2.0 ** RANK, np.float64))
    hccl.all_reduce(buffer, buffer, COUNT, hccl.HCCL_DATA_TYPE_FP64, hccl.HCCL_REDUCE_PROD,
                    comm)
    rt.synchronize_stream(0)
    check("cluster all_reduce", buffer.to_numpy(np.float64),
          np.full(COUNT, 2.0 ** sum(range(SIZE))))
    comm.destroy()
    buffer.free()


SCENARIOS = {
    "collectives": scenario_collectives,
    "quick": lambda folder: scenario_collectives(folder, quick=True),
    "peer_exits": scenario_peer_exits,
    "stalled_peer": scenario_stalled_peer,
    "cluster": scenario_cluster,
}


def main() -> None:
    name, folder = sys.argv[1], Path(sys.argv[2])
    openacl.init()
    rt.set_device(0)
    SCENARIOS[name](folder)
    print(f"PASS {name}")


if __name__ == "__main__":
    main()
