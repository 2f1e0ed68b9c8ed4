/* tests/tensor/test_interop.c — layout descriptions and everything around a tensor
 * that is not a predicate: XLA minor_to_major and letter strings <-> strides
 * (docs/spec.md §1 examples), the minimum buffer size, from_blob over padded NHWC
 * buffers with a deleter, logical-order hashing, describe's storage map,
 * seeded rand identical across formats, get/set, and scopes. */
#include "harness.h"

static void test_minor_to_major(void) {
    int64_t sz[4] = {2, 3, 4, 5}, st[4];
    int cl[4] = {1, 3, 2, 0}, m2m[4];
    CHECK(mft_strides_from_minor_to_major(4, sz, cl, st) == MFT_OK);
    CHECK(st[0] == 60 && st[1] == 1 && st[2] == 15 && st[3] == 3);
    CHECK(mft_minor_to_major_from_strides(4, sz, st, m2m) == MFT_OK);
    CHECK(m2m[0] == 1 && m2m[1] == 3 && m2m[2] == 2 && m2m[3] == 0);
    int64_t nchw[4] = {60, 20, 5, 1};
    CHECK(mft_minor_to_major_from_strides(4, sz, nchw, m2m) == MFT_OK);
    CHECK(m2m[0] == 3 && m2m[1] == 2 && m2m[2] == 1 && m2m[3] == 0);
    /* padded strides keep their order */
    int64_t pad[4] = {96, 1, 24, 4}; /* NHWC with room for 4 channels (3 used), W pitch 6 */
    CHECK(mft_minor_to_major_from_strides(4, sz, pad, m2m) == MFT_OK);
    CHECK(m2m[0] == 1 && m2m[1] == 3 && m2m[2] == 2 && m2m[3] == 0);
    int bad[4] = {1, 1, 2, 0};
    CHECK(mft_strides_from_minor_to_major(4, sz, bad, st) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "[1,1,2,0] is not a permutation");
}

static void test_letters(void) {
    int64_t s4[4] = {2, 3, 4, 5}, st[4];
    char buf[8];
    CHECK(mft_strides_from_letters(4, s4, "NHWC", st) == MFT_OK);
    CHECK(st[0] == 60 && st[1] == 1 && st[2] == 15 && st[3] == 3);
    CHECK(mft_letters_from_strides(4, s4, st, buf, sizeof buf) == MFT_OK && strcmp(buf, "NHWC") == 0);
    CHECK(mft_strides_from_letters(4, s4, "nchw", st) == MFT_OK && st[0] == 60 && st[3] == 1);
    CHECK(mft_letters_from_strides(4, s4, st, buf, sizeof buf) == MFT_OK && strcmp(buf, "NCHW") == 0);
    /* a made-up order round-trips too */
    CHECK(mft_strides_from_letters(4, s4, "CNWH", st) == MFT_OK);
    CHECK(st[2] == 1 && st[3] == 4 && st[0] == 20 && st[1] == 40);
    CHECK(mft_letters_from_strides(4, s4, st, buf, sizeof buf) == MFT_OK && strcmp(buf, "CNWH") == 0);
    int64_t s3[3] = {2, 3, 7}, st3[3];
    CHECK(mft_strides_from_letters(3, s3, "NWC", st3) == MFT_OK);
    CHECK(st3[0] == 21 && st3[1] == 1 && st3[2] == 3);
    CHECK(mft_letters_from_strides(3, s3, st3, buf, sizeof buf) == MFT_OK && strcmp(buf, "NLC") == 0);
    int64_t s5[5] = {2, 3, 4, 5, 6}, st5[5];
    CHECK(mft_strides_from_letters(5, s5, "NDHWC", st5) == MFT_OK);
    CHECK(st5[1] == 1 && st5[4] == 3 && st5[3] == 18 && st5[2] == 90 && st5[0] == 360);
    /* ambiguous C == 1: NHWC-packed strides read as NHWC, NCHW-packed as NCHW */
    int64_t c1[4] = {2, 1, 4, 5}, cl1[4] = {20, 1, 5, 1}, nc1[4] = {20, 20, 5, 1};
    CHECK(mft_letters_from_strides(4, c1, cl1, buf, sizeof buf) == MFT_OK && strcmp(buf, "NHWC") == 0);
    CHECK(mft_letters_from_strides(4, c1, nc1, buf, sizeof buf) == MFT_OK && strcmp(buf, "NCHW") == 0);
    /* errors */
    CHECK(mft_strides_from_letters(4, s4, "NHW", st) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "has 3 letters");
    CHECK(mft_strides_from_letters(4, s4, "NHWX", st) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "letter 'X'");
    CHECK(mft_strides_from_letters(4, s4, "NHHC", st) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "repeats");
    CHECK(mft_strides_from_letters(2, s4, "NC", st) == MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "rank 3, 4 and 5");
    CHECK(mft_letters_from_strides(4, s4, st, buf, 4) == MFT_ERR_INVALID);
    mft_clear_error();
}

