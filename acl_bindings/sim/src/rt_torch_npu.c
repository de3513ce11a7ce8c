/*
 * rt_torch_npu.c - the runtime functions torch_npu 2.13.0 needs beyond the ones this package uses (built
 * into libascendcl / libacl_rt with the other runtime files).  Each is one of (docs/cann-abi.md, "torch_npu on
 * the simulator"; docs/fidelity.md):
 *   - modelled from the public sources (hicann/runtime src/acl/aclrt_impl/ (*.cpp), include/external/acl/acl_rt.h);
 *   - a documented no-op, where the effect cannot be seen by this operator (saturation mode, op timeouts,
 *     profiling, dump, logging);
 *   - ACL_ERROR_RT_FEATURE_NOT_SUPPORT (207000), which torch_npu's NPU_CHECK_ERROR turns into a one-time
 *     warning, for what the simulator does not simulate (aclop/GE compilation, virtual memory, IPC, kernels
 *     loaded from binaries).  Functions returning a pointer answer NULL there.
 * Most of the not-supported ones exist only because the dynamic linker wants every undefined symbol of
 * libtorch_npu.so at load (Python loads extensions with RTLD_NOW); torch_npu's scenario never calls them.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include "sim_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define ACL_ERROR_RT_SYSPARAMOPT_NOT_SET 107021 /* rt_error_codes.h */

static int not_supported(const char *func) {
    return cannsim_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "%s: not supported by the CANN simulator", func);
}

/* A function the simulator does not support: counted, fault-injectable, answers 207000. */
#define NOT_SUPPORTED(name, params)                 \
    CANNSIM_API aclError name params {              \
        ENTER(#name);                               \
        return not_supported(#name);                \
    }

/* ====================================================================== streams (modelled) */
#define ACL_STREAM_FLAGS_KNOWN 0x3Fu /* FAST_LAUNCH 0x1 .. DEVICE_USE_ONLY 0x20 (acl_rt.h) */

/* aclrtCreateStreamWithConfig (RT stream.cpp, aclrtCreateStreamWithConfigImpl): a stream like aclrtCreateStream's;
   the flags (fast launch, fast sync, ...) only tune how a device schedules it.  priority is kept by a device
   and has no effect here (one worker per stream). */
CANNSIM_API aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
    ENTER("aclrtCreateStreamWithConfig");
    (void)priority;
    if (!stream) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: stream is NULL");
    if (flag & ~ACL_STREAM_FLAGS_KNOWN)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                            "aclrtCreateStreamWithConfig: flag 0x%x has bits outside the ACL_STREAM_* flags (0x%x)",
                            flag, ACL_STREAM_FLAGS_KNOWN);
    extern aclError aclrtCreateStream(aclrtStream *);
    return aclrtCreateStream(stream);
}

/* aclrtSetStreamFailureMode (RT stream.cpp -> api_impl.cc ApiImpl::StreamSetMode): bit 0 of mode picks
   ACL_CONTINUE_ON_FAILURE (0: a failed task leaves a sticky error and the stream goes on) or ACL_STOP_ON_FAILURE
   (1: the stream runs none of its later tasks; the simulator resumes once a synchronisation reported the error).
   Going back from stop to continue is 207000. */
CANNSIM_API aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
    ENTER("aclrtSetStreamFailureMode");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtSetStreamFailureMode", &rc);
    stream_t *s = c ? resolve_stream("aclrtSetStreamFailureMode", stream, c, &rc) : NULL;
    if (s && s->stop_on_failure && !(mode & 1u))
        rc = cannsim_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtSetStreamFailureMode: stream %p is in "
                          "ACL_STOP_ON_FAILURE mode, which cannot be changed back to ACL_CONTINUE_ON_FAILURE", stream);
    else if (s)
        s->stop_on_failure = (int)(mode & 1u);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== device settings */
/* aclrtSetDeviceSatMode (RT device.cpp): float overflow mode, ACL_RT_OVERFLOW_MODE_SATURATION (0) or _INFNAN (1).
   A documented no-op: the simulator's kernels compute in IEEE arithmetic whatever the mode. */
