/*
 * nnopbase.c - simulated libnnopbase: aclTensor, aclIntArray and aclOpExecutor handling
 * (cann-abi.md §1.2, §1.3; codes §3.5).  Every handle lives in a registry kept by the runtime
 * library, so a stale, foreign or doubly destroyed handle is reported (161002) instead of being
 * dereferenced.
 */
#define _GNU_SOURCE
#include "cannsim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TENSOR_MAGIC 0x54454e534f52ULL   /* "TENSOR" */
#define ARRAY_MAGIC 0x494e544152ULL      /* "INTAR" */
#define EXEC_MAGIC 0x45584543ULL         /* "EXEC" */
#define MAX_ARRAY_LEN (1ULL << 24)

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

/* ====================================================================== executors */
CANNSIM_API aclOpExecutor *cannsim_executor_create(const char *func, const char *op, const aclTensor *const *ins,
                                                   int nin, const aclTensor *const *outs, int nout,
                                                   uint64_t workspace_size, int empty, const void *opdata,
                                                   size_t opdata_size) {
    if (nin > CANNSIM_EXEC_MAX_IO || nout > CANNSIM_EXEC_MAX_IO || opdata_size > CANNSIM_EXEC_OPDATA || nin < 0 ||
        nout < 0) {
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
    e->workspace_size = workspace_size;
    e->empty = empty;
    e->nin = nin;
    e->nout = nout;
    cannsim_lock();
    for (int i = 0; i < nin; i++) {
        e->in_handle[i] = ins[i];
        if (ins[i] && cannsim_handle_live("tensor", ins[i])) e->in[i] = *ins[i];
    }
    for (int i = 0; i < nout; i++) {
        e->out_handle[i] = outs[i];
        if (outs[i] && cannsim_handle_live("tensor", outs[i])) e->out[i] = *outs[i];
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
    *snap = *e;
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
        cannsim_handle_remove("executor", e);
        release = 1;
    }
    cannsim_unlock();
    if (release) free(e);
}

CANNSIM_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
    ENTER("aclSetAclOpExecutorRepeatable");
    if (!executor) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "aclSetAclOpExecutorRepeatable: executor is NULL");
    cannsim_lock();
    int live = cannsim_handle_live("executor", executor);
    if (live) executor->repeatable = 1;
    cannsim_unlock();
    if (!live) return gone("aclSetAclOpExecutorRepeatable", executor);
    return ACLNN_SUCCESS;
}

CANNSIM_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
    ENTER("aclDestroyAclOpExecutor");
    if (!executor) return ACLNN_SUCCESS;
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
    cannsim_handle_remove("executor", executor);
    cannsim_unlock();
    free(executor);
    return ACLNN_SUCCESS;
}

static aclnnStatus set_addr(const char *func, aclOpExecutor *e, size_t index, aclTensor *tensor, void *addr, int out) {
    if (!e) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL", func);
    if (!tensor) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: tensor is NULL", func);
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
    if (out) e->out[index].data = addr;
    else e->in[index].data = addr;
    cannsim_unlock();
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
