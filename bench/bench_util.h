/* bench/bench_util.h — header-only helpers shared by the mft benchmarks.
 *
 * Include this header FIRST in a bench_*.c: it asks for POSIX 2008
 * (clock_gettime) before any system header is read.
 *
 * What is here:
 *   - timing: bench_now() / bench_now_ns() on CLOCK_MONOTONIC;
 *   - optimiser barriers: bench_clobber(), bench_escape(p);
 *   - statistics: bench_summarize() (median, min, max, quartiles) of samples;
 *   - reference loops: bench_memcpy_par() (memcpy split over T threads) and
 *     STREAM-style kernels written here (copy, scale, add, triad, and a read
 *     loop "sum"), OpenMP parallel with an explicit thread count and
 *     vectorisable;
 *   - the measurement driver bench_run(): warm-up, then `reps` repetitions in
 *     which every case is timed once, round-robin (the starting case rotates
 *     each repetition, or the order is shuffled), so drift of the machine
 *     hits every case alike;
 *   - machine load: bench_load_begin()/bench_load_end() -- how many cores OTHER
 *     processes (and the hypervisor, as steal) used during a measurement, so
 *     a run disturbed by a build or a test on a small machine is detected;
 *   - memory: bench_alloc() (page-aligned, pages touched up front),
 *     bench_minor_faults() (page faults so far: a kernel that allocates fresh
 *     pages per call shows up here);
 *   - argument parsing: bench_parse_int_list("1,2"), bench_parse_dims("8x64x56x56");
 *   - JSON: bench_json_str() (escaped string), bench_json_num() (finite or null).
 *
 * Rule of the house: speed is reported as ratios measured side by side in one
 * run (medians), never as one absolute time. */
#ifndef MFT_BENCH_UTIL_H
#define MFT_BENCH_UTIL_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------------ timing */
/* Monotonic time in nanoseconds / seconds. */
static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ optimiser barriers */
/* bench_clobber(): the compiler must assume all memory was read and written.
 * bench_escape(p): the compiler must assume p (and what it points to) is used. */
#if defined(__GNUC__) || defined(__clang__)
static inline void bench_clobber(void) { __asm__ __volatile__("" : : : "memory"); }
static inline void bench_escape(const void *p) { __asm__ __volatile__("" : : "g"(p) : "memory"); }
#else
static volatile const void *bench_sink_;
static inline void bench_clobber(void) { bench_sink_ = NULL; }
static inline void bench_escape(const void *p) { bench_sink_ = p; }
#endif

/* ------------------------------------------------------------------ statistics */
typedef struct bench_stats {
    int n;
    double median, min, max, p25, p75; /* seconds */
} bench_stats;

