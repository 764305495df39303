"""Declaring a custom operator the way CANN's ``OpDef`` does.

::

    op = OpDef("AddCustom")
    op.input("x").param_type(REQUIRED).data_type([ACL_FLOAT16, ACL_FLOAT]).format([ND, ND])
    op.input("y").param_type(REQUIRED).data_type([ACL_FLOAT16, ACL_FLOAT]).format([ND, ND])
    op.output("z").param_type(REQUIRED).data_type([ACL_FLOAT16, ACL_FLOAT]).format([ND, ND])
    op.attr("alpha").attr_type(OPTIONAL).float(1.0)
    op.set_infer_shape(infer_shape)      # optional: default is "like the first input"
    op.set_tiling(tiling)                # fills a TilingContext
    op.set_kernel(add_kernel)            # runs once per block
    register_op(op)                      # OP_ADD: creates aclnnAddCustom...

As in CANN, the i-th entries of every input's and output's ``data_type`` (and ``format``)
lists together form the i-th supported combination. The kernel is called per block as
``kernel(*inputs, *outputs, workspace, tiling)`` with every tensor as a contiguous numpy
array (a "global tensor") and ``tiling`` the packed tiling bytes; it finds its block with
``get_block_idx()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openacl import dtypes
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_KERNEL_NOT_FOUND, AclError

REQUIRED, OPTIONAL, DYNAMIC = "required", "optional", "dynamic"  # ParamType / AttrType
ATTR_KINDS = ("int", "float", "bool", "str", "list_int", "list_float", "list_bool")
KERNEL_EXTRA_ARGS = 2  # workspace and tiling follow the tensors, as in Ascend C kernels


@dataclass
class ParamDef:
    """One input or output: ``.param_type(...).data_type([...]).format([...])``."""

    name: str
    is_output: bool
    kind: str = REQUIRED
    data_types: list[DataType] = field(default_factory=list)
    formats: list[Format] = field(default_factory=list)

    def param_type(self, kind: str) -> ParamDef:
        if kind not in (REQUIRED, OPTIONAL, DYNAMIC):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"param '{self.name}': param_type {kind!r} is not REQUIRED, "
                           f"OPTIONAL or DYNAMIC")
        self.kind = kind
        return self

    def data_type(self, values: Sequence[Any]) -> ParamDef:
        self.data_types = [dtypes.to_data_type(v, f"{self.name}.data_type") for v in values]
        return self

    def format(self, values: Sequence[Any]) -> ParamDef:
        self.formats = [dtypes.to_format(v, f"{self.name}.format") for v in values]
        return self


@dataclass
class AttrDef:
    """One attribute: ``.attr_type(OPTIONAL).float(1.0)``."""

    name: str
    kind: str = ""
    required: bool = True
    default: Any = None

    def attr_type(self, kind: str) -> AttrDef:
        if kind not in (REQUIRED, OPTIONAL):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"attr '{self.name}': attr_type {kind!r} is not REQUIRED or OPTIONAL")
        self.required = kind == REQUIRED
        return self

    def _typed(self, kind: str, default: Any) -> AttrDef:
        self.kind, self.default = kind, default
        return self

    def int(self, default: int = 0) -> AttrDef:
        return self._typed("int", default)

    def float(self, default: float = 0.0) -> AttrDef:
        return self._typed("float", default)

    def bool(self, default: bool = False) -> AttrDef:
        return self._typed("bool", default)

    def str(self, default: str = "") -> AttrDef:
        return self._typed("str", default)

    def list_int(self, default: Sequence[int] = ()) -> AttrDef:
        return self._typed("list_int", list(default))

    def list_float(self, default: Sequence[float] = ()) -> AttrDef:
        return self._typed("list_float", list(default))

    def list_bool(self, default: Sequence[bool] = ()) -> AttrDef:
        return self._typed("list_bool", list(default))


class OpDef:
    """A custom operator's declaration (CANN's ``OpDef``)."""

    def __init__(self, op_type: str) -> None:
        if not isinstance(op_type, str) or not op_type.isidentifier() or not op_type[0].isupper():
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'opType' = {op_type!r} is invalid: an operator type is "
                           f"a CamelCase identifier such as 'AddCustom'")
        self.op_type = op_type
        self.inputs: list[ParamDef] = []
        self.outputs: list[ParamDef] = []
        self.attrs: list[AttrDef] = []
        self.infer_shape: Callable | None = None
        self.tiling: Callable | None = None
        self.kernel: Callable | None = None

    def _unique(self, name: str) -> None:
        taken = {p.name for p in self.inputs + self.outputs} | {a.name for a in self.attrs}
        if not name.isidentifier() or name in taken:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"{self.op_type}: name {name!r} is not a new identifier")

    def input(self, name: str) -> ParamDef:
        self._unique(name)
        self.inputs.append(ParamDef(name, is_output=False))
        return self.inputs[-1]

    def output(self, name: str) -> ParamDef:
        self._unique(name)
        self.outputs.append(ParamDef(name, is_output=True))
        return self.outputs[-1]

    def attr(self, name: str) -> AttrDef:
        self._unique(name)
        self.attrs.append(AttrDef(name))
        return self.attrs[-1]

    def set_infer_shape(self, fn: Callable) -> OpDef:
        """``fn(ctx)``: read ``ctx.input_shapes`` / ``attrs``, set ``ctx.output_shapes`` (and
        optionally ``ctx.output_dtypes``)."""
        self.infer_shape = fn
        return self

    def set_tiling(self, fn: Callable) -> OpDef:
        """``fn(ctx: TilingContext)``: set block_dim, tiling key, tiling data, workspace."""
        self.tiling = fn
        return self

    def set_kernel(self, fn: Callable) -> OpDef:
        """``fn(*inputs, *outputs, workspace, tiling)``, run once per block."""
        self.kernel = fn
        return self

    # -- checks at registration -----------------------------------------------------------------
    def validate(self) -> None:
        """Refuse a declaration CANN would refuse, or whose kernel cannot match it."""
        params = self.inputs + self.outputs
        if not self.inputs or not self.outputs:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"{self.op_type}: an operator needs at least one input and output")
        combos = {len(p.data_types) for p in params}
        if len(combos) != 1 or 0 in combos:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"{self.op_type}: every input and output must list the same number "
                           f"(> 0) of data types; got "
                           f"{ {p.name: len(p.data_types) for p in params} }")
        for param in params:
            if param.formats and len(param.formats) != len(param.data_types):
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"{self.op_type}: '{param.name}' lists {len(param.formats)} "
                               f"formats for {len(param.data_types)} data types")
            if param.is_output and param.kind == OPTIONAL:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"{self.op_type}: output '{param.name}' cannot be optional")
        for attr in self.attrs:
            if attr.kind not in ATTR_KINDS:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"{self.op_type}: attr '{attr.name}' has no type (call .int(), "
                               f".float(), .bool(), .str() or .list_int()...)")
        if self.tiling is None or self.kernel is None:
            raise AclError(ACL_ERROR_KERNEL_NOT_FOUND,
                           f"{self.op_type}: set_tiling and set_kernel are both required")
        self._check_kernel_signature()

    def _check_kernel_signature(self) -> None:
        expected = len(self.inputs) + len(self.outputs) + KERNEL_EXTRA_ARGS
        try:
            signature = inspect.signature(self.kernel)
        except (TypeError, ValueError):
            return  # a builtin or C callable: nothing to check
        positional = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        variadic = any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values())
        if not variadic and len(positional) != expected:
            names = [p.name for p in self.inputs + self.outputs] + ["workspace", "tiling"]
            raise AclError(ACL_ERROR_KERNEL_NOT_FOUND,
                           f"{self.op_type}: kernel {getattr(self.kernel, '__name__', '?')} "
                           f"takes {len(positional)} arguments but the declaration passes "
                           f"{expected}: ({', '.join(names)})")
