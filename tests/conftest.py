"""Shared fixtures: an initialised runtime in every stream mode on every backend, and a
gate task.

Every test that needs the runtime takes ``runtime`` (parametrized over the stream modes and
the backends, device 0 set; two devices on the CPU backend, the GPUs there are on CUDA) or
``threaded_runtime`` (parametrized over the backends). The ``cuda`` cases run where CuPy
finds an NVIDIA GPU and skip with the reason otherwise; the ``cuda-sim`` cases run the CUDA
backend's code everywhere, over the CPU stand-in for CuPy in ``fake_cupy.py``.
``OPENACL_TEST_BACKENDS=cuda`` (a comma-separated list) restricts a run to some backends.
Any runtime a test leaves behind is finalized afterwards so tests never leak state into
each other.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings

import pytest

import fake_cupy
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
    chosen = os.environ.get("OPENACL_TEST_BACKENDS", "cpu,cuda-sim,cuda").replace(" ", "")
    chosen = chosen.split(",")
    params = []
    if "cpu" in chosen:
        params.append(pytest.param("cpu", id="cpu"))
    if "cuda-sim" in chosen:  # the CUDA backend's code over tests/fake_cupy.py
        params.append(pytest.param("cuda-sim", id="cuda-sim"))
    if "cuda" in chosen:
        reason = cuda_unavailable()
        params.append(pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
            reason is not None, reason=reason or "")))
    return params


BACKENDS = _backend_params()


_fake_cupy = contextlib.ExitStack()  # holds the fake CuPy in sys.modules for cuda-sim


def _start(mode: str, backend: str = "cpu", **extra) -> None:
    if backend == "cuda-sim":
        _fake_cupy.enter_context(fake_cupy.installed())
        backend = "cuda"
    openacl.init({"stream_mode": mode, "device_count": 2, "backend": backend, **extra})
    openacl.rt.set_device(0)


def _stop() -> None:
    try:
        if openacl.is_initialized():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", openacl.LeakWarning)
                openacl.finalize()
    finally:
        _fake_cupy.close()


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


@pytest.fixture
def two_devices(backend):
    """Skip unless the test's runtime (started by a fixture listed before this one) has at
    least two devices: one GPU skips."""
    count = openacl.rt.get_device_count()
    if count < 2:
        pytest.skip(f"needs two devices; this backend has {count}")


@pytest.fixture
def host_addressable(backend):
    """Skip unless device memory is host-addressable (the cpu backend): for tests of
    ``ptr_to_numpy`` / ``ptr_to_bytes`` views of device memory."""
    if backend != "cpu":
        pytest.skip(f"device memory of the {backend} backend is not host-addressable")


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


@pytest.fixture(params=["native", "numpy"])
def kernel_path(request):
    """Run a test on the C kernels (openacl._native, where built) and on the numpy kernels:
    operator tests that use it cover both implementations of the float32 hot paths."""
    from openacl.ops import native

    if request.param == "numpy":
        with native.disabled():
            yield request.param
    else:
        if not native.built():
            pytest.skip("openacl._native is not built (no C compiler at install time)")
        yield request.param
