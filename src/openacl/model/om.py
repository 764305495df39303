"""The offline model file (.om): a lowered graph, its memory plan and its weights, safe to load.

File layout (version 1.2; every integer little-endian)
------------------------------------------------------
::

    offset  size  field
    0       8     magic            b"OACLOM01"
    8       2     version_major    1 (a reader refuses any other major version)
    10      2     version_minor    2 (additions a 1.x reader may ignore; 1.1 added gears,
                                   1.2 the metadata's "options")
    12      4     header_bytes     64 (bytes before the JSON section may grow in 1.x)
    16      8     json_offset      >= header_bytes
    24      8     json_bytes       <= MAX_JSON_BYTES
    32      8     blob_offset      a multiple of BLOB_ALIGNMENT, >= json_offset + json_bytes
    40      8     blob_bytes       blob_offset + blob_bytes == file size (nothing trails)
    48      4     json_crc32       zlib.crc32 of the JSON section
    52      4     blob_crc32       zlib.crc32 of the weights blob
    56      8     reserved         zero
    64      ...   JSON section (UTF-8), zero padding, then the weights blob

The JSON section is one object (Python's JSON: NaN and Infinity allowed in scalars)::

    {"graph": {"name": str, "opset": int,
               "inputs": [name], "outputs": [name],
               "values": {name: {"dtype": "float32", "shape": [1, 32]}},  # not weights
               "initializers": {name: {"dtype", "shape", "offset", "nbytes"}},  # in the blob
               "views": {name: root},                # zero-copy views, root is not a view
               "steps": [{"op": "Matmul", "node": "MatMul_0",
                          "args": [[argument name, encoded argument], ...]}]},
     "plan": {"arena_bytes": int, "naive_bytes": int, "offsets": {name: int}},
     "metadata": {"converter": ..., "source_model": ..., "precision": ..., ...},
     "gears": [{"batch": 2, "graph": {...}, "plan": {...}}, ...]}   # optional (1.1)

The metadata is free-form for a reader (nothing in it changes how a model runs). The
converter writes ``converter``, ``format_version``, ``source_model``, ``precision``, the
input shapes (or ``shape_ranges``), the gears' values, the ONNX opset, IR version and
producer, and since 1.2 / 2.1 ``options``: the conversion options as given (ATC's names:
``framework``, ``soc_version``, ``input_format``, ``precision_mode``, ``out_nodes``, ``log``,
``input_shape``, ...), recorded for ``openacl inspect``; files without it still load.

A dynamic-batch model's main graph is its largest batch; "gears" holds the others (at most
``MAX_GEARS``), each a full graph and plan whose inputs are the main model's with another
dim 0. Their initializers point into the same blob, where each distinct weight is stored
once.

Format 2.0 holds a dynamic-shape model instead (converted with shape ranges, or with dims
the model leaves dynamic): the same container with major version 2 and a JSON section of
``{"staged": ..., "metadata": ...}``, written and read by ``om_staged.py``. ``load_offline``
reads both formats; ``load_model`` / ``load_model_gears`` return compiled (1.x) models and
refuse a 2.x one by name.

Step arguments are ``lowering.encode_arg``'s forms: ``{"value": name}`` (an aclTensor),
``{"values": [name, ...]}`` (an aclTensorList), ``{"scalar": x, "dtype": "float32"}`` (an
aclScalar), or a number, bool, string, null or flat list of those (attributes). Each weight
starts at a multiple of ``BLOB_ALIGNMENT`` inside the blob, so loading from a file maps the
blob (``np.memmap``) and every initializer is a zero-copy view of it; the engine copies them
into device memory.

Loading never executes code (JSON and raw little-endian arrays, no pickle) and checks
everything before anything is built, by failure class:

* ``ACL_ERROR_INVALID_FILE`` (100003): the file cannot be read, is not an OpenACL model (bad
  magic), is a real CANN .om (``ModelFileHeader`` magic ``IMOD``, 0x444F4D49), or has a
  major version this reader does not know.
* ``ACL_ERROR_DESERIALIZE_MODEL`` (100012): the container is damaged: truncated header or
  sections, offsets or lengths outside the file, trailing bytes, checksum mismatch, a JSON
  section that is not UTF-8 JSON.
* ``ACL_ERROR_PARSE_MODEL`` (100013): the JSON decodes but the model is invalid: a missing or
  ill-typed field, an unknown dtype, a negative or oversized dim (``MAX_TENSOR_ELEMENTS``), a
  weight outside the blob or of the wrong size, an unknown aclnn operator or argument, a
  tensor argument that is not a graph value, a step that reads a value before any step
  writes it (unordered steps, cycles), a view of a different size, an arena value outside
  the arena or sharing bytes with a value alive at the same time.

What loading allocates is bounded by the file's size (the JSON text and its parse; the
weights stay in the mapping). The arena and workspace sizes a file declares are checked for
consistency (the arena holds its values and is no bigger than their sum); allocating them is
the engine's job, through the device allocator, which refuses what exceeds the memory limit
(``ACL_ERROR_RT_MEMORY_ALLOCATION``).
"""

