/* ops/dispatch/dispatch.c — the kernel table keyed by (op, format, dtype), lookup
 * (user kernel -> built-in exact -> built-in ANY -> fallback through format
 * conversion, counted; a user kernel may decline a call, Note [Declining
 * kernels] in mft/dispatch.h; strict levels refuse fallbacks or every
 * conversion), the per-thread record of the last dispatch (each run
 * reported through mft__kernel_end: profiler, verbose line), the usage
 * counts, the verbose log callback, and running one built-in kernel outside
 * a dispatch (mft_dispatch_call_builtin, interface.c). Built-in kernels live
 * in const tables of the family files; user kernels in a small array here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dispatch_internal.h"

/* mft__op_id numbers the registry's rows in order (ops/ops_internal.h). */
const char *mft__op_name(mft__op_id op) {
    const mft_op_info *info = mft_op_at((int)op);
    return info ? info->name : "invalid";
}

/* Note [Kernel tables]
 * Built-in kernels live in const tables of their family's files. The
 * dispatcher knows no family: each op passes its family's tables to
 * mft__dispatch (NULL-terminated, searched in order, first match wins: the
 * fast-kernel table comes before the reference table, so a reference kernel
 * under the same key only serves as documentation and fallback). So the
 * dispatcher sits below the families, and the one list of every table,
 * mft__kernel_index (ops/dispatch/kernel_index.c), above them: listings,
 * the registry test, what registration accepts (an op's dtypes) and
 * mft_dispatch_call_builtin (ops/dispatch/interface.c) read it; no lookup
 * of a dispatch does. */

/* ---------------------------------------------------------------- user kernels */
#define DISPATCH_MAX_USER 64
#define DISPATCH_MAX_NAMES 256
#define DISPATCH_NAME_LEN 64
typedef struct user_kernel {
    mft__op_id op;
    mft_format fmt;
    mft_dtype dtype;
    const char *name; /* interned: valid for the life of the process */
    mft_kernel_fn fn;
    mft_kernel_applies_fn applies; /* NULL: every call */
    void *ctx;
} user_kernel;
static user_kernel g_user[DISPATCH_MAX_USER];
static int g_nuser = 0;

/* User kernel names, kept for the life of the process (never freed, never
 * moved), so the names handed out by mft_dispatch_last(), the usage counts
 * and the event rings stay valid after their kernel is unregistered or
 * another takes its slot. Registering the same name again reuses it. */
static char g_names[DISPATCH_MAX_NAMES][DISPATCH_NAME_LEN];
static int g_nnames = 0;

static const char *dispatch_intern(const char *name) {
    for (int i = 0; i < g_nnames; i++)
        if (!strcmp(g_names[i], name)) return g_names[i];
    if (g_nnames == DISPATCH_MAX_NAMES) return NULL;
    memcpy(g_names[g_nnames], name, strlen(name) + 1);
    return g_names[g_nnames++];
}

/* Only the registry's DISPATCHED rows have kernel tables. */
static int dispatch_find_op(const char *name) {
    const mft_op_info *info = mft_op_find(name);
    return info && info->dispatched ? (int)(info - mft_op_at(0)) : -1;
}

static bool dispatch_check_key(const char *fn, const char *op, mft_format fmt, mft_dtype dtype,
                               int *op_out) {
    if (!op) {
        mft__set_error(MFT_ERR_NULL, "%s: op name is NULL", fn);
        return false;
    }
    int id = dispatch_find_op(op);
    if (id < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: no dispatched op named \"%s\"", fn, op);
        return false;
    }
    /* the blocked formats with a tag (docs/spec.md §7): a kernel for them
     * runs when an op dispatches its packed blocked operands natively */
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST && fmt != MFT_FORMAT_ANY &&
        fmt != MFT_NCHW8C && fmt != MFT_NCHW16C) {
        mft__set_error(MFT_ERR_FORMAT, "%s: format %d is not CONTIGUOUS, CHANNELS_LAST, NCHW8C, "
                       "NCHW16C or ANY", fn, (int)fmt);
        return false;
    }
    if (mft__check_dtype(fn, dtype) != MFT_OK) return false;
    *op_out = id;
    return true;
}

