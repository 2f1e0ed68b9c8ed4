/* tests/ops/test_resize.c — interpolate forward and backward (ops/resize/resize.c):
 *   (a) golden cases from PyTorch 1.13 (tests/golden/resize_cases.txt, written
 *       by gen_resize.py): every mode, both align_corners, forward values,
 *       strides and tag, input gradients;
 *   (b) every kernel of the table (each fast kernel and the references,
 *       called directly) and the public entry points against a naive loop
 *       written here (dense per-dim weight matrices) over sweeps of sizes,
 *       modes, align_corners, layouts (NCHW, NHWC, strided views, N = 1 made
 *       by select + unsqueeze), F32 and F64;
 *   (c) backward against finite differences (F64), results independent of
 *       the thread count, dispatch (which kernel ran, conversions);
 *   (d) argument errors. */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "mft/resize.h"
#include "test_util.h"

mft_kernel_fn mft__interp_reference(mft__op_id op, mft_dtype dt);

/* ------------------------------------------------------------------ naive semantics
 * W[o * in + i] = weight of input index i in output index o along one dim,
 * from PyTorch's formulas (UpSample.h), coordinates in float for F32 and in
 * double for F64 as PyTorch's opmath. */
static void naive_weights(mft_interp_mode m, bool ac, int64_t in, int64_t out, bool f32,
                          double *W) {
    for (int64_t k = 0; k < in * out; k++) W[k] = 0;
    for (int64_t o = 0; o < out; o++) {
        double *row = W + o * in;
        if (m == MFT_INTERP_NEAREST || m == MFT_INTERP_NEAREST_EXACT) {
            float s = (float)in / (float)out;
            int64_t i;
            if (m == MFT_INTERP_NEAREST)
                i = out == in ? o : out == 2 * in ? o / 2 : (int64_t)floorf((float)o * s);
            else
                i = (int64_t)floorf((float)((o + 0.5) * s));
            row[i < in - 1 ? i : in - 1] += 1;
            continue;
        }
        double scale, src;
        if (f32) {
            float sc = ac ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                          : (float)in / (float)out;
            float sr = ac ? sc * (float)o : sc * ((float)o + 0.5f) - 0.5f;
            scale = sc;
            src = sr;
        } else {
            scale = ac ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                       : (double)in / (double)out;
            src = ac ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
        }
        if (m == MFT_INTERP_BICUBIC) {
            double fl = floor(src), t = src - fl, A = -0.75;
            double d[4] = {t + 1, t, 1 - t, 2 - t};
            for (int k = 0; k < 4; k++) {
                double x = d[k];
                double w = x <= 1 ? ((A + 2) * x - (A + 3)) * x * x + 1
                                  : ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
                int64_t i = (int64_t)fl - 1 + k;
                i = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
                row[i] += w;
            }
            continue;
        }
        if (out == in) {
            row[o] = 1;
            continue;
        }
        if (src < 0) src = 0;
        int64_t i0 = (int64_t)src;
        if (i0 > in - 1) i0 = in - 1;
        int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
        double l1 = f32 ? (double)((float)src - (float)i0) : src - (double)i0;
        row[i0] += 1 - l1;
        row[i1] += l1;
    }
}

/* Naive forward (backward: transposed) over logical indices. want has the
 * destination sizes; src is read with mft_tensor_get. */
static mft_tensor *naive_run(const mft_tensor *src, const int64_t *dst_sizes, mft_interp_mode m,
                             bool ac, bool backward) {
    const int nd = mft_tensor_ndim(src), sp = nd - 2;
    const int64_t *ss = mft_tensor_sizes(src);
    const bool f32 = mft_tensor_dtype(src) == MFT_F32;
    double *W[3] = {NULL, NULL, NULL};
    for (int d = 0; d < sp; d++) {
        int64_t in = backward ? dst_sizes[2 + d] : ss[2 + d];
        int64_t out = backward ? ss[2 + d] : dst_sizes[2 + d];
        W[d] = malloc(sizeof(double) * (size_t)(in * out));
        naive_weights(m, ac, in, out, f32, W[d]);
    }
    mft_tensor *dst = mft_zeros(nd, dst_sizes, MFT_F64, MFT_CONTIGUOUS);
    double *dd = mft_tensor_data(dst);
    int64_t di[MFT_MAX_DIMS] = {0}, si[MFT_MAX_DIMS] = {0};
    int64_t lin = 0;
    if (tu_shape_numel(nd, dst_sizes))
        do {
            double acc = 0;
            si[0] = di[0];
            si[1] = di[1];
            int64_t sub[MFT_MAX_DIMS] = {0};
            /* iterate the source's spatial positions */
            do {
                double w = 1;
                for (int d = 0; d < sp; d++) {
                    si[2 + d] = sub[d];
                    int64_t in = backward ? dst_sizes[2 + d] : ss[2 + d];
                    w *= backward ? W[d][sub[d] * in + di[2 + d]] : W[d][di[2 + d] * in + sub[d]];
                }
                if (w != 0) acc += w * mft_tensor_get(src, si);
            } while (tu_next_index(sp, ss + 2, sub));
            dd[lin++] = acc;
        } while (tu_next_index(nd, dst_sizes, di));
    for (int d = 0; d < sp; d++) free(W[d]);
    return dst;
}

