/* ops/norm/layer_norm.c — layer_norm (mft/cnn.h): the fast F32 kernels
 * forward and backward, the entry points and autograd node, and the
 * backward's entry point (the reference kernels, F64 included, are in
 * ops/norm/reference.c; the kernel interface in ops/norm/norm_internal.h).
 *
 * Fast kernels, F32. CONTIGUOUS: every statistics set (the last nnorm
 * dims) is one contiguous run: forward one work item per set (ln_sets),
 * backward one per row (lnb_rows), then, if needed, grad_weight /
 * grad_bias over column blocks (each column summed over the rows in
 * order). CHANNELS_LAST: normalising C and all spatial dims (nnorm >= nd -
 * 1) each set is still one contiguous run, only permuted, so the
 * CONTIGUOUS row kernels run with weight / bias gathered in physical order
 * (and the backward's column sums scattered back); for smaller nnorm each
 * set is a column of a [P, C] block (ln_nhwc_cols; backward lnbc_cols /
 * lnbc_rows, vectorised over channels). F64 layer_norm has no
 * CHANNELS_LAST forward kernel: an NHWC input goes through the
 * dispatcher's fallback (converted to NCHW and back, 2 conversions counted;
 * refused in strict mode) — the strided reference was 30-60x slower than
 * that. The F64 backward kernels are the strided reference.
 *
 * Validation beyond mft/cnn.h (and ops/norm/common.c): nnorm in 1..rank,
 * normalized_shape the last nnorm sizes of x; weight / bias of
 * normalized_shape and x's dtype; eps >= 0. The result is packed in x's
 * tag (deviating from PyTorch 1.13, which returns contiguous strides). The
 * _ex variant also returns the statistics (x's dtype, numel /
 * prod(normalized_shape)): mean and 1 / sqrt(var + eps). The backward
 * recomputes them when given none. */
#include <string.h>
#include "norm_internal.h"
#include "blocked_outputs.h"

/* The layer_norm permutation of an NHWC block (forward and backward): for
 * n < Nb, c < C, s < Sp, physical position P = (n*Sp + s)*C + c holds
 * logical element Q = (n*C + c)*Sp + s (a C x Sp transpose per n). They replace an index array of L int64 that each call
 * filled and read.
 * MFT__LN_PERM_FOR runs BODY for every (P, Q) in P order, Q stepped (C
 * lines of the logical side in use, each reused for 16 s): for gathering
 * the weight into the physical order (a tiled walk measured slower there,
 * 1.31-1.46 against 1.07-1.14 ms for the 8x64x56x56 forward).
 * MFT__LN_PERM_TILED runs it in 32 x 32 tiles of (c, s), P consecutive
 * inside: for scattering the double gradients back to the logical order
 * (2.24-2.58 against 2.85-3.25 ms for the backward in P order). */
#define MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, BODY)                                                    \
    for (int64_t ln_n_ = 0, P = 0; ln_n_ < (Nb); ln_n_++)                                          \
        for (int64_t ln_s_ = 0; ln_s_ < (Sp); ln_s_++)                                             \
            for (int64_t ln_c_ = 0, Q = ln_n_ * (C) * (Sp) + ln_s_; ln_c_ < (C);                   \
                 ln_c_++, P++, Q += (Sp)) {                                                        \
                BODY                                                                               \
            }
#define MFT__LN_PERM_TILE 32
#define MFT__LN_PERM_TILED(Nb, C, Sp, P, Q, BODY)                                                  \
    for (int64_t ln_n_ = 0; ln_n_ < (Nb); ln_n_++)                                                 \
        for (int64_t ln_c0_ = 0; ln_c0_ < (C); ln_c0_ += MFT__LN_PERM_TILE)                        \
            for (int64_t ln_s0_ = 0; ln_s0_ < (Sp); ln_s0_ += MFT__LN_PERM_TILE)                   \
                for (int64_t ln_s_ = ln_s0_; ln_s_ < (Sp) && ln_s_ < ln_s0_ + MFT__LN_PERM_TILE;   \
                     ln_s_++)                                                                      \
                    for (int64_t ln_c_ = ln_c0_; ln_c_ < (C) && ln_c_ < ln_c0_ + MFT__LN_PERM_TILE; \
                         ln_c_++) {                                                                \
                        const int64_t P = (ln_n_ * (Sp) + ln_s_) * (C) + ln_c_;                    \
                        const int64_t Q = (ln_n_ * (C) + ln_c_) * (Sp) + ln_s_;                    \
                        BODY                                                                       \
                    }

