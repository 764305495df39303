"""Single operators by CANN op type (the aclop face): ``execute_v2("MatMul", ...)``.

An aclop call names a CANN operator type (``"Add"``, ``"MatMulV2"``, ``"SoftmaxV2"``...),
describes its tensors with TensorDescs (dims, dtype, format), passes their memory as
DataBuffers and its attributes as an aclopAttr. Here every call is lowered onto the aclnn
operator library: ``OP_TYPES`` is the one table that says, per op type, its inputs, outputs
and attributes (names and defaults from the CANN IR, ``REG_OP(...)`` in the ``*_proto.h``
files of hicann/ops-math and hicann/ops-nn) and which aclnn calls compute it.

Layout: ``attr`` (aclopAttr), ``types``, ``types_more`` and ``types_extra`` (``OP_TYPES``
and each op type's lowering), ``lowering`` (the ``_Lowering`` machinery a lowering calls),
``program`` (binding and running a call; its docstring holds the design note: binding,
running, value inputs, error codes), ``models`` (loaded single-op models and the rule that a
call must match one), ``singleop`` (single-op description files: CANN's JSON, compiled
files) and this module, the public functions, which ``openacl.op`` gathers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openacl._api import module_dir
from openacl.aclop import models
from openacl.aclop.attr import (  # OpAttr and the kind tables are re-exported
    ATTR_KIND_NAMES,
    ATTR_KINDS,
    COMPATIBLE_KINDS,
    OpAttr,
    _bad,
    _is_bool,
    _is_int,
    attr_values,
    create_attr,
    destroy_attr,
    set_attr_bool,
    set_attr_data_type,
    set_attr_float,
    set_attr_int,
    set_attr_list_bool,
    set_attr_list_float,
    set_attr_list_int,
    set_attr_list_list_int,
    set_attr_list_string,
    set_attr_string,
)
from openacl.aclop.lowering import _Lowering
from openacl.aclop.models import load, set_model_dir
from openacl.aclop.program import (
    _bind_inputs,
    _bind_outputs,
    _desc,
    _infer,
    _Program,
    _resolve_attrs,
    output_names,
)
from openacl.aclop.types import (  # the table's constants are re-exported
    CUSTOM_ATTR_KINDS,
    OP_TYPES,
    REDUCTIONS,
    REQUIRED,
    SUGGESTIONS,
    AttrDef,
    OpType,
    _custom_spec,
    _spec,
)
from openacl.dtypes import DataType
from openacl.errors import (
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
    AclError,
    expose,
)
from openacl.runtime import core

ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR = 0, 1, 2  # aclopEngineType
ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED = 0, 1  # aclopCompileType
ENGINE_TYPES = (ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR)


# -- the public functions ------------------------------------------------------------------------
def execute_v2(op_type: str, input_desc: Sequence[int], inputs: Sequence[int],
               output_desc: Sequence[int], outputs: Sequence[int], attr: int | None,
               stream: Any = None) -> None:
    """aclopExecuteV2: run CANN op ``op_type`` on ``stream`` (asynchronous).

    Args:
        op_type: the CANN op type ("Add", "MatMulV2", "SoftmaxV2"...; see ``OP_TYPES``).
        input_desc, inputs: TensorDesc and DataBuffer handles, one per input, in IR order
            (a trailing optional input may be left out, or given a desc of
            ``ACL_DT_UNDEFINED``).
        output_desc, outputs: the same for the outputs.
        attr: an aclopAttr handle (``create_attr``), or None for all defaults.
        stream: the stream (None: the current one).

    Raises:
        AclError: 100024 unknown op type; 100021/100022 inputs/outputs that do not match;
            100023 a bad or missing attribute; 100000 a buffer smaller than its desc.
    """
    if inputs is None or not hasattr(inputs, "__len__") or len(inputs) != len(input_desc):
        raise _bad("inputs", inputs, f"expected {len(input_desc)} data buffer handles, one "
                                     f"per input desc")
    models.require(op_type, input_desc, output_desc, attr)
    program = _Program(op_type, input_desc, output_desc, attr, inputs)
    try:
        program.run(inputs, outputs, stream)
    finally:
        program.release()


class OpHandle:
    """aclopHandle: an op call bound once, run with new buffers by execute_with_handle."""

    def __init__(self, program: _Program) -> None:
        self.program = program
        self.handle = core.current().handles.add(self)

    def __repr__(self) -> str:
        return f"<aclopHandle {self.program.spec.name} {self.handle:#x}>"


def create_handle(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
                  attr: int | None = None) -> int:
    """aclopCreateHandle: validate and bind ``op_type`` once; returns the handle.

    Inputs whose values decide shapes (Slice offsets, Transpose perm...) are bound now when
    their descs are const (``set_tensor_const``); otherwise, as CANN compiles such a handle,
    they are read from their buffers at ``execute_with_handle``, which binds once per set
    of values and checks the shapes they give against ``output_desc``.
    """
    models.require(op_type, input_desc, output_desc, attr)
    return OpHandle(_Program(op_type, input_desc, output_desc, attr, None, lazy=True)).handle


def create_handle_for_cast(src_desc: int, dst_desc: int, truncate: Any = 0) -> int:
    """aclopCreateHandleForCast: a handle converting src_desc's dtype to dst_desc's."""
    _check_truncate(truncate)
    attr = _cast_attr(dst_desc)
    try:
        return create_handle("Cast", [src_desc], [dst_desc], attr)
    finally:
        destroy_attr(attr)


def _lookup_handle(handle: Any) -> OpHandle:
    return core.current().handles.get(handle, OpHandle, "handle")


def execute_with_handle(handle: int, inputs: Sequence[int], outputs: Sequence[int],
                        stream: Any = None) -> None:
    """aclopExecWithHandle: run a bound op with these buffers on ``stream``.

    Raises:
        AclError: 100022 when run-time value inputs give output shapes other than the
            handle's output descs; 100021 values that do not fit the op (see create_handle).
    """
    program = _lookup_handle(handle).program
    program.run(inputs, outputs, stream)


def destroy_handle(handle: int) -> None:
    """aclopDestroyHandle."""
    target = _lookup_handle(handle)
    target.program.release()
    core.current().handles.remove(target.handle)


def infer_shape(op_type: str, input_desc: Sequence[int], inputs: Sequence[int] | None,
                num_outputs: int, attr: int | None = None,
                output_desc: Sequence[int] | None = None
                ) -> list[tuple[tuple[int, ...], DataType]]:
    """aclopInferShape: the outputs' ``(dims, data_type)`` from the inputs' descs (and the
    values of value inputs, read from ``inputs`` or const descs).

    As aclopInferShape, when ``output_desc`` (a list of ``num_outputs`` desc handles) is
    given their dims are updated in place; the data types are returned but the descs keep
    theirs (CANN updates shapes only).
    """
    spec = _spec(op_type)
    if not _is_int(num_outputs):
        raise _bad("numOutputs", num_outputs, "expected an integer")
    inputs_bound = _bind_inputs(spec, input_desc, concrete=False)
    _bind_outputs(spec, None, int(num_outputs), concrete=False)
    if output_desc is not None and len(output_desc) != num_outputs:
        raise _bad("outputDesc", output_desc, f"expected {num_outputs} desc handles")
    for value in inputs_bound.values():
        for operand in value if isinstance(value, list) else [value]:
            if operand is not None and any(d < 0 for d in operand.dims):
                raise AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                               f"{spec.name}: input '{operand.name}' has unknown dims "
                               f"{list(operand.dims)}; shapes are inferred from known dims")
    attrs, explicit = _resolve_attrs(spec, attr)
    b = _infer(spec, inputs_bound, attrs, explicit, inputs)
    result = []
    for name in output_names(spec, int(num_outputs)):
        if name not in b.inferred:
            raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                           f"{spec.name}: numOutputs {num_outputs} names output '{name}', "
                           f"which these inputs and attributes do not produce")
        shape, data_type = b.inferred[name]
        result.append((tuple(shape), b.infer_dtypes.get(name, data_type)))
    for desc, (shape, _) in zip(output_desc or (), result, strict=False):
        target = _desc(desc, "outputDesc")
        target.dims, target.dim_ranges = tuple(shape), []
    return result


def check_call(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
               attr: int | None = None, *, bind: bool = False) -> None:
    """Validate a call (op type, descs, attributes) without running it; dims may be unknown
    (-1). What aclopCompile and aclopUpdateParams check.

    With ``bind`` (every dim known; value inputs const), the call is also bound as
    ``execute_v2`` binds it, without buffers: phase 1 of every aclnn call it lowers to, so
    mismatched shapes (MatMul's k) and output descs that differ from what the op computes
    are refused too (``openacl convert --singleop`` checks each op this way).

    Raises:
        AclError: as ``execute_v2``'s binding does.
    """
    spec = _spec(op_type)
    _bind_inputs(spec, input_desc, concrete=False)
    _bind_outputs(spec, output_desc, None, concrete=False)
    _resolve_attrs(spec, attr)
    if bind:
        _Program(op_type, input_desc, output_desc, attr, None).release()


def find_op_type(op_type: str) -> OpType | None:
    """The declaration of a built-in or registered custom op type (its IR input and output
    names, attributes), or None when OpenACL has no such op type."""
    return OP_TYPES.get(op_type) or _custom_spec(op_type) if isinstance(op_type, str) else None


def compile(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
            attr: int | None, engine_type: int = 0, compile_flag: int = 0,
            op_path: str | None = None) -> None:
    """aclopCompile: check the call and register it as a compiled single-op model (a later
    matching call finds it; compiling alone does not turn matching on, see op/models.py).
    ``engine_type``: ACL_ENGINE_SYS / AICORE / VECTOR (0, 1, 2); ``compile_flag``
    ACL_COMPILE_SYS (0) only, as CANN does not support ACL_COMPILE_UNREGISTERED."""
    if engine_type not in ENGINE_TYPES or not _is_int(engine_type):
        raise _bad("engineType", engine_type, "expected ACL_ENGINE_SYS (0), ACL_ENGINE_AICORE "
                                              "(1) or ACL_ENGINE_VECTOR (2)")
    if compile_flag != ACL_COMPILE_SYS or not _is_int(compile_flag):
        raise _bad("compileFlag", compile_flag, "only ACL_COMPILE_SYS (0) is supported (CANN "
                                                "does not support ACL_COMPILE_UNREGISTERED)")
    models.call_signature(op_type, input_desc, output_desc, attr)
    check_call(op_type, input_desc, output_desc, attr)
    models.register_compiled(op_type, input_desc, output_desc, attr)


def _check_truncate(truncate: Any) -> None:
    if not (_is_int(truncate) or _is_bool(truncate)):
        raise _bad("truncate", truncate, "expected 0 or 1 (reserved by CANN)")


def _cast_attr(dst_desc: Any) -> int:
    attr = create_attr()
    set_attr_int(attr, "dst_type", int(_desc(dst_desc, "dstDesc").data_type))
    return attr


def cast(input_desc: int, input: int, output_desc: int, output: int, truncate: Any = 0,
         stream: Any = None) -> None:
    """aclopCast: convert ``input`` to ``output_desc``'s data type on ``stream``
    (``truncate`` is reserved, as in CANN)."""
    _check_truncate(truncate)
    attr = _cast_attr(output_desc)
    try:
        execute_v2("Cast", [input_desc], [input], [output_desc], [output], attr, stream)
    finally:
        destroy_attr(attr)


__all__ = ["OP_TYPES", "OpType", "AttrDef", "create_attr", "destroy_attr", "set_attr_bool",
           "set_attr_int", "set_attr_float", "set_attr_string", "set_attr_data_type",
           "set_attr_list_bool", "set_attr_list_int", "set_attr_list_float",
           "set_attr_list_string", "set_attr_list_list_int", "execute_v2", "create_handle",
           "create_handle_for_cast", "execute_with_handle", "destroy_handle", "infer_shape",
           "cast", "check_call", "find_op_type", "attr_values", "set_model_dir", "load",
           "compile", "ACL_ENGINE_SYS", "ACL_ENGINE_AICORE", "ACL_ENGINE_VECTOR",
           "ACL_COMPILE_SYS", "ACL_COMPILE_UNREGISTERED"]
expose(globals(), __all__)  # an AclError leaving one records the recent error message

__dir__ = module_dir(globals())
