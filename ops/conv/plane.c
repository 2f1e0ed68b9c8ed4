/* ops/conv/plane.c — F32 convolution kernels for one input channel (C_in =
 * 1, groups = 1, 2-D: the first layer of a grayscale CNN), forward and
 * backward_weight, NHWC and NCHW outputs, for AVX-512 builds. The algorithm
 * chains of ops/conv/chains.c call them before the depthwise kernels (which
 * cover C_in = 1 too, as groups == C_in, but run load-bound there: one
 * broadcast and one weight load per FMA).
 *
 * Note [Single-channel planes]
 * With one input channel, NHWC and NCHW x are the same (N, H, W) planes.
 * Each image is first copied into a zero-bordered plane (rows and columns
 * of padding, plus columns so a 6-pixel tile never reads past a row), so
 * every tap is an unconditional load at a fixed offset toff[t].
 * Forward: work items are output rows (n, oh); a 6x32 tile (6 output
 * pixels, two 16-wide blocks of output channels) broadcasts the 6 pixels'
 * input value of each tap and multiplies it by the tap's 32 packed weights:
 * 12 FMAs per 8 loads. backward_weight: gw[co][t] = sum over output pixels
 * of gy[p][co] * x[p + toff[t]]; the tile's 6 rows are 6 taps (a last
 * group of fewer taps repeats its last tap, results dropped), its 32
 * columns grad_y channels loaded once per pixel. Work items are 16 fixed
 * chunks of output rows, each summing into its own partial; the partials
 * are added in chunk order, so results do not depend on the thread count.
 * Both need C_out % 16 == 0; otherwise they return false having written
 * nothing; when a scratch allocation fails they report it through
 * mft__kernel_nomem and return false (Note [Kernel scratch]). */
#include <string.h>
#include "conv_internal.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#define CP_AVX512 1
#else
#define CP_AVX512 0
#endif

#define CP_ROWS   6  /* pixels (forward) or taps (backward_weight) per tile */
#define CP_CHUNKS 16 /* backward_weight partials */

bool mft__conv_plane_applies(const mft__plane_geom *g) {
    return CP_AVX512 && g->Cout % 16 == 0 && g->Cout > 0 && g->N > 0 && g->OH > 0 && g->OW > 0;
}

#if CP_AVX512
/* The zero-bordered planes: PH x PW per image. */
typedef struct cp_pad {
    const mft__plane_geom *g;
    const float *x;
    float *pb;
    int64_t PH, PW;
} cp_pad;

static void cp_pad_range(void *ctx, int64_t begin, int64_t end) {
    const cp_pad *p = ctx;
    const mft__plane_geom *g = p->g;
    /* a row is zeros, or zeros | x's row | zeros */
    for (int64_t n = begin; n < end; n++)
        mft__conv_pad_plane(p->pb + n * p->PH * p->PW, p->PH, p->PW, p->x + n * g->H * g->W, g->H,
                            g->W, -g->ph, -g->pw);
}

/* Pads x into a new scratch buffer whose rows cover OW rounded up to a
 * multiple of `round` output columns; NULL when out of memory. */
static float *cp_planes(const mft__plane_geom *g, const float *x, int64_t round, int64_t *PH,
                        int64_t *PW) {
    const int64_t owr = cdiv(g->OW, round) * round;
    *PH = (g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1;
    *PW = (owr - 1) * g->sw + (g->KW - 1) * g->dw + 1;
    if (*PH < g->H + g->ph) *PH = g->H + g->ph;
    if (*PW < g->W + g->pw) *PW = g->W + g->pw;
    float *pb = mft__alloc((size_t)(g->N * *PH * *PW) * sizeof(float) + 64, 64);
    if (!pb) return NULL;
    cp_pad p = {g, x, pb, *PH, *PW};
    mft__parallel_for(0, g->N, 1, cp_pad_range, &p);
    return pb;
}

typedef struct cp_job {
    const mft__plane_geom *g;
    float *pb; /* padded planes */
    int64_t PH, PW, T;
    int64_t *toff;     /* [T] tap offsets in a plane */
    float *buf;        /* scratch: the packed weights and bias, or the partials */
    const float *wp;   /* forward: NHWC [Cout/16][T][16], NCHW [Cout rounded to 4][T] */
    const float *bias; /* forward: [Cout (rounded to 4)] */
    float *y;
    const float *gy; /* backward_weight */
    float *part;     /* backward_weight: NHWC [chunk][T][Cout], NCHW [chunk][Cout][T][16] */
    int64_t nch, rows;
} cp_job;

/* toff[t] for every tap (a new scratch array); NULL when out of memory. */
static int64_t *cp_taps(const mft__plane_geom *g, int64_t PW) {
    const int64_t T = g->KH * g->KW;
    int64_t *toff = mft__alloc((size_t)T * sizeof(int64_t), 64);
    if (!toff) return NULL;
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) toff[kh * g->KW + kw] = kh * g->dh * PW + kw * g->dw;
    return toff;
}

