/* The C kernels' one thread pool (see _native_pool.c for its design and invariants). */
#ifndef OPENACL_NATIVE_POOL_H
#define OPENACL_NATIVE_POOL_H

#include <stddef.h>

/* One task of a parallel loop: `task` in [0, count). */
typedef void (*PoolTask)(void *context, ptrdiff_t task);

/* Runs task(context, i) for every i in [0, count), on the pool's workers and the caller,
 * and returns when all have finished. Runs them all on the caller when the pool has one
 * thread, when count is 1, or when another thread's loop holds the pool (loops never
 * wait for one another and never nest onto the pool). Call without the GIL. */
void pool_run(ptrdiff_t count, PoolTask task, void *context);

/* The number of threads a loop uses (workers + the caller), at least 1. */
int pool_threads(void);

/* Sets the thread count (1 .. POOL_MAX_THREADS); workers start when a loop first needs
 * them. Returns 0, or -1 when `threads` is out of range. Waits for a running loop. */
int pool_set_threads(int threads);

/* Sets how long an idle worker spins before it sleeps, in microseconds (0: sleep at once). */
void pool_set_spin_us(long microseconds);
long pool_spin_us(void);

/* The calling thread's scratch buffer of at least `count` floats, kept for its next call
 * and freed when the thread ends; NULL when it cannot grow. One buffer per thread: a task
 * must not hold it across a call that may use it too (the kernels' tasks never nest). */
float *pool_scratch(ptrdiff_t count);

/* The calling thread's staging buffer `slot` (0 to POOL_STAGING_SLOTS - 1) of at least
 * `count` floats, or NULL: for a kernel's caller-side buffers (a padded image, a result
 * before compaction) around its pool_run, apart from the scratch its tasks take (which
 * the caller, running tasks too, also uses). Kept for the thread's next call (grown, never
 * shrunk), freed when the thread ends; its contents are not kept. */
float *pool_staging(int slot, ptrdiff_t count);

#define POOL_STAGING_SLOTS 2

#define POOL_MAX_THREADS 256

#endif
