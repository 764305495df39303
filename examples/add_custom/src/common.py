"""Logging and file helpers shared by the sample's modules (the sample's common.cpp)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def info_log(message: str) -> None:
    print(f"[INFO]  {message}", flush=True)


def warn_log(message: str) -> None:
    print(f"[WARN]  {message}", flush=True)


def error_log(message: str) -> None:
    print(f"[ERROR] {message}", file=sys.stderr, flush=True)


def read_file(path: Path, buffer: np.ndarray) -> bool:
    """Fill ``buffer`` (a host-memory view) with the bytes of ``path``; sizes must agree."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        error_log(f"Read file {path} failed: {exc}")
        return False
    target = buffer.reshape(-1).view(np.uint8)
    if data.size != target.size:
        error_log(f"File {path} holds {data.size} bytes; the buffer needs {target.size}")
        return False
    target[:] = data
    return True


def write_file(path: Path, buffer: np.ndarray) -> bool:
    try:
        buffer.tofile(path)
    except OSError as exc:
        error_log(f"Write file {path} failed: {exc}")
        return False
    return True
