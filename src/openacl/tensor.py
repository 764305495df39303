"""Tensors and their relatives: aclTensor, aclScalar, int/float/bool arrays, tensor and scalar
lists (the aclnn face), TensorDesc and DataBuffer (the aclop face), and the Pythonic ``Tensor``.

Every object is registered in the runtime's handle table; the flat functions take and return
the handle ints, as the C API takes and returns pointers. ``Tensor`` wraps a handle plus the
device memory it owns.

aclCreateTensor semantics: ``strides`` and ``offset`` count elements; the view is
``view_dims`` read with ``strides`` starting ``offset`` elements after ``data``; the storage
(``storage_dims`` elements, in ``format``) must fit in the allocation behind ``data``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openacl import dtypes
from openacl._api import module_dir
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core, memory
from openacl.runtime.device import synchronize_device
from openacl.runtime.stream import resolve_stream

ACL_MAX_DIM_CNT = 128  # most dims a tensor or tensor desc may have (acl_base.h)
ACL_UNKNOWN_DIM = -1  # a dynamic dimension in a TensorDesc
ACL_UNKNOWN_RANK = -2  # a TensorDesc of unknown rank
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
KDL_CPU = 1  # DLPack device type of host memory
KDL_CUDA = 2  # DLPack device type of CUDA device memory

# Formats whose storage is the view's element space (strided); others are private layouts.
PLAIN_FORMATS = frozenset({
    Format.ACL_FORMAT_ND, Format.ACL_FORMAT_NCHW, Format.ACL_FORMAT_NHWC,
    Format.ACL_FORMAT_NCDHW, Format.ACL_FORMAT_NDHWC, Format.ACL_FORMAT_HWCN,
    Format.ACL_FORMAT_NC, Format.ACL_FORMAT_NCL, Format.ACL_FORMAT_UNDEFINED,
})


def _bad(argument: str, value: Any, reason: str) -> AclError:
    return AclError(ACL_ERROR_INVALID_PARAM, f"argument '{argument}' = {value!r} is invalid: "
                                             f"{reason}")


def _int_list(values: Any, argument: str, minimum: int | None = 0,
              max_len: int = ACL_MAX_DIM_CNT) -> tuple[int, ...]:
    if values is None:
        return ()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _bad(argument, values, "expected a sequence of integers")
    out = []
    for item in values:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise _bad(argument, values, f"element {item!r} is not an integer")
        if minimum is not None and item < minimum:
            raise _bad(argument, values, f"element {int(item)} is below {minimum}")
        out.append(int(item))
    if len(out) > max_len:
        raise _bad(argument, values, f"{len(out)} entries; at most {max_len}")
    return tuple(out)


def _index(value: Any, argument: str) -> int:
    result = core.as_index(value)
    if result is None:
        raise _bad(argument, value, "expected an integer")
    return result


MAX_TENSOR_BYTES = 1 << 62  # bound on what any tensor may describe, so sizes fit int64


def _check_size_fits(dims: Sequence[int], itemsize: int, argument: str) -> None:
    """Refuse dims whose non-zero product (what numpy checks) overflows int64 bytes."""
    if math.prod(max(d, 1) for d in dims) * itemsize >= MAX_TENSOR_BYTES:
        raise _bad(argument, list(dims), f"describes more than {MAX_TENSOR_BYTES} bytes")


def contiguous_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``dims``."""
    strides, step = [], 1
    for dim in reversed(dims):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def view_span(dims: Sequence[int], strides: Sequence[int], offset: int) -> int:
    """Elements of storage a strided view needs: 0 if empty, else last index + 1."""
    if any(d == 0 for d in dims):
        return 0
    return offset + 1 + sum((d - 1) * s for d, s in zip(dims, strides, strict=True))


