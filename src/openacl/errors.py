"""Every ACL, runtime, GE and aclnn error code, ``AclError``, and the per-thread recent error.

Where the table comes from (names and numbers exactly as CANN spells them; the one-line
meanings are our English summaries of the header comments and of the CANN docs):

- ACL codes (0, 1000xx, 148046-148053, 2000xx, 300000, 50000x):
  ``include/external/acl/acl_base_rt.h`` (included by ``acl/acl_base.h``) of hicann/runtime,
  package version 9.1.0, commit 681ef7610df1 (2026-08-22); meanings from
  ``docs/zh/api_ref/25-01_aclError.md`` of the same commit.
- Runtime codes (ACL_RT_SUCCESS, 107xxx, 207xxx, 507xxx):
  ``include/external/acl/error_codes/rt_error_codes.h`` of the same commit.
- GE codes passed through by ACL (145xxx, 245xxx, 345xxx, 545xxx):
  ``include/external/acl/error_codes/ge_error_codes.h`` of the same commit.
- aclnn codes (ACLNN_SUCCESS, 161001, 161002, 361001, 561xxx):
  ``include/nnopbase/opdev/op_errno.h`` of hicann/opbase, package version 9.0.0, commit
  aa3cd74b7f6d (2026-07-22); meanings from
  ``docs/en/api/nnopbase/opdev/aclnn_return_code/aclnn_return_codes.md``.

Several names share a number (``ACL_ERROR_NONE``, ``ACL_RT_SUCCESS`` and ``ACLNN_SUCCESS``
are 0; ``ACLNN_ERR_INNER_KEY_CONFILICT`` is the misspelt, deprecated name of 561105). All of
them exist as constants here; ``ERROR_TABLE`` and ``error_name`` report the name defined
first below, which is the one CANN documents as current.

The recent error message is per thread, like ``aclGetRecentErrMsg``, and is recorded where
an error leaves the API, not where it is built: the compat face's code-returning wrappers
record the error they turn into a code, and on the Pythonic face an ``AclError`` that
propagates out of a ``public`` function records itself (the outermost public call only). An
error that an internal handler catches and recovers from leaves no message behind.
``get_recent_err_msg`` returns the message once.
"""

from __future__ import annotations

import functools
import operator
import threading
import types
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, TypeVar

# ---------------------------------------------------------------------------------------------
# acl/acl_base_rt.h: general ACL return codes
# ---------------------------------------------------------------------------------------------
ACL_SUCCESS = 0
ACL_ERROR_NONE = 0  # deprecated spelling of ACL_SUCCESS

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_WRITE_FILE = 100004
ACL_ERROR_INVALID_FILE_SIZE = 100005
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_FILE_MISSING_ATTR = 100007
ACL_ERROR_FILE_ATTR_INVALID = 100008
ACL_ERROR_INVALID_DUMP_CONFIG = 100009
ACL_ERROR_INVALID_PROFILING_CONFIG = 100010
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_DESERIALIZE_MODEL = 100012
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_READ_MODEL_FAILURE = 100014
ACL_ERROR_MODEL_SIZE_INVALID = 100015
ACL_ERROR_MODEL_MISSING_ATTR = 100016
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_OP_TYPE_NOT_MATCH = 100020
ACL_ERROR_OP_INPUT_NOT_MATCH = 100021
ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022
ACL_ERROR_OP_ATTR_NOT_MATCH = 100023
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_OP_LOAD_FAILED = 100025
ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026
ACL_ERROR_FORMAT_NOT_MATCH = 100027
ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED = 100028
ACL_ERROR_KERNEL_NOT_FOUND = 100029
ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED = 100030
ACL_ERROR_KERNEL_ALREADY_REGISTERED = 100031
ACL_ERROR_INVALID_QUEUE_ID = 100032
ACL_ERROR_REPEAT_SUBSCRIBE = 100033
ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034
ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035
ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036
ACL_ERROR_REPEAT_FINALIZE = 100037
ACL_ERROR_NOT_STATIC_AIPP = 100038
ACL_ERROR_COMPILING_STUB_MODE = 100039
ACL_ERROR_GROUP_NOT_SET = 100040
ACL_ERROR_GROUP_NOT_CREATE = 100041
ACL_ERROR_PROF_ALREADY_RUN = 100042
ACL_ERROR_PROF_NOT_RUN = 100043
ACL_ERROR_DUMP_ALREADY_RUN = 100044
ACL_ERROR_DUMP_NOT_RUN = 100045
ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046
ACL_ERROR_PROF_API_CONFLICT = 148047
ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG = 148048
ACL_ERROR_INVALID_OPP_PATH = 148049
ACL_ERROR_OP_UNSUPPORTED_DYNAMIC = 148050
ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED = 148051
ACL_ERROR_UNSUPPORTED_JPEG = 148052
ACL_ERROR_INVALID_BUNDLE_MODEL_ID = 148053

ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_API_NOT_SUPPORT = 200001
ACL_ERROR_INVALID_DEVICE = 200002
ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003
ACL_ERROR_RESOURCE_NOT_MATCH = 200004
ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005
ACL_ERROR_FEATURE_UNSUPPORTED = 200006
ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007

ACL_ERROR_STORAGE_OVER_LIMIT = 300000

ACL_ERROR_INTERNAL_ERROR = 500000
ACL_ERROR_FAILURE = 500001
ACL_ERROR_GE_FAILURE = 500002
ACL_ERROR_RT_FAILURE = 500003
ACL_ERROR_DRV_FAILURE = 500004
ACL_ERROR_PROFILING_FAILURE = 500005

