"""The model runtime by pyACL's names (``acl.mdl.*``: load, describe, datasets, execute),
in the Pythonic convention, gathered from ``openacl.model.mdl`` as ``openacl.rt`` gathers
the runtime; ``openacl.model.mdl`` holds the design notes."""

from __future__ import annotations

from typing import Any

from openacl._api import module_dir
from openacl.model import mdl as _mdl
from openacl.model.mdl import *  # noqa: F401,F403 - the aclmdl API, as its __all__ lists it
from openacl.model.mdl import __all__  # noqa: F401

__dir__ = module_dir(globals())


def __getattr__(name: str) -> Any:
    """The module's other names (the description and dataset classes' helpers...)."""
    try:
        return getattr(_mdl, name)
    except AttributeError:
        raise AttributeError(f"module 'openacl.mdl' has no attribute {name!r}") from None
