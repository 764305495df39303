#!/usr/bin/env python3
"""AddCustom through its aclnn API: the application side of the AclNNInvocation sample.

init (scripts/acl.json) -> set device -> load the custom op package (op/) -> describe the
operator -> OpRunner: allocate, read input/*.bin, run the two-phase call on a stream, write
output/output_z.bin -> reset device -> finalize. Exits 0 on success, 1 on failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common import error_log, info_log, read_file, write_file
from op_runner import OpRunner
from operator_desc import OperatorDesc

import openacl
from openacl import custom, rt

SAMPLE_DIR = Path(__file__).resolve().parent.parent
OP_PACKAGE = SAMPLE_DIR / "op"  # the custom op package, as installed under opp/vendors
DEVICE_ID = 0
SHAPE = [8, 2048]


def create_op_desc() -> OperatorDesc:
    data_type, data_format = openacl.ACL_FLOAT16, openacl.ACL_FORMAT_ND
    op_desc = OperatorDesc()
    op_desc.add_input_tensor_desc(data_type, SHAPE, data_format)
    op_desc.add_input_tensor_desc(data_type, SHAPE, data_format)
    op_desc.add_output_tensor_desc(data_type, SHAPE, data_format)
    return op_desc


def set_input_data(runner: OpRunner) -> bool:
    for index, name in enumerate(("input_x.bin", "input_y.bin")):
        if not read_file(SAMPLE_DIR / "input" / name, runner.get_input_buffer(index)):
            return False
    info_log("Set input success")
    return True


def process_output_data(runner: OpRunner) -> bool:
    if not write_file(SAMPLE_DIR / "output" / "output_z.bin", runner.get_output_buffer(0)):
        return False
    info_log("Write output success")
    return True


def init_resource() -> bool:
    (SAMPLE_DIR / "output").mkdir(exist_ok=True)
    try:
        openacl.init(str(SAMPLE_DIR / "scripts" / "acl.json"))  # dump / profiling config
    except openacl.AclError as exc:
        error_log(f"acl init failed: {exc}")
        return False
    try:
        rt.set_device(DEVICE_ID)
        info_log(f"Set device[{DEVICE_ID}] success")
        info_log(f"Get RunMode[{rt.get_run_mode()}] success")
        loaded = custom.load_package(OP_PACKAGE)
        info_log(f"Load custom op package {OP_PACKAGE.name}/ success: {', '.join(loaded)}")
    except openacl.AclError as exc:
        error_log(f"Init resource failed: {exc}")
        destroy_resource()
        return False
    return True


def destroy_resource() -> None:
    try:
        rt.reset_device(DEVICE_ID)
        info_log("Reset Device success")
        openacl.finalize()
        info_log("Destroy resource success")
    except openacl.AclError as exc:
        error_log(f"Destroy resource failed: {exc}")


def run_op() -> bool:
    op_desc = create_op_desc()
    runner = OpRunner(op_desc)
    try:
        if not runner.init():
            error_log("Init OpRunner failed")
            return False
        if not set_input_data(runner):
            error_log("Set input data failed")
            return False
        if not runner.run_op():
            error_log("Run op failed")
            return False
        if not process_output_data(runner):
            error_log("Process output data failed")
            return False
        info_log("Run op success")
        return True
    finally:
        runner.destroy()
        op_desc.destroy()


def main() -> int:
    if not init_resource():
        error_log("Init resource failed")
        return 1
    info_log("Init resource success")
    ok = run_op()
    destroy_resource()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
