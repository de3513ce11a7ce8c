"""The C prototypes this binding calls, as data: ``{name: (role, restype, argtypes)}``, each with its C declaration
beside it (cann-abi.md §1.1, §1.2; typedefs §2).

*role* names the library that exports it: ``"runtime"`` (libascendcl.so or libacl_rt.so), ``"nnopbase"`` or
``"opapi"`` (the operator libraries).  ``OPTIONAL``: probed, never required; ``SIM_ONLY``: the simulator's extras.
An operator package declares its own two phases (:class:`acl_bindings.TwoPhaseOp`).
"""

from __future__ import annotations

from ctypes import POINTER, c_char_p, c_float, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any

from ._types import (
    aclError,
    aclIntArray_p,
    aclnnStatus,
    aclOpExecutor_p,
    aclrtContext,
    aclrtEvent,
    aclrtStream,
    aclTensor_p,
    c_enum,
    c_int_result,
    c_str,
)

__all__ = ["PROTOTYPES", "OPTIONAL", "HOLDS_GIL", "SIM_ONLY", "Prototype", "two_phase_prototypes"]

Prototype = tuple[str, Any, tuple[Any, ...]]

_P = POINTER

PROTOTYPES: dict[str, Prototype] = {
    # ---------------------------------------------------------------- init, errors
    # aclError aclInit(const char *configPath);
    "aclInit": ("runtime", aclError, (c_char_p,)),
    # aclError aclFinalize(void);
    "aclFinalize": ("runtime", aclError, ()),
    # aclError aclFinalizeReference(uint64_t *refCount);
    "aclFinalizeReference": ("runtime", aclError, (_P(c_uint64),)),
    # const char *aclGetRecentErrMsg(void);
    "aclGetRecentErrMsg": ("runtime", c_str, ()),
    # ---------------------------------------------------------------- devices
    # aclError aclrtSetDevice(int32_t deviceId);
    "aclrtSetDevice": ("runtime", aclError, (c_int32,)),
    # aclError aclrtResetDevice(int32_t deviceId);
    "aclrtResetDevice": ("runtime", aclError, (c_int32,)),
    # aclError aclrtGetDevice(int32_t *deviceId);
    "aclrtGetDevice": ("runtime", aclError, (_P(c_int32),)),
    # aclError aclrtGetDeviceCount(uint32_t *count);
    "aclrtGetDeviceCount": ("runtime", aclError, (_P(c_uint32),)),
    # const char *aclrtGetSocName(void);
    "aclrtGetSocName": ("runtime", c_str, ()),
    # aclError aclrtSynchronizeDevice(void);
    "aclrtSynchronizeDevice": ("runtime", aclError, ()),
    # ---------------------------------------------------------------- contexts
    # aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
    "aclrtCreateContext": ("runtime", aclError, (_P(aclrtContext), c_int32)),
    # aclError aclrtDestroyContext(aclrtContext context);
    "aclrtDestroyContext": ("runtime", aclError, (aclrtContext,)),
    # aclError aclrtSetCurrentContext(aclrtContext context);
    "aclrtSetCurrentContext": ("runtime", aclError, (aclrtContext,)),
    # aclError aclrtGetCurrentContext(aclrtContext *context);
    "aclrtGetCurrentContext": ("runtime", aclError, (_P(aclrtContext),)),
    # ---------------------------------------------------------------- streams
    # aclError aclrtCreateStream(aclrtStream *stream);
    "aclrtCreateStream": ("runtime", aclError, (_P(aclrtStream),)),
    # aclError aclrtDestroyStream(aclrtStream stream);
    "aclrtDestroyStream": ("runtime", aclError, (aclrtStream,)),
    # aclError aclrtSynchronizeStream(aclrtStream stream);
    "aclrtSynchronizeStream": ("runtime", aclError, (aclrtStream,)),
    # aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);  /* ms; -1 infinite */
    "aclrtSynchronizeStreamWithTimeout": ("runtime", aclError, (aclrtStream, c_int32)),
    # ---------------------------------------------------------------- memory
    # aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
    "aclrtMalloc": ("runtime", aclError, (_P(c_void_p), c_size_t, c_enum)),
    # aclError aclrtFree(void *devPtr);
    "aclrtFree": ("runtime", aclError, (c_void_p,)),
    # aclError aclrtMallocHost(void **hostPtr, size_t size);
    "aclrtMallocHost": ("runtime", aclError, (_P(c_void_p), c_size_t)),
    # aclError aclrtFreeHost(void *hostPtr);
    "aclrtFreeHost": ("runtime", aclError, (c_void_p,)),
    # aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
    "aclrtMemcpy": ("runtime", aclError, (c_void_p, c_size_t, c_void_p, c_size_t, c_enum)),
    # aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
    #                           aclrtMemcpyKind kind, aclrtStream stream);
    "aclrtMemcpyAsync": ("runtime", aclError, (c_void_p, c_size_t, c_void_p, c_size_t, c_enum, aclrtStream)),
    # aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
    "aclrtMemset": ("runtime", aclError, (c_void_p, c_size_t, c_int32, c_size_t)),
    # aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);
    "aclrtMemsetAsync": ("runtime", aclError, (c_void_p, c_size_t, c_int32, c_size_t, aclrtStream)),
    # aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);
    "aclrtGetMemInfo": ("runtime", aclError, (c_enum, _P(c_size_t), _P(c_size_t))),
    # ---------------------------------------------------------------- events
    # aclError aclrtCreateEvent(aclrtEvent *event);
    "aclrtCreateEvent": ("runtime", aclError, (_P(aclrtEvent),)),
    # aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
    "aclrtRecordEvent": ("runtime", aclError, (aclrtEvent, aclrtStream)),
    # aclError aclrtSynchronizeEvent(aclrtEvent event);
    "aclrtSynchronizeEvent": ("runtime", aclError, (aclrtEvent,)),
    # aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
    "aclrtStreamWaitEvent": ("runtime", aclError, (aclrtStream, aclrtEvent)),
    # aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
    "aclrtStreamQuery": ("runtime", aclError, (aclrtStream, _P(c_enum))),
    # aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
    "aclrtQueryEventStatus": ("runtime", aclError, (aclrtEvent, _P(c_enum))),
    # aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);
    "aclrtEventElapsedTime": ("runtime", aclError, (_P(c_float), aclrtEvent, aclrtEvent)),
    # aclError aclrtDestroyEvent(aclrtEvent event);
    "aclrtDestroyEvent": ("runtime", aclError, (aclrtEvent,)),
    # ---------------------------------------------------------------- versions (probed)
    # aclError aclsysGetVersionStr(char *pkgName, char *versionStr);   /* versionStr: 128-byte buffer */
    "aclsysGetVersionStr": ("runtime", aclError, (c_char_p, c_char_p)),
    # aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion *version);  /* 512-byte struct */
    "aclsysGetCANNVersion": ("runtime", aclError, (c_enum, c_void_p)),
    # aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);
    "aclrtGetVersion": ("runtime", aclError, (_P(c_int32), _P(c_int32), _P(c_int32))),
    # ---------------------------------------------------------------- meta (nnopbase)
    # aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
    #                            const int64_t *stride, int64_t offset, aclFormat format,
    #                            const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData);
    "aclCreateTensor": ("nnopbase", aclTensor_p,
                        (_P(c_int64), c_uint64, c_enum, _P(c_int64), c_int64, c_enum, _P(c_int64), c_uint64,
                         c_void_p)),
    # aclnnStatus aclDestroyTensor(const aclTensor *tensor);
    "aclDestroyTensor": ("nnopbase", aclnnStatus, (aclTensor_p,)),
    # aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
    "aclCreateIntArray": ("nnopbase", aclIntArray_p, (_P(c_int64), c_uint64)),
    # aclnnStatus aclDestroyIntArray(const aclIntArray *array);
    "aclDestroyIntArray": ("nnopbase", aclnnStatus, (aclIntArray_p,)),
    # ---------------------------------------------------------------- executors (nnopbase)
    # aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor);
    "aclSetAclOpExecutorRepeatable": ("nnopbase", aclnnStatus, (aclOpExecutor_p,)),
    # aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);
    "aclDestroyAclOpExecutor": ("nnopbase", aclnnStatus, (aclOpExecutor_p,)),
    # aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr);
    "aclSetInputTensorAddr": ("nnopbase", aclnnStatus, (aclOpExecutor_p, c_size_t, aclTensor_p, c_void_p)),
    # aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr);
    "aclSetOutputTensorAddr": ("nnopbase", aclnnStatus, (aclOpExecutor_p, c_size_t, aclTensor_p, c_void_p)),
}

