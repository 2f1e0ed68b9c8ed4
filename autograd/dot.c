/* autograd/dot.c — mft_tape_to_dot (mft/autograd.h): this thread's open
 * tape as a Graphviz DOT graph, drawn only from what tape.c recorded in the
 * nodes (autograd_internal.h): forward ops with their kernels, layouts,
 * module paths and call sites; leaves (by their tensor names when set) and
 * constant inputs; after backward, the backward ops with their kernels and
 * gradient layouts; every conversion a red node on the edge where it
 * happened.
 *
 * Node ids: f<i> forward op i, b<i> its backward, l<i>_<k> the leaf first
 * seen as input k of op i, c<i>_<k> a constant input, xf<i>_<j> / xb<i>_<j>
 * conversion j of op i's forward / backward (xf<i>_more: those not kept).
 * Backward edges are written target -> source with dir=back, so that the
 * backward column ranks like the forward one while the arrows point the way
 * the gradients flow. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"

#define DOT_GRAD_COLOR "\"#1f5fbf\""
#define DOT_LABEL      1536

/* ------------------------------------------------------------------ output */
/* A writer that remembers whether any write failed. */
typedef struct dot_w {
    FILE *f;
    bool failed;
} dot_w;

static void dot_printf(dot_w *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(w->f, fmt, ap) < 0) w->failed = true;
    va_end(ap);
}

/* ------------------------------------------------------------------ labels */
/* A DOT string being built: text is escaped as it is added, lines are
 * separated by DOT's \n. Too long a label is cut, never overflowed. */
typedef struct dot_label {
    char s[DOT_LABEL];
    size_t len;
} dot_label;

