/* tests/tensor/test_layout_desc.c — the layout descriptor (mft/layout.h,
 * docs/spec.md §7) against three references:
 *   - oneDNN 2.6: tests/golden/onednn_layouts.txt (tests/golden/gen_onednn_layouts.c)
 *     gives, per tag and sizes, dnnl_memory_desc_init_by_tag's padded dims,
 *     outer strides, inner blocks and byte size, and where a reorder from the
 *     plain tensor put every logical element (every other slot held 0);
 *   - NumPy: tests/golden/ascend_layouts.txt (tests/golden/gen_ascend_layouts.py)
 *     gives the slot of every element after the Ascend pad/reshape/transpose;
 *   - XLA's tiling formula (docs/tiled_layout.md of openxla/xla), worked here
 *     by hand.
 * For each descriptor: the offset of every element, the storage size, the
 * kind (element / pad) of every slot and the element it holds; then the
 * printers and parsers round trip, and every refusal names the function. */
#include <stdbool.h>
#include "harness.h"
#include "test_util.h"
#include "layout_golden.h"


/* Every logical element at its expected slot, every other slot a pad lane,
 * storage size nslots. */
static void check_positions(const char *what, const mft_layout *l, int64_t nslots,
                            const int64_t *pos) {
    int64_t n = -1;
    CHECK_MSG(mft_layout_storage_numel(l, &n) == MFT_OK && n == nslots,
              "%s: storage %lld, want %lld", what, (long long)n, (long long)nslots);
    if (n != nslots) return;
    int64_t numel = 1, idx[MFT_MAX_DIMS] = {0};
    for (int d = 0; d < l->ndim; d++) numel *= l->sizes[d];
    char *owner = calloc((size_t)nslots + 1, 1);
    int bad = 0;
    for (int64_t i = 0; i < numel && bad < 5; i++) {
        int64_t off = -1, back[MFT_MAX_DIMS];
        mft_layout_slot_kind kind = MFT_SLOT_GAP;
        bool ok = mft_layout_offset(l, idx, &off) == MFT_OK && off == pos[i] &&
                  mft_layout_slot(l, off, back, &kind) == MFT_OK && kind == MFT_SLOT_ELEMENT;
        for (int d = 0; ok && d < l->ndim; d++) ok = back[d] == idx[d];
        if (!ok) bad++;
        CHECK_MSG(ok, "%s: element %lld at %lld, want %lld", what, (long long)i, (long long)off,
                  (long long)pos[i]);
        if (pos[i] >= 0 && pos[i] < nslots) owner[pos[i]] = 1;
        for (int d = l->ndim - 1; d >= 0; d--) {
            if (++idx[d] < l->sizes[d]) break;
            idx[d] = 0;
        }
    }
    int64_t pads = 0;
    for (int64_t s = 0; s < nslots && bad < 5; s++) {
        bool pad = false;
        bool ok = mft_layout_is_pad(l, s, &pad) == MFT_OK && pad == !owner[s];
        if (!ok) bad++;
        CHECK_MSG(ok, "%s: slot %lld is_pad %d, want %d", what, (long long)s, pad, !owner[s]);
        pads += pad;
    }
    CHECK_MSG(pads == nslots - numel, "%s: %lld pad lanes", what, (long long)pads);
    free(owner);
}




static void round_trip_onednn(const char *what, const mft_layout *l) {
    char buf[128];
    int n = mft_layout_to_onednn(l, buf, sizeof buf);
    mft_layout back;
    CHECK_MSG(n > 0 && mft_layout_from_onednn(l->ndim, l->sizes, buf, &back) == MFT_OK &&
                  mft_layout_equal(&back, l),
              "%s: printed '%s'", what, n > 0 ? buf : mft_last_error_message());
}

