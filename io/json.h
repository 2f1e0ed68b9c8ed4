/* io/json.h — a small strict JSON reader and a string builder, only what
 * safetensors headers need (io/safetensors.c). Private to the io layer.
 *
 * The reader takes RFC 8259 JSON and is strict where the safetensors reader
 * must be: the text must be valid UTF-8 (no overlong forms, no surrogates),
 * strings may not hold raw control characters or lone \u surrogates,
 * duplicate keys are refused in every object, nesting is limited to
 * MFT__JSON_MAX_DEPTH. The document is a flat array of nodes in document
 * order: a container's children follow it, linked by `next`. Strings are
 * decoded (escapes resolved, NUL-terminated); numbers keep their text. */
#ifndef MFT_IO_JSON_H
#define MFT_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MFT__JSON_MAX_DEPTH 64
#define MFT__JSON_NONE ((size_t)-1)

typedef enum mft__json_type {
    MFT__JSON_NULL,
    MFT__JSON_FALSE,
    MFT__JSON_TRUE,
    MFT__JSON_NUMBER,
    MFT__JSON_STRING,
    MFT__JSON_ARRAY,
    MFT__JSON_OBJECT
} mft__json_type;

typedef struct mft__json_node {
    mft__json_type type;
    size_t pos;        /* byte offset of the value in the text */
    size_t str;        /* STRING: offset of the decoded bytes in doc->strings;
                          NUMBER: offset of its text in the source */
    size_t len;        /* their length in bytes */
    bool has_nul;      /* STRING: holds a \u0000 */
    size_t key;        /* member of an object: offset of the decoded key in doc->strings */
    size_t key_len;
    bool key_has_nul;
    size_t count;      /* ARRAY / OBJECT: number of children */
    size_t first;      /* first child, MFT__JSON_NONE when empty */
    size_t next;       /* next sibling, MFT__JSON_NONE for the last */
} mft__json_node;

typedef struct mft__json_doc {
    const char *text;  /* the source (borrowed) */
    mft__json_node *nodes;
    size_t nnodes, cap;
    char *strings;     /* decoded strings and keys, each NUL-terminated */
    size_t nstrings;
} mft__json_doc;

/* Parses one JSON value from text[0..len): leading JSON whitespace is
 * skipped, the value parsed, and *end set to the offset just after it (what
 * follows is the caller's business). Returns 0 on success (node 0 is the
 * value); -1 for malformed text, with "at byte P: <problem>" in err; -2 when
 * out of memory. On failure the doc holds nothing (freeing it is still
 * allowed). */
int mft__json_parse(const char *text, size_t len, mft__json_doc *doc, size_t *end, char *err,
                    size_t errlen);
void mft__json_free(mft__json_doc *doc);

/* Decoded string / key of a node (NUL-terminated; borrowed from doc). */
static inline const char *mft__json_str(const mft__json_doc *d, const mft__json_node *n) {
    return d->strings + n->str;
}
static inline const char *mft__json_key(const mft__json_doc *d, const mft__json_node *n) {
    return d->strings + n->key;
}
/* A NUMBER node as an unsigned integer <= max: 0 on success, 1 when it is
 * negative or not an integer (a fraction or an exponent), 2 when it exceeds
 * max. Other node types give 1. */
int mft__json_uint(const mft__json_doc *d, const mft__json_node *n, uint64_t max, uint64_t *out);
/* The member of an OBJECT node named key, NULL when absent. */
const mft__json_node *mft__json_member(const mft__json_doc *d, const mft__json_node *obj,
                                       const char *key);
/* Whether text[0..len) is valid UTF-8; *bad = offset of the first invalid
 * byte when not. */
bool mft__utf8_valid(const unsigned char *text, size_t len, size_t *bad);

/* ------------------------------------------------------------------ builder
 * A growing byte buffer for writing JSON. Appends after an allocation
 * failure do nothing and leave failed set. */
typedef struct mft__json_buf {
    char *data;
    size_t len, cap;
    bool failed;
} mft__json_buf;
void mft__jb_raw(mft__json_buf *b, const char *s, size_t n);
void mft__jb_str(mft__json_buf *b, const char *s); /* s quoted, escaped */
void mft__jb_printf(mft__json_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void mft__jb_free(mft__json_buf *b);

#endif
