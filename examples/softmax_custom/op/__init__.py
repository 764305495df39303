"""The SoftmaxCustom custom operator package: softmax over the last axis of a float32
matrix, ``y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :])))``.

Tiling (what the host decides):

* rows are split over ``block_dim`` blocks: every block but the last takes
  ``rows_per_block`` rows, the last takes ``tail_rows`` (fewer when rows do not divide
  evenly: 1003 rows on 8 blocks are 7 x 126 + 121);
* inside a block, rows go through the unified buffer ``rows_per_tile`` at a time (an x tile
  and a y tile of whole rows must fit), the last tile of a block shorter.

No workspace: a row fits the unified buffer, so every reduction stays in the core.
"""

from __future__ import annotations

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

MAX_BLOCK_DIM = 8  # AI cores the operator runs on
TILE_TENSORS = 2  # an x tile and a y tile share the unified buffer


@dataclass
class SoftmaxCustomTilingData(TilingData):
    rows: np.uint32 = 0
    cols: np.uint32 = 0
    rows_per_block: np.uint32 = 0  # rows of every block but the last
    tail_rows: np.uint32 = 0  # rows of the last block (<= rows_per_block)
    rows_per_tile: np.uint32 = 0  # rows that go through the unified buffer at once


def softmax_tiling(context: TilingContext) -> None:
    shape = context.get_input_shape(0)
    cols = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    platform = context.get_platform_info()
    block_dim = max(1, min(MAX_BLOCK_DIM, platform.get_core_num(), rows))
    rows_per_block = -(-rows // block_dim)
    block_dim = max(1, -(-rows // rows_per_block))  # no empty block
    row_bytes = max(1, cols) * context.get_input_dtype(0).itemsize * TILE_TENSORS
    context.set_block_dim(block_dim)
    context.set_tiling_data(SoftmaxCustomTilingData(
        rows=rows, cols=cols, rows_per_block=rows_per_block,
        tail_rows=rows - (block_dim - 1) * rows_per_block,
        rows_per_tile=max(1, platform.get_ub_size() // row_bytes)))
    context.set_workspace_sizes([0])


def softmax_kernel(x: np.ndarray, y: np.ndarray, workspace: np.ndarray,
                   tiling: np.ndarray) -> None:
    data = SoftmaxCustomTilingData.from_buffer(tiling)
    block = get_block_idx()
    is_tail = block == get_block_num() - 1
    first = block * data.rows_per_block
    last = first + (data.tail_rows if is_tail else data.rows_per_block)
    x_rows, y_rows = x.reshape(data.rows, data.cols), y.reshape(data.rows, data.cols)
    for start in range(first, last, data.rows_per_tile):
        tile = slice(start, min(last, start + data.rows_per_tile))
        out = y_rows[tile]
        np.subtract(x_rows[tile], x_rows[tile].max(axis=-1, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, out.sum(axis=-1, keepdims=True), out=out)


_FLOAT = [openacl.ACL_FLOAT]
_ND = [openacl.ACL_FORMAT_ND]

softmax_custom = OpDef("SoftmaxCustom")
softmax_custom.input("x").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
softmax_custom.output("y").param_type(REQUIRED).data_type(_FLOAT).format(_ND)
softmax_custom.set_tiling(softmax_tiling).set_kernel(softmax_kernel)
register_op(softmax_custom)
