/*
 * cannsim.h - our own declarations for the CPU simulator of the CANN runtime (libascendcl /
 * libacl_rt), libnnopbase and the aclnn operator library (libopapi_cv / libopapi).
 *
 * Written from the public ABI notes of this project (docs/cann-abi.md); no vendor header
 * is used.  Section numbers below refer to that file:
 *   typedefs                    §2
 *   aclDataType / aclFormat     §3.1, §3.2
 *   runtime enums               §3.3
 *   status codes                §3.4, §3.5
 *   prototypes                  §1.1, §1.2, §1.4
 *
 * The second half of the file is the simulator's internal interface shared by the three
 * libraries.  Those functions are exported from the runtime library (and from libnnopbase for
 * the executor helpers) with the prefix "cannsim_"; they are not part of any CANN API.
 */
#ifndef CANNSIM_H
#define CANNSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CANNSIM_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------- typedefs (§2) */
typedef int aclError;
typedef int32_t aclnnStatus;
typedef void *aclrtStream;
typedef void *aclrtContext;
typedef void *aclrtEvent;
typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;
typedef struct aclOpExecutor aclOpExecutor;

/* ---------------------------------------------------------------- aclDataType (§3.1), subset */
#define ACL_DT_UNDEFINED (-1)
#define ACL_FLOAT 0
#define ACL_FLOAT16 1
#define ACL_INT8 2
#define ACL_INT32 3
#define ACL_UINT8 4
#define ACL_INT16 6
#define ACL_UINT16 7
#define ACL_UINT32 8
#define ACL_INT64 9
#define ACL_UINT64 10
#define ACL_DOUBLE 11
#define ACL_BOOL 12
#define ACL_BF16 27

/* ---------------------------------------------------------------- aclFormat (§3.2), subset */
#define ACL_FORMAT_UNDEFINED (-1)
#define ACL_FORMAT_NCHW 0
#define ACL_FORMAT_NHWC 1
#define ACL_FORMAT_ND 2
#define ACL_FORMAT_NDHWC 27
#define ACL_FORMAT_NCDHW 30

/* ---------------------------------------------------------------- runtime enums (§3.3) */
#define ACL_MEMCPY_HOST_TO_HOST 0
#define ACL_MEMCPY_HOST_TO_DEVICE 1
#define ACL_MEMCPY_DEVICE_TO_HOST 2
#define ACL_MEMCPY_DEVICE_TO_DEVICE 3

#define ACL_MEM_MALLOC_HUGE_FIRST 0
#define ACL_MEM_MALLOC_HUGE1G_ONLY_P2P 7 /* largest policy value listed in §3.3 */
#define ACL_MEM_TYPE_LOW_BAND_WIDTH 0x100
#define ACL_MEM_TYPE_HIGH_BAND_WIDTH 0x1000
#define ACL_MEM_ACCESS_USER_SPACE_READONLY 0x100000

#define ACL_DEVICE 0
#define ACL_HOST 1

#define ACL_MEM_ATTR_MAX 17 /* aclrtMemAttr runs from ACL_DDR_MEM=0 to ACL_MEM_P2P_HUGE1G=17 */

#define ACL_PKG_NAME_CANN 0
#define ACL_PKG_NAME_DRIVER 7

#define ACL_PKG_VERSION_MAX_SIZE 128

typedef struct {                 /* aclCANNPackageVersion, 512 bytes (§1.1) */
    char version[128];
    char majorVersion[64];
    char minorVersion[64];
    char releaseVersion[64];
    char patchVersion[64];
    char reserved[128];
} aclCANNPackageVersion;

/* ---------------------------------------------------------------- status codes (§3.4, §3.5) */
#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_REPEAT_FINALIZE 100037
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_API_NOT_SUPPORT 200001
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_STREAM_CONTEXT 107003
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001
#define ACL_ERROR_RT_INTERNAL_ERROR 507000
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT 507047

#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NULLPTR 561103

/* Simulator-only status, outside CANN's code families (1xxxxx-5xxxxx): where the hardware would read freed
   memory or run on stale addresses silently, the simulator answers this (cann-abi.md §8.5, §8.6). */
#define CANNSIM_ERR_STALE_HANDLE 990101

/* ---------------------------------------------------------------- simulator-only status codes
 * Not CANN codes: where the device would corrupt memory silently, the simulator reports the
 * misuse with one of these (and a message naming the rule).  Real CANN never returns them. */
/* Memory that queued (not yet completed) stream work uses was freed or overwritten, or memory that
   queued work writes was read, by a call that does not wait for stream work (aclrtFree,
   aclrtFreeHost, aclrtMemcpy, aclrtMemset; cann-abi.md §8.4), or by work queued on another stream
   (streams are ordered only by an event wait, which the simulator does not model). */
#define CANNSIM_ERR_QUEUED_WORK 908401
/* Device memory of another device than the one the call runs on (the current context's, or the stream's):
   a kernel or copy there would fault or touch another device's memory (cann-abi.md §8.3). */
#define CANNSIM_ERR_OTHER_DEVICE 908402

