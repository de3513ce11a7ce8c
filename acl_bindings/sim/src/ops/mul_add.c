/*
 * mul_add.c - the simulated two-phase aclnnMul(self, other, out) and aclnnMuls(self, other, out): out = self *
 * other; aclnnAdd(self, other, alpha, out) and aclnnAdds(self, other, alpha, out): out = self + alpha * other.
 * other is a tensor (Mul, Add: self and other broadcast to out's shape) or a scalar (Muls, Adds); alpha a scalar
 * (ops-math math/mul/docs/aclnnMul&aclnnInplaceMul.md, math/muls/docs/aclnnMuls&aclnnInplaceMuls.md,
 * math/add/docs/aclnnAdd&aclnnInplaceAdd.md, aclnnAdds.md).  op-plugin's mul and add need both forms of each
 * (MulKernelNpuOpApi.cpp, AddKernelNpuOpApi.cpp: DO_COMPATIBILITY of both), and take the scalar form for a
 * Python number.  Phase 1 checks the handles (161001 for NULL), the dtypes and the shapes (161002; at most 8
 * dims) and the memory, and reads the scalars (they may be destroyed after phase 1); phase 2 queues the kernel.
 * Stricter than CANN: out, and a tensor other, must have self's dtype, and an integral or bool self takes no
 * floating scalar (the simulator does not model type promotion).  Values are computed in double and rounded
 * once to out's dtype.
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

/* kind 0 (Muls, Adds): out = self * mul + add; 1 (Mul): out = self * other; 2 (Add): out = self + mul * other */
typedef struct {
    int kind;
    double mul, add;
} op_data;

typedef struct {
    ew_view self, other, out; /* self and other with out's ndim and sizes, stride 0 where broadcast */
    op_data k;
} bin_args;

static int is_floating(int dtype) {
    return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

/* Phase 1 of all four: other is a tensor (other_t) or the first of the scalars; alpha, for Add and Adds, the last. */
static aclnnStatus bin_phase1(const char *p1, const char *op, int kind, const aclTensor *self,
                              const aclTensor *other_t, const aclScalar *const *scalars, const char *const *names,
                              int nscalars, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(p1, workspaceSize, executor);
    if (rc) return rc;
    if (!self) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: self is NULL", p1);
    if (kind && !other_t) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: other is NULL", p1);
    for (int k = 0; k < nscalars; k++)
        if (!scalars[k]) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", p1, names[k]);
    if (!out) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: out is NULL", p1);
    aclTensor s, o, t;
    const opapi_handle handles[3] = {{"self", self, 0}, {"out", out, 0}, {"other", other_t, 0}};
    cannsim_lock();
    rc = opapi_check_live_locked(p1, handles, kind ? 3 : 2);
    if (!rc) {
        s = *self;
        o = *out;
        if (kind) t = *other_t;
    }
    cannsim_unlock();
    if (rc) return rc;
    int sdtype[2] = {0, 0};
    unsigned char sbytes[2][8] = {{0}};
    for (int k = 0; k < nscalars; k++)
        if ((rc = cannsim_scalar_read(p1, scalars[k], &sdtype[k], sbytes[k]))) return rc;

    const aclTensor *ins[2] = {self, other_t};
    const aclTensor *outs[1] = {out};
    cannsim_exec_io io = {ins, kind ? 2 : 1, outs, 1, NULL, 0, kind ? "self,other,out" : "self,out"};
    const opapi_tensor tin[2] = {{"self", &s}, {"other", &t}}, tout[1] = {{"out", &o}};
    cannsim_key key;
    cannsim_key_init(&key, p1);
    cannsim_key_tensor(&key, &s, 0);
    cannsim_key_tensor(&key, &o, 1);
    if (kind) cannsim_key_tensor(&key, &t, other_t == self ? 0 : 2);
    for (int k = 0; k < nscalars; k++) {
        cannsim_key_bytes(&key, &sdtype[k], sizeof sdtype[k]);
        cannsim_key_bytes(&key, sbytes[k], sizeof sbytes[k]);
    }
    if (opapi_phase1_cached(p1, op, &key, &io, tin, kind ? 2 : 1, tout, 1, workspaceSize, executor, &rc)) return rc;

    if (!ew_dtype_ok(s.dtype))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: self has dtype %d, which the simulator does not support "
                            "(float32, float16, bfloat16, float64, int8..int64, uint8, bool)", p1, s.dtype);
    if (o.dtype != s.dtype)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out has dtype %d but self has %d: the simulator takes "
                            "out in self's dtype (it does not model type promotion)", p1, o.dtype, s.dtype);
    if (kind && t.dtype != s.dtype)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: other has dtype %d but self has %d: the simulator takes "
                            "other in self's dtype (it does not model type promotion)", p1, t.dtype, s.dtype);
    for (int k = 0; k < nscalars; k++) {
        if (!ew_dtype_ok(sdtype[k]))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %d, which the simulator does not "
                                "support", p1, names[k], sdtype[k]);
        if (is_floating(sdtype[k]) && !is_floating(s.dtype))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s is floating (dtype %d) but self is not (dtype %d): "
                                "the simulator does not model that promotion", p1, names[k], sdtype[k], s.dtype);
    }
    if (s.ndim > 8 || o.ndim > 8 || (kind && t.ndim > 8))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: a tensor has more than 8 dims", p1);
    if (kind) {
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
    double first = nscalars ? ew_load(sdtype[0], sbytes[0]) : 1.0;
    op_data od = {kind, first, 0.0}; /* Muls: mul = other; Add: mul = alpha; Mul: unused */
    if (nscalars == 2) od = (op_data){kind, 1.0, ew_load(sdtype[1], sbytes[1]) * first}; /* Adds: add = alpha * other */
    int64_t numel = 1;
    for (int64_t i = 0; i < o.ndim; i++) numel *= o.dims[i];
    if (numel == 0) return opapi_phase1_done(p1, op, &io, &key, 0, 1, &od, sizeof od, workspaceSize, executor);
    if ((rc = opapi_check_view_in_storage(p1, "self", &s))) return rc;
    if (kind && (rc = opapi_check_view_in_storage(p1, "other", &t))) return rc;
    if ((rc = opapi_check_view_in_storage(p1, "out", &o))) return rc;
    /* each input against out (inputs may share memory: x * x) */
    if ((rc = opapi_check_memory(p1, tin, 1, tout, 1, NULL, 0, NULL))) return rc;
    if (kind && (rc = opapi_check_memory(p1, tin + 1, 1, tout, 1, NULL, 0, NULL))) return rc;
    return opapi_phase1_done(p1, op, &io, &key, 0, 0, &od, sizeof od, workspaceSize, executor);
}

