/* ops/resize/gather.c — the fast 2-D F32 kernels of interpolate and its
 * backward on packed NCHW and NHWC buffers (Note [Gather tables]: separable
 * gather tables, affine column runs, AVX-512 fused row/column combinations),
 * and the family's kernel table. */
#include <string.h>
#include "resize_internal.h"

/* ---------------------------------------------------------------- fast 2-D F32
 * Note [Gather tables]
 * Forward and backward are both "gathers" over a separable table: for each
 * destination index a of a dim, a list of (source index, weight). Forward:
 * the taps of output a. Backward: the transposed taps, i.e. the outputs that
 * read input a with their weights, in increasing output order. Then
 *     dst[n, c, a, b] = sum_(p, wa) in T_h[a]  sum_(q, wb) in T_w[b]  wa*wb*src[n, c, p, q]
 * Every destination element is written once by one thread with a fixed
 * summation order: no zero-fill pass, no races, results independent of the
 * thread count. Both layouts first combine the source rows of T_h[a] into
 * a row buffer (or use the source row itself for one entry of weight 1):
 * unit stride, vectorised. Then along W: NHWC combines C-vectors of the
 * buffer (vectorised over C); NCHW runs the affine loop of Note [Affine
 * columns] where the table repeats, gathers elsewhere. On AVX-512 with C %
 * 16 == 0, NHWC rows combine the source rows in registers as the columns
 * read them instead, where the tables allow: two entries per row and per
 * column (nhwc_cols_fused2), and Note [Separable 4x4 blocks]. Rows too
 * wide for the buffers use plain loops over all (h, w) pairs. Tables that
 * cannot be allocated send the call to the reference kernel (kernels
 * cannot fail).
 * The F32 results differ from the reference in rounding only (summation
 * order; FMA in the NHWC combination). */
typedef struct gtab {
    int64_t *start; /* n + 1 */
    int32_t *idx;   /* sizes are at most INTERP_MAX_SIZE: int32 (vector gathers) */
    float *w;
} gtab;

/* Sizes of a dim's table: entries of the forward taps of every output. */
static int64_t gtab_entries(const mft_interp_params *p, int64_t in, int64_t out) {
    int64_t idx[INTERP_MAX_TAPS];
    float w[INTERP_MAX_TAPS];
    return out * taps_F32(p->mode, p->align_corners, in, out, 0, idx, w);
}

/* Fills t for one dim (memory from the caller: start n+1, idx/w `entries`).
 * backward: n = in, transposed; else n = out. */
static void gtab_fill(gtab *t, const mft_interp_params *p, int64_t in, int64_t out,
                      bool backward) {
    int64_t idx[INTERP_MAX_TAPS];
    float w[INTERP_MAX_TAPS];
    if (!backward) {
        int64_t e = 0;
        for (int64_t o = 0; o < out; o++) {
            t->start[o] = e;
            int k = taps_F32(p->mode, p->align_corners, in, out, o, idx, w);
            for (int j = 0; j < k; j++, e++) {
                t->idx[e] = (int32_t)idx[j];
                t->w[e] = w[j];
            }
        }
        t->start[out] = e;
        return;
    }
    for (int64_t i = 0; i <= in; i++) t->start[i] = 0;
    for (int64_t o = 0; o < out; o++) {
        int k = taps_F32(p->mode, p->align_corners, in, out, o, idx, w);
        for (int j = 0; j < k; j++) t->start[idx[j] + 1]++;
    }
    for (int64_t i = 0; i < in; i++) t->start[i + 1] += t->start[i];
    /* fill with a moving cursor per input (start[i] is restored afterwards) */
    for (int64_t o = 0; o < out; o++) {
        int k = taps_F32(p->mode, p->align_corners, in, out, o, idx, w);
        for (int j = 0; j < k; j++) {
            int64_t e = t->start[idx[j]]++;
            t->idx[e] = (int32_t)o;
            t->w[e] = w[j];
        }
    }
    for (int64_t i = in; i > 0; i--) t->start[i] = t->start[i - 1];
    t->start[0] = 0;
}

/* The regular part of one dim's table: the run [klo, khi) around the
 * middle whose entries all have kw entries, and inside it the affine run
 * of Note [Affine columns] (P, S > 0 when found). */
typedef struct rs_aff {
    int64_t kw, klo, khi;
    int ap, as;
    int64_t qlo, qhi;
    int32_t aoff[2][4];
    float aw[2][4];
} rs_aff;

typedef struct fast_job {
    const float *src;
    float *dst;
    int64_t N, C, SH, SW, DH, DW; /* source and destination spatial sizes */
    gtab th, tw;
    rs_aff ac, ar; /* the regular runs of the columns (tw) and rows (th) */
    bool dup2;     /* every column has 1 entry, weight 1, reading b / 2 */
    bool stream;   /* NHWC: rows via a buffer and non-temporal stores */
    int wkind;     /* NHWC: nhwc_cols_uniform's column form, or 0 */
    bool blk2;     /* NHWC: Note [Separable 4x4 blocks] applies */
    bool fused2;   /* NHWC: nhwc_cols_fused2 applies to two-entry rows */
} fast_job;

/* Row buffer of the NCHW kernel (source-row width, floats). */
#define ROWBUF 4096

/* d[b] = sum of the K entries of column b (a constant K: the compiler
 * specialises each call with a literal K and vectorises with gathers). */
static inline void gather_fixed(float *restrict d, const float *restrict row,
                                const float *restrict w, const int32_t *restrict ix, int64_t n,
                                int K) {
    for (int64_t b = 0; b < n; b++) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += w[b * K + k] * row[ix[b * K + k]];
        d[b] = acc;
    }
}

/* Columns [b0, b1) with any number of entries each. */
static void gather_any(const gtab *t, const float *restrict row, float *restrict d, int64_t b0,
                       int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        float acc = 0.0f;
        for (int64_t e = t->start[b]; e < t->start[b + 1]; e++) acc += t->w[e] * row[t->idx[e]];
        d[b] = acc;
    }
}

/* Note [Affine columns]
 * For integer ratios the W table repeats: column P*q + r (r < P) reads
 * entries S*q + off[r][k] with weights aw[r][k], k < K, e.g. nearest x2
 * forward (P 2, S 1, K 1), bilinear x2 forward (P 2, S 1, K 2), their
 * backward (P 1, S 2, K 2 / 4). Such a run of columns is a loop of
 * contiguous (or stride-2) loads the compiler vectorises with shuffles, not
 * with gathers (slow on many x86 cores). Columns outside the run, or tables
 * without one, use the gathers below. */
