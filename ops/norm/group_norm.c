/* ops/norm/group_norm.c — group_norm and instance_norm (group_norm with
 * groups = C) (mft/cnn.h): the fast F32 kernels forward, the entry points
 * and autograd node, and the backward's entry points and kernels (the fast
 * backward itself is shared with batch_norm: ops/norm/channel_backward.c;
 * the reference kernels, F64 included, are in ops/norm/reference.c; the
 * kernel interface in ops/norm/norm_internal.h).
 *
 * Fast kernels, forward, F32: CONTIGUOUS: every statistics set (n, g) is
 * one contiguous run (one work item each: gn_sets). CHANNELS_LAST:
 * per-channel partial sums over blocks of pixel rows, combined per group in
 * order (comment at gnh_job). The CHANNELS_LAST F64 kernel is the strided
 * reference.
 *
 * Validation beyond mft/cnn.h (and ops/norm/common.c): weight / bias must
 * have x's dtype; eps >= 0; group_norm needs more than one value in N *
 * C/groups * spatial, instance_norm more than one spatial element (PyTorch
 * 1.13's checks). The result is packed in x's tag (instance_norm deviates
 * from PyTorch 1.13, which returns contiguous strides). The _ex variant
 * also returns the statistics (x's dtype, N * groups): mean and 1 /
 * sqrt(var + eps). The backward recomputes them when given none. */
#include <string.h>
#include "norm_internal.h"
#include "blocked_outputs.h"

/* ---------------------------------------------------------------- fast group_norm F32 */
static void gn_sets(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    const int64_t cg = j->C / j->G;
    for (int64_t k = b0; k < e; k++) {
        const float *x = j->x + k * j->len;
        float *y = j->y + k * j->len;
        gln_stats(j, k, x);
        const double m = kp->mean[k], rs = 1.0 / sqrt(kp->var[k] + kp->p.eps);
        for (int64_t q = 0; q < cg; q++) {
            const int64_t c = (k % j->G) * cg + q;
            const float scf = (float)(rs * norm_ld_F32(kp->weight, c, 1.0));
            const float bf = (float)norm_ld_F32(kp->bias, c, 0.0), mf = (float)m;
            const float *restrict xc = x + q * j->S;
            float *restrict yc = y + q * j->S;
            for (int64_t i = 0; i < j->S; i++) yc[i] = (xc[i] - mf) * scf + bf;
        }
    }
}

static void gn_fast_run(const mft_kernel_args *a) {
    gln_job j;
    if (!gln_init(&j, a)) return;
    const mft_tensor *x = a->inputs[0];
    j.C = x->sizes[1];
    j.G = j.kp->p.groups;
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.len = (j.C / j.G) * j.S;
    mft__parallel_for(0, x->numel / j.len, norm_grain(j.len), gn_sets, &j);
}
void mft__group_norm_nchw_f32(const mft_kernel_args *a) { gn_fast_run(a); }

/* NHWC group_norm: x is [N, S, C]. Work item = (sample n, block of
 * NORM_ROWS rows): per-channel sums of d = x - p and d^2, p = the channel's
 * pivot (its value in the sample's first row, so d is small and the shifted
 * second moment does not cancel), in float over sub-blocks of NORM_SUB rows
 * (vectorisable over C) then double, into part1 / part2[item * C + c]. One
 * pass over x for the statistics; they are combined per group in block
 * order (fixed, so independent of the thread count):
 *   mean = sum_c (S p_c + S1_c) / cnt,
 *   M2   = sum_c (S2_c + 2 (p_c - mean) S1_c + S (p_c - mean)^2).
 * Then per-(sample, channel) float scale / mean / bias and one pass over the
 * rows (parallel over rows). Scratch: gn_nhwc_scratch doubles. */
typedef struct gnh_job {
    const float *x;
    float *y;
    int64_t N, S, C, G, nblk;
    double *part1, *part2; /* [N * nblk * C] */
    const float *piv;      /* [N * C] */
    const float *sc, *mf, *bf; /* [N * C] */
} gnh_job;

