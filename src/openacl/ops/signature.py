"""Operator signatures: CANN's argument list of an aclnn function, declared as one string.

``"self: tensor, other: tensor, alpha: scalar, out: tensor!"`` declares aclnnAdd. Kinds:

=============  ===============================================================
``tensor``     an aclTensor (``tensor?`` optional; ``tensor!`` written by the op)
``scalar``     an aclScalar (or a Python number)
``int_array``  an aclIntArray (or a sequence of ints); also ``float_array``, ``bool_array``
``tensors``    an aclTensorList (or a sequence of tensors); ``tensors!`` written
``scalars``    an aclScalarList
``int``        an int attribute (int64_t / int8_t cubeMathType ...); also ``float``,
               ``bool``, ``str``, ``dtype`` (an aclDataType)
=============  ===============================================================

A trailing ``?`` makes any kind optional (None allowed). ``= value`` gives a default for the
Pythonic face only; CANN's C face always takes every argument.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

KINDS = frozenset({"tensor", "scalar", "int_array", "float_array", "bool_array", "tensors",
                   "scalars", "int", "float", "bool", "str", "dtype"})
TENSOR_KINDS = frozenset({"tensor", "tensors"})
_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One argument of an operator."""

    name: str
    kind: str
    optional: bool = False
    output: bool = False
    default: Any = _NO_DEFAULT

    @property
    def is_tensor(self) -> bool:
        return self.kind in TENSOR_KINDS



def parse_signature(text: str) -> tuple[Param, ...]:
    """Parse ``"name: kind[?|!] [= default], ..."``."""
    params = []
    for item in _split(text):
        name, _, rest = item.partition(":")
        kind_text, _, default_text = rest.partition("=")
        kind = kind_text.strip()
        output = "!" in kind
        optional = kind.endswith("?")
        kind = kind.rstrip("?!").rstrip("!")
        if kind not in KINDS or not name.strip().isidentifier():
            raise ValueError(f"bad parameter {item!r} in signature {text!r}")
        default = ast.literal_eval(default_text.strip()) if default_text.strip() else (
            None if optional else _NO_DEFAULT)
        params.append(Param(name.strip(), kind, optional, output, default))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate parameter names in {text!r}")
    return tuple(params)


def _split(text: str) -> list[str]:
    """Split on commas that are not inside brackets (defaults may be lists)."""
    items, depth, current = [], 0, []
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        items.append("".join(current).strip())
    return items


def python_signature(params: tuple[Param, ...], with_defaults: bool = False
                     ) -> inspect.Signature:
    """An ``inspect.Signature`` over ``params`` (for help() and argument binding).

    The two-phase functions take every argument, as CANN's do (``with_defaults=False``);
    the one-shot helpers pass only inputs and attributes and use the declared defaults.
    """
    out, keyword_only = [], False
    for param in params:
        default = param.default if with_defaults else _NO_DEFAULT
        # a required argument after a defaulted one can only be passed by keyword
        keyword_only = keyword_only or (default is _NO_DEFAULT and any(
            p.default is not _NO_DEFAULT for p in out))
        kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else \
            inspect.Parameter.POSITIONAL_OR_KEYWORD
        out.append(inspect.Parameter(param.name, kind, default=default))
    return inspect.Signature(out)
