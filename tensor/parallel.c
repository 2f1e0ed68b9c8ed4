/* tensor/parallel.c — the only file that includes <omp.h>: mft__parallel_for,
 * its public form mft_parallel_for (mft/parallel.h), and the thread-count
 * setting. Chunks are contiguous ranges handed out in
 * order, one per thread, so reductions that combine chunk partials in chunk
 * order are reproducible for a given thread count; mft__parallel_for_dynamic
 * hands out small chunks to whichever thread is free, for independent
 * items. */
#include <stdatomic.h>
#include <stdlib.h>
#include "internal.h"
#include "mft/parallel.h"
#ifdef MFT_HAVE_OPENMP
#include <omp.h>
#endif

/* 0 = not yet decided. Atomic: any thread may set it or decide it lazily
 * (two threads deciding at once store the same value). */
static atomic_int g_threads = 0;

#ifdef MFT_HAVE_OPENMP
static int default_threads(void) {
    const char *env = getenv("MFT_NUM_THREADS");
    if (env) {
        int n = atoi(env);
        if (n > 0) return n;
    }
    return omp_get_max_threads();
}
#endif

void mft_set_num_threads(int n) {
#ifdef MFT_HAVE_OPENMP
    atomic_store(&g_threads, n > 0 ? n : default_threads());
#else
    (void)n;
    atomic_store(&g_threads, 1);
#endif
}

int mft_num_threads(void) {
    int n = atomic_load(&g_threads);
    if (n <= 0) {
        mft_set_num_threads(0);
        n = atomic_load(&g_threads);
    }
    return n;
}

void mft__parallel_for(int64_t begin, int64_t end, int64_t grain, mft__range_fn fn, void *ctx) {
    int64_t n = end - begin;
    if (n <= 0) return;
#ifdef MFT_HAVE_OPENMP
    int nt = mft_num_threads();
    if (grain < 1) grain = 1;
    int64_t max_chunks = n / grain + (n % grain != 0);
    if (max_chunks < nt) nt = (int)max_chunks;
    if (nt > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(nt)
        {
            /* offsets from begin stay within [0, n]: no overflow near INT64_MAX */
            int64_t tid = omp_get_thread_num(), cnt = omp_get_num_threads();
            int64_t chunk = n / cnt + (n % cnt != 0);
            int64_t off = tid * chunk;
            if (off < n) fn(ctx, begin + off, begin + off + (chunk < n - off ? chunk : n - off));
        }
        return;
    }
#else
    (void)grain;
#endif
    fn(ctx, begin, end);
}

/* The public loop: the internal one after the checks a user's call needs. */
mft_status mft_parallel_for(int64_t begin, int64_t end, int64_t grain, mft__range_fn fn,
                            void *ctx) {
    if (!fn) {
        mft__set_error(MFT_ERR_NULL, "mft_parallel_for: fn is NULL (range [%lld, %lld))",
                       (long long)begin, (long long)end);
        return MFT_ERR_NULL;
    }
    if (begin > end) {
        mft__set_error(MFT_ERR_INVALID, "mft_parallel_for: begin %lld is greater than end %lld",
                       (long long)begin, (long long)end);
        return MFT_ERR_INVALID;
    }
    if (grain < 0) {
        mft__set_error(MFT_ERR_INVALID, "mft_parallel_for: grain %lld is negative",
                       (long long)grain);
        return MFT_ERR_INVALID;
    }
    /* end - begin must not overflow: ranges like [INT64_MIN, INT64_MAX] */
    if (begin < 0 && end > INT64_MAX + begin) {
        mft__set_error(MFT_ERR_OVERFLOW, "mft_parallel_for: range [%lld, %lld) has more than "
                       "INT64_MAX items", (long long)begin, (long long)end);
        return MFT_ERR_OVERFLOW;
    }
    mft__parallel_for(begin, end, grain, fn, ctx);
    return MFT_OK;
}

void mft__parallel_for_dynamic(int64_t begin, int64_t end, int64_t chunk, mft__range_fn fn,
                               void *ctx) {
    const int64_t n = end - begin;
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
#ifdef MFT_HAVE_OPENMP
    int nt = mft_num_threads();
    const int64_t chunks = (n + chunk - 1) / chunk;
    if (chunks < nt) nt = (int)chunks;
    if (nt > 1 && !omp_in_parallel()) {
        _Atomic int64_t next = begin;
#pragma omp parallel num_threads(nt)
        for (;;) {
            const int64_t b = atomic_fetch_add_explicit(&next, chunk, memory_order_relaxed);
            if (b >= end) break;
            fn(ctx, b, b + chunk < end ? b + chunk : end);
        }
        return;
    }
#endif
    fn(ctx, begin, end);
}
