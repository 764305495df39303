"""Padding operators: constant padding of any dims (ConstantPadNd), and reflection,
replication and circular padding of the last 1, 2 or 3 dims with the gradient of each.

Semantics are aclnn's, which are PyTorch's (``F.pad`` with ``mode="constant"``,
``"reflect"``, ``"replicate"``, ``"circular"``; ``torch.autograd`` for the Backward
operators). ``padding`` lists (before, after) pairs from the last dim backwards; a negative
entry crops. Forward pads move values without arithmetic, so they are bit-exact in every
dtype; a Backward operator sums the gradients of every output position that reads the same
input position, in float32 for float16 / bfloat16 (float64 for float64), rounded once.

One engine serves every non-constant mode: along each padded dim, the input position each
output position reads (the *source*) splits into a few runs that step by +1, -1 or 0 (the
centre, a mirrored border, a replicated edge). A forward pad copies one block per
combination of runs; its backward adds the same blocks back, summing over step-0 runs.
Both are a handful of slice copies, whatever the sizes, on any array module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import ALL_DTYPES, COMPLEX_DTYPES, Call, Kernel, array_module, as_array
from openacl.ops.movement import BF16, F16, F32, F64, I8, I32, _fill_value, _out_like
from openacl.ops.registry import register

__all__: list[str] = []

REFLECT, REPLICATE, CIRCULAR = "reflect", "replicate", "circular"
# dtype lists of the aclnn documents (numpy-holdable ones)
PAD_DTYPES = ALL_DTYPES  # ReflectionPad*d, ReplicationPad*d
CIRCULAR_DTYPES = F16 | BF16 | F32 | I8 | I32
GRAD_DTYPES = BF16 | F16 | F32 | F64 | COMPLEX_DTYPES  # Reflection/ReplicationPad*dBackward
CIRCULAR_GRAD_DTYPES = F16 | BF16 | F32
MAX_ARRAY_BYTES = np.iinfo(np.intp).max  # the largest output numpy can describe, bytes


# -- ConstantPadNd ----------------------------------------------------------------------------
def _pad_pairs(c: Call, name: str, shape: tuple[int, ...], pads: Sequence[int]
               ) -> list[tuple[int, int]]:
    """PyTorch's pad list (last dim first, before/after pairs) as per-dim pairs; the
    padded size of each dim must stay >= 0."""
    pairs = [(0, 0)] * len(shape)
    for k in range(len(pads) // 2):
        pairs[len(shape) - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    for k, (n, (before, after)) in enumerate(zip(shape, pairs, strict=True)):
        if n + before + after < 0:
            raise c.fail(name, f"pads ({before}, {after}) make dim {k} of size {n} negative")
    return pairs


@register("ConstantPadNd", "self: tensor, pad: int_array, value: scalar, out: tensor!")
def constant_pad_nd(c: Call) -> Kernel:
    """Pad ``self`` with ``value``; ``pad`` lists (before, after) pairs from the last dim
    backwards; negative pads crop (``F.pad(mode="constant")``)."""
    self = c.tensor("self")
    c.check_dtype("self", ALL_DTYPES)
    pads = list(c["pad"])
    if len(pads) % 2 or len(pads) > 2 * self.ndim:
        raise c.fail("pad", f"must hold an even number of entries, at most {2 * self.ndim}")
    pairs = _pad_pairs(c, "pad", self.shape, pads)
    value = _fill_value(c, "value", self.dtype)
    shape = tuple(n + b + a for n, (b, a) in zip(self.shape, pairs, strict=True))
    _out_like(c, shape, self.dtype)

    def kernel(v) -> None:
        out = v["out"]
        out[...] = value[()]  # a scalar: device arrays take no host arrays
        source = tuple(slice(max(-b, 0), n - max(-a, 0))
                       for (b, a), n in zip(pairs, self.shape, strict=True))
        target = tuple(slice(max(b, 0), m - max(a, 0))
                       for (b, a), m in zip(pairs, shape, strict=True))
        if all(s.stop > s.start for s in source):
            np.copyto(out[target], v["self"][source])
    return kernel


# -- the run engine ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """Output positions ``[start, start + length)`` of one dim read input positions
    ``source, source + step, ...`` (step 0: all read ``source``)."""

    start: int
    length: int
    source: int
    step: int

    @property
    def out(self) -> slice:
        return slice(self.start, self.start + self.length)

    @property
    def into(self) -> slice:
        """The input positions as a slice (one position for a step-0 run)."""
        if self.step == 0:
            return slice(self.source, self.source + 1)
        stop = self.source + self.step * self.length
        return slice(self.source, stop if stop >= 0 else None, self.step)


def dim_runs(size: int, before: int, after: int, mode: str) -> tuple[Run, ...]:
    """The runs of one padded dim (``mode`` as in ``F.pad``; negative pads crop): the
    border before, the centre that reads the input in place, the border after. A
    replicated border is one step-0 run however long; a reflected or circular one is at
    most the dim long. A circular pad wraps within what is left after a crop, as
    PyTorch's does."""
    low = max(-before, 0)  # the first input position a crop keeps
    start, kept = max(before, 0), size - low - max(-after, 0)
    center = Run(start, kept, low, 1)
    if mode == REPLICATE:
        return ((Run(0, start, 0, 0),) if start else ()) + (center,) + (
            (Run(start + kept, after, size - 1, 0),) if after > 0 else ())
    offsets = np.concatenate([np.arange(-start, 0), np.arange(kept, kept + max(after, 0))])
    if mode == CIRCULAR:
        source = offsets % kept + low
    else:  # reflect about the first and the last input position
        position = np.abs(offsets + low)
        source = np.where(position >= size, 2 * (size - 1) - position, position)
    return runs_of(source[:start]) + (center,) + runs_of(source[start:], start + kept)


