"""OpenACL: the Ascend ACL / aclnn programming model in Python, on any CPU or NVIDIA GPU.

Quick start::

    import numpy as np, openacl
    openacl.init()
    openacl.rt.set_device(0)
    x = openacl.to_device(np.arange(6, dtype=np.float32))
    print(x.numpy())
    x.free()
    openacl.rt.reset_device(0)
    openacl.finalize()

The flat functions keep pyACL's names (``openacl.rt.malloc``...), return their outputs and
raise ``openacl.AclError``. ``openacl.compat`` gives pyACL's exact conventions.
"""

from __future__ import annotations

from openacl import constants as _constants
from openacl import dtypes, rt, util
from openacl._api import module_dir as _module_dir
from openacl.constants import *  # noqa: F401,F403 - the ACL_* names, as pyACL programs use them
from openacl.dtypes import DataType, Format, data_type_size
from openacl.errors import AclError, get_recent_err_msg
from openacl.errors import expose as _expose
from openacl.objects import Context, DeviceBuffer, Event, HostBuffer, Stream
from openacl.runtime.core import LeakWarning, finalize, finalize_reference, init, is_initialized
from openacl.runtime.memory import (
    empty_cache,
    host_memory_stats,
    memory_stats,
    reset_peak_memory_stats,
)
from openacl.tensor import (
    Tensor,
    create_bool_array,
    create_data_buffer,
    create_float_array,
    create_int_array,
    create_scalar,
    create_scalar_list,
    create_tensor,
    create_tensor_desc,
    create_tensor_list,
    destroy_bool_array,
    destroy_data_buffer,
    destroy_float_array,
    destroy_int_array,
    destroy_scalar,
    destroy_scalar_list,
    destroy_tensor,
    destroy_tensor_desc,
    destroy_tensor_list,
    empty,
    from_dlpack,
    get_bool_array_size,
    get_data_buffer_addr,
    get_data_buffer_size,
    get_data_buffer_size_v2,
    get_data_type,
    get_float_array_size,
    get_format,
    get_int_array_size,
    get_raw_tensor_addr,
    get_scalar_list_size,
    get_storage_shape,
    get_tensor_desc_dim,
    get_tensor_desc_dim_range,
    get_tensor_desc_dim_v2,
    get_tensor_desc_element_count,
    get_tensor_desc_format,
    get_tensor_desc_name,
    get_tensor_desc_num_dims,
    get_tensor_desc_size,
    get_tensor_desc_type,
    get_tensor_list_size,
    get_view_offset,
    get_view_shape,
    get_view_strides,
    set_raw_tensor_addr,
    set_tensor_const,
    set_tensor_desc_name,
    set_tensor_format,
    set_tensor_shape,
    set_tensor_shape_range,
    to_device,
    update_data_buffer,
)

_API = [
    "AclError", "get_recent_err_msg", "DataType", "Format", "data_type_size",
    "Context", "DeviceBuffer", "Event", "HostBuffer", "Stream", "LeakWarning", "init",
    "finalize", "finalize_reference", "is_initialized", "empty_cache", "host_memory_stats",
    "memory_stats", "reset_peak_memory_stats", "Tensor", "create_bool_array",
    "create_data_buffer", "create_float_array", "create_int_array", "create_scalar",
    "create_scalar_list", "create_tensor", "create_tensor_desc", "create_tensor_list",
    "destroy_bool_array", "destroy_data_buffer", "destroy_float_array", "destroy_int_array",
    "destroy_scalar", "destroy_scalar_list", "destroy_tensor", "destroy_tensor_desc",
    "destroy_tensor_list", "empty", "from_dlpack", "get_bool_array_size",
    "get_data_buffer_addr", "get_data_buffer_size", "get_data_buffer_size_v2",
    "get_data_type", "get_float_array_size", "get_format", "get_int_array_size",
    "get_raw_tensor_addr", "get_scalar_list_size", "get_storage_shape",
    "get_tensor_desc_dim", "get_tensor_desc_dim_range", "get_tensor_desc_dim_v2",
    "get_tensor_desc_element_count", "get_tensor_desc_format", "get_tensor_desc_name",
    "get_tensor_desc_num_dims", "get_tensor_desc_size", "get_tensor_desc_type",
    "get_tensor_list_size", "get_view_offset", "get_view_shape", "get_view_strides",
    "set_raw_tensor_addr", "set_tensor_const", "set_tensor_desc_name", "set_tensor_format",
    "set_tensor_shape", "set_tensor_shape_range", "to_device", "update_data_buffer",
]
# an AclError leaving one of these functions records the recent error message (openacl.errors)
_expose(globals(), _API)

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("aclnn", "ops", "op", "mdl")  # heavy: imported on first use, not eagerly
__all__ = [*_API, *_constants.__all__, "InferenceSession",  # noqa: F405 (lazy, __getattr__)
           "dtypes", "rt", "util", *_LAZY_SUBMODULES]
__dir__ = _module_dir(globals())


def __getattr__(name: str):
    if name == "InferenceSession":  # loads the model engine (and onnx) on first use only
        from openacl.model.session import InferenceSession

        return InferenceSession
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"openacl.{name}")
    raise AttributeError(f"module 'openacl' has no attribute {name!r}")
