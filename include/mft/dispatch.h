/* mft/dispatch.h — format-aware kernel dispatch (docs/architecture.md §7).
 *
 * Every dispatched op (conv2d, max_pool2d, ...) has a table of kernels keyed
 * by (op, format, dtype). The op's entry point validates its arguments,
 * decides the result's format by docs/spec.md §4, then asks the dispatcher for a
 * kernel. Lookup order:
 *   1. a kernel registered by the user with mft_dispatch_register for
 *      exactly (op, format, dtype);
 *   2. a built-in kernel for exactly (op, format, dtype);
 *   3. a kernel for (op, MFT_FORMAT_ANY, dtype) (reads any strides);
 *   4. fallback: a kernel of the same dtype in another format. Inputs are
 *      converted to that format, the kernel runs, the result is converted
 *      back; every conversion is counted. In strict mode (mft_dispatch_set_
 *      strict) a fallback is an error (MFT_ERR_UNSUPPORTED) instead, so a
 *      kernel author can prove the kernel ran.
 * Every op has a naive reference kernel (CONTIGUOUS, F32) that defines its
 * semantics; fast kernels carry descriptive names ("max_pool2d.nhwc.f32.avx2").
 *
 * Observability: mft_dispatch_last() describes the last dispatch on this
 * thread; MFT_VERBOSE=1 in the environment (or mft_set_verbose(1)) logs one
 * line per dispatch through a replaceable callback (default: stderr);
 * mft_dispatch_list() prints the table. */
#ifndef MFT_DISPATCH_H
#define MFT_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel that accepts any strides (registered under this format). */
#define MFT_FORMAT_ANY MFT_PRESERVE

/* What a kernel receives. inputs are already in the kernel's format and
 * dtype (packed when the format is CONTIGUOUS or CHANNELS_LAST); outputs are
 * allocated by the op, in the kernel's format, uninitialised unless the op's
 * documentation says otherwise. params points to the op's parameter struct
 * (documented beside the op, e.g. mft_pool2d_params). Kernels cannot fail:
 * everything was validated before. */
typedef struct mft_kernel_args {
    int ninputs, noutputs;
    const mft_tensor *const *inputs;
    mft_tensor *const *outputs;
    const void *params;
} mft_kernel_args;

typedef void (*mft_kernel_fn)(const mft_kernel_args *args);

/* Adds or replaces the user kernel for (op, fmt, dtype); fmt may be
 * MFT_FORMAT_ANY. op is a dispatched op's name ("max_pool2d"); name is how
 * the kernel is reported (copied). Errors: unknown op (MFT_ERR_INVALID), NULL
 * fn/name, bad format or dtype. Not thread-safe against concurrent
 * dispatches. */
MFT_API mft_status mft_dispatch_register(const char *op, mft_format fmt, mft_dtype dtype,
                                         const char *name, mft_kernel_fn fn);
/* Removes the user kernel for (op, fmt, dtype); MFT_ERR_INVALID if none. */
MFT_API mft_status mft_dispatch_unregister(const char *op, mft_format fmt, mft_dtype dtype);

/* The last dispatch on this thread. */
typedef struct mft_dispatch_info {
    const char *op;            /* "max_pool2d" ("" before any dispatch) */
    const char *kernel;        /* the kernel's name */
    mft_format format;         /* the format the op asked for (docs/spec.md §4) */
    mft_format kernel_format;  /* the format the kernel ran in */
    mft_dtype dtype;
    int conversions;           /* tensors converted to or from kernel_format */
    bool user;                 /* a user-registered kernel */
    int64_t seq;               /* dispatches on this thread so far, this one included */
} mft_dispatch_info;
/* Borrowed; valid until the next dispatch on this thread. */
MFT_API const mft_dispatch_info *mft_dispatch_last(void);
/* Conversions done by fallbacks on this thread since the last reset. */
MFT_API int64_t mft_dispatch_conversions(void);
MFT_API void mft_dispatch_conversions_reset(void);

/* Kernel usage on this thread since the last reset, as text: one line per
 * (op, kernel) that ran, "op kernel N calls M conversions", most-called
 * first. Returns the length the full text needs (as snprintf); buf may be
 * NULL with len 0 to measure. */
MFT_API size_t mft_dispatch_stats(char *buf, size_t len);
MFT_API void mft_dispatch_stats_reset(void);

/* Strict mode (per process): a dispatch that would need a fallback fails. */
MFT_API void mft_dispatch_set_strict(bool strict);
MFT_API bool mft_dispatch_strict(void);

/* Logging: level 1 = one line per dispatch. MFT_VERBOSE in the environment
 * sets the initial level. The callback receives one line without newline
 * (NULL restores the default, which writes to stderr). */
MFT_API void mft_set_verbose(int level);
MFT_API int mft_verbose(void);
MFT_API void mft_set_log_callback(void (*cb)(const char *line, void *ctx), void *ctx);

/* The kernel table as text, one kernel per line: "op format dtype name
 * [user]". Returns the length the full text needs (as snprintf). */
MFT_API size_t mft_dispatch_list(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
