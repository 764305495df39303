"""Models whose shapes are known only when they run: dynamic dims, If on a computed
condition, Loop and Scan, data-dependent shapes (NonZero, a Reshape fed by computed values).

``StagedModel`` keeps the ONNX graph and specialises it on what each run brings.

Design note (invariants)
------------------------
* Weights: the model's big initializers are converted to numpy once, at load
  (``weights``); every specialisation's engine uses those arrays in place (the CPU backend
  registers them, ``engine.py``). The protos that are cut, folded and compiled carry them
  only as typed graph inputs, so a new specialisation never copies a weight.
* Signature: a run's inputs' dtypes and shapes. The first run at a signature builds the
  *root stage* for it; the stages are cached (least recently used first out, at most
  ``cache_size`` root signatures and as many children per stage), so a run at a seen
  signature converts nothing and allocates nothing beyond what the engines' runs do.
* A stage is the largest part of the remaining graph whose shapes are all known once the
  values it starts from are known: it is folded, fused, lowered and planned like a static
  model and run by one ``Engine``. The nodes it cannot compile come after it:
  - an ``If`` whose condition it computes: the condition's value keys the next stage, where
    the chosen branch is inlined and folded like the main graph (two stages at most, each
    cached);
  - a node whose output shape depends on small integer inputs it computes (Reshape, Expand,
    Tile, Range, ConstantOfShape, Resize, TopK's k, Slice's bounds...): those values key the
    next stage, where they are constants (``MAX_PROMOTED_ELEMENTS`` elements at most);
  - ``Loop``, ``Scan``, a node whose outputs only data can size (NonZero, Unique,
    NonMaxSuppression, Compress) and a node no lowering handles: run on the host between
    stages (``host_nodes.py``), after which the next stage knows their shapes.
  A static model is one stage, run as the static path runs it.
* Each stage names exactly the values the rest of the graph needs (``carry``); the next
  stage is keyed by the dtypes and shapes of those its host nodes make (``varying``: every
  other carried value has the dtype and shape the stage was built for) and by the promoted
  values' bytes.
* A run whose feeds are C-contiguous arrays of a cached root signature skips their
  conversion and checks (they passed them when it was built).
* A promoted value that keys more than ``VOLATILE_AFTER`` different children of one stage
  (a loop counter used as a Slice bound, a position fed to Range) is *volatile*: it stops
  keying (that stage's children are dropped and built again without it), and the nodes
  that need it as a constant run on the host each run instead, so a Loop body compiles a
  bounded number of stages however many iterations it makes.
* Thread safety: one lock per model covers building and running (engines share an arena
  and are not re-entrant); evicted stages close their engines under it.
* A run at a seen signature whose root stage is the whole model (one engine, every input
  to every output) goes straight to that engine (``_singles``, rebuilt with the cache):
  the engine checks each feed's dtype and shape itself.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_PARSE_MODEL,
    AclError,
)
from openacl.model.host_values import (
    as_value,
    compilable_dtype,
    kind,
    type_string,
    value_info,
)
from openacl.model.onnx_graph import (
    DEFAULT_DOMAINS,
    check_nodes,
    constants_to_initializers,
    default_opset,
    default_opset_of,
    name_nodes,
    node_reads,
    upgrade_opset,
)

__all__ = ["DEFAULT_CACHE_SIZE", "InputSpec", "StagedModel"]

DEFAULT_CACHE_SIZE = 8  # cached signatures (and children per stage) before the oldest goes
MAX_PROMOTED_ELEMENTS = 64  # largest computed int tensor whose value may key a stage
VOLATILE_AFTER = 4  # distinct values of a promoted value at one stage before it stops keying
LIGHT_ELEMENTS = 4096  # initializers kept inside the protos; bigger ones are shared weights
HOST_OPS = frozenset({"Loop", "Scan", "If", "NonZero", "Unique", "NonMaxSuppression",
                      "Compress", "SequenceConstruct", "SequenceAt", "SequenceInsert",
                      "SequenceLength", "SequenceEmpty", "SplitToSequence",
                      "ConcatFromSequence"})

StageClock = Callable[[Any, int, int, int], None]  # (engine or host node, index, start, end)
Dims = tuple  # a declared shape: ints, symbol names (str) and None for unnamed dims


@dataclass(frozen=True)
class InputSpec:
    """A graph input as declared: name, numpy dtype and dims (``None`` for an unknown rank)."""

    name: str
    dtype: np.dtype
    dims: Dims | None
    ranges: tuple[tuple[int, int], ...] | None = None  # (low, high) per dim; high -1: none

    def check(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        """Raise ACL_ERROR_MODEL_INPUT_NOT_MATCH unless an array of ``dtype`` and ``shape``
        can be this input."""
        if dtype != self.dtype:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {self.name!r} must be {self.dtype}; got {dtype}")
        if self.dims is None:
            return
        if len(shape) != len(self.dims) or any(
                isinstance(d, int) and d != size for d, size in zip(self.dims, shape, strict=True)):
            shown = [d if d is not None else "?" for d in self.dims]
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {self.name!r} has shape {list(shape)}; the model "
                           f"takes {shown} (rank {len(self.dims)})")
        if self.ranges is not None and any(
                size < low or (high >= 0 and size > high)
                for size, (low, high) in zip(shape, self.ranges, strict=False)):
            from openacl.model.om_staged import format_ranges

            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"input {self.name!r} has dims {list(shape)}, outside the range "
                           f"{format_ranges(self.ranges)} the model was built for")

    @property
    def static(self) -> bool:
        return self.dims is not None and all(isinstance(d, int) for d in self.dims)


def declared_dims(value: Any) -> Dims | None:
    """A ValueInfoProto's dims as ``InputSpec`` keeps them (``-1`` is unknown, as paddle2onnx
    writes it)."""
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(int(dim.dim_value))
        else:
            dims.append(dim.dim_param or None)
    return tuple(dims)


@dataclass
class _Pending:
    """What is left of the graph: its nodes in order and the small initializers they read."""

    nodes: list[Any]
    initializers: list[Any]


@dataclass
class Stage:
    """One compiled part of the graph and the host nodes after it (see the design note)."""

    engine: Any  # an Engine, or None when the stage only runs host nodes
    engine_inputs: list[str]
    engine_outputs: list[str]
    host_nodes: list[Any]
    constants: dict[str, np.ndarray]  # folded values the host nodes or the outputs read
    carry: tuple[str, ...]  # the values the rest needs, by name
    promote: tuple[str, ...]  # the computed values whose contents key the next stage
    rest: _Pending | None  # None: the last stage
    varying: tuple[str, ...] = ()  # carried values its host nodes make: their shapes vary
    renames: tuple[tuple[str, str], ...] = ()  # (output, input): its engine, were it Identity
    children: OrderedDict = field(default_factory=OrderedDict)
    seen: dict[str, set[bytes]] = field(default_factory=dict)  # promoted values met, by name

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        for child in self.children.values():
            child.close()
        self.children.clear()
        for host in self.host_nodes:
            host.close()


class StagedModel:
    """An ONNX model run by specialisations built at the first run of each signature.

    Args:
        source: an ONNX ModelProto, a path, or serialized bytes.
        cache_size: signatures kept (LRU); also the children kept per stage.
        precision: ``fp32``, ``fp16`` or ``mixed`` (``model/precision.py``).
        weights: arrays of graph inputs that are really weights (a subgraph's view of its
            outer graph's, or an offline model's), shared as they are.
        ranges: (low, high) per dim of some inputs (ATC's shape ranges; high -1 has no
            limit): a run outside them is ACL_ERROR_INVALID_PARAM.
        gears: an ``om_staged.Gears``: the only input shapes the model runs at (ATC's
            --dynamic_dims / --dynamic_image_size); any other is ACL_ERROR_INVALID_PARAM.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM for a bad ``cache_size`` or ``ranges`` entry;
            the ONNX reader's codes for a model it cannot read.
    """

    def __init__(self, source: Any, cache_size: int = DEFAULT_CACHE_SIZE,
                 precision: str = "fp32", weights: Mapping[str, np.ndarray] | None = None,
                 ranges: Mapping[str, Sequence[tuple[int, int]]] | None = None,
                 gears: Any = None) -> None:

        from openacl.model.onnx_import import _load, check_model_types
        from openacl.model.precision import check_precision

        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'cache_size' = {cache_size!r} is invalid: give an int "
                           f">= 1")
        self.cache_size = cache_size
        self.precision = check_precision(precision)
        from openacl.model.onnx_import import require_onnx

        onnx = require_onnx()  # a clear install line, not ModuleNotFoundError
        proto = _load(source)
        owned = proto is not source  # read here: its weights may be freed as they convert
        proto, self.source_opset = upgrade_opset(proto)
        owned = owned or proto is not source
        check_model_types(proto, host_values=True)
        # the graph without its initializers, copied: the caller's proto is never changed,
        # and nothing here keeps the original (and its weights' bytes) alive
        graph = onnx.GraphProto()
        graph.name = proto.graph.name
        graph.node.extend(proto.graph.node)
        graph.input.extend(proto.graph.input)
        graph.output.extend(proto.graph.output)
        name_nodes(graph)
        check_nodes(graph, default_opset(proto))
        constants_to_initializers(graph)
        self.name = graph.name or "model"
        self._opsets = _copies(proto.opset_import, onnx.OperatorSetIdProto)
        self._ir_version = proto.ir_version
        self._functions = _copies(proto.functions, onnx.FunctionProto)
        self.weights: dict[str, np.ndarray] = dict(weights or {})  # an outer graph's, shared
        kept = onnx.GraphProto()  # the small constants, copied out of the model
        for tensor in [*proto.graph.initializer, *graph.initializer]:
            array = _tensor_array(tensor)  # a malformed constant is refused here, by name
            if math.prod(tensor.dims) > LIGHT_ELEMENTS:
                self.weights[tensor.name] = array
                if owned:
                    tensor.ClearField("raw_data")  # converted: free the bytes now
            else:
                kept.initializer.append(tensor)
        del proto
        given = set(self.weights)  # inputs that are weights, even once nothing reads them
        self._fold_weights(graph, kept)
        small = list(kept.initializer)
        names = {t.name for t in kept.initializer}
        known = names | set(self.weights) | given
        self.inputs = [InputSpec(v.name, _elem_dtype(v), declared_dims(v))
                       for v in graph.input if v.name not in known]
        self._apply_ranges(dict(ranges or {}))
        self.gears = gears
        self.outputs = [(v.name, _elem_dtype(v), declared_dims(v)
                         if v.type.WhichOneof("value") == "tensor_type" else ())
                        for v in graph.output]  # (a sequence or map has no dims)
        self.output_names = [name for name, _, _ in self.outputs]
        # onnxruntime's type names of the outputs that are not numeric tensors (a
        # classifier's string labels, its ZipMap's sequence of maps): host_values.py
        self.host_outputs = {v.name: type_string(v.type) for v in graph.output
                             if v.type.WhichOneof("value") != "tensor_type"
                             or not compilable_dtype(_elem_dtype(v))}
        self._output_infos = _copies(graph.output, onnx.ValueInfoProto)
        self._root = _Pending(list(graph.node), small)
        self._cache: OrderedDict[tuple, Stage] = OrderedDict()
        self._static: Any = None  # the engine of a static model, once built
        # seen signatures ((dtype, shape) per input) whose root stage is the whole model
        self._singles: dict[tuple, Any] = {}
        self._names = [spec.name for spec in self.inputs]
        self._lock = threading.RLock()
        self.stages_built = 0  # every stage compiled so far (a first run's cost, for tests)
        self.host_ops: set[str] = set()  # op types the reference evaluator has run here
        self.volatile: set[str] = set()  # promoted values that stopped keying (design note)

    def _fold_weights(self, graph: Any, kept: Any) -> None:
        """Fold what only the constants decide (a weight's Transpose or Cast) once, here, so
        no specialisation folds it again or keeps a second copy; then drop the constants no
        node or output reads any more. The DequantizeLinear of a weight stays: the QDQ
        fusions rewrite it into an integer product (``fusions.py``)."""
        from onnx import numpy_helper

        from openacl.model.passes import fold_constant_nodes

        small = {t.name: numpy_helper.to_array(t) for t in kept.initializer}
        constants = {**small, **self.weights}
        nodes, folded = fold_constant_nodes(
            list(graph.node), constants, default_opset_of(self._opsets),
            skip=frozenset({"DequantizeLinear", "QuantizeLinear"}))
        if not folded:
            return
        del graph.node[:]
        graph.node.extend(nodes)
        read = {name for node in graph.node for name in node_reads(node)} | {
            v.name for v in graph.output}
        for name in folded:
            array = constants[name]
            if array.size > LIGHT_ELEMENTS:
                self.weights[name] = array
            else:
                kept.initializer.append(numpy_helper.from_array(array, name))
        for name in [name for name in self.weights if name not in read]:
            del self.weights[name]
        unread = [t for t in kept.initializer if t.name not in read]
        for tensor in unread:
            kept.initializer.remove(tensor)

    def _apply_ranges(self, ranges: dict[str, Sequence[tuple[int, int]]]) -> None:
        """Give the inputs ``ranges`` name: the dims become the ranges' (fixed where low ==
        high, else unknown), checked at every run."""
        names = self.input_names
        for name, dims in ranges.items():
            if name not in names:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'ranges' names {name!r}, which is not an input "
                               f"(the inputs are {', '.join(names) or 'none'})")
            index = names.index(name)
            spec = self.inputs[index]
            pairs = tuple((int(low), int(high)) for low, high in dims)
            if spec.dims is not None and len(spec.dims) != len(pairs):
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'ranges' gives input {name!r} {len(pairs)} dims; it "
                               f"has {len(spec.dims)}")
            declared = spec.dims or (None,) * len(pairs)
            self.inputs[index] = InputSpec(name, spec.dtype, tuple(
                low if low == high else (old if isinstance(old, str) else None)
                for (low, high), old in zip(pairs, declared, strict=False)), pairs)

    def light_proto(self) -> Any:
        """The model as an ONNX ModelProto without its big weights (``weights`` holds them):
        what a dynamic-shape offline model file stores."""
        import onnx
        from onnx import helper

        graph = onnx.GraphProto()
        graph.name = self.name
        graph.node.extend(self._root.nodes)
        graph.initializer.extend(self._root.initializers)
        for spec in self.inputs:
            dims = None if spec.dims is None else [d if d is not None else -1
                                                   for d in spec.dims]
            graph.input.append(helper.make_tensor_value_info(
                spec.name, helper.np_dtype_to_tensor_dtype(spec.dtype), dims))
        for (name, dtype, dims), info in zip(self.outputs, self._output_infos, strict=True):
            if name in self.host_outputs:  # a sequence, map or string tensor, as declared
                graph.output.append(info)
                continue
            graph.output.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(dtype),
                None if dims is None else [d if d is not None else -1 for d in dims]))
        model = helper.make_model(graph, opset_imports=self._opsets)
        model.ir_version = self._ir_version
        model.functions.extend(self._functions)
        return model

    # -- running ----------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    def checked_feeds(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The feeds as C-contiguous arrays, each checked against its declaration."""
        env = {name: np.asarray(value, order="C") for name, value in feeds.items()}
        for spec in self.inputs:  # a string input takes str arrays (as onnxruntime does)
            if spec.dtype == object and spec.name in env:
                env[spec.name] = as_value(env[spec.name])
        self.check_kinds({name: (a.dtype, a.shape) for name, a in env.items()})
        return env

    def check_kinds(self, kinds: Mapping[str, tuple[np.dtype, tuple]]) -> None:
        """Every input given once, each of a dtype and shape its declaration admits.

        Raises:
            AclError: ACL_ERROR_MODEL_INPUT_NOT_MATCH naming the input and the value.
        """
        names = self.input_names
        unknown = [name for name in kinds if name not in names]
        if unknown:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"feed(s) {unknown} are not inputs of the model (its inputs: "
                           f"{', '.join(names) or 'none'})")
        for spec in self.inputs:
            if spec.name not in kinds:
                raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                               f"input {spec.name!r} is missing (the model takes "
                               f"{', '.join(names)})")
            spec.check(*kinds[spec.name])
        if self.gears is not None and self.gears.index(
                {name: kind[1] for name, kind in kinds.items()}) is None:
            given = {name: list(kind[1]) for name, kind in kinds.items()}
            choices = [{name: list(shape) for name, shape in gear.items()}
                       for gear in self.gears.shapes]
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"input shapes {given} are not one of the model's gears {choices}")

    def root_stage(self, kinds: Mapping[str, tuple[np.dtype, tuple]]) -> Stage:
        """The root stage for the inputs' ``kinds`` (name -> (dtype, shape)), built and
        cached on first use."""
        available = {name: (np.dtype(kinds[name][0]), tuple(kinds[name][1]))
                     for name in self.input_names}
        key = tuple(available[name] for name in self.input_names)  # (dtype, shape) per input
        with self._lock:
            stage = self._cache.get(key)
            if stage is None:
                stage = self._build(self._root, available, {})
                _insert(self._cache, key, stage, self.cache_size)
                if self.gears is None:  # (a gear model checks every run's shapes)
                    self._singles = {k: st.engine for k, st in self._cache.items()
                                     if self.single(st)}
                if self._static is None and all(spec.static for spec in self.inputs) and \
                        self.single(stage):
                    self._static = stage.engine
            else:
                self._cache.move_to_end(key)
            return stage

    def single(self, stage: Stage) -> bool:
        """Whether ``stage`` is the whole model: one engine, taking every input and giving
        every output in graph order (a static model's only stage)."""
        return (stage.rest is None and not stage.host_nodes and not stage.constants
                and stage.engine is not None and stage.engine_outputs == self.output_names
                and stage.engine_inputs == self.input_names)

    def prepare(self, shapes: Mapping[str, Sequence[int]]) -> Stage:
        """Build (or find) the root stage for these input shapes before any run.

        Raises:
            AclError: ACL_ERROR_INVALID_PARAM for a name that is not an input, or a shape
                that is not a list of ints >= 0 of the input's rank.
        """
        from openacl.model.onnx_import import checked_shape, need_shapes_error

        specs = {spec.name: spec for spec in self.inputs}
        for name, dims in shapes.items():
            spec = specs.get(name)
            if spec is None:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'input_shapes' names {name!r}, which is not a graph "
                               f"input (the inputs are {', '.join(specs) or 'none'})")
            checked_shape(name, dims, None if spec.dims is None else len(spec.dims))
        kinds = {}
        missing = []  # every input that still needs a shape, named at once
        for spec in self.inputs:
            if spec.name in shapes:
                kinds[spec.name] = (spec.dtype, tuple(int(d) for d in shapes[spec.name]))
            elif spec.static:
                kinds[spec.name] = (spec.dtype, spec.dims)
            else:
                missing.append((spec.name, list(spec.dims or [])))
        if missing:
            raise need_shapes_error(missing, ACL_ERROR_INVALID_PARAM)
        for name, (_, shape) in kinds.items():  # a hint widens a fixed dim it contradicts
            spec = specs[name]
            if spec.ranges is not None:  # built for ranges: a hint must keep inside them
                spec.check(spec.dtype, shape)
            elif spec.dims is not None and any(isinstance(d, int) and d != size
                                               for d, size in zip(spec.dims, shape, strict=False)):
                index = self.inputs.index(spec)
                self.inputs[index] = InputSpec(name, spec.dtype, tuple(
                    d if isinstance(d, int) and d == size else (d if isinstance(d, str)
                                                                else None)
                    for d, size in zip(spec.dims, shape, strict=False)))
        return self.root_stage(kinds)

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Run on host arrays; returns every graph output in graph order."""
        static = self._static
        if static is not None and len(feeds) == len(self.inputs):
            return static.run(feeds)  # the engine checks each feed's dtype and shape
        if self._singles and len(feeds) == len(self.inputs):
            try:  # a seen signature whose root stage is the whole model: its engine alone
                key = tuple((feeds[name].dtype, feeds[name].shape) for name in self._names)
            except (KeyError, AttributeError):  # a missing input, or not an array
                key = None
            with self._lock:
                engine = self._singles.get(key)
                if engine is not None:
                    return engine.run(feeds)
        env = self._seen_feeds(feeds)
        return self._run_stages(self.checked_feeds(feeds) if env is None else env, None)

    def _seen_feeds(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """The feeds as they are when every input is a C-contiguous array and together they
        have a cached root signature (so they passed ``check_kinds`` when it was built);
        None for anything else (``checked_feeds`` then converts and checks them)."""
        if len(feeds) != len(self._names):
            return None
        env = {}
        for name in self._names:
            value = feeds.get(name)
            if type(value) is not np.ndarray or not value.flags.c_contiguous:
                return None
            env[name] = value
        key = tuple((env[name].dtype, env[name].shape) for name in self._names)
        return env if key in self._cache else None

    def run_profiled(self, feeds: Mapping[str, Any], record: StageClock) -> list[np.ndarray]:
        """One ``run`` that reports the time of every engine step and host node it runs:
        ``record(source, index, start_ns, end_ns)``, ``source`` being the stage's ``Engine``
        (``index``: its step) or the host node (``index`` 0). Policy lives in profile.py."""
        return self._run_stages(self.checked_feeds(feeds), record)

    def _run_stages(self, env: dict[str, np.ndarray],
                    record: StageClock | None) -> list[np.ndarray]:
        with self._lock:
            key = tuple((env[name].dtype, env[name].shape) for name in self._names)
            stage = self._cache.get(key)  # (a seen signature: no conversion, no checks)
            if stage is not None:
                self._cache.move_to_end(key)
            else:
                stage = self.root_stage({name: (a.dtype, a.shape) for name, a in env.items()})
            if record is None and self.single(stage):
                return stage.engine.run(env)
            fed = set(env)
            while True:
                self._execute(stage, env, record)
                if stage.rest is None:
                    break
                stage = self._next(stage, env)
        return [env[name].copy() if name in fed else env[name] for name in self.output_names]

    @staticmethod
    def _execute(stage: Stage, env: dict[str, np.ndarray], record: StageClock | None) -> None:
        engine = stage.engine
        if engine is not None:
            inputs = {name: env[name] for name in stage.engine_inputs}
            results = engine.run(inputs) if record is None else engine.run_profiled(
                inputs, lambda index, start, end: record(engine, index, start, end))
            env.update(zip(stage.engine_outputs, results, strict=True))
        for output, source in stage.renames:  # (a copy: the value may be a feed or output)
            env[output] = env[source].copy()
        env.update(stage.constants)
        for host in stage.host_nodes:
            if record is None:
                env.update(host.run(env))
            else:
                start = time.perf_counter_ns()
                env.update(host.run(env))
                record(host, 0, start, time.perf_counter_ns())

    def _next(self, stage: Stage, env: dict[str, np.ndarray]) -> Stage:
        # the carried values' dtypes and shapes are the stage's own (it was built for them)
        # but for what its host nodes make; the promoted values key by their contents
        key = tuple(kind(env[name]) for name in stage.varying) + \
            tuple((env[name].dtype.str, env[name].shape, env[name].tobytes())
                  for name in stage.promote)
        child = stage.children.get(key)
        if child is None:
            if self._note_volatile(stage, env):
                return self._next(stage, env)
            available = {name: kind(env[name]) for name in stage.carry
                         if name not in stage.promote}
            fixed = {name: env[name] for name in stage.promote}
            child = self._build(stage.rest, available, fixed)
            _insert(stage.children, key, child, self.cache_size)
        else:
            stage.children.move_to_end(key)
        return child

    def _note_volatile(self, stage: Stage, env: Mapping[str, np.ndarray]) -> bool:
        """Record the promoted values a missed child meets; when one has met more than
        ``VOLATILE_AFTER`` values, make it volatile (design note): drop the stage's children
        and stop keying by it. Returns whether the stage changed."""
        changed = set()
        for name in stage.promote:
            values = stage.seen.setdefault(name, set())
            values.add(env[name].tobytes())
            if len(values) > VOLATILE_AFTER:
                changed.add(name)
        if not changed:
            return False
        self.volatile |= changed
        stage.promote = tuple(name for name in stage.promote if name not in changed)
        for child in stage.children.values():
            child.close()
        stage.children.clear()
        return True

    def close(self) -> None:
        with self._lock:
            self._static = None
            self._singles = {}
            for stage in self._cache.values():
                stage.close()
            self._cache.clear()

    # -- building -----------------------------------------------------------------------------
    def _build(self, pending: _Pending, available: dict[str, tuple[np.dtype, tuple]],
               fixed: dict[str, np.ndarray]) -> Stage:
        """The stage that runs first of ``pending`` given the values ``available`` (dtype and
        shape, their contents unknown) and ``fixed`` (contents known: constants here)."""
        from openacl.model.passes import fold_onnx

        folded = fold_onnx(self._proto(pending, available, fixed, self.output_names))
        constants_to_initializers(folded.graph)  # those of an inlined branch
        types = _inferred_types(folded)
        constants = {t.name: t for t in folded.graph.initializer}
        fixed_names = set(constants) | set(self.weights)
        demoted: set[str] = set()
        while True:
            plan = _split(folded.graph.node, set(available) | fixed_names, fixed_names, types,
                          set(self.output_names), demoted, self.volatile)
            # a lowering that refuses an attribute stays an error, never a host fallback
            # that might ignore it (only op types without any lowering run on the reference
            # evaluator); one that needs a computed small int input as a constant (axes,
            # pads, repeats, k) gets it: the node moves to the next stage, keyed by it
            try:
                return self._finish_build(plan, available, fixed, constants, types,
                                          fixed_names)
            except AclError as exc:
                node = next((n for n in plan.ready if n.name == getattr(exc, "node", None)),
                            None)
                if node is None or node.name in demoted or not _candidates(
                        node, fixed_names, types):
                    raise
                demoted.add(node.name)

    def _finish_build(self, plan: _Split, available: Mapping[str, Any],
                      fixed: Mapping[str, Any], constants: Mapping[str, Any],
                      types: Mapping[str, tuple], fixed_names: set[str]) -> Stage:
        rest_nodes = plan.blocked
        if rest_nodes and not (plan.ready or plan.host or plan.promote):
            node = rest_nodes[0]
            missing = [name for name in node_reads(node) if name not in set(available) |
                       fixed_names | plan.produced]
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"model {self.name!r}: node {node.name!r} ({node.op_type}) reads "
                           f"{missing}, which nothing computes")
        unfinished = [name for name in self.output_names if name not in set(available) |
                      plan.produced | set(fixed) | fixed_names and not any(
                          name in node.output for node in [*plan.host, *rest_nodes])]
        if unfinished:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"model {self.name!r}: output(s) {unfinished} are never computed")
        renames = _renames(plan.ready, available)
        engine, engine_inputs, engine_outputs = (None, [], []) if renames else self._compile(
            plan.ready, plan.engine_outputs, available, constants, types)
        try:
            stage = self._assemble(plan, available, fixed, constants, engine, engine_inputs,
                                   engine_outputs)
            stage.renames = renames
        except BaseException:
            if engine is not None:
                engine.close()
            raise
        self.stages_built += 1
        self.host_ops.update(node.op_type for node in plan.host
                             if node.op_type not in ("Loop", "Scan", "If"))
        return stage

    def _assemble(self, plan: _Split, available: Mapping[str, Any], fixed: Mapping[str, Any],
                  constants: Mapping[str, Any], engine: Any, engine_inputs: list[str],
                  engine_outputs: list[str]) -> Stage:
        """The stage around its compiled engine: host nodes, what the rest needs."""
        from onnx import numpy_helper

        from openacl.model.host_nodes import host_node

        rest_nodes = plan.blocked
        needed = {name for node in rest_nodes for name in node_reads(node)} | set(
            self.output_names)
        done = set(available) | set(plan.produced) | set(fixed) | {
            out for node in plan.host for out in node.output if out}
        host_reads = {name for node in plan.host for name in node_reads(node)}
        stage_constants = {name: numpy_helper.to_array(constants[name]) for name in constants
                           if name in host_reads or name in self.output_names}
        hosts = []
        try:
            for node in plan.host:
                hosts.append(host_node(node, self, stage_constants))
        except BaseException:
            for host in hosts:
                host.close()
            raise
        rest = None
        if rest_nodes:
            rest = _Pending(rest_nodes, [constants[name] for name in constants
                                         if name in needed])
        carry = tuple(sorted(name for name in needed if name in done
                             and name not in constants and name not in self.weights))
        made_here = {out for node in plan.host for out in node.output if out}
        return Stage(engine, engine_inputs, engine_outputs, hosts, stage_constants, carry,
                     tuple(sorted(plan.promote)), rest,
                     varying=tuple(name for name in carry if name in made_here))

    def _proto(self, pending: _Pending, available: Mapping[str, tuple[np.dtype, tuple]],
               fixed: Mapping[str, np.ndarray], outputs: Sequence[str]) -> Any:
        """A ModelProto of ``pending``'s nodes: the ``available`` values and the weights they
        read as typed graph inputs, ``fixed`` values as initializers, ``outputs`` (those
        the nodes produce) as outputs of unknown shape."""
        import onnx
        from onnx import helper, numpy_helper

        reads = {name for node in pending.nodes for name in node_reads(node)}
        produced = {out for node in pending.nodes for out in node.output if out}
        graph = onnx.GraphProto()
        graph.name = self.name
        graph.node.extend(pending.nodes)
        graph.initializer.extend(pending.initializers)
        graph.initializer.extend(numpy_helper.from_array(np.asarray(array), name)
                                 for name, array in fixed.items() if name in reads)
        graph.input.extend(value_info(name, value_kind)  # tensors, sequences, maps
                           for name, value_kind in available.items() if name in reads)
        for name in sorted(reads & set(self.weights)):
            array = self.weights[name]
            graph.input.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)))
        kinds = {name: dtype for name, dtype, _ in self.outputs}
        infos = {info.name: info for info in self._output_infos}
        for name in outputs:
            if name in produced and name in self.host_outputs:
                graph.output.append(infos[name])
            elif name in produced:
                dtype = kinds.get(name)
                graph.output.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(dtype) if dtype is not None
                    else onnx.TensorProto.UNDEFINED, None))
        model = helper.make_model(graph, opset_imports=self._opsets)
        model.ir_version = self._ir_version
        model.functions.extend(self._functions)
        return model

    def _compile(self, nodes: list[Any], outputs: list[str],
                 available: Mapping[str, tuple[np.dtype, tuple]], constants: Mapping[str, Any],
                 types: Mapping[str, tuple[np.dtype, tuple]]) -> tuple[Any, list[str], list[str]]:
        """An Engine for ``nodes`` computing ``outputs`` (None when there is nothing to do)."""
        if not nodes or not outputs:
            return None, [], []
        import onnx
        from onnx import helper

        from openacl.model.engine import Engine
        from openacl.model.lowering import lower
        from openacl.model.onnx_import import import_onnx
        from openacl.model.passes import optimize
        from openacl.model.plan import plan_memory
        from openacl.model.precision import apply_precision

        reads = {name for node in nodes for name in node_reads(node)}
        graph = onnx.GraphProto()
        graph.name = self.name
        graph.node.extend(nodes)
        graph.initializer.extend(constants[name] for name in constants if name in reads)
        inputs = [name for name in available if name in reads]
        weights = {name: self.weights[name] for name in reads if name in self.weights}
        for name in [*inputs, *sorted(weights)]:
            dtype, shape = available[name] if name in available else (
                weights[name].dtype, weights[name].shape)
            graph.input.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)))
        for name in outputs:
            dtype, _ = types[name]
            graph.output.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(dtype), None))
        model = helper.make_model(graph, opset_imports=self._opsets)
        model.ir_version = self._ir_version
        model.functions.extend(self._functions)
        ir_graph = import_onnx(model, None, weights)
        lowered = lower(apply_precision(optimize(ir_graph), self.precision))
        return Engine(lowered, plan_memory(lowered)), inputs, outputs


def _renames(nodes: Sequence[Any], available: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A stage's compiled nodes as (output, input) pairs when every one is an Identity of an
    available value or of an earlier one's output (an If branch that passes a value on):
    copied on the host, cheaper than an engine run; () for anything else."""
    known, pairs = set(available), []
    for node in nodes:
        if node.op_type != "Identity" or len(node.input) != 1 or node.input[0] not in known:
            return ()
        pairs.append((node.output[0], node.input[0]))
        known.add(node.output[0])
    return tuple(pairs)


