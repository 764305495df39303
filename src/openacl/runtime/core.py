"""Runtime lifetime: ``init``, ``finalize`` and the process-wide state between them.

Design note (invariants)
------------------------
* There is at most one live ``Runtime``. Everything that needs it calls ``current()``,
  which raises ``ACL_ERROR_UNINITIALIZE`` (100001) before ``init`` and after ``finalize``.
* Repeat calls follow CANN 8.x: ``init`` is reference counted; a second ``init`` while
  initialised raises ``ACL_ERROR_REPEAT_INITIALIZE`` (100002) but the count still grows,
  so ``finalize_reference`` must be called once per ``init``. ``finalize`` tears down at
  once whatever the count; ``finalize`` or ``finalize_reference`` without a live runtime
  raises ``ACL_ERROR_REPEAT_FINALIZE`` (100037). ``init`` after ``finalize`` starts afresh.
* Implicit holds: a library object that needs the runtime when the program has not
  initialised it (an ``InferenceSession``, as onnxruntime needs no init) takes a hold with
  ``hold()`` and gives it back with ``release(hold)``. The runtime lives while
  ``init_count + implicit_holds > 0`` (``finalize`` still tears down at once). A program's
  own ``init`` while only holds keep the runtime alive adopts it (count 1, no
  REPEAT_INITIALIZE) when its settings are the running ones, so a session made before
  ``init`` does not break the program's ``init``. A hold names its generation: releasing
  a hold of a runtime that was finalized meanwhile does nothing.
* ``generation`` increases with every ``init``; thread-local state (current context and
  stream stacks) records the generation it belongs to and is ignored once stale.
* ``_lock`` serialises init/finalize; finalize drains every stream *before* the runtime
  is unpublished, so queued work may still call the runtime while it drains.
* Re-entry: a garbage-collector finalizer (``Tensor.__del__``, or a user ``__del__`` that
  calls ``rt.free``) can run in the middle of any allocation, including inside the
  allocator, pointer table or handle table while their lock is held by the same thread.
  Such releases must not run there: ``run_or_defer`` queues them when ``busy()`` and
  ``drain_deferred`` runs them at the next public memory call (or at finalize).
"""

from __future__ import annotations

import collections
import itertools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from openacl import log
from openacl.backends import Backend, create_backend
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_REPEAT_FINALIZE,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_UNINITIALIZE,
    AclError,
)
from openacl.runtime import profiler, sanitizer
from openacl.runtime.allocator import CachingAllocator
from openacl.runtime.config import RuntimeConfig, load_config
from openacl.runtime.frames import in_package
from openacl.runtime.handles import HandleTable
from openacl.runtime.pointer_table import PointerTable

FINALIZE_DRAIN_TIMEOUT = 30.0  # seconds finalize waits for each stream to drain


class LeakWarning(UserWarning):
    """Issued by ``finalize`` for allocations the program never freed."""


