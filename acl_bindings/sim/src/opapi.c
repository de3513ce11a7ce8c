/*
 * opapi.c - glue shared by the simulated operators of the operator library (libopapi_cv.so, or
 * libopapi.so in the variant tree): the tensor checks nnopbase makes (Validate, contiguity), the
 * simulator's stricter memory checks (data in live device memory, aligned, no overlaps), the
 * op-cache answer and executor hand-over of phase 1, and phase 2 (executor, workspace, memory,
 * kernel launch on the stream).  It names no operator: those are the files in ops/.
 */
#define _GNU_SOURCE
#include "opapi.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_ALIGN 32 /* aclCreateTensor docs: device address 32-byte aligned (§1.3) */

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
    /* in integers: data + start as a pointer is undefined when it leaves the object, and a sum that
       wraps the address space would land on another buffer */
    uintptr_t base = (uintptr_t)t->data, first, end;
    if (__builtin_add_overflow(base, (uintptr_t)start, &first) || __builtin_add_overflow(first, (uintptr_t)b, &end)) {
        snprintf(why, n, "its offset %" PRId64 " reaches past the end of the address space", t->offset);
        return 1;
    }
    *lo = (const char *)first;
    *bytes = b;
    return 0;
}

/* (OPB src/nnopbase/composite_op/utils/tensor_view_utils.cpp) */
int opapi_view_is_contiguous(const aclTensor *t) {
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

/* nnopbase's Validate (same file), which l0op::Contiguous of an input and the ViewCopy back to a non-contiguous
   output depend on: in elements, max = offset + sum(max(0, stride*(dim-1))) and min = offset +
   sum(min(0, stride*(dim-1))) need max + 1 <= product(storageDims) and min >= 0 (cann-abi.md §8.1).  A failure
   there makes phase 1 return ACLNN_ERR_INNER_NULLPTR (an operator's CHECK_RET after Contiguous / ViewCopy, e.g.
   OCV aclnn_upsample_nearest_exact3d_backward.cpp).  Returns 0, or 561103 with a message naming the tensor. */
int opapi_check_broadcast(const char *func, const char *name, const aclTensor *t, const char *to_name,
                          const aclTensor *to) {
    if (t->ndim > to->ndim)
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has %" PRId64 " dims, more than %s's %" PRId64
                            ": it cannot broadcast to %s", func, name, t->ndim, to_name, to->ndim, to_name);
    for (int64_t i = 0; i < t->ndim; i++) {
        int64_t td = t->dims[t->ndim - 1 - i], od = to->dims[to->ndim - 1 - i];
        if (td != od && td != 1)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s dim %" PRId64 " (size %" PRId64 ") does not "
                                "broadcast to %s's size %" PRId64, func, name, t->ndim - 1 - i, td, to_name, od);
    }
    return 0;
}

int opapi_check_view_in_storage(const char *func, const char *name, const aclTensor *t) {
    if (opapi_view_is_contiguous(t)) return 0;
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

static const char *format_name(int f, char *buf, size_t n) {
    switch (f) {
    case ACL_FORMAT_NCDHW: return "NCDHW";
    case ACL_FORMAT_NDHWC: return "NDHWC";
    case ACL_FORMAT_ND: return "ND";
    default: snprintf(buf, n, "format %d", f); return buf;
    }
}

int opapi_check_view_copy_format(const char *func, const char *in_name, const aclTensor *in, const char *out_name,
                                 const aclTensor *out) {
    if (in->format == out->format || in->format == ACL_FORMAT_ND) return 0;
    char a[24], b[24];
    return cannsim_fail(ACLNN_ERR_INNER_NULLPTR,
                        "%s: %s is %s but %s is %s: the result keeps %s's layout, and the copy into %s (ViewCopy) "
                        "needs the same layout (mixed layouts are refused; use one layout for both)",
                        func, in_name, format_name(in->format, a, sizeof a), out_name,
                        format_name(out->format, b, sizeof b), in_name, out_name);
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


/* Validate the tensors' memory (and the workspace, if given) under the lock. */
int opapi_check_memory(const char *func, const opapi_tensor *ins, int nin, const opapi_tensor *outs, int nout,
                       const void *ws, uint64_t wsn, cannsim_ref *refs) {
    enum { MAX_T = CANNSIM_EXEC_MAX_IO * 2 };
    const opapi_tensor *all[MAX_T];
    const char *lo[MAX_T];
    uint64_t bytes[MAX_T];
    int n = 0;
    for (int i = 0; i < nin && n < MAX_T; i++) all[n++] = &ins[i];
    for (int i = 0; i < nout && n < MAX_T; i++) all[n++] = &outs[i];
    char why[400];
    int rc = 0;
    cannsim_lock();
    for (int i = 0; i < n; i++)
        if ((rc = check_tensor_memory(func, all[i]->name, all[i]->t, &lo[i], &bytes[i]))) goto out;
    for (int i = 0; i < nout; i++)
        if (elements_overlap(outs[i].t, why, sizeof why)) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s: %s; the kernel's writes would race (the "
                              "simulator refuses what hardware would compute silently wrong)", func, outs[i].name, why);
            goto out;
        }
    for (int j = nin; j < n; j++) /* an output against every tensor before it */
        for (int i = 0; i < j; i++)
            if (overlap(lo[i], bytes[i], lo[j], bytes[j])) {
                rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the memory of %s and %s overlaps", func,
                                  all[i]->name, all[j]->name);
                goto out;
            }
    if (ws) {
        if (!cannsim_device_range(ws, wsn, NULL, why, sizeof why)) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: workspace is not inside live device memory: %s", func, why);
            goto out;
        }
        int hit = 0;
        for (int i = 0; i < n; i++) hit |= overlap(ws, wsn, lo[i], bytes[i]);
        if (hit) {
            char names[200] = "";
            size_t len = 0;
            for (int i = 0; i < n && len < sizeof names; i++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? " or " : "", all[i]->name);
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the workspace overlaps %s", func, names);
            goto out;
        }
    }
    if (refs) {
        for (int i = 0; i < n; i++) refs[i] = (cannsim_ref){lo[i], bytes[i], i >= nin}; /* inputs are read */
        refs[n] = (cannsim_ref){ws, ws ? wsn : 0, 1};
    }
