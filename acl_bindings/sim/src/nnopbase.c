/*
 * nnopbase.c - simulated libnnopbase: aclTensor, aclIntArray and aclOpExecutor handling
 * (cann-abi.md §1.2, §1.3; codes §3.5).  Every handle lives in a registry kept by the runtime
 * library, so a stale, foreign or doubly destroyed handle is reported (161002) instead of being
 * dereferenced.
 */
#define _GNU_SOURCE
#include "cannsim.h"
#include "tensor_list.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TENSOR_MAGIC 0x54454e534f52ULL   /* "TENSOR" */
#define ARRAY_MAGIC 0x494e544152ULL      /* "INTAR" */
#define EXEC_MAGIC 0x45584543ULL         /* "EXEC" */
#define LIST_MAGIC 0x544c495354ULL       /* "TLIST" */
#define MAX_ARRAY_LEN (1ULL << 24)

static _Atomic uint64_t g_serial; /* tensors and arrays: a destroyed handle's address may be reused */

#define ENTER(name)                            \
    do {                                       \
        int enter_code_ = cannsim_enter(name); \
        if (enter_code_) return enter_code_;   \
    } while (0)

/* ====================================================================== tensors */
static int mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }

CANNSIM_API aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, int dataType,
                                       const int64_t *stride, int64_t offset, int format, const int64_t *storageDims,
                                       uint64_t storageDimsNum, void *tensorData) {
    const char *F = "aclCreateTensor";
    if (cannsim_enter(F)) return NULL;
    if (!viewDims && viewDimsNum > 0) {
        cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: viewDims is NULL but viewDimsNum is %" PRIu64, F, viewDimsNum);
        return NULL;
    }
    if (!storageDims && storageDimsNum > 0) {
        cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: storageDims is NULL but storageDimsNum is %" PRIu64, F,
                     storageDimsNum);
        return NULL;
    }
    if (viewDimsNum > CANNSIM_MAX_DIMS || storageDimsNum > CANNSIM_MAX_DIMS) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %" PRIu64 " dims; the simulator accepts at most %d", F,
                     viewDimsNum > CANNSIM_MAX_DIMS ? "viewDims" : "storageDims",
                     viewDimsNum > CANNSIM_MAX_DIMS ? viewDimsNum : storageDimsNum, CANNSIM_MAX_DIMS);
        return NULL;
    }
    for (uint64_t i = 0; i < viewDimsNum; i++) {
        if (viewDims[i] < 0) {
            cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: viewDims[%" PRIu64 "] = %" PRId64 " is negative", F, i,
                         viewDims[i]);
            return NULL;
        }
    }
    for (uint64_t i = 0; i < storageDimsNum; i++) {
        if (storageDims[i] < 0) {
            cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: storageDims[%" PRIu64 "] = %" PRId64 " is negative", F, i,
                         storageDims[i]);
            return NULL;
        }
    }
    if (offset < 0) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: offset %" PRId64 " is negative", F, offset);
        return NULL;
    }
    aclTensor *t = calloc(1, sizeof *t);
    if (!t) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    t->magic = TENSOR_MAGIC;
    t->dtype = dataType;
    t->format = format;
    t->ndim = (int64_t)viewDimsNum;
    t->nstorage = (int64_t)storageDimsNum;
    t->offset = offset;
    t->data = tensorData;
    t->serial = atomic_fetch_add(&g_serial, 1) + 1;
    if (viewDimsNum) memcpy(t->dims, viewDims, viewDimsNum * sizeof(int64_t));
    if (storageDimsNum) memcpy(t->storage, storageDims, storageDimsNum * sizeof(int64_t));
    if (stride) {
        if (viewDimsNum) memcpy(t->strides, stride, viewDimsNum * sizeof(int64_t));
    } else {
        int64_t acc = 1;
        for (int64_t i = (int64_t)viewDimsNum - 1; i >= 0; i--) {
            t->strides[i] = acc;
            int64_t d = viewDims[i] > 0 ? viewDims[i] : 1;
            if (!mul_ok(acc, d, &acc)) acc = INT64_MAX;
        }
    }
    cannsim_lock();
    int rc = cannsim_handle_add("tensor", t);
    cannsim_unlock();
    if (rc) {
        free(t);
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    return t;
}

CANNSIM_API aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
    ENTER("aclDestroyTensor");
    if (!tensor) return ACLNN_SUCCESS;
    cannsim_lock();
    int live = cannsim_handle_remove("tensor", tensor);
    cannsim_unlock();
    if (!live)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyTensor: %p is not a live aclTensor (already destroyed, or not created by "
                            "aclCreateTensor)",
                            (const void *)tensor);
    free((void *)tensor);
    return ACLNN_SUCCESS;
}

