/*
 * upsample_nearest_exact3d.c - the simulated two-phase aclnnUpsampleNearestExact3d (the forward), one operator
 * of the operator library.  Facts: docs/cann-forward-facts.md (cited "facts §n"), read from hicann/ops-cv
 * image/upsample_nearest_exact3d/op_host/op_api/aclnn_upsample_nearest_exact3d.cpp (phase 1), its L0 and the
 * shared image/upsample_nearest3d tiling and kernels.
 *
 * Phase 1 checks in CANN's order with CANN's codes (facts §2.1): the two out-parameters, the three handles, the
 * dtype (per SoC), the elements (sizes > 0, C > 0, the scale band when all three scales are > 0) before the rank
 * and shape, N == 0 as an empty success; then, stricter than the device, the tensors' storage (561103), the A2/A3
 * tiling's INT32_MAX limits, and the memory (161002).  It resolves the ratios r_k as the simulated SoC does
 * (facts §3.5) and reports the workspace CANN plans (cann-abi.md §10.8; 512 bytes for a contiguous NCDHW pair on
 * Atlas A2/A3); the kernel's index tables are its own host memory.  Phase 2 queues
 * the kernel on the stream: out[n,c,od,oh,ow] = self[n,c,f_D(od),f_H(oh),f_W(ow)] with
 * f(o) = min(floor(f32(f32(o + 0.5) * r)), I - 1) in float32 (facts §4.3), a bit copy in every dtype (§4.4).
 *
 * CANN_SIM_TEST_FORWARD_LAW=ceil (tests only) makes the kernel take ceil instead of floor: a wrong law, so that
 * a test can show that an adjoint check catches a broken forward.
 */
#define _GNU_SOURCE
#include "opapi.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnUpsampleNearestExact3dGetWorkspaceSize"
#define P2 "aclnnUpsampleNearestExact3d"
#define OP "UpsampleNearestExact3d"

CANNSIM_REGISTER_OP("aclnnUpsampleNearestExact3dGetWorkspaceSize", "aclnnUpsampleNearestExact3d")

#define EPSILON 1e-5           /* the scale band's half width (facts §2.1 step 3.3) */
#define INT64_LIMIT 0x1p63     /* 2^63: a double below it converts to int64 */
#define MIB ((uint64_t)1 << 20)
#define ARR_COPY 8             /* outputSize values copied under the lock */

/* The SoC families whose forward differs (facts §2.1 step 3.2, §3.5): the 310P has no BF16; the Ascend950
   (IsRegBase) takes each dim's scale on its own, with a float reciprocal, and has no INT32 tiling limits. */
enum { SOC_A2A3 = 0, SOC_310P = 1, SOC_950 = 2 };

static int soc_family(void) {
    const char *name = cannsim_soc_name();
    if (strncmp(name, "Ascend950", 9) == 0) return SOC_950;
    if (strncmp(name, "Ascend310P", 10) == 0) return SOC_310P;
    return SOC_A2A3;
}

/* The test-only wrong index law (CANN_SIM_TEST_FORWARD_LAW=ceil); said once on stderr. */
static int test_ceil_law(void) {
    static atomic_int said;
    const char *v = getenv("CANN_SIM_TEST_FORWARD_LAW");
    if (!v || !*v || strcmp(v, "floor") == 0) return 0;
    int ceil_law = strcmp(v, "ceil") == 0;
    if (!atomic_exchange(&said, 1)) {
        if (ceil_law)
            fprintf(stderr, "cannsim: CANN_SIM_TEST_FORWARD_LAW=ceil: %s takes ceil, not CANN's floor (a wrong index "
                    "law, for tests only)\n", P2);
        else
            fprintf(stderr, "cannsim: ignoring CANN_SIM_TEST_FORWARD_LAW='%s' (only 'ceil' or 'floor')\n", v);
    }
    return ceil_law;
}

typedef struct {
    float r[3];     /* ratios r_D, r_H, r_W (input over output) */
    int dtype;
    int ndhwc;      /* self's format is NDHWC: both tensors' views are [N,D,H,W,C] (CANN transposes and back) */
    int ceil_law;   /* CANN_SIM_TEST_FORWARD_LAW=ceil */
    int soc;        /* soc_family() at phase 1 */
    int64_t xs[5], ys[5]; /* self's and out's sizes, [N,C,D,H,W]: the launch's tiling checks them */
} op_data;

typedef struct {
    int present;
    int64_t len;
    int64_t vals[ARR_COPY];
} arr_copy;

