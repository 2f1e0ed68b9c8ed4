/* tests/ops/test_pad.c — mft_pad (dispatched op "pad"), mft_cat, mft_stack and
 * mft_split (ops/shape/):
 *   (a) pad values against a naive reference written here, over random
 *       shapes (rank 1-5), pads (negative ones too), modes, dtypes and input
 *       layouts (NCHW, NHWC, non-dense views); the result's sizes and tag;
 *   (b) the table's kernels and the F32 reference kernel called directly;
 *   (c) dispatch reporting (kernel names, conversions, fallback);
 *   (d) cat / stack / split values, layout and dtype rules;
 *   (e) argument errors (messages name the function and the values);
 *   golden cases from PyTorch 1.13 (tests/golden/pad_cases.txt, written by
 *   gen_pad.py): sizes, values, and which calls PyTorch rejects. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

/* ops/shape/: the reference kernels (F32 is not in the table). */
mft_kernel_fn mft__pad_reference(mft_dtype dt);

/* ------------------------------------------------------------------ helpers */
static const tu_layout_opts g_lay = {2, 2, false};

/* Naive source index (PyTorch's F.pad semantics); -1: constant fill. */
static int64_t naive_src(int64_t o, int64_t before, int64_t size, mft_pad_mode mode) {
    int64_t p = o - before;
    if (mode == MFT_PAD_CONSTANT) return p >= 0 && p < size ? p : -1;
    if (mode == MFT_PAD_REPLICATE) return p < 0 ? 0 : p >= size ? size - 1 : p;
    if (p < 0) p = -p;
    if (p >= size) p = 2 * (size - 1) - p;
    return p;
}

/* Checks y == pad(x) element by element. */
static bool check_pad_values(const mft_tensor *y, const mft_tensor *x, int npad,
                             const int64_t *pads, mft_pad_mode mode, double value,
                             const char *what) {
    const int nd = mft_tensor_ndim(x);
    int64_t bef[MFT_MAX_DIMS] = {0}, aft[MFT_MAX_DIMS] = {0}, osz[MFT_MAX_DIMS];
    for (int i = 0; i < npad / 2; i++) {
        bef[nd - 1 - i] = pads[2 * i];
        aft[nd - 1 - i] = pads[2 * i + 1];
    }
    for (int d = 0; d < nd; d++) osz[d] = mft_tensor_sizes(x)[d] + bef[d] + aft[d];
    if (!y) {
        CHECK_MSG(false, "%s: NULL result (%s)", what, mft_last_error_message());
        return false;
    }
    if (!tu_has_sizes(y, nd, osz)) {
        CHECK_MSG(false, "%s: wrong result sizes", what);
        return false;
    }
    if (tu_shape_numel(nd, osz) == 0) return true;
    int64_t idx[MFT_MAX_DIMS] = {0}, src[MFT_MAX_DIMS];
    do {
        bool inside = true;
        for (int d = 0; d < nd; d++) {
            src[d] = naive_src(idx[d], bef[d], mft_tensor_sizes(x)[d], mode);
            if (src[d] < 0) inside = false;
        }
        double want = value;
        if (inside) want = mft_tensor_get(x, src);
        else if (mft_tensor_dtype(x) == MFT_F32) want = (double)(float)value;
        double got = mft_tensor_get(y, idx);
        if (got != want) {
            char b[64];
            tu_fmt_list(b, sizeof b, nd, idx);
            CHECK_MSG(false, "%s: at %s got %.9g, want %.9g", what, b, got, want);
            return false;
        }
    } while (tu_next_index(nd, osz, idx));
    return true;
}

/* Random values in x (any layout), through a packed randn and mft_copy_. */
static void fill_random(mft_tensor *x, uint64_t seed) {
    const int nd = mft_tensor_ndim(x);
    const mft_dtype dt = mft_tensor_dtype(x);
    mft_tensor *r = tu_is_float(dt) ? mft_randn(nd, mft_tensor_sizes(x), dt, MFT_CONTIGUOUS, seed)
                                    : tu_iota(nd, mft_tensor_sizes(x), dt, (double)(seed % 50));
    CHECK(r && mft_copy_(x, r) == MFT_OK);
    mft_tensor_release(r);
}

/* An input of sizes in layout kind 0 (NCHW), 1 (NHWC when rank 3-5) or 2
 * (non-dense strided view), random values. */
