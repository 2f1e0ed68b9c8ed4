/* tensor/naming.c — names for what runs and what it holds: a tensor's name
 * (a parameter's dotted path such as "1.1.weight") and the thread's module
 * path, the stack of modules whose forward is running ("1.4" with the kind
 * "BatchNorm2d(16)"). nn/ sets both; errors, conversion events, profile rows,
 * tape nodes and the DOT picture read them (Note [Module path]).
 *
 * Note [Module path]
 * A module's forward pushes its name (its position or field name in its
 * parent: "1", "body", "shortcut") and kind before it runs and pops after;
 * the path is the names of the stack joined by '.', as PyTorch's
 * named_modules spells them. The stack lives in fixed thread-local arrays
 * (no heap: nothing to free at thread exit); a push beyond
 * MFT__PATH_DEPTH or past the buffer fails with a status and leaves the stack
 * as it was, and its pop is then a no-op pop of the matching failed push
 * (counted), so push/pop pairs stay balanced whatever happened. */
#include <string.h>
#include "internal.h"

#define MFT__PATH_DEPTH 32
#define MFT__PATH_CHARS 512
#define MFT__KIND_CHARS 96

static _Thread_local char tl_path[MFT__PATH_CHARS];
static _Thread_local int tl_len[MFT__PATH_DEPTH + 1]; /* path length before each push */
static _Thread_local char tl_kind[MFT__PATH_DEPTH][MFT__KIND_CHARS];
static _Thread_local int tl_depth = 0;
static _Thread_local int tl_failed = 0; /* failed pushes still to be popped */

mft_status mft_module_path_push(const char *name, const char *kind) {
    static const char fn[] = "mft_module_path_push";
    if (!name || !name[0]) {
        tl_failed++;
        const mft_status st = name ? MFT_ERR_INVALID : MFT_ERR_NULL;
        mft__set_error(st, "%s: name is %s", fn, name ? "empty" : "NULL");
        return st;
    }
    const size_t nlen = strlen(name), cur = (size_t)(tl_depth ? tl_len[tl_depth] : 0);
    const size_t need = cur + (tl_depth ? 1 : 0) + nlen;
    if (tl_failed || tl_depth >= MFT__PATH_DEPTH || need >= MFT__PATH_CHARS) {
        tl_failed++;
        mft__set_error(MFT_ERR_INVALID,
                       "%s: the module path is %d deep and %zu characters long; '%s' "
                       "would pass the limits (%d modules, %d characters)",
                       fn, tl_depth, cur, name, MFT__PATH_DEPTH, MFT__PATH_CHARS - 1);
        return MFT_ERR_INVALID;
    }
    size_t at = cur;
    if (tl_depth) tl_path[at++] = '.';
    memcpy(tl_path + at, name, nlen);
    tl_path[need] = '\0';
    tl_kind[tl_depth][0] = '\0';
    if (kind) {
        strncpy(tl_kind[tl_depth], kind, MFT__KIND_CHARS - 1);
        tl_kind[tl_depth][MFT__KIND_CHARS - 1] = '\0';
    }
    tl_depth++;
    tl_len[tl_depth] = (int)need;
    return MFT_OK;
}

void mft_module_path_pop(void) {
    if (tl_failed) {
        tl_failed--;
        return;
    }
    if (tl_depth == 0) return;
    tl_depth--;
    tl_path[tl_depth ? tl_len[tl_depth] : 0] = '\0';
}

const char *mft_module_path(void) { return tl_depth ? tl_path : ""; }

const char *mft_module_kind(void) { return tl_depth ? tl_kind[tl_depth - 1] : ""; }

int mft_module_depth(void) { return tl_depth; }

mft_status mft_tensor_set_name(mft_tensor *t, const char *name) {
    static const char fn[] = "mft_tensor_set_name";
    if (!t) {
        mft__set_error(MFT_ERR_NULL, "%s: t is NULL", fn);
        return MFT_ERR_NULL;
    }
    char *copy = NULL;
    if (name) {
        const size_t n = strlen(name);
        if (n > 255) {
            mft__set_error(MFT_ERR_INVALID, "%s: a name of %zu characters (at most 255)", fn, n);
            return MFT_ERR_INVALID;
        }
        copy = mft__alloc_or_err(fn, n + 1, 1);
        if (!copy) return MFT_ERR_NOMEM;
        memcpy(copy, name, n + 1);
    }
    mft__free(t->name);
    t->name = copy;
    return MFT_OK;
}

const char *mft_tensor_name(const mft_tensor *t) { return t ? t->name : NULL; }