# -- the handle objects ------------------------------------------------------------------------
@dataclass(eq=False)
class AclTensor:
    """An aclTensor: a strided view onto device storage."""

    view_dims: tuple[int, ...]
    data_type: DataType
    strides: tuple[int, ...]
    offset: int
    format: Format
    storage_dims: tuple[int, ...]
    data: int
    handle: int = 0

    @property
    def itemsize(self) -> int:
        return dtypes.to_numpy_dtype(self.data_type).itemsize

    @property
    def numel(self) -> int:
        return math.prod(self.view_dims)

    @property
    def storage_nbytes(self) -> int:
        return math.prod(self.storage_dims) * self.itemsize

    def is_contiguous(self) -> bool:
        return all(s == c for s, c, d in zip(self.strides, contiguous_strides(self.view_dims),
                                            self.view_dims, strict=True) if d > 1)


@dataclass(eq=False)
class AclScalar:
    value: np.generic
    data_type: DataType
    handle: int = 0


@dataclass(eq=False)
class _Array:
    values: np.ndarray
    handle: int = 0

    @property
    def size(self) -> int:
        return int(self.values.size)


class AclIntArray(_Array):
    """aclIntArray: int64 values (dims, axes, paddings...)."""


class AclFloatArray(_Array):
    """aclFloatArray: float32 values."""


class AclBoolArray(_Array):
    """aclBoolArray: bool values."""


@dataclass(eq=False)
class AclTensorList:
    tensors: list[AclTensor]
    handle: int = 0


@dataclass(eq=False)
class AclScalarList:
    scalars: list[AclScalar]
    handle: int = 0


@dataclass(eq=False)
class TensorDesc:
    """aclTensorDesc (aclop): data type, dims (``-1`` dynamic, ``[-2]`` unknown rank), format."""

    data_type: DataType
    dims: tuple[int, ...]
    format: Format
    name: str = ""
    dim_ranges: list[tuple[int, int]] = field(default_factory=list)
    const_data: bytes | None = None
    handle: int = 0


@dataclass(eq=False)
class DataBuffer:
    """aclDataBuffer: an address and a size."""

    data: int
    size: int
    handle: int = 0


def _register(obj: Any) -> int:
    obj.handle = core.current().handles.add(obj)
    return obj.handle


def _lookup(handle: Any, kind: type, argument: str) -> Any:
    return core.current().handles.get(handle, kind, argument)


def _destroy(handle: Any, kind: type, argument: str) -> None:
    obj = _lookup(handle, kind, argument)
    core.current().handles.remove(obj.handle)


# -- aclTensor ----------------------------------------------------------------------------------
def _check_storage(data: int, nbytes: int) -> None:
    if data != 0 and nbytes > 0:
        core.current().pointers.resolve(data, nbytes, "tensorData")


def create_tensor(view_dims: Sequence[int], data_type: Any, strides: Sequence[int] | None = None,
                  offset: int = 0, format: Any = Format.ACL_FORMAT_ND,
                  storage_dims: Sequence[int] | None = None, data: int = 0) -> int:
    """Create an aclTensor (aclCreateTensor); returns its handle.

    ``strides`` defaults to row-major; ``storage_dims`` defaults to ``view_dims`` for a
    contiguous view and to the 1-D span the view reaches otherwise. ``data`` may be 0 (an
    address set later); otherwise the storage must fit the allocation behind it.
    """
    core.current()
    dims = _int_list(view_dims, "viewDims")
    data_type = dtypes.to_data_type(data_type)
    itemsize = dtypes.to_numpy_dtype(data_type).itemsize
    fmt = dtypes.to_format(format)
    offset = _index(offset, "offset")
    if offset < 0:
        raise _bad("offset", offset, "must be >= 0")
    if strides is None:
        stride_tuple = contiguous_strides(dims)
    else:
        stride_tuple = _int_list(strides, "stride")
        if len(stride_tuple) != len(dims):
            raise _bad("stride", strides, f"has {len(stride_tuple)} entries but viewDims has "
                                          f"{len(dims)}")
    _check_size_fits(dims, itemsize, "viewDims")
    span = view_span(dims, stride_tuple, offset)
    if storage_dims is None:
        natural = strides is None or stride_tuple == contiguous_strides(dims)
        storage = dims if natural and offset == 0 else (span,)
    else:
        storage = _int_list(storage_dims, "storageDims")
    storage_numel = math.prod(storage)
    if fmt in PLAIN_FORMATS and span > storage_numel:
        raise _bad("viewDims", list(dims),
                   f"with stride {list(stride_tuple)} and offset {offset} the view reaches "
                   f"element {span - 1}, but storageDims {list(storage)} hold {storage_numel}")
    data = _index(data, "tensorData")
    _check_storage(data, storage_numel * itemsize)
    return _register(AclTensor(dims, data_type, stride_tuple, offset, fmt, storage, data))


