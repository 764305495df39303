/* The C kernels' one thread pool: a parallel loop over task indices, on pthreads.
 *
 * Why: numpy's OpenBLAS keeps its own workers, which spin after each product and fight any
 * other threads (ours, or another process's) for the cores. The products and row kernels
 * that openacl owns run here instead, on one set of workers that spin briefly after a loop
 * (a model's next step usually follows within microseconds) and then sleep.
 *
 * Design and invariants:
 * - One loop at a time holds the pool (`busy`, taken with trylock). A loop that finds it
 *   held runs all its tasks on its own thread: loops never wait for each other, so calls
 *   from several Python threads, or a loop started inside a task, cannot deadlock.
 * - A loop is published under `lock` as (`job`, `sequence` + 1). A worker that sees a new
 *   sequence enters the job under `lock` (job->entered += 1) only while `job` is still
 *   published; it claims task indices until none are left, then leaves (job->entered -= 1).
 * - The indices are cut into one contiguous home block per participant (the caller is 0,
 *   worker i is i + 1), each with its own atomic counter. A participant claims from its
 *   home block first, then from the others in turn. The same thread so runs the same part
 *   of a repeated loop (a model's next run of the same product) and finds that part's
 *   operands (a weight's columns) still in its own cache; a late or busy thread's block
 *   is taken over by the others, so no participant waits for one that does not come. The caller, after its own claims run out, unpublishes the
 *   job under `lock` and waits for `entered` to reach 0: then every claimed task has
 *   finished and no worker can touch the job (it lives on the caller's stack) again.
 * - An idle worker spins on `sequence` for `spin_ns` (yielding the core to any runnable
 *   thread every few hundred spins), then sleeps on `wake`; publishing
 *   broadcasts only when someone sleeps (`sleepers`, under `lock`).
 * - Changing the thread count (under `busy`) stops and joins the workers; new ones start
 *   lazily. After fork() the child has no workers: an atfork handler resets the pool's
 *   state (its locks and counters) and the child starts its own workers when needed.
 * - Each thread has one scratch buffer (pool_scratch, a pthread key freed at thread exit);
 *   tasks never nest, so a task owns its thread's buffer until it returns. Its staging
 *   buffers (pool_staging) are separate: a caller fills them before its loop and reads
 *   them after, while its own thread runs tasks that take the scratch.
 */
#include "_native_pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

typedef struct {
    atomic_ptrdiff_t next; /* the block's next unclaimed task index */
    ptrdiff_t end;         /* one past its last */
    char pad[64 - sizeof(atomic_ptrdiff_t) - sizeof(ptrdiff_t)]; /* one cache line each */
} Block;

typedef struct {
    PoolTask task;
    void *context;
    int blocks;             /* home blocks: min(threads, count) */
    atomic_int entered;     /* workers inside this job */
    Block block[POOL_MAX_THREADS];
} Job;

static struct {
    pthread_mutex_t busy;  /* held by the loop that uses the workers */
    pthread_mutex_t lock;  /* guards job, sleepers, stopping and the worker list */
    pthread_cond_t wake;
    Job *job;              /* the published job, or NULL */
    atomic_ulong sequence; /* incremented for each published job */
    int sleepers;
    int stopping;
    int threads;           /* the setting: workers + the caller */
    int started;           /* workers running */
    pthread_t workers[POOL_MAX_THREADS];
    atomic_long spin_ns;
} pool = {
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .threads = 1,
    .spin_ns = 1000000,
};

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Runs the tasks of participant `home`'s block, then of every other block, until all are
 * claimed. */
static void run_tasks(Job *job, int home) {
    for (int turn = 0; turn < job->blocks; turn++) {
        Block *block = &job->block[(home + turn) % job->blocks];
        for (;;) {
            ptrdiff_t index = atomic_fetch_add_explicit(&block->next, 1,
                                                        memory_order_relaxed);
            if (index >= block->end)
                break;
            job->task(job->context, index);
        }
    }
}

/* Spins until `sequence` moves past `seen` or the spin budget is spent; returns 1 if it
 * moved. */
static int spin_for_work(unsigned long seen) {
    long budget = atomic_load_explicit(&pool.spin_ns, memory_order_relaxed);
    if (budget <= 0)
        return 0;
    long long deadline = now_ns() + budget;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&pool.sequence, memory_order_acquire) != seen)
            return 1;
        CPU_RELAX();
        if ((spins & 255) == 255) {
            if (now_ns() > deadline)
                return 0;
            sched_yield(); /* a runnable thread (the caller's next step, another process's
                            * work, numpy's BLAS workers) gets the core first */
        }
    }
}

static void *worker_main(void *argument) {
    int home = (int)(intptr_t)argument; /* its participant number: worker i is i + 1 */
    unsigned long seen = atomic_load(&pool.sequence);
    for (;;) {
        spin_for_work(seen);
        pthread_mutex_lock(&pool.lock);
        while (!pool.stopping && atomic_load(&pool.sequence) == seen) {
            pool.sleepers++;
            pthread_cond_wait(&pool.wake, &pool.lock);
            pool.sleepers--;
        }
        if (pool.stopping) {
            pthread_mutex_unlock(&pool.lock);
            return NULL;
        }
        seen = atomic_load(&pool.sequence);
        Job *job = pool.job;
        if (job != NULL)
            atomic_fetch_add(&job->entered, 1);
        pthread_mutex_unlock(&pool.lock);
        if (job != NULL) {
            run_tasks(job, home);
            atomic_fetch_sub_explicit(&job->entered, 1, memory_order_release);
        }
    }
}

