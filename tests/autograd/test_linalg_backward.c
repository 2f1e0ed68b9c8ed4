/* tests/autograd/test_linalg_backward.c — mft_matmul_backward and mft_linear_backward
 * (ops/linalg/):
 *   (a) both against naive loops written here over PyTorch's matmul cases
 *       (1-D x 1-D, 1-D x 2-D, 2-D x 1-D, 2-D x 2-D, batched with broadcast
 *       batch dims on either side, batched x 1-D), strided (transposed /
 *       sliced) inputs, F32 and F64, with the fast and the portable
 *       micro-kernels; sizes, dtype and packing of every gradient;
 *   (b) linear on rank 1, 2 and 3 x; NULL outs skip a gradient;
 *   (c) finite differences in F64; bit-identical results at 1 and 2 threads;
 *   (d) errors (status, message names the function, outs set to NULL). */
#include <math.h>
#include <string.h>
#include "mft/cnn.h"
#include "ops_internal.h"
#include "test_util.h"

void mft__gemm_set_portable(bool on);

/* packed, or (strided) the transpose of a packed tensor of swapped last dims */
static mft_tensor *make(int nd, const int64_t *sz, mft_dtype dt, bool strided, uint64_t *rng) {
    mft_tensor *t;
    if (strided && nd >= 2) {
        int64_t s2[MFT_MAX_DIMS];
        memcpy(s2, sz, sizeof(int64_t) * (size_t)nd);
        s2[nd - 1] = sz[nd - 2], s2[nd - 2] = sz[nd - 1];
        mft_tensor *b = mft_empty(nd, s2, dt, MFT_CONTIGUOUS);
        t = mft_transpose(b, -1, -2);
        mft_tensor_release(b);
    } else if (strided) {
        const int64_t w[1] = {2 * sz[0]};
        mft_tensor *b = mft_empty(1, w, dt, MFT_CONTIGUOUS);
        t = mft_slice(b, 0, 0, w[0], 2);
        mft_tensor_release(b);
    } else {
        t = mft_empty(nd, sz, dt, MFT_CONTIGUOUS);
    }
    tu_fill_grid(t, rng);
    return t;
}

/* Naive: promote 1-D, broadcast batch dims, accumulate grads into packed
 * double arrays of a's / b's numel. */
static void naive_mm_bw(const mft_tensor *g, const mft_tensor *a, const mft_tensor *b, double *ga,
                        double *gb) {
    const bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    const int64_t M = a1 ? 1 : a->sizes[a->ndim - 2], K = a->sizes[a->ndim - 1];
    const int64_t N = b1 ? 1 : b->sizes[b->ndim - 1];
    const int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    const int nb = nba > nbb ? nba : nbb;
    int64_t bs[MFT_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        const int da = d - (nb - nba), db = d - (nb - nbb);
        const int64_t sa = da >= 0 ? a->sizes[da] : 1, sb = db >= 0 ? b->sizes[db] : 1;
        bs[d] = sa > sb ? sa : sb;
    }
    memset(ga, 0, sizeof(double) * (size_t)(a->numel ? a->numel : 1));
    memset(gb, 0, sizeof(double) * (size_t)(b->numel ? b->numel : 1));
    int64_t bi[MFT_MAX_DIMS] = {0};
    for (;;) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t gi[MFT_MAX_DIMS];
                int k = 0;
                for (int d = 0; d < nb; d++) gi[k++] = bi[d];
                if (!a1) gi[k++] = m;
                if (!b1) gi[k++] = n;
                const double gv = mft_tensor_get(g, gi);
                for (int64_t kk = 0; kk < K; kk++) {
                    int64_t ai[MFT_MAX_DIMS], bj[MFT_MAX_DIMS];
                    int na = 0, nbj = 0;
                    int64_t la = 0, lb = 0;
                    for (int d = 0; d < nba; d++) ai[na++] = a->sizes[d] == 1 ? 0 : bi[d + nb - nba];
                    if (!a1) ai[na++] = m;
                    ai[na++] = kk;
                    for (int d = 0; d < nbb; d++) bj[nbj++] = b->sizes[d] == 1 ? 0 : bi[d + nb - nbb];
                    bj[nbj++] = kk;
                    if (!b1) bj[nbj++] = n;
                    for (int d = 0; d < na; d++) la = la * a->sizes[d] + ai[d];
                    for (int d = 0; d < nbj; d++) lb = lb * b->sizes[d] + bj[d];
                    ga[la] += gv * mft_tensor_get(b, bj);
                    gb[lb] += gv * mft_tensor_get(a, ai);
                }
            }
        int d = nb - 1;
        for (; d >= 0; d--) {
            if (++bi[d] < bs[d]) break;
            bi[d] = 0;
        }
        if (d < 0) break;
    }
}

