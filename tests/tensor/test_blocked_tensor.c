/* tests/tensor/test_blocked_tensor.c — tensors in blocked layouts
 * (docs/spec.md §7, tensor/blocked.c):
 *   - reorders against oneDNN 2.6: every case of tests/golden/onednn_layouts.txt
 *     (plain, nChw8c, nChw16c, ranks 3-5, C = 1..33) converted from a plain
 *     tensor holding i + 1 puts element i at oneDNN's slot and 0 in every
 *     other slot; the physical buffer wrapped back (from_blob_layout) reads
 *     i + 1 in logical order; pads pre-filled with garbage are refused;
 *   - factories, get / set and rand against their plain counterparts;
 *   - copies between every pair of layouts (including one with two blocks
 *     on one dim, which no plain pieces describe), broadcast sources and
 *     dtype conversion, checked element by element against the plain tensor;
 *   - views at block boundaries against plain views, and the refusals;
 *   - elementwise ops natively on blocked operands (pads stay zero, nothing
 *     converted) and the counted fallback of an op without a blocked path;
 *   - gradients through to_layout and through blocked elementwise ops come
 *     back in each input's layout. */
#include <stdbool.h>
#include "harness.h"
#include "test_util.h"
#include "layout_golden.h"

/* Every element of b equals the same element of a (values, any layouts). */
static bool same_values(const mft_tensor *a, const mft_tensor *b) {
    int nd = mft_tensor_ndim(a);
    const int64_t *sz = mft_tensor_sizes(a);
    if (nd != mft_tensor_ndim(b) || memcmp(sz, mft_tensor_sizes(b), sizeof(int64_t) * (size_t)nd))
        return false;
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(a) == 0) return true;
    do {
        if (mft_tensor_get(a, idx) != mft_tensor_get(b, idx)) return false;
    } while (tu_next_index(nd, sz, idx));
    return true;
}

/* ---------------------------------------------------------------- oneDNN */
static void test_onednn_reorders(void) {
    char *text = og_read_golden("onednn_layouts.txt");
    if (!text) return;
    static og_case c;
    int cases = 0;
    char *cur = text;
    while (og_next(&cur, &c)) {
        char what[96];
        snprintf(what, sizeof what, "%s sizes[1]=%lld", c.alias, (long long)c.sizes[1]);
        mft_layout l;
        CHECK_MSG(mft_layout_from_onednn(c.nd, c.sizes, c.letters, &l) == MFT_OK, "%s", what);
        mft_tensor *x = tu_iota(c.nd, c.sizes, MFT_F32, 1.0); /* element i holds i + 1 */
        mft_tensor *b = mft_to_layout(x, &l);
        CHECK_MSG(b && mft_tensor_is_blocked(b) == (c.nb > 0), "%s: %s", what,
                  mft_last_error_message());
        const int64_t slots = c.bytes / 4;
        if (b) {
            CHECK_EQ_I(mft_tensor_storage_numel(b), slots);
            const float *raw = mft_tensor_data(b);
            char *owner = calloc((size_t)slots, 1);
            int bad = 0;
            for (int64_t i = 0; i < c.numel; i++) {
                bad += raw[c.pos[i]] != (float)(i + 1);
                owner[c.pos[i]] = 1;
            }
            for (int64_t s = 0; s < slots; s++) bad += !owner[s] && raw[s] != 0.0f;
            CHECK_MSG(bad == 0, "%s: %d slots differ from oneDNN's reorder", what, bad);
            CHECK(mft_tensor_check_padding(b) == MFT_OK);
            CHECK(mft_tensor_hash(b) == mft_tensor_hash(x));
            /* the physical buffer of oneDNN's reorder, wrapped, reads back in
             * logical order; with garbage in a pad lane it is refused */
            float *buf = calloc((size_t)slots, sizeof *buf);
            for (int64_t i = 0; i < c.numel; i++) buf[c.pos[i]] = (float)(i + 1);
            mft_tensor *w = mft_from_blob_layout(buf, (size_t)slots * 4, &l, 0, MFT_F32, NULL, NULL);
            mft_tensor *back = mft_contiguous(w, MFT_CONTIGUOUS);
            CHECK_MSG(back && same_values(back, x), "%s: wrapped buffer reads back wrong", what);
            mft_tensor_release(back);
            mft_tensor_release(w);
            int64_t pad = -1;
            for (int64_t s = 0; s < slots && pad < 0; s++)
                if (!owner[s]) pad = s;
            if (pad >= 0) {
                buf[pad] = -7.0f;
                mft_clear_error();
                w = mft_from_blob_layout(buf, (size_t)slots * 4, &l, 0, MFT_F32, NULL, NULL);
                CHECK_MSG(w == NULL && mft_last_error() == MFT_ERR_INVALID, "%s: garbage pad", what);
                TU_HAS("mft_from_blob_layout: pad lane");
                mft_tensor_release(w);
            }
            free(buf);
            free(owner);
        }
        mft_tensor_release(b);
        mft_tensor_release(x);
        cases++;
    }
    CHECK(cases >= 60);
    free(text);
}

