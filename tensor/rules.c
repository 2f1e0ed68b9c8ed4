/* tensor/rules.c — the format rules as data (mft/rules.h): the table built
 * from tensor/rules.def, the one decision routine every op calls to give its
 * results a tag (mft__rule_decide / mft__rule_apply), the Markdown rendering,
 * mft_explain_format, and the provenance records that let any tensor say
 * which op, rule and operand gave it its tag.
 *
 * Note [Provenance]
 * Each result made through mft__rule_apply gets a small reference-counted
 * record: op, row, deciding operand, the tag the rule gave, the tag and
 * origin docs/spec.md §3 settled on, what the strides allowed, the MFT_AT call site,
 * and a reference to the deciding operand's record. Records outlive their
 * tensors as long as a descendant needs them; a chain is cut after
 * PROV_MAX_DEPTH links so a loop `x = f(x)` keeps a bounded history. A record
 * that cannot be allocated is simply absent (the tensor's chain ends there):
 * provenance never turns an op into an error. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

const mft_format_rule mft__rules[MFT__RULE_COUNT] = {
#define R(ID, name, cls, OUT, AMB, BW, operands, note, dev, pt, BLK, bnote)                       \
    {name, cls, MFT_RULE_##OUT, MFT_AMBIG_##AMB, MFT_BACKWARD_##BW, operands, note, dev, pt,      \
     MFT_RULE_BLK_##BLK, bnote},
#include "rules.def"
#undef R
};

static const char *const g_output_names[MFT_RULE_OUTPUT_COUNT] = {
    "ITERATOR", "DESTINATION", "ANY_CL", "INPUT", "COMMON",
    "CONTIGUOUS", "IDENTITY", "VIEW", "DECLARED", "LIKE"};
static const char *const g_output_text[MFT_RULE_OUTPUT_COUNT] = {
    "as PyTorch's TensorIterator: one shared packed or dense layout if all operands have it, "
    "else dims ordered by the operands' strides (operands in argument order, broadcast dims "
    "skipped), packed",
    "the destination keeps its own strides and tag",
    "CHANNELS_LAST if the input's or the weight's tag is CHANNELS_LAST, else CONTIGUOUS; packed",
    "the input's tag, packed",
    "the tag all inputs share, else CONTIGUOUS; packed",
    "CONTIGUOUS, packed",
    "the input itself (a new reference)",
    "a view: the input's strides rearranged",
    "the format the caller asks for (DECLARED)",
    "the input's strides when it is dense, else dense strides in its dim order"};
static const char *const g_ambig_names[MFT_AMBIG_COUNT] = {"FIRST_OPERAND", "RULE", "SOURCE",
                                                            "DECLARED", "KEEP"};
static const char *const g_ambig_text[MFT_AMBIG_COUNT] = {
    "the first tensor operand's tag (INHERITED)", "the tag the rule decided (INHERITED)",
    "the viewed tensor's tag (INHERITED)", "the requested format (DECLARED)",
    "unchanged (the destination's tag)"};
static const char *const g_blocked_names[MFT_RULE_BLK_COUNT] = {
    "NATIVE", "FALLBACK", "VIEW", "DECLARED", "DESTINATION", "PLAIN"};
static const char *const g_blocked_text[MFT_RULE_BLK_COUNT] = {
    "runs on the blocks (plain pieces, Note [Blocked elementwise]): nothing is converted and the "
    "result takes the blocked operands' layout",
    "blocked operands are converted to plain packed copies (counted, cause `fallback`, "
    "attributed to the op; Note [Blocked fallback]) and a result of the first blocked operand's "
    "rank is converted back to that operand's format",
    "views at block boundaries only (docs/spec.md §7.8); the others are refused or copy",
    "makes the blocked format or descriptor the caller asks for",
    "a blocked destination keeps its blocks",
    "makes plain tensors only"};
static const char *const g_backward_names[MFT_BACKWARD_COUNT] = {
    "INPUT_FORMAT", "INVERSE_VIEW", "RESHAPE", "NONE", "REFUSED"};
static const char *const g_backward_text[MFT_BACKWARD_COUNT] = {
    "each input's gradient packed in that input's tag",
    "the inverse view of grad_output, converted to the input's tag when it does not fit "
    "(a GRADIENT conversion)",
    "a view when the forward was one; when the forward copied, a copy straight into the "
    "input's tag (a RESHAPE conversion)",
    "not differentiable", "refused while recording when the tensor requires grad"};

int mft_rule_count(void) { return MFT__RULE_COUNT; }
const mft_format_rule *mft_rule_at(int i) {
    return i >= 0 && i < MFT__RULE_COUNT ? &mft__rules[i] : NULL;
}
const char *mft_rule_output_name(mft_rule_output r) {
    return (unsigned)r < MFT_RULE_OUTPUT_COUNT ? g_output_names[r] : "?";
}
const char *mft_rule_ambiguity_name(mft_rule_ambiguity a) {
    return (unsigned)a < MFT_AMBIG_COUNT ? g_ambig_names[a] : "?";
}
const char *mft_rule_blocked_name(mft_rule_blocked b) {
    return (unsigned)b < MFT_RULE_BLK_COUNT ? g_blocked_names[b] : "?";
}
const char *mft_rule_backward_name(mft_rule_backward b) {
    return (unsigned)b < MFT_BACKWARD_COUNT ? g_backward_names[b] : "?";
}

/* The row of the op's registry entry (mft/registry.h); the in-place and
 * out forms of any op (mft_<op>_, mft_<op>_out) read the in-place row. */