static inline int bench_cmp_double_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
/* Linear-interpolated quantile q in [0,1] of n sorted values. */
static inline double bench_quantile_sorted(const double *s, int n, double q) {
    if (n <= 0) return NAN;
    double pos = q * (double)(n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return s[n - 1];
    double frac = pos - (double)lo;
    return s[lo] + frac * (s[lo + 1] - s[lo]);
}
/* Summary of n samples (the input is not modified). */
static inline bench_stats bench_summarize(const double *samples, int n) {
    bench_stats st = {n, NAN, NAN, NAN, NAN, NAN};
    if (n <= 0) return st;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return st;
    memcpy(s, samples, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double_);
    st.min = s[0];
    st.max = s[n - 1];
    st.median = bench_quantile_sorted(s, n, 0.5);
    st.p25 = bench_quantile_sorted(s, n, 0.25);
    st.p75 = bench_quantile_sorted(s, n, 0.75);
    free(s);
    return st;
}
static inline double bench_median(const double *samples, int n) {
    return bench_summarize(samples, n).median;
}

/* ------------------------------------------------------------------ threads */
static inline int bench_have_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
/* Processors available to this process. */
static inline int bench_num_procs(void) {
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

/* Start-up notes every bench prints: an OMP_NUM_THREADS that --threads
 * overrides, more threads than processors, a build without OpenMP. */
static inline void bench_env_warnings(const char *prog, const int *threads, int nthreads) {
    if (getenv("OMP_NUM_THREADS"))
        fprintf(stderr, "%s: note: OMP_NUM_THREADS=%s is set; thread counts come from --threads\n",
                prog, getenv("OMP_NUM_THREADS"));
    for (int t = 0; t < nthreads; t++)
        if (threads[t] > bench_num_procs())
            fprintf(stderr, "%s: warning: %d threads > %d processors\n", prog, threads[t],
                    bench_num_procs());
    if (!bench_have_openmp())
        fprintf(stderr, "%s: warning: built without OpenMP; reference loops run on 1 thread\n",
                prog);
}

/* ------------------------------------------------------------------ machine load
 * Linux only (/proc/stat); elsewhere ok = 0 and the numbers are NaN.
 * other_cores: CPU time used by everything except this process during the
 * window, divided by the window's wall time (0.0 = quiet machine, 1.0 = one
 * core fully busy elsewhere). On a 2-core machine a 2-thread measurement is
 * meaningless once this reaches a few tenths: a thread of the parallel
 * region then waits a scheduler time slice (milliseconds). steal_cores: the
 * same for time the hypervisor gave to other guests. Resolution: one clock
 * tick (10 ms) of CPU time, so use windows of a second or so. */
#define BENCH_BUSY_THRESHOLD 0.25 /* other_cores above this: "disturbed" */

typedef struct bench_load_snap {
    int ok;
    double wall, own_cpu, busy, steal; /* seconds */
} bench_load_snap;
typedef struct bench_load {
    int ok;
    double wall, other_cores, steal_cores;
} bench_load;

static inline int bench_read_proc_stat_(double *busy, double *steal) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 7) return 0;
    long tck = sysconf(_SC_CLK_TCK);
    if (tck <= 0) tck = 100;
    /* user nice system idle iowait irq softirq steal; guest time is inside user */
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)tck;
    *steal = n >= 8 ? (double)v[7] / (double)tck : 0.0;
    return 1;
}
static inline bench_load_snap bench_load_begin(void) {
    bench_load_snap s = {0, 0, 0, 0, 0};
    struct timespec ts;
    s.wall = bench_now();
    s.own_cpu = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0
                    ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec
                    : NAN;
    s.ok = bench_read_proc_stat_(&s.busy, &s.steal) && !isnan(s.own_cpu);
    return s;
}
static inline bench_load bench_load_end(const bench_load_snap *s0) {
    bench_load_snap s1 = bench_load_begin();
    bench_load l = {0, s1.wall - s0->wall, NAN, NAN};
    if (!s0->ok || !s1.ok || l.wall <= 0) return l;
    double other = (s1.busy - s0->busy) - (s1.own_cpu - s0->own_cpu);
    l.ok = 1;
    l.other_cores = other > 0 ? other / l.wall : 0.0;
    l.steal_cores = (s1.steal - s0->steal) / l.wall;
    return l;
}
/* True when the window was disturbed by other work on the machine. */
static inline int bench_load_disturbed(const bench_load *l) {
    return l->ok &&
           (l->other_cores > BENCH_BUSY_THRESHOLD || l->steal_cores > BENCH_BUSY_THRESHOLD);
}
/* Sleeps about `seconds` (for waiting out a disturbance). */
static inline void bench_sleep(double seconds) {
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ memory */
/* Page-aligned buffer of nbytes (rounded up to a page), every page written
 * once so first-touch page faults are paid here and not inside a timing.
 * Exits the program when out of memory. Release with free(). */
static inline void *bench_alloc(size_t nbytes) {
    size_t align = 4096, len = (nbytes + align - 1) / align * align;
    if (len == 0) len = align;
    void *p = aligned_alloc(align, len);
    if (!p) {
        fprintf(stderr, "bench_alloc: out of memory (%zu bytes)\n", len);
        exit(1);
    }
    memset(p, 0, len);
    return p;
}
/* Minor page faults of this process so far (getrusage), -1 if unknown.
 * Around one call of an operation it shows whether the call touched fresh
 * pages (e.g. a result allocation glibc served with a new mmap). */
static inline long bench_minor_faults(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
    return u.ru_minflt;
}

/* Fills n floats with a cheap deterministic pattern (not all zero, so a copy
 * that did nothing is caught by a compare). */
static inline void bench_fill_f32(float *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (float)(x >> 8) * (1.0f / 16777216.0f);
    }
}

