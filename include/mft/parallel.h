/* mft/parallel.h — the library's parallel loop, for user kernels
 * (docs/architecture.md §10, docs/dispatch.md).
 *
 * A kernel registered with mft_dispatch_register runs on the calling thread;
 * to use the library's threads it splits its work with mft_parallel_for,
 * the loop every built-in kernel uses. The thread count is the library's
 * (mft_set_num_threads / mft_num_threads in mft/tensor.h; MFT_NUM_THREADS in
 * the environment); without OpenMP everything runs on the calling thread. */
#ifndef MFT_PARALLEL_H
#define MFT_PARALLEL_H

#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs fn(ctx, b, e) over [begin, end) split into contiguous chunks
 * [b, e): every index is in exactly one chunk, and chunk k is the k-th
 * range in index order, run by the k-th thread. With n = end - begin and
 * t = min(threads, ceil(n / grain)), chunks hold ceil(n / t) items each
 * (the last may be shorter; so few items may give fewer than t chunks),
 * so a reduction that combines per-chunk partials in chunk order gives the
 * same bits for a given thread count. One call fn(ctx, begin, end) on the
 * calling thread when t is 1 (at most grain items, or one thread), when
 * called from inside a parallel region (an mft_parallel_for, a built-in
 * kernel's loop: nested loops run serially, they never oversubscribe), or
 * without OpenMP. Returns when every chunk is done.
 * grain: the fewest items worth a chunk of their own (0 counts as 1).
 * begin == end runs nothing. fn runs on several threads at once: it must
 * touch only what its range owns, and cannot fail (an mft error set inside
 * it lands in that worker thread's last error, not the caller's).
 * Errors (fn not called): fn NULL (MFT_ERR_NULL), begin > end or grain < 0
 * (MFT_ERR_INVALID), more than INT64_MAX items (MFT_ERR_OVERFLOW), each
 * with a message naming mft_parallel_for and the values. */
MFT_API mft_status mft_parallel_for(int64_t begin, int64_t end, int64_t grain,
                                    void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
