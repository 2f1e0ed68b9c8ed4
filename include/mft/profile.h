/* mft/profile.h — seeing where time and copies go: conversion
 * counters with causes and the newest conversion, the profiler (dispatch
 * and conversion events, a key_averages-style table, a Chrome trace),
 * call-site tagging (MFT_AT) and reorder budgets.
 *
 * Note [Conversions and their causes]
 * A conversion is a copy that changes a tensor's physical layout (a packed
 * copy made by mft_contiguous / mft_to_format when the data is not already
 * laid out as asked, a fallback copy inside dispatch, a gradient converted to
 * its input's format in backward, ...). Every conversion has one cause:
 *   EXPLICIT  the user called mft_contiguous / mft_to_format / mft_clone;
 *   RESHAPE   a shape op whose result cannot be a view of its input had to
 *             copy (flatten / reshape of an NHWC tensor to rank 2, and the
 *             same copy in its backward): the values' order is the op's
 *             semantics, so no layout choice avoids it;
 *   FALLBACK  dispatch found no kernel for the format docs/spec.md §4 asked for and
 *             converted inputs / the output around another format's kernel;
 *   GRADIENT  backward produced an input's gradient in another layout and
 *             converted it to that input's format (docs/spec.md §5);
 *   OPERAND   an op copied an operand into the layout its kernel needs
 *             (e.g. a non-packed operand of a matmul).
 * FALLBACK, GRADIENT and OPERAND are "hidden": the user's code does not show
 * them. Counters are per thread (the thread that called the op); internal
 * worker threads never start conversions. */
#ifndef MFT_PROFILE_H
#define MFT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/types.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mft_conversion_cause {
    MFT_CAUSE_EXPLICIT,
    MFT_CAUSE_RESHAPE,
    MFT_CAUSE_FALLBACK,
    MFT_CAUSE_GRADIENT,
    MFT_CAUSE_OPERAND,
    MFT_CAUSE_COUNT
} mft_conversion_cause;

/* "explicit", "reshape", "fallback", "gradient", "operand"; "?" otherwise. */
MFT_API const char *mft_conversion_cause_name(mft_conversion_cause c);
/* True for the hidden causes (FALLBACK, GRADIENT, OPERAND). */
MFT_API bool mft_conversion_cause_hidden(mft_conversion_cause c);

/* Conversions on this thread since the last reset, per cause. */
typedef struct mft_conversion_counts {
    int64_t count[MFT_CAUSE_COUNT];
    int64_t bytes[MFT_CAUSE_COUNT]; /* bytes written by the copies */
    int64_t hidden;                 /* sum of count[] over the hidden causes */
    int64_t total;                  /* sum of count[] */
} mft_conversion_counts;
MFT_API mft_conversion_counts mft_conversion_counts_get(void);
MFT_API void mft_conversion_counts_reset(void);

/* The newest conversion on this thread, as mft_dispatch_last is for
 * dispatches: what was copied, why, by which op, where and what it cost.
 * Conversions are noted whether or not anything records. */
typedef struct mft_conversion_info {
    int64_t seq;                /* conversions on this thread so far (0: none yet) */
    mft_conversion_cause cause;
    const char *op;             /* the op responsible ("conv2d", "flatten", "to_format") */
    const char *from, *to;      /* layouts of source and copy ("NCHW", "NHWC", ...) */
    int64_t bytes;              /* bytes written by the copy */
    int64_t ns;                 /* wall time of the copy kernel (at least 1 when timed); 0
                                   when it was not timed (the profiler was not recording and
                                   MFT_VERBOSE was off) or no element was copied */
    const char *site_file;      /* the call site (MFT_AT), NULL: none */
    int site_line;
    const char *module;         /* mft_module_path() when it happened ("" outside modules);
                                   in backward, the path of the forward op's module */
    const char *module_kind;    /* mft_module_kind() then ("" when none) */
} mft_conversion_info;
/* Borrowed (strings too); valid until the next conversion on this thread. */
MFT_API const mft_conversion_info *mft_conversion_last(void);

/* ------------------------------------------------------------ call sites
 * The profiler, the verbose log, conversion events, provenance and reorder
 * budget messages name the user's call site. MFT_AT(expr) evaluates expr
 * with this thread's call site set to the caller's file:line and then puts
 * back the site that was set before, so the site covers exactly the marked
 * expression: in `y = MFT_AT(mft_conv2d(...)); z = mft_relu(y);` relu's
 * events carry no site (or the one set before). MFT_AT nests: an inner one
 * covers its own expression, the outer site the rest. The value of expr is
 * returned unchanged; expr must have one of the types mft_tensor *,
 * mft_status, bool, int, long, long long (int64_t is one of these),
 * unsigned long, unsigned long long (size_t), float or double, or be a
 * pointer (returned as void *, which converts back on assignment: `mft_module
 * *m = MFT_AT(mft_nn_linear(...))`). A void call or a block of calls is
 * marked with MFT_AT_BEGIN(); ... MFT_AT_END(); on the same thread (pairs
 * nest with MFT_AT; an END without a BEGIN does nothing).
 * mft_profile_site(file, line) sets the site until it is changed again (NULL
 * clears); MFT_AT_END puts back what was set before the matching begin.
 * Tape nodes remember the site of their forward call, so backward events and
 * gradient conversions point at the forward line that recorded them. file
 * must be a string that outlives the profile (a __FILE__ literal). */
MFT_API void mft_profile_site(const char *file, int line);
#define MFT_AT_BEGIN() mft__at_push(__FILE__, __LINE__)
#define MFT_AT_END() mft__at_pop()
/* Support for MFT_AT (not called directly): push sets the site and saves the
 * previous one (up to 32 levels deep; deeper levels set the site and leave
 * it to the outer restores), pop puts the saved site back. */
