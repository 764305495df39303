"""The model runtime (aclmdl): load offline models, describe them, run them on datasets.

    model_id = openacl.mdl.load_from_file("model.om")
    desc = openacl.mdl.create_desc()
    openacl.mdl.get_desc(desc, model_id)
    size = openacl.mdl.get_input_size_by_index(desc, 0)
    inputs = openacl.mdl.create_dataset()
    openacl.mdl.add_dataset_buffer(inputs, openacl.create_data_buffer(device_ptr, size))
    ...
    openacl.mdl.execute(model_id, inputs, outputs)         # or execute_async(..., stream)

Names, argument order and meaning are CANN's (aclmdlLoadFromFile, aclmdlGetDesc(modelDesc,
modelId), aclmdlAddDatasetBuffer(dataset, dataBuffer), aclmdlExecute(modelId, input,
output), aclmdlExecuteAsync(modelId, input, output, stream), ...); the Pythonic convention
applies: outputs are returned, failures raise ``AclError``. ``openacl.compat.acl.mdl`` is
pyACL's face over these functions.

Design note (invariants)
------------------------
* A loaded model is an ``Engine`` (``model/engine.py`` holds its invariants: everything is
  allocated at load, a run allocates nothing) plus a private stream for the synchronous
  ``execute`` (GE gives each model its own stream too), registered in the runtime's handle
  table: the model id is that handle. A wrong, unloaded or never-loaded id is
  ACL_ERROR_INVALID_MODEL_ID (100011).
* A model description (aclmdlDesc) is a snapshot of a model's inputs and outputs taken by
  ``get_desc``; it outlives ``unload``. A dataset (aclmdlDataset) holds DataBuffer handles,
  not copies: ``execute`` reads each buffer's address and size at call time, so
  ``update_data_buffer`` works between runs; destroying a dataset leaves its buffers alone.
* ``execute`` and ``execute_async`` validate the whole call (datasets, buffer count, sizes,
  addresses) before enqueuing anything: ACL_ERROR_MODEL_INPUT_NOT_MATCH (100017) /
  ACL_ERROR_MODEL_OUTPUT_NOT_MATCH (100018) for a wrong count or a buffer smaller than
  ``get_input_size_by_index`` / ``get_output_size_by_index`` (a larger one is accepted, as
  GE accepts it), ACL_ERROR_INVALID_PARAM for a destroyed dataset or buffer.
* Loading reads files through ``model/om.py`` (its codes: ACL_ERROR_INVALID_FILE,
  DESERIALIZE_MODEL, PARSE_MODEL). Files are read, not memory-mapped, and ``load_from_mem``
  copies the model first: the engine may use the weights in place (the CPU backend does),
  and the caller may free or reuse the model bytes once it returns, as with CANN's
  system-managed load.
* Dynamic batch: a model converted with ``--dynamic-batch`` holds one gear (engine) per
  batch size, built on first use. Its description lists the inputs with dim 0 = -1 and the
  largest gear's sizes, plus the input ``ascend_mbatch_shape_data`` (ACL_DYNAMIC_TENSOR_NAME,
  one int64): ``set_dynamic_batch_size`` writes the batch into that input's buffer and
  ``execute`` reads it there to pick the gear (any other value is ACL_ERROR_INVALID_PARAM);
  ``get_cur_output_dims`` gives the dims of the gear that ran last.
* Dynamic shapes (a format-2 file, converted with shape ranges): the model is a
  ``StagedModel``; the description reports -1 for each dim that varies
  (``get_input_dims_range`` gives the ranges). Before ``execute`` the caller sets each
  dynamic input's real dims with ``set_dataset_tensor_desc(input_dataset, desc, index)``
  (dims outside the ranges: ACL_ERROR_INVALID_PARAM, checked before anything is enqueued);
  the run is one task on the stream that reads the inputs, runs the staged engine on the
  host and writes the outputs, then records their dims as tensor descriptions of the output
  dataset (``get_dataset_tensor_desc``), owned and freed by that dataset. As in CANN,
  ``set_dynamic_batch_size`` does not apply to such a model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl import dtypes
from openacl._api import module_dir
from openacl.constants import ACL_MEMCPY_DEFAULT
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
    expose,
)
from openacl.runtime import core, memory, profiler, threads
from openacl.runtime.context import current_context, pop_context, push_context
from openacl.runtime.stream import Stream, resolve_stream
from openacl.tensor import lookup_data_buffer

MODEL_FORMAT = Format.ACL_FORMAT_ND  # the format every model input/output reports
ACL_DYNAMIC_TENSOR_NAME = "ascend_mbatch_shape_data"  # the dynamic batch input (CANN's name)
BATCH_BYTES = 8  # the batch, an int64, in the dynamic input's buffer


@dataclass(frozen=True)
class IODims:
    """aclmdlIODims: a tensor's name and dims."""

    name: str
    dims: tuple[int, ...]

    @property
    def dim_count(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class TensorInfo:
    """One model input or output as a description reports it."""

    name: str
    dims: tuple[int, ...]
    data_type: DataType
    format: Format
    size: int  # bytes (a dynamic-shape input: at its range's high ends, 0 if unbounded)
    ranges: tuple[tuple[int, int], ...] | None = None  # (low, high) per dim: shape ranges


class LoadedModel:
    """A model loaded into the current context; its handle is the model id: an engine (and
    gears) of a compiled model, or the staged engine of a dynamic-shape model."""

    def __init__(self, engine: Any, metadata: dict | None, gears: Sequence[Any] = (),
                 staged: Any = None) -> None:
        self.engine = engine
        self.metadata = dict(metadata or {})
        self.staged = staged
        self.threads = threads.configured()  # its launches' setting, read once at load
        from openacl.model.engine import EngineSet

        if staged is not None:
            host_values = [f"input {spec.name!r} (tensor(string))" for spec in staged.inputs
                           if spec.dtype == object] + [
                f"output {name!r} ({kind})" for name, kind in staged.host_outputs.items()]
            if host_values:  # a device buffer holds a tensor of numbers, no more
                raise AclError(ACL_ERROR_FEATURE_UNSUPPORTED,
                               f"the model's {', '.join(host_values)} are not numeric "
                               f"tensors: the ACL model API cannot hold them "
                               f"(openacl.InferenceSession runs the model)")
            self.engines = EngineSet(None)
            self.inputs = tuple(_staged_info(spec.name, spec.dtype, spec.dims, spec.ranges)
                                for spec in staged.inputs)
            if staged.gears is not None:  # the dims of the gear to run, written by the caller
                count = len(staged.gears.positions) if staged.gears.kind == "dims" else 2
                self.inputs = (*self.inputs, TensorInfo(
                    ACL_DYNAMIC_TENSOR_NAME, (count,), DataType.ACL_INT64, MODEL_FORMAT,
                    BATCH_BYTES * count))
            self.outputs = tuple(_staged_info(name, dtype, dims, None)
                                 for name, dtype, dims in staged.outputs)
            self.last_output_dims: list[tuple[int, ...]] | None = None
            self._finish()
            return
        graph = engine.graph
        self.inputs = tuple(_info(graph.value(name)) for name in graph.inputs)
        self.outputs = tuple(_info(graph.value(name)) for name in graph.outputs)
        self.engines = EngineSet(engine, gears)  # by batch size
        if self.engines.dynamic:  # dim 0 varies; the sizes are the largest gear's
            self.current_batch = graph.value(graph.inputs[0]).shape[0]
            self.inputs = (*(TensorInfo(i.name, (-1, *i.dims[1:]), i.data_type, i.format,
                                        i.size) for i in self.inputs),
                           TensorInfo(ACL_DYNAMIC_TENSOR_NAME, (1,), DataType.ACL_INT64,
                                      MODEL_FORMAT, BATCH_BYTES))
        self._finish()

    def _finish(self) -> None:
        self.context = current_context()
        self.stream = Stream(self.context)  # for the synchronous execute
        self.handle = core.current().handles.add(self)

    def close(self) -> None:
        core.current().handles.remove(self.handle)
        try:
            self.engines.close()
            if self.staged is not None:
                self.staged.close()
        finally:
            self.stream.shutdown(drain_timeout=None)


@dataclass(eq=False)
class ModelDesc:
    """aclmdlDesc: filled by ``get_desc``."""

    model_id: int = 0
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    handle: int = 0
    batches: tuple[int, ...] = ()  # the gears of a dynamic-batch model
    gears: Any = None  # the om_staged.Gears of a --dynamic-dims / --dynamic-image-size model


@dataclass(eq=False)
class Dataset:
    """aclmdlDataset: an ordered list of DataBuffer handles, and the tensor descriptions of
    a dynamic-shape model's inputs (set by the caller) or outputs (set by ``execute``)."""

    buffers: list[int] = field(default_factory=list)
    handle: int = 0
    tensor_descs: dict[int, int] = field(default_factory=dict)  # index -> TensorDesc handle
    owned_descs: set[int] = field(default_factory=set)  # those execute made (freed here)


def _info(value: Any) -> TensorInfo:
    return TensorInfo(value.name, tuple(value.shape), dtypes.from_numpy_dtype(value.dtype),
                      MODEL_FORMAT, value.nbytes)


def _staged_info(name: str, dtype: Any, dims: Any, ranges: Any) -> TensorInfo:
    """A dynamic-shape model's input or output: -1 for each dim that varies, the size at the
    ranges' high ends (0 when a dim has no limit or no range is known)."""
    shown = tuple(d if isinstance(d, int) else -1 for d in (dims or ()))
    highs = [high if low != high else low for low, high in ranges] if ranges else list(shown)
    size = 0 if any(h < 0 for h in highs) else int(np.prod(highs, dtype=np.int64)) * \
        np.dtype(dtype).itemsize
    return TensorInfo(name, shown, dtypes.from_numpy_dtype(dtype), MODEL_FORMAT, size,
                      tuple(ranges) if ranges else None)


# -- lookups ----------------------------------------------------------------------------------
def _model(model_id: Any) -> LoadedModel:
    return core.current().handles.get(model_id, LoadedModel, "modelId",
                                      ACL_ERROR_INVALID_MODEL_ID)


def _loaded(model_id: int) -> LoadedModel | None:
    """The model still loaded under ``model_id``, or None (a description outlives it)."""
    try:
        return _model(model_id)
    except AclError:
        return None


def _desc(desc: Any) -> ModelDesc:
    found = core.current().handles.get(desc, ModelDesc, "modelDesc")
    if not found.model_id:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'modelDesc' = {found.handle:#x} holds no model yet: call "
                       f"get_desc(modelDesc, modelId) first")
    return found


def _dataset(dataset: Any, argument: str = "dataset") -> Dataset:
    return core.current().handles.get(dataset, Dataset, argument)


def _pick(items: Sequence[TensorInfo], index: Any, kind: str) -> TensorInfo:
    position = core.as_index(index)
    if position is None or not 0 <= position < len(items):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is invalid: the model has {len(items)} "
                       f"{kind}(s), so it must be in [0, {len(items)})")
    return items[position]