def lookup_tensor(tensor: Any, argument: str = "tensor") -> AclTensor:
    return _lookup(tensor, AclTensor, argument)


def destroy_tensor(tensor: int) -> None:
    _destroy(tensor, AclTensor, "tensor")


def get_view_shape(tensor: int) -> tuple[int, ...]:
    return lookup_tensor(tensor).view_dims


def get_storage_shape(tensor: int) -> tuple[int, ...]:
    return lookup_tensor(tensor).storage_dims


def get_view_strides(tensor: int) -> tuple[int, ...]:
    return lookup_tensor(tensor).strides


def get_view_offset(tensor: int) -> int:
    return lookup_tensor(tensor).offset


def get_format(tensor: int) -> Format:
    return lookup_tensor(tensor).format


def get_data_type(tensor: int) -> DataType:
    return lookup_tensor(tensor).data_type


def get_raw_tensor_addr(tensor: int) -> int:
    """The storage address behind a tensor (aclGetRawTensorAddr)."""
    return lookup_tensor(tensor).data


def set_raw_tensor_addr(tensor: int, data: int) -> None:
    """Point a tensor at new storage (aclSetRawTensorAddr); the storage must fit there."""
    target = lookup_tensor(tensor)
    data = _index(data, "addr")
    _check_storage(data, target.storage_nbytes)
    target.data = data


def tensor_view(meta: AclTensor, argument: str, write: bool = False,
                data: int | None = None) -> tuple[Any, Any]:
    """A strided array view of a tensor's elements and a reference that keeps its memory
    alive; the whole span the view touches is bounds-checked first.

    Args:
        meta: the tensor.
        argument: name for error messages.
        write: require writable memory (outputs).
        data: storage address to use instead of ``meta.data`` (executor address updates).
    """
    dtype = dtypes.to_numpy_dtype(meta.data_type)
    span = view_span(meta.view_dims, meta.strides, meta.offset)
    if span == 0:  # nothing to read or write: an empty array of the backend's kind
        return core.current().backend.empty_array(tuple(meta.view_dims), dtype), None
    address = meta.data if data is None else data
    nbytes = span * dtype.itemsize
    region, start = core.current().pointers.resolve(address, nbytes, argument, write)
    view = strided_array(memory.pinned_view(region, start, nbytes), dtype, meta.view_dims,
                         meta.strides, meta.offset)
    return view, (region, memory._pin(region))


def strided_array(buffer: Any, dtype: np.dtype, dims: Sequence[int],
                  strides: Sequence[int], offset: int) -> np.ndarray:
    """Elements of ``dtype`` read from the byte array ``buffer`` with element ``strides``
    starting ``offset`` elements in (works for every dtype, ml_dtypes' float8 included)."""
    itemsize = dtype.itemsize
    if isinstance(buffer, np.ndarray):
        return np.ndarray(shape=tuple(dims), dtype=dtype, buffer=buffer,
                          offset=offset * itemsize, strides=tuple(s * itemsize for s in strides))
    return core.current().backend.strided(buffer, dtype, tuple(dims),
                                          tuple(s * itemsize for s in strides), offset * itemsize)


