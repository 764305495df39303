"""Single-op models: CANN's single-op descriptions (the JSON ``atc --singleop`` takes), our
compiled single-op files, and matching an aclop call against them.

What a user of ACL expects: ``aclopSetModelDir(dir)`` (or ``aclopLoad``) registers the ops
``atc --singleop`` built, and ``aclopExecuteV2`` then runs a call only when its op type,
tensor descs (dtype, format, shape) and attributes match one of them, else
``ACL_ERROR_OP_NOT_FOUND`` (100024). Here a "model" is the description itself: the
computation is ``openacl.op``'s.

Design note (invariants)
------------------------
* Reading never executes code: files are JSON, read with ``json.loads`` after a size check
  (``MAX_FILE_BYTES``); every field is validated (types, at most ``ACL_MAX_DIM_CNT`` dims, each
  dim in ``[-2, MAX_DIM]``, element counts that fit ``MAX_TENSOR_BYTES``, at most
  ``MAX_OPS_PER_FILE`` ops). A bad file is an ``AclError``: ``ACL_ERROR_INVALID_FILE`` (missing
  or unreadable), ``ACL_ERROR_INVALID_FILE_SIZE`` (too large), ``ACL_ERROR_PARSE_FILE`` (not
  JSON, wrong format or version, a bad field), naming the file and the field.
* Description parsing errors inside one op are ``DescriptionError`` (a ``ValueError``), so
  ``openacl op run`` reports them as bad input; the file readers wrap them with the file name.
* A description is frozen and hashable (``OpDescription``); matching is pure: ``match``
  returns the first description that matches, or raises 100024 with the nearest candidates
  (same op type, fewest differences) and each difference spelled out.
* Shapes: a description dim ``-1`` matches any size (within its ``shape_range`` when one is
  given; ``-1`` as an upper bound is unbounded); ``[-2]`` matches any shape. Attributes are
  compared after filling in the op type's IR defaults on both sides (``openacl.op.OP_TYPES``),
  so leaving an attribute at its default and writing the default are the same call.
* Compiling (``compile_singleop``) checks every op as ``openacl op run`` would run it (the
  op type exists; descs, attributes and, when every dim is known, the shapes bind as
  ``execute_v2`` binds them) and writes nothing unless every op is valid.
* Naming: an input or output is called by its ``name`` in the description, else by the op
  type's IR name (``io_names``); ``openacl op gen-data`` and ``openacl op run`` both use it.
* ``SingleOpRegistry`` is the set a runtime matches against; it is thread-safe (one lock,
  held only to copy or extend the list). Its ``active`` flag says whether a model dir or a
  loaded model exists: only then does a call have to match (else it runs directly, CANN's
  online-compile path).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openacl import dtypes, log
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_FILE_SIZE,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_PARSE_FILE,
    ACL_ERROR_WRITE_FILE,
    AclError,
)

COMPILED_FORMAT = "openacl-singleop"  # "format" of one compiled single-op file
INDEX_FORMAT = "openacl-singleop-index"  # "format" of a compiled directory's index
COMPILED_VERSION = 1  # the compiled-file version this reader writes and reads
INDEX_NAME = "index.json"  # the index file of a compiled directory
COMPILED_SUFFIX = ".op.json"  # compiled files are <n>_<name>.op.json
MAX_FILE_BYTES = 16 << 20  # largest description or compiled file read, bytes
MAX_OPS_PER_FILE = 4096  # most ops one file may describe
MAX_FILES_PER_DIR = 65536  # most JSON files one set_model_dir reads
MAX_DIM = 1 << 40  # largest single dim a description may declare
MAX_TENSOR_BYTES = 1 << 62  # largest tensor a description may declare, bytes
MAX_DIM_COUNT = 128  # ACL_MAX_DIM_CNT: most dims of one tensor
DIR_SEARCH_DEPTH = 3  # aclopSetModelDir reads dir, dir/a, dir/a/b (three levels)
MAX_CANDIDATES = 3  # nearest candidates listed in an OP_NOT_FOUND message
UNKNOWN_DIM = -1  # a dynamic dim
UNKNOWN_RANK = -2  # [-2]: a tensor of unknown rank
ABSENT_TYPES = ("UNDEFINED", "DT_UNDEFINED")  # "type" of an absent optional input
RESERVED_FORMATS = ("RESERVED", "UNDEFINED")  # "format" of an absent optional input
DEFAULT_OUTPUT_DIR = "build"  # -o of op gen-data, op run and convert --singleop when not given
FALLBACK_INPUT, FALLBACK_OUTPUT = "x", "y"  # x0, x1.. / y0.. when the op type has no IR

# CANN's single-op JSON attr "type" strings -> openacl.op attribute kinds
ATTR_TYPES = {"bool": "bool", "int": "int", "float": "float", "string": "str", "str": "str",
              "data_type": "type", "type": "type", "list_bool": "list_bool",
              "list_int": "list_int", "list_float": "list_float", "list_string": "list_str",
              "list_str": "list_str", "list_list_int": "list_list_int"}
# and back, for writing compiled files in CANN's spelling
ATTR_TYPE_NAMES = {"bool": "bool", "int": "int", "float": "float", "str": "string",
                   "type": "data_type", "list_bool": "list_bool", "list_int": "list_int",
                   "list_float": "list_float", "list_str": "list_string",
                   "list_list_int": "list_list_int"}


class DescriptionError(ValueError):
    """A single-op description that cannot be used (names the field and the value)."""


# -- naming inputs and outputs ----------------------------------------------------------------
def io_names(op_type: Any, entries: Sequence[Any], outputs: bool = False) -> list[str]:
    """The names of a single-op description's inputs (or outputs), the one rule of
    ``openacl op gen-data`` and ``openacl op run``: an entry's ``"name"`` when it has one,
    else the op type's IR name at its position (MatMul: x1, x2, bias; a dynamic input
    indexed x0, x1...), else ``x<i>`` / ``y<i>`` (an op type OpenACL does not know).

    Raises:
        DescriptionError: two entries with one name.
    """
    from openacl.aclop import find_op_type

    spec = find_op_type(op_type)
    declared = list(spec.outputs if outputs else spec.inputs) if spec else []
    ir_names: list[str] = []
    for name in declared:
        if name.endswith("*"):
            ir_names += [f"{name[:-1]}{i}" for i in range(len(entries) - len(declared) + 1)]
        else:
            ir_names.append(name.rstrip("?"))
    fallback = FALLBACK_OUTPUT if outputs else FALLBACK_INPUT
    names = []
    for i, entry in enumerate(entries):
        given = entry.get("name") if isinstance(entry, Mapping) else None
        names.append(given if isinstance(given, str) and given else
                     ir_names[i] if i < len(ir_names) else f"{fallback}{i}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        key = "output_desc" if outputs else "input_desc"
        raise DescriptionError(f"{op_type}: {key} names repeat: {', '.join(repeated)} "
                               f"(names: {', '.join(names)})")
    return names


def case_label(case: Any, index: int) -> str:
    """The folder of case ``index`` of a list (gen-data writes its inputs there, op run reads
    and writes there): its ``"name"`` (or ``"case_name"``), else ``<index>_<op type>``."""
    mapping = case if isinstance(case, Mapping) else {}
    name = mapping.get("name") or mapping.get("case_name")
    label = str(name) if name else f"{index}_{mapping.get('op') or 'case'}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label).lstrip(".") or \
        f"{index}_case"


@contextmanager
def runtime_session() -> Iterator[None]:
    """The runtime, initialised (device 0) for one command unless the caller already did;
    torn down after it (so a command leaves the process as it found it)."""
    import openacl

    if openacl.is_initialized():
        yield
        return
    openacl.init()
    try:
        openacl.rt.set_device(0)
        yield
    finally:
        openacl.finalize()


# -- the description -------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """One input or output: data type, format, dims (``-1`` dynamic, ``(-2,)`` unknown rank)
    and per-dim ranges (``(low, high)``, high ``-1`` unbounded; empty when none)."""

    data_type: DataType
    format: Format
    dims: tuple[int, ...]
    shape_range: tuple[tuple[int, int], ...] = ()
    name: str = ""

    @property
    def absent(self) -> bool:
        return self.data_type == DataType.ACL_DT_UNDEFINED

    def describe(self) -> str:
        if self.absent:
            return "absent"
        return f"{_type_name(self.data_type)} {_format_name(self.format)} {list(self.dims)}"


@dataclass(frozen=True)
class OpDescription:
    """One single-op model: op type, input and output specs, attributes (sorted
    ``(name, kind, value)`` with list values as tuples), and where it came from."""

    op_type: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    attrs: tuple[tuple[str, str, Any], ...] = ()
    name: str = ""
    source: str = field(default="", compare=False)

    def label(self) -> str:
        return f"{self.source or '<memory>'} ({self.name or self.op_type})"


def _type_name(data_type: DataType) -> str:
    if data_type == DataType.ACL_DT_UNDEFINED:
        return "undefined"
    try:
        return str(dtypes.to_numpy_dtype(data_type))
    except AclError:
        return data_type.name


def _format_name(fmt: Format) -> str:
    return fmt.name.removeprefix("ACL_FORMAT_").removeprefix("ACL_")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _data_type(value: Any, where: str) -> DataType:
    from openacl.tools.datagen import dtype_from_name

    if isinstance(value, str) and value.strip().upper() in ABSENT_TYPES:
        return DataType.ACL_DT_UNDEFINED
    if not isinstance(value, str):
        raise DescriptionError(f"{where}: \"type\" must be a string such as \"float16\", "
                               f"not {value!r}")
    try:
        return dtypes.from_numpy_dtype(dtype_from_name(value))
    except (ValueError, AclError) as exc:
        raise DescriptionError(f"{where}: \"type\" {value!r} is not a data type ({exc})"
                               ) from None


def _format(value: Any, where: str) -> Format:
    if isinstance(value, str) and value.strip().upper() in RESERVED_FORMATS:
        return Format.ACL_FORMAT_UNDEFINED
    try:
        return dtypes.to_format(value, "format")
    except AclError:
        raise DescriptionError(f"{where}: \"format\" {value!r} is not a format (ND, NCHW, "
                               f"NHWC...)") from None


def _dims(value: Any, where: str, itemsize: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(_is_int(d) for d in value):
        raise DescriptionError(f"{where}: \"shape\" must be a list of integers, not "
                               f"{_short(value)}")
    if len(value) > MAX_DIM_COUNT:
        raise DescriptionError(f"{where}: \"shape\" has {len(value)} dims; at most "
                               f"{MAX_DIM_COUNT} are allowed")
    dims = tuple(value)
    if dims == (UNKNOWN_RANK,):
        return dims
    for d in dims:
        if d < UNKNOWN_DIM or d > MAX_DIM:
            raise DescriptionError(f"{where}: dim {d} of shape {list(dims)} is out of range "
                                   f"[-1, {MAX_DIM}] (-1 dynamic, [-2] unknown rank)")
    known = [d for d in dims if d >= 0]
    if math.prod(known) * max(itemsize, 1) > MAX_TENSOR_BYTES:
        raise DescriptionError(f"{where}: shape {list(dims)} describes more than "
                               f"{MAX_TENSOR_BYTES} bytes")
    return dims


def _shape_range(value: Any, dims: tuple[int, ...], where: str) -> tuple[tuple[int, int], ...]:
    if value is None:
        return ()
    ok = isinstance(value, list) and all(
        isinstance(r, list) and len(r) == 2 and all(_is_int(v) for v in r) for r in value)
    if not ok or len(value) != len(dims):
        raise DescriptionError(f"{where}: \"shape_range\" must hold one [low, high] per dim "
                               f"({len(dims)}), not {_short(value)}")
    return tuple((int(lo), int(hi)) for lo, hi in value)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def parse_tensor(entry: Any, where: str) -> TensorSpec:
    """One ``input_desc``/``output_desc`` entry: ``format``, ``shape``, ``type`` (and the
    optional ``name``, ``shape_range``; other CANN keys such as ``origin_format`` and the
    gen-data keys of ``openacl op run`` are accepted and ignored)."""
    if not isinstance(entry, Mapping):
        raise DescriptionError(f"{where}: a tensor description is a JSON object, not "
                               f"{_short(entry)}")
    data_type = _data_type(entry.get("type"), where)
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise DescriptionError(f"{where}: \"name\" must be a string")
    if data_type == DataType.ACL_DT_UNDEFINED:
        return TensorSpec(data_type, Format.ACL_FORMAT_UNDEFINED, (), (), name)
    fmt = _format(entry.get("format", "ND"), where)
    itemsize = dtypes.data_type_size(data_type)
    dims = _dims(entry.get("shape", []), where, itemsize)
    return TensorSpec(data_type, fmt, dims, _shape_range(entry.get("shape_range"), dims, where),
                      name)


def attr_kind(type_name: Any, where: str) -> str:
    """The ``openacl.op`` attribute kind of a single-op JSON attr ``type``."""
    kind = ATTR_TYPES.get(str(type_name).lower()) if isinstance(type_name, str) else None
    if kind is None:
        raise DescriptionError(f"{where}: unknown type {type_name!r} (attr types: "
                               f"{', '.join(sorted(set(ATTR_TYPE_NAMES.values())))})")
    return kind


def _attr_value(kind: str, value: Any, where: str) -> Any:
    """Validate and normalise (lists -> tuples, data types -> DataType) an attr value."""
    def fail(what: str) -> DescriptionError:
        return DescriptionError(f"{where}: value {_short(value)} is not {what}")

    scalar_checks = {"bool": (lambda v: isinstance(v, bool), "a bool"),
                     "int": (_is_int, "an integer"),
                     "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                               "a number"),
                     "str": (lambda v: isinstance(v, str), "a string")}
    if kind in scalar_checks:
        check, what = scalar_checks[kind]
        if not check(value):
            raise fail(what)
        return float(value) if kind == "float" else value
    if kind == "type":
        if _is_int(value):
            try:
                return DataType(value)
            except ValueError:
                raise fail("an aclDataType value") from None
        return _data_type(value, where)
    if not isinstance(value, list):
        raise fail("a list")
    if kind == "list_list_int":
        if not all(isinstance(row, list) and all(_is_int(v) for v in row) for row in value):
            raise fail("a list of integer lists")
        return tuple(tuple(row) for row in value)
    item_kind = kind.removeprefix("list_")
    return tuple(_attr_value(item_kind, v, where) for v in value)


def parse_attr(entry: Any, where: str) -> tuple[str, str, Any]:
    """One ``attr`` entry ``{"name", "type", "value"}`` -> ``(name, kind, value)``."""
    if not isinstance(entry, Mapping):
        raise DescriptionError(f"{where}: an attr is a JSON object {{\"name\", \"type\", "
                               f"\"value\"}}, not {_short(entry)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise DescriptionError(f"{where}: attr \"name\" must be a non-empty string")
    where = f"{where} ('{name}')"
    kind = attr_kind(entry.get("type"), where)
    if "value" not in entry:
        raise DescriptionError(f"{where}: attr has no \"value\"")
    return name, kind, _attr_value(kind, entry["value"], where)


def apply_attr(handle: int, name: str, kind: str, value: Any) -> None:
    """Set one parsed attribute on an aclopAttr handle (``openacl.op.set_attr_*``)."""
    from openacl import op

    scalar = {"bool": op.set_attr_bool, "int": op.set_attr_int, "float": op.set_attr_float,
              "str": op.set_attr_string, "type": op.set_attr_data_type}
    lists = {"list_bool": op.set_attr_list_bool, "list_int": op.set_attr_list_int,
             "list_float": op.set_attr_list_float, "list_str": op.set_attr_list_string}
    if kind in scalar:
        scalar[kind](handle, name, value)
    elif kind in lists:
        lists[kind](handle, name, list(value))
    else:
        op.set_attr_list_list_int(handle, name, [list(row) for row in value])


def parse_description(entry: Any, source: str = "", index: int = 0) -> OpDescription:
    """One op of a single-op JSON (``op``, ``input_desc``, ``output_desc``, ``attr``,
    optional ``name``).

    Raises:
        DescriptionError: a missing or bad field, named with its position.
    """
    where = f"op {index}"
    if not isinstance(entry, Mapping):
        raise DescriptionError(f"{where}: an op description is a JSON object, not "
                               f"{_short(entry)}")
    op_type = entry.get("op")
    if not isinstance(op_type, str) or not op_type:
        raise DescriptionError(f"{where}: \"op\" (the op type) must be a non-empty string")
    where = f"op {index} ({op_type})"
    lists = {}
    for key in ("input_desc", "output_desc", "attr"):
        value = entry.get(key, [])
        if value is None:
            value = []
        if not isinstance(value, list):
            raise DescriptionError(f"{where}: \"{key}\" must be a list")
        lists[key] = value
    if not lists["output_desc"]:
        raise DescriptionError(f"{where}: \"output_desc\" must describe at least one output")
    inputs = tuple(parse_tensor(e, f"{where} input_desc[{i}]")
                   for i, e in enumerate(lists["input_desc"]))
    outputs = tuple(parse_tensor(e, f"{where} output_desc[{i}]")
                    for i, e in enumerate(lists["output_desc"]))
    attrs: dict[str, tuple[str, str, Any]] = {}
    for i, item in enumerate(lists["attr"]):
        name, kind, value = parse_attr(item, f"{where} attr[{i}]")
        attrs[name] = (name, kind, value)
    name = entry.get("name", "")
    return OpDescription(op_type, inputs, outputs, tuple(sorted(attrs.values())),
                         name if isinstance(name, str) else "", source)


# -- reading files ------------------------------------------------------------------------------
def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read '{path}': {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise AclError(ACL_ERROR_INVALID_FILE_SIZE,
                       f"'{path}' is {size} bytes; single-op files are at most "
                       f"{MAX_FILE_BYTES} bytes")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read '{path}': {exc.strerror}") from None
    return _decode(data, str(path))


def _decode(data: bytes, source: str) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise AclError(ACL_ERROR_INVALID_FILE_SIZE,
                       f"{source} is {len(data)} bytes; single-op files are at most "
                       f"{MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AclError(ACL_ERROR_PARSE_FILE,
                       f"{source} is not UTF-8 JSON (a CANN .om built by atc cannot be read "
                       f"here: give its single-op JSON description instead)") from None


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise AclError(ACL_ERROR_PARSE_FILE, f"{source} is not valid JSON: {exc}") from None


def descriptions_from_json(loaded: Any, source: str) -> list[OpDescription]:
    """The ops of a parsed JSON document: a CANN single-op description (one object or a
    list) or one of our compiled files.

    Raises:
        AclError: ACL_ERROR_PARSE_FILE naming ``source`` and the bad field.
    """
    try:
        if isinstance(loaded, Mapping) and "format" in loaded and "op" not in loaded:
            return [_from_compiled(loaded, source)]
        entries = loaded if isinstance(loaded, list) else [loaded]
        if len(entries) > MAX_OPS_PER_FILE:
            raise DescriptionError(f"{len(entries)} ops; at most {MAX_OPS_PER_FILE} per file")
        return [parse_description(e, source, i) for i, e in enumerate(entries)]
    except DescriptionError as exc:
        raise AclError(ACL_ERROR_PARSE_FILE, f"{source}: {exc}") from None


def _from_compiled(loaded: Mapping[str, Any], source: str) -> OpDescription:
    fmt, version = loaded.get("format"), loaded.get("version")
    if fmt != COMPILED_FORMAT:
        raise DescriptionError(f"\"format\" is {_short(fmt)}, not \"{COMPILED_FORMAT}\"")
    if version != COMPILED_VERSION:
        raise DescriptionError(f"compiled single-op version {_short(version)} is not "
                               f"supported (this reader reads version {COMPILED_VERSION}); "
                               f"compile it again with openacl convert --singleop")
    return parse_description(loaded.get("desc"), source)


def load_bytes(data: bytes, source: str = "<memory>") -> list[OpDescription]:
    """The ops of one file's content (``aclopLoad``)."""
    text = _decode(bytes(data), source)
    return descriptions_from_json(_parse_json(text, source), source)