# ---------------------------------------------------------------------------------------------
# acl/error_codes/rt_error_codes.h: runtime codes passed through by ACL
# ---------------------------------------------------------------------------------------------
ACL_RT_SUCCESS = 0

ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_STREAM_CONTEXT = 107003
ACL_ERROR_RT_MODEL_CONTEXT = 107004
ACL_ERROR_RT_STREAM_MODEL = 107005
ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006
ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007
ACL_ERROR_RT_ADDR_UNALIGNED = 107008
ACL_ERROR_RT_FILE_OPEN = 107009
ACL_ERROR_RT_FILE_WRITE = 107010
ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011
ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012
ACL_ERROR_RT_GROUP_NOT_SET = 107013
ACL_ERROR_RT_GROUP_NOT_CREATE = 107014
ACL_ERROR_RT_STREAM_NO_CB_REG = 107015
ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018
ACL_ERROR_RT_WAIT_TIMEOUT = 107019
ACL_ERROR_RT_TASK_TIMEOUT = 107020
ACL_ERROR_RT_SYSPARAMOPT_NOT_SET = 107021
ACL_ERROR_RT_DEVICE_TASK_ABORT = 107022
ACL_ERROR_RT_STREAM_ABORT = 107023
ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107024
ACL_ERROR_RT_STREAM_UNJOINED = 107025
ACL_ERROR_RT_MODEL_CAPTURED = 107026
ACL_ERROR_RT_STREAM_CAPTURED = 107027
ACL_ERROR_RT_EVENT_CAPTURED = 107028
ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107029
ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107030
ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT = 107031
ACL_ERROR_STREAM_CAPTURE_CONFLICT = 107032  # no RT_ in CANN's name
ACL_ERROR_STREAM_TASK_GROUP_STATUS = 107033  # no RT_ in CANN's name
ACL_ERROR_STREAM_TASK_GROUP_INTR = 107034  # no RT_ in CANN's name
ACL_ERROR_RT_TASK_ABORT_STOP = 107035
ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107036
ACL_ERROR_RT_MODEL_RUNNING = 107037
ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107038
ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY = 107039
ACL_ERROR_RT_MODEL_UPDATE_FAILED = 107040
ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC = 107041
ACL_ERROR_RT_SYMBOL_NOT_FOUND = 107042
ACL_ERROR_RT_INVALID_SYMBOL = 107043
ACL_ERROR_RT_INVALID_DEVICE_FUNCTION = 107044
ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING = 107045

ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_MEMORY_FREE = 207002
ACL_ERROR_RT_AICORE_OVER_FLOW = 207003
ACL_ERROR_RT_NO_DEVICE = 207004
ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207005
ACL_ERROR_RT_NO_PERMISSION = 207006
ACL_ERROR_RT_NO_EVENT_RESOURCE = 207007
ACL_ERROR_RT_NO_STREAM_RESOURCE = 207008
ACL_ERROR_RT_NO_NOTIFY_RESOURCE = 207009
ACL_ERROR_RT_NO_MODEL_RESOURCE = 207010
ACL_ERROR_RT_NO_CDQ_RESOURCE = 207011
ACL_ERROR_RT_OVER_LIMIT = 207012
ACL_ERROR_RT_QUEUE_EMPTY = 207013
ACL_ERROR_RT_QUEUE_FULL = 207014
ACL_ERROR_RT_REPEATED_INIT = 207015
ACL_ERROR_RT_AIVEC_OVER_FLOW = 207016
ACL_ERROR_RT_OVER_FLOW = 207017
ACL_ERROR_RT_DEVICE_OOM = 207018
ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP = 207019
ACL_ERROR_RT_TIMEOUT = 207020
ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED = 207021

ACL_ERROR_RT_INTERNAL_ERROR = 507000
ACL_ERROR_RT_TS_ERROR = 507001
ACL_ERROR_RT_STREAM_TASK_FULL = 507002
ACL_ERROR_RT_STREAM_TASK_EMPTY = 507003
ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004
ACL_ERROR_RT_END_OF_SEQUENCE = 507005
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006
ACL_ERROR_RT_CONTEXT_RELEASE_ERROR = 507007
ACL_ERROR_RT_SOC_VERSION = 507008
ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT = 507009
ACL_ERROR_RT_LOST_HEARTBEAT = 507010
ACL_ERROR_RT_MODEL_EXECUTE = 507011
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
ACL_ERROR_RT_SYS_DMA = 507013
ACL_ERROR_RT_AICORE_TIMEOUT = 507014
ACL_ERROR_RT_AICORE_EXCEPTION = 507015
ACL_ERROR_RT_AICORE_TRAP_EXCEPTION = 507016
ACL_ERROR_RT_AICPU_TIMEOUT = 507017
ACL_ERROR_RT_AICPU_EXCEPTION = 507018
ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR = 507019
ACL_ERROR_RT_AICPU_MODEL_RSP_ERR = 507020
ACL_ERROR_RT_PROFILING_ERROR = 507021
ACL_ERROR_RT_IPC_ERROR = 507022
ACL_ERROR_RT_MODEL_ABORT_NORMAL = 507023
ACL_ERROR_RT_KERNEL_UNREGISTERING = 507024
ACL_ERROR_RT_RINGBUFFER_NOT_INIT = 507025
ACL_ERROR_RT_RINGBUFFER_NO_DATA = 507026
ACL_ERROR_RT_KERNEL_LOOKUP = 507027
ACL_ERROR_RT_KERNEL_DUPLICATE = 507028
ACL_ERROR_RT_DEBUG_REGISTER_FAIL = 507029
ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL = 507030
ACL_ERROR_RT_LABEL_CONTEXT = 507031
ACL_ERROR_RT_PROGRAM_USE_OUT = 507032
ACL_ERROR_RT_DEV_SETUP_ERROR = 507033
ACL_ERROR_RT_VECTOR_CORE_TIMEOUT = 507034
ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507035
ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION = 507036
ACL_ERROR_RT_CDQ_BATCH_ABNORMAL = 507037
ACL_ERROR_RT_DIE_MODE_CHANGE_ERROR = 507038
ACL_ERROR_RT_DIE_SET_ERROR = 507039
ACL_ERROR_RT_INVALID_DIEID = 507040
ACL_ERROR_RT_DIE_MODE_NOT_SET = 507041
ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW = 507042
ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW = 507043
ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW = 507044
ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW = 507045
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046
ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047
ACL_ERROR_RT_FFTS_PLUS_TIMEOUT = 507048
ACL_ERROR_RT_FFTS_PLUS_EXCEPTION = 507049
ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION = 507050
ACL_ERROR_RT_SEND_MSG = 507051
ACL_ERROR_RT_COPY_DATA = 507052
ACL_ERROR_RT_DEVICE_MEM_ERROR = 507053
ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR = 507054
ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR = 507055
ACL_ERROR_RT_LINK_ERROR = 507056
ACL_ERROR_RT_SUSPECT_REMOTE_ERROR = 507057
ACL_ERROR_RT_DRV_INTERNAL_ERROR = 507899
ACL_ERROR_RT_AICPU_INTERNAL_ERROR = 507900
ACL_ERROR_RT_SOCKET_CLOSE = 507901
ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR = 507902
ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507903
ACL_ERROR_RT_COMM_OP_RETRY_FAIL = 507904
ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT = 507905  # no RT_ in CANN's name
ACL_ERROR_SNAPSHOT_LOCK_FAILED = 507906
ACL_ERROR_SNAPSHOT_UNLOCK_FAILED = 507907
ACL_ERROR_SNAPSHOT_BACKUP_FAILED = 507908
ACL_ERROR_SNAPSHOT_RESTORE_FAILED = 507909
ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 507910
ACL_ERROR_HOST_MEMORY_NOT_REGISTERED = 507911
ACL_ERROR_SNAPSHOT_CALLBACK_FAILED = 507912
ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED = 507913
ACL_ERROR_RT_L3_PORT_ERROR = 507914
ACL_ERROR_RT_CCU_TIMEOUT = 507915
ACL_ERROR_RT_CCU_EXCEPTION = 507916

