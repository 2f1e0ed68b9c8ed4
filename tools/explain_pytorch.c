/* tools/explain_pytorch.c — what PyTorch 1.13 would return for the tensors an
 * explanation is about (Note [PyTorch on these inputs] in explain.h): its
 * channels-last stride test and suggest_memory_format, its two conversions
 * (Tensor.to(memory_format=), Tensor.contiguous(memory_format=)) and
 * clone(memory_format=), and the layout rule of each op mft-explain runs.
 *
 * Only behaviour checked against torch 1.13 by tools/golden/gen_explain.py
 * (or stated by a row of docs/deviations.md) is modelled; pt_op answers
 * "no model" for every other op rather than guess. The rules, by op:
 *   elementwise, to_dtype   TensorIterator: the strides mft computes (spec
 *                           §4 pins them to PyTorch's);
 *   conv2d                  channels_last iff suggest_memory_format of x or
 *                           of weight is channels_last (mkldnn / thnn
 *                           _use_channels_last in ATen's ConvUtils.h);
 *   conv1d, conv3d,         contiguous (deviations 12, 13);
 *   conv_transpose2d
 *   max/avg_pool2d, interpolate, pad (constant), batch_norm, group_norm
 *                           packed in suggest_memory_format(x) (rank 4 / 5;
 *                           other ranks contiguous);
 *   max/avg_pool3d          contiguous (deviation 30);
 *   softmax, log_softmax,   contiguous (deviations 11, 15);
 *   instance/layer_norm
 *   cat                     channels_last iff every input reads as
 *                           channels_last, else contiguous;
 *   x.to(memory_format=F)   x itself iff suggest_memory_format(x) == F
 *                           (to_will_alias), else a copy packed in F;
 *   x.contiguous(memory_format=F)  x itself iff x.is_contiguous(F), else a
 *                           copy packed in F; clone(F): always a packed copy. */
#include <stdio.h>
#include <string.h>
#include "explain.h"

/* Dim letters in logical order, for messages. */
static char pt_dim_letter(int ndim, int d) {
    static const char *const letters[6] = {"", "", "", "NCL", "NCHW", "NCDHW"};
    if (ndim >= 3 && ndim <= 5) return letters[ndim][d];
    return '?';
}

/* is_channels_last_strides_2d_s4 / _3d_s5 of c10/core/MemoryFormat.h
 * (PyTorch 1.13): walk C, then the spatial dims fastest to slowest, then N;
 * each stride must reach the previous dim's stride x size (size-1 dims do not
 * multiply), no size may be 0, C's stride may not be 0, and N may not start
 * where C does ("N111" / "N11W" read as NCHW). */
bool pt_channels_last_strides(int ndim, const int64_t *sizes, const int64_t *strides, char *why,
                              size_t len) {
    size_t pos = 0;
    if (why && len) why[0] = '\0';
    if (ndim != 4 && ndim != 5) {
        if (why)
            explain_append(why, len, &pos, "PyTorch 1.13 has channels_last only for rank 4 and 5");
        return false;
    }
    if (strides[1] == 0) {
        if (why) explain_append(why, len, &pos, "C's stride is 0");
        return false;
    }
    int walk[5], n = 0;
    walk[n++] = 1;
    for (int d = ndim - 1; d >= 2; d--) walk[n++] = d;
    walk[n++] = 0;
    int64_t min = 0;
    int prev = -1;
    for (int i = 0; i < n; i++) {
        int d = walk[i];
        if (sizes[d] == 0) {
            if (why) explain_append(why, len, &pos, "%c has size 0", pt_dim_letter(ndim, d));
            return false;
        }
        if (strides[d] < min) {
            if (why) {
                char p = pt_dim_letter(ndim, prev);
                if (sizes[prev] > 1)
                    explain_append(
                        why, len, &pos,
                        "%c's stride %lld is below %c's stride x size %lld x %lld = %lld",
                        pt_dim_letter(ndim, d), (long long)strides[d], p, (long long)strides[prev],
                        (long long)sizes[prev], (long long)min);
                else
                    explain_append(why, len, &pos, "%c's stride %lld is below %c's stride %lld",
                                   pt_dim_letter(ndim, d), (long long)strides[d], p,
                                   (long long)min);
            }
            return false;
        }
        if (d == 0 && min == strides[1]) {
            if (why)
                explain_append(why, len, &pos,
                               "%c's extent %lld equals C's stride, a case PyTorch reads as "
                               "channels-first",
                               pt_dim_letter(ndim, prev), (long long)min);
            return false;
        }
        min = strides[d];
        if (sizes[d] > 1) min *= sizes[d];
        prev = d;
    }
    if (why)
        explain_append(why, len, &pos, "they pass is_channels_last_strides_%s",
                       ndim == 4 ? "2d" : "3d");
    return true;
}

mft_format pt_suggest(int ndim, const int64_t *sizes, const int64_t *strides) {
    return pt_channels_last_strides(ndim, sizes, strides, NULL, 0) ? MFT_CHANNELS_LAST
                                                                   : MFT_CONTIGUOUS;
}

