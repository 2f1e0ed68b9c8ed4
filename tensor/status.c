/* tensor/status.c — status strings and the thread-local last error.
 * Failing calls set (status, message); successful calls leave it alone. */
#include <stdio.h>
#include <string.h>
#include "internal.h"

static _Thread_local mft_status tl_status = MFT_OK;
static _Thread_local char tl_message[MFT__ERRBUF];

const char *mft_status_str(mft_status s) {
    switch (s) {
#define MFT_STATUS_CASE_(name, desc) \
    case name:                       \
        return desc;
        MFT_STATUS_LIST(MFT_STATUS_CASE_)
#undef MFT_STATUS_CASE_
    default:
        return "unknown status";
    }
}

mft_status mft_last_error(void) { return tl_status; }
const char *mft_last_error_message(void) { return tl_message; }

void mft_clear_error(void) {
    tl_status = MFT_OK;
    tl_message[0] = '\0';
}

void mft__set_error(mft_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_message, sizeof tl_message, fmt, ap);
    va_end(ap);
    tl_status = s;
}

mft_status mft__relabel_error(const char *fn) {
    const char *colon = strstr(tl_message, ": ");
    if (colon && strncmp(tl_message, fn, strlen(fn)) != 0) {
        char out[MFT__ERRBUF];
        size_t n = strlen(fn);
        if (n + 2 < sizeof out) {
            memcpy(out, fn, n);
            memcpy(out + n, ": ", 2);
            size_t room = sizeof out - n - 3, rest = strlen(colon + 2);
            if (rest > room) rest = room;
            memcpy(out + n + 2, colon + 2, rest);
            out[n + 2 + rest] = '\0';
            memcpy(tl_message, out, n + 3 + rest);
        }
    }
    return tl_status;
}

void mft__null_arg(const char *fn, const char *what) {
    if (tl_status != MFT_OK) return; /* NULL propagation keeps the first error */
    mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, what);
}

static char *fmt_list(char *buf, size_t len, int n, const int64_t *v64, const int *v32) {
    size_t pos = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    pos += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && pos < len; i++) {
        long long x = v64 ? (long long)v64[i] : (long long)v32[i];
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ",%lld" : "%lld", x);
    }
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

char *mft__fmt_dims(char *buf, size_t len, int n, const int64_t *v) {
    return fmt_list(buf, len, v ? n : 0, v, NULL);
}
char *mft__fmt_ints(char *buf, size_t len, int n, const int *v) {
    return fmt_list(buf, len, v ? n : 0, NULL, v);
}
