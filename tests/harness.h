/* tests/harness.h — the tiny test harness every tests/test_*.c uses.
 *
 * CHECK(cond) records a failure with file:line and the condition text and goes
 * on; CHECK_EQ_I / CHECK_NEAR print both values. TEST_MAIN_END() asserts that no
 * tensor or storage is still alive (the zero-leak rule), prints
 * "N passed, M failed" and returns the exit code. Each test file defines
 * static void test_x(void) functions and runs them with RUN(test_x).
 *
 * SKIP(...) inside a test says why it cannot run here (a missing dataset) and
 * returns from it; a program that skipped anything and failed nothing exits
 * with 77, which CTest reports as "Skipped" (SKIP_RETURN_CODE in
 * tests/CMakeLists.txt), so a missing prerequisite never reads as a pass. */
#ifndef MFT_TEST_HARNESS_H
#define MFT_TEST_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mft/mft.h"

static int harness_checks_failed_ = 0;
static int harness_checks_passed_ = 0;
static int harness_tests_failed_ = 0;
static int harness_tests_run_ = 0;
static int harness_tests_skipped_ = 0;

#define HARNESS_SKIP_CODE 77

#define SKIP(...)                                                                     \
    do {                                                                              \
        harness_tests_skipped_++;                                                     \
        printf("SKIP: ");                                                             \
        printf(__VA_ARGS__);                                                          \
        printf("\n");                                                                 \
        return;                                                                       \
    } while (0)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            harness_checks_passed_++;                                                 \
        } else {                                                                      \
            harness_checks_failed_++;                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        if (cond) {                                                                   \
            harness_checks_passed_++;                                                 \
        } else {                                                                      \
            harness_checks_failed_++;                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
        }                                                                             \
    } while (0)

#define CHECK_EQ_I(a, b)                                                              \
    do {                                                                              \
        long long ha_ = (long long)(a), hb_ = (long long)(b);                         \
        CHECK_MSG(ha_ == hb_, "%s = %lld, %s = %lld", #a, ha_, #b, hb_);              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                         \
    do {                                                                              \
        double ha_ = (double)(a), hb_ = (double)(b);                                  \
        CHECK_MSG(fabs(ha_ - hb_) <= (tol), "%s = %.9g, %s = %.9g", #a, ha_, #b, hb_); \
    } while (0)

/* The call must fail with `status` and a message mentioning `needle`. */
#define CHECK_ERR(status, needle)                                                     \
    do {                                                                              \
        CHECK_MSG(mft_last_error() == (status), "status %s, message '%s'",            \
                  mft_status_str(mft_last_error()), mft_last_error_message());        \
        CHECK_MSG(strstr(mft_last_error_message(), (needle)) != NULL,                 \
                  "message '%s' lacks '%s'", mft_last_error_message(), (needle));     \
        mft_clear_error();                                                            \
    } while (0)

#define RUN(fn)                                                                       \
    do {                                                                              \
        int before_ = harness_checks_failed_;                                         \
        harness_tests_run_++;                                                         \
        mft_clear_error();                                                            \
        fn();                                                                         \
        if (harness_checks_failed_ != before_) {                                      \
            harness_tests_failed_++;                                                  \
            fprintf(stderr, "FAIL %s\n", #fn);                                        \
        }                                                                             \
    } while (0)

#define TEST_MAIN_END()                                                               \
    do {                                                                              \
        CHECK_EQ_I(mft_live_tensors(), 0);                                            \
        CHECK_EQ_I(mft_live_storages(), 0);                                           \
        printf("%d checks passed, %d checks failed\n", harness_checks_passed_,       \
               harness_checks_failed_);                                               \
        printf("%d passed, %d failed, %d skipped\n",                                  \
               harness_tests_run_ - harness_tests_failed_ - harness_tests_skipped_,    \
               harness_tests_failed_ + (harness_checks_failed_ && !harness_tests_failed_), \
               harness_tests_skipped_);                                               \
        return harness_checks_failed_    ? 1                                          \
               : harness_tests_skipped_ ? HARNESS_SKIP_CODE                           \
                                         : 0;                                         \
    } while (0)

#endif
