/*
 * c_floor.c - the host-overhead floor: the same C calls the Python binding makes for one
 * aclnnUpsampleNearestExact3dBackward call on a tiny tensor, made from C.
 *
 * Compiled and run by benchmarks/run.py against the simulator's libraries (or any library
 * directory with the same names):
 *
 *     cc -O2 -o c_floor c_floor.c -L<lib64> -Wl,-rpath,<lib64> -lascendcl -lnnopbase -lopapi_cv
 *     ./c_floor [iterations]
 *
 * It prints one JSON object: microseconds per call for each sequence, over one batch of
 * `iterations` calls each:
 *   oneshot     create 2 aclTensors + 2 aclIntArrays, phase 1, phase 2, synchronize the stream,
 *               destroy the 4 handles (phase 2 consumes the executor): the official sample's sequence;
 *   oneshot_kept  the 4 handles made once; per call phase 1, phase 2, synchronize;
 *   plan        a repeatable executor made once; per call phase 2 + synchronize;
 *   plan_addr   the same, with aclSetInputTensorAddr / aclSetOutputTensorAddr pointing the executor
 *               at the other of two buffer pairs before every call.
 * The result of each sequence is checked once against the expected sum.
 *
 * The prototypes below are written from docs/cann-abi.md §1.1, §1.2 and §1.4; enum
 * values from §3.1-§3.3; aclError is int and aclnnStatus is int32_t (§2).  No CANN header is used.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int aclError;         /* §2 */
typedef int32_t aclnnStatus;  /* §2 */
typedef void *aclrtStream;    /* §2 */
typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;
typedef struct aclOpExecutor aclOpExecutor;

/* §1.1 runtime */
aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind);
const char *aclGetRecentErrMsg(void);
/* §1.2 nnopbase */
aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, int dataType, const int64_t *stride,
                           int64_t offset, int format, const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData);
aclnnStatus aclDestroyTensor(const aclTensor *tensor);
aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
aclnnStatus aclDestroyIntArray(const aclIntArray *array);
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor);
aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);
aclnnStatus aclSetInputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr);
aclnnStatus aclSetOutputTensorAddr(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr);
/* §1.4 the operator */
aclnnStatus aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclIntArray *outputSize, const aclIntArray *inputSize, double scalesD,
    double scalesH, double scalesW, aclTensor *gradInput, uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnUpsampleNearestExact3dBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                aclrtStream stream);

enum { DT_FLOAT = 0 };                          /* §3.1 ACL_FLOAT */
enum { FMT_NCDHW = 30 };                        /* §3.2 ACL_FORMAT_NCDHW */
enum { MEMCPY_H2D = 1, MEMCPY_D2H = 2 };        /* §3.3 aclrtMemcpyKind */
enum { MALLOC_HUGE_FIRST = 0 };                 /* §3.3 aclrtMemMallocPolicy */
#define REPEAT_INITIALIZE 100002                /* §3.4: benign on a second aclInit */

static void die(const char *what, long code) {
    const char *m = aclGetRecentErrMsg();
    fprintf(stderr, "c_floor: %s failed with %ld: %s\n", what, code, m ? m : "");
    exit(1);
}

