#!/usr/bin/env python3
"""Generate LayerNormCustom's inputs and its float64 golden.

x ~ N(3, 2) float32 [37, 20000] (37 rows over 8 blocks leaves a short last block; rows of
20000 elements take two tiles), gamma ~ U[0.5, 1.5), beta ~ U[-0.5, 0.5) float32 [20000],
epsilon 1e-5. The golden is computed in float64 and stored as float32. Writes
input/input_{x,gamma,beta}.bin, input/case.json (shape and epsilon, read by main.py) and
output/golden.bin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SAMPLE_DIR = Path(__file__).resolve().parent.parent
ROWS, COLS = 37, 20000
EPSILON = 1e-5


def layer_norm_golden(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                      epsilon: float) -> np.ndarray:
    wide = x.astype(np.float64)
    mean = wide.mean(axis=-1, keepdims=True)
    variance = wide.var(axis=-1, keepdims=True)  # biased, as LayerNorm defines it
    return (wide - mean) / np.sqrt(variance + epsilon) * gamma.astype(np.float64) + beta


def main() -> None:
    rng = np.random.default_rng()
    x = rng.normal(3.0, 2.0, (ROWS, COLS)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, COLS).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, COLS).astype(np.float32)
    golden = layer_norm_golden(x, gamma, beta, EPSILON).astype(np.float32)

    (SAMPLE_DIR / "input").mkdir(exist_ok=True)
    (SAMPLE_DIR / "output").mkdir(exist_ok=True)
    for name, array in (("x", x), ("gamma", gamma), ("beta", beta)):
        array.tofile(SAMPLE_DIR / "input" / f"input_{name}.bin")
    (SAMPLE_DIR / "input" / "case.json").write_text(
        json.dumps({"rows": ROWS, "cols": COLS, "epsilon": EPSILON}) + "\n", encoding="utf-8")
    golden.tofile(SAMPLE_DIR / "output" / "golden.bin")
    print(f"gen_data: x float32 [{ROWS}, {COLS}], gamma/beta [{COLS}], epsilon {EPSILON}; "
          f"golden in float64")


if __name__ == "__main__":
    main()