# ---------------------------------------------------------------------------------------------
# acl/error_codes/ge_error_codes.h: Graph Engine codes passed through by model loading/execution
# ---------------------------------------------------------------------------------------------
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_NOT_INIT = 145001
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003
ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007
ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID = 145008
ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED = 145009
ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID = 145011
ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID = 145012
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013
ACL_ERROR_GE_AIPP_BATCH_EMPTY = 145014
ACL_ERROR_GE_AIPP_NOT_EXIST = 145015
ACL_ERROR_GE_AIPP_MODE_INVALID = 145016
ACL_ERROR_GE_OP_TASK_TYPE_INVALID = 145017
ACL_ERROR_GE_OP_KERNEL_TYPE_INVALID = 145018
ACL_ERROR_GE_PLGMGR_PATH_INVALID = 145019
ACL_ERROR_GE_FORMAT_INVALID = 145020
ACL_ERROR_GE_SHAPE_INVALID = 145021
ACL_ERROR_GE_DATATYPE_INVALID = 145022
ACL_ERROR_GE_MEMORY_ALLOCATION = 245000
ACL_ERROR_GE_MEMORY_OPERATE_FAILED = 245001
ACL_ERROR_GE_DEVICE_MEMORY_OPERATE_FAILED = 245002
ACL_ERROR_GE_SUBHEALTHY = 345102
ACL_ERROR_GE_USER_RAISE_EXCEPTION = 345103
ACL_ERROR_GE_DATA_NOT_ALIGNED = 345104
ACL_ERROR_GE_INTERNAL_ERROR = 545000
ACL_ERROR_GE_LOAD_MODEL = 545001
ACL_ERROR_GE_EXEC_LOAD_MODEL_PARTITION_FAILED = 545002
ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED = 545003
ACL_ERROR_GE_EXEC_LOAD_TASK_PARTITION_FAILED = 545004
ACL_ERROR_GE_EXEC_LOAD_KERNEL_PARTITION_FAILED = 545005
ACL_ERROR_GE_EXEC_RELEASE_MODEL_DATA = 545006
ACL_ERROR_GE_COMMAND_HANDLE = 545007
ACL_ERROR_GE_GET_TENSOR_INFO = 545008
ACL_ERROR_GE_UNLOAD_MODEL = 545009
ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT = 545601
ACL_ERROR_GE_REDEPLOYING = 545602

# ---------------------------------------------------------------------------------------------
# opbase opdev/op_errno.h: aclnn status codes (aclnnStatus)
# ---------------------------------------------------------------------------------------------
ACLNN_SUCCESS = 0
ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002
ACLNN_ERR_RUNTIME_ERROR = 361001
ACLNN_ERR_INNER = 561000
ACLNN_ERR_INNER_INFERSHAPE_ERROR = 561001
ACLNN_ERR_INNER_TILING_ERROR = 561002
ACLNN_ERR_INNER_FIND_KERNEL_ERROR = 561003
ACLNN_ERR_INNER_CREATE_EXECUTOR = 561101
ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR = 561102
ACLNN_ERR_INNER_NULLPTR = 561103
ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE = 561104
ACLNN_ERR_INNER_KEY_CONFLICT = 561105
ACLNN_ERR_INNER_KEY_CONFILICT = 561105  # deprecated misspelling kept by CANN
ACLNN_ERR_INNER_INVALID_IMPL_MODE = 561106
ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND = 561107
ACLNN_ERR_INNER_LOAD_JSON_FAILED = 561108
ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND = 561109
ACLNN_ERR_INNER_JSON_FORMAT_INVALID = 561110
ACLNN_ERR_INNER_JSON_DTYPE_INVALID = 561111
ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND = 561112
ACLNN_ERR_INNER_OP_FILE_INVALID = 561113
ACLNN_ERR_INNER_ATTR_NUM_OUT_OF_BOUND = 561114
ACLNN_ERR_INNER_ATTR_LEN_NOT_ENOUGH = 561115
ACLNN_ERR_INNER_INPUT_NUM_IN_JSON_TOO_LARGE = 561116
ACLNN_ERR_INNER_INPUT_JSON_IS_NULL = 561117
ACLNN_ERR_INNER_STATIC_WORKSPACE_INVALID = 561118
ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID = 561119

