"""Profiling a loaded model: per-operator time, call counts and shares, memory, a trace.

    profile = profile_engine(engine, feeds, runs=10)
    print(profile.table())                       # the terminal summary
    profile.write_chrome_trace("trace.json")     # opens in Perfetto / chrome://tracing

The engine reports each step's start and end (``Engine.run_profiled``); this module owns the
policy: warm-up runs that are not recorded, aggregation by aclnn operator or by graph node,
shares of the total, and the Chrome trace (one process per device, one lane per stream, or
one "host" lane when the CPU backend runs the kernels on the calling thread). Memory is
static (the plan fixes it at load): weights, activation arena and workspace, plus the
process's peak resident set as the operating system reports it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.model.engine import Engine
from openacl.model.ir import Graph
from openacl.runtime.stream import resolve_stream

if TYPE_CHECKING:
    from openacl.model.staged import StagedModel

__all__ = ["Entry", "Profile", "StepRecord", "load_feeds", "peak_rss_bytes", "profile_engine",
           "profile_staged", "synthetic_feeds"]

MIB = 1 << 20
HOST_SUFFIX = " (host)"  # a host node's op name in the records: "If (host)", "Loop (host)"


@dataclass(frozen=True)
class StepRecord:
    """One executed step: which run, which step, its node and aclnn operator, its time."""

    run: int
    step: int
    node: str
    op: str
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Entry:
    """Aggregated time of one operator (or node) over the recorded runs."""

    name: str
    calls: int  # executions per run
    total_ns: int  # over all recorded runs
    share: float  # of the summed step time

    def mean_us(self, runs: int) -> float:
        """Time per run, in microseconds."""
        return self.total_ns / runs / 1e3


@dataclass
class Profile:
    """What ``profile_engine`` measured."""

    model: str
    runs: int
    lane: str  # "host" or the stream's name
    records: list[StepRecord] = field(default_factory=list)
    run_ns: list[int] = field(default_factory=list)  # wall time of each recorded run
    weights_bytes: int = 0
    arena_bytes: int = 0
    workspace_bytes: int = 0
    peak_rss_bytes: int | None = None

    @property
    def device_bytes(self) -> int:
        """Device memory the loaded model holds: its peak, as nothing is allocated later."""
        return self.weights_bytes + self.arena_bytes + self.workspace_bytes

    def summary(self, by: str = "op") -> list[Entry]:
        """Entries by aclnn operator (``by="op"``) or graph node (``"node"``), slowest first."""
        if by not in ("op", "node"):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'by' = {by!r} is invalid: use 'op' or 'node'")
        totals: dict[str, list[int]] = {}
        for record in self.records:
            key = record.op if by == "op" else record.node or f"step {record.step}"
            entry = totals.setdefault(key, [0, 0])
            entry[0] += 1
            entry[1] += record.duration_ns
        summed = sum(total for _, total in totals.values()) or 1
        entries = [Entry(name, count // max(self.runs, 1), total, total / summed)
                   for name, (count, total) in totals.items()]
        return sorted(entries, key=lambda entry: entry.total_ns, reverse=True)

    def table(self, by: str = "op", top: int | None = 20) -> str:
        """The terminal summary: a header, the slowest ``top`` entries, the memory."""
        entries = self.summary(by)
        median = float(np.median(self.run_ns)) / 1e6 if self.run_ns else 0.0
        steps_ms = sum(entry.total_ns for entry in entries) / max(self.runs, 1) / 1e6
        lines = [f"model {self.model!r}: {self.runs} run(s), median {median:.3f} ms per run, "
                 f"steps {steps_ms:.3f} ms per run (lane: {self.lane})",
                 f"{'aclnn operator' if by == 'op' else 'node':<40} {'calls':>6} "
                 f"{'ms/run':>9} {'share':>7}"]
        shown = entries if top is None else entries[:top]
        for entry in shown:
            lines.append(f"{entry.name[:40]:<40} {entry.calls:>6} "
                         f"{entry.mean_us(self.runs) / 1e3:>9.3f} {entry.share:>7.1%}")
        if len(shown) < len(entries):
            rest = entries[len(shown):]
            share = sum(entry.share for entry in rest)
            total = sum(entry.total_ns for entry in rest) / max(self.runs, 1) / 1e6
            lines.append(f"{f'({len(rest)} more)':<40} {'':>6} {total:>9.3f} {share:>7.1%}")
        rss = (f", peak RSS {self.peak_rss_bytes / MIB:.1f} MB"
               if self.peak_rss_bytes is not None else "")
        lines.append(f"memory: weights {self.weights_bytes / MIB:.2f} MB, arena "
                     f"{self.arena_bytes / MIB:.2f} MB, workspace "
                     f"{self.workspace_bytes / MIB:.2f} MB (device peak "
                     f"{self.device_bytes / MIB:.2f} MB){rss}")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The records as Chrome trace events (microseconds from the first step)."""
        origin = min((record.start_ns for record in self.records), default=0)
        events: list[dict[str, Any]] = [
            {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "device 0"}},
            {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": self.lane}},
        ]
        for record in self.records:
            events.append({"ph": "X", "pid": 0, "tid": 0, "cat": record.op,
                           "name": record.op if record.op.endswith(HOST_SUFFIX)
                           else f"aclnn{record.op}",
                           "ts": (record.start_ns - origin) / 1e3,
                           "dur": record.duration_ns / 1e3,
                           "args": {"node": record.node, "step": record.step,
                                    "run": record.run}})
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"model": self.model, "runs": self.runs,
                              "device_bytes": self.device_bytes}}

    def write_chrome_trace(self, path: str | os.PathLike) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.chrome_trace(), handle)


