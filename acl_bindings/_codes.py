"""Status codes of the CANN runtime and of aclnn: ``{code: (NAME, explanation)}``, from cann-abi.md §3.4, §3.5
(docs/design.md, "The raw functions"); the explanations are our own wording."""

from __future__ import annotations

CODES: dict[int, tuple[str, str]] = {
    0: ("ACL_SUCCESS", "success"),
    # --- aclError 1000xx: parameter and state errors -----------------------
    100000: ("ACL_ERROR_INVALID_PARAM", "a parameter is invalid"),
    100001: ("ACL_ERROR_UNINITIALIZE", "ACL is not initialised (aclInit was not called)"),
    100002: ("ACL_ERROR_REPEAT_INITIALIZE", "aclInit was already called in this process"),
    100003: ("ACL_ERROR_INVALID_FILE", "a file is invalid"),
    100024: ("ACL_ERROR_OP_NOT_FOUND", "the operator was not found"),
    100025: ("ACL_ERROR_OP_LOAD_FAILED", "the operator could not be loaded"),
    100026: ("ACL_ERROR_UNSUPPORTED_DATA_TYPE", "the data type is not supported"),
    100027: ("ACL_ERROR_FORMAT_NOT_MATCH", "the format does not match"),
    100037: ("ACL_ERROR_REPEAT_FINALIZE", "aclFinalize was already called, or aclInit never was"),
    148049: ("ACL_ERROR_INVALID_OPP_PATH", "the operator package path is invalid"),
    # --- aclError 2000xx: resources ---------------------------------------
    200000: ("ACL_ERROR_BAD_ALLOC", "memory allocation failed"),
    200001: ("ACL_ERROR_API_NOT_SUPPORT", "this API is not supported"),
    200002: ("ACL_ERROR_INVALID_DEVICE", "the device is invalid"),
    200003: ("ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "the memory address is not aligned"),
    200004: ("ACL_ERROR_RESOURCE_NOT_MATCH", "the resources do not match"),
    200005: ("ACL_ERROR_INVALID_RESOURCE_HANDLE", "the resource handle is invalid"),
    200006: ("ACL_ERROR_FEATURE_UNSUPPORTED", "the feature is not supported"),
    300000: ("ACL_ERROR_STORAGE_OVER_LIMIT", "storage is over its limit"),
    # --- aclError 5000xx: internal ----------------------------------------
    500000: ("ACL_ERROR_INTERNAL_ERROR", "internal error"),
    500001: ("ACL_ERROR_FAILURE", "generic failure"),
    500002: ("ACL_ERROR_GE_FAILURE", "graph engine failure"),
    500003: ("ACL_ERROR_RT_FAILURE", "runtime failure"),
    500004: ("ACL_ERROR_DRV_FAILURE", "driver failure"),
    500005: ("ACL_ERROR_PROFILING_FAILURE", "profiling failure"),
    # --- runtime 1070xx: parameters and state -----------------------------
    107000: ("ACL_ERROR_RT_PARAM_INVALID", "a runtime parameter is invalid"),
    107001: ("ACL_ERROR_RT_INVALID_DEVICEID", "the device id is invalid"),
    107002: ("ACL_ERROR_RT_CONTEXT_NULL",
             "no context is current on this thread: call aclrtSetDevice or aclrtSetCurrentContext first"),
    107003: ("ACL_ERROR_RT_STREAM_CONTEXT", "the stream does not belong to the current context"),
    107019: ("ACL_ERROR_RT_WAIT_TIMEOUT", "a wait timed out"),
    107020: ("ACL_ERROR_RT_TASK_TIMEOUT", "a task timed out"),
    # --- runtime 2070xx: resources -----------------------------------------
    207000: ("ACL_ERROR_RT_FEATURE_NOT_SUPPORT", "the runtime does not support this feature"),
    207001: ("ACL_ERROR_RT_MEMORY_ALLOCATION", "device memory allocation failed"),
    207002: ("ACL_ERROR_RT_MEMORY_FREE", "device memory could not be freed"),
    207003: ("ACL_ERROR_RT_AICORE_OVER_FLOW", "AI Core overflow"),
    207004: ("ACL_ERROR_RT_NO_DEVICE", "no device is available"),
    207005: ("ACL_ERROR_RT_RESOURCE_ALLOC_FAIL", "a runtime resource could not be allocated"),
    207006: ("ACL_ERROR_RT_NO_PERMISSION", "no permission"),
    207018: ("ACL_ERROR_RT_DEVICE_OOM", "the device is out of memory"),
    # --- runtime 5070xx: device faults -------------------------------------
    507000: ("ACL_ERROR_RT_INTERNAL_ERROR", "runtime internal error"),
    507001: ("ACL_ERROR_RT_TS_ERROR", "task scheduler error"),
    507002: ("ACL_ERROR_RT_STREAM_TASK_FULL", "the stream's task queue is full"),
    507014: ("ACL_ERROR_RT_AICORE_TIMEOUT", "AI Core timeout"),
    507015: ("ACL_ERROR_RT_AICORE_EXCEPTION", "AI Core exception"),
    507016: ("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", "AI Core trap exception"),
    507034: ("ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", "vector core timeout"),
    507035: ("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "vector core exception"),
    507046: ("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", "stream synchronisation timed out"),
    507047: ("ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", "event synchronisation timed out"),
    507053: ("ACL_ERROR_RT_DEVICE_MEM_ERROR", "device memory error"),
    507899: ("ACL_ERROR_RT_DRV_INTERNAL_ERROR", "driver internal error"),
    507900: ("ACL_ERROR_RT_AICPU_INTERNAL_ERROR", "AI CPU internal error"),
    507901: ("ACL_ERROR_RT_SOCKET_CLOSE", "socket closed"),
    # --- aclnn --------------------------------------------------------------
    161001: ("ACLNN_ERR_PARAM_NULLPTR", "a required argument is a null pointer"),
    161002: ("ACLNN_ERR_PARAM_INVALID", "an argument is invalid (dtype, shape, size or scale)"),
    361001: ("ACLNN_ERR_RUNTIME_ERROR", "a runtime call inside aclnn failed"),
    561000: ("ACLNN_ERR_INNER", "aclnn internal error"),
    561001: ("ACLNN_ERR_INNER_INFERSHAPE_ERROR", "shape inference failed"),
    561002: ("ACLNN_ERR_INNER_TILING_ERROR", "tiling failed"),
    561003: ("ACLNN_ERR_INNER_FIND_KERNEL_ERROR",
             "no kernel was found: the operator binary package is possibly not installed"),
    561101: ("ACLNN_ERR_INNER_CREATE_EXECUTOR", "the executor could not be created"),
    561102: ("ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR", "the executor was not transferred"),
    561103: ("ACLNN_ERR_INNER_NULLPTR", "an internal pointer is null (often exhausted pools or leaked handles)"),
    561104: ("ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE", "wrong attribute info size"),
    561105: ("ACLNN_ERR_INNER_KEY_CONFLICT", "key conflict"),
    561106: ("ACLNN_ERR_INNER_INVALID_IMPL_MODE", "invalid implementation mode"),
    561107: ("ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND", "ASCEND_OPP_PATH is not set: source set_env.sh"),
    561108: ("ACLNN_ERR_INNER_LOAD_JSON_FAILED", "an operator JSON file could not be loaded"),
    561109: ("ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND", "a value is missing from an operator JSON file"),
    561110: ("ACLNN_ERR_INNER_JSON_FORMAT_INVALID", "an operator JSON file has an invalid format"),
    561111: ("ACLNN_ERR_INNER_JSON_DTYPE_INVALID", "an operator JSON file has an invalid dtype"),
    561112: ("ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND", "the operator kernel package was not found"),
    561113: ("ACLNN_ERR_INNER_OP_FILE_INVALID", "an operator file is invalid"),
    561114: ("ACLNN_ERR_INNER_ATTR_NUM_OUT_OF_BOUND", "attribute count out of bounds"),
    561115: ("ACLNN_ERR_INNER_ATTR_LEN_NOT_ENOUGH", "attribute length too short"),
    561116: ("ACLNN_ERR_INNER_INPUT_NUM_IN_JSON_TOO_LARGE", "too many inputs in an operator JSON file"),
    561117: ("ACLNN_ERR_INNER_INPUT_JSON_IS_NULL", "an operator input JSON is null"),
    561118: ("ACLNN_ERR_INNER_STATIC_WORKSPACE_INVALID", "invalid static workspace"),
    561119: ("ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID", "invalid static block dim"),
    # --- the CPU simulator's own code (never returned by CANN) ---------------
    990101: ("CANNSIM_ERR_STALE_HANDLE",
             "simulator-only: the device would silently use freed or stale memory here (a handle destroyed "
             "between the phases, or an address an op-cache wrapper would ignore)"),
    908401: ("CANNSIM_ERR_QUEUED_WORK",
             "simulator only: memory that queued stream work uses was freed or overwritten, or memory it writes "
             "was read, before that work completed (by a host call, or by work on another stream; a device "
             "corrupts it silently): synchronise the stream first"),
    908402: ("CANNSIM_ERR_OTHER_DEVICE",
             "simulator only: device memory of another device than the one the call runs on (a kernel or copy "
             "there would fault or use another device's memory): make that device's context current"),
}

#: Codes named by constant, for readable comparisons.
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACLNN_ERR_INNER_NULLPTR = 561103
#: The simulator's own codes (acl_bindings/sim/src/cannsim.h), explained in :data:`CODES`.
CANNSIM_ERR_STALE_HANDLE = 990101
CANNSIM_ERR_QUEUED_WORK = 908401
CANNSIM_ERR_OTHER_DEVICE = 908402

#: ``(NAME, explanation)`` of an unlisted code, by its family (``code // 1000``).
_FAMILIES = {
    100: ("ACL_ERROR_<1000xx>", "an ACL parameter or state error"),
    200: ("ACL_ERROR_<2000xx>", "an ACL resource error"),
    500: ("ACL_ERROR_<5000xx>", "an ACL internal error"),
    107: ("ACL_ERROR_RT_<1070xx>", "a runtime parameter or state error"),
    207: ("ACL_ERROR_RT_<2070xx>", "a runtime resource error"),
    507: ("ACL_ERROR_RT_<5070xx>", "a device or runtime fault"),
    561: ("ACLNN_ERR_INNER_<561xxx>", "an aclnn internal error"),
}


def describe(code: int) -> tuple[str, str]:
    """Return ``(NAME, explanation)`` for *code*, with a family fallback for unlisted codes."""
    return CODES.get(code) or _FAMILIES.get(code // 1000, ("UNKNOWN", "an error code not in the table"))