CANNSIM_API aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
    const char *F = "aclCreateIntArray";
    if (cannsim_enter(F)) return NULL;
    if (!value && size > 0) {
        cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: value is NULL but size is %" PRIu64, F, size);
        return NULL;
    }
    if (size > MAX_ARRAY_LEN) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: size %" PRIu64 " is too large for the simulator", F, size);
        return NULL;
    }
    aclIntArray *a = calloc(1, sizeof *a);
    int64_t *v = malloc(size ? size * sizeof(int64_t) : 1);
    if (!a || !v) {
        free(a);
        free(v);
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    if (size) memcpy(v, value, size * sizeof(int64_t));
    a->magic = ARRAY_MAGIC;
    a->len = size;
    a->vals = v;
    a->serial = atomic_fetch_add(&g_serial, 1) + 1;
    cannsim_lock();
    int rc = cannsim_handle_add("int_array", a);
    cannsim_unlock();
    if (rc) {
        free(v);
        free(a);
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    return a;
}

CANNSIM_API aclnnStatus aclDestroyIntArray(const aclIntArray *array) {
    ENTER("aclDestroyIntArray");
    if (!array) return ACLNN_SUCCESS;
    cannsim_lock();
    int live = cannsim_handle_remove("int_array", array);
    cannsim_unlock();
    if (!live)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyIntArray: %p is not a live aclIntArray (already destroyed, or not created by "
                            "aclCreateIntArray)",
                            (const void *)array);
    free(array->vals);
    free((void *)array);
    return ACLNN_SUCCESS;
}

/* ---------------------------------------------------------------- tensor lists (tensor_list.h; cann-abi.md §9.3) */
static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

/* Whether a non-NULL entry of v[0..n) appears twice (lock not needed: v is the caller's copy). */
static int has_duplicate(const aclTensor **v, uint64_t n) {
    if (n < 2) return 0;
    uintptr_t *s = malloc((size_t)n * sizeof *s);
    if (!s) return -1;
    for (uint64_t i = 0; i < n; i++) s[i] = (uintptr_t)v[i];
    qsort(s, (size_t)n, sizeof *s, cmp_ptr);
    int dup = 0;
    for (uint64_t i = 1; i < n && !dup; i++) dup = s[i] && s[i] == s[i - 1];
    free(s);
    return dup;
}

/* OPB acl_op_api.cpp aclCreateTensorList -> aclTensorList(value, size): the array of pointers is copied; a NULL
   value or a size of 0 makes an empty list (not NULL).  Stricter than CANN, which copies the pointers unchecked
   (its later use or destroy would read freed memory or delete twice): a non-NULL entry that is not a live
   aclTensor, or a tensor listed twice, is refused (NULL, 161002). */
CANNSIM_API aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
    const char *F = "aclCreateTensorList";
    if (cannsim_enter(F)) return NULL;
    if (!value) size = 0;
    if (size > MAX_ARRAY_LEN) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: size %" PRIu64 " is too large for the simulator", F, size);
        return NULL;
    }
    aclTensorList *l = calloc(1, sizeof *l);
    const aclTensor **v = size ? malloc((size_t)size * sizeof *v) : NULL;
    uint64_t *ser = size ? calloc((size_t)size, sizeof *ser) : NULL;
    if (!l || (size && (!v || !ser))) {
        free(l), free(v), free(ser);
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    if (size) memcpy(v, value, (size_t)size * sizeof *v);
    int dup = has_duplicate(v, size);
    if (dup) {
        free(l), free(v), free(ser);
        if (dup < 0) cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        else
            cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: an aclTensor is listed twice: the list owns its tensors, so "
                         "destroying it would destroy that tensor twice (simulator rule; CANN deletes it twice)", F);
        return NULL;
    }
    l->magic = LIST_MAGIC;
    l->size = size;
    l->tensors = v;
    l->serials = ser;
    l->serial = atomic_fetch_add(&g_serial, 1) + 1;
    uint64_t bad = UINT64_MAX;
    cannsim_lock();
    for (uint64_t i = 0; i < size && bad == UINT64_MAX; i++) {
        if (!v[i]) continue;
        if (cannsim_handle_live("tensor", v[i])) ser[i] = v[i]->serial;
        else bad = i;
    }
    int rc = bad == UINT64_MAX ? cannsim_handle_add("tensor_list", l) : 0;
    cannsim_unlock();
    if (bad != UINT64_MAX || rc) {
        const void *p = bad != UINT64_MAX ? (const void *)v[bad] : NULL;
        free(l), free(v), free(ser);
        if (rc) cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        else
            cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: value[%" PRIu64 "] = %p is not a live aclTensor (destroyed, or "
                         "not created by aclCreateTensor)", F, bad, p);
        return NULL;
    }
    return l;
}

/* OPB acl_op_api.cpp aclDestroyTensorList: NULL is 0; each tensor of the list is destroyed (aclDestroyTensor, which
   takes NULL), then the list.  A list not live (destroyed twice, or foreign) is 161002, as for a tensor.  An entry
   destroyed since (by aclDestroyTensor, or through another list) would be deleted twice by CANN: the simulator
   destroys the list and its live tensors and returns 161002 naming the first such entry. */
CANNSIM_API aclnnStatus aclDestroyTensorList(const aclTensorList *array) {
    ENTER("aclDestroyTensorList");
    if (!array) return ACLNN_SUCCESS;
    uint64_t bad = UINT64_MAX;
    cannsim_lock();
    int live = cannsim_handle_remove("tensor_list", array);
    if (live) {
        for (uint64_t i = 0; i < array->size; i++) {
            const aclTensor *t = array->tensors[i];
            if (!t) continue;
            if (cannsim_handle_live("tensor", t) && t->serial == array->serials[i]) {
                cannsim_handle_remove("tensor", t);
                free((void *)t);
            } else if (bad == UINT64_MAX) {
                bad = i;
            }
        }
    }
    cannsim_unlock();
    if (!live)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyTensorList: %p is not a live aclTensorList (already destroyed, or not created "
                            "by aclCreateTensorList)", (const void *)array);
    const void *p = bad != UINT64_MAX ? (const void *)array->tensors[bad] : NULL;
    free((void *)array->tensors);
    free(array->serials);
    free((void *)array);
    if (bad != UINT64_MAX)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyTensorList: entry %" PRIu64 " (aclTensor %p) was already destroyed: the list "
                            "owns its tensors and destroys them (CANN would delete it twice; the list and its other "
                            "tensors are destroyed)", bad, p);
    return ACLNN_SUCCESS;
}