# ---------------------------------------------------------------------------------------------
# One-line meanings, keyed by code (one entry per number).
# ---------------------------------------------------------------------------------------------
_MEANINGS: dict[int, str] = {
    ACL_SUCCESS: "success",
    # ACL general codes
    ACL_ERROR_INVALID_PARAM: "parameter check failed: an argument value is invalid",
    ACL_ERROR_UNINITIALIZE: "not initialized: call aclInit (or the feature's init API) first",
    ACL_ERROR_REPEAT_INITIALIZE: "repeated initialization or repeated loading",
    ACL_ERROR_INVALID_FILE: "invalid file: it does not exist or cannot be accessed",
    ACL_ERROR_WRITE_FILE: "failed to write the file",
    ACL_ERROR_INVALID_FILE_SIZE: "invalid file size",
    ACL_ERROR_PARSE_FILE: "failed to parse the file",
    ACL_ERROR_FILE_MISSING_ATTR: "the file is missing a parameter",
    ACL_ERROR_FILE_ATTR_INVALID: "a parameter in the file is invalid",
    ACL_ERROR_INVALID_DUMP_CONFIG: "invalid dump configuration",
    ACL_ERROR_INVALID_PROFILING_CONFIG: "invalid profiling configuration",
    ACL_ERROR_INVALID_MODEL_ID: "invalid model ID, or the model is not loaded",
    ACL_ERROR_DESERIALIZE_MODEL: "failed to deserialize the model",
    ACL_ERROR_PARSE_MODEL: "failed to parse the model",
    ACL_ERROR_READ_MODEL_FAILURE: "failed to read the model file",
    ACL_ERROR_MODEL_SIZE_INVALID: "invalid model size",
    ACL_ERROR_MODEL_MISSING_ATTR: "the model is missing a parameter",
    ACL_ERROR_MODEL_INPUT_NOT_MATCH: "the model inputs do not match",
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH: "the model outputs do not match",
    ACL_ERROR_MODEL_NOT_DYNAMIC: "the model is not a dynamic model",
    ACL_ERROR_OP_TYPE_NOT_MATCH: "single-operator type does not match",
    ACL_ERROR_OP_INPUT_NOT_MATCH: "single-operator inputs do not match",
    ACL_ERROR_OP_OUTPUT_NOT_MATCH: "single-operator outputs do not match",
    ACL_ERROR_OP_ATTR_NOT_MATCH: "single-operator attributes do not match",
    ACL_ERROR_OP_NOT_FOUND: "single operator not found",
    ACL_ERROR_OP_LOAD_FAILED: "failed to load the single operator",
    ACL_ERROR_UNSUPPORTED_DATA_TYPE: "unsupported data type",
    ACL_ERROR_FORMAT_NOT_MATCH: "format does not match",
    ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED: "no kernel selector registered for the operator",
    ACL_ERROR_KERNEL_NOT_FOUND: "operator kernel not registered",
    ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED: "kernel selector already registered",
    ACL_ERROR_KERNEL_ALREADY_REGISTERED: "operator kernel already registered",
    ACL_ERROR_INVALID_QUEUE_ID: "invalid queue ID",
    ACL_ERROR_REPEAT_SUBSCRIBE: "repeated subscription of the same stream",
    ACL_ERROR_STREAM_NOT_SUBSCRIBE: "stream not subscribed (deprecated, see 107015)",
    ACL_ERROR_THREAD_NOT_SUBSCRIBE: "thread not subscribed (deprecated, see 107012)",
    ACL_ERROR_WAIT_CALLBACK_TIMEOUT: "timed out waiting for a callback (deprecated, see 507012)",
    ACL_ERROR_REPEAT_FINALIZE: "repeated finalization",
    ACL_ERROR_NOT_STATIC_AIPP: "static AIPP configuration does not exist (deprecated)",
    ACL_ERROR_COMPILING_STUB_MODE: "the library path points at compile stubs, not the runtime",
    ACL_ERROR_GROUP_NOT_SET: "group not set (deprecated, see 107013)",
    ACL_ERROR_GROUP_NOT_CREATE: "group not created (deprecated, see 107014)",
    ACL_ERROR_PROF_ALREADY_RUN: "a profiling collection task already exists",
    ACL_ERROR_PROF_NOT_RUN: "profiling not initialized: call aclprofInit first",
    ACL_ERROR_DUMP_ALREADY_RUN: "a dump task already exists",
    ACL_ERROR_DUMP_NOT_RUN: "dump not initialized: call aclmdlInitDump first",
    ACL_ERROR_PROF_REPEAT_SUBSCRIBE: "the same model is subscribed twice for profiling",
    ACL_ERROR_PROF_API_CONFLICT: "conflicting profiling API calls",
    ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG: "invalid operator cache aging configuration",
    ACL_ERROR_INVALID_OPP_PATH: "ASCEND_OPP_PATH is not set or is wrong",
    ACL_ERROR_OP_UNSUPPORTED_DYNAMIC: "the operator does not support dynamic shapes",
    ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED: "related resources have not been released yet",
    ACL_ERROR_UNSUPPORTED_JPEG: "JPEG encoding not supported by the JPEG decoder",
    ACL_ERROR_INVALID_BUNDLE_MODEL_ID: "invalid bundle model ID",
    ACL_ERROR_BAD_ALLOC: "memory allocation failed",
    ACL_ERROR_API_NOT_SUPPORT: "API not supported",
    ACL_ERROR_INVALID_DEVICE: "invalid device (deprecated, see 107001)",
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED: "memory address is not aligned",
    ACL_ERROR_RESOURCE_NOT_MATCH: "resources do not match (stream, context, ...)",
    ACL_ERROR_INVALID_RESOURCE_HANDLE: "invalid resource handle: destroyed or in use",
    ACL_ERROR_FEATURE_UNSUPPORTED: "feature not supported",
    ACL_ERROR_PROF_MODULES_UNSUPPORTED: "unsupported profiling configuration",
    ACL_ERROR_STORAGE_OVER_LIMIT: "storage limit exceeded",
    ACL_ERROR_INTERNAL_ERROR: "unknown internal error",
    ACL_ERROR_FAILURE: "internal error",
    ACL_ERROR_GE_FAILURE: "error in the GE (Graph Engine) module",
    ACL_ERROR_RT_FAILURE: "error in the runtime module",
    ACL_ERROR_DRV_FAILURE: "error in the driver module",
    ACL_ERROR_PROFILING_FAILURE: "error in the profiling module",
    # runtime 107xxx: caller errors
    ACL_ERROR_RT_PARAM_INVALID: "runtime parameter check failed",
    ACL_ERROR_RT_INVALID_DEVICEID: "invalid device ID",
    ACL_ERROR_RT_CONTEXT_NULL: "current context is null: set a device or context first",
    ACL_ERROR_RT_STREAM_CONTEXT: "stream is not in the current context",
    ACL_ERROR_RT_MODEL_CONTEXT: "model is not in the current context",
    ACL_ERROR_RT_STREAM_MODEL: "stream is not bound to the model",
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID: "event timestamp invalid",
    ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL: "event timestamp reversal",
    ACL_ERROR_RT_ADDR_UNALIGNED: "memory address is not aligned",
    ACL_ERROR_RT_FILE_OPEN: "failed to open the file",
    ACL_ERROR_RT_FILE_WRITE: "failed to write the file",
    ACL_ERROR_RT_STREAM_SUBSCRIBE: "stream not subscribed, or subscribed twice",
    ACL_ERROR_RT_THREAD_SUBSCRIBE: "thread not subscribed, or subscribed twice",
    ACL_ERROR_RT_GROUP_NOT_SET: "group not set",
    ACL_ERROR_RT_GROUP_NOT_CREATE: "group not created",
    ACL_ERROR_RT_STREAM_NO_CB_REG: "the callback's stream is not registered to a thread",
    ACL_ERROR_RT_INVALID_MEMORY_TYPE: "invalid memory type",
    ACL_ERROR_RT_INVALID_HANDLE: "invalid resource handle",
    ACL_ERROR_RT_INVALID_MALLOC_TYPE: "invalid memory allocation type",
    ACL_ERROR_RT_WAIT_TIMEOUT: "wait timed out",
    ACL_ERROR_RT_TASK_TIMEOUT: "task execution timed out",
    ACL_ERROR_RT_SYSPARAMOPT_NOT_SET: "system parameter not set in the current context",
    ACL_ERROR_RT_DEVICE_TASK_ABORT: "device task abort conflicts with another operation",
    ACL_ERROR_RT_STREAM_ABORT: "the stream's tasks are being aborted",
    ACL_ERROR_RT_CAPTURE_DEPENDENCY: "captured event wait has no matching event record",
    ACL_ERROR_RT_STREAM_UNJOINED: "captured side stream did not join back to the origin stream",
    ACL_ERROR_RT_MODEL_CAPTURED: "the model is being captured",
    ACL_ERROR_RT_STREAM_CAPTURED: "the stream is being captured",
    ACL_ERROR_RT_EVENT_CAPTURED: "the event is being captured",
    ACL_ERROR_RT_STREAM_NOT_CAPTURED: "the stream is not being captured",
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: "operation not allowed in the current capture mode",
    ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT: "the default stream cannot be used while capturing",
    ACL_ERROR_STREAM_CAPTURE_CONFLICT: "interdependent streams cannot begin capture together",
    ACL_ERROR_STREAM_TASK_GROUP_STATUS: "task group status error",
    ACL_ERROR_STREAM_TASK_GROUP_INTR: "task group recording interrupted",
    ACL_ERROR_RT_TASK_ABORT_STOP: "device task abort stopped before post-processing",
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED: "capture was not begun on this stream",
    ACL_ERROR_RT_MODEL_RUNNING: "the model is still running and cannot be destroyed",
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD: "capture ended on a different thread than it began",
    ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY: "input array is smaller than required",
    ACL_ERROR_RT_MODEL_UPDATE_FAILED: "model update failed",
    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC: "capture mode does not allow async-to-sync operations",
    ACL_ERROR_RT_SYMBOL_NOT_FOUND: "symbol not found",
    ACL_ERROR_RT_INVALID_SYMBOL: "invalid device symbol",
    ACL_ERROR_RT_INVALID_DEVICE_FUNCTION: "invalid device function",
    ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING: "a sub acl graph is being captured",
    # runtime 207xxx: resources
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT: "feature not supported",
    ACL_ERROR_RT_MEMORY_ALLOCATION: "memory allocation failed (out of memory)",
    ACL_ERROR_RT_MEMORY_FREE: "memory free failed",
    ACL_ERROR_RT_AICORE_OVER_FLOW: "AI Core operator overflow",
    ACL_ERROR_RT_NO_DEVICE: "device not available",
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL: "resource allocation failed",
    ACL_ERROR_RT_NO_PERMISSION: "no permission",
    ACL_ERROR_RT_NO_EVENT_RESOURCE: "out of event resources",
    ACL_ERROR_RT_NO_STREAM_RESOURCE: "out of stream resources",
    ACL_ERROR_RT_NO_NOTIFY_RESOURCE: "out of notify resources",
    ACL_ERROR_RT_NO_MODEL_RESOURCE: "out of model resources",
    ACL_ERROR_RT_NO_CDQ_RESOURCE: "out of internal runtime (CDQ) resources",
    ACL_ERROR_RT_OVER_LIMIT: "over limit (e.g. too many queues)",
    ACL_ERROR_RT_QUEUE_EMPTY: "queue is empty",
    ACL_ERROR_RT_QUEUE_FULL: "queue is full",
    ACL_ERROR_RT_REPEATED_INIT: "repeated initialization",
    ACL_ERROR_RT_AIVEC_OVER_FLOW: "AI Vector core overflow",
    ACL_ERROR_RT_OVER_FLOW: "arithmetic overflow",
    ACL_ERROR_RT_DEVICE_OOM: "device out of memory",
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP: "updating this operator is not supported",
    ACL_ERROR_RT_TIMEOUT: "driver timeout",
    ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED: "link type not supported",
    # runtime 507xxx: internal and device errors
    ACL_ERROR_RT_INTERNAL_ERROR: "runtime internal error",
    ACL_ERROR_RT_TS_ERROR: "device task scheduler internal error",
    ACL_ERROR_RT_STREAM_TASK_FULL: "stream task queue is full",
    ACL_ERROR_RT_STREAM_TASK_EMPTY: "stream task queue is empty",
    ACL_ERROR_RT_STREAM_NOT_COMPLETE: "stream tasks not complete",
    ACL_ERROR_RT_END_OF_SEQUENCE: "end of sequence",
    ACL_ERROR_RT_EVENT_NOT_COMPLETE: "event not complete",
    ACL_ERROR_RT_CONTEXT_RELEASE_ERROR: "context release failed",
    ACL_ERROR_RT_SOC_VERSION: "failed to get the SoC version",
    ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT: "task type not supported",
    ACL_ERROR_RT_LOST_HEARTBEAT: "task scheduler lost heartbeat",
    ACL_ERROR_RT_MODEL_EXECUTE: "model execution failed",
    ACL_ERROR_RT_REPORT_TIMEOUT: "timed out getting a task scheduler report",
    ACL_ERROR_RT_SYS_DMA: "system DMA error",
    ACL_ERROR_RT_AICORE_TIMEOUT: "AI Core execution timeout",
    ACL_ERROR_RT_AICORE_EXCEPTION: "AI Core execution exception",
    ACL_ERROR_RT_AICORE_TRAP_EXCEPTION: "AI Core trap exception",
    ACL_ERROR_RT_AICPU_TIMEOUT: "AI CPU execution timeout",
    ACL_ERROR_RT_AICPU_EXCEPTION: "AI CPU execution exception",
    ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR: "AI CPU sent no response after data dump",
    ACL_ERROR_RT_AICPU_MODEL_RSP_ERR: "AI CPU sent no response after a model operation",
    ACL_ERROR_RT_PROFILING_ERROR: "profiling error",
    ACL_ERROR_RT_IPC_ERROR: "inter-process communication error",
    ACL_ERROR_RT_MODEL_ABORT_NORMAL: "model aborted normally",
    ACL_ERROR_RT_KERNEL_UNREGISTERING: "kernel is being unregistered",
    ACL_ERROR_RT_RINGBUFFER_NOT_INIT: "ring buffer not initialized",
    ACL_ERROR_RT_RINGBUFFER_NO_DATA: "ring buffer has no data",
    ACL_ERROR_RT_KERNEL_LOOKUP: "kernel lookup failed: kernel not registered",
    ACL_ERROR_RT_KERNEL_DUPLICATE: "kernel registered twice",
    ACL_ERROR_RT_DEBUG_REGISTER_FAIL: "debug register failed",
    ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL: "debug unregister failed",
    ACL_ERROR_RT_LABEL_CONTEXT: "label is not in the current context",
    ACL_ERROR_RT_PROGRAM_USE_OUT: "too many registered programs",
    ACL_ERROR_RT_DEV_SETUP_ERROR: "device setup failed",
    ACL_ERROR_RT_VECTOR_CORE_TIMEOUT: "vector core execution timeout",
    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION: "vector core execution exception",
    ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION: "vector core trap exception",
    ACL_ERROR_RT_CDQ_BATCH_ABNORMAL: "internal runtime (CDQ) batch allocation abnormal",
    ACL_ERROR_RT_DIE_MODE_CHANGE_ERROR: "die mode cannot be changed",
    ACL_ERROR_RT_DIE_SET_ERROR: "a die cannot be chosen in single-die mode",
    ACL_ERROR_RT_INVALID_DIEID: "invalid die ID",
    ACL_ERROR_RT_DIE_MODE_NOT_SET: "die mode not set",
    ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW: "AI Core trap: out-of-bounds read",
    ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW: "AI Core trap: out-of-bounds write",
    ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW: "vector core trap: out-of-bounds read",
    ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW: "vector core trap: out-of-bounds write",
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: "stream synchronize timed out before all tasks finished",
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: "event synchronize timed out before the event completed",
    ACL_ERROR_RT_FFTS_PLUS_TIMEOUT: "internal (FFTS+) task timeout",
    ACL_ERROR_RT_FFTS_PLUS_EXCEPTION: "internal (FFTS+) task exception",
    ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION: "internal (FFTS+) task trap exception",
    ACL_ERROR_RT_SEND_MSG: "failed to send a message while enqueueing data",
    ACL_ERROR_RT_COPY_DATA: "failed to copy memory while enqueueing data",
    ACL_ERROR_RT_DEVICE_MEM_ERROR: "device memory uncorrectable error (UCE)",
    ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR: "HBM multi-bit ECC error",
    ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR: "suspected device memory error on a peer device",
    ACL_ERROR_RT_LINK_ERROR: "link between devices broken",
    ACL_ERROR_RT_SUSPECT_REMOTE_ERROR: "suspected remote memory fault or out-of-bounds access",
    ACL_ERROR_RT_DRV_INTERNAL_ERROR: "driver internal error",
    ACL_ERROR_RT_AICPU_INTERNAL_ERROR: "AI CPU internal error",
    ACL_ERROR_RT_SOCKET_CLOSE: "host-device communication (HDC) session disconnected",
    ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR: "AI CPU info load response error",
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED: "stream capture was invalidated",
    ACL_ERROR_RT_COMM_OP_RETRY_FAIL: "communication (HCCL) operator retry failed",
    ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT: "snapshot process lock timed out",
    ACL_ERROR_SNAPSHOT_LOCK_FAILED: "failed to lock the process for a snapshot",
    ACL_ERROR_SNAPSHOT_UNLOCK_FAILED: "failed to unlock the process after a snapshot",
    ACL_ERROR_SNAPSHOT_BACKUP_FAILED: "snapshot backup failed",
    ACL_ERROR_SNAPSHOT_RESTORE_FAILED: "snapshot restore failed",
    ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED: "host memory range already registered",
    ACL_ERROR_HOST_MEMORY_NOT_REGISTERED: "host memory has not been registered",
    ACL_ERROR_SNAPSHOT_CALLBACK_FAILED: "snapshot callback function failed",
    ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED: "failed to register a snapshot callback",
    ACL_ERROR_RT_L3_PORT_ERROR: "L3 port error",
    ACL_ERROR_RT_CCU_TIMEOUT: "CCU execution timeout",
    ACL_ERROR_RT_CCU_EXCEPTION: "CCU execution exception",
    # GE pass-through
    ACL_ERROR_GE_PARAM_INVALID: "GE parameter check failed",
    ACL_ERROR_GE_EXEC_NOT_INIT: "GE not initialized",
    ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID: "invalid model path",
    ACL_ERROR_GE_EXEC_MODEL_ID_INVALID: "invalid model ID",
    ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID: "invalid model data size",
    ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID: "invalid model memory address",
    ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID: "invalid model queue ID",
    ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED: "model loaded or initialized twice",
    ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID: "invalid dynamic-batch input address",
    ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID: "invalid dynamic-batch input length",
    ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID: "invalid dynamic batch size",
    ACL_ERROR_GE_AIPP_BATCH_EMPTY: "invalid AIPP batch size",
    ACL_ERROR_GE_AIPP_NOT_EXIST: "AIPP configuration does not exist",
    ACL_ERROR_GE_AIPP_MODE_INVALID: "invalid AIPP mode",
    ACL_ERROR_GE_OP_TASK_TYPE_INVALID: "invalid task type",
    ACL_ERROR_GE_OP_KERNEL_TYPE_INVALID: "invalid operator kernel type",
    ACL_ERROR_GE_PLGMGR_PATH_INVALID: "invalid shared library (path too deep or missing)",
    ACL_ERROR_GE_FORMAT_INVALID: "invalid tensor format",
    ACL_ERROR_GE_SHAPE_INVALID: "invalid tensor shape",
    ACL_ERROR_GE_DATATYPE_INVALID: "invalid tensor data type",
    ACL_ERROR_GE_MEMORY_ALLOCATION: "GE memory allocation failed",
    ACL_ERROR_GE_MEMORY_OPERATE_FAILED: "memory initialization or copy failed",
    ACL_ERROR_GE_DEVICE_MEMORY_OPERATE_FAILED: "device memory allocation failed",
    ACL_ERROR_GE_SUBHEALTHY: "sub-healthy state after a redeployment",
    ACL_ERROR_GE_USER_RAISE_EXCEPTION: "a user-defined function raised an exception",
    ACL_ERROR_GE_DATA_NOT_ALIGNED: "data not aligned",
    ACL_ERROR_GE_INTERNAL_ERROR: "GE unknown internal error",
    ACL_ERROR_GE_LOAD_MODEL: "internal model load failed",
    ACL_ERROR_GE_EXEC_LOAD_MODEL_PARTITION_FAILED: "failed to load the model partition",
    ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED: "failed to load the model weights",
    ACL_ERROR_GE_EXEC_LOAD_TASK_PARTITION_FAILED: "failed to load the model tasks",
    ACL_ERROR_GE_EXEC_LOAD_KERNEL_PARTITION_FAILED: "failed to load the model kernels",
    ACL_ERROR_GE_EXEC_RELEASE_MODEL_DATA: "failed to release model memory",
    ACL_ERROR_GE_COMMAND_HANDLE: "internal command failed",
    ACL_ERROR_GE_GET_TENSOR_INFO: "failed to get tensor information",
    ACL_ERROR_GE_UNLOAD_MODEL: "failed to unload the model",
    ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT: "model execution timed out",
    ACL_ERROR_GE_REDEPLOYING: "redeployment in progress",
    # aclnn
    ACLNN_ERR_PARAM_NULLPTR: "parameter check failed: an argument is an invalid null pointer",
    ACLNN_ERR_PARAM_INVALID: "parameter check failed: invalid dtype, shape, format or attribute",
    ACLNN_ERR_RUNTIME_ERROR: "an internal call to the NPU runtime failed",
    ACLNN_ERR_INNER: "aclnn internal error",
    ACLNN_ERR_INNER_INFERSHAPE_ERROR: "aclnn internal error: output shape inference failed",
    ACLNN_ERR_INNER_TILING_ERROR: "aclnn internal error: kernel tiling failed",
    ACLNN_ERR_INNER_FIND_KERNEL_ERROR: "aclnn internal error: kernel not found",
    ACLNN_ERR_INNER_CREATE_EXECUTOR: "aclnn internal error: failed to create the aclOpExecutor",
    ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR: "aclnn internal error: executor was not released to caller",
    ACLNN_ERR_INNER_NULLPTR: "aclnn internal error: null pointer access",
    ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE: "aclnn internal error: wrong number of attributes",
    ACLNN_ERR_INNER_KEY_CONFLICT: "aclnn internal error: kernel-matching hash key conflict",
    ACLNN_ERR_INNER_INVALID_IMPL_MODE: "aclnn internal error: invalid implementation mode",
    ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND: "aclnn internal error: ASCEND_OPP_PATH not found",
    ACLNN_ERR_INNER_LOAD_JSON_FAILED: "aclnn internal error: failed to load operator info JSON",
    ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND: "aclnn internal error: field missing in operator JSON",
    ACLNN_ERR_INNER_JSON_FORMAT_INVALID: "aclnn internal error: invalid format in operator JSON",
    ACLNN_ERR_INNER_JSON_DTYPE_INVALID: "aclnn internal error: invalid dtype in operator JSON",
    ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND: "aclnn internal error: kernel package not loaded",
    ACLNN_ERR_INNER_OP_FILE_INVALID: "aclnn internal error: failed to load operator JSON fields",
    ACLNN_ERR_INNER_ATTR_NUM_OUT_OF_BOUND: "aclnn internal error: more attributes than the JSON",
    ACLNN_ERR_INNER_ATTR_LEN_NOT_ENOUGH: "aclnn internal error: fewer attributes than the JSON",
    ACLNN_ERR_INNER_INPUT_NUM_IN_JSON_TOO_LARGE: "aclnn internal error: more than 32 inputs",
    ACLNN_ERR_INNER_INPUT_JSON_IS_NULL: "aclnn internal error: operator info JSON incomplete",
    ACLNN_ERR_INNER_STATIC_WORKSPACE_INVALID: "aclnn internal error: bad static workspace info",
    ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID: "aclnn internal error: bad static block dim info",
}