def _index_by_name(items: Sequence[TensorInfo], name: Any, kind: str) -> int:
    for position, info in enumerate(items):
        if info.name == name:
            return position
    raise AclError(ACL_ERROR_INVALID_PARAM,
                   f"argument 'name' = {name!r} is not an {kind} of the model (its {kind}s: "
                   f"{', '.join(info.name for info in items)})")


# -- loading ----------------------------------------------------------------------------------
def load_lowered(lowered: Any, plan: Any = None, metadata: dict | None = None,
                 gears: Sequence[Any] = ()) -> int:
    """Load an in-memory lowered graph (what the converter writes into a .om file), with
    the other gears of a dynamic-batch model.

    Returns the model id. ``plan`` defaults to ``plan_memory(lowered)``.
    """
    from openacl.model.engine import Engine
    from openacl.model.plan import plan_memory

    core.current()
    current_context()
    engine = Engine(lowered, plan if plan is not None else plan_memory(lowered))
    try:
        return LoadedModel(engine, metadata, gears).handle
    except BaseException:
        engine.close()
        raise


def _om() -> Any:
    try:
        from openacl.model import om
    except ModuleNotFoundError as exc:
        if exc.name != "openacl.model.om":
            raise
        raise AclError(ACL_ERROR_FEATURE_UNSUPPORTED,
                       "offline model files cannot be read: openacl.model.om is missing "
                       "from this installation") from exc
    return om


