/* ops/shape/record.c — the recording helpers the entry points of pad.c,
 * cat.c and split.c share (declared in shape_internal.h): running a forward
 * under a recording tape with grad mode off and the user's scope suspended,
 * and handing the result over like any op result. */
#include "shape_internal.h"

bool mft__shape_ag_begin(void) {
    mft__scope_suspend();
    return mft_set_grad_enabled(false);
}

void mft__shape_ag_end(bool prev) {
    mft_set_grad_enabled(prev);
    mft__scope_resume();
}

mft_tensor *mft__shape_ag_hand_over(const char *fn, mft_tensor *y) {
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}
