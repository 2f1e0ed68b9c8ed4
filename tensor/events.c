/* tensor/events.c — what every op reports whether or not anyone listens:
 * conversion counters with causes, the newest conversion with its call site,
 * module path and copy time (Note [Conversions and their causes] in
 * mft/profile.h), the call site and MFT_AT's stack of them, the rings of
 * recent conversion and kernel events, the kernel-event hook every kernel
 * run calls, the reorder budget, the MFT_VERBOSE log, and the sink through
 * which the profiler (profile/, a layer above) receives events while it
 * records. Counters, rings, sites and the budget are per thread: conversions
 * are started by the thread that called the op. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_MONOTONIC under -std=c11 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include "internal.h"
#include "mft/profile.h"

static const char *const cause_names[MFT_CAUSE_COUNT] = {"explicit", "reshape", "fallback",
                                                         "gradient", "operand"};

const char *mft_conversion_cause_name(mft_conversion_cause c) {
    return (unsigned)c < MFT_CAUSE_COUNT ? cause_names[c] : "?";
}

bool mft_conversion_cause_hidden(mft_conversion_cause c) {
    return c == MFT_CAUSE_FALLBACK || c == MFT_CAUSE_GRADIENT || c == MFT_CAUSE_OPERAND;
}

/* ---------------------------------------------------------------- profiler sink */
static _Atomic(const mft__profile_sink *) g_sink = NULL;
void mft__profile_set_sink(const mft__profile_sink *sink) { atomic_store(&g_sink, sink); }

#define EVENTS_CAUSE_DEPTH 8
static _Thread_local mft_conversion_counts tl_counts;
typedef struct events_cause {
    mft_conversion_cause cause;
    const char *op;
} events_cause;
static _Thread_local events_cause tl_cause[EVENTS_CAUSE_DEPTH];
static _Thread_local int tl_ncause = 0;
static _Thread_local const char *tl_site_file = NULL;
static _Thread_local int tl_site_line = 0;

/* Note [Conversion copy time]
 * A conversion is noted right after the copy that made it (mft__copy_kernel
 * into the new tensor, then mft__note_conversion with the same source and
 * copy), and the copy reports itself as a kernel event first. So the
 * conversion's wall time is the duration of the newest kernel event when
 * that event is a "copy" from src into dst: the kernel hook keeps the
 * newest event's operands and times (tl_copy), the conversion pairs with it
 * when both pointers match and no kernel event came in between, and then
 * clears it (a copy pays for one conversion). A copy that was not timed
 * (profiler and verbose log off) or did not run (no element) leaves the
 * conversion's time 0; so does a clock that is off when the conversion is
 * noted (an untimed copy reports no event, so the kept one may be older and
 * its tensors' addresses reused since). The profiler pairs its own copy
 * event the same way (profile/profile.c): with both, a copy inside an op
 * that is not a conversion (a cast, a repack into a result) stays an
 * "internal copy". */
typedef struct events_copy {
    const mft_tensor *dst, *src; /* NULL dst: the newest kernel event is no timed copy */
    uint64_t t0, t1;
    int64_t seq; /* its kernel sequence number */
} events_copy;
static _Thread_local events_copy tl_copy;

/* The newest conversion (mft_conversion_last); its module strings are
 * copies, the path can change before anyone reads them. */
static _Thread_local mft_conversion_info tl_last_conv;
static _Thread_local char tl_last_module[512], tl_last_kind[96];

const mft_conversion_info *mft_conversion_last(void) {
    if (!tl_last_conv.module) { /* before the first conversion */
        tl_last_conv.module = tl_last_conv.module_kind = "";
        tl_last_conv.op = tl_last_conv.from = tl_last_conv.to = "";
    }
    return &tl_last_conv;
}

mft_conversion_counts mft_conversion_counts_get(void) { return tl_counts; }
void mft_conversion_counts_reset(void) { memset(&tl_counts, 0, sizeof tl_counts); }