out:
    cannsim_unlock();
    return rc;
}

void opapi_ncdhw(const aclTensor *t, int channels_last, int64_t size[5], int64_t stride[5]) {
    static const int perm_ndhwc[5] = {0, 4, 1, 2, 3};
    for (int i = 0; i < 5; i++) {
        int j = channels_last ? perm_ndhwc[i] : i;
        size[i] = t->dims[j];
        stride[i] = t->strides[j];
    }
}

int opapi_check_live_locked(const char *func, const opapi_handle *h, int n) {
    for (int i = 0; i < n; i++) {
        if (!h[i].handle || cannsim_handle_live(h[i].is_array ? "int_array" : "tensor", h[i].handle)) continue;
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s %p is not a live %s (destroyed, or not created by %s)",
                            func, h[i].name, h[i].handle, h[i].is_array ? "aclIntArray" : "aclTensor",
                            h[i].is_array ? "aclCreateIntArray" : "aclCreateTensor");
    }
    return 0;
}

void opapi_key_array(cannsim_key *k, const int64_t *vals, int64_t len, int64_t copied) {
    const char sep = ',';
    if (vals) {
        uint64_t n = len < copied ? (uint64_t)len : (uint64_t)copied;
        cannsim_key_bytes(k, vals, n * sizeof(int64_t));
        cannsim_key_bytes(k, &len, sizeof len);
    }
    cannsim_key_bytes(k, &sep, 1);
}

/* 361001 for a runtime call inside an operator that failed with *rc*, quoting the runtime's message. */
static int runtime_failure(const char *func, const char *what, int rc) {
    const char *m = cannsim_peek_error();
    char copy[700];
    snprintf(copy, sizeof copy, "%s", m ? m : "");
    return cannsim_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: %sruntime error %d: %s", func, what, rc, copy);
}

int opapi_phase1_enter(const char *func, const uint64_t *workspaceSize, aclOpExecutor *const *executor) {
    int rc = cannsim_enter(func);
    if (rc) return rc;
    if (!workspaceSize) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: workspaceSize is NULL", func);
    if (!executor) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is NULL", func);
    /* a thread makes aclnn calls after aclrtSetDevice or aclrtSetCurrentContext (cann-abi.md §1.1); where phase
       1 would fail without one is not known, so the simulator refuses it here, as phase 2's launch does */
    if ((rc = cannsim_require_context(func))) return runtime_failure(func, "", rc);
    return 0;
}

int opapi_phase1_cached(const char *func, const char *op, const cannsim_key *key, const cannsim_exec_io *io,
                        const opapi_tensor *ins, int nin, const opapi_tensor *outs, int nout,
                        uint64_t *workspaceSize, aclOpExecutor **executor, int *rc) {
    uint64_t cached_ws = 0;
    aclOpExecutor *hit = cannsim_cache_lookup(func, op, key, io, &cached_ws);
    if (!hit) return 0;
    if ((*rc = opapi_check_memory(func, ins, nin, outs, nout, NULL, 0, NULL))) {
        cannsim_executor_consume(hit); /* discarded; the message stays */
        return 1;
    }
    *workspaceSize = cached_ws;
    *executor = hit;
    return 1;
}

int opapi_phase1_done(const char *func, const char *op, const cannsim_exec_io *io, const cannsim_key *key,
                      uint64_t ws, int empty, const void *opdata, size_t opdata_size, uint64_t *workspaceSize,
                      aclOpExecutor **executor) {
    aclOpExecutor *e = cannsim_executor_create(func, op, io, ws, empty, opdata, opdata_size);
    if (!e) return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    cannsim_cache_add(e, key);
    *workspaceSize = ws;
    *executor = e;
    return ACLNN_SUCCESS;
}

