"""C-named HCCL functions (``HcclAllReduce``...): a table over ``openacl.hccl``.

CANN's convention: every function returns an ``HcclResult`` (``HCCL_SUCCESS`` = 0); outputs
come first, ``(outputs..., ret)`` (``comm, ret = HcclCommInitRootInfo(2, root_info, rank)``);
nothing raises for a bad argument, the message is kept for ``get_recent_err_msg()``.
Communicators are int handles (0 on failure), buffers are device pointers (ints), a stream
is a stream handle (0: the default stream). A collective that fails while it runs fails
its stream: ``aclrtSynchronizeStream`` reports it with an ACL code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openacl import hccl as _hccl
from openacl._api import module_dir
from openacl.compat.convention import returning_code, returning_outputs
from openacl.errors import HCCL_E_PARA, get_recent_err_msg
from openacl.hccl import *  # noqa: F401,F403 - the HCCL_* enum and result names, as C has them

NULL_COMM = 0  # what a failed HcclCommInit* reports, as C leaves a NULL HcclComm


def _handle_of(fn: Callable[..., Any]) -> Callable[..., int]:
    def made(*args: Any, **kwargs: Any) -> int:
        return int(fn(*args, **kwargs))
    made.__doc__ = fn.__doc__
    return made


def _handles_of(fn: Callable[..., Any]) -> Callable[..., list[int]]:
    def made(*args: Any, **kwargs: Any) -> list[int]:
        return [int(comm) for comm in fn(*args, **kwargs)]
    made.__doc__ = fn.__doc__
    return made


_OUTPUTS = [  # (C name, Pythonic function, placeholder of the output on failure)
    ("HcclGetRootInfo", _hccl.get_root_info, b""),
    ("HcclCommInitRootInfo", _handle_of(_hccl.comm_init_root_info), NULL_COMM),
    ("HcclCommInitClusterInfo", _handle_of(_hccl.comm_init_cluster_info), NULL_COMM),
    ("HcclCommInitAll", _handles_of(_hccl.comm_init_all), []),
    ("HcclGetRankSize", _hccl.get_rank_size, 0),
    ("HcclGetRankId", _hccl.get_rank_id, 0),
]
_CODES = [  # (C name, Pythonic function): returns only ret
    ("HcclCommDestroy", _hccl.comm_destroy),
    ("HcclAllReduce", _hccl.all_reduce),
    ("HcclBroadcast", _hccl.broadcast),
    ("HcclAllGather", _hccl.all_gather),
    ("HcclReduceScatter", _hccl.reduce_scatter),
    ("HcclReduce", _hccl.reduce),
    ("HcclSend", _hccl.send),
    ("HcclRecv", _hccl.recv),
    ("HcclAlltoAllV", _hccl.all_to_all_v),
    ("HcclBarrier", _hccl.barrier),
]


def _define(name: str, wrapper: Callable[..., Any], fn: Callable[..., Any], returns: str
            ) -> None:
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__module__ = __name__
    summary = (fn.__doc__ or "").strip().split("\n")[0]
    wrapper.__doc__ = f"{name}(...) -> {returns}\n\n{summary}"
    globals()[name] = wrapper


for _name, _fn, _failure in _OUTPUTS:
    _define(_name, returning_outputs(_fn, (_failure,), HCCL_E_PARA), _fn, "(output, ret)")
for _name, _fn in _CODES:
    _define(_name, returning_code(_fn, HCCL_E_PARA), _fn, "ret")
del _name, _fn, _failure

HcclGetErrorString = _hccl.hccl_result_name  # the name of an HcclResult, as a string

__all__ = [
    "NULL_COMM",
    "HcclGetErrorString",
    "get_recent_err_msg",
    *(name for name, _, _ in _OUTPUTS),
    *(name for name, _ in _CODES),
    *_hccl.__all__,
]

__dir__ = module_dir(globals())