/* ------------------------------------------------------------------------------------------ messages */
static void put_dims(char *buf, size_t n, const int64_t *v, int64_t len) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int64_t i = 0; i < len && i < 8 && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, i ? ",%" PRId64 : "%" PRId64, v[i]);
    if (at < n) snprintf(buf + at, n - at, len > 8 ? ",...]" : "]");
}

static const char *dtype_list(int soc) {
    return soc == SOC_310P ? "FLOAT(0) or FLOAT16(1) (an Ascend310P has no BF16)" : "FLOAT(0), FLOAT16(1) or BF16(27)";
}

/* ------------------------------------------------------------------------------------------ phase-1 checks */
/* The scale band of one dim (facts §2.1 step 3.3): out must equal trunc(in*s), or lie in
   [trunc(in*(s - eps)), trunc(in*(s + eps))].  Returns 0 or 161002 with msg set. */
static int check_band(const char *sname, int k, double s, int64_t in, int64_t out, char *msg, size_t n) {
    static const char dn[3] = {'D', 'H', 'W'};
    double hi = (double)in * (s + EPSILON);
    if (!(hi < INT64_LIMIT)) {
        snprintf(msg, n, "%s: self's %c (%" PRId64 ") * (scale %.17g + 1e-5) = %g does not fit in int64, where CANN's "
                 "scale check converts it (undefined in C++; the simulator refuses it)", sname, dn[k], in, s, hi);
        return ACLNN_ERR_PARAM_INVALID;
    }
    int64_t dst = (int64_t)((double)in * s), mx = (int64_t)hi, mn = (int64_t)((double)in * (s - EPSILON));
    if (out == dst || (out >= mn && out <= mx)) return 0;
    snprintf(msg, n, "%s: scale %.17g conflicts with outputSize[%d] = %" PRId64 ": with self's %c = %" PRId64
             " the outputSize must be trunc(%c*scale) = %" PRId64 " or lie in [%" PRId64 ", %" PRId64 "] (scale "
             "-/+ 1e-5)", sname, s, k, out, dn[k], in, dn[k], dst, mn, mx);
    return ACLNN_ERR_PARAM_INVALID;
}

/* Write the message and return the code (in check_params, whose buffer is msg, n). */
#define REFUSE(code, ...) return (snprintf(msg, n, __VA_ARGS__), (code))
#define NULLPTR ACLNN_ERR_PARAM_NULLPTR
#define INVALID ACLNN_ERR_PARAM_INVALID

