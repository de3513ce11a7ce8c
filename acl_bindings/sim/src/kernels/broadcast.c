/*
 * broadcast.c - shapes broadcast together, and views with a broadcast shape (broadcast.h).
 */
#define _GNU_SOURCE
#include "kernels/broadcast.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void bc_of(bc_shape *sh, const aclTensor *t) {
    sh->ndim = t->ndim;
    memcpy(sh->dims, t->dims, sizeof sh->dims);
}

int bc_infer(const char *func, const char *a_name, const bc_shape *a, const char *b_name, const bc_shape *b,
             bc_shape *r) {
    int64_t n = a->ndim > b->ndim ? a->ndim : b->ndim;
    r->ndim = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t ai = i - (n - a->ndim), bi = i - (n - b->ndim);
        int64_t ad = ai < 0 ? 1 : a->dims[ai], bd = bi < 0 ? 1 : b->dims[bi];
        if (ad != bd && ad != 1 && bd != 1)
            return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s and %s do not broadcast: at dim %" PRId64 " from the "
                                "right, %s has size %" PRId64 " and %s %" PRId64, func, a_name, b_name, n - i,
                                a_name, ad, b_name, bd);
        r->dims[i] = ad == 1 ? bd : ad;
    }
    return 0;
}

int bc_same(const bc_shape *a, const bc_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int64_t i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static void text(char *buf, size_t len, const int64_t *dims, int64_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int64_t d = 0; d < n && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? "," : "", dims[d]);
}

int bc_check_out(const char *func, const char *out_name, const aclTensor *out, const bc_shape *want,
                 const char *what) {
    bc_shape o;
    bc_of(&o, out);
    if (bc_same(&o, want)) return 0;
    char w[200], g[200];
    text(w, sizeof w, want->dims, want->ndim);
    text(g, sizeof g, o.dims, o.ndim);
    return cannsim_fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has shape [%s], not the %s shape [%s]", func,
                        out_name, g, what, w);
}

void bc_view(ew_view *v, const aclTensor *t, const bc_shape *sh) {
    aclTensor to;
    memset(&to, 0, sizeof to);
    to.ndim = sh->ndim;
    memcpy(to.dims, sh->dims, sizeof to.dims);
    ew_view_as(v, t, &to);
}

int64_t bc_numel(const bc_shape *sh) {
    int64_t n = 1;
    for (int64_t i = 0; i < sh->ndim; i++) n *= sh->dims[i];
    return n;
}
