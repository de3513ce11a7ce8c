/*
 * runtime.c - simulated CANN runtime (built as libascendcl.so, or libacl_rt.so for the variant
 * tree): init/finalize, the thread-local recent-error message, devices, contexts, streams with
 * task queues run by a worker thread each, events, device/host memory, plus the simulator's own
 * accounting, fault injection
 * and internal helpers used by libnnopbase and the operator library.
 *
 * Prototypes, codes and enum values: /work/shared/cann-abi.md §1.1, §2, §3.  Where the notes do
 * not fix a behaviour, the simulator is stricter than hardware (unknown handles, host pointers
 * passed as device memory, double frees, frees of memory still used by queued work are all
 * reported with a code and a message); nothing here aborts on bad input.
 */
#define _GNU_SOURCE
#include "cannsim.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CANNSIM_VERSION_TEXT "cannsim 0.1 (CPU simulator of CANN runtime/nnopbase/aclnn)"
#define SIM_CANN_VERSION "8.5.0-cannsim"
#define MSG_LEN 1024
#define FILL_LIMIT (16u << 20) /* new device memory is filled with 0xFF up to this many bytes */
#define DEVICE_ALIGN 64
#define LOW_ADDR 65536u /* host pointers below this are rejected instead of dereferenced */

/* ====================================================================== lock */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv; /* initialised in the constructor (monotonic clock) */

CANNSIM_API void cannsim_lock(void) { pthread_mutex_lock(&g_mu); }
CANNSIM_API void cannsim_unlock(void) { pthread_mutex_unlock(&g_mu); }

/* ====================================================================== recent error */
static _Thread_local char tl_pending[MSG_LEN];
static _Thread_local int tl_has_pending;
static _Thread_local char tl_returned[MSG_LEN];

static void set_errorv(const char *fmt, va_list ap) {
    vsnprintf(tl_pending, sizeof tl_pending, fmt, ap);
    tl_has_pending = 1;
}

CANNSIM_API int cannsim_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_errorv(fmt, ap);
    va_end(ap);
    return code;
}

/* The pending message of the calling thread, or NULL (does not clear it). */
CANNSIM_API const char *cannsim_peek_error(void) { return tl_has_pending ? tl_pending : NULL; }

/* ====================================================================== call counts, faults */
static const char *const k_names[] = {
    /* runtime */
    "aclInit", "aclFinalize", "aclFinalizeReference", "aclGetRecentErrMsg", "aclrtSetDevice",
    "aclrtResetDevice", "aclrtResetDeviceForce", "aclrtGetDevice", "aclrtGetDeviceCount",
    "aclrtGetSocName", "aclrtGetRunMode", "aclrtSynchronizeDevice", "aclrtCreateContext",
    "aclrtDestroyContext", "aclrtSetCurrentContext", "aclrtGetCurrentContext", "aclrtCreateStream",
    "aclrtDestroyStream", "aclrtSynchronizeStream", "aclrtSynchronizeStreamWithTimeout", "aclrtMalloc",
    "aclrtMallocAlign32", "aclrtFree", "aclrtMallocHost", "aclrtFreeHost", "aclrtMemcpy",
    "aclrtMemcpyAsync", "aclrtMemset", "aclrtMemsetAsync", "aclrtGetMemInfo", "aclrtCreateEvent",
    "aclrtCreateEventWithFlag", "aclrtRecordEvent", "aclrtSynchronizeEvent",
    "aclrtSynchronizeEventWithTimeout", "aclrtEventElapsedTime", "aclrtDestroyEvent", "aclrtGetVersion",
    "aclsysGetCANNVersion", "aclsysGetVersionStr",
    /* nnopbase */
    "aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray", "aclDestroyIntArray", "aclGetViewShape",
    "aclGetStorageShape", "aclGetViewStrides", "aclGetViewOffset", "aclGetFormat", "aclGetDataType",
    "aclGetIntArraySize", "aclSetAclOpExecutorRepeatable", "aclDestroyAclOpExecutor",
    "aclSetInputTensorAddr", "aclSetOutputTensorAddr", "aclSetTensorAddr", "aclSetDynamicInputTensorAddr",
    "aclSetDynamicOutputTensorAddr", "aclSetRawTensorAddr", "aclGetRawTensorAddr", "aclnnInit",
    "aclnnFinalize",
    /* operator library */
    "aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize", "aclnnUpsampleNearestExact3dBackward",
    "aclnnUpsampleNearestExact3dGetWorkspaceSize", "aclnnUpsampleNearestExact3d",
    "aclnnUpsampleNearest3dBackwardGetWorkspaceSize", "aclnnUpsampleNearest3dBackward",
};
#define N_NAMES (sizeof k_names / sizeof k_names[0])
static uint64_t g_calls[N_NAMES];

static int name_index(const char *func) {
    if (!func) return -1;
    for (size_t i = 0; i < N_NAMES; i++)
        if (strcmp(k_names[i], func) == 0) return (int)i;
    return -1;
}

/* cannsim_enter is called with string literals of the three libraries, whose addresses never change:
   cache name -> index by pointer (direct-mapped; the caller holds g_mu) so that every simulated call
   does not scan k_names with strcmp. */
#define NAME_CACHE 512
static const char *g_name_ptr[NAME_CACHE];
static int g_name_idx[NAME_CACHE];

static int literal_index(const char *func) {
    size_t h = ((uintptr_t)func >> 3) & (NAME_CACHE - 1);
    if (g_name_ptr[h] == func && func) return g_name_idx[h];
    int idx = name_index(func);
    if (idx >= 0) {
        g_name_ptr[h] = func;
        g_name_idx[h] = idx;
    }
    return idx;
}

typedef struct {
    int func;        /* index into k_names */
    uint64_t nth;    /* 1-based call number; 0 = every call */
    int code;
    uint64_t seen;   /* calls counted since the spec was set */
} fault_t;
#define MAX_FAULTS 32
static fault_t g_faults[MAX_FAULTS];
static int g_nfaults;

/* Parses spec into out; returns the count, or -1 with a reason in why. */
static int parse_faults(const char *spec, fault_t *out, char *why, size_t whylen) {
    int n = 0;
    if (!spec) return 0;
    const char *p = spec;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[160];
        if (len >= sizeof item) {
            snprintf(why, whylen, "entry too long");
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        p += len;
        /* trim */
        char *s = item;
        while (*s == ' ' || *s == '\t') s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
        char *c1 = strchr(s, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || !c2 || strchr(c2 + 1, ':')) {
            snprintf(why, whylen, "entry '%s' is not func:nth:code", s);
            return -1;
        }
        *c1 = 0;
        *c2 = 0;
        int fi = name_index(s);
        if (fi < 0) {
            snprintf(why, whylen, "'%s' is not a function exported by the simulator", s);
            return -1;
        }
        char *endp;
        errno = 0;
        unsigned long long nth = strtoull(c1 + 1, &endp, 10);
        if (errno || endp == c1 + 1 || *endp || c1[1] == '-') {
            snprintf(why, whylen, "call number '%s' of %s is not a non-negative integer", c1 + 1, s);
            return -1;
        }
        errno = 0;
        long code = strtol(c2 + 1, &endp, 10);
        if (errno || endp == c2 + 1 || *endp || code == 0 || code < INT32_MIN || code > INT32_MAX) {
            snprintf(why, whylen, "code '%s' of %s is not a non-zero integer", c2 + 1, s);
            return -1;
        }
        if (n >= MAX_FAULTS) {
            snprintf(why, whylen, "more than %d entries", MAX_FAULTS);
            return -1;
        }
        out[n].func = fi;
        out[n].nth = nth;
        out[n].code = (int)code;
        out[n].seen = 0;
        n++;
    }
    return n;
}

static int fault_exempt(int idx) {
    const char *f = k_names[idx];
    return strcmp(f, "aclGetRecentErrMsg") == 0 || strcmp(f, "aclrtGetSocName") == 0;
}

