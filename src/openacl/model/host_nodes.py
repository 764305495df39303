"""Nodes the staged engine runs on the host between two compiled stages (``staged.py``).

* ``Loop``, ``Scan`` and an ``If`` whose condition's shape is unknown before it runs: the
  body (or branch) is a model of its own, a ``StagedModel`` over the body graph whose inputs
  are the body's formal inputs plus the outer values it reads (outer weights shared, outer
  constants folded in), run once per iteration and specialised on the shapes it meets like
  any model; scan outputs are gathered in a list and stacked once at the end. A Loop's
  carried value that the body hands back unchanged and whose first value is a weight or a
  constant of the outer model is a weight of the body (``fixed``): its Transpose or Cast
  folds once, when the body loads, instead of running every iteration. The body's nodes
  that read only loop invariants run once per Loop run (``loop_hoisting.py``: a prologue
  model, then a hoisted body that reads its results as outer values).
* Every other node (NonZero, Unique, NonMaxSuppression, Compress, a node no lowering
  handles): ``onnx.reference.ReferenceEvaluator`` on a one-node model, built once per input
  dtypes and kept.

A host node reads its inputs from the run's values, the stage's folded constants and the
model's weights, and returns its outputs by name. A failure is an AclError naming the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    AclError,
)
from openacl.model.host_values import as_value, kind, type_proto
from openacl.model.loop_hoisting import plan_hoisting
from openacl.model.onnx_graph import default_opset_of, free_names

__all__ = ["host_node"]

MAX_LOOP_ITERATIONS = 1 << 24  # a Loop with neither trip count nor condition stops here
HOIST_LOOP_INVARIANTS = True  # compute a body's loop-invariant nodes once (tests turn it off)
SETTLE_ITERATIONS = 3  # full iterations a carried copy may take to reach its fixed point


def host_node(node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> Any:
    """The host runner for ``node`` of the StagedModel ``model``."""
    if node.domain == "ai.onnx.ml":  # the ONNX-ML ops onnxruntime's way (host_ml.py)
        from openacl.model.host_ml import ml_node

        runner = ml_node(node, model, constants)
        if runner is not None:
            return runner
    elif node.domain not in ("", "ai.onnx"):  # onnxruntime's contrib ops (host_contrib.py)
        from openacl.model.host_contrib import contrib_node

        runner = contrib_node(node, model, constants)
        if runner is not None:
            return runner
    kind = {"Loop": LoopNode, "Scan": ScanNode, "If": IfNode}.get(node.op_type, ReferenceNode)
    return kind(node, model, constants)


class _HostNode:
    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        self.node = node
        self.model = model
        self.constants = dict(constants)

    def value(self, name: str, env: Mapping[str, np.ndarray]) -> np.ndarray:
        if name in env:
            return env[name]
        if name in self.constants:
            return self.constants[name]
        return self.model.weights[name]

    def fail(self, code: int, message: str) -> AclError:
        return AclError(code, f"model {self.model.name!r}: node {self.node.name!r} "
                              f"({self.node.op_type}): {message}")

    def close(self) -> None:
        """Release what the node built (its body models)."""


def _host_slice(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                axes: np.ndarray | None = None, steps: np.ndarray | None = None
                ) -> np.ndarray | None:
    """ONNX Slice (opset 10 on) as the reference evaluator computes it: Python slices per
    axis (they clamp as ONNX says), the result a view of ``data``; None where the inputs are
    not 1-d integer arrays of one length (the evaluator then runs, and reports)."""
    bounds = [starts, ends, *(() if axes is None else (axes,)),
              *(() if steps is None else (steps,))]
    if any(b.dtype.kind not in "iu" or b.ndim != 1 or b.size != starts.size for b in bounds):
        return None
    count = starts.size
    axes_list = range(count) if axes is None else axes.tolist()
    steps_list = [1] * count if steps is None else steps.tolist()
    if 0 in steps_list or len(set(axes_list)) != count or \
            any(not -data.ndim <= a < data.ndim for a in axes_list):
        return None
    window = [slice(None)] * data.ndim
    for axis, start, end, step in zip(axes_list, starts.tolist(), ends.tolist(), steps_list,
                                      strict=True):
        window[axis] = slice(start, end, step)
    return data[tuple(window)]


def _host_range(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray | None:
    """ONNX Range of integer scalars, as the reference evaluator computes it (``arange``);
    None for anything else (floats: the evaluator's own rounding rules)."""
    if any(v.dtype.kind not in "iu" or v.size != 1 for v in (start, limit, delta)) or \
            not delta.item():
        return None
    return np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)