static void affine_cols(const fast_job *j, const float *restrict row, float *restrict d) {
    const int P = j->ac.ap, S = j->ac.as, K = (int)j->ac.kw;
    const int64_t q0 = j->ac.qlo, q1 = j->ac.qhi;
    const float(*W)[4] = j->ac.aw;
    const int32_t(*O)[4] = j->ac.aoff;
    if (P == 2 && S == 1 && K == 2) { /* bilinear x2 forward */
        const float *restrict a0 = row + O[0][0], *restrict a1 = row + O[0][1];
        const float *restrict b0 = row + O[1][0], *restrict b1 = row + O[1][1];
        const float wa0 = W[0][0], wa1 = W[0][1], wb0 = W[1][0], wb1 = W[1][1];
        for (int64_t q = q0; q < q1; q++) {
            d[2 * q] = wa0 * a0[q] + wa1 * a1[q];
            d[2 * q + 1] = wb0 * b0[q] + wb1 * b1[q];
        }
    } else if (P == 1 && S == 2 && K == 2) { /* nearest x2 backward */
        const float *restrict a0 = row + O[0][0], *restrict a1 = row + O[0][1];
        const float w0 = W[0][0], w1 = W[0][1];
        for (int64_t q = q0; q < q1; q++) d[q] = w0 * a0[2 * q] + w1 * a1[2 * q];
    } else if (P == 1 && S == 2 && K == 4) { /* bilinear x2 backward */
        const float *restrict a0 = row + O[0][0], *restrict a1 = row + O[0][1];
        const float *restrict a2 = row + O[0][2], *restrict a3 = row + O[0][3];
        const float w0 = W[0][0], w1 = W[0][1], w2 = W[0][2], w3 = W[0][3];
        for (int64_t q = q0; q < q1; q++)
            d[q] = w0 * a0[2 * q] + w1 * a1[2 * q] + w2 * a2[2 * q] + w3 * a3[2 * q];
    } else if (P == 1 && S == 1 && K == 2) { /* linear, in == out */
        const float *restrict a0 = row + O[0][0], *restrict a1 = row + O[0][1];
        const float w0 = W[0][0], w1 = W[0][1];
        for (int64_t q = q0; q < q1; q++) d[q] = w0 * a0[q] + w1 * a1[q];
    } else { /* any other (P, S, K) */
        for (int64_t q = q0; q < q1; q++)
            for (int r = 0; r < P; r++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++) acc += W[r][k] * row[S * q + O[r][k]];
                d[P * q + r] = acc;
            }
    }
}

/* The run [klo, khi) of table t (n destinations) around the middle whose
 * entries have as many entries as the middle one; no affine run yet. */
static void run_find(const gtab *t, int64_t n, rs_aff *a) {
    const int64_t mid = n / 2;
    const int64_t *st = t->start;
    a->kw = st[mid + 1] - st[mid];
    a->klo = mid;
    a->khi = mid + 1;
    while (a->klo > 0 && st[a->klo] - st[a->klo - 1] == a->kw) a->klo--;
    while (a->khi < n && st[a->khi + 1] - st[a->khi] == a->kw) a->khi++;
    a->ap = a->as = 0;
}

/* Group q (destinations P*q .. P*q + P-1) of table t matches the pattern. */
static bool affine_match(const gtab *t, const rs_aff *a, int64_t base, int P, int S, int K,
                         int64_t q) {
    for (int r = 0; r < P; r++)
        for (int k = 0; k < K; k++) {
            const int64_t e = base + (P * q + r) * K + k;
            if (t->idx[e] != S * q + a->aoff[r][k] || t->w[e] != a->aw[r][k]) return false;
        }
    return true;
}

/* The affine run for (P, S) of table t around the middle of [klo, khi)
 * (which have kw entries each), extended both ways while the pattern
 * holds; false if shorter than 8 destinations. */
static bool affine_find(const gtab *t, rs_aff *a, int P, int S) {
    const int K = (int)a->kw;
    if (K < 1 || K > 4) return false;
    const int64_t qa = (a->klo + P - 1) / P, qb = a->khi / P; /* groups inside */
    if ((qb - qa) * P < 8) return false;
    /* entry k of destination b in [klo, khi): start[klo] + (b - klo) * K + k */
    const int64_t base = t->start[a->klo] - a->klo * K, qm = (qa + qb) / 2;
    for (int r = 0; r < P; r++)
        for (int k = 0; k < K; k++) {
            const int64_t e = base + (P * qm + r) * K + k;
            a->aoff[r][k] = (int32_t)(t->idx[e] - S * qm);
            a->aw[r][k] = t->w[e];
        }
    int64_t qlo = qm, qhi = qm + 1;
    while (qlo > qa && affine_match(t, a, base, P, S, K, qlo - 1)) qlo--;
    while (qhi < qb && affine_match(t, a, base, P, S, K, qhi)) qhi++;
    if ((qhi - qlo) * P < 8) return false;
    a->ap = P;
    a->as = S;
    a->qlo = qlo;
    a->qhi = qhi;
    return true;
}

/* d[b] = sum over T_w[b] of w * row[idx] for one destination row (row and d
 * never alias: row is the source or the row buffer). Columns [klo, khi) all
 * have kw entries (found once per call; the edges of a backward table have
 * fewer or more). */
static void nchw_gather_row(const fast_job *j, const float *restrict row, float *restrict d) {
    const int64_t DW = j->DW;
    if (j->dup2) { /* nearest x2: every source column twice */
        for (int64_t q = 0; q < DW / 2; q++) {
            d[2 * q] = row[q];
            d[2 * q + 1] = row[q];
        }
        return;
    }
    const rs_aff *ac = &j->ac;
    if (ac->ap) {
        gather_any(&j->tw, row, d, 0, ac->ap * ac->qlo);
        affine_cols(j, row, d);
        gather_any(&j->tw, row, d, ac->ap * ac->qhi, DW);
        return;
    }
    gather_any(&j->tw, row, d, 0, ac->klo);
    const int64_t e0 = j->tw.start[ac->klo], n = ac->khi - ac->klo;
    const float *w = j->tw.w + e0;
    const int32_t *ix = j->tw.idx + e0;
    switch (ac->kw) {
    case 1: gather_fixed(d + ac->klo, row, w, ix, n, 1); break;
    case 2: gather_fixed(d + ac->klo, row, w, ix, n, 2); break;
    case 3: gather_fixed(d + ac->klo, row, w, ix, n, 3); break;
    case 4: gather_fixed(d + ac->klo, row, w, ix, n, 4); break;
    default: gather_any(&j->tw, row, d, ac->klo, ac->khi); break;
    }
    gather_any(&j->tw, row, d, ac->khi, DW);
}