#define CHECK(call)                                  \
    do {                                             \
        long rc_ = (long)(call);                     \
        if (rc_ != 0) die(#call, rc_);               \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* the tiny case (a): gradOut [1,1,2,2,2] -> gradInput [1,1,1,1,1] */
static const int64_t GO_DIMS[5] = {1, 1, 2, 2, 2};
static const int64_t GI_DIMS[5] = {1, 1, 1, 1, 1};
static const int64_t GO_STRIDES[5] = {8, 8, 4, 2, 1};
static const int64_t GI_STRIDES[5] = {1, 1, 1, 1, 1};
static const int64_t OUT_SIZE[3] = {2, 2, 2};
static const int64_t IN_SIZE[5] = {1, 1, 1, 1, 1};

/* Storage dims as the binding declares them (cann-abi.md §8.1, §8.6): the buffer's element count, 1-D for a
   one-shot call, (1, n) for a plan (nnopbase's op cache keys on the storage shape, so a plan's phase 1 is not
   answered with the one-shot calls' cache wrapper). */
static const int64_t GO_STORAGE[2] = {1, 8}, GI_STORAGE[2] = {1, 1};

/* The four handles of one call (the same C calls as the one-shot and plan sequences make). */
static void create_args(void *go, void *gi, int plan, aclTensor **t_go, aclTensor **t_gi, aclIntArray **a_out,
                        aclIntArray **a_in) {
    *t_go = aclCreateTensor(GO_DIMS, 5, DT_FLOAT, GO_STRIDES, 0, FMT_NCDHW, GO_STORAGE + !plan, 1 + plan, go);
    *t_gi = aclCreateTensor(GI_DIMS, 5, DT_FLOAT, GI_STRIDES, 0, FMT_NCDHW, GI_STORAGE + !plan, 1 + plan, gi);
    *a_out = aclCreateIntArray(OUT_SIZE, 3);
    *a_in = aclCreateIntArray(IN_SIZE, 5);
    if (!*t_go || !*t_gi || !*a_out || !*a_in) die("aclCreateTensor/aclCreateIntArray", 0);
}

static void expect_sum(void *gi, float want, const char *seq) {
    float got = 0.0f;
    CHECK(aclrtMemcpy(&got, sizeof got, gi, sizeof got, MEMCPY_D2H));
    if (got != want) {
        fprintf(stderr, "c_floor: %s gave %g, expected %g\n", seq, (double)got, (double)want);
        exit(1);
    }
    const float zero = 0.0f;  /* cleared: the next sequence's check sees only its own result */
    CHECK(aclrtMemcpy(gi, sizeof zero, &zero, sizeof zero, MEMCPY_H2D));
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
    if (iters < 1) iters = 1;

    aclError rc = aclInit(NULL);
    if (rc != 0 && rc != REPEAT_INITIALIZE) die("aclInit", rc);
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));

    /* two buffer pairs (for the address updates) and a workspace reused by every call */
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8}, host2[8] = {2, 4, 6, 8, 10, 12, 14, 16};
    void *go[2], *gi[2];
    for (int k = 0; k < 2; k++) {
        CHECK(aclrtMalloc(&go[k], sizeof host, MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&gi[k], sizeof(float), MALLOC_HUGE_FIRST));
    }
    CHECK(aclrtMemcpy(go[0], sizeof host, host, sizeof host, MEMCPY_H2D));
    CHECK(aclrtMemcpy(go[1], sizeof host2, host2, sizeof host2, MEMCPY_H2D));
    const uint64_t ws_cap = (uint64_t)32 << 20; /* the A2/A3 backward asks for 16 MiB and more */
    void *ws = NULL;
    CHECK(aclrtMalloc(&ws, ws_cap, MALLOC_HUGE_FIRST));

    /* ---- one-shot: everything per call */
    double t0 = now_us();
    for (long i = 0; i < iters; i++) {
        aclTensor *t_go, *t_gi;
        aclIntArray *a_out, *a_in;
        create_args(go[0], gi[0], 0, &t_go, &t_gi, &a_out, &a_in);
        uint64_t need = 0;
        aclOpExecutor *ex = NULL;
        CHECK(aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(t_go, a_out, a_in, 0.0, 0.0, 0.0, t_gi, &need,
                                                                  &ex));
        if (need > ws_cap) die("workspace size", (long)need);
        CHECK(aclnnUpsampleNearestExact3dBackward(need ? ws : NULL, need, ex, stream));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclDestroyIntArray(a_in));
        CHECK(aclDestroyIntArray(a_out));
        CHECK(aclDestroyTensor(t_gi));
        CHECK(aclDestroyTensor(t_go));
    }
    double oneshot = (now_us() - t0) / (double)iters;
    expect_sum(gi[0], 36.0f, "oneshot");

    /* ---- one-shot on descriptors made once */
    {
        aclTensor *k_go, *k_gi;
        aclIntArray *k_out, *k_in;
        create_args(go[0], gi[0], 0, &k_go, &k_gi, &k_out, &k_in);
        t0 = now_us();
        for (long i = 0; i < iters; i++) {
            uint64_t need = 0;
            aclOpExecutor *ex = NULL;
            CHECK(aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(k_go, k_out, k_in, 0.0, 0.0, 0.0, k_gi, &need,
                                                                      &ex));
            if (need > ws_cap) die("workspace size", (long)need);
            CHECK(aclnnUpsampleNearestExact3dBackward(need ? ws : NULL, need, ex, stream));
            CHECK(aclrtSynchronizeStream(stream));
        }
        CHECK(aclDestroyIntArray(k_in));
        CHECK(aclDestroyIntArray(k_out));
        CHECK(aclDestroyTensor(k_gi));
        CHECK(aclDestroyTensor(k_go));
    }
    double oneshot_kept = (now_us() - t0) / (double)iters;
    expect_sum(gi[0], 36.0f, "oneshot_kept");

    /* ---- plans: phase 1 once, repeatable executor */
    aclTensor *t_go, *t_gi;
    aclIntArray *a_out, *a_in;
    create_args(go[0], gi[0], 1, &t_go, &t_gi, &a_out, &a_in);
    uint64_t need = 0;
    aclOpExecutor *ex = NULL;
    CHECK(aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(t_go, a_out, a_in, 0.0, 0.0, 0.0, t_gi, &need, &ex));
    CHECK(aclSetAclOpExecutorRepeatable(ex));
    if (need > ws_cap) die("workspace size", (long)need);
    void *wsp = need ? ws : NULL;

    t0 = now_us();
    for (long i = 0; i < iters; i++) {
        CHECK(aclnnUpsampleNearestExact3dBackward(wsp, need, ex, stream));
        CHECK(aclrtSynchronizeStream(stream));
    }
    double plan = (now_us() - t0) / (double)iters;
    expect_sum(gi[0], 36.0f, "plan");

    t0 = now_us();
    for (long i = 0; i < iters; i++) {
        int k = (int)((i + 1) & 1);   /* starts on pair 1: the address changes every call */
        CHECK(aclSetInputTensorAddr(ex, 0, t_go, go[k]));
        CHECK(aclSetOutputTensorAddr(ex, 0, t_gi, gi[k]));
        CHECK(aclnnUpsampleNearestExact3dBackward(wsp, need, ex, stream));
        CHECK(aclrtSynchronizeStream(stream));
    }
    double plan_addr = (now_us() - t0) / (double)iters;
    expect_sum(gi[1], 72.0f, "plan_addr");   /* the first call wrote pair 1 */

    CHECK(aclDestroyAclOpExecutor(ex));
    CHECK(aclDestroyIntArray(a_in));
    CHECK(aclDestroyIntArray(a_out));
    CHECK(aclDestroyTensor(t_gi));
    CHECK(aclDestroyTensor(t_go));
    CHECK(aclrtFree(ws));
    for (int k = 0; k < 2; k++) {
        CHECK(aclrtFree(gi[k]));
        CHECK(aclrtFree(go[k]));
    }
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("{\"iterations\": %ld, \"oneshot_us\": %.4f, \"oneshot_kept_us\": %.4f, \"plan_us\": %.4f, "
           "\"plan_addr_us\": %.4f}\n", iters, oneshot, oneshot_kept, plan, plan_addr);
    return 0;
}
