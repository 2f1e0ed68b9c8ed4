/* tools/explain_op.c — the two explanations of mft-explain that run the
 * library on concrete tensors and say what it returned:
 *   --op OP --in SPEC...   builds the inputs, asks mft_explain_format which
 *                          rule row and operand decide the result's tag, runs
 *                          the op and shows the result's strides, tag and
 *                          provenance;
 *   SIZES ... --to FMT     runs mft_to_format and mft_contiguous on the tensor
 *                          built from the command line and shows, for each,
 *                          the result, whether it copied and why.
 * Each result ends with whether PyTorch 1.13 agrees on these very tensors
 * (Note [PyTorch on these inputs] in explain.h).
 *
 * An input SPEC is [FMT:]SIZES[@STRIDES][/STEP...]: SIZES packed in FMT
 * (mft_zeros, tag DECLARED; FMT as --format, default contiguous) or wrapped
 * with explicit STRIDES (mft_from_blob, tag INFERRED), then views and
 * conversions applied in order: to_format:FMT, contiguous:FMT, select:D,I,
 * unsqueeze:D, squeeze:D, transpose:A,B, permute:P0,P1,..,
 * narrow:D,START,LEN, slice:D,START,END,STEP. Inputs are kept in a global
 * table so an error exit never strands a tensor. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "explain.h"
#include "tool_names.h"

#define MAX_INPUTS 8
#define SPEC_MAX   512

static struct input {
    mft_tensor *t;
    char name[32];       /* the operand's name in the rule row ("weight"), else "input k" */
    char spec[SPEC_MAX]; /* as given to --in ("" for the --to source) */
    char how[1024];
} g_in[MAX_INPUTS];
static int g_nin;

/* ------------------------------------------------------------------ printing */
static void print_dims(const char *label, int n, const int64_t *v) {
    char buf[256];
    printf("%s%s\n", label, explain_dims(buf, sizeof buf, n, v));
}

/* "CHANNELS_LAST (declared) = NHWC" */
static void tag_text(const mft_tensor *t, char *buf, size_t len) {
    snprintf(buf, len, "%s (%s) = %s", mft_format_name(mft_tensor_format(t)),
             mft_origin_name(mft_tensor_format_origin(t)),
             explain_layout_name(mft_tensor_ndim(t), mft_tensor_format(t)));
}

/* Why the strides fit both formats, when they do. */
static const char *ambiguity_text(const mft_tensor *t) {
    int ndim = mft_tensor_ndim(t);
    if (ndim < 3 || ndim > 5 || !mft_tensor_order_fits(t, MFT_CONTIGUOUS) ||
        !mft_tensor_order_fits(t, MFT_CHANNELS_LAST))
        return NULL;
    const int64_t *s = mft_tensor_sizes(t);
    bool spatial1 = true;
    for (int d = 2; d < ndim; d++) spatial1 = spatial1 && s[d] == 1;
    if (s[1] == 1) return "fits both formats (C == 1)";
    if (spatial1) return "fits both formats (every spatial size is 1)";
    if (mft_tensor_numel(t) == 0) return "fits both formats (empty)";
    return "fits both formats";
}

/* One input: how it was built, its layout, and how PyTorch would read it. */
static void print_input(int k, const struct input *in) {
    const mft_tensor *t = in->t;
    char sizes[256], strides[256], tag[96], reading[512];
    int ndim = mft_tensor_ndim(t);
    printf("input %d  %s%s%s = %s\n", k, in->name, in->spec[0] ? ": " : "", in->spec, in->how);
    explain_dims(sizes, sizeof sizes, ndim, mft_tensor_sizes(t));
    explain_dims(strides, sizeof strides, ndim, mft_tensor_strides(t));
    tag_text(t, tag, sizeof tag);
    printf("         sizes %s  strides %s  offset %lld  tag %s\n", sizes, strides,
           (long long)mft_tensor_offset(t), tag);
    if (ndim < 3 || ndim > 5) return; /* no format to read: both libraries say contiguous */
    const char *amb = ambiguity_text(t);
    pt_reading(NULL, t, reading, sizeof reading);
    printf("         %s%sPyTorch: %s\n", amb ? amb : "", amb ? "; " : "", reading);
}

