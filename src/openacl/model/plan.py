"""The static memory plan: every intermediate value gets an offset in one arena.

Design note (invariants)
------------------------
* A value lives from the step that writes it (graph inputs: before the first step) to the
  last step that reads it (graph outputs: after the last step). A zero-copy view extends
  the life of the value it views, and gets no memory of its own.
* Two values may share arena bytes only if their lives do not overlap. Placement is greedy
  best-fit: values in decreasing size, each at the lowest ``ARENA_ALIGNMENT``-aligned offset
  that collides with no already-placed value whose life overlaps its own.
* Initializers are not in the arena (they live in the weights blob for the model's life).
* ``naive_bytes`` (every value its own buffer) is what the plan saves against.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openacl.model.ir import Lowered, Ref, RefList

ARENA_ALIGNMENT = 512  # bytes; every arena offset is a multiple of this (the allocator's unit)


def slot_bytes(nbytes: int) -> int:
    """The bytes a value of ``nbytes`` takes in an aligned allocation (at least one unit:
    an empty value still gets its own address)."""
    return -(-max(nbytes, 1) // ARENA_ALIGNMENT) * ARENA_ALIGNMENT


@dataclass
class MemoryPlan:
    """Offsets of arena values, and the arena's size."""

    offsets: dict[str, int] = field(default_factory=dict)
    arena_bytes: int = 0
    naive_bytes: int = 0


def _step_refs(step) -> tuple[list[str], list[str]]:
    """(values read, values written) by a step; outputs are its '!'-kind arguments."""
    from openacl.ops import REGISTRY

    params = {p.name: p for p in REGISTRY[step.op].params}
    reads, writes = [], []
    for name, arg in step.args:
        names = [arg.value] if isinstance(arg, Ref) else (
            list(arg.values) if isinstance(arg, RefList) else [])
        (writes if params[name].output else reads).extend(names)
        if params[name].output and any(alias == name for _, alias in REGISTRY[step.op].aliases):
            reads.extend(names)  # in-place arguments are read too
    return reads, writes


def lifetimes(lowered: Lowered) -> dict[str, tuple[int, int]]:
    """value -> (first step that needs it, last step that needs it), over arena values."""
    graph = lowered.graph
    last_step = len(lowered.steps)
    life: dict[str, list[int]] = {name: [-1, -1] for name in graph.inputs}

    def touch(name: str, index: int) -> None:
        root = lowered.views.get(name, name)
        if root in graph.initializers:
            return
        span = life.setdefault(root, [index, index])
        span[0] = min(span[0], index)
        span[1] = max(span[1], index)

    for index, step in enumerate(lowered.steps):
        reads, writes = _step_refs(step)
        for name in reads + writes:
            touch(name, index)
    for name in graph.outputs:
        touch(name, last_step)
    return {name: (start, end) for name, (start, end) in life.items()}


def plan_memory(lowered: Lowered) -> MemoryPlan:
    """Place every arena value (see the design note)."""
    graph = lowered.graph
    spans = lifetimes(lowered)
    order = sorted(spans, key=lambda n: (-graph.value(n).nbytes, n))
    placed: list[tuple[int, int, int, int]] = []  # (offset, end offset, first, last)
    plan = MemoryPlan()
    for name in order:
        size = slot_bytes(graph.value(name).nbytes)
        first, last = spans[name]
        plan.naive_bytes += size
        busy = sorted((start, stop) for start, stop, f, la in placed
                      if not (la < first or last < f))
        offset = 0
        for start, stop in busy:
            if offset + size <= start:
                break
            offset = max(offset, stop)
        placed.append((offset, offset + size, first, last))
        plan.offsets[name] = offset
        plan.arena_bytes = max(plan.arena_bytes, offset + size)
    return plan
