/* tests/system/test_threads.c — the library called from two pthreads at once:
 *   - first use: both threads make their very first library calls together
 *     (the lazily initialised globals: thread count, MFT_VERBOSE, Winograd);
 *   - errors: each thread's mft_last_error / mft_last_error_message are its
 *     own (a loop of different errors, and a lock-step exchange);
 *   - scopes: one thread's open scope neither owns nor is closed by the
 *     other's calls; nested scopes with keep leak nothing;
 *   - training: a small CNN (conv, batch norm, relu, max pool, flatten,
 *     linear, cross-entropy; NHWC + SGD momentum in one thread, NCHW + Adam
 *     in the other, both reading one shared input batch) gives bit-identical
 *     losses, parameters, buffers and optimiser state in a thread and
 *     serially on the main thread;
 *   - checkpoints: concurrent saves to different files and loads back, and
 *     concurrent loads of one shared file;
 *   - dispatch, verbose and profiler state touched from both threads, with
 *     mft_dispatch_last, dispatch stats, conversion counts and the profile
 *     per thread;
 *   - a thread that exits with a scope and a tape open leaks nothing.
 * Threads never CHECK (the harness counters are not atomic): each records
 * its failures in its own struct and the main thread CHECKs after join. */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t, mkdtemp */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>
#include "harness.h"

/* ------------------------------------------------------------------ per-thread results */
typedef struct tres {
    int fails;
    char first[512]; /* the first failed check: line, condition, the thread's last error */
} tres;

static void tcheck_(tres *r, bool ok, int line, const char *text) {
    if (ok) return;
    if (r->fails++ == 0)
        snprintf(r->first, sizeof r->first, "test_threads.c:%d: %s (last error: %s: %s)", line,
                 text, mft_status_str(mft_last_error()), mft_last_error_message());
}
#define TCHECK(r, cond) tcheck_((r), (cond), __LINE__, #cond)

/* On the main thread, after join. */
#define CHECK_THREAD(r, k)                                                                         \
    CHECK_MSG((r).fails == 0, "thread %d: %d failed checks, first %s", (k), (r).fails, (r).first)

/* Starts fn(arg[0]) and fn(arg[1]) and joins both. */
static void run_pair(void *(*fn)(void *), void *a0, void *a1) {
    pthread_t t[2];
    void *args[2] = {a0, a1};
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], NULL, fn, args[k]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1); /* the other thread would wait at its barrier forever */
        }
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
}

/* ------------------------------------------------------------------ tensor helpers */
/* The values of t in logical order (a packed CONTIGUOUS copy's bytes), malloc'd;
 * NULL on failure. Call outside any scope. */
static unsigned char *packed_bytes(const mft_tensor *t, size_t *n) {
    *n = 0;
    mft_tensor *c = mft_contiguous(t, MFT_CONTIGUOUS);
    if (!c) return NULL;
    *n = (size_t)mft_tensor_numel(c) * mft_dtype_size(mft_tensor_dtype(c));
    unsigned char *b = malloc(*n ? *n : 1);
    if (b && *n) memcpy(b, mft_tensor_data(c), *n);
    mft_tensor_release(c);
    return b;
}

static bool same_meta(const mft_tensor *a, const mft_tensor *b) {
    if (!a || !b || mft_tensor_ndim(a) != mft_tensor_ndim(b) ||
        mft_tensor_dtype(a) != mft_tensor_dtype(b))
        return false;
    for (int d = 0; d < mft_tensor_ndim(a); d++)
        if (mft_tensor_sizes(a)[d] != mft_tensor_sizes(b)[d]) return false;
    return true;
}

/* t holds exactly these bytes in logical order. */
static bool has_bytes(const mft_tensor *t, const unsigned char *want, size_t n) {
    size_t m;
    unsigned char *got = t ? packed_bytes(t, &m) : NULL;
    bool ok = got && m == n && (n == 0 || memcmp(got, want, n) == 0);
    free(got);
    return ok;
}

/* Same sizes, dtype and bit-identical values. */
static bool same_bits(const mft_tensor *a, const mft_tensor *b) {
    if (!same_meta(a, b)) return false;
    size_t n;
    unsigned char *want = packed_bytes(a, &n);
    bool ok = want && has_bytes(b, want, n);
    free(want);
    return ok;
}

static mft_tensor *labels(int64_t n, uint64_t seed) {
    const int64_t sz[1] = {n};
    mft_tensor *y = mft_empty(1, sz, MFT_I64, MFT_CONTIGUOUS);
    for (int64_t i = 0; y && i < n; i++)
        mft_tensor_set(y, &i, (double)((seed * 7 + (uint64_t)i * 3) % 10));
    return y;
}

