/* tests/ops/test_pool.c — 2-D max and average pooling (ops/pool/):
 *   (a) golden cases from PyTorch 1.13 (tests/golden/pool_cases.txt, written
 *       by gen_pool.py): sizes, strides, tag, values, indices, errors;
 *   (b) every kernel of the table, and the F32 reference, against the
 *       reference kernel over parameter sweeps and random input layouts
 *       (non-dense ones too), through the public entry points and by calling
 *       the kernels directly on packed inputs;
 *   (c) dispatch: which kernel ran, conversions, strict mode, user kernels;
 *   (d) argument errors. */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

/* ops/pool/: the reference kernels (not in the table for F32). */
mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt);

/* ------------------------------------------------------------------ helpers */

/* Value of the golden generators at logical linear index i. */
static double gen_value(const char *gen, int64_t i) {
    double v = (double)((i * 37) % 23 - 11) / 4.0;
    if (strcmp(gen, "nan") == 0 && i % 7 == 3) return NAN;
    if (strcmp(gen, "neginf") == 0 && i % 3 != 0) return -INFINITY;
    return v;
}

/* Packed contiguous tensor of sizes filled by gen, converted to fmt. */
static mft_tensor *make_input(int nd, const int64_t *sizes, mft_format fmt, mft_dtype dt,
                              const char *gen) {
    mft_tensor *t = mft_empty(nd, sizes, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    int64_t n = mft_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == MFT_F32) ((float *)mft_tensor_data(t))[i] = (float)gen_value(gen, i);
        else ((double *)mft_tensor_data(t))[i] = gen_value(gen, i);
    }
    if (fmt == MFT_CONTIGUOUS) return t;
    mft_tensor *c = mft_contiguous(t, fmt);
    mft_tensor_release(t);
    return c;
}

/* tol EXACT: equal, and a zero of the same sign. */
#define EXACT (-1.0)
static bool same_value(double a, double b, double tol) {
    if (a != a || b != b) return a != a && b != b;
    if (isinf(a) || isinf(b)) return a == b;
    if (tol == EXACT) return a == b && signbit(a) == signbit(b);
    return fabs(a - b) <= tol;
}

/* Logical comparison of two tensors of equal sizes; reports the first
 * mismatch with `what`. Returns true when equal within tol. */
static bool tensors_match(const mft_tensor *got, const mft_tensor *want, double tol,
                          const char *what) {
    if (!got || !want) {
        CHECK_MSG(false, "%s: missing tensor (%s)", what, mft_last_error_message());
        return false;
    }
    int nd = mft_tensor_ndim(want);
    if (!tu_has_sizes(got, nd, mft_tensor_sizes(want))) {
        CHECK_MSG(false, "%s: sizes differ", what);
        return false;
    }
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(want) == 0) return true;
    do {
        double g = mft_tensor_get(got, idx), w = mft_tensor_get(want, idx);
        if (!same_value(g, w, tol)) {
            char b[64];
            tu_fmt_list(b, sizeof b, nd, idx);
            CHECK_MSG(false, "%s: at %s got %.9g, want %.9g", what, b, g, w);
            return false;
        }
    } while (tu_next_index(nd, mft_tensor_sizes(want), idx));
    return true;
}

/* ------------------------------------------------------------------ (a) golden */
#define GP_LINE (1 << 16)
#define GP_MAX_VALUES 4096

enum { F_OP = 1, F_INPUT = 2, F_PARAMS = 4, F_RESULT = 8, F_SIZES = 16, F_STRIDES = 32,
       F_TAG = 64, F_VALUES = 128, F_INDICES = 256 };

typedef struct {
    int line;
    char name[96];
    unsigned seen;
    bool is_max, expect_error, strides_dash;
    tu_list in_sizes, sizes, strides;
    mft_format in_fmt, tag;
    mft_dtype dtype;
    char gen[16];
    int64_t prm[11];
    int nvalues, nindices;
    double values[GP_MAX_VALUES];
    int64_t indices[GP_MAX_VALUES];
} gp_case;

static gp_case g_case;
static struct {
    int cases, error_cases, values_checked;
} g_stats;

static bool parse_fmt(const char *s, mft_format *f) {
    if (strcmp(s, "contiguous") == 0) *f = MFT_CONTIGUOUS;
    else if (strcmp(s, "channels_last") == 0) *f = MFT_CHANNELS_LAST;
    else return false;
    return true;
}

