/*
 * foreach.c - the shared part of the simulated foreach operators (foreach.h).  Sources: hicann/ops-nn e5c3fa932
 * foreach/foreach_add_list/op_host/op_api/aclnn_foreach_add_list_v2.cpp and
 * foreach/foreach_mul_scalar/op_host/op_api/aclnn_foreach_mul_scalar_v2.cpp (empty lists: an executor with nothing
 * to launch, workspace 0; each input made contiguous, empty tensors used as they are; the kernels need no
 * workspace: op_kernel/foreach_add_list.cpp); OPB src/nnopbase/common/utils/format_utils.cpp (private formats).
 * The executor holds the lists (the caller's handles, as a CANN executor does), which must stay alive until phase 2:
 * a list or tensor destroyed before is CANNSIM_ERR_STALE_HANDLE, as for the other operators (cann-abi.md §8.5).
 * The simulator's op cache is not used for these operators (its executors hold at most 4 tensors): every phase 1
 * makes a new executor.
 */
#define _GNU_SOURCE
#include "foreach.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void foreach_lists_free(foreach_lists *l) {
    for (int k = 0; k < FOREACH_MAX_LISTS; k++) {
        free(l->t[k]);
        l->t[k] = NULL;
    }
}

/* Lock held.  List `name` into *dst (*n descriptors).  In phase 2 (serial != 0) the list and its tensors must be the
   ones phase 1 saw, else CANNSIM_ERR_STALE_HANDLE; in phase 1 a dead handle is 161002. */
static int read_locked(const char *func, const char *name, const aclTensorList *list, uint64_t serial,
                       aclTensor **dst, uint64_t *n, uint64_t *serial_out) {
    if (!cannsim_handle_live("tensor_list", list) || (serial && list->serial != serial)) {
        if (serial)
            return cannsim_fail(CANNSIM_ERR_STALE_HANDLE,
                                "%s: %s (aclTensorList %p) was destroyed after phase 1 and before the executor ran: "
                                "the executor refers to the caller's list, which must stay alive until the executor "
                                "is consumed or destroyed (a use after free on the device; simulator-only code)",
                                func, name, (const void *)list);
        return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s %p is not a live aclTensorList (destroyed, or not "
                            "created by aclCreateTensorList)", func, name, (const void *)list);
    }
    *n = list->size;
    *serial_out = list->serial;
    *dst = calloc(list->size ? (size_t)list->size : 1, sizeof **dst);
    if (!*dst) return cannsim_fail(ACLNN_ERR_INNER_NULLPTR, "%s: out of host memory reading %s", func, name);
    for (uint64_t i = 0; i < list->size; i++) {
        const aclTensor *t = list->tensors[i];
        if (!t)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s[%" PRIu64 "] is NULL (every entry of the list must "
                                "be a tensor)", func, name, i);
        if (!cannsim_handle_live("tensor", t) || t->serial != list->serials[i])
            return cannsim_fail(serial ? CANNSIM_ERR_STALE_HANDLE : ACLNN_ERR_PARAM_INVALID,
                                "%s: %s[%" PRIu64 "] (aclTensor %p) was destroyed%s, but the list still holds it (the "
                                "list owns its tensors: destroy the list, not them%s)", func, name, i,
                                (const void *)t, serial ? " after phase 1" : "",
                                serial ? "; simulator-only code" : "");
        (*dst)[i] = *t;
    }
    return 0;
}

static int read_all(const char *func, const foreach_list_arg *args, int nlists, const uint64_t *serials,
                    foreach_lists *out) {
    memset(out, 0, sizeof *out);
    out->nlists = nlists;
    int rc = 0;
    cannsim_lock();
    for (int k = 0; k < nlists && !rc; k++)
        rc = read_locked(func, args[k].name, args[k].list, serials ? serials[k] : 0, &out->t[k], &out->n[k],
                         &out->serial[k]);
    cannsim_unlock();
    if (rc) foreach_lists_free(out);
    return rc;
}

int foreach_read_lists(const char *func, const foreach_list_arg *args, int nlists, foreach_lists *out) {
    return read_all(func, args, nlists, NULL, out);
}