/* OPB acl_op_api.cpp aclGetTensorListSize: NULL tensorList or size is 161001. */
CANNSIM_API aclnnStatus aclGetTensorListSize(const aclTensorList *tensorList, uint64_t *size) {
    ENTER("aclGetTensorListSize");
    if (!tensorList || !size)
        return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetTensorListSize: %s is NULL",
                            tensorList ? "size" : "tensorList");
    cannsim_lock();
    int live = cannsim_handle_live("tensor_list", tensorList);
    if (live) *size = tensorList->size;
    cannsim_unlock();
    if (!live)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "aclGetTensorListSize: %p is not a live aclTensorList",
                            (const void *)tensorList);
    return ACLNN_SUCCESS;
}

/* ---------------------------------------------------------------- getters (cann-abi.md §1.2) */
/* Run body with the tensor checked live and the lock held. */
#define WITH_TENSOR(F, tensor, body)                                                                            \
    do {                                                                                                        \
        if (!(tensor)) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: tensor is NULL", F);                  \
        cannsim_lock();                                                                                         \
        if (!cannsim_handle_live("tensor", (tensor))) {                                                         \
            cannsim_unlock();                                                                                   \
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %p is not a live aclTensor", F,                  \
                                (const void *)(tensor));                                                        \
        }                                                                                                       \
        body;                                                                                                   \
        cannsim_unlock();                                                                                       \
        return ACLNN_SUCCESS;                                                                                   \
    } while (0)

static int64_t *dup_dims(const int64_t *v, int64_t n) {
    int64_t *r = malloc(n > 0 ? (size_t)n * sizeof(int64_t) : 1); /* caller owns it (delete[] in CANN) */
    if (r && n > 0) memcpy(r, v, (size_t)n * sizeof(int64_t));
    return r;
}

CANNSIM_API aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum) {
    ENTER("aclGetViewShape");
    if (!viewDims || !viewDimsNum) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewShape: output is NULL");
    WITH_TENSOR("aclGetViewShape", tensor, {
        *viewDims = dup_dims(tensor->dims, tensor->ndim);
        *viewDimsNum = (uint64_t)tensor->ndim;
    });
}

CANNSIM_API aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims, uint64_t *storageDimsNum) {
    ENTER("aclGetStorageShape");
    if (!storageDims || !storageDimsNum)
        return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetStorageShape: output is NULL");
    WITH_TENSOR("aclGetStorageShape", tensor, {
        *storageDims = dup_dims(tensor->storage, tensor->nstorage);
        *storageDimsNum = (uint64_t)tensor->nstorage;
    });
}

CANNSIM_API aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum) {
    ENTER("aclGetViewStrides");
    if (!stridesValue || !stridesNum)
        return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewStrides: output is NULL");
    WITH_TENSOR("aclGetViewStrides", tensor, {
        *stridesValue = dup_dims(tensor->strides, tensor->ndim);
        *stridesNum = (uint64_t)tensor->ndim;
    });
}

CANNSIM_API aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset) {
    ENTER("aclGetViewOffset");
    if (!offset) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetViewOffset: offset is NULL");
    WITH_TENSOR("aclGetViewOffset", tensor, *offset = tensor->offset);
}

CANNSIM_API aclnnStatus aclGetFormat(const aclTensor *tensor, int *format) {
    ENTER("aclGetFormat");
    if (!format) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetFormat: format is NULL");
    WITH_TENSOR("aclGetFormat", tensor, *format = tensor->format);
}

CANNSIM_API aclnnStatus aclGetDataType(const aclTensor *tensor, int *dataType) {
    ENTER("aclGetDataType");
    if (!dataType) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetDataType: dataType is NULL");
    WITH_TENSOR("aclGetDataType", tensor, *dataType = tensor->dtype);
}

CANNSIM_API aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr) {
    ENTER("aclSetRawTensorAddr");
    WITH_TENSOR("aclSetRawTensorAddr", tensor, tensor->data = addr);
}

CANNSIM_API aclnnStatus aclGetRawTensorAddr(const aclTensor *tensor, void **addr) {
    ENTER("aclGetRawTensorAddr");
    if (!addr) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetRawTensorAddr: addr is NULL");
    WITH_TENSOR("aclGetRawTensorAddr", tensor, *addr = tensor->data);
}

