/* tests/fuzz/fuzz_geometry.c — fuzz target for tensor geometry (mft/tensor.h).
 *
 * One input = mft_from_blob over a fixed aligned 4 KiB buffer with fuzzed dtype
 * (also invalid), ndim (-1..9 and wilder), sizes, strides (NULL, zero, huge,
 * negative), storage offset, nbytes and pointer alignment; then a chain of up to
 * 10 view operations chosen by the input (permute, transpose, narrow, select,
 * slice, unsqueeze, squeeze, expand, as_strided, view, reshape, flatten).
 *
 * Oracles:
 *  - from_blob succeeds exactly when an independent model of its documented
 *    rules and of the geometry bound (docs/spec.md 1.1: count * itemsize <= 2^59,
 *    span * itemsize <= INT64_MAX, also for empty tensors) says so, and refuses
 *    geometry beyond the bound with MFT_ERR_OVERFLOW; the simple views succeed
 *    exactly when their arguments are valid (MFT_ERR_OVERFLOW accepted where the
 *    result would break the bound); a successful view has the geometry the model
 *    predicts (sizes; strides of dims of size > 1; offset when non-empty); view /
 *    reshape / flatten keep the row-major element sequence (view: the same
 *    addresses);
 *  - every tensor: sizes/strides/offset non-negative, within the geometry bound,
 *    numel = product, the view inside its storage, is_contiguous (both formats)
 *    and is_dense equal to a
 *    reference implementation (non-empty tensors), suggest_format consistent
 *    with strides_like_channels_last, the rank 3-5 tag never contradicting
 *    unambiguous strides, mft_tensor_describe behaving as snprintf;
 *  - conversions (tensors of at most 4096 elements): contiguous(t, f) is
 *    contiguous in f and hash(t) == hash(contiguous(t, f)) for CONTIGUOUS and
 *    (rank 3-5) CHANNELS_LAST, with equal element bytes; to_format, clone,
 *    empty_like, zeros_like and to_dtype keep sizes / values as documented;
 *  - every failing call sets mft_last_error() != MFT_OK and an "mft_..." message;
 *  - after each input no tensor or storage is alive. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

enum { BUF_BYTES = 4096, ELEM_LIMIT = 4096, MAX_CHAIN = 10, DESC_BYTES = 1 << 16 };

static _Alignas(64) unsigned char g_buf[BUF_BYTES];
static char g_desc[DESC_BYTES], g_desc_small[512];

/* ------------------------------------------------------------------ arithmetic helpers */
/* Product of sizes; false on overflow (a size 0 makes it 0 without overflow). */
static bool numel_of(int nd, const int64_t *sizes, int64_t *out) {
    int64_t n = 1;
    bool ovf = false;
    for (int d = 0; d < nd; d++) {
        if (sizes[d] == 0) {
            *out = 0;
            return true;
        }
        if (!ovf && __builtin_mul_overflow(n, sizes[d], &n)) ovf = true;
    }
    *out = n;
    return !ovf;
}

/* The geometry bound (docs/spec.md 1.1, Note [Geometry bound]): every header, empty or
 * not, has count = prod max(size, 1) with count * itemsize <= 2^59, and
 * span = offset + sum max(size, 1) * stride with span * itemsize <= INT64_MAX. */
#define MAX_COUNT_BYTES ((int64_t)1 << 59)

/* count * itemsize exceeds the bound (or overflows). */
static bool count_exceeds_bound(int nd, const int64_t *sizes, size_t es) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        if (__builtin_mul_overflow(n, sizes[d] > 1 ? sizes[d] : 1, &n)) return true;
    return __builtin_mul_overflow(n, (int64_t)(es ? es : 1), &n) || n > MAX_COUNT_BYTES;
}

/* sum (size-1)*stride over all dims; false on overflow. */
static bool reach_of(int nd, const int64_t *sizes, const int64_t *strides, int64_t *out) {
    int64_t r = 0, term;
    for (int d = 0; d < nd; d++) {
        if (__builtin_mul_overflow(sizes[d] > 0 ? sizes[d] - 1 : 0, strides[d], &term) ||
            __builtin_add_overflow(r, term, &r))
            return false;
    }
    *out = r;
    return true;
}

/* span * itemsize overflows int64 (or a stride is negative). */
static bool span_overflows(int nd, const int64_t *sizes, const int64_t *strides, int64_t offset,
                           size_t es) {
    int64_t span = offset > 0 ? offset : 0, term;
    for (int d = 0; d < nd; d++) {
        if (strides[d] < 0) return true;
        if (__builtin_mul_overflow(sizes[d] > 1 ? sizes[d] : 1, strides[d], &term) ||
            __builtin_add_overflow(span, term, &span))
            return true;
    }
    return __builtin_mul_overflow(span, (int64_t)(es ? es : 1), &span);
}

static int wrap_dim(int d, int nd) { return d < 0 ? d + nd : d; }
static bool dim_ok(int d, int nd) { return nd > 0 && d >= -nd && d < nd; }

/* ------------------------------------------------------------------ reference predicates */
/* PyTorch's contiguity rule along an order (fastest dim first): size-1 dims skipped. */
static bool ref_packed_in_order(int nd, const int64_t *sizes, const int64_t *strides,
                                const int *fast_first) {
    int64_t expected = 1;
    for (int i = 0; i < nd; i++) {
        int d = fast_first[i];
        if (sizes[d] == 1) continue;
        if (strides[d] != expected) return false;
        expected *= sizes[d]; /* <= numel: no overflow */
    }
    return true;
}

static bool ref_contiguous(int nd, const int64_t *sizes, const int64_t *strides, mft_format f) {
    int order[MFT_MAX_DIMS] = {0};
    if (f == MFT_CONTIGUOUS) {
        for (int i = 0; i < nd; i++) order[i] = nd - 1 - i;
    } else if (nd == 3) {
        const int o[3] = {1, 2, 0};
        memcpy(order, o, sizeof o);
    } else if (nd == 4) {
        const int o[4] = {1, 3, 2, 0};
        memcpy(order, o, sizeof o);
    } else if (nd == 5) {
        const int o[5] = {1, 4, 3, 2, 0};
        memcpy(order, o, sizeof o);
    } else {
        return false;
    }
    return ref_packed_in_order(nd, sizes, strides, order);
}

