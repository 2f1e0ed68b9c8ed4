/* mft/status.h — status codes and the thread-local last error.
 *
 * One X-macro list (MFT_STATUS_LIST) generates the mft_status enum and the
 * strings returned by mft_status_str. Failing calls set the thread-local last
 * error (status + message naming the function and the offending values);
 * successful calls never clear it. */
#ifndef MFT_STATUS_H
#define MFT_STATUS_H

#include "mft/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, description) */
#define MFT_STATUS_LIST(X)                                                   \
    X(MFT_OK, "success")                                                     \
    X(MFT_ERR_NULL, "a required argument is NULL")                           \
    X(MFT_ERR_INVALID, "invalid argument")                                   \
    X(MFT_ERR_RANK, "unsupported or mismatched rank")                        \
    X(MFT_ERR_SHAPE, "shape mismatch")                                       \
    X(MFT_ERR_DIM, "dimension index out of range")                           \
    X(MFT_ERR_OVERFLOW, "size or stride arithmetic overflows int64")         \
    X(MFT_ERR_BOUNDS, "view reaches outside its storage")                    \
    X(MFT_ERR_DTYPE, "unsupported or mismatched dtype")                      \
    X(MFT_ERR_FORMAT, "unsupported memory format for this rank")             \
    X(MFT_ERR_NOT_VIEWABLE, "sizes cannot be expressed as a view")           \
    X(MFT_ERR_OVERLAP, "output overlaps an input or itself")                 \
    X(MFT_ERR_NOMEM, "out of memory")                                        \
    X(MFT_ERR_SCOPE, "scope misuse")                                         \
    X(MFT_ERR_UNSUPPORTED, "operation not supported")                        \
    X(MFT_ERR_STALE, "a tensor saved for backward was modified or freed")     \
    X(MFT_ERR_IO, "file input/output failed")                                \
    X(MFT_ERR_CORRUPT, "file is corrupted or truncated")                     \
    X(MFT_ERR_BUDGET, "more hidden format conversions than the budget allows") \
    X(MFT_ERR_INTERNAL, "internal error")

typedef enum mft_status {
#define MFT_STATUS_ENUM_(name, desc) name,
    MFT_STATUS_LIST(MFT_STATUS_ENUM_)
#undef MFT_STATUS_ENUM_
    MFT_STATUS_COUNT
} mft_status;

/* Short fixed description of a status ("shape mismatch"); "unknown status"
 * for values outside the enum. Never NULL; static storage. */
MFT_API const char *mft_status_str(mft_status s);

/* Status of the last failing call on this thread (MFT_OK if none failed since
 * the last mft_clear_error). */
MFT_API mft_status mft_last_error(void);

/* Message of the last failing call on this thread, e.g.
 * "mft_permute: dims [0,1,1,2] is not a permutation of 0..3". "" if none.
 * Borrowed; valid until the next failing call on this thread. */
MFT_API const char *mft_last_error_message(void);

/* Resets this thread's last error to MFT_OK and "". */
MFT_API void mft_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
