/* tests/autograd/test_golden_autograd.c — the tape against PyTorch's autograd on
 * conv2d -> [batch_norm] -> relu -> max_pool2d chains
 * (tests/golden/gen_autograd_chain.py -> autograd_chain_cases.txt), in
 * NCHW, NHWC and mixed input/weight formats, F32 and F64: forward values,
 * every leaf gradient, the gradients' layouts (docs/spec.md §5: each leaf's grad
 * has its leaf's strides) and zero format conversions in backward; each
 * chain twice, relu and max_pool2d as two ops and as mft_relu_max_pool2d. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "harness.h"
#include "test_util.h"

#define MAXV 4096

typedef struct chain_case {
    char name[64];
    mft_dtype dt;
    mft_format xf, wf;
    int bn;
    int64_t N, C, H, W, K;
    int64_t n_out, n_gx, n_gw, n_gb, n_gg, n_gbe;
    double out[MAXV], gx[MAXV], gw[MAXV], gb[64], gg[64], gbe[64];
} chain_case;

static mft_tensor *filled(int nd, const int64_t *sz, mft_dtype dt, mft_format f, int which) {
    mft_tensor *t = mft_empty(nd, sz, dt, f);
    if (!t) return NULL;
    int64_t idx[4] = {0}, i = 0;
    do {
        double v = 0;
        switch (which) {
        case 0: v = ((37 * i + 11) % 23 - 11) / 4.0; break;
        case 1: v = ((13 * i + 5) % 19 - 9) / 16.0; break;
        case 2: v = ((3 * i + 1) % 7 - 3) / 8.0; break;
        case 3: v = 0.5 + (i % 5) / 4.0; break;
        case 4: v = ((2 * i + 1) % 5 - 2) / 4.0; break;
        default: v = ((7 * i + 3) % 11 - 5) / 4.0; break;
        }
        mft_tensor_set(t, idx, v);
        i++;
    } while (tu_next_index(nd, sz, idx));
    return t;
}

static int64_t read_vals(char **save, double *dst, int64_t cap) {
    char *tok = strtok_r(NULL, " \n", save);
    int64_t n = tok ? atoll(tok) : -1;
    for (int64_t i = 0; i < n && i < cap; i++) {
        tok = strtok_r(NULL, " \n", save);
        dst[i] = tok ? atof(tok) : NAN;
    }
    return n;
}

/* max |a - want| / (1 + |want|) over the tensor in logical order */
static double max_err(const mft_tensor *t, const double *want, int64_t n) {
    if (!t || mft_tensor_numel(t) != n) return INFINITY;
    int64_t idx[4] = {0}, i = 0;
    double e = 0;
    do {
        double d = fabs(mft_tensor_get(t, idx) - want[i]) / (1.0 + fabs(want[i]));
        if (!(d <= e)) e = d;
        i++;
    } while (tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx));
    return e;
}

static bool same_strides(const mft_tensor *g, const mft_tensor *leaf) {
    if (!g) return false;
    for (int d = 0; d < mft_tensor_ndim(leaf); d++)
        if (mft_tensor_sizes(leaf)[d] > 1 && mft_tensor_strides(g)[d] != mft_tensor_strides(leaf)[d])
            return false;
    return true;
}