static void gnh_sums(void *v, int64_t b0, int64_t e) {
    const gnh_job *j = v;
    const int64_t C = j->C;
    for (int64_t it = b0; it < e; it++) {
        const int64_t n = it / j->nblk, blk = it % j->nblk;
        const int64_t r0 = blk * NORM_ROWS, r1 = r0 + NORM_ROWS < j->S ? r0 + NORM_ROWS : j->S;
        const float *x = j->x + (n * j->S + r0) * C;
        double *a1 = j->part1 + it * C, *a2 = j->part2 + it * C;
        const float *pv = j->piv + n * C;
        for (int64_t c0 = 0; c0 < C; c0 += NORM_CCH) {
            const int64_t w = C - c0 < NORM_CCH ? C - c0 : NORM_CCH;
            float fa[NORM_CCH], fb[NORM_CCH];
            for (int64_t c = 0; c < w; c++) a1[c0 + c] = a2[c0 + c] = 0.0;
            for (int64_t s0 = 0; s0 < r1 - r0; s0 += NORM_SUB) {
                const int64_t s1 = s0 + NORM_SUB < r1 - r0 ? s0 + NORM_SUB : r1 - r0;
                for (int64_t c = 0; c < w; c++) fa[c] = fb[c] = 0.0f;
                for (int64_t r = s0; r < s1; r++) {
                    const float *restrict xr = x + r * C + c0, *restrict pr = pv + c0;
                    for (int64_t c = 0; c < w; c++) {
                        const float d = xr[c] - pr[c];
                        fa[c] += d;
                        fb[c] += d * d;
                    }
                }
                for (int64_t c = 0; c < w; c++) {
                    a1[c0 + c] += (double)fa[c];
                    a2[c0 + c] += (double)fb[c];
                }
            }
        }
    }
}
static void gnh_norm(void *v, int64_t b, int64_t e) {
    const gnh_job *j = v;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        const int64_t q = (r / j->S) * C;
        const float *restrict sc = j->sc + q, *restrict mf = j->mf + q, *restrict bf = j->bf + q;
        const float *restrict xr = j->x + r * C;
        float *restrict yr = j->y + r * C;
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mf[c]) * sc[c] + bf[c];
    }
}

static int64_t gn_nhwc_scratch(int64_t N, int64_t C, int64_t S) {
    return 2 * N * ((S + NORM_ROWS - 1) / NORM_ROWS) * C + 2 * N * C + 8;
}

void mft__group_norm_nhwc_f32(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0];
    const mft__norm_kparams *kp = a->params;
    if (x->numel == 0) return;
    if (x->ndim < 3) { /* rank 2: CHANNELS_LAST is CONTIGUOUS */
        gn_fast_run(a);
        return;
    }
    gnh_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.G = kp->p.groups;
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.nblk = (j.S + NORM_ROWS - 1) / NORM_ROWS;
    const int64_t N = j.N, C = j.C, G = j.G, cg = C / G, S = j.S, nit = N * j.nblk;
    j.part1 = kp->scratch;
    j.part2 = kp->scratch + nit * C;
    float *sc = (float *)(void *)(kp->scratch + 2 * nit * C), *mf = sc + N * C, *bf = mf + N * C;
    float *piv = bf + N * C; /* 4 * N * C floats in 2 * N * C doubles */
    for (int64_t n = 0; n < N; n++) memcpy(piv + n * C, j.x + n * S * C, sizeof(float) * (size_t)C);
    j.piv = piv;
    j.sc = sc;
    j.mf = mf;
    j.bf = bf;
    mft__parallel_for(0, nit, norm_grain(NORM_ROWS * C), gnh_sums, &j);
    const double cnt = (double)(S * cg);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            double sum = 0.0;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double s1 = 0.0;
                for (int64_t b = 0; b < j.nblk; b++) s1 += j.part1[(n * j.nblk + b) * C + c];
                sum += (double)S * (double)piv[n * C + c] + s1;
            }
            const double m = sum / cnt;
            double m2 = 0.0;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double s1 = 0.0, s2 = 0.0;
                for (int64_t b = 0; b < j.nblk; b++) {
                    s1 += j.part1[(n * j.nblk + b) * C + c];
                    s2 += j.part2[(n * j.nblk + b) * C + c];
                }
                const double dp = (double)piv[n * C + c] - m;
                m2 += s2 + 2.0 * dp * s1 + (double)S * dp * dp;
            }
            kp->mean[n * G + g] = m;
            kp->var[n * G + g] = m2 > 0.0 ? m2 / cnt : 0.0;
        }
    for (int64_t c = 0; c < C; c++) {
        const double w = norm_ld_F32(kp->weight, c, 1.0), bb = norm_ld_F32(kp->bias, c, 0.0);
        for (int64_t n = 0; n < N; n++) {
            const int64_t k = n * G + c / cg;
            sc[n * C + c] = (float)(w / sqrt(kp->var[k] + kp->p.eps));
            mf[n * C + c] = (float)kp->mean[k];
            bf[n * C + c] = (float)bb;
        }
    }
    mft__parallel_for(0, N * S, norm_grain(C), gnh_norm, &j);
}

