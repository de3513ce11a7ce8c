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

#include <stdint.h>

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

/* The sums: one double per out element, in row-major order of the kept dims, each element of self first rounded to
   calc (ew_round; calc < 0: as loaded).  *ov receives out's view over those elements (ew_offset(ov, j) is sum j's
   place).  Returns the array (free it), or NULL when out of host memory. */
double *rd_sums(const rd_args *a, int calc, ew_view *ov);

#endif
