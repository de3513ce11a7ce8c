/*
 * upsample_nearest3d_backward.c - aclnnUpsampleNearest3dBackward (non-exact): not simulated.
 * The entry points exist with the real prototypes (cann-abi.md §1.4), so that a binding
 * resolving them finds them; each call is counted and answers ACL_ERROR_API_NOT_SUPPORT
 * (200001) with a message.
 */
#include "opapi.h"

CANNSIM_REGISTER_OP("aclnnUpsampleNearest3dBackwardGetWorkspaceSize", "aclnnUpsampleNearest3dBackward")

CANNSIM_API aclnnStatus aclnnUpsampleNearest3dBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD,
    double scalesH, double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor) {
    (void)gradOut, (void)outputSize, (void)inputSize, (void)scalesD, (void)scalesH, (void)scalesW, (void)gradInput,
        (void)workspaceSize, (void)executor;
    int rc = cannsim_enter("aclnnUpsampleNearest3dBackwardGetWorkspaceSize");
    if (rc) return rc;
    return OPAPI_NOT_SUPPORTED("aclnnUpsampleNearest3dBackwardGetWorkspaceSize");
}

CANNSIM_API aclnnStatus aclnnUpsampleNearest3dBackward(void *workspace, uint64_t workspaceSize,
                                                       aclOpExecutor *executor, aclrtStream stream) {
    (void)workspace, (void)workspaceSize, (void)executor, (void)stream;
    int rc = cannsim_enter("aclnnUpsampleNearest3dBackward");
    if (rc) return rc;
    return OPAPI_NOT_SUPPORTED("aclnnUpsampleNearest3dBackward");
}
