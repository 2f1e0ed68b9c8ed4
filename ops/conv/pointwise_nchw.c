/* ops/conv/pointwise_nchw.c — the fast F32 kernels that read NCHW
 * activations in place with the 6x16 / 6x32 micro-kernels of
 * microkernels.c: pointwise (1x1, stride 1, no padding) forward and
 * backward_input as per-image GEMMs (mft__conv_pointwise_nchw), and NCHW
 * backward_weight of every dense kernel size with grad_y rows read in place
 * and only x transposed (mft__conv_backward_weight_nchw). Called from the
 * NCHW chains of chains.c. */
#include "conv_internal.h"

/* ---------------------------------------------------------------- pointwise NCHW
 * 1x1 kernels with stride 1 and no padding (dst pixel q reads src pixel q),
 * on NCHW buffers without transposes. Forward / backward_input: per image and
 * group Out[M, S] = A[M, K'] @ B[K', S], B and Out NCHW planes (row stride
 * S); forward A = w (M = Cgo, K = Cgi), backward_input A = w^T (M = Cgi,
 * K = Cgo); with a bias, A gets a last column holding it and B a last row of
 * ones (K' = K + 1), so the bias enters the FMA chain exactly. A is packed
 * [G][Mp][K'] (Mp a multiple of 6, zero rows). Work items are (n, group,
 * block of PW_COLS pixels); per 32-pixel panel, B is copied into two [K'][16]
 * blocks (zero padded; the copy of a full block has a constant size, which
 * the compiler turns into vector moves: the variable-size copy became a rep
 * movs that took a third of the time), the next panel's lines are
 * prefetched, and the 6x32 micro-kernel runs with six rows of A as its
 * pointer rows (16-pixel panels and the 6x16 kernel where no 6x32 exists).
 * 8x64x56x56 k64 forward: 1.75-1.83 -> 1.29-1.36 ms at 1 thread (16-pixel
 * panels, 7 loads per 6 FMAs: 0.52 of peak; now 0.66-0.76).
 * NCHW backward_weight (every dense kernel size, pwb_range): only x is
 * transposed to NHWC; items are (group, 16 input channels), each owning
 * acc[tap][Cgo (padded to 6)][16] and summing over (n, od, oh, tap) in order
 * with the 6x16 backward micro-kernel over the tap's valid run of output
 * columns: rows = six grad_y rows (NCHW, contiguous in ow), columns = 16
 * channels of the NHWC x (the buffer has 16 floats of slack for the last
 * channel block; extra columns are discarded). */
#define PW_COLS 128

typedef struct pw_job {
    const cgeom *g;
    const float *src;
    float *dst;
    const float *ap; /* [G][Mp][Kp] */
    int64_t K, Kp, M, Mp, S, srcC, dstC, nsb;
    ind_micro_fn micro;
    ind_micro2_fn micro2; /* NULL: 16-pixel panels only */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} pw_job;

