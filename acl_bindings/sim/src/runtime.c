/*
 * runtime.c - simulated CANN runtime (built as libascendcl.so, or libacl_rt.so for the variant
 * tree): the acl and aclrt functions for init/finalize, the recent-error message, devices,
 * contexts and streams.  The events are in events.c, the memory functions in rt_memory.c, the stream engine (and
 * the task launch the operator library uses) in streams.c, the simulator's accounting, fault
 * injection and configuration in sim_core.c.
 *
 * Prototypes, codes and enum values: docs/cann-abi.md §1.1, §2, §3.  Where the notes do
 * not fix a behaviour, the simulator is stricter than hardware (unknown handles, host pointers
 * passed as device memory, double frees, frees of memory still used by queued work are all
 * reported with a code and a message); nothing here aborts on bad input.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SIM_CANN_VERSION "8.5.0-cannsim"

int g_inited;
uint64_t g_init_refs;      /* aclInit calls not yet matched by a finalize (RT acl.cpp aclInitRefCount) */
uint64_t g_refs_cut;       /* references other users still held when the last plain aclFinalize ran */
uint64_t g_refs_cut_total; /* the same, summed over the process (for the exit report) */
uint64_t g_used_after_cut; /* calls refused because another user had finalized under their caller */
int g_ndev;
uint64_t g_cap;
device_t *g_dev;
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
    /* RT context.cc Context::TearDown 686-712: the streams created in it go with it (a later use of one is a
       stale handle).  One at a time: a destroy may release the lock while it drains. */
    for (;;) {
        stream_t *owned = NULL;
        for (size_t i = 0; i < g_streams.cap && !owned; i++) {
            stream_t *s = (stream_t *)g_streams.slot[i];
            if (s && s->ctx == c->serial) owned = s;
        }
        if (!owned) break;
        pset_del(&g_streams, owned);
        stream_destroy_locked(owned);
    }
    stream_t *s = c->defstream;
    c->defstream = NULL;
    if (s) stream_destroy_locked(s);
    free(c);
}

