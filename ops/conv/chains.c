/* ops/conv/chains.c — the fast F32 convolution kernels (2-D and 3-D;
 * forward, backward_input, backward_weight) for the CHANNELS_LAST(_3D) and
 * CONTIGUOUS formats, registered in mft__kernels_conv_fast (searched before
 * the reference kernels of reference.c). The kernel interface is
 * mft_conv_params (mft/conv.h). Everything runs on a 3-D geometry (cgeom in
 * conv_internal.h; 2-D: D = OD = KD = 1).
 *
 * Here: the geometry of a kernel call, the glue to the single-channel
 * (plane.c) and Winograd (winograd.c) kernels, the algorithm chains of the
 * NHWC and NCHW kernels (which algorithm runs for which call), the test
 * mode, and the kernel table. The algorithms live one per file: indirect.c
 * (forward and backward_input), backward_weight.c, depthwise.c,
 * depthwise_nchw.c, pointwise_nchw.c, direct.c (the loops the tests force),
 * on the micro-kernels of microkernels.c and the copies of layout.c.
 *
 * The CONTIGUOUS kernels run the NHWC machinery on transposed activations
 * (8x8 AVX transposes; none when C == 1, where both layouts coincide) and
 * write the NCHW result directly: each work item computes into a small
 * pixel-major buffer that is transposed into the output (forward and
 * backward_input). With N >= 8 the work items are whole images, each
 * transposing its own src planes into a per-thread buffer (no full-size
 * scratch; the data is still in L2 when the tiles read it); smaller batches
 * transpose the whole input first. Pointwise convolutions (1x1, stride 1,
 * no padding) need no transpose at all: per image Y[Cout, HW] = W @ X[Cin,
 * HW] with the same 6x16 micro-kernel (see pw_range in pointwise_nchw.c).
 * backward_weight
 * transposes only x: the micro-kernel's six rows are grad_y rows read in
 * place (NCHW rows are contiguous in ow), its 16 columns x channels (see
 * pwb_range there); work items are (group, 16 input channels). This is the
 * kernels' internal choice (the dispatcher does no conversion and counts
 * none).
 *
 * nChw16c: the table also holds the native MFT_NCHW16C conv2d kernels:
 * groups 1 runs blocked16.c (Note [nChw16c direct convolution] there),
 * depthwise (groups > 1: the entry routes no other grouped call here)
 * depthwise_blocked16.c (Note [nChw16c depthwise convolution]).
 *
 * Winograd: 2-D 3x3 convolutions with stride 1, dilation 1 and groups 1
 * (forward, and backward_input as a forward convolution of grad_y with
 * flipped weights) run ops/conv/winograd.c's F(4x4, 3x3) where its size test
 * says it pays (Note [Winograd F(4x4, 3x3)]); NCHW tensors are transposed
 * to NHWC around it. The kernel then reports the name ...winograd_f4x3
 * for the call (mft__dispatch_report_as). mft_conv_set_winograd(false)
 * keeps the other kernels.
 *
 * One input channel (C_in = 1, groups = 1, 2-D), forward and
 * backward_weight, NHWC and NCHW: ops/conv/plane.c on AVX-512 builds (Note
 * [Single-channel planes]), else the depthwise kernels (depthwise.c).
 *
 * F64 has no fast kernels (the reference runs). If a scratch allocation
 * fails, the kernel reports it (mft__kernel_nomem) and the op fails with
 * MFT_ERR_NOMEM; it never computes the result another way that rounds
 * differently (Note [Kernel scratch] in ops/ops_internal.h). */
#include "conv_internal.h"

int mft__conv_fast_mode = 0;
void mft__conv_fast_set_mode(int mode) { mft__conv_fast_mode = mode; }

