/*
 * foreach.h - what the simulated foreach operators share (ops/foreach_add_list.c, ops/foreach_mul_scalar.c): the
 * reading of their aclTensorLists in phase 1 and again in phase 2, the memory rules of a list operator (in place
 * allowed: out[i] may be exactly x[i]), the executor's private data, and phase 2 (one stream task per tensor of the
 * lists).  The common executor of opapi.h holds at most 4 tensors; a foreach executor holds its lists instead.
 */
#ifndef CANNSIM_FOREACH_H
#define CANNSIM_FOREACH_H

#include "../opapi.h"
#include "../scalar.h"
#include "../tensor_list.h"
#include "elementwise.h"

#define FOREACH_MAX_LISTS 3 /* inputs, then the one output list */

/* A list argument by its parameter name. */
typedef struct {
    const char *name;
    const aclTensorList *list;
} foreach_list_arg;

/* The lists' tensors as phase 1 (or phase 2) read them: t[k] holds the n[k] descriptors of list k. */
typedef struct {
    int nlists;
    uint64_t n[FOREACH_MAX_LISTS];
    aclTensor *t[FOREACH_MAX_LISTS];
    uint64_t serial[FOREACH_MAX_LISTS]; /* each list's serial, read with it */
} foreach_lists;

/* What an operator computes per element: out = x0 * mul + x1 * mul1 ... (op-defined), in dtype calc. */
typedef struct {
    int kind;   /* the operator's own code */
    int calc;   /* the kernel's compute dtype */
    double scalar; /* the scalar as the kernel holds it (ConvertToTensor's dtype) */
} foreach_op;

/* The executor's private data (CANNSIM_EXEC_OPDATA bytes at most). */
typedef struct {
    int nlists;
    const aclTensorList *list[FOREACH_MAX_LISTS];
    const char *name[FOREACH_MAX_LISTS]; /* the parameter names (string literals of the operator's file) */
    uint64_t serial[FOREACH_MAX_LISTS];
    foreach_op op;
} foreach_data;

/* The element function of an operator: the value of out[i] at element e, from the inputs' views. */
typedef double (*foreach_value_fn)(const foreach_op *op, const ew_view *in, int nin, int64_t e);

/* Phase 1's reading: every list live, every entry a live aclTensor (a NULL entry is 161002: CANN's MulScalarV2
   refuses it, AddListV2 would dereference it), copied under the lock into *out (free with foreach_lists_free).
   Returns 0 or 161002 with the message. */
int foreach_read_lists(const char *func, const foreach_list_arg *args, int nlists, foreach_lists *out);
void foreach_lists_free(foreach_lists *l);

/* The checks every foreach operator makes after its own (dtypes, shapes): per tensor, nnopbase's Validate of a
   non-contiguous view (561103), then the memory rules: every tensor of a non-empty view in live device memory,
   32-byte aligned; an output's elements do not overlap; an output overlaps no other tensor of the call except
   the same-index input it is exactly (in place).  161002 with a message. */
int foreach_check_memory(const char *func, const foreach_list_arg *args, const foreach_lists *l);

/* An operator's own checks (dtypes, shapes), in CANN's order, given the lists and the scalar's dtype; they set
   fop->calc and round fop->scalar (read from the aclScalar) as the kernel holds it.  0 or the code. */
typedef int (*foreach_check_fn)(const char *func, const foreach_lists *l, int scalar_dtype, foreach_op *fop);

/* Phase 1 of a foreach operator: the NULL checks in the operator's argument order (nulls: each argument's name and
   handle, 161001), the scalar and the lists read (161002 when not live), the operator's checks, the memory rules,
   then the executor with the lists (no workspace; empty when the lists are). */
int foreach_phase1(const char *func, const char *op, const opapi_handle *nulls, int nnulls,
                   const foreach_list_arg *args, int nlists, const aclScalar *scalar, foreach_check_fn checks,
                   uint64_t *workspaceSize, aclOpExecutor **executor);

/* Phase 2 of a foreach operator. */
aclnnStatus foreach_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                           aclOpExecutor *executor, aclrtStream stream, foreach_value_fn value);

/* The storage formats nnopbase calls private (OPB common/utils/format_utils.cpp IsPrivateFormat: NC1HWC0,
   FRACTAL_Z, NC1HWC0_C04, FRACTAL_NZ, NDC1HWC0, FRACTAL_Z_3D and the FRACTAL_NZ_C0_* ones). */
int foreach_private_format(int format);

/* Whether the SoC has these operators' dtype list (DAV_2201, i.e. Atlas A2/A3, or a regbase SoC): 1, else 0. */
int foreach_soc_supported(void);

/* Same shape (ndim and dims) of two descriptors. */
int foreach_same_shape(const aclTensor *a, const aclTensor *b);

/* The checks of the operators' CheckParams, each 0 or 161002 with a message naming the rule and the values: */
int foreach_dtype_in(int dtype, const int *list, int n);
/* dtype (of parameter name) in list; why (may be NULL) is appended to the message */
int foreach_check_dtype_in(const char *func, const char *name, int dtype, const int *list, int n, const char *why);
/* every t[0..n) has dtype (that of ref, e.g. "x1[0]") */
int foreach_check_list_dtype(const char *func, const char *name, const aclTensor *t, uint64_t n, int dtype,
                             const char *ref);
/* b[i] has a[i]'s shape for every i < n */
int foreach_check_list_shapes(const char *func, const char *a_name, const aclTensor *a, const char *b_name,
                              const aclTensor *b, uint64_t n);
/* at most 8 dims (when dims), no private storage format */
int foreach_check_list_limits(const char *func, const char *name, const aclTensor *t, uint64_t n, int dims);
/* the two lists have as many tensors */
int foreach_check_sizes(const char *func, const char *a_name, uint64_t a, const char *b_name, uint64_t b);
/* foreach_soc_supported, else 161002 */
int foreach_check_soc(const char *func);

#endif
