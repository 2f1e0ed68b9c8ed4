/* tests/profile/profile_util.h — what the profile tests share: the profiler's
 * table and Chrome trace as heap strings (free them), and a capture of the
 * MFT_VERBOSE log lines (v_start ... v_stop; the lines in g_lines[0 ..
 * g_nlines)). Include after harness.h. All static inline: a test that uses
 * only some of them compiles without unused-function warnings. */
#ifndef MFT_TEST_PROFILE_UTIL_H
#define MFT_TEST_PROFILE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *table_text(void) {
    size_t need = mft_profile_table(NULL, 0);
    char *t = malloc(need + 1);
    if (t) CHECK(mft_profile_table(t, need + 1) == need);
    return t;
}

static inline char *trace_text(void) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    CHECK_EQ_I(mft_profile_write_chrome_trace(f), MFT_OK);
    long n = ftell(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    rewind(f);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

#define VMAX 128
static char g_lines[VMAX][512];
static int g_nlines;
static inline void v_cb(const char *line, void *ctx) {
    (void)ctx;
    if (g_nlines < VMAX) snprintf(g_lines[g_nlines++], sizeof g_lines[0], "%s", line);
}
static inline void v_start(void) {
    g_nlines = 0;
    mft_set_log_callback(v_cb, NULL);
    mft_set_verbose(1);
}
static inline void v_stop(void) {
    mft_set_verbose(0);
    mft_set_log_callback(NULL, NULL);
}

#endif