const mft_format_rule *mft_rule_for_op(const char *op) {
    if (!op) return NULL;
    size_t n = strlen(op);
    const mft_op_info *info = mft__op_find_n(op, n);
    if (info) return info->rule;
    size_t base = n > 4 && !strcmp(op + n - 4, "_out") ? n - 4 : n > 1 && op[n - 1] == '_' ? n - 1 : n;
    if (base != n && mft__op_find_n(op, base)) return &mft__rules[MFT__RULE_INPLACE];
    return NULL;
}

/* ---------------------------------------------------------------- deciding */
static bool rules_rank_has_cl(int ndim) { return ndim >= 3 && ndim <= 5; }

static mft_format rules_tag_of(const mft_tensor *t) {
    return t && rules_rank_has_cl(t->ndim) ? t->tag : MFT_CONTIGUOUS;
}

static void rules_by(mft__decision *d, int k, const mft_tensor *t) {
    d->operand = k;
    d->from = t;
    d->operand_tag = t ? t->tag : MFT_CONTIGUOUS;
}

mft__decision mft__rule_decide(mft__rule_id rule, const char *op, int n,
                               const mft_tensor *const *operands, mft_format declared,
                               unsigned flags) {
    mft__decision d = {rule, op, MFT_CONTIGUOUS, -1, MFT_CONTIGUOUS, NULL, false};
    const int first = n > 0 && operands[0] ? 0 : -1;
    switch (mft__rules[rule].output) {
    case MFT_RULE_ITERATOR: /* strides: mft__ew_result_strides; tag if ambiguous: operand 0 */
    case MFT_RULE_INPUT:
    case MFT_RULE_IDENTITY:
    case MFT_RULE_VIEW:
    case MFT_RULE_LIKE:
    case MFT_RULE_DESTINATION:
        if (first >= 0) {
            rules_by(&d, 0, operands[0]);
            d.tag = rules_tag_of(operands[0]);
        }
        break;
    case MFT_RULE_ANY_CL:
        for (int k = 0; k < n && k < 2; k++) {
            if (operands[k] && operands[k]->tag == MFT_CHANNELS_LAST &&
                rules_rank_has_cl(operands[k]->ndim)) {
                rules_by(&d, k, operands[k]);
                d.tag = MFT_CHANNELS_LAST;
                break;
            }
        }
        break;
    case MFT_RULE_COMMON: {
        int k0 = -1;
        for (int k = 0; k < n; k++) {
            if (!operands[k]) continue;
            if (k0 < 0) {
                k0 = k;
                rules_by(&d, k, operands[k]);
                d.tag = rules_tag_of(operands[k]);
            } else if (rules_tag_of(operands[k]) != d.tag) {
                rules_by(&d, k, operands[k]); /* the first that disagrees */
                d.tag = MFT_CONTIGUOUS;
                break;
            }
        }
        break;
    }
    case MFT_RULE_CONTIGUOUS: break;
    case MFT_RULE_DECLARED:
        d.tag = declared == MFT_CHANNELS_LAST || mft__format_is_blocked(declared)
                    ? declared
                    : MFT_CONTIGUOUS;
        if (first >= 0) {
            d.operand = 0;
            d.from = operands[0];
            d.operand_tag = operands[0]->tag;
        }
        break;
    case MFT_RULE_OUTPUT_COUNT: break;
    }
    if ((flags & MFT__DECIDE_UNBATCHED) && d.tag != MFT_CONTIGUOUS) {
        d.tag = MFT_CONTIGUOUS;
        d.unbatched = true;
    }
    return d;
}

