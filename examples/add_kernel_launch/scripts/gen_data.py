#!/usr/bin/env python3
"""Generate AddCustom's inputs and golden: x, y uniform in [1, 100), float16 [8, 2048].

Writes input/input_x.bin, input/input_y.bin and output/golden.bin (raw little-endian
float16, no header), the files the CANN AddCustom sample uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SAMPLE_DIR = Path(__file__).resolve().parent.parent
SHAPE = (8, 2048)
DTYPE = np.float16
LOW, HIGH = 1, 100  # uniform input range, high end excluded


def gen_golden_data_simple() -> None:
    input_x = np.random.uniform(LOW, HIGH, SHAPE).astype(DTYPE)
    input_y = np.random.uniform(LOW, HIGH, SHAPE).astype(DTYPE)
    golden = (input_x + input_y).astype(DTYPE)

    (SAMPLE_DIR / "input").mkdir(exist_ok=True)
    (SAMPLE_DIR / "output").mkdir(exist_ok=True)
    input_x.tofile(SAMPLE_DIR / "input" / "input_x.bin")
    input_y.tofile(SAMPLE_DIR / "input" / "input_y.bin")
    golden.tofile(SAMPLE_DIR / "output" / "golden.bin")
    print(f"gen_data: x, y ~ U[{LOW}, {HIGH}) {DTYPE.__name__} {list(SHAPE)}, golden x + y")


if __name__ == "__main__":
    gen_golden_data_simple()
