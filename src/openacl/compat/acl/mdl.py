"""pyACL's ``acl.mdl``: the model runtime of ``openacl.mdl`` with pyACL's conventions.

Checked against the pyACL API reference ("aclpythondevg", aclmdl pages):
``model_id, ret = acl.mdl.load_from_file(path)``; ``model_id, ret =
acl.mdl.load_from_mem(model, model_size)`` (``model`` is an address, e.g. from
``acl.util.bytes_to_ptr``); ``ret = acl.mdl.unload(model_id)``; ``model_desc =
acl.mdl.create_desc()``; ``ret = acl.mdl.get_desc(model_desc, model_id)``; getters that C
declares returning the value return it alone (``acl.mdl.get_num_inputs(model_desc)``,
``acl.mdl.get_input_size_by_index(model_desc, i)``, ``acl.mdl.get_input_name_by_index``,
``dims_range, ret = acl.mdl.get_input_dims_range(model_desc, i)`` (``{"rangeCount",
"range"}``); ``dataset, ret = acl.mdl.set_dataset_tensor_desc(dataset, tensor_desc, i)``,
``tensor_desc = acl.mdl.get_dataset_tensor_desc(dataset, i)`` (dynamic-shape models);
``get_input_data_type``, ``get_input_format``); ``dims, ret = acl.mdl.get_input_dims(
model_desc, i)`` with ``dims = {"name": ..., "dimCount": ..., "dims": [...]}`` (also
``get_output_dims``, ``get_cur_output_dims``); ``index, ret =
acl.mdl.get_input_index_by_name(model_desc, name)``; ``dataset = acl.mdl.create_dataset()``;
``dataset, ret = acl.mdl.add_dataset_buffer(dataset, data_buffer)``; ``data_buffer =
acl.mdl.get_dataset_buffer(dataset, i)``; ``ret = acl.mdl.execute(model_id, input,
output)``; ``ret = acl.mdl.execute_async(model_id, input, output, stream)``. Nothing raises
for a bad argument: the code comes back and the message is kept for
``acl.get_recent_err_msg()``.
"""

from __future__ import annotations

from typing import Any

from openacl import mdl as _mdl
from openacl._api import module_dir
from openacl.compat.acl._face import HANDLE, RET, VALUE, generate, outputs

ACL_DT_UNDEFINED = -1  # what the data-type getters report on failure
ACL_FORMAT_UNDEFINED = -1  # what the format getters report on failure


def _dims(io_dims: _mdl.IODims) -> dict[str, Any]:
    """aclmdlIODims as pyACL hands it out."""
    return {"name": io_dims.name, "dimCount": io_dims.dim_count, "dims": list(io_dims.dims)}