static void cp_close(cp_job *j) {
    mft__free(j->toff);
    mft__free(j->pb);
    mft__free(j->buf);
}

/* A job on x's padded planes (rows covering OW rounded up to `round`) with
 * `scratch` floats of scratch in j->buf; false, nothing left allocated and
 * mft__kernel_nomem called, when out of memory. */
static bool cp_open(cp_job *j, const mft__plane_geom *g, const float *x, int64_t round,
                    int64_t scratch) {
    memset(j, 0, sizeof *j);
    j->g = g;
    j->T = g->KH * g->KW;
    j->buf = mft__alloc((size_t)scratch * sizeof(float) + 64, 64);
    j->pb = j->buf ? cp_planes(g, x, round, &j->PH, &j->PW) : NULL;
    j->toff = j->pb ? cp_taps(g, j->PW) : NULL;
    if (!j->toff) {
        cp_close(j);
        mft__kernel_nomem((size_t)scratch * sizeof(float) + 64);
    }
    return j->toff != NULL;
}

#define CP_R(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* 6 pixels x 16 or 32 channels (two = 32): pixel i reads p[toff[t] + i*sw]. */
static inline void cp_fwd_tile(const float *p, int64_t sw, const int64_t *toff, int64_t T,
                               const float *w0, const float *b, float *o, int64_t ldo,
                               int64_t nvalid, bool two) {
    const __m512 bias0 = _mm512_loadu_ps(b), bias1 = two ? _mm512_loadu_ps(b + 16) : bias0;
    const float *w1 = w0 + T * 16;
#define DECL(i) __m512 c##i = bias0, d##i = bias1;
    CP_R(DECL)
#undef DECL
    if (two) {
        for (int64_t t = 0; t < T; t++) {
            const float *a = p + toff[t];
            const __m512 v0 = _mm512_loadu_ps(w0 + t * 16), v1 = _mm512_loadu_ps(w1 + t * 16);
            __m512 av;
#define STEP(i)                                                                                    \
    av = _mm512_set1_ps(a[i * sw]);                                                                \
    c##i = _mm512_fmadd_ps(av, v0, c##i);                                                          \
    d##i = _mm512_fmadd_ps(av, v1, d##i);
            CP_R(STEP)
#undef STEP
        }
    } else {
        for (int64_t t = 0; t < T; t++) {
            const float *a = p + toff[t];
            const __m512 v0 = _mm512_loadu_ps(w0 + t * 16);
#define STEP(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(a[i * sw]), v0, c##i);
            CP_R(STEP)
#undef STEP
        }
    }
#define STORE(i)                                                                                   \
    if (i < nvalid) {                                                                              \
        _mm512_storeu_ps(o + i * ldo, c##i);                                                       \
        if (two) _mm512_storeu_ps(o + i * ldo + 16, d##i);                                         \
    }
    CP_R(STORE)
#undef STORE
}

static void cp_fwd_range(void *ctx, int64_t begin, int64_t end) {
    const cp_job *j = ctx;
    const mft__plane_geom *g = j->g;
    const int64_t nb = g->Cout / 16;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / g->OH, oh = r % g->OH;
        const float *row = j->pb + n * j->PH * j->PW + oh * g->sh * j->PW;
        float *yr = j->y + r * g->OW * g->Cout;
        for (int64_t ow = 0; ow < g->OW; ow += CP_ROWS) {
            const int64_t nv = g->OW - ow < CP_ROWS ? g->OW - ow : CP_ROWS;
            for (int64_t cb = 0; cb < nb;) {
                const bool two = cb + 1 < nb;
                cp_fwd_tile(row + ow * g->sw, g->sw, j->toff, j->T, j->wp + cb * j->T * 16,
                            j->bias + cb * 16, yr + ow * g->Cout + cb * 16, g->Cout, nv, two);
                cb += two ? 2 : 1;
            }
        }
    }
}

/* acc rows i < nt (taps) x 16 or 32 channels += sum over the rows' pixels
 * of x[xr_i + ow*sw] * gy[ow][.]; rows >= nt repeat the last tap. */
static inline void cp_bw_tile(const float *const *xr, int64_t sw, const float *gy, int64_t ldg,
                              int64_t OW, float *acc, int64_t lda, int64_t nt, bool two) {
    const __m512 z = _mm512_setzero_ps();
#define DECL(i)                                                                                    \
    __m512 c##i = i < nt ? _mm512_loadu_ps(acc + i * lda) : z;                                     \
    __m512 d##i = i < nt && two ? _mm512_loadu_ps(acc + i * lda + 16) : z;                         \
    const float *a##i = xr[i < nt ? i : nt - 1];
    CP_R(DECL)
#undef DECL
    if (two) {
        for (int64_t ow = 0, o = 0; ow < OW; ow++, o += sw, gy += ldg) {
            const __m512 g0 = _mm512_loadu_ps(gy), g1 = _mm512_loadu_ps(gy + 16);
            __m512 av;
#define STEP(i)                                                                                    \
    av = _mm512_set1_ps(a##i[o]);                                                                  \
    c##i = _mm512_fmadd_ps(av, g0, c##i);                                                          \
    d##i = _mm512_fmadd_ps(av, g1, d##i);
            CP_R(STEP)
#undef STEP
        }
    } else {
        for (int64_t ow = 0, o = 0; ow < OW; ow++, o += sw, gy += ldg) {
            const __m512 g0 = _mm512_loadu_ps(gy);
#define STEP(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[o]), g0, c##i);
            CP_R(STEP)
#undef STEP
        }
    }
#define STORE(i)                                                                                   \
    if (i < nt) {                                                                                  \
        _mm512_storeu_ps(acc + i * lda, c##i);                                                     \
        if (two) _mm512_storeu_ps(acc + i * lda + 16, d##i);                                       \
    }
    CP_R(STORE)
#undef STORE
}
#undef CP_R

static void cp_bw_range(void *ctx, int64_t begin, int64_t end) {
    const cp_job *j = ctx;
    const mft__plane_geom *g = j->g;
    const int64_t nb = g->Cout / 16, T = j->T;
    for (int64_t ch = begin; ch < end; ch++) {
        float *part = j->part + ch * T * g->Cout;
        memset(part, 0, (size_t)(T * g->Cout) * sizeof(float));
        const int64_t r0 = ch * j->rows / j->nch, r1 = (ch + 1) * j->rows / j->nch;
        for (int64_t r = r0; r < r1; r++) {
            const int64_t n = r / g->OH, oh = r % g->OH;
            const float *row = j->pb + n * j->PH * j->PW + oh * g->sh * j->PW;
            const float *gyr = j->gy + r * g->OW * g->Cout;
            for (int64_t t0 = 0; t0 < T; t0 += CP_ROWS) {
                const int64_t nt = T - t0 < CP_ROWS ? T - t0 : CP_ROWS;
                const float *xr[CP_ROWS];
                for (int64_t i = 0; i < nt; i++) xr[i] = row + j->toff[t0 + i];
                for (int64_t cb = 0; cb < nb;) {
                    const bool two = cb + 1 < nb;
                    cp_bw_tile(xr, g->sw, gyr + cb * 16, g->Cout, g->OW,
                               part + t0 * g->Cout + cb * 16, g->Cout, nt, two);
                    cb += two ? 2 : 1;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- NCHW
 * Unit W stride only: 16 output columns of one channel per register, so a
 * tap's inputs are one unaligned load from the padded row. Forward: per
 * output row, 4 output channels at a time (4 FMA chains) over the taps,
 * each tap's input vector loaded once per 4 channels and its weights
 * broadcast. backward_weight: per chunk of output rows and per output
 * channel, up to CP_TAPS taps' accumulators stay in registers over the
 * chunk's rows (grad_y row vector loaded once per tap group); the lanes are
 * summed in a fixed order at the end. */
#define CP_TAPS 9 /* the accumulators of CP_T */

static void cp_fwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const cp_job *j = ctx;
    const mft__plane_geom *g = j->g;
    const int64_t T = j->T, S = g->OH * g->OW;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / g->OH, oh = r % g->OH;
        const float *row = j->pb + n * j->PH * j->PW + oh * g->sh * j->PW;
        float *yr = j->y + n * g->Cout * S + oh * g->OW;
        for (int64_t ow = 0; ow < g->OW; ow += 16) {
            const int64_t nv = g->OW - ow < 16 ? g->OW - ow : 16;
            const __mmask16 m = (__mmask16)((1u << nv) - 1u);
            for (int64_t co = 0; co < g->Cout; co += 4) {
                const float *w = j->wp + co * T; /* [Cout rounded to 4][T] */
                __m512 a0 = _mm512_set1_ps(j->bias[co]), a1 = _mm512_set1_ps(j->bias[co + 1]),
                       a2 = _mm512_set1_ps(j->bias[co + 2]), a3 = _mm512_set1_ps(j->bias[co + 3]);
                for (int64_t t = 0; t < T; t++) {
                    const __m512 xv = _mm512_loadu_ps(row + j->toff[t] + ow);
                    a0 = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[t]), a0);
                    a1 = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[T + t]), a1);
                    a2 = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[2 * T + t]), a2);
                    a3 = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[3 * T + t]), a3);
                }
                float *o = yr + co * S + ow;
                _mm512_mask_storeu_ps(o, m, a0);
                if (co + 1 < g->Cout) _mm512_mask_storeu_ps(o + S, m, a1);
                if (co + 2 < g->Cout) _mm512_mask_storeu_ps(o + 2 * S, m, a2);
                if (co + 3 < g->Cout) _mm512_mask_storeu_ps(o + 3 * S, m, a3);
            }
        }
    }
}

