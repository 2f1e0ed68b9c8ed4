/* tests/ops/test_pool_more.c — ops/pool/: pooling backward, 1-D and 3-D
 * pools, adaptive pools:
 *   (a) golden cases from PyTorch 1.13 (tests/golden/pool_more_cases.txt,
 *       written by gen_pool_more.py): forward sizes, tag, strides, values,
 *       indices, and the backward's grad_x; PyTorch's errors;
 *   (b) every kernel of the table and the F32 reference kernels against
 *       naive loops written here, over random parameter sweeps (reference
 *       kernels also on non-dense inputs); the public entry points on NCHW,
 *       NHWC and non-dense inputs (values, sizes, strides, tag); 1-D pools;
 *   (c) results do not depend on the thread count; dispatch runs the
 *       NHWC kernels without conversions;
 *   (d) argument errors;
 *   (e) every allocation failing in turn: NOMEM naming the function, no leaks;
 *   adaptive 3-D pools besides (a)-(e): fixed edge shapes, 1 vs 2 threads and
 *   the kernels dispatched, gradcheck and the recorded node, user kernels
 *   (params), argument errors with the values named. */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

mft_kernel_fn mft__pool_more_reference(mft__op_id op, mft_dtype dt);
mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt);

/* ------------------------------------------------------------------ helpers */
static double gold_value(const char *gen, int64_t i) {
    double v = (double)((i * 37) % 23 - 11) / 4.0;
    if (strcmp(gen, "nan") == 0 && i % 7 == 3) return NAN;
    if (strcmp(gen, "ninf") == 0) {
        if (i % 29 == 5) return NAN;
        if (i % 8 != 0) return -INFINITY;
    }
    return v;
}
static double grad_value(int64_t i) { return (double)((i * 13) % 17 - 8) / 8.0; }

/* Packed tensor filled in logical order by f(i) (gen for gold_value; NULL:
 * grad_value), laid out in fmt (rank 3 CHANNELS_LAST = N,L,C). */
static mft_tensor *make_filled(int nd, const int64_t *sizes, mft_format fmt, mft_dtype dt,
                               const char *gen) {
    mft_tensor *t = mft_empty(nd, sizes, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    int64_t n = mft_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = gen ? gold_value(gen, i) : grad_value(i);
        if (dt == MFT_F32) ((float *)mft_tensor_data(t))[i] = (float)v;
        else ((double *)mft_tensor_data(t))[i] = v;
    }
    if (fmt == MFT_CONTIGUOUS || nd < 3) return t;
    mft_tensor *c = mft_contiguous(t, fmt);
    mft_tensor_release(t);
    return c;
}

static bool same_value(double a, double b, double tol) {
    if (a != a || b != b) return a != a && b != b;
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= tol * (1.0 + fabs(b));
}

/* strides of t are packed in fmt, and its tag is fmt */
static bool packed_in(const mft_tensor *t, mft_format fmt) {
    int64_t want[MFT_MAX_DIMS];
    int nd = mft_tensor_ndim(t);
    if (mft_strides_for_format(nd, mft_tensor_sizes(t), fmt, want) != MFT_OK) return false;
    for (int d = 0; d < nd; d++)
        if (mft_tensor_sizes(t)[d] != 1 && want[d] != mft_tensor_strides(t)[d]) return false;
    return nd < 3 || mft_tensor_format(t) == fmt;
}

/* ------------------------------------------------------------------ (a) golden */
#define GM_LINE (1 << 16)
#define GM_MAX 4096
typedef struct {
    int line;
    char name[96];
    char op[16];
    tu_list in_sizes, sizes, gsizes;
    tu_list strides, gstrides; /* optional (n = 0: not given) */
    mft_format in_fmt, tag;
    mft_dtype dtype;
    char gen[16];
    int64_t prm[15];
    bool expect_error, has_result;
    int nvalues, nindices, ngvalues;
    double values[GM_MAX], gvalues[GM_MAX];
    int64_t indices[GM_MAX];
} gm_case;
static gm_case g_case;
static struct {
    int cases, errors, values;
    int a3d, a3d_cl, a3d_strides; /* adaptive 3-D cases: all, NDHWC, with strides checked */
} g_gstats;

static bool gm_fmt(const char *s, mft_format *f) {
    if (strcmp(s, "contiguous") == 0) *f = MFT_CONTIGUOUS;
    else if (strcmp(s, "channels_last") == 0) *f = MFT_CHANNELS_LAST;
    else return false;
    return true;
}

static bool gm_values(const char **p, int *n_out, double *dv, int64_t *iv) {
    int64_t n;
    char tok[40];
    if (!tu_next_int(p, &n) || n < 0 || n > GM_MAX) return false;
    for (int64_t i = 0; i < n; i++) {
        if (!tu_next_tok(p, tok, sizeof tok)) return false;
        char *end;
        if (dv) dv[i] = strtod(tok, &end);
        else iv[i] = strtoll(tok, &end, 10);
        if (*end) return false;
    }
    *n_out = (int)n;
    return true;
}

static bool gm_field(const char *line) {
    gm_case *c = &g_case;
    const char *p = line;
    char key[32], tok[32];
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "op") == 0) {
        if (!tu_next_tok(&p, c->op, sizeof c->op)) return false;
    } else if (strcmp(key, "input") == 0) {
        if (!tu_next_list(&p, &c->in_sizes) || !tu_next_tok(&p, tok, sizeof tok) ||
            !gm_fmt(tok, &c->in_fmt) || !tu_next_tok(&p, tok, sizeof tok))
            return false;
        c->dtype = strcmp(tok, "f64") == 0 ? MFT_F64 : MFT_F32;
        if (!tu_next_tok(&p, c->gen, sizeof c->gen)) return false;
    } else if (strcmp(key, "params") == 0) {
        for (int i = 0; i < 15; i++)
            if (!tu_next_int(&p, &c->prm[i])) return false;
    } else if (strcmp(key, "result") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->expect_error = strcmp(tok, "error") == 0;
        c->has_result = true;
    } else if (strcmp(key, "sizes") == 0) {
        if (!tu_next_list(&p, &c->sizes)) return false;
    } else if (strcmp(key, "gsizes") == 0) {
        if (!tu_next_list(&p, &c->gsizes)) return false;
    } else if (strcmp(key, "strides") == 0) {
        if (!tu_next_list(&p, &c->strides)) return false;
    } else if (strcmp(key, "gstrides") == 0) {
        if (!tu_next_list(&p, &c->gstrides)) return false;
    } else if (strcmp(key, "tag") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok) || !gm_fmt(tok, &c->tag)) return false;
    } else if (strcmp(key, "values") == 0) {
        if (!gm_values(&p, &c->nvalues, c->values, NULL)) return false;
    } else if (strcmp(key, "gvalues") == 0) {
        if (!gm_values(&p, &c->ngvalues, c->gvalues, NULL)) return false;
    } else if (strcmp(key, "indices") == 0) {
        if (!gm_values(&p, &c->nindices, NULL, c->indices)) return false;
    } else {
        return false;
    }
    return tu_at_eol(p);
}

/* Compares t (logical order) with want[0..n). */
static int gm_compare(const gm_case *c, const char *what, const mft_tensor *t, const double *want,
                      int n, double tol) {
    int bad = 0;
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    CHECK_MSG(mft_tensor_numel(t) == n, "case %s: %s has %lld values, want %d", c->name, what,
              (long long)mft_tensor_numel(t), n);
    if (mft_tensor_numel(t) != n) return 1;
    for (int i = 0; i < n && bad < 3; i++) {
        double g = mft_tensor_get(t, idx);
        if (!same_value(g, want[i], tol)) {
            CHECK_MSG(false, "case %s (line %d): %s[%d] = %.9g, want %.9g", c->name, c->line,
                      what, i, g, want[i]);
            bad++;
        }
        g_gstats.values++;
        tu_next_index(nd, mft_tensor_sizes(t), idx);
    }
    return bad;
}

static void gm_run(const gm_case *c) {
    g_gstats.cases++;
    const int64_t *k = c->prm, *s = c->prm + 3, *pd = c->prm + 6, *dl = c->prm + 9;
    const bool ceil = c->prm[12] != 0, cip = c->prm[13] != 0;
    const int64_t div = c->prm[14];
    const bool is_max = strstr(c->op, "max") != NULL;
    const int nsp = c->op[strlen(c->op) - 2] - '0';
    const int o = 3 - nsp; /* right-aligned params */
    mft_tensor *x = make_filled(c->in_sizes.n, c->in_sizes.v, c->in_fmt, c->dtype, c->gen);
    CHECK_MSG(x != NULL, "case %s: input: %s", c->name, mft_last_error_message());
    if (!x) return;
    mft_tensor *y = NULL, *ind = NULL;
    char fwd_name[48];
    mft_clear_error();
    if (strcmp(c->op, "max1d") == 0) {
        y = mft_max_pool1d_with_indices(x, k + o, s + o, pd + o, dl + o, ceil, &ind);
        strcpy(fwd_name, "mft_max_pool1d_with_indices");
    } else if (strcmp(c->op, "avg1d") == 0) {
        y = mft_avg_pool1d(x, k + o, s + o, pd + o, ceil, cip);
        strcpy(fwd_name, "mft_avg_pool1d");
    } else if (strcmp(c->op, "max2d") == 0) {
        y = mft_max_pool2d_with_indices(x, k + o, s + o, pd + o, dl + o, ceil, &ind);
        strcpy(fwd_name, "mft_max_pool2d_with_indices");
    } else if (strcmp(c->op, "avg2d") == 0) {
        y = mft_avg_pool2d(x, k + o, s + o, pd + o, ceil, cip, div);
        strcpy(fwd_name, "mft_avg_pool2d");
    } else if (strcmp(c->op, "max3d") == 0) {
        y = mft_max_pool3d_with_indices(x, k, s, pd, dl, ceil, &ind);
        strcpy(fwd_name, "mft_max_pool3d_with_indices");
    } else if (strcmp(c->op, "avg3d") == 0) {
        y = mft_avg_pool3d(x, k, s, pd, ceil, cip, div);
        strcpy(fwd_name, "mft_avg_pool3d");
    } else if (strcmp(c->op, "amax2d") == 0) {
        y = mft_adaptive_max_pool2d_with_indices(x, k + 1, &ind);
        strcpy(fwd_name, "mft_adaptive_max_pool2d_with_indices");
    } else if (strcmp(c->op, "amax3d") == 0) {
        y = mft_adaptive_max_pool3d_with_indices(x, k, &ind);
        strcpy(fwd_name, "mft_adaptive_max_pool3d_with_indices");
    } else if (strcmp(c->op, "aavg3d") == 0) {
        y = mft_adaptive_avg_pool3d(x, k);
        strcpy(fwd_name, "mft_adaptive_avg_pool3d");
    } else {
        y = mft_adaptive_avg_pool2d(x, k + 1);
        strcpy(fwd_name, "mft_adaptive_avg_pool2d");
    }
    if (c->expect_error) {
        g_gstats.errors++;
        CHECK_MSG(y == NULL && mft_last_error() != MFT_OK, "case %s: PyTorch rejects it", c->name);
        CHECK_MSG(strncmp(mft_last_error_message(), fwd_name, strlen(fwd_name)) == 0,
                  "case %s: message '%s' does not name %s", c->name, mft_last_error_message(),
                  fwd_name);
        CHECK(ind == NULL);
        mft_clear_error();
        mft_tensor_release(y);
        mft_tensor_release(x);
        return;
    }
    CHECK_MSG(y != NULL, "case %s (line %d): %s", c->name, c->line, mft_last_error_message());
    if (!y) {
        mft_tensor_release(x);
        return;
    }
    const int nd = mft_tensor_ndim(y);
    CHECK_MSG(tu_list_eq(&c->sizes, nd, mft_tensor_sizes(y)), "case %s: sizes", c->name);
    CHECK_MSG(packed_in(y, c->tag), "case %s: result not packed in %s (tag %s)", c->name,
              mft_format_name(c->tag), mft_format_name(mft_tensor_format(y)));
    CHECK(mft_tensor_dtype(y) == c->dtype);
    if (strcmp(c->op + 1, "max3d") == 0 || strcmp(c->op + 1, "avg3d") == 0) {
        g_gstats.a3d++;
        g_gstats.a3d_cl += c->in_fmt == MFT_CHANNELS_LAST && nd == 5;
        CHECK_MSG(c->strides.n == nd && c->gstrides.n == c->in_sizes.n,
                  "case %s: adaptive 3-D cases give strides", c->name);
    }
    if (c->strides.n) { /* every stride, size-1 dims too */
        g_gstats.a3d_strides++;
        CHECK_MSG(tu_list_eq(&c->strides, nd, mft_tensor_strides(y)), "case %s: strides", c->name);
        if (ind)
            CHECK_MSG(tu_list_eq(&c->strides, nd, mft_tensor_strides(ind)),
                      "case %s: indices strides", c->name);
    }
    int bad = gm_compare(c, "value", y, c->values, c->nvalues, c->dtype == MFT_F32 ? 1e-6 : 1e-8);
    if (is_max) {
        CHECK(ind != NULL && mft_tensor_dtype(ind) == MFT_I64);
        CHECK_EQ_I(c->nindices, c->nvalues);
        if (ind) {
            CHECK(packed_in(ind, c->tag));
            int64_t idx[MFT_MAX_DIMS] = {0};
            for (int i = 0; i < c->nindices && bad < 3; i++) {
                double gi = mft_tensor_get(ind, idx);
                if (gi != (double)c->indices[i]) {
                    CHECK_MSG(false, "case %s (line %d): index %d = %.0f, want %lld", c->name,
                              c->line, i, gi, (long long)c->indices[i]);
                    bad++;
                }
                tu_next_index(nd, mft_tensor_sizes(ind), idx);
            }
        }
    }
    /* backward, grad_out packed in the result's format */
    mft_tensor *go = make_filled(nd, mft_tensor_sizes(y), c->tag, c->dtype, NULL);
    mft_tensor *gx = NULL;
    if (strcmp(c->op, "max1d") == 0) gx = mft_max_pool1d_backward(go, x, ind);
    else if (strcmp(c->op, "avg1d") == 0)
        gx = mft_avg_pool1d_backward(go, x, k + o, s + o, pd + o, ceil, cip);
    else if (strcmp(c->op, "max2d") == 0) gx = mft_max_pool2d_backward(go, x, ind);
    else if (strcmp(c->op, "avg2d") == 0)
        gx = mft_avg_pool2d_backward(go, x, k + o, s + o, pd + o, ceil, cip, div);
    else if (strcmp(c->op, "max3d") == 0) gx = mft_max_pool3d_backward(go, x, ind);
    else if (strcmp(c->op, "avg3d") == 0)
        gx = mft_avg_pool3d_backward(go, x, k, s, pd, ceil, cip, div);
    else if (strcmp(c->op, "amax2d") == 0) gx = mft_adaptive_max_pool2d_backward(go, x, ind);
    else if (strcmp(c->op, "amax3d") == 0) gx = mft_adaptive_max_pool3d_backward(go, x, ind);
    else if (strcmp(c->op, "aavg3d") == 0) gx = mft_adaptive_avg_pool3d_backward(go, x);
    else gx = mft_adaptive_avg_pool2d_backward(go, x);
    CHECK_MSG(gx != NULL, "case %s: backward: %s", c->name, mft_last_error_message());
    if (gx) {
        CHECK_MSG(tu_list_eq(&c->gsizes, mft_tensor_ndim(gx), mft_tensor_sizes(gx)),
                  "case %s: grad sizes", c->name);
        CHECK_MSG(packed_in(gx, c->tag), "case %s: grad_x not packed in %s", c->name,
                  mft_format_name(c->tag));
        if (c->gstrides.n)
            CHECK_MSG(tu_list_eq(&c->gstrides, mft_tensor_ndim(gx), mft_tensor_strides(gx)),
                      "case %s: grad_x strides", c->name);
        bad += gm_compare(c, "grad", gx, c->gvalues, c->ngvalues, c->dtype == MFT_F32 ? 1e-5 : 1e-8);
    }
    (void)nsp;
    CHECK_MSG(bad == 0, "case %s: %d mismatches", c->name, bad);
    mft_tensor_release(gx);
    mft_tensor_release(go);
    mft_tensor_release(ind);
    mft_tensor_release(y);
    mft_tensor_release(x);
}