/* ---------------------------------------------------------------- geometry */
/* a: activation with the input spatial sizes; o: with the output sizes. */
static cgeom geom_of(const mft_kernel_args *a, const mft_tensor *in_sp, const mft_tensor *out_sp,
                     const mft_tensor *w) {
    const mft_conv_params *p = a->params;
    cgeom g;
    memset(&g, 0, sizeof g);
    const int ns = p->nspatial, off = 3 - ns;
    g.N = in_sp->sizes[0];
    g.Cout = w->sizes[0];
    g.G = p->groups;
    g.Cgi = w->sizes[1];
    g.Cin = g.Cgi * g.G;
    g.Cgo = g.Cout / g.G;
    int64_t isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) {
        g.K[i] = 1;
        g.s[i] = 1;
        g.d[i] = 1;
        g.ws[2 + i] = 0;
    }
    for (int i = 0; i < ns; i++) {
        isz[off + i] = in_sp->sizes[2 + i];
        osz[off + i] = out_sp->sizes[2 + i];
        g.K[off + i] = w->sizes[2 + i];
        g.s[off + i] = p->stride[i];
        g.p[off + i] = p->padding[i];
        g.d[off + i] = p->dilation[i];
        g.ws[2 + off + i] = w->strides[2 + i];
    }
    g.ws[0] = w->strides[0];
    g.ws[1] = w->strides[1];
    g.D = isz[0], g.H = isz[1], g.W = isz[2];
    g.OD = osz[0], g.OH = osz[1], g.OW = osz[2];
    g.T = g.K[0] * g.K[1] * g.K[2];
    g.w = (const float *)(const void *)mft__tensor_ptr(w);
    g.bias = p->bias ? (const float *)(const void *)mft__tensor_ptr(p->bias) : NULL;
    g.bstride = p->bias ? p->bias->strides[0] : 0;
    return g;
}

static void gw_strides_of(const mft_tensor *gw, int ns, int64_t *s) {
    s[0] = gw->strides[0];
    s[1] = gw->strides[1];
    s[2] = ns == 3 ? gw->strides[2] : 0;
    s[3] = gw->strides[ns == 3 ? 3 : 2];
    s[4] = gw->strides[ns == 3 ? 4 : 3];
}

#define FPTR(t) ((float *)(void *)mft__tensor_ptr(t))

/* ---------------------------------------------------------------- single channel, Winograd */
/* The single-input-channel kernels' geometry (ops/conv/plane.c), or false. */
static bool plane_geom(const cgeom *g, mft__plane_geom *pg) {
    if (g->Cin != 1 || g->G != 1 || g->D != 1 || g->OD != 1 || g->K[0] != 1 || cf_mode() != 0)
        return false;
    *pg = (mft__plane_geom){g->N,   g->H,    g->W,    g->OH,   g->OW,   g->Cout, g->K[1],
                            g->K[2], g->s[1], g->s[2], g->p[1], g->p[2], g->d[1], g->d[2],
                            g->w,   {g->ws[0], g->ws[1], g->ws[3], g->ws[4]},
                            g->bias, g->bstride};
    return true;
}

/* The Winograd geometry (ops/conv/winograd.c) of a 2-D 3x3, stride 1, dilation
 * 1, groups 1 forward or backward_input, or false where it does not apply.
 * backward_input is the forward convolution of grad_y with padding 2 - p
 * and the weights flipped in H and W with c_in and c_out swapped (a view
 * with negative strides). */
static bool wino_geom(const cgeom *g, bool bwd, mft__wino_geom *wg) {
    if (cf_mode() != 0 || g->G != 1 || g->D != 1 || g->OD != 1 || g->K[0] != 1 || g->K[1] != 3 ||
        g->K[2] != 3 || g->s[1] != 1 || g->s[2] != 1 || g->d[1] != 1 || g->d[2] != 1)
        return false;
    if (!bwd) {
        *wg = (mft__wino_geom){g->N,   g->H,   g->W,  g->Cin, g->Cout,
                               g->OH,  g->OW,  g->p[1], g->p[2], g->w,
                               {g->ws[0], g->ws[1], g->ws[3], g->ws[4]}, g->bias, g->bstride, false,
                               NULL};
    } else {
        if (g->p[1] > 2 || g->p[2] > 2) return false;
        *wg = (mft__wino_geom){g->N,
                               g->OH,
                               g->OW,
                               g->Cout,
                               g->Cin,
                               g->H,
                               g->W,
                               2 - g->p[1],
                               2 - g->p[2],
                               g->w + 2 * g->ws[3] + 2 * g->ws[4],
                               {g->ws[1], g->ws[0], -g->ws[3], -g->ws[4]},
                               g->bias,
                               g->bstride,
                               false,
                               NULL};
    }
    return mft__conv_wino_applies(wg);
}

/* Winograd (kind 0 forward: a = x, o = y; 1 backward_input: a = grad_y,
 * o = grad_x; 2 backward_weight: a = grad_y, b = x, o = grad_w at gws) on
 * NHWC tensors, or on NCHW ones (nchw) transposed to NHWC into scratch and
 * a forward result transposed back (three passes over memory, small beside
 * the convolution). False, having written nothing, where it does not apply,
 * or (mft__kernel_failed then true) where memory is short; true also
 * reports the algorithm in the kernel name. */