/* ---------------------------------------------------------------- fast backward F32 */
void mft__group_norm_bwd_nchw_f32(const mft_kernel_args *a) { mft__nb_fast_run(a, false, false); }
void mft__group_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    mft__nb_fast_run(a, false, a->inputs[1]->ndim >= 3);
}

/* ---------------------------------------------------------------- forward entry points */
static mft_tensor *group_norm_impl(const char *fn, const mft_tensor *x, int64_t groups,
                                   const mft_tensor *weight, const mft_tensor *bias, double eps,
                                   bool instance, mft_tensor **smean, mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!mft__norm_check_x(fn, x, 2, "a tensor")) return NULL;
    const int64_t C = x->sizes[1];
    if (instance) {
        groups = C;
        if (x->numel > 0 && mft__dims_prod(x, 2, x->ndim) == 1) {
            char b[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: expected more than 1 spatial element, got input of shape %s", fn,
                           mft__fmt_dims(b, sizeof b, x->ndim, x->sizes));
            return NULL;
        }
    } else if (!mft__norm_check_groups(fn, groups, C)) {
        return NULL;
    } else if (x->numel > 0 && x->sizes[0] * (C / groups) * mft__dims_prod(x, 2, x->ndim) == 1) {
        /* PyTorch 1.13's F.group_norm check (_verify_batch_size) */
        char b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: expected more than 1 value per group (N * C / groups * spatial), got "
                       "input of shape %s with groups = %lld", fn,
                       mft__fmt_dims(b, sizeof b, x->ndim, x->sizes), (long long)groups);
        return NULL;
    }
    if (!mft__norm_check_param(fn, "weight", weight, x, 1, &C, false) ||
        !mft__norm_check_param(fn, "bias", bias, x, 1, &C, false) ||
        !mft__norm_check_eps(fn, eps))
        return NULL;
    mft__norm_kparams kp = {{eps, 0.0, true, groups ? groups : 1, 0}, weight, bias, NULL, NULL,
                            NULL, 0};
    return mft__norm_run(fn, MFT__OP_GROUP_NORM, x, &kp, x->sizes[0] * (groups ? groups : 1),
                         gn_nhwc_scratch(x->sizes[0], C, mft__dims_prod(x, 2, x->ndim)), NULL,
                         NULL, NULL, smean, srstd);
}

/* group_norm_impl's arguments, for mft__norm_entry. */
typedef struct gn_args {
    const char *fn;
    const mft_tensor *x, *weight, *bias;
    int64_t groups;
    double eps;
    bool instance;
} gn_args;

static mft_tensor *gn_impl(const void *ctx, norm_ag_params *p, mft_tensor **smean,
                           mft_tensor **srstd) {
    const gn_args *c = ctx;
    (void)p;
    return group_norm_impl(c->fn, c->x, c->groups, c->weight, c->bias, c->eps, c->instance,
                           smean, srstd);
}

static mft_tensor *group_norm_entry(const char *fn, const mft_tensor *x, int64_t groups,
                                    const mft_tensor *weight, const mft_tensor *bias, double eps,
                                    bool instance, mft_tensor **um, mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    const gn_args c = {fn, x, weight, bias, groups, eps, instance};
    norm_ag_params p = {.kind = instance ? NORM_AG_INSTANCE : NORM_AG_GROUP, .groups = groups,
                        .eps = eps};
    return mft__norm_entry(fn, instance ? "instance_norm" : "group_norm", ins, gn_impl, &c, &p,
                           um, ur);
}

mft_tensor *mft_group_norm(const mft_tensor *x, int64_t groups, const mft_tensor *weight,
                           const mft_tensor *bias, double eps) {
    MFT__BLOCKED_FALLBACK("group_norm", mft_group_norm(x, groups, weight, bias, eps), 3, &x,
                          &weight, &bias);
    return group_norm_entry("mft_group_norm", x, groups, weight, bias, eps, false, NULL, NULL);
}