/* ------------------------------------------------------------------ reference loops
 * The machine's copy (add, read) bandwidth, measured with the same thread
 * count as the kernel under test. Each thread gets one contiguous chunk
 * (static schedule), as a well-written copy kernel would. The STREAM-style loops are plain
 * indexed loops over restrict pointers marked `omp simd`, so with -O2/-O3
 * they compile to vector loads/stores. */

/* memcpy of nbytes split into `threads` contiguous chunks (64-byte aligned
 * boundaries); threads == 1 is a plain libc memcpy. */
static inline void bench_memcpy_par(void *dst, const void *src, size_t nbytes, int threads) {
    if (threads <= 1 || !bench_have_openmp()) {
        memcpy(dst, src, nbytes);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        size_t chunk = (nbytes / nt + 63) / 64 * 64;
        size_t lo = id * chunk, hi = lo + chunk;
        if (hi > nbytes) hi = nbytes;
        if (lo < hi) memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
#endif
}

/* STREAM copy:  a[i] = b[i] */
static inline void bench_stream_copy_f32(float *restrict a, const float *restrict b, size_t n,
                                         int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) num_threads(threads)
#endif
    for (size_t i = 0; i < n; i++) a[i] = b[i];
}
/* STREAM scale: a[i] = s * b[i] */
static inline void bench_stream_scale_f32(float *restrict a, const float *restrict b, float s,
                                          size_t n, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) num_threads(threads)
#endif
    for (size_t i = 0; i < n; i++) a[i] = s * b[i];
}
/* STREAM add:   a[i] = b[i] + c[i] */
static inline void bench_stream_add_f32(float *restrict a, const float *restrict b,
                                        const float *restrict c, size_t n, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) num_threads(threads)
#endif
    for (size_t i = 0; i < n; i++) a[i] = b[i] + c[i];
}
/* STREAM triad: a[i] = b[i] + s * c[i] */
static inline void bench_stream_triad_f32(float *restrict a, const float *restrict b,
                                          const float *restrict c, float s, size_t n, int threads) {
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) num_threads(threads)
#endif
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
/* STREAM-style read ("sum"): returns the sum of b[0..n) -- the machine's read
 * bandwidth, the reference for a reduction (reads n floats, writes nothing).
 * Each thread sums one contiguous chunk (static, as bench_memcpy_par) into 32
 * independent f32 lanes (4 AVX vectors: the adds' latency is hidden without
 * -ffast-math or an `omp simd reduction`); the partials are added in f64.
 * The result is only for verification and to keep the loads alive: its
 * rounding differs from a sequential sum. */
static inline double bench_stream_sum_f32(const float *restrict b, size_t n, int threads) {
    double total = 0.0;
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : total)
#endif
    {
        size_t nt = 1, id = 0;
#ifdef _OPENMP
        nt = (size_t)omp_get_num_threads();
        id = (size_t)omp_get_thread_num();
#endif
        size_t chunk = (n / nt + 15) / 16 * 16; /* 64-byte multiples */
        size_t lo = id * chunk, hi = lo + chunk;
        if (hi > n) hi = n;
        if (lo > n) lo = n;
        float acc[32];
        for (int j = 0; j < 32; j++) acc[j] = 0.0f;
        size_t i = lo;
        for (; i + 32 <= hi; i += 32)
            for (int j = 0; j < 32; j++) acc[j] += b[i + j];
        double s = 0.0;
        for (; i < hi; i++) s += (double)b[i];
        for (int j = 0; j < 32; j++) s += (double)acc[j];
        total += s;
    }
    return total;
}