static void gm_end(int lineno, bool in_case) {
    bool ok = in_case && g_case.op[0] && g_case.has_result && g_case.in_sizes.n > 0;
    CHECK_MSG(ok, "line %d: incomplete case %s", lineno, g_case.name);
    if (ok) gm_run(&g_case);
}

static void test_golden(void) {
    static char line[GM_LINE];
    const tu_golden_file file = {MFT_TEST_DATA_DIR "/pool_more_cases.txt", line, GM_LINE, true,
                                 &g_case, sizeof g_case, &g_case.line, g_case.name,
                                 sizeof g_case.name, gm_field, gm_end};
    if (!tu_read_golden(&file)) return;
    CHECK_MSG(g_gstats.cases >= 150, "only %d cases", g_gstats.cases);
    CHECK_MSG(g_gstats.errors >= 15, "only %d error cases", g_gstats.errors);
    /* the adaptive 3-D cases ran, in both layouts, their strides checked */
    CHECK_MSG(g_gstats.a3d >= 70 && g_gstats.a3d_cl >= 35 && g_gstats.a3d_strides == g_gstats.a3d,
              "adaptive 3-D golden cases: %d (%d NDHWC, %d with strides)", g_gstats.a3d,
              g_gstats.a3d_cl, g_gstats.a3d_strides);
    printf("golden pool_more: %d cases (%d errors, %d adaptive 3-D), %d values\n", g_gstats.cases,
           g_gstats.errors, g_gstats.a3d, g_gstats.values);
}

/* ------------------------------------------------------------------ (b) naive loops */
typedef enum { K_MAX, K_AVG, K_AMAX, K_AAVG } tkind;
typedef struct {
    tkind kind;
    bool bwd;
    int R;         /* 4 or 5 */
    int64_t N, C, in[3], out[3], k[3], s[3], p[3], d[3];
    bool ceil, cip;
    int64_t div;
} tcase;

static int64_t t_floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static int64_t t_outsize(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    int64_t o = (ceil ? -t_floordiv(-span, s) : t_floordiv(span, s)) + 1;
    if (ceil && (o - 1) * s >= in + p) o--;
    return o;
}

/* Positions of window o along dim e (in visiting order); *psize = avg pool size. */
static int t_positions(const tcase *c, int e, int64_t o, int64_t *pos, int64_t *psize,
                       int64_t *first) {
    int n = 0;
    const int64_t in = c->in[e];
    if (c->kind == K_AMAX || c->kind == K_AAVG) {
        int64_t a = (o * in) / c->out[e], b = -t_floordiv(-(o + 1) * in, c->out[e]);
        for (int64_t i = a; i < b; i++) pos[n++] = i;
        *psize = b - a;
        *first = a;
        return n;
    }
    const int64_t d = c->kind == K_MAX ? c->d[e] : 1;
    *psize = 0;
    *first = -1;
    for (int64_t kk = 0; kk < c->k[e]; kk++) {
        int64_t i = o * c->s[e] - c->p[e] + kk * d;
        if (i < c->in[e] + c->p[e]) ++*psize;
        if (i >= 0 && *first < 0) *first = i;
        if (i >= 0 && i < in) pos[n++] = i;
    }
    return n;
}

/* Largest window along one dim in the tests. */
#define T_WIN 2048

/* 5-D logical index of (n, c, d, h, w) for a rank R tensor. */
static void t_idx(int R, int64_t n, int64_t ch, int64_t d, int64_t h, int64_t w, int64_t *idx) {
    idx[0] = n;
    idx[1] = ch;
    if (R == 5) {
        idx[2] = d;
        idx[3] = h;
        idx[4] = w;
    } else {
        idx[2] = h;
        idx[3] = w;
    }
}

/* Naive forward: y[], yi[] in logical output order. */
static void t_forward(const tcase *c, const mft_tensor *x, double *y, int64_t *yi) {
    int64_t q = 0, idx[5];
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t od = 0; od < c->out[0]; od++)
                for (int64_t oh = 0; oh < c->out[1]; oh++)
                    for (int64_t ow = 0; ow < c->out[2]; ow++, q++) {
                        int64_t pd[T_WIN], ph[T_WIN], pw[T_WIN], sz[3], f[3];
                        int nd_ = t_positions(c, 0, od, pd, &sz[0], &f[0]);
                        int nh = t_positions(c, 1, oh, ph, &sz[1], &f[1]);
                        int nw = t_positions(c, 2, ow, pw, &sz[2], &f[2]);
                        if (c->kind == K_MAX || c->kind == K_AMAX) {
                            double m = -INFINITY;
                            int64_t mi = (f[0] * c->in[1] + f[1]) * c->in[2] + f[2];
                            for (int a = 0; a < nd_; a++)
                                for (int b = 0; b < nh; b++)
                                    for (int e = 0; e < nw; e++) {
                                        t_idx(c->R, n, ch, pd[a], ph[b], pw[e], idx);
                                        double v = mft_tensor_get(x, idx);
                                        if (isnan(v) || v > m) {
                                            m = v;
                                            mi = (pd[a] * c->in[1] + ph[b]) * c->in[2] + pw[e];
                                        }
                                    }
                            y[q] = m;
                            yi[q] = mi;
                        } else {
                            double s = 0;
                            for (int a = 0; a < nd_; a++)
                                for (int b = 0; b < nh; b++)
                                    for (int e = 0; e < nw; e++) {
                                        t_idx(c->R, n, ch, pd[a], ph[b], pw[e], idx);
                                        s += mft_tensor_get(x, idx);
                                    }
                            int64_t cnt = (int64_t)nd_ * nh * nw;
                            int64_t dv = c->kind == K_AAVG ? cnt
                                       : c->div          ? c->div
                                       : c->cip          ? sz[0] * sz[1] * sz[2]
                                                         : cnt;
                            y[q] = cnt ? s / (double)dv : 0.0;
                        }
                    }
}

/* Naive backward: gx[] (logical input order) from g[] (logical output order). */
static void t_backward(const tcase *c, const double *g, const int64_t *yi, double *gx) {
    const int64_t P = c->in[0] * c->in[1] * c->in[2], OP = c->out[0] * c->out[1] * c->out[2];
    memset(gx, 0, sizeof(double) * (size_t)(c->N * c->C * P));
    int64_t q = 0;
    for (int64_t pl = 0; pl < c->N * c->C; pl++)
        for (int64_t od = 0; od < c->out[0]; od++)
            for (int64_t oh = 0; oh < c->out[1]; oh++)
                for (int64_t ow = 0; ow < c->out[2]; ow++, q++) {
                    if (c->kind == K_MAX || c->kind == K_AMAX) {
                        if (yi[q] >= 0 && yi[q] < P) gx[pl * P + yi[q]] += g[q];
                        continue;
                    }
                    int64_t pd[T_WIN], ph[T_WIN], pw[T_WIN], sz[3], f[3];
                    int nd_ = t_positions(c, 0, od, pd, &sz[0], &f[0]);
                    int nh = t_positions(c, 1, oh, ph, &sz[1], &f[1]);
                    int nw = t_positions(c, 2, ow, pw, &sz[2], &f[2]);
                    int64_t cnt = (int64_t)nd_ * nh * nw;
                    if (!cnt) continue;
                    int64_t dv = c->kind == K_AAVG ? cnt
                               : c->div          ? c->div
                               : c->cip          ? sz[0] * sz[1] * sz[2]
                                                 : cnt;
                    for (int a = 0; a < nd_; a++)
                        for (int b = 0; b < nh; b++)
                            for (int e = 0; e < nw; e++)
                                gx[pl * P + (pd[a] * c->in[1] + ph[b]) * c->in[2] + pw[e]] +=
                                    g[q] / (double)dv;
                }
    (void)OP;
}

static mft__op_id t_op(const tcase *c) {
    if (!c->bwd) {
        if (c->kind == K_MAX) return c->R == 5 ? MFT__OP_MAX_POOL3D : MFT__OP_MAX_POOL2D;
        if (c->kind == K_AVG) return c->R == 5 ? MFT__OP_AVG_POOL3D : MFT__OP_AVG_POOL2D;
        if (c->R == 5)
            return c->kind == K_AMAX ? MFT__OP_ADAPTIVE_MAX_POOL3D : MFT__OP_ADAPTIVE_AVG_POOL3D;
        return c->kind == K_AMAX ? MFT__OP_ADAPTIVE_MAX_POOL2D : MFT__OP_ADAPTIVE_AVG_POOL2D;
    }
    if (c->kind == K_MAX || c->kind == K_AMAX)
        return c->R == 5 ? MFT__OP_MAX_POOL3D_BACKWARD : MFT__OP_MAX_POOL2D_BACKWARD;
    if (c->kind == K_AVG) return c->R == 5 ? MFT__OP_AVG_POOL3D_BACKWARD : MFT__OP_AVG_POOL2D_BACKWARD;
    return c->R == 5 ? MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD : MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
}

/* Compares t (logical order over its sizes) with want[]. */
static bool t_match(const mft_tensor *t, const double *want, const int64_t *iwant, double tol,
                    const char *what, const tcase *c) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0}, q = 0;
    if (mft_tensor_numel(t) == 0) return true;
    do {
        double g = mft_tensor_get(t, idx);
        bool ok = iwant ? g == (double)iwant[q] : same_value(g, want[q], tol);
        if (!ok) {
            char b[64];
            tu_fmt_list(b, sizeof b, nd, idx);
            CHECK_MSG(false, "%s (kind %d bwd %d R %d in %lld,%lld,%lld k %lld,%lld,%lld s "
                      "%lld,%lld,%lld p %lld,%lld,%lld d %lld,%lld,%lld ceil %d cip %d div %lld): "
                      "at %s got %.9g want %.9g", what, c->kind, c->bwd, c->R,
                      (long long)c->in[0], (long long)c->in[1], (long long)c->in[2],
                      (long long)c->k[0], (long long)c->k[1], (long long)c->k[2],
                      (long long)c->s[0], (long long)c->s[1], (long long)c->s[2],
                      (long long)c->p[0], (long long)c->p[1], (long long)c->p[2],
                      (long long)c->d[0], (long long)c->d[1], (long long)c->d[2], c->ceil, c->cip,
                      (long long)c->div, b, g, iwant ? (double)iwant[q] : want[q]);
            return false;
        }
        q++;
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
    return true;
}

/* Random values with ties and some NaN / inf (forward max), through set. */
static void t_fill(mft_tensor *t, uint64_t *rng, bool specials) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double v = (double)tu_rng_int(rng, -12, 12) / 4.0;
        if (specials) {
            int64_t r = tu_rng_int(rng, 0, 40);
            if (r == 0) v = NAN;
            else if (r == 1) v = -INFINITY;
            else if (r == 2) v = INFINITY;
        }
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* Tensor of sizes with the values of src (logical) laid out: 0 NCHW, 1 NHWC,
 * 2 a random non-dense view. */
static mft_tensor *t_layout(const mft_tensor *src, int layout, uint64_t *rng) {
    if (layout == 0) return mft_contiguous(src, MFT_CONTIGUOUS);
    if (layout == 1) return mft_contiguous(src, MFT_CHANNELS_LAST);
    static const tu_layout_opts o = {2, 2, false};
    mft_tensor *v = tu_strided_view(mft_tensor_ndim(src), mft_tensor_sizes(src),
                                    mft_tensor_dtype(src), NAN, &o, rng, NULL);
    if (v && mft_copy_(v, src) != MFT_OK) {
        mft_tensor_release(v);
        return NULL;
    }
    return v;
}

static struct {
    int cases, kernel_runs, api_runs, a3d_runs;
} g_sstats;

/* Runs one kernel on (inputs, outputs) already laid out. */
static void t_call(mft_kernel_fn fn, int nin, const mft_tensor *const *in, int nout,
                   mft_tensor *const *out, const void *prm) {
    mft_kernel_args a = {nin, nout, in, out, prm};
    fn(&a);
}

