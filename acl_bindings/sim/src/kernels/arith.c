/*
 * arith.c - the engine of the simulated binary arithmetic operators (arith.h): Mul, Muls, Add, Adds, Sub, Subs,
 * Div, Divs and their in-place forms.  Phase 1 checks the handles (161001 for NULL), the dtypes and the shapes
 * (161002; at most 8 dims) and the memory, and reads the scalars (they may be destroyed after phase 1); phase 2
 * queues the kernel.  The compute dtypes are CANN's op_api ones on Atlas A2/A3 (not the arch35 rules) of
 * hicann/ops-math:
 *  - math/mul/op_api/aclnn_mul.cpp: Mul, InplaceMul in PromoteType(self, other), checked castable to out
 *    (CheckMulPromoteType, CheckInplaceMulPromoteType); Muls, InplaceMuls in InferTensorScalarDtype, unchecked.
 *  - math/add/op_api/aclnn_add.cpp, math/sub/op_api/aclnn_sub.cpp: Add, Sub in PromoteType, Adds, Subs in
 *    PromoteTypeScalar; CheckPromoteType: alpha castable to it (an integral or bool alpha for bool), it castable
 *    to out; InplaceAdd(s), InplaceSub(s) are the out-of-place ones with out = selfRef.  Sub with alpha != 1
 *    computes a floating promotion in float32 (float64 stays).
 *  - math/div/op_api/aclnn_div.cpp: Div checks PromoteType castable to out and computes (910B) a pair of
 *    float16/float32/bfloat16 uncast (isMixDtypeTensorSupport: the result in self's dtype when both agree, else
 *    float32), else in CompatibleInferDivDtype (float32 unless floating, bool or int32/int32); Divs checks
 *    self's dtype castable to out and computes a mixed pair (isDivsMixDtypeSupport) with the scalar in its own
 *    dtype (a float64 one in float32) and the result in self's, else in self's dtype if floating (int32 for
 *    int32/int32, bool for bool/bool, float32 otherwise); RealDiv gives float32 for int32 and bool
 *    (math/real_div/op_api/realdiv.cpp).  InplaceDiv of a mixed pair keeps selfRef's dtype (RealDiv isScalar).
 * The inputs are cast to the compute dtype, the result computed in double, rounded to the result dtype and cast
 * to out's dtype.
 */
#define _GNU_SOURCE
#include "arith.h"

#include "elementwise.h"
#include "scalar.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* What the kernel computes: r = x (op) y, x self and y other (tensor, or the scalar scal), read in dtype in (or
   as they are where in < 0), r rounded to res */
typedef struct {
    int kind, scalar, inplace, in, res, other_is_out;
    double scal, alpha;
} op_data;

typedef struct {
    ew_view self, other, out; /* self and other with out's ndim and sizes, stride 0 where broadcast */
    op_data k;
} bin_args;

static int is_half(int dt) { return dt == ACL_FLOAT16 || dt == ACL_BF16 || dt == ACL_FLOAT; }

/* The compute dtype of a tensor and a scalar: aclnn_mul.cpp InferTensorScalarDtype, aclnn_add.cpp and
   aclnn_sub.cpp PromoteTypeScalar (non-arch35); a floating self keeps its dtype (Muls computes bfloat16 in
   float32) */
static int scalar_calc(int kind, int self, int scalar, int out) {
    if (ew_is_floating(self)) return self == ACL_BF16 && kind == AR_MUL ? ACL_FLOAT : self;
    if (scalar == ACL_DOUBLE && (out == ACL_FLOAT || (kind == AR_MUL && self == ACL_BOOL))) return ACL_FLOAT;
    if (ew_is_floating(scalar) || self == ACL_BOOL) return ew_promote(self, scalar);
    return self;
}

/* Div's compute dtypes (910B, aclnn_div.cpp HandleNotMixDataTypeDiv and aclnnDivsGetWorkspaceSize): in, and the
   result's (RealDiv: float32 for int32 and bool) */
