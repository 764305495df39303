#!/usr/bin/env python3
"""LayerNormCustom through its aclnn API (the AclNNInvocationNaive shape: one main).

Loads the op package in op/, reads input/*.bin, calls
``aclnn.layer_norm_custom_get_workspace_size`` (phase 1: shape checks, tiling, the
workspace size), allocates the workspace the tiling asked for, runs
``aclnn.layer_norm_custom`` (phase 2) on a stream, synchronizes with a 5000 ms timeout and
writes output/output_y.bin. Uses the Pythonic face (``openacl.aclnn``, raising
``AclError``); the add_custom example shows the C-convention one. Exits 0 on success.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import openacl
from openacl import aclnn, custom, rt

SAMPLE_DIR = Path(__file__).resolve().parent
DEVICE_ID = 0
SYNC_TIMEOUT_MS = 5000


def info_log(message: str) -> None:
    print(f"[INFO]  {message}", flush=True)


def run() -> None:
    case = json.loads((SAMPLE_DIR / "input" / "case.json").read_text(encoding="utf-8"))
    rows, cols = case["rows"], case["cols"]
    loaded = custom.load_package(SAMPLE_DIR / "op")
    info_log(f"Load custom op package op/ success: {', '.join(loaded)}")

    def load(name: str, shape: tuple[int, ...]) -> openacl.Tensor:
        host = np.fromfile(SAMPLE_DIR / "input" / f"input_{name}.bin", np.float32)
        return openacl.to_device(host.reshape(shape))

    stream = rt.create_stream()
    x, gamma, beta = load("x", (rows, cols)), load("gamma", (cols,)), load("beta", (cols,))
    y = openacl.empty((rows, cols), np.float32)
    info_log(f"Copy inputs to the device success: x [{rows}, {cols}], gamma/beta [{cols}]")

    workspace_size, executor = aclnn.layer_norm_custom_get_workspace_size(
        x, gamma, beta, case["epsilon"], y)
    info_log(f"Execute aclnnLayerNormCustomGetWorkspaceSize success, workspace size "
             f"{workspace_size} (per-row, per-tile partial sums)")
    workspace = rt.malloc(workspace_size) if workspace_size else 0
    aclnn.layer_norm_custom(workspace, workspace_size, executor, stream)
    info_log("Execute aclnnLayerNormCustom success")
    rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
    info_log("Synchronize stream success")

    y.numpy().tofile(SAMPLE_DIR / "output" / "output_y.bin")
    info_log("Write output success")
    if workspace:
        rt.free(workspace)
    for tensor in (x, gamma, beta, y):
        tensor.free()
    rt.destroy_stream(stream)


def main() -> int:
    openacl.init()
    try:
        rt.set_device(DEVICE_ID)
        run()
        rt.reset_device(DEVICE_ID)
        info_log("Destroy resource success")
        return 0
    except (openacl.AclError, OSError, ValueError, KeyError) as exc:
        print(f"[ERROR] {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        openacl.finalize()


if __name__ == "__main__":
    sys.exit(main())
