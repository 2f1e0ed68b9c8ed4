/* mft/tensor.h — the tensor: factories, lifetime, accessors, layout predicates,
 * the soft memory-format tag, views, conversions, layout interop, hashing,
 * description, scopes and the allocator hook.
 *
 * Ownership (docs/architecture.md §3): a function returning mft_tensor * returns a NEW
 * reference (release it with mft_tensor_release) or NULL with the thread-local
 * error set (mft_last_error / mft_last_error_message). Tensor arguments are
 * borrowed. A NULL tensor argument makes the call fail with MFT_ERR_NULL but
 * keeps an earlier error message if one is already set, so a chain of calls can
 * be checked once at the end. Views share storage and never copy; functions
 * that copy say so.
 *
 * Dims: sizes and strides are always in LOGICAL order (N, C, [D,] H, W);
 * strides are in elements and must be >= 0. Negative dim arguments count from
 * the end, as in PyTorch. */
#ifndef MFT_TENSOR_H
#define MFT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mft_tensor mft_tensor;

/* ------------------------------------------------------------------ factories
 * All factories return a new packed tensor whose tag is `fmt` (origin
 * DECLARED). fmt must be CONTIGUOUS or CHANNELS_LAST; CHANNELS_LAST needs rank
 * 3, 4 or 5 (rank 3 = N,L,C is an mft extension). ndim may be 0 (a scalar,
 * sizes may then be NULL). Errors: negative size, ndim outside
 * 0..MFT_MAX_DIMS, element count or byte size overflowing int64, bad
 * dtype/format, out of memory. */
MFT_API mft_tensor *mft_empty(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt);
MFT_API mft_tensor *mft_zeros(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt);
MFT_API mft_tensor *mft_ones(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt);
MFT_API mft_tensor *mft_full(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                             double value);

/* New uninitialised storage of exactly the minimum size for (sizes, strides);
 * strides may have gaps (padding) or zeros (broadcast). The tag is inferred
 * from the strides (ambiguous strides: mft_tensor_suggest_format). */
MFT_API mft_tensor *mft_empty_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                                      mft_dtype dtype);

/* Wraps caller memory without copying. `nbytes` is the usable length of
 * `data`; the view (storage_offset, sizes, strides) must stay inside it, else
 * MFT_ERR_BOUNDS. strides == NULL means packed contiguous. `deleter(data, ctx)`
 * is called when the last tensor using the memory is released (may be NULL:
 * the caller keeps ownership and must outlive the tensors). On failure the
 * deleter is NOT called: the caller still owns `data`. */
MFT_API mft_tensor *mft_from_blob(void *data, size_t nbytes, int ndim, const int64_t *sizes,
                                  const int64_t *strides, int64_t storage_offset, mft_dtype dtype,
                                  void (*deleter)(void *data, void *ctx), void *ctx);

/* 1-D tensor [start, start+step, ...) up to but excluding end (PyTorch's
 * arange). step must be non-zero and the count finite. */
MFT_API mft_tensor *mft_arange(double start, double end, double step, mft_dtype dtype);

/* Seeded random tensors: uniform in [0, 1) and standard normal. The value of
 * each element is a function of (seed, its logical linear index) only, so the
 * same seed gives the same logical values in every format. Integer dtypes are
 * rejected (MFT_ERR_DTYPE). */
MFT_API mft_tensor *mft_rand(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                             uint64_t seed);
MFT_API mft_tensor *mft_randn(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                              uint64_t seed);

/* ------------------------------------------------------------------ lifetime */
/* Adds a reference; returns t (NULL passes through). */
MFT_API mft_tensor *mft_tensor_retain(mft_tensor *t);
/* Drops a reference; frees the header (and the storage when it was the last
 * user) at zero. NULL is a no-op. */
MFT_API void mft_tensor_release(mft_tensor *t);

/* ------------------------------------------------------------------ accessors
 * All accessors accept NULL and then return 0 / NULL / false. Pointers are
 * borrowed and valid while the tensor lives. */
MFT_API int mft_tensor_ndim(const mft_tensor *t);
MFT_API const int64_t *mft_tensor_sizes(const mft_tensor *t);
MFT_API const int64_t *mft_tensor_strides(const mft_tensor *t);
MFT_API int64_t mft_tensor_offset(const mft_tensor *t);   /* storage offset, elements */
MFT_API int64_t mft_tensor_numel(const mft_tensor *t);
MFT_API mft_dtype mft_tensor_dtype(const mft_tensor *t);
/* Pointer to logical element (0,...,0) of the view. */
MFT_API void *mft_tensor_data(const mft_tensor *t);
/* Number of elements the storage holds (not the view). */
MFT_API int64_t mft_tensor_storage_numel(const mft_tensor *t);
/* True when a and b share one storage (views of each other). */
MFT_API bool mft_tensor_shares_storage(const mft_tensor *a, const mft_tensor *b);
/* Storage version counter: bumped by every in-place write (copy_, set, fill). */
MFT_API int64_t mft_tensor_version(const mft_tensor *t);