void mft__cause_push(mft_conversion_cause c, const char *op) {
    if (tl_ncause < EVENTS_CAUSE_DEPTH) tl_cause[tl_ncause] = (events_cause){c, op};
    tl_ncause++;
}
void mft__cause_pop(void) {
    if (tl_ncause > 0) tl_ncause--;
}

/* ---------------------------------------------------------------- layout labels
 * Labels are static strings (events and tape nodes keep the pointer). A
 * descriptor without a tag is labelled by its oneDNN letters ("OIhw16i16o",
 * "aBcd4b"), interned once into a table that lives as long as the process;
 * past LABELS_MAX distinct ones, or with no oneDNN name, "blocked". */
#define LABELS_MAX 64
#define LABEL_LEN 40
static char g_labels[LABELS_MAX][LABEL_LEN];
static int g_nlabels;
static atomic_flag g_labels_lock = ATOMIC_FLAG_INIT;

static const char *layout_label_intern(const mft_tensor *t) {
    char buf[LABEL_LEN];
    mft_layout l;
    mft__layout_of(t, &l);
    /* a layout without a oneDNN name sets an error: the caller's stays */
    const mft_status had = mft_last_error();
    char had_msg[MFT__ERRBUF];
    snprintf(had_msg, sizeof had_msg, "%s", mft_last_error_message());
    const int len = mft_layout_to_onednn(&l, buf, sizeof buf);
    if (len <= 0 || len >= LABEL_LEN) {
        if (had == MFT_OK)
            mft_clear_error();
        else
            mft__set_error(had, "%s", had_msg);
        return "blocked";
    }
    const char *r = "blocked";
    while (atomic_flag_test_and_set_explicit(&g_labels_lock, memory_order_acquire)) {
    }
    int i = 0;
    while (i < g_nlabels && strcmp(g_labels[i], buf)) i++;
    if (i < g_nlabels) {
        r = g_labels[i];
    } else if (g_nlabels < LABELS_MAX) {
        memcpy(g_labels[g_nlabels], buf, (size_t)len + 1);
        r = g_labels[g_nlabels++];
    }
    atomic_flag_clear_explicit(&g_labels_lock, memory_order_release);
    return r;
}

const char *mft__layout_label(const mft_tensor *t) {
    if (!t) return "-";
    if (t->nblocks) { /* oneDNN's names for the tags (docs/spec.md §7) */
        static const char *const c16[6] = {"", "", "", "nCw16c", "nChw16c", "nCdhw16c"};
        static const char *const c8[6] = {"", "", "", "nCw8c", "nChw8c", "nCdhw8c"};
        if (t->tag == MFT_NCHW16C) return c16[t->ndim];
        if (t->tag == MFT_NCHW8C) return c8[t->ndim];
        return layout_label_intern(t);
    }
    bool cf = mft_tensor_is_contiguous(t, MFT_CONTIGUOUS);
    if (t->ndim >= 3 && t->ndim <= 5) {
        static const char *const first[6] = {"", "", "", "NCL", "NCHW", "NCDHW"};
        static const char *const last[6] = {"", "", "", "NLC", "NHWC", "NDHWC"};
        bool cl = mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST);
        if (cf && cl) return t->tag == MFT_CHANNELS_LAST ? last[t->ndim] : first[t->ndim];
        if (cf) return first[t->ndim];
        if (cl) return last[t->ndim];
    } else if (cf) {
        return "contiguous";
    }
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->sizes[d] > 1) return "broadcast";
    return "strided";
}

/* ---------------------------------------------------------------- rings */
static _Thread_local mft__conv_rec tl_conv_ring[MFT__EVENT_RING];
static _Thread_local mft__kernel_rec tl_kernel_ring[MFT__EVENT_RING];
static _Thread_local int64_t tl_conv_seq = 0, tl_kernel_seq = 0;

int64_t mft__conv_seq(void) { return tl_conv_seq; }
int64_t mft__kernel_seq(void) { return tl_kernel_seq; }

