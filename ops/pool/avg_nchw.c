/* ops/pool/avg_nchw.c — average pooling on NCHW (CONTIGUOUS) F32 buffers,
 * forward and backward, each (n, c) plane on its own: the 2-D forward by
 * output rows (window sums over the valid output ranges, register blocks
 * of 8 outputs at stride 1, per-column divisors tabled), the rank-generic
 * forward (3-D, adaptive avg) from column sums of the window rows, and the
 * backward gathered per grad_x row (per-dim 1/divisor factors), or scattered
 * per plane for rows wider than PM_TAB; global pooling (adaptive to one
 * output per plane) has its own forward and backward. */
#include "pool_internal.h"

/* Largest OW whose per-column divisor tables the 2-D forward keeps on the
 * stack (else per-output divisors). */
#define POOL_TAB 1024
/* Widest row whose column sums the rank-generic forward keeps on the stack. */
#define PM_CS_W 2048

/* ---------------------------------------------------------------- 2-D forward
 * One output row (plane, oh) at a time: for each window row and column the
 * valid outputs of the row form a range, and the update over it is a
 * unit-stride loop over W when the stride is 1 (max_nchw.c has its max
 * twin). */
static inline void nchw_sum_row(const float *in, float *out, int64_t W, int64_t OW, int64_t kw_n,
                                int64_t s, int64_t pad) {
    for (int64_t kw = 0; kw < kw_n; kw++) {
        int64_t off = kw - pad, lo, hi;
        col_range(OW, W, s, off, &lo, &hi);
        for (int64_t o = lo; o < hi; o++) out[o] += in[o * s + off];
    }
}

/* Window sums of one output row at stride 1: out[o] = sum over ih in [h0,
 * h1), then kw, of the valid in[ih][o - pad + kw], in that order (the order
 * of nchw_sum_row's passes). Outputs [ilo, ihi) have all their taps inside
 * the row: 8 (or 2 x 8) at a time with the sums in registers, the last
 * block overlapping the previous one (same values); the edges one by one. */
static inline float avg_nchw_sum1(const float *in, int64_t W, int64_t kW, int64_t pad,
                                  int64_t h0, int64_t h1, int64_t o) {
    float acc = 0.0f;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t kw = 0; kw < kW; kw++) {
            const int64_t c = o - pad + kw;
            if (c >= 0 && c < W) acc += in[ih * W + c];
        }
    return acc;
}

#if POOL_HAVE_V8
static inline void avg_nchw_block8(const float *in, float *out, int64_t W, int64_t kW,
                                   int64_t pad, int64_t h0, int64_t h1, int64_t o, int nb) {
    pool_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0}, a1 = a0;
    for (int64_t ih = h0; ih < h1; ih++) {
        const float *r = in + ih * W + o - pad;
        for (int64_t kw = 0; kw < kW; kw++) {
            pool_v8 v0, v1;
            memcpy(&v0, r + kw, sizeof v0);
            a0 += v0;
            if (nb == 2) {
                memcpy(&v1, r + kw + 8, sizeof v1);
                a1 += v1;
            }
        }
    }
    memcpy(out + o, &a0, sizeof a0);
    if (nb == 2) memcpy(out + o + 8, &a1, sizeof a1);
}
#endif

static inline void avg_nchw_sums_s1(const float *in, float *out, int64_t W, int64_t OW,
                                    int64_t kW, int64_t pad, int64_t h0, int64_t h1) {
    int64_t ilo = pad < OW ? pad : OW, ihi = W - kW + 1 + pad;
    if (ihi > OW) ihi = OW;
    if (ihi < ilo) ihi = ilo;
    int64_t o = 0;
#if POOL_HAVE_V8
    if (ihi - ilo >= 8) {
        for (; o < ilo; o++) out[o] = avg_nchw_sum1(in, W, kW, pad, h0, h1, o);
        for (; o + 16 <= ihi; o += 16) avg_nchw_block8(in, out, W, kW, pad, h0, h1, o, 2);
        for (; o + 8 <= ihi; o += 8) avg_nchw_block8(in, out, W, kW, pad, h0, h1, o, 1);
        if (o < ihi) avg_nchw_block8(in, out, W, kW, pad, h0, h1, ihi - 8, 1);
        o = ihi;
    }
#endif
    for (; o < OW; o++) out[o] = avg_nchw_sum1(in, W, kW, pad, h0, h1, o);
}