static void compare(const mft_tensor *got, const mft_tensor *like, const double *want, double tol,
                    const char *what) {
    CHECK_MSG(got != NULL, "%s: NULL (%s)", what, mft_last_error_message());
    if (!got) return;
    CHECK_MSG(tu_has_sizes(got, like->ndim, like->sizes) && got->ndim == like->ndim, "%s: sizes",
              what);
    CHECK_MSG(got->dtype == like->dtype, "%s: dtype", what);
    /* packed in the input's tag for ranks 3-5 (docs/spec.md §5), else CONTIGUOUS */
    const mft_format fmt = like->ndim >= 3 && like->ndim <= 5 ? like->tag : MFT_CONTIGUOUS;
    CHECK_MSG(mft_tensor_is_contiguous(got, fmt), "%s: not packed in format %d", what, (int)fmt);
    int64_t idx[MFT_MAX_DIMS] = {0}, lin = 0;
    int bad = 0;
    if (got->numel)
        do {
            const double g = mft_tensor_get(got, idx), w = want[lin++];
            if (!(fabs(g - w) <= tol * (1 + fabs(w)))) {
                if (bad < 3) CHECK_MSG(false, "%s: element %lld got %.9g want %.9g", what,
                                       (long long)(lin - 1), g, w);
                bad++;
            }
        } while (tu_next_index(got->ndim, got->sizes, idx));
    CHECK_MSG(bad == 0, "%s: %d mismatches", what, bad);
}

typedef struct mm_case {
    int na;
    int64_t a[4];
    int nb;
    int64_t b[4];
} mm_case;

static const mm_case MM[] = {
    {1, {7}, 1, {7}},
    {1, {5}, 2, {5, 9}},
    {2, {6, 5}, 1, {5}},
    {2, {13, 21}, 2, {21, 19}},
    {2, {1, 1}, 2, {1, 1}},
    {3, {3, 7, 5}, 2, {5, 17}},
    {2, {7, 5}, 3, {3, 5, 4}},
    {4, {2, 1, 7, 6}, 3, {3, 6, 5}},
    {3, {1, 4, 6}, 3, {4, 6, 3}},
    {3, {3, 7, 5}, 1, {5}},
    {1, {5}, 3, {3, 5, 4}},
    {4, {2, 3, 9, 33}, 4, {2, 3, 33, 20}},
};

static void test_matmul_backward(void) {
    uint64_t rng = 42;
    const int n = (int)(sizeof MM / sizeof MM[0]);
    for (int port = 0; port < 2; port++) {
        mft__gemm_set_portable(port == 1);
        for (int i = 0; i < n; i++)
            for (int dti = 0; dti < 2; dti++)
                for (int strided = 0; strided < 2; strided++) {
                    const mft_dtype dt = dti ? MFT_F64 : MFT_F32;
                    char what[96];
                    snprintf(what, sizeof what, "matmul_bw case %d %s strided=%d portable=%d", i,
                             mft_dtype_name(dt), strided, port);
                    mft_tensor *a = make(MM[i].na, MM[i].a, dt, strided, &rng);
                    mft_tensor *b = make(MM[i].nb, MM[i].b, dt, !strided, &rng);
                    mft_tensor *y = mft_matmul(a, b);
                    mft_tensor *g = y ? mft_empty_like(y, MFT_PRESERVE) : NULL;
                    CHECK_MSG(g != NULL, "%s: %s", what, mft_last_error_message());
                    if (!g) continue;
                    tu_fill_grid(g, &rng);
                    mft_tensor *ga = NULL, *gb = NULL;
                    TU_OK_S(mft_matmul_backward(g, a, b, &ga, &gb));
                    double *wa = malloc(sizeof(double) * (size_t)(a->numel + 1));
                    double *wb = malloc(sizeof(double) * (size_t)(b->numel + 1));
                    naive_mm_bw(g, a, b, wa, wb);
                    const double tol = dt == MFT_F32 ? 2e-5 : 1e-12;
                    compare(ga, a, wa, tol, what);
                    compare(gb, b, wb, tol, what);
                    /* only one gradient requested */
                    mft_tensor *gb2 = NULL;
                    TU_OK_S(mft_matmul_backward(g, a, b, NULL, &gb2));
                    compare(gb2, b, wb, tol, what);
                    free(wa);
                    free(wb);
                    mft_tensor *all[] = {a, b, y, g, ga, gb, gb2};
                    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
                        mft_tensor_release(all[k]);
                }
    }
    mft__gemm_set_portable(false);
}