# the ops a loop body typically leaves on the host (a Slice bound, a Range start that is the
# loop counter), computed without the evaluator's per-call cost (~50 us): the functions
# return None to leave a case to the evaluator
FAST_HOST_OPS = {"Slice": _host_slice, "Range": _host_range}
SLICE_INPUTS_OPSET = 10  # Slice takes its bounds as inputs from here on


def _opset(model: Any) -> int:
    return default_opset_of(model._opsets)


class ReferenceNode(_HostNode):
    """One node run by the ONNX reference evaluator (a few common ops directly in numpy,
    computing what the evaluator does: ``FAST_HOST_OPS``)."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        self._evaluators: dict[tuple, Any] = {}  # by input dtypes
        self._fast = FAST_HOST_OPS.get(node.op_type) if node.domain in ("", "ai.onnx") and \
            not node.attribute and _opset(model) >= SLICE_INPUTS_OPSET else None

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [name for name in self.node.input if name]
        arrays = [self.value(name, env) for name in names]
        if self._fast is not None and len(names) == len(self.node.input):
            result = self._fast(*arrays)
            if result is not None:
                return {self.node.output[0]: result}
        key = tuple(array.dtype.str if isinstance(array, np.ndarray) else kind(array)
                    for array in arrays)
        evaluator = self._evaluators.get(key)
        if evaluator is None:
            evaluator = self._evaluators[key] = self._evaluator(names, arrays)
        try:
            results = evaluator.run(None, dict(zip(names, arrays, strict=True)))
        except ImportError as exc:  # an optional package of the reference op (Pillow...)
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"is not supported here: its host implementation needs a package "
                            f"that is not installed ({exc})") from exc
        except Exception as exc:  # the reference ops raise whatever numpy raises
            raise self.fail(ACL_ERROR_RT_AICORE_EXCEPTION,
                            f"failed on the host: {type(exc).__name__}: {exc}") from exc
        outputs = [name for name in self.node.output if name]
        # sequences (lists) and maps (dicts) stay as they are, strings are str objects, as
        # onnxruntime hands them out (host_values.py)
        return {name: result if isinstance(result, list | dict) else as_value(result)
                for name, result in zip(outputs, results, strict=True)}

    def _evaluator(self, names: list[str], arrays: list[np.ndarray]) -> Any:
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph(
            [self.node], self.node.name,
            [helper.make_value_info(name, type_proto(a))
             for name, a in zip(names, arrays, strict=True)],
            [helper.make_value_info(name, helper.make_empty_tensor_value_info(name).type)
             for name in self.node.output if name])
        proto = helper.make_model(graph, opset_imports=self.model._opsets)
        proto.ir_version = self.model._ir_version
        try:
            return ReferenceEvaluator(proto)
        except Exception as exc:
            raise self.fail(ACL_ERROR_PARSE_MODEL,
                            f"has no lowering and the host evaluator cannot run it: "
                            f"{type(exc).__name__}: {exc}") from exc


class _BodyModel:
    """A subgraph as a model of its own: formal inputs, then the outer values it reads."""

    def __init__(self, owner: _HostNode, graph: Any, attribute: str,
                 fixed: Mapping[str, np.ndarray] | None = None) -> None:
        if graph is None:
            raise owner.fail(ACL_ERROR_PARSE_MODEL, f"has no {attribute!r} graph attribute")
        self.owner = owner
        self.graph = graph
        self.formal = [value.name for value in graph.input]
        self.outer = sorted(free_names(graph))
        self.fixed = dict(fixed or {})  # formal inputs that are weights of the body
        outputs = [value.name for value in graph.output]
        # the body's outputs that are fixed formal inputs handed back: (position, array)
        self._handed_back = [(index, self.fixed[name]) for index, name in enumerate(outputs)
                             if name in self.fixed]
        self._model: Any = None

    def run(self, formal: list[np.ndarray], env: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The body's outputs for its formal inputs (a fixed one's slot is ignored) and the
        outer values it reads from ``env``."""
        owner = self.owner
        outer = {name: owner.value(name, env) for name in self.outer
                 if name not in owner.model.weights and name not in owner.constants}
        if self._model is None:
            self._model = self._build(formal, outer)
        feeds = {name: value for name, value in zip(self.formal, formal, strict=True)
                 if name not in self.fixed}
        feeds.update(outer)
        results = self._model.run(feeds)
        for index, array in self._handed_back:
            results.insert(index, array)
        return results

    def _build(self, formal: list[np.ndarray], outer: Mapping[str, np.ndarray]) -> Any:
        import onnx
        from onnx import helper, numpy_helper

        from openacl.model.staged import StagedModel

        owner = self.owner
        body = onnx.GraphProto()
        body.CopyFrom(self.graph)
        body.name = f"{owner.model.name}/{owner.node.name}"
        del body.input[:]
        for name, array in [*zip(self.formal, formal, strict=True), *outer.items()]:
            if name not in self.fixed:
                body.input.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(array.dtype), None))
        for name, array in self.fixed.items():
            body.input.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)))
        kept = [value for value in body.output if value.name not in self.fixed]
        del body.output[:]
        body.output.extend(kept)
        body.initializer.extend(numpy_helper.from_array(np.asarray(owner.constants[name]), name)
                                for name in self.outer if name in owner.constants)
        proto = helper.make_model(body, opset_imports=owner.model._opsets)
        proto.ir_version = owner.model._ir_version
        if any(not value.type.tensor_type.elem_type for value in proto.graph.output):
            proto = _typed_outputs(proto)  # a hoisting prologue's outputs (loop_hoisting.py)
        shared = {name: owner.model.weights[name] for name in self.outer
                  if name in owner.model.weights}
        shared.update(self.fixed)
        return StagedModel(proto, owner.model.cache_size, owner.model.precision, shared)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None


