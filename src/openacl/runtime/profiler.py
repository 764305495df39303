"""The profiler: what the runtime did, when, and on which stream (msprof's raw data).

Turned on by ``init`` when the config says so: the ``OPENACL_PROFILE=<dir>`` environment
variable (what ``openacl profile -- python app.py`` sets for its child), the ``profile`` key
of an init config, or a CANN ``acl.json`` with ``"profiler": {"switch": "on", "output": ...}``
(``runtime/config.py``). ``finalize`` writes the records as JSON (``records-<pid>-<n>.json``
in the directory); an atexit handler writes them for a program that never finalizes.
``openacl profile --report DIR`` (``cli/profile.py``) turns them into msprof-like tables and a
Chrome / Perfetto trace.

Design note (invariants)
------------------------
* Zero cost when off: every hook is ``if profiler.active:`` (one module attribute read) in
  front of code that runs only when profiling; nothing is allocated, wrapped or timed
  otherwise. ``active`` changes only in ``start`` and ``stop`` (under ``_lock``).
* Records are plain tuples appended to the lists of the running ``Session``: ``list.append``
  is atomic under the GIL, so worker threads and host threads append without a lock; only
  ``start``/``stop`` take ``_lock``. A task still running when ``stop`` swaps the session
  out appends to the old session's list, which is no longer written: harmless.
* Timestamps are ``time.perf_counter_ns()`` read on the thread that did the work: the host
  thread for an API call or a synchronous copy, the stream's worker for a task (the span is
  the task itself, not its wait in the queue). Stored relative to the session's start.
* What a record holds (``Session``): ``api`` = (name, thread id, start, end) for a call of a
  public runtime function (``aclrtMalloc``, ``aclnnAddGetWorkspaceSize``, ``aclmdlExecute``);
  nested calls (a compat function calling the Pythonic one) count once, the outermost.
  ``tasks`` = (kind, name, stream, thread id, start, end, bytes, detail, ok) for work run on
  a stream (``stream`` = its handle) or synchronously on a host thread (``stream`` None):
  ``kind`` is one of ``TASK_KINDS``; ``bytes`` and the direction (the name: H2D, D2H, D2D,
  H2H) for copies; ``detail`` a small dict (a kernel's ``block_dim``). ``ranges`` = (kind,
  name, stream, start, end) for an aclop execution or a model run, which enqueue several
  tasks: the span from the worker reaching the first to it finishing the last.
* How a task gets its label: the enqueuing code calls ``label(kind, name, ...)`` right before
  ``Stream.submit``; ``submit`` calls ``wrap``, which takes the pending label of the calling
  thread (thread-local, consumed by the next submit whatever happens) and returns the task
  timed. Unlabelled tasks (event records, cross-stream waits) are not recorded.
* API calls are recorded by wrapping the public functions of the API modules (``API_MODULES``)
  while the profiler runs, and putting the originals back at ``stop``. A function imported by
  name before ``init`` (``from openacl.rt import malloc``) keeps the unwrapped original, so
  its calls are not counted (its stream work still is).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "API_MODULES", "ENV_VAR", "RECORDS_VERSION", "TASK_KINDS", "Session", "active",
    "begin_range", "direction", "is_records_file", "label", "records_path", "run_here",
    "start", "stop", "wrap",
]

ENV_VAR = "OPENACL_PROFILE"  # directory to profile into; read by runtime/config.py
RECORDS_VERSION = 1  # the records file's format
RECORDS_PREFIX = "records-"  # records-<pid>-<n>.json
TASK_KINDS = ("memcpy", "memset", "aclnn", "aclop", "kernel", "model", "host_func")
# module -> prefix of its functions' CANN names ("" for names that already are C names)
API_MODULES = {
    "openacl.rt": "aclrt",
    "openacl.aclnn": "aclnn",
    "openacl.op": "aclop",
    "openacl.mdl": "aclmdl",
    "openacl.compat.acl.rt": "aclrt",
    "openacl.compat.acl.op": "aclop",
    "openacl.compat.acl.mdl": "aclmdl",
    "openacl.compat.aclnn": "",
}
EAGER_API_MODULES = ("openacl.rt", "openacl.aclnn")  # imported at start (others: if present)

active = False  # read by every hook: the only cost of the profiler when it is off
_session: Session | None = None
_lock = threading.Lock()
_pending = threading.local()  # .label: the next submit's (kind, name, bytes, detail)
_nesting = threading.local()  # .depth: API calls in progress on this thread
_atexit_registered = False
_sessions = 0  # sessions started by this process, for file names


class Session:
    """The records of one init..finalize span (see the design note for their fields)."""

    def __init__(self, directory: str, notes: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.notes = list(notes)
        self.origin_ns = time.perf_counter_ns()
        self.wall_start = time.time()
        self.api: list[tuple] = []
        self.tasks: list[tuple] = []
        self.ranges: list[tuple] = []
        self.streams: dict[int, dict[str, Any]] = {}
        self.threads: dict[int, str] = {}
        self.patched: list[tuple[Any, str, Any, Any]] = []  # module, name, original, wrapper

    def now(self) -> int:
        return time.perf_counter_ns() - self.origin_ns

    def note_stream(self, stream: Any) -> int:
        handle = stream.handle
        if handle not in self.streams:
            self.streams[handle] = {"device": stream.device.id, "default": stream.is_default}
        return handle

    def note_thread(self) -> int:
        ident = threading.get_ident()
        if ident not in self.threads:
            self.threads[ident] = threading.current_thread().name
        return ident

    def as_json(self, stopped_ns: int) -> dict[str, Any]:
        return {"version": RECORDS_VERSION, "pid": os.getpid(), "argv": list(sys.argv),
                "wall_start": self.wall_start, "duration_ns": stopped_ns,
                "notes": self.notes,
                "streams": {str(k): v for k, v in self.streams.items()},
                "threads": {str(k): v for k, v in self.threads.items()},
                "api": self.api, "tasks": self.tasks, "ranges": self.ranges}


# -- turning it on and off --------------------------------------------------------------------
def start(directory: str | os.PathLike, notes: tuple[str, ...] = ()) -> None:
    """Start recording into ``directory`` (made now, so a bad one fails at init).

    Raises:
        OSError: the directory cannot be made or written.
    """
    global active, _session, _atexit_registered
    path = os.fspath(directory)
    os.makedirs(path, exist_ok=True)
    if not os.access(path, os.W_OK):
        raise PermissionError(f"profile directory '{path}' is not writable")
    with _lock:
        if _session is not None:
            return
        session = Session(path, notes)
        _session = session
        _patch_api(session)
        active = True
        if not _atexit_registered:
            atexit.register(_stop_at_exit)
            _atexit_registered = True


def stop() -> str | None:
    """Stop recording and write the records; returns the file written (None when off)."""
    global active, _session, _sessions
    with _lock:
        session = _session
        if session is None:
            return None
        active = False
        _session = None
        _unpatch_api(session)
        _sessions += 1
        path = records_path(session.directory, _sessions)
    stopped = session.now()
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(session.as_json(stopped), handle)
    os.replace(temporary, path)  # a reader never sees half a file
    return path


def _stop_at_exit() -> None:
    try:
        stop()
    except OSError as exc:
        print(f"openacl profiler: cannot write the records: {exc}", file=sys.stderr)


def records_path(directory: str, number: int) -> str:
    """Where session ``number`` of this process writes its records."""
    return os.path.join(directory, f"{RECORDS_PREFIX}{os.getpid()}-{number}.json")


def is_records_file(name: str) -> bool:
    return name.startswith(RECORDS_PREFIX) and name.endswith(".json")


# -- API calls ----------------------------------------------------------------------------------
def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


def _api_wrapper(name: str, fn: Callable[..., Any], session: Session) -> Callable[..., Any]:
    api = session.api

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_nesting, "depth", 0)
        if depth:  # inside another recorded call: count the outermost only
            return fn(*args, **kwargs)
        _nesting.depth = 1
        ident = session.note_thread()
        start_ns = session.now()
        try:
            return fn(*args, **kwargs)
        finally:
            _nesting.depth = 0
            api.append((name, ident, start_ns, session.now()))

    return call


def _public_functions(module: Any) -> list[str]:
    """The names a module exports (``__all__``), else the public functions it defines."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [name for name, value in vars(module).items() if not name.startswith("_")
            and callable(value) and getattr(value, "__module__", None) == module.__name__]


