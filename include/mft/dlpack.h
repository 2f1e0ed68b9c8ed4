/* mft/dlpack.h — zero-copy exchange of tensors with other frameworks through
 * DLPack (PyTorch, NumPy, CuPy, JAX, TVM, ...): the legacy DLManagedTensor of
 * DLPack 0.6 and the versioned DLManagedTensorVersioned of DLPack 1.x
 * (docs/spec.md §8.1, docs/interop.md).
 *
 * This header only forward-declares the two DLPack structs, so neither mft
 * nor its users need dlpack.h to build; include the dlpack.h of your choice
 * (0.6 or 1.x) to read the fields. mft's private copies of the structs are
 * layout-identical to the upstream ones (checked by tests/tensor/test_dlpack.c).
 *
 * Layout at the boundary. The shape is always the logical one (N, C, [D,] H, W)
 * and the strides (in elements) are the tensor's real strides, so a
 * channels_last tensor crosses as an NCHW-shaped tensor with permuted strides
 * (torch.from_dlpack gives is_contiguous(memory_format=torch.channels_last)),
 * and an imported tensor with such strides is tagged CHANNELS_LAST. Nothing is
 * copied unless MFT_DLPACK_COPY is given and the layout needs it.
 *
 * Python capsules: a consumer takes the pointer out of a capsule named
 * "dltensor" (versioned: "dltensor_versioned") and, once mft_from_dlpack has
 * succeeded, renames it "used_dltensor" ("used_dltensor_versioned") so that
 * the capsule's destructor does not call the deleter a second time. */
#ifndef MFT_DLPACK_H
#define MFT_DLPACK_H

#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;          /* DLPack 0.6 (dlpack.h, DLPACK_VERSION 60) */
struct DLManagedTensorVersioned; /* DLPack 1.x (DLPACK_MAJOR_VERSION 1) */

/* Export flag: a tensor DLPack cannot describe (a blocked layout: NCHW8C,
 * NCHW16C, BLOCKED) is exported as a packed NCHW (CONTIGUOUS) copy instead of
 * being refused. Tensors DLPack can describe are never copied. */
#define MFT_DLPACK_COPY 1u

/* The DLPack version mft_to_dlpack_versioned writes, and the only major
 * version mft_from_dlpack_versioned accepts. */
#define MFT_DLPACK_MAJOR 1
#define MFT_DLPACK_MINOR 0

/* Exports t as a DLPack 0.6 DLManagedTensor without copying: `data` points at
 * t's element (0, ..., 0) (the storage offset folded in, byte_offset 0), the
 * device is kDLCPU 0, shape = t's logical sizes, strides = t's strides in
 * elements (always allocated, also for rank 0; stride 0 for broadcast dims).
 * The DLManagedTensor holds one reference to t's storage (not to t): t may
 * be released at once, and the memory lives until the consumer calls
 * (*out)->deleter(*out), exactly once, from any thread; the deleter frees
 * *out too. Writes through the export change t's values (shared memory) and
 * are not seen by mft's autograd or version counter.
 * flags: 0 or MFT_DLPACK_COPY (see above; the copy is the export's only
 * owner).
 * Errors (*out untouched): MFT_ERR_NULL (t, out), MFT_ERR_INVALID (unknown
 * flag bits), MFT_ERR_FORMAT (a blocked t without MFT_DLPACK_COPY),
 * MFT_ERR_NOMEM. */
MFT_API mft_status mft_to_dlpack(const mft_tensor *t, unsigned flags,
                                 struct DLManagedTensor **out);

/* Wraps a DLPack 0.6 tensor without copying. On success mft owns m: its
 * deleter (when not NULL) is called exactly once, when the last mft tensor
 * viewing the memory is released (views and results of views included). On
 * failure mft does NOT call the deleter: the caller still owns m.
 * Accepted: device kDLCPU, kDLCUDAHost or kDLCUDAManaged (memory the CPU can
 * read); dtype (code, bits, lanes) = float 32 / 64, int 32 / 64, uint 8 with
 * lanes 1; ndim 0..MFT_MAX_DIMS; strides >= 0 (NULL = packed row-major);
 * byte_offset honoured (the view starts at data + byte_offset). DLPack
 * carries no buffer length: the storage is taken to be exactly the reach of
 * the view (mft_min_storage_numel elements), and that the producer's buffer
 * really is that long cannot be checked. A size-0 tensor may have data NULL.
 * The tag is read from the strides of the dims of size > 1 (size-1 dims'
 * strides are ignored: producers normalise them, PyTorch to 1); when those
 * strides fit both CONTIGUOUS and CHANNELS_LAST (C == 1, H == W == 1, ...)
 * hint decides: MFT_PRESERVE gives CONTIGUOUS (origin INFERRED), CONTIGUOUS
 * or CHANNELS_LAST gives that tag (origin INHERITED). Unambiguous strides
 * always win over hint; for ranks other than 3-5 the tag is CONTIGUOUS.
 * Errors (m not consumed): MFT_ERR_NULL (m, shape with ndim > 0, data of a
 * non-empty tensor), MFT_ERR_FORMAT (hint not PRESERVE, CONTIGUOUS or
 * CHANNELS_LAST), MFT_ERR_RANK (ndim out of range), MFT_ERR_UNSUPPORTED
 * (device, negative stride), MFT_ERR_DTYPE (dtype code / bits, lanes != 1),
 * MFT_ERR_INVALID (negative size, data + byte_offset not aligned to the
 * element size), MFT_ERR_OVERFLOW (sizes x strides or byte_offset past the
 * geometry bound, docs/spec.md §1.1), MFT_ERR_NOMEM. */
MFT_API mft_tensor *mft_from_dlpack(struct DLManagedTensor *m, mft_format hint);

/* As mft_to_dlpack, for DLPack 1.x: version {MFT_DLPACK_MAJOR,
 * MFT_DLPACK_MINOR}; flags word DLPACK_FLAG_BITMASK_IS_COPIED (1 << 1) when
 * MFT_DLPACK_COPY made a copy, else 0 (mft tensors are writable, so never
 * READ_ONLY). */
MFT_API mft_status mft_to_dlpack_versioned(const mft_tensor *t, unsigned flags,
                                           struct DLManagedTensorVersioned **out);

/* As mft_from_dlpack, for DLPack 1.x. Only version.major is read before it is
 * checked: a major other than MFT_DLPACK_MAJOR is refused (MFT_ERR_UNSUPPORTED,
 * naming both versions) without touching any other field; the deleter is not
 * called, so the caller, which keeps m, must call it (the DLPack rule for a
 * consumer that does not understand the version). The READ_ONLY flag
 * (1 << 0) is refused (MFT_ERR_UNSUPPORTED): mft has no read-only tensors and
 * copies only on request, so the caller copies such a tensor itself.
 * IS_COPIED needs nothing; other flag bits are ignored. */
MFT_API mft_tensor *mft_from_dlpack_versioned(struct DLManagedTensorVersioned *m,
                                              mft_format hint);

#ifdef __cplusplus
}
#endif
#endif
