/*
 * inplace_fill_scalar.c - the simulated two-phase aclnnInplaceFillScalar(selfRef, value) and
 * aclnnInplaceZero(selfRef): every element of selfRef becomes value (converted to selfRef's dtype), or 0 (as
 * op-plugin calls them for fill_ and the ones of an implicit gradient, FillKernelNpuOpApi.cpp, and for zero_ and
 * zeros_like, ZeroKernelNpuOpApi.cpp).  Phase 1 checks the handles, the dtype and the memory, and reads the scalar
 * (a scalar may be destroyed after phase 1, as op-plugin does); phase 2 queues the fill on the stream.
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "opapi.h"
#include "scalar.h"

#include <stdlib.h>
#include <string.h>

#define FILL_P1 "aclnnInplaceFillScalarGetWorkspaceSize"
#define FILL_P2 "aclnnInplaceFillScalar"
#define FILL_OP "InplaceFillScalar"
#define ZERO_P1 "aclnnInplaceZeroGetWorkspaceSize"
#define ZERO_P2 "aclnnInplaceZero"
#define ZERO_OP "InplaceZero"

CANNSIM_REGISTER_OP("aclnnInplaceFillScalarGetWorkspaceSize", "aclnnInplaceFillScalar",
                    "aclnnInplaceZeroGetWorkspaceSize", "aclnnInplaceZero")

typedef struct {
    double value;
} op_data;

typedef struct {
    ew_view self;
    double value;
} fill_args;

/* Phase 1 of either: selfRef filled with the scalar *value*, or with 0 when has_value is 0. */
static aclnnStatus fill_phase1(const char *p1, const char *op, aclTensor *selfRef, int has_value,
                               const aclScalar *value, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(p1, workspaceSize, executor);
    if (rc) return rc;
    if (!selfRef) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: selfRef is NULL", p1);
    if (has_value && !value) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: value is NULL", p1);
    aclTensor self;
    const opapi_handle handles[1] = {{"selfRef", selfRef, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(p1, handles, 1);
    if (!rc) self = *selfRef;
    cannsim_unlock();
    if (rc) return rc;
    int sdtype = self.dtype;
    unsigned char sbytes[8] = {0};
    if (has_value && (rc = cannsim_scalar_read(p1, value, &sdtype, sbytes))) return rc;

    const aclTensor *outs[1] = {selfRef};
    cannsim_exec_io io = {NULL, 0, outs, 1, NULL, 0, "selfRef"};
    const opapi_tensor tout[1] = {{"selfRef", &self}};
    cannsim_key key;
    cannsim_key_init(&key, p1);
    cannsim_key_tensor(&key, &self, 0);
    if (has_value) {
        cannsim_key_bytes(&key, &sdtype, sizeof sdtype);
        cannsim_key_bytes(&key, sbytes, sizeof sbytes);
    }
    if (opapi_phase1_cached(p1, op, &key, &io, NULL, 0, tout, 1, workspaceSize, executor, &rc)) return rc;

    if (!ew_dtype_ok(self.dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: selfRef has dtype %d, which the simulator's fill does not "
                            "support (float32, float16, bfloat16, float64, int8..int64, uint8, bool)", p1, self.dtype);
    if (has_value && !ew_dtype_ok(sdtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: value has dtype %d, which the simulator's fill does not "
                            "support", p1, sdtype);
    op_data od = {has_value ? ew_load(sdtype, sbytes) : 0.0};
    int64_t numel = 1;
    for (int64_t i = 0; i < self.ndim; i++) numel *= self.dims[i];
    if (numel == 0) return opapi_phase1_done(p1, op, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(p1, "selfRef", &self))) return rc;
    if ((rc = opapi_check_memory(p1, NULL, 0, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(p1, op, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor *selfRef, const aclScalar *value,
                                                               uint64_t *workspaceSize, aclOpExecutor **executor) {
    return fill_phase1(FILL_P1, FILL_OP, selfRef, 1, value, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor *selfRef, uint64_t *workspaceSize,
                                                         aclOpExecutor **executor) {
    return fill_phase1(ZERO_P1, ZERO_OP, selfRef, 0, NULL, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    const aclTensor *t = &snap->out[0];
    fill_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    a->value = od.value;
    ew_view_as(&a->self, t, t);
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
    return opapi_phase2(FILL_P2, FILL_OP, workspace, workspaceSize, executor, stream, &k_kernel);
}

CANNSIM_API aclnnStatus aclnnInplaceZero(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                         aclrtStream stream) {
    return opapi_phase2(ZERO_P2, ZERO_OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