/* The gradient of a 4-D NHWC-tagged a is packed NHWC (the input's tag). */
static void test_matmul_backward_format(void) {
    uint64_t rng = 4;
    const int64_t as[4] = {2, 3, 4, 5}, bs[2] = {5, 6};
    mft_tensor *a = mft_empty(4, as, MFT_F32, MFT_CHANNELS_LAST);
    tu_fill_grid(a, &rng);
    mft_tensor *b = make(2, bs, MFT_F32, false, &rng);
    mft_tensor *y = mft_matmul(a, b), *g = y ? mft_empty_like(y, MFT_CONTIGUOUS) : NULL;
    if (g) tu_fill_grid(g, &rng);
    mft_tensor *ga = NULL, *gb = NULL;
    TU_OK_S(mft_matmul_backward(g, a, b, &ga, &gb));
    CHECK(ga && mft_tensor_is_contiguous(ga, MFT_CHANNELS_LAST) && ga->tag == MFT_CHANNELS_LAST);
    double *wa = malloc(sizeof(double) * 120), *wb = malloc(sizeof(double) * 30);
    naive_mm_bw(g, a, b, wa, wb);
    int64_t idx[4] = {0}, lin = 0;
    int bad = 0;
    if (ga)
        do bad += fabs(mft_tensor_get(ga, idx) - wa[lin++]) > 2e-5;
        while (tu_next_index(4, as, idx));
    CHECK_EQ_I(bad, 0);
    free(wa);
    free(wb);
    mft_tensor *all[] = {a, b, y, g, ga, gb};
    for (size_t k = 0; k < 6; k++) mft_tensor_release(all[k]);
}

static void test_linear_backward(void) {
    uint64_t rng = 7;
    const int64_t xs_list[3][3] = {{9, 0, 0}, {6, 9, 0}, {2, 3, 9}};
    for (int r = 1; r <= 3; r++)
        for (int dti = 0; dti < 2; dti++) {
            const mft_dtype dt = dti ? MFT_F64 : MFT_F32;
            const int64_t ws[2] = {11, 9}, bsz[1] = {11};
            mft_tensor *x = make(r, xs_list[r - 1], dt, r == 2, &rng);
            mft_tensor *w = make(2, ws, dt, dti == 1, &rng);
            mft_tensor *bias = make(1, bsz, dt, false, &rng);
            mft_tensor *y = mft_linear(x, w, bias), *g = y ? mft_empty_like(y, MFT_CONTIGUOUS) : NULL;
            CHECK(g != NULL);
            if (!g) continue;
            tu_fill_grid(g, &rng);
            mft_tensor *gx = NULL, *gw = NULL, *gbias = NULL;
            TU_OK_S(mft_linear_backward(g, x, w, &gx, &gw, &gbias));
            /* naive: linear = matmul(x, w^T) */
            mft_tensor *wt = mft_transpose(w, 0, 1);
            double *wx = malloc(sizeof(double) * (size_t)(x->numel + 1));
            double *wwt = malloc(sizeof(double) * (size_t)(w->numel + 1));
            naive_mm_bw(g, x, wt, wx, wwt);
            const double tol = dt == MFT_F32 ? 2e-5 : 1e-12;
            compare(gx, x, wx, tol, "linear grad_x");
            /* wwt is the gradient of w^T (9 x 11): transpose into w's order */
            double *ww = malloc(sizeof(double) * (size_t)(w->numel + 1));
            for (int i = 0; i < 11; i++)
                for (int k = 0; k < 9; k++) ww[i * 9 + k] = wwt[k * 11 + i];
            compare(gw, w, ww, tol, "linear grad_w");
            double wbias[11] = {0};
            int64_t idx[3] = {0};
            do wbias[idx[r - 1]] += mft_tensor_get(g, idx);
            while (tu_next_index(g->ndim, g->sizes, idx));
            compare(gbias, bias, wbias, tol, "linear grad_b");
            mft_tensor *gw2 = NULL;
            TU_OK_S(mft_linear_backward(g, x, w, NULL, &gw2, NULL));
            compare(gw2, w, ww, tol, "linear grad_w alone");
            free(wx);
            free(wwt);
            free(ww);
            mft_tensor *all[] = {x, w, bias, y, g, gx, gw, gbias, wt, gw2};
            for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mft_tensor_release(all[k]);
        }
}

