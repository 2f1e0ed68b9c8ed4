/* profile/profile.c — the profiler (mft/profile.h): a per-thread buffer of
 * kernel events (dispatched ops, elementwise, reductions, optimizer,
 * copies) and conversion events filled through the hooks in tensor/events.c,
 * each with its call site and module path, and its two outputs: a
 * key_averages-style table with format, kernel, module and conversion
 * columns (conversions with the time of their copies, copies that are no
 * conversion apart), and Chrome trace JSON. Nothing here runs unless the
 * calling thread is recording (mft__tl_profiling). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef enum prof_kind { PROF_KERNEL, PROF_CONVERSION } prof_kind;

typedef struct prof_event {
    prof_kind kind;
    const char *op, *kernel; /* kernel events; op also for conversions */
    const char *in, *out;    /* layout labels (conversions: from, to) */
    mft_format asked, kfmt;  /* MFT_FORMAT_COUNT when not a format op */
    mft_dtype dtype;
    mft_conversion_cause cause; /* conversions */
    int conversions;            /* kernel events: conversions inside dispatch */
    bool user;
    uint64_t t0, t1; /* ns; conversions: their copy's, or t0 = t1 = when noted */
    int64_t bytes;
    const char *site_file;
    int site_line;
    int module;   /* index into the module table, -1: outside modules */
    int64_t pair; /* a copy event and the conversion it made point at each other; -1 */
} prof_event;

static _Thread_local prof_event *tl_ev = NULL;
static _Thread_local int64_t tl_nev = 0, tl_cap = 0;
static _Thread_local uint64_t tl_origin = 0;     /* mft_profile_begin time */
static _Thread_local int64_t tl_last_kernel = -1; /* newest kernel event */

/* ------------------------------------------------------------------ module paths
 * Events name the module path and kind current when they happened (Note
 * [Module path] in tensor/naming.c). A path has up to 511 characters, so
 * events hold an index into a per-thread table of the distinct (path, kind)
 * pairs, found through a hash of both; the table lives until
 * mft_profile_clear. A pair that cannot be stored (out of memory) is
 * recorded as "outside modules". */
typedef struct prof_module {
    char *path, *kind; /* one allocation: path, NUL, kind, NUL */
    uint64_t hash;
} prof_module;
static _Thread_local prof_module *tl_mod = NULL;
static _Thread_local int tl_nmod = 0, tl_capmod = 0;
static _Thread_local int *tl_slot = NULL; /* open addressing: module index + 1, 0 empty */
static _Thread_local int tl_nslot = 0;    /* a power of two, > 2 * tl_nmod */
static _Thread_local int tl_mod_last = -1;

