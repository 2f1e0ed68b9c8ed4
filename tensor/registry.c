/* tensor/registry.c — the op registry (mft/registry.h) as data: one
 * mft_op_info per row of MFT_OP_REGISTRY, each pointing at its format-rule
 * row, and the lookups by index and by name. Everything that needs the list
 * of ops at run time (rule lookup, the dispatcher's names, mft-rules, the
 * registry test) reads this table. */
#include <string.h>
#include "internal.h"

#define REG_ROW_(A, ID, name, fam, sig, nin, nout, rule, kind, disp)                              \
    {#name, #fam, MFT_OP_SIG_##sig, nin, nout, &mft__rules[MFT__RULE_##rule], MFT_OP_KIND_##kind,  \
     REG_IS_##disp},
#define REG_IS_DISPATCHED true
#define REG_IS_DIRECT false
static const mft_op_info g_ops[] = {MFT_OP_REGISTRY(REG_ROW_, 0)};
#undef REG_ROW_

#define REG_COUNT ((int)(sizeof g_ops / sizeof g_ops[0]))

int mft_op_count(void) { return REG_COUNT; }

const mft_op_info *mft_op_at(int i) { return i >= 0 && i < REG_COUNT ? &g_ops[i] : NULL; }

const mft_op_info *mft__op_find_n(const char *name, size_t n) {
    if (!name) return NULL;
    if (n >= 4 && !strncmp(name, "mft_", 4)) name += 4, n -= 4;
    for (int i = 0; i < REG_COUNT; i++)
        if (strlen(g_ops[i].name) == n && !memcmp(g_ops[i].name, name, n)) return &g_ops[i];
    return NULL;
}

const mft_op_info *mft_op_find(const char *name) {
    return name ? mft__op_find_n(name, strlen(name)) : NULL;
}