# -- scalars, arrays and lists --------------------------------------------------------------------
def _scalar_value(value: Any, data_type: DataType) -> np.generic:
    np_dtype = dtypes.to_numpy_dtype(data_type)
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float, complex)):
        raise _bad("value", value, "expected a Python or numpy number")
    if np_dtype.kind in "iu":
        if isinstance(value, (float, complex)) and not float(value.real).is_integer() \
                or isinstance(value, complex):
            raise _bad("value", value, f"is not an integer but dataType is {data_type.name}")
        info = np.iinfo(np_dtype)
        if not info.min <= int(value) <= info.max:
            raise _bad("value", value, f"does not fit {data_type.name} "
                                       f"[{info.min}, {info.max}]")
    if np_dtype.kind != "c" and isinstance(value, complex):
        raise _bad("value", value, f"is complex but dataType is {data_type.name}")
    return np.array(value).astype(np_dtype)[()]


def create_scalar(value: Any, data_type: Any) -> int:
    """Create an aclScalar holding ``value`` as ``data_type`` (aclCreateScalar)."""
    core.current()
    member = dtypes.to_data_type(data_type)
    return _register(AclScalar(_scalar_value(value, member), member))


def lookup_scalar(scalar: Any, argument: str = "scalar") -> AclScalar:
    return _lookup(scalar, AclScalar, argument)


def destroy_scalar(scalar: int) -> None:
    _destroy(scalar, AclScalar, "scalar")


def _numbers(values: Any, argument: str, kind: str) -> np.ndarray:
    if values is None or isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _bad(argument, values, "expected a sequence")
    items = list(values)
    for item in items:
        ok = {"int": isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)),
              "float": isinstance(item, (int, float, np.integer, np.floating))
              and not isinstance(item, (bool, np.bool_)),
              "bool": isinstance(item, (bool, np.bool_))}[kind]
        if not ok:
            raise _bad(argument, values, f"element {item!r} is not a {kind}")
    dtype = {"int": np.int64, "float": np.float32, "bool": np.bool_}[kind]
    try:
        return np.array(items, dtype=dtype).reshape(-1)
    except OverflowError:
        raise _bad(argument, values, "an element does not fit int64") from None


def create_int_array(values: Sequence[int]) -> int:
    """aclCreateIntArray: int64 values."""
    core.current()
    return _register(AclIntArray(_numbers(values, "value", "int")))


def create_float_array(values: Sequence[float]) -> int:
    """aclCreateFloatArray: float32 values."""
    core.current()
    return _register(AclFloatArray(_numbers(values, "value", "float")))


def create_bool_array(values: Sequence[bool]) -> int:
    """aclCreateBoolArray."""
    core.current()
    return _register(AclBoolArray(_numbers(values, "value", "bool")))


def create_tensor_list(tensors: Sequence[int]) -> int:
    """aclCreateTensorList: a list of existing tensors (not copied, not owned)."""
    core.current()
    if tensors is None or not hasattr(tensors, "__iter__"):
        raise _bad("value", tensors, "expected a sequence of tensor handles")
    items = [lookup_tensor(t, f"value[{i}]") for i, t in enumerate(tensors)]
    return _register(AclTensorList(items))


def create_scalar_list(scalars: Sequence[int]) -> int:
    """aclCreateScalarList."""
    core.current()
    if scalars is None or not hasattr(scalars, "__iter__"):
        raise _bad("value", scalars, "expected a sequence of scalar handles")
    items = [lookup_scalar(s, f"value[{i}]") for i, s in enumerate(scalars)]
    return _register(AclScalarList(items))


def destroy_int_array(array: int) -> None:
    _destroy(array, AclIntArray, "array")


def destroy_float_array(array: int) -> None:
    _destroy(array, AclFloatArray, "array")


def destroy_bool_array(array: int) -> None:
    _destroy(array, AclBoolArray, "array")