class Runtime:
    """Process-wide state of one init..finalize span."""

    def __init__(self, config: RuntimeConfig, generation: int) -> None:
        self.config = config
        self.generation = generation
        self.backend: Backend = create_backend(config.backend, config.device_count,
                                               config.stream_mode)
        self.pointers = PointerTable()
        self.handles = HandleTable()
        self.devices: dict[int, Any] = {}  # device id -> openacl.runtime.device.Device
        self.host_allocator = CachingAllocator(self.backend._alloc_host,
                                               self.backend._free_host, name="pinned host")
        self.init_count = 1  # the program's init calls not yet undone
        self.implicit_holds = 0  # library objects holding the runtime (see ``hold``)
        self.lock = threading.RLock()
        self.callback_subscriptions: Any = None  # openacl.runtime.callback._Subscriptions
        self.deferred: collections.deque[Callable[[], None]] = collections.deque()
        # start -> Region of registered bytes-like objects held alive (see memory._hold)
        self.held_buffers: collections.OrderedDict[int, Any] = collections.OrderedDict()

    def busy(self) -> bool:
        """Whether the calling thread is inside the allocator, pointer or handle table."""
        if self.pointers.busy() or self.handles.busy() or self.host_allocator.busy():
            return True
        return any(device.allocator.busy() for device in list(self.devices.values()))

    def shutdown(self) -> None:
        """Drain all streams, report leaks, release every resource."""
        for device in list(self.devices.values()):
            device.shutdown(FINALIZE_DRAIN_TIMEOUT)
        drain_deferred(self)
        leaked = [r for r in self.pointers.regions() if r.owner is None]
        if leaked:
            total = sum(r.size for r in leaked)
            warnings.warn(
                f"openacl.finalize: {len(leaked)} allocation(s) never freed ({total} bytes); "
                f"first at {leaked[0].start:#x} ({leaked[0].kind.value}, {leaked[0].size} "
                f"bytes). They are released now.", LeakWarning, stacklevel=_caller_level())
        self.backend.shutdown()
        for device in self.devices.values():
            device.allocator.release_all()
        self.host_allocator.release_all()
        self.pointers.clear()
        self.handles.clear()
        self.devices.clear()
        _stop_profiler()
        if sanitizer.active:  # after the streams' shutdown (synccheck) and the leak list
            sanitizer.stop()


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside openacl (the program's finalize line),
    whatever wrappers (``errors.public``, the compat face) stand between."""
    frame, level = sys._getframe(1), 1
    while frame is not None and in_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


_lock = threading.Lock()
_runtime: Runtime | None = None
_generations = itertools.count(1)


def current() -> Runtime:
    """The live runtime, or ``ACL_ERROR_UNINITIALIZE``."""
    runtime = _runtime
    if runtime is None:
        raise AclError(ACL_ERROR_UNINITIALIZE,
                       "the runtime is not initialized: call openacl.init() first")
    return runtime


def run_or_defer(release: Callable[[], None]) -> None:
    """Run a release now, or queue it when the calling thread is inside the runtime's
    tables (a finalizer that fired mid-allocation; see the design note)."""
    runtime = _runtime
    if runtime is None:
        return
    if runtime.busy():
        runtime.deferred.append(release)
    else:
        release()


def drain_deferred(runtime: Runtime | None = None) -> None:
    """Run releases queued by ``run_or_defer``."""
    runtime = runtime or _runtime
    if runtime is None:
        return
    while runtime.deferred:
        try:
            runtime.deferred.popleft()()
        except AclError as exc:
            log.logger().warning("deferred release failed: %s", exc)


def is_initialized() -> bool:
    return _runtime is not None


def init(config: str | os.PathLike | Mapping[str, Any] | None = None) -> None:
    """Initialise the runtime (aclInit).

    Args:
        config: path of a JSON config file (as aclInit takes), a dict of the same keys, or
            None. ``OPENACL_*`` environment variables override it (see ``RuntimeConfig``).

    Raises:
        AclError: ``ACL_ERROR_REPEAT_INITIALIZE`` when already initialised (the reference
            count still grows), file/parse/value errors for a bad config.
    """
    global _runtime
    with _lock:
        if _runtime is not None and _runtime.init_count == 0:
            _adopt(_runtime, config)  # started by a session: the program's init takes it
            return
        if _runtime is not None:
            _runtime.init_count += 1
            raise AclError(ACL_ERROR_REPEAT_INITIALIZE,
                           f"the runtime is already initialized (reference count now "
                           f"{_runtime.init_count}); finalize_reference() undoes one init")
        _runtime = _start(load_config(config))


def _start(settings: RuntimeConfig) -> Runtime:
    """A new runtime with ``settings`` (caller holds ``_lock`` and publishes it)."""
    if settings.profile is not None:
        _start_profiler(settings.profile)
    if settings.sanitize is not None:
        sanitizer.start(settings.sanitize)
    try:
        runtime = Runtime(settings, next(_generations))
    except LookupError as exc:
        _stop_profiler()
        sanitizer.stop()
        from openacl.errors import ACL_ERROR_RT_NO_DEVICE
        raise AclError(ACL_ERROR_RT_NO_DEVICE, f"backend '{settings.backend}': {exc}"
                       ) from exc
    log.configure(settings.log_level)
    if log.enabled("info"):
        log.logger().info("openacl initialised: %s", settings)
    return runtime


def _start_profiler(directory: str) -> None:
    """Start the profiler for a config's ``profile`` directory (``runtime/profiler.py``)."""
    try:
        profiler.start(directory)
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"profile directory '{directory}' cannot be used: {exc}") from exc