def _copies(messages: Any, kind: type) -> list[Any]:
    """Standalone copies of protobuf sub-messages: a reference into a message keeps all of
    it alive (a model's weights with it)."""
    copies = []
    for message in messages:
        copy = kind()
        copy.CopyFrom(message)
        copies.append(copy)
    return copies


def _insert(cache: OrderedDict, key: tuple, stage: Stage, limit: int) -> None:
    cache[key] = stage
    while len(cache) > limit:
        _, oldest = cache.popitem(last=False)
        oldest.close()


def _elem_dtype(value: Any) -> np.dtype:
    from onnx import helper

    from openacl.errors import ACL_ERROR_PARSE_MODEL

    if value.type.WhichOneof("value") != "tensor_type":  # a sequence or map output
        return np.dtype(object)
    elem = value.type.tensor_type.elem_type
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except (KeyError, TypeError, ValueError):
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"graph value {value.name!r} has ONNX element type {elem}, which is "
                       f"not supported") from None


def _tensor_dtype(tensor: Any) -> np.dtype:
    """An initializer's numpy dtype (ACL_ERROR_PARSE_MODEL naming it when it has none)."""
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"initializer {tensor.name!r} has ONNX data type {tensor.data_type}, "
                       f"which is not supported") from None


def _tensor_array(tensor: Any) -> np.ndarray:
    """An initializer as numpy (ACL_ERROR_PARSE_MODEL naming it when its data does not
    match its type and dims)."""
    from onnx import numpy_helper

    _tensor_dtype(tensor)
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # ValueError, TypeError, protobuf errors
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"initializer {tensor.name!r} ({list(tensor.dims)}) does not hold its "
                       f"data: {exc}") from None


