/* tests/autograd/test_tape_dot.c — mft_tape_to_dot (mft/autograd.h): the Graphviz
 * picture of the tape.
 *   - a small CNN step (conv -> relu -> max_pool -> flatten -> linear ->
 *     cross_entropy) all in channels_last: one box per tape node, every op
 *     name and the kernels dispatch reports (mft_dispatch_last) in the
 *     labels, one red node per conversion the counters saw (flatten's two
 *     RESHAPE copies), none hidden; before backward no backward cluster,
 *     after it one backward box per node that ran;
 *   - the same with an NCHW input and channels-last weights: the two OPERAND
 *     copies (conv2d and conv2d_backward_weight) appear as hidden red nodes,
 *     red nodes = the conversion counters' total;
 *   - a leaf used twice is one node; more than 4 conversions in one op's
 *     stretch: 4 drawn + a "+N more" node; labels escaped (quotes,
 *     backslashes in the call site);
 *   - names: a leaf with a tensor name (mft_tensor_set_name) is labelled
 *     with it, one without keeps "leaf"; an op recorded inside a module
 *     (mft_module_path_push) shows its path and kind in its forward and
 *     backward boxes, one outside shows none;
 *   - errors: no tape (SCOPE), NULL f (NULL), a stream that cannot be
 *     written (IO);
 *   - `dot -Tsvg` accepts every picture (skipped with a note when Graphviz
 *     is not installed). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>
#include "harness.h"

/* ------------------------------------------------------------------ helpers */
typedef struct dot_file {
    char path[64];
    char *text; /* malloc'd contents after dot_capture */
} dot_file;

/* Writes the open tape into a new temporary file and reads it back. */
static mft_status dot_capture(dot_file *d) {
    snprintf(d->path, sizeof d->path, "/tmp/mft_tape_dot_XXXXXX");
    d->text = NULL;
    int fd = mkstemp(d->path);
    if (fd < 0) return MFT_ERR_IO;
    FILE *f = fdopen(fd, "w+");
    if (!f) {
        close(fd);
        return MFT_ERR_IO;
    }
    mft_status st = mft_tape_to_dot(f);
    long n = ftell(f);
    if (st == MFT_OK && n >= 0 && (d->text = malloc((size_t)n + 1)) != NULL) {
        rewind(f);
        size_t got = fread(d->text, 1, (size_t)n, f);
        d->text[got] = 0;
    }
    fclose(f);
    return st;
}

static void dot_drop(dot_file *d) {
    remove(d->path);
    free(d->text);
    d->text = NULL;
}

/* Lines of text that start with prefix followed by a digit (prefix "    f":
 * forward op boxes, "    b": backward boxes). */
static int count_ids(const char *text, const char *prefix) {
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, prefix, pl) == 0 && l[pl] >= '0' && l[pl] <= '9') n++;
    return n;
}

/* Lines that start with prefix and contain needle. */
static int count_lines(const char *text, const char *prefix, const char *needle) {
    int n = 0;
    char line[2048];
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len < sizeof line) {
            memcpy(line, l, len);
            line[len] = 0;
            if (strncmp(line, prefix, strlen(prefix)) == 0 && (!needle || strstr(line, needle)))
                n++;
        }
        l = e ? e + 1 : NULL;
    }
    return n;
}