/* ---------------------------------------------------------------- fast layer_norm F32 */
static void ln_sets(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    for (int64_t k = b0; k < e; k++) {
        const float *restrict x = j->x + k * j->len;
        float *restrict y = j->y + k * j->len;
        gln_stats(j, k, x);
        const float m = (float)kp->mean[k], rs = (float)(1.0 / sqrt(kp->var[k] + kp->p.eps));
        if (j->w && j->b) {
            const float *restrict w = j->w, *restrict b = j->b;
            for (int64_t i = 0; i < j->len; i++) y[i] = (x[i] - m) * rs * w[i] + b[i];
        } else if (!kp->weight && !kp->bias) {
            for (int64_t i = 0; i < j->len; i++) y[i] = (x[i] - m) * rs;
        } else {
            for (int64_t i = 0; i < j->len; i++)
                y[i] = (x[i] - m) * rs * (j->w ? j->w[i] : (float)norm_ld_F32(kp->weight, i, 1.0)) +
                       (j->b ? j->b[i] : (float)norm_ld_F32(kp->bias, i, 0.0));
        }
    }
}

static const float *gln_packed(const mft_tensor *t) {
    return t && mft_tensor_is_contiguous(t, MFT_CONTIGUOUS)
               ? (const float *)(const void *)mft__tensor_ptr(t)
               : NULL;
}

static void ln_fast_run(const mft_kernel_args *a) {
    gln_job j;
    if (!gln_init(&j, a)) return;
    const mft_tensor *x = a->inputs[0];
    j.len = mft__dims_prod(x, x->ndim - j.kp->p.nnorm, x->ndim);
    j.S = j.C = j.G = 1;
    j.w = gln_packed(j.kp->weight);
    j.b = gln_packed(j.kp->bias);
    mft__parallel_for(0, x->numel / j.len, norm_grain(j.len), ln_sets, &j);
}
void mft__layer_norm_nchw_f32(const mft_kernel_args *a) { ln_fast_run(a); }

/* NHWC layer_norm, x [N, lead spatial (Lsp), normalised spatial (P), C]
 * physically, nnorm <= nd - 2: each statistics set (n, c, lead) is one
 * column of a [P, C] block. Work item = (block, chunk of LN_COLS columns):
 * per-column sums in double over the P rows in order (two passes), then one
 * pass writing y. j->S holds Lsp, j->len P; j->w / j->b the packed weight /
 * bias of P elements (never NULL here). */
#define LN_COLS 64
static void ln_nhwc_cols(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    const int64_t C = j->C, P = j->len, Lsp = j->S, nch = (C + LN_COLS - 1) / LN_COLS;
    for (int64_t it = b0; it < e; it++) {
        const int64_t blk = it / nch, c0 = (it % nch) * LN_COLS;
        const int64_t w = C - c0 < LN_COLS ? C - c0 : LN_COLS;
        const int64_t n = blk / Lsp, ls = blk % Lsp;
        const float *x = j->x + blk * P * C + c0;
        float *y = j->y + blk * P * C + c0;
        double m[LN_COLS], q[LN_COLS];
        float mf[LN_COLS], rs[LN_COLS];
        for (int64_t i = 0; i < w; i++) m[i] = q[i] = 0.0;
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < w; i++) m[i] += (double)x[p * C + i];
        for (int64_t i = 0; i < w; i++) m[i] /= (double)P;
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < w; i++) {
                const double d = (double)x[p * C + i] - m[i];
                q[i] += d * d;
            }
        for (int64_t i = 0; i < w; i++) {
            const int64_t k = (n * C + c0 + i) * Lsp + ls;
            kp->mean[k] = m[i];
            kp->var[k] = q[i] / (double)P;
            mf[i] = (float)m[i];
            rs[i] = (float)(1.0 / sqrt(kp->var[k] + kp->p.eps));
        }
        for (int64_t p = 0; p < P; p++) {
            const float wv = j->w[p], bv = j->b[p];
            const float *restrict xr = x + p * C;
            float *restrict yr = y + p * C;
            for (int64_t i = 0; i < w; i++) yr[i] = (xr[i] - mf[i]) * rs[i] * wv + bv;
        }
    }
}

