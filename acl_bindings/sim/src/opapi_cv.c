/*
 * opapi_cv.c - simulated operator library (libopapi_cv.so, or libopapi.so in the variant tree):
 * the two-phase aclnnUpsampleNearestExact3dBackward (cann-abi.md §1.4, §5.1).
 *
 * Phase 1 validates like the host API (us3d_check, §5.1 step 3), then - stricter than hardware -
 * checks that both tensors' data ranges lie in live simulated device memory, resolves the scales
 * (§5.2) and returns a non-zero workspace size.  Phase 2 validates the workspace and the (possibly
 * updated) tensor addresses and queues the kernel (us3d_run) on the stream.
 */
#define _GNU_SOURCE
#include "cannsim.h"
#include "us3d_kernel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P1 "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize"
#define P2 "aclnnUpsampleNearestExact3dBackward"
#define OP "UpsampleNearestExact3dBackward"
#define DATA_ALIGN 32 /* aclCreateTensor docs: device address 32-byte aligned (§1.3) */

typedef struct {
    float scale[3];
    int dtype;
} op_data;

/* Logical NCDHW sizes and element strides of a 5-D tensor (an NDHWC tensor's physical dims are
   [N,D,H,W,C], §5.1 step 3.4). */
static void ncdhw(const aclTensor *t, int64_t size[5], int64_t stride[5]) {
    static const int perm_ndhwc[5] = {0, 4, 1, 2, 3};
    for (int i = 0; i < 5; i++) {
        int j = t->format == ACL_FORMAT_NDHWC ? perm_ndhwc[i] : i;
        size[i] = t->dims[j];
        stride[i] = t->strides[j];
    }
}

/* Byte range [*lo, *lo + *bytes) touched by the tensor's view.  Returns 0, or 1 with why set. */
static int view_bytes(const aclTensor *t, int itemsize, const char **lo, uint64_t *bytes, char *why, size_t n) {
    int64_t mn = t->offset, mx = t->offset;
    for (int64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] == 0) {
            *lo = t->data;
            *bytes = 0;
            return 0;
        }
    }
    for (int64_t i = 0; i < t->ndim; i++) {
        int64_t span;
        if (__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &span) ||
            (span > 0 && __builtin_add_overflow(mx, span, &mx)) || (span < 0 && __builtin_add_overflow(mn, span, &mn))) {
            snprintf(why, n, "its strides overflow 64-bit offsets");
            return 1;
        }
    }
    if (mn < 0) {
        snprintf(why, n, "its view reaches %" PRId64 " elements before the data pointer", -mn);
        return 1;
    }
    uint64_t b, start;
    if (__builtin_mul_overflow((uint64_t)(mx - mn + 1), (uint64_t)itemsize, &b) ||
        __builtin_mul_overflow((uint64_t)mn, (uint64_t)itemsize, &start)) {
        snprintf(why, n, "its extent overflows 64 bits");
        return 1;
    }
    *lo = (const char *)t->data + start;
    *bytes = b;
    return 0;
}

/* nnopbase's IsContiguous (OPB src/nnopbase/composite_op/utils/tensor_view_utils.cpp): a tensor with 0 or 1
   elements is contiguous; otherwise the strides of the dims longer than 1 must be the row-major ones. */
static int view_is_contiguous(const aclTensor *t) {
    int64_t numel = 1;
    for (int64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] == 0) return 1;
        if (__builtin_mul_overflow(numel, t->dims[i], &numel)) numel = INT64_MAX;
    }
    if (numel <= 1) return 1;
    int64_t want = 1;
    for (int64_t i = t->ndim - 1; i >= 0; i--) {
        if (t->dims[i] == 1) continue;
        if (t->strides[i] != want) return 0;
        if (__builtin_mul_overflow(want, t->dims[i], &want)) return 0;
    }
    return 1;
}

