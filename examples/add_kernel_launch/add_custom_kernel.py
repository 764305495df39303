"""The add_custom kernel for direct launch (KernelLaunch): z = x + y on float16.

The counterpart of Ascend C's ``extern "C" __global__ __aicore__ void add_custom(GM_ADDR x,
GM_ADDR y, GM_ADDR z)``: it receives device pointers, views its block's slice of global
memory with ``global_buffer`` (GlobalTensor::SetGlobalBuffer) and processes it tile by tile.
Launch it with ``add_custom[block_dim, stream](x_ptr, y_ptr, z_ptr, total_length)``.
"""

from __future__ import annotations

import numpy as np

from openacl.custom import get_block_idx, get_block_num, global_buffer, kernel

TILE_LENGTH = 4096  # elements per tile: x, y, z tiles, double-buffered, fit the unified buffer


@kernel
def add_custom(x: int, y: int, z: int, total_length: int) -> None:
    block_length = -(-total_length // get_block_num())
    start = min(total_length, get_block_idx() * block_length)
    length = min(total_length, start + block_length) - start
    x_gm = global_buffer(x, np.float16, length, offset=start)
    y_gm = global_buffer(y, np.float16, length, offset=start)
    z_gm = global_buffer(z, np.float16, length, offset=start)
    for tile_start in range(0, length, TILE_LENGTH):  # CopyIn, Compute, CopyOut per tile
        tile = slice(tile_start, tile_start + TILE_LENGTH)
        np.add(x_gm[tile], y_gm[tile], out=z_gm[tile])