static void test_min_storage(void) {
    int64_t n = -1;
    int64_t sz[3] = {2, 2, 3}, st[3] = {6, 3, 1};
    CHECK(mft_min_storage_numel(3, sz, st, &n) == MFT_OK && n == 12);
    int64_t pitch_sz[2] = {4, 3}, pitch_st[2] = {5, 1}; /* row pitch 5 for 3 valid */
    CHECK(mft_min_storage_numel(2, pitch_sz, pitch_st, &n) == MFT_OK && n == 18);
    int64_t b_st[2] = {0, 1};
    CHECK(mft_min_storage_numel(2, pitch_sz, b_st, &n) == MFT_OK && n == 3);
    int64_t e_sz[2] = {4, 0};
    CHECK(mft_min_storage_numel(2, e_sz, pitch_st, &n) == MFT_OK && n == 0);
    CHECK(mft_min_storage_numel(0, NULL, NULL, &n) == MFT_OK && n == 1);
    int64_t big_sz[2] = {(int64_t)1 << 40, 4}, big_st[2] = {(int64_t)1 << 40, 1};
    CHECK(mft_min_storage_numel(2, big_sz, big_st, &n) == MFT_ERR_OVERFLOW);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_min_storage_numel");
}

static int g_deleted = 0;
static void count_deleter(void *data, void *ctx) {
    (void)data;
    (*(int *)ctx)++;
}

static void test_from_blob_padded_nhwc(void) {
    /* an image batch N=2, H=2, W=3 with room for 4 channels of which 3 are used,
     * and a row pitch of 16 floats (4 W slots, one unused) */
    float buf[2 * 2 * 16];
    for (int i = 0; i < 64; i++) buf[i] = (float)i;
    int64_t sz[4] = {2, 3, 2, 3}, st[4] = {32, 1, 16, 4};
    g_deleted = 0;
    mft_tensor *t = mft_from_blob(buf, sizeof buf, 4, sz, st, 0, MFT_F32, count_deleter, &g_deleted);
    CHECK(t != NULL);
    CHECK(mft_tensor_format(t) == MFT_CHANNELS_LAST && !mft_tensor_is_dense(t));
    CHECK(mft_tensor_data(t) == (void *)buf);
    int64_t idx[4] = {1, 2, 1, 2}; /* 32 + 2 + 16 + 8 = 58 */
    CHECK(mft_tensor_get(t, idx) == 58.0);
    mft_tensor *c = mft_contiguous(t, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_is_contiguous(c, MFT_CHANNELS_LAST) && mft_tensor_get(c, idx) == 58.0);
    mft_tensor *v = mft_narrow(t, 1, 0, 2); /* keeps the storage alive */
    mft_tensor_release(t);
    CHECK(g_deleted == 0);
    mft_tensor_release(v);
    CHECK(g_deleted == 1);
    mft_tensor_release(c);
    /* one element too far (N pitch 38: needs 65 floats): rejected, deleter not
     * called, buffer still ours */
    int64_t st2[4] = {38, 1, 16, 4};
    mft_tensor *bad = mft_from_blob(buf, sizeof buf, 4, sz, st2, 0, MFT_F32, count_deleter, &g_deleted);
    CHECK(bad == NULL && g_deleted == 1);
    CHECK_ERR(MFT_ERR_BOUNDS, "buffer has 256 bytes");
    /* the exact fit with an offset: minimum size 59 floats + 5 = 64 */
    mft_tensor *fit = mft_from_blob(buf, sizeof buf, 4, sz, st, 5, MFT_F32, NULL, NULL);
    CHECK(fit != NULL && mft_tensor_offset(fit) == 5);
    mft_tensor_release(fit);
    mft_tensor *over = mft_from_blob(buf, sizeof buf, 4, sz, st, 6, MFT_F32, NULL, NULL);
    CHECK(over == NULL);
    CHECK_ERR(MFT_ERR_BOUNDS, "offset 6");
}