static mft_tensor *make_x(int nd, const int64_t *sz, mft_dtype dt, int kind, uint64_t *rng) {
    mft_tensor *x;
    if (kind == 2) x = tu_strided_view(nd, sz, dt, -99.0, &g_lay, rng, NULL);
    else x = mft_empty(nd, sz, dt, kind == 1 && nd >= 3 && nd <= 5 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
    if (x) fill_random(x, tu_rng_next(rng));
    return x;
}

/* Draws pads for mode that PyTorch accepts; returns npad (or -1: none fits). */
static int draw_pads(int nd, const int64_t *sz, mft_pad_mode mode, uint64_t *rng, int64_t *pads) {
    int k;
    if (mode == MFT_PAD_CONSTANT) {
        k = (int)tu_rng_int(rng, 0, nd);
    } else {
        if (nd < 2) return -1;
        int kmin = nd - 2 > 1 ? nd - 2 : 1, kmax = nd - 1 < 3 ? nd - 1 : 3;
        if (kmin > kmax) return -1;
        k = (int)tu_rng_int(rng, kmin, kmax);
    }
    for (int i = 0; i < k; i++) {
        int64_t s = sz[nd - 1 - i];
        for (int j = 0; j < 2; j++) {
            int64_t v;
            if (mode == MFT_PAD_CONSTANT) v = tu_rng_int(rng, -s / 2 - 1, 3);
            else if (mode == MFT_PAD_REFLECT) v = tu_rng_int(rng, -(s - 1) / 2, s - 1);
            else v = tu_rng_int(rng, -(s - 1) / 2, 4);
            pads[2 * i + j] = v;
        }
        /* keep the output size valid */
        int64_t o = s + pads[2 * i] + pads[2 * i + 1];
        if (mode == MFT_PAD_CONSTANT ? o < 0 : o < 1) pads[2 * i] = pads[2 * i + 1] = 0;
    }
    return 2 * k;
}

/* ------------------------------------------------------------------ (a) values */
static void test_pad_random(void) {
    uint64_t rng = 12345;
    int checked = 0;
    for (int it = 0; it < 600; it++) {
        int nd = (int)tu_rng_int(&rng, 1, 5);
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 5);
        mft_pad_mode mode = (mft_pad_mode)tu_rng_int(&rng, 0, 2);
        mft_dtype dt = tu_rng_int(&rng, 0, 1) ? MFT_F32 : MFT_F64;
        int kind = (int)tu_rng_int(&rng, 0, 2);
        int64_t pads[2 * MFT_MAX_DIMS];
        int npad = draw_pads(nd, sz, mode, &rng, pads);
        if (npad < 0) continue;
        double value = mode == MFT_PAD_CONSTANT ? (double)tu_rng_int(&rng, -3, 3) + 0.1 : 0.0;
        mft_tensor *x = make_x(nd, sz, dt, kind, &rng);
        mft_tensor *y = mft_pad(x, npad, pads, mode, value);
        char what[160];
        snprintf(what, sizeof what, "it %d rank %d mode %d dtype %s kind %d npad %d", it, nd,
                 (int)mode, mft_dtype_name(dt), kind, npad);
        if (check_pad_values(y, x, npad, pads, mode, value, what)) checked++;
        if (y) {
            mft_format tag = mft_tensor_format(x);
            if (nd >= 3 && nd <= 5) {
                CHECK_MSG(mft_tensor_is_contiguous(y, tag) && mft_tensor_format(y) == tag,
                          "%s: result not packed in the input's tag", what);
            } else {
                CHECK_MSG(mft_tensor_is_contiguous(y, MFT_CONTIGUOUS), "%s: not contiguous", what);
            }
            CHECK(mft_tensor_dtype(y) == dt);
        }
        mft_tensor_release(y);
        mft_tensor_release(x);
    }
    CHECK_MSG(checked > 400, "only %d random cases checked", checked);
}

