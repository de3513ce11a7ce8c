/*
 * sim_internal.h - state and helpers the runtime library's files share (sim_core.c, streams.c,
 * runtime.c, rt_memory.c).  Nothing here is exported: the library is built with
 * -fvisibility=hidden, so these names stay inside libascendcl / libacl_rt.  The other two
 * libraries use only cannsim.h.
 */
#ifndef CANNSIM_SIM_INTERNAL_H
#define CANNSIM_SIM_INTERNAL_H

#include "cannsim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define CANNSIM_VERSION_TEXT "cannsim 0.1 (CPU simulator of CANN runtime/nnopbase/aclnn)"
#define MSG_LEN 1024

/* ====================================================================== lock (sim_core.c) */
extern pthread_mutex_t g_mu;
extern pthread_cond_t g_cv; /* monotonic clock; initialised at load */
void init_cv(void);          /* (re)initialise g_cv, at load and in a forked child */
/* At exit: take the lock, or give up after about 200 ms rather than hang if another thread died
   holding it.  Returns whether it is held. */
int lock_at_exit(void);

/* The calling thread's pending messages (every one since the last read, oldest first, one a line), put in front
   of the text the last read returned, in a buffer that stays valid until its next call, or NULL when there is no
   text; the pending messages are cleared (aclGetRecentErrMsg). */
const char *cannsim_take_error(void);

/* Every call of an exported API function starts with this. */
#define ENTER(name)                         \
    do {                                    \
        int enter_code_ = cannsim_enter(name); \
        if (enter_code_) return enter_code_; \
    } while (0)

/* ====================================================================== pointer sets (sim_core.c) */
typedef struct {
    uintptr_t *slot;
    size_t cap; /* power of two or 0 */
    size_t n;
} pset;

int pset_has(const pset *s, const void *p);
int pset_add(pset *s, const void *p);
int pset_del(pset *s, const void *p);
void pset_clear(pset *s);

/* kinds visible to the other libraries and to cannsimLiveHandles */
extern pset g_tensors, g_int_arrays, g_executors, g_tensor_lists, g_data_buffers;
extern pset g_streams;      /* user streams */
extern pset g_events;
extern pset g_user_ctx;     /* user-created contexts */
extern pset g_all_ctx;      /* user and default contexts */
extern pset g_all_streams;  /* user and default streams, not yet dying */

/* Handle kinds of cannsimLiveHandles and the exit report, and how many of each aclFinalize released. */
extern const char *const k_kinds[];
extern const size_t N_KINDS;
extern int64_t g_released_k[];
int kind_index(const char *k);

/* ====================================================================== allocation tables (sim_core.c) */
typedef struct {
    uintptr_t base;
    uint64_t size;
    int dev;
} alloc_t;
typedef struct {
    alloc_t *v;
    size_t n, cap;
} atable;
extern atable g_dmem, g_hmem; /* device memory, pinned host memory */

alloc_t *at_containing(const atable *t, uintptr_t p);
alloc_t *at_exact(const atable *t, uintptr_t p);
int at_insert(atable *t, alloc_t a);
void at_remove(atable *t, alloc_t *a);
/* Does [p, p+n) lie inside one live device allocation? (lock held) */
int device_range(const void *p, uint64_t n, const alloc_t **out, char *why, size_t whylen);

/* ====================================================================== env helpers (sim_core.c) */
int parse_bytes(const char *s, uint64_t *out);
int env_flag(const char *name);

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
    stream_t *wait_on;     /* a wait task (aclrtStreamWaitEvent): later work waits for wait_on's tasks */
    uint64_t wait_seq;     /*   with seq <= this */
};

/* Each stream's work runs on its own worker thread (started at the first task), in queue order, as
   on a device: an API call that queues work returns before it ran.  The queue is protected by g_mu;
   the worker releases the lock while it runs a task. */