static int count_str(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Conversion nodes: declared inside a cluster as x<f|b><i>_<j>. */
static int red_nodes(const char *text) { return count_lines(text, "    x", "color=red"); }
static int hidden_red_nodes(const char *text) {
    return count_lines(text, "    x", "fillcolor=\"#ff9c9c\"");
}

/* Graphviz must accept the file; skipped (with a note) without `dot`. */
static void check_dot_accepts(const char *path) {
    static int have_dot = -1;
    if (have_dot < 0) {
        have_dot = system("command -v dot >/dev/null 2>&1") == 0;
        if (!have_dot) printf("note: Graphviz `dot` not found, syntax check skipped\n");
    }
    if (!have_dot) return;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' -o /dev/null", path);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "`%s` exited with %d", cmd, rc);
}

/* ------------------------------------------------------------------ the model */
typedef struct cnn {
    mft_tensor *w1, *b1, *w2, *b2; /* conv 3->4 3x3 p1; linear 4*4*4 -> 5 */
} cnn;

static void cnn_init(cnn *m) {
    const int64_t ws[4] = {4, 3, 3, 3}, bs[1] = {4}, ls[2] = {5, 64}, lb[1] = {5};
    m->w1 = mft_randn(4, ws, MFT_F32, MFT_CHANNELS_LAST, 1);
    m->b1 = mft_zeros(1, bs, MFT_F32, MFT_CONTIGUOUS);
    m->w2 = mft_randn(2, ls, MFT_F32, MFT_CONTIGUOUS, 2);
    m->b2 = mft_zeros(1, lb, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *all[4] = {m->w1, m->b1, m->w2, m->b2};
    for (int i = 0; i < 4; i++)
        CHECK(all[i] && mft_tensor_set_requires_grad(all[i], true) == MFT_OK);
}

static void cnn_free(cnn *m) {
    mft_tensor_release(m->w1);
    mft_tensor_release(m->b1);
    mft_tensor_release(m->w2);
    mft_tensor_release(m->b2);
}

typedef struct step_names {
    const char *conv, *pool, *matmul; /* kernels dispatch reported */
} step_names;

/* The forward on the open tape (inside a scope); the loss, NULL on error. */
static mft_tensor *cnn_forward(const cnn *m, mft_format xf, step_names *k) {
    const int64_t xs[4] = {2, 3, 8, 8}, ys[1] = {2}, one[2] = {1, 1}, two[2] = {2, 2},
                  zero[2] = {0, 0};
    mft_tensor *x = mft_rand(4, xs, MFT_F32, xf, 3);
    mft_tensor *y = mft_zeros(1, ys, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *h = mft_conv2d(x, m->w1, m->b1, one, one, one, 1);
    k->conv = mft_dispatch_last()->kernel;
    h = mft_relu(h);
    h = mft_max_pool2d(h, two, two, zero, one, false);
    k->pool = mft_dispatch_last()->kernel;
    h = mft_flatten(h, 1, 3);
    h = mft_linear(h, m->w2, m->b2);
    k->matmul = mft_dispatch_last()->kernel;
    return mft_cross_entropy(h, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
}

/* The checks every picture passes: one box per tape node (and per node
 * whose backward ran), the op names, the kernels, red nodes = conversions,
 * hidden red nodes = hidden conversions, Graphviz accepts it. */
static void check_picture(const dot_file *d, int64_t nback, const step_names *k,
                          const mft_conversion_counts *c) {
    const char *t = d->text;
    CHECK_EQ_I(count_ids(t, "    f"), mft_tape_size());
    CHECK_EQ_I(count_ids(t, "    b"), nback);
    CHECK_EQ_I(count_str(t, "subgraph cluster_backward"), nback > 0);
    static const char *const ops[] = {"label=\"conv2d\\n",     "label=\"relu\\n",
                                      "label=\"max_pool2d\\n", "label=\"flatten\\n",
                                      "label=\"linear\\n",     "label=\"cross_entropy\\n"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        CHECK_MSG(count_lines(t, "    f", ops[i]) == 1, "%s not once in\n%s", ops[i], t);
    CHECK_MSG(strstr(t, k->conv) && strstr(t, k->pool) && strstr(t, k->matmul),
              "kernels %s, %s, %s missing in\n%s", k->conv, k->pool, k->matmul, t);
    CHECK_MSG(red_nodes(t) == c->total, "red nodes %d, conversions %lld\n%s", red_nodes(t),
              (long long)c->total, t);
    CHECK_EQ_I(hidden_red_nodes(t), c->hidden);
    CHECK_EQ_I(count_lines(t, "  l", "shape=ellipse"), 4); /* the four parameters */
    check_dot_accepts(d->path);
}

/* One step in input format xf: the picture after the forward, then after
 * backward; expect_* are the counters' totals (forward, whole step) and
 * hidden ones. */
static void run_step(mft_format xf, int64_t expect_fwd, int64_t expect_all, int64_t expect_hidden) {
    cnn m;
    cnn_init(&m);
    step_names k = {NULL, NULL, NULL};
    dot_file d;
    mft_scope_begin();
    mft_conversion_counts_reset();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *loss = cnn_forward(&m, xf, &k);
    CHECK(loss != NULL);
    CHECK_EQ_I(mft_tape_size(), 6);
    mft_conversion_counts c = mft_conversion_counts_get();
    CHECK_EQ_I(c.total, expect_fwd);
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        check_picture(&d, 0, &k, &c);
        CHECK(!strstr(d.text, " backward\\n"));
    }
    dot_drop(&d);

    CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
    c = mft_conversion_counts_get();
    CHECK_EQ_I(c.total, expect_all);
    CHECK_EQ_I(c.hidden, expect_hidden);
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        check_picture(&d, mft_tape_size(), &k, &c);
        CHECK(strstr(d.text, "conv2d_backward_weight"));
        CHECK(strstr(d.text, "label=\"flatten backward\\n"));
        CHECK_EQ_I(count_lines(d.text, "    xf", "reshape conversion\\nNHWC -> NCHW"), 1);
        CHECK_EQ_I(count_lines(d.text, "    xb", "reshape conversion\\nNCHW -> NHWC"), 1);
        CHECK(strstr(d.text, "-> b0 [dir=back"));        /* gradients flow into conv2d's backward */
        CHECK(strstr(d.text, "f5 -> b5 [style=dashed")); /* the seed at the loss */
    }
    dot_drop(&d);
    CHECK(mft_tape_end() == MFT_OK);
    mft_scope_end();
    cnn_free(&m);
}

/* All channels_last: flatten's RESHAPE copy forward and back, nothing hidden. */
static void test_nhwc_step(void) { run_step(MFT_CHANNELS_LAST, 1, 2, 0); }

/* NCHW input, channels-last weight: conv2d packs x (OPERAND) forward, and
 * conv2d_backward_weight again in backward: 2 hidden red nodes, shown as
 * NCHW -> NHWC and drawn on x's edge forward. */
static void test_mixed_step(void) {
    run_step(MFT_CONTIGUOUS, 2, 4, 2);
    cnn m;
    cnn_init(&m);
    step_names k;
    dot_file d = {{0}, NULL};
    mft_scope_begin();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *loss = cnn_forward(&m, MFT_CONTIGUOUS, &k);
    CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        CHECK_EQ_I(count_lines(d.text, "    xf0_", "operand conversion\\nNCHW -> NHWC"), 1);
        CHECK_EQ_I(count_lines(d.text, "    xb0_", "by conv2d_backward_weight"), 1);
        CHECK(strstr(d.text, "c0_0 -> xf0_0 [color=red]") && strstr(d.text, "xf0_0 -> f0;"));
    }
    dot_drop(&d);
    CHECK(mft_tape_end() == MFT_OK);
    mft_scope_end();
    cnn_free(&m);
}

/* A leaf used twice is one node; an explicit copy chain of 5 before an op
 * gives 4 red nodes + "+1 more conversions"; a quote and a backslash in the
 * call site come out escaped. */
static void test_leaves_overflow_escaping(void) {
    const int64_t s[4] = {1, 3, 2, 2};
    mft_tensor *w = mft_randn(4, s, MFT_F32, MFT_CONTIGUOUS, 5);
    CHECK(w && mft_tensor_set_requires_grad(w, true) == MFT_OK);
    mft_scope_begin();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *x = mft_rand(4, s, MFT_F32, MFT_CONTIGUOUS, 6);
    mft_profile_site("dir\\we\"ird.c", 7);
    mft_tensor *a = mft_mul(w, w);
    mft_conversion_counts_reset();
    for (int i = 0; i < 5; i++) /* all in add's stretch */
        x = mft_to_format(x, i % 2 ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST);
    CHECK_EQ_I(mft_conversion_counts_get().total, 5);
    mft_tensor *b = mft_add(a, x);
    mft_profile_site(NULL, 0);
    CHECK(b != NULL);
    CHECK_EQ_I(mft_tape_size(), 2);
    dot_file d = {{0}, NULL};
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        CHECK_EQ_I(count_lines(d.text, "  l", "shape=ellipse"), 1);
        CHECK_EQ_I(count_str(d.text, "l0_0 -> f0;"), 2);
        CHECK_EQ_I(count_lines(d.text, "    xf1_", "explicit conversion\\nby to_format"), 4);
        CHECK_EQ_I(red_nodes(d.text), 5);
        CHECK_EQ_I(count_lines(d.text, "    xf1_more", "+1 more conversions"), 1);
        CHECK(strstr(d.text, "dir\\\\we\\\"ird.c:7")); /* basename is after the last '/' only */
        check_dot_accepts(d.path);
    }
    dot_drop(&d);
    CHECK(mft_tape_end() == MFT_OK);
    mft_scope_end();
    mft_tensor_release(w);
}

/* w named "0.weight" (with a quote, escaped), b unnamed; conv2d recorded
 * in module "0" (Conv2d(3, 2)), relu in "1" with no kind, sum outside. */
static void test_names_and_modules(void) {
    const int64_t xs[4] = {1, 3, 4, 4}, ws[4] = {2, 3, 3, 3}, bs[1] = {2}, one[2] = {1, 1};
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 7);
    mft_tensor *b = mft_zeros(1, bs, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_tensor_set_requires_grad(w, true) == MFT_OK);
    CHECK(mft_tensor_set_requires_grad(b, true) == MFT_OK);
    CHECK(mft_tensor_set_name(w, "0.we\"ight") == MFT_OK);
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 8);
    CHECK(mft_tape_begin() == MFT_OK);
    CHECK(mft_module_path_push("0", "Conv2d(3, 2)") == MFT_OK);
    mft_tensor *h = mft_conv2d(x, w, b, one, one, one, 1);
    mft_module_path_pop();
    CHECK(mft_module_path_push("1", NULL) == MFT_OK);
    h = mft_relu(h);
    mft_module_path_pop();
    mft_tensor *loss = mft_sum(h, 0, NULL, false);
    CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
    dot_file d = {{0}, NULL};
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        const char *t = d.text;
        CHECK_MSG(count_lines(t, "  l0_1", "label=\"0.we\\\"ight\\n[2,3,3,3] f32") == 1, "%s", t);
        CHECK_MSG(count_lines(t, "  l0_2", "label=\"leaf\\n[2] f32") == 1, "%s", t);
        /* no call site here: the module is the forward box's last line */
        CHECK_MSG(count_lines(t, "    f0 ", "\\nmodule 0 (Conv2d(3, 2))\"]") == 1, "%s", t);
        CHECK_MSG(count_lines(t, "    f1 ", "\\nmodule 1\"]") == 1, "%s", t);
        CHECK_MSG(count_lines(t, "    b0 ", "\\nmodule 0 (Conv2d(3, 2))\\n") == 1, "%s", t);
        CHECK_MSG(count_lines(t, "    b1 ", "\\nmodule 1\\n") == 1, "%s", t);
        CHECK_EQ_I(count_lines(t, "    f2 ", "module"), 0);
        CHECK_EQ_I(count_lines(t, "    b2 ", "module"), 0);
        CHECK_EQ_I(count_str(t, "module "), 4);
        check_dot_accepts(d.path);
    }
    dot_drop(&d);
    CHECK(mft_tape_end() == MFT_OK);
    mft_scope_end();
    mft_tensor_release(w);
    mft_tensor_release(b);
}

