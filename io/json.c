/* io/json.c — the strict JSON reader and the string builder of io/json.h,
 * for safetensors headers. Recursive descent over a UTF-8-validated text,
 * depth-limited; every object's keys are checked for duplicates once the
 * object is complete (sorted copy of its keys). All memory goes through the
 * library's allocator hook. */
#include "json.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ------------------------------------------------------------------ UTF-8 */
bool mft__utf8_valid(const unsigned char *s, size_t len, size_t *bad) {
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0) lo = 0xA0; /* overlong */
            if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0) lo = 0x90; /* overlong */
            if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
        } else {
            if (bad) *bad = i;
            return false;
        }
        if (len - i <= n) {
            if (bad) *bad = i;
            return false;
        }
        if (s[i + 1] < lo || s[i + 1] > hi) {
            if (bad) *bad = i;
            return false;
        }
        for (size_t k = 2; k <= n; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) {
                if (bad) *bad = i;
                return false;
            }
        i += n + 1;
    }
    return true;
}

/* ------------------------------------------------------------------ reader */
typedef struct jp {
    const char *s;
    size_t len, p;
    mft__json_doc *doc;
    char *err;
    size_t errlen;
    int rc; /* 0, -1 malformed, -2 NOMEM */
} jp;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void jp_fail(jp *j, size_t at, const char *fmt, ...) {
    if (j->rc) return;
    j->rc = -1;
    if (!j->errlen) return;
    int k = snprintf(j->err, j->errlen, "at byte %zu: ", at);
    if (k < 0 || (size_t)k >= j->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err + k, j->errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

static void jp_nomem(jp *j) {
    if (j->rc) return;
    j->rc = -2;
    if (j->errlen) snprintf(j->err, j->errlen, "out of memory");
}

static void jp_ws(jp *j) {
    while (j->p < j->len) {
        char c = j->s[j->p];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        j->p++;
    }
}

/* A printable description of the byte at p (for messages). */
static void jp_what(const jp *j, size_t p, char *buf, size_t n) {
    if (p >= j->len) {
        snprintf(buf, n, "the end of the text");
        return;
    }
    unsigned char c = (unsigned char)j->s[p];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", c);
}

static size_t jp_new_node(jp *j, mft__json_type type) {
    mft__json_doc *d = j->doc;
    if (d->nnodes == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof(mft__json_node)) {
            jp_nomem(j);
            return MFT__JSON_NONE;
        }
        mft__json_node *nn = mft__alloc(cap * sizeof *nn, 16);
        if (!nn) {
            jp_nomem(j);
            return MFT__JSON_NONE;
        }
        if (d->nnodes) memcpy(nn, d->nodes, d->nnodes * sizeof *nn);
        mft__free(d->nodes);
        d->nodes = nn;
        d->cap = cap;
    }
    size_t i = d->nnodes++;
    mft__json_node *n = &d->nodes[i];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->pos = j->p;
    n->first = n->next = MFT__JSON_NONE;
    return i;
}

static int jp_hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Parses a string at j->p (the opening quote) into doc->strings; *off and
 * *len receive where the decoded bytes went. The decoded form is never
 * longer than the quoted source, so doc->strings (sized to the text) holds
 * every string with its terminator. */
static void jp_string(jp *j, size_t *off, size_t *len, bool *has_nul) {
    mft__json_doc *d = j->doc;
    size_t start = j->p;
    j->p++; /* the quote */
    char *out = d->strings + d->nstrings;
    size_t o = 0;
    *has_nul = false;
    for (;;) {
        if (j->p >= j->len) {
            jp_fail(j, start, "string not terminated");
            return;
        }
        unsigned char c = (unsigned char)j->s[j->p];
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20) {
            jp_fail(j, j->p, "control character 0x%02x inside a string", c);
            return;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            j->p++;
            continue;
        }
        if (j->p + 1 >= j->len) {
            jp_fail(j, start, "string not terminated");
            return;
        }
        char e = j->s[j->p + 1];
        j->p += 2;
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned u, u2;
            if (j->len - j->p < 4 || jp_hex4(j->s + j->p, &u) != 0) {
                jp_fail(j, j->p - 2, "bad \\u escape");
                return;
            }
            j->p += 4;
            if (u >= 0xDC00 && u <= 0xDFFF) {
                jp_fail(j, j->p - 6, "lone low surrogate \\u%04x", u);
                return;
            }
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (j->len - j->p < 6 || j->s[j->p] != '\\' || j->s[j->p + 1] != 'u' ||
                    jp_hex4(j->s + j->p + 2, &u2) != 0 || u2 < 0xDC00 || u2 > 0xDFFF) {
                    jp_fail(j, j->p - 6, "high surrogate \\u%04x without its low half", u);
                    return;
                }
                j->p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
            }
            /* the escape took >= 6 source bytes; its UTF-8 form at most 4 */
            if (u == 0) *has_nul = true;
            if (u < 0x80) {
                out[o++] = (char)u;
            } else if (u < 0x800) {
                out[o++] = (char)(0xC0 | (u >> 6));
                out[o++] = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                out[o++] = (char)(0xE0 | (u >> 12));
                out[o++] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (u & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | (u >> 18));
                out[o++] = (char)(0x80 | ((u >> 12) & 0x3F));
                out[o++] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default: jp_fail(j, j->p - 2, "unknown escape '\\%c'", e >= 0x20 && e < 0x7F ? e : '?'); return;
        }
    }
    out[o] = '\0';
    *off = d->nstrings;
    *len = o;
    d->nstrings += o + 1;
}

