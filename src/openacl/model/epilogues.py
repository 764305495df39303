"""Activations fused into the step that computes their input (GE's ReluFusionPass: the
activation becomes an instruction inside the preceding operator).

Two halves, so that an offline model stays a list of plain aclnn calls:

* ``write_in_place(lowered)``, at conversion: ``Convolution(output=a)`` then
  ``Relu(self=a, out=b)``, where nothing else reads ``a``, becomes ``Convolution(output=b)``
  then ``InplaceRelu(selfRef=b)`` (Hardswish, Sigmoid and LeakyRelu alike; Silu, which has
  no in-place operator, as ``Silu(self=b, out=b)``). The same results on every backend;
  ``a`` needs no memory.
* ``fused_steps(steps)``, when the engine binds its host kernels: a step whose operator
  declares the activation among its ``OpDef.epilogues``, directly followed by that in-place
  activation on its output, gets the activation as its ``Views.epilogue`` (applied in its
  tiles, no second pass over the output, by the activation operator's own C loop) and the
  activation step runs inside it: a kernel path that cannot apply it runs that step's
  kernel (``Epilogue.apply``), so the bits are the two steps' whichever path runs.

Invariant: a fused pair always reads and writes exactly what the two steps would; nothing
is fused across a step, onto a value another step reads, or onto a graph output's producer
whose value the activation does not also own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from openacl.model.ir import Lowered, Ref, RefList, Scalar, Step
from openacl.ops.registry import REGISTRY

__all__ = ["ACTIVATIONS", "Activation", "fused_steps", "write_in_place"]

@dataclass(frozen=True)
class Activation:
    """An activation step the producing step can apply: its operator and argument names,
    the operator that computes it in place (``argument`` its tensor; ``None``: the operator
    itself, given its output as its input), the epilogue's name, the step argument holding
    its parameter, and arguments that must have these values (GeluV2's erf form)."""

    op: str
    in_place: str | None
    argument: str
    epilogue: str
    parameter: str | None = None
    source: str = "self"  # the out-of-place operator's input and output arguments
    target: str = "out"
    fixed: tuple[tuple[str, Any], ...] = ()


ACTIVATIONS = {a.op: a for a in (
    Activation("Relu", "InplaceRelu", "selfRef", "relu"),
    Activation("Hardswish", "InplaceHardswish", "self", "hardswish"),
    Activation("Sigmoid", "InplaceSigmoid", "selfRef", "sigmoid"),
    Activation("LeakyRelu", "InplaceLeakyRelu", "selfRef", "leaky_relu", "negativeSlope"),
    Activation("Silu", None, "self", "silu"),  # (CANN has no aclnnInplaceSilu)
    Activation("GeluV2", None, "x", "gelu_erf", source="x", target="y",
               fixed=(("approximate", 0),)),
)}
# the in-place steps write_in_place leaves, by operator
IN_PLACE = {a.in_place or a.op: a for a in ACTIVATIONS.values()}
# the output argument of the operators that may carry an epilogue
OUTPUT_ARGUMENT = {"Convolution": "output"}


def _readers(lowered: Lowered) -> Counter:
    """How many step arguments name each value."""
    counts: Counter = Counter()
    for step in lowered.steps:
        for _, arg in step.args:
            if isinstance(arg, Ref):
                counts[arg.value] += 1
            elif isinstance(arg, RefList):
                counts.update(arg.values)
    return counts


def _pairs(steps: Sequence[Step], table: dict[str, Activation]
           ) -> Iterator[tuple[int, Step, Step, str, Activation]]:
    """(index, producer, follower, the producer's output argument, the activation) of each
    step that may carry an epilogue directly followed by an activation of ``table``."""
    for index in range(len(steps) - 1):
        producer, follower = steps[index], steps[index + 1]
        output = OUTPUT_ARGUMENT.get(producer.op)
        activation = table.get(follower.op)
        if output is not None and activation is not None:
            yield index, producer, follower, output, activation


def write_in_place(lowered: Lowered) -> int:
    """Rewrite each producer + activation pair (module note) in ``lowered``; returns how many.
    The activation may read the producer's output through a view of the same shape (an
    Identity or a Reshape that changes nothing), which then goes, with any other view of
    that output nothing reads."""
    steps, graph, views = lowered.steps, lowered.graph, lowered.views
    readers = _readers(lowered)
    viewed: dict[str, list[str]] = {}  # each value's views
    for view, source in views.items():
        viewed.setdefault(source, []).append(view)
    outputs = set(graph.outputs)

    def dead(view: str) -> bool:  # a view nothing reads (an unused alias the importer left)
        return not readers[view] and view not in outputs and not viewed.get(view)
    fused = 0
    for index, producer, follower, output, activation in _pairs(steps, ACTIVATIONS):
        args, follow = dict(producer.args), dict(follower.args)
        written, read, target = args.get(output), follow.get(activation.source), \
            follow.get(activation.target)
        names = {activation.source, activation.target, *(name for name, _ in activation.fixed)}
        if activation.parameter:
            names.add(activation.parameter)
        if not (isinstance(written, Ref) and isinstance(read, Ref) and isinstance(target, Ref)
                and set(follow) == names
                and all(follow[name] == value for name, value in activation.fixed)):
            continue
        through = read.value != written.value  # read through a view of the output
        if through and views.get(read.value) != written.value:
            continue
        others = [view for view in viewed.get(written.value, ()) if view != read.value]
        if (written.value in outputs or read.value in outputs or written.value in views
                or not all(dead(view) for view in others) or viewed.get(read.value)
                or readers[written.value] != (1 if through else 2)  # written, [read]
                or (through and readers[read.value] != 1)
                or not _same_kind(graph, written.value, target.value)
                or not _same_kind(graph, read.value, target.value)):
            continue  # someone else sees the producer's output
        for view in [*others, *([read.value] if through else [])]:
            del views[view]  # (nothing reads them: the producer's output is gone)
        viewed.pop(written.value, None)
        args[output] = target
        steps[index] = Step(producer.op, tuple(args.items()), producer.node)
        kept = tuple((name, arg) for name, arg in follower.args
                     if name not in (activation.source, activation.target))
        if activation.in_place is None:
            step = Step(activation.op, ((activation.source, target), *kept,
                                        (activation.target, target)), follower.node)
        else:
            step = Step(activation.in_place, ((activation.argument, target), *kept),
                        follower.node)
        steps[index + 1] = step
        fused += 1
    return fused


def _same_kind(graph: Any, name: str, other: str) -> bool:
    first, second = graph.value(name), graph.value(other)
    return first.dtype == second.dtype and tuple(first.shape) == tuple(second.shape)


def fused_steps(steps: Sequence[Step]) -> dict[int, tuple[str, float]]:
    """Step index -> (epilogue, its parameter) its kernel applies, for each pair the engine
    fuses (the in-place activation at index + 1 then runs inside it)."""
    fused: dict[int, tuple[str, float]] = {}
    for index, producer, follower, output, activation in _pairs(steps, IN_PLACE):
        op = REGISTRY.get(producer.op)
        if op is None or activation.epilogue not in op.epilogues:
            continue
        args, follow = dict(producer.args), dict(follower.args)
        target = args.get(output)
        if target is None or follow.get(activation.argument) != target:
            continue
        if activation.in_place is None and follow.get(activation.target) != target:
            continue  # (an out-of-place step that is not in place)
        if any(follow.get(name) != value for name, value in activation.fixed):
            continue
        parameter = follow.get(activation.parameter) if activation.parameter else None
        if activation.parameter and not isinstance(parameter, Scalar):
            continue
        fused[index] = (activation.epilogue, float(parameter.value) if parameter else 0.0)
    return fused
