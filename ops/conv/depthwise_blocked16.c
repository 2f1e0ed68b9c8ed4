/* ops/conv/depthwise_blocked16.c — native nChw16c F32 depthwise conv2d
 * (groups == C_in == C_out, multiplier 1): forward, backward_input and
 * backward_weight on activations packed in MFT_NCHW16C, the weight a plain
 * (C, 1, kh, kw) tensor of any strides, the bias plain 1-D; any stride,
 * padding and dilation. Reached through the nChw16c entries of chains.c's
 * kernel table when groups > 1 (entry.c routes only depthwise calls with
 * multiplier 1 there; docs/spec.md §7.10).
 *
 * Note [nChw16c depthwise convolution]
 * In nChw16c a block holds 16 channels of one pixel, and with one input
 * channel per output channel each lane only ever meets its own channel: the
 * 16 weights of a tap for a block are one vector, and every product is a
 * vertical FMA of an input pixel vector with it (no broadcast, no
 * shuffle). The weight is copied per call into a zero-padded scratch
 * (C1, KH*KW, 16) and the bias into (C1, 16), so the pad lanes of the last
 * block meet zero weights; the outputs are allocated without zeroing and
 * every store is a masked move that writes the pad lanes as exact zeros
 * (0 * inf in a pad lane would not be).
 *
 * Forward and backward_input are one tile kernel over one 1-D tap
 * relation per spatial dim: dst position q reads src position
 * (q*a + c + k*e) / b through tap k when that is an integer in [0, n).
 * Forward: a = stride, b = 1, c = -padding, e = dilation (y from x).
 * backward_input: a = 1, b = stride, c = padding, e = -dilation (grad_x
 * gathers the grad_y pixels its taps reached: no scatter, no atomics, any
 * stride). The relation is tabulated once per call for H and for W (each
 * dst position's valid taps and src positions: no division in the loops).
 * Work items are (image, up to DW16_CB channel blocks, dst row): the tap
 * lists of the row are built for block 0 and reused, shifted, for every
 * block of the item (a list costs about as much as a tile of 16 channels).
 * Columns q, q + b, q + 2b, ... of one phase whose taps are all inside
 * (the interior) share one tap list, shifted by a src columns per column:
 * they run as tiles of up to DW16_NB accumulators; the border columns run
 * alone over their own taps. At unit src step with a 3-wide window at
 * unit dilation (3x3 at stride 1, forward and backward_input) a full tile
 * loads each src vector of a row once for its three taps (dw16_slide3).
 *
 * backward_weight: grad_w[c, kh, kw] sums grad_y * x over (n, oh, ow).
 * Work items are (block, chunk): the N*OH output rows cut into DW16_CHUNKS
 * fixed chunks; each item adds, per tap, its rows' products into its own
 * partial vector (four accumulators over ow mod 4, added pairwise at the
 * end of each row), and the partials are added in chunk order.
 *
 * Determinism: every output element sums in an order fixed by the
 * geometry alone (forward: bias, then the valid taps in (kh, kw) order;
 * backward_input: the valid taps in (kh, kw) order; backward_weight: rows
 * in order within a chunk, chunks in order), whatever the tiling and the
 * thread count: 1 and 2 threads give the same bits. The NHWC depthwise
 * kernels (depthwise.c) add in another order: results agree to rounding. */
#include "conv_internal.h"

#define DW16_NB     8  /* columns per interior tile */
#define DW16_CHUNKS 16 /* fixed row chunks of backward_weight */

/* ---------------------------------------------------------------- geometry */
typedef struct dw16g {
    int64_t N, C, C1, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
} dw16g;

/* One spatial dim's tap relation (see the Note): src = (q*a + c + k*e) / b. */
typedef struct dw16_rel {
    int64_t a, b, c, e, n, K;
} dw16_rel;

static int64_t rel_src(const dw16_rel *r, int64_t q, int64_t k) {
    const int64_t num = q * r->a + r->c + k * r->e;
    if (num < 0 || num % r->b != 0 || num / r->b >= r->n) return -1;
    return num / r->b;
}

