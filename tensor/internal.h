/* tensor/internal.h — private structs and internal (mft__) functions of the
 * tensor layer: storage, tensor header, error setting, allocation, layout
 * refresh and tag inference, the elementwise iterator and parallel_for.
 * Nothing here is part of the public ABI. */
#ifndef MFT_TENSOR_INTERNAL_H
#define MFT_TENSOR_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/mft.h"

/* ------------------------------------------------------------------ errors */
/* Sets the thread-local error; fmt should start with the function name. */
void mft__set_error(mft_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* For a NULL tensor argument: keeps an earlier error (NULL propagation),
 * otherwise sets MFT_ERR_NULL "fn: argument 'what' is NULL". */
void mft__null_arg(const char *fn, const char *what);
/* Formats "[a,b,c]" into buf (always terminated); returns buf. */
char *mft__fmt_dims(char *buf, size_t len, int n, const int64_t *v);
char *mft__fmt_ints(char *buf, size_t len, int n, const int *v);
#define MFT__DIMS_BUF 160
/* A caller's text buffer being appended to (tensor/text.c): buf may be NULL
 * with len 0; pos counts the whole text, even past len (snprintf's
 * contract), so the caller learns the size it needs. */
typedef struct mft__text {
    char *buf;
    size_t len, pos;
} mft__text;
/* Appends the formatted text, cut at len - 1 and terminated. */
void mft__text_printf(mft__text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Bytes of the per-thread error message (tensor/status.c), terminator included. */
#define MFT__ERRBUF 512

/* ------------------------------------------------------------------ memory */
void *mft__alloc(size_t size, size_t align); /* through the allocator hook */
void mft__free(void *ptr);
/* Allocation that reports MFT_ERR_NOMEM "fn: out of memory allocating N bytes". */
void *mft__alloc_or_err(const char *fn, size_t size, size_t align);
extern atomic_llong mft__live_tensor_count;
extern atomic_llong mft__live_storage_count;

/* ------------------------------------------------------------------ storage */
typedef struct mft_storage {
    atomic_long refcount;
    void *data;
    size_t nbytes;
    void (*deleter)(void *data, void *ctx); /* NULL: owned by the allocator hook */
    void *deleter_ctx;
    bool owns_data;          /* data lives in the same allocation as this header */
    atomic_llong version;    /* bumped by in-place writes (docs/spec.md §5) */
} mft_storage;

mft_storage *mft__storage_new(const char *fn, size_t nbytes);
mft_storage *mft__storage_wrap(const char *fn, void *data, size_t nbytes,
                               void (*deleter)(void *, void *), void *ctx);
void mft__storage_retain(mft_storage *s);
void mft__storage_release(mft_storage *s);

/* ------------------------------------------------------------------ tensor
 * Note [Soft memory-format tag]
 * Strides alone cannot always say which format was meant: with C == 1, or all
 * spatial dims 1, or a broadcast C, both the NCHW and the NHWC orders fit. So
 * each tensor of rank 3-5 carries a tag (CONTIGUOUS or CHANNELS_LAST) and an
 * origin. The tag is recomputed by mft__tensor_set_tag_from whenever an
 * operation produces a header: unambiguous strides decide (INFERRED); if both
 * orders fit, the producer's tag is kept (INHERITED); if neither fits, the tag
 * is CONTIGUOUS (INFERRED). Factories and explicit conversions set it
 * (DECLARED). The tag never contradicts unambiguous strides, and kernels
 * always index with the real strides, so a wrong tag costs speed only. */
enum {
    MFT__F_CONTIG = 1u << 0,        /* is_contiguous(CONTIGUOUS) */
    MFT__F_CL_CONTIG = 1u << 1,     /* is_contiguous(CHANNELS_LAST) */
    MFT__F_DENSE = 1u << 2,         /* non-overlapping and dense */
    MFT__F_CL_STRIDES = 1u << 3,    /* strides_like_channels_last */
    MFT__F_FITS_CONTIG = 1u << 4,   /* dim order fits CONTIGUOUS */
    MFT__F_FITS_CL = 1u << 5,       /* dim order fits CHANNELS_LAST */
    MFT__F_BLOCKED = 1u << 6,       /* nblocks > 0: strides[] are outer strides */
    MFT__F_BLK_PACKED = 1u << 7,    /* blocked, one block of 8 / 16 on C, outer strides
                                       packed N, C1, [D,] H, W: is_contiguous(NCHW8C/16C) */
};

struct mft_tensor {
    atomic_long refcount;
    mft_storage *storage;
    int64_t offset; /* elements */
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t strides[MFT_MAX_DIMS];
    int64_t numel;
    mft_dtype dtype;
    mft_format tag;
    mft_origin origin;
    unsigned flags; /* MFT__F_* cached by mft__tensor_refresh */
    struct mft__ag_meta *autograd; /* NULL unless grad is required (autograd/) */
    struct mft__prov *prov;        /* provenance of the tag (tensor/rules.c), may be NULL */
    char *name;                    /* mft_tensor_set_name (tensor/naming.c), may be NULL */
    /* Note [Blocked tensors] (tensor/blocked.c): nblocks > 0 makes the
     * header a blocked layout (docs/spec.md §7): strides[] then hold the
     * OUTER strides (per step of i_d / B_d), padded[] the padded sizes,
     * offset the storage offset of element (0,...,0), which sits at the
     * origin of its blocks. Every plain-stride flag is clear and only
     * MFT__F_BLOCKED is set, so no strided kernel takes it for plain. */
    int nblocks;
    int block_dim[MFT_MAX_BLOCKS];
    int64_t block_size[MFT_MAX_BLOCKS];
    int64_t padded[MFT_MAX_DIMS];
};

/* Autograd state of a tensor, allocated on first need and freed (with its
 * grad) by mft_tensor_release. The producer link is weak: it is valid only
 * while tape `tape_id` is the thread's open tape (autograd/tape.c). */
typedef struct mft__ag_meta {
    bool requires_grad; /* marked leaf */
    mft_tensor *grad;   /* leaf .grad (owned reference) */
    uint64_t tape_id;   /* producer's tape (0: none) */
    int64_t node;       /* producer node index on that tape */
    int out;            /* output index on the producer */
    int64_t pending;    /* backward scratch: slot in the pending-leaf list, -1 */
} mft__ag_meta;

/* Note [Geometry bound]: the most bytes a tensor's element count may stand
 * for (size-0 dims counted as 1), broadcast views included. */
#define MFT__MAX_BYTES ((int64_t)1 << 59)
/* Validates dtype, ndim, sizes and (when not NULL) strides and offset against
 * Note [Geometry bound] (tensor/tensor.c): non-negative, and neither the
 * element count nor the span overflows int64 bytes, whatever numel is. Sets
 * an error naming fn. mft__check_geometry is the offset-0 case. */
mft_status mft__check_geometry_at(const char *fn, int ndim, const int64_t *sizes,
                                  const int64_t *strides, int64_t offset, mft_dtype dtype);
mft_status mft__check_geometry(const char *fn, int ndim, const int64_t *sizes,
                               const int64_t *strides, mft_dtype dtype);
/* The span part of the bound as a predicate (no error set; sizes, strides
 * and offset >= 0 required for true). */
bool mft__geometry_fits(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                        mft_dtype dtype);
mft_status mft__check_dtype(const char *fn, mft_dtype dt);
/* New header on storage (retains it). The geometry is checked against Note
 * [Geometry bound] and the storage's size (MFT_ERR_OVERFLOW / MFT_ERR_BOUNDS
 * naming fn; callers validate user input first, so this is the last line).
 * Flags are refreshed; the tag is set by
 * mft__tensor_set_tag_from(t, CONTIGUOUS, INFERRED) semantics with no source;
 * callers adjust it. Registered in the innermost scope. NULL on NOMEM. */
mft_tensor *mft__tensor_new(const char *fn, mft_storage *s, int64_t offset, int ndim,
                            const int64_t *sizes, const int64_t *strides, mft_dtype dtype);
/* The parts of mft__tensor_new: a header on s (retained) with the geometry
 * as given (no check, no flags, no tag; counted as live), and its
 * registration in the innermost scope (releases t and sets MFT_ERR_NOMEM
 * naming fn when that fails). */
mft_tensor *mft__tensor_header(const char *fn, mft_storage *s, int64_t offset, int ndim,
                               const int64_t *sizes, const int64_t *strides, mft_dtype dtype);
mft_tensor *mft__tensor_publish(const char *fn, mft_tensor *t);
/* Fresh tensor with new storage, packed in fmt (CONTIGUOUS/CHANNELS_LAST), tag
 * DECLARED. */
mft_tensor *mft__tensor_alloc(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                              mft_format fmt);
/* mft__tensor_alloc whose NCHW8C / NCHW16C storage is not zeroed: for a
 * kernel output written whole, pad lanes (as zeros) included. */
mft_tensor *mft__tensor_alloc_unzeroed(const char *fn, int ndim, const int64_t *sizes,
                                       mft_dtype dtype, mft_format fmt);
/* Fresh tensor with new storage and the given (non-overlapping) strides. */
mft_tensor *mft__tensor_alloc_strided(const char *fn, int ndim, const int64_t *sizes,
                                      const int64_t *strides, mft_dtype dtype);
/* Recomputes the cached flags from sizes and strides (and numel). */
void mft__tensor_refresh(mft_tensor *t);
/* Sets the tag from strides; when both formats fit, uses source_tag with
 * origin INHERITED (docs/spec.md §3). */
void mft__tensor_set_tag_from(mft_tensor *t, mft_format source_tag);
void mft__tensor_declare(mft_tensor *t, mft_format fmt);
static inline size_t mft__elem_size(mft_dtype dt) {
    static const size_t sizes[MFT_DTYPE_COUNT] = {[MFT_F32] = 4, [MFT_F64] = 8, [MFT_I32] = 4,
                                                  [MFT_I64] = 8, [MFT_U8] = 1};
    return (unsigned)dt < MFT_DTYPE_COUNT ? sizes[dt] : 0;
}
static inline char *mft__tensor_ptr(const mft_tensor *t) {
    return (char *)t->storage->data + (size_t)t->offset * mft__elem_size(t->dtype);
}

/* Layout helpers on raw arrays (unit-tested directly). */
bool mft__layout_is_contiguous(int ndim, const int64_t *sizes, const int64_t *strides,
                               int64_t numel);
bool mft__layout_is_cl_contiguous(int ndim, const int64_t *sizes, const int64_t *strides);
bool mft__layout_is_dense(int ndim, const int64_t *sizes, const int64_t *strides);
bool mft__layout_strides_like_cl(int ndim, const int64_t *sizes, const int64_t *strides);
bool mft__layout_order_fits(int ndim, const int64_t *sizes, const int64_t *strides,
                            mft_format fmt);
/* Physical dim order of a format, slowest first (rank 3..5 for CHANNELS_LAST). */
void mft__format_order(int ndim, mft_format fmt, int *order);
/* Packed strides of an order given slowest first (size-0 dims count as 1
 * unless zero_sizes_count). Returns false on overflow. */
bool mft__packed_strides(int ndim, const int64_t *sizes, const int *order_slow_first,
                         int64_t *strides, bool zero_sizes_count);
/* Packed strides of CONTIGUOUS or CHANNELS_LAST exactly as PyTorch's. */
void mft__format_strides(int ndim, const int64_t *sizes, mft_format fmt, int64_t *strides);
/* Dense strides keeping the dim order of (sizes, strides) (PyTorch's
 * infer_dense_strides). */
void mft__infer_dense_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                              int64_t *out);
/* Normalises a possibly negative dim for rank ndim (+extra allowed positions),
 * setting MFT_ERR_DIM naming fn on failure; returns -1 then. */
int mft__wrap_dim(const char *fn, int dim, int ndim_for_range);

/* Note [Integer scalars] (tensor/dtype.c): MFT_ERR_OVERFLOW naming fn and
 * what ("scalar", "lo", "fill value", ...) unless v, truncated, fits the
 * integer dtype dt (always OK for floating dt). */
mft_status mft__check_int_value(const char *fn, const char *what, mft_dtype dt, double v);
/* Writes `value` into an element of dtype at p (integers saturate). */
void mft__store(mft_dtype dt, void *p, double value);
double mft__load(mft_dtype dt, const void *p);

/* ------------------------------------------------------------------ parallel */
typedef void (*mft__range_fn)(void *ctx, int64_t begin, int64_t end);
/* Splits [begin, end) into one chunk per thread (chunks of at least grain),
 * in order; serial below the grain, inside a parallel region, or without
 * OpenMP. */
void mft__parallel_for(int64_t begin, int64_t end, int64_t grain, mft__range_fn fn, void *ctx);
/* The same items, handed out in chunks of `chunk` to whichever thread is
 * free (a shared counter), for compute-bound work whose items are
 * independent: a thread on a slower core takes fewer. fn must not depend on
 * which range it gets (no partials combined per range); then the results do
 * not depend on the schedule or the thread count. */
void mft__parallel_for_dynamic(int64_t begin, int64_t end, int64_t chunk, mft__range_fn fn,
                               void *ctx);

/* ------------------------------------------------------------------ iterator
 * Note [Elementwise iteration]
 * An iteration over up to MFT__ITER_MAX_OPERANDS operands (outputs first), all
 * broadcast to one shape. Steps, each its own function: broadcast shape ->
 * per-operand byte strides (0 on broadcast dims) -> reorder dims fastest first
 * by the operands' strides (PyTorch's rules: operands in order, broadcast dims
 * skipped, first deciding operand wins, ties by larger size outward) ->
 * coalesce adjacent dims. Loops see a 2-D view: n0 elements along dim 0 with
 * strides[k], n1 rows with strides[nops + k]. */
#define MFT__ITER_MAX_OPERANDS 8
typedef struct mft__iter {
    int nops;
    int ndim;                               /* after reorder/coalesce; dim 0 fastest */
    int64_t shape[MFT_MAX_DIMS];
    int64_t strides[MFT__ITER_MAX_OPERANDS][MFT_MAX_DIMS]; /* bytes */
    char *data[MFT__ITER_MAX_OPERANDS];
    int64_t numel;
} mft__iter;

typedef void (*mft__loop2d)(void *ctx, char **data, const int64_t *strides, int64_t n0,
                            int64_t n1);

/* Broadcast shape of operands (right-aligned). Sets MFT_ERR_SHAPE naming fn. */
mft_status mft__broadcast_shape(const char *fn, int nops, const int *ndims,
                                const int64_t *const *sizes, int *out_ndim, int64_t *out);
/* perm[i] = logical dim placed at iteration position i (0 = fastest), from
 * the strides of the operands: strides[k * MFT_MAX_DIMS + d] for operand k,
 * logical dim d. */
void mft__iter_reorder(int nops, int ndim, const int64_t *shape, const int64_t *strides,
                       int *perm);
/* Merges adjacent iteration dims where every operand allows it; in place. */
void mft__iter_coalesce(mft__iter *it);
/* Builds an iteration over tensors (all already of the broadcast shape or
 * broadcastable to `shape`). */
mft_status mft__iter_build(const char *fn, mft__iter *it, int nops, mft_tensor *const *ops,
                           int ndim, const int64_t *shape);
/* Runs loop serially over linear elements [begin, end) of the iteration. */
void mft__iter_run_range(const mft__iter *it, mft__loop2d loop, void *ctx, int64_t begin,
                         int64_t end);
/* Runs loop over the iteration, parallel above grain elements. */
void mft__iter_run(const mft__iter *it, mft__loop2d loop, void *ctx, int64_t grain);

/* ------------------------------------------------------------------ views
 * tensor/view.c: the views without autograd. Each makes the view (NULL with
 * the error naming fn on failure) and, when note is not NULL, says what it
 * did: the kind and the normalised arguments the public op records
 * (ops/shape/views.c). */
typedef enum mft__view_kind {
    MFT__VIEW_PERMUTE,
    MFT__VIEW_TRANSPOSE,
    MFT__VIEW_NARROW,
    MFT__VIEW_SELECT,
    MFT__VIEW_SLICE,
    MFT__VIEW_RESHAPE, /* unsqueeze, squeeze, view, reshape, flatten: c = 1 when copied */
    MFT__VIEW_EXPAND
} mft__view_kind;
typedef struct mft__view_note {
    mft__view_kind kind;
    int dim, d1;              /* wrapped dims (narrow, select, slice: dim; transpose: both) */
    int dims[MFT_MAX_DIMS];   /* permute, wrapped */
    int64_t a, b, c;          /* narrow: start, length; select: index; slice: start, end, step */
} mft__view_note;
mft_tensor *mft__view_permute(const char *fn, const mft_tensor *t, const int *dims,
                              mft__view_note *note);
mft_tensor *mft__view_transpose(const char *fn, const mft_tensor *t, int d0, int d1,
                                mft__view_note *note);
mft_tensor *mft__view_narrow(const char *fn, const mft_tensor *t, int dim, int64_t start,
                             int64_t length, mft__view_note *note);
mft_tensor *mft__view_select(const char *fn, const mft_tensor *t, int dim, int64_t i,
                             mft__view_note *note);
mft_tensor *mft__view_slice(const char *fn, const mft_tensor *t, int dim, int64_t start,
                            int64_t end, int64_t step, mft__view_note *note);
mft_tensor *mft__view_unsqueeze(const char *fn, const mft_tensor *t, int dim,
                                mft__view_note *note);
mft_tensor *mft__view_squeeze(const char *fn, const mft_tensor *t, int dim, mft__view_note *note);
mft_tensor *mft__view_expand(const char *fn, const mft_tensor *t, int ndim, const int64_t *sizes,
                             mft__view_note *note);
/* view (allow_copy false) and reshape / flatten (true: a packed copy when no
 * view exists). */
mft_tensor *mft__view_reshape(const char *fn, const mft_tensor *t, int ndim, const int64_t *sizes,
                              bool allow_copy, mft__view_note *note);
bool mft__view_flatten_sizes(const char *fn, const mft_tensor *t, int start, int end, int *ndim,
                             int64_t *sizes);

/* ------------------------------------------------------------------ blocked tensors
 * tensor/blocked.c, Note [Blocked tensors]. */
static inline bool mft__is_blocked(const mft_tensor *t) { return t && t->nblocks > 0; }
/* t's descriptor (plain: strides as the outer strides, no blocks). */
void mft__layout_of(const mft_tensor *t, mft_layout *l);
/* New header on s for a descriptor (plain descriptors: mft__tensor_new);
 * checked (layout, Note [Geometry bound] on the logical sizes, storage
 * reach). Tag inferred from the descriptor (mft__layout_format). */
mft_tensor *mft__tensor_new_layout(const char *fn, mft_storage *s, int64_t offset,
                                   const mft_layout *l, mft_dtype dtype);
/* Fresh zeroed storage (pad lanes zero) holding the packed descriptor l. */
mft_tensor *mft__tensor_alloc_layout(const char *fn, const mft_layout *l, mft_dtype dtype);
/* The same, not zeroed when zero is false: for a kernel's output that the
 * kernel writes whole, pad lanes (as zeros) included. */
mft_tensor *mft__tensor_alloc_layout_ex(const char *fn, const mft_layout *l, mft_dtype dtype,
                                        bool zero);
/* The format a descriptor is: CONTIGUOUS / CHANNELS_LAST for plain ones
 * (by its strides), NCHW8C / NCHW16C for one block of 8 / 16 on dim 1 of a
 * rank 3-5 layout whose outer order fits N, C1, [D,] H, W, else BLOCKED. */
mft_format mft__layout_format(const mft_layout *l);
/* The packed descriptor of a blocked format for sizes (MFT_ERR_RANK, ...
 * naming fn); plain formats give their packed strides. */
/* out = l's blocks and dim order (outer strides descending, ties by dim),
 * packed from the inner tile outwards; out may be l. */
void mft__layout_packed_like(const mft_layout *l, mft_layout *out);
mft_status mft__layout_for_format(const char *fn, int ndim, const int64_t *sizes, mft_format fmt,
                                  mft_layout *out);
static inline bool mft__format_is_blocked(mft_format f) {
    return f == MFT_NCHW8C || f == MFT_NCHW16C || f == MFT_BLOCKED;
}
/* Element offset of a logical index (in range) from the view's element 0. */
int64_t mft__blk_offset(const mft_tensor *t, const int64_t *index);
/* Note [Plain pieces]: a blocked tensor whose dims carry at most one block
 * each is the union of at most 2^k plain strided boxes (per blocked dim: the
 * full blocks as two dims (C / b, b), and the tail block C % b as one dim).
 * mft__blk_foreach cuts n operands of one logical shape (plain ones may be
 * broadcast views; blocked ones must agree on their blocking) into those
 * boxes and calls fn with n plain headers of equal sizes, one per operand,
 * each over its operand's storage (borrowed for the call; never registered
 * in a scope). MFT_ERR_UNSUPPORTED (no message set) when the operands cannot
 * be cut that way (blockings differ, a dim with two blocks, rank past
 * MFT_MAX_DIMS); MFT_ERR_NOMEM naming fn. */
typedef void (*mft__blk_piece_fn)(void *ctx, mft_tensor *const *pieces);
/* Whether mft__blk_foreach can cut these operands (same rank, one common
 * blocking, no dim with two blocks, rank after the cut within bounds). */
bool mft__blk_can_cut(int n, const mft_tensor *const *ops);
mft_status mft__blk_foreach(const char *fn, int n, const mft_tensor *const *ops,
                            mft__blk_piece_fn cb, void *ctx);
/* Copies src into dst when either is blocked (sizes equal or src
 * broadcast; validated): plain pieces, else a plain temporary, else an
 * element loop. Pad lanes of dst are not written. */
void mft__blk_copy(mft_tensor *dst, const mft_tensor *src);
/* Writes value into every element (not the pad lanes) of a blocked t. */
void mft__blk_fill(mft_tensor *t, double value);
/* MFT_ERR_FORMAT "fn: <what> of a blocked tensor (...)" for a function that
 * cannot take one. Returns the status. */
mft_status mft__blk_refuse(const char *fn, const mft_tensor *t, const char *what);

/* ------------------------------------------------------------------ copy */
/* A destination must not write one location twice: no stride-0 dim of size
 * > 1, no (possible) internal overlap. Sets MFT_ERR_OVERLAP naming fn. */
mft_status mft__check_writable(const char *fn, const mft_tensor *dst);
/* dst and src on one storage must be identical views or provably disjoint
 * (byte ranges or interleaving). Sets MFT_ERR_OVERLAP naming fn. */
mft_status mft__check_overlap(const char *fn, const mft_tensor *dst, const mft_tensor *src);
/* True when the byte ranges of two non-empty tensors intersect (in memory,
 * whatever storage objects they hang on; interleaving is not examined). */
bool mft__tensor_overlaps(const mft_tensor *a, const mft_tensor *b);
/* The checked copy without autograd (mft_copy_ is it plus the tape's
 * in-place check, ops/shape/copy.c): src must broadcast to dst's sizes
 * (MFT_ERR_SHAPE), then dst must be writable and not partially overlap src
 * (MFT_ERR_OVERLAP); errors name fn. */
mft_status mft__copy_check_sizes(const char *fn, const mft_tensor *dst, const mft_tensor *src);
mft_status mft__copy_into(const char *fn, mft_tensor *dst, const mft_tensor *src);
/* The conversions without autograd, errors naming fn (the public
 * mft_contiguous / mft_to_format / mft_clone / mft_to_dtype record their
 * node around these, ops/shape/copy.c). */
mft_tensor *mft__contiguous(const char *fn, const mft_tensor *t, mft_format fmt);
mft_tensor *mft__to_format(const char *fn, const mft_tensor *t, mft_format fmt);
mft_tensor *mft__clone(const char *fn, const mft_tensor *t, mft_format fmt);
mft_tensor *mft__to_dtype(const char *fn, const mft_tensor *t, mft_dtype dtype);
/* t itself when it already has layout l, else a copy laid out by l (a
 * conversion noted as "to_layout"). */
mft_tensor *mft__to_layout(const char *fn, const mft_tensor *t, const mft_layout *l);
/* Copies src into dst (validated: dst of the broadcast shape, no overlap). */
void mft__copy_kernel(mft_tensor *dst, const mft_tensor *src);

/* ------------------------------------------------------------------ thread exit
 * tensor/thread_exit.c: hooks run when a thread exits (in slot order) for
 * per-thread heap state left open: the tape, the scopes, the profiler's
 * event buffer. Arm while the
 * state exists (idempotent, cheap), disarm when it is gone. */
typedef enum mft__texit_slot {
    MFT__TEXIT_TAPE,
    MFT__TEXIT_SCOPES,
    MFT__TEXIT_PROFILE,
    MFT__TEXIT_COUNT
} mft__texit_slot;
void mft__thread_exit_arm(mft__texit_slot slot, void (*fn)(void));
void mft__thread_exit_disarm(mft__texit_slot slot);

/* ------------------------------------------------------------------ scopes */
mft_status mft__scope_register(mft_tensor *t);
/* Returns t as a new reference owned like any other result (registered in the
 * innermost scope); NULL on NOMEM. */
mft_tensor *mft__retain_result(const char *fn, mft_tensor *t);
/* Internal temporaries made through public calls must not be owned by the
 * user's scope: bracket them with suspend/resume (nesting allowed). */
void mft__scope_suspend(void);
void mft__scope_resume(void);
/* Re-labels the current error message with fn ("mft_x: ..." -> "fn: ..."), for
 * errors raised by a helper called on fn's behalf. Returns the status. */
mft_status mft__relabel_error(const char *fn);
/* Writes value into every element of t (no checks). */
void mft__fill(mft_tensor *t, double value);

/* ------------------------------------------------------------------ events
 * tensor/events.c; Note [Conversions and their causes] in mft/profile.h. */
#include "mft/dispatch.h"
#include "mft/profile.h"
/* The cause given to conversions noted with mft__note_conversion on this
 * thread (mft_contiguous / mft_to_format copies): EXPLICIT unless an
 * internal caller pushed another; op (may be NULL: keep the caller's)
 * names the op responsible. Push/pop nest. */
void mft__cause_push(mft_conversion_cause c, const char *op);
void mft__cause_pop(void);
/* Notes one conversion: src was copied into dst in a new layout. */
void mft__note_conversion(const char *op, const mft_tensor *src, const mft_tensor *dst);
void mft__note_conversion_as(mft_conversion_cause c, const char *op, const mft_tensor *src,
                             const mft_tensor *dst);
/* This thread's call site (MFT_AT); file NULL when none. */
void mft__site_get(const char **file, int *line);

/* A short name for t's physical layout: "NCHW"/"NHWC" (rank 4),
 * "NCDHW"/"NDHWC" (5), "NCL"/"NLC" (3) when packed in one of them (the tag
 * decides when both fit), else "contiguous", "strided" or "broadcast". */
const char *mft__layout_label(const mft_tensor *t);

/* The last events of this thread, for tools that look back over a stretch
 * of work (the tape's DOT picture): every conversion and every kernel run
 * gets the next sequence number of its kind; the newest
 * MFT__EVENT_RING are kept. Sequence numbers start at 1 and never reset. */
#define MFT__EVENT_RING 64
typedef struct mft__conv_rec {
    mft_conversion_cause cause;
    const char *op;          /* the op responsible (static string) */
    const char *from, *to;   /* mft__layout_label of source and copy */
    int64_t bytes;           /* bytes written */
    const char *site_file;   /* call site (MFT_AT), NULL when none */
    int site_line;
} mft__conv_rec;
typedef struct mft__kernel_rec {
    const char *op, *kernel; /* static strings (user kernel names live in the table) */
    const char *in, *out;    /* layout labels of operand 0 and result 0 */
} mft__kernel_rec;
/* Sequence number of the newest event of the kind (0 before the first). */
int64_t mft__conv_seq(void);
int64_t mft__kernel_seq(void);
/* Copies event seq into *r; false when seq was never issued or has left
 * the ring. */
bool mft__conv_get(int64_t seq, mft__conv_rec *r);
bool mft__kernel_get(int64_t seq, mft__kernel_rec *r);

/* ------------------------------------------------------------ kernel events
 * Every kernel run (dispatch, elementwise engine, reductions, optimizer
 * updates, copies) reports itself:
 *     uint64_t t0 = mft__kernel_begin();
 *     ... run ...
 *     mft__kernel_end(t0, &(mft__kernel_info){...});
 * mft__kernel_begin reads the clock only when the profiler records or
 * MFT_VERBOSE is on (else returns 0); mft__kernel_end updates the kernel
 * ring while a tape records (the DOT picture reads it) and hands the event
 * to the profiler and the verbose log when they are on. Off, the pair is
 * inline: a few loads and no call (bench/bench_profile.c). */
typedef struct mft__kernel_info {
    const char *op, *kernel;
    mft_format asked, kernel_format; /* MFT_FORMAT_COUNT: not a format op */
    mft_dtype dtype;
    int nin, nout;
    const mft_tensor *const *in;
    const mft_tensor *const *out;
    int conversions; /* fallback/operand conversions done inside */
    bool user;       /* a user-registered kernel */
} mft__kernel_info;
extern _Thread_local bool mft__tl_profiling; /* this thread's profiler records */
/* True while this thread has a tape open, whatever the grad mode (set by
 * autograd/tape.c): the kernel ring then feeds the tape's DOT picture. */
extern _Thread_local bool mft__tl_tape_open;
/* The MFT_VERBOSE level, -1 until first read (tensor/events.c). Atomic: any
 * thread may set it or read the environment first; relaxed loads cost what
 * plain ones do. */
extern atomic_int mft__g_verbose;
/* Set only by bench/bench_profile.c to measure what the hooks cost when
 * everything is off (it then compares runs with and without them). */
extern bool mft__hooks_bypass;
uint64_t mft__now_ns(void);
static inline bool mft__verbose_on(void) {
    const int v = atomic_load_explicit(&mft__g_verbose, memory_order_relaxed);
    return v > 0 || (v < 0 && mft_verbose() > 0);
}
static inline uint64_t mft__kernel_begin(void) {
    if (mft__hooks_bypass) return 0;
    return (mft__tl_profiling || mft__verbose_on()) ? mft__now_ns() : 0;
}
void mft__kernel_end_slow(uint64_t t0, const mft__kernel_info *k);
static inline void mft__kernel_end(uint64_t t0, const mft__kernel_info *k) {
    if (t0 || (mft__tl_tape_open && !mft__hooks_bypass)) mft__kernel_end_slow(t0, k);
}
/* One verbose log line through the log callback (tensor/events.c). */
void mft__verbose_line(const char *line);

/* Where kernel and conversion events go while this thread's profiler
 * records: the profiler (profile/, a layer above) installs its sink when it
 * starts; the core calls it, never the profiler directly. */
typedef struct mft__profile_sink {
    void (*conversion)(const mft__conv_rec *r);
    void (*kernel)(uint64_t t0, uint64_t t1, const mft__kernel_info *k, int64_t bytes);
} mft__profile_sink;
void mft__profile_set_sink(const mft__profile_sink *sink);

/* ------------------------------------------------------------------ rules
 * tensor/rules.c: the format rules as data (mft/rules.h, rows in
 * tensor/rules.def) and the provenance of every tensor's tag. */
#include "mft/rules.h"
typedef enum mft__rule_id {
#define R(ID, ...) MFT__RULE_##ID,
#include "rules.def"
#undef R
    MFT__RULE_COUNT
} mft__rule_id;
extern const mft_format_rule mft__rules[MFT__RULE_COUNT];
/* The row of docs/deviations.md about blocked layouts. */
#define MFT__DEVIATION_BLOCKED 31

/* tensor/registry.c: the registry row named name[0..n) (an "mft_" prefix
 * is skipped); NULL when there is none. */
#include "mft/registry.h"
const mft_op_info *mft__op_find_n(const char *name, size_t n);

/* What a row decided for one op call. */
typedef struct mft__decision {
    mft__rule_id rule;
    const char *op;          /* static op name for the provenance ("conv2d") */
    mft_format tag;          /* the tag the rule gives (before docs/spec.md §3 reads the strides) */
    int operand;             /* the operand that decided, -1 */
    mft_format operand_tag;  /* its tag */
    const mft_tensor *from;  /* that operand (borrowed; must outlive mft__rule_apply) */
    bool unbatched;
} mft__decision;

#define MFT__DECIDE_UNBATCHED 1u /* the op's input has no N dim: CONTIGUOUS (pooling) */
/* Applies row `rule` to the op's tensor operands (in the row's order; NULL
 * entries are skipped); declared is the requested format for DECLARED rows. */
mft__decision mft__rule_decide(mft__rule_id rule, const char *op, int n,
                               const mft_tensor *const *operands, mft_format declared,
                               unsigned flags);
/* Gives a fresh result t its tag from the decision (docs/spec.md §3: unambiguous
 * strides decide, else the row's ambiguity clause) and records its
 * provenance. DESTINATION and IDENTITY rows leave t alone. */
void mft__rule_apply(mft_tensor *t, const mft__decision *d);
/* Records d as t's provenance with the tag t already has (for a caller
 * that sets the tag itself, mft_from_dlpack's hint); NULL t is a no-op. */
void mft__rule_record(mft_tensor *t, const mft__decision *d);
/* Shortcut: decide + apply for a one-operand row. */
void mft__rule_apply1(mft_tensor *t, mft__rule_id rule, const char *op, const mft_tensor *x);
/* The format a gradient must have for an input of this tag and rank (docs/spec.md
 * §5, the rows' INPUT_FORMAT backward clause). */
mft_format mft__rule_grad_format(mft_format input_tag, int ndim);
/* Releases t's provenance (mft_tensor_release). */
void mft__prov_release(struct mft__prov *p);

#endif
