/* tests/tensor/test_copy.c — copy_ and every conversion against a naive per-element
 * reference over randomly generated layouts: all dim permutations, step
 * slices, offsets, padded pitches, stride-0 broadcasts, every dtype pair,
 * ranks 0-5, zero-size tensors, and the tiled NCHW <-> NHWC transpose at
 * sizes that exercise every remainder. Storage slots outside a destination
 * view must keep their sentinel values (gaps are never written). */
#include "test_util.h"

/* Random layouts (tu_strided_view): step 2 in one dim of 4, padding 0-1. */
static const tu_layout_opts COPY_LAYOUT = {3, 1, false};

static double value_for(const int64_t *idx, int nd) {
    double v = 1;
    for (int d = 0; d < nd; d++) v = v * 7 + (double)idx[d];
    return fmod(v, 97.0) + 1.0; /* small positive integers: exact in every dtype */
}

static void fill_logical(mft_tensor *t) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        mft_tensor_set(t, idx, value_for(idx, nd));
    } while (tu_next_index(nd, sz, idx));
}

/* Counts base slots holding the sentinel. */
static int64_t count_sentinel(const mft_tensor *base, double sentinel) {
    int nd = mft_tensor_ndim(base);
    int64_t idx[MFT_MAX_DIMS] = {0}, n = 0;
    if (mft_tensor_numel(base) == 0) return 0;
    do {
        n += mft_tensor_get(base, idx) == sentinel;
    } while (tu_next_index(nd, mft_tensor_sizes(base), idx));
    return n;
}