static uint64_t prof_hash(const char *path, const char *kind) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (const char *p = path; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
    h = (h ^ 0xffu) * 1099511628211u;
    for (const char *p = kind; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
    return h;
}

static bool prof_module_is(int i, uint64_t h, const char *path, const char *kind) {
    return tl_mod[i].hash == h && strcmp(tl_mod[i].path, path) == 0 &&
           strcmp(tl_mod[i].kind, kind) == 0;
}

static void prof_modules_free(void) {
    for (int i = 0; i < tl_nmod; i++) free(tl_mod[i].path);
    free(tl_mod);
    free(tl_slot);
    tl_mod = NULL;
    tl_slot = NULL;
    tl_nmod = tl_capmod = tl_nslot = 0;
    tl_mod_last = -1;
}

/* The index of the current module path, -1 outside modules (or when it
 * cannot be stored). */
static int prof_module_id(void) {
    const char *path = mft_module_path(), *kind = mft_module_kind();
    if (!path[0]) return -1;
    if (tl_mod_last >= 0 && strcmp(tl_mod[tl_mod_last].path, path) == 0 &&
        strcmp(tl_mod[tl_mod_last].kind, kind) == 0)
        return tl_mod_last;
    const uint64_t h = prof_hash(path, kind);
    if (tl_nslot) {
        for (int s = (int)(h & (uint64_t)(tl_nslot - 1));; s = (s + 1) & (tl_nslot - 1)) {
            if (!tl_slot[s]) break;
            if (prof_module_is(tl_slot[s] - 1, h, path, kind)) return tl_mod_last = tl_slot[s] - 1;
        }
    }
    if (tl_nmod == tl_capmod) {
        int cap = tl_capmod ? 2 * tl_capmod : 16;
        prof_module *m = realloc(tl_mod, (size_t)cap * sizeof *m);
        if (!m) return -1;
        tl_mod = m;
        tl_capmod = cap;
        mft__thread_exit_arm(MFT__TEXIT_PROFILE, mft_profile_clear);
    }
    if (2 * (tl_nmod + 1) >= tl_nslot) { /* rehash into twice the slots */
        int ns = tl_nslot ? 2 * tl_nslot : 64;
        int *slots = calloc((size_t)ns, sizeof *slots);
        if (!slots) return -1;
        for (int i = 0; i < tl_nmod; i++) {
            int s = (int)(tl_mod[i].hash & (uint64_t)(ns - 1));
            while (slots[s]) s = (s + 1) & (ns - 1);
            slots[s] = i + 1;
        }
        free(tl_slot);
        tl_slot = slots;
        tl_nslot = ns;
    }
    const size_t pl = strlen(path), kl = strlen(kind);
    char *text = malloc(pl + kl + 2);
    if (!text) return -1;
    memcpy(text, path, pl + 1);
    memcpy(text + pl + 1, kind, kl + 1);
    tl_mod[tl_nmod] = (prof_module){text, text + pl + 1, h};
    int s = (int)(h & (uint64_t)(tl_nslot - 1));
    while (tl_slot[s]) s = (s + 1) & (tl_nslot - 1);
    tl_slot[s] = tl_nmod + 1;
    return tl_mod_last = tl_nmod++;
}

static const char *prof_module_path(int m) { return m >= 0 ? tl_mod[m].path : ""; }
static const char *prof_module_kind(int m) { return m >= 0 ? tl_mod[m].kind : ""; }

/* "1.4 (BatchNorm2d(16))", "1.4" without a kind, "-" outside modules. */
static void prof_module_text(char *buf, size_t len, int m) {
    if (m < 0)
        snprintf(buf, len, "-");
    else if (tl_mod[m].kind[0])
        snprintf(buf, len, "%s (%s)", tl_mod[m].path, tl_mod[m].kind);
    else
        snprintf(buf, len, "%s", tl_mod[m].path);
}

/* ------------------------------------------------------------------ recording */
bool mft_profile_active(void) { return mft__tl_profiling; }
int64_t mft_profile_event_count(void) { return tl_nev; }

void mft_profile_clear(void) {
    free(tl_ev);
    tl_ev = NULL;
    tl_nev = tl_cap = 0;
    tl_last_kernel = -1;
    prof_modules_free();
    mft__thread_exit_disarm(MFT__TEXIT_PROFILE);
}

static void profile_kernel(uint64_t t0, uint64_t t1, const mft__kernel_info *k, int64_t bytes);
static void profile_conversion(const mft__conv_rec *r);
static const mft__profile_sink g_profile_sink = {profile_conversion, profile_kernel};

mft_status mft_profile_begin(void) {
    mft__profile_set_sink(&g_profile_sink); /* the core hands events here */
    mft_profile_clear();
    tl_origin = mft__now_ns();
    mft__tl_profiling = true;
    return MFT_OK;
}

mft_status mft_profile_end(void) {
    if (!mft__tl_profiling) {
        mft__set_error(MFT_ERR_SCOPE, "mft_profile_end: the profiler is not recording on this "
                                      "thread (call mft_profile_begin first)");
        return MFT_ERR_SCOPE;
    }
    mft__tl_profiling = false;
    return MFT_OK;
}

/* The buffer uses plain malloc, not the library allocator: profiling must
 * not change what allocation-failure tests or the live-object counter see. */
static prof_event *prof_push(void) {
    if (tl_nev == tl_cap) {
        int64_t cap = tl_cap ? 2 * tl_cap : 1024;
        prof_event *p = realloc(tl_ev, (size_t)cap * sizeof *p);
        if (!p) {
            mft__tl_profiling = false; /* keep what was recorded */
            mft__set_error(MFT_ERR_NOMEM,
                           "mft_profile: cannot grow the event buffer past %lld "
                           "events; recording stopped",
                           (long long)tl_cap);
            return NULL;
        }
        if (!tl_ev) mft__thread_exit_arm(MFT__TEXIT_PROFILE, mft_profile_clear);
        tl_ev = p;
        tl_cap = cap;
    }
    return &tl_ev[tl_nev++];
}

static void profile_kernel(uint64_t t0, uint64_t t1, const mft__kernel_info *k, int64_t bytes) {
    const int module = prof_module_id();
    prof_event *e = prof_push();
    if (!e) return;
    const char *file;
    int line;
    mft__site_get(&file, &line);
    *e = (prof_event){PROF_KERNEL,
                      k->op,
                      k->kernel,
                      k->nin > 0 ? mft__layout_label(k->in[0]) : "-",
                      k->nout > 0 ? mft__layout_label(k->out[0]) : "-",
                      k->asked,
                      k->kernel_format,
                      k->dtype,
                      MFT_CAUSE_COUNT,
                      k->conversions,
                      k->user,
                      t0 < tl_origin ? tl_origin : t0,
                      t1,
                      bytes,
                      file,
                      line,
                      module,
                      -1};
    tl_last_kernel = tl_nev - 1;
}

/* A conversion pairs with the copy that made it: tensor/events.c timed it
 * when the newest kernel event was that copy (Note [Conversion copy time]),
 * which is then also this buffer's newest kernel event. */
static void profile_conversion(const mft__conv_rec *r) {
    const int module = prof_module_id();
    const mft_conversion_info *ci = mft_conversion_last();
    prof_event *e = prof_push();
    if (!e) return;
    uint64_t t0 = mft__now_ns(), t1 = t0;
    int64_t pair = -1;
    const int64_t k = tl_last_kernel;
    const uint64_t dur = k >= 0 ? tl_ev[k].t1 - tl_ev[k].t0 : 0;
    if (ci->ns > 0 && k >= 0 && tl_ev[k].kind == PROF_KERNEL && tl_ev[k].pair < 0 &&
        strcmp(tl_ev[k].op, "copy") == 0 && (dur > 0 ? dur : 1) == (uint64_t)ci->ns) {
        pair = k;
        tl_ev[k].pair = tl_nev - 1;
        t0 = tl_ev[k].t0;
        t1 = tl_ev[k].t1;
    }
    *e = (prof_event){PROF_CONVERSION,
                      r->op ? r->op : "?",
                      "",
                      r->from,
                      r->to,
                      MFT_FORMAT_COUNT,
                      MFT_FORMAT_COUNT,
                      MFT_F32,
                      r->cause,
                      0,
                      false,
                      t0,
                      t1,
                      r->bytes,
                      r->site_file,
                      r->site_line,
                      module,
                      pair};
}

/* ------------------------------------------------------------------ table */
typedef struct prof_row {
    const char *op, *kernel, *in, *out;
    mft_conversion_cause cause; /* conversion rows */
    bool user;
    const char *site_file;
    int site_line;
    int module;
    int64_t calls, conversions, bytes;
    uint64_t ns;
} prof_row;

static bool prof_same_site(const char *f1, int l1, const char *f2, int l2) {
    return (f1 == NULL) == (f2 == NULL) && (!f1 || (strcmp(f1, f2) == 0 && l1 == l2));
}

static bool prof_same_kernel_row(const prof_row *r, const prof_row *e) {
    return strcmp(r->op, e->op) == 0 && strcmp(r->kernel, e->kernel) == 0 &&
           strcmp(r->in, e->in) == 0 && strcmp(r->out, e->out) == 0 && r->user == e->user &&
           r->module == e->module;
}

/* conversion rows and internal-copy rows: same layouts, module and site
 * (and for conversions the same cause and op) */
static bool prof_same_conv_row(const prof_row *r, const prof_event *e) {
    return r->cause == e->cause && strcmp(r->op, e->op) == 0 && strcmp(r->in, e->in) == 0 &&
           strcmp(r->out, e->out) == 0 && r->module == e->module &&
           prof_same_site(r->site_file, r->site_line, e->site_file, e->site_line);
}

static int prof_by_time(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}
static int prof_by_count(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    if (x->calls != y->calls) return x->calls < y->calls ? 1 : -1;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void prof_rule(mft__text *o, int width) {
    for (int i = 0; i < width; i++) mft__text_printf(o, "-");
    mft__text_printf(o, "\n");
}

#define PROF_WIDTH 170

/* The op column of a kernel event: a copy that made a conversion says its
 * cause ("copy (reshape)"); the others are their op. */
static const char *prof_kernel_op(const prof_event *e) {
    static const char *const copy_for[MFT_CAUSE_COUNT] = {
        "copy (explicit)", "copy (reshape)", "copy (fallback)", "copy (gradient)",
        "copy (operand)"};
    if (e->pair < 0) return e->op;
    const unsigned c = (unsigned)tl_ev[e->pair].cause;
    return c < MFT_CAUSE_COUNT ? copy_for[c] : e->op;
}

/* One row per (op, kernel, in -> out, user, module), sorted by total time. */
static void prof_kernel_table(mft__text *o, prof_row *rows) {
    int64_t nk = 0, nuser = 0;
    uint64_t total_ns = 0;
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        if (e->kind != PROF_KERNEL) continue;
        const prof_row key = {prof_kernel_op(e), e->kernel, e->in, e->out, MFT_CAUSE_COUNT,
                              e->user, NULL, 0, e->module, 0, 0, 0, 0};
        int64_t r = 0;
        while (r < nk && !prof_same_kernel_row(&rows[r], &key)) r++;
        if (r == nk) rows[nk++] = key;
        rows[r].calls++;
        rows[r].conversions += e->conversions;
        rows[r].bytes += e->bytes;
        rows[r].ns += e->t1 - e->t0;
        total_ns += e->t1 - e->t0;
        nuser += e->user;
    }
    if (nk > 1) qsort(rows, (size_t)nk, sizeof *rows, prof_by_time);
    mft__text_printf(o, "%-22s %-52s %-24s %6s %10s %10s %6s %10s %5s  %s\n", "op", "kernel",
                     "format in -> out", "calls", "total ms", "mean us", "%", "MB moved", "conv",
                     "module");
    prof_rule(o, PROF_WIDTH);
    int64_t nruns = 0;
    for (int64_t r = 0; r < nk; r++) {
        char fmt[48], kernel[96], module[640];
        snprintf(fmt, sizeof fmt, "%s -> %s", rows[r].in, rows[r].out);
        snprintf(kernel, sizeof kernel, "%s%s", rows[r].kernel, rows[r].user ? " [user]" : "");
        prof_module_text(module, sizeof module, rows[r].module);
        mft__text_printf(
            o, "%-22.22s %-52.52s %-24.24s %6lld %10.3f %10.2f %6.1f %10.2f %5lld  %s\n",
            rows[r].op, kernel, fmt, (long long)rows[r].calls, (double)rows[r].ns * 1e-6,
            (double)rows[r].ns * 1e-3 / (double)rows[r].calls,
            total_ns ? 100.0 * (double)rows[r].ns / (double)total_ns : 0.0,
            (double)rows[r].bytes * 1e-6, (long long)rows[r].conversions, module);
        nruns += rows[r].calls;
    }
    prof_rule(o, PROF_WIDTH);
    mft__text_printf(o, "%lld kernel runs, %.3f ms in kernels (nested copies counted in both)%s\n",
                     (long long)nruns, (double)total_ns * 1e-6,
                     nuser ? "; [user]: a kernel registered with mft_dispatch_register" : "");
}

/* Rows of conversion events (internal false) or of copy kernel events that
 * no conversion claimed (internal true): time is the copy's. */
static int64_t prof_copy_rows(prof_row *rows, bool internal) {
    int64_t n = 0;
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        if (internal ? e->kind != PROF_KERNEL || e->pair >= 0 || strcmp(e->op, "copy") != 0
                     : e->kind != PROF_CONVERSION)
            continue;
        const mft_conversion_cause cause = internal ? MFT_CAUSE_COUNT : e->cause;
        prof_row key = {e->op, "", e->in, e->out, cause, false, e->site_file, e->site_line,
                        e->module, 0, 0, 0, 0};
        int64_t r = 0;
        while (r < n && !prof_same_conv_row(&rows[r], e)) r++;
        if (r == n) rows[n++] = key;
        rows[r].calls++;
        rows[r].bytes += e->bytes; /* conversions: written; copy events: read + written */
        rows[r].ns += e->t1 - e->t0;
    }
    if (n > 1) qsort(rows, (size_t)n, sizeof *rows, prof_by_count);
    return n;
}