/* The provenance chain, one link a line, under a label. */
static void print_provenance(const mft_tensor *r) {
    size_t need = mft_tensor_provenance(r, NULL, 0);
    char *text = malloc(need + 1);
    if (!text) {
        printf("  provenance (out of memory)\n");
        return;
    }
    mft_tensor_provenance(r, text, need + 1);
    const char *p = text;
    bool first = true;
    while (*p) {
        size_t n = strcspn(p, "\n");
        printf("  %s%.*s\n", first ? "provenance " : "           ", (int)n, p);
        first = false;
        p += n;
        if (*p == '\n') p++;
    }
    free(text);
}

/* "PyTorch 1.13: same" or "... gives <FORMAT> here, because ...", then the
 * facts the claim rests on ("torch: <call> -> strides [..], ..."). copied:
 * whether mft copied (has_copy: the result is a conversion's). */
static void print_verdict(const mft_tensor *r, bool has_copy, bool copied, const pt_answer *pt) {
    if (!pt->counterpart) {
        printf("  PyTorch 1.13: no counterpart: %s\n", pt->reason);
        return;
    }
    int ndim = mft_tensor_ndim(r);
    char pts[256], why[256];
    explain_dims(pts, sizeof pts, ndim, pt->strides);
    mft_format tag = mft_tensor_format(r);
    if (ndim < 3 || ndim > 5) tag = MFT_CONTIGUOUS;
    bool same_strides =
        !memcmp(pt->strides, mft_tensor_strides(r), (size_t)ndim * sizeof pt->strides[0]);
    bool same_copy = !has_copy || pt->copies == copied;
    bool same_read = pt->reads == tag;
    const char *fname = explain_layout_name(ndim, pt->reads);
    if (same_strides && same_copy && same_read) {
        printf("  PyTorch 1.13: same\n");
    } else if (same_read) {
        printf("  PyTorch 1.13: gives %s here too, but", fname);
        if (!same_strides) printf(" with strides %s", pts);
        if (!same_copy)
            printf("%s%s", same_strides ? "" : " and",
                   pt->copies ? " as a copy" : " without a copy");
        printf(", because %s", pt->reason);
        if (pt->deviation) printf(" (docs/deviations.md #%d)", pt->deviation);
        printf("\n");
    } else {
        printf("  PyTorch 1.13: gives %s here, because ", fname);
        if (same_strides) {
            pt_channels_last_strides(ndim, mft_tensor_sizes(r), pt->strides, why, sizeof why);
            printf("%s, and PyTorch keeps no tag: suggest_memory_format reads the result's "
                   "strides %s as %s (%s), while mft's tag is %s (%s)",
                   pt->reason, pts, fname, why, mft_format_name(mft_tensor_format(r)),
                   mft_origin_name(mft_tensor_format_origin(r)));
            if (!same_copy) printf("; and it %s", pt->copies ? "copies" : "does not copy");
        } else {
            printf("%s", pt->reason);
        }
        if (pt->deviation) printf(" (docs/deviations.md #%d)", pt->deviation);
        printf("\n");
    }
    printf("  torch:        %s -> strides %s%s, read as %s (suggest_memory_format)\n", pt->call,
           pts,
           !has_copy    ? ""
           : pt->copies ? ", a copy"
                        : ", no copy",
           fname);
}

/* The result block shared by both modes. */
static void print_result(const char *call, const mft_tensor *r, const char *copy_text, bool copied,
                         const pt_answer *pt, bool has_pt) {
    char tag[96];
    int ndim = mft_tensor_ndim(r);
    printf("\n=> %s\n", call);
    print_dims("  sizes      ", ndim, mft_tensor_sizes(r));
    print_dims("  strides    ", ndim, mft_tensor_strides(r));
    printf("  offset     %lld\n", (long long)mft_tensor_offset(r));
    tag_text(r, tag, sizeof tag);
    printf("  tag        %s\n", tag);
    if (copy_text) printf("  copy?      %s\n", copy_text);
    print_provenance(r);
    if (has_pt) print_verdict(r, copy_text != NULL, copied, pt);
}