CANNSIM_API int cannsim_enter(const char *func) {
    int code = 0;
    pthread_mutex_lock(&g_mu);
    int idx = literal_index(func);
    if (idx >= 0) {
        g_calls[idx]++;
        if (!fault_exempt(idx)) {
            for (int i = 0; i < g_nfaults; i++) {
                if (g_faults[i].func != idx) continue;
                g_faults[i].seen++;
                if (!code && (g_faults[i].nth == 0 || g_faults[i].seen == g_faults[i].nth)) code = g_faults[i].code;
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (code) cannsim_fail(code, "%s: injected fault (code %d) by CANN_SIM_FAULT", func, code);
    return code;
}

CANNSIM_API int cannsimSetFault(const char *spec) {
    fault_t tmp[MAX_FAULTS];
    char why[256] = "";
    int n = parse_faults(spec, tmp, why, sizeof why);
    if (n < 0) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "cannsimSetFault: malformed fault spec '%s': %s", spec, why);
    pthread_mutex_lock(&g_mu);
    memcpy(g_faults, tmp, sizeof(fault_t) * (size_t)n);
    g_nfaults = n;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

CANNSIM_API int64_t cannsimCallCount(const char *func) {
    pthread_mutex_lock(&g_mu);
    int idx = name_index(func);
    int64_t v = idx < 0 ? -1 : (int64_t)g_calls[idx];
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* Every call of an exported API function starts with this. */
#define ENTER(name)                         \
    do {                                    \
        int enter_code_ = cannsim_enter(name); \
        if (enter_code_) return enter_code_; \
    } while (0)

/* ====================================================================== pointer sets */
typedef struct {
    uintptr_t *slot;
    size_t cap; /* power of two or 0 */
    size_t n;
} pset;

static size_t ph(uintptr_t k, size_t cap) {
    uint64_t x = (uint64_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int pset_has(const pset *s, const void *p) {
    if (!p || !s->cap) return 0;
    uintptr_t k = (uintptr_t)p;
    for (size_t i = ph(k, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slot[i] == k) return 1;
        if (s->slot[i] == 0) return 0;
    }
}

static int pset_grow(pset *s) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    uintptr_t *ns = calloc(nc, sizeof *ns);
    if (!ns) return -1;
    for (size_t j = 0; j < s->cap; j++) {
        uintptr_t k = s->slot[j];
        if (!k) continue;
        size_t i = ph(k, nc);
        while (ns[i]) i = (i + 1) & (nc - 1);
        ns[i] = k;
    }
    free(s->slot);
    s->slot = ns;
    s->cap = nc;
    return 0;
}

static int pset_add(pset *s, const void *p) {
    if (!p) return -1;
    if ((s->n + 1) * 2 > s->cap && pset_grow(s)) return -1;
    uintptr_t k = (uintptr_t)p;
    size_t i = ph(k, s->cap);
    while (s->slot[i]) {
        if (s->slot[i] == k) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->slot[i] = k;
    s->n++;
    return 0;
}

static int pset_del(pset *s, const void *p) {
    if (!p || !s->cap) return 0;
    uintptr_t k = (uintptr_t)p;
    size_t m = s->cap - 1, i = ph(k, s->cap);
    while (s->slot[i] != k) {
        if (!s->slot[i]) return 0;
        i = (i + 1) & m;
    }
    /* backward-shift deletion */
    size_t j = i;
    for (;;) {
        s->slot[i] = 0;
        for (;;) {
            j = (j + 1) & m;
            if (!s->slot[j]) {
                s->n--;
                return 1;
            }
            size_t home = ph(s->slot[j], s->cap);
            /* can slot j move to i? only if home is not cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        s->slot[i] = s->slot[j];
        i = j;
    }
}

static void pset_clear(pset *s) {
    free(s->slot);
    s->slot = NULL;
    s->cap = s->n = 0;
}

/* kinds visible to the other libraries and to cannsimLiveHandles */
static pset g_tensors, g_int_arrays, g_executors;
static pset g_streams;      /* user streams */
static pset g_events;
static pset g_user_ctx;     /* user-created contexts */
static pset g_all_ctx;      /* user and default contexts */
static pset g_all_streams;  /* user and default streams, not yet dying */

static pset *kind_set(const char *kind) {
    if (!kind) return NULL;
    if (!strcmp(kind, "tensor")) return &g_tensors;
    if (!strcmp(kind, "int_array")) return &g_int_arrays;
    if (!strcmp(kind, "executor")) return &g_executors;
    return NULL;
}

CANNSIM_API int cannsim_handle_add(const char *kind, const void *p) {
    pset *s = kind_set(kind);
    return s ? pset_add(s, p) : -1;
}
CANNSIM_API int cannsim_handle_remove(const char *kind, const void *p) {
    pset *s = kind_set(kind);
    return s ? pset_del(s, p) : 0;
}
CANNSIM_API int cannsim_handle_live(const char *kind, const void *p) {
    pset *s = kind_set(kind);
    return s ? pset_has(s, p) : 0;
}

CANNSIM_API int cannsim_dtype_size(int dtype) {
    switch (dtype) {
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: return 8;
    default: return 0;
    }
}

/* ====================================================================== allocation tables */
typedef struct {
    uintptr_t base;
    uint64_t size;
    int dev;
} alloc_t;
typedef struct {
    alloc_t *v;
    size_t n, cap;
} atable;
static atable g_dmem, g_hmem; /* device memory, pinned host memory */

/* index of the last entry with base <= p, or -1 */
static ptrdiff_t at_floor(const atable *t, uintptr_t p) {
    ptrdiff_t lo = 0, hi = (ptrdiff_t)t->n - 1, r = -1;
    while (lo <= hi) {
        ptrdiff_t mid = (lo + hi) / 2;
        if (t->v[mid].base <= p) {
            r = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return r;
}
static alloc_t *at_containing(const atable *t, uintptr_t p) {
    ptrdiff_t i = at_floor(t, p);
    if (i < 0) return NULL;
    alloc_t *a = &t->v[i];
    return p - a->base < a->size ? a : NULL;
}
static alloc_t *at_exact(const atable *t, uintptr_t p) {
    ptrdiff_t i = at_floor(t, p);
    return (i >= 0 && t->v[i].base == p) ? &t->v[i] : NULL;
}
static int at_insert(atable *t, alloc_t a) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        alloc_t *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv) return -1;
        t->v = nv;
        t->cap = nc;
    }
    ptrdiff_t i = at_floor(t, a.base) + 1;
    memmove(&t->v[i + 1], &t->v[i], (t->n - (size_t)i) * sizeof *t->v);
    t->v[i] = a;
    t->n++;
    return 0;
}
static void at_remove(atable *t, alloc_t *a) {
    size_t i = (size_t)(a - t->v);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* Does [p, p+n) lie inside one live device allocation? (lock held) */
static int device_range(const void *p, uint64_t n, const alloc_t **out, char *why, size_t whylen) {
    uintptr_t u = (uintptr_t)p;
    alloc_t *a = at_containing(&g_dmem, u);
    if (!a) {
        if (at_containing(&g_hmem, u))
            snprintf(why, whylen, "%p is pinned host memory (aclrtMallocHost), not device memory", p);
        else
            snprintf(why, whylen, "%p is not device memory (not inside any live aclrtMalloc allocation)", p);
        return 0;
    }
    uint64_t off = u - a->base;
    if (n > a->size - off) {
        snprintf(why, whylen,
                 "range [%p, +%" PRIu64 " bytes) runs past the end of its device allocation %p of %" PRIu64
                 " bytes by %" PRIu64 " bytes",
                 p, n, (void *)a->base, a->size, n - (a->size - off));
        return 0;
    }
    if (out) *out = a;
    return 1;
}

CANNSIM_API int cannsim_device_range(const void *p, uint64_t n, const void **base, char *why, size_t whylen) {
    const alloc_t *a = NULL;
    if (!device_range(p, n, &a, why, whylen)) return 0;
    if (base) *base = (const void *)a->base;
    return 1;
}

/* ====================================================================== devices, contexts, streams, events */
typedef struct task task_t;
typedef struct stream stream_t;

typedef struct ctx {
    uint64_t serial;
    int dev;
    int is_default;
    stream_t *defstream;
} ctx_t;

typedef struct {
    uintptr_t lo;  /* [lo, lo+n) */
    uint64_t n;
    int write;     /* the task writes it (else it only reads it) */
} task_ref;

struct task {
    task_t *next;
    uint64_t seq;
    const char *origin;    /* the API function that queued it */
    cannsim_task_fn run;
    void (*destroy)(void *);
    void *arg;
    int64_t delay_left_ns; /* simulated device time still to spend before running */
    int nrefs;
    task_ref refs[4];      /* memory the task uses, until it completes */
};

/* Each stream's work runs on its own worker thread (started at the first task), in queue order, as
   on a device: an API call that queues work returns before it ran.  The queue is protected by g_mu;
   the worker releases the lock while it runs a task. */
struct stream {
    uint64_t serial;
    int dev;
    int is_default;
    int dying;   /* removed from the registries; being destroyed */
    int dead;    /* destroyed; freed when pins reach 0 */
    int draining; /* the head task is being run (by the worker, or inline when no worker could start) */
    int pins;
    task_t *head, *tail;
    uint64_t next_seq;
    uint64_t release_upto; /* deferred mode: tasks with seq <= this may run */
    int err;
    char errmsg[512];
    pthread_t worker;
    int has_worker;   /* a worker thread exists (started, not yet joined) */
    int joining;      /* a thread is joining the worker (the lock is released meanwhile) */
    int stop;         /* the worker exits once nothing is runnable */
    atomic_int abort; /* process exit: the worker leaves the rest of the queue */
    pthread_cond_t wake; /* the worker waits here for work */
    stream_t *gnext, *gprev; /* list of all not-yet-freed streams */
};

typedef struct {
    uint64_t serial;
    int dev;
    int state; /* 0 never recorded, 1 record pending, 2 completed */
    uint32_t flag;
    stream_t *stream;
    uint64_t stream_serial;
    uint64_t seq;
    uint64_t gen;
    struct timespec ts;
} event_t;

typedef struct {
    int refs;
    ctx_t *def;
    uint64_t used;
} device_t;

static int g_inited;
static uint64_t g_init_refs;      /* aclInit calls not yet matched by a finalize (RT acl.cpp aclInitRefCount) */
static uint64_t g_refs_cut;       /* references other users still held when the last plain aclFinalize ran */
static uint64_t g_refs_cut_total; /* the same, summed over the process (for the exit report) */
static uint64_t g_used_after_cut; /* calls refused because another user had finalized under their caller */
static int g_ndev;
static uint64_t g_cap;
static device_t *g_dev;
static uint64_t g_serial;
static stream_t *g_stream_list;
/* When queued work runs.  ASYNC (default): on the stream's worker, after the call that queued it
   returned, as a device does.  SYNC (CANN_SIM_SYNC=1, for debugging): the call that queues work waits
   until it completed.  DEFER (CANN_SIM_DEFER=1): only once a synchronisation asks for it, so that
   every read, free or overwrite before a sync is caught. */
enum { MODE_ASYNC = 0, MODE_DEFER = 1, MODE_SYNC = 2 };
static atomic_int g_mode;
static atomic_int g_delay_ms;

static const char *const k_kinds[] = {"device_buffer", "host_buffer", "tensor", "int_array",
                                      "executor", "stream", "event", "context", "device_ref"};
#define N_KINDS (sizeof k_kinds / sizeof k_kinds[0])
static int64_t g_released_k[N_KINDS];

static _Thread_local ctx_t *tl_ctx;
static _Thread_local uint64_t tl_ctx_serial;

static ctx_t *current_ctx(void) {
    if (tl_ctx && pset_has(&g_all_ctx, tl_ctx) && tl_ctx->serial == tl_ctx_serial) return tl_ctx;
    tl_ctx = NULL;
    return NULL;
}
static void set_current(ctx_t *c) {
    tl_ctx = c;
    tl_ctx_serial = c ? c->serial : 0;
}

static stream_t *stream_new(int dev, int is_default) {
    stream_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->serial = ++g_serial;
    s->dev = dev;
    s->is_default = is_default;
    s->next_seq = 1;
    if (pthread_cond_init(&s->wake, NULL)) {
        free(s);
        return NULL;
    }
    if (pset_add(&g_all_streams, s)) {
        pthread_cond_destroy(&s->wake);
        free(s);
        return NULL;
    }
    s->gnext = g_stream_list;
    if (g_stream_list) g_stream_list->gprev = s;
    g_stream_list = s;
    return s;
}

static void task_free(task_t *t) {
    if (t->destroy) t->destroy(t->arg);
    free(t);
}

static void stream_unlink_free(stream_t *s) {
    if (s->gprev) s->gprev->gnext = s->gnext;
    else if (g_stream_list == s) g_stream_list = s->gnext;
    if (s->gnext) s->gnext->gprev = s->gprev;
    while (s->head) {
        task_t *t = s->head;
        s->head = t->next;
        task_free(t);
    }
    pthread_cond_destroy(&s->wake);
    free(s);
}

static void stream_unpin(stream_t *s) {
    s->pins--;
    if (s->dead && s->pins == 0 && !s->draining && !s->has_worker) stream_unlink_free(s);
}

static int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec; }
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ts_ns(&t);
}
static struct timespec ns_ts(int64_t ns) {
    struct timespec t = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    return t;
}

/* Spend the task's simulated device time, then run it.  Returns -1 if the stream was aborted (process
   exit) first, otherwise the task's result.  Called without the lock. */
static int run_task(stream_t *s, task_t *t, char *msg, size_t msglen) {
    while (t->delay_left_ns > 0) {
        if (atomic_load(&s->abort)) return -1;
        int64_t now = now_ns();
        int64_t step = t->delay_left_ns < 1000000 ? t->delay_left_ns : 1000000; /* 1 ms slices */
        struct timespec st = ns_ts(step);
        nanosleep(&st, NULL);
        int64_t spent = now_ns() - now;
        t->delay_left_ns -= spent > 0 ? spent : step;
    }
    return t->run ? t->run(t->arg, msg, msglen) : 0;
}

/* Run the stream's head task (lock held on entry and exit; released while it runs), then remove it
   and record its error.  An aborted task stays queued. */
static void step_locked(stream_t *s) {
    task_t *t = s->head;
    s->draining = 1;
    pthread_mutex_unlock(&g_mu);
    char msg[400];
    msg[0] = 0;
    int r = run_task(s, t, msg, sizeof msg);
    pthread_mutex_lock(&g_mu);
    s->draining = 0;
    if (r != -1) {
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        if (r != 0 && s->err == 0) {
            s->err = r;
            snprintf(s->errmsg, sizeof s->errmsg, "%s", msg[0] ? msg : "task failed");
        }
        task_free(t);
    }
    pthread_cond_broadcast(&g_cv);
}

static int runnable(const stream_t *s, const task_t *t) {
    return t && !s->draining && !atomic_load(&s->abort) &&
           (atomic_load(&g_mode) != MODE_DEFER || t->seq <= s->release_upto);
}

static void *worker_main(void *arg) {
    stream_t *s = arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        if (runnable(s, s->head)) step_locked(s);
        else if (s->stop) break;
        else pthread_cond_wait(&s->wake, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static atomic_int g_workers; /* worker threads started and not yet joined */

/* Start the stream's worker if it has none (lock held).  Returns 0, or -1 if no thread could start. */
static int ensure_worker(stream_t *s) {
    if (s->has_worker) return 0;
    if (s->dead) return -1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals are for the application's threads */
    s->stop = 0;
    int e = pthread_create(&s->worker, NULL, worker_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) return -1;
    s->has_worker = 1;
    atomic_fetch_add(&g_workers, 1);
    return 0;
}

/* Stop and join the stream's worker (lock held on entry and exit; released while joining).  The
   worker first runs whatever is runnable.  The caller keeps s alive (not dead). */
static void stop_worker_locked(stream_t *s) {
    while (s->joining) pthread_cond_wait(&g_cv, &g_mu);
    if (!s->has_worker) return;
    s->joining = 1;
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_t th = s->worker;
    pthread_mutex_unlock(&g_mu);
    pthread_join(th, NULL);
    pthread_mutex_lock(&g_mu);
    s->has_worker = 0;
    s->joining = 0;
    s->stop = 0;
    atomic_fetch_sub(&g_workers, 1);
    pthread_cond_broadcast(&g_cv);
}

/* Stop and join every worker (lock held; released while joining). */
static void stop_all_workers_locked(void) {
    for (;;) {
        stream_t *s = g_stream_list;
        while (s && !s->has_worker) s = s->gnext;
        if (!s) return;
        stop_worker_locked(s);
    }
}

/* Let the stream's tasks with seq <= upto run, and wait until they completed (lock held on entry
   and exit; released while waiting).  Returns 0, or 1 if the deadline (absolute monotonic ns, <0 =
   none) passed first: the work then stays queued and goes on running. */
static int drain_locked(stream_t *s, uint64_t upto, int64_t deadline) {
    int rc = 0;
    s->pins++;
    if (upto > s->next_seq - 1) upto = s->next_seq - 1;
    if (upto > s->release_upto) s->release_upto = upto;
    if (s->has_worker) pthread_cond_signal(&s->wake);
    while (s->head && s->head->seq <= upto) {
        if (!s->has_worker && ensure_worker(s)) { /* no thread could start: run the task here */
            if (!s->draining && !atomic_load(&s->abort)) {
                step_locked(s);
                continue;
            }
        } else if (s->has_worker) {
            pthread_cond_signal(&s->wake);
        }
        if (deadline >= 0) {
            struct timespec dl = ns_ts(deadline);
            if (pthread_cond_timedwait(&g_cv, &g_mu, &dl) == ETIMEDOUT) {
                if (s->head && s->head->seq <= upto) rc = 1;
                break;
            }
        } else {
            pthread_cond_wait(&g_cv, &g_mu);
        }
    }
    stream_unpin(s);
    return rc;
}

/* Start a task just queued with sequence number seq, as the mode says (lock held; in synchronous
   mode released while waiting for it). */
static void start_locked(stream_t *s, uint64_t seq) {
    int mode = atomic_load(&g_mode);
    if (mode == MODE_DEFER) return; /* it runs when a synchronisation asks for it */
    if (mode == MODE_SYNC || ensure_worker(s)) drain_locked(s, seq, -1);
    else pthread_cond_signal(&s->wake);
}

static task_t *enqueue_locked(stream_t *s, const char *origin, cannsim_task_fn run, void (*destroy)(void *),
                              void *arg, const task_ref *refs, int nrefs, int64_t delay_ns) {
    task_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->seq = s->next_seq++;
    t->origin = origin;
    t->run = run;
    t->destroy = destroy;
    t->arg = arg;
    t->delay_left_ns = delay_ns;
    for (int i = 0; i < nrefs && i < 4; i++)
        if (refs[i].lo && refs[i].n) t->refs[t->nrefs++] = refs[i];
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    return t;
}

/* A task still queued (or running) on any stream but `except` that uses [p, p+n) (only a task that
   writes it, when writers_only); *on receives its stream.  Lock held. */
static const task_t *queued_use_except(const stream_t *except, const void *p, uint64_t n, int writers_only,
                                       const stream_t **on) {
    uintptr_t lo = (uintptr_t)p;
    if (!n) return NULL;
    for (stream_t *s = g_stream_list; s; s = s->gnext)
        if (s != except)
            for (task_t *t = s->head; t; t = t->next)
            for (int i = 0; i < t->nrefs; i++) {
                const task_ref *r = &t->refs[i];
                if ((r->write || !writers_only) && r->lo < lo + n && lo < r->lo + r->n) {
                    *on = s;
                    return t;
                }
            }
    return NULL;
}

static const task_t *queued_use(const void *p, uint64_t n, int writers_only, const stream_t **on) {
    return queued_use_except(NULL, p, n, writers_only, on);
}

static void stream_name(const stream_t *s, char *buf, size_t len) {
    if (s->is_default) snprintf(buf, len, "the default stream of device %d", s->dev);
    else snprintf(buf, len, "stream %p", (void *)s);
}

/* Work about to be queued on s that uses memory that work queued on another stream writes (or, when
   it writes, uses): the two are not ordered (CANN orders streams with aclrtStreamWaitEvent, which the
   simulator does not model), so a device would race them.  Returns 0 or CANNSIM_ERR_QUEUED_WORK with
   the message set.  Lock held. */
static int cross_stream_race(const char *func, const stream_t *s, const task_ref *refs, int nrefs) {
    for (int i = 0; i < nrefs; i++) {
        if (!refs[i].lo) continue;
        const stream_t *on;
        const task_t *t = queued_use_except(s, (const void *)refs[i].lo, refs[i].n, !refs[i].write, &on);
        if (!t) continue;
        char mine[96], theirs[96];
        stream_name(s, mine, sizeof mine);
        stream_name(on, theirs, sizeof theirs);
        return cannsim_fail(CANNSIM_ERR_QUEUED_WORK,
                            "%s: work for %s %s %p, which work queued on %s (%s) %s and has not completed. Rule: "
                            "work on two streams is not ordered (order it with an event, or synchronize the other "
                            "stream first); a device would race the two silently (simulator-only code %d)",
                            func, mine, refs[i].write ? "writes" : "reads", (void *)refs[i].lo, theirs, t->origin,
                            refs[i].write ? "uses" : "writes", CANNSIM_ERR_QUEUED_WORK);
    }
    return 0;
}

/* The simulator-only error for a host-side memory call that would race queued work (lock held).
   doing: "freeing", "overwriting" or "reading" p. */
static int queued_work_error(const char *func, const void *p, const char *doing, const task_t *t,
                             const stream_t *s) {
    char where[96];
    stream_name(s, where, sizeof where);
    return cannsim_fail(CANNSIM_ERR_QUEUED_WORK,
                        "%s: %s %p races work queued on %s (%s) that %s it and has not completed. Rule: %s "
                        "does not wait for stream work, so memory that queued work uses must not be freed or "
                        "overwritten, nor memory that it writes read, until that work completed: synchronize "
                        "the stream first. A device would corrupt the memory silently (simulator-only code %d)",
                        func, doing, p, where, t->origin, doing[0] == 'r' ? "writes" : "uses", func,
                        CANNSIM_ERR_QUEUED_WORK);
}

/* Destroy a stream that is no longer reachable through the registries (lock held; released while
   its queued work completes and its worker is joined). */
static void stream_destroy_locked(stream_t *s) {
    s->dying = 1;
    pset_del(&g_all_streams, s);
    drain_locked(s, UINT64_MAX, -1);
    stop_worker_locked(s);
    s->dead = 1;
    if (s->pins == 0 && !s->draining && !s->has_worker) stream_unlink_free(s);
}

static ctx_t *ctx_new(int dev, int is_default) {
    ctx_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->serial = ++g_serial;
    c->dev = dev;
    c->is_default = is_default;
    c->defstream = stream_new(dev, 1);
    if (!c->defstream || pset_add(&g_all_ctx, c)) {
        if (c->defstream) {
            pset_del(&g_all_streams, c->defstream);
            c->defstream->dead = 1;
            stream_unlink_free(c->defstream);
        }
        free(c);
        return NULL;
    }
    return c;
}

/* ctx must already be removed from g_user_ctx (if user); lock held */
static void ctx_destroy_locked(ctx_t *c) {
    pset_del(&g_all_ctx, c);
    if (tl_ctx == c) set_current(NULL);
    stream_t *s = c->defstream;
    c->defstream = NULL;
    if (s) stream_destroy_locked(s);
    free(c);
}

/* Common prologue for runtime calls that need aclInit and a current context (lock held). */
static int not_initialized(const char *func, int code);
static ctx_t *need_ctx(const char *func, int *code) {
    if (!g_inited) {
        *code = not_initialized(func, ACL_ERROR_UNINITIALIZE);
        return NULL;
    }
    ctx_t *c = current_ctx();
    if (!c) {
        *code = cannsim_fail(ACL_ERROR_RT_CONTEXT_NULL,
                             "%s: no current context on this thread (call aclrtSetDevice or "
                             "aclrtSetCurrentContext on this thread first)",
                             func);
        return NULL;
    }
    return c;
}

/* 100001 for a call while ACL is not initialized (lock held).  When a plain aclFinalize tore the runtime
   down while other aclInit references were still held, the caller is one of those other users: the
   message says so, the first such call is also printed on stderr, and the exit report counts them. */
static int not_initialized(const char *func, int code) {
    if (!g_refs_cut && code == ACL_ERROR_UNINITIALIZE)
        return cannsim_fail(code, "%s: ACL is not initialized (call aclInit first)", func);
    if (!g_refs_cut)
        return cannsim_fail(code,
                            "%s: ACL is not initialized (aclInit was not called, or every aclInit reference was "
                            "already finalized)",
                            func);
    if (g_used_after_cut++ == 0)
        fprintf(stderr,
                "cannsim: %s: the runtime was used after aclFinalize tore it down under %" PRIu64
                " other aclInit reference(s) of this process\n",
                func, g_refs_cut);
    return cannsim_fail(code,
                        "%s: ACL is not initialized: a plain aclFinalize tore the runtime down while %" PRIu64
                        " other aclInit reference(s) in this process were still held (each user should pair its "
                        "aclInit with aclFinalizeReference, or not finalize a runtime whose aclInit returned "
                        "100002)",
                        func, g_refs_cut);
}

static int need_init(const char *func) {
    if (!g_inited) return not_initialized(func, ACL_ERROR_UNINITIALIZE);
    return 0;
}

/* Resolve a stream argument (NULL = current context's default stream); lock held. */
static stream_t *resolve_stream(const char *func, aclrtStream stream, ctx_t *c, int *code) {
    if (!stream) return c->defstream;
    stream_t *s = (stream_t *)stream;
    if (!pset_has(&g_streams, s) || s->dying) {
        *code = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                             "%s: stream %p is not a live stream (never created by aclrtCreateStream, or "
                             "already destroyed)",
                             func, stream);
        return NULL;
    }
    if (s->dev != c->dev) {
        *code = cannsim_fail(ACL_ERROR_RT_STREAM_CONTEXT,
                             "%s: stream %p belongs to device %d but the current context is on device %d", func,
                             stream, s->dev, c->dev);
        return NULL;
    }
    return s;
}

/* ====================================================================== env helpers */
static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    uint64_t mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1ULL << 10; break;
        case 'm': case 'M': mul = 1ULL << 20; break;
        case 'g': case 'G': mul = 1ULL << 30; break;
        case 't': case 'T': mul = 1ULL << 40; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return -1;
    }
    if (v == 0 || v > UINT64_MAX / mul) return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

/* ====================================================================== init / finalize */
CANNSIM_API aclError aclInit(const char *configPath) {
    ENTER("aclInit");
    if (configPath && *configPath) {
        FILE *f = fopen(configPath, "r");
        if (!f)
            return cannsim_fail(100003 /* ACL_ERROR_INVALID_FILE */, "aclInit: cannot read config file '%s': %s",
                                configPath, strerror(errno));
        fclose(f);
    }
    int ndev = 2;
    uint64_t cap = 16ULL << 30;
    const char *v = getenv("CANN_SIM_DEVICE_COUNT");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > 1024)
            return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                                "aclInit: CANN_SIM_DEVICE_COUNT='%s' is not an integer between 1 and 1024", v);
        ndev = (int)n;
    }
    v = getenv("CANN_SIM_MEM_BYTES");
    if (v && *v && parse_bytes(v, &cap))
        return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                            "aclInit: CANN_SIM_MEM_BYTES='%s' is not a positive byte count (e.g. 1073741824 or 1G)", v);
    pthread_mutex_lock(&g_mu);
    if (g_inited) {
        uint64_t refs = ++g_init_refs;
        pthread_mutex_unlock(&g_mu);
        return cannsim_fail(ACL_ERROR_REPEAT_INITIALIZE,
                            "aclInit: ACL is already initialized in this process; the reference count is now %" PRIu64
                            " (pair each aclInit, this one included, with one aclFinalizeReference)",
                            refs);
    }
    device_t *d = calloc((size_t)ndev, sizeof *d);
    if (!d) {
        pthread_mutex_unlock(&g_mu);
        return cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclInit: out of host memory");
    }
    g_dev = d;
    g_ndev = ndev;
    g_cap = cap;
    g_inited = 1;
    g_init_refs = 1;
    g_refs_cut = 0;
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

static int kind_index(const char *k) {
    for (size_t i = 0; i < N_KINDS; i++)
        if (!strcmp(k_kinds[i], k)) return (int)i;
    return -1;
}

/* aclFinalize (by_reference 0) sets the reference count to 0 and tears down at once; aclFinalizeReference
   (by_reference 1) decrements it and tears down only at 0 (RT src/acl/aclrt_impl/acl.cpp). */
static aclError finalize_impl(const char *func, int by_reference, uint64_t *refCount) {
    pthread_mutex_lock(&g_mu);
    if (!g_inited) {
        if (refCount) *refCount = 0;
        int rc = not_initialized(func, ACL_ERROR_REPEAT_FINALIZE);
        pthread_mutex_unlock(&g_mu);
        return rc;
    }
    if (by_reference && g_init_refs > 1) {
        uint64_t left = --g_init_refs;
        if (refCount) *refCount = left;
        pthread_mutex_unlock(&g_mu);
        return ACL_SUCCESS;
    }
    if (!by_reference && g_init_refs > 1) { /* other users' references go with it */
        g_refs_cut = g_init_refs - 1;
        g_refs_cut_total += g_refs_cut;
    }
    g_init_refs = 0;
    if (refCount) *refCount = 0;
    g_inited = 0; /* refuse new work from now on */
    /* finish all queued work */
    for (;;) {
        stream_t *todo = NULL;
        for (stream_t *s = g_stream_list; s; s = s->gnext)
            if (!s->dead && s->head) {
                todo = s;
                break;
            }
        if (!todo) break;
        drain_locked(todo, UINT64_MAX, -1);
    }
    stop_all_workers_locked();
    /* user streams */
    for (size_t i = 0; i < g_streams.cap; i++) {
        stream_t *s = (stream_t *)g_streams.slot[i];
        if (!s) continue;
        g_released_k[kind_index("stream")]++;
        s->dying = 1;
        s->dead = 1;
        pset_del(&g_all_streams, s);
    }
    pset_clear(&g_streams);
    /* events */
    for (size_t i = 0; i < g_events.cap; i++)
        if (g_events.slot[i]) {
            free((void *)g_events.slot[i]);
            g_released_k[kind_index("event")]++;
        }
    pset_clear(&g_events);
    /* contexts (user and default) */
    for (size_t i = 0; i < g_all_ctx.cap; i++) {
        ctx_t *c = (ctx_t *)g_all_ctx.slot[i];
        if (!c) continue;
        if (pset_has(&g_user_ctx, c)) g_released_k[kind_index("context")]++;
        if (c->defstream) {
            c->defstream->dying = 1;
            c->defstream->dead = 1;
            pset_del(&g_all_streams, c->defstream);
        }
        free(c);
    }
    pset_clear(&g_all_ctx);
    pset_clear(&g_user_ctx);
    set_current(NULL);
    /* free dead streams nobody waits on */
    for (stream_t *s = g_stream_list, *nx; s; s = nx) {
        nx = s->gnext;
        if (s->dead && s->pins == 0 && !s->draining) stream_unlink_free(s);
    }
    for (int i = 0; i < g_ndev; i++) g_released_k[kind_index("device_ref")] += g_dev[i].refs;
    free(g_dev);
    g_dev = NULL;
    g_ndev = 0;
    /* memory */
    for (size_t i = 0; i < g_dmem.n; i++) free((void *)g_dmem.v[i].base);
    g_released_k[kind_index("device_buffer")] += (int64_t)g_dmem.n;
    g_dmem.n = 0;
    for (size_t i = 0; i < g_hmem.n; i++) free((void *)g_hmem.v[i].base);
    g_released_k[kind_index("host_buffer")] += (int64_t)g_hmem.n;
    g_hmem.n = 0;
    pthread_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

CANNSIM_API aclError aclFinalize(void) {
    ENTER("aclFinalize");
    return finalize_impl("aclFinalize", 0, NULL);
}

/* Releases without aclFinalizeReference are modelled by a build of this file with
   -DCANNSIM_NO_FINALIZE_REFERENCE (build.py finalize_reference=False): the symbol is then absent, so
   dlsym does not find it, as on those releases. */
#ifndef CANNSIM_NO_FINALIZE_REFERENCE
CANNSIM_API aclError aclFinalizeReference(uint64_t *refCount) {
    ENTER("aclFinalizeReference");
    return finalize_impl("aclFinalizeReference", 1, refCount);
}
#endif

CANNSIM_API const char *aclGetRecentErrMsg(void) {
    cannsim_enter("aclGetRecentErrMsg"); /* counted; exempt from faults */
    if (!tl_has_pending) return NULL;
    memcpy(tl_returned, tl_pending, sizeof tl_returned);
    tl_has_pending = 0;
    tl_pending[0] = 0;
    return tl_returned;
}

/* ====================================================================== devices */
static int check_dev(const char *func, int32_t dev) {
    if (dev < 0 || dev >= g_ndev)
        return cannsim_fail(ACL_ERROR_RT_INVALID_DEVICEID,
                            "%s: device id %d is invalid (the simulator has %d devices, ids 0..%d; "
                            "see CANN_SIM_DEVICE_COUNT)",
                            func, dev, g_ndev, g_ndev - 1);
    return 0;
}

CANNSIM_API aclError aclrtSetDevice(int32_t deviceId) {
    ENTER("aclrtSetDevice");
    int rc;
    pthread_mutex_lock(&g_mu);
    if ((rc = need_init("aclrtSetDevice")) || (rc = check_dev("aclrtSetDevice", deviceId))) goto out;
    device_t *d = &g_dev[deviceId];
    if (!d->def) {
        d->def = ctx_new(deviceId, 1);
        if (!d->def) {
            rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtSetDevice: out of host memory");
            goto out;
        }
    }
    d->refs++;
    set_current(d->def);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static aclError reset_impl(const char *func, int32_t deviceId, int force) {
    int rc;
    pthread_mutex_lock(&g_mu);
    if ((rc = need_init(func)) || (rc = check_dev(func, deviceId))) goto out;
    device_t *d = &g_dev[deviceId];
    if (d->refs == 0) {
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "%s: device %d has no outstanding aclrtSetDevice (reset without a matching set)", func,
                          deviceId);
        goto out;
    }
    d->refs = force ? 0 : d->refs - 1;
    /* the default context (and so the thread's current one) goes only with the last reference */
    if (d->refs == 0 && d->def) {
        ctx_t *def = d->def;
        d->def = NULL;
        ctx_destroy_locked(def);
    }
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtResetDevice(int32_t deviceId) {
    ENTER("aclrtResetDevice");
    return reset_impl("aclrtResetDevice", deviceId, 0);
}

CANNSIM_API aclError aclrtResetDeviceForce(int32_t deviceId) {
    ENTER("aclrtResetDeviceForce");
    return reset_impl("aclrtResetDeviceForce", deviceId, 1);
}

CANNSIM_API aclError aclrtGetDevice(int32_t *deviceId) {
    ENTER("aclrtGetDevice");
    if (!deviceId) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtGetDevice", &rc);
    if (c) *deviceId = c->dev;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtGetDeviceCount(uint32_t *count) {
    ENTER("aclrtGetDeviceCount");
    if (!count) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    pthread_mutex_lock(&g_mu);
    int rc = need_init("aclrtGetDeviceCount");
    if (!rc) *count = (uint32_t)g_ndev;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* The SoC the simulator answers for: "CANN-Simulator" (an Atlas A2/A3 for the operator), or CANN_SIM_SOC's value
   (read on every call), e.g. an Ascend950 name, so that the op takes CANN's Ascend950 branches (cann-abi.md §5). */
CANNSIM_API const char *cannsim_soc_name(void) {
    const char *v = getenv("CANN_SIM_SOC");
    return v && *v ? v : "CANN-Simulator";
}

CANNSIM_API const char *aclrtGetSocName(void) {
    cannsim_enter("aclrtGetSocName");
    return cannsim_soc_name();
}

CANNSIM_API const char *cannsimVersion(void) { return CANNSIM_VERSION_TEXT; }

CANNSIM_API aclError aclrtGetRunMode(int *runMode) {
    ENTER("aclrtGetRunMode");
    if (!runMode) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
    *runMode = ACL_HOST;
    return 0;
}

CANNSIM_API aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion) {
    ENTER("aclrtGetVersion");
    if (!majorVersion || !minorVersion || !patchVersion)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: an output pointer is NULL");
    *majorVersion = 1;
    *minorVersion = 17;
    *patchVersion = 0;
    return 0;
}

CANNSIM_API aclError aclsysGetCANNVersion(int name, aclCANNPackageVersion *version) {
    ENTER("aclsysGetCANNVersion");
    if (!version) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: version is NULL");
    if (name < ACL_PKG_NAME_CANN || name > ACL_PKG_NAME_DRIVER)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: package name %d is not in 0..7", name);
    memset(version, 0, sizeof *version);
    snprintf(version->version, sizeof version->version, "%s", SIM_CANN_VERSION);
    snprintf(version->majorVersion, sizeof version->majorVersion, "8");
    snprintf(version->minorVersion, sizeof version->minorVersion, "5");
    snprintf(version->releaseVersion, sizeof version->releaseVersion, "0");
    snprintf(version->patchVersion, sizeof version->patchVersion, "cannsim");
    return 0;
}

CANNSIM_API aclError aclsysGetVersionStr(char *pkgName, char *versionStr) {
    ENTER("aclsysGetVersionStr");
    if (!pkgName || !versionStr)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclsysGetVersionStr: %s is NULL",
                            pkgName ? "versionStr" : "pkgName");
    static const char *const known[] = {"runtime", "toolkit", "cann", "opp", "opp_kernel", "compiler"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (!strcmp(pkgName, known[i])) {
            snprintf(versionStr, ACL_PKG_VERSION_MAX_SIZE, "%s", SIM_CANN_VERSION);
            return 0;
        }
    }
    return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                        "aclsysGetVersionStr: package '%.64s' is not installed in the simulator "
                        "(known: runtime, toolkit, cann, opp, opp_kernel, compiler)",
                        pkgName);
}

/* ====================================================================== contexts */
CANNSIM_API aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    ENTER("aclrtCreateContext");
    if (!context) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is NULL");
    int rc;
    pthread_mutex_lock(&g_mu);
    if ((rc = need_init("aclrtCreateContext")) || (rc = check_dev("aclrtCreateContext", deviceId))) goto out;
    ctx_t *c = ctx_new(deviceId, 0);
    if (!c || pset_add(&g_user_ctx, c)) {
        if (c) ctx_destroy_locked(c);
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtCreateContext: out of host memory");
        goto out;
    }
    set_current(c);
    *context = c;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtDestroyContext(aclrtContext context) {
    ENTER("aclrtDestroyContext");
    if (!context) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext: context is NULL");
    int rc;
    pthread_mutex_lock(&g_mu);
    if ((rc = need_init("aclrtDestroyContext"))) goto out;
    if (!pset_has(&g_user_ctx, context)) {
        if (pset_has(&g_all_ctx, context))
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtDestroyContext: %p is the default context of device %d; release it with "
                              "aclrtResetDevice",
                              context, ((ctx_t *)context)->dev);
        else
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtDestroyContext: %p is not a live context (never created by aclrtCreateContext, "
                              "or already destroyed)",
                              context);
        goto out;
    }
    pset_del(&g_user_ctx, context);
    ctx_destroy_locked((ctx_t *)context);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtSetCurrentContext(aclrtContext context) {
    ENTER("aclrtSetCurrentContext");
    if (!context) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: context is NULL");
    int rc;
    pthread_mutex_lock(&g_mu);
    if ((rc = need_init("aclrtSetCurrentContext"))) goto out;
    if (!pset_has(&g_all_ctx, context)) {
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "aclrtSetCurrentContext: %p is not a live context (destroyed, its device was reset, or "
                          "never created)",
                          context);
        goto out;
    }
    set_current((ctx_t *)context);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtGetCurrentContext(aclrtContext *context) {
    ENTER("aclrtGetCurrentContext");
    if (!context) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtGetCurrentContext", &rc);
    if (c) *context = c;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== streams */
CANNSIM_API aclError aclrtCreateStream(aclrtStream *stream) {
    ENTER("aclrtCreateStream");
    if (!stream) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtCreateStream", &rc);
    if (c) {
        stream_t *s = stream_new(c->dev, 0);
        if (!s || pset_add(&g_streams, s)) {
            if (s) stream_destroy_locked(s);
            rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtCreateStream: out of host memory");
        } else {
            *stream = s;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtDestroyStream(aclrtStream stream) {
    ENTER("aclrtDestroyStream");
    if (!stream)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                            "aclrtDestroyStream: stream is NULL (the default stream cannot be destroyed)");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtDestroyStream", &rc);
    if (c) {
        stream_t *s = (stream_t *)stream;
        if (!pset_has(&g_streams, s)) {
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtDestroyStream: stream %p is not a live stream (never created, or already "
                              "destroyed)",
                              stream);
        } else {
            pset_del(&g_streams, s);
            stream_destroy_locked(s); /* runs the pending work first; a task error is dropped */
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Report (and clear) a stream's sticky task error; lock held. */
static int stream_error(const char *func, stream_t *s, aclrtStream handle) {
    if (!s->err) return 0;
    int code = s->err;
    s->err = 0;
    return cannsim_fail(code, "%s: a task on stream %p failed: %s", func, handle, s->errmsg);
}

/* The deadline (now_ns() clock) of a synchronisation timeout in ms: -1 = wait forever (deadline -1),
   >= 0 = that many ms from now; anything else is rejected.  Returns 0 or ACL_ERROR_INVALID_PARAM. */
static int timeout_deadline(const char *func, int32_t timeout, int64_t *deadline) {
    *deadline = -1;
    if (timeout < -1)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: timeout %d ms is invalid (-1 = wait forever, >= 0 ms)",
                            func, timeout);
    if (timeout >= 0) *deadline = now_ns() + (int64_t)timeout * 1000000LL;
    return 0;
}

static int sync_stream_impl(const char *func, aclrtStream stream, int32_t timeout) {
    int64_t deadline;
    int rc = timeout_deadline(func, timeout, &deadline);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream(func, stream, c, &rc);
    if (!s) goto out;
    if (drain_locked(s, UINT64_MAX, deadline)) {
        rc = cannsim_fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                          "%s: stream %p still has pending work after %d ms (the remaining work stays queued)", func,
                          stream, timeout);
        goto out;
    }
    rc = stream_error(func, s, stream);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtSynchronizeStream(aclrtStream stream) {
    ENTER("aclrtSynchronizeStream");
    return sync_stream_impl("aclrtSynchronizeStream", stream, -1);
}

CANNSIM_API aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    ENTER("aclrtSynchronizeStreamWithTimeout");
    return sync_stream_impl("aclrtSynchronizeStreamWithTimeout", stream, timeout);
}

CANNSIM_API aclError aclrtSynchronizeDevice(void) {
    ENTER("aclrtSynchronizeDevice");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtSynchronizeDevice", &rc);
    if (!c) goto out;
    int dev = c->dev;
    /* pin the device's streams, then drain them one by one */
    size_t n = 0, cap = 16;
    stream_t **v = malloc(cap * sizeof *v);
    if (!v) {
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtSynchronizeDevice: out of host memory");
        goto out;
    }
    for (stream_t *s = g_stream_list; s; s = s->gnext) {
        if (s->dev != dev || s->dying || s->dead) continue;
        if (n == cap) {
            stream_t **nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) break;
            v = nv;
            cap *= 2;
        }
        s->pins++;
        v[n++] = s;
    }
    for (size_t i = 0; i < n; i++) {
        drain_locked(v[i], UINT64_MAX, -1);
        if (!rc) rc = stream_error("aclrtSynchronizeDevice", v[i], v[i]->is_default ? NULL : v[i]);
        else v[i]->err = 0;
    }
    for (size_t i = 0; i < n; i++) stream_unpin(v[i]);
    free(v);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== task launching (for the op library) */
CANNSIM_API int cannsim_launch(const char *func, aclrtStream stream, cannsim_task_fn run, void (*destroy)(void *),
                               void *arg, const cannsim_ref *refs, int nrefs) {
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream(func, stream, c, &rc);
    if (!s) goto out;
    task_ref tr[4];
    int n = 0;
    for (int i = 0; i < nrefs && n < 4; i++) {
        if (!refs[i].p || !refs[i].n) continue;
        uintptr_t p = (uintptr_t)refs[i].p;
        if (!at_containing(&g_dmem, p) && !at_containing(&g_hmem, p)) {
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "%s: buffer %p was freed while the launch was being prepared", func, refs[i].p);
            goto out;
        }
        tr[n++] = (task_ref){p, refs[i].n, refs[i].write};
    }
    if ((rc = cross_stream_race(func, s, tr, n))) goto out;
    task_t *t = enqueue_locked(s, func, run, destroy, arg, tr, n, (int64_t)atomic_load(&g_delay_ms) * 1000000LL);
    if (!t) {
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: out of host memory", func);
        goto out;
    }
    start_locked(s, t->seq);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== memory */
static int check_policy(const char *func, int policy) {
    unsigned p = (unsigned)policy;
    unsigned flags = p & ~0xFFu;
    if ((p & 0xFFu) > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P ||
        (flags & ~(unsigned)(ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH |
                             ACL_MEM_ACCESS_USER_SPACE_READONLY)))
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: malloc policy 0x%x is not a valid aclrtMemMallocPolicy",
                            func, p);
    return 0;
}

static aclError malloc_impl(const char *func, void **devPtr, size_t size, int policy) {
    if (!devPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", func);
    if (size == 0) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: size is 0", func);
    int rc = check_policy(func, policy);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (!c) goto out;
    device_t *d = &g_dev[c->dev];
    if (size > g_cap - d->used) {
        rc = cannsim_fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                          "%s: out of simulated device memory on device %d: requested %zu bytes, %" PRIu64
                          " of %" PRIu64 " bytes in use (capacity set by CANN_SIM_MEM_BYTES)",
                          func, c->dev, size, d->used, g_cap);
        goto out;
    }
    void *p = NULL;
    if (posix_memalign(&p, DEVICE_ALIGN, size) || !p) {
        rc = cannsim_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: the host could not provide %zu bytes for device memory",
                          func, size);
        goto out;
    }
    alloc_t a = {(uintptr_t)p, size, c->dev};
    if (at_insert(&g_dmem, a)) {
        free(p);
        rc = cannsim_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", func);
        goto out;
    }
    memset(p, 0xFF, size < FILL_LIMIT ? size : FILL_LIMIT); /* NaN pattern: uninitialised reads show */
    d->used += size;
    *devPtr = p;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtMalloc(void **devPtr, size_t size, int policy) {
    ENTER("aclrtMalloc");
    return malloc_impl("aclrtMalloc", devPtr, size, policy);
}

CANNSIM_API aclError aclrtMallocAlign32(void **devPtr, size_t size, int policy) {
    ENTER("aclrtMallocAlign32");
    return malloc_impl("aclrtMallocAlign32", devPtr, size, policy);
}

CANNSIM_API aclError aclrtFree(void *devPtr) {
    ENTER("aclrtFree");
    if (!devPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtFree", &rc);
    if (!c) goto out;
    alloc_t *a = at_exact(&g_dmem, (uintptr_t)devPtr);
    if (!a) {
        alloc_t *in = at_containing(&g_dmem, (uintptr_t)devPtr);
        if (in)
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtFree: %p is inside device allocation %p (offset %" PRIuPTR
                              "), not its start; pass the pointer aclrtMalloc returned",
                              devPtr, (void *)in->base, (uintptr_t)devPtr - in->base);
        else if (at_exact(&g_hmem, (uintptr_t)devPtr))
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtFree: %p is pinned host memory; free it with aclrtFreeHost", devPtr);
        else
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtFree: %p is not a live device allocation (never returned by aclrtMalloc, or "
                              "already freed)",
                              devPtr);
        goto out;
    }
    if (a->dev != c->dev) { /* device memory belongs to its device's contexts (cann-abi.md §8.3) */
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "aclrtFree: %p belongs to device %d but the current context is on device %d (make a "
                          "context of device %d current first)",
                          devPtr, a->dev, c->dev, a->dev);
        goto out;
    }
    const stream_t *on;
    const task_t *user = queued_use((void *)a->base, a->size, 0, &on);
    if (user) {
        rc = queued_work_error("aclrtFree", devPtr, "freeing", user, on);
        goto out;
    }
    if (a->dev >= 0 && a->dev < g_ndev) g_dev[a->dev].used -= a->size;
    void *p = (void *)a->base;
    at_remove(&g_dmem, a);
    free(p);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtMallocHost(void **hostPtr, size_t size) {
    ENTER("aclrtMallocHost");
    if (!hostPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
    if (size == 0) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size is 0");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMallocHost", &rc);
    if (!c) goto out;
    void *p = NULL;
    if (posix_memalign(&p, DEVICE_ALIGN, size) || !p) {
        rc = cannsim_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMallocHost: cannot allocate %zu bytes", size);
        goto out;
    }
    alloc_t a = {(uintptr_t)p, size, -1};
    if (at_insert(&g_hmem, a)) {
        free(p);
        rc = cannsim_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMallocHost: out of host memory");
        goto out;
    }
    *hostPtr = p;
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtFreeHost(void *hostPtr) {
    ENTER("aclrtFreeHost");
    if (!hostPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtFreeHost", &rc);
    if (!c) goto out;
    alloc_t *a = at_exact(&g_hmem, (uintptr_t)hostPtr);
    if (!a) {
        if (at_exact(&g_dmem, (uintptr_t)hostPtr))
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtFreeHost: %p is device memory; free it with aclrtFree",
                              hostPtr);
        else
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "aclrtFreeHost: %p is not a live aclrtMallocHost buffer (never allocated, or already "
                              "freed)",
                              hostPtr);
        goto out;
    }
    const stream_t *on;
    const task_t *user = queued_use((void *)a->base, a->size, 0, &on);
    if (user) {
        rc = queued_work_error("aclrtFreeHost", hostPtr, "freeing", user, on);
        goto out;
    }
    void *p = (void *)a->base;
    at_remove(&g_hmem, a);
    free(p);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static const char *kind_name(int kind) {
    switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST: return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE: return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    default: return "?";
    }
}

/* The host side of a copy (lock held): it must not be device memory, and a pinned host buffer must
   hold the whole range.  Stores the pinned buffer's base (or 0) in *ref. */
static int check_host_side(const char *func, const char *role, const void *p, size_t count, int kind,
                           uintptr_t *ref) {
    if (at_containing(&g_dmem, (uintptr_t)p))
        return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: %s %p is device memory but the kind is %s (host %s)",
                            func, role, p, kind_name(kind), role);
    alloc_t *h = at_containing(&g_hmem, (uintptr_t)p);
    if (h) {
        if (count > h->size - ((uintptr_t)p - h->base))
            return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: %s range runs past the end of pinned host buffer %p",
                                func, role, (void *)h->base);
        *ref = h->base;
    }
    return 0;
}

/* Validate a copy (lock held).  On success the bases of tracked buffers are stored in refs[0..1]. */
static int check_copy(const char *func, void *dst, size_t destMax, const void *src, size_t count, int kind,
                      uintptr_t refs[2], int *src_pinned) {
    char why[300];
    refs[0] = refs[1] = 0;
    *src_pinned = 0;
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_DEVICE_TO_DEVICE)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                            "%s: memcpy kind %d is not supported by the simulator (use 0=HOST_TO_HOST, "
                            "1=HOST_TO_DEVICE, 2=DEVICE_TO_HOST, 3=DEVICE_TO_DEVICE)",
                            func, kind);
    if (!dst || !src) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", func, dst ? "src" : "dst");
    if ((uintptr_t)dst < LOW_ADDR || (uintptr_t)src < LOW_ADDR)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: %s %p is not a valid address", func,
                            (uintptr_t)dst < LOW_ADDR ? "dst" : "src", (uintptr_t)dst < LOW_ADDR ? dst : (void *)src);
    if (destMax < count)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is larger than destMax %zu", func, count, destMax);
    int dst_dev = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    int src_dev = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    const alloc_t *a;
    if (dst_dev) {
        if (!device_range(dst, count, &a, why, sizeof why))
            return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: destination of %s: %s", func, kind_name(kind), why);
        if (!device_range(dst, destMax, &a, why, sizeof why))
            return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: destMax %zu is larger than the destination buffer: %s",
                                func, destMax, why);
        refs[0] = a->base;
    } else {
        int rc = check_host_side(func, "destination", dst, count, kind, &refs[0]);
        if (rc) return rc;
    }
    if (src_dev) {
        if (!device_range(src, count, &a, why, sizeof why))
            return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: source of %s: %s", func, kind_name(kind), why);
        refs[1] = a->base;
    } else {
        int rc = check_host_side(func, "source", src, count, kind, &refs[1]);
        if (rc) return rc;
        *src_pinned = refs[1] != 0;
    }
    return 0;
}

CANNSIM_API aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind) {
    ENTER("aclrtMemcpy");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemcpy", &rc);
    if (!c) goto out;
    uintptr_t refs[2];
    int pinned;
    if ((rc = check_copy("aclrtMemcpy", dst, destMax, src, count, kind, refs, &pinned))) goto out;
    const stream_t *on;
    const task_t *user = queued_use(dst, count, 0, &on);
    if (user) {
        rc = queued_work_error("aclrtMemcpy", dst, "overwriting", user, on);
        goto out;
    }
    if ((user = queued_use(src, count, 1, &on))) {
        rc = queued_work_error("aclrtMemcpy", src, "reading", user, on);
        goto out;
    }
    if (count) memmove(dst, src, count); /* under the lock: nobody can free the buffers meanwhile */
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
    void *owned; /* snapshot of a pageable host source */
} copy_task_t;

static int copy_task_run(void *arg, char *msg, size_t msglen) {
    (void)msg;
    (void)msglen;
    copy_task_t *t = arg;
    memmove(t->dst, t->src, t->n);
    return 0;
}
static void copy_task_free(void *arg) {
    copy_task_t *t = arg;
    free(t->owned);
    free(t);
}

CANNSIM_API aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, int kind,
                                      aclrtStream stream) {
    ENTER("aclrtMemcpyAsync");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemcpyAsync", &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream("aclrtMemcpyAsync", stream, c, &rc);
    if (!s) goto out;
    uintptr_t refs[2];
    int pinned;
    if ((rc = check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind, refs, &pinned))) goto out;
    copy_task_t *ct = calloc(1, sizeof *ct);
    if (!ct) {
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtMemcpyAsync: out of host memory");
        goto out;
    }
    ct->dst = dst;
    ct->src = src;
    ct->n = count;
    int host_src = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_HOST_TO_HOST;
    if (host_src && !pinned && count) {
        /* a pageable host source is staged now (the caller may reuse or free it on return) */
        ct->owned = malloc(count);
        if (!ct->owned) {
            free(ct);
            rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtMemcpyAsync: out of host memory");
            goto out;
        }
        memcpy(ct->owned, src, count);
        ct->src = ct->owned;
    }
    task_ref tr[2] = {{(uintptr_t)dst, count, 1}, {ct->owned ? 0 : (uintptr_t)src, count, 0}};
    if ((rc = cross_stream_race("aclrtMemcpyAsync", s, tr, 2))) {
        copy_task_free(ct);
        goto out;
    }
    task_t *t = enqueue_locked(s, "aclrtMemcpyAsync", copy_task_run, copy_task_free, ct, tr, 2, 0);
    if (!t) {
        copy_task_free(ct);
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtMemcpyAsync: out of host memory");
        goto out;
    }
    start_locked(s, t->seq);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static int check_memset(const char *func, void *devPtr, size_t maxCount, size_t count, uintptr_t *base) {
    char why[300];
    const alloc_t *a;
    if (!devPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", func);
    if (maxCount < count)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is larger than maxCount %zu", func, count, maxCount);
    if (!device_range(devPtr, count ? count : 1, &a, why, sizeof why))
        return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: %s", func, why);
    if (!device_range(devPtr, maxCount, &a, why, sizeof why))
        return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: maxCount %zu is larger than the buffer: %s", func, maxCount,
                            why);
    *base = a->base;
    return 0;
}

CANNSIM_API aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    ENTER("aclrtMemset");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemset", &rc);
    if (!c) goto out;
    uintptr_t base;
    if ((rc = check_memset("aclrtMemset", devPtr, maxCount, count, &base))) goto out;
    const stream_t *on;
    const task_t *user = queued_use(devPtr, count, 0, &on);
    if (user) {
        rc = queued_work_error("aclrtMemset", devPtr, "overwriting", user, on);
        goto out;
    }
    memset(devPtr, (unsigned char)value, count);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

typedef struct {
    void *dst;
    int value;
    size_t n;
} set_task_t;
static int set_task_run(void *arg, char *msg, size_t msglen) {
    (void)msg;
    (void)msglen;
    set_task_t *t = arg;
    memset(t->dst, (unsigned char)t->value, t->n);
    return 0;
}

CANNSIM_API aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    ENTER("aclrtMemsetAsync");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemsetAsync", &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream("aclrtMemsetAsync", stream, c, &rc);
    if (!s) goto out;
    uintptr_t base;
    if ((rc = check_memset("aclrtMemsetAsync", devPtr, maxCount, count, &base))) goto out;
    set_task_t *st = malloc(sizeof *st);
    task_t *t = NULL;
    if (st) {
        st->dst = devPtr;
        st->value = value;
        st->n = count;
        task_ref tr = {(uintptr_t)devPtr, count, 1};
        if ((rc = cross_stream_race("aclrtMemsetAsync", s, &tr, 1))) {
            free(st);
            goto out;
        }
        t = enqueue_locked(s, "aclrtMemsetAsync", set_task_run, free, st, &tr, 1, 0);
    }
    if (!t) {
        free(st);
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtMemsetAsync: out of host memory");
        goto out;
    }
    start_locked(s, t->seq);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtGetMemInfo(int attr, size_t *freeBytes, size_t *total) {
    ENTER("aclrtGetMemInfo");
    if (!freeBytes || !total)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: %s is NULL", freeBytes ? "total" : "free");
    if (attr < 0 || attr > ACL_MEM_ATTR_MAX)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not a valid aclrtMemAttr (0..%d)",
                            attr, ACL_MEM_ATTR_MAX);
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtGetMemInfo", &rc);
    if (c) {
        *total = (size_t)g_cap;
        *freeBytes = (size_t)(g_cap - g_dev[c->dev].used);
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== events */
static aclError create_event_impl(const char *func, aclrtEvent *event, uint32_t flag) {
    if (!event) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", func);
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (c) {
        event_t *e = calloc(1, sizeof *e);
        if (!e || pset_add(&g_events, e)) {
            free(e);
            rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: out of host memory", func);
        } else {
            e->serial = ++g_serial;
            e->dev = c->dev;
            e->flag = flag;
            *event = e;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtCreateEvent(aclrtEvent *event) {
    ENTER("aclrtCreateEvent");
    return create_event_impl("aclrtCreateEvent", event, 0);
}

CANNSIM_API aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    ENTER("aclrtCreateEventWithFlag");
    return create_event_impl("aclrtCreateEventWithFlag", event, flag);
}

static event_t *live_event(const char *func, aclrtEvent ev, int *code) {
    if (!ev) {
        *code = cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", func);
        return NULL;
    }
    if (!pset_has(&g_events, ev)) {
        *code = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                             "%s: event %p is not a live event (never created, or already destroyed)", func, ev);
        return NULL;
    }
    return (event_t *)ev;
}

typedef struct {
    event_t *ev;
    uint64_t serial, gen;
} rec_task_t;

static int record_task_run(void *arg, char *msg, size_t msglen) {
    (void)msg;
    (void)msglen;
    rec_task_t *r = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&g_mu);
    if (pset_has(&g_events, r->ev) && r->ev->serial == r->serial && r->ev->gen == r->gen) {
        r->ev->ts = now;
        r->ev->state = 2;
    }
    pthread_mutex_unlock(&g_mu);
    return 0;
}

CANNSIM_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    ENTER("aclrtRecordEvent");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtRecordEvent", &rc);
    if (!c) goto out;
    event_t *e = live_event("aclrtRecordEvent", event, &rc);
    if (!e) goto out;
    stream_t *s = resolve_stream("aclrtRecordEvent", stream, c, &rc);
    if (!s) goto out;
    rec_task_t *r = malloc(sizeof *r);
    task_t *t = NULL;
    if (r) {
        r->ev = e;
        r->serial = e->serial;
        r->gen = ++e->gen;
        t = enqueue_locked(s, "aclrtRecordEvent", record_task_run, free, r, NULL, 0, 0);
    }
    if (!t) {
        free(r);
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtRecordEvent: out of host memory");
        goto out;
    }
    e->state = 1;
    e->stream = s;
    e->stream_serial = s->serial;
    e->seq = t->seq;
    start_locked(s, t->seq);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static aclError sync_event_impl(const char *func, aclrtEvent event, int32_t timeout) {
    int64_t deadline;
    int rc = timeout_deadline(func, timeout, &deadline);
    if (rc) return rc;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (!c) goto out;
    event_t *e = live_event(func, event, &rc);
    if (!e) goto out;
    if (e->state != 1) goto out; /* never recorded (nothing to wait for) or already complete */
    stream_t *s = e->stream;
    if (!pset_has(&g_all_streams, s) || s->serial != e->stream_serial) goto out;
    if (drain_locked(s, e->seq, deadline))
        rc = cannsim_fail(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "%s: event %p did not complete within %d ms", func, event,
                          timeout);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtSynchronizeEvent(aclrtEvent event) {
    ENTER("aclrtSynchronizeEvent");
    return sync_event_impl("aclrtSynchronizeEvent", event, -1);
}

CANNSIM_API aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    ENTER("aclrtSynchronizeEventWithTimeout");
    return sync_event_impl("aclrtSynchronizeEventWithTimeout", event, timeout);
}

CANNSIM_API aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    ENTER("aclrtEventElapsedTime");
    if (!ms) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtEventElapsedTime", &rc);
    if (!c) goto out;
    event_t *a = live_event("aclrtEventElapsedTime", startEvent, &rc);
    if (!a) goto out;
    event_t *b = live_event("aclrtEventElapsedTime", endEvent, &rc);
    if (!b) goto out;
    if (a->state != 2 || b->state != 2) {
        event_t *x = a->state != 2 ? a : b;
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "aclrtEventElapsedTime: %s event %p has %s (record it and synchronize its stream first)",
                          x == a ? "start" : "end", (void *)x, x->state == 0 ? "never been recorded" : "not completed yet");
        goto out;
    }
    if (a->stream != b->stream || a->stream_serial != b->stream_serial) { /* RT 07_event_management.md */
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "aclrtEventElapsedTime: start event %p was recorded on stream %p and end event %p on stream "
                          "%p: record both events on the same stream",
                          (void *)a, (void *)a->stream, (void *)b, (void *)b->stream);
        goto out;
    }
    *ms = (float)((double)(ts_ns(&b->ts) - ts_ns(&a->ts)) / 1e6);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtDestroyEvent(aclrtEvent event) {
    ENTER("aclrtDestroyEvent");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtDestroyEvent", &rc);
    if (!c) goto out;
    event_t *e = live_event("aclrtDestroyEvent", event, &rc);
    if (!e) goto out;
    pset_del(&g_events, e); /* a pending record task notices the event is gone */
    free(e);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ====================================================================== simulator controls and accounting */
/* Set when queued work runs (0 asynchronous, 1 deferred, 2 synchronous); returns the previous mode,
   or -1 (mode unchanged) for another value. */
CANNSIM_API int cannsimSetStreamMode(int mode) {
    if (mode != MODE_ASYNC && mode != MODE_DEFER && mode != MODE_SYNC) return -1;
    pthread_mutex_lock(&g_mu);
    int previous = atomic_exchange(&g_mode, mode);
    for (stream_t *s = g_stream_list; s; s = s->gnext) /* deferred work may have become runnable */
        if (s->has_worker) pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&g_mu);
    return previous;
}

