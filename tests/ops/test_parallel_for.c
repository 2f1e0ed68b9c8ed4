/* tests/ops/test_parallel_for.c — the public parallel loop mft_parallel_for
 * (mft/parallel.h) that user kernels use: every index of [begin, end) is
 * covered exactly once with 1 and 2 threads; the chunks are the documented
 * contiguous ranges in order, the first on the calling thread and each
 * other on a thread of its own; the grain caps the chunk count;
 * a call from inside a chunk runs serially on its thread; negative and huge
 * ranges work without overflow; per-chunk partials combined in chunk order
 * give a sum that does not depend on the schedule; bad arguments are refused
 * with a message and fn is not called. */
#include <stdatomic.h>
#include "mft/parallel.h"
#include "test_util.h"

#define MAXC 16
typedef struct chunks {
    _Atomic int n;
    int64_t b[MAXC], e[MAXC];
    uintptr_t thread[MAXC];
    _Atomic int *marks; /* per index, offset by base */
    int64_t base;
} chunks;

/* Which thread runs: the address of a thread-local differs per thread. */
static _Thread_local char tl_marker;
static uintptr_t this_thread(void) { return (uintptr_t)&tl_marker; }

static void record(void *ctx, int64_t b, int64_t e) {
    chunks *c = ctx;
    int k = atomic_fetch_add(&c->n, 1);
    if (k < MAXC) {
        c->b[k] = b;
        c->e[k] = e;
        c->thread[k] = this_thread();
    }
    if (c->marks)
        for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->marks[i - c->base], 1);
}

/* The chunks the header promises for n items from begin: t = min(threads,
 * ceil(n / max(grain, 1))), chunk = ceil(n / t). Returns the count. */
static int expected_chunks(int64_t begin, int64_t end, int64_t grain, int threads, int64_t *b,
                           int64_t *e) {
    const int64_t n = end - begin, g = grain < 1 ? 1 : grain;
    int64_t t = (n + g - 1) / g;
    if (t > threads) t = threads;
    if (n == 0) return 0;
    const int64_t chunk = (n + t - 1) / t;
    int k = 0;
    for (int64_t off = 0; off < n; off += chunk, k++) {
        b[k] = begin + off;
        e[k] = begin + (off + chunk < n ? off + chunk : n);
    }
    return k;
}

/* sorts the recorded chunks by begin (they may finish in any order) */
static void sort_chunks(chunks *c) {
    int n = atomic_load(&c->n);
    for (int i = 1; i < n && i < MAXC; i++)
        for (int j = i; j > 0 && c->b[j - 1] > c->b[j]; j--) {
            int64_t tb = c->b[j], te = c->e[j];
            uintptr_t tt = c->thread[j];
            c->b[j] = c->b[j - 1];
            c->e[j] = c->e[j - 1];
            c->thread[j] = c->thread[j - 1];
            c->b[j - 1] = tb;
            c->e[j - 1] = te;
            c->thread[j - 1] = tt;
        }
}

/* The library's thread count after asking for `want` (1 without OpenMP). */
static int threads_for(int want) {
    mft_set_num_threads(want);
    return mft_num_threads();
}

static void check_loop(int64_t begin, int64_t end, int64_t grain, int want) {
    const int threads = threads_for(want);
    CHECK(want == 1 ? threads == 1 : (threads == want || threads == 1));
    chunks c;
    memset(&c, 0, sizeof c);
    const int64_t n = end - begin;
    c.marks = calloc((size_t)(n > 0 ? n : 1), sizeof *c.marks);
    c.base = begin;
    TU_OK_S(mft_parallel_for(begin, end, grain, record, &c));
    for (int64_t i = 0; i < n; i++)
        CHECK_MSG(atomic_load(&c.marks[i]) == 1, "[%lld, %lld) grain %lld, %d threads: index %lld "
                  "covered %d times", (long long)begin, (long long)end, (long long)grain, threads,
                  (long long)(begin + i), atomic_load(&c.marks[i]));
    int64_t eb[MAXC], ee[MAXC];
    const int want_n = expected_chunks(begin, end, grain, threads, eb, ee);
    sort_chunks(&c);
    CHECK_MSG(atomic_load(&c.n) == want_n, "[%lld, %lld) grain %lld, %d threads: %d chunks, want %d",
              (long long)begin, (long long)end, (long long)grain, threads, atomic_load(&c.n), want_n);
    for (int k = 0; k < want_n && k < atomic_load(&c.n); k++) {
        CHECK_MSG(c.b[k] == eb[k] && c.e[k] == ee[k], "chunk %d is [%lld, %lld), want [%lld, %lld)",
                  k, (long long)c.b[k], (long long)c.e[k], (long long)eb[k], (long long)ee[k]);
        /* chunk 0 runs on the calling thread, every other on a thread of its own */
        CHECK_MSG((c.thread[k] == this_thread()) == (k == 0), "chunk %d ran on the %s thread", k,
                  c.thread[k] == this_thread() ? "calling" : "other");
        for (int j = 0; j < k; j++) CHECK(c.thread[j] != c.thread[k]);
    }
    free(c.marks);
}

static void test_covers_range_once_in_chunks(void) {
    for (int want = 1; want <= 2; want++) {
        check_loop(0, 1000, 1, want);
        check_loop(0, 1001, 1, want);    /* odd count: the last chunk is shorter */
        check_loop(-7, 13, 1, want);     /* negative begin */
        check_loop(0, 100, 60, want);    /* grain 60: two chunks of 50 at 2 threads */
        check_loop(0, 100, 100, want);   /* at most grain items: one chunk */
        check_loop(0, 100, 0, want);     /* grain 0 counts as 1 */
        check_loop(0, 1, 1, want);
        check_loop(5, 5, 1, want);       /* empty: no call */
    }
    mft_set_num_threads(0);
}

