/* tensor/dlpack_abi.h — mft's private mirrors of the DLPack structs (Note
 * [DLPack mirror structs] in tensor/dlpack.c): the DLTensor and its parts,
 * and the fields of the 0.6 and 1.x managed structs as macros, so that
 * tensor/dlpack.c defines struct DLManagedTensor / DLManagedTensorVersioned
 * from them and tests/tensor/test_dlpack.c can lay the same fields out under
 * another tag, next to the real dlpack.h, and compare every offset. Needs
 * only <stdint.h>: no dlpack.h at build time. */
#ifndef MFT_TENSOR_DLPACK_ABI_H
#define MFT_TENSOR_DLPACK_ABI_H

#include <stdint.h>

typedef struct mft__dlp_device {
    int device_type; /* DLDeviceType: an enum, int-sized */
    int device_id;
} mft__dlp_device;

typedef struct mft__dlp_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} mft__dlp_dtype;

typedef struct mft__dlp_tensor {
    void *data;
    mft__dlp_device device;
    int ndim;
    mft__dlp_dtype dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} mft__dlp_tensor;

typedef struct mft__dlp_version {
    uint32_t major;
    uint32_t minor;
} mft__dlp_version;

/* DLPack 0.6 DLManagedTensor: the tensor first. */
#define MFT__DLP_MANAGED_FIELDS(tag)                                                            \
    mft__dlp_tensor dl_tensor;                                                                  \
    void *manager_ctx;                                                                          \
    void (*deleter)(struct tag * self);

/* DLPack 1.x DLManagedTensorVersioned: the tensor last, after a flags word. */
#define MFT__DLP_MANAGED_V_FIELDS(tag)                                                          \
    mft__dlp_version version;                                                                   \
    void *manager_ctx;                                                                          \
    void (*deleter)(struct tag * self);                                                         \
    uint64_t flags;                                                                             \
    mft__dlp_tensor dl_tensor;

/* Device types, type codes and flag bits mft uses (values of the
 * specification). */
enum { MFT__DLP_CPU = 1, MFT__DLP_CUDA_HOST = 3, MFT__DLP_CUDA_MANAGED = 13 };
enum { MFT__DLP_INT = 0, MFT__DLP_UINT = 1, MFT__DLP_FLOAT = 2 };
#define MFT__DLP_FLAG_READ_ONLY ((uint64_t)1 << 0)
#define MFT__DLP_FLAG_IS_COPIED ((uint64_t)1 << 1)

#endif
