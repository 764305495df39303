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
  helpers do); so are the scratch buffers a lowering passes between its calls (``_Lowering.
  scratch``: int64 indices narrowed to int32, a permuted copy), whose executor tensors name
  them as their buffer ("tmp", k). ``execute_v2`` binds, runs once and releases;
  ``create_handle`` binds once and ``execute_with_handle`` runs it any number of times with
  new buffers.
* Value inputs (Slice ``offsets``/``size``, Transpose ``perm``, ReduceSum ``axes``...) decide
  shapes, so they are read on the host when binding: from ``set_tensor_const`` data when the
  desc has it, else (``execute_v2``, ``infer_shape``) from the buffer's memory at call time, as
  CANN reads host-placed inputs. ``create_handle`` has no buffers: a const value input is
  bound at once; one that is not is bound lazily, as CANN compiles such a handle with its
  value inputs read at run time: ``execute_with_handle`` reads the values from the buffers
  (when it is called, as ``execute_v2`` does), binds once per distinct set of values (at most
  ``BOUND_PER_HANDLE`` bindings are kept, least recently used dropped) and first checks
  the shapes those values give against the declared output descs.
* Errors use the aclop codes: an unknown op type is ``ACL_ERROR_OP_NOT_FOUND`` (100024),
  wrong input/output counts or tensors ``ACL_ERROR_OP_INPUT_NOT_MATCH`` (100021) /
  ``ACL_ERROR_OP_OUTPUT_NOT_MATCH`` (100022), a bad or missing attribute
  ``ACL_ERROR_OP_ATTR_NOT_MATCH`` (100023), a buffer that does not fit its desc
  ``ACL_ERROR_INVALID_PARAM``. A failure inside an aclnn phase 1 is translated by the
  argument it names, and the aclnn message is kept.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.aclop.attr import ATTR_KIND_NAMES, COMPATIBLE_KINDS, _bad, _lookup_attr
from openacl.aclop.lowering import _Bound, _Lowering, _Operand
from openacl.aclop.types import REQUIRED, OpType, _spec
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
from openacl.ops.executor import find_executor, set_tensor_addr
from openacl.runtime import memory, profiler
from openacl.runtime.stream import resolve_stream
from openacl.tensor import PLAIN_FORMATS, TensorDesc, lookup_data_buffer, lookup_tensor_desc

BOUND_PER_HANDLE = 16  # bindings a handle with run-time value inputs keeps, by their values
FLOAT_VALUE_TYPES = frozenset({DataType.ACL_FLOAT16, DataType.ACL_BF16, DataType.ACL_FLOAT,
                               DataType.ACL_DOUBLE})  # read as floats where values are real


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


def output_names(spec: OpType, count: int) -> list[str] | None:
    """The names of ``count`` outputs of ``spec``: its IR names, a dynamic output ``y*``
    expanded to y0, y1... (as many as the count leaves it); None when ``count`` does not
    fit (fewer than the fixed outputs and one dynamic, or a count other than theirs)."""
    names = list(spec.outputs)
    dynamic = next((n for n in names if n.endswith("*")), None)
    if dynamic is None:
        return names if count == len(names) else None
    repeats = count - (len(names) - 1)
    if repeats < 1:
        return None
    expanded: list[str] = []
    for name in names:
        expanded += [f"{name[:-1]}{k}" for k in range(repeats)] if name == dynamic else [name]
    return expanded


def _output_arity(spec: OpType) -> str:
    """The outputs, for messages: '1 outputs (y)', '2 or more outputs (y..., z)'."""
    more = " or more" if any(n.endswith("*") for n in spec.outputs) else ""
    names = ", ".join(f"{n[:-1]}..." if n.endswith("*") else n for n in spec.outputs)
    return f"{len(spec.outputs)}{more} outputs ({names})"


def _bind_outputs(spec: OpType, descs: Sequence[Any] | None, count: int | None,
                  concrete: bool) -> dict[str, _Operand] | None:
    if descs is None:
        if count is not None and output_names(spec, count) is None:
            raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                           f"{spec.name} has {_output_arity(spec)}, but numOutputs is {count}")
        return None
    if isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad("outputDesc", descs, "expected a list of tensor desc handles")
    names = output_names(spec, len(descs))
    if names is None:
        raise AclError(ACL_ERROR_OP_OUTPUT_NOT_MATCH,
                       f"{spec.name} has {_output_arity(spec)}, but {len(descs)} output descs "
                       f"were given")
    return {name: _operand(spec, name, ("out", j), _desc(d, f"outputDesc[{j}]"),
                           f"outputDesc[{j}]", concrete)
            for j, (name, d) in enumerate(zip(names, descs, strict=True))}