/* nnopbase's Validate (same file), which l0op::Contiguous (gradOut) and the ViewCopy back to a non-contiguous
   gradInput depend on: in elements, max = offset + sum(max(0, stride*(dim-1))) and min = offset +
   sum(min(0, stride*(dim-1))) need max + 1 <= product(storageDims) and min >= 0 (cann-abi.md §8.1).  A failure
   there makes phase 1 return ACLNN_ERR_INNER_NULLPTR (OCV aclnn_upsample_nearest_exact3d_backward.cpp,
   CHECK_RET after Contiguous / ViewCopy).  Returns 0, or 561103 with a message naming the tensor. */
static int check_view_in_storage(const char *func, const char *name, const aclTensor *t) {
    if (view_is_contiguous(t)) return 0;
    int64_t mx = t->offset, mn = t->offset, storage = 1;
    int overflow = 0;
    for (int64_t i = 0; i < t->ndim; i++) {
        int64_t span;
        if (__builtin_mul_overflow(t->strides[i], t->dims[i] - 1, &span) ||
            (span > 0 ? __builtin_add_overflow(mx, span, &mx) : __builtin_add_overflow(mn, span, &mn)))
            overflow = 1;
    }
    for (int64_t i = 0; i < t->nstorage; i++)
        if (__builtin_mul_overflow(storage, t->storage[i], &storage)) storage = INT64_MAX;
    if (!overflow && mx < storage && mn >= 0) return 0;
    char dims[400] = "", strides[400] = "", sdims[400] = "";
    size_t a = 0, b = 0, c = 0;
    for (int64_t i = 0; i < t->ndim; i++) {
        if (a < sizeof dims) a += (size_t)snprintf(dims + a, sizeof dims - a, "%s%" PRId64, i ? "," : "", t->dims[i]);
        if (b < sizeof strides)
            b += (size_t)snprintf(strides + b, sizeof strides - b, "%s%" PRId64, i ? "," : "", t->strides[i]);
    }
    for (int64_t i = 0; i < t->nstorage; i++)
        if (c < sizeof sdims)
            c += (size_t)snprintf(sdims + c, sizeof sdims - c, "%s%" PRId64, i ? "," : "", t->storage[i]);
    char reach[96];
    if (overflow) snprintf(reach, sizeof reach, "reaches past 64-bit element offsets");
    else snprintf(reach, sizeof reach, "reaches elements %" PRId64 " to %" PRId64, mn, mx);
    return cannsim_fail(ACLNN_ERR_INNER_NULLPTR,
                        "%s: %s (view [%s], strides [%s], offset %" PRId64 ") %s but its storage [%s] holds %" PRId64
                        " elements: a non-contiguous view must lie inside its declared storage (nnopbase "
                        "Validate; declare the whole buffer's element count as the storage)",
                        func, name, dims, strides, t->offset, reach, sdims, storage);
}

/* Check that a tensor's data lies in live device memory (lock held).  Returns 0 or 161002. */
static int check_tensor_memory(const char *func, const char *name, const aclTensor *t, const char **lo,
                               uint64_t *bytes) {
    char why[400];
    int isz = cannsim_dtype_size(t->dtype);
    if (!t->data)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has a NULL data pointer", func, name);
    if ((uintptr_t)t->data % DATA_ALIGN)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s data pointer %p is not %d-byte aligned", func, name,
                            t->data, DATA_ALIGN);
    if (view_bytes(t, isz, lo, bytes, why, sizeof why))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s: %s", func, name, why);
    if (*bytes && !cannsim_device_range(*lo, *bytes, NULL, why, sizeof why))
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s data is not inside live device memory: %s", func, name,
                            why);
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#define EXACT_OVERLAP_LIMIT (1 << 22) /* elements: above this, a layout the quick rule cannot clear is refused */

/* Whether two elements of an output view share memory (simulator rule: on hardware the kernel's writes to
   such an output race and the result is silently wrong).  A zero stride over a dim of size > 1 always
   overlaps; otherwise the dims sorted by stride must each step past what the smaller ones span, and a
   layout that fails that quick rule is checked element by element.  Returns 0, or 1 with why set. */
