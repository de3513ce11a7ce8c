/*
 * reduce.h - what the simulated reductions share (ops/reduce_sum.c, ops/mean.c): the dim list's checks (each in
 * [-ndim, ndim), none twice; an empty list reduces every dim), the reduced shape, and a sum of each output
 * element over the reduced dims, accumulated in double.
 */
#ifndef CANNSIM_REDUCE_H
#define CANNSIM_REDUCE_H

#include "cannsim.h"
#include "kernels/broadcast.h"
#include "kernels/elementwise.h"
#include "opapi.h"

#include <stdint.h>

/* A reduction's phase 1 (aclnnReduceSum and aclnnMean share the signature self, dim, keepDim, dtype, out): copies of
   the handles, the dims and what the op cache and the memory checks need. */
typedef struct {
    aclTensor s, o;
    int64_t dims[CANNSIM_MAX_DIMS]; /* the first CANNSIM_MAX_DIMS of dim's values */
    int64_t ndims;                  /* dim's length */
    const aclTensor *ins[1], *outs[1];
    const aclIntArray *arrays[1];
    cannsim_exec_io io;
    opapi_tensor tin[1], tout[1];
    cannsim_key key;
} rd_call;

/* Phase 1's start: count the call, NULL handles (161001), live handles, the copies, the op-cache key.  Returns 1
   when phase 1 is over (an error, or the op cache answered), with its status in *rc; else 0 to run the checks. */
int rd_phase1_start(const char *p1, const char *op, rd_call *c, const aclTensor *self, const aclIntArray *dim,
                    _Bool keepDim, int dtype, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor,
                    int *rc);

/* Phase 1's end: views in storage, memory (self not read when !read_self) and the executor with opdata; empty:
   nothing to launch. */
int rd_phase1_done(const char *p1, const char *op, rd_call *c, int read_self, int empty, const void *opdata,
                   size_t opdata_size, uint64_t *workspaceSize, aclOpExecutor **executor);

/* Mark in reduced[] (zeroed here) the dims of a self with ndim dims that dims[0..n) names; a 0-d self takes dim 0
   or -1 and reduces nothing.  Returns 0, or 161002 with a message (func: the entry point) naming the dim. */
int rd_dims(const char *func, const int64_t *dims, int64_t n, int64_t ndim, unsigned char reduced[CANNSIM_MAX_DIMS]);

/* The reduced shape of self (keep: reduced dims stay as 1); check out against it with bc_check_out. */
void rd_shape(const aclTensor *self, const unsigned char *reduced, int keep, bc_shape *want);

/* A reduction's views: self, and out seen with self's ndim (stride 0 on the reduced dims; an out of one element
   has stride 0 on every dim). */
typedef struct {
    ew_view self, out;
    unsigned char reduced[CANNSIM_MAX_DIMS];
} rd_args;

void rd_make(rd_args *a, const aclTensor *self, const aclTensor *out, const unsigned char *reduced);

/* The reduction's task: per out element, the sum over the reduced dims of self's elements (each first rounded to
   calc by ew_round; calc < 0: as loaded), accumulated in double, then fin(ctx, sum) (fin NULL: the sum) stored into
   out (ew_store's rounding).  Returns 0, or 507000 with a message (func: the entry point) out of host memory. */
int rd_reduce(const rd_args *a, int calc, double (*fin)(const void *ctx, double sum), const void *ctx,
              const char *func, char *msg, size_t msglen);

#endif