static bool run_wino(const cgeom *g, int kind, const float *a, const float *b, float *o,
                     const int64_t *gws, bool nchw) {
    static const char *const names[2][3] = {
        {"conv2d.nhwc.f32.winograd_f4x3", "conv2d_backward_input.nhwc.f32.winograd_f4x3",
         "conv2d_backward_weight.nhwc.f32.winograd_f4x3"},
        {"conv2d.nchw.f32.via_nhwc_winograd_f4x3",
         "conv2d_backward_input.nchw.f32.via_nhwc_winograd_f4x3",
         "conv2d_backward_weight.nchw.f32.via_nhwc_winograd_f4x3"}};
    mft__wino_geom wg;
    if (!wino_geom(g, kind == 1, &wg)) return false;
    const float *src = kind == 2 ? b : a, *gy = a; /* the convolution's input, grad_y */
    float *dst = o, *t = NULL;
    const int64_t Si = wg.H * wg.W, So = wg.OH * wg.OW;
    if (nchw) {
        const size_t ni = (size_t)(wg.N * wg.C * Si), no = (size_t)(wg.N * wg.K * So);
        t = mft__alloc((ni + no) * sizeof(float) + 64, 64);
        if (!t) { /* Note [Kernel scratch] */
            mft__kernel_nomem((ni + no) * sizeof(float) + 64);
            return false;
        }
        float *t2 = t + (ni + 15) / 16 * 16;
        mft__conv_transpose(src, t, wg.N, wg.C, Si, true);
        src = t;
        if (kind == 2) {
            mft__conv_transpose(a, t2, wg.N, wg.K, So, true);
            gy = t2;
        } else {
            dst = t2;
        }
    }
    const bool ok = kind == 2 ? mft__conv_wino_backward_weight(&wg, gy, src, o, gws)
                              : mft__conv_wino_forward(&wg, src, dst);
    if (ok && nchw && kind != 2) mft__conv_transpose(dst, o, wg.N, wg.K, So, false);
    mft__free(t);
    if (ok) mft__dispatch_report_as(names[nchw][kind]);
    return ok;
}

/* The algorithm chains: each algorithm that does not apply returns false
 * and the next is tried; one that ran out of scratch memory stops the chain
 * (mft__kernel_failed: the dispatcher fails the op, Note [Kernel scratch]).
 * True when done (or failed); false only from the direct loops' test mode on
 * NCHW destinations. */
static bool run_fwd(const cgeom *g, const float *x, float *y, bool onchw) {
    mft__plane_geom pg;
    if (!onchw && run_wino(g, 0, x, NULL, y, NULL, false)) return true;
    if (mft__kernel_failed()) return true;
    if (!onchw && plane_geom(g, &pg) && mft__conv_plane_applies(&pg) &&
        mft__conv_plane_forward(&pg, x, y))

/* ---------------------------------------------------------------- NHWC entry kernels */
        return true;
    if (mft__kernel_failed()) return true;
    if (is_depthwise(g) && cf_mode() != 2)
        return mft__conv_depthwise(g, 0, x, NULL, y, NULL, onchw);
    return mft__conv_indirect(g, false, x, y, onchw, false);
}
static bool run_bwd_in(const cgeom *g, const float *gy, float *gx, bool onchw) {
    if (!onchw && run_wino(g, 1, gy, NULL, gx, NULL, false)) return true;
    if (mft__kernel_failed()) return true;
    if (is_depthwise(g) && cf_mode() != 2)
        return mft__conv_depthwise(g, 1, gy, NULL, gx, NULL, onchw);
    return mft__conv_indirect(g, true, gy, gx, onchw, false);
}
static void run_bwd_w(const cgeom *g, const float *gy, const float *x, float *gw,
                      const int64_t *gws) {
    mft__plane_geom pg;
    if (run_wino(g, 2, gy, x, gw, gws, false) || mft__kernel_failed()) return;
    if (cf_mode() == 2) {
        mft__conv_direct_nhwc(g, 2, gy, x, gw, gws);
    } else if (plane_geom(g, &pg) && mft__conv_plane_applies(&pg) &&
               mft__conv_plane_backward_weight(&pg, gy, x, gw, gws)) {
        return;
    } else if (mft__kernel_failed()) {
        return;
    } else if (is_depthwise(g)) {
        mft__conv_depthwise(g, 2, gy, x, gw, gws, false);
    } else {
        mft__conv_backward_weight(g, gy, x, gw, gws);
    }
}

