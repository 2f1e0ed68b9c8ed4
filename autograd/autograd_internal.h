/* autograd/autograd_internal.h — what ops see of the tape (docs/architecture.md §8): the
 * node layout their backward functions read, and the one record call an op
 * entry point makes after computing its outputs.
 *
 * Adding autograd to an op (its family file, next to its forward):
 *   1. a params struct with everything the backward needs besides tensors
 *      (no pointers: it is copied byte for byte into the node);
 *   2. a backward function `static mft_status X_node_backward(const
 *      mft__ag_node *n, mft_tensor *const *gout, mft_tensor **gin)` that
 *      fills gin[k] (new reference) for every input k with
 *      n->in[k].needs_grad, from gout[] (never NULL: outputs nobody used get
 *      zeros), n->saved[] and n->params. It may leave gin[k] NULL for an
 *      input that needs no grad. It may return gradients in any layout and
 *      broadcast shape issues are its business: the engine only converts
 *      each gradient to the input's saved format and checks its sizes;
 *   3. at the end of the entry point, when mft__ag_wants(...) is true:
 *      `if (mft__ag_record(fn, "X", X_node_backward, nin, ins, nout, outs,
 *       nsaved, saved, &params, sizeof params) != MFT_OK) { release outputs;
 *       return NULL; }`
 *   In-place and _out variants call mft__ag_check_inplace first. */
#ifndef MFT_AUTOGRAD_INTERNAL_H
#define MFT_AUTOGRAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "internal.h"
#include "mft/autograd.h"

/* One input of a node: where its gradient goes and the format it must have. */
typedef struct mft__ag_input {
    bool needs_grad;    /* the input requires grad (leaf or recorded output) */
    mft_tensor *leaf;   /* the input itself (retained) when it is a marked leaf */
    int64_t node;       /* producer node index on this tape, -1 for leaves/constants */
    int out;            /* output index of the producer */
    mft_format tag;     /* the input's tag at record time (docs/spec.md §5 target format) */
    mft_dtype dtype;
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    const char *layout;      /* mft__layout_label at record time; NULL: no tensor passed */
    const char *grad_layout; /* label of the gradient backward delivered, NULL: none */
    const mft_layout *blocked; /* an MFT_BLOCKED input's packed descriptor (the layout its
                                  gradient gets, docs/spec.md §7.9); NULL otherwise */
} mft__ag_input;

/* One output of a node: the gradient accumulated for it during backward. */
typedef struct mft__ag_output {
    mft_tensor *grad; /* owned; NULL until a consumer contributes */
    mft_format tag;
    mft_dtype dtype;
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    const char *layout; /* mft__layout_label at record time */
} mft__ag_output;

/* What ran for one node in one direction (forward or backward), read from
 * the thread's event rings (tensor/internal.h) for the stretch of work the
 * node covers; mft_tape_to_dot (autograd/dot.c) draws it. Counts include
 * events that already left the rings; the kept records are the first ones. */
#define MFT__AG_KEEP 4
typedef struct mft__ag_events {
    int64_t nkernels;                      /* kernel runs in the stretch */
    int nkept;                             /* distinct (op, kernel) pairs kept */
    mft__kernel_rec kernel[MFT__AG_KEEP];
    int64_t kernel_calls[MFT__AG_KEEP];    /* runs of each kept pair */
    int64_t nconv, conv_bytes;             /* conversions (bytes of the kept ones) */
    int nconv_kept;
    mft__conv_rec conv[MFT__AG_KEEP];
    int conv_input[MFT__AG_KEEP];          /* the input it belongs to, -1: the op's own */
} mft__ag_events;

typedef struct mft__ag_node mft__ag_node;
typedef mft_status (*mft__ag_backward_fn)(const mft__ag_node *n, mft_tensor *const *gout,
                                          mft_tensor **gin);