struct stream {
    uint64_t serial;
    int dev;
    uint64_t ctx; /* serial of the context it was created in (a user stream; its teardown destroys it) */
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
    int stop_on_failure; /* aclrtSetStreamFailureMode ACL_STOP_ON_FAILURE: a failed task stops the stream */
    int stopped;         /* it did: later tasks are skipped until a synchronisation reports the error */
    pthread_t worker;
    int has_worker;   /* a worker thread exists (started, not yet joined) */
    int joining;      /* a thread is joining the worker (the lock is released meanwhile) */
    int stop;         /* the worker exits once nothing is runnable */
    int sleeping;     /* the worker waits without a deadline: queuing work must wake it */
    atomic_int abort; /* process exit: the worker leaves the rest of the queue */
    pthread_cond_t wake; /* the worker waits here for work */
    stream_t *gnext, *gprev; /* list of all not-yet-freed streams */
};

typedef struct {
    uint64_t serial;
    int dev;
    int state; /* 0 never recorded, 1 record pending, 2 completed */
    uint32_t flag;
    int timed; /* has a timeline: aclrtCreateEvent's default, or ACL_EVENT_TIME_LINE (cann-abi.md §8.8) */
    int ex;    /* made by aclrtCreateEventExWithFlag: re-recordable, no aclrtResetEvent */
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


/* ====================================================================== runtime state (runtime.c) */
extern int g_inited;
extern uint64_t g_init_refs;      /* aclInit calls not yet matched by a finalize (RT acl.cpp aclInitRefCount) */
extern uint64_t g_refs_cut;       /* references other users still held when the last plain aclFinalize ran */
extern uint64_t g_refs_cut_total; /* the same, summed over the process (for the exit report) */
extern uint64_t g_used_after_cut; /* calls refused because another user had finalized under their caller */
extern int g_ndev;
extern uint64_t g_cap;
extern device_t *g_dev;

ctx_t *need_ctx(const char *func, int *code);
int same_device(const char *func, const char *role, const void *p, const alloc_t *a, int dev);
int need_init(const char *func);
stream_t *resolve_stream(const char *func, aclrtStream stream, ctx_t *c, int *code);
int not_initialized(const char *func, int code);

/* ====================================================================== stream engine (streams.c) */
extern uint64_t g_serial;
extern stream_t *g_stream_list;
/* When queued work runs.  ASYNC (default): on the stream's worker, after the call that queued it
   returned, as a device does.  SYNC (CANN_SIM_SYNC=1, for debugging): the call that queues work waits
   until it completed.  DEFER (CANN_SIM_DEFER=1): only once a synchronisation asks for it, so that
   every read, free or overwrite before a sync is caught. */
enum { MODE_ASYNC = 0, MODE_DEFER = 1, MODE_SYNC = 2 };
extern atomic_int g_mode;
extern atomic_int g_delay_ms;
extern atomic_int g_workers; /* worker threads started and not yet joined */

stream_t *stream_new(int dev, int is_default);
void stream_unlink_free(stream_t *s);
void stream_unpin(stream_t *s);
int64_t now_ns(void);
int64_t ts_ns(const struct timespec *t);
void stop_all_workers_locked(void);
int drain_locked(stream_t *s, uint64_t upto, int64_t deadline);
void start_locked(stream_t *s, uint64_t seq);
task_t *enqueue_locked(stream_t *s, const char *origin, cannsim_task_fn run, void (*destroy)(void *),
                       void *arg, const task_ref *refs, int nrefs, int64_t delay_ns);
const task_t *queued_use(const void *p, uint64_t n, int writers_only, const stream_t **on);
int cross_stream_race(const char *func, const stream_t *s, const task_ref *refs, int nrefs);
int queued_work_error(const char *func, const void *p, const char *doing, const task_t *t, const stream_t *s);
void stream_destroy_locked(stream_t *s);
int stream_wait_locked(stream_t *s, stream_t *target, uint64_t seq);
int stream_idle_upto(stream_t *s, uint64_t seq);
int timeout_deadline(const char *func, int32_t timeout, int64_t *deadline);
/* At load: the stream mode (CANN_SIM_DEFER / CANN_SIM_SYNC), CANN_SIM_DELAY_MS, the fork handlers. */
void streams_load(void);
/* At exit: stop every worker (a task still in its simulated delay is abandoned) and join it. */
void streams_stop_at_exit(void);

#endif /* CANNSIM_SIM_INTERNAL_H */