static void avg_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t sW = p->stride[1], pW = p->padding[1];
    /* W-dim windows tabled (count, padded extent) when OW <= POOL_TAB */
    int64_t wcnt[POOL_TAB], wpad[POOL_TAB], last_hc = -1, last_ph = -1;
    float fdiv[POOL_TAB];
    const bool tab = j->OW <= POOL_TAB;
    for (int64_t ow = 0; tab && ow < j->OW; ow++) {
        int64_t w0, w1;
        avg_window(ow, j->W, p->kernel[1], sW, pW, &w0, &w1, &wpad[ow]);
        wcnt[ow] = w1 - w0 > 0 ? w1 - w0 : 0;
    }
    for (int64_t r = begin; r < end; r++) {
        const int64_t plane = r / j->OH, oh = r % j->OH;
        const float *in = j->x + plane * j->H * j->W;
        float *out = j->y + r * j->OW;
        int64_t h0, h1, ph;
        avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        if (sW == 1) {
            avg_nchw_sums_s1(in, out, j->W, j->OW, p->kernel[1], pW, h0, h1);
        } else {
            for (int64_t ow = 0; ow < j->OW; ow++) out[ow] = 0.0f;
            for (int64_t ih = h0; ih < h1; ih++)
                nchw_sum_row(in + ih * j->W, out, j->W, j->OW, p->kernel[1], sW, pW);
        }
        if (tab) {
            /* divisors of the row as floats, recomputed when the H-dim
             * window changes; an empty window's sum is 0 and gets 1 (0 / 1
             * = 0, as below): one vectorisable pass of divisions */
            if (h1 - h0 != last_hc || ph != last_ph) {
                last_hc = h1 - h0;
                last_ph = ph;
                for (int64_t ow = 0; ow < j->OW; ow++) {
                    const int64_t div = avg_divisor(p, h0, h1, ph, 0, wcnt[ow], wpad[ow]);
                    fdiv[ow] = div ? (float)div : 1.0f;
                }
            }
            for (int64_t ow = 0; ow < j->OW; ow++) out[ow] /= fdiv[ow];
            continue;
        }
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1, pw;
            avg_window(ow, j->W, p->kernel[1], sW, pW, &w0, &w1, &pw);
            int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
            out[ow] = div ? out[ow] / (float)div : 0.0f;
        }
    }
}

void mft__pool_avg_pool2d_nchw(const mft_kernel_args *a) {
    pool_job j = pool_job_of(a, false);
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.C * j.OH, pool_grain(work), avg_nchw_range, &j);
}

/* ---------------------------------------------------------------- rank-generic forward */
/* Sum of n consecutive floats: runs of 64 or more with 32 partial sums
 * (independent vector accumulators), shorter ones in order. */
static inline float pm_sum_f32(const float *p, int64_t n) {
    if (n < 64) { /* short runs (window rows) */
        float t = 0;
        for (int64_t i = 0; i < n; i++) t += p[i];
        return t;
    }
    float acc[32];
    for (int k = 0; k < 32; k++) acc[k] = 0.0f;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 32; k++) acc[k] += p[i + k];
    float t = 0;
    for (; i < n; i++) t += p[i];
    for (int w = 16; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0] + t;
}

/* x (N,C,D,H,W) packed -> y (N,C,OD,OH,OW) packed; one output row (n, c, od,
 * oh) per work item. */