static void pw_range(void *ctx, int64_t begin, int64_t end) {
    const pw_job *j = ctx;
    const int64_t K = j->K, Kp = j->Kp, M = j->M, S = j->S, G = j->g->G;
    /* panel columns: 32 (two [K'][16] blocks, 6x32 tiles) or 16 */
    const int64_t pc = j->micro2 ? 2 * TILE_N : TILE_N, ws = Kp * TILE_N;
    float *panel = mft__alloc((size_t)(Kp * pc) * sizeof(float), 64);
    if (!panel) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(Kp * pc) * sizeof(float));
        return;
    }
    static const float zero32[2 * TILE_N] = {0};
    const int32_t tap0 = 0;
    float tmp[TILE_M * 2 * TILE_N];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / (G * j->nsb), gg = (it / j->nsb) % G, sb = it % j->nsb;
        const int64_t s0 = sb * PW_COLS, s1 = s0 + PW_COLS < S ? s0 + PW_COLS : S;
        const float *b = j->src + (n * j->srcC + gg * K) * S;
        float *o = j->dst + (n * j->dstC + gg * M) * S;
        const float *ag = j->ap + gg * j->Mp * Kp;
        for (int64_t c0 = s0; c0 < s1; c0 += pc) {
            const int64_t cols = s1 - c0 < pc ? s1 - c0 : pc;
            /* block h of the panel holds columns c0 + 16h .. (zero padded) */
            const bool two = cols > TILE_N;
            for (int64_t h = 0; h < (two ? 2 : 1); h++) {
                const int64_t hc = h ? cols - TILE_N : (cols < TILE_N ? cols : TILE_N);
                float *blk = panel + h * ws;
                const float *bs = b + c0 + h * TILE_N;
                if (hc == TILE_N) /* (a constant size: vector moves, not a rep movs) */
                    for (int64_t k = 0; k < K; k++)
                        memcpy(blk + k * TILE_N, bs + k * S, TILE_N * sizeof(float));
                else
                    for (int64_t k = 0; k < K; k++) {
                        float *pr = blk + k * TILE_N;
                        memcpy(pr, bs + k * S, (size_t)hc * sizeof(float));
                        memset(pr + hc, 0, (size_t)(TILE_N - hc) * sizeof(float));
                    }
                if (Kp > K)
                    for (int c = 0; c < TILE_N; c++) blk[K * TILE_N + c] = 1.0f;
            }
            const int64_t width = two ? 2 * TILE_N : TILE_N;
            if (c0 + 2 * pc <= S) /* the next panel's lines, fetched while this one computes */
                for (int64_t k = 0; k < K; k++)
                    for (int64_t h = 0; h < pc; h += TILE_N)
                        __builtin_prefetch(b + k * S + c0 + pc + h, 0, 3);
            for (int64_t m0 = 0; m0 < M; m0 += TILE_M) {
                const int64_t rows = M - m0 < TILE_M ? M - m0 : TILE_M;
                const float *ptrs[TILE_M];
                for (int i = 0; i < TILE_M; i++) ptrs[i] = ag + (m0 + i) * Kp;
                float *out = o + m0 * S + c0;
                const bool direct = rows == TILE_M && cols == width;
                float *orow[TILE_M];
                for (int i = 0; i < TILE_M; i++) orow[i] = direct ? out + i * S : tmp + i * width;
                if (two)
                    j->micro2(1, &tap0, Kp, ptrs, panel, ws, zero32, orow);
                else
                    j->micro(1, &tap0, Kp, ptrs, panel, zero32, orow);
                if (!direct)
                    for (int64_t i = 0; i < rows; i++)
                        memcpy(out + i * S, tmp + i * width, (size_t)cols * sizeof(float));
            }
        }
    }
    mft__free(panel);
}

/* Forward (bwd false) or backward_input of a pointwise conv on NCHW buffers.
 * False (nothing written) when the packed weights cannot be allocated. */
bool mft__conv_pointwise_nchw(const cgeom *g, bool bwd, const float *src, float *dst) {
    pw_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.src = src;
    j.dst = dst;
    j.K = bwd ? g->Cgo : g->Cgi;
    j.M = bwd ? g->Cgi : g->Cgo;
    j.Kp = j.K + (g->bias ? 1 : 0);
    j.Mp = cdiv(j.M, TILE_M) * TILE_M;
    j.S = g->D * g->H * g->W;
    j.srcC = bwd ? g->Cout : g->Cin;
    j.dstC = bwd ? g->Cin : g->Cout;
    j.nsb = cdiv(j.S, PW_COLS);
    j.micro = mft__conv_pick_ind_micro();
    j.micro2 = mft__conv_pick_ind_micro2();
    float *ap = mft__alloc((size_t)(g->G * j.Mp * j.Kp) * sizeof(float) + 64, 64);
    if (!ap) { /* Note [Kernel scratch] */
        mft__kernel_nomem((size_t)(g->G * j.Mp * j.Kp) * sizeof(float) + 64);
        return true;
    }
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    for (int64_t gg = 0; gg < g->G; gg++)
        for (int64_t m = 0; m < j.Mp; m++) {
            float *r = ap + (gg * j.Mp + m) * j.Kp;
            for (int64_t k = 0; k < j.K; k++)
                r[k] = m >= j.M ? 0.0f
                       : bwd    ? wval(g, gg * g->Cgo + k, m, 0)
                                : wval(g, gg * g->Cgo + m, k, 0);
            if (j.Kp > j.K) r[j.K] = m < j.M ? bval(g, gg * j.M + m) : 0.0f;
        }
    j.ap = ap;
    if (g->N * j.S > 0)
        mft__parallel_for_dynamic(0, g->N * g->G * j.nsb, cf_chunk(g->N * g->G * j.nsb), pw_range,
                                  &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    mft__free(ap);
    return true;
}

typedef struct pwb_job {
    const cgeom *g;
    const float *gy; /* NCHW (N, Cout, S) */
    const float *x;  /* NHWC (N, S, Cin), >= 16 floats of slack at the end */
    float *gw;
    const int64_t *gws;
    int64_t nbi;
    bw_micro_fn micro;
    bw_micro2_fn micro2; /* NULL: 16 input channels per call only */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} pwb_job;

static void pwb_range(void *ctx, int64_t begin, int64_t end) {
    const pwb_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = cdiv(g->Cgo, TILE_M) * TILE_M, So = g->OD * g->OH * g->OW;
    const int64_t bpi = j->micro2 ? 2 : 1, nit = cdiv(j->nbi, bpi); /* c_in blocks per item */
    const int64_t blk = T * Mp * TILE_N;
    float *acc = mft__alloc((size_t)(bpi * blk) * sizeof(float), 64);
    if (!acc) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(bpi * blk) * sizeof(float));
        return;
    }
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / nit, cb = (it % nit) * bpi;
        const int64_t nblk = j->nbi - cb < bpi ? j->nbi - cb : bpi;
        const int64_t ci0 = gg * g->Cgi + cb * TILE_N;
        const int64_t cols = g->Cgi - cb * TILE_N < nblk * TILE_N ? g->Cgi - cb * TILE_N
                                                                  : nblk * TILE_N;
        memset(acc, 0, (size_t)(nblk * blk) * sizeof(float));
        const int64_t xs = g->s[2] * g->Cin;
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t od = 0; od < g->OD; od++)
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    const float *gyr =
                        j->gy + (n * g->Cout + gg * g->Cgo) * So + (od * g->OH + oh) * g->OW;
                    for (int64_t t = 0; t < T; t++) {
                        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                      kd = t / (g->K[2] * g->K[1]);
                        const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                        int64_t lo, hi;
                        const int64_t off = kw * g->d[2] - g->p[2];
                        valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
                        if (hi <= lo) continue;
                        const float *xr = j->x + ((n * g->D + id) * g->H + ih) * g->W * g->Cin +
                                          (lo * g->s[2] + off) * g->Cin + ci0;
                        for (int64_t m0 = 0; m0 < g->Cgo; m0 += TILE_M) {
                            const float *rows[TILE_M];
                            for (int i = 0; i < TILE_M; i++) {
                                const int64_t co = m0 + i < g->Cgo ? m0 + i : g->Cgo - 1;
                                rows[i] = gyr + co * So + lo;
                            }
                            float *a0 = acc + (t * Mp + m0) * TILE_N;
                            if (nblk == 2)
                                j->micro2(1, NULL, NULL, hi - lo, rows, 1, xr, xs, a0, a0 + blk);
                            else
                                j->micro(1, NULL, NULL, hi - lo, rows, 1, xr, xs, a0);
                        }
                    }
                }
        for (int64_t co = 0; co < g->Cgo; co++)
            for (int64_t c = 0; c < cols; c++)
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + (cb * TILE_N + c) * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] =
                        acc[(c / TILE_N) * blk + (t * Mp + co) * TILE_N + c % TILE_N];
                }
    }
    mft__free(acc);
}