/* NCHW: rows r = plane * DH + a of dst (packed N, C, DH, DW). */
static void fast_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const fast_job *j = ctx;
    float buf[ROWBUF];
    const bool use_buf = j->SW <= ROWBUF;
    for (int64_t r = begin; r < end; r++) {
        const int64_t plane = r / j->DH, a = r % j->DH;
        const float *s = j->src + plane * j->SH * j->SW;
        float *d = j->dst + r * j->DW;
        const int64_t h0 = j->th.start[a], h1 = j->th.start[a + 1];
        const float *row = NULL;
        if (use_buf) {
            if (h1 - h0 == 1 && j->th.w[h0] == 1.0f) {
                row = s + j->th.idx[h0] * j->SW;
            } else {
                for (int64_t q = 0; q < j->SW; q++) buf[q] = 0.0f;
                for (int64_t e = h0; e < h1; e++) {
                    const float wa = j->th.w[e];
                    const float *sr = s + j->th.idx[e] * j->SW;
                    for (int64_t q = 0; q < j->SW; q++) buf[q] += wa * sr[q];
                }
                row = buf;
            }
            nchw_gather_row(j, row, d);
        } else {
            for (int64_t b = 0; b < j->DW; b++) {
                float acc = 0.0f;
                for (int64_t e = h0; e < h1; e++) {
                    const float *sr = s + j->th.idx[e] * j->SW;
                    float racc = 0.0f;
                    for (int64_t f = j->tw.start[b]; f < j->tw.start[b + 1]; f++)
                        racc += j->tw.w[f] * sr[j->tw.idx[f]];
                    acc += j->th.w[e] * racc;
                }
                d[b] = acc;
            }
        }
    }
}

/* NHWC combination of C-vectors: the taps' pointers and weights are
 * gathered first; channels go in blocks of 32 (then 8) accumulated in
 * 8-float vector registers (GCC vector extension, FMA when available), so
 * each tap is read once and d written once. On AVX builds only: without
 * AVX, passing a 32-byte vector changes the ABI (plain loops then). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX__)
#define RS_HAVE_V8 1
typedef float rs_v8 __attribute__((vector_size(32)));
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define RS_HAVE_STREAM 1
/* a + w * v with one rounding (the C11 build does not contract a*b+c). */
static inline rs_v8 rs_fma(rs_v8 a, float w, rs_v8 v) {
    return (rs_v8)_mm256_fmadd_ps(_mm256_set1_ps(w), (__m256)v, (__m256)a);
}
#else
static inline rs_v8 rs_fma(rs_v8 a, float w, rs_v8 v) { return a + w * v; }
#endif
#else
#define RS_HAVE_V8 0
#endif
#ifndef RS_HAVE_STREAM
#define RS_HAVE_STREAM 0
#endif
#define RS_MAX_PIXEL_TAPS 64
/* Most source rows prefetched for the next NHWC destination row. */
#define RS_PF_ROWS 16

#if (defined(__AVX512F__) && RS_HAVE_STREAM) || RS_HAVE_V8
/* Prefetch bytes [off, off + 128) of each of the npf rows pf (the source
 * rows the next destination row adds, read while this one is combined). */
static inline void rs_prefetch_rows(const float *const *pf, int npf, int64_t off) {
    for (int k = 0; k < npf; k++) {
        __builtin_prefetch(pf[k] + off);
        __builtin_prefetch(pf[k] + off + 16);
    }
}
#endif

/* d[0..n) = sum over t < nt of tw[t] * tp[t][0..n), prefetching the npf
 * rows pf alongside. */
static inline void nhwc_combine(const float *const *tp, const float *tw, int nt, int64_t n,
                                float *restrict d, const float *const *pf, int npf) {
    (void)pf; /* (used by the vector loops only) */
    (void)npf;
    int64_t c = 0;
#if defined(__AVX512F__) && RS_HAVE_STREAM
    /* the same FMAs in 16-float registers */
    for (; c + 32 <= n; c += 32) {
        rs_prefetch_rows(pf, npf, c);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (int t = 0; t < nt; t++) {
            const __m512 w = _mm512_set1_ps(tw[t]);
            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(tp[t] + c), a0);
            a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(tp[t] + c + 16), a1);
        }
        _mm512_storeu_ps(d + c, a0);
        _mm512_storeu_ps(d + c + 16, a1);
    }
#endif
#if RS_HAVE_V8
    for (; c + 32 <= n; c += 32) {
        rs_prefetch_rows(pf, npf, c);
        rs_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
        for (int t = 0; t < nt; t++) {
            rs_v8 v0, v1, v2, v3;
            memcpy(&v0, tp[t] + c, sizeof v0);
            memcpy(&v1, tp[t] + c + 8, sizeof v1);
            memcpy(&v2, tp[t] + c + 16, sizeof v2);
            memcpy(&v3, tp[t] + c + 24, sizeof v3);
            a0 = rs_fma(a0, tw[t], v0);
            a1 = rs_fma(a1, tw[t], v1);
            a2 = rs_fma(a2, tw[t], v2);
            a3 = rs_fma(a3, tw[t], v3);
        }
        memcpy(d + c, &a0, sizeof a0);
        memcpy(d + c + 8, &a1, sizeof a1);
        memcpy(d + c + 16, &a2, sizeof a2);
        memcpy(d + c + 24, &a3, sizeof a3);
    }
    for (; c + 8 <= n; c += 8) {
        rs_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int t = 0; t < nt; t++) {
            rs_v8 v0;
            memcpy(&v0, tp[t] + c, sizeof v0);
            a0 = rs_fma(a0, tw[t], v0);
        }
        memcpy(d + c, &a0, sizeof a0);
    }
#endif
    for (; c < n; c++) {
        float acc = 0.0f;
        for (int t = 0; t < nt; t++) acc += tw[t] * tp[t][c];
        d[c] = acc;
    }
}

/* d[0..n) = sum over the entries [e0, e1) of table t of w * (base + idx *
 * pitch)[0..n): a copy for one entry of weight 1, else nhwc_combine (plain
 * loops beyond RS_MAX_PIXEL_TAPS entries: extreme scaling ratios). */