mft_format mft__rule_grad_format(mft_format input_tag, int ndim) {
    if (!rules_rank_has_cl(ndim)) return MFT_CONTIGUOUS;
    /* a gradient takes its input's packed layout; a BLOCKED input (a
     * descriptor without a tag) answers CONTIGUOUS here, and the tape keeps
     * its descriptor to convert to instead (autograd/backward.c, docs/spec.md §7.9) */
    return input_tag == MFT_CHANNELS_LAST || input_tag == MFT_NCHW8C || input_tag == MFT_NCHW16C
               ? input_tag
               : MFT_CONTIGUOUS;
}

/* ---------------------------------------------------------------- provenance */
#define PROV_MAX_DEPTH 32
typedef struct mft__prov {
    atomic_int refs;
    int16_t rule;  /* mft__rule_id, -1 */
    int8_t operand;
    uint8_t depth; /* links after this one */
    bool cut;      /* older links were dropped */
    bool fits_c, fits_cl, unbatched;
    mft_format tag, rule_tag, operand_tag;
    mft_origin origin;
    const char *op;
    const char *file;
    int line;
    struct mft__prov *parent;
} mft__prov;

void mft__prov_release(mft__prov *p) {
    while (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        mft__prov *up = p->parent;
        free(p);
        p = up;
    }
}

/* A fresh copy of the newest PROV_MAX_DEPTH / 2 links of up's chain, ending
 * in a cut: a chain then always shows between half and all of the last
 * PROV_MAX_DEPTH links, at an amortised cost of one copy per record. NULL
 * when out of memory. */
static mft__prov *rules_prov_trim(const mft__prov *up) {
    enum { KEEP = PROV_MAX_DEPTH / 2 };
    mft__prov *head = NULL, *tail = NULL;
    const mft__prov *src = up;
    for (int i = 0; i < KEEP && src; i++, src = src->parent) {
        mft__prov *c = malloc(sizeof *c);
        if (!c) {
            mft__prov_release(head);
            return NULL;
        }
        *c = *src;
        atomic_init(&c->refs, 1);
        c->parent = NULL;
        c->cut = true;
        c->depth = 0;
        if (tail) {
            tail->parent = c; /* the reference head..tail holds */
            tail->cut = false;
        } else {
            head = c;
        }
        tail = c;
    }
    int n = 0;
    for (mft__prov *c = head; c; c = c->parent) n++;
    for (mft__prov *c = head; c; c = c->parent) c->depth = (uint8_t)--n;
    return head;
}

