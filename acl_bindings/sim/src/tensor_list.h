/*
 * tensor_list.h - the simulated aclTensorList of libnnopbase (nnopbase.c) and what an operator reads of one
 * (kernels/foreach.c).  A list holds its own copy of the caller's array of aclTensor pointers (OPB
 * src/nnopbase/common/utils/common_types.cpp, aclTensorList::aclTensorList: a NULL array or a size of 0 gives an
 * empty list) and owns those tensors: aclDestroyTensorList destroys each of them, then the list (OPB
 * src/nnopbase/common/api/acl_op_api.cpp, aclDestroyTensorList; docs/en/api/nnopbase/aclnn/aclDestroyTensorList.md:
 * "the aclTensor in the aclTensorList does not need to be destroyed again").  Every live list is in the runtime's
 * registry of kind "tensor_list" (cannsimLiveHandles("tensor_list")).
 */
#ifndef CANNSIM_TENSOR_LIST_H
#define CANNSIM_TENSOR_LIST_H

#include "cannsim.h"

typedef struct aclTensorList aclTensorList;

struct aclTensorList {
    uint64_t magic;
    uint64_t size;
    const aclTensor **tensors; /* size entries (NULL where empty); an entry may be NULL */
    uint64_t *serials;         /* each tensor's serial when the list was made (0 for a NULL entry) */
    uint64_t serial;           /* unique per created list (a freed address may be reused) */
};

CANNSIM_API aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size);
CANNSIM_API aclnnStatus aclDestroyTensorList(const aclTensorList *array);
CANNSIM_API aclnnStatus aclGetTensorListSize(const aclTensorList *tensorList, uint64_t *size);

#endif
