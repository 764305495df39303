"""Single-op models and the rule that a call must match one, for both faces.

Design note (invariants)
------------------------
* ``set_model_dir`` and ``load`` register single-op descriptions (CANN's ``atc --singleop``
  JSON, or files of ``openacl convert --singleop``; ``openacl.aclop.singleop`` parses them) with
  the current runtime, one registry per runtime that lives until ``finalize`` (as CANN's
  until ``aclFinalize``). The registry is thread-safe (``singleop.SingleOpRegistry``).
* Once a model is registered, ``execute_v2``, ``create_handle`` and ``cast`` (and the
  handle for a cast) run a call only if it matches one of them: ACL_ERROR_OP_NOT_FOUND
  (100024) naming the nearest candidates otherwise, as ACL matches calls against the
  ``.om`` files it loaded. With none registered a call runs directly, as CANN's online
  compile path would. ``compile`` registers the call it compiled without turning matching
  on. ``openacl.op`` and pyACL's ``acl.op`` apply the same rule: both call ``require``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from openacl.aclop import singleop
from openacl.aclop.attr import _bad, _is_int, attr_values
from openacl.dtypes import DataType, Format
from openacl.errors import ACL_ERROR_INVALID_FILE_SIZE, ACL_ERROR_INVALID_PARAM, AclError
from openacl.runtime import core
from openacl.tensor import lookup_tensor_desc

__all__ = ["registry", "require", "set_model_dir", "load", "register_compiled"]

_registries: weakref.WeakKeyDictionary[Any, singleop.SingleOpRegistry] = \
    weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry() -> singleop.SingleOpRegistry:
    """The current runtime's single-op models (created empty on first use)."""
    runtime = core.current()
    with _registries_lock:
        found = _registries.get(runtime)
        if found is None:
            found = _registries[runtime] = singleop.SingleOpRegistry()
        return found


def _spec(desc: Any, argument: str) -> singleop.TensorSpec:
    try:
        target = lookup_tensor_desc(desc, argument)
    except AclError as exc:
        raise AclError(ACL_ERROR_INVALID_PARAM, exc.message) from None
    if target.data_type == DataType.ACL_DT_UNDEFINED:
        return singleop.TensorSpec(DataType.ACL_DT_UNDEFINED, Format.ACL_FORMAT_UNDEFINED, ())
    return singleop.TensorSpec(target.data_type, target.format, tuple(target.dims),
                               tuple(tuple(r) for r in target.dim_ranges), target.name)


def _specs(descs: Any, argument: str) -> list[singleop.TensorSpec]:
    if descs is None or isinstance(descs, (str, bytes)) or not hasattr(descs, "__len__"):
        raise _bad(argument, descs, "expected a list of tensor desc handles")
    return [_spec(d, f"{argument}[{i}]") for i, d in enumerate(descs)]


def call_signature(op_type: Any, input_desc: Any, output_desc: Any, attr: Any
                   ) -> tuple[str, list, list, dict]:
    """(op type, input specs, output specs, attribute values) of a call, as matched."""
    if not isinstance(op_type, str) or not op_type:
        raise _bad("opType", op_type, "expected the op type name, a non-empty string")
    return (op_type, _specs(input_desc, "inputDesc"), _specs(output_desc, "outputDesc"),
            attr_values(attr))


def require(op_type: Any, input_desc: Any, output_desc: Any, attr: Any) -> None:
    """With single-op models registered, the call must match one (else 100024)."""
    models = registry()
    if models.active:
        models.match(*call_signature(op_type, input_desc, output_desc, attr))


def set_model_dir(model_dir: str) -> None:
    """aclopSetModelDir: register every single-op model under ``model_dir`` (three levels
    deep, as CANN searches)."""
    if not isinstance(model_dir, str) or not model_dir:
        raise _bad("modelDir", model_dir, "expected a directory path")
    registry().add(singleop.load_dir(model_dir))


def load(model: Any, model_size: int) -> None:
    """aclopLoad: register the single-op model held in memory at ``model`` (an address, as
    ``util.bytes_to_ptr`` gives; a bytes object is accepted too) of ``model_size`` bytes."""
    size = core.check_size(model_size, "modelSize")
    if size > singleop.MAX_FILE_BYTES:
        raise AclError(ACL_ERROR_INVALID_FILE_SIZE,
                       f"argument 'modelSize' = {size}: single-op models are at most "
                       f"{singleop.MAX_FILE_BYTES} bytes")
    if isinstance(model, (bytes, bytearray, memoryview)):
        if size > len(model):
            raise _bad("modelSize", size, f"the model holds only {len(model)} bytes")
        data, source = bytes(model[:size]), "<model bytes>"
    else:
        from openacl.util import ptr_to_bytes

        data = ptr_to_bytes(model, size)
        source = f"<model at {model:#x}>" if _is_int(model) else "<model>"
    registry().add(singleop.load_bytes(data, source))


def register_compiled(op_type: str, input_desc: Sequence[int], output_desc: Sequence[int],
                      attr: Any) -> None:
    """Register a call aclopCompile compiled (matching stays as it was)."""
    signature = call_signature(op_type, input_desc, output_desc, attr)
    registry().add([singleop.description_of_call(*signature)], activate=False)
