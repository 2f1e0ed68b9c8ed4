/* mft/data.h — datasets and batching: the IDX file reader (the MNIST family,
 * gzip-compressed or raw, through zlib), Fashion-MNIST/MNIST loading, a seeded
 * platform-independent shuffle, a small batch iterator, and the fused
 * uint8 -> float "gather + normalise + pack in NCHW or NHWC" step that feeds a
 * training loop.
 *
 * Ownership as everywhere in mft (docs/architecture.md §3): functions returning
 * mft_tensor * return a NEW reference or NULL with the thread-local error set;
 * tensor arguments are borrowed. */
#ifndef MFT_DATA_H
#define MFT_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ IDX files */
/* Reads an IDX file (http://yann.lecun.com/exdb/mnist/ format: two zero bytes,
 * a type byte, a rank byte, the sizes as big-endian uint32, then the elements
 * big-endian in row-major order). gzip-compressed and raw files are both
 * accepted (zlib's gzopen reads either).
 * Element types: 0x08 u8 -> MFT_U8; 0x09 i8 and 0x0B i16 -> MFT_I32 (sign
 * extended); 0x0C i32 -> MFT_I32; 0x0D f32 -> MFT_F32; 0x0E f64 -> MFT_F64.
 * Result: a new CONTIGUOUS tensor of rank 1..MFT_MAX_DIMS with the header's
 * sizes (a rank 3-5 result is tagged CONTIGUOUS, declared).
 * Errors (the message names the path and the values):
 *   MFT_ERR_NULL     path is NULL;
 *   MFT_ERR_IO       the file cannot be opened or read (with the errno text);
 *   MFT_ERR_CORRUPT  bad magic, unknown type byte, rank 0 or > MFT_MAX_DIMS,
 *                    sizes whose product overflows, truncated header or data,
 *                    bytes after the last element, a damaged gzip stream;
 *   MFT_ERR_NOMEM    out of memory.
 * Memory is only committed as data actually arrives, so a header announcing
 * absurd sizes fails with MFT_ERR_CORRUPT (truncated) rather than allocating. */
MFT_API mft_tensor *mft_idx_load(const char *path);

/* Loads one split of MNIST or Fashion-MNIST from `dir`: the files
 * "<split>-images-idx3-ubyte[.gz]" and "<split>-labels-idx1-ubyte[.gz]" (the
 * .gz name is tried first). split is "train" or "t10k".
 * On success *images is a new U8 tensor (N, H, W) and *labels a new I64
 * tensor (N) (both CONTIGUOUS). Checks: images are u8 of rank 3, labels u8 or
 * i32 of rank 1, the same N in both files, every label in 0..255.
 * On failure both outputs are set to NULL and nothing is allocated. Errors:
 * MFT_ERR_NULL (an argument), MFT_ERR_INVALID (split), those of
 * mft_idx_load, MFT_ERR_CORRUPT (type/rank/N/label checks). */
MFT_API mft_status mft_mnist_load(const char *dir, const char *split, mft_tensor **images,
                                  mft_tensor **labels);

/* ------------------------------------------------------------------ batching */
/* Gathers images idx[0..count) of a U8 tensor `images` (N, H, W) or
 * (N, C, H, W), any strides, into a new tensor (count, C, H, W) (C = 1 for a
 * rank-3 input) of dtype F32 or F64, packed in fmt (CONTIGUOUS = NCHW,
 * CHANNELS_LAST = NHWC, NCHW8C / NCHW16C = blocked, reordered from the NCHW
 * batch and counted as an explicit conversion; tag DECLARED). Every element is
 *     ((double)u8 * scale - mean) / std
 * computed in double and rounded once to dtype (one fused pass through a
 * 256-entry table, parallel over images). count may be 0 (an empty batch).
 * Errors: MFT_ERR_NULL (images, or idx with count > 0), MFT_ERR_DTYPE (images
 * not U8, dtype not F32/F64), MFT_ERR_RANK, MFT_ERR_FORMAT, MFT_ERR_INVALID
 * (count < 0, std == 0, non-finite scale/mean/std), MFT_ERR_DIM (an index
 * outside 0..N-1, named with its position). New reference. */