/* Element at a logical index (ndim entries; ignored for rank 0), converted to
 * double. Out-of-range index or NULL: returns NaN and sets MFT_ERR_DIM/NULL. */
MFT_API double mft_tensor_get(const mft_tensor *t, const int64_t *index);
/* Stores value (converted to the dtype, integers truncated toward zero) at a
 * logical index. Errors: NULL, index out of range, stride-0 dim of size > 1
 * (writing through a broadcast). */
MFT_API mft_status mft_tensor_set(mft_tensor *t, const int64_t *index, double value);

/* ------------------------------------------------------------------ layout (docs/spec.md §2-3)
 * Predicates are cached on the tensor, so every query is O(1). */
/* fmt CONTIGUOUS or CHANNELS_LAST; anything else (or NULL t) is false. */
MFT_API bool mft_tensor_is_contiguous(const mft_tensor *t, mft_format fmt);
/* PyTorch's is_non_overlapping_and_dense. */
MFT_API bool mft_tensor_is_dense(const mft_tensor *t);
/* PyTorch's is_channels_last_strides (rank 4/5; rank 3 as an mft extension). */
MFT_API bool mft_tensor_strides_like_channels_last(const mft_tensor *t);
/* CHANNELS_LAST if strides_like_channels_last, else CONTIGUOUS. */
MFT_API mft_format mft_tensor_suggest_format(const mft_tensor *t);
/* The soft tag (CONTIGUOUS or CHANNELS_LAST) and where it came from. */
MFT_API mft_format mft_tensor_format(const mft_tensor *t);
MFT_API mft_origin mft_tensor_format_origin(const mft_tensor *t);
/* True when the strides' dim order (size-1 and stride-0 dims ignored) fits
 * fmt: the test behind the tag (docs/spec.md §3). Both formats fit => ambiguous. */
MFT_API bool mft_tensor_order_fits(const mft_tensor *t, mft_format fmt);

/* ------------------------------------------------------------------ views (never copy) */
/* dims: a permutation of 0..ndim-1 (negative entries allowed). */
MFT_API mft_tensor *mft_permute(const mft_tensor *t, const int *dims);
MFT_API mft_tensor *mft_transpose(const mft_tensor *t, int d0, int d1);
/* Elements [start, start+length) of dim; start may be negative. */
MFT_API mft_tensor *mft_narrow(const mft_tensor *t, int dim, int64_t start, int64_t length);
/* Removes dim, taking index i (negative counts from the end). */
MFT_API mft_tensor *mft_select(const mft_tensor *t, int dim, int64_t i);
/* Python slicing t[start:end:step] on dim: start/end clamp as in Python
 * (negative counts from the end), step > 0. */
MFT_API mft_tensor *mft_slice(const mft_tensor *t, int dim, int64_t start, int64_t end,
                              int64_t step);
/* New size-1 dim at position dim (-ndim-1 <= dim <= ndim). Its stride is
 * chosen as PyTorch's (size*stride of the dim after it, 1 at the end). */
MFT_API mft_tensor *mft_unsqueeze(const mft_tensor *t, int dim);
/* Removes dim if its size is 1; otherwise returns an unchanged view. */
MFT_API mft_tensor *mft_squeeze(const mft_tensor *t, int dim);
/* Broadcast view: dims that grow get stride 0 (new leading dims of size 1 get
 * PyTorch's stride: size*stride of the next dim); -1 keeps a size. Sizes
 * that do not match (and are not 1) are MFT_ERR_SHAPE. */
MFT_API mft_tensor *mft_expand(const mft_tensor *t, int ndim, const int64_t *sizes);
/* Any view of t's storage; must stay inside the storage (MFT_ERR_BOUNDS).
 * Overlapping views are allowed (they are never dense). Not differentiable:
 * records no autograd node (the result does not require grad). */
MFT_API mft_tensor *mft_as_strided(const mft_tensor *t, int ndim, const int64_t *sizes,
                                   const int64_t *strides, int64_t offset);
/* Same elements, new sizes (one entry may be -1), as a view: MFT_ERR_NOT_VIEWABLE
 * when the strides cannot express it (PyTorch's view rule). */