static int64_t numel_of(const aclTensor *t) {
    int64_t n = 1;
    for (int64_t i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(n, t->dims[i], &n)) return INT64_MAX;
    return n;
}

/* The bytes [*lo, *hi) a non-empty view touches (its extent was checked by opapi_check_memory). */
static void view_range(const aclTensor *t, uintptr_t *lo, uintptr_t *hi) {
    int64_t mn = t->offset, mx = t->offset, isz = cannsim_dtype_size(t->dtype);
    for (int64_t i = 0; i < t->ndim; i++) {
        int64_t span = (t->dims[i] - 1) * t->strides[i];
        if (span > 0) mx += span;
        else mn += span;
    }
    *lo = (uintptr_t)t->data + (uintptr_t)(mn * isz);
    *hi = (uintptr_t)t->data + (uintptr_t)((mx + 1) * isz);
}

static int same_view(const aclTensor *a, const aclTensor *b) {
    if (a->data != b->data || a->offset != b->offset || a->dtype != b->dtype || !foreach_same_shape(a, b)) return 0;
    for (int64_t i = 0; i < a->ndim; i++)
        if (a->dims[i] > 1 && a->strides[i] != b->strides[i]) return 0;
    return 1;
}

int foreach_check_memory(const char *func, const foreach_list_arg *args, const foreach_lists *l) {
    const int nin = l->nlists - 1;
    char name[96], other[96];
    int rc;
    for (int k = 0; k < l->nlists; k++)
        for (uint64_t i = 0; i < l->n[k]; i++) {
            const aclTensor *t = &l->t[k][i];
            if (numel_of(t) == 0) continue; /* an empty tensor is used as it is */
            snprintf(name, sizeof name, "%s[%" PRIu64 "]", args[k].name, i);
            if ((rc = opapi_check_view_in_storage(func, name, t))) return rc;
            const opapi_tensor one = {name, t};
            rc = k < nin ? opapi_check_memory(func, &one, 1, NULL, 0, NULL, 0, NULL)
                         : opapi_check_memory(func, NULL, 0, &one, 1, NULL, 0, NULL); /* (an output's own elements) */
            if (rc) return rc;
        }
    /* an output against every input and every earlier output: only out[i] exactly x[i] (in place) may share memory */
    for (uint64_t j = 0; j < l->n[nin]; j++) {
        const aclTensor *o = &l->t[nin][j];
        if (numel_of(o) == 0) continue;
        uintptr_t olo, ohi;
        view_range(o, &olo, &ohi);
        for (int k = 0; k <= nin; k++)
            for (uint64_t i = 0; i < (k == nin ? j : l->n[k]); i++) {
                const aclTensor *t = &l->t[k][i];
                if (numel_of(t) == 0) continue;
                uintptr_t lo, hi;
                view_range(t, &lo, &hi);
                if (!(lo < ohi && olo < hi)) continue;
                if (k < nin && i == j && same_view(t, o)) continue;
                snprintf(name, sizeof name, "%s[%" PRIu64 "]", args[nin].name, j);
                snprintf(other, sizeof other, "%s[%" PRIu64 "]", args[k].name, i);
                return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the memory of %s and %s overlaps (an output may "
                                    "only be exactly the input of its own index, in place; simulator rule: the "
                                    "kernel's reads and writes would race)", func, other, name);
            }
    }
    return 0;
}

static int phase1_done(const char *func, const char *op, const foreach_list_arg *args, const foreach_lists *l,
                       const foreach_op *fop, uint64_t *workspaceSize, aclOpExecutor **executor) {
    foreach_data fd;
    memset(&fd, 0, sizeof fd);
    fd.nlists = l->nlists;
    for (int k = 0; k < l->nlists; k++) {
        fd.list[k] = args[k].list;
        fd.name[k] = args[k].name;
        fd.serial[k] = l->serial[k];
    }
    fd.op = *fop;
    const cannsim_exec_io io = {NULL, 0, NULL, 0, NULL, 0, ""};
    /* phase 1 asks the op cache first (it numbers the thread's phase 1 calls); these calls are never cached */
    cannsim_key key;
    cannsim_key_init(&key, func);
    key.overflow = 1;
    uint64_t ws = 0;
    (void)cannsim_cache_lookup(func, op, &key, &io, &ws);
    aclOpExecutor *e = cannsim_executor_create(func, op, &io, 0, l->n[0] == 0, &fd, sizeof fd);
    if (!e) return ACLNN_ERR_INNER_CREATE_EXECUTOR;
    *workspaceSize = 0;
    *executor = e;
    return ACLNN_SUCCESS;
}