def load_from_file(model_path: str | os.PathLike) -> int:
    """aclmdlLoadFromFile: load a .om file written by ``openacl convert``; returns the id."""
    core.current()
    current_context()
    if not isinstance(model_path, (str, os.PathLike)):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'modelPath' = {model_path!r} is not a path")
    return _load(_om().load_offline(os.fspath(model_path), mmap=False))


def load_from_mem(model: Any, model_size: int | None = None) -> int:
    """aclmdlLoadFromMem: load a model held in memory; returns the model id.

    Args:
        model: the model's bytes (any bytes-like object), or the address of host or device
            memory holding them (an int, as pyACL passes it).
        model_size: its length in bytes (required with an address; with bytes, at most
            their length, default all of them).
    """
    core.current()
    current_context()
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = memoryview(model).cast("B")
        size = len(data) if model_size is None else core.check_size(model_size, "modelSize")
        if size > len(data):
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'modelSize' = {size} exceeds the {len(data)} bytes given")
        blob = data[:size]
    else:
        address = core.as_index(model)
        if address is None:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'model' = {model!r} is neither bytes nor an address")
        if model_size is None:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           "argument 'modelSize' is required with a model address")
        size = core.check_size(model_size, "modelSize")
        blob = memoryview(memory.read_bytes(address, size, "model"))  # host or device memory
    # a copy: the weights are used in place on the CPU backend, and the caller may reuse
    # the model's memory once this returns (as with CANN's system-managed load)
    return _load(_om().load_offline(bytes(blob)))


def _load(model: Any) -> int:
    """Load what ``om.load_offline`` read: a compiled model, or a dynamic-shape one."""
    if model.staged is None:
        return load_lowered(model.lowered, model.plan, model.metadata, model.gears)
    from openacl.model.staged import StagedModel

    source = model.staged
    staged = StagedModel(source.proto, precision=source.precision, weights=source.weights,
                         ranges=source.ranges, gears=source.gears)
    try:
        return LoadedModel(None, model.metadata, staged=staged).handle
    except BaseException:
        staged.close()
        raise


def unload(model_id: int) -> None:
    """aclmdlUnload: free everything the model holds; its id becomes invalid."""
    _model(model_id).close()


# -- aclmdlDesc -------------------------------------------------------------------------------
def create_desc() -> int:
    """aclmdlCreateDesc: an empty description, filled by ``get_desc``."""
    desc = ModelDesc()
    desc.handle = core.current().handles.add(desc)
    return desc.handle