/* ------------------------------------------------------------------ the model
 * conv 3->16 3x3 p1, batch norm, relu, max pool 2, conv 16->16 3x3 p1 (the
 * Winograd kernels where AVX-512 is there), batch norm, relu, max pool 2,
 * flatten, linear 256->10, on (8, 3, 16, 16) inputs. */
#define BATCH    8
#define NTENSORS 64 /* parameters + buffers + optimiser state, upper bound */

static mft_module *small_cnn(uint64_t seed, mft_format fmt) {
    const int64_t k3[2] = {3, 3}, one[2] = {1, 1}, k2[2] = {2, 2};
    mft_module *l[10] = {
        mft_nn_conv2d(3, 16, k3, one, one, one, 1, true, seed),
        mft_nn_batch_norm2d(16, 1e-5, 0.1),
        mft_nn_relu(),
        mft_nn_max_pool2d(k2, k2),
        mft_nn_conv2d(16, 16, k3, one, one, one, 1, true, seed + 1),
        mft_nn_batch_norm2d(16, 1e-5, 0.1),
        mft_nn_relu(),
        mft_nn_max_pool2d(k2, k2),
        mft_nn_flatten(1, 3),
        mft_nn_linear(256, 10, true, seed + 2),
    };
    mft_module *m = mft_nn_sequential(10, l);
    if (m && mft_module_to_format(m, fmt) != MFT_OK) {
        mft_module_free(m);
        return NULL;
    }
    return m;
}

/* Borrowed pointers and names of the parameters then the buffers; the count. */
static int model_tensors(const mft_module *m, mft_tensor **ts, const char **names, int max) {
    int np = mft_module_parameters(m, ts, names, max);
    if (np < 0 || np > max) return -1;
    int nb = mft_module_buffers(m, ts + np, names + np, max - np);
    if (nb < 0 || np + nb > max) return -1;
    return np + nb;
}

/* ------------------------------------------------------------------ first use
 * Both threads make their first library calls at the same moment: the
 * settings decided on first use (verbose level, Winograd switch, thread
 * count), then a conv2d (which reads all three again) and a reduction. The
 * main thread then computes the same and compares. Must run before anything
 * else touches the library: TSan sees an unsynchronised lazy initialisation
 * only on first use. */
typedef struct first_ctx {
    pthread_barrier_t *bar;
    tres r;
    unsigned char *y, *s; /* conv and sum results, packed */
    size_t ny, ns;
} first_ctx;

static void first_compute(tres *r, unsigned char **y, size_t *ny, unsigned char **s, size_t *ns) {
    const int64_t xs[4] = {2, 16, 12, 12}, ws[4] = {16, 16, 3, 3}, one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 11);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 12);
    mft_tensor *out = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *sum = mft_sum(out, 0, NULL, false);
    TCHECK(r, out && sum);
    *y = out ? packed_bytes(out, ny) : NULL;
    *s = sum ? packed_bytes(sum, ns) : NULL;
    TCHECK(r, *y && *s);
    mft_tensor_release(sum);
    mft_tensor_release(out);
    mft_tensor_release(w);
    mft_tensor_release(x);
}

static void *first_thread(void *p) {
    first_ctx *c = p;
    pthread_barrier_wait(c->bar);
    /* the lazily decided settings, asked for directly first: any library
     * call between the barrier and these could order the two threads (an
     * atomic both touch) and hide a race from TSan */
    (void)mft_verbose();
    (void)mft_conv_winograd();
    TCHECK(&c->r, mft_num_threads() >= 1);
    first_compute(&c->r, &c->y, &c->ny, &c->s, &c->ns);
    return NULL;
}

static void test_first_use(void) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    first_ctx c[2] = {{.bar = &bar}, {.bar = &bar}};
    run_pair(first_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    tres r = {0};
    unsigned char *y, *s;
    size_t ny, ns;
    first_compute(&r, &y, &ny, &s, &ns);
    CHECK_THREAD(r, -1);
    for (int k = 0; k < 2; k++) {
        CHECK_THREAD(c[k].r, k);
        CHECK(y && c[k].y && c[k].ny == ny && memcmp(c[k].y, y, ny) == 0);
        CHECK(s && c[k].s && c[k].ns == ns && memcmp(c[k].s, s, ns) == 0);
        free(c[k].y);
        free(c[k].s);
    }
    free(y);
    free(s);
    CHECK_EQ_I(mft_live_tensors(), 0);
}