def _get_input_dims(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetInputDims: ``{"name", "dimCount", "dims"}`` of input ``index``."""
    return _dims(_mdl.get_input_dims(model_desc, index))


def _get_output_dims(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetOutputDims: ``{"name", "dimCount", "dims"}`` of output ``index``."""
    return _dims(_mdl.get_output_dims(model_desc, index))


def _get_cur_output_dims(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetCurOutputDims: the real dims of output ``index``."""
    return _dims(_mdl.get_cur_output_dims(model_desc, index))


def _get_input_dims_v2(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetInputDimsV2: ``{"name", "dimCount", "dims"}`` of input ``index``."""
    return _dims(_mdl.get_input_dims_v2(model_desc, index))


def _get_input_dims_range(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetInputDimsRange: ``{"rangeCount", "range": [[low, high], ...]}``."""
    found = _mdl.get_input_dims_range(model_desc, index)
    return {"rangeCount": found.range_count, "range": [list(pair) for pair in found.range]}


def _get_input_dynamic_dims(model_desc: int, index: int, gear_count: int) -> list:
    """aclmdlGetInputDynamicDims: one ``{"name", "dimCount", "dims"}`` per gear."""
    return [_dims(dims) for dims in _mdl.get_input_dynamic_dims(model_desc, index, gear_count)]


def _set_input_dynamic_dims(model_id: int, dataset: int, index: int, dims: Any) -> None:
    """aclmdlSetInputDynamicDims: ``dims`` as pyACL passes it, ``{"dimCount", "dims"}``."""
    values = dims.get("dims", []) if isinstance(dims, dict) else dims
    _mdl.set_input_dynamic_dims(model_id, dataset, index, values)


def _get_dynamic_hw(model_desc: int, index: int) -> dict[str, Any]:
    """aclmdlGetDynamicHW: ``{"hwCount", "hw": [[height, width], ...]}``."""
    sizes = _mdl.get_dynamic_hw(model_desc, index)
    return {"hwCount": len(sizes), "hw": [list(size) for size in sizes]}


_NO_DIMS = ({"name": "", "dimCount": 0, "dims": []},)


def _get_dynamic_batch(model_desc: int) -> dict[str, Any]:
    """aclmdlGetDynamicBatch: ``{"batchCount", "batch"}`` (0 and [] for a static model)."""
    batches = _mdl.get_dynamic_batch(model_desc)
    return {"batchCount": len(batches), "batch": batches}

_TABLE = [
    # loading
    ("load_from_file", _mdl.load_from_file, outputs("model_id")),
    ("load_from_mem", _mdl.load_from_mem, outputs("model_id")),
    ("unload", _mdl.unload, RET),
    # aclmdlDesc
    ("create_desc", _mdl.create_desc, HANDLE),
    ("destroy_desc", _mdl.destroy_desc, RET),
    ("get_desc", _mdl.get_desc, RET),
    ("get_num_inputs", _mdl.get_num_inputs, VALUE(0)),
    ("get_num_outputs", _mdl.get_num_outputs, VALUE(0)),
    ("get_input_size_by_index", _mdl.get_input_size_by_index, VALUE(0)),
    ("get_output_size_by_index", _mdl.get_output_size_by_index, VALUE(0)),
    ("get_input_dims", _get_input_dims, outputs("dims", failure=_NO_DIMS)),
    ("get_input_dims_v2", _get_input_dims_v2, outputs("dims", failure=_NO_DIMS)),
    ("get_input_dims_range", _get_input_dims_range,
     outputs("dims_range", failure=({"rangeCount": 0, "range": []},))),
    ("get_output_dims", _get_output_dims, outputs("dims", failure=_NO_DIMS)),
    ("get_cur_output_dims", _get_cur_output_dims, outputs("dims", failure=_NO_DIMS)),
    ("get_dynamic_batch", _get_dynamic_batch,
     outputs("batch", failure=({"batchCount": 0, "batch": []},))),
    ("set_dynamic_batch_size", _mdl.set_dynamic_batch_size, RET),
    ("get_input_dynamic_gear_count", _mdl.get_input_dynamic_gear_count,
     outputs("gear_count")),
    ("get_input_dynamic_dims", _get_input_dynamic_dims, outputs("dims_out", failure=([],))),
    ("set_input_dynamic_dims", _set_input_dynamic_dims, RET),
    ("get_dynamic_hw", _get_dynamic_hw, outputs("hw", failure=({"hwCount": 0, "hw": []},))),
    ("set_dynamic_hw_size", _mdl.set_dynamic_hw_size, RET),
    ("get_input_name_by_index", _mdl.get_input_name_by_index, VALUE("")),
    ("get_output_name_by_index", _mdl.get_output_name_by_index, VALUE("")),
    ("get_input_data_type", _mdl.get_input_data_type, VALUE(ACL_DT_UNDEFINED)),
    ("get_output_data_type", _mdl.get_output_data_type, VALUE(ACL_DT_UNDEFINED)),
    ("get_input_format", _mdl.get_input_format, VALUE(ACL_FORMAT_UNDEFINED)),
    ("get_output_format", _mdl.get_output_format, VALUE(ACL_FORMAT_UNDEFINED)),
    ("get_input_index_by_name", _mdl.get_input_index_by_name, outputs("index")),
    ("get_output_index_by_name", _mdl.get_output_index_by_name, outputs("index")),
    # aclmdlDataset
    ("create_dataset", _mdl.create_dataset, HANDLE),
    ("destroy_dataset", _mdl.destroy_dataset, RET),
    ("add_dataset_buffer", _mdl.add_dataset_buffer, outputs("dataset")),
    ("get_dataset_buffer", _mdl.get_dataset_buffer, VALUE(0)),
    ("get_dataset_num_buffers", _mdl.get_dataset_num_buffers, VALUE(0)),
    ("set_dataset_tensor_desc", _mdl.set_dataset_tensor_desc, outputs("dataset")),
    ("get_dataset_tensor_desc", _mdl.get_dataset_tensor_desc, VALUE(0)),
    # execution
    ("execute", _mdl.execute, RET),
    ("execute_async", _mdl.execute_async, RET),
]

FUNCTIONS = generate(_TABLE, globals())
__all__ = list(FUNCTIONS)
ACL_DYNAMIC_TENSOR_NAME = _mdl.ACL_DYNAMIC_TENSOR_NAME  # the dynamic batch input's name

__dir__ = module_dir(globals())