def _names_by_code() -> dict[int, str]:
    """Map each code to the first constant defined for it above (the current CANN name)."""
    names: dict[int, str] = {}
    for name, value in globals().items():
        if name.startswith(("ACL_", "ACLNN_")) and type(value) is int:
            names.setdefault(value, name)
    return names


ERROR_TABLE: dict[int, tuple[str, str]] = {
    code: (name, _MEANINGS[code]) for code, name in sorted(_names_by_code().items())
}

_UNKNOWN_NAME = "ACL_ERROR_UNKNOWN"
_MAX_VALUE_REPR = 200  # longest repr of a bad value quoted in a message, characters


def _as_code(code: Any) -> int | None:
    """The integer value of ``code`` (int, numpy integer, IntEnum), or None; never raises."""
    if isinstance(code, bool):
        return None
    try:
        return operator.index(code)
    except Exception:  # noqa: BLE001 - a broken __index__ must not break error reporting
        return None


def _entry(code: Any) -> tuple[str, str] | None:
    number = _as_code(code)
    return None if number is None else ERROR_TABLE.get(number)


def error_name(code: int) -> str:
    """CANN's name for ``code``, or ``ACL_ERROR_UNKNOWN(<code>)`` when it has none; never raises."""
    entry = _entry(code)
    if entry is not None:
        return entry[0]
    number = _as_code(code)
    return f"{_UNKNOWN_NAME}({_short_repr(code) if number is None else number})"


