"""Collective communication (HCCL) on ACL streams, over torch.distributed.

HCCL's names and argument order, snake_cased: ``all_reduce(send_buf, recv_buf, count,
data_type, op, comm, stream)``. A collective validates its arguments now and runs as a task
on the stream (``None``: the thread's current stream), ordered with the stream's other work;
synchronize the stream (or an event recorded after it) to see the result::

    import openacl
    from openacl import hccl

    openacl.init()
    openacl.rt.set_device(0)
    comm = hccl.comm_init_from_env()  # the ranks `openacl launch -n 2 app.py` starts
    hccl.all_reduce(buf, buf, count, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm)

Errors are ``HcclError`` (an ``AclError`` whose ``code`` is the ``HcclResult``); a collective
that fails while running fails its stream (``openacl.hccl.result``). torch is optional:
``pip install 'openacl[dist]'``; it is imported at the first call that needs it.
``openacl.compat.hccl`` has the C-named functions (``HcclAllReduce``...) returning codes.
"""

from __future__ import annotations

from openacl._api import module_dir
from openacl.errors import (
    HCCL_E_AGAIN,
    HCCL_E_CCE,
    HCCL_E_DRV,
    HCCL_E_INTERNAL,
    HCCL_E_MEMORY,
    HCCL_E_NETWORK,
    HCCL_E_NOT_FOUND,
    HCCL_E_NOT_SUPPORT,
    HCCL_E_OPEN_FILE_FAILURE,
    HCCL_E_PARA,
    HCCL_E_PROFILING,
    HCCL_E_PTR,
    HCCL_E_REMOTE,
    HCCL_E_ROCE_CONNECT,
    HCCL_E_ROCE_TRANSFER,
    HCCL_E_RUNTIME,
    HCCL_E_SUSPENDING,
    HCCL_E_SYSCALL,
    HCCL_E_TCP_CONNECT,
    HCCL_E_TCP_TRANSFER,
    HCCL_E_TIMEOUT,
    HCCL_E_UNAVAIL,
    HCCL_RESULT_TABLE,
    HCCL_SUCCESS,
    hccl_result_name,
)
from openacl.hccl.collectives import (
    all_gather,
    all_reduce,
    all_to_all_v,
    barrier,
    broadcast,
    recv,
    reduce,
    reduce_scatter,
    send,
)
from openacl.hccl.comm import (
    Communicator,
    comm_destroy,
    comm_init_all,
    comm_init_cluster_info,
    comm_init_from_env,
    comm_init_root_info,
    free_port,
    get_rank_id,
    get_rank_size,
    get_root_info,
)
from openacl.hccl.constants import (
    HCCL_ROOT_INFO_BYTES,
    HcclDataType,
    HcclReduceOp,
    data_type_size,
)
from openacl.hccl.result import STREAM_FAILURE_CODES, HcclError

globals().update({member.name: member for member in HcclDataType})
globals().update({member.name: member for member in HcclReduceOp})

__all__ = [
    "HCCL_E_AGAIN", "HCCL_E_CCE", "HCCL_E_DRV", "HCCL_E_INTERNAL", "HCCL_E_MEMORY",
    "HCCL_E_NETWORK", "HCCL_E_NOT_FOUND", "HCCL_E_NOT_SUPPORT", "HCCL_E_OPEN_FILE_FAILURE",
    "HCCL_E_PARA", "HCCL_E_PROFILING", "HCCL_E_PTR", "HCCL_E_REMOTE", "HCCL_E_ROCE_CONNECT",
    "HCCL_E_ROCE_TRANSFER", "HCCL_E_RUNTIME", "HCCL_E_SUSPENDING", "HCCL_E_SYSCALL",
    "HCCL_E_TCP_CONNECT", "HCCL_E_TCP_TRANSFER", "HCCL_E_TIMEOUT", "HCCL_E_UNAVAIL",
    "HCCL_RESULT_TABLE", "HCCL_ROOT_INFO_BYTES", "HCCL_SUCCESS", "STREAM_FAILURE_CODES",
    "Communicator", "HcclDataType", "HcclError", "HcclReduceOp",
    "all_gather", "all_reduce", "all_to_all_v", "barrier", "broadcast", "comm_destroy",
    "comm_init_all", "comm_init_cluster_info", "comm_init_from_env", "comm_init_root_info",
    "data_type_size", "free_port", "get_rank_id", "get_rank_size", "get_root_info",
    "hccl_result_name", "recv", "reduce", "reduce_scatter", "send",
    *(member.name for member in HcclDataType),
    *(member.name for member in HcclReduceOp),
]  # fmt: skip

__dir__ = module_dir(globals())
