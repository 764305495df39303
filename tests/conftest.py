"""Shared fixtures: an initialised runtime in every stream mode, and a gate task.

Every test that needs the runtime takes ``runtime`` (parametrized over the stream modes,
two CPU devices, device 0 set) or ``threaded_runtime``. Any runtime a test leaves behind is
finalized afterwards so tests never leak state into each other.
"""

from __future__ import annotations

import threading
import warnings

import pytest

import openacl

STREAM_MODES = ("threaded", "inline", "deterministic")
GATE_TIMEOUT_S = 10.0  # a gate task gives up after this long, so a bug fails instead of hanging


def _start(mode: str, **extra) -> None:
    openacl.init({"stream_mode": mode, "device_count": 2, **extra})
    openacl.rt.set_device(0)


def _stop() -> None:
    if openacl.is_initialized():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", openacl.LeakWarning)
            openacl.finalize()


@pytest.fixture(params=STREAM_MODES)
def runtime(request):
    """An initialised runtime with device 0 current; the value is the stream mode."""
    _start(request.param)
    yield request.param
    _stop()


@pytest.fixture
def threaded_runtime():
    _start("threaded")
    yield "threaded"
    _stop()


@pytest.fixture(autouse=True)
def _no_runtime_left_behind():
    yield
    _stop()


class Gate:
    """A task that holds a stream until ``open()`` (or fails after GATE_TIMEOUT_S)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.entered = threading.Event()

    def task(self) -> None:
        self.entered.set()
        if not self._event.wait(GATE_TIMEOUT_S):
            raise TimeoutError("gate was never opened")

    def open(self) -> None:
        self._event.set()


@pytest.fixture
def gate():
    g = Gate()
    yield g
    g.open()
