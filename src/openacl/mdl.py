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
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl import dtypes
from openacl.constants import ACL_MEMCPY_DEFAULT
from openacl.dtypes import DataType, Format
from openacl.errors import (
    ACL_ERROR_FEATURE_UNSUPPORTED,
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    AclError,
)
from openacl.runtime import core, memory
from openacl.runtime.context import current_context
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
    size: int  # bytes


class LoadedModel:
    """A model loaded into the current context; its handle is the model id."""

    def __init__(self, engine: Any, metadata: dict | None, gears: Sequence[Any] = ()) -> None:
        self.engine = engine
        self.metadata = dict(metadata or {})
        graph = engine.graph
        self.inputs = tuple(_info(graph.value(name)) for name in graph.inputs)
        self.outputs = tuple(_info(graph.value(name)) for name in graph.outputs)
        from openacl.model.engine import EngineSet

        self.engines = EngineSet(engine, gears)  # by batch size
        if self.engines.dynamic:  # dim 0 varies; the sizes are the largest gear's
            self.current_batch = graph.value(graph.inputs[0]).shape[0]
            self.inputs = (*(TensorInfo(i.name, (-1, *i.dims[1:]), i.data_type, i.format,
                                        i.size) for i in self.inputs),
                           TensorInfo(ACL_DYNAMIC_TENSOR_NAME, (1,), DataType.ACL_INT64,
                                      MODEL_FORMAT, BATCH_BYTES))
        self.context = current_context()
        self.stream = Stream(self.context)  # for the synchronous execute
        self.handle = core.current().handles.add(self)

    def close(self) -> None:
        core.current().handles.remove(self.handle)
        try:
            self.engines.close()
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


@dataclass(eq=False)
class Dataset:
    """aclmdlDataset: an ordered list of DataBuffer handles."""

    buffers: list[int] = field(default_factory=list)
    handle: int = 0


def _info(value: Any) -> TensorInfo:
    return TensorInfo(value.name, tuple(value.shape), dtypes.from_numpy_dtype(value.dtype),
                      MODEL_FORMAT, value.nbytes)


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
    return load_lowered(*_om().load_model_gears(os.fspath(model_path), mmap=False))


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
    return load_lowered(*_om().load_model_gears(bytes(blob)))


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
    """aclmdlDestroyDataset: its DataBuffers are not destroyed (they are the caller's)."""
    core.current().handles.remove(_dataset(dataset).handle)


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
    inputs = _buffers(input, "input", len(model.inputs), ACL_ERROR_MODEL_INPUT_NOT_MATCH)
    outputs = _buffers(output, "output", len(model.outputs), ACL_ERROR_MODEL_OUTPUT_NOT_MATCH)
    target = model.stream if stream is _PRIVATE else resolve_stream(stream)
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
    return model


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
