/* ops/dispatch/kernel_index.c — the one list of every family's built-in
 * kernel table (Note [Kernel tables] in ops/dispatch/dispatch.c), above the
 * families; what registration and mft_dispatch_call_builtin ask of it (an
 * op's dtypes and formats, a built-in by name); and the listing built from
 * it and the user's kernels (mft_dispatch_list). Dispatching never reads
 * this list: each op passes its own family's tables. */
#include <stdio.h>
#include <string.h>
#include "dispatch_internal.h"

const mft__kernel_def *const mft__kernel_index[] = {
    mft__kernels_pool, mft__kernels_pool_more, mft__kernels_softmax,       mft__kernels_pad,
    mft__kernels_gemm, mft__kernels_norm,      mft__kernels_norm_backward, mft__kernels_conv_fast,
    mft__kernels_conv, mft__kernels_resize,    NULL};

/* ---------------------------------------------------------------- questions */
unsigned mft__builtin_dtypes(mft__op_id op) {
    unsigned mask = 0;
    for (size_t t = 0; mft__kernel_index[t]; t++)
        for (const mft__kernel_def *d = mft__kernel_index[t]; d->fn; d++)
            if (d->op == op) mask |= 1u << d->dtype;
    return mask;
}

unsigned mft__builtin_formats(mft__op_id op, mft_dtype dtype) {
    unsigned mask = 0;
    for (size_t t = 0; mft__kernel_index[t]; t++)
        for (const mft__kernel_def *d = mft__kernel_index[t]; d->fn; d++)
            if (d->op == op && d->dtype == dtype) mask |= 1u << d->fmt;
    return mask;
}

/* The index's order is each family's search order (fast tables before
 * reference tables), so the first match is the one the dispatcher runs. */
static const mft__kernel_def *index_first(mft__op_id op, mft_format fmt, mft_dtype dtype,
                                          const char *name) {
    for (size_t t = 0; mft__kernel_index[t]; t++)
        for (const mft__kernel_def *d = mft__kernel_index[t]; d->fn; d++)
            if (d->op == op && d->fmt == fmt && d->dtype == dtype &&
                (!name || !strcmp(d->name, name)))
                return d;
    return NULL;
}

const mft__kernel_def *mft__builtin_find(mft__op_id op, mft_format fmt, mft_dtype dtype,
                                         const char *name) {
    const mft__kernel_def *d = index_first(op, fmt, dtype, name);
    if (!d && !name && fmt != MFT_FORMAT_ANY) d = index_first(op, MFT_FORMAT_ANY, dtype, NULL);
    return d;
}

void mft__dtype_mask_text(char *buf, size_t len, unsigned mask) {
    size_t pos = 0;
    if (len) buf[0] = '\0';
    for (int dt = 0; dt < MFT_DTYPE_COUNT; dt++) {
        if (!(mask & (1u << dt))) continue;
        int n = snprintf(buf + pos, pos < len ? len - pos : 0, "%s%s", pos ? ", " : "",
                         mft_dtype_name((mft_dtype)dt));
        if (n > 0 && pos + (size_t)n < len) pos += (size_t)n;
    }
    if (!pos) snprintf(buf, len, "none");
}

/* ---------------------------------------------------------------- listing */
typedef struct list_buf {
    char *buf;
    size_t len, pos;
} list_buf;

static void list_line(list_buf *b, mft__op_id op, mft_format fmt, mft_dtype dt, const char *name,
                      const char *mark) {
    char *dst = b->pos < b->len ? b->buf + b->pos : NULL;
    size_t room = b->pos < b->len ? b->len - b->pos : 0;
    int n = snprintf(dst, room, "%-28s %-16s %-4s %s%s\n", mft__op_name(op),
                     fmt == MFT_FORMAT_ANY ? "ANY" : mft_format_name(fmt), mft_dtype_name(dt), name,
                     mark);
    if (n > 0) b->pos += (size_t)n;
}

size_t mft_dispatch_list(char *buf, size_t len) {
    list_buf b = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    for (int i = 0; i < mft__dispatch_user_count(); i++) {
        mft__kernel_def u;
        mft__dispatch_user_get(i, &u);
        list_line(&b, u.op, u.fmt, u.dtype, u.name,
                  mft__dispatch_user_conditional(i) ? " [user, conditional]" : " [user]");
    }
    for (size_t t = 0; mft__kernel_index[t]; t++)
        for (const mft__kernel_def *d = mft__kernel_index[t]; d->fn; d++)
            list_line(&b, d->op, d->fmt, d->dtype, d->name, "");
    return b.pos;
}