/* weight / bias of the normalised block into wf / bf in physical order:
 * position P holds logical element Q of MFT__LN_PERM_FOR(Nb, C, Sp) (Nb = C
 * = 1, Sp = L: the identity); absent ones as 1 / 0. */
static void ln_gather(const mft__norm_kparams *kp, int64_t Nb, int64_t C, int64_t Sp, float *wf,
                      float *bf) {
    for (int k = 0; k < 2; k++) {
        const mft_tensor *t = k ? kp->bias : kp->weight;
        float *dst = k ? bf : wf;
        const float *tp = gln_packed(t);
        if (tp)
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, dst[P] = tp[Q];)
        else
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, dst[P] = (float)norm_ld_F32(t, Q, k ? 0.0 : 1.0);)
    }
}

/* NHWC layer_norm F32. nnorm >= nd - 1: the normalised block holds C, so
 * each set is one contiguous run in NHWC too (only permuted): ln_sets with
 * the weight / bias gathered in physical order. Otherwise ln_nhwc_cols.
 * Scratch: 2 * L floats. */
void mft__layer_norm_nhwc_f32(const mft_kernel_args *a) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    const int nd = x->ndim;
    if (x->numel == 0) return;
    if (nd < 3 || nd > 5) {
        ln_fast_run(a);
        return;
    }
    const int64_t L = mft__dims_prod(x, nd - kp->p.nnorm, nd);
    float *wf = (float *)(void *)kp->scratch, *bf = wf + L;
    gln_job j;
    gln_init(&j, a);
    j.w = wf;
    j.b = bf;
    j.C = x->sizes[1];
    j.G = 1;
    j.len = L;
    if (kp->p.nnorm >= nd - 1) {
        const int64_t C = x->sizes[1], Sp = mft__dims_prod(x, 2, nd);
        const int64_t Nb = kp->p.nnorm == nd ? x->sizes[0] : 1;
        ln_gather(kp, Nb, C, Sp, wf, bf);
        j.S = 1;
        mft__parallel_for(0, x->numel / L, norm_grain(L), ln_sets, &j);
    } else {
        ln_gather(kp, 1, 1, L, wf, bf);
        j.S = mft__dims_prod(x, 2, nd - kp->p.nnorm); /* Lsp */
        const int64_t nch = (j.C + LN_COLS - 1) / LN_COLS;
        const int64_t items = x->sizes[0] * j.S * nch;
        mft__parallel_for(0, items, norm_grain(L * (j.C < LN_COLS ? j.C : LN_COLS)), ln_nhwc_cols,
                          &j);
    }
}

/* ---------------------------------------------------------------- fast backward F32
 * Rows of len contiguous elements, weight wf[len] in the rows' physical
 * order (NULL: 1). Item = one row; then column blocks of LNB_COLS for gw / gb (in the
 * physical order, gwp / gbp). */
#define LNB_COLS 256
typedef struct lnb_job {
    const float *dy, *x, *wf;
    float *dx;
    int64_t rows, len;
    const double *mean, *rstd;
    double *gwp, *gbp;
} lnb_job;

