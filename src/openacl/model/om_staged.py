"""Dynamic-shape offline models: format 2.0 of the .om container (``om.py``).

A model converted with shape ranges (ATC's ``--input_shape "x:1~8,3,-1,-1"``) cannot be
planned once: it is run by the staged engine (``staged.py``), specialised per input shape.
Its file keeps what that needs, in the container of ``om.py`` (same header, checksums and
64-byte aligned weights blob; major version 2, which a 1.x reader refuses by name)::

    {"staged": {"onnx": base64 of the ONNX ModelProto without its big weights,
                "weights": {name: {"dtype", "shape", "offset", "nbytes"}},  # in the blob
                "ranges": {input name: [[low, high], ...]},  # high -1: unbounded
                "precision": "fp32",
                "gears": {"kind": "dims" | "image_size",   # optional: ATC's --dynamic_dims /
                          "positions": [[input, dim], ...],  # --dynamic_image_size gears
                          "shapes": [{input: [dims]}, ...]}},
     "metadata": {...}}

Loading parses the protobuf (data, never code) and checks every field: a bad base64 text,
protobuf, weight entry or range is ``ACL_ERROR_PARSE_MODEL`` naming it. The weights stay
views of the blob (zero copy) and are shared by every specialisation.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from openacl.model import om

__all__ = ["MAX_GEARS", "UNBOUNDED", "Gears", "Ranges", "StagedSource", "format_ranges",
           "parse_staged", "staged_chunks"]

UNBOUNDED = -1  # a range's high end that has no limit (ATC's -1)

Ranges = dict[str, list[tuple[int, int]]]  # input -> (low, high) per dim


@dataclass(frozen=True)
class Gears:
    """The input shapes a model converted with ATC's --dynamic_dims or --dynamic_image_size
    runs at: ``kind`` ("dims" or "image_size"), the varying dims as (input, dim index)
    ``positions`` (in --input-shape order) and one {input: shape} per gear."""

    kind: str
    positions: tuple[tuple[str, int], ...]
    shapes: tuple[dict[str, tuple[int, ...]], ...]

    def values(self, shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
        """The varying dims' values of ``shapes``, in ``positions`` order."""
        return tuple(int(shapes[name][dim]) for name, dim in self.positions)

    def index(self, shapes: Mapping[str, Sequence[int]]) -> int | None:
        """Which gear ``shapes`` are (None when they are none)."""
        for number, gear in enumerate(self.shapes):
            if all(tuple(shapes[name]) == shape for name, shape in gear.items()):
                return number
        return None


GEAR_KINDS = ("dims", "image_size")
MAX_GEARS = 100  # ATC's limit for --dynamic_dims and --dynamic_image_size


@dataclass
class StagedSource:
    """A dynamic-shape model as its file holds it."""

    proto: Any  # onnx.ModelProto, the big weights left out
    weights: dict[str, np.ndarray]
    ranges: Ranges
    precision: str = "fp32"
    gears: Gears | None = None


def staged_chunks(proto: Any, weights: Mapping[str, np.ndarray], ranges: Ranges,
                  precision: str, metadata: Mapping[str, Any] | None,
                  gears: Gears | None = None) -> Iterable[bytes | memoryview]:
    """The file of a dynamic-shape model, chunk by chunk (``om.write_chunks`` writes it)."""
    blob = om._Blob()
    table = {}
    for name, array in weights.items():
        array = np.ascontiguousarray(array)
        table[name] = {"dtype": array.dtype.name, "shape": list(array.shape),
                       "offset": blob.place(array), "nbytes": array.nbytes}
    document = {"staged": {"onnx": base64.b64encode(proto.SerializeToString()).decode("ascii"),
                           "weights": table,
                           "ranges": {name: [list(pair) for pair in dims]
                                      for name, dims in ranges.items()},
                           "precision": precision},
                "metadata": dict(metadata or {})}
    if gears is not None:
        document["staged"]["gears"] = {
            "kind": gears.kind, "positions": [list(pair) for pair in gears.positions],
            "shapes": [{name: list(shape) for name, shape in gear.items()}
                       for gear in gears.shapes]}
    return om._container(document, blob.weights, blob.bytes, om.STAGED_MAJOR, om.STAGED_MINOR)


