"""``openacl profile``: a whole application like msprof, or one model's operators.

Examples::

    openacl profile -- python app.py ARGS        # any program that uses openacl (or `acl`)
    openacl profile --output prof -- app.py      # app.py: run with this interpreter
    openacl profile --report prof/PROF_...       # the tables and trace of a profile directory
    openacl profile model.om --runs 20 --trace trace.json

The application form runs the program in a child process with ``OPENACL_PROFILE`` set to a
fresh ``<output>/PROF_<YYYYmmddHHMMSS>_<pid>`` directory: the child's ``openacl.init``
starts the runtime's profiler (``runtime/profiler.py``) and its ``finalize`` (or exit)
writes the records there. This process then prints msprof-like summaries (top operators
and kernels, aclop and model executions, per-stream busy time, memcpy bandwidth, runtime API
calls), writes them to ``summary.txt`` and a Chrome / Perfetto trace (``trace.json``, or
``--trace``) next to the records, and exits with the program's status.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from openacl.cli import exit_status, program_command
from openacl.cli.convert import STATUS_BAD_INPUT, parse_input_shapes

__all__ = ["Report", "load_report", "register", "write_chrome_trace"]

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
BYTES_PER_GB = 1e9  # bandwidth in GB/s, decimal as msprof reports it
DEFAULT_OUTPUT = "openacl_profile"  # --output's default, under the current directory
OP_KINDS = ("aclnn", "kernel", "host_func")  # leaf compute tasks: the top-operators table
COPY_KINDS = ("memcpy", "memset")
NAME_WIDTH = 36  # columns of a name in the tables
STREAM_TID_BASE = 1_000_000  # trace lanes of streams are numbered from here (threads below)
HELP_WIDTH = 78  # columns of the help text's paragraphs


# -- reading records -------------------------------------------------------------------------
@dataclass
class Report:
    """The records of one or more profiled processes (``records-*.json``), merged."""

    files: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)  # one records file each

    @property
    def duration_ns(self) -> int:
        return max((run["duration_ns"] for run in self.runs), default=0)

    def tasks(self, kinds: Iterable[str] | None = None) -> list[tuple[dict, list]]:
        wanted = None if kinds is None else set(kinds)
        return [(run, task) for run in self.runs for task in run["tasks"]
                if wanted is None or task[0] in wanted]

    def stream_label(self, run: dict[str, Any], stream: Any) -> str:
        prefix = f"pid {run['pid']} " if len(self.runs) > 1 else ""
        if stream is None:
            return f"{prefix}host (synchronous)"
        info = run["streams"].get(str(stream), {})
        default = " default" if info.get("default") else ""
        return f"{prefix}device {info.get('device', '?')}{default} stream {int(stream):#x}"


def load_report(directory: str | os.PathLike) -> Report:
    """Read every records file in ``directory``.

    Raises:
        OSError: the directory cannot be read; ValueError: a records file is not valid.
    """
    from openacl.runtime.profiler import RECORDS_VERSION, is_records_file

    path = os.fspath(directory)
    report = Report()
    for name in sorted(os.listdir(path)):
        if not is_records_file(name):
            continue
        file = os.path.join(path, name)
        with open(file, encoding="utf-8") as handle:
            try:
                run = json.load(handle)
            except json.JSONDecodeError as exc:
                raise ValueError(f"records file '{file}' is not valid JSON: {exc}") from None
        if not isinstance(run, dict) or run.get("version") != RECORDS_VERSION:
            raise ValueError(f"records file '{file}' is not openacl profiler records version "
                             f"{RECORDS_VERSION}")
        report.files.append(file)
        report.runs.append(run)
    return report


# -- the summary tables ----------------------------------------------------------------------
def _stats(durations: list[int]) -> tuple[int, int, float, int, int]:
    """(calls, total, mean, min, max) of durations in ns."""
    total = sum(durations)
    return len(durations), total, total / len(durations), min(durations), max(durations)


def _name(text: str) -> str:
    return text if len(text) <= NAME_WIDTH else text[:NAME_WIDTH - 1] + "~"


def _grouped(items: Iterable[tuple[tuple, int]]) -> dict[tuple, list[int]]:
    groups: dict[tuple, list[int]] = {}
    for key, duration in items:
        groups.setdefault(key, []).append(duration)
    return groups


def _timing_table(title: str, groups: dict[tuple, list[int]], top: int | None) -> list[str]:
    """Rows of kind, name, calls, total/avg/min/max time and share, slowest first."""
    rows = sorted(((key, _stats(durations)) for key, durations in groups.items()),
                  key=lambda row: row[1][1], reverse=True)
    summed = sum(stats[1] for _, stats in rows) or 1
    lines = [title, f"  {'kind':<9} {'name':<{NAME_WIDTH}} {'calls':>6} {'total ms':>10} "
                    f"{'avg us':>10} {'min us':>10} {'max us':>10} {'share':>7}"]
    shown = rows if top is None else rows[:top]
    for (kind, name), (calls, total, mean, low, high) in shown:
        lines.append(f"  {kind:<9} {_name(name):<{NAME_WIDTH}} {calls:>6} "
                     f"{total / NS_PER_MS:>10.3f} {mean / NS_PER_US:>10.1f} "
                     f"{low / NS_PER_US:>10.1f} {high / NS_PER_US:>10.1f} "
                     f"{total / summed:>7.1%}")
    if len(shown) < len(rows):
        rest = rows[len(shown):]
        total = sum(stats[1] for _, stats in rest)
        lines.append(f"  {'':<9} {f'({len(rest)} more)':<{NAME_WIDTH}} {'':>6} "
                     f"{total / NS_PER_MS:>10.3f}")
    if not rows:
        lines.append("  (none)")
    return lines


def summary(report: Report, top: int | None = 20) -> str:
    """The msprof-like tables of ``report`` as text."""
    lines: list[str] = []
    for run in report.runs:
        argv = " ".join(run.get("argv", [])) or "?"
        lines.append(f"process {run['pid']} ({argv}): {run['duration_ns'] / NS_PER_MS:.3f} ms "
                     f"profiled, {len(run['api'])} API calls, {len(run['tasks'])} tasks")
        lines.extend(f"  note: {note}" for note in run.get("notes", []))
    ops = _grouped(((task[0], task[1]), task[5] - task[4])
                   for _, task in report.tasks(OP_KINDS))
    lines += ["", *_timing_table("Top operators and kernels (time on the stream):", ops, top)]
    ranges = _grouped(((span[0], span[1]), span[4] - span[3])
                      for run in report.runs for span in run["ranges"])
    if ranges:
        lines += ["", *_timing_table("aclop and model executions (first task to last):",
                                     ranges, top)]
    lines += ["", *_stream_table(report), "", *_copy_table(report), "",
              *_api_table(report, top)]
    return "\n".join(lines)


def _stream_table(report: Report) -> list[str]:
    """Busy time per stream (tasks run back to back on it) and its share of the profile."""
    busy: dict[str, list[int]] = {}
    for run, task in report.tasks():
        entry = busy.setdefault(report.stream_label(run, task[2]), [0, 0])
        entry[0] += 1
        entry[1] += task[5] - task[4]
    span = report.duration_ns or 1
    lines = ["Streams:", f"  {'stream':<44} {'tasks':>7} {'busy ms':>10} {'utilisation':>12}"]
    for label, (count, total) in sorted(busy.items()):
        lines.append(f"  {label:<44} {count:>7} {total / NS_PER_MS:>10.3f} "
                     f"{total / span:>12.1%}")
    if not busy:
        lines.append("  (no stream work)")
    return lines


def _copy_table(report: Report) -> list[str]:
    """Copies and fills per direction: calls, bytes, time and bandwidth."""
    groups: dict[tuple[str, str], list[int]] = {}
    for _, task in report.tasks(COPY_KINDS):
        entry = groups.setdefault((task[0], task[1]), [0, 0, 0])
        entry[0] += 1
        entry[1] += task[6]
        entry[2] += task[5] - task[4]
    lines = ["Memory copies and fills:", f"  {'kind':<8} {'direction':<10} {'calls':>6} "
                                         f"{'bytes':>14} {'total ms':>10} {'GB/s':>9}"]
    for (kind, direction), (count, nbytes, total) in sorted(groups.items()):
        rate = nbytes / BYTES_PER_GB / (total / NS_PER_S) if total else 0.0
        lines.append(f"  {kind:<8} {direction:<10} {count:>6} {nbytes:>14} "
                     f"{total / NS_PER_MS:>10.3f} {rate:>9.2f}")
    if not groups:
        lines.append("  (none)")
    return lines


def _api_table(report: Report, top: int | None) -> list[str]:
    groups = _grouped((call[0], call[3] - call[2]) for run in report.runs
                      for call in run["api"])
    rows = sorted(((name, _stats(durations)) for name, durations in groups.items()),
                  key=lambda row: row[1][1], reverse=True)
    lines = ["Runtime API calls (host):", f"  {'API':<{NAME_WIDTH}} {'calls':>6} "
                                          f"{'total ms':>10} {'avg us':>10} {'max us':>10}"]
    for name, (calls, total, mean, _, high) in (rows if top is None else rows[:top]):
        lines.append(f"  {_name(name):<{NAME_WIDTH}} {calls:>6} {total / NS_PER_MS:>10.3f} "
                     f"{mean / NS_PER_US:>10.1f} {high / NS_PER_US:>10.1f}")
    if top is not None and len(rows) > top:
        lines.append(f"  ({len(rows) - top} more)")
    if not rows:
        lines.append("  (none)")
    return lines


# -- the Chrome / Perfetto trace -------------------------------------------------------------
def chrome_trace(report: Report) -> dict[str, Any]:
    """Trace events: one process per profiled process, a lane per host thread and stream."""
    events: list[dict[str, Any]] = []
    for run in report.runs:
        pid = run["pid"]
        events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                       "args": {"name": f"openacl {pid}"}})
        thread_lanes = {int(ident): index + 1 for index, ident in enumerate(run["threads"])}
        for ident, name in run["threads"].items():
            events.append({"ph": "M", "pid": pid, "tid": thread_lanes[int(ident)],
                           "name": "thread_name", "args": {"name": f"thread {name}"}})
        stream_lanes = {int(handle): STREAM_TID_BASE + index
                        for index, handle in enumerate(run["streams"])}
        for handle, tid in stream_lanes.items():
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": report.stream_label(run, handle)}})
        for name, ident, start, end in run["api"]:
            events.append({"ph": "X", "pid": pid, "tid": thread_lanes.get(ident, 0),
                           "cat": "api", "name": name, "ts": start / NS_PER_US,
                           "dur": (end - start) / NS_PER_US})
        for kind, name, stream, ident, start, end, nbytes, detail, ok in run["tasks"]:
            tid = thread_lanes.get(ident, 0) if stream is None else stream_lanes[stream]
            args: dict[str, Any] = dict(detail or {})
            if kind in COPY_KINDS:
                args["bytes"] = nbytes
            if not ok:
                args["failed"] = True
            events.append({"ph": "X", "pid": pid, "tid": tid, "cat": kind,
                           "name": name if kind not in COPY_KINDS else f"{kind} {name}",
                           "ts": start / NS_PER_US, "dur": (end - start) / NS_PER_US,
                           "args": args})
        for kind, name, stream, start, end in run["ranges"]:
            events.append({"ph": "X", "pid": pid, "tid": stream_lanes[stream], "cat": kind,
                           "name": f"{kind} {name}", "ts": start / NS_PER_US,
                           "dur": (end - start) / NS_PER_US})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(report: Report, path: str | os.PathLike) -> None:
    """Write ``chrome_trace(report)`` to ``path`` (open it in https://ui.perfetto.dev)."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(chrome_trace(report), handle)


# -- the application form ----------------------------------------------------------------------
def _error(message: str) -> int:
    print(f"openacl profile: {message}", file=sys.stderr)
    return STATUS_BAD_INPUT



def _run_directory(output: str) -> str:
    """A fresh ``PROF_<stamp>_<pid>`` directory under ``output`` (msprof's naming)."""
    os.makedirs(output, exist_ok=True)
    if not os.access(output, os.W_OK | os.X_OK):
        raise PermissionError(f"argument '--output' = '{output}' is not writable")
    base = os.path.join(output, f"PROF_{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}")
    path, suffix = base, 1
    while os.path.exists(path):
        suffix += 1
        path = f"{base}_{suffix}"
    os.makedirs(path)
    return path



def _report(directory: str, trace: str | None, top: int | None) -> int:
    """Print and save the tables of ``directory``; write the trace. 0, or 2 on bad input."""
    try:
        report = load_report(directory)
    except (OSError, ValueError) as exc:
        return _error(str(exc))
    if not report.runs:
        print(f"openacl profile: no records in '{directory}' (the program never called "
              f"openacl.init / acl.init, or was killed before writing them)", file=sys.stderr)
        return 0
    text = summary(report, top)
    print(text)
    trace_path = trace or os.path.join(directory, "trace.json")
    try:
        with open(os.path.join(directory, "summary.txt"), "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        write_chrome_trace(report, trace_path)
    except OSError as exc:
        return _error(f"cannot write the summary or trace: {exc}")
    print(f"\nrecords, summary.txt: {directory}\nChrome trace: {trace_path} (open it in "
          f"https://ui.perfetto.dev)")
    return 0


def _cmd_profile_program(args: argparse.Namespace, argv: list[str]) -> int:
    from openacl.runtime.profiler import ENV_VAR

    if not argv:
        return _error("no program after '--': use openacl profile [options] -- python "
                      "app.py ARGS")
    try:
        directory = _run_directory(args.output)
    except OSError as exc:
        return _error(f"argument '--output' = '{args.output}' cannot be used: {exc}")
    environ = dict(os.environ, **{ENV_VAR: os.path.abspath(directory)})
    command = program_command(argv)
    try:
        child = subprocess.run(command, env=environ, check=False)
    except OSError as exc:
        return _error(f"cannot run {command[0]!r}: {exc}")
    status = exit_status(child.returncode)
    if status:
        print(f"openacl profile: the program exited with status {status}; what it recorded "
              f"follows", file=sys.stderr)
    reported = _report(directory, args.trace, args.top or None)
    return status or reported


# -- the model form ----------------------------------------------------------------------------
def _describe_inputs(session: Any, feeds: dict[str, Any]) -> str:
    shapes = ", ".join(f"{name} {feeds[name].dtype} {list(feeds[name].shape)}"
                       for name in session.input_names if name in feeds)
    line = f"inputs: {shapes}"
    if session.batch_sizes:
        first = feeds[session.input_names[0]]
        line += (f"\ngear: batch {first.shape[0]} (the model's batch sizes: "
                 f"{session.batch_sizes}; --input-shape or --input with another batch "
                 f"profiles it)")
    return line


def _cmd_profile_model(args: argparse.Namespace) -> int:
    try:
        shapes = parse_input_shapes(args.input_shape or "", allow_dynamic=False)
    except ValueError as exc:
        return _error(str(exc))
    import openacl
    from openacl.cli.progress import bar
    from openacl.errors import AclError
    from openacl.model.profile import load_feeds, profile_engine, profile_staged
    from openacl.model.session import InferenceSession

    started_runtime = not openacl.is_initialized()
    try:
        session = InferenceSession(args.model, shapes or None)
        try:
            feeds = load_feeds(args.input or [], session.input_kinds(shapes), shapes)
            print(_describe_inputs(session, feeds), flush=True)
            with bar(total=args.warmup + args.runs, desc="profile", unit="run") as progress:
                if session.staged is not None:  # stages: control flow, data-dependent shapes
                    profile = profile_staged(session.staged, feeds, runs=args.runs,
                                             warmup=args.warmup, on_run=progress.update)
                else:  # the gear (engine) the feeds select
                    profile = profile_engine(session._stream_engine(feeds), feeds,
                                             runs=args.runs, warmup=args.warmup,
                                             on_run=progress.update)
        finally:
            session.close()
        print(profile.table(by=args.by, top=args.top or None))
        if args.trace:
            profile.write_chrome_trace(args.trace)
            print(f"Chrome trace: {args.trace} (open it in https://ui.perfetto.dev)")
    except (AclError, OSError) as exc:
        return _error(str(exc))
    finally:
        if started_runtime and openacl.is_initialized():
            openacl.finalize()
    return 0


# -- the command line --------------------------------------------------------------------------
def _add_options(parser: argparse.ArgumentParser) -> None:
    """The options of both forms (the model form's are ignored by the application form)."""
    parser.add_argument("--output", default=DEFAULT_OUTPUT, metavar="DIR",
                        help="application form: where the PROF_* directory goes (default "
                             f"./{DEFAULT_OUTPUT})")
    parser.add_argument("--report", metavar="PROF_DIR",
                        help="print the tables of a profile directory (from an earlier run, "
                             "or one acl.json's profiler section made) and write its trace")
    parser.add_argument("--trace", metavar="FILE.json",
                        help="write the Chrome trace here (application form default: "
                             "trace.json in the PROF_* directory)")
    parser.add_argument("--top", type=int, default=20,
                        help="rows to show per table, slowest first (0: all; default 20)")
    parser.add_argument("--input-shape", metavar="SHAPES",
                        help='model form: input shapes of an ONNX model: "x:1,3,640,640"')
    parser.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                        help="model form: an input's data (repeat for several); others are "
                             "synthetic")
    parser.add_argument("--runs", type=int, default=10,
                        help="model form: recorded runs (default 10)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="model form: unrecorded runs (default 1)")
    parser.add_argument("--by", choices=("op", "node"), default="op",
                        help="model form: aggregate by aclnn operator (default) or graph node")


def _cmd_profile(args: argparse.Namespace) -> int:
    target = list(args.target)
    if target and target[0] == "--":
        return _cmd_profile_program(args, target[1:])
    if target and (os.path.basename(target[0]).startswith("python") or
                   target[0].endswith((".py", ".sh"))):  # a program given without its --
        return _error(f"{target[0]!r} looks like a program: put -- before it "
                      f"(openacl profile -- {' '.join(target)})")
    if target:  # the model form: options may follow the model, so parse them now
        model_parser = argparse.ArgumentParser(prog="openacl profile", add_help=False)
        model_parser.add_argument("model")
        _add_options(model_parser)
        try:
            args = model_parser.parse_args(target, namespace=args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else STATUS_BAD_INPUT
        return _cmd_profile_model(args)
    if args.report:
        return _report(args.report, args.trace, args.top or None)
    return _error("give a model (openacl profile model.om), a program (openacl profile -- "
                  "python app.py ARGS) or --report PROF_DIR")


def _paragraphs(*texts: str) -> str:
    """``texts`` wrapped to the help width, blank lines between (raw-description help)."""
    return "\n\n".join(textwrap.fill(text, HELP_WIDTH) for text in texts)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``profile`` to the ``openacl`` command's subcommands."""
    profile = commands.add_parser(
        "profile", help="profile an application (-- python app.py, like msprof) or a model",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="openacl profile [options] -- PROGRAM [ARGS...]\n"
              "       openacl profile MODEL [options]\n"
              "       openacl profile --report PROF_DIR",
        description=_paragraphs(
                    "Application form (after '--'): run the program with the runtime's "
                    "profiler on (environment variable OPENACL_PROFILE=<dir>), then print "
                    "the top operators and kernels, aclop and model executions, per-stream "
                    "busy time, memcpy bandwidth and runtime API calls, and write a Chrome / "
                    "Perfetto trace; exits with the program's status. A PROGRAM ending in "
                    ".py runs with this Python.",
                    "Model form: load a model (.om, or .onnx converted on the fly), run it "
                    "--warmup times unrecorded and --runs times timing every aclnn step, and "
                    "print the input shapes (and gear), the time per operator (or node) with "
                    "call counts and shares, and the memory. Inputs are synthetic (normal "
                    "floats, ones for integers) unless given with --input.",
                    "Exits 2 on unusable input."))
    _add_options(profile)
    profile.add_argument("target", nargs=argparse.REMAINDER,
                         help="MODEL [options], or -- PROGRAM [ARGS...]")
    profile.set_defaults(handler=_cmd_profile)
