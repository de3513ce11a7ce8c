/*
 * upsample_nearest_exact3d_backward.c - the simulated two-phase aclnnUpsampleNearestExact3dBackward
 * (cann-abi.md §1.4, §5.1), one operator of the operator library.
 *
 * Phase 1 validates like the host API (us3d_check, §5.1 step 3), then - stricter than hardware -
 * checks that both tensors' data ranges lie in live simulated device memory, resolves the scales
 * (§5.2) and returns a non-zero workspace size.  Phase 2 validates the workspace and the (possibly
 * updated) tensor addresses and queues the kernel (us3d_run) on the stream.
 */
#define _GNU_SOURCE
#include "kernels/us3d_kernel.h"
#include "opapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"
#define P2 "aclnnUpsampleNearestExact3dBackward"
#define OP "UpsampleNearestExact3dBackward"

CANNSIM_REGISTER_OP("aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward")

typedef struct {
    float scale[3];
    int dtype;
    int tiled_on_a2; /* the Atlas A2/A3 tiling runs at launch (not Ascend950's, which has no scale check) */
} op_data;

/* Logical NCDHW sizes and element strides of a 5-D tensor, by its own format (§5.1 step 3.4). */
static void ncdhw(const aclTensor *t, int64_t size[5], int64_t stride[5]) {
    opapi_ncdhw(t, t->format == ACL_FORMAT_NDHWC, size, stride);
}

static void fill_meta(const aclTensor *t, us3d_tensor_meta *m) {
    memset(m, 0, sizeof *m);
    if (!t) return;
    m->present = 1;
    m->dtype = t->dtype;
    m->format = t->format;
    m->ndim = t->ndim;
    for (int64_t i = 0; i < t->ndim && i < 8; i++) m->dims[i] = t->dims[i];
}

static void fill_array(const aclIntArray *a, us3d_array_meta *m) {
    memset(m, 0, sizeof *m);
    if (!a) return;
    m->present = 1;
    m->len = (int64_t)a->len;
    for (uint64_t i = 0; i < a->len && i < 8; i++) m->vals[i] = a->vals[i];
}

/* An array's values in the op-cache key, from the copy made under the lock (arrays longer than the copy fail
   phase 1's length checks, so they never reach a usable entry). */