/* ------------------------------------------------------------------ (a) errors
 * Thread 0 fails mft_select with index 1000+i (MFT_ERR_DIM), thread 1 fails
 * mft_empty with size -(1000+i) (MFT_ERR_INVALID): every message is unique,
 * so reading back anything but this thread's own latest error is caught. */
#define ERR_ITERS 3000

typedef struct err_ctx {
    pthread_barrier_t *bar;
    int id;
    tres r;
} err_ctx;

static const char *const err_fn[2] = {"mft_select", "mft_empty"};
static const mft_status err_status[2] = {MFT_ERR_DIM, MFT_ERR_INVALID};

/* Makes this thread's error number i; writes the message part it must contain. */
static void raise_own(int id, const mft_tensor *t, int i, char *want, size_t len) {
    if (id == 0) {
        mft_tensor *v = mft_select(t, 0, 1000 + i);
        mft_tensor_release(v);
        snprintf(want, len, "mft_select: index %d is out of range", 1000 + i);
    } else {
        const int64_t sz[2] = {3, -(1000 + i)};
        mft_tensor *v = mft_empty(2, sz, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor_release(v);
        snprintf(want, len, "mft_empty: negative size %d", -(1000 + i));
    }
}

static bool is_own_error(int id, const char *want) {
    const char *msg = mft_last_error_message();
    return mft_last_error() == err_status[id] && strstr(msg, want) != NULL &&
           strstr(msg, err_fn[1 - id]) == NULL;
}

static void *err_thread(void *p) {
    err_ctx *c = p;
    tres *r = &c->r;
    const int id = c->id;
    char want[128];
    const int64_t four[1] = {4};
    mft_tensor *t = mft_zeros(1, four, MFT_F32, MFT_CONTIGUOUS);
    TCHECK(r, t != NULL);
    TCHECK(r, mft_last_error() == MFT_OK);
    pthread_barrier_wait(c->bar);
    for (int i = 0; i < ERR_ITERS; i++) {
        raise_own(id, t, i, want, sizeof want);
        TCHECK(r, is_own_error(id, want));
        /* a successful call keeps the error */
        mft_tensor *ok = mft_zeros(1, four, MFT_F32, MFT_CONTIGUOUS);
        TCHECK(r, ok != NULL);
        mft_tensor_release(ok);
        TCHECK(r, is_own_error(id, want));
        if (i % 3 == id) {
            mft_clear_error();
            TCHECK(r, mft_last_error() == MFT_OK && mft_last_error_message()[0] == '\0');
        }
    }
    /* lock-step: both set an error, then each reads its own; thread 1 clears,
     * thread 0 still has its error; thread 0 sets a new one, thread 1 stays clear */
    raise_own(id, t, -1, want, sizeof want);
    pthread_barrier_wait(c->bar);
    TCHECK(r, is_own_error(id, want));
    pthread_barrier_wait(c->bar);
    if (id == 1) mft_clear_error();
    pthread_barrier_wait(c->bar);
    if (id == 0) {
        TCHECK(r, is_own_error(id, want));
        raise_own(id, t, -2, want, sizeof want);
    }
    pthread_barrier_wait(c->bar);
    if (id == 1)
        TCHECK(r, mft_last_error() == MFT_OK && mft_last_error_message()[0] == '\0');
    else
        TCHECK(r, is_own_error(id, want));
    mft_tensor_release(t);
    return NULL;
}

static void test_error_state_per_thread(void) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    mft_clear_error();
    err_ctx c[2] = {{.bar = &bar, .id = 0}, {.bar = &bar, .id = 1}};
    run_pair(err_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < 2; k++) CHECK_THREAD(c[k].r, k);
    /* the main thread's own state was never touched */
    CHECK(mft_last_error() == MFT_OK);
    CHECK_EQ_I(mft_live_tensors(), 0);
}

/* ------------------------------------------------------------------ (b) scopes */
#define SCOPE_ITERS 300

typedef struct scope_ctx {
    pthread_barrier_t *bar;
    int id;
    tres r;
} scope_ctx;

