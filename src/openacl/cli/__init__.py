"""The ``openacl`` command (and ``atc``): one module per tool, assembled by ``main``."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["STATUS_BROKEN_PIPE", "run_handler"]

STATUS_BROKEN_PIPE = 1  # the reader of our output went away (`openacl ... | head`)


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