static void rules_prov_record(mft_tensor *t, const mft__decision *d) {
    mft__prov *p = malloc(sizeof *p);
    if (!p) return; /* Note [Provenance]: absent, never an error */
    atomic_init(&p->refs, 1);
    p->rule = (int16_t)d->rule;
    p->operand = (int8_t)d->operand;
    p->unbatched = d->unbatched;
    p->fits_c = t->flags & MFT__F_FITS_CONTIG;
    p->fits_cl = t->flags & MFT__F_FITS_CL;
    p->tag = t->tag;
    p->origin = t->origin;
    p->rule_tag = d->tag;
    p->operand_tag = d->operand_tag;
    p->op = d->op;
    mft__site_get(&p->file, &p->line);
    p->parent = NULL;
    p->depth = 0;
    p->cut = false;
    mft__prov *up = d->from && d->from != t ? d->from->prov : NULL;
    if (up && up->depth + 1 >= PROV_MAX_DEPTH) {
        p->parent = rules_prov_trim(up);
        p->depth = p->parent ? (uint8_t)(p->parent->depth + 1) : 0;
        p->cut = p->parent == NULL;
    } else if (up) {
        atomic_fetch_add(&up->refs, 1);
        p->parent = up;
        p->depth = (uint8_t)(up->depth + 1);
    }
    mft__prov_release(t->prov);
    t->prov = p;
}

void mft__rule_apply(mft_tensor *t, const mft__decision *d) {
    if (!t) return;
    const mft_format_rule *r = &mft__rules[d->rule];
    switch (r->output) {
    case MFT_RULE_DESTINATION:
    case MFT_RULE_IDENTITY: return;
    case MFT_RULE_DECLARED:
        if (d->rule == MFT__RULE_STRIDED) { /* ambiguous: suggest_format */
            mft__tensor_set_tag_from(t, (t->flags & MFT__F_CL_STRIDES) ? MFT_CHANNELS_LAST
                                                                       : MFT_CONTIGUOUS);
            if (t->origin == MFT_INHERITED) t->origin = MFT_INFERRED;
        } else {
            mft__tensor_declare(t, rules_rank_has_cl(t->ndim) ? d->tag : MFT_CONTIGUOUS);
        }
        break;
    default: mft__tensor_set_tag_from(t, d->tag); break;
    }
    rules_prov_record(t, d);
}

void mft__rule_record(mft_tensor *t, const mft__decision *d) {
    if (t) rules_prov_record(t, d);
}

void mft__rule_apply1(mft_tensor *t, mft__rule_id rule, const char *op, const mft_tensor *x) {
    mft__decision d = mft__rule_decide(rule, op, 1, &x, MFT_CONTIGUOUS, 0);
    mft__rule_apply(t, &d);
}

bool mft_tensor_provenance_at(const mft_tensor *t, int depth, mft_provenance *out) {
    if (!t || !out || depth < 0) return false;
    const mft__prov *p = t->prov;
    for (int i = 0; p && i < depth; i++) p = p->parent;
    if (!p) return false;
    *out = (mft_provenance){p->op,
                            p->rule >= 0 ? &mft__rules[p->rule] : NULL,
                            p->tag,
                            p->origin,
                            p->rule_tag,
                            p->parent ? p->operand : -1,
                            p->fits_c,
                            p->fits_cl,
                            p->file,
                            p->line};
    return true;
}

/* ---------------------------------------------------------------- text */
static const char *rules_fmt(mft_format f) { return mft_format_name(f); }

/* The operand's name as the row's operand list gives it ("weight"). */
static void rules_operand_name(const mft_format_rule *r, int k, char *out, size_t n) {
    const char *p = r->operands;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p) p += 2;
    }
    if (!p || !*p || !strncmp(p, "every", 5) || !strncmp(p, "the ", 4)) {
        snprintf(out, n, "operand %d", k);
        return;
    }
    size_t len = strcspn(p, ",");
    snprintf(out, n, "operand %d (%.*s)", k, (int)len, p);
}