static void cp_bw_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const cp_job *j = ctx;
    const mft__plane_geom *g = j->g;
    const int64_t T = j->T, S = g->OH * g->OW;
#define CP_T(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
    for (int64_t ch = begin; ch < end; ch++) {
        float *part = j->part + ch * g->Cout * T * 16; /* [Cout][T][16] */
        memset(part, 0, (size_t)(g->Cout * T * 16) * sizeof(float));
        const int64_t c0 = ch * j->rows / j->nch, c1 = (ch + 1) * j->rows / j->nch;
        /* the chunk's rows image by image, so that grad_y is read in memory
         * order (channel planes of an image are adjacent) */
        for (int64_t r0 = c0, r1; r0 < c1; r0 = r1) {
            r1 = (r0 / g->OH + 1) * g->OH < c1 ? (r0 / g->OH + 1) * g->OH : c1;
            for (int64_t co = 0; co < g->Cout; co++)
                for (int64_t t0 = 0; t0 < T; t0 += CP_TAPS) {
                    const int64_t nt = T - t0 < CP_TAPS ? T - t0 : CP_TAPS;
                    /* taps >= nt reuse the group's first offset; their sums are dropped */
                    const int64_t *tf = j->toff + t0;
                    float *pp = part + (co * T + t0) * 16;
#define DECL(i)                                                                                    \
    __m512 acc##i = i < nt ? _mm512_loadu_ps(pp + i * 16) : _mm512_setzero_ps();                   \
    const int64_t o##i = tf[i < nt ? i : 0];
                    CP_T(DECL)
#undef DECL
                    for (int64_t r = r0; r < r1; r++) {
                        const int64_t n = r / g->OH, oh = r % g->OH;
                        const float *row = j->pb + n * j->PH * j->PW + oh * g->sh * j->PW;
                        const float *gr = j->gy + (n * g->Cout + co) * S + oh * g->OW;
                        for (int64_t ow = 0; ow < g->OW; ow += 16) {
                            const int64_t nv = g->OW - ow < 16 ? g->OW - ow : 16;
                            const __m512 gv =
                                _mm512_maskz_loadu_ps((__mmask16)((1u << nv) - 1u), gr + ow);
                            const float *p = row + ow;
#define STEP(i) acc##i = _mm512_fmadd_ps(gv, _mm512_loadu_ps(p + o##i), acc##i);
                            CP_T(STEP)
#undef STEP
                        }
                    }
#define STORE(i)                                                                                   \
    if (i < nt) _mm512_storeu_ps(pp + i * 16, acc##i);
                    CP_T(STORE)
#undef STORE
                }
        }
    }
#undef CP_T
}
#undef CP_TAPS

