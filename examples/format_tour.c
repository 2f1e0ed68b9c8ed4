/* examples/format_tour.c — follows one batch through the Fashion-MNIST CNN
 * (conv 1->32, relu, pool, conv 32->64, relu, pool, flatten, linear, relu,
 * linear) and prints, layer by layer, the tensor's sizes, strides, format tag
 * with its origin, the kernel that ran and the conversions by cause; then
 * asks the library why the flatten input has its format (the provenance
 * chain), runs the backward, and checks a reorder budget. Flatten and the
 * first linear run as one mft_flatten_linear, as the model's sequential runs
 * them (Note [Sequential peepholes] in nn/compose.c): no copy at flatten in
 * any format. Runs:
 *   nchw   the model and the input in NCHW (PyTorch's default);
 *   nhwc   model.to(channels_last) and an NHWC input: no hidden copy;
 *   mixed  channels-last weights, an NCHW RGB-like input (C = 3): the copies
 *          this costs, the ops they are attributed to, and the budget
 *          catching them;
 *   nchw16c  blocked activations (oneDNN's nChw16c) and plain weights.
 * docs/tutorial.md quotes this program's output. Random data: formats and
 * copies do not depend on the values.
 *
 * Usage: format_tour [nchw|nhwc|mixed|nchw16c]... (default: all four)
 *        [--profile] (also the profiler table of the last run)
 *        [--trace FILE] (Chrome trace JSON of the last run) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mft/mft.h>

enum { NLAYERS = 10, BATCH = 64, FLATTEN = 6 };

typedef struct tour {
    const char *name;
    mft_format model_fmt, input_fmt;
    int64_t c_in;
} tour;

static void dims(char *buf, size_t n, int nd, const int64_t *v) {
    size_t pos = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && pos < n; i++)
        pos += (size_t)snprintf(buf + pos, n - pos, "%s%lld", i ? "," : "", (long long)v[i]);
    if (pos < n) snprintf(buf + pos, n - pos, "]");
}

static const char *short_fmt(const mft_tensor *t) { return mft_format_name(mft_tensor_format(t)); }

/* The strides column: the strides, or for a blocked tensor (which has no
 * plain strides, docs/spec.md §7.6) its oneDNN name. */
static void strides_of(char *buf, size_t n, const mft_tensor *t) {
    if (mft_tensor_is_blocked(t)) {
        snprintf(buf, n, "%s", mft_tensor_format(t) == MFT_NCHW16C ? "(nChw16c blocks)"
                               : mft_tensor_format(t) == MFT_NCHW8C ? "(nChw8c blocks)"
                                                                     : "(blocked)");
        return;
    }
    dims(buf, n, mft_tensor_ndim(t), mft_tensor_strides(t));
}


static void conv_summary(char *buf, size_t n) {
    mft_conversion_counts c = mft_conversion_counts_get();
    size_t pos = 0;
    buf[0] = '\0';
    for (int k = 0; k < MFT_CAUSE_COUNT && pos < n; k++)
        if (c.count[k])
            pos += (size_t)snprintf(
                buf + pos, n - pos, "%s%lld %s (%lld KB)", pos ? ", " : "", (long long)c.count[k],
                mft_conversion_cause_name((mft_conversion_cause)k), (long long)(c.bytes[k] / 1024));
    if (!pos) snprintf(buf, n, "-");
    mft_conversion_counts_reset();
}

/* Runs layer i of l on h, or layers FLATTEN and FLATTEN + 1 (flatten, then
 * linear) as one mft_flatten_linear with the linear layer's parameters, as
 * the model's sequential does; *used is the number of layers run. */
static mft_tensor *tour_layer(mft_module *const *l, int i, mft_tensor *h, int *used) {
    *used = 1;
    if (i != FLATTEN) return mft_module_forward(l[i], h);
    mft_tensor *wb[2] = {NULL, NULL};
    if (mft_module_parameters(l[FLATTEN + 1], wb, NULL, 2) != 2) return NULL;
    *used = 2;
    return mft_flatten_linear(h, wb[0], wb[1]);
}