static void lnb_rows(void *v, int64_t b, int64_t e) {
    const lnb_job *j = v;
    const int64_t L = j->len;
    for (int64_t k = b; k < e; k++) {
        const float *restrict dy = j->dy + k * L, *restrict x = j->x + k * L;
        float *restrict dx = j->dx + k * L;
        const double m = j->mean[k], rs = j->rstd[k];
        const float *restrict w = j->wf;
        double s1, s2;
        nb_sums_w(dy, x, w, L, m, &s1, &s2);
        s2 *= rs;
        const float A = (float)rs, Bk = (float)(-rs * rs * s2 / (double)L),
                    Dk = (float)(-rs * s1 / (double)L), M = (float)m;
        if (w)
            for (int64_t i = 0; i < L; i++) dx[i] = A * w[i] * dy[i] + Bk * (x[i] - M) + Dk;
        else
            for (int64_t i = 0; i < L; i++) dx[i] = A * dy[i] + Bk * (x[i] - M) + Dk;
    }
}

static void lnb_cols(void *v, int64_t b, int64_t e) {
    const lnb_job *j = v;
    const int64_t L = j->len;
    for (int64_t it = b; it < e; it++) {
        const int64_t c0 = it * LNB_COLS, w = L - c0 < LNB_COLS ? L - c0 : LNB_COLS;
        double *restrict gw = j->gwp + c0, *restrict gb = j->gbp + c0;
        for (int64_t i = 0; i < w; i++) gw[i] = gb[i] = 0.0;
        for (int64_t k = 0; k < j->rows; k++) {
            const float *restrict dy = j->dy + k * L + c0, *restrict x = j->x + k * L + c0;
            const float m = (float)j->mean[k], rs = (float)j->rstd[k];
            for (int64_t i = 0; i < w; i++) {
                gb[i] += (double)dy[i];
                gw[i] += (double)(dy[i] * ((x[i] - m) * rs));
            }
        }
    }
}

/* The normalised block in physical order holds, at position P, logical
 * element Q of MFT__LN_PERM_FOR(Nb, C, Sp) (Nb = C = 1, Sp = len: the
 * identity, grad_w / grad_b summed in place). Scratch: len floats (weight)
 * + 2 * len doubles. */
static void lnb_run(const mft_kernel_args *a, int64_t Nb, int64_t C, int64_t Sp) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int64_t L = mft__dims_prod(x, x->ndim - kp->p.nnorm, x->ndim);
    if (x->numel == 0) {
        for (int64_t i = 0; i < L; i++) kp->gw[i] = kp->gb[i] = 0.0;
        return;
    }
    const bool perm = C > 1;
    lnb_job j;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.dx = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.len = L;
    j.rows = x->numel / L;
    j.mean = kp->mean;
    j.rstd = kp->rstd;
    j.gwp = perm ? kp->scratch : kp->gw;
    j.gbp = perm ? kp->scratch + L : kp->gb;
    float *wf = (float *)(void *)(kp->scratch + 2 * L);
    j.wf = NULL;
    if (kp->weight) {
        const mft_tensor *w = kp->weight;
        if (mft_tensor_is_contiguous(w, MFT_CONTIGUOUS)) {
            const float *wp = (const float *)(const void *)mft__tensor_ptr(w);
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, wf[P] = wp[Q];)
        } else {
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, wf[P] = (float)norm_ld_F32(w, Q, 1.0);)
        }
        j.wf = wf;
    }
    mft__parallel_for(0, j.rows, norm_grain(L), lnb_rows, &j);
    if (kp->need_wb) {
        const int64_t nb = (L + LNB_COLS - 1) / LNB_COLS;
        mft__parallel_for(0, nb, norm_grain(j.rows * LNB_COLS), lnb_cols, &j);
        if (perm)
            MFT__LN_PERM_TILED(Nb, C, Sp, P, Q, {
                kp->gw[Q] = j.gwp[P];
                kp->gb[Q] = j.gbp[P];
            })
    }
}

void mft__layer_norm_bwd_nchw_f32(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[1];
    lnb_run(a, 1, 1,
            mft__dims_prod(x, x->ndim - ((const mft__normb_kparams *)a->params)->p.nnorm, x->ndim));
}

/* NHWC layer_norm with nnorm <= nd - 2: x [N, Lsp, P, C] physically, each
 * set (n, c, lead) a column of a [P, C] block, affine index p. Columns:
 * item = (block, chunk of LNB_LCOL channels), sums in double over the P rows,
 * then grad_x. grad_weight / grad_bias: item = row p, summed over the blocks
 * and channels in order. */