static void test_onednn_golden(void) {
    char *text = og_read_golden("onednn_layouts.txt");
    if (!text) return;
    static og_case c;
    int cases = 0;
    char *cur = text;
    while (og_next(&cur, &c)) {
        const char *alias = c.alias, *letters = c.letters;
        const int nd = c.nd, nb = c.nb;
        const int64_t *sizes = c.sizes, *padded = c.padded, *strides = c.strides;
        const int64_t *bsize = c.bsize, bytes = c.bytes, *pos = c.pos;
        const int *bdim = c.bdim;
        CHECK_EQ_I(c.npos, c.numel);
        char what[96];
        snprintf(what, sizeof what, "%s/%s sizes[1]=%lld", alias, letters, (long long)sizes[1]);
        const char *names[2] = {alias, letters};
        for (int v = 0; v < 2; v++) {
            mft_layout l;
            mft_status st = mft_layout_from_onednn(nd, sizes, names[v], &l);
            CHECK_MSG(st == MFT_OK, "%s: %s", what, mft_last_error_message());
            if (st != MFT_OK) continue;
            bool same = l.ndim == nd && l.nblocks == nb;
            for (int d = 0; same && d < nd; d++)
                same = l.sizes[d] == sizes[d] && l.padded[d] == padded[d] &&
                       l.strides[d] == strides[d];
            for (int k = 0; same && k < nb; k++)
                same = l.block_size[k] == bsize[k] && l.block_dim[k] == bdim[k];
            CHECK_MSG(same, "%s (%s): descriptor differs from oneDNN's", what, names[v]);
            check_positions(what, &l, bytes / 4, pos);
            char buf[64];
            CHECK_MSG(mft_layout_to_onednn(&l, buf, sizeof buf) == (int)strlen(letters) &&
                          !strcmp(buf, letters),
                      "%s: printed '%s'", what, buf);
            round_trip_onednn(what, &l);
        }
        /* the named tags give the same descriptors */
        static const struct { const char *letters; mft_layout_tag tag; } named[] = {
            {"abc", MFT_LAYOUT_NCHW},        {"abcd", MFT_LAYOUT_NCHW},
            {"abcde", MFT_LAYOUT_NCHW},      {"acb", MFT_LAYOUT_NHWC},
            {"acdb", MFT_LAYOUT_NHWC},       {"acdeb", MFT_LAYOUT_NHWC},
            {"aBc8b", MFT_LAYOUT_NCHW8C},    {"aBcd8b", MFT_LAYOUT_NCHW8C},
            {"aBcde8b", MFT_LAYOUT_NCHW8C},  {"aBc16b", MFT_LAYOUT_NCHW16C},
            {"aBcd16b", MFT_LAYOUT_NCHW16C}, {"aBcde16b", MFT_LAYOUT_NCHW16C}};
        for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
            if (strcmp(named[i].letters, letters)) continue;
            mft_layout a, b;
            CHECK_MSG(mft_layout_for_tag(nd, sizes, named[i].tag, &a) == MFT_OK &&
                          mft_layout_from_onednn(nd, sizes, letters, &b) == MFT_OK &&
                          mft_layout_equal(&a, &b),
                      "%s: mft_layout_for_tag differs", what);
        }
        cases++;
    }
    CHECK_MSG(cases >= 60, "only %d oneDNN cases", cases);
    free(text);
}

static void test_ascend_golden(void) {
    char *text = og_read_golden("ascend_layouts.txt");
    if (!text) return;
    static og_ascend c;
    int cases = 0;
    char *cur = text;
    while (og_next_ascend(&cur, &c)) {
        const char *fmt = c.format;
        const size_t eb = (size_t)c.elem_bytes;
        const int nd = c.nd;
        const int64_t *sizes = c.sizes, nslots = c.nslots, *pos = c.pos;
        CHECK_EQ_I(c.npos, c.numel);
        char what[96];
        snprintf(what, sizeof what, "%s %zu-byte sizes[1]=%lld", fmt, eb, (long long)sizes[1]);
        mft_layout l;
        mft_status st = mft_layout_from_ascend(nd, sizes, fmt, eb, &l);
        CHECK_MSG(st == MFT_OK, "%s: %s", what, mft_last_error_message());
        if (st != MFT_OK) continue;
        check_positions(what, &l, nslots, pos);
        char buf[32];
        CHECK_MSG(mft_layout_to_ascend(&l, eb, buf, sizeof buf) == (int)strlen(fmt) &&
                      !strcmp(buf, fmt), "%s: named '%s'", what, buf);
        round_trip_onednn(what, &l);
        cases++;
    }
    CHECK_MSG(cases >= 13, "only %d Ascend cases", cases);
    free(text);
}