MFT_API mft_tensor *mft_view(const mft_tensor *t, int ndim, const int64_t *sizes);
/* mft_view when possible, else a contiguous copy (COPIES). */
MFT_API mft_tensor *mft_reshape(const mft_tensor *t, int ndim, const int64_t *sizes);
/* Merges dims start..end (inclusive) into one; a view when possible, else a
 * copy (as reshape). */
MFT_API mft_tensor *mft_flatten(const mft_tensor *t, int start, int end);

/* ------------------------------------------------------------------ conversions */
/* If t is already packed in fmt: no copy (t itself when its tag is fmt, else a
 * new header on the same storage tagged fmt). Otherwise a packed COPY in fmt.
 * fmt: CONTIGUOUS or CHANNELS_LAST (PRESERVE is MFT_ERR_FORMAT). */
MFT_API mft_tensor *mft_contiguous(const mft_tensor *t, mft_format fmt);
/* As mft_contiguous, but the no-copy test is "dense and dim order fits fmt"
 * (padding-free but possibly offset/sliced-batch layouts are kept).
 * PRESERVE returns t itself. */
MFT_API mft_tensor *mft_to_format(const mft_tensor *t, mft_format fmt);
/* Always COPIES. PRESERVE: same strides if t is dense, else dense strides in
 * t's dim order; the tag is kept. */
MFT_API mft_tensor *mft_clone(const mft_tensor *t, mft_format fmt);
/* Uninitialised / zero tensor with t's sizes and dtype, laid out as clone. */
MFT_API mft_tensor *mft_empty_like(const mft_tensor *t, mft_format fmt);
MFT_API mft_tensor *mft_zeros_like(const mft_tensor *t, mft_format fmt);
/* Copies src into dst (any layouts; src broadcast to dst's sizes; dtype
 * converted). dst keeps its strides and tag. Errors (dst untouched): sizes do
 * not broadcast, dst has a stride-0 dim of size > 1 or may overlap itself,
 * dst partially overlaps src, dst requires grad while the tape records
 * (MFT_ERR_UNSUPPORTED). Not differentiable in src. */
MFT_API mft_status mft_copy_(mft_tensor *dst, const mft_tensor *src);
/* Converted COPY in dtype with t's layout (as clone PRESERVE); t itself
 * (new reference) when the dtype already matches. */
MFT_API mft_tensor *mft_to_dtype(const mft_tensor *t, mft_dtype dtype);

/* ------------------------------------------------------------------ layout interop
 * minor_to_major (XLA): dims from fastest to slowest; rank-4 channels_last is
 * [1,3,2,0]. Letter strings name dims from slowest to fastest, with letters
 * N,C,L (rank 3; W is accepted for L), N,C,H,W (rank 4), N,C,D,H,W (rank 5):
 * "NCHW", "NHWC", "NWC", "NDHWC". Ranks other than 3-5 use no letters. */
/* Packed strides for sizes in the given physical order. */
MFT_API mft_status mft_strides_from_minor_to_major(int ndim, const int64_t *sizes,
                                                    const int *minor_to_major,
                                                    int64_t *strides_out);
/* Physical order of (sizes, strides): dims sorted by stride, fastest first;
 * ties (size-1 dims) go faster than the larger dim, then by logical order. */
MFT_API mft_status mft_minor_to_major_from_strides(int ndim, const int64_t *sizes,
                                                    const int64_t *strides, int *minor_to_major_out);
MFT_API mft_status mft_strides_from_letters(int ndim, const int64_t *sizes, const char *letters,
                                            int64_t *strides_out);
/* Writes the letter string (ndim + 1 bytes with the NUL) into buf. */
MFT_API mft_status mft_letters_from_strides(int ndim, const int64_t *sizes,
                                            const int64_t *strides, char *buf, size_t len);
/* Packed strides of a named format (CONTIGUOUS, or CHANNELS_LAST for rank 3-5). */
MFT_API mft_status mft_strides_for_format(int ndim, const int64_t *sizes, mft_format fmt,
                                          int64_t *strides_out);
/* Minimum number of elements a buffer needs for (sizes, strides) from offset 0:
 * 1 + sum((size-1)*stride), 0 when any size is 0. Errors: negative size or
 * stride, overflow. */
MFT_API mft_status mft_min_storage_numel(int ndim, const int64_t *sizes, const int64_t *strides,
                                         int64_t *numel_out);

/* ------------------------------------------------------------------ hashing and description */
/* XXH3-64 of dtype, sizes and the values in LOGICAL order: a tensor and its
 * channels_last copy hash equal. 0 for NULL (with MFT_ERR_NULL). */