/* Fixed cases: known values, crop, empty results, integers, parallel sizes. */
static void test_pad_fixed(void) {
    /* 1-D reflect / replicate on [0,1,2,3] as (N=1, C=1, W=4) */
    const int64_t s3[3] = {1, 1, 4};
    mft_tensor *x = tu_iota(3, s3, MFT_F32, 0);
    const int64_t p[2] = {2, 3};
    mft_tensor *y = mft_pad(x, 2, p, MFT_PAD_REFLECT, 0);
    const double want_reflect[9] = {2, 1, 0, 1, 2, 3, 2, 1, 0};
    const double want_repl[9] = {0, 0, 0, 1, 2, 3, 3, 3, 3};
    for (int64_t i = 0; y && i < 9; i++) {
        int64_t idx[3] = {0, 0, i};
        CHECK_NEAR(mft_tensor_get(y, idx), want_reflect[i], 0);
    }
    mft_tensor_release(y);
    y = mft_pad(x, 2, p, MFT_PAD_REPLICATE, 0);
    for (int64_t i = 0; y && i < 9; i++) {
        int64_t idx[3] = {0, 0, i};
        CHECK_NEAR(mft_tensor_get(y, idx), want_repl[i], 0);
    }
    mft_tensor_release(y);
    /* negative pads crop */
    const int64_t pc[2] = {-1, -2};
    y = mft_pad(x, 2, pc, MFT_PAD_CONSTANT, 5);
    const int64_t s31[3] = {1, 1, 1};
    CHECK(tu_has_sizes(y, 3, s31));
    if (y) CHECK_NEAR(mft_tensor_get(y, (const int64_t[3]){0, 0, 0}), 1.0, 0);
    mft_tensor_release(y);
    /* size 0 output is allowed for constant */
    const int64_t pz[2] = {-2, -2};
    y = mft_pad(x, 2, pz, MFT_PAD_CONSTANT, 0);
    const int64_t s30[3] = {1, 1, 0};
    CHECK(tu_has_sizes(y, 3, s30));
    mft_tensor_release(y);
    mft_tensor_release(x);

    /* empty input padded with a constant: all fill */
    const int64_t se[2] = {3, 0};
    x = mft_empty(2, se, MFT_F64, MFT_CONTIGUOUS);
    const int64_t p11[2] = {1, 1};
    y = mft_pad(x, 2, p11, MFT_PAD_CONSTANT, 2.5);
    check_pad_values(y, x, 2, p11, MFT_PAD_CONSTANT, 2.5, "empty input");
    mft_tensor_release(y);
    mft_tensor_release(x);
    /* empty batch with reflect is allowed */
    const int64_t sb[3] = {0, 3, 4};
    x = mft_empty(3, sb, MFT_F32, MFT_CONTIGUOUS);
    y = mft_pad(x, 2, p11, MFT_PAD_REFLECT, 0);
    const int64_t sb2[3] = {0, 3, 6};
    CHECK_MSG(tu_has_sizes(y, 3, sb2), "%s", mft_last_error_message());
    mft_tensor_release(y);
    mft_tensor_release(x);
    /* rank 0: no pads, a copy */
    x = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 3.0);
    y = mft_pad(x, 0, NULL, MFT_PAD_CONSTANT, 0);
    CHECK(y && mft_tensor_ndim(y) == 0 && mft_tensor_get(y, NULL) == 3.0);
    mft_tensor_release(y);
    mft_tensor_release(x);

    /* integers (constant mode), NCHW and NHWC, value cast to the dtype */
    const mft_dtype idt[3] = {MFT_I32, MFT_I64, MFT_U8};
    const int64_t s4[4] = {2, 3, 4, 5}, p4[4] = {1, 2, -1, 1};
    uint64_t rng = 7;
    for (int k = 0; k < 3; k++)
        for (int kind = 0; kind < 3; kind++) {
            mft_tensor *xi = make_x(4, s4, idt[k], kind, &rng);
            y = mft_pad(xi, 4, p4, MFT_PAD_CONSTANT, 7);
            check_pad_values(y, xi, 4, p4, MFT_PAD_CONSTANT, 7, mft_dtype_name(idt[k]));
            CHECK(y && mft_tensor_dtype(y) == idt[k]);
            CHECK(y && mft_tensor_format(y) == mft_tensor_format(xi));
            mft_tensor_release(y);
            mft_tensor_release(xi);
        }

    /* large enough for several parallel chunks, NCHW and NHWC, all modes */
    const int64_t sl[4] = {2, 16, 40, 48}, pl[4] = {3, 2, 1, 4};
    for (int kind = 0; kind < 2; kind++)
        for (int m = 0; m < 3; m++) {
            mft_tensor *xl = make_x(4, sl, MFT_F32, kind, &rng);
            y = mft_pad(xl, 4, pl, (mft_pad_mode)m, 0);
            check_pad_values(y, xl, 4, pl, (mft_pad_mode)m, 0, "large");
            mft_tensor_release(y);
            mft_tensor_release(xl);
        }
    /* NHWC with the channel dim padded (pads over all 4 dims) */
    const int64_t p8[8] = {1, 0, 2, 1, 1, 2, 0, 1};
    mft_tensor *xc = make_x(4, s4, MFT_F32, 1, &rng);
    y = mft_pad(xc, 8, p8, MFT_PAD_CONSTANT, -1);
    check_pad_values(y, xc, 8, p8, MFT_PAD_CONSTANT, -1, "nhwc pad C");
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    mft_tensor_release(y);
    mft_tensor_release(xc);
}

/* ------------------------------------------------------------------ golden (PyTorch 1.13) */
#define GP_LINE (1 << 16)
#define GP_MAX_VALUES 4096

enum { F_INPUT = 1, F_PAD = 2, F_RESULT = 4, F_SIZES = 8, F_VALUES = 16 };

typedef struct {
    int line;
    char name[96];
    unsigned seen;
    bool expect_error;
    tu_list in_sizes, pads, sizes;
    mft_format fmt;
    mft_dtype dtype;
    mft_pad_mode mode;
    double value;
    int nvalues;
    double values[GP_MAX_VALUES];
} gp_case;

static gp_case g_case;
static char g_line[GP_LINE];
static int g_golden_cases, g_golden_errors;

static bool gp_field(const char *line) {
    gp_case *c = &g_case;
    const char *p = line;
    char key[32], tok[64];
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "input") == 0) {
        if (!tu_next_list(&p, &c->in_sizes) || !tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "contiguous") == 0) c->fmt = MFT_CONTIGUOUS;
        else if (strcmp(tok, "channels_last") == 0) c->fmt = MFT_CHANNELS_LAST;
        else return false;
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "f32") == 0) c->dtype = MFT_F32;
        else if (strcmp(tok, "f64") == 0) c->dtype = MFT_F64;
        else if (strcmp(tok, "i32") == 0) c->dtype = MFT_I32;
        else if (strcmp(tok, "i64") == 0) c->dtype = MFT_I64;
        else return false;
        c->seen |= F_INPUT;
    } else if (strcmp(key, "pad") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "constant") == 0) c->mode = MFT_PAD_CONSTANT;
        else if (strcmp(tok, "reflect") == 0) c->mode = MFT_PAD_REFLECT;
        else if (strcmp(tok, "replicate") == 0) c->mode = MFT_PAD_REPLICATE;
        else return false;
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->value = strtod(tok, NULL);
        if (!tu_next_list(&p, &c->pads)) return false;
        c->seen |= F_PAD;
    } else if (strcmp(key, "result") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->expect_error = strcmp(tok, "error") == 0;
        if (!c->expect_error && strcmp(tok, "ok") != 0) return false;
        c->seen |= F_RESULT;
    } else if (strcmp(key, "sizes") == 0) {
        if (!tu_next_list(&p, &c->sizes)) return false;
        c->seen |= F_SIZES;
    } else if (strcmp(key, "values") == 0) {
        int64_t n;
        if (!tu_next_int(&p, &n) || n < 0 || n > GP_MAX_VALUES) return false;
        c->nvalues = (int)n;
        for (int i = 0; i < c->nvalues; i++) {
            if (!tu_next_tok(&p, tok, sizeof tok)) return false;
            c->values[i] = strtod(tok, NULL);
        }
        c->seen |= F_VALUES;
    } else {
        return false;
    }
    return tu_at_eol(p);
}

