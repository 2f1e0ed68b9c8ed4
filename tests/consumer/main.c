/* tests/consumer/main.c — the smallest real user of an installed mft: creates a
 * channels-last tensor, checks its layout through the public API only, prints
 * the library version and exits 0 only when every check holds. Built both with
 * find_package(mft) (CMakeLists.txt here) and with `pkg-config --cflags --libs
 * mft` (.ci/test.sh). */
#include <stdio.h>
#include <string.h>
#include <mft/mft.h>

static int failures = 0;

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "consumer: check failed: %s (%s)\n", #cond, mft_last_error_message()); \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

int main(void) {
    const int64_t sizes[4] = {2, 3, 4, 5}; /* N, C, H, W */
    mft_tensor *t = mft_zeros(4, sizes, MFT_F32, MFT_CHANNELS_LAST);
    EXPECT(t != NULL);
    if (t) {
        const int64_t *st = mft_tensor_strides(t);
        EXPECT(mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST));
        EXPECT(!mft_tensor_is_contiguous(t, MFT_CONTIGUOUS));
        EXPECT(mft_tensor_format(t) == MFT_CHANNELS_LAST);
        EXPECT(mft_tensor_sizes(t)[1] == 3); /* sizes stay logical: C is dim 1 */
        /* NHWC packed: (C*H*W, 1, W*C, C) */
        EXPECT(st[0] == 60 && st[1] == 1 && st[2] == 15 && st[3] == 3);
    }
    mft_tensor_release(t);
    EXPECT(mft_live_tensors() == 0);

    const char *v = mft_version();
    printf("mft %s (header %s)\n", v ? v : "(null)", MFT_VERSION_STRING);
    EXPECT(v != NULL && strcmp(v, MFT_VERSION_STRING) == 0);

    if (failures) {
        fprintf(stderr, "consumer: %d check(s) failed\n", failures);
        return 1;
    }
    printf("consumer: ok\n");
    return 0;
}
