/*
 * reduce.c - the dim checks, reduced shape and sums shared by the simulated reductions (reduce.h).
 */
#define _GNU_SOURCE
#include "kernels/reduce.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rd_phase1_start(const char *p1, const char *op, rd_call *c, const aclTensor *self, const aclIntArray *dim,
                    _Bool keepDim, int dtype, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor,
                    int *rc) {
    if ((*rc = opapi_phase1_enter(p1, workspaceSize, executor))) return 1;
    if (!self) return *rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", p1), 1;
    if (!dim) return *rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: dim is NULL", p1), 1;
    if (!out) return *rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", p1), 1;
    memset(c, 0, sizeof *c);
    const opapi_handle handles[3] = {{"self", self, 0}, {"dim", dim, 1}, {"out", out, 0}};
    cannsim_lock();
    *rc = opapi_check_live_locked(p1, handles, 3);
    if (!*rc) {
        c->s = *self;
        c->o = *out;
        c->ndims = (int64_t)dim->len;
        for (int64_t i = 0; i < c->ndims && i < CANNSIM_MAX_DIMS; i++) c->dims[i] = dim->vals[i];
    }
    cannsim_unlock();
    if (*rc) return 1;
    c->ins[0] = self;
    c->outs[0] = out;
    c->arrays[0] = dim;
    c->io = (cannsim_exec_io){c->ins, 1, c->outs, 1, c->arrays, 1, "self,out,dim"};
    c->tin[0] = (opapi_tensor){"self", &c->s};
    c->tout[0] = (opapi_tensor){"out", &c->o};
    cannsim_key_init(&c->key, p1);
    cannsim_key_tensor(&c->key, &c->s, 0);
    opapi_key_array(&c->key, c->dims, c->ndims, CANNSIM_MAX_DIMS);
    unsigned char kd = keepDim ? 1 : 0;
    cannsim_key_bytes(&c->key, &kd, 1);
    cannsim_key_bytes(&c->key, &dtype, sizeof dtype);
    cannsim_key_tensor(&c->key, &c->o, 1);
    return opapi_phase1_cached(p1, op, &c->key, &c->io, c->tin, 1, c->tout, 1, workspaceSize, executor, rc);
}

int rd_phase1_done(const char *p1, const char *op, rd_call *c, int read_self, int empty, const void *opdata,
                   size_t opdata_size, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc;
    if (empty) return opapi_phase1_done(p1, op, &c->io, &c->key, 0, 1, opdata, opdata_size, workspaceSize, executor);
    if ((read_self && (rc = opapi_check_view_in_storage(p1, "self", &c->s))) ||
        (rc = opapi_check_view_in_storage(p1, "out", &c->o)) ||
        (rc = opapi_check_memory(p1, c->tin, read_self ? 1 : 0, c->tout, 1, NULL, 0, NULL)))
        return rc;
    return opapi_phase1_done(p1, op, &c->io, &c->key, 0, 0, opdata, opdata_size, workspaceSize, executor);
}

int rd_dims(const char *func, const int64_t *dims, int64_t n, int64_t ndim, unsigned char reduced[CANNSIM_MAX_DIMS]) {
    memset(reduced, 0, CANNSIM_MAX_DIMS);
    int64_t nd = ndim > 0 ? ndim : 1; /* a 0-d self takes dim 0 or -1 */
    for (int64_t i = 0; i < n; i++) {
        int64_t d = dims[i];
        if (d < -nd || d >= nd)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim[%" PRId64 "] = %" PRId64 " is outside [%" PRId64
                                ", %" PRId64 ")", func, i, d, -nd, nd);
        if (d < 0) d += nd;
        if (ndim == 0) continue;
        if (reduced[d]) return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim %" PRId64 " appears twice in dim", func, d);
        reduced[d] = 1;
    }
    if (n == 0)
        for (int64_t d = 0; d < ndim; d++) reduced[d] = 1;
    return 0;
}

void rd_shape(const aclTensor *self, const unsigned char *reduced, int keep, bc_shape *want) {
    int64_t k = 0;
    for (int64_t d = 0; d < self->ndim; d++)
        if (!reduced[d]) want->dims[k++] = self->dims[d];
        else if (keep) want->dims[k++] = 1;
    want->ndim = k;
}

void rd_make(rd_args *a, const aclTensor *s, const aclTensor *o, const unsigned char *reduced) {
    memset(a, 0, sizeof *a);
    a->self.ndim = a->out.ndim = s->ndim;
    memcpy(a->reduced, reduced, sizeof a->reduced);
    a->self.dtype = s->dtype;
    a->out.dtype = o->dtype;
    int64_t onumel = 1;
    for (int64_t d = 0; d < o->ndim; d++) onumel *= o->dims[d];
    int keep = o->ndim == s->ndim;
    for (int64_t d = 0, j = 0; d < s->ndim; d++) {
        a->self.size[d] = a->out.size[d] = s->dims[d];
        a->self.stride[d] = s->strides[d];
        if (reduced[d]) {
            a->out.stride[d] = 0;
            if (keep) j++;
        } else {
            a->out.stride[d] = onumel == 1 ? 0 : o->strides[j];
            j++;
        }
    }
    a->self.data = (char *)s->data + s->offset * cannsim_dtype_size(s->dtype);
    a->out.data = (char *)o->data + o->offset * cannsim_dtype_size(o->dtype);
}

int rd_reduce(const rd_args *a, int calc, double (*fin)(const void *ctx, double sum), const void *ctx,
              const char *func, char *msg, size_t msglen) {
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
        snprintf(msg, msglen, "%s: out of host memory", func);
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    int64_t n = ew_numel(&a->self);
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, j = 0;
        for (int64_t d = a->self.ndim - 1; d >= 0; d--) {
            j += (rest % a->self.size[d]) * lin[d];
            rest /= a->self.size[d];
        }
        double v = ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i));
        acc[j] += calc < 0 ? v : ew_round(calc, v);
    }
    for (int64_t j = 0; j < nout; j++)
        ew_store(ov.dtype, ov.data + ew_offset(&ov, j), fin ? fin(ctx, acc[j]) : acc[j]);
    free(acc);
    return 0;
}