def load_file(path: str | os.PathLike) -> list[OpDescription]:
    """The ops of one single-op JSON or compiled file."""
    path = Path(path)
    return descriptions_from_json(_parse_json(_read_text(path), str(path)), str(path))


def _json_files(root: Path) -> list[Path]:
    """JSON files under ``root`` down to ``DIR_SEARCH_DEPTH`` levels (as aclopSetModelDir
    reads), sorted; the compiled index and non-JSON files (real .om) are skipped."""
    found: list[Path] = []
    skipped_om = 0
    for directory, subdirs, files in os.walk(root, followlinks=False):
        depth = len(Path(directory).relative_to(root).parts)
        if depth >= DIR_SEARCH_DEPTH - 1:
            subdirs[:] = []
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(".json") and name != INDEX_NAME:
                found.append(Path(directory) / name)
            elif name.endswith(".om"):
                skipped_om += 1
        if len(found) > MAX_FILES_PER_DIR:
            raise AclError(ACL_ERROR_INVALID_FILE,
                           f"'{root}' holds more than {MAX_FILES_PER_DIR} JSON files")
    if skipped_om:
        log.logger().warning("set_model_dir('%s'): %d .om file(s) skipped; OpenACL reads the "
                       "single-op JSON descriptions (or openacl convert --singleop output)",
                       root, skipped_om)
    return found