static void pm_avg_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    /* row r = ((plane * OD) + od) * OH + oh */
    PM_FOR_ROWS(r, begin, end, plane, od, OD, oh, OH) {
        const float *in = j->x + plane * D * H * W;
        float *out = j->y + r * OW;
        int64_t d0, d1, ed, h0, h1, eh;
        pm_win(g, 0, od, &d0, &d1, &ed);
        pm_win(g, 1, oh, &h0, &h1, &eh);
        /* windows narrower than the rows: the row's column sums over its
         * (d, h) window rows once (vectorised over W, rows in order), then
         * each output sums its columns (the sums grouped by column, not in
         * row order: equal up to rounding) */
        if (OW > 1 && W <= PM_CS_W) {
            float cs[PM_CS_W];
            for (int64_t iw = 0; iw < W; iw++) cs[iw] = 0.0f;
            for (int64_t id = d0; id < d1; id++)
                for (int64_t ih = h0; ih < h1; ih++) {
                    const float *restrict row = in + (id * H + ih) * W;
                    for (int64_t iw = 0; iw < W; iw++) cs[iw] += row[iw];
                }
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0, w1, ew;
                pm_win(g, 2, ow, &w0, &w1, &ew);
                float sum = 0.0f;
                for (int64_t iw = w0; iw < w1; iw++) sum += cs[iw];
                const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
                const int64_t div = pm_divisor(g, cnt, ext);
                out[ow] = div && w1 > w0 ? sum / (float)div : 0.0f;
            }
            continue;
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1, ew;
            pm_win(g, 2, ow, &w0, &w1, &ew);
            float s = 0;
            if (w1 > w0 && w0 == 0 && w1 == W) /* whole rows: one run per d */
                for (int64_t id = d0; id < d1; id++)
                    s += h1 > h0 ? pm_sum_f32(in + (id * H + h0) * W, (h1 - h0) * W) : 0.0f;
            else if (w1 > w0)
                for (int64_t id = d0; id < d1; id++)
                    for (int64_t ih = h0; ih < h1; ih++)
                        s += pm_sum_f32(in + (id * H + ih) * W + w0, w1 - w0);
            const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
            int64_t div = pm_divisor(g, cnt, ext);
            out[ow] = div ? s / (float)div : 0.0f;
        }
    }
}

/* NCHW adaptive avg forward to one output per plane (global pooling):
 * x (N,C,D,H,W) packed -> y (N,C,1,1,1); work item q = planes [4q, 4q+4),
 * summed side by side (4 read streams) with two 8-lane accumulators each;
 * a plane's sum does not depend on the grouping. */
static void pm_fwd_nchw_global(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t P = g->in[0] * g->in[1] * g->in[2], NP = g->N * g->C;
    const int64_t cnt[3] = {g->in[0], g->in[1], g->in[2]};
    const int64_t div = pm_divisor(g, cnt, cnt);
    for (int64_t q = begin; q < end; q++) {
        const int64_t p0 = 4 * q, np = NP - p0 < 4 ? NP - p0 : 4;
        float sum[4];
        int64_t i = 0;
#if PM_HAVE_V8
        if (np == 4) {
            const float *x0 = j->x + p0 * P, *x1 = x0 + P, *x2 = x1 + P, *x3 = x2 + P;
            pool_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0}, b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0,
                  a3 = a0, b3 = a0;
            for (; i + 16 <= P; i += 16) {
                a0 += pm_ld8(x0 + i);
                b0 += pm_ld8(x0 + i + 8);
                a1 += pm_ld8(x1 + i);
                b1 += pm_ld8(x1 + i + 8);
                a2 += pm_ld8(x2 + i);
                b2 += pm_ld8(x2 + i + 8);
                a3 += pm_ld8(x3 + i);
                b3 += pm_ld8(x3 + i + 8);
            }
            const pool_v8 v[4] = {a0 + b0, a1 + b1, a2 + b2, a3 + b3};
            for (int k = 0; k < 4; k++)
                sum[k] = ((v[k][0] + v[k][4]) + (v[k][1] + v[k][5])) +
                         ((v[k][2] + v[k][6]) + (v[k][3] + v[k][7]));
        } else
#endif
        {
            for (int64_t k = 0; k < np; k++) sum[k] = 0.0f;
        }
        for (int64_t k = 0; k < np; k++) {
            const float *x = j->x + (p0 + k) * P;
            float t = 0.0f;
            for (int64_t e = i; e < P; e++) t += x[e];
            const float s = sum[k] + t;
            j->y[p0 + k] = div ? s / (float)div : 0.0f;
        }
    }
}

