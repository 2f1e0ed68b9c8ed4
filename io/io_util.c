/* io/io_util.c — the helpers of io/io_util.h shared by the checkpoint, .npy and
 * safetensors formats: list argument checks, the "<path>.tmp" of a save,
 * byte order. */
#define _POSIX_C_SOURCE 200809L /* stat, fileno, fsync */
#include "io_util.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mft_status mft__io_check_list(const char *fn, const char *path, int n, const char *const *names,
                              const mft_tensor *const *tensors) {
    if (!path) {
        mft__null_arg(fn, "path");
        return MFT_ERR_NULL;
    }
    if (n < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: n %d is negative", fn, n);
        return MFT_ERR_INVALID;
    }
    if (n > 0 && (!names || !tensors)) {
        mft__null_arg(fn, !names ? "names" : "tensors");
        return MFT_ERR_NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!names[i]) {
            mft__set_error(MFT_ERR_NULL, "%s: names[%d] is NULL", fn, i);
            return MFT_ERR_NULL;
        }
        if (!tensors[i]) {
            char what[32];
            snprintf(what, sizeof what, "tensors[%d]", i);
            mft__null_arg(fn, what); /* keeps an earlier error (NULL propagation) */
            return MFT_ERR_NULL;     /* the call's own status */
        }
    }
    return MFT_OK;
}

static int io_cstr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

mft_status mft__io_check_distinct(const char *fn, int n, const char *const *names,
                                  const char *what) {
    if (n < 2) return MFT_OK;
    const char **v = mft__alloc_or_err(fn, sizeof *v * (size_t)n, 16);
    if (!v) return MFT_ERR_NOMEM;
    memcpy(v, names, sizeof *v * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, io_cstr_cmp);
    mft_status st = MFT_OK;
    for (int i = 1; i < n && st == MFT_OK; i++)
        if (strcmp(v[i - 1], v[i]) == 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: name '%.200s' is %s", fn, v[i], what);
            st = MFT_ERR_INVALID;
        }
    mft__free((void *)v);
    return st;
}

FILE *mft__io_create_tmp(const char *fn, const char *path, char **tmp_out) {
    size_t plen = strlen(path);
    char *tmp = mft__alloc_or_err(fn, plen + 5, 1);
    *tmp_out = NULL;
    if (!tmp) return NULL;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    /* the rename replaces what path names: only ever a regular file (a
     * device node, FIFO or directory there is the caller's mistake, not
     * something to swap out); "<path>.tmp" likewise, which fopen would follow */
    const char *const check[2] = {path, tmp};
    for (int k = 0; k < 2; k++) {
        struct stat sb;
        if (stat(check[k], &sb) == 0 && !S_ISREG(sb.st_mode)) {
            mft__set_error(MFT_ERR_IO, "%s: '%s' exists and is not a regular file; not replaced",
                           fn, check[k]);
            mft__free(tmp);
            return NULL;
        }
    }
    errno = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot create '%s': %s", fn, tmp, strerror(e));
        mft__free(tmp);
        return NULL;
    }
    *tmp_out = tmp;
    return f;
}

mft_status mft__io_finish_tmp(const char *fn, FILE *f, char *tmp, const char *path, mft_status st,
                              bool written, int err) {
    if (st == MFT_OK && written && fflush(f) != 0) written = false, err = errno;
    if (st == MFT_OK && written && fsync(fileno(f)) != 0) written = false, err = errno;
    if (fclose(f) != 0 && st == MFT_OK && written) written = false, err = errno;
    if (st == MFT_OK && !written) {
        mft__set_error(MFT_ERR_IO, "%s: writing '%s' failed: %s", fn, tmp, strerror(err));
        st = MFT_ERR_IO;
    }
    if (st == MFT_OK && rename(tmp, path) != 0) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot rename '%s' to '%s': %s", fn, tmp, path,
                       strerror(e));
        st = MFT_ERR_IO;
    }
    if (st != MFT_OK) remove(tmp);
    mft__free(tmp);
    return st;
}

mft_status mft__io_fail(mft_status st, const char *fn, const char *path, const char *fmt, ...) {
    char msg[MFT__ERRBUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mft__set_error(st, "%s: '%s': %s", fn, path, msg);
    return st;
}

bool mft__io_host_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void mft__io_swap(void *p, int64_t numel, size_t es) {
    unsigned char *c = p;
    if (es == 1) return;
    for (int64_t i = 0; i < numel; i++, c += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = c[a];
            c[a] = c[b];
            c[b] = t;
        }
}