CANNSIM_API aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size) {
    ENTER("aclGetIntArraySize");
    if (!array || !size)
        return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclGetIntArraySize: %s is NULL", array ? "size" : "array");
    cannsim_lock();
    int live = cannsim_handle_live("int_array", array);
    if (live) *size = array->len;
    cannsim_unlock();
    if (!live)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "aclGetIntArraySize: %p is not a live aclIntArray",
                            (const void *)array);
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclnnInit(const char *configPath) {
    (void)configPath;
    ENTER("aclnnInit");
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclnnFinalize(void) {
    ENTER("aclnnFinalize");
    return ACLNN_SUCCESS;
}

/* ====================================================================== the op cache (cann-abi.md §8.6) */
/* nnopbase's op cache, as read in OPB: phase 1 (L2_DFX_PHASE_1, include/nnopbase/opdev/op_dfx.h) first builds a
   key of the call (common/utils/op_cache.cpp, AddParamToBuf: API name, each tensor's view shape, strides,
   storage shape, dtype, offset and format, arrays' values, scalars' bytes, the tensors' aliasing) and, on a
   usable entry, returns a cache wrapper (OpExecCacheWrap, which copies the tensors' addresses) instead of an
   executor.  A new executor's entry is added when phase 1 hands it over (UniqueExecutor::ReleaseTo -> AddCache)
   and becomes usable when a one-shot executor that ran is deleted (~OpExecutorImpl: Finalize + SetUse);
   Finalize without a launch, or a failed run, makes it invalid; aclSetAclOpExecutorRepeatable removes it
   (OpExecutorImpl::SetRepeatable -> RemoveExecCache).  The manager is thread_local: each thread has its own
   cache.  Its size limit is ACLNN_CACHE_LIMIT (default 10000); DISABLE_L2_CACHE turns it off (CheckCacheable).
   The simulator also reads CANN_SIM_OP_CACHE=0 and cannsimSetOpCache(). */
#define CACHE_BUCKETS 4096
#define CACHE_DEFAULT_LIMIT 10000
#define CACHE_SHRINK 30 /* K_CACHE_SHRINK_NUM */

struct cannsim_cache_entry {
    struct cannsim_cache_entry *next_in_bucket, *older, *newer;
    uint64_t hash, thread;
    int usable, linked, held; /* held: a pending executor still points at it */
    uint64_t workspace_size;
    unsigned char opdata[CANNSIM_EXEC_OPDATA];
    size_t len;
    unsigned char key[];
};

static struct cannsim_cache_entry *g_buckets[CACHE_BUCKETS];
static struct cannsim_cache_entry *g_oldest, *g_newest;
static size_t g_cache_count;
static _Atomic int g_cache_on = -1; /* -1: not read from the environment yet */
static _Atomic uint64_t g_threads;
static __thread uint64_t t_thread; /* this thread's cache (never reused by a later thread) */
/* The phase 1 that last ran on this thread: L2_DFX_PHASE_1 -> GetFromCache -> InitExecutorCacheThreadLocal
   resets the thread's list of the call's tensor storages, which OpExecutorImpl::SetRepeatable then checks the
   executor's launchers against (OPB op_cache.cpp 226-260, op_executor.cpp 154-184). */
static __thread uint64_t t_phase1;
static _Atomic uint64_t g_phase1;

static int cache_on(void) {
    int on = atomic_load(&g_cache_on);
    if (on < 0) {
        const char *sim = getenv("CANN_SIM_OP_CACHE");
        on = !(getenv("DISABLE_L2_CACHE") || (sim && strcmp(sim, "0") == 0));
        atomic_store(&g_cache_on, on);
    }
    return on;
}

static size_t cache_limit(void) {
    static size_t limit;
    if (!limit) {
        const char *v = getenv("ACLNN_CACHE_LIMIT");
        char *end = NULL;
        unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
        limit = (v && *v && end && !*end && n > 0) ? (size_t)(n < 10000000ULL ? n : 10000000ULL)
                                                    : CACHE_DEFAULT_LIMIT;
    }
    return limit;
}

/* Turn the op cache on or off (CANN_SIM_OP_CACHE=0 / DISABLE_L2_CACHE at start); returns the previous setting. */
CANNSIM_API int cannsimSetOpCache(int on) {
    int prev = cache_on();
    atomic_store(&g_cache_on, on ? 1 : 0);
    return prev;
}

/* Whether aclSetAclOpExecutorRepeatable accepts this operator's executors.  nnopbase refuses (ACLNN_ERR_INNER)
   an executor one of whose kernel launchers is not repeatable (OPB composite_op/aclnn_engine/op_executor.cpp,
   SetRepeatable -> CheckRepeatable); whether this operator's are is not confirmed by public sources
   (cann-abi.md §0), so CANN_SIM_REPEATABLE=0 or cannsimSetRepeatable(0) models a release that refuses. */
static _Atomic int g_repeatable = -1;

static int repeatable_on(void) {
    int on = atomic_load(&g_repeatable);
    if (on < 0) {
        const char *v = getenv("CANN_SIM_REPEATABLE");
        on = !(v && strcmp(v, "0") == 0);
        atomic_store(&g_repeatable, on);
    }
    return on;
}

CANNSIM_API int cannsimSetRepeatable(int on) {
    int prev = repeatable_on();
    atomic_store(&g_repeatable, on ? 1 : 0);
    return prev;
}

/* Entries in the cache (all threads), for tests. */
CANNSIM_API int64_t cannsimOpCacheEntries(void) {
    cannsim_lock();
    int64_t n = (int64_t)g_cache_count;
    cannsim_unlock();
    return n;
}

static uint64_t this_thread(void) {
    if (!t_thread) t_thread = atomic_fetch_add(&g_threads, 1) + 1;
    return t_thread;
}

CANNSIM_API void cannsim_key_init(cannsim_key *k, const char *op) {
    k->len = 0;
    k->overflow = 0;
    cannsim_key_bytes(k, op, strlen(op) + 1);
    /* AddOpConfigInfoToBuf (OPB op_cache.cpp): the thread's core counts and the deterministic level */
    const uint32_t cores[2] = {CANNSIM_CUBE_CORES, CANNSIM_VECTOR_CORES};
    const uint8_t level = (uint8_t)cannsim_deterministic_level();
    cannsim_key_bytes(k, cores, sizeof cores);
    cannsim_key_bytes(k, &level, sizeof level);
}

/* CheckCacheable (OPB op_cache.cpp): no phase 1 is cached while the operator dump is on. */
static int cacheable(void) { return cache_on() && !cannsim_op_dump_on(); }

CANNSIM_API void cannsim_key_bytes(cannsim_key *k, const void *p, size_t n) {
    if (k->overflow || n > CANNSIM_KEY_MAX - k->len) {
        k->overflow = 1; /* nnopbase: K_INVALID_HASH_OFFSET, the call is not cached */
        return;
    }
    memcpy(k->buf + k->len, p, n);
    k->len += n;
}

CANNSIM_API void cannsim_key_tensor(cannsim_key *k, const aclTensor *t, int label) {
    const char sep = ',';
    if (!t) {
        cannsim_key_bytes(k, &sep, 1);
        return;
    }
    cannsim_key_bytes(k, t->dims, (size_t)t->ndim * sizeof(int64_t));
    cannsim_key_bytes(k, &sep, 1);
    cannsim_key_bytes(k, t->strides, (size_t)t->ndim * sizeof(int64_t));
    cannsim_key_bytes(k, &sep, 1);
    cannsim_key_bytes(k, t->storage, (size_t)t->nstorage * sizeof(int64_t));
    cannsim_key_bytes(k, &sep, 1);
    cannsim_key_bytes(k, &t->dtype, sizeof t->dtype);
    cannsim_key_bytes(k, &t->offset, sizeof t->offset);
    cannsim_key_bytes(k, &t->format, sizeof t->format);
    cannsim_key_bytes(k, &label, sizeof label);
}

static uint64_t key_hash(const cannsim_key *k, uint64_t thread) {
    uint64_t h = 1469598103934665603ULL ^ thread;
    for (size_t i = 0; i < k->len; i++) h = (h ^ k->buf[i]) * 1099511628211ULL;
    return h;
}

/* Lock held. */
static void entry_unlink(struct cannsim_cache_entry *c) {
    if (!c->linked) return;
    struct cannsim_cache_entry **pp = &g_buckets[c->hash % CACHE_BUCKETS];
    while (*pp && *pp != c) pp = &(*pp)->next_in_bucket;
    if (*pp) *pp = c->next_in_bucket;
    if (c->older) c->older->newer = c->newer;
    else g_oldest = c->newer;
    if (c->newer) c->newer->older = c->older;
    else g_newest = c->older;
    c->linked = 0;
    g_cache_count--;
}

/* Lock held: unlink c and free it unless a pending executor still points at it. */
static void entry_drop(struct cannsim_cache_entry *c) {
    entry_unlink(c);
    if (!c->held) free(c);
}

/* Lock held: the executor lets go of its pending entry; usable says whether its run made it usable. */
static void entry_release(aclOpExecutor *e, int usable) {
    struct cannsim_cache_entry *c = e->cache_entry;
    if (!c) return;
    e->cache_entry = NULL;
    c->held = 0;
    if (usable && c->linked) c->usable = 1;
    else entry_drop(c);
}

static struct cannsim_cache_entry *entry_find(const cannsim_key *k, uint64_t thread, uint64_t h) {
    for (struct cannsim_cache_entry *c = g_buckets[h % CACHE_BUCKETS]; c; c = c->next_in_bucket)
        if (c->hash == h && c->thread == thread && c->len == k->len && memcmp(c->key, k->buf, k->len) == 0) return c;
    return NULL;
}

CANNSIM_API void cannsim_cache_add(aclOpExecutor *e, const cannsim_key *k) {
    if (!e || k->overflow || !cacheable()) return;
    uint64_t thread = this_thread(), h = key_hash(k, thread);
    struct cannsim_cache_entry *c = calloc(1, sizeof *c + k->len);
    if (!c) return; /* not cached: nothing else changes */
    cannsim_lock();
    if (entry_find(k, thread, h) || !cannsim_handle_live("executor", e)) { /* AddOpExecCache keeps the first */
        cannsim_unlock();
        free(c);
        return;
    }
    while (g_cache_count >= cache_limit() && g_oldest) { /* ShrinkCache: the oldest go first */
        for (int i = 0; i < CACHE_SHRINK && g_oldest; i++) entry_drop(g_oldest);
    }
    c->hash = h;
    c->thread = thread;
    c->workspace_size = e->workspace_size;
    memcpy(c->opdata, e->opdata, sizeof c->opdata);
    c->len = k->len;
    memcpy(c->key, k->buf, k->len);
    c->next_in_bucket = g_buckets[h % CACHE_BUCKETS];
    g_buckets[h % CACHE_BUCKETS] = c;
    c->older = g_newest;
    if (g_newest) g_newest->newer = c;
    else g_oldest = c;
    g_newest = c;
    c->linked = 1;
    c->held = 1;
    g_cache_count++;
    e->cache_entry = c;
    cannsim_unlock();
}

/* ====================================================================== executors */
static aclOpExecutor *executor_new(const char *func, const char *op, const cannsim_exec_io *io,
                                   uint64_t workspace_size, int empty, const void *opdata, size_t opdata_size,
                                   int wrapper) {
    if (io->nin > CANNSIM_EXEC_MAX_IO || io->nout > CANNSIM_EXEC_MAX_IO || io->narr > CANNSIM_EXEC_MAX_IO ||
        opdata_size > CANNSIM_EXEC_OPDATA || io->nin < 0 || io->nout < 0 || io->narr < 0) {
        cannsim_fail(ACLNN_ERR_INNER_CREATE_EXECUTOR, "%s: internal error creating the executor", func);
        return NULL;
    }
    aclOpExecutor *e = calloc(1, sizeof *e);
    if (!e) {
        cannsim_fail(ACLNN_ERR_INNER_CREATE_EXECUTOR, "%s: out of host memory creating the executor", func);
        return NULL;
    }
    e->magic = EXEC_MAGIC;
    snprintf(e->op, sizeof e->op, "%s", op);
    snprintf(e->names, sizeof e->names, "%s", io->names ? io->names : "");
    e->workspace_size = workspace_size;
    e->phase1 = t_phase1;
    e->empty = empty;
    e->wrapper = wrapper;
    e->nin = io->nin;
    e->nout = io->nout;
    e->narr = io->narr;
    cannsim_lock();
    for (int i = 0; i < io->nin; i++) {
        e->in_handle[i] = io->ins[i];
        if (io->ins[i] && cannsim_handle_live("tensor", io->ins[i])) {
            e->in_serial[i] = io->ins[i]->serial;
            e->in[i] = *io->ins[i];
        }
    }
    for (int i = 0; i < io->nout; i++) {
        e->out_handle[i] = io->outs[i];
        if (io->outs[i] && cannsim_handle_live("tensor", io->outs[i])) {
            e->out_serial[i] = io->outs[i]->serial;
            e->out[i] = *io->outs[i];
        }
    }
    for (int i = 0; i < io->narr; i++) {
        e->arr_handle[i] = io->arrays[i];
        if (io->arrays[i] && cannsim_handle_live("int_array", io->arrays[i])) e->arr_serial[i] = io->arrays[i]->serial;
    }
    if (opdata_size) memcpy(e->opdata, opdata, opdata_size);
    int rc = cannsim_handle_add("executor", e);
    cannsim_unlock();
    if (rc) {
        free(e);
        cannsim_fail(ACLNN_ERR_INNER_CREATE_EXECUTOR, "%s: out of host memory creating the executor", func);
        return NULL;
    }
    return e;
}

CANNSIM_API aclOpExecutor *cannsim_executor_create(const char *func, const char *op, const cannsim_exec_io *io,
                                                   uint64_t workspace_size, int empty, const void *opdata,
                                                   size_t opdata_size) {
    return executor_new(func, op, io, workspace_size, empty, opdata, opdata_size, 0);
}

CANNSIM_API aclOpExecutor *cannsim_cache_lookup(const char *func, const char *op, const cannsim_key *k,
                                                const cannsim_exec_io *io, uint64_t *ws) {
    t_phase1 = atomic_fetch_add(&g_phase1, 1) + 1; /* (GetFromCache runs with the cache off too) */
    if (k->overflow || !cacheable()) return NULL;
    uint64_t thread = this_thread(), h = key_hash(k, thread);
    unsigned char opdata[CANNSIM_EXEC_OPDATA];
    uint64_t size = 0;
    cannsim_lock();
    struct cannsim_cache_entry *c = entry_find(k, thread, h);
    int hit = c && c->usable;
    if (hit) {
        size = c->workspace_size;
        memcpy(opdata, c->opdata, sizeof opdata);
    }
    cannsim_unlock();
    if (!hit) return NULL;
    aclOpExecutor *e = executor_new(func, op, io, size, 0, opdata, sizeof opdata, 1);
    if (e) *ws = size;
    return e;
}

/* The name of the n-th handle in e->names (ins, then outs, then arrays). */
static void handle_name(const aclOpExecutor *e, int n, char *out, size_t len) {
    const char *p = e->names;
    for (int i = 0; i < n && p; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t m = p ? strcspn(p, ",") : 0;
    if (!m) snprintf(out, len, "argument %d", n);
    else snprintf(out, len, "%.*s", (int)m, p);
}

/* Lock held.  0, or CANNSIM_ERR_STALE_HANDLE with a message when a handle the executor refers to is gone (or
   a cache wrapper's tensor was pointed elsewhere, which the wrapper would silently ignore). */
static int check_handles(const char *func, const aclOpExecutor *e) {
    char name[64];
    for (int i = 0; i < e->nin + e->nout; i++) {
        int out = i >= e->nin;
        int j = out ? i - e->nin : i;
        const aclTensor *t = out ? e->out_handle[j] : e->in_handle[j];
        uint64_t serial = out ? e->out_serial[j] : e->in_serial[j];
        if (!t) continue;
        if (!cannsim_handle_live("tensor", t) || t->serial != serial) {
            handle_name(e, i, name, sizeof name);
            return cannsim_fail(CANNSIM_ERR_STALE_HANDLE,
                                "%s: %s (aclTensor %p) was destroyed after phase 1 and before the executor ran: "
                                "the executor refers to the caller's aclTensor, which must stay alive until the "
                                "executor is consumed or destroyed (a use after free on the device; "
                                "simulator-only code)",
                                func, name, (const void *)t);
        }
        const aclTensor *seen = out ? &e->out[j] : &e->in[j];
        if (e->wrapper && t->data != seen->data) {
            handle_name(e, i, name, sizeof name);
            return cannsim_fail(CANNSIM_ERR_STALE_HANDLE,
                                "%s: %s (aclTensor %p) now points at %p, but this executor is an op-cache wrapper, "
                                "which runs on the address phase 1 saw (%p) and ignores the change (silent on the "
                                "device; simulator-only code)",
                                func, name, (const void *)t, t->data, seen->data);
        }
    }
    for (int i = 0; i < e->narr; i++) {
        const aclIntArray *a = e->arr_handle[i];
        if (a && (!cannsim_handle_live("int_array", a) || a->serial != e->arr_serial[i])) {
            handle_name(e, e->nin + e->nout + i, name, sizeof name);
            return cannsim_fail(CANNSIM_ERR_STALE_HANDLE,
                                "%s: %s (aclIntArray %p) was destroyed after phase 1 and before the executor ran: "
                                "the executor refers to the caller's aclIntArray, which must stay alive until "
                                "the executor is consumed or destroyed (simulator-only code)",
                                func, name, (const void *)a);
        }
    }
    return 0;
}

static int gone(const char *func, const void *e) {
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                        "%s: executor %p was already used or destroyed (a non-repeatable executor runs once; call "
                        "aclSetAclOpExecutorRepeatable after phase 1 to reuse it)",
                        func, e);
}

CANNSIM_API int cannsim_executor_begin(const char *func, const char *op, aclOpExecutor *e, aclOpExecutor *snap) {
    if (!e) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL", func);
    cannsim_lock();
    if (!cannsim_handle_live("executor", e)) {
        cannsim_unlock();
        return gone(func, e);
    }
    if (strcmp(e->op, op) != 0) {
        char other[96];
        snprintf(other, sizeof other, "%s", e->op);
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: executor %p was created by operator %s, not %s", func,
                            (void *)e, other, op);
    }
    if (e->busy) {
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: executor %p is being run by another thread at the same time", func, (void *)e);
    }
    int rc = check_handles(func, e);
    if (rc) { /* phase 2 fails: a single-use executor (or wrapper) is consumed all the same */
        int release = !e->repeatable;
        if (release) {
            entry_release(e, 0);
            cannsim_handle_remove("executor", e);
        }
        cannsim_unlock();
        if (release) free(e);
        return rc;
    }
    *snap = *e;
    if (!e->wrapper) { /* a real executor reads the caller's tensors as they are now */
        for (int i = 0; i < e->nin; i++)
            if (e->in_handle[i]) snap->in[i] = *e->in_handle[i];
        for (int i = 0; i < e->nout; i++)
            if (e->out_handle[i]) snap->out[i] = *e->out_handle[i];
    }
    e->busy = 1;
    cannsim_unlock();
    return 0;
}