from __future__ import annotations

import json
import math
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl.errors import (
    ACL_ERROR_DESERIALIZE_MODEL,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_PARSE_MODEL,
    ACL_ERROR_WRITE_FILE,
    AclError,
)
from openacl.model.ir import (
    Graph,
    Lowered,
    Ref,
    RefList,
    Scalar,
    Step,
    Value,
    decode_arg,
    encode_arg,
)
from openacl.model.plan import ARENA_ALIGNMENT, MemoryPlan, _step_refs, lifetimes, slot_bytes

MAGIC = b"OACLOM01"
CANN_OM_MAGIC = struct.pack("<I", 0x444F4D49)  # b"IMOD": CANN's MODEL_FILE_MAGIC_NUM
VERSION_MAJOR, VERSION_MINOR = 1, 2  # 1.1 added "gears", 1.2 metadata "options" (ignorable)
STAGED_MAJOR, STAGED_MINOR = 2, 1  # a dynamic-shape model: the ONNX graph, shape ranges;
# 2.1 added metadata "options" (a 2.0 reader ignores it)
READABLE_MAJORS = (VERSION_MAJOR, STAGED_MAJOR)
MAX_GEARS = 128  # batch sizes one dynamic-batch model may hold (CANN's ACL_MAX_BATCH_NUM)
HEADER = struct.Struct("<8sHHIQQQQII8x")  # the fixed header fields (see the module docstring)
HEADER_BYTES = 64  # bytes of the header this version writes
BLOB_ALIGNMENT = 64  # bytes; the blob and every weight in it start at a multiple of this
MAX_JSON_BYTES = 256 << 20  # bytes; a larger JSON section is refused before it is read
MAX_TENSOR_ELEMENTS = 1 << 40  # elements of one value; more is a hostile or corrupt dim
MAX_RANK = 64  # dims of one value
MAX_NAME_CHARS = 4096  # characters of a value, node or argument name
UNCHECKED = "malformed model, not caught by a specific check"  # the safety net's message
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "bfloat16", "float32", "float64", "complex64",
                    "complex128"})  # value dtypes a model file may declare


def _invalid(message: str) -> AclError:
    """An invalid model's error; ``_build`` puts the file's name in front (once)."""
    return AclError(ACL_ERROR_PARSE_MODEL, message)


def _damaged(message: str) -> AclError:
    """A damaged container's error; the message names the file (``origin``) itself."""
    return AclError(ACL_ERROR_DESERIALIZE_MODEL, message)