static void jp_number(jp *j, size_t node) {
    size_t start = j->p;
    const char *s = j->s;
    if (j->p < j->len && s[j->p] == '-') j->p++;
    if (j->p >= j->len || s[j->p] < '0' || s[j->p] > '9') {
        jp_fail(j, start, "malformed number");
        return;
    }
    if (s[j->p] == '0') {
        j->p++;
    } else {
        while (j->p < j->len && s[j->p] >= '0' && s[j->p] <= '9') j->p++;
    }
    if (j->p < j->len && s[j->p] == '.') {
        j->p++;
        if (j->p >= j->len || s[j->p] < '0' || s[j->p] > '9') {
            jp_fail(j, start, "malformed number (no digit after '.')");
            return;
        }
        while (j->p < j->len && s[j->p] >= '0' && s[j->p] <= '9') j->p++;
    }
    if (j->p < j->len && (s[j->p] == 'e' || s[j->p] == 'E')) {
        j->p++;
        if (j->p < j->len && (s[j->p] == '+' || s[j->p] == '-')) j->p++;
        if (j->p >= j->len || s[j->p] < '0' || s[j->p] > '9') {
            jp_fail(j, start, "malformed number (no digit in the exponent)");
            return;
        }
        while (j->p < j->len && s[j->p] >= '0' && s[j->p] <= '9') j->p++;
    }
    j->doc->nodes[node].str = start;
    j->doc->nodes[node].len = j->p - start;
}

typedef struct jp_key {
    const char *s;
    size_t len;
    size_t pos;
} jp_key;