def _inferred_types(model: Any) -> dict[str, tuple[np.dtype, tuple]]:
    """Every value whose dtype and concrete shape ONNX shape inference finds."""
    from onnx import helper

    from openacl.model.onnx_graph import infer_shapes
    from openacl.model.onnx_import import shape_inference_view

    inferred = infer_shapes(shape_inference_view(model))
    types = {}
    for info in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor_type = info.type.tensor_type
        if info.type.WhichOneof("value") != "tensor_type" or not tensor_type.HasField("shape"):
            continue
        dims = tensor_type.shape.dim
        if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        except (KeyError, TypeError, ValueError):
            continue
        types[info.name] = (dtype, tuple(int(d.dim_value) for d in dims))
    for tensor in model.graph.initializer:
        types[tensor.name] = (_tensor_dtype(tensor), tuple(tensor.dims))
    return types


@dataclass
class _Split:
    ready: list[Any]  # compiled into this stage's engine, in order
    produced: set[str]  # the ready nodes' outputs
    engine_outputs: list[str]
    host: list[Any]  # run on the host after the engine
    promote: set[str]
    blocked: list[Any]  # left for the next stage


def _candidates(node: Any, constant: set[str], types: Mapping[str, tuple]) -> list[str]:
    """The inputs of ``node`` whose values may key a stage: computed, small, integer."""
    inputs = node.input[:1] if node.op_type == "If" else node.input
    return [name for name in inputs
            if name and name not in constant and _promotable(types.get(name))]


