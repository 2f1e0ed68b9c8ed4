/* tests/tensor/test_naming.c — tensor names and the module path
 * (tensor/naming.c, Note [Module path]): set / replace / clear a name, its
 * limits and errors, names not inherited by views; the path as pushes and
 * pops nest, failed pushes leaving it unchanged and their pops balanced, the
 * depth and length limits, and the path being per thread. */
#include <pthread.h>
#include "harness.h"

static void test_tensor_name(void) {
    mft_tensor *t = mft_zeros(2, (const int64_t[]){2, 3}, MFT_F32, MFT_CONTIGUOUS);
    CHECK(t && mft_tensor_name(t) == NULL);
    char buf[16] = "1.1.weight";
    CHECK(mft_tensor_set_name(t, buf) == MFT_OK);
    buf[0] = 'X'; /* the name is a copy */
    CHECK(mft_tensor_name(t) && strcmp(mft_tensor_name(t), "1.1.weight") == 0);
    CHECK(mft_tensor_set_name(t, "fc.bias") == MFT_OK);
    CHECK(strcmp(mft_tensor_name(t), "fc.bias") == 0);
    mft_tensor *v = mft_slice(t, 1, 0, 2, 1);
    CHECK(v && mft_tensor_name(v) == NULL);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK(mft_tensor_set_name(t, longname) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_tensor_set_name: a name of 299 characters");
    CHECK(strcmp(mft_tensor_name(t), "fc.bias") == 0); /* unchanged on error */
    CHECK(mft_tensor_set_name(NULL, "x") == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_tensor_set_name");
    CHECK(mft_tensor_name(NULL) == NULL);
    CHECK(mft_tensor_set_name(t, NULL) == MFT_OK && mft_tensor_name(t) == NULL);
    CHECK(mft_tensor_set_name(t, "kept") == MFT_OK); /* freed with the tensor */
    mft_tensor_release(v);
    mft_tensor_release(t);
}

static void test_module_path(void) {
    CHECK(strcmp(mft_module_path(), "") == 0 && mft_module_depth() == 0);
    CHECK(strcmp(mft_module_kind(), "") == 0);
    CHECK(mft_module_path_push("1", "Sequential") == MFT_OK);
    CHECK(mft_module_path_push("4", "BatchNorm2d(16)") == MFT_OK);
    CHECK(strcmp(mft_module_path(), "1.4") == 0 && mft_module_depth() == 2);
    CHECK(strcmp(mft_module_kind(), "BatchNorm2d(16)") == 0);
    /* a failed push leaves the path; its pop does nothing */
    CHECK(mft_module_path_push("", "X") == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_module_path_push: name is empty");
    CHECK(mft_module_path_push(NULL, "X") == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_path_push");
    CHECK(strcmp(mft_module_path(), "1.4") == 0);
    mft_module_path_pop();
    mft_module_path_pop();
    CHECK(strcmp(mft_module_path(), "1.4") == 0);
    mft_module_path_pop();
    CHECK(strcmp(mft_module_path(), "1") == 0 && strcmp(mft_module_kind(), "Sequential") == 0);
    CHECK(mft_module_path_push("body", NULL) == MFT_OK);
    CHECK(strcmp(mft_module_path(), "1.body") == 0 && strcmp(mft_module_kind(), "") == 0);
    mft_module_path_pop();
    mft_module_path_pop();
    CHECK(strcmp(mft_module_path(), "") == 0 && mft_module_depth() == 0);
    mft_module_path_pop(); /* an extra pop on an empty path is harmless */
    CHECK(mft_module_depth() == 0);
}

static void test_module_path_limits(void) {
    int pushed = 0;
    mft_status st = MFT_OK;
    while (pushed < 40 && (st = mft_module_path_push("m", "K")) == MFT_OK) pushed++;
    CHECK_EQ_I(pushed, 32);
    CHECK_ERR(MFT_ERR_INVALID, "would pass the limits (32 modules");
    mft_module_path_pop(); /* the failed push's */
    CHECK_EQ_I(mft_module_depth(), 32);
    for (int i = 0; i < pushed; i++) mft_module_path_pop();
    CHECK_EQ_I(mft_module_depth(), 0);
    /* length: 200-character names, the third would pass 511 */
    char name[201];
    memset(name, 'n', 200);
    name[200] = '\0';
    CHECK(mft_module_path_push(name, NULL) == MFT_OK);
    CHECK(mft_module_path_push(name, NULL) == MFT_OK);
    CHECK(mft_module_path_push(name, NULL) == MFT_ERR_INVALID);
    mft_clear_error();
    CHECK_EQ_I(strlen(mft_module_path()), 401);
    for (int i = 0; i < 3; i++) mft_module_path_pop();
    CHECK_EQ_I(mft_module_depth(), 0);
    CHECK(strcmp(mft_module_path(), "") == 0);
}

static void *other_thread(void *arg) {
    int *ok = arg;
    *ok = strcmp(mft_module_path(), "") == 0 && mft_module_path_push("t", NULL) == MFT_OK &&
          strcmp(mft_module_path(), "t") == 0;
    mft_module_path_pop();
    return NULL;
}

static void test_module_path_per_thread(void) {
    CHECK(mft_module_path_push("main", NULL) == MFT_OK);
    int ok = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &ok) == 0);
    pthread_join(th, NULL);
    CHECK(ok);
    CHECK(strcmp(mft_module_path(), "main") == 0);
    mft_module_path_pop();
}

int main(void) {
    RUN(test_tensor_name);
    RUN(test_module_path);
    RUN(test_module_path_limits);
    RUN(test_module_path_per_thread);
    TEST_MAIN_END();
}