/* PyTorch's is_non_overlapping_and_dense (non-empty tensors). */
static bool ref_dense(int nd, const int64_t *sizes, const int64_t *strides) {
    int order[MFT_MAX_DIMS], n = 0;
    for (int d = 0; d < nd; d++) {
        if (sizes[d] == 1) continue;
        int j = n++;
        while (j > 0 && strides[order[j - 1]] > strides[d]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = d;
    }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (strides[order[i]] != expected) return false;
        expected *= sizes[order[i]];
    }
    return true;
}

/* ------------------------------------------------------------------ per-tensor checks */
static const unsigned char *elem_ptr(const mft_tensor *t, const int64_t *idx) {
    const int64_t *st = mft_tensor_strides(t);
    int64_t off = 0;
    for (int d = 0; d < mft_tensor_ndim(t); d++) off += idx[d] * st[d]; /* bounds checked */
    return (const unsigned char *)mft_tensor_data(t) + off * (int64_t)mft_dtype_size(mft_tensor_dtype(t));
}

/* Advances a row-major index; false after the last one. */
static bool next_index(int nd, const int64_t *sizes, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < sizes[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* a and b hold the same element bytes in row-major order (same numel and dtype;
 * sizes may differ). addresses: the elements must also be the same memory. */
static void check_same_sequence(const mft_tensor *a, const mft_tensor *b, bool addresses,
                                const char *what) {
    int64_t n = mft_tensor_numel(a);
    FZ_CHECK(n == mft_tensor_numel(b), "%s: numel %lld vs %lld", what, (long long)n,
             (long long)mft_tensor_numel(b));
    FZ_CHECK(mft_tensor_dtype(a) == mft_tensor_dtype(b), "%s: dtype changed", what);
    if (n == 0 || n > ELEM_LIMIT) return;
    size_t es = mft_dtype_size(mft_tensor_dtype(a));
    int64_t ia[MFT_MAX_DIMS] = {0}, ib[MFT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        const unsigned char *pa = elem_ptr(a, ia), *pb = elem_ptr(b, ib);
        if (addresses)
            FZ_CHECK(pa == pb, "%s: element %lld is at a different address", what, (long long)k);
        else
            FZ_CHECK(memcmp(pa, pb, es) == 0, "%s: element %lld differs", what, (long long)k);
        next_index(mft_tensor_ndim(a), mft_tensor_sizes(a), ia);
        next_index(mft_tensor_ndim(b), mft_tensor_sizes(b), ib);
    }
}

static void check_describe(const mft_tensor *t, uint8_t cut) {
    size_t n = mft_tensor_describe(t, g_desc, sizeof g_desc);
    FZ_CHECK(n > 0, "describe returned 0");
    if (n >= sizeof g_desc) return;
    FZ_CHECK(strlen(g_desc) == n, "describe: returned %zu but wrote %zu chars", n, strlen(g_desc));
    size_t len = (size_t)cut % (sizeof g_desc_small + 1);
    memset(g_desc_small, 'X', sizeof g_desc_small);
    size_t m = mft_tensor_describe(t, len ? g_desc_small : NULL, len);
    FZ_CHECK(m == n, "describe: %zu with len %zu, %zu with a large buffer", m, len, n);
    if (len > 0) {
        size_t want = n < len - 1 ? n : len - 1;
        FZ_CHECK(memchr(g_desc_small, 0, len) != NULL && strlen(g_desc_small) == want,
                 "describe: len %zu should give %zu chars", len, want);
        FZ_CHECK(memcmp(g_desc_small, g_desc, want) == 0, "describe: truncated text differs");
        if (len < sizeof g_desc_small)
            FZ_CHECK(g_desc_small[len] == 'X', "describe wrote past len %zu", len);
    }
}

/* Structural invariants of any live tensor. */
static void check_tensor(const mft_tensor *t, uint8_t cut) {
    int nd = mft_tensor_ndim(t);
    FZ_CHECK(nd >= 0 && nd <= MFT_MAX_DIMS, "ndim %d", nd);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
    mft_dtype dt = mft_tensor_dtype(t);
    FZ_CHECK((unsigned)dt < MFT_DTYPE_COUNT, "dtype %d", (int)dt);
    for (int d = 0; d < nd; d++)
        FZ_CHECK(sz[d] >= 0 && st[d] >= 0, "dim %d: size %lld stride %lld", d, (long long)sz[d],
                 (long long)st[d]);
    int64_t numel, reach;
    FZ_CHECK(numel_of(nd, sz, &numel), "numel overflows int64");
    FZ_CHECK(numel == mft_tensor_numel(t), "numel %lld, product of sizes %lld",
             (long long)mft_tensor_numel(t), (long long)numel);
    int64_t off = mft_tensor_offset(t);
    FZ_CHECK(off >= 0, "offset %lld", (long long)off);
    size_t es = mft_dtype_size(dt);
    FZ_CHECK(!count_exceeds_bound(nd, sz, es) && !span_overflows(nd, sz, st, off, es),
             "header breaks the geometry bound (docs/spec.md 1.1)");
    if (numel > 0) {
        FZ_CHECK(reach_of(nd, sz, st, &reach), "non-empty view whose reach overflows int64");
        int64_t sn = mft_tensor_storage_numel(t);
        FZ_CHECK(off <= sn && reach < sn - off,
                 "view reaches outside its storage: offset %lld + reach %lld, storage %lld",
                 (long long)off, (long long)reach, (long long)sn);
        /* predicates against the reference (PyTorch's definitions) */
        bool c = mft_tensor_is_contiguous(t, MFT_CONTIGUOUS);
        bool l = mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST);
        bool dn = mft_tensor_is_dense(t);
        FZ_CHECK(c == ref_contiguous(nd, sz, st, MFT_CONTIGUOUS), "is_contiguous(CONTIGUOUS) = %d", c);
        FZ_CHECK(l == ref_contiguous(nd, sz, st, MFT_CHANNELS_LAST), "is_contiguous(CHANNELS_LAST) = %d", l);
        FZ_CHECK(dn == ref_dense(nd, sz, st), "is_dense = %d", dn);
        if (c) FZ_CHECK(mft_tensor_order_fits(t, MFT_CONTIGUOUS), "contiguous but order does not fit");
        if (l) FZ_CHECK(mft_tensor_order_fits(t, MFT_CHANNELS_LAST), "channels-last contiguous but order does not fit");
    }
    FZ_CHECK(!mft_tensor_is_contiguous(t, MFT_PRESERVE) && !mft_tensor_is_contiguous(t, MFT_FORMAT_COUNT),
             "is_contiguous of a non-format");
    bool like_cl = mft_tensor_strides_like_channels_last(t);
    FZ_CHECK(mft_tensor_suggest_format(t) == (like_cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS),
             "suggest_format disagrees with strides_like_channels_last");
    mft_format tag = mft_tensor_format(t);
    FZ_CHECK(tag == MFT_CONTIGUOUS || tag == MFT_CHANNELS_LAST, "tag %d", (int)tag);
    FZ_CHECK((unsigned)mft_tensor_format_origin(t) < MFT_ORIGIN_COUNT, "origin %d",
             (int)mft_tensor_format_origin(t));
    if (nd >= 3 && nd <= 5) {
        bool fc = mft_tensor_order_fits(t, MFT_CONTIGUOUS);
        bool fl = mft_tensor_order_fits(t, MFT_CHANNELS_LAST);
        if (fl && !fc) FZ_CHECK(tag == MFT_CHANNELS_LAST, "tag CONTIGUOUS but only NHWC fits");
        if (fc && !fl) FZ_CHECK(tag == MFT_CONTIGUOUS, "tag CHANNELS_LAST but only NCHW fits");
    } else {
        FZ_CHECK(tag == MFT_CONTIGUOUS, "rank %d tagged CHANNELS_LAST", nd);
    }
    check_describe(t, cut);
}

static uint64_t hash_ok(const mft_tensor *t) {
    mft_clear_error();
    uint64_t h = mft_tensor_hash(t);
    FZ_CHECK(mft_last_error() == MFT_OK, "hash failed");
    return h;
}

/* Conversions of a tensor with at most ELEM_LIMIT elements. */
static void check_conversions(const mft_tensor *t, fz_in *in) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t);
    mft_dtype dt = mft_tensor_dtype(t);
    bool cl_ok = nd >= 3 && nd <= 5;
    if (fz_trace()) {
        char a[200], b[200];
        fprintf(stderr, "  conversions of t (%s, sizes %s, strides %s, offset %lld): hash, contiguous, to_format, "
                        "clone, zeros_like, empty_like, to_dtype\n",
                mft_dtype_name(dt), fz_dims(a, sizeof a, nd, sz), fz_dims(b, sizeof b, nd, mft_tensor_strides(t)),
                (long long)mft_tensor_offset(t));
    }
    uint64_t h = hash_ok(t);
    FZ_CHECK(h == hash_ok(t), "hash not deterministic");
    for (int f = MFT_CONTIGUOUS; f <= MFT_CHANNELS_LAST; f++) {
        bool ok = f == MFT_CONTIGUOUS || cl_ok;
        mft_clear_error();
        mft_tensor *c = mft_contiguous(t, (mft_format)f);
        if (!ok) {
            FZ_CHECK(!c, "contiguous(CHANNELS_LAST) of rank %d succeeded", nd);
            FZ_FAILED("mft_contiguous");
            FZ_CHECK(mft_last_error() == MFT_ERR_FORMAT, "contiguous: status %d", (int)mft_last_error());
        } else {
            FZ_CHECK(c != NULL, "contiguous(%s) failed", mft_format_name((mft_format)f));
            check_tensor(c, 0);
            FZ_CHECK(mft_tensor_is_contiguous(c, (mft_format)f), "contiguous(%s) is not contiguous in it",
                     mft_format_name((mft_format)f));
            FZ_CHECK(hash_ok(c) == h, "hash(t) != hash(contiguous(t, %s))", mft_format_name((mft_format)f));
            check_same_sequence(t, c, false, "contiguous");
            mft_tensor_release(c);
        }
        mft_clear_error();
        c = mft_to_format(t, (mft_format)f);
        if (!ok) {
            FZ_CHECK(!c, "to_format(CHANNELS_LAST) of rank %d succeeded", nd);
            FZ_FAILED("mft_to_format");
        } else {
            FZ_CHECK(c != NULL, "to_format(%s) failed", mft_format_name((mft_format)f));
            check_tensor(c, 0);
            if (mft_tensor_numel(c) > 0)
                FZ_CHECK(mft_tensor_is_dense(c) && mft_tensor_order_fits(c, (mft_format)f),
                         "to_format(%s): not dense in that order", mft_format_name((mft_format)f));
            FZ_CHECK(hash_ok(c) == h, "hash changed by to_format");
            mft_tensor_release(c);
        }
    }
    mft_tensor *p = mft_to_format(t, MFT_PRESERVE);
    FZ_CHECK(p == t, "to_format(PRESERVE) is not t itself");
    mft_tensor_release(p);

    mft_format fmts[3] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_PRESERVE};
    mft_format f = fmts[fz_u8(in) % 3];
    bool ok = f != MFT_CHANNELS_LAST || cl_ok;
    mft_clear_error();
    mft_tensor *c = mft_clone(t, f);
    FZ_CHECK(ok == (c != NULL), "clone(%s) of rank %d: %s", mft_format_name(f), nd, c ? "ok" : "failed");
    if (!c) {
        FZ_FAILED("mft_clone");
    } else {
        check_tensor(c, 0);
        FZ_CHECK(!mft_tensor_shares_storage(c, t), "clone shares storage");
        FZ_CHECK(hash_ok(c) == h, "hash changed by clone");
        check_same_sequence(t, c, false, "clone");
        if (f != MFT_PRESERVE) FZ_CHECK(mft_tensor_is_contiguous(c, f), "clone not contiguous in its format");
        else if (mft_tensor_numel(c) > 0) {
            FZ_CHECK(mft_tensor_is_dense(c), "clone(PRESERVE) not dense");
            if (mft_tensor_is_dense(t))
                FZ_CHECK(memcmp(mft_tensor_strides(c), mft_tensor_strides(t), sizeof(int64_t) * (size_t)nd) == 0,
                         "clone(PRESERVE) of a dense tensor changed the strides");
        }
        mft_tensor_release(c);
    }
    mft_clear_error();
    c = mft_zeros_like(t, f);
    FZ_CHECK(ok == (c != NULL), "zeros_like(%s) of rank %d", mft_format_name(f), nd);
    if (!c) {
        FZ_FAILED("mft_zeros_like");
    } else {
        check_tensor(c, 0);
        mft_tensor *z = mft_zeros(nd, sz, dt, MFT_CONTIGUOUS);
        FZ_CHECK(z != NULL, "zeros failed");
        FZ_CHECK(hash_ok(c) == hash_ok(z), "zeros_like is not all zero");
        mft_tensor_release(z);
        mft_tensor_release(c);
    }
    c = mft_empty_like(t, f);
    FZ_CHECK(ok == (c != NULL), "empty_like(%s) of rank %d", mft_format_name(f), nd);
    if (!c) {
        FZ_FAILED("mft_empty_like");
    } else {
        check_tensor(c, 0);
        FZ_CHECK(mft_tensor_ndim(c) == nd && memcmp(mft_tensor_sizes(c), sz, sizeof(int64_t) * (size_t)nd) == 0 &&
                     mft_tensor_dtype(c) == dt,
                 "empty_like changed sizes or dtype");
        mft_tensor_release(c);
    }
    /* dtype conversion: exact round trips from u8 and i32 through wider types */
    uint8_t b = fz_u8(in);
    mft_dtype to = b < 250 ? (mft_dtype)(b % MFT_DTYPE_COUNT) : (mft_dtype)(MFT_DTYPE_COUNT + b % 3);
    mft_clear_error();
    c = mft_to_dtype(t, to);
    if ((unsigned)to >= MFT_DTYPE_COUNT) {
        FZ_CHECK(!c, "to_dtype(%d) succeeded", (int)to);
        FZ_FAILED("mft_to_dtype");
        FZ_CHECK(mft_last_error() == MFT_ERR_DTYPE, "to_dtype: status %d", (int)mft_last_error());
    } else if (!c && (count_exceeds_bound(nd, sz, mft_dtype_size(to)))) {
        /* an empty tensor whose sizes would overflow int64 bytes in the wider dtype */
        FZ_FAILED("mft_to_dtype");
        FZ_CHECK(mft_last_error() == MFT_ERR_OVERFLOW, "to_dtype: status %d", (int)mft_last_error());
    } else {
        FZ_CHECK(c != NULL, "to_dtype(%s) failed", mft_dtype_name(to));
        check_tensor(c, 0);
        FZ_CHECK(mft_tensor_dtype(c) == to && mft_tensor_ndim(c) == nd &&
                     memcmp(mft_tensor_sizes(c), sz, sizeof(int64_t) * (size_t)nd) == 0,
                 "to_dtype changed sizes or got the dtype wrong");
        if (to == dt) FZ_CHECK(c == t, "to_dtype to the same dtype is not t itself");
        bool exact = dt == MFT_U8 || (dt == MFT_I32 && (to == MFT_I64 || to == MFT_F64));
        if (exact && to != dt) {
            mft_tensor *back = mft_to_dtype(c, dt);
            FZ_CHECK(back != NULL, "to_dtype back failed");
            FZ_CHECK(hash_ok(back) == h, "%s -> %s -> %s is not exact", mft_dtype_name(dt),
                     mft_dtype_name(to), mft_dtype_name(dt));
            mft_tensor_release(back);
        }
        mft_tensor_release(c);
    }
}

