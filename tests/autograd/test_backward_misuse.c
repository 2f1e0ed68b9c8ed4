/* tests/autograd/test_backward_misuse.c — what mft_backward says when it
 * cannot run (autograd/backward.c), one case per reason a loss has no node
 * on the open tape:
 *   - no tape is open;
 *   - nothing required grad: no op recorded a node, so the loss does not
 *     require grad (and, with grad mode off, says that too);
 *   - the loss was recorded on a tape that has ended (it requires no grad
 *     now, but a tape did record it);
 *   - the loss is a marked leaf.
 * Each call fails with MFT_ERR_INVALID and leaves every .grad as it was. */
#include "harness.h"

static const char *const k_no_grad =
    "mft_backward: the loss does not require grad: no input of the ops that produced it requires "
    "grad (mark parameters with mft_tensor_set_requires_grad)";
static const char *const k_not_on_tape =
    "mft_backward: loss was not produced by an op recorded on this thread's open tape";

static void check_invalid(mft_status st, const char *prefix, const char *tail) {
    CHECK_EQ_I(st, MFT_ERR_INVALID);
    const char *m = mft_last_error_message();
    CHECK_MSG(strncmp(m, prefix, strlen(prefix)) == 0, "message '%s'", m);
    CHECK_MSG(!tail || !strcmp(m + strlen(prefix), tail), "message '%s', expected tail '%s'", m,
              tail ? tail : "");
    mft_clear_error();
}

static void test_no_tape(void) {
    const int64_t s[2] = {2, 3};
    mft_tensor *w = mft_rand(2, s, MFT_F32, MFT_CONTIGUOUS, 1);
    CHECK(mft_tensor_set_requires_grad(w, true) == MFT_OK);
    mft_tensor *l = mft_sum(w, 0, NULL, false);
    check_invalid(mft_backward(l, NULL), k_not_on_tape,
                  " (no tape is open: call mft_tape_begin before the forward)");
    CHECK(mft_tensor_grad(w) == NULL);
    mft_tensor_release(l);
    mft_tensor_release(w);
}

static void test_nothing_requires_grad(void) {
    const int64_t s[2] = {2, 3};
    mft_tensor *a = mft_rand(2, s, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *b = mft_rand(2, s, MFT_F32, MFT_CONTIGUOUS, 2);
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = mft_mul(a, b);
    mft_tensor *l = mft_sum(y, 0, NULL, false);
    CHECK(l && !mft_tensor_requires_grad(l) && mft_tape_size() == 0);
    check_invalid(mft_backward(l, NULL), k_no_grad, "");
    /* marked, but recorded with grad mode off: nothing recorded either */
    CHECK(mft_tensor_set_requires_grad(a, true) == MFT_OK);
    mft_set_grad_enabled(false);
    mft_tensor *l2 = mft_sum(a, 0, NULL, false);
    check_invalid(mft_backward(l2, NULL), k_no_grad, "; grad mode is off on this thread");
    mft_set_grad_enabled(true);
    CHECK(mft_tensor_grad(a) == NULL);
    CHECK(mft_tape_end() == MFT_OK);
    mft_tensor_release(l2);
    mft_tensor_release(l);
    mft_tensor_release(y);
    mft_tensor_release(b);
    mft_tensor_release(a);
}

static void test_recorded_on_ended_tape(void) {
    const int64_t s[2] = {2, 3};
    mft_tensor *w = mft_rand(2, s, MFT_F32, MFT_CONTIGUOUS, 1);
    CHECK(mft_tensor_set_requires_grad(w, true) == MFT_OK);
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *r = mft_relu(w);
    mft_tensor *l = mft_sum(r, 0, NULL, false);
    CHECK(mft_tape_size() == 2 && mft_tensor_requires_grad(l));
    CHECK(mft_tape_end() == MFT_OK);
    CHECK(!mft_tensor_requires_grad(l));
    CHECK(mft_tape_begin() == MFT_OK);
    check_invalid(mft_backward(l, NULL), k_not_on_tape,
                  " (it was recorded on another tape: one that has ended, or another thread's)");
    CHECK(mft_tensor_grad(w) == NULL);
    /* a leaf: requires grad, produced by nothing */
    check_invalid(mft_backward(w, NULL), k_not_on_tape, " (it is a leaf)");
    CHECK(mft_tape_end() == MFT_OK);
    mft_tensor_release(l);
    mft_tensor_release(r);
    mft_tensor_release(w);
}

int main(void) {
    RUN(test_no_tape);
    RUN(test_nothing_requires_grad);
    RUN(test_recorded_on_ended_tape);
    TEST_MAIN_END();
}