int foreach_phase1(const char *func, const char *op, const opapi_handle *nulls, int nnulls,
                   const foreach_list_arg *args, int nlists, const aclScalar *scalar, foreach_check_fn checks,
                   uint64_t *workspaceSize, aclOpExecutor **executor) {
    int rc = opapi_phase1_enter(func, workspaceSize, executor);
    if (rc) return rc;
    for (int i = 0; i < nnulls; i++)
        if (!nulls[i].handle) return cannsim_fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is NULL", func, nulls[i].name);
    int sdt = 0;
    unsigned char sbytes[8] = {0};
    if ((rc = cannsim_scalar_read(func, scalar, &sdt, sbytes))) return rc;
    foreach_lists l;
    if ((rc = foreach_read_lists(func, args, nlists, &l))) return rc;
    foreach_op fop = {0, ACL_FLOAT, ew_dtype_ok(sdt) ? ew_load(sdt, sbytes) : 0.0};
    if (!(rc = checks(func, &l, sdt, &fop)) && !(rc = foreach_check_memory(func, args, &l)))
        rc = phase1_done(func, op, args, &l, &fop, workspaceSize, executor);
    foreach_lists_free(&l);
    return rc;
}

typedef struct {
    foreach_op op;
    foreach_value_fn value;
    int nin;
    ew_view in[FOREACH_MAX_LISTS - 1];
    ew_view out;
} foreach_task;

static int task_run(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    const foreach_task *a = arg;
    int64_t n = ew_numel(&a->out);
    for (int64_t e = 0; e < n; e++)
        ew_store(a->out.dtype, a->out.data + ew_offset(&a->out, e), a->value(&a->op, a->in, a->nin, e));
    return 0;
}

aclnnStatus foreach_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                           aclOpExecutor *executor, aclrtStream stream, foreach_value_fn value) {
    int rc;
    aclOpExecutor snap;
    if (opapi_phase2_begin(func, op, workspace, workspaceSize, executor, &snap, &rc)) return rc;
    foreach_data fd;
    memcpy(&fd, snap.opdata, sizeof fd);
    foreach_list_arg args[FOREACH_MAX_LISTS];
    for (int k = 0; k < fd.nlists; k++) args[k] = (foreach_list_arg){fd.name[k], fd.list[k]};
    foreach_lists l;
    if ((rc = read_all(func, args, fd.nlists, fd.serial, &l))) goto fail;
    if ((rc = foreach_check_memory(func, args, &l))) goto done;
    const int nin = fd.nlists - 1;
    for (uint64_t i = 0; i < l.n[nin]; i++) {
        const aclTensor *o = &l.t[nin][i];
        if (numel_of(o) == 0) continue;
        foreach_task *a = calloc(1, sizeof *a);
        if (!a) {
            rc = cannsim_fail(ACLNN_ERR_RUNTIME_ERROR, "%s: out of host memory", func);
            goto done;
        }
        a->op = fd.op;
        a->value = value;
        a->nin = nin;
        cannsim_ref refs[FOREACH_MAX_LISTS];
        uintptr_t lo, hi;
        for (int k = 0; k < nin; k++) {
            ew_view_as(&a->in[k], &l.t[k][i], &l.t[k][i]);
            view_range(&l.t[k][i], &lo, &hi);
            refs[k] = (cannsim_ref){(const void *)lo, hi - lo, 0};
        }
        ew_view_as(&a->out, o, o);
        view_range(o, &lo, &hi);
        refs[nin] = (cannsim_ref){(const void *)lo, hi - lo, 1};
        if ((rc = cannsim_launch(func, stream, task_run, free, a, refs, nin + 1))) {
            free(a);
            rc = opapi_launch_failure(func, rc);
            goto done;
        }
    }
done:
    foreach_lists_free(&l);
    if (!rc) {
        cannsim_executor_finish(executor, 1);
        return ACLNN_SUCCESS;
    }
fail:
    cannsim_executor_finish(executor, 0);
    return rc;
}

