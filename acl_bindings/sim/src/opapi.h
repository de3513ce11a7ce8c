/*
 * opapi.h - glue shared by the simulated operators of the operator library (libopapi_cv.so, or
 * libopapi.so): registration of an operator's entry points, the checks nnopbase and the runtime
 * make of the tensors an operator is given, and the plumbing of the two phases.  It names no
 * operator; each operator is one file in ops/ (built in by build.py, no other file edited).
 */
#ifndef CANNSIM_OPAPI_H
#define CANNSIM_OPAPI_H

#include "cannsim.h"

/* Declare this file's exported entry points (once per operator file, at file scope, on one line of its own,
   with string literals):
       CANNSIM_REGISTER_OP("aclnnFooGetWorkspaceSize", "aclnnFoo")
   build.py collects these lines into the runtime's table of names (sim_core.c), so their calls are counted,
   fault-injectable and reported like every other exported function's, from the runtime's load on. */
#define CANNSIM_REGISTER_OP(...) \
    __attribute__((unused)) static const char *const cannsim_op_entry_points_[] = {__VA_ARGS__};

/* The answer of an entry point the simulator does not implement: 200001 with a message. */
#define OPAPI_NOT_SUPPORTED(name) \
    cannsim_fail(ACL_ERROR_API_NOT_SUPPORT, "%s: not implemented by the CANN simulator", name)

/* A handle argument of phase 1 (handle may be NULL: the operator's own checks report that). */
typedef struct {
    const char *name;
    const void *handle;
    int is_array; /* an aclIntArray, else an aclTensor */
} opapi_handle;

/* A tensor an operator uses, by its parameter name. */
typedef struct {
    const char *name;
    const aclTensor *t;
} opapi_tensor;

/* A 5-D tensor's logical N, C, D, H, W sizes and element strides: its view dims in that order, or, when
   channels_last, read from the view dims [N, D, H, W, C] (NDHWC; cann-abi.md §5.1 step 3.4). */
void opapi_ncdhw(const aclTensor *t, int channels_last, int64_t size[5], int64_t stride[5]);

/* Every non-NULL handle, in argument order, is live (lock held).  Returns 0, or 161002 with a message
   naming the first that is not. */
int opapi_check_live_locked(const char *func, const opapi_handle *h, int n);

/* nnopbase's Validate of a non-contiguous view against its storage (cann-abi.md §8.1).  Returns 0, or
   561103 with a message naming the tensor. */
int opapi_check_view_in_storage(const char *func, const char *name, const aclTensor *t);

/* The tensors' data (and the workspace, if ws is not NULL) lie in live device memory, 32-byte aligned; no
   output's elements overlap each other; no two tensors' memory overlaps; the workspace overlaps none.
   Takes the lock.  If refs is not NULL, it receives the ranges a kernel uses (inputs read, outputs and
   the workspace written; nin + nout + 1 entries).  Returns 0 or 161002 with a message. */
int opapi_check_memory(const char *func, const opapi_tensor *ins, int nin, const opapi_tensor *outs, int nout,
                       const void *ws, uint64_t wsn, cannsim_ref *refs);

/* An int array's values in an op-cache key: the first min(len, copied) values of a copy made under the
   lock, then len (vals NULL: a NULL array). */
void opapi_key_array(cannsim_key *k, const int64_t *vals, int64_t len, int64_t copied);

/* Phase 1's start: count the call (fault injection) and check the two out-parameters.  Returns 0 or the
   code, with the message set. */
int opapi_phase1_enter(const char *func, const uint64_t *workspaceSize, aclOpExecutor *const *executor);

/* The op cache answers phase 1 before any check (cann-abi.md §8.6).  Returns 1 when it did, with the
   status in *rc (the executor and workspace size handed over on success); 0 to run the checks.  Stricter
   than the device: on a hit, the tensors' addresses must still lie in live device memory. */
int opapi_phase1_cached(const char *func, const char *op, const cannsim_key *key, const cannsim_exec_io *io,
                        const opapi_tensor *ins, int nin, const opapi_tensor *outs, int nout,
                        uint64_t *workspaceSize, aclOpExecutor **executor, int *rc);

/* Phase 1's end: create the executor (empty: nothing to launch) with the operator's private data, give it
   its op-cache entry and hand it over.  Returns 0 or 561101. */
int opapi_phase1_done(const char *func, const char *op, const cannsim_exec_io *io, const cannsim_key *key,
                      uint64_t ws, int empty, const void *opdata, size_t opdata_size, uint64_t *workspaceSize,
                      aclOpExecutor **executor);

/* A kernel for phase 2: make builds the task's argument from the executor's snapshot (its tensors hold
   the current addresses) and the workspace, or returns NULL when out of host memory; run is the task;
   destroy frees the argument.  refuse (NULL: none) is the launch's own host step, the kernel's tiling:
   a non-zero status it returns (with its reason in msg) fails phase 2 before anything is queued. */
