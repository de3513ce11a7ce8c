/*
 * mul_add.c - the simulated two-phase aclnnMul(self, other, out) and aclnnMuls(self, other, out): out = self *
 * other; aclnnAdd(self, other, alpha, out) and aclnnAdds(self, other, alpha, out): out = self + alpha * other.
 * other is a tensor (Mul, Add: self and other broadcast to out's shape) or a scalar (Muls, Adds); alpha a scalar
 * (ops-math math/mul/docs/aclnnMul&aclnnInplaceMul.md, math/muls/docs/aclnnMuls&aclnnInplaceMuls.md,
 * math/add/docs/aclnnAdd&aclnnInplaceAdd.md, aclnnAdds.md).  op-plugin's mul and add need both forms of each
 * (MulKernelNpuOpApi.cpp, AddKernelNpuOpApi.cpp: DO_COMPATIBILITY of both), and take the scalar form for a
 * Python number or a host 0-dim tensor.  Phase 1 checks the handles (161001 for NULL), the dtypes and the shapes
 * (161002; at most 8 dims) and the memory, and reads the scalars (they may be destroyed after phase 1); phase 2
 * queues the kernel.
 * Type promotion as CANN's op_api on Atlas A2/A3 (not the arch35 rules; ops-math math/mul/op_api/aclnn_mul.cpp,
 * math/add/op_api/aclnn_add.cpp): the inputs are cast to a compute dtype, the result is computed in double,
 * rounded to the compute dtype, and cast to out's dtype.
 */
#define _GNU_SOURCE
#include "kernels/elementwise.h"
#include "opapi.h"
#include "scalar.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

CANNSIM_REGISTER_OP("aclnnMulGetWorkspaceSize", "aclnnMul", "aclnnMulsGetWorkspaceSize", "aclnnMuls",
                    "aclnnAddGetWorkspaceSize", "aclnnAdd", "aclnnAddsGetWorkspaceSize", "aclnnAdds")

enum { K_MULS, K_MUL, K_ADD, K_ADDS };

/* Muls: out = self * mul; Mul: self * other; Add: self + mul * other; Adds: self + add; in dtype calc */
typedef struct {
    int kind, calc;
    double mul, add;
} op_data;

typedef struct {
    ew_view self, other, out; /* self and other with out's ndim and sizes, stride 0 where broadcast */
    op_data k;
} bin_args;

/* The compute dtype of a tensor and a scalar: aclnn_mul.cpp InferTensorScalarDtype, aclnn_add.cpp
   PromoteTypeScalar (non-arch35); a floating self keeps its dtype (Muls computes bfloat16 in float32) */
static int scalar_calc(int kind, int self, int scalar, int out) {
    if (ew_is_floating(self)) return self == ACL_BF16 && kind == K_MULS ? ACL_FLOAT : self;
    if (scalar == ACL_DOUBLE && (out == ACL_FLOAT || (kind == K_MULS && self == ACL_BOOL))) return ACL_FLOAT;
    if (ew_is_floating(scalar) || self == ACL_BOOL) return ew_promote(self, scalar);
    return self;
}

/* Add and Adds (aclnn_add.cpp CheckPromoteType): alpha must cast to calc (an integral or bool alpha where calc
   is bool), calc to out; Mul (aclnn_mul.cpp CheckMulPromoteType): calc to out; Muls: no check */
static int check_casts(const char *p1, int kind, int calc, int alpha, int out) {
    const char *why = NULL;
    if ((kind == K_ADD || kind == K_ADDS) && calc == ACL_BOOL)
        why = ew_is_floating(alpha) ? "a bool sum takes an integral or bool alpha" : NULL;
    else if (kind == K_ADD || kind == K_ADDS)
        why = ew_cast_refused(alpha, calc);
    if (why)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: alpha has dtype %s, which cannot be cast to the promoted "
                            "dtype %s (%s)", p1, ew_dtype_name(alpha), ew_dtype_name(calc), why);
    if (kind != K_MULS && (why = ew_cast_refused(calc, out)))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has dtype %s, which the promoted dtype %s cannot be "
                            "cast to (%s)", p1, ew_dtype_name(out), ew_dtype_name(calc), why);
    return 0;
}