static void test_copy_random_layouts(void) {
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    const mft_dtype dts[] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
    int failures = 0;
    for (int iter = 0; iter < 600 && failures < 5; iter++) {
        int nd = (int)tu_rng_int(&rng, 0, 5);
        int64_t sizes[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            sizes[d] = tu_rng_int(&rng, 0, 9) == 0 ? 0 : tu_rng_int(&rng, 1, 5);
        mft_dtype ddt = dts[tu_rng_int(&rng, 0, 4)], sdt = tu_rng_int(&rng, 0, 1) ? ddt : dts[tu_rng_int(&rng, 0, 4)];
        /* source: same sizes, or a broadcast form (size-1 dims and fewer leading dims) */
        int snd = nd;
        int64_t ssz[MFT_MAX_DIMS];
        bool bcast = nd > 0 && tu_rng_int(&rng, 0, 2) == 0;
        if (bcast) {
            snd = (int)tu_rng_int(&rng, 0, nd);
            for (int d = 0; d < snd; d++)
                ssz[d] = tu_rng_int(&rng, 0, 1) ? 1 : sizes[nd - snd + d];
        } else {
            for (int d = 0; d < nd; d++) ssz[d] = sizes[d];
        }
        mft_tensor *dbase = NULL, *sbase = NULL;
        mft_tensor *dst = tu_strided_view(nd, sizes, ddt, 200.0, &COPY_LAYOUT, &rng, &dbase);
        mft_tensor *src = tu_strided_view(snd, ssz, sdt, 250.0, &COPY_LAYOUT, &rng, &sbase);
        fill_logical(src);
        int64_t dnumel = mft_tensor_numel(dst);
        int64_t sentinels_before = count_sentinel(dbase, 200.0);
        mft_status st = mft_copy_(dst, src);
        CHECK_MSG(st == MFT_OK, "iter %d: copy_ failed: %s", iter, mft_last_error_message());
        /* reference: every logical element */
        int64_t idx[MFT_MAX_DIMS] = {0}, bad = 0;
        if (dnumel > 0) {
            do {
                int64_t sidx[MFT_MAX_DIMS];
                for (int d = 0; d < snd; d++) sidx[d] = ssz[d] == 1 ? 0 : idx[nd - snd + d];
                if (mft_tensor_get(dst, idx) != value_for(sidx, snd)) bad++;
            } while (tu_next_index(nd, sizes, idx));
        }
        /* gaps untouched: exactly numel sentinels were overwritten */
        int64_t sentinels_after = count_sentinel(dbase, 200.0);
        CHECK_MSG(bad == 0 && sentinels_before - sentinels_after == dnumel,
                  "iter %d: rank %d %s<-%s: %lld wrong values, %lld slots written for %lld elements",
                  iter, nd, mft_dtype_name(ddt), mft_dtype_name(sdt), (long long)bad,
                  (long long)(sentinels_before - sentinels_after), (long long)dnumel);
        if (bad) failures++;
        mft_tensor *all[] = {dst, src, dbase, sbase};
        for (int k = 0; k < 4; k++) mft_tensor_release(all[k]);
    }
}

/* Conversions (contiguous, to_format, clone, to_dtype) keep logical values:
 * compared through the logical-order hash and element by element. */
static void test_conversions_keep_values(void) {
    uint64_t rng = 12345;
    for (int iter = 0; iter < 200; iter++) {
        int nd = (int)tu_rng_int(&rng, 3, 5);
        int64_t sizes[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sizes[d] = tu_rng_int(&rng, 1, 6);
        mft_tensor *base = NULL;
        mft_tensor *x = tu_strided_view(nd, sizes, MFT_F32, -1.0, &COPY_LAYOUT, &rng, &base);
        fill_logical(x);
        mft_tensor *ref = mft_clone(x, MFT_CONTIGUOUS);
        uint64_t h = mft_tensor_hash(ref);
        mft_tensor *outs[6] = {mft_contiguous(x, MFT_CONTIGUOUS), mft_contiguous(x, MFT_CHANNELS_LAST),
                               mft_to_format(x, MFT_CHANNELS_LAST), mft_clone(x, MFT_PRESERVE),
                               mft_clone(x, MFT_CHANNELS_LAST), NULL};
        mft_tensor *d64 = mft_to_dtype(x, MFT_F64);
        outs[5] = mft_to_dtype(d64, MFT_F32);
        for (int k = 0; k < 6; k++) {
            CHECK_MSG(outs[k] && mft_tensor_hash(outs[k]) == h, "iter %d conversion %d changed values", iter, k);
            CHECK(mft_tensor_is_dense(outs[k]) || k == 2 || k == 0);
        }
        CHECK(mft_tensor_is_contiguous(outs[1], MFT_CHANNELS_LAST));
        CHECK(mft_tensor_is_contiguous(outs[4], MFT_CHANNELS_LAST));
        CHECK(mft_tensor_hash(x) == h); /* the hash of a strided view: same logical values */
        for (int k = 0; k < 6; k++) mft_tensor_release(outs[k]);
        mft_tensor_release(d64);
        mft_tensor_release(ref);
        mft_tensor_release(x);
        mft_tensor_release(base);
    }
}

/* NCHW <-> NHWC at sizes around the 8x8 micro-tile and 64x64 tile edges. */
static void test_transpose_sizes(void) {
    const int64_t cs[] = {1, 3, 7, 8, 9, 16, 17, 64, 65};
    const int64_t hws[][2] = {{1, 1}, {1, 9}, {3, 3}, {8, 8}, {5, 13}, {9, 9}, {16, 5}};
    const mft_dtype dts[] = {MFT_F32, MFT_F64, MFT_U8, MFT_I32};
    int bad_cases = 0;
    for (size_t di = 0; di < 4; di++)
        for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
            for (size_t hi = 0; hi < sizeof hws / sizeof *hws; hi++) {
                int64_t sz[4] = {2, cs[ci], hws[hi][0], hws[hi][1]};
                mft_tensor *a = mft_empty(4, sz, dts[di], MFT_CONTIGUOUS);
                fill_logical(a);
                mft_tensor *b = mft_contiguous(a, MFT_CHANNELS_LAST);
                mft_tensor *c = mft_contiguous(b, MFT_CONTIGUOUS);
                int64_t idx[4] = {0}, bad = 0;
                do {
                    double v = value_for(idx, 4);
                    if (dts[di] == MFT_U8) v = fmod(v, 256.0);
                    if (mft_tensor_get(b, idx) != v || mft_tensor_get(c, idx) != v) bad++;
                } while (tu_next_index(4, sz, idx));
                if (bad) bad_cases++;
                CHECK_MSG(bad == 0, "%s C=%lld H=%lld W=%lld: %lld wrong", mft_dtype_name(dts[di]),
                          (long long)sz[1], (long long)sz[2], (long long)sz[3], (long long)bad);
                mft_tensor_release(a);
                mft_tensor_release(b);
                mft_tensor_release(c);
                if (bad_cases > 3) return;
            }
}

static void test_copy_full_overlap_and_self(void) {
    int64_t sz[2] = {3, 4};
    mft_tensor *a = mft_arange(0, 12, 1, MFT_F32), *v = mft_view(a, 2, sz);
    mft_tensor *w = mft_view(a, 2, sz);
    CHECK(mft_copy_(v, w) == MFT_OK); /* identical layout on one storage: allowed */
    CHECK(mft_copy_(v, v) == MFT_OK);
    int64_t i[2] = {2, 3};
    CHECK(mft_tensor_get(v, i) == 11.0);
    /* disjoint halves of one storage: allowed */
    mft_tensor *lo = mft_narrow(a, 0, 0, 6), *hi = mft_narrow(a, 0, 6, 6);
    CHECK(mft_copy_(lo, hi) == MFT_OK);
    int64_t j = 0;
    CHECK(mft_tensor_get(a, &j) == 6.0);
    /* version counter bumps on writes, shared by views */
    int64_t v0 = mft_tensor_version(a);
    CHECK(mft_copy_(lo, hi) == MFT_OK);
    CHECK(mft_tensor_version(v) > v0 && mft_tensor_version(v) == mft_tensor_version(a));
    mft_tensor *all[] = {a, v, w, lo, hi};
    for (int k = 0; k < 5; k++) mft_tensor_release(all[k]);
}

static void test_dtype_conversion_edges(void) {
    int64_t n = 6;
    mft_tensor *f = mft_empty(1, &n, MFT_F64, MFT_CONTIGUOUS);
    const double vals[6] = {-1.0, 255.0, 256.0, 3.9, -3.9, 1e300};
    for (int64_t i = 0; i < 6; i++) mft_tensor_set(f, &i, vals[i]);
    mft_tensor *u = mft_to_dtype(f, MFT_U8), *i32 = mft_to_dtype(f, MFT_I32), *f32 = mft_to_dtype(f, MFT_F32);
    int64_t k;
    k = 0; CHECK(mft_tensor_get(u, &k) == 255.0); /* -1 wraps modulo 256 */
    k = 2; CHECK(mft_tensor_get(u, &k) == 0.0);
    k = 3; CHECK(mft_tensor_get(i32, &k) == 3.0); /* truncation toward zero */
    k = 4; CHECK(mft_tensor_get(i32, &k) == -3.0);
    k = 5; CHECK(mft_tensor_get(i32, &k) == 2147483647.0); /* saturates, no UB */
    k = 3; CHECK_NEAR(mft_tensor_get(f32, &k), 3.9, 1e-6);
    mft_tensor_release(f);
    mft_tensor_release(u);
    mft_tensor_release(i32);
    mft_tensor_release(f32);
}

/* Converting an empty tensor gives the format's packed strides, as
 * PyTorch 1.13: (0,3,5,4).to(memory_format=channels_last) has strides
 * (60,1,12,3), (2,3,0,4) has (0,1,12,3), both channels_last-contiguous
 * (values from PyTorch, quoted in the reliability report this test answers). */
static void test_empty_to_channels_last(void) {
    const int64_t a[4] = {0, 3, 5, 4}, b[4] = {2, 3, 0, 4};
    const int64_t sa[4] = {60, 1, 12, 3}, sb[4] = {0, 1, 12, 3};
    const int64_t *sizes[2] = {a, b}, *want[2] = {sa, sb};
    for (int k = 0; k < 2; k++) {
        mft_tensor *x = mft_zeros(4, sizes[k], MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *y = mft_to_format(x, MFT_CHANNELS_LAST);
        mft_tensor *z = mft_contiguous(x, MFT_CHANNELS_LAST);
        CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST) &&
              memcmp(mft_tensor_strides(y), want[k], 4 * sizeof(int64_t)) == 0);
        CHECK(z && mft_tensor_is_contiguous(z, MFT_CHANNELS_LAST) &&
              memcmp(mft_tensor_strides(z), want[k], 4 * sizeof(int64_t)) == 0);
        CHECK(y && mft_tensor_format(y) == MFT_CHANNELS_LAST);
        mft_tensor_release(x);
        mft_tensor_release(y);
        mft_tensor_release(z);
    }
}

int main(void) {
    RUN(test_copy_random_layouts);
    RUN(test_conversions_keep_values);
    RUN(test_transpose_sizes);
    RUN(test_copy_full_overlap_and_self);
    RUN(test_dtype_conversion_edges);
    RUN(test_empty_to_channels_last);
    TEST_MAIN_END();
}
