/* mft/dispatch.h — format-aware kernel dispatch (docs/architecture.md §7,
 * docs/dispatch.md).
 *
 * Every dispatched op (conv2d, max_pool2d, ...) has a table of kernels keyed
 * by (op, format, dtype). The op's entry point validates its arguments,
 * decides the result's format by docs/spec.md §4, then asks the dispatcher for a
 * kernel. Candidates, in order (the first that takes the call runs):
 *   1. the user kernel registered for exactly (op, format, dtype)
 *      (mft_dispatch_register / mft_dispatch_register_ex), then the user
 *      kernel for (op, MFT_FORMAT_ANY, dtype);
 *   2. the built-in kernel for exactly (op, format, dtype);
 *   3. the built-in kernel for (op, MFT_FORMAT_ANY, dtype) (reads any strides);
 *   4. fallback: a kernel of the same dtype in the other format (a user
 *      kernel first, then a built-in one). Inputs are converted to that
 *      format, the kernel runs, the result is converted back; every
 *      conversion is counted.
 * A user kernel registered with an applicability test (mft_kernel_reg.
 * applies) takes only the calls the test accepts; the calls it declines go
 * on down the list, as if it were not registered (Note [Declining kernels]).
 * Strict levels (mft_dispatch_set_strict_level) turn fallbacks, or every
 * conversion the dispatcher would do, into errors, so a kernel author can
 * prove which kernel ran and that nothing was copied.
 * Every op has a naive reference kernel (CONTIGUOUS, F32) that defines its
 * semantics; fast kernels carry descriptive names ("max_pool2d.nhwc.f32").
 * mft_dispatch_call_builtin runs a built-in kernel by name on given
 * arguments (to check a user kernel against it). docs/dispatch.md lists
 * every dispatched op: its kernels' inputs, outputs, parameter struct and
 * the formats and dtypes with built-in kernels.
 *
 * Observability: mft_dispatch_last() describes the last dispatch on this
 * thread (which kernel ran, which user kernel declined); MFT_VERBOSE=1 in
 * the environment (or mft_set_verbose(1)) logs one line per dispatch (and
 * one per decline) through a replaceable callback (default: stderr);
 * mft_dispatch_stats() counts calls, conversions and declines per kernel;
 * mft_dispatch_list() prints the table. */
#ifndef MFT_DISPATCH_H
#define MFT_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel that accepts any strides (registered under this format). */
#define MFT_FORMAT_ANY MFT_PRESERVE

/* What a kernel receives (per op: the table of docs/dispatch.md). inputs are
 * already in the kernel's format and dtype (packed when the format is
 * CONTIGUOUS or CHANNELS_LAST), except the inputs an op passes as given (the
 * convolution weight), which keep their strides; outputs are allocated by
 * the op, packed in the kernel's format (an ANY kernel: in the format the op
 * asked for), uninitialised unless the op's documentation says otherwise.
 * params points to the op's parameter struct (documented beside the op,
 * e.g. mft_pool2d_params). Kernels cannot fail: everything was validated
 * before. */
typedef struct mft_kernel_args {
    int ninputs, noutputs;
    const mft_tensor *const *inputs;
    mft_tensor *const *outputs;
    const void *params;
} mft_kernel_args;

typedef void (*mft_kernel_fn)(const mft_kernel_args *args);

/* Note [Declining kernels]
 * A user kernel may handle only some calls of its (op, format, dtype): a
 * 1x1-convolution kernel, a pooling kernel for 2x2 windows. It says which
 * through an applicability test registered with it, asked before anything
 * is converted or run: true takes the call, false declines it and the
 * dispatcher goes on with the next candidate in the lookup order above (the
 * built-in exact kernel, the ANY kernel, the fallback), exactly as if the
 * user kernel were not registered. Why a separate test rather than a kernel
 * that returns "not handled": the decision needs only sizes and parameters,
 * which are final before dispatch; taking it first means a declined call
 * costs no operand conversion and no output is ever half-written by a
 * kernel that then gives up; and kernels keep one signature, so a built-in
 * kernel can be registered or called (mft_dispatch_call_builtin) wherever a
 * user kernel can.
 * What the test sees: args->inputs as the op passes them to the dispatcher
 * (sizes and dtypes final; strides as the caller's tensors have them, not yet
 * converted to the kernel's format), args->outputs allocated (in the
 * format the op asked for, uninitialised), args->params the op's parameter
 * struct, ctx as registered. It must not write the outputs, must not fail,
 * and should be cheap: it runs on every dispatch of its key. A decline is
 * reported: mft_dispatch_last()->declined names the kernel, the usage
 * counts (mft_dispatch_stats) count it, and the verbose log has a line
 * "mft_verbose,decline,<op>,<kernel>,<format>,<dtype>,user". */