/* The public entry point of a case (2-D forward max/avg are ops/pool/'s). */
static mft_tensor *t_public(const tcase *c, const mft_tensor *x, const mft_tensor *go,
                            const mft_tensor *ind, mft_tensor **ind_out) {
    const int o = c->R == 5 ? 0 : 1;
    const int64_t *k = c->k + o, *s = c->s + o, *p = c->p + o, *d = c->d + o;
    if (!c->bwd) {
        switch (c->kind) {
        case K_MAX: return c->R == 5 ? mft_max_pool3d_with_indices(x, k, s, p, d, c->ceil, ind_out)
                                     : mft_max_pool2d_with_indices(x, k, s, p, d, c->ceil, ind_out);
        case K_AVG: return c->R == 5 ? mft_avg_pool3d(x, k, s, p, c->ceil, c->cip, c->div)
                                     : mft_avg_pool2d(x, k, s, p, c->ceil, c->cip, c->div);
        case K_AMAX: return c->R == 5 ? mft_adaptive_max_pool3d_with_indices(x, c->out, ind_out)
                                      : mft_adaptive_max_pool2d_with_indices(x, c->out + 1, ind_out);
        case K_AAVG: return c->R == 5 ? mft_adaptive_avg_pool3d(x, c->out)
                                      : mft_adaptive_avg_pool2d(x, c->out + 1);
        }
    }
    switch (c->kind) {
    case K_MAX: return c->R == 5 ? mft_max_pool3d_backward(go, x, ind)
                                 : mft_max_pool2d_backward(go, x, ind);
    case K_AVG: return c->R == 5 ? mft_avg_pool3d_backward(go, x, k, s, p, c->ceil, c->cip, c->div)
                                 : mft_avg_pool2d_backward(go, x, k, s, p, c->ceil, c->cip, c->div);
    case K_AMAX: return c->R == 5 ? mft_adaptive_max_pool3d_backward(go, x, ind)
                                  : mft_adaptive_max_pool2d_backward(go, x, ind);
    case K_AAVG: return c->R == 5 ? mft_adaptive_avg_pool3d_backward(go, x)
                                  : mft_adaptive_avg_pool2d_backward(go, x);
    }
    return NULL;
}

/* One case: every kernel (and the public entry point) against the naive loops. */
static void t_run_case(const tcase *c, mft_dtype dt, uint64_t *rng) {
    g_sstats.cases++;
    const int R = c->R;
    int64_t xs[5], ys[5];
    xs[0] = ys[0] = c->N;
    xs[1] = ys[1] = c->C;
    for (int i = 0; i < R - 2; i++) {
        xs[2 + i] = c->in[5 - R + i];
        ys[2 + i] = c->out[5 - R + i];
    }
    const int64_t nx = tu_shape_numel(R, xs), ny = tu_shape_numel(R, ys);
    const bool is_max = c->kind == K_MAX || c->kind == K_AMAX;
    mft_tensor *x = mft_empty(R, xs, dt, MFT_CONTIGUOUS);
    t_fill(x, rng, is_max && !c->bwd);
    double *yv = calloc((size_t)ny + 1, sizeof *yv), *gv = calloc((size_t)ny + 1, sizeof *gv);
    double *gx = calloc((size_t)nx + 1, sizeof *gx);
    int64_t *yi = calloc((size_t)ny + 1, sizeof *yi);
    t_forward(c, x, yv, yi);
    mft_tensor *go = mft_empty(R, ys, dt, MFT_CONTIGUOUS), *ind = mft_empty(R, ys, MFT_I64, MFT_CONTIGUOUS);
    for (int64_t i = 0; i < ny; i++) {
        gv[i] = (double)tu_rng_int(rng, -16, 16) / 8.0;
        ((int64_t *)mft_tensor_data(ind))[i] = yi[i];
        if (dt == MFT_F32) ((float *)mft_tensor_data(go))[i] = (float)gv[i];
        else ((double *)mft_tensor_data(go))[i] = gv[i];
    }
    t_backward(c, gv, yi, gx);
    const double tol = dt == MFT_F32 ? 2e-5 : 1e-12;
    mft_pool2d_params p2;
    mft_pool3d_params p3;
    mft_adaptive_pool_params pa = {{c->out[1], c->out[2], 0}};
    if (R == 5) pa = (mft_adaptive_pool_params){{c->out[0], c->out[1], c->out[2]}};
    memset(&p2, 0, sizeof p2);
    memset(&p3, 0, sizeof p3);
    for (int i = 0; i < 3; i++) {
        p3.kernel[i] = c->k[i];
        p3.stride[i] = c->s[i];
        p3.padding[i] = c->p[i];
        p3.dilation[i] = c->kind == K_MAX ? c->d[i] : 1;
        if (i) {
            p2.kernel[i - 1] = c->k[i];
            p2.stride[i - 1] = c->s[i];
            p2.padding[i - 1] = c->p[i];
            p2.dilation[i - 1] = c->kind == K_MAX ? c->d[i] : 1;
        }
    }
    p2.ceil_mode = p3.ceil_mode = c->ceil;
    p2.count_include_pad = p3.count_include_pad = c->cip;
    p2.divisor_override = p3.divisor_override = c->div;
    const void *prm = c->kind >= K_AMAX ? (const void *)&pa : R == 5 ? (const void *)&p3 : (const void *)&p2;
    const mft__op_id op = t_op(c);
    char what[96];

    /* kernels: the reference (on a non-dense input) and every table entry */
    mft_kernel_fn fns[4];
    mft_format fmts[4];
    const char *names[4];
    int nk = 0;
    const bool pool2d = op == MFT__OP_MAX_POOL2D || op == MFT__OP_AVG_POOL2D; /* ops/pool/'s */
    fns[nk] = pool2d ? mft__pool_reference(op, dt) : mft__pool_more_reference(op, dt);
    fmts[nk] = MFT_FORMAT_ANY;
    names[nk] = "reference";
    if (fns[nk]) nk++;
    for (const mft__kernel_def *kd = pool2d ? mft__kernels_pool : mft__kernels_pool_more; kd->fn;
         kd++)
        if (kd->op == op && kd->dtype == dt && nk < 4) {
            fns[nk] = kd->fn;
            fmts[nk] = kd->fmt;
            names[nk++] = kd->name;
        }
    /* the 3-D adaptive ops have their rows (F32: NCDHW and NDHWC; F64: the
     * reference under CONTIGUOUS), besides the reference */
    if (R == 5 && (c->kind == K_AMAX || c->kind == K_AAVG)) {
        CHECK_MSG(nk == (dt == MFT_F32 ? 3 : 2), "%s %s: %d kernels", mft__op_name(op),
                  mft_dtype_name(dt), nk);
        g_sstats.a3d_runs++;
    }
    for (int kx = 0; kx < nk; kx++) {
        const bool any = fmts[kx] == MFT_FORMAT_ANY;
        mft_tensor *kin[2] = {NULL, NULL}, *kout[2] = {NULL, NULL};
        int nin = 1, nout = 1;
        if (!c->bwd) {
            kin[0] = any ? t_layout(x, 2, rng) : mft_contiguous(x, fmts[kx]);
            kout[0] = mft_empty(R, ys, dt, any ? MFT_CHANNELS_LAST : fmts[kx]);
            if (is_max) {
                kout[1] = mft_empty(R, ys, MFT_I64, any ? MFT_CHANNELS_LAST : fmts[kx]);
                nout = 2;
            }
        } else {
            kin[0] = any ? t_layout(go, 2, rng) : mft_contiguous(go, fmts[kx]);
            if (is_max) {
                kin[1] = any ? t_layout(ind, 1, rng) : mft_contiguous(ind, fmts[kx]);
                nin = 2;
            }
            kout[0] = mft_empty(R, xs, dt, any ? MFT_CHANNELS_LAST : fmts[kx]);
        }
        const mft_tensor *cin[2] = {kin[0], kin[1]};
        /* max backward kernels get NULL or (from the tape) the forward's 2-D
         * windows, with which NHWC may write grad_x densely */
        const void *kprm = prm;
        if (c->bwd && is_max) kprm = R == 4 && c->kind == K_MAX ? (const void *)&p2 : NULL;
        t_call(fns[kx], nin, cin, nout, kout, kprm);
        g_sstats.kernel_runs++;
        snprintf(what, sizeof what, "kernel %s %s", names[kx], mft_dtype_name(dt));
        if (!c->bwd) {
            t_match(kout[0], yv, NULL, tol, what, c);
            if (is_max) t_match(kout[1], NULL, yi, 0, what, c);
        } else {
            t_match(kout[0], gx, NULL, tol, what, c);
        }
        for (int i = 0; i < 2; i++) {
            mft_tensor_release(kin[i]);
            mft_tensor_release(kout[i]);
        }
    }

    /* public entry point, input (and grad_out) in a random layout */
    int lx = (int)tu_rng_int(rng, 0, 2), lg = (int)tu_rng_int(rng, 0, 2);
    mft_tensor *xl = t_layout(x, lx, rng);
    mft_tensor *gl = c->bwd ? t_layout(go, lg, rng) : NULL;
    mft_tensor *il = c->bwd && is_max ? t_layout(ind, lg, rng) : NULL;
    mft_tensor *ri = NULL;
    mft_tensor *r = t_public(c, xl, gl, il, &ri);
    g_sstats.api_runs++;
    snprintf(what, sizeof what, "public %s layout %d/%d", mft_dtype_name(dt), lx, lg);
    CHECK_MSG(r != NULL, "%s: %s", what, mft_last_error_message());
    if (r) {
        const mft_format want_fmt = mft_tensor_format(xl);
        CHECK_MSG(packed_in(r, want_fmt), "%s: result not packed in the input's tag %s", what,
                  mft_format_name(want_fmt));
        if (!c->bwd) {
            CHECK(tu_has_sizes(r, R, ys));
            t_match(r, yv, NULL, tol, what, c);
            if (is_max) {
                CHECK(ri && packed_in(ri, want_fmt));
                if (ri) t_match(ri, NULL, yi, 0, what, c);
            }
        } else {
            CHECK(tu_has_sizes(r, R, xs));
            t_match(r, gx, NULL, tol, what, c);
        }
    }
    mft_tensor_release(r);
    mft_tensor_release(ri);
    mft_tensor_release(xl);
    mft_tensor_release(gl);
    mft_tensor_release(il);
    mft_tensor_release(go);
    mft_tensor_release(ind);
    mft_tensor_release(x);
    free(yv);
    free(gv);
    free(gx);
    free(yi);
}

/* A random case of kind/rank; false when the output would be empty. */
static bool t_random_case(tcase *c, tkind kind, bool bwd, int R, uint64_t *rng) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->bwd = bwd;
    c->R = R;
    c->N = tu_rng_int(rng, 0, 3) == 0 ? 1 : 2;
    /* few channels, and past the NHWC kernels' 16-lane registers and
     * 64-channel blocks, with tails */
    c->C = (int64_t[]){1, 3, 5, 8, 19, 37, 64, 70}[tu_rng_int(rng, 0, 7)];
    for (int e = 0; e < 3; e++) {
        const bool used = e >= 5 - R;
        c->in[e] = used ? tu_rng_int(rng, 1, 7) : 1;
        c->k[e] = used ? tu_rng_int(rng, 1, 3) : 1;
        c->s[e] = used ? tu_rng_int(rng, 1, 3) : 1;
        c->p[e] = used ? tu_rng_int(rng, 0, c->k[e] / 2) : 0;
        c->d[e] = used && kind == K_MAX ? tu_rng_int(rng, 1, 2) : 1;
    }
    c->ceil = tu_rng_int(rng, 0, 1);
    c->cip = tu_rng_int(rng, 0, 1);
    c->div = kind == K_AVG && tu_rng_int(rng, 0, 3) == 0 ? tu_rng_int(rng, 1, 5) : 0;
    for (int e = 0; e < 3; e++) {
        if (kind == K_AMAX || kind == K_AAVG) {
            /* (3-D: up to 5 per dim, larger than the input often enough) */
            c->out[e] = e >= 5 - R ? tu_rng_int(rng, 1, R == 5 ? 5 : 8) : 1;
        } else {
            c->out[e] = t_outsize(c->in[e], c->k[e], c->p[e], c->s[e], c->d[e], c->ceil);
            if (c->out[e] < 1) return false;
        }
    }
    return true;
}

static void t_sweep(mft_dtype dt, int per, uint64_t seed) {
    uint64_t rng = seed;
    static const struct { tkind k; bool bwd; int R; } combos[] = {
        {K_MAX, false, 5}, {K_AVG, false, 5}, {K_AMAX, false, 4}, {K_AAVG, false, 4},
        {K_MAX, true, 4},  {K_AVG, true, 4},  {K_MAX, true, 5},   {K_AVG, true, 5},
        {K_AMAX, true, 4}, {K_AAVG, true, 4}, {K_MAX, false, 4},  {K_AVG, false, 4},
        {K_AMAX, false, 5}, {K_AAVG, false, 5}, {K_AMAX, true, 5}, {K_AAVG, true, 5},
    };
    for (size_t i = 0; i < sizeof combos / sizeof *combos; i++)
        for (int n = 0; n < per; n++) {
            tcase c;
            if (!t_random_case(&c, combos[i].k, combos[i].bwd, combos[i].R, &rng)) continue;
            t_run_case(&c, dt, &rng);
        }
}

static void test_sweep_f32(void) {
    t_sweep(MFT_F32, 60, 0x9e3779b97f4a7c15ull);
    printf("sweep f32: %d cases, %d kernel runs, %d public runs\n", g_sstats.cases,
           g_sstats.kernel_runs, g_sstats.api_runs);
    CHECK_MSG(g_sstats.a3d_runs == 4 * 60, "adaptive 3-D f32 cases: %d", g_sstats.a3d_runs);
}
static void test_sweep_f64(void) {
    const int before = g_sstats.a3d_runs;
    t_sweep(MFT_F64, 25, 0x1234567887654321ull);
    CHECK_MSG(g_sstats.a3d_runs - before == 4 * 25, "adaptive 3-D f64 cases: %d",
              g_sstats.a3d_runs - before);
}

/* Fixed edge cases: H=W=1, N=1 by select+unsqueeze, C=1, adaptive larger
 * than the input, non-dividing sizes, overlapping windows. */
