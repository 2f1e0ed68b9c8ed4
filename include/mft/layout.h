/* mft/layout.h — the layout descriptor: plain strided and blocked layouts
 * (docs/spec.md §7, "Blocked layouts: the descriptor").
 *
 * A descriptor says where each logical element of a tensor lives. Sizes stay
 * logical (N, C, H, W: C is 17, never 32); a blocked dim is cut into an outer
 * index and up to MFT_MAX_BLOCKS inner blocks stored innermost, oneDNN's
 * blocking descriptor:
 *
 *   off(i) = Σ_d (i_d / B_d) · strides[d] + Σ_k ((i_{dim_k} / R_k) mod b_k) · P_k
 *     B_d = product of the block sizes on dim d (1 when the dim has none)
 *     R_k = product of the sizes of the blocks after k on the same dim
 *     P_k = product of the sizes of all blocks after k (block k's pitch)
 *
 * padded[d] is sizes[d] rounded up to a multiple of B_d; the lanes of the
 * padded grid outside the logical sizes are pad lanes, which hold zero in every
 * buffer mft writes (the pad-zero invariant). A plain strided layout is
 * nblocks == 0 (padded == sizes, strides are the usual strides).
 *
 * The descriptor is a value type with its vocabularies (oneDNN letter tags,
 * Ascend format names, XLA layout strings), and every tensor has one
 * (mft_tensor_layout); a tensor with blocks is a blocked tensor (the end of
 * this header). All functions return MFT_OK or a status with the thread-local error naming
 * the function and the values (for strings: the string and the position). */
#ifndef MFT_LAYOUT_H
#define MFT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum number of inner blocks of a descriptor. */
#define MFT_MAX_BLOCKS 4

typedef struct mft_layout {
    int ndim;                        /* 0 .. MFT_MAX_DIMS */
    int64_t sizes[MFT_MAX_DIMS];     /* logical sizes */
    int64_t padded[MFT_MAX_DIMS];    /* sizes rounded up to a multiple of B_d */
    int64_t strides[MFT_MAX_DIMS];   /* elements per step of each dim's OUTER index
                                        (i_d / B_d); the plain stride when unblocked */
    int nblocks;                     /* 0: plain strided layout */
    int block_dim[MFT_MAX_BLOCKS];   /* logical dim of each inner block, outermost first */
    int64_t block_size[MFT_MAX_BLOCKS]; /* >= 1 */
} mft_layout;

/* Packed layouts with names (rank 3-5: N,C,[D,]H,W logical order). */
typedef enum mft_layout_tag {
    MFT_LAYOUT_NCHW,    /* plain, channels first (any rank 0-8: row-major) */
    MFT_LAYOUT_NHWC,    /* plain, channels last (rank 3-5: NWC / NHWC / NDHWC) */
    MFT_LAYOUT_NCHW8C,  /* C blocked by 8: nCw8c / nChw8c / nCdhw8c */
    MFT_LAYOUT_NCHW16C, /* C blocked by 16: nCw16c / nChw16c / nCdhw16c (= NC1HWC0, C0 16) */
    MFT_LAYOUT_TAG_COUNT
} mft_layout_tag;

/* What a physical slot of a descriptor's storage holds. */
typedef enum mft_layout_slot_kind {
    MFT_SLOT_ELEMENT, /* a logical element */
    MFT_SLOT_PAD,     /* a pad lane of the padded grid (zero by the invariant) */
    MFT_SLOT_GAP,     /* outside the padded grid (a gap between strided rows) */
    MFT_SLOT_KIND_COUNT
} mft_layout_slot_kind;

/* A plain strided descriptor: sizes >= 0, strides >= 0 (0 = broadcast), rank
 * 0-8 (sizes/strides may be NULL for rank 0). MFT_ERR_RANK, MFT_ERR_SHAPE,
 * MFT_ERR_NULL. */
MFT_API mft_status mft_layout_plain(int ndim, const int64_t *sizes, const int64_t *strides,
                                    mft_layout *out);

/* The packed descriptor of a named layout for logical sizes (oneDNN's
 * dnnl_memory_desc_init_by_tag): C padded up to the block, outer strides
 * packed in the tag's order. MFT_ERR_RANK (blocked and NHWC tags need rank
 * 3-5), MFT_ERR_INVALID (unknown tag), MFT_ERR_OVERFLOW. */
MFT_API mft_status mft_layout_for_tag(int ndim, const int64_t *sizes, mft_layout_tag tag,
                                      mft_layout *out);

/* Checks a descriptor filled by hand: rank, sizes >= 0, strides >= 0, blocks
 * (dim in range, size >= 1, at most MFT_MAX_BLOCKS), padded[d] >= sizes[d]
 * and a multiple of B_d, storage size within int64. */