bool mft__conv_plane_forward_nchw(const mft__plane_geom *g, const float *x, float *y) {
    if (g->sw != 1 || g->Cout <= 0 || g->N <= 0 || g->OH <= 0 || g->OW <= 0) return false;
    const int64_t T = g->KH * g->KW, Cr = cdiv(g->Cout, 4) * 4;
    cp_job j;
    if (!cp_open(&j, g, x, 16, Cr * T + Cr)) return false;
    float *wp = j.buf, *bias = wp + Cr * T;
    for (int64_t co = 0; co < Cr; co++) {
        for (int64_t t = 0; t < T; t++)
            wp[co * T + t] =
                co < g->Cout ? g->w[co * g->ws[0] + (t / g->KW) * g->ws[2] + (t % g->KW) * g->ws[3]]
                             : 0.0f;
        bias[co] = co < g->Cout && g->bias ? g->bias[co * g->bstride] : 0.0f;
    }
    j.wp = wp, j.bias = bias, j.y = y;
    mft__parallel_for(0, g->N * g->OH, 4, cp_fwd_nchw_range, &j);
    cp_close(&j);
    return true;
}

bool mft__conv_plane_backward_weight_nchw(const mft__plane_geom *g, const float *gy, const float *x,
                                          float *gw, const int64_t *gws) {
    if (g->sw != 1 || g->Cout <= 0 || g->N <= 0 || g->OH <= 0 || g->OW <= 0) return false;
    const int64_t T = g->KH * g->KW, rows = g->N * g->OH;
    const int64_t nch = rows < CP_CHUNKS ? rows : CP_CHUNKS;
    cp_job j;
    if (!cp_open(&j, g, x, 16, nch * g->Cout * T * 16)) return false;
    const float *part = j.part = j.buf;
    j.gy = gy, j.nch = nch, j.rows = rows;
    mft__parallel_for(0, nch, 1, cp_bw_nchw_range, &j);
    for (int64_t co = 0; co < g->Cout; co++)
        for (int64_t t = 0; t < T; t++) {
            float s = 0.0f;
            for (int64_t c = 0; c < nch; c++) {
                const float *v = part + ((c * g->Cout + co) * T + t) * 16;
                float l = 0.0f;
                for (int k = 0; k < 16; k++) l += v[k];
                s += l;
            }
            gw[co * gws[0] + (t / g->KW) * gws[3] + (t % g->KW) * gws[4]] = s;
        }
    cp_close(&j);
    return true;
}
#endif

