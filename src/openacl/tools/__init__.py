"""The operator developer's tools: test data (``datagen``: CANN's input generation and .bin
files) and CANN's precision standards (``verify``). ``openacl op gen-data`` / ``openacl op
verify`` are their command line; scripts import the modules directly::

    from openacl.tools.verify import verify
    from openacl.tools import datagen

The submodules are imported on first use (``openacl.tools.verify`` is an attribute access
away), so importing the package costs nothing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from openacl._api import module_dir

__all__ = ["datagen", "verify"]
__dir__ = module_dir(globals())


def __getattr__(name: str) -> ModuleType:
    """``datagen`` or ``verify``, imported on first use."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
