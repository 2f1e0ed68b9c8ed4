/* mft/state.h — model checkpoints in one call: a module's parameters and
 * buffers and, optionally, its optimiser's state saved to and loaded from one
 * checkpoint file (the format of mft/io.h, docs/checkpoint-format.md §Model
 * checkpoints), PyTorch's torch.save({model.state_dict(),
 * optimizer.state_dict()}) / load_state_dict; and a model's weights
 * exchanged with PyTorch as a safetensors state_dict
 * (mft_module_save_safetensors / mft_module_load_safetensors).
 *
 * What a model checkpoint holds, by entry name:
 *   - every parameter, under the name mft_module_parameters gives it
 *     ("conv1.weight", "3.bias", ...: PyTorch state_dict-style dotted names);
 *   - every buffer, under the name mft_module_buffers gives it
 *     ("bn1.running_mean", "1.num_batches_tracked", ...);
 *   - with an optimiser: every state tensor under "optimizer." followed by
 *     the name mft_optimizer_state gives it ("optimizer.step",
 *     "optimizer.0.momentum_buffer", "optimizer.2.exp_avg", ...), and the
 *     learning rate as "optimizer.lr" (F64, 1 element; mft_optimizer_lr).
 * Each tensor is stored in its own layout (a channels_last weight is written
 * NHWC, as mft_save_tensors does).
 *
 * To see what a checkpoint holds without a model (names, sizes, dtypes,
 * layouts, values), read it with mft_load_tensors (mft/io.h) and free the
 * list with mft_checkpoint_free_list.
 *
 * Ownership: the module, the optimiser and their tensors stay the caller's;
 * nothing is retained after the call. */
#ifndef MFT_STATE_H
#define MFT_STATE_H

#include "mft/export.h"
#include "mft/nn.h"
#include "mft/safetensors.h" /* MFT_SAFETENSORS_* flags */
#include "mft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prefix of the optimiser's entries in a model checkpoint. */
#define MFT_CHECKPOINT_OPTIMIZER_PREFIX "optimizer."

/* Saves m's parameters and buffers and, when opt is not NULL, opt's state and
 * learning rate, to path (entry names above), with mft_save_tensors: the
 * file is written to "<path>.tmp" and renamed over path when complete, so a
 * failed save leaves an existing file as it was. opt should be the optimiser
 * built over m's parameters (its entries are numbered by its own parameter
 * order, mft_optimizer_state). Nothing is modified.
 * Errors (the message names mft_module_save): MFT_ERR_NULL (path, m),
 * MFT_ERR_INVALID (two tensors with one name: an optimiser state named
 * "lr"), MFT_ERR_IO (create, write or rename failed, with the errno text),
 * MFT_ERR_NOMEM. */
MFT_API mft_status mft_module_save(const char *path, const mft_module *m,
                                   const mft_optimizer *opt);

/* Loads a checkpoint written by mft_module_save into the existing m and (when
 * not NULL) opt. Strict, all or nothing:
 *   - every parameter and buffer of m, and with opt every optimiser entry
 *     (state and "optimizer.lr"), must be in the file with the same sizes and
 *     dtype; any other entry in the file is an error, except that the
 *     "optimizer." entries are skipped when opt is NULL (to load a training
 *     checkpoint into a model for evaluation);
 *   - the whole file is read, verified (mft_load_tensors) and matched against
 *     the model before the first tensor is written, so on any error m and opt
 *     are untouched (values, layouts, learning rate).
 * Values are copied into each tensor's own layout: a channels_last parameter
 * stays channels_last whatever layout the file recorded (and an NCHW one
 * stays NCHW); the tensor objects stay the same (an optimiser built on them
 * keeps pointing at them) and their version counters are bumped. The
 * learning rate is set from "optimizer.lr" (mft_optimizer_set_lr). Grad mode
 * and an open tape do not matter (the copies are not recorded); grads are not
 * touched.
 * Errors (the message names mft_module_load, the file and the first
 * offending tensor, e.g. "mft_module_load: model.mft: tensor '1.weight' has
 * sizes [32,1,3,3] in the file, [16,1,3,3] in the model"):
 *   MFT_ERR_NULL (path, m);
 *   MFT_ERR_IO (cannot open or read), MFT_ERR_CORRUPT (not a checkpoint,
 *   truncated, checksum mismatch), MFT_ERR_UNSUPPORTED (another format
 *   version): as mft_load_tensors;
 *   MFT_ERR_INVALID: a tensor of the model or optimiser missing from the
 *   file, an entry of the file that the model (or optimiser) does not have,
 *   a learning rate in the file that is negative or not finite;
 *   MFT_ERR_SHAPE: sizes differ; MFT_ERR_DTYPE: dtypes differ;
 *   MFT_ERR_OVERLAP: a tensor of the model that cannot be written (a
 *   broadcast view);
 *   MFT_ERR_NOMEM (the file is held in memory while it is matched). */
