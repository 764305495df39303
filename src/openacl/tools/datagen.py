"""Input data for operator cases, and the ``.bin`` / ``.npy`` files the tools exchange.

A case describes its inputs the way CANN's case rules do (the ecosystem standard's
"用例生成规则" in hicann/opbase ``docs/zh/ops_precision_standard/experimental_standard.md``
§1, and msOpST's ``data_distribution`` / ``value_range``): per input a name, shape, dtype,
a uniform range or a normal (mean, std), and special values (NaN, +inf, -inf) injected at a
fraction of the elements or at explicit positions. Empty (a 0 dim) and one-element shapes
are ordinary shapes.

Generation is deterministic: input ``i`` of a case with seed ``s`` draws from
``np.random.default_rng([s, i])``, so changing one input's rule leaves the others' data
unchanged (``i`` is the input's position in ``input_desc``, absent optional inputs counted).

A case is this module's ``{"inputs": [...]}`` or CANN's single-op JSON (``input_desc``): its
inputs are then named by ``openacl.aclop.singleop.io_names`` (a desc's ``name``, else the op type's
IR name: MatMul's x1, x2), the rule ``openacl op run`` uses, so the files gen-data writes are
the files op run reads; an absent optional input (``type`` UNDEFINED) has no data, and one
with a ``data_file`` is read from it rather than generated.

``.bin`` files are raw little-endian element data with no header, as the samples'
``tofile`` / ``fromfile`` write and read them; ``.npy`` files are numpy's format.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from openacl._api import module_dir

DEFAULT_RANGE = (-5.0, 5.0)  # the ecosystem standard's uniform range, [-5, 5]
DEFAULT_NORMAL = (0.0, 1.0)  # mean, std when a normal input gives neither

# CANN's type strings (single-op JSON "type", msOpST, aclDataType names) -> numpy dtypes.
# Note CANN's "float" is float32 (numpy's "float" would be float64).
_TYPE_NAMES: dict[str, Any] = {
    "float16": np.float16, "half": np.float16, "fp16": np.float16,
    "float": np.float32, "float32": np.float32, "fp32": np.float32,
    "double": np.float64, "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16, "bf16": ml_dtypes.bfloat16,
    "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
    "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "bool": np.bool_, "complex64": np.complex64, "complex128": np.complex128,
}
DISTRIBUTIONS = ("uniform", "normal")


def dtype_from_name(name: Any) -> np.dtype:
    """A numpy dtype from a CANN type string ("float16", "float" = float32, "DT_FLOAT16",
    "ACL_FLOAT16"), a numpy dtype or anything numpy reads as one.

    Raises:
        ValueError: a name that is no data type.
    """
    if isinstance(name, str):
        key = name.strip().lower()
        for prefix in ("dt_", "acl_"):
            if key.startswith(prefix):
                key = key[len(prefix):]
        if key in _TYPE_NAMES:
            return np.dtype(_TYPE_NAMES[key])
        raise ValueError(f"unknown data type {name!r}; expected one of "
                         f"{', '.join(sorted(_TYPE_NAMES))}")
    try:
        return np.dtype(name)
    except TypeError as exc:
        raise ValueError(f"unknown data type {name!r}") from exc


@dataclass(frozen=True)
class InputSpec:
    """How to generate one input.

    ``value_range`` is [low, high) for uniform floats and integers; ``nan_ratio``,
    ``inf_ratio``, ``neg_inf_ratio`` are fractions of the elements (rounded to a count,
    disjoint positions); ``nan_at`` / ``inf_at`` / ``neg_inf_at`` are explicit positions
    (flat ints or index lists). ``value`` gives the data outright (a constant input).
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    distribution: str = "uniform"
    value_range: tuple[float, float] = DEFAULT_RANGE
    mean: float = DEFAULT_NORMAL[0]
    std: float = DEFAULT_NORMAL[1]
    nan_ratio: float = 0.0
    inf_ratio: float = 0.0
    neg_inf_ratio: float = 0.0
    nan_at: tuple = ()
    inf_at: tuple = ()
    neg_inf_at: tuple = ()
    value: Any = None
    data_file: str = ""  # read from this file (relative to the case's folder) instead

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"input '{self.name}': distribution {self.distribution!r} is not "
                             f"one of {', '.join(DISTRIBUTIONS)}")
        if any(d < 0 for d in self.shape):
            raise ValueError(f"input '{self.name}': shape {list(self.shape)} has a negative "
                             f"dim")
        low, high = self.value_range
        if not low <= high:
            raise ValueError(f"input '{self.name}': range [{low}, {high}) is empty")
        ratios = (self.nan_ratio, self.inf_ratio, self.neg_inf_ratio)
        if any(not 0 <= r <= 1 for r in ratios) or sum(ratios) > 1:
            raise ValueError(f"input '{self.name}': NaN/inf fractions {ratios} must lie in "
                             f"[0, 1] and sum to at most 1")
        special = any(ratios) or self.nan_at or self.inf_at or self.neg_inf_at
        if special and self.dtype.kind not in "fc" and self.dtype != ml_dtypes.bfloat16:
            raise ValueError(f"input '{self.name}': NaN/inf need a float dtype, not "
                             f"{self.dtype}")


