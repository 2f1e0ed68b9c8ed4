/* tests/ops/test_golden_conv.c — convolutions against PyTorch 1.13
 * (tests/golden/conv_cases.txt, written by gen_conv.py): output sizes,
 * strides (where docs/spec.md §4 agrees with PyTorch; elsewhere the docs/spec.md rule is
 * checked instead), values of the output and of grad_x, grad_w, grad_b
 * (whose formats docs/spec.md §5 fixes: x's, w's, contiguous), and the calls PyTorch
 * rejects (an error naming the function). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "mft/conv.h"
#include "test_util.h"

#define GC_LINE (1 << 16)
#define GC_MAX 4096

enum { F_OP = 1, F_DT = 2, F_X = 4, F_W = 8, F_BIAS = 16, F_PARAMS = 32, F_RESULT = 64,
       F_SIZES = 128, F_STRIDES = 256, F_Y = 512, F_GX = 1024, F_GW = 2048, F_GB = 4096 };

typedef struct {
    int n;
    double v[GC_MAX];
} gc_vals;

typedef struct {
    int line;
    char name[96];
    unsigned seen;
    char op[32];
    mft_dtype dtype;
    tu_list xs, ws, sizes, strides, s, p, d, op_pad;
    char xl[16], wl[16];
    bool bias, expect_error, strides_dash;
    int64_t groups;
    gc_vals y, gx, gw, gb;
} gc_case;

static gc_case g_case;
static struct {
    int cases, errors, values;
} g_stats;

static double gen(char kind, int64_t i) {
    switch (kind) {
    case 'x': return (double)((i * 37) % 23 - 11) / 8.0;
    case 'w': return (double)((i * 17) % 13 - 6) / 8.0;
    case 'b': return (double)((i * 7) % 5 - 2) / 4.0;
    default: return (double)((i * 29) % 19 - 9) / 8.0;
    }
}

static void fill(mft_tensor *t, char kind) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (mft_tensor_numel(t) == 0) return;
    do mft_tensor_set(t, idx, gen(kind, i++));
    while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* A tensor laid out as the generator's LAYOUT names it. */
static mft_tensor *make(const tu_list *sz, const char *layout, mft_dtype dt, char kind) {
    int nd = sz->n;
    mft_tensor *t = NULL;
    if (strcmp(layout, "contiguous") == 0) {
        t = mft_empty(nd, sz->v, dt, MFT_CONTIGUOUS);
    } else if (strcmp(layout, "channels_last") == 0) {
        t = mft_empty(nd, sz->v, dt, MFT_CHANNELS_LAST);
    } else if (strcmp(layout, "selunsq") == 0) {
        int64_t big[MFT_MAX_DIMS];
        memcpy(big, sz->v, sizeof(int64_t) * (size_t)nd);
        big[0] = 2;
        mft_tensor *b = mft_zeros(nd, big, dt, MFT_CHANNELS_LAST);
        mft_tensor *s = mft_select(b, 0, 1);
        t = mft_unsqueeze(s, 0);
        mft_tensor_release(s);
        mft_tensor_release(b);
    } else if (strcmp(layout, "slice") == 0) {
        int64_t big[MFT_MAX_DIMS];
        memcpy(big, sz->v, sizeof(int64_t) * (size_t)nd);
        big[nd - 1] = 2 * sz->v[nd - 1] + 1;
        mft_tensor *b = mft_full(nd, big, dt, MFT_CONTIGUOUS, 99.0);
        t = mft_slice(b, nd - 1, 1, big[nd - 1], 2);
        mft_tensor_release(b);
    }
    if (t) fill(t, kind);
    return t;
}

static bool read_vals(const char **p, gc_vals *v) {
    int64_t n;
    if (!tu_next_int(p, &n) || n < 0 || n > GC_MAX) return false;
    v->n = (int)n;
    for (int i = 0; i < v->n; i++)
        if (!tu_next_double(p, &v->v[i])) return false;
    return true;
}

