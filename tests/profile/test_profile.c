/* tests/profile/test_profile.c — the profiler (mft/profile.h): what it records, the
 * Chrome trace (parsed here by a strict JSON reader: the file must be valid
 * JSON with one complete "X" event per kernel run and one instant event per
 * conversion), the table, MFT_VERBOSE lines through the log callback, and
 * misuse. Expected event counts come from the ops the test runs (a count the
 * dispatcher keeps independently, mft_dispatch_info.seq, and the known
 * number of elementwise ops and copies), never from the profiler itself. */
#include <ctype.h>
#include "harness.h"
#include "profile_util.h"

/* ---------------------------------------------------------------- JSON */
/* A strict reader for the subset of JSON any valid document uses (objects,
 * arrays, strings with escapes, numbers, true/false/null). While reading the
 * top-level "traceEvents" array it notes, per event object, its "ph",
 * "cat", "name" and the string fields of "args" that the tests look at. */
typedef struct jev {
    char ph[4], cat[16], name[64], asked[32], kernel[64], cause[16], site[128], in[16], out[16];
    double ts, dur;
    bool has_dur;
} jev;

typedef struct jr {
    const char *p;
    bool ok;
    jev *ev;
    int nev, cap;
} jr;

static void j_ws(jr *r) {
    while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r') r->p++;
}

/* Reads a string into out (decoded; \uXXXX below 0x80 only). */
static bool j_str(jr *r, char *out, size_t n) {
    size_t k = 0;
    if (*r->p != '"') return r->ok = false;
    r->p++;
    while (*r->p && *r->p != '"') {
        char c = *r->p++;
        if ((unsigned char)c < 0x20) return r->ok = false;
        if (c == '\\') {
            char e = *r->p++;
            switch (e) {
            case '"':
            case '\\':
            case '/': c = e; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    if (!isxdigit((unsigned char)r->p[i])) return r->ok = false;
                    v = v * 16 + (unsigned)(isdigit((unsigned char)r->p[i])
                                                ? r->p[i] - '0'
                                                : (r->p[i] | 32) - 'a' + 10);
                }
                r->p += 4;
                c = v < 0x80 ? (char)v : '?';
                break;
            }
            default: return r->ok = false;
            }
        }
        if (out && k + 1 < n) out[k++] = c;
    }
    if (*r->p != '"') return r->ok = false;
    r->p++;
    if (out && n) out[k] = 0;
    return true;
}

static bool j_num(jr *r, double *v) {
    const char *s = r->p;
    if (*s == '-') s++;
    if (!isdigit((unsigned char)*s)) return r->ok = false;
    if (*s == '0' && isdigit((unsigned char)s[1])) return r->ok = false; /* no leading zeros */
    char *end;
    double d = strtod(r->p, &end);
    if (end == r->p) return r->ok = false;
    r->p = end;
    if (v) *v = d;
    return true;
}

static bool j_value(jr *r, int depth, const char *key, jev *e);

/* An object; when e is not NULL, fields of interest go into e. */
static bool j_object(jr *r, int depth, jev *e, bool is_args) {
    r->p++; /* '{' */
    j_ws(r);
    if (*r->p == '}') {
        r->p++;
        return true;
    }
    for (;;) {
        char k[64];
        j_ws(r);
        if (!j_str(r, k, sizeof k)) return false;
        j_ws(r);
        if (*r->p++ != ':') return r->ok = false;
        j_ws(r);
        char field[128] = {0};
        char *dst = NULL;
        size_t dn = 0;
        if (e && !is_args) {
            if (!strcmp(k, "ph")) dst = e->ph, dn = sizeof e->ph;
            if (!strcmp(k, "cat")) dst = e->cat, dn = sizeof e->cat;
            if (!strcmp(k, "name")) dst = e->name, dn = sizeof e->name;
        } else if (e) {
            if (!strcmp(k, "asked")) dst = e->asked, dn = sizeof e->asked;
            if (!strcmp(k, "kernel")) dst = e->kernel, dn = sizeof e->kernel;
            if (!strcmp(k, "cause")) dst = e->cause, dn = sizeof e->cause;
            if (!strcmp(k, "site")) dst = e->site, dn = sizeof e->site;
            if (!strcmp(k, "in") || !strcmp(k, "from")) dst = e->in, dn = sizeof e->in;
            if (!strcmp(k, "out") || !strcmp(k, "to")) dst = e->out, dn = sizeof e->out;
        }
        if (dst && *r->p == '"') {
            if (!j_str(r, field, sizeof field)) return false;
            snprintf(dst, dn, "%s", field);
        } else if (e && !is_args && (!strcmp(k, "ts") || !strcmp(k, "dur"))) {
            double v;
            if (!j_num(r, &v)) return false;
            if (k[0] == 't') {
                e->ts = v;
            } else {
                e->dur = v;
                e->has_dur = true;
            }
        } else if (e && !is_args && !strcmp(k, "args") && *r->p == '{') {
            if (!j_object(r, depth + 1, e, true)) return false;
        } else if (!j_value(r, depth + 1, k, NULL)) {
            return false;
        }
        j_ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == '}') {
            r->p++;
            return true;
        }
        return r->ok = false;
    }
}

