"""Tiling: what the host computes before a custom kernel runs, and how the kernel reads it.

CANN's flow: the op's tiling function sees shapes, dtypes, attributes and the platform
(core count, unified-buffer size), chooses ``block_dim``, a tiling key, the tiling data (a
packed struct, ``BEGIN_TILING_DATA_DEF``) and workspace sizes; the kernel reads the struct
back with ``GET_TILING_DATA``. Here the struct is a ``TilingData`` dataclass whose fields are
annotated with numpy scalar types; ``to_bytes`` packs it (little-endian, no padding, field
order) and ``from_buffer`` reads it back inside the kernel.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

UB_SIZE = 192 * 1024  # bytes of unified buffer per core, as on Atlas A2 (Ascend 910B)
DEFAULT_CORE_NUM = 8  # cores reported when the machine does not say


@dataclass(frozen=True)
class PlatformInfo:
    """What a tiling function may ask of the hardware (PlatformAscendC's getters)."""

    core_num: int = dataclasses.field(default_factory=lambda: os.cpu_count() or DEFAULT_CORE_NUM)
    ub_size: int = UB_SIZE
    soc_version: str = "OpenACL-CPU"

    def get_core_num(self) -> int:
        return self.core_num

    def get_core_num_aiv(self) -> int:
        return self.core_num

    def get_ub_size(self) -> int:
        return self.ub_size


class TilingData:
    """Base of tiling structs: subclass as a dataclass with numpy-typed fields::

        @dataclass
        class AddTiling(TilingData):
            total_length: np.uint32 = 0
            tile_num: np.uint32 = 0
    """

    _dtype: ClassVar[np.dtype | None] = None

    @classmethod
    def struct_dtype(cls) -> np.dtype:
        """The packed record layout: one field per dataclass field, in order."""
        if cls.__dict__.get("_dtype") is None:
            hints = typing.get_type_hints(cls)  # resolves string annotations too
            cls._dtype = np.dtype([(f.name, np.dtype(hints[f.name]).newbyteorder("<"))
                                   for f in dataclasses.fields(cls)])
        return cls._dtype

    def to_bytes(self) -> bytes:
        record = np.zeros((), self.struct_dtype())
        for name in record.dtype.names:
            record[name] = getattr(self, name)
        return record.tobytes()

    @classmethod
    def from_buffer(cls, buffer: Any) -> TilingData:
        """Read the struct from the start of ``buffer`` (bytes or a uint8 array)."""
        dtype = cls.struct_dtype()
        data = bytes(buffer) if isinstance(buffer, (bytes, bytearray, memoryview)) else \
            np.asarray(buffer, np.uint8).tobytes()
        raw = np.frombuffer(data[:dtype.itemsize], dtype)[0]
        return cls(**{name: raw[name].item() for name in dtype.names})


@dataclass
class TilingContext:
    """What a tiling function receives and fills in (gert::TilingContext, simplified)."""

    input_shapes: list[tuple[int, ...] | None]
    input_dtypes: list[np.dtype | None]
    output_shapes: list[tuple[int, ...]]
    output_dtypes: list[np.dtype]
    attrs: dict[str, Any]
    platform: PlatformInfo
    block_dim: int = 1
    tiling_key: int = 0
    tiling_data: TilingData | bytes | None = None
    workspace_sizes: list[int] = field(default_factory=list)

    # CANN-style accessors, so tiling code reads like its C++ counterpart
    def get_input_shape(self, index: int) -> tuple[int, ...] | None:
        return self.input_shapes[index]

    def get_input_dtype(self, index: int) -> np.dtype | None:
        return self.input_dtypes[index]

    def get_attr(self, name: str) -> Any:
        return self.attrs[name]

    def get_platform_info(self) -> PlatformInfo:
        return self.platform

    def set_block_dim(self, block_dim: int) -> None:
        self.block_dim = block_dim

    def set_tiling_key(self, key: int) -> None:
        self.tiling_key = key

    def set_tiling_data(self, data: TilingData | bytes) -> None:
        self.tiling_data = data

    def set_workspace_sizes(self, sizes: Sequence[int]) -> None:
        self.workspace_sizes = list(sizes)

    def tiling_bytes(self) -> bytes:
        data = self.tiling_data
        if data is None:
            return b""
        return data if isinstance(data, (bytes, bytearray)) else data.to_bytes()
