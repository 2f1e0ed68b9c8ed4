/* ops/conv/direct.c — the plain direct loops of the fast F32 kernels, on
 * packed NHWC and on NCHW buffers: what the tests force with
 * mft__conv_fast_set_mode(2) to check the chains' plumbing (transposes,
 * tiling, the kernel table) against the simplest loop in the same layout.
 * Called from indirect.c, backward_weight.c and chains.c in that mode. */
#include "conv_internal.h"

/* ---------------------------------------------------------------- direct loops
 * The plain loops the tests force (mft__conv_fast_set_mode(2)) on packed NHWC
 * buffers: kind 0 forward
 * (a = x, o = y), 1 backward_input (a = grad_y, o = grad_x), 2
 * backward_weight (a = grad_y, b = x, o = grad_w with element strides gws). */
void mft__conv_direct_nhwc(const cgeom *g, int kind, const float *a, const float *b, float *o,
                           const int64_t *gws) {
    if (kind == 1) {
        const int64_t n_out = g->N * g->D * g->H * g->W * g->Cin;
        for (int64_t i = 0; i < n_out; i++) o[i] = bval(g, i % g->Cin);
    } else if (kind == 0) {
        const int64_t n_out = g->N * g->OD * g->OH * g->OW * g->Cout;
        for (int64_t i = 0; i < n_out; i++) o[i] = bval(g, i % g->Cout);
    } else {
        for (int64_t co = 0; co < g->Cout; co++)
            for (int64_t ci = 0; ci < g->Cgi; ci++)
                for (int64_t t = 0; t < g->T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = 0.0f;
                }
    }
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t od = 0; od < g->OD; od++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++)
                    for (int64_t t = 0; t < g->T; t++) {
                        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                      kd = t / (g->K[2] * g->K[1]);
                        const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        const int64_t iw = ow * g->s[2] - g->p[2] + kw * g->d[2];
                        if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
                            continue;
                        const int64_t op = ((n * g->OD + od) * g->OH + oh) * g->OW + ow;
                        const int64_t ip = ((n * g->D + id) * g->H + ih) * g->W + iw;
                        for (int64_t co = 0; co < g->Cout; co++) {
                            const int64_t gg = co / g->Cgo;
                            for (int64_t ci = 0; ci < g->Cgi; ci++) {
                                const int64_t c = gg * g->Cgi + ci;
                                if (kind == 0) {
                                    o[op * g->Cout + co] += a[ip * g->Cin + c] * wval(g, co, ci, t);
                                } else if (kind == 1) {
                                    o[ip * g->Cin + c] += a[op * g->Cout + co] * wval(g, co, ci, t);
                                } else {
                                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] +
                                      kw * gws[4]] += a[op * g->Cout + co] * b[ip * g->Cin + c];
                                }
                            }
                        }
                    }
}

/* Direct loops on NCHW buffers (the tests' mode 2): via element strides. */
void mft__conv_direct_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                           const int64_t *gws) {
    const int64_t Si = g->D * g->H * g->W, So = g->OD * g->OH * g->OW;
    if (kind == 0) {
        for (int64_t i = 0; i < g->N * g->Cout * So; i++) o[i] = bval(g, (i / So) % g->Cout);
    } else if (kind == 1) {
        for (int64_t i = 0; i < g->N * g->Cin * Si; i++) o[i] = bval(g, (i / Si) % g->Cin);
    }
    for (int64_t co = 0; co < g->Cout; co++)
        for (int64_t ci = 0; ci < g->Cgi; ci++)
            for (int64_t t = 0; t < g->T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                const int64_t c = (co / g->Cgo) * g->Cgi + ci;
                const float wv = kind == 2 ? 0.0f : wval(g, co, ci, t);
                float s = 0.0f;
                for (int64_t n = 0; n < g->N; n++)
                    for (int64_t od = 0; od < g->OD; od++)
                        for (int64_t oh = 0; oh < g->OH; oh++)
                            for (int64_t ow = 0; ow < g->OW; ow++) {
                                const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                                const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                                const int64_t iw = ow * g->s[2] - g->p[2] + kw * g->d[2];
                                if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || iw < 0 ||
                                    iw >= g->W)
                                    continue;
                                const int64_t op =
                                    (n * g->Cout + co) * So + (od * g->OH + oh) * g->OW + ow;
                                const int64_t ip =
                                    (n * g->Cin + c) * Si + (id * g->H + ih) * g->W + iw;
                                if (kind == 0)
                                    o[op] += a[ip] * wv;
                                else if (kind == 1)
                                    o[ip] += a[op] * wv;
                                else
                                    s += a[op] * b[ip];
                            }
                if (kind == 2)
                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = s;
            }
}
