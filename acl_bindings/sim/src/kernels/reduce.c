/*
 * reduce.c - the dim checks, reduced shape and sums shared by the simulated reductions (reduce.h).
 */
#define _GNU_SOURCE
#include "kernels/reduce.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

double *rd_sums(const rd_args *a, int calc, ew_view *ov) {
    *ov = a->self; /* out's elements, each once: self's view without the reduced dims */
    int64_t lin[CANNSIM_MAX_DIMS], k = 0, nout = 1;
    for (int64_t d = a->self.ndim - 1; d >= 0; d--) {
        lin[d] = a->reduced[d] ? 0 : nout;
        if (!a->reduced[d]) nout *= a->self.size[d];
    }
    for (int64_t d = 0; d < a->self.ndim; d++)
        if (!a->reduced[d]) {
            ov->size[k] = a->out.size[d];
            ov->stride[k++] = a->out.stride[d];
        }
    ov->ndim = k;
    ov->dtype = a->out.dtype;
    ov->data = a->out.data;
    double *acc = calloc((size_t)nout, sizeof *acc);
    if (!acc) return NULL;
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
    return acc;
}
