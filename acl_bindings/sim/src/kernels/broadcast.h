/*
 * broadcast.h - two shapes broadcast together (opbase's BroadcastInferShape: aligned at the right, each pair of
 * dims equal or one of them 1) and a tensor's view seen with a broadcast shape; shared by the simulated losses
 * (ops/mse_loss.c, ops/mse_loss_backward.c) and the reductions' shape check (kernels/reduce.c).
 */
#ifndef CANNSIM_BROADCAST_H
#define CANNSIM_BROADCAST_H

#include "cannsim.h"
#include "kernels/elementwise.h"

#include <stdint.h>

/* A shape (at most CANNSIM_MAX_DIMS dims). */
typedef struct {
    int64_t ndim;
    int64_t dims[CANNSIM_MAX_DIMS];
} bc_shape;

/* The shape of t. */
void bc_of(bc_shape *sh, const aclTensor *t);

/* The broadcast of shapes a and b (names for the message) into *r.  Returns 0, or 161002 with a message naming
   the first pair of dims that neither equal nor is 1 (func: the entry point). */
int bc_infer(const char *func, const char *a_name, const bc_shape *a, const char *b_name, const bc_shape *b,
             bc_shape *r);

/* Whether shapes a and b are the same. */
int bc_same(const bc_shape *a, const bc_shape *b);

/* Returns 0 when out's shape is want, else 161002 with a message naming both shapes (what: "broadcast",
   "reduced"...). */
int bc_check_out(const char *func, const char *out_name, const aclTensor *out, const bc_shape *want,
                 const char *what);

/* The view of t (which broadcasts to sh) with sh's ndim and sizes: stride 0 where t broadcasts. */
void bc_view(ew_view *v, const aclTensor *t, const bc_shape *sh);

/* Number of elements of a shape. */
int64_t bc_numel(const bc_shape *sh);

#endif
