"""Progress bars for the long commands (convert, profile, fetch, op run over many cases).

One place decides how progress looks: a tqdm bar on stderr when stderr is a terminal, and
nothing at all otherwise (pipes, CI logs and tests stay clean). tqdm is imported here, when a
command first asks for a bar, never by ``import openacl``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["bar"]


def bar(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
        unit: str = "it", leave: bool = False) -> Any:
    """A tqdm progress bar over ``iterable`` (or one to ``update()`` by hand up to ``total``).

    Shown only on a terminal (tqdm's ``disable=None``), on stderr, cleared when done unless
    ``leave``; usable as a context manager either way.
    """
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, disable=None,
                dynamic_ncols=True)