static int jp_key_cmp(const void *a, const void *b) {
    const jp_key *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

/* Refuses an object (node) whose keys are not distinct. */
static void jp_check_keys(jp *j, size_t node) {
    mft__json_doc *d = j->doc;
    size_t n = d->nodes[node].count;
    if (n < 2) return;
    jp_key *v = mft__alloc(n * sizeof *v, 16);
    if (!v) {
        jp_nomem(j);
        return;
    }
    size_t k = 0;
    for (size_t c = d->nodes[node].first; c != MFT__JSON_NONE; c = d->nodes[c].next)
        v[k++] = (jp_key){d->strings + d->nodes[c].key, d->nodes[c].key_len, d->nodes[c].pos};
    qsort(v, n, sizeof *v, jp_key_cmp);
    for (size_t i = 1; i < n; i++)
        if (jp_key_cmp(&v[i - 1], &v[i]) == 0) {
            size_t later = v[i].pos > v[i - 1].pos ? v[i].pos : v[i - 1].pos;
            jp_fail(j, later, "duplicate key \"%.*s\"", v[i].len > 200 ? 200 : (int)v[i].len,
                    v[i].s);
            break;
        }
    mft__free(v);
}

static void jp_value(jp *j, int depth);

static void jp_container(jp *j, size_t node, bool object, int depth) {
    char what[32];
    j->p++; /* '[' or '{' */
    size_t prev = MFT__JSON_NONE;
    jp_ws(j);
    if (j->p < j->len && j->s[j->p] == (object ? '}' : ']')) {
        j->p++;
        return;
    }
    for (;;) {
        size_t key = 0, key_len = 0, key_pos = j->p;
        bool key_nul = false;
        if (object) {
            if (j->p >= j->len || j->s[j->p] != '"') {
                jp_what(j, j->p, what, sizeof what);
                jp_fail(j, j->p, "expected a key string, found %s", what);
                return;
            }
            jp_string(j, &key, &key_len, &key_nul);
            if (j->rc) return;
            jp_ws(j);
            if (j->p >= j->len || j->s[j->p] != ':') {
                jp_what(j, j->p, what, sizeof what);
                jp_fail(j, j->p, "expected ':' after a key, found %s", what);
                return;
            }
            j->p++;
            jp_ws(j);
        }
        size_t child = j->doc->nnodes;
        jp_value(j, depth + 1);
        if (j->rc) return;
        mft__json_node *c = &j->doc->nodes[child];
        if (object) {
            c->key = key;
            c->key_len = key_len;
            c->key_has_nul = key_nul;
            c->pos = key_pos;
        }
        if (prev == MFT__JSON_NONE)
            j->doc->nodes[node].first = child;
        else
            j->doc->nodes[prev].next = child;
        prev = child;
        j->doc->nodes[node].count++;
        jp_ws(j);
        if (j->p < j->len && j->s[j->p] == ',') {
            j->p++;
            jp_ws(j);
            continue;
        }
        if (j->p < j->len && j->s[j->p] == (object ? '}' : ']')) {
            j->p++;
            break;
        }
        jp_what(j, j->p, what, sizeof what);
        jp_fail(j, j->p, "expected ',' or '%c', found %s", object ? '}' : ']', what);
        return;
    }
    if (object) jp_check_keys(j, node);
}

static bool jp_literal(jp *j, const char *lit) {
    size_t n = strlen(lit);
    if (j->len - j->p < n || memcmp(j->s + j->p, lit, n) != 0) return false;
    j->p += n;
    return true;
}

static void jp_value(jp *j, int depth) {
    char what[32];
    if (depth > MFT__JSON_MAX_DEPTH) {
        jp_fail(j, j->p, "nesting deeper than %d", MFT__JSON_MAX_DEPTH);
        return;
    }
    if (j->p >= j->len) {
        jp_fail(j, j->p, "expected a value, found the end of the text");
        return;
    }
    char c = j->s[j->p];
    size_t node;
    switch (c) {
    case '{':
    case '[':
        node = jp_new_node(j, c == '{' ? MFT__JSON_OBJECT : MFT__JSON_ARRAY);
        if (node != MFT__JSON_NONE) jp_container(j, node, c == '{', depth);
        return;
    case '"': {
        node = jp_new_node(j, MFT__JSON_STRING);
        if (node == MFT__JSON_NONE) return;
        size_t off = 0, len = 0;
        bool nul = false;
        jp_string(j, &off, &len, &nul);
        mft__json_node *n = &j->doc->nodes[node];
        n->str = off;
        n->len = len;
        n->has_nul = nul;
        return;
    }
    case 't':
    case 'f':
    case 'n': {
        size_t at = j->p;
        mft__json_type t = c == 't' ? MFT__JSON_TRUE : c == 'f' ? MFT__JSON_FALSE : MFT__JSON_NULL;
        if (!jp_literal(j, c == 't' ? "true" : c == 'f' ? "false" : "null")) {
            jp_fail(j, at, "malformed literal");
            return;
        }
        node = jp_new_node(j, t);
        if (node != MFT__JSON_NONE) j->doc->nodes[node].pos = at;
        return;
    }
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            node = jp_new_node(j, MFT__JSON_NUMBER);
            if (node != MFT__JSON_NONE) jp_number(j, node);
            return;
        }
        jp_what(j, j->p, what, sizeof what);
        jp_fail(j, j->p, "expected a value, found %s", what);
    }
}