MFT_API uint64_t mft_tensor_hash(const mft_tensor *t);
/* Human-readable analysis: sizes, strides, offset, dtype, tag + origin, every
 * predicate, physical order, and a map of the first storage slots to logical
 * coordinates. Writes at most len bytes (always NUL-terminated when len > 0)
 * and returns the length the full text needs (as snprintf). buf NULL only
 * measures, whatever len says. */
MFT_API size_t mft_tensor_describe(const mft_tensor *t, char *buf, size_t len);

/* ------------------------------------------------------------------ scopes
 * An autorelease pool per thread. While a scope is open, every tensor an mft
 * call returns is owned by the innermost scope and released by mft_scope_end,
 * unless mft_scope_keep hands that reference to the caller. Do not release a
 * scope-owned tensor yourself. Scopes nest. */
MFT_API mft_status mft_scope_begin(void);
/* Transfers t's scope-owned reference to the caller; returns t. t not owned by
 * the innermost scope: MFT_ERR_SCOPE, returns NULL. */
MFT_API mft_tensor *mft_scope_keep(mft_tensor *t);
/* Releases what the innermost scope owns. No open scope: MFT_ERR_SCOPE. */
MFT_API mft_status mft_scope_end(void);

/* ------------------------------------------------------------------ objects and memory */
/* Live tensor headers and storages in this process (always counted). */
MFT_API int64_t mft_live_tensors(void);
MFT_API int64_t mft_live_storages(void);

/* Every allocation the library makes goes through this hook. alloc returns
 * memory aligned to `align` (a power of two) or NULL. Passing NULL restores
 * the default (malloc-based, with the block cache below). Not thread-safe:
 * set it while no other thread is inside the library. */
typedef struct mft_allocator {
    void *(*alloc)(size_t size, size_t align, void *ctx);
    void (*free)(void *ptr, void *ctx);
    void *ctx;
} mft_allocator;
MFT_API void mft_set_allocator(const mft_allocator *a);

/* The default allocator keeps recently freed large blocks (>= 256 KiB) for
 * reuse, up to a byte limit: a training step frees and re-allocates the same
 * activation sizes every iteration, and a block handed back to the OS
 * (glibc unmaps or trims large blocks) costs a page fault per 4 KiB when it
 * is touched again - as much time as a whole NHWC pooling pass. A request
 * takes a cached block whose capacity is at least the size and at most 1/8
 * larger; the oldest block is evicted when the limit is reached. Default
 * limit 256 MiB, or MFT_ALLOC_CACHE_MB from the environment; 0 under
 * AddressSanitizer (so use-after-free of large blocks is still caught).
 * set_limit(0) disables the cache and frees what it holds; clear frees the
 * held blocks; cached_bytes is what it holds now. Thread-safe. */
MFT_API void mft_alloc_cache_set_limit(size_t bytes);
MFT_API void mft_alloc_cache_clear(void);
MFT_API size_t mft_alloc_cache_bytes(void);

/* ------------------------------------------------------------------ names
 * A tensor's name (a parameter's dotted path, "1.1.weight", set by nn/ when
 * a model is built) is shown by the DOT picture, the profiler and errors; a
 * copy of name is kept (NULL clears; at most 255 characters). Views and
 * copies do not inherit it. mft_tensor_name's pointer is borrowed.
 *
 * The module path names the modules whose forward runs on this thread
 * (Note [Module path] in tensor/naming.c): each module's forward pushes its
 * name in its parent ("1", "body") and kind ("BatchNorm2d(16)") and pops
 * after; mft_module_path() is the names joined by '.' ("1.4"; "" outside any
 * module), mft_module_kind() the innermost kind. Conversion events, profile
 * rows and tape nodes record it, and an error inside a module's forward is
 * prefixed with it by nn/ ("mft_module_forward: layer 2.body.1 ..."). A failed push (NULL or empty name,
 * more than 32 modules deep, a path over 511 characters) returns a status
 * and leaves the path unchanged; its pop is still required and does nothing.
 * Custom forward functions call these too. */
MFT_API mft_status mft_tensor_set_name(mft_tensor *t, const char *name);
MFT_API const char *mft_tensor_name(const mft_tensor *t);
MFT_API mft_status mft_module_path_push(const char *name, const char *kind);
MFT_API void mft_module_path_pop(void);
MFT_API const char *mft_module_path(void);
MFT_API const char *mft_module_kind(void);
MFT_API int mft_module_depth(void);

/* ------------------------------------------------------------------ threads */
/* Threads used by parallel kernels (<= 0 restores the default: OpenMP's, or
 * MFT_NUM_THREADS from the environment). Always 1 without OpenMP. */
MFT_API void mft_set_num_threads(int n);
MFT_API int mft_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
