/* tests/tensor/test_iter.c — the elementwise iterator, step by step, on raw stride
 * arrays: broadcast shapes (and their errors), the dim reorder with PyTorch's
 * tie rules (first operand decides, broadcast dims skipped, equal strides put
 * the larger dim outward), coalescing, and the 2-D loop driver visiting every
 * element exactly once for every chunking. */
#include "harness.h"
#include "internal.h"

static void test_broadcast_shape(void) {
    int64_t a[4] = {2, 3, 4, 4}, b[3] = {3, 1, 4}, out[MFT_MAX_DIMS];
    const int64_t *sz[2] = {a, b};
    int nd[2] = {4, 3}, ond = 0;
    CHECK(mft__broadcast_shape("t", 2, nd, sz, &ond, out) == MFT_OK);
    CHECK(ond == 4 && out[0] == 2 && out[1] == 3 && out[2] == 4 && out[3] == 4);
    int64_t c[3] = {3, 1, 5};
    sz[1] = c;
    CHECK(mft__broadcast_shape("mft_add", 2, nd, sz, &ond, out) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "[2,3,4,4] and [3,1,5] do not broadcast at dim 3");
    /* size 0 broadcasts with 1, not with 2 */
    int64_t z[1] = {0}, one[1] = {1}, two[1] = {2};
    const int64_t *zs[2] = {z, one};
    int n1[2] = {1, 1};
    CHECK(mft__broadcast_shape("t", 2, n1, zs, &ond, out) == MFT_OK && out[0] == 0);
    zs[1] = two;
    CHECK(mft__broadcast_shape("t", 2, n1, zs, &ond, out) == MFT_ERR_SHAPE);
    mft_clear_error();
    /* rank 0 with anything */
    int n0[2] = {0, 2};
    int64_t p[2] = {5, 6};
    const int64_t *ps[2] = {NULL, p};
    CHECK(mft__broadcast_shape("t", 2, n0, ps, &ond, out) == MFT_OK && ond == 2 && out[1] == 6);
}

static void reorder(int nops, int ndim, const int64_t *shape, int64_t st[][MFT_MAX_DIMS],
                    int *perm) {
    mft__iter_reorder(nops, ndim, shape, &st[0][0], perm);
}

#define PERM4(p, a, b, c, d) ((p)[0] == (a) && (p)[1] == (b) && (p)[2] == (c) && (p)[3] == (d))

static void test_reorder(void) {
    int64_t shape[4] = {2, 3, 4, 5};
    int perm[MFT_MAX_DIMS];
    int64_t nchw[1][MFT_MAX_DIMS] = {{60, 20, 5, 1}};
    reorder(1, 4, shape, nchw, perm);
    CHECK(PERM4(perm, 3, 2, 1, 0));
    int64_t nhwc[1][MFT_MAX_DIMS] = {{60, 1, 15, 3}};
    reorder(1, 4, shape, nhwc, perm);
    CHECK(PERM4(perm, 1, 3, 2, 0));
    /* first operand wins */
    int64_t mix1[2][MFT_MAX_DIMS] = {{60, 1, 15, 3}, {60, 20, 5, 1}};
    reorder(2, 4, shape, mix1, perm);
    CHECK(PERM4(perm, 1, 3, 2, 0));
    int64_t mix2[2][MFT_MAX_DIMS] = {{60, 20, 5, 1}, {60, 1, 15, 3}};
    reorder(2, 4, shape, mix2, perm);
    CHECK(PERM4(perm, 3, 2, 1, 0));
    /* a broadcast operand first lets the next one decide (bias ⊕ NHWC) */
    int64_t bias[2][MFT_MAX_DIMS] = {{0, 1, 0, 0}, {60, 1, 15, 3}};
    reorder(2, 4, shape, bias, perm);
    CHECK(PERM4(perm, 1, 3, 2, 0));
    /* NHWC ⊕ (H,W) plane broadcast over N and C */
    int64_t plane[2][MFT_MAX_DIMS] = {{60, 1, 15, 3}, {0, 0, 5, 1}};
    reorder(2, 4, shape, plane, perm);
    CHECK(PERM4(perm, 1, 3, 2, 0));
    /* equal strides: the larger dim goes outward (a size-1 dim moves inward) */
    int64_t s2[2] = {1, 3};
    int64_t eq[1][MFT_MAX_DIMS] = {{1, 1}};
    reorder(1, 2, s2, eq, perm);
    CHECK(perm[0] == 0 && perm[1] == 1);
    int64_t s2b[2] = {3, 1};
    reorder(1, 2, s2b, eq, perm);
    CHECK(perm[0] == 1 && perm[1] == 0);
    /* all operands broadcast on a pair: that pair keeps logical order */
    int64_t allz[1][MFT_MAX_DIMS] = {{0, 0, 0, 0}};
    reorder(1, 4, shape, allz, perm);
    CHECK(PERM4(perm, 3, 2, 1, 0));
    /* a dim moves past undecided (broadcast) dims: PyTorch's example
     * sizes (6,5,4,3,2) strides (6,0,120,0,1) -> fastest first (4,3,0,1,2) */
    int64_t s5[5] = {6, 5, 4, 3, 2};
    int64_t ex[1][MFT_MAX_DIMS] = {{6, 0, 120, 0, 1}};
    reorder(1, 5, s5, ex, perm);
    CHECK(perm[0] == 4 && perm[1] == 3 && perm[2] == 0 && perm[3] == 1 && perm[4] == 2);
}