def _typed_outputs(proto: Any) -> Any:
    """``proto`` with its untyped graph outputs typed by ONNX's shape inference (its inputs
    are typed from the arrays they are built for)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(proto)
    types = {value.name: value.type for value in [*inferred.graph.value_info,
                                                  *inferred.graph.output]}
    for value in proto.graph.output:
        if not value.type.tensor_type.elem_type and value.name in types:
            value.type.CopyFrom(types[value.name])
    return proto


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def _stacked(parts: list[np.ndarray], axis: int, reverse: bool, name: str,
             declared: Any) -> np.ndarray:
    """Scan outputs gathered per iteration, stacked once along ``axis``."""
    if not parts:
        from openacl.model.staged import declared_dims

        dims = declared_dims(declared)
        inner = tuple(d for d in (dims or ())) if dims and all(isinstance(d, int)
                                                              for d in dims) else ()
        return np.zeros((0, *inner), np.float32)
    if reverse:
        parts = parts[::-1]
    return np.stack(parts, axis=axis)


class LoopNode(_HostNode):
    """ONNX Loop: trip count ``M`` and/or condition, loop-carried values, scan outputs."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        body = _attr(node, "body", None)
        fixed = self._invariants(body)
        self.body = _BodyModel(self, body, "body", fixed)
        # the nodes computed once per run (loop_hoisting.py): a prologue and a hoisted body
        self.hoist = None if body is None or not HOIST_LOOP_INVARIANTS else plan_hoisting(
            body, set(model.weights) | set(self.constants) | set(fixed), self._static_value)
        if self.hoist is not None:
            self.prologue = _BodyModel(self, self.hoist.prologue, "body", fixed)
            self.hoisted_body = _BodyModel(self, self.hoist.body, "body", fixed)

    def _static_value(self, name: str) -> np.ndarray | None:
        """A weight's or folded constant's array (the hoisting plan's constants)."""
        if name in self.constants or name in self.model.weights:
            return np.asarray(self.value(name, {}))
        return None

    def _invariants(self, body: Any) -> dict[str, np.ndarray]:
        """Carried values the body hands back unchanged whose first value is a weight or a
        constant of the outer model: formal name -> the array (see the module note)."""
        if body is None:
            return {}
        formal = [value.name for value in body.input]
        returned = [value.name for value in body.output]
        fixed = {}
        for index, name in enumerate(list(self.node.input)[2:]):
            inner = formal[2 + index] if 2 + index < len(formal) else None
            if inner is None or 1 + index >= len(returned) or returned[1 + index] != inner:
                continue
            if returned.count(inner) != 1 or name not in self.model.weights and \
                    name not in self.constants:
                continue
            fixed[inner] = np.asarray(self.value(name, {}))
        return fixed

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = list(self.node.input) + [""] * max(0, 2 - len(self.node.input))
        trip = None
        if inputs[0]:
            count = np.asarray(self.value(inputs[0], env))
            if count.size != 1 or not np.issubdtype(count.dtype, np.integer):
                raise self.fail(ACL_ERROR_INVALID_PARAM,
                                f"the trip count {inputs[0]!r} must be one integer; it is "
                                f"{count.dtype} {list(count.shape)}")
            trip = int(count.reshape(-1)[0])
            if trip < 0:
                raise self.fail(ACL_ERROR_INVALID_PARAM,
                                f"the trip count {inputs[0]!r} is {trip}; it must be >= 0")
        keep = True
        if inputs[1]:
            keep = self._condition(self.value(inputs[1], env), inputs[1])
        carried = [np.asarray(self.value(name, env)) for name in inputs[2:]]
        count = len(carried)
        outputs = list(self.node.output)
        scans: list[list[np.ndarray]] = [[] for _ in outputs[count:]]
        iteration = 0
        limit = trip if trip is not None else MAX_LOOP_ITERATIONS
        body, body_env = self.body, env
        hoist = self.hoist
        unsettled = set(hoist.settle) if hoist is not None else set()
        while keep and iteration < limit:
            if hoist is not None and not unsettled and body is self.body:
                body_env = self._hoisted_env(carried, env)  # the prologue, once
                body = self.hoisted_body
            results = body.run(
                [np.array(iteration, np.int64), np.array(keep), *carried], body_env)
            keep = self._condition(results[0], "the body's condition output")
            if unsettled:  # a slot settles when it comes out as it went in, bit for bit
                unsettled = {slot for slot in unsettled
                             if not _same_value(results[1 + slot], carried[slot])}
                if unsettled and iteration + 1 >= SETTLE_ITERATIONS:
                    hoist, unsettled = None, set()  # not a fixed point soon: this run
                                                    # keeps the full body, unchecked
            carried = results[1:1 + count]
            for part, value in zip(scans, results[1 + count:], strict=True):
                part.append(value)
            iteration += 1
        if keep and trip is None and not inputs[1]:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"has neither trip count nor condition and ran "
                            f"{MAX_LOOP_ITERATIONS} iterations")
        result = dict(zip(outputs[:count], carried, strict=False))
        body_outputs = list(self.body.graph.output)[1 + count:]
        for name, part, declared in zip(outputs[count:], scans, body_outputs, strict=False):
            result[name] = _stacked(part, 0, False, name, declared)
        return {name: value for name, value in result.items() if name}

    def _hoisted_env(self, carried: list[np.ndarray], env: Mapping[str, np.ndarray]
                     ) -> dict[str, np.ndarray]:
        """``env`` plus the prologue's values, computed from the carried values now."""
        hoist = self.hoist
        values = self.prologue.run([carried[slot] for slot in hoist.prologue_formals], env)
        return {**env, **dict(zip(hoist.needed, values, strict=True))}

    def _condition(self, value: Any, what: str) -> bool:
        array = np.asarray(value)
        if array.dtype != np.bool_ or array.size != 1:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"the condition {what!r} must be one bool element; it is "
                            f"{array.dtype} {list(array.shape)}")
        return bool(array.reshape(-1)[0])

    def close(self) -> None:
        self.body.close()
        if self.hoist is not None:
            self.prologue.close()
            self.hoisted_body.close()