static void key_array(cannsim_key *k, const us3d_array_meta *m) {
    opapi_key_array(k, m ? m->vals : NULL, m ? m->len : 0, 8);
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD,
    double scalesH, double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;

    /* copy the descriptors while checking that the handles are live */
    aclTensor go, gi;
    us3d_tensor_meta mgo, mgi;
    us3d_array_meta mos, mis;
    const opapi_handle handles[4] = {
        {"gradOut", gradOut, 0}, {"outputSize", outputSize, 1}, {"inputSize", inputSize, 1}, {"gradInput", gradInput, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 4);
    if (!rc) {
        fill_meta(gradOut, &mgo);
        fill_meta(gradInput, &mgi);
        fill_array(outputSize, &mos);
        fill_array(inputSize, &mis);
        if (gradOut) go = *gradOut;
        if (gradInput) gi = *gradInput;
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[1] = {gradOut};
    const aclTensor *outs[1] = {gradInput};
    const aclIntArray *arrays[2] = {outputSize, inputSize};
    cannsim_exec_io io = {ins, 1, outs, 1, arrays, 2, "gradOut,gradInput,outputSize,inputSize"};
    const opapi_tensor tin[1] = {{"gradOut", &go}}, tout[1] = {{"gradInput", &gi}};

    /* L2_DFX_PHASE_1: the op cache answers before any check (cann-abi.md §8.6) */
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, gradOut ? &go : NULL, 0);
    key_array(&key, outputSize ? &mos : NULL);
    key_array(&key, inputSize ? &mis : NULL);
    cannsim_key_bytes(&key, &scalesD, sizeof scalesD);
    cannsim_key_bytes(&key, &scalesH, sizeof scalesH);
    cannsim_key_bytes(&key, &scalesW, sizeof scalesW);
    cannsim_key_tensor(&key, gradInput ? &gi : NULL, gradInput && gradInput == gradOut ? 0 : 1);
    /* IsRegBase(): Ascend950 skips CheckUplimit (cann-abi.md §5, §5.1 step 3.5) */
    const int regbase = strncmp(cannsim_soc_name(), "Ascend950", 9) == 0;
    cannsim_key_bytes(&key, &regbase, sizeof regbase);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    char msg[600];
    msg[0] = 0;
    rc = us3d_check(&mgo, &mos, &mis, scalesD, scalesH, scalesW, &mgi, regbase, msg, sizeof msg);
    if (rc) return cannsim_fail(rc, "%s: %s", P1, msg[0] ? msg : "invalid arguments");

    int64_t go_size[5], go_stride[5], gi_size[5], gi_stride[5];
    ncdhw(&go, go_size, go_stride);
    ncdhw(&gi, gi_size, gi_stride);
    op_data od;
    memset(&od, 0, sizeof od);
    od.dtype = go.dtype;
    od.tiled_on_a2 = !regbase;

    if (go_size[0] == 0 || go_size[1] == 0) /* empty gradOut (§5.1 step 4): nothing to launch */
        return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);

    /* l0op::Contiguous(gradOut) comes right after the empty-tensor return; ViewCopy into gradInput last */
    if ((rc = opapi_check_view_in_storage(P1, "gradOut", &go))) return rc;
    if ((rc = opapi_check_view_copy_format(P1, "gradOut", &go, "gradInput", &gi))) return rc;
    if ((rc = opapi_check_view_in_storage(P1, "gradInput", &gi))) return rc;
    if ((rc = opapi_check_memory(P1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;

    int64_t out3[3] = {go_size[2], go_size[3], go_size[4]};
    int64_t in3[3] = {gi_size[2], gi_size[3], gi_size[4]};
    us3d_resolve_scales(scalesD, scalesH, scalesW, out3, in3, od.scale);
    uint64_t ws = opapi_no_kernel_for_soc(NULL, 0) ? 0 : us3d_workspace_bytes(go_size, gi_size);
    if (ws == UINT64_MAX)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the workspace for these sizes does not fit in 64 bits", P1);
    return opapi_phase1_done(P1, OP, &io, &key, ws, 0, &od, sizeof od, workspaceSize, executor);
}

/* The kernel's arguments from phase 2's snapshot of the executor: its tensors hold the current addresses. */
static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    const aclTensor *go = &snap->in[0], *gi = &snap->out[0];
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    us3d_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->dtype = od.dtype;
    int isz = cannsim_dtype_size(od.dtype);
    ncdhw(go, a->go_size, a->go_stride);
    ncdhw(gi, a->gi_size, a->gi_stride);
    a->go_data = (const char *)go->data + (uint64_t)go->offset * (uint64_t)isz;
    a->gi_data = (char *)gi->data + (uint64_t)gi->offset * (uint64_t)isz;
    memcpy(a->scale, od.scale, sizeof a->scale);
    a->workspace = workspace;
    a->workspace_size = workspaceSize;
    return a;
}

static int kernel_task(void *arg, char *msg, size_t msglen) {
    us3d_args *a = arg;
    int rc = us3d_run(a);
    if (rc) {
        snprintf(msg, msglen, "%s kernel failed (us3d_run returned %d)", P2, rc);
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    return 0;
}

/* The Atlas A2/A3 tiling checks the scales the kernel gets (§5.1 step 6, §5.2): each > 50 is refused.  When
   not all three user scales are > 0 they are outputSize/inputSize in float in every dim, which phase 1's
   check (user scale where given) lets through.  Phase 1 still succeeds: the L0 op does not look at the
   launcher's status, so the launch tiles again, fails, and nnopbase reports 561103 there. */
static int tiling_refuses(const aclOpExecutor *snap, char *msg, size_t msglen) {
    if (opapi_no_kernel_for_soc(msg, msglen)) return ACLNN_ERR_INNER;
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    for (int k = 0; od.tiled_on_a2 && k < 3; k++) {
        if (od.scale[k] > (float)US3D_MAX_SCALE) {
            snprintf(msg, msglen, "the kernel's tiling (Atlas A2/A3) refused scale%c = %g: the scales the kernel "
                     "gets must be <= %g, and with not all three scales > 0 they are outputSize/inputSize",
                     "DHW"[k], (double)od.scale[k], US3D_MAX_SCALE);
            return ACLNN_ERR_INNER_NULLPTR;
        }
    }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, kernel_task, free, tiling_refuses};

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dBackward(void *workspace, uint64_t workspaceSize,
                                                            aclOpExecutor *executor, aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