static bool parse_line(const char *line, gc_case *c) {
    const char *p = line;
    char key[32];
    int64_t v;
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "op") == 0) {
        if (!tu_next_tok(&p, c->op, sizeof c->op)) return false;
        c->seen |= F_OP;
    } else if (strcmp(key, "dtype") == 0) {
        if (!tu_next_dtype(&p, &c->dtype)) return false;
        c->seen |= F_DT;
    } else if (strcmp(key, "x") == 0 || strcmp(key, "w") == 0) {
        bool isx = key[0] == 'x';
        if (!tu_next_list(&p, isx ? &c->xs : &c->ws) ||
            !tu_next_tok(&p, isx ? c->xl : c->wl, sizeof c->xl))
            return false;
        c->seen |= isx ? F_X : F_W;
    } else if (strcmp(key, "bias") == 0) {
        if (!tu_next_int(&p, &v)) return false;
        c->bias = v != 0;
        c->seen |= F_BIAS;
    } else if (strcmp(key, "params") == 0) {
        if (!tu_next_list(&p, &c->s) || !tu_next_list(&p, &c->p) || !tu_next_list(&p, &c->d) ||
            !tu_next_list(&p, &c->op_pad) || !tu_next_int(&p, &c->groups))
            return false;
        c->seen |= F_PARAMS;
    } else if (strcmp(key, "result") == 0) {
        char tok[16];
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->expect_error = strcmp(tok, "error") == 0;
        if (!c->expect_error && strcmp(tok, "ok") != 0) return false;
        c->seen |= F_RESULT;
    } else if (strcmp(key, "sizes") == 0) {
        if (!tu_next_list(&p, &c->sizes)) return false;
        c->seen |= F_SIZES;
    } else if (strcmp(key, "strides") == 0) {
        const char *q = p;
        char tok[8];
        if (tu_next_tok(&q, tok, sizeof tok) && strcmp(tok, "-") == 0) {
            c->strides_dash = true;
            p = q;
        } else if (!tu_next_list(&p, &c->strides)) {
            return false;
        }
        c->seen |= F_STRIDES;
    } else if (strcmp(key, "y") == 0 || strcmp(key, "gx") == 0 || strcmp(key, "gw") == 0 ||
               strcmp(key, "gb") == 0) {
        gc_vals *t = key[0] == 'y' ? &c->y : key[1] == 'x' ? &c->gx : key[1] == 'w' ? &c->gw : &c->gb;
        if (!read_vals(&p, t)) return false;
        c->seen |= key[0] == 'y' ? F_Y : key[1] == 'x' ? F_GX : key[1] == 'w' ? F_GW : F_GB;
    } else {
        return false;
    }
    return tu_at_eol(p);
}

static void compare(const gc_case *c, const char *what, const mft_tensor *t, const gc_vals *want) {
    CHECK_MSG(t != NULL, "case %s (line %d): %s missing: %s", c->name, c->line, what,
              mft_last_error_message());
    if (!t) return;
    CHECK_MSG(mft_tensor_numel(t) == want->n, "case %s: %s has %lld values, want %d", c->name, what,
              (long long)mft_tensor_numel(t), want->n);
    if (mft_tensor_numel(t) != want->n || want->n == 0) return;
    const double tol = c->dtype == MFT_F32 ? 1e-5 : 1e-12;
    int nd = mft_tensor_ndim(t), bad = 0;
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int i = 0; i < want->n && bad < 3; i++) {
        double g = mft_tensor_get(t, idx);
        if (!(fabs(g - want->v[i]) <= tol * (1.0 + fabs(want->v[i])))) {
            CHECK_MSG(false, "case %s (line %d): %s value %d = %.9g, want %.9g", c->name, c->line,
                      what, i, g, want->v[i]);
            bad++;
        }
        g_stats.values++;
        tu_next_index(nd, mft_tensor_sizes(t), idx);
    }
    CHECK(bad == 0);
}

static bool packed_in(const mft_tensor *t, mft_format f) {
    return t && mft_tensor_is_contiguous(t, f) && mft_tensor_format(t) == f;
}

