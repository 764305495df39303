"""``openacl sanitize``: run a program under the runtime's sanitizer, like msSanitizer.

Examples::

    openacl sanitize -- python app.py ARGS                 # memcheck (the default tool)
    openacl sanitize --tool racecheck -- python app.py
    openacl sanitize --tool memcheck --leak-check yes --log-file report.txt -- app.py

The program runs in a child process with ``OPENACL_SANITIZE=<tool>[,leak-check]`` and
``OPENACL_SANITIZE_OUTPUT=<a temporary directory>`` set: the child's ``openacl.init`` starts
the sanitizer (``runtime/sanitizer.py``) and its ``finalize`` (or exit) writes the findings
there as JSON lines, one file per process (a ``run.sh`` that starts several is covered).
This process prints them msSanitizer-style (``====== ERROR: ...``) at ``--log-level`` and
above, to stderr or ``--log-file``, then exits with the program's status when it failed,
else 1 when anything was reported, else 0 (2: unusable arguments).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

from openacl.cli import exit_status, program_command
from openacl.cli.convert import STATUS_BAD_INPUT

__all__ = ["STATUS_FINDINGS", "register"]

STATUS_FINDINGS = 1  # exit status when the program succeeded but findings were reported
HELP_WIDTH = 88
LOG_LEVELS = ("info", "warn", "error")  # msSanitizer's --log-level values
DEFAULT_LOG_LEVEL = "warn"  # msSanitizer's default


def _error(message: str) -> int:
    print(f"openacl sanitize: {message}", file=sys.stderr)
    return STATUS_BAD_INPUT




def _report_text(findings: list[dict], sessions: list[dict], tool: str) -> str:
    from openacl.runtime.sanitizer import format_report

    processes = len(sessions)
    head = (f"====== openacl sanitize: tool {tool}, {processes} process(es) checked"
            if processes else "====== openacl sanitize: no process initialized openacl "
                              "(nothing was checked)")
    dropped = sum(session.get("dropped", 0) for session in sessions)
    tail = [f"====== ({dropped} more finding(s) not kept)"] if dropped else []
    return "\n".join([head, format_report(findings), *tail])


def _cmd_sanitize(args: argparse.Namespace) -> int:
    from openacl.runtime import sanitizer

    argv = list(args.program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        return _error("no program after '--': use openacl sanitize [options] -- python "
                      "app.py ARGS")
    options = sanitizer.Options(frozenset({args.tool}), args.leak_check == "yes")
    command = program_command(argv)
    with tempfile.TemporaryDirectory(prefix="openacl-sanitize-") as output:
        environ = dict(os.environ, **{sanitizer.ENV_VAR: sanitizer.spec_string(options),
                                      sanitizer.OUTPUT_ENV_VAR: output})
        try:
            child = subprocess.run(command, env=environ, check=False)
        except OSError as exc:
            return _error(f"cannot run {command[0]!r}: {exc}")
        try:
            sessions, found = sanitizer.read_records(output)
        except (OSError, ValueError) as exc:
            return _error(f"cannot read the findings: {exc}")
    threshold = LOG_LEVELS.index(args.log_level)
    shown = [finding for finding in found
             if LOG_LEVELS.index(finding["severity"]) >= threshold]
    text = _report_text(shown, sessions, args.tool)
    if args.log_file:
        try:
            with open(args.log_file, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            return _error(f"argument '--log-file' = '{args.log_file}' cannot be written: "
                          f"{exc}")
    else:
        print(text, file=sys.stderr)
    status = exit_status(child.returncode)
    if status:
        print(f"openacl sanitize: the program exited with status {status}", file=sys.stderr)
        return status
    return STATUS_FINDINGS if shown else 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``sanitize`` to the ``openacl`` command's subcommands."""
    from openacl.runtime.sanitizer import DEFAULT_TOOL, TOOLS

    description = "\n\n".join(textwrap.fill(text, HELP_WIDTH) for text in (
        "Run the program with the runtime's sanitizer on (environment variable "
        "OPENACL_SANITIZE=<tool>[,leak-check]) and print what it found, msSanitizer-style. "
        "A PROGRAM ending in .py runs with this Python.",
        "memcheck: illegal reads and writes (kernel global_buffer views, copies, fills), "
        "multi-core corruption (two blocks of a launch writing the same bytes), illegal and "
        "double frees, host access to device memory (ptr_to_numpy), memcpy kinds the "
        "pointers contradict; --leak-check yes adds memory never freed. racecheck: "
        "accesses from two streams (or a stream and the host), one a write, with no event "
        "or synchronize between them. initcheck: reads of device memory nothing wrote. "
        "synccheck: streams destroyed with queued work, waits on never-recorded events.",
        "Exit status: the program's when it failed, else 1 when anything was reported "
        "(at --log-level and above), else 0; 2 on unusable arguments."))
    sanitize = commands.add_parser(
        "sanitize", help="run a program under the sanitizer (msSanitizer's tools)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="openacl sanitize [--tool TOOL] [--leak-check yes|no] [--log-file FILE] "
              "[--log-level LEVEL] -- PROGRAM [ARGS...]",
        description=description)
    sanitize.add_argument("-t", "--tool", choices=TOOLS, default=DEFAULT_TOOL,
                          help=f"the check to run (default {DEFAULT_TOOL})")
    sanitize.add_argument("--leak-check", choices=("yes", "no"), default="no",
                          help="memcheck: report memory never freed (default no)")
    sanitize.add_argument("--log-file", metavar="FILE",
                          help="write the report to FILE instead of stderr")
    sanitize.add_argument("--log-level", choices=LOG_LEVELS, default=DEFAULT_LOG_LEVEL,
                          help=f"lowest severity reported (default {DEFAULT_LOG_LEVEL})")
    sanitize.add_argument("program", nargs=argparse.REMAINDER,
                          help="-- PROGRAM [ARGS...]")
    sanitize.set_defaults(handler=_cmd_sanitize)
