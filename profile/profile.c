/* profile/profile.c — the profiler (mft/profile.h): a per-thread buffer of
 * kernel events (dispatched ops, elementwise, reductions, optimizer,
 * copies) and conversion events filled through the hooks in tensor/events.c, and its two
 * outputs: a key_averages-style table with format, kernel and conversion
 * columns, and Chrome trace JSON. Nothing here runs unless the calling
 * thread is recording (mft__tl_profiling). */
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
    uint64_t t0, t1; /* ns; conversions: t0 = t1 = when noted */
    int64_t bytes;
    const char *site_file;
    int site_line;
} prof_event;

static _Thread_local prof_event *tl_ev = NULL;
static _Thread_local int64_t tl_nev = 0, tl_cap = 0;
static _Thread_local uint64_t tl_origin = 0; /* mft_profile_begin time */

bool mft_profile_active(void) { return mft__tl_profiling; }
int64_t mft_profile_event_count(void) { return tl_nev; }

void mft_profile_clear(void) {
    free(tl_ev);
    tl_ev = NULL;
    tl_nev = tl_cap = 0;
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
                      line};
}

static void profile_conversion(const mft__conv_rec *r) {
    prof_event *e = prof_push();
    if (!e) return;
    uint64_t now = mft__now_ns();
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
                      now,
                      now,
                      r->bytes,
                      r->site_file,
                      r->site_line};
}

/* ------------------------------------------------------------------ table */
typedef struct prof_row {
    const char *op, *kernel, *in, *out;
    mft_conversion_cause cause; /* conversion rows */
    const char *site_file;
    int site_line;
    int64_t calls, conversions, bytes;
    uint64_t ns;
} prof_row;

static bool prof_same_kernel_row(const prof_row *r, const prof_event *e) {
    return strcmp(r->op, e->op) == 0 && strcmp(r->kernel, e->kernel) == 0 &&
           strcmp(r->in, e->in) == 0 && strcmp(r->out, e->out) == 0;
}