/* Stops and joins every worker; called with `busy` held. */
static void stop_workers(void) {
    pthread_mutex_lock(&pool.lock);
    pool.stopping = 1;
    atomic_fetch_add(&pool.sequence, 1); /* spinning workers stop spinning at once */
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.started; i++)
        pthread_join(pool.workers[i], NULL);
    pool.started = 0;
    pool.stopping = 0;
}

/* Starts the missing workers; called with `busy` held. Fewer may start (resources): the
 * loop then simply has fewer helpers. */
static void start_workers(void) {
    while (pool.started < pool.threads - 1) {
        if (pthread_create(&pool.workers[pool.started], NULL, worker_main,
                           (void *)(intptr_t)(pool.started + 1)) != 0)
            return;
        pool.started++;
    }
}

void pool_run(ptrdiff_t count, PoolTask task, void *context) {
    if (count <= 0)
        return;
    if (count == 1 || pool.threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        for (ptrdiff_t i = 0; i < count; i++)
            task(context, i);
        return;
    }
    if (pool.started < pool.threads - 1)
        start_workers();
    Job job; /* (only its first `blocks` blocks are set and read) */
    job.task = task;
    job.context = context;
    job.blocks = count < pool.threads ? (int)count : pool.threads;
    for (int b = 0; b < job.blocks; b++) {
        atomic_init(&job.block[b].next, count * b / job.blocks);
        job.block[b].end = count * (b + 1) / job.blocks;
    }
    atomic_init(&job.entered, 0);
    pthread_mutex_lock(&pool.lock);
    pool.job = &job;
    atomic_fetch_add_explicit(&pool.sequence, 1, memory_order_release);
    if (pool.sleepers > 0)
        pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    run_tasks(&job, 0);
    pthread_mutex_lock(&pool.lock);
    pool.job = NULL;
    pthread_mutex_unlock(&pool.lock);
    for (unsigned spins = 0; atomic_load_explicit(&job.entered, memory_order_acquire) > 0;
         spins++) {
        CPU_RELAX();
        if ((spins & 1023) == 1023)
            sched_yield(); /* a worker descheduled mid-task: let it run */
    }
    pthread_mutex_unlock(&pool.busy);
}

int pool_threads(void) {
    return pool.threads;
}

int pool_set_threads(int threads) {
    if (threads < 1 || threads > POOL_MAX_THREADS)
        return -1;
    pthread_mutex_lock(&pool.busy);
    if (threads != pool.threads) {
        stop_workers();
        pool.threads = threads;
    }
    pthread_mutex_unlock(&pool.busy);
    return 0;
}

void pool_set_spin_us(long microseconds) {
    atomic_store(&pool.spin_ns, microseconds <= 0 ? 0 : microseconds * 1000);
}

long pool_spin_us(void) {
    return atomic_load(&pool.spin_ns) / 1000;
}

/* -- each thread's buffers (pool_scratch, pool_staging): kept for its next call, freed at
 * thread exit. Buffer 0 is the tasks' scratch, 1 + slot the staging slots. -- */
#define THREAD_BUFFERS (1 + POOL_STAGING_SLOTS)

typedef struct {
    float *data[THREAD_BUFFERS];
    ptrdiff_t capacity[THREAD_BUFFERS];
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void free_scratch(void *value) {
    Scratch *scratch = value;
    for (int i = 0; i < THREAD_BUFFERS; i++)
        free(scratch->data[i]);
    free(scratch);
}

static void make_scratch_key(void) {
    pthread_key_create(&scratch_key, free_scratch);
}

static float *thread_buffer(int index, ptrdiff_t count) {
    pthread_once(&scratch_once, make_scratch_key);
    Scratch *scratch = pthread_getspecific(scratch_key);
    if (scratch == NULL) {
        scratch = calloc(1, sizeof *scratch);
        if (scratch == NULL || pthread_setspecific(scratch_key, scratch) != 0) {
            free(scratch);
            return NULL;
        }
    }
    if (count > scratch->capacity[index]) {
        /* (not realloc: the old contents need no copy) */
        float *grown = malloc((size_t)count * sizeof(float));
        if (grown == NULL)
            return NULL;
        free(scratch->data[index]);
        scratch->data[index] = grown;
        scratch->capacity[index] = count;
    }
    return scratch->data[index];
}

float *pool_scratch(ptrdiff_t count) {
    return thread_buffer(0, count);
}

float *pool_staging(int slot, ptrdiff_t count) {
    if (slot < 0 || slot >= POOL_STAGING_SLOTS)
        return NULL;
    return thread_buffer(1 + slot, count);
}

/* fork(): the child keeps the parent's memory but none of its workers. Taking both locks
 * before the fork means no loop is mid-flight in the copied state. */
static void before_fork(void) {
    pthread_mutex_lock(&pool.busy);
    pthread_mutex_lock(&pool.lock);
}

static void after_fork_parent(void) {
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}

static void after_fork_child(void) {
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.job = NULL;
    pool.sleepers = 0;
    pool.stopping = 0;
    pool.started = 0;
}

__attribute__((constructor)) static void register_fork_handlers(void) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