/* What registration refuses beyond a malformed key: a key no dispatch can
 * ever ask for. The op's dtypes are those of its built-in kernels (an op
 * validates its dtype before dispatching and has a kernel for every dtype it
 * accepts: the registry test checks the reference); CHANNELS_LAST (or a
 * blocked format) is never asked of an op whose format rule always gives
 * CONTIGUOUS results. */
static bool dispatch_check_reachable(const char *fn, const char *op, mft__op_id id, mft_format fmt,
                                     mft_dtype dtype) {
    const unsigned dts = mft__builtin_dtypes(id);
    if (!(dts & (1u << dtype))) {
        char list[64];
        mft__dtype_mask_text(list, sizeof list, dts);
        mft__set_error(MFT_ERR_DTYPE, "%s: op %s has no kernels for dtype %s (it dispatches %s)",
                       fn, op, mft_dtype_name(dtype), list);
        return false;
    }
    const mft_format_rule *rule = mft_op_at((int)id)->rule;
    if ((fmt == MFT_CHANNELS_LAST || fmt == MFT_NCHW8C || fmt == MFT_NCHW16C) && rule &&
        rule->output == MFT_RULE_CONTIGUOUS) {
        mft__set_error(MFT_ERR_FORMAT, "%s: op %s is only dispatched in CONTIGUOUS (its format "
                       "rule \"%s\" gives CONTIGUOUS results), so a %s kernel would never run",
                       fn, op, rule->name, mft_format_name(fmt));
        return false;
    }
    return true;
}

static user_kernel *dispatch_user(mft__op_id op, mft_format fmt, mft_dtype dtype) {
    for (int i = 0; i < g_nuser; i++)
        if (g_user[i].op == op && g_user[i].fmt == fmt && g_user[i].dtype == dtype)
            return &g_user[i];
    return NULL;
}

mft_status mft_dispatch_register_ex(const mft_kernel_reg *reg) {
    const char *f = "mft_dispatch_register";
    if (!reg) {
        mft__set_error(MFT_ERR_NULL, "%s: reg is NULL", f);
        return MFT_ERR_NULL;
    }
    int id;
    if (!dispatch_check_key(f, reg->op, reg->format, reg->dtype, &id)) return mft_last_error();
    if (!reg->name || !reg->fn) {
        mft__set_error(MFT_ERR_NULL, "%s: %s is NULL (op %s)", f, !reg->name ? "name" : "fn",
                       reg->op);
        return MFT_ERR_NULL;
    }
    const size_t len = strlen(reg->name);
    if (len == 0 || len >= DISPATCH_NAME_LEN) {
        mft__set_error(MFT_ERR_INVALID, "%s: kernel name \"%.*s%s\" has %zu characters (1 to %d)",
                       f, 40, reg->name, len > 40 ? "..." : "", len, DISPATCH_NAME_LEN - 1);
        return MFT_ERR_INVALID;
    }
    if (!dispatch_check_reachable(f, reg->op, (mft__op_id)id, reg->format, reg->dtype))
        return mft_last_error();
    user_kernel *u = dispatch_user((mft__op_id)id, reg->format, reg->dtype);
    if (!u && g_nuser == DISPATCH_MAX_USER) {
        mft__set_error(MFT_ERR_NOMEM, "%s: more than %d user kernels", f, DISPATCH_MAX_USER);
        return MFT_ERR_NOMEM;
    }
    const char *name = dispatch_intern(reg->name);
    if (!name) {
        mft__set_error(MFT_ERR_NOMEM, "%s: more than %d distinct user kernel names", f,
                       DISPATCH_MAX_NAMES);
        return MFT_ERR_NOMEM;
    }
    if (!u) u = &g_user[g_nuser++];
    *u = (user_kernel){(mft__op_id)id, reg->format, reg->dtype, name, reg->fn, reg->applies,
                       reg->ctx};
    return MFT_OK;
}

mft_status mft_dispatch_register(const char *op, mft_format fmt, mft_dtype dtype, const char *name,
                                 mft_kernel_fn fn) {
    const mft_kernel_reg reg = {op, fmt, dtype, name, fn, NULL, NULL};
    return mft_dispatch_register_ex(&reg);
}