/* ------------------------------------------------------------------ the view model */
typedef struct geo {
    int nd;
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS], offset;
} geo;

static void geo_of(const mft_tensor *t, geo *g) {
    memset(g, 0, sizeof *g);
    g->nd = mft_tensor_ndim(t);
    memcpy(g->sizes, mft_tensor_sizes(t), sizeof(int64_t) * (size_t)g->nd);
    memcpy(g->strides, mft_tensor_strides(t), sizeof(int64_t) * (size_t)g->nd);
    g->offset = mft_tensor_offset(t);
}

static void geo_remove(geo *g, int d) {
    for (int i = d; i + 1 < g->nd; i++) {
        g->sizes[i] = g->sizes[i + 1];
        g->strides[i] = g->strides[i + 1];
    }
    g->nd--;
}

/* The result r has the predicted geometry (strides only where they matter). */
static void expect_geo(const mft_tensor *r, const geo *g, const char *op) {
    FZ_CHECK(mft_tensor_ndim(r) == g->nd, "%s: ndim %d, expected %d", op, mft_tensor_ndim(r), g->nd);
    const int64_t *sz = mft_tensor_sizes(r), *st = mft_tensor_strides(r);
    int64_t numel = 1;
    for (int d = 0; d < g->nd; d++) {
        FZ_CHECK(sz[d] == g->sizes[d], "%s: size[%d] %lld, expected %lld", op, d, (long long)sz[d],
                 (long long)g->sizes[d]);
        if (g->sizes[d] == 0) numel = 0;
    }
    if (numel == 0) return;
    for (int d = 0; d < g->nd; d++)
        if (g->sizes[d] > 1)
            FZ_CHECK(st[d] == g->strides[d], "%s: stride[%d] %lld, expected %lld", op, d,
                     (long long)st[d], (long long)g->strides[d]);
    FZ_CHECK(mft_tensor_offset(r) == g->offset, "%s: offset %lld, expected %lld", op,
             (long long)mft_tensor_offset(r), (long long)g->offset);
}