static bool parse_line(const char *line, gp_case *c) {
    const char *p = line;
    char key[32], tok[32];
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "op") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "max") != 0 && strcmp(tok, "avg") != 0) return false;
        c->is_max = strcmp(tok, "max") == 0;
        c->seen |= F_OP;
    } else if (strcmp(key, "input") == 0) {
        if (!tu_next_list(&p, &c->in_sizes) || !tu_next_tok(&p, tok, sizeof tok) ||
            !parse_fmt(tok, &c->in_fmt) || !tu_next_tok(&p, tok, sizeof tok))
            return false;
        if (strcmp(tok, "f32") == 0) c->dtype = MFT_F32;
        else if (strcmp(tok, "f64") == 0) c->dtype = MFT_F64;
        else return false;
        if (!tu_next_tok(&p, c->gen, sizeof c->gen)) return false;
        c->seen |= F_INPUT;
    } else if (strcmp(key, "params") == 0) {
        for (int i = 0; i < 11; i++)
            if (!tu_next_int(&p, &c->prm[i])) return false;
        c->seen |= F_PARAMS;
    } else if (strcmp(key, "result") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->expect_error = strcmp(tok, "error") == 0;
        if (!c->expect_error && strcmp(tok, "ok") != 0) return false;
        c->seen |= F_RESULT;
    } else if (strcmp(key, "sizes") == 0) {
        if (!tu_next_list(&p, &c->sizes)) return false;
        c->seen |= F_SIZES;
    } else if (strcmp(key, "strides") == 0) {
        const char *q = p;
        if (tu_next_tok(&q, tok, sizeof tok) && strcmp(tok, "-") == 0) {
            c->strides_dash = true;
            p = q;
        }
        else if (!tu_next_list(&p, &c->strides)) return false;
        c->seen |= F_STRIDES;
    } else if (strcmp(key, "tag") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok) || !parse_fmt(tok, &c->tag)) return false;
        c->seen |= F_TAG;
    } else if (strcmp(key, "values") == 0 || strcmp(key, "indices") == 0) {
        bool vals = strcmp(key, "values") == 0;
        int64_t n;
        if (!tu_next_int(&p, &n) || n < 0 || n > GP_MAX_VALUES) return false;
        for (int64_t i = 0; i < n; i++) {
            if (!tu_next_tok(&p, tok, sizeof tok)) return false;
            char *end;
            if (vals) c->values[i] = strtod(tok, &end);
            else c->indices[i] = strtoll(tok, &end, 10);
            if (*end != '\0') return false;
        }
        if (vals) c->nvalues = (int)n;
        else c->nindices = (int)n;
        c->seen |= vals ? F_VALUES : F_INDICES;
    } else {
        return false;
    }
    return tu_at_eol(p);
}

static void run_golden_case(const gp_case *c) {
    g_stats.cases++;
    mft_tensor *x = make_input(c->in_sizes.n, c->in_sizes.v, c->in_fmt, c->dtype, c->gen);
    CHECK_MSG(x != NULL, "case %s (line %d): input: %s", c->name, c->line, mft_last_error_message());
    if (!x) return;
    const int64_t *k = c->prm, *s = c->prm + 2, *pd = c->prm + 4, *dl = c->prm + 6;
    mft_tensor *y, *ind = NULL;
    mft_clear_error();
    if (c->is_max) y = mft_max_pool2d_with_indices(x, k, s, pd, dl, c->prm[8] != 0, &ind);
    else y = mft_avg_pool2d(x, k, s, pd, c->prm[8] != 0, c->prm[9] != 0, c->prm[10]);
    if (c->expect_error) {
        g_stats.error_cases++;
        CHECK_MSG(y == NULL && mft_last_error() != MFT_OK,
                  "case %s (line %d): PyTorch rejects it, mft returned %s", c->name, c->line,
                  y ? "a tensor" : "NULL without an error");
        CHECK_MSG(strncmp(mft_last_error_message(), c->is_max ? "mft_max_pool2d_with_indices: "
                                                              : "mft_avg_pool2d: ",
                          c->is_max ? 29 : 16) == 0,
                  "case %s: message '%s' does not name the function", c->name,
                  mft_last_error_message());
        CHECK(ind == NULL);
        mft_clear_error();
        mft_tensor_release(y);
        mft_tensor_release(x);
        return;
    }
    CHECK_MSG(y != NULL, "case %s (line %d): %s", c->name, c->line, mft_last_error_message());
    if (y) {
        int nd = mft_tensor_ndim(y);
        char a[128], b[128];
        tu_fmt_list(a, sizeof a, nd, mft_tensor_sizes(y));
        CHECK_MSG(tu_list_eq(&c->sizes, nd, mft_tensor_sizes(y)), "case %s: sizes %s", c->name, a);
        tu_fmt_list(b, sizeof b, nd, mft_tensor_strides(y));
        if (!c->strides_dash) {
            tu_fmt_list(a, sizeof a, c->strides.n, c->strides.v);
            CHECK_MSG(tu_list_eq(&c->strides, nd, mft_tensor_strides(y)),
                      "case %s (line %d): strides %s, want %s", c->name, c->line, b, a);
        } else {
            int64_t want[4];
            mft_strides_for_format(nd, mft_tensor_sizes(y), c->tag, want);
            CHECK_MSG(memcmp(want, mft_tensor_strides(y), sizeof(int64_t) * (size_t)nd) == 0,
                      "case %s: strides %s are not packed in the tag", c->name, b);
        }
        CHECK_MSG(mft_tensor_format(y) == c->tag, "case %s: tag %s, want %s", c->name,
                  mft_format_name(mft_tensor_format(y)), mft_format_name(c->tag));
        CHECK(mft_tensor_dtype(y) == c->dtype);
        CHECK_EQ_I(mft_tensor_numel(y), c->nvalues);
        int64_t idx[MFT_MAX_DIMS] = {0};
        int bad = 0;
        for (int i = 0; i < c->nvalues && bad < 3 && mft_tensor_numel(y) == c->nvalues; i++) {
            double g = mft_tensor_get(y, idx);
            if (!same_value(g, c->values[i], 1e-5)) {
                CHECK_MSG(false, "case %s (line %d): value %d = %.9g, want %.9g", c->name, c->line,
                          i, g, c->values[i]);
                bad++;
            }
            if (c->is_max && ind && i < c->nindices) {
                double gi = mft_tensor_get(ind, idx);
                if (gi != (double)c->indices[i]) {
                    CHECK_MSG(false, "case %s (line %d): index %d = %.0f, want %lld", c->name,
                              c->line, i, gi, (long long)c->indices[i]);
                    bad++;
                }
            }
            g_stats.values_checked++;
            tu_next_index(nd, mft_tensor_sizes(y), idx);
        }
        CHECK_MSG(bad == 0, "case %s: %d mismatches", c->name, bad);
        if (c->is_max) {
            CHECK(ind != NULL && mft_tensor_dtype(ind) == MFT_I64);
            CHECK_EQ_I(c->nindices, c->nvalues);
            if (ind) {
                CHECK(memcmp(mft_tensor_strides(ind), mft_tensor_strides(y),
                             sizeof(int64_t) * (size_t)nd) == 0);
                CHECK(mft_tensor_format(ind) == c->tag);
            }
            /* mft_max_pool2d gives the same values */
            mft_tensor *y2 = mft_max_pool2d(x, k, s, pd, dl, c->prm[8] != 0);
            CHECK_MSG(y2 && mft_tensor_hash(y2) == mft_tensor_hash(y), "case %s: mft_max_pool2d "
                      "differs from the _with_indices values", c->name);
            mft_tensor_release(y2);
        }
    }
    mft_tensor_release(ind);
    mft_tensor_release(y);
    mft_tensor_release(x);
}

