"""Every import in the package goes down ../shared/DESIGN.md's layer list.

The rooms, top to bottom, are DESIGN.md's; each module may import its own room and the
rooms below it, never one above. Imports inside functions (the lazy ones) count as much as
those at the top of a module: a lazy import upwards is still a cycle between rooms, only a
later one. The gathering aliases sit in the room they gather (``openacl.rt`` and
``openacl.util`` in runtime, ``openacl.mdl`` in model, ``openacl.op`` in aclop,
``openacl.aclnn`` in ops; ``openacl.constants`` gathers the runtime's constants, so
runtime too); the package's own ``__init__`` is everyone's entry and is not
ranked. The foundation (errors, dtypes, log, _api) imports only itself, without
cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "openacl"
ROOMS = ("cli", "compat", "hccl", "model", "aclop", "custom", "ops", "tools", "tensor",
         "runtime", "backends", "foundation")  # DESIGN.md's list, top to bottom
ROOM_OF_MODULE = {"rt": "runtime", "util": "runtime", "objects": "runtime", "mdl": "model",
                  "op": "aclop", "aclnn": "ops", "errors": "foundation",
                  "constants": "runtime", "dtypes": "foundation", "log": "foundation",
                  "_api": "foundation"}
# Known upward imports (module, the room above it that it imports), each with the reason it
# is still there (remove when fixed).
KNOWN_UPWARD = {
    ("openacl.tools.datagen", "aclop"):
        "a single-op JSON case names its inputs by the op type's table (io_names)",
}


def module_name(path: Path) -> str:
    parts = ("openacl", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The openacl modules ``path`` imports, anywhere in it (``from a import b`` counts as
    ``a`` and, when ``b`` is a module, ``a.b``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return {module for module in found if module.startswith("openacl")}


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def room(module: str) -> str | None:
    """The DESIGN.md room of a module, None for the package's ``__init__``."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    return ROOM_OF_MODULE.get(parts[1], parts[1])


def graph() -> dict[str, set[str]]:
    return {name: {m for m in imports(path) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def test_every_module_has_a_room():
    unknown = sorted(name for name in MODULES if room(name) not in (None, *ROOMS))
    assert not unknown, f"modules in no DESIGN.md room: {unknown}"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """The imports of ``edges`` (module -> modules it imports) that go up a room."""
    found = []
    for name, targets in edges.items():
        if room(name) is None:
            continue
        for target in targets:
            if room(target) is None or (name, room(target)) in KNOWN_UPWARD:
                continue
            if ROOMS.index(room(target)) < ROOMS.index(room(name)):
                found.append(f"{name} ({room(name)}) imports {target} ({room(target)})")
    return sorted(found)


def test_imports_only_go_down_the_layers():
    found = upward(graph())
    assert not found, "imports up the layer list:\n" + "\n".join(found)


def test_the_known_upward_imports_are_still_real():
    edges = graph()
    stale = [pair for pair in KNOWN_UPWARD
             if not any(room(target) == pair[1] for target in edges.get(pair[0], ()))]
    assert not stale, f"fixed: remove from KNOWN_UPWARD: {stale}"


def test_the_foundation_has_no_cycle():
    edges = {name: {t for t in targets if room(t) == "foundation"}
             for name, targets in graph().items() if room(name) == "foundation"}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            pytest.fail(f"import cycle: {' -> '.join((*path[path.index(name):], name))}")
        if name not in done:
            for target in edges[name]:
                visit(target, (*path, name))
            done.add(name)

    for name in edges:
        visit(name, ())


def test_a_lazy_upward_import_is_caught():
    ops_file = PACKAGE / "ops" / "registry.py"
    planted = {"openacl.ops.registry": {"openacl.model.engine"}}
    assert upward(planted) == ["openacl.ops.registry (ops) imports openacl.model.engine (model)"]
    assert "openacl.ops.call" in imports(ops_file)  # what the checks above read is real
    tree_text = "def later():\n    from openacl.model import engine\n"
    lazy = [n for n in ast.walk(ast.parse(tree_text)) if isinstance(n, ast.ImportFrom)]
    assert lazy and lazy[0].module == "openacl.model"  # ast.walk sees a function's import