def destroy_desc(model_desc: int) -> None:
    """aclmdlDestroyDesc."""
    found = core.current().handles.get(model_desc, ModelDesc, "modelDesc")
    core.current().handles.remove(found.handle)


def get_desc(model_desc: int, model_id: int) -> None:
    """aclmdlGetDesc(modelDesc, modelId): describe model ``model_id`` into ``model_desc``."""
    found = core.current().handles.get(model_desc, ModelDesc, "modelDesc")
    model = _model(model_id)
    found.model_id, found.inputs, found.outputs = model.handle, model.inputs, model.outputs
    found.batches = tuple(model.engines.batches)
    found.gears = None if model.staged is None else model.staged.gears


def get_num_inputs(model_desc: int) -> int:
    """aclmdlGetNumInputs."""
    return len(_desc(model_desc).inputs)


def get_num_outputs(model_desc: int) -> int:
    """aclmdlGetNumOutputs."""
    return len(_desc(model_desc).outputs)


def get_input_size_by_index(model_desc: int, index: int) -> int:
    """aclmdlGetInputSizeByIndex: bytes a buffer for input ``index`` needs."""
    return _pick(_desc(model_desc).inputs, index, "input").size


def get_output_size_by_index(model_desc: int, index: int) -> int:
    """aclmdlGetOutputSizeByIndex: bytes a buffer for output ``index`` needs."""
    return _pick(_desc(model_desc).outputs, index, "output").size


def get_input_dims(model_desc: int, index: int) -> IODims:
    """aclmdlGetInputDims: name and dims of input ``index``."""
    info = _pick(_desc(model_desc).inputs, index, "input")
    return IODims(info.name, info.dims)


def get_input_dims_v2(model_desc: int, index: int) -> IODims:
    """aclmdlGetInputDimsV2: as ``get_input_dims`` (the two differ only for models with
    static AIPP, which OpenACL's converter does not build)."""
    return get_input_dims(model_desc, index)


@dataclass(frozen=True)
class IODimsRange:
    """aclmdlIODimsRange: (low, high) per dim; high -1 has no limit."""

    range: tuple[tuple[int, int], ...]

    @property
    def range_count(self) -> int:
        return len(self.range)


def get_input_dims_range(model_desc: int, index: int) -> IODimsRange:
    """aclmdlGetInputDimsRange: the shape range of input ``index`` (equal low and high ends
    for a fixed dim; a static model's dims as such ranges)."""
    info = _pick(_desc(model_desc).inputs, index, "input")
    if info.ranges is not None:
        return IODimsRange(tuple(info.ranges))
    return IODimsRange(tuple((d, d) for d in info.dims))


def get_output_dims(model_desc: int, index: int) -> IODims:
    """aclmdlGetOutputDims: name and dims of output ``index``."""
    info = _pick(_desc(model_desc).outputs, index, "output")
    return IODims(info.name, info.dims)


def get_cur_output_dims(model_desc: int, index: int) -> IODims:
    """aclmdlGetCurOutputDims: the real dims of output ``index``: those of the gear that ran
    last in a dynamic-batch model (static models: its dims)."""
    desc = _desc(model_desc)
    info = _pick(desc.outputs, index, "output")
    model = _loaded(desc.model_id)
    if model is not None and model.staged is not None:  # the dims of the last execute
        dims = model.last_output_dims
        return IODims(info.name, info.dims if dims is None else dims[core.as_index(index)])
    if model is None or not model.engines.dynamic:
        return IODims(info.name, info.dims)
    engine = model.engines.for_batch(model.current_batch)
    return IODims(info.name, tuple(engine.graph.value(info.name).shape))


def get_dynamic_batch(model_desc: int) -> list[int]:
    """aclmdlGetDynamicBatch: the batch sizes of a dynamic-batch model (empty otherwise)."""
    desc = _desc(model_desc)
    model = _loaded(desc.model_id)
    return list(desc.batches if model is None else model.engines.batches)


def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch_size: int) -> None:
    """aclmdlSetDynamicBatchSize: choose the batch of the next runs on ``dataset`` by writing
    it into the buffer of the dynamic input (``index``, from get_input_index_by_name with
    ACL_DYNAMIC_TENSOR_NAME)."""
    model = _model(model_id)
    if not model.engines.dynamic:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'modelId' = {model.handle:#x} is not a dynamic-batch model "
                       f"(convert it with --dynamic-batch)")
    dynamic = len(model.inputs) - 1
    if core.as_index(index) != dynamic:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is not the dynamic input "
                       f"{ACL_DYNAMIC_TENSOR_NAME!r} (index {dynamic})")
    batch = core.as_index(batch_size)
    if batch not in model.engines.batches:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'batchSize' = {batch_size!r} is not one of the model's batch "
                       f"sizes {model.engines.batches}")
    buffer = lookup_data_buffer(get_dataset_buffer(dataset, dynamic), f"dataset[{dynamic}]")
    if buffer.size < BATCH_BYTES:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"the dynamic input's buffer holds {buffer.size} bytes; it needs "
                       f"{BATCH_BYTES}")
    value = np.array([batch], np.int64)
    memory.memcpy(buffer.data, BATCH_BYTES, memory.register_buffer(value), BATCH_BYTES,
                  ACL_MEMCPY_DEFAULT)