static void pt_reading_of(const char *name, int ndim, const int64_t *sizes, const int64_t *strides,
                          char *buf, size_t len) {
    char why[256], dims[256];
    size_t pos = 0;
    bool cl = pt_channels_last_strides(ndim, sizes, strides, why, sizeof why);
    explain_dims(dims, sizeof dims, ndim, strides);
    explain_append(buf, len, &pos, "%s%sstrides %s read as %s (%s)", name ? name : "",
                   name ? "'s " : "", dims,
                   explain_layout_name(ndim, cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS), why);
}

void pt_reading(const char *name, const mft_tensor *t, char *buf, size_t len) {
    pt_reading_of(name, mft_tensor_ndim(t), mft_tensor_sizes(t), mft_tensor_strides(t), buf, len);
}

static mft_format pt_suggest_t(const mft_tensor *t) {
    return pt_suggest(mft_tensor_ndim(t), mft_tensor_sizes(t), mft_tensor_strides(t));
}

/* PyTorch's name of fmt at this rank. */
static const char *pt_format_name(int ndim, mft_format fmt) {
    if (fmt != MFT_CHANNELS_LAST) return "torch.contiguous_format";
    return ndim == 5 ? "torch.channels_last_3d" : "torch.channels_last";
}

/* Packed strides of fmt (PyTorch computes them as mft_strides_for_format). */
static void pt_packed(const mft_tensor *like, mft_format fmt, pt_answer *out) {
    out->ndim = mft_tensor_ndim(like);
    if (mft_strides_for_format(out->ndim, mft_tensor_sizes(like), fmt, out->strides) != MFT_OK)
        explain_lib_error("mft_strides_for_format");
}

static void pt_finish(const mft_tensor *like, pt_answer *out) {
    out->reads = pt_suggest(out->ndim, mft_tensor_sizes(like), out->strides);
}

static void pt_init(pt_answer *out) {
    memset(out, 0, sizeof *out);
    out->counterpart = true;
}

void pt_convert(const mft_tensor *x, mft_format fmt, const char *method, pt_answer *out) {
    pt_init(out);
    int ndim = mft_tensor_ndim(x);
    size_t pos = 0;
    const char *fname = pt_format_name(ndim, fmt);
    snprintf(out->call, sizeof out->call, "x.%s(memory_format=%s)", method, fname);
    if (fmt == MFT_CHANNELS_LAST && ndim != 4 && ndim != 5) {
        out->counterpart = false;
        explain_append(out->reason, sizeof out->reason, &pos,
                       "PyTorch 1.13 has no rank-%d channels_last (torch.channels_last needs "
                       "rank 4, channels_last_3d rank 5)%s",
                       ndim, ndim == 3 ? "; mft's rank-3 NLC is docs/deviations.md #1" : "");
        out->deviation = ndim == 3 ? 1 : 0;
        return;
    }
    char reading[512];
    pt_reading("x", x, reading, sizeof reading);
    const char *lname = explain_layout_name(ndim, fmt);
    bool alias;
    if (!strcmp(method, "to")) {
        alias = pt_suggest_t(x) == fmt;
        explain_append(out->reason, sizeof out->reason, &pos,
                       alias ? "to() returns x itself when suggest_memory_format(x) already is %s, "
                               "and %s"
                             : "to() returns x itself only when suggest_memory_format(x) already "
                               "is %s, and %s: it copies into packed %s strides",
                       fname, reading, lname);
        out->deviation = 4;
    } else if (!strcmp(method, "contiguous")) {
        alias = mft_tensor_is_contiguous(x, fmt);
        explain_append(out->reason, sizeof out->reason, &pos,
                       alias ? "x.is_contiguous(memory_format=%s) holds, so contiguous() returns "
                               "x itself"
                             : "x.is_contiguous(memory_format=%s) fails, so contiguous() makes a "
                               "packed copy",
                       fname);
        out->deviation = 3;
    } else { /* clone */
        alias = false;
        explain_append(out->reason, sizeof out->reason, &pos,
                       "clone(memory_format=%s) always copies into packed %s strides", fname,
                       lname);
        out->deviation = 2;
    }
    out->has_copy = true;
    out->copies = !alias;
    if (alias) {
        out->ndim = ndim;
        memcpy(out->strides, mft_tensor_strides(x), (size_t)ndim * sizeof out->strides[0]);
    } else {
        pt_packed(x, fmt, out);
    }
    pt_finish(x, out);
}

/* The op families of the model. */
enum pt_family {
    PT_NONE,
    PT_ITERATOR,  /* same strides as mft's (TensorIterator) */
    PT_CONV2D,    /* x or weight reads channels_last */
    PT_CONTIG,    /* always contiguous */
    PT_FOLLOWS_X, /* packed in suggest_memory_format(x) */
    PT_CAT        /* every input reads channels_last */
};

