/* tests/ops/test_conv.c — convolutions (ops/conv/):
 *   (a) every entry point (conv1d/2d/3d, conv_transpose2d: forward, grad_x,
 *       grad_w, grad_b) against naive loops written here, over sweeps of
 *       stride, padding, dilation, groups (1, 2, depthwise with multiplier 2),
 *       odd sizes, 1x1 kernels, N = 1, C = 1, 1x1 outputs, unbatched inputs,
 *       x NCHW / NHWC / non-dense x w NCHW / NHWC, F32 and F64; result
 *       sizes, strides and tag (docs/spec.md §4) and gradient formats (docs/spec.md §5);
 *   (b) every kernel of the conv tables (reference and fast) and
 *       mft__conv_reference called directly on packed / strided tensors;
 *   (c) argument errors (status + message naming the function and values).
 *
 * The naive loops use one relation for every op: a "small" tensor S
 * (conv: y; transposed conv: x), a "big" tensor B (conv: x; transposed: y)
 * and w indexed [S channel][B channel within the group][k], linked by
 * big = small*stride - padding + k*dilation. Each op is one of: S from (B,
 * w), B from (S, w), w from (S, B). They scatter where the library gathers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "mft/conv.h"
#include "ops_internal.h"
#include "test_util.h"

/* ops/conv/reference.c: the reference kernels. */
mft_kernel_fn mft__conv_reference(mft__op_id op, mft_dtype dt);

/* ------------------------------------------------------------------ naive loops */
typedef struct rel {
    int64_t N, Cs, Cb, groups;
    int64_t ss[3], sb[3], k[3], s[3], p[3], d[3]; /* spatial (D,H,W), missing dims 1/0/1 */
} rel;

enum { TO_S, TO_B, TO_W };

static void naive_rel(int mode, const rel *r, double *S, double *B, double *W) {
    const int64_t csg = r->Cs / r->groups, cbg = r->Cb / r->groups;
    const int64_t nS = r->ss[0] * r->ss[1] * r->ss[2], nB = r->sb[0] * r->sb[1] * r->sb[2],
                  nK = r->k[0] * r->k[1] * r->k[2];
    if (mode == TO_S) memset(S, 0, sizeof(double) * (size_t)(r->N * r->Cs * nS));
    if (mode == TO_B) memset(B, 0, sizeof(double) * (size_t)(r->N * r->Cb * nB));
    if (mode == TO_W) memset(W, 0, sizeof(double) * (size_t)(r->Cs * cbg * nK));
    for (int64_t n = 0; n < r->N; n++)
        for (int64_t cs = 0; cs < r->Cs; cs++)
            for (int64_t cbl = 0; cbl < cbg; cbl++) {
                const int64_t cb = (cs / csg) * cbg + cbl;
                for (int64_t oz = 0; oz < r->ss[0]; oz++)
                    for (int64_t oy = 0; oy < r->ss[1]; oy++)
                        for (int64_t ox = 0; ox < r->ss[2]; ox++)
                            for (int64_t kz = 0; kz < r->k[0]; kz++)
                                for (int64_t ky = 0; ky < r->k[1]; ky++)
                                    for (int64_t kx = 0; kx < r->k[2]; kx++) {
                                        int64_t bz = oz * r->s[0] - r->p[0] + kz * r->d[0];
                                        int64_t by = oy * r->s[1] - r->p[1] + ky * r->d[1];
                                        int64_t bx = ox * r->s[2] - r->p[2] + kx * r->d[2];
                                        if (bz < 0 || bz >= r->sb[0] || by < 0 || by >= r->sb[1] ||
                                            bx < 0 || bx >= r->sb[2])
                                            continue;
                                        int64_t is = ((n * r->Cs + cs) * r->ss[0] + oz) * r->ss[1] * r->ss[2] +
                                                     oy * r->ss[2] + ox;
                                        int64_t ib = ((n * r->Cb + cb) * r->sb[0] + bz) * r->sb[1] * r->sb[2] +
                                                     by * r->sb[2] + bx;
                                        int64_t iw = ((cs * cbg + cbl) * r->k[0] + kz) * r->k[1] * r->k[2] +
                                                     ky * r->k[2] + kx;
                                        if (mode == TO_S) S[is] += B[ib] * W[iw];
                                        else if (mode == TO_B) B[ib] += S[is] * W[iw];
                                        else W[iw] += S[is] * B[ib];
                                    }
            }
}

/* ------------------------------------------------------------------ tensors */
/* Values in logical row-major order (malloc'ed). */
static double *to_array(const mft_tensor *t) {
    int nd = mft_tensor_ndim(t);
    int64_t n = mft_tensor_numel(t);
    double *a = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (n > 0) do a[i++] = mft_tensor_get(t, idx); while (tu_next_index(nd, mft_tensor_sizes(t), idx));
    return a;
}

enum { L_NCHW, L_NHWC, L_SLICE, L_COUNT };
static const char *const layout_name[L_COUNT] = {"nchw", "nhwc", "slice"};

/* A tensor of sizes with random eighths in [-1, 1], laid out as layout:
 * packed CONTIGUOUS, packed CHANNELS_LAST (rank 3-5), or a non-dense view
 * (every other element of the last dim of a bigger tensor, offset 1). */
static mft_tensor *make(int nd, const int64_t *sizes, mft_dtype dt, int layout, uint64_t *rng) {
    mft_tensor *t;
    if (layout == L_SLICE) {
        int64_t big[MFT_MAX_DIMS];
        memcpy(big, sizes, sizeof(int64_t) * (size_t)nd);
        big[nd - 1] = 2 * sizes[nd - 1] + 1;
        mft_tensor *b = mft_full(nd, big, dt, MFT_CONTIGUOUS, 99.0);
        t = mft_slice(b, nd - 1, 1, 2 * sizes[nd - 1] + 1, 2);
        mft_tensor_release(b);
    } else {
        t = mft_empty(nd, sizes, dt, layout == L_NHWC && nd >= 3 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
    }
    if (!t) return NULL;
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) > 0) do
            mft_tensor_set(t, idx, (double)tu_rng_int(rng, -8, 8) / 8.0);
        while (tu_next_index(nd, sizes, idx));
    return t;
}