def load_dir(path: str | os.PathLike) -> list[OpDescription]:
    """Every op in the JSON files of a model directory (CANN descriptions and/or compiled
    files), reading three levels as ``aclopSetModelDir`` does.

    Raises:
        AclError: ACL_ERROR_INVALID_FILE for a missing directory; the file errors above.
    """
    root = Path(path) if isinstance(path, (str, os.PathLike)) else None
    if root is None or not root.is_dir():
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"argument 'modelDir' = {path!r} is not a directory")
    descriptions: list[OpDescription] = []
    for file in _json_files(root):
        descriptions += load_file(file)
    return descriptions


# -- compiling -------------------------------------------------------------------------------
def _tensor_json(spec: TensorSpec) -> dict[str, Any]:
    if spec.absent:
        return {"format": "RESERVED", "type": "UNDEFINED", "shape": []}
    entry: dict[str, Any] = {"format": _format_name(spec.format),
                             "shape": list(spec.dims), "type": _type_name(spec.data_type)}
    if spec.shape_range:
        entry["shape_range"] = [list(r) for r in spec.shape_range]
    if spec.name:
        entry["name"] = spec.name
    return entry


def _value_json(kind: str, value: Any) -> Any:
    if kind == "type":
        return _type_name(value)
    if kind == "list_list_int":
        return [list(row) for row in value]
    return list(value) if isinstance(value, tuple) else value


