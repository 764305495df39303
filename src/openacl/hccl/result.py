"""HCCL errors: ``HcclError`` (an ``AclError`` whose code is an ``HcclResult``), the rule that
every failure of an HCCL function is an ``HcclError``, and what a failed collective does to
its stream.

Two kinds of failure, two kinds of code:

- A call that is refused synchronously (bad argument, no torch, rendezvous failed) raises
  ``HcclError``: ``.code`` is the ``HcclResult`` value (``HCCL_E_PARA`` = 1, ...), ``.name``
  its HCCL name, and ``str()`` reads ``HCCL_E_PARA (1): argument 'count' = ...``. It is an
  ``AclError``, so ``except AclError`` and ``get_recent_err_msg`` see it; the compat face
  returns its code, as CANN's ``Hccl*`` functions return an ``HcclResult``.
- A collective that fails while it runs (a peer died, a timeout) fails its *stream*: the next
  synchronize of that stream raises a plain ``AclError`` with an ACL runtime code
  (``STREAM_FAILURE_CODES``), as ``aclrtSynchronizeStream`` reports a failed HCCL task on
  CANN; its message starts with the HCCL name (``HCCL_E_TIMEOUT: HcclAllReduce ...``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_INTERNAL_ERROR,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_INVALID_HANDLE,
    ACL_ERROR_RT_LINK_ERROR,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_TASK_TIMEOUT,
    HCCL_E_INTERNAL,
    HCCL_E_PARA,
    HCCL_E_RUNTIME,
    HCCL_E_TCP_TRANSFER,
    HCCL_E_TIMEOUT,
    AclError,
    _short_repr,
    hccl_result_name,
    set_recent_err_msg,
)

# the ACL code a stream reports for a collective that failed with this HcclResult
STREAM_FAILURE_CODES = {
    HCCL_E_TIMEOUT: ACL_ERROR_RT_TASK_TIMEOUT,  # 107020: task execution timed out
    HCCL_E_TCP_TRANSFER: ACL_ERROR_RT_LINK_ERROR,  # 507056: link between devices broken
    HCCL_E_INTERNAL: ACL_ERROR_RT_INTERNAL_ERROR,  # 507000
}
_ACL_PARAM_CODES = frozenset({  # the runtime's "the caller passed a bad value" codes
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_INVALID_HANDLE})
_TIMEOUT_WORDS = ("timed out", "timeout")
_LINK_WORDS = ("connection", "closed", "reset by peer", "broken pipe", "socket")

F = TypeVar("F", bound=Callable[..., Any])


class HcclError(AclError):
    """An HCCL failure: ``code`` is the ``HcclResult``, ``name`` its HCCL name."""

    def _set_fields(self, code: int, message: str) -> None:
        super()._set_fields(code, message)
        self.name = hccl_result_name(self.code)


def bad_argument(argument: str, value: Any, reason: str, code: int = HCCL_E_PARA) -> HcclError:
    """Build (not raise) an ``HcclError`` naming the argument, its value and the reason."""
    return HcclError(code, f"argument {argument!r} = {_short_repr(value)} is invalid: {reason}")


def as_hccl_error(exc: Exception) -> HcclError:
    """The ``HcclError`` an HCCL function raises for ``exc`` (kept if it already is one):
    the runtime's parameter errors become ``HCCL_E_PARA``, its other errors
    ``HCCL_E_RUNTIME`` (naming the runtime's code), a wrong call (``TypeError`` or
    ``ValueError``) ``HCCL_E_PARA``."""
    if isinstance(exc, HcclError):
        return exc
    if isinstance(exc, AclError):
        if exc.code in _ACL_PARAM_CODES:
            return HcclError(HCCL_E_PARA, exc.message)
        return HcclError(HCCL_E_RUNTIME, str(exc))  # keeps the runtime's code and name
    return HcclError(HCCL_E_PARA, f"{type(exc).__name__}: {exc}")


def hccl_api(fn: F) -> F:
    """Make every failure of ``fn`` an ``HcclError`` (see ``as_hccl_error``), recorded as
    the thread's recent error message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (AclError, TypeError, ValueError) as exc:
            error = as_hccl_error(exc)
            set_recent_err_msg(str(error))  # the error leaves the API here
            if error is exc:
                raise
            raise error from exc

    return wrapper  # type: ignore[return-value]


def classify(exc: BaseException) -> int:
    """The ``HcclResult`` for an exception raised by the transport while a collective ran."""
    if isinstance(exc, HcclError):
        return exc.code
    text = str(exc).lower()
    if any(word in text for word in _TIMEOUT_WORDS):
        return HCCL_E_TIMEOUT
    if any(word in text for word in _LINK_WORDS):
        return HCCL_E_TCP_TRANSFER
    return HCCL_E_INTERNAL


def stream_failure(what: str, exc: BaseException) -> AclError:
    """The error that fails a stream when the collective described by ``what`` raised."""
    result = classify(exc)
    code = STREAM_FAILURE_CODES.get(result, ACL_ERROR_RT_INTERNAL_ERROR)
    detail = exc.message if isinstance(exc, AclError) else f"{type(exc).__name__}: {exc}"
    return AclError(code, f"{hccl_result_name(result)}: {what} failed: {detail}")


__all__ = [
    "STREAM_FAILURE_CODES",
    "HcclError",
    "as_hccl_error",
    "bad_argument",
    "classify",
    "hccl_api",
    "stream_failure",
]