static void test_edges(void) {
    uint64_t rng = 7;
    tcase c;
    /* 1x1 spatial, adaptive to 3x2 */
    memset(&c, 0, sizeof c);
    c.kind = K_AAVG;
    c.R = 4;
    c.N = 1;
    c.C = 1;
    for (int e = 0; e < 3; e++) c.in[e] = c.out[e] = c.k[e] = c.s[e] = c.d[e] = 1;
    c.out[1] = 3;
    c.out[2] = 2;
    for (int b = 0; b < 2; b++) {
        c.bwd = b;
        c.kind = K_AAVG;
        t_run_case(&c, MFT_F32, &rng);
        c.kind = K_AMAX;
        t_run_case(&c, MFT_F64, &rng);
    }
    /* global pooling of 7x5 and 3x3 s1 p1 (overlapping) on a bigger C */
    memset(&c, 0, sizeof c);
    c.R = 4;
    c.N = 2;
    c.C = 19;
    c.in[0] = c.out[0] = 1;
    c.in[1] = 7;
    c.in[2] = 5;
    for (int e = 0; e < 3; e++) c.k[e] = c.s[e] = c.d[e] = 1;
    c.out[1] = c.out[2] = 1;
    for (int b = 0; b < 2; b++) {
        c.bwd = b;
        c.kind = K_AAVG;
        t_run_case(&c, MFT_F32, &rng);
        c.kind = K_AMAX;
        t_run_case(&c, MFT_F32, &rng);
    }
    c.kind = K_AVG;
    c.k[1] = c.k[2] = 3;
    c.p[1] = c.p[2] = 1;
    c.out[1] = 7;
    c.out[2] = 5;
    c.cip = false;
    for (int b = 0; b < 2; b++) {
        c.bwd = b;
        t_run_case(&c, MFT_F32, &rng);
    }
    c.kind = K_MAX;
    c.bwd = true;
    t_run_case(&c, MFT_F32, &rng);
    /* wide / tall rows (W or H > 512: the kernels' untabled paths), and
     * many windows per input pixel (adaptive 1x1 -> 9x9, 2x2 -> 40x40) */
    static const int64_t wide[][4] = {{1, 1030, 4, 1}, {1030, 1, 1, 4}, {1, 1, 9, 9}, {2, 2, 40, 40}};
    for (int v = 0; v < 4; v++)
        for (int kind = 0; kind < 2; kind++)
            for (int b = 0; b < 2; b++) {
                memset(&c, 0, sizeof c);
                c.R = 4;
                c.N = 1;
                c.C = v >= 2 ? 70 : 3;
                c.bwd = b;
                for (int e = 0; e < 3; e++) c.in[e] = c.out[e] = c.k[e] = c.s[e] = c.d[e] = 1;
                c.in[1] = wide[v][0];
                c.in[2] = wide[v][1];
                if (kind == 0) {
                    c.kind = K_AAVG;
                    c.out[1] = wide[v][2];
                    c.out[2] = wide[v][3];
                } else {
                    if (v >= 2) continue;
                    c.kind = K_AVG;
                    c.k[1] = c.k[2] = 3;
                    c.s[1] = c.s[2] = 1;
                    c.p[1] = c.p[2] = 1;
                    c.ceil = true;
                    c.cip = v == 0;
                    for (int e = 1; e < 3; e++)
                        c.out[e] = t_outsize(c.in[e], 3, 1, 1, 1, true);
                }
                t_run_case(&c, MFT_F32, &rng);
            }
    /* many channels (the NHWC kernels' register blocks and their tails),
     * NaN / inf in the forward inputs */
    for (int v = 0; v < 4; v++) {
        memset(&c, 0, sizeof c);
        c.R = v == 3 ? 5 : 4;
        c.N = 2;
        c.C = v == 0 ? 64 : 70;
        c.kind = v == 1 ? K_AVG : v == 2 ? K_AMAX : K_MAX;
        for (int e = 0; e < 3; e++) c.in[e] = c.out[e] = c.k[e] = c.s[e] = c.d[e] = 1;
        for (int e = 3 - (c.R - 2); e < 3; e++) {
            c.in[e] = 9 - e;
            c.k[e] = 3;
            c.s[e] = 2;
            c.p[e] = 1;
            c.out[e] = c.kind == K_AMAX ? 3 : t_outsize(c.in[e], 3, 1, 2, 1, false);
        }
        for (int b = 0; b < 2; b++) {
            c.bwd = b;
            t_run_case(&c, MFT_F32, &rng);
        }
    }
    /* empty batch: empty results and gradients of the right sizes */
    {
        int64_t z4[4] = {0, 3, 5, 4}, z5[5] = {0, 2, 3, 4, 5}, kk[3] = {2, 2, 2}, oo[2] = {2, 3};
        for (int f = 0; f < 2; f++) {
            const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x4 = mft_zeros(4, z4, MFT_F32, fmt), *x5 = mft_zeros(5, z5, MFT_F32, fmt);
            mft_tensor *i5 = NULL, *y5 = mft_max_pool3d_with_indices(x5, kk, NULL, NULL, NULL, false, &i5);
            mft_tensor *g5 = mft_max_pool3d_backward(y5, x5, i5);
            mft_tensor *a4 = mft_adaptive_avg_pool2d(x4, oo), *ga4 = mft_adaptive_avg_pool2d_backward(a4, x4);
            mft_tensor *i4 = NULL, *m4 = mft_adaptive_max_pool2d_with_indices(x4, oo, &i4);
            mft_tensor *gm4 = mft_adaptive_max_pool2d_backward(m4, x4, i4);
            mft_tensor *v4 = mft_avg_pool2d(x4, kk, NULL, NULL, true, false, 0);
            mft_tensor *gv4 = mft_avg_pool2d_backward(v4, x4, kk, NULL, NULL, true, false, 0);
            CHECK_MSG(y5 && i5 && g5 && a4 && ga4 && m4 && i4 && gm4 && v4 && gv4, "empty batch: %s",
                      mft_last_error_message());
            CHECK(tu_has_sizes(g5, 5, z5) && tu_has_sizes(ga4, 4, z4) && tu_has_sizes(gm4, 4, z4) &&
                  tu_has_sizes(gv4, 4, z4));
            CHECK(a4 && mft_tensor_sizes(a4)[2] == 2 && mft_tensor_sizes(a4)[3] == 3);
            mft_tensor *arr[] = {x4, x5, i5, y5, g5, a4, ga4, i4, m4, gm4, v4, gv4};
            for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
        }
    }
    /* N = 1 made by select + unsqueeze (5-D) */
    int64_t sz[5] = {3, 2, 4, 5, 6};
    mft_tensor *big = mft_rand(5, sz, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *sel = mft_select(big, 0, 1), *x = mft_unsqueeze(sel, 0);
    int64_t k[3] = {2, 2, 2};
    mft_tensor *ind = NULL, *y = mft_max_pool3d_with_indices(x, k, NULL, NULL, NULL, false, &ind);
    mft_tensor *xc = mft_contiguous(x, MFT_CONTIGUOUS);
    mft_tensor *ind2 = NULL, *y2 = mft_max_pool3d_with_indices(xc, k, NULL, NULL, NULL, false, &ind2);
    CHECK(y && y2 && mft_tensor_hash(y) == mft_tensor_hash(y2));
    CHECK(ind && ind2 && mft_tensor_hash(ind) == mft_tensor_hash(ind2));
    mft_tensor *gx = mft_max_pool3d_backward(y, x, ind), *gx2 = mft_max_pool3d_backward(y2, xc, ind2);
    CHECK(gx && gx2 && mft_tensor_hash(gx) == mft_tensor_hash(gx2));
    mft_tensor *arr[] = {big, sel, x, ind, y, xc, ind2, y2, gx, gx2};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
}

/* 1-D pools on (N,C,L) in NCL / NLC / non-dense layouts and on (C,L),
 * against the 2-D functions on the (N,C,1,L) copy. */
static void test_pool1d(void) {
    uint64_t rng = 11;
    int runs = 0;
    for (int it = 0; it < 120; it++) {
        const mft_dtype dt = it % 3 == 2 ? MFT_F64 : MFT_F32;
        int64_t N = tu_rng_int(&rng, 1, 2), C = tu_rng_int(&rng, 1, 4), L = tu_rng_int(&rng, 1, 9);
        int64_t k = tu_rng_int(&rng, 1, 3), s = tu_rng_int(&rng, 0, 3), p = tu_rng_int(&rng, 0, k / 2);
        int64_t d = tu_rng_int(&rng, 1, 2);
        bool ceil = tu_rng_int(&rng, 0, 1), cip = tu_rng_int(&rng, 0, 1);
        const bool batched = it % 5 != 4;
        int64_t sz3[3] = {N, C, L}, sz2[2] = {C, L};
        mft_tensor *base = mft_empty(3, sz3, dt, MFT_CONTIGUOUS);
        t_fill(base, &rng, true);
        int layout = (int)tu_rng_int(&rng, 0, 2);
        mft_tensor *x3 = t_layout(base, layout, &rng);
        mft_tensor *x = batched ? mft_tensor_retain(x3) : mft_select(x3, 0, 0);
        int64_t k2[2] = {1, k}, s2[2] = {1, s ? s : k}, p2[2] = {0, p}, d2[2] = {1, d};
        int64_t sz4[4] = {N, C, 1, L};
        mft_tensor *x4 = mft_reshape(batched ? x3 : x3, 4, sz4);
        if (!batched) {
            mft_tensor *t = mft_narrow(x4, 0, 0, 1);
            mft_tensor_release(x4);
            x4 = t;
        }
        int64_t kk[1] = {k}, ss[1] = {s}, pp[1] = {p}, dd[1] = {d};
        (void)sz2;
        mft_tensor *i1 = NULL, *y1 = mft_max_pool1d_with_indices(x, kk, ss, pp, dd, ceil, &i1);
        mft_tensor *i2 = NULL, *y2 = mft_max_pool2d_with_indices(x4, k2, s2, p2, d2, ceil, &i2);
        mft_tensor *a1 = mft_avg_pool1d(x, kk, ss, pp, ceil, cip);
        mft_tensor *a2 = mft_avg_pool2d(x4, k2, s2, p2, ceil, cip, 0);
        mft_clear_error();
        CHECK((y1 == NULL) == (y2 == NULL) && (i1 == NULL) == (y2 == NULL));
        CHECK((a1 == NULL) == (a2 == NULL));
        if (y2 && a2) {
            runs++;
            CHECK(y1 && i1 && a1 && a2);
            if (y1 && i1 && a1 && a2) {
                const mft_format want = batched ? mft_tensor_format(x) : MFT_CONTIGUOUS;
                CHECK_MSG(packed_in(y1, want) && packed_in(i1, want) && packed_in(a1, want),
                          "1-D result not packed in %s", mft_format_name(want));
                CHECK_EQ_I(mft_tensor_ndim(y1), batched ? 3 : 2);
                int64_t idx[4] = {0}, j1[3] = {0};
                const int nd1 = mft_tensor_ndim(y1);
                do {
                    int64_t q = 0;
                    if (batched) {
                        idx[0] = j1[0];
                        idx[1] = j1[1];
                        idx[3] = j1[2];
                    } else {
                        idx[0] = 0;
                        idx[1] = j1[0];
                        idx[3] = j1[1];
                    }
                    (void)q;
                    CHECK(same_value(mft_tensor_get(y1, j1), mft_tensor_get(y2, idx), 0));
                    CHECK(mft_tensor_get(i1, j1) == mft_tensor_get(i2, idx));
                    CHECK(same_value(mft_tensor_get(a1, j1), mft_tensor_get(a2, idx), 1e-6));
                } while (tu_next_index(nd1, mft_tensor_sizes(y1), j1));
                /* backward: grad of the 1-D call equals the 2-D one's */
                mft_tensor *g1 = mft_max_pool1d_backward(y1, x, i1);
                mft_tensor *g2 = mft_max_pool2d_backward(y2, x4, i2);
                mft_tensor *h1 = mft_avg_pool1d_backward(a1, x, kk, ss, pp, ceil, cip);
                mft_tensor *h2 = mft_avg_pool2d_backward(a2, x4, k2, s2, p2, ceil, cip, 0);
                CHECK(g1 && g2 && h1 && h2);
                if (g1 && g2 && h1 && h2) {
                    CHECK(packed_in(g1, want) && packed_in(h1, want));
                    CHECK(mft_tensor_ndim(g1) == mft_tensor_ndim(x));
                    int64_t jj[3] = {0};
                    do {
                        if (batched) {
                            idx[0] = jj[0];
                            idx[1] = jj[1];
                            idx[3] = jj[2];
                        } else {
                            idx[0] = 0;
                            idx[1] = jj[0];
                            idx[3] = jj[1];
                        }
                        idx[2] = 0;
                        CHECK(same_value(mft_tensor_get(g1, jj), mft_tensor_get(g2, idx), 0));
                        CHECK(same_value(mft_tensor_get(h1, jj), mft_tensor_get(h2, idx), 1e-6));
                    } while (tu_next_index(mft_tensor_ndim(g1), mft_tensor_sizes(g1), jj));
                }
                mft_tensor *gs[] = {g1, g2, h1, h2};
                for (int i = 0; i < 4; i++) mft_tensor_release(gs[i]);
            }
        }
        mft_tensor *arr[] = {base, x3, x, x4, y1, i1, y2, i2, a1, a2};
        for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
    }
    CHECK(runs > 60);
}

/* ------------------------------------------------------------------ (c) threads, dispatch */
static void test_threads_and_dispatch(void) {
    int64_t sz[4] = {3, 40, 13, 11};
    const int before = mft_num_threads();
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = mft_randn(4, sz, MFT_F32, fmt, 5);
        uint64_t h[2][6];
        for (int t = 0; t < 2; t++) {
            mft_set_num_threads(t + 1);
            int64_t k[2] = {3, 3}, s[2] = {1, 2}, p[2] = {1, 1}, o[2] = {5, 4};
            mft_tensor *ind = NULL, *y = mft_max_pool2d_with_indices(x, k, s, p, NULL, false, &ind);
            mft_tensor *gm = mft_max_pool2d_backward(y, x, ind);
            CHECK(mft_dispatch_last()->conversions == 0);
            CHECK(strstr(mft_dispatch_last()->kernel, f ? "nhwc" : "nchw") != NULL);
            mft_tensor *a = mft_avg_pool2d(x, k, s, p, true, false, 0);
            mft_tensor *ga = mft_avg_pool2d_backward(a, x, k, s, p, true, false, 0);
            CHECK(mft_dispatch_last()->conversions == 0);
            mft_tensor *aa = mft_adaptive_avg_pool2d(x, o);
            mft_tensor *gaa = mft_adaptive_avg_pool2d_backward(aa, x);
            CHECK(mft_dispatch_last()->conversions == 0);
            CHECK(strstr(mft_dispatch_last()->kernel, f ? "nhwc" : "nchw") != NULL);
            mft_tensor *am = mft_adaptive_max_pool2d(x, o);
            h[t][0] = mft_tensor_hash(gm);
            h[t][1] = mft_tensor_hash(ga);
            h[t][2] = mft_tensor_hash(gaa);
            h[t][3] = mft_tensor_hash(aa);
            h[t][4] = mft_tensor_hash(am);
            h[t][5] = mft_tensor_hash(ind);
            mft_tensor *arr[] = {ind, y, gm, a, ga, aa, gaa, am};
            for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
        }
        CHECK(memcmp(h[0], h[1], sizeof h[0]) == 0);
        mft_tensor_release(x);
    }
    /* NDHWC 3-D forward and backward run NDHWC kernels without conversions */
    int64_t s5[5] = {2, 16, 5, 6, 7}, k3[3] = {2, 3, 2};
    mft_tensor *x = mft_randn(5, s5, MFT_F32, MFT_CHANNELS_LAST, 9);
    mft_tensor *ind = NULL, *y = mft_max_pool3d_with_indices(x, k3, NULL, NULL, NULL, true, &ind);
    CHECK(y && mft_dispatch_last()->conversions == 0 &&
          strcmp(mft_dispatch_last()->kernel, "max_pool3d.nhwc.f32") == 0);
    mft_tensor *g = mft_max_pool3d_backward(y, x, ind);
    CHECK(g && mft_dispatch_last()->conversions == 0 && packed_in(g, MFT_CHANNELS_LAST));
    mft_tensor *a = mft_avg_pool3d(x, k3, NULL, NULL, true, true, 0);
    mft_tensor *ga = mft_avg_pool3d_backward(a, x, k3, NULL, NULL, true, true, 0);
    CHECK(ga && mft_dispatch_last()->conversions == 0 && packed_in(ga, MFT_CHANNELS_LAST));
    /* grad_out in the other format is converted; grad_x keeps x's format */
    mft_tensor *ac = mft_contiguous(a, MFT_CONTIGUOUS);
    mft_tensor *ga2 = mft_avg_pool3d_backward(ac, x, k3, NULL, NULL, true, true, 0);
    CHECK(ga2 && packed_in(ga2, MFT_CHANNELS_LAST) && mft_tensor_hash(ga2) == mft_tensor_hash(ga));
    mft_tensor *arr[] = {x, ind, y, g, a, ga, ac, ga2};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
    mft_set_num_threads(before);
}


