"""Callers branch on what a backend can do, not on its name: a host-addressable backend
(device memory is host memory) keeps its behaviour under any name."""

from __future__ import annotations

import numpy as np
import pytest

import openacl
from openacl import util
from openacl.backends.base import Backend
from openacl.backends.cpu import CpuBackend
from openacl.model.engine import Engine
from openacl.runtime import core


def test_the_flags_of_the_backends():
    assert CpuBackend.host_addressable and not Backend.host_addressable


def test_a_host_addressable_backend_under_another_name(threaded_runtime, monkeypatch):
    backend = core.current().backend
    if not backend.host_addressable:
        pytest.skip("the device backend is not host-addressable")
    monkeypatch.setattr(backend, "name", "renamed")
    tensor = openacl.to_device(np.arange(4, dtype=np.float32))
    try:
        np.testing.assert_array_equal(util.ptr_to_numpy(tensor.data_ptr, (4,), np.float32),
                                      np.arange(4, dtype=np.float32))
        assert tensor.__dlpack_device__() == (1, 0)  # kDLCPU
        assert Engine.runs_here(None)
    finally:
        tensor.free()