def _split(nodes: Sequence[Any], known: set[str], constant: set[str],
           types: Mapping[str, tuple], outputs: set[str],
           demoted: set[str] = frozenset(), volatile: set[str] = frozenset()) -> _Split:
    """Cut ``nodes`` into this stage's compiled part, the host nodes and promotions after
    it, and the rest (see the design note); a node that needs a ``volatile`` value as a
    constant runs on the host."""
    from openacl.model.lowering import LOWERINGS, register_lowerings

    register_lowerings()
    available = set(known)
    ready, blocked = [], []
    for node in nodes:
        outs = [out for out in node.output if out]
        compilable = (node.domain in DEFAULT_DOMAINS and node.op_type in LOWERINGS
                      and node.op_type not in HOST_OPS and node.name not in demoted
                      and all(out in types and compilable_dtype(types[out][0])
                              for out in outs)
                      and all(name in types and compilable_dtype(types[name][0])
                              for name in node_reads(node)))
        if compilable and all(name in available for name in node_reads(node)):
            ready.append(node)
            available.update(outs)
        else:
            blocked.append(node)
    produced = {out for node in ready for out in node.output if out}
    host, promote, rest = [], set(), []
    for node in blocked:
        reads = node_reads(node)
        if not all(name in available for name in reads):
            rest.append(node)  # waits for a host node or a later stage
            continue
        candidates = [name for name in _candidates(node, constant, types)
                      if name not in volatile]
        if node.op_type == "If" and candidates:
            promote.update(candidates)
            rest.append(node)
        elif node.op_type in HOST_OPS or node.domain not in DEFAULT_DOMAINS or \
                node.op_type not in LOWERINGS or not candidates:
            host.append(node)
        else:
            promote.update(candidates)
            rest.append(node)
    needed = {name for node in [*host, *rest] for name in node_reads(node)} | outputs
    engine_outputs = [out for node in ready for out in node.output if out and out in needed]
    return _Split(ready, produced, engine_outputs, host, promote, rest)


def _promotable(kind: tuple[np.dtype, tuple] | None) -> bool:
    if kind is None:
        return False
    dtype, shape = kind
    return (np.issubdtype(dtype, np.integer) or dtype == np.bool_) and \
        math.prod(shape) <= MAX_PROMOTED_ELEMENTS
