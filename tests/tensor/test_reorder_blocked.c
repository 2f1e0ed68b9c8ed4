/* tests/tensor/test_reorder_blocked.c — the f32 reorder kernels between plain
 * and C-blocked layouts (tensor/reorder_blocked.c, Note [Reorder index
 * mapping] in tensor/reorder_internal.h), against a naive loop written here.
 *
 * Every case starts from destination buffers filled with a garbage pattern
 * (NaNs with a payload and 12345.0f) and builds the expected buffer with the
 * naive loop from the same garbage, then compares the whole destination
 * bit for bit: every element, every pad lane (must be +0.0f after
 * to_blocked), and every gap slot between strided rows (must be left alone).
 * Buffers are allocated at exactly the span the strides describe, so an
 * out-of-range access shows under AddressSanitizer.
 *
 * Plain layouts: NCHW and NHWC packed (the two vector paths), NCHW with
 * gaps and with rows pitched to 16 floats, NHWC with gaps (the same paths),
 * pixel stride 2 and a CHWN-like order (the scalar loop); each with its
 * plain buffer on a 64-byte boundary and 4 bytes past one (from_blocked
 * stores directly to aligned rows and stages misaligned ones). Blocked
 * layouts: packed, and with unaligned gaps after each block and each image.
 * C, S, N, B sweep the tails: C in {1,3,8,15,16,17,33}, S in
 * {1,5,32,49,130,196,257}, N in {1,2}, B in {8,16}. Larger shapes cross the
 * parallel grain and the pixel-chunk boundaries and are run at 1 and 2
 * threads (CTest also runs the whole file under MFT_NUM_THREADS 1 and 2). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "reorder_internal.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ------------------------------------------------------------------ layouts */
/* NCHW_PITCH: rows padded to 16 floats, so they start on 64 bytes when the
 * buffer does. */
enum { PL_NCHW, PL_NHWC, PL_NCHW_GAP, PL_NCHW_PITCH, PL_NHWC_GAP, PL_PS2, PL_CHWN, PL_COUNT };
static const char *const pl_name[PL_COUNT] = {"NCHW",      "NHWC", "NCHW+gaps", "NCHW+pitch16",
                                              "NHWC+gaps", "ps=2", "CHWN"};

typedef struct plain {
    int64_t pn, pc, ps, span;
} plain;

static plain plain_make(int kind, int64_t N, int64_t C, int64_t S) {
    plain p = {0, 0, 0, 0};
    switch (kind) {
    case PL_NCHW: p.pn = C * S, p.pc = S, p.ps = 1; break;
    case PL_NHWC: p.pn = S * C, p.pc = 1, p.ps = C; break;
    case PL_NCHW_GAP: p.pn = C * (S + 3) + 7, p.pc = S + 3, p.ps = 1; break;
    case PL_NCHW_PITCH: p.pc = cdiv(S, 16) * 16, p.pn = C * p.pc, p.ps = 1; break;
    case PL_NHWC_GAP: p.pn = S * (C + 5) + 2, p.pc = 1, p.ps = C + 5; break;
    case PL_PS2: p.pn = C * (2 * S + 1) + 3, p.pc = 2 * S + 1, p.ps = 2; break;
    default: p.pn = 1, p.pc = S * N, p.ps = N; break; /* CHWN */
    }
    p.span = (N - 1) * p.pn + (C - 1) * p.pc + (S - 1) * p.ps + 1;
    return p;
}

typedef struct blocked {
    int64_t bn, bc1, span;
} blocked;

static blocked blocked_make(int gapped, int64_t N, int64_t C, int64_t S, int B) {
    blocked b;
    const int64_t CB = cdiv(C, B);
    b.bc1 = S * B + (gapped ? 5 : 0);
    b.bn = CB * b.bc1 + (gapped ? 11 : 0);
    b.span = (N - 1) * b.bn + (CB - 1) * b.bc1 + S * B;
    return b;
}

/* ------------------------------------------------------------------ buffers */
static float garbage_at(int64_t i) {
    if (i % 2) return 12345.0f;
    uint32_t bits = 0x7FC0BEEFu; /* a quiet NaN with a payload */
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* n floats of garbage starting `shift` floats past a 64-byte boundary (the
 * vector paths pick aligned or unaligned stores from the address), with
 * nothing allocated past the last one. Free with free(p - shift). */
static float *garbage_at_shift(int64_t n, int shift) {
    void *v = NULL;
    if (posix_memalign(&v, 64, (size_t)(n + shift > 0 ? n + shift : 1) * sizeof(float)))
        return NULL;
    float *p = (float *)v + shift;
    for (int64_t i = 0; i < n; i++) p[i] = garbage_at(i);
    return p;
}
static float *garbage(int64_t n) { return garbage_at_shift(n, 0); }
/* The value of element (n, c, s): distinct, exact in f32, never zero, both signs. */
static float value(int64_t n, int64_t c, int64_t s, int64_t C, int64_t S) {
    const int64_t k = (n * C + c) * S + s + 1;
    return (float)(k % 2 ? k : -k);
}

static int is_pos_zero(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == 0;
}

/* The first differing slot of two buffers, -1 when they are bitwise equal. */
static int64_t first_diff(const float *a, const float *b, int64_t n) {
    if (memcmp(a, b, (size_t)n * sizeof *a) == 0) return -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0) return i;
    return -1;
}

