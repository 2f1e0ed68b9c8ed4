/* ops/dispatch/dispatch.c — the kernel table keyed by (op, format, dtype), lookup
 * (user kernel -> built-in exact -> built-in ANY -> fallback through format
 * conversion, counted; strict mode refuses fallbacks), the per-thread record
 * of the last dispatch (each run reported through mft__kernel_end: profiler,
 * verbose line), the verbose log callback, and
 * the table listing (mft/dispatch.h). Built-in kernels live in const tables
 * of the family files; user kernels in a small array here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops_internal.h"

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
 * mft__kernel_index (ops/dispatch/kernel_index.c, for listings and the
 * registry test), above them. */

/* ---------------------------------------------------------------- user kernels */
#define DISPATCH_MAX_USER 64
#define DISPATCH_NAME_LEN 64
typedef struct user_kernel {
    mft__op_id op;
    mft_format fmt;
    mft_dtype dtype;
    char name[DISPATCH_NAME_LEN];
    mft_kernel_fn fn;
} user_kernel;
static user_kernel g_user[DISPATCH_MAX_USER];
static int g_nuser = 0;

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
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST && fmt != MFT_FORMAT_ANY) {
        mft__set_error(MFT_ERR_FORMAT, "%s: format %d is not CONTIGUOUS, CHANNELS_LAST or ANY", fn,
                       (int)fmt);
        return false;
    }
    if (mft__check_dtype(fn, dtype) != MFT_OK) return false;
    *op_out = id;
    return true;
}

static user_kernel *dispatch_user(mft__op_id op, mft_format fmt, mft_dtype dtype) {
    for (int i = 0; i < g_nuser; i++)
        if (g_user[i].op == op && g_user[i].fmt == fmt && g_user[i].dtype == dtype)
            return &g_user[i];
    return NULL;
}

mft_status mft_dispatch_register(const char *op, mft_format fmt, mft_dtype dtype, const char *name,
                                 mft_kernel_fn fn) {
    const char *f = "mft_dispatch_register";
    int id;
    if (!dispatch_check_key(f, op, fmt, dtype, &id)) return mft_last_error();
    if (!name || !fn) {
        mft__set_error(MFT_ERR_NULL, "%s: %s is NULL", f, !name ? "name" : "fn");
        return MFT_ERR_NULL;
    }
    user_kernel *u = dispatch_user((mft__op_id)id, fmt, dtype);
    if (!u) {
        if (g_nuser == DISPATCH_MAX_USER) {
            mft__set_error(MFT_ERR_NOMEM, "%s: more than %d user kernels", f, DISPATCH_MAX_USER);
            return MFT_ERR_NOMEM;
        }
        u = &g_user[g_nuser++];
    }
    u->op = (mft__op_id)id;
    u->fmt = fmt;
    u->dtype = dtype;
    snprintf(u->name, sizeof u->name, "%s", name);
    u->fn = fn;
    return MFT_OK;
}

mft_status mft_dispatch_unregister(const char *op, mft_format fmt, mft_dtype dtype) {
    const char *f = "mft_dispatch_unregister";
    int id;
    if (!dispatch_check_key(f, op, fmt, dtype, &id)) return mft_last_error();
    user_kernel *u = dispatch_user((mft__op_id)id, fmt, dtype);
    if (!u) {
        mft__set_error(MFT_ERR_INVALID, "%s: no user kernel for (%s, %s, %s)", f, op,
                       mft_format_name(fmt), mft_dtype_name(dtype));
        return MFT_ERR_INVALID;
    }
    *u = g_user[--g_nuser];
    return MFT_OK;
}

/* ---------------------------------------------------------------- lookup */
typedef struct found_kernel {
    mft_kernel_fn fn;
    const char *name;
    mft_format fmt;
    bool user;
} found_kernel;

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

