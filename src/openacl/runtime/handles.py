"""Handles: the ints that stand for runtime objects (contexts, streams, events, tensors...).

Handles are never reused within a runtime's life, so a destroyed handle cannot silently
alias a newer object. Lookups check the kind: an event handle passed as a stream is an
error that names the argument.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, TypeVar

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core

HANDLE_BASE = 0x5A000000  # first handle value; keeps handles distinct from small ints
HANDLE_STEP = 16  # spacing between handles, so they look (and compare) like pointers

T = TypeVar("T")


class HandleTable:
    """Maps handle ints to live objects."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[int, Any] = {}
        self._counter = itertools.count(HANDLE_BASE, HANDLE_STEP)

    def busy(self) -> bool:
        """Whether the calling thread is inside a table operation (see core.run_or_defer)."""
        return self._lock._is_owned()  # type: ignore[attr-defined]

    def add(self, obj: Any) -> int:
        with self._lock:
            handle = next(self._counter)
            self._objects[handle] = obj
            return handle

    def get(self, handle: Any, kind: type[T], argument: str, code: int = ACL_ERROR_INVALID_PARAM
            ) -> T:
        """The live object of type ``kind`` behind ``handle`` (an int or an object with
        ``__index__``), or an ``AclError`` with ``code`` naming ``argument``."""
        if type(handle) is int:  # the hot path: a plain handle of the right kind
            obj = self._objects.get(handle)
            if obj is not None and isinstance(obj, kind):
                return obj
        if isinstance(handle, kind):
            key = getattr(handle, "handle", None)
            if key in self._objects:
                return handle
        key = core.as_index(handle)
        if key is None:
            raise AclError(code, f"argument '{argument}' = {handle!r} is not a live "
                                 f"{kind.__name__} handle (an int)")
        obj = self._objects.get(key)
        if obj is None:
            raise AclError(code, f"argument '{argument}' = {key:#x} is not a live "
                                 f"{kind.__name__} handle (destroyed, or never created)")
        if not isinstance(obj, kind):
            raise AclError(code, f"argument '{argument}' = {key:#x} is a "
                                 f"{type(obj).__name__} handle, not a {kind.__name__}")
        return obj

    def remove(self, handle: int) -> None:
        with self._lock:
            self._objects.pop(handle, None)

    def live(self, kind: type[T]) -> list[T]:
        with self._lock:
            return [obj for obj in self._objects.values() if isinstance(obj, kind)]

    def clear(self) -> None:
        with self._lock:
            self._objects.clear()
