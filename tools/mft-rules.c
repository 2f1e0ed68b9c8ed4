/* tools/mft-rules.c — prints the library's format-rule table (tensor/rules.def,
 * the rows ops read to tag their results) and the op registry
 * (include/mft/registry.h) as Markdown: docs/rules.md is this output. `--check
 * FILE` exits 1 when FILE differs (the CTest check that keeps docs/rules.md
 * generated), 2 on bad arguments or I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mft/mft.h"

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

int main(int argc, char **argv) {
    const char *check = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check") && i + 1 < argc) {
            check = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: mft-rules [--check FILE]\n"
                   "  prints the format-rule table as Markdown (docs/rules.md);\n"
                   "  --check FILE: exit 1 if FILE differs from it\n");
            return 0;
        } else {
            fprintf(stderr, "mft-rules: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    size_t need = mft_rules_markdown(NULL, 0);
    char *md = malloc(need + 1);
    if (!md) {
        fprintf(stderr, "mft-rules: out of memory\n");
        return 2;
    }
    mft_rules_markdown(md, need + 1);
    int rc = 0;
    if (!check) {
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