def _stop_profiler() -> None:
    """Write the profiler's records when it runs; a failed write is logged, not raised."""
    if profiler.active:
        try:
            profiler.stop()
        except OSError as exc:
            log.logger().warning("the profiler's records could not be written: %s", exc)


def finalize() -> None:
    """Tear the runtime down (aclFinalize): drain streams, warn about leaks, free all."""
    global _runtime
    with _lock:
        if _runtime is None:
            raise AclError(ACL_ERROR_REPEAT_FINALIZE,
                           "the runtime is not initialized (finalize called twice, or "
                           "before init)")
        _runtime.shutdown()
        _runtime = None


def finalize_reference() -> int:
    """Undo one ``init`` (aclFinalizeReference); tears down when the count reaches 0.

    Returns:
        The reference count after the call.
    """
    global _runtime
    with _lock:
        if _runtime is None:
            raise AclError(ACL_ERROR_REPEAT_FINALIZE, "the runtime is not initialized")
        if _runtime.init_count == 0:
            raise AclError(ACL_ERROR_REPEAT_FINALIZE,
                           "the program did not initialize the runtime (only sessions hold "
                           "it: close them)")
        _runtime.init_count -= 1
        count = _runtime.init_count
        if count == 0 and _runtime.implicit_holds == 0:
            _runtime.shutdown()
            _runtime = None
        return count


def _adopt(runtime: Runtime, config: str | os.PathLike | Mapping[str, Any] | None) -> None:
    """The program's ``init`` of a runtime that only implicit holds keep (caller holds
    ``_lock``): it becomes the program's (count 1) when ``config`` asks for the settings it
    runs with; other settings cannot apply to live sessions, so that is REPEAT_INITIALIZE."""
    settings = load_config(config)
    if settings != runtime.config:
        raise AclError(ACL_ERROR_REPEAT_INITIALIZE,
                       f"the runtime was started with default settings by an "
                       f"InferenceSession made before init; init({config!r}) asks for "
                       f"{settings} instead of {runtime.config}: call openacl.init(config) "
                       f"before making sessions, or close them first")
    runtime.init_count = 1


def hold() -> int:
    """Take an implicit hold on the runtime, starting it with the default settings (the
    environment's ``OPENACL_*``) when the program has not initialised it; returns the hold's
    generation for ``release``. See the design note."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = _start(load_config(None))
            _runtime.init_count = 0
        _runtime.implicit_holds += 1
        return _runtime.generation


def release(generation: int) -> None:
    """Give back a hold taken by ``hold``; the runtime is torn down when neither the
    program's inits nor other holds keep it. A hold of a finalized runtime is a no-op."""
    global _runtime
    with _lock:
        if _runtime is None or _runtime.generation != generation:
            return
        _runtime.implicit_holds -= 1
        if _runtime.implicit_holds == 0 and _runtime.init_count == 0:
            _runtime.shutdown()
            _runtime = None


def as_index(value: Any) -> int | None:
    """``value`` as an int if it is an integer (``__index__``), else None; bools are not."""
    if isinstance(value, bool):
        return None
    try:
        result = value.__index__()
    except (AttributeError, TypeError):
        return None
    return result if isinstance(result, int) else None


def thread_stack(tls: threading.local) -> list:
    """The calling thread's stack kept in ``tls``, emptied when a new runtime generation
    started since it was last used (current contexts and streams do not outlive finalize)."""
    generation = current().generation
    if getattr(tls, "generation", None) != generation:
        tls.generation = generation
        tls.stack = []
    return tls.stack


def check_enum(value: Any, allowed: Mapping[int, str], argument: str) -> int:
    """Validate an int-enum argument against ``{value: name}``; returns it as int."""
    as_int = as_index(value)
    if as_int is None or as_int not in allowed:
        names = ", ".join(f"{name}={number}" for number, name in allowed.items())
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {value!r} is invalid: expected one of {names}")
    return as_int


def check_size(value: Any, argument: str, allow_zero: bool = False) -> int:
    """Validate a byte count argument; returns it as int."""
    as_int = as_index(value)
    if as_int is None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {value!r} is not an integer")
    if as_int < 0 or (as_int == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {as_int} is invalid: it must be {need}")
    return as_int
