/* mft/mft.h — umbrella header of mft ("memory-format tensors") and its version.
 * Include this one header to use the library. */
#ifndef MFT_MFT_H
#define MFT_MFT_H

#define MFT_VERSION_MAJOR 0
#define MFT_VERSION_MINOR 1
#define MFT_VERSION_PATCH 0
#define MFT_VERSION_STRING "0.1.0"

#include "mft/export.h"
#include "mft/status.h"
#include "mft/types.h"
#include "mft/tensor.h"
#include "mft/ops.h"
#include "mft/dispatch.h"
#include "mft/cnn.h"
#include "mft/autograd.h"
#include "mft/loss.h"
#include "mft/nn.h"
#include "mft/data.h"
#include "mft/io.h"
#include "mft/profile.h"
#include "mft/rules.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Version of the library actually linked ("0.1.0"). */
MFT_API const char *mft_version(void);
#ifdef __cplusplus
}
#endif
#endif
