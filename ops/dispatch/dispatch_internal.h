/* ops/dispatch/dispatch_internal.h — what the files of ops/dispatch share
 * beyond ops/ops_internal.h: the questions registration and
 * mft_dispatch_call_builtin ask of the built-in tables (kernel_index.c), the
 * kernel interface of every dispatched op (interface.c: its inputs, outputs
 * and parameter struct, the checks of a direct call, the table of
 * docs/dispatch.md), and running one built-in kernel outside a dispatch
 * (dispatch.c). Only ops/dispatch/ and the tests include it. */
#ifndef MFT_DISPATCH_INTERNAL_H
#define MFT_DISPATCH_INTERNAL_H

#include "ops_internal.h"

/* ---------------------------------------------------------------- kernel_index.c */
/* Bit (1u << dtype) for every dtype op has a built-in kernel for, in any
 * format. */
unsigned mft__builtin_dtypes(mft__op_id op);
/* Bit (1u << fmt) for every format (CONTIGUOUS, CHANNELS_LAST,
 * MFT_FORMAT_ANY) with a built-in kernel for (op, dtype). */
unsigned mft__builtin_formats(mft__op_id op, mft_dtype dtype);
/* The built-in kernel named name registered for exactly (op, fmt, dtype);
 * name NULL: the one the dispatcher would pick for that key when no user
 * kernel takes the call (the first for (op, fmt, dtype) in search order,
 * else the first for (op, ANY, dtype)). NULL when there is none. */
const mft__kernel_def *mft__builtin_find(mft__op_id op, mft_format fmt, mft_dtype dtype,
                                         const char *name);
/* "f32, f64": the dtypes of mask (bits 1u << dtype), in enum order. */
void mft__dtype_mask_text(char *buf, size_t len, unsigned mask);

/* ---------------------------------------------------------------- interface.c */
struct mft__kernel_iface;
/* Checks args of a direct call of a built-in kernel of op beyond counts,
 * NULLs, dtypes of the first operands and packing (done before): sizes
 * against each other and the params. Sets the error naming fn; false when
 * they do not fit. */
typedef bool (*mft__iface_check)(const char *fn, const struct mft__kernel_iface *f,
                                 const mft_kernel_args *a);
/* What a kernel of a dispatched op receives (docs/dispatch.md). */
typedef struct mft__kernel_iface {
    mft__op_id op;
    int nin, nout;
    const char *inputs;  /* "x, w": names in order, for the docs */
    const char *outputs; /* "y" */
    unsigned packed;     /* bit i: the dispatcher packs input i in the kernel's format */
    const char *params;  /* the parameter struct's type */
    const char *header;  /* its public header; NULL: an internal struct */
    bool params_optional; /* params may be NULL (max_pool*_backward) */
    int nsp;              /* spatial dims of conv and pool ops (2, 3), else 0 */
    mft__iface_check check;
} mft__kernel_iface;
/* The interface of op; NULL for an op that is not dispatched or that the
 * interface table lacks (the registry test catches that). */
const mft__kernel_iface *mft__kernel_iface_of(mft__op_id op);
/* The Markdown table of every dispatched op (docs/dispatch.md holds it
 * between its markers; tests/ops/test_dispatch_doc.c compares). Returns the
 * length the full text needs (as snprintf). */
size_t mft__dispatch_markdown(char *buf, size_t len);

/* ---------------------------------------------------------------- dispatch.c */
/* Runs built-in kernel k on args (already checked) as a dispatch would,
 * without being one: no record, no counters. Keeps the running dispatch's
 * state (report-as name, scratch failure) of this thread intact, except that
 * a scratch failure inside a running dispatch also fails that dispatch.
 * MFT_ERR_NOMEM naming fn when the kernel could not get its scratch. */
mft_status mft__dispatch_run_builtin(const char *fn, const mft__kernel_def *k,
                                     const mft_kernel_args *args);
/* True while a kernel of op dispatched with exactly these params runs on
 * this thread (at any depth of nesting). */
bool mft__dispatch_running(mft__op_id op, const void *params);
/* Whether user kernel i (as mft__dispatch_user_get numbers them) was
 * registered with an applicability test. */
bool mft__dispatch_user_conditional(int i);

#endif
