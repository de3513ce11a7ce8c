/*
 * stub_library.c - STUB.  One source for the CANN libraries that torch_npu links but this package never uses
 * (libhccl, libge_runner, libgraph, libacl_tdt_channel, libatb, libacl_op_compiler; docs/cann-abi.md, "torch_npu
 * on the simulator").  They exist so that the dynamic linker can load libtorch_npu.so; none simulates its
 * library.  build.py compiles this file once per library with CANNSIM_STUB_NAME set to its base name.  Each
 * exports cannsimStub_<name>() saying what it is.
 *
 * libacl_op_compiler (CANNSIM_STUB_OP_COMPILER) also answers the aclop entry points torch_npu looks up through
 * its handle (Ascend/pytorch torch_npu/csrc/framework/interface/AclOpCompileInterface.cpp, the
 * TORCH_NPU_LOAD_FUNC lines 19-25, and OpParamMaker.cpp's direct calls of aclopCompileAndExecute), and is linked
 * against the runtime so that its aclrt*SysParamOpt lookups (lines 26-28) resolve through the same handle.
 * op-plugin takes this path for a torch operator whose aclnn operator the simulator lacks.  The simulator has no
 * GE single-operator compiler and no aclop operator at all, so:
 *   - the compile options (aclSetCompileopt, aclGetCompileoptSize, aclGetCompileopt) are a plain store, with
 *     CANN's argument checks and codes: an option changes only how GE would compile, and nothing here compiles;
 *   - the graph-dump options are created and destroyed (nothing is dumped);
 *   - every entry that would compile or run an operator (aclopCompileAndExecute, aclopCompileAndExecuteV2,
 *     aclGenGraphAndDumpForOp) fails with ACL_ERROR_OP_NOT_FOUND (100024, "single operator not found"), and a
 *     message naming the operator type and where the simulator's aclnn operators are listed.
 * CANN's behaviour: hicann/ge api/acl/acl_op_compiler/single_op/op_compiler.cpp (CheckInput, ConstructAclOp,
 * aclopCompileAndExecute[V2], aclSetCompileopt, aclGetCompileoptSize, aclGetCompileopt, CopyOptValue,
 * GetDefaultJitCompileValue, aclGenGraphAndDumpForOp, aclCreateGraphDumpOpt, aclDestroyGraphDumpOpt);
 * prototypes and the aclCompileOpt enum: hicann/ge inc/external/acl/acl_op_compiler.h; codes: hicann/runtime
 * include/external/acl/acl_base_rt.h (ACL_ERROR_OP_NOT_FOUND line 91).  Why 100024 and not 207000: torch_npu's
 * NPU_CHECK_ERROR turns 207000 into a one-time warning and goes on (docs/cann-abi.md §9.5).
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ACL_ERROR_OP_NOT_FOUND 100024  /* acl_base_rt.h 91 */
#define ACL_ERROR_BAD_ALLOC 200000     /* acl_base_rt.h */
#define ACL_ERROR_FEATURE_UNSUPPORTED 200006
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_ERROR_FAILURE 500001

/* aclCompileOpt (acl_op_compiler.h): ACL_PRECISION_MODE 0 .. ACL_OP_DEBUG_OPTION 16 */
enum { OPT_AUTO_TUNE_MODE = 2, OPT_JIT_COMPILE = 10, OPT_DEBUG_OPTION = 16, N_OPTS = 17 };
/* aclopCompileType: ACL_COMPILE_SYS 0, ACL_COMPILE_UNREGISTERED 1 */
enum { COMPILE_SYS = 0, COMPILE_UNREGISTERED = 1 };
/* aclGetCompileoptSize's answer for ACL_OP_JIT_COMPILE (op_compiler.cpp COMPILE_OPT_SIZE) */
#define JIT_OPT_SIZE 256u

static pthread_mutex_t g_opt_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_opt[N_OPTS]; /* the stored values (each malloc'd), NULL where never set */

/* The answer of every entry that would compile or run an aclop operator: the type asked for, why, and where the
   simulator's own operators are listed (acl_bindings/sim/__main__.py `ops`; docs/sim-ops.md). */
static int op_not_found(const char *func, const char *opType) {
    return cannsim_fail(ACL_ERROR_OP_NOT_FOUND,
                        "%s: aclop operator %s not found: the CANN simulator implements aclnn operators only (it has "
                        "no aclop operators and no GE compiler; torch_npu takes the aclop path where the aclnn "
                        "operator it wants is missing); the aclnn operators it has: `python -m acl_bindings.sim ops` "
                        "(table: docs/sim-ops.md)",
                        func, opType);
}

