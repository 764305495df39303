"""Communicators: HCCL's rank groups, each one torch.distributed process group of its own.

Design note (invariants)
------------------------
* A ``Communicator`` owns one gloo process group built over its own key space of a store
  (a ``PrefixStore``), never the process-wide default group: communicators are independent,
  any number may exist at once, and building one needs only its own ranks.
* Root info (``get_root_info``) is ``HCCL_ROOT_INFO_BYTES`` opaque bytes holding a magic
  word, the address and port of a TCP store served by the process that made it, and a
  random unique id that names the communicator's key space. That process keeps the store
  served until it exits; every rank, the root included, builds its communicator from the
  bytes (``comm_init_root_info``). One root info makes one communicator, as in CANN.
* ``comm_init_cluster_info`` (a rank table file) and ``comm_init_from_env`` (torchrun's
  variables, as ``openacl launch`` sets them) rendezvous at a fixed address instead: the
  rank-0 process serves the store. Their key space is named by the table's contents (or the
  name given) and a per-process count of such communicators, so every rank must build them
  in the same order, as it must issue collectives in the same order.
* Threads: building a communicator blocks the calling thread until all ranks have joined
  (``HCCL_CONNECT_TIMEOUT``). Collectives run on the worker threads of the streams they are
  enqueued on (``collectives.py``); the registry of handles is guarded by one lock, taken
  only to add, find or remove an entry. A communicator's collectives must reach it in the
  same order on every rank: issuing them from two streams at once makes that order a race
  (on CANN too); give each concurrent stream its own communicator.
* Failure: a rank that dies or stops participating makes its peers' collectives fail after
  at most ``HCCL_EXEC_TIMEOUT`` seconds (a closed connection fails them at once), never hang.
* A communicator is bound to the device that was current when it was built; its
  collectives take streams and buffers of that device only.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import math
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from openacl.errors import (
    HCCL_E_OPEN_FILE_FAILURE,
    HCCL_E_PARA,
    HCCL_E_PTR,
    HCCL_E_TCP_CONNECT,
    HCCL_E_TIMEOUT,
)
from openacl.hccl import transport
from openacl.hccl.constants import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_EXEC_TIMEOUT_S,
    HCCL_CONNECT_TIMEOUT_ENV,
    HCCL_EXEC_TIMEOUT_ENV,
    HCCL_ROOT_INFO_BYTES,
)
from openacl.hccl.result import HcclError, bad_argument, classify, hccl_api
from openacl.runtime import core
from openacl.runtime.context import current_context
from openacl.runtime.device import device as device_of

ROOT_INFO_MAGIC = b"OpenACL-HCCL-v1\0"  # first bytes of every root info we make
_ROOT_INFO_HEAD = struct.Struct("<16sH16s")  # magic, port, unique id; then the host, NUL-ended
ROOT_HOST_ENV = "HCCL_IF_IP"  # CANN's variable for the address HCCL listens on
DEFAULT_ROOT_HOST = "127.0.0.1"
BASE_PORT_ENV = "HCCL_IF_BASE_PORT"  # CANN's variable; here: the rank-table rendezvous port
DEFAULT_BASE_PORT = 60000  # CANN's default HCCL_IF_BASE_PORT
EPHEMERAL_PORT = 0  # ask the OS for a free port
FIRST_HANDLE = 0x4843_0001  # handles of communicators ("HC"), never 0 (a null HcclComm)
ENV_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RANK_TABLE_MAX_BYTES = 16 << 20  # largest rank table file read, bytes
LISTEN_POLL_S = 0.01  # how often a rank probes for its rendezvous store, seconds

_lock = threading.Lock()
_comms: dict[int, Communicator] = {}
_handles = itertools.count(FIRST_HANDLE)
_root_stores: dict[bytes, Any] = {}  # unique id -> the TCP store this process serves
_fixed_stores: dict[tuple[str, int], Any] = {}  # (host, port) -> store of env/rank-table inits
_fixed_counts: dict[str, int] = {}  # key space name -> communicators built from it here


class Communicator:
    """An HCCL communicator (HcclComm): ``rank`` of ``size`` ranks, bound to ``device_id``.

    ``int(comm)`` is its handle (what the compat face returns); ``with comm:`` destroys it
    at the end of the block.
    """

    def __init__(self, group: Any, rank: int, size: int, device_id: int,
                 exec_timeout_s: float, store: Any, label: str) -> None:
        self.group = group
        self.rank = rank
        self.size = size
        self.device_id = device_id
        self.exec_timeout_s = exec_timeout_s
        self.exec_timeout = transport.timedelta(exec_timeout_s)  # what each collective waits
        self.tensors: dict[tuple, tuple[Any, Any]] = {}  # collectives.py's view cache
        self.store = store  # keeps the rendezvous store alive as long as the group
        self.label = label
        self.destroyed = False
        with _lock:
            self.handle = next(_handles)
            _comms[self.handle] = self

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        state = " destroyed" if self.destroyed else ""
        return (f"<Communicator {self.handle:#x} rank {self.rank} of {self.size} "
                f"device={self.device_id} {self.label}{state}>")

    def describe(self) -> str:
        return f"communicator {self.handle:#x} (rank {self.rank} of {self.size})"

    def destroy(self) -> None:
        """Release the process group (HcclCommDestroy); later use of the handle fails."""
        comm_destroy(self)

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.destroyed:
            self.destroy()


# -- arguments ------------------------------------------------------------------------------------
def lookup(comm: Any, argument: str = "comm") -> Communicator:
    """The live ``Communicator`` meant by a handle or object; null is ``HCCL_E_PTR``."""
    if isinstance(comm, Communicator):
        target = comm
    else:
        if comm is None or (isinstance(comm, int) and comm == 0):
            raise bad_argument(argument, comm, "a null communicator", HCCL_E_PTR)
        handle = core.as_index(comm)
        with _lock:
            target = _comms.get(handle) if handle is not None else None
        if target is None:
            raise bad_argument(argument, comm, "not a communicator handle (destroyed, or "
                               "never made by HcclCommInit*)")
    if target.destroyed:
        raise bad_argument(argument, target.handle, "the communicator was destroyed")
    return target


def _positive_int(value: Any, argument: str) -> int:
    number = core.as_index(value)
    if number is None or number < 1:
        raise bad_argument(argument, value, "expected an integer >= 1")
    return number


def _rank_in(value: Any, size: int, argument: str) -> int:
    number = core.as_index(value)
    if number is None or not 0 <= number < size:
        raise bad_argument(argument, value, f"expected a rank in [0, {size})")
    return number


def _seconds(value: Any, env: str, default: float, argument: str) -> float:
    """A timeout in seconds: the argument, else the environment variable, else CANN's default."""
    source = argument
    if value is None:
        value, source = os.environ.get(env), env
        if value is None:
            return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise bad_argument(source, value, "expected a positive number of seconds")
    return seconds


