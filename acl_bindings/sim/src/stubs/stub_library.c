/*
 * stub_library.c - STUB.  One source for the CANN libraries that torch_npu links but this package never uses
 * (libhccl, libge_runner, libgraph, libacl_tdt_channel, libatb, libacl_op_compiler; docs/cann-abi.md, "torch_npu
 * on the simulator").  They exist so that the dynamic linker can load libtorch_npu.so; none simulates its
 * library.  build.py compiles this file once per library with CANNSIM_STUB_NAME set to its base name.  Each
 * exports cannsimStub_<name>() saying what it is; libacl_op_compiler also answers aclopCompileAndExecute with
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT (207000): the simulator has no GE compiler, and torch_npu looks its
 * aclrt*SysParamOpt functions up through this library's handle, so it is linked against the runtime.
 */
#include "cannsim.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)

CANNSIM_API const char *CAT(cannsimStub_, CANNSIM_STUB_NAME)(void) {
    return "lib" STR(CANNSIM_STUB_NAME) ".so: a stub library of the CANN simulator (it simulates nothing)";
}

#ifdef CANNSIM_STUB_OP_COMPILER
/* Prototype: Ascend/pytorch third_party/acl/libs/acl_op_compiler.cpp. */
CANNSIM_API aclError aclopCompileAndExecute(const char *opType, int numInputs, const void *const inputDesc[],
                                            const void *const inputs[], int numOutputs,
                                            const void *const outputDesc[], void *const outputs[], const void *attr,
                                            int engineType, int compileFlag, const char *opPath, aclrtStream stream) {
    (void)numInputs, (void)inputDesc, (void)inputs, (void)numOutputs, (void)outputDesc, (void)outputs, (void)attr;
    (void)engineType, (void)compileFlag, (void)opPath, (void)stream;
    int rc = cannsim_enter("aclopCompileAndExecute");
    if (rc) return rc;
    return cannsim_fail(207000, "aclopCompileAndExecute: the CANN simulator has no GE op compiler (operator %s)",
                        opType ? opType : "(NULL)");
}
#endif
