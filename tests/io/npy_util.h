/* tests/io/npy_util.h — what the .npy tests share (test_npy.c on the committed
 * golden files, test_interop_npy.c on files NumPy writes live): the values of
 * tests/golden/gen_npy.py's formula, tensors made of them, and the check of a
 * directory of NumPy-written files against the cases.txt NumPy wrote with
 * them (shape, dtype, C or Fortran strides, the formula's values, NumPy's
 * weighted sum; refused dtypes refused naming their descr), and a scratch
 * directory. Include after defining _POSIX_C_SOURCE (mkdtemp). */
#ifndef MFT_TESTS_NPY_UTIL_H
#define MFT_TESTS_NPY_UTIL_H

#include <stdlib.h>
#include "test_util.h"

/* A fresh scratch directory /tmp/<tag>_XXXXXX into buf (mkdtemp; callers
 * define _POSIX_C_SOURCE); false, with the reason printed, when it fails. */
static inline bool npy_tmpdir(char *buf, size_t len, const char *tag) {
    snprintf(buf, len, "/tmp/%s_XXXXXX", tag);
    if (mkdtemp(buf)) return true;
    perror("mkdtemp");
    return false;
}

/* Removes the scratch directory and what it holds. */
static inline void npy_tmpdir_remove(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The generator's values (gen_npy.py value()): v(i) = (i*7) % 23 - 5 for the
 * C-order logical index i; u8 without the -5, i64 times 2^40, floats / 4. */
static inline double formula(int64_t i, mft_dtype dt) {
    const int64_t v = (i * 7) % 23;
    switch (dt) {
    case MFT_U8: return (double)v;
    case MFT_I32: return (double)(v - 5);
    case MFT_I64: return (double)((v - 5) * ((int64_t)1 << 40));
    default: return (double)(v - 5) / 4.0;
    }
}

/* A tensor of the generator's values in fmt. */
static inline mft_tensor *make(int nd, const int64_t *sizes, mft_dtype dt, mft_format fmt) {
    mft_tensor *t = mft_empty(nd, sizes, dt, fmt);
    if (!t || mft_tensor_numel(t) == 0) return t;
    int64_t ix[MFT_MAX_DIMS] = {0}, lin = 0;
    do mft_tensor_set(t, ix, formula(lin++, dt));
    while (tu_next_index(nd, sizes, ix));
    return t;
}

/* Every logical element equals formula(its C-order index). */
static inline bool has_formula_values(const mft_tensor *t) {
    const int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t);
    if (mft_tensor_numel(t) == 0) return true;
    int64_t ix[MFT_MAX_DIMS] = {0}, lin = 0;
    do {
        double got = mft_tensor_get(t, ix), want = formula(lin, mft_tensor_dtype(t));
        if (got != want) {
            fprintf(stderr, "element %lld: %.17g, expected %.17g\n", (long long)lin, got, want);
            return false;
        }
        lin++;
    } while (tu_next_index(nd, sz, ix));
    return true;
}

/* NumPy's weighted sum over the C-order logical elements (cases.txt WSUM). */
static inline double wsum(const mft_tensor *t) {
    const int nd = mft_tensor_ndim(t);
    double s = 0;
    if (mft_tensor_numel(t) == 0) return 0;
    int64_t ix[MFT_MAX_DIMS] = {0}, lin = 0;
    do s += mft_tensor_get(t, ix) * (double)(lin++ % 7 + 1);
    while (tu_next_index(nd, mft_tensor_sizes(t), ix));
    return s;
}

/* Packed strides, C order or column-major (size-0 dims counted as 1). */
static inline void packed_strides(int nd, const int64_t *sz, bool fortran, int64_t *st) {
    int64_t step = 1;
    for (int k = 0; k < nd; k++) {
        int d = fortran ? k : nd - 1 - k;
        st[d] = step;
        step *= sz[d] > 0 ? sz[d] : 1;
    }
}

static inline mft_dtype dtype_of_descr(const char *d) {
    static const struct { const char *s; mft_dtype dt; } m[] = {
        {"f4", MFT_F32}, {"f8", MFT_F64}, {"i4", MFT_I32}, {"i8", MFT_I64}, {"u1", MFT_U8}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strcmp(d + 1, m[i].s) == 0) return m[i].dt;
    return MFT_DTYPE_COUNT;
}