def _timeouts(connect_timeout: Any, exec_timeout: Any) -> tuple[float, float]:
    return (_seconds(connect_timeout, HCCL_CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT_S,
                     "connect_timeout"),
            _seconds(exec_timeout, HCCL_EXEC_TIMEOUT_ENV, DEFAULT_EXEC_TIMEOUT_S,
                     "exec_timeout"))


def _current_device_id() -> int:
    """The device of the calling thread's current context (HCCL needs aclrtSetDevice first)."""
    context = current_context()
    transport.transport_for(context.device.runtime.config.backend)
    return context.device.id


# -- building --------------------------------------------------------------------------------------
def _build(store: Any, key_space: str, rank: int, size: int, device_id: int,
           connect_s: float, exec_s: float, what: str) -> Communicator:
    """Rendezvous ``rank`` of ``size`` in ``key_space`` of ``store``; the communicator."""
    _, dist = transport.torch_distributed()
    prefixed = dist.PrefixStore(f"openacl-hccl/{key_space}/", store)
    try:
        group = transport.new_process_group(prefixed, rank, size, connect_s, exec_s)
    except Exception as exc:  # noqa: BLE001 - the transport's errors are plain RuntimeErrors
        code = HCCL_E_TIMEOUT if classify(exc) == HCCL_E_TIMEOUT else HCCL_E_TCP_CONNECT
        raise HcclError(code, f"{what}: rank {rank} of {size} could not join within "
                              f"{connect_s:g} s ({HCCL_CONNECT_TIMEOUT_ENV}): "
                              f"{type(exc).__name__}: {exc}") from exc
    return Communicator(group, rank, size, device_id, exec_s, store, key_space)


