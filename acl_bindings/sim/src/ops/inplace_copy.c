/*
 * inplace_copy.c - the simulated two-phase aclnnInplaceCopy(selfRef, src): selfRef = src, src broadcast to
 * selfRef's shape and converted to its dtype (as op-plugin calls it for device-to-device copy_,
 * CopyKernelOpApi.cpp).  Phase 1 checks the handles, the dtypes, that src broadcasts to selfRef (161002
 * otherwise) and the memory (the two must not overlap: stricter than the device); phase 2 queues the copy.
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "opapi.h"

#include <stdlib.h>
#include <string.h>

#define P1 "aclnnInplaceCopyGetWorkspaceSize"
#define P2 "aclnnInplaceCopy"
#define OP "InplaceCopy"

CANNSIM_REGISTER_OP("aclnnInplaceCopyGetWorkspaceSize", "aclnnInplaceCopy")

typedef struct {
    ew_view dst, src; /* src with selfRef's ndim and sizes, stride 0 where broadcast */
} copy_args;

CANNSIM_API aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src,
                                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!selfRef) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: selfRef is NULL", P1);
    if (!src) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: src is NULL", P1);
    aclTensor self, s;
    const opapi_handle handles[2] = {{"selfRef", selfRef, 0}, {"src", src, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 2);
    if (!rc) {
        self = *selfRef;
        s = *src;
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[1] = {src};
    const aclTensor *outs[1] = {selfRef};
    cannsim_exec_io io = {ins, 1, outs, 1, NULL, 0, "src,selfRef"};
    const opapi_tensor tin[1] = {{"src", &s}}, tout[1] = {{"selfRef", &self}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &self, 0);
    cannsim_key_tensor(&key, &s, src == selfRef ? 0 : 1);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    for (int k = 0; k < 2; k++) {
        const aclTensor *t = k ? &s : &self;
        if (!ew_dtype_ok(t->dtype))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator's copy does not "
                                "support (float32, float16, bfloat16, float64, int8..int64, uint8, bool)", P1,
                                k ? "src" : "selfRef", t->dtype);
    }
    if ((rc = opapi_check_broadcast(P1, "src", &s, "selfRef", &self))) return rc;
    int64_t numel = 1;
    for (int64_t i = 0; i < self.ndim; i++) numel *= self.dims[i];
    if (numel == 0) return opapi_phase1_done(P1, OP, &io, &key, 0, 1, NULL, 0, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(P1, "src", &s))) return rc;
    if ((rc = opapi_check_view_in_storage(P1, "selfRef", &self))) return rc;
    if ((rc = opapi_check_memory(P1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, NULL, 0, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    const aclTensor *d = &snap->out[0], *s = &snap->in[0];
    copy_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    ew_view_as(&a->dst, d, d);
    ew_view_as(&a->src, s, d);
    return a;
}

static int copy_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    copy_args *a = arg;
    int64_t n = ew_numel(&a->dst);
    int same = a->dst.dtype == a->src.dtype, isz = cannsim_dtype_size(a->dst.dtype);
    for (int64_t i = 0; i < n; i++) {
        char *dp = a->dst.data + ew_offset(&a->dst, i);
        const char *sp = a->src.data + ew_offset(&a->src, i);
        if (same) memcpy(dp, sp, (size_t)isz); /* a bit copy, NaN payloads included */
        else ew_store(a->dst.dtype, dp, ew_load(a->src.dtype, sp));
    }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, copy_task, free, NULL};

CANNSIM_API aclnnStatus aclnnInplaceCopy(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                         aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