def runs_of(source: np.ndarray, first: int = 0) -> tuple[Run, ...]:
    """``source`` (the input positions output positions ``first, first + 1, ...`` read)
    split into maximal runs of step -1, 0 or +1."""
    runs, start, total = [], 0, len(source)
    steps = np.diff(source).tolist()
    while start < total:
        step = steps[start] if start < total - 1 else 1
        end = start + 1
        if step in (-1, 0, 1):
            while end < total and steps[end - 1] == step:
                end += 1
        else:
            step = 1  # a jump: a run of one
        runs.append(Run(first + start, end - start, int(source[start]), step))
        start = end
    return tuple(runs)


def _blocks(runs: Sequence[tuple[Run, ...]], lead: int) -> list[tuple[tuple, tuple, tuple]]:
    """Per combination of runs over the padded dims: (output index, input index, the axes
    whose runs have step 0)."""
    keep = (slice(None),) * lead
    blocks = []
    for combo in product(*runs):
        summed = tuple(lead + k for k, run in enumerate(combo) if run.step == 0 and
                       run.length > 1)
        blocks.append((keep + tuple(r.out for r in combo), keep + tuple(r.into for r in combo),
                       summed))
    return blocks


@dataclass(frozen=True)
class Padding:
    """A validated pad of the last ``len(runs)`` dims."""

    shape: tuple[int, ...]  # the padded (output) shape
    blocks: list[tuple[tuple, tuple, tuple]]