static void pm_avg_nchw(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    if (g->kind == PM_ADAPT && g->out[0] == 1 && g->out[1] == 1 && g->out[2] == 1) {
        const int64_t P = g->in[0] * g->in[1] * g->in[2];
        mft__parallel_for(0, (g->N * g->C + 3) / 4, pool_grain(4 * P), pm_fwd_nchw_global, &j);
        return;
    }
    pm_fwd_rows(g, &j, false, pm_avg_nchw_range);
}

PM_FWD_ENTRY(mft__pool_avg_pool3d_nchw, PM_AVG, pm_geom_p3(&g, a->params), pm_avg_nchw)
PM_FWD_ENTRY(mft__pool_adaptive_avg_nchw, PM_ADAPT, (void)0, pm_avg_nchw)

/* ---------------------------------------------------------------- backward
 * (avg_pool2d_backward, avg_pool3d_backward, adaptive_avg_pool2d/3d_backward:
 * grad_out; params: the forward's, or the adaptive output size) */
/* NCHW avg / adaptive avg backward: grad_out (N,C,OD,OH,OW) packed ->
 * grad_x (N,C,D,H,W) packed; one (n, c) plane per work item: zero it, then
 * add grad_out / divisor over each output's window (unit-stride rows). */
static void pm_avgbwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const int64_t P = g->in[0] * H * W, OP = OD * OH * OW;
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * P;
        const float *go = j->x + pl * OP;
        memset(gx, 0, (size_t)P * sizeof *gx);
        for (int64_t od = 0; od < OD; od++) {
            int64_t d0, d1, cnt[3], ext[3];
            pm_win(g, 0, od, &d0, &d1, &ext[0]);
            cnt[0] = d1 - d0;
            for (int64_t oh = 0; oh < OH; oh++) {
                int64_t h0, h1;
                pm_win(g, 1, oh, &h0, &h1, &ext[1]);
                cnt[1] = h1 - h0;
                const float *grow = go + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t w0, w1;
                    pm_win(g, 2, ow, &w0, &w1, &ext[2]);
                    cnt[2] = w1 - w0;
                    const int64_t div = pm_divisor(g, cnt, ext);
                    if (!div) continue;
                    const float v = grow[ow] / (float)div;
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++) {
                            float *row = gx + (id * H + ih) * W;
                            for (int64_t iw = w0; iw < w1; iw++) row[iw] += v;
                        }
                }
            }
        }
    }
}

/* NCHW avg / adaptive avg backward by gathering, when OW and W are at most
 * PM_TAB: grad_out (N,C,OD,OH,OW) packed -> grad_x (N,C,D,H,W) packed; one
 * grad_x row (n, c, d, h) per work item, written once. The divisor is a
 * product of per-dim factors (or the override), so per row
 * t[ow] = sum over the (od, oh) windows holding (d, h) of
 * grad_out[od, oh, ow] / (f_d f_h f_w[ow]) (a unit-stride loop), then t is
 * spread over the row's columns (unit-stride adds). */
