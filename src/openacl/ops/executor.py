"""aclOpExecutor: what phase 1 binds and phase 2 runs.

Design note (invariants)
------------------------
* Phase 1 (``get_workspace_size``) validates everything and returns ``(workspace_size,
  executor)``; nothing touches memory yet. The executor keeps a snapshot of every tensor
  argument (shape, strides, offset, dtype, address) and the kernel the operator built.
* Phase 2 (``launch``) checks the workspace, resolves every tensor's memory through the
  pointer table (so a bad address fails here, synchronously, naming the tensor), records
  cross-stream use with the allocator, and enqueues one task on the stream. It returns at
  once; results are defined after the stream is synchronized.
* An executor is single-use: phase 2 consumes it (its handle is gone; using it again is
  ``ACLNN_ERR_INNER_NULLPTR`` 561103). ``set_executor_repeatable`` right after phase 1 makes
  it reusable: it then runs any number of times, takes new tensor addresses through
  ``set_input_tensor_addr`` / ``set_output_tensor_addr`` / ``set_tensor_addr``, and lives
  until ``destroy_executor``. Input and output indices count the tensor arguments in
  declaration order; an in-place argument (``selfRef``) is both an input and an output.
* A queued task holds its own views (and references keeping the memory alive); changing an
  executor's addresses afterwards affects only later launches.
* A repeatable executor caches its resolved views between launches on the same stream; the
  cache is used only while every region it resolved is still live (a free or a retired
  registration marks a region dead), and any address change drops it. So a launch after a
  free fails exactly as the first launch would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from openacl.dtypes import data_type_size
from openacl.errors import (
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    AclError,
)
from openacl.ops.call import Call, Epilogue, Kernel, TensorArg, Views
from openacl.ops.registry import REGISTRY
from openacl.runtime import core, profiler, sanitizer
from openacl.runtime.memory import use_on_stream
from openacl.runtime.stream import resolve_stream
from openacl.tensor import AclTensor, tensor_view, view_span


def _argument(tensor_name: str) -> str:
    """The argument a tensor belongs to: ``x1`` for ``x1`` and for list element ``x1[0]``."""
    return tensor_name.split("[", 1)[0]


class OpExecutor:
    """A bound operator call (aclOpExecutor)."""

    def __init__(self, op_name: str, call: Call, kernel: Kernel) -> None:
        self.op_name = op_name
        self.call = call
        self.kernel = kernel
        self.workspace_bytes = call.workspace_bytes
        declared = call.tensors()
        # in-place arguments (selfRef; a tensor list's elements are named x[0], x[1]...) are
        # read and written
        in_out = set(call.aliases.values())
        self.inputs = [t for t in declared if not t.output or _argument(t.name) in in_out]
        self.outputs = [t for t in declared if t.output]
        self.tensors = self.inputs + [t for t in self.outputs
                                      if _argument(t.name) not in in_out]
        self.repeatable = False
        self._cache: tuple[Views, list, Any] | None = None  # views, keep, stream
        self.handle = core.current().handles.add(self)

    def __index__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<aclOpExecutor aclnn{self.op_name} {self.handle:#x}>"

    def _views(self, stream) -> tuple[Views, list]:
        cache = self._cache
        if cache is not None and cache[2] is stream:
            for region, _ in cache[1]:
                if not region.live:
                    break
            else:
                return cache[0], cache[1]
        views, keep = self._resolve()
        for region, _ in keep:
            use_on_stream(region, stream)
        if self.repeatable:
            self._cache = (views, keep, stream)
        return views, keep

    def _resolve(self) -> tuple[Views, list]:
        """Views of every tensor argument (bounds-checked now) and what keeps them alive."""
        arrays: dict[str, Any] = {}
        keep = []
        for arg in self.tensors:
            view, keepalive = tensor_view(arg.meta, arg.name, write=arg.output)
            if keepalive is not None:
                keep.append(keepalive)
            base, _, index = arg.name.partition("[")
            if index:
                arrays.setdefault(base, []).append(view)
            else:
                arrays[arg.name] = view
        return Views(arrays, self.call.aliases), keep

    def bound_kernel(self, workspace: Any = None, constant: frozenset[str] = frozenset(),
                     epilogue: Epilogue | None = None) -> Callable[[], None]:
        """The kernel bound to its views, for a caller that runs it itself on the host, in
        order and synchronously (the model engine's ``run``). The caller owns the memory and
        keeps it allocated while it uses the callable; it promises that the inputs named in
        ``constant`` never change meanwhile (``Views.constant``). ``epilogue``: an
        activation of the operator's ``epilogues`` applied to its output (``Views``)."""
        if epilogue is not None:
            op = REGISTRY.get(self.op_name)
            applies = op.epilogues if op is not None else frozenset()
            if epilogue.name not in applies:
                raise AclError(ACLNN_ERR_PARAM_INVALID,
                               f"aclnn{self.op_name}: argument 'epilogue' = "
                               f"{epilogue.name!r} is not one it applies: {sorted(applies)}")
        views, _ = self._resolve()
        views.workspace = workspace
        views.constant = frozenset(constant)
        views.epilogue = epilogue
        return functools.partial(self.kernel, views)

    def launch(self, workspace: int, workspace_size: int, stream: Any) -> None:
        size = workspace_size if type(workspace_size) is int else core.as_index(workspace_size)
        if size is None or size < self.workspace_bytes:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"aclnn{self.op_name}: argument 'workspaceSize' = {workspace_size!r} "
                           f"is smaller than the {self.workspace_bytes} bytes phase 1 asked for")
        target = resolve_stream(stream)
        views, keep = self._views(target)
        if self.workspace_bytes:
            views = Views(views, {})  # a copy: the workspace differs from launch to launch
            region, offset = core.current().pointers.resolve(workspace, self.workspace_bytes,
                                                             "workspace", write=True)
            use_on_stream(region, target)
            views.workspace = region.view(offset, self.workspace_bytes)
            keep = [*keep, region]
        if not self.repeatable:
            self.release()
        if profiler.active:
            profiler.label("aclnn", "aclnn" + self.op_name)
        if sanitizer.active:  # inputs read, outputs and workspace written (sanitizer.py)
            sanitizer.label("aclnn" + self.op_name, self._accesses(workspace))
        # the views hold their memory (see tensor_view); a partial is the cheapest task
        target.submit(functools.partial(self.kernel, views))

    def _accesses(self, workspace: int) -> list:
        """(region, offset, nbytes, write) of every tensor and the workspace, for the
        sanitizer: a tensor's bytes run from its first element to the end of its span."""
        pointers = core.current().pointers
        accesses = []
        for arg in [*self.inputs, *self.outputs]:
            meta = arg.meta
            span = view_span(meta.view_dims, meta.strides, meta.offset) - meta.offset
            if span <= 0 or not meta.data:
                continue
            itemsize = data_type_size(meta.data_type)
            start, nbytes = meta.data + meta.offset * itemsize, span * itemsize
            region = pointers.lookup(start, nbytes)
            if region is not None:
                accesses.append((region, start - region.start, nbytes, arg.output))
        address = core.as_index(workspace)
        if self.workspace_bytes and address:
            region = pointers.lookup(address, self.workspace_bytes)
            if region is not None:
                accesses.append((region, address - region.start, self.workspace_bytes, True))
        return accesses

    def release(self) -> None:
        core.current().handles.remove(self.handle)


