/* tests/tensor/dlpack_v1.h — the DLPack 1.x versioned managed tensor, for
 * the tests only, written from the DLPack specification (dmlc/dlpack,
 * include/dlpack/dlpack.h, v1.0+): a {major, minor} version, the manager
 * context, the deleter, a 64-bit flags word, and the DLTensor LAST. Debian
 * bookworm ships DLPack 0.6, which has no versioned struct; the DLTensor it
 * embeds is the same in both versions, so this header takes it from the
 * installed 0.6 dlpack.h. test_dlpack.c checks mft's private mirror of this
 * layout (tensor/dlpack.c) against it field by field. */
#ifndef MFT_TEST_DLPACK_V1_H
#define MFT_TEST_DLPACK_V1_H

#include <dlpack/dlpack.h>
#include <stdint.h>

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