@dataclass(frozen=True)
class Case:
    """A case: a seed and its inputs in order. ``positions`` are the inputs' random streams
    (their positions in ``input_desc``; empty: 0, 1, 2...)."""

    inputs: tuple[InputSpec, ...]
    seed: int = 0
    name: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    positions: tuple[int, ...] = ()

    def stream(self, index: int) -> int:
        """The random stream of input ``index`` (its position in the description)."""
        return self.positions[index] if self.positions else index


def _pair(value: Any, what: str) -> tuple[float, float]:
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0],
                                                                         (list, tuple)):
        value = value[0]  # msOpST writes value_range as [[low, high]]
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{what}: expected [low, high], got {value!r}")
    return float(value[0]), float(value[1])


def _positions(value: Any) -> tuple:
    return tuple(tuple(p) if isinstance(p, (list, tuple)) else int(p) for p in value or ())


def _first(value: Any) -> Any:
    """msOpST lists alternatives (["uniform"], ["float16"]); a case takes the first."""
    return value[0] if isinstance(value, (list, tuple)) and value else value


def input_from_json(entry: Mapping[str, Any], default_name: str) -> InputSpec:
    """An InputSpec from a case entry (this module's keys, or single-op / msOpST keys:
    ``type``, ``data_distribution``, ``value_range``)."""
    name = entry.get("name") or default_name
    dtype_name = _first(entry.get("dtype", entry.get("type")))
    if dtype_name is None:
        raise ValueError(f"input '{name}': no dtype (\"dtype\" or \"type\")")
    if "shape" not in entry:
        raise ValueError(f"input '{name}': no shape")
    distribution = _first(entry.get("distribution", entry.get("data_distribution", "uniform")))
    spec = {
        "name": name,
        "shape": tuple(int(d) for d in entry["shape"]),
        "dtype": dtype_from_name(dtype_name),
        "distribution": distribution,
        "nan_ratio": float(entry.get("nan_ratio", 0.0)),
        "inf_ratio": float(entry.get("inf_ratio", 0.0)),
        "neg_inf_ratio": float(entry.get("neg_inf_ratio", 0.0)),
        "nan_at": _positions(entry.get("nan_at")),
        "inf_at": _positions(entry.get("inf_at")),
        "neg_inf_at": _positions(entry.get("neg_inf_at")),
        "value": entry.get("value", entry.get("const_value")),
        "data_file": str(entry.get("data_file") or ""),
    }
    if "range" in entry or "value_range" in entry:
        spec["value_range"] = _pair(entry.get("range", entry.get("value_range")),
                                    f"input '{name}' range")
    if "mean" in entry:
        spec["mean"] = float(entry["mean"])
    if "std" in entry:
        spec["std"] = float(entry["std"])
    return InputSpec(**spec)