def _patch_api(session: Session) -> None:
    for module_name in EAGER_API_MODULES:
        importlib.import_module(module_name)
    for module_name, prefix in API_MODULES.items():
        module = sys.modules.get(module_name)
        if module is None:
            continue
        lazy = "__getattr__" in module.__dict__  # its functions are made on first use
        for attr in _public_functions(module):
            fn = module.__dict__.get(attr)
            if fn is None and lazy:
                fn = getattr(module, attr, None)
            if fn is None or isinstance(fn, type) or not callable(fn) or \
                    getattr(fn, "__module__", "").startswith("typing"):
                continue
            wrapper = _api_wrapper(prefix + _camel(attr) if prefix else attr, fn, session)
            setattr(module, attr, wrapper)
            session.patched.append((module, attr, fn, wrapper))


def _unpatch_api(session: Session) -> None:
    for module, attr, original, wrapper in reversed(session.patched):
        if module.__dict__.get(attr) is wrapper:
            setattr(module, attr, original)
    session.patched.clear()


# -- stream tasks -------------------------------------------------------------------------------
def label(kind: str, name: str, nbytes: int = 0, detail: dict | None = None) -> None:
    """Name the next task this thread submits (call right before ``Stream.submit``)."""
    _pending.label = (kind, name, nbytes, detail)