/* CheckParams (facts §2.1 step 3), in CANN's order.  self, out: descriptor copies or NULL. */
static int check_params(const aclTensor *self, const arr_copy *osz, const double sc[3], const aclTensor *out, int soc,
                        char *msg, size_t n) {
    char a[200], b[200];
    /* 3.1 null: self, outputSize, out */
    if (!self) REFUSE(NULLPTR, "self: expected a tensor but got NULL");
    if (!osz->present) REFUSE(NULLPTR, "outputSize: expected an int array but got NULL");
    if (!out) REFUSE(NULLPTR, "out: expected a tensor but got NULL");

    /* 3.2 dtype: the SoC's set, then out's dtype == self's */
    int dt = self->dtype;
    if (!(dt == ACL_FLOAT || dt == ACL_FLOAT16 || (dt == ACL_BF16 && soc != SOC_310P)))
        REFUSE(INVALID, "self: dtype must be %s but got %d", dtype_list(soc), dt);
    if (out->dtype != dt) REFUSE(INVALID, "out: dtype must equal self's dtype %d but got %d", dt, out->dtype);

    /* 3.3 elements, before the rank check: C, D, H, W from self's view (NDHWC: C last), outputSize[0..2] */
    put_dims(a, sizeof a, self->dims, self->ndim);
    put_dims(b, sizeof b, osz->vals, osz->len);
    if (self->ndim < 5)
        REFUSE(INVALID, "self: expected a 5-D tensor but got %" PRId64 " dims %s (CANN's element check reads view "
               "dims 1 to 4 before its rank check; the simulator refuses instead)", self->ndim, a);
    if (osz->len < 3)
        REFUSE(INVALID, "outputSize: expected 3 elements [oD,oH,oW] but got %" PRId64 " %s (CANN's element check "
               "reads outputSize[0..2] before its length check, past the array's end; the simulator refuses "
               "instead)", osz->len, b);
    const int ndhwc = self->format == ACL_FORMAT_NDHWC;
    const int64_t C = self->dims[ndhwc ? 4 : 1];
    const int64_t in[3] = {self->dims[ndhwc ? 1 : 2], self->dims[ndhwc ? 2 : 3], self->dims[ndhwc ? 3 : 4]};
    static const char dn[3] = {'D', 'H', 'W'};
    for (int k = 0; k < 3; k++)
        if (!(in[k] > 0))
            REFUSE(INVALID, "self: %c (view dim %d) must be > 0 but got %" PRId64 "; self %s%s", dn[k],
                   ndhwc ? k + 1 : k + 2, in[k], a, ndhwc ? " (NDHWC)" : "");
    for (int k = 0; k < 3; k++)
        if (!(osz->vals[k] > 0))
            REFUSE(INVALID, "outputSize: %c (element %d) must be > 0 but got %" PRId64 "; outputSize=%s", dn[k], k,
                   osz->vals[k], b);
    if (!(C > 0))
        REFUSE(INVALID, "self: C (view dim %d) must be > 0 (a non-empty 5-D tensor) but got %" PRId64 "; self %s",
               ndhwc ? 4 : 1, C, a);
    if (sc[0] > 0 && sc[1] > 0 && sc[2] > 0) {
        static const char *const sn[3] = {"scalesD", "scalesH", "scalesW"};
        for (int k = 0; k < 3; k++) {
            int rc = check_band(sn[k], k, sc[k], in[k], osz->vals[k], msg, n);
            if (rc) return rc;
        }
    }

    /* 3.4 shape: rank 5, outputSize length 3, out's view == the shape derived from self's format */
    if (self->ndim != 5) REFUSE(INVALID, "self: expected a 5-D tensor but got %" PRId64 " dims %s", self->ndim, a);
    if (osz->len != 3)
        REFUSE(INVALID, "outputSize: expected 3 elements [oD,oH,oW] but got %" PRId64 " %s", osz->len, b);
    const int64_t *v = osz->vals;
    int64_t want[5] = {self->dims[0], C, v[0], v[1], v[2]};
    if (ndhwc) {
        want[1] = v[0], want[2] = v[1], want[3] = v[2], want[4] = C;
    }
    if (out->ndim != 5 || memcmp(want, out->dims, sizeof want) != 0) {
        char e[200], g[200];
        put_dims(e, sizeof e, want, 5);
        put_dims(g, sizeof g, out->dims, out->ndim);
        REFUSE(INVALID, "out: shape must be %s = %s (from self's N, C and outputSize; self's format decides) but "
               "got %s", ndhwc ? "[N,oD,oH,oW,C]" : "[N,C,oD,oH,oW]", e, g);
    }
    return 0;
}

/* The A2/A3 (and 310P) tiling's CheckMaxSizes (facts §3.2): every size of self and of the output <= INT32_MAX.
   Phase 1 still succeeds: L0 ignores the tiling's status, so the launch tiles again, fails, and nnopbase reports
   561103 there (cann-abi.md §10.4). */
static int tiling_refuses(const aclOpExecutor *snap, char *msg, size_t msglen) {
    if (opapi_no_kernel_for_soc(msg, msglen)) return ACLNN_ERR_INNER;
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    if (od.soc == SOC_950) return 0;
    static const char *const nm[5] = {"N", "C", "D", "H", "W"};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 5; k++) {
            int64_t v = (t ? od.ys : od.xs)[k];
            if (v > INT32_MAX) {
                snprintf(msg, msglen, "%s's %s = %" PRId64 " exceeds INT32_MAX (2147483647): the Atlas A2/A3 "
                         "tiling refuses it at the launch (CheckMaxSizes; an Ascend950 has no such limit)",
                         t ? "out" : "self", nm[k], v);
                return ACLNN_ERR_INNER_NULLPTR;
            }
        }
    return 0;
}

/* The ratios r_k (facts §3.5). */
static void resolve_ratios(const double sc[3], const int64_t in[3], const int64_t out[3], int soc, float r[3]) {
    for (int k = 0; k < 3; k++) {
        volatile float fi = (float)in[k], fo = (float)out[k];
        r[k] = fi / fo; /* float division */
    }
    if (soc == SOC_950) { /* the host sends f32(scale); the tiling inverts a positive one in float, per dim */
        for (int k = 0; k < 3; k++) {
            volatile float attr = (float)sc[k];
            if (attr > 0) r[k] = 1.0f / attr;
        }
    } else if (sc[0] > 0 && sc[1] > 0 && sc[2] > 0) { /* the host sends f32(1.0 / scale) for all three */
        for (int k = 0; k < 3; k++) r[k] = (float)(1.0 / sc[k]);
    }
}