static bool dispatch_lookup(const mft__kernel_def *const *tables, mft__op_id op, mft_format fmt,
                            mft_dtype dtype, found_kernel *k) {
    user_kernel *u = dispatch_user(op, fmt, dtype);
    if (!u) u = dispatch_user(op, MFT_FORMAT_ANY, dtype);
    if (u) {
        *k = (found_kernel){u->fn, u->name, u->fmt, true};
        return true;
    }
    return dispatch_builtin(tables, op, fmt, dtype, k) ||
           dispatch_builtin(tables, op, MFT_FORMAT_ANY, dtype, k);
}

/* ---------------------------------------------------------------- state */
static _Thread_local mft_dispatch_info tl_last = {"",      "", MFT_CONTIGUOUS, MFT_CONTIGUOUS,
                                                  MFT_F32, 0,  false,          0};
static _Thread_local int64_t tl_conversions = 0;
static atomic_bool g_strict = false;
const mft_dispatch_info *mft_dispatch_last(void) { return &tl_last; }
int64_t mft_dispatch_conversions(void) { return tl_conversions; }
void mft_dispatch_conversions_reset(void) { tl_conversions = 0; }
void mft_dispatch_set_strict(bool strict) { atomic_store(&g_strict, strict); }
bool mft_dispatch_strict(void) { return atomic_load(&g_strict); }

/* ---------------------------------------------------------------- usage counts
 * Per thread: how often each (op, kernel) ran and with how many
 * conversions, for "which kernels ran" summaries (mft_dispatch_stats). */
#define DISPATCH_STATS_MAX 128
typedef struct dispatch_stat {
    const char *op, *kernel;
    int64_t calls, conversions;
} dispatch_stat;
static _Thread_local dispatch_stat tl_stats[DISPATCH_STATS_MAX];
static _Thread_local int tl_nstats = 0;

static void dispatch_count(const mft_dispatch_info *d) {
    for (int i = 0; i < tl_nstats; i++)
        if (tl_stats[i].kernel == d->kernel && tl_stats[i].op == d->op) {
            tl_stats[i].calls++;
            tl_stats[i].conversions += d->conversions;
            return;
        }
    if (tl_nstats < DISPATCH_STATS_MAX)
        tl_stats[tl_nstats++] = (dispatch_stat){d->op, d->kernel, 1, d->conversions};
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
                         "%-28s %-40s %8lld calls %6lld conversions\n", st->op, st->kernel,
                         (long long)st->calls, (long long)st->conversions);
        if (w > 0) pos += (size_t)w;
    }
    return pos;
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

mft_status mft__dispatch(const char *fn, const mft__kernel_def *const *tables, mft__op_id op,
                         mft_format fmt, mft_dtype dtype, int nin, const mft_tensor *const *in,
                         const bool *convert, int nout, mft_tensor *const *out,
                         const void *params) {
    found_kernel k;
    bool found = dispatch_lookup(tables, op, fmt, dtype, &k);
    bool fallback = false;
    if (!found) { /* another format of the same dtype */
        mft_format other = fmt == MFT_CONTIGUOUS ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        found = dispatch_lookup(tables, op, other, dtype, &k);
        fallback = found;
    }
    if (!found) {
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: no kernel for (%s, %s) in any format", fn,
                       mft__op_name(op), mft_dtype_name(dtype));
        return MFT_ERR_UNSUPPORTED;
    }
    if (fallback && mft_dispatch_strict()) {
        mft__set_error(
            MFT_ERR_UNSUPPORTED,
            "%s: no kernel for (%s, %s, %s); strict mode forbids the fallback through %s "
            "(kernel %s)",
            fn, mft__op_name(op), mft_format_name(fmt), mft_dtype_name(dtype),
            mft_format_name(k.fmt), k.name);
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
        if (!convert || !convert[i] || k.fmt == MFT_FORMAT_ANY ||
            mft_tensor_is_contiguous(in[i], k.fmt))
            continue;
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
        if (k.fmt == MFT_FORMAT_ANY || mft_tensor_is_contiguous(out[i], k.fmt)) continue;
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
        tl_report_as = NULL;
        tl_kernel_nomem = 0;
        k.fn(&args);
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
        tl_last = (mft_dispatch_info){
            mft__op_name(op), k.name, fmt, k.fmt, dtype, conversions, k.user, tl_last.seq + 1};
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
