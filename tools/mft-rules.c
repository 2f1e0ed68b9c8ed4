/* tools/mft-rules.c — the library's format rules (tensor/rules.def, the rows
 * ops read to tag their results) from the command line.
 *   mft-rules               the rule table and the op registry
 *                           (include/mft/registry.h) as Markdown:
 *                           docs/rules.md is this output;
 *   mft-rules OP...         one op's row each: its rule's output format,
 *                           ambiguity clause, backward clause, note and the
 *                           deviation from PyTorch 1.13 with its number in
 *                           docs/deviations.md;
 *   mft-rules --check FILE  exit 1 when FILE differs from the table (the
 *                           CTest check that keeps docs/rules.md generated).
 * Exit status: 0 ok, 1 --check found a difference, 2 bad arguments (an op
 * the registry does not have: the message lists the close names) or I/O. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mft/mft.h"
#include "tool_names.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b2 = realloc(buf, cap *= 2);
            if (!b2) free(buf);
            buf = b2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static void usage(FILE *f) {
    fprintf(f, "usage: mft-rules [OP...] [--check FILE]\n"
               "  no argument:   prints the format-rule table and the op registry as\n"
               "                 Markdown (docs/rules.md is this output)\n"
               "  OP...:         prints each op's row: output format, ambiguity clause,\n"
               "                 backward clause, note and the deviation from PyTorch 1.13\n"
               "                 (its number in docs/deviations.md); OP is a registry name\n"
               "                 (conv2d, mft_conv2d) or an in-place / out form (relu_, add_out)\n"
               "  --check FILE:  exit 1 if FILE differs from the Markdown table\n"
               "examples:\n"
               "  mft-rules > docs/rules.md\n"
               "  mft-rules conv2d\n"
               "  mft-rules relu_ softmax\n");
}

/* The explanation of clause `name` in section `section` of the Markdown
 * (the lines "- **NAME**: text." under "## <section>"), so the single-row
 * view says exactly what docs/rules.md says. Writes "" when absent. */
static void clause_text(const char *md, const char *section, const char *name, char *out,
                        size_t len) {
    out[0] = '\0';
    const char *s = strstr(md, section);
    if (!s) return;
    const char *end = strstr(s + strlen(section), "\n## ");
    char key[64];
    snprintf(key, sizeof key, "- **%s**: ", name);
    const char *p = strstr(s, key);
    if (!p || (end && p > end)) return;
    p += strlen(key);
    size_t n = strcspn(p, "\n");
    if (n > 0 && p[n - 1] == '.') n--;
    snprintf(out, len, "%.*s", (int)n, p);
}

static const char *kind_text(mft_op_kind k) {
    switch (k) {
    case MFT_OP_KIND_DIFF: return "differentiable (records a tape node)";
    case MFT_OP_KIND_PLAIN: return "not differentiable";
    case MFT_OP_KIND_BACKWARD: return "a backward function";
    case MFT_OP_KIND_KERNEL: return "a backward kernel's dispatch key (no public function)";
    }
    return "?";
}

/* False (with a message naming the close names) when the registry does not
 * know op. */
static bool known_op(const char *op) {
    if (mft_rule_for_op(op)) return true;
    char close[512];
    if (tool_close_op_names(op, close, sizeof close) > 0)
        fprintf(stderr, "mft-rules: no op named '%s'; close names: %s\n", op, close);
    else
        fprintf(stderr, "mft-rules: no op named '%s' (`mft-rules` lists every op)\n", op);
    return false;
}