bool mft__conv_get(int64_t seq, mft__conv_rec *r) {
    if (seq < 1 || seq > tl_conv_seq || seq <= tl_conv_seq - MFT__EVENT_RING) return false;
    *r = tl_conv_ring[seq % MFT__EVENT_RING];
    return true;
}
bool mft__kernel_get(int64_t seq, mft__kernel_rec *r) {
    if (seq < 1 || seq > tl_kernel_seq || seq <= tl_kernel_seq - MFT__EVENT_RING) return false;
    *r = tl_kernel_ring[seq % MFT__EVENT_RING];
    return true;
}

/* ---------------------------------------------------------------- reorder budget */
static _Thread_local bool tl_budget_open = false;
static _Thread_local int64_t tl_budget_max = 0, tl_budget_seen = 0;
static _Thread_local mft__conv_rec tl_budget_first; /* first conversion over the limit */
static _Thread_local char tl_budget_module[512];      /* its module path and kind */

mft_status mft_reorder_budget_begin(int64_t max) {
    static const char fn[] = "mft_reorder_budget_begin";
    if (max < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: max must be >= 0, got %lld", fn, (long long)max);
        return MFT_ERR_INVALID;
    }
    if (tl_budget_open) {
        mft__set_error(MFT_ERR_SCOPE,
                       "%s: a budget region (max %lld) is already open on this thread; regions "
                       "do not nest",
                       fn, (long long)tl_budget_max);
        return MFT_ERR_SCOPE;
    }
    tl_budget_open = true;
    tl_budget_max = max;
    tl_budget_seen = 0;
    return MFT_OK;
}

mft_status mft_reorder_budget_end(void) {
    static const char fn[] = "mft_reorder_budget_end";
    if (!tl_budget_open) {
        mft__set_error(MFT_ERR_SCOPE, "%s: no budget region is open on this thread", fn);
        return MFT_ERR_SCOPE;
    }
    tl_budget_open = false;
    if (tl_budget_seen <= tl_budget_max) return MFT_OK;
    const mft__conv_rec *r = &tl_budget_first;
    char site[160] = "no call site (wrap the call in MFT_AT)";
    if (r->site_file) snprintf(site, sizeof site, "at %s:%d", r->site_file, r->site_line);
    mft__set_error(MFT_ERR_BUDGET,
                   "%s: %lld hidden conversions, the budget allows %lld; the first over the "
                   "limit: %s conversion by %s (%s -> %s, %lld bytes) %s%s%s",
                   fn, (long long)tl_budget_seen, (long long)tl_budget_max,
                   mft_conversion_cause_name(r->cause), r->op ? r->op : "?", r->from, r->to,
                   (long long)r->bytes, site, tl_budget_module[0] ? " in module " : "",
                   tl_budget_module);
    return MFT_ERR_BUDGET;
}

/* ---------------------------------------------------------------- conversions */
/* "path" or "path (kind)" of the current module, "" outside modules. */
static void events_module_text(char *buf, size_t len) {
    const char *path = mft_module_path(), *kind = mft_module_kind();
    if (!path[0])
        buf[0] = '\0';
    else if (kind[0])
        snprintf(buf, len, "%s (%s)", path, kind);
    else
        snprintf(buf, len, "%s", path);
}