CANNSIM_API aclError aclrtSetDeviceSatMode(int mode) {
    ENTER("aclrtSetDeviceSatMode");
    if (mode != 0 && mode != 1)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                            "aclrtSetDeviceSatMode: mode %d is not ACL_RT_OVERFLOW_MODE_SATURATION (0) or "
                            "ACL_RT_OVERFLOW_MODE_INFNAN (1)",
                            mode);
    return ACL_SUCCESS;
}

/* aclrtSetOpExecuteTimeOutV2 (RT event.cpp): a documented no-op, the simulator has no op timeouts; the actual
   timeout reported is the one asked for. */
CANNSIM_API aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout) {
    ENTER("aclrtSetOpExecuteTimeOutV2");
    if (!actualTimeout) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtSetOpExecuteTimeOutV2: actualTimeout is NULL");
    *actualTimeout = timeout;
    return ACL_SUCCESS;
}

/* aclrtGetSysParamOpt / aclrtSetSysParamOpt / aclrtCtxSetSysParamOpt (RT context.cpp, GetSysParamOpt and
   SetSysParamOpt): process options 0..3 (ACL_OPT_DETERMINISTIC, _ENABLE_DEBUG_KERNEL, _STRONG_CONSISTENCY,
   _ENABLE_KERNEL_EARLY_START), context options 0..2; anything else is 100000.  The simulator's kernels are
   deterministic whatever the value.  A process option never set answers 0 (see docs/cann-abi.md: torch_npu asks
   for ACL_OPT_DETERMINISTIC on every launch and treats an error as fatal, so the device must have a default). */
#define N_SYS_OPT 4
static int64_t g_sys_opt[N_SYS_OPT];

static int check_opt(const char *func, int opt, int ctx) {
    int n = ctx ? 3 : N_SYS_OPT;
    if (opt < 0 || opt >= n)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: opt %d is not an aclSysParamOpt in 0..%d", func, opt, n - 1);
    return 0;
}

/* Phase 1's deterministic level (OPB op_executor.cpp GetDeterministicLevelFromRt): ACL_OPT_DETERMINISTIC, and 2
   when it is 1 with ACL_OPT_STRONG_CONSISTENCY on.  Read without counting a call (CANN reads it with
   aclrtGetSysParamOpt; the simulator's call counters stay those of the caller's own calls). */
CANNSIM_API int64_t cannsim_deterministic_level(void) {
    pthread_mutex_lock(&g_mu);
    int64_t level = g_sys_opt[0] == 1 && g_sys_opt[2] == 1 ? 2 : g_sys_opt[0];
    pthread_mutex_unlock(&g_mu);
    return level;
}

