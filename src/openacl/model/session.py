"""``InferenceSession``: onnxruntime's shape of API over the engine.

    session = openacl.InferenceSession("model.onnx")          # converted on the fly
    session = openacl.InferenceSession("model.om")            # or `openacl convert`ed
    (y,) = session.run(None, {"x": x})
    future = session.run_async(None, {"x": x}, callback)      # callback(outputs, data, err)
    binding = session.io_binding()                            # device tensors, no host copy
    binding.bind_input("x", openacl.to_device(x)); binding.bind_output("y")
    session.run_with_iobinding(binding); (y_tensor,) = binding.get_outputs()

The runtime is initialised (and device 0 made current) if the program has not done so.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from concurrent.futures import Future

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
)
from openacl.model.converter import compile_onnx
from openacl.model.engine import Engine, EngineSet
from openacl.model.lowering import Lowered
from openacl.model.om import Gear, is_model_file, load_model_gears
from openacl.model.plan import MemoryPlan
from openacl.runtime import core
from openacl.runtime.context import current_context

_ONNX_TYPES = {"float32": "tensor(float)", "float16": "tensor(float16)",
               "float64": "tensor(double)", "int64": "tensor(int64)", "int32": "tensor(int32)",
               "int8": "tensor(int8)", "uint8": "tensor(uint8)", "bool": "tensor(bool)"}


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it."""

    name: str
    shape: list[int]
    type: str


def _ensure_runtime() -> None:
    if not core.is_initialized():
        core.init()
    if current_context(required=False) is None:
        from openacl.runtime.device import set_device

        set_device(0)


def _load_offline_model(source: Any, input_shapes: dict[str, Sequence[int]] | None
                        ) -> tuple[Lowered, MemoryPlan, list[Gear]]:
    """An offline model's lowered graph, plan and other gears; its input shapes are fixed at
    conversion (one set per gear of a dynamic-batch model)."""
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)  # the weights are used in place: keep our own, immutable copy
    # read, not memory-mapped: the engine uses the weights where they are, and a mapping
    # dies (SIGBUS) if the file is rewritten in place while the model is loaded
    lowered, plan, _, gears = load_model_gears(source, mmap=False)
    choices = []
    for model in [lowered, *(gear.lowered for gear in gears)]:
        graph = model.graph
        choices.append({name: tuple(graph.values[name].shape) for name in graph.inputs})
    given = {name: tuple(shape) for name, shape in (input_shapes or {}).items()}
    if given and not any(all(fixed.get(name) == shape for name, shape in given.items())
                         for fixed in choices):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'input_shapes' = {dict(input_shapes)!r} is invalid: the "
                       f"offline model was converted for {' or '.join(map(str, choices))} "
                       f"(convert it again with --input-shape)")
    return lowered, plan, gears


