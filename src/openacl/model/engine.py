"""The model engine: a lowered graph made runnable, prepared once, replayed per run.

Design note (invariants)
------------------------
* Loading allocates everything a run needs: the weights (on a device backend one
  allocation holding every initializer; on the CPU backend none: the initializer arrays are
  registered and used where they are, so the graph must keep them and nothing may change
  them while the engine lives), the arena (one allocation, offsets from ``plan.py``), one workspace
  sized for the largest step, an aclTensor per value, and a *repeatable* aclnn executor per
  step (phase 1 runs here, once). Nothing is allocated after loading, and no operator is
  validated again.
* Two ways to run, one replay (``_replay``: phase 2 of every executor, in order, on one
  stream):
  - ``run(feeds)`` (host arrays): copies the inputs in, replays, synchronizes, copies the
    outputs out into new host arrays.
  - ``launch(inputs, outputs, stream)`` (device buffers, as aclmdlExecuteAsync): every
    (address, size) pair is checked first (count, size, bounds), so a bad call enqueues
    nothing; then device-to-device ``memcpy_async`` of the inputs into the arena, the
    replay, and ``memcpy_async`` of the outputs out, all on ``stream``, and it returns.
* Views share their root value's memory (same address, new dims).
* Runs share the arena, so they are serialized: the lock covers the enqueueing of a run,
  and a launch on another stream than the previous launch first makes its stream wait for
  the previous launch's last task (a timeline wait, the primitive events use); ``run``
  waits on the host for it. Several engines (models) may run at once from several threads
  and streams.
* ``close()`` destroys the executors, tensors and scalars and frees the memory; it is
  idempotent, and the engine is unusable afterwards. A launch still queued keeps the
  memory it touches alive (its tasks hold their views; see ``runtime/memory.py``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    AclError,
)
from openacl.model.epilogues import fused_steps
from openacl.model.ir import Lowered, Ref, RefList, Scalar
from openacl.model.plan import MemoryPlan, slot_bytes
from openacl.ops import REGISTRY
from openacl.ops.call import Epilogue
from openacl.ops.dispatch import phase1
from openacl.ops.executor import find_executor
from openacl.ops.fpstate import ignore_floating_point
from openacl.runtime import core, memory
from openacl.runtime.memory import use_on_stream
from openacl.runtime.stream import Stream, resolve_stream
from openacl.tensor import (
    create_scalar,
    create_tensor,
    destroy_scalar,
    destroy_tensor,
    get_raw_tensor_addr,
    lookup_tensor,
    tensor_view,
)

ACL_MEMCPY_DEFAULT = 4
StepClock = Callable[[int, int, int], None]  # (step index, start ns, end ns)


@dataclass
class _HostRun:
    """What a run on the calling thread uses, prepared once: the input and output views
    (in graph order) and every step's kernel bound to its views."""

    inputs: list[tuple[str, np.ndarray]]
    outputs: list[np.ndarray]
    kernels: list[Callable[[], None]]


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
        self._last_launch: tuple[Stream, int] | None = None  # (stream, its last task)
        self._host: _HostRun | None = None  # see _run_here
        # (the operators declare whether their kernels may raise floating-point warnings)
        self._may_warn = any(not REGISTRY[step.op].silent for step in lowered.steps)
        self._on_host = core.current().backend.host_addressable  # runs_here(None), fixed
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

    def _place_weights(self) -> dict[str, int]:
        """The initializers' addresses. On the CPU backend device memory is host memory, so
        the weights are used where they already are (registered, not copied: an .om's
        memory-mapped blob stays one mapping); on a device they are copied into one
        allocation. ``weights_bytes`` counts them either way."""
        graph = self.graph
        addresses: dict[str, int] = {}
        copies: dict[str, np.ndarray] = {}
        alias = core.current().backend.host_addressable
        for name, array in graph.initializers.items():
            host = array if array.flags.c_contiguous else np.ascontiguousarray(array)
            if alias and host.nbytes:
                graph.initializers[name] = host  # the registration lives while the array does
                addresses[name] = memory.register_buffer(host)
            else:
                copies[name] = host
        self.weights_bytes = sum(a.nbytes for a in graph.initializers.values())
        offsets, offset = {}, 0
        for name, host in copies.items():
            offsets[name] = offset
            offset += slot_bytes(host.nbytes)
        if copies:
            base = self._malloc(offset)
            for name, host in copies.items():
                addresses[name] = base + offsets[name]
                if host.nbytes:
                    memory.memcpy(addresses[name], host.nbytes, memory.register_buffer(host),
                                  host.nbytes, ACL_MEMCPY_DEFAULT)
        return addresses

    def _load(self) -> None:
        graph = self.graph
        addresses = self._place_weights()
        arena = self._malloc(self.plan.arena_bytes)
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
    def _check_open(self) -> None:
        if self.closed:
            raise AclError(ACL_ERROR_INVALID_PARAM, "the model was closed (unloaded)")

    def run(self, feeds: dict[str, np.ndarray], stream: Any = None) -> list[np.ndarray]:
        """Run the model on host arrays; returns the outputs in graph order.

        Without ``stream`` on the CPU backend the kernels run right here, on the calling
        thread (the run is synchronous anyway), through views prepared at the first run:
        no stream round trip, no pointer resolution, no allocation but the outputs.
        """
        if stream is None and self._on_host:  # the common call, without the detours
            return self._run_here(feeds)
        return self._run(feeds, stream, None)

    def launch(self, inputs: Sequence[tuple[int, int]], outputs: Sequence[tuple[int, int]],
               stream: Any = None) -> None:
        """Enqueue one run on device buffers (aclmdlExecuteAsync); returns at once.

        Args:
            inputs, outputs: one (address, size in bytes) pair per graph input / output, in
                graph order; a size may exceed what the value needs, never fall short.
            stream: the stream (None: the calling thread's current one).

        Raises:
            AclError: ACL_ERROR_MODEL_INPUT_NOT_MATCH / ACL_ERROR_MODEL_OUTPUT_NOT_MATCH for
                a wrong count or a buffer too small, ACL_ERROR_INVALID_PARAM for an address
                the runtime does not know; nothing is enqueued then.
        """
        self._check_open()
        sources = self._check_buffers(inputs, self.graph.inputs, "input",
                                      ACL_ERROR_MODEL_INPUT_NOT_MATCH, write=False)
        targets = self._check_buffers(outputs, self.graph.outputs, "output",
                                      ACL_ERROR_MODEL_OUTPUT_NOT_MATCH, write=True)
        with self._lock:
            self._check_open()
            target = resolve_stream(stream)
            self._order_after_previous_launch(target)
            for name, (address, nbytes) in zip(self.graph.inputs, sources, strict=True):
                if nbytes:
                    memory.memcpy_async(self._address(name), nbytes, address, nbytes,
                                        ACL_MEMCPY_DEFAULT, target)
            self._replay(target)
            for name, (address, nbytes) in zip(self.graph.outputs, targets, strict=True):
                if nbytes:
                    memory.memcpy_async(address, nbytes, self._address(name), nbytes,
                                        ACL_MEMCPY_DEFAULT, target)
            self._last_launch = (target, target.queue.submitted)

    def _check_buffers(self, buffers: Sequence[tuple[int, int]], names: list[str], kind: str,
                       code: int, write: bool) -> list[tuple[int, int]]:
        """(address, bytes to copy) per value, after checking count, sizes and bounds."""
        if len(buffers) != len(names):
            raise AclError(code, f"the model has {len(names)} {kind}(s) ({', '.join(names)}); "
                                 f"got {len(buffers)} {kind} buffer(s)")
        pointers = core.current().pointers
        checked = []
        for index, (name, (address, size)) in enumerate(zip(names, buffers, strict=True)):
            needed = self.graph.value(name).nbytes
            if size < needed:
                raise AclError(code, f"{kind} {index} ({name!r}): the buffer holds {size} "
                                     f"bytes; the model needs {needed}")
            if needed:
                pointers.resolve(address, needed, f"{kind}s[{index}]", write)
            checked.append((address, needed))
        return checked

    def _order_after_previous_launch(self, target: Stream) -> None:
        """Make ``target`` wait for the previous launch when that ran on another stream."""
        last = self._last_launch
        if last is None or last[0] is target or last[0].queue.done(last[1]):
            return
        timeline, value = last[0].queue.timeline, last[1]
        target.submit(lambda: timeline.wait(value))

    def _wait_previous_launch(self) -> None:
        last = self._last_launch
        if last is not None:
            last[0].queue.timeline.wait(last[1])

    def run_profiled(self, feeds: dict[str, np.ndarray], record: StepClock,
                     stream: Any = None) -> list[np.ndarray]:
        """One ``run`` that reports every step's time: ``record(step_index, start_ns,
        end_ns)`` (``time.perf_counter_ns``). Without ``stream`` on the CPU backend the
        kernels run here as in ``run``; on a stream each step is launched and waited for
        alone, so a step's time includes one stream round trip (the profile's lane says
        which). Timing policy (aggregation, reports) lives in ``profile.py``."""
        return self._run(feeds, stream, record)

    @staticmethod
    def runs_here(stream: Any) -> bool:
        """Whether ``run(feeds, stream)`` executes the kernels on the calling thread (no
        stream given, CPU backend) rather than enqueueing them on a stream."""
        return stream is None and core.current().backend.host_addressable

    def _run(self, feeds: dict[str, np.ndarray], stream: Any,
             record: StepClock | None) -> list[np.ndarray]:
        self._check_open()
        if self.runs_here(stream):
            return self._run_here(feeds, record)
        with self._lock:
            target = resolve_stream(stream)
            self._wait_previous_launch()
            for name in self.graph.inputs:
                self._copy_in(name, feeds)
            self._replay(target, record)
            target.synchronize()
            return [self._copy_out(name) for name in self.graph.outputs]

    def _run_here(self, feeds: dict[str, np.ndarray],
                  record: StepClock | None = None) -> list[np.ndarray]:
        with self._lock:
            self._check_open()
            if self._last_launch is not None:
                self._wait_previous_launch()
            host = self._host if self._host is not None else self._prepare_host()
            for name, target in host.inputs:
                feed = feeds.get(name)
                if (type(feed) is not np.ndarray or feed.shape != target.shape
                        or feed.dtype != target.dtype):  # the common case skips the checks
                    feed = self._checked_feed(name, feeds)
                np.copyto(target, feed, casting="no")
            # kernels behave as on a device: inf/NaN results, no floating-point warnings (a
            # stream worker runs quietly; here the caller's numpy error state would apply).
            # Skipped when no step can warn.
            with ignore_floating_point() if self._may_warn else contextlib.nullcontext():
                index = 0
                try:
                    if record is None:
                        for index, kernel in enumerate(host.kernels):  # noqa: B007 (below)
                            kernel()
                    else:
                        clock = time.perf_counter_ns
                        for index, kernel in enumerate(host.kernels):
                            start = clock()
                            kernel()
                            record(index, start, clock())
                except AclError:
                    raise
                except Exception as exc:
                    step = self.lowered.steps[index]
                    raise AclError(ACL_ERROR_RT_AICORE_EXCEPTION,
                                   f"model {self.graph.name!r}: node {step.node!r} "
                                   f"(aclnn{step.op}) failed: {type(exc).__name__}: {exc}"
                                   ) from exc
            return [view.copy() for view in host.outputs]

    def _prepare_host(self) -> _HostRun:
        """Views of the inputs/outputs and every executor's kernel bound to its views (made
        at the first host run, kept for the next)."""
        views = {name: tensor_view(lookup_tensor(self._tensors[name]), name,
                                   write=name in self.graph.inputs)[0]
                 for name in (*self.graph.inputs, *self.graph.outputs)}  # outputs: read only
        workspace = None
        if self.workspace_bytes:
            region, offset = core.current().pointers.resolve(
                self._workspace, self.workspace_bytes, "workspace", write=True)
            workspace = region.view(offset, self.workspace_bytes)
        self._host = _HostRun(
            inputs=[(name, views[name]) for name in self.graph.inputs],
            outputs=[views[name] for name in self.graph.outputs],
            kernels=self._bound_kernels(workspace))
        return self._host

    def _bound_kernels(self, workspace: Any) -> list[Callable[[], None]]:
        """Every step's kernel bound to its views; a step followed by an activation it
        applies in its tiles (model/epilogues.py) carries it, the activation's slot runs
        nothing (its own kernel is the producer's fallback, ``Epilogue.apply``)."""
        steps = self.lowered.steps
        kernels = [find_executor(executor).bound_kernel(workspace, self._constant_args(step))
                   for (executor, _), step in zip(self._executors, steps, strict=True)]
        for index, (name, alpha) in fused_steps(steps).items():
            executor = find_executor(self._executors[index][0])
            kernels[index] = executor.bound_kernel(
                workspace, self._constant_args(steps[index]),
                Epilogue(name, alpha, kernels[index + 1]))
            kernels[index + 1] = _skip
        return kernels

    def _constant_args(self, step: Any) -> frozenset[str]:
        """The arguments of ``step`` bound to initializers: nothing changes them while the
        engine lives (the design note), so a kernel may derive from them once."""
        initializers, views = self.graph.initializers, self.lowered.views
        names = []
        for name, arg in step.args:
            values = [arg.value] if isinstance(arg, Ref) else (
                list(arg.values) if isinstance(arg, RefList) else None)
            if values and all(views.get(value, value) in initializers for value in values):
                names.append(name)  # a tensor list counts when every tensor is a weight
        return frozenset(names)

    def _replay(self, target: Stream, record: StepClock | None = None) -> None:
        """Enqueue every step on ``target``; with ``record``, wait for each and time it.

        On a device backend an untimed replay is one stream task that issues every step's
        kernels in order (one completion signal per run instead of one per step); the
        kernels themselves still run asynchronously on the stream."""
        if record is None and not core.current().backend.host_addressable:
            host = self._host if self._host is not None else self._prepare_host()
            for address in self._pointers:
                region, _ = core.current().pointers.resolve(address, 1, "model memory")
                use_on_stream(region, target)
            target.submit(functools.partial(_run_steps, host.kernels))
            return
        for index, (executor, workspace) in enumerate(self._executors):
            start = time.perf_counter_ns() if record is not None else 0
            find_executor(executor).launch(self._workspace, workspace, target)
            if record is not None:
                target.synchronize()
                record(index, start, time.perf_counter_ns())

    def _checked_feed(self, name: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
        value = self.graph.value(name)
        if name not in feeds:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {name!r} is missing (the model takes "
                           f"{', '.join(self.graph.inputs)})")
        host = np.asarray(feeds[name], order="C")  # keeps 0-d inputs 0-d
        if host.shape != value.shape or host.dtype != value.dtype:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {name!r} must be {value.dtype} {list(value.shape)}; got "
                           f"{host.dtype} {list(host.shape)}")
        return host

    def _copy_in(self, name: str, feeds: dict[str, np.ndarray]) -> None:
        value = self.graph.value(name)
        host = self._checked_feed(name, feeds)
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
        return get_raw_tensor_addr(self._tensors[name])

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        self.closed = True
        self._host = None
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


