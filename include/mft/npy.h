/* mft/npy.h — NumPy .npy files: one tensor saved to and loaded from the
 * format np.save / np.load use (docs/spec.md §8.2, docs/interop.md).
 *
 * A .npy file holds a shape, a dtype and the bytes in C order (or Fortran
 * order); it has no strides and no room for layout metadata (NumPy refuses a
 * header with any key but descr, fortran_order and shape). So the layout
 * crosses as the array's own shape: by default a tensor is written as it lies
 * in memory — a channels_last (N,C,H,W) tensor becomes the (N,H,W,C) array,
 * with no copy — and a loader told the file is that physical array
 * (as = MFT_CHANNELS_LAST) returns the logical NCHW view of it, tagged
 * CHANNELS_LAST, again without a copy after the read.
 *
 * Guarantees: a save never leaves a half-written file under the real name
 * (written to "<path>.tmp", then renamed); a load verifies the whole header
 * and the file's length before it allocates, and a refused file changes
 * nothing. */
#ifndef MFT_NPY_H
#define MFT_NPY_H

#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of mft_save_npy (or-ed). */
/* Default: the bytes as they lie in memory, the file's shape being the
 * tensor's dims in memory order, slowest first (a CHANNELS_LAST tensor of
 * rank 4 / 3 / 5 gives (N,H,W,C) / (N,L,C) / (N,D,H,W,C)); a column-major
 * tensor (a transposed matrix) keeps its logical shape with fortran_order
 * True, as np.save writes such an array. A dense tensor is written with no
 * copy; a non-dense view (gaps, broadcast) is packed in its tag first. NCHW8C / NCHW16C tensors give their blocks as the array
 * (N,C1,[D,]H,W,C0), pad lanes (zero) included. */
#define MFT_NPY_PHYSICAL 0u
/* The logical (N,C,H,W) array in C order: what PyTorch's torch.from_numpy
 * expects. A copy unless the tensor is already packed CONTIGUOUS. */
#define MFT_NPY_LOGICAL 1u
/* Write format version 2.0 (4-byte header length) even when 1.0 would do;
 * mft's headers never need it (NumPy needs 2.0 past 65535 header bytes), so
 * this exists to test readers of 2.0 files. */
#define MFT_NPY_VERSION2 2u

/* NumPy's limit on the header length it reads without an explicit opt-in
 * (np.load's max_header_size, numpy/lib/format.py _MAX_HEADER_SIZE); mft
 * refuses longer headers. */
#define MFT_NPY_MAX_HEADER 10000

/* Saves t (any dtype, rank 0..MFT_MAX_DIMS, any layout) as a .npy file of
 * format version 1.0 (2.0 with MFT_NPY_VERSION2): the header NumPy writes for
 * the same array (keys sorted, padded with spaces so the data starts at a
 * multiple of 64 bytes), descr '<f4' '<f8' '<i4' '<i8' '|u1' ('>' on a
 * big-endian host: the bytes are written in host order, never swapped), then
 * the data as flags say (MFT_NPY_PHYSICAL, the default, or MFT_NPY_LOGICAL).
 * The file is written to "<path>.tmp" and renamed to path when complete
 * (replacing a regular file there).
 * Errors: MFT_ERR_NULL (path, t), MFT_ERR_INVALID (unknown flag bits),
 * MFT_ERR_FORMAT (MFT_NPY_PHYSICAL of a blocked tensor other than NCHW8C /
 * NCHW16C: use MFT_NPY_LOGICAL), MFT_ERR_IO (path or its .tmp exists and is
 * not a regular file, open / write / rename failed: the .tmp file is
 * removed, path is untouched), MFT_ERR_NOMEM. t is borrowed and not
 * modified. */
MFT_API mft_status mft_save_npy(const char *path, const mft_tensor *t, unsigned flags);

/* Loads a .npy file of format version 1.0, 2.0 or 3.0 whose descr is one of
 * '<f4' '<f8' '<i4' '<i8' (F32 F64 I32 I64; '>' big-endian too, byte-swapped
 * after the read) or '|u1' '<u1' '>u1' (U8), of rank 0..MFT_MAX_DIMS. The data
 * is read once into the new tensor's storage; nothing is copied after that.
 *   as MFT_CONTIGUOUS or MFT_PRESERVE: the array as it is: sizes = the file's
 *     shape, C-order strides, or reversed (column-major) strides for a
 *     fortran_order file; the tag is inferred from those strides.
 *   as MFT_CHANNELS_LAST: the file holds the physical array (N,H,W,C) (rank
 *     4; rank 3 (N,L,C) and rank 5 (N,D,H,W,C) likewise); the result is the
 *     logical (N,C,H,W) view of it, strides (H*W*C, 1, W*C, C), tagged
 *     CHANNELS_LAST (DECLARED). The file must be C order and of rank 3-5.
 * Returns a new reference (owned by the innermost open scope, if any), or
 * NULL with the error naming mft_load_npy, the path and the problem:
 * MFT_ERR_NULL (path), MFT_ERR_FORMAT (as is a blocked format, or
 * CHANNELS_LAST with a rank outside 3-5 or a fortran_order file), MFT_ERR_IO
 * (open / read failed, not a regular file), MFT_ERR_CORRUPT (bad magic,
 * header length past the end of the file, header not a dict literal with
 * exactly the keys descr, fortran_order and shape, a shape entry that is not
 * a non-negative integer, an element count or byte size overflowing int64 or
 * beyond the geometry bound of docs/spec.md §1.1, data
 * shorter or longer than shape and descr say), MFT_ERR_UNSUPPORTED (format
 * version other than 1-3, a header longer than MFT_NPY_MAX_HEADER bytes, a
 * descr mft has no dtype for — object, structured, bool, float16, ... —
 * named in the message, rank above MFT_MAX_DIMS), MFT_ERR_NOMEM. */
MFT_API mft_tensor *mft_load_npy(const char *path, mft_format as);

#ifdef __cplusplus
}
#endif
#endif