/* ---------------------------------------------------------------- simulator object layouts */
#define CANNSIM_MAX_DIMS 25      /* generous cap on tensor rank accepted by aclCreateTensor */

struct aclTensor {
    uint64_t magic;
    int dtype;
    int format;
    int64_t ndim;
    int64_t dims[CANNSIM_MAX_DIMS];
    int64_t strides[CANNSIM_MAX_DIMS];   /* elements */
    int64_t nstorage;
    int64_t storage[CANNSIM_MAX_DIMS];
    int64_t offset;                      /* elements */
    void *data;                          /* not owned */
    uint64_t serial;                     /* unique per created tensor (a freed address may be reused) */
};

struct aclIntArray {
    uint64_t magic;
    uint64_t len;
    int64_t *vals;
    uint64_t serial;
};

#define CANNSIM_EXEC_MAX_IO 4
#define CANNSIM_EXEC_OPDATA 256

struct aclOpExecutor {
    uint64_t magic;
    char op[96];                          /* name of the operator that created it */
    int repeatable;
    int busy;                             /* a phase 2 is between begin and finish */
    int empty;                            /* nothing to launch */
    uint64_t workspace_size;
    uint64_t phase1;                      /* the phase 1 that made it (per thread: nnopbase.c t_phase1) */
    int nin, nout;
    aclTensor in[CANNSIM_EXEC_MAX_IO];    /* a cache wrapper's copies of the phase-1 descriptors */
    aclTensor out[CANNSIM_EXEC_MAX_IO];
    /* the caller's objects, which the executor refers to until it is consumed or destroyed (§8.5) */
    const aclTensor *in_handle[CANNSIM_EXEC_MAX_IO];
    const aclTensor *out_handle[CANNSIM_EXEC_MAX_IO];
    const aclIntArray *arr_handle[CANNSIM_EXEC_MAX_IO];
    uint64_t in_serial[CANNSIM_EXEC_MAX_IO], out_serial[CANNSIM_EXEC_MAX_IO], arr_serial[CANNSIM_EXEC_MAX_IO];
    int narr;
    char names[128];                      /* the operator's names for ins, outs and arrays, comma-separated */
    unsigned char opdata[CANNSIM_EXEC_OPDATA];          /* operator-private data */
    uint64_t runs;
    int wrapper;                          /* an op-cache hit (§8.6): runs on the addresses phase 1 saw */
    struct cannsim_cache_entry *cache_entry;  /* the op-cache entry its first run makes usable, or NULL */
};

/* The handles a phase 1 gives its executor: inputs, outputs and int arrays, with their names. */
typedef struct {
    const aclTensor *const *ins;
    int nin;
    const aclTensor *const *outs;
    int nout;
    const aclIntArray *const *arrays;
    int narr;
    const char *names; /* e.g. "gradOut,gradInput,outputSize,inputSize" */
} cannsim_exec_io;

/* An op-cache key (OPB common/utils/op_cache.cpp): the API name, then per tensor its view shape, strides,
   storage shape, dtype, offset and format, per array its values, the scalars' bytes, and which arguments are
   the same tensor.  Never the addresses. */
#define CANNSIM_KEY_MAX 4096
typedef struct {
    unsigned char buf[CANNSIM_KEY_MAX];
    size_t len;
    int overflow;
} cannsim_key;

/* ---------------------------------------------------------------- internal API (runtime lib) */
/* Report an error message on the calling thread (format it as "<function>: ..."; one line), appended to the
   messages since the thread's last aclGetRecentErrMsg unless the same text is already there; returns `code`. */
CANNSIM_API int cannsim_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's newest pending message (not cleared), or NULL. */
CANNSIM_API const char *cannsim_peek_error(void);
/* Count a call of exported function `func` and apply fault injection: returns 0 to proceed, or
   the injected code (the message is already set). */
CANNSIM_API int cannsim_enter(const char *func);
/* The global simulator lock (not recursive). */
CANNSIM_API void cannsim_lock(void);
CANNSIM_API void cannsim_unlock(void);

/* Handle registries, by kind: "tensor", "int_array", "executor", "tensor_list" (others are internal to the
   runtime).  Call with the lock held. */
CANNSIM_API int cannsim_handle_add(const char *kind, const void *p);
CANNSIM_API int cannsim_handle_remove(const char *kind, const void *p);  /* 1 if it was live */
CANNSIM_API int cannsim_handle_live(const char *kind, const void *p);

/* Does [p, p+n) lie inside one live device allocation?  Returns 1 if yes; otherwise 0 and a
   reason in why.  On success *base receives the allocation's base.  Call with the lock held. */
CANNSIM_API int cannsim_device_range(const void *p, uint64_t n, const void **base, char *why, size_t whylen);

/* A task to run on a stream.  run returns 0 or an error code (and may write a message). */
typedef int (*cannsim_task_fn)(void *arg, char *msg, size_t msglen);
/* A byte range a task uses: [p, p+n) inside one live allocation (device or pinned host), written
   by the task when write is non-zero (else only read). */
