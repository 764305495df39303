"""Loop-invariant code motion for ONNX Loop bodies: what a Loop can compute once per run.

Decoder loops exported from PaddlePaddle and PyTorch often recompute, every iteration, a
product of values that do not change while the loop runs: the encoder's features times an
attention weight, read from the outer scope or carried through the loop unchanged. This
module finds those nodes; ``host_nodes.LoopNode`` runs them once per Loop run (the
*prologue*) and the rest of the body (the *hoisted body*) every iteration, reading the
prologue's results as outer values.

Invariants the plan keeps (what makes the hoisted loop compute the same bits):

* A value is *invariant* when the loop cannot change it: an outer-scope name, a body
  initializer or Constant, a carried value the body hands back as it is (output name ==
  input name), or the output of a deterministic node (no Random* op, no subgraph) whose
  inputs are all invariant.
* A carried value the body hands back through copies of itself (``COPY_OPS``: reshapes,
  casts, adding a zero or multiplying by a one; ``Squeeze(Add(Unsqueeze(x), 0))`` is a
  Paddle export's copy) is invariant once it *settles*: the loop runs full iterations until
  its value going out equals, bit for bit, its value coming in (one iteration for such a
  copy; a -0.0 becomes +0.0 in the first). From then on it is a fixed point, since it
  depends on itself alone, and the prologue reads it there. ``settle`` lists those slots;
  one that has not settled after ``host_nodes.SETTLE_ITERATIONS`` leaves that run plain.
* Only nodes that read at least one run-time invariant (not only weights and constants,
  which the stage compiler folds already) move, and not shape arithmetic (``Shape``,
  ``Size`` and what is computed from them alone): in the body it folds into constants
  once the input shapes are known, whereas a hoisted shape would be a run-time value.
* A moved node whose output is a body output also stays in the body; the prologue returns
  only the values that nodes left in the body read. A plan that would move copies alone
  (``COPY_OPS``) is not made: it would save next to nothing for a second compiled body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.model.onnx_graph import free_names, node_reads, subgraphs

__all__ = ["HoistPlan", "plan_hoisting"]

# ops that hand a value back as it is, up to its shape, dtype and the sign of a zero, and
# the constant operand (by input index) that makes them so: 0 for Add/Sub, 1 for Mul/Div
COPY_OPS = {"Identity": None, "Squeeze": None, "Unsqueeze": None, "Reshape": None,
            "Flatten": None, "Cast": None, "Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0}
NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
SHAPE_OPS = {"Shape", "Size"}


@dataclass(frozen=True)
class HoistPlan:
    """``prologue``: a graph of the moved nodes (and the invariant nodes they need) from the
    invariant formal inputs it reads (``prologue_formals``, carried slot indices; a slot the
    Loop takes as a weight among them) to the values the hoisted body reads (``needed``);
    ``body``: the Loop body without the moved nodes; ``settle``: carried slots the
    prologue reads that must settle first."""

    prologue: Any
    prologue_formals: tuple[int, ...]
    needed: tuple[str, ...]
    body: Any
    settle: tuple[int, ...]


def _deterministic(node: Any) -> bool:
    return node.op_type not in NONDETERMINISTIC and not list(subgraphs(node))


def plan_hoisting(body: Any, static_outer: set[str],
                  constant: Callable[[str], np.ndarray | None]) -> HoistPlan | None:
    """The hoisting plan of the Loop body graph ``body``, or None where nothing is worth
    moving. ``static_outer``: outer names whose values are fixed for the model's life
    (weights, folded constants) or body formals the Loop already takes as weights;
    ``constant(name)``: such an outer value's array (None for any other name)."""
    import onnx
    from onnx import helper

    formals = [value.name for value in body.input]
    outputs = [value.name for value in body.output]
    carried = formals[2:]
    producer = {name: node for node in body.node for name in node.output if name}
    outer = free_names(body)
    static = {t.name for t in body.initializer} | (outer & static_outer) | \
        (set(carried) & static_outer)
    runtime = outer - static_outer  # outer values of this run: fixed meanwhile
    constants = _constants(body, constant)
    exact, settle = [], []
    for slot, name in enumerate(carried):
        if name in static or 1 + slot >= len(outputs):
            continue
        if outputs[1 + slot] == name:
            exact.append(slot)
        elif _copy_of(outputs[1 + slot], name, producer, constants):
            settle.append(slot)
    runtime |= {carried[slot] for slot in exact + settle}
    shaped: set[str] = set()  # run-time invariants computed from shapes alone
    moved, invariant_nodes = [], []
    for node in body.node:
        reads = node_reads(node)
        if not _deterministic(node) or any(name not in static and name not in runtime
                                           for name in reads):
            continue
        live = [name for name in reads if name in runtime]
        outs = [name for name in node.output if name]
        if not live:
            static.update(outs)
            invariant_nodes.append(node)
            continue
        runtime.update(outs)
        invariant_nodes.append(node)
        if node.op_type in SHAPE_OPS or all(name in shaped for name in live):
            shaped.update(outs)
        elif not set(outs) & set(outputs):
            moved.append(node)
    moved_ids = {id(node) for node in moved}
    kept = [node for node in body.node if id(node) not in moved_ids]
    made = {name for node in moved for name in node.output if name}
    needed = sorted({name for node in kept for name in node_reads(node)} & made)
    if not needed or all(node.op_type in COPY_OPS for node in moved):
        return None  # nothing read, or copies alone: not worth a second body
    prologue_nodes = _ancestors(needed, invariant_nodes, producer)
    read_formals = {name for node in prologue_nodes for name in node_reads(node)}
    prologue_formals = tuple(slot for slot, name in enumerate(carried) if name in read_formals
                             and (slot in exact + settle or name in static_outer))
    typed = {value.name: value for value in body.value_info}
    prologue = helper.make_graph(
        prologue_nodes, f"{body.name}/prologue",
        [body.input[2 + slot] for slot in prologue_formals],
        [typed.get(name) or helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED,
                                                          None) for name in needed],
        [t for t in body.initializer if t.name in read_formals])
    hoisted = onnx.GraphProto()
    hoisted.CopyFrom(body)
    del hoisted.node[:]
    hoisted.node.extend(kept)
    return HoistPlan(prologue, prologue_formals, tuple(needed), hoisted,
                     tuple(slot for slot in settle if slot in prologue_formals))