static void lbl_put(dot_label *b, const char *piece, size_t n) {
    if (b->len + n + 1 > sizeof b->s) return;
    memcpy(b->s + b->len, piece, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void lbl_add(dot_label *b, const char *text) {
    for (const char *p = text ? text : "?"; *p; p++) {
        if (*p == '"' || *p == '\\')
            lbl_put(b, (const char[]){'\\', *p}, 2);
        else if (*p == '\n')
            lbl_put(b, "\\n", 2);
        else if ((unsigned char)*p < 0x20)
            lbl_put(b, " ", 1);
        else
            lbl_put(b, p, 1);
    }
}

static void lbl_addf(dot_label *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    lbl_add(b, tmp);
}

static void lbl_line(dot_label *b) {
    if (b->len) lbl_put(b, "\\n", 2);
}

static void dot_bytes(char *buf, size_t len, int64_t bytes) {
    if (bytes < 1024)
        snprintf(buf, len, "%lld B", (long long)bytes);
    else if (bytes < 1024 * 1024)
        snprintf(buf, len, "%.1f KB", (double)bytes / 1024.0);
    else
        snprintf(buf, len, "%.1f MB", (double)bytes / (1024.0 * 1024.0));
}

static const char *dot_basename(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* One line per kept kernel ("op: kernel" unless the kernel's name starts
 * with its op), "xN" for repeats; with in/out given, the kernel's own
 * layouts when they differ from the op's. */
static void lbl_kernels(dot_label *b, const mft__ag_events *e, const char *in, const char *out) {
    int64_t shown = 0;
    for (int j = 0; j < e->nkept; j++) {
        const mft__kernel_rec *r = &e->kernel[j];
        const char *op = r->op ? r->op : "?", *k = r->kernel ? r->kernel : "?";
        lbl_line(b);
        if (strncmp(k, op, strlen(op)) != 0) lbl_addf(b, "%s: ", op);
        lbl_add(b, k);
        if (e->kernel_calls[j] > 1) lbl_addf(b, " x%lld", (long long)e->kernel_calls[j]);
        if (in && out && r->in && r->out && (strcmp(r->in, in) || strcmp(r->out, out)))
            lbl_addf(b, " (%s -> %s)", r->in, r->out);
        shown += e->kernel_calls[j];
    }
    if (e->nkernels == 0) {
        lbl_line(b);
        lbl_add(b, "(no kernel reported)");
    } else if (e->nkernels > shown) {
        lbl_line(b);
        lbl_addf(b, "+%lld more kernel runs", (long long)(e->nkernels - shown));
    }
}

static void lbl_sizes(dot_label *b, int ndim, const int64_t *sizes, mft_dtype dt) {
    char d[MFT__DIMS_BUF];
    lbl_addf(b, "%s %s", mft__fmt_dims(d, sizeof d, ndim, sizes), mft_dtype_name(dt));
}

/* "module 1.4 (BatchNorm2d(16))": the module whose forward recorded n
 * (Note [Module path] in tensor/naming.c); nothing outside modules. */
static void lbl_module(dot_label *b, const mft__ag_node *n) {
    if (!n->module || !n->module[0]) return;
    lbl_line(b);
    if (n->module_kind && n->module_kind[0])
        lbl_addf(b, "module %s (%s)", n->module, n->module_kind);
    else
        lbl_addf(b, "module %s", n->module);
}

/* ------------------------------------------------------------------ nodes */
typedef struct dot_tape {
    mft__ag_node *const *nodes;
    int64_t len;
} dot_tape;

/* The (node, input) where leaf t first appears on the tape. */
static void dot_leaf_first(const dot_tape *tp, const mft_tensor *t, int64_t *fi, int *fk) {
    for (int64_t i = 0; i < tp->len; i++)
        for (int k = 0; k < tp->nodes[i]->nin; k++)
            if (tp->nodes[i]->in[k].leaf == t) {
                *fi = i;
                *fk = k;
                return;
            }
}

/* The id of the tensor that input k of node i is, into buf; false when no
 * tensor was passed. */
static bool dot_input_id(const dot_tape *tp, int64_t i, int k, char *buf, size_t len) {
    const mft__ag_input *in = &tp->nodes[i]->in[k];
    if (!in->layout) return false;
    if (in->node >= 0) {
        snprintf(buf, len, "f%lld", (long long)in->node);
    } else if (in->leaf) {
        int64_t fi = i;
        int fk = k;
        dot_leaf_first(tp, in->leaf, &fi, &fk);
        snprintf(buf, len, "l%lld_%d", (long long)fi, fk);
    } else {
        snprintf(buf, len, "c%lld_%d", (long long)i, k);
    }
    return true;
}

static void dot_conv_node(dot_w *w, const char *id, const mft__conv_rec *r, const char *node_op) {
    dot_label b = {{0}, 0};
    char by[32];
    dot_bytes(by, sizeof by, r->bytes);
    lbl_addf(&b, "%s conversion", mft_conversion_cause_name(r->cause));
    if (r->op && strcmp(r->op, node_op) != 0) lbl_line(&b), lbl_addf(&b, "by %s", r->op);
    lbl_line(&b);
    lbl_addf(&b, "%s -> %s", r->from ? r->from : "?", r->to ? r->to : "?");
    lbl_line(&b);
    lbl_add(&b, by);
    dot_printf(w,
               "    %s [shape=box, style=\"rounded,filled\", color=red, fillcolor=\"%s\", "
               "label=\"%s\"];\n",
               id, mft_conversion_cause_hidden(r->cause) ? "#ff9c9c" : "#ffdede", b.s);
}

/* Conversion nodes of one direction of node i (declared inside its cluster). */
static void dot_conv_nodes(dot_w *w, const mft__ag_node *n, int64_t i, const mft__ag_events *e,
                           char dir) {
    char id[48];
    for (int j = 0; j < e->nconv_kept; j++) {
        snprintf(id, sizeof id, "x%c%lld_%d", dir, (long long)i, j);
        dot_conv_node(w, id, &e->conv[j], n->name);
    }
    if (e->nconv > e->nconv_kept)
        dot_printf(w,
                   "    x%c%lld_more [shape=box, style=\"rounded,dashed\", color=red, "
                   "label=\"+%lld more conversions\"];\n",
                   dir, (long long)i, (long long)(e->nconv - e->nconv_kept));
}

static void dot_forward_node(dot_w *w, const mft__ag_node *n, int64_t i) {
    dot_label b = {{0}, 0};
    const char *in0 = n->nin > 0 && n->in[0].layout ? n->in[0].layout : "-";
    const char *out0 = n->nout > 0 && n->out[0].layout ? n->out[0].layout : "-";
    lbl_add(&b, n->name);
    lbl_kernels(&b, &n->fwd, in0, out0);
    lbl_line(&b);
    lbl_addf(&b, "%s -> %s", in0, out0);
    lbl_module(&b, n);
    if (n->site_file) lbl_line(&b), lbl_addf(&b, "%s:%d", dot_basename(n->site_file), n->site_line);
    dot_printf(w,
               "    f%lld [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3ff\", "
               "label=\"%s\"];\n",
               (long long)i, b.s);
    dot_conv_nodes(w, n, i, &n->fwd, 'f');
}

static void dot_backward_node(dot_w *w, const mft__ag_node *n, int64_t i) {
    dot_label b = {{0}, 0};
    lbl_addf(&b, "%s backward", n->name);
    lbl_kernels(&b, &n->bwd, NULL, NULL);
    lbl_module(&b, n);
    lbl_line(&b);
    lbl_add(&b, "grads:");
    bool any = false;
    for (int k = 0; k < n->nin; k++) {
        if (!n->in[k].needs_grad) continue;
        lbl_addf(&b, "%s %s", any ? "," : "", n->in[k].grad_layout ? n->in[k].grad_layout : "-");
        any = true;
    }
    if (!any) lbl_add(&b, " none");
    dot_printf(w,
               "    b%lld [shape=box, style=\"rounded,filled\", fillcolor=\"#eefaee\", "
               "label=\"%s\"];\n",
               (long long)i, b.s);
    dot_conv_nodes(w, n, i, &n->bwd, 'b');
}

/* Leaves (first use only) and constant inputs of node i, at top level. */
static void dot_input_nodes(dot_w *w, const dot_tape *tp, int64_t i) {
    const mft__ag_node *n = tp->nodes[i];
    for (int k = 0; k < n->nin; k++) {
        const mft__ag_input *in = &n->in[k];
        if (!in->layout || in->node >= 0) continue;
        int64_t fi = i;
        int fk = k;
        if (in->leaf) dot_leaf_first(tp, in->leaf, &fi, &fk);
        if (fi != i || fk != k) continue;
        dot_label b = {{0}, 0};
        const char *name = in->leaf ? mft_tensor_name(in->leaf) : NULL;
        lbl_add(&b, name ? name : in->leaf ? "leaf" : "input");
        lbl_line(&b);
        lbl_sizes(&b, in->ndim, in->sizes, in->dtype);
        lbl_line(&b);
        lbl_add(&b, in->layout);
        dot_printf(w, "  %c%lld_%d [shape=ellipse, %slabel=\"%s\"];\n", in->leaf ? 'l' : 'c',
                   (long long)i, k, in->leaf ? "" : "style=dashed, color=gray40, ", b.s);
    }
}

/* ------------------------------------------------------------------ edges */
static void dot_forward_edges(dot_w *w, const dot_tape *tp, int64_t i) {
    const mft__ag_node *n = tp->nodes[i];
    const mft__ag_events *e = &n->fwd;
    for (int k = 0; k < n->nin; k++) {
        char prev[48], id[48];
        if (!dot_input_id(tp, i, k, prev, sizeof prev)) continue;
        for (int j = 0; j < e->nconv_kept; j++) {
            if (e->conv_input[j] != k) continue;
            snprintf(id, sizeof id, "xf%lld_%d", (long long)i, j);
            dot_printf(w, "  %s -> %s [color=red];\n", prev, id);
            snprintf(prev, sizeof prev, "%s", id);
        }
        const mft__ag_input *in = &n->in[k];
        if (in->node >= 0 && tp->nodes[in->node]->nout > 1)
            dot_printf(w, "  %s -> f%lld [label=\"out %d\"];\n", prev, (long long)i, in->out);
        else
            dot_printf(w, "  %s -> f%lld;\n", prev, (long long)i);
    }
    for (int j = 0; j < e->nconv_kept; j++)
        if (e->conv_input[j] < 0)
            dot_printf(w, "  f%lld -> xf%lld_%d [style=dashed, color=red, arrowhead=none];\n",
                       (long long)i, (long long)i, j);
    if (e->nconv > e->nconv_kept)
        dot_printf(w, "  f%lld -> xf%lld_more [style=dashed, color=red, arrowhead=none];\n",
                   (long long)i, (long long)i);
}

/* The id gradient k of backward node i goes to; false when it goes nowhere
 * drawn (no gradient, or its producer's backward did not run). */
static bool dot_grad_target(const dot_tape *tp, int64_t i, int k, char *buf, size_t len) {
    const mft__ag_input *in = &tp->nodes[i]->in[k];
    if (!in->needs_grad || !in->grad_layout) return false;
    if (in->node >= 0) {
        if (!tp->nodes[in->node]->released) return false;
        snprintf(buf, len, "b%lld", (long long)in->node);
        return true;
    }
    return in->leaf && dot_input_id(tp, i, k, buf, len);
}

static void dot_backward_edges(dot_w *w, const dot_tape *tp, int64_t i) {
    const mft__ag_node *n = tp->nodes[i];
    const mft__ag_events *e = &n->bwd;
    for (int k = 0; k < n->nin; k++) {
        char target[48], prev[48], id[48];
        if (!dot_grad_target(tp, i, k, target, sizeof target)) continue;
        snprintf(prev, sizeof prev, "b%lld", (long long)i);
        for (int j = 0; j < e->nconv_kept; j++) {
            if (e->conv_input[j] != k) continue;
            snprintf(id, sizeof id, "xb%lld_%d", (long long)i, j);
            dot_printf(w, "  %s -> %s [dir=back, color=red];\n", id, prev);
            snprintf(prev, sizeof prev, "%s", id);
        }
        dot_printf(w, "  %s -> %s [dir=back, color=" DOT_GRAD_COLOR "];\n", target, prev);
    }
    for (int j = 0; j < e->nconv_kept; j++)
        if (e->conv_input[j] < 0)
            dot_printf(w, "  b%lld -> xb%lld_%d [style=dashed, color=red, arrowhead=none];\n",
                       (long long)i, (long long)i, j);
    if (e->nconv > e->nconv_kept)
        dot_printf(w, "  b%lld -> xb%lld_more [style=dashed, color=red, arrowhead=none];\n",
                   (long long)i, (long long)i);
}

/* ------------------------------------------------------------------ graph */
static void dot_header(dot_w *w, const dot_tape *tp, int64_t nback) {
    int64_t cf = 0, cb = 0;
    for (int64_t i = 0; i < tp->len; i++) {
        cf += tp->nodes[i]->fwd.nconv;
        cb += tp->nodes[i]->bwd.nconv;
    }
    dot_printf(w,
               "digraph mft_tape {\n"
               "  graph [rankdir=TB, nodesep=0.3, ranksep=0.35, fontname=\"Helvetica\", "
               "fontsize=11, labelloc=t, label=\"mft tape: %lld ops recorded, backward ran "
               "for %lld; conversions: %lld forward, %lld backward\"];\n"
               "  node [fontname=\"Helvetica\", fontsize=9];\n"
               "  edge [fontname=\"Helvetica\", fontsize=8];\n",
               (long long)tp->len, (long long)nback, (long long)cf, (long long)cb);
}

static void dot_graph(dot_w *w, const dot_tape *tp) {
    int64_t nback = 0, root = -1;
    for (int64_t i = 0; i < tp->len; i++)
        if (tp->nodes[i]->released) nback++, root = i;
    dot_header(w, tp, nback);
    dot_printf(w, "  subgraph cluster_forward {\n    label=\"forward\"; color=gray60;\n");
    for (int64_t i = 0; i < tp->len && !w->failed; i++) dot_forward_node(w, tp->nodes[i], i);
    dot_printf(w, "  }\n");
    if (nback > 0) {
        dot_printf(w, "  subgraph cluster_backward {\n    label=\"backward\"; color=gray60; "
                      "style=dashed;\n");
        for (int64_t i = tp->len - 1; i >= 0 && !w->failed; i--)
            if (tp->nodes[i]->released) dot_backward_node(w, tp->nodes[i], i);
        dot_printf(w, "  }\n");
    }
    for (int64_t i = 0; i < tp->len && !w->failed; i++) dot_input_nodes(w, tp, i);
    for (int64_t i = 0; i < tp->len && !w->failed; i++) dot_forward_edges(w, tp, i);
    for (int64_t i = tp->len - 1; i >= 0 && !w->failed; i--)
        if (tp->nodes[i]->released) dot_backward_edges(w, tp, i);
    if (root >= 0)
        dot_printf(w,
                   "  f%lld -> b%lld [style=dashed, color=" DOT_GRAD_COLOR
                   ", label=\"seed\", constraint=false];\n",
                   (long long)root, (long long)root);
    dot_printf(w, "}\n");
}

mft_status mft_tape_to_dot(FILE *f) {
    static const char fn[] = "mft_tape_to_dot";
    if (!f) {
        mft__set_error(MFT_ERR_NULL, "%s: f is NULL", fn);
        return MFT_ERR_NULL;
    }
    dot_tape tp = {NULL, 0};
    if (!mft__ag_tape_view(&tp.nodes, &tp.len)) {
        mft__set_error(MFT_ERR_SCOPE,
                       "%s: no tape is open on this thread (call it between mft_tape_begin and "
                       "mft_tape_end)",
                       fn);
        return MFT_ERR_SCOPE;
    }
    dot_w w = {f, false};
    dot_graph(&w, &tp);
    if (!w.failed && (fflush(f) != 0 || ferror(f))) w.failed = true;
    if (w.failed) {
        mft__set_error(MFT_ERR_IO, "%s: writing the DOT graph failed (%lld nodes)", fn,
                       (long long)tp.len);
        return MFT_ERR_IO;
    }
    return MFT_OK;
}
