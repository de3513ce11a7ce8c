/*
 * foreach_mul_scalar.c - the simulated two-phase aclnnForeachMulScalarV2(x, scalar, out): out[i] = x[i] * scalar for
 * every i, scalar an aclScalar (hicann/ops-nn e5c3fa932 foreach/foreach_mul_scalar/op_host/op_api/
 * aclnn_foreach_mul_scalar_v2.cpp, docs/aclnnForeachMulScalarV2.md).  op-plugin's _foreach_mul / _foreach_mul_
 * (Python: torch._foreach_mul_(bufs, momentum), SGD's momentum step) take it when the symbol is there (OP
 * op_plugin/ops/opapi/ForeachMulScalarKernelOpApi.cpp: DO_COMPATIBILITY(aclnnForeachMulScalarV2, the V1 path
 * aclnnForeachMulScalar with the scalar as a device tensor), on Atlas A2/A3; at most 48 tensors a call in place, 24
 * out of place; in place, out is the x list itself).
 * Phase 1, in CANN's order (CheckParams): x, scalar, out NULL -> 161001; dtypes (DAV_2201 or a regbase SoC; with a
 * non-empty x: x[0]'s dtype in float32, float16, bfloat16, int32; every x[i] and out[i] x[0]'s dtype; the scalar
 * float32/double for float32 and bfloat16, float16/double for float16 (on Ascend950 float32 too), int32/int64 for
 * int32) -> 161002; then x and out not as many tensors, more than 8 dims, out[i] not x[i]'s shape -> 161002; a
 * private format -> 161002.  Empty x (and out): an executor with nothing to run.
 * Arithmetic: the scalar is converted to x's dtype (bfloat16, and on Ascend950 float16 with a float32/double scalar:
 * float32; ConvertToTensor); the kernel (op_kernel/foreach_mul_scalar.cpp, Muls) computes in float16 for float16,
 * float32 for float32 and bfloat16, int32 for int32; the product is rounded to that dtype, then stored in out's.
 * (The Ascend950 kernel, op_kernel/arch35, was not read: float16 with a float32 scalar is taken to compute in
 * float32.)
 */
#define _GNU_SOURCE
#include "kernels/foreach.h"

CANNSIM_REGISTER_OP("aclnnForeachMulScalarV2GetWorkspaceSize", "aclnnForeachMulScalarV2")

static const int k_list_dtypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32};
static const int k_scalar_float[] = {ACL_FLOAT, ACL_DOUBLE};
static const int k_scalar_half[] = {ACL_FLOAT16, ACL_DOUBLE};
static const int k_scalar_half_950[] = {ACL_FLOAT16, ACL_FLOAT, ACL_DOUBLE};
static const int k_scalar_int[] = {ACL_INT32, ACL_INT64};

static double mul_value(const foreach_op *op, const ew_view *in, int nin, int64_t e) {
    (void)nin;
    double x = ew_round(op->calc, ew_load(in[0].dtype, in[0].data + ew_offset(&in[0], e)));
    return ew_round(op->calc, x * op->scalar);
}

static int checks(const char *p1, const foreach_lists *l, int sdt, foreach_op *fop) {
    int rc;
    if ((rc = foreach_check_soc(p1))) return rc;
    const int regbase = opapi_soc_is("ascend950");
    int dt = ACL_FLOAT;
    if (l->n[0]) {
        dt = l->t[0][0].dtype;
        if ((rc = foreach_check_dtype_in(p1, "x[0]", dt, k_list_dtypes, 4, NULL)) ||
            (rc = foreach_check_list_dtype(p1, "x", l->t[0], l->n[0], dt, "x[0]")) ||
            (rc = foreach_check_list_dtype(p1, "out", l->t[1], l->n[1], dt, "x[0]")))
            return rc;
        const int *sl = k_scalar_int;
        int n = 2;
        if (dt == ACL_FLOAT || dt == ACL_BF16) sl = k_scalar_float;
        else if (dt == ACL_FLOAT16 && regbase) sl = k_scalar_half_950, n = 3;
        else if (dt == ACL_FLOAT16) sl = k_scalar_half;
        if ((rc = foreach_check_dtype_in(p1, "scalar", sdt, sl, n, ", the dtypes the scalar may have with this list")))
            return rc;
    }
    if ((rc = foreach_check_sizes(p1, "x", l->n[0], "out", l->n[1])) ||
        (rc = foreach_check_list_limits(p1, "x", l->t[0], l->n[0], 1)) ||
        (rc = foreach_check_list_shapes(p1, "x", l->t[0], "out", l->t[1], l->n[0])) ||
        (rc = foreach_check_list_limits(p1, "out", l->t[1], l->n[1], 0)))
        return rc;
    const int wide = dt == ACL_BF16 || (regbase && dt == ACL_FLOAT16 && (sdt == ACL_FLOAT || sdt == ACL_DOUBLE));
    fop->calc = wide ? ACL_FLOAT : dt;
    fop->scalar = ew_round(fop->calc, fop->scalar);
    return 0;
}

CANNSIM_API aclnnStatus aclnnForeachMulScalarV2GetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar,
                                                                aclTensorList *out, uint64_t *workspaceSize,
                                                                aclOpExecutor **executor) {
    const opapi_handle nulls[3] = {{"x", x, 0}, {"scalar", scalar, 0}, {"out", out, 0}};
    const foreach_list_arg args[2] = {{"x", x}, {"out", out}};
    return foreach_phase1("aclnnForeachMulScalarV2GetWorkspaceSize", "ForeachMulScalarV2", nulls, 3, args, 2, scalar,
                          checks, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnForeachMulScalarV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                aclrtStream stream) {
    return foreach_phase2("aclnnForeachMulScalarV2", "ForeachMulScalarV2", workspace, workspaceSize, executor, stream,
                          mul_value);
}
