"""The AddCustom custom operator package: z = x + y (float16 / float32, ND).

The Python counterpart of a CANN custom op project: ``op_host`` (the OpDef declaration and
the tiling function) and ``op_kernel`` (the per-block kernel) in one module. Importing it
registers the operator; an application loads it with ``openacl.custom.load_package(path)``,
the way CANN installs a custom op package into ``opp/vendors`` and the application simply
calls the generated ``aclnnAddCustomGetWorkspaceSize`` / ``aclnnAddCustom``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import openacl
from openacl.custom import (
    REQUIRED,
    OpDef,
    TilingContext,
    TilingData,
    get_block_idx,
    get_block_num,
    register_op,
)

BLOCK_DIM = 8  # AI cores the operator runs on
BUFFER_NUM = 2  # double buffering: each queue holds two tiles
QUEUE_TENSORS = 3  # x, y and z each have a queue of BUFFER_NUM tiles in the unified buffer


# -- op_host: tiling ----------------------------------------------------------------------------
@dataclass
class AddCustomTilingData(TilingData):
    """BEGIN_TILING_DATA_DEF(AddCustomTilingData)."""

    total_length: np.uint32 = 0  # elements of x (= y = z)
    tile_num: np.uint32 = 0  # tiles each block's slice is cut into


def add_custom_tiling(context: TilingContext) -> None:
    """Split the elements evenly over BLOCK_DIM blocks, and each block's slice into tiles
    small enough that x, y and z, double-buffered, fit the unified buffer."""
    total_length = math.prod(context.get_input_shape(0))
    itemsize = context.get_input_dtype(0).itemsize
    block_length = -(-total_length // BLOCK_DIM)
    tile_capacity = context.get_platform_info().get_ub_size() // (
        QUEUE_TENSORS * BUFFER_NUM * itemsize)
    context.set_block_dim(BLOCK_DIM)
    context.set_tiling_data(AddCustomTilingData(
        total_length=total_length, tile_num=max(1, -(-block_length // tile_capacity))))
    context.set_workspace_sizes([0])  # element-wise: no workspace


# -- op_kernel ----------------------------------------------------------------------------------
def add_custom_kernel(x: np.ndarray, y: np.ndarray, z: np.ndarray, workspace: np.ndarray,
                      tiling: np.ndarray) -> None:
    """One block: z = x + y over this block's slice, tile by tile (CopyIn, Compute, CopyOut)."""
    data = AddCustomTilingData.from_buffer(tiling)
    block_length = -(-data.total_length // get_block_num())
    start = min(data.total_length, get_block_idx() * block_length)
    stop = min(data.total_length, start + block_length)
    x_gm, y_gm, z_gm = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    tile_length = max(1, -(-(stop - start) // data.tile_num))
    for tile_start in range(start, stop, tile_length):
        tile = slice(tile_start, min(stop, tile_start + tile_length))
        np.add(x_gm[tile], y_gm[tile], out=z_gm[tile])


# -- OpDef: OP_ADD(AddCustom) -------------------------------------------------------------------
_DTYPES = [openacl.ACL_FLOAT16, openacl.ACL_FLOAT]
_FORMATS = [openacl.ACL_FORMAT_ND, openacl.ACL_FORMAT_ND]

add_custom = OpDef("AddCustom")
add_custom.input("x").param_type(REQUIRED).data_type(_DTYPES).format(_FORMATS)
add_custom.input("y").param_type(REQUIRED).data_type(_DTYPES).format(_FORMATS)
add_custom.output("z").param_type(REQUIRED).data_type(_DTYPES).format(_FORMATS)
add_custom.set_tiling(add_custom_tiling).set_kernel(add_custom_kernel)
register_op(add_custom)