static int elements_overlap(const aclTensor *t, char *why, size_t n) {
    int64_t st[CANNSIM_MAX_DIMS], dm[CANNSIM_MAX_DIMS];
    int k = 0;
    for (int64_t i = 0; i < t->ndim; i++)
        if (t->dims[i] == 0) return 0;
    for (int64_t i = 0; i < t->ndim; i++) {
        if (t->dims[i] <= 1) continue;
        if (t->strides[i] == 0) {
            snprintf(why, n, "stride 0 in dim %" PRId64 " (size %" PRId64 ") makes its elements overlap", i,
                     t->dims[i]);
            return 1;
        }
        int64_t s = t->strides[i] < 0 ? -t->strides[i] : t->strides[i];
        int j = k++;
        while (j > 0 && st[j - 1] > s) { st[j] = st[j - 1]; dm[j] = dm[j - 1]; j--; }
        st[j] = s;
        dm[j] = t->dims[i];
    }
    int64_t extent = 1, count = 1;
    int quick = 1;
    for (int j = 0; j < k; j++) {
        if (st[j] < extent) quick = 0;
        extent += (dm[j] - 1) * st[j]; /* (view_bytes checked that the extent fits) */
        if (__builtin_mul_overflow(count, dm[j], &count)) count = INT64_MAX;
    }
    if (quick) return 0;
    if (count > EXACT_OVERLAP_LIMIT) {
        snprintf(why, n, "its strides may make elements overlap (a stride is smaller than the dims below it span)");
        return 1;
    }
    int64_t *off = malloc((size_t)count * sizeof *off);
    if (!off) {
        snprintf(why, n, "its strides may make elements overlap (no memory to check them one by one)");
        return 1;
    }
    off[0] = 0;
    int64_t have = 1;
    for (int j = 0; j < k; j++) {
        for (int64_t m = 1; m < dm[j]; m++)
            for (int64_t e = 0; e < have; e++) off[m * have + e] = off[e] + m * st[j];
        have *= dm[j];
    }
    qsort(off, (size_t)count, sizeof *off, cmp_i64);
    int dup = 0;
    for (int64_t e = 1; e < count && !dup; e++) dup = off[e] == off[e - 1];
    free(off);
    if (dup) snprintf(why, n, "its strides make elements overlap");
    return dup;
}

static int overlap(const char *a, uint64_t na, const char *b, uint64_t nb) {
    return na && nb && a < b + nb && b < a + na;
}

/* Validate both tensors' memory (and the workspace, if given) under the lock. */
static int check_memory(const char *func, const aclTensor *go, const aclTensor *gi, const void *ws, uint64_t wsn,
                        cannsim_ref refs[3]) {
    const char *glo, *ilo;
    uint64_t gb, ib;
    char why[400];
    int rc;
    cannsim_lock();
    if ((rc = check_tensor_memory(func, "gradOut", go, &glo, &gb))) goto out;
    if ((rc = check_tensor_memory(func, "gradInput", gi, &ilo, &ib))) goto out;
    if (elements_overlap(gi, why, sizeof why)) {
        rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: gradInput: %s; the kernel's writes would race (the "
                          "simulator refuses what hardware would compute silently wrong)", func, why);
        goto out;
    }
    if (overlap(glo, gb, ilo, ib)) {
        rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the memory of gradOut and gradInput overlaps", func);
        goto out;
    }
    if (ws) {
        if (!cannsim_device_range(ws, wsn, NULL, why, sizeof why)) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: workspace is not inside live device memory: %s", func, why);
            goto out;
        }
        if (overlap(ws, wsn, glo, gb) || overlap(ws, wsn, ilo, ib)) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the workspace overlaps gradOut or gradInput", func);
            goto out;
        }
    }
    if (refs) {
        refs[0] = (cannsim_ref){glo, gb, 0}; /* gradOut is read, gradInput and the workspace written */
        refs[1] = (cannsim_ref){ilo, ib, 1};
        refs[2] = (cannsim_ref){ws, ws ? wsn : 0, 1};
    }
out:
    cannsim_unlock();
    return rc;
}

