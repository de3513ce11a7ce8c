/*
 * pow_tensor_scalar.c - the simulated two-phase aclnnPowTensorScalar(self, exponent, out): out = self ** exponent,
 * exponent a scalar.  op-plugin's pow.Tensor_Scalar and its out form call it (op_plugin_functions.yaml, gen_opapi
 * exec aclnnPowTensorScalar; out of at::result_type(self, exponent)), and torch's autograd for x ** c computes
 * c * x ** (c - 1) with it (pow_backward: x.pow(1.0) for c = 2).
 * The rules follow ops-math math/pow/op_api/aclnn_pow.cpp (CheckPowTensorScalarParams, CheckDtypeValid,
 * InferTensorScalarDtype, CheckPromoteType, CheckShape, aclnnPowTensorScalarGetWorkspaceSize), for Atlas A2/A3 (not
 * the arch35 rules):
 * - self, exponent and out NULL: 161001;
 * - self and exponent of a supported dtype (all the simulator's, and complex), PromoteType(self, exponent) castable
 *   to out (CanCast): else 161002;
 * - the compute dtype: float32 for a float64 exponent and a float32 out; else self's if floating; else
 *   PromoteType(self, exponent) for a floating exponent or a bool self; else self's.  self and exponent both bool,
 *   or a compute dtype that does not cast to out: 161002;
 * - self at most 8 dims, out of self's shape: else 161002; an empty self: nothing to do.
 * The kernel, by float32(exponent): 0.5, 2, 3, -0.5, -1, -2 with a float16/float32/bfloat16 compute dtype: Pows;
 * else 2: Square (int8, uint8, int16, bool cast to int32 first); 1: no kernel (self cast to the compute dtype); else Pow.
 * The exponent is converted to the compute dtype (ConvertToTensor) for Pows and Pow.  Then a Cast to out's dtype.
 * Numerics: the kernels' sources for Atlas A2 are not public (TBE).  The simulator: floating types, pow() in
 * double, rounded to float32 for float16/bfloat16/float32 (as if the kernel computed in float32), then to the
 * compute dtype; Square x * x the same way; integral types, repeated multiplication wrapping at the compute dtype's
 * width (int32 for Square's cast-up), a negative exponent giving 1 / x ** -e truncated (not read from a source).
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "opapi.h"
#include "scalar.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnPowTensorScalarGetWorkspaceSize"
#define P2 "aclnnPowTensorScalar"
#define OP "Pow"

CANNSIM_REGISTER_OP("aclnnPowTensorScalarGetWorkspaceSize", "aclnnPowTensorScalar")

enum { K_POW, K_SQUARE, K_NOOP };

typedef struct {
    int kind, calc, square_dtype; /* square_dtype: Square's input dtype (int32 for the small integers) */
    double exp;                   /* the exponent (in the compute dtype for Pow and Pows) */
    int64_t iexp;                 /* the same, integral */
} op_data;

typedef struct {
    ew_view self, out;
    op_data k;
} pow_args;

/* The compute dtype (aclnn_pow.cpp InferTensorScalarDtype, not IsRegBase) */
static int infer_calc(int self, int exp, int out) {
    if (exp == ACL_DOUBLE && out == ACL_FLOAT) return ACL_FLOAT;
    if (ew_is_floating(self)) return self;
    if (ew_is_floating(exp) || self == ACL_BOOL) return ew_promote(self, exp);
    return self;
}

static int check_dtypes(int self, int exp, int out, int *calc) {
    const char *why;
    const int dt[3] = {self, exp, out};
    static const char *const names[3] = {"self", "exponent", "out"};
    for (int k = 0; k < 3; k++)
        if (!ew_dtype_ok(dt[k]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not support "
                                "(float32, float16, bfloat16, float64, int8..int64, uint8, bool)", P1, names[k], dt[k]);
    int promoted = ew_promote(self, exp);
    if ((why = ew_cast_refused(promoted, out)))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self (%s) and exponent (%s) promote to %s, which cannot be "
                            "cast to out's dtype %s (%s)", P1, ew_dtype_name(self), ew_dtype_name(exp),
                            ew_dtype_name(promoted), ew_dtype_name(out), why);
    *calc = infer_calc(self, exp, out);
    if (self == ACL_BOOL && exp == ACL_BOOL)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self and exponent are both bool, which is not supported", P1);
    if ((why = ew_cast_refused(*calc, out)))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the compute dtype %s cannot be cast to out's dtype %s (%s)",
                            P1, ew_dtype_name(*calc), ew_dtype_name(out), why);
    return 0;
}