/* ------------------------------------------------------------------ NumPy's files */
static inline void npy_check_load(const char *dir, const char *name, const char *descr, int fortran,
                                  int nd, const int64_t *shape, double want_wsum, bool plain) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.npy", dir, name);
    for (int k = 0; k < 2; k++) {
        mft_tensor *t = mft_load_npy(p, k ? MFT_PRESERVE : MFT_CONTIGUOUS);
        CHECK_MSG(t != NULL, "%s: %s", name, mft_last_error_message());
        if (!t) return;
        int64_t st[MFT_MAX_DIMS];
        packed_strides(nd, shape, fortran, st);
        if (mft_tensor_numel(t) == 0 && !fortran) /* empty: the library's packed strides */
            mft_strides_for_format(nd, shape, MFT_CONTIGUOUS, st);
        CHECK_MSG(mft_tensor_dtype(t) == dtype_of_descr(descr) && tu_has_sizes(t, nd, shape),
                  "%s: dtype %s, rank %d", name, mft_dtype_name(mft_tensor_dtype(t)),
                  mft_tensor_ndim(t));
        CHECK_MSG(memcmp(mft_tensor_strides(t), st, sizeof(int64_t) * (size_t)nd) == 0,
                  "%s: strides not %s order", name, fortran ? "Fortran" : "C");
        CHECK_MSG(mft_tensor_storage_numel(t) == mft_tensor_numel(t) || mft_tensor_numel(t) == 0,
                  "%s: storage %lld for %lld elements", name,
                  (long long)mft_tensor_storage_numel(t), (long long)mft_tensor_numel(t));
        if (plain) CHECK_MSG(has_formula_values(t), "%s: values", name);
        double got = wsum(t), tol = fabs(want_wsum) * 1e-15;
        CHECK_MSG(fabs(got - want_wsum) <= tol, "%s: weighted sum %.17g, NumPy %.17g", name, got,
                  want_wsum);
        if (nd >= 3 && nd <= 5)
            CHECK_MSG(mft_tensor_format(t) == MFT_CONTIGUOUS, "%s: tag %s", name,
                      mft_format_name(mft_tensor_format(t)));
        mft_tensor_release(t);
    }
}

static inline void npy_check_refuse(const char *dir, const char *name, const char *descr) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.npy", dir, name);
    mft_tensor *t = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK_MSG(t == NULL, "%s loaded", name);
    mft_tensor_release(t);
    const char *m = mft_last_error_message();
    CHECK_MSG(mft_last_error() == MFT_ERR_UNSUPPORTED, "%s: %s", name, m);
    CHECK_MSG(strstr(m, "mft_load_npy") && strstr(m, p), "%s: message '%s'", name, m);
    const char *needle = strcmp(descr, "list") == 0 ? "structured dtype" : descr;
    CHECK_MSG(strstr(m, needle) != NULL, "%s: message '%s' lacks '%s'", name, m, needle);
    mft_clear_error();
}

/* Checks every file cases.txt in dir lists (the format gen_npy.py writes). */
static inline void npy_check_cases(const char *dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/cases.txt", dir);
    FILE *f = fopen(p, "r");
    CHECK_MSG(f != NULL, "cannot open %s", p);
    if (!f) return;
    char line[512];
    int loads = 0, refusals = 0;
    while (fgets(line, sizeof line, f)) {
        char kind[16], name[128], descr[32], shape_s[128];
        int version, fortran, plain;
        double ws;
        if (line[0] == '#') continue;
        if (sscanf(line, "refuse %127s %31s", name, descr) == 2) {
            npy_check_refuse(dir, name, descr);
            refusals++;
            continue;
        }
        if (sscanf(line, "%15s %127s %31s %d %d %127s %lg %d", kind, name, descr, &version,
                   &fortran, shape_s, &ws, &plain) != 8 ||
            strcmp(kind, "load") != 0) {
            CHECK_MSG(false, "bad line in cases.txt: %s", line);
            continue;
        }
        int64_t shape[MFT_MAX_DIMS];
        int nd = 0;
        if (strcmp(shape_s, "-") != 0)
            for (char *s = shape_s; nd < MFT_MAX_DIMS; s++) {
                shape[nd++] = strtoll(s, &s, 10);
                if (*s != ',') break;
            }
        npy_check_load(dir, name, descr, fortran, nd, shape, ws, plain == 1);
        loads++;
    }
    fclose(f);
    CHECK_EQ_I(loads, 32);
    CHECK_EQ_I(refusals, 10);
}


#endif
