/*
 * ws_plan.c - the workspace size phase 1 reports, as CANN plans it (cann-abi.md §10.8).
 *
 * An aclnn executor's workspace holds every intermediate tensor of its kernels and each kernel's own
 * workspace (the size its tiling asks for).  nnopbase sorts them by the kernel that makes them (a kernel's
 * workspace first, then its outputs), gives each a lifetime [maker, last reader], and packs them into buckets:
 * a tensor joins the last bucket whose newest tensor's lifetime ends before it starts, else a new one.  A
 * bucket is as large as its largest tensor, each rounded up to 512 bytes after adding 32; the workspace is the
 * sum of the buckets (OPB composite_op/mem_mgr/memory_allocator.cpp MaxAllocator, Align;
 * common/utils/kernel_graph.cpp CalcLifeTimeAndSize; common/utils/kernel_tensor.cpp IsLifeTimeNotOverLap).
 * An output that ViewCopy points at the user's tensor is not in the workspace (OMATH contiguous.cpp ViewCopy).
 *
 * The operators describe their kernel chain as steps; ws_plan turns it into the size.  Kernels whose tiling
 * the public sources do not show (Cast, Transpose, the copies of Contiguous and ViewCopy) count their output
 * only, so the size is exact for a chain of the operator's own kernel alone and a lower bound otherwise.
 */
#include "opapi.h"

#include <stdint.h>

#define ALIGN 512u
#define EXTRA 32u
#define MAX_TENSORS (2 * OPAPI_MAX_STEPS)

typedef struct {
    uint64_t size; /* aligned */
    int start, end;
} ws_tensor;

static int aligned(uint64_t n, uint64_t *out) {
    if (n > UINT64_MAX - EXTRA - ALIGN) return 0;
    *out = (n + EXTRA + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    return 1;
}

/* IsLifeTimeNotOverLap: tensors of one kernel always overlap; else the earlier one must end before the other. */
static int apart(const ws_tensor *a, const ws_tensor *b) {
    if (a->start == b->start) return 0;
    return a->start < b->start ? a->end < b->start : b->end < a->start;
}

uint64_t opapi_ws_plan(const opapi_step *steps, int n) {
    ws_tensor t[MAX_TENSORS];
    int nt = 0;
    for (int i = 0; i < n && i < OPAPI_MAX_STEPS; i++) {
        if (steps[i].has_workspace) {
            if (!aligned(steps[i].workspace, &t[nt].size)) return UINT64_MAX;
            t[nt].start = t[nt].end = i;
            nt++;
        }
        if (!steps[i].to_user) { /* read by the next kernel (the last one's output is the user's) */
            if (!aligned(steps[i].output, &t[nt].size)) return UINT64_MAX;
            t[nt].start = i;
            t[nt].end = i + 1;
            nt++;
        }
    }
    uint64_t bucket_size[MAX_TENSORS];
    int bucket_last[MAX_TENSORS]; /* index in t of each bucket's newest tensor */
    int nb = 0;
    for (int k = 0; k < nt; k++) {
        int fit = -1;
        for (int b = 0; b < nb; b++)
            if (apart(&t[bucket_last[b]], &t[k])) fit = b; /* the last such bucket */
        if (fit < 0) {
            fit = nb++;
            bucket_size[fit] = 0;
        }
        bucket_last[fit] = k;
        if (t[k].size > bucket_size[fit]) bucket_size[fit] = t[k].size;
    }
    uint64_t total = 0;
    for (int b = 0; b < nb; b++)
        if (__builtin_add_overflow(total, bucket_size[b], &total)) return UINT64_MAX;
    return total;
}

/* Elements of a tensor's view times its element size (0 for an empty view); UINT64_MAX on overflow. */
static uint64_t view_bytes(const aclTensor *t, int elem_size) {
    uint64_t n = (uint64_t)elem_size;
    for (int64_t i = 0; i < t->ndim; i++)
        if (t->dims[i] < 0 || __builtin_mul_overflow(n, (uint64_t)t->dims[i], &n)) return UINT64_MAX;
    return n;
}

uint64_t opapi_upsample_workspace(const aclTensor *in, const aclTensor *out, uint64_t kernel_ws, int kernel_asks,
                                  int to_float) {
    const int esz = cannsim_dtype_size(in->dtype);
    const uint64_t in_b = view_bytes(in, esz), out_b = view_bytes(out, esz);
    const uint64_t in_f = view_bytes(in, 4), out_f = view_bytes(out, 4);
    if (in_b == UINT64_MAX || out_b == UINT64_MAX || in_f == UINT64_MAX || out_f == UINT64_MAX) return UINT64_MAX;
    const int ndhwc = in->format == ACL_FORMAT_NDHWC;
    opapi_step st[OPAPI_MAX_STEPS];
    int n = 0;
    if (!opapi_view_is_contiguous(in)) st[n++] = (opapi_step){0, 0, in_b, 0};      /* l0op::Contiguous */
    if (ndhwc) st[n++] = (opapi_step){0, 0, in_b, 0};                                /* Transpose to NCDHW */
    if (to_float) st[n++] = (opapi_step){0, 0, in_f, 0};                             /* Cast to float32 */
    st[n++] = (opapi_step){kernel_ws, kernel_asks, to_float ? out_f : out_b, 0};   /* the kernel */
    if (to_float) st[n++] = (opapi_step){0, 0, out_b, 0};                            /* Cast back */
    if (ndhwc) st[n++] = (opapi_step){0, 0, out_b, 0};                               /* Transpose back */
    if (opapi_view_is_contiguous(out)) st[n - 1].to_user = 1;                        /* ViewCopy repoints it */
    else st[n++] = (opapi_step){0, 0, out_b, 1};                                     /* ViewCopy copies */
    return opapi_ws_plan(st, n);
}