mft_status mft_dispatch_unregister(const char *op, mft_format fmt, mft_dtype dtype) {
    const char *f = "mft_dispatch_unregister";
    int id;
    if (!dispatch_check_key(f, op, fmt, dtype, &id)) return mft_last_error();
    user_kernel *u = dispatch_user((mft__op_id)id, fmt, dtype);
    if (!u) {
        mft__set_error(MFT_ERR_INVALID, "%s: no user kernel for (%s, %s, %s)", f, op,
                       fmt == MFT_FORMAT_ANY ? "ANY" : mft_format_name(fmt),
                       mft_dtype_name(dtype));
        return MFT_ERR_INVALID;
    }
    *u = g_user[--g_nuser];
    return MFT_OK;
}

/* ---------------------------------------------------------------- state */
static _Thread_local mft_dispatch_info tl_last = {
    "", "", MFT_CONTIGUOUS, MFT_CONTIGUOUS, MFT_F32, 0, false, 0, 0, ""};
static _Thread_local int64_t tl_conversions = 0;
static atomic_int g_strict = MFT_STRICT_OFF;
const mft_dispatch_info *mft_dispatch_last(void) { return &tl_last; }
int64_t mft_dispatch_conversions(void) { return tl_conversions; }
void mft_dispatch_conversions_reset(void) { tl_conversions = 0; }

mft_status mft_dispatch_set_strict_level(mft_strict_level level) {
    if ((int)level < 0 || level >= MFT_STRICT_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "mft_dispatch_set_strict_level: level %d is not "
                       "MFT_STRICT_OFF (0), MFT_STRICT_FALLBACK (1) or MFT_STRICT_ALL (2)",
                       (int)level);
        return MFT_ERR_INVALID;
    }
    atomic_store(&g_strict, (int)level);
    return MFT_OK;
}
mft_strict_level mft_dispatch_strict_level(void) { return (mft_strict_level)atomic_load(&g_strict); }
void mft_dispatch_set_strict(bool strict) {
    atomic_store(&g_strict, strict ? MFT_STRICT_FALLBACK : MFT_STRICT_OFF);
}
bool mft_dispatch_strict(void) { return atomic_load(&g_strict) != MFT_STRICT_OFF; }

/* ---------------------------------------------------------------- usage counts
 * Per thread: how often each (op, kernel) ran, with how many conversions,
 * and how often a user kernel declined, for "which kernels ran" summaries
 * (mft_dispatch_stats). Kernel names are static or interned, so pointers
 * identify them. */
#define DISPATCH_STATS_MAX 128
typedef struct dispatch_stat {
    const char *op, *kernel;
    int64_t calls, conversions, declines;
} dispatch_stat;
static _Thread_local dispatch_stat tl_stats[DISPATCH_STATS_MAX];
static _Thread_local int tl_nstats = 0;

static dispatch_stat *dispatch_stat_of(const char *op, const char *kernel) {
    for (int i = 0; i < tl_nstats; i++)
        if (tl_stats[i].kernel == kernel && tl_stats[i].op == op) return &tl_stats[i];
    if (tl_nstats == DISPATCH_STATS_MAX) return NULL;
    tl_stats[tl_nstats] = (dispatch_stat){op, kernel, 0, 0, 0};
    return &tl_stats[tl_nstats++];
}

static void dispatch_count(const mft_dispatch_info *d) {
    dispatch_stat *st = dispatch_stat_of(d->op, d->kernel);
    if (!st) return;
    st->calls++;
    st->conversions += d->conversions;
}

void mft_dispatch_stats_reset(void) { tl_nstats = 0; }

size_t mft_dispatch_stats(char *buf, size_t len) {
    /* most-called first; ties keep first-use order */
    int order[DISPATCH_STATS_MAX];
    for (int i = 0; i < tl_nstats; i++) order[i] = i;
    for (int i = 1; i < tl_nstats; i++) {
        int v = order[i], k = i;
        while (k > 0 && tl_stats[order[k - 1]].calls < tl_stats[v].calls) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = v;
    }
    size_t pos = 0;
    if (buf && len) buf[0] = 0;
    for (int i = 0; i < tl_nstats; i++) {
        const dispatch_stat *st = &tl_stats[order[i]];
        int w = snprintf(buf && pos < len ? buf + pos : NULL, buf && pos < len ? len - pos : 0,
                         "%-28s %-40s %8lld calls %6lld conversions %6lld declined\n", st->op,
                         st->kernel, (long long)st->calls, (long long)st->conversions,
                         (long long)st->declines);
        if (w > 0) pos += (size_t)w;
    }
    return pos;
}

/* ---------------------------------------------------------------- lookup */
typedef struct found_kernel {
    mft_kernel_fn fn;
    const char *name;
    mft_format fmt;
    bool user;
} found_kernel;