static bool case_field(const char *line) { return parse_line(line, &g_case); }

static void case_end(int lineno, bool in_case) {
    unsigned need = F_OP | F_INPUT | F_PARAMS | F_RESULT;
    if (in_case && !g_case.expect_error)
        need |= F_SIZES | F_STRIDES | F_TAG | F_VALUES | (g_case.is_max ? F_INDICES : 0u);
    bool complete = in_case && (g_case.seen & need) == need;
    CHECK_MSG(complete, "line %d: incomplete case %s (fields 0x%x)", lineno, g_case.name,
              g_case.seen);
    if (complete) run_golden_case(&g_case);
}

static void test_golden_pool(void) {
    static char line[GP_LINE];
    const tu_golden_file file = {MFT_TEST_DATA_DIR "/pool_cases.txt", line, GP_LINE, true,
                                 &g_case, sizeof g_case, &g_case.line, g_case.name,
                                 sizeof g_case.name, case_field, case_end};
    if (!tu_read_golden(&file)) return;
    CHECK_MSG(g_stats.cases >= 600, "only %d cases", g_stats.cases);
    CHECK_MSG(g_stats.error_cases >= 15, "only %d error cases", g_stats.error_cases);
    printf("golden pool: %d cases (%d error cases), %d values checked\n", g_stats.cases,
           g_stats.error_cases, g_stats.values_checked);
}

/* ------------------------------------------------------------------ (b) kernels vs reference */

/* Random values with many ties (quarter steps), and some NaN / -inf. */
static void fill_random(mft_tensor *t, uint64_t *rng, bool specials) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double v = (double)tu_rng_int(rng, -12, 12) / 4.0;
        if (v == 0 && tu_rng_int(rng, 0, 1)) v = -0.0;
        if (specials) {
            int64_t r = tu_rng_int(rng, 0, 40);
            if (r == 0) v = NAN;
            else if (r == 1) v = -INFINITY;
            else if (r == 2) v = INFINITY;
        }
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

typedef struct {
    mft__op_id op;
    mft_pool2d_params p;
} sweep_case;

/* Runs kernel fn on x (any layout the kernel accepts) into fresh outputs
 * packed in fmt. Returns the values output; *ind gets the indices (max). */
static mft_tensor *run_kernel(mft_kernel_fn fn, const sweep_case *sc, const mft_tensor *x,
                              mft_format fmt, const int64_t *out_sizes, mft_tensor **ind) {
    mft_tensor *outs[2] = {mft_empty(4, out_sizes, mft_tensor_dtype(x), fmt), NULL};
    int nout = sc->op != MFT__OP_AVG_POOL2D ? 2 : 1;
    if (nout == 2) outs[1] = mft_empty(4, out_sizes, MFT_I64, fmt);
    const mft_tensor *ins[1] = {x};
    mft_kernel_args args = {1, nout, ins, outs, &sc->p};
    if (outs[0] && (nout == 1 || outs[1])) fn(&args);
    *ind = outs[1];
    return outs[0];
}

static void out_sizes_of(const sweep_case *sc, const int64_t *xs, int64_t *os) {
    os[0] = xs[0];
    os[1] = xs[1];
    for (int d = 0; d < 2; d++) {
        const mft_pool2d_params *p = &sc->p;
        int64_t in = xs[2 + d], k = p->kernel[d], s = p->stride[d], pad = p->padding[d],
                dl = p->dilation[d];
        int64_t num = in + 2 * pad - dl * (k - 1) - 1 + (p->ceil_mode ? s - 1 : 0);
        int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
        if (p->ceil_mode && (o - 1) * s >= in + pad) o--;
        os[2 + d] = o;
    }
}