/* ------------------------------------------------------------------ helpers */
static bool tensors_close(const mft_tensor *got, const mft_tensor *want, double tol,
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
        if (!(fabs(g - w) <= tol * (1 + fabs(w)))) {
            char b[64];
            tu_fmt_list(b, sizeof b, nd, idx);
            CHECK_MSG(false, "%s: at %s got %.9g, want %.9g", what, b, g, w);
            return false;
        }
    } while (tu_next_index(nd, mft_tensor_sizes(want), idx));
    return true;
}

/* Fills t (any layout) with uniform values in [-2, 2) in logical order. */
static void fill_random(mft_tensor *t, uint64_t *rng) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (!mft_tensor_numel(t)) return;
    do {
        double v = (double)(tu_rng_next(rng) >> 11) / 9007199254740992.0 * 4 - 2;
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

static const char *const g_mode_names[] = {"nearest", "nearest-exact", "linear",
                                           "bilinear", "bicubic", "trilinear"};

/* Output sizes, strides and tag: packed in fmt. */
static void check_layout(const mft_tensor *y, mft_format fmt, const char *what) {
    int64_t st[MFT_MAX_DIMS];
    int nd = mft_tensor_ndim(y);
    CHECK(mft_strides_for_format(nd, mft_tensor_sizes(y), fmt, st) == MFT_OK);
    CHECK_MSG(memcmp(st, mft_tensor_strides(y), sizeof(int64_t) * (size_t)nd) == 0,
              "%s: strides not packed in %s", what, mft_format_name(fmt));
    CHECK_MSG(mft_tensor_format(y) == fmt, "%s: tag %s, want %s", what,
              mft_format_name(mft_tensor_format(y)), mft_format_name(fmt));
}

/* ------------------------------------------------------------------ (a) golden */
#define GR_LINE (1 << 16)
#define GR_MAX 2048
enum { F_MODE = 1, F_ALIGN = 2, F_DTYPE = 4, F_FORMAT = 8, F_INPUT = 16, F_OUT = 32,
       F_STRIDES = 64, F_FWD = 128, F_BWD = 256, F_ALL = 511 };

typedef struct {
    int line;
    char name[128];
    unsigned seen;
    mft_interp_mode mode;
    bool align, strides_dash;
    mft_dtype dtype;
    mft_format fmt;
    tu_list in_sizes, out, strides;
    int64_t nfwd, nbwd;
    double fwd[GR_MAX], bwd[GR_MAX];
} gr_case;

static gr_case g_case;
static struct {
    int cases, values;
} g_stats;

static bool parse_values(const char **p, int64_t *n, double *v) {
    if (!tu_next_int(p, n) || *n < 0 || *n > GR_MAX) return false;
    for (int64_t i = 0; i < *n; i++)
        if (!tu_next_double(p, &v[i])) return false;
    return true;
}

static bool gr_field(const char *line) {
    gr_case *c = &g_case;
    const char *p = line;
    char key[32], tok[32];
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "mode") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        int m = -1;
        for (int k = 0; k < MFT_INTERP_MODE_COUNT; k++)
            if (strcmp(tok, g_mode_names[k]) == 0) m = k;
        if (m < 0) return false;
        c->mode = (mft_interp_mode)m;
        c->seen |= F_MODE;
    } else if (strcmp(key, "align") == 0) {
        int64_t a;
        if (!tu_next_int(&p, &a)) return false;
        c->align = a != 0;
        c->seen |= F_ALIGN;
    } else if (strcmp(key, "dtype") == 0) {
        if (!tu_next_dtype(&p, &c->dtype)) return false;
        c->seen |= F_DTYPE;
    } else if (strcmp(key, "format") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "contiguous") == 0) c->fmt = MFT_CONTIGUOUS;
        else if (strcmp(tok, "channels_last") == 0) c->fmt = MFT_CHANNELS_LAST;
        else return false;
        c->seen |= F_FORMAT;
    } else if (strcmp(key, "input") == 0) {
        if (!tu_next_list(&p, &c->in_sizes)) return false;
        c->seen |= F_INPUT;
    } else if (strcmp(key, "out") == 0) {
        if (!tu_next_list(&p, &c->out)) return false;
        c->seen |= F_OUT;
    } else if (strcmp(key, "strides") == 0) {
        const char *q = p;
        if (tu_next_tok(&q, tok, sizeof tok) && strcmp(tok, "-") == 0) {
            c->strides_dash = true;
            p = q;
        } else if (!tu_next_list(&p, &c->strides)) {
            return false;
        }
        c->seen |= F_STRIDES;
    } else if (strcmp(key, "fwd") == 0) {
        if (!parse_values(&p, &c->nfwd, c->fwd)) return false;
        c->seen |= F_FWD;
    } else if (strcmp(key, "bwd") == 0) {
        if (!parse_values(&p, &c->nbwd, c->bwd)) return false;
        c->seen |= F_BWD;
    } else {
        return false;
    }
    return tu_at_eol(p);
}

/* Tensor of sizes holding gen(i) at logical index i, in dtype and fmt. */
static mft_tensor *gen_tensor(int nd, const int64_t *sizes, mft_dtype dt, mft_format fmt,
                              int mul, int mod, int sub, double div) {
    mft_tensor *t = mft_empty(nd, sizes, MFT_F64, MFT_CONTIGUOUS);
    double *d = mft_tensor_data(t);
    for (int64_t i = 0; i < mft_tensor_numel(t); i++)
        d[i] = (double)((i * mul) % mod - sub) / div;
    mft_tensor *c = mft_to_dtype(t, dt);
    mft_tensor_release(t);
    if (fmt == MFT_CONTIGUOUS) return c;
    mft_tensor *f = mft_contiguous(c, fmt);
    mft_tensor_release(c);
    return f;
}