/* Common prologue for runtime calls that need aclInit and a current context (lock held). */
ctx_t *need_ctx(const char *func, int *code) {
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

CANNSIM_API int cannsim_require_context(const char *func) {
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    need_ctx(func, &rc);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Memory *a* must belong to device *dev*, the one the call runs on (lock held).  Returns 0 or 908402. */
int same_device(const char *func, const char *role, const void *p, const alloc_t *a, int dev) {
    if (a->dev == dev) return 0;
    return cannsim_fail(CANNSIM_ERR_OTHER_DEVICE,
                        "%s: %s %p is memory of device %d, but the call runs on device %d (its current context's): "
                        "contexts, streams and device memory belong to one device (simulator-only code: a device "
                        "would fault or use another device's memory)",
                        func, role, p, a->dev, dev);
}

/* 100001 for a call while ACL is not initialized (lock held).  When a plain aclFinalize tore the runtime
   down while other aclInit references were still held, the caller is one of those other users: the
   message says so, the first such call is also printed on stderr, and the exit report counts them. */
int not_initialized(const char *func, int code) {
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

int need_init(const char *func) {
    if (!g_inited) return not_initialized(func, ACL_ERROR_UNINITIALIZE);
    return 0;
}

/* Resolve a stream argument (NULL = current context's default stream); lock held. */
stream_t *resolve_stream(const char *func, aclrtStream stream, ctx_t *c, int *code) {
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

/* ====================================================================== init / finalize */
/* The simulated device count: CANN_SIM_DEVICE_COUNT (1..1024), default 2.  Returns 0 or 100000. */
static int env_device_count(const char *func, int *ndev) {
    *ndev = 2;
    const char *v = getenv("CANN_SIM_DEVICE_COUNT");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > 1024)
            return cannsim_fail(ACL_ERROR_INVALID_PARAM,
                                "%s: CANN_SIM_DEVICE_COUNT='%s' is not an integer between 1 and 1024", func, v);
        *ndev = (int)n;
    }
    return 0;
}

CANNSIM_API aclError aclInit(const char *configPath) {
    ENTER("aclInit");
    if (configPath && *configPath) {
        FILE *f = fopen(configPath, "r");
        if (!f)
            return cannsim_fail(100003 /* ACL_ERROR_INVALID_FILE */, "aclInit: cannot read config file '%s': %s",
                                configPath, strerror(errno));
        fclose(f);
    }
    int ndev;
    uint64_t cap = 16ULL << 30;
    int rc = env_device_count("aclInit", &ndev);
    if (rc) return rc;
    const char *v = getenv("CANN_SIM_MEM_BYTES");
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
    return cannsim_take_error();
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
    /* CANN answers from the driver, before aclInit too (RT device.cpp, aclrtGetDeviceCountImpl): so does the
       simulator, from the configuration aclInit would use (torch_npu asks before aclInit, NPUFunctions.cpp) */
    pthread_mutex_lock(&g_mu);
    int rc = 0, n = g_ndev;
    if (!g_inited) rc = env_device_count("aclrtGetDeviceCount", &n);
    if (!rc) *count = (uint32_t)n;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API const char *aclrtGetSocName(void) {
    cannsim_enter("aclrtGetSocName");
    return cannsim_soc_name();
}

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
        if (s) s->ctx = c->serial;
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

/* aclrtDestroyStream runs the stream's queued work first; aclrtDestroyStreamForce (RT stream.cpp
   aclrtDestroyStreamForceImpl -> StreamDestroy with force) drops the work not yet started. */
static aclError destroy_stream_impl(const char *func, aclrtStream stream, int force) {
    if (!stream)
        return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: stream is NULL (the default stream cannot be destroyed)",
                            func);
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (c) {
        stream_t *s = (stream_t *)stream;
        if (!pset_has(&g_streams, s)) {
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "%s: stream %p is not a live stream (never created, or already destroyed)", func,
                              stream);
        } else if (s->ctx != c->serial) { /* RT api_impl.cc ApiImpl::StreamDestroy 1579-1589 */
            rc = cannsim_fail(ACL_ERROR_RT_STREAM_CONTEXT,
                              "%s: stream %p was created in another context than the current one (device %d): "
                              "make its context current first",
                              func, stream, s->dev);
        } else {
            pset_del(&g_streams, s);
            if (force) s->stopped = 1; /* its queued tasks are skipped, not run */
            stream_destroy_locked(s); /* a task error is dropped */
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtDestroyStream(aclrtStream stream) {
    ENTER("aclrtDestroyStream");
    return destroy_stream_impl("aclrtDestroyStream", stream, 0);
}

CANNSIM_API aclError aclrtDestroyStreamForce(aclrtStream stream) {
    ENTER("aclrtDestroyStreamForce");
    return destroy_stream_impl("aclrtDestroyStreamForce", stream, 1);
}

/* aclrtStreamQuery (RT stream.cpp): ACL_STREAM_STATUS_COMPLETE (0) once all its queued work completed, else
   ACL_STREAM_STATUS_NOT_READY (1; acl_rt.h 134-135). */
CANNSIM_API aclError aclrtStreamQuery(aclrtStream stream, int *status) {
    ENTER("aclrtStreamQuery");
    if (!status) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtStreamQuery", &rc);
    stream_t *s = c ? resolve_stream("aclrtStreamQuery", stream, c, &rc) : NULL;
    if (s) *status = stream_idle_upto(s, UINT64_MAX) ? 0 : 1;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Report (and clear) a stream's sticky task error; lock held. */
static int stream_error(const char *func, stream_t *s, aclrtStream handle) {
    if (!s->err) return 0;
    int code = s->err;
    s->err = 0;
    s->stopped = 0; /* (ACL_STOP_ON_FAILURE: the stream resumes once its error was reported) */
    return cannsim_fail(code, "%s: a task on stream %p failed: %s", func, handle, s->errmsg);
}

/* The deadline (now_ns() clock) of a synchronisation timeout in ms: -1 = wait forever (deadline -1),
   >= 0 = that many ms from now; anything else is rejected.  Returns 0 or ACL_ERROR_INVALID_PARAM. */
int timeout_deadline(const char *func, int32_t timeout, int64_t *deadline) {
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
    s->pins++; /* another thread may destroy it while we wait: keep it until its error is read */
    if (drain_locked(s, UINT64_MAX, deadline))
        rc = cannsim_fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                          "%s: stream %p still has pending work after %d ms (the remaining work stays queued)", func,
                          stream, timeout);
    else if (!s->dead) /* (a destroyed stream's task error was dropped, as aclrtDestroyStream does) */
        rc = stream_error(func, s, stream);
    stream_unpin(s);
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
        else v[i]->err = v[i]->stopped = 0;
    }
    for (size_t i = 0; i < n; i++) stream_unpin(v[i]);
    free(v);
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}