/* One sweep case: public call on a random layout, every table kernel and the
 * F32 reference on packed inputs, all against the reference on the raw view. */
static int sweep_one(const sweep_case *sc, mft_dtype dt, const int64_t *xs, uint64_t *rng,
                     const char *label) {
    int fails_before = harness_checks_failed_;
    int64_t os[4];
    out_sizes_of(sc, xs, os);
    if (os[2] < 1 || os[3] < 1) return 0;
    const tu_layout_opts lo = {3, 2, false};
    mft_tensor *x = tu_strided_view(4, xs, dt, 0.0, &lo, rng, NULL);
    CHECK(x != NULL);
    if (!x) return 1;
    fill_random(x, rng, tu_rng_int(rng, 0, 2) == 0);
    const mft_pool2d_params *p = &sc->p;
    const bool is_max = sc->op != MFT__OP_AVG_POOL2D;
    const bool relu = sc->op == MFT__OP_RELU_MAX_POOL2D;
    char what[256];
    snprintf(what, sizeof what, "%s %s k[%lld,%lld] s[%lld,%lld] p[%lld,%lld] d[%lld,%lld] c%d i%d v%lld x[%lld,%lld,%lld,%lld]",
             label, relu ? "relu_max" : is_max ? "max" : "avg", (long long)p->kernel[0], (long long)p->kernel[1],
             (long long)p->stride[0], (long long)p->stride[1], (long long)p->padding[0],
             (long long)p->padding[1], (long long)p->dilation[0], (long long)p->dilation[1],
             (int)p->ceil_mode, (int)p->count_include_pad, (long long)p->divisor_override,
             (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3]);

    /* the reference on the raw (strided) view */
    mft_tensor *ref_i = NULL;
    mft_tensor *ref = run_kernel(mft__pool_reference(sc->op, dt), sc, x, MFT_CONTIGUOUS, os, &ref_i);

    /* a window with no input element (dilation next to padding) */
    bool empty = false;
    for (int d = 0; d < 2; d++)
        for (int64_t o = 0; o < os[2 + d]; o++) {
            bool any = false;
            for (int64_t k = 0; k < p->kernel[d]; k++) {
                int64_t i = o * p->stride[d] - p->padding[d] + k * p->dilation[d];
                any |= i >= 0 && i < xs[2 + d];
            }
            empty |= !any;
        }
    if (relu && empty) { /* refused: relu of the maximum cannot give the chain's -inf */
        mft_tensor *yi = NULL;
        mft_tensor *y = mft_relu_max_pool2d_with_indices(x, p->kernel, p->stride, p->padding,
                                                         p->dilation, p->ceil_mode, &yi);
        CHECK_MSG(!y && !yi && mft_last_error() == MFT_ERR_INVALID &&
                      strstr(mft_last_error_message(), "covers no input element"),
                  "%s: empty window accepted (%s)", what, mft_last_error_message());
        mft_clear_error();
        mft_tensor_release(y);
        mft_tensor_release(yi);
        mft_tensor_release(ref);
        mft_tensor_release(ref_i);
        mft_tensor_release(x);
        return harness_checks_failed_ != fails_before;
    }
    if (relu && ref) { /* the fused reference against its definition: max pool of relu(x) */
        const sweep_case mc = {MFT__OP_MAX_POOL2D, *p};
        mft_tensor *rx = mft_relu(x), *mi = NULL;
        mft_tensor *m = rx ? run_kernel(mft__pool_reference(MFT__OP_MAX_POOL2D, dt), &mc, rx,
                                        MFT_CONTIGUOUS, os, &mi)
                           : NULL;
        char w0[300];
        snprintf(w0, sizeof w0, "%s reference vs max_pool2d(relu(x))", what);
        tensors_match(ref, m, 0, w0);
        /* indices: the chain's where its maximum is > 0 or NaN, else -1 */
        int64_t ix[4] = {0, 0, 0, 0};
        if (m && mi && ref_i && mft_tensor_numel(m) > 0) do {
            const double v = mft_tensor_get(m, ix);
            const double want = (v > 0 || v != v) ? mft_tensor_get(mi, ix) : -1.0;
            if (mft_tensor_get(ref_i, ix) != want) {
                CHECK_MSG(false, "%s: index %g, want %g (max %g)", w0, mft_tensor_get(ref_i, ix),
                          want, v);
                break;
            }
        } while (tu_next_index(4, os, ix));
        mft_tensor_release(m);
        mft_tensor_release(mi);
        mft_tensor_release(rx);
    }

    /* the public entry point: result packed in x's tag */
    mft_tensor *y, *yi = NULL;
    if (relu) y = mft_relu_max_pool2d_with_indices(x, p->kernel, p->stride, p->padding,
                                                   p->dilation, p->ceil_mode, &yi);
    else if (is_max) y = mft_max_pool2d_with_indices(x, p->kernel, p->stride, p->padding, p->dilation,
                                                p->ceil_mode, &yi);
    else y = mft_avg_pool2d(x, p->kernel, p->stride, p->padding, p->ceil_mode,
                            p->count_include_pad, p->divisor_override);
    char w2[300];
    snprintf(w2, sizeof w2, "%s public", what);
    /* quarter steps: every sum is exact, so every kernel equals the
     * reference bit for bit (the sign of a zero too) */
    tensors_match(y, ref, EXACT, w2);
    if (is_max) tensors_match(yi, ref_i, 0, w2);
    if (y) {
        int64_t want[4];
        mft_strides_for_format(4, os, mft_tensor_format(x), want);
        CHECK_MSG(memcmp(want, mft_tensor_strides(y), sizeof want) == 0 &&
                  mft_tensor_format(y) == mft_tensor_format(x), "%s: result not packed in x's tag", w2);
    }
    mft_tensor_release(y);
    mft_tensor_release(yi);

    /* every table kernel of (op, dtype), and the reference, on packed inputs */
    for (const mft__kernel_def *d = mft__kernels_pool; d->fn; d++) {
        if (d->op != sc->op || d->dtype != dt) continue;
        mft_format f = d->fmt == MFT_FORMAT_ANY ? MFT_CONTIGUOUS : d->fmt;
        mft_tensor *xp = mft_contiguous(x, f);
        mft_tensor *ki = NULL, *ky = run_kernel(d->fn, sc, xp, f, os, &ki);
        snprintf(w2, sizeof w2, "%s kernel %s", what, d->name);
        tensors_match(ky, ref, EXACT, w2);
        if (is_max) tensors_match(ki, ref_i, 0, w2);
        mft_tensor_release(ky);
        mft_tensor_release(ki);
        mft_tensor_release(xp);
    }
    for (int f = 0; f < 2; f++) {
        mft_tensor *xp = mft_contiguous(x, (mft_format)f);
        mft_tensor *ki = NULL, *ky = run_kernel(mft__pool_reference(sc->op, dt), sc, xp,
                                                (mft_format)f, os, &ki);
        snprintf(w2, sizeof w2, "%s reference packed %s", what, mft_format_name((mft_format)f));
        tensors_match(ky, ref, 0, w2);
        if (is_max) tensors_match(ki, ref_i, 0, w2);
        mft_tensor_release(ky);
        mft_tensor_release(ki);
        mft_tensor_release(xp);
    }
    mft_tensor_release(ref);
    mft_tensor_release(ref_i);
    mft_tensor_release(x);
    return harness_checks_failed_ != fails_before;
}

