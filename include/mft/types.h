/* mft/types.h — element types, memory formats, tag origins and limits.
 *
 * mft_format is an enum, not a bool, so blocked formats (nChw8c, NC1HWC0)
 * can be added later without breaking the ABI of existing values. */
#ifndef MFT_TYPES_H
#define MFT_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum rank of a tensor (and of an elementwise iteration). */
#define MFT_MAX_DIMS 8

typedef enum mft_dtype {
    MFT_F32,
    MFT_F64,
    MFT_I32,
    MFT_I64,
    MFT_U8,
    MFT_DTYPE_COUNT
} mft_dtype;

/* Memory formats. CONTIGUOUS = channels first (N,C,[D,]H,W packed);
 * CHANNELS_LAST = N,[D,]H,W,C packed for rank 4/5 and N,L,C for rank 3.
 * PRESERVE is only an argument ("keep the input's layout"), never a tag.
 * The blocked formats (docs/spec.md §7, mft/layout.h) keep logical sizes and
 * store C in blocks: NCHW8C / NCHW16C are N,C1,[D,]H,W,C0 with C0 = 8 / 16
 * (oneDNN nChw8c / nChw16c; NCHW16C is Ascend's NC1HWC0 for 4-byte
 * elements), rank 3-5; BLOCKED is any other descriptor (read it with
 * mft_tensor_layout). Appended so the plain formats keep their numbers. */
typedef enum mft_format {
    MFT_CONTIGUOUS,
    MFT_CHANNELS_LAST,
    MFT_PRESERVE,
    MFT_NCHW8C,
    MFT_NCHW16C,
    MFT_BLOCKED,
    MFT_FORMAT_COUNT
} mft_format;

/* Where a tensor's soft format tag came from (docs/spec.md §3). */
typedef enum mft_origin {
    MFT_DECLARED,  /* a user asked for it (factory, to_format, contiguous, clone) */
    MFT_INFERRED,  /* read from unambiguous strides */
    MFT_INHERITED, /* strides fit both formats; the producer's tag was kept */
    MFT_ORIGIN_COUNT
} mft_origin;

/* Size in bytes of one element; 0 for an invalid dtype. */
MFT_API size_t mft_dtype_size(mft_dtype dt);
/* "f32", "f64", "i32", "i64", "u8"; "invalid" otherwise. Static storage. */
MFT_API const char *mft_dtype_name(mft_dtype dt);
/* "CONTIGUOUS", "CHANNELS_LAST", "PRESERVE", "NCHW8C", "NCHW16C", "BLOCKED";
 * "invalid" otherwise. */
MFT_API const char *mft_format_name(mft_format f);
/* "declared", "inferred", "inherited"; "invalid" otherwise. */
MFT_API const char *mft_origin_name(mft_origin o);

#ifdef __cplusplus
}
#endif
#endif
