"""One-shot helpers: ``openacl.ops.add(x, y)`` allocates outputs and workspace, runs both
phases on the current stream and returns the output Tensor(s).

Arguments are Tensors (or aclTensor handles), numpy arrays (copied to the device for the
call), Python numbers for aclScalar arguments (lists of them for aclScalarList ones), and
lists for arrays. Results are defined
after the stream is synchronized (``Tensor.numpy()`` does that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from openacl.dtypes import from_numpy_dtype
from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError, public
from openacl.ops.dispatch import bind_arguments
from openacl.ops.registry import OpDef
from openacl.ops.signature import python_signature
from openacl.runtime import memory
from openacl.runtime.stream import resolve_stream
from openacl.tensor import Tensor, create_scalar, destroy_scalar, empty, to_device

NUMBERS = (bool, int, float, complex, np.generic)  # Python values an aclScalar is made of


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, np.generic):
        return value.dtype
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, complex):
        return np.dtype(np.complex64)
    return np.dtype(np.float32)


def _allocate(spec: Any) -> Any:
    """A new output for an inferred ``(shape, dtype)``, or a list of them."""
    if isinstance(spec, list):
        return [empty(shape, dtype) for shape, dtype in spec]
    return empty(*spec)


def make_one_shot(op: OpDef, phase1: Callable, phase2: Callable) -> Callable[..., Any]:
    signature = python_signature(op.inputs, with_defaults=True)
    kinds = {p.name: p.kind for p in op.params}
    outputs = [p.name for p in op.outputs if p.name not in {a for _, a in op.aliases}]
    inplace = list(dict.fromkeys(a for _, a in op.aliases))

    def one_shot(*args: Any, stream: Any = None, **kwargs: Any) -> Any:
        raw = bind_arguments(op, signature, args, kwargs, defaults=True)
        temporaries: list[Tensor] = []
        scalars: list[int] = []
        try:
            for name, value in raw.items():
                if kinds[name] == "tensor" and isinstance(value, (np.ndarray, np.generic)):
                    raw[name] = to_device(np.asarray(value))
                    temporaries.append(raw[name])
                elif kinds[name] == "tensors" and isinstance(value, (list, tuple)):
                    converted = [to_device(v) if isinstance(v, np.ndarray) else v
                                 for v in value]
                    temporaries.extend(t for t, v in zip(converted, value, strict=True)
                                       if t is not v)
                    raw[name] = converted
                elif kinds[name] == "scalar" and isinstance(value, NUMBERS):
                    handle = create_scalar(value, from_numpy_dtype(_scalar_dtype(value)))
                    scalars.append(handle)
                    raw[name] = handle
                elif kinds[name] == "scalars" and isinstance(value, (list, tuple)):
                    made = [create_scalar(v, from_numpy_dtype(_scalar_dtype(v)))
                            if isinstance(v, NUMBERS) else v for v in value]
                    scalars.extend(h for h, v in zip(made, value, strict=True) if h is not v)
                    raw[name] = made
            for name in inplace:
                if any(raw.get(name) is temporary for temporary in temporaries):
                    raise AclError(ACLNN_ERR_PARAM_INVALID,
                                   f"{op.c_name}: argument '{name}' is written in place, so it "
                                   f"must be a device tensor, not a host array")
            call, _ = op.bind(raw, infer=True)
            results = {name: _allocate(call.inferred[name]) for name in outputs
                       if name in call.inferred}
            raw.update(results)
            workspace_size, executor = phase1(op, raw)
            target = resolve_stream(stream)
            workspace = memory.malloc(workspace_size) if workspace_size else 0
            try:
                phase2(op, workspace, workspace_size, executor, target)
            finally:
                if workspace:
                    memory.free(workspace)  # stream-ordered: reused only after this work
            if temporaries:
                target.synchronize()
        finally:
            for tensor in temporaries:
                tensor.free()
            for handle in scalars:
                destroy_scalar(handle)
        values = [results[n] for n in outputs if n in results] + [raw[n] for n in inplace]
        return values[0] if len(values) == 1 else tuple(values)

    one_shot.__name__ = one_shot.__qualname__ = op.snake_name
    one_shot.__doc__ = f"One-shot {op.c_name}: allocates outputs, runs, returns them.\n\n{op.doc}"
    one_shot.__signature__ = signature  # type: ignore[attr-defined]
    return public(one_shot)  # an AclError leaving it records the recent error message


def one_shot_face(op: OpDef) -> Callable[..., Any]:
    """The one-shot helper of ``op`` over the two phases (the face ops/faces.py caches)."""
    from openacl.ops.dispatch import phase1, phase2

    return make_one_shot(op, phase1, phase2)