/* FMA peak reference: `iters` iterations of 12 independent F32 FMA chains
 * (16 lanes each when compiled with AVX-512F, else 8 with AVX2+FMA; enough
 * chains to cover the FMA latency on two pipes) on every thread. Returns the FLOPs done (2 per FMA
 * lane); divide by the elapsed time for the machine's F32 FMA peak at that
 * thread count, the denominator of the conv benchmarks' "of peak" ratios.
 * Without AVX2+FMA it runs the same loop on scalars (a portable lower
 * bound). */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
static inline double bench_fma_peak_flops(long iters, int threads) {
    double chk = 0.0;
    (void)threads;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : chk)
#endif
    {
#if defined(__AVX512F__)
        const __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
        for (long i = 0; i < iters; i++) {
            a0 = _mm512_fmadd_ps(a0, b, c); a1 = _mm512_fmadd_ps(a1, b, c);
            a2 = _mm512_fmadd_ps(a2, b, c); a3 = _mm512_fmadd_ps(a3, b, c);
            a4 = _mm512_fmadd_ps(a4, b, c); a5 = _mm512_fmadd_ps(a5, b, c);
            a6 = _mm512_fmadd_ps(a6, b, c); a7 = _mm512_fmadd_ps(a7, b, c);
            a8 = _mm512_fmadd_ps(a8, b, c); a9 = _mm512_fmadd_ps(a9, b, c);
            a10 = _mm512_fmadd_ps(a10, b, c); a11 = _mm512_fmadd_ps(a11, b, c);
            __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                             "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
        }
        __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
        s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
        chk += (double)_mm512_reduce_add_ps(s);
#elif defined(__AVX2__) && defined(__FMA__)
        const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
        __m256 a0 = _mm256_set1_ps(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
        for (long i = 0; i < iters; i++) {
            a0 = _mm256_fmadd_ps(a0, b, c); a1 = _mm256_fmadd_ps(a1, b, c);
            a2 = _mm256_fmadd_ps(a2, b, c); a3 = _mm256_fmadd_ps(a3, b, c);
            a4 = _mm256_fmadd_ps(a4, b, c); a5 = _mm256_fmadd_ps(a5, b, c);
            a6 = _mm256_fmadd_ps(a6, b, c); a7 = _mm256_fmadd_ps(a7, b, c);
            a8 = _mm256_fmadd_ps(a8, b, c); a9 = _mm256_fmadd_ps(a9, b, c);
            a10 = _mm256_fmadd_ps(a10, b, c); a11 = _mm256_fmadd_ps(a11, b, c);
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5),
                             "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
        }
        __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                 _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
        s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
        float o[8];
        _mm256_storeu_ps(o, s);
        chk += (double)o[0];
#else
        float a[12] = {0};
        for (long i = 0; i < iters; i++)
            for (int j = 0; j < 12; j++) a[j] = a[j] * 0.9999f + 1e-4f;
        for (int j = 0; j < 12; j++) chk += (double)a[j];
#endif
    }
    bench_escape(&chk);
    int nt = 1;
#ifdef _OPENMP
    nt = threads;
#endif
#if defined(__AVX512F__)
    return (double)iters * 12.0 * 32.0 * nt;
#elif defined(__AVX2__) && defined(__FMA__)
    return (double)iters * 12.0 * 16.0 * nt;
#else
    return (double)iters * 12.0 * 2.0 * nt;
#endif
}

/* ------------------------------------------------------------------ the driver */
/* One measured operation. fn(ctx) runs it once and returns 0, or non-zero on
 * failure (the driver then stops and returns that value). `bytes` is the
 * traffic one call is credited with (for bandwidth = bytes / median time). */