def _align(size: int, alignment: int) -> int:
    return -(-size // alignment) * alignment


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# -- writing ------------------------------------------------------------------------------------
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON-serializable")


@dataclass(frozen=True)
class Gear:
    """One batch size of a dynamic-batch model: its own lowered graph and memory plan (the
    weights are shared in the file)."""

    batch: int
    lowered: Lowered
    plan: MemoryPlan


def _referenced(lowered: Lowered, plan: MemoryPlan) -> set[str]:
    graph = lowered.graph
    names = set(graph.inputs) | set(graph.outputs) | set(plan.offsets)
    names |= set(lowered.views) | set(lowered.views.values())
    for step in lowered.steps:
        for _, arg in step.args:
            if isinstance(arg, Ref):
                names.add(arg.value)
            elif isinstance(arg, RefList):
                names.update(arg.values)
    return names


def referenced_weights(lowered: Lowered, plan: MemoryPlan) -> list[str]:
    """The initializers the model uses (the ones a .om file stores), in graph order."""
    used = _referenced(lowered, plan)
    return [name for name in lowered.graph.initializers if name in used]


class _Blob:
    """The weights section being laid out: each distinct array once (the gears of a
    dynamic-batch model share their weights), every one at an aligned offset."""

    def __init__(self) -> None:
        self.weights: list[tuple[int, np.ndarray]] = []
        self.bytes = 0
        self._offsets: dict[tuple[str, tuple[int, ...], bytes], int] = {}

    def place(self, array: np.ndarray) -> int:
        import hashlib  # here, not at module level: loading an .om never needs OpenSSL (~3 MB)

        array = np.ascontiguousarray(array)
        raw = array.reshape(-1).view(np.uint8)  # bytes of any dtype (ml_dtypes' included)
        key = (array.dtype.str, array.shape, hashlib.sha256(raw).digest())
        if key not in self._offsets:
            self._offsets[key] = self.bytes
            self.weights.append((self.bytes, array))
            self.bytes = _align(self.bytes + array.nbytes, BLOB_ALIGNMENT)
        return self._offsets[key]


def _graph_document(lowered: Lowered, plan: MemoryPlan, blob: _Blob
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(graph, plan) JSON objects of one model; its used weights go into ``blob``."""
    graph = lowered.graph
    used = _referenced(lowered, plan)
    table = {}
    for name in referenced_weights(lowered, plan):
        array = graph.initializers[name]
        table[name] = {"dtype": array.dtype.name, "shape": list(array.shape),
                       "offset": blob.place(array), "nbytes": array.nbytes}
    values = {name: {"dtype": value.dtype.name, "shape": [int(d) for d in value.shape]}
              for name, value in graph.values.items()
              if name in used and name not in graph.initializers}
    steps = [{"op": step.op, "node": step.node,
              "args": [[name, encode_arg(arg)] for name, arg in step.args]}
             for step in lowered.steps]
    return ({"name": graph.name, "opset": graph.opset, "inputs": list(graph.inputs),
             "outputs": list(graph.outputs), "values": values, "initializers": table,
             "views": dict(lowered.views), "steps": steps},
            {"arena_bytes": plan.arena_bytes, "naive_bytes": plan.naive_bytes,
             "offsets": dict(plan.offsets)})


def _document(lowered: Lowered, plan: MemoryPlan, metadata: dict[str, Any] | None,
              gears: Sequence[Gear] = ()
              ) -> tuple[dict[str, Any], list[tuple[int, np.ndarray]], int]:
    """(JSON document, [(blob offset, weight)], blob bytes); unreferenced weights are left
    out, and weights the gears share are stored once."""
    blob = _Blob()
    graph_doc, plan_doc = _graph_document(lowered, plan, blob)
    document = {"graph": graph_doc, "plan": plan_doc, "metadata": dict(metadata or {})}
    if gears:
        document["gears"] = []
        for gear in gears:
            gear_graph, gear_plan = _graph_document(gear.lowered, gear.plan, blob)
            document["gears"].append({"batch": gear.batch, "graph": gear_graph,
                                      "plan": gear_plan})
    return document, blob.weights, blob.bytes


def _chunks(lowered: Lowered, plan: MemoryPlan, metadata: dict[str, Any] | None,
            gears: Sequence[Gear] = ()) -> Iterable[bytes | memoryview]:
    document, weights, blob_bytes = _document(lowered, plan, metadata, gears)
    return _container(document, weights, blob_bytes, VERSION_MAJOR, VERSION_MINOR)


def _container(document: dict[str, Any], weights: list[tuple[int, np.ndarray]],
               blob_bytes: int, major: int, minor: int) -> Iterable[bytes | memoryview]:
    """The file's bytes, chunk by chunk: header, JSON section, padding, weights blob."""
    text = json.dumps(document, default=_json_default, separators=(",", ":")).encode()
    blob_offset = _align(HEADER_BYTES + len(text), BLOB_ALIGNMENT)
    blob_crc, position = 0, 0
    for offset, array in weights:  # first pass: the checksum, padding included
        blob_crc = zlib.crc32(bytes(offset - position), blob_crc)
        blob_crc = zlib.crc32(array.reshape(-1).view(np.uint8), blob_crc)
        position = offset + array.nbytes
    blob_crc = zlib.crc32(bytes(blob_bytes - position), blob_crc)
    yield HEADER.pack(MAGIC, major, minor, HEADER_BYTES, HEADER_BYTES,
                      len(text), blob_offset, blob_bytes, zlib.crc32(text), blob_crc)
    yield text
    yield bytes(blob_offset - HEADER_BYTES - len(text))
    position = 0
    for offset, array in weights:
        yield bytes(offset - position)
        if array.nbytes:
            yield array.reshape(-1).view(np.uint8).data
        position = offset + array.nbytes
    yield bytes(blob_bytes - position)


def serialize_model(lowered: Lowered, plan: MemoryPlan,
                    metadata: dict[str, Any] | None = None, gears: Sequence[Gear] = ()
                    ) -> bytes:
    """The .om file of ``lowered`` and ``plan`` as bytes (for ``load_model`` from memory)."""
    return b"".join(bytes(chunk) for chunk in _chunks(lowered, plan, metadata, gears))


def save_model(lowered: Lowered, plan: MemoryPlan, path: str | os.PathLike,
               metadata: dict[str, Any] | None = None, gears: Sequence[Gear] = ()) -> int:
    """Write the .om file (atomically: a temporary file renamed); returns its size in bytes.

    Raises:
        AclError: ACL_ERROR_WRITE_FILE when the file cannot be written.
    """
    return write_chunks(_chunks(lowered, plan, metadata, gears), path)


def write_chunks(chunks: Iterable[bytes | memoryview], path: str | os.PathLike) -> int:
    """Write a model file's ``chunks`` atomically (a temporary file renamed); its size.

    Raises:
        AclError: ACL_ERROR_WRITE_FILE when the file cannot be written.
    """
    path = os.fspath(path)
    temporary = f"{path}.tmp{os.getpid()}"
    written = 0
    try:
        with open(temporary, "wb") as file:
            for chunk in chunks:
                written += file.write(chunk)
        os.replace(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise AclError(ACL_ERROR_WRITE_FILE, f"cannot write offline model {path!r}: {exc}") \
            from exc
    return written


# -- reading: the container ---------------------------------------------------------------------
def is_model_file(source: Any) -> bool:
    """Whether ``source`` (a path or bytes) starts like an offline model: OpenACL's magic or
    CANN's (which ``load_model`` recognises and refuses)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        head = bytes(memoryview(source)[:len(MAGIC)])
    elif isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as file:
                head = file.read(len(MAGIC))
        except OSError:
            return False
    else:
        return False
    return head == MAGIC or head[:len(CANN_OM_MAGIC)] == CANN_OM_MAGIC


def file_version(path: str | os.PathLike) -> tuple[int, int]:
    """The (major, minor) format version in the header of the offline model at ``path``.

    Raises:
        AclError: as ``load_offline`` for a file without a readable header.
    """
    origin = f"offline model {os.fspath(path)!r}"
    try:
        with open(path, "rb") as file:
            head = file.read(HEADER_BYTES)
            file_bytes = os.fstat(file.fileno()).st_size
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read {origin}: {exc}") from exc
    _header(head, file_bytes, origin)
    _, major, minor = struct.unpack_from("<8sHH", head)
    return major, minor


def _header(head: bytes, file_bytes: int, origin: str
            ) -> tuple[int, int, int, int, int, int, int]:
    """Validate the header; returns (json offset, json bytes, blob offset, blob bytes, CRCs,
    major version)."""
    if head[:len(CANN_OM_MAGIC)] == CANN_OM_MAGIC:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{origin} is a CANN offline model (ModelFileHeader magic 0x444F4D49 "
                       f"'IMOD', written by ATC): it holds kernels compiled for an Ascend NPU, "
                       f"which OpenACL cannot run; convert the source model instead: "
                       f"openacl convert model.onnx -o model.om")
    if not head:
        raise AclError(ACL_ERROR_INVALID_FILE, f"{origin} is empty (0 bytes)")
    if head[:len(MAGIC)] != MAGIC:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{origin} is not an OpenACL offline model: it starts with "
                       f"{bytes(head[:len(MAGIC)])!r}, not {MAGIC!r}")
    if len(head) < HEADER.size:
        raise _damaged(f"{origin} is truncated: {file_bytes} bytes, shorter than the "
                       f"{HEADER.size}-byte header")
    (_, major, minor, header_bytes, json_offset, json_bytes, blob_offset, blob_bytes,
     json_crc, blob_crc) = HEADER.unpack_from(head)
    if major not in READABLE_MAJORS:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{origin} is offline model format {major}.{minor}; this OpenACL reads "
                       f"{' and '.join(f'{m}.x' for m in READABLE_MAJORS)} (convert the model "
                       f"again with this version)")
    problems = []
    if not HEADER.size <= header_bytes <= json_offset:
        problems.append(f"header_bytes {header_bytes} is not in [{HEADER.size}, json_offset "
                        f"{json_offset}]")
    if json_bytes > MAX_JSON_BYTES:
        problems.append(f"json_bytes {json_bytes} exceeds {MAX_JSON_BYTES}")
    if blob_offset % BLOB_ALIGNMENT:
        problems.append(f"blob_offset {blob_offset} is not a multiple of {BLOB_ALIGNMENT}")
    if json_offset + json_bytes > blob_offset:
        problems.append(f"the JSON section [{json_offset}, {json_offset + json_bytes}) runs "
                        f"into the blob at {blob_offset}")
    if blob_offset + blob_bytes != file_bytes:
        problems.append(f"the blob [{blob_offset}, {blob_offset + blob_bytes}) does not end "
                        f"at the end of the file ({file_bytes} bytes): truncated or extended")
    if problems:
        raise _damaged(f"{origin}: bad header: {'; '.join(problems)}")
    return json_offset, json_bytes, blob_offset, blob_bytes, json_crc, blob_crc, major


def _decode_json(text: bytes, crc: int, origin: str) -> dict[str, Any]:
    if zlib.crc32(text) != crc:
        raise _damaged(f"{origin}: the JSON section fails its checksum (corrupt file)")
    try:
        document = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _damaged(f"{origin}: the JSON section does not decode: {exc}") from None
    if not isinstance(document, dict):
        raise _damaged(f"{origin}: the JSON section is a {type(document).__name__}, "
                       f"not an object")
    return document


def load_model(source: str | os.PathLike | bytes | bytearray | memoryview,
               mmap: bool = True) -> tuple[Lowered, MemoryPlan, dict[str, Any]]:
    """Read an offline model from a file or from memory: (lowered graph, plan, metadata),
    the main model of a dynamic-batch file (its largest batch); see ``load_model_gears``."""
    return load_model_gears(source, mmap)[:3]


@dataclass
class OfflineModel:
    """What an offline model file holds: a compiled model (``lowered``, ``plan``, ``gears``;
    format 1.x) or a dynamic-shape model (``staged``: ``om_staged.StagedSource``; 2.x)."""

    metadata: dict[str, Any]
    lowered: Lowered | None = None
    plan: MemoryPlan | None = None
    gears: list[Gear] = field(default_factory=list)
    staged: Any = None


def load_model_gears(source: str | os.PathLike | bytes | bytearray | memoryview,
                     mmap: bool = True
                     ) -> tuple[Lowered, MemoryPlan, dict[str, Any], list[Gear]]:
    """Read a compiled offline model: (lowered graph, plan, metadata, the other gears of a
    dynamic-batch model, empty otherwise); ``load_offline`` reads any model file.

    Raises:
        AclError: as ``load_offline``; ACL_ERROR_INVALID_PARAM for a dynamic-shape model
            (format 2.x), which only ``load_offline`` returns.
    """
    model = load_offline(source, mmap)
    if model.staged is not None:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       "this offline model has dynamic input shapes (format 2.x): load it with "
                       "InferenceSession or openacl.mdl")
    return model.lowered, model.plan, model.metadata, model.gears


def load_offline(source: str | os.PathLike | bytes | bytearray | memoryview,
                 mmap: bool = True) -> OfflineModel:
    """Read an offline model file (or one in memory), compiled or dynamic-shape.

    From a file with ``mmap`` the weights are read-only ``np.memmap`` views of the file (zero
    copy); without it the file is read into memory. From memory they are views of the given
    buffer, which must stay unchanged while the model lives.

    Raises:
        AclError: ACL_ERROR_INVALID_FILE, ACL_ERROR_DESERIALIZE_MODEL or ACL_ERROR_PARSE_MODEL
            (see the module docstring); ACL_ERROR_INVALID_PARAM for a source of another type.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            data = memoryview(source).cast("B")
        except TypeError as exc:
            raise AclError(ACL_ERROR_INVALID_PARAM, f"argument 'source' is invalid: a "
                                                    f"non-contiguous buffer ({exc})") from None
        return _load_buffer(data, "the offline model in memory")
    if not isinstance(source, (str, os.PathLike)):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'source' = {type(source).__name__} is invalid: expected a "
                       f"path or bytes")
    path = os.fspath(source)
    origin = f"offline model {path!r}"
    try:
        with open(path, "rb") as file:
            if not mmap:
                return _load_buffer(memoryview(file.read()), origin)
            file_bytes = os.fstat(file.fileno()).st_size
            header = _header(file.read(HEADER_BYTES), file_bytes, origin)
            json_offset, json_bytes, blob_offset, blob_bytes, json_crc, blob_crc, major = header
            file.seek(json_offset)
            text = file.read(json_bytes)
    except FileNotFoundError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"{origin} does not exist") from exc
    except IsADirectoryError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"{origin} is a directory, not a file") from exc
    except OSError as exc:
        raise AclError(ACL_ERROR_INVALID_FILE, f"cannot read {origin}: {exc}") from exc
    if len(text) != json_bytes:
        raise _damaged(f"{origin}: the file changed while it was read")
    document = _decode_json(text, json_crc, origin)
    if blob_bytes:
        try:
            blob = np.memmap(path, np.uint8, "r", offset=blob_offset, shape=(blob_bytes,))
        except (OSError, ValueError) as exc:
            raise AclError(ACL_ERROR_INVALID_FILE, f"cannot map {origin}: {exc}") from exc
    else:
        blob = np.empty(0, np.uint8)
    return _build(document, blob, blob_crc, origin, major)