/* got (a tensor) against want (logical row-major); reports the first miss. */
static bool match(const mft_tensor *got, const double *want, int nd, const int64_t *sizes,
                  double tol, const char *what) {
    if (!got) {
        CHECK_MSG(false, "%s: no tensor (%s)", what, mft_last_error_message());
        return false;
    }
    if (!tu_has_sizes(got, nd, sizes)) {
        char a[128], b[128];
        tu_fmt_list(a, sizeof a, mft_tensor_ndim(got), mft_tensor_sizes(got));
        tu_fmt_list(b, sizeof b, nd, sizes);
        CHECK_MSG(false, "%s: sizes %s, want %s", what, a, b);
        return false;
    }
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (tu_shape_numel(nd, sizes) == 0) return true;
    do {
        double g = mft_tensor_get(got, idx), w = want[i++];
        if (!(fabs(g - w) <= tol * (1.0 + fabs(w)))) {
            char b[128];
            tu_fmt_list(b, sizeof b, nd, idx);
            CHECK_MSG(false, "%s: at %s got %.9g, want %.9g", what, b, g, w);
            return false;
        }
    } while (tu_next_index(nd, sizes, idx));
    CHECK(true);
    return true;
}

static double tol_of(mft_dtype dt) { return dt == MFT_F32 ? 2e-5 : 1e-12; }

/* ------------------------------------------------------------------ (a) entry points */
typedef struct cfg {
    int nsp;         /* 1, 2, 3 */
    bool transposed; /* conv_transpose2d */
    bool batched, bias;
    int64_t N, Cin, Cout, groups;
    int64_t in[3], k[3], s[3], p[3], d[3], op[3];
} cfg;

static int64_t g_cases_run;

static void describe_cfg(const cfg *c, char *buf, size_t len) {
    snprintf(buf, len,
             "%s%dd%s N%lld Ci%lld Co%lld g%lld in[%lld,%lld,%lld] k[%lld,%lld,%lld] "
             "s[%lld,%lld,%lld] p[%lld,%lld,%lld] d[%lld,%lld,%lld] op[%lld,%lld]",
             c->transposed ? "convT" : "conv", c->nsp, c->batched ? "" : " unbatched",
             (long long)c->N, (long long)c->Cin, (long long)c->Cout, (long long)c->groups,
             (long long)c->in[0], (long long)c->in[1], (long long)c->in[2], (long long)c->k[0],
             (long long)c->k[1], (long long)c->k[2], (long long)c->s[0], (long long)c->s[1],
             (long long)c->s[2], (long long)c->p[0], (long long)c->p[1], (long long)c->p[2],
             (long long)c->d[0], (long long)c->d[1], (long long)c->d[2], (long long)c->op[0],
             (long long)c->op[1]);
}

/* Output spatial size of dim i (0 or less: the case is invalid). */
static int64_t out_dim(const cfg *c, int i) {
    int64_t ext = c->d[i] * (c->k[i] - 1) + 1;
    if (c->transposed) return (c->in[i] - 1) * c->s[i] - 2 * c->p[i] + ext + c->op[i];
    int64_t padded = c->in[i] + 2 * c->p[i];
    return padded < ext ? 0 : (padded - ext) / c->s[i] + 1;
}

/* User sizes: x, w, y. Returns the ranks through *xr (y has x's rank). */
static void sizes_of(const cfg *c, int64_t *xs, int64_t *ws, int64_t *ys, int *xr) {
    int k = 0;
    if (c->batched) {
        xs[k] = c->N;
        ys[k++] = c->N;
    }
    xs[k] = c->Cin;
    ys[k++] = c->Cout;
    for (int i = 0; i < c->nsp; i++) {
        xs[k] = c->in[i];
        ys[k++] = out_dim(c, i);
    }
    *xr = k;
    ws[0] = c->transposed ? c->Cin : c->Cout;
    ws[1] = c->transposed ? c->Cout / c->groups : c->Cin / c->groups;
    for (int i = 0; i < c->nsp; i++) ws[2 + i] = c->k[i];
}

/* The relation of c (spatial dims right-aligned in D,H,W). */
static rel rel_of(const cfg *c) {
    rel r;
    memset(&r, 0, sizeof r);
    r.N = c->batched ? c->N : 1;
    r.groups = c->groups;
    r.Cs = c->transposed ? c->Cin : c->Cout;
    r.Cb = c->transposed ? c->Cout : c->Cin;
    for (int i = 0; i < 3; i++) {
        r.ss[i] = r.sb[i] = r.k[i] = r.s[i] = r.d[i] = 1;
        r.p[i] = 0;
    }
    for (int i = 0; i < c->nsp; i++) {
        int j = 3 - c->nsp + i;
        int64_t o = out_dim(c, i);
        r.ss[j] = c->transposed ? c->in[i] : o;
        r.sb[j] = c->transposed ? o : c->in[i];
        r.k[j] = c->k[i];
        r.s[j] = c->s[i];
        r.p[j] = c->p[i];
        r.d[j] = c->d[i];
    }
    return r;
}

static mft_tensor *call_forward(const cfg *c, const mft_tensor *x, const mft_tensor *w,
                                const mft_tensor *b) {
    switch (c->nsp) {
    case 1: return mft_conv1d(x, w, b, c->s, c->p, c->d, c->groups);
    case 2:
        return c->transposed ? mft_conv_transpose2d(x, w, b, c->s, c->p, c->op, c->d, c->groups)
                             : mft_conv2d(x, w, b, c->s, c->p, c->d, c->groups);
    default: return mft_conv3d(x, w, b, c->s, c->p, c->d, c->groups);
    }
}

static mft_status call_backward(const cfg *c, const mft_tensor *go, const mft_tensor *x,
                                const mft_tensor *w, mft_tensor **gx, mft_tensor **gw,
                                mft_tensor **gb) {
    switch (c->nsp) {
    case 1: return mft_conv1d_backward(go, x, w, c->s, c->p, c->d, c->groups, gx, gw, gb);
    case 2:
        return c->transposed ? mft_conv_transpose2d_backward(go, x, w, c->s, c->p, c->op, c->d,
                                                             c->groups, gx, gw, gb)
                             : mft_conv2d_backward(go, x, w, c->s, c->p, c->d, c->groups, gx, gw, gb);
    default: return mft_conv3d_backward(go, x, w, c->s, c->p, c->d, c->groups, gx, gw, gb);
    }
}

