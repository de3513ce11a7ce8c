/*
 * nnopbase_scalar.c - the simulated aclScalar of libnnopbase: aclCreateScalar(value, dataType) copies the value
 * (of dataType's size) into the scalar; aclDestroyScalar frees it (OPB src/nnopbase/common/api/acl_op_api.cpp: a NULL value gives NULL, destroying NULL is 0; the
 * prototypes op-plugin resolves by dlsym, op_plugin/utils/op_api_common.h).  As for tensors, a destroyed or
 * foreign handle is reported (161002), never dereferenced: the simulator keeps its own list of live scalars.
 */
#define _GNU_SOURCE
#include "scalar.h"

#include <stdlib.h>
#include <string.h>

#define SCALAR_MAGIC 0x5343414c4152ULL /* "SCALAR" */

struct aclScalar {
    uint64_t magic;
    int dtype;
    unsigned char bytes[8];
    struct aclScalar *next;
};

static struct aclScalar *g_live; /* protected by the simulator lock */

static int live_locked(const aclScalar *s) {
    for (struct aclScalar *p = g_live; p; p = p->next)
        if (p == s) return 1;
    return 0;
}

CANNSIM_API aclScalar *aclCreateScalar(void *value, int dataType) {
    const char *F = "aclCreateScalar";
    if (cannsim_enter(F)) return NULL;
    int size = cannsim_dtype_size(dataType);
    if (!value) {
        cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: value is NULL", F);
        return NULL;
    }
    if (size == 0) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: dataType %d is not a dtype the simulator knows", F, dataType);
        return NULL;
    }
    aclScalar *s = calloc(1, sizeof *s);
    if (!s) {
        cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: out of host memory", F);
        return NULL;
    }
    s->magic = SCALAR_MAGIC;
    s->dtype = dataType;
    memcpy(s->bytes, value, (size_t)size);
    cannsim_lock();
    s->next = g_live;
    g_live = s;
    cannsim_unlock();
    return s;
}

CANNSIM_API aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
    int rc = cannsim_enter("aclDestroyScalar");
    if (rc) return rc;
    if (!scalar) return ACLNN_SUCCESS;
    int found = 0;
    cannsim_lock();
    for (struct aclScalar **pp = &g_live; *pp; pp = &(*pp)->next)
        if (*pp == scalar) {
            *pp = scalar->next;
            found = 1;
            break;
        }
    cannsim_unlock();
    if (!found)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "aclDestroyScalar: %p is not a live aclScalar (already destroyed, or not created by "
                            "aclCreateScalar)",
                            (const void *)scalar);
    free((void *)scalar);
    return ACLNN_SUCCESS;
}

CANNSIM_API int cannsim_scalar_read(const char *func, const aclScalar *scalar, int *dtype, unsigned char bytes[8]) {
    int rc = 0;
    cannsim_lock();
    if (!live_locked(scalar)) {
        rc = ACLNN_ERR_PARAM_INVALID;
    } else {
        *dtype = scalar->dtype;
        memcpy(bytes, scalar->bytes, 8);
    }
    cannsim_unlock();
    if (rc)
        return cannsim_fail(rc, "%s: %p is not a live aclScalar (destroyed, or not created by aclCreateScalar)", func,
                            (const void *)scalar);
    return 0;
}