int mft__json_parse(const char *text, size_t len, mft__json_doc *doc, size_t *end, char *err,
                    size_t errlen) {
    memset(doc, 0, sizeof *doc);
    doc->text = text;
    if (errlen) err[0] = '\0';
    jp j = {text, len, 0, doc, err, errlen, 0};
    size_t bad = 0;
    if (!mft__utf8_valid((const unsigned char *)text, len, &bad)) {
        jp_fail(&j, bad, "not valid UTF-8 (byte 0x%02x)", (unsigned char)text[bad]);
        return j.rc;
    }
    doc->strings = mft__alloc(len + 1, 16);
    if (!doc->strings) {
        jp_nomem(&j);
        return j.rc;
    }
    jp_ws(&j);
    jp_value(&j, 0);
    if (j.rc) {
        mft__json_free(doc);
        doc->text = text;
        return j.rc;
    }
    if (end) *end = j.p;
    return 0;
}

void mft__json_free(mft__json_doc *doc) {
    if (!doc) return;
    mft__free(doc->nodes);
    mft__free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

int mft__json_uint(const mft__json_doc *d, const mft__json_node *n, uint64_t max, uint64_t *out) {
    if (n->type != MFT__JSON_NUMBER) return 1;
    const char *s = d->text + n->str;
    uint64_t v = 0;
    for (size_t i = 0; i < n->len; i++) {
        if (s[i] < '0' || s[i] > '9') return 1; /* '-', '.', 'e' */
        unsigned dig = (unsigned)(s[i] - '0');
        if (v > (max - dig) / 10) {
            /* keep scanning: a fraction or exponent later makes it a non-integer */
            for (size_t k = i; k < n->len; k++)
                if (s[k] < '0' || s[k] > '9') return 1;
            return 2;
        }
        v = v * 10 + dig;
    }
    *out = v;
    return 0;
}

const mft__json_node *mft__json_member(const mft__json_doc *d, const mft__json_node *obj,
                                       const char *key) {
    size_t kl = strlen(key);
    for (size_t c = obj->first; c != MFT__JSON_NONE; c = d->nodes[c].next) {
        const mft__json_node *m = &d->nodes[c];
        if (m->key_len == kl && memcmp(d->strings + m->key, key, kl) == 0) return m;
    }
    return NULL;
}

/* ------------------------------------------------------------------ builder */
void mft__jb_raw(mft__json_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX / 2 - b->len - 1) {
        b->failed = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *nd = mft__alloc(cap, 16);
        if (!nd) {
            b->failed = true;
            return;
        }
        if (b->len) memcpy(nd, b->data, b->len);
        mft__free(b->data);
        b->data = nd;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mft__jb_str(mft__json_buf *b, const char *s) {
    mft__jb_raw(b, "\"", 1);
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c != 0 && c >= 0x20 && c != '"' && c != '\\') continue;
        mft__jb_raw(b, run, (size_t)(p - run));
        if (c == 0) break;
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else
            snprintf(esc, sizeof esc, "\\u%04x", c);
        mft__jb_raw(b, esc, strlen(esc));
        run = p + 1;
    }
    mft__jb_raw(b, "\"", 1);
}

void mft__jb_printf(mft__json_buf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = true;
        return;
    }
    mft__jb_raw(b, tmp, (size_t)n);
}

void mft__jb_free(mft__json_buf *b) {
    mft__free(b->data);
    memset(b, 0, sizeof *b);
}