static void sweep(mft_dtype dt, int ncases, uint64_t seed) {
    uint64_t rng = seed;
    int ran = 0, failed = 0;
    for (int i = 0; i < ncases && failed < 5; i++) {
        sweep_case sc;
        memset(&sc, 0, sizeof sc);
        sc.op = (i & 1) ? MFT__OP_AVG_POOL2D : (i & 2) ? MFT__OP_RELU_MAX_POOL2D : MFT__OP_MAX_POOL2D;
        mft_pool2d_params *p = &sc.p;
        for (int d = 0; d < 2; d++) {
            p->kernel[d] = tu_rng_int(&rng, 1, 4);
            p->stride[d] = tu_rng_int(&rng, 1, 3);
            p->padding[d] = tu_rng_int(&rng, 0, p->kernel[d] / 2);
            p->dilation[d] = sc.op != MFT__OP_AVG_POOL2D ? tu_rng_int(&rng, 1, 3) : 1;
        }
        p->ceil_mode = tu_rng_int(&rng, 0, 1);
        p->count_include_pad = tu_rng_int(&rng, 0, 1);
        p->divisor_override = sc.op == MFT__OP_AVG_POOL2D && tu_rng_int(&rng, 0, 3) == 0
                                  ? tu_rng_int(&rng, -3, 7) : 0;
        if (p->divisor_override == 0 && tu_rng_int(&rng, 0, 1)) p->divisor_override = 0;
        /* channels: mostly few, every third case past the 64-channel
         * register blocks of the NHWC kernels, with tails */
        const int64_t C = i % 3 == 2 ? tu_rng_int(&rng, 20, 150) : tu_rng_int(&rng, 1, 19);
        int64_t xs[4] = {tu_rng_int(&rng, 1, 3), C, tu_rng_int(&rng, 1, 11),
                         tu_rng_int(&rng, 1, 11)};
        int r = sweep_one(&sc, dt, xs, &rng, dt == MFT_F32 ? "f32" : "f64");
        failed += r;
        int64_t os[4];
        out_sizes_of(&sc, xs, os);
        if (os[2] >= 1 && os[3] >= 1) ran++;
    }
    CHECK_MSG(ran >= ncases / 2, "only %d of %d sweep cases had a valid output size", ran, ncases);
    printf("sweep %s: %d cases ran\n", mft_dtype_name(dt), ran);
}

static void test_kernels_f32(void) { sweep(MFT_F32, 600, 0x9e3779b97f4a7c15ull); }
static void test_kernels_f64(void) { sweep(MFT_F64, 200, 0x1234567887654321ull); }