/* The generator's input: packed contiguous values, converted to fmt. */
static mft_tensor *gp_input(const gp_case *c) {
    const int nd = c->in_sizes.n;
    mft_tensor *t = mft_empty(nd, c->in_sizes.v, c->dtype, MFT_CONTIGUOUS);
    if (!t) return NULL;
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (mft_tensor_numel(t) > 0) do {
            double v = (double)((i * 37) % 23 - 11);
            if (tu_is_float(c->dtype)) v /= 4.0;
            mft_tensor_set(t, idx, v);
            i++;
        } while (tu_next_index(nd, c->in_sizes.v, idx));
    if (c->fmt == MFT_CONTIGUOUS) return t;
    mft_tensor *r = mft_contiguous(t, c->fmt);
    mft_tensor_release(t);
    return r;
}

static void gp_end(int lineno, bool in_case) {
    gp_case *c = &g_case;
    CHECK_MSG(in_case, "line %d: 'end' outside a case", lineno);
    if (!in_case) return;
    unsigned need = F_INPUT | F_PAD | F_RESULT | (c->expect_error ? 0u : (unsigned)(F_SIZES | F_VALUES));
    CHECK_MSG((c->seen & need) == need, "case %s (line %d) incomplete", c->name, c->line);
    if ((c->seen & need) != need) return;
    g_golden_cases++;
    mft_tensor *x = gp_input(c);
    CHECK_MSG(x != NULL, "case %s: input (%s)", c->name, mft_last_error_message());
    mft_tensor *y = mft_pad(x, c->pads.n, c->pads.v, c->mode, c->value);
    if (c->expect_error) {
        g_golden_errors++;
        CHECK_MSG(y == NULL, "case %s: PyTorch rejects it, mft accepted", c->name);
        CHECK_MSG(y != NULL || strncmp(mft_last_error_message(), "mft_pad: ", 9) == 0,
                  "case %s: message '%s'", c->name, mft_last_error_message());
        mft_clear_error();
    } else if (!y) {
        CHECK_MSG(false, "case %s: %s", c->name, mft_last_error_message());
    } else {
        CHECK_MSG(tu_list_eq(&c->sizes, mft_tensor_ndim(y), mft_tensor_sizes(y)), "case %s: sizes",
                  c->name);
        CHECK_MSG(c->nvalues == mft_tensor_numel(y), "case %s: %d values", c->name, c->nvalues);
        const int nd = mft_tensor_ndim(y);
        mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
        CHECK_MSG(mft_tensor_is_contiguous(y, want), "case %s: layout", c->name);
        int64_t idx[MFT_MAX_DIMS] = {0};
        if (c->nvalues == mft_tensor_numel(y) && c->nvalues > 0) {
            int i = 0;
            do {
                double g = mft_tensor_get(y, idx);
                if (g != c->values[i]) {
                    CHECK_MSG(false, "case %s: value %d got %.9g want %.9g", c->name, i, g,
                              c->values[i]);
                    break;
                }
                i++;
            } while (tu_next_index(nd, mft_tensor_sizes(y), idx));
        }
    }
    mft_tensor_release(y);
    mft_tensor_release(x);
}

static void test_golden_pad(void) {
    tu_golden_file g = {MFT_TEST_DATA_DIR "/pad_cases.txt", g_line, GP_LINE, true, &g_case,
                        sizeof g_case, &g_case.line, g_case.name, sizeof g_case.name, gp_field,
                        gp_end};
    if (!tu_read_golden(&g)) return;
    CHECK_MSG(g_golden_cases >= 40 && g_golden_errors >= 10, "%d cases, %d errors",
              g_golden_cases, g_golden_errors);
}

/* ------------------------------------------------------------------ (b) kernels direct */
static void run_kernel(mft_kernel_fn fn, const mft_tensor *x, mft_tensor *y,
                       const mft_pad_params *p) {
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[1] = {y};
    mft_kernel_args a = {1, 1, ins, outs, p};
    fn(&a);
}

