/*
 * streams.c - the simulated device's stream engine (part of libascendcl.so / libacl_rt.so): task
 * queues, one worker thread per stream that runs its tasks in order after the call that queued
 * them returned, the asynchronous / deferred / synchronous modes, simulated device time, the
 * detection of memory races between host calls or streams and queued work, the fork and exit
 * handling of the workers, and cannsim_launch, through which the operator library queues a kernel.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t g_serial;
stream_t *g_stream_list;
atomic_int g_mode;
atomic_int g_delay_ms;

stream_t *stream_new(int dev, int is_default) {
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

void stream_unlink_free(stream_t *s) {
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

void stream_unpin(stream_t *s) {
    s->pins--;
    if (s->dead && s->pins == 0 && !s->draining && !s->has_worker) stream_unlink_free(s);
}

int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec; }
int64_t now_ns(void) {
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
    int fault = cannsim_enter("cannsimTaskRun"); /* CANN_SIM_FAULT=cannsimTaskRun:N:code fails the Nth task */
    if (fault) {
        snprintf(msg, msglen, "%s: injected fault (code %d) by CANN_SIM_FAULT (cannsimTaskRun)", t->origin, fault);
        (void)cannsim_take_error(); /* (the fault's message is the task's, not this worker thread's) */
        return fault;
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
    int r = s->stopped ? 0 : run_task(s, t, msg, sizeof msg); /* a stopped stream skips its tasks */
    pthread_mutex_lock(&g_mu);
    s->draining = 0;
    if (r != -1) {
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        if (r != 0 && s->err == 0) {
            s->err = r;
            snprintf(s->errmsg, sizeof s->errmsg, "%s", msg[0] ? msg : "task failed");
        }
        if (r != 0 && s->stop_on_failure) s->stopped = 1;
        task_free(t);
    }
    pthread_cond_broadcast(&g_cv);
}

static int runnable(const stream_t *s, const task_t *t) {
    return t && !s->draining && !atomic_load(&s->abort) &&
           (atomic_load(&g_mode) != MODE_DEFER || t->seq <= s->release_upto);
}

/* How long an idle worker naps before it sleeps.  Work queued while it naps (or runs a task) is
   queued without waking it: on some machines waking a sleeping thread costs the caller tens of
   microseconds, and a device does not charge the host for starting its queue.  The worker finds
   that work when the nap ends, unless a synchronisation ran it first (drain_locked). */
#define NAP_NS 1000000