typedef struct {
    const void *p;
    uint64_t n;
    int write;
} cannsim_ref;
/* Enqueue a kernel task on `stream` (NULL = default stream of the calling thread's current
   context).  refs are the ranges the task uses (entries with p == NULL or n == 0 are skipped, at
   most 4): until the task completes, freeing or overwriting them, or reading what it writes, is
   refused with CANNSIM_ERR_QUEUED_WORK.  The task runs on the stream's worker thread after this
   call returns (default), before it returns (synchronous mode), or only once a synchronisation
   asks for it (deferred mode).  On success the task owns arg (destroy(arg) is called after it ran
   or was discarded); on failure the caller keeps it.  Returns 0 or a runtime code with the
   message set (prefixed by func).  Do not hold the lock. */
CANNSIM_API int cannsim_launch(const char *func, aclrtStream stream, cannsim_task_fn run,
                               void (*destroy)(void *), void *arg, const cannsim_ref *refs, int nrefs);

/* The simulated device's core counts, which phase 1 reads when no core limit is set for the thread (OPB
   op_executor.cpp InitL2Phase1Context; the simulator exports no aclrtSetStreamResLimit): 24 cube and 48 vector
   cores, the counts of the Atlas A2 platform file shown in Ascend/torchair docs/context/limit_core_num.md. */
#define CANNSIM_CUBE_CORES 24
#define CANNSIM_VECTOR_CORES 48
/* Phase 1's deterministic level and whether the operator dump is on (runtime; rt_torch_npu.c). */
CANNSIM_API int64_t cannsim_deterministic_level(void);
CANNSIM_API int cannsim_op_dump_on(void);

/* ---------------------------------------------------------------- internal API (libnnopbase) */
/* Create and register an executor referring to io's handles; NULL with message on failure. */
CANNSIM_API aclOpExecutor *cannsim_executor_create(const char *func, const char *op, const cannsim_exec_io *io,
                                                   uint64_t workspace_size, int empty,
                                                   const void *opdata, size_t opdata_size);
/* Op-cache key building (call with the lock not held; t is a descriptor copy, label its argument's
   first position, so that aliasing is part of the key; arrays go in as bytes). */
CANNSIM_API void cannsim_key_init(cannsim_key *k, const char *op);
CANNSIM_API void cannsim_key_tensor(cannsim_key *k, const aclTensor *t, int label);
CANNSIM_API void cannsim_key_bytes(cannsim_key *k, const void *p, size_t n);
/* Phase 1 through the op cache: a usable entry of this thread for k gives a cache wrapper over io (with the
   entry's workspace size in *ws); NULL when there is none or the cache is off. */
CANNSIM_API aclOpExecutor *cannsim_cache_lookup(const char *func, const char *op, const cannsim_key *k,
                                                const cannsim_exec_io *io, uint64_t *ws);
/* A new executor's pending entry (nnopbase adds it when phase 1 hands the executor over): its first
   successful one-shot run makes it usable; a repeatable, failed, empty or never-run executor drops it. */
CANNSIM_API void cannsim_cache_add(aclOpExecutor *e, const cannsim_key *k);
/* Start a phase 2: checks the executor is live, belongs to `op` and is not busy, and that the handles it
   refers to are still alive (else CANNSIM_ERR_STALE_HANDLE, consuming a single-use executor); copies it into
   *snap with the tensors' current descriptors and marks it busy.  Returns 0 or an error with a message. */
CANNSIM_API int cannsim_executor_begin(const char *func, const char *op, aclOpExecutor *e, aclOpExecutor *snap);
/* End a phase 2 started with cannsim_executor_begin.  A non-repeatable executor is consumed by its
   phase 2 whether the run succeeded or not (ok only counts the run), so a caller never destroys it
   after phase 2: that is the rule the Python binding follows. */
CANNSIM_API void cannsim_executor_finish(aclOpExecutor *e, int ok);
/* Phase 2 failed before it could begin (e.g. an injected fault): consume a live, idle, non-repeatable
   executor as cannsim_executor_finish would. */
CANNSIM_API void cannsim_executor_consume(aclOpExecutor *e);
/* Delete the executor (begun, so live and busy) whatever its repeatable flag: OPB op_executor.cpp
   DeleteExecutorForError, on a phase 2 with a NULL workspace and a size above 0. */
CANNSIM_API void cannsim_executor_delete(aclOpExecutor *e);

/* Size in bytes of one element of dtype, 0 if unknown. */
CANNSIM_API int cannsim_dtype_size(int dtype);
/* 0 when the calling thread has a current context (and ACL is initialised), else the runtime's status for it
   (107002, 100001) with its message recorded: for the operator library's phase 1 (cann-abi.md §1.1). */
CANNSIM_API int cannsim_require_context(const char *func);

/* aclrtGetSocName's answer: "CANN-Simulator", or the value of CANN_SIM_SOC (sim_core.c). */
CANNSIM_API const char *cannsim_soc_name(void);

#ifdef __cplusplus
}
#endif

#endif /* CANNSIM_H */
