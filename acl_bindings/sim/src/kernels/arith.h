/*
 * arith.h - the one engine of the simulated binary arithmetic operators (ops/mul_add.c, ops/sub.c, ops/div.c):
 * phase 1 (handles, dtypes, CANN's Atlas A2/A3 promotion, shapes, memory; the scalars read) and the kernel of
 * out = self (op) other, other a tensor (broadcast) or a scalar, with alpha where the operator has one, and the
 * in-place forms (out is selfRef: the result cast back to selfRef's dtype).  The rules and their sources: arith.c.
 */
#ifndef CANNSIM_ARITH_H
#define CANNSIM_ARITH_H

#include "opapi.h"
#include "scalar.h"

enum { AR_MUL, AR_ADD, AR_SUB, AR_DIV };

/* One entry point: its phase-1 name ("aclnnSubGetWorkspaceSize"), its executor's op ("Sub"), the arithmetic
   (AR_*), whether other is an aclScalar, whether it takes alpha, and whether out is selfRef. */
typedef struct {
    const char *p1, *op;
    int kind, scalar, alpha, inplace;
} arith_op;

/* Phase 1: other_t (tensor forms) or other_s (scalar forms); alpha NULL where the operator has none; out is
   selfRef itself for the in-place forms. */
aclnnStatus arith_phase1(const arith_op *d, const aclTensor *self, const aclTensor *other_t,
                         const aclScalar *other_s, const aclScalar *alpha, const aclTensor *out,
                         uint64_t *workspaceSize, aclOpExecutor **executor);

/* Phase 2 of any of them (func "aclnnSub", op "Sub"). */
aclnnStatus arith_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                         aclOpExecutor *executor, aclrtStream stream);

/* An operator's exported phase 2, NAME (aclnnSub) with its executor's op (string "Sub"). */
#define ARITH_PHASE2(NAME, OP)                                                                                     \
    CANNSIM_API aclnnStatus NAME(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,                 \
                                 aclrtStream stream) {                                                             \
        return arith_phase2(#NAME, OP, workspace, workspaceSize, executor, stream);                                \
    }

#endif
