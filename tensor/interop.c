/* tensor/interop.c — layout descriptions of other systems <-> strides:
 * XLA's minor_to_major permutation, dimension-letter strings ("NCHW",
 * "NHWC", "NWC", "NDHWC"), named-format strides, and the minimum buffer size
 * of (sizes, strides) (docs/spec.md §1). */
#include <string.h>
#include "internal.h"

static mft_status interop_check(const char *fn, int ndim, const int64_t *sizes,
                                const void *other, const char *other_name) {
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: ndim %d is outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    if (ndim > 0 && (!sizes || !other)) {
        mft__set_error(MFT_ERR_NULL, "%s: %s is NULL", fn, !sizes ? "sizes" : other_name);
        return MFT_ERR_NULL;
    }
    return MFT_OK;
}

mft_status mft_min_storage_numel(int ndim, const int64_t *sizes, const int64_t *strides,
                                 int64_t *numel_out) {
    const char *fn = "mft_min_storage_numel";
    mft_status st = interop_check(fn, ndim, sizes, strides, "strides");
    if (st != MFT_OK) return st;
    if (!numel_out) {
        mft__set_error(MFT_ERR_NULL, "%s: numel_out is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, strides, MFT_U8) != MFT_OK) return mft_last_error();
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            *numel_out = 0;
            return MFT_OK;
        }
    }
    int64_t need = 1;
    for (int d = 0; d < ndim; d++)
        need += (sizes[d] - 1) * strides[d]; /* non-empty: overflow excluded by check_geometry */
    if (need < 1) need = 1;
    *numel_out = need;
    return MFT_OK;
}