CANNSIM_API aclError aclrtGetSysParamOpt(int opt, int64_t *value) {
    ENTER("aclrtGetSysParamOpt");
    if (!value) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetSysParamOpt: value is NULL");
    int rc = check_opt("aclrtGetSysParamOpt", opt, 0);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    *value = g_sys_opt[opt];
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

CANNSIM_API aclError aclrtSetSysParamOpt(int opt, int64_t value) {
    ENTER("aclrtSetSysParamOpt");
    int rc = check_opt("aclrtSetSysParamOpt", opt, 0);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    g_sys_opt[opt] = value;
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

/* The context's value is not read back by anything the simulator exports (aclrtCtxGetSysParamOpt is absent). */
CANNSIM_API aclError aclrtCtxSetSysParamOpt(int opt, int64_t value) {
    ENTER("aclrtCtxSetSysParamOpt");
    (void)value;
    int rc = check_opt("aclrtCtxSetSysParamOpt", opt, 1);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtCtxSetSysParamOpt", &rc);
    (void)c;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* aclrtPeekAtLastError (RT context.cpp): level must be ACL_RT_THREAD_LEVEL (0).  The simulator keeps no sticky
   per-thread error code (each call returns its own), so there is never one to peek at: 0. */
CANNSIM_API aclError aclrtPeekAtLastError(int level) {
    ENTER("aclrtPeekAtLastError");
    if (level != 0)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtPeekAtLastError: level %d is not ACL_RT_THREAD_LEVEL (0)",
                            level);
    return ACL_SUCCESS;
}

NOT_SUPPORTED(aclGetDeviceCapability, (uint32_t deviceId, int deviceInfo, int64_t *value))
NOT_SUPPORTED(aclrtDeviceCanAccessPeer, (int32_t * canAccessPeer, int32_t deviceId, int32_t peerDeviceId))
NOT_SUPPORTED(aclrtDeviceEnablePeerAccess, (int32_t peerDeviceId, uint32_t flags))
NOT_SUPPORTED(aclrtDeviceGetBareTgid, (int32_t * pid))
NOT_SUPPORTED(aclrtProcessReport, (int32_t timeout))

/* ====================================================================== virtual memory, IPC, binaries */
NOT_SUPPORTED(aclrtReserveMemAddress, (void **virPtr, size_t size, size_t alignment, void *expectPtr, uint64_t flags))
NOT_SUPPORTED(aclrtReleaseMemAddress, (void *virPtr))
NOT_SUPPORTED(aclrtMallocPhysical, (void **handle, size_t size, const void *prop, uint64_t flags))
NOT_SUPPORTED(aclrtFreePhysical, (void *handle))
NOT_SUPPORTED(aclrtMapMem, (void *virPtr, size_t size, size_t offset, void *handle, uint64_t flags))
NOT_SUPPORTED(aclrtUnmapMem, (void *virPtr))
NOT_SUPPORTED(aclrtMemExportToShareableHandle, (void *handle, int handleType, uint64_t flags, uint64_t *shareableHandle))
NOT_SUPPORTED(aclrtMemImportFromShareableHandle, (uint64_t shareableHandle, int32_t deviceId, void **handle))
NOT_SUPPORTED(aclrtMemSetPidToShareableHandle, (uint64_t shareableHandle, int32_t *pid, size_t pidNum))
NOT_SUPPORTED(aclrtBinaryLoadFromData, (const void *data, size_t length, const void *options, void **binHandle))
NOT_SUPPORTED(aclrtBinaryGetFunction, (const void *binHandle, const char *kernelName, void **funcHandle))
NOT_SUPPORTED(aclrtGetFunctionAddr, (void *funcHandle, void **aicAddr, void **aivAddr))

/* ====================================================================== aclop (GE single-op) descriptors */
/* torch_npu's aclop path (OpParamMaker.cpp) compiles operators with GE, which the simulator does not have (its
   aclopCompileAndExecute refuses them naming the operator: stubs/stub_library.c): the tensor descriptors and attrs
   cannot be created (NULL), their setters answer 207000.  Prototypes: Ascend/pytorch third_party/acl/libs/acl.cpp,
   acl_op_compiler.cpp. */
CANNSIM_API void *aclCreateTensorDesc(int dataType, int numDims, const int64_t *dims, int format) {
    (void)dataType, (void)numDims, (void)dims, (void)format;
    if (cannsim_enter("aclCreateTensorDesc") == 0) not_supported("aclCreateTensorDesc");
    return NULL;
}
CANNSIM_API void aclDestroyTensorDesc(const void *desc) { (void)desc; cannsim_enter("aclDestroyTensorDesc"); }

/* aclDataBuffer, modelled (RT src/acl/aclrt_impl/data_buffer.cpp): a device address and a length, nothing else.
   Create makes one (NULL only out of host memory); destroy of NULL is ACL_ERROR_INVALID_PARAM (its
   ACL_REQUIRES_NOT_NULL), and torch_npu's aclop path destroys every buffer it made, also after a refused compile
   (NPUDefine.cpp DestroyAclParams).  Stricter: a buffer that is not live (destroyed twice) is refused, not freed. */
typedef struct {
    void *data;
    size_t length;
} data_buffer;

CANNSIM_API void *aclCreateDataBuffer(void *data, size_t size) {
    if (cannsim_enter("aclCreateDataBuffer")) return NULL;
    data_buffer *b = malloc(sizeof *b);
    if (!b) {
        cannsim_fail(ACL_ERROR_BAD_ALLOC, "aclCreateDataBuffer: out of host memory");
        return NULL;
    }
    b->data = data;
    b->length = size;
    pthread_mutex_lock(&g_mu);
    int rc = cannsim_handle_add("data_buffer", b);
    pthread_mutex_unlock(&g_mu);
    if (rc) {
        free(b);
        cannsim_fail(ACL_ERROR_BAD_ALLOC, "aclCreateDataBuffer: out of host memory");
        return NULL;
    }
    return b;
}

CANNSIM_API aclError aclDestroyDataBuffer(const void *dataBuffer) {
    ENTER("aclDestroyDataBuffer");
    if (!dataBuffer) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclDestroyDataBuffer: dataBuffer is NULL");
    pthread_mutex_lock(&g_mu);
    int live = cannsim_handle_remove("data_buffer", dataBuffer);
    pthread_mutex_unlock(&g_mu);
    if (!live)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclDestroyDataBuffer: %p is not a live aclDataBuffer "
                            "(destroyed already?)", dataBuffer);
    free((void *)dataBuffer);
    return 0;
}

/* the buffer's address and length; NULL gives NULL and 0 (data_buffer.cpp) */
CANNSIM_API void *aclGetDataBufferAddr(const void *dataBuffer) {
    cannsim_enter("aclGetDataBufferAddr");
    return dataBuffer ? ((const data_buffer *)dataBuffer)->data : NULL;
}
CANNSIM_API size_t aclGetDataBufferSizeV2(const void *dataBuffer) {
    cannsim_enter("aclGetDataBufferSizeV2");
    return dataBuffer ? ((const data_buffer *)dataBuffer)->length : 0;
}
CANNSIM_API void aclSetTensorDescName(void *desc, const char *name) {
    (void)desc, (void)name;
    cannsim_enter("aclSetTensorDescName");
}
NOT_SUPPORTED(aclSetTensorFormat, (void *desc, int format))
NOT_SUPPORTED(aclSetTensorShape, (void *desc, int numDims, const int64_t *dims))
NOT_SUPPORTED(aclSetTensorPlaceMent, (void *desc, int type))
NOT_SUPPORTED(aclGetTensorDescDimV2, (const void *desc, size_t index, int64_t *dimSize))
CANNSIM_API size_t aclGetTensorDescNumDims(const void *desc) { (void)desc; cannsim_enter("aclGetTensorDescNumDims"); return 0; }
CANNSIM_API int aclGetTensorDescType(const void *desc) { (void)desc; cannsim_enter("aclGetTensorDescType"); return ACL_DT_UNDEFINED; }
CANNSIM_API int aclGetTensorDescFormat(const void *desc) { (void)desc; cannsim_enter("aclGetTensorDescFormat"); return ACL_FORMAT_UNDEFINED; }
CANNSIM_API void *aclopCreateAttr(void) {
    if (cannsim_enter("aclopCreateAttr") == 0) not_supported("aclopCreateAttr");
    return NULL;
}
CANNSIM_API void aclopDestroyAttr(const void *attr) { (void)attr; cannsim_enter("aclopDestroyAttr"); }
NOT_SUPPORTED(aclopSetAttrBool, (void *attr, const char *name, uint8_t value))
NOT_SUPPORTED(aclopSetAttrInt, (void *attr, const char *name, int64_t value))
NOT_SUPPORTED(aclopSetAttrFloat, (void *attr, const char *name, float value))
NOT_SUPPORTED(aclopSetAttrString, (void *attr, const char *name, const char *value))
NOT_SUPPORTED(aclopSetAttrDataType, (void *attr, const char *name, int value))
NOT_SUPPORTED(aclopSetAttrListBool, (void *attr, const char *name, int num, const uint8_t *values))
NOT_SUPPORTED(aclopSetAttrListInt, (void *attr, const char *name, int num, const int64_t *values))
NOT_SUPPORTED(aclopSetAttrListFloat, (void *attr, const char *name, int num, const float *values))
NOT_SUPPORTED(aclopSetAttrListListInt, (void *attr, const char *name, int num, const int *numValues,
                                        const int64_t *const values[]))

/* ====================================================================== dump, profiling, logging (no-ops) */
/* Dump (aclmdl*Dump): nothing is dumped, but the operator dump switch is modelled, because nnopbase caches no
   phase 1 while it is on (OPB op_cache.cpp CheckCacheable; bridge_dfx.cpp IsDumpEnable reads adump's operator
   switch).  The simulator reads no config: a successful aclmdlSetDump turns it on, aclmdlFinalizeDump off. */
static _Atomic int g_op_dump;
CANNSIM_API int cannsim_op_dump_on(void) { return atomic_load(&g_op_dump); }
CANNSIM_API aclError aclmdlInitDump(void) { ENTER("aclmdlInitDump"); return ACL_SUCCESS; }
CANNSIM_API aclError aclmdlSetDump(const char *dumpCfgPath) {
    (void)dumpCfgPath;
    ENTER("aclmdlSetDump");
    atomic_store(&g_op_dump, 1);
    return ACL_SUCCESS;
}
CANNSIM_API aclError aclmdlFinalizeDump(void) {
    ENTER("aclmdlFinalizeDump");
    atomic_store(&g_op_dump, 0);
    return ACL_SUCCESS;
}

/* aclAppLog (acl_base_rt.h): CANN writes it to its log files; the simulator prints it on stderr when
   ASCEND_SLOG_PRINT_TO_STDOUT=1 (CANN's switch for printing logs), else drops it. */
CANNSIM_API void aclAppLog(int logLevel, const char *func, const char *file, uint32_t line, const char *fmt, ...) {
    cannsim_enter("aclAppLog");
    const char *v = getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    if (!v || strcmp(v, "1") || !fmt) return;
    fprintf(stderr, "[cannsim aclAppLog %d] %s (%s:%u): ", logLevel, func ? func : "?", file ? file : "?", line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Msprof* (the profiler, libmsprofiler in CANN; prototypes in Ascend/pytorch third_party/acl/inc/profiling/
   aprof_pub.h): documented no-ops, nothing is profiled.  The hash id is a string hash, the cycle time the
   monotonic clock in ns. */
CANNSIM_API int32_t MsprofRegisterCallback(uint32_t moduleId, void *handle) { (void)moduleId, (void)handle; return 0; }
CANNSIM_API int32_t MsprofReportApi(uint32_t flag, const void *api) { (void)flag, (void)api; return 0; }
CANNSIM_API int32_t MsprofReportCompactInfo(uint32_t flag, const void *data, uint32_t length) {
    (void)flag, (void)data, (void)length;
    return 0;
}
CANNSIM_API int32_t MsprofReportAdditionalInfo(uint32_t flag, const void *data, uint32_t length) {
    (void)flag, (void)data, (void)length;
    return 0;
}
CANNSIM_API uint64_t MsprofGetHashId(const char *hashInfo, size_t length) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a, 64-bit */
    for (size_t i = 0; hashInfo && i < length; i++) h = (h ^ (unsigned char)hashInfo[i]) * 1099511628211ULL;
    return h;
}
CANNSIM_API uint64_t MsprofSysCycleTime(void) { return (uint64_t)now_ns(); }

/* rt* (the low-level runtime, libruntime in CANN; used by torch_npu's inductor MLIR path only): not supported. */
#define RT_NOT_SUPPORTED(name, params)  \
    CANNSIM_API int32_t name params {    \
        return not_supported(#name);     \
    }
RT_NOT_SUPPORTED(rtDevBinaryRegister, (const void *bin, void **handle))
RT_NOT_SUPPORTED(rtFunctionRegister, (void *binHandle, const void *stubFunc, const char *stubName, const void *devFunc,
                                      uint32_t funcMode))
RT_NOT_SUPPORTED(rtKernelLaunch, (const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize, void *smDesc,
                                  void *stream))
RT_NOT_SUPPORTED(rtGetC2cCtrlAddr, (uint64_t * addr, uint32_t *len))