/* Packed in fmt with tag fmt. */
static bool packed_in(const mft_tensor *t, mft_format fmt) {
    return t && mft_tensor_is_contiguous(t, fmt) && mft_tensor_format(t) == fmt;
}

/* One case in one dtype and one (x, w, grad_out) layout combination. */
static void run_case(const cfg *c, mft_dtype dt, int xl, int wl, int gl, uint64_t *rng) {
    char what[512], desc[400];
    describe_cfg(c, desc, sizeof desc);
    snprintf(what, sizeof what, "%s %s x:%s w:%s go:%s", desc, mft_dtype_name(dt), layout_name[xl],
             layout_name[wl], layout_name[gl]);
    int64_t xs[5], ws[5], ys[5];
    int xr;
    sizes_of(c, xs, ws, ys, &xr);
    const int wr = c->nsp + 2;
    mft_tensor *x = make(xr, xs, dt, xl, rng);
    mft_tensor *w = make(wr, ws, dt, wl, rng);
    mft_tensor *b = c->bias ? make(1, &c->Cout, dt, L_NCHW, rng) : NULL;
    mft_tensor *go = make(xr, ys, dt, gl, rng);
    CHECK_MSG(x && w && go && (b || !c->bias), "%s: inputs", what);
    if (!x || !w || !go || (c->bias && !b)) goto done;
    g_cases_run++;
    const rel r = rel_of(c);
    double *X = to_array(x), *Wv = to_array(w), *G = to_array(go);
    double *Bv = b ? to_array(b) : NULL;
    const int64_t ny = tu_shape_numel(xr, ys), nx = tu_shape_numel(xr, xs),
                  nw = tu_shape_numel(wr, ws);
    double *Y = malloc(sizeof(double) * (size_t)ny), *GX = malloc(sizeof(double) * (size_t)nx),
           *GW = malloc(sizeof(double) * (size_t)nw), *GB = calloc((size_t)c->Cout, sizeof(double));
    /* forward */
    if (c->transposed) naive_rel(TO_B, &r, X, Y, Wv);
    else naive_rel(TO_S, &r, Y, X, Wv);
    const int64_t plane = ny / (r.N * c->Cout);
    if (Bv)
        for (int64_t i = 0; i < ny; i++) Y[i] += Bv[(i / plane) % c->Cout];
    mft_tensor *y = call_forward(c, x, w, b);
    char w2[600];
    snprintf(w2, sizeof w2, "%s forward", what);
    match(y, Y, xr, ys, tol_of(dt), w2);
    if (y && c->batched) {
        mft_format want = c->nsp == 1 ? mft_tensor_format(x)
                          : (mft_tensor_format(x) == MFT_CHANNELS_LAST ||
                             mft_tensor_format(w) == MFT_CHANNELS_LAST)
                              ? MFT_CHANNELS_LAST
                              : MFT_CONTIGUOUS;
        CHECK_MSG(packed_in(y, want), "%s: result tag %s, want packed %s", w2,
                  mft_format_name(mft_tensor_format(y)), mft_format_name(want));
        CHECK(mft_tensor_dtype(y) == dt);
    }
    mft_tensor_release(y);
    /* backward */
    if (c->transposed) {
        naive_rel(TO_S, &r, GX, G, Wv); /* grad_x(small) from grad_y(big) */
        naive_rel(TO_W, &r, X, G, GW);
    } else {
        naive_rel(TO_B, &r, G, GX, Wv);
        naive_rel(TO_W, &r, G, X, GW);
    }
    for (int64_t i = 0; i < ny; i++) GB[(i / plane) % c->Cout] += G[i];
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    mft_status st = call_backward(c, go, x, w, &gx, &gw, &gb);
    CHECK_MSG(st == MFT_OK, "%s backward: %s", what, mft_last_error_message());
    snprintf(w2, sizeof w2, "%s grad_x", what);
    match(gx, GX, xr, xs, tol_of(dt), w2);
    if (gx && c->batched)
        CHECK_MSG(packed_in(gx, mft_tensor_format(x)), "%s: grad_x tag %s not packed in x's %s", w2,
                  mft_format_name(mft_tensor_format(gx)), mft_format_name(mft_tensor_format(x)));
    snprintf(w2, sizeof w2, "%s grad_w", what);
    match(gw, GW, wr, ws, tol_of(dt), w2);
    CHECK_MSG(packed_in(gw, mft_tensor_format(w)), "%s: grad_w tag %s not packed in w's %s", w2,
              gw ? mft_format_name(mft_tensor_format(gw)) : "-", mft_format_name(mft_tensor_format(w)));
    snprintf(w2, sizeof w2, "%s grad_b", what);
    match(gb, GB, 1, &c->Cout, tol_of(dt), w2);
    CHECK(packed_in(gb, MFT_CONTIGUOUS));
    mft_tensor_release(gx);
    mft_tensor_release(gw);
    mft_tensor_release(gb);
    /* only grad_w requested (other outputs untouched) */
    if (xl == L_NHWC && wl == L_NCHW) {
        gw = NULL;
        st = call_backward(c, go, x, w, NULL, &gw, NULL);
        snprintf(w2, sizeof w2, "%s grad_w alone", what);
        CHECK(st == MFT_OK);
        match(gw, GW, wr, ws, tol_of(dt), w2);
        mft_tensor_release(gw);
    }
    free(X);
    free(Wv);
    free(G);
    free(Bv);
    free(Y);
    free(GX);
    free(GW);
    free(GB);
done:
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(b);
    mft_tensor_release(go);
}

/* All layouts (x: NCHW, NHWC, slice; w: NCHW, NHWC) in F32 and F64. */
static void run_all(const cfg *c, uint64_t *rng) {
    for (int i = 0; i < c->nsp; i++)
        if (out_dim(c, i) <= 0) return;
    int fails = harness_checks_failed_;
    for (int dt = 0; dt < 2; dt++)
        for (int xl = 0; xl < L_COUNT; xl++)
            for (int wl = 0; wl < 2; wl++) {
                int gl = (int)tu_rng_int(rng, 0, L_COUNT - 1);
                run_case(c, dt ? MFT_F64 : MFT_F32, xl, wl, gl, rng);
                if (harness_checks_failed_ - fails > 20) return;
            }
}