/* ------------------------------------------------------------------ conversions */
/* What a conversion did to x and why ("no copy: ...", "copied: ..."). */
static bool convert_copy_text(const mft_tensor *x, const mft_tensor *r, mft_format fmt,
                              bool to_format, char *buf, size_t len) {
    const char *lname = explain_layout_name(mft_tensor_ndim(x), fmt);
    size_t pos = 0;
    if (r == x) {
        if (mft_tensor_is_contiguous(x, fmt))
            explain_append(buf, len, &pos, "no copy: x itself (already packed %s and tagged %s)",
                           lname, mft_format_name(fmt));
        else
            explain_append(buf, len, &pos,
                           "no copy: x itself (dense in %s's dim order and tagged %s)", lname,
                           mft_format_name(fmt));
        return false;
    }
    if (mft_tensor_shares_storage(x, r)) {
        if (ambiguity_text(x))
            explain_append(buf, len, &pos,
                           "no copy: strides already fit both formats; tag "
                           "recorded (a new header on x's storage)");
        else
            explain_append(buf, len, &pos,
                           "no copy: strides already fit %s; tag recorded (a new "
                           "header on x's storage)",
                           lname);
        return false;
    }
    if (to_format)
        explain_append(buf, len, &pos, "copied: x is %s, so a packed %s copy (new storage)",
                       mft_tensor_is_dense(x) ? "dense but not in the dim order of this format"
                                              : "not dense (gaps, overlaps or broadcast)",
                       lname);
    else
        explain_append(buf, len, &pos,
                       "copied: x is not packed %s (is_contiguous(%s) is false), so a packed copy "
                       "(new storage)",
                       lname, mft_format_name(fmt));
    return true;
}

static void release_inputs(void) {
    for (int k = 0; k < g_nin; k++) {
        mft_tensor_release(g_in[k].t);
        g_in[k].t = NULL;
    }
    g_nin = 0;
}

int explain_convert(const mft_tensor *x, const char *how, mft_format to) {
    mft_tensor *r[2];
    r[0] = mft_to_format(x, to);
    if (!r[0]) explain_lib_error("mft_to_format");
    r[1] = mft_contiguous(x, to);
    if (!r[1]) {
        mft_tensor_release(r[0]);
        explain_lib_error("mft_contiguous");
    }
    struct input in0 = {(mft_tensor *)x, "x", "", ""};
    snprintf(in0.how, sizeof in0.how, "%s", how);
    print_input(0, &in0);
    static const char *const fns[2] = {"mft_to_format", "mft_contiguous"};
    static const char *const methods[2] = {"to", "contiguous"};
    for (int k = 0; k < 2; k++) {
        char call[128], copy[256];
        snprintf(call, sizeof call, "%s(x, %s)", fns[k], mft_format_name(to));
        bool copied = convert_copy_text(x, r[k], to, k == 0, copy, sizeof copy);
        pt_answer pt;
        pt_convert(x, to, methods[k], &pt);
        print_result(call, r[k], copy, copied, &pt, true);
        mft_tensor_release(r[k]);
    }
    return 0;
}

/* ------------------------------------------------------------------ inputs */
/* Exits 2 with a message, releasing the inputs built so far. */
#define OP_BAD(...) (release_inputs(), explain_bad_args(__VA_ARGS__))

static int spec_dim(int64_t v, const char *step) {
    if (v < -64 || v > 64) OP_BAD("%s: dim %lld is out of range", step, (long long)v);
    return (int)v;
}