struct mft__ag_node {
    const char *name;             /* op name, used in messages */
    mft__ag_backward_fn backward;
    int nin, nout, nsaved;
    mft__ag_input *in;            /* nin entries */
    mft__ag_output *out;          /* nout entries */
    mft_tensor **saved;           /* nsaved new references (NULL entries allowed) */
    int64_t *saved_version;       /* storage versions at record time */
    const void *params;           /* a copy of the op's params struct */
    size_t params_size;
    bool released;                /* saved tensors released (node ran) */
    const char *site_file;        /* the forward call site (MFT_AT), NULL: none */
    int site_line;
    const char *module;           /* mft_module_path() at record time ("" outside
                                     modules), a copy in the node's block */
    const char *module_kind;      /* mft_module_kind() then, also a copy */
    mft__ag_events fwd, bwd;      /* kernels and conversions of forward / backward */
};

/* True when this thread records and at least one of the n inputs (NULL
 * entries allowed) requires grad. Cheap: ops call it unconditionally. */
bool mft__ag_wants(int n, const mft_tensor *const *inputs);

/* Appends a node for an op that just produced outputs[0..nout) from
 * inputs[0..nin) and marks the outputs (which must be fresh tensors, not
 * yet recorded) as produced by it. saved tensors are retained with their
 * storage versions; params (params_size bytes, may be 0) is copied. On
 * failure (NOMEM) sets an error naming fn and records nothing: the caller
 * releases its outputs and returns NULL. */
mft_status mft__ag_record(const char *fn, const char *name, mft__ag_backward_fn backward,
                          int nin, const mft_tensor *const *inputs, int nout,
                          mft_tensor *const *outputs, int nsaved,
                          const mft_tensor *const *saved, const void *params,
                          size_t params_size);

/* For in-place and _out variants: MFT_ERR_UNSUPPORTED naming fn when this
 * thread records and t requires grad (a leaf or a recorded output). */
mft_status mft__ag_check_inplace(const char *fn, const mft_tensor *t);

/* Releases an entry point's result whose node could not be recorded. The
 * result is already owned by the user's innermost scope when one is open,
 * so it is taken back from the scope first (else the scope would release it
 * twice). Keeps the current error (NOMEM if none is set). */
void mft__ag_drop_result(mft_tensor *y);

/* A recording shortcut for the common case of one input and one output:
 * records with the input saved if save_input, the output saved if
 * save_output (in that order). */
mft_status mft__ag_record1(const char *fn, const char *name, mft__ag_backward_fn backward,
                           const mft_tensor *x, mft_tensor *y, bool save_input,
                           bool save_output, const void *params, size_t params_size);

/* For the backward engine (autograd/backward.c) and the DOT picture: the
 * producer node of t on the open tape (-1: a leaf or another tape's
 * output); releasing a node's saved tensors and gradients once it ran;
 * recording which kernels and conversions ran for a node (event sequence
 * numbers (from, to]; k: the input a conversion belongs to, -1 none); the
 * count behind mft_autograd_conversions; restarting the forward event
 * marks after a backward walk. */
int64_t mft__ag_producer(const mft_tensor *t);
/* True when t was produced by an op recorded on a tape other than this
 * thread's open one (a tape that has ended, or another thread's). */
bool mft__ag_recorded_elsewhere(const mft_tensor *t);
void mft__ag_node_release_saved(mft__ag_node *n);
void mft__ag_note_kernels(mft__ag_events *e, int64_t from, int64_t to);
void mft__ag_note_convs(mft__ag_events *e, const mft__ag_node *n, int64_t from, int64_t to,
                        int k, bool backward);
void mft__ag_count_conversion(void);
void mft__ag_restart_events(void);
/* This thread's open tape, read-only (autograd/dot.c): sets *nodes and
 * *len and returns true; false (nothing set) when no tape is open. */
bool mft__ag_tape_view(mft__ag_node *const **nodes, int64_t *len);

#endif