/* Prints the row of op (a name known_op accepted). */
static void print_op(const char *op, const char *md) {
    const mft_format_rule *r = mft_rule_for_op(op);
    const char *name = strncmp(op, "mft_", 4) ? op : op + 4;
    const mft_op_info *info = mft_op_find(name);
    if (info) {
        printf("%s: mft_%s (family %s; %d input%s, %d output%s; %s%s)\n", info->name, info->name,
               info->family, info->ninputs, info->ninputs == 1 ? "" : "s", info->noutputs,
               info->noutputs == 1 ? "" : "s", kind_text(info->kind),
               info->dispatched ? "; dispatched" : "");
    } else {
        /* mft_rule_for_op resolved an in-place or out form of a row */
        size_t n = strlen(name);
        bool out_form = n > 4 && !strcmp(name + n - 4, "_out");
        size_t base = out_form ? n - 4 : n - 1;
        printf("%s: mft_%s, the %s form of %.*s (every mft_<op>_ and mft_<op>_out follows "
               "the in-place row)\n",
               name, name, out_form ? "out" : "in-place", (int)base, name);
    }
    char text[512];
    printf("  rule       %s (class %s)%s%s\n", r->name, r->op_class,
           r->operands[0] ? ", reads " : "", r->operands);
    clause_text(md, "## Output rules", mft_rule_output_name(r->output), text, sizeof text);
    printf("  output     %s: %s\n", mft_rule_output_name(r->output), text);
    clause_text(md, "## Ambiguity clauses", mft_rule_ambiguity_name(r->ambiguity), text,
                sizeof text);
    printf("  ambiguous  %s: %s\n", mft_rule_ambiguity_name(r->ambiguity), text);
    clause_text(md, "## Backward clauses", mft_rule_backward_name(r->backward), text, sizeof text);
    printf("  backward   %s: %s\n", mft_rule_backward_name(r->backward), text);
    if (r->note[0]) printf("  note       %s\n", r->note);
    clause_text(md, "## Blocked clauses", mft_rule_blocked_name(r->blocked), text, sizeof text);
    printf("  blocked    %s: %s; %s\n", mft_rule_blocked_name(r->blocked), text, r->blocked_note);
    if (r->deviation)
        printf("  PyTorch    differs (docs/deviations.md #%d): PyTorch 1.13: %s\n", r->deviation,
               r->pytorch);
    else
        printf("  PyTorch    1.13 agrees (no row of docs/deviations.md)\n");
    printf("  ops        ");
    int nops = 0;
    for (int k = 0; k < mft_op_count(); k++)
        if (mft_op_at(k)->rule == r) printf("%s%s", nops++ ? " " : "", mft_op_at(k)->name);
    printf("%s\n", nops ? "" : "(none: the row is chosen by the ops' arguments)");
}

int main(int argc, char **argv) {
    const char *check = NULL;
    int nops = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check") && i + 1 < argc) {
            check = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "mft-rules: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        } else {
            nops++;
        }
    }
    bool all_known = true; /* every name first: no partial output */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' && (i == 1 || strcmp(argv[i - 1], "--check")) && !known_op(argv[i]))
            all_known = false;
    if (!all_known) return 2;
    if (check && nops) {
        fprintf(stderr, "mft-rules: --check compares the whole table; give no op with it\n");
        return 2;
    }
    size_t need = mft_rules_markdown(NULL, 0);
    char *md = malloc(need + 1);
    if (!md) {
        fprintf(stderr, "mft-rules: out of memory\n");
        return 2;
    }
    mft_rules_markdown(md, need + 1);
    int rc = 0;
    if (nops) {
        int shown = 0;
        for (int i = 1; i < argc; i++) {
            if (argv[i][0] == '-') continue;
            if (shown++) printf("\n");
            print_op(argv[i], md);
        }
    } else if (!check) {
        fwrite(md, 1, need, stdout);
    } else {
        size_t len = 0;
        char *doc = read_all(check, &len);
        if (!doc) {
            fprintf(stderr, "mft-rules: cannot read %s\n", check);
            rc = 2;
        } else if (len != need || memcmp(doc, md, need)) {
            size_t i = 0;
            while (i < len && i < need && doc[i] == md[i]) i++;
            size_t line = 1;
            for (size_t k = 0; k < i; k++) line += md[k] == '\n';
            fprintf(stderr,
                    "mft-rules: %s differs from the rule table at line %zu; regenerate it with "
                    "`mft-rules > %s`\n",
                    check, line, check);
            rc = 1;
        } else {
            printf("%s matches the rule table (%d rows)\n", check, mft_rule_count());
        }
        free(doc);
    }
    free(md);
    return rc;
}