static cfg base_cfg(int nsp, bool transposed) {
    cfg c;
    memset(&c, 0, sizeof c);
    c.nsp = nsp;
    c.transposed = transposed;
    c.batched = true;
    c.bias = true;
    c.N = 2;
    c.Cin = 4;
    c.Cout = 6;
    c.groups = 1;
    for (int i = 0; i < 3; i++) {
        c.in[i] = i == 0 ? 5 : i == 1 ? 7 : 6;
        c.k[i] = 3;
        c.s[i] = 1;
        c.p[i] = 0;
        c.d[i] = 1;
        c.op[i] = 0;
    }
    if (nsp == 3) {
        c.in[0] = 4;
        c.in[1] = 5;
        c.in[2] = 3;
        c.k[0] = 2;
        c.k[1] = 3;
        c.k[2] = 2;
    }
    return c;
}

/* groups variant g: 0 -> 1, 1 -> 2, 2 -> depthwise (C_out = 2*C_in). */
static void set_groups(cfg *c, int g) {
    if (g == 0) c->groups = 1;
    else if (g == 1) c->groups = 2;
    else {
        c->groups = c->Cin;
        c->Cout = 2 * c->Cin;
    }
}

static void sweep(int nsp, bool transposed, int smax, int pmax, int dmax, uint64_t seed) {
    uint64_t rng = seed;
    for (int64_t s = 1; s <= smax; s++)
        for (int64_t p = 0; p <= pmax; p++)
            for (int64_t d = 1; d <= dmax; d++)
                for (int g = 0; g < 3; g++) {
                    cfg c = base_cfg(nsp, transposed);
                    set_groups(&c, g);
                    for (int i = 0; i < nsp; i++) {
                        /* vary per dim a little: odd sizes, asymmetric params */
                        c.s[i] = i == 0 ? s : 1 + (s + i) % smax;
                        c.p[i] = p;
                        c.d[i] = i == nsp - 1 ? d : 1;
                    }
                    if (transposed)
                        for (int i = 0; i < nsp; i++) {
                            int64_t m = c.s[i] > c.d[i] ? c.s[i] : c.d[i];
                            c.op[i] = (s + p + i) % m;
                        }
                    c.bias = (s + p + d) % 2 == 0;
                    run_all(&c, &rng);
                }
}

static void test_conv2d_sweep(void) { sweep(2, false, 3, 2, 2, 11); }
static void test_conv1d_sweep(void) { sweep(1, false, 3, 2, 2, 12); }
static void test_conv3d_sweep(void) { sweep(3, false, 2, 1, 2, 13); }
static void test_conv_transpose2d_sweep(void) { sweep(2, true, 3, 2, 2, 14); }

/* Corner cases: 1x1 kernels, N = 1, C_in = 1, C_out = 1, 1x1 outputs, odd
 * sizes, unbatched inputs, every op. */
static void test_corners(void) {
    uint64_t rng = 21;
    for (int nsp = 1; nsp <= 3; nsp++)
        for (int tr = 0; tr < (nsp == 2 ? 2 : 1); tr++)
            for (int v = 0; v < 8; v++) {
                cfg c = base_cfg(nsp, tr != 0);
                switch (v) {
                case 0: /* 1x1 kernel, stride 2 */
                    for (int i = 0; i < 3; i++) c.k[i] = 1;
                    c.s[nsp - 1] = 2;
                    break;
                case 1: c.N = 1; break;
                case 2: c.Cin = 1; break;
                case 3: c.Cout = 1; break;
                case 4: /* 1x1 output: kernel covers the input */
                    for (int i = 0; i < 3; i++) c.k[i] = c.in[i];
                    if (tr) for (int i = 0; i < 3; i++) c.in[i] = 1;
                    break;
                case 5: /* H = W = 1 input */
                    for (int i = 0; i < 3; i++) {
                        c.in[i] = 1;
                        c.k[i] = 1;
                        c.p[i] = 1;
                    }
                    break;
                case 6: c.batched = false; break;
                case 7: /* unbatched, grouped, strided */
                    c.batched = false;
                    c.groups = 2;
                    c.s[0] = 2;
                    c.p[nsp - 1] = 1;
                    break;
                }
                run_all(&c, &rng);
            }
}

/* x with N = 1 made by select + unsqueeze of a bigger NHWC batch; and a
 * C_in = 1 NCHW input with a channels-last weight (PyTorch's pitfall). */
static void test_select_unsqueeze_and_pitfalls(void) {
    uint64_t rng = 31;
    const int64_t xs[4] = {3, 4, 5, 6}, ws[4] = {2, 4, 3, 3};
    for (int dt = 0; dt < 2; dt++) {
        mft_dtype d = dt ? MFT_F64 : MFT_F32;
        mft_tensor *big = make(4, xs, d, L_NHWC, &rng);
        mft_tensor *sel = mft_select(big, 0, 1);
        mft_tensor *x = mft_unsqueeze(sel, 0);
        mft_tensor *xc = mft_contiguous(x, MFT_CONTIGUOUS);
        mft_tensor *w = make(4, ws, d, L_NCHW, &rng);
        mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
        mft_tensor *yc = mft_conv2d(xc, w, NULL, NULL, NULL, NULL, 1);
        CHECK(y && yc && mft_tensor_hash(y) == mft_tensor_hash(yc));
        CHECK(y && mft_tensor_format(y) == mft_tensor_format(x));
        mft_tensor_release(y);
        mft_tensor_release(yc);
        mft_tensor_release(w);
        mft_tensor_release(xc);
        mft_tensor_release(x);
        mft_tensor_release(sel);
        mft_tensor_release(big);
        /* C_in = 1: NCHW input (ambiguous strides, tag CONTIGUOUS) + NHWC weight */
        const int64_t x1[4] = {2, 1, 5, 5}, w1[4] = {3, 1, 2, 2};
        mft_tensor *a = make(4, x1, d, L_NCHW, &rng), *k = make(4, w1, d, L_NHWC, &rng);
        mft_tensor *o = mft_conv2d(a, k, NULL, NULL, NULL, NULL, 1);
        CHECK(packed_in(o, MFT_CHANNELS_LAST));
        mft_tensor_release(o);
        mft_tensor_release(a);
        mft_tensor_release(k);
    }
}

/* ------------------------------------------------------------------ (b) kernels directly */
/* Runs fn for kind (0 fwd, 1 bwd input, 2 bwd weight) of c (nsp 2 or 3,
 * not transposed) with activations laid out as al (L_*; packed in fmt when
 * fmt is not ANY) and the output allocated packed in ofmt; compares with the
 * naive loops. */