static int64_t off_of(const mft_layout *l, const int64_t *idx) {
    int64_t off = -1;
    CHECK(mft_layout_offset(l, idx, &off) == MFT_OK);
    return off;
}

static int64_t numel_of(const mft_layout *l) {
    int64_t n = -1;
    CHECK(mft_layout_storage_numel(l, &n) == MFT_OK);
    return n;
}

/* The worked examples of the research's test-case table. */
static void test_worked_examples(void) {
    mft_layout l;
    int64_t s4[4] = {2, 17, 4, 5}, i4[4] = {1, 16, 2, 3};
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW16C, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i4), 1168);
    CHECK_EQ_I(numel_of(&l), 1280);
    CHECK(mft_layout_from_ascend(4, s4, "NC1HWC0", 2, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i4), 1168);
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW8C, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i4), 904);
    CHECK_EQ_I(numel_of(&l), 960);
    int64_t s5[5] = {2, 20, 3, 2, 3}, i5[5] = {1, 17, 2, 1, 2};
    CHECK(mft_layout_from_ascend(5, s5, "NDC1HWC0", 2, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i5), 1137);
    CHECK_EQ_I(numel_of(&l), 1152);
    int64_t w[4] = {20, 17, 3, 2}, iw[4] = {19, 16, 2, 1};
    CHECK(mft_layout_from_onednn(4, w, "OIhw16i16o", &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, iw), 5891);
    CHECK_EQ_I(numel_of(&l), 6144);
    CHECK(mft_layout_from_onednn(4, w, "Ohwi16o", &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, iw), 3251);
    CHECK_EQ_I(numel_of(&l), 3264);
    CHECK(mft_layout_from_ascend(4, w, "FRACTAL_Z", 2, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, iw), 5936);
    CHECK_EQ_I(numel_of(&l), 6144);
    int64_t m[3] = {2, 20, 28}, im[3] = {1, 17, 27};
    CHECK(mft_layout_from_ascend(3, m, "FRACTAL_NZ", 2, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, im), 1819);
    CHECK_EQ_I(numel_of(&l), 2048);
    /* FRACTAL_Z is oneDNN's BcdA16a16b for C0 = 16; FRACTAL_NZ is BA16a16b per matrix */
    mft_layout o;
    CHECK(mft_layout_from_ascend(4, w, "FRACTAL_Z", 4, &l) == MFT_OK);
    CHECK(mft_layout_from_onednn(4, w, "BcdA16a16b", &o) == MFT_OK && mft_layout_equal(&l, &o));
    CHECK(mft_layout_from_ascend(3, m, "FRACTAL_NZ", 2, &l) == MFT_OK);
    CHECK(mft_layout_from_onednn(3, m, "aCB16b16c", &o) == MFT_OK && mft_layout_equal(&l, &o));
    /* C0 by element size: 32 for 1 byte; the NZ fractal is 16 x (32 B / size) */
    CHECK(mft_layout_from_ascend(4, s4, "NC1HWC0", 1, &l) == MFT_OK);
    CHECK(l.nblocks == 1 && l.block_size[0] == 32 && l.padded[1] == 32);
    CHECK(mft_layout_from_ascend(3, m, "FRACTAL_NZ", 4, &l) == MFT_OK);
    CHECK(l.block_size[0] == 16 && l.block_size[1] == 8 && l.padded[2] == 32);
    /* seed 001's padded XLA example: [2,3] column-major padded to [3,5] */
    int64_t ps[2] = {2, 3}, pst[2] = {1, 3}, pi[2] = {1, 2};
    CHECK(mft_layout_plain(2, ps, pst, &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, pi), 7);
    CHECK_EQ_I(numel_of(&l), 8);
    mft_layout_slot_kind kind;
    CHECK(mft_layout_slot(&l, 2, NULL, &kind) == MFT_OK && kind == MFT_SLOT_GAP);
    CHECK(mft_layout_slot(&l, 3, pi, &kind) == MFT_OK && kind == MFT_SLOT_ELEMENT &&
          pi[0] == 0 && pi[1] == 1);
    /* empty layouts span nothing */
    int64_t e4[4] = {2, 0, 4, 5};
    CHECK(mft_layout_for_tag(4, e4, MFT_LAYOUT_NCHW16C, &l) == MFT_OK);
    CHECK_EQ_I(numel_of(&l), 0);
    CHECK(mft_layout_plain(0, NULL, NULL, &l) == MFT_OK);
    CHECK_EQ_I(numel_of(&l), 1);
    CHECK(mft_layout_offset(&l, NULL, &pi[0]) == MFT_OK && pi[0] == 0);
}