static void pm_avgbwd_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const bool ovr = g->kind != PM_ADAPT && g->divisor_override != 0;
    const bool use_ext = g->kind == PM_AVG && g->count_include_pad && !ovr;
    float rw[PM_TAB], tmp[PM_TAB];
    int64_t ww0[PM_TAB], ww1[PM_TAB];
    for (int64_t ow = 0; ow < OW; ow++) {
        int64_t ext;
        pm_win(g, 2, ow, &ww0[ow], &ww1[ow], &ext);
        const int64_t cw = ww1[ow] - ww0[ow];
        rw[ow] = cw <= 0 ? 0.0f : ovr ? 1.0f : 1.0f / (float)(use_ext ? ext : cw);
    }
    const int64_t sW = g->s[2], kW = g->k[2], pW = g->p[2];
    const float scale = ovr ? 1.0f / (float)g->divisor_override : 1.0f;
    /* H-dim tables (oh range of each ih; count and extent of each oh) */
    int64_t hr0[PM_TAB], hr1[PM_TAB], hc[PM_TAB], he[PM_TAB];
    const bool htab = H <= PM_TAB && OH <= PM_TAB;
    for (int64_t ih = 0; htab && ih < H; ih++) pm_inv(g, 1, ih, &hr0[ih], &hr1[ih]);
    for (int64_t oh = 0; htab && oh < OH; oh++) {
        int64_t b0, b1;
        pm_win(g, 1, oh, &b0, &b1, &he[oh]);
        hc[oh] = b1 - b0;
    }
    int64_t dc[PM_TAB], de[PM_TAB];
    const bool dtab = OD <= PM_TAB;
    for (int64_t od = 0; dtab && od < OD; od++) {
        int64_t a0, a1;
        pm_win(g, 0, od, &a0, &a1, &de[od]);
        dc[od] = a1 - a0;
    }
    int64_t last_id = -1, od0 = 0, od1 = 0;
    int64_t last_plane = -1, last_tid = -1, last_oh0 = -1, last_oh1 = -1;
    /* row r = ((plane * D) + id) * H + ih */
    PM_FOR_ROWS(r, begin, end, plane, id, D, ih, H) {
        const float *go = j->x + plane * OD * OH * OW;
        int64_t oh0, oh1;
        if (id != last_id) {
            pm_inv(g, 0, id, &od0, &od1);
            last_id = id;
        }
        if (htab) {
            oh0 = hr0[ih];
            oh1 = hr1[ih];
        } else {
            pm_inv(g, 1, ih, &oh0, &oh1);
        }
        /* consecutive rows of one plane with the same windows share t */
        const bool same = plane == last_plane && id == last_tid && oh0 == last_oh0 &&
                          oh1 == last_oh1;
        last_plane = plane;
        last_tid = id;
        last_oh0 = oh0;
        last_oh1 = oh1;
        if (!same) for (int64_t ow = 0; ow < OW; ow++) tmp[ow] = 0.0f;
        for (int64_t od = same ? od1 : od0; od < od1; od++) {
            int64_t cd, ed;
            if (dtab) {
                cd = dc[od];
                ed = de[od];
            } else {
                int64_t a0, a1;
                pm_win(g, 0, od, &a0, &a1, &ed);
                cd = a1 - a0;
            }
            for (int64_t oh = oh0; oh < oh1; oh++) {
                int64_t ch, eh;
                if (htab) {
                    ch = hc[oh];
                    eh = he[oh];
                } else {
                    int64_t b0, b1;
                    pm_win(g, 1, oh, &b0, &b1, &eh);
                    ch = b1 - b0;
                }
                if (cd <= 0 || ch <= 0) continue;
                const float rdh = ovr ? scale : 1.0f / (float)(use_ext ? ed * eh : cd * ch);
                const float *grow = go + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) tmp[ow] += grow[ow] * (rdh * rw[ow]);
            }
        }
        /* spread t over the row: unit-stride adds per kernel column (avg)
         * or per output window (adaptive) */
        float *out = j->y + r * W;
        if (same) { /* same windows: the previous row's values */
            memcpy(out, out - W, (size_t)W * sizeof *out);
            continue;
        }
        if (g->kind == PM_ADAPT) {
            /* adaptive windows cover [0, W) in order, overlapping only the
             * previous one: add over the overlap, store past it */
            int64_t done = 0;
            for (int64_t ow = 0; ow < OW; ow++) {
                const float v = tmp[ow];
                const int64_t mid = ww1[ow] < done ? ww1[ow] : done;
                for (int64_t iw = ww0[ow]; iw < mid; iw++) out[iw] += v;
                for (int64_t iw = mid > ww0[ow] ? mid : ww0[ow]; iw < ww1[ow]; iw++) out[iw] = v;
                if (ww1[ow] > done) done = ww1[ow];
            }
        } else {
            for (int64_t iw = 0; iw < W; iw++) out[iw] = 0.0f;
            for (int64_t kw = 0; kw < kW; kw++) {
                int64_t lo, hi;
                col_range(OW, W, sW, kw - pW, &lo, &hi);
                float *o = out + (kw - pW);
                if (sW == 1)
                    for (int64_t ow = lo; ow < hi; ow++) o[ow] += tmp[ow];
                else
                    for (int64_t ow = lo; ow < hi; ow++) o[ow * sW] += tmp[ow];
            }
        }
    }
}