def _await_listener(host: str, port: int, timeout_s: float) -> None:
    """Wait until something accepts connections at ``host:port`` (polling every
    ``LISTEN_POLL_S``), so a rank that starts before its root need not sit out the store
    client's retry backoff; returns at the deadline either way (the store then reports)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=LISTEN_POLL_S):
                return
        except OSError:
            time.sleep(LISTEN_POLL_S)


def _tcp_store(host: str, port: int, is_master: bool, connect_s: float, what: str) -> Any:
    _, dist = transport.torch_distributed()
    if not is_master:
        _await_listener(host, port, connect_s)
    try:
        return dist.TCPStore(host, port, None, is_master, transport.timedelta(connect_s),
                             wait_for_workers=False)
    except Exception as exc:  # noqa: BLE001 - the transport's errors are plain RuntimeErrors
        role = "serve" if is_master else "reach"
        raise HcclError(HCCL_E_TCP_CONNECT, f"{what}: cannot {role} the rendezvous store at "
                                            f"{host}:{port}: {type(exc).__name__}: {exc}"
                        ) from exc


def _fixed_store(host: str, port: int, is_master: bool, connect_s: float, what: str) -> Any:
    """The one store this process uses for rendezvous at ``host:port`` (made on first use)."""
    key = (host, port)
    with _lock:
        store = _fixed_stores.get(key)
    if store is None:
        store = _tcp_store(host, port, is_master, connect_s, what)
        with _lock:
            store = _fixed_stores.setdefault(key, store)
    return store


def _next_key_space(name: str) -> str:
    with _lock:
        count = _fixed_counts.get(name, 0)
        _fixed_counts[name] = count + 1
    return f"{name}/{count}"


@hccl_api
def get_root_info() -> bytes:
    """Root info for a new communicator (HcclGetRootInfo): ``HCCL_ROOT_INFO_BYTES`` bytes to
    hand to every rank's ``comm_init_root_info``. This process serves the rendezvous: at
    ``HCCL_IF_IP`` (default 127.0.0.1) on a free port."""
    _current_device_id()
    host = os.environ.get(ROOT_HOST_ENV) or DEFAULT_ROOT_HOST
    host_bytes = host.encode("ascii", "replace")
    room = HCCL_ROOT_INFO_BYTES - _ROOT_INFO_HEAD.size - 1
    if len(host_bytes) > room:
        raise bad_argument(ROOT_HOST_ENV, host, f"longer than {room} bytes")
    connect_s, _ = _timeouts(None, None)
    store = _tcp_store(host, EPHEMERAL_PORT, True, connect_s, "HcclGetRootInfo")
    unique_id = uuid.uuid4().bytes
    with _lock:
        _root_stores[unique_id] = store
    head = _ROOT_INFO_HEAD.pack(ROOT_INFO_MAGIC, store.port, unique_id)
    return (head + host_bytes).ljust(HCCL_ROOT_INFO_BYTES, b"\0")


def _parse_root_info(root_info: Any) -> tuple[str, int, bytes]:
    try:
        data = bytes(memoryview(root_info).cast("B"))
    except TypeError:
        raise bad_argument("rootInfo", root_info, "expected the bytes HcclGetRootInfo "
                           "returned") from None
    if len(data) != HCCL_ROOT_INFO_BYTES or not data.startswith(ROOT_INFO_MAGIC):
        raise bad_argument("rootInfo", data[:len(ROOT_INFO_MAGIC)],
                           f"not root info from HcclGetRootInfo ({len(data)} bytes, expected "
                           f"{HCCL_ROOT_INFO_BYTES} starting with {ROOT_INFO_MAGIC!r})")
    _, port, unique_id = _ROOT_INFO_HEAD.unpack_from(data)
    host = data[_ROOT_INFO_HEAD.size:].split(b"\0", 1)[0].decode("ascii", "replace")
    return host, port, unique_id


@hccl_api
def comm_init_root_info(n_ranks: int, root_info: Any, rank: int,
                        connect_timeout: float | None = None,
                        exec_timeout: float | None = None) -> Communicator:
    """Join rank ``rank`` of ``n_ranks`` to the communicator of ``root_info``
    (HcclCommInitRootInfo); blocks until every rank has joined.

    Timeouts are seconds; None reads ``HCCL_CONNECT_TIMEOUT`` / ``HCCL_EXEC_TIMEOUT``.
    """
    size = _positive_int(n_ranks, "nRanks")
    rank = _rank_in(rank, size, "rank")
    host, port, unique_id = _parse_root_info(root_info)
    connect_s, exec_s = _timeouts(connect_timeout, exec_timeout)
    device_id = _current_device_id()
    with _lock:
        store = _root_stores.get(unique_id)
    what = "HcclCommInitRootInfo"
    if store is None:
        store = _tcp_store(host, port, False, connect_s, what)
    return _build(store, f"root/{unique_id.hex()}", rank, size, device_id, connect_s, exec_s,
                  what)


def _read_rank_table(path: Any) -> tuple[dict[int, tuple[str, int]], str]:
    """Rank id -> (server address, device id) of a rank table file, and its digest."""
    try:
        with open(os.fspath(path), "rb") as table:
            raw = table.read(RANK_TABLE_MAX_BYTES + 1)
    except (OSError, TypeError) as exc:
        raise bad_argument("clusterInfo", path, f"cannot read the rank table: {exc}",
                           HCCL_E_OPEN_FILE_FAILURE) from None
    try:
        if len(raw) > RANK_TABLE_MAX_BYTES:
            raise ValueError(f"larger than {RANK_TABLE_MAX_BYTES} bytes")
        ranks = {}
        for server in json.loads(raw)["server_list"]:
            for entry in server["device"]:
                ranks[int(entry["rank_id"])] = (str(server["server_id"]),
                                                int(entry["device_id"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise bad_argument("clusterInfo", path, f"not a rank table (server_list[].device[] "
                           f"with rank_id and device_id): {type(exc).__name__}: {exc}"
                           ) from None
    if sorted(ranks) != list(range(len(ranks))) or not ranks:
        raise bad_argument("clusterInfo", path, f"rank ids {sorted(ranks)} are not 0..n-1")
    return ranks, hashlib.sha256(raw).hexdigest()[:16]


@hccl_api
def comm_init_cluster_info(cluster_info: str, rank: int,
                           connect_timeout: float | None = None,
                           exec_timeout: float | None = None) -> Communicator:
    """Join rank ``rank`` of the rank table file ``cluster_info`` (HcclCommInitClusterInfo).

    The table is CANN's JSON (``server_list`` of ``server_id`` and ``device`` entries with
    ``device_id`` and ``rank_id``). Rank 0's server serves the rendezvous on port
    ``HCCL_IF_BASE_PORT`` (default 60000).
    """
    ranks, digest = _read_rank_table(cluster_info)
    rank = _rank_in(rank, len(ranks), "rank")
    connect_s, exec_s = _timeouts(connect_timeout, exec_timeout)
    device_id = _current_device_id()
    port_text = os.environ.get(BASE_PORT_ENV, str(DEFAULT_BASE_PORT))
    port = int(port_text) if port_text.isdigit() else None
    if port is None or not 0 < port < 1 << 16:
        raise bad_argument(BASE_PORT_ENV, port_text, "expected a TCP port in [1, 65535]")
    what = "HcclCommInitClusterInfo"
    store = _fixed_store(ranks[0][0], port, rank == 0, connect_s, what)
    return _build(store, _next_key_space(f"table/{digest}"), rank, len(ranks), device_id,
                  connect_s, exec_s, what)


@hccl_api
def comm_init_from_env(name: str = "world", connect_timeout: float | None = None,
                       exec_timeout: float | None = None) -> Communicator:
    """A communicator of every rank started by ``openacl launch`` (or torchrun): RANK of
    WORLD_SIZE, rendezvous at MASTER_ADDR:MASTER_PORT. ``name`` separates several."""
    values = {}
    for variable in ENV_VARIABLES:
        value = os.environ.get(variable)
        if value is None:
            raise HcclError(HCCL_E_PARA, f"environment variable {variable} is not set "
                            f"(start the program with `openacl launch -n N`)")
        values[variable] = value
    size = _positive_int(_env_int(values, "WORLD_SIZE"), "WORLD_SIZE")
    rank = _rank_in(_env_int(values, "RANK"), size, "RANK")
    port = _env_int(values, "MASTER_PORT")
    connect_s, exec_s = _timeouts(connect_timeout, exec_timeout)
    device_id = _current_device_id()
    what = f"comm_init_from_env({name!r})"
    store = _fixed_store(values["MASTER_ADDR"], port, rank == 0, connect_s, what)
    return _build(store, _next_key_space(f"env/{name}"), rank, size, device_id, connect_s,
                  exec_s, what)


def _env_int(values: dict[str, str], variable: str) -> int:
    text = values[variable]
    try:
        return int(text)
    except ValueError:
        raise bad_argument(variable, text, "expected an integer") from None


@hccl_api
def comm_init_all(n_devices: int, devices: Sequence[int],
                  connect_timeout: float | None = None,
                  exec_timeout: float | None = None) -> list[Communicator]:
    """One communicator per device of this process, rank i on ``devices[i]``
    (HcclCommInitAll). Their collectives must go to streams of their own devices."""
    count = _positive_int(n_devices, "ndev")
    try:
        device_ids = [core.as_index(d) for d in devices]
    except TypeError:
        raise bad_argument("devices", devices, "expected a sequence of device ids") from None
    if len(device_ids) != count:
        raise bad_argument("devices", devices, f"expected {count} device ids (ndev)")
    if len(set(device_ids)) != count:
        raise bad_argument("devices", devices, "a device is listed twice")
    for device_id in device_ids:
        device_of(device_id, "devices")
    transport.transport_for(core.current().config.backend)
    connect_s, exec_s = _timeouts(connect_timeout, exec_timeout)
    _, dist = transport.torch_distributed()
    store = dist.HashStore()
    key_space = f"all/{uuid.uuid4().hex}"
    results: list[Any] = [None] * count

    def join(rank: int) -> None:  # every rank must be joining at once: one thread each
        try:
            results[rank] = _build(store, key_space, rank, count, device_ids[rank],
                                   connect_s, exec_s, "HcclCommInitAll")
        except HcclError as exc:
            results[rank] = exc

    threads = [threading.Thread(target=join, args=(rank,), name=f"hccl-init-{rank}")
               for rank in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failures = [r for r in results if isinstance(r, HcclError)]
    if failures:
        for made in results:
            if isinstance(made, Communicator):
                made.destroy()
        raise failures[0]
    return results


# -- queries and destruction --------------------------------------------------------------------
@hccl_api
def get_rank_size(comm: Any) -> int:
    """The number of ranks of ``comm`` (HcclGetRankSize)."""
    return lookup(comm).size


@hccl_api
def get_rank_id(comm: Any) -> int:
    """This process's rank in ``comm`` (HcclGetRankId)."""
    return lookup(comm).rank