MFT_API void mft__at_push(const char *file, int line);
MFT_API void mft__at_pop(void);

/* -------------------------------------------------------------- profiler
 * mft_profile_begin starts recording on the calling thread (clearing any
 * previous recording); mft_profile_end stops it and keeps the events for
 * the outputs below. Recorded: every kernel run (dispatched ops, the
 * elementwise engine, reductions, optimizer updates, copies), with op,
 * kernel, input and output formats, dtype, wall time, bytes read +
 * written, whether the kernel is a user-registered one, the call site and
 * the module path and kind (mft_module_path, mft/tensor.h); every conversion
 * with its cause, bytes, source and target format, op, call site, module
 * path and the wall time of the copy that made it. When not recording (and
 * with no MFT_VERBOSE and no tape) the cost is a few inline loads per kernel
 * run (bench/bench_profile.c).
 * Errors: MFT_ERR_NOMEM when the event buffer cannot grow (recording
 * stops, events so far are kept). */
MFT_API mft_status mft_profile_begin(void);
MFT_API mft_status mft_profile_end(void);
MFT_API bool mft_profile_active(void);
/* Number of recorded events (dispatches + conversions). */
MFT_API int64_t mft_profile_event_count(void);
/* Frees the recorded events. */
MFT_API void mft_profile_clear(void);

/* A table like PyTorch's key_averages().table(), in three parts:
 *   kernels: one row per (op, kernel, formats in -> out, module): calls,
 *     total and mean time, share, bytes moved, conversions inside dispatch,
 *     the module path (kind); sorted by total time. A user-registered kernel
 *     is marked "[user]" (with a note under the rows); a copy that made a
 *     conversion is the op "copy (<cause>)";
 *   conversions: their count, bytes and copy time per cause, then one row
 *     per (cause, op, layouts, call site, module) with count, bytes and the
 *     time of the copies;
 *   internal copies: copy kernel runs that made no conversion (casts,
 *     mft_copy_, repacks inside an op such as mean's result), one row per
 *     (layouts, call site, module), the call site and module being what
 *     attributes them.
 * Returns the length the full text needs (as snprintf); buf may be NULL
 * with len 0 to measure. */
MFT_API size_t mft_profile_table(char *buf, size_t len);
/* Writes the recording as Chrome trace JSON ("traceEvents", one complete
 * event "ph":"X" per kernel run, one instant event "ph":"i" per conversion
 * at the start of its copy; args with formats, kernel, bytes, user, cause,
 * the copy's time "copy_us" (conversions), the cause of the conversion a
 * copy made "conversion" (copy events), site, module and module_kind (null
 * outside modules)), loadable in Perfetto and chrome://tracing. Errors:
 * NULL f (MFT_ERR_NULL), write failure (MFT_ERR_IO). */
MFT_API mft_status mft_profile_write_chrome_trace(FILE *f);

/* ------------------------------------------------------- reorder budgets
 * mft_reorder_budget_begin(max) opens a region on this thread (regions do
 * not nest: a second begin before end is MFT_ERR_SCOPE); the matching
 * _end() returns MFT_OK when the region did at most max hidden conversions
 * (FALLBACK + GRADIENT + OPERAND), else MFT_ERR_BUDGET with a message giving
 * the count, the limit and the first offending conversion (cause, op, call
 * site). MFT_ERR_SCOPE when no region is open; max < 0 is MFT_ERR_INVALID. */
MFT_API mft_status mft_reorder_budget_begin(int64_t max);
MFT_API mft_status mft_reorder_budget_end(void);

#ifdef __cplusplus
}
#endif

/* MFT_AT(expr): the value of expr goes through a function of its own type
 * that pops the site after expr was evaluated (C11 _Generic; a template in
 * C++). expr is expanded twice, once unevaluated (the type selection). */
#ifdef __cplusplus
template <typename T> inline T mft__at_end(T v) {
    mft__at_pop();
    return v;
}
#define MFT_AT(expr) mft__at_end((mft__at_push(__FILE__, __LINE__), (expr)))
#else
static inline mft_tensor *mft__at_end_tensor(mft_tensor *v) { return mft__at_pop(), v; }
static inline mft_status mft__at_end_status(mft_status v) { return mft__at_pop(), v; }
static inline bool mft__at_end_bool(bool v) { return mft__at_pop(), v; }
static inline int mft__at_end_int(int v) { return mft__at_pop(), v; }
static inline long mft__at_end_long(long v) { return mft__at_pop(), v; }
static inline long long mft__at_end_llong(long long v) { return mft__at_pop(), v; }
static inline unsigned long mft__at_end_ulong(unsigned long v) { return mft__at_pop(), v; }
static inline unsigned long long mft__at_end_ullong(unsigned long long v) {
    return mft__at_pop(), v;
}
static inline float mft__at_end_float(float v) { return mft__at_pop(), v; }
static inline double mft__at_end_double(double v) { return mft__at_pop(), v; }
static inline void *mft__at_end_ptr(const void *v) { return mft__at_pop(), (void *)(uintptr_t)v; }
#define MFT__AT_END(v)                                                                            \
    _Generic((v), mft_tensor *: mft__at_end_tensor, mft_status: mft__at_end_status,                \
             bool: mft__at_end_bool, int: mft__at_end_int, long: mft__at_end_long,                \
             long long: mft__at_end_llong, unsigned long: mft__at_end_ulong,                      \
             unsigned long long: mft__at_end_ullong, float: mft__at_end_float,                    \
             double: mft__at_end_double, default: mft__at_end_ptr)(v)
#define MFT_AT(expr) MFT__AT_END((mft__at_push(__FILE__, __LINE__), (expr)))
#endif
#endif
