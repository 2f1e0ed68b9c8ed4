/* mft/profile.h — seeing where time and copies go: conversion
 * counters with causes, the profiler (dispatch and conversion events, a
 * key_averages-style table, a Chrome trace), call-site tagging and reorder
 * budgets.
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

/* ------------------------------------------------------------ call sites
 * The profiler attributes events to the user's call site. MFT_AT(expr)
 * evaluates expr with this thread's call site set to the caller's
 * file:line; the site stays set until the next MFT_AT / mft_profile_site
 * (so a plain call after it is attributed to the same line). Tape nodes
 * remember the site of their forward call, so backward events and gradient
 * conversions point at the forward line that recorded them. file must be a
 * string that outlives the profile (a __FILE__ literal); NULL clears. */
MFT_API void mft_profile_site(const char *file, int line);
#define MFT_AT(expr) (mft_profile_site(__FILE__, __LINE__), (expr))

/* -------------------------------------------------------------- profiler
 * mft_profile_begin starts recording on the calling thread (clearing any
 * previous recording); mft_profile_end stops it and keeps the events for
 * the outputs below. Recorded: every kernel run (dispatched ops, the
 * elementwise engine, reductions, optimizer updates, copies), with op,
 * kernel, input and output formats, dtype, wall time, bytes read +
 * written and the call site; every conversion with its cause, bytes, source
 * and target format, op and call site. When not recording (and with no
 * MFT_VERBOSE and no tape) the cost is a few inline loads per kernel run
 * (bench/bench_profile.c).
 * Errors: MFT_ERR_NOMEM when the event buffer cannot grow (recording
 * stops, events so far are kept). */
MFT_API mft_status mft_profile_begin(void);
MFT_API mft_status mft_profile_end(void);
MFT_API bool mft_profile_active(void);
/* Number of recorded events (dispatches + conversions). */
MFT_API int64_t mft_profile_event_count(void);
/* Frees the recorded events. */
MFT_API void mft_profile_clear(void);

/* A table like PyTorch's key_averages().table(): one row per (op, kernel,
 * formats in -> out), calls, total and mean time, bytes, conversions by
 * cause and bytes converted, sorted by total time; then one row per
 * (cause, op, site) of conversions. Returns the length the full text needs
 * (as snprintf); buf may be NULL with len 0 to measure. */
MFT_API size_t mft_profile_table(char *buf, size_t len);
/* Writes the recording as Chrome trace JSON ("traceEvents", one complete
 * event "ph":"X" per dispatch, one instant event "ph":"i" per conversion,
 * args with formats, kernel, bytes, cause, site), loadable in Perfetto and
 * chrome://tracing. Errors: NULL f (MFT_ERR_NULL), write failure (MFT_ERR_IO). */
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
#endif