def wrap(task: Callable[[], Any], stream: Any) -> Callable[[], Any]:
    """``task`` timed on the worker, when this thread labelled it (``Stream.submit``)."""
    pending = getattr(_pending, "label", None)
    session = _session
    if pending is None or session is None:
        return task
    _pending.label = None
    kind, name, nbytes, detail = pending
    handle = session.note_stream(stream)
    tasks = session.tasks

    def timed() -> None:
        ident = session.note_thread()
        start_ns = session.now()
        ok = False
        try:
            task()
            ok = True
        finally:
            tasks.append((kind, name, handle, ident, start_ns, session.now(), nbytes, detail,
                          ok))

    return timed


def run_here(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` now on this thread as the labelled task (a synchronous copy)."""
    pending = getattr(_pending, "label", None)
    session = _session
    if pending is None or session is None:
        return fn(*args)
    _pending.label = None
    kind, name, nbytes, detail = pending
    ident = session.note_thread()
    start_ns = session.now()
    ok = False
    try:
        result = fn(*args)
        ok = True
        return result
    finally:
        session.tasks.append((kind, name, None, ident, start_ns, session.now(), nbytes, detail,
                              ok))


def direction(dst: Any, src: Any) -> str:
    """H2D, D2H, D2D or H2H for a copy between two pointer-table regions."""
    return ("D" if src.is_device else "H") + "2" + ("D" if dst.is_device else "H")


class _Range:
    """An aclop execution or model run on a stream: begin and end markers on its worker."""

    def __init__(self, session: Session, stream: Any, kind: str, name: str) -> None:
        self.session, self.stream, self.kind, self.name = session, stream, kind, name
        self.handle = session.note_stream(stream)
        self.start_ns: int | None = None
        stream.submit(self._begin)

    def _begin(self) -> None:
        self.start_ns = self.session.now()

    def _end(self) -> None:
        if self.start_ns is not None:
            self.session.ranges.append((self.kind, self.name, self.handle, self.start_ns,
                                        self.session.now()))

    def end(self) -> None:
        """Mark the end, after the range's last task was submitted."""
        self.stream.submit(self._end)


def begin_range(stream: Any, kind: str, name: str) -> _Range | None:
    """Open a range on ``stream``; call ``.end()`` on the result after its tasks."""
    session = _session
    if session is None:
        return None
    return _Range(session, stream, kind, name)