def _load_buffer(data: memoryview, origin: str) -> OfflineModel:
    header = _header(bytes(data[:HEADER_BYTES]), len(data), origin)
    json_offset, json_bytes, blob_offset, blob_bytes, json_crc, blob_crc, major = header
    document = _decode_json(bytes(data[json_offset:json_offset + json_bytes]), json_crc, origin)
    blob = np.frombuffer(data, np.uint8, count=blob_bytes, offset=blob_offset)
    return _build(document, blob, blob_crc, origin, major)


# -- reading: the model -------------------------------------------------------------------------
def _field(container: dict[str, Any], key: str, kind: type | tuple[type, ...],
           where: str) -> Any:
    if not isinstance(container, dict) or key not in container:
        raise _invalid(f"{where}: the field {key!r} is missing")
    value = container[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _invalid(f"{where}.{key} is {_short(value)}, not a {names}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise _invalid(f"{where}: {_short(value)} is not a name")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(f"{where} is {_short(value)}, not a non-negative integer")
    return value


def _tensor_type(entry: Any, where: str) -> tuple[np.dtype, tuple[int, ...]]:
    dtype_name = _field(entry, "dtype", str, where)
    if dtype_name not in DTYPES:
        raise _invalid(f"{where}: dtype {_short(dtype_name)} is not one of {sorted(DTYPES)}")
    shape = _field(entry, "shape", list, where)
    if len(shape) > MAX_RANK:
        raise _invalid(f"{where}: rank {len(shape)} exceeds {MAX_RANK}")
    elements = 1
    for dim in shape:
        _count(dim, f"{where}: dim")
        elements *= dim
        if elements > MAX_TENSOR_ELEMENTS:
            raise _invalid(f"{where}: shape {_short(shape)} holds more than "
                           f"{MAX_TENSOR_ELEMENTS} elements")
    return _numpy_dtype(dtype_name), tuple(shape)


def _initializers(table: dict[str, Any], blob: np.ndarray,
                  values: dict[str, Value]) -> dict[str, np.ndarray]:
    arrays = {}
    for name, entry in table.items():
        where = f"initializer {_name(name, 'initializers')!r}"
        dtype, shape = _tensor_type(entry, where)
        offset = _count(_field(entry, "offset", int, where), f"{where}.offset")
        nbytes = _count(_field(entry, "nbytes", int, where), f"{where}.nbytes")
        if nbytes != math.prod(shape) * dtype.itemsize:
            raise _invalid(f"{where}: nbytes {nbytes} does not match {dtype.name} "
                           f"{list(shape)}")
        if offset % BLOB_ALIGNMENT or offset + nbytes > blob.size:
            raise _invalid(f"{where}: bytes [{offset}, {offset + nbytes}) are not an aligned "
                           f"range of the {blob.size}-byte weights blob")
        if name in values:
            raise _invalid(f"{where} is also declared as a value")
        arrays[name] = blob[offset:offset + nbytes].view(dtype).reshape(shape)
        values[name] = Value(name, dtype, shape)
    return arrays


_ATTRIBUTE_TYPES = (int, float, bool, str, type(None))


def _argument(data: Any, kind: str, where: str, values: dict[str, Value]) -> Any:
    """Decode one step argument, checking it fits the parameter's kind."""
    if data is None:
        return None
    if isinstance(data, dict):
        if set(data) == {"value"} and kind == "tensor":
            return Ref(_defined(data["value"], where, values))
        if set(data) == {"values"} and kind == "tensors" and isinstance(data["values"], list):
            return RefList(tuple(_defined(v, where, values) for v in data["values"]))
        if set(data) == {"scalar", "dtype"} and kind == "scalar":
            scalar, dtype = data["scalar"], data["dtype"]
            if not isinstance(scalar, (int, float, bool)) or not isinstance(dtype, str) or \
                    dtype not in DTYPES:
                raise _invalid(f"{where}: bad scalar {_short(data)}")
            return Scalar(scalar, dtype)
        raise _invalid(f"{where}: {_short(data)} is not a {kind} argument")
    if kind in ("tensor", "tensors"):
        raise _invalid(f"{where}: {_short(data)} is not a reference to a graph value")
    if isinstance(data, list):
        if not all(isinstance(item, _ATTRIBUTE_TYPES) for item in data):
            raise _invalid(f"{where}: {_short(data)} is not a flat list of numbers")
    elif not isinstance(data, _ATTRIBUTE_TYPES):
        raise _invalid(f"{where}: {_short(data)} is not an attribute value")
    if isinstance(data, str) and len(data) > MAX_NAME_CHARS:
        raise _invalid(f"{where}: a {len(data)}-character string")
    return decode_arg(data)


def _defined(name: Any, where: str, values: dict[str, Value]) -> str:
    if not isinstance(name, str) or name not in values:
        raise _invalid(f"{where} refers to {_short(name)}, which is not a graph value")
    return name


def _steps(entries: list[Any], values: dict[str, Value]) -> list[Step]:
    from openacl.ops import REGISTRY

    steps = []
    for index, entry in enumerate(entries):
        where = f"step {index}"
        op_name = _field(entry, "op", str, where)
        op = REGISTRY.get(op_name)
        if op is None:
            raise _invalid(f"{where}: unknown aclnn operator {_short(op_name)}")
        node = _field(entry, "node", str, where) if "node" in entry else ""
        where = f"step {index} (aclnn{op_name}, node {node!r})"
        params = {p.name: p for p in op.params}
        args = []
        for item in _field(entry, "args", list, where):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and item[0] in params):
                raise _invalid(f"{where}: {_short(item)} is not [argument of aclnn{op_name}, "
                               f"value] (arguments: {', '.join(params)})")
            if any(item[0] == name for name, _ in args):
                raise _invalid(f"{where}: argument {item[0]!r} is given twice")
            param = params[item[0]]
            args.append((param.name, _argument(item[1], param.kind,
                                               f"{where} argument {param.name!r}", values)))
        steps.append(Step(op_name, tuple(args), node))
    return steps


def _check_order(lowered: Lowered) -> None:
    """Every step reads only values written before it (inputs and weights are ready)."""
    graph, views = lowered.graph, lowered.views
    ready = set(graph.inputs) | set(graph.initializers)
    for index, step in enumerate(lowered.steps):
        reads, writes = _step_refs(step)
        for name in reads:
            if views.get(name, name) not in ready:
                raise _invalid(f"step {index} (aclnn{step.op}, node {step.node!r}) reads "
                               f"{name!r} before any step writes it (unordered steps or a "
                               f"cycle)")
        for name in writes:
            if views.get(name, name) in graph.initializers:
                raise _invalid(f"step {index} (aclnn{step.op}) writes the weight {name!r}")
            ready.add(views.get(name, name))
    for name in graph.outputs:
        if views.get(name, name) not in ready:
            raise _invalid(f"graph output {name!r} is never computed")


def _check_plan(lowered: Lowered, plan: MemoryPlan) -> None:
    """Every arena value lies inside the arena, apart from every value alive with it."""
    graph, views = lowered.graph, lowered.views
    ends = []
    for name, offset in plan.offsets.items():
        if name not in graph.values or name in graph.initializers or name in views:
            raise _invalid(f"plan: {name!r} is not an arena value")
        if offset % ARENA_ALIGNMENT:
            raise _invalid(f"plan: offset {offset} of {name!r} is not a multiple of "
                           f"{ARENA_ALIGNMENT}")
        end = offset + max(graph.values[name].nbytes, 1)
        if end > plan.arena_bytes:
            raise _invalid(f"plan: {name!r} [{offset}, {end}) lies outside the "
                           f"{plan.arena_bytes}-byte arena")
        ends.append(slot_bytes(end - offset))
    if plan.arena_bytes > sum(ends):
        raise _invalid(f"plan: arena_bytes {plan.arena_bytes} exceeds the {sum(ends)} bytes "
                       f"of the values it holds")
    spans = lifetimes(lowered)
    unplaced = [name for name in spans if name not in plan.offsets]
    unplaced += [root for root in views.values()
                 if root not in plan.offsets and root not in graph.initializers]
    if unplaced:
        raise _invalid(f"plan: {_short(unplaced)} have no arena offset")
    names = sorted(spans, key=lambda n: plan.offsets[n])
    start = np.array([plan.offsets[n] for n in names], np.int64)
    end = start + np.array([max(graph.values[n].nbytes, 1) for n in names], np.int64)
    first = np.array([spans[n][0] for n in names], np.int64)
    last = np.array([spans[n][1] for n in names], np.int64)
    for i, name in enumerate(names):
        stop = int(np.searchsorted(start, end[i], side="left"))
        if stop <= i + 1:
            continue
        clash = (first[i + 1:stop] <= last[i]) & (first[i] <= last[i + 1:stop])
        if clash.any():
            other = names[i + 1 + int(np.argmax(clash))]
            raise _invalid(f"plan: {name!r} and {other!r} share arena bytes while both are "
                           f"alive")


def _build(document: dict[str, Any], blob: np.ndarray, blob_crc: int, origin: str,
           major: int) -> OfflineModel:
    if zlib.crc32(blob) != blob_crc:
        raise _damaged(f"{origin}: the weights blob fails its checksum (corrupt file)")
    if major == STAGED_MAJOR:
        from openacl.model.onnx_import import require_onnx

        require_onnx()  # the graph inside is ONNX: without onnx, say how to get it
    try:
        if major == STAGED_MAJOR:
            from openacl.model.om_staged import parse_staged

            metadata = _field(document, "metadata", dict, "model") \
                if "metadata" in document else {}
            return OfflineModel(metadata, staged=parse_staged(document, blob))
        lowered, plan, metadata, gears = _parse(document, blob)
        return OfflineModel(metadata, lowered, plan, gears)
    except AclError as exc:
        if exc.code in (ACL_ERROR_PARSE_MODEL, ACL_ERROR_DESERIALIZE_MODEL):
            raise AclError(exc.code, f"{origin}: {exc.message}") from exc
        raise _invalid(f"{origin}: {exc}") from exc
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        # a safety net behind the checks above (the fuzzer looks for this message)
        raise _invalid(f"{origin}: {UNCHECKED} ({type(exc).__name__}: {exc})") from exc


def _parse(document: dict[str, Any], blob: np.ndarray
           ) -> tuple[Lowered, MemoryPlan, dict[str, Any], list[Gear]]:
    metadata = _field(document, "metadata", dict, "model") if "metadata" in document else {}
    lowered, plan = _parse_model(_field(document, "graph", dict, "model"),
                                 _field(document, "plan", dict, "model"), blob)
    gears = []
    for index, entry in enumerate(_field(document, "gears", list, "model")
                                  if "gears" in document else []):
        where = f"gears[{index}]"
        if not isinstance(entry, dict) or index >= MAX_GEARS:
            raise _invalid(f"{where}: expected at most {MAX_GEARS} objects")
        batch = _count(_field(entry, "batch", int, where), f"{where}.batch")
        gear_lowered, gear_plan = _parse_model(_field(entry, "graph", dict, where),
                                               _field(entry, "plan", dict, where), blob)
        _check_gear(lowered, gear_lowered, batch, where)
        gears.append(Gear(batch, gear_lowered, gear_plan))
    if len({gear.batch for gear in gears}) != len(gears):
        raise _invalid("gears: a batch size repeats")
    return lowered, plan, metadata, gears


def _check_gear(main: Lowered, gear: Lowered, batch: int, where: str) -> None:
    """A gear takes the main model's inputs with another batch (dim 0) and gives outputs of
    the same names, dtypes and ranks (an output need not carry the batch)."""
    for kind in ("inputs", "outputs"):
        ours, theirs = getattr(main.graph, kind), getattr(gear.graph, kind)
        if ours != theirs:
            raise _invalid(f"{where}: its {kind} {_short(theirs)} differ from the model's")
        for name in ours:
            a, b = main.graph.value(name), gear.graph.value(name)
            batched = kind == "outputs" or (b.shape[:1] == (batch,) and
                                            a.shape[1:] == b.shape[1:])
            if a.dtype != b.dtype or len(a.shape) != len(b.shape) or not batched:
                raise _invalid(f"{where}: {kind[:-1]} {name!r} is {b.dtype} {list(b.shape)}, "
                               f"not the model's {list(a.shape)} with batch {batch}")


def _parse_model(graph_doc: dict[str, Any], plan_doc: dict[str, Any], blob: np.ndarray
                 ) -> tuple[Lowered, MemoryPlan]:
    values: dict[str, Value] = {}
    for name, entry in _field(graph_doc, "values", dict, "graph").items():
        dtype, shape = _tensor_type(entry, f"value {_name(name, 'values')!r}")
        values[name] = Value(name, dtype, shape)
    initializers = _initializers(_field(graph_doc, "initializers", dict, "graph"), blob, values)
    inputs = [_defined(n, "graph.inputs", values)
              for n in _field(graph_doc, "inputs", list, "graph")]
    outputs = [_defined(n, "graph.outputs", values)
               for n in _field(graph_doc, "outputs", list, "graph")]
    if len(set(inputs)) != len(inputs) or set(inputs) & set(initializers):
        raise _invalid(f"graph.inputs {_short(inputs)} repeat a name or name a weight")
    views = {}
    for name, root in _field(graph_doc, "views", dict, "graph").items():
        _defined(name, "graph.views", values)
        _defined(root, f"view {name!r}", values)
        if name in initializers or name in inputs or root in views or \
                values[root].nbytes != values[name].nbytes:
            raise _invalid(f"view {name!r} of {root!r}: not a view of a same-size root value")
        views[name] = root
    if any(root in views for root in views.values()):
        raise _invalid("graph.views: a view's root is itself a view")
    steps = _steps(_field(graph_doc, "steps", list, "graph"), values)
    name = _field(graph_doc, "name", str, "graph") if "name" in graph_doc else "model"
    opset = _field(graph_doc, "opset", int, "graph") if "opset" in graph_doc else 0
    graph = Graph(name, inputs, outputs, values, [], initializers, opset)
    lowered = Lowered(graph, steps, views)
    _check_order(lowered)
    offsets = {}
    for value_name, offset in _field(plan_doc, "offsets", dict, "plan").items():
        offsets[value_name] = _count(offset, f"plan offset of {_short(value_name)}")
    plan = MemoryPlan(offsets,
                      _count(_field(plan_doc, "arena_bytes", int, "plan"), "plan.arena_bytes"),
                      _count(plan_doc.get("naive_bytes", 0), "plan.naive_bytes"))
    _check_plan(lowered, plan)
    return lowered, plan
