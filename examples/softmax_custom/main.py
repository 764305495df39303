#!/usr/bin/env python3
"""SoftmaxCustom through its aclnn API, C convention (the AclNNInvocationNaive shape).

Loads the op package in op/, reads input/input_x.bin, calls
``aclnnSoftmaxCustomGetWorkspaceSize`` and ``aclnnSoftmaxCustom`` from
``openacl.compat.aclnn`` (return codes, checked), synchronizes with a 5000 ms timeout and
writes output/output_y.bin. Exits 0 on success.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import openacl
from openacl import custom, rt
from openacl.compat import aclnn

SAMPLE_DIR = Path(__file__).resolve().parent
DEVICE_ID = 0
SYNC_TIMEOUT_MS = 5000
ACL_SUCCESS = 0


def info_log(message: str) -> None:
    print(f"[INFO]  {message}", flush=True)


def check(ret: int, what: str) -> None:
    if ret != ACL_SUCCESS:
        raise RuntimeError(f"{what} failed. error code is {ret}: "
                           f"{openacl.get_recent_err_msg()}")
    info_log(f"{what} success")


def run() -> None:
    case = json.loads((SAMPLE_DIR / "input" / "case.json").read_text(encoding="utf-8"))
    shape = (case["rows"], case["cols"])
    loaded = custom.load_package(SAMPLE_DIR / "op")
    info_log(f"Load custom op package op/ success: {', '.join(loaded)}")

    stream = rt.create_stream()
    x = openacl.to_device(np.fromfile(SAMPLE_DIR / "input" / "input_x.bin",
                                      np.float32).reshape(shape))
    y = openacl.empty(shape, np.float32)
    info_log(f"Copy input to the device success: x {list(shape)}")

    workspace_size, executor, ret = aclnn.aclnnSoftmaxCustomGetWorkspaceSize(x, y)
    check(ret, f"Execute aclnnSoftmaxCustomGetWorkspaceSize (workspace size {workspace_size})")
    workspace = rt.malloc(workspace_size) if workspace_size else 0
    check(aclnn.aclnnSoftmaxCustom(workspace, workspace_size, executor, stream),
          "Execute aclnnSoftmaxCustom")
    rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
    info_log("Synchronize stream success")

    y.numpy().tofile(SAMPLE_DIR / "output" / "output_y.bin")
    info_log("Write output success")
    if workspace:
        rt.free(workspace)
    x.free()
    y.free()
    rt.destroy_stream(stream)


def main() -> int:
    openacl.init()
    try:
        rt.set_device(DEVICE_ID)
        run()
        rt.reset_device(DEVICE_ID)
        info_log("Destroy resource success")
        return 0
    except (openacl.AclError, OSError, ValueError, KeyError, RuntimeError) as exc:
        print(f"[ERROR] {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        openacl.finalize()


if __name__ == "__main__":
    sys.exit(main())
