/*
 * sim_core.c - the simulator's own machinery in the runtime library (libascendcl.so, or
 * libacl_rt.so): the global lock, the thread's recent error message, the registry of exported
 * function names with their call counters and fault injection (CANN_SIM_FAULT), the handle
 * registries and allocation tables, live-handle accounting, the simulated SoC name and version,
 * and the exit report.
 *
 * The operators' entry points come from their files' CANNSIM_REGISTER_OP lines, collected by
 * build.py, so that no operator is named in the runtime.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ====================================================================== lock */
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv; /* initialised in the constructor (monotonic clock) */

CANNSIM_API void cannsim_lock(void) { pthread_mutex_lock(&g_mu); }
CANNSIM_API void cannsim_unlock(void) { pthread_mutex_unlock(&g_mu); }

/* ====================================================================== recent error */
static _Thread_local char tl_pending[MSG_LEN];
static _Thread_local int tl_has_pending;
/* the text aclGetRecentErrMsg returns: kept across reads, each new message put in front of it (RT acl.cpp
   aclGetRecentErrMsgImpl: host message + "\n" + aclRecentErrMsg).  CANN's string is unbounded; here, a new
   message that does not fit in front of the old text replaces it. */
static _Thread_local char tl_returned[4 * MSG_LEN];

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

const char *cannsim_take_error(void) {
    if (tl_has_pending) {
        size_t n = strlen(tl_pending), old = strlen(tl_returned);
        if (old && n + 1 + old < sizeof tl_returned) {
            memmove(tl_returned + n + 1, tl_returned, old + 1);
            tl_returned[n] = '\n';
            memcpy(tl_returned, tl_pending, n);
        } else {
            memcpy(tl_returned, tl_pending, n + 1);
        }
        tl_has_pending = 0;
        tl_pending[0] = 0;
    }
    return tl_returned[0] ? tl_returned : NULL;
}

/* ====================================================================== function registry, call counts, faults */
/* The exported functions whose calls are counted (cannsimCallCount) and can be made to fail (CANN_SIM_FAULT):
   the runtime's and nnopbase's, then the operators' entry points.  Each operator file declares its entry points
   with CANNSIM_REGISTER_OP (opapi.h); build.py collects those declarations into cannsim_op_names.h, so that the
   runtime knows them from its load on (a binding loads the operator library only at its first operator call,
   and may set faults or read counters before).  No operator is named here. */
#ifdef CANNSIM_HAVE_OP_NAMES
#include "cannsim_op_names.h" /* generated: #define CANNSIM_OP_NAMES "name", "name", ... */
#endif
#ifndef CANNSIM_OP_NAMES
#define CANNSIM_OP_NAMES
#endif
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
    /* the runtime functions torch_npu needs (rt_torch_npu.c) */
    "aclrtCreateStreamWithConfig", "aclrtSetStreamFailureMode", "aclrtSetDeviceSatMode",
    "aclrtSetOpExecuteTimeOutV2", "aclrtGetSysParamOpt", "aclrtSetSysParamOpt", "aclrtCtxSetSysParamOpt",
    "aclrtPeekAtLastError", "aclmdlInitDump", "aclmdlSetDump", "aclmdlFinalizeDump", "aclrtStreamWaitEvent",
    "aclrtResetEvent", "aclrtCreateEventExWithFlag", "aclrtQueryEventStatus", "aclrtStreamQuery",
    "aclrtDestroyStreamForce", "aclGetDeviceCapability", "aclrtDeviceCanAccessPeer",
    "aclrtDeviceEnablePeerAccess", "aclrtDeviceGetBareTgid", "aclrtProcessReport", "aclrtReserveMemAddress",
    "aclrtReleaseMemAddress", "aclrtMallocPhysical", "aclrtFreePhysical", "aclrtMapMem", "aclrtUnmapMem",
    "aclrtMemExportToShareableHandle", "aclrtMemImportFromShareableHandle", "aclrtMemSetPidToShareableHandle",
    "aclrtBinaryLoadFromData", "aclrtBinaryGetFunction", "aclrtGetFunctionAddr", "aclDestroyDataBuffer",
    "aclSetTensorFormat", "aclSetTensorShape", "aclSetTensorPlaceMent", "aclGetTensorDescDimV2", "aclopSetAttrBool",
    "aclopSetAttrInt", "aclopSetAttrFloat", "aclopSetAttrString", "aclopSetAttrDataType", "aclopSetAttrListBool",
    "aclopSetAttrListInt", "aclopSetAttrListFloat", "aclopSetAttrListListInt",
    /* not a function: a stream task about to run (simulator-only; a fault here makes that task fail) */
    "cannsimTaskRun",
    /* operator libraries */
    CANNSIM_OP_NAMES
};
#define N_NAMES (sizeof k_names / sizeof k_names[0])
static uint64_t g_calls[N_NAMES];

static size_t n_names(void) { return N_NAMES; }
static const char *name_at(size_t i) { return k_names[i]; }

