"""OpRunner: device and host memory, the aclTensors, and one two-phase aclnn call.

``init`` allocates, per input and output, device memory and pinned host memory of the size
its TensorDesc gives, and creates the aclTensor over the device memory. ``run_op`` copies
the inputs to the device, creates a stream, calls phase 1
(``aclnnAddCustomGetWorkspaceSize``), allocates the workspace if one is asked for, calls
phase 2 (``aclnnAddCustom``) on the stream, waits for it with a 5000 ms timeout and copies
the outputs back to host memory. The aclnn calls use the C convention of
``openacl.compat.aclnn`` (a return code to check, never an exception), as the C++ sample
does; the runtime calls raise ``openacl.AclError``, which ``run_op`` reports and turns
into ``False``.
"""

from __future__ import annotations

import numpy as np
from common import error_log, info_log
from operator_desc import OperatorDesc

import openacl
from openacl import dtypes, rt
from openacl.compat import aclnn
from openacl.util import ptr_to_numpy

ACL_SUCCESS = 0
SYNC_TIMEOUT_MS = 5000  # how long run_op waits for the stream


class OpRunner:
    """Runs AddCustom once on the tensors its OperatorDesc describes."""

    def __init__(self, op_desc: OperatorDesc) -> None:
        self.op_desc = op_desc
        self.num_inputs = len(op_desc.input_desc)
        self.num_outputs = len(op_desc.output_desc)
        self.dev_inputs: list[int] = []
        self.host_inputs: list[int] = []
        self.input_tensors: list[int] = []
        self.dev_outputs: list[int] = []
        self.host_outputs: list[int] = []
        self.output_tensors: list[int] = []

    # -- descriptions ----------------------------------------------------------------------------
    @staticmethod
    def _shape(desc: int) -> list[int]:
        return [openacl.get_tensor_desc_dim_v2(desc, i)
                for i in range(openacl.get_tensor_desc_num_dims(desc))]

    def get_input_size(self, index: int) -> int:
        return openacl.get_tensor_desc_size(self.op_desc.input_desc[index])

    def get_output_size(self, index: int) -> int:
        return openacl.get_tensor_desc_size(self.op_desc.output_desc[index])

    def get_input_shape(self, index: int) -> list[int]:
        return self._shape(self.op_desc.input_desc[index])

    def get_output_shape(self, index: int) -> list[int]:
        return self._shape(self.op_desc.output_desc[index])

    def _host_view(self, desc: int, host: int) -> np.ndarray:
        dtype = dtypes.to_numpy_dtype(openacl.get_tensor_desc_type(desc))
        return ptr_to_numpy(host, tuple(self._shape(desc)), dtype)

    def get_input_buffer(self, index: int) -> np.ndarray:
        """The host buffer of input ``index``, as a numpy view (fill it before run_op)."""
        return self._host_view(self.op_desc.input_desc[index], self.host_inputs[index])

    def get_output_buffer(self, index: int) -> np.ndarray:
        """The host buffer of output ``index``, as a numpy view (read it after run_op)."""
        return self._host_view(self.op_desc.output_desc[index], self.host_outputs[index])

    # -- Init ------------------------------------------------------------------------------------
    def _allocate(self, desc: int, kind: str, index: int) -> tuple[int, int, int] | None:
        size = openacl.get_tensor_desc_size(desc)
        try:
            device = rt.malloc(size, openacl.ACL_MEM_MALLOC_HUGE_FIRST)
            host = rt.malloc_host(size)
        except openacl.AclError as exc:
            error_log(f"Malloc memory for {kind}[{index}] failed: {exc}")
            return None
        shape = self._shape(desc)
        tensor = aclnn.aclCreateTensor(shape, openacl.get_tensor_desc_type(desc), None, 0,
                                       openacl.get_tensor_desc_format(desc), shape, device)
        if tensor == 0:
            error_log(f"Create Tensor for {kind}[{index}] failed: "
                      f"{openacl.get_recent_err_msg()}")
            return None
        return device, host, tensor

    def init(self) -> bool:
        for index, desc in enumerate(self.op_desc.input_desc):
            allocated = self._allocate(desc, "input", index)
            if allocated is None:
                return False
            for store, value in zip((self.dev_inputs, self.host_inputs, self.input_tensors),
                                    allocated, strict=True):
                store.append(value)
        for index, desc in enumerate(self.op_desc.output_desc):
            allocated = self._allocate(desc, "output", index)
            if allocated is None:
                return False
            for store, value in zip((self.dev_outputs, self.host_outputs, self.output_tensors),
                                    allocated, strict=True):
                store.append(value)
        return True

    # -- RunOp -----------------------------------------------------------------------------------
    def run_op(self) -> bool:
        stream = 0
        workspace = 0
        try:
            for index in range(self.num_inputs):
                size = self.get_input_size(index)
                rt.memcpy(self.dev_inputs[index], size, self.host_inputs[index], size,
                          openacl.ACL_MEMCPY_HOST_TO_DEVICE)
                info_log(f"Copy input[{index}] success")

            stream = rt.create_stream()
            info_log("Create stream success")

            workspace_size, executor, ret = aclnn.aclnnAddCustomGetWorkspaceSize(
                *self.input_tensors, *self.output_tensors)
            if ret != ACL_SUCCESS:
                error_log(f"Get Operator Workspace failed. error code is {ret}: "
                          f"{openacl.get_recent_err_msg()}")
                return False
            info_log(f"Execute aclnnAddCustomGetWorkspaceSize success, workspace size "
                     f"{workspace_size}")

            if workspace_size != 0:
                workspace = rt.malloc(workspace_size, openacl.ACL_MEM_MALLOC_HUGE_FIRST)

            ret = aclnn.aclnnAddCustom(workspace, workspace_size, executor, stream)
            if ret != ACL_SUCCESS:
                error_log(f"Execute Operator failed. error code is {ret}: "
                          f"{openacl.get_recent_err_msg()}")
                return False
            info_log("Execute aclnnAddCustom success")

            rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
            info_log("Synchronize stream success")

            for index in range(self.num_outputs):
                size = self.get_output_size(index)
                rt.memcpy(self.host_outputs[index], size, self.dev_outputs[index], size,
                          openacl.ACL_MEMCPY_DEVICE_TO_HOST)
                info_log(f"Copy output[{index}] success")
            return True
        except openacl.AclError as exc:
            error_log(f"Run op failed: {exc}")
            return False
        finally:
            if workspace:
                rt.free(workspace)
            if stream:
                rt.destroy_stream(stream)

    # -- ~OpRunner -------------------------------------------------------------------------------
    def destroy(self) -> None:
        for tensor in self.input_tensors + self.output_tensors:
            aclnn.aclDestroyTensor(tensor)
        for device in self.dev_inputs + self.dev_outputs:
            rt.free(device)
        for host in self.host_inputs + self.host_outputs:
            rt.free_host(host)
        for store in (self.input_tensors, self.output_tensors, self.dev_inputs,
                      self.dev_outputs, self.host_inputs, self.host_outputs):
            store.clear()