static void fill_meta(const aclTensor *t, us3d_tensor_meta *m) {
    memset(m, 0, sizeof *m);
    if (!t) return;
    m->present = 1;
    m->dtype = t->dtype;
    m->format = t->format;
    m->ndim = t->ndim;
    for (int64_t i = 0; i < t->ndim && i < 8; i++) m->dims[i] = t->dims[i];
}

static void fill_array(const aclIntArray *a, us3d_array_meta *m) {
    memset(m, 0, sizeof *m);
    if (!a) return;
    m->present = 1;
    m->len = (int64_t)a->len;
    for (uint64_t i = 0; i < a->len && i < 8; i++) m->vals[i] = a->vals[i];
}

/* An array's values in the op-cache key, from the copy made under the lock (arrays longer than the copy fail
   phase 1's length checks, so they never reach a usable entry). */
static void key_array(cannsim_key *k, const us3d_array_meta *m) {
    const char sep = ',';
    if (m) {
        uint64_t n = m->len < 8 ? (uint64_t)m->len : 8;
        cannsim_key_bytes(k, m->vals, n * sizeof(int64_t));
        cannsim_key_bytes(k, &m->len, sizeof m->len);
    }
    cannsim_key_bytes(k, &sep, 1);
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD,
    double scalesH, double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = cannsim_enter(P1);
    if (rc) return rc;
    if (!workspaceSize) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: workspaceSize is NULL", P1);
    if (!executor) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL", P1);

    /* copy the descriptors while checking that the handles are live */
    aclTensor go, gi;
    us3d_tensor_meta mgo, mgi;
    us3d_array_meta mos, mis;
    cannsim_lock();
    const char *bad = NULL;
    const void *badp = NULL;
    if (gradOut && !cannsim_handle_live("tensor", gradOut)) bad = "gradOut", badp = gradOut;
    else if (outputSize && !cannsim_handle_live("int_array", outputSize)) bad = "outputSize", badp = outputSize;
    else if (inputSize && !cannsim_handle_live("int_array", inputSize)) bad = "inputSize", badp = inputSize;
    else if (gradInput && !cannsim_handle_live("tensor", gradInput)) bad = "gradInput", badp = gradInput;
    if (!bad) {
        fill_meta(gradOut, &mgo);
        fill_meta(gradInput, &mgi);
        fill_array(outputSize, &mos);
        fill_array(inputSize, &mis);
        if (gradOut) go = *gradOut;
        if (gradInput) gi = *gradInput;
    }
    cannsim_unlock();
    if (bad)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: %s %p is not a live %s (destroyed, or not created by %s)", P1, bad, badp,
                            bad[0] == 'g' ? "aclTensor" : "aclIntArray",
                            bad[0] == 'g' ? "aclCreateTensor" : "aclCreateIntArray");

    const aclTensor *ins[1] = {gradOut};
    const aclTensor *outs[1] = {gradInput};
    const aclIntArray *arrays[2] = {outputSize, inputSize};
    cannsim_exec_io io = {ins, 1, outs, 1, arrays, 2, "gradOut,gradInput,outputSize,inputSize"};

    /* L2_DFX_PHASE_1: the op cache answers before any check (cann-abi.md §8.6) */
    cannsim_key key;
    cannsim_key_init(&key, P1);
    cannsim_key_tensor(&key, gradOut ? &go : NULL, 0);
    key_array(&key, outputSize ? &mos : NULL);
    key_array(&key, inputSize ? &mis : NULL);
    cannsim_key_bytes(&key, &scalesD, sizeof scalesD);
    cannsim_key_bytes(&key, &scalesH, sizeof scalesH);
    cannsim_key_bytes(&key, &scalesW, sizeof scalesW);
    cannsim_key_tensor(&key, gradInput ? &gi : NULL, gradInput && gradInput == gradOut ? 0 : 1);
    /* IsRegBase(): Ascend950 skips CheckUplimit (cann-abi.md §5, §5.1 step 3.5) */
    const int regbase = strncmp(cannsim_soc_name(), "Ascend950", 9) == 0;
    cannsim_key_bytes(&key, &regbase, sizeof regbase);
    uint64_t cached_ws = 0;
    aclOpExecutor *hit = cannsim_cache_lookup(P1, OP, &key, &io, &cached_ws);
    if (hit) {
        /* (stricter than the device: the addresses must still lie in live device memory) */
        if ((rc = check_memory(P1, &go, &gi, NULL, 0, NULL))) {
            cannsim_executor_consume(hit); /* discarded; the message stays */
            return rc;
        }
        *workspaceSize = cached_ws;
        *executor = hit;
        return ACLNN_SUCCESS;
    }

    char msg[600];
    msg[0] = 0;
    rc = us3d_check(&mgo, &mos, &mis, scalesD, scalesH, scalesW, &mgi, regbase, msg, sizeof msg);
    if (rc) return cannsim_fail(rc, "%s: %s", P1, msg[0] ? msg : "invalid arguments");

    int64_t go_size[5], go_stride[5], gi_size[5], gi_stride[5];
    ncdhw(&go, go_size, go_stride);
    ncdhw(&gi, gi_size, gi_stride);
    op_data od;
    memset(&od, 0, sizeof od);
    od.dtype = go.dtype;

    if (go_size[0] == 0 || go_size[1] == 0) { /* empty gradOut (§5.1 step 4): nothing to launch */
        aclOpExecutor *e = cannsim_executor_create(P1, OP, &io, 0, 1, &od, sizeof od);
        if (!e) return ACLNN_ERR_INNER_CREATE_EXECUTOR;
        cannsim_cache_add(e, &key);
        *workspaceSize = 0;
        *executor = e;
        return ACLNN_SUCCESS;
    }

    /* l0op::Contiguous(gradOut) comes right after the empty-tensor return; ViewCopy into gradInput last */
    if ((rc = check_view_in_storage(P1, "gradOut", &go))) return rc;
    if ((rc = check_view_in_storage(P1, "gradInput", &gi))) return rc;
    if ((rc = check_memory(P1, &go, &gi, NULL, 0, NULL))) return rc;

    int64_t out3[3] = {go_size[2], go_size[3], go_size[4]};
    int64_t in3[3] = {gi_size[2], gi_size[3], gi_size[4]};
    us3d_resolve_scales(scalesD, scalesH, scalesW, out3, in3, od.scale);
    uint64_t ws = us3d_workspace_bytes(go_size, gi_size);
    if (ws == UINT64_MAX)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the workspace for these sizes does not fit in 64 bits", P1);

    aclOpExecutor *e = cannsim_executor_create(P1, OP, &io, ws, 0, &od, sizeof od);
    if (!e) return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    cannsim_cache_add(e, &key);
    *workspaceSize = ws;
    *executor = e;
    return ACLNN_SUCCESS;
}