static void prof_site_text(char *buf, size_t len, const prof_row *r) {
    if (r->site_file)
        snprintf(buf, len, "%s:%d", r->site_file, r->site_line);
    else
        snprintf(buf, len, "-");
}

/* One row per (cause, op, from -> to, module, call site). */
static void prof_conversion_table(mft__text *o, prof_row *rows) {
    int64_t by_cause[MFT_CAUSE_COUNT] = {0}, bytes_cause[MFT_CAUSE_COUNT] = {0}, nconv = 0;
    uint64_t ns_cause[MFT_CAUSE_COUNT] = {0};
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        if (e->kind != PROF_CONVERSION) continue;
        nconv++;
        by_cause[e->cause]++;
        bytes_cause[e->cause] += e->bytes;
        ns_cause[e->cause] += e->t1 - e->t0;
    }
    const int64_t nc = prof_copy_rows(rows, false);
    mft__text_printf(o, "\nconversions: %lld", (long long)nconv);
    int64_t hidden = 0;
    for (int c = 0; c < MFT_CAUSE_COUNT; c++) {
        if (mft_conversion_cause_hidden((mft_conversion_cause)c)) hidden += by_cause[c];
        if (by_cause[c])
            mft__text_printf(o, "  %s %lld (%.2f MB, %.3f ms)",
                             mft_conversion_cause_name((mft_conversion_cause)c),
                             (long long)by_cause[c], (double)bytes_cause[c] * 1e-6,
                             (double)ns_cause[c] * 1e-6);
    }
    mft__text_printf(o, "  | hidden %lld\n", (long long)hidden);
    if (!nc) return;
    mft__text_printf(o, "%-9s %-6s %-22s %-24s %7s %10s %10s  %-36s %s\n", "cause", "hidden", "op",
                     "layout from -> to", "count", "MB", "copy ms", "call site", "module");
    prof_rule(o, PROF_WIDTH);
    for (int64_t r = 0; r < nc; r++) {
        char fmt[48], site[160], module[640];
        snprintf(fmt, sizeof fmt, "%s -> %s", rows[r].in, rows[r].out);
        prof_site_text(site, sizeof site, &rows[r]);
        prof_module_text(module, sizeof module, rows[r].module);
        mft__text_printf(o, "%-9s %-6s %-22.22s %-24.24s %7lld %10.3f %10.3f  %-36s %s\n",
                         mft_conversion_cause_name(rows[r].cause),
                         mft_conversion_cause_hidden(rows[r].cause) ? "yes" : "no", rows[r].op, fmt,
                         (long long)rows[r].calls, (double)rows[r].bytes * 1e-6,
                         (double)rows[r].ns * 1e-6, site, module);
    }
}

