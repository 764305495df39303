"""Contexts: per-device containers of streams, and the per-thread current context.

Design note (invariants)
------------------------
* The current context is thread-local, with stack semantics: ``with ctx:`` pushes and
  the exit pops; ``set_context`` replaces the top. There is no process-global current
  context (STYLE.md rule 6). A stack from an earlier init (older generation) is ignored.
* A context owns its default stream and every stream created while it was current.
  Destroying it drains and destroys them; a destroyed context found on a thread's stack
  reads as "no current context" (``ACL_ERROR_RT_CONTEXT_NULL``).
"""

from __future__ import annotations

import threading
import time

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_CONTEXT_NULL, AclError
from openacl.runtime import core

_tls = threading.local()


class Context:
    """A device context (aclrtContext). Use ``openacl.Context(device_id)`` from user code."""

    def __init__(self, device, is_default: bool = False) -> None:
        from openacl.runtime.stream import Stream

        self.device = device
        self.is_default = is_default
        self.destroyed = False
        self.streams: set = set()
        self._lock = threading.Lock()
        runtime = device.runtime
        self.handle = runtime.handles.add(self)
        device.contexts.add(self)
        self.default_stream = Stream(self, is_default=True)

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        kind = "default " if self.is_default else ""
        return f"<{kind}Context {self.handle:#x} device={self.device.id}>"

    def synchronize(self, deadline: float | None = None) -> None:
        """Wait for every stream; ``deadline`` is a ``time.monotonic()`` instant or None."""
        for stream in [self.default_stream, *list(self.streams)]:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            stream.synchronize(remaining)

    def destroy(self, drain_timeout: float | None) -> None:
        """Destroy every stream (waiting up to ``drain_timeout`` s for each to drain), then
        forget the context."""
        with self._lock:
            if self.destroyed:
                return
            self.destroyed = True
        for stream in [*list(self.streams), self.default_stream]:
            stream.shutdown(drain_timeout)
        self.device.contexts.discard(self)
        self.device.runtime.handles.remove(self.handle)


def _stack() -> list[Context]:
    return core.thread_stack(_tls)


def current_context(required: bool = True) -> Context | None:
    """The calling thread's current context (``ACL_ERROR_RT_CONTEXT_NULL`` if none)."""
    runtime = core._runtime  # hot path: this thread's stack of the live generation
    if runtime is not None and getattr(_tls, "generation", None) == runtime.generation:
        stack = _tls.stack
    else:
        stack = _stack()
    if stack and not stack[-1].destroyed:
        return stack[-1]
    if required:
        why = " (it was destroyed)" if stack else ""
        raise AclError(ACL_ERROR_RT_CONTEXT_NULL,
                       f"the calling thread has no current context{why}: call "
                       f"set_device(), create_context() or set_context() first")
    return None


def set_current_context(context: Context) -> None:
    stack = _stack()
    if stack:
        stack[-1] = context
    else:
        stack.append(context)


def push_context(context: Context) -> None:
    _stack().append(context)


def pop_context(context: Context) -> None:
    stack = _stack()
    if stack and stack[-1] is context:
        stack.pop()


def lookup_context(handle: object, argument: str = "context") -> Context:
    context = core.current().handles.get(handle, Context, argument)
    if context.destroyed:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument '{argument}' = {context.handle:#x} was destroyed")
    return context


def create_context(device_id: int) -> int:
    """Create a context on ``device_id`` and make it current (aclrtCreateContext)."""
    from openacl.runtime.device import device

    dev = device(device_id)
    context = Context(dev)
    set_current_context(context)
    return context.handle


def destroy_context(context: int) -> None:
    """Destroy a context created by ``create_context``, with its streams."""
    ctx = lookup_context(context)
    if ctx.is_default:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'context' = {ctx.handle:#x} is the default context of "
                       f"device {ctx.device.id}; reset_device() releases it")
    ctx.destroy(core.FINALIZE_DRAIN_TIMEOUT)


def set_context(context: int) -> None:
    """Make ``context`` current for the calling thread (aclrtSetCurrentContext)."""
    set_current_context(lookup_context(context))


def get_context() -> int:
    """The calling thread's current context handle (aclrtGetCurrentContext)."""
    return current_context().handle