/* Sizes for view/reshape: n entries, one of them maybe -1; the model of
 * PyTorch's infer_size. Returns true (and fills out) when they fit numel. */
static bool infer_sizes(int n, const int64_t *sizes, int64_t numel, int64_t *out) {
    int neg = -1;
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1) {
            if (neg >= 0) return false;
            neg = i;
        } else if (sizes[i] < 0) {
            return false;
        } else if (__builtin_mul_overflow(p, sizes[i], &p)) {
            return false;
        }
        out[i] = sizes[i];
    }
    if (neg < 0) return p == numel;
    if (p == 0 || numel % p != 0) return false;
    out[neg] = numel / p;
    return true;
}

enum { OP_PERMUTE, OP_TRANSPOSE, OP_NARROW, OP_SELECT, OP_SLICE, OP_UNSQUEEZE, OP_SQUEEZE,
       OP_EXPAND, OP_AS_STRIDED, OP_VIEW, OP_RESHAPE, OP_FLATTEN, OP_COUNT };
static const char *const OP_NAMES[OP_COUNT] = {
    "mft_permute", "mft_transpose", "mft_narrow", "mft_select", "mft_slice", "mft_unsqueeze",
    "mft_squeeze", "mft_expand", "mft_as_strided", "mft_view", "mft_reshape", "mft_flatten"};

