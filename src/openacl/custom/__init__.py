"""Custom operators (FrameworkLaunch) and direct kernel launch (KernelLaunch).

Declare an operator like CANN's OpDef, give it an infer-shape, a tiling function and a
per-block kernel, and ``register_op`` it: its two-phase aclnn API, C-named functions,
one-shot helper and single-op-by-name entry are created from the declaration. Or write a
``@kernel`` and launch it directly with ``kernel[block_dim, stream](...)``.
"""

from __future__ import annotations

from openacl._api import module_dir
from openacl.custom.blocks import get_block_idx, get_block_num, get_tiling_key
from openacl.custom.kernel_launch import KernelFunction, global_buffer, kernel, launch_kernel
from openacl.custom.opdef import DYNAMIC, OPTIONAL, REQUIRED, AttrDef, OpDef, ParamDef
from openacl.custom.package import load_entry_points, load_package, load_vendors
from openacl.custom.register import InferShapeContext, register_op, unregister_op
from openacl.custom.tiling import PlatformInfo, TilingContext, TilingData

__all__ = [
    "DYNAMIC", "OPTIONAL", "REQUIRED", "AttrDef", "InferShapeContext", "KernelFunction",
    "OpDef", "ParamDef", "PlatformInfo", "TilingContext", "TilingData", "get_block_idx",
    "get_block_num", "get_tiling_key", "global_buffer", "kernel", "launch_kernel",
    "load_entry_points", "load_package", "load_vendors", "register_op", "unregister_op",
]

__dir__ = module_dir(globals())