static int kernel_task(void *arg, char *msg, size_t msglen) {
    us3d_args *a = arg;
    int rc = us3d_run(a);
    if (rc) {
        snprintf(msg, msglen, "%s kernel failed (us3d_run returned %d)", P2, rc);
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    return 0;
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dBackward(void *workspace, uint64_t workspaceSize,
                                                            aclOpExecutor *executor, aclrtStream stream) {
    int rc = cannsim_enter(P2);
    if (rc) {
        cannsim_executor_consume(executor); /* a failed phase 2 still consumes a single-use executor */
        return rc;
    }
    aclOpExecutor snap;
    if ((rc = cannsim_executor_begin(P2, OP, executor, &snap))) return rc;
    if (snap.empty) {
        cannsim_executor_finish(executor, 1);
        return ACLNN_SUCCESS;
    }
    if (snap.workspace_size > 0) {
        if (!workspace) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR,
                              "%s: workspace is NULL but phase 1 asked for %" PRIu64 " bytes", P2,
                              snap.workspace_size);
            goto fail;
        }
        if (workspaceSize < snap.workspace_size) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: workspaceSize %" PRIu64 " is smaller than the %" PRIu64
                              " bytes phase 1 asked for",
                              P2, workspaceSize, snap.workspace_size);
            goto fail;
        }
    }
    const aclTensor *go = &snap.in[0], *gi = &snap.out[0];
    cannsim_ref refs[3];
    if ((rc = check_memory(P2, go, gi, snap.workspace_size ? workspace : NULL, workspaceSize, refs))) goto fail;

    op_data od;
    memcpy(&od, snap.opdata, sizeof od);
    us3d_args *a = calloc(1, sizeof *a);
    if (!a) {
        rc = cannsim_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: out of host memory", P2);
        goto fail;
    }
    a->dtype = od.dtype;
    int isz = cannsim_dtype_size(od.dtype);
    ncdhw(go, a->go_size, a->go_stride);
    ncdhw(gi, a->gi_size, a->gi_stride);
    a->go_data = (const char *)go->data + (uint64_t)go->offset * (uint64_t)isz;
    a->gi_data = (char *)gi->data + (uint64_t)gi->offset * (uint64_t)isz;
    memcpy(a->scale, od.scale, sizeof a->scale);
    a->workspace = workspace;
    a->workspace_size = workspaceSize;
    rc = cannsim_launch(P2, stream, kernel_task, free, a, refs, 3);
    if (rc) {
        const char *m = cannsim_peek_error();
        char copy[700];
        snprintf(copy, sizeof copy, "%s", m ? m : "");
        free(a);
        rc = cannsim_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: launching the kernel failed with runtime error %d: %s", P2, rc,
                          copy);
        goto fail;
    }
    cannsim_executor_finish(executor, 1);
    return ACLNN_SUCCESS;