def destroy_tensor_list(tensor_list: int) -> None:
    _destroy(tensor_list, AclTensorList, "tensorList")


def destroy_scalar_list(scalar_list: int) -> None:
    _destroy(scalar_list, AclScalarList, "scalarList")


def get_int_array_size(array: int) -> int:
    return _lookup(array, AclIntArray, "array").size


def get_float_array_size(array: int) -> int:
    return _lookup(array, AclFloatArray, "array").size


def get_bool_array_size(array: int) -> int:
    return _lookup(array, AclBoolArray, "array").size


def get_tensor_list_size(tensor_list: int) -> int:
    return len(_lookup(tensor_list, AclTensorList, "tensorList").tensors)


def get_scalar_list_size(scalar_list: int) -> int:
    return len(_lookup(scalar_list, AclScalarList, "scalarList").scalars)


# -- TensorDesc and DataBuffer (aclop) -------------------------------------------------------------
def _desc_dims(dims: Any, argument: str = "dims") -> tuple[int, ...]:
    out = _int_list(dims, argument, minimum=ACL_UNKNOWN_RANK)
    if ACL_UNKNOWN_RANK in out and out != (ACL_UNKNOWN_RANK,):
        raise _bad(argument, dims, "-2 (unknown rank) must be the only dim")
    return out


def create_tensor_desc(data_type: Any, dims: Sequence[int] | None, format: Any) -> int:
    """aclCreateTensorDesc: ``dims`` may hold -1 (dynamic) or be ``[-2]`` (unknown rank)."""
    core.current()
    member = dtypes.to_data_type(data_type)
    return _register(TensorDesc(member, _desc_dims(dims), dtypes.to_format(format)))


def lookup_tensor_desc(desc: Any, argument: str = "desc") -> TensorDesc:
    return _lookup(desc, TensorDesc, argument)


def destroy_tensor_desc(desc: int) -> None:
    _destroy(desc, TensorDesc, "desc")


def get_tensor_desc_type(desc: int) -> DataType:
    return lookup_tensor_desc(desc).data_type


def get_tensor_desc_format(desc: int) -> Format:
    return lookup_tensor_desc(desc).format


def get_tensor_desc_num_dims(desc: int) -> int:
    """Number of dims; ``ACL_UNKNOWN_RANK`` (as CANN's ``(size_t)-2``) for unknown rank."""
    dims = lookup_tensor_desc(desc).dims
    return ACL_UNKNOWN_RANK if dims == (ACL_UNKNOWN_RANK,) else len(dims)


def get_tensor_desc_element_count(desc: int) -> int:
    """Elements described; 0 while any dim is unknown."""
    dims = lookup_tensor_desc(desc).dims
    return 0 if any(d < 0 for d in dims) else math.prod(dims)


def get_tensor_desc_size(desc: int) -> int:
    """Bytes described (element count x element size); 0 while any dim is unknown."""
    target = lookup_tensor_desc(desc)
    return get_tensor_desc_element_count(desc) * dtypes.data_type_size(target.data_type)


def get_tensor_desc_dim_v2(desc: int, index: int) -> int:
    """Dim ``index`` of the desc (aclGetTensorDescDimV2)."""
    dims = lookup_tensor_desc(desc).dims
    position = _index(index, "index")
    if not 0 <= position < len(dims) or dims == (ACL_UNKNOWN_RANK,):
        raise _bad("index", index, f"the desc has {len(dims)} dims {list(dims)}")
    return dims[position]


get_tensor_desc_dim = get_tensor_desc_dim_v2


