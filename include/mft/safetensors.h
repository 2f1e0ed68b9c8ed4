/* mft/safetensors.h — named tensors saved to and loaded from safetensors
 * files (huggingface's format: an 8-byte little-endian header size, a JSON
 * header, then the tensor bytes back to back), the format PyTorch models are
 * shared in. The decisions are recorded in docs/spec.md §8.3; the user's view
 * (modes, what PyTorch sees, an example) is docs/interop.md "safetensors".
 *
 * Two ways to write a tensor whose memory format is not plain C order:
 *   - LOGICAL (default): every tensor is written in logical C order (a
 *     channels_last or nChw16c tensor is reordered on save) and its format is
 *     recorded in __metadata__ as "mft.format.<name>": "CHANNELS_LAST" (or
 *     "NCHW8C", "NCHW16C"). Any reader sees the right NCHW values; mft
 *     restores the format on load (a reorder back).
 *   - PHYSICAL (MFT_SAFETENSORS_PHYSICAL): dense tensors are written as they
 *     lie: a channels_last (N,C,H,W) tensor as its (N,H,W,C) array with
 *     "mft.layout.<name>": "{\"logical\":[N,C,H,W],\"perm\":[0,2,3,1]}", a
 *     blocked one as its blocks, (N,C1,H,W,C0), with
 *     "{\"logical\":[N,C,H,W],\"onednn\":\"aBcd16b\"}". mft loads them back as
 *     zero-copy views in the logical sizes; a foreign reader sees the
 *     physical array (PyTorch: t.permute(0, 3, 1, 2) is channels_last).
 *
 * dtypes: mft's f32 f64 i32 i64 u8 are the files' F32 F64 I32 I64 U8; a file
 * holding any other dtype (F16, BF16, BOOL, ...) is refused naming it.
 *
 * Loading verifies the whole header before any tensor is made: the reader is
 * stricter than the reference one (docs/spec.md §8.3 lists every check); any
 * refused file leaves nothing loaded and every target untouched. */
#ifndef MFT_SAFETENSORS_H
#define MFT_SAFETENSORS_H

#include <stddef.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* save: dense tensors as they lie (channels_last as its (N,H,W,C) array,
 * blocked as 5-D) + layout metadata */
#define MFT_SAFETENSORS_PHYSICAL 1u
/* load: read() into owned memory instead of mmap */
#define MFT_SAFETENSORS_READ 2u
/* Largest JSON header a file may declare (the reference reader's limit). */
#define MFT_SAFETENSORS_MAX_HEADER 100000000

/* Saves n named tensors (dtypes f32 f64 i32 i64 u8, rank 0..MFT_MAX_DIMS, any
 * layout) to path. Tensors are ordered as the reference writer orders them
 * (larger elements first, then by name) so that each starts at a multiple of
 * its element size; the JSON header is padded with spaces to a multiple of 8.
 * flags: 0 (LOGICAL) or MFT_SAFETENSORS_PHYSICAL (see above; a non-dense
 * tensor is packed in its format first). names: n distinct, non-empty,
 * valid UTF-8 strings, none "__metadata__". The file is written to
 * "<path>.tmp" and renamed to path when complete.
 * Errors: MFT_ERR_NULL (path, names/tensors with n > 0, an entry),
 * MFT_ERR_INVALID (n < 0, unknown flag bits, empty / duplicate / reserved /
 * non-UTF-8 name, a header over MFT_SAFETENSORS_MAX_HEADER), MFT_ERR_IO
 * (create/write/rename failed, with the errno text; the .tmp file is
 * removed), MFT_ERR_NOMEM. Tensors are borrowed and not modified. */
MFT_API mft_status mft_safetensors_save(const char *path, int n, const char *const *names,
                                        const mft_tensor *const *tensors, unsigned flags);

/* Loads every tensor of the file, in the order of the file's header. On
 * success *n is the count and *names / *tensors are arrays of *n entries the
 * caller owns (NULL when *n == 0): free them with mft_safetensors_free_list.
 * The tensors are new references not owned by an open scope. By default the
 * file is mapped (mmap, private copy-on-write: writing to a tensor never
 * changes the file) and every tensor whose bytes are aligned to its element
 * size is a zero-copy view into that one mapping, which is unmapped when the
 * last such tensor is released (the tensors may outlive the lists). Tensors
 * with "mft.format" metadata get their format back (a LOGICAL file's
 * channels_last entry is reordered into new memory); a PHYSICAL file's
 * entries are views of the mapped bytes in their logical sizes.
 * flags: 0 or MFT_SAFETENSORS_READ (read into memory owned by each tensor,
 * no mapping kept). On failure *n = 0, *names = *tensors = NULL.
 * Errors: MFT_ERR_NULL, MFT_ERR_INVALID (unknown flag bits), MFT_ERR_IO
 * (open / map / read failed), MFT_ERR_CORRUPT (every malformed file:
 * truncated, header too large, not UTF-8, not JSON, not an object, duplicate
 * keys, unknown or missing fields, bad shape or offsets, holes, overlaps,
 * trailing bytes, size mismatch, malformed mft metadata; the message names the
 * tensor and the problem), MFT_ERR_DTYPE (a dtype mft does not have, named),
 * MFT_ERR_RANK (more than MFT_MAX_DIMS dims), MFT_ERR_NOMEM. */
MFT_API mft_status mft_safetensors_load(const char *path, unsigned flags, int *n, char ***names,
                                        mft_tensor ***tensors);

/* Loads the entries names[0..n) into the existing tensors[0..n), each keeping
 * its own layout and tag (values copied with mft_copy_; the version counter is
 * bumped). Each entry's logical sizes and dtype must equal its target's.
 * Entries not requested are ignored. The whole file (header, every entry,
 * every requested name, sizes and dtype) is verified before the first write:
 * on any error every target is untouched. flags: 0 or MFT_SAFETENSORS_READ.
 * Errors: as mft_safetensors_load, plus MFT_ERR_INVALID (duplicate requested
 * name, a name not in the file), MFT_ERR_SHAPE (sizes differ), MFT_ERR_DTYPE
 * (dtype differs), MFT_ERR_OVERLAP (a target that cannot be written, such as
 * a broadcast view). Tensors are borrowed. */
MFT_API mft_status mft_safetensors_load_into(const char *path, int n, const char *const *names,
                                             mft_tensor *const *tensors, unsigned flags);

/* Frees what mft_safetensors_load returned: each name, each tensor
 * reference and both arrays. NULL arrays are allowed. */
MFT_API void mft_safetensors_free_list(int n, char **names, mft_tensor **tensors);

/* A description of the tensor `name` of a safetensors file, for people (what
 * `mft-explain --safetensors FILE --name T` prints): the file's entry (dtype,
 * shape, data_offsets and the byte range in the file), its mft metadata, the
 * save mode that implies, the tensor mft_safetensors_load makes of it (sizes,
 * strides or blocks, a zero-copy view of the mapping or a copy, a reorder)
 * and where its tag comes from: "restored from metadata" or "inferred from
 * the file's strides". snprintf-style: writes at most len bytes (always
 * NUL-terminated when len > 0; buf may be NULL when len is 0) and returns the
 * length the full text needs; 0 on error with the last error set: a file
 * mft_safetensors_load refuses (its status), no tensor of that name
 * (MFT_ERR_INVALID), MFT_ERR_NULL. */
MFT_API size_t mft_safetensors_describe(const char *path, const char *name, char *buf,
                                        size_t len);

#ifdef __cplusplus
}
#endif
#endif