/* Why the row gave rule_tag, from the decision's facts. */
static void rules_clause(mft__text *b, const mft_format_rule *r, int operand,
                         mft_format operand_tag, mft_format rule_tag, bool unbatched) {
    char on[64];
    rules_operand_name(r, operand < 0 ? 0 : operand, on, sizeof on);
    if (unbatched) {
        mft__text_printf(b, "the input has no N dim, so the rule gives CONTIGUOUS");
        return;
    }
    switch (r->output) {
    case MFT_RULE_ITERATOR:
        mft__text_printf(
            b,
            "dims ordered by the operands' strides, %s first; ambiguous strides keep %s's "
            "tag %s",
            on, on, rules_fmt(operand_tag));
        break;
    case MFT_RULE_ANY_CL:
        if (operand >= 0)
            mft__text_printf(b, "%s is CHANNELS_LAST", on);
        else
            mft__text_printf(b, "neither %s is CHANNELS_LAST", r->operands);
        break;
    case MFT_RULE_INPUT:
    case MFT_RULE_IDENTITY: mft__text_printf(b, "%s is %s", on, rules_fmt(rule_tag)); break;
    case MFT_RULE_COMMON:
        if (rule_tag == MFT_CHANNELS_LAST || operand <= 0)
            mft__text_printf(b, "every input is %s", rules_fmt(rule_tag));
        else
            mft__text_printf(b, "%s is %s, unlike the inputs before it", on,
                             rules_fmt(operand_tag));
        break;
    case MFT_RULE_CONTIGUOUS: mft__text_printf(b, "the rule always gives CONTIGUOUS"); break;
    case MFT_RULE_VIEW:
        mft__text_printf(b, "a view of %s, which is %s", on, rules_fmt(operand_tag));
        break;
    case MFT_RULE_DECLARED: mft__text_printf(b, "%s was requested", rules_fmt(rule_tag)); break;
    case MFT_RULE_LIKE:
        mft__text_printf(b, "like %s, which is %s", on, rules_fmt(operand_tag));
        break;
    case MFT_RULE_DESTINATION: mft__text_printf(b, "the destination keeps its tag"); break;
    case MFT_RULE_OUTPUT_COUNT: break;
    }
}

size_t mft_tensor_provenance(const mft_tensor *t, char *buf, size_t len) {
    mft__text b = {buf, len, 0};
    if (len) buf[0] = '\0';
    if (!t) return 0;
    const mft__prov *p = t->prov;
    if (!p) {
        mft__text_printf(&b, "%s (%s): no provenance recorded (made before any rule ran)\n",
                         rules_fmt(t->tag), mft_origin_name(t->origin));
        return b.pos;
    }
    for (; p; p = p->parent) {
        const mft_format_rule *r = p->rule >= 0 ? &mft__rules[p->rule] : NULL;
        mft__text_printf(&b, "%s%s (%s) by %s", p == t->prov ? "" : "<- ", rules_fmt(p->tag),
                         mft_origin_name(p->origin), p->op ? p->op : "?");
        if (r) {
            mft__text_printf(&b, " [rule %s: %s]: ", r->name, g_output_names[r->output]);
            rules_clause(&b, r, p->operand, p->operand_tag, p->rule_tag, p->unbatched);
        }
        if (mft__format_is_blocked(p->tag))
            mft__text_printf(&b,
                             "; the result is blocked: its descriptor is %s (docs/spec.md §7.6)",
                             rules_fmt(p->tag));
        else if (p->origin == MFT_INFERRED && p->fits_c != p->fits_cl)
            mft__text_printf(&b, "; the result's strides fit only %s",
                             p->fits_cl ? "CHANNELS_LAST" : "CONTIGUOUS");
        else if (p->origin == MFT_INFERRED && !p->fits_c && !p->fits_cl)
            mft__text_printf(&b, "; the result's strides fit neither format, so CONTIGUOUS");
        else if (p->origin == MFT_INHERITED)
            mft__text_printf(
                &b, "; the result's strides fit both formats, so the rule's tag %s is kept",
                rules_fmt(p->rule_tag));
        if (p->file) mft__text_printf(&b, " at %s:%d", p->file, p->line);
        mft__text_printf(&b, "\n");
        if (p->cut) mft__text_printf(&b, "<- ... (older links dropped after %d)\n", PROV_MAX_DEPTH);
    }
    return b.pos;
}