static void conv_fwd_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[0], a->outputs[0], a->inputs[1]);
    run_fwd(&g, FPTR(a->inputs[0]), FPTR(a->outputs[0]), false);
}
static void conv_bwd_in_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->outputs[0], a->inputs[0], a->inputs[1]);
    run_bwd_in(&g, FPTR(a->inputs[0]), FPTR(a->outputs[0]), false);
}
static void conv_bwd_w_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[1], a->inputs[0], a->outputs[0]);
    g.bias = NULL;
    int64_t gws[5];
    gw_strides_of(a->outputs[0], ((const mft_conv_params *)a->params)->nspatial, gws);
    run_bwd_w(&g, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws);
}

/* ---------------------------------------------------------------- NCHW entry kernels
 * Note [NCHW kernels] above. */
/* NCHW forward (bwd false) and backward_input (bwd true): the source is x
 * (C = Cin, spatial = input) or grad_y (C = Cout, spatial = output). */
static void conv_nchw_run(const mft_kernel_args *a, bool bwd) {
    const int kind = bwd ? 1 : 0;
    cgeom g = bwd ? geom_of(a, a->outputs[0], a->inputs[0], a->inputs[1])
                  : geom_of(a, a->inputs[0], a->outputs[0], a->inputs[1]);
    const float *src = FPTR(a->inputs[0]);
    float *dst = FPTR(a->outputs[0]);
    mft__plane_geom pg; /* one input channel: ops/conv/plane.c */
    if (!bwd && plane_geom(&g, &pg) && mft__conv_plane_forward_nchw(&pg, src, dst)) return;
    if (mft__kernel_failed() || mft__conv_depthwise_nchw(&g, kind, src, NULL, dst, NULL)) return;
    if (cf_mode() != 2 && is_pointwise(&g) && !is_depthwise(&g) &&
        mft__conv_pointwise_nchw(&g, bwd, src, dst))
        return;
    const int64_t C = bwd ? g.Cout : g.Cin;
    const int64_t S = bwd ? g.OD * g.OH * g.OW : g.D * g.H * g.W;
    const bool c1 = C == 1; /* NCHW and NHWC coincide */
    if (!c1 && run_wino(&g, kind, src, NULL, dst, NULL, true)) return;
    if (mft__kernel_failed()) return;
    if (!c1 && g.N >= 8 && !is_depthwise(&g) && cf_mode() != 2 &&
        mft__conv_indirect(&g, bwd, src, dst, true, true))
        return;
    if (cf_mode() == 2) { /* tests: the direct loops */
        mft__conv_direct_nchw(&g, kind, src, NULL, dst, NULL);
        return;
    }
    float *t = c1 ? NULL : mft__alloc((size_t)(g.N * C * S) * sizeof(float) + 64, 64);
    if (!c1 && !t) { /* Note [Kernel scratch] */
        mft__kernel_nomem((size_t)(g.N * C * S) * sizeof(float) + 64);
        return;
    }
    if (!c1) mft__conv_transpose(src, t, g.N, C, S, true);
    const float *in = c1 ? src : t;
    if (bwd)
        run_bwd_in(&g, in, dst, true);
    else
        run_fwd(&g, in, dst, true);
    mft__free(t);
}

static void conv_fwd_nchw(const mft_kernel_args *a) { conv_nchw_run(a, false); }
static void conv_bwd_in_nchw(const mft_kernel_args *a) { conv_nchw_run(a, true); }

static void conv_bwd_w_nchw(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[1], a->inputs[0], a->outputs[0]);
    g.bias = NULL;
    int64_t gws[5];
    gw_strides_of(a->outputs[0], ((const mft_conv_params *)a->params)->nspatial, gws);
    mft__plane_geom pg; /* one input channel: ops/conv/plane.c */
    if (plane_geom(&g, &pg) &&
        mft__conv_plane_backward_weight_nchw(&pg, FPTR(a->inputs[0]), FPTR(a->inputs[1]),
                                             FPTR(a->outputs[0]), gws))
        return;
    if (mft__kernel_failed() ||
        mft__conv_depthwise_nchw(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]),
                                 gws))
        return;
    if (run_wino(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws, true) ||
        mft__kernel_failed())
        return;
    /* x to NHWC only, grad_y read in place, where that pays */
    if (mft__conv_backward_weight_nchw(&g, FPTR(a->inputs[0]), FPTR(a->inputs[1]),
                                       FPTR(a->outputs[0]), gws))
        return;
    if (cf_mode() == 2) { /* tests: the direct loops */
        mft__conv_direct_nchw(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]),
                              gws);
        return;
    }
    const int64_t Si = g.D * g.H * g.W, So = g.OD * g.OH * g.OW;
    float *gys = mft__alloc((size_t)(g.N * g.Cout * So) * sizeof(float) + 64, 64);
    float *xs = mft__alloc((size_t)(g.N * g.Cin * Si) * sizeof(float) + 64, 64);
    if (!gys || !xs) { /* Note [Kernel scratch] */
        mft__free(gys);
        mft__free(xs);
        mft__kernel_nomem((size_t)(g.N * (g.Cout * So + g.Cin * Si)) * sizeof(float) + 128);
        return;
    }
    mft__conv_transpose(FPTR(a->inputs[0]), gys, g.N, g.Cout, So, true);
    mft__conv_transpose(FPTR(a->inputs[1]), xs, g.N, g.Cin, Si, true);
    run_bwd_w(&g, gys, xs, FPTR(a->outputs[0]), gws);
    mft__free(gys);
    mft__free(xs);
}