def description_json(desc: OpDescription) -> dict[str, Any]:
    """A description in CANN's single-op JSON spelling."""
    entry: dict[str, Any] = {"op": desc.op_type}
    if desc.name:
        entry["name"] = desc.name
    entry["input_desc"] = [_tensor_json(s) for s in desc.inputs]
    entry["output_desc"] = [_tensor_json(s) for s in desc.outputs]
    if desc.attrs:
        entry["attr"] = [{"name": n, "type": ATTR_TYPE_NAMES[k], "value": _value_json(k, v)}
                         for n, k, v in desc.attrs]
    return entry


def _file_stem(index: int, desc: OpDescription) -> str:
    base = desc.name or desc.op_type
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in base)[:64]
    return f"{index}_{safe}"


def check_description(desc: OpDescription) -> None:
    """Check one op as ``openacl op run`` would run it: the op type is one OpenACL computes
    (built in or a registered custom op), the descs and attributes fit its IR, and, when
    every dim is known and no input is a value input (Slice offsets...), the call binds as
    ``execute_v2`` binds it (phase 1 of its aclnn calls: MatMul's k, broadcasting, output
    descs that differ from what the op computes). The runtime must be initialised.

    Raises:
        AclError: the aclop code and message ``execute_v2`` would give (100024 unknown op
            type, 100021 / 100022 inputs / outputs that do not match, 100023 attributes).
    """
    import openacl
    from openacl import op

    spec = op.find_op_type(desc.op_type)
    if spec is None:
        op.check_call(desc.op_type, [], [])  # raises 100024 naming the nearest op types
    made: list[tuple[Any, int]] = []

    def handle_of(tensor: TensorSpec) -> int:
        if tensor.absent:
            handle = openacl.create_tensor_desc(DataType.ACL_DT_UNDEFINED, None,
                                                Format.ACL_FORMAT_UNDEFINED)
        else:
            handle = openacl.create_tensor_desc(tensor.data_type, list(tensor.dims),
                                                tensor.format)
        made.append((openacl.destroy_tensor_desc, handle))
        return handle

    attr = None
    try:
        inputs = [handle_of(t) for t in desc.inputs]
        outputs = [handle_of(t) for t in desc.outputs]
        if desc.attrs:
            attr = op.create_attr()
            for name, kind, value in desc.attrs:
                apply_attr(attr, name, kind, value)
        known = all(d >= 0 for t in desc.inputs + desc.outputs for d in t.dims)
        op.check_call(desc.op_type, inputs, outputs, attr, bind=known and not spec.values)
    finally:
        if attr is not None:
            op.destroy_attr(attr)
        for destroy, handle in reversed(made):
            destroy(handle)