static bool j_array(jr *r, int depth, bool events) {
    r->p++; /* '[' */
    j_ws(r);
    if (*r->p == ']') {
        r->p++;
        return true;
    }
    for (;;) {
        j_ws(r);
        if (events && *r->p == '{') {
            if (r->nev == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 64;
                jev *n = realloc(r->ev, (size_t)r->cap * sizeof *n);
                if (!n) return r->ok = false;
                r->ev = n;
            }
            jev *e = &r->ev[r->nev++];
            memset(e, 0, sizeof *e);
            if (!j_object(r, depth + 1, e, false)) return false;
        } else if (!j_value(r, depth + 1, NULL, NULL)) {
            return false;
        }
        j_ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == ']') {
            r->p++;
            return true;
        }
        return r->ok = false;
    }
}

static bool j_value(jr *r, int depth, const char *key, jev *e) {
    if (depth > 32) return r->ok = false;
    j_ws(r);
    switch (*r->p) {
    case '{': return j_object(r, depth, e, false);
    case '[': return j_array(r, depth, depth == 1 && key && !strcmp(key, "traceEvents"));
    case '"': return j_str(r, NULL, 0);
    case 't':
        if (!strncmp(r->p, "true", 4)) {
            r->p += 4;
            return true;
        }
        return r->ok = false;
    case 'f':
        if (!strncmp(r->p, "false", 5)) {
            r->p += 5;
            return true;
        }
        return r->ok = false;
    case 'n':
        if (!strncmp(r->p, "null", 4)) {
            r->p += 4;
            return true;
        }
        return r->ok = false;
    default: return j_num(r, NULL);
    }
}

/* Parses a whole document; false unless it is one valid JSON value. */
static bool j_parse(const char *text, jr *r) {
    memset(r, 0, sizeof *r);
    r->p = text;
    r->ok = true;
    if (!j_value(r, 0, NULL, NULL)) return false;
    j_ws(r);
    return r->ok && *r->p == 0;
}

static void test_json_reader_rejects(void) {
    /* the reader itself: the trace tests mean nothing if it accepts junk */
    static const char *const bad[] = {"{\"a\":1,}", "[1 2]",       "{\"a\" 1}",
                                      "\"x",        "01",          "{\"a\":\"\x01\"}",
                                      "[1]]",       "{\"a\":tru}", "{\"a\":\"\\q\"}"};
    static const char *const good[] = {"{}", "[]",
                                       "{\"a\":[1,-2.5e3,true,false,null,\"\\u0041\"]}"};
    jr r;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(!j_parse(bad[i], &r), "accepted %s\n", bad[i]);
        free(r.ev);
    }
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        CHECK_MSG(j_parse(good[i], &r), "rejected %s\n", good[i]);
        free(r.ev);
    }
}

/* ---------------------------------------------------------------- helpers */


/* A few ops of known kinds: 3 dispatches (conv2d, max_pool2d, conv2d),
 * 2 elementwise ops (relu, add), 1 explicit conversion (to_format, a copy
 * kernel run), all on an NCHW input converted to NHWC first. */
static int64_t run_ops(const char *site_file) {
    const int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {4, 3, 3, 3}, w2s[4] = {4, 4, 1, 1};
    const int64_t one[2] = {1, 1}, k2[2] = {2, 2};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 2);
    mft_tensor *w2 = mft_rand(4, w2s, MFT_F32, MFT_CHANNELS_LAST, 3);
    int64_t seq0 = mft_dispatch_last()->seq;
    mft_profile_site(site_file, 42);
    mft_tensor *xc = mft_to_format(x, MFT_CHANNELS_LAST);
    mft_profile_site(site_file, 43);
    mft_tensor *y = mft_conv2d(xc, w, NULL, one, one, one, 1);
    mft_tensor *r = mft_relu(y);
    mft_tensor *p = mft_max_pool2d(r, k2, k2, NULL, NULL, false);
    mft_tensor *q = mft_conv2d(p, w2, NULL, one, NULL, one, 1);
    mft_tensor *s = mft_add(q, p);
    mft_profile_site(NULL, 0);
    CHECK(s && mft_tensor_format(s) == MFT_CHANNELS_LAST);
    int64_t dispatches = mft_dispatch_last()->seq - seq0;
    mft_scope_end();
    return dispatches;
}

