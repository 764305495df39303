"""The transport under HCCL: torch.distributed, imported at first use, and device memory as
torch tensors.

torch is optional (``pip install 'openacl[dist]'``): nothing here imports it at module
import, and without it every HCCL function raises ``HcclError(HCCL_E_NOT_SUPPORT)`` with
that install line.

Which process-group backend serves which runtime backend is decided in one place,
``transport_for``: gloo for the CPU backend (device memory is host memory, viewed zero-copy
with ``torch.from_numpy``). The CUDA backend would take NCCL over DLPack views of CuPy
memory on the stream's CUDA stream; that needs a CUDA build of torch and is refused
clearly until it is built and tested.
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np

from openacl.errors import HCCL_E_NOT_SUPPORT
from openacl.hccl.constants import NUMPY_DTYPES, HcclDataType
from openacl.hccl.result import HcclError

INSTALL_HINT = "pip install 'openacl[dist]'"
TRANSPORTS = {"cpu": "gloo", "cuda": "nccl"}  # runtime backend -> process-group backend
BUILT_TRANSPORTS = frozenset({"gloo"})
BF16_CARRIER = np.int16  # bfloat16 crosses into torch as int16 bits, then .view(bfloat16)
BF16 = NUMPY_DTYPES[HcclDataType.HCCL_DATA_TYPE_BFP16]

_dist: Any = None
_torch: Any = None


def torch_distributed() -> tuple[Any, Any]:
    """``(torch, torch.distributed)``, imported on first use; ``HcclError`` without them."""
    global _dist, _torch
    if _dist is None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise HcclError(HCCL_E_NOT_SUPPORT,
                            f"openacl.hccl needs torch.distributed, which is not installed "
                            f"({exc}): {INSTALL_HINT}") from None
        if not dist.is_available():
            raise HcclError(HCCL_E_NOT_SUPPORT,
                            f"this torch build has no torch.distributed: {INSTALL_HINT}")
        _torch, _dist = torch, dist
    return _torch, _dist


def transport_for(backend_name: str) -> str:
    """The process-group backend for a runtime backend (see the module docstring)."""
    transport = TRANSPORTS.get(backend_name)
    if transport not in BUILT_TRANSPORTS:
        raise HcclError(HCCL_E_NOT_SUPPORT,
                        f"openacl.hccl runs on the CPU backend (gloo); the {backend_name!r} "
                        f"backend would need {transport or 'a transport'} for its device "
                        f"memory, which is not built yet")
    return transport


def timedelta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def new_process_group(store: Any, rank: int, size: int, connect_timeout_s: float,
                      exec_timeout_s: float) -> Any:
    """A gloo process group over ``store``: the rendezvous waits up to ``connect_timeout_s``,
    every collective afterwards up to ``exec_timeout_s`` for its peers."""
    _, dist = torch_distributed()
    group = dist.ProcessGroupGloo(store, rank, size, timedelta(connect_timeout_s))
    group._set_default_timeout(timedelta(exec_timeout_s))
    return group


def byte_tensor(view: np.ndarray) -> Any:
    """A uint8 torch tensor over the same memory as the uint8 numpy ``view`` (zero-copy)."""
    torch, _ = torch_distributed()
    return torch.from_numpy(view)


def typed_tensor(array: np.ndarray) -> Any:
    """A torch tensor over ``array``'s memory; bfloat16 goes through its int16 bits."""
    torch, _ = torch_distributed()
    if array.dtype == BF16:  # a dtype comparison: ``dtype.name`` costs microseconds a call
        return torch.from_numpy(array.view(BF16_CARRIER)).view(torch.bfloat16)
    return torch.from_numpy(array)


def reduce_op(name: str) -> Any:
    """torch.distributed's ReduceOp called ``name`` (SUM, PRODUCT, MAX, MIN)."""
    _, dist = torch_distributed()
    return getattr(dist.ReduceOp, name)


__all__ = [
    "BUILT_TRANSPORTS",
    "INSTALL_HINT",
    "TRANSPORTS",
    "byte_tensor",
    "new_process_group",
    "reduce_op",
    "timedelta",
    "torch_distributed",
    "transport_for",
    "typed_tensor",
]
