"""Registering a custom operator: from an ``OpDef`` to the aclnn registry.

Registration builds, from the declaration alone, an aclnn operator whose arguments follow
CANN's generated-API rule (inputs in declaration order, then attributes, then outputs):
``aclnnAddCustomGetWorkspaceSize(x, y, alpha, z)`` / ``aclnnAddCustom(...)`` in the
compatibility face, ``openacl.aclnn.add_custom_get_workspace_size`` / ``add_custom`` in the
Pythonic one, ``openacl.ops.add_custom`` as a one-shot helper, and ``openacl.op.execute_v2
("AddCustom", ...)`` by name.

Phase 1 checks the tensors against the declared dtype/format combinations, runs the
infer-shape function and then the tiling function (its workspace sizes become the op's
workspace). Phase 2 hands the kernel contiguous arrays (non-contiguous inputs are copied,
non-contiguous outputs written back afterwards, as CANN's generated API does with its
Contiguous/ViewCopy steps) and runs it over ``block_dim`` blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.custom.blocks import run_blocks
from openacl.custom.opdef import DYNAMIC, OPTIONAL, OpDef
from openacl.custom.tiling import PlatformInfo, TilingContext
from openacl.dtypes import Format
from openacl.errors import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_KERNEL_ALREADY_REGISTERED,
    ACL_ERROR_OP_NOT_FOUND,
    ACLNN_ERR_INNER_INFERSHAPE_ERROR,
    ACLNN_ERR_INNER_TILING_ERROR,
    AclError,
)
from openacl.ops import registry
from openacl.ops.call import Call, Kernel, TensorArg, array_module
from openacl.ops.signature import parse_signature
from openacl.runtime import core

SIGNATURE_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str",
                   "list_int": "int_array", "list_float": "float_array",
                   "list_bool": "bool_array"}
PLAIN_FORMATS = frozenset({Format.ACL_FORMAT_ND, Format.ACL_FORMAT_NCHW, Format.ACL_FORMAT_NHWC,
                           Format.ACL_FORMAT_NCDHW, Format.ACL_FORMAT_NDHWC,
                           Format.ACL_FORMAT_NC, Format.ACL_FORMAT_NCL})


@dataclass
class InferShapeContext:
    """What an infer-shape function sees and sets (gert::InferShapeContext, simplified)."""

    input_shapes: list[tuple[int, ...] | None]
    input_dtypes: list[np.dtype | None]
    attrs: dict[str, Any]
    output_shapes: list[tuple[int, ...]] = field(default_factory=list)
    output_dtypes: list[np.dtype] = field(default_factory=list)

    def get_input_shape(self, index: int) -> tuple[int, ...] | None:
        return self.input_shapes[index]

    def get_attr(self, name: str) -> Any:
        return self.attrs[name]

    def set_output_shape(self, index: int, shape: tuple[int, ...]) -> None:
        self.output_shapes[index] = tuple(int(d) for d in shape)

    def set_output_dtype(self, index: int, dtype: Any) -> None:
        self.output_dtypes[index] = dtypes.to_numpy_dtype(dtypes.to_data_type(dtype))


def _signature(op: OpDef) -> str:
    parts = []
    for param in op.inputs:
        kind = "tensors" if param.kind == DYNAMIC else "tensor"
        parts.append(f"{param.name}: {kind}{'?' if param.kind == OPTIONAL else ''}")
    for attr in op.attrs:
        optional = "?" if not attr.required else ""
        default = f" = {attr.default!r}" if not attr.required else ""
        parts.append(f"{attr.name}: {SIGNATURE_KINDS[attr.kind]}{optional}{default}")
    for param in op.outputs:
        parts.append(f"{param.name}: {'tensors' if param.kind == DYNAMIC else 'tensor'}!")
    return ", ".join(parts)


def _combination(c: Call, op: OpDef) -> int:
    """Index of the declared dtype/format column every given input matches."""
    given = {}
    for param in op.inputs:
        value = c[param.name]
        tensors = value if isinstance(value, list) else [value]
        given[param.name] = [t for t in tensors if isinstance(t, TensorArg)]
    for column in range(len(op.inputs[0].data_types)):
        fits = all(t.meta.data_type == p.data_types[column] and _format_fits(t, p, column)
                   for p in op.inputs for t in given[p.name])
        if fits:
            return column
    seen = {name: [t.meta.data_type.name for t in ts] for name, ts in given.items()}
    declared = [tuple(p.data_types[i].name for p in op.inputs)
                for i in range(len(op.inputs[0].data_types))]
    raise c.fail(op.inputs[0].name, f"the input dtypes {seen} match none of the declared "
                                    f"combinations {declared}")


def _format_fits(tensor: TensorArg, param: Any, column: int) -> bool:
    if not param.formats:
        return True
    declared = param.formats[column]
    if declared == Format.ACL_FORMAT_ND:  # ND accepts every plain layout, as CANN does
        return tensor.meta.format in PLAIN_FORMATS or tensor.meta.format == declared
    return tensor.meta.format == declared


def _attr_values(c: Call, op: OpDef) -> dict[str, Any]:
    values = {}
    for attr in op.attrs:
        value = c[attr.name]
        values[attr.name] = attr.default if value is None else value
    return values


def _contiguous(array: Any) -> Any:
    """A C-contiguous array on the input's own device (a view when it already is one)."""
    return array_module(array).ascontiguousarray(array)