static int count_ph(const jr *r, const char *ph, const char *cat) {
    int n = 0;
    for (int i = 0; i < r->nev; i++)
        if (!strcmp(r->ev[i].ph, ph) && (!cat || !strcmp(r->ev[i].cat, cat))) n++;
    return n;
}

/* ---------------------------------------------------------------- tests */
static void test_trace_one_event_per_kernel_run(void) {
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    CHECK(mft_profile_active());
    int64_t dispatches = run_ops("tests/we\"ird\\name.c");
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    CHECK(!mft_profile_active());
    CHECK_EQ_I(dispatches, 3);
    char *text = trace_text();
    jr r;
    CHECK(text && j_parse(text, &r));
    if (!text || !r.ok) {
        free(text);
        return;
    }
    /* 1 metadata event, 3 dispatch + 2 elementwise + 1 copy X events, 1 instant */
    CHECK_EQ_I(count_ph(&r, "M", NULL), 1);
    CHECK_EQ_I(count_ph(&r, "X", "kernel"), 3 + 2 + 1);
    CHECK_EQ_I(count_ph(&r, "i", "conversion"), 1);
    CHECK_EQ_I(r.nev, 1 + 6 + 1);
    CHECK_EQ_I(mft_profile_event_count(), 7);
    int dispatched = 0, convs = 0, relu = 0, add = 0, copy = 0;
    for (int i = 0; i < r.nev; i++) {
        const jev *e = &r.ev[i];
        if (!strcmp(e->ph, "X")) {
            CHECK(e->has_dur && e->dur >= 0 && e->ts >= 0);
            if (strcmp(e->asked, "-") != 0) {
                dispatched++;
                CHECK_MSG(!strcmp(e->asked, "CHANNELS_LAST") && !strcmp(e->out, "NHWC") &&
                              strstr(e->kernel, ".nhwc."),
                          "dispatch %s: asked %s out %s kernel %s\n", e->name, e->asked, e->out,
                          e->kernel);
                CHECK(!strcmp(e->site, "tests/we\"ird\\name.c:43"));
            }
            relu += !strcmp(e->name, "relu");
            add += !strcmp(e->name, "add");
            copy += !strcmp(e->name, "copy") && !strcmp(e->in, "NCHW") && !strcmp(e->out, "NHWC");
        } else if (!strcmp(e->ph, "i")) {
            convs++;
            CHECK(!strcmp(e->cause, "explicit") && !strcmp(e->in, "NCHW") &&
                  !strcmp(e->out, "NHWC"));
            CHECK(!strcmp(e->site, "tests/we\"ird\\name.c:42"));
        }
    }
    CHECK_EQ_I(dispatched, 3);
    CHECK_EQ_I(convs, 1);
    CHECK(relu == 1 && add == 1 && copy == 1);
    free(r.ev);
    free(text);

    /* the table: one conv2d row with 2 calls (same kernel, formats), the
     * conversion section with the explicit copy */
    char *t = table_text();
    if (t) {
        const char *row = strstr(t, "\nconv2d ");
        CHECK_MSG(row && strstr(row, "NHWC -> NHWC") && strstr(row, "     2 "), "%s", t);
        CHECK_MSG(strstr(t, "conversions: 1  explicit 1") && strstr(t, "| hidden 0"), "%s", t);
        CHECK(strstr(t, "\nexplicit  no     to_format"));
    }
    free(t);
    mft_profile_clear();
    CHECK_EQ_I(mft_profile_event_count(), 0);
}

/* Not recording: nothing is added; begin clears an old recording. */
static void test_off_records_nothing(void) {
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    run_ops("a.c");
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    int64_t n = mft_profile_event_count();
    CHECK_EQ_I(n, 7);
    run_ops("a.c");
    CHECK_EQ_I(mft_profile_event_count(), n);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    CHECK_EQ_I(mft_profile_event_count(), 0);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    char *text = trace_text();
    jr r;
    CHECK(text && j_parse(text, &r) && r.nev == 1); /* the metadata event only */
    free(r.ev);
    free(text);
    mft_profile_clear();
}