mft_status mft_strides_from_minor_to_major(int ndim, const int64_t *sizes,
                                           const int *minor_to_major, int64_t *strides_out) {
    const char *fn = "mft_strides_from_minor_to_major";
    char a[MFT__DIMS_BUF];
    mft_status st = interop_check(fn, ndim, sizes, minor_to_major, "minor_to_major");
    if (st != MFT_OK) return st;
    if (ndim > 0 && !strides_out) {
        mft__set_error(MFT_ERR_NULL, "%s: strides_out is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, NULL, MFT_U8) != MFT_OK) return mft_last_error();
    bool seen[MFT_MAX_DIMS] = {false};
    int order[MFT_MAX_DIMS]; /* slowest first */
    for (int i = 0; i < ndim; i++) {
        int d = minor_to_major[i];
        if (d < 0 || d >= ndim || seen[d]) {
            mft__set_error(MFT_ERR_DIM, "%s: minor_to_major %s is not a permutation of 0..%d", fn,
                           mft__fmt_ints(a, sizeof a, ndim, minor_to_major), ndim - 1);
            return MFT_ERR_DIM;
        }
        seen[d] = true;
        order[ndim - 1 - i] = d;
    }
    mft__packed_strides(ndim, sizes, order, strides_out, false);
    return MFT_OK;
}

mft_status mft_minor_to_major_from_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                                           int *out) {
    const char *fn = "mft_minor_to_major_from_strides";
    mft_status st = interop_check(fn, ndim, sizes, strides, "strides");
    if (st != MFT_OK) return st;
    if (ndim > 0 && !out) {
        mft__set_error(MFT_ERR_NULL, "%s: minor_to_major_out is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, strides, MFT_U8) != MFT_OK) return mft_last_error();
    /* insertion sort fastest first: smaller stride first; on a tie the size-1
     * dim is faster; then the later logical dim is faster */
    for (int i = 0; i < ndim; i++) out[i] = ndim - 1 - i;
    for (int i = 1; i < ndim; i++) {
        int x = out[i], j = i - 1;
        while (j >= 0) {
            int y = out[j];
            bool x_first = strides[x] < strides[y] ||
                           (strides[x] == strides[y] && sizes[x] == 1 && sizes[y] != 1);
            if (!x_first) break;
            out[j + 1] = y;
            j--;
        }
        out[j + 1] = x;
    }
    return MFT_OK;
}

/* Logical dim letters per rank ("NCL" accepts W for L). */
static const char *interop_letters(int ndim) {
    switch (ndim) {
    case 3: return "NCL";
    case 4: return "NCHW";
    case 5: return "NCDHW";
    default: return NULL;
    }
}

mft_status mft_strides_from_letters(int ndim, const int64_t *sizes, const char *letters,
                                    int64_t *strides_out) {
    const char *fn = "mft_strides_from_letters";
    mft_status st = interop_check(fn, ndim, sizes, letters, "letters");
    if (st != MFT_OK) return st;
    const char *names = interop_letters(ndim);
    if (!names) {
        mft__set_error(MFT_ERR_RANK, "%s: letter layouts exist for rank 3, 4 and 5, not %d", fn, ndim);
        return MFT_ERR_RANK;
    }
    if (strlen(letters) != (size_t)ndim) {
        mft__set_error(MFT_ERR_INVALID, "%s: layout \"%s\" has %zu letters, rank is %d (dims %s)", fn,
                       letters, strlen(letters), ndim, names);
        return MFT_ERR_INVALID;
    }
    int m2m[MFT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        char c = letters[ndim - 1 - i];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        if (ndim == 3 && c == 'W') c = 'L';
        const char *p = strchr(names, c);
        if (!c || !p) {
            mft__set_error(MFT_ERR_INVALID, "%s: layout \"%s\": letter '%c' is not one of %s", fn,
                           letters, letters[ndim - 1 - i], names);
            return MFT_ERR_INVALID;
        }
        m2m[i] = (int)(p - names);
    }
    st = mft_strides_from_minor_to_major(ndim, sizes, m2m, strides_out);
    if (st != MFT_OK) mft__relabel_error(fn);
    if (st == MFT_ERR_DIM)
        mft__set_error(MFT_ERR_INVALID, "%s: layout \"%s\" repeats a letter (dims %s)", fn, letters,
                       names);
    return st == MFT_ERR_DIM ? MFT_ERR_INVALID : st;
}

mft_status mft_letters_from_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                                    char *buf, size_t len) {
    const char *fn = "mft_letters_from_strides";
    mft_status st = interop_check(fn, ndim, sizes, strides, "strides");
    if (st != MFT_OK) return st;
    const char *names = interop_letters(ndim);
    if (!names) {
        mft__set_error(MFT_ERR_RANK, "%s: letter layouts exist for rank 3, 4 and 5, not %d", fn, ndim);
        return MFT_ERR_RANK;
    }
    if (!buf || len < (size_t)ndim + 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: buffer of %zu bytes is too small for %d letters", fn,
                       buf ? len : 0, ndim);
        return MFT_ERR_INVALID;
    }
    int m2m[MFT_MAX_DIMS];
    st = mft_minor_to_major_from_strides(ndim, sizes, strides, m2m);
    if (st != MFT_OK) return mft__relabel_error(fn);
    for (int i = 0; i < ndim; i++) buf[i] = names[m2m[ndim - 1 - i]];
    buf[ndim] = '\0';
    return MFT_OK;
}

mft_status mft_strides_for_format(int ndim, const int64_t *sizes, mft_format fmt,
                                  int64_t *strides_out) {
    const char *fn = "mft_strides_for_format";
    mft_status st = interop_check(fn, ndim, sizes, strides_out, "strides_out");
    if (st != MFT_OK) return st;
    if (mft__check_geometry(fn, ndim, sizes, NULL, MFT_U8) != MFT_OK) return mft_last_error();
    if (fmt != MFT_CONTIGUOUS && !(fmt == MFT_CHANNELS_LAST && ndim >= 3 && ndim <= 5)) {
        mft__set_error(MFT_ERR_FORMAT, "%s: no packed strides for format %s at rank %d", fn,
                       mft_format_name(fmt), ndim);
        return MFT_ERR_FORMAT;
    }
    mft__format_strides(ndim, sizes, fmt, strides_out);
    return MFT_OK;
}
