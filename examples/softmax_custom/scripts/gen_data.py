#!/usr/bin/env python3
"""Generate SoftmaxCustom's input and its float64 golden.

x ~ U[-3, 3) float32 [1003, 512]: 1003 rows on 8 blocks are 7 blocks of 126 rows and a
tail block of 121. The golden is computed in float64 and stored as float32. Writes
input/input_x.bin, input/case.json (the shape, read by main.py) and output/golden.bin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SAMPLE_DIR = Path(__file__).resolve().parent.parent
ROWS, COLS = 1003, 512
LOW, HIGH = -3.0, 3.0


def softmax_golden(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    shifted = np.exp(wide - wide.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def main() -> None:
    x = np.random.default_rng().uniform(LOW, HIGH, (ROWS, COLS)).astype(np.float32)
    golden = softmax_golden(x).astype(np.float32)
    (SAMPLE_DIR / "input").mkdir(exist_ok=True)
    (SAMPLE_DIR / "output").mkdir(exist_ok=True)
    x.tofile(SAMPLE_DIR / "input" / "input_x.bin")
    (SAMPLE_DIR / "input" / "case.json").write_text(
        json.dumps({"rows": ROWS, "cols": COLS}) + "\n", encoding="utf-8")
    golden.tofile(SAMPLE_DIR / "output" / "golden.bin")
    print(f"gen_data: x ~ U[{LOW:g}, {HIGH:g}) float32 [{ROWS}, {COLS}] (8 blocks: 7 x 126 "
          f"rows + a tail of 121); golden in float64")


if __name__ == "__main__":
    main()
