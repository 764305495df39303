"""Custom operator packages: plain Python modules that register operators when imported,
found by path, by entry point, or in a CANN-style vendors directory.

* ``load_package(path)`` imports a module file or a package directory (one with
  ``__init__.py``) by path, under a private module name, and returns the operator types it
  registered.
* ``load_entry_points(group="openacl.custom_ops")`` imports every installed distribution's
  entry point of that group (how a pip-installed op package announces itself).
* ``load_vendors(root=None)`` loads every package under ``<root>/vendors/<name>/`` (CANN
  installs custom op packages into ``$ASCEND_CUSTOM_OPP_PATH`` / ``opp/vendors``); ``root``
  defaults to ``$OPENACL_CUSTOM_OPP_PATH``, then ``$ASCEND_CUSTOM_OPP_PATH`` (each may list
  several directories separated by ``:``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

from openacl.errors import ACL_ERROR_INVALID_FILE, ACL_ERROR_OP_LOAD_FAILED, AclError
from openacl.ops import registry

ENTRY_POINT_GROUP = "openacl.custom_ops"
PATH_VARIABLES = ("OPENACL_CUSTOM_OPP_PATH", "ASCEND_CUSTOM_OPP_PATH")


def _module_name(path: Path) -> str:
    return "openacl_custom_" + "_".join(p for p in path.resolve().parts[-3:] if p.isidentifier()
                                        or p.replace(".", "_").isidentifier()).replace(".", "_")


def load_package(path: str | os.PathLike) -> list[str]:
    """Import a custom op module (``ops.py``) or package directory; returns new op types."""
    target = Path(path)
    init = target / "__init__.py" if target.is_dir() else target
    if not init.is_file():
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"argument 'path' = '{path}' is neither a .py file nor a package "
                       f"directory with __init__.py")
    name = _module_name(target)
    before = set(registry.REGISTRY)
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(target)] if target.is_dir() else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except AclError:
        sys.modules.pop(name, None)
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        raise AclError(ACL_ERROR_OP_LOAD_FAILED,
                       f"custom op package '{path}' failed to import: "
                       f"{type(exc).__name__}: {exc}") from exc
    return sorted(set(registry.REGISTRY) - before)


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Import every entry point of ``group``; returns the op types they registered."""
    before = set(registry.REGISTRY)
    for entry in importlib.metadata.entry_points(group=group):
        try:
            entry.load()
        except Exception as exc:
            raise AclError(ACL_ERROR_OP_LOAD_FAILED,
                           f"custom op entry point '{entry.name}' ({entry.value}) failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    return sorted(set(registry.REGISTRY) - before)


def load_vendors(root: str | os.PathLike | None = None) -> list[str]:
    """Load every package under ``<root>/vendors/*``; returns the op types registered."""
    roots = [Path(root)] if root is not None else [
        Path(p) for var in PATH_VARIABLES for p in os.environ.get(var, "").split(os.pathsep)
        if p]
    loaded: list[str] = []
    for base in roots:
        vendors = base / "vendors" if (base / "vendors").is_dir() else base
        if not vendors.is_dir():
            continue
        for package in sorted(vendors.iterdir()):
            if (package / "__init__.py").is_file():
                loaded += load_package(package)
    return loaded