/* op_compiler.cpp CheckInput and ConstructAclOp: the counts, the compile type, opType, opPath for an
   unregistered operator.  The descriptor and buffer arrays are not checked: the simulator's aclCreateTensorDesc
   and aclCreateDataBuffer answer NULL (rt_torch_npu.c), so a NULL entry would be the simulator's own, and the
   operator's absence is the reason to report.  For the same reason "all outputs empty" (CANN's early success)
   cannot be seen: the simulator answers 100024 there too. */
static int check_op_call(const char *func, const char *opType, int numInputs, int numOutputs, int compileFlag,
                         const char *opPath) {
    if (numInputs < 0 || numOutputs < 0)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: numInputs %d and numOutputs %d must not be negative",
                            func, numInputs, numOutputs);
    if (compileFlag != COMPILE_SYS && compileFlag != COMPILE_UNREGISTERED)
        return cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: compile type %d is not ACL_COMPILE_SYS (0) or "
                            "ACL_COMPILE_UNREGISTERED (1)", func, compileFlag);
    if (!opType) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: opType is NULL", func);
    if (compileFlag == COMPILE_UNREGISTERED && !opPath)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: opPath is NULL with ACL_COMPILE_UNREGISTERED", func);
    return 0;
}

/* Prototypes: hicann/ge inc/external/acl/acl_op_compiler.h (the descriptor, buffer and attribute types are
   opaque here). */
CANNSIM_API aclError aclopCompileAndExecute(const char *opType, int numInputs, const void *const inputDesc[],
                                            const void *const inputs[], int numOutputs,
                                            const void *const outputDesc[], void *const outputs[], const void *attr,
                                            int engineType, int compileFlag, const char *opPath, aclrtStream stream) {
    (void)inputDesc, (void)inputs, (void)outputDesc, (void)outputs, (void)attr, (void)engineType, (void)stream;
    int rc = cannsim_enter("aclopCompileAndExecute");
    if (!rc) rc = check_op_call("aclopCompileAndExecute", opType, numInputs, numOutputs, compileFlag, opPath);
    return rc ? rc : op_not_found("aclopCompileAndExecute", opType);
}

CANNSIM_API aclError aclopCompileAndExecuteV2(const char *opType, int numInputs, void *inputDesc[], void *inputs[],
                                              int numOutputs, void *outputDesc[], void *outputs[], void *attr,
                                              int engineType, int compileFlag, const char *opPath,
                                              aclrtStream stream) {
    (void)inputDesc, (void)inputs, (void)outputDesc, (void)outputs, (void)attr, (void)engineType, (void)stream;
    int rc = cannsim_enter("aclopCompileAndExecuteV2");
    if (!rc) rc = check_op_call("aclopCompileAndExecuteV2", opType, numInputs, numOutputs, compileFlag, opPath);
    return rc ? rc : op_not_found("aclopCompileAndExecuteV2", opType);
}

/* aclGenGraphAndDumpForOp (torch_npu's AOE mode): CANN's checks in its order (graphDumpOpt must be NULL, the
   counts, opType, graphDumpPath), then the operator cannot be found either. */
CANNSIM_API aclError aclGenGraphAndDumpForOp(const char *opType, int numInputs, const void *const inputDesc[],
                                             const void *const inputs[], int numOutputs,
                                             const void *const outputDesc[], void *const outputs[],
                                             const void *attr, int engineType, const char *graphDumpPath,
                                             const void *graphDumpOpt) {
    (void)inputDesc, (void)inputs, (void)outputDesc, (void)outputs, (void)attr, (void)engineType;
    static const char f[] = "aclGenGraphAndDumpForOp";
    int rc = cannsim_enter(f);
    if (rc) return rc;
    if (graphDumpOpt)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: graphDumpOpt must be NULL (%p)", f, graphDumpOpt);
    if (numInputs < 0 || numOutputs < 0)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: numInputs %d and numOutputs %d must not be negative", f,
                            numInputs, numOutputs);
    if (!opType) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: opType is NULL", f);
    if (!graphDumpPath) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: graphDumpPath is NULL", f);
    return op_not_found(f, opType);
}

/* aclGraphDumpOption is opaque and empty in CANN (op_compile_processor.h); a one-byte allocation stands for it. */
CANNSIM_API void *aclCreateGraphDumpOpt(void) {
    if (cannsim_enter("aclCreateGraphDumpOpt")) return NULL;
    return calloc(1, 1);
}

