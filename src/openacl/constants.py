"""Every ACL constant a program may need, flat, by CANN's names.

Data types and formats come from ``dtypes``; memory, stream, event and callback enums from
the runtime modules that own them. Nothing is typed twice.
"""

from __future__ import annotations

from openacl import dtypes as _dtypes
from openacl._api import module_dir
from openacl.runtime import callback as _callback
from openacl.runtime import event as _event
from openacl.runtime import memory as _memory
from openacl.runtime import stream as _stream

ACL_DEVICE = 0  # aclrtRunMode: the program runs on the device
ACL_HOST = 1  # aclrtRunMode: the program runs on the host (OpenACL always does)
RUN_MODES = {ACL_DEVICE: "ACL_DEVICE", ACL_HOST: "ACL_HOST"}

for _table in (_memory.MALLOC_POLICIES, _memory.MEMCPY_KINDS, _memory.MEM_ATTRS,
               _callback.CALLBACK_BLOCK_TYPES):
    for _value, _name in _table.items():
        globals()[_name] = _value
for _member in (*_dtypes.DataType, *_dtypes.Format):
    globals()[_member.name] = _member

ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100
ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
ACL_STREAM_STATUS_COMPLETE = _stream.ACL_STREAM_STATUS_COMPLETE
ACL_STREAM_STATUS_NOT_READY = _stream.ACL_STREAM_STATUS_NOT_READY
ACL_EVENT_SYNC = _event.ACL_EVENT_SYNC
ACL_EVENT_CAPTURE_STREAM_PROGRESS = _event.ACL_EVENT_CAPTURE_STREAM_PROGRESS
ACL_EVENT_TIME_LINE = _event.ACL_EVENT_TIME_LINE
ACL_EVENT_EXTERNAL = _event.ACL_EVENT_EXTERNAL
ACL_EVENT_RECORDED_STATUS_NOT_READY = _event.ACL_EVENT_RECORDED_STATUS_NOT_READY
ACL_EVENT_RECORDED_STATUS_COMPLETE = _event.ACL_EVENT_RECORDED_STATUS_COMPLETE
ACL_EVENT_STATUS_COMPLETE = _event.ACL_EVENT_STATUS_COMPLETE
ACL_EVENT_STATUS_NOT_READY = _event.ACL_EVENT_STATUS_NOT_READY

__all__ = sorted(name for name in globals() if name.startswith("ACL_"))
del _table, _value, _name, _member

__dir__ = module_dir(globals())
