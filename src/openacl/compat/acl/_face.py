"""pyACL return shapes, and the table-driven generation of a module's functions.

Each pyACL function is one row: its pyACL name, the Pythonic function it calls (which
returns outputs and raises ``AclError``) and its ``Shape``: what pyACL returns.

- ``RET``: ``ret``                                (``ret = acl.rt.set_device(0)``)
- ``outputs("stream")``: ``(stream, ret)``        (``stream, ret = acl.rt.create_stream()``)
- ``VALUE(failure)``: the value alone, ``failure`` on error (``acl.get_tensor_desc_size``)
- ``HANDLE``: a constructor: the handle, 0 on error (``acl.create_data_buffer``)
- ``VOID``: None, as pyACL returns for a ``void`` C function (``acl.destroy_tensor_desc``)

Nothing raises for a bad argument: the code is returned (or the placeholder) and the message
is kept for ``acl.get_recent_err_msg()`` (see ``openacl.compat.convention``). Enum outputs
come back as plain ints, as pyACL gives them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from openacl.compat.convention import returning_code, returning_handle, returning_outputs


@dataclass(frozen=True)
class Shape:
    """What a pyACL function returns (see the module docstring)."""

    kind: str  # "ret", "outputs", "value", "handle" or "void"
    names: tuple[str, ...] = ()  # output names, for "outputs" (and the docstring)
    failure: tuple = ()  # placeholders reported on error: one per output, or the value


RET = Shape("ret")
HANDLE = Shape("handle")
VOID = Shape("void")


def outputs(*names: str, failure: tuple | None = None) -> Shape:
    """``(names..., ret)``; each output reads 0 on error unless ``failure`` says otherwise."""
    return Shape("outputs", names, (0,) * len(names) if failure is None else failure)


def VALUE(failure: Any) -> Shape:  # noqa: N802 - reads like the other shape constants
    return Shape("value", ("value",), (failure,))


def plain(value: Any) -> Any:
    """pyACL hands out plain ints: an IntEnum output becomes its int (also inside tuples)."""
    if isinstance(value, enum.IntEnum):
        return int(value)
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    return value


def bind(name: str, fn: Callable[..., Any], shape: Shape, module: str) -> Callable[..., Any]:
    """The pyACL function ``name`` of ``module``: ``fn`` in the convention ``shape`` names."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return plain(fn(*args, **kwargs))

    if shape.kind == "ret":
        wrapper = returning_code(call)
        returns = "ret"
    elif shape.kind == "outputs":
        wrapper = returning_outputs(call, shape.failure)
        returns = f"{', '.join(shape.names)}, ret"
    elif shape.kind == "handle":
        wrapper = returning_handle(call)
        returns = "handle (0 on failure)"
    elif shape.kind == "value":
        with_ret = returning_outputs(call, shape.failure)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return with_ret(*args, **kwargs)[0]
        returns = f"value ({shape.failure[0]!r} on failure)"
    elif shape.kind == "void":
        with_code = returning_code(call)

        def wrapper(*args: Any, **kwargs: Any) -> None:
            with_code(*args, **kwargs)
        returns = "None"
    else:
        raise ValueError(f"unknown pyACL return shape {shape.kind!r}")
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__module__ = module
    summary = (fn.__doc__ or "").strip().split("\n")[0]
    wrapper.__doc__ = f"{module.rsplit('.', 1)[-1]}.{name}(...) -> {returns}\n\n{summary}"
    wrapper.__wrapped__ = fn
    return wrapper


def generate(table: Iterable[tuple[str, Callable[..., Any], Shape]],
             namespace: MutableMapping[str, Any]) -> list[str]:
    """Define every row of ``table`` in ``namespace`` (a module's globals); returns the names."""
    module = namespace["__name__"]
    names = []
    for name, fn, shape in table:
        namespace[name] = bind(name, fn, shape, module)
        names.append(name)
    return names
