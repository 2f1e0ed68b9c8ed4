/* tests/tensor/test_layout.c — docs/spec.md §2-3 on hand-derived cases: the predicates on
 * raw stride arrays, the soft tag and its origin through factories, views and
 * conversions, the ambiguous shapes (C == 1, H == W == 1, N == 1 from
 * select + unsqueeze, all-ones, zero-size, broadcast), and the no-copy rules
 * of contiguous / to_format. Expected values are worked out from docs/spec.md
 * text by hand (PyTorch-derived golden data lives in test_golden_layout.c). */
#include "harness.h"
#include "internal.h"

static mft_tensor *mk(int ndim, const int64_t *sizes, mft_format fmt) {
    return mft_zeros(ndim, sizes, MFT_F32, fmt);
}

static void test_packed_strides(void) {
    int64_t s4[4] = {2, 3, 4, 5}, st[4];
    CHECK(mft_strides_for_format(4, s4, MFT_CONTIGUOUS, st) == MFT_OK);
    CHECK(st[0] == 60 && st[1] == 20 && st[2] == 5 && st[3] == 1);
    CHECK(mft_strides_for_format(4, s4, MFT_CHANNELS_LAST, st) == MFT_OK);
    CHECK(st[0] == 60 && st[1] == 1 && st[2] == 15 && st[3] == 3); /* (CHW,1,WC,C) */
    int64_t s5[5] = {2, 3, 4, 5, 6}, st5[5];
    CHECK(mft_strides_for_format(5, s5, MFT_CHANNELS_LAST, st5) == MFT_OK);
    CHECK(st5[0] == 360 && st5[1] == 1 && st5[2] == 90 && st5[3] == 18 && st5[4] == 3);
    int64_t s3[3] = {2, 3, 7}, st3[3];
    CHECK(mft_strides_for_format(3, s3, MFT_CHANNELS_LAST, st3) == MFT_OK);
    CHECK(st3[0] == 21 && st3[1] == 1 && st3[2] == 3); /* (C*L,1,C) */
    CHECK(mft_strides_for_format(2, s3, MFT_CHANNELS_LAST, st3) == MFT_ERR_FORMAT);
    mft_clear_error();
}

static void test_raw_predicates(void) {
    /* docs/spec.md §1 example: sizes (2,2,3) strides (6,3,1) */
    int64_t sz[3] = {2, 2, 3}, st[3] = {6, 3, 1};
    CHECK(mft__layout_is_contiguous(3, sz, st, 12));
    /* padded pitch: W stride 1, H stride 5 for W = 3 -> not dense */
    int64_t psz[4] = {1, 1, 2, 3}, pst[4] = {10, 10, 5, 1};
    CHECK(!mft__layout_is_contiguous(4, psz, pst, 6));
    CHECK(!mft__layout_is_dense(4, psz, pst));
    /* NHWC with room for 4 channels, 3 used */
    int64_t csz[4] = {2, 3, 2, 2}, cst[4] = {16, 1, 8, 4};
    CHECK(!mft__layout_is_cl_contiguous(4, csz, cst));
    CHECK(!mft__layout_is_dense(4, csz, cst));
    CHECK(mft__layout_strides_like_cl(4, csz, cst));
    /* size-1 dims never constrain contiguity */
    int64_t osz[4] = {1, 3, 1, 4}, ost[4] = {999, 4, 77, 1};
    CHECK(mft__layout_is_contiguous(4, osz, ost, 12));
    /* stride 0 (broadcast) is never dense */
    int64_t bsz[4] = {2, 3, 4, 4}, bst[4] = {0, 1, 0, 0};
    CHECK(!mft__layout_is_dense(4, bsz, bst));
    CHECK(!mft__layout_is_contiguous(4, bsz, bst, 96));
    /* overlapping (1,1,1,1) strides */
    int64_t vst[4] = {1, 1, 1, 1};
    CHECK(!mft__layout_is_dense(4, bsz, vst));
    /* a permuted dense layout (C,N,W,H order) is dense but neither format */
    int64_t qsz[4] = {2, 3, 4, 5}, qst[4] = {20, 40, 1, 4};
    CHECK(mft__layout_is_dense(4, qsz, qst));
    CHECK(!mft__layout_is_contiguous(4, qsz, qst, 120));
    CHECK(!mft__layout_is_cl_contiguous(4, qsz, qst));
    /* channels-last contiguity has no empty shortcut */
    int64_t esz[4] = {0, 3, 4, 4}, est[4] = {48, 16, 4, 1};
    CHECK(mft__layout_is_contiguous(4, esz, est, 0));
    CHECK(!mft__layout_is_cl_contiguous(4, esz, est));
    /* strides_like_channels_last: stride 0 on C is false; N stride == C stride false */
    int64_t zst[4] = {48, 0, 12, 3};
    CHECK(!mft__layout_strides_like_cl(4, bsz, zst));
    int64_t nsz[4] = {4, 1, 1, 1}, nst[4] = {1, 1, 1, 1};
    CHECK(!mft__layout_strides_like_cl(4, nsz, nst));
    /* N1H1 distinguished by size-1 strides: [H,1,1,1] is CL, [H,H,1,1] is not */
    int64_t hsz[4] = {2, 1, 5, 1}, hcl[4] = {5, 1, 1, 1}, hct[4] = {5, 5, 1, 1};
    CHECK(mft__layout_strides_like_cl(4, hsz, hcl));
    CHECK(!mft__layout_strides_like_cl(4, hsz, hct));
    /* rank 0 and rank 1 */
    CHECK(mft__layout_is_dense(0, NULL, NULL));
    int64_t one = 5, s2 = 2;
    CHECK(!mft__layout_is_dense(1, &one, &s2));
}