MFT_API mft_status mft_layout_check(const mft_layout *l);

/* Same physical placement of every logical element and pad lane: same sizes,
 * padded sizes and blocks, equal strides on every dim whose outer extent
 * padded[d] / B_d is above 1. False if either is NULL. */
MFT_API bool mft_layout_equal(const mft_layout *a, const mft_layout *b);

/* Storage offset (elements) of the logical element `index` (ndim entries),
 * by the formula above. Indices outside the logical sizes are refused
 * (MFT_ERR_DIM): pad lanes are not reachable as elements. */
MFT_API mft_status mft_layout_offset(const mft_layout *l, const int64_t *index, int64_t *off);

/* Elements of storage the layout spans from its origin: 0 if any size is 0,
 * else 1 + Σ_d (padded[d]/B_d - 1)·strides[d] + (Π b_k - 1). MFT_ERR_OVERFLOW
 * when that exceeds INT64_MAX. */
MFT_API mft_status mft_layout_storage_numel(const mft_layout *l, int64_t *numel);

/* What the physical slot `slot` (0 <= slot < storage_numel) holds; for an
 * element, its logical index goes to index_out (ndim entries; may be NULL).
 * Refused with MFT_ERR_UNSUPPORTED for descriptors whose slots overlap
 * (stride 0, or strides that interleave), where a slot has no single owner. */
MFT_API mft_status mft_layout_slot(const mft_layout *l, int64_t slot, int64_t *index_out,
                                   mft_layout_slot_kind *kind);
/* *is_pad = the slot is a pad lane (mft_layout_slot's MFT_SLOT_PAD). */
MFT_API mft_status mft_layout_is_pad(const mft_layout *l, int64_t slot, bool *is_pad);

/* ---------------------------------------------------------------- oneDNN
 * The packed descriptor of a oneDNN format tag. Letter grammar: the outer
 * part names every dim once, slowest first, as a lowercase letter (a = dim 0,
 * b = dim 1, ...) or, for a dim that has inner blocks, an uppercase one; then
 * the inner blocks, outermost first, each digits + the lowercase letter of its
 * dim ("aBcd16b", "ABcd4b16a4b"). Named aliases in oneDNN's role letters are
 * accepted too (data n,c,[d,]h,w: "nchw", "nhwc", "nChw16c", "nCdhw16c", "nc",
 * "x"; weights [g,]o,i,[d,]h,w: "oihw", "OIhw16i16o", "gOIhw16i16o",
 * "Ohwi16o", "OIhw4i16o4i"). The tag's rank must equal ndim.
 * MFT_ERR_INVALID with the string and the position of the fault. */
MFT_API mft_status mft_layout_from_onednn(int ndim, const int64_t *sizes, const char *tag,
                                          mft_layout *out);
/* Prints the canonical letter form ("aBcd16b") into buf (snprintf-style:
 * returns the length it needs without the terminator and writes at most len
 * bytes including it; buf may be NULL when len is 0). Returns -1 with an error
 * when no tag describes the layout (strides not packed in some dim order:
 * MFT_ERR_UNSUPPORTED). Ties between equal outer strides put the dim with outer
 * extent above 1 first, then by dim index. */
MFT_API int mft_layout_to_onednn(const mft_layout *l, char *buf, size_t len);

/* ---------------------------------------------------------------- Ascend
 * The packed descriptor of an Ascend (CANN) format, for an element of
 * elem_bytes bytes (1, 2, 4 or 8; mft has no 16-bit dtype, Ascend's usual
 * one). C0 = 32 for 1-byte elements, 16 otherwise; N0 = 16 (Graph Engine's
 * GetCubeSizeByDataType). Logical sizes and formats:
 *   "NC1HWC0"    (N,C,H,W):   outer N,C1,H,W, inner C0 on C;
 *   "NDC1HWC0"   (N,C,D,H,W): outer N,D,C1,H,W, inner C0 on C (D outside C1);
 *   "FRACTAL_Z"  (K,C,R,S) conv weight: outer C1,R,S,K1, inner N0 = 16 on K
 *                then C0 on C (physical (C1·R·S, K1, 16, C0));
 *   "FRACTAL_NZ" (...,M,N) matrices: outer ...,N1,M1, inner 16 on M then
 *                32 / elem_bytes on N (physical (..., N1, M1, 16, N0)).
 * MFT_ERR_INVALID (unknown name, elem_bytes), MFT_ERR_RANK. */
MFT_API mft_status mft_layout_from_ascend(int ndim, const int64_t *sizes, const char *format,
                                          size_t elem_bytes, mft_layout *out);
