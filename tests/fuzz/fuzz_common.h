/* tests/fuzz/fuzz_common.h — helpers shared by the fuzz targets: FZ_CHECK (prints
 * the broken invariant and traps, so libFuzzer reports a crash with the input),
 * a reader that turns the fuzzer's bytes into small ints / dims / "interesting"
 * int64 values (0, 1, huge, negative, near overflow), the error-contract check
 * for failing calls, the per-input leak check and a per-process scratch path.
 * Include after defining _POSIX_C_SOURCE (getpid). Header-only: static inline. */
#ifndef MFT_FUZZ_COMMON_H
#define MFT_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mft/mft.h"

/* libFuzzer entry point (prototype for -Wmissing-prototypes). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant that must hold: otherwise print file:line and the details, then
 * trap (libFuzzer and the replay both report the input). */
#define FZ_CHECK(cond, ...)                                                              \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n  ", __FILE__, __LINE__, \
                    #cond);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n  last error: %s: %s\n", mft_status_str(mft_last_error()), \
                    mft_last_error_message());                                           \
            fflush(stderr);                                                              \
            __builtin_trap();                                                            \
        }                                                                                \
    } while (0)

/* MFT_FUZZ_TRACE=1 in the environment: the targets print the calls they make
 * (to stderr), to turn a reproducer into a call sequence. */
static inline bool fz_trace(void) {
    static int on = -1;
    if (on < 0) on = getenv("MFT_FUZZ_TRACE") && *getenv("MFT_FUZZ_TRACE") && *getenv("MFT_FUZZ_TRACE") != '0';
    return on;
}
#define FZ_TRACE(...)                                  \
    do {                                               \
        if (fz_trace()) fprintf(stderr, __VA_ARGS__); \
    } while (0)

/* "[a,b,c]" of n int64 values into buf. */
static inline const char *fz_dims(char *buf, size_t len, int n, const int64_t *v) {
    size_t k = 0;
    buf[0] = '\0';
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)v[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* ------------------------------------------------------------------ input reader */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

/* Next byte; 0 once the input is exhausted (so every input decodes). */
static inline uint8_t fz_u8(fz_in *in) {
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}
static inline uint64_t fz_u64(fz_in *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}
static inline uint32_t fz_u16(fz_in *in) {
    uint32_t lo = fz_u8(in);
    return lo | (uint32_t)fz_u8(in) << 8;
}

/* A fuzzed int64: mostly small, sometimes interesting or raw. */
static inline int64_t fz_i64(fz_in *in) {
    /* values near the edges of int64 arithmetic */
    static const int64_t interesting[32] = {
        INT64_MAX,        INT64_MIN,        INT64_MAX / 2,        INT64_MAX / 2 + 1,
        INT64_MAX / 3,    INT64_MAX / 4,    INT64_MAX / 8,        INT64_MAX / 16,
        (int64_t)1 << 62, (int64_t)1 << 61, (int64_t)1 << 60,     (int64_t)1 << 53,
        ((int64_t)1 << 53) + 1, (int64_t)1 << 40, (int64_t)1 << 32, ((int64_t)1 << 32) - 1,
        (int64_t)1 << 31, ((int64_t)1 << 31) - 1, (int64_t)1 << 30, (int64_t)1 << 20,
        65536,            4096,             256,                  255,
        -1,               -2,               INT64_MIN + 1,        -((int64_t)1 << 62),
        INT32_MIN,        -((int64_t)1 << 32), 3037000499,        3037000500,
    };
    uint8_t s = fz_u8(in);
    switch (s >> 5) {
    case 0:
    case 1:
    case 2: return s & 7;                       /* 0..7 */
    case 3: return (int64_t)(s & 31) - 16;      /* -16..15 */
    case 4: return interesting[s & 31];
    case 5: return (int64_t)fz_u16(in);         /* 0..65535 */
    case 6: return (int64_t)fz_u64(in);         /* anything */
    default: return (int64_t)(s & 31) + 8;      /* 8..39 */
    }
}

/* A dim argument for a tensor of rank nd: mostly in range (negative too). */
static inline int fz_dim(fz_in *in, int nd) {
    uint8_t s = fz_u8(in);
    if (s < 224 || nd < 0) {
        int span = 2 * (nd > 0 ? nd : 1);
        return (int)(s % span) - (nd > 0 ? nd : 1);
    }
    static const int odd[8] = {-100, 100, 8, 9, -9, -10, 2147483647, -2147483647 - 1};
    return odd[s & 7];
}

/* ------------------------------------------------------------------ error contract */
/* A call failed (NULL / non-OK): the thread-local error must say so, with a
 * message naming an mft_ function. */
static inline void fz_check_failed_(const char *file, int line, const char *call) {
    mft_status e = mft_last_error();
    const char *m = mft_last_error_message();
    if (e == MFT_OK || !m || strncmp(m, "mft_", 4) != 0) {
        fprintf(stderr,
                "%s:%d: fuzz invariant failed: %s failed without a proper error: status %d, "
                "message '%s'\n",
                file, line, call, (int)e, m ? m : "(null)");
        fflush(stderr);
        __builtin_trap();
    }
}
#define FZ_FAILED(call) fz_check_failed_(__FILE__, __LINE__, call)

/* After each input: no tensor header or storage may be alive. */
static inline void fz_check_no_leaks(void) {
    long long t = (long long)mft_live_tensors(), s = (long long)mft_live_storages();
    if (t != 0 || s != 0) {
        fprintf(stderr, "fuzz invariant failed: %lld tensors and %lld storages alive after the input\n",
                t, s);
        fflush(stderr);
        __builtin_trap();
    }
}

/* ------------------------------------------------------------------ scratch files */
/* "<dir>/mft-fuzz-<tag>-<pid><ext>" with dir = $TMPDIR, else /dev/shm when it is a
 * directory, else /tmp. Per process, so parallel jobs (-jobs=N) do not collide. */
static inline void fz_scratch_path(char *buf, size_t len, const char *tag, const char *ext) {
    const char *dir = getenv("TMPDIR");
    struct stat sb;
    if (!dir || !*dir) dir = (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode)) ? "/dev/shm" : "/tmp";
    snprintf(buf, len, "%s/mft-fuzz-%s-%ld%s", dir, tag, (long)getpid(), ext);
}

/* Writes n bytes to path (truncating); traps if the scratch file cannot be written. */
static inline void fz_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    FZ_CHECK(f != NULL, "cannot create scratch file '%s'", path);
    FZ_CHECK(n == 0 || fwrite(data, 1, n, f) == n, "cannot write scratch file '%s'", path);
    FZ_CHECK(fclose(f) == 0, "cannot close scratch file '%s'", path);
}

#endif
