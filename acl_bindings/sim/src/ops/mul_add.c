/*
 * mul_add.c - the simulated two-phase aclnnMul(self, other, out) and aclnnMuls(self, other, out): out = self *
 * other; aclnnAdd(self, other, alpha, out) and aclnnAdds(self, other, alpha, out): out = self + alpha * other;
 * and their in-place forms aclnnInplaceMul(selfRef, other), aclnnInplaceMuls(selfRef, other),
 * aclnnInplaceAdd(selfRef, other, alpha), aclnnInplaceAdds(selfRef, other, alpha), whose out is selfRef.
 * other is a tensor (Mul, Add: self and other broadcast to out's shape; in place, to selfRef's) or a scalar
 * (Muls, Adds); alpha a scalar (ops-math math/mul/docs/aclnnMul&aclnnInplaceMul.md,
 * math/muls/docs/aclnnMuls&aclnnInplaceMuls.md, math/add/docs/aclnnAdd&aclnnInplaceAdd.md, aclnnAdds.md,
 * aclnnInplaceAdds.md).  op-plugin's mul, add, mul_ and add_ need both forms of each (MulKernelNpuOpApi.cpp,
 * AddKernelNpuOpApi.cpp: DO_COMPATIBILITY of both), and take the scalar form for a Python number or a host 0-dim
 * tensor; torch's gradient accumulation and SGD's step are add_ (aclnnInplaceAdd).
 * The checks, the promotion (Atlas A2/A3: ops-math math/mul/op_api/aclnn_mul.cpp, math/add/op_api/aclnn_add.cpp)
 * and the kernel: the shared engine, kernels/arith.c.  In place (aclnn_add.cpp CheckInplace, aclnn_mul.cpp
 * CheckInplaceMulParams): selfRef must be the broadcast shape, and the promoted dtype castable to selfRef's
 * (InplaceMuls: unchecked), the result cast back to it.
 */
#include "kernels/arith.h"

CANNSIM_REGISTER_OP("aclnnMulGetWorkspaceSize", "aclnnMul", "aclnnMulsGetWorkspaceSize", "aclnnMuls", "aclnnAddGetWorkspaceSize", "aclnnAdd", "aclnnAddsGetWorkspaceSize", "aclnnAdds", "aclnnInplaceMulGetWorkspaceSize", "aclnnInplaceMul", "aclnnInplaceMulsGetWorkspaceSize", "aclnnInplaceMuls", "aclnnInplaceAddGetWorkspaceSize", "aclnnInplaceAdd", "aclnnInplaceAddsGetWorkspaceSize", "aclnnInplaceAdds")

static const arith_op MUL = {"aclnnMulGetWorkspaceSize", "Mul", AR_MUL, 0, 0, 0};
static const arith_op MULS = {"aclnnMulsGetWorkspaceSize", "Muls", AR_MUL, 1, 0, 0};
static const arith_op ADD = {"aclnnAddGetWorkspaceSize", "Add", AR_ADD, 0, 1, 0};
static const arith_op ADDS = {"aclnnAddsGetWorkspaceSize", "Adds", AR_ADD, 1, 1, 0};
static const arith_op IMUL = {"aclnnInplaceMulGetWorkspaceSize", "InplaceMul", AR_MUL, 0, 0, 1};
static const arith_op IMULS = {"aclnnInplaceMulsGetWorkspaceSize", "InplaceMuls", AR_MUL, 1, 0, 1};
static const arith_op IADD = {"aclnnInplaceAddGetWorkspaceSize", "InplaceAdd", AR_ADD, 0, 1, 1};
static const arith_op IADDS = {"aclnnInplaceAddsGetWorkspaceSize", "InplaceAdds", AR_ADD, 1, 1, 1};

CANNSIM_API aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&MUL, self, other, NULL, NULL, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&MULS, self, NULL, other, NULL, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                                 const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
    return arith_phase1(&ADD, self, other, NULL, alpha, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other,
                                                  const aclScalar *alpha, aclTensor *out, uint64_t *workspaceSize,
                                                  aclOpExecutor **executor) {
    return arith_phase1(&ADDS, self, NULL, other, alpha, out, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceMulGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other,
                                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&IMUL, selfRef, other, NULL, NULL, selfRef, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceMulsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other,
                                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
    return arith_phase1(&IMULS, selfRef, NULL, other, NULL, selfRef, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceAddGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other,
                                                        const aclScalar *alpha, uint64_t *workspaceSize,
                                                        aclOpExecutor **executor) {
    return arith_phase1(&IADD, selfRef, other, NULL, alpha, selfRef, workspaceSize, executor);
}

CANNSIM_API aclnnStatus aclnnInplaceAddsGetWorkspaceSize(aclTensor *selfRef, const aclScalar *other,
                                                         const aclScalar *alpha, uint64_t *workspaceSize,
                                                         aclOpExecutor **executor) {
    return arith_phase1(&IADDS, selfRef, NULL, other, alpha, selfRef, workspaceSize, executor);
}

ARITH_PHASE2(aclnnMul, "Mul")
ARITH_PHASE2(aclnnMuls, "Muls")
ARITH_PHASE2(aclnnAdd, "Add")
ARITH_PHASE2(aclnnAdds, "Adds")
ARITH_PHASE2(aclnnInplaceMul, "InplaceMul")
ARITH_PHASE2(aclnnInplaceMuls, "InplaceMuls")
ARITH_PHASE2(aclnnInplaceAdd, "InplaceAdd")
ARITH_PHASE2(aclnnInplaceAdds, "InplaceAdds")
