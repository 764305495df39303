"""The ``openacl`` command (and ``atc``): one module per tool, assembled by ``main``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["SIGNAL_STATUS_BASE", "STATUS_BROKEN_PIPE", "exit_status", "program_command",
           "run_handler"]

STATUS_BROKEN_PIPE = 1  # the reader of our output went away (`openacl ... | head`)
SIGNAL_STATUS_BASE = 128  # a child killed by signal N exits 128 + N, as a shell reports it


def program_command(argv: Sequence[str]) -> list[str]:
    """The command line of a program the tools run (profile, sanitize, launch): ``app.py
    ARGS`` runs under this Python, anything else as the command it is."""
    return [sys.executable, *argv] if argv[0].endswith(".py") else list(argv)


def exit_status(returncode: int) -> int:
    """A child's exit status as a shell gives it (killed by signal N: 128 + N)."""
    return SIGNAL_STATUS_BASE - returncode if returncode < 0 else returncode


def run_handler(args: argparse.Namespace) -> int:
    """Run a parsed command's handler; its exit status. Output piped into a reader that
    stops early (``| head``) ends the command quietly, as Python's docs advise, instead of
    a BrokenPipeError traceback."""
    try:
        return args.handler(args)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # the interpreter's final flush goes here
        os.dup2(devnull, sys.stdout.fileno())
        return STATUS_BROKEN_PIPE