/* ---------------------------------------------------------------- factories */
static void test_factories(void) {
    static const int64_t cs[] = {1, 3, 15, 16, 17, 33};
    static const mft_format fmts[] = {MFT_NCHW8C, MFT_NCHW16C};
    for (int nd = 3; nd <= 5; nd++)
        for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
            for (int f = 0; f < 2; f++) {
                int64_t sz[5] = {2, cs[ci], 3, 2, 3};
                mft_tensor *r = mft_rand(nd, sz, MFT_F32, fmts[f], 7);
                mft_tensor *p = mft_rand(nd, sz, MFT_F32, MFT_CONTIGUOUS, 7);
                mft_tensor *o = mft_full(nd, sz, MFT_F64, fmts[f], -2.5);
                CHECK(r && mft_tensor_is_blocked(r) && mft_tensor_format(r) == fmts[f] &&
                      mft_tensor_format_origin(r) == MFT_DECLARED);
                CHECK(tu_has_sizes(r, nd, sz) && mft_tensor_numel(r) == mft_tensor_numel(p));
                CHECK(mft_tensor_is_contiguous(r, fmts[f]) &&
                      !mft_tensor_is_contiguous(r, MFT_CONTIGUOUS) && !mft_tensor_is_dense(r));
                CHECK(same_values(r, p)); /* rand: values by logical index only */
                CHECK(mft_tensor_check_padding(r) == MFT_OK && mft_tensor_check_padding(o) == MFT_OK);
                int64_t idx[5] = {1, cs[ci] - 1, 2, 1, 2};
                CHECK(mft_tensor_get(o, idx) == -2.5);
                TU_OK_S(mft_tensor_set(o, idx, 4.0));
                CHECK(mft_tensor_get(o, idx) == 4.0 && mft_tensor_check_padding(o) == MFT_OK);
                mft_clear_error();
                CHECK(mft_tensor_strides(r) == NULL && mft_last_error() == MFT_ERR_FORMAT);
                TU_HAS("mft_tensor_strides");
                mft_layout l;
                TU_OK_S(mft_tensor_layout(r, &l));
                CHECK(l.nblocks == 1 && l.block_dim[0] == 1 &&
                      l.block_size[0] == (fmts[f] == MFT_NCHW8C ? 8 : 16) &&
                      l.padded[1] % l.block_size[0] == 0 && l.sizes[1] == cs[ci]);
                mft_tensor_release(r);
                mft_tensor_release(p);
                mft_tensor_release(o);
            }
    /* refusals */
    mft_clear_error();
    CHECK(mft_empty(2, (int64_t[]){2, 3}, MFT_F32, MFT_NCHW16C) == NULL &&
          mft_last_error() == MFT_ERR_FORMAT);
    CHECK(mft_empty(4, (int64_t[]){2, 3, 4, 4}, MFT_F32, MFT_BLOCKED) == NULL);
    mft_clear_error();
    CHECK(mft_empty_layout(NULL, MFT_F32) == NULL && mft_last_error() == MFT_ERR_NULL);
}