static void test_order_fits(void) {
    int64_t sz[4] = {2, 3, 4, 5}, cst[4] = {60, 20, 5, 1}, lst[4] = {60, 1, 15, 3};
    CHECK(mft__layout_order_fits(4, sz, cst, MFT_CONTIGUOUS));
    CHECK(!mft__layout_order_fits(4, sz, cst, MFT_CHANNELS_LAST));
    CHECK(mft__layout_order_fits(4, sz, lst, MFT_CHANNELS_LAST));
    CHECK(!mft__layout_order_fits(4, sz, lst, MFT_CONTIGUOUS));
    /* C == 1: both fit */
    int64_t c1[4] = {2, 1, 4, 5}, c1st[4] = {20, 1, 5, 1};
    CHECK(mft__layout_order_fits(4, c1, c1st, MFT_CONTIGUOUS));
    CHECK(mft__layout_order_fits(4, c1, c1st, MFT_CHANNELS_LAST));
    /* W/H transpose of NCHW: neither */
    int64_t tst[4] = {60, 20, 1, 4};
    CHECK(!mft__layout_order_fits(4, sz, tst, MFT_CONTIGUOUS));
    CHECK(!mft__layout_order_fits(4, sz, tst, MFT_CHANNELS_LAST));
    /* per-channel broadcast (1,C,1,1) expanded: only C has a stride: both */
    int64_t bst[4] = {0, 1, 0, 0};
    CHECK(mft__layout_order_fits(4, sz, bst, MFT_CONTIGUOUS));
    CHECK(mft__layout_order_fits(4, sz, bst, MFT_CHANNELS_LAST));
}