/* F64 finite differences: L = sum(matmul(a, b) * g) is bilinear, so the
 * central difference along (va, 0) is exactly <grad_a, va>. */
static double dot_all(const mft_tensor *a, const mft_tensor *b) {
    int64_t idx[MFT_MAX_DIMS] = {0};
    double s = 0;
    do s += mft_tensor_get(a, idx) * mft_tensor_get(b, idx);
    while (tu_next_index(a->ndim, a->sizes, idx));
    return s;
}

static void test_fd(void) {
    uint64_t rng = 77;
    const int64_t as[3] = {2, 4, 5}, bs[3] = {1, 5, 3};
    mft_tensor *a = make(3, as, MFT_F64, false, &rng), *b = make(3, bs, MFT_F64, false, &rng);
    mft_tensor *va = make(3, as, MFT_F64, false, &rng), *vb = make(3, bs, MFT_F64, false, &rng);
    mft_tensor *y = mft_matmul(a, b), *g = mft_empty_like(y, MFT_CONTIGUOUS);
    tu_fill_grid(g, &rng);
    const double h = 1e-3;
    mft_tensor *ha = mft_mul_scalar(va, h), *hb = mft_mul_scalar(vb, h);
    mft_tensor *ap = mft_add(a, ha), *am = mft_sub(a, ha), *bp = mft_add(b, hb), *bm = mft_sub(b, hb);
    mft_tensor *y1 = mft_matmul(ap, b), *y2 = mft_matmul(am, b), *y3 = mft_matmul(a, bp),
               *y4 = mft_matmul(a, bm);
    mft_tensor *ga = NULL, *gb = NULL;
    TU_OK_S(mft_matmul_backward(g, a, b, &ga, &gb));
    if (ga && gb) {
        CHECK_NEAR((dot_all(y1, g) - dot_all(y2, g)) / (2 * h), dot_all(ga, va), 1e-9);
        CHECK_NEAR((dot_all(y3, g) - dot_all(y4, g)) / (2 * h), dot_all(gb, vb), 1e-9);
    }
    mft_tensor *all[] = {a, b, va, vb, y, g, ha, hb, ap, am, bp, bm, y1, y2, y3, y4, ga, gb};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mft_tensor_release(all[k]);
}

static bool same_bits(const mft_tensor *x, const mft_tensor *y) {
    return x && y && x->numel == y->numel &&
           memcmp(mft__tensor_ptr(x), mft__tensor_ptr(y), (size_t)x->numel * 4) == 0;
}

