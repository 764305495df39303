"""The runtime's logger ("openacl"), made on first use: a model run that logs nothing never
imports ``logging`` (~0.7 MB of a process that must stay small).

``configure(level)`` records the level ``init`` was given (``LOG_LEVELS`` of the config);
it is applied to the logger when the logger is made, or at once when ``logging`` is already
imported (someone may be watching the logger).
"""

from __future__ import annotations

import sys
from typing import Any

LOGGER_NAME = "openacl"
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "null": 51}  # null: silent
_level: int | None = None


def configure(level: str) -> None:
    """Set the logger's level (a config ``log_level``)."""
    global _level
    _level = LEVELS[level]
    if "logging" in sys.modules:
        logger()


def enabled(level: str) -> bool:
    """Whether a message at ``level`` would be emitted (without making the logger)."""
    return LEVELS[level] >= (_level if _level is not None else LEVELS["warning"])


def logger() -> Any:
    """The "openacl" logger, with the configured level."""
    import logging

    result = logging.getLogger(LOGGER_NAME)
    if _level is not None:
        result.setLevel(_level)
    return result
