"""``acl.media``: DVPP memory. There is no DVPP engine here, so DVPP memory is device memory
(``dev_ptr, ret = acl.media.dvpp_malloc(size)``, ``ret = acl.media.dvpp_free(dev_ptr)``);
programs that only move image data through it run unchanged."""

from __future__ import annotations

from openacl import rt as _rt
from openacl._api import module_dir
from openacl.compat.acl._face import RET, generate, outputs


def _dvpp_malloc(size: int) -> int:
    """acldvppMalloc: ``size`` bytes of device memory on the current device."""
    return _rt.malloc(size)


_TABLE = [
    ("dvpp_malloc", _dvpp_malloc, outputs("dev_ptr")),
    ("dvpp_free", _rt.free, RET),
]

FUNCTIONS = generate(_TABLE, globals())
__all__ = list(FUNCTIONS)

__dir__ = module_dir(globals())