/* Applies one STEP (name:args) to g_in[k].t. */
static void spec_step(int k, char *step, const char *spec) {
    struct input *in = &g_in[k];
    char *arg = strchr(step, ':');
    if (!arg) OP_BAD("--in %s: step '%s' needs ':' and its arguments", spec, step);
    *arg++ = '\0';
    const mft_tensor *t = in->t;
    mft_tensor *u = NULL;
    int64_t v[MFT_MAX_DIMS];
    int nv = 0;
    bool convert = !strcmp(step, "to_format") || !strcmp(step, "contiguous");
    mft_format fmt = MFT_CONTIGUOUS;
    if (convert) {
        if (!explain_parse_format(arg, &fmt))
            OP_BAD("--in %s: unknown format '%s' (contiguous/nchw or channels_last/nhwc)", spec,
                   arg);
        u = !strcmp(step, "to_format") ? mft_to_format(t, fmt) : mft_contiguous(t, fmt);
    } else {
        static const struct {
            const char *name;
            int nargs; /* -1: one per dim */
        } steps[] = {{"select", 2},   {"unsqueeze", 1}, {"squeeze", 1}, {"transpose", 2},
                     {"permute", -1}, {"narrow", 3},    {"slice", 4}};
        int want = -2;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
            if (!strcmp(step, steps[i].name)) want = steps[i].nargs;
        if (want == -2)
            OP_BAD("--in %s: unknown step '%s' (to_format, contiguous, select, unsqueeze, squeeze, "
                   "transpose, permute, narrow, slice)",
                   spec, step);
        nv = explain_parse_list(arg, v, step);
        if (want == -1) want = mft_tensor_ndim(t);
        if (nv != want)
            OP_BAD("--in %s: %s takes %d value%s, got %d", spec, step, want, want == 1 ? "" : "s",
                   nv);
        if (!strcmp(step, "select"))
            u = mft_select(t, spec_dim(v[0], step), v[1]);
        else if (!strcmp(step, "unsqueeze"))
            u = mft_unsqueeze(t, spec_dim(v[0], step));
        else if (!strcmp(step, "squeeze"))
            u = mft_squeeze(t, spec_dim(v[0], step));
        else if (!strcmp(step, "transpose"))
            u = mft_transpose(t, spec_dim(v[0], step), spec_dim(v[1], step));
        else if (!strcmp(step, "narrow"))
            u = mft_narrow(t, spec_dim(v[0], step), v[1], v[2]);
        else if (!strcmp(step, "slice"))
            u = mft_slice(t, spec_dim(v[0], step), v[1], v[2], v[3]);
        else {
            int p[MFT_MAX_DIMS];
            for (int i = 0; i < nv; i++) p[i] = spec_dim(v[i], step);
            u = mft_permute(t, p);
        }
    }
    if (!u) {
        release_inputs();
        explain_lib_error(step);
    }
    mft_tensor_release(in->t);
    in->t = u;
    size_t pos = strlen(in->how);
    if (convert)
        explain_append(in->how, sizeof in->how, &pos, " -> mft_%s(%s)", step, mft_format_name(fmt));
    else {
        char dims[256];
        explain_dims(dims, sizeof dims, nv, v);
        dims[strlen(dims) - 1] = '\0'; /* "[a,b" -> "a,b" below */
        explain_append(in->how, sizeof in->how, &pos, " -> mft_%s(%s)", step, dims + 1);
    }
}