/* One silent training step (no update), so the step shown runs on warm
 * memory like every later step of a training loop. It runs the layers one
 * by one and keeps every output until the end, as the step shown does: the
 * block cache (tensor/alloc.c) then holds as many blocks of each size as
 * that step needs at once. */
static void warm_up(mft_module *const *l, int n, mft_module *model, mft_tensor *x, mft_tensor *y) {
    mft_scope_begin();
    mft_tape_begin();
    mft_tensor *h = x;
    for (int i = 0, used = 1; i < n && h; i += used) h = tour_layer(l, i, h, &used);
    mft_tensor *loss = h ? mft_cross_entropy(h, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN) : NULL;
    if (loss) mft_backward(loss, NULL);
    mft_tape_end();
    mft_tensor *ps[16];
    int np = mft_module_parameters(model, ps, NULL, 16);
    for (int i = 0; i < np; i++) mft_tensor_set_grad(ps[i], NULL); /* as before the step */
    mft_scope_end();
}

static int tour_fail(void) {
    fprintf(stderr, "format_tour: %s\n", mft_last_error_message());
    return 1;
}

static int run(const tour *t, bool profile, const char *trace) {
    int rc = 0;
    char first[32];
    snprintf(first, sizeof first, "conv2d %lld->32", (long long)t->c_in);
    const char *const names[NLAYERS] = {first,  "relu",          "max_pool2d", "conv2d 32->64",
                                        "relu", "max_pool2d",    "flatten + linear", "",
                                        "relu", "linear 128->10"};
    /* The model: mft_nn_fashion_cnn (mft/nn.h) with this tour's input
     * channels and seed 0 (the layers get seeds 1..4), made in the tour's
     * model format. l[] receives its NLAYERS layers (borrowed: the model
     * owns them), which the step below runs one by one. */
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    const mft_fashion_cnn_config cfg = {
        .in_channels = t->c_in,
        .format = t->model_fmt,
        .layers = l,
    };
    mft_module *model = MFT_AT(mft_nn_fashion_cnn(&cfg));
    if (!model) return tour_fail();
    printf("\n== %s: model %s, input %s ==\n", t->name, mft_format_name(t->model_fmt),
           mft_format_name(t->input_fmt));
    mft_scope_begin();
    const int64_t xs[4] = {BATCH, t->c_in, 28, 28}, ys[1] = {BATCH};
    mft_tensor *x = MFT_AT(mft_rand(4, xs, MFT_F32, t->input_fmt, 7));
    mft_tensor *y = mft_zeros(1, ys, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *params[16];
    int np = mft_module_parameters(model, params, NULL, 16);
    warm_up(l, NLAYERS, model, x, y); /* first-touch page faults stay out of the profile */
    if (profile || trace) mft_profile_begin();
    mft_conversion_counts_reset();
    mft_reorder_budget_begin(0);
    mft_tape_begin();
    printf("%-17s %-15s %-18s %-26s %-40s %s\n", "layer", "sizes", "strides", "tag (origin)",
           "kernel", "conversions");
    char sz[64], st[64], cv[128];
    dims(sz, sizeof sz, 4, xs);
    strides_of(st, sizeof st, x);
    printf("%-17s %-15s %-18s %-13s %-12s %-40s %s\n", "input", sz, st, short_fmt(x),
           mft_origin_name(mft_tensor_format_origin(x)), "", "-");
    mft_tensor *h = x, *flat_in = NULL;
    for (int i = 0, used = 1; i < NLAYERS && h; i += used) {
        const mft_dispatch_info before = *mft_dispatch_last();
        if (i == FLATTEN) flat_in = h;
        h = MFT_AT(tour_layer(l, i, h, &used));
        if (!h) break;
        const mft_dispatch_info *d = mft_dispatch_last();
        bool dispatched = d->seq != before.seq;
        const char *kernel = dispatched ? d->kernel : "(elementwise engine)";
        conv_summary(cv, sizeof cv);
        dims(sz, sizeof sz, mft_tensor_ndim(h), mft_tensor_sizes(h));
        strides_of(st, sizeof st, h);
        printf("%-17s %-15s %-18s %-13s %-12s %-40s %s\n", names[i], sz, st, short_fmt(h),
               mft_origin_name(mft_tensor_format_origin(h)), kernel, cv);
    }
    mft_tensor *loss = h ? mft_cross_entropy(h, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN) : NULL;
    if (flat_in) {
        size_t need = mft_tensor_provenance(flat_in, NULL, 0);
        char *pv = malloc(need + 1);
        if (pv) {
            mft_tensor_provenance(flat_in, pv, need + 1);
            printf("\nwhy is the flatten input %s? (mft_tensor_provenance)\n%s", short_fmt(flat_in),
                   pv);
            free(pv);
        }
    }
    mft_status st_b = loss ? MFT_AT(mft_backward(loss, NULL)) : mft_last_error();
    conv_summary(cv, sizeof cv);
    printf("\nbackward: %s; conversions: %s\n", st_b == MFT_OK ? "ok" : mft_last_error_message(),
           cv);
    bool grads_ok = st_b == MFT_OK;
    for (int i = 0; i < np && grads_ok; i++) {
        const mft_tensor *g = mft_tensor_grad(params[i]);
        grads_ok =
            g && (mft_tensor_ndim(g) != 4 || mft_tensor_format(g) == mft_tensor_format(params[i]));
    }
    printf("every parameter's gradient has its parameter's format: %s\n", grads_ok ? "yes" : "NO");
    mft_tape_end();
    mft_status bst = mft_reorder_budget_end();
    printf("reorder budget 0 over the step: %s\n",
           bst == MFT_OK ? "held (no hidden conversion)" : mft_last_error_message());
    if (profile || trace) mft_profile_end();
    if (profile) {
        size_t need = mft_profile_table(NULL, 0);
        char *tb = malloc(need + 1);
        if (tb) {
            mft_profile_table(tb, need + 1);
            printf("\nprofile (mft_profile_table):\n%s", tb);
            free(tb);
        }
    }
    if (trace) {
        FILE *f = fopen(trace, "w");
        if (!f || mft_profile_write_chrome_trace(f) != MFT_OK) {
            fprintf(stderr, "format_tour: cannot write %s\n", trace);
            rc = 1;
        } else {
            printf("Chrome trace written to %s\n", trace);
        }
        if (f) fclose(f);
    }
    mft_profile_clear();
    mft_profile_site(NULL, 0); /* later calls are not this run's */
    if (st_b != MFT_OK || !grads_ok) rc = 1;
    mft_scope_end();
    mft_module_free(model);
    return rc;
}

int main(int argc, char **argv) {
    enum { NTOURS = 4 };
    static const tour tours[NTOURS] = {{"nchw", MFT_CONTIGUOUS, MFT_CONTIGUOUS, 1},
                                       {"nhwc", MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, 1},
                                       {"mixed", MFT_CHANNELS_LAST, MFT_CONTIGUOUS, 3},
                                       {"nchw16c", MFT_NCHW16C, MFT_NCHW16C, 1}};
    bool want[NTOURS] = {false, false, false, false}, any = false, profile = false;
    const char *trace = NULL;
    for (int i = 1; i < argc; i++) {
        bool ok = false;
        for (int k = 0; k < NTOURS; k++)
            if (!strcmp(argv[i], tours[k].name)) ok = want[k] = any = true;
        if (!strcmp(argv[i], "--profile")) ok = profile = true;
        if (!strcmp(argv[i], "--trace") && i + 1 < argc) ok = (trace = argv[++i]) != NULL;
        if (!ok) {
            fprintf(stderr, "usage: format_tour [nchw|nhwc|mixed|nchw16c]... [--profile] "
                            "[--trace FILE]\n");
            return 2;
        }
    }
    int rc = 0;
    for (int k = 0; k < NTOURS; k++)
        if (!any || want[k]) rc |= run(&tours[k], profile, trace);
    if (mft_live_tensors() != 0) {
        fprintf(stderr, "format_tour: %lld tensors leaked\n", (long long)mft_live_tensors());
        rc = 1;
    }
    return rc;
}