/* XLA's tiled index of a row-major 2-D [d0,d1] with one tile (t0,t1):
 * linear_index((e0/t0, e1/t1, e0%t0, e1%t1), (ceil(d0/t0), ceil(d1/t1), t0, t1)). */
static int64_t xla_tiled2(int64_t e0, int64_t e1, int64_t d1, int64_t t0, int64_t t1) {
    int64_t n1 = (d1 + t1 - 1) / t1;
    return ((e0 / t0 * n1 + e1 / t1) * t0 + e0 % t0) * t1 + e1 % t1;
}

static void test_xla(void) {
    mft_layout l;
    int64_t s[2] = {3, 5}, i[2] = {2, 3};
    CHECK(mft_layout_from_xla(2, s, "{1,0:T(2,2)}", &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i), 17);
    CHECK_EQ_I(numel_of(&l), 24);
    /* row-major tiles against the formula, every element */
    static const struct { int64_t d0, d1, t0, t1; const char *s; } cases[] = {
        {3, 5, 2, 2, "{1,0:T(2,2)}"}, {10, 300, 8, 128, "{1,0:T(8,128)}"},
        {7, 9, 4, 3, "{1,0:T(4,3)}"}, {3, 5, 1, 4, "{1,0:T(1,4)}"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t sz[2] = {cases[c].d0, cases[c].d1};
        CHECK(mft_layout_from_xla(2, sz, cases[c].s, &l) == MFT_OK);
        int bad = 0;
        for (int64_t a = 0; a < sz[0]; a++)
            for (int64_t b = 0; b < sz[1]; b++) {
                int64_t ix[2] = {a, b};
                int64_t want = xla_tiled2(a, b, sz[1], cases[c].t0, cases[c].t1);
                if (off_of(&l, ix) != want && bad++ < 3)
                    CHECK_MSG(false, "%s (%lld,%lld) -> %lld", cases[c].s, (long long)a,
                              (long long)b, (long long)want);
            }
        int64_t p0 = (sz[0] + cases[c].t0 - 1) / cases[c].t0 * cases[c].t0;
        int64_t p1 = (sz[1] + cases[c].t1 - 1) / cases[c].t1 * cases[c].t1;
        CHECK_EQ_I(numel_of(&l), p0 * p1);
        char buf[64];
        CHECK(mft_layout_to_xla(&l, buf, sizeof buf) > 0 && !strcmp(buf, cases[c].s));
    }
    /* column-major [5,3] tiled (2,4): physical dims (1, 0), so it is the
     * row-major [3,5] formula on (e1, e0) */
    int64_t cm[2] = {5, 3};
    CHECK(mft_layout_from_xla(2, cm, "{0,1:T(2,4)}", &l) == MFT_OK);
    for (int64_t a = 0; a < 5; a++)
        for (int64_t b = 0; b < 3; b++) {
            int64_t ix[2] = {a, b};
            CHECK(off_of(&l, ix) == xla_tiled2(b, a, 5, 2, 4));
        }
    /* rank 3, tile on the two minor dims; dim 0 untiled outermost */
    int64_t r3[3] = {2, 3, 5}, ix3[3] = {1, 2, 4};
    CHECK(mft_layout_from_xla(3, r3, "{2,1,0:T(2,3)}", &l) == MFT_OK);
    /* per dim-0 step: ceil(3/2)*ceil(5/3) tiles of 6 = 24 */
    CHECK_EQ_I(off_of(&l, ix3), 24 + xla_tiled2(2, 4, 5, 2, 3));
    CHECK_EQ_I(numel_of(&l), 48);
    /* a one-dim tile: T(4) on the minor dim of [3,5] -> rows padded to 8 */
    int64_t i2[2] = {2, 4};
    CHECK(mft_layout_from_xla(2, s, "{1,0:T(4)}", &l) == MFT_OK);
    CHECK_EQ_I(off_of(&l, i2), 20);
    CHECK_EQ_I(numel_of(&l), 24);
    /* two levels: (8,128) then (2,1) on the tile: shape (M/8, N/128, 4, 128, 2, 1),
     * off = (tile)·1024 + ((m%8)/2)·256 + (n%128)·2 + m%2 */
    int64_t big[2] = {10, 300};
    CHECK(mft_layout_from_xla(2, big, "{1,0:T(8,128)(2,1)}", &l) == MFT_OK);
    CHECK(l.nblocks == 4);
    for (int64_t a = 0; a < 10; a++)
        for (int64_t b = 0; b < 300; b += 7) {
            int64_t ix[2] = {a, b};
            int64_t want = (a / 8 * 3 + b / 128) * 1024 + (a % 8) / 2 * 256 + (b % 128) * 2 + a % 2;
            if (off_of(&l, ix) != want) CHECK_MSG(false, "(%lld,%lld)", (long long)a, (long long)b);
        }
    int64_t e[2] = {9, 130};
    CHECK_EQ_I(off_of(&l, e), 4101);
    char buf[64];
    CHECK(mft_layout_to_xla(&l, buf, sizeof buf) > 0 && !strcmp(buf, "{1,0:T(8,128)(2,1)}"));
    /* plain layouts, rank 0 */
    CHECK(mft_layout_from_xla(2, s, "{0,1}", &l) == MFT_OK && l.strides[0] == 1 &&
          l.strides[1] == 3);
    CHECK(mft_layout_to_xla(&l, buf, sizeof buf) == 5 && !strcmp(buf, "{0,1}"));
    CHECK(mft_layout_from_xla(0, NULL, "{}", &l) == MFT_OK && l.ndim == 0);
    CHECK(mft_layout_to_xla(&l, buf, sizeof buf) == 2 && !strcmp(buf, "{}"));
    /* channels_last as XLA: minor_to_major [1,3,2,0] */
    int64_t s4[4] = {2, 3, 4, 5};
    mft_layout nhwc;
    CHECK(mft_layout_from_xla(4, s4, "{1,3,2,0}", &l) == MFT_OK);
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NHWC, &nhwc) == MFT_OK && mft_layout_equal(&l, &nhwc));
    /* nChw16c is not a suffix tiling (C is not the most minor outer dim) */
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW16C, &l) == MFT_OK);
    CHECK(mft_layout_to_xla(&l, buf, sizeof buf) == -1);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_layout_to_xla");
    /* T(8,128) on a row-major matrix is oneDNN's AB8a128b */
    CHECK(mft_layout_from_xla(2, big, "{1,0:T(8,128)}", &l) == MFT_OK);
    CHECK(mft_layout_to_onednn(&l, buf, sizeof buf) > 0 && !strcmp(buf, "AB8a128b"));
}

