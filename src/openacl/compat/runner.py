"""Run an unchanged pyACL program on OpenACL: ``import acl`` resolves to ``openacl.compat.acl``.

``python -m openacl.compat SCRIPT.py ARGS...`` and ``openacl run-pyacl SCRIPT.py ARGS...`` run
the script as Python would (``__name__ == "__main__"``, ``sys.argv == [SCRIPT.py, ARGS...]``,
the script's folder first on ``sys.path`` so its own ``constant.py`` imports) and exit with
its exit code.

Design note (invariants)
------------------------
* The alias exists only while ``run_script`` runs: a meta-path finder placed first on
  ``sys.meta_path`` maps ``acl`` and ``acl.<sub>`` to ``openacl.compat.acl[.<sub>]`` (the same
  module objects, so ``acl.rt is openacl.compat.acl.rt``). Nothing is installed as a
  top-level ``acl`` otherwise; a machine with real CANN keeps its own.
* On the way out the finder is removed and ``sys.modules``, ``sys.argv`` and ``sys.path`` are
  put back, so an in-process run leaves the interpreter as it found it. The script's
  objects are collected before that, so teardown in ``__del__`` (acllite's habit) still finds
  ``acl``.
* ``acl.<sub>`` that does not exist (``acl.mdl`` for now) is a plain ``ModuleNotFoundError``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

ALIAS = "acl"  # the module name pyACL programs import
TARGET = "openacl.compat.acl"  # what it resolves to
USAGE = "usage: python -m openacl.compat SCRIPT.py [ARGS...]"
EXIT_USAGE = 2  # exit status for a bad command line or a missing script, as python uses


class _AliasLoader(importlib.abc.Loader):
    """Hands out an already imported module under another name."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the alias's spec; keep the real one


class AclAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``acl`` and ``acl.<sub>`` to ``openacl.compat.acl`` and its submodules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real_name = TARGET + fullname[len(ALIAS):]
        try:
            module = importlib.import_module(real_name)
        except ModuleNotFoundError as exc:
            if exc.name == real_name:
                return None  # no such submodule: the usual ModuleNotFoundError for `fullname`
            raise
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module),
                                               is_package=hasattr(module, "__path__"))


def exit_code(code: Any) -> int:
    """The process exit status for ``SystemExit(code)``, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _aliased(name: str) -> bool:
    return name == ALIAS or name.startswith(ALIAS + ".")


def run_script(script: str | os.PathLike, argv: Sequence[str] = ()) -> int:
    """Run ``script`` as ``__main__`` with ``import acl`` resolved to OpenACL.

    Args:
        script: the pyACL program's path.
        argv: its arguments (``sys.argv[1:]`` as the program sees them).

    Returns:
        The program's exit code (0 when it ends normally, the ``sys.exit`` value otherwise).
        An uncaught exception propagates, as it would out of the program.
    """
    path = os.fspath(script)
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_modules = {name: module for name, module in sys.modules.items() if _aliased(name)}
    for name in saved_modules:  # a real `acl` imported before must not shadow ours
        del sys.modules[name]
    finder = AclAliasFinder()
    sys.meta_path.insert(0, finder)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    finally:
        gc.collect()  # the script's objects (and their __del__ teardown) go while `acl` resolves
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _aliased(name)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m openacl.compat SCRIPT.py ARGS...``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return EXIT_USAGE if not args else 0
    if not os.path.isfile(args[0]):
        print(f"openacl.compat: can't open file '{args[0]}': no such file", file=sys.stderr)
        return EXIT_USAGE
    return run_script(args[0], args[1:])


def _cmd_run_pyacl(args: argparse.Namespace) -> int:
    return main([args.script, *args.args])


def register(commands: Any) -> None:
    """Add ``run-pyacl`` to the ``openacl`` command's subparsers."""
    run = commands.add_parser("run-pyacl", help="run an unchanged pyACL program (import acl)",
                              description=USAGE.replace("python -m openacl.compat",
                                                        "openacl run-pyacl"))
    run.add_argument("script", help="the pyACL program")
    run.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    run.set_defaults(handler=_cmd_run_pyacl)