bool mft__conv_plane_forward(const mft__plane_geom *g, const float *x, float *y) {
#if CP_AVX512
    if (!mft__conv_plane_applies(g)) return false;
    const int64_t T = g->KH * g->KW, nb = g->Cout / 16;
    cp_job j;
    if (!cp_open(&j, g, x, CP_ROWS, T * g->Cout + g->Cout)) return false;
    float *wp = j.buf, *bias = wp + T * g->Cout;
    for (int64_t cb = 0; cb < nb; cb++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t l = 0; l < 16; l++) {
                const int64_t co = cb * 16 + l, kh = t / g->KW, kw = t % g->KW;
                wp[(cb * T + t) * 16 + l] = g->w[co * g->ws[0] + kh * g->ws[2] + kw * g->ws[3]];
            }
    for (int64_t co = 0; co < g->Cout; co++) bias[co] = g->bias ? g->bias[co * g->bstride] : 0.0f;
    j.wp = wp, j.bias = bias, j.y = y;
    mft__parallel_for(0, g->N * g->OH, 4, cp_fwd_range, &j);
    cp_close(&j);
    return true;
#else
    (void)g, (void)x, (void)y;
    return false;
#endif
}

bool mft__conv_plane_backward_weight(const mft__plane_geom *g, const float *gy, const float *x,
                                     float *gw, const int64_t *gws) {
#if CP_AVX512
    if (!mft__conv_plane_applies(g)) return false;
    const int64_t T = g->KH * g->KW, rows = g->N * g->OH;
    const int64_t nch = rows < CP_CHUNKS ? rows : CP_CHUNKS;
    cp_job j;
    if (!cp_open(&j, g, x, CP_ROWS, nch * T * g->Cout)) return false;
    const float *part = j.part = j.buf;
    j.gy = gy, j.nch = nch, j.rows = rows;
    mft__parallel_for(0, nch, 1, cp_bw_range, &j);
    for (int64_t co = 0; co < g->Cout; co++)
        for (int64_t t = 0; t < T; t++) {
            float s = part[t * g->Cout + co];
            for (int64_t c = 1; c < nch; c++) s += part[(c * T + t) * g->Cout + co];
            gw[co * gws[0] + (t / g->KW) * gws[3] + (t % g->KW) * gws[4]] = s;
        }
    cp_close(&j);
    return true;
#else
    (void)g, (void)gy, (void)x, (void)gw, (void)gws;
    return false;
#endif
}

#if !CP_AVX512
bool mft__conv_plane_forward_nchw(const mft__plane_geom *g, const float *x, float *y) {
    (void)g, (void)x, (void)y;
    return false;
}
bool mft__conv_plane_backward_weight_nchw(const mft__plane_geom *g, const float *gy, const float *x,
                                          float *gw, const int64_t *gws) {
    (void)g, (void)gy, (void)x, (void)gw, (void)gws;
    return false;
}
#endif