/* Fuzzed size list for view-like ops (small, with an occasional -1). */
static int fuzz_size_list(fz_in *in, int64_t *sizes) {
    uint8_t b = fz_u8(in);
    int n = b < 240 ? b % (MFT_MAX_DIMS + 1) : (b & 1 ? MFT_MAX_DIMS + 1 : -1);
    for (int i = 0; i < MFT_MAX_DIMS; i++) sizes[i] = i < n ? fz_i64(in) : 1;
    return n;
}

static void trace_op(int op, const geo *g, const char *args) {
    if (!fz_trace()) return;
    char a[200], b[200];
    fprintf(stderr, "  %s(t of sizes %s strides %s offset %lld, %s)\n", OP_NAMES[op], fz_dims(a, sizeof a, g->nd, g->sizes),
            fz_dims(b, sizeof b, g->nd, g->strides), (long long)g->offset, args);
}

/* One view op on cur; returns the new tensor (or NULL when the op failed). */
static mft_tensor *apply_op(const mft_tensor *cur, int op, fz_in *in) {
    geo g, e;
    geo_of(cur, &g);
    e = g;
    int nd = g.nd;
    int valid = -1; /* 1 valid, 0 invalid, -1 not modelled */
    bool predict_geo = false, overflow_ok = false;
    mft_tensor *r = NULL;
    char args[400] = "", da[200], db[200];
    int64_t numel;
    numel_of(nd, g.sizes, &numel);
    mft_clear_error();
    switch (op) {
    case OP_PERMUTE: {
        int dims[MFT_MAX_DIMS + 1] = {0};
        uint8_t mode = fz_u8(in);
        for (int i = 0; i < nd; i++) dims[i] = i;
        if (mode & 1) {
            for (int i = nd - 1; i > 0; i--) {
                int j = fz_u8(in) % (i + 1), tmp = dims[i];
                dims[i] = dims[j];
                dims[j] = tmp;
            }
            for (int i = 0; i < nd; i++)
                if (mode & (2 << (i % 7))) dims[i] -= nd;
        } else {
            for (int i = 0; i < nd; i++) dims[i] = fz_dim(in, nd);
        }
        bool seen[MFT_MAX_DIMS] = {false};
        valid = 1;
        for (int i = 0; i < nd; i++) {
            if (!dim_ok(dims[i], nd) || seen[wrap_dim(dims[i], nd)]) {
                valid = 0;
                break;
            }
            seen[wrap_dim(dims[i], nd)] = true;
            e.sizes[i] = g.sizes[wrap_dim(dims[i], nd)];
            e.strides[i] = g.strides[wrap_dim(dims[i], nd)];
        }
        predict_geo = true;
        for (int i = 0; i < nd; i++)
            snprintf(args + strlen(args), sizeof args - strlen(args), "%s%d", i ? "," : "dims [", dims[i]);
        if (nd) strcat(args, "]");
        trace_op(op, &g, args);
        r = mft_permute(cur, dims);
        break;
    }
    case OP_TRANSPOSE: {
        int d0 = fz_dim(in, nd), d1 = fz_dim(in, nd);
        if (nd > 0) {
            valid = dim_ok(d0, nd) && dim_ok(d1, nd);
            if (valid) {
                int a = wrap_dim(d0, nd), b = wrap_dim(d1, nd);
                e.sizes[a] = g.sizes[b], e.strides[a] = g.strides[b];
                e.sizes[b] = g.sizes[a], e.strides[b] = g.strides[a];
            }
            predict_geo = true;
        }
        snprintf(args, sizeof args, "%d, %d", d0, d1);
        trace_op(op, &g, args);
        r = mft_transpose(cur, d0, d1);
        break;
    }
    case OP_NARROW: {
        int dim = fz_dim(in, nd);
        int64_t start = fz_i64(in), length = fz_i64(in);
        valid = 0;
        if (dim_ok(dim, nd)) {
            int d = wrap_dim(dim, nd);
            int64_t n = g.sizes[d], s = start;
            if (s < 0 && s >= -n) s += n;
            if (s >= 0 && s <= n && length >= 0 && length <= n - s) {
                valid = s == n ? -1 : 1; /* start == size with length 0: not modelled */
                e.sizes[d] = length;
                int64_t o;
                if (__builtin_mul_overflow(s, g.strides[d], &o) || __builtin_add_overflow(o, g.offset, &o))
                    overflow_ok = true; /* only possible for empty tensors */
                else
                    e.offset = o;
            }
        }
        predict_geo = true;
        snprintf(args, sizeof args, "dim %d, start %lld, length %lld", dim, (long long)start, (long long)length);
        trace_op(op, &g, args);
        r = mft_narrow(cur, dim, start, length);
        break;
    }
    case OP_SELECT: {
        int dim = fz_dim(in, nd);
        int64_t i = fz_i64(in);
        valid = 0;
        if (dim_ok(dim, nd)) {
            int d = wrap_dim(dim, nd);
            int64_t n = g.sizes[d];
            if (i >= -n && i < n) {
                valid = 1;
                int64_t ii = i < 0 ? i + n : i, o;
                if (__builtin_mul_overflow(ii, g.strides[d], &o) || __builtin_add_overflow(o, g.offset, &o))
                    overflow_ok = true;
                else
                    e.offset = o;
                geo_remove(&e, d);
            }
        }
        predict_geo = true;
        snprintf(args, sizeof args, "dim %d, index %lld", dim, (long long)i);
        trace_op(op, &g, args);
        r = mft_select(cur, dim, i);
        break;
    }
    case OP_SLICE: {
        int dim = fz_dim(in, nd);
        int64_t start = fz_i64(in), end = fz_i64(in), step = fz_i64(in);
        if (nd > 0) {
            valid = dim_ok(dim, nd) && step > 0;
            if (valid) {
                int d = wrap_dim(dim, nd);
                int64_t n = g.sizes[d];
                int64_t s = start < 0 ? start + n : start, t = end < 0 ? end + n : end;
                s = s < 0 ? 0 : s > n ? n : s;
                t = t < 0 ? 0 : t > n ? n : t;
                if (t < s) t = s;
                int64_t len = t == s ? 0 : 1 + (t - s - 1) / step;
                e.sizes[d] = len;
                int64_t o;
                if (__builtin_mul_overflow(s, g.strides[d], &o) || __builtin_add_overflow(o, g.offset, &o))
                    overflow_ok = true; /* only possible for empty tensors */
                else if (len > 0)
                    e.offset = o;
                /* len > 1: the new stride is within the result's span (checked below);
                 * len <= 1: any stride the library picks is fine (docs/spec.md 1.1) */
                if (len > 1 && __builtin_mul_overflow(g.strides[d], step, &e.strides[d])) overflow_ok = true;
            }
            predict_geo = true;
        }
        snprintf(args, sizeof args, "dim %d, %lld:%lld:%lld", dim, (long long)start, (long long)end, (long long)step);
        trace_op(op, &g, args);
        r = mft_slice(cur, dim, start, end, step);
        break;
    }
    case OP_UNSQUEEZE: {
        int dim = fz_dim(in, nd + 1);
        valid = nd < MFT_MAX_DIMS && dim >= -nd - 1 && dim <= nd;
        if (valid) {
            int d = dim < 0 ? dim + nd + 1 : dim;
            for (int i = nd; i > d; i--) {
                e.sizes[i] = g.sizes[i - 1];
                e.strides[i] = g.strides[i - 1];
            }
            e.sizes[d] = 1;
            e.strides[d] = 0;
            e.nd = nd + 1; /* the new dim's stride is the library's choice (never refused) */
        }
        predict_geo = true;
        snprintf(args, sizeof args, "dim %d", dim);
        trace_op(op, &g, args);
        r = mft_unsqueeze(cur, dim);
        break;
    }
    case OP_SQUEEZE: {
        int dim = fz_dim(in, nd);
        if (nd > 0) {
            valid = dim_ok(dim, nd);
            if (valid && g.sizes[wrap_dim(dim, nd)] == 1) geo_remove(&e, wrap_dim(dim, nd));
            predict_geo = true;
        }
        snprintf(args, sizeof args, "dim %d", dim);
        trace_op(op, &g, args);
        r = mft_squeeze(cur, dim);
        break;
    }
    case OP_EXPAND: {
        int64_t sizes[MFT_MAX_DIMS];
        uint8_t b = fz_u8(in);
        int n2 = b < 240 ? nd + b % (MFT_MAX_DIMS + 1 - nd) : (b & 1 ? MFT_MAX_DIMS + 1 : nd - 1);
        for (int i = 0; i < MFT_MAX_DIMS; i++) {
            uint8_t k = fz_u8(in);
            int j = i - (n2 - nd);
            /* mostly: keep (-1), the same size, or grow a size-1 dim */
            if (j >= 0 && j < nd && k < 64) sizes[i] = -1;
            else if (j >= 0 && j < nd && k < 128) sizes[i] = g.sizes[j];
            else sizes[i] = fz_i64(in);
        }
        if (n2 >= nd && n2 <= MFT_MAX_DIMS) {
            valid = 1;
            e.nd = n2;
            for (int i = 0; i < n2; i++) {
                int j = i - (n2 - nd);
                if (j < 0) {
                    if (sizes[i] < 0) valid = 0;
                    e.sizes[i] = sizes[i];
                    e.strides[i] = 0;
                } else if (sizes[i] == -1 || sizes[i] == g.sizes[j]) {
                    e.sizes[i] = g.sizes[j];
                    e.strides[i] = g.strides[j];
                } else if (g.sizes[j] == 1 && sizes[i] >= 0) {
                    e.sizes[i] = sizes[i];
                    e.strides[i] = 0;
                } else {
                    valid = 0;
                }
            }
            int64_t n;
            if (valid && !numel_of(n2, e.sizes, &n)) overflow_ok = true;
            if (valid && count_exceeds_bound(n2, e.sizes, mft_dtype_size(mft_tensor_dtype(cur))))
                overflow_ok = true;
        } else {
            valid = 0;
        }
        predict_geo = true;
        snprintf(args, sizeof args, "ndim %d, sizes %s", n2,
                 fz_dims(da, sizeof da, n2 < 0 ? 0 : n2 > MFT_MAX_DIMS ? MFT_MAX_DIMS : n2, sizes));
        trace_op(op, &g, args);
        r = mft_expand(cur, n2, sizes);
        break;
    }
    case OP_AS_STRIDED: {
        int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
        int n2 = fuzz_size_list(in, sizes);
        for (int i = 0; i < MFT_MAX_DIMS; i++) strides[i] = fz_i64(in);
        int64_t off = fz_i64(in);
        if (n2 >= 0 && n2 <= MFT_MAX_DIMS) {
            e.nd = n2;
            memcpy(e.sizes, sizes, sizeof sizes);
            memcpy(e.strides, strides, sizeof strides);
            e.offset = off;
            predict_geo = true;
            /* validity: only the non-empty, overflow-free case is modelled */
            int64_t n, reach;
            bool neg = off < 0;
            for (int i = 0; i < n2; i++) neg = neg || sizes[i] < 0 || strides[i] < 0;
            size_t es = mft_dtype_size(mft_tensor_dtype(cur));
            if (!neg && (span_overflows(n2, sizes, strides, off, es) ||
                         count_exceeds_bound(n2, sizes, es)))
                overflow_ok = true;
            if (neg) {
                valid = 0;
            } else if (numel_of(n2, sizes, &n) && n > 0 && !count_exceeds_bound(n2, sizes, es) &&
                       reach_of(n2, sizes, strides, &reach) &&
                       !__builtin_mul_overflow(reach, (int64_t)es, &reach)) {
                reach /= (int64_t)es;
                int64_t sn = mft_tensor_storage_numel(cur);
                valid = off <= sn && reach < sn - off;
            }
        } else {
            valid = 0;
        }
        {
            int k = n2 < 0 ? 0 : n2 > MFT_MAX_DIMS ? MFT_MAX_DIMS : n2;
            snprintf(args, sizeof args, "ndim %d, sizes %s, strides %s, offset %lld", n2,
                     fz_dims(da, sizeof da, k, sizes), fz_dims(db, sizeof db, k, strides), (long long)off);
        }
        trace_op(op, &g, args);
        r = mft_as_strided(cur, n2, sizes, strides, off);
        break;
    }
    case OP_VIEW:
    case OP_RESHAPE: {
        int64_t sizes[MFT_MAX_DIMS], inferred[MFT_MAX_DIMS] = {0};
        int n2 = fuzz_size_list(in, sizes);
        if (op == OP_RESHAPE && numel > ELEM_LIMIT) return NULL; /* may copy: bounded */
        bool fits = n2 >= 0 && n2 <= MFT_MAX_DIMS && infer_sizes(n2, sizes, numel, inferred);
        if (!fits) valid = 0;
        else if (op == OP_RESHAPE || mft_tensor_is_contiguous(cur, MFT_CONTIGUOUS)) valid = 1;
        if (fits && count_exceeds_bound(n2, inferred, mft_dtype_size(mft_tensor_dtype(cur))))
            overflow_ok = true; /* empty, but the other sizes overflow int64 bytes */
        snprintf(args, sizeof args, "ndim %d, sizes %s", n2,
                 fz_dims(da, sizeof da, n2 < 0 ? 0 : n2 > MFT_MAX_DIMS ? MFT_MAX_DIMS : n2, sizes));
        trace_op(op, &g, args);
        r = op == OP_VIEW ? mft_view(cur, n2, sizes) : mft_reshape(cur, n2, sizes);
        if (r) {
            check_tensor(r, 0);
            FZ_CHECK(fits, "%s accepted sizes that do not fit numel %lld", OP_NAMES[op], (long long)numel);
            FZ_CHECK(mft_tensor_ndim(r) == n2 &&
                         memcmp(mft_tensor_sizes(r), inferred, sizeof(int64_t) * (size_t)n2) == 0,
                     "%s: wrong sizes", OP_NAMES[op]);
            if (op == OP_VIEW) FZ_CHECK(mft_tensor_shares_storage(r, cur), "view copied");
            check_same_sequence(cur, r, op == OP_VIEW, OP_NAMES[op]);
        }
        break;
    }
    case OP_FLATTEN: {
        int s = fz_dim(in, nd), t = fz_dim(in, nd);
        if (numel > ELEM_LIMIT) return NULL; /* may copy: bounded */
        if (nd > 0) valid = dim_ok(s, nd) && dim_ok(t, nd) && wrap_dim(s, nd) <= wrap_dim(t, nd);
        snprintf(args, sizeof args, "%d, %d", s, t);
        trace_op(op, &g, args);
        r = mft_flatten(cur, s, t);
        if (r) {
            int want = nd == 0 ? 1 : nd - (wrap_dim(t, nd) - wrap_dim(s, nd));
            check_tensor(r, 0);
            FZ_CHECK(mft_tensor_ndim(r) == want, "flatten: ndim %d, expected %d", mft_tensor_ndim(r), want);
            check_same_sequence(cur, r, false, "flatten");
        }
        break;
    }
    default:
        return NULL;
    }
    if (fz_trace()) {
        char a[200], b[200];
        fprintf(stderr, "    -> %s", r ? "ok" : "failed");
        if (r)
            fprintf(stderr, " sizes %s strides %s offset %lld\n",
                    fz_dims(a, sizeof a, mft_tensor_ndim(r), mft_tensor_sizes(r)),
                    fz_dims(b, sizeof b, mft_tensor_ndim(r), mft_tensor_strides(r)), (long long)mft_tensor_offset(r));
        else
            fprintf(stderr, ": %s\n", mft_last_error_message());
    }
    if (valid == 1 && predict_geo &&
        span_overflows(e.nd, e.sizes, e.strides, e.offset, mft_dtype_size(mft_tensor_dtype(cur))))
        overflow_ok = true;
    if (!r) {
        FZ_FAILED(OP_NAMES[op]);
        mft_status st = mft_last_error();
        FZ_CHECK(valid != 1 || (overflow_ok && st == MFT_ERR_OVERFLOW),
                 "%s refused valid arguments (status %s)", OP_NAMES[op], mft_status_str(st));
        return NULL;
    }
    FZ_CHECK(valid != 0, "%s accepted invalid arguments", OP_NAMES[op]);
    if (predict_geo && valid == 1) expect_geo(r, &e, OP_NAMES[op]);
    return r;
}