/* The i-th comma-separated name of an executor's names (its inputs, then outputs, then arrays). */
static void nth_name(const char *names, int i, char *out, size_t n) {
    const char *p = names;
    for (; i > 0 && p; i--) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t len = p ? strcspn(p, ",") : 0;
    if (len >= n) len = n - 1;
    memcpy(out, p ? p : "", len);
    out[len] = 0;
}

int opapi_no_kernel_for_soc(char *msg, size_t msglen) {
    static const char *const legacy[] = {"Ascend910", "Ascend910A", "Ascend910B", "Ascend910ProA", "Ascend910ProB",
                                         "Ascend910PremiumA"};
    const char *soc = cannsim_soc_name();
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++)
        if (strcmp(soc, legacy[i]) == 0) {
            if (msg)
                snprintf(msg, msglen, "the operator has no kernel binary for SoC %s (a legacy Ascend910: its kernel "
                         "directory ascend910/ has none; Atlas A2 is Ascend910B1-B4, B4-1, B2C)", soc);
            return 1;
        }
    return 0;
}

aclnnStatus opapi_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                         aclOpExecutor *executor, aclrtStream stream, const opapi_kernel *kernel) {
    int rc = cannsim_enter(func);
    if (rc) {
        cannsim_executor_consume(executor); /* a failed phase 2 still consumes a single-use executor */
        return rc;
    }
    aclOpExecutor snap;
    if ((rc = cannsim_executor_begin(func, op, executor, &snap))) return rc;
    if (workspaceSize > 0 && !workspace) { /* OPB op_executor.cpp CommonOpExecutorRun: the size argument, first */
        rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR,
                          "%s: workspace is NULL but workspaceSize is %" PRIu64 " (the executor is deleted, even a "
                          "repeatable one)", func, workspaceSize);
        cannsim_executor_delete(executor);
        return rc;
    }
    if (snap.empty) {
        cannsim_executor_finish(executor, 1);
        return ACLNN_SUCCESS;
    }
    if (snap.workspace_size > 0) {
        /* simulator rules, stricter than CANN (which never compares with phase 1, and launches a kernel that
           faults or, on an Ascend950, silently does nothing): the size phase 1 asked for */
        if (!workspace) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_NULLPTR,
                              "%s: workspace is NULL but phase 1 asked for %" PRIu64 " bytes", func,
                              snap.workspace_size);
            goto fail;
        }
        if (workspaceSize < snap.workspace_size) {
            rc = cannsim_fail(ACLNN_ERR_PARAM_INVALID,
                              "%s: workspaceSize %" PRIu64 " is smaller than the %" PRIu64
                              " bytes phase 1 asked for",
                              func, workspaceSize, snap.workspace_size);
            goto fail;
        }
    }
    if (kernel->refuse) { /* the launch tiles the kernel again: what its tiling refuses fails here */
        char why[400];
        why[0] = 0;
        if ((rc = kernel->refuse(&snap, why, sizeof why))) {
            rc = cannsim_fail(rc, "%s: %s", func, why[0] ? why : "the kernel's tiling failed");
            goto fail;
        }
    }
    char names[2 * CANNSIM_EXEC_MAX_IO][64];
    opapi_tensor ins[CANNSIM_EXEC_MAX_IO], outs[CANNSIM_EXEC_MAX_IO];
    for (int i = 0; i < snap.nin; i++) {
        nth_name(snap.names, i, names[i], sizeof names[i]);
        ins[i] = (opapi_tensor){names[i], &snap.in[i]};
    }
    for (int i = 0; i < snap.nout; i++) {
        nth_name(snap.names, snap.nin + i, names[snap.nin + i], sizeof names[0]);
        outs[i] = (opapi_tensor){names[snap.nin + i], &snap.out[i]};
    }
    cannsim_ref refs[2 * CANNSIM_EXEC_MAX_IO + 1];
    if ((rc = opapi_check_memory(func, ins, snap.nin, outs, snap.nout, snap.workspace_size ? workspace : NULL,
                                 workspaceSize, refs)))
        goto fail;
    void *arg = kernel->make(&snap, workspace, workspaceSize);
    if (!arg) {
        rc = cannsim_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: out of host memory", func);
        goto fail;
    }
    rc = cannsim_launch(func, stream, kernel->run, kernel->destroy, arg, refs, snap.nin + snap.nout + 1);
    if (rc) {
        kernel->destroy(arg); /* (frees the argument only: the runtime's message stays pending) */
        rc = runtime_failure(func, "launching the kernel failed with ", rc);
        goto fail;
    }
    cannsim_executor_finish(executor, 1);
    return ACLNN_SUCCESS;
fail:
    cannsim_executor_finish(executor, 0);
    return rc;
}
