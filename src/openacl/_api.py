"""What ``dir()`` of a public module shows: its chosen names (``__all__``) and its dunders,
not the helpers and modules it imports (PEP 562's module ``__dir__``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["module_dir"]


def module_dir(namespace: dict[str, Any]) -> Callable[[], list[str]]:
    """A module ``__dir__`` for ``namespace`` (the module's ``globals()``): its ``__all__``
    (read at each call, so names a module adds later count) and its dunder names."""

    def listing() -> list[str]:
        return sorted({*namespace.get("__all__", ()),
                       *(name for name in namespace if name.startswith("__"))})

    return listing
