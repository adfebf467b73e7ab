// The worker pool of CKernels (fk_parallel_run, see include/CKernels.h): one persistent set of
// worker threads (one per extra core) for the whole process. Workers spin for a while after a
// job, so the ~20 µs products of a decode step can be split across cores at all, then sleep.

#define _GNU_SOURCE  // sched_getaffinity
#include "ck_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// MARK: - worker pool

// A job is published by bumping `gen`; tasks are claimed with a CAS on `claim` = (gen << 32) |
// next task, so a worker still finishing an older job can never claim a task of a newer one
// (it would see a different generation), and `fn`/`ctx`/`ntasks` read after acquiring `gen`
// belong to the job whose tasks it manages to claim.

#define POOL_MAX_WORKERS 63
#define POOL_SPIN_NS 300000L  // a worker spins this long after its last job, then sleeps

static struct {
    pthread_once_t once;
    int nworkers;
    pthread_mutex_t submit;  // one job at a time
    pthread_mutex_t mu;      // sleeping workers
    pthread_cond_t cv;
    atomic_long gen;
    atomic_ulong claim;
    atomic_long done;
    atomic_int sleepers;
    _Atomic(fk_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_long ntasks;
    // The request of fk_parallel_prefetch (a job of one task, pf_task, that nobody waits for).
    _Atomic(const char *) pf_ptr;
    atomic_long pf_bytes;
} pool = {.once = PTHREAD_ONCE_INIT, .submit = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

#define POOL_PF_MAX (1L << 20)

/// The task of a prefetch job: the lines of the request, stopping when a newer job appears.
static void pf_task(void *ctx, long task) {
    (void)task;
    const long g = (long)(intptr_t)ctx;
    const char *p = atomic_load_explicit(&pool.pf_ptr, memory_order_relaxed);
    const long n = atomic_load_explicit(&pool.pf_bytes, memory_order_relaxed);
    for (long o = 0; o < n; o += 64 * 16) {
        if (atomic_load_explicit(&pool.gen, memory_order_relaxed) != g) return;
        const long e = o + 64 * 16 < n ? o + 64 * 16 : n;
        for (long l = o; l < e; l += 64) __builtin_prefetch(p + l, 0, 2);
    }
}

/// Before a job's fn / ctx / ntasks are replaced: no task of any earlier job can be claimed
/// any more (the claim carries generation `g` and no task left). Without it, a worker that had
/// seen the generation of a prefetch nobody claimed yet (fk_parallel_prefetch) could read the
/// next job's fn and ctx, then claim the prefetch's task 0 and run the new job's task 0 under
/// it, counting it in `done`: the caller could then return while a task still ran.
static void close_claims(long g) {
    atomic_store_explicit(&pool.claim, (((unsigned long)g & 0xFFFFFFFFUL) << 32) | 0xFFFFFFFFUL, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

/// Claims and runs tasks of generation `g` until none is left.
static void pool_work(long g) {
    // Acquire: a job's fn / ctx / ntasks seen here come with its close_claims (below), so the
    // claim read next can no longer be an older job's unclaimed task.
    fk_task_fn fn = atomic_load_explicit(&pool.fn, memory_order_acquire);
    void *ctx = atomic_load_explicit(&pool.ctx, memory_order_acquire);
    long n = atomic_load_explicit(&pool.ntasks, memory_order_acquire);
    const unsigned long tag = (unsigned long)g & 0xFFFFFFFFUL;
    unsigned long c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    for (;;) {
        if ((c >> 32) != tag || (long)(c & 0xFFFFFFFFUL) >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire)) continue;
        fn(ctx, (long)(c & 0xFFFFFFFFUL));
        // Nobody waits for a prefetch, and `done` may already count a newer job's tasks.
        if (fn != pf_task) atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    }
}

static void *pool_worker(void *arg) {
    (void)arg;
    long seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
    for (;;) {
        long g = atomic_load_explicit(&pool.gen, memory_order_acquire);
        if (g == seen) {
            long start = now_ns();
            int spins = 0;
            while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen) {
                cpu_relax();
                if (++spins % 256 == 0 && now_ns() - start > POOL_SPIN_NS) {
                    pthread_mutex_lock(&pool.mu);
                    atomic_fetch_add(&pool.sleepers, 1);
                    // seq_cst pairs with the publisher's store of gen / load of sleepers.
                    while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.cv, &pool.mu);
                    atomic_fetch_sub(&pool.sleepers, 1);
                    pthread_mutex_unlock(&pool.mu);
                    break;
                }
            }
        }
        seen = g;
        pool_work(g);
    }
    return NULL;
}

/// Threads to use: FORGE_THREADS if set (1 = no pool), else the CPUs this process may run on.
static long pool_threads(void) {
    const char *env = getenv("FORGE_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1) return v;
    }
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c;
    }
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

static void pool_start(void) {
    long cores = pool_threads();
    int n = cores > 1 ? (int)(cores - 1) : 0;
    if (n > POOL_MAX_WORKERS) n = POOL_MAX_WORKERS;
    int started = 0;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, pool_worker, NULL) == 0) started++;
        pthread_attr_destroy(&attr);
    }
    pool.nworkers = started;
}

int fk_parallel_width(void) {
    pthread_once(&pool.once, pool_start);
    return pool.nworkers + 1;
}

void fk_parallel_run(long ntasks, fk_task_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    pthread_once(&pool.once, pool_start);
    if (ntasks == 1 || pool.nworkers == 0 || ntasks > 0x7FFFFFFFL || pthread_mutex_trylock(&pool.submit) != 0) {
        for (long i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    long g = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
    close_claims(g);
    atomic_store_explicit(&pool.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool.ntasks, ntasks, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.claim, ((unsigned long)g & 0xFFFFFFFFUL) << 32, memory_order_release);
    atomic_store(&pool.gen, g);  // seq_cst: either a sleeping worker sees it, or we see the sleeper
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv);
        pthread_mutex_unlock(&pool.mu);
    }
    pool_work(g);
    int spins = 0;
    while (atomic_load_explicit(&pool.done, memory_order_acquire) < ntasks) {
        cpu_relax();
        if (++spins % 4096 == 0) sched_yield();
    }
    pthread_mutex_unlock(&pool.submit);
}

void fk_parallel_prefetch(const void *p, long bytes) {
    if (!p || bytes <= 0) return;
    pthread_once(&pool.once, pool_start);
    if (pool.nworkers == 0 || atomic_load_explicit(&pool.sleepers, memory_order_relaxed) > 0) return;
    if (pthread_mutex_trylock(&pool.submit) != 0) return;
    atomic_store_explicit(&pool.pf_ptr, (const char *)p, memory_order_relaxed);
    atomic_store_explicit(&pool.pf_bytes, bytes < POOL_PF_MAX ? bytes : POOL_PF_MAX, memory_order_relaxed);
    long g = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
    close_claims(g);
    atomic_store_explicit(&pool.fn, pf_task, memory_order_relaxed);
    atomic_store_explicit(&pool.ctx, (void *)(intptr_t)g, memory_order_relaxed);
    atomic_store_explicit(&pool.ntasks, 1, memory_order_relaxed);
    atomic_store_explicit(&pool.claim, ((unsigned long)g & 0xFFFFFFFFUL) << 32, memory_order_release);
    atomic_store(&pool.gen, g);
    pthread_mutex_unlock(&pool.submit);
}