def _contiguous_out(target: np.ndarray) -> tuple[np.ndarray, bool]:
    if target.flags.c_contiguous:
        return target, False
    return array_module(target).empty(target.shape, target.dtype), True


def _call_user(fn, context: Any, op: OpDef, code: int) -> None:
    """Run the author's infer-shape or tiling function; its exceptions carry ``code``."""
    try:
        fn(context)
    except AclError:
        raise
    except Exception as exc:
        what = getattr(fn, "__name__", "function")
        raise AclError(code, f"aclnn{op.op_type}: {what} raised {type(exc).__name__}: "
                             f"{exc}") from exc


def _make_prepare(op: OpDef, platform: PlatformInfo):
    def prepare(c: Call) -> Kernel:
        column = _combination(c, op)
        attrs = _attr_values(c, op)
        inputs = [c[p.name] for p in op.inputs]
        shapes = [[t.shape for t in v] if isinstance(v, list) else (v.shape if v else None)
                  for v in inputs]
        in_dtypes = [[t.dtype for t in v] if isinstance(v, list) else (v.dtype if v else None)
                     for v in inputs]
        out_dtypes = [dtypes.to_numpy_dtype(p.data_types[column]) for p in op.outputs]
        given = [s[0] if isinstance(s, list) else s for s in shapes if s]
        if not given:
            raise c.fail(op.inputs[0].name, "no input tensor was given")
        first_shape = given[0]  # the default infer-shape: outputs shaped like the first input
        infer = InferShapeContext(shapes, in_dtypes, attrs,
                                  [first_shape] * len(op.outputs), list(out_dtypes))
        if op.infer_shape is not None:
            _call_user(op.infer_shape, infer, op, ACLNN_ERR_INNER_INFERSHAPE_ERROR)
        for index, shape in enumerate(infer.output_shapes):
            if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape):
                raise AclError(ACLNN_ERR_INNER_INFERSHAPE_ERROR,
                               f"aclnn{op.op_type}: the infer-shape function gave output "
                               f"'{op.outputs[index].name}' the shape {list(shape)}; dims must "
                               f"be ints >= 0")
        for param, shape, dtype in zip(op.outputs, infer.output_shapes, infer.output_dtypes,
                                       strict=True):
            c.check_out(param.name, shape, dtype, exact_dtype=True)
        tiling = TilingContext(shapes, in_dtypes, list(infer.output_shapes),
                               list(infer.output_dtypes), attrs, platform)
        _call_user(op.tiling, tiling, op, ACLNN_ERR_INNER_TILING_ERROR)
        block_dim = tiling.block_dim
        if not isinstance(block_dim, (int, np.integer)) or block_dim < 1 or any(
                size < 0 for size in tiling.workspace_sizes):
            raise AclError(ACLNN_ERR_INNER_TILING_ERROR,
                           f"aclnn{op.op_type}: the tiling function set block_dim={block_dim!r} "
                           f"and workspace sizes {tiling.workspace_sizes}; block_dim must be a "
                           f"positive int and sizes >= 0")
        c.workspace_bytes = int(sum(tiling.workspace_sizes))
        tiling_key = int(tiling.tiling_key)
        tiling_bytes = np.frombuffer(tiling.tiling_bytes(), np.uint8)
        in_names = [p.name for p in op.inputs]
        out_names = [p.name for p in op.outputs]

        def kernel(v) -> None:
            args = []
            for name in in_names:
                value = v.get(name)
                if isinstance(value, list):
                    args.append([_contiguous(a) for a in value])
                else:
                    args.append(None if value is None else _contiguous(value))
            write_back = []
            for name in out_names:
                target, copied = _contiguous_out(v[name])
                args.append(target)
                if copied:
                    write_back.append((v[name], target))
            workspace = v.workspace if v.workspace is not None else \
                core.current().backend.empty_array((0,), np.dtype(np.uint8))
            run_blocks(op.kernel, int(block_dim), (*args, workspace, tiling_bytes), op.op_type,
                       tiling_key)
            for destination, source in write_back:
                np.copyto(destination, source)
        return kernel
    return prepare


def register_op(op: OpDef, platform: PlatformInfo | None = None) -> registry.OpDef:
    """Register a custom operator (CANN's ``OP_ADD``); returns its aclnn definition.

    Raises:
        AclError: ``ACL_ERROR_KERNEL_ALREADY_REGISTERED`` (100031) for a name in use,
            ``ACL_ERROR_KERNEL_NOT_FOUND`` (100029) for a kernel that does not match the
            declaration, ``ACL_ERROR_INVALID_PARAM`` for a malformed declaration.
    """
    op.validate()
    if op.op_type in registry.REGISTRY:
        raise AclError(ACL_ERROR_KERNEL_ALREADY_REGISTERED,
                       f"operator {op.op_type} is already registered (aclnn{op.op_type}); "
                       f"unregister_op() it first or choose another name")
    definition = registry.OpDef(op.op_type, parse_signature(_signature(op)),
                                _make_prepare(op, platform or PlatformInfo()),
                                doc=f"Custom operator {op.op_type}.", ir=op)
    return registry.add_op(definition)


def unregister_op(op_type: str) -> None:
    """Remove a custom operator (built-in operators cannot be removed)."""
    definition = registry.REGISTRY.get(op_type)
    if definition is None:
        raise AclError(ACL_ERROR_OP_NOT_FOUND, f"'{op_type}' is not a registered operator")
    if definition.ir is None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"'{op_type}' is a built-in operator; only custom ones can be removed")
    registry.remove_op(op_type)
