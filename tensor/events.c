/* tensor/events.c — conversion counters with causes and the call site, the
 * two things every op reports whether or not the profiler records (see
 * Note [Conversions and their causes] in mft/profile.h). All state is per
 * thread: conversions are started by the thread that called the op. The
 * profiler (tensor/profile.c) and the reorder budget read from here. */
#include <string.h>
#include "internal.h"
#include "mft/profile.h"

static const char *const cause_names[MFT_CAUSE_COUNT] = {"explicit", "reshape", "fallback",
                                                          "gradient", "operand"};

const char *mft_conversion_cause_name(mft_conversion_cause c) {
    return (unsigned)c < MFT_CAUSE_COUNT ? cause_names[c] : "?";
}

bool mft_conversion_cause_hidden(mft_conversion_cause c) {
    return c == MFT_CAUSE_FALLBACK || c == MFT_CAUSE_GRADIENT || c == MFT_CAUSE_OPERAND;
}

#define EVENTS_CAUSE_DEPTH 8
static _Thread_local mft_conversion_counts tl_counts;
typedef struct events_cause {
    mft_conversion_cause cause;
    const char *op;
} events_cause;
static _Thread_local events_cause tl_cause[EVENTS_CAUSE_DEPTH];
static _Thread_local int tl_ncause = 0;
static _Thread_local const char *tl_site_file = NULL;
static _Thread_local int tl_site_line = 0;

mft_conversion_counts mft_conversion_counts_get(void) { return tl_counts; }
void mft_conversion_counts_reset(void) { memset(&tl_counts, 0, sizeof tl_counts); }

void mft__cause_push(mft_conversion_cause c, const char *op) {
    if (tl_ncause < EVENTS_CAUSE_DEPTH) tl_cause[tl_ncause] = (events_cause){c, op};
    tl_ncause++;
}
void mft__cause_pop(void) {
    if (tl_ncause > 0) tl_ncause--;
}

void mft__note_conversion_as(mft_conversion_cause c, const char *op, const mft_tensor *src,
                             const mft_tensor *dst) {
    if ((unsigned)c >= MFT_CAUSE_COUNT) c = MFT_CAUSE_EXPLICIT;
    int64_t bytes = dst ? dst->numel * (int64_t)mft_dtype_size(dst->dtype) : 0;
    tl_counts.count[c]++;
    tl_counts.bytes[c] += bytes;
    tl_counts.total++;
    if (mft_conversion_cause_hidden(c)) tl_counts.hidden++;
    mft__profile_conversion(c, op, src, dst, bytes);
}

void mft__note_conversion(const char *op, const mft_tensor *src, const mft_tensor *dst) {
    int top = tl_ncause < EVENTS_CAUSE_DEPTH ? tl_ncause : EVENTS_CAUSE_DEPTH;
    if (top > 0)
        mft__note_conversion_as(tl_cause[top - 1].cause,
                                tl_cause[top - 1].op ? tl_cause[top - 1].op : op, src, dst);
    else
        mft__note_conversion_as(MFT_CAUSE_EXPLICIT, op, src, dst);
}

void mft_profile_site(const char *file, int line) {
    tl_site_file = file;
    tl_site_line = file ? line : 0;
}

void mft__site_get(const char **file, int *line) {
    *file = tl_site_file;
    *line = tl_site_line;
}
