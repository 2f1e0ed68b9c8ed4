/* mft/rules.h — the format rules as data, and asking why a tensor has its
 * format.
 *
 * Every op's format behaviour (docs/spec.md §4 output layout, docs/spec.md §3 ambiguity,
 * docs/spec.md §5 gradient layout, the deviation from PyTorch 1.13 if any) is one row
 * of a table compiled into the library (tensor/rules.def). The code that
 * gives a result its tag reads that row: ops ask the table to decide
 * (tensor/rules.c), so the table cannot drift from the behaviour.
 * `tools/mft-rules` prints it as Markdown (docs/rules.md is generated from it
 * and a test fails when they differ).
 *
 * Two ways to ask "why is this NHWC?":
 *   - before running an op: mft_explain_format(op, inputs) says which rule
 *     and clause decide the result's tag;
 *   - after: every tensor remembers its provenance — the op that produced it,
 *     the rule row, the operand that decided, the origin of its tag (declared /
 *     inferred / inherited) and the call site — chained back through the
 *     operands that decided (mft_tensor_provenance). */
#ifndef MFT_RULES_H
#define MFT_RULES_H

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

/* How a fresh result's layout (strides, then tag) is chosen (docs/spec.md §4). */
typedef enum mft_rule_output {
    MFT_RULE_ITERATOR,    /* TensorIterator: operands' stride order, first operand first */
    MFT_RULE_DESTINATION, /* in-place / _out: the destination keeps its strides and tag */
    MFT_RULE_ANY_CL,      /* CHANNELS_LAST if the input or the weight is CHANNELS_LAST */
    MFT_RULE_INPUT,       /* the input's tag, packed */
    MFT_RULE_COMMON,      /* the tag all inputs share, else CONTIGUOUS */
    MFT_RULE_CONTIGUOUS,  /* CONTIGUOUS */
    MFT_RULE_IDENTITY,    /* the input itself (a new reference) */
    MFT_RULE_VIEW,        /* a view of the input: its strides rearranged */
    MFT_RULE_DECLARED,    /* the format the caller passes */
    MFT_RULE_LIKE,        /* the input's strides if dense, else dense in its dim order */
    MFT_RULE_OUTPUT_COUNT
} mft_rule_output;

/* What happens when the result's strides fit both formats (docs/spec.md §3). */
typedef enum mft_rule_ambiguity {
    MFT_AMBIG_FIRST_OPERAND, /* the first tensor operand's tag (INHERITED) */
    MFT_AMBIG_RULE,          /* the tag the rule decided (INHERITED) */
    MFT_AMBIG_SOURCE,        /* the viewed tensor's tag (INHERITED) */
    MFT_AMBIG_DECLARED,      /* the requested format (DECLARED) */
    MFT_AMBIG_KEEP,          /* the destination's tag is not changed */
    MFT_AMBIG_COUNT
} mft_rule_ambiguity;

/* The layout of the gradients backward produces (docs/spec.md §5). */
typedef enum mft_rule_backward {
    MFT_BACKWARD_INPUT_FORMAT, /* each input's gradient packed in that input's tag */
    MFT_BACKWARD_INVERSE_VIEW, /* the inverse view of grad_output, converted to the input's tag when it does not fit */
    MFT_BACKWARD_RESHAPE,      /* as a view when it was one; a copy straight into the input's tag when the forward copied */
    MFT_BACKWARD_NONE,         /* not differentiable */
    MFT_BACKWARD_REFUSED,      /* refused while recording when an input requires grad */
    MFT_BACKWARD_COUNT
} mft_rule_backward;

/* What the row's ops do with blocked operands (docs/spec.md §7.9). */
typedef enum mft_rule_blocked {
    MFT_RULE_BLK_NATIVE,      /* run on the blocks: the result takes the blocked operands' layout */
    MFT_RULE_BLK_FALLBACK,    /* converted to plain (counted, cause fallback); a result of the
                                 blocked operand's rank converted back to its format */
    MFT_RULE_BLK_VIEW,        /* views at block boundaries only, the rest refused or copied */
    MFT_RULE_BLK_DECLARED,    /* makes the blocked format or descriptor the caller asks for */
    MFT_RULE_BLK_DESTINATION, /* a blocked destination keeps its blocks */
    MFT_RULE_BLK_PLAIN,       /* makes plain tensors only */
    MFT_RULE_BLK_COUNT
} mft_rule_blocked;