static void kernel_case(const char *name, mft_kernel_fn fn, int kind, const cfg *c, mft_dtype dt,
                        int al, mft_format ofmt, uint64_t *rng) {
    int64_t xs[5], ws[5], ys[5];
    int xr;
    sizes_of(c, xs, ws, ys, &xr);
    const rel r = rel_of(c);
    mft_tensor *x = make(xr, xs, dt, al, rng), *w = make(xr, ws, dt, (int)tu_rng_int(rng, 0, 2), rng);
    mft_tensor *gy = make(xr, ys, dt, al, rng);
    mft_tensor *bias = kind < 2 ? make(1, kind == 0 ? &c->Cout : &c->Cin, dt, L_SLICE, rng) : NULL;
    mft_conv_params p;
    memset(&p, 0, sizeof p);
    p.nspatial = c->nsp;
    p.groups = c->groups;
    p.bias = bias;
    for (int i = 0; i < c->nsp; i++) {
        p.stride[i] = c->s[i];
        p.padding[i] = c->p[i];
        p.dilation[i] = c->d[i];
    }
    const int64_t *os = kind == 0 ? ys : kind == 1 ? xs : ws;
    mft_tensor *out = mft_full(xr, os, dt, ofmt, NAN);
    const mft_tensor *ins[2] = {kind == 0 ? x : gy, kind == 2 ? x : w};
    mft_tensor *outs[1] = {out};
    mft_kernel_args args = {2, 1, ins, outs, &p};
    if (!x || !w || !gy || !out || (kind < 2 && !bias)) {
        CHECK_MSG(false, "%s: inputs", name);
        goto done;
    }
    fn(&args);
    double *X = to_array(x), *Wv = to_array(w), *G = to_array(gy), *Bv = bias ? to_array(bias) : NULL;
    int64_t n = tu_shape_numel(xr, os);
    double *want = malloc(sizeof(double) * (size_t)n);
    if (kind == 0) naive_rel(TO_S, &r, want, X, Wv);
    else if (kind == 1) naive_rel(TO_B, &r, G, want, Wv);
    else naive_rel(TO_W, &r, G, X, want);
    if (Bv) {
        int64_t C = os[1], plane = n / (os[0] * C);
        for (int64_t i = 0; i < n; i++) want[i] += Bv[(i / plane) % C];
    }
    char what[600], desc[400];
    describe_cfg(c, desc, sizeof desc);
    snprintf(what, sizeof what, "kernel %s kind %d %s %s act:%s out:%s", name, kind, desc,
             mft_dtype_name(dt), layout_name[al], mft_format_name(ofmt));
    match(out, want, xr, os, tol_of(dt), what);
    free(X);
    free(Wv);
    free(G);
    free(Bv);
    free(want);
done:
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(gy);
    mft_tensor_release(bias);
    mft_tensor_release(out);
}

static int kind_of(mft__op_id op) {
    switch (op) {
    case MFT__OP_CONV2D:
    case MFT__OP_CONV3D: return 0;
    case MFT__OP_CONV2D_BACKWARD_INPUT:
    case MFT__OP_CONV3D_BACKWARD_INPUT: return 1;
    case MFT__OP_CONV2D_BACKWARD_WEIGHT:
    case MFT__OP_CONV3D_BACKWARD_WEIGHT: return 2;
    default: return -1;
    }
}

static int nsp_of(mft__op_id op) {
    return (op == MFT__OP_CONV3D || op == MFT__OP_CONV3D_BACKWARD_INPUT ||
            op == MFT__OP_CONV3D_BACKWARD_WEIGHT) ? 3 : 2;
}

/* A few configurations per spatial rank. */
static int kernel_cfgs(int nsp, cfg *out) {
    int n = 0;
    for (int v = 0; v < 6; v++) {
        cfg c = base_cfg(nsp, false);
        switch (v) {
        case 0: break;
        case 1:
            c.s[0] = 2;
            c.s[nsp - 1] = 3;
            c.p[0] = 1;
            c.p[nsp - 1] = 2;
            break;
        case 2:
            c.d[nsp - 1] = 2;
            c.p[nsp - 1] = 1;
            c.groups = 2;
            break;
        case 3: set_groups(&c, 2); c.s[nsp - 1] = 2; break;
        case 4:
            for (int i = 0; i < 3; i++) c.k[i] = 1;
            c.N = 1;
            c.Cin = 1;
            break;
        case 5:
            c.Cout = 1;
            c.in[nsp - 1] = 1;
            c.k[nsp - 1] = 1;
            c.p[0] = 2;
            break;
        }
        out[n++] = c;
    }
    return n;
}

static void test_reference_kernels_direct(void) {
    uint64_t rng = 41;
    static const mft__op_id ops[6] = {MFT__OP_CONV2D, MFT__OP_CONV2D_BACKWARD_INPUT,
                                      MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT__OP_CONV3D,
                                      MFT__OP_CONV3D_BACKWARD_INPUT, MFT__OP_CONV3D_BACKWARD_WEIGHT};
    CHECK(mft__conv_reference(MFT__OP_CONV2D, MFT_I32) == NULL);
    CHECK(mft__conv_reference(MFT__OP_MAX_POOL2D, MFT_F32) == NULL);
    for (int o = 0; o < 6; o++)
        for (int dt = 0; dt < 2; dt++) {
            mft_kernel_fn fn = mft__conv_reference(ops[o], dt ? MFT_F64 : MFT_F32);
            CHECK(fn != NULL);
            if (!fn) continue;
            cfg cs[8];
            int n = kernel_cfgs(nsp_of(ops[o]), cs);
            for (int i = 0; i < n; i++)
                for (int al = 0; al < L_COUNT; al++)
                    kernel_case(mft__op_name(ops[o]), fn, kind_of(ops[o]), &cs[i],
                                dt ? MFT_F64 : MFT_F32, al,
                                (mft_format)tu_rng_int(&rng, 0, 1), &rng);
        }
}

/* Every kernel of both conv tables on activations packed in its format
 * (ANY: every layout), outputs packed in that format; the nChw16c kernels
 * have their own tests (tests/ops/test_blocked_conv.c). */