static void *scope_thread(void *p) {
    scope_ctx *c = p;
    tres *r = &c->r;
    const int64_t sz[2] = {3, 5};
    /* lock-step, each thread in each role: the opener has a scope open while
     * the other one (no scope) calls scope_end and creates a tensor; that
     * tensor must not land in the opener's scope */
    for (int role = 0; role < 2; role++) {
        const bool opener = c->id == role;
        mft_tensor *mine = NULL;
        if (opener) {
            TCHECK(r, mft_scope_begin() == MFT_OK);
            TCHECK(r, mft_ones(2, sz, MFT_F32, MFT_CONTIGUOUS) != NULL); /* scope-owned */
        }
        pthread_barrier_wait(c->bar);
        if (!opener) {
            mft_clear_error();
            TCHECK(r, mft_scope_end() == MFT_ERR_SCOPE);
            mine = mft_full(2, sz, MFT_F32, MFT_CONTIGUOUS, 7.0);
            TCHECK(r, mine != NULL);
            mft_clear_error();
            TCHECK(r, mine && mft_scope_keep(mine) == NULL && mft_last_error() == MFT_ERR_SCOPE);
            mft_clear_error();
        }
        pthread_barrier_wait(c->bar);
        if (opener) TCHECK(r, mft_scope_end() == MFT_OK);
        pthread_barrier_wait(c->bar);
        if (!opener) {
            const int64_t ix[2] = {2, 4};
            TCHECK(r, mine && mft_tensor_get(mine, ix) == 7.0);
            mft_tensor_release(mine);
        } else {
            mft_clear_error();
            TCHECK(r, mft_scope_end() == MFT_ERR_SCOPE);
            mft_clear_error();
        }
        pthread_barrier_wait(c->bar);
    }
    /* nested scopes, keep, in a loop, both threads at once */
    for (int i = 0; i < SCOPE_ITERS; i++) {
        TCHECK(r, mft_scope_begin() == MFT_OK);
        mft_tensor *a = mft_full(2, sz, MFT_F32, MFT_CONTIGUOUS, (double)(c->id + 2));
        TCHECK(r, mft_scope_begin() == MFT_OK);
        mft_tensor *b = mft_mul(a, a);
        mft_tensor *s = mft_add(b, a);
        TCHECK(r, mft_scope_begin() == MFT_OK);
        TCHECK(r, mft_add_scalar(s, 1.0) != NULL);
        mft_clear_error();
        TCHECK(r, mft_scope_keep(s) == NULL && mft_last_error() == MFT_ERR_SCOPE);
        mft_clear_error();
        TCHECK(r, mft_scope_end() == MFT_OK);
        mft_tensor *kept = mft_scope_keep(s);
        TCHECK(r, kept == s && kept != NULL);
        TCHECK(r, mft_scope_end() == MFT_OK); /* releases b */
        TCHECK(r, mft_scope_end() == MFT_OK); /* releases a */
        const int64_t ix[2] = {1, 1};
        const double v = (double)(c->id + 2);
        TCHECK(r, kept && mft_tensor_get(kept, ix) == v * v + v);
        mft_tensor_release(kept);
    }
    mft_clear_error();
    TCHECK(r, mft_scope_end() == MFT_ERR_SCOPE);
    mft_clear_error();
    return NULL;
}

static void test_scopes_per_thread(void) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    scope_ctx c[2] = {{.bar = &bar, .id = 0}, {.bar = &bar, .id = 1}};
    run_pair(scope_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < 2; k++) CHECK_THREAD(c[k].r, k);
    CHECK_EQ_I(mft_live_tensors(), 0);
    CHECK_EQ_I(mft_live_storages(), 0);
}

/* ------------------------------------------------------------------ (c) training */
#define TRAIN_STEPS 3

typedef struct train_cfg {
    mft_format fmt;
    bool adam;
    uint64_t seed;
} train_cfg;

static const train_cfg train_cfgs[2] = {
    {MFT_CHANNELS_LAST, false, 100}, /* NHWC, SGD with momentum */
    {MFT_CONTIGUOUS, true, 200},     /* NCHW, Adam */
};

typedef struct train_out {
    double loss[TRAIN_STEPS];
    int n; /* clones of the parameters, buffers and optimiser state */
    mft_tensor *t[NTENSORS];
} train_out;

static void train_out_free(train_out *o) {
    for (int i = 0; i < o->n; i++) mft_tensor_release(o->t[i]);
    o->n = 0;
}

