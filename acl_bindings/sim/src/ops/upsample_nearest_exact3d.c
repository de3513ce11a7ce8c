/*
 * upsample_nearest_exact3d.c - aclnnUpsampleNearestExact3d (the forward): not simulated.
 * The entry points exist with the real prototypes (cann-abi.md §1.4), so that a binding
 * resolving them finds them; each call is counted and answers ACL_ERROR_API_NOT_SUPPORT
 * (200001) with a message.
 */
#include "opapi.h"

CANNSIM_REGISTER_OP("aclnnUpsampleNearestExact3dGetWorkspaceSize", "aclnnUpsampleNearestExact3d")

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dGetWorkspaceSize(const aclTensor *self,
                                                                    const aclIntArray *outputSize, double scalesD,
                                                                    double scalesH, double scalesW, aclTensor *out,
                                                                    uint64_t *workspaceSize,
                                                                    aclOpExecutor **executor) {
    (void)self, (void)outputSize, (void)scalesD, (void)scalesH, (void)scalesW, (void)out, (void)workspaceSize,
        (void)executor;
    int rc = cannsim_enter("aclnnUpsampleNearestExact3dGetWorkspaceSize");
    if (rc) return rc;
    return OPAPI_NOT_SUPPORTED("aclnnUpsampleNearestExact3dGetWorkspaceSize");
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3d(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                    aclrtStream stream) {
    (void)workspace, (void)workspaceSize, (void)executor, (void)stream;
    int rc = cannsim_enter("aclnnUpsampleNearestExact3d");
    if (rc) return rc;
    return OPAPI_NOT_SUPPORTED("aclnnUpsampleNearestExact3d");
}