/* ------------------------------------------------------------------ from_blob */
static mft_dtype fuzz_dtype(uint8_t b) {
    if (b < 240) return (mft_dtype)(b % MFT_DTYPE_COUNT);
    static const int odd[4] = {MFT_DTYPE_COUNT, MFT_DTYPE_COUNT + 1, 100, -1};
    return (mft_dtype)odd[b & 3];
}

static int fuzz_ndim(uint8_t b) {
    if (b < 240) return b % (MFT_MAX_DIMS + 1);
    static const int odd[8] = {-1, MFT_MAX_DIMS + 1, MFT_MAX_DIMS + 2, -2, 64, 2147483647, -2147483647 - 1, 100};
    return odd[b & 7];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    mft_set_num_threads(1);
    mft_clear_error();

    /* buffer contents: a pattern from the input (values matter only as bytes) */
    uint8_t seed = fz_u8(&in);
    for (size_t i = 0; i < BUF_BYTES; i++) g_buf[i] = (unsigned char)(i * (2u * seed + 1) + (i >> 7) + seed);

    mft_dtype dt = fuzz_dtype(fz_u8(&in));
    int nd = fuzz_ndim(fz_u8(&in));
    uint8_t flags = fz_u8(&in);
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    for (int i = 0; i < MFT_MAX_DIMS; i++) sizes[i] = i < nd ? fz_i64(&in) : 1;
    bool null_strides = flags & 1;
    for (int i = 0; i < MFT_MAX_DIMS; i++) strides[i] = !null_strides && i < nd ? fz_i64(&in) : 1;
    int64_t offset = (flags & 2) ? fz_i64(&in) : 0;
    size_t mis = (flags & 4) ? (size_t)(fz_u8(&in) % 8) : 0;
    size_t nbytes = BUF_BYTES - mis;
    if (flags & 8) nbytes = (size_t)fz_u16(&in) % (nbytes + 1);
    unsigned char *base = g_buf + mis;

    /* the model of from_blob's documented argument rules and the geometry bound */
    size_t es = mft_dtype_size(dt);
    bool basic = es > 0 && nd >= 0 && nd <= MFT_MAX_DIMS && offset >= 0;
    int64_t packed[MFT_MAX_DIMS], numel = 0;
    for (int i = 0; basic && i < nd; i++) basic = sizes[i] >= 0 && (null_strides || strides[i] >= 0);
    bool bound_ok = basic && !count_exceeds_bound(nd, sizes, es);
    const int64_t *st = strides;
    if (bound_ok && null_strides) { /* packed strides, size-0 dims counted as 1 (no overflow: count bound) */
        int64_t acc = 1;
        for (int i = nd - 1; i >= 0; i--) {
            packed[i] = acc;
            acc *= sizes[i] > 1 ? sizes[i] : 1;
        }
        st = packed;
    }
    bound_ok = bound_ok && !span_overflows(nd, sizes, st, offset, es);
    bool valid = bound_ok;
    if (valid) {
        numel_of(nd, sizes, &numel);
        int64_t reach = 0;
        if (numel > 0) { /* offset + reach <= span: no overflow */
            reach_of(nd, sizes, st, &reach);
            if ((uint64_t)(offset + reach) >= nbytes / es) valid = false;
        }
        if ((uintptr_t)base % es != 0) valid = false;
    }

    if (fz_trace()) {
        char a[200], b[200];
        int k = nd < 0 ? 0 : nd > MFT_MAX_DIMS ? MFT_MAX_DIMS : nd;
        fprintf(stderr, "mft_from_blob(buf+%zu, nbytes %zu, ndim %d, sizes %s, strides %s, offset %lld, dtype %d)\n",
                mis, nbytes, nd, fz_dims(a, sizeof a, k, sizes), null_strides ? "NULL" : fz_dims(b, sizeof b, k, strides),
                (long long)offset, (int)dt);
    }
    mft_tensor *t = mft_from_blob(base, nbytes, nd, sizes, null_strides ? NULL : strides, offset, dt,
                                  NULL, NULL);
    FZ_TRACE("    -> %s\n", t ? "ok" : mft_last_error_message());
    if (!t) {
        FZ_FAILED("mft_from_blob");
        FZ_CHECK(!valid, "from_blob refused valid arguments");
        if (basic && !bound_ok) /* beyond the bound; out of the buffer too is reported first sometimes */
            FZ_CHECK(mft_last_error() == MFT_ERR_OVERFLOW || mft_last_error() == MFT_ERR_BOUNDS,
                     "from_blob: geometry beyond the bound refused with %s", mft_status_str(mft_last_error()));
        fz_check_no_leaks();
        return 0;
    }
    FZ_CHECK(valid, "from_blob accepted invalid arguments (dtype %d, ndim %d, offset %lld, nbytes %zu)",
             (int)dt, nd, (long long)offset, nbytes);
    FZ_CHECK(mft_tensor_ndim(t) == nd && memcmp(mft_tensor_sizes(t), sizes, sizeof(int64_t) * (size_t)nd) == 0,
             "from_blob: wrong sizes");
    if (numel > 0) {
        FZ_CHECK(mft_tensor_data(t) == base + offset * (int64_t)es, "from_blob: wrong data pointer");
        for (int i = 0; i < nd; i++)
            if (sizes[i] > 1)
                FZ_CHECK(mft_tensor_strides(t)[i] == st[i], "from_blob: stride[%d] %lld, expected %lld", i,
                         (long long)mft_tensor_strides(t)[i], (long long)st[i]);
    }

    mft_tensor *cur = t;
    for (int step = 0; step <= MAX_CHAIN; step++) {
        check_tensor(cur, fz_u8(&in));
        int64_t n = mft_tensor_numel(cur);
        if (n <= ELEM_LIMIT) check_conversions(cur, &in);
        if (step == MAX_CHAIN || in.n == 0) break;
        int op = fz_u8(&in) % OP_COUNT;
        mft_tensor *r = apply_op(cur, op, &in);
        if (r) {
            mft_tensor_release(cur);
            cur = r;
        }
    }
    mft_tensor_release(cur);
    fz_check_no_leaks();
    return 0;
}