static void test_kernels_direct(void) {
    uint64_t rng = 99;
    for (int it = 0; it < 200; it++) {
        int nd = (int)tu_rng_int(&rng, 3, 5);
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 5);
        mft_pad_mode mode = (mft_pad_mode)tu_rng_int(&rng, 0, 2);
        int64_t pads[2 * MFT_MAX_DIMS];
        int npad = draw_pads(nd, sz, mode, &rng, pads);
        if (npad < 0) continue;
        mft_pad_params p;
        memset(&p, 0, sizeof p);
        p.mode = mode;
        p.value = mode == MFT_PAD_CONSTANT ? 1.5 : 0;
        int64_t osz[MFT_MAX_DIMS];
        for (int i = 0; i < npad / 2; i++) {
            p.before[nd - 1 - i] = pads[2 * i];
            p.after[nd - 1 - i] = pads[2 * i + 1];
        }
        for (int d = 0; d < nd; d++) osz[d] = sz[d] + p.before[d] + p.after[d];
        for (const mft__kernel_def *k = mft__kernels_pad; k->fn; k++) {
            if (k->op != MFT__OP_PAD) continue; /* the table also holds pad_backward */
            if (k->dtype != MFT_F32 && k->dtype != MFT_F64) continue;
            mft_format f = k->fmt == MFT_FORMAT_ANY ? MFT_CONTIGUOUS : k->fmt;
            mft_tensor *x0 = mft_randn(nd, sz, k->dtype, MFT_CONTIGUOUS, tu_rng_next(&rng));
            mft_tensor *x = mft_contiguous(x0, f);
            mft_tensor *y = mft_empty(nd, osz, k->dtype, f);
            run_kernel(k->fn, x, y, &p);
            check_pad_values(y, x, npad, pads, mode, p.value, k->name);
            mft_tensor_release(y);
            mft_tensor_release(x);
            mft_tensor_release(x0);
        }
        /* the F32 reference on a non-dense input and a non-dense output */
        mft_tensor *x = make_x(nd, sz, MFT_F32, 2, &rng);
        mft_tensor *y = tu_strided_view(nd, osz, MFT_F32, 0, &g_lay, &rng, NULL);
        run_kernel(mft__pad_reference(MFT_F32), x, y, &p);
        check_pad_values(y, x, npad, pads, mode, p.value, "pad.ref.f32");
        mft_tensor_release(y);
        mft_tensor_release(x);
    }
    CHECK(mft__pad_reference(MFT_I32) == NULL);
}

/* ------------------------------------------------------------------ (c) dispatch */
static void test_dispatch(void) {
    const int64_t sz[4] = {2, 8, 6, 6}, p[4] = {1, 1, 2, 2};
    mft_tensor *nhwc = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *nchw = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    const mft_dispatch_info *d;

    mft_tensor *y = mft_pad(nhwc, 4, p, MFT_PAD_CONSTANT, 0);
    d = mft_dispatch_last();
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    CHECK(strcmp(d->op, "pad") == 0);
    CHECK_MSG(strcmp(d->kernel, "pad.nhwc.f32") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    CHECK(!d->user && d->format == MFT_CHANNELS_LAST && d->kernel_format == MFT_CHANNELS_LAST);
    mft_tensor_release(y);

    y = mft_pad(nchw, 4, p, MFT_PAD_REFLECT, 0);
    d = mft_dispatch_last();
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CONTIGUOUS));
    CHECK_MSG(strcmp(d->kernel, "pad.nchw.f32") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    mft_tensor_release(y);

    /* rank 2: CONTIGUOUS kernel */
    mft_tensor *x2 = mft_select(nhwc, 0, 0);
    mft_tensor *x2b = mft_select(x2, 0, 0);
    y = mft_pad(x2b, 2, p, MFT_PAD_REPLICATE, 0);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "pad.nchw.f32") == 0, "kernel %s", d->kernel);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CONTIGUOUS));
    check_pad_values(y, x2b, 2, p, MFT_PAD_REPLICATE, 0, "rank 2 non-dense");
    mft_tensor_release(y);
    mft_tensor_release(x2b);
    mft_tensor_release(x2);

    /* non-dense NHWC input: converted once for the NHWC kernel */
    mft_tensor *sl = mft_slice(nhwc, 3, 0, 6, 2);
    CHECK(mft_tensor_format(sl) == MFT_CHANNELS_LAST);
    y = mft_pad(sl, 4, p, MFT_PAD_REPLICATE, 0);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "pad.nhwc.f32") == 0, "kernel %s", d->kernel);
    CHECK_MSG(d->conversions == 1, "conversions %d", d->conversions);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    check_pad_values(y, sl, 4, p, MFT_PAD_REPLICATE, 0, "sliced nhwc");
    mft_tensor_release(y);
    mft_tensor_release(sl);

    /* F64 NHWC: no NHWC F64 kernel -> fallback through the CONTIGUOUS reference */
    mft_tensor *n64 = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 2);
    y = mft_pad(n64, 4, p, MFT_PAD_REFLECT, 0);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "pad.nchw.f64.ref") == 0, "kernel %s", d->kernel);
    CHECK(d->format == MFT_CHANNELS_LAST && d->kernel_format == MFT_CONTIGUOUS);
    CHECK_MSG(d->conversions == 2, "conversions %d", d->conversions);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST) &&
          mft_tensor_format(y) == MFT_CHANNELS_LAST);
    check_pad_values(y, n64, 4, p, MFT_PAD_REFLECT, 0, "f64 fallback");
    mft_tensor_release(y);
    /* strict mode forbids the fallback */
    mft_dispatch_set_strict(true);
    y = mft_pad(n64, 4, p, MFT_PAD_REFLECT, 0);
    CHECK(y == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_pad: no kernel for (pad, CHANNELS_LAST, f64); strict mode");
    mft_dispatch_set_strict(false);
    mft_tensor_release(n64);

    /* integer NHWC */
    mft_tensor *ni = mft_zeros(4, sz, MFT_I64, MFT_CHANNELS_LAST);
    y = mft_pad(ni, 4, p, MFT_PAD_CONSTANT, 3);
    d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->kernel, "pad.nhwc.i64") == 0, "kernel %s", d->kernel);
    CHECK_EQ_I(d->conversions, 0);
    mft_tensor_release(y);
    mft_tensor_release(ni);

    /* inside a scope: the result belongs to the scope, no leaks */
    CHECK(mft_scope_begin() == MFT_OK);
    y = mft_pad(nchw, 4, p, MFT_PAD_CONSTANT, 0);
    CHECK(y != NULL);
    CHECK(mft_scope_end() == MFT_OK);

    mft_tensor_release(nhwc);
    mft_tensor_release(nchw);
}

