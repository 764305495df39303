"""Wrappers that turn a Pythonic function (returns outputs, raises AclError) into the C/pyACL
convention (returns codes, never raises for a bad argument)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_SUCCESS,
    AclError,
    error_name,
    set_recent_err_msg,
)

INVALID_HANDLE = 0  # what a failed constructor returns, as a C constructor returns NULL


def _code_of(exc: Exception, bad_call_code: int) -> int:
    """The code to return for ``exc``; its message becomes the thread's recent error (the
    error leaves the API here)."""
    if isinstance(exc, AclError):
        set_recent_err_msg(str(exc))
        return exc.code
    # a wrong number or type of arguments: report it as CANN would report a bad parameter
    set_recent_err_msg(f"{error_name(bad_call_code)} ({bad_call_code}): "
                       f"{type(exc).__name__}: {exc}")
    return bad_call_code


def returning_code(fn: Callable[..., Any], bad_call_code: int = ACL_ERROR_INVALID_PARAM
                   ) -> Callable[..., int]:
    """``fn(...)`` -> ``ret``."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        try:
            fn(*args, **kwargs)
        except (AclError, TypeError, ValueError) as exc:
            return _code_of(exc, bad_call_code)
        return ACL_SUCCESS
    return wrapper


def returning_outputs(fn: Callable[..., Any], failure: tuple,
                      bad_call_code: int = ACL_ERROR_INVALID_PARAM) -> Callable[..., tuple]:
    """``fn(...)`` -> ``(outputs..., ret)``; ``failure`` holds one placeholder per output,
    reported on error (and says how many outputs ``fn`` returns)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> tuple:
        try:
            result = fn(*args, **kwargs)
        except (AclError, TypeError, ValueError) as exc:
            return (*failure, _code_of(exc, bad_call_code))
        outputs = result if len(failure) > 1 else (result,)  # one output may be a tuple
        return (*outputs, ACL_SUCCESS)
    return wrapper


def returning_handle(fn: Callable[..., int]) -> Callable[..., int]:
    """A constructor: ``fn(...)`` -> handle, or 0 on failure (message kept)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        try:
            return fn(*args, **kwargs)
        except (AclError, TypeError, ValueError) as exc:
            _code_of(exc, ACL_ERROR_INVALID_PARAM)
            return INVALID_HANDLE
    return wrapper