/* The dtypes of self, other (tensor or scalar) and out supported, the compute dtype into *calc */
static int check_dtypes(const char *p1, int kind, const int dt[3], const char *other, int alpha, int *calc) {
    static const char *const names[3] = {"self", "", "out"};
    for (int k = 0; k < 3; k++)
        if (!ew_dtype_ok(dt[k]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not support "
                                "(float32, float16, bfloat16, float64, int8..int64, uint8, bool)", p1,
                                k == 1 ? other : names[k], dt[k]);
    if (kind == K_MUL || kind == K_ADD)
        *calc = ew_promote(dt[0], dt[1]);
    else
        *calc = scalar_calc(kind, dt[0], dt[1], dt[2]);
    return check_casts(p1, kind, *calc, alpha, dt[2]);
}

/* Phase 1 of all four: other is a tensor (other_t) or the first of the scalars; alpha, for Add and Adds, the last. */
static aclnnStatus bin_phase1(const char *p1, const char *op, int kind, const aclTensor *self,
                              const aclTensor *other_t, const aclScalar *const *scalars, const char *const *names,
                              int nscalars, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(p1, workspaceSize, executor);
    if (rc) return rc;
    const int kt = kind == K_MUL || kind == K_ADD; /* other is a tensor */
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", p1);
    if (kt && !other_t) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: other is NULL", p1);
    for (int k = 0; k < nscalars; k++)
        if (!scalars[k]) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", p1, names[k]);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", p1);
    aclTensor s, o, t;
    const opapi_handle handles[3] = {{"self", self, 0}, {"out", out, 0}, {"other", other_t, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(p1, handles, kt ? 3 : 2);
    if (!rc) {
        s = *self;
        o = *out;
        if (kt) t = *other_t;
    }
    cannsim_unlock();
    if (rc) return rc;
    int sdtype[2] = {0, 0};
    unsigned char sbytes[2][8] = {{0}};
    for (int k = 0; k < nscalars; k++)
        if ((rc = cannsim_scalar_read(p1, scalars[k], &sdtype[k], sbytes[k]))) return rc;

    const aclTensor *ins[2] = {self, other_t};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, kt ? 2 : 1, outs, 1, NULL, 0, kt ? "self,other,out" : "self,out"};
    const opapi_tensor tin[2] = {{"self", &s}, {"other", &t}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, p1);
    cannsim_key_tensor(&key, &s, 0);
    cannsim_key_tensor(&key, &o, 1);
    if (kt) cannsim_key_tensor(&key, &t, other_t == self ? 0 : 2);
    for (int k = 0; k < nscalars; k++) {
        cannsim_key_bytes(&key, &sdtype[k], sizeof sdtype[k]);
        cannsim_key_bytes(&key, sbytes[k], sizeof sbytes[k]);
    }
    if (opapi_phase1_cached(p1, op, &key, &io, tin, kt ? 2 : 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    const int dt[3] = {s.dtype, kt ? t.dtype : sdtype[0], o.dtype};
    const int alpha = kind == K_ADD ? sdtype[0] : sdtype[1];
    int calc;
    for (int k = 0; k < nscalars; k++)
        if (!ew_dtype_ok(sdtype[k]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not "
                                "support", p1, names[k], sdtype[k]);
    if ((rc = check_dtypes(p1, kind, dt, kt ? "other" : names[0], alpha, &calc))) return rc;
    if (s.ndim > 8 || o.ndim > 8 || (kt && t.ndim > 8))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: a tensor has more than 8 dims", p1);
    if (kt) {
        if ((rc = opapi_check_broadcast(p1, "self", &s, "out", &o)) ||
            (rc = opapi_check_broadcast(p1, "other", &t, "out", &o)))
            return rc;
        /* out must be the broadcast shape itself: some dim of self or other has out's size, or out's is 1 */
        for (int64_t i = 0; i < o.ndim; i++) {
            int64_t si = i - (o.ndim - s.ndim), ti = i - (o.ndim - t.ndim);
            int64_t sd = si < 0 ? 1 : s.dims[si], td = ti < 0 ? 1 : t.dims[ti];
            if (o.dims[i] != (sd > td ? sd : td))
                return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out dim %" PRId64 " has size %" PRId64 ", not the "
                                    "broadcast size %" PRId64, p1, i, o.dims[i], sd > td ? sd : td);
        }
    } else {
        int same = s.ndim == o.ndim;
        for (int64_t i = 0; same && i < s.ndim; i++) same = s.dims[i] == o.dims[i];
        if (!same) return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out's shape is not self's", p1);
    }
    /* a scalar other is cast to calc (ConvertToTensor); alpha stays as given */
    double first = nscalars ? ew_load(sdtype[0], sbytes[0]) : 1.0;
    op_data od = {kind, calc, first, 0.0}; /* Add: mul = alpha; Mul: unused */
    if (kind == K_MULS) od.mul = ew_round(calc, first);
    if (kind == K_ADDS) od.add = ew_load(sdtype[1], sbytes[1]) * ew_round(calc, first); /* alpha * other */
    int64_t numel = 1;
    for (int64_t i = 0; i < o.ndim; i++) numel *= o.dims[i];
    if (numel == 0) return opapi_phase1_done(p1, op, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(p1, "self", &s))) return rc;
    if (kt && (rc = opapi_check_view_in_storage(p1, "other", &t))) return rc;
    if ((rc = opapi_check_view_in_storage(p1, "out", &o))) return rc;
    /* each input against out (inputs may share memory: x * x) */
    if ((rc = opapi_check_memory(p1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    if (kt && (rc = opapi_check_memory(p1, tin + 1, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(p1, op, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    bin_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    const aclTensor *out = &snap->out[0];
    ew_view_as(&a->self, &snap->in[0], out);
    if (a->k.kind == K_MUL || a->k.kind == K_ADD) ew_view_as(&a->other, &snap->in[1], out);
    ew_view_as(&a->out, out, out);
    return a;
}

/* element i: the inputs cast to calc, the result rounded to calc (then cast to out's dtype by the store) */
static double bin_value(const bin_args *a, int64_t i) {
    const op_data *k = &a->k;
    double x = ew_round(k->calc, ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i))), y = 0;
    if (k->kind == K_MUL || k->kind == K_ADD)
        y = ew_round(k->calc, ew_load(a->other.dtype, a->other.data + ew_offset(&a->other, i)));
    switch (k->kind) {
    case K_MULS: return ew_round(k->calc, x * k->mul);
    case K_MUL: return ew_round(k->calc, x * y);
    case K_ADD: return ew_round(k->calc, x + k->mul * y);
    default: return ew_round(k->calc, x + k->add);
    }
}

static int bin_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    bin_args *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t i = 0; i < n; i++) ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), bin_value(a, i));
    return 0;
}

static const opapi_kernel k_kernel = {make_args, bin_task, free, NULL};

CANNSIM_API aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
    return bin_phase1("aclnnMulGetWorkspaceSize", "Mul", K_MUL, self, other, NULL, NULL, 0, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
    const aclScalar *scalars[1] = {other};
    const char *const names[1] = {"other"};
    return bin_phase1("aclnnMulsGetWorkspaceSize", "Muls", K_MULS, self, NULL, scalars, names, 1, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                                 const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
    const aclScalar *scalars[1] = {alpha};
    const char *const names[1] = {"alpha"};
    return bin_phase1("aclnnAddGetWorkspaceSize", "Add", K_ADD, self, other, scalars, names, 1, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
                                                  const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                  aclOpExecutor **executor) {
    const aclScalar *scalars[2] = {other, alpha};
    const char *const names[2] = {"other", "alpha"};
    return bin_phase1("aclnnAddsGetWorkspaceSize", "Adds", K_ADDS, self, NULL, scalars, names, 2, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnMul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream) {
    return opapi_phase2("aclnnMul", "Mul", workspace, workspaceSize, executor, stream, &k_kernel);
}

CANNSIM_API aclnnStatus aclnnMuls(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                  aclrtStream stream) {
    return opapi_phase2("aclnnMuls", "Muls", workspace, workspaceSize, executor, stream, &k_kernel);
}

CANNSIM_API aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                 aclrtStream stream) {
    return opapi_phase2("aclnnAdd", "Add", workspace, workspaceSize, executor, stream, &k_kernel);
}

CANNSIM_API aclnnStatus aclnnAdds(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                  aclrtStream stream) {
    return opapi_phase2("aclnnAdds", "Adds", workspace, workspaceSize, executor, stream, &k_kernel);
}