#define LNB_LCOL 64
typedef struct lnbc_job {
    const float *dy, *x, *wf; /* wf: packed weight [P] or NULL */
    float *dx;
    int64_t C, P, Lsp, nblk;
    const double *mean, *rstd;
    double *gw, *gb;
} lnbc_job;

static void lnbc_cols(void *v, int64_t b, int64_t e) {
    const lnbc_job *j = v;
    const int64_t C = j->C, P = j->P, nch = (C + LNB_LCOL - 1) / LNB_LCOL;
    for (int64_t it = b; it < e; it++) {
        const int64_t blk = it / nch, c0 = (it % nch) * LNB_LCOL;
        const int64_t w = C - c0 < LNB_LCOL ? C - c0 : LNB_LCOL;
        const int64_t n = blk / j->Lsp, ls = blk % j->Lsp;
        const float *dy = j->dy + blk * P * C + c0, *x = j->x + blk * P * C + c0;
        float *dx = j->dx + blk * P * C + c0;
        double m[LNB_LCOL], s1[LNB_LCOL], s2[LNB_LCOL];
        float A[LNB_LCOL], B[LNB_LCOL], D[LNB_LCOL], M[LNB_LCOL];
        for (int64_t i = 0; i < w; i++) {
            m[i] = j->mean[(n * C + c0 + i) * j->Lsp + ls];
            s1[i] = s2[i] = 0.0;
        }
        for (int64_t p = 0; p < P; p++) {
            const double wv = j->wf ? (double)j->wf[p] : 1.0;
            for (int64_t i = 0; i < w; i++) {
                const double d = (double)dy[p * C + i] * wv;
                s1[i] += d;
                s2[i] += d * ((double)x[p * C + i] - m[i]);
            }
        }
        for (int64_t i = 0; i < w; i++) {
            const double rs = j->rstd[(n * C + c0 + i) * j->Lsp + ls];
            A[i] = (float)rs;
            B[i] = (float)(-rs * rs * rs * s2[i] / (double)P);
            D[i] = (float)(-rs * s1[i] / (double)P);
            M[i] = (float)m[i];
        }
        for (int64_t p = 0; p < P; p++) {
            const float wv = j->wf ? j->wf[p] : 1.0f;
            const float *restrict dyr = dy + p * C, *restrict xr = x + p * C;
            float *restrict dxr = dx + p * C;
            for (int64_t i = 0; i < w; i++)
                dxr[i] = A[i] * wv * dyr[i] + B[i] * (xr[i] - M[i]) + D[i];
        }
    }
}

static void lnbc_rows(void *v, int64_t b, int64_t e) {
    const lnbc_job *j = v;
    const int64_t C = j->C, P = j->P;
    for (int64_t p = b; p < e; p++) {
        double gw = 0.0, gb = 0.0;
        for (int64_t blk = 0; blk < j->nblk; blk++) {
            const int64_t n = blk / j->Lsp, ls = blk % j->Lsp;
            const float *dy = j->dy + (blk * P + p) * C, *x = j->x + (blk * P + p) * C;
            for (int64_t c = 0; c < C; c++) {
                const int64_t k = (n * C + c) * j->Lsp + ls;
                gb += (double)dy[c];
                gw += (double)dy[c] * (((double)x[c] - j->mean[k]) * j->rstd[k]);
            }
        }
        j->gw[p] = gw;
        j->gb[p] = gb;
    }
}