typedef bool (*mft_kernel_applies_fn)(const mft_kernel_args *args, void *ctx);

/* A user kernel registration (mft_dispatch_register_ex).
 *   op       a dispatched op's name ("conv2d"; the table in docs/dispatch.md);
 *   format   CONTIGUOUS, CHANNELS_LAST, NCHW8C, NCHW16C or MFT_FORMAT_ANY:
 *            the format of the key, and the packed format the kernel's
 *            operands come in (ANY: the op's operands as they are, any
 *            strides). A blocked key runs when the op dispatches packed
 *            operands of that format natively (docs/spec.md §7: the 2-D max,
 *            relu max, avg and adaptive avg pools and their backward take
 *            packed NCHW16C F32; other blocked operands go through the plain
 *            fallback, so such a key is not asked then);
 *   dtype    one of the dtypes the op has built-in kernels for;
 *   name     how the kernel is reported (copied; 1-63 characters);
 *   fn       the kernel;
 *   applies  the applicability test (Note [Declining kernels]); NULL: the
 *            kernel takes every call of its key;
 *   ctx      passed to applies, borrowed: it must stay valid while the
 *            kernel is registered. */
typedef struct mft_kernel_reg {
    const char *op;
    mft_format format;
    mft_dtype dtype;
    const char *name;
    mft_kernel_fn fn;
    mft_kernel_applies_fn applies;
    void *ctx;
} mft_kernel_reg;

/* Adds the user kernel described by reg, or replaces the one registered for
 * the same (op, format, dtype). Errors (nothing is registered then): NULL
 * reg, op, name or fn (MFT_ERR_NULL); an op that is not dispatched
 * (MFT_ERR_INVALID); a format other than CONTIGUOUS, CHANNELS_LAST, NCHW8C,
 * NCHW16C, ANY, or CHANNELS_LAST / NCHW8C / NCHW16C for an op whose format
 * rule always gives CONTIGUOUS results
 * (matmul: its kernels are only ever asked for CONTIGUOUS) (MFT_ERR_FORMAT);
 * a dtype the op has no built-in kernel for, so that no call could ever
 * reach the kernel (conv2d with u8; the message lists the op's dtypes)
 * (MFT_ERR_DTYPE); an empty name or one longer than 63 characters
 * (MFT_ERR_INVALID); more than 64 user kernels or 256 distinct names
 * (MFT_ERR_NOMEM). Names are kept for the life of the process, so the
 * names mft_dispatch_last() and the usage counts hand out stay valid after
 * the kernel is unregistered. Not thread-safe against concurrent
 * dispatches: register before starting threads that run ops. */
MFT_API mft_status mft_dispatch_register_ex(const mft_kernel_reg *reg);
/* mft_dispatch_register_ex of {op, fmt, dtype, name, fn, NULL, NULL}: a
 * kernel that takes every call of its key. Same errors. */
MFT_API mft_status mft_dispatch_register(const char *op, mft_format fmt, mft_dtype dtype,
                                         const char *name, mft_kernel_fn fn);
/* Removes the user kernel for (op, fmt, dtype); MFT_ERR_INVALID if none. */
MFT_API mft_status mft_dispatch_unregister(const char *op, mft_format fmt, mft_dtype dtype);

/* Runs a built-in kernel of op on args, outside the dispatcher: to check a
 * user kernel against the built-in on the same arguments, or to hand a call
 * to the built-in from inside a user kernel. name is a built-in kernel's
 * name as mft_dispatch_list prints it ("conv2d.ref.f32"), registered for
 * exactly (op, fmt, dtype); NULL picks the one the dispatcher would pick
 * for that key when no user kernel takes the call: the first built-in
 * registered for (op, fmt, dtype), else the one for (op, MFT_FORMAT_ANY,
 * dtype). (A kernel that chooses among algorithms may report another name
 * in mft_dispatch_last() when it runs through the dispatcher: pass its table
 * name here.)
 * args must be what the dispatcher would give that kernel (docs/dispatch.md
 * has the table per op): the op's number of inputs and outputs in its
 * order, the first input and the first output of dtype, every output and
 * every input the dispatcher converts packed in the kernel's format
 * (CONTIGUOUS or CHANNELS_LAST; for an ANY kernel outputs need only be
 * non-overlapping), the outputs of the sizes the op gives for those inputs
 * and parameters, disjoint from the inputs and each other, and params
 * pointing to the op's parameter struct. All of it is checked before the
 * kernel runs, so a wrong argument is an error, never a wild write. The
 * normalisation ops (batch_norm, group_norm, layer_norm and their backward
 * ops) take an internal parameter struct with work space the op sizes: their
 * built-ins run only from inside a kernel dispatched for the same op, with
 * the params it received (else MFT_ERR_UNSUPPORTED).
 * The outputs are fully overwritten; nothing else changes (the last
 * dispatch record, the usage counts and the conversion counter are left as
 * they were). Errors: NULL op/args/tensors (MFT_ERR_NULL); an op that is not
 * dispatched, no built-in of that name for the key, wrong numbers of
 * tensors or bad params (MFT_ERR_INVALID); sizes that do not fit (MFT_ERR_
 * SHAPE / MFT_ERR_RANK); a dtype that does not fit (MFT_ERR_DTYPE); an
 * operand not packed in the kernel's format (MFT_ERR_FORMAT); overlapping
 * outputs (MFT_ERR_OVERLAP); the kernel's scratch memory (MFT_ERR_NOMEM:
 * the outputs then hold garbage; called from inside a user kernel, the op
 * that dispatched it fails too). */