def error_meaning(code: int) -> str:
    """A one-line English meaning of ``code`` ("unknown error code" when it has none)."""
    entry = _entry(code)
    return "unknown error code" if entry is None else entry[1]


def _short_repr(value: Any) -> str:
    """repr(value), cut to a readable length; never raises."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} object>"
    if len(text) > _MAX_VALUE_REPR:
        text = text[: _MAX_VALUE_REPR - 3] + "..."
    return text


# ---------------------------------------------------------------------------------------------
# Per-thread recent error message (aclGetRecentErrMsg)
# ---------------------------------------------------------------------------------------------
_recent = threading.local()


def set_recent_err_msg(message: str) -> None:
    """Record ``message`` as the calling thread's most recent error message."""
    _recent.message = str(message)


def get_recent_err_msg() -> str | None:
    """Return and clear the calling thread's most recent error message (None if none).

    Like ``aclGetRecentErrMsg``: each thread sees only its own errors, and a message is
    returned once.
    """
    message = getattr(_recent, "message", None)
    _recent.message = None
    return message


_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def public(fn: _Fn) -> _Fn:
    """``fn`` as a public function of the Pythonic face: an ``AclError`` that propagates out
    of it records its message as the thread's recent error, unless ``fn`` was called by
    another public function (that one records, if the error leaves it too)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_recent, "depth", 0)
        _recent.depth = depth + 1
        try:
            return fn(*args, **kwargs)
        except AclError as exc:
            if depth == 0:
                set_recent_err_msg(str(exc))
            raise
        finally:
            _recent.depth = depth
    wrapper.__openacl_public__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def expose(namespace: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Make the plain functions among ``names`` in ``namespace`` (a module's globals)
    ``public``, in place; classes, constants and already public functions are left."""
    for name in names:
        value = namespace.get(name)
        if isinstance(value, types.FunctionType) and \
                not getattr(value, "__openacl_public__", False):
            namespace[name] = public(value)