static inline void nhwc_taps(const gtab *t, int64_t e0, int64_t e1, const float *base,
                             int64_t pitch, int64_t n, float *restrict d,
                             const float *const *pf, int npf) {
    if (e1 - e0 == 1 && t->w[e0] == 1.0f) {
        memcpy(d, base + t->idx[e0] * pitch, (size_t)n * sizeof(float));
        return;
    }
    if (e1 - e0 == 2) { /* linear: one pass the compiler vectorises (a
                            * prefetch here measured slower at 1 thread) */
        const float w0 = t->w[e0], w1 = t->w[e0 + 1];
        const float *restrict p0 = base + t->idx[e0] * pitch;
        const float *restrict p1 = base + t->idx[e0 + 1] * pitch;
        for (int64_t c = 0; c < n; c++) d[c] = w0 * p0[c] + w1 * p1[c];
        return;
    }
    if (e1 - e0 > RS_MAX_PIXEL_TAPS) {
        for (int64_t c = 0; c < n; c++) {
            float acc = 0.0f;
            for (int64_t e = e0; e < e1; e++) acc += t->w[e] * base[t->idx[e] * pitch + c];
            d[c] = acc;
        }
        return;
    }
    const float *tp[RS_MAX_PIXEL_TAPS];
    float tw[RS_MAX_PIXEL_TAPS];
    int nt = 0;
    for (int64_t e = e0; e < e1; e++, nt++) {
        tw[nt] = t->w[e];
        tp[nt] = base + t->idx[e] * pitch;
    }
    nhwc_combine(tp, tw, nt, n, d, pf, npf);
}

/* NHWC row buffer (floats): a source row (SW * C) combined over T_h[a]. */
#define RS_TROW 8192
/* NHWC destination row buffer (floats, DW * C) of the streaming path, and
 * the smallest share of the destination per thread (bytes) written with
 * non-temporal stores: a result much larger than the caches would
 * otherwise be read into them before being overwritten (the forward of an
 * upsample writes 4x what it reads). Per thread: one core's plain stores
 * are limited by its own line fills, so at 1 thread streaming wins
 * (8x64x56x56 nearest x2: 0.70-0.86 ms against 0.90-1.23); two cores'
 * plain stores keep up and leave the result in the last-level cache,
 * where streaming lost (0.37-0.73 against 0.26-0.39 ms). */
#define RS_DROW 8192
#define RS_STREAM_MIN ((int64_t)16 << 20)

/* d[0..n) = s[0..n) with non-temporal stores where AVX has them (aligned
 * 32-byte blocks; the edges with plain stores). */
static void rs_stream_copy(float *restrict d, const float *restrict s, int64_t n) {
    int64_t c = 0;
#if RS_HAVE_STREAM
    while (c < n && ((uintptr_t)(d + c) & 31u) != 0) {
        d[c] = s[c];
        c++;
    }
    for (; c + 8 <= n; c += 8) _mm256_stream_ps(d + c, _mm256_loadu_ps(s + c));
#endif
    for (; c < n; c++) d[c] = s[c];
}

/* NHWC: rows r = n * DH + a of dst (packed N, DH, DW, C). Separable: the
 * source rows of T_h[a] are combined into one row t (SW x C; the source row
 * itself for one entry of weight 1), then each pixel b combines the
 * C-vectors of t at T_w[b]. Rows wider than RS_TROW combine all
 * (h, w) pairs per pixel instead. */
#if RS_HAVE_V8
/* One NHWC destination row d (DW x C) from the combined source row `row`
 * (SW x C) when every column has the same form (j->wkind, C % 8 == 0):
 * 1 = one entry of weight 1 (a copy of a C-vector), 2 = two entries
 * w0 * p0 + w1 * p1 (the same products and sum as nhwc_taps). Inline 8-float
 * vectors; non-temporal stores when j->stream (d then 32-byte aligned). */
static inline void rs_put8(float *d, rs_v8 v, bool stream) {
#if RS_HAVE_STREAM
    if (stream) {
        _mm256_stream_ps(d, (__m256)v);
        return;
    }
#endif
    (void)stream;
    memcpy(d, &v, sizeof v);
}

static void nhwc_cols_uniform(const fast_job *j, const float *restrict row, float *restrict d) {
    const int64_t C = j->C;
    const bool st = j->stream;
    const int64_t *start = j->tw.start;
    const int32_t *ix = j->tw.idx;
    const float *tw = j->tw.w;
    if (j->wkind == 1) {
        for (int64_t b = 0; b < j->DW; b++, d += C) {
            const float *p = row + (int64_t)ix[start[b]] * C;
            for (int64_t c = 0; c < C; c += 8) {
                rs_v8 v;
                memcpy(&v, p + c, sizeof v);
                rs_put8(d + c, v, st);
            }
        }
        return;
    }
    for (int64_t b = 0; b < j->DW; b++, d += C) {
        const int64_t e = start[b];
        const rs_v8 z = {0, 0, 0, 0, 0, 0, 0, 0};
        const rs_v8 w0 = z + tw[e], w1 = z + tw[e + 1];
        const float *p0 = row + (int64_t)ix[e] * C, *p1 = row + (int64_t)ix[e + 1] * C;
        for (int64_t c = 0; c < C; c += 8) {
            rs_v8 v0, v1;
            memcpy(&v0, p0 + c, sizeof v0);
            memcpy(&v1, p1 + c, sizeof v1);
            rs_put8(d + c, w0 * v0 + w1 * v1, st);
        }
    }
}
#endif

#if defined(__AVX512F__) && RS_HAVE_STREAM
#define RS_NHWC_FUSED2 1
/* nhwc_cols_uniform's two-entry columns (wkind 2, C % 16 == 0) of a
 * destination row whose T_h row has two entries too (source rows r0, r1,
 * weights u0, u1): the rows are combined per C-vector as the columns read
 * them, with the operations of combining them first (nhwc_taps' two-entry
 * loop, then nhwc_cols_uniform: the same bits), without the combined
 * row's store and reload, in 16-float registers. Nearest x2 backward at 1
 * thread: 0.95-0.99 -> 0.75-0.77 ms; bilinear forward at 2 threads
 * 0.51-0.54 -> 0.47-0.48 (at 1 thread, with streaming stores, equal). */
static void nhwc_cols_fused2(const fast_job *j, const float *r0, const float *r1, float u0,
                             float u1, float *restrict d) {
    const int64_t C = j->C;
    const int64_t *start = j->tw.start;
    const int32_t *ix = j->tw.idx;
    const float *tw = j->tw.w;
    const __m512 h0 = _mm512_set1_ps(u0), h1 = _mm512_set1_ps(u1);
    const bool st = j->stream;
    for (int64_t b = 0; b < j->DW; b++, d += C) {
        const int64_t e = start[b];
        const __m512 w0 = _mm512_set1_ps(tw[e]), w1 = _mm512_set1_ps(tw[e + 1]);
        const int64_t q0 = (int64_t)ix[e] * C, q1 = (int64_t)ix[e + 1] * C;
        for (int64_t c = 0; c < C; c += 16) {
            const __m512 v0 = _mm512_add_ps(_mm512_mul_ps(h0, _mm512_loadu_ps(r0 + q0 + c)),
                                            _mm512_mul_ps(h1, _mm512_loadu_ps(r1 + q0 + c)));
            const __m512 v1 = _mm512_add_ps(_mm512_mul_ps(h0, _mm512_loadu_ps(r0 + q1 + c)),
                                            _mm512_mul_ps(h1, _mm512_loadu_ps(r1 + q1 + c)));
            const __m512 y = _mm512_add_ps(_mm512_mul_ps(w0, v0), _mm512_mul_ps(w1, v1));
            if (st) _mm512_stream_ps(d + c, y);
            else _mm512_storeu_ps(d + c, y);
        }
    }
}
#else
#define RS_NHWC_FUSED2 0
#endif