static void test_round_trips(void) {
    static const struct { int nd; int64_t s[5]; const char *tag; } od[] = {
        {4, {2, 17, 3, 3}, "nChw16c"},   {4, {2, 17, 3, 3}, "nchw"},
        {4, {2, 17, 3, 3}, "nhwc"},      {3, {2, 5, 7}, "nCw8c"},
        {5, {2, 33, 2, 2, 2}, "nCdhw16c"}, {4, {20, 17, 3, 3}, "OIhw16i16o"},
        {4, {20, 17, 3, 3}, "OIhw4i16o4i"}, {4, {20, 17, 3, 3}, "Ohwi16o"},
        {5, {2, 20, 17, 3, 3}, "gOIhw16i16o"}, {2, {20, 17, 0, 0, 0}, "oi"},
        {2, {20, 17, 0, 0, 0}, "io"},    {2, {20, 17, 0, 0, 0}, "nc"},
        {1, {20, 0, 0, 0, 0}, "x"},      {4, {3, 4, 5, 6}, "dacb"},
        {4, {3, 4, 5, 6}, "ABcd8a4b2a"}, {2, {300, 200, 0, 0, 0}, "AB8a128b"}};
    for (size_t i = 0; i < sizeof od / sizeof *od; i++) {
        mft_layout l;
        CHECK_MSG(mft_layout_from_onednn(od[i].nd, od[i].s, od[i].tag, &l) == MFT_OK, "%s: %s",
                  od[i].tag, mft_last_error_message());
        round_trip_onednn(od[i].tag, &l);
    }
    /* the printer needs the room it reports */
    mft_layout l;
    int64_t s4[4] = {2, 17, 3, 3};
    CHECK(mft_layout_from_onednn(4, s4, "nChw16c", &l) == MFT_OK);
    char small[4] = "zzz";
    CHECK(mft_layout_to_onednn(&l, small, sizeof small) == 7 && !strcmp(small, "aBc"));
    CHECK(mft_layout_to_onednn(&l, NULL, 0) == 7);
    /* Ascend names and XLA strings */
    static const struct { int nd; int64_t s[4]; const char *f; size_t eb; } as[] = {
        {4, {2, 17, 3, 3}, "NC1HWC0", 2}, {4, {2, 17, 3, 3}, "NC1HWC0", 1},
        {4, {20, 17, 3, 3}, "FRACTAL_Z", 1}, {3, {2, 20, 28, 0}, "FRACTAL_NZ", 8},
        {2, {20, 28, 0, 0}, "FRACTAL_NZ", 1}};
    for (size_t i = 0; i < sizeof as / sizeof *as; i++) {
        mft_layout b;
        char buf[32];
        CHECK(mft_layout_from_ascend(as[i].nd, as[i].s, as[i].f, as[i].eb, &l) == MFT_OK);
        CHECK(mft_layout_to_ascend(&l, as[i].eb, buf, sizeof buf) > 0 && !strcmp(buf, as[i].f));
        CHECK(mft_layout_from_ascend(as[i].nd, as[i].s, buf, as[i].eb, &b) == MFT_OK &&
              mft_layout_equal(&l, &b));
        round_trip_onednn(as[i].f, &l);
    }
    static const char *const xs[] = {"{3,2,1,0:T(2,2)}", "{0,1,2,3}", "{1,3,2,0:T(8,128)}",
                                     "{3,2,1,0:T(4,4)(2,2)}", "{3,2,1,0:T(4,2,2)(2)}"};
    int64_t xsz[4] = {3, 17, 9, 130};
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        mft_layout b;
        char buf[64];
        CHECK_MSG(mft_layout_from_xla(4, xsz, xs[i], &l) == MFT_OK, "%s: %s", xs[i],
                  mft_last_error_message());
        CHECK_MSG(mft_layout_to_xla(&l, buf, sizeof buf) == (int)strlen(xs[i]) &&
                      !strcmp(buf, xs[i]), "%s printed %s", xs[i], buf);
        CHECK(mft_layout_from_xla(4, xsz, buf, &b) == MFT_OK && mft_layout_equal(&l, &b));
        round_trip_onednn(xs[i], &l);
    }
}