def _skip() -> None:
    """The kernel of an activation step fused into the step before it."""


def _run_steps(kernels: list[Callable[[], None]]) -> None:
    """One stream task: every step of a model run, in order."""
    for kernel in kernels:
        kernel()


class EngineSet:
    """A model's engines by batch size: the main engine (built at load) and, for a
    dynamic-batch model, one per other gear (``om.Gear``), built once on first use under a
    lock. Shared by InferenceSession and the ACL model API."""

    def __init__(self, main: Engine, gears: Sequence[Any] = ()) -> None:
        self.main = main
        self._gears = {gear.batch: gear for gear in gears}
        self._engines: dict[int, Engine] = {}
        self._lock = threading.Lock()
        if self._gears:
            graph = main.graph
            self._engines[graph.value(graph.inputs[0]).shape[0]] = main

    @property
    def dynamic(self) -> bool:
        return bool(self._gears)

    @property
    def batches(self) -> list[int]:
        """The batch sizes of a dynamic-batch model (empty for a static model)."""
        return sorted({*self._gears, *self._engines})

    def for_batch(self, batch: Any) -> Engine:
        """The engine of the gear for ``batch``; ``KeyError`` when the model has none."""
        with self._lock:
            if batch not in self._engines:
                gear = self._gears[batch]
                self._engines[batch] = Engine(gear.lowered, gear.plan)
            return self._engines[batch]

    def close(self) -> None:
        for engine in {id(e): e for e in (self.main, *self._engines.values())
                       if e is not None}.values():
            engine.close()