/* forward (bwd false) or backward_input relation along one dim */
static dw16_rel rel_of(bool bwd, int64_t s, int64_t p, int64_t d, int64_t n_src, int64_t K) {
    return bwd ? (dw16_rel){1, s, p, -d, n_src, K} : (dw16_rel){s, 1, -p, d, n_src, K};
}

/* The tap table of one dim (one per call for H and for W: no division in
 * the tiles' loops): for each dst position q, its valid taps k[q*K + i] and
 * their src positions sc[q*K + i], i < nk[q]; full[q]: every tap that
 * divides is inside (an interior position). */
typedef struct dw16_taps {
    int64_t *k, *sc;
    int32_t *nk;
    bool *full;
} dw16_taps;

/* the table of relation r over Q dst positions, in m (taps_bytes) */
static size_t taps_bytes(const dw16_rel *r, int64_t Q) {
    return 2 * (size_t)(Q * r->K) * sizeof(int64_t) + (size_t)Q * (sizeof(int32_t) + sizeof(bool));
}
static void taps_build(const dw16_rel *r, int64_t Q, dw16_taps *t, char *m) {
    const size_t n = (size_t)(Q * r->K);
    t->k = (int64_t *)(void *)m;
    t->sc = t->k + n;
    t->nk = (int32_t *)(void *)(t->sc + n);
    t->full = (bool *)(void *)(t->nk + Q);
    for (int64_t q = 0; q < Q; q++) {
        int32_t c = 0;
        bool full = true;
        for (int64_t k = 0; k < r->K; k++) {
            const int64_t s = rel_src(r, q, k);
            if (s >= 0) {
                t->k[q * r->K + c] = k;
                t->sc[q * r->K + c] = s;
                c++;
            } else {
                /* a tap that divides but falls outside makes q a border column */
                const int64_t num = q * r->a + r->c + k * r->e;
                if ((num % r->b + r->b) % r->b == 0) full = false;
            }
        }
        t->nk[q] = c;
        t->full[q] = full;
    }
}

/* ---------------------------------------------------------------- tile */
typedef struct dw16_targs {
    int nt;                 /* taps */
    const float *const *tp; /* tap t's src vector for column 0 */
    const float *const *tw; /* tap t's 16 weights */
    int64_t off, woff;      /* added to every tap's src / weight pointer (the list of
                             * block 0 and of its first column, shifted) */
    int64_t ps;             /* src step from one column of the tile to the next */
    const float *b16;       /* 16 bias lanes, or NULL */
    bool resume;            /* start from dst (an earlier batch of taps), not the bias */
    float *dst;             /* column 0 */
    int64_t ds;             /* dst step */
    uint32_t m;             /* real lanes */
} dw16_targs;

#if CF_AVX512
static inline __attribute__((always_inline)) void dw16_run(const int NB, const dw16_targs *a) {
    __m512 acc[DW16_NB];
    const __m512 z = a->b16 ? _mm512_loadu_ps(a->b16) : _mm512_setzero_ps();
    for (int j = 0; j < NB; j++) acc[j] = a->resume ? _mm512_loadu_ps(a->dst + j * a->ds) : z;
    for (int t = 0; t < a->nt; t++) {
        const __m512 wv = _mm512_loadu_ps(a->tw[t] + a->woff);
        const float *p = a->tp[t] + a->off;
        for (int j = 0; j < NB; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(p + j * a->ps), wv, acc[j]);
    }
    const __mmask16 k = (__mmask16)a->m;
    for (int j = 0; j < NB; j++) _mm512_storeu_ps(a->dst + j * a->ds, _mm512_maskz_mov_ps(k, acc[j]));
}
#define DW16_T(nb)                                                                                 \
    static void dw16_tile_##nb(const dw16_targs *a) { dw16_run(nb, a); }
