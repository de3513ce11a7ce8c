/*
 * reduce_sum.c - the simulated two-phase aclnnReduceSum(self, dim, keepDim, dtype, out): out = the sum of self
 * over the dims in dim (all dims when dim is empty), kept as size 1 when keepDim (as
 * op-plugin calls it for sum, SumKernelNpuOpApi.cpp).  Phase 1 checks the handles, the dims (in
 * [-ndim, ndim), no repeats), that out has dtype and the reduced shape (161002 otherwise) and the memory;
 * phase 2 queues the sum, accumulated in double (how the device accumulates was not read) and rounded
 * once to out's dtype.
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "opapi.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnReduceSumGetWorkspaceSize"
#define P2 "aclnnReduceSum"
#define OP "ReduceSum"

CANNSIM_REGISTER_OP("aclnnReduceSumGetWorkspaceSize", "aclnnReduceSum")

typedef struct {
    unsigned char reduced[CANNSIM_MAX_DIMS]; /* self's dims summed over */
} op_data;

CANNSIM_API aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, _Bool keepDim,
                                                       int dtype, aclTensor *out, uint64_t *workspaceSize,
                                                       aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", P1);
    if (!dim) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: dim is NULL", P1);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", P1);
    aclTensor s, o;
    int64_t dims[CANNSIM_MAX_DIMS];
    int64_t ndims = 0;
    const opapi_handle handles[3] = {{"self", self, 0}, {"dim", dim, 1}, {"out", out, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 3);
    if (!rc) {
        s = *self;
        o = *out;
        ndims = (int64_t)dim->len;
        for (int64_t i = 0; i < ndims && i < CANNSIM_MAX_DIMS; i++) dims[i] = dim->vals[i];
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[1] = {self};
    const aclTensor *outs[1] = {out};
    const aclIntArray *arrays[1] = {dim};
    cannsim_exec_io io = {ins, 1, outs, 1, arrays, 1, "self,out,dim"};
    const opapi_tensor tin[1] = {{"self", &s}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &s, 0);
    opapi_key_array(&key, dims, ndims, CANNSIM_MAX_DIMS);
    unsigned char kd = keepDim ? 1 : 0;
    cannsim_key_bytes(&key, &kd, 1);
    cannsim_key_bytes(&key, &dtype, sizeof dtype);
    cannsim_key_tensor(&key, &o, 1);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    if (!ew_dtype_ok(s.dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self has dtype %d, which the simulator's sum does not "
                            "support (float32, float16, bfloat16, float64, int8..int64, uint8, bool)", P1, s.dtype);
    if (o.dtype != dtype)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has dtype %d but dtype is %d: they must be the same",
                            P1, o.dtype, dtype);
    if (!ew_dtype_ok(dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dtype %d is not supported by the simulator's sum", P1, dtype);
    if (ndims > s.ndim && !(s.ndim == 0 && ndims == 1))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim has %" PRId64 " entries but self has %" PRId64 " dims",
                            P1, ndims, s.ndim);
    op_data od;
    if ((rc = rd_dims(P1, dims, ndims, s.ndim, od.reduced))) return rc;
    bc_shape want;
    rd_shape(&s, od.reduced, keepDim, &want);
    if ((rc = bc_check_out(P1, "out", &o, &want, "reduced"))) return rc;
    int64_t numel = 1;
    for (int64_t i = 0; i < o.ndim; i++) numel *= o.dims[i];
    if (numel == 0) return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(P1, "self", &s))) return rc;
    if ((rc = opapi_check_view_in_storage(P1, "out", &o))) return rc;
    if ((rc = opapi_check_memory(P1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    rd_args *a = malloc(sizeof *a);
    if (a) rd_make(a, &snap->in[0], &snap->out[0], od.reduced);
    return a;
}

/* Each out element's sum is accumulated in a double, then rounded once to out's dtype. */
static int sum_task(void *arg, char *msg, size_t msglen) {
    ew_view ov;
    double *acc = rd_sums(arg, -1, &ov);
    if (!acc) {
        snprintf(msg, msglen, "%s: out of host memory", P2);
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    int64_t nout = ew_numel(&ov);
    for (int64_t j = 0; j < nout; j++) ew_store(ov.dtype, ov.data + ew_offset(&ov, j), acc[j]);
    free(acc);
    return 0;
}

static const opapi_kernel k_kernel = {make_args, sum_task, free, NULL};

CANNSIM_API aclnnStatus aclnnReduceSum(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
