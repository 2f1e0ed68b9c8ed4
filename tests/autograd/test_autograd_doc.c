/* tests/autograd/test_autograd_doc.c — docs/autograd.md's list of the ops
 * that record on the tape is the op registry's: every row of kind DIFF
 * (include/mft/registry.h, read through mft_op_count / mft_op_at), grouped
 * by family in registry order, no other op. The list sits between two
 * marker comments in the page; on a mismatch this test prints the list to
 * paste there. test_gradcheck_sweep.c checks that each of these ops does
 * record a node. */
#include "harness.h"

#define DOC_PATH MFT_TEST_DATA_DIR "/../../docs/autograd.md"
#define BEGIN_MARK "<!-- ops that record: begin (generated from the op registry) -->\n"
#define END_MARK "<!-- ops that record: end -->\n"

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *piece) {
    size_t n = strlen(piece);
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *p = realloc(t->s, cap);
        if (!p) return;
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, piece, n + 1);
    t->len += n;
}

/* The list as the page must show it: one line per family, "- **family**
 * (N): `a`, `b`, ...". */
static char *expected_list(int *nops) {
    text t = {NULL, 0, 0};
    put(&t, "");
    const int n = mft_op_count();
    *nops = 0;
    for (int i = 0; i < n; i++) {
        const mft_op_info *op = mft_op_at(i);
        if (op->kind != MFT_OP_KIND_DIFF) continue;
        bool seen = false; /* family already written */
        for (int j = 0; j < i && !seen; j++)
            seen = mft_op_at(j)->kind == MFT_OP_KIND_DIFF &&
                   !strcmp(mft_op_at(j)->family, op->family);
        if (seen) continue;
        int count = 0;
        for (int j = i; j < n; j++)
            count += mft_op_at(j)->kind == MFT_OP_KIND_DIFF &&
                     !strcmp(mft_op_at(j)->family, op->family);
        char head[96];
        snprintf(head, sizeof head, "- **%s** (%d): ", op->family, count);
        put(&t, head);
        bool first = true;
        for (int j = i; j < n; j++) {
            const mft_op_info *o = mft_op_at(j);
            if (o->kind != MFT_OP_KIND_DIFF || strcmp(o->family, op->family)) continue;
            put(&t, first ? "`" : ", `");
            put(&t, o->name);
            put(&t, "`");
            first = false;
        }
        put(&t, "\n");
        *nops += count;
    }
    return t.s;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    text t = {NULL, 0, 0};
    put(&t, "");
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf - 1, f)) > 0) {
        buf[got] = 0;
        put(&t, buf);
    }
    fclose(f);
    return t.s;
}

static void test_doc_lists_the_registry(void) {
    int nops = 0;
    char *want = expected_list(&nops);
    char *doc = read_file(DOC_PATH);
    CHECK_MSG(doc != NULL, "cannot read %s", DOC_PATH);
    CHECK(want && nops >= 60); /* elementwise alone has more */
    if (!doc || !want) {
        free(doc);
        free(want);
        return;
    }
    const char *b = strstr(doc, BEGIN_MARK), *e = b ? strstr(b, END_MARK) : NULL;
    CHECK_MSG(b && e, "%s lacks the markers %s and %s; between them the list is:\n%s", DOC_PATH,
              BEGIN_MARK, END_MARK, want);
    if (b && e) {
        b += strlen(BEGIN_MARK);
        const size_t len = (size_t)(e - b);
        CHECK_MSG(len == strlen(want) && strncmp(b, want, len) == 0,
                  "the list in docs/autograd.md differs from the registry's DIFF rows; "
                  "between the markers it must read:\n%s",
                  want);
        /* the count the page states before the list */
        char count[64];
        snprintf(count, sizeof count, "%d ops record", nops);
        CHECK_MSG(strstr(doc, count) != NULL, "docs/autograd.md must say \"%s\"", count);
    }
    free(doc);
    free(want);
}

/* The check itself: a list with one op missing or one extra does not match. */
static void test_check_catches_differences(void) {
    int nops = 0;
    char *want = expected_list(&nops);
    CHECK(want && strstr(want, "`relu`") && strstr(want, "`conv2d`"));
    CHECK(want && !strstr(want, "`argmax`"));              /* PLAIN */
    CHECK(want && !strstr(want, "`conv2d_backward`"));     /* BACKWARD */
    CHECK(want && !strstr(want, "conv2d_backward_input")); /* KERNEL */
    free(want);
}

int main(void) {
    RUN(test_doc_lists_the_registry);
    RUN(test_check_catches_differences);
    TEST_MAIN_END();
}