/* ---------------------------------------------------------------- copies */
static void test_copies(void) {
    const int64_t sz[4] = {2, 19, 3, 5};
    uint64_t rng = 3;
    mft_tensor *x = mft_empty(4, sz, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    /* plain, channels last, 8c, 16c, and two blocks on C with one on N
     * (oneDNN's ABcd4b16a4b: no plain pieces, the element loop) */
    const char *tags[] = {"abcd", "acdb", "aBcd8b", "aBcd16b", "ABcd4b16a4b", "Acdb16a"};
    enum { NT = sizeof tags / sizeof *tags };
    mft_tensor *in[NT];
    for (int i = 0; i < NT; i++) {
        mft_layout l;
        CHECK_MSG(mft_layout_from_onednn(4, sz, tags[i], &l) == MFT_OK, "%s", tags[i]);
        in[i] = mft_to_layout(x, &l);
        CHECK_MSG(in[i] && same_values(in[i], x), "to %s", tags[i]);
        CHECK(mft_tensor_check_padding(in[i]) == MFT_OK);
    }
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < NT; j++) {
            mft_layout l;
            mft_tensor_layout(in[j], &l);
            mft_tensor *d = mft_empty_layout(&l, MFT_F64); /* a dtype change too */
            TU_OK_S(mft_copy_(d, in[i]));
            CHECK_MSG(same_values(d, x), "copy %s -> %s", tags[i], tags[j]);
            CHECK(mft_tensor_check_padding(d) == MFT_OK);
            mft_tensor_release(d);
        }
    /* a broadcast source into a blocked destination, and out of a blocked one */
    mft_tensor *bias = mft_empty(4, (int64_t[]){1, 19, 1, 1}, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(bias, &rng);
    mft_tensor *bb = mft_to_format(bias, MFT_NCHW16C);
    mft_tensor *d = mft_zeros(4, sz, MFT_F32, MFT_NCHW8C);
    mft_tensor *want = mft_zeros(4, sz, MFT_F32, MFT_CONTIGUOUS);
    TU_OK_S(mft_copy_(want, bias));
    TU_OK_S(mft_copy_(d, bias));
    CHECK(same_values(d, want) && mft_tensor_check_padding(d) == MFT_OK);
    mft_tensor_release(d);
    d = mft_zeros(4, sz, MFT_F32, MFT_NCHW16C);
    TU_OK_S(mft_copy_(d, bb));
    CHECK(same_values(d, want));
    /* a copy onto itself through another header, and a partial overlap */
    mft_tensor *self = mft_narrow(d, 0, 0, 1), *other = mft_narrow(d, 0, 1, 1);
    TU_OK_S(mft_copy_(other, self));
    mft_tensor_release(self);
    mft_tensor_release(other);
    for (int i = 0; i < NT; i++) mft_tensor_release(in[i]);
    mft_tensor *objs[] = {x, bias, bb, d, want};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

/* ---------------------------------------------------------------- views */
static void test_views(void) {
    const int64_t sz[4] = {3, 33, 4, 5};
    uint64_t rng = 5;
    mft_tensor *x = mft_empty(4, sz, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    mft_tensor *b = mft_to_format(x, MFT_NCHW16C);
    struct {
        int dim;
        int64_t start, len;
        bool ok;
    } nar[] = {{0, 1, 2, true},  {2, 1, 2, true},   {3, 2, 3, true},   {1, 16, 17, true},
               {1, 0, 16, true}, {1, 16, 16, true}, {1, 0, 32, true},  {1, 3, 5, false},
               {1, 0, 17, false}, {1, 16, 3, false}, {1, 32, 1, true}};
    for (size_t i = 0; i < sizeof nar / sizeof *nar; i++) {
        mft_clear_error();
        mft_tensor *v = mft_narrow(b, nar[i].dim, nar[i].start, nar[i].len);
        mft_tensor *p = mft_narrow(x, nar[i].dim, nar[i].start, nar[i].len);
        CHECK_MSG((v != NULL) == nar[i].ok, "narrow dim %d [%lld, +%lld): %s", nar[i].dim,
                  (long long)nar[i].start, (long long)nar[i].len, mft_last_error_message());
        if (v) {
            CHECK(mft_tensor_is_blocked(v) && mft_tensor_shares_storage(v, b) && same_values(v, p));
            CHECK(mft_tensor_check_padding(v) == MFT_OK);
            mft_tensor *c = mft_contiguous(v, MFT_CONTIGUOUS);
            CHECK(c && same_values(c, p) && mft_tensor_hash(c) == mft_tensor_hash(v));
            mft_tensor_release(c);
        } else {
            CHECK(mft_last_error() == MFT_ERR_NOT_VIEWABLE);
            TU_HAS("blocks of 16");
        }
        mft_tensor_release(v);
        mft_tensor_release(p);
    }
    mft_tensor *s = mft_select(b, 2, 3), *sp = mft_select(x, 2, 3);
    CHECK(s && mft_tensor_ndim(s) == 3 && same_values(s, sp));
    mft_tensor *sl = mft_slice(b, 3, 0, 5, 2), *slp = mft_slice(x, 3, 0, 5, 2);
    CHECK(sl && same_values(sl, slp));
    mft_clear_error();
    CHECK(mft_select(b, 1, 0) == NULL && mft_last_error() == MFT_ERR_NOT_VIEWABLE);
    CHECK(mft_slice(b, 1, 0, 32, 2) == NULL && mft_last_error() == MFT_ERR_NOT_VIEWABLE);
    CHECK(mft_permute(b, (int[]){0, 2, 3, 1}) == NULL && mft_last_error() == MFT_ERR_FORMAT);
    CHECK(mft_unsqueeze(b, 0) == NULL && mft_last_error() == MFT_ERR_FORMAT);
    CHECK(mft_view(b, 2, (int64_t[]){3, -1}) == NULL &&
          mft_last_error() == MFT_ERR_NOT_VIEWABLE);
    mft_tensor *r = mft_reshape(b, 2, (int64_t[]){3, -1}), *rp = mft_reshape(x, 2, (int64_t[]){3, -1});
    CHECK(r && !mft_tensor_is_blocked(r) && same_values(r, rp));
    mft_tensor *objs[] = {x, b, s, sp, sl, slp, r, rp};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

/* ---------------------------------------------------------------- from_blob */
static int deleted = 0;
static void count_delete(void *data, void *ctx) {
    (void)ctx;
    free(data);
    deleted++;
}

static void test_from_blob_layout(void) {
    const int64_t sz[4] = {1, 17, 2, 2};
    mft_layout l;
    TU_OK_S(mft_layout_for_tag(4, sz, MFT_LAYOUT_NCHW16C, &l));
    int64_t need = 0;
    TU_OK_S(mft_layout_storage_numel(&l, &need));
    CHECK_EQ_I(need, 2 * 2 * 2 * 16);
    float *buf = calloc((size_t)need, sizeof *buf);
    mft_clear_error();
    CHECK(mft_from_blob_layout(buf, (size_t)(need - 1) * 4, &l, 0, MFT_F32, count_delete, NULL) ==
              NULL &&
          mft_last_error() == MFT_ERR_BOUNDS);
    TU_HAS("mft_from_blob_layout");
    CHECK(deleted == 0); /* not on failure */
    deleted = 0;
    mft_tensor *t = mft_from_blob_layout(buf, (size_t)need * 4, &l, 0, MFT_F32, count_delete, NULL);
    CHECK(t && mft_tensor_format(t) == MFT_NCHW16C);
    mft_tensor *v = mft_narrow(t, 2, 1, 1);
    TU_OK_S(mft_tensor_set(t, (int64_t[]){0, 16, 1, 1}, 3.0));
    CHECK(buf[(1 * 2 * 2 + 1 * 2 + 1) * 16 + 0] == 3.0f); /* C1 = 1, h = 1, w = 1, lane 0 */
    buf[1 * 16 + 5] = 1.0f; /* a pad lane of pixel (0, 1) of the first block? no: lane 5 < 16 */
    CHECK(mft_tensor_check_padding(t) == MFT_OK); /* lane 5 of block 0 is channel 5 */
    buf[(1 * 4) * 16 + 7] = 2.0f; /* block 1 (channels 16..31), pixel 0, lane 7: channel 23 */
    mft_clear_error();
    CHECK(mft_tensor_check_padding(t) == MFT_ERR_INVALID);
    TU_HAS("pad lane [0,23,0,0]");
    mft_tensor_release(t);
    CHECK(deleted == 0); /* the view keeps the memory */
    mft_tensor_release(v);
    CHECK(deleted == 1);
}

/* ---------------------------------------------------------------- ops */
static void test_elementwise_and_fallback(void) {
    const int64_t sz[4] = {2, 21, 3, 3};
    uint64_t rng = 9;
    mft_tensor *x = mft_empty(4, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *bias = mft_empty(4, (int64_t[]){1, 21, 1, 1}, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    tu_fill_grid(bias, &rng);
    mft_tensor *b = mft_to_format(x, MFT_NCHW16C);
    mft_conversion_counts_reset();
    mft_tensor *e = mft_exp(b), *ep = mft_exp(x);
    mft_tensor *a = mft_add(b, bias), *ap = mft_add(x, bias);
    mft_tensor *m = mft_mul(b, e), *mp = mft_mul(x, ep);
    mft_tensor *s = mft_add_scalar(b, 1.0), *sp = mft_add_scalar(x, 1.0);
    mft_conversion_counts cc = mft_conversion_counts_get();
    CHECK_EQ_I(cc.total, 0); /* native: nothing converted */
    mft_tensor *got[] = {e, a, m, s}, *want[] = {ep, ap, mp, sp};
    for (int i = 0; i < 4; i++) {
        CHECK(got[i] && mft_tensor_format(got[i]) == MFT_NCHW16C);
        CHECK(same_values(got[i], want[i]) && mft_tensor_check_padding(got[i]) == MFT_OK);
    }
    /* in place on a blocked tensor */
    mft_tensor *c = mft_clone(b, MFT_PRESERVE);
    CHECK(mft_tensor_format(c) == MFT_NCHW16C);
    TU_OK_S(mft_exp_(c));
    CHECK(same_values(c, ep) && mft_tensor_check_padding(c) == MFT_OK);
    /* two blockings: converted (counted), result plain */
    mft_tensor *b8 = mft_to_format(x, MFT_NCHW8C);
    mft_conversion_counts_reset();
    mft_tensor *mix = mft_add(b, b8), *mixp = mft_add(x, x);
    cc = mft_conversion_counts_get();
    CHECK(mix && same_values(mix, mixp) && cc.count[MFT_CAUSE_FALLBACK] == 2);
    /* an op without a blocked path (max pooling is native for nChw16c F32
     * only): counted fallback, result in the input's format */
    mft_conversion_counts_reset();
    mft_tensor *pool = mft_max_pool2d(b8, (int64_t[]){2, 2}, (int64_t[]){1, 1}, (int64_t[]){0, 0},
                                      (int64_t[]){1, 1}, false);
    mft_tensor *poolp = mft_max_pool2d(x, (int64_t[]){2, 2}, (int64_t[]){1, 1}, (int64_t[]){0, 0},
                                       (int64_t[]){1, 1}, false);
    cc = mft_conversion_counts_get();
    CHECK(pool && mft_tensor_format(pool) == MFT_NCHW8C && same_values(pool, poolp));
    CHECK_EQ_I(cc.count[MFT_CAUSE_FALLBACK], 2);
    CHECK(!strcmp(mft_conversion_last()->op, "max_pool2d"));
    mft_tensor *objs[] = {x, bias, b, e, ep, a, ap, m, mp, s, sp, c, b8, mix, mixp, pool, poolp};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

static void test_gradients(void) {
    const int64_t sz[4] = {2, 5, 3, 3};
    uint64_t rng = 11;
    mft_tensor *x = mft_empty(4, sz, MFT_F64, MFT_CHANNELS_LAST);
    tu_fill_grid(x, &rng);
    mft_tensor *xb = mft_to_format(x, MFT_NCHW8C);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(xb, true);
    TU_OK_S(mft_tape_begin());
    mft_layout l;
    mft_layout_for_tag(4, sz, MFT_LAYOUT_NCHW16C, &l);
    mft_tensor *y = mft_to_layout(x, &l);   /* NHWC -> nChw16c */
    mft_tensor *z = mft_mul(y, xb);         /* 16c * 8c: a counted fallback */
    mft_tensor *w = mft_tanh(z);            /* plain */
    mft_tensor *loss = mft_sum(w, 0, NULL, false);
    TU_OK_S(mft_backward(loss, NULL));
    mft_tape_end();
    mft_tensor *gx = mft_tensor_grad(x), *gb = mft_tensor_grad(xb);
    CHECK(gx && mft_tensor_format(gx) == MFT_CHANNELS_LAST && !mft_tensor_is_blocked(gx));
    CHECK_MSG(gb && mft_tensor_format(gb) == MFT_NCHW8C && mft_tensor_check_padding(gb) == MFT_OK,
              "grad of the nChw8c leaf: %s", gb ? mft_format_name(mft_tensor_format(gb)) : "none");
    /* d/dx tanh(x * x) = 2x (1 - tanh^2(x^2)) for both leaves (same values) */
    int64_t idx[4] = {0};
    int bad = 0;
    do {
        const double v = mft_tensor_get(x, idx), t = tanh(v * v);
        const double want = v * (1 - t * t);
        bad += fabs(mft_tensor_get(gx, idx) - want) > 1e-12;
        bad += fabs(mft_tensor_get(gb, idx) - want) > 1e-12;
    } while (tu_next_index(4, sz, idx));
    CHECK_EQ_I(bad, 0);
    mft_tensor *objs[] = {x, xb, y, z, w, loss};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

/* ---------------------------------------------------------------- Ascend */
/* Every NumPy golden case (tests/golden/ascend_layouts.txt: the slot of each
 * element after Ascend's pad / reshape / transpose) of an mft dtype's size:
 * to_layout puts element i at NumPy's slot and zero elsewhere, and back. */
static void test_ascend_conversions(void) {
    char *text = og_read_golden("ascend_layouts.txt");
    if (!text) return;
    static og_ascend c;
    int cases = 0;
    char *cur = text;
    while (og_next_ascend(&cur, &c)) {
        const char *fmt = c.format;
        const int eb = c.elem_bytes, nd = c.nd;
        const int64_t *sz = c.sizes, numel = c.numel, nslots = c.nslots, *pos = c.pos;
        const mft_dtype dt = eb == 4 ? MFT_F32 : eb == 8 ? MFT_F64 : eb == 1 ? MFT_U8 : MFT_DTYPE_COUNT;
        if (dt == MFT_DTYPE_COUNT) continue; /* 2-byte elements: no mft dtype */
        mft_layout l;
        CHECK(mft_layout_from_ascend(nd, sz, fmt, (size_t)eb, &l) == MFT_OK);
        mft_tensor *x = mft_empty(nd, sz, dt, MFT_CONTIGUOUS);
        int64_t idx[MFT_MAX_DIMS] = {0}, e = 0;
        do {
            mft_tensor_set(x, idx, (double)(e++ % 250 + 1));
        } while (tu_next_index(nd, sz, idx));
        mft_tensor *b = mft_to_layout(x, &l);
        CHECK_MSG(b && mft_tensor_storage_numel(b) == nslots, "%s: %s", fmt,
                  mft_last_error_message());
        if (b) {
            const unsigned char *raw = mft_tensor_data(b);
            char *owner = calloc((size_t)nslots, 1);
            int bad = 0;
            for (int64_t i = 0; i < numel; i++) {
                owner[pos[i]] = 1;
                double v = dt == MFT_F32   ? ((const float *)(const void *)raw)[pos[i]]
                           : dt == MFT_F64 ? ((const double *)(const void *)raw)[pos[i]]
                                           : raw[pos[i]];
                bad += v != (double)(i % 250 + 1);
            }
            for (int64_t q = 0; q < nslots; q++)
                for (int k = 0; k < eb && !owner[q]; k++) bad += raw[q * eb + k] != 0;
            CHECK_MSG(bad == 0, "%s (%d-byte): %d slots differ from NumPy's", fmt, eb, bad);
            mft_tensor *back = mft_contiguous(b, MFT_CONTIGUOUS);
            CHECK(back && same_values(back, x));
            mft_tensor_release(back);
            free(owner);
        }
        mft_tensor_release(b);
        mft_tensor_release(x);
        cases++;
    }
    CHECK_MSG(cases >= 8, "only %d Ascend cases of an mft dtype", cases);
    free(text);
}

/* conv2d with a FRACTAL_Z weight and matmul with a FRACTAL_NZ operand give
 * the plain results; the FRACTAL_Z leaf's gradient keeps its layout. */
static void test_ascend_operands(void) {
    uint64_t rng = 21;
    const int64_t xs[4] = {2, 17, 6, 6}, ws[4] = {20, 17, 3, 3};
    mft_tensor *x = mft_empty(4, xs, MFT_F64, MFT_CONTIGUOUS), *w = mft_empty(4, ws, MFT_F64, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    tu_fill_grid(w, &rng);
    mft_layout lz;
    TU_OK_S(mft_layout_from_ascend(4, ws, "FRACTAL_Z", 8, &lz));
    mft_tensor *wz = mft_to_layout(w, &lz);
    CHECK(wz && mft_tensor_format(wz) == MFT_BLOCKED);
    mft_tensor_set_requires_grad(w, true);
    mft_tensor_set_requires_grad(wz, true);
    const int64_t one[2] = {1, 1};
    TU_OK_S(mft_tape_begin());
    mft_tensor *y0 = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *y1 = mft_conv2d(x, wz, NULL, one, one, one, 1);
    CHECK(y0 && y1 && mft_tensor_hash(y0) == mft_tensor_hash(y1));
    mft_tensor *l0 = mft_sum(y0, 0, NULL, false), *l1 = mft_sum(y1, 0, NULL, false);
    TU_OK_S(mft_backward(l0, NULL));
    TU_OK_S(mft_backward(l1, NULL));
    mft_tape_end();
    mft_tensor *g0 = mft_tensor_grad(w), *g1 = mft_tensor_grad(wz);
    mft_layout lg;
    CHECK(g1 && mft_tensor_layout(g1, &lg) == MFT_OK && mft_layout_equal(&lg, &lz));
    CHECK(g0 && g1 && same_values(g0, g1) && mft_tensor_check_padding(g1) == MFT_OK);
    /* FRACTAL_NZ matmul operand */
    const int64_t as[2] = {5, 33}, bs[2] = {33, 20};
    mft_tensor *a = mft_empty(2, as, MFT_F32, MFT_CONTIGUOUS), *b = mft_empty(2, bs, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(a, &rng);
    tu_fill_grid(b, &rng);
    mft_layout ln;
    TU_OK_S(mft_layout_from_ascend(2, bs, "FRACTAL_NZ", 4, &ln));
    mft_tensor *bn = mft_to_layout(b, &ln);
    mft_tensor *m0 = mft_matmul(a, b), *m1 = mft_matmul(a, bn);
    CHECK(m0 && m1 && !mft_tensor_is_blocked(m1) && mft_tensor_hash(m0) == mft_tensor_hash(m1));
    mft_tensor *objs[] = {x, w, wz, y0, y1, l0, l1, a, b, bn, m0, m1};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

/* Conversion events and tape nodes name a layout without a tag by its
 * oneDNN letters; the label is a stable pointer, the same for equal layouts,
 * and looking it up leaves the caller's error alone. */
static void test_layout_labels(void) {
    const int64_t sz[4] = {2, 5, 3, 3}, wsz[4] = {20, 17, 3, 3};
    mft_tensor *x = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w = mft_randn(4, wsz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_layout d4, dw;
    CHECK(mft_layout_from_onednn(4, sz, "aBcd4b", &d4) == MFT_OK);
    CHECK(mft_layout_from_onednn(4, wsz, "OIhw16i16o", &dw) == MFT_OK);
    mft_tensor *y = mft_to_layout(x, &d4);
    const mft_conversion_info *c = mft_conversion_last();
    CHECK(c && !strcmp(c->from, "NCHW") && !strcmp(c->to, "aBcd4b"));
    const char *first = c ? c->to : NULL;
    mft_tensor *y2 = mft_to_layout(x, &d4);
    c = mft_conversion_last();
    CHECK(c && c->to == first); /* interned */
    mft_tensor *wb = mft_to_layout(w, &dw);
    char want[64];
    CHECK(mft_layout_to_onednn(&dw, want, sizeof want) > 0);
    c = mft_conversion_last();
    CHECK(c && !strcmp(c->to, want));
    /* a step-2 view of H has no oneDNN tag: "blocked", the error kept */
    mft_tensor *v = mft_slice(y, 2, 0, 3, 2);
    CHECK(!mft_reshape(x, 1, (int64_t[]){7})); /* an earlier error */
    const mft_status had = mft_last_error();
    char had_msg[512];
    snprintf(had_msg, sizeof had_msg, "%s", mft_last_error_message());
    mft_tensor *vc = mft_contiguous(v, MFT_CONTIGUOUS);
    c = mft_conversion_last();
    CHECK(v && vc && c && !strcmp(c->from, "blocked"));
    CHECK(had != MFT_OK && mft_last_error() == had && !strcmp(mft_last_error_message(), had_msg));
    mft_clear_error();
    mft_tensor *all[] = {x, w, y, y2, wb, v, vc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void test_describe(void) {
    mft_tensor *b = mft_zeros(4, (int64_t[]){1, 3, 2, 2}, MFT_F32, MFT_NCHW16C);
    char buf[4096];
    mft_clear_error();
    mft_tensor_describe(b, buf, sizeof buf);
    CHECK(strstr(buf, "aBcd16b") && strstr(buf, "NC1HWC0") && strstr(buf, "padded   [1,16,2,2]"));
    CHECK(strstr(buf, "    3: pad") && strstr(buf, "   16: (0,0,0,1)"));
    CHECK(mft_last_error() == MFT_OK); /* describe leaves the error state alone */
    mft_tensor_release(b);
}

int main(void) {
    RUN(test_onednn_reorders);
    RUN(test_factories);
    RUN(test_copies);
    RUN(test_views);
    RUN(test_from_blob_layout);
    RUN(test_elementwise_and_fallback);
    RUN(test_gradients);
    RUN(test_ascend_conversions);
    RUN(test_ascend_operands);
    RUN(test_describe);
    RUN(test_layout_labels);
    TEST_MAIN_END();
}