DW16_T(1)
DW16_T(2)
DW16_T(3)
DW16_T(4)
DW16_T(5)
DW16_T(6)
DW16_T(7)
DW16_T(8)
typedef void (*dw16_tile_fn)(const dw16_targs *a);
static const dw16_tile_fn g_dw16_tiles[DW16_NB + 1] = {
    NULL, dw16_tile_1, dw16_tile_2, dw16_tile_3, dw16_tile_4,
    dw16_tile_5, dw16_tile_6, dw16_tile_7, dw16_tile_8};
static void dw16_tile(int nb, const dw16_targs *a) { g_dw16_tiles[nb](a); }

/* A tile of DW16_NB columns at unit src step (ps 16) whose taps come in
 * rows of three at consecutive src columns, rightwards (rev 0: forward at
 * stride and dilation 1) or leftwards (rev 1: backward_input at stride and
 * dilation 1): each src vector is loaded once per row and used by up to
 * three taps (10 loads for 24 FMAs, not 24). The FMAs and their order are
 * dw16_run's: the same bits. */
static void dw16_slide3(const dw16_targs *a, int rev) {
    __m512 acc[DW16_NB];
    const __m512 z = a->b16 ? _mm512_loadu_ps(a->b16) : _mm512_setzero_ps();
    for (int j = 0; j < DW16_NB; j++) acc[j] = z;
    for (int t = 0; t + 3 <= a->nt; t += 3) {
        const float *p = a->tp[t + (rev ? 2 : 0)] + a->off; /* the leftmost column */
        __m512 v[DW16_NB + 2];
        for (int m = 0; m < DW16_NB + 2; m++) v[m] = _mm512_loadu_ps(p + m * 16);
        for (int u = 0; u < 3; u++) {
            const __m512 wv = _mm512_loadu_ps(a->tw[t + u] + a->woff);
            const int sh = rev ? 2 - u : u;
            for (int j = 0; j < DW16_NB; j++) acc[j] = _mm512_fmadd_ps(v[j + sh], wv, acc[j]);
        }
    }
    const __mmask16 k = (__mmask16)a->m;
    for (int j = 0; j < DW16_NB; j++)
        _mm512_storeu_ps(a->dst + j * a->ds, _mm512_maskz_mov_ps(k, acc[j]));
}

/* 0 or 1: the rev of dw16_slide3 for the tap list of a; -1: it does not
 * apply. */
static int dw16_slide_dir(const dw16_targs *a) {
    if (a->ps != 16 || a->nt == 0 || a->nt % 3 != 0) return -1;
    const ptrdiff_t d = a->tp[1] - a->tp[0];
    if (d != 16 && d != -16) return -1;
    for (int t = 0; t < a->nt; t += 3)
        if (a->tp[t + 1] - a->tp[t] != d || a->tp[t + 2] - a->tp[t + 1] != d) return -1;
    return d < 0;
}
#else
/* Portable: the same order per element. */
static void dw16_tile_n(int nb, const dw16_targs *a) {
    for (int j = 0; j < nb; j++) {
        float acc[16];
        float *d = a->dst + j * a->ds;
        for (int l = 0; l < 16; l++) acc[l] = a->resume ? d[l] : a->b16 ? a->b16[l] : 0.0f;
        for (int t = 0; t < a->nt; t++)
            for (int l = 0; l < 16; l++)
                acc[l] += a->tp[t][a->off + j * a->ps + l] * a->tw[t][a->woff + l];
        for (int l = 0; l < 16; l++) d[l] = a->m >> l & 1u ? acc[l] : 0.0f;
    }
}
static void dw16_tile(int nb, const dw16_targs *a) { dw16_tile_n(nb, a); }
static void dw16_slide3(const dw16_targs *a, int rev) {
    (void)rev;
    dw16_tile_n(DW16_NB, a);
}
static int dw16_slide_dir(const dw16_targs *a) {
    (void)a;
    return -1;
}
#endif

/* ---------------------------------------------------------------- forward / backward_input driver */
typedef struct dw16_ctx {
    const dw16g *g;
    dw16_rel rw;
    dw16_taps rows, cols;
    int64_t SH, SW, QH, QW; /* src and dst spatial sizes */
    const float *src, *wt, *b16;
    float *dst;
} dw16_ctx;