/* Names what blocked slot i is: an element, a pad lane or a gap. */
static const char *blocked_slot(int64_t i, const blocked *b, int B, int64_t N, int64_t C,
                                int64_t S) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t cb = 0; cb < cdiv(C, B); cb++) {
            const int64_t o = n * b->bn + cb * b->bc1;
            if (i >= o && i < o + S * B) return cb * B + (i - o) % B < C ? "element" : "pad lane";
        }
    return "gap";
}

/* ------------------------------------------------------------------ naive loops */
static void naive_to(const float *src, const plain *p, float *dst, const blocked *b, int B,
                     int64_t N, int64_t C, int64_t S) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < cdiv(C, B) * B; c++)
            for (int64_t s = 0; s < S; s++)
                dst[n * b->bn + (c / B) * b->bc1 + s * B + c % B] =
                    c < C ? src[n * p->pn + c * p->pc + s * p->ps] : 0.0f;
}
static void naive_from(const float *src, const blocked *b, int B, float *dst, const plain *p,
                       int64_t N, int64_t C, int64_t S) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++)
                dst[n * p->pn + c * p->pc + s * p->ps] =
                    src[n * b->bn + (c / B) * b->bc1 + s * B + c % B];
}

/* ------------------------------------------------------------------ one case */
static int case_failures = 0;

/* Runs both directions and the round trip for one shape and pair of
 * layouts; a failing case is reported and counted in case_failures. */
static void run_case_at(int64_t N, int64_t C, int64_t S, int B, int pkind, int gapped, int shift) {
    const plain p = plain_make(pkind, N, C, S);
    const blocked b = blocked_make(gapped, N, C, S, B);
    float *src = garbage_at_shift(p.span, shift), *src_copy = garbage(p.span);
    float *blk = garbage(b.span), *blk_want = garbage(b.span);
    float *back = garbage_at_shift(p.span, shift), *back_want = garbage(p.span);
    if (!src || !src_copy || !blk || !blk_want || !back || !back_want) {
        CHECK_MSG(0, "out of memory");
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++)
                src[n * p.pn + c * p.pc + s * p.ps] = value(n, c, s, C, S);
    memcpy(src_copy, src, (size_t)p.span * sizeof *src);
    const int before = harness_checks_failed_;

    /* plain -> blocked: elements, pad lanes and gaps, bit for bit */
    mft__reorder_to_blocked_f32(src, p.pn, p.pc, p.ps, blk, b.bn, b.bc1, B, N, C, S);
    naive_to(src, &p, blk_want, &b, B, N, C, S);
    int64_t d = first_diff(blk, blk_want, b.span);
    CHECK_MSG(d < 0, "to_blocked %s (+%d) -> nChw%dc%s N=%lld C=%lld S=%lld: %s at slot %lld",
              pl_name[pkind], shift, B, gapped ? "+gaps" : "", (long long)N, (long long)C,
              (long long)S, d < 0 ? "" : blocked_slot(d, &b, B, N, C, S), (long long)d);
    int64_t bad_pads = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = C; c < cdiv(C, B) * B; c++)
            for (int64_t s = 0; s < S; s++)
                bad_pads += !is_pos_zero(blk[n * b.bn + (c / B) * b.bc1 + s * B + c % B]);
    CHECK_MSG(bad_pads == 0, "%lld pad lanes not +0.0f (%s, B=%d, C=%lld)", (long long)bad_pads,
              pl_name[pkind], B, (long long)C);
    CHECK(first_diff(src, src_copy, p.span) < 0); /* the source is read only */

    /* blocked -> plain: the blocked source gets garbage pad lanes (never
     * copied), the destination's gap slots must keep their garbage */
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = C; c < cdiv(C, B) * B; c++)
            for (int64_t s = 0; s < S; s++) blk[n * b.bn + (c / B) * b.bc1 + s * B + c % B] = -7.0f;
    mft__reorder_from_blocked_f32(blk, b.bn, b.bc1, B, back, p.pn, p.pc, p.ps, N, C, S);
    naive_from(blk, &b, B, back_want, &p, N, C, S);
    d = first_diff(back, back_want, p.span);
    CHECK_MSG(d < 0, "from_blocked nChw%dc%s -> %s (+%d) N=%lld C=%lld S=%lld: slot %lld", B,
              gapped ? "+gaps" : "", pl_name[pkind], shift, (long long)N, (long long)C,
              (long long)S, (long long)d);
    /* the round trip is the identity, gaps included (both started as garbage) */
    CHECK_MSG(first_diff(back, src, p.span) < 0, "round trip %s via nChw%dc N=%lld C=%lld S=%lld",
              pl_name[pkind], B, (long long)N, (long long)C, (long long)S);
    if (harness_checks_failed_ != before) case_failures++;