/* Row-chunked pwb_range (when the accumulators of every c_in block of a group
 * fit in BWC_MAX_ACC bytes): items (group, chunk of BWC_CHUNKS fixed ranges of
 * (n, od, oh) rows) with partials [cb][tap][Mp][16] run every c_in block on a
 * row while it is in L1; pwbc_reduce adds them in chunk order. */
typedef struct pwbc_job {
    const pwb_job *b;
    float *part; /* [G][nch][accn] */
    int64_t nch, rows, accn, Mp;
} pwbc_job;

static void pwbc_range(void *ctx, int64_t begin, int64_t end) {
    const pwbc_job *c = ctx;
    const pwb_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = c->Mp, So = g->OD * g->OH * g->OW, xs = g->s[2] * g->Cin;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / c->nch, ch = it % c->nch;
        const int64_t r0 = ch * c->rows / c->nch, r1 = (ch + 1) * c->rows / c->nch;
        float *acc = c->part + it * c->accn;
        memset(acc, 0, (size_t)c->accn * sizeof(float));
        for (int64_t r = r0; r < r1; r++) {
            const int64_t oh = r % g->OH, od = (r / g->OH) % g->OD, n = r / (g->OH * g->OD);
            const float *gyr = j->gy + (n * g->Cout + gg * g->Cgo) * So + (od * g->OH + oh) * g->OW;
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                int64_t lo, hi;
                const int64_t off = kw * g->d[2] - g->p[2];
                valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
                if (hi <= lo) continue;
                const float *xr0 = j->x + ((n * g->D + id) * g->H + ih) * g->W * g->Cin +
                                   (lo * g->s[2] + off) * g->Cin + gg * g->Cgi;
                for (int64_t m0 = 0; m0 < g->Cgo; m0 += TILE_M) {
                    const float *rows[TILE_M];
                    for (int i = 0; i < TILE_M; i++) {
                        const int64_t co = m0 + i < g->Cgo ? m0 + i : g->Cgo - 1;
                        rows[i] = gyr + co * So + lo;
                    }
                    for (int64_t cb = 0; cb < j->nbi;) {
                        float *a0 = acc + ((cb * T + t) * Mp + m0) * TILE_N;
                        if (j->micro2 && cb + 1 < j->nbi) { /* 32 input channels */
                            j->micro2(1, NULL, NULL, hi - lo, rows, 1, xr0 + cb * TILE_N, xs, a0,
                                      a0 + T * Mp * TILE_N);
                            cb += 2;
                        } else {
                            j->micro(1, NULL, NULL, hi - lo, rows, 1, xr0 + cb * TILE_N, xs, a0);
                            cb++;
                        }
                    }
                }
            }
        }
    }
}