/* x (NCHW) and y are shared by both threads and only read. */
static void train_run(const train_cfg *cfg, const mft_tensor *x, const mft_tensor *y, train_out *o,
                      tres *r) {
    memset(o, 0, sizeof *o);
    mft_module *m = small_cnn(cfg->seed, cfg->fmt);
    mft_tensor *params[NTENSORS];
    int np = m ? mft_module_parameters(m, params, NULL, NTENSORS) : 0;
    TCHECK(r, m && np == 10);
    mft_optimizer *opt = NULL;
    if (m && np == 10) {
        if (cfg->adam) {
            const mft_adam_opts ao = {1e-2, 0.9, 0.999, 1e-8, 1e-4};
            opt = mft_adam_new(np, params, &ao);
        } else {
            const mft_sgd_opts so = {0.05, 0.9, 0.0, 1e-4, false};
            opt = mft_sgd_new(np, params, &so);
        }
    }
    TCHECK(r, opt && x && y);
    for (int s = 0; s < TRAIN_STEPS && opt && x && y; s++) {
        TCHECK(r, mft_scope_begin() == MFT_OK);
        /* NCHW: x itself; NHWC: a converted copy */
        mft_tensor *xin = mft_to_format(x, cfg->fmt);
        TCHECK(r, mft_tape_begin() == MFT_OK);
        mft_tensor *logits = mft_module_forward(m, xin);
        mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
        TCHECK(r, loss && mft_backward(loss, NULL) == MFT_OK);
        o->loss[s] = loss ? mft_tensor_get(loss, NULL) : NAN;
        TCHECK(r, isfinite(o->loss[s]));
        TCHECK(r, mft_tape_end() == MFT_OK);
        TCHECK(r, mft_optimizer_step(opt) == MFT_OK);
        mft_optimizer_zero_grad(opt);
        TCHECK(r, mft_scope_end() == MFT_OK);
    }
    /* what the steps produced: parameters, buffers, optimiser state */
    mft_tensor *all[NTENSORS];
    int n = m ? model_tensors(m, all, (const char *[NTENSORS]){0}, NTENSORS) : 0;
    int ns = opt ? mft_optimizer_state(opt, NULL, NULL, 0) : 0;
    TCHECK(r, n == 16 && ns > 0 && n + ns <= NTENSORS);
    if (n == 16 && ns > 0 && n + ns <= NTENSORS) {
        mft_optimizer_state(opt, all + n, NULL, ns);
        for (int i = 0; i < n + ns; i++) {
            o->t[i] = mft_clone(all[i], MFT_PRESERVE);
            TCHECK(r, o->t[i] != NULL);
        }
        o->n = n + ns;
    }
    mft_optimizer_free(opt);
    mft_module_free(m);
}

typedef struct train_ctx {
    pthread_barrier_t *bar;
    int id;
    const mft_tensor *x, *y;
    tres r;
    train_out out;
} train_ctx;

static void *train_thread(void *p) {
    train_ctx *c = p;
    pthread_barrier_wait(c->bar);
    train_run(&train_cfgs[c->id], c->x, c->y, &c->out, &c->r);
    return NULL;
}

static void test_training_matches_serial(void) {
    /* serially on the main thread first, the same seeds */
    static train_out serial[2];
    const int64_t xs[4] = {BATCH, 3, 16, 16};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 10);
    mft_tensor *y = labels(BATCH, 3);
    CHECK(x && y);
    tres r = {0};
    for (int k = 0; k < 2; k++) train_run(&train_cfgs[k], x, y, &serial[k], &r);
    CHECK_THREAD(r, -1);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    static train_ctx c[2];
    memset(c, 0, sizeof c);
    for (int k = 0; k < 2; k++) c[k] = (train_ctx){.bar = &bar, .id = k, .x = x, .y = y};
    run_pair(train_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < 2; k++) {
        CHECK_THREAD(c[k].r, k);
        for (int s = 0; s < TRAIN_STEPS; s++)
            CHECK_MSG(memcmp(&c[k].out.loss[s], &serial[k].loss[s], sizeof(double)) == 0,
                      "thread %d step %d: loss %.17g, serially %.17g", k, s, c[k].out.loss[s],
                      serial[k].loss[s]);
        CHECK_EQ_I(c[k].out.n, serial[k].n);
        for (int i = 0; i < c[k].out.n && i < serial[k].n; i++)
            CHECK_MSG(same_bits(serial[k].t[i], c[k].out.t[i]),
                      "thread %d: tensor %d differs from the serial run", k, i);
        /* the steps did something: the losses are not all equal */
        CHECK(serial[k].loss[0] != serial[k].loss[TRAIN_STEPS - 1]);
        train_out_free(&c[k].out);
        train_out_free(&serial[k]);
    }
    mft_tensor_release(y);
    mft_tensor_release(x);
    CHECK_EQ_I(mft_live_tensors(), 0);
    CHECK_EQ_I(mft_live_storages(), 0);
}

/* ------------------------------------------------------------------ (d) checkpoints */
#define CKPT_ITERS 4

typedef struct ckpt_ctx {
    pthread_barrier_t *bar;
    int id;
    const char *dir;
    /* the shared file and its reference contents (read-only here) */
    const char *shared;
    int nshared;
    const char *const *shared_names;
    unsigned char *const *shared_bytes;
    const size_t *shared_len;
    tres r;
} ckpt_ctx;

