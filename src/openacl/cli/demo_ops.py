"""The custom operator of ``openacl demo``: AddCustom (z = x + y), declared the CANN way.

The same operator as ``examples/add_custom/op`` (OpDef, a TilingData struct, a per-block
kernel), kept inside the package so the demo runs on a fresh install without the examples.
``register_add_custom`` registers it unless an AddCustom is registered already.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from openacl.custom.blocks import get_block_idx, get_block_num
from openacl.custom.opdef import REQUIRED, OpDef
from openacl.custom.register import register_op
from openacl.custom.tiling import TilingContext, TilingData
from openacl.dtypes import DataType, Format
from openacl.ops import registry

OP_TYPE = "AddCustom"
BLOCK_DIM = 8  # AI cores AddCustom runs on
BUFFER_NUM = 2  # double buffering: each queue holds two tiles
QUEUE_TENSORS = 3  # x, y and z queues share the unified buffer


@dataclass
class AddCustomTilingData(TilingData):
    total_length: np.uint32 = 0  # elements of x (= y = z)
    tile_num: np.uint32 = 0  # tiles each block's slice is cut into


def add_custom_tiling(context: TilingContext) -> None:
    """BLOCK_DIM blocks; tiles small enough for x, y, z double-buffered in the UB."""
    total_length = math.prod(context.get_input_shape(0))
    block_length = -(-total_length // BLOCK_DIM)
    tile_capacity = context.get_platform_info().get_ub_size() // (
        QUEUE_TENSORS * BUFFER_NUM * context.get_input_dtype(0).itemsize)
    context.set_block_dim(BLOCK_DIM)
    context.set_tiling_data(AddCustomTilingData(
        total_length=total_length, tile_num=max(1, -(-block_length // tile_capacity))))
    context.set_workspace_sizes([0])


def add_custom_kernel(x: np.ndarray, y: np.ndarray, z: np.ndarray, workspace: np.ndarray,
                      tiling: np.ndarray) -> None:
    """One block: z = x + y over its slice, tile by tile."""
    data = AddCustomTilingData.from_buffer(tiling)
    block_length = -(-data.total_length // get_block_num())
    start = min(data.total_length, get_block_idx() * block_length)
    stop = min(data.total_length, start + block_length)
    x_gm, y_gm, z_gm = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    tile_length = max(1, -(-(stop - start) // data.tile_num))
    for tile_start in range(start, stop, tile_length):
        tile = slice(tile_start, min(stop, tile_start + tile_length))
        np.add(x_gm[tile], y_gm[tile], out=z_gm[tile])


def add_custom_def() -> OpDef:
    """A fresh AddCustom declaration: x, y float16/float32 ND -> z."""
    data_types = [DataType.ACL_FLOAT16, DataType.ACL_FLOAT]
    formats = [Format.ACL_FORMAT_ND, Format.ACL_FORMAT_ND]
    op = OpDef(OP_TYPE)
    op.input("x").param_type(REQUIRED).data_type(data_types).format(formats)
    op.input("y").param_type(REQUIRED).data_type(data_types).format(formats)
    op.output("z").param_type(REQUIRED).data_type(data_types).format(formats)
    return op.set_tiling(add_custom_tiling).set_kernel(add_custom_kernel)


def register_add_custom() -> bool:
    """Register AddCustom unless one is registered; True when this call registered it."""
    if OP_TYPE in registry.REGISTRY:
        return False
    register_op(add_custom_def())
    return True
