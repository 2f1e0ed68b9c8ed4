/* tests/ops/test_dispatch_doc.c — docs/dispatch.md's table of dispatched ops
 * is the code's: the text between its markers equals what
 * mft__dispatch_markdown builds from the registry's DISPATCHED rows, their
 * kernel interfaces (ops/dispatch/interface.c) and the built-in kernel
 * tables; every DISPATCHED row has an interface and every interface is a
 * DISPATCHED row; each interface's inputs and outputs are named once per
 * tensor. On a mismatch the expected table is written to
 * dispatch_table.md in the working directory, to paste between the
 * markers. */
#include "dispatch/dispatch_internal.h"
#include "test_util.h"

#define DOC_PATH MFT_TEST_DATA_DIR "/../../docs/dispatch.md"
#define BEGIN_MARK "<!-- BEGIN dispatch table: generated, tests/ops/test_dispatch_doc.c checks it -->\n"
#define END_MARK "<!-- END dispatch table -->"

static int count_names(const char *list) {
    int n = *list ? 1 : 0;
    for (const char *p = list; *p; p++) n += *p == ',';
    return n;
}

static void test_every_dispatched_op_has_an_interface(void) {
    int n = 0;
    for (int i = 0; i < mft_op_count(); i++) {
        const mft_op_info *info = mft_op_at(i);
        const mft__kernel_iface *f = mft__kernel_iface_of((mft__op_id)i);
        if (!info->dispatched) {
            CHECK_MSG(f == NULL, "op %s is not dispatched but has an interface", info->name);
            continue;
        }
        n++;
        CHECK_MSG(f != NULL, "dispatched op %s has no kernel interface in "
                  "ops/dispatch/interface.c", info->name);
        if (!f) continue;
        CHECK_MSG(count_names(f->inputs) == f->nin && count_names(f->outputs) == f->nout,
                  "op %s: %d inputs named \"%s\", %d outputs named \"%s\"", info->name, f->nin,
                  f->inputs, f->nout, f->outputs);
        CHECK_MSG(f->packed < (1u << f->nin), "op %s: packed bits beyond its inputs", info->name);
        CHECK_MSG(mft__builtin_dtypes((mft__op_id)i) & (1u << MFT_F32),
                  "op %s has no f32 built-in", info->name);
    }
    CHECK(n >= 36);
}

static void test_doc_table_matches_code(void) {
    size_t need = mft__dispatch_markdown(NULL, 0);
    char *want = malloc(need + 1);
    CHECK(want != NULL);
    if (!want) return;
    CHECK(mft__dispatch_markdown(want, need + 1) == need && strlen(want) == need);
    size_t n = 0;
    char *doc = (char *)tu_read_file(DOC_PATH, &n);
    CHECK_MSG(doc != NULL, "cannot read %s", DOC_PATH);
    bool same = false;
    if (doc) {
        doc[n] = 0;
        char *b = strstr(doc, BEGIN_MARK), *e = b ? strstr(b, END_MARK) : NULL;
        CHECK_MSG(b && e, "%s lacks the markers '%s' and '%s'", DOC_PATH, BEGIN_MARK, END_MARK);
        if (b && e) {
            b += strlen(BEGIN_MARK);
            same = (size_t)(e - b) == need && !memcmp(b, want, need);
        }
    }
    CHECK_MSG(same, "the table in docs/dispatch.md is stale; the current one is in "
              "dispatch_table.md (working directory): paste it between the markers");
    if (!same) {
        FILE *f = fopen("dispatch_table.md", "w");
        if (f) {
            fputs(want, f);
            fclose(f);
        }
    }
    free(doc);
    free(want);
}

int main(void) {
    RUN(test_every_dispatched_op_has_an_interface);
    RUN(test_doc_table_matches_code);
    TEST_MAIN_END();
}