static void *ckpt_thread(void *p) {
    ckpt_ctx *c = p;
    tres *r = &c->r;
    const mft_format fmt = c->id ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
    char path[512];
    snprintf(path, sizeof path, "%s/model_%d.mft", c->dir, c->id);
    for (int it = 0; it < CKPT_ITERS; it++) {
        const uint64_t seed = 1000 + 100 * (uint64_t)c->id + 10 * (uint64_t)it;
        mft_module *a = small_cnn(seed, fmt), *b = small_cnn(seed + 5, fmt);
        mft_tensor *ta[NTENSORS], *tb[NTENSORS];
        const char *na[NTENSORS], *nb[NTENSORS];
        int n = a ? model_tensors(a, ta, na, NTENSORS) : -1;
        int m = b ? model_tensors(b, tb, nb, NTENSORS) : -1;
        TCHECK(r, n == 16 && m == n);
        if (n == 16 && m == n) {
            /* a's first conv weight differs from b's before the load */
            TCHECK(r, !same_bits(ta[0], tb[0]));
            pthread_barrier_wait(c->bar);
            TCHECK(r, mft_save_tensors(path, n, na, (const mft_tensor *const *)ta) == MFT_OK);
            pthread_barrier_wait(c->bar);
            TCHECK(r, mft_load_tensors_into(path, n, na, tb) == MFT_OK);
            for (int i = 0; i < n; i++) TCHECK(r, same_bits(ta[i], tb[i]));
            /* both threads load the one shared file at once */
            pthread_barrier_wait(c->bar);
            TCHECK(r, c->nshared == n);
            if (c->nshared == n) {
                TCHECK(r, mft_load_tensors_into(c->shared, n, c->shared_names, tb) == MFT_OK);
                for (int i = 0; i < n; i++)
                    TCHECK(r, has_bytes(tb[i], c->shared_bytes[i], c->shared_len[i]));
            }
            int nl = 0;
            char **names = NULL;
            mft_tensor **ts = NULL;
            TCHECK(r, mft_load_tensors(c->shared, &nl, &names, &ts) == MFT_OK);
            TCHECK(r, nl == c->nshared);
            for (int i = 0; i < nl && i < c->nshared; i++) {
                TCHECK(r, strcmp(names[i], c->shared_names[i]) == 0);
                TCHECK(r, has_bytes(ts[i], c->shared_bytes[i], c->shared_len[i]));
            }
            mft_checkpoint_free_list(nl, names, ts);
        } else {
            /* keep the barrier count in step with the other thread */
            for (int k = 0; k < 3; k++) pthread_barrier_wait(c->bar);
        }
        mft_module_free(b);
        mft_module_free(a);
    }
    return NULL;
}

static void test_checkpoints_concurrent(void) {
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/mft-threads.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    char shared[300];
    snprintf(shared, sizeof shared, "%s/shared.mft", dir);
    /* the shared file, written on the main thread, and its contents */
    mft_module *s = small_cnn(77, MFT_CHANNELS_LAST);
    mft_tensor *ts[NTENSORS];
    const char *names[NTENSORS];
    unsigned char *bytes[NTENSORS] = {0};
    size_t len[NTENSORS] = {0};
    int n = s ? model_tensors(s, ts, names, NTENSORS) : -1;
    CHECK_EQ_I(n, 16);
    if (n != 16) {
        mft_module_free(s);
        return;
    }
    CHECK(mft_save_tensors(shared, n, names, (const mft_tensor *const *)ts) == MFT_OK);
    for (int i = 0; i < n; i++) CHECK((bytes[i] = packed_bytes(ts[i], &len[i])) != NULL);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    ckpt_ctx c[2];
    for (int k = 0; k < 2; k++) c[k] = (ckpt_ctx){&bar, k, dir, shared, n, names, bytes, len, {0}};
    run_pair(ckpt_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < 2; k++) CHECK_THREAD(c[k].r, k);
    for (int i = 0; i < n; i++) free(bytes[i]);
    mft_module_free(s);
    for (int k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/model_%d.mft", dir, k);
        CHECK(unlink(path) == 0);
    }
    CHECK(unlink(shared) == 0);
    CHECK(rmdir(dir) == 0); /* nothing else (no .tmp file) was left behind */
    CHECK_EQ_I(mft_live_tensors(), 0);
    CHECK_EQ_I(mft_live_storages(), 0);
}