static void test_table_kernels(void) {
    uint64_t rng = 51;
    const mft__kernel_def *tables[2] = {mft__kernels_conv_fast, mft__kernels_conv};
    int nkernels = 0;
    for (int t = 0; t < 2; t++)
        for (const mft__kernel_def *d = tables[t]; d->fn; d++) {
            int kind = kind_of(d->op);
            CHECK_MSG(kind >= 0, "kernel %s has a non-conv op", d->name);
            if (kind < 0) continue;
            /* the nChw16c kernels take blocked activations: test_blocked_conv.c */
            if (d->fmt == MFT_NCHW16C) continue;
            nkernels++;
            cfg cs[8];
            int n = kernel_cfgs(nsp_of(d->op), cs);
            for (int i = 0; i < n; i++)
                for (int al = 0; al < L_COUNT; al++) {
                    mft_format of = d->fmt == MFT_FORMAT_ANY ? (mft_format)tu_rng_int(&rng, 0, 1)
                                                             : d->fmt;
                    if (d->fmt != MFT_FORMAT_ANY && al != (d->fmt == MFT_CONTIGUOUS ? L_NCHW : L_NHWC))
                        continue;
                    kernel_case(d->name, d->fn, kind, &cs[i], d->dtype, al, of, &rng);
                }
        }
    CHECK(nkernels >= 24);
    printf("conv: %d table kernels checked\n", nkernels);
}

/* The dispatcher finds a kernel for every format without conversions. */
static void test_dispatch_formats(void) {
    uint64_t rng = 61;
    const int64_t xs[4] = {1, 2, 4, 4}, ws[4] = {3, 2, 3, 3};
    for (int dt = 0; dt < 2; dt++)
        for (int xl = 0; xl < 2; xl++)
            for (int wl = 0; wl < 2; wl++) {
                mft_dtype d = dt ? MFT_F64 : MFT_F32;
                mft_tensor *x = make(4, xs, d, xl, &rng), *w = make(4, ws, d, wl, &rng);
                mft_dispatch_set_strict(true);
                mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
                mft_dispatch_set_strict(false);
                CHECK_MSG(y != NULL, "strict dispatch: %s", mft_last_error_message());
                CHECK(strcmp(mft_dispatch_last()->op, "conv2d") == 0);
                mft_tensor_release(y);
                mft_tensor_release(x);
                mft_tensor_release(w);
            }
}

/* Scope: results belong to the open scope; nothing leaks. */
static void test_scope(void) {
    uint64_t rng = 71;
    const int64_t xs[4] = {1, 2, 4, 4}, ws[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 2, 2};
    mft_tensor *x = make(4, xs, MFT_F32, L_NHWC, &rng), *w = make(4, ws, MFT_F32, L_NCHW, &rng);
    mft_tensor *go = make(4, ys, MFT_F32, L_NCHW, &rng);
    int64_t live = mft_live_tensors();
    TU_OK_S(mft_scope_begin());
    mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    TU_OK_S(mft_conv2d_backward(go, x, w, NULL, NULL, NULL, 1, &gx, &gw, &gb));
    CHECK(y && gx && gw && gb);
    mft_tensor *kept = mft_scope_keep(gw);
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), live + 1);
    mft_tensor_release(kept);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(go);
}

/* Results do not depend on the thread count (every kernel, F32 and F64,
 * forward and the three gradients), on sizes big enough to go parallel. */
static void test_thread_count_independence(void) {
    const int64_t xs[4] = {4, 16, 20, 18}, ws[4] = {24, 8, 3, 3}, pd[2] = {1, 0}, st[2] = {1, 2};
    const int saved = mft_num_threads();
    for (int dt = 0; dt < 2; dt++)
        for (int f = 0; f < 2; f++) {
            mft_dtype d = dt ? MFT_F64 : MFT_F32;
            mft_format fm = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x = mft_randn(4, xs, d, fm, 5), *w = mft_randn(4, ws, d, fm, 6);
            uint64_t h[2][4] = {{0}};
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                mft_tensor *y = mft_conv2d(x, w, NULL, st, pd, NULL, 2);
                mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), d, fm, 7) : NULL;
                mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
                mft_status s = mft_conv2d_backward(go, x, w, st, pd, NULL, 2, &gx, &gw, &gb);
                CHECK_MSG(s == MFT_OK, "%s", mft_last_error_message());
                h[t][0] = mft_tensor_hash(y);
                h[t][1] = mft_tensor_hash(gx);
                h[t][2] = mft_tensor_hash(gw);
                h[t][3] = mft_tensor_hash(gb);
                mft_tensor *ts[5] = {y, go, gx, gw, gb};
                for (int i = 0; i < 5; i++) mft_tensor_release(ts[i]);
            }
            for (int i = 0; i < 4; i++)
                CHECK_MSG(h[0][i] == h[1][i] && h[0][i] != 0,
                          "%s %s: output %d differs between 1 and 2 threads", mft_dtype_name(d),
                          mft_format_name(fm), i);
            mft_tensor_release(x);
            mft_tensor_release(w);
        }
    mft_set_num_threads(saved);
}