def _read_values(b: _Lowering, buffers: Sequence[Any] | None) -> None:
    """Read the value inputs (shape-deciding) on the host: const data, else the buffer."""
    for name in sorted(b.spec.values):
        b.values[name] = _read_value(b.spec, b.inputs[name], buffers)


def _infer(spec: OpType, inputs: dict[str, Any], attrs: dict[str, Any], explicit: Any,
           buffers: Sequence[Any] | None) -> _Lowering:
    """Run ``spec``'s shape rule (or its lowering in infer mode) over bound ``inputs``, the
    value inputs read from their const data or ``buffers``: the lowering, whose
    ``inferred`` (and ``values``) hold the result. What aclopInferShape and a lazily bound
    handle's output check compute."""
    b = _Lowering(spec, inputs, {}, attrs, infer=True)
    b.explicit = explicit
    try:
        _read_values(b, buffers)
        if spec.rule is not None:
            b.inferred.update(spec.rule(b))
        else:
            spec.lower(b)
    finally:
        b.release_temporaries()
    return b


def _check_value_dtype(spec: OpType, operand: _Operand) -> None:
    if operand.dtype.kind not in "iu" and not (spec.real_values and
                                               operand.data_type in FLOAT_VALUE_TYPES):
        what = "a real (integer or float)" if spec.real_values else "an integer"
        raise _fail_input(spec, operand.name, f"must be {what} tensor, not "
                                              f"{operand.data_type.name}")


def _fail_input(spec: OpType, name: str, reason: str) -> AclError:
    return AclError(ACL_ERROR_OP_INPUT_NOT_MATCH,
                    f"{spec.name}: input '{name}' does not match: {reason}")


def _read_value(spec: OpType, operand: _Operand, buffers: Sequence[Any] | None
                ) -> tuple[int | float, ...]:
    """One value input's numbers (integers; floats where the op type takes real values): its
    const data, else its buffer's bytes read now."""
    _check_value_dtype(spec, operand)
    name = operand.name
    count = math.prod(operand.dims)
    nbytes = count * operand.dtype.itemsize
    if operand.const is not None:
        raw = operand.const
    elif buffers is not None:
        index = operand.origin[1]
        if index >= len(buffers):
            raise _fail_input(spec, name, f"no buffer for it among the {len(buffers)} inputs")
        buffer = lookup_data_buffer(buffers[index], f"inputs[{index}]")
        if buffer.size < nbytes:
            raise _fail_input(spec, name, f"its buffer holds {buffer.size} bytes; the desc "
                                          f"needs {nbytes}")
        raw = memory.read_bytes(buffer.data, nbytes, f"inputs[{index}]") if nbytes else b""
    else:
        raise _fail_input(spec, name, "its value decides the output shape, so its desc must "
                                      "be made constant with set_tensor_const (this call is "
                                      "bound before any buffer exists)")
    if len(raw) < nbytes:
        raise _fail_input(spec, name, f"its const data holds {len(raw)} bytes; the desc "
                                      f"needs {nbytes}")
    values = np.frombuffer(raw[:nbytes], operand.dtype)
    if operand.data_type in FLOAT_VALUE_TYPES:
        return tuple(float(v) for v in values)
    return tuple(int(v) for v in values)


def _fresh(inputs: dict[str, Any]) -> dict[str, Any]:
    """Copies of bound operands without aclTensors, for one more binding of the same call."""
    def copy(operand: _Operand | None) -> _Operand | None:
        return None if operand is None else dataclasses.replace(operand, handle=None)
    return {name: [copy(o) for o in value] if isinstance(value, list) else copy(value)
            for name, value in inputs.items()}