MFT_API mft_status mft_dispatch_call_builtin(const char *op, mft_format fmt, mft_dtype dtype,
                                             const char *name, const mft_kernel_args *args);

/* The last dispatch on this thread. */
typedef struct mft_dispatch_info {
    const char *op;            /* "max_pool2d" ("" before any dispatch) */
    const char *kernel;        /* the kernel's name */
    mft_format format;         /* the format the op asked for (docs/spec.md §4) */
    mft_format kernel_format;  /* the format the kernel ran in */
    mft_dtype dtype;
    int conversions;           /* tensors converted to or from kernel_format */
    bool user;                 /* a user-registered kernel */
    int64_t seq;               /* dispatches on this thread so far, this one included */
    int declines;              /* user kernels that declined this call before kernel ran */
    const char *declined;      /* the first of them ("" when none) */
} mft_dispatch_info;
/* Borrowed; valid until the next dispatch on this thread. */
MFT_API const mft_dispatch_info *mft_dispatch_last(void);
/* Conversions done by fallbacks on this thread since the last reset. */
MFT_API int64_t mft_dispatch_conversions(void);
MFT_API void mft_dispatch_conversions_reset(void);

/* Kernel usage on this thread since the last reset, as text: one line per
 * (op, kernel) that ran or declined, "op kernel N calls M conversions D
 * declined", most-called first (a user kernel that only declined has 0
 * calls). Returns the length the full text needs (as snprintf); buf may be
 * NULL with len 0 to measure. */
MFT_API size_t mft_dispatch_stats(char *buf, size_t len);
MFT_API void mft_dispatch_stats_reset(void);

/* Strict levels (per process; default OFF):
 *   MFT_STRICT_OFF       fallbacks and operand conversions run (counted);
 *   MFT_STRICT_FALLBACK  a dispatch that needs a fallback (no kernel for
 *                        the asked format and dtype takes the call) fails;
 *                        operands not packed in the kernel's format are
 *                        still converted;
 *   MFT_STRICT_ALL       also every conversion the dispatcher would do fails:
 *                        an input the kernel needs packed that is not (a
 *                        strided view, the other format), an output the
 *                        kernel would write in another format.
 * A refused dispatch fails its op with MFT_ERR_UNSUPPORTED and a message
 * naming the public function, the op, the key, the kernel and (ALL) the
 * operand and its layout; nothing has run and no output was written.
 * Conversions an op does itself before dispatching (a weight repacked by
 * its entry point, a gradient turned into its input's format) are not
 * dispatcher conversions: bound those with a reorder budget
 * (mft_reorder_budget_begin, mft/profile.h). */
typedef enum mft_strict_level {
    MFT_STRICT_OFF,
    MFT_STRICT_FALLBACK,
    MFT_STRICT_ALL,
    MFT_STRICT_COUNT
} mft_strict_level;
/* Sets the level; MFT_ERR_INVALID (level unchanged) for a value out of range. */
MFT_API mft_status mft_dispatch_set_strict_level(mft_strict_level level);
MFT_API mft_strict_level mft_dispatch_strict_level(void);
/* mft_dispatch_set_strict(true) sets MFT_STRICT_FALLBACK, false MFT_STRICT_
 * OFF; mft_dispatch_strict() is true at any level above OFF. */
MFT_API void mft_dispatch_set_strict(bool strict);
MFT_API bool mft_dispatch_strict(void);

/* Logging: level 1 = one line per dispatch. MFT_VERBOSE in the environment
 * sets the initial level. The callback receives one line without newline
 * (NULL restores the default, which writes to stderr). */
MFT_API void mft_set_verbose(int level);
MFT_API int mft_verbose(void);
MFT_API void mft_set_log_callback(void (*cb)(const char *line, void *ctx), void *ctx);

/* The kernel table as text, one kernel per line: "op format dtype name",
 * user kernels first, marked " [user]" (" [user, conditional]" when
 * registered with an applicability test). Returns the length the full text
 * needs (as snprintf). */
MFT_API size_t mft_dispatch_list(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
