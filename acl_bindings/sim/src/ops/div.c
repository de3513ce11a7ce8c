/*
 * div.c - the simulated two-phase aclnnDiv(self, other, out) and aclnnDivs(self, other, out): out = self / other
 * (true division), other a tensor (self and other broadcast to out's shape) or a scalar; and the in-place
 * aclnnInplaceDiv(selfRef, other) and aclnnInplaceDivs(selfRef, other), whose out is selfRef (ops-math
 * math/div/docs/aclnnDiv&aclnnInplaceDiv.md, aclnnDivs&aclnnInplaceDivs.md).  op-plugin's div, div_out and div_
 * without a rounding mode need both forms (DivKernelNpuOpApi.cpp: DO_COMPATIBILITY of both) and take the scalar
 * form for a host 0-dim tensor or a Python number (torch's mean backward, grad / numel, is Divs).  The rounding
 * modes (aclnnDivMod, aclnnDivMods) are not simulated.
 * Checks and compute dtypes as ops-math math/div/op_api/aclnn_div.cpp on Atlas A2/A3 (CheckParams,
 * CheckParamsScalar, CheckInplace, CompatibleInferDivDtype, the 910B mixed-dtype pairs; RealDiv's float32 result
 * for int32 and bool), the engine of kernels/arith.c.  Division by zero gives IEEE infinities and NaN.
 */
#include "kernels/arith.h"

CANNSIM_REGISTER_OP("aclnnDivGetWorkspaceSize", "aclnnDiv", "aclnnDivsGetWorkspaceSize", "aclnnDivs", "aclnnInplaceDivGetWorkspaceSize", "aclnnInplaceDiv", "aclnnInplaceDivsGetWorkspaceSize", "aclnnInplaceDivs")

static const arith_op DIV = {"aclnnDivGetWorkspaceSize", "Div", AR_DIV, 0, 0, 0};
static const arith_op DIVS = {"aclnnDivsGetWorkspaceSize", "Divs", AR_DIV, 1, 0, 0};
static const arith_op IDIV = {"aclnnInplaceDivGetWorkspaceSize", "InplaceDiv", AR_DIV, 0, 0, 1};
static const arith_op IDIVS = {"aclnnInplaceDivsGetWorkspaceSize", "InplaceDivs", AR_DIV, 1, 0, 1};

CANNSIM_API aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&DIV, self, other, NULL, NULL, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnDivsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&DIVS, self, NULL, other, NULL, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceDivGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other,
                                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&IDIV, selfRef, other, NULL, NULL, selfRef, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceDivsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other,
                                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&IDIVS, selfRef, NULL, other, NULL, selfRef, workspaceSize, executor);
}

ARITH_PHASE2(aclnnDiv, "Div")
ARITH_PHASE2(aclnnDivs, "Divs")
ARITH_PHASE2(aclnnInplaceDiv, "InplaceDiv")
ARITH_PHASE2(aclnnInplaceDivs, "InplaceDivs")