/* Big enough for the parallel split (several threads). */
static void test_kernels_parallel(void) {
    uint64_t rng = 77;
    mft_set_num_threads(4);
    for (int op = 0; op < 3; op++) {
        sweep_case sc;
        memset(&sc, 0, sizeof sc);
        sc.op = op == 1 ? MFT__OP_AVG_POOL2D : op ? MFT__OP_RELU_MAX_POOL2D : MFT__OP_MAX_POOL2D;
        for (int d = 0; d < 2; d++) {
            sc.p.kernel[d] = 3;
            sc.p.stride[d] = 1 + d;
            sc.p.padding[d] = 1;
            sc.p.dilation[d] = 1;
        }
        const int64_t xs[4] = {3, 24, 37, 41};
        sweep_one(&sc, MFT_F32, xs, &rng, "parallel");
    }
    mft_set_num_threads(0);
}

/* Rows wide enough for the NCHW kernels' register blocks (2 x 8 and 8
 * outputs, an overlapping last block, edges): avg at W-stride 1, max at
 * W-stride 1 and 2; kernels 1-4 with their paddings, both
 * count_include_pad and ceil modes. */
static void test_wide_rows(void) {
    uint64_t rng = 91;
    static const int64_t ws[3] = {45, 24, 17};
    for (int op = 0; op < 3; op++)
        for (int k = 1; k <= 4; k++)
            for (int v = 0; v < 4; v++) {
                sweep_case sc;
                memset(&sc, 0, sizeof sc);
                sc.op = op ? MFT__OP_MAX_POOL2D : MFT__OP_AVG_POOL2D;
                sc.p.kernel[0] = 2;
                sc.p.stride[0] = 1;
                sc.p.kernel[1] = k;
                sc.p.stride[1] = op == 2 ? 2 : 1;
                sc.p.padding[1] = k / 2;
                sc.p.dilation[0] = sc.p.dilation[1] = 1;
                sc.p.count_include_pad = v & 1;
                sc.p.ceil_mode = (v >> 1) & 1;
                const int64_t xs[4] = {2, 3, 5, ws[(k + v) % 3]};
                sweep_one(&sc, MFT_F32, xs, &rng, "wide rows");
            }
}