/* ------------------------------------------------------------------------------------------ kernel */
/* f(o) = min(floor(f32(f32(o + 0.5) * r)), I - 1): ArithProgression, Adds(+0.5), Muls(r), a floor cast, Mins
   (facts §4.1), each rounded to float32 on its own.  ceil_law takes ceil instead (the test-only wrong law). */
static int64_t src_index(int64_t o, float r, int64_t I, int ceil_law) {
    volatile float a = (float)o;
    volatile float b = a + 0.5f;
    volatile float p = b * r;
    float x = p;
    if (!(x > 0.0f)) return 0;
    if (x >= 9.0e18f) return I - 1;
    int64_t t = (int64_t)x; /* trunc == floor for x > 0 */
    if (ceil_law && (float)t < x) t++;
    return t < I - 1 ? t : I - 1;
}

typedef struct {
    int esz;
    int64_t xs[5], xst[5], ys[5], yst[5]; /* logical NCDHW sizes and element strides */
    const char *x;
    char *y;
    int64_t *tab;  /* f_D (oD entries), f_H (oH), f_W (oW): the kernel's own host scratch */
    float r[3];
    int ceil_law;
} fwd_args;

/* The tiling's workspace ask: 0 on Atlas A2/A3 (DAV_2201), 32 MiB on the other SoCs of that tiling, 16 MiB on
   Ascend950's (OCV upsample_nearest3d_tiling.cpp getWorkSpace, upsample_nearest3d_tiling_arch35.cpp; §10.8). */
static uint64_t tiling_workspace(int soc) { return soc == SOC_950 ? 16 * MIB : soc == SOC_310P ? 32 * MIB : 0; }

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize; /* checked and held by phase 2; the kernel's scratch is its own */
    op_data od;
    memcpy(&od, snap->opdata, sizeof od);
    fwd_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    const aclTensor *x = &snap->in[0], *y = &snap->out[0];
    a->esz = cannsim_dtype_size(od.dtype);
    opapi_ncdhw(x, od.ndhwc, a->xs, a->xst);
    opapi_ncdhw(y, od.ndhwc, a->ys, a->yst);
    a->x = (const char *)x->data + (uint64_t)x->offset * (uint64_t)a->esz;
    a->y = (char *)y->data + (uint64_t)y->offset * (uint64_t)a->esz;
    const uint64_t entries = (uint64_t)a->ys[2] + (uint64_t)a->ys[3] + (uint64_t)a->ys[4];
    a->tab = entries <= SIZE_MAX / sizeof(int64_t) ? malloc((size_t)entries * sizeof(int64_t) + 1) : NULL;
    if (!a->tab) {
        free(a);
        return NULL; /* out of host memory: phase 2 says so */
    }
    memcpy(a->r, od.r, sizeof a->r);
    a->ceil_law = od.ceil_law;
    return a;
}

static void destroy_args(void *arg) {
    fwd_args *a = arg;
    free(a->tab);
    free(a);
}

static int kernel_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    const fwd_args *a = arg;
    int64_t *fd = a->tab, *fh = fd + a->ys[2], *fw = fh + a->ys[3];
    int64_t *tabs[3] = {fd, fh, fw};
    for (int k = 0; k < 3; k++)
        for (int64_t o = 0; o < a->ys[k + 2]; o++) tabs[k][o] = src_index(o, a->r[k], a->xs[k + 2], a->ceil_law);
    const int64_t *xt = a->xst, *yt = a->yst;
    for (int64_t n = 0; n < a->ys[0]; n++)
        for (int64_t c = 0; c < a->ys[1]; c++)
            for (int64_t d = 0; d < a->ys[2]; d++)
                for (int64_t h = 0; h < a->ys[3]; h++) {
                    const int64_t xo = n * xt[0] + c * xt[1] + fd[d] * xt[2] + fh[h] * xt[3];
                    const int64_t yo = n * yt[0] + c * yt[1] + d * yt[2] + h * yt[3];
                    if (a->esz == 4) {
                        const uint32_t *src = (const uint32_t *)(const void *)a->x + xo;
                        uint32_t *dst = (uint32_t *)(void *)a->y + yo;
                        for (int64_t w = 0; w < a->ys[4]; w++) dst[w * yt[4]] = src[fw[w] * xt[4]];
                    } else {
                        const uint16_t *src = (const uint16_t *)(const void *)a->x + xo;
                        uint16_t *dst = (uint16_t *)(void *)a->y + yo;
                        for (int64_t w = 0; w < a->ys[4]; w++) dst[w * yt[4]] = src[fw[w] * xt[4]];
                    }
                }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, kernel_task, destroy_args, tiling_refuses};