def parse_staged(document: dict[str, Any], blob: np.ndarray) -> StagedSource:
    """The ``StagedSource`` of a 2.x document (see the module docstring for the checks)."""
    from google.protobuf.message import DecodeError
    from onnx import ModelProto

    staged = om._field(document, "staged", dict, "model")
    text = om._field(staged, "onnx", str, "staged")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise om._invalid(f"staged.onnx is not base64 text: {exc}") from None
    proto = ModelProto()
    try:
        proto.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise om._invalid(f"staged.onnx is not an ONNX model: {exc}") from None
    if not proto.graph.node and not proto.graph.output:
        raise om._invalid("staged.onnx holds an empty graph")
    weights = om._initializers(om._field(staged, "weights", dict, "staged"), blob, {})
    inputs = {value.name for value in proto.graph.input}
    ranges: Ranges = {}
    for name, dims in om._field(staged, "ranges", dict, "staged").items():
        where = f"staged.ranges[{om._short(name)}]"
        if name not in inputs:
            raise om._invalid(f"{where}: not an input of the model")
        if not isinstance(dims, list) or len(dims) > om.MAX_RANK:
            raise om._invalid(f"{where} is {om._short(dims)}, not a list of [low, high]")
        ranges[name] = [_pair(pair, where) for pair in dims]
    precision = om._field(staged, "precision", str, "staged") if "precision" in staged \
        else "fp32"
    if precision not in ("fp32", "fp16", "mixed"):
        raise om._invalid(f"staged.precision {om._short(precision)} is not fp32, fp16 or mixed")
    gears = _gears(om._field(staged, "gears", dict, "staged"), ranges) if "gears" in staged \
        else None
    return StagedSource(proto, weights, ranges, precision, gears)


def _gears(entry: dict[str, Any], ranges: Ranges) -> Gears:
    where = "staged.gears"
    kind = om._field(entry, "kind", str, where)
    if kind not in GEAR_KINDS:
        raise om._invalid(f"{where}.kind {om._short(kind)} is not one of {GEAR_KINDS}")
    positions = []
    for pair in om._field(entry, "positions", list, where):
        if not (isinstance(pair, list) and len(pair) == 2 and pair[0] in ranges and
                isinstance(pair[1], int) and not isinstance(pair[1], bool) and
                0 <= pair[1] < len(ranges[pair[0]])):
            raise om._invalid(f"{where}.positions: {om._short(pair)} is not [input, dim]")
        positions.append((pair[0], pair[1]))
    shapes = om._field(entry, "shapes", list, where)
    if not positions or not 1 <= len(shapes) <= MAX_GEARS:
        raise om._invalid(f"{where}: expected varying dims and 1 to {MAX_GEARS} gears")
    parsed = []
    for number, gear in enumerate(shapes):
        if not isinstance(gear, dict) or set(gear) != set(ranges):
            raise om._invalid(f"{where}.shapes[{number}] does not give every input a shape")
        shaped = {}
        for name, shape in gear.items():
            if not isinstance(shape, list) or len(shape) != len(ranges[name]) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and low <= d and
                    (high == UNBOUNDED or d <= high)
                    for d, (low, high) in zip(shape, ranges[name], strict=True)):
                raise om._invalid(f"{where}.shapes[{number}][{om._short(name)}] = "
                                  f"{om._short(shape)} is outside the input's range")
            shaped[name] = tuple(shape)
        parsed.append(shaped)
    return Gears(kind, tuple(positions), tuple(parsed))


def _pair(pair: Any, where: str) -> tuple[int, int]:
    if not (isinstance(pair, list) and len(pair) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in pair)):
        raise om._invalid(f"{where}: {om._short(pair)} is not [low, high]")
    low, high = pair
    if low < 0 or low > om.MAX_TENSOR_ELEMENTS or (high != UNBOUNDED and high < low) or \
            high > om.MAX_TENSOR_ELEMENTS:
        raise om._invalid(f"{where}: [{low}, {high}] is not a range (0 <= low <= high, or "
                          f"high {UNBOUNDED} for no limit)")
    return low, high


def format_ranges(dims: Sequence[tuple[int, int]]) -> str:
    """ATC's spelling of a shape range: ``1~8,3,-1``."""
    parts = []
    for low, high in dims:
        if low == high:
            parts.append(str(low))
        elif high == UNBOUNDED and low == 1:
            parts.append("-1")
        else:
            parts.append(f"{low}~{high}")
    return ",".join(parts)