typedef int (*bench_fn)(void *ctx);
typedef struct bench_case {
    const char *key;  /* machine name, used in JSON */
    const char *desc; /* human description */
    bench_fn fn;
    void *ctx;
    double bytes;
    double *samples; /* reps entries, filled by bench_run (caller-owned) */
    bench_stats stats;
} bench_case;

typedef struct bench_opts {
    int reps;    /* timed samples per case (the median is taken over these) */
    int warmup;  /* untimed calls of every case before the first repetition */
    int pre;     /* untimed calls right before each sample (cache state alike) */
    int inner;   /* calls per sample; the sample is their mean time */
    int shuffle; /* 0: rotate the order each repetition; 1: a fresh (seeded)
                    random order each repetition, so no case always follows
                    the same neighbour */
    int blocked; /* 1: each case's repetitions back to back, case after case
                    (bench/compare_cnn.py times PyTorch so: a case's data
                    stays in cache between its samples) */
} bench_opts;

static inline bench_opts bench_default_opts(void) {
    bench_opts o = {15, 2, 1, 1, 0, 0};
    return o;
}

/* The order of repetition r: rotation r, r+1, ..., r-1 (mod n), or with
 * shuffle a Fisher-Yates permutation from a fixed seed (the same sequence of
 * orders every run). order[] has n entries. */
