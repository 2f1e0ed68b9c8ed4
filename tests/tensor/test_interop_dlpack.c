/* tests/tensor/test_interop_dlpack.c — DLPack round trips with PyTorch 1.13
 * and NumPy 1.24, live: runs tests/tensor/dlpack_roundtrip.py under
 * /usr/bin/python3 on the SHARED libmft of this build (its path comes from
 * CMake, MFT_SHARED_LIB) and turns each line it prints into a check: "ok
 * NAME" passes, "FAIL NAME: detail" fails. The script compares mft's reads
 * (mft_tensor_get, strides, data pointers, tags) with torch's and NumPy's
 * and with its own formula of the logical index (see its header).
 * Skipped (77) under a sanitizer build (Python cannot load an ASan / TSan
 * library; test_dlpack.c covers the logic there), without /usr/bin/python3,
 * or when torch / numpy do not import (the script exits 77). */
#define _POSIX_C_SOURCE 200809L /* popen */
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
#include "harness.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DLPACK_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(MFT_TEST_SANITIZED)
#define DLPACK_TEST_SANITIZED 1
#endif

#define PYTHON "/usr/bin/python3"
/* The script must report at least this many checks: a run that stops early
 * (or a script reduced to nothing) is a failure, not a pass. */
#define MIN_CHECKS 900

static void test_roundtrips(void) {
#ifdef DLPACK_TEST_SANITIZED
    SKIP("sanitizer build: Python cannot load a sanitized libmft (test_dlpack covers the logic)");
#else
    if (access(PYTHON, X_OK) != 0) SKIP("%s not found", PYTHON);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             PYTHON " %s/tests/tensor/dlpack_roundtrip.py '%s' f32=%d f64=%d i32=%d i64=%d u8=%d "
                    "contiguous=%d channels_last=%d preserve=%d nchw16c=%d copy=%u 2>&1",
             MFT_SRC_DIR, MFT_SHARED_LIB, MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8,
             MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_PRESERVE, MFT_NCHW16C, MFT_DLPACK_COPY);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    char line[4096];
    long reported = -1, oks = 0;
    bool skipped = false;
    while (fgets(line, sizeof line, p)) {
        if (!strncmp(line, "ok ", 3)) {
            oks++;
            CHECK(true);
        } else if (!strncmp(line, "FAIL ", 5)) {
            CHECK_MSG(false, "%s", line);
        } else if (!strncmp(line, "checks ", 7)) {
            reported = strtol(line + 7, NULL, 10);
        } else if (!strncmp(line, "SKIP", 4)) {
            skipped = true;
            printf("%s", line);
        } else {
            printf("python: %s", line); /* tracebacks and warnings, shown */
        }
    }
    int st = pclose(p);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (skipped && code == 77) SKIP("torch or numpy missing under " PYTHON);
    CHECK_MSG(code == 0, "script exit status %d", code);
    CHECK_MSG(reported >= MIN_CHECKS, "script reported %ld checks, expected at least %d", reported,
              MIN_CHECKS);
    printf("%ld checks from the script passed\n", oks);
#endif
}

int main(void) {
    RUN(test_roundtrips);
    TEST_MAIN_END();
}
