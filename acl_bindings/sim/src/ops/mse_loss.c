/*
 * mse_loss.c - the simulated two-phase aclnnMseLoss(self, target, reduction, out): the squared differences of
 * self and target (broadcast together), each one (reduction 0, "none"), their mean (1) or their sum (2).
 * op-plugin's mse_loss and mse_loss.out call it (MseLossKernelNpuOpApi.cpp, DO_COMPATIBILITY(aclnnMseLoss)), with
 * out of the promoted dtype and, for mean and sum, 0-d.
 * The rules follow ops-nn loss/mse_loss/op_api/aclnn_mse_loss.cpp (CheckParams, aclnnMseLossGetWorkspaceSize) and
 * loss/common/level2_base_loss.h (CheckDtypeValidMseLoss, CheckReductionMseLoss), for Atlas A2/A3:
 * - self, target and out NULL: 161001;
 * - PromoteType(self, target), self, target and out each float32, float16 or bfloat16: else 161002;
 * - reduction in [0, 2]: else 161002;
 * - self and target at most 8 dims and broadcasting together; out of the broadcast shape (none) or 0-d (mean,
 *   sum): else 161002;
 * - an empty self or target: nothing to do (none), out = NaN (mean), 0 (sum) (CheckFillScalarLoss).
 * Numerics: self and target are cast to the promoted dtype and broadcast (BroadcastTo), MSELossV2 (loss/mse_loss_v2/
 * op_kernel: float32 for all three dtypes) computes d = a - b and d * d in float32 and, for mean and sum, a sum
 * (tiles halved pairwise, each tile's sum times scale = float32(1 / n) for mean, partial sums added across cores:
 * mse_loss_v2_sum.h ReduceSumBisect, arch22 tiling), rounded to the promoted dtype; then a Cast to out's dtype.
 * The simulator sums the float32 squares in double (not the device's order), then multiplies by float32(1 / n)
 * and rounds to float32.
 */
#define _GNU_SOURCE
#include "kernels/broadcast.h"
#include "kernels/elementwise.h"
#include "opapi.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnMseLossGetWorkspaceSize"
#define P2 "aclnnMseLoss"
#define OP "MseLoss"

CANNSIM_REGISTER_OP("aclnnMseLossGetWorkspaceSize", "aclnnMseLoss")

typedef struct {
    bc_shape shape; /* self and target broadcast */
    int64_t reduction;
    int calc;  /* the promoted dtype */
    int empty; /* an empty input: out = NaN (mean) or 0 (sum) */
} op_data;

typedef struct {
    ew_view self, target, out;
    op_data k;
} mse_args;

/* float32, float16, bfloat16: the loss functions' list on Atlas A2/A3 */
static int loss_dtype_ok(int dt) { return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16; }

static int check_dtypes(const aclTensor *s, const aclTensor *t, const aclTensor *o, int *calc) {
    static const char *const list = "float32, float16, bfloat16";
    if (!ew_dtype_ok(s->dtype) || !ew_dtype_ok(t->dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self (dtype %d) and target (dtype %d) must be promotable "
                            "to one of %s", P1, s->dtype, t->dtype, list);
    *calc = ew_promote(s->dtype, t->dtype);
    if (!loss_dtype_ok(*calc))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self (%s) and target (%s) promote to %s, not one of %s", P1,
                            ew_dtype_name(s->dtype), ew_dtype_name(t->dtype), ew_dtype_name(*calc), list);
    const aclTensor *ts[3] = {s, t, o};
    static const char *const names[3] = {"self", "target", "out"};
    for (int k = 0; k < 3; k++)
        if (!loss_dtype_ok(ts[k]->dtype))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %s (%d), not one of %s", P1, names[k],
                                ew_dtype_name(ts[k]->dtype), ts[k]->dtype, list);
    return 0;
}