CANNSIM_API void cannsim_executor_finish(aclOpExecutor *e, int ok) {
    int release = 0;
    cannsim_lock();
    if (cannsim_handle_live("executor", e)) {
        e->busy = 0;
        if (ok) e->runs++;
        if (!e->repeatable) {
            entry_release(e, ok && !e->empty); /* a one-shot run that launched makes its entry usable */
            cannsim_handle_remove("executor", e);
            release = 1;
        }
    }
    cannsim_unlock();
    if (release) free(e);
}

CANNSIM_API void cannsim_executor_consume(aclOpExecutor *e) {
    int release = 0;
    if (!e) return;
    cannsim_lock();
    if (cannsim_handle_live("executor", e) && !e->busy && !e->repeatable) {
        entry_release(e, 0);
        cannsim_handle_remove("executor", e);
        release = 1;
    }
    cannsim_unlock();
    if (release) free(e);
}

CANNSIM_API void cannsim_executor_delete(aclOpExecutor *e) {
    int release = 0;
    cannsim_lock();
    if (cannsim_handle_live("executor", e)) {
        entry_release(e, 0); /* (the op cache's entry is marked invalid) */
        cannsim_handle_remove("executor", e);
        release = 1;
    }
    cannsim_unlock();
    if (release) free(e);
}

