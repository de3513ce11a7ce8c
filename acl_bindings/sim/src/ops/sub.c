/*
 * sub.c - the simulated two-phase aclnnSub(self, other, alpha, out) and aclnnSubs(self, other, alpha, out):
 * out = self - alpha * other, other a tensor (self and other broadcast to out's shape) or a scalar; and the
 * in-place aclnnInplaceSub(selfRef, other, alpha) and aclnnInplaceSubs(selfRef, other, alpha), whose out is
 * selfRef (ops-math math/sub/docs/aclnnSub&aclnnInplaceSub.md, aclnnSubs&aclnnInplaceSubs.md).  op-plugin's sub,
 * sub_out and sub_ need both forms (SubKernelNpuOpApi.cpp: DO_COMPATIBILITY of both) and take the scalar form for
 * a host 0-dim tensor (IsCPUScalar) or a Python number.
 * Checks and promotion as ops-math math/sub/op_api/aclnn_sub.cpp on Atlas A2/A3 (CheckParams, CheckPromoteType,
 * PromoteTypeScalar; with alpha != 1 a floating promotion computes in float32), the engine of kernels/arith.c.
 * CheckInplace of aclnn_sub.cpp answers success (its `return false` is status 0) where its checks fail; the
 * out-of-place checks that follow, with out = selfRef, then refuse the same inputs with the same codes.
 */
#include "kernels/arith.h"

CANNSIM_REGISTER_OP("aclnnSubGetWorkspaceSize", "aclnnSub", "aclnnSubsGetWorkspaceSize", "aclnnSubs", "aclnnInplaceSubGetWorkspaceSize", "aclnnInplaceSub", "aclnnInplaceSubsGetWorkspaceSize", "aclnnInplaceSubs")

static const arith_op SUB = {"aclnnSubGetWorkspaceSize", "Sub", AR_SUB, 0, 1, 0};
static const arith_op SUBS = {"aclnnSubsGetWorkspaceSize", "Subs", AR_SUB, 1, 1, 0};
static const arith_op ISUB = {"aclnnInplaceSubGetWorkspaceSize", "InplaceSub", AR_SUB, 0, 1, 1};
static const arith_op ISUBS = {"aclnnInplaceSubsGetWorkspaceSize", "InplaceSubs", AR_SUB, 1, 1, 1};

CANNSIM_API aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                                 const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
    return arith_phase1(&SUB, self, other, NULL, alpha, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
                                                  const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                  aclOpExecutor **executor) {
    return arith_phase1(&SUBS, self, NULL, other, alpha, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceSubGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other,
                                                        const aclScalar *alpha, uint64_t *workspaceSize,
                                                        aclOpExecutor **executor) {
    return arith_phase1(&ISUB, selfRef, other, NULL, alpha, selfRef, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceSubsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other,
                                                         const aclScalar *alpha, uint64_t *workspaceSize,
                                                         aclOpExecutor **executor) {
    return arith_phase1(&ISUBS, selfRef, NULL, other, alpha, selfRef, workspaceSize, executor);
}

ARITH_PHASE2(aclnnSub, "Sub")
ARITH_PHASE2(aclnnSubs, "Subs")
ARITH_PHASE2(aclnnInplaceSub, "InplaceSub")
ARITH_PHASE2(aclnnInplaceSubs, "InplaceSubs")
