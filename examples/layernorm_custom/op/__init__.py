"""The LayerNormCustom custom operator package: row-wise LayerNorm of a float32 matrix.

    y[r, :] = (x[r, :] - mean(x[r, :])) / sqrt(var(x[r, :]) + epsilon) * gamma + beta

x is [rows, cols], gamma and beta are [cols], epsilon is a float attribute (default 1e-5);
the variance is the biased one, as LayerNorm defines it.

Tiling (what the host decides):

* rows are split over blocks: ``rows_per_block`` rows each, the last block the remainder;
* a row is longer than a core can hold, so it is cut into ``tile_num`` tiles of
  ``tile_length`` elements (the last one shorter): x, y, gamma and beta tiles must fit the
  unified buffer together;
* the workspace holds, for every row and tile, the tile's partial statistics (element sum
  and the sum of squared deviations from the tile mean): ``rows * tile_num * 2`` float32.

The kernel (one block, its rows) makes two passes over each row: the first reads the row
tile by tile and writes each tile's partials to the workspace; the second reads the row's
partials back from the workspace, combines them into the row's mean and variance (Chan's
parallel formula, stable where a plain sum of squares is not), and normalizes the row tile
by tile. A block only touches its own rows of x, y and the workspace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import openacl
from openacl.custom import (
    OPTIONAL,
    REQUIRED,
    InferShapeContext,
    OpDef,
    TilingContext,
    TilingData,
    get_block_idx,
    register_op,
)
from openacl.errors import ACLNN_ERR_PARAM_INVALID, AclError

MAX_BLOCK_DIM = 8  # AI cores the operator runs on
TILE_TENSORS = 4  # x, y, gamma and beta tiles share the unified buffer
PARTIALS = 2  # per tile in the workspace: sum, and squared deviations from the tile mean
PARTIAL_DTYPE = np.float32
DEFAULT_EPSILON = 1e-5


# -- op_host: infer shape and tiling ------------------------------------------------------------
def layer_norm_infer_shape(context: InferShapeContext) -> None:
    x_shape, gamma_shape, beta_shape = (context.get_input_shape(i) for i in range(3))
    if len(x_shape) != 2:
        raise AclError(ACLNN_ERR_PARAM_INVALID,
                       f"LayerNormCustom: x must be 2-D [rows, cols], got {list(x_shape)}")
    for name, shape in (("gamma", gamma_shape), ("beta", beta_shape)):
        if tuple(shape) != (x_shape[1],):
            raise AclError(ACLNN_ERR_PARAM_INVALID,
                           f"LayerNormCustom: {name} must be [{x_shape[1]}] (x's cols), got "
                           f"{list(shape)}")
    context.set_output_shape(0, x_shape)


@dataclass
class LayerNormCustomTilingData(TilingData):
    rows: np.uint32 = 0
    cols: np.uint32 = 0
    rows_per_block: np.uint32 = 0  # the last block takes rows - (block_dim - 1) * this
    tile_length: np.uint32 = 0  # elements of a row tile (the last tile may be shorter)
    tile_num: np.uint32 = 0  # tiles per row
    epsilon: np.float32 = 0.0


def layer_norm_tiling(context: TilingContext) -> None:
    rows, cols = context.get_input_shape(0)
    itemsize = context.get_input_dtype(0).itemsize
    platform = context.get_platform_info()
    block_dim = max(1, min(MAX_BLOCK_DIM, platform.get_core_num(), rows))
    rows_per_block = -(-rows // block_dim)
    block_dim = max(1, -(-rows // rows_per_block))  # no empty block
    tile_length = max(1, min(cols, platform.get_ub_size() // (TILE_TENSORS * itemsize)))
    tile_num = -(-cols // tile_length) if cols else 0
    context.set_block_dim(block_dim)
    context.set_tiling_data(LayerNormCustomTilingData(
        rows=rows, cols=cols, rows_per_block=rows_per_block, tile_length=tile_length,
        tile_num=tile_num, epsilon=context.get_attr("epsilon")))
    context.set_workspace_sizes(
        [rows * tile_num * PARTIALS * np.dtype(PARTIAL_DTYPE).itemsize])


# -- op_kernel ----------------------------------------------------------------------------------
def layer_norm_kernel(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, y: np.ndarray,
                      workspace: np.ndarray, tiling: np.ndarray) -> None:
    data = LayerNormCustomTilingData.from_buffer(tiling)
    first = get_block_idx() * data.rows_per_block
    last = min(data.rows, first + data.rows_per_block)
    partials = workspace[:data.rows * data.tile_num * PARTIALS * 4].view(PARTIAL_DTYPE)
    partials = partials.reshape(data.rows, data.tile_num, PARTIALS)
    tiles = [slice(start, min(data.cols, start + data.tile_length))
             for start in range(0, data.cols, data.tile_length)]
    counts = np.array([t.stop - t.start for t in tiles], PARTIAL_DTYPE)
    epsilon = np.float32(data.epsilon)
    for row in range(first, last):
        # pass 1: each tile's partial statistics -> the workspace
        for index, tile in enumerate(tiles):
            values = x[row, tile]
            tile_sum = values.sum(dtype=np.float32)
            deviation = values - tile_sum / counts[index]
            partials[row, index] = (tile_sum, np.dot(deviation, deviation))
        # combine the row's partials, read back from the workspace
        sums, squares = partials[row, :, 0], partials[row, :, 1]
        mean = sums.sum() / np.float32(data.cols)
        spread = sums / counts - mean
        variance = (squares.sum() + np.dot(counts * spread, spread)) / np.float32(data.cols)
        rstd = np.float32(1.0) / np.sqrt(variance + epsilon)
        # pass 2: normalize tile by tile
        for tile in tiles:
            out = y[row, tile]
            np.subtract(x[row, tile], mean, out=out)
            np.multiply(out, rstd, out=out)
            np.multiply(out, gamma[tile], out=out)
            np.add(out, beta[tile], out=out)


# -- OpDef --------------------------------------------------------------------------------------
_FLOAT = [openacl.ACL_FLOAT]
_ND = [openacl.ACL_FORMAT_ND]

layer_norm_custom = OpDef("LayerNormCustom")
layer_norm_custom.input("x").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
layer_norm_custom.input("gamma").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
layer_norm_custom.input("beta").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
layer_norm_custom.output("y").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
layer_norm_custom.attr("epsilon").attr_type(OPTIONAL).float(DEFAULT_EPSILON)
layer_norm_custom.set_infer_shape(layer_norm_infer_shape)
layer_norm_custom.set_tiling(layer_norm_tiling).set_kernel(layer_norm_kernel)
register_op(layer_norm_custom)