/* Taps of one tile call; a window with more (11x11) runs in batches, each
 * resuming from the sums the previous one stored (a masked store and a
 * load give back the same floats: the order per element is kept). */
#define DW16_MAXT 32
/* channel blocks per work item: the tap lists of a row are built once
 * for them all */
#define DW16_CB 8

/* Column q of row qh in image 0, block 0: its valid taps from flat index
 * i0 (over (kh, kw) in that order) into tp / tw, at most DW16_MAXT;
 * returns how many. */
static int dw16_list(const dw16_ctx *c, int64_t qh, int64_t q, int64_t i0, const float **tp,
                     const float **tw) {
    const int64_t KH = c->g->KH, KW = c->g->KW, nkh = c->rows.nk[qh], nkw = c->cols.nk[q];
    const int64_t *kh = c->rows.k + qh * KH, *sh = c->rows.sc + qh * KH;
    const int64_t *kw = c->cols.k + q * KW, *sw = c->cols.sc + q * KW;
    if (i0 >= nkh * nkw) return 0;
    int nt = 0;
    for (int64_t r = i0 / nkw, u = i0 % nkw; r < nkh && nt < DW16_MAXT; r++, u = 0) {
        const float *srow = c->src + sh[r] * c->SW * 16, *wrow = c->wt + kh[r] * KW * 16;
        for (; u < nkw && nt < DW16_MAXT; u++, nt++) {
            tp[nt] = srow + sw[u] * 16;
            tw[nt] = wrow + kw[u] * 16;
        }
    }
    return nt;
}

/* One work item's rows: image n, blocks [cb0, cb1), dst row qh. */
typedef struct dw16_item {
    int64_t n, cb0, cb1, qh;
} dw16_item;

/* The tile (nb columns from column q, list a->tp / a->tw of column q0,
 * image 0, block 0) on each block of the item. */
static void dw16_blocks(const dw16_ctx *c, const dw16_item *it, dw16_targs *a, int64_t q,
                        int64_t q0, int nb, int slide) {
    const dw16g *g = c->g;
    const int64_t T = g->KH * g->KW, b = c->rw.b, shift = (q - q0) / b * a->ps;
    for (int64_t cb = it->cb0; cb < it->cb1; cb++) {
        const int64_t plane = it->n * g->C1 + cb, nreal = g->C - cb * 16;
        a->off = plane * c->SH * c->SW * 16 + shift;
        a->woff = cb * T * 16;
        a->b16 = c->b16 ? c->b16 + cb * 16 : NULL;
        a->dst = c->dst + ((plane * c->QH + it->qh) * c->QW + q) * 16;
        a->m = nreal >= 16 ? 0xffffu : (1u << nreal) - 1u;
        if (nb == DW16_NB && slide >= 0 && !a->resume)
            dw16_slide3(a, slide);
        else
            dw16_tile(nb, a);
    }
}

/* nb dst columns from q (the same taps, see dw16_row): the taps listed
 * here in batches. */
static void dw16_batched(const dw16_ctx *c, const dw16_item *it, dw16_targs *a, int64_t q,
                         int nb) {
    const float *tp[DW16_MAXT];
    const float *tw[DW16_MAXT];
    a->tp = tp;
    a->tw = tw;
    a->resume = false;
    int64_t i0 = 0;
    do { /* a column with no tap runs once: the bias */
        a->nt = dw16_list(c, it->qh, q, i0, tp, tw);
        dw16_blocks(c, it, a, q, q, nb, -1);
        a->resume = true;
        i0 += a->nt;
    } while (a->nt == DW16_MAXT);
}

/* The item's dst rows: the columns of each phase (q mod b), runs of up to
 * DW16_NB interior columns as one tile, a border column alone. The
 * interior columns of a phase share one tap list, shifted (built once per
 * item and phase when it fits one call). */