def _constants(body: Any, outer: Callable[[str], np.ndarray | None]
               ) -> Callable[[str], np.ndarray | None]:
    """The array of a body Constant, body initializer or static outer value, by name."""
    from onnx import numpy_helper

    arrays = {t.name: t for t in body.initializer}
    arrays.update((node.output[0], node) for node in body.node
                  if node.op_type == "Constant" and len(node.output) == 1)

    def lookup(name: str) -> np.ndarray | None:
        source = arrays.get(name)
        if source is None:
            return outer(name)
        if hasattr(source, "op_type"):  # a Constant node: its one tensor attribute
            values = [a.t for a in source.attribute if a.name == "value"]
            return numpy_helper.to_array(values[0]) if values else None
        return numpy_helper.to_array(source)
    return lookup


def _copy_of(name: str, formal: str, producer: dict[str, Any],
             constant: Callable[[str], np.ndarray | None]) -> bool:
    """Whether ``name`` is ``formal`` passed through ``COPY_OPS`` alone (their other
    operands constants: shapes, axes, or the neutral element for Add/Sub/Mul/Div)."""
    while name != formal:
        node = producer.get(name)
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in COPY_OPS:
            return False
        inputs = [value for value in node.input if value]
        neutral = COPY_OPS[node.op_type]
        if neutral is None:  # the value first, then constant shapes or axes
            if any(constant(value) is None for value in inputs[1:]):
                return False
            name = inputs[0] if inputs else ""
            continue
        if len(inputs) != 2:
            return False
        sides = [0, 1] if node.op_type in ("Add", "Mul") else [0]  # x - 0 and x / 1 only
        for side in sides:
            other = constant(inputs[1 - side])
            if other is not None and other.size == 1 and other.ndim <= 1 and \
                    other.dtype.kind in "fiu" and float(other.reshape(-1)[0]) == neutral:
                name = inputs[side]
                break
        else:
            return False
    return True


def _ancestors(names: list[str], nodes: list[Any], producer: dict[str, Any]) -> list[Any]:
    """The nodes of ``nodes`` that ``names`` are computed by, in graph order."""
    wanted: set[int] = set()
    pending = list(names)
    members = {id(node) for node in nodes}
    while pending:
        node = producer.get(pending.pop())
        if node is None or id(node) in wanted or id(node) not in members:
            continue
        wanted.add(id(node))
        pending.extend(node_reads(node))
    return [node for node in nodes if id(node) in wanted]
