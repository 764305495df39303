"""The sanitizer: shadow state of device memory and a happens-before order (msSanitizer).

Turned on by ``init`` when the config says so: ``OPENACL_SANITIZE=<spec>`` in the
environment (what ``openacl sanitize -- python app.py`` sets for its child) or the
``sanitize`` key of an init config. ``<spec>`` is a comma-separated list of tools
(``memcheck``, ``racecheck``, ``initcheck``, ``synccheck``; none named: ``memcheck``) and
optionally ``leak-check`` (``leak-check=yes`` / ``=no``): ``OPENACL_SANITIZE=memcheck,leak-check``.
``finalize`` (or, for a program that never finalizes, an atexit handler) writes the findings:
as JSON lines to ``sanitize-<pid>-<n>.jsonl`` in the directory ``OPENACL_SANITIZE_OUTPUT``
names (``cli/sanitize.py`` sets it and prints them), else as msSanitizer-style text on stderr.

What each tool finds
--------------------
* memcheck: illegal reads and writes (a kernel's ``global_buffer`` or a copy or fill past an
  allocation, a wild or freed pointer), multi-core corruption (two blocks of one kernel launch
  writing the same bytes), illegal and double frees, host access to device memory through
  ``ptr_to_numpy`` / ``ptr_to_bytes``, a memcpy ``kind`` the pointers contradict; with
  ``leak-check``, allocations never freed, with their malloc call sites.
* racecheck: two accesses to the same device bytes, one a write, on different streams (or a
  stream and the host) with no happens-before order between them.
* initcheck: reads of device bytes nothing wrote (a copy from them, an aclnn input, a kernel
  view the block never wrote).

Accesses come from memcpy / memset (sync and async), aclnn executor launches (which also
carry aclop programs and model steps), custom kernels and ``memory.read_bytes`` (the host
reading an aclop value input or a model's dynamic-batch input, or a staged model's task
reading its inputs); a model launch's own buffers are reached by its async copies.
* synccheck: a stream destroyed, or its device reset or the runtime finalized, with work
  still queued; a wait on (or synchronize of) an event that was never recorded.

Design note (invariants)
------------------------
* Zero cost when off: every hook is ``if sanitizer.active:`` (one module attribute read);
  nothing is allocated, wrapped or poisoned otherwise. ``active`` changes only in ``start``
  and ``stop`` (under ``_lock``).
* What is shadowed: each live device allocation (``malloc``) has an ``_Allocation``: its
  region, malloc call site, a ``written`` byte map (numpy bool, initcheck only) and a bounded
  list of recent accesses ``(lo, hi, write, key, value, site)`` (racecheck). Host allocations
  keep only their call site (leak check). At malloc the bytes are filled with
  ``POISON_BYTE``: a read of bytes the map says are unwritten but that no longer hold the
  poison was preceded by a writer the hooks do not see (a model run, a host view, a
  collective), so it is not reported; judged by ``POISON_WORD``-byte words, so a written
  byte that happens to equal the poison is not mistaken for an unwritten one. Bytes a
  kernel writes are found by comparing each ``global_buffer`` view with a snapshot taken
  when it was made (by elements: a store writes whole ones); under the sanitizer a launch
  runs its blocks one after another on the stream's worker, so every change is the running
  block's. A store of the value already there is not seen.
* Happens-before: vector clocks. Key ``HOST_KEY`` is the host (all host threads count as one
  agent: that can only hide races, never invent one), and every stream gets a key at first
  use. An access is stamped ``(key, value)``: a stream task's value on its timeline, or the
  host's access counter. ``stream_clock[key]`` is what the stream's next task knows: a submit
  joins the host's clock into it (the host's earlier work precedes the task), an event record
  snapshots it with ``key: value``, a stream wait joins that snapshot. Synchronizing a stream
  or an event, a query that finds it complete, and a destroy that drained it join it into the
  host's clock. Access ``a`` happens before access ``b`` iff ``b``'s clock has
  ``clock[a.key] >= a.value``; two accesses to overlapping bytes, one a write, neither before
  the other, are a race. Every HB edge is a real wait, so an ordered access also runs later,
  and recording accesses when they run (on the worker, or the host for synchronous calls)
  sees every conflicting pair.
* Threads and locks: hooks run on host threads (malloc, free, synchronous copies, submits,
  synchronizes) and on stream workers (the accesses of a task, recorded right before it
  runs; a kernel's writes, after each block). All shadow state, clocks and findings are
  guarded by one re-entrant ``_State.lock``; no other lock is taken while it is held (pointer
  lookups and byte comparisons happen before it is taken). The running task's context
  (its stamp and clock) and the running block's views are thread-local (``_tls``).
* Findings are deduplicated by kind and call sites (``count`` says how often) and capped at
  ``MAX_FINDINGS``; call sites are the first frame outside the openacl package.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import sys
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.runtime.frames import in_package

__all__ = [
    "DEFAULT_TOOL", "ENV_VAR", "LEAK_CHECK", "OUTPUT_ENV_VAR", "POISON_BYTE", "POISON_WORD",
    "SEVERITIES",
    "TOOLS", "Options", "active", "begin_block", "call_site", "check_kind", "current_task",
    "end_block", "run_as",
    "findings", "format_finding", "format_report", "global_buffer_view", "host_access",
    "host_accesses", "illegal_access", "is_records_file", "label", "on_event_wait",
    "on_free", "on_host_join", "on_malloc", "on_malloc_host", "on_record", "on_stream_shutdown",
    "on_unrecorded_event", "parse_spec", "read_records", "spec_string", "start", "stop",
    "wrap",
]

ENV_VAR = "OPENACL_SANITIZE"  # the tools to run; read by runtime/config.py
OUTPUT_ENV_VAR = "OPENACL_SANITIZE_OUTPUT"  # directory for the JSON-lines findings
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
DEFAULT_TOOL = "memcheck"  # msSanitizer's default
LEAK_CHECK = "leak-check"
SEVERITIES = ("info", "warn", "error")  # msSanitizer's --log-level values, lowest first
POISON_BYTE = 0xA5  # fills fresh device allocations (see the design note)
POISON_WORD = 4  # bytes judged together when telling written memory from the poison
MAX_FINDINGS = 1000  # distinct findings kept per process; more are only counted
MAX_ACCESSES = 64  # recent accesses kept per allocation for racecheck
FREED_HISTORY = 4096  # freed allocations remembered to name a double free's first free
HOST_KEY = 0  # the host's entry in a vector clock; streams get 1, 2, ...
RECORDS_PREFIX = "sanitize-"  # sanitize-<pid>-<n>.jsonl
RECORDS_SUFFIX = ".jsonl"
RECORDS_VERSION = 1
MEMCPY_DIRECTIONS = {0: (False, False), 1: (False, True), 2: (True, False),
                     3: (True, True)}  # ACL_MEMCPY_* kind -> (src is device, dst is device)
MEMCPY_KIND_NAMES = {0: "ACL_MEMCPY_HOST_TO_HOST", 1: "ACL_MEMCPY_HOST_TO_DEVICE",
                     2: "ACL_MEMCPY_DEVICE_TO_HOST", 3: "ACL_MEMCPY_DEVICE_TO_DEVICE"}

active = False  # read by every hook: the only cost of the sanitizer when it is off
tools: frozenset[str] = frozenset()
leak_check = False
_state: _State | None = None
_last: list[dict[str, Any]] = []  # findings of the last stopped session (tests, tools)
_lock = threading.Lock()
_tls = threading.local()  # .pending (next submit's accesses), .task, .block
_atexit_registered = False
_sessions = 0


# -- options ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """The tools a session runs and whether it checks for leaks."""

    tools: frozenset[str] = frozenset({DEFAULT_TOOL})
    leak_check: bool = False


def parse_spec(value: Any) -> Options:
    """``"memcheck,leak-check"`` (or a list of the same items) -> ``Options``.

    Raises:
        ValueError: an item is not a tool or ``leak-check[=yes|no]``.
    """
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    chosen: set[str] = set()
    leaks = False
    for raw in items:
        item = str(raw).strip().lower()
        if not item:
            continue
        name, _, setting = item.partition("=")
        if name in (LEAK_CHECK, "leak_check"):
            if setting not in ("", "yes", "no"):
                raise ValueError(f"'{item}': leak-check takes yes or no")
            leaks = setting != "no"
        elif name in TOOLS and not setting:
            chosen.add(name)
        else:
            raise ValueError(f"'{item}' is not a sanitizer tool: expected a comma-separated "
                             f"list of {', '.join(TOOLS)} and optionally leak-check[=yes|no]")
    return Options(frozenset(chosen or {DEFAULT_TOOL}), leaks)


def spec_string(options: Options) -> str:
    """The ``OPENACL_SANITIZE`` value that ``parse_spec`` reads back as ``options``."""
    names = [tool for tool in TOOLS if tool in options.tools]
    return ",".join(names + ([LEAK_CHECK] if options.leak_check else []))


# -- call sites -----------------------------------------------------------------------------------
def call_site(**extra: Any) -> dict[str, Any]:
    """The innermost frame outside openacl (the user's file and line), plus ``extra``."""
    frame = sys._getframe(1)
    while frame is not None and in_package(frame.f_code.co_filename):
        frame = frame.f_back
    site: dict[str, Any] = {"file": "?", "line": 0, "function": "?"} if frame is None else {
        "file": frame.f_code.co_filename, "line": frame.f_lineno,
        "function": frame.f_code.co_name}
    site.update({key: value for key, value in extra.items() if value is not None})
    return site


def _where(site: dict[str, Any] | None) -> str:
    if not site:
        return "?"
    return f"{site['file']}:{site['line']}"


# -- the shadow state -----------------------------------------------------------------------------
class _Allocation:
    __slots__ = ("region", "site", "written", "accesses")

    def __init__(self, region: Any, site: dict[str, Any], initcheck: bool) -> None:
        self.region = region
        self.site = site
        self.written = np.zeros(region.size, dtype=bool) if initcheck else None
        self.accesses: list[tuple] = []  # (lo, hi, write, key, value, site)

    def describe(self) -> dict[str, Any]:
        return {"address": self.region.start, "size": self.region.size, "kind": "device",
                "device": self.region.device, "site": self.site}


@dataclass
class _Task:
    """What the running stream task is: its stamp, its clock and who enqueued it."""

    key: int
    value: int
    clock: dict[int, int]
    stream: int
    site: dict[str, Any] | None
    kernel: str | None = None
    owners: dict[int, np.ndarray] | None = None  # multi-core: allocation -> writing block


class _Block:
    """The views one kernel block made (``global_buffer``), compared when it ends."""

    __slots__ = ("index", "views")

    def __init__(self, index: int) -> None:
        self.index = index
        self.views: list[tuple] = []  # (region, offset, bytes, snapshot, itemsize, site)


class _State:
    def __init__(self, options: Options, output: str | None) -> None:
        self.options = options
        self.output = output
        self.lock = threading.RLock()
        self.allocations: dict[int, _Allocation] = {}
        self.host_allocations: dict[int, tuple[int, dict[str, Any]]] = {}
        self.freed: collections.OrderedDict[int, tuple[int, dict, dict]] = (
            collections.OrderedDict())
        self.stream_keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.next_key = HOST_KEY + 1
        self.stream_clock: dict[int, dict[int, int]] = {}
        self.host_clock: dict[int, int] = {HOST_KEY: 0}
        self.point_clocks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.findings: list[dict[str, Any]] = []
        self.seen: dict[tuple, dict[str, Any]] = {}
        self.dropped = 0

    def key(self, stream: Any) -> int:
        key = self.stream_keys.get(stream)
        if key is None:
            key = self.next_key
            self.next_key += 1
            self.stream_keys[stream] = key
            self.stream_clock[key] = {}
        return key


def _join(into: dict[int, int], other: dict[int, int]) -> None:
    for key, value in other.items():
        if into.get(key, 0) < value:
            into[key] = value


def _report(state: _State, tool: str, kind: str, severity: str, message: str,
            sites: Sequence[dict[str, Any] | None], address: int | None = None,
            size: int | None = None, allocation: dict[str, Any] | None = None) -> None:
    """Add a finding (deduplicated by kind and call sites)."""
    if tool not in state.options.tools:
        return
    clean = [site for site in sites if site]
    identity = (kind, tuple((s.get("role"), s.get("file"), s.get("line"), s.get("block"))
                            for s in clean))
    with state.lock:
        seen = state.seen.get(identity)
        if seen is not None:
            seen["count"] += 1
            return
        if len(state.findings) >= MAX_FINDINGS:
            state.dropped += 1
            return
        finding = {"type": "finding", "tool": tool, "kind": kind, "severity": severity,
                   "message": message, "address": address, "size": size,
                   "allocation": allocation, "sites": clean, "count": 1, "pid": os.getpid()}
        state.seen[identity] = finding
        state.findings.append(finding)


def _allocation_of(state: _State, region: Any) -> _Allocation | None:
    allocation = state.allocations.get(region.start)
    return allocation if allocation is not None and allocation.region is region else None


# -- turning it on and off --------------------------------------------------------------------
def start(options: Options | str, output: str | os.PathLike | None = None) -> None:
    """Start a session (``init``); ``output`` (default ``$OPENACL_SANITIZE_OUTPUT``) is the
    directory the findings go to, None for text on stderr."""
    global active, tools, leak_check, _state, _atexit_registered
    if not isinstance(options, Options):
        options = parse_spec(options)
    directory = output if output is not None else os.environ.get(OUTPUT_ENV_VAR) or None
    with _lock:
        if _state is not None:
            return
        _state = _State(options, None if directory is None else os.fspath(directory))
        tools, leak_check = options.tools, options.leak_check
        active = True
        if not _atexit_registered:
            atexit.register(_stop_at_exit)
            _atexit_registered = True


def stop() -> list[dict[str, Any]]:
    """End the session: leak check, then write the findings; returns them."""
    global active, _state, _last, _sessions
    with _lock:
        state = _state
        if state is None:
            return []
        if state.options.leak_check:
            _check_leaks(state)
        active = False
        _state = None
        _sessions += 1
        number = _sessions
    _last = list(state.findings)
    _write(state, number)
    return _last


def _stop_at_exit() -> None:
    try:
        stop()
    except OSError as exc:
        print(f"openacl sanitizer: cannot write the findings: {exc}", file=sys.stderr)


def findings() -> list[dict[str, Any]]:
    """The findings so far (the running session's, else the last one's)."""
    state = _state
    if state is None:
        return list(_last)
    with state.lock:
        return list(state.findings)


def _check_leaks(state: _State) -> None:
    with state.lock:
        leaked = [(a.region.start, a.region.size, "device", a.site)
                  for a in state.allocations.values()]
        leaked += [(start, size, "host", site)
                   for start, (size, site) in state.host_allocations.items()]
    for start, size, kind, site in leaked:
        _report(state, "memcheck", "leak", "error",
                f"{size} byte(s) of {kind} memory at {start:#x} never freed",
                [dict(site, role="allocated")], start, size,
                {"address": start, "size": size, "kind": kind, "site": site})


def _write(state: _State, number: int) -> None:
    header = {"type": "session", "version": RECORDS_VERSION, "pid": os.getpid(),
              "argv": list(sys.argv), "tools": sorted(state.options.tools),
              "leak_check": state.options.leak_check, "dropped": state.dropped}
    if state.output is None:
        if state.findings:
            print(format_report(state.findings), file=sys.stderr)
        return
    os.makedirs(state.output, exist_ok=True)
    path = os.path.join(state.output, f"{RECORDS_PREFIX}{os.getpid()}-{number}{RECORDS_SUFFIX}")
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        for record in [header, *state.findings]:
            handle.write(json.dumps(record) + "\n")
    os.replace(temporary, path)  # a reader never sees half a file


def is_records_file(name: str) -> bool:
    return name.startswith(RECORDS_PREFIX) and name.endswith(RECORDS_SUFFIX)


def read_records(directory: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """The sessions and findings written into ``directory`` (every process's files)."""
    sessions, found = [], []
    for name in sorted(os.listdir(directory)):
        if not is_records_file(name):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    (sessions if record.get("type") == "session" else found).append(record)
    return sessions, found


# -- allocations --------------------------------------------------------------------------------
def on_malloc(region: Any, backend: Any) -> None:
    """A device allocation was made: poison it and shadow it (``memory.malloc``)."""
    state = _state
    if state is None:
        return
    backend._fill(region.buffer, POISON_BYTE)
    allocation = _Allocation(region, call_site(role="allocated"),
                             "initcheck" in state.options.tools)
    with state.lock:
        state.allocations[region.start] = allocation
        state.freed.pop(region.start, None)


def on_malloc_host(region: Any) -> None:
    """A host allocation was made (``memory.malloc_host``): remembered for the leak check."""
    state = _state
    if state is not None:
        with state.lock:
            state.host_allocations[region.start] = (region.size, call_site(role="allocated"))


def on_free(address: int, region: Any | None, error: BaseException | None = None) -> None:
    """``free`` / ``free_host`` of ``address``: ``region`` when it succeeded, else ``error``
    (an illegal or double free, reported here and raised by the caller)."""
    state = _state
    if state is None:
        return
    site = call_site(role="freed")
    with state.lock:
        if region is not None:
            allocation = state.allocations.pop(region.start, None)
            host = state.host_allocations.pop(region.start, None)
            malloc_site = allocation.site if allocation is not None else (
                host[1] if host is not None else None)
            state.freed[region.start] = (region.size, malloc_site or {}, site)
            if len(state.freed) > FREED_HISTORY:
                state.freed.popitem(last=False)
            return
        first = state.freed.get(address)
    if first is not None:
        size, malloc_site, free_site = first
        _report(state, "memcheck", "double_free", "error",
                f"double free of {size} byte(s) at {address:#x}: {error}",
                [site, dict(free_site, role="first freed")], address, size,
                {"address": address, "size": size, "site": malloc_site})
        return
    _report(state, "memcheck", "illegal_free", "error",
            f"illegal free of {address:#x}: {error}", [site], address)


# -- stream tasks and the happens-before order ------------------------------------------------
def label(kind: str, accesses: Iterable[tuple[Any, int, int, bool]], kernel: str | None = None
          ) -> None:
    """Describe the task this thread submits next: ``accesses`` are (region, offset, nbytes,
    write) of device memory (other regions are ignored); ``kernel`` a kernel launch."""
    if _state is None:
        return
    listed = [access for access in accesses if access[0].is_device and access[2] > 0]
    _tls.pending = (kind, listed, kernel, call_site(role=kind))


def wrap(guarded: Any, stream: Any) -> Any:
    """The stream's task (called with its timeline value) stamped for the sanitizer: its
    clock is taken now, at submission; its accesses are recorded right before it runs."""
    state = _state
    pending = getattr(_tls, "pending", None)
    _tls.pending = None
    if state is None:
        return guarded
    with state.lock:
        key = state.key(stream)
        clock = state.stream_clock[key]
        _join(clock, state.host_clock)  # the host's earlier work precedes the task
        snapshot = dict(clock)
    handle = stream.handle

    def run(value: int) -> None:
        snapshot[key] = value
        kind, accesses, kernel, site = pending or (None, (), None, None)
        task = _Task(key, value, snapshot, handle, site, kernel,
                     {} if kernel is not None else None)
        if accesses and stream.failure is None:
            for region, offset, nbytes, write in accesses:
                _access(state, region, offset, nbytes, write, task, site)
        outer = getattr(_tls, "task", None)
        _tls.task = task
        try:
            guarded(value)
        finally:
            _tls.task = outer

    return run


def on_record(point: Any) -> None:
    """An event was recorded at ``point`` (stream, value): snapshot the stream's clock."""
    state = _state
    if state is None:
        return
    with state.lock:
        key = state.key(point.stream)
        clock = dict(state.stream_clock[key])
        clock[key] = max(clock.get(key, 0), point.value)
        state.point_clocks[point] = clock


def on_event_wait(waiter: Any, point: Any) -> None:
    """``waiter`` waits for ``point``: what preceded the record precedes its next tasks."""
    state = _state
    if state is None:
        return
    with state.lock:
        clock = state.point_clocks.get(point)
        if clock is not None:
            _join(state.stream_clock[state.key(waiter)], clock)


def on_host_join(stream: Any = None, point: Any = None) -> None:
    """The host saw ``stream``'s submitted work (or ``point``) complete: it now follows it."""
    state = _state
    if state is None:
        return
    with state.lock:
        if point is not None:
            clock = state.point_clocks.get(point)
            if clock is not None:
                _join(state.host_clock, clock)
            return
        key = state.key(stream)
        _join(state.host_clock, state.stream_clock[key])
        if state.host_clock.get(key, 0) < stream.queue.submitted:
            state.host_clock[key] = stream.queue.submitted


def on_unrecorded_event(event: Any, what: str) -> None:
    """A wait on, or synchronize of, an event never recorded (synccheck)."""
    state = _state
    if state is not None:
        _report(state, "synccheck", "unrecorded_event", "warn",
                f"{what} of event {event.handle:#x}, which was never recorded: it waits for "
                f"nothing", [call_site(role=what)])


def on_stream_shutdown(stream: Any, queued: int) -> None:
    """``stream`` is being destroyed (destroy, reset, finalize) with ``queued`` tasks left."""
    state = _state
    if state is not None and queued:
        _report(state, "synccheck", "unsynchronized_destroy", "warn",
                f"stream {stream.handle:#x} destroyed with {queued} task(s) still queued: "
                f"synchronize it first", [call_site(role="destroyed", stream=stream.handle)])


# -- accesses -----------------------------------------------------------------------------------
def _current_stamp(state: _State) -> tuple[int, int, dict[int, int], int | None]:
    """(key, value, clock, stream) of an access made now on this thread."""
    task = getattr(_tls, "task", None)
    if task is not None:  # inside a stream task (a host function): the task's place
        return task.key, task.value, task.clock, task.stream
    with state.lock:
        state.host_clock[HOST_KEY] += 1
        return HOST_KEY, state.host_clock[HOST_KEY], dict(state.host_clock), None


def host_accesses(accesses: Iterable[tuple[Any, int, int, bool]]) -> None:
    """Synchronous accesses by the calling thread (``memcpy``, ``memset``)."""
    state = _state
    if state is None:
        return
    listed = [access for access in accesses if access[0].is_device and access[2] > 0]
    if not listed:
        return
    site = call_site(role="host access")
    key, value, clock, stream = _current_stamp(state)
    task = _Task(key, value, clock, stream if stream is not None else -1, site)
    for region, offset, nbytes, write in listed:
        _access(state, region, offset, nbytes, write, task, site)


def _host_bytes(view: Any) -> np.ndarray:
    return view if isinstance(view, np.ndarray) else np.asarray(view.get())


def _unpoisoned(region: Any, lo: int, hi: int) -> np.ndarray:
    """Which bytes of ``[lo, hi)`` lie in a ``POISON_WORD``-byte word that no longer holds
    only the poison: written by a writer the hooks do not see. By words, so that a written
    byte that happens to equal the poison (1 in 256 of random data) is not taken for
    uninitialized (a whole word of it: 1 in 2**32)."""
    word_lo = lo - lo % POISON_WORD
    word_hi = min(region.size, hi + (-hi) % POISON_WORD)
    changed = _host_bytes(region.buffer[word_lo:word_hi]) != POISON_BYTE
    tail = (-changed.size) % POISON_WORD
    if tail:
        changed = np.concatenate([changed, np.zeros(tail, dtype=bool)])
    words = np.repeat(changed.reshape(-1, POISON_WORD).any(axis=1), POISON_WORD)
    return words[lo - word_lo:hi - word_lo]


def _access(state: _State, region: Any, offset: int, nbytes: int, write: bool, task: _Task,
            site: dict[str, Any] | None, block: int | None = None) -> None:
    """Record one access and report what it breaks (race, uninitialized read)."""
    allocation = _allocation_of(state, region)
    if allocation is None:
        return
    lo, hi = offset, offset + nbytes
    options = state.options.tools
    unpoisoned = None
    if not write and allocation.written is not None:
        unwritten = ~allocation.written[lo:hi]
        if unwritten.any():  # compare with the poison before taking the lock
            unpoisoned = _unpoisoned(region, lo, hi)
    stream = None if task.key == HOST_KEY else task.stream
    here = dict(site or {}, role="write" if write else "read")
    if stream is not None:
        here["stream"] = stream
    if block is not None:
        here["block"] = block
    with state.lock:
        if "racecheck" in options:
            _check_races(state, allocation, lo, hi, write, task, here)
        written = allocation.written
        if written is None:
            return
        if write:
            written[lo:hi] = True
            return
        if unpoisoned is None:
            return
        span = written[lo:hi]
        span |= unpoisoned  # changed since malloc by a writer the hooks do not see
        missing = np.flatnonzero(~span)
        if missing.size:
            span[:] = True  # reported once; later reads of these bytes are not
            first = int(missing[0])
            _report(state, "initcheck", "uninitialized_read", "error",
                    f"read of {missing.size} uninitialized byte(s) (first at "
                    f"{region.start + lo + first:#x}) of the {region.size}-byte allocation "
                    f"at {region.start:#x}", [here, allocation.site], region.start + lo,
                    nbytes, allocation.describe())


def _check_races(state: _State, allocation: _Allocation, lo: int, hi: int, write: bool,
                 task: _Task, here: dict[str, Any]) -> None:
    kept = []
    for record in allocation.accesses:
        r_lo, r_hi, r_write, r_key, r_value, r_site = record
        overlaps = r_lo < hi and lo < r_hi
        ordered = r_key == task.key or task.clock.get(r_key, 0) >= r_value
        if overlaps and (write or r_write) and not ordered:
            hazard = ("WAW" if r_write else "WAR") if write else "RAW"
            start = allocation.region.start + max(lo, r_lo)
            size = min(hi, r_hi) - max(lo, r_lo)
            _report(state, "racecheck", "race", "error",
                    f"{hazard} hazard: {size} byte(s) at {start:#x} "
                    f"{'written' if write else 'read'} by {_agent(here)} and "
                    f"{'written' if r_write else 'read'} by {_agent(r_site)} with no "
                    f"event or synchronize between them", [here, dict(r_site, role="previous "
                                                                      + r_site["role"])],
                    start, size, allocation.describe())
        if write and ordered and lo <= r_lo and r_hi <= hi:
            continue  # overwritten after it: no later access can race with it alone
        kept.append(record)
    kept.append((lo, hi, write, task.key, task.value, here))
    allocation.accesses = kept[-MAX_ACCESSES:]


def _agent(site: dict[str, Any]) -> str:
    stream = site.get("stream")
    return "the host" if stream is None else f"stream {stream:#x}"


def illegal_access(address: int, nbytes: int, write: bool | None, error: BaseException,
                   what: str) -> None:
    """A copy, fill or kernel view the pointer table refused (out of bounds, wild, freed);
    ``write`` None: a kernel view, which may be read or written."""
    state = _state
    if state is None:
        return
    task = getattr(_tls, "task", None)
    block = getattr(_tls, "block", None)
    extra: dict[str, Any] = {}
    if task is not None and task.kernel is not None:
        extra = {"kernel": task.kernel, "block": None if block is None else block.index}
    site = call_site(role=what, **extra)
    sites = [site, task.site] if extra and task is not None else [site]
    how = "read/write" if write is None else ("write" if write else "read")
    _report(state, "memcheck", "illegal_" + how.replace("/", "_"), "error",
            f"illegal {how} of {nbytes} byte(s) at {address:#x} "
            f"({what}): {error}", sites, address, nbytes)


def host_access(region: Any, offset: int, nbytes: int) -> None:
    """The host views device memory (``ptr_to_numpy``): fine on a CPU, a fault on an NPU."""
    state = _state
    if state is None or getattr(_tls, "task", None) is not None or not region.is_device:
        return
    with state.lock:
        allocation = _allocation_of(state, region)
    _report(state, "memcheck", "host_access", "error",
            f"host access of {nbytes} byte(s) of device memory at {region.start + offset:#x} "
            f"(ptr_to_numpy / ptr_to_bytes): copy it to the host with memcpy",
            [call_site(role="host access")], region.start + offset, nbytes,
            allocation.describe() if allocation is not None else None)


def check_kind(kind: int, dst: Any, src: Any) -> None:
    """A memcpy ``kind`` that the pointers contradict (the copy follows the pointers)."""
    state = _state
    expected = MEMCPY_DIRECTIONS.get(kind)
    if state is None or expected is None or expected == (src.is_device, dst.is_device):
        return
    actual = ("D" if src.is_device else "H") + "2" + ("D" if dst.is_device else "H")
    _report(state, "memcheck", "memcpy_direction", "warn",
            f"memcpy kind {MEMCPY_KIND_NAMES[kind]} but src is {src.kind.value} and dst is "
            f"{dst.kind.value} memory ({actual}); the copy follows the pointers",
            [call_site(role="memcpy")], dst.start)


def current_task() -> _Task | None:
    """The stream task running on this thread (a host callback runs in its place)."""
    return getattr(_tls, "task", None)


def run_as(task: _Task | None, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with ``task`` as this thread's running task (a delivered callback)."""
    outer = getattr(_tls, "task", None)
    _tls.task = task
    try:
        return fn(*args)
    finally:
        _tls.task = outer


# -- kernel blocks ------------------------------------------------------------------------------
def begin_block(index: int) -> None:
    """A block of a sanitized launch starts on this thread."""
    _tls.block = _Block(index)


def global_buffer_view(region: Any, offset: int, view: Any, itemsize: int) -> None:
    """The running block viewed ``region`` from ``offset`` (``view``: those bytes, uint8;
    ``itemsize``: its elements' size, the unit a write is counted in)."""
    block = getattr(_tls, "block", None)
    if block is not None and _state is not None:
        block.views.append((region, offset, view, view.copy(), itemsize,
                            call_site(role="global_buffer", block=block.index)))


def end_block() -> None:
    """The running block ended: its writes are the bytes its views changed."""
    block = getattr(_tls, "block", None)
    _tls.block = None
    state = _state
    task = getattr(_tls, "task", None)
    if block is None or state is None or task is None:
        return
    site_kernel = {"kernel": task.kernel}
    for region, offset, view, snapshot, itemsize, site in block.views:
        changed = _host_bytes(view != snapshot)
        if itemsize > 1 and changed.size % itemsize == 0:  # a store writes whole elements
            changed = np.repeat(changed.reshape(-1, itemsize).any(axis=1), itemsize)
        site = dict(site, **site_kernel)
        if not changed.any():
            _access(state, region, offset, len(changed), False, task, site, block.index)
            continue
        hits = np.flatnonzero(changed)
        lo, hi = int(hits[0]), int(hits[-1]) + 1
        _access(state, region, offset + lo, hi - lo, True, task, site, block.index)
        _multi_core(state, task, region, offset, changed, site, block.index)


def _multi_core(state: _State, task: _Task, region: Any, offset: int, changed: np.ndarray,
                site: dict[str, Any], index: int) -> None:
    if task.owners is None:
        return
    with state.lock:
        owners = task.owners.get(region.start)
        if owners is None:
            owners = task.owners[region.start] = np.full(region.size, -1, dtype=np.int32)
        span = owners[offset:offset + changed.size]
        previous = span[changed]
        clash = (previous >= 0) & (previous != index)
        if clash.any():
            positions = np.flatnonzero(changed)[clash]
            other = int(previous[clash][0])
            start = region.start + offset + int(positions[0])
            allocation = _allocation_of(state, region)
            _report(state, "memcheck", "multi_core_corruption", "warn",
                    f"kernel {task.kernel}: block {index} wrote {positions.size} byte(s) "
                    f"(first at {start:#x}) that block {other} of the same launch wrote",
                    [dict(site, role="write"), dict(site, role="previous write", block=other),
                     task.site], start, int(positions.size),
                    allocation.describe() if allocation is not None else None)
        span[changed] = index


# -- the report -----------------------------------------------------------------------------------
def _site_line(site: dict[str, Any]) -> str:
    parts = [f"{site.get('role', 'at')}: {_where(site)} ({site.get('function', '?')})"]
    if site.get("kernel") is not None:
        parts.append(f"kernel {site['kernel']}")
    if site.get("block") is not None:
        parts.append(f"block {site['block']}")
    if site.get("stream") is not None:
        parts.append(f"stream {site['stream']:#x}")
    return ", ".join(parts)


def format_finding(finding: dict[str, Any]) -> str:
    """One finding as msSanitizer prints it (``====== ERROR: ...`` lines)."""
    level = "ERROR" if finding["severity"] == "error" else (
        "WARNING" if finding["severity"] == "warn" else "INFO")
    lines = [f"====== {level}: {finding['kind'].replace('_', ' ')} ({finding['tool']}"
             f"{', pid ' + str(finding['pid']) if finding.get('pid') else ''})",
             f"======    {finding['message']}"]
    for site in finding["sites"]:
        lines.append(f"======    {_site_line(site)}")
    allocation = finding.get("allocation")
    if allocation and finding["kind"] != "leak":
        lines.append(f"======    allocation: {allocation['size']} bytes at "
                     f"{allocation['address']:#x}, allocated at {_where(allocation['site'])}")
    if finding.get("count", 1) > 1:
        lines.append(f"======    seen {finding['count']} times")
    return "\n".join(lines)


def format_report(found: Sequence[dict[str, Any]]) -> str:
    """Every finding, then a summary line per severity."""
    errors = sum(1 for f in found if f["severity"] == "error")
    warnings = sum(1 for f in found if f["severity"] == "warn")
    body = [format_finding(finding) for finding in found]
    body.append(f"====== SUMMARY: {errors} error(s), {warnings} warning(s)")
    return "\n".join(body)