static void test_errors(void) {
    CHECK_EQ_I(mft_tape_to_dot(stdout), MFT_ERR_SCOPE);
    CHECK_ERR(MFT_ERR_SCOPE, "mft_tape_to_dot: no tape is open");
    CHECK(mft_tape_begin() == MFT_OK);
    CHECK_EQ_I(mft_tape_to_dot(NULL), MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_tape_to_dot: f is NULL");
    FILE *ro = fopen("/dev/null", "r"); /* cannot be written */
    CHECK(ro != NULL);
    if (ro) {
        CHECK_EQ_I(mft_tape_to_dot(ro), MFT_ERR_IO);
        CHECK_ERR(MFT_ERR_IO, "mft_tape_to_dot: writing the DOT graph failed");
        fclose(ro);
    }
    /* an empty tape is a valid (empty) picture */
    dot_file d = {{0}, NULL};
    CHECK(dot_capture(&d) == MFT_OK && d.text);
    if (d.text) {
        CHECK(strstr(d.text, "0 ops recorded") && count_ids(d.text, "    f") == 0);
        check_dot_accepts(d.path);
    }
    dot_drop(&d);
    CHECK(mft_tape_end() == MFT_OK);
}

int main(void) {
    RUN(test_errors);
    RUN(test_nhwc_step);
    RUN(test_mixed_step);
    RUN(test_leaves_overflow_escaping);
    RUN(test_names_and_modules);
    TEST_MAIN_END();
}