def compile_singleop(json_path: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """``openacl convert --singleop``: validate every op of a single-op JSON and write one
    compiled file per op (``<n>_<name>.op.json``, versioned) plus ``index.json`` into
    ``out_dir``; returns the compiled files' paths.

    Every op is checked with ``check_description`` (as ``openacl op run`` would run it), in
    a runtime of its own unless one is initialised. All ops are checked before anything is
    written; when any is invalid nothing is written (as ``atc`` builds no model from a file
    with a bad op) and one error lists each invalid op (index, op type, name, reason).

    Raises:
        AclError: the file errors of ``load_file``; for invalid ops the code of the first
            invalid op (ACL_ERROR_OP_NOT_FOUND for an unknown op type...) with every invalid
            op listed; ACL_ERROR_WRITE_FILE when ``out_dir`` cannot be written.
    """
    descriptions = load_file(json_path)
    problems: list[tuple[int, OpDescription, AclError]] = []
    with runtime_session():
        for i, desc in enumerate(descriptions):
            try:
                check_description(desc)
            except AclError as exc:
                problems.append((i, desc, exc))
    if problems:
        lines = [f"  op {i} ({desc.op_type}{', ' + repr(desc.name) if desc.name else ''}): "
                 f"{exc.message}" for i, desc, exc in problems]
        raise AclError(problems[0][2].code,
                       f"{json_path}: {len(problems)} of {len(descriptions)} op(s) are "
                       f"invalid, nothing was written:\n" + "\n".join(lines))
    out = Path(out_dir)
    written: list[Path] = []
    index_entries = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for i, desc in enumerate(descriptions):
            document = {"format": COMPILED_FORMAT, "version": COMPILED_VERSION,
                        "source": Path(json_path).name, "desc": description_json(desc)}
            path = out / f"{_file_stem(i, desc)}{COMPILED_SUFFIX}"
            path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            written.append(path)
            index_entries.append({"file": path.name, "op": desc.op_type,
                                  "name": desc.name})
        index = {"format": INDEX_FORMAT, "version": COMPILED_VERSION, "ops": index_entries}
        (out / INDEX_NAME).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise AclError(ACL_ERROR_WRITE_FILE, f"cannot write '{out}': {exc.strerror}") from None
    return written


# -- matching ---------------------------------------------------------------------------------
def _dim_matches(want: int, got: int, bounds: tuple[int, int] | None) -> bool:
    if want != UNKNOWN_DIM:
        return want == got
    if got < 0 or bounds is None:
        return True
    low, high = bounds
    return got >= low and (high < 0 or got <= high)


def _tensor_diffs(want: TensorSpec, got: TensorSpec, label: str) -> list[str]:
    if want.absent or got.absent:
        return [] if want.absent == got.absent else \
            [f"{label} is {got.describe()}, the model has {want.describe()}"]
    diffs = []
    if want.data_type != got.data_type:
        diffs.append(f"{label} dtype {_type_name(got.data_type)} != "
                     f"{_type_name(want.data_type)}")
    if want.format != got.format:
        diffs.append(f"{label} format {_format_name(got.format)} != "
                     f"{_format_name(want.format)}")
    if want.dims != (UNKNOWN_RANK,):
        ranges = want.shape_range or (None,) * len(want.dims)
        if len(want.dims) != len(got.dims) or not all(
                _dim_matches(w, g, r) for w, g, r in zip(want.dims, got.dims, ranges,
                                                          strict=False)):
            extra = f" (range {[list(r) for r in want.shape_range]})" if want.shape_range else ""
            diffs.append(f"{label} shape {list(got.dims)} != {list(want.dims)}{extra}")
    return diffs


def _attr_defaults(op_type: str) -> dict[str, tuple[str, Any]]:
    from openacl.aclop import OP_TYPES, REQUIRED

    spec = OP_TYPES.get(op_type)
    if spec is None:
        return {}
    return {a.name: (a.kind, _normal(a.kind, a.default)) for a in spec.attrs
            if a.default is not REQUIRED}


_KIND_CLASS = {"type": "int"}  # a data-type attr (Cast dst_type) may be set as an Int


def _normal(kind: str, value: Any) -> Any:
    """A comparable attribute value: (kind class, value) with tuples for lists, ints for
    data types, floats for floats, so True never equals 1."""
    def plain(item: Any) -> Any:
        if isinstance(item, (list, tuple)):
            return tuple(plain(v) for v in item)
        if isinstance(item, DataType):
            return int(item)
        if kind.endswith("float") and _is_int(item):
            return float(item)
        return item

    return _KIND_CLASS.get(kind, kind), plain(value)


def _attr_diffs(want: OpDescription, got: Mapping[str, tuple[str, Any]]) -> list[str]:
    defaults = _attr_defaults(want.op_type)
    model = dict(defaults)
    model.update({n: (k, _normal(k, v)) for n, k, v in want.attrs})
    call = dict(defaults)
    call.update({n: (k, _normal(k, v)) for n, (k, v) in got.items()})
    diffs = []
    for name in sorted(set(model) | set(call)):
        if name not in call:
            diffs.append(f"attr '{name}' is not set, the model has {model[name][1][1]!r}")
        elif name not in model:
            diffs.append(f"attr '{name}' = {call[name][1][1]!r} is not in the model")
        elif call[name][1] != model[name][1]:
            diffs.append(f"attr '{name}' = {call[name][1][1]!r} != {model[name][1][1]!r}")
    return diffs


def differences(want: OpDescription, op_type: str, inputs: Sequence[TensorSpec],
                outputs: Sequence[TensorSpec], attrs: Mapping[str, tuple[str, Any]]
                ) -> list[str]:
    """How a call differs from a description, one readable line per difference (empty:
    the call matches)."""
    if want.op_type != op_type:
        return [f"op type {op_type} != {want.op_type}"]
    diffs = []
    for label, wanted, given in (("input", want.inputs, inputs),
                                 ("output", want.outputs, outputs)):
        if len(wanted) != len(given):
            diffs.append(f"{len(given)} {label}s != {len(wanted)}")
            continue
        for i, (w, g) in enumerate(zip(wanted, given, strict=True)):
            diffs += _tensor_diffs(w, g, f"{label}[{i}]")
    return diffs + _attr_diffs(want, attrs)


def _describe_call(op_type: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                   attrs: Mapping[str, tuple[str, Any]]) -> str:
    text = (f"{op_type}(inputs: {', '.join(s.describe() for s in inputs) or 'none'}; "
            f"outputs: {', '.join(s.describe() for s in outputs) or 'none'}")
    if attrs:
        text += "; attrs: " + ", ".join(f"{n}={v[1]!r}" for n, v in sorted(attrs.items()))
    return text + ")"


def match(descriptions: Iterable[OpDescription], op_type: str, inputs: Sequence[TensorSpec],
          outputs: Sequence[TensorSpec], attrs: Mapping[str, tuple[str, Any]]
          ) -> OpDescription:
    """The first description that matches the call.

    Raises:
        AclError: ACL_ERROR_OP_NOT_FOUND (100024) listing the nearest candidates (same op
            type, fewest differences, each spelled out), or the loaded op types when none
            has this op type.
    """
    candidates = []
    known_types = set()
    for desc in descriptions:
        known_types.add(desc.op_type)
        if desc.op_type != op_type:
            continue
        diffs = differences(desc, op_type, inputs, outputs, attrs)
        if not diffs:
            return desc
        candidates.append((len(diffs), desc, diffs))
    call = _describe_call(op_type, inputs, outputs, attrs)
    if not candidates:
        loaded = ", ".join(sorted(known_types)) or "none"
        raise AclError(ACL_ERROR_OP_NOT_FOUND,
                       f"no single-op model matches {call}: no model of op type {op_type} is "
                       f"loaded (loaded op types: {loaded})")
    candidates.sort(key=lambda c: c[0])
    lines = [f"  {desc.label()}: {'; '.join(diffs)}"
             for _, desc, diffs in candidates[:MAX_CANDIDATES]]
    more = len(candidates) - MAX_CANDIDATES
    tail = f"\n  ... and {more} more" if more > 0 else ""
    raise AclError(ACL_ERROR_OP_NOT_FOUND,
                   f"no single-op model matches {call}; nearest candidates:\n"
                   + "\n".join(lines) + tail)


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def description_of_call(op_type: str, inputs: Sequence[TensorSpec],
                        outputs: Sequence[TensorSpec], attrs: Mapping[str, tuple[str, Any]],
                        source: str = "<compiled online>") -> OpDescription:
    """The description a call would match exactly (what ``aclopCompile`` builds)."""
    return OpDescription(op_type, tuple(inputs), tuple(outputs),
                         tuple(sorted((n, k, _frozen(v)) for n, (k, v) in attrs.items())),
                         "", source)


class SingleOpRegistry:
    """The single-op models one runtime matches calls against (see the design note)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._descriptions: list[OpDescription] = []
        self.active = False  # a model dir was set or a model loaded

    def add(self, descriptions: Iterable[OpDescription], activate: bool = True) -> int:
        """Register descriptions (duplicates are kept once); returns how many were new."""
        with self._lock:
            known = set(self._descriptions)
            new = [d for d in descriptions if d not in known and not known.add(d)]
            self._descriptions += new
            self.active = self.active or activate
            return len(new)

    def descriptions(self) -> list[OpDescription]:
        with self._lock:
            return list(self._descriptions)

    def match(self, op_type: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
              attrs: Mapping[str, tuple[str, Any]]) -> OpDescription:
        return match(self.descriptions(), op_type, inputs, outputs, attrs)


__all__ = ["OpDescription", "TensorSpec", "DescriptionError", "SingleOpRegistry",
           "parse_description", "parse_tensor", "parse_attr", "apply_attr", "attr_kind",
           "load_file", "load_bytes", "load_dir", "descriptions_from_json",
           "description_json", "compile_singleop", "check_description", "io_names",
           "case_label", "runtime_session", "DEFAULT_OUTPUT_DIR", "differences", "match",
           "description_of_call", "COMPILED_FORMAT", "COMPILED_VERSION", "INDEX_NAME",
           "ATTR_TYPES"]