/* The kernel aclnnPowTensorScalarGetWorkspaceSize picks (CheckSupportPows, canUseSquare, canNoUseOp) */
static void pick_kernel(op_data *k, double e) {
    float f = (float)e;
    int pows = (f == 0.5f || f == 2.0f || f == 3.0f || f == -0.5f || f == -1.0f || f == -2.0f) &&
               (k->calc == ACL_FLOAT16 || k->calc == ACL_FLOAT || k->calc == ACL_BF16);
    k->kind = pows ? K_POW : f == 2.0f ? K_SQUARE : f == 1.0f ? K_NOOP : K_POW;
    k->square_dtype = k->calc;
    if (k->kind == K_SQUARE &&
        (k->calc == ACL_INT8 || k->calc == ACL_UINT8 || k->calc == ACL_INT16 || k->calc == ACL_BOOL))
        k->square_dtype = ACL_INT32;
    k->exp = k->kind == K_POW ? ew_round(k->calc, e) : e;
    k->iexp = k->exp >= 9.2e18 ? INT64_MAX : k->exp <= -9.2e18 ? INT64_MIN : (int64_t)k->exp;
}

CANNSIM_API aclnnStatus aclnnPowTensorScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *exponent,
                                                             const aclTensor *out, uint64_t *workspaceSize,
                                                             aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(P1, workspaceSize, executor);
    if (rc) return rc;
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", P1);
    if (!exponent) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: exponent is NULL", P1);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", P1);
    aclTensor s, o;
    const opapi_handle handles[2] = {{"self", self, 0}, {"out", out, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(P1, handles, 2);
    if (!rc) {
        s = *self;
        o = *out;
    }
    cannsim_unlock();
    if (rc) return rc;
    int edt = 0;
    unsigned char ebytes[8] = {0};
    if ((rc = cannsim_scalar_read(P1, exponent, &edt, ebytes))) return rc;

    const aclTensor *ins[1] = {self};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, 1, outs, 1, NULL, 0, "self,out"};
    const opapi_tensor tin[1] = {{"self", &s}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, &s, 0);
    cannsim_key_tensor(&key, &o, 1);
    cannsim_key_bytes(&key, &edt, sizeof edt);
    cannsim_key_bytes(&key, ebytes, sizeof ebytes);
    if (opapi_phase1_cached(P1, OP, &key, &io, tin, 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    op_data od;
    memset(&od, 0, sizeof od);
    if ((rc = check_dtypes(s.dtype, edt, o.dtype, &od.calc))) return rc;
    if (s.ndim > 8)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self has %" PRId64 " dims, more than 8", P1, s.ndim);
    int same = s.ndim == o.ndim;
    for (int64_t i = 0; same && i < s.ndim; i++) same = s.dims[i] == o.dims[i];
    if (!same) return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out's shape is not self's", P1);
    pick_kernel(&od, ew_load(edt, ebytes));
    int64_t numel = 1;
    for (int64_t i = 0; i < s.ndim; i++) numel *= s.dims[i];
    if (numel == 0) return opapi_phase1_done(P1, OP, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(P1, "self", &s)) || (rc = opapi_check_view_in_storage(P1, "out", &o)))
        return rc;
    if ((rc = opapi_check_memory(P1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(P1, OP, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    pow_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    ew_view_as(&a->self, &snap->in[0], &snap->out[0]);
    ew_view_as(&a->out, &snap->out[0], &snap->out[0]);
    return a;
}

/* v wrapped to the width of integral dtype dt (two's complement), as a double */
static double wrap(int dt, uint64_t v) {
    switch (dt) {
    case ACL_INT8: return (int8_t)(uint8_t)v;
    case ACL_UINT8: return (uint8_t)v;
    case ACL_INT16: return (int16_t)(uint16_t)v;
    case ACL_INT32: return (int32_t)(uint32_t)v;
    default: return (double)(int64_t)v;
    }
}

/* x ** e for integers: repeated squaring modulo 2^64, then wrapped to dt; a negative e: 1 / x ** -e truncated */
static double int_pow(int dt, int64_t x, int64_t e) {
    if (e < 0) return x == 1 ? 1 : x == -1 ? (e % 2 ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1) r *= b;
        b *= b;
    }
    return wrap(dt, r);
}

/* a floating result: float32 for the 16-bit types and float32 itself, then the compute dtype */
static double float_result(int calc, double v) {
    return ew_round(calc, calc == ACL_DOUBLE ? v : (double)(float)v);
}

static double pow_value(const op_data *k, double x) {
    switch (k->kind) {
    case K_NOOP: return x;
    case K_SQUARE:
        if (!ew_is_floating(k->square_dtype)) return int_pow(k->square_dtype, (int64_t)x, 2);
        return float_result(k->calc, x * x);
    default:
        if (!ew_is_floating(k->calc)) return int_pow(k->calc, (int64_t)x, k->iexp);
        return float_result(k->calc, pow(x, k->exp));
    }
}

static int pow_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    pow_args *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t i = 0; i < n; i++) {
        double x = ew_round(a->k.calc, ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i)));
        ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), pow_value(&a->k, x));
    }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, pow_task, free, NULL};

CANNSIM_API aclnnStatus aclnnPowTensorScalar(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                             aclrtStream stream) {
    return opapi_phase2(P2, OP, workspace, workspaceSize, executor, stream, &k_kernel);
}
