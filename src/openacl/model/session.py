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
from collections.abc import Callable, Mapping, Sequence
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
from openacl.model.engine import Engine, EngineSet
from openacl.model.ir import Lowered
from openacl.model.om import Gear, is_model_file, load_offline
from openacl.model.plan import MemoryPlan
from openacl.model.staged import DEFAULT_CACHE_SIZE, StagedModel
from openacl.runtime import core, profiler
from openacl.runtime import threads as threads_module
from openacl.runtime.context import current_context

_ONNX_TYPES = {"float32": "tensor(float)", "float16": "tensor(float16)",
               "float64": "tensor(double)", "int64": "tensor(int64)", "int32": "tensor(int32)",
               "int8": "tensor(int8)", "uint8": "tensor(uint8)", "bool": "tensor(bool)",
               "object": "tensor(string)"}


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it."""

    name: str
    shape: list[int]
    type: str


def _hold_runtime() -> tuple[int, bool]:
    """Hold the runtime for a session (started with the defaults if the program has not
    initialised it) and make device 0 current when the calling thread has no context:
    returns (the hold's generation, whether device 0 was set). ``close`` gives both back,
    so a session never keeps the runtime alive past itself, and a program's own later
    ``openacl.init()`` is not a repeat (``runtime/core``'s note on implicit holds)."""
    generation = core.hold()
    if current_context(required=False) is not None:
        return generation, False
    from openacl.runtime.device import set_device

    try:
        set_device(0)
    except AclError:
        core.release(generation)
        raise
    return generation, True


def _load_offline_model(source: Any, input_shapes: dict[str, Sequence[int]] | None
                        ) -> tuple[Lowered | None, MemoryPlan | None, list[Gear], Any]:
    """An offline model's lowered graph, plan and other gears (its input shapes are fixed at
    conversion, one set per gear of a dynamic-batch model), or, for a dynamic-shape model,
    ``(None, None, [], StagedSource)``."""
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)  # the weights are used in place: keep our own, immutable copy
    # read, not memory-mapped: the engine uses the weights where they are, and a mapping
    # dies (SIGBUS) if the file is rewritten in place while the model is loaded
    model = load_offline(source, mmap=False)
    if model.staged is not None:
        return None, None, [], model.staged
    lowered, plan, gears = model.lowered, model.plan, model.gears
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
    return lowered, plan, gears, None


class InferenceSession:
    """Load a model (.om, or .onnx converted on the fly) and run it on numpy arrays."""

    def __init__(self, path: str | os.PathLike | Any,
                 input_shapes: dict[str, Sequence[int]] | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE, precision: str = "fp32",
                 threads: int | None = None, **_: Any) -> None:
        """Args:
            path: an offline model (.om, by its magic) or an ONNX model (path, bytes or
                ModelProto).
            input_shapes: for an ONNX model, shapes to build a specialisation for at load
                (a hint: other shapes still run); for an offline model, the shapes it was
                converted for (checked).
            cache_size: specialisations an ONNX model keeps (least recently used first out).
            precision: ``fp32``, ``fp16`` or ``mixed`` for an ONNX model.
            threads: the CPU threads this session's runs use (onnxruntime's
                ``intra_op_num_threads``); None: the setting when the session is made
                (``runtime/threads.configured``: init's, else the environment's, else the
                cores this process may use).
        """
        self.threads = threads_module.check_threads(threads)
        self._closed = False
        self._hold, self._set_device = _hold_runtime()
        try:
            self._load(path, input_shapes, cache_size, precision)
        except BaseException:
            self._release_runtime()
            raise

    def _load(self, path: Any, input_shapes: dict[str, Sequence[int]] | None,
              cache_size: int, precision: str) -> None:
        """Load the model: an offline model's engines, or an ONNX model staged."""
        # resolved once, as onnxruntime fixes a session's threads: a run then pays one
        # comparison (reading the setting costs more than a tiny model's whole run)
        self._run_threads = threads_module.configured() if self.threads is None else \
            self.threads
        self._lock = threading.Lock()  # the async runner and stream
        self._runner: Any = None  # a ThreadPoolExecutor, made by the first run_async
        self._async_stream: Any = None
        self.staged: StagedModel | None = None
        self.engine: Engine | None = None
        self.graph: Any = None
        staged_source = None
        if is_model_file(path):  # an offline model (.om), told apart by its magic
            lowered, plan, gears, staged_source = _load_offline_model(path, input_shapes)
        if is_model_file(path) and staged_source is None:
            self.graph = lowered.graph
            self.engines = EngineSet(Engine(lowered, plan), gears)  # by batch size
            self.engine = self.engines.main
            self._inputs = [(name, self.graph.value(name).dtype,
                             list(self.graph.value(name).shape)) for name in self.graph.inputs]
            self._outputs = [(name, self.graph.value(name).dtype,
                              list(self.graph.value(name).shape)) for name in self.graph.outputs]
            self._input_set = frozenset(self.input_names)
            return
        self.engines = EngineSet(None)
        if staged_source is not None:  # a dynamic-shape offline model: its graph and ranges
            self.staged = StagedModel(staged_source.proto, cache_size, staged_source.precision,
                                      staged_source.weights, staged_source.ranges,
                                      staged_source.gears)
        else:
            self.staged = StagedModel(path, cache_size, precision)
        self._outputs = [(name, dtype, None if dims is None else list(dims))
                         for name, dtype, dims in self.staged.outputs]
        shapes = dict(input_shapes or {})
        if shapes or all(spec.static for spec in self.staged.inputs):
            stage = self.staged.prepare(shapes)  # at load, so a model that cannot run says so
            if self.staged.single(stage):
                self.engine = stage.engine
                self.graph = stage.engine.graph
        self._inputs = [(spec.name, spec.dtype, None if spec.dims is None else list(spec.dims))
                        for spec in self.staged.inputs]
        self._input_set = frozenset(self.input_names)

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

    def _args(self, values: list[tuple[str, np.dtype, list | None]]) -> list[NodeArg]:
        """onnxruntime's description: a dim is an int, its symbol's name, or None; the type
        as onnxruntime names it (``seq(map(int64,tensor(float)))`` for a ZipMap's)."""
        named = self.staged.host_outputs if self.staged is not None else {}
        return [NodeArg(name, dims, named.get(name) or _ONNX_TYPES.get(
                    np.dtype(dtype).name, str(dtype))) for name, dtype, dims in values]

    def get_inputs(self) -> list[NodeArg]:
        return self._args(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return self._args(self._outputs)

    @property
    def input_names(self) -> list[str]:
        return [name for name, _, _ in self._inputs]

    @property
    def output_names(self) -> list[str]:
        return [name for name, _, _ in self._outputs]

    def run(self, output_names: Sequence[str] | None, feeds: dict[str, np.ndarray],
            stream: Any = None) -> list[np.ndarray]:
        """Run on host arrays; returns the named outputs (all when ``output_names`` is None).
        An ONNX model runs at any input shapes: the first run at new ones specialises it."""
        if type(feeds) is not dict or not feeds.keys() <= self._input_set:
            self._check_feeds(feeds)
        if isinstance(output_names, str):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'output_names' = {output_names!r} is invalid: give a "
                           f"list of names (or None for all), as onnxruntime takes")
        if profiler.active:  # the whole run, timed on this thread (runtime/profiler.py)
            profiler.label("model", self.staged.name if self.staged is not None else
                           self.graph.name if self.graph is not None else "model")
            return profiler.run_here(self._run, output_names, feeds, stream)
        return self._run(output_names, feeds, stream)

    def _run(self, output_names: Sequence[str] | None, feeds: Mapping[str, np.ndarray],
             stream: Any) -> list[np.ndarray]:
        threads_module.apply(self._run_threads)
        if self.staged is not None and stream is None:
            results = self.staged.run(feeds)
        else:
            engine = self._stream_engine(feeds)
            results = engine.run(feeds, stream)
        if output_names is None:  # the common call: the outputs are in graph order
            return results
        by_name = dict(zip(self.output_names, results, strict=True))
        wanted = list(output_names)
        missing = [n for n in wanted if n not in by_name]
        if missing:
            raise AclError(ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
                           f"unknown output(s) {missing}; the model has {self.output_names}")
        return [by_name[n] for n in wanted]

    def _check_feeds(self, feeds: Any) -> None:
        """Refuse feeds that are not a mapping of the model's input names (onnxruntime
        refuses them too), naming the wrong names and the model's inputs."""
        if not isinstance(feeds, Mapping):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'feeds' = {type(feeds).__name__} is invalid: expected a "
                           f"dict of input name -> array, for the inputs {self.input_names}")
        unknown = [name for name in feeds if name not in self._input_set]
        if unknown:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"argument 'feeds' names input(s) {unknown} the model does not "
                           f"have; its inputs are {self.input_names}")

    def _stream_engine(self, feeds: dict[str, np.ndarray]) -> Engine:
        """The one engine that runs ``feeds`` whole (on a stream, bound to device buffers):
        an offline model's (gear), or the specialisation of an ONNX model for the feeds'
        shapes when it is a single stage."""
        if self.staged is None:
            return self._engine_for(feeds) if self.engines.dynamic else self.engine
        kinds = {name: (np.asarray(value).dtype, np.shape(value)) if not hasattr(
            value, "data_ptr") else (value.dtype, tuple(value.shape))
            for name, value in feeds.items()}
        self.staged.check_kinds(kinds)
        stage = self.staged.root_stage(kinds)
        if not self.staged.single(stage):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"model {self.staged.name!r} runs in stages at these shapes (control "
                           f"flow or data-dependent shapes): run it without a stream or "
                           f"binding")
        return stage.engine

    def run_async(self, output_names: Sequence[str] | None, feeds: dict[str, np.ndarray],
                  callback: Callable[[list[np.ndarray], Any, str], None] | None = None,
                  user_data: Any = None, stream: Any = None) -> Future:
        """Start a run and return at once (onnxruntime's ``run_async``): the feeds are
        copied and the run enqueued on ``stream`` (default: a stream of the session's own);
        when it has finished, ``callback(outputs, user_data, error)`` is called (error ""
        on success, else the message) and the returned Future holds the outputs or the
        exception. Runs start in submission order on one worker of the session's. The feeds
        may be reused as soon as this returns."""
        self._check_feeds(feeds)
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
        threads_module.apply(self._run_threads)
        names = [name for name, _, _ in self._inputs]
        feeds = {name: binding.inputs[name] for name in names}
        if self.staged is None:
            first = feeds[names[0]].shape
            engine = self._gear_engine(first[0] if first else None)
        else:
            engine = self._stream_engine(feeds)
        for name, tensor in feeds.items():
            _check_bound(tensor, engine.graph.value(name), "input",
                         ACL_ERROR_MODEL_INPUT_NOT_MATCH)
        outputs = [binding.output_tensor(name, engine.graph.value(name))
                   for name in self.output_names]
        inputs = [(feeds[name].data_ptr, feeds[name].nbytes) for name in names]
        target = self._own_stream() if stream is None else stream
        engine.launch(inputs, [(t.data_ptr, t.nbytes) for t in outputs], target)
        if stream is None:
            target.synchronize()

    def profile(self, feeds: dict[str, np.ndarray] | None = None, runs: int = 10,
                warmup: int = 1, stream: Any = None) -> Any:
        """Per-operator timing over ``runs`` runs (synthetic inputs when ``feeds`` is None):
        a ``Profile`` with ``table()`` and ``write_chrome_trace(path)``. A model that runs
        in stages (control flow, data-dependent shapes) is timed across all of them."""
        from openacl.model.profile import profile_engine, profile_staged, synthetic_feeds

        if feeds is None:
            feeds = synthetic_feeds(self.input_kinds())
        if self.staged is not None and stream is None:
            return profile_staged(self.staged, feeds, runs, warmup)
        return profile_engine(self._stream_engine(feeds), feeds, runs, warmup, stream)

    def input_kinds(self, shapes: Mapping[str, Sequence[int]] | None = None
                    ) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """Each input's dtype and concrete shape (``shapes`` where given, else the declared
        one), for synthetic feeds.

        Raises:
            AclError: ACL_ERROR_INVALID_PARAM naming every input that still has no concrete
                shape, and how to give one.
        """
        from openacl.model.onnx_import import need_shapes_error

        kinds, missing = {}, []
        for name, dtype, dims in self._inputs:
            shape = (shapes or {}).get(name, dims)
            if shape is None or not all(type(d) is int and d >= 0 for d in shape):
                missing.append((name, list(dims or [])))
            else:
                kinds[name] = (dtype, tuple(shape))
        if missing:
            raise need_shapes_error(missing, ACL_ERROR_INVALID_PARAM)
        return kinds

    def close(self) -> None:
        """Release the session: its runs finish, its memory is freed, and the runtime
        hold (and device 0, when the session set it) is given back. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._runner is not None:
                self._runner.shutdown(wait=True)
            if core.is_initialized() and core.current().generation == self._hold:
                if self._async_stream is not None:
                    self._async_stream.shutdown(drain_timeout=None)
                self.engines.close()
                if self.staged is not None:
                    self.staged.close()
        finally:
            self._release_runtime()

    def __enter__(self) -> InferenceSession:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _release_runtime(self) -> None:
        """Give back what ``_hold_runtime`` took (nothing when the runtime was finalized)."""
        if self._set_device and core.is_initialized() and \
                core.current().generation == self._hold:
            from openacl.runtime.device import reset_device

            self._set_device = False
            reset_device(0)
        core.release(self._hold)


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
        self._check_name(name, self._session.input_names, "input")
        self.inputs[name] = tensor

    def bind_output(self, name: str, tensor: Any = None) -> None:
        self._check_name(name, self._session.output_names, "output")
        self.outputs[name] = tensor

    def check(self) -> None:
        missing = [n for n in self._session.input_names if n not in self.inputs]
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
                for name in self._session.output_names]

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [tensor.numpy() for tensor in self.get_outputs()]
