"""The compatibility face: pyACL's and CANN's C conventions over the same implementation.

Handles and pointers are ints; a function with outputs returns ``(outputs..., ret)``; a
constructor returns the handle (0 on failure); nothing raises for a bad argument: the ACL
code is returned and the message is kept for ``get_recent_err_msg()``.

``openacl.compat.aclnn`` holds the C-named aclnn functions (``aclnnAddGetWorkspaceSize``,
``aclnnAdd``, ``aclCreateTensor``...).
"""

from __future__ import annotations

from openacl._api import module_dir
from openacl.compat.convention import returning_code, returning_handle, returning_outputs

__all__ = ["returning_code", "returning_handle", "returning_outputs"]

__dir__ = module_dir(globals())