def _gear_desc(model_desc: int, kind: str) -> Any:
    gears = _desc(model_desc).gears
    return gears if gears is not None and gears.kind == kind else None


def _gear_model(model_id: int, kind: str, option: str) -> tuple[LoadedModel, Any]:
    model = _model(model_id)
    gears = None if model.staged is None else model.staged.gears
    if gears is None or gears.kind != kind:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'modelId' = {model.handle:#x} was not converted with "
                       f"{option} (the dynamic-shape calls are mutually exclusive)")
    return model, gears


def _joined(names: Sequence[str], gear: dict) -> tuple[int, ...]:
    return tuple(d for name in names for d in gear[name])


def get_input_dynamic_gear_count(model_desc: int, index: int = -1) -> int:
    """aclmdlGetInputDynamicGearCount: the gears of a --dynamic-dims model (0 otherwise;
    ``index`` is reserved, -1)."""
    gears = _gear_desc(model_desc, "dims")
    return 0 if gears is None else len(gears.shapes)


def get_input_dynamic_dims(model_desc: int, index: int = -1,
                           gear_count: int | None = None) -> list[IODims]:
    """aclmdlGetInputDynamicDims: per gear, every input's dims one after the other (the
    form ``set_input_dynamic_dims`` takes); ``gear_count`` must be the model's count."""
    gears = _gear_desc(model_desc, "dims")
    count = 0 if gears is None else len(gears.shapes)
    if gear_count is not None and core.as_index(gear_count) != count:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'gearCount' = {gear_count!r} is not the model's gear count "
                       f"{count} (get_input_dynamic_gear_count)")
    if gears is None:
        return []
    names = [i.name for i in _desc(model_desc).inputs if i.name != ACL_DYNAMIC_TENSOR_NAME]
    return [IODims("", _joined(names, gear)) for gear in gears.shapes]


def set_input_dynamic_dims(model_id: int, dataset: int, index: int, dims: Any) -> None:
    """aclmdlSetInputDynamicDims: choose the gear of the next runs on ``dataset``: ``dims``
    (an IODims, or a sequence) holds every input's dims one after the other, and must be one
    of ``get_input_dynamic_dims``'s; the gear's values go into the dynamic input's buffer
    (``index``, from get_input_index_by_name with ACL_DYNAMIC_TENSOR_NAME)."""
    model, gears = _gear_model(model_id, "dims", "--dynamic-dims")
    values = tuple(int(v) for v in (dims.dims if isinstance(dims, IODims) else dims))
    names = [spec.name for spec in model.staged.inputs]
    for gear in gears.shapes:
        if _joined(names, gear) == values:
            _write_dynamic(model, dataset, index, _gear_values(gears, gear))
            return
    raise AclError(ACL_ERROR_INVALID_PARAM,
                   f"argument 'dims' = {list(values)} is not one of the model's gears "
                   f"{[list(_joined(names, gear)) for gear in gears.shapes]}")


def get_dynamic_hw(model_desc: int, index: int = -1) -> list[tuple[int, int]]:
    """aclmdlGetDynamicHW: the (height, width) gears of a --dynamic-image-size model (empty
    otherwise; ``index`` is reserved, -1)."""
    gears = _gear_desc(model_desc, "image_size")
    return [] if gears is None else [_gear_values(gears, g) for g in gears.shapes]


def set_dynamic_hw_size(model_id: int, dataset: int, index: int, height: int,
                        width: int) -> None:
    """aclmdlSetDynamicHWSize: choose the image size of the next runs on ``dataset``; it
    must be one of ``get_dynamic_hw``'s."""
    model, gears = _gear_model(model_id, "image_size", "--dynamic-image-size")
    wanted = (core.as_index(height), core.as_index(width))
    sizes = [_gear_values(gears, gear) for gear in gears.shapes]
    if wanted not in sizes:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"arguments 'height', 'width' = {height!r}, {width!r} are not one of the "
                       f"model's image sizes {[list(size) for size in sizes]}")
    _write_dynamic(model, dataset, index, wanted)


def _write_dynamic(model: LoadedModel, dataset: int, index: int, values: Sequence[int]) -> None:
    """Write a gear's values (int64) into the dynamic input's buffer of ``dataset``."""
    dynamic = len(model.inputs) - 1
    if core.as_index(index) != dynamic:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is not the dynamic input "
                       f"{ACL_DYNAMIC_TENSOR_NAME!r} (index {dynamic})")
    array = np.array(values, np.int64)
    buffer = lookup_data_buffer(get_dataset_buffer(dataset, dynamic), f"dataset[{dynamic}]")
    if buffer.size < array.nbytes:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"the dynamic input's buffer holds {buffer.size} bytes; it needs "
                       f"{array.nbytes}")
    memory.memcpy(buffer.data, array.nbytes, memory.register_buffer(array), array.nbytes,
                  ACL_MEMCPY_DEFAULT)