CANNSIM_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
    ENTER("aclSetAclOpExecutorRepeatable");
    /* OPB acl_op_api.cpp 476-488: NULL -> ACLNN_ERR_INNER_NULLPTR */
    if (!executor) return cannsim_fail(ACLNN_ERR_INNER_NULLPTR, "aclSetAclOpExecutorRepeatable: executor is NULL");
    cannsim_lock();
    int live = cannsim_handle_live("executor", executor);
    int wrapper = live && executor->wrapper;
    int stale = live && !wrapper && executor->phase1 != t_phase1;
    int refuse = live && !wrapper && !stale && !repeatable_on();
    if (live && !wrapper && !stale && !refuse) {
        executor->repeatable = 1;
        entry_release(executor, 0); /* SetRepeatable -> RemoveExecCache */
    }
    cannsim_unlock();
    if (!live) return gone("aclSetAclOpExecutorRepeatable", executor);
    if (wrapper) /* OPB acl_op_api.cpp: neither executor magic number -> ACLNN_ERR_INNER */
        return cannsim_fail(ACLNN_ERR_INNER,
                            "aclSetAclOpExecutorRepeatable: %p is an op-cache wrapper (phase 1 was answered from "
                            "nnopbase's op cache after an earlier one-shot call of the same shape), not an "
                            "executor: it cannot be made repeatable; run it once, or destroy it",
                            (void *)executor);
    if (stale) /* OPB op_executor.cpp SetRepeatable: the launchers' tensors are looked up in this thread's list */
        return cannsim_fail(ACLNN_ERR_INNER,
                            "aclSetAclOpExecutorRepeatable: executor %p was not made by the last phase 1 on this "
                            "thread (another thread made it, or a later phase 1 ran here since): its tensors are "
                            "not in this thread's list of the last call's tensors, so its launchers fail the "
                            "repeatable check; call it right after the executor's phase 1, on the same thread",
                            (void *)executor);
    if (refuse)
        return cannsim_fail(ACLNN_ERR_INNER,
                            "aclSetAclOpExecutorRepeatable: executor %p cannot be made repeatable (a kernel "
                            "launcher of its operator is not repeatable; CANN_SIM_REPEATABLE=0 models this)",
                            (void *)executor);
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
    ENTER("aclDestroyAclOpExecutor");
    /* OPB acl_op_api.cpp 490-506: NULL is an error, not a no-op */
    if (!executor) return cannsim_fail(ACLNN_ERR_INNER_NULLPTR, "aclDestroyAclOpExecutor: executor is NULL");
    cannsim_lock();
    if (!cannsim_handle_live("executor", executor)) {
        cannsim_unlock();
        return gone("aclDestroyAclOpExecutor", executor);
    }
    if (executor->busy) {
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyAclOpExecutor: executor %p is being run by another thread", (void *)executor);
    }
    entry_release(executor, 0); /* deleted without a run: Finalize finds no launch, the entry is invalid */
    cannsim_handle_remove("executor", executor);
    cannsim_unlock();
    free(executor);
    return ACLNN_SUCCESS;
}