def case_from_json(data: Mapping[str, Any]) -> Case:
    """A Case from its JSON description::

        {"seed": 0, "name": "add_fp16",
         "inputs": [{"name": "x", "shape": [8, 2048], "dtype": "float16",
                     "distribution": "uniform", "range": [1, 100]},
                    {"name": "y", "shape": [8, 2048], "dtype": "float16",
                     "distribution": "normal", "mean": 0, "std": 2,
                     "nan_ratio": 0.01, "inf_at": [[0, 3]]}]}

    A single-op JSON case (``op``, ``input_desc``) is read the same way, its inputs named by
    ``openacl.aclop.singleop.io_names`` and its absent optional inputs left out (their positions
    kept in ``Case.positions``).
    """
    from openacl.aclop import singleop

    if not isinstance(data, Mapping):
        raise ValueError(f"a case is a JSON object, not {type(data).__name__}")
    single_op = "inputs" not in data and ("input_desc" in data or "op" in data)
    entries = (data.get("input_desc") or []) if single_op else data.get("inputs")
    if not isinstance(entries, list):
        raise ValueError("a case needs an \"inputs\" list (or \"input_desc\")")
    if single_op:
        names = singleop.io_names(data.get("op"), entries)
    else:
        names = [(e.get("name") if isinstance(e, Mapping) else None) or f"x{i}"
                 for i, e in enumerate(entries)]
    inputs, positions = [], []
    for position, (entry, name) in enumerate(zip(entries, names, strict=True)):
        if not isinstance(entry, Mapping):
            raise ValueError(f"input {position}: an input is a JSON object, not {entry!r}")
        if single_op and str(entry.get("type", "")).strip().upper() in singleop.ABSENT_TYPES:
            continue  # an absent optional input: no data
        inputs.append(input_from_json({**entry, "name": name}, name))
        positions.append(position)
    names = [spec.name for spec in inputs]
    if len(set(names)) != len(names):
        raise ValueError(f"input names repeat: {names}")
    return Case(tuple(inputs), int(data.get("seed", 0)),
                str(data.get("name", data.get("case_name", ""))), positions=tuple(positions))