/* Builds g_in[k] from its SPEC. */
static void spec_build(int k, const char *spec, mft_dtype dtype) {
    char buf[SPEC_MAX];
    if (strlen(spec) >= sizeof buf)
        OP_BAD("--in: a spec of %zu characters is too long", strlen(spec));
    memcpy(buf, spec, strlen(spec) + 1);
    char *steps = strchr(buf, '/');
    if (steps) *steps++ = '\0';
    char *body = buf;
    mft_format fmt = MFT_CONTIGUOUS;
    bool fmt_given = false;
    char *colon = strchr(body, ':');
    if (colon) {
        *colon = '\0';
        if (!explain_parse_format(body, &fmt))
            OP_BAD("--in %s: unknown format '%s' (contiguous/nchw/ncl/ncdhw or "
                   "channels_last/nhwc/nlc/ndhwc)",
                   spec, body);
        fmt_given = true;
        body = colon + 1;
    }
    char *at = strchr(body, '@');
    if (at) *at++ = '\0';
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    int ndim = explain_parse_list(body, sizes, "sizes");
    char dims[256];
    explain_dims(dims, sizeof dims, ndim, sizes);
    struct input *in = &g_in[k];
    snprintf(in->spec, sizeof in->spec, "%s", spec);
    size_t pos = 0;
    if (at) {
        if (fmt_given) OP_BAD("--in %s: give a format or strides, not both", spec);
        int ns = explain_parse_list(at, strides, "strides");
        if (ns != ndim)
            OP_BAD("--in %s: %d stride%s given for %d size%s", spec, ns, ns == 1 ? "" : "s", ndim,
                   ndim == 1 ? "" : "s");
        for (int d = 0; d < ndim; d++) /* negative values: the library says, but after wrapping */
            if (sizes[d] < 0 || strides[d] < 0)
                OP_BAD("--in %s: sizes and strides must be >= 0 (dim %d: size %lld, stride %lld)",
                       spec, d, (long long)sizes[d], (long long)strides[d]);
        in->t = explain_wrap_strided(ndim, sizes, strides, 0, dtype);
        char sd[256];
        explain_dims(sd, sizeof sd, ndim, strides);
        explain_append(in->how, sizeof in->how, &pos, "mft_from_blob(sizes=%s, strides=%s, %s)",
                       dims, sd, mft_dtype_name(dtype));
    } else {
        in->t = mft_zeros(ndim, sizes, dtype, fmt);
        if (!in->t) {
            release_inputs();
            explain_lib_error("mft_zeros");
        }
        explain_append(in->how, sizeof in->how, &pos, "mft_zeros(sizes=%s, %s, %s)", dims,
                       mft_dtype_name(dtype), mft_format_name(fmt));
    }
    g_nin = k + 1;
    while (steps) {
        char *next = strchr(steps, '/');
        if (next) *next++ = '\0';
        spec_step(k, steps, spec);
        steps = next;
    }
}

/* The k-th operand's name in the row ("x", "weight"); "input k" when the row
 * does not list it. */
static void operand_name(const mft_format_rule *r, int k, char *out, size_t len) {
    const char *p = r->operands;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p) p += 2;
    }
    if (!p || !*p || !strncmp(p, "every", 5) || !strncmp(p, "the ", 4)) {
        snprintf(out, len, "input%d", k);
        return;
    }
    snprintf(out, len, "%.*s", (int)strcspn(p, ","), p);
}

/* ------------------------------------------------------------------ running ops */
typedef mft_tensor *(*unary_fn)(const mft_tensor *);
typedef mft_tensor *(*scalar_fn)(const mft_tensor *, double);
typedef mft_tensor *(*binary_fn)(const mft_tensor *, const mft_tensor *);
#define OP_ENTRY(name) {#name, (void (*)(void))mft_##name},
static const struct op_fn {
    const char *name;
    void (*fn)(void); /* cast back to its type before the call */
} unary_ops[] = {MFT_UNARY_OPS(OP_ENTRY)}, scalar_ops[] = {MFT_SCALAR_OPS(OP_ENTRY)},
  binary_ops[] = {MFT_BINARY_OPS(OP_ENTRY)};
#undef OP_ENTRY

static void (*find_fn(const struct op_fn *table, size_t n, const char *op))(void) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(table[i].name, op)) return table[i].fn;
    return NULL;
}

/* The ops mft-explain runs, for messages. */
static const char *const runnable_text =
    "elementwise ops, conv1d/2d/3d, conv_transpose2d, max/avg_pool1d/2d/3d, softmax, "
    "log_softmax, interpolate, pad, batch/group/instance/layer_norm, cat, to_dtype, to_format, "
    "contiguous, clone";

/* Runs op on the inputs with fixed, stated parameters. Returns the result
 * (NULL with the library's error when it failed); *ran false when the tool
 * does not run this op (then NULL). call / tcall: the mft and torch calls. */