static void div_calc(const arith_op *d, int self, int other, int *in, int *res) {
    int mixed = d->scalar ? (self == ACL_FLOAT16 && (other == ACL_FLOAT || other == ACL_BF16)) ||
                                (self == ACL_FLOAT && (other == ACL_FLOAT16 || other == ACL_BF16)) ||
                                (self == ACL_BF16 && (other == ACL_FLOAT || other == ACL_DOUBLE ||
                                                      other == ACL_FLOAT16))
                          : is_half(self) && is_half(other);
    if (mixed) {
        *in = -1;
        *res = d->scalar || d->inplace || self == other ? self : ACL_FLOAT;
        return;
    }
    int p;
    if (d->scalar)
        p = ew_is_floating(self) ? self : self == ACL_INT32 && other == ACL_INT32 ? ACL_INT32
            : self == ACL_BOOL && other == ACL_BOOL ? ACL_BOOL : ACL_FLOAT;
    else {
        p = ew_promote(self, other);
        if (!ew_is_floating(p) && p != ACL_BOOL && !(self == ACL_INT32 && other == ACL_INT32)) p = ACL_FLOAT;
    }
    *in = p;
    *res = p == ACL_INT32 || p == ACL_BOOL ? ACL_FLOAT : p;
}

static int fail_cast(const char *p1, const char *what, int from, const char *to_name, int to, const char *why) {
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %s, which %s %s cannot be cast to (%s)", p1, to_name,
                        ew_dtype_name(to), what, ew_dtype_name(from), why);
}

/* The dtype checks and the compute dtypes (dt: self, other, out; alpha's dtype, its value) */
static int check_dtypes(const arith_op *d, const char *const names[3], const int dt[3], int alpha_dt, double alpha,
                        op_data *k) {
    for (int i = 0; i < 3; i++)
        if (!ew_dtype_ok(dt[i]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not support "
                                "(float32, float16, bfloat16, float64, int8..int64, uint8, bool)", d->p1, names[i],
                                dt[i]);
    const char *why;
    int promoted = d->scalar ? scalar_calc(d->kind, dt[0], dt[1], dt[2]) : ew_promote(dt[0], dt[1]);
    k->in = k->res = promoted;
    if (d->kind == AR_DIV) {
        div_calc(d, dt[0], dt[1], &k->in, &k->res);
        /* Div: PromoteType castable to out; Divs: self's dtype (CheckPromoteTypeScalar, non-arch35) */
        int from = d->scalar ? dt[0] : promoted;
        if ((why = ew_cast_refused(from, dt[2])))
            return fail_cast(d->p1, d->scalar ? "self's dtype" : "the promoted dtype", from, names[2], dt[2], why);
        return 0;
    }
    if (d->kind == AR_ADD || d->kind == AR_SUB) {
        why = promoted == ACL_BOOL ? (ew_is_floating(alpha_dt) ? "a bool sum takes an integral or bool alpha" : NULL)
                                   : ew_cast_refused(alpha_dt, promoted);
        if (why)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: alpha has dtype %s, which cannot be cast to the "
                                "promoted dtype %s (%s)", d->p1, ew_dtype_name(alpha_dt), ew_dtype_name(promoted),
                                why);
        if (d->kind == AR_SUB && !d->scalar && alpha != 1 && ew_is_floating(promoted))
            k->in = k->res = promoted == ACL_DOUBLE ? ACL_DOUBLE : ACL_FLOAT;
    }
    if (d->kind == AR_MUL && d->scalar) return 0; /* Muls, InplaceMuls: no check on A2/A3 */
    if ((why = ew_cast_refused(promoted, dt[2])))
        return fail_cast(d->p1, "the promoted dtype", promoted, names[2], dt[2], why);
    return 0;
}

/* The shapes: a tensor other and self broadcast to out, which is their broadcast shape; a scalar's out is
   self's shape */