typedef struct {
    void *(*make)(const aclOpExecutor *snap, void *workspace, uint64_t workspaceSize);
    cannsim_task_fn run;
    void (*destroy)(void *);
    int (*refuse)(const aclOpExecutor *snap, char *msg, size_t msglen);
} opapi_kernel;

/* Phase 2 of an operator: count the call, start the executor, check the workspace and the tensors'
   memory, queue the kernel on the stream, and consume (or release) the executor. */
/* The SoC the simulator answers for, as nnopbase looks up its kernels (socs.json, written into cannsim_socs.h by
   build.py; cann-abi.md §11): its kernel directory ("ascend910b", ...; the simulator's own name is an Atlas A2),
   or NULL for a name that is not in nnopbase's SoC table. */
const char *opapi_soc_dir(void);
/* Whether that directory is dir (e.g. "ascend950": IsRegBase, NpuArch DAV_3510; "ascend310p": DAV_2002). */
int opapi_soc_is(const char *dir);
/* Whether op_type (an L0 kernel, as socs.json names it) has a kernel for that SoC that the simulator models.
   Where it has none (a directory without the operator's kernel config, a name outside the table), the L0
   ignores the failed lookup, so phase 1 succeeds (no tiling ran: no kernel workspace), and phase 2 fails with
   561000 (OpKernel::Run: no binary).  Writes why into msg (when not NULL). */
int opapi_has_kernel(const char *op_type, char *msg, size_t msglen);
/* Phase 1 on a SoC without the kernel: record the failed lookup as an error message of the thread (the status
   stays 0), as nnopbase's KernelMgr::GetWorkspace logs it; nothing where the kernel is there. */
void opapi_note_no_kernel(const char *func, const char *op_type);

aclnnStatus opapi_phase2(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                         aclOpExecutor *executor, aclrtStream stream, const opapi_kernel *kernel);

/* Phase 2's first steps, shared by opapi_phase2 and the operators with their own (kernels/foreach.c): count the
   call, start the executor into *snap, check a NULL workspace with a size.  Returns 1 when phase 2 ends there
   (*rc: 0 for an empty executor, finished; else the code, the executor consumed), 0 to go on. */
int opapi_phase2_begin(const char *func, const char *op, void *workspace, uint64_t workspaceSize,
                       aclOpExecutor *executor, aclOpExecutor *snap, int *rc);
/* A failed cannsim_launch (runtime status rc) as the operator reports it: 361001 quoting the runtime's message. */
int opapi_launch_failure(const char *func, int rc);

/* ViewCopy(result, out) of phase 1's last step: the result keeps the input's storage format (the L0's AllocTensor,
   Transpose), and ViewCopy refuses one other than the output's unless it is ND: 561103 (OMA
   conversion/contiguous/op_host/op_api/contiguous.cpp CheckViewCopyParams; cann-abi.md §10.1). */
int opapi_check_view_copy_format(const char *func, const char *in_name, const aclTensor *in, const char *out_name,
                                 const aclTensor *out);

/* Whether tensor t (parameter name) broadcasts to to's shape (to_name): at most to's dims, each of t's trailing
   dims 1 or to's.  Returns 0, or 161002 with a message naming the dim. */
int opapi_check_broadcast(const char *func, const char *name, const aclTensor *t, const char *to_name,
                          const aclTensor *to);

/* nnopbase's IsContiguous: 0 or 1 elements, or row-major strides on every dim longer than 1. */
int opapi_view_is_contiguous(const aclTensor *t);

/* The workspace phase 1 reports, planned as nnopbase plans it (ws_plan.c; cann-abi.md §10.8).  A step is one
   kernel of the executor, in launch order: the workspace its tiling asks for (has_workspace: it asks at all),
   its output's bytes, and whether that output is the user's tensor (to_user) rather than an intermediate that
   the next step reads.  Returns UINT64_MAX when the size does not fit in 64 bits. */
#define OPAPI_MAX_STEPS 8
typedef struct {
    uint64_t workspace;
    int has_workspace;
    uint64_t output;
    int to_user;
} opapi_step;
uint64_t opapi_ws_plan(const opapi_step *steps, int n);

/* The plan of an upsample operator's chain from in to out (the user's tensors): l0op::Contiguous of in,
   a Transpose to NCDHW (NDHWC), a Cast to float32 (to_float: float16/bfloat16 on Atlas A2/A3), the kernel
   (asking for kernel_ws; kernel_asks 0: no tiling ran, as where the SoC has no kernel, so it asks for nothing),
   the way back, then ViewCopy into out, which only repoints the last result when out is contiguous. */
uint64_t opapi_upsample_workspace(const aclTensor *in, const aclTensor *out, uint64_t kernel_ws, int kernel_asks,
                                  int to_float);

#endif /* CANNSIM_OPAPI_H */