def get_input_name_by_index(model_desc: int, index: int) -> str:
    """aclmdlGetInputNameByIndex."""
    return _pick(_desc(model_desc).inputs, index, "input").name


def get_output_name_by_index(model_desc: int, index: int) -> str:
    """aclmdlGetOutputNameByIndex."""
    return _pick(_desc(model_desc).outputs, index, "output").name


def get_input_data_type(model_desc: int, index: int) -> DataType:
    """aclmdlGetInputDataType."""
    return _pick(_desc(model_desc).inputs, index, "input").data_type


def get_output_data_type(model_desc: int, index: int) -> DataType:
    """aclmdlGetOutputDataType."""
    return _pick(_desc(model_desc).outputs, index, "output").data_type


def get_input_format(model_desc: int, index: int) -> Format:
    """aclmdlGetInputFormat."""
    return _pick(_desc(model_desc).inputs, index, "input").format


def get_output_format(model_desc: int, index: int) -> Format:
    """aclmdlGetOutputFormat."""
    return _pick(_desc(model_desc).outputs, index, "output").format


def get_input_index_by_name(model_desc: int, name: str) -> int:
    """aclmdlGetInputIndexByName."""
    return _index_by_name(_desc(model_desc).inputs, name, "input")


def get_output_index_by_name(model_desc: int, name: str) -> int:
    """aclmdlGetOutputIndexByName."""
    return _index_by_name(_desc(model_desc).outputs, name, "output")


# -- aclmdlDataset ----------------------------------------------------------------------------
def create_dataset() -> int:
    """aclmdlCreateDataset: an empty dataset."""
    dataset = Dataset()
    dataset.handle = core.current().handles.add(dataset)
    return dataset.handle


def destroy_dataset(dataset: int) -> None:
    """aclmdlDestroyDataset: its DataBuffers are not destroyed (they are the caller's), nor
    the tensor descriptions the caller set; those ``execute`` made for outputs are."""
    found = _dataset(dataset)
    core.current().handles.remove(found.handle)
    _release_owned(found)


def _release_owned(dataset: Dataset) -> None:
    from openacl.tensor import destroy_tensor_desc

    for handle in dataset.owned_descs:
        try:
            destroy_tensor_desc(handle)
        except AclError:
            pass
    dataset.owned_descs.clear()


def set_dataset_tensor_desc(dataset: int, tensor_desc: int, index: int) -> int:
    """aclmdlSetDatasetTensorDesc(dataset, tensorDesc, index): the real dims of input
    ``index`` of a dynamic-shape model for the next ``execute`` (only the dims count; they
    must lie in the ranges the model was converted for). Returns the dataset (as pyACL)."""
    from openacl.tensor import lookup_tensor_desc

    target = _dataset(dataset)
    lookup_tensor_desc(tensor_desc, "tensorDesc")
    position = core.as_index(index)
    if position is None or position < 0:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is invalid: expected an index >= 0")
    if target.tensor_descs.get(position) in target.owned_descs:
        _release_one(target, position)
    target.tensor_descs[position] = int(tensor_desc)
    return target.handle


def _release_one(dataset: Dataset, position: int) -> None:
    from openacl.tensor import destroy_tensor_desc

    handle = dataset.tensor_descs.pop(position)
    dataset.owned_descs.discard(handle)
    destroy_tensor_desc(handle)


def get_dataset_tensor_desc(dataset: int, index: int) -> int:
    """aclmdlGetDatasetTensorDesc(dataset, index): the tensor description at ``index``: for
    an output dataset after ``execute`` of a dynamic-shape model, the output's real dims;
    0 when none is set (CANN returns a null pointer)."""
    target = _dataset(dataset)
    position = core.as_index(index)
    if position is None or position < 0:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is invalid: expected an index >= 0")
    return target.tensor_descs.get(position, 0)


def add_dataset_buffer(dataset: int, data_buffer: int) -> int:
    """aclmdlAddDatasetBuffer: append a DataBuffer; returns the dataset (as pyACL does)."""
    target = _dataset(dataset)
    buffer = lookup_data_buffer(data_buffer)
    target.buffers.append(buffer.handle)
    return target.handle


def get_dataset_num_buffers(dataset: int) -> int:
    """aclmdlGetDatasetNumBuffers."""
    return len(_dataset(dataset).buffers)


def get_dataset_buffer(dataset: int, index: int) -> int:
    """aclmdlGetDatasetBuffer: the DataBuffer handle at ``index``."""
    buffers = _dataset(dataset).buffers
    position = core.as_index(index)
    if position is None or not 0 <= position < len(buffers):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'index' = {index!r} is invalid: the dataset holds "
                       f"{len(buffers)} buffer(s)")
    return buffers[position]


# -- execution --------------------------------------------------------------------------------
_PRIVATE = object()  # execute's stream: the model's own