def profile_engine(engine: Engine, feeds: dict[str, np.ndarray], runs: int = 10,
                   warmup: int = 1, stream: Any = None,
                   on_run: Callable[[], Any] | None = None) -> Profile:
    """Run ``engine`` ``warmup`` times unrecorded, then ``runs`` times recording every step;
    ``on_run()`` is called after each run, warm-up ones too (a progress bar's update)."""
    _check_counts(runs, warmup)
    for _ in range(warmup):
        engine.run(feeds, stream)
        if on_run is not None:
            on_run()
    if engine.runs_here(stream):
        lane = "host (synchronous run)"
    else:
        target = resolve_stream(stream)
        lane = "default stream" if target.is_default else f"stream {target.handle:#x}"
    profile = Profile(engine.graph.name, runs, lane, weights_bytes=engine.weights_bytes,
                      arena_bytes=engine.plan.arena_bytes,
                      workspace_bytes=engine.workspace_bytes)
    steps = engine.lowered.steps
    for run in range(runs):
        def record(index: int, start: int, end: int, run: int = run) -> None:
            step = steps[index]
            profile.records.append(StepRecord(run, index, step.node, step.op, start, end))

        started = time.perf_counter_ns()
        engine.run_profiled(feeds, record, stream)
        profile.run_ns.append(time.perf_counter_ns() - started)
        if on_run is not None:
            on_run()
    profile.peak_rss_bytes = peak_rss_bytes()
    return profile


def profile_staged(staged: StagedModel, feeds: dict[str, np.ndarray], runs: int = 10,
                   warmup: int = 1, on_run: Callable[[], Any] | None = None) -> Profile:
    """``profile_engine`` for a model that runs in stages (control flow, data-dependent
    shapes): every stage engine's steps and every host node between them (op
    ``"<OpType> (host)"``), numbered in the order they ran; memory is the sum over the
    engines the runs used."""
    _check_counts(runs, warmup)
    for _ in range(warmup):
        staged.run(feeds)
        if on_run is not None:
            on_run()
    lane = "host (synchronous run)" if Engine.runs_here(None) else "default stream"
    profile = Profile(staged.name, runs, lane)
    engines: dict[int, Engine] = {}
    for run in range(runs):
        def record(source: Any, index: int, start: int, end: int, run: int = run,
                   first: int = len(profile.records)) -> None:
            if isinstance(source, Engine):
                engines[id(source)] = source
                step = source.lowered.steps[index]
                node, op = step.node, step.op
            else:  # a host node
                node, op = source.node.name, f"{source.node.op_type}{HOST_SUFFIX}"
            order = len(profile.records) - first  # this run's steps and host nodes so far
            profile.records.append(StepRecord(run, order, node, op, start, end))

        started = time.perf_counter_ns()
        staged.run_profiled(feeds, record)
        profile.run_ns.append(time.perf_counter_ns() - started)
        if on_run is not None:
            on_run()
    for engine in engines.values():
        profile.weights_bytes += engine.weights_bytes
        profile.arena_bytes += engine.plan.arena_bytes
        profile.workspace_bytes += engine.workspace_bytes
    profile.peak_rss_bytes = peak_rss_bytes()
    return profile


def _check_counts(runs: Any, warmup: Any) -> None:
    for argument, value, least in (("runs", runs, 1), ("warmup", warmup, 0)):
        if type(value) is not int or value < least:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument {argument!r} = {value!r} is invalid: an int >= {least}")


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size, or None where the OS does not say."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


InputKinds = Mapping[str, tuple[np.dtype, Sequence[int]]]  # name -> (dtype, shape)


def synthetic_feeds(inputs: Graph | InputKinds, seed: int = 0,
                    shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """Inputs for a timing run: standard normal floats, ones for integers (valid token ids,
    masks and type ids alike), True for booleans; at the shapes of ``inputs`` (a graph, or
    name -> (dtype, shape)), or ``shapes`` where given (another gear of a dynamic-batch
    model)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (dtype, declared) in _input_kinds(inputs).items():
        shape = tuple((shapes or {}).get(name, declared))
        if dtype.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[name] = np.ones(shape, dtype)
    return feeds


def load_feeds(pairs: Sequence[str], inputs: Graph | InputKinds,
               shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """``name=path.npy`` pairs as feeds, the others synthetic (at ``shapes`` where given);
    errors name the pair."""
    feeds = synthetic_feeds(inputs, shapes=shapes)
    for pair in pairs:
        name, equals, path = pair.partition("=")
        if not equals or name not in feeds:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'input' = {pair!r} is invalid: give name=file.npy with a "
                           f"name among {list(feeds)}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'input' = {pair!r}: cannot read {path!r}: {exc}") from exc
    return feeds


def _input_kinds(inputs: Graph | InputKinds) -> dict[str, tuple[np.dtype, tuple]]:
    if isinstance(inputs, Graph):
        return {name: (inputs.value(name).dtype, tuple(inputs.value(name).shape))
                for name in inputs.inputs}
    return {name: (np.dtype(dtype), tuple(shape)) for name, (dtype, shape) in inputs.items()}
