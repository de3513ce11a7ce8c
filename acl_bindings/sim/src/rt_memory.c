/*
 * rt_memory.c - the simulated runtime's memory functions (part of libascendcl.so / libacl_rt.so):
 * aclrtMalloc and its variants, aclrtFree, pinned host memory, aclrtMemcpy/aclrtMemset and their
 * asynchronous forms, aclrtGetMemInfo.  Memory that queued stream work uses is tracked, so that a
 * free, overwrite or read that would race it is refused (cann-abi.md §8.4).
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILL_LIMIT (16u << 20) /* new device memory is filled with 0xFF up to this many bytes */
#define DEVICE_ALIGN 64
#define LOW_ADDR 65536u /* host pointers below this are rejected instead of dereferenced */

/* ====================================================================== memory */
static aclError malloc_impl(const char *func, void **devPtr, size_t size, int policy) {
    if (!devPtr) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", func);
    if (size == 0) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "%s: size is 0", func);
    /* RT memory.cpp aclMallocMemInner 320-338: a policy it does not know falls through to the default
       memory type; nothing refuses it (the simulator has one kind of memory: the policy changes nothing) */
    (void)policy;
    int rc = 0;
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
static int check_copy(const char *func, int dev, void *dst, size_t destMax, const void *src, size_t count, int kind,
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
        int rc = same_device(func, "destination", dst, a, dev);
        if (rc) return rc;
        refs[0] = a->base;
    } else {
        int rc = check_host_side(func, "destination", dst, count, kind, &refs[0]);
        if (rc) return rc;
    }
    if (src_dev) {
        if (!device_range(src, count, &a, why, sizeof why))
            return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: source of %s: %s", func, kind_name(kind), why);
        int rc = same_device(func, "source", src, a, dev);
        if (rc) return rc;
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
    if (count == 0) return ACL_SUCCESS; /* RT memory.cpp aclrtMemcpyImpl 653: before any other check */
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemcpy", &rc);
    if (!c) goto out;
    uintptr_t refs[2];
    int pinned;
    if ((rc = check_copy("aclrtMemcpy", c->dev, dst, destMax, src, count, kind, refs, &pinned))) goto out;
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
    if (count == 0) return ACL_SUCCESS; /* RT memory.cpp aclrtMemcpyAsyncImpl 688: before any other check */
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemcpyAsync", &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream("aclrtMemcpyAsync", stream, c, &rc);
    if (!s) goto out;
    uintptr_t refs[2];
    int pinned;
    if ((rc = check_copy("aclrtMemcpyAsync", c->dev, dst, destMax, src, count, kind, refs, &pinned))) goto out;
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

static int check_memset(const char *func, int dev, void *devPtr, size_t maxCount, size_t count, uintptr_t *base) {
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
    int rc = same_device(func, "devPtr", devPtr, a, dev);
    if (rc) return rc;
    *base = a->base;
    return 0;
}

CANNSIM_API aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    ENTER("aclrtMemset");
    if (count == 0) return ACL_SUCCESS; /* RT memory.cpp aclrtMemsetImpl 674: before any other check */
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemset", &rc);
    if (!c) goto out;
    uintptr_t base;
    if ((rc = check_memset("aclrtMemset", c->dev, devPtr, maxCount, count, &base))) goto out;
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
    if (count == 0) return ACL_SUCCESS; /* RT memory.cpp aclrtMemsetAsyncImpl 742: before any other check */
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtMemsetAsync", &rc);
    if (!c) goto out;
    stream_t *s = resolve_stream("aclrtMemsetAsync", stream, c, &rc);
    if (!s) goto out;
    uintptr_t base;
    if ((rc = check_memset("aclrtMemsetAsync", c->dev, devPtr, maxCount, count, &base))) goto out;
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