mft_status mft_explain_format(const char *op, int n, const mft_tensor *const *inputs,
                              mft_format declared, mft_format_explanation *out) {
    const char *fn = "mft_explain_format";
    if (!op) {
        mft__null_arg(fn, "op");
        return MFT_ERR_NULL;
    }
    if (!out) {
        mft__null_arg(fn, "out");
        return MFT_ERR_NULL;
    }
    if (n > 0 && !inputs) {
        mft__null_arg(fn, "inputs");
        return MFT_ERR_NULL;
    }
    const mft_format_rule *r = mft_rule_for_op(op);
    if (!r) {
        mft__set_error(MFT_ERR_INVALID, "%s: no rule row names op '%s' (see docs/rules.md)", fn, op);
        return MFT_ERR_INVALID;
    }
    int need = r->output == MFT_RULE_ANY_CL ? 2
               : (r->output == MFT_RULE_CONTIGUOUS || r->output == MFT_RULE_DECLARED) ? 0
                                                                                      : 1;
    if (n < need) {
        mft__set_error(MFT_ERR_INVALID, "%s: rule '%s' of op '%s' reads %s: %d input(s) needed, got %d",
                       fn, r->name, op, r->operands, need, n);
        return MFT_ERR_INVALID;
    }
    for (int k = 0; k < n; k++) {
        if (!inputs[k]) {
            mft__set_error(MFT_ERR_NULL, "%s: inputs[%d] is NULL", fn, k);
            return MFT_ERR_NULL;
        }
    }
    if ((unsigned)declared >= MFT_FORMAT_COUNT) { /* checked even where the row ignores it */
        mft__set_error(MFT_ERR_FORMAT, "%s: declared format %d is not a memory format (0..%d)",
                       fn, (int)declared, MFT_FORMAT_COUNT - 1);
        return MFT_ERR_FORMAT;
    }
    mft__decision d = mft__rule_decide((mft__rule_id)(r - mft__rules), op, n, inputs, declared, 0);
    out->format = d.tag;
    out->rule = r;
    out->operand = d.operand;
    mft__text b = {out->text, sizeof out->text, 0};
    out->text[0] = '\0';
    mft__text_printf(&b, "%s: rule %s (%s): ", rules_fmt(d.tag), g_output_names[r->output],
                     r->name);
    rules_clause(&b, r, d.operand, d.operand_tag, d.tag, false);
    if (r->output != MFT_RULE_DESTINATION && r->output != MFT_RULE_IDENTITY)
        mft__text_printf(&b, "; when the result's strides fit both formats: %s",
                         g_ambig_text[r->ambiguity]);
    return MFT_OK;
}