static void *worker_main(void *arg) {
    stream_t *s = arg;
    int napped = 0; /* a whole nap passed with nothing queued */
    pthread_mutex_lock(&g_mu);
    for (;;) {
        if (runnable(s, s->head)) {
            step_locked(s);
            napped = 0;
        } else if (s->stop) {
            break;
        } else if (!napped) {
            uint64_t queued = s->next_seq;
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl); /* (the clock of s->wake) */
            dl = ns_ts(ts_ns(&dl) + NAP_NS);
            pthread_cond_timedwait(&s->wake, &g_mu, &dl);
            napped = s->next_seq == queued;
        } else {
            s->sleeping = 1;
            pthread_cond_wait(&s->wake, &g_mu);
            s->sleeping = 0;
            napped = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

atomic_int g_workers; /* worker threads started and not yet joined */

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
void stop_all_workers_locked(void) {
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
int drain_locked(stream_t *s, uint64_t upto, int64_t deadline) {
    int rc = 0;
    s->pins++;
    if (upto > s->next_seq - 1) upto = s->next_seq - 1;
    if (upto > s->release_upto) s->release_upto = upto;
    while (s->head && s->head->seq <= upto) {
        if (deadline < 0 && runnable(s, s->head) && s->head->delay_left_ns == 0) {
            /* The worker has not taken it yet: run it here.  The order and the result are the same,
               and waking a sleeping worker and being woken by it costs tens of microseconds on some
               machines, far more than a small kernel (a device's stream does not charge the host for
               that).  A task with simulated device time, or a wait with a deadline, waits for the
               worker as before. */
            step_locked(s);
            continue;
        }
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
void start_locked(stream_t *s, uint64_t seq) {
    int mode = atomic_load(&g_mode);
    if (mode == MODE_DEFER) return; /* it runs when a synchronisation asks for it */
    if (mode == MODE_SYNC || ensure_worker(s)) drain_locked(s, seq, -1);
    else if (s->sleeping) pthread_cond_signal(&s->wake); /* (a napping or busy worker finds it itself) */
}

task_t *enqueue_locked(stream_t *s, const char *origin, cannsim_task_fn run, void (*destroy)(void *),
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

/* ---------------------------------------------------------------- waits between streams (aclrtStreamWaitEvent) */
typedef struct {
    stream_t *self, *target; /* target is pinned until the wait task is freed */
    uint64_t seq;
} wait_arg;

/* The wait task: done once target's tasks up to seq completed.  It releases them (deferred mode) and waits in
   slices, so that a process exit (abort) ends it; -1 (aborted) leaves it queued.  Called without the lock. */
static int wait_task_run(void *arg, char *msg, size_t msglen) {
    (void)msg, (void)msglen;
    wait_arg *w = arg;
    int r = 0;
    pthread_mutex_lock(&g_mu);
    while (w->target->head && w->target->head->seq <= w->seq) {
        if (atomic_load(&w->self->abort) || atomic_load(&w->target->abort)) {
            r = -1;
            break;
        }
        drain_locked(w->target, w->seq, now_ns() + 10000000LL);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

static void wait_task_free(void *arg) { /* (lock held: tasks are freed under it) */
    wait_arg *w = arg;
    stream_unpin(w->target);
    free(w);
}

/* Queue on s a wait for target's tasks up to seq (lock held).  Returns 0, or -1 out of host memory. */
int stream_wait_locked(stream_t *s, stream_t *target, uint64_t seq) {
    wait_arg *w = malloc(sizeof *w);
    if (!w) return -1;
    *w = (wait_arg){s, target, seq};
    task_t *t = enqueue_locked(s, "aclrtStreamWaitEvent", wait_task_run, wait_task_free, w, NULL, 0, 0);
    if (!t) {
        free(w);
        return -1;
    }
    target->pins++;
    t->wait_on = target;
    t->wait_seq = seq;
    start_locked(s, t->seq);
    return 0;
}

/* Whether s's tasks up to seq have all completed; if not, they are released to run (deferred mode), so that
   a query polled in a loop ends (lock held). */
int stream_idle_upto(stream_t *s, uint64_t seq) {
    if (!s->head || s->head->seq > seq) return 1;
    if (seq > s->next_seq - 1) seq = s->next_seq - 1;
    if (seq > s->release_upto) s->release_upto = seq;
    if (ensure_worker(s) == 0) pthread_cond_signal(&s->wake);
    return 0;
}

/* Whether work queued next on s is ordered after task seq of stream a: a wait queued on s (or, through the
   waits it waits for, on another stream) covers it (lock held; depth bounds the walk). */
static int ordered_after(const stream_t *s, uint64_t upto, const stream_t *a, uint64_t seq, int depth) {
    for (const task_t *w = s->head; w && w->seq <= upto; w = w->next) {
        if (!w->wait_on) continue;
        if (w->wait_on == a && w->wait_seq >= seq) return 1;
        if (depth > 0 && ordered_after(w->wait_on, w->wait_seq, a, seq, depth - 1)) return 1;
    }
    return 0;
}

/* A task still queued (or running) on any stream but `except` that uses [p, p+n) (only a task that
   writes it, when writers_only); *on receives its stream.  Lock held. */
static const task_t *queued_use_except(const stream_t *except, const void *p, uint64_t n, int writers_only,
                                       const stream_t **on) {
    uintptr_t lo = (uintptr_t)p;
    if (!n) return NULL;
    for (stream_t *s = g_stream_list; s; s = s->gnext)
        if (s != except)
            for (task_t *t = s->head; t; t = t->next) {
                if (except && ordered_after(except, UINT64_MAX, s, t->seq, 8)) continue; /* waited for */
                for (int i = 0; i < t->nrefs; i++) {
                    const task_ref *r = &t->refs[i];
                    if ((r->write || !writers_only) && r->lo < lo + n && lo < r->lo + r->n) {
                        *on = s;
                        return t;
                    }
                }
            }
    return NULL;
}

const task_t *queued_use(const void *p, uint64_t n, int writers_only, const stream_t **on) {
    return queued_use_except(NULL, p, n, writers_only, on);
}

static void stream_name(const stream_t *s, char *buf, size_t len) {
    if (s->is_default) snprintf(buf, len, "the default stream of device %d", s->dev);
    else snprintf(buf, len, "stream %p", (void *)s);
}

/* Work about to be queued on s that uses memory that work queued on another stream writes (or, when
   it writes, uses), with no wait queued on s for that work (aclrtStreamWaitEvent, also through other
   streams' waits): the two are not ordered, so a device would race them.  Returns 0 or CANNSIM_ERR_QUEUED_WORK with
   the message set.  Lock held. */
int cross_stream_race(const char *func, const stream_t *s, const task_ref *refs, int nrefs) {
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
                            "work on two streams is not ordered unless a wait orders it (aclrtRecordEvent on the other "
                            "stream, then aclrtStreamWaitEvent on this one) or the other stream was synchronized first; a device would race the two silently (simulator-only code %d)",
                            func, mine, refs[i].write ? "writes" : "reads", (void *)refs[i].lo, theirs, t->origin,
                            refs[i].write ? "uses" : "writes", CANNSIM_ERR_QUEUED_WORK);
    }
    return 0;
}

/* The simulator-only error for a host-side memory call that would race queued work (lock held).
   doing: "freeing", "overwriting" or "reading" p. */
int queued_work_error(const char *func, const void *p, const char *doing, const task_t *t,
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
void stream_destroy_locked(stream_t *s) {
    s->dying = 1;
    pset_del(&g_all_streams, s);
    drain_locked(s, UINT64_MAX, -1);
    stop_worker_locked(s);
    s->dead = 1;
    if (s->pins == 0 && !s->draining && !s->has_worker) stream_unlink_free(s);
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
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void) {
    for (stream_t *s = g_stream_list; s; s = s->gnext) {
        s->has_worker = s->joining = s->stop = s->draining = s->sleeping = 0;
        pthread_cond_init(&s->wake, NULL);
    }
    atomic_store(&g_workers, 0);
    init_cv();
    pthread_mutex_unlock(&g_mu);
}

/* At exit: stop every worker (a task still in its simulated delay is abandoned) and join it.  Gives
   up rather than hang if another thread holds the lock. */
void streams_stop_at_exit(void) {
    int locked = lock_at_exit();
    if (!locked) return;
    for (stream_t *s = g_stream_list; s; s = s->gnext) atomic_store(&s->abort, 1);
    stop_all_workers_locked();
    pthread_mutex_unlock(&g_mu);
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
        const alloc_t *a = at_containing(&g_dmem, p);
        if (!a && !at_containing(&g_hmem, p)) {
            rc = cannsim_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "%s: buffer %p was freed while the launch was being prepared", func, refs[i].p);
            goto out;
        }
        if (a && (rc = same_device(func, "a buffer of the kernel's", refs[i].p, a, s->dev))) goto out;
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

void streams_load(void) {
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
}
