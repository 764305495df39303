"""The operator registry: one declaration per operator, from which everything is generated.

``@register("Add", "self: tensor, other: tensor, alpha: scalar, out: tensor!")`` on a
``prepare(call) -> kernel`` function declares aclnnAdd. From that single entry come the
Pythonic two-phase functions (``openacl.aclnn.add_get_workspace_size`` / ``openacl.aclnn.add``),
the C-named ones (``aclnnAddGetWorkspaceSize`` / ``aclnnAdd``), the one-shot helper
(``openacl.ops.add``) and the operator list in the docs.

In-place variants reuse the same prepare function under new argument names:
``register_inplace("InplaceAdd", "selfRef: tensor!, other: tensor, alpha: scalar", add,
self="selfRef", out="selfRef")``.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openacl.ops.call import Call, Kernel
from openacl.ops.signature import Param, parse_signature

Prepare = Callable[[Call], Kernel]


@dataclass(frozen=True)
class OpDef:
    """One aclnn operator."""

    name: str  # CANN name without the prefix: "Add", "GeluV2", "InplaceAdd"
    params: tuple[Param, ...]
    prepare: Prepare = field(compare=False)
    aliases: tuple[tuple[str, str], ...] = ()  # prepare's name -> this op's argument name
    doc: str = ""
    ir: Any = field(default=None, compare=False)  # a custom op's declaration (for aclop)
    # its kernels never raise numpy floating-point warnings (maxima, copies, gathers): a model
    # of only such steps runs without switching numpy's error state (model/engine.py)
    silent: bool = False
    # activations its kernels can apply to their output in the same pass, when the model
    # engine asks (``Views.epilogue``: a following in-place activation fused away)
    epilogues: frozenset[str] = frozenset()

    @property
    def snake_name(self) -> str:
        return snake_case(self.name)

    @property
    def c_name(self) -> str:
        return f"aclnn{self.name}"

    @property
    def outputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.output)

    @property
    def inputs(self) -> tuple[Param, ...]:
        """Arguments the caller provides (everything that is not only an output)."""
        written = {alias for _, alias in self.aliases}
        return tuple(p for p in self.params if not p.output or p.name in written)

    def bind(self, raw: dict[str, Any], infer: bool = False) -> tuple[Call, Kernel]:
        """Run phase 1: resolve ``raw`` arguments and build the kernel."""
        call = Call(self.name, self.params, raw, infer=infer, aliases=dict(self.aliases))
        kernel = self.prepare(call)
        return call, kernel


class _Registry(dict):
    """Operator name -> OpDef. The built-in families register on import, and the registry
    imports one when one of its operators is first looked up (``index``: name -> module),
    or all of them when the registry is listed whole; a model run loads only what its steps
    use. Operators registered later (custom ones) are plain entries.

    Concurrency: a family counts as loaded only once its module has finished executing. A
    lookup from another thread while it is still executing (its first operators already
    registered, the rest of the module not yet) waits in ``importlib.import_module`` on the
    module's import lock; a lookup from the importing thread itself (``_add``'s duplicate
    check) gets the partial module back at once, as Python's imports do."""

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[str, str] = {}
        self._loaded: set[str] = set()  # family modules whose import has completed

    def _import(self, module: str) -> None:
        if module in self._loaded:
            return
        imported = importlib.import_module(module)
        if not getattr(getattr(imported, "__spec__", None), "_initializing", False):
            self._loaded.add(module)

    def _load(self, name: Any) -> None:
        module = self.index.get(name) if isinstance(name, str) else None
        if module is not None:
            self._import(module)

    def load_all(self) -> None:
        for module in sorted(set(self.index.values())):
            self._import(module)

    def __getitem__(self, name: str) -> OpDef:
        self._load(name)
        return dict.__getitem__(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        self._load(name)
        return dict.get(self, name, default)

    def __contains__(self, name: object) -> bool:
        self._load(name)
        return dict.__contains__(self, name)

    def pop(self, name: str, *default: Any) -> Any:
        self._load(name)
        return dict.pop(self, name, *default)

    def _whole(method: Callable) -> Callable:  # noqa: N805 (applied in the class body)
        """``method`` of dict, after every family is imported (it lists the registry)."""
        @functools.wraps(method)
        def listing(self, *args: Any) -> Any:
            self.load_all()
            return method(self, *args)
        return listing

    __iter__ = _whole(dict.__iter__)
    __len__ = _whole(dict.__len__)
    __reversed__ = _whole(dict.__reversed__)
    __repr__ = _whole(dict.__repr__)
    __or__ = _whole(dict.__or__)
    __ror__ = _whole(dict.__ror__)
    keys = _whole(dict.keys)
    values = _whole(dict.values)
    items = _whole(dict.items)
    copy = _whole(dict.copy)
    del _whole


REGISTRY = _Registry()
FAMILY_PACKAGE = "openacl.ops"


def builtin_module(op: OpDef) -> str | None:
    """The family module (``"linalg"``) that registered built-in ``op``; None for others."""
    package, _, module = op.prepare.__module__.rpartition(".")
    return module if package == FAMILY_PACKAGE else None


@functools.cache
def snake_case(name: str) -> str:
    """CANN CamelCase -> Python: GeluV2 -> gelu_v2, MaxPool2dWithIndices ->
    max_pool2d_with_indices, SWhere -> s_where."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return text.lower()


def _add(op: OpDef) -> OpDef:
    if op.name in REGISTRY:  # (a built-in of a family not imported yet is imported here)
        raise ValueError(f"operator {op.name} is registered twice")
    REGISTRY[op.name] = op
    return op


def register(name: str, signature: str, silent: bool = False,
             epilogues: tuple[str, ...] = ()) -> Callable[[Prepare], Prepare]:
    """Declare operator ``name`` with CANN's argument list; decorates its prepare function.
    ``silent``: its kernels never raise numpy floating-point warnings (``OpDef.silent``);
    ``epilogues``: the activations its kernels apply when asked (``OpDef.epilogues``)."""
    params = parse_signature(signature)

    def decorate(prepare: Prepare) -> Prepare:
        _add(OpDef(name, params, prepare, doc=(prepare.__doc__ or "").strip(), silent=silent,
                   epilogues=frozenset(epilogues)))
        return prepare

    return decorate


def register_inplace(name: str, signature: str, prepare: Prepare, silent: bool = False,
                     **aliases: str) -> None:
    """Declare an in-place variant: ``aliases`` map prepare's argument names to this op's."""
    _add(OpDef(name, parse_signature(signature), prepare, tuple(aliases.items()),
               doc=(prepare.__doc__ or "").strip(), silent=silent))


def get(name: str) -> OpDef:
    return REGISTRY[name]


def by_snake_name(name: str) -> OpDef | None:
    """The operator whose Python name is ``name`` (``add_custom`` -> AddCustom), if any;
    imports only the family of a built-in one."""
    builtin = _builtin_snake_names().get(name)
    if builtin is not None:
        return REGISTRY.get(builtin)
    # a copy taken in one step: another thread's lookup may import a family meanwhile
    return next((op for op in tuple(dict.values(REGISTRY)) if op.snake_name == name), None)


def _builtin_snake_names() -> dict[str, str]:
    """Python name -> built-in operator name, from the index (no family imported)."""
    global _BUILTIN_SNAKE
    names = _BUILTIN_SNAKE
    if len(names) != len(REGISTRY.index):  # built whole, then published in one step
        names = {snake_case(name): name for name in REGISTRY.index}
        _BUILTIN_SNAKE = names
    return names


_BUILTIN_SNAKE: dict[str, str] = {}


def add_op(op: OpDef) -> OpDef:
    """Register a ready-made definition (custom operators build theirs at run time)."""
    return _add(op)


def remove_op(name: str) -> OpDef | None:
    """Forget an operator (custom operators can be unregistered; built-ins stay)."""
    return REGISTRY.pop(name, None)