static void check_values(const mft_tensor *t, int64_t n, const double *want, double tol,
                         const char *what) {
    if (!t) {
        CHECK_MSG(false, "case %s (line %d): %s failed: %s", g_case.name, g_case.line, what,
                  mft_last_error_message());
        return;
    }
    CHECK_MSG(mft_tensor_numel(t) == n, "case %s: %s numel %lld, want %lld", g_case.name, what,
              (long long)mft_tensor_numel(t), (long long)n);
    if (mft_tensor_numel(t) != n) return;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int64_t i = 0;
    do {
        double g = mft_tensor_get(t, idx);
        if (!(fabs(g - want[i]) <= tol * (1 + fabs(want[i])))) {
            CHECK_MSG(false, "case %s (line %d): %s[%lld] = %.9g, want %.9g", g_case.name,
                      g_case.line, what, (long long)i, g, want[i]);
            return;
        }
        i++;
        g_stats.values++;
    } while (tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx));
}

static void run_golden_case(const gr_case *c) {
    const int nd = (int)c->in_sizes.n;
    mft_tensor *x = gen_tensor(nd, c->in_sizes.v, c->dtype, c->fmt, 37, 23, 11, 4.0);
    mft_tensor *y = mft_interpolate(x, c->out.v, c->mode, c->align);
    const double tol = c->dtype == MFT_F32 ? 1e-5 : 1e-12;
    check_values(y, c->nfwd, c->fwd, tol, "forward");
    if (y) {
        CHECK_MSG(mft_tensor_format(y) == c->fmt, "case %s: tag", c->name);
        if (!c->strides_dash)
            CHECK_MSG(tu_list_eq(&c->strides, nd, mft_tensor_strides(y)), "case %s: strides",
                      c->name);
        check_layout(y, c->fmt, c->name);
        mft_tensor *g = gen_tensor(nd, mft_tensor_sizes(y), c->dtype, MFT_CONTIGUOUS, 53, 29, 14,
                                   8.0);
        mft_tensor *gx = mft_interpolate_backward(g, x, c->mode, c->align);
        check_values(gx, c->nbwd, c->bwd, c->dtype == MFT_F32 ? 1e-5 : 1e-12, "backward");
        if (gx) check_layout(gx, c->fmt, c->name);
        mft_tensor_release(g);
        mft_tensor_release(gx);
    }
    mft_tensor_release(x);
    mft_tensor_release(y);
    g_stats.cases++;
}

static void gr_end(int lineno, bool in_case) {
    CHECK_MSG(in_case, "line %d: 'end' outside a case", lineno);
    if (!in_case) return;
    CHECK_MSG(g_case.seen == F_ALL, "case %s (line %d) is incomplete (0x%x)", g_case.name,
              g_case.line, g_case.seen);
    if (g_case.seen == F_ALL) run_golden_case(&g_case);
}

static void test_golden(void) {
    static char line[GR_LINE];
    const tu_golden_file file = {MFT_TEST_DATA_DIR "/resize_cases.txt", line, GR_LINE, true,
                                 &g_case, sizeof g_case, &g_case.line, g_case.name,
                                 sizeof g_case.name, gr_field, gr_end};
    if (!tu_read_golden(&file)) return;
    CHECK_MSG(g_stats.cases >= 200, "only %d golden cases", g_stats.cases);
    printf("golden resize: %d cases, %d values checked\n", g_stats.cases, g_stats.values);
}

/* ------------------------------------------------------------------ (b) sweeps */
static int g_kernel_runs[64];

/* One case: x of sizes (logical) in layout `lay` (0 NCHW, 1 NHWC, 2 strided,
 * 3 N = 1 by select + unsqueeze), through the public calls and every
 * kernel of the table that matches the dtype. */