class InferenceSession:
    """Load a model (.om, or .onnx converted on the fly) and run it on numpy arrays."""

    def __init__(self, path: str | os.PathLike | Any,
                 input_shapes: dict[str, Sequence[int]] | None = None, **_: Any) -> None:
        _ensure_runtime()
        gears: list[Gear] = []
        if is_model_file(path):  # an offline model (.om), told apart by its magic
            lowered, plan, gears = _load_offline_model(path, input_shapes)
            self.graph = lowered.graph
        else:
            self.graph, lowered, plan = compile_onnx(path, input_shapes)
        self.engines = EngineSet(Engine(lowered, plan), gears)  # by batch size
        self.engine = self.engines.main
        self._lock = threading.Lock()  # the async runner and stream
        self._runner: Any = None  # a ThreadPoolExecutor, made by the first run_async
        self._async_stream: Any = None

    @property
    def batch_sizes(self) -> list[int]:
        """The batch sizes a dynamic-batch model runs (empty for a static model)."""
        return self.engines.batches

    def _engine_for(self, feeds: dict[str, np.ndarray]) -> Engine:
        """The engine of the gear whose batch is the feeds' (built on first use)."""
        first = feeds.get(self.graph.inputs[0])
        return self._gear_engine(np.shape(first)[0] if np.ndim(first) else None)

    def _gear_engine(self, batch: int | None) -> Engine:
        if not self.engines.dynamic:
            return self.engine
        try:
            return self.engines.for_batch(batch)
        except KeyError:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {self.graph.inputs[0]!r} has batch {batch}; the model "
                           f"was converted for batch sizes {self.batch_sizes}") from None

    def _args(self, names: list[str]) -> list[NodeArg]:
        args = []
        for name in names:
            value = self.graph.value(name)
            args.append(NodeArg(name, list(value.shape),
                                _ONNX_TYPES.get(value.dtype.name, str(value.dtype))))
        return args

    def get_inputs(self) -> list[NodeArg]:
        return self._args(self.graph.inputs)

    def get_outputs(self) -> list[NodeArg]:
        return self._args(self.graph.outputs)

    def run(self, output_names: Sequence[str] | None, feeds: dict[str, np.ndarray],
            stream: Any = None) -> list[np.ndarray]:
        """Run on host arrays; returns the named outputs (all when ``output_names`` is None)."""
        engine = self._engine_for(feeds) if self.engines.dynamic else self.engine
        if output_names is None:  # the common call: the engine's outputs are in graph order
            return engine.run(feeds, stream)
        results = dict(zip(self.graph.outputs, engine.run(feeds, stream), strict=True))
        wanted = list(output_names)
        missing = [n for n in wanted if n not in results]
        if missing:
            raise AclError(ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
                           f"unknown output(s) {missing}; the model has {self.graph.outputs}")
        return [results[n] for n in wanted]

    def run_async(self, output_names: Sequence[str] | None, feeds: dict[str, np.ndarray],
                  callback: Callable[[list[np.ndarray], Any, str], None] | None = None,
                  user_data: Any = None, stream: Any = None) -> Future:
        """Start a run and return at once (onnxruntime's ``run_async``): the feeds are
        copied and the run enqueued on ``stream`` (default: a stream of the session's own);
        when it has finished, ``callback(outputs, user_data, error)`` is called (error ""
        on success, else the message) and the returned Future holds the outputs or the
        exception. Runs start in submission order on one worker of the session's. The feeds
        may be reused as soon as this returns."""
        feeds = {name: np.array(value, copy=True) for name, value in feeds.items()}
        stream = self._own_stream() if stream is None else stream
        with self._lock:
            if self._runner is None:  # one worker: runs complete in submission order
                from concurrent.futures import ThreadPoolExecutor  # ~1 MB: only if used

                self._runner = ThreadPoolExecutor(1, thread_name_prefix="openacl-run-async")
        future = self._runner.submit(self.run, output_names, feeds, stream)
        if callback is not None:
            def report(done: Future) -> None:
                error = done.exception()
                if error is None:
                    callback(done.result(), user_data, "")
                else:
                    callback([], user_data, str(error))
            future.add_done_callback(report)
        return future

    def _own_stream(self) -> Any:
        """The session's stream for run_async and run_with_iobinding (made on first use)."""
        from openacl.runtime.stream import Stream

        with self._lock:
            if self._async_stream is None:
                self._async_stream = Stream(current_context())
            return self._async_stream

    def io_binding(self) -> IOBinding:
        """Device tensors for the inputs and outputs (onnxruntime's ``io_binding``)."""
        return IOBinding(self)

    def run_with_iobinding(self, binding: IOBinding, stream: Any = None) -> None:
        """Run on the bound device tensors: the inputs are copied device to device into the
        model's arena and the outputs out of it, with no host round trip; enqueued on
        ``stream`` (None: synchronous, on the session's own stream)."""
        binding.check()
        feeds = {name: binding.inputs[name] for name in self.graph.inputs}
        first = feeds[self.graph.inputs[0]].shape
        engine = self._gear_engine(first[0] if first else None)
        for name, tensor in feeds.items():
            _check_bound(tensor, engine.graph.value(name), "input",
                         ACL_ERROR_MODEL_INPUT_NOT_MATCH)
        outputs = [binding.output_tensor(name, engine.graph.value(name))
                   for name in self.graph.outputs]
        inputs = [(feeds[name].data_ptr, feeds[name].nbytes) for name in self.graph.inputs]
        target = self._own_stream() if stream is None else stream
        engine.launch(inputs, [(t.data_ptr, t.nbytes) for t in outputs], target)
        if stream is None:
            target.synchronize()

    def profile(self, feeds: dict[str, np.ndarray] | None = None, runs: int = 10,
                warmup: int = 1, stream: Any = None) -> Any:
        """Per-operator timing over ``runs`` runs (synthetic inputs when ``feeds`` is None):
        a ``Profile`` with ``table()`` and ``write_chrome_trace(path)``."""
        from openacl.model.profile import profile_engine, synthetic_feeds

        if feeds is None:
            feeds = synthetic_feeds(self.graph)
        return profile_engine(self.engine, feeds, runs, warmup, stream)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.shutdown(wait=True)
        if self._async_stream is not None:
            self._async_stream.shutdown(drain_timeout=None)
        self.engines.close()


