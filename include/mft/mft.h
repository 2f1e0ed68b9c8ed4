/* mft/mft.h — umbrella header of mft ("memory-format tensors") and its version.
 * Include this one header to use the library.
 *
 * The conventions every public function follows (docs/architecture.md §3-§4):
 *   - Ownership. A function that returns mft_tensor * returns a new reference
 *     the caller owns and gives back with mft_tensor_release (inside an
 *     mft_scope_begin / mft_scope_end pair the scope owns it instead).
 *     Tensor arguments are borrowed: the callee takes its own reference if it
 *     keeps one. Pointers into a tensor (sizes, strides, data) are borrowed
 *     and valid while the tensor lives. Objects (mft_module, mft_optimizer,
 *     mft_dataset, ...) have one owner and one _free function.
 *   - Results. A function with one result returns it (NULL on failure); one
 *     with several results or none returns mft_status and writes the results
 *     through out-pointers (so mft_max_pool2d_backward returns grad_x, and
 *     mft_conv2d_backward returns a status and writes grad_x, grad_w, grad_b).
 *   - Errors. A failing call returns NULL or a status other than MFT_OK, sets
 *     the thread-local last error (mft_last_error, mft_last_error_message:
 *     the function's name and the offending values), and leaves everything
 *     the caller owns as it was.
 *   - Names. mft_<noun>_<verb> for objects (mft_tensor_release,
 *     mft_module_forward), mft_<op> for ops, mft_<op>_out writes into an
 *     existing tensor, mft_<op>_ in place; a setting is read by mft_<name>
 *     and written by mft_set_<name> (or mft_<area>_set_<name>); counters are
 *     cleared by mft_<counter>_reset. */
#ifndef MFT_MFT_H
#define MFT_MFT_H

#define MFT_VERSION_MAJOR 0
#define MFT_VERSION_MINOR 2
#define MFT_VERSION_PATCH 0
#define MFT_VERSION_STRING "0.2.0"

#include "mft/export.h"
#include "mft/status.h"
#include "mft/types.h"
#include "mft/tensor.h"
#include "mft/ops.h"
#include "mft/dispatch.h"
#include "mft/parallel.h"
#include "mft/cnn.h"
#include "mft/autograd.h"
#include "mft/loss.h"
#include "mft/nn.h"
#include "mft/state.h"
#include "mft/data.h"
#include "mft/io.h"
#include "mft/safetensors.h"
#include "mft/npy.h"
#include "mft/profile.h"
#include "mft/rules.h"
#include "mft/layout.h"
#include "mft/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Version of the library actually linked ("0.2.0"). */
MFT_API const char *mft_version(void);
#ifdef __cplusplus
}
#endif
#endif
