"""Binding and running an op call: ``_Program`` binds an op type's lowering to a call's
descs and attributes (with the value inputs read on the host) and runs it on a stream
with new buffers.

Design note (invariants)
------------------------
* Binding (``_Program``) runs phase 1 of every aclnn call of the lowering, with tensors
  created from the descs at address 0, and makes each executor repeatable. It records, for
  every tensor of every executor, which input or output buffer it reads (views keep their
  offset and strides, so a new base address is all they need). The aclTensor, aclScalar
  handles it creates are destroyed as soon as phase 1 returns: the executors hold snapshots.
* Running (``_Program.run``) checks each DataBuffer against its desc, gives the executors
  the buffers' addresses and enqueues every aclnn call in order on one stream; workspaces are
  allocated per run and freed right after enqueueing (stream-ordered reuse, as the one-shot
  helpers do). ``execute_v2`` binds, runs once and releases; ``create_handle`` binds once and
  ``execute_with_handle`` runs it any number of times with new buffers.
* Value inputs (Slice ``offsets``/``size``, Transpose ``perm``, ReduceSum ``axes``...) decide
  shapes, so they are read on the host when binding: from ``set_tensor_const`` data when the
  desc has it, else (``execute_v2``, ``infer_shape``) from the buffer's memory at call time, as
  CANN reads host-placed inputs. ``create_handle`` has no buffers: those inputs must be const.
* Errors use the aclop codes: an unknown op type is ``ACL_ERROR_OP_NOT_FOUND`` (100024),
  wrong input/output counts or tensors ``ACL_ERROR_OP_INPUT_NOT_MATCH`` (100021) /
  ``ACL_ERROR_OP_OUTPUT_NOT_MATCH`` (100022), a bad or missing attribute
  ``ACL_ERROR_OP_ATTR_NOT_MATCH`` (100023), a buffer that does not fit its desc
  ``ACL_ERROR_INVALID_PARAM``. A failure inside an aclnn phase 1 is translated by the
  argument it names, and the aclnn message is kept.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.dtypes import DataType
from openacl.errors import (
    ACL_ERROR_FORMAT_NOT_MATCH,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_OP_ATTR_NOT_MATCH,
    ACL_ERROR_OP_INPUT_NOT_MATCH,
    ACL_ERROR_OP_OUTPUT_NOT_MATCH,
    ACL_ERROR_UNSUPPORTED_DATA_TYPE,
    AclError,
)
from openacl.op.attr import ATTR_KIND_NAMES, COMPATIBLE_KINDS, _bad, _lookup_attr
from openacl.op.lowering import _Lowering, _Operand, _Step
from openacl.op.types import REQUIRED, OpType, _spec
from openacl.ops.executor import find_executor, set_tensor_addr
from openacl.runtime import memory, profiler
from openacl.runtime.stream import resolve_stream
from openacl.tensor import PLAIN_FORMATS, TensorDesc, lookup_data_buffer, lookup_tensor_desc


# -- binding a call ----------------------------------------------------------------------------
def _resolve_attrs(spec: OpType, attr: Any) -> tuple[dict[str, Any], set[str]]:
    given = {} if attr is None or attr == 0 else dict(_lookup_attr(attr).values)  # 0: NULL
    resolved, explicit = {}, set(given)
    for name, (kind, value) in given.items():
        definition = spec.attr(name)
        if definition is None:
            known = ", ".join(a.name for a in spec.attrs) or "none"
            raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                           f"{spec.name}: attribute '{name}' is not an attribute of "
                           f"{spec.name} (its attributes: {known})")
        if kind != definition.kind and kind not in COMPATIBLE_KINDS.get(definition.kind, ()):
            raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                           f"{spec.name}: attribute '{name}' is {ATTR_KIND_NAMES[definition.kind]}"
                           f" in CANN's definition but was set as {ATTR_KIND_NAMES[kind]} "
                           f"({value!r})")
        resolved[name] = int(value) if definition.kind == "int" else value
    for definition in spec.attrs:
        if definition.name not in resolved:
            if definition.default is REQUIRED:
                raise AclError(ACL_ERROR_OP_ATTR_NOT_MATCH,
                               f"{spec.name}: required attribute '{definition.name}' "
                               f"({ATTR_KIND_NAMES[definition.kind]}) is not set")
            default = definition.default
            resolved[definition.name] = list(default) if isinstance(default, list) else default
    return resolved, explicit


def _arity(spec: OpType) -> str:
    return ", ".join(f"[{n[:-1]}]" if n.endswith("?") else (f"{n[:-1]}..." if n.endswith("*")
                                                           else n) for n in spec.inputs)


def _desc(desc: Any, argument: str) -> TensorDesc:
    try:
        return lookup_tensor_desc(desc, argument)
    except AclError as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM, exc.message) from None


def _operand(spec: OpType, name: str, origin: tuple[str, int], desc: TensorDesc,
             argument: str, concrete: bool) -> _Operand:
    if desc.format not in PLAIN_FORMATS:
        raise AclError(ACL_ERROR_FORMAT_NOT_MATCH,
                       f"{spec.name}: {argument} ('{name}') has format {desc.format.name}; "
                       f"only plain formats (ND, NCHW, NHWC...) are supported")
    try:
        dtypes.to_numpy_dtype(desc.data_type)
    except AclError:
        raise AclError(ACL_ERROR_UNSUPPORTED_DATA_TYPE,
                       f"{spec.name}: {argument} ('{name}') has data type "
                       f"{desc.data_type.name}, which cannot be computed here") from None
    if concrete and any(d < 0 for d in desc.dims):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"{spec.name}: {argument} ('{name}') has unknown dims "
                       f"{list(desc.dims)}; running an operator needs every dim")
    return _Operand(name, origin, desc.data_type, tuple(desc.dims), desc.format,
                    desc.const_data)


def _bind_inputs(spec: OpType, descs: Sequence[Any], concrete: bool) -> dict[str, Any]:
    if descs is None or isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad("inputDesc", descs, "expected a list of tensor desc handles")
    found = [_desc(d, f"inputDesc[{i}]") for i, d in enumerate(descs)]
    names = list(spec.inputs)
    dynamic = next((n for n in names if n.endswith("*")), None)
    required = [n for n in names if not n.endswith(("?", "*"))]
    if dynamic is not None:
        ok = len(found) >= len(required) + 1
    else:
        ok = len(required) <= len(found) <= len(names)
    if not ok:
        raise AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                       f"{spec.name} takes inputs ({_arity(spec)}), but {len(found)} input "
                       f"descs were given")
    inputs: dict[str, Any] = {}
    position = 0
    for name in names:
        if name.endswith("*"):
            count = len(found) - (len(names) - 1)
            base = name[:-1]
            inputs[base] = [_operand(spec, f"{base}{k}", ("in", position + k),
                                     found[position + k], f"inputDesc[{position + k}]",
                                     concrete) for k in range(count)]
            position += count
            continue
        base = name.rstrip("?")
        if position >= len(found) or (name.endswith("?") and found[position].data_type
                                      == DataType.ACL_DT_UNDEFINED):
            inputs[base] = None  # an absent optional input
        else:
            inputs[base] = _operand(spec, base, ("in", position), found[position],
                                    f"inputDesc[{position}]", concrete)
        position += 1
    return inputs


def _bind_outputs(spec: OpType, descs: Sequence[Any] | None, count: int | None,
                  concrete: bool) -> dict[str, _Operand] | None:
    if descs is None:
        if count is not None and count != len(spec.outputs):
            raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                           f"{spec.name} has {len(spec.outputs)} outputs "
                           f"({', '.join(spec.outputs)}), but numOutputs is {count}")
        return None
    if isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad("outputDesc", descs, "expected a list of tensor desc handles")
    if len(descs) != len(spec.outputs):
        raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                       f"{spec.name} has {len(spec.outputs)} outputs "
                       f"({', '.join(spec.outputs)}), but {len(descs)} output descs were given")
    return {name: _operand(spec, name, ("out", j), _desc(d, f"outputDesc[{j}]"),
                           f"outputDesc[{j}]", concrete)
            for j, (name, d) in enumerate(zip(spec.outputs, descs, strict=True))}


def _read_values(b: _Lowering, buffers: Sequence[Any] | None) -> None:
    """Read the value inputs (shape-deciding) on the host: const data, else the buffer."""
    for name in sorted(b.spec.values):
        operand = b.inputs[name]
        if operand.dtype.kind not in "iu":
            raise b.fail_input(name, f"must be an integer tensor, not "
                                     f"{operand.data_type.name}")
        count = math.prod(operand.dims)
        nbytes = count * operand.dtype.itemsize
        if operand.const is not None:
            raw = operand.const
        elif buffers is not None:
            buffer = lookup_data_buffer(buffers[operand.origin[1]],
                                        f"inputs[{operand.origin[1]}]")
            if buffer.size < nbytes:
                raise b.fail_input(name, f"its buffer holds {buffer.size} bytes; the desc "
                                         f"needs {nbytes}")
            if not nbytes:
                raw = b""
            else:
                raw = memory.read_bytes(buffer.data, nbytes, f"inputs[{operand.origin[1]}]")
        else:
            raise b.fail_input(name, "its value decides the output shape, so its desc must "
                                     "be made constant with set_tensor_const (a handle is "
                                     "bound before any buffer exists)")
        if len(raw) < nbytes:
            raise b.fail_input(name, f"its const data holds {len(raw)} bytes; the desc "
                                     f"needs {nbytes}")
        b.values[name] = tuple(int(v) for v in np.frombuffer(raw[:nbytes], operand.dtype))


class _Program:
    """A bound op call: its aclnn executors and where each of their tensors lives."""

    def __init__(self, op_type: Any, input_desc: Sequence[Any], output_desc: Sequence[Any],
                 attr: Any, value_buffers: Sequence[Any] | None) -> None:
        spec = _spec(op_type)
        inputs = _bind_inputs(spec, input_desc, concrete=True)
        outputs = _bind_outputs(spec, output_desc, None, concrete=True)
        attrs, explicit = _resolve_attrs(spec, attr)
        b = _Lowering(spec, inputs, outputs, attrs, infer=False)
        b.explicit = explicit
        self.spec = spec
        self.num_inputs = len(input_desc)
        self.in_bytes = self._bytes(inputs, len(input_desc))
        self.out_bytes = [math.prod(o.dims) * o.dtype.itemsize for o in outputs.values()]
        self.steps: list[_Step] = []
        self._run_lock = threading.Lock()  # addresses set + launch is one step per run
        try:
            _read_values(b, value_buffers)
            if spec.rule is not None:
                _check_rule(b, spec.rule(b))
            spec.lower(b)
        except BaseException:
            for step in b.steps:
                find_executor(step.executor).release()
            raise
        finally:
            b.release_temporaries()
        self.steps = b.steps

    @staticmethod
    def _bytes(inputs: dict[str, Any], count: int) -> list[int]:
        sizes = [0] * count
        for value in inputs.values():
            for operand in value if isinstance(value, list) else [value]:
                if operand is not None:
                    sizes[operand.origin[1]] = math.prod(operand.dims) * operand.dtype.itemsize
        return sizes

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], stream: Any) -> None:
        addresses = {"in": self._addresses("inputs", inputs, self.in_bytes),
                     "out": self._addresses("outputs", outputs, self.out_bytes)}
        target = resolve_stream(stream)
        span = profiler.begin_range(target, "aclop", self.spec.name) if profiler.active else None
        with self._run_lock:  # two threads running one handle must not mix their buffers
            for step in self.steps:
                for index, source in enumerate(step.sources):
                    if source is not None:
                        set_tensor_addr(step.executor, index, None,
                                        addresses[source[0]][source[1]])
            for step in self.steps:
                workspace = memory.malloc(step.workspace_bytes) if step.workspace_bytes else 0
                try:
                    find_executor(step.executor).launch(workspace, step.workspace_bytes, target)
                finally:
                    if workspace:
                        memory.free(workspace)  # stream-ordered: reused after this work
        if span is not None:
            span.end()

    def _addresses(self, argument: str, buffers: Sequence[Any], sizes: list[int]) -> list[int]:
        if buffers is None or isinstance(buffers, (str, bytes)) or \
                not hasattr(buffers, "__len__"):
            raise _bad(argument, buffers, "expected a list of data buffer handles")
        if len(buffers) != len(sizes):
            code = ACL_ERROR_OP_INPUT_NOT_MATCH if argument == "inputs" else \
                ACL_ERROR_OP_OUTPUT_NOT_MATCH
            raise AclError(code, f"{self.spec.name}: {len(buffers)} {argument} buffers for "
                                 f"{len(sizes)} {argument[:-1]} descs")
        found = []
        for i, (handle, size) in enumerate(zip(buffers, sizes, strict=True)):
            buffer = lookup_data_buffer(handle, f"{argument}[{i}]")
            if buffer.size < size:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"{self.spec.name}: argument '{argument}[{i}]' holds "
                               f"{buffer.size} bytes, but its desc needs {size}")
            found.append(buffer.data)
        return found

    def release(self) -> None:
        for step in self.steps:
            try:
                find_executor(step.executor).release()
            except AclError:
                pass  # already gone with the runtime
        self.steps = []


def _check_rule(b: _Lowering, expected: dict[str, tuple[tuple[int, ...], DataType]]) -> None:
    for name, (shape, data_type) in expected.items():
        operand = b.outputs[name]
        if operand.dims != tuple(shape) or operand.data_type != data_type:
            raise b.fail_output(name, f"desc is {list(operand.dims)} {operand.data_type.name}; "
                                      f"expected {list(shape)} {data_type.name}")
