/*
 * upsample_nearest_exact3d_backward.c - the simulated two-phase aclnnUpsampleNearestExact3dBackward
 * (cann-abi.md §1.4, §5.1), one operator of the operator library.
 *
 * Phase 1 validates like the host API (us3d_check, §5.1 step 3), then - stricter than hardware -
 * checks that both tensors' data ranges lie in live simulated device memory, resolves the scales
 * (§5.2) and reports the workspace CANN plans (the A2/A3 tiling's ask, at least 16 MiB, and the chain's
 * intermediates: cann-abi.md §10.8).  Phase 2 validates the workspace and the (possibly updated) tensor
 * addresses and queues the kernel (us3d_run, on its own host scratch) on the stream.
 */
#define _GNU_SOURCE
#include "kernels/us3d_kernel.h"
#include "opapi.h"

#include <inttypes.h>
#include <stdint.h>
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

/* ---------------------------------------------------------------- the Atlas A2/A3 tiling's workspace ask */
/* OCV image/upsample_nearest3d_grad/op_host/upsample_nearest3d_grad_tiling.cpp (cann-abi.md §10.8): the kernel
   resizes W, H and D one after another with matrix products; the workspace holds the intermediate matrices after
   the W and H passes, one weight matrix per core used, all in float32, plus a fixed 16 MiB. */
#define TILING_FIXED ((uint64_t)16 << 20)

static int close_to(float a, float b) { return (a > b ? a - b : b - a) < 1e-6f; }

static int64_t ceil_f(float x) { /* the tiling's Ceil: within 1e-6 of its truncation is that value */
    if (!(x < 9.0e18f)) return INT64_MAX / 4; /* (then capped by O) */
    int64_t t = (int64_t)x;
    return close_to(x, (float)t) ? t : t + 1;
}

static int64_t ceil_div(int64_t a, int64_t b) { return b ? a / b + (a % b != 0) : a; }

/* a * b of sizes (>= 0), saturated: only sizes no tensor in memory has reach the bound, and matrix() refuses it. */
static int64_t smul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) || r > INT64_MAX / 4 ? INT64_MAX / 4 : r;
}

/* Cores one dim's pass uses: its slides spread over the cores, a remainder shared by groups of cores. */
static int64_t cores_for(int64_t in, int64_t rows, int64_t slide, int64_t cores) {
    int64_t slides = ceil_div(in, slide), each = slides / cores, rem = slides % cores, group = cores;
    if (rem > 0) {
        group = cores / rem;
        int64_t tail = ceil_div(rows, group);
        if (tail < slide) tail = slide;
        if (ceil_div(rows, tail) < group) group = ceil_div(rows, tail);
    }
    return each == 0 && rem > 0 ? rem * group : cores;
}

/* An intermediate matrix of rows x cols elements, rounded up to 8 (32 bytes of float32); 0 on overflow. */
static int matrix(int64_t rows, int64_t cols, uint64_t *n) {
    uint64_t e;
    if (rows >= INT64_MAX / 4 || __builtin_mul_overflow((uint64_t)rows, (uint64_t)cols, &e) || e > UINT64_MAX - 7)
        return 0;
    *n = (e + 7) / 8 * 8;
    return 1;
}

/* The kernel's workspace ask for gradOut sizes go and gradInput sizes gi (NCDHW), with the scales the L0 gets
   (the user's when all three are > 0, else 0), on `cores` cube cores; UINT64_MAX on overflow. */
static uint64_t a2_tiling_workspace(const int64_t go[5], const int64_t gi[5], const float user[3], int64_t cores) {
    float real[3];
    int resize[3];
    for (int k = 0; k < 3; k++) {
        const int64_t i = gi[k + 2], o = go[k + 2];
        real[k] = user[k] > 0.0f ? user[k] : (i != 0 ? (float)o / (float)i : 0.0f);
        resize[k] = user[k] > 0.0f ? !close_to(user[k], 1.0f) : i != o;
    }
    if (!resize[0] && !resize[1] && !resize[2]) resize[2] = 1;
    float top = real[0] > real[1] ? real[0] : real[1];
    if (real[2] > top) top = real[2];
    const int64_t slide = top <= 6.0f ? 64 : top <= 10.0f ? 48 : top <= 24.0f ? 32 : 16;
    const int64_t b = smul(gi[0], gi[1]), iH = gi[3], iW = gi[4], oD = go[2], oH = go[3];
    const int64_t hw = smul(iH, iW), bd = smul(b, oD);
    const int64_t rows[3] = {b > hw ? b : hw, bd > iW ? bd : iW, smul(bd, oH)}; /* D, H, W */
    int64_t k_max = 0, used = 0;
    for (int k = 0; k < 3; k++) {
        if (!resize[k]) continue;
        int64_t kk = ceil_f((float)slide * real[k]) + 5;
        if (kk > go[k + 2]) kk = go[k + 2];
        if (kk > k_max) k_max = kk;
        int64_t c = cores_for(gi[k + 2], rows[k], slide, cores);
        if (c > used) used = c;
    }
    if (used < 1) used = 1;
    uint64_t mw = 0, mh = 0, weights, elems, bytes;
    if (resize[2] && (resize[1] || resize[0]) && !matrix(smul(bd, oH), iW, &mw)) return UINT64_MAX;
    if (resize[1] && resize[0] && !matrix(smul(bd, iH), iW, &mh)) return UINT64_MAX;
    if (__builtin_mul_overflow((uint64_t)smul(slide, k_max), (uint64_t)used, &weights)
        || __builtin_add_overflow(mw, mh, &elems) || __builtin_add_overflow(elems, weights, &elems)
        || __builtin_mul_overflow(elems, 4u, &bytes) || __builtin_add_overflow(bytes, TILING_FIXED, &bytes))
        return UINT64_MAX;
    return bytes;
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
    /* the kernel's scratch is host memory (kernel_task): the workspace is the size CANN plans (cann-abi.md §10.8) */
    const int all = scalesD > 0 && scalesH > 0 && scalesW > 0;
    const float user[3] = {all ? (float)scalesD : 0.0f, all ? (float)scalesH : 0.0f, all ? (float)scalesW : 0.0f};
    const int to_float = !regbase && (go.dtype == ACL_FLOAT16 || go.dtype == ACL_BF16);
    uint64_t kernel_ws = regbase ? TILING_FIXED : a2_tiling_workspace(go_size, gi_size, user, CANNSIM_CUBE_CORES);
    uint64_t ws = opapi_no_kernel_for_soc(NULL, 0) ? 0
                  : kernel_ws == UINT64_MAX ? UINT64_MAX : opapi_upsample_workspace(&go, &gi, kernel_ws, to_float);
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
    (void)workspace, (void)workspaceSize; /* checked and held by phase 2; the kernel's scratch is its own */
    return a;
}

static int kernel_task(void *arg, char *msg, size_t msglen) {
    us3d_args *a = arg;
    uint64_t n = us3d_workspace_bytes(a->go_size, a->gi_size);
    void *scratch = n && n != UINT64_MAX && n <= SIZE_MAX ? malloc((size_t)n) : NULL;
    if (n && !scratch) {
        snprintf(msg, msglen, "%s: the simulator has no host memory for its kernel's scratch (%" PRIu64 " bytes)",
                 P2, n);
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    a->workspace = scratch;
    a->workspace_size = n;
    int rc = us3d_run(a);
    free(scratch);
    a->workspace = NULL;
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