def _missing_executor(executor: Any) -> AclError:
    return AclError(ACLNN_ERR_INNER_NULLPTR,
                    f"argument 'executor' = {executor!r} is not a live aclOpExecutor: it was "
                    f"already run (executors are single-use unless set_executor_repeatable "
                    f"was called right after phase 1), destroyed, or never created")


def find_executor(executor: Any) -> OpExecutor:
    """The live executor behind ``executor``, or the 561103 error that explains why not."""
    try:
        return core.current().handles.get(executor, OpExecutor, "executor",
                                          ACLNN_ERR_INNER_NULLPTR)
    except AclError:
        raise _missing_executor(executor) from None


def set_executor_repeatable(executor: Any) -> None:
    """Make ``executor`` reusable (aclSetAclOpExecutorRepeatable)."""
    find_executor(executor).repeatable = True


def destroy_executor(executor: Any) -> None:
    """Release a repeatable executor (aclDestroyAclOpExecutor)."""
    find_executor(executor).release()


def _set_addr(executor: Any, pool_name: str, index: Any, tensor: Any, addr: Any) -> None:
    exe = find_executor(executor)
    pool = {"inputs": exe.inputs, "outputs": exe.outputs, "tensors": exe.tensors}[pool_name]
    position = core.as_index(index)
    if position is None or not 0 <= position < len(pool):
        raise AclError(ACLNN_ERR_PARAM_INVALID,
                       f"argument 'index' = {index!r} is invalid: aclnn{exe.op_name} has "
                       f"{len(pool)} {pool_name} ({', '.join(t.name for t in pool)})")
    arg: TensorArg = pool[position]
    address = core.as_index(addr)
    if address is None:
        raise AclError(ACLNN_ERR_PARAM_INVALID, f"argument 'addr' = {addr!r} is not a pointer")
    meta = None
    if tensor is not None:
        meta = core.current().handles.get(tensor, AclTensor, "tensor", ACLNN_ERR_PARAM_INVALID)
        if meta.view_dims != arg.meta.view_dims or meta.data_type != arg.meta.data_type:
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"argument 'tensor' does not match {pool_name}[{position}] "
                           f"('{arg.name}') of aclnn{exe.op_name}")
    candidate = AclTensor(arg.meta.view_dims, arg.meta.data_type, arg.meta.strides,
                          arg.meta.offset, arg.meta.format, arg.meta.storage_dims, address)
    tensor_view(candidate, "addr", write=arg.output)  # bounds-check first, then change
    if meta is not None:
        meta.data = address
    arg.meta.data = address
    exe._cache = None


def set_input_tensor_addr(executor: Any, index: int, tensor: Any, addr: int) -> None:
    """Give input ``index`` of a repeatable executor a new address (aclSetInputTensorAddr)."""
    _set_addr(executor, "inputs", index, tensor, addr)


def set_output_tensor_addr(executor: Any, index: int, tensor: Any, addr: int) -> None:
    """Give output ``index`` a new address (aclSetOutputTensorAddr)."""
    _set_addr(executor, "outputs", index, tensor, addr)


def set_tensor_addr(executor: Any, index: int, tensor: Any, addr: int) -> None:
    """Give tensor ``index`` (inputs then outputs, in declaration order) a new address."""
    _set_addr(executor, "tensors", index, tensor, addr)