/* Deferred mode on, or off (asynchronous); returns whether it was on. */
CANNSIM_API int cannsimSetDefer(int on) {
    return cannsimSetStreamMode(on ? MODE_DEFER : MODE_ASYNC) == MODE_DEFER;
}

/* Worker threads running now (one per stream that has queued work since it was created). */
CANNSIM_API int cannsimWorkerThreads(void) { return atomic_load(&g_workers); }

CANNSIM_API int cannsimSetDelay(int ms) {
    return atomic_exchange(&g_delay_ms, ms > 0 ? ms : 0);
}

static int64_t live_count_locked(int k) {
    switch (k) {
    case 0: return (int64_t)g_dmem.n;
    case 1: return (int64_t)g_hmem.n;
    case 2: return (int64_t)g_tensors.n;
    case 3: return (int64_t)g_int_arrays.n;
    case 4: return (int64_t)g_executors.n;
    case 5: return (int64_t)g_streams.n;
    case 6: return (int64_t)g_events.n;
    case 7: return (int64_t)g_user_ctx.n;
    case 8: {
        int64_t r = 0;
        for (int i = 0; i < g_ndev; i++) r += g_dev[i].refs;
        return r;
    }
    default: return -1;
    }
}

CANNSIM_API int64_t cannsimLiveHandles(const char *kind) {
    if (!kind) return -1;
    int k = kind_index(kind);
    if (k < 0) return -1;
    pthread_mutex_lock(&g_mu);
    int64_t v = live_count_locked(k);
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* ====================================================================== load / exit */
/* At exit: take the lock, or give up after about 200 ms rather than hang if another thread died
   holding it.  Returns whether it is held. */
static int lock_at_exit(void) {
    int locked = 0;
    for (int i = 0; i < 200 && !locked; i++) {
        if (pthread_mutex_trylock(&g_mu) == 0) locked = 1;
        else {
            struct timespec st = {0, 1000000};
            nanosleep(&st, NULL);
        }
    }
    return locked;
}

static void write_report(void) {
    const char *path = getenv("CANN_SIM_REPORT");
    if (!path || !*path) return;
    int locked = lock_at_exit();
    /* A device, FIFO or link at the path is written into, never replaced; a regular file is replaced
     * atomically from a temporary file created exclusively (mkstemp) beside it. */
    struct stat st;
    int direct = lstat(path, &st) == 0 && !S_ISREG(st.st_mode);
    char tmp[4096];
    FILE *f = NULL;
    if (direct) {
        f = fopen(path, "w");
    } else if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) < sizeof tmp) {
        int fd = mkstemp(tmp);
        if (fd >= 0 && (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "w")))) {
            close(fd);
            unlink(tmp);
        }
    }
    if (f) {
        fprintf(f, "{\n  \"simulator\": \"%s\",\n  \"pid\": %d,\n", CANNSIM_VERSION_TEXT, (int)getpid());
        fprintf(f, "  \"aclInit\": %" PRIu64 ",\n  \"aclFinalize\": %" PRIu64 ",\n", g_calls[name_index("aclInit")],
                g_calls[name_index("aclFinalize")]);
        fprintf(f, "  \"aclFinalizeReference\": %" PRIu64 ",\n", g_calls[name_index("aclFinalizeReference")]);
        fprintf(f, "  \"initialized_at_exit\": %s,\n", g_inited ? "true" : "false");
        fprintf(f, "  \"init_references_at_exit\": %" PRIu64 ",\n", g_init_refs);
        fprintf(f, "  \"references_torn_down_by_aclFinalize\": %" PRIu64 ",\n", g_refs_cut_total);
        fprintf(f, "  \"used_after_torn_down_under_them\": %" PRIu64 ",\n", g_used_after_cut);
        fprintf(f, "  \"live\": {");
        for (size_t k = 0; k < N_KINDS; k++)
            fprintf(f, "%s\"%s\": %" PRId64, k ? ", " : "", k_kinds[k], live_count_locked((int)k));
        fprintf(f, "},\n  \"released_by_finalize\": {");
        for (size_t k = 0; k < N_KINDS; k++)
            fprintf(f, "%s\"%s\": %" PRId64, k ? ", " : "", k_kinds[k], g_released_k[k]);
        fprintf(f, "},\n  \"calls\": {");
        for (size_t i = 0; i < N_NAMES; i++)
            fprintf(f, "%s\n    \"%s\": %" PRIu64, i ? "," : "", k_names[i], g_calls[i]);
        fprintf(f, "\n  }\n}\n");
        int closed = fclose(f) == 0;
        if (!direct && closed) rename(tmp, path);
        else if (!direct) unlink(tmp);
    }
    if (locked) pthread_mutex_unlock(&g_mu);
}