/* NHWC affine columns (Note [Affine columns], P = 1 and K = 4: every
 * column of the run [qlo, qhi) reads entries S*b + aoff[0][k] with weights
 * aw[0][k], as in the bilinear x2 backward), C % 16 == 0: d[b] = the sum
 * over k of those C-vectors, with the FMAs of
 * nhwc_combine in the same order from +0 (bit-identical to the per-pixel
 * path) but without its per-pixel walk of the table (which, with 64
 * channels, cost more than the arithmetic: bilinear x2 backward). */
#if defined(__AVX512F__) && RS_HAVE_STREAM
#define RS_NHWC_AFFINE 1
static void nhwc_affine_cols(const fast_job *j, const float *restrict row, float *restrict d,
                             int64_t b0, int64_t b1) {
    const rs_aff *ac = &j->ac;
    const int64_t C = j->C, S = ac->as;
    const __m512 w0 = _mm512_set1_ps(ac->aw[0][0]), w1 = _mm512_set1_ps(ac->aw[0][1]),
                 w2 = _mm512_set1_ps(ac->aw[0][2]), w3 = _mm512_set1_ps(ac->aw[0][3]);
    const int64_t o0 = ac->aoff[0][0] * C, o1 = ac->aoff[0][1] * C, o2 = ac->aoff[0][2] * C,
                  o3 = ac->aoff[0][3] * C;
    for (int64_t b = b0; b < b1; b++) {
        const float *p = row + S * b * C;
        float *o = d + b * C;
        for (int64_t c = 0; c < C; c += 16) {
            __m512 a = _mm512_fmadd_ps(w0, _mm512_loadu_ps(p + o0 + c), _mm512_setzero_ps());
            a = _mm512_fmadd_ps(w1, _mm512_loadu_ps(p + o1 + c), a);
            a = _mm512_fmadd_ps(w2, _mm512_loadu_ps(p + o2 + c), a);
            a = _mm512_fmadd_ps(w3, _mm512_loadu_ps(p + o3 + c), a);
            _mm512_storeu_ps(o + c, a);
        }
    }
}
#else
#define RS_NHWC_AFFINE 0
#endif

/* Lazy combination of the source rows (nhwc_cols): the combined row tbuf
 * holds [0, done). */
typedef struct rs_lazy {
    int64_t h0, h1, rowlen, done;
    const float *s;
    float *tbuf;
    const float *const *pf;
    int npf;
} rs_lazy;

/* Extends lz's combined row to `need` floats (rounded up to 32, at most
 * rowlen). */
static inline void nhwc_lazy_upto(const fast_job *j, rs_lazy *lz, int64_t need) {
    need = (need + 31) / 32 * 32;
    if (need > lz->rowlen) need = lz->rowlen;
    const int64_t done = lz->done;
    if (need <= done) return;
    const float *pfo[RS_PF_ROWS];
    for (int k = 0; k < lz->npf; k++) pfo[k] = lz->pf[k] + done;
    nhwc_taps(&j->th, lz->h0, lz->h1, lz->s + done, lz->rowlen, need - done, lz->tbuf + done,
              pfo, lz->npf);
    lz->done = need;
}

/* Columns per block of the NHWC affine path (a lazy combined row is
 * extended once per block). */
#define RS_AFF_BLK 8

/* An NHWC destination row d (DW x C) from the row `row` (SW x C) by the W
 * table: the affine run by blocks, the other columns pixel by pixel. With
 * lz, `row` is lz's combined row, built just ahead of the pixels that read
 * it, so it is read back from L1 and the source rows (and the next row's
 * prefetches) stream at an even pace instead of in a burst before the
 * column pass. Pieces start at multiples of 32 floats, so each element
 * goes through the same vector loop (the same operations) as when the row
 * is combined at once. */
static void nhwc_cols(const fast_job *j, const float *restrict row, float *restrict d,
                      rs_lazy *lz) {
    const int64_t C = j->C;
    for (int64_t b = 0; b < j->DW;) {
#if RS_NHWC_AFFINE
        const rs_aff *ac = &j->ac;
        if (ac->ap == 1 && b == ac->qlo) { /* the affine run, by blocks */
            int32_t hi = 0; /* the last source column a column reads, past S*b */
            for (int k = 0; k < 4; k++) hi = ac->aoff[0][k] > hi ? ac->aoff[0][k] : hi;
            while (b < ac->qhi) {
                const int64_t be = b + RS_AFF_BLK < ac->qhi ? b + RS_AFF_BLK : ac->qhi;
                if (lz) nhwc_lazy_upto(j, lz, (ac->as * (be - 1) + hi + 1) * C);
                nhwc_affine_cols(j, row, d, b, be);
                b = be;
            }
            continue;
        }
#endif
        const int64_t e0 = j->tw.start[b], e1 = j->tw.start[b + 1];
        if (lz) {
            int64_t need = 0;
            for (int64_t e = e0; e < e1; e++)
                need = j->tw.idx[e] + 1 > need ? j->tw.idx[e] + 1 : need;
            nhwc_lazy_upto(j, lz, need * C);
        }
        nhwc_taps(&j->tw, e0, e1, row, C, C, d + b * C, NULL, 0);
        b++;
    }
}

/* Note [Separable 4x4 blocks]
 * When the rows and the columns both have an affine run with P = 1, S = 2
 * and K = 4 consecutive entries (the bilinear backward of an x2 upsample),
 * a destination pixel (a, b) inside both runs is
 *     sum_l wc[l] * v(a, 2b + oc + l),  v(a, q) = sum_k wr[k] * src[2a + or + k, q]
 * (the lazy path's order: the column sums first). Rows a and a + 1 read
 * six source rows, two of them shared, and columns b and b + 1 share two
 * of their four column sums. So rows go in pairs and the kernel walks the
 * columns keeping the last two column sums of both rows in registers:
 * each source element is loaded once per pair, where the lazy path loads
 * it once per row, stores the combined row and reads it back. The FMAs
 * are the lazy path's, in its order (from +0), so the results are
 * bit-identical to it. The columns outside the run take the same column
 * sums, per entry (blk2_edge); rows outside the run, and a row left
 * without a partner at the end of a thread's range, take the lazy path.
 * 8x64x56x56 at 1 thread: 1.42-1.53 -> 1.0-1.1 ms. */
