/* tests/tensor/test_alloc_fail.c — allocation-failure injection (docs/spec.md §6: nothing
 * aborts, leaks or half-writes on error; docs/architecture.md §4: one cleanup exit per
 * allocating function).
 *
 * A counting allocator installed with mft_set_allocator delegates to
 * aligned_alloc/free and can fail the k-th allocation (or every allocation
 * from the k-th on). A realistic workload — factories in both formats, views,
 * conversions, copy_, to_dtype, reshape/flatten with copies, expand + clone,
 * from_blob with a counting deleter, rand/randn, hash, describe, nested scopes
 * with keep — is run once to count its N allocations, then once per k = 1..N
 * with allocation k failing. Every run must end with MFT_ERR_NOMEM (or, if
 * the failure was absorbed, with the same result as the clean run), zero live
 * tensors and storages, every allocation freed, no open scope, and the
 * from_blob deleter called exactly once if the wrapping tensor was created,
 * never if mft_from_blob failed (the caller then still owns the buffer). */
#include <stdbool.h>
#include "harness.h"

/* ------------------------------------------------------------------ the allocator */

typedef struct counting_alloc {
    long long calls;   /* alloc calls seen */
    long long fail_at; /* 0: never fail; k: fail call k (and later ones if sticky) */
    bool sticky;
    long long injected; /* failures injected */
    long long live;     /* successful allocations not yet freed */
    long long bad_align;
} counting_alloc;

static counting_alloc g_ca;

static void *ca_alloc(size_t size, size_t align, void *ctx) {
    counting_alloc *c = ctx;
    c->calls++;
    if (c->fail_at > 0 && (c->calls == c->fail_at || (c->sticky && c->calls > c->fail_at))) {
        c->injected++;
        return NULL;
    }
    if (align == 0 || (align & (align - 1)) != 0) {
        c->bad_align++;
        return NULL;
    }
    size_t rounded = (size + align - 1) / align * align;
    if (rounded < size) return NULL;
    if (rounded == 0) rounded = align;
    void *p = aligned_alloc(align, rounded);
    if (p) c->live++;
    return p;
}

static void ca_free(void *p, void *ctx) {
    counting_alloc *c = ctx;
    if (!p) return;
    c->live--;
    free(p);
}

static void ca_arm(long long fail_at, bool sticky) {
    g_ca.calls = 0;
    g_ca.fail_at = fail_at;
    g_ca.sticky = sticky;
    g_ca.injected = 0;
}

/* ------------------------------------------------------------------ the workload */

static int g_blob_deleter_calls = 0;
static void blob_deleter(void *data, void *ctx) {
    (void)ctx;
    g_blob_deleter_calls++;
    free(data);
}

enum { BLOB_NOT_REACHED, BLOB_WRAP_FAILED, BLOB_WRAPPED };

typedef struct wl_result {
    int blob_state;
    uint64_t digest; /* combined hashes of the results (success only) */
    size_t describe_len;
} wl_result;

#define WL_MAX_TENSORS 64
typedef struct wl_pool {
    mft_tensor *t[WL_MAX_TENSORS];
    int n;
} wl_pool;

static mft_tensor *wl_add(wl_pool *p, mft_tensor *t) {
    if (t) {
        if (p->n < WL_MAX_TENSORS)
            p->t[p->n++] = t;
        else
            fprintf(stderr, "test_alloc_fail: pool full (raise WL_MAX_TENSORS)\n");
    }
    return t;
}

static void wl_release(wl_pool *p) {
    while (p->n > 0) mft_tensor_release(p->t[--p->n]);
}

static uint64_t wl_mix(uint64_t acc, const mft_tensor *t) {
    uint64_t h = mft_tensor_hash(t);
    return (acc ^ h) * 0x100000001B3ull + (acc >> 29);
}

/* Made tensors go into the pool; the first NULL (or failing status) jumps to
 * the single cleanup exit. */
#define MAKE(var, expr)                                                                            \
    do {                                                                                           \
        (var) = wl_add(&pool, (expr));                                                             \
        if (!(var)) goto fail;                                                                     \
    } while (0)
#define DO(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != MFT_OK) goto fail;                                                           \
    } while (0)