mft_tensor *mft_group_norm_ex(const mft_tensor *x, int64_t groups, const mft_tensor *weight,
                              const mft_tensor *bias, double eps, mft_tensor **mean,
                              mft_tensor **rstd) {
    MFT__BLOCKED_FALLBACK_OUTS("group_norm_ex",
                               mft_group_norm_ex(x, groups, weight, bias, eps, mean, rstd), 2,
                               ((mft_tensor **[]){mean, rstd}),
                               ((const mft_tensor *[]){NULL, NULL}), 3, &x, &weight, &bias);
    return group_norm_entry("mft_group_norm_ex", x, groups, weight, bias, eps, false, mean, rstd);
}

mft_tensor *mft_instance_norm(const mft_tensor *x, const mft_tensor *weight,
                              const mft_tensor *bias, double eps) {
    MFT__BLOCKED_FALLBACK("instance_norm", mft_instance_norm(x, weight, bias, eps), 3, &x, &weight,
                          &bias);
    return group_norm_entry("mft_instance_norm", x, 0, weight, bias, eps, true, NULL, NULL);
}

/* ---------------------------------------------------------------- backward entry points */
/* The statistics of x for a backward given none. */
static mft_tensor *gn_stats(const mft_tensor *x, const mft__normb_kparams *kp,
                            const int64_t *aff_sizes, mft_tensor **mean, mft_tensor **rstd) {
    (void)aff_sizes;
    return mft_group_norm_ex(x, kp->p.groups, NULL, NULL, kp->p.eps, mean, rstd);
}

static mft_status group_norm_bwd_impl(const char *fn, const mft_tensor *go, const mft_tensor *x,
                                      int64_t groups, const mft_tensor *mean,
                                      const mft_tensor *rstd, const mft_tensor *weight,
                                      double eps, bool instance, mft_tensor **gx,
                                      mft_tensor **gw, mft_tensor **gb) {
    mft__normb_clear(gx, gw, gb);
    if (!mft__norm_check_grad_x(fn, go, x, 2)) return mft_last_error();
    const int64_t N = x->sizes[0], C = x->sizes[1];
    const int64_t S = mft__dims_prod(x, 2, x->ndim);
    if (instance) groups = C;
    if (!instance && !mft__norm_check_groups(fn, groups, C)) return mft_last_error();
    if (groups < 1) groups = 1; /* instance norm, C == 0 */
    const int64_t nstat = N * groups;
    mft__normb_kparams kp = {.p = {.eps = eps, .training = true, .groups = groups},
                             .weight = weight};
    return mft__normb_run_stats(fn, MFT__OP_GROUP_NORM_BACKWARD, go, x, &kp, nstat, mean, rstd, 1,
                                &C, mft__nb_scratch(N, C, S), gn_stats, gx, gw, gb);
}

mft_status mft_group_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                   int64_t groups, const mft_tensor *mean, const mft_tensor *rstd,
                                   const mft_tensor *weight, double eps, mft_tensor **grad_x,
                                   mft_tensor **grad_weight, mft_tensor **grad_bias) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS(
        "group_norm_backward",
        mft_group_norm_backward(grad_out, x, groups, mean, rstd, weight, eps, grad_x, grad_weight,
                                grad_bias),
        3, ((mft_tensor **[]){grad_x, grad_weight, grad_bias}),
        ((const mft_tensor *[]){x, weight, NULL}), 5, &grad_out, &x, &mean, &rstd, &weight);
    return group_norm_bwd_impl("mft_group_norm_backward", grad_out, x, groups, mean, rstd, weight,
                               eps, false, grad_x, grad_weight, grad_bias);
}

mft_status mft_instance_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                      const mft_tensor *mean, const mft_tensor *rstd,
                                      const mft_tensor *weight, double eps, mft_tensor **grad_x,
                                      mft_tensor **grad_weight, mft_tensor **grad_bias) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS(
        "instance_norm_backward",
        mft_instance_norm_backward(grad_out, x, mean, rstd, weight, eps, grad_x, grad_weight,
                                   grad_bias),
        3, ((mft_tensor **[]){grad_x, grad_weight, grad_bias}),
        ((const mft_tensor *[]){x, weight, NULL}), 5, &grad_out, &x, &mean, &rstd, &weight);
    return group_norm_bwd_impl("mft_instance_norm_backward", grad_out, x, 0, mean, rstd, weight,
                               eps, true, grad_x, grad_weight, grad_bias);
}