static void test_factory_tags(void) {
    int64_t s4[4] = {2, 3, 4, 5};
    mft_tensor *a = mk(4, s4, MFT_CONTIGUOUS), *b = mk(4, s4, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_format(a) == MFT_CONTIGUOUS && mft_tensor_format_origin(a) == MFT_DECLARED);
    CHECK(mft_tensor_format(b) == MFT_CHANNELS_LAST && mft_tensor_format_origin(b) == MFT_DECLARED);
    CHECK(mft_tensor_is_contiguous(a, MFT_CONTIGUOUS) && !mft_tensor_is_contiguous(a, MFT_CHANNELS_LAST));
    CHECK(mft_tensor_is_contiguous(b, MFT_CHANNELS_LAST) && !mft_tensor_is_contiguous(b, MFT_CONTIGUOUS));
    CHECK(mft_tensor_is_dense(a) && mft_tensor_is_dense(b));
    CHECK(mft_tensor_suggest_format(b) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_suggest_format(a) == MFT_CONTIGUOUS);
    /* C == 1 declared channels_last keeps the declared tag (pytorch/pytorch#82060) */
    int64_t c1[4] = {2, 1, 4, 5};
    mft_tensor *c = mk(4, c1, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_format(c) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_is_contiguous(c, MFT_CONTIGUOUS) && mft_tensor_is_contiguous(c, MFT_CHANNELS_LAST));
    /* rank 3 channels_last extension (N, L, C) */
    int64_t s3[3] = {2, 3, 7};
    mft_tensor *d = mk(3, s3, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_format(d) == MFT_CHANNELS_LAST && mft_tensor_is_contiguous(d, MFT_CHANNELS_LAST));
    /* empty_strided infers: NHWC strides -> CHANNELS_LAST (inferred) */
    int64_t st[4] = {60, 1, 15, 3};
    mft_tensor *e = mft_empty_strided(4, s4, st, MFT_F32);
    CHECK(mft_tensor_format(e) == MFT_CHANNELS_LAST && mft_tensor_format_origin(e) == MFT_INFERRED);
    /* ambiguous empty_strided (C == 1, NHWC-packed strides) falls back to suggest_format */
    int64_t c1st[4] = {20, 1, 5, 1};
    mft_tensor *f = mft_empty_strided(4, c1, c1st, MFT_F32);
    CHECK(mft_tensor_format(f) == MFT_CHANNELS_LAST);
    mft_tensor *all[] = {a, b, c, d, e, f};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void test_view_tags(void) {
    int64_t s4[4] = {2, 3, 4, 5};
    mft_tensor *cl = mk(4, s4, MFT_CHANNELS_LAST), *nc = mk(4, s4, MFT_CONTIGUOUS);
    /* narrow keeps the layout: tag inferred from unambiguous strides */
    mft_tensor *v = mft_narrow(cl, 2, 1, 2);
    CHECK(mft_tensor_format(v) == MFT_CHANNELS_LAST && mft_tensor_format_origin(v) == MFT_INFERRED);
    CHECK(!mft_tensor_is_contiguous(v, MFT_CHANNELS_LAST) && !mft_tensor_is_dense(v));
    mft_tensor_release(v);
    v = mft_narrow(cl, 1, 0, 1); /* C == 1 slice of NHWC: both fit -> inherited CL */
    CHECK(mft_tensor_format(v) == MFT_CHANNELS_LAST && mft_tensor_format_origin(v) == MFT_INHERITED);
    mft_tensor_release(v);
    v = mft_narrow(nc, 1, 0, 1); /* C == 1 slice of NCHW: inherited CONTIGUOUS */
    CHECK(mft_tensor_format(v) == MFT_CONTIGUOUS && mft_tensor_format_origin(v) == MFT_INHERITED);
    mft_tensor_release(v);
    /* H == W == 1 slices keep the source tag */
    mft_tensor *h = mft_narrow(cl, 2, 0, 1), *hw = mft_narrow(h, 3, 0, 1);
    CHECK(mft_tensor_format(hw) == MFT_CHANNELS_LAST && mft_tensor_format_origin(hw) == MFT_INHERITED);
    mft_tensor_release(h);
    mft_tensor_release(hw);
    /* N == 1 from select + unsqueeze: N is size 1, C order still decides */
    mft_tensor *s = mft_select(cl, 0, 1), *u = mft_unsqueeze(s, 0);
    CHECK(mft_tensor_ndim(u) == 4 && mft_tensor_format(u) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_is_contiguous(u, MFT_CHANNELS_LAST));
    CHECK(mft_tensor_format_origin(u) == MFT_INFERRED);
    mft_tensor_release(s);
    mft_tensor_release(u);
    /* W/H transpose fits neither: CONTIGUOUS, inferred */
    mft_tensor *t = mft_transpose(nc, 2, 3);
    CHECK(mft_tensor_format(t) == MFT_CONTIGUOUS && mft_tensor_format_origin(t) == MFT_INFERRED);
    CHECK(!mft_tensor_order_fits(t, MFT_CONTIGUOUS) && !mft_tensor_order_fits(t, MFT_CHANNELS_LAST));
    mft_tensor_release(t);
    /* permute NCHW -> (0,2,3,1) then view it back as NCHW: a NHWC tensor by strides */
    int perm[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
    int64_t nhwc_sizes[4] = {2, 4, 5, 3};
    mft_tensor *phys = mk(4, nhwc_sizes, MFT_CONTIGUOUS), *logical = mft_permute(phys, back);
    CHECK(mft_tensor_format(logical) == MFT_CHANNELS_LAST && mft_tensor_is_contiguous(logical, MFT_CHANNELS_LAST));
    mft_tensor *p2 = mft_permute(logical, perm);
    CHECK(mft_tensor_is_contiguous(p2, MFT_CONTIGUOUS));
    mft_tensor_release(phys);
    mft_tensor_release(logical);
    mft_tensor_release(p2);
    /* broadcast of a per-channel vector: ambiguous -> inherits the source tag */
    int64_t b1[4] = {1, 3, 1, 1};
    mft_tensor *bias = mk(4, b1, MFT_CHANNELS_LAST), *ex = mft_expand(bias, 4, s4);
    CHECK(mft_tensor_format(ex) == MFT_CHANNELS_LAST && mft_tensor_format_origin(ex) == MFT_INHERITED);
    CHECK(!mft_tensor_is_dense(ex));
    mft_tensor_release(bias);
    mft_tensor_release(ex);
    /* zero-size: no order, inherits */
    mft_tensor *z = mft_narrow(cl, 0, 0, 0);
    CHECK(mft_tensor_numel(z) == 0 && mft_tensor_format(z) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_format_origin(z) == MFT_INHERITED);
    CHECK(mft_tensor_is_contiguous(z, MFT_CONTIGUOUS) && mft_tensor_is_dense(z));
    mft_tensor_release(z);
    /* rank change to 2: tag CONTIGUOUS */
    mft_tensor *f = mft_flatten(nc, 1, 3);
    CHECK(mft_tensor_ndim(f) == 2 && mft_tensor_format(f) == MFT_CONTIGUOUS);
    mft_tensor_release(f);
    mft_tensor_release(cl);
    mft_tensor_release(nc);
}

static void test_contiguous_rules(void) {
    int64_t s4[4] = {2, 3, 4, 5};
    mft_tensor *nc = mk(4, s4, MFT_CONTIGUOUS);
    /* already contiguous in the tag's format: the same tensor */
    mft_tensor *same = mft_contiguous(nc, MFT_CONTIGUOUS);
    CHECK(same == nc);
    mft_tensor_release(same);
    /* conversion copies */
    mft_tensor *cl = mft_contiguous(nc, MFT_CHANNELS_LAST);
    CHECK(cl != nc && !mft_tensor_shares_storage(cl, nc));
    CHECK(mft_tensor_is_contiguous(cl, MFT_CHANNELS_LAST) && mft_tensor_format(cl) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_format_origin(cl) == MFT_DECLARED);
    mft_tensor_release(cl);
    /* C == 1 NCHW asked for channels_last: no copy, new header with the new tag,
     * the caller's tensor keeps its tag */
    int64_t c1[4] = {2, 1, 4, 5};
    mft_tensor *g = mk(4, c1, MFT_CONTIGUOUS);
    mft_tensor *gl = mft_contiguous(g, MFT_CHANNELS_LAST);
    CHECK(gl != g && mft_tensor_shares_storage(gl, g) && mft_tensor_data(gl) == mft_tensor_data(g));
    CHECK(mft_tensor_format(gl) == MFT_CHANNELS_LAST && mft_tensor_format_origin(gl) == MFT_DECLARED);
    CHECK(mft_tensor_format(g) == MFT_CONTIGUOUS);
    mft_tensor *gt = mft_to_format(g, MFT_CHANNELS_LAST);
    CHECK(gt != g && mft_tensor_shares_storage(gt, g) && mft_tensor_format(gt) == MFT_CHANNELS_LAST);
    mft_tensor_release(gl);
    mft_tensor_release(gt);
    mft_tensor_release(g);
    /* to_format's no-copy test is "dense and order fits": a batch slice of an
     * NHWC tensor is CL-contiguous already; a permuted-but-dense NHWC view too */
    mft_tensor *x = mk(4, s4, MFT_CHANNELS_LAST), *xs = mft_narrow(x, 0, 1, 1);
    mft_tensor *xt = mft_to_format(xs, MFT_CHANNELS_LAST);
    CHECK(xt == xs);
    mft_tensor_release(xt);
    /* a padded (narrowed C) NHWC view is not dense: to_format copies */
    mft_tensor *xc = mft_narrow(x, 1, 0, 2), *xct = mft_to_format(xc, MFT_CHANNELS_LAST);
    CHECK(!mft_tensor_shares_storage(xct, x) && mft_tensor_is_contiguous(xct, MFT_CHANNELS_LAST));
    mft_tensor *pres = mft_to_format(xc, MFT_PRESERVE);
    CHECK(pres == xc);
    mft_tensor_release(pres);
    mft_tensor_release(xct);
    mft_tensor_release(xc);
    mft_tensor_release(xs);
    /* clone(PRESERVE) of a dense NHWC keeps strides; of a padded view gives dense NHWC */
    mft_tensor *c = mft_clone(x, MFT_PRESERVE);
    CHECK(mft_tensor_is_contiguous(c, MFT_CHANNELS_LAST) && !mft_tensor_shares_storage(c, x));
    CHECK(mft_tensor_format(c) == MFT_CHANNELS_LAST);
    mft_tensor_release(c);
    mft_tensor *xn = mft_narrow(x, 3, 1, 3), *cn = mft_clone(xn, MFT_PRESERVE);
    CHECK(mft_tensor_is_contiguous(cn, MFT_CHANNELS_LAST));
    mft_tensor *el = mft_empty_like(xn, MFT_CONTIGUOUS);
    CHECK(mft_tensor_is_contiguous(el, MFT_CONTIGUOUS) && mft_tensor_format_origin(el) == MFT_DECLARED);
    mft_tensor_release(el);
    mft_tensor_release(cn);
    mft_tensor_release(xn);
    /* clone(PRESERVE) of an ambiguous C == 1 channels_last tensor keeps the tag */
    mft_tensor *k = mk(4, c1, MFT_CHANNELS_LAST), *kc = mft_clone(k, MFT_PRESERVE);
    CHECK(mft_tensor_format(kc) == MFT_CHANNELS_LAST && mft_tensor_format_origin(kc) == MFT_INHERITED);
    mft_tensor_release(kc);
    mft_tensor_release(k);
    mft_tensor_release(x);
    mft_tensor_release(nc);
}

static void test_flags_follow_views(void) {
    /* every predicate is recomputed on each view (cached flags never stale) */
    int64_t s5[5] = {2, 3, 4, 5, 6};
    mft_tensor *x = mk(5, s5, MFT_CHANNELS_LAST);
    CHECK(mft_tensor_is_contiguous(x, MFT_CHANNELS_LAST) && mft_tensor_strides_like_channels_last(x));
    mft_tensor *s = mft_slice(x, 4, 0, 6, 2);
    CHECK(!mft_tensor_is_dense(s) && mft_tensor_strides_like_channels_last(s));
    CHECK(mft_tensor_format(s) == MFT_CHANNELS_LAST);
    mft_tensor *c = mft_contiguous(s, MFT_CONTIGUOUS);
    CHECK(mft_tensor_is_contiguous(c, MFT_CONTIGUOUS) && !mft_tensor_strides_like_channels_last(c));
    CHECK(mft_tensor_format(c) == MFT_CONTIGUOUS);
    mft_tensor_release(c);
    mft_tensor_release(s);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_packed_strides);
    RUN(test_raw_predicates);
    RUN(test_order_fits);
    RUN(test_factory_tags);
    RUN(test_view_tags);
    RUN(test_contiguous_rules);
    RUN(test_flags_follow_views);
    TEST_MAIN_END();
}
