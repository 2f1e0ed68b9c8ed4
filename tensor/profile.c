/* tensor/profile.c — the profiler and reorder budgets (mft/profile.h).
 * PLACEHOLDER being replaced in this round: only the hook exists. */
#include "internal.h"

void mft__profile_conversion(mft_conversion_cause c, const char *op, const mft_tensor *src,
                             const mft_tensor *dst, int64_t bytes) {
    (void)c, (void)op, (void)src, (void)dst, (void)bytes;
}