/* Rank 3 equals rank 4 with N = 1, for a non-contiguous (HWC-ordered) input. */
static void test_rank3(void) {
    const int64_t s3[3] = {5, 9, 8};
    const int perm[3] = {1, 2, 0};
    mft_tensor *hwc = mft_rand(3, (const int64_t[]){9, 8, 5}, MFT_F32, MFT_CONTIGUOUS, 5);
    mft_tensor *x = mft_permute(hwc, (const int[]){2, 0, 1});
    (void)perm;
    CHECK(tu_has_sizes(x, 3, s3));
    mft_tensor *x4 = mft_unsqueeze(x, 0);
    const int64_t k[2] = {3, 2}, st[2] = {2, 1}, pd[2] = {1, 1}, dl[2] = {1, 2};
    mft_tensor *i3 = NULL, *i4 = NULL;
    mft_tensor *y3 = mft_max_pool2d_with_indices(x, k, st, pd, dl, true, &i3);
    mft_tensor *y4 = mft_max_pool2d_with_indices(x4, k, st, pd, dl, true, &i4);
    CHECK(y3 && mft_tensor_ndim(y3) == 3 && mft_tensor_is_contiguous(y3, MFT_CONTIGUOUS));
    CHECK(i3 && mft_tensor_ndim(i3) == 3);
    mft_tensor *y4s = mft_squeeze(y4, 0), *i4s = mft_squeeze(i4, 0);
    tensors_match(y3, y4s, 0, "rank3 max");
    tensors_match(i3, i4s, 0, "rank3 max indices");
    mft_tensor *a3 = mft_avg_pool2d(x, k, st, pd, false, false, 0);
    mft_tensor *a4 = mft_avg_pool2d(x4, k, st, pd, false, false, 0);
    mft_tensor *a4s = mft_squeeze(a4, 0);
    tensors_match(a3, a4s, 1e-6, "rank3 avg");
    mft_tensor *ts[] = {hwc, x, x4, i3, i4, y3, y4, y4s, i4s, a3, a4, a4s};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ (c) dispatch */
static int g_user_calls;
static void user_max_kernel(const mft_kernel_args *a) {
    g_user_calls++;
    mft__fill(a->outputs[0], 42.0);
    mft__fill(a->outputs[1], 7.0);
}

static void test_dispatch(void) {
    const int64_t sz[4] = {2, 8, 6, 6}, k[2] = {2, 2};
    mft_tensor *nhwc = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *nchw = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    const mft_dispatch_info *d;

    mft_tensor *y = mft_max_pool2d(nhwc, k, NULL, NULL, NULL, false);
    d = mft_dispatch_last();
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    CHECK(strcmp(d->op, "max_pool2d") == 0);
    CHECK_MSG(strcmp(d->kernel, "max_pool2d.nhwc.f32") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    CHECK(!d->user && d->format == MFT_CHANNELS_LAST && d->kernel_format == MFT_CHANNELS_LAST);
    CHECK(d->dtype == MFT_F32);
    mft_tensor_release(y);

    y = mft_avg_pool2d(nchw, k, NULL, NULL, false, true, 0);
    d = mft_dispatch_last();
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CONTIGUOUS));
    CHECK(strcmp(d->op, "avg_pool2d") == 0);
    CHECK_MSG(strcmp(d->kernel, "avg_pool2d.nchw.f32") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    mft_tensor_release(y);

    y = mft_avg_pool2d(nhwc, k, NULL, NULL, false, true, 0);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "avg_pool2d.nhwc.f32") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    mft_tensor_release(y);

    /* a non-dense NHWC input (W sliced by 2) is converted for the NHWC kernel */
    mft_tensor *sl = mft_slice(nhwc, 3, 0, 6, 2);
    CHECK(mft_tensor_format(sl) == MFT_CHANNELS_LAST);
    y = mft_max_pool2d(sl, k, NULL, NULL, NULL, true);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "max_pool2d.nhwc.f32") == 0, "kernel %s", d->kernel);
    CHECK_MSG(d->conversions == 1, "conversions %d", d->conversions);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    mft_tensor_release(y);
    mft_tensor_release(sl);

    /* F64 NHWC: no NHWC F64 kernel -> fallback through CONTIGUOUS */
    mft_tensor *nhwc64 = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 2);
    mft_dispatch_conversions_reset();
    mft_tensor *yi = NULL;
    y = mft_max_pool2d_with_indices(nhwc64, k, NULL, NULL, NULL, false, &yi);
    d = mft_dispatch_last();
    CHECK_MSG(y != NULL, "%s", mft_last_error_message());
    CHECK_MSG(strcmp(d->kernel, "max_pool2d.nchw.f64.ref") == 0, "kernel %s", d->kernel);
    CHECK(d->format == MFT_CHANNELS_LAST && d->kernel_format == MFT_CONTIGUOUS);
    CHECK_MSG(d->conversions > 0, "conversions %d", d->conversions);
    CHECK(mft_dispatch_conversions() > 0);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST) && mft_tensor_format(y) == MFT_CHANNELS_LAST);
    CHECK(yi && mft_tensor_is_contiguous(yi, MFT_CHANNELS_LAST));
    {
        sweep_case sc;
        memset(&sc, 0, sizeof sc);
        sc.op = MFT__OP_MAX_POOL2D;
        for (int i = 0; i < 2; i++) {
            sc.p.kernel[i] = sc.p.stride[i] = 2;
            sc.p.dilation[i] = 1;
        }
        int64_t os[4];
        out_sizes_of(&sc, sz, os);
        mft_tensor *ri = NULL, *r = run_kernel(mft__pool_reference(MFT__OP_MAX_POOL2D, MFT_F64), &sc,
                                               nhwc64, MFT_CONTIGUOUS, os, &ri);
        tensors_match(y, r, 0, "f64 fallback values");
        tensors_match(yi, ri, 0, "f64 fallback indices");
        mft_tensor_release(r);
        mft_tensor_release(ri);
    }
    mft_tensor_release(y);
    mft_tensor_release(yi);

    /* strict mode: the same call fails */
    mft_dispatch_set_strict(true);
    mft_clear_error();
    yi = (mft_tensor *)1;
    y = mft_max_pool2d_with_indices(nhwc64, k, NULL, NULL, NULL, false, &yi);
    CHECK(y == NULL && yi == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_max_pool2d_with_indices");
    y = mft_avg_pool2d(nhwc64, k, NULL, NULL, false, true, 0);
    CHECK(y == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_avg_pool2d");
    /* exact kernels still run in strict mode */
    y = mft_max_pool2d(nhwc, k, NULL, NULL, NULL, false);
    CHECK(y != NULL);
    mft_tensor_release(y);
    mft_dispatch_set_strict(false);
    CHECK(!mft_dispatch_strict());

    /* a user kernel wins and is reported as such */
    TU_OK_S(mft_dispatch_register("max_pool2d", MFT_CHANNELS_LAST, MFT_F32, "my.max.nhwc",
                                  user_max_kernel));
    g_user_calls = 0;
    y = mft_max_pool2d_with_indices(nhwc, k, NULL, NULL, NULL, false, &yi);
    d = mft_dispatch_last();
    CHECK_EQ_I(g_user_calls, 1);
    CHECK(d->user);
    CHECK_MSG(strcmp(d->kernel, "my.max.nhwc") == 0, "kernel %s", d->kernel);
    CHECK(y && mft_tensor_get(y, (const int64_t[]){1, 2, 0, 1}) == 42.0);
    CHECK(yi && mft_tensor_get(yi, (const int64_t[]){0, 0, 2, 2}) == 7.0);
    mft_tensor_release(y);
    mft_tensor_release(yi);
    /* the list shows it */
    char buf[4096];
    mft_dispatch_list(buf, sizeof buf);
    CHECK(strstr(buf, "my.max.nhwc") != NULL);
    CHECK(strstr(buf, "max_pool2d.nhwc.f32") != NULL && strstr(buf, "avg_pool2d.nchw.f32") != NULL);
    TU_OK_S(mft_dispatch_unregister("max_pool2d", MFT_CHANNELS_LAST, MFT_F32));
    y = mft_max_pool2d(nhwc, k, NULL, NULL, NULL, false);
    d = mft_dispatch_last();
    CHECK(!d->user && strcmp(d->kernel, "max_pool2d.nhwc.f32") == 0);
    CHECK_EQ_I(g_user_calls, 1);
    mft_tensor_release(y);

    mft_tensor_release(nhwc64);
    mft_tensor_release(nhwc);
    mft_tensor_release(nchw);
}

/* Results belong to the innermost scope; internal temporaries do not. */
static void test_scope(void) {
    const int64_t sz[3] = {3, 6, 6}, k[2] = {2, 2};
    mft_tensor *x = mft_rand(3, sz, MFT_F32, MFT_CONTIGUOUS, 3);
    int64_t live = mft_live_tensors();
    TU_OK_S(mft_scope_begin());
    mft_tensor *ind = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &ind);
    mft_tensor *a = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
    CHECK(y && ind && a);
    mft_tensor *kept = mft_scope_keep(a);
    CHECK(kept == a);
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), live + 1);
    mft_tensor_release(kept);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ (d) errors */