def _check_bound(tensor: Any, value: Any, kind: str, code: int) -> None:
    """A bound tensor must have the value's dtype and shape, and (the engine copies it as
    plain bytes) be a C-contiguous view that starts at its data address."""
    from openacl.tensor import lookup_tensor

    meta = lookup_tensor(int(tensor))
    if not meta.is_contiguous() or meta.offset:
        raise AclError(code, f"{kind} {value.name!r} is bound to a strided or offset view "
                             f"(strides {list(meta.strides)}, offset {meta.offset}); bind a "
                             f"contiguous tensor")
    if tensor.shape != tuple(value.shape) or tensor.dtype != value.dtype:
        raise AclError(code, f"{kind} {value.name!r} is bound to a {tensor.dtype} "
                             f"{list(tensor.shape)} tensor; the model's is {value.dtype} "
                             f"{list(value.shape)}")


class IOBinding:
    """Device tensors bound to a session's inputs and outputs (onnxruntime's IOBinding):
    ``bind_input(name, tensor)``, ``bind_output(name, tensor=None)`` (None: the session
    allocates it), then ``session.run_with_iobinding(binding)``, ``get_outputs()`` (the
    device tensors) or ``copy_outputs_to_cpu()``."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self._owned: dict[str, Any] = {}  # outputs the binding allocated

    def _check_name(self, name: str, names: list[str], kind: str) -> None:
        if name not in names:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'name' = {name!r} is not an {kind} of the model (its "
                           f"{kind}s: {', '.join(names)})")

    def bind_input(self, name: str, tensor: Any) -> None:
        graph = self._session.graph
        self._check_name(name, graph.inputs, "input")
        self.inputs[name] = tensor

    def bind_output(self, name: str, tensor: Any = None) -> None:
        self._check_name(name, self._session.graph.outputs, "output")
        self.outputs[name] = tensor

    def check(self) -> None:
        missing = [n for n in self._session.graph.inputs if n not in self.inputs]
        if missing:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH, f"input(s) {missing} are not bound")

    def output_tensor(self, name: str, value: Any) -> Any:
        """The tensor output ``name`` is written to (allocated here when none was bound)."""
        from openacl.tensor import empty

        tensor = self.outputs.get(name)
        if tensor is None:
            owned = self._owned.get(name)
            if owned is None or owned.shape != tuple(value.shape):
                self._owned[name] = owned = empty(value.shape, value.dtype)
            tensor = owned
        _check_bound(tensor, value, "output", ACL_ERROR_MODEL_OUTPUT_NOT_MATCH)
        return tensor

    def get_outputs(self) -> list[Any]:
        """The output tensors in graph order (bound or allocated by the last run)."""
        return [self._owned[name] if self.outputs.get(name) is None else self.outputs[name]
                for name in self._session.graph.outputs]

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [tensor.numpy() for tensor in self.get_outputs()]