/* ------------------------------------------------------------------ adaptive 3-D */
/* A case of adaptive 3-D pooling (kind K_AMAX / K_AAVG, bwd or not) of
 * (N, C, in) to out, through t_run_case (every kernel of the table and the
 * reference on a non-dense view, the public function in a random layout,
 * all against the naive loops). */
static void a3_case(tkind kind, bool bwd, int64_t N, int64_t C, const int64_t in[3],
                    const int64_t out[3], mft_dtype dt, uint64_t *rng) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.bwd = bwd;
    c.R = 5;
    c.N = N;
    c.C = C;
    for (int e = 0; e < 3; e++) {
        c.in[e] = in[e];
        c.out[e] = out[e];
        c.k[e] = c.s[e] = c.d[e] = 1;
    }
    t_run_case(&c, dt, rng);
}

/* Fixed adaptive 3-D shapes beyond the random sweep: global pooling (the
 * NCDHW one-output-per-plane kernels), outputs larger than the input in
 * every dim (many windows per input pixel: the NDHWC backward's listed and
 * unlisted paths), rows wider than the kernels' 512-entry tables, channel
 * counts around the NDHWC register blocks, one channel / one pixel. */
static void test_adaptive3d_edges(void) {
    uint64_t rng = 0xada3d;
    static const struct {
        int64_t N, C, in[3], out[3];
    } shapes[] = {
        {2, 19, {3, 5, 4}, {1, 1, 1}},  {2, 70, {4, 3, 5}, {1, 1, 1}}, {1, 1, {1, 1, 1}, {3, 2, 4}},
        {1, 3, {2, 3, 1}, {5, 7, 3}},   {1, 70, {1, 2, 2}, {5, 9, 9}}, {1, 3, {2, 2, 530}, {3, 1, 7}},
        {1, 3, {1, 3, 7}, {2, 2, 600}}, {2, 64, {5, 7, 6}, {2, 3, 4}}, {1, 16, {7, 1, 1}, {3, 1, 1}},
        {3, 5, {6, 6, 6}, {6, 6, 6}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int b = 0; b < 2; b++)
            for (int kind = 0; kind < 2; kind++)
                a3_case(kind ? K_AMAX : K_AAVG, b, shapes[i].N, shapes[i].C, shapes[i].in,
                        shapes[i].out, i % 3 == 2 ? MFT_F64 : MFT_F32, &rng);

    /* empty batch: empty results and gradients of the right sizes, both formats */
    const int64_t z5[5] = {0, 2, 3, 4, 5}, oo[3] = {2, 3, 2};
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = mft_zeros(5, z5, MFT_F32, fmt);
        mft_tensor *a = mft_adaptive_avg_pool3d(x, oo), *ga = a ? mft_adaptive_avg_pool3d_backward(a, x) : NULL;
        mft_tensor *ind = NULL, *m = mft_adaptive_max_pool3d_with_indices(x, oo, &ind);
        mft_tensor *gm = m ? mft_adaptive_max_pool3d_backward(m, x, ind) : NULL;
        CHECK_MSG(a && ga && m && ind && gm, "empty batch: %s", mft_last_error_message());
        const int64_t want[5] = {0, 2, 2, 3, 2};
        CHECK(a && tu_has_sizes(a, 5, want) && m && tu_has_sizes(m, 5, want));
        CHECK(ga && tu_has_sizes(ga, 5, z5) && gm && tu_has_sizes(gm, 5, z5));
        CHECK(a && mft_tensor_format(a) == fmt && gm && mft_tensor_format(gm) == fmt);
        mft_tensor *arr[] = {x, a, ga, ind, m, gm};
        for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
    }

    /* N = 1 made by select + unsqueeze of an NDHWC tensor, and the unbatched
     * (C, D, H, W) form: the values of the contiguous N = 1 input */
    const int64_t sz[5] = {3, 4, 5, 6, 7}, o[3] = {2, 4, 3};
    mft_tensor *big = mft_randn(5, sz, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *sel = mft_select(big, 0, 1), *x = mft_unsqueeze(sel, 0);
    mft_tensor *xc = mft_contiguous(x, MFT_CONTIGUOUS);
    mft_tensor *ya = mft_adaptive_avg_pool3d(x, o), *yac = mft_adaptive_avg_pool3d(xc, o);
    mft_tensor *i1 = NULL, *ym = mft_adaptive_max_pool3d_with_indices(x, o, &i1);
    mft_tensor *i2 = NULL, *ymc = mft_adaptive_max_pool3d_with_indices(xc, o, &i2);
    mft_tensor *yu = mft_adaptive_avg_pool3d(sel, o); /* (C, D, H, W) */
    mft_tensor *iu = NULL, *ymu = mft_adaptive_max_pool3d_with_indices(sel, o, &iu);
    CHECK(ya && yac && ym && ymc && i1 && i2 && yu && ymu && iu);
    if (ya && yac && ym && ymc && i1 && i2 && yu && ymu && iu) {
        CHECK(mft_tensor_hash(ym) == mft_tensor_hash(ymc) && mft_tensor_hash(i1) == mft_tensor_hash(i2));
        mft_tensor *ymc0 = mft_select(ymc, 0, 0), *i20 = mft_select(i2, 0, 0);
        CHECK(ymc0 && i20 && mft_tensor_hash(ymu) == mft_tensor_hash(ymc0) &&
              mft_tensor_hash(iu) == mft_tensor_hash(i20));
        mft_tensor_release(ymc0);
        mft_tensor_release(i20);
        CHECK(mft_tensor_ndim(yu) == 4 && packed_in(yu, MFT_CONTIGUOUS) && packed_in(ymu, MFT_CONTIGUOUS) &&
              packed_in(iu, MFT_CONTIGUOUS));
        int64_t idx[5] = {0}, j[4];
        do {
            for (int d = 0; d < 4; d++) j[d] = idx[d + 1];
            const double v = mft_tensor_get(yac, idx);
            CHECK(same_value(mft_tensor_get(ya, idx), v, 1e-6));
            CHECK(same_value(mft_tensor_get(yu, j), v, 1e-6));
        } while (tu_next_index(5, mft_tensor_sizes(yac), idx));
        mft_tensor *gu = mft_adaptive_avg_pool3d_backward(yu, sel);
        mft_tensor *gmu = mft_adaptive_max_pool3d_backward(ymu, sel, iu);
        CHECK(gu && gmu && mft_tensor_ndim(gu) == 4 && packed_in(gu, MFT_CONTIGUOUS) &&
              packed_in(gmu, MFT_CONTIGUOUS));
        mft_tensor_release(gu);
        mft_tensor_release(gmu);
    }
    mft_tensor *arr[] = {big, sel, x, xc, ya, yac, i1, ym, i2, ymc, yu, iu, ymu};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
}

/* Adaptive 3-D pools give the same bits at 1 and 2 threads (forward,
 * indices, both backward functions), NCDHW and NDHWC; each runs its own
 * format's kernel (the op's name, nchw / nhwc) with no conversion, and the
 * results and gradients are packed in x's format. */
static void test_adaptive3d_threads(void) {
    const int64_t sz[5] = {2, 32, 12, 20, 20}, o[3] = {5, 7, 6};
    const int before = mft_num_threads();
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        const char *tail = f ? ".nhwc.f32" : ".nchw.f32";
        mft_tensor *x = mft_randn(5, sz, MFT_F32, fmt, 5 + (uint64_t)f);
        uint64_t h[2][5];
        for (int t = 0; t < 2; t++) {
            mft_set_num_threads(t + 1);
            char want[64];
            mft_tensor *a = mft_adaptive_avg_pool3d(x, o);
            snprintf(want, sizeof want, "adaptive_avg_pool3d%s", tail);
            CHECK_MSG(a && mft_dispatch_last()->conversions == 0 &&
                          strcmp(mft_dispatch_last()->kernel, want) == 0,
                      "ran %s, want %s", mft_dispatch_last()->kernel, want);
            mft_tensor *ga = mft_adaptive_avg_pool3d_backward(a, x);
            snprintf(want, sizeof want, "adaptive_avg_pool3d_backward%s", tail);
            CHECK_MSG(ga && mft_dispatch_last()->conversions == 0 &&
                          strcmp(mft_dispatch_last()->kernel, want) == 0,
                      "ran %s, want %s", mft_dispatch_last()->kernel, want);
            mft_tensor *ind = NULL, *m = mft_adaptive_max_pool3d_with_indices(x, o, &ind);
            snprintf(want, sizeof want, "adaptive_max_pool3d%s", tail);
            CHECK_MSG(m && mft_dispatch_last()->conversions == 0 &&
                          strcmp(mft_dispatch_last()->kernel, want) == 0,
                      "ran %s, want %s", mft_dispatch_last()->kernel, want);
            mft_tensor *gm = mft_adaptive_max_pool3d_backward(m, x, ind);
            snprintf(want, sizeof want, "max_pool3d_backward%s", tail);
            CHECK_MSG(gm && mft_dispatch_last()->conversions == 0 &&
                          strcmp(mft_dispatch_last()->kernel, want) == 0,
                      "ran %s, want %s", mft_dispatch_last()->kernel, want);
            CHECK(a && packed_in(a, fmt) && ga && packed_in(ga, fmt) && m && packed_in(m, fmt) &&
                  ind && packed_in(ind, fmt) && gm && packed_in(gm, fmt));
            h[t][0] = mft_tensor_hash(a);
            h[t][1] = mft_tensor_hash(ga);
            h[t][2] = mft_tensor_hash(m);
            h[t][3] = mft_tensor_hash(ind);
            h[t][4] = mft_tensor_hash(gm);
            mft_tensor *arr[] = {a, ga, ind, m, gm};
            for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
        }
        CHECK_MSG(memcmp(h[0], h[1], sizeof h[0]) == 0, "%s: 1 and 2 threads differ",
                  mft_format_name(fmt));
        mft_tensor_release(x);
    }
    /* grad_out in the other format: converted, grad_x still in x's format
     * and equal to the one from a grad_out in x's format */
    mft_tensor *x = mft_randn(5, sz, MFT_F32, MFT_CHANNELS_LAST, 8);
    mft_tensor *a = mft_adaptive_avg_pool3d(x, o);
    mft_tensor *ac = a ? mft_contiguous(a, MFT_CONTIGUOUS) : NULL;
    mft_tensor *g1 = a ? mft_adaptive_avg_pool3d_backward(a, x) : NULL;
    mft_tensor *g2 = ac ? mft_adaptive_avg_pool3d_backward(ac, x) : NULL;
    CHECK(g1 && g2 && packed_in(g2, MFT_CHANNELS_LAST) && mft_tensor_hash(g1) == mft_tensor_hash(g2));
    mft_tensor *arr[] = {x, a, ac, g1, g2};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
    mft_set_num_threads(before);
}

/* gradcheck through the tape (F64, central differences) of the 3-D
 * adaptive pools: NCDHW, NDHWC and unbatched inputs, outputs smaller than,
 * larger than and as large as the input, global pooling. Then one recorded
 * forward per op and format: one node, named as the op (the tape's dot),
 * the gradient in x's format with no conversion by the engine, and equal
 * bit for bit to the public backward function's. */
typedef struct {
    bool is_max;
    int64_t out[3];
} a3_ctx;
static mft_tensor *a3_fn(void *vctx, mft_tensor *const *in) {
    const a3_ctx *c = vctx;
    return c->is_max ? mft_adaptive_max_pool3d(in[0], c->out) : mft_adaptive_avg_pool3d(in[0], c->out);
}

static bool dot_has(const char *needle) {
    FILE *f = tmpfile();
    if (!f) return false;
    bool found = false;
    if (mft_tape_to_dot(f) == MFT_OK) {
        char buf[4096];
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        found = strstr(buf, needle) != NULL;
    }
    fclose(f);
    return found;
}