/* One row of the table. Strings are static. */
typedef struct mft_format_rule {
    const char *name;      /* row name, e.g. "conv2d" */
    const char *op_class;  /* docs/spec.md §4 family, e.g. "conv" */
    mft_rule_output output;
    mft_rule_ambiguity ambiguity;
    mft_rule_backward backward;
    const char *operands;  /* the operands the rule reads, e.g. "x, weight" */
    const char *note;      /* extra clause ("unbatched inputs: CONTIGUOUS"), or "" */
    int deviation;         /* row number in docs/deviations.md, 0 when PyTorch 1.13 agrees */
    const char *pytorch;   /* PyTorch 1.13's behaviour when it differs, else "" */
    mft_rule_blocked blocked; /* with blocked operands */
    const char *blocked_note; /* its details */
} mft_format_rule;

/* The table: rows 0 .. mft_rule_count() - 1 (borrowed, static). */
MFT_API int mft_rule_count(void);
MFT_API const mft_format_rule *mft_rule_at(int i);
/* The row of a public op ("conv2d", "mft_conv2d", "relu", "relu_",
 * "add_out"): its registry row's rule (mft/registry.h; in-place and out
 * forms: the in-place row); NULL for a name the registry does not have. */
MFT_API const mft_format_rule *mft_rule_for_op(const char *op);
/* "ITERATOR", "ANY_CL", ...; "FIRST_OPERAND", ...; "INPUT_FORMAT", ... */
MFT_API const char *mft_rule_output_name(mft_rule_output r);
MFT_API const char *mft_rule_ambiguity_name(mft_rule_ambiguity a);
MFT_API const char *mft_rule_backward_name(mft_rule_backward b);
/* "NATIVE", "FALLBACK", "VIEW", "DECLARED", "DESTINATION", "PLAIN"; "?" otherwise. */
MFT_API const char *mft_rule_blocked_name(mft_rule_blocked b);
/* The table as Markdown (what tools/mft-rules prints and docs/rules.md
 * holds). Returns the length the full text needs (as snprintf). */
MFT_API size_t mft_rules_markdown(char *buf, size_t len);

/* Why would op's result have its tag? Applies op's row to the inputs (n of
 * them, in the op's argument order; only the tensor operands the row names).
 * For DECLARED rows pass the requested format as declared (else ignored).
 * Fills *out; text reads like "CHANNELS_LAST: rule ANY_CL (conv2d): operand
 * 1 (weight) is CHANNELS_LAST". The tag a real result gets may still be
 * INFERRED from its strides (docs/spec.md §3): the provenance of the result says.
 * Errors: NULL op/out/inputs (MFT_ERR_NULL), unknown op (MFT_ERR_INVALID),
 * too few inputs for the row (MFT_ERR_INVALID). */
typedef struct mft_format_explanation {
    mft_format format;            /* the tag the rule gives */
    const mft_format_rule *rule;  /* the row (borrowed, static) */
    int operand;                  /* the operand that decided, -1 when none did */
    char text[320];
} mft_format_explanation;
MFT_API mft_status mft_explain_format(const char *op, int n, const mft_tensor *const *inputs,
                                      mft_format declared, mft_format_explanation *out);

/* Provenance of a tensor's tag: one link per producer, newest first. */
typedef struct mft_provenance {
    const char *op;              /* the op that gave the tag ("conv2d", "to_format", "view", ...) */
    const mft_format_rule *rule; /* its row, NULL for tensors from outside any row */
    mft_format tag;              /* the tag it got */
    mft_origin origin;           /* DECLARED / INFERRED / INHERITED */
    mft_format rule_tag;         /* the tag the rule decided (before docs/spec.md §3 looked at strides) */
    int operand;                 /* the operand whose provenance continues the chain, -1 */
    bool fits_contiguous, fits_channels_last; /* what the strides allowed */
    const char *file;            /* call site (MFT_AT), NULL when unknown */
    int line;
} mft_provenance;
/* Link depth of t's chain (0: the tensor's own record); false when there is
 * no such link (chains are cut after 32 links and at tensors made before any
 * rule ran). */
MFT_API bool mft_tensor_provenance_at(const mft_tensor *t, int depth, mft_provenance *out);
/* The chain as text, one line per link, e.g.
 *   CHANNELS_LAST (INFERRED) by relu [unary/ITERATOR] from operand 0 at train.c:42
 *   CHANNELS_LAST (DECLARED) by to_format [to_format/DECLARED]
 * Returns the length the full text needs (as snprintf); 0 for NULL t. */
MFT_API size_t mft_tensor_provenance(const mft_tensor *t, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