def set_tensor_shape_range(desc: int, ranges: Sequence[Sequence[int]]) -> None:
    """aclSetTensorShapeRange: ``[min, max]`` per dim (max -1 means unbounded)."""
    target = lookup_tensor_desc(desc)
    parsed = []
    for i, pair in enumerate(ranges):
        low, high = _int_list(pair, f"dimRange[{i}]", minimum=-1, max_len=2)
        if high != -1 and high < low:
            raise _bad(f"dimRange[{i}]", pair, "max is below min")
        parsed.append((low, high))
    if len(parsed) != len(target.dims):
        raise _bad("dimRange", ranges, f"{len(parsed)} ranges for {len(target.dims)} dims")
    target.dim_ranges = parsed


def get_tensor_desc_dim_range(desc: int, index: int) -> tuple[int, int]:
    """``(min, max)`` of dim ``index``; a fixed dim is its own range."""
    target = lookup_tensor_desc(desc)
    value = get_tensor_desc_dim_v2(desc, index)
    if target.dim_ranges:
        return target.dim_ranges[index]
    return (value, value)


def set_tensor_desc_name(desc: int, name: str) -> None:
    lookup_tensor_desc(desc).name = "" if name is None else str(name)


def get_tensor_desc_name(desc: int) -> str:
    return lookup_tensor_desc(desc).name


def set_tensor_shape(desc: int, dims: Sequence[int]) -> None:
    """aclSetTensorShape: replace the dims (and forget ranges set for the old ones)."""
    target = lookup_tensor_desc(desc)
    target.dims = _desc_dims(dims)
    target.dim_ranges = []


def set_tensor_format(desc: int, format: Any) -> None:
    lookup_tensor_desc(desc).format = dtypes.to_format(format)


def set_tensor_const(desc: int, data: int, length: int) -> None:
    """aclSetTensorConst: mark the desc constant, copying ``length`` bytes from host ``data``."""
    target = lookup_tensor_desc(desc)
    length = core.check_size(length, "length")
    target.const_data = memory.read_bytes(_index(data, "dataBuffer"), length, "dataBuffer")


def create_data_buffer(data: int, size: int) -> int:
    """aclCreateDataBuffer: ``(0, 0)`` is allowed (an empty buffer)."""
    core.current()
    data = _index(data, "data")
    size = core.check_size(size, "size", allow_zero=True)
    _check_storage(data, size)
    if data == 0 and size:
        raise _bad("data", 0, f"a null address cannot hold {size} bytes")
    return _register(DataBuffer(data, size))


def lookup_data_buffer(buffer: Any, argument: str = "dataBuffer") -> DataBuffer:
    return _lookup(buffer, DataBuffer, argument)


def destroy_data_buffer(buffer: int) -> None:
    _destroy(buffer, DataBuffer, "dataBuffer")


def get_data_buffer_addr(buffer: int) -> int:
    return lookup_data_buffer(buffer).data


def get_data_buffer_size_v2(buffer: int) -> int:
    return lookup_data_buffer(buffer).size


get_data_buffer_size = get_data_buffer_size_v2


def update_data_buffer(buffer: int, data: int, size: int) -> None:
    """aclUpdateDataBuffer: point the buffer somewhere else."""
    target = lookup_data_buffer(buffer)
    data = _index(data, "data")
    size = core.check_size(size, "size", allow_zero=True)
    _check_storage(data, size)
    target.data, target.size = data, size