static void test_infer_dense_strides(void) {
    /* the same example through infer_dense_strides: packed along (4,3,0,1,2) */
    int64_t s5[5] = {6, 5, 4, 3, 2}, st[5] = {6, 0, 120, 0, 1}, out[5];
    mft__infer_dense_strides(5, s5, st, out);
    CHECK(out[4] == 1 && out[3] == 2 && out[0] == 6 && out[1] == 36 && out[2] == 180);
    /* a padded NHWC keeps NHWC order */
    int64_t sz[4] = {2, 3, 2, 2}, pst[4] = {16, 1, 8, 4}, o4[4];
    mft__infer_dense_strides(4, sz, pst, o4);
    CHECK(o4[0] == 12 && o4[1] == 1 && o4[2] == 6 && o4[3] == 3);
}

static void test_coalesce(void) {
    mft__iter it = {0};
    it.nops = 2;
    it.ndim = 4; /* fastest first: W,H,C,N of two NCHW operands */
    int64_t sh[4] = {5, 4, 3, 2};
    int64_t a[4] = {4, 20, 80, 240};
    for (int d = 0; d < 4; d++) {
        it.shape[d] = sh[d];
        it.strides[0][d] = a[d];
        it.strides[1][d] = a[d];
    }
    mft__iter_coalesce(&it);
    CHECK(it.ndim == 1 && it.shape[0] == 120 && it.strides[0][0] == 4);
    /* NCHW -> NHWC copy order: C (dst 4, src 80), HW (dst 12, src 4), N */
    mft__iter t2 = {0};
    t2.nops = 2;
    t2.ndim = 4;
    int64_t sh2[4] = {3, 5, 4, 2}, d2[4] = {4, 12, 60, 240}, s2[4] = {80, 4, 20, 240};
    for (int d = 0; d < 4; d++) {
        t2.shape[d] = sh2[d];
        t2.strides[0][d] = d2[d];
        t2.strides[1][d] = s2[d];
    }
    mft__iter_coalesce(&t2);
    CHECK(t2.ndim == 3 && t2.shape[0] == 3 && t2.shape[1] == 20 && t2.shape[2] == 2);
    CHECK(t2.strides[1][1] == 4 && t2.strides[0][1] == 12);
    /* size-1 dims coalesce with anything, taking the neighbour's strides */
    mft__iter t3 = {0};
    t3.nops = 1;
    t3.ndim = 3;
    int64_t sh3[3] = {1, 7, 1}, st3[3] = {999, 8, 555};
    for (int d = 0; d < 3; d++) {
        t3.shape[d] = sh3[d];
        t3.strides[0][d] = st3[d];
    }
    mft__iter_coalesce(&t3);
    CHECK(t3.ndim == 1 && t3.shape[0] == 7 && t3.strides[0][0] == 8);
}

/* Each visit increments the int32 element: all ones afterwards = each visited once. */
static void count_loop(void *ctx, char **data, const int64_t *st, int64_t n0, int64_t n1) {
    (void)ctx;
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n0; i++) (*(int32_t *)(void *)(data[0] + i * st[0] + j * st[1]))++;
}

static void test_run_visits_all(void) {
    const int64_t shapes[][4] = {{2, 3, 4, 5}, {1, 1, 1, 1}, {3, 1, 7, 2}, {2, 5, 1, 9}};
    const int perms[][4] = {{0, 1, 2, 3}, {0, 2, 3, 1}, {3, 1, 0, 2}, {1, 0, 3, 2}};
    for (size_t s = 0; s < 4; s++) {
        for (size_t p = 0; p < 4; p++) {
            /* physical tensor in permuted order, viewed back logically */
            int64_t phys[4];
            for (int d = 0; d < 4; d++) phys[d] = shapes[s][perms[p][d]];
            mft_tensor *base = mft_zeros(4, phys, MFT_I32, MFT_CONTIGUOUS);
            int inv[4];
            for (int d = 0; d < 4; d++) inv[perms[p][d]] = d;
            mft_tensor *t = mft_permute(base, inv);
            mft_tensor *sl = mft_slice(t, 3, 0, shapes[s][3], 2);
            for (int64_t grain = 1; grain <= 64; grain *= 4) {
                mft__iter it;
                mft_tensor *ops[1] = {sl};
                mft__iter_build("t", &it, 1, ops, sl->ndim, sl->sizes);
                mft__iter_run(&it, count_loop, NULL, grain);
            }
            /* every element of the slice was visited 4 times; the others 0 times */
            int64_t idx[4], bad = 0;
            for (idx[0] = 0; idx[0] < shapes[s][0]; idx[0]++)
                for (idx[1] = 0; idx[1] < shapes[s][1]; idx[1]++)
                    for (idx[2] = 0; idx[2] < shapes[s][2]; idx[2]++)
                        for (idx[3] = 0; idx[3] < shapes[s][3]; idx[3]++) {
                            double want = idx[3] % 2 == 0 ? 4 : 0;
                            if (mft_tensor_get(t, idx) != want) bad++;
                        }
            CHECK_MSG(bad == 0, "shape %zu perm %zu: %lld elements visited wrongly", s, p, (long long)bad);
            mft_tensor_release(sl);
            mft_tensor_release(t);
            mft_tensor_release(base);
        }
    }
}

int main(void) {
    RUN(test_broadcast_shape);
    RUN(test_reorder);
    RUN(test_infer_dense_strides);
    RUN(test_coalesce);
    RUN(test_run_visits_all);
    TEST_MAIN_END();
}