void mft__note_conversion_as(mft_conversion_cause c, const char *op, const mft_tensor *src,
                             const mft_tensor *dst) {
    if ((unsigned)c >= MFT_CAUSE_COUNT) c = MFT_CAUSE_EXPLICIT;
    int64_t bytes = dst ? dst->numel * (int64_t)mft_dtype_size(dst->dtype) : 0;
    tl_counts.count[c]++;
    tl_counts.bytes[c] += bytes;
    tl_counts.total++;
    bool hidden = mft_conversion_cause_hidden(c);
    if (hidden) tl_counts.hidden++;
    /* Note [Conversion copy time] */
    int64_t ns = 0;
    if (dst && tl_copy.dst == dst && tl_copy.src == src && tl_copy.seq == tl_kernel_seq &&
        (mft__tl_profiling || mft__verbose_on()))
        ns = tl_copy.t1 > tl_copy.t0 ? (int64_t)(tl_copy.t1 - tl_copy.t0) : 1; /* timed: >= 1 */
    tl_copy.dst = NULL;
    mft__conv_rec r = {
        c, op, mft__layout_label(src), mft__layout_label(dst), bytes, tl_site_file, tl_site_line};
    tl_conv_ring[++tl_conv_seq % MFT__EVENT_RING] = r;
    snprintf(tl_last_module, sizeof tl_last_module, "%s", mft_module_path());
    snprintf(tl_last_kind, sizeof tl_last_kind, "%s", mft_module_kind());
    tl_last_conv = (mft_conversion_info){.seq = tl_conv_seq,
                                         .cause = c,
                                         .op = op ? op : "?",
                                         .from = r.from,
                                         .to = r.to,
                                         .bytes = bytes,
                                         .ns = ns,
                                         .site_file = r.site_file,
                                         .site_line = r.site_line,
                                         .module = tl_last_module,
                                         .module_kind = tl_last_kind};
    if (hidden && tl_budget_open && ++tl_budget_seen == tl_budget_max + 1) {
        tl_budget_first = r;
        events_module_text(tl_budget_module, sizeof tl_budget_module);
    }
    const mft__profile_sink *sink = atomic_load(&g_sink);
    if (mft__tl_profiling && sink) sink->conversion(&r);
    if (mft__verbose_on()) {
        char line[1024];
        int n = snprintf(line, sizeof line, "mft_verbose,conversion,%s,%s,%s->%s,bytes=%lld%s",
                         mft_conversion_cause_name(c), op ? op : "?", r.from, r.to,
                         (long long)bytes, hidden ? ",hidden" : "");
        if (r.site_file && n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ",site=%s:%d", r.site_file,
                          r.site_line);
        if (tl_last_module[0] && n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ",module=%s", tl_last_module);
        if (ns > 0 && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, ",time_ms=%.4f", (double)ns * 1e-6);
        mft__verbose_line(line);
    }
}

/* ---------------------------------------------------------------- verbose log
 * MFT_VERBOSE (mft/dispatch.h): one line per kernel run and per conversion. */
atomic_int mft__g_verbose = -1; /* -1: read MFT_VERBOSE on first use (tensor/internal.h) */

/* The log callback and its context change together under g_log_mtx (logging
 * is the slow path: one line per dispatch when verbose). */
typedef struct log_sink {
    void (*cb)(const char *, void *);
    void *ctx;
} log_sink;
static log_sink g_log = {NULL, NULL};
static mtx_t g_log_mtx;
static once_flag g_log_once = ONCE_FLAG_INIT;
static void log_init(void) { mtx_init(&g_log_mtx, mtx_plain); }


void mft_set_verbose(int level) { atomic_store(&mft__g_verbose, level < 0 ? 0 : level); }
int mft_verbose(void) {
    int v = atomic_load(&mft__g_verbose);
    if (v < 0) { /* two threads reading the environment at once store the same value */
        const char *env = getenv("MFT_VERBOSE");
        int want = env ? atoi(env) : 0;
        if (want < 0) want = 0;
        atomic_compare_exchange_strong(&mft__g_verbose, &v, want);
        v = atomic_load(&mft__g_verbose);
    }
    return v;
}
void mft_set_log_callback(void (*cb)(const char *line, void *ctx), void *ctx) {
    call_once(&g_log_once, log_init);
    mtx_lock(&g_log_mtx);
    g_log = (log_sink){cb, ctx};
    mtx_unlock(&g_log_mtx);
}

void mft__verbose_line(const char *line) {
    call_once(&g_log_once, log_init);
    mtx_lock(&g_log_mtx);
    log_sink sink = g_log;
    mtx_unlock(&g_log_mtx);
    if (sink.cb)
        sink.cb(line, sink.ctx);
    else
        fprintf(stderr, "%s\n", line);
}

/* ---------------------------------------------------------------- kernels */
_Thread_local bool mft__tl_profiling = false;

uint64_t mft__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool mft__hooks_bypass = false;
_Thread_local bool mft__tl_tape_open = false;