/* Copy kernel runs no conversion claimed: casts, mft_copy_, and repacks
 * inside an op (mean's F64 accumulator into its result, say), by module and
 * call site, the only owner the events carry. */
static void prof_internal_table(mft__text *o, prof_row *rows) {
    const int64_t n = prof_copy_rows(rows, true);
    if (!n) return;
    int64_t calls = 0;
    uint64_t ns = 0;
    for (int64_t r = 0; r < n; r++) calls += rows[r].calls, ns += rows[r].ns;
    mft__text_printf(o,
                     "\ninternal copies: %lld (%.3f ms): copy kernel runs that are no conversion "
                     "(casts, mft_copy_, repacks inside ops), by module and call site\n",
                     (long long)calls, (double)ns * 1e-6);
    mft__text_printf(o, "%-24s %7s %10s %10s  %-36s %s\n", "layout from -> to", "count", "MB moved",
                     "copy ms", "call site", "module");
    prof_rule(o, PROF_WIDTH);
    for (int64_t r = 0; r < n; r++) {
        char fmt[48], site[160], module[640];
        snprintf(fmt, sizeof fmt, "%s -> %s", rows[r].in, rows[r].out);
        prof_site_text(site, sizeof site, &rows[r]);
        prof_module_text(module, sizeof module, rows[r].module);
        mft__text_printf(o, "%-24.24s %7lld %10.3f %10.3f  %-36s %s\n", fmt,
                         (long long)rows[r].calls, (double)rows[r].bytes * 1e-6,
                         (double)rows[r].ns * 1e-6, site, module);
    }
}

