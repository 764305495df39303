"""Goldens of the quantization family (CANN's quant/ operators): AscendQuant(V3),
AscendAntiQuant, DynamicQuant, Quantize.

The quantizers' results are integers compared exactly, so their goldens follow CANN's own
ATK goldens step by step: the arithmetic in float32 (where a float64 value would round the
other way at a halfway point), then the rounding and the saturation. int4 results are
packed eight to an int32, the first in the lowest bits (CANN's ``pack_int4_to_int32``)."""

from __future__ import annotations

import numpy as np
import torch

from atk_driver import golden

INT8_RANGE = (-128, 127)
INT4_RANGE = (-8, 7)
NIBBLES = 8  # int4 values per int32
ROUNDING = {"round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}
DST_INT8, DST_INT32 = 2, 3
DST_FLOAT16, DST_BFLOAT16 = 1, 27


def _f32(t) -> np.ndarray:
    return t.numpy().astype(np.float32)


def _pack(values: np.ndarray) -> np.ndarray:
    nibbles = (values.astype(np.int64) & 0xF).reshape(-1, NIBBLES)
    words = np.zeros(nibbles.shape[0], np.int64)
    for i in range(NIBBLES):
        words |= nibbles[:, i] << (4 * i)
    return words.astype(np.uint32).view(np.int32).reshape(*values.shape[:-1],
                                                          values.shape[-1] // NIBBLES)


def _unpack(words: np.ndarray) -> np.ndarray:
    shape = words.shape or (1,)
    nibbles = (words.astype(np.int64).reshape(-1, 1) >> (4 * np.arange(NIBBLES))) & 0xF
    return np.where(nibbles >= 8, nibbles - 16, nibbles).reshape(*shape[:-1],
                                                                 shape[-1] * NIBBLES)


def _saturated(values: np.ndarray, dst_type: int) -> np.ndarray:
    if dst_type == DST_INT32:
        return _pack(np.clip(values, *INT4_RANGE))
    return np.clip(values, *INT8_RANGE).astype(np.int8)


def _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, axis):
    values = _f32(x)
    factor, shift = _f32(scale), None if offset is None else _f32(offset)
    if factor.ndim == 1:
        shape = [1] * values.ndim
        shape[axis] = factor.shape[0]
        factor = factor.reshape(shape)
        shift = None if shift is None else shift.reshape(shape)
    values = values * factor
    if sqrt_mode:
        values = values * factor
    if shift is not None:
        values = values + shift
    return _saturated(ROUNDING[round_mode](values), dst_type)


@golden("AscendQuant")
def ascend_quant(x, scale, offset, sqrt_mode=False, round_mode="round", dst_type=DST_INT8):
    return _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, -1)


@golden("AscendQuantV3")
def ascend_quant_v3(x, scale, offset, sqrt_mode=False, round_mode="round", dst_type=DST_INT8,
                    axis=-1):
    return _ascend_quant(x, scale, offset, sqrt_mode, round_mode, dst_type, axis)


@golden("AscendAntiQuant", with_dtypes=True)
def ascend_anti_quant(dtypes, x, scale, offset, dst_type=DST_FLOAT16, sqrt_mode=False):
    values = torch.from_numpy(_unpack(x.numpy())) if dtypes[0] == np.int32 else x
    values = values.double() + (0 if offset is None else offset)
    values = values * scale
    if sqrt_mode:
        values = values * scale
    return values.reshape(values.shape if dtypes[0] == np.int32 or x.dim() else ())


@golden("DynamicQuant")
def dynamic_quant(x, smooth=None):
    values = _f32(x) * (1 if smooth is None else _f32(smooth))
    scale = np.abs(values).max(axis=-1, keepdims=True) / np.float32(INT8_RANGE[1])
    quantized = np.clip(np.rint(values * (np.float32(1) / scale)), *INT8_RANGE)
    return quantized.astype(np.int8), scale.reshape(scale.shape[:-1])