/* items (group, c_in block): grad_w = sum over chunks, in chunk order */
static void pwbc_reduce(void *ctx, int64_t begin, int64_t end) {
    const pwbc_job *c = ctx;
    const pwb_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = c->Mp;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / j->nbi, cb = it % j->nbi;
        const int64_t cols = g->Cgi - cb * TILE_N < TILE_N ? g->Cgi - cb * TILE_N : TILE_N;
        const float *p0 = c->part + gg * c->nch * c->accn + cb * T * Mp * TILE_N;
        for (int64_t co = 0; co < g->Cgo; co++)
            for (int64_t cc = 0; cc < cols; cc++)
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    const int64_t e = (t * Mp + co) * TILE_N + cc;
                    float s = p0[e];
                    for (int64_t ch = 1; ch < c->nch; ch++) s += p0[ch * c->accn + e];
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + (cb * TILE_N + cc) * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] = s;
                }
    }
}

/* NCHW backward_weight with only x transposed and grad_y rows read in place
 * (pwb_range, or the row-chunked pwbc_range): false, having written nothing,
 * where it does not apply (the caller transposes both operands to NHWC);
 * true when done or when scratch was short (reported through
 * mft__kernel_nomem, Note [Kernel scratch]). */
bool mft__conv_backward_weight_nchw(const cgeom *g, const float *gy, const float *x, float *gw,
                                    const int64_t *gws) {
    const int64_t Si = g->D * g->H * g->W;
    const int64_t nitems = g->G * cdiv(g->Cgi, TILE_N);
    /* grad_y in place pays where the row-chunked partials fit; past that
     * (the per-c_in-block items of pwb_range), both operands to NHWC and
     * mft__conv_backward_weight measured faster: 8x256x14x14 k256 3x3 at 1
     * thread 14.0-16.9 -> 10.6-13.5 ms, 8x128x28x28 k128 11.0-13.5 ->
     * 10.4-11.4 */
    const int64_t accn = g->T * cdiv(g->Cgi, TILE_N) * cdiv(g->Cgo, TILE_M) * TILE_M * TILE_N;
    const bool chunked = g->N * g->OD * g->OH >= BWC_CHUNKS &&
                         accn * (int64_t)sizeof(float) <= BWC_MAX_ACC;
    if (!(cf_mode() != 2 && !is_depthwise(g) && (chunked || g->N * g->OD * g->OH < BWC_CHUNKS) &&
          (nitems >= 2 || nitems >= g->G * cdiv(g->Cgo, TILE_N))))
        return false;
    /* x to NHWC only; grad_y rows read in place (Note at pw_range) */
    const size_t xbytes = (size_t)(g->N * g->Cin * Si) * sizeof(float) + 64;
    float *xt = mft__alloc(xbytes, 64);
    if (!xt) { /* Note [Kernel scratch] */
        mft__kernel_nomem(xbytes);
        return true;
    }
    mft__conv_transpose(x, xt, g->N, g->Cin, Si, true);
    _Atomic long long nomem = 0;
    pwb_job pj = {g, gy, xt, gw, gws, cdiv(g->Cgi, TILE_N), mft__conv_pick_bw_micro(),
                  mft__conv_pick_bw_micro2(), &nomem};
    pwbc_job c;
    c.b = &pj;
    c.rows = g->N * g->OD * g->OH;
    c.nch = BWC_CHUNKS;
    c.Mp = cdiv(g->Cgo, TILE_M) * TILE_M;
    c.accn = accn;
    c.part = NULL;
    if (chunked) {
        const size_t pbytes = (size_t)(g->G * c.nch * c.accn) * sizeof(float);
        c.part = mft__alloc(pbytes, 64);
        if (!c.part) { /* Note [Kernel scratch]: not pwb_range, another order */
            mft__kernel_nomem(pbytes);
        } else {
            mft__parallel_for_dynamic(0, g->G * c.nch, cf_chunk(g->G * c.nch), pwbc_range, &c);
            mft__parallel_for(0, g->G * pj.nbi, 1, pwbc_reduce, &c);
            mft__free(c.part);
        }
    } else {
        mft__parallel_for(0, g->G * cdiv(pj.nbi, pj.micro2 ? 2 : 1), 1, pwb_range, &pj);
        if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    }
    mft__free(xt);
    return true;
}