void mft__kernel_end_slow(uint64_t t0, const mft__kernel_info *k) {
    const char *in = k->nin > 0 ? mft__layout_label(k->in[0]) : "-";
    const char *out = k->nout > 0 ? mft__layout_label(k->out[0]) : "-";
    tl_kernel_ring[++tl_kernel_seq % MFT__EVENT_RING] =
        (mft__kernel_rec){k->op, k->kernel, in, out};
    tl_copy.dst = NULL;
    if (!t0) return; /* neither profiling nor verbose when the kernel started */
    uint64_t t1 = mft__now_ns();
    if (k->nin > 0 && k->nout > 0 && k->op && strcmp(k->op, "copy") == 0)
        tl_copy = (events_copy){k->out[0], k->in[0], t0, t1, tl_kernel_seq};
    int64_t bytes = 0;
    for (int i = 0; i < k->nin; i++)
        if (k->in[i]) bytes += k->in[i]->numel * (int64_t)mft_dtype_size(k->in[i]->dtype);
    for (int i = 0; i < k->nout; i++)
        if (k->out[i]) bytes += k->out[i]->numel * (int64_t)mft_dtype_size(k->out[i]->dtype);
    const mft__profile_sink *sink = atomic_load(&g_sink);
    if (mft__tl_profiling && sink) sink->kernel(t0, t1, k, bytes);
    if (mft__verbose_on()) {
        char line[1024];
        int n =
            snprintf(line, sizeof line, "mft_verbose,%s,%s,%s,%s,%s,%s,%s->%s,conversions=%d,",
                     k->asked == MFT_FORMAT_COUNT ? "exec" : "dispatch", k->op, k->kernel,
                     k->asked == MFT_FORMAT_COUNT ? "-" : mft_format_name(k->asked),
                     k->kernel_format == MFT_FORMAT_COUNT ? "-" : mft_format_name(k->kernel_format),
                     mft_dtype_name(k->dtype), in, out, k->conversions);
        if (n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, "time_ms=%.4f,bytes=%lld%s",
                          (double)(t1 - t0) * 1e-6, (long long)bytes, k->user ? ",user" : "");
        if (tl_site_file && n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ",site=%s:%d", tl_site_file,
                          tl_site_line);
        const char *path = mft_module_path();
        if (path[0] && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, ",module=%s", path);
        mft__verbose_line(line);
    }
}

void mft__note_conversion(const char *op, const mft_tensor *src, const mft_tensor *dst) {
    int top = tl_ncause < EVENTS_CAUSE_DEPTH ? tl_ncause : EVENTS_CAUSE_DEPTH;
    if (top > 0)
        mft__note_conversion_as(tl_cause[top - 1].cause,
                                tl_cause[top - 1].op ? tl_cause[top - 1].op : op, src, dst);
    else
        mft__note_conversion_as(MFT_CAUSE_EXPLICIT, op, src, dst);
}

/* ---------------------------------------------------------------- call sites
 * mft_profile_site sets the site; MFT_AT and MFT_AT_BEGIN push (saving the
 * site they replace) and their end pops (mft/profile.h). */
#define EVENTS_SITE_DEPTH 32
static _Thread_local const char *tl_at_file[EVENTS_SITE_DEPTH];
static _Thread_local int tl_at_line[EVENTS_SITE_DEPTH];
static _Thread_local int tl_at_depth = 0;

void mft_profile_site(const char *file, int line) {
    tl_site_file = file;
    tl_site_line = file ? line : 0;
}

void mft__at_push(const char *file, int line) {
    if (tl_at_depth < EVENTS_SITE_DEPTH) {
        tl_at_file[tl_at_depth] = tl_site_file;
        tl_at_line[tl_at_depth] = tl_site_line;
    }
    tl_at_depth++;
    mft_profile_site(file, line);
}

void mft__at_pop(void) {
    if (tl_at_depth == 0) return; /* an END without its BEGIN */
    tl_at_depth--;
    if (tl_at_depth < EVENTS_SITE_DEPTH)
        mft_profile_site(tl_at_file[tl_at_depth], tl_at_line[tl_at_depth]);
}

void mft__site_get(const char **file, int *line) {
    *file = tl_site_file;
    *line = tl_site_line;
}