@hccl_api
def comm_destroy(comm: Any) -> None:
    """Destroy ``comm`` (HcclCommDestroy). Synchronize its streams first: queued collectives
    still run, but nothing new may use the handle."""
    _release(lookup(comm))


def _release(target: Communicator) -> None:
    """Shut the group down and drop it now: a gloo group still alive at interpreter exit
    may abort the process ("terminate called without an active exception")."""
    with _lock:
        target.destroyed = True
        _comms.pop(target.handle, None)
        group, target.group = target.group, None
        target.tensors.clear()
    try:
        group.shutdown()
    except Exception:  # noqa: BLE001 - a peer already gone must not fail a destroy
        pass
    del group


@atexit.register
def _release_all() -> None:
    """Release the communicators a program did not destroy (see ``_release``)."""
    with _lock:
        live = list(_comms.values())
    for target in live:
        _release(target)


def free_port(host: str = DEFAULT_ROOT_HOST) -> int:
    """A TCP port that was free on ``host`` a moment ago (for a rendezvous to take)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, EPHEMERAL_PORT))
        return probe.getsockname()[1]


__all__ = [
    "Communicator",
    "comm_destroy",
    "comm_init_all",
    "comm_init_cluster_info",
    "comm_init_from_env",
    "comm_init_root_info",
    "free_port",
    "get_rank_id",
    "get_rank_size",
    "get_root_info",
    "lookup",
]