int foreach_private_format(int format) {
    switch (format) {
    case 3: case 4: case 12: case 29: case 32: case 33: case 50: case 51: case 52: case 53: case 54: return 1;
    default: return 0;
    }
}

int foreach_soc_supported(void) {
    return opapi_soc_is("ascend910b") || opapi_soc_is("ascend910_93") || opapi_soc_is("ascend950");
}

int foreach_same_shape(const aclTensor *a, const aclTensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int64_t i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

int foreach_dtype_in(int dtype, const int *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] == dtype) return 1;
    return 0;
}

/* "float32, float16, ..." of a dtype list */
static const char *dtype_list_text(const int *list, int n, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", list[i] == ACL_DOUBLE ? "double"
                               : ew_dtype_name(list[i]));
    return buf;
}

int foreach_check_dtype_in(const char *func, const char *name, int dtype, const int *list, int n,
                           const char *why) {
    if (foreach_dtype_in(dtype, list, n)) return 0;
    char buf[200];
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %s (%d), not one of %s%s", func, name,
                        ew_dtype_name(dtype), dtype, dtype_list_text(list, n, buf, sizeof buf), why ? why : "");
}

int foreach_check_list_dtype(const char *func, const char *name, const aclTensor *t, uint64_t n, int dtype,
                             const char *ref) {
    for (uint64_t i = 0; i < n; i++)
        if (t[i].dtype != dtype)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s[%" PRIu64 "] has dtype %s (%d), but every tensor of "
                                "the lists must have %s's dtype %s", func, name, i, ew_dtype_name(t[i].dtype),
                                t[i].dtype, ref, ew_dtype_name(dtype));
    return 0;
}

static void dims_text(const aclTensor *t, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int64_t i = 0; i < t->ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, i ? ", " : "", t->dims[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

int foreach_check_list_shapes(const char *func, const char *a_name, const aclTensor *a, const char *b_name,
                              const aclTensor *b, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (!foreach_same_shape(&a[i], &b[i])) {
            char sa[300], sb[300];
            dims_text(&a[i], sa, sizeof sa);
            dims_text(&b[i], sb, sizeof sb);
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s[%" PRIu64 "] has shape %s, not %s[%" PRIu64 "]'s %s "
                                "(the tensors of one index must have the same shape)", func, b_name, i, sb, a_name, i,
                                sa);
        }
    return 0;
}

int foreach_check_list_limits(const char *func, const char *name, const aclTensor *t, uint64_t n, int dims) {
    for (uint64_t i = 0; i < n; i++) {
        if (dims && t[i].ndim > 8)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s[%" PRIu64 "] has %" PRId64 " dims, more than 8",
                                func, name, i, t[i].ndim);
        if (foreach_private_format(t[i].format))
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s[%" PRIu64 "] has the private format %d (only ND, "
                                "NCHW, NHWC, HWCN, NDHWC, NCDHW)", func, name, i, t[i].format);
    }
    return 0;
}

int foreach_check_sizes(const char *func, const char *a_name, uint64_t a, const char *b_name, uint64_t b) {
    if (a == b) return 0;
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: the tensor lists must have the same number of tensors: %s has "
                        "%" PRIu64 ", %s %" PRIu64, func, a_name, a, b_name, b);
}

int foreach_check_soc(const char *func) {
    if (foreach_soc_supported()) return 0;
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: support for SoC %s is not implemented (the foreach operators "
                        "have their dtype lists on Atlas A2/A3 and Ascend950 only)", func, cannsim_soc_name());
}
