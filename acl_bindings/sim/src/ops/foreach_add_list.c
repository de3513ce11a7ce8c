/*
 * foreach_add_list.c - the simulated two-phase aclnnForeachAddListV2(x1, x2, alpha, out): out[i] = x1[i] + alpha *
 * x2[i] for every i, alpha an aclScalar (hicann/ops-nn e5c3fa932 foreach/foreach_add_list/op_host/op_api/
 * aclnn_foreach_add_list_v2.cpp, docs/aclnnForeachAddListV2.md).  op-plugin's _foreach_add / _foreach_add_ (Python:
 * torch._foreach_add_(params, grads, alpha=-lr), SGD's foreach step) take it when the symbol is there (OP
 * op_plugin/ops/opapi/ForeachAddKernelNpuOpApi.cpp: DO_COMPATIBILITY(aclnnForeachAddListV2, the V1 path
 * aclnnForeachAddList with alpha as a device tensor), on Atlas A2/A3; at most 24 tensors a call in place, 16 out of
 * place, the lists split beyond; in place, out is the x1 list itself; an integral alpha on floating lists is made a
 * double first (adaptToDouble)).
 * Phase 1, in CANN's order (ForeachAddListV2CheckParams): x1, x2, alpha, out NULL -> 161001; x1 and x2, x1 and out
 * not as many tensors -> 161002; dtypes (DAV_2201 or a regbase SoC; x1[0]'s dtype in float32, float16, bfloat16,
 * int32, int16, int8, uint8; alpha float32/double for float32 and bfloat16 lists, float16/double for float16, int32/
 * int64 for the integral ones; every tensor of the three lists x1[0]'s dtype) -> 161002; shapes (x2[i] and out[i]
 * x1[i]'s, at most 8 dims) -> 161002; no private format -> 161002.  Empty lists: an executor with nothing to run.
 * The simulator also refuses a NULL entry (CANN dereferences it) and checks memory (kernels/foreach.c).
 * Arithmetic: alpha is converted to x1's dtype (bfloat16: float32; int16, int8, uint8: int32; ConvertToTensor);
 * the kernel (op_kernel/foreach_add_list.cpp) computes in float16 for float16, int8 and uint8, in float32 for
 * float32, bfloat16 and int16, in int32 for int32 (Axpy, or Muls then Add): x2 * alpha and the sum are each rounded
 * to that dtype (whether the device's Axpy rounds the product is not known), then the store casts to out's dtype.
 */
#define _GNU_SOURCE
#include "kernels/foreach.h"

CANNSIM_REGISTER_OP("aclnnForeachAddListV2GetWorkspaceSize", "aclnnForeachAddListV2")

static const int k_list_dtypes[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32, ACL_INT16, ACL_INT8, ACL_UINT8};
static const int k_alpha_float[] = {ACL_FLOAT, ACL_DOUBLE};
static const int k_alpha_half[] = {ACL_FLOAT16, ACL_DOUBLE};
static const int k_alpha_int[] = {ACL_INT32, ACL_INT64};

static double add_value(const foreach_op *op, const ew_view *in, int nin, int64_t e) {
    (void)nin;
    double x1 = ew_round(op->calc, ew_load(in[0].dtype, in[0].data + ew_offset(&in[0], e)));
    double x2 = ew_round(op->calc, ew_load(in[1].dtype, in[1].data + ew_offset(&in[1], e)));
    return ew_round(op->calc, x1 + ew_round(op->calc, x2 * op->scalar));
}

static int checks(const char *p1, const foreach_lists *l, int adt, foreach_op *fop) {
    int rc;
    if ((rc = foreach_check_sizes(p1, "x1", l->n[0], "x2", l->n[1])) ||
        (rc = foreach_check_sizes(p1, "x1", l->n[0], "out", l->n[2])) || (rc = foreach_check_soc(p1)))
        return rc;
    if (l->n[0] == 0) return 0;
    const int dt = l->t[0][0].dtype;
    if ((rc = foreach_check_dtype_in(p1, "x1[0]", dt, k_list_dtypes, 7, NULL))) return rc;
    const int *al = dt == ACL_FLOAT || dt == ACL_BF16 ? k_alpha_float : dt == ACL_FLOAT16 ? k_alpha_half : k_alpha_int;
    if ((rc = foreach_check_dtype_in(p1, "alpha", adt, al, 2, ", the dtypes alpha may have with these lists")))
        return rc;
    if ((rc = foreach_check_list_dtype(p1, "x1", l->t[0], l->n[0], dt, "x1[0]")) ||
        (rc = foreach_check_list_dtype(p1, "x2", l->t[1], l->n[1], dt, "x1[0]")) ||
        (rc = foreach_check_list_dtype(p1, "out", l->t[2], l->n[2], dt, "x1[0]")) ||
        (rc = foreach_check_list_shapes(p1, "x1", l->t[0], "x2", l->t[1], l->n[0])) ||
        (rc = foreach_check_list_limits(p1, "x1", l->t[0], l->n[0], 1)) ||
        (rc = foreach_check_list_shapes(p1, "x1", l->t[0], "out", l->t[2], l->n[0])) ||
        (rc = foreach_check_list_limits(p1, "x1", l->t[0], l->n[0], 0)) ||
        (rc = foreach_check_list_limits(p1, "x2", l->t[1], l->n[1], 0)) ||
        (rc = foreach_check_list_limits(p1, "out", l->t[2], l->n[2], 0)))
        return rc;
    const int conv = dt == ACL_BF16 ? ACL_FLOAT : dt == ACL_INT16 || dt == ACL_INT8 || dt == ACL_UINT8 ? ACL_INT32 : dt;
    fop->calc = dt == ACL_INT8 || dt == ACL_UINT8 ? ACL_FLOAT16 : dt == ACL_BF16 || dt == ACL_INT16 ? ACL_FLOAT : dt;
    fop->scalar = ew_round(fop->calc, ew_round(conv, fop->scalar));
    return 0;
}

CANNSIM_API aclnnStatus aclnnForeachAddListV2GetWorkspaceSize(const aclTensorList *x1, const aclTensorList *x2,
                                                              const aclScalar *alpha, aclTensorList *out,
                                                              uint64_t *workspaceSize, aclOpExecutor **executor) {
    const opapi_handle nulls[4] = {{"x1", x1, 0}, {"x2", x2, 0}, {"alpha", alpha, 0}, {"out", out, 0}};
    const foreach_list_arg args[3] = {{"x1", x1}, {"x2", x2}, {"out", out}};
    return foreach_phase1("aclnnForeachAddListV2GetWorkspaceSize", "ForeachAddListV2", nulls, 4, args, 3, alpha,
                          checks, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnForeachAddListV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                              aclrtStream stream) {
    return foreach_phase2("aclnnForeachAddListV2", "ForeachAddListV2", workspace, workspaceSize, executor, stream,
                          add_value);
}