static inline void bench_order_(int *order, int n, int r, int shuffle, uint64_t *state) {
    for (int k = 0; k < n; k++) order[k] = (r + k) % n;
    if (!shuffle) return;
    for (int k = n - 1; k > 0; k--) {
        *state = *state * 6364136223846793005u + 1442695040888963407u;
        int j = (int)((*state >> 33) % (uint64_t)(k + 1));
        int t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
}

/* Runs every case: `warmup` calls each, then `reps` repetitions; in
 * repetition r the cases run in the order r, r+1, ..., r-1 (mod ncases) (or
 * a random order, o->shuffle; or with o->blocked all repetitions of case 0,
 * then of case 1, ...), each one as `pre` untimed calls followed by
 * `inner` timed calls. Fills samples[] and stats. Returns 0 or the first
 * non-zero fn() result. */
static inline int bench_run(bench_case *cases, int ncases, const bench_opts *o) {
    int reps = o->reps > 0 ? o->reps : 1, inner = o->inner > 0 ? o->inner : 1;
    int *order = malloc((size_t)(ncases > 0 ? ncases : 1) * sizeof *order);
    uint64_t state = 0x9e3779b97f4a7c15u;
    if (!order) return -1;
    for (int c = 0; c < ncases; c++)
        for (int w = 0; w < o->warmup; w++) {
            int rc = cases[c].fn(cases[c].ctx);
            if (rc) {
                free(order);
                return rc;
            }
        }
    /* repetition-major (rotated or shuffled order), or case-major (blocked) */
    const int nouter = o->blocked ? ncases : reps, ninner = o->blocked ? reps : ncases;
    for (int a = 0; a < nouter; a++) {
        if (!o->blocked) bench_order_(order, ncases, a, o->shuffle, &state);
        for (int b = 0; b < ninner; b++) {
            const int r = o->blocked ? b : a;
            bench_case *bc = &cases[o->blocked ? a : order[b]];
            for (int w = 0; w < o->pre; w++) {
                int rc = bc->fn(bc->ctx);
                if (rc) {
                    free(order);
                    return rc;
                }
            }
            bench_clobber();
            uint64_t t0 = bench_now_ns();
            for (int i = 0; i < inner; i++) {
                int rc = bc->fn(bc->ctx);
                if (rc) {
                    free(order);
                    return rc;
                }
            }
            bench_clobber();
            uint64_t t1 = bench_now_ns();
            bc->samples[r] = (double)(t1 - t0) * 1e-9 / (double)inner;
        }
    }
    free(order);
    for (int c = 0; c < ncases; c++) cases[c].stats = bench_summarize(cases[c].samples, reps);
    return 0;
}

/* Bandwidth in GB/s (1e9 bytes) of `bytes` moved in `seconds`. */
static inline double bench_gbps(double bytes, double seconds) {
    return seconds > 0 ? bytes / seconds * 1e-9 : NAN;
}

/* ------------------------------------------------------------------ argument parsing */
/* Parses a positive integer; returns 0 on success. */
static inline int bench_parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v <= 0 || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}
/* "1,2,4" -> out[0..n-1]; returns n (>= 1) or -1 on a malformed list. */
static inline int bench_parse_int_list(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v <= 0 || v > 4096 || n >= max) return -1;
        out[n++] = (int)v;
        if (*end == ',') {
            p = end + 1;
            if (!*p) return -1;
        } else if (*end) {
            return -1;
        } else {
            p = end;
        }
    }
    return n > 0 ? n : -1;
}
/* "8x64x56x56" or "8,64,56,56" -> dims; returns the rank (>= 1) or -1. */
static inline int bench_parse_dims(const char *s, int64_t *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v <= 0 || n >= max) return -1;
        out[n++] = (int64_t)v;
        if (*end == ',' || *end == 'x' || *end == 'X') {
            p = end + 1;
            if (!*p) return -1;
        } else if (*end) {
            return -1;
        } else {
            p = end;
        }
    }
    return n > 0 ? n : -1;
}
/* Writes dims as "8x64x56x56" into buf. */
static inline void bench_format_dims(char *buf, size_t len, const int64_t *d, int n) {
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%lld", i ? "x" : "", (long long)d[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* ------------------------------------------------------------------ JSON output */
/* A JSON string literal with escapes. */
static inline void bench_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
        } else if (ch < 0x20) {
            fprintf(f, "\\u%04x", ch);
        } else {
            fputc(ch, f);
        }
    }
    fputc('"', f);
}
/* A JSON number, or null for NaN/inf (JSON has neither). */
static inline void bench_json_num(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* ------------------------------------------------------------------ CNN operator benches
 * The shared driver of bench_conv / bench_pool / bench_norm / bench_resize /
 * bench_gemm (the protocol bench/compare_cnn.py reads):
 *   bench_<fam> [--threads 1,2] [--reps 15] [--json] [--blocked]
 * (--blocked: each case's samples back to back, bench_opts.blocked, as
 * compare_cnn.py times PyTorch). For each thread count: the two references (STREAM copy over 2 x 128 MB,
 * counting read + write; the FMA peak, bench_fma_peak_flops), medians of 5,
 * then every case through bench_run. Output: a human table (time, GFLOP/s or
 * GB/s, the fraction of the reference, and a label per case from `label`,
 * e.g. the kernel that ran), or with --json one object
 *   {"bench":NAME,"results":[{"threads":T,"refs":{"fma_peak_gflops":G,
 *    "stream_copy_gbs":B},"cases":[{"key":K,"seconds":S,"flops":F,
 *    "bytes":Y}]}]}
 * flops[i] = useful FLOPs of one call of case i (0: memory-bound, compared
 * with STREAM through cases[i].bytes). set_threads applies a thread count to
 * the library. */
typedef struct bench_cnn_args {
    int threads[8], nth, reps, json, blocked;
} bench_cnn_args;

/* Parses the CLI; returns 0, or 2 after printing the usage. */
static inline int bench_cnn_parse(int argc, char **argv, const char *name, bench_cnn_args *a) {
    a->threads[0] = 1;
    a->threads[1] = 2;
    a->nth = 2;
    a->reps = 15;
    a->json = 0;
    a->blocked = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            a->nth = bench_parse_int_list(argv[++i], a->threads, 8);
            if (a->nth < 1) goto usage;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (bench_parse_int(argv[++i], &a->reps) || a->reps < 1) goto usage;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = 1;
        } else if (!strcmp(argv[i], "--blocked")) {
            a->blocked = 1;
        } else {
            goto usage;
        }
    }
    return 0;