/* ------------------------------------------------------------------ (d) cat / stack / split */
/* Checks y == cat(ts, d) element by element. */
static void check_cat(const mft_tensor *y, int n, mft_tensor *const *ts, int d, const char *what) {
    if (!y) {
        CHECK_MSG(false, "%s: NULL (%s)", what, mft_last_error_message());
        return;
    }
    int nd = mft_tensor_ndim(y);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const mft_tensor *t = ts[i];
        if (mft_tensor_ndim(t) == 1 && mft_tensor_numel(t) == 0 && nd != 1) continue;
        int64_t idx[MFT_MAX_DIMS] = {0}, yi[MFT_MAX_DIMS];
        if (mft_tensor_numel(t) > 0) do {
                memcpy(yi, idx, sizeof yi);
                yi[d] += off;
                double g = mft_tensor_get(y, yi), w = mft_tensor_get(t, idx);
                if (mft_tensor_dtype(y) == MFT_F32) w = (double)(float)w;
                if (g != w) {
                    CHECK_MSG(false, "%s: input %d mismatch (%g vs %g)", what, i, g, w);
                    return;
                }
            } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
        off += mft_tensor_sizes(t)[d];
    }
    CHECK_MSG(off == mft_tensor_sizes(y)[d], "%s: size along dim", what);
}