static void test_adaptive3d_autograd(void) {
    static const int64_t outs[][3] = {{2, 3, 2}, {1, 1, 1}, {5, 7, 4}, {3, 1, 3}};
    const int64_t xs5[5] = {2, 3, 4, 5, 3}, xs4[4] = {3, 4, 5, 3};
    int runs = 0;
    for (int is_max = 0; is_max < 2; is_max++)
        for (size_t o = 0; o < sizeof outs / sizeof *outs; o++)
            for (int lay = 0; lay < 3; lay++) {
                a3_ctx c = {is_max != 0, {outs[o][0], outs[o][1], outs[o][2]}};
                mft_tensor *x = lay == 2 ? mft_randn(4, xs4, MFT_F64, MFT_CONTIGUOUS, 60 + o)
                                         : mft_randn(5, xs5, MFT_F64,
                                                     lay ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, 50 + o);
                mft_tensor_set_requires_grad(x, true);
                mft_gradcheck_opts opts = {1e-6, 1e-6, 1e-5, 99 + o};
                mft_status st = mft_gradcheck(a3_fn, &c, 1, &x, &opts);
                CHECK_MSG(st == MFT_OK, "gradcheck adaptive_%s_pool3d out %lld,%lld,%lld layout %d: %s",
                          is_max ? "max" : "avg", (long long)c.out[0], (long long)c.out[1],
                          (long long)c.out[2], lay, mft_last_error_message());
                runs += st == MFT_OK;
                mft_clear_error();
                mft_tensor_release(x);
            }
    CHECK_EQ_I(runs, 24);
    /* the recorded node and its gradient */
    const int64_t o[3] = {2, 3, 2};
    for (int is_max = 0; is_max < 2; is_max++)
        for (int f = 0; f < 2; f++) {
            const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x = mft_randn(5, xs5, MFT_F32, fmt, 70 + (uint64_t)f);
            mft_tensor_set_requires_grad(x, true);
            mft_autograd_conversions_reset();
            CHECK(mft_tape_begin() == MFT_OK);
            mft_tensor *ind = NULL;
            mft_tensor *y = is_max ? mft_adaptive_max_pool3d_with_indices(x, o, &ind)
                                   : mft_adaptive_avg_pool3d(x, o);
            CHECK(y && mft_tensor_requires_grad(y) && !mft_tensor_is_leaf(y));
            CHECK_EQ_I(mft_tape_size(), 1);
            /* the node's label starts with its name (then the kernel's) */
            CHECK_MSG(dot_has(is_max ? "label=\"adaptive_max_pool3d\\n"
                                     : "label=\"adaptive_avg_pool3d\\n"),
                      "the tape's node is not named adaptive_%s_pool3d", is_max ? "max" : "avg");
            /* grad_out in the other format */
            mft_tensor *g = y ? mft_randn(5, mft_tensor_sizes(y), MFT_F32,
                                          f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST, 71) : NULL;
            CHECK(g && mft_backward(y, g) == MFT_OK);
            mft_tape_end();
            CHECK_EQ_I(mft_autograd_conversions(), 0);
            const mft_tensor *gx = mft_tensor_grad(x);
            mft_tensor_set_requires_grad(x, false);
            mft_tensor *want = NULL;
            if (g && y) {
                if (is_max) {
                    mft_tensor *i2 = NULL, *y2 = mft_adaptive_max_pool3d_with_indices(x, o, &i2);
                    CHECK(ind && i2 && mft_tensor_hash(ind) == mft_tensor_hash(i2));
                    want = mft_adaptive_max_pool3d_backward(g, x, i2);
                    mft_tensor_release(y2);
                    mft_tensor_release(i2);
                } else {
                    want = mft_adaptive_avg_pool3d_backward(g, x);
                }
            }
            CHECK_MSG(gx && want && packed_in(gx, fmt) && mft_tensor_hash(gx) == mft_tensor_hash(want),
                      "adaptive_%s_pool3d %s: tape gradient", is_max ? "max" : "avg",
                      mft_format_name(fmt));
            mft_tensor *arr[] = {x, ind, y, g, want};
            for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
        }
}

/* User kernels registered for the three adaptive 3-D ops replace the
 * built-in ones through the dispatcher and receive what the header
 * promises: the output size in mft_adaptive_pool_params (all three
 * entries), the op's inputs and outputs (rank 5, the output sizes, max: an
 * I64 indices output) packed in the key's format. */
static struct {
    int calls, nin, nout;
    int64_t out[3], ysz[5];
    mft_dtype odt1;
    bool packed;
} g_uk;
static void a3_user_kernel(const mft_kernel_args *a) {
    const mft_adaptive_pool_params *p = a->params;
    g_uk.calls++;
    g_uk.nin = a->ninputs;
    g_uk.nout = a->noutputs;
    for (int i = 0; i < 3; i++) g_uk.out[i] = p ? p->out[i] : -1;
    memcpy(g_uk.ysz, mft_tensor_sizes(a->outputs[0]), sizeof g_uk.ysz);
    g_uk.odt1 = a->noutputs > 1 ? mft_tensor_dtype(a->outputs[1]) : MFT_F32;
    g_uk.packed = mft_tensor_ndim(a->inputs[0]) == 5 &&
                  mft_tensor_is_contiguous(a->inputs[0], mft_tensor_format(a->outputs[0]));
    mft_fill_(a->outputs[0], 7.0);
    if (a->noutputs > 1) mft_fill_(a->outputs[1], 0.0);
}

static void test_adaptive3d_user_kernel(void) {
    const int64_t sz[5] = {2, 3, 4, 5, 6}, o[3] = {3, 2, 7};
    static const char *const ops[3] = {"adaptive_avg_pool3d", "adaptive_max_pool3d",
                                       "adaptive_avg_pool3d_backward"};
    for (int k = 0; k < 3; k++)
        for (int f = 0; f < 2; f++) {
            const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x = mft_randn(5, sz, MFT_F32, fmt, 3);
            mft_tensor *g = mft_adaptive_avg_pool3d(x, o);
            CHECK(mft_dispatch_register(ops[k], fmt, MFT_F32, "user.a3", a3_user_kernel) == MFT_OK);
            memset(&g_uk, 0, sizeof g_uk);
            mft_tensor *ind = NULL, *r = k == 0   ? mft_adaptive_avg_pool3d(x, o)
                                        : k == 1 ? mft_adaptive_max_pool3d_with_indices(x, o, &ind)
                                                 : mft_adaptive_avg_pool3d_backward(g, x);
            const mft_dispatch_info *d = mft_dispatch_last();
            CHECK_MSG(r && g_uk.calls == 1 && d->user && strcmp(d->op, ops[k]) == 0 &&
                          strcmp(d->kernel, "user.a3") == 0 && d->conversions == 0,
                      "%s %s: user kernel not run (%s)", ops[k], mft_format_name(fmt),
                      mft_last_error_message());
            CHECK(g_uk.out[0] == 3 && g_uk.out[1] == 2 && g_uk.out[2] == 7);
            CHECK(g_uk.nin == 1 && g_uk.nout == (k == 1 ? 2 : 1) && g_uk.packed);
            if (k == 1) CHECK(g_uk.odt1 == MFT_I64 && ind != NULL);
            const int64_t *want = k == 2 ? sz : (const int64_t[5]){2, 3, 3, 2, 7};
            CHECK(memcmp(g_uk.ysz, want, sizeof g_uk.ysz) == 0);
            CHECK(r && packed_in(r, fmt) && mft_tensor_get(r, (const int64_t[5]){1, 2, 1, 1, 1}) == 7.0);
            CHECK(mft_dispatch_unregister(ops[k], fmt, MFT_F32) == MFT_OK);
            mft_tensor *arr[] = {x, g, ind, r};
            for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
        }
}

/* Argument errors of the adaptive 3-D functions: status and a message that
 * names the function and the offending values. */
#define EXPECT_MSG(call, status, fname, part)                                                \
    do {                                                                                     \
        mft_clear_error();                                                                   \
        mft_tensor *r_ = (call);                                                             \
        CHECK_MSG(r_ == NULL, "%s succeeded", #call);                                        \
        mft_tensor_release(r_);                                                              \
        CHECK_MSG(mft_last_error() == (status), "%s: status %s (%s)", #call,                 \
                  mft_status_str(mft_last_error()), mft_last_error_message());               \
        CHECK_MSG(strncmp(mft_last_error_message(), fname ": ", strlen(fname) + 2) == 0 &&   \
                      strstr(mft_last_error_message(), part) != NULL,                        \
                  "%s: message '%s' does not name " fname " and '%s'", #call,                \
                  mft_last_error_message(), part);                                           \
        mft_clear_error();                                                                   \
    } while (0)

static void test_adaptive3d_errors(void) {
    const int64_t s5[5] = {2, 3, 4, 5, 6}, s3[3] = {2, 3, 4}, s6[6] = {1, 2, 3, 4, 5, 6};
    const int64_t o[3] = {2, 3, 2}, o0[3] = {2, 0, 2}, oneg[3] = {-1, 2, 2},
                  obig[3] = {1, 1, ((int64_t)1 << 30) + 1};
    mft_tensor *x = mft_randn(5, s5, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *x3 = mft_randn(3, s3, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *x6 = mft_zeros(6, s6, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xi = mft_zeros(5, s5, MFT_I32, MFT_CONTIGUOUS);
    const int64_t z[5] = {2, 3, 0, 5, 6};
    mft_tensor *xz = mft_zeros(5, z, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *ind = NULL, *y = mft_adaptive_max_pool3d_with_indices(x, o, &ind);
    mft_tensor *a = mft_adaptive_avg_pool3d(x, o);
    mft_tensor *y64 = y ? mft_to_dtype(y, MFT_F64) : NULL, *indf = ind ? mft_to_dtype(ind, MFT_F32) : NULL;
    const int64_t gb[5] = {2, 4, 2, 3, 2}, g4[4] = {3, 2, 3, 2}, g0[5] = {2, 3, 3, 3, 2};
    mft_tensor *gbad = mft_zeros(5, gb, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *grank = mft_zeros(4, g4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *gok = mft_zeros(5, g0, MFT_F32, MFT_CONTIGUOUS);
    CHECK(x && x3 && x6 && xi && xz && y && ind && a && y64 && indf && gbad && grank && gok);
    static const char *const fns[3] = {"mft_adaptive_avg_pool3d", "mft_adaptive_max_pool3d",
                                       "mft_adaptive_max_pool3d_with_indices"};
    for (int k = 0; k < 3; k++) {
        mft_tensor *ri = NULL;
#define A3(xx, oo) (k == 0 ? mft_adaptive_avg_pool3d(xx, oo)                                       \
                   : k == 1 ? mft_adaptive_max_pool3d(xx, oo)                                      \
                            : mft_adaptive_max_pool3d_with_indices(xx, oo, &ri))
        const char *fn = fns[k];
        char want[64];
        mft_clear_error();
        mft_tensor *r = A3(NULL, o);
        snprintf(want, sizeof want, "%s: ", fn);
        CHECK_MSG(!r && !ri && mft_last_error() == MFT_ERR_NULL &&
                      strncmp(mft_last_error_message(), want, strlen(want)) == 0 &&
                      strstr(mft_last_error_message(), "'x'"),
                  "%s(NULL): %s", fn, mft_last_error_message());
        struct {
            const mft_tensor *x;
            const int64_t *o;
            mft_status st;
            const char *part;
        } bad[] = {
            {x, NULL, MFT_ERR_NULL, "'out'"},
            {x, o0, MFT_ERR_INVALID, "[2,0,2]"},
            {x, oneg, MFT_ERR_INVALID, "[-1,2,2]"},
            {x, obig, MFT_ERR_INVALID, "1073741825"},
            {x3, o, MFT_ERR_RANK, "rank 3"},
            {x6, o, MFT_ERR_RANK, "rank 6"},
            {xi, o, MFT_ERR_DTYPE, "i32"},
            {xz, o, MFT_ERR_SHAPE, "[2,3,0,5,6]"},
        };
        for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
            mft_clear_error();
            ri = NULL;
            r = A3(bad[b].x, bad[b].o);
            CHECK_MSG(!r && !ri && mft_last_error() == bad[b].st &&
                          strncmp(mft_last_error_message(), want, strlen(want)) == 0 &&
                          strstr(mft_last_error_message(), bad[b].part),
                      "%s case %zu: status %s, '%s' (want '%s')", fn, b,
                      mft_status_str(mft_last_error()), mft_last_error_message(), bad[b].part);
            mft_tensor_release(r);
            mft_tensor_release(ri);
        }
#undef A3
    }
    EXPECT_MSG(mft_adaptive_max_pool3d_with_indices(x, o, NULL), MFT_ERR_NULL,
               "mft_adaptive_max_pool3d_with_indices", "'indices'");
    /* backward */
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(NULL, x), MFT_ERR_NULL,
               "mft_adaptive_avg_pool3d_backward", "'grad_out'");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(a, NULL), MFT_ERR_NULL,
               "mft_adaptive_avg_pool3d_backward", "'x'");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(gbad, x), MFT_ERR_SHAPE,
               "mft_adaptive_avg_pool3d_backward", "[2,4,2,3,2]");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(grank, x), MFT_ERR_SHAPE,
               "mft_adaptive_avg_pool3d_backward", "[3,2,3,2]");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(y64, x), MFT_ERR_DTYPE,
               "mft_adaptive_avg_pool3d_backward", "f64");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(a, x3), MFT_ERR_RANK,
               "mft_adaptive_avg_pool3d_backward", "rank 3");
    EXPECT_MSG(mft_adaptive_avg_pool3d_backward(a, xi), MFT_ERR_DTYPE,
               "mft_adaptive_avg_pool3d_backward", "i32");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(y, x, NULL), MFT_ERR_NULL,
               "mft_adaptive_max_pool3d_backward", "'indices'");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(NULL, x, ind), MFT_ERR_NULL,
               "mft_adaptive_max_pool3d_backward", "'grad_out'");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(y, x, indf), MFT_ERR_DTYPE,
               "mft_adaptive_max_pool3d_backward", "f32");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(gbad, x, ind), MFT_ERR_SHAPE,
               "mft_adaptive_max_pool3d_backward", "[2,4,2,3,2]");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(gok, x, ind), MFT_ERR_SHAPE,
               "mft_adaptive_max_pool3d_backward", "'indices'");
    EXPECT_MSG(mft_adaptive_max_pool3d_backward(y, x6, ind), MFT_ERR_RANK,
               "mft_adaptive_max_pool3d_backward", "rank 6");
    /* window arithmetic that would overflow int64 (a broadcast input of W =
     * 2^40 pooled to 2^30): refused before any allocation */
    {
        const int64_t one[5] = {1, 1, 1, 1, 1}, huge[5] = {1, 1, 1, 1, (int64_t)1 << 40},
                      gs[5] = {1, 1, 1, 1, (int64_t)1 << 30}, ob[3] = {1, 1, (int64_t)1 << 30};
        mft_tensor *t = mft_zeros(5, one, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *xh = t ? mft_expand(t, 5, huge) : NULL, *gh = t ? mft_expand(t, 5, gs) : NULL;
        CHECK(xh && gh);
        EXPECT_MSG(mft_adaptive_avg_pool3d(xh, ob), MFT_ERR_OVERFLOW, "mft_adaptive_avg_pool3d",
                   "[1,1,1073741824] overflow");
        EXPECT_MSG(mft_adaptive_max_pool3d(xh, ob), MFT_ERR_OVERFLOW, "mft_adaptive_max_pool3d",
                   "[1,1,1,1,1099511627776]");
        EXPECT_MSG(mft_adaptive_avg_pool3d_backward(gh, xh), MFT_ERR_OVERFLOW,
                   "mft_adaptive_avg_pool3d_backward", "[1,1,1073741824] overflow");
        mft_tensor_release(gh);
        mft_tensor_release(xh);
        mft_tensor_release(t);
    }
    /* the sizes that work are accepted (the checks are not vacuous) */
    mft_tensor *ok1 = mft_adaptive_avg_pool3d_backward(gok, x);
    mft_tensor *ok2 = mft_adaptive_max_pool3d(x, (const int64_t[3]){1, 1, (int64_t)1 << 10});
    CHECK_MSG(ok1 && ok2, "%s", mft_last_error_message());
    mft_tensor *arr[] = {x, x3, x6, xi, xz, ind, y, a, y64, indf, gbad, grank, gok, ok1, ok2};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
}