# -- the Pythonic Tensor ---------------------------------------------------------------------------
class Tensor:
    """A device tensor that owns its memory (or keeps an imported buffer alive).

    ``int(tensor)`` / ``operator.index(tensor)`` is its aclTensor handle, so it can be
    passed wherever a handle is expected. ``free()`` (or leaving a ``with`` block) releases
    the memory and the handle.
    """

    def __init__(self, handle: int, owned_ptr: int | None = None, keepalive: Any = None
                 ) -> None:
        self.handle = handle
        self._owned_ptr = owned_ptr
        self._keepalive = keepalive
        self._generation = core.current().generation

    # identity and metadata
    def __index__(self) -> int:
        return self.handle

    @property
    def _meta(self) -> AclTensor:
        return lookup_tensor(self.handle, "tensor")

    @property
    def shape(self) -> tuple[int, ...]:
        return self._meta.view_dims

    @property
    def data_type(self) -> DataType:
        return self._meta.data_type

    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_numpy_dtype(self._meta.data_type)

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements, as aclTensor keeps them."""
        return self._meta.strides

    @property
    def offset(self) -> int:
        return self._meta.offset

    @property
    def format(self) -> Format:
        return self._meta.format

    @property
    def data_ptr(self) -> int:
        """Storage address (the ``data`` of aclCreateTensor)."""
        return self._meta.data

    @property
    def nbytes(self) -> int:
        meta = self._meta
        return meta.numel * meta.itemsize

    def __repr__(self) -> str:
        if self.handle is None:
            return "<Tensor (freed)>"
        if not core.is_initialized() or core.current().generation != self._generation:
            return f"<Tensor {self.handle:#x} of a finalized runtime>"
        meta = self._meta
        return (f"<Tensor shape={meta.view_dims} dtype={meta.data_type.name} "
                f"data={meta.data:#x} handle={self.handle:#x}>")

    # data movement
    def numpy(self, stream: Any = None) -> np.ndarray:
        """Copy the tensor to a new host array.

        With ``stream`` the copy is queued on it and the stream synchronized; without, the
        current device is synchronized first so queued writes are visible.
        """
        meta = self._meta
        itemsize = meta.itemsize
        span = view_span(meta.view_dims, meta.strides, meta.offset)
        host = np.empty(max(span - meta.offset, 0), dtype=self.dtype)
        if host.size:
            src = meta.data + meta.offset * itemsize
            host_ptr = memory.register_buffer(host)
            if stream is None:
                synchronize_device()
                memory.memcpy(host_ptr, host.nbytes, src, host.nbytes,
                              ACL_MEMCPY_DEVICE_TO_HOST)
            else:
                target = resolve_stream(stream)
                memory.memcpy_async(host_ptr, host.nbytes, src, host.nbytes,
                                    ACL_MEMCPY_DEVICE_TO_HOST, target)
                target.synchronize()
        view = strided_array(host.view(np.uint8), self.dtype, meta.view_dims, meta.strides,
                             0)
        return np.array(view, copy=True)

    def __dlpack__(self, **kwargs: Any) -> Any:
        """Zero-copy export: host memory on the cpu backend, device memory on cuda. A
        consumer (``cupy.from_dlpack``) orders itself after its own current stream, not
        OpenACL's: synchronize the stream that writes the tensor first."""
        return tensor_view(self._meta, "tensor")[0].__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        region = core.current().pointers.lookup(self._meta.data)
        backend = core.current().backend
        if backend.host_addressable or region is None or not region.is_device:
            return (KDL_CPU, 0)
        return (KDL_CUDA, region.device)

    # lifetime
    def free(self) -> None:
        """Release the tensor's handle and the memory it owns. Idempotent."""
        if self.handle is None:
            return
        handle, owned, self.handle, self._owned_ptr = self.handle, self._owned_ptr, None, None
        self._keepalive = None
        if not core.is_initialized() or core.current().generation != self._generation:
            return
        destroy_tensor(handle)
        if owned is not None:
            memory.free(owned)

    close = free

    def __enter__(self) -> Tensor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __del__(self) -> None:
        # A finalizer may fire inside the runtime's own tables: release later if so.
        try:
            core.run_or_defer(self.free)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def empty(shape: Sequence[int], dtype: Any = np.float32, format: Any = Format.ACL_FORMAT_ND
          ) -> Tensor:
    """An uninitialised contiguous device tensor of ``shape`` and ``dtype``."""
    dims = _int_list(shape, "shape")
    data_type = dtypes.to_data_type(dtype)
    nbytes = math.prod(dims) * dtypes.to_numpy_dtype(data_type).itemsize
    ptr = memory.malloc(max(nbytes, 1))
    try:
        handle = create_tensor(dims, data_type, None, 0, format, dims, ptr)
    except AclError:
        memory.free(ptr)
        raise
    return Tensor(handle, owned_ptr=ptr)