done:
    free(src ? src - shift : NULL);
    free(src_copy);
    free(blk);
    free(blk_want);
    free(back ? back - shift : NULL);
    free(back_want);
}

/* Each case on a plain buffer that starts on a 64-byte boundary and on one
 * that starts 4 bytes past it. */
static void run_case(int64_t N, int64_t C, int64_t S, int B, int pkind, int gapped) {
    run_case_at(N, C, S, B, pkind, gapped, 0);
    run_case_at(N, C, S, B, pkind, gapped, 1);
}

/* ------------------------------------------------------------------ tests */
static void test_sweep(void) {
    static const int64_t Cs[] = {1, 3, 8, 15, 16, 17, 33}, Ss[] = {1, 5, 32, 49, 130, 196, 257};
    static const int64_t Ns[] = {1, 2};
    static const int Bs[] = {8, 16};
    int cases = 0;
    for (size_t ci = 0; ci < sizeof Cs / sizeof *Cs; ci++)
        for (size_t si = 0; si < sizeof Ss / sizeof *Ss; si++)
            for (size_t ni = 0; ni < 2; ni++)
                for (size_t bi = 0; bi < 2; bi++)
                    for (int pk = 0; pk < PL_COUNT; pk++)
                        for (int g = 0; g < 2; g++) {
                            run_case(Ns[ni], Cs[ci], Ss[si], Bs[bi], pk, g);
                            cases++;
                        }
    CHECK_EQ_I(cases, 7 * 7 * 2 * 2 * PL_COUNT * 2);
    CHECK_EQ_I(case_failures, 0);
}

/* Any block size works through the scalar loop. */
static void test_other_blocks(void) {
    for (int pk = 0; pk < PL_COUNT; pk++) {
        run_case(2, 9, 7, 4, pk, 1);
        run_case(1, 5, 3, 1, pk, 0);
        run_case(2, 33, 20, 32, pk, 1);
    }
}

/* Zero-size shapes write nothing. */
static void test_empty(void) {
    float *buf = garbage(64), *want = garbage(64);
    const float src[4] = {1, 2, 3, 4};
    if (!buf || !want) {
        CHECK_MSG(0, "out of memory");
    } else {
        const int64_t shapes[3][3] = {{0, 3, 4}, {2, 0, 4}, {2, 3, 0}};
        for (int k = 0; k < 3; k++) {
            for (int B = 8; B <= 16; B += 8) {
                mft__reorder_to_blocked_f32(src, 1, 1, 1, buf, 16, 16, B, shapes[k][0],
                                            shapes[k][1], shapes[k][2]);
                mft__reorder_from_blocked_f32(src, 1, 1, B, buf, 1, 1, 1, shapes[k][0],
                                              shapes[k][1], shapes[k][2]);
            }
        }
        CHECK(first_diff(buf, want, 64) < 0);
    }
    free(buf);
    free(want);
}

/* Shapes past the parallel grain (65536 elements) with several pixel chunks
 * per image and channel block, and tails everywhere, at 1 and 2 threads. */
static void test_large_threads(void) {
    const int saved = mft_num_threads();
    static const int64_t shapes[][3] = {{2, 67, 3001}, {3, 40, 1024}, {1, 513, 130}};
    for (int t = 1; t <= 2; t++) {
        mft_set_num_threads(t);
        const int before = case_failures;
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
            for (int B = 8; B <= 16; B += 8)
                for (int pk = 0; pk < PL_COUNT; pk++)
                    run_case(shapes[k][0], shapes[k][1], shapes[k][2], B, pk, (int)(k % 2));
        CHECK_MSG(case_failures == before, "%d failing large cases at %d threads",
                  case_failures - before, t);
    }
    mft_set_num_threads(saved);
}

/* C == 1 or S == 1: one plain stride is multiplied by no index, so a layout
 * may fit both vector paths (the kernels pick one and normalise the unused
 * stride). */
static void test_ambiguous_strides(void) {
    static const int64_t shapes[][3] = {{2, 1, 37}, {2, 37, 1}, {1, 1, 1}, {3, 20, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int B = 8; B <= 16; B += 8)
            for (int pk = 0; pk < PL_COUNT; pk++)
                for (int g = 0; g < 2; g++)
                    run_case(shapes[k][0], shapes[k][1], shapes[k][2], B, pk, g);
}

int main(void) {
    RUN(test_sweep);
    RUN(test_other_blocks);
    RUN(test_empty);
    RUN(test_large_threads);
    RUN(test_ambiguous_strides);
    TEST_MAIN_END();
}