# ---------------------------------------------------------------------------------------------
# The exception
# ---------------------------------------------------------------------------------------------
def _rebuild_acl_error(cls: type[AclError], code: int, message: str) -> AclError:
    """Unpickle an AclError with its code, message and attributes, as it was."""
    error = cls.__new__(cls, code, message)
    error._set_fields(code, message)
    return error


class AclError(Exception):
    """An ACL error: ``code`` (the ACL/runtime/aclnn number), ``name`` and ``message``.

    Building one records nothing: the message becomes the thread's recent error where the
    error leaves the API (see the module docstring: ``public``, and the compat face).
    """

    code: int
    name: str
    message: str

    def __init__(self, code: int, message: str) -> None:
        self._set_fields(code, message)

    def _set_fields(self, code: int, message: str) -> None:
        number = _as_code(code)
        self.code = number if number is not None else code
        self.name = error_name(self.code)
        self.message = str(message)
        self.args = (self.code, self.message)

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_acl_error, (type(self), self.code, self.message), self.__dict__.copy())


def invalid_param(
    argument: str, value: Any, reason: str, code: int = ACL_ERROR_INVALID_PARAM
) -> AclError:
    """Build (not raise) an AclError naming the argument, its value and why it is wrong.

    Example: ``invalid_param("size", 0, "size must be > 0")`` reads
    ``argument 'size' = 0 is invalid: size must be > 0``.
    """
    return AclError(code, f"argument {argument!r} = {_short_repr(value)} is invalid: {reason}")


