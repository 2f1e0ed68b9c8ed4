/* tests/tensor/layout_golden.h — the golden layout files: reads tests/golden/onednn_layouts.txt (the
 * oneDNN 2.6 golden data written by tests/golden/gen_onednn_layouts.c; its
 * line format is described there) one case at a time, for the descriptor
 * test (test_layout_desc.c) and the blocked-tensor test
 * (test_blocked_tensor.c), tests/golden/ascend_layouts.txt the same way
 * (og_next_ascend), and any golden file whole. Header-only, test
 * code; include after harness.h and test_util.h. */
#ifndef MFT_TEST_LAYOUT_GOLDEN_H
#define MFT_TEST_LAYOUT_GOLDEN_H

#include <stdlib.h>
#include <string.h>
#include "mft/mft.h"

#define OG_MAX_TOKENS 20000

typedef struct og_case {
    const char *alias, *letters; /* "nChw16c", "aBcd16b" (point into the text) */
    int nd;
    int64_t sizes[MFT_MAX_DIMS], padded[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    int nb;
    int64_t bsize[MFT_MAX_BLOCKS];
    int bdim[MFT_MAX_BLOCKS];
    int64_t bytes;  /* dnnl_memory_desc_get_size (f32) */
    int64_t numel;  /* logical elements */
    int64_t npos;   /* slots read (== numel for a well-formed line) */
    int64_t pos[OG_MAX_TOKENS]; /* physical slot of logical element i */
} og_case;

/* The golden file `name` of tests/golden/ (MFT_TEST_DATA_DIR), NUL-terminated,
 * malloc'd; NULL with a failed CHECK when it cannot be read. */
static inline char *og_read_golden(const char *name) {
    char path[512];
    snprintf(path, sizeof path, MFT_TEST_DATA_DIR "/%s", name);
    size_t n = 0;
    unsigned char *t = tu_read_file(path, &n);
    CHECK_MSG(t != NULL, "cannot read %s", path);
    if (t) t[n] = '\0';
    return (char *)t;
}

static inline char *og_next_line(char **cur) {
    char *s = *cur;
    if (!s || !*s) return NULL;
    char *e = strchr(s, '\n');
    if (e) {
        *e = '\0';
        *cur = e + 1;
    } else {
        *cur = s + strlen(s);
    }
    return s;
}

/* Splits a line at blanks into tok (at most OG_MAX_TOKENS); the count. */
static inline int og_tokens(char *line, char **tok) {
    int nt = 0;
    for (char *p = strtok(line, " \t\r"); p && nt < OG_MAX_TOKENS; p = strtok(NULL, " \t\r"))
        tok[nt++] = p;
    return nt;
}

/* The next case of the text at *cur (modified in place); false at the end. */
static inline bool og_next(char **cur, og_case *c) {
    static char *tok[OG_MAX_TOKENS];
    for (char *line; (line = og_next_line(cur));) {
        if (line[0] == '#' || !line[0]) continue;
        const int nt = og_tokens(line, tok);
        int t = 0;
        c->alias = tok[t++];
        c->letters = tok[t++];
        c->nd = atoi(tok[t++]);
        for (int d = 0; d < c->nd; d++) c->sizes[d] = atoll(tok[t++]);
        for (int d = 0; d < c->nd; d++) c->padded[d] = atoll(tok[t++]);
        for (int d = 0; d < c->nd; d++) c->strides[d] = atoll(tok[t++]);
        c->nb = atoi(tok[t++]);
        for (int k = 0; k < c->nb && k < MFT_MAX_BLOCKS; k++) {
            c->bsize[k] = atoll(tok[t++]);
            c->bdim[k] = atoi(tok[t++]);
        }
        c->bytes = atoll(tok[t++]);
        c->numel = 1;
        for (int d = 0; d < c->nd; d++) c->numel *= c->sizes[d];
        c->npos = 0;
        while (t < nt && c->npos < OG_MAX_TOKENS) c->pos[c->npos++] = atoll(tok[t++]);
        return true;
    }
    return false;
}

/* One case of tests/golden/ascend_layouts.txt (tests/golden/gen_ascend_layouts.py
 * describes the line): an Ascend format, the element size, the logical sizes,
 * the storage slots and the slot of every logical element. */
typedef struct og_ascend {
    const char *format; /* "FRACTAL_Z" (points into the text) */
    int elem_bytes;
    int nd;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t numel, nslots, npos;
    int64_t pos[OG_MAX_TOKENS];
} og_ascend;

static inline bool og_next_ascend(char **cur, og_ascend *c) {
    static char *tok[OG_MAX_TOKENS];
    for (char *line; (line = og_next_line(cur));) {
        if (line[0] == '#' || !line[0]) continue;
        const int nt = og_tokens(line, tok);
        int t = 0;
        c->format = tok[t++];
        c->elem_bytes = atoi(tok[t++]);
        c->nd = atoi(tok[t++]);
        c->numel = 1;
        for (int d = 0; d < c->nd; d++) c->numel *= c->sizes[d] = atoll(tok[t++]);
        c->nslots = atoll(tok[t++]);
        c->npos = 0;
        while (t < nt && c->npos < OG_MAX_TOKENS) c->pos[c->npos++] = atoll(tok[t++]);
        return true;
    }
    return false;
}

#endif
