"""Which stack frames are openacl's own: the one rule behind every "the user's file and line"
(the sanitizer's call sites, a failing kernel block's traceback, the LeakWarning's line).

A frame is openacl's when its file lies in this package's folder, symlinks resolved; the
answer per file name is cached, so a walk up the stack costs a dict lookup per frame.
"""

from __future__ import annotations

import functools
import os

__all__ = ["PACKAGE_DIR", "in_package"]

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # .../openacl


@functools.cache
def in_package(filename: str) -> bool:
    """Whether ``filename`` (a code object's ``co_filename``) is a file of openacl."""
    try:
        return os.path.realpath(filename).startswith(PACKAGE_DIR + os.sep)
    except (OSError, ValueError):
        return False