/* The user kernels that declined one dispatch (at most three are asked:
 * exact, ANY, and the other format's on the way to a fallback). */
typedef struct declines {
    int n;
    const char *first;
} declines;

static const char *dispatch_fmt_name(mft_format f) {
    return f == MFT_FORMAT_ANY ? "ANY" : mft_format_name(f);
}

/* Asks u's applicability test (Note [Declining kernels]); a decline is
 * counted, logged and remembered in *dl. */
static bool dispatch_user_takes(const user_kernel *u, const mft_kernel_args *pre, declines *dl) {
    if (!u->applies || u->applies(pre, u->ctx)) return true;
    const char *op = mft__op_name(u->op);
    if (dl->n++ == 0) dl->first = u->name;
    dispatch_stat *st = dispatch_stat_of(op, u->name);
    if (st) st->declines++;
    if (mft__verbose_on()) {
        char line[160];
        snprintf(line, sizeof line, "mft_verbose,decline,%s,%s,%s,%s,user", op, u->name,
                 dispatch_fmt_name(u->fmt), mft_dtype_name(u->dtype));
        mft__verbose_line(line);
    }
    return false;
}

static bool dispatch_builtin(const mft__kernel_def *const *tables, mft__op_id op, mft_format fmt,
                             mft_dtype dtype, found_kernel *k) {
    for (size_t t = 0; tables[t]; t++)
        for (const mft__kernel_def *d = tables[t]; d->fn; d++)
            if (d->op == op && d->fmt == fmt && d->dtype == dtype) {
                *k = (found_kernel){d->fn, d->name, fmt, false};
                return true;
            }
    return false;
}

/* The first candidate for (op, fmt, dtype) that takes the call: the user
 * kernel for fmt, then (with_any) the user kernel for ANY, the built-in for
 * fmt, then (with_any) the built-in for ANY. */
static bool dispatch_lookup(const mft__kernel_def *const *tables, mft__op_id op, mft_format fmt,
                            mft_dtype dtype, bool with_any, const mft_kernel_args *pre,
                            declines *dl, found_kernel *k) {
    const user_kernel *cand[2] = {dispatch_user(op, fmt, dtype),
                                  with_any ? dispatch_user(op, MFT_FORMAT_ANY, dtype) : NULL};
    for (int i = 0; i < 2; i++)
        if (cand[i] && dispatch_user_takes(cand[i], pre, dl)) {
            *k = (found_kernel){cand[i]->fn, cand[i]->name, cand[i]->fmt, true};
            return true;
        }
    return dispatch_builtin(tables, op, fmt, dtype, k) ||
           (with_any && dispatch_builtin(tables, op, MFT_FORMAT_ANY, dtype, k));
}

/* ", user kernel X declined" (or "2 user kernels declined, X first") for
 * error messages; "" when none did. */
static const char *dispatch_decline_text(char *buf, size_t len, const declines *dl) {
    if (dl->n == 0) return "";
    if (dl->n == 1) snprintf(buf, len, "; user kernel %s declined the call", dl->first);
    else snprintf(buf, len, "; %d user kernels declined the call (%s first)", dl->n, dl->first);
    return buf;
}

/* ---------------------------------------------------------------- running */
/* The name a built-in kernel reports for this call when it chose among
 * algorithms (mft__dispatch_report_as); NULL: the table's name. */
static _Thread_local const char *tl_report_as = NULL;
void mft__dispatch_report_as(const char *name) { tl_report_as = name; }

/* Note [Kernel scratch] (ops/ops_internal.h): bytes of the scratch the
 * running kernel could not get (0: none). */
static _Thread_local size_t tl_kernel_nomem = 0;
void mft__kernel_nomem(size_t bytes) { tl_kernel_nomem = bytes ? bytes : 1; }
bool mft__kernel_failed(void) { return tl_kernel_nomem != 0; }

/* The kernels running on this thread through mft__dispatch, innermost
 * first (a user kernel may run ops, or call a built-in, which dispatch in
 * turn): a list of frames on the dispatching stack. */
typedef struct running_frame {
    mft__op_id op;
    const void *params;
    const struct running_frame *outer;
} running_frame;
static _Thread_local const running_frame *tl_running = NULL;