static void lnb_nhwc_cols_run(const mft_kernel_args *a) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int nd = x->ndim;
    lnbc_job j;
    j.C = x->sizes[1];
    j.P = mft__dims_prod(x, nd - kp->p.nnorm, nd);
    j.Lsp = mft__dims_prod(x, 2, nd - kp->p.nnorm);
    j.nblk = x->sizes[0] * j.Lsp;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.dx = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.mean = kp->mean;
    j.rstd = kp->rstd;
    j.gw = kp->gw;
    j.gb = kp->gb;
    float *wf = (float *)(void *)kp->scratch;
    j.wf = NULL;
    if (kp->weight) {
        for (int64_t p = 0; p < j.P; p++) wf[p] = (float)norm_ld_F32(kp->weight, p, 1.0);
        j.wf = wf;
    }
    const int64_t nch = (j.C + LNB_LCOL - 1) / LNB_LCOL;
    mft__parallel_for(0, j.nblk * nch, norm_grain(j.P * (j.C < LNB_LCOL ? j.C : LNB_LCOL)), lnbc_cols,
                      &j);
    if (kp->need_wb) mft__parallel_for(0, j.P, norm_grain(j.nblk * j.C), lnbc_rows, &j);
}

/* NHWC: the normalised block (dims lead..nd-1) is contiguous iff it holds C
 * (nnorm >= nd - 1); physical order of the block: (spatial..., C), walked
 * by MFT__LN_PERM_FOR. */
void mft__layer_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int nd = x->ndim;
    if (nd < 3 || nd > 5) {
        mft__layer_norm_bwd_nchw_f32(a);
        return;
    }
    if (kp->p.nnorm < nd - 1) {
        const int64_t L = mft__dims_prod(x, nd - kp->p.nnorm, nd);
        if (x->numel == 0) {
            for (int64_t i = 0; i < L; i++) kp->gw[i] = kp->gb[i] = 0.0;
            return;
        }
        lnb_nhwc_cols_run(a);
        return;
    }
    /* block dims (logical): [C, spatial...] when nnorm == nd - 1, else
     * [N, C, spatial...]; physical: [N?, spatial..., C] */
    lnb_run(a, kp->p.nnorm == nd ? x->sizes[0] : 1, x->sizes[1], mft__dims_prod(x, 2, nd));
}

/* ---------------------------------------------------------------- forward entry points */
static mft_tensor *layer_norm_impl(const char *fn, const mft_tensor *x, int nnorm,
                                   const int64_t *normalized_shape, const mft_tensor *weight,
                                   const mft_tensor *bias, double eps, mft_tensor **smean,
                                   mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!mft__norm_check_x(fn, x, 1, "a tensor")) return NULL;
    if (mft__norm_check_layer_shape(fn, x, nnorm, normalized_shape) != MFT_OK) return NULL;
    const int lead = x->ndim - nnorm;
    if (!mft__norm_check_param(fn, "weight", weight, x, nnorm, normalized_shape, false) ||
        !mft__norm_check_param(fn, "bias", bias, x, nnorm, normalized_shape, false) ||
        !mft__norm_check_eps(fn, eps))
        return NULL;
    const int64_t L = mft__dims_prod(x, lead, x->ndim);
    const int64_t nstat = L ? x->numel / L : 0;
    mft__norm_kparams kp = {{eps, 0.0, true, 0, nnorm}, weight, bias, NULL, NULL, NULL, 0};
    /* NHWC kernel: 2 L floats */
    return mft__norm_run(fn, MFT__OP_LAYER_NORM, x, &kp, nstat, L + 1, NULL, NULL, NULL, smean,
                         srstd);
}

/* layer_norm_impl's arguments, for mft__norm_entry. */
typedef struct ln_args {
    const char *fn;
    const mft_tensor *x;
    int nnorm;
    const int64_t *normalized_shape;
    const mft_tensor *weight, *bias;
    double eps;
} ln_args;

static mft_tensor *ln_impl(const void *ctx, norm_ag_params *p, mft_tensor **smean,
                           mft_tensor **srstd) {
    const ln_args *c = ctx;
    mft_tensor *y = layer_norm_impl(c->fn, c->x, c->nnorm, c->normalized_shape, c->weight,
                                    c->bias, c->eps, smean, srstd);
    if (y) { /* nnorm and normalized_shape were validated */
        p->nnorm = c->nnorm;
        memcpy(p->shape, c->normalized_shape, (size_t)c->nnorm * sizeof *c->normalized_shape);
    }
    return y;
}