def _plan(c: Call, kind: int, mode: str, supported: frozenset[np.dtype]) -> Padding:
    """Phase 1 shared by the pads of ``kind`` (1, 2, 3) trailing dims: rank ``kind + 1``
    or ``kind + 2``; ``padding`` holds ``2 * kind`` entries (left, right, top, bottom,
    front, back); only the batch dim may be empty; a reflected pad must be smaller than
    its dim, a circular one at most its dim."""
    self = c.tensor("self")
    ranks = (kind + 1, kind + 2)
    if self.ndim not in ranks:
        raise c.fail("self", f"must have {ranks[0]} or {ranks[1]} dims")
    c.check_dtype("self", supported)
    pads = list(c["padding"])
    if len(pads) != 2 * kind:
        raise c.fail("padding", f"must hold {2 * kind} entries (before, after per padded "
                                f"dim, the last dim first)")
    if any(n == 0 for n in self.shape[-kind - 1:]):
        raise c.fail("self", "only the batch dim of the largest rank may be empty")
    for k, pad in enumerate(pads):
        size = self.shape[-1 - k // 2]
        if (mode == REFLECT and pad >= size) or (mode == CIRCULAR and pad > size):
            bound = "smaller than" if mode == REFLECT else "at most"
            raise c.fail("padding", f"entry {k} = {pad} must be {bound} the dim it pads "
                                    f"({size})")
    lead = self.ndim - kind
    runs, shape = [], list(self.shape)
    for axis in range(lead, self.ndim):
        k = self.ndim - 1 - axis  # (before, after) pair k pads this axis
        before, after = pads[2 * k], pads[2 * k + 1]
        shape[axis] = self.shape[axis] + before + after
        if shape[axis] <= 0:
            raise c.fail("padding", f"pads ({before}, {after}) leave dim {axis} of size "
                                    f"{self.shape[axis]} empty")
        kept = self.shape[axis] - max(-before, 0) - max(-after, 0)
        if kept <= 0:
            raise c.fail("padding", f"pads ({before}, {after}) crop all of dim {axis} "
                                    f"(size {self.shape[axis]})")
        if mode == CIRCULAR and max(before, after) > kept:
            raise c.fail("padding", f"pads ({before}, {after}) wrap dim {axis} more than "
                                    f"once ({kept} positions are left after the crop)")
    if math.prod(shape) * self.dtype.itemsize > MAX_ARRAY_BYTES:
        raise c.fail("padding", f"makes an output of shape {shape}, more than memory holds")
    for axis in range(lead, self.ndim):
        k = self.ndim - 1 - axis
        runs.append(dim_runs(self.shape[axis], pads[2 * k], pads[2 * k + 1], mode))
    return Padding(tuple(shape), _blocks(runs, lead))


def _pad(kind: int, mode: str, supported: frozenset[np.dtype]):
    def prepare(c: Call) -> Kernel:
        plan = _plan(c, kind, mode, supported)
        _out_like(c, plan.shape, c.tensor("self").dtype)

        def kernel(v) -> None:
            out, x = v["out"], as_array(v["self"])
            for target, source, _ in plan.blocks:
                np.copyto(out[target], x[source])  # a step-0 run broadcasts
        return kernel
    prepare.__doc__ = (f"Pad the last {kind} dim(s) of ``self`` ({mode} mode of "
                       f"``F.pad``); ``padding`` is (left, right[, top, bottom[, front, "
                       f"back]]), negative entries crop.")
    return prepare


def _pad_backward(kind: int, mode: str, supported: frozenset[np.dtype]):
    def prepare(c: Call) -> Kernel:
        plan = _plan(c, kind, mode, supported)
        self, grad = c.tensor("self"), c.tensor("gradOutput")
        if grad.dtype != self.dtype:
            raise c.fail("gradOutput", f"dtype must equal self's ({self.dtype})")
        if grad.shape != plan.shape:
            raise c.fail("gradOutput", f"shape must be the padded shape {list(plan.shape)}")
        _out_like(c, self.shape, self.dtype, "gradInput")
        compute = promotion.compute_dtype(self.dtype)

        def kernel(v) -> None:
            g = v.compute("gradOutput", self.dtype)  # widened once (F16C for float16)
            total = _zeros_like(g, self.shape, compute)
            for source, target, summed in plan.blocks:
                part = g[source]
                if summed:
                    part = part.sum(axis=summed, keepdims=True)
                total[target] += part
            v.write("gradInput", total)
        return kernel
    prepare.__doc__ = (f"The gradient of {mode} padding of the last {kind} dim(s): each "
                       f"input position gets the sum of ``gradOutput`` over the output "
                       f"positions that read it.")
    return prepare


def _zeros_like(array: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Zeros of ``shape`` and ``dtype`` in ``array``'s module (numpy or a device one)."""
    return array_module(array).zeros(shape, dtype)


_FORWARD_SIGNATURE = "self: tensor, padding: int_array, out: tensor!"
_BACKWARD_SIGNATURE = "gradOutput: tensor, self: tensor, padding: int_array, gradInput: tensor!"
for _kind in (1, 2, 3):
    for _mode, _name, _dtypes, _grad_dtypes in (
        (REFLECT, "ReflectionPad", PAD_DTYPES, GRAD_DTYPES),
        (REPLICATE, "ReplicationPad", PAD_DTYPES, GRAD_DTYPES),
        (CIRCULAR, "CircularPad", CIRCULAR_DTYPES, CIRCULAR_GRAD_DTYPES),
    ):
        if _mode == CIRCULAR and _kind == 1:
            continue  # aclnn has no CircularPad1d
        register(f"{_name}{_kind}d", _FORWARD_SIGNATURE, silent=True)(
            _pad(_kind, _mode, _dtypes))
        register(f"{_name}{_kind}dBackward", _BACKWARD_SIGNATURE)(
            _pad_backward(_kind, _mode, _grad_dtypes))