static void test_threads(void) {
    uint64_t rng = 8;
    const int64_t xs[3] = {4, 16, 313}, ws[2] = {128, 313};
    mft_tensor *x = make(3, xs, MFT_F32, false, &rng), *w = make(2, ws, MFT_F32, false, &rng);
    const int64_t gs[3] = {4, 16, 128};
    mft_tensor *g = make(3, gs, MFT_F32, false, &rng);
    mft_tensor *r[2][3] = {{NULL}};
    const int nt = mft_num_threads();
    for (int t = 0; t < 2; t++) {
        mft_set_num_threads(t + 1);
        TU_OK_S(mft_linear_backward(g, x, w, &r[t][0], &r[t][1], &r[t][2]));
    }
    mft_set_num_threads(nt);
    for (int k = 0; k < 3; k++) {
        CHECK_MSG(same_bits(r[0][k], r[1][k]), "gradient %d differs between 1 and 2 threads", k);
        mft_tensor_release(r[0][k]);
        mft_tensor_release(r[1][k]);
    }
    /* batched matmul with a broadcast batch dim (reduced by gemm_sum_to) */
    const int64_t as[3] = {64, 33, 40}, bs[2] = {40, 50}, b3[3] = {1, 40, 50};
    mft_tensor *a = make(3, as, MFT_F32, false, &rng), *b = make(3, b3, MFT_F32, false, &rng);
    (void)bs;
    mft_tensor *y = mft_matmul(a, b), *gy = mft_empty_like(y, MFT_CONTIGUOUS);
    tu_fill_grid(gy, &rng);
    mft_tensor *q[2][2] = {{NULL}};
    for (int t = 0; t < 2; t++) {
        mft_set_num_threads(t + 1);
        TU_OK_S(mft_matmul_backward(gy, a, b, &q[t][0], &q[t][1]));
    }
    mft_set_num_threads(nt);
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(same_bits(q[0][k], q[1][k]), "matmul gradient %d differs across threads", k);
        mft_tensor_release(q[0][k]);
        mft_tensor_release(q[1][k]);
    }
    mft_tensor *all[] = {x, w, g, a, b, y, gy};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mft_tensor_release(all[k]);
}

static void test_errors(void) {
    const int64_t as[2] = {3, 4}, bs[2] = {4, 5}, gs[2] = {3, 5}, bad[2] = {3, 6};
    mft_tensor *a = mft_zeros(2, as, MFT_F32, MFT_CONTIGUOUS), *b = mft_zeros(2, bs, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g = mft_zeros(2, gs, MFT_F32, MFT_CONTIGUOUS), *gbad = mft_zeros(2, bad, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *b64 = mft_zeros(2, bs, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *ga = (mft_tensor *)1, *gb = (mft_tensor *)1;
    TU_EXPECT_STATUS_(mft_matmul_backward(NULL, a, b, &ga, &gb), "null", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_matmul_backward");
    CHECK(ga == NULL && gb == NULL);
    TU_EXPECT_STATUS_(mft_matmul_backward(gbad, a, b, &ga, &gb), "grad sizes", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_matmul_backward");
    TU_EXPECT_STATUS_(mft_matmul_backward(g, a, a, &ga, &gb), "inner", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_matmul_backward");
    TU_EXPECT_STATUS_(mft_matmul_backward(g, a, b64, &ga, &gb), "dtype", MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_matmul_backward");
    CHECK(ga == NULL && gb == NULL);
    /* linear: w (5, 4), x (3, 4), grad (3, 5) */
    const int64_t ws[2] = {5, 4};
    mft_tensor *w = mft_zeros(2, ws, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *gx = (mft_tensor *)1, *gw = (mft_tensor *)1, *gbias = (mft_tensor *)1;
    TU_EXPECT_STATUS_(mft_linear_backward(gbad, a, w, &gx, &gw, &gbias), "lin grad", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_linear_backward");
    CHECK(gx == NULL && gw == NULL && gbias == NULL);
    TU_EXPECT_STATUS_(mft_linear_backward(g, a, b, &gx, &gw, &gbias), "lin w", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_linear_backward");
    TU_EXPECT_STATUS_(mft_linear_backward(g, a, NULL, &gx, &gw, &gbias), "lin null", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_linear_backward");
    mft_tensor *all[] = {a, b, g, gbad, b64, w};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) mft_tensor_release(all[k]);
}

int main(void) {
    RUN(test_matmul_backward);
    RUN(test_matmul_backward_format);
    RUN(test_linear_backward);
    RUN(test_fd);
    RUN(test_threads);
    RUN(test_errors);
    TEST_MAIN_END();
}