/* NCHW adaptive backward to one output per plane (global pooling):
 * grad_out (N,C,1,1,1) -> grad_x (N,C,D,H,W) packed, one plane per work
 * item filled with the value pm_avgbwd_nchw_rows computes for it
 * (0 + g * (1/(D*H) * 1/W)). */
static void pm_avgbwd_nchw_global(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t P = g->in[0] * g->in[1] * g->in[2];
    const float rdh = 1.0f / (float)(g->in[0] * g->in[1]), rw = 1.0f / (float)g->in[2];
    for (int64_t pl = begin; pl < end; pl++) {
        const float v = 0.0f + j->x[pl] * (rdh * rw);
        float *restrict gx = j->y + pl * P;
        int64_t i = 0;
#if PM_HAVE_V8
        const pool_v8 vv = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} + v;
        for (; i + 32 <= P; i += 32)
            for (int k = 0; k < 4; k++) pm_st8(gx + i + 8 * k, vv);
#endif
        for (; i < P; i++) gx[i] = v;
    }
}

static void pm_avgbwd_nchw(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    if (g->kind == PM_ADAPT && g->out[0] == 1 && g->out[1] == 1 && g->out[2] == 1) {
        const int64_t P = g->in[0] * g->in[1] * g->in[2];
        mft__parallel_for(0, g->N * g->C, pool_grain(P), pm_avgbwd_nchw_global, &j);
        return;
    }
    if (g->out[2] <= PM_TAB && g->in[2] <= PM_TAB) {
        const int64_t rows = g->N * g->C * g->in[0] * g->in[1];
        mft__parallel_for(0, rows, pool_grain(g->in[2] * pm_bwd_terms(g)), pm_avgbwd_nchw_rows, &j);
        return;
    }
    const int64_t P = g->in[0] * g->in[1] * g->in[2];
    mft__parallel_for(0, g->N * g->C, pool_grain(P * pm_bwd_terms(g)), pm_avgbwd_nchw_range, &j);
}

PM_BWD_ENTRY(mft__pool_avg_pool2d_backward_nchw, PM_AVG, pm_geom_p2(&g, a->params), pm_avgbwd_nchw)
PM_BWD_ENTRY(mft__pool_avg_pool3d_backward_nchw, PM_AVG, pm_geom_p3(&g, a->params), pm_avgbwd_nchw)
PM_BWD_ENTRY(mft__pool_adaptive_avg_backward_nchw, PM_ADAPT, (void)0, pm_avgbwd_nchw)