static aclnnStatus set_addr(const char *func, aclOpExecutor *e, size_t index, aclTensor *tensor, void *addr, int out) {
    /* OPB acl_op_api.cpp 325-352: the tensor is checked first, then the executor; both ACLNN_ERR_INNER_NULLPTR */
    if (!tensor) return cannsim_fail(ACLNN_ERR_INNER_NULLPTR, "%s: tensor is NULL", func);
    if (!e) return cannsim_fail(ACLNN_ERR_INNER_NULLPTR, "%s: executor is NULL", func);
    cannsim_lock();
    if (!cannsim_handle_live("executor", e)) {
        cannsim_unlock();
        return gone(func, e);
    }
    int n = out ? e->nout : e->nin;
    if (index >= (size_t)n) {
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s index %zu is out of range (operator %s has %d %ss)", func,
                            out ? "output" : "input", index, e->op, n, out ? "output" : "input");
    }
    if (!cannsim_handle_live("tensor", tensor)) {
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: tensor %p is not a live aclTensor (keep the tensors of a repeatable executor alive "
                            "while it is reused)",
                            func, (void *)tensor);
    }
    const aclTensor *bound = out ? e->out_handle[index] : e->in_handle[index];
    if (bound != tensor) {
        cannsim_unlock();
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: tensor %p is not the tensor bound to %s %zu at phase 1 (%p)", func, (void *)tensor,
                            out ? "output" : "input", index, (const void *)bound);
    }
    tensor->data = addr;
    int wrapper = e->wrapper;
    cannsim_unlock();
    if (wrapper) /* nnopbase sets the tensor's address and returns OK; the wrapper keeps the old one */
        return cannsim_fail(CANNSIM_ERR_STALE_HANDLE,
                            "%s: executor %p is an op-cache wrapper, which runs on the addresses phase 1 saw: the "
                            "new address would be ignored (silent on the device; simulator-only code)",
                            func, (void *)e);
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor,
                                              void *addr) {
    ENTER("aclSetInputTensorAddr");
    return set_addr("aclSetInputTensorAddr", executor, index, tensor, addr, 0);
}

