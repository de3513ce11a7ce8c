/*
 * events.c - simulated CANN events (part of libascendcl.so / libacl_rt.so): an event marks a point in a
 * stream's queue (aclrtRecordEvent), completes when the stream's work up to that point has, and orders another
 * stream's later work after that point (aclrtStreamWaitEvent, through the stream engine's wait task in
 * streams.c).  Facts: hicann/runtime src/acl/aclrt_impl/event.cpp and stream.cpp, the flag checks of
 * src/runtime/api/impl/api_error.cc (EventCreate, EventCreateEx, StreamWaitEvent), api_impl.cc (EventReset,
 * EventQueryStatus); include/external/acl/acl_rt.h (flags and status values); docs/cann-abi.md §8.8.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdlib.h>
#include <time.h>

/* acl_rt.h 28-33 */
#define ACL_EVENT_SYNC 0x1u
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x2u
#define ACL_EVENT_TIME_LINE 0x8u
#define ACL_EVENT_DEVICE_USE_ONLY 0x10u
#define ACL_EVENT_EXTERNAL 0x20u
#define ACL_EVENT_IPC 0x40u
#define EVENT_FLAGS_OLD 0x3Fu                /* api_error.cc EventCreate: 0x1..0x20 */
#define EVENT_FLAGS_EX (0xFu | ACL_EVENT_IPC) /* api_error.cc EventCreateEx: 0x1..0x8, or 0x40 */

/* Events made with a flag: CANN's rules (api_error.cc EventCreate / EventCreateEx): at least one known flag
   and none outside them, and the flags that must stand alone do.  Returns 0 or the code, message set. */
static int check_event_flag(const char *func, uint32_t flag, int ex) {
    uint32_t known = ex ? EVENT_FLAGS_EX : EVENT_FLAGS_OLD;
    uint32_t alone = ex ? (ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL | ACL_EVENT_IPC)
                        : (ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL);
    if ((flag & known) == 0 || flag > known)
        return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                            "%s: flag %#x is invalid: expected an OR of ACL_EVENT_SYNC (0x1), "
                            "ACL_EVENT_CAPTURE_STREAM_PROGRESS (0x2), 0x4, ACL_EVENT_TIME_LINE (0x8)%s",
                            func, flag, ex ? ", or ACL_EVENT_IPC (0x40) alone"
                                           : ", or ACL_EVENT_DEVICE_USE_ONLY (0x10) or ACL_EVENT_EXTERNAL (0x20) alone");
    if ((flag & alone) && (flag & ~alone & known))
        return cannsim_fail(ACL_ERROR_RT_PARAM_INVALID, "%s: flag %#x is invalid: %#x cannot be combined with "
                            "other flags", func, flag, flag & alone);
    if (flag & alone)
        return cannsim_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "%s: flag %#x (device-only, external or IPC "
                            "events) is not supported by the CANN simulator", func, flag);
    return 0;
}

static aclError create_event_impl(const char *func, aclrtEvent *event, uint32_t flag, int timed, int ex) {
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
            e->timed = timed;
            e->ex = ex;
            *event = e;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

CANNSIM_API aclError aclrtCreateEvent(aclrtEvent *event) {
    ENTER("aclrtCreateEvent");
    return create_event_impl("aclrtCreateEvent", event, 0, 1, 0); /* its default flag includes the timeline */
}

CANNSIM_API aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    ENTER("aclrtCreateEventWithFlag");
    int rc = event ? check_event_flag("aclrtCreateEventWithFlag", flag, 0) : 0;
    return rc ? rc : create_event_impl("aclrtCreateEventWithFlag", event, flag, (flag & ACL_EVENT_TIME_LINE) != 0, 0);
}

/* aclrtCreateEventExWithFlag (event.cpp): torch_npu's choice where it exists (PTA AclInterface.cpp
   AclrtCreateEventWithFlag): re-recorded freely, no aclrtResetEvent. */