static void dw16_row(const dw16_ctx *c, const dw16_item *it) {
    const int64_t b = c->rw.b;
    const bool cache = c->rows.nk[it->qh] * c->g->KW <= DW16_MAXT;
    const float *tp[DW16_MAXT];
    const float *tw[DW16_MAXT];
    dw16_targs a;
    a.ps = 16 * c->rw.a; /* column q + b reads src column + a */
    a.ds = 16 * b;
    for (int64_t phase = 0; phase < b && phase < c->QW; phase++) {
        int64_t q0 = -1; /* the column whose list tp / tw hold */
        int nt0 = 0, slide = -1;
        for (int64_t q = phase; q < c->QW;) {
            int nb = 1;
            if (c->cols.full[q])
                while (nb < DW16_NB && q + nb * b < c->QW && c->cols.full[q + nb * b]) nb++;
            if (c->cols.full[q] && cache) {
                a.tp = tp;
                a.tw = tw;
                if (q0 < 0) {
                    q0 = q;
                    a.nt = nt0 = dw16_list(c, it->qh, q, 0, tp, tw);
                    slide = dw16_slide_dir(&a);
                }
                a.nt = nt0;
                a.resume = false;
                dw16_blocks(c, it, &a, q, q0, nb, slide);
            } else {
                dw16_batched(c, it, &a, q, nb);
            }
            q += nb * b;
        }
    }
}

/* items (n, block chunk, qh) */
static void dw16_range(void *vctx, int64_t lo, int64_t hi) {
    const dw16_ctx *c = vctx;
    const int64_t NC = cdiv(c->g->C1, DW16_CB);
    for (int64_t i = lo; i < hi; i++) {
        const int64_t qh = i % c->QH, r = i / c->QH, ch = r % NC;
        const int64_t cb1 = (ch + 1) * DW16_CB;
        const dw16_item it = {r / NC, ch * DW16_CB, cb1 < c->g->C1 ? cb1 : c->g->C1, qh};
        dw16_row(c, &it);
    }
}

/* zero-padded (C1, T, 16) weight and (C1, 16) bias; NULL after
 * mft__kernel_nomem */