class _Program:
    """A bound op call: its aclnn executors and where each of their tensors lives.

    With ``lazy`` (a handle) and a value input that is not const, nothing is bound here:
    ``run`` binds per set of values read from its buffers (see the module's design note).
    """

    def __init__(self, op_type: Any, input_desc: Sequence[Any], output_desc: Sequence[Any],
                 attr: Any, value_buffers: Sequence[Any] | None, lazy: bool = False) -> None:
        spec = _spec(op_type)
        self.spec = spec
        self._inputs = _bind_inputs(spec, input_desc, concrete=True)
        self._outputs = _bind_outputs(spec, output_desc, None, concrete=True)
        self._attrs, self._explicit = _resolve_attrs(spec, attr)
        self.num_inputs = len(input_desc)
        self.in_bytes = self._bytes(self._inputs, len(input_desc))
        self.out_bytes = [math.prod(o.dims) * o.dtype.itemsize for o in self._outputs.values()]
        self._static = _Bound([], [])  # bound at creation (no value read at run time)
        self._run_lock = threading.Lock()  # addresses set + launch is one step per run
        self._by_values: OrderedDict[tuple, _Bound] = OrderedDict()  # run-time values -> binding
        self.runtime_values = sorted(name for name in spec.values
                                     if self._inputs[name].const is None) if lazy else []
        for name in self.runtime_values:
            _check_value_dtype(spec, self._inputs[name])
        if not self.runtime_values:
            self._static = self._bind(value_buffers)

    def _bind(self, value_buffers: Sequence[Any] | None, check: bool = False) -> _Bound:
        """Phase 1 of every aclnn call of the lowering; ``check``: first compare the output
        shapes the values give with the declared output descs."""
        spec = self.spec
        if check:
            self._check_outputs(value_buffers)
        b = _Lowering(spec, _fresh(self._inputs), _fresh(self._outputs), self._attrs,
                      infer=False)
        b.explicit = self._explicit
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
        return b.bound()

    def _check_outputs(self, value_buffers: Sequence[Any] | None) -> None:
        b = _infer(self.spec, _fresh(self._inputs), self._attrs, self._explicit,
                   value_buffers)
        values = ", ".join(f"{name} {list(b.values[name])}" for name in self.runtime_values)
        for name, operand in self._outputs.items():
            if name in b.inferred and tuple(b.inferred[name][0]) != operand.dims:
                raise b.fail_output(name, f"the values read at run time ({values}) give "
                                          f"shape {list(b.inferred[name][0])}, but the handle's "
                                          f"output desc declares {list(operand.dims)}")

    def _binding_for(self, inputs: Sequence[Any]) -> _Bound:
        """The binding for the run-time values in ``inputs`` (bound now if new)."""
        if not self.runtime_values:
            return self._static
        key = tuple(_read_value(self.spec, self._inputs[name], inputs)
                    for name in self.runtime_values)
        bound = self._by_values.get(key)
        if bound is not None:
            self._by_values.move_to_end(key)
            return bound
        bound = self._bind(inputs, check=True)
        self._by_values[key] = bound
        if len(self._by_values) > BOUND_PER_HANDLE:
            _, dropped = self._by_values.popitem(last=False)
            self._release(dropped)
        return bound

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
        with self._run_lock:  # two threads running one handle must not mix their buffers
            bound = self._binding_for(inputs)
            span = profiler.begin_range(target, "aclop", self.spec.name) \
                if profiler.active else None
            scratch = addresses["tmp"] = []
            try:
                for nbytes in bound.scratch_bytes:
                    scratch.append(memory.malloc(nbytes) if nbytes else 0)
                self._launch(bound, addresses, target)
            finally:
                for address in scratch:
                    if address:
                        memory.free(address)  # stream-ordered: each launch recorded it
        if span is not None:
            span.end()

    @staticmethod
    def _launch(bound: _Bound, addresses: dict[str, list[int]], target: Any) -> None:
        for step in bound.steps:
            for index, source in enumerate(step.sources):
                if source is not None:
                    set_tensor_addr(step.executor, index, None, addresses[source[0]][source[1]])
        for step in bound.steps:
            workspace = memory.malloc(step.workspace_bytes) if step.workspace_bytes else 0
            try:
                find_executor(step.executor).launch(workspace, step.workspace_bytes, target)
            finally:
                if workspace:
                    memory.free(workspace)  # stream-ordered: reused after this work

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
        self._release(self._static)
        for bound in self._by_values.values():
            self._release(bound)
        self._static, self._by_values = _Bound([], []), OrderedDict()

    @staticmethod
    def _release(bound: _Bound) -> None:
        for step in bound.steps:
            try:
                find_executor(step.executor).release()
            except AclError:
                pass  # already gone with the runtime


def _check_rule(b: _Lowering, expected: dict[str, tuple[tuple[int, ...], DataType]]) -> None:
    for name, (shape, data_type) in expected.items():
        operand = b.outputs[name]
        if operand.dims != tuple(shape) or operand.data_type != data_type:
            raise b.fail_output(name, f"desc is {list(operand.dims)} {operand.data_type.name}; "
                                      f"expected {list(shape)} {data_type.name}")