/* ------------------------------------------------------------------ (c) errors */
#define FAIL_T(expr, st, needle)                                                                   \
    do {                                                                                           \
        TU_EXPECT_NULL_(expr, #expr);                                                              \
        CHECK_ERR(st, needle);                                                                     \
        g_errors++;                                                                                \
    } while (0)
#define FAIL_S(expr, st, needle)                                                                   \
    do {                                                                                           \
        TU_EXPECT_STATUS_(expr, #expr, st);                                                        \
        CHECK_ERR(st, needle);                                                                     \
        g_errors++;                                                                                \
    } while (0)
static int g_errors;

static void test_errors(void) {
    uint64_t rng = 81;
    const int64_t xs[4] = {2, 4, 5, 5}, ws[4] = {6, 4, 3, 3}, ys[4] = {2, 6, 3, 3};
    const int64_t x3s[3] = {2, 4, 5}, w3s[3] = {6, 4, 3}, x5s[5] = {1, 4, 3, 3, 3},
                  w5s[5] = {6, 4, 2, 2, 2};
    mft_tensor *x = make(4, xs, MFT_F32, L_NCHW, &rng), *w = make(4, ws, MFT_F32, L_NCHW, &rng);
    mft_tensor *go = make(4, ys, MFT_F32, L_NCHW, &rng);
    mft_tensor *x64 = make(4, xs, MFT_F64, L_NCHW, &rng);
    mft_tensor *xi = mft_zeros(4, xs, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *x3 = make(3, x3s, MFT_F32, L_NCHW, &rng), *w3 = make(3, w3s, MFT_F32, L_NCHW, &rng);
    mft_tensor *x5 = make(5, x5s, MFT_F32, L_NCHW, &rng), *w5 = make(5, w5s, MFT_F32, L_NCHW, &rng);
    const int64_t b5 = 5, b6 = 6;
    mft_tensor *bad_b = make(1, &b5, MFT_F32, L_NCHW, &rng), *b64 = make(1, &b6, MFT_F64, L_NCHW, &rng);
    const int64_t s0[2] = {0, 1}, sn[2] = {1, -2}, pn[2] = {-1, 0}, d0[2] = {1, 0};
    const int64_t p9[2] = {9, 0}, big[2] = {(int64_t)1 << 40, 1};
    const int64_t two[2] = {2, 2}, op2[2] = {2, 0}, k9s[4] = {6, 4, 9, 3};
    mft_tensor *w9 = make(4, k9s, MFT_F32, L_NCHW, &rng);
    const int64_t wg[4] = {6, 2, 3, 3}, w5c[4] = {5, 2, 3, 3}, wt[4] = {3, 2, 3, 3};
    mft_tensor *wgt = make(4, wg, MFT_F32, L_NCHW, &rng), *w5ct = make(4, w5c, MFT_F32, L_NCHW, &rng);
    mft_tensor *wtt = make(4, wt, MFT_F32, L_NCHW, &rng);
    const int64_t wt4s[4] = {4, 2, 3, 3};
    mft_tensor *wT4 = make(4, wt4s, MFT_F32, L_NCHW, &rng);
    const int64_t z[4] = {2, 4, 0, 5};
    mft_tensor *xz = mft_zeros(4, z, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *gx = (mft_tensor *)&rng, *gw = (mft_tensor *)&rng, *gb = (mft_tensor *)&rng;

    FAIL_T(mft_conv2d(NULL, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_NULL, "mft_conv2d: argument 'x'");
    FAIL_T(mft_conv2d(x, NULL, NULL, NULL, NULL, NULL, 1), MFT_ERR_NULL, "mft_conv2d: argument 'w'");
    FAIL_T(mft_conv2d(x5, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_RANK, "got rank 5");
    FAIL_T(mft_conv2d(x, w3, NULL, NULL, NULL, NULL, 1), MFT_ERR_RANK, "mft_conv2d: expected a 4-D weight");
    FAIL_T(mft_conv1d(x, w3, NULL, NULL, NULL, NULL, 1), MFT_ERR_RANK, "mft_conv1d: expected a 3-D");
    FAIL_T(mft_conv3d(x3, w5, NULL, NULL, NULL, NULL, 1), MFT_ERR_RANK, "mft_conv3d: expected a 5-D");
    FAIL_T(mft_conv3d(x5, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_RANK, "got rank 4");
    FAIL_T(mft_conv2d(xi, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_DTYPE, "i32");
    FAIL_T(mft_conv2d(x64, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_DTYPE, "weight dtype f32 differs from input dtype f64");
    FAIL_T(mft_conv2d(x, w, b64, NULL, NULL, NULL, 1), MFT_ERR_DTYPE, "bias dtype f64");
    FAIL_T(mft_conv2d(x, w, bad_b, NULL, NULL, NULL, 1), MFT_ERR_SHAPE, "bias sizes [5] should be [6]");
    FAIL_T(mft_conv2d(x, w, NULL, s0, NULL, NULL, 1), MFT_ERR_INVALID, "stride [0,1]");
    FAIL_T(mft_conv2d(x, w, NULL, sn, NULL, NULL, 1), MFT_ERR_INVALID, "stride [1,-2]");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, pn, NULL, 1), MFT_ERR_INVALID, "padding [-1,0]");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, NULL, d0, 1), MFT_ERR_INVALID, "dilation [1,0]");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, big, NULL, 1), MFT_ERR_OVERFLOW, "padding [1099511627776,1]");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, NULL, NULL, 0), MFT_ERR_INVALID, "groups 0");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, NULL, NULL, -2), MFT_ERR_INVALID, "groups -2");
    FAIL_T(mft_conv2d(x, w, NULL, NULL, NULL, NULL, 3), MFT_ERR_SHAPE, "input channels 4 are not divisible by groups 3");
    FAIL_T(mft_conv2d(x, wgt, NULL, NULL, NULL, NULL, 1), MFT_ERR_SHAPE, "expect 2 input channels");
    FAIL_T(mft_conv2d(x, w5ct, NULL, NULL, NULL, NULL, 2), MFT_ERR_SHAPE, "output channels 5");
    FAIL_T(mft_conv2d(x, w9, NULL, NULL, NULL, NULL, 1), MFT_ERR_SHAPE, "kernel larger than padded input: padded input size 5");
    FAIL_T(mft_conv2d(x, w9, NULL, NULL, NULL, two, 1), MFT_ERR_SHAPE, "dilated kernel size 17");
    FAIL_T(mft_conv2d(xz, w, NULL, NULL, NULL, NULL, 1), MFT_ERR_SHAPE, "[2,4,0,5]");
    FAIL_T(mft_conv1d(x3, w3, NULL, NULL, p9, NULL, 2), MFT_ERR_SHAPE, "mft_conv1d: weight sizes [6,4,3] with groups 2 expect 8");
    FAIL_T(mft_conv_transpose2d(x, wtt, NULL, NULL, NULL, NULL, NULL, 1), MFT_ERR_SHAPE,
           "mft_conv_transpose2d: weight sizes [3,2,3,3] expect 3 input channels");
    FAIL_T(mft_conv_transpose2d(x, wT4, NULL, NULL, NULL, op2, NULL, 1), MFT_ERR_INVALID,
           "output_padding [2,0] should be smaller than stride [1,1] or dilation [1,1]");
    FAIL_T(mft_conv_transpose2d(x, wT4, NULL, two, p9, NULL, NULL, 1), MFT_ERR_SHAPE,
           "output size -7 is not positive");
    /* backward */
    FAIL_S(mft_conv2d_backward(NULL, x, w, NULL, NULL, NULL, 1, &gx, &gw, &gb), MFT_ERR_NULL,
           "mft_conv2d_backward: argument 'grad_out'");
    CHECK(gx == NULL && gw == NULL && gb == NULL);
    gx = gw = gb = (mft_tensor *)&rng;
    FAIL_S(mft_conv2d_backward(x, x, w, NULL, NULL, NULL, 1, &gx, &gw, &gb), MFT_ERR_SHAPE,
           "grad_out sizes [2,4,5,5] differ from the output sizes [2,6,3,3]");
    CHECK(gx == NULL && gw == NULL && gb == NULL);
    FAIL_S(mft_conv2d_backward(go, x64, w, NULL, NULL, NULL, 1, &gx, NULL, NULL), MFT_ERR_DTYPE,
           "mft_conv2d_backward: weight dtype");
    mft_tensor *go64 = mft_to_dtype(go, MFT_F64);
    FAIL_S(mft_conv2d_backward(go64, x, w, NULL, NULL, NULL, 1, NULL, &gw, NULL), MFT_ERR_DTYPE,
           "grad_out dtype f64");
    FAIL_S(mft_conv3d_backward(go, x, w, NULL, NULL, NULL, 1, NULL, &gw, NULL), MFT_ERR_RANK,
           "mft_conv3d_backward");
    FAIL_S(mft_conv1d_backward(go, x3, w3, s0, NULL, NULL, 1, NULL, &gw, NULL), MFT_ERR_INVALID,
           "mft_conv1d_backward: stride [0]");
    FAIL_S(mft_conv_transpose2d_backward(go, x, wT4, NULL, NULL, op2, NULL, 1, &gx, NULL, NULL),
           MFT_ERR_INVALID, "mft_conv_transpose2d_backward: output_padding [2,0]");
    CHECK(gx == NULL && gw == NULL);
    mft_tensor_release(go64);
    /* int64 overflow: a broadcast x (stride 0, no memory) with huge sizes */
    {
        const int64_t one[4] = {1, 1, 1, 1}, hx[4] = {(int64_t)1 << 22, 1, (int64_t)1 << 20, 4};
        const int64_t wc[4] = {(int64_t)1 << 20, 1, 1, 1}, tx[4] = {1, 1, 1, (int64_t)1 << 40};
        const int64_t big_s[2] = {1, (int64_t)1 << 30};
        mft_tensor *x1 = mft_zeros(4, one, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *xh = mft_expand(x1, 4, hx), *xt = mft_expand(x1, 4, tx);
        mft_tensor *wh = mft_zeros(4, wc, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *w1 = mft_zeros(4, one, MFT_F32, MFT_CONTIGUOUS);
        CHECK(xh && xt && wh && w1);
        int64_t live = mft_live_tensors();
        FAIL_T(mft_conv2d(xh, wh, NULL, NULL, NULL, NULL, 1), MFT_ERR_OVERFLOW,
               "mft_conv2d: output sizes [4194304,1048576,1048576,4] overflow");
        FAIL_T(mft_conv_transpose2d(xt, w1, NULL, big_s, NULL, NULL, NULL, 1), MFT_ERR_OVERFLOW,
               "input size 1099511627776 with stride 1073741824 overflows");
        gw = (mft_tensor *)&rng;
        FAIL_S(mft_conv2d_backward(xh, xh, wh, NULL, NULL, NULL, 1, NULL, &gw, NULL),
               MFT_ERR_OVERFLOW, "mft_conv2d_backward: output sizes");
        CHECK(gw == NULL);
        CHECK_EQ_I(mft_live_tensors(), live); /* failing calls allocate nothing */
        mft_tensor_release(x1);
        mft_tensor_release(xh);
        mft_tensor_release(xt);
        mft_tensor_release(wh);
        mft_tensor_release(w1);
    }
    CHECK_MSG(g_errors >= 25, "only %d error cases", g_errors);
    mft_tensor *ts[] = {x, w, go, x64, xi, x3, w3, x5, w5, bad_b, b64, w9, wgt, w5ct, wtt, wT4, xz};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) mft_tensor_release(ts[i]);
}

