"""ONNX's operator rules that more than one room applies: constant folding (``passes.py``),
the lowerings (``onnx_ops*.py``) and the host nodes (``host_nodes.py``) must agree on them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_PARAM, AclError

__all__ = ["if_condition", "int_div", "onnx_slice"]


def onnx_slice(start: int, end: int, step: int, size: int) -> slice:
    """ONNX Slice's clamping rules as a Python slice over a dim of ``size``."""
    if step == 0:
        raise ValueError("Slice step 0")
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    if step > 0:
        return slice(max(0, min(start, size)), max(0, min(end, size)), step)
    start = max(-1, min(start, size - 1))
    end = max(-1, min(end, size - 1))
    return slice(start, end if end >= 0 else None, step)


def int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (ONNX), not flooring (numpy)."""
    quotient = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -quotient, quotient)


def if_condition(node: Any, value: np.ndarray) -> bool:
    """The truth of an ``If`` node's condition ``value``: one element, bool (numbers are
    refused, as onnxruntime refuses them).

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming the node, the dtype and the shape.
    """
    array = np.asarray(value)
    if array.dtype != np.bool_ or array.size != 1:
        raise AclError(ACL_ERROR_INVALID_PARAM,
                       f"node {node.name!r} (If): the condition {node.input[0]!r} must be one "
                       f"bool element; it is {array.dtype} {list(array.shape)}")
    return bool(array.reshape(-1)[0])
