"""Shared fixtures: an initialised runtime in every stream mode on every backend, and a
gate task.

Every test that needs the runtime takes ``runtime`` (parametrized over the stream modes and
the backends, device 0 set; two devices on the CPU backend, the GPUs there are on CUDA) or
``threaded_runtime`` (parametrized over the backends). The CUDA cases run where CuPy finds
an NVIDIA GPU and skip with the reason otherwise. ``OPENACL_TEST_BACKENDS=cuda`` (a
comma-separated list) restricts a run to some backends. Any runtime a test leaves behind
is finalized afterwards so tests never leak state into each other.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings

import pytest

import openacl

STREAM_MODES = ("threaded", "inline", "deterministic")
GATE_TIMEOUT_S = 10.0  # a gate task gives up after this long, so a bug fails instead of hanging


@functools.cache
def cuda_unavailable() -> str | None:
    """Why the CUDA backend cannot run here (None when it can)."""
    from openacl.backends.cuda import import_cupy

    try:
        import_cupy()
    except LookupError as exc:
        return f"CUDA backend unavailable: {exc}"
    return None


def _backend_params() -> list:
    chosen = os.environ.get("OPENACL_TEST_BACKENDS", "cpu,cuda").replace(" ", "").split(",")
    params = []
    if "cpu" in chosen:
        params.append(pytest.param("cpu", id="cpu"))
    if "cuda" in chosen:
        reason = cuda_unavailable()
        params.append(pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
            reason is not None, reason=reason or "")))
    return params


BACKENDS = _backend_params()


def _start(mode: str, backend: str = "cpu", **extra) -> None:
    openacl.init({"stream_mode": mode, "device_count": 2, "backend": backend, **extra})
    openacl.rt.set_device(0)


def _stop() -> None:
    if openacl.is_initialized():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", openacl.LeakWarning)
            openacl.finalize()


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend a test runs on ("cpu" or "cuda")."""
    return request.param


@pytest.fixture(params=STREAM_MODES)
def runtime(request, backend):
    """An initialised runtime with device 0 current; the value is the stream mode."""
    _start(request.param, backend)
    yield request.param
    _stop()


@pytest.fixture
def threaded_runtime(backend):
    _start("threaded", backend)
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