/* ---------------------------------------------------------------- markdown */
size_t mft_rules_markdown(char *buf, size_t len) {
    mft__text b = {buf, len, 0};
    if (len) buf[0] = '\0';
    mft__text_printf(&b,
                     "# Format rules\n\n"
                     "Generated by `tools/mft-rules` from `tensor/rules.def` and the op registry "
                     "(`include/mft/registry.h`), the tables the library "
                     "itself reads to give every result its tag (`mft__rule_decide`). Do not edit: "
                     "`test_rules` fails when this file and the code differ.\n\n"
                     "Every result's layout is decided in two steps: its row's *output* rule gives "
                     "the strides and a tag (docs/spec.md §4); then docs/spec.md §3 reads the "
                     "strides: when they "
                     "fit exactly one format that format is the tag (INFERRED), when they fit both "
                     "the row's *ambiguity* clause decides (INHERITED), when they fit neither the "
                     "tag is CONTIGUOUS. Gradients follow the *backward* clause (docs/spec.md §5). "
                     "Deviation numbers point into `docs/deviations.md`. What each row does with "
                     "blocked operands (nChw8c, nChw16c, any descriptor: docs/spec.md §7) is its "
                     "*blocked* clause, in the second table.\n\n");
    mft__text_printf(
        &b, "| rule | class | output | ambiguous strides | backward | operands | note | ops "
            "| deviation (PyTorch 1.13) |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < MFT__RULE_COUNT; i++) {
        const mft_format_rule *r = &mft__rules[i];
        mft__text_printf(&b, "| %s | %s | %s | %s | %s | %s | %s | ", r->name, r->op_class,
                         g_output_names[r->output], g_ambig_names[r->ambiguity],
                         g_backward_names[r->backward], r->operands, r->note);
        int nops = 0;
        for (int k = 0; k < mft_op_count(); k++)
            if (mft_op_at(k)->rule == r)
                mft__text_printf(&b, "%s%s", nops++ ? " " : "", mft_op_at(k)->name);
        mft__text_printf(&b, "%s | ", nops ? "" : "—");
        if (r->deviation)
            mft__text_printf(&b, "#%d: %s |\n", r->deviation, r->pytorch);
        else
            mft__text_printf(&b, "— |\n");
    }
    mft__text_printf(&b,
                     "\n## Blocked operands\n\n"
                     "PyTorch 1.13 has no strided blocked tensors (its mkldnn tensors are opaque: "
                     "docs/deviations.md #%d), so these rows have no PyTorch column.\n\n"
                     "| rule | blocked | details |\n|---|---|---|\n",
                     MFT__DEVIATION_BLOCKED);
    for (int i = 0; i < MFT__RULE_COUNT; i++)
        mft__text_printf(&b, "| %s | %s | %s |\n", mft__rules[i].name,
                         g_blocked_names[mft__rules[i].blocked], mft__rules[i].blocked_note);
    mft__text_printf(&b, "\n## Blocked clauses\n\n");
    for (int i = 0; i < MFT_RULE_BLK_COUNT; i++)
        mft__text_printf(&b, "- **%s**: %s.\n", g_blocked_names[i], g_blocked_text[i]);
    mft__text_printf(&b, "\n## Output rules\n\n");
    for (int i = 0; i < MFT_RULE_OUTPUT_COUNT; i++)
        mft__text_printf(&b, "- **%s**: %s.\n", g_output_names[i], g_output_text[i]);
    mft__text_printf(&b, "\n## Ambiguity clauses (strides that fit both formats)\n\n");
    for (int i = 0; i < MFT_AMBIG_COUNT; i++)
        mft__text_printf(&b, "- **%s**: %s.\n", g_ambig_names[i], g_ambig_text[i]);
    mft__text_printf(&b, "\n## Backward clauses\n\n");
    for (int i = 0; i < MFT_BACKWARD_COUNT; i++)
        mft__text_printf(&b, "- **%s**: %s.\n", g_backward_names[i], g_backward_text[i]);
    static const char *const sigs[] = {"UNARY", "SCALAR", "RANGE", "BINARY", "NONE"};
    static const char *const kinds[] = {"DIFF", "PLAIN", "BACKWARD", "KERNEL"};
    mft__text_printf(
        &b, "\n## The op registry\n\n"
            "Every op, one row of `MFT_OP_REGISTRY` (`include/mft/registry.h`). *sig*: "
            "UNARY, SCALAR, RANGE and BINARY ops have the uniform `mft_X`, `mft_X_`, "
            "`mft_X_out` forms; *kind*: DIFF records a tape node, PLAIN is not "
            "differentiable, BACKWARD is a backward function, KERNEL a backward kernel's "
            "dispatch key; *dispatched*: runs through the kernel table (`mft/dispatch.h`). "
            "-1 inputs or outputs: any number.\n\n"
            "| op | family | sig | inputs | outputs | kind | dispatched | rule |\n"
            "|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < mft_op_count(); k++) {
        const mft_op_info *op = mft_op_at(k);
        mft__text_printf(&b, "| %s | %s | %s | %d | %d | %s | %s | %s |\n", op->name, op->family,
                         sigs[op->sig], op->ninputs, op->noutputs, kinds[op->kind],
                         op->dispatched ? "yes" : "no", op->rule->name);
    }
    return b.pos;
}