CANNSIM_API aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) {
    ENTER("aclrtCreateEventExWithFlag");
    int rc = event ? check_event_flag("aclrtCreateEventExWithFlag", flag, 1) : 0;
    return rc ? rc
              : create_event_impl("aclrtCreateEventExWithFlag", event, flag, (flag & ACL_EVENT_TIME_LINE) != 0, 1);
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

/* The stream of the event's latest record while that stream lives, else NULL (lock held). */
static stream_t *record_stream(const event_t *e) {
    stream_t *s = e->stream;
    return e->state == 1 && pset_has(&g_all_streams, s) && s->serial == e->stream_serial ? s : NULL;
}

typedef struct {
    event_t *ev;
    uint64_t serial, gen;
    int reset; /* aclrtResetEvent's task: back to never recorded */
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
        r->ev->state = r->reset ? 0 : 2;
    }
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Queue a record (or reset) of the event on the stream: the event's latest point is that task. */
static aclError record_impl(const char *func, aclrtEvent event, aclrtStream stream, int reset) {
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx(func, &rc);
    if (!c) goto out;
    event_t *e = live_event(func, event, &rc);
    if (!e) goto out;
    stream_t *s = resolve_stream(func, stream, c, &rc);
    if (!s) goto out;
    if (reset && e->ex) { /* api_impl.cc EventReset; PTA AclInterface.cpp: "aclrtResetEvent is not supported" */
        rc = cannsim_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "%s: event %p was made by aclrtCreateEventExWithFlag, "
                          "which is recorded again without a reset", func, event);
        goto out;
    }
    rec_task_t *r = malloc(sizeof *r);
    task_t *t = NULL;
    if (r) {
        *r = (rec_task_t){e, e->serial, ++e->gen, reset};
        t = enqueue_locked(s, func, record_task_run, free, r, NULL, 0, 0);
    }
    if (!t) {
        free(r);
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: out of host memory", func);
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

CANNSIM_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    ENTER("aclrtRecordEvent");
    return record_impl("aclrtRecordEvent", event, stream, 0);
}

CANNSIM_API aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    ENTER("aclrtResetEvent");
    return record_impl("aclrtResetEvent", event, stream, 1);
}

/* aclrtStreamWaitEvent (stream.cpp): the stream's later work starts after the event's latest record point.
   An event never recorded, or whose point has completed, gives nothing to wait for. */
CANNSIM_API aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    ENTER("aclrtStreamWaitEvent");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    ctx_t *c = need_ctx("aclrtStreamWaitEvent", &rc);
    if (!c) goto out;
    event_t *e = live_event("aclrtStreamWaitEvent", event, &rc);
    if (!e) goto out;
    stream_t *s = resolve_stream("aclrtStreamWaitEvent", stream, c, &rc);
    if (!s) goto out;
    stream_t *on = record_stream(e);
    if (on && on != s && !stream_idle_upto(on, e->seq) && stream_wait_locked(s, on, e->seq))
        rc = cannsim_fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtStreamWaitEvent: out of host memory");
out:
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* aclrtQueryEventStatus (event.cpp): COMPLETE once the latest record completed, else NOT_READY (also never
   recorded: RT_EVENT_INIT is not RT_EVENT_RECORDED). */
CANNSIM_API aclError aclrtQueryEventStatus(aclrtEvent event, int *status) {
    ENTER("aclrtQueryEventStatus");
    if (!status) return cannsim_fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    event_t *e = live_event("aclrtQueryEventStatus", event, &rc);
    if (e) {
        stream_t *s = record_stream(e);
        int done = e->state == 2 || (e->state == 1 && (!s || stream_idle_upto(s, e->seq)));
        *status = done ? 1 : 0; /* ACL_EVENT_RECORDED_STATUS_COMPLETE / _NOT_READY (acl_rt.h 123-124) */
    }
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
    stream_t *s = record_stream(e); /* never recorded (nothing to wait for), complete, or its stream gone */
    if (s && drain_locked(s, e->seq, deadline))
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
    if (!a->timed || !b->timed) { /* only events with a timeline can be timed (§8.8); the code is the simulator's */
        event_t *x = !a->timed ? a : b;
        rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                          "aclrtEventElapsedTime: %s event %p was made with a flag without "
                          "ACL_EVENT_TIME_LINE (0x8): it records no time",
                          x == a ? "start" : "end", (void *)x);
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

