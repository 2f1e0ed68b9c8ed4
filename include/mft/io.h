/* mft/io.h — checkpoints: named tensors saved to and loaded from one binary
 * file that records each tensor's sizes, strides, dtype and format tag, with an
 * XXH3-64 checksum over the whole file. The format is specified in
 * docs/checkpoint-format.md.
 *
 * Guarantees: a save never leaves a half-written file under the real name
 * (written to "<path>.tmp", then renamed); a load verifies the whole file
 * (size, magic, version, checksum, every entry, every requested name, sizes
 * and dtype) before writing any tensor, so a corrupted, truncated or
 * mismatching file is refused and leaves every tensor untouched. */
#ifndef MFT_IO_H
#define MFT_IO_H

#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Newest version of the checkpoint format (docs/checkpoint-format.md). A
 * file is written as version 1 unless it holds an NCHW8C / NCHW16C tensor,
 * which version 2 stores in its blocks; versions 1 and 2 are read. */
#define MFT_CHECKPOINT_VERSION 2
/* Longest entry name in bytes (without the terminating NUL). */
#define MFT_CHECKPOINT_MAX_NAME 4096

/* Saves n named tensors (any dtype, rank 0..MFT_MAX_DIMS, any layout). Dense
 * tensors are written as they lie in memory, with their own strides (an NHWC
 * tensor stays NHWC); non-dense ones (slices with gaps, broadcasts) are written
 * packed in their tag's format and recorded with those packed strides.
 * names: n distinct non-empty NUL-terminated strings of at most
 * MFT_CHECKPOINT_MAX_NAME bytes. The file is written to "<path>.tmp" and
 * renamed to path when complete (replacing an existing file).
 * Errors: MFT_ERR_NULL (path, names/tensors with n > 0, an entry),
 * MFT_ERR_INVALID (n < 0, empty, too long or duplicate name), MFT_ERR_IO
 * (open/write/rename failed, with the errno text; the .tmp file is removed),
 * MFT_ERR_NOMEM. Tensors are borrowed and not modified. */
MFT_API mft_status mft_save_tensors(const char *path, int n, const char *const *names,
                                    const mft_tensor *const *tensors);

/* Loads the entries names[0..n) into the existing tensors[0..n): each file
 * entry must have the same sizes and dtype as its target; values are copied
 * into the target's own layout (mft_copy_; the target keeps its strides and
 * tag, and its version counter is bumped). Entries of the file that are not
 * requested are ignored. The whole file is read and verified before any
 * tensor is written: on any error every target is untouched.
 * Errors: MFT_ERR_NULL, MFT_ERR_INVALID (n < 0, duplicate requested name, a
 * name missing from the file), MFT_ERR_SHAPE (sizes differ), MFT_ERR_DTYPE
 * (dtype differs), MFT_ERR_OVERLAP (a target that cannot be written: a
 * broadcast view), MFT_ERR_IO (open/read failed), MFT_ERR_CORRUPT (bad magic,
 * truncated, checksum mismatch, malformed entry, trailing bytes),
 * MFT_ERR_UNSUPPORTED (another format version), MFT_ERR_NOMEM. Tensors are
 * borrowed. */
MFT_API mft_status mft_load_tensors_into(const char *path, int n, const char *const *names,
                                         mft_tensor *const *tensors);

/* Inspection: every entry of the file, in file order, as a new tensor with the
 * recorded sizes, strides and format tag. On success *n is the entry count and
 * *names / *tensors are arrays of *n entries allocated by the library (NULL
 * when *n == 0): the caller owns them and frees them (names, arrays and the
 * tensor references) with mft_checkpoint_free_list. The tensors are NOT owned
 * by an open scope. On failure *n = 0, *names = NULL, *tensors = NULL.
 * Errors: as mft_load_tensors_into for the file itself. */
MFT_API mft_status mft_load_tensors(const char *path, int *n, char ***names,
                                    mft_tensor ***tensors);

/* Frees what mft_load_tensors returned: each name, each tensor reference and
 * both arrays. NULL arrays are allowed. */
MFT_API void mft_checkpoint_free_list(int n, char **names, mft_tensor **tensors);

#ifdef __cplusplus
}
#endif
#endif