def _same_value(a: Any, b: Any) -> bool:
    """Whether two run-time values are the same bits (dtype, shape and bytes)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
        and a.shape == b.shape and a.tobytes() == b.tobytes()


class ScanNode(_HostNode):
    """ONNX Scan (opset 9+): state variables and scan inputs sliced along their axes."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        self.body = _BodyModel(self, _attr(node, "body", None), "body")
        self.scan_count = int(_attr(node, "num_scan_inputs", 0))

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        node = self.node
        inputs = [np.asarray(self.value(name, env)) for name in node.input]
        states_count = len(inputs) - self.scan_count
        states, scan_inputs = inputs[:states_count], inputs[states_count:]
        in_axes = list(_attr(node, "scan_input_axes", [0] * self.scan_count))
        in_dirs = list(_attr(node, "scan_input_directions", [0] * self.scan_count))
        outputs = list(node.output)
        out_count = len(outputs) - states_count
        out_axes = list(_attr(node, "scan_output_axes", [0] * out_count))
        out_dirs = list(_attr(node, "scan_output_directions", [0] * out_count))
        axes = [a + x.ndim if a < 0 else a for a, x in zip(in_axes, scan_inputs, strict=True)]
        lengths = {x.shape[a] for a, x in zip(axes, scan_inputs, strict=True)}
        if len(lengths) != 1:
            raise self.fail(ACL_ERROR_INVALID_PARAM,
                            f"the scan inputs have different lengths {sorted(lengths)} along "
                            f"their scan axes")
        length = lengths.pop()
        parts: list[list[np.ndarray]] = [[] for _ in range(out_count)]
        for step in range(length):
            slices = [np.take(x, length - 1 - step if d else step, axis=a)
                      for x, a, d in zip(scan_inputs, axes, in_dirs, strict=True)]
            results = self.body.run([*states, *slices], env)
            states = results[:states_count]
            for part, value in zip(parts, results[states_count:], strict=True):
                part.append(value)
        result = dict(zip(outputs[:states_count], states, strict=True))
        body_outputs = list(self.body.graph.output)[states_count:]
        for name, part, axis, direction, declared in zip(
                outputs[states_count:], parts, out_axes, out_dirs, body_outputs, strict=True):
            rank = part[0].ndim + 1 if part else 1
            result[name] = _stacked(part, axis + rank if axis < 0 else axis, bool(direction),
                                    name, declared)
        return {name: value for name, value in result.items() if name}

    def close(self) -> None:
        self.body.close()


class IfNode(_HostNode):
    """ONNX If whose condition only the run knows the shape of: a branch model each."""

    def __init__(self, node: Any, model: Any, constants: Mapping[str, np.ndarray]) -> None:
        super().__init__(node, model, constants)
        self.branches = {True: _BodyModel(self, _attr(node, "then_branch", None),
                                          "then_branch"),
                         False: _BodyModel(self, _attr(node, "else_branch", None),
                                           "else_branch")}

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from openacl.model.onnx_rules import if_condition

        condition = if_condition(self.node, self.value(self.node.input[0], env))
        results = self.branches[condition].run([], env)
        return {name: value for name, value in zip(self.node.output, results, strict=False)
                if name}

    def close(self) -> None:
        for branch in self.branches.values():
            branch.close()