static enum pt_family pt_family_of(const char *op, const mft_format_rule *r) {
    static const char *const contig[] = {"conv1d",      "conv3d",        "conv_transpose2d",
                                         "max_pool3d",  "avg_pool3d",    "softmax",
                                         "log_softmax", "instance_norm", "layer_norm"};
    static const char *const follows[] = {"max_pool2d", "avg_pool2d", "interpolate",
                                          "pad",        "batch_norm", "group_norm"};
    if (!strcmp(op, "conv2d")) return PT_CONV2D;
    if (!strcmp(op, "cat")) return PT_CAT;
    for (size_t i = 0; i < sizeof contig / sizeof contig[0]; i++)
        if (!strcmp(op, contig[i])) return PT_CONTIG;
    for (size_t i = 0; i < sizeof follows / sizeof follows[0]; i++)
        if (!strcmp(op, follows[i])) return PT_FOLLOWS_X;
    if (!strcmp(op, "to_dtype")) return PT_ITERATOR;
    if (r && r->output == MFT_RULE_ITERATOR && mft_op_find(op)) return PT_ITERATOR;
    return PT_NONE;
}

bool pt_op(const char *op, int n, const mft_tensor *const *in, const mft_tensor *result,
           pt_answer *out) {
    pt_init(out);
    const mft_format_rule *r = mft_rule_for_op(op);
    enum pt_family fam = pt_family_of(op, r);
    if (fam == PT_NONE || n < 1) return false;
    int ndim = mft_tensor_ndim(result);
    size_t pos = 0;
    char *why = out->reason;
    size_t wl = sizeof out->reason;
    char reading[512];
    switch (fam) {
    case PT_ITERATOR:
        out->ndim = ndim;
        memcpy(out->strides, mft_tensor_strides(result), (size_t)ndim * sizeof out->strides[0]);
        explain_append(why, wl, &pos, "PyTorch's TensorIterator lays the result out as mft's");
        out->deviation = ndim == 3 ? 1 : 2;
        break;
    case PT_CONV2D: {
        if (n < 2) return false;
        bool cl = mft_tensor_ndim(in[0]) == 4 && (pt_suggest_t(in[0]) == MFT_CHANNELS_LAST ||
                                                  pt_suggest_t(in[1]) == MFT_CHANNELS_LAST);
        pt_packed(result, cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, out);
        explain_append(why, wl, &pos,
                       "PyTorch's conv2d is channels_last when x or weight reads as "
                       "channels_last (suggest_memory_format): ");
        pt_reading("x", in[0], reading, sizeof reading);
        explain_append(why, wl, &pos, "%s; ", reading);
        pt_reading("weight", in[1], reading, sizeof reading);
        explain_append(why, wl, &pos, "%s", reading);
        /* an input mft reads as channels-last from strides that fit only
         * that format, PyTorch as NCHW: the select + unsqueeze case (#14) */
        out->deviation = 2;
        for (int k = 0; k < 2; k++)
            if (mft_tensor_format(in[k]) == MFT_CHANNELS_LAST &&
                pt_suggest_t(in[k]) != MFT_CHANNELS_LAST &&
                !mft_tensor_order_fits(in[k], MFT_CONTIGUOUS))
                out->deviation = 14;
        break;
    }
    case PT_CONTIG:
        pt_packed(result, MFT_CONTIGUOUS, out);
        explain_append(why, wl, &pos,
                       "PyTorch 1.13's %s result is contiguous whatever the input's "
                       "layout",
                       op);
        out->deviation = r ? r->deviation : 0;
        break;
    case PT_FOLLOWS_X:
        if (mft_tensor_ndim(in[0]) == 4 || mft_tensor_ndim(in[0]) == 5) {
            pt_packed(result, pt_suggest_t(in[0]), out);
            pt_reading("x", in[0], reading, sizeof reading);
            explain_append(why, wl, &pos, "PyTorch's %s follows suggest_memory_format(x): %s", op,
                           reading);
            out->deviation = 2;
        } else {
            pt_packed(result, MFT_CONTIGUOUS, out);
            explain_append(why, wl, &pos,
                           "PyTorch 1.13 has no rank-%d channels_last: %s gives a contiguous "
                           "result",
                           mft_tensor_ndim(in[0]), op);
            out->deviation = mft_tensor_ndim(in[0]) == 3 ? 1 : 0;
        }
        break;
    case PT_CAT: {
        bool all_cl = ndim == 4 || ndim == 5;
        explain_append(why, wl, &pos,
                       "PyTorch's cat is channels_last only when every input reads as "
                       "channels_last: ");
        for (int k = 0; k < n; k++) {
            char name[32];
            snprintf(name, sizeof name, "input %d", k);
            pt_reading(name, in[k], reading, sizeof reading);
            explain_append(why, wl, &pos, "%s%s", k ? "; " : "", reading);
            if (pt_suggest_t(in[k]) != MFT_CHANNELS_LAST) all_cl = false;
        }
        pt_packed(result, all_cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, out);
        out->deviation = ndim == 3 ? 1 : 2;
        break;
    }
    case PT_NONE: return false;
    }
    pt_finish(result, out);
    return true;
}
