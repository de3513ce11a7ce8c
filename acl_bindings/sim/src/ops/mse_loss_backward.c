/*
 * mse_loss_backward.c - the simulated two-phase aclnnMseLossBackward(gradOutput, self, target, reduction, out):
 * out = (self - target) * cof * gradOutput, the three broadcast together, with cof = 2 / n for reduction 1 (mean;
 * n = self's element count) and 2 for 0 (none) and 2 (sum).  op-plugin's mse_loss_backward and its grad_input form
 * call it (op_plugin_functions.yaml, gen_opapi exec aclnnMseLossBackward; out of self's dtype); torch's autograd
 * passes the 0-d gradient of a mean or sum loss as gradOutput.
 * The rules follow ops-nn loss/mse_loss_grad_v2/op_host/op_api/aclnn_mse_loss_backward.cpp (CheckParams,
 * CheckDtypeValid, CheckShape), for Atlas A2/A3:
 * - gradOutput, self, target and out NULL: 161001;
 * - gradOutput and target of self's dtype; self and out float32, float16 or bfloat16: else 161002;
 * - reduction in [0, 2]: else 161002;
 * - gradOutput, self, target at most 8 dims; gradOutput and self broadcast together, target with that shape, out
 *   of the result: else 161002;
 * - an empty gradOutput, self or target: nothing to do (workspace 0).
 * Numerics: MseLossGradV2 (same shapes) and MseLossGrad (otherwise; its public AscendC form is ops-nn
 * experimental/loss/mse_loss_grad) compute in float32 (float16 and bfloat16 cast up): (self - target) * cof, times
 * gradOutput, each step rounded to float32, cast to self's dtype (CAST_RINT), then a Cast to out's dtype.  cof is
 * float32: 1.0f / n * 2.0f with n the float32 product of self's dims (mse_loss_grad_v2_tiling.cpp), or 2.0f.
 */
#define _GNU_SOURCE
#include "kernels/broadcast.h"
#include "kernels/elementwise.h"
#include "opapi.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnMseLossBackwardGetWorkspaceSize"
#define P2 "aclnnMseLossBackward"
#define OP "MseLossGrad"

CANNSIM_REGISTER_OP("aclnnMseLossBackwardGetWorkspaceSize", "aclnnMseLossBackward")

typedef struct {
    bc_shape shape; /* out's: the three broadcast */
    float cof;
} op_data;

typedef struct {
    ew_view grad, self, target, out;
    op_data k;
} grad_args;

static int loss_dtype_ok(int dt) { return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16; }

static int check_dtypes(const aclTensor *g, const aclTensor *s, const aclTensor *t, const aclTensor *o) {
    static const char *const list = "float32, float16, bfloat16";
    if (g->dtype != s->dtype)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: gradOutput has dtype %s (%d) but self %s (%d): they must be "
                            "the same", P1, ew_dtype_name(g->dtype), g->dtype, ew_dtype_name(s->dtype), s->dtype);
    if (t->dtype != s->dtype)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: target has dtype %s (%d) but self %s (%d): they must be "
                            "the same", P1, ew_dtype_name(t->dtype), t->dtype, ew_dtype_name(s->dtype), s->dtype);
    if (!loss_dtype_ok(s->dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self has dtype %s (%d), not one of %s", P1,
                            ew_dtype_name(s->dtype), s->dtype, list);
    if (!loss_dtype_ok(o->dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has dtype %s (%d), not one of %s", P1,
                            ew_dtype_name(o->dtype), o->dtype, list);
    return 0;
}

CANNSIM_API aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                             const aclTensor *target, int64_t reduction,
                                                             aclTensor *out, uint64_t *workspaceSize,
                                                             aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!gradOutput) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: gradOutput is NULL", P1);
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", P1);
    if (!target) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: target is NULL", P1);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", P1);
    aclTensor g, s, t, o;
    const opapi_handle handles[4] = {
        {"gradOutput", gradOutput, 0}, {"self", self, 0}, {"target", target, 0}, {"out", out, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 4);
    if (!rc) {
        g = *gradOutput;
        s = *self;
        t = *target;
        o = *out;
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[3] = {gradOutput, self, target};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, 3, outs, 1, NULL, 0, "gradOutput,self,target,out"};
    const opapi_tensor tin[3] = {{"gradOutput", &g}, {"self", &s}, {"target", &t}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &g, 0);
    cannsim_key_tensor(&key, &s, self == gradOutput ? 0 : 2);
    cannsim_key_tensor(&key, &t, target == gradOutput ? 0 : target == self ? (self == gradOutput ? 0 : 2) : 3);
    cannsim_key_bytes(&key, &reduction, sizeof reduction);
    cannsim_key_tensor(&key, &o, 1);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 3, tout, 1, workspaceSize, executor, &rc)) return rc;

    if ((rc = check_dtypes(&g, &s, &t, &o))) return rc;
    if (reduction < 0 || reduction > 2)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: reduction is %" PRId64 ", not 0 (none), 1 (mean) or 2 "
                            "(sum)", P1, reduction);
    for (int k = 0; k < 3; k++)
        if (tin[k].t->ndim > 8)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %" PRId64 " dims, more than 8", P1, tin[k].name,
                                tin[k].t->ndim);
    bc_shape gs, ss, ts, b1;
    op_data od;
    memset(&od, 0, sizeof od);
    bc_of(&gs, &g);
    bc_of(&ss, &s);
    bc_of(&ts, &t);
    if ((rc = bc_infer(P1, "gradOutput", &gs, "self", &ss, &b1)) ||
        (rc = bc_infer(P1, "target", &ts, "the broadcast of gradOutput and self", &b1, &od.shape)) ||
        (rc = bc_check_out(P1, "out", &o, &od.shape, "broadcast")))
        return rc;
    if (reduction == 1) {
        float n = 1.0f;
        for (int64_t d = 0; d < s.ndim; d++) n = n * (float)s.dims[d];
        od.cof = 1.0f / n * 2.0f;
    } else {
        od.cof = 2.0f;
    }
    if (bc_numel(&gs) == 0 || bc_numel(&ss) == 0 || bc_numel(&ts) == 0)
        return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    for (int k = 0; k < 3; k++)
        if ((rc = opapi_check_view_in_storage(P1, tin[k].name, tin[k].t))) return rc;
    if ((rc = opapi_check_view_in_storage(P1, "out", &o))) return rc;
    for (int k = 0; k < 3; k++) /* each input against out (inputs may share memory) */
        if ((rc = opapi_check_memory(P1, tin + k, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    grad_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    bc_view(&a->grad, &snap->in[0], &a->k.shape);
    bc_view(&a->self, &snap->in[1], &a->k.shape);
    bc_view(&a->target, &snap->in[2], &a->k.shape);
    ew_view_as(&a->out, &snap->out[0], &snap->out[0]);
    return a;
}

static int grad_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    grad_args *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t i = 0; i < n; i++) {
        float x = (float)ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i));
        float y = (float)ew_load(a->target.dtype, a->target.data + ew_offset(&a->target, i));
        float g = (float)ew_load(a->grad.dtype, a->grad.data + ew_offset(&a->grad, i));
        float d = x - y;
        float r = (d * a->k.cof) * g;
        ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), ew_round(a->self.dtype, r));
    }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, grad_task, free, NULL};

CANNSIM_API aclnnStatus aclnnMseLossBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                             aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