static int name_index(const char *func) {
    if (!func) return -1;
    for (size_t i = 0; i < n_names(); i++)
        if (strcmp(name_at(i), func) == 0) return (int)i;
    return -1;
}

/* cannsim_enter is called with string literals of the three libraries, whose addresses never change:
   cache name -> index by pointer (direct-mapped; the caller holds g_mu) so that every simulated call
   does not scan the names with strcmp. */
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
    int func;        /* index into the names */
    uint64_t nth;    /* 1-based call number; 0 = every call */
    int code;
    uint64_t seen;   /* calls counted since the spec was set */
} fault_t;
#define MAX_FAULTS 32
static fault_t g_faults[MAX_FAULTS];
static int g_nfaults;

/* Parses spec into out; returns the count, or -1 with a reason in why (lock held, or at load). */
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
    const char *f = name_at((size_t)idx);
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
    pthread_mutex_lock(&g_mu);
    int n = parse_faults(spec, tmp, why, sizeof why);
    if (n >= 0) {
        memcpy(g_faults, tmp, sizeof(fault_t) * (size_t)n);
        g_nfaults = n;
    }
    pthread_mutex_unlock(&g_mu);
    if (n < 0) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "cannsimSetFault: malformed fault spec '%s': %s", spec, why);
    return 0;
}

CANNSIM_API int64_t cannsimCallCount(const char *func) {
    pthread_mutex_lock(&g_mu);
    int idx = name_index(func);
    int64_t v = idx < 0 ? -1 : (int64_t)g_calls[idx];
    pthread_mutex_unlock(&g_mu);
    return v;
}

/* ====================================================================== pointer sets */

static size_t ph(uintptr_t k, size_t cap) {
    uint64_t x = (uint64_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

int pset_has(const pset *s, const void *p) {
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

int pset_add(pset *s, const void *p) {
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

int pset_del(pset *s, const void *p) {
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

void pset_clear(pset *s) {
    free(s->slot);
    s->slot = NULL;
    s->cap = s->n = 0;
}

/* kinds visible to the other libraries and to cannsimLiveHandles */
pset g_tensors, g_int_arrays, g_executors;
pset g_streams;      /* user streams */
pset g_events;
pset g_user_ctx;     /* user-created contexts */
pset g_all_ctx;      /* user and default contexts */
pset g_all_streams;  /* user and default streams, not yet dying */

const char *const k_kinds[] = {"device_buffer", "host_buffer", "tensor", "int_array",
                               "executor", "stream", "event", "context", "device_ref"};
const size_t N_KINDS = sizeof k_kinds / sizeof k_kinds[0];
int64_t g_released_k[sizeof k_kinds / sizeof k_kinds[0]];

int kind_index(const char *k) {
    for (size_t i = 0; i < N_KINDS; i++)
        if (!strcmp(k_kinds[i], k)) return (int)i;
    return -1;
}

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
atable g_dmem, g_hmem; /* device memory, pinned host memory */

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
alloc_t *at_containing(const atable *t, uintptr_t p) {
    ptrdiff_t i = at_floor(t, p);
    if (i < 0) return NULL;
    alloc_t *a = &t->v[i];
    return p - a->base < a->size ? a : NULL;
}
alloc_t *at_exact(const atable *t, uintptr_t p) {
    ptrdiff_t i = at_floor(t, p);
    return (i >= 0 && t->v[i].base == p) ? &t->v[i] : NULL;
}
int at_insert(atable *t, alloc_t a) {
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
void at_remove(atable *t, alloc_t *a) {
    size_t i = (size_t)(a - t->v);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* Does [p, p+n) lie inside one live device allocation? (lock held) */
int device_range(const void *p, uint64_t n, const alloc_t **out, char *why, size_t whylen) {
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
/* ====================================================================== env helpers */
int parse_bytes(const char *s, uint64_t *out) {
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

int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
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

/* ====================================================================== configuration */
/* The SoC the simulator answers for: "CANN-Simulator" (an Atlas A2/A3 for the operator), or CANN_SIM_SOC's value
   (read on every call), e.g. an Ascend950 name, so that the op takes CANN's Ascend950 branches (cann-abi.md §5). */
CANNSIM_API const char *cannsim_soc_name(void) {
    const char *v = getenv("CANN_SIM_SOC");
    return v && *v ? v : "CANN-Simulator";
}

CANNSIM_API const char *cannsimVersion(void) { return CANNSIM_VERSION_TEXT; }

/* ====================================================================== load / exit */
int lock_at_exit(void) {
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
        for (size_t i = 0; i < n_names(); i++)
            fprintf(f, "%s\n    \"%s\": %" PRIu64, i ? "," : "", name_at(i), g_calls[i]);
        fprintf(f, "\n  }\n}\n");
        int closed = fclose(f) == 0;
        if (!direct && closed) rename(tmp, path);
        else if (!direct) unlink(tmp);
    }
    if (locked) pthread_mutex_unlock(&g_mu);
}

void init_cv(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
}

__attribute__((constructor)) static void cannsim_load(void) {
    init_cv();
    streams_load();
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
    streams_stop_at_exit();
    write_report();
}
