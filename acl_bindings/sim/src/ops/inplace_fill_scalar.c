/*
 * inplace_fill_scalar.c - the simulated two-phase aclnnInplaceFillScalar(selfRef, value): every element of
 * selfRef becomes value, converted to selfRef's dtype (as op-plugin calls it
 * for fill_ and for the ones of an implicit gradient, FillKernelNpuOpApi.cpp).  Phase 1 checks the handles, the
 * dtype and the memory, and reads the scalar (a scalar may be destroyed after phase 1, as op-plugin does);
 * phase 2 queues the fill on the stream.
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "opapi.h"
#include "scalar.h"

#include <stdlib.h>
#include <string.h>

#define P1 "aclnnInplaceFillScalarGetWorkspaceSize"
#define P2 "aclnnInplaceFillScalar"
#define OP "InplaceFillScalar"

CANNSIM_REGISTER_OP("aclnnInplaceFillScalarGetWorkspaceSize", "aclnnInplaceFillScalar")

typedef struct {
    double value;
} op_data;

typedef struct {
    ew_view self;
    double value;
} fill_args;

CANNSIM_API aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *value,
                                                               uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!selfRef) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: selfRef is NULL", P1);
    if (!value) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: value is NULL", P1);
    aclTensor self;
    const opapi_handle handles[1] = {{"selfRef", selfRef, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 1);
    if (!rc) self = *selfRef;
    cannsim_unlock();
    if (rc) return rc;
    int sdtype;
    unsigned char sbytes[8];
    if ((rc = cannsim_scalar_read(P1, value, &sdtype, sbytes))) return rc;

    const aclTensor *outs[1] = {selfRef};
    cannsim_exec_io io = {NULL, 0, outs, 1, NULL, 0, "selfRef"};
    const opapi_tensor tout[1] = {{"selfRef", &self}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &self, 0);
    cannsim_key_bytes(&key, &sdtype, sizeof sdtype);
    cannsim_key_bytes(&key, sbytes, sizeof sbytes);
    if (opapi_phase1_cached(P1, OP, &key, &io, NULL, 0, tout, 1, workspaceSize, executor, &rc)) return rc;

    if (!ew_dtype_ok(self.dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: selfRef has dtype %d, which the simulator's fill does not "
                            "support (float32, float16, bfloat16, float64, int8..int64, uint8, bool)", P1, self.dtype);
    if (!ew_dtype_ok(sdtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: value has dtype %d, which the simulator's fill does not "
                            "support", P1, sdtype);
    op_data od = {ew_load(sdtype, sbytes)};
    int64_t numel = 1;
    for (int64_t i = 0; i < self.ndim; i++) numel *= self.dims[i];
    if (numel == 0) return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(P1, "selfRef", &self))) return rc;
    if ((rc = opapi_check_memory(P1, NULL, 0, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    const aclTensor *t = &snap->out[0];
    fill_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    a->value = od.value;
    a->self.ndim = t->ndim;
    a->self.dtype = t->dtype;
    memcpy(a->self.size, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(a->self.stride, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    a->self.data = (char *)t->data + t->offset * cannsim_dtype_size(t->dtype);
    return a;
}

static int fill_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    fill_args *a = arg;
    int64_t n = ew_numel(&a->self);
    for (int64_t i = 0; i < n; i++) ew_store(a->self.dtype, a->self.data + ew_offset(&a->self, i), a->value);
    return 0;
}

static const opapi_kernel k_kernel = {make_args, fill_task, free, NULL};

CANNSIM_API aclnnStatus aclnnInplaceFillScalar(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                               aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