static void test_hash_logical(void) {
    int64_t sz[4] = {2, 3, 4, 5};
    mft_tensor *a = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 7);
    mft_tensor *b = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 7);
    CHECK(mft_tensor_hash(a) == mft_tensor_hash(b)); /* same seed: same logical values */
    mft_tensor *c = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 8);
    CHECK(mft_tensor_hash(a) != mft_tensor_hash(c));
    /* one changed element changes the hash */
    mft_tensor *d = mft_clone(b, MFT_PRESERVE);
    int64_t idx[4] = {1, 2, 3, 4};
    CHECK(mft_tensor_hash(d) == mft_tensor_hash(a));
    mft_tensor_set(d, idx, 42.0);
    CHECK(mft_tensor_hash(d) != mft_tensor_hash(a));
    /* shape and dtype are part of the hash */
    int64_t flat = 120;
    mft_tensor *f = mft_reshape(a, 1, &flat), *g = mft_to_dtype(a, MFT_F64);
    CHECK(mft_tensor_hash(f) != mft_tensor_hash(a) && mft_tensor_hash(g) != mft_tensor_hash(a));
    /* a permuted view hashes as its logical values, i.e. like its clone */
    int perm[4] = {3, 1, 0, 2};
    mft_tensor *p = mft_permute(b, perm), *pc = mft_clone(p, MFT_CONTIGUOUS);
    CHECK(mft_tensor_hash(p) == mft_tensor_hash(pc) && mft_tensor_hash(p) != mft_tensor_hash(a));
    /* rand statistics sanity: mean ~0.5, values in [0,1) */
    int64_t n = 100000;
    mft_tensor *u = mft_rand(1, &n, MFT_F32, MFT_CONTIGUOUS, 3);
    const float *up = mft_tensor_data(u);
    double sum = 0, mn = 1, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += up[i];
        mn = up[i] < mn ? up[i] : mn;
        mx = up[i] > mx ? up[i] : mx;
    }
    CHECK(fabs(sum / (double)n - 0.5) < 0.01 && mn >= 0.0 && mx < 1.0);
    mft_tensor *all[] = {a, b, c, d, f, g, p, pc, u};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void test_describe(void) {
    int64_t sz[4] = {1, 3, 1, 2};
    mft_tensor *t = mft_arange(0, 6, 1, MFT_F32);
    mft_tensor *x = mft_view(t, 4, sz); /* NCHW, H == 1: still unambiguous (C before W) */
    mft_tensor *y = mft_contiguous(x, MFT_CHANNELS_LAST);
    char buf[4096];
    size_t need = mft_tensor_describe(y, buf, sizeof buf);
    CHECK(need < sizeof buf && strlen(buf) == need);
    CHECK(strstr(buf, "tag      CHANNELS_LAST (declared)") != NULL);
    CHECK(strstr(buf, "order    NHWC") != NULL);
    /* sizes are in logical order whatever the layout: said so, not "(NCHW)" */
    CHECK_MSG(strncmp(buf, "sizes    [1,3,1,2]  (logical N,C,H,W)\n", 38) == 0, "%s", buf);
    CHECK(strstr(buf, "(NCHW)") == NULL);
    CHECK(strstr(buf, "storage map (slot after offset -> logical index (N,C,H,W)):\n") != NULL);
    CHECK(strstr(buf, "is_contiguous(CHANNELS_LAST)  true") != NULL);
    /* NHWC storage: slot 1 holds channel 1 of pixel 0, slot 3 channel 0 of pixel 1 */
    CHECK(strstr(buf, "    1: (0,1,0,0)") != NULL && strstr(buf, "    3: (0,0,0,1)") != NULL);
    /* truncation: snprintf semantics */
    char small[16];
    size_t need2 = mft_tensor_describe(y, small, sizeof small);
    CHECK(need2 == need && strlen(small) == sizeof small - 1);
    /* gaps and broadcast are shown */
    int64_t esz[2] = {2, 3}, b1[2] = {1, 3};
    mft_tensor *r = mft_view(t, 2, esz), *row = mft_narrow(r, 0, 0, 1), *e = mft_expand(row, 2, esz);
    mft_tensor *g = mft_slice(t, 0, 0, 6, 2);
    (void)b1;
    mft_tensor_describe(e, buf, sizeof buf);
    CHECK(strstr(buf, "x2 (overlap/broadcast)") != NULL);
    mft_tensor_describe(g, buf, sizeof buf);
    CHECK(strstr(buf, "    1: -  (gap)") != NULL);
    mft_tensor *all[] = {t, x, y, r, row, e, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void test_get_set(void) {
    int64_t sz[3] = {2, 3, 4};
    mft_tensor *t = mft_zeros(3, sz, MFT_I64, MFT_CHANNELS_LAST);
    int64_t idx[3] = {1, 2, 3};
    CHECK(mft_tensor_set(t, idx, 17.0) == MFT_OK && mft_tensor_get(t, idx) == 17.0);
    /* physical position: rank-3 channels_last strides (12,1,3): 12 + 2 + 9 = 23 */
    CHECK(((const int64_t *)mft_tensor_data(t))[23] == 17);
    mft_tensor *s = mft_zeros(0, NULL, MFT_F64, MFT_CONTIGUOUS);
    CHECK(mft_tensor_numel(s) == 1 && mft_tensor_set(s, NULL, 2.5) == MFT_OK && mft_tensor_get(s, NULL) == 2.5);
    mft_tensor *o = mft_full(3, sz, MFT_F32, MFT_CONTIGUOUS, 1.5);
    CHECK(mft_tensor_get(o, idx) == 1.5);
    mft_tensor *one = mft_ones(3, sz, MFT_U8, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_get(one, idx) == 1.0);
    mft_tensor_release(t);
    mft_tensor_release(s);
    mft_tensor_release(o);
    mft_tensor_release(one);
}

static void test_scopes(void) {
    int64_t sz[2] = {3, 4};
    int64_t live0 = mft_live_tensors();
    CHECK(mft_scope_begin() == MFT_OK);
    mft_tensor *a = mft_ones(2, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *b = mft_transpose(a, 0, 1);
    mft_tensor *c = mft_contiguous(b, MFT_CONTIGUOUS);
    mft_tensor *same = mft_contiguous(c, MFT_CONTIGUOUS); /* returns c: a second scope-owned ref */
    CHECK(same == c);
    CHECK(mft_scope_begin() == MFT_OK); /* nested */
    mft_tensor *d = mft_clone(c, MFT_PRESERVE);
    CHECK(mft_scope_keep(d) == d);
    mft_tensor *e = mft_zeros(2, sz, MFT_F32, MFT_CONTIGUOUS);
    (void)e;
    CHECK(mft_scope_end() == MFT_OK);
    CHECK(mft_live_tensors() == live0 + 4); /* a, b, c (one object) and the kept d */
    CHECK(mft_scope_keep(a) == a);           /* hand a to the caller before the scope ends */
    CHECK(mft_scope_end() == MFT_OK);
    CHECK(mft_live_tensors() == live0 + 2);  /* d and a */
    mft_tensor_release(d);
    mft_tensor_release(a);
    CHECK(mft_live_tensors() == live0);
    CHECK(mft_scope_end() == MFT_ERR_SCOPE);
    CHECK_ERR(MFT_ERR_SCOPE, "no scope is open");
}

int main(void) {
    RUN(test_minor_to_major);
    RUN(test_letters);
    RUN(test_min_storage);
    RUN(test_from_blob_padded_nhwc);
    RUN(test_hash_logical);
    RUN(test_describe);
    RUN(test_get_set);
    RUN(test_scopes);
    TEST_MAIN_END();
}
