"""Max unpooling, the inverse of max pooling, and its gradient: aclnnMaxUnpool2d,
MaxUnpool3d, MaxUnpool2dBackward and MaxUnpool3dBackward, with CANN's argument lists.

Semantics are PyTorch's ``F.max_unpool2d`` / ``F.max_unpool3d``: with the spatial dims of
each (batch, channel) plane flattened, ``out[..., indices[..., i]] = self[..., i]`` on an
output of zeros sized ``outputSize`` (H, W or D, H, W); where several positions name one
output element the last one wins. The backward gathers: ``out[..., i] = gradOutput[...,
indices[..., i]]``, which is the gradient of the unpooling (checked against autograd). The
3-d forms take ``stride`` and ``padding``, which CANN's document reserves (validated, not
used: the indices say where everything goes). Index values live in device memory: one
outside the output plane fails the stream in the kernel, naming it.
"""

from __future__ import annotations

import math

import numpy as np

from openacl.ops.call import BOOL_DTYPES, Call, Kernel, TensorArg
from openacl.ops.indexing import host, store
from openacl.ops.movement import (
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    INDEX_DTYPES,
    U8,
    _check_index_range,
)
from openacl.ops.registry import register

UNPOOL_DTYPES = F32 | F16 | I16 | I32 | I64 | I8 | U8 | F64
UNPOOL_BACKWARD_DTYPES = F32 | F16 | I32 | I64 | I16 | I8 | U8 | BOOL_DTYPES


def _spatial(c: Call, name: str, spatial: int) -> TensorArg:
    """``name`` with ``spatial`` trailing spatial dims after one or two leading ones; the
    3-d forms refuse empty channel and spatial dims (CANN's document)."""
    tensor = c.tensor(name)
    if tensor.ndim not in (spatial + 1, spatial + 2):
        raise c.fail(name, f"must have {spatial + 1} or {spatial + 2} dims")
    if spatial == 3 and any(n <= 0 for n in tensor.shape[1:]):
        raise c.fail(name, "its channel and spatial dims must be non-empty")
    return tensor


def _sizes(c: Call, name: str, spatial: int, positive: bool = False) -> tuple[int, ...]:
    values = tuple(c[name])
    if len(values) != spatial:
        raise c.fail(name, f"must hold {spatial} values")
    if positive and any(v <= 0 for v in values):
        raise c.fail(name, "values must be positive")
    if any(v < 0 for v in values):
        raise c.fail(name, "values must be non-negative")
    return values


def _operands(c: Call, spatial: int, dtypes: frozenset[np.dtype]
              ) -> tuple[TensorArg, tuple[int, ...]]:
    """Validate self, indices, outputSize (and the reserved stride and padding of the 3-d
    forms); returns (self, outputSize)."""
    self = _spatial(c, "self", spatial)
    c.check_dtype("self", dtypes)
    indices = c.tensor("indices")
    c.check_dtype("indices", INDEX_DTYPES)
    if indices.shape != self.shape:
        raise c.fail("indices", f"shape must equal self's {list(self.shape)}")
    size = _sizes(c, "outputSize", spatial)
    if spatial == 3:
        _sizes(c, "stride", spatial, positive=True)
        _sizes(c, "padding", spatial)
    return self, size


def _unpool(c: Call, op: str, spatial: int, out_name: str) -> Kernel:
    self, size = _operands(c, spatial, UNPOOL_DTYPES)
    plane = math.prod(self.shape[-spatial:])
    if math.prod(size) < plane:
        raise c.fail("outputSize", f"holds {math.prod(size)} elements per plane; self has "
                                   f"{plane}")
    lead = self.shape[:-spatial]
    c.check_out(out_name, (*lead, *size), self.dtype, exact_dtype=True)
    planes, target = math.prod(lead), math.prod(size)

    def kernel(v) -> None:
        idx = _check_index_range(op, "indices", host(v["indices"]).reshape(planes, plane),
                                 target)
        result = np.zeros((planes, target), self.dtype)
        rows = np.broadcast_to(np.arange(planes)[:, None], idx.shape)
        result[rows, idx] = host(v["self"]).reshape(planes, plane)  # (later ones win)
        store(v[out_name], result.reshape(*lead, *size))
    return kernel


@register("MaxUnpool2d", "self: tensor, indices: tensor, outputSize: int_array, out: tensor!")
def max_unpool2d(c: Call) -> Kernel:
    """``self``'s values placed at ``indices`` in planes of ``outputSize`` (H, W), zeros
    elsewhere (``F.max_unpool2d``); self is (C, H, W) or (N, C, H, W)."""
    return _unpool(c, "MaxUnpool2d", 2, "out")


@register("MaxUnpool3d", "self: tensor, indices: tensor, outputSize: int_array, "
                         "stride: int_array, padding: int_array, outRef: tensor!")
def max_unpool3d(c: Call) -> Kernel:
    """MaxUnpool2d over (D, H, W): self is (N, D, H, W) or (N, C, D, H, W)."""
    return _unpool(c, "MaxUnpool3d", 3, "outRef")


def _unpool_backward(c: Call, op: str, spatial: int) -> Kernel:
    self, size = _operands(c, spatial, UNPOOL_BACKWARD_DTYPES)
    grad = c.tensor("gradOutput")
    if grad.dtype != self.dtype:
        raise c.fail("gradOutput", f"dtype must equal self's ({self.dtype})")
    lead = self.shape[:-spatial]
    if grad.shape != (*lead, *size):
        raise c.fail("gradOutput", f"shape must be {[*lead, *size]} (self's leading dims + "
                                   f"outputSize)")
    c.check_out("out", self.shape, self.dtype)
    if c["out"] is not None:
        c.check_dtype("out", UNPOOL_BACKWARD_DTYPES)
    planes, plane, source = math.prod(lead), math.prod(self.shape[-spatial:]), math.prod(size)

    def kernel(v) -> None:
        idx = _check_index_range(op, "indices", host(v["indices"]).reshape(planes, plane),
                                 source)
        rows = host(v["gradOutput"]).reshape(planes, source)
        store(v["out"], np.take_along_axis(rows, idx, 1).reshape(self.shape))
    return kernel


@register("MaxUnpool2dBackward", "gradOutput: tensor, self: tensor, indices: tensor, "
                                 "outputSize: int_array, out: tensor!")
def max_unpool2d_backward(c: Call) -> Kernel:
    """The gradient of MaxUnpool2d: ``out[..., i] = gradOutput[..., indices[..., i]]``."""
    return _unpool_backward(c, "MaxUnpool2dBackward", 2)


@register("MaxUnpool3dBackward", "gradOutput: tensor, self: tensor, indices: tensor, "
                                 "outputSize: int_array, stride: int_array, "
                                 "padding: int_array, out: tensor!")
def max_unpool3d_backward(c: Call) -> Kernel:
    """The gradient of MaxUnpool3d."""
    return _unpool_backward(c, "MaxUnpool3dBackward", 3)