static void test_misuse(void) {
    CHECK_EQ_I(mft_profile_end(), MFT_ERR_SCOPE);
    CHECK_ERR(MFT_ERR_SCOPE, "mft_profile_end: the profiler is not recording");
    CHECK_EQ_I(mft_profile_write_chrome_trace(NULL), MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_profile_write_chrome_trace");
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        CHECK_EQ_I(mft_profile_write_chrome_trace(full), MFT_ERR_IO);
        CHECK_ERR(MFT_ERR_IO, "write failed");
        fclose(full);
    }
    /* measuring the table with a NULL buffer */
    CHECK(mft_profile_table(NULL, 0) > 0);
    char small[8];
    size_t need = mft_profile_table(small, sizeof small);
    CHECK(need > sizeof small && strlen(small) == sizeof small - 1);
}

/* MFT_VERBOSE=1 in oneDNN's spirit: one line per kernel run (dispatch or
 * exec) and one per conversion, through the log callback. */
typedef struct vlog {
    int dispatch, exec, conversion;
    char first_dispatch[320];
} vlog;
static void vlog_cb(const char *line, void *ctx) {
    vlog *v = ctx;
    if (!strncmp(line, "mft_verbose,dispatch,", 21)) {
        if (!v->dispatch++) snprintf(v->first_dispatch, sizeof v->first_dispatch, "%s", line);
    }
    if (!strncmp(line, "mft_verbose,exec,", 17)) v->exec++;
    if (!strncmp(line,
                 "mft_verbose,conversion,explicit,to_format,NCHW->NHWC,bytes=1536,site=v.c:42", 75))
        v->conversion++;
}

static void test_verbose_lines(void) {
    vlog v = {0};
    mft_set_log_callback(vlog_cb, &v);
    mft_set_verbose(1);
    run_ops("v.c");
    mft_set_verbose(0);
    mft_set_log_callback(NULL, NULL);
    CHECK_EQ_I(v.dispatch, 3);
    CHECK_EQ_I(v.exec, 3); /* relu, add, the conversion's copy */
    CHECK_EQ_I(v.conversion, 1);
    CHECK_MSG(strstr(v.first_dispatch, "mft_verbose,dispatch,conv2d,conv2d.nhwc.") &&
                  strstr(v.first_dispatch, ",CHANNELS_LAST,CHANNELS_LAST,f32,NHWC->NHWC,") &&
                  strstr(v.first_dispatch, ",time_ms=") && strstr(v.first_dispatch, ",site=v.c:43"),
              "%s\n", v.first_dispatch);
    /* off again: no more lines */
    v = (vlog){0};
    mft_set_log_callback(vlog_cb, &v);
    run_ops("v.c");
    mft_set_log_callback(NULL, NULL);
    CHECK(v.dispatch == 0 && v.exec == 0 && v.conversion == 0);
}

/* The counters and the profiler agree on a backward pass too: per cause,
 * as many instant events as the counters saw (mixed formats: an NCHW x, a
 * channels-last weight, so the conv runs NHWC and x's copies are hidden). */
static void test_counts_match_trace(void) {
    const int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, one[2] = {1, 1};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 5);
    mft_tensor *w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 6);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(w, true);
    mft_conversion_counts_reset();
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_tape_begin();
    mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *l = mft_sum(y, 0, NULL, false);
    CHECK(l && mft_backward(l, NULL) == MFT_OK);
    mft_tape_end();
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    mft_conversion_counts c = mft_conversion_counts_get();
    CHECK_EQ_I(c.total, 3); /* x packed NHWC for the forward and for grad_w, grad_x back to NCHW */
    char *text = trace_text();
    jr r;
    CHECK(text && j_parse(text, &r));
    int by[MFT_CAUSE_COUNT] = {0};
    for (int i = 0; text && i < r.nev; i++)
        for (int k = 0; k < MFT_CAUSE_COUNT; k++)
            if (!strcmp(r.ev[i].ph, "i") &&
                !strcmp(r.ev[i].cause, mft_conversion_cause_name((mft_conversion_cause)k)))
                by[k]++;
    for (int k = 0; k < MFT_CAUSE_COUNT; k++) CHECK_EQ_I(by[k], c.count[k]);
    free(r.ev);
    free(text);
    mft_profile_clear();
    mft_scope_end();
}

int main(void) {
    RUN(test_json_reader_rejects);
    RUN(test_trace_one_event_per_kernel_run);
    RUN(test_off_records_nothing);
    RUN(test_misuse);
    RUN(test_verbose_lines);
    RUN(test_counts_match_trace);
    TEST_MAIN_END();
}