/* fork: the child has none of the parent's worker threads; a stream's worker starts again there when
   its work is next needed (the task a worker was running is run again from its start). */
static void init_cv(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
}
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void) {
    for (stream_t *s = g_stream_list; s; s = s->gnext) {
        s->has_worker = s->joining = s->stop = s->draining = 0;
        pthread_cond_init(&s->wake, NULL);
    }
    atomic_store(&g_workers, 0);
    init_cv();
    pthread_mutex_unlock(&g_mu);
}

/* At exit: stop every worker (a task still in its simulated delay is abandoned) and join it.  Gives
   up rather than hang if another thread holds the lock. */
static void stop_workers_at_exit(void) {
    int locked = lock_at_exit();
    if (!locked) return;
    for (stream_t *s = g_stream_list; s; s = s->gnext) atomic_store(&s->abort, 1);
    stop_all_workers_locked();
    pthread_mutex_unlock(&g_mu);
}

__attribute__((constructor)) static void cannsim_load(void) {
    init_cv();
    int defer = env_flag("CANN_SIM_DEFER"), sync = env_flag("CANN_SIM_SYNC");
    if (defer && sync) fprintf(stderr, "cannsim: CANN_SIM_DEFER and CANN_SIM_SYNC are both set; using CANN_SIM_DEFER\n");
    atomic_store(&g_mode, defer ? MODE_DEFER : sync ? MODE_SYNC : MODE_ASYNC);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    const char *d = getenv("CANN_SIM_DELAY_MS");
    if (d && *d) {
        char *end;
        long v = strtol(d, &end, 10);
        if (!*end && v >= 0 && v <= 3600000) atomic_store(&g_delay_ms, (int)v);
        else fprintf(stderr, "cannsim: ignoring CANN_SIM_DELAY_MS='%s' (not a number of milliseconds)\n", d);
    }
    const char *spec = getenv("CANN_SIM_FAULT");
    if (spec && *spec) {
        char why[256] = "";
        int n = parse_faults(spec, g_faults, why, sizeof why);
        if (n < 0) {
            g_nfaults = 0;
            fprintf(stderr, "cannsim: ignoring malformed CANN_SIM_FAULT='%s': %s\n", spec, why);
        } else {
            g_nfaults = n;
        }
    }
}

__attribute__((destructor)) static void cannsim_unload(void) {
    stop_workers_at_exit();
    write_report();
}