/* An empty batch follows the conv output rule like any other (docs/spec.md §4:
 * CHANNELS_LAST when the input's or the weight's tag is), whatever way the
 * empty input was made channels_last. */
static void test_empty_batch_format(void) {
    const int64_t xs[4] = {0, 3, 5, 4}, ws[4] = {2, 3, 3, 3};
    mft_tensor *x0 = mft_zeros(4, xs, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xs_[3] = {mft_zeros(4, xs, MFT_F32, MFT_CHANNELS_LAST),
                          mft_to_format(x0, MFT_CHANNELS_LAST),
                          mft_contiguous(x0, MFT_CHANNELS_LAST)};
    mft_tensor *w = mft_ones(4, ws, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *wl = mft_ones(4, ws, MFT_F32, MFT_CHANNELS_LAST);
    for (int k = 0; k < 4; k++) {
        mft_tensor *y = k < 3 ? mft_conv2d(xs_[k], w, NULL, NULL, NULL, NULL, 1)
                              : mft_conv2d(x0, wl, NULL, NULL, NULL, NULL, 1);
        CHECK_MSG(y && mft_tensor_numel(y) == 0 && mft_tensor_format(y) == MFT_CHANNELS_LAST &&
                      mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST),
                  "case %d: %s", k, y ? mft_format_name(mft_tensor_format(y)) : mft_last_error_message());
        mft_tensor_release(y);
    }
    for (int k = 0; k < 3; k++) mft_tensor_release(xs_[k]);
    mft_tensor_release(x0);
    mft_tensor_release(w);
    mft_tensor_release(wl);
}

int main(void) {
    RUN(test_errors);
    RUN(test_reference_kernels_direct);
    RUN(test_table_kernels);
    RUN(test_conv2d_sweep);
    RUN(test_conv1d_sweep);
    RUN(test_conv3d_sweep);
    RUN(test_conv_transpose2d_sweep);
    RUN(test_corners);
    RUN(test_select_unsqueeze_and_pitfalls);
    RUN(test_dispatch_formats);
    RUN(test_scope);
    RUN(test_thread_count_independence);
    RUN(test_empty_batch_format);
    printf("conv: %lld entry-point cases, %d error cases\n", (long long)g_cases_run, g_errors);
    TEST_MAIN_END();
}