/* The Ascend name of a descriptor (for elements of elem_bytes bytes),
 * snprintf-style as mft_layout_to_onednn; -1 with MFT_ERR_UNSUPPORTED when it
 * is none of the four. */
MFT_API int mft_layout_to_ascend(const mft_layout *l, size_t elem_bytes, char *buf, size_t len);

/* ---------------------------------------------------------------- XLA
 * The packed descriptor of an XLA layout string "{m2m}" or "{m2m:T(..)(..)}":
 * minor_to_major (first = fastest dim) and tiles. A tile T(t1..tk) applies to
 * the k most minor physical dims: each is padded to a multiple of its tile
 * size and the tile indices move innermost (docs/tiled_layout.md of XLA), so
 * one tile level is one inner block per tiled dim. A second level applies
 * to the tile-internal dims of the first (T(8,128)(2,1)); it is accepted when
 * its sizes divide the first level's and the blocks fit MFT_MAX_BLOCKS, else
 * MFT_ERR_UNSUPPORTED, as are other layout attributes (memory space, element
 * size, '*' tile dims). XLA leaves pad values unspecified; mft's descriptor
 * implies zero pads. */
MFT_API mft_status mft_layout_from_xla(int ndim, const int64_t *sizes, const char *layout,
                                       mft_layout *out);
/* Prints "{1,0:T(2,2)}", snprintf-style; -1 with MFT_ERR_UNSUPPORTED when the
 * descriptor is not a packed XLA layout with at most two tile levels. */
MFT_API int mft_layout_to_xla(const mft_layout *l, char *buf, size_t len);

/* ---------------------------------------------------------------- blocked tensors
 * docs/spec.md §7. A tensor whose descriptor has blocks keeps its logical
 * sizes (mft_tensor_sizes answers C, not the padded C) and its format tag is
 * MFT_NCHW8C / MFT_NCHW16C (one block of 8 / 16 on dim 1, rank 3-5, outer
 * order N, C1, [D,] H, W) or MFT_BLOCKED (any other). Everything generic
 * takes it: the factories (fmt NCHW8C / NCHW16C), get / set, copy_ between
 * any two layouts, hash (equal to its plain copy's), to_format /
 * contiguous / clone / empty_like / to_dtype, narrow / slice / select at
 * block boundaries, checkpoints; ops run natively or convert it through a
 * counted fallback (cause "fallback"). mft_tensor_strides returns NULL for
 * it (outer strides read as element strides would address the wrong
 * elements); read the descriptor instead. A conv2d weight blocked by 16
 * (mft_layout_from_onednn(4, sizes, "OIhw16i16o" or "Ohwi16o", &l), then
 * mft_to_layout) is read in place by the nChw16c conv2d, trains in place
 * (its gradient comes back in its layout, pads zero) and makes the conv's
 * result nChw16c (docs/spec.md §7.10). */
typedef struct mft_tensor mft_tensor;
/* The tensor's descriptor (plain tensors: no blocks, strides as strides). */
MFT_API mft_status mft_tensor_layout(const mft_tensor *t, mft_layout *out);
/* True when the tensor's descriptor has blocks. */
MFT_API bool mft_tensor_is_blocked(const mft_tensor *t);
/* New tensor laid out exactly by l (strides as given, so gaps are kept),
 * storage zeroed: pad lanes are zero and the elements are 0. */
MFT_API mft_tensor *mft_empty_layout(const mft_layout *l, mft_dtype dtype);
/* COPY of t laid out by l (l's sizes must be t's: MFT_ERR_SHAPE); t itself
 * (a new reference) when t already has that layout. Differentiable: the
 * gradient comes back in t's layout. Counted as a conversion "to_layout". */
MFT_API mft_tensor *mft_to_layout(const mft_tensor *t, const mft_layout *l);
/* Wraps caller memory laid out by l, from element storage_offset, without
 * copying. nbytes must hold the layout's storage (mft_layout_storage_numel
 * elements after the offset: MFT_ERR_BOUNDS); the pad lanes must hold zero
 * (MFT_ERR_INVALID naming the first that does not: zero them, or copy the
 * data in with mft_copy_). deleter as in mft_from_blob: called when the last
 * tensor on the memory dies, never on failure. */
MFT_API mft_tensor *mft_from_blob_layout(void *data, size_t nbytes, const mft_layout *l,
                                         int64_t storage_offset, mft_dtype dtype,
                                         void (*deleter)(void *data, void *ctx), void *ctx);
/* MFT_OK when every pad lane of t holds zero (always for plain tensors);
 * else MFT_ERR_INVALID naming the first pad lane (its padded index) and its
 * value. */
MFT_API mft_status mft_tensor_check_padding(const mft_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
