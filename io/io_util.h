/* io/io_util.h — what the io layer's file formats share (io/checkpoint.c, io/npy.c,
 * io/safetensors_*.c): the argument checks of a list of named tensors, the
 * "<path>.tmp" a save writes before renaming it, and byte order. Private to
 * the io layer. */
#ifndef MFT_IO_UTIL_H
#define MFT_IO_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "internal.h"

/* path non-NULL, n >= 0, names and tensors non-NULL when n > 0, no NULL
 * entry (a NULL tensor keeps an earlier error: NULL propagation). Sets the
 * error naming fn. */
mft_status mft__io_check_list(const char *fn, const char *path, int n, const char *const *names,
                              const mft_tensor *const *tensors);
/* names[0..n) are distinct, else MFT_ERR_INVALID "fn: name 'x' is <what>"
 * ("given twice", "requested twice"). MFT_ERR_NOMEM naming fn. */
mft_status mft__io_check_distinct(const char *fn, int n, const char *const *names,
                                  const char *what);
/* Creates "<path>.tmp" for writing, after refusing (MFT_ERR_IO) a path or
 * .tmp that exists and is not a regular file (a rename would replace it).
 * On success *tmp is the allocated name (mft__free it); NULL with the error
 * naming fn otherwise. */
FILE *mft__io_create_tmp(const char *fn, const char *path, char **tmp);
/* Finishes a save through "<path>.tmp" (f from mft__io_create_tmp): when
 * st is MFT_OK and the writes went through (written; else err is their
 * errno), flushes, fsyncs, closes and renames tmp to path; otherwise, or when
 * any of that fails (MFT_ERR_IO naming fn, the file and the errno text),
 * closes f and removes tmp. Frees tmp. Returns the call's status: st, or
 * MFT_ERR_IO. */
mft_status mft__io_finish_tmp(const char *fn, FILE *f, char *tmp, const char *path, mft_status st,
                              bool written, int err);
/* Sets the error st as "fn: 'path': <printf message>"; returns st. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
mft_status mft__io_fail(mft_status st, const char *fn, const char *path, const char *fmt, ...);
/* True on a little-endian host. */
bool mft__io_host_le(void);
/* Byte-swaps numel elements of es bytes in place (big-endian hosts). */
void mft__io_swap(void *p, int64_t numel, size_t es);

#endif