#define FAIL_NULL(expr) TU_EXPECT_NULL_(expr, #expr)

static void test_errors(void) {
    const int64_t sz[4] = {1, 2, 5, 5}, k3[2] = {3, 3}, one[2] = {1, 1}, zero[2] = {0, 0};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 9);
    mft_tensor *ind = NULL;

    FAIL_NULL(mft_max_pool2d(NULL, k3, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_NULL, "mft_max_pool2d: argument 'x' is NULL");
    /* NULL propagation keeps an earlier message */
    mft_clear_error();
    mft_tensor_release(mft_select(x, 9, 0));
    CHECK(mft_avg_pool2d(NULL, k3, NULL, NULL, false, true, 0) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "mft_select");
    FAIL_NULL(mft_max_pool2d(x, NULL, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_NULL, "kernel");
    FAIL_NULL(mft_max_pool2d_with_indices(x, k3, NULL, NULL, NULL, false, NULL));
    CHECK_ERR(MFT_ERR_NULL, "mft_max_pool2d_with_indices: argument 'indices' is NULL");

    mft_tensor *x2 = mft_rand(2, (const int64_t[]){5, 5}, MFT_F32, MFT_CONTIGUOUS, 1);
    FAIL_NULL(mft_max_pool2d(x2, k3, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_RANK, "got rank 2");
    mft_tensor *xi = mft_zeros(4, sz, MFT_I32, MFT_CONTIGUOUS);
    FAIL_NULL(mft_avg_pool2d(xi, k3, NULL, NULL, false, true, 0));
    CHECK_ERR(MFT_ERR_DTYPE, "mft_avg_pool2d: dtype i32 is not supported");

    FAIL_NULL(mft_max_pool2d(x, (const int64_t[]){0, 2}, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_INVALID, "mft_max_pool2d: kernel [0,2] should be greater than zero");
    FAIL_NULL(mft_avg_pool2d(x, k3, (const int64_t[]){2, -1}, NULL, false, true, 0));
    CHECK_ERR(MFT_ERR_INVALID, "mft_avg_pool2d: stride [2,-1] should be greater than zero");
    FAIL_NULL(mft_avg_pool2d(x, k3, (const int64_t[]){0, 1}, NULL, false, true, 0));
    CHECK_ERR(MFT_ERR_INVALID, "stride [0,1]");
    FAIL_NULL(mft_max_pool2d(x, k3, one, zero, (const int64_t[]){1, 0}, false));
    CHECK_ERR(MFT_ERR_INVALID, "mft_max_pool2d: dilation [1,0] should be at least 1");
    FAIL_NULL(mft_max_pool2d(x, k3, one, (const int64_t[]){2, 1}, one, false));
    CHECK_ERR(MFT_ERR_INVALID, "mft_max_pool2d: pad 2 should be at most half of kernel 3");
    FAIL_NULL(mft_avg_pool2d(x, (const int64_t[]){3, 2}, one, (const int64_t[]){1, 2}, false, true, 0));
    CHECK_ERR(MFT_ERR_INVALID, "mft_avg_pool2d: pad 2 should be at most half of kernel 2");
    FAIL_NULL(mft_avg_pool2d(x, k3, one, (const int64_t[]){-1, 0}, false, true, 0));
    CHECK_ERR(MFT_ERR_INVALID, "padding [-1,0] should be non-negative");
    FAIL_NULL(mft_max_pool2d_with_indices(x, (const int64_t[]){6, 1}, NULL, NULL, NULL, false, &ind));
    CHECK_ERR(MFT_ERR_SHAPE, "output size [0,5], which is too small");
    CHECK(ind == NULL);
    FAIL_NULL(mft_max_pool2d(x, k3, one, zero, (const int64_t[]){3, 1}, false));
    CHECK_ERR(MFT_ERR_SHAPE, "too small");
    FAIL_NULL(mft_max_pool2d(x, (const int64_t[]){(int64_t)1 << 40, 1}, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_OVERFLOW, "too large");
    mft_tensor *xe = mft_zeros(4, (const int64_t[]){1, 0, 4, 4}, MFT_F32, MFT_CONTIGUOUS);
    FAIL_NULL(mft_max_pool2d(xe, k3, NULL, NULL, NULL, false));
    CHECK_ERR(MFT_ERR_SHAPE, "[1,0,4,4]");

    mft_tensor_release(xe);
    mft_tensor_release(xi);
    mft_tensor_release(x2);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_golden_pool);
    RUN(test_kernels_f32);
    RUN(test_kernels_f64);
    RUN(test_kernels_parallel);
    RUN(test_wide_rows);
    RUN(test_rank3);
    RUN(test_dispatch);
    RUN(test_scope);
    RUN(test_errors);
    TEST_MAIN_END();
}