#if RS_NHWC_AFFINE
/* The column sums of rows a and a + 1 at the source pixel p (row 2a + or). */
static inline __attribute__((always_inline)) void blk2_colsum(const __m512 *wr, const float *p,
                                                              int64_t rl, __m512 *va, __m512 *vb) {
    const __m512 x0 = _mm512_loadu_ps(p), x1 = _mm512_loadu_ps(p + rl),
                 x2 = _mm512_loadu_ps(p + 2 * rl), x3 = _mm512_loadu_ps(p + 3 * rl),
                 x4 = _mm512_loadu_ps(p + 4 * rl), x5 = _mm512_loadu_ps(p + 5 * rl);
    __m512 a = _mm512_fmadd_ps(wr[0], x0, _mm512_setzero_ps());
    __m512 b = _mm512_fmadd_ps(wr[0], x2, _mm512_setzero_ps());
    a = _mm512_fmadd_ps(wr[1], x1, a);
    b = _mm512_fmadd_ps(wr[1], x3, b);
    a = _mm512_fmadd_ps(wr[2], x2, a);
    b = _mm512_fmadd_ps(wr[2], x4, b);
    *va = _mm512_fmadd_ps(wr[3], x3, a);
    *vb = _mm512_fmadd_ps(wr[3], x5, b);
}

static inline __attribute__((always_inline)) __m512 blk2_sum4(const __m512 *wc, __m512 v0,
                                                              __m512 v1, __m512 v2, __m512 v3) {
    __m512 a = _mm512_fmadd_ps(wc[0], v0, _mm512_setzero_ps());
    a = _mm512_fmadd_ps(wc[1], v1, a);
    a = _mm512_fmadd_ps(wc[2], v2, a);
    return _mm512_fmadd_ps(wc[3], v3, a);
}

/* Channels [c, c + 16 * NV) of the columns [ac.qlo, ac.qhi) of the rows
 * d0, d1 (a, a + 1); r0 is source row 2a + or. NV is 1 or 4 (a literal:
 * the arrays below then live in registers). */
static inline __attribute__((always_inline)) void blk2_group(const fast_job *j,
                                                             const float *r0, float *d0,
                                                             float *d1, int64_t c, const int NV) {
    const int64_t C = j->C, rl = j->SW * C;
    const rs_aff *ac = &j->ac;
    __m512 wr[4], wc[4];
    for (int k = 0; k < 4; k++) {
        wr[k] = _mm512_set1_ps(j->ar.aw[0][k]);
        wc[k] = _mm512_set1_ps(ac->aw[0][k]);
    }
    __m512 a0[4], a1[4], b0[4], b1[4]; /* the last two column sums of each row */
    const float *p = r0 + (2 * ac->qlo + ac->aoff[0][0]) * C + c;
    for (int v = 0; v < NV; v++) {
        blk2_colsum(wr, p + 16 * v, rl, &a0[v], &b0[v]);
        blk2_colsum(wr, p + C + 16 * v, rl, &a1[v], &b1[v]);
    }
    for (int64_t b = ac->qlo; b < ac->qhi; b++, p += 2 * C) {
        for (int v = 0; v < NV; v++) {
            __m512 a2, a3, b2, b3;
            blk2_colsum(wr, p + 2 * C + 16 * v, rl, &a2, &b2);
            blk2_colsum(wr, p + 3 * C + 16 * v, rl, &a3, &b3);
            _mm512_storeu_ps(d0 + b * C + c + 16 * v, blk2_sum4(wc, a0[v], a1[v], a2, a3));
            _mm512_storeu_ps(d1 + b * C + c + 16 * v, blk2_sum4(wc, b0[v], b1[v], b2, b3));
            a0[v] = a2;
            a1[v] = a3;
            b0[v] = b2;
            b1[v] = b3;
        }
    }
}

/* Column b outside the affine run of the rows d0, d1 (a, a + 1; r0 is
 * source row 2a + or): FMAs of its entries' column sums from +0, as
 * nhwc_taps combines the lazy path's combined row for 3 to
 * RS_MAX_PIXEL_TAPS entries (fast_run checks the count), so the bits are
 * the lazy path's. */
static void blk2_edge(const fast_job *j, const float *r0, int64_t b, float *d0, float *d1) {
    const int64_t C = j->C, rl = j->SW * C;
    const int64_t e0 = j->tw.start[b], e1 = j->tw.start[b + 1];
    __m512 wr[4];
    for (int k = 0; k < 4; k++) wr[k] = _mm512_set1_ps(j->ar.aw[0][k]);
    for (int64_t c = 0; c < C; c += 16) {
        __m512 y0 = _mm512_setzero_ps(), y1 = y0;
        for (int64_t e = e0; e < e1; e++) {
            __m512 u0, u1;
            blk2_colsum(wr, r0 + (int64_t)j->tw.idx[e] * C + c, rl, &u0, &u1);
            const __m512 w = _mm512_set1_ps(j->tw.w[e]);
            y0 = _mm512_fmadd_ps(w, u0, y0);
            y1 = _mm512_fmadd_ps(w, u1, y1);
        }
        _mm512_storeu_ps(d0 + c, y0);
        _mm512_storeu_ps(d1 + c, y1);
    }
}

/* Destination rows a and a + 1 of an image (s: its source, d0: row a)
 * by Note [Separable 4x4 blocks]. */
static void nhwc_blk2_rows(const fast_job *j, const float *s, int64_t a, float *d0) {
    const int64_t C = j->C, rowlen = j->SW * C, DW = j->DW;
    const float *r0 = s + (2 * a + j->ar.aoff[0][0]) * rowlen;
    int64_t c = 0;
    for (; c + 64 <= C; c += 64) blk2_group(j, r0, d0, d0 + DW * C, c, 4);
    for (; c < C; c += 16) blk2_group(j, r0, d0, d0 + DW * C, c, 1);
    /* the edge columns after the middle (their source lines are then in
     * cache), from the same column sums */
    for (int64_t b = 0; b < j->ac.qlo; b++) blk2_edge(j, r0, b, d0 + b * C, d0 + (DW + b) * C);
    for (int64_t b = j->ac.qhi; b < DW; b++) blk2_edge(j, r0, b, d0 + b * C, d0 + (DW + b) * C);
}
#endif

