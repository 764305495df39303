"""Single operators by CANN op type (aclop: aclopExecuteV2, handles, attributes, single-op
models), gathered from the ``openacl.aclop`` package as ``openacl.rt`` gathers the runtime.
``openacl.aclop`` holds the design notes."""

from __future__ import annotations

from typing import Any

from openacl import aclop as _aclop
from openacl._api import module_dir
from openacl.aclop import *  # noqa: F401,F403 - the aclop API, as its __all__ lists it
from openacl.aclop import __all__  # noqa: F401

__dir__ = module_dir(globals())


def __getattr__(name: str) -> Any:
    """The package's other names (OpAttr, OpHandle, the attribute kind tables...)."""
    try:
        return getattr(_aclop, name)
    except AttributeError:
        raise AttributeError(f"module 'openacl.op' has no attribute {name!r}") from None