static bool prof_same_conv_row(const prof_row *r, const prof_event *e) {
    bool same_site = (r->site_file == NULL) == (e->site_file == NULL) &&
                     (!r->site_file ||
                      (strcmp(r->site_file, e->site_file) == 0 && r->site_line == e->site_line));
    return r->cause == e->cause && strcmp(r->op, e->op) == 0 && strcmp(r->in, e->in) == 0 &&
           strcmp(r->out, e->out) == 0 && same_site;
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

typedef struct prof_out {
    char *buf;
    size_t len, pos;
} prof_out;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
prof_printf(prof_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->buf && o->pos < o->len ? o->buf + o->pos : NULL;
    size_t room = o->buf && o->pos < o->len ? o->len - o->pos : 0;
    int n = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->pos += (size_t)n;
}

static void prof_rule(prof_out *o, int width) {
    for (int i = 0; i < width; i++) prof_printf(o, "-");
    prof_printf(o, "\n");
}

size_t mft_profile_table(char *buf, size_t len) {
    prof_out o = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    prof_row *rows = tl_nev ? malloc((size_t)tl_nev * sizeof *rows) : NULL;
    if (tl_nev && !rows) {
        prof_printf(&o, "(mft_profile_table: out of memory for %lld events)\n", (long long)tl_nev);
        return o.pos;
    }
    /* kernel rows: one per (op, kernel, in -> out) */
    int64_t nk = 0;
    uint64_t total_ns = 0;
    int64_t nconv = 0;
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        if (e->kind != PROF_KERNEL) {
            nconv++;
            continue;
        }
        int64_t r = 0;
        while (r < nk && !prof_same_kernel_row(&rows[r], e)) r++;
        if (r == nk)
            rows[nk++] =
                (prof_row){e->op, e->kernel, e->in, e->out, MFT_CAUSE_COUNT, NULL, 0, 0, 0, 0, 0};
        rows[r].calls++;
        rows[r].conversions += e->conversions;
        rows[r].bytes += e->bytes;
        rows[r].ns += e->t1 - e->t0;
        total_ns += e->t1 - e->t0;
    }
    if (nk > 1) qsort(rows, (size_t)nk, sizeof *rows, prof_by_time);
    const int width = 156;
    prof_printf(&o, "%-22s %-52s %-24s %6s %10s %10s %6s %10s %5s\n", "op", "kernel",
                "format in -> out", "calls", "total ms", "mean us", "%", "MB moved", "conv");
    prof_rule(&o, width);
    for (int64_t r = 0; r < nk; r++) {
        char fmt[48];
        snprintf(fmt, sizeof fmt, "%s -> %s", rows[r].in, rows[r].out);
        prof_printf(&o, "%-22.22s %-52.52s %-24.24s %6lld %10.3f %10.2f %6.1f %10.2f %5lld\n",
                    rows[r].op, rows[r].kernel, fmt, (long long)rows[r].calls,
                    (double)rows[r].ns * 1e-6, (double)rows[r].ns * 1e-3 / (double)rows[r].calls,
                    total_ns ? 100.0 * (double)rows[r].ns / (double)total_ns : 0.0,
                    (double)rows[r].bytes * 1e-6, (long long)rows[r].conversions);
    }
    prof_rule(&o, width);
    prof_printf(&o, "%lld kernel runs, %.3f ms in kernels (nested copies counted in both)\n",
                (long long)(tl_nev - nconv), (double)total_ns * 1e-6);

    /* conversion rows: one per (cause, op, from -> to, site) */
    int64_t nc = 0;
    int64_t by_cause[MFT_CAUSE_COUNT] = {0}, bytes_cause[MFT_CAUSE_COUNT] = {0};
    for (int64_t i = 0; i < tl_nev; i++) {
        const prof_event *e = &tl_ev[i];
        if (e->kind != PROF_CONVERSION) continue;
        by_cause[e->cause]++;
        bytes_cause[e->cause] += e->bytes;
        int64_t r = 0;
        while (r < nc && !prof_same_conv_row(&rows[r], e)) r++;
        if (r == nc)
            rows[nc++] = (prof_row){e->op,        "", e->in, e->out, e->cause, e->site_file,
                                    e->site_line, 0,  0,     0,      0};
        rows[r].calls++;
        rows[r].bytes += e->bytes;
    }
    if (nc > 1) qsort(rows, (size_t)nc, sizeof *rows, prof_by_count);
    prof_printf(&o, "\nconversions: %lld", (long long)nconv);
    int64_t hidden = 0;
    for (int c = 0; c < MFT_CAUSE_COUNT; c++) {
        if (mft_conversion_cause_hidden((mft_conversion_cause)c)) hidden += by_cause[c];
        if (by_cause[c])
            prof_printf(&o, "  %s %lld (%.2f MB)",
                        mft_conversion_cause_name((mft_conversion_cause)c), (long long)by_cause[c],
                        (double)bytes_cause[c] * 1e-6);
    }
    prof_printf(&o, "  | hidden %lld\n", (long long)hidden);
    if (nc) {
        prof_printf(&o, "%-9s %-6s %-22s %-24s %7s %10s  %s\n", "cause", "hidden", "op",
                    "layout from -> to", "count", "MB", "call site");
        prof_rule(&o, width);
        for (int64_t r = 0; r < nc; r++) {
            char fmt[48], site[160] = "-";
            snprintf(fmt, sizeof fmt, "%s -> %s", rows[r].in, rows[r].out);
            if (rows[r].site_file)
                snprintf(site, sizeof site, "%s:%d", rows[r].site_file, rows[r].site_line);
            prof_printf(&o, "%-9s %-6s %-22.22s %-24.24s %7lld %10.3f  %s\n",
                        mft_conversion_cause_name(rows[r].cause),
                        mft_conversion_cause_hidden(rows[r].cause) ? "yes" : "no", rows[r].op, fmt,
                        (long long)rows[r].calls, (double)rows[r].bytes * 1e-6, site);
        }
    }
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
        return;
    }
    char site[512];
    snprintf(site, sizeof site, "%s:%d", e->site_file, e->site_line);
    prof_json_str(f, site);
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
            fprintf(f, ",\"bytes\":%lld", (long long)e->bytes);
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