static mft_status workload(wl_result *res) {
    static const int64_t s4[4] = {2, 3, 4, 5}, s3[3] = {2, 3, 4}, s5[5] = {1, 2, 3, 2, 2},
                         s2[2] = {3, 4}, pitch[2] = {8, 1}, s46[2] = {4, 6}, s234[3] = {2, 3, 4},
                         s46b[2] = {4, 4}, st46b[2] = {5, 1}, c1s[4] = {1, 3, 1, 1},
                         amb[4] = {2, 1, 4, 5}, flat[1] = {-1},
                         nhwc_pad[4] = {80, 1, 20, 4}; /* NHWC with room for 4 channels */
    static const int nhwc[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    wl_pool pool = {{NULL}, 0};
    mft_tensor *a, *b, *z, *o, *f, *e, *es, *r, *p, *tr, *na, *se, *sl, *us, *sq, *vw, *as, *rv,
        *c1, *c2, *am, *t1, *t2, *cl, *el, *zl, *td, *ts, *rs, *fl, *ch, *ex, *exc, *bt, *bc, *bv,
        *kept, *inner;
    res->blob_state = BLOB_NOT_REACHED;
    res->digest = 0;
    res->describe_len = 0;

    /* factories, both formats, all dtypes */
    MAKE(a, mft_rand(4, s4, MFT_F32, MFT_CONTIGUOUS, 11));
    MAKE(b, mft_randn(4, s4, MFT_F32, MFT_CHANNELS_LAST, 12));
    MAKE(z, mft_zeros(4, s4, MFT_F64, MFT_CHANNELS_LAST));
    MAKE(o, mft_ones(3, s3, MFT_I32, MFT_CHANNELS_LAST));
    MAKE(f, mft_full(5, s5, MFT_F32, MFT_CHANNELS_LAST, 2.5));
    MAKE(e, mft_empty(2, s2, MFT_U8, MFT_CONTIGUOUS));
    MAKE(es, mft_empty_strided(2, s2, pitch, MFT_F32));
    MAKE(r, mft_arange(0, 24, 1, MFT_F32));

    /* views */
    MAKE(p, mft_permute(a, nhwc));
    MAKE(tr, mft_transpose(b, 2, 3));
    MAKE(na, mft_narrow(a, 2, 1, 2));
    MAKE(se, mft_select(b, 0, 1));
    MAKE(sl, mft_slice(a, 3, 0, 5, 2));
    MAKE(us, mft_unsqueeze(se, 0));
    MAKE(sq, mft_squeeze(us, 0));
    MAKE(vw, mft_view(r, 2, s46));
    MAKE(as, mft_as_strided(r, 2, s46b, st46b, 1));
    MAKE(rv, mft_reshape(r, 3, s234)); /* a view */

    /* conversions */
    MAKE(c1, mft_contiguous(b, MFT_CONTIGUOUS));    /* copy */
    MAKE(c2, mft_contiguous(b, MFT_CHANNELS_LAST)); /* b itself, a new reference */
    MAKE(am, mft_zeros(4, amb, MFT_F32, MFT_CONTIGUOUS));
    MAKE(t1, mft_to_format(am, MFT_CHANNELS_LAST)); /* re-tag: a new header, no copy */
    MAKE(t2, mft_to_format(a, MFT_CHANNELS_LAST));  /* copy */
    MAKE(cl, mft_clone(tr, MFT_PRESERVE));
    MAKE(el, mft_empty_like(b, MFT_PRESERVE));
    MAKE(zl, mft_zeros_like(na, MFT_CHANNELS_LAST));
    DO(mft_copy_(el, a));  /* NCHW into NHWC */
    DO(mft_copy_(zl, na)); /* strided into NHWC */
    MAKE(td, mft_to_dtype(a, MFT_F64));
    MAKE(ts, mft_to_dtype(b, MFT_F32)); /* same dtype: a new reference */
    MAKE(rs, mft_reshape(tr, 1, flat)); /* not viewable: copy */
    MAKE(fl, mft_flatten(p, 1, 3));     /* not viewable: copy */
    MAKE(ch, mft_full(4, c1s, MFT_F64, MFT_CONTIGUOUS, -1.5));
    MAKE(ex, mft_expand(ch, 4, s4));
    MAKE(exc, mft_clone(ex, MFT_CHANNELS_LAST));
    DO(mft_copy_(z, ch)); /* broadcast source, dtype kept */

    /* caller memory: a padded NHWC buffer of 160 floats */
    float *blob = malloc(160 * sizeof(float));
    if (!blob) {
        fprintf(stderr, "test_alloc_fail: malloc failed\n");
        goto fail;
    }
    for (int i = 0; i < 160; i++) blob[i] = (float)i * 0.25f;
    int deleter_before = g_blob_deleter_calls;
    bt = mft_from_blob(blob, 160 * sizeof(float), 4, s4, nhwc_pad, 0, MFT_F32, blob_deleter, NULL);
    if (!bt) {
        res->blob_state = BLOB_WRAP_FAILED;
        /* the caller keeps ownership; free it unless the library (wrongly)
         * already handed it to the deleter */
        if (g_blob_deleter_calls == deleter_before) free(blob);
        goto fail;
    }
    res->blob_state = BLOB_WRAPPED;
    wl_add(&pool, bt);
    MAKE(bc, mft_contiguous(bt, MFT_CHANNELS_LAST)); /* padded: copy */
    MAKE(bv, mft_narrow(bt, 2, 1, 2));               /* same sizes as na */
    DO(mft_copy_(bv, na)); /* write into the caller's buffer through a view */

    /* hash and describe allocate nothing but must work under pressure */
    char text[4096];
    res->describe_len = mft_tensor_describe(tr, text, sizeof text);

    /* a scope: a NULL-propagating chain, one result kept, a nested scope */
    DO(mft_scope_begin());
    {
        mft_tensor *s1 = mft_clone(a, MFT_CHANNELS_LAST);
        mft_tensor *s2p = mft_permute(s1, nhwc);
        mft_tensor *s3p = mft_contiguous(s2p, MFT_CONTIGUOUS);
        mft_tensor *s4p = mft_permute(s3p, back);
        /* a reshape that has to COPY (s4p is a permuted view): its packed
         * temporary must not become scope-owned (test_scope_copying_reshape) */
        mft_tensor *s5p = mft_reshape(s4p, 1, flat);
        kept = s5p ? mft_scope_keep(s5p) : NULL;
        inner = NULL;
        if (kept && mft_scope_begin() == MFT_OK) {
            mft_tensor *i1 = mft_zeros_like(s4p, MFT_PRESERVE);
            mft_tensor *i2 = i1 ? mft_expand(ch, 4, s4) : NULL;
            mft_tensor *i3 = i2 ? mft_clone(i2, MFT_PRESERVE) : NULL;
            inner = i3 ? mft_scope_keep(i3) : NULL;
            mft_status st_inner = mft_scope_end();
            if (st_inner != MFT_OK) {
                mft_tensor_release(inner);
                inner = NULL;
            }
        }
        mft_status st_end = mft_scope_end();
        wl_add(&pool, kept);
        wl_add(&pool, inner);
        if (!kept || !inner || st_end != MFT_OK) goto fail;
    }

    /* digest of everything with defined values */
    uint64_t d = 1469598103934665603ull;
    const mft_tensor *results[] = {a,  b,  z,  o,  f,  r,   p,  tr, na, se,   sl,
                                   sq, vw, as, rv, c1, c2,  t1, t2, cl, el,   zl,
                                   td, ts, rs, fl, ex, exc, bt, bc, bv, kept, inner};
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) d = wl_mix(d, results[i]);
    res->digest = d;
    wl_release(&pool);
    return MFT_OK;

fail:
    wl_release(&pool);
    return mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
}