bool mft__dispatch_running(mft__op_id op, const void *params) {
    for (const running_frame *r = tl_running; r; r = r->outer)
        if (r->op == op && r->params == params) return true;
    return false;
}

mft_status mft__dispatch_run_builtin(const char *fn, const mft__kernel_def *k,
                                     const mft_kernel_args *args) {
    const char *saved_report = tl_report_as;
    const size_t saved_nomem = tl_kernel_nomem;
    tl_kernel_nomem = 0;
    k->fn(args);
    const size_t failed = tl_kernel_nomem;
    tl_report_as = saved_report;
    /* inside a dispatch (a user kernel handing its call to the built-in),
     * the failure is that dispatch's too: its outputs are garbage */
    tl_kernel_nomem = saved_nomem ? saved_nomem : tl_running ? failed : 0;
    for (int i = 0; i < args->noutputs; i++)
        atomic_fetch_add(&args->outputs[i]->storage->version, 1);
    if (failed) {
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory allocating %zu bytes of scratch for "
                       "kernel %s", fn, failed, k->name);
        return MFT_ERR_NOMEM;
    }
    return MFT_OK;
}

mft_status mft__dispatch(const char *fn, const mft__kernel_def *const *tables, mft__op_id op,
                         mft_format fmt, mft_dtype dtype, int nin, const mft_tensor *const *in,
                         const bool *convert, int nout, mft_tensor *const *out,
                         const void *params) {
    /* what an applicability test sees: the operands as the op passes them */
    const mft_kernel_args pre = {nin, nout, in, out, params};
    declines dl = {0, ""};
    char dtext[128];
    found_kernel k;
    bool found = dispatch_lookup(tables, op, fmt, dtype, true, &pre, &dl, &k);
    bool fallback = false;
    mft_format other = fmt == MFT_CONTIGUOUS ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
    if (!found) { /* another format of the same dtype (its ANY kernels were asked already) */
        found = dispatch_lookup(tables, op, other, dtype, false, &pre, &dl, &k);
        fallback = found;
    }
    if (!found) {
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: no kernel for (%s, %s) in any format%s", fn,
                       mft__op_name(op), mft_dtype_name(dtype),
                       dispatch_decline_text(dtext, sizeof dtext, &dl));
        return MFT_ERR_UNSUPPORTED;
    }
    const mft_strict_level strict = mft_dispatch_strict_level();
    if (fallback && strict != MFT_STRICT_OFF) {
        mft__set_error(
            MFT_ERR_UNSUPPORTED,
            "%s: no kernel for (%s, %s, %s)%s; strict mode forbids the fallback through %s "
            "(kernel %s)",
            fn, mft__op_name(op), mft_format_name(fmt), mft_dtype_name(dtype),
            dispatch_decline_text(dtext, sizeof dtext, &dl), mft_format_name(k.fmt), k.name);
        return MFT_ERR_UNSUPPORTED;
    }
    /* which operands the kernel needs in another layout */
    bool conv_in[MFT__ITER_MAX_OPERANDS], conv_out[MFT__ITER_MAX_OPERANDS];
    for (int i = 0; i < nin; i++)
        conv_in[i] = convert && convert[i] && k.fmt != MFT_FORMAT_ANY &&
                     !mft_tensor_is_contiguous(in[i], k.fmt);
    /* a plain output of a call asked in a blocked format (grad_w of an
     * nChw16c convolution), or one in a descriptor of its own (MFT_BLOCKED:
     * the gradient of an OIhw16i16o weight), is written by the kernel in
     * its layout */
    for (int i = 0; i < nout; i++)
        conv_out[i] = k.fmt != MFT_FORMAT_ANY && !mft_tensor_is_contiguous(out[i], k.fmt) &&
                      !(k.fmt == fmt && (fmt == MFT_NCHW8C || fmt == MFT_NCHW16C) &&
                        (!out[i]->nblocks || out[i]->tag == MFT_BLOCKED));
    if (strict == MFT_STRICT_ALL)
        for (int i = 0; i < nin + nout; i++) {
            const bool is_in = i < nin;
            const int j = is_in ? i : i - nin;
            if (!(is_in ? conv_in[j] : conv_out[j])) continue;
            const mft_tensor *t = is_in ? in[j] : out[j];
            char b1[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_UNSUPPORTED, "%s: strict level ALL forbids converting %s %d "
                           "(sizes %s, %s) %s %s for kernel %s of (%s, %s, %s)%s", fn,
                           is_in ? "input" : "output", j,
                           mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes), mft__layout_label(t),
                           is_in ? "to" : "from", mft_format_name(k.fmt), k.name,
                           mft__op_name(op), mft_format_name(fmt), mft_dtype_name(dtype),
                           dispatch_decline_text(dtext, sizeof dtext, &dl));
            return MFT_ERR_UNSUPPORTED;
        }
    const mft_tensor *kin[MFT__ITER_MAX_OPERANDS];
    mft_tensor *kout[MFT__ITER_MAX_OPERANDS];
    mft_tensor *temps[2 * MFT__ITER_MAX_OPERANDS];
    int ntemps = 0, conversions = 0;
    mft_status st = MFT_OK;
    uint64_t t0 = mft__kernel_begin();
    mft__scope_suspend();
    for (int i = 0; i < nin && st == MFT_OK; i++) {
        kin[i] = in[i];
        if (!conv_in[i]) continue;
        /* no kernel for the asked format: FALLBACK; a kernel for it that
         * needs packed operands: OPERAND (Note [Conversions and their causes]) */
        mft__cause_push(fallback ? MFT_CAUSE_FALLBACK : MFT_CAUSE_OPERAND, mft__op_name(op));
        mft_tensor *c = mft_contiguous(in[i], k.fmt);
        mft__cause_pop();
        if (!c) {
            st = mft__relabel_error(fn);
            break;
        }
        temps[ntemps++] = c;
        kin[i] = c;
        conversions++;
    }
    for (int i = 0; i < nout && st == MFT_OK; i++) {
        kout[i] = out[i];
        if (!conv_out[i]) continue;
        mft_tensor *t = mft__tensor_alloc(fn, out[i]->ndim, out[i]->sizes, out[i]->dtype, k.fmt);
        if (!t) {
            st = mft_last_error();
            break;
        }
        temps[ntemps++] = t;
        kout[i] = t;
        conversions++;
    }
    mft__scope_resume();
    if (st == MFT_OK) {
        mft_kernel_args args = {nin, nout, kin, kout, params};
        const char *saved = tl_report_as;
        const running_frame frame = {op, params, tl_running};
        tl_report_as = NULL;
        tl_kernel_nomem = 0;
        tl_running = &frame;
        k.fn(&args);
        tl_running = frame.outer;
        if (!k.user && tl_report_as) k.name = tl_report_as;
        tl_report_as = saved;
        if (tl_kernel_nomem) { /* Note [Kernel scratch]: the outputs are garbage */
            mft__set_error(MFT_ERR_NOMEM, "%s: out of memory allocating %zu bytes of scratch for "
                           "kernel %s", fn, tl_kernel_nomem, k.name);
            tl_kernel_nomem = 0;
            st = MFT_ERR_NOMEM;
        }
    }
    if (st == MFT_OK) {
        for (int i = 0; i < nout; i++) {
            if (kout[i] != out[i] && out[i]->numel) {
                mft__copy_kernel(out[i], kout[i]);
                mft__note_conversion_as(fallback ? MFT_CAUSE_FALLBACK : MFT_CAUSE_OPERAND,
                                        mft__op_name(op), kout[i], out[i]);
            }
            atomic_fetch_add(&out[i]->storage->version, 1);
        }
        tl_last = (mft_dispatch_info){mft__op_name(op), k.name, fmt,   k.fmt,   dtype,
                                      conversions,      k.user, tl_last.seq + 1, dl.n, dl.first};
        tl_conversions += conversions;
        dispatch_count(&tl_last);
        mft__kernel_end(t0, &(mft__kernel_info){mft__op_name(op), k.name, fmt, k.fmt, dtype, nin,
                                                nout, in, (const mft_tensor *const *)out,
                                                conversions, k.user});
    }
    for (int i = 0; i < ntemps; i++) mft_tensor_release(temps[i]);
    return st;
}

/* ---------------------------------------------------------------- user kernels, read */
int mft__dispatch_user_count(void) { return g_nuser; }

void mft__dispatch_user_get(int i, mft__kernel_def *k) {
    *k = (mft__kernel_def){g_user[i].op, g_user[i].fmt, g_user[i].dtype, g_user[i].name,
                           g_user[i].fn};
}

bool mft__dispatch_user_conditional(int i) { return g_user[i].applies != NULL; }