def _buffers(dataset: Any, argument: str, expected: int, code: int) -> list[tuple[int, int]]:
    handles = _dataset(dataset, argument).buffers
    if len(handles) != expected:
        raise AclError(code, f"argument '{argument}' holds {len(handles)} buffer(s); the model "
                             f"has {expected} {argument}(s)")
    pairs = []
    for index, handle in enumerate(handles):
        buffer = lookup_data_buffer(handle, f"{argument}[{index}]")
        pairs.append((buffer.data, buffer.size))
    return pairs


def _launch(model_id: Any, input: Any, output: Any, stream: Any) -> LoadedModel:
    model = _model(model_id)
    threads.apply(model.threads)  # numpy's BLAS pool at the setting (runtime/threads.py)
    inputs = _buffers(input, "input", len(model.inputs), ACL_ERROR_MODEL_INPUT_NOT_MATCH)
    outputs = _buffers(output, "output", len(model.outputs), ACL_ERROR_MODEL_OUTPUT_NOT_MATCH)
    target = model.stream if stream is _PRIVATE else resolve_stream(stream)
    span = profiler.begin_range(target, "model", model.staged.name if model.staged else
                                model.engine.graph.name) if profiler.active else None
    if model.staged is not None:
        input_set = _dataset(input, "input")
        if model.staged.gears is not None:
            dims = _gear_dims(model, inputs.pop())
        else:
            dims = _input_dims(model, input_set)
        _launch_staged(model, dims, inputs, _dataset(output, "output"), outputs, target)
        if span is not None:
            span.end()
        return model
    engine = model.engine
    if model.engines.dynamic:  # the batch set by set_dynamic_batch_size, read from its input
        address, size = inputs.pop()
        if size < BATCH_BYTES:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"the dynamic input's buffer holds {size} bytes; it needs "
                           f"{BATCH_BYTES}")
        batch = int(np.frombuffer(memory.read_bytes(address, BATCH_BYTES, "input"),
                                  np.int64)[0])
        if batch not in model.engines.batches:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"the dynamic input holds batch {batch}, not one of the model's "
                           f"{model.engines.batches}: call set_dynamic_batch_size first")
        engine = model.engines.for_batch(batch)
        model.current_batch = batch
    engine.launch(inputs, outputs, target)
    if span is not None:
        span.end()
    return model


def _input_dims(model: LoadedModel, dataset: Dataset) -> list[tuple[int, ...]]:
    """Each input's real dims: set by ``set_dataset_tensor_desc``, or the fixed ones."""
    from openacl.tensor import lookup_tensor_desc

    dims = []
    for index, (info, spec) in enumerate(zip(model.inputs, model.staged.inputs, strict=True)):
        handle = dataset.tensor_descs.get(index)
        if handle is not None:
            shape = tuple(int(d) for d in lookup_tensor_desc(handle, f"input[{index}]").dims)
        elif all(d >= 0 for d in info.dims):
            shape = info.dims
        else:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"input {index} ({info.name!r}) has dynamic dims {list(info.dims)}: "
                           f"set its real dims with set_dataset_tensor_desc before execute")
        spec.check(spec.dtype, shape)  # rank and fixed dims (100017), ranges (100000)
        dims.append(shape)
    return dims


def _gear_dims(model: LoadedModel, dynamic: tuple[int, int]) -> list[tuple[int, ...]]:
    """The input dims of the gear whose values the dynamic input's buffer holds."""
    gears = model.staged.gears
    count = model.inputs[-1].dims[0]
    address, size = dynamic
    if size < BATCH_BYTES * count:
        raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                       f"the dynamic input's buffer holds {size} bytes; it needs "
                       f"{BATCH_BYTES * count}")
    values = np.frombuffer(memory.read_bytes(address, BATCH_BYTES * count, "input"), np.int64)
    for gear in gears.shapes:
        if tuple(int(v) for v in values) == _gear_values(gears, gear):
            return [gear[spec.name] for spec in model.staged.inputs]
    raise AclError(ACL_ERROR_INVALID_PARAM,
                   f"the dynamic input holds {values.tolist()}, not one of the model's gears "
                   f"{[list(_gear_values(gears, g)) for g in gears.shapes]}: call "
                   f"set_input_dynamic_dims / set_dynamic_hw_size first")


def _gear_values(gears: Any, gear: dict) -> tuple[int, ...]:
    """What the dynamic input holds for ``gear``: the -1 dims' values (dims), or the
    height and width (image size)."""
    values = gears.values(gear)
    return values[:2] if gears.kind == "image_size" else values