static void fast_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const fast_job *j = ctx;
    const int64_t C = j->C, rowlen = j->SW * C;
    float tbuf[RS_TROW];
    float dbuf[RS_DROW];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / j->DH, a = r % j->DH;
        const float *s = j->src + n * j->SH * rowlen;
        float *drow = j->dst + r * j->DW * C;
        const int64_t h0 = j->th.start[a], h1 = j->th.start[a + 1];
#if RS_NHWC_AFFINE
        if (j->blk2 && a >= j->ar.qlo && a + 1 < j->ar.qhi && r + 1 < end) {
            nhwc_blk2_rows(j, s, a, drow);
            r++;
            continue;
        }
#endif
        if (rowlen <= RS_TROW) {
            const float *row = tbuf;
            /* the source rows of the next destination row (same image) past
             * this row's last one: read from DRAM, prefetched meanwhile */
            const float *pf[RS_PF_ROWS];
            int npf = 0;
            if (a + 1 < j->DH && h1 > h0) {
                int32_t last = j->th.idx[h0];
                for (int64_t e = h0; e < h1; e++) last = j->th.idx[e] > last ? j->th.idx[e] : last;
                for (int64_t e = j->th.start[a + 1]; e < j->th.start[a + 2] && npf < RS_PF_ROWS; e++)
                    if (j->th.idx[e] > last) pf[npf++] = s + j->th.idx[e] * rowlen;
            }
            const bool one = h1 - h0 == 1 && j->th.w[h0] == 1.0f;
#if RS_NHWC_FUSED2
            if (j->fused2 && h1 - h0 == 2) {
                nhwc_cols_fused2(j, s + j->th.idx[h0] * rowlen, s + j->th.idx[h0 + 1] * rowlen,
                                 j->th.w[h0], j->th.w[h0 + 1], drow);
                continue;
            }
#endif
            /* the general columns take the combined row as they go */
            const bool lazy = !one && !j->wkind;
            if (one) row = s + j->th.idx[h0] * rowlen;
            else if (!lazy) nhwc_taps(&j->th, h0, h1, s, rowlen, rowlen, tbuf, pf, npf);
#if RS_HAVE_V8
            if (j->wkind) { /* uniform columns, C % 8 == 0 */
                nhwc_cols_uniform(j, row, drow);
                continue;
            }
#endif
            /* streaming: the row is built in dbuf (cache), then stored */
            float *d = j->stream ? dbuf : drow;
            rs_lazy lz = {h0, h1, rowlen, 0, s, tbuf, pf, npf};
            nhwc_cols(j, row, d, lazy ? &lz : NULL);
            if (j->stream) rs_stream_copy(drow, dbuf, j->DW * C);
            continue;
        }
        for (int64_t b = 0; b < j->DW; b++) {
            float *restrict d = drow + b * C;
            const int64_t w0 = j->tw.start[b], w1 = j->tw.start[b + 1];
            for (int64_t c = 0; c < C; c++) {
                float acc = 0.0f;
                for (int64_t e = h0; e < h1; e++)
                    for (int64_t f = w0; f < w1; f++)
                        acc += j->th.w[e] * j->tw.w[f] *
                               s[(j->th.idx[e] * j->SW + j->tw.idx[f]) * C + c];
                d[c] = acc;
            }
        }
    }
#if RS_HAVE_STREAM
    if (j->stream) _mm_sfence(); /* the streamed rows before the join */
#endif
}

/* Runs the fast path for a rank-4 F32 call, packed in nhwc ? CHANNELS_LAST :
 * CONTIGUOUS; false when it does not apply (or the tables cannot be
 * allocated), so the caller runs the reference. */