static mft_tensor *run_op(const char *op, int n, const mft_tensor *const *in, mft_format declared,
                          mft_dtype dtype, char *call, size_t cl, char *tcall, size_t tl, int *need,
                          bool *ran) {
    *ran = true;
    *need = 1;
    void (*fn)(void);
    const mft_tensor *x = n > 0 ? in[0] : NULL;
    int ndim = x ? mft_tensor_ndim(x) : 0;
    const int64_t *xs = x ? mft_tensor_sizes(x) : NULL;
#define NEED(k)                                                                                    \
    do {                                                                                           \
        *need = (k);                                                                               \
        if (n != (k)) return NULL;                                                                 \
    } while (0)
    if ((fn = find_fn(unary_ops, sizeof unary_ops / sizeof unary_ops[0], op))) {
        NEED(1);
        snprintf(call, cl, "mft_%s(x)", op);
        snprintf(tcall, tl, "torch.%s(x)", op);
        return ((unary_fn)fn)(x);
    }
    if ((fn = find_fn(scalar_ops, sizeof scalar_ops / sizeof scalar_ops[0], op))) {
        NEED(1);
        snprintf(call, cl, "mft_%s(x, 1)", op);
        snprintf(tcall, tl, "%s(x, 1) in torch", op);
        return ((scalar_fn)fn)(x, 1.0);
    }
    if ((fn = find_fn(binary_ops, sizeof binary_ops / sizeof binary_ops[0], op))) {
        NEED(2);
        snprintf(call, cl, "mft_%s(a, b)", op);
        snprintf(tcall, tl, "torch.%s(a, b)", op);
        return ((binary_fn)fn)(in[0], in[1]);
    }
    if (!strcmp(op, "clamp") || !strcmp(op, "hardtanh")) {
        NEED(1);
        snprintf(call, cl, "mft_%s(x, 0, 1)", op);
        snprintf(tcall, tl, "torch.%s(x, 0, 1)", op);
        return op[0] == 'c' ? mft_clamp(x, 0, 1) : mft_hardtanh(x, 0, 1);
    }
    static const int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    if (!strcmp(op, "conv1d") || !strcmp(op, "conv2d") || !strcmp(op, "conv3d") ||
        !strcmp(op, "conv_transpose2d")) {
        NEED(2);
        snprintf(call, cl, "mft_%s(x, weight, NULL, stride 1, padding 0, dilation 1, groups 1)",
                 op);
        snprintf(tcall, tl, "torch.%s(x, weight)", op);
        const mft_tensor *w = in[1];
        if (!strcmp(op, "conv1d")) return mft_conv1d(x, w, NULL, one, zero, one, 1);
        if (!strcmp(op, "conv2d")) return mft_conv2d(x, w, NULL, one, zero, one, 1);
        if (!strcmp(op, "conv3d")) return mft_conv3d(x, w, NULL, one, zero, one, 1);
        return mft_conv_transpose2d(x, w, NULL, one, zero, zero, one, 1);
    }
    if (!strncmp(op, "max_pool", 8) || !strncmp(op, "avg_pool", 8)) {
        int k = op[8] - '0';
        if (strlen(op) != 10 || strcmp(op + 9, "d") || k < 1 || k > 3) {
            *ran = false;
            return NULL;
        }
        NEED(1);
        int64_t kernel[3] = {1, 1, 1};
        for (int d = 0; d < k; d++)
            if (ndim - k + d >= 0 && xs[ndim - k + d] >= 2) kernel[d] = 2;
        char kt[64];
        explain_dims(kt, sizeof kt, k, kernel);
        snprintf(call, cl, "mft_%s(x, kernel %s, stride = kernel, padding 0)", op, kt);
        snprintf(tcall, tl, "F.%s(x, %s)", op, kt);
        bool max = op[0] == 'm';
        switch (k) {
        case 1:
            return max ? mft_max_pool1d(x, kernel, NULL, zero, one, false)
                       : mft_avg_pool1d(x, kernel, NULL, zero, false, true);
        case 2:
            return max ? mft_max_pool2d(x, kernel, NULL, zero, one, false)
                       : mft_avg_pool2d(x, kernel, NULL, zero, false, true, 0);
        default:
            return max ? mft_max_pool3d(x, kernel, NULL, zero, one, false)
                       : mft_avg_pool3d(x, kernel, NULL, zero, false, true, 0);
        }
    }
    if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
        NEED(1);
        int dim = ndim > 1 ? 1 : 0;
        snprintf(call, cl, "mft_%s(x, %d)", op, dim);
        snprintf(tcall, tl, "torch.%s(x, %d)", op, dim);
        return op[0] == 's' ? mft_softmax(x, dim) : mft_log_softmax(x, dim);
    }
    if (!strcmp(op, "interpolate")) {
        NEED(1);
        int64_t out[MFT_MAX_DIMS] = {0};
        int ns = ndim > 2 ? ndim - 2 : 0;
        for (int d = 0; d < ns; d++) out[d] = 2 * xs[d + 2];
        char ot[128];
        explain_dims(ot, sizeof ot, ns, out);
        snprintf(call, cl, "mft_interpolate(x, size %s, NEAREST)", ot);
        snprintf(tcall, tl, "F.interpolate(x, size=%s, mode='nearest')", ot);
        return mft_interpolate(x, out, MFT_INTERP_NEAREST, false);
    }
    if (!strcmp(op, "pad")) {
        NEED(1);
        int64_t pads[2 * MFT_MAX_DIMS];
        int np = ndim > 2 ? 2 * (ndim - 2) : 2;
        for (int i = 0; i < np; i++) pads[i] = 1;
        snprintf(call, cl, "mft_pad(x, 1 on each side of every spatial dim, CONSTANT, 0)");
        snprintf(tcall, tl, "F.pad(x, (1,)*%d)", np);
        return mft_pad(x, np, pads, MFT_PAD_CONSTANT, 0.0);
    }
    if (!strcmp(op, "batch_norm")) {
        NEED(1);
        snprintf(call, cl, "mft_batch_norm(x, no running stats, no affine, training)");
        snprintf(tcall, tl, "F.batch_norm(x, None, None, training=True)");
        return mft_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    }
    if (!strcmp(op, "group_norm")) {
        NEED(1);
        snprintf(call, cl, "mft_group_norm(x, 1 group, no affine)");
        snprintf(tcall, tl, "F.group_norm(x, 1)");
        return mft_group_norm(x, 1, NULL, NULL, 1e-5);
    }
    if (!strcmp(op, "instance_norm")) {
        NEED(1);
        snprintf(call, cl, "mft_instance_norm(x, no affine)");
        snprintf(tcall, tl, "F.instance_norm(x)");
        return mft_instance_norm(x, NULL, NULL, 1e-5);
    }
    if (!strcmp(op, "layer_norm")) {
        NEED(1);
        int nn = ndim > 1 ? ndim - 1 : ndim;
        const int64_t *shape = xs ? xs + (ndim - nn) : NULL;
        char st[256];
        explain_dims(st, sizeof st, nn, shape);
        snprintf(call, cl, "mft_layer_norm(x, over %s, no affine)", st);
        snprintf(tcall, tl, "F.layer_norm(x, %s)", st);
        return mft_layer_norm(x, nn, shape, NULL, NULL, 1e-5);
    }
    if (!strcmp(op, "cat")) {
        *need = 1;
        if (n < 1) return NULL;
        snprintf(call, cl, "mft_cat(%d inputs, dim 0)", n);
        snprintf(tcall, tl, "torch.cat(inputs, 0)");
        return mft_cat(n, in, 0);
    }
    if (!strcmp(op, "to_dtype")) {
        NEED(1);
        mft_dtype to = dtype == MFT_F64 ? MFT_F32 : MFT_F64;
        snprintf(call, cl, "mft_to_dtype(x, %s)", mft_dtype_name(to));
        snprintf(tcall, tl, "x.to(torch.%s)", to == MFT_F64 ? "float64" : "float32");
        return mft_to_dtype(x, to);
    }
    if (!strcmp(op, "to_format") || !strcmp(op, "contiguous") || !strcmp(op, "clone")) {
        NEED(1);
        snprintf(call, cl, "mft_%s(x, %s)", op, mft_format_name(declared));
        if (!strcmp(op, "to_format")) return mft_to_format(x, declared);
        return !strcmp(op, "clone") ? mft_clone(x, declared) : mft_contiguous(x, declared);
    }
