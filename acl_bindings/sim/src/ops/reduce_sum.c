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
    rd_call c;
    int rc;
    if (rd_phase1_start(P1, OP, &c, self, dim, keepDim, dtype, out, workspaceSize, executor, &rc)) return rc;
    const aclTensor s = c.s, o = c.o;
    const int64_t ndims = c.ndims, *const dims = c.dims;

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
    return rd_phase1_done(P1, OP, &c, 1, numel == 0, &od, sizeof od, workspaceSize, executor);
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
    return rd_reduce(arg, -1, NULL, NULL, P2, msg, msglen);
}

static const opapi_kernel k_kernel = {make_args, sum_task, free, NULL};

CANNSIM_API aclnnStatus aclnnReduceSum(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