static float *dw16_pack(const dw16g *g, const float *w, const int64_t *ws, const float *bias,
                        int64_t bstride) {
    const int64_t T = g->KH * g->KW;
    const size_t bytes = (size_t)(g->C1 * 16 * (T + 1)) * sizeof(float);
    float *p = mft__alloc(bytes, 64);
    if (!p) {
        mft__kernel_nomem(bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    float *b16 = p + g->C1 * T * 16;
    for (int64_t ch = 0; ch < g->C; ch++) {
        const int64_t cb = ch / 16, l = ch % 16;
        for (int64_t t = 0; t < T; t++)
            p[(cb * T + t) * 16 + l] = w[ch * ws[0] + t / g->KW * ws[2] + t % g->KW * ws[3]];
        if (bias) b16[ch] = bias[ch * bstride];
    }
    return p;
}

/* forward (bwd false: src x, dst y) or backward_input (src grad_y, dst
 * grad_x); false after mft__kernel_nomem */
static bool dw16_gather(const dw16g *g, bool bwd, const float *w, const int64_t *ws,
                        const float *bias, int64_t bstride, const float *src, float *dst) {
    float *wt = dw16_pack(g, w, ws, bias, bstride);
    if (!wt) return false;
    dw16_ctx c;
    c.g = g;
    c.SH = bwd ? g->OH : g->H;
    c.SW = bwd ? g->OW : g->W;
    c.QH = bwd ? g->H : g->OH;
    c.QW = bwd ? g->W : g->OW;
    const dw16_rel rh = rel_of(bwd, g->sh, g->ph, g->dh, c.SH, g->KH);
    c.rw = rel_of(bwd, g->sw, g->pw, g->dw, c.SW, g->KW);
    const size_t bh = (taps_bytes(&rh, c.QH) + 63) / 64 * 64;
    const size_t bytes = bh + taps_bytes(&c.rw, c.QW);
    char *mem = mft__alloc(bytes, 64);
    if (!mem) {
        mft__kernel_nomem(bytes);
        mft__free(wt);
        return false;
    }
    taps_build(&rh, c.QH, &c.rows, mem);
    taps_build(&c.rw, c.QW, &c.cols, mem + bh);
    c.src = src;
    c.dst = dst;
    c.wt = wt;
    c.b16 = bias ? wt + g->C1 * g->KH * g->KW * 16 : NULL;
    const int64_t items = g->N * cdiv(g->C1, DW16_CB) * c.QH;
    mft__parallel_for_dynamic(0, items, cf_chunk(items), dw16_range, &c);
    mft__free(mem);
    mft__free(wt);
    return true;
}

/* ---------------------------------------------------------------- backward_weight */
typedef struct dw16_bw_ctx {
    const dw16g *g;
    const float *gy, *x;
    float *part; /* (C1, DW16_CHUNKS, T, 16) */
} dw16_bw_ctx;

/* acc += sum over j < n of gy[16 j] * x[xs j], four chains over j mod 4
 * added as (0 + 1) + (2 + 3) */
static void dw16_bw_run(float *acc, const float *gy, const float *x, int64_t xs, int64_t n) {
#if CF_AVX512
    __m512 s[4];
    for (int i = 0; i < 4; i++) s[i] = _mm512_setzero_ps();
    int64_t ow = 0;
    for (; ow + 4 <= n; ow += 4)
        for (int i = 0; i < 4; i++)
            s[i] = _mm512_fmadd_ps(_mm512_loadu_ps(gy + (ow + i) * 16),
                                   _mm512_loadu_ps(x + (ow + i) * xs), s[i]);
    for (int i = 0; ow < n; ow++, i++)
        s[i] = _mm512_fmadd_ps(_mm512_loadu_ps(gy + ow * 16), _mm512_loadu_ps(x + ow * xs), s[i]);
    const __m512 r = _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3]));
    _mm512_storeu_ps(acc, _mm512_add_ps(_mm512_loadu_ps(acc), r));
#else
    for (int l = 0; l < 16; l++) {
        float s[4] = {0, 0, 0, 0};
        int64_t ow = 0;
        for (; ow + 4 <= n; ow += 4)
            for (int i = 0; i < 4; i++) s[i] += gy[(ow + i) * 16 + l] * x[(ow + i) * xs + l];
        for (int i = 0; ow < n; ow++, i++) s[i] += gy[ow * 16 + l] * x[ow * xs + l];
        acc[l] += (s[0] + s[1]) + (s[2] + s[3]);
    }
#endif
}

static void dw16_bw_range(void *vctx, int64_t lo, int64_t hi) {
    const dw16_bw_ctx *c = vctx;
    const dw16g *g = c->g;
    const int64_t T = g->KH * g->KW, R = g->N * g->OH;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t cb = it / DW16_CHUNKS, ch = it % DW16_CHUNKS;
        float *acc = c->part + it * T * 16;
        memset(acc, 0, (size_t)(T * 16) * sizeof(float));
        const int64_t r0 = R * ch / DW16_CHUNKS, r1 = R * (ch + 1) / DW16_CHUNKS;
        for (int64_t r = r0; r < r1; r++) {
            const int64_t n = r / g->OH, oh = r % g->OH;
            const float *gp = c->gy + ((n * g->C1 + cb) * g->OH + oh) * g->OW * 16;
            const float *xp = c->x + (n * g->C1 + cb) * g->H * g->W * 16;
            for (int64_t kh = 0; kh < g->KH; kh++) {
                const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
                if (ih < 0 || ih >= g->H) continue;
                for (int64_t kw = 0; kw < g->KW; kw++) {
                    const int64_t off = kw * g->dw - g->pw;
                    int64_t owlo, owhi;
                    valid_range(g->OW, g->W, g->sw, off, &owlo, &owhi);
                    if (owlo >= owhi) continue;
                    /* x at column ow*sw + off, taken relative to column 0 of
                     * the valid range (in bounds) */
                    const float *x0 = xp + (ih * g->W + owlo * g->sw + off) * 16;
                    dw16_bw_run(acc + (kh * g->KW + kw) * 16, gp + owlo * 16, x0, g->sw * 16,
                                owhi - owlo);
                }
            }
        }
    }
}