usage:
    fprintf(stderr, "usage: %s [--threads 1,2] [--reps 15] [--json] [--blocked]\n", name);
    return 2;
}

/* Runs and reports every case at every thread count (cases[i].samples are
 * allocated here). Returns 0, or 1 when a case fails or memory runs out. */
static inline int bench_cnn_run(const char *name, bench_case *cases, const double *flops, int n,
                                const bench_cnn_args *a, void (*set_threads)(int),
                                const char *(*label)(int i, void *ctx), void *label_ctx) {
    const size_t sn = (size_t)32 << 20; /* 2 x 128 MB */
    float *sa = bench_alloc(sn * sizeof(float)), *sb = bench_alloc(sn * sizeof(float));
    double *samples = malloc((size_t)(n > 0 ? n : 1) * (size_t)a->reps * sizeof(double));
    int rc = 0;
    if (!sa || !sb || !samples) {
        fprintf(stderr, "%s: out of memory\n", name);
        rc = 1;
        goto done;
    }
    bench_fill_f32(sb, sn, 7);
    for (int i = 0; i < n; i++) cases[i].samples = samples + (size_t)i * (size_t)a->reps;
    if (a->json) printf("{\"bench\":\"%s\",\"results\":[", name);
    for (int t = 0; t < a->nth; t++) {
        const int T = a->threads[t];
        set_threads(T);
        double st[5], pk[5];
        for (int r = 0; r < 5; r++) {
            double t0 = bench_now();
            bench_stream_copy_f32(sa, sb, sn, T);
            st[r] = bench_now() - t0;
            t0 = bench_now();
            double fl = bench_fma_peak_flops(20000000L, T);
            pk[r] = fl / (bench_now() - t0);
        }
        const double stream_gbs = 2.0 * (double)sn * 4.0 / bench_median(st, 5) / 1e9;
        const double peak_gf = bench_median(pk, 5) / 1e9;
        bench_opts o = bench_default_opts();
        o.reps = a->reps;
        o.blocked = a->blocked;
        if (bench_run(cases, n, &o)) {
            rc = 1;
            goto done;
        }
        if (a->json) {
            printf("%s{\"threads\":%d,\"refs\":{\"fma_peak_gflops\":", t ? "," : "", T);
            bench_json_num(stdout, peak_gf);
            printf(",\"stream_copy_gbs\":");
            bench_json_num(stdout, stream_gbs);
            printf("},\"cases\":[");
            for (int i = 0; i < n; i++) {
                printf("%s{\"key\":", i ? "," : "");
                bench_json_str(stdout, cases[i].key);
                printf(",\"seconds\":");
                bench_json_num(stdout, cases[i].stats.median);
                printf(",\"flops\":");
                bench_json_num(stdout, flops ? flops[i] : 0.0);
                printf(",\"bytes\":");
                bench_json_num(stdout, cases[i].bytes);
                printf("}");
            }
            printf("]}");
        } else {
            printf("threads %d: STREAM copy %.1f GB/s, FMA peak %.1f GFLOP/s\n", T, stream_gbs,
                   peak_gf);
            printf("  %-40s %9s %10s %7s  %s\n", "case", "ms", "rate", "of ref", "");
            for (int i = 0; i < n; i++) {
                const double sec = cases[i].stats.median;
                const double f = flops ? flops[i] : 0.0;
                const double rate = f > 0 ? f / sec / 1e9 : cases[i].bytes / sec / 1e9;
                printf("  %-40s %9.3f %5.1f %-4s %6.1f%%  %s\n", cases[i].key, sec * 1e3, rate,
                       f > 0 ? "GF/s" : "GB/s", 100.0 * rate / (f > 0 ? peak_gf : stream_gbs),
                       label ? label(i, label_ctx) : "");
            }
        }
    }
    if (a->json) printf("]}\n");
done:
    free(samples);
    free(sa);
    free(sb);
    return rc;
}

#endif
