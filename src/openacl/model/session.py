"""``InferenceSession``: onnxruntime's shape of API over the engine.

    session = openacl.InferenceSession("model.onnx")          # converted on the fly
    session = openacl.InferenceSession("model.om")            # or `openacl convert`ed
    (y,) = session.run(None, {"x": x})

The runtime is initialised (and device 0 made current) if the program has not done so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
)
from openacl.model.converter import compile_onnx
from openacl.model.engine import Engine
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
    lowered, plan, _, gears = load_model_gears(source)
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
        self._gears: dict[int, Gear] = {}  # batch -> gear, for a dynamic-batch model
        if is_model_file(path):  # an offline model (.om), told apart by its magic
            lowered, plan, gears = _load_offline_model(path, input_shapes)
            self.engine = Engine(lowered, plan)
            self.graph = lowered.graph
            self._gears = {gear.batch: gear for gear in gears}
        else:
            graph, lowered, plan = compile_onnx(path, input_shapes)
            self.engine = Engine(lowered, plan)
            self.graph = graph
        self._engines: dict[int, Engine] = {}
        if self._gears:
            self._engines[self.graph.value(self.graph.inputs[0]).shape[0]] = self.engine

    @property
    def batch_sizes(self) -> list[int]:
        """The batch sizes a dynamic-batch model runs (empty for a static model)."""
        return sorted({*self._gears, *self._engines})

    def _engine_for(self, feeds: dict[str, np.ndarray]) -> Engine:
        """The engine of the gear whose batch is the feeds' (built on first use)."""
        if not self._gears:
            return self.engine
        first = feeds.get(self.graph.inputs[0])
        batch = np.shape(first)[0] if np.ndim(first) else None
        if batch in self._engines:
            return self._engines[batch]
        if batch not in self._gears:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {self.graph.inputs[0]!r} has batch {batch}; the model was "
                           f"converted for batch sizes {self.batch_sizes}")
        gear = self._gears[batch]
        self._engines[batch] = engine = Engine(gear.lowered, gear.plan)
        return engine

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
        engine = self._engine_for(feeds) if self._gears else self.engine
        if output_names is None:  # the common call: the engine's outputs are in graph order
            return engine.run(feeds, stream)
        results = dict(zip(self.graph.outputs, engine.run(feeds, stream), strict=True))
        wanted = list(output_names)
        missing = [n for n in wanted if n not in results]
        if missing:
            raise AclError(ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
                           f"unknown output(s) {missing}; the model has {self.graph.outputs}")
        return [results[n] for n in wanted]

    def profile(self, feeds: dict[str, np.ndarray] | None = None, runs: int = 10,
                warmup: int = 1, stream: Any = None) -> Any:
        """Per-operator timing over ``runs`` runs (synthetic inputs when ``feeds`` is None):
        a ``Profile`` with ``table()`` and ``write_chrome_trace(path)``."""
        from openacl.model.profile import profile_engine, synthetic_feeds

        if feeds is None:
            feeds = synthetic_feeds(self.graph)
        return profile_engine(self.engine, feeds, runs, warmup, stream)

    def close(self) -> None:
        for engine in {id(e): e for e in (self.engine, *self._engines.values())}.values():
            engine.close()