/* ------------------------------------------------------------------ the runs */

typedef struct run_stats {
    int failed_runs, absorbed_runs, wrap_failed_runs, wrapped_runs;
} run_stats;

/* One workload run with allocation fail_at failing; checks everything that
 * must hold afterwards. */
static void run_one(long long fail_at, bool sticky, uint64_t clean_digest, run_stats *stats) {
    wl_result res;
    ca_arm(fail_at, sticky);
    g_blob_deleter_calls = 0;
    mft_clear_error();
    mft_status st = workload(&res);

    CHECK_MSG(g_ca.calls >= fail_at, "k=%lld: only %lld allocations happened", fail_at, g_ca.calls);
    if (st != MFT_OK) {
        stats->failed_runs++;
        CHECK_MSG(st == MFT_ERR_NOMEM, "k=%lld%s: status %s, message '%s'", fail_at,
                  sticky ? "+" : "", mft_status_str(st), mft_last_error_message());
        CHECK_MSG(mft_last_error() == MFT_ERR_NOMEM, "k=%lld%s: last error %s", fail_at,
                  sticky ? "+" : "", mft_status_str(mft_last_error()));
        const char *msg = mft_last_error_message();
        CHECK_MSG(strncmp(msg, "mft_", 4) == 0 && strstr(msg, "out of memory") != NULL,
                  "k=%lld%s: message '%s'", fail_at, sticky ? "+" : "", msg);
        CHECK_MSG(g_ca.injected >= 1, "k=%lld: failed without an injected failure", fail_at);
    } else {
        /* the failure was absorbed: the results must be the clean ones */
        stats->absorbed_runs++;
        CHECK_MSG(res.digest == clean_digest, "k=%lld%s: absorbed failure changed the results",
                  fail_at, sticky ? "+" : "");
    }
    CHECK_MSG(mft_live_tensors() == 0, "k=%lld%s: %lld live tensors", fail_at, sticky ? "+" : "",
              (long long)mft_live_tensors());
    CHECK_MSG(mft_live_storages() == 0, "k=%lld%s: %lld live storages", fail_at, sticky ? "+" : "",
              (long long)mft_live_storages());
    CHECK_MSG(g_ca.live == 0, "k=%lld%s: %lld allocations not freed", fail_at, sticky ? "+" : "",
              g_ca.live);
    if (res.blob_state == BLOB_WRAPPED) {
        stats->wrapped_runs++;
        CHECK_MSG(g_blob_deleter_calls == 1, "k=%lld%s: deleter called %d times", fail_at,
                  sticky ? "+" : "", g_blob_deleter_calls);
    } else {
        if (res.blob_state == BLOB_WRAP_FAILED) stats->wrap_failed_runs++;
        CHECK_MSG(g_blob_deleter_calls == 0, "k=%lld%s: deleter called %d times without a tensor",
                  fail_at, sticky ? "+" : "", g_blob_deleter_calls);
    }
    /* every scope the workload opened is closed */
    mft_clear_error();
    CHECK_MSG(mft_scope_end() == MFT_ERR_SCOPE, "k=%lld%s: a scope was left open", fail_at,
              sticky ? "+" : "");
    mft_clear_error();
}