static bool fast_run(const mft_kernel_args *a, bool backward, bool nhwc) {
    const mft_interp_params *p = a->params;
    const mft_tensor *src = a->inputs[0], *dst = a->outputs[0];
    if (src->ndim != 4 || p->mode == MFT_INTERP_TRILINEAR || p->mode == MFT_INTERP_LINEAR)
        return false;
    const mft_format f = nhwc ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
    if (!mft_tensor_is_contiguous(src, f) || !mft_tensor_is_contiguous(dst, f)) return false;
    if (dst->numel == 0) return true;
    const mft_tensor *xt = backward ? dst : src, *yt = backward ? src : dst;
    const int64_t inH = xt->sizes[2], inW = xt->sizes[3], outH = yt->sizes[2], outW = yt->sizes[3];
    const int64_t eh = gtab_entries(p, inH, outH), ew = gtab_entries(p, inW, outW);
    const int64_t nh = (backward ? inH : outH) + 1, nw = (backward ? inW : outW) + 1;
    const size_t bytes = (size_t)(nh + nw) * sizeof(int64_t) +
                         (size_t)(eh + ew) * (sizeof(int32_t) + sizeof(float));
    char *mem = mft__alloc(bytes, 64);
    if (!mem) return false;
    fast_job j;
    int64_t *ip = (int64_t *)(void *)mem;
    j.th.start = ip;
    j.tw.start = ip + nh;
    int32_t *xp = (int32_t *)(void *)(ip + nh + nw);
    j.th.idx = xp;
    j.tw.idx = xp + eh;
    float *fp = (float *)(void *)(xp + eh + ew);
    j.th.w = fp;
    j.tw.w = fp + eh;
    gtab_fill(&j.th, p, inH, outH, backward);
    gtab_fill(&j.tw, p, inW, outW, backward);
    run_find(&j.tw, nw - 1, &j.ac);
    run_find(&j.th, nh - 1, &j.ar);
    j.dup2 = j.ac.kw == 1 && j.ac.klo == 0 && j.ac.khi == nw - 1 && (nw - 1) % 2 == 0;
    for (int64_t b = 0; b < nw - 1 && j.dup2; b++)
        j.dup2 = j.tw.idx[b] == b / 2 && j.tw.w[b] == 1.0f;
    if (!nhwc && !j.dup2 && !affine_find(&j.tw, &j.ac, 2, 1) && !affine_find(&j.tw, &j.ac, 1, 2))
        affine_find(&j.tw, &j.ac, 1, 1);
    j.src = (const float *)(const void *)mft__tensor_ptr(src);
    j.dst = (float *)(void *)mft__tensor_ptr(dst);
    j.N = dst->sizes[0];
    j.C = dst->sizes[1];
    j.SH = src->sizes[2];
    j.SW = src->sizes[3];
    j.DH = dst->sizes[2];
    j.DW = dst->sizes[3];
    j.stream = false;
#if RS_HAVE_STREAM
    j.stream = nhwc && j.DW * j.C <= RS_DROW && j.SW * j.C <= RS_TROW &&
               dst->numel * (int64_t)sizeof(float) / mft_num_threads() >= RS_STREAM_MIN;
#endif
    j.wkind = 0;
#if RS_HAVE_V8
    if (nhwc && j.C % 8 == 0 && j.SW * j.C <= RS_TROW) {
        bool one = true, two = true;
        for (int64_t b = 0; b < j.DW; b++) {
            const int64_t e = j.tw.start[b], k = j.tw.start[b + 1] - e;
            one = one && k == 1 && j.tw.w[e] == 1.0f;
            two = two && k == 2;
        }
        j.wkind = one ? 1 : two ? 2 : 0;
    }
#endif
#if RS_NHWC_AFFINE
    /* NHWC columns of one affine form (P = 1, K = 4: the bilinear backward
     * of an x2 upsample), 16-channel vectors */
    if (nhwc && !j.wkind && j.ac.kw == 4 && j.C % 16 == 0 && j.SW * j.C <= RS_TROW &&
        !affine_find(&j.tw, &j.ac, 1, 2))
        affine_find(&j.tw, &j.ac, 1, 1);
#endif
    j.fused2 = false;
#if RS_NHWC_FUSED2
    j.fused2 = nhwc && j.wkind == 2 && j.C % 16 == 0 &&
               (!j.stream || ((uintptr_t)j.dst & 63u) == 0);
#endif
    /* rows and columns in affine runs of P = 1, S = 2, K = 4 consecutive
     * entries: Note [Separable 4x4 blocks] */
    j.blk2 = false;
#if RS_NHWC_AFFINE
    if (nhwc && !j.stream && j.ac.ap == 1 && j.ac.as == 2 && j.ar.kw == 4 &&
        affine_find(&j.th, &j.ar, 1, 2)) {
        j.blk2 = true;
        for (int k = 1; k < 4; k++)
            j.blk2 = j.blk2 && j.ac.aoff[0][k] == j.ac.aoff[0][0] + k &&
                     j.ar.aoff[0][k] == j.ar.aoff[0][0] + k;
        for (int64_t b = 0; b < j.DW; b++) { /* blk2_edge's columns */
            const int64_t k = j.tw.start[b + 1] - j.tw.start[b];
            if (b < j.ac.qlo || b >= j.ac.qhi) j.blk2 = j.blk2 && k >= 3 && k <= RS_MAX_PIXEL_TAPS;
        }
    }
#endif
#if RS_HAVE_STREAM
    /* aligned rows for the uniform path's streaming stores */
    if (j.stream && j.wkind && ((uintptr_t)j.dst & 31u) != 0) j.stream = false;
#endif
    /* work per destination row: its elements times the average taps */
    const int64_t taps_h = (eh + nh - 2) / (nh - 1), taps_w = (ew + nw - 2) / (nw - 1);
    int64_t work = j.DW * (nhwc ? j.C : 1) * taps_h * taps_w;
    int64_t grain = 32768 / (work > 0 ? work : 1);
    if (grain < 1) grain = 1;
    if (nhwc) mft__parallel_for(0, j.N * j.DH, grain, fast_nhwc_range, &j);
    else mft__parallel_for(0, j.N * j.C * j.DH, grain, fast_nchw_range, &j);
    mft__free(mem);
    return true;
}

/* Registered under CONTIGUOUS / CHANNELS_LAST F32.
 *   forward:  x (N, C, H, W) -> y (N, C, OH, OW)
 *   backward: grad_out (N, C, OH, OW) -> grad_x (N, C, H, W)
 * both packed NCHW (physical N, C, H, W) or NHWC (physical N, H, W, C).
 * Rank-4 nearest, nearest-exact, bilinear and bicubic take the gather path;
 * linear (rank 3) and trilinear (rank 5), and nearest of rank 3 / 5, run the
 * reference on the already packed tensors. */
static void interpolate_nchw_f32(const mft_kernel_args *a) {
    if (!fast_run(a, false, false)) mft__interpolate_ref_F32(a);
}
static void interpolate_nhwc_f32(const mft_kernel_args *a) {
    if (!fast_run(a, false, true)) mft__interpolate_ref_F32(a);
}
static void interpolate_backward_nchw_f32(const mft_kernel_args *a) {
    if (!fast_run(a, true, false)) mft__interpolate_backward_ref_F32(a);
}
static void interpolate_backward_nhwc_f32(const mft_kernel_args *a) {
    if (!fast_run(a, true, true)) mft__interpolate_backward_ref_F32(a);
}

/* ---------------------------------------------------------------- kernel table
 * First match wins: the fast F32 kernels shadow the CONTIGUOUS F32 reference
 * (listed for the registry; the tests call it through mft__interp_reference
 * and through this table). The ANY references read any strides: they serve
 * F64 in CHANNELS_LAST (and any other layout) without a conversion. */
const mft__kernel_def mft__kernels_resize[] = {
    {MFT__OP_INTERPOLATE, MFT_CONTIGUOUS, MFT_F32, "interpolate.nchw.f32", interpolate_nchw_f32},
    {MFT__OP_INTERPOLATE, MFT_CHANNELS_LAST, MFT_F32, "interpolate.nhwc.f32", interpolate_nhwc_f32},
    {MFT__OP_INTERPOLATE, MFT_CONTIGUOUS, MFT_F32, "interpolate.ref.f32", mft__interpolate_ref_F32},
    {MFT__OP_INTERPOLATE, MFT_CONTIGUOUS, MFT_F64, "interpolate.ref.f64", mft__interpolate_ref_F64},
    {MFT__OP_INTERPOLATE, MFT_FORMAT_ANY, MFT_F32, "interpolate.ref.f32", mft__interpolate_ref_F32},
    {MFT__OP_INTERPOLATE, MFT_FORMAT_ANY, MFT_F64, "interpolate.ref.f64", mft__interpolate_ref_F64},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "interpolate_backward.nchw.f32",
     interpolate_backward_nchw_f32},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "interpolate_backward.nhwc.f32",
     interpolate_backward_nhwc_f32},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "interpolate_backward.ref.f32",
     mft__interpolate_backward_ref_F32},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "interpolate_backward.ref.f64",
     mft__interpolate_backward_ref_F64},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_FORMAT_ANY, MFT_F32, "interpolate_backward.ref.f32",
     mft__interpolate_backward_ref_F32},
    {MFT__OP_INTERPOLATE_BACKWARD, MFT_FORMAT_ANY, MFT_F64, "interpolate_backward.ref.f64",
     mft__interpolate_backward_ref_F64},
    {0, 0, 0, NULL, NULL},
};