CANNSIM_API aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor,
                                               void *addr) {
    ENTER("aclSetOutputTensorAddr");
    return set_addr("aclSetOutputTensorAddr", executor, index, tensor, addr, 1);
}

/* ---------------------------------------------------------------- not implemented */
#define NOT_SUPPORTED(name) \
    cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: not implemented by the CANN simulator", name)

CANNSIM_API aclnnStatus aclSetTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr) {
    (void)executor, (void)index, (void)tensor, (void)addr;
    ENTER("aclSetTensorAddr");
    return NOT_SUPPORTED("aclSetTensorAddr");
}

CANNSIM_API aclnnStatus aclSetDynamicInputTensorAddr(aclOpExecutor *executor, size_t irIndex,
                                                     const size_t relativeIndex, void *tensors, void *addr) {
    (void)executor, (void)irIndex, (void)relativeIndex, (void)tensors, (void)addr;
    ENTER("aclSetDynamicInputTensorAddr");
    return NOT_SUPPORTED("aclSetDynamicInputTensorAddr");
}

CANNSIM_API aclnnStatus aclSetDynamicOutputTensorAddr(aclOpExecutor *executor, size_t irIndex,
                                                      const size_t relativeIndex, void *tensors, void *addr) {
    (void)executor, (void)irIndex, (void)relativeIndex, (void)tensors, (void)addr;
    ENTER("aclSetDynamicOutputTensorAddr");
    return NOT_SUPPORTED("aclSetDynamicOutputTensorAddr");
}
