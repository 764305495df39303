"""The model engine: a lowered graph made runnable, prepared once, replayed per run.

Design note (invariants)
------------------------
* Loading allocates everything a run needs: the weights (one device allocation holding
  every initializer), the arena (one allocation, offsets from ``plan.py``), one workspace
  sized for the largest step, an aclTensor per value, and a *repeatable* aclnn executor per
  step (phase 1 runs here, once). A run copies the inputs in, replays phase 2 of every
  executor in order on one stream, synchronizes and copies the outputs out: no allocation,
  no per-operator validation.
* Views share their root value's memory (same address, new dims).
* One run at a time per engine (a lock): runs share the arena. Several engines (models)
  may run at once from several threads and streams.
* ``close()`` destroys the executors, tensors and scalars and frees the memory; it is
  idempotent, and the engine is unusable afterwards.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_MODEL_INPUT_NOT_MATCH, AclError
from openacl.model.lowering import Lowered, Ref, RefList, Scalar
from openacl.model.plan import ARENA_ALIGNMENT, MemoryPlan
from openacl.ops import REGISTRY
from openacl.ops.dispatch import phase1
from openacl.ops.executor import find_executor
from openacl.runtime import memory
from openacl.runtime.stream import resolve_stream
from openacl.tensor import create_scalar, create_tensor, destroy_scalar, destroy_tensor

ACL_MEMCPY_DEFAULT = 4


def _aligned(size: int) -> int:
    return -(-size // ARENA_ALIGNMENT) * ARENA_ALIGNMENT


class Engine:
    """A loaded model: memory, tensors and executors, ready to run."""

    def __init__(self, lowered: Lowered, plan: MemoryPlan) -> None:
        self.graph = lowered.graph
        self.lowered = lowered
        self.plan = plan
        self._lock = threading.Lock()
        self._pointers: list[int] = []
        self._tensors: dict[str, int] = {}
        self._scalars: list[int] = []
        self._executors: list[tuple[int, int]] = []  # (executor, workspace bytes)
        self.workspace_bytes = 0
        self._workspace = 0
        self.closed = False
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    # -- loading ----------------------------------------------------------------------------
    def _malloc(self, nbytes: int) -> int:
        pointer = memory.malloc(max(nbytes, 1))
        self._pointers.append(pointer)
        return pointer

    def _load(self) -> None:
        graph = self.graph
        weights = {}
        offset = 0
        for name, array in graph.initializers.items():
            weights[name] = offset
            offset += _aligned(max(array.nbytes, 1))
        self.weights_bytes = offset
        weights_base = self._malloc(offset)
        for name, array in graph.initializers.items():
            host = np.ascontiguousarray(array)
            if host.nbytes:
                memory.memcpy(weights_base + weights[name], host.nbytes,
                              memory.register_buffer(host), host.nbytes, ACL_MEMCPY_DEFAULT)
        arena = self._malloc(self.plan.arena_bytes)
        addresses = {name: weights_base + off for name, off in weights.items()}
        addresses.update({name: arena + off for name, off in self.plan.offsets.items()})
        for name, root in self.lowered.views.items():
            addresses[name] = addresses[root]
        for name, address in addresses.items():
            value = graph.value(name)
            data_type = dtypes.from_numpy_dtype(value.dtype)
            self._tensors[name] = create_tensor(value.shape, data_type, None, 0,
                                                dtypes.Format.ACL_FORMAT_ND, value.shape,
                                                address)
        for step in self.lowered.steps:
            raw = {name: self._argument(arg) for name, arg in step.args}
            workspace, executor = phase1(REGISTRY[step.op], raw)
            find_executor(executor).repeatable = True
            self._executors.append((executor, workspace))
            self.workspace_bytes = max(self.workspace_bytes, workspace)
        if self.workspace_bytes:
            self._workspace = self._malloc(self.workspace_bytes)

    def _argument(self, arg: Any) -> Any:
        if isinstance(arg, Ref):
            return self._tensors[arg.value]
        if isinstance(arg, RefList):
            return [self._tensors[name] for name in arg.values]
        if isinstance(arg, Scalar):
            handle = create_scalar(arg.value, dtypes.from_numpy_dtype(arg.dtype))
            self._scalars.append(handle)
            return handle
        return arg

    # -- running ----------------------------------------------------------------------------
    def run(self, feeds: dict[str, np.ndarray], stream: Any = None) -> list[np.ndarray]:
        """Run the model on host arrays; returns the outputs in graph order."""
        if self.closed:
            raise AclError(ACL_ERROR_INVALID_PARAM, "the model was closed (unloaded)")
        with self._lock:
            target = resolve_stream(stream)
            for name in self.graph.inputs:
                self._copy_in(name, feeds)
            for executor, workspace in self._executors:
                find_executor(executor).launch(self._workspace, workspace, target)
            target.synchronize()
            return [self._copy_out(name) for name in self.graph.outputs]

    def _copy_in(self, name: str, feeds: dict[str, np.ndarray]) -> None:
        value = self.graph.value(name)
        if name not in feeds:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {name!r} is missing (the model takes "
                           f"{', '.join(self.graph.inputs)})")
        host = np.ascontiguousarray(feeds[name])
        if host.shape != value.shape or host.dtype != value.dtype:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {name!r} must be {value.dtype} {list(value.shape)}; got "
                           f"{host.dtype} {list(host.shape)}")
        if host.nbytes:
            memory.memcpy(self._address(name), value.nbytes, memory.register_buffer(host),
                          host.nbytes, ACL_MEMCPY_DEFAULT)

    def _copy_out(self, name: str) -> np.ndarray:
        value = self.graph.value(name)
        host = np.empty(value.shape, value.dtype)
        if host.nbytes:
            memory.memcpy(memory.register_buffer(host), host.nbytes, self._address(name),
                          host.nbytes, ACL_MEMCPY_DEFAULT)
        return host

    def _address(self, name: str) -> int:
        from openacl.tensor import get_raw_tensor_addr

        return get_raw_tensor_addr(self._tensors[name])

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        self.closed = True
        for executor, _ in self._executors:
            try:
                find_executor(executor).release()
            except AclError:
                pass
        self._executors = []
        for handle in self._tensors.values():
            destroy_tensor(handle)
        self._tensors = {}
        for handle in self._scalars:
            destroy_scalar(handle)
        self._scalars = []
        for pointer in self._pointers:
            memory.free(pointer)
        self._pointers = []