# ---------------------------------------------------------------------------------------------
# hccl/hccl_types.h: HcclResult, the return codes of the HCCL functions (openacl.hccl)
# ---------------------------------------------------------------------------------------------
# Values and names from ``HcclResult`` in hicann/hccl ``docs/api/context/HcclResult.md`` and
# Ascend/pytorch ``third_party/hccl/inc/hccl/hccl_types.h`` (which stops at HCCL_E_REMOTE).
# They are a separate number space from the ACL codes above (HCCL_E_PARA is 1), so they are
# kept out of ``ERROR_TABLE``: ``hccl_result_name`` and ``HCCL_RESULT_TABLE`` describe them.
HCCL_SUCCESS = 0
HCCL_E_PARA = 1
HCCL_E_PTR = 2
HCCL_E_MEMORY = 3
HCCL_E_INTERNAL = 4
HCCL_E_NOT_SUPPORT = 5
HCCL_E_NOT_FOUND = 6
HCCL_E_UNAVAIL = 7
HCCL_E_SYSCALL = 8
HCCL_E_TIMEOUT = 9
HCCL_E_OPEN_FILE_FAILURE = 10
HCCL_E_TCP_CONNECT = 11
HCCL_E_ROCE_CONNECT = 12
HCCL_E_TCP_TRANSFER = 13
HCCL_E_ROCE_TRANSFER = 14
HCCL_E_RUNTIME = 15
HCCL_E_DRV = 16
HCCL_E_PROFILING = 17
HCCL_E_CCE = 18
HCCL_E_NETWORK = 19
HCCL_E_AGAIN = 20
HCCL_E_REMOTE = 21
HCCL_E_SUSPENDING = 22

HCCL_RESULT_TABLE: dict[int, tuple[str, str]] = {
    HCCL_SUCCESS: ("HCCL_SUCCESS", "success"),
    HCCL_E_PARA: ("HCCL_E_PARA", "parameter error"),
    HCCL_E_PTR: ("HCCL_E_PTR", "empty (null) pointer"),
    HCCL_E_MEMORY: ("HCCL_E_MEMORY", "memory error"),
    HCCL_E_INTERNAL: ("HCCL_E_INTERNAL", "internal error"),
    HCCL_E_NOT_SUPPORT: ("HCCL_E_NOT_SUPPORT", "feature not supported"),
    HCCL_E_NOT_FOUND: ("HCCL_E_NOT_FOUND", "specific resource not found"),
    HCCL_E_UNAVAIL: ("HCCL_E_UNAVAIL", "resource unavailable"),
    HCCL_E_SYSCALL: ("HCCL_E_SYSCALL", "a system call failed"),
    HCCL_E_TIMEOUT: ("HCCL_E_TIMEOUT", "timeout"),
    HCCL_E_OPEN_FILE_FAILURE: ("HCCL_E_OPEN_FILE_FAILURE", "failed to open a file"),
    HCCL_E_TCP_CONNECT: ("HCCL_E_TCP_CONNECT", "TCP connect failed"),
    HCCL_E_ROCE_CONNECT: ("HCCL_E_ROCE_CONNECT", "RoCE connect failed"),
    HCCL_E_TCP_TRANSFER: ("HCCL_E_TCP_TRANSFER", "TCP transfer failed"),
    HCCL_E_ROCE_TRANSFER: ("HCCL_E_ROCE_TRANSFER", "RoCE transfer failed"),
    HCCL_E_RUNTIME: ("HCCL_E_RUNTIME", "a runtime API call failed"),
    HCCL_E_DRV: ("HCCL_E_DRV", "a driver API call failed"),
    HCCL_E_PROFILING: ("HCCL_E_PROFILING", "a profiling API call failed"),
    HCCL_E_CCE: ("HCCL_E_CCE", "a CCE API call failed"),
    HCCL_E_NETWORK: ("HCCL_E_NETWORK", "a network API call failed"),
    HCCL_E_AGAIN: ("HCCL_E_AGAIN", "try again"),
    HCCL_E_REMOTE: ("HCCL_E_REMOTE", "remote error (error CQE)"),
    HCCL_E_SUSPENDING: ("HCCL_E_SUSPENDING", "the communicator is suspending"),
}


def hccl_result_name(code: int) -> str:
    """HCCL's name for an ``HcclResult`` value, or ``HCCL_E_UNKNOWN(<code>)``; never raises."""
    number = _as_code(code)
    entry = None if number is None else HCCL_RESULT_TABLE.get(number)
    return entry[0] if entry is not None else f"HCCL_E_UNKNOWN({_short_repr(code)})"

# the codes (ACL_*, ACLNN_*, HCCL_*), the error type and the recent-message functions;
# ``public`` / ``expose`` / ``invalid_param`` are the package's own helpers
__all__ = [
    "AclError", "ERROR_TABLE", "error_name", "error_meaning", "hccl_result_name",
    "get_recent_err_msg", "set_recent_err_msg",
    *sorted(name for name, value in globals().items()
            if name.startswith(("ACL_", "ACLNN_", "HCCL_")) and isinstance(value, int)),
]


def __dir__() -> list[str]:
    """The chosen names and the dunders (openacl._api.module_dir's rule; this module
    imports nothing of the package)."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