#: Functions that may be absent from a given CANN release; bound only when present.
OPTIONAL: frozenset[str] = frozenset({"aclsysGetVersionStr", "aclsysGetCANNVersion", "aclrtGetVersion",
                                      "aclFinalizeReference"})

#: Functions that only read or write host-side metadata and never wait for the device: they are called
#: with the GIL held (releasing and taking it again costs about as much as the call itself).
HOLDS_GIL: frozenset[str] = frozenset({
    "aclGetRecentErrMsg", "aclrtGetCurrentContext", "aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray",
    "aclDestroyIntArray", "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclSetAclOpExecutorRepeatable",
    "aclDestroyAclOpExecutor"})

#: Symbols exported by the simulator alone (never by real CANN), from its runtime and nnopbase libraries.
SIM_ONLY: dict[str, Prototype] = {
    # const char *cannsimVersion(void);
    "cannsimVersion": ("runtime", c_str, ()),
    # int64_t cannsimLiveHandles(const char *kind);
    "cannsimLiveHandles": ("runtime", c_int64, (c_char_p,)),
    # int64_t cannsimCallCount(const char *func);
    "cannsimCallCount": ("runtime", c_int64, (c_char_p,)),
    # int cannsimSetFault(const char *spec);   /* "func:nth:code[,...]"; NULL or "" clears */
    "cannsimSetFault": ("runtime", aclError, (c_char_p,)),
    # int cannsimSetDefer(int on);             /* returns the previous setting */
    "cannsimSetDefer": ("runtime", c_int_result, (c_int32,)),
    # int cannsimSetDelay(int ms);             /* extra ms per kernel run */
    "cannsimSetDelay": ("runtime", c_int_result, (c_int32,)),
    # int cannsimSetOpCache(int on);           /* nnopbase's op cache on/off; returns the previous setting */
    "cannsimSetOpCache": ("nnopbase", c_int_result, (c_int32,)),
    # int64_t cannsimOpCacheEntries(void);     /* entries in the op cache, all threads */
    "cannsimOpCacheEntries": ("nnopbase", c_int64, ()),
    # int cannsimSetRepeatable(int on);        /* whether executors may be made repeatable; returns the previous */
    "cannsimSetRepeatable": ("nnopbase", c_int_result, (c_int32,)),
    # int cannsimSetStreamMode(int mode);      /* 0 async, 1 deferred, 2 sync; returns the previous, -1 if bad */
    "cannsimSetStreamMode": ("runtime", c_int_result, (c_int32,)),
    # int cannsimWorkerThreads(void);          /* stream worker threads running now */
    "cannsimWorkerThreads": ("runtime", c_int_result, ()),
}


def two_phase_prototypes(op: str, phase1_args: tuple[Any, ...]) -> dict[str, Prototype]:
    """Prototypes of an aclnn operator's two phases.

    ``aclnnStatus aclnn<op>GetWorkspaceSize(<phase1_args>..., uint64_t *workspaceSize, aclOpExecutor **executor);``
    ``aclnnStatus aclnn<op>(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);``
    """
    return {
        f"aclnn{op}GetWorkspaceSize": ("opapi", aclnnStatus,
                                       (*phase1_args, _P(c_uint64), _P(aclOpExecutor_p))),
        f"aclnn{op}": ("opapi", aclnnStatus, (c_void_p, c_uint64, aclOpExecutor_p, aclrtStream)),
    }