MFT_API mft_tensor *mft_images_to_batch(const mft_tensor *images, const int64_t *idx,
                                        int64_t count, double scale, double mean, double std,
                                        mft_format fmt, mft_dtype dtype);

/* Rows idx[0..count) of t along dim 0, as a new tensor (count, sizes[1:]...) of
 * t's dtype (any dtype, rank >= 1, any strides). Layout: packed in t's tag
 * (a CHANNELS_LAST rank 3-5 tensor gives a CHANNELS_LAST result), else
 * CONTIGUOUS. Used for labels: mft_gather_rows(labels, idx, batch).
 * Errors: MFT_ERR_NULL, MFT_ERR_RANK (rank 0), MFT_ERR_INVALID (count < 0),
 * MFT_ERR_DIM (an index outside 0..size(0)-1, named with its position).
 * New reference. */
MFT_API mft_tensor *mft_gather_rows(const mft_tensor *t, const int64_t *idx, int64_t count);

/* Note [Shuffle generator]
 * Fills idx[0..n) with 0..n-1, then shuffles with Fisher-Yates: for
 * i = n-1 down to 1, j = bounded(i + 1) and swap idx[i], idx[j]. The random
 * numbers come from splitmix64 (Steele, Lea, Flood 2014) started at state =
 * seed: state += 0x9E3779B97F4A7C15; z = state;
 * z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) *
 * 0x94D049BB133111EB; return z ^ (z >> 31) (all mod 2^64). bounded(m) draws
 * r until r < m * floor(2^64 / m) (rejection: no modulo bias) and returns
 * r % m. Only 64-bit integer arithmetic, so the permutation is the same on
 * every platform and compiler for a given (n, seed). n <= 0 does nothing;
 * idx == NULL with n > 0 sets MFT_ERR_NULL. */
MFT_API void mft_shuffle_indices(int64_t *idx, int64_t n, uint64_t seed);

/* A minimal epoch/batch iterator over n samples:
 *     mft_batches b;
 *     mft_batches_init(&b, n, 64, true, seed);
 *     for (int e = 0; e < epochs; e++) {
 *         mft_batches_start_epoch(&b, e);
 *         const int64_t *idx; int64_t count;
 *         while (mft_batches_next(&b, &idx, &count)) { ... }
 *     }
 *     mft_batches_free(&b);
 * Each epoch's order is mft_shuffle_indices(order, n, seed + epoch) when
 * shuffling, else 0..n-1. The last batch of an epoch may be shorter (it is
 * skipped when drop_last is set). Fields are read-only for the user. */
typedef struct mft_batches {
    int64_t *order;     /* n indices of the current epoch (library-allocated) */
    int64_t n;          /* samples */
    int64_t batch_size; /* samples per batch */
    int64_t pos;        /* next position in order */
    uint64_t seed;
    bool shuffle;
    bool drop_last;
} mft_batches;

/* Errors: MFT_ERR_NULL (b), MFT_ERR_INVALID (n < 0, batch_size < 1),
 * MFT_ERR_NOMEM. On error *b is zeroed (mft_batches_free is still safe).
 * Starts epoch 0. */
MFT_API mft_status mft_batches_init(mft_batches *b, int64_t n, int64_t batch_size, bool shuffle,
                                    uint64_t seed, bool drop_last);
/* Rewinds to the start of `epoch` (reshuffled with seed + epoch). */
MFT_API void mft_batches_start_epoch(mft_batches *b, uint64_t epoch);
/* Next batch: *idx points into b->order (borrowed, valid until the next
 * start_epoch/free), *count its length. False when the epoch is done. */
MFT_API bool mft_batches_next(mft_batches *b, const int64_t **idx, int64_t *count);
/* Number of batches per epoch. */
MFT_API int64_t mft_batches_count(const mft_batches *b);
/* Frees the order array; b may be NULL. */
MFT_API void mft_batches_free(mft_batches *b);

#ifdef __cplusplus
}
#endif
#endif