static void test_errors(void) {
    mft_layout l;
    int64_t s4[4] = {2, 17, 3, 3}, s2[2] = {3, 5};
    static const struct { const char *tag, *needle; } bad[] = {
        {"aBcd16e", "position 6"},      {"abcz", "position 3"},  {"aBcd0b", "block size 0"},
        {"aBcd-16b", "position 4"},     {"aBcd2b2b2b2b2b", "more than 4"},
        {"abcd16b", "lowercase"},       {"aBcd", "no inner block"}, {"abc", "names 3 dims"},
        {"aacd", "twice"},              {"aBcd16", "position 6"}, {"aBcd16B", "lowercase"},
        {"nChw16q", "position 6"},      {"nChw16c4", "position 8"}, {"nCHw16c", "no inner"},
        {"OIhw16i16x", "position 9"},   {"aBcd99999999999999999999b", "overflows"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(mft_layout_from_onednn(4, s4, bad[i].tag, &l) == MFT_ERR_INVALID, "%s",
                  bad[i].tag);
        CHECK_MSG(strstr(mft_last_error_message(), "mft_layout_from_onednn") &&
                      strstr(mft_last_error_message(), bad[i].tag),
                  "%s: %s", bad[i].tag, mft_last_error_message());
        CHECK_ERR(MFT_ERR_INVALID, bad[i].needle);
    }
    CHECK(mft_layout_from_onednn(4, s4, NULL, &l) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layout_from_onednn: argument 'tag'");
    CHECK(mft_layout_from_onednn(4, NULL, "abcd", &l) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "'sizes'");
    CHECK(mft_layout_from_onednn(4, s4, "abcd", NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "'out'");
    CHECK(mft_layout_from_onednn(9, s4, "abcd", &l) == MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "rank 9");
    /* storage size overflow */
    int64_t huge[4] = {INT64_MAX / 4, 17, 3, 3};
    CHECK(mft_layout_from_onednn(4, huge, "nChw16c", &l) == MFT_ERR_OVERFLOW);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_layout_from_onednn");
    int64_t hc[4] = {1, INT64_MAX - 3, 1, 1};
    CHECK(mft_layout_for_tag(4, hc, MFT_LAYOUT_NCHW16C, &l) == MFT_ERR_OVERFLOW);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_layout_for_tag: size");
    int64_t ps[2] = {(int64_t)1 << 62, 4}, pst[2] = {4, 1};
    CHECK(mft_layout_plain(2, ps, pst, &l) == MFT_ERR_OVERFLOW);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_layout_plain: storage size");
    /* hand-filled descriptors */
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW16C, &l) == MFT_OK);
    mft_layout b = l;
    b.nblocks = 5;
    CHECK(mft_layout_check(&b) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "5 inner blocks");
    b = l;
    b.block_size[0] = 0;
    CHECK(mft_layout_check(&b) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "size 0");
    b.block_size[0] = -16;
    CHECK(mft_layout_check(&b) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "size -16");
    b = l;
    b.block_dim[0] = 4;
    CHECK(mft_layout_check(&b) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "block 0 is on dim 4");
    b = l;
    b.padded[1] = 24;
    CHECK(mft_layout_check(&b) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "padded size 24");
    b = l;
    b.strides[0] = INT64_MAX - 10;
    CHECK(mft_layout_check(&b) == MFT_ERR_OVERFLOW);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_layout_check");
    CHECK(mft_layout_check(NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layout_check");
    CHECK(!mft_layout_equal(&l, NULL));
    /* offsets: pad lanes and negative indices are not elements */
    int64_t off, pad_lane[4] = {0, 17, 0, 0}, neg[4] = {0, -1, 0, 0};
    CHECK(mft_layout_offset(&l, pad_lane, &off) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "mft_layout_offset: index [0,17,0,0] outside sizes [2,17,3,3]");
    CHECK(mft_layout_offset(&l, neg, &off) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "at dim 1");
    CHECK(mft_layout_offset(&l, NULL, &off) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "'index'");
    bool pad;
    CHECK(mft_layout_is_pad(&l, 145, &pad) == MFT_OK && pad);  /* c = 17, a pad lane */
    CHECK(mft_layout_is_pad(&l, 144, &pad) == MFT_OK && !pad); /* c = 16 */
    CHECK(mft_layout_is_pad(&l, 2 * 2 * 9 * 16, &pad) == MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "mft_layout_is_pad: slot 576");
    CHECK(mft_layout_is_pad(&l, 0, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layout_is_pad");
    /* overlapping plain layouts have no owner per slot */
    int64_t bst[2] = {0, 1};
    CHECK(mft_layout_plain(2, s2, bst, &l) == MFT_OK);
    CHECK(mft_layout_is_pad(&l, 0, &pad) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_layout_is_pad: strides [0,1] overlap");
    int64_t negsz[4] = {2, 17, -3, 3};
    CHECK(mft_layout_from_onednn(4, negsz, "nChw16c", &l) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_layout_from_onednn: sizes [2,17,-3,3]: negative size at dim 2");
    int64_t negst[2] = {5, -1};
    CHECK(mft_layout_plain(2, s2, negst, &l) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "negative");
    /* printers: no tag for a gapped layout */
    int64_t gap[2] = {8, 1};
    CHECK(mft_layout_plain(2, s2, gap, &l) == MFT_OK);
    char buf[32];
    CHECK(mft_layout_to_onednn(&l, buf, sizeof buf) == -1);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_layout_to_onednn: strides [8,1]");
    CHECK(mft_layout_to_onednn(NULL, buf, sizeof buf) == -1);
    CHECK_ERR(MFT_ERR_NULL, "mft_layout_to_onednn");
    CHECK(mft_layout_to_onednn(&l, NULL, 4) == -1);
    CHECK_ERR(MFT_ERR_NULL, "'buf'");
    /* tags */
    CHECK(mft_layout_for_tag(2, s2, MFT_LAYOUT_NCHW16C, &l) == MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "mft_layout_for_tag: tag NCHW16C needs rank 3-5, got 2");
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_TAG_COUNT, &l) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "unknown layout tag");
    /* Ascend */
    CHECK(mft_layout_from_ascend(4, s4, "NC1HWC", 2, &l) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_layout_from_ascend: format 'NC1HWC'");
    CHECK(mft_layout_from_ascend(4, s4, "NC1HWC0", 3, &l) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "element size 3");
    CHECK(mft_layout_from_ascend(5, s4, "FRACTAL_Z", 2, &l) == MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "FRACTAL_Z needs rank 4, got 5");
    CHECK(mft_layout_from_ascend(1, s4, "FRACTAL_NZ", 2, &l) == MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "FRACTAL_NZ needs rank >= 2");
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW8C, &l) == MFT_OK);
    CHECK(mft_layout_to_ascend(&l, 2, buf, sizeof buf) == -1);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_layout_to_ascend");
    CHECK(mft_layout_for_tag(4, s4, MFT_LAYOUT_NCHW16C, &l) == MFT_OK);
    CHECK(mft_layout_to_ascend(&l, 1, buf, sizeof buf) == -1); /* C0 is 32 for 1 byte */
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "1-byte");
    /* XLA */
    static const struct { const char *s, *needle; mft_status st; } xb[] = {
        {"{1,0:T(2,2)", "position 11", MFT_ERR_INVALID},
        {"1,0", "position 0", MFT_ERR_INVALID},
        {"{1,1}", "twice", MFT_ERR_INVALID},
        {"{1}", "names 1 dims", MFT_ERR_INVALID},
        {"{1,2}", "dim 2 of a rank-2", MFT_ERR_INVALID},
        {"{1,0:T(0,2)}", "tile size 0", MFT_ERR_INVALID},
        {"{1,0:T(2,2,2)}", "more dims than the rank", MFT_ERR_INVALID},
        {"{1,0:S(1)}", "position 5", MFT_ERR_UNSUPPORTED},
        {"{1,0:T(8,128)S(1)}", "position 13", MFT_ERR_UNSUPPORTED},
        {"{1,0:T(*,128)}", "'*'", MFT_ERR_UNSUPPORTED},
        {"{1,0:T(8,128)(3,1)}", "does not divide", MFT_ERR_UNSUPPORTED},
        {"{1,0:T(8,128)(2,2)(1,1)}", "more than two tile levels", MFT_ERR_UNSUPPORTED},
        {"{1,0:T(8)(2,2)}", "more dims (2) than the first (1)", MFT_ERR_UNSUPPORTED},
        {"{1,0}x", "text after", MFT_ERR_INVALID}};
    for (size_t i = 0; i < sizeof xb / sizeof *xb; i++) {
        CHECK_MSG(mft_layout_from_xla(2, s2, xb[i].s, &l) == xb[i].st, "%s", xb[i].s);
        CHECK_MSG(strstr(mft_last_error_message(), "mft_layout_from_xla: layout '") != NULL,
                  "%s", mft_last_error_message());
        CHECK_ERR(xb[i].st, xb[i].needle);
    }
    int64_t s3[3] = {4, 8, 8};
    CHECK(mft_layout_from_xla(3, s3, "{2,1,0:T(2,2,2)(2,2,2)}", &l) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "more than 4 inner blocks");
    CHECK(mft_layout_from_xla(2, s2, NULL, &l) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layout_from_xla: argument 'layout'");
}

int main(void) {
    RUN(test_worked_examples);
    RUN(test_onednn_golden);
    RUN(test_ascend_golden);
    RUN(test_xla);
    RUN(test_round_trips);
    RUN(test_errors);
    TEST_MAIN_END();
}