size_t mft_profile_table(char *buf, size_t len) {
    mft__text o = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    prof_row *rows = tl_nev ? malloc((size_t)tl_nev * sizeof *rows) : NULL;
    if (tl_nev && !rows) {
        mft__text_printf(&o, "(mft_profile_table: out of memory for %lld events)\n",
                         (long long)tl_nev);
        return o.pos;
    }
    prof_kernel_table(&o, rows);
    prof_conversion_table(&o, rows);
    prof_internal_table(&o, rows);
    free(rows);
    return o.pos;
}

/* ------------------------------------------------------------------ Chrome trace */
/* Writes s as a JSON string body (quotes and control characters escaped). */
static void prof_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void prof_json_site(FILE *f, const prof_event *e) {
    fputs(",\"site\":", f);
    if (!e->site_file) {
        fputs("null", f);
    } else {
        char site[512];
        snprintf(site, sizeof site, "%s:%d", e->site_file, e->site_line);
        prof_json_str(f, site);
    }
    fputs(",\"module\":", f);
    if (e->module < 0) {
        fputs("null", f);
    } else {
        prof_json_str(f, prof_module_path(e->module));
        fputs(",\"module_kind\":", f);
        prof_json_str(f, prof_module_kind(e->module));
    }
}

mft_status mft_profile_write_chrome_trace(FILE *f) {
    if (!f) {
        mft__null_arg("mft_profile_write_chrome_trace", "f");
        return MFT_ERR_NULL;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    fputs("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
          "\"args\":{\"name\":\"mft caller thread\"}}",
          f);
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        double ts = (double)(e->t0 - tl_origin) * 1e-3; /* microseconds */
        fputs(",\n{\"name\":", f);
        if (e->kind == PROF_KERNEL) {
            prof_json_str(f, e->op);
            fprintf(f,
                    ",\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,"
                    "\"tid\":1,\"args\":{\"kernel\":",
                    ts, (double)(e->t1 - e->t0) * 1e-3);
            prof_json_str(f, e->kernel);
            fputs(",\"in\":", f);
            prof_json_str(f, e->in);
            fputs(",\"out\":", f);
            prof_json_str(f, e->out);
            fputs(",\"asked\":", f);
            prof_json_str(f, e->asked == MFT_FORMAT_COUNT ? "-" : mft_format_name(e->asked));
            fputs(",\"kernel_format\":", f);
            prof_json_str(f, e->kfmt == MFT_FORMAT_COUNT ? "-" : mft_format_name(e->kfmt));
            fputs(",\"dtype\":", f);
            prof_json_str(f, mft_dtype_name(e->dtype));
            fprintf(f, ",\"bytes\":%lld,\"conversions\":%d,\"user\":%s", (long long)e->bytes,
                    e->conversions, e->user ? "true" : "false");
            if (e->pair >= 0) { /* this copy made a conversion */
                fputs(",\"conversion\":", f);
                prof_json_str(f, mft_conversion_cause_name(tl_ev[e->pair].cause));
            }
        } else {
            char name[96];
            snprintf(name, sizeof name, "conversion (%s)", mft_conversion_cause_name(e->cause));
            prof_json_str(f, name);
            fprintf(f,
                    ",\"cat\":\"conversion\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":1,"
                    "\"tid\":1,\"args\":{\"cause\":",
                    ts);
            prof_json_str(f, mft_conversion_cause_name(e->cause));
            fprintf(f, ",\"hidden\":%s,\"op\":",
                    mft_conversion_cause_hidden(e->cause) ? "true" : "false");
            prof_json_str(f, e->op);
            fputs(",\"from\":", f);
            prof_json_str(f, e->in);
            fputs(",\"to\":", f);
            prof_json_str(f, e->out);
            fprintf(f, ",\"bytes\":%lld,\"copy_us\":%.3f", (long long)e->bytes,
                    (double)(e->t1 - e->t0) * 1e-3);
        }
        prof_json_site(f, e);
        fputs("}}", f);
    }
    fputs("\n]}\n", f);
    if (ferror(f) || fflush(f) != 0) {
        mft__set_error(MFT_ERR_IO, "mft_profile_write_chrome_trace: write failed");
        return MFT_ERR_IO;
    }
    return MFT_OK;
}