/* ---------------------------------------------------------------- nChw16c entry kernels */
static bool b16_grouped(const mft_kernel_args *a) {
    return ((const mft_conv_params *)a->params)->groups > 1;
}
static void conv_fwd_b16(const mft_kernel_args *a) {
    (b16_grouped(a) ? mft__conv_dw16_fwd : mft__conv_b16_fwd)(a);
}
static void conv_bwd_in_b16(const mft_kernel_args *a) {
    (b16_grouped(a) ? mft__conv_dw16_bwd_in : mft__conv_b16_bwd_in)(a);
}
static void conv_bwd_w_b16(const mft_kernel_args *a) {
    (b16_grouped(a) ? mft__conv_dw16_bwd_w : mft__conv_b16_bwd_w)(a);
}

/* ---------------------------------------------------------------- kernel table */
const mft__kernel_def mft__kernels_conv_fast[] = {
    {MFT__OP_CONV2D, MFT_CHANNELS_LAST, MFT_F32, "conv2d.nhwc.f32." CF_SFX, conv_fwd_nhwc},
    {MFT__OP_CONV2D_BACKWARD_INPUT, MFT_CHANNELS_LAST, MFT_F32,
     "conv2d_backward_input.nhwc.f32." CF_SFX, conv_bwd_in_nhwc},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT_CHANNELS_LAST, MFT_F32,
     "conv2d_backward_weight.nhwc.f32." CF_SFX, conv_bwd_w_nhwc},
    {MFT__OP_CONV3D, MFT_CHANNELS_LAST, MFT_F32, "conv3d.ndhwc.f32." CF_SFX, conv_fwd_nhwc},
    {MFT__OP_CONV3D_BACKWARD_INPUT, MFT_CHANNELS_LAST, MFT_F32,
     "conv3d_backward_input.ndhwc.f32." CF_SFX, conv_bwd_in_nhwc},
    {MFT__OP_CONV3D_BACKWARD_WEIGHT, MFT_CHANNELS_LAST, MFT_F32,
     "conv3d_backward_weight.ndhwc.f32." CF_SFX, conv_bwd_w_nhwc},
    {MFT__OP_CONV2D, MFT_CONTIGUOUS, MFT_F32, "conv2d.nchw.f32.via_nhwc_" CF_SFX, conv_fwd_nchw},
    {MFT__OP_CONV2D_BACKWARD_INPUT, MFT_CONTIGUOUS, MFT_F32,
     "conv2d_backward_input.nchw.f32.via_nhwc_" CF_SFX, conv_bwd_in_nchw},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT_CONTIGUOUS, MFT_F32,
     "conv2d_backward_weight.nchw.f32.via_nhwc_" CF_SFX, conv_bwd_w_nchw},
    {MFT__OP_CONV3D, MFT_CONTIGUOUS, MFT_F32, "conv3d.ncdhw.f32.via_ndhwc_" CF_SFX, conv_fwd_nchw},
    {MFT__OP_CONV3D_BACKWARD_INPUT, MFT_CONTIGUOUS, MFT_F32,
     "conv3d_backward_input.ncdhw.f32.via_ndhwc_" CF_SFX, conv_bwd_in_nchw},
    {MFT__OP_CONV3D_BACKWARD_WEIGHT, MFT_CONTIGUOUS, MFT_F32,
     "conv3d_backward_weight.ncdhw.f32.via_ndhwc_" CF_SFX, conv_bwd_w_nchw},
    {MFT__OP_CONV2D, MFT_NCHW16C, MFT_F32, "conv2d.nchw16c.f32.direct", conv_fwd_b16},
    {MFT__OP_CONV2D_BACKWARD_INPUT, MFT_NCHW16C, MFT_F32,
     "conv2d_backward_input.nchw16c.f32.direct", conv_bwd_in_b16},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT_NCHW16C, MFT_F32,
     "conv2d_backward_weight.nchw16c.f32.direct", conv_bwd_w_b16},
    {0, 0, 0, NULL, NULL},
};