static mft_tensor *layer_norm_entry(const char *fn, const mft_tensor *x, int nnorm,
                                    const int64_t *normalized_shape, const mft_tensor *weight,
                                    const mft_tensor *bias, double eps, mft_tensor **um,
                                    mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    const ln_args c = {fn, x, nnorm, normalized_shape, weight, bias, eps};
    norm_ag_params p = {.kind = NORM_AG_LAYER, .eps = eps};
    return mft__norm_entry(fn, "layer_norm", ins, ln_impl, &c, &p, um, ur);
}

mft_tensor *mft_layer_norm(const mft_tensor *x, int nnorm, const int64_t *normalized_shape,
                           const mft_tensor *weight, const mft_tensor *bias, double eps) {
    MFT__BLOCKED_FALLBACK("layer_norm",
                          mft_layer_norm(x, nnorm, normalized_shape, weight, bias, eps), 3, &x,
                          &weight, &bias);
    return layer_norm_entry("mft_layer_norm", x, nnorm, normalized_shape, weight, bias, eps, NULL,
                            NULL);
}

mft_tensor *mft_layer_norm_ex(const mft_tensor *x, int nnorm, const int64_t *normalized_shape,
                              const mft_tensor *weight, const mft_tensor *bias, double eps,
                              mft_tensor **mean, mft_tensor **rstd) {
    MFT__BLOCKED_FALLBACK_OUTS(
        "layer_norm_ex",
        mft_layer_norm_ex(x, nnorm, normalized_shape, weight, bias, eps, mean, rstd), 2,
        ((mft_tensor **[]){mean, rstd}), ((const mft_tensor *[]){NULL, NULL}), 3, &x, &weight,
        &bias);
    return layer_norm_entry("mft_layer_norm_ex", x, nnorm, normalized_shape, weight, bias, eps,
                            mean, rstd);
}

/* ---------------------------------------------------------------- backward entry point */
/* The statistics of x for a backward given none (aff_sizes: normalized_shape). */
static mft_tensor *ln_stats(const mft_tensor *x, const mft__normb_kparams *kp,
                            const int64_t *aff_sizes, mft_tensor **mean, mft_tensor **rstd) {
    return mft_layer_norm_ex(x, kp->p.nnorm, aff_sizes, NULL, NULL, kp->p.eps, mean, rstd);
}

mft_status mft_layer_norm_backward(const mft_tensor *grad_out, const mft_tensor *x, int nnorm,
                                   const int64_t *normalized_shape, const mft_tensor *mean,
                                   const mft_tensor *rstd, const mft_tensor *weight, double eps,
                                   mft_tensor **grad_x, mft_tensor **grad_weight,
                                   mft_tensor **grad_bias) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS(
        "layer_norm_backward",
        mft_layer_norm_backward(grad_out, x, nnorm, normalized_shape, mean, rstd, weight, eps,
                                grad_x, grad_weight, grad_bias),
        3, ((mft_tensor **[]){grad_x, grad_weight, grad_bias}),
        ((const mft_tensor *[]){x, weight, NULL}), 5, &grad_out, &x, &mean, &rstd, &weight);
    const char *fn = "mft_layer_norm_backward";
    mft__normb_clear(grad_x, grad_weight, grad_bias);
    if (!mft__norm_check_grad_x(fn, grad_out, x, 1)) return mft_last_error();
    const mft_status cs = mft__norm_check_layer_shape(fn, x, nnorm, normalized_shape);
    if (cs != MFT_OK) return cs;
    const int lead = x->ndim - nnorm;
    const int64_t L = mft__dims_prod(x, lead, x->ndim);
    const int64_t nstat = L ? x->numel / L : mft__dims_prod(x, 0, lead);
    mft__normb_kparams kp = {.p = {.eps = eps, .training = true, .nnorm = nnorm},
                             .weight = weight};
    /* layer_norm kernels: 2 L doubles + L floats */
    return mft__normb_run_stats(fn, MFT__OP_LAYER_NORM_BACKWARD, grad_out, x, &kp, nstat, mean,
                                rstd, nnorm, normalized_shape, 2 * L + L / 2 + 1, ln_stats,
                                grad_x, grad_weight, grad_bias);
}