static void sweep_one(int nd, const int64_t *xs_in, const int64_t *osp, mft_interp_mode m,
                      bool ac, mft_dtype dt, int lay, uint64_t *rng, const char *tag) {
    char what[256];
    int64_t xs[MFT_MAX_DIMS];
    memcpy(xs, xs_in, sizeof(int64_t) * (size_t)nd);
    if (lay == 3) xs[0] = 1;
    snprintf(what, sizeof what, "%s %s ac=%d %s lay=%d in(%lld,%lld,%lld,%lld,%lld) out(%lld,%lld,"
             "%lld)", tag, g_mode_names[m], ac, mft_dtype_name(dt), lay, (long long)xs[0],
             (long long)xs[1], (long long)xs[2], nd > 3 ? (long long)xs[3] : -1LL,
             nd > 4 ? (long long)xs[4] : -1LL, (long long)osp[0],
             nd > 3 ? (long long)osp[1] : -1LL, nd > 4 ? (long long)osp[2] : -1LL);
    mft_tensor *x = NULL;
    mft_format want_fmt = MFT_CONTIGUOUS;
    if (lay == 0 || lay == 1) {
        want_fmt = lay == 1 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        x = mft_empty(nd, xs, dt, want_fmt);
    } else if (lay == 2) {
        const tu_layout_opts o = {2, 2, false};
        x = tu_strided_view(nd, xs, dt, NAN, &o, rng, NULL);
        want_fmt = mft_tensor_format(x);
    } else {
        int64_t big[MFT_MAX_DIMS];
        memcpy(big, xs, sizeof(int64_t) * (size_t)nd);
        big[0] = 3;
        mft_tensor *b = mft_empty(nd, big, dt, nd == 4 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
        mft_tensor *s = mft_select(b, 0, 1);
        x = mft_unsqueeze(s, 0);
        mft_tensor_release(b);
        mft_tensor_release(s);
        want_fmt = mft_tensor_format(x);
    }
    if (!x) {
        CHECK_MSG(false, "%s: cannot make x", what);
        return;
    }
    fill_random(x, rng);
    int64_t ys[MFT_MAX_DIMS] = {xs[0], xs[1]};
    for (int d = 0; d < nd - 2; d++) ys[2 + d] = osp[d];
    const double tol = dt == MFT_F32 ? 2e-5 : 1e-12;

    mft_tensor *want = naive_run(x, ys, m, ac, false);
    mft_tensor *y = mft_interpolate(x, osp, m, ac);
    tensors_close(y, want, tol, what);
    if (y) check_layout(y, want_fmt, what);

    mft_tensor *g = mft_empty(nd, ys, dt, (lay & 1) ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST);
    if (nd != 4 && (lay & 1) == 0) {
        mft_tensor_release(g);
        g = mft_empty(nd, ys, dt, MFT_CONTIGUOUS);
    }
    fill_random(g, rng);
    mft_tensor *gwant = naive_run(g, xs, m, ac, true);
    mft_tensor *gx = mft_interpolate_backward(g, x, m, ac);
    tensors_close(gx, gwant, tol * 4, what);
    if (gx) check_layout(gx, want_fmt, what);

    /* every kernel of the table, called directly */
    int k = 0;
    for (const mft__kernel_def *kd = mft__kernels_resize; kd->fn; kd++, k++) {
        if (kd->dtype != dt) continue;
        const bool bwd = kd->op == MFT__OP_INTERPOLATE_BACKWARD;
        const mft_tensor *src = bwd ? g : x;
        mft_tensor *in = kd->fmt == MFT_FORMAT_ANY ? mft_tensor_retain((mft_tensor *)src)
                                                   : mft_contiguous(src, kd->fmt);
        if (kd->fmt == MFT_CHANNELS_LAST && (nd < 3 || nd > 5)) {
            mft_tensor_release(in);
            continue;
        }
        mft_format of = kd->fmt == MFT_FORMAT_ANY ? MFT_CHANNELS_LAST : kd->fmt;
        mft_tensor *out = mft_full(nd, bwd ? xs : ys, dt, of, 1234.5);
        mft_interp_params p = {m, ac};
        const mft_tensor *ins[1] = {in};
        mft_tensor *outs[1] = {out};
        mft_kernel_args args = {1, 1, ins, outs, &p};
        kd->fn(&args);
        char w2[320];
        snprintf(w2, sizeof w2, "%s kernel %s", what, kd->name);
        tensors_close(out, bwd ? gwant : want, bwd ? tol * 4 : tol, w2);
        g_kernel_runs[k]++;
        mft_tensor_release(in);
        mft_tensor_release(out);
    }
    mft_tensor *ts[] = {x, want, y, g, gwant, gx};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

static void sweep(mft_dtype dt, int ncases, uint64_t seed) {
    uint64_t rng = seed;
    static const int64_t cs[] = {1, 3, 8, 5};
    for (int i = 0; i < ncases; i++) {
        const int sp = 1 + (int)tu_rng_int(&rng, 0, 2);
        mft_interp_mode modes[4];
        int nm = 0;
        modes[nm++] = MFT_INTERP_NEAREST;
        modes[nm++] = MFT_INTERP_NEAREST_EXACT;
        if (sp == 1) modes[nm++] = MFT_INTERP_LINEAR;
        if (sp == 2) {
            modes[nm++] = MFT_INTERP_BILINEAR;
            modes[nm++] = MFT_INTERP_BICUBIC;
        }
        if (sp == 3) modes[nm++] = MFT_INTERP_TRILINEAR;
        const mft_interp_mode m = modes[tu_rng_int(&rng, 0, nm - 1)];
        const bool ac = m >= MFT_INTERP_LINEAR && tu_rng_int(&rng, 0, 1);
        int64_t xs[5], osp[3];
        xs[0] = tu_rng_int(&rng, 1, 2);
        xs[1] = cs[tu_rng_int(&rng, 0, 3)];
        const int64_t maxin = sp == 3 ? 4 : 7, maxout = sp == 3 ? 5 : 12;
        for (int d = 0; d < sp; d++) {
            xs[2 + d] = tu_rng_int(&rng, 1, maxin);
            int r = (int)tu_rng_int(&rng, 0, 5);
            osp[d] = r == 0 ? 1 : r == 1 ? 2 * xs[2 + d] : r == 2 ? xs[2 + d]
                                                         : tu_rng_int(&rng, 1, maxout);
        }
        const int lay = (int)tu_rng_int(&rng, 0, 3);
        sweep_one(sp + 2, xs, osp, m, ac, dt, lay, &rng, "sweep");
    }
}

static void test_sweep_f32(void) {
    memset(g_kernel_runs, 0, sizeof g_kernel_runs);
    sweep(MFT_F32, 500, 0x9e3779b97f4a7c15ull);
    /* edge shapes: in = 1, out = 1, C = 1, N = 1, H = W = 1 */
    uint64_t rng = 5;
    for (int m = MFT_INTERP_NEAREST; m <= MFT_INTERP_BICUBIC; m++) {
        if (m == MFT_INTERP_LINEAR) continue;
        for (int ac = 0; ac < (m >= MFT_INTERP_LINEAR ? 2 : 1); ac++)
            for (int lay = 0; lay < 4; lay++) {
                const int64_t a[4] = {1, 1, 1, 1}, ao[2] = {3, 4};
                const int64_t b[4] = {2, 5, 4, 3}, bo[2] = {1, 1};
                const int64_t c[4] = {1, 16, 9, 7}, co[2] = {18, 14};
                const int64_t d[4] = {2, 3, 7, 9}, dout[2] = {3, 4};
                /* backward: 9 x 14 outputs read each input (> 64 taps per pixel) */
                const int64_t e[4] = {1, 16, 2, 1}, eo[2] = {18, 14};
                sweep_one(4, e, eo, (mft_interp_mode)m, ac, MFT_F32, lay, &rng, "edge");
                sweep_one(4, a, ao, (mft_interp_mode)m, ac, MFT_F32, lay, &rng, "edge");
                sweep_one(4, b, bo, (mft_interp_mode)m, ac, MFT_F32, lay, &rng, "edge");
                sweep_one(4, c, co, (mft_interp_mode)m, ac, MFT_F32, lay, &rng, "edge");
                sweep_one(4, d, dout, (mft_interp_mode)m, ac, MFT_F32, lay, &rng, "edge");
            }
    }
    int k = 0;
    for (const mft__kernel_def *kd = mft__kernels_resize; kd->fn; kd++, k++)
        if (kd->dtype == MFT_F32)
            CHECK_MSG(g_kernel_runs[k] > 100, "kernel %s ran %d times", kd->name,
                      g_kernel_runs[k]);
}

static void test_sweep_f64(void) { sweep(MFT_F64, 200, 0x1234567887654321ull); }

/* The public call of the F32 reference equals the fast kernels on large
 * shapes that use the parallel split; and results do not depend on the
 * thread count (bitwise). C = 48 (a multiple of 16) also takes the NHWC
 * 16-float paths: nearest x2 backward and bilinear forward through
 * nhwc_cols_fused2, bilinear x2 backward through Note [Separable 4x4
 * blocks] (3 threads split its 66 rows at an odd row of the second image). */
static void test_parallel(void) {
    uint64_t rng = 99;
    const int64_t os[3][2] = {{66, 58}, {17, 40}, {33, 29}};
    for (int m = MFT_INTERP_NEAREST; m <= MFT_INTERP_BICUBIC; m++) {
        if (m == MFT_INTERP_LINEAR) continue;
        for (int f = 0; f < 4; f++)
            for (int s = 0; s < 3; s++) {
                const mft_format fmt = f % 2 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
                const bool ac = m >= MFT_INTERP_BILINEAR && s == 1;
                const int64_t xs[4] = {2, f < 2 ? 24 : 48, 33, 29};
                mft_tensor *x = mft_empty(4, xs, MFT_F32, fmt);
                fill_random(x, &rng);
                const int64_t ys[4] = {2, xs[1], os[s][0], os[s][1]};
                mft_tensor *g = mft_empty(4, ys, MFT_F32, fmt);
                fill_random(g, &rng);
                mft_set_num_threads(1);
                mft_tensor *y1 = mft_interpolate(x, os[s], (mft_interp_mode)m, ac);
                mft_tensor *g1 = mft_interpolate_backward(g, x, (mft_interp_mode)m, ac);
                mft_set_num_threads(3);
                mft_tensor *y3 = mft_interpolate(x, os[s], (mft_interp_mode)m, ac);
                mft_tensor *g3 = mft_interpolate_backward(g, x, (mft_interp_mode)m, ac);
                mft_set_num_threads(0);
                CHECK(y1 && y3 && mft_tensor_hash(y1) == mft_tensor_hash(y3));
                CHECK(g1 && g3 && mft_tensor_hash(g1) == mft_tensor_hash(g3));
                /* vs the reference kernel */
                mft_tensor *yr = mft_empty(4, ys, MFT_F32, MFT_CONTIGUOUS);
                mft_tensor *gr = mft_empty(4, xs, MFT_F32, MFT_CONTIGUOUS);
                mft_interp_params p = {(mft_interp_mode)m, ac};
                const mft_tensor *in1[1] = {x}, *in2[1] = {g};
                mft_tensor *o1[1] = {yr}, *o2[1] = {gr};
                mft_kernel_args a1 = {1, 1, in1, o1, &p}, a2 = {1, 1, in2, o2, &p};
                mft__interp_reference(MFT__OP_INTERPOLATE, MFT_F32)(&a1);
                mft__interp_reference(MFT__OP_INTERPOLATE_BACKWARD, MFT_F32)(&a2);
                tensors_close(y1, yr, 1e-5, "parallel forward vs reference");
                tensors_close(g1, gr, 1e-4, "parallel backward vs reference");
                mft_tensor *ts[] = {x, g, y1, g1, y3, g3, yr, gr};
                for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
            }
    }
}

/* Rows wider than the row buffers (NCHW: 4096 floats, NHWC: 8192 = W * C)
 * take the unbuffered paths: forward (source width 4500) and backward
 * (grad_out width 9000), NCHW and NHWC, against the reference kernel. */
static void test_wide_rows(void) {
    uint64_t rng = 17;
    const int64_t xs[4] = {1, 2, 3, 4500}, ys[4] = {1, 2, 2, 9000}, os[2] = {2, 9000};
    for (int k = 0; k < 2 * (MFT_INTERP_BICUBIC + 1); k++) {
        const int m = k / 2, f = k % 2;
        if (m == MFT_INTERP_LINEAR) continue;
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = mft_empty(4, xs, MFT_F32, fmt);
        mft_tensor *g = mft_empty(4, ys, MFT_F32, fmt);
        fill_random(x, &rng);
        fill_random(g, &rng);
        const bool ac = m == MFT_INTERP_BILINEAR;
        mft_tensor *y = mft_interpolate(x, os, (mft_interp_mode)m, ac);
        CHECK(strcmp(mft_dispatch_last()->kernel,
                     f ? "interpolate.nhwc.f32" : "interpolate.nchw.f32") == 0);
        mft_tensor *gx = mft_interpolate_backward(g, x, (mft_interp_mode)m, ac);
        mft_tensor *yr = mft_empty(4, ys, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *gr = mft_empty(4, xs, MFT_F32, MFT_CONTIGUOUS);
        mft_interp_params p = {(mft_interp_mode)m, ac};
        const mft_tensor *in1[1] = {x}, *in2[1] = {g};
        mft_tensor *o1[1] = {yr}, *o2[1] = {gr};
        mft_kernel_args a1 = {1, 1, in1, o1, &p}, a2 = {1, 1, in2, o2, &p};
        mft__interp_reference(MFT__OP_INTERPOLATE, MFT_F32)(&a1);
        mft__interp_reference(MFT__OP_INTERPOLATE_BACKWARD, MFT_F32)(&a2);
        tensors_close(y, yr, 1e-5, "wide forward vs reference");
        tensors_close(gx, gr, 1e-5, "wide backward vs reference");
        mft_tensor *ts[] = {x, g, y, gx, yr, gr};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    }
}

/* Results of 16 MB or more per thread, with rows of at most RS_DROW = 8192
 * floats, take the NHWC streaming stores (non-temporal): uniform columns
 * (nearest x2; bilinear x2 through nhwc_cols_fused2 with AVX-512, C % 16 ==
 * 0), general taps (bicubic, through a row buffer) and rows that start
 * unaligned (C = 5), against the reference kernel; at 2 threads (8.6 MB
 * each: plain stores) bitwise equal to 1 thread. (Rows of 112 x 64 floats,
 * as in the 8x64x56x56 benchmarks; wider rows do not stream.) */
static void test_streaming(void) {
    uint64_t rng = 23;
    static const struct { int64_t C, H, W, OH, OW; int m; } cs[] = {
        {64, 300, 56, 600, 112, MFT_INTERP_NEAREST},
        {64, 300, 56, 600, 112, MFT_INTERP_BILINEAR},
        {64, 300, 56, 600, 112, MFT_INTERP_BICUBIC},
        {5, 300, 800, 600, 1599, MFT_INTERP_BILINEAR},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const int64_t xs[4] = {1, cs[i].C, cs[i].H, cs[i].W}, os[2] = {cs[i].OH, cs[i].OW};
        const int64_t ys[4] = {1, cs[i].C, cs[i].OH, cs[i].OW};
        mft_tensor *x = mft_empty(4, xs, MFT_F32, MFT_CHANNELS_LAST);
        fill_random(x, &rng);
        mft_set_num_threads(1);
        mft_tensor *y1 = mft_interpolate(x, os, (mft_interp_mode)cs[i].m, false);
        CHECK(y1 && strcmp(mft_dispatch_last()->kernel, "interpolate.nhwc.f32") == 0);
        mft_set_num_threads(2);
        mft_tensor *y2 = mft_interpolate(x, os, (mft_interp_mode)cs[i].m, false);
        mft_set_num_threads(0);
        CHECK(y1 && y2 && mft_tensor_hash(y1) == mft_tensor_hash(y2));
        CHECK(y1 && mft_tensor_is_contiguous(y1, MFT_CHANNELS_LAST));
        mft_tensor *yr = mft_empty(4, ys, MFT_F32, MFT_CONTIGUOUS);
        mft_interp_params p = {(mft_interp_mode)cs[i].m, false};
        const mft_tensor *in1[1] = {x};
        mft_tensor *o1[1] = {yr};
        mft_kernel_args a1 = {1, 1, in1, o1, &p};
        mft__interp_reference(MFT__OP_INTERPOLATE, MFT_F32)(&a1);
        if (y1) tensors_close(y1, yr, 1e-5, "streaming forward vs reference");
        mft_tensor *ts[] = {x, y1, y2, yr};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
}

/* The NHWC bilinear x2 backward with C % 16 == 0 runs its middle columns
 * (4 grad_out columns each, same weights, stride 2) through the affine
 * column loop, in blocks of 8 columns with the combined row extended per
 * block: against the reference kernel, at widths that end a block early
 * and late, and bitwise equal at 1 and 2 threads. From 11 rows and
 * columns on (a run of 8 middle rows and columns), the middle rows also go
 * in pairs through Note [Separable 4x4 blocks] (C = 48, 80 and 128: groups
 * of 16 channels, of 64 and 16, of 64 twice). With N = 1 and an odd
 * row count, the 2-thread split starts the second thread at an odd row,
 * so rows that one thread count computes in pairs the other computes one
 * by one by the lazy path: the bitwise comparison checks that both paths
 * give the same bits. */
static void test_affine_nhwc_backward(void) {
    uint64_t rng = 31;
    static const int64_t sh[][4] = {{2, 16, 7, 12},  {2, 48, 5, 29},  {2, 64, 9, 33},
                                    {2, 32, 3, 17},  {1, 80, 21, 20}, {1, 48, 17, 26},
                                    {2, 128, 12, 12}, {1, 16, 23, 9}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const int64_t xs[4] = {sh[i][0], sh[i][1], sh[i][2], sh[i][3]};
        const int64_t ys[4] = {sh[i][0], sh[i][1], 2 * sh[i][2], 2 * sh[i][3]};
        mft_tensor *x = mft_empty(4, xs, MFT_F32, MFT_CHANNELS_LAST);
        mft_tensor *g = mft_empty(4, ys, MFT_F32, MFT_CHANNELS_LAST);
        fill_random(g, &rng);
        mft_set_num_threads(1);
        mft_tensor *g1 = mft_interpolate_backward(g, x, MFT_INTERP_BILINEAR, false);
        mft_set_num_threads(2);
        mft_tensor *g2 = mft_interpolate_backward(g, x, MFT_INTERP_BILINEAR, false);
        mft_set_num_threads(0);
        CHECK(g1 && g2 && mft_tensor_hash(g1) == mft_tensor_hash(g2));
        mft_tensor *gr = mft_empty(4, xs, MFT_F32, MFT_CONTIGUOUS);
        mft_interp_params p = {MFT_INTERP_BILINEAR, false};
        const mft_tensor *in[1] = {g};
        mft_tensor *o[1] = {gr};
        mft_kernel_args a = {1, 1, in, o, &p};
        mft__interp_reference(MFT__OP_INTERPOLATE_BACKWARD, MFT_F32)(&a);
        char what[96];
        snprintf(what, sizeof what, "affine NHWC backward N=%lld C=%lld H=%lld W=%lld",
                 (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3]);
        if (g1) tensors_close(g1, gr, 1e-4, what);
        mft_tensor *ts[] = {x, g, g1, g2, gr};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
}

/* ------------------------------------------------------------------ (c) gradcheck */
/* sum(g * interpolate(x)) by central differences in x (F64), vs backward. */
static void test_finite_differences(void) {
    uint64_t rng = 3;
    struct {
        int nd;
        int64_t xs[5], os[3];
        mft_interp_mode m;
        bool ac;
    } cs[] = {
        {4, {1, 2, 3, 4}, {5, 7}, MFT_INTERP_BILINEAR, false},
        {4, {1, 2, 5, 4}, {3, 7}, MFT_INTERP_BICUBIC, true},
        {4, {1, 2, 3, 4}, {5, 7}, MFT_INTERP_BICUBIC, false},
        {3, {2, 2, 5}, {8}, MFT_INTERP_LINEAR, true},
        {5, {1, 1, 2, 3, 2}, {3, 2, 4}, MFT_INTERP_TRILINEAR, false},
        {4, {1, 1, 3, 5}, {7, 2}, MFT_INTERP_NEAREST_EXACT, false},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int nd = cs[c].nd;
        mft_tensor *x = mft_empty(nd, cs[c].xs, MFT_F64, MFT_CONTIGUOUS);
        fill_random(x, &rng);
        int64_t ys[5] = {cs[c].xs[0], cs[c].xs[1]};
        for (int d = 0; d < nd - 2; d++) ys[2 + d] = cs[c].os[d];
        mft_tensor *g = mft_empty(nd, ys, MFT_F64, MFT_CONTIGUOUS);
        fill_random(g, &rng);
        mft_tensor *gx = mft_interpolate_backward(g, x, cs[c].m, cs[c].ac);
        CHECK(gx != NULL);
        double *xd = mft_tensor_data(x);
        const double h = 1e-6;
        int64_t idx[MFT_MAX_DIMS] = {0};
        int64_t lin = 0;
        do {
            double f[2];
            for (int s = 0; s < 2; s++) {
                const double keep = xd[lin];
                xd[lin] = keep + (s ? -h : h);
                mft_tensor *y = mft_interpolate(x, cs[c].os, cs[c].m, cs[c].ac);
                xd[lin] = keep;
                const double *yd = mft_tensor_data(y), *gd = mft_tensor_data(g);
                double acc = 0;
                for (int64_t i = 0; i < mft_tensor_numel(y); i++) acc += yd[i] * gd[i];
                f[s] = acc;
                mft_tensor_release(y);
            }
            const double fd = (f[0] - f[1]) / (2 * h);
            const double an = gx ? mft_tensor_get(gx, idx) : NAN;
            CHECK_MSG(fabs(fd - an) <= 1e-6 * (1 + fabs(an)), "case %zu elem %lld: fd %.9g, "
                      "backward %.9g", c, (long long)lin, fd, an);
            lin++;
        } while (tu_next_index(nd, cs[c].xs, idx));
        mft_tensor_release(x);
        mft_tensor_release(g);
        mft_tensor_release(gx);
    }
}

/* ------------------------------------------------------------------ dispatch */
static void test_dispatch(void) {
    const int64_t sz[4] = {2, 8, 6, 6}, os[2] = {12, 12};
    mft_tensor *nhwc = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *nchw = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *nhwc64 = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 1);
    mft_dispatch_set_strict(true);
    const mft_dispatch_info *d;
    mft_tensor *y = mft_interpolate(nhwc, os, MFT_INTERP_BILINEAR, false);
    d = mft_dispatch_last();
    CHECK(y && strcmp(d->kernel, "interpolate.nhwc.f32") == 0 && d->conversions == 0);
    mft_tensor *gx = mft_interpolate_backward(y, nhwc, MFT_INTERP_BILINEAR, false);
    d = mft_dispatch_last();
    CHECK(gx && strcmp(d->kernel, "interpolate_backward.nhwc.f32") == 0 && d->conversions == 0);
    mft_tensor_release(gx);
    /* grad_out in the other layout: converted, grad_x still in x's format */
    mft_tensor *gc = mft_contiguous(y, MFT_CONTIGUOUS);
    gx = mft_interpolate_backward(gc, nhwc, MFT_INTERP_BILINEAR, false);
    CHECK(gx && mft_tensor_is_contiguous(gx, MFT_CHANNELS_LAST) &&
          mft_tensor_format(gx) == MFT_CHANNELS_LAST);
    mft_tensor_release(gx);
    mft_tensor_release(gc);
    mft_tensor_release(y);
    y = mft_interpolate(nchw, os, MFT_INTERP_NEAREST, false);
    d = mft_dispatch_last();
    CHECK(y && strcmp(d->kernel, "interpolate.nchw.f32") == 0 && d->conversions == 0);
    mft_tensor_release(y);
    y = mft_interpolate(nhwc64, os, MFT_INTERP_BICUBIC, true);
    d = mft_dispatch_last();
    CHECK(y && strcmp(d->kernel, "interpolate.ref.f64") == 0 && d->conversions == 0 &&
          d->kernel_format == MFT_FORMAT_ANY);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    mft_tensor_release(y);
    mft_dispatch_set_strict(false);
    mft_tensor_release(nhwc);
    mft_tensor_release(nchw);
    mft_tensor_release(nhwc64);
}

/* ------------------------------------------------------------------ (d) errors */
#define FAIL_NULL(expr) TU_EXPECT_NULL_(expr, #expr)

static void test_errors(void) {
    const int64_t s4[4] = {1, 2, 3, 3}, os[3] = {4, 4, 4}, bad[2] = {0, 4}, big[2] = {4,
                                                                               (int64_t)1 << 40};
    mft_tensor *x = mft_zeros(4, s4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *x2 = mft_zeros(2, s4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xi = mft_zeros(4, s4, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *x0 = mft_zeros(4, (const int64_t[]){1, 2, 0, 3}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g = mft_zeros(4, (const int64_t[]){1, 2, 4, 4}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g64 = mft_zeros(4, (const int64_t[]){1, 2, 4, 4}, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *gc = mft_zeros(4, (const int64_t[]){1, 3, 4, 4}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g3 = mft_zeros(3, (const int64_t[]){1, 2, 4}, MFT_F32, MFT_CONTIGUOUS);
    tu_dst_state before = tu_snap(x);

    FAIL_NULL(mft_interpolate(NULL, os, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_NULL, "mft_interpolate");
    FAIL_NULL(mft_interpolate(x, NULL, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_NULL, "out_size");
    FAIL_NULL(mft_interpolate(x, os, (mft_interp_mode)17, false));
    CHECK_ERR(MFT_ERR_INVALID, "mode 17");
    FAIL_NULL(mft_interpolate(x2, os, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_RANK, "rank 2");
    FAIL_NULL(mft_interpolate(xi, os, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_DTYPE, "i32");
    FAIL_NULL(mft_interpolate(x, os, MFT_INTERP_TRILINEAR, false));
    CHECK_ERR(MFT_ERR_RANK, "trilinear needs a 5-D");
    FAIL_NULL(mft_interpolate(x, os, MFT_INTERP_LINEAR, false));
    CHECK_ERR(MFT_ERR_RANK, "linear needs a 3-D");
    FAIL_NULL(mft_interpolate(x, os, MFT_INTERP_NEAREST, true));
    CHECK_ERR(MFT_ERR_INVALID, "align_corners");
    FAIL_NULL(mft_interpolate(x, bad, MFT_INTERP_BILINEAR, false));
    CHECK_ERR(MFT_ERR_SHAPE, "[0,4]");
    FAIL_NULL(mft_interpolate(x0, os, MFT_INTERP_BILINEAR, false));
    CHECK_ERR(MFT_ERR_SHAPE, "[0,3]");
    FAIL_NULL(mft_interpolate(x, big, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_interpolate");
    FAIL_NULL(mft_interpolate_backward(NULL, x, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_NULL, "grad_out");
    FAIL_NULL(mft_interpolate_backward(g, NULL, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_NULL, "mft_interpolate_backward");
    FAIL_NULL(mft_interpolate_backward(g3, x, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_SHAPE, "[1,2,4]");
    FAIL_NULL(mft_interpolate_backward(gc, x, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_SHAPE, "[1,3,4,4]");
    FAIL_NULL(mft_interpolate_backward(g64, x, MFT_INTERP_NEAREST, false));
    CHECK_ERR(MFT_ERR_DTYPE, "f64");
    FAIL_NULL(mft_interpolate_backward(g, x, MFT_INTERP_TRILINEAR, false));
    CHECK_ERR(MFT_ERR_RANK, "mft_interpolate_backward");
    TU_CHECK_UNCHANGED(x, before);
    mft_tensor *ts[] = {x, x2, xi, x0, g, g64, gc, g3};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

int main(void) {
    RUN(test_golden);
    RUN(test_sweep_f32);
    RUN(test_sweep_f64);
    RUN(test_parallel);
    RUN(test_wide_rows);
    RUN(test_streaming);
    RUN(test_affine_nhwc_backward);
    RUN(test_finite_differences);
    RUN(test_dispatch);
    RUN(test_errors);
    TEST_MAIN_END();
}