CANNSIM_API aclError aclDestroyGraphDumpOpt(const void *graphDumpOpt) {
    int rc = cannsim_enter("aclDestroyGraphDumpOpt");
    if (rc) return rc;
    if (!graphDumpOpt) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclDestroyGraphDumpOpt: graphDumpOpt is NULL");
    free((void *)graphDumpOpt);
    return ACL_SUCCESS;
}

/* aclSetCompileopt: value non-NULL; ACL_AUTO_TUNE_MODE is discarded (200006); an option outside the enum is
   500000; ACL_OP_JIT_COMPILE is kept as "1" for "enable", else "0" (CANN's ge.jit_compile). */
CANNSIM_API aclError aclSetCompileopt(int opt, const char *value) {
    static const char f[] = "aclSetCompileopt";
    int rc = cannsim_enter(f);
    if (rc) return rc;
    if (!value) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: value is NULL", f);
    if (opt == OPT_AUTO_TUNE_MODE)
        return cannsim_fail(ACL_ERROR_FEATURE_UNSUPPORTED, "%s: ACL_AUTO_TUNE_MODE (2) has been discarded", f);
    if (opt < 0 || opt >= N_OPTS)
        return cannsim_fail(ACL_ERROR_INTERNAL_ERROR, "%s: option %d is not an aclCompileOpt (0..%d)", f, opt,
                            N_OPTS - 1);
    char *copy = strdup(opt == OPT_JIT_COMPILE ? (strcmp(value, "enable") == 0 ? "1" : "0") : value);
    if (!copy) return cannsim_fail(ACL_ERROR_BAD_ALLOC, "%s: out of host memory for the value of option %d", f, opt);
    pthread_mutex_lock(&g_opt_mu);
    char *old = g_opt[opt];
    g_opt[opt] = copy;
    pthread_mutex_unlock(&g_opt_mu);
    free(old);
    return ACL_SUCCESS;
}

/* aclGetCompileoptSize: 256 for ACL_OP_JIT_COMPILE; else the stored value's length + 1, 0 when unset or empty
   or outside the enum.  No error code: it returns a size_t. */
CANNSIM_API size_t aclGetCompileoptSize(int opt) {
    if (cannsim_enter("aclGetCompileoptSize")) return 0;
    if (opt == OPT_JIT_COMPILE) return JIT_OPT_SIZE;
    if (opt < 0 || opt >= N_OPTS || opt == OPT_AUTO_TUNE_MODE) return 0;
    pthread_mutex_lock(&g_opt_mu);
    size_t n = g_opt[opt] && g_opt[opt][0] ? strlen(g_opt[opt]) + 1 : 0;
    pthread_mutex_unlock(&g_opt_mu);
    return n;
}

static int copy_value(const char *f, int opt, char *value, size_t length, const char *text) {
    size_t n = strlen(text);
    if (length < n + 1)
        return cannsim_fail(ACL_ERROR_FAILURE, "%s: length %zu of option %d is less than its value's %zu + 1", f,
                            length, opt, n);
    memcpy(value, text, n + 1);
    return ACL_SUCCESS;
}

/* aclGetCompileopt reads two options only: ACL_OP_DEBUG_OPTION (the stored value; never set is 200001) and
   ACL_OP_JIT_COMPILE, whose answer is the SoC's default, not the stored value: "disable" unless the NPU
   architecture is one of kJitCompileEnabledByArch.  The simulator answers "disable" for every SoC, right for
   Atlas A2 (Ascend910B1 is arch 2201, not in that list; docs/cann-abi.md §9.5).  Any other option is 200001. */
CANNSIM_API aclError aclGetCompileopt(int opt, char *value, size_t length) {
    static const char f[] = "aclGetCompileopt";
    int rc = cannsim_enter(f);
    if (rc) return rc;
    if (!value) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: value is NULL", f);
    if (opt == OPT_JIT_COMPILE) return copy_value(f, opt, value, length, "disable");
    if (opt != OPT_DEBUG_OPTION)
        return cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: option %d cannot be read (only ACL_OP_JIT_COMPILE (10) "
                            "and ACL_OP_DEBUG_OPTION (16) can)", f, opt);
    pthread_mutex_lock(&g_opt_mu);
    if (g_opt[opt])
        rc = copy_value(f, opt, value, length, g_opt[opt]);
    else
        rc = cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: ACL_OP_DEBUG_OPTION (16) was never set", f);
    pthread_mutex_unlock(&g_opt_mu);
    return rc;
}
#endif