/* false after mft__kernel_nomem */
static bool dw16_backward_weight(const dw16g *g, const float *gy, const float *x, float *gw,
                                 const int64_t *gws) {
    const int64_t T = g->KH * g->KW;
    const size_t bytes = (size_t)(g->C1 * DW16_CHUNKS * T * 16) * sizeof(float);
    float *part = mft__alloc(bytes, 64);
    if (!part) {
        mft__kernel_nomem(bytes);
        return false;
    }
    dw16_bw_ctx c = {g, gy, x, part};
    mft__parallel_for_dynamic(0, g->C1 * DW16_CHUNKS, 1, dw16_bw_range, &c);
    for (int64_t ch = 0; ch < g->C; ch++) {
        const int64_t cb = ch / 16, l = ch % 16;
        for (int64_t t = 0; t < T; t++) {
            float s = 0.0f;
            for (int64_t k = 0; k < DW16_CHUNKS; k++)
                s += part[((cb * DW16_CHUNKS + k) * T + t) * 16 + l];
            gw[ch * gws[0] + t / g->KW * gws[2] + t % g->KW * gws[3]] = s;
        }
    }
    mft__free(part);
    return true;
}

/* ---------------------------------------------------------------- kernel entries */
#define DW16PTR(t) ((float *)(void *)mft__tensor_ptr(t))

/* geometry of the forward convolution x (N, C, H, W) -> y (N, C, OH, OW) */
static dw16g dw16_geom(const mft_kernel_args *a, const mft_tensor *x, const mft_tensor *y,
                       const mft_tensor *w) {
    const mft_conv_params *p = a->params;
    const int64_t *xs = x->sizes;
    return (dw16g){xs[0],          xs[1],          cdiv(xs[1], 16), xs[2],
                   xs[3],          y->sizes[2],    y->sizes[3],     w->sizes[2],
                   w->sizes[3],    p->stride[0],   p->stride[1],    p->padding[0],
                   p->padding[1],  p->dilation[0], p->dilation[1]};
}

void mft__conv_dw16_fwd(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *w = a->inputs[1], *y = a->outputs[0];
    const mft_conv_params *p = a->params;
    const dw16g g = dw16_geom(a, x, y, w);
    const int64_t ws[4] = {w->strides[0], w->strides[1], w->strides[2], w->strides[3]};
    const float *bias = p->bias ? (const float *)(const void *)mft__tensor_ptr(p->bias) : NULL;
    if (dw16_gather(&g, false, DW16PTR(w), ws, bias, p->bias ? p->bias->strides[0] : 0,
                    DW16PTR(x), DW16PTR(y)))
        mft__dispatch_report_as("conv2d.nchw16c.f32.depthwise");
}

void mft__conv_dw16_bwd_in(const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *w = a->inputs[1], *gx = a->outputs[0];
    const dw16g g = dw16_geom(a, gx, gy, w);
    const int64_t ws[4] = {w->strides[0], w->strides[1], w->strides[2], w->strides[3]};
    if (dw16_gather(&g, true, DW16PTR(w), ws, NULL, 0, DW16PTR(gy), DW16PTR(gx)))
        mft__dispatch_report_as("conv2d_backward_input.nchw16c.f32.depthwise");
}

void mft__conv_dw16_bwd_w(const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *x = a->inputs[1], *gw = a->outputs[0];
    const dw16g g = dw16_geom(a, x, gy, gw);
    const int64_t gws[4] = {gw->strides[0], gw->strides[1], gw->strides[2], gw->strides[3]};
    if (dw16_backward_weight(&g, DW16PTR(gy), DW16PTR(x), DW16PTR(gw), gws))
        mft__dispatch_report_as("conv2d_backward_weight.nchw16c.f32.depthwise");
}