CANNSIM_API aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor *self, const aclTensor *target,
                                                     int64_t reduction, aclTensor *out, uint64_t *workspaceSize,
                                                     aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", P1);
    if (!target) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: target is NULL", P1);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", P1);
    aclTensor s, t, o;
    const opapi_handle handles[3] = {{"self", self, 0}, {"target", target, 0}, {"out", out, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 3);
    if (!rc) {
        s = *self;
        t = *target;
        o = *out;
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[2] = {self, target};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, 2, outs, 1, NULL, 0, "self,target,out"};
    const opapi_tensor tin[2] = {{"self", &s}, {"target", &t}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &s, 0);
    cannsim_key_tensor(&key, &t, target == self ? 0 : 2);
    cannsim_key_bytes(&key, &reduction, sizeof reduction);
    cannsim_key_tensor(&key, &o, 1);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 2, tout, 1, workspaceSize, executor, &rc)) return rc;

    op_data od;
    memset(&od, 0, sizeof od);
    od.reduction = reduction;
    if ((rc = check_dtypes(&s, &t, &o, &od.calc))) return rc;
    if (reduction < 0 || reduction > 2)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: reduction is %" PRId64 ", not 0 (none), 1 (mean) or 2 "
                            "(sum)", P1, reduction);
    if (s.ndim > 8 || t.ndim > 8)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %" PRId64 " dims, more than 8", P1,
                            s.ndim > 8 ? "self" : "target", s.ndim > 8 ? s.ndim : t.ndim);
    bc_shape ss, ts;
    bc_of(&ss, &s);
    bc_of(&ts, &t);
    if ((rc = bc_infer(P1, "self", &ss, "target", &ts, &od.shape))) return rc;
    if (reduction == 0) {
        if ((rc = bc_check_out(P1, "out", &o, &od.shape, "broadcast"))) return rc;
    } else if (o.ndim != 0) {
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has %" PRId64 " dims, but reduction %" PRId64 " wants a "
                            "0-d out", P1, o.ndim, reduction);
    }
    od.empty = bc_numel(&ss) == 0 || bc_numel(&ts) == 0;
    if (od.empty && reduction == 0)
        return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if (!od.empty && ((rc = opapi_check_view_in_storage(P1, "self", &s)) ||
                      (rc = opapi_check_view_in_storage(P1, "target", &t))))
        return rc;
    if ((rc = opapi_check_view_in_storage(P1, "out", &o))) return rc;
    /* each input against out (self and target may share memory) */
    for (int k = 0; k < (od.empty ? 0 : 2); k++)
        if ((rc = opapi_check_memory(P1, tin + k, 1, tout, 1, NULL, 0, NULL))) return rc;
    if (od.empty && (rc = opapi_check_memory(P1, NULL, 0, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    mse_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    bc_view(&a->self, &snap->in[0], &a->k.shape);
    bc_view(&a->target, &snap->in[1], &a->k.shape);
    ew_view_as(&a->out, &snap->out[0], &snap->out[0]);
    return a;
}

/* element i's square, in float32: the inputs cast to the promoted dtype, then to float32 */
static float square(const mse_args *a, int64_t i) {
    float x = (float)ew_round(a->k.calc, ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i)));
    float y = (float)ew_round(a->k.calc, ew_load(a->target.dtype, a->target.data + ew_offset(&a->target, i)));
    float d = x - y;
    return d * d;
}

static int mse_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    mse_args *a = arg;
    const op_data *k = &a->k;
    int64_t n = ew_numel(&a->self);
    if (k->reduction == 0) {
        for (int64_t i = 0; i < n; i++)
            ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), ew_round(k->calc, square(a, i)));
        return 0;
    }
    double r;
    if (k->empty) {
        r = k->reduction == 1 ? NAN : 0.0;
    } else {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += square(a, i);
        r = k->reduction == 1 ? (double)((float)sum * (float)(1.0 / (double)n)) : (double)(float)sum;
    }
    ew_store(a->out.dtype, a->out.data, ew_round(k->calc, r));
    return 0;
}

static const opapi_kernel k_kernel = {make_args, mse_task, free, NULL};

CANNSIM_API aclnnStatus aclnnMseLoss(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                     aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