# -- generation --------------------------------------------------------------------------------
def generate(spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    """The data of one input."""
    dtype = spec.dtype
    if spec.value is not None:
        return np.asarray(spec.value).astype(dtype).reshape(spec.shape)
    size = int(np.prod(spec.shape, dtype=np.int64))
    low, high = spec.value_range
    if dtype == np.bool_:
        data = rng.random(size) < 0.5
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        if spec.distribution == "normal":
            values = np.rint(rng.normal(spec.mean, spec.std, size))
        else:
            first = int(np.ceil(low))
            values = rng.integers(first, max(int(np.ceil(high)), first + 1), size=size,
                                  dtype=np.int64)
        data = np.clip(values, info.min, info.max).astype(dtype)
    else:
        if spec.distribution == "normal":
            values = rng.normal(spec.mean, spec.std, size)
            if dtype.kind == "c":
                values = values + 1j * rng.normal(spec.mean, spec.std, size)
        else:
            values = rng.uniform(low, high, size)
            if dtype.kind == "c":
                values = values + 1j * rng.uniform(low, high, size)
        wide = np.float32 if dtype == ml_dtypes.bfloat16 else dtype
        data = values.astype(wide).astype(dtype)
    data = data.reshape(spec.shape)
    _inject(data, spec, rng)
    return data


def _inject(data: np.ndarray, spec: InputSpec, rng: np.random.Generator) -> None:
    flat = data.reshape(-1)
    counts = [int(round(r * flat.size)) for r in (spec.nan_ratio, spec.inf_ratio,
                                                 spec.neg_inf_ratio)]
    if sum(counts):
        chosen = rng.choice(flat.size, size=min(sum(counts), flat.size), replace=False)
        nan, inf = counts[0], counts[0] + counts[1]
        flat[chosen[:nan]] = np.nan
        flat[chosen[nan:inf]] = np.inf
        flat[chosen[inf:]] = -np.inf
    for positions, value in ((spec.nan_at, np.nan), (spec.inf_at, np.inf),
                             (spec.neg_inf_at, -np.inf)):
        for position in positions:
            try:
                if isinstance(position, tuple):
                    data[position] = value
                else:
                    flat[position] = value
            except IndexError as exc:
                raise ValueError(f"input '{spec.name}': position {position} is outside shape "
                                 f"{list(spec.shape)}") from exc


def generate_case(case: Case, base: str | os.PathLike = ".") -> dict[str, np.ndarray]:
    """Every input of ``case``, by name, in order (deterministic in ``case.seed``); an input
    with a ``data_file`` is read from ``base / data_file`` instead."""
    arrays = {}
    for index, spec in enumerate(case.inputs):
        if spec.data_file:
            arrays[spec.name] = load_array(Path(base) / spec.data_file, spec.dtype, spec.shape)
        else:
            rng = np.random.default_rng([case.seed, case.stream(index)])
            arrays[spec.name] = generate(spec, rng)
    return arrays


def expected_bytes(spec: InputSpec) -> int:
    """The size of ``spec``'s raw ``.bin`` file: elements times the item size."""
    return int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize


# -- files -------------------------------------------------------------------------------------
def write_bin(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write ``array``'s elements, raw and little-endian (``tofile`` on a little-endian host)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.ascontiguousarray(array)
    if sys.byteorder == "big" and array.dtype.itemsize > 1:
        array = array.byteswap()
    array.tofile(path)
    return path


def read_bin(path: str | os.PathLike, dtype: Any, shape: Sequence[int] | None = None
             ) -> np.ndarray:
    """Read a raw little-endian ``.bin`` of ``dtype`` (flat, or reshaped to ``shape``).

    Raises:
        ValueError: a file whose size is not a whole number of elements, or does not fit
            ``shape``.
    """
    dtype = dtype_from_name(dtype)
    path = Path(path)
    nbytes = path.stat().st_size
    if nbytes % dtype.itemsize:
        raise ValueError(f"{path}: {nbytes} bytes is not a whole number of {dtype} elements "
                         f"({dtype.itemsize} bytes each)")
    data = np.fromfile(path, dtype=dtype)
    if sys.byteorder == "big" and dtype.itemsize > 1:
        data = data.byteswap()
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape, dtype=np.int64)) != data.size:
            raise ValueError(f"{path}: {data.size} {dtype} elements do not fill shape "
                             f"{list(shape)}")
        data = data.reshape(shape)
    return data


def save_array(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Save by suffix: ``.npy`` in numpy's format, anything else as a raw ``.bin``."""
    path = Path(path)
    if path.suffix == ".npy":
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, np.ascontiguousarray(array), allow_pickle=False)
        return path
    return write_bin(path, array)


def load_array(path: str | os.PathLike, dtype: Any = None,
               shape: Sequence[int] | None = None) -> np.ndarray:
    """Load a ``.npy`` (``dtype`` optional: it reinterprets a bfloat16 file numpy stored as
    raw 2-byte records) or a raw ``.bin`` (``dtype`` required); reshape to ``shape``."""
    path = Path(path)
    if path.suffix == ".npy":
        data = np.load(path, allow_pickle=False)
        if dtype is not None:
            dtype = dtype_from_name(dtype)
            if data.dtype.kind == "V" and data.dtype.itemsize == dtype.itemsize:
                data = data.view(dtype)
        return data if shape is None else data.reshape(tuple(int(d) for d in shape))
    if dtype is None:
        raise ValueError(f"{path}: a raw .bin file needs its dtype")
    return read_bin(path, dtype, shape)


__all__ = ["InputSpec", "Case", "dtype_from_name", "input_from_json", "case_from_json",
           "generate", "generate_case", "expected_bytes", "write_bin", "read_bin",
           "save_array", "load_array"]

__dir__ = module_dir(globals())