def to_device(array: Any, stream: Any = None, format: Any = Format.ACL_FORMAT_ND) -> Tensor:
    """Copy a host array to a new device tensor.

    With ``stream`` the copy is queued on it (the host array is kept alive until it runs);
    without, it happens before the call returns.
    """
    host = np.asarray(array, order="C")  # keeps 0-dim arrays 0-dim
    tensor = empty(host.shape, host.dtype, format)
    if host.nbytes:
        host_ptr = memory.register_buffer(host)
        if stream is None:
            memory.memcpy(tensor.data_ptr, host.nbytes, host_ptr, host.nbytes,
                          ACL_MEMCPY_HOST_TO_DEVICE)
        else:
            memory.memcpy_async(tensor.data_ptr, host.nbytes, host_ptr, host.nbytes,
                                ACL_MEMCPY_HOST_TO_DEVICE, resolve_stream(stream))
    return tensor


def from_dlpack(obj: Any) -> Tensor:
    """Wrap a DLPack-exporting host object (numpy, torch CPU tensor...) without copying."""
    try:
        array = np.from_dlpack(obj)
    except (AttributeError, TypeError, BufferError, RuntimeError) as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'obj' = {type(obj).__name__} cannot be imported through "
                       f"DLPack on the host: {exc}") from exc
    itemsize = array.dtype.itemsize
    if any(s < 0 or s % itemsize for s in array.strides):
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"argument 'obj' has strides {array.strides} bytes; aclTensor needs "
                       f"non-negative multiples of the element size {itemsize}")
    strides = tuple(s // itemsize for s in array.strides)
    ptr = memory.register_buffer(array) if array.nbytes else 0
    span = view_span(array.shape, strides, 0)
    handle = create_tensor(array.shape, array.dtype, strides, 0, Format.ACL_FORMAT_ND,
                           (span,), ptr)
    return Tensor(handle, keepalive=array)

# the aclTensor family's API (lookup_*, tensor_view and the span helpers are the package's)
__all__ = [
    "ACL_MAX_DIM_CNT", "ACL_UNKNOWN_DIM", "ACL_UNKNOWN_RANK", "contiguous_strides",
    "AclTensor", "AclScalar", "AclIntArray", "AclFloatArray", "AclBoolArray",
    "AclTensorList", "AclScalarList", "TensorDesc", "DataBuffer", "create_tensor",
    "destroy_tensor", "get_view_shape", "get_storage_shape", "get_view_strides",
    "get_view_offset", "get_format", "get_data_type", "get_raw_tensor_addr",
    "set_raw_tensor_addr", "create_scalar", "destroy_scalar", "create_int_array",
    "create_float_array", "create_bool_array", "create_tensor_list", "create_scalar_list",
    "destroy_int_array", "destroy_float_array", "destroy_bool_array", "destroy_tensor_list",
    "destroy_scalar_list", "get_int_array_size", "get_float_array_size",
    "get_bool_array_size", "get_tensor_list_size", "get_scalar_list_size",
    "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_type",
    "get_tensor_desc_format", "get_tensor_desc_num_dims", "get_tensor_desc_element_count",
    "get_tensor_desc_size", "get_tensor_desc_dim_v2", "get_tensor_desc_dim",
    "set_tensor_shape_range", "get_tensor_desc_dim_range", "set_tensor_desc_name",
    "get_tensor_desc_name", "set_tensor_shape", "set_tensor_format", "set_tensor_const",
    "create_data_buffer", "destroy_data_buffer", "get_data_buffer_addr",
    "get_data_buffer_size_v2", "get_data_buffer_size", "update_data_buffer", "Tensor",
    "empty", "to_device", "from_dlpack",
]
__dir__ = module_dir(globals())