/* ------------------------------------------------------------------ (e) dispatch, verbose, profiler
 * Thread 0 converts x to NHWC (one EXPLICIT conversion) and max-pools it;
 * thread 1 runs conv2d on NCHW data (no conversion). Both toggle the global
 * verbose level while the other dispatches (the log callback, installed on
 * the main thread, counts the lines), record a profile, and read their own
 * mft_dispatch_last, dispatch stats and conversion counts. */
#define DISPATCH_ITERS 200

static const char *const disp_op[2] = {"max_pool2d", "conv2d"};

typedef struct disp_ctx {
    pthread_barrier_t *bar;
    int id;
    int64_t seq_per_iter; /* measured serially on the main thread */
    tres r;
} disp_ctx;

typedef struct disp_inputs {
    mft_tensor *x, *w;
} disp_inputs;

static disp_inputs disp_make(int id) {
    const int64_t xs[4] = {2, 8, 10, 10}, ws[4] = {8, 8, 3, 3};
    disp_inputs in = {mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 30 + (uint64_t)id), NULL};
    if (id == 1) in.w = mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 40);
    return in;
}

static void disp_free(disp_inputs *in) {
    mft_tensor_release(in->x);
    mft_tensor_release(in->w);
}

/* One iteration: this thread's op; true when it succeeded. */
static bool disp_iter(int id, const disp_inputs *in) {
    const int64_t k2[2] = {2, 2}, one[2] = {1, 1};
    mft_tensor *y;
    if (id == 0) {
        mft_tensor *nhwc = mft_to_format(in->x, MFT_CHANNELS_LAST);
        y = mft_max_pool2d(nhwc, k2, NULL, NULL, NULL, false);
        mft_tensor_release(nhwc);
    } else {
        y = mft_conv2d(in->x, in->w, NULL, one, one, one, 1);
    }
    bool ok = y != NULL;
    mft_tensor_release(y);
    return ok;
}

static void *disp_thread(void *p) {
    disp_ctx *c = p;
    tres *r = &c->r;
    const int id = c->id;
    disp_inputs in = disp_make(id);
    TCHECK(r, in.x && (id == 0 || in.w));
    TCHECK(r, mft_dispatch_last()->seq == 0 && strcmp(mft_dispatch_last()->op, "") == 0);
    mft_dispatch_stats_reset();
    mft_conversion_counts_reset();
    TCHECK(r, mft_profile_begin() == MFT_OK);
    const int64_t seq0 = mft_dispatch_last()->seq;
    pthread_barrier_wait(c->bar);
    for (int i = 0; i < DISPATCH_ITERS; i++) {
        mft_set_verbose((i + id) % 2);
        (void)mft_verbose();
        (void)mft_dispatch_strict();
        TCHECK(r, disp_iter(id, &in));
        TCHECK(r, strcmp(mft_dispatch_last()->op, disp_op[id]) == 0);
        TCHECK(r, mft_profile_active());
    }
    mft_set_verbose(0);
    /* the last dispatch of each thread is its own, after both finished */
    pthread_barrier_wait(c->bar);
    TCHECK(r, strcmp(mft_dispatch_last()->op, disp_op[id]) == 0);
    TCHECK(r, mft_dispatch_last()->seq - seq0 == DISPATCH_ITERS * c->seq_per_iter);
    TCHECK(r, mft_profile_end() == MFT_OK);
    TCHECK(r, mft_profile_event_count() > 0);
    char buf[16384];
    size_t need = mft_profile_table(buf, sizeof buf);
    TCHECK(r, need > 0 && need < sizeof buf);
    TCHECK(r, strstr(buf, disp_op[id]) != NULL);
    TCHECK(r, strstr(buf, id == 0 ? "conv2d" : "max_pool2d") == NULL);
    need = mft_dispatch_stats(buf, sizeof buf);
    TCHECK(r, need > 0 && need < sizeof buf);
    TCHECK(r, strstr(buf, disp_op[id]) != NULL);
    TCHECK(r, strstr(buf, id == 0 ? "conv2d" : "max_pool2d") == NULL);
    const mft_conversion_counts cc = mft_conversion_counts_get();
    TCHECK(r, cc.count[MFT_CAUSE_EXPLICIT] == (id == 0 ? DISPATCH_ITERS : 0));
    TCHECK(r, cc.hidden == 0 && cc.total == cc.count[MFT_CAUSE_EXPLICIT]);
    mft_profile_clear();
    TCHECK(r, mft_profile_event_count() == 0);
    disp_free(&in);
    return NULL;
}

static atomic_llong log_lines;
static void count_line(const char *line, void *ctx) {
    (void)line;
    atomic_fetch_add((atomic_llong *)ctx, 1);
}

