/* ops/dispatch/kernel_index.c — the one list of every family's built-in
 * kernel table (Note [Kernel tables] in ops/dispatch/dispatch.c), above the
 * families, and the listing built from it and the user's kernels
 * (mft_dispatch_list). Nothing that dispatches reads this file. */
#include <stdio.h>
#include "ops_internal.h"

const mft__kernel_def *const mft__kernel_index[] = {
    mft__kernels_pool, mft__kernels_pool_more, mft__kernels_softmax,       mft__kernels_pad,
    mft__kernels_gemm, mft__kernels_norm,      mft__kernels_norm_backward, mft__kernels_conv_fast,
    mft__kernels_conv, mft__kernels_resize,    NULL};

/* ---------------------------------------------------------------- listing */
typedef struct list_buf {
    char *buf;
    size_t len, pos;
} list_buf;

static void list_line(list_buf *b, mft__op_id op, mft_format fmt, mft_dtype dt, const char *name,
                      bool user) {
    char *dst = b->pos < b->len ? b->buf + b->pos : NULL;
    size_t room = b->pos < b->len ? b->len - b->pos : 0;
    int n = snprintf(dst, room, "%-28s %-16s %-4s %s%s\n", mft__op_name(op),
                     fmt == MFT_FORMAT_ANY ? "ANY" : mft_format_name(fmt), mft_dtype_name(dt), name,
                     user ? " [user]" : "");
    if (n > 0) b->pos += (size_t)n;
}

size_t mft_dispatch_list(char *buf, size_t len) {
    list_buf b = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    for (int i = 0; i < mft__dispatch_user_count(); i++) {
        mft__kernel_def u;
        mft__dispatch_user_get(i, &u);
        list_line(&b, u.op, u.fmt, u.dtype, u.name, true);
    }
    for (size_t t = 0; mft__kernel_index[t]; t++)
        for (const mft__kernel_def *d = mft__kernel_index[t]; d->fn; d++)
            list_line(&b, d->op, d->fmt, d->dtype, d->name, false);
    return b.pos;
}