/* ------------------------------------------------------------------ (d) errors */
#define EXPECT_FAIL(call, status, fname)                                                     \
    do {                                                                                     \
        mft_clear_error();                                                                   \
        mft_tensor *r_ = (call);                                                             \
        CHECK_MSG(r_ == NULL, "%s succeeded", #call);                                        \
        mft_tensor_release(r_);                                                              \
        CHECK_MSG(mft_last_error() == (status), "%s: status %s (%s)", #call,                 \
                  mft_status_str(mft_last_error()), mft_last_error_message());               \
        CHECK_MSG(strncmp(mft_last_error_message(), fname ": ", strlen(fname) + 2) == 0,     \
                  "%s: message '%s' does not name " fname, #call, mft_last_error_message()); \
        mft_clear_error();                                                                   \
    } while (0)

static void test_errors(void) {
    int64_t s4[4] = {2, 3, 6, 6}, s5[5] = {2, 3, 4, 4, 4};
    mft_tensor *x = mft_randn(4, s4, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *x5 = mft_randn(5, s5, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *xi = mft_zeros(4, s4, MFT_I32, MFT_CONTIGUOUS);
    int64_t sz3[3] = {2, 3, 2}, k3[1] = {3};
    mft_tensor *x3 = mft_randn(3, sz3, MFT_F64, MFT_CONTIGUOUS, 4);
    int64_t k[3] = {2, 2, 2}, bad_k[3] = {0, 2, 2}, big_p[3] = {2, 0, 0}, neg_s[3] = {-1, 1, 1};
    int64_t o[2] = {3, 3}, o0[2] = {0, 3};
    mft_tensor *ind = NULL, *y = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &ind);
    mft_tensor *ind5 = NULL, *y5 = mft_max_pool3d_with_indices(x5, k, NULL, NULL, NULL, false, &ind5);
    mft_tensor *yf = mft_to_dtype(ind, MFT_F32);
    mft_tensor *y64 = mft_to_dtype(y, MFT_F64);
    int64_t s4b[4] = {2, 3, 4, 3};
    mft_tensor *gbad = mft_zeros(4, s4b, MFT_F32, MFT_CONTIGUOUS);
    CHECK(y && ind && y5 && ind5);

    EXPECT_FAIL(mft_max_pool2d_backward(NULL, x, ind), MFT_ERR_NULL, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(y, NULL, ind), MFT_ERR_NULL, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(y, x, NULL), MFT_ERR_NULL, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(y, x, yf), MFT_ERR_DTYPE, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(y64, x, ind), MFT_ERR_DTYPE, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(gbad, x, ind), MFT_ERR_SHAPE, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool2d_backward(y, xi, ind), MFT_ERR_DTYPE, "mft_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool3d_backward(y, x5, ind), MFT_ERR_SHAPE, "mft_max_pool3d_backward");
    EXPECT_FAIL(mft_avg_pool2d_backward(gbad, x, k, NULL, NULL, false, true, 0), MFT_ERR_SHAPE,
                "mft_avg_pool2d_backward");
    EXPECT_FAIL(mft_avg_pool2d_backward(y, x, bad_k, NULL, NULL, false, true, 0), MFT_ERR_INVALID,
                "mft_avg_pool2d_backward");
    { /* a negative divisor_override divides, as PyTorch (forward and backward):
       * the gradient with -2 is minus the gradient with 2, exactly */
        mft_tensor *gn = mft_avg_pool2d_backward(y, x, k, NULL, NULL, false, true, -2);
        mft_tensor *gp = mft_avg_pool2d_backward(y, x, k, NULL, NULL, false, true, 2);
        mft_tensor *sum = gn && gp ? mft_add(gn, gp) : NULL;
        mft_tensor *zero = sum ? mft_zeros_like(sum, MFT_PRESERVE) : NULL;
        CHECK(sum && zero && mft_tensor_hash(sum) == mft_tensor_hash(zero));
        CHECK(gp && mft_tensor_hash(gp) != mft_tensor_hash(zero)); /* not vacuous */
        mft_tensor_release(gn);
        mft_tensor_release(gp);
        mft_tensor_release(sum);
        mft_tensor_release(zero);
    }
    EXPECT_FAIL(mft_avg_pool3d(x5, bad_k, NULL, NULL, false, true, 0), MFT_ERR_INVALID,
                "mft_avg_pool3d");
    EXPECT_FAIL(mft_max_pool3d(x5, k, NULL, big_p, NULL, false), MFT_ERR_INVALID, "mft_max_pool3d");
    EXPECT_FAIL(mft_max_pool3d(x5, k, neg_s, NULL, NULL, false), MFT_ERR_INVALID, "mft_max_pool3d");
    EXPECT_FAIL(mft_max_pool3d(x3, k, NULL, NULL, NULL, false), MFT_ERR_RANK, "mft_max_pool3d");
    EXPECT_FAIL(mft_max_pool3d(x5, NULL, NULL, NULL, NULL, false), MFT_ERR_NULL, "mft_max_pool3d");
    EXPECT_FAIL(mft_max_pool3d_with_indices(x5, k, NULL, NULL, NULL, false, NULL), MFT_ERR_NULL,
                "mft_max_pool3d_with_indices");
    EXPECT_FAIL(mft_avg_pool3d_backward(gbad, x5, k, NULL, NULL, false, true, 0), MFT_ERR_SHAPE,
                "mft_avg_pool3d_backward");
    EXPECT_FAIL(mft_adaptive_avg_pool2d(x, o0), MFT_ERR_INVALID, "mft_adaptive_avg_pool2d");
    EXPECT_FAIL(mft_adaptive_avg_pool2d(x, NULL), MFT_ERR_NULL, "mft_adaptive_avg_pool2d");
    EXPECT_FAIL(mft_adaptive_max_pool2d(x5, o), MFT_ERR_RANK, "mft_adaptive_max_pool2d");
    EXPECT_FAIL(mft_adaptive_max_pool2d(xi, o), MFT_ERR_DTYPE, "mft_adaptive_max_pool2d");
    EXPECT_FAIL(mft_adaptive_avg_pool2d_backward(y5, x), MFT_ERR_SHAPE,
                "mft_adaptive_avg_pool2d_backward");
    EXPECT_FAIL(mft_adaptive_max_pool2d_backward(y, x, gbad), MFT_ERR_DTYPE,
                "mft_adaptive_max_pool2d_backward");
    EXPECT_FAIL(mft_max_pool1d(x, k, NULL, NULL, NULL, false), MFT_ERR_RANK, "mft_max_pool1d");
    EXPECT_FAIL(mft_avg_pool1d(x3, k3, NULL, NULL, false, true), MFT_ERR_SHAPE, "mft_avg_pool1d");
    EXPECT_FAIL(mft_max_pool1d_backward(y, x3, ind), MFT_ERR_DTYPE, "mft_max_pool1d_backward");
    /* errors leave no live tensors behind */
    mft_tensor *arr[] = {x, x5, xi, ind, y, ind5, y5, yf, y64, gbad, x3};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
}

/* ------------------------------------------------------------------ (e) out of memory */
static long long g_alloc_count, g_fail_at;
static void *fa_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (++g_alloc_count == g_fail_at) return NULL;
    size_t sz = (size + align - 1) / align * align;
    return aligned_alloc(align, sz ? sz : align);
}
static void fa_free(void *p, void *ctx) {
    (void)ctx;
    free(p);
}

/* Every allocation of each call fails in turn: the call returns NULL with
 * MFT_ERR_NOMEM naming it, or succeeds; nothing leaks either way. */
static void test_alloc_failures(void) {
    int64_t s4[4] = {2, 3, 6, 5}, s5[5] = {2, 3, 4, 4, 3}, s3[3] = {2, 3, 9}, k[3] = {2, 2, 2};
    int64_t o[2] = {2, 3};
    mft_tensor *x4 = mft_randn(4, s4, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *x5 = mft_randn(5, s5, MFT_F64, MFT_CHANNELS_LAST, 2);
    mft_tensor *x3 = mft_randn(3, s3, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *i4 = NULL, *y4 = mft_max_pool2d_with_indices(x4, k, NULL, NULL, NULL, false, &i4);
    mft_tensor *y4c = mft_contiguous(y4, MFT_CONTIGUOUS), *i4c = mft_contiguous(i4, MFT_CONTIGUOUS);
    mft_tensor *a5 = mft_avg_pool3d(x5, k, NULL, NULL, false, true, 0);
    mft_tensor *aa = mft_adaptive_avg_pool2d(x4, o);
    const int64_t o3[3] = {3, 2, 5};
    mft_tensor *aa3 = mft_adaptive_avg_pool3d(x5, o3);
    mft_tensor *aa3c = aa3 ? mft_contiguous(aa3, MFT_CONTIGUOUS) : NULL; /* converted by dispatch */
    CHECK(x4 && x5 && x3 && y4 && i4 && y4c && i4c && a5 && aa && aa3 && aa3c);
    const int64_t live0 = mft_live_tensors();
    static const char *const names[] = {"mft_max_pool3d_with_indices", "mft_max_pool2d_backward",
                                        "mft_avg_pool1d", "mft_adaptive_max_pool2d_with_indices",
                                        "mft_adaptive_avg_pool2d_backward", "mft_avg_pool3d_backward",
                                        "mft_adaptive_max_pool3d_with_indices",
                                        "mft_adaptive_avg_pool3d_backward", "mft_adaptive_avg_pool3d"};
    const mft_allocator fa = {fa_alloc, fa_free, NULL};
    for (int call = 0; call < 9; call++) {
        bool done = false;
        for (long long at = 1; at < 64 && !done; at++) {
            if (call == 8) { /* on the tape: the node's allocations fail too */
                mft_tensor_set_requires_grad(x5, true);
                CHECK(mft_tape_begin() == MFT_OK);
            }
            mft_set_allocator(&fa);
            g_alloc_count = 0;
            g_fail_at = at;
            mft_clear_error();
            mft_tensor *r = NULL, *ri = NULL;
            switch (call) {
            case 0: r = mft_max_pool3d_with_indices(x5, k, NULL, NULL, NULL, true, &ri); break;
            case 1: r = mft_max_pool2d_backward(y4c, x4, i4c); break;
            case 2: r = mft_avg_pool1d(x3, k, NULL, NULL, false, true); break;
            case 3: r = mft_adaptive_max_pool2d_with_indices(x4, o, &ri); break;
            case 4: r = mft_adaptive_avg_pool2d_backward(aa, x4); break;
            case 5: r = mft_avg_pool3d_backward(a5, x5, k, NULL, NULL, false, true, 0); break;
            case 6: r = mft_adaptive_max_pool3d_with_indices(x5, o3, &ri); break;
            case 7: r = mft_adaptive_avg_pool3d_backward(aa3c, x5); break;
            default: r = mft_adaptive_avg_pool3d(x5, o3); break; /* recorded */
            }
            const bool failed = g_alloc_count >= at;
            g_fail_at = 0;
            mft_set_allocator(NULL);
            if (call == 8) { /* one node when it succeeded, none when it failed */
                CHECK_EQ_I(mft_tape_size(), r ? 1 : 0);
                CHECK(!r || mft_tensor_requires_grad(r));
                mft_tape_end();
                mft_tensor_set_requires_grad(x5, false);
            }
            if (failed) {
                CHECK_MSG(r == NULL && ri == NULL && mft_last_error() == MFT_ERR_NOMEM,
                          "%s, allocation %lld failing: result %p, status %s", names[call], at,
                          (void *)r, mft_status_str(mft_last_error()));
                CHECK_MSG(strncmp(mft_last_error_message(), names[call], strlen(names[call])) == 0,
                          "%s: message '%s'", names[call], mft_last_error_message());
            } else {
                CHECK_MSG(r != NULL, "%s: %s", names[call], mft_last_error_message());
                done = true;
            }
            mft_tensor_release(r);
            mft_tensor_release(ri);
            CHECK_MSG(mft_live_tensors() == live0, "%s, allocation %lld failing: %lld tensors leak",
                      names[call], at, (long long)(mft_live_tensors() - live0));
        }
        CHECK_MSG(done, "%s never succeeded", names[call]);
    }
    mft_clear_error();
    mft_tensor *arr[] = {x4, x5, x3, i4, y4, y4c, i4c, a5, aa, aa3, aa3c};
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) mft_tensor_release(arr[i]);
}

/* adaptive_avg_pool2d to 1x1 (global pooling, its own NCHW F32 kernel that
 * sums 4 planes side by side): plane counts around multiples of 4, plane
 * sizes around the 16-float vector step, NCHW and NHWC, against a naive sum;
 * the same bits at 1 and 2 threads. */
static void test_global_avg(void) {
    static const int64_t ncs[][2] = {{1, 1}, {1, 3}, {1, 4}, {2, 5}, {3, 3}, {2, 8}};
    static const int64_t hws[][2] = {{1, 1}, {3, 5}, {4, 4}, {1, 17}, {5, 7}, {9, 13}};
    const int64_t o[2] = {1, 1};
    const int before = mft_num_threads();
    for (size_t a = 0; a < sizeof ncs / sizeof *ncs; a++)
        for (size_t b = 0; b < sizeof hws / sizeof *hws; b++)
            for (int cl = 0; cl < 2; cl++) {
                const int64_t sz[4] = {ncs[a][0], ncs[a][1], hws[b][0], hws[b][1]};
                mft_tensor *x0 = mft_empty(4, sz, MFT_F32, MFT_CONTIGUOUS);
                CHECK(x0 != NULL);
                if (!x0) return;
                float *xd = mft_tensor_data(x0);
                const int64_t P = sz[2] * sz[3], NP = sz[0] * sz[1];
                for (int64_t i = 0; i < NP * P; i++) xd[i] = (float)((i * 37) % 101) * 0.03f - 1.4f;
                mft_tensor *x = cl ? mft_contiguous(x0, MFT_CHANNELS_LAST) : x0;
                mft_set_num_threads(1);
                mft_tensor *y1 = mft_adaptive_avg_pool2d(x, o);
                mft_set_num_threads(2);
                mft_tensor *y2 = mft_adaptive_avg_pool2d(x, o);
                CHECK(y1 != NULL && y2 != NULL);
                if (y1 && y2) {
                    const int64_t *ys = mft_tensor_sizes(y1);
                    CHECK(mft_tensor_ndim(y1) == 4 && ys[0] == sz[0] && ys[1] == sz[1] &&
                          ys[2] == 1 && ys[3] == 1);
                    for (int64_t q = 0; q < NP; q++) {
                        double want = 0.0;
                        for (int64_t i = 0; i < P; i++) want += xd[q * P + i];
                        want /= (double)P;
                        const int64_t idx[4] = {q / sz[1], q % sz[1], 0, 0};
                        const double g1 = mft_tensor_get(y1, idx), g2 = mft_tensor_get(y2, idx);
                        CHECK_MSG(same_value(g1, want, 1e-6), "global avg %s %lldx%lldx%lldx%lld "
                                  "plane %lld: %g want %g", cl ? "nhwc" : "nchw",
                                  (long long)sz[0], (long long)sz[1], (long long)sz[2],
                                  (long long)sz[3], (long long)q, g1, want);
                        CHECK(g1 == g2);
                    }
                }
                mft_tensor_release(y1);
                mft_tensor_release(y2);
                if (cl) mft_tensor_release(x);
                mft_tensor_release(x0);
            }
    mft_set_num_threads(before);
}

/* One case of test_max_backward_windows: x (sizes xs, fmt, from seed)
 * pooled with windows p (relu fused or not), grad_out random with every
 * third element -0.0, index `bump` (if >= 0) moved 2^32 further; the windows
 * variant must give the scatter's grad_x bit for bit, in x's format and
 * strides, and (need_nonzero) some of it non-zero. A forward that refuses
 * the windows (too small, or relu over an empty window) is a failure unless
 * may_refuse. Returns whether the two were compared. */
static bool windows_case(const char *what, const int64_t xs[4], mft_format fmt, bool relu,
                         const mft_pool2d_params *p, uint64_t seed, int64_t bump, bool may_refuse,
                         bool need_nonzero) {
    mft_tensor *x = mft_randn(4, xs, MFT_F32, fmt, seed), *ind = NULL;
    mft_tensor *y = relu ? mft_relu_max_pool2d_with_indices(x, p->kernel, p->stride, p->padding,
                                                            p->dilation, p->ceil_mode, &ind)
                         : mft_max_pool2d_with_indices(x, p->kernel, p->stride, p->padding,
                                                       p->dilation, p->ceil_mode, &ind);
    if (!y && may_refuse) {
        mft_clear_error();
        mft_tensor_release(x);
        return false;
    }
    mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, fmt, seed + 1) : NULL;
    if (g) {
        float *gd = mft_tensor_data(g);
        for (int64_t i = 0; i < mft_tensor_numel(g); i += 3) gd[i] = -0.0f;
    }
    if (ind && bump >= 0) ((int64_t *)mft_tensor_data(ind))[bump] += (int64_t)1 << 32;
    mft_tensor *want = g ? mft_max_pool2d_backward(g, x, ind) : NULL;
    mft_tensor *got = g ? mft_max_pool2d_backward_windows(g, x, ind, p->kernel, p->stride,
                                                          p->padding, p->dilation, p->ceil_mode)
                        : NULL;
    CHECK_MSG(want && got, "%s: %s", what, mft_last_error_message());
    if (want && got) {
        const float *wd = mft_tensor_data(want);
        bool moved = false;
        for (int64_t i = 0; i < mft_tensor_numel(want); i++) moved |= wd[i] != 0.0f;
        CHECK_MSG(mft_tensor_format(got) == fmt &&
                      memcmp(mft_tensor_strides(got), mft_tensor_strides(want),
                             4 * sizeof(int64_t)) == 0,
                  "%s: grad_x not in x's format and strides", what);
        CHECK_MSG((moved || !need_nonzero) &&
                      memcmp(mft_tensor_data(got), wd, (size_t)mft_tensor_numel(x) * sizeof(float)) ==
                          0,
                  "%s (%s, C %lld, %lldx%lld, relu %d, k %lldx%lld s %lldx%lld p %lldx%lld d "
                  "%lldx%lld): grad_x differs from the scatter",
                  what, mft_format_name(fmt), (long long)xs[1], (long long)xs[2], (long long)xs[3],
                  (int)relu, (long long)p->kernel[0], (long long)p->kernel[1],
                  (long long)p->stride[0], (long long)p->stride[1], (long long)p->padding[0],
                  (long long)p->padding[1], (long long)p->dilation[0], (long long)p->dilation[1]);
    }
    mft_tensor_release(want);
    mft_tensor_release(got);
    mft_tensor_release(g);
    mft_tensor_release(y);
    mft_tensor_release(ind);
    mft_tensor_release(x);
    return true;
}

/* Windows kernel k, stride st, padding pd, dilation dl (NULL: PyTorch's
 * defaults), floor mode. */
static mft_pool2d_params windows_of(const int64_t k[2], const int64_t st[2], const int64_t pd[2],
                                    const int64_t dl[2]) {
    mft_pool2d_params p;
    memset(&p, 0, sizeof p);
    for (int d = 0; d < 2; d++) {
        p.kernel[d] = k[d];
        p.stride[d] = st ? st[d] : k[d];
        p.padding[d] = pd ? pd[d] : 0;
        p.dilation[d] = dl ? dl[d] : 1;
    }
    return p;
}

/* mft_max_pool2d_backward_windows (the tape's call; NHWC gathers) against
 * mft_max_pool2d_backward (scatter over the indices): bit-identical grad_x,
 * NHWC and NCHW, for the indices of max_pool2d and relu_max_pool2d (-1
 * where relu cut), windows that tile, leave gaps, overlap and hang over the
 * edge; grad_out of the wrong sizes for the windows is refused. */
static void test_max_backward_windows(void) {
    uint64_t rng = 0x5eed5eedull;
    int dense_cases = 0;
    for (int it = 0; it < 200; it++) {
        mft_pool2d_params p;
        memset(&p, 0, sizeof p);
        bool overlap = it % 4 == 3;
        for (int d = 0; d < 2; d++) {
            p.kernel[d] = tu_rng_int(&rng, 1, 3);
            p.dilation[d] = tu_rng_int(&rng, 1, 2);
            const int64_t span = p.dilation[d] * (p.kernel[d] - 1) + 1;
            p.stride[d] = overlap && span > 1 ? span - 1 : span + tu_rng_int(&rng, 0, 1);
            p.padding[d] = tu_rng_int(&rng, 0, p.kernel[d] / 2);
        }
        p.ceil_mode = tu_rng_int(&rng, 0, 1);
        static const int64_t chans[] = {16, 19, 32, 64, 3};
        const int64_t xs[4] = {tu_rng_int(&rng, 1, 3), chans[it % 5], tu_rng_int(&rng, 2, 12),
                               tu_rng_int(&rng, 2, 12)};
        const mft_format fmt = it % 3 == 2 ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
        const bool relu = it % 2;
        char what[48];
        snprintf(what, sizeof what, "case %d", it);
        if (windows_case(what, xs, fmt, relu, &p, 100 + (uint64_t)it, -1, true, false))
            dense_cases += fmt == MFT_CHANNELS_LAST && xs[1] >= 16 && !overlap;
    }
    CHECK_MSG(dense_cases >= 40, "only %d cases reached the gather", dense_cases);
    printf("max backward with windows: %d gathered NHWC cases\n", dense_cases);
    /* windows with no input element (W = 1, kernel 2 dilated by 2, padding
     * 1): the forward's index there is the window's start, h*W + 1, which
     * lies in the next row; both functions must add the gradient there.
     * Stride 3 tiles (the owner-window kernel), stride 2 overlaps. */
    for (int st = 2; st <= 3; st++)
        for (int cc = 16; cc <= 19; cc += 3) {
            const int64_t es[4] = {2, cc, 3, 1}, ek[2] = {1, 2}, ess[2] = {1, st},
                          ep[2] = {0, 1}, ed[2] = {1, 2};
            const mft_pool2d_params ew = windows_of(ek, ess, ep, ed);
            windows_case("empty windows", es, MFT_CHANNELS_LAST, false, &ew, 11, -1, false, true);
        }
    /* 2x2 / stride 2 in NCHW (the dense two-row kernel): odd and even
     * sizes, rows of more than 16 outputs with tails, relu's -1 indices */
    static const int64_t hw[][2] = {{7, 39}, {8, 32}, {5, 3}, {2, 66}, {9, 2}};
    for (int c = 0; c < 5; c++)
        for (int relu = 0; relu < 2; relu++) {
            const int64_t es[4] = {2, 3, hw[c][0], hw[c][1]}, k22[2] = {2, 2};
            const mft_pool2d_params w22 = windows_of(k22, NULL, NULL, NULL);
            windows_case("NCHW 2x2 windows", es, MFT_CONTIGUOUS, relu, &w22, 30 + (uint64_t)c, -1,
                         false, true);
        }
    /* an index past the plane (here 2^32 + a position of its window) adds
     * nothing in either function: it must not wrap into the window */
    {
        const int64_t es[4] = {1, 16, 5, 5}, k33[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
        const mft_pool2d_params w33 = windows_of(k33, s2, p1, NULL);
        /* (element 4's gradient is not one of the -0.0) */
        windows_case("an index past the plane", es, MFT_CHANNELS_LAST, false, &w33, 21, 4, false,
                     true);
    }
    /* the windowed scatter kernel, where the gather does not apply: rows
     * wider than the gather's 512 columns; 9 windows holding a row (more
     * than its 8); 3x3 / stride 2 and 9x1 / stride 1, with channel tails */
    {
        const int64_t wide[4] = {1, 19, 3, 520}, k33[2] = {3, 3}, s2[2] = {2, 2},
                      p1[2] = {1, 1};
        const mft_pool2d_params w33 = windows_of(k33, s2, p1, NULL);
        windows_case("rows wider than the gather's", wide, MFT_CHANNELS_LAST, false, &w33, 41, -1,
                     false, true);
        const int64_t tall[4] = {2, 21, 12, 5}, k91[2] = {9, 1}, s11[2] = {1, 1},
                      p40[2] = {4, 0};
        const mft_pool2d_params w91 = windows_of(k91, s11, p40, NULL);
        windows_case("9 windows per row", tall, MFT_CHANNELS_LAST, true, &w91, 42, -1, false,
                     true);
    }
    /* the windows must give grad_out's sizes */
    const int64_t xs[4] = {1, 16, 6, 6}, k2[2] = {2, 2}, k3[2] = {3, 3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 1), *ind = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k2, NULL, NULL, NULL, false, &ind);
    mft_tensor *bad = mft_max_pool2d_backward_windows(y, x, ind, k3, NULL, NULL, NULL, false);
    CHECK_MSG(!bad && strstr(mft_last_error_message(), "mft_max_pool2d_backward_windows") ==
                          mft_last_error_message(),
              "grad_out of 3x3 for 2x2 windows: %s", mft_last_error_message());
    mft_clear_error();
    CHECK(mft_max_pool2d_backward_windows(y, x, ind, NULL, NULL, NULL, NULL, false) == NULL &&
          mft_last_error() == MFT_ERR_NULL);
    mft_clear_error();
    mft_tensor_release(bad);
    mft_tensor_release(y);
    mft_tensor_release(ind);
    mft_tensor_release(x);
}

/* mft_max_pool2d_backward_windows with overlapping windows (NHWC, the
 * gathered kernel) while each allocation fails in turn: the call returns
 * NULL with MFT_ERR_NOMEM naming it, or its result equals the scatter's bit
 * for bit (a failing scratch allocation inside the kernel takes its
 * element-wise fallback); nothing leaks. */
static void test_windows_alloc_failures(void) {
    const int64_t xs[4] = {2, 19, 7, 9}, k33[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 5), *ind = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k33, s2, p1, NULL, false, &ind);
    mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, MFT_CHANNELS_LAST, 6) : NULL;
    mft_tensor *want = g ? mft_max_pool2d_backward(g, x, ind) : NULL;
    CHECK(x && y && ind && g && want);
    const int64_t live0 = mft_live_tensors();
    const mft_allocator fa = {fa_alloc, fa_free, NULL};
    int fell_back = 0;
    bool done = false;
    for (long long at = 1; at < 64 && !done && want; at++) {
        for (int th = 1; th <= 2; th++) {
            mft_set_num_threads(th);
            mft_set_allocator(&fa);
            g_alloc_count = 0;
            g_fail_at = at;
            mft_clear_error();
            mft_tensor *r = mft_max_pool2d_backward_windows(g, x, ind, k33, s2, p1, NULL, false);
            const bool failed = g_alloc_count >= at;
            g_fail_at = 0;
            mft_set_allocator(NULL);
            if (r) {
                CHECK_MSG(memcmp(mft_tensor_data(r), mft_tensor_data(want),
                                 (size_t)mft_tensor_numel(want) * sizeof(float)) == 0,
                          "allocation %lld failing, %d threads: grad_x differs from the scatter",
                          at, th);
                fell_back += failed;
                done = !failed;
            } else {
                CHECK_MSG(failed && mft_last_error() == MFT_ERR_NOMEM &&
                              strstr(mft_last_error_message(), "mft_max_pool2d_backward_windows") ==
                                  mft_last_error_message(),
                          "allocation %lld failing: status %s, '%s'", at,
                          mft_status_str(mft_last_error()), mft_last_error_message());
            }
            mft_tensor_release(r);
            CHECK_MSG(mft_live_tensors() == live0, "allocation %lld failing: %lld tensors leak", at,
                      (long long)(mft_live_tensors() - live0));
        }
    }
    mft_set_num_threads(0);
    mft_clear_error();
    CHECK_MSG(done, "never succeeded");
#if defined(__AVX512F__)
    CHECK_MSG(fell_back > 0, "no failing allocation reached the kernel's fallback");
#else
    (void)fell_back; /* the portable kernel has no allocating fast path to fall back from */
#endif
    mft_tensor *ts[] = {x, y, ind, g, want};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

int main(void) {
    RUN(test_golden);
    RUN(test_global_avg);
    RUN(test_sweep_f32);
    RUN(test_sweep_f64);
    RUN(test_edges);
    RUN(test_adaptive3d_edges);
    RUN(test_adaptive3d_threads);
    RUN(test_adaptive3d_autograd);
    RUN(test_adaptive3d_errors);
    RUN(test_adaptive3d_user_kernel);
    RUN(test_max_backward_windows);
    RUN(test_pool1d);
    RUN(test_threads_and_dispatch);
    RUN(test_errors);
    RUN(test_alloc_failures);
    RUN(test_windows_alloc_failures);
    TEST_MAIN_END();
}