static void run_case(const gc_case *c) {
    g_stats.cases++;
    const int nsp = c->s.n;
    const bool tr = strcmp(c->op, "conv_transpose2d") == 0;
    mft_tensor *x = make(&c->xs, c->xl, c->dtype, 'x'), *w = make(&c->ws, c->wl, c->dtype, 'w');
    const int64_t cout = tr ? c->ws.v[1] * c->groups : c->ws.v[0];
    mft_tensor *b = NULL;
    if (c->bias) {
        b = mft_empty(1, &cout, c->dtype, MFT_CONTIGUOUS);
        if (b) fill(b, 'b');
    }
    CHECK_MSG(x && w && (b || !c->bias), "case %s: inputs: %s", c->name, mft_last_error_message());
    if (!x || !w || (c->bias && !b)) goto done;
    const int64_t *s = c->s.v, *p = c->p.v, *d = c->d.v;
    const char *fname;
    mft_clear_error();
    mft_tensor *y;
    if (strcmp(c->op, "conv1d") == 0) {
        fname = "mft_conv1d: ";
        y = mft_conv1d(x, w, b, s, p, d, c->groups);
    } else if (strcmp(c->op, "conv2d") == 0) {
        fname = "mft_conv2d: ";
        y = mft_conv2d(x, w, b, s, p, d, c->groups);
    } else if (strcmp(c->op, "conv3d") == 0) {
        fname = "mft_conv3d: ";
        y = mft_conv3d(x, w, b, s, p, d, c->groups);
    } else {
        fname = "mft_conv_transpose2d: ";
        y = mft_conv_transpose2d(x, w, b, s, p, c->op_pad.v, d, c->groups);
    }
    if (c->expect_error) {
        g_stats.errors++;
        CHECK_MSG(y == NULL && mft_last_error() != MFT_OK, "case %s (line %d): PyTorch rejects it",
                  c->name, c->line);
        CHECK_MSG(strncmp(mft_last_error_message(), fname, strlen(fname)) == 0,
                  "case %s: message '%s' does not name the function", c->name,
                  mft_last_error_message());
        mft_clear_error();
        mft_tensor_release(y);
        goto done;
    }
    CHECK_MSG(y != NULL, "case %s (line %d): %s", c->name, c->line, mft_last_error_message());
    if (!y) goto done;
    const int nd = mft_tensor_ndim(y);
    const bool batched = nd == nsp + 2;
    char a[128], bb[128];
    tu_fmt_list(a, sizeof a, nd, mft_tensor_sizes(y));
    CHECK_MSG(tu_list_eq(&c->sizes, nd, mft_tensor_sizes(y)), "case %s: sizes %s", c->name, a);
    tu_fmt_list(a, sizeof a, nd, mft_tensor_strides(y));
    if (!c->strides_dash) {
        tu_fmt_list(bb, sizeof bb, c->strides.n, c->strides.v);
        CHECK_MSG(tu_list_eq(&c->strides, nd, mft_tensor_strides(y)),
                  "case %s (line %d): strides %s, want %s", c->name, c->line, a, bb);
    } else if (batched) {
        /* docs/spec.md §4 instead of PyTorch: channels-last if x's or w's tag is (1-D: x's) */
        mft_format xf = mft_tensor_format(x), wf = mft_tensor_format(w);
        mft_format want = nsp == 1 ? xf
                          : (xf == MFT_CHANNELS_LAST || wf == MFT_CHANNELS_LAST) ? MFT_CHANNELS_LAST
                                                                                  : MFT_CONTIGUOUS;
        CHECK_MSG(packed_in(y, want), "case %s: strides %s not packed in %s (docs/spec.md §4)", c->name, a,
                  mft_format_name(want));
    }
    compare(c, "y", y, &c->y);
    /* gradients with grad_out = G */
    mft_tensor *go = mft_empty(nd, mft_tensor_sizes(y), c->dtype, MFT_CONTIGUOUS);
    if (go) fill(go, 'g');
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    mft_status st;
    if (strcmp(c->op, "conv1d") == 0)
        st = mft_conv1d_backward(go, x, w, s, p, d, c->groups, &gx, &gw, c->bias ? &gb : NULL);
    else if (strcmp(c->op, "conv2d") == 0)
        st = mft_conv2d_backward(go, x, w, s, p, d, c->groups, &gx, &gw, c->bias ? &gb : NULL);
    else if (strcmp(c->op, "conv3d") == 0)
        st = mft_conv3d_backward(go, x, w, s, p, d, c->groups, &gx, &gw, c->bias ? &gb : NULL);
    else
        st = mft_conv_transpose2d_backward(go, x, w, s, p, c->op_pad.v, d, c->groups, &gx, &gw,
                                           c->bias ? &gb : NULL);
    CHECK_MSG(st == MFT_OK, "case %s: backward: %s", c->name, mft_last_error_message());
    compare(c, "grad_x", gx, &c->gx);
    compare(c, "grad_w", gw, &c->gw);
    if (c->bias) compare(c, "grad_b", gb, &c->gb);
    if (gx && batched)
        CHECK_MSG(packed_in(gx, mft_tensor_format(x)), "case %s: grad_x not in x's format", c->name);
    CHECK_MSG(packed_in(gw, mft_tensor_format(w)), "case %s: grad_w not in w's format", c->name);
    mft_tensor_release(gx);
    mft_tensor_release(gw);
    mft_tensor_release(gb);
    mft_tensor_release(go);
    mft_tensor_release(y);
done:
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(b);
}

static bool case_field(const char *line) { return parse_line(line, &g_case); }

static void case_end(int lineno, bool in_case) {
    unsigned need = F_OP | F_DT | F_X | F_W | F_BIAS | F_PARAMS | F_RESULT;
    if (in_case && !g_case.expect_error)
        need |= F_SIZES | F_STRIDES | F_Y | F_GX | F_GW | (g_case.bias ? (unsigned)F_GB : 0u);
    bool complete = in_case && (g_case.seen & need) == need;
    CHECK_MSG(complete, "line %d: incomplete case %s (fields 0x%x)", lineno, g_case.name,
              g_case.seen);
    if (complete) run_case(&g_case);
}

static void test_golden_conv(void) {
    static char line[GC_LINE];
    const tu_golden_file file = {MFT_TEST_DATA_DIR "/conv_cases.txt", line, GC_LINE, true,
                                 &g_case, sizeof g_case, &g_case.line, g_case.name,
                                 sizeof g_case.name, case_field, case_end};
    if (!tu_read_golden(&file)) return;
    CHECK_MSG(g_stats.cases >= 50, "only %d cases", g_stats.cases);
    CHECK_MSG(g_stats.errors >= 8, "only %d error cases", g_stats.errors);
    printf("golden conv: %d cases (%d error cases), %d values checked\n", g_stats.cases,
           g_stats.errors, g_stats.values);
}

int main(void) {
    RUN(test_golden_conv);
    TEST_MAIN_END();
}