static void test_cat(void) {
    uint64_t rng = 5;
    for (int it = 0; it < 200; it++) {
        int nd = (int)tu_rng_int(&rng, 1, 5), n = (int)tu_rng_int(&rng, 1, 4);
        int d = (int)tu_rng_int(&rng, 0, nd - 1);
        int64_t sz[MFT_MAX_DIMS];
        for (int k = 0; k < nd; k++) sz[k] = tu_rng_int(&rng, 1, 4);
        mft_tensor *ts[4];
        int kinds = (int)tu_rng_int(&rng, 0, 2); /* 0 all NCHW, 1 all NHWC, 2 mixed */
        for (int i = 0; i < n; i++) {
            int64_t s[MFT_MAX_DIMS];
            memcpy(s, sz, sizeof s);
            s[d] = tu_rng_int(&rng, 0, 3);
            int kind = kinds == 2 ? (int)tu_rng_int(&rng, 0, 2) : kinds;
            ts[i] = make_x(nd, s, tu_rng_int(&rng, 0, 1) ? MFT_F32 : MFT_F64, kind, &rng);
        }
        int dim = tu_rng_int(&rng, 0, 1) ? d : d - nd;
        mft_tensor *y = mft_cat(n, (const mft_tensor *const *)ts, dim);
        char what[96];
        snprintf(what, sizeof what, "cat it %d rank %d n %d dim %d", it, nd, n, d);
        check_cat(y, n, ts, d, what);
        if (y) {
            bool same = true, any64 = false;
            for (int i = 0; i < n; i++) {
                same = same && mft_tensor_format(ts[i]) == mft_tensor_format(ts[0]);
                any64 = any64 || mft_tensor_dtype(ts[i]) == MFT_F64;
            }
            mft_format want = same && nd >= 3 ? mft_tensor_format(ts[0]) : MFT_CONTIGUOUS;
            CHECK_MSG(mft_tensor_is_contiguous(y, want), "%s: layout", what);
            CHECK_MSG(mft_tensor_format(y) == want || mft_tensor_order_fits(y, want), "%s: tag", what);
            CHECK(mft_tensor_dtype(y) == (any64 ? MFT_F64 : MFT_F32));
        }
        mft_tensor_release(y);
        for (int i = 0; i < n; i++) mft_tensor_release(ts[i]);
    }

    /* layout rule, explicit: all NHWC -> NHWC; mixed -> CONTIGUOUS */
    const int64_t a4[4] = {2, 3, 4, 5}, b4[4] = {2, 2, 4, 5};
    mft_tensor *a = mft_randn(4, a4, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *b = mft_randn(4, b4, MFT_F32, MFT_CHANNELS_LAST, 2);
    mft_tensor *bc = mft_contiguous(b, MFT_CONTIGUOUS);
    mft_tensor *ab[2] = {a, b}, *abc[2] = {a, bc};
    mft_tensor *y = mft_cat(2, (const mft_tensor *const *)ab, 1);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST) &&
          mft_tensor_format(y) == MFT_CHANNELS_LAST);
    check_cat(y, 2, ab, 1, "nhwc cat");
    mft_tensor_release(y);
    y = mft_cat(2, (const mft_tensor *const *)abc, 1);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CONTIGUOUS) && mft_tensor_format(y) == MFT_CONTIGUOUS);
    check_cat(y, 2, abc, 1, "mixed cat");
    mft_tensor_release(y);

    /* promotion: i32 + f32 -> f32; i32 + i64 -> i64; u8 + i32 -> i32 */
    const int64_t s2[2] = {2, 3};
    mft_tensor *i32 = tu_iota(2, s2, MFT_I32, -3), *f32 = mft_randn(2, s2, MFT_F32, MFT_CONTIGUOUS, 3);
    mft_tensor *i64 = tu_iota(2, s2, MFT_I64, 100), *u8 = tu_iota(2, s2, MFT_U8, 250);
    mft_tensor *p1[2] = {i32, f32}, *p2[2] = {i32, i64}, *p3[2] = {u8, i32};
    y = mft_cat(2, (const mft_tensor *const *)p1, 0);
    CHECK(y && mft_tensor_dtype(y) == MFT_F32);
    check_cat(y, 2, p1, 0, "i32+f32");
    mft_tensor_release(y);
    y = mft_cat(2, (const mft_tensor *const *)p2, 1);
    CHECK(y && mft_tensor_dtype(y) == MFT_I64);
    check_cat(y, 2, p2, 1, "i32+i64");
    mft_tensor_release(y);
    y = mft_cat(2, (const mft_tensor *const *)p3, 0);
    CHECK(y && mft_tensor_dtype(y) == MFT_I32);
    check_cat(y, 2, p3, 0, "u8+i32");
    mft_tensor_release(y);

    /* legacy rule: 1-D empty tensors are skipped (but promote) */
    const int64_t z1[1] = {0};
    mft_tensor *e = mft_empty(1, z1, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *pe[3] = {e, f32, e};
    y = mft_cat(3, (const mft_tensor *const *)pe, 1);
    CHECK_MSG(y && tu_has_sizes(y, 2, s2) && mft_tensor_dtype(y) == MFT_F64, "%s",
              mft_last_error_message());
    if (y) {
        mft_tensor *only[1] = {f32};
        check_cat(y, 1, only, 1, "skip empty");
    }
    mft_tensor_release(y);
    mft_tensor *ee[2] = {e, e};
    y = mft_cat(2, (const mft_tensor *const *)ee, 0);
    CHECK(y && tu_has_sizes(y, 1, z1));
    mft_tensor_release(y);

    /* errors */
    CHECK(mft_cat(0, (const mft_tensor *const *)ab, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_cat: expected a non-empty list of tensors, got n = 0");
    CHECK(mft_cat(1, NULL, 0) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_cat: argument 'ts' is NULL");
    mft_tensor *pn[2] = {a, NULL};
    CHECK(mft_cat(2, (const mft_tensor *const *)pn, 0) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_cat: argument 'ts[1]' is NULL");
    CHECK(mft_cat(2, (const mft_tensor *const *)ab, 0) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_cat: sizes of tensors must match except in dimension 0. "
                             "Expected size 3 but got size 2 for tensor number 1");
    mft_tensor *pr[2] = {a, f32};
    CHECK(mft_cat(2, (const mft_tensor *const *)pr, 0) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "mft_cat: tensors must have same number of dimensions: got 4 and 2");
    CHECK(mft_cat(2, (const mft_tensor *const *)ab, 4) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "mft_cat");
    mft_tensor *s0 = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *p0[2] = {f32, s0};
    CHECK(mft_cat(2, (const mft_tensor *const *)p0, 0) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "mft_cat: zero-dimensional tensor (at position 1)");

    /* stack */
    mft_tensor *f32b = mft_randn(2, s2, MFT_F32, MFT_CONTIGUOUS, 9);
    mft_tensor *ps[3] = {f32, f32b, i32};
    for (int dim = -3; dim <= 2; dim++) {
        y = mft_stack(3, (const mft_tensor *const *)ps, dim);
        int dd = dim < 0 ? dim + 3 : dim;
        int64_t want[3];
        for (int k = 0, j = 0; k < 3; k++) want[k] = k == dd ? 3 : s2[j++];
        CHECK_MSG(y && tu_has_sizes(y, 3, want) && mft_tensor_dtype(y) == MFT_F32, "stack dim %d",
                  dim);
        for (int i = 0; y && i < 3; i++) {
            mft_tensor *v = mft_select(y, dd, i);
            mft_tensor *one[1] = {ps[i]};
            check_cat(v, 1, one, 0, "stack slice");
            mft_tensor_release(v);
        }
        mft_tensor_release(y);
    }
    /* stack of NHWC tensors at dim 0: rank-5 result, CONTIGUOUS (the
     * unsqueezed views no longer look channels-last) */
    mft_tensor *pa[2] = {a, a};
    y = mft_stack(2, (const mft_tensor *const *)pa, 0);
    CHECK(y && mft_tensor_ndim(y) == 5 && mft_tensor_is_contiguous(y, MFT_CONTIGUOUS));
    mft_tensor_release(y);
    CHECK(mft_stack(2, (const mft_tensor *const *)ab, 0) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_stack: expects each tensor to be equal size, but got [2,3,4,5] "
                             "at entry 0 and [2,2,4,5] at entry 1");
    CHECK(mft_stack(2, (const mft_tensor *const *)p1, 3) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "mft_stack");
    CHECK(mft_stack(0, (const mft_tensor *const *)p1, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_stack: expected a non-empty list");

    /* inside a scope: cat / stack results belong to the scope */
    CHECK(mft_scope_begin() == MFT_OK);
    CHECK(mft_cat(2, (const mft_tensor *const *)p1, 0) != NULL);
    CHECK(mft_stack(2, (const mft_tensor *const *)p1, 1) != NULL);
    CHECK(mft_scope_end() == MFT_OK);

    mft_tensor_release(f32b);
    mft_tensor_release(s0);
    mft_tensor_release(e);
    mft_tensor_release(i32);
    mft_tensor_release(f32);
    mft_tensor_release(i64);
    mft_tensor_release(u8);
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(bc);
}

static void test_split(void) {
    const int64_t s[3] = {2, 7, 3};
    mft_tensor *x = tu_iota(3, s, MFT_F32, 0);
    mft_tensor *outs[8];
    int n = -1;
    CHECK(mft_split(x, 3, 1, 8, outs, &n) == MFT_OK);
    CHECK_EQ_I(n, 3);
    const int64_t lens[3] = {3, 3, 1};
    for (int i = 0; i < n; i++) {
        CHECK_EQ_I(mft_tensor_sizes(outs[i])[1], lens[i]);
        CHECK(mft_tensor_offset(outs[i]) == mft_tensor_offset(x) + 3 * 3 * i); /* views */
        int64_t idx[3] = {1, 0, 2};
        CHECK_NEAR(mft_tensor_get(outs[i], idx), 21 + 9 * i + 2, 0);
    }
    /* they round-trip through cat */
    mft_tensor *y = mft_cat(n, (const mft_tensor *const *)outs, 1);
    mft_tensor *one[1] = {x};
    check_cat(y, 1, one, 1, "split+cat");
    mft_tensor_release(y);
    for (int i = 0; i < n; i++) mft_tensor_release(outs[i]);
    /* negative dim, exact division, split larger than the dim */
    CHECK(mft_split(x, 1, -1, 8, outs, &n) == MFT_OK && n == 3);
    for (int i = 0; i < n; i++) mft_tensor_release(outs[i]);
    CHECK(mft_split(x, 10, 0, 1, outs, &n) == MFT_OK && n == 1);
    CHECK(n == 1 && mft_tensor_sizes(outs[0])[0] == 2);
    for (int i = 0; i < n; i++) mft_tensor_release(outs[i]);
    /* errors */
    CHECK(mft_split(x, 2, 1, 3, outs, &n) == MFT_ERR_INVALID && n == 0);
    CHECK_ERR(MFT_ERR_INVALID, "mft_split: 4 chunks");
    CHECK(mft_split(x, 0, 1, 3, outs, &n) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "split_size can only be 0 if dimension size is 0, but got dimension size of 7");
    CHECK(mft_split(x, -1, 1, 3, outs, &n) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "split_size=-1");
    CHECK(mft_split(x, 1, 3, 3, outs, &n) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "mft_split");
    CHECK(mft_split(NULL, 1, 0, 3, outs, &n) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_split: argument 'x' is NULL");
    CHECK(mft_split(x, 1, 0, 3, NULL, &n) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_split: argument 'outs' is NULL");
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ (e) pad errors */
static void test_errors(void) {
    const int64_t s3[3] = {2, 3, 4}, s2[2] = {3, 4};
    mft_tensor *x = mft_zeros(3, s3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *x2 = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    const int64_t p[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(mft_pad(NULL, 2, p, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_pad: argument 'x' is NULL");
    CHECK(mft_pad(x, 2, NULL, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_pad: argument 'pads' is NULL");
    CHECK(mft_pad(x, 3, p, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad: padding length must be divisible by 2, got 3");
    CHECK(mft_pad(x, 8, p, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "padding length 8 and input of dimension 3");
    CHECK(mft_pad(x, 2, p, (mft_pad_mode)7, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad: invalid padding mode 7");
    const int64_t neg[2] = {-3, -2};
    CHECK(mft_pad(x, 2, neg, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_pad: the input size 4, plus negative padding -3 and -2 resulted "
                             "in a negative output size");
    const int64_t big[2] = {(int64_t)1 << 50, 0};
    CHECK(mft_pad(x, 2, big, MFT_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_pad: pad 1125899906842624 is too large");
    CHECK(mft_pad(x, 2, p, MFT_PAD_REFLECT, 1.0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad: padding mode \"reflect\" doesn't take in value argument");
    CHECK(mft_pad(x, 6, p, MFT_PAD_REPLICATE, 0) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "padding length 6, input of dimension 3");
    CHECK(mft_pad(x2, 4, p, MFT_PAD_REFLECT, 0) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "only 2D, 3D, 4D, 5D padding with non-constant padding");
    const int64_t r4[2] = {4, 1};
    CHECK(mft_pad(x, 2, r4, MFT_PAD_REFLECT, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad: padding size should be less than the corresponding input "
                               "dimension, but got: padding (4, 1) at dimension 2 of input [2,3,4]");
    const int64_t r3[4] = {0, 0, 1, 3};
    CHECK(mft_pad(x, 4, r3, MFT_PAD_REFLECT, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "padding (1, 3) at dimension 1");
    const int64_t rs[2] = {-3, -3};
    CHECK(mft_pad(x2, 2, rs, MFT_PAD_REPLICATE, 0) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_pad: input size 4 is too small; calculated output size -2");
    mft_tensor *xi = mft_zeros(3, s3, MFT_I32, MFT_CONTIGUOUS);
    CHECK(mft_pad(xi, 2, p, MFT_PAD_REPLICATE, 0) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_pad: padding mode \"replicate\" is not implemented for dtype i32");
    const int64_t z2[2] = {3, 0};
    mft_tensor *xz = mft_zeros(2, z2, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_pad(xz, 2, p, MFT_PAD_REPLICATE, 0) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_pad: expected 2D or 3D (batch mode) tensor with possibly 0 batch "
                             "size and other non-zero dimensions for input, but got: [3,0]");
    mft_tensor_release(xz);
    mft_tensor_release(xi);
    mft_tensor_release(x2);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_golden_pad);
    RUN(test_pad_random);
    RUN(test_pad_fixed);
    RUN(test_kernels_direct);
    RUN(test_dispatch);
    RUN(test_cat);
    RUN(test_split);
    RUN(test_errors);
    TEST_MAIN_END();
}