fail:
    cannsim_executor_finish(executor, 0);
    return rc;
}

/* ---------------------------------------------------------------- related operators: not simulated */
#define NOT_SUPPORTED(name) \
    cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: not implemented by the CANN simulator", name)

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3dGetWorkspaceSize(const aclTensor *self,
                                                                    const aclIntArray *outputSize, double scalesD,
                                                                    double scalesH, double scalesW, aclTensor *out,
                                                                    uint64_t *workspaceSize,
                                                                    aclOpExecutor **executor) {
    (void)self, (void)outputSize, (void)scalesD, (void)scalesH, (void)scalesW, (void)out, (void)workspaceSize,
        (void)executor;
    int rc = cannsim_enter("aclnnUpsampleNearestExact3dGetWorkspaceSize");
    if (rc) return rc;
    return NOT_SUPPORTED("aclnnUpsampleNearestExact3dGetWorkspaceSize");
}

CANNSIM_API aclnnStatus aclnnUpsampleNearestExact3d(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                    aclrtStream stream) {
    (void)workspace, (void)workspaceSize, (void)executor, (void)stream;
    int rc = cannsim_enter("aclnnUpsampleNearestExact3d");
    if (rc) return rc;
    return NOT_SUPPORTED("aclnnUpsampleNearestExact3d");
}

CANNSIM_API aclnnStatus aclnnUpsampleNearest3dBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD,
    double scalesH, double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor) {
    (void)gradOut, (void)outputSize, (void)inputSize, (void)scalesD, (void)scalesH, (void)scalesW, (void)gradInput,
        (void)workspaceSize, (void)executor;
    int rc = cannsim_enter("aclnnUpsampleNearest3dBackwardGetWorkspaceSize");
    if (rc) return rc;
    return NOT_SUPPORTED("aclnnUpsampleNearest3dBackwardGetWorkspaceSize");
}

CANNSIM_API aclnnStatus aclnnUpsampleNearest3dBackward(void *workspace, uint64_t workspaceSize,
                                                       aclOpExecutor *executor, aclrtStream stream) {
    (void)workspace, (void)workspaceSize, (void)executor, (void)stream;
    int rc = cannsim_enter("aclnnUpsampleNearest3dBackward");
    if (rc) return rc;
    return NOT_SUPPORTED("aclnnUpsampleNearest3dBackward");
}