static void run_case(const chain_case *c, bool fused) {
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->K, c->C, 3, 3}, ks[1] = {c->K};
    mft_tensor *x = filled(4, xs, c->dt, c->xf, 0), *w = filled(4, ws, c->dt, c->wf, 1);
    mft_tensor *b = filled(1, ks, c->dt, MFT_CONTIGUOUS, 2);
    mft_tensor *g = filled(1, ks, c->dt, MFT_CONTIGUOUS, 3), *be = filled(1, ks, c->dt, MFT_CONTIGUOUS, 4);
    mft_tensor *rm = mft_zeros(1, ks, c->dt, MFT_CONTIGUOUS), *rv = mft_ones(1, ks, c->dt, MFT_CONTIGUOUS);
    mft_tensor *leaves[5] = {x, w, b, g, be};
    for (int i = 0; i < 5; i++) mft_tensor_set_requires_grad(leaves[i], true);
    const int64_t one[2] = {1, 1}, k2[2] = {2, 2};
    const double tol = c->dt == MFT_F32 ? 2e-4 : 1e-9;
    mft_autograd_conversions_reset();
    mft_scope_begin();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = mft_conv2d(x, w, b, one, one, one, 1);
    if (c->bn) y = mft_batch_norm(y, rm, rv, g, be, true, 0.1, 1e-5);
    y = fused ? mft_relu_max_pool2d(y, k2, k2, NULL, NULL, false)
              : mft_max_pool2d(mft_relu(y), k2, k2, NULL, NULL, false);
    mft_tensor *r = y ? filled(4, mft_tensor_sizes(y), c->dt, MFT_CONTIGUOUS, 5) : NULL;
    mft_tensor *loss = mft_sum(mft_mul(y, r), 0, NULL, false);
    CHECK_MSG(loss != NULL, "%s: forward failed: %s", c->name, mft_last_error_message());
    mft_status st = loss ? mft_backward(loss, NULL) : MFT_ERR_NULL;
    CHECK_MSG(st == MFT_OK, "%s: backward failed: %s", c->name, mft_last_error_message());
    mft_tape_end();
    double e = max_err(y, c->out, c->n_out);
    CHECK_MSG(e <= tol, "%s%s: forward max rel err %g", c->name, fused ? " (fused)" : "", e);
    mft_scope_end(); /* releases y, r, loss and every intermediate */
    const struct {
        const char *what;
        mft_tensor *leaf;
        const double *want;
        int64_t n;
    } gr[5] = {{"grad_x", x, c->gx, c->n_gx},       {"grad_w", w, c->gw, c->n_gw},
               {"grad_b", b, c->gb, c->n_gb},       {"grad_gamma", g, c->gg, c->bn ? c->n_gg : 0},
               {"grad_beta", be, c->gbe, c->bn ? c->n_gbe : 0}};
    for (int i = 0; i < 5; i++) {
        mft_tensor *gt = mft_tensor_grad(gr[i].leaf);
        if (i >= 3 && !c->bn) {
            CHECK_MSG(gt == NULL, "%s: %s set without batch norm", c->name, gr[i].what);
            continue;
        }
        double ge = max_err(gt, gr[i].want, gr[i].n);
        CHECK_MSG(ge <= tol * 4, "%s%s: %s max rel err %g", c->name, fused ? " (fused)" : "",
                  gr[i].what, ge);
        CHECK_MSG(same_strides(gt, gr[i].leaf), "%s: %s does not have its leaf's strides",
                  c->name, gr[i].what);
    }
    CHECK_MSG(mft_autograd_conversions() == 0, "%s: %lld gradient conversions in backward",
              c->name, (long long)mft_autograd_conversions());
    for (int i = 0; i < 5; i++) mft_tensor_release(leaves[i]);
    mft_tensor_release(rm), mft_tensor_release(rv);
}

static void test_chains(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/autograd_chain_cases.txt", MFT_TEST_DATA_DIR);
    FILE *fp = fopen(path, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", path);
    if (!fp) return;
    static char line[1 << 20];
    static chain_case c;
    int ncases = 0;
    while (fgets(line, sizeof line, fp)) {
        char *save = NULL, *key = strtok_r(line, " \n", &save);
        if (!key || key[0] == '#') continue;
        if (!strcmp(key, "case")) {
            memset(&c, 0, sizeof c);
            snprintf(c.name, sizeof c.name, "%s", strtok_r(NULL, " \n", &save));
        } else if (!strcmp(key, "config")) {
            char *dt = strtok_r(NULL, " \n", &save), *xf = strtok_r(NULL, " \n", &save),
                 *wf = strtok_r(NULL, " \n", &save);
            c.dt = !strcmp(dt, "f32") ? MFT_F32 : MFT_F64;
            c.xf = !strcmp(xf, "channels_last") ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            c.wf = !strcmp(wf, "channels_last") ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            c.bn = atoi(strtok_r(NULL, " \n", &save));
            c.N = atoll(strtok_r(NULL, " \n", &save));
            c.C = atoll(strtok_r(NULL, " \n", &save));
            c.H = atoll(strtok_r(NULL, " \n", &save));
            c.W = atoll(strtok_r(NULL, " \n", &save));
            c.K = atoll(strtok_r(NULL, " \n", &save));
        } else if (!strcmp(key, "out")) c.n_out = read_vals(&save, c.out, MAXV);
        else if (!strcmp(key, "grad_x")) c.n_gx = read_vals(&save, c.gx, MAXV);
        else if (!strcmp(key, "grad_w")) c.n_gw = read_vals(&save, c.gw, MAXV);
        else if (!strcmp(key, "grad_b")) c.n_gb = read_vals(&save, c.gb, 64);
        else if (!strcmp(key, "grad_gamma")) c.n_gg = read_vals(&save, c.gg, 64);
        else if (!strcmp(key, "grad_beta")) c.n_gbe = read_vals(&save, c.gbe, 64);
        else if (!strcmp(key, "end")) {
            run_case(&c, false);
            run_case(&c, true); /* the same chain through the fused relu_max_pool2d */
            ncases++;
        }
    }
    fclose(fp);
    CHECK_EQ_I(ncases, 16);
}

int main(void) {
    RUN(test_chains);
    TEST_MAIN_END();
}