/* The internal chunk arithmetic stays in range at the top of int64. */
static void test_huge_range(void) {
    for (int want = 1; want <= 2; want++) {
        const int threads = threads_for(want);
        chunks c;
        memset(&c, 0, sizeof c);
        const int64_t end = INT64_MAX, begin = INT64_MAX - 11;
        TU_OK_S(mft_parallel_for(begin, end, 1, record, &c));
        int64_t eb[MAXC], ee[MAXC];
        const int n = expected_chunks(begin, end, 1, threads, eb, ee);
        sort_chunks(&c);
        CHECK(atomic_load(&c.n) == n);
        for (int k = 0; k < n; k++) CHECK(c.b[k] == eb[k] && c.e[k] == ee[k]);
        /* [INT64_MIN + 1, INT64_MAX): more than INT64_MAX items */
        CHECK(mft_parallel_for(INT64_MIN + 1, INT64_MAX, 1, record, &c) == MFT_ERR_OVERFLOW);
        CHECK_ERR(MFT_ERR_OVERFLOW, "mft_parallel_for");
    }
    mft_set_num_threads(0);
}

/* A loop called from inside a chunk runs serially: one call with the whole
 * inner range, on the outer chunk's thread. */
typedef struct nested {
    _Atomic int inner_calls, bad;
} nested;
typedef struct inner_ctx {
    nested *nest;
    uintptr_t outer_thread;
} inner_ctx;
static void inner(void *ctx, int64_t b, int64_t e) {
    inner_ctx *ic = ctx;
    atomic_fetch_add(&ic->nest->inner_calls, 1);
    if (b != 0 || e != 1000 || this_thread() != ic->outer_thread) atomic_fetch_add(&ic->nest->bad, 1);
}
static void outer(void *ctx, int64_t b, int64_t e) {
    (void)b;
    (void)e;
    inner_ctx ic = {ctx, this_thread()};
    if (mft_parallel_for(0, 1000, 1, inner, &ic) != MFT_OK) atomic_fetch_add(&ic.nest->bad, 1);
}

static void test_nested_is_serial(void) {
    const int threads = threads_for(2);
    nested ns;
    atomic_init(&ns.inner_calls, 0);
    atomic_init(&ns.bad, 0);
    TU_OK_S(mft_parallel_for(0, 2, 1, outer, &ns));
    /* one inner call per outer chunk: 2 chunks with 2 threads, else 1 */
    CHECK_EQ_I(atomic_load(&ns.inner_calls), threads >= 2 ? 2 : 1);
    CHECK_EQ_I(atomic_load(&ns.bad), 0);
    mft_set_num_threads(0);
}

/* Per-chunk partial sums combined in chunk order: the same bits on every
 * run for a thread count, and equal (within rounding) to the serial sum. */
typedef struct partials {
    const float *v;
    int64_t chunk;
    double part[MAXC];
} partials;
static void sum_range(void *ctx, int64_t b, int64_t e) {
    partials *p = ctx;
    float s = 0.0f;
    for (int64_t i = b; i < e; i++) s += p->v[i];
    p->part[b / p->chunk] = s;
}

static void test_reproducible_reduction(void) {
    enum { N = 100003 };
    float *v = malloc(N * sizeof *v);
    uint64_t rng = 99;
    double serial = 0.0;
    for (int i = 0; i < N; i++) {
        v[i] = (float)((double)(tu_rng_next(&rng) % 2000001) * 1e-6 - 1.0);
        serial += v[i];
    }
    for (int want = 1; want <= 2; want++) {
        const int threads = threads_for(want);
        double sums[3];
        for (int rep = 0; rep < 3; rep++) {
            partials p;
            memset(&p, 0, sizeof p);
            p.v = v;
            p.chunk = (N + threads - 1) / threads;
            TU_OK_S(mft_parallel_for(0, N, 1024, sum_range, &p));
            sums[rep] = 0.0;
            for (int k = 0; k < threads; k++) sums[rep] += p.part[k];
        }
        CHECK(sums[0] == sums[1] && sums[1] == sums[2]);
        CHECK_NEAR(sums[0], serial, 0.05);
    }
    mft_set_num_threads(0);
    free(v);
}

static int g_called = 0;
static void count_calls(void *ctx, int64_t b, int64_t e) {
    (void)ctx;
    (void)b;
    (void)e;
    g_called++;
}

static void test_bad_arguments(void) {
    g_called = 0;
    CHECK(mft_parallel_for(10, 5, 1, count_calls, NULL) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_parallel_for: begin 10 is greater than end 5");
    CHECK(mft_parallel_for(0, 5, 1, NULL, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_parallel_for: fn is NULL (range [0, 5))");
    CHECK(mft_parallel_for(0, 5, -1, count_calls, NULL) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_parallel_for: grain -1 is negative");
    CHECK(g_called == 0);
    TU_OK_S(mft_parallel_for(3, 3, 1, count_calls, NULL));
    CHECK(g_called == 0);
}

int main(void) {
    RUN(test_covers_range_once_in_chunks);
    RUN(test_huge_range);
    RUN(test_nested_is_serial);
    RUN(test_reproducible_reduction);
    RUN(test_bad_arguments);
    TEST_MAIN_END();
}
