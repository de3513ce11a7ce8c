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

typedef struct {
    ew_view self, out; /* out with self's ndim: stride 0 on the reduced dims */
    unsigned char reduced[CANNSIM_MAX_DIMS];
} sum_args;

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
    memset(&od, 0, sizeof od);
    int64_t nd = s.ndim > 0 ? s.ndim : 1; /* a 0-d self takes dim 0 or -1 */
    for (int64_t i = 0; i < ndims; i++) {
        int64_t d = dims[i];
        if (d < -nd || d >= nd)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim[%" PRId64 "] = %" PRId64 " is outside [%" PRId64
                                ", %" PRId64 ")", P1, i, d, -nd, nd);
        if (d < 0) d += nd;
        if (s.ndim == 0) continue;
        if (od.reduced[d])
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim %" PRId64 " appears twice in dim", P1, d);
        od.reduced[d] = 1;
    }
    if (ndims == 0)
        for (int64_t d = 0; d < s.ndim; d++) od.reduced[d] = 1;
    int64_t want[CANNSIM_MAX_DIMS], nwant = 0;
    for (int64_t d = 0; d < s.ndim; d++)
        if (!od.reduced[d]) want[nwant++] = s.dims[d];
        else if (keepDim) want[nwant++] = 1;
    int shape_ok = o.ndim == nwant;
    for (int64_t d = 0; shape_ok && d < nwant; d++) shape_ok = o.dims[d] == want[d];
    if (!shape_ok) {
        char w[200] = "", g[200] = "";
        size_t a = 0, b = 0;
        for (int64_t d = 0; d < nwant && a < sizeof w; d++) a += (size_t)snprintf(w + a, sizeof w - a, "%s%" PRId64, d ? "," : "", want[d]);
        for (int64_t d = 0; d < o.ndim && b < sizeof g; d++) b += (size_t)snprintf(g + b, sizeof g - b, "%s%" PRId64, d ? "," : "", o.dims[d]);
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has shape [%s] but the reduced shape is [%s]", P1, g, w);
    }
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
    const aclTensor *s = &snap->in[0], *o = &snap->out[0];
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    sum_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->self.ndim = a->out.ndim = s->ndim;
    memcpy(a->reduced, od.reduced, sizeof a->reduced);
    a->self.dtype = s->dtype;
    a->out.dtype = o->dtype;
    int keep = o->ndim == s->ndim;
    for (int64_t d = 0, j = 0; d < s->ndim; d++) {
        a->self.size[d] = a->out.size[d] = s->dims[d];
        a->self.stride[d] = s->strides[d];
        if (od.reduced[d]) {
            a->out.stride[d] = 0;
            if (keep) j++;
        } else {
            a->out.stride[d] = o->strides[j++];
        }
    }
    a->self.data = (char *)s->data + s->offset * cannsim_dtype_size(s->dtype);
    a->out.data = (char *)o->data + o->offset * cannsim_dtype_size(o->dtype);
    return a;
}

/* Each out element's sum is accumulated in a double, then rounded once to out's dtype. */
static int sum_task(void *arg, char *msg, size_t msglen) {
    sum_args *a = arg;
    ew_view ov = a->self; /* out's elements, each once: self's view without the reduced dims */
    int64_t lin[CANNSIM_MAX_DIMS], k = 0, nout = 1;
    for (int64_t d = a->self.ndim - 1; d >= 0; d--) {
        lin[d] = a->reduced[d] ? 0 : nout;
        if (!a->reduced[d]) nout *= a->self.size[d];
    }
    for (int64_t d = 0; d < a->self.ndim; d++)
        if (!a->reduced[d]) {
            ov.size[k] = a->out.size[d];
            ov.stride[k++] = a->out.stride[d];
        }
    ov.ndim = k;
    ov.dtype = a->out.dtype;
    ov.data = a->out.data;
    double *acc = calloc((size_t)nout, sizeof *acc);
    if (!acc) {
        snprintf(msg, msglen, "%s: out of host memory", P2);
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    int64_t n = ew_numel(&a->self);
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, j = 0;
        for (int64_t d = a->self.ndim - 1; d >= 0; d--) {
            j += (rest % a->self.size[d]) * lin[d];
            rest /= a->self.size[d];
        }
        acc[j] += ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i));
    }
    for (int64_t j = 0; j < nout; j++) ew_store(ov.dtype, ov.data + ew_offset(&ov, j), acc[j]);
    free(acc);
    return 0;
}

static const opapi_kernel k_kernel = {make_args, sum_task, free, NULL};

CANNSIM_API aclnnStatus aclnnReduceSum(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                       aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