static long long g_workload_allocs = 0;

static void test_alloc_failure_injection(void) {
    mft_allocator a = {ca_alloc, ca_free, &g_ca};
    memset(&g_ca, 0, sizeof g_ca);
    mft_set_allocator(&a);

    /* clean run: counts N, fixes the expected results */
    wl_result res;
    ca_arm(0, false);
    g_blob_deleter_calls = 0;
    mft_clear_error();
    mft_status st = workload(&res);
    CHECK_MSG(st == MFT_OK, "clean workload failed: %s", mft_last_error_message());
    if (st != MFT_OK) {
        mft_set_allocator(NULL);
        return;
    }
    CHECK_EQ_I(mft_last_error(), MFT_OK);
    CHECK_EQ_I(res.blob_state, BLOB_WRAPPED);
    CHECK_EQ_I(g_blob_deleter_calls, 1);
    CHECK_EQ_I(g_ca.live, 0);
    CHECK_EQ_I(g_ca.bad_align, 0);
    CHECK(res.describe_len > 0);
    long long n = g_ca.calls;
    uint64_t clean = res.digest;
    g_workload_allocs = n;
    CHECK(n >= 60); /* the workload makes ~40 tensors, most with storage */

    /* a second clean run is identical (deterministic allocation sequence) */
    ca_arm(0, false);
    g_blob_deleter_calls = 0;
    st = workload(&res);
    CHECK(st == MFT_OK && res.digest == clean);
    CHECK_EQ_I(g_ca.calls, n);
    CHECK_EQ_I(g_ca.live, 0);

    /* fail exactly allocation k */
    run_stats single = {0, 0, 0, 0};
    for (long long k = 1; k <= n; k++) run_one(k, false, clean, &single);
    /* fail allocation k and every later one: cleanup paths must not need memory */
    run_stats sticky = {0, 0, 0, 0};
    for (long long k = 1; k <= n; k++) run_one(k, true, clean, &sticky);

    CHECK_EQ_I(single.failed_runs + single.absorbed_runs, n);
    CHECK(single.failed_runs > 0 && sticky.failed_runs > 0);
    CHECK(single.wrap_failed_runs > 0); /* from_blob itself was made to fail */
    CHECK(single.wrapped_runs > 0);     /* and failures after it released the blob */
    printf("workload: N = %lld allocations; single failure: %d failed, %d absorbed; "
           "from_blob failed in %d runs, wrapped in %d\n",
           n, single.failed_runs, single.absorbed_runs, single.wrap_failed_runs,
           single.wrapped_runs);

    CHECK_EQ_I(g_ca.bad_align, 0);
    mft_set_allocator(NULL);
}

/* The default allocator is back: a tensor made now does not reach the hook. */
static void test_default_allocator_restored(void) {
    const int64_t s[2] = {3, 4};
    ca_arm(0, false);
    mft_tensor *t = mft_ones(2, s, MFT_F32, MFT_CONTIGUOUS);
    CHECK(t != NULL);
    CHECK_EQ_I(g_ca.calls, 0);
    mft_tensor_release(t);
    CHECK_EQ_I(g_ca.calls, 0);
    CHECK_EQ_I(g_ca.live, 0);
}

int main(void) {
    RUN(test_alloc_failure_injection);
    RUN(test_default_allocator_restored);
    TEST_MAIN_END();
}