MFT_API mft_status mft_module_load(const char *path, mft_module *m, mft_optimizer *opt);

/* ------------------------------------------------------------------ safetensors
 * A model's state_dict moved between mft and PyTorch (or any safetensors
 * reader): the parameters and buffers under their mft_module_parameters /
 * mft_module_buffers names, which are PyTorch's state_dict names when the
 * model's tree is the PyTorch model's (mft_nn_fashion_cnn: "conv1.weight",
 * "bn1.running_mean", ...; docs/spec.md §8.4). Weights only: no optimiser
 * state (use mft_module_save to resume training exactly). */

/* Writes m's parameters and buffers to path with mft_safetensors_save
 * (mft/safetensors.h): flags 0 writes every tensor in logical NCHW order,
 * what torch.frombuffer(...).reshape(shape) and load_state_dict expect
 * (the layout is noted in the file's metadata for mft);
 * MFT_SAFETENSORS_PHYSICAL writes them as they lie (an mft-to-mft fast
 * path). A num_batches_tracked buffer is written as PyTorch's: I64 of shape
 * [] (mft holds it as [1]). Written to "<path>.tmp" and renamed over path.
 * Nothing is modified. Errors (naming mft_module_save_safetensors):
 * MFT_ERR_NULL (path, m) and those of mft_safetensors_save (MFT_ERR_INVALID
 * for unknown flags, MFT_ERR_IO, MFT_ERR_NOMEM). */
MFT_API mft_status mft_module_save_safetensors(const char *path, const mft_module *m,
                                               unsigned flags);

/* Loads a safetensors state_dict (written by mft_module_save_safetensors or
 * by PyTorch: examples/fashion_mnist_torch.py --save) into the existing m,
 * whatever m's memory format (CONTIGUOUS, CHANNELS_LAST, NCHW16C blocked
 * weights...): values are copied into each tensor's own layout, the tensor
 * objects stay the same. Strict and all or nothing, as mft_module_load:
 * every parameter and buffer of m must be in the file with the same sizes
 * and dtype, and the file may hold nothing else; the whole file is read,
 * verified (mft_safetensors_load) and matched before the first write, so on
 * any error m is untouched. Two departures follow PyTorch's
 * load_state_dict: a num_batches_tracked may be I64 of shape [] (PyTorch's)
 * or [1] (mft's), and may be absent (the counter is then set to 0).
 * flags: 0 (map the file) or MFT_SAFETENSORS_READ (read it). *nloaded (may
 * be NULL) receives the number of m's tensors taken from the file (0 on
 * failure).
 * Errors (the message names mft_module_load_safetensors, the file and the
 * first offending tensor): MFT_ERR_NULL (path, m); those of
 * mft_safetensors_load (MFT_ERR_IO, MFT_ERR_CORRUPT for a malformed file,
 * MFT_ERR_DTYPE for a dtype mft does not have, MFT_ERR_INVALID for unknown
 * flags); MFT_ERR_INVALID: a tensor of m missing from the file or an entry
 * of the file m does not have (e.g. an mft model whose children are
 * numbered, "0.weight", against PyTorch's "conv1.weight"); MFT_ERR_SHAPE,
 * MFT_ERR_DTYPE: sizes or dtype differ; MFT_ERR_OVERLAP: a tensor of m that
 * cannot be written; MFT_ERR_NOMEM. */
MFT_API mft_status mft_module_load_safetensors(const char *path, mft_module *m, unsigned flags,
                                               int *nloaded);

#ifdef __cplusplus
}
#endif
#endif