static int check_shapes(const arith_op *d, const char *const names[3], const aclTensor *s, const aclTensor *t,
                        const aclTensor *o) {
    const char *p1 = d->p1;
    if (s->ndim > 8 || o->ndim > 8 || (t && t->ndim > 8))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: a tensor has more than 8 dims", p1);
    int rc;
    if (!t) {
        int same = s->ndim == o->ndim;
        for (int64_t i = 0; same && i < s->ndim; i++) same = s->dims[i] == o->dims[i];
        return same ? 0 : cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out's shape is not self's", p1);
    }
    if ((rc = opapi_check_broadcast(p1, names[0], s, names[2], o)) ||
        (rc = opapi_check_broadcast(p1, names[1], t, names[2], o)))
        return rc;
    /* out must be the broadcast shape itself (a dim of 1 takes the other's size, 0 included) */
    for (int64_t i = 0; i < o->ndim; i++) {
        int64_t si = i - (o->ndim - s->ndim), ti = i - (o->ndim - t->ndim);
        int64_t sd = si < 0 ? 1 : s->dims[si], td = ti < 0 ? 1 : t->dims[ti], bd = sd == 1 ? td : sd;
        if (o->dims[i] != bd)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s dim %" PRId64 " has size %" PRId64 ", not the "
                                "broadcast size %" PRId64, p1, names[2], i, o->dims[i], bd);
    }
    return 0;
}

static int same_view(const aclTensor *a, const aclTensor *b) {
    if (a->data != b->data || a->offset != b->offset || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int64_t i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i] || a->strides[i] != b->strides[i]) return 0;
    return 1;
}

