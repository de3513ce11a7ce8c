/*
 * mean.c - the simulated two-phase aclnnMean(self, dim, keepDim, dtype, out): out = the mean of self, cast to
 * dtype, over the dims in dim (every dim when dim is empty), the reduced dims kept as size 1 when keepDim, cast to
 * out's dtype.  op-plugin's mean and mean.dim call it with every dim listed when none is given
 * (MeanKernelNpuOpApi.cpp, DO_COMPATIBILITY(aclnnMean)).
 * The rules follow ops-math math/reduce_mean/op_api/aclnn_mean.cpp (aclnnMeanGetWorkspaceSize, CheckParams) and
 * reduce_mean.cpp (l0op::ReduceMean, ReduceMeanInferShape), for Atlas A2/A3:
 * - self, dim and out NULL: 161001;
 * - self, dtype and out in float32, int32, int64, float16, int16, int8, uint8, float64, bfloat16 (and the complex
 *   types, which the simulator does not have): else 161002 (bool is refused);
 * - self must cast to dtype and dtype to out (CanCast: no floating to integral, no non-bool to bool): else 161002;
 * - each dim in [-n, n) (n = max(self's dims, 1)), none repeated; self and out at most 8 dims: else 161002;
 * - an empty self fills out with NaN (out's dtype in the list above plus bool; no shape check) - the simulator
 *   writes NaN rounded to out's dtype, 0 for an integral out (what the device writes there was not read);
 * - else out's shape must be the reduced shape, or both hold one element (CheckShapeAndScalarSame): else 161002.
 * Numerics: self is cast to dtype (Contiguous, Cast), ReduceMean computes in dtype, the result is cast to out's
 * dtype.  The Atlas A2 ReduceMean kernel's source is not public; the arch35 one (op_kernel/arch35/reduce_mean_dag.h)
 * casts float16/bfloat16 to float32, sums, multiplies by a factor and casts back.  The simulator, for float16,
 * bfloat16 and float32: each element in float32, the sum accumulated in double (the device's summation order is not
 * known), times float32(1/n), rounded to float32, then to dtype; float64: sum / n in double; integral dtypes (AI CPU
 * Mean): sum / n in double, truncated toward zero (not read from a source).
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "opapi.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnMeanGetWorkspaceSize"
#define P2 "aclnnMean"
#define OP "Mean"

CANNSIM_REGISTER_OP("aclnnMeanGetWorkspaceSize", "aclnnMean")

typedef struct {
    unsigned char reduced[CANNSIM_MAX_DIMS];
    int dtype;     /* the compute dtype */
    int empty;     /* self is empty: out is filled with NaN */
    int64_t count; /* elements per mean */
} op_data;

typedef struct {
    rd_args r;
    op_data k;
} mean_args;

/* aclnn_mean.cpp ASCEND910B_DTYPE_SUPPORT_LIST, less the complex types */
static int mean_dtype_ok(int dt) { return ew_dtype_ok(dt) && dt != ACL_BOOL; }

static int check_dtypes(const aclTensor *s, int dtype, const aclTensor *o) {
    const char *why;
    static const char *const list = "float32, int32, int64, float16, int16, int8, uint8, float64, bfloat16";
    if (!mean_dtype_ok(s->dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self has dtype %s (%d), not one of %s", P1,
                            ew_dtype_name(s->dtype), s->dtype, list);
    if (!mean_dtype_ok(dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dtype is %s (%d), not one of %s", P1, ew_dtype_name(dtype),
                            dtype, list);
    if (!mean_dtype_ok(o->dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has dtype %s (%d), not one of %s", P1,
                            ew_dtype_name(o->dtype), o->dtype, list);
    if ((why = ew_cast_refused(s->dtype, dtype)))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self's dtype %s cannot be cast to dtype %s (%s)", P1,
                            ew_dtype_name(s->dtype), ew_dtype_name(dtype), why);
    if ((why = ew_cast_refused(dtype, o->dtype)))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dtype %s cannot be cast to out's dtype %s (%s)", P1,
                            ew_dtype_name(dtype), ew_dtype_name(o->dtype), why);
    return 0;
}

static int64_t numel_of(const aclTensor *t) {
    int64_t n = 1;
    for (int64_t i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

CANNSIM_API aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, _Bool keepDim,
                                                  int dtype, aclTensor *out, uint64_t *workspaceSize,
                                                  aclOpExecutor **executor) {
    rd_call c;
    int rc;
    if (rd_phase1_start(P1, OP, &c, self, dim, keepDim, dtype, out, workspaceSize, executor, &rc)) return rc;
    const aclTensor s = c.s, o = c.o;
    const int64_t ndims = c.ndims, *const dims = c.dims;

    if ((rc = check_dtypes(&s, dtype, &o))) return rc;
    int64_t nd = s.ndim > 0 ? s.ndim : 1;
    if (ndims > CANNSIM_MAX_DIMS)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dim has %" PRId64 " entries, so one of them is outside "
                            "[%" PRId64 ", %" PRId64 ") or repeated", P1, ndims, -nd, nd);
    op_data od;
    memset(&od, 0, sizeof od);
    if ((rc = rd_dims(P1, dims, ndims, s.ndim, od.reduced))) return rc;
    if (s.ndim > 8 || o.ndim > 8)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %" PRId64 " dims, more than 8", P1,
                            s.ndim > 8 ? "self" : "out", s.ndim > 8 ? s.ndim : o.ndim);
    od.dtype = dtype;
    od.count = 1;
    for (int64_t d = 0; d < s.ndim; d++)
        if (od.reduced[d]) od.count *= s.dims[d];
    if (numel_of(&s) == 0) {
        od.empty = 1;
    } else {
        bc_shape want;
        rd_shape(&s, od.reduced, keepDim, &want);
        if (!(bc_numel(&want) == 1 && numel_of(&o) == 1) && (rc = bc_check_out(P1, "out", &o, &want, "reduced")))
            return rc;
    }
    return rd_phase1_done(P1, OP, &c, !od.empty, numel_of(&o) == 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    mean_args *a = malloc(sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    rd_make(&a->r, &snap->in[0], &snap->out[0], a->k.reduced);
    if (a->k.empty) ew_view_as(&a->r.out, &snap->out[0], &snap->out[0]);
    return a;
}

/* The mean of one out element from its sum (elements already cast to dtype), rounded to dtype. */
static double mean_of(const void *ctx, double sum) {
    const op_data *k = ctx;
    double n = (double)k->count;
    if (k->dtype == ACL_DOUBLE) return sum / n;
    if (!ew_is_floating(k->dtype)) return ew_round(k->dtype, trunc(sum / n));
    float scale = (float)(1.0 / n);
    return ew_round(k->dtype, (double)(float)((double)(float)sum * (double)scale));
}

static int mean_task(void *arg, char *msg, size_t msglen) {
    mean_args *a = arg;
    if (a->k.empty) { /* out holds NaN (0 in an integral out: ew_store's NaN) */
        int64_t n = ew_numel(&a->r.out);
        for (int64_t i = 0; i < n; i++) ew_store(a->r.out.dtype, a->r.out.data + ew_offset(&a->r.out, i), NAN);
        return 0;
    }
    /* each element cast to dtype (then in float32 where the kernel computes in float32: exact) */
    return rd_reduce(&a->r, a->k.dtype, mean_of, &a->k, P2, msg, msglen);
}

static const opapi_kernel k_kernel = {make_args, mean_task, free, NULL};

CANNSIM_API aclnnStatus aclnnMean(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                  aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