#undef NEED
    *ran = false;
    return NULL;
}

int explain_op(const char *op, int nin, const char *const *specs, mft_format declared,
               bool declared_given, mft_dtype dtype) {
    const mft_format_rule *r = mft_rule_for_op(op);
    if (!r) {
        char close[512];
        if (tool_close_op_names(op, close, sizeof close) > 0)
            explain_bad_args("--op: no op named '%s'; close names: %s", op, close);
        explain_bad_args("--op: no op named '%s' (`mft-rules` lists every op)", op);
    }
    const char *name = strncmp(op, "mft_", 4) ? op : op + 4;
    for (int k = 0; k < nin; k++) {
        spec_build(k, specs[k], dtype);
        operand_name(r, k, g_in[k].name, sizeof g_in[k].name);
    }
    const mft_tensor *in[MAX_INPUTS];
    for (int k = 0; k < nin; k++) in[k] = g_in[k].t;

    mft_format_explanation e;
    if (mft_explain_format(name, nin, in, declared, &e) != MFT_OK) {
        release_inputs();
        explain_lib_error("mft_explain_format");
    }
    char call[1024] = "", tcall[1024] = "";
    int need = 0;
    bool ran = false;
    mft_tensor *res =
        run_op(name, nin, in, declared, dtype, call, sizeof call, tcall, sizeof tcall, &need, &ran);
    if (ran && !res) {
        if (nin != need && (strcmp(name, "cat") || nin < 1))
            OP_BAD("--op %s takes %s%d input%s (%s), %d given", name,
                   strcmp(name, "cat") ? "" : "at least ", need, need == 1 ? "" : "s",
                   r->operands[0] ? r->operands : "tensors", nin);
        release_inputs();
        explain_lib_error(name);
    }

    /* ---- the rule's answer, before running */
    printf("op       %s: rule %s (output %s, ambiguous strides %s)%s%s\n", name, r->name,
           mft_rule_output_name(r->output), mft_rule_ambiguity_name(r->ambiguity),
           r->operands[0] ? ", reads " : "", r->operands);
    for (int k = 0; k < nin; k++) print_input(k, &g_in[k]);
    if (r->output == MFT_RULE_DECLARED)
        printf("declared %s%s\n", mft_format_name(declared),
               declared_given ? "" : " (no --to given)");
    printf("rule     %s\n", e.text);
    if (e.operand >= 0 && e.operand < nin)
        printf("decided  by input %d (%s): %s\n", e.operand, g_in[e.operand].name,
               mft_format_name(mft_tensor_format(in[e.operand])));
    else
        printf("decided  by no input (the rule alone)\n");

    /* ---- what the library returned */
    if (!ran) {
        printf("\n=> %s: not run (mft-explain runs %s)\n", name, runnable_text);
        if (r->deviation)
            printf("  PyTorch 1.13: not compared on these inputs; the rule row differs "
                   "(docs/deviations.md #%d): %s\n",
                   r->deviation, r->pytorch);
        else
            printf("  PyTorch 1.13: not compared on these inputs; the rule row agrees with it\n");
        release_inputs();
        return 0;
    }
    pt_answer pt;
    bool has_pt;
    const char *copy_text = NULL;
    char copy[256];
    bool copied = false;
    bool convert =
        !strcmp(name, "to_format") || !strcmp(name, "contiguous") || !strcmp(name, "clone");
    if (convert) {
        bool to = !strcmp(name, "to_format"), clone = !strcmp(name, "clone");
        copied = convert_copy_text(in[0], res, declared, to, copy, sizeof copy);
        if (clone) {
            snprintf(copy, sizeof copy, "copied: clone always copies (new storage)");
            copied = true;
        }
        copy_text = copy;
        pt_convert(in[0], declared, to ? "to" : clone ? "clone" : "contiguous", &pt);
        has_pt = true;
    } else {
        has_pt = pt_op(name, nin, in, res, &pt);
        if (has_pt) snprintf(pt.call, sizeof pt.call, "%s", tcall);
    }
    print_result(call, res, copy_text, copied, &pt, has_pt);
    if (!has_pt)
        printf("  PyTorch 1.13: not compared (mft-explain has no model of PyTorch's %s)\n", name);
    mft_tensor_release(res);
    release_inputs();
    return 0;
}