aclnnStatus arith_phase1(const arith_op *d, const aclTensor *self, const aclTensor *other_t,
                         const aclScalar *other_s, const aclScalar *alpha, const aclTensor *out,
                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    const char *p1 = d->p1;
    int rc = opapi_phase1_enter(p1, workspaceSize, executor);
    if (rc) return rc;
    const char *const names[3] = {d->inplace ? "selfRef" : "self", "other", d->inplace ? "selfRef" : "out"};
    const int kt = !d->scalar;
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", p1, names[0]);
    if (kt ? !other_t : !other_s) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: other is NULL", p1);
    if (d->alpha && !alpha) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: alpha is NULL", p1);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", p1);
    aclTensor s, o, t;
    const opapi_handle handles[3] = {{names[0], self, 0}, {"out", d->inplace ? NULL : out, 0}, {"other", other_t, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(p1, handles, kt ? 3 : 2);
    if (!rc) {
        s = *self;
        o = *out;
        if (kt) t = *other_t;
    }
    cannsim_unlock();
    if (rc) return rc;
    int sdt[2] = {0, 0}; /* other (scalar forms), alpha */
    unsigned char sbytes[2][8] = {{0}};
    const aclScalar *const scalars[2] = {other_s, alpha};
    const char *const snames[2] = {"other", "alpha"};
    for (int i = 0; i < 2; i++)
        if (scalars[i] && (rc = cannsim_scalar_read(p1, scalars[i], &sdt[i], sbytes[i]))) return rc;

    /* in-place: selfRef is the output; an other that is selfRef itself is read from it */
    const int other_is_out = d->inplace && kt && (other_t == self || same_view(&t, &s));
    const aclTensor *ins[2] = {self, other_t};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, kt ? 2 : 1, outs, 1, NULL, 0, kt ? "self,other,out" : "self,out"};
    if (d->inplace) io = (cannsim_exec_io){ins + 1, kt && !other_is_out, outs, 1, NULL, 0, "other,selfRef"};
    if (d->inplace && !io.nin) io.names = "selfRef";
    const opapi_tensor tin[2] = {{names[0], &s}, {"other", &t}}, tout[1] = {{names[2], &o}};
    cannsim_key key;
    cannsim_key_init(&key, p1);
    cannsim_key_tensor(&key, &s, 0);
    cannsim_key_tensor(&key, &o, d->inplace ? 0 : 1);
    if (kt) cannsim_key_tensor(&key, &t, other_is_out || other_t == self ? 0 : 2);
    for (int i = 0; i < 2; i++) {
        cannsim_key_bytes(&key, &sdt[i], sizeof sdt[i]);
        cannsim_key_bytes(&key, sbytes[i], sizeof sbytes[i]);
    }
    const opapi_tensor *cin = d->inplace ? tin + 1 : tin;
    if (opapi_phase1_cached(p1, d->op, &key, &io, cin, io.nin, tout, 1, workspaceSize, executor, &rc)) return rc;

    for (int i = 0; i < 2; i++)
        if (scalars[i] && !ew_dtype_ok(sdt[i]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not "
                                "support", p1, snames[i], sdt[i]);
    op_data k = {d->kind, d->scalar, d->inplace, 0, 0, other_is_out, 0.0, 1.0};
    if (alpha) k.alpha = ew_load(sdt[1], sbytes[1]);
    const int dt[3] = {s.dtype, kt ? t.dtype : sdt[0], o.dtype};
    if ((rc = check_dtypes(d, names, dt, sdt[1], k.alpha, &k))) return rc;
    if ((rc = check_shapes(d, names, &s, kt ? &t : NULL, &o))) return rc;
    if (d->scalar) { /* the scalar converted to the compute dtype (ConvertToTensor); a mixed Divs: its own */
        int to = k.in >= 0 ? k.in : sdt[0] == ACL_DOUBLE ? ACL_FLOAT : sdt[0];
        k.scal = ew_round(to, ew_load(sdt[0], sbytes[0]));
    }
    int64_t numel = 1;
    for (int64_t i = 0; i < o.ndim; i++) numel *= o.dims[i];
    if (numel == 0) return opapi_phase1_done(p1, d->op, &io, &key, 0, 1, &k, sizeof k, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(p1, names[0], &s))) return rc;
    if (kt && (rc = opapi_check_view_in_storage(p1, "other", &t))) return rc;
    if (!d->inplace && (rc = opapi_check_view_in_storage(p1, "out", &o))) return rc;
    /* each input against out (inputs may share memory: x * x; selfRef is read and written element by element) */
    if (!d->inplace && (rc = opapi_check_memory(p1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    if (kt && !other_is_out && (rc = opapi_check_memory(p1, tin + 1, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(p1, d->op, &io, &key, 0, 0, &k, sizeof k, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    bin_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    const aclTensor *out = &snap->out[0];
    /* out-of-place: in = {self, other}; in-place: in = {other} (none when other is selfRef), out = selfRef */
    const int inplace = a->k.inplace;
    const aclTensor *self = inplace ? out : &snap->in[0];
    ew_view_as(&a->self, self, out);
    if (!a->k.scalar) ew_view_as(&a->other, a->k.other_is_out ? out : &snap->in[inplace ? 0 : 1], out);
    ew_view_as(&a->out, out, out);
    return a;
}

static double load_as(int in, const ew_view *v, int64_t i) {
    double x = ew_load(v->dtype, v->data + ew_offset(v, i));
    return in >= 0 ? ew_round(in, x) : x;
}

/* element i: the inputs cast to the compute dtype, the result rounded to its dtype (then cast to out's by the
   store) */
static double bin_value(const bin_args *a, int64_t i) {
    const op_data *k = &a->k;
    double x = load_as(k->in, &a->self, i), y = k->scalar ? k->scal : load_as(k->in, &a->other, i), r;
    switch (k->kind) {
    case AR_MUL: r = x * y; break;
    case AR_ADD: r = x + k->alpha * y; break;
    case AR_SUB: r = x - k->alpha * y; break;
    default: r = x / y; break;
    }
    return ew_round(k->res, r);
}

static int bin_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    bin_args *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t i = 0; i < n; i++) ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), bin_value(a, i));
    return 0;
}

static const opapi_kernel k_kernel = {make_args, bin_task, free, NULL};

aclnnStatus arith_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                         aclOpExecutor *executor, aclrtStream stream) {
    return opapi_phase2(func, op, workspace, workspaceSize, executor, stream, &k_kernel);
}