static void *make_args(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize) {
    (void)workspace, (void)workspaceSize;
    bin_args *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    memcpy(&a->k, snap->opdata, sizeof a->k);
    const aclTensor *out = &snap->out[0];
    ew_view_as(&a->self, &snap->in[0], out);
    if (a->k.kind) ew_view_as(&a->other, &snap->in[1], out);
    ew_view_as(&a->out, out, out);
    return a;
}

static int bin_task(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    bin_args *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t i = 0; i < n; i++) {
        double x = ew_load(a->self.dtype, a->self.data + ew_offset(&a->self, i)), v;
        if (a->k.kind) {
            double y = ew_load(a->other.dtype, a->other.data + ew_offset(&a->other, i));
            v = a->k.kind == 1 ? x * y : x + a->k.mul * y;
        } else {
            v = x * a->k.mul + a->k.add;
        }
        ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, i), v);
    }
    return 0;
}

static const opapi_kernel k_kernel = {make_args, bin_task, free, NULL};

CANNSIM_API aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
    return bin_phase1("aclnnMulGetWorkspaceSize", "Mul", 1, self, other, NULL, NULL, 0, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
    const aclScalar *scalars[1] = {other};
    const char *const names[1] = {"other"};
    return bin_phase1("aclnnMulsGetWorkspaceSize", "Muls", 0, self, NULL, scalars, names, 1, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                                 const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
    const aclScalar *scalars[1] = {alpha};
    const char *const names[1] = {"alpha"};
    return bin_phase1("aclnnAddGetWorkspaceSize", "Add", 2, self, other, scalars, names, 1, out, workspaceSize,
                      executor);
}

CANNSIM_API aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
                                                  const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                  aclOpExecutor **executor) {
    const aclScalar *scalars[2] = {other, alpha};
    const char *const names[2] = {"other", "alpha"};
    return bin_phase1("aclnnAddsGetWorkspaceSize", "Adds", 0, self, NULL, scalars, names, 2, out, workspaceSize,
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