static void test_dispatch_state_per_thread(void) {
    /* dispatches per iteration, serially */
    int64_t per[2];
    for (int k = 0; k < 2; k++) {
        disp_inputs in = disp_make(k);
        const int64_t before = mft_dispatch_last()->seq;
        CHECK(disp_iter(k, &in));
        per[k] = mft_dispatch_last()->seq - before;
        CHECK(per[k] >= 1);
        CHECK(strcmp(mft_dispatch_last()->op, disp_op[k]) == 0);
        disp_free(&in);
    }
    const int64_t main_seq = mft_dispatch_last()->seq;
    const mft_conversion_counts main_cc = mft_conversion_counts_get();
    atomic_store(&log_lines, 0);
    mft_set_log_callback(count_line, &log_lines);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    disp_ctx c[2];
    for (int k = 0; k < 2; k++) c[k] = (disp_ctx){&bar, k, per[k], {0}};
    run_pair(disp_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    mft_set_log_callback(NULL, NULL);
    mft_set_verbose(0);
    for (int k = 0; k < 2; k++) CHECK_THREAD(c[k].r, k);
    /* every logged line is one of the threads' dispatches */
    CHECK(atomic_load(&log_lines) <= DISPATCH_ITERS * (per[0] + per[1] + 2));
    /* the main thread's own dispatch state did not move */
    CHECK_EQ_I(mft_dispatch_last()->seq, main_seq);
    CHECK(strcmp(mft_dispatch_last()->op, disp_op[1]) == 0);
    CHECK_EQ_I(mft_conversion_counts_get().total, main_cc.total);
    CHECK(!mft_profile_active());
    CHECK_EQ_I(mft_live_tensors(), 0);
    CHECK_EQ_I(mft_live_storages(), 0);
}

/* ------------------------------------------------------------------ (f) exit with open scope and tape
 * Each thread leaves two nested scopes and a tape open and returns. Thread
 * 0 recorded a few ops; thread 1 also ran backward (its leaf has a grad).
 * The leaf, created outside the scopes, is released by the thread itself,
 * so the tape's saved tensors are what keep it alive. Once both threads are
 * joined, nothing they made may be alive. */
typedef struct exit_ctx {
    pthread_barrier_t *bar;
    int id;
    tres r;
} exit_ctx;

static void *exit_open_thread(void *p) {
    exit_ctx *c = p;
    tres *r = &c->r;
    const int64_t sz[2] = {4, 6};
    pthread_barrier_wait(c->bar);
    mft_tensor *leaf = mft_randn(2, sz, MFT_F32, MFT_CONTIGUOUS, 50 + (uint64_t)c->id);
    TCHECK(r, leaf && mft_tensor_set_requires_grad(leaf, true) == MFT_OK);
    TCHECK(r, mft_scope_begin() == MFT_OK);
    mft_tensor *x = mft_randn(2, sz, MFT_F32, MFT_CONTIGUOUS, 60 + (uint64_t)c->id);
    TCHECK(r, mft_tape_begin() == MFT_OK);
    mft_tensor *y = mft_mul(leaf, x);
    mft_tensor *z = mft_relu(y);
    mft_tensor *s = mft_sum(z, 0, NULL, false);
    TCHECK(r, s && mft_tape_size() >= 3);
    TCHECK(r, mft_scope_begin() == MFT_OK);
    TCHECK(r, mft_tanh(z) != NULL);
    if (c->id == 1) {
        TCHECK(r, mft_backward(s, NULL) == MFT_OK);
        TCHECK(r, mft_tensor_grad(leaf) != NULL);
    }
    mft_tensor_release(leaf);
    return NULL; /* two scopes and the tape still open */
}

static void test_thread_exit_with_open_scope_and_tape(void) {
    const int64_t tensors0 = mft_live_tensors(), storages0 = mft_live_storages();
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    exit_ctx c[2] = {{.bar = &bar, .id = 0}, {.bar = &bar, .id = 1}};
    run_pair(exit_open_thread, &c[0], &c[1]);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < 2; k++) CHECK_THREAD(c[k].r, k);
    CHECK_EQ_I(mft_live_tensors(), tensors0);
    CHECK_EQ_I(mft_live_storages(), storages0);
}

int main(void) {
    RUN(test_first_use); /* first: before anything else touches the library */
    RUN(test_error_state_per_thread);
    RUN(test_scopes_per_thread);
    RUN(test_training_matches_serial);
    RUN(test_checkpoints_concurrent);
    RUN(test_dispatch_state_per_thread);
    RUN(test_thread_exit_with_open_scope_and_tape); /* last: leaks until the library frees them */
    TEST_MAIN_END();
}