def _launch_staged(model: LoadedModel, dims: list[tuple[int, ...]],
                   inputs: list[tuple[int, int]], output_set: Dataset,
                   outputs: list[tuple[int, int]], target: Stream) -> None:
    """Enqueue one run of a dynamic-shape model at the input ``dims`` (from the input
    dataset's tensor descriptions, or the gear chosen), checked here with the buffer sizes;
    the task reads the inputs, runs the staged engine, writes the outputs (each buffer must
    hold its output, else the stream fails with ACL_ERROR_MODEL_OUTPUT_NOT_MATCH) and records
    their dims in
    the output dataset's tensor descriptions."""
    feeds_meta = []
    for index, ((address, size), shape, spec) in enumerate(
            zip(inputs, dims, model.staged.inputs, strict=True)):
        needed = int(np.prod(shape, dtype=np.int64)) * spec.dtype.itemsize
        if size < needed:
            raise AclError(ACL_ERROR_MODEL_INPUT_NOT_MATCH,
                           f"input {index} ({spec.name!r}): the buffer holds {size} bytes; "
                           f"dims {list(shape)} need {needed}")
        feeds_meta.append((spec.name, address, needed, spec.dtype, shape))

    model.staged.root_stage({name: (dtype, shape) for name, _, _, dtype, shape in feeds_meta})

    def run() -> None:  # on the stream's worker: the model's context is made current there
        push_context(model.context)
        try:
            _run_staged(model, feeds_meta, outputs, output_set)
        finally:
            pop_context(model.context)

    target.submit(run)


def _run_staged(model: LoadedModel, feeds_meta: list[tuple], outputs: list[tuple[int, int]],
                output_set: Dataset) -> None:
    feeds = {name: np.frombuffer(memory.read_bytes(address, nbytes, "input"),
                                 dtype).reshape(shape) if nbytes else np.empty(shape, dtype)
             for name, address, nbytes, dtype, shape in feeds_meta}
    results = model.staged.run(feeds)
    for index, ((address, size), array) in enumerate(zip(outputs, results, strict=True)):
        array = np.ascontiguousarray(array)
        if array.nbytes > size:
            raise AclError(ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
                           f"output {index} ({model.outputs[index].name!r}) is "
                           f"{array.dtype} {list(array.shape)}, {array.nbytes} bytes; its "
                           f"buffer holds {size}")
        if array.nbytes:
            memory.memcpy(address, size, memory.register_buffer(array), array.nbytes,
                          ACL_MEMCPY_DEFAULT)
    _record_outputs(model, output_set, [tuple(a.shape) for a in results], results)


def _record_outputs(model: LoadedModel, dataset: Dataset, shapes: list[tuple[int, ...]],
                    results: list[np.ndarray]) -> None:
    from openacl.tensor import create_tensor_desc

    model.last_output_dims = shapes
    for index, (shape, array) in enumerate(zip(shapes, results, strict=True)):
        if index in dataset.tensor_descs and dataset.tensor_descs[index] in dataset.owned_descs:
            _release_one(dataset, index)
        handle = create_tensor_desc(dtypes.from_numpy_dtype(array.dtype), list(shape),
                                    MODEL_FORMAT)
        dataset.tensor_descs[index] = handle
        dataset.owned_descs.add(handle)


def execute(model_id: int, input: int, output: int) -> None:
    """aclmdlExecute(modelId, input, output): run the model and wait for it."""
    model = _launch(model_id, input, output, _PRIVATE)
    try:
        model.stream.synchronize()
    except AclError:
        # a failed task poisons a stream for good: give the model a fresh one, then report
        failed, model.stream = model.stream, Stream(model.context)
        failed.shutdown(drain_timeout=0.0)
        raise


def execute_async(model_id: int, input: int, output: int,
                  stream: Any = None) -> None:
    """aclmdlExecuteAsync(modelId, input, output, stream): enqueue a run on ``stream``.

    The outputs are ready once the stream is synchronized; the input and output buffers
    must stay alive until then.
    """
    _launch(model_id, input, output, stream)


# an AclError leaving a public function records the recent error message (openacl.errors)
expose(globals(), [_name for _name, _value in list(globals().items()) if not
                   _name.startswith("_") and getattr(_value, "__module__", None) == __name__])

__all__ = [
    "MODEL_FORMAT", "ACL_DYNAMIC_TENSOR_NAME", "IODims", "IODimsRange", "TensorInfo",
    "ModelDesc", "Dataset", "load_from_file", "load_from_mem", "unload", "create_desc",
    "destroy_desc", "get_desc", "get_num_inputs", "get_num_outputs",
    "get_input_size_by_index", "get_output_size_by_index", "get_input_dims",
    "get_input_dims_v2", "get_input_dims_range", "get_output_dims", "get_cur_output_dims",
    "get_dynamic_batch", "set_dynamic_batch_size", "get_input_dynamic_gear_count",
    "get_input_dynamic_dims", "set_input_dynamic_dims", "get_dynamic_hw",
    "set_dynamic_hw_size", "get_input_name_by_index", "get_output_name_by_index",
    "get_input_data_type", "get_output_data_type", "get_input_format", "get_output_format",
    "get_input_index_by_name", "get_output_index_by_name", "create_dataset",
    "destroy_dataset", "set_dataset_tensor_desc", "get_dataset_tensor_desc",
    "add_dataset_buffer", "get_dataset_num_buffers", "get_dataset_buffer", "execute",
    "execute_async",
]
__dir__ = module_dir(globals())