/* ------------------------------------------------------------------------------------------ entry points */
CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dGetWorkspaceSize(const aclTensor *self,
                                                                    const aclIntArray *outputSize, double scalesD,
                                                                    double scalesH, double scalesW, aclTensor *out,
                                                                    uint64_t *workspaceSize,
                                                                    aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor); /* OP_CHECK_COMM_INPUT: 161001 */
    if (rc) return rc;

    /* copy the descriptors while checking that the handles are live */
    aclTensor x, y;
    arr_copy osz = {0};
    const opapi_handle handles[3] = {{"self", self, 0}, {"outputSize", outputSize, 1}, {"out", out, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 3);
    if (!rc) {
        if (self) x = *self;
        if (out) y = *out;
        if (outputSize) {
            osz.present = 1;
            osz.len = (int64_t)outputSize->len;
            for (uint64_t i = 0; i < outputSize->len && i < ARR_COPY; i++) osz.vals[i] = outputSize->vals[i];
        }
    }
    cannsim_unlock();
    if (rc) return rc;

    const aclTensor *ins[1] = {self};
    const aclTensor *outs[1] = {out};
    const aclIntArray *arrays[1] = {outputSize};
    cannsim_exec_io io = {ins, 1, outs, 1, arrays, 1, "self,out,outputSize"};
    const opapi_tensor tin[1] = {{"self", &x}}, tout[1] = {{"out", &y}};
    const int soc = soc_family(), ceil_law = test_ceil_law();
    const double sc[3] = {scalesD, scalesH, scalesW};

    /* L2_DFX_PHASE_1: the op cache answers before any check (cann-abi.md §8.6) */
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, self ? &x : NULL, 0);
    opapi_key_array(&key, outputSize ? osz.vals : NULL, osz.len, ARR_COPY);
    cannsim_key_bytes(&key, sc, sizeof sc);
    cannsim_key_tensor(&key, out ? &y : NULL, out && (const aclTensor *)out == self ? 0 : 1);
    cannsim_key_bytes(&key, &soc, sizeof soc);
    cannsim_key_bytes(&key, &ceil_law, sizeof ceil_law);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    char msg[700];
    msg[0] = 0;
    rc = check_params(self ? &x : NULL, &osz, sc, out ? &y : NULL, soc, msg, sizeof msg);
    if (rc) return cannsim_fail(rc, "%s: %s", P1, msg);

    op_data od;
    memset(&od, 0, sizeof od);
    od.dtype = x.dtype;
    od.ndhwc = x.format == ACL_FORMAT_NDHWC;
    od.ceil_law = ceil_law;
    int64_t xs[5], xst[5], ys[5], yst[5];
    opapi_ncdhw(&x, od.ndhwc, xs, xst);
    opapi_ncdhw(&y, od.ndhwc, ys, yst);
    od.soc = soc;
    memcpy(od.xs, xs, sizeof xs);
    memcpy(od.ys, ys, sizeof ys);
    if (xs[0] == 0) /* self->IsEmpty(): only N can be 0 here (facts §2.1 step 4): nothing to launch */
        return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);

    /* l0op::Contiguous(self), the L0 (its tiling status is ignored until the launch), then l0op::ViewCopy */
    if ((rc = opapi_check_view_in_storage(P1, "self", &x))) return rc;
    if ((rc = opapi_check_view_copy_format(P1, "self", &x, "out", &y))) return rc;
    if ((rc = opapi_check_view_in_storage(P1, "out", &y))) return rc;
    if ((rc = opapi_check_memory(P1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;

    resolve_ratios(sc, xs + 2, ys + 2, soc, od.r);
    uint64_t ws = opapi_no_kernel_for_soc(NULL, 0) ? 0 : opapi_upsample_workspace(&x, &y, tiling_workspace(soc), 0);
    if (ws == UINT64_MAX)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the workspace for these sizes does not fit in 64 bits", P1);
    return opapi_phase1_done(P1, OP, &io, &key, ws, 0, &od, sizeof od, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3d(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                    aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
