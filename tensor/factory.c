/* tensor/factory.c — tensor factories: empty/zeros/ones/full in a declared
 * format, empty_strided, from_blob (wrapping caller memory with any strides
 * after a bounds check), arange, and counter-based seeded rand/randn whose
 * values depend only on (seed, logical index), never on the format. */
#include <math.h>
#include <string.h>
#include "internal.h"

/* t (NULL allowed) tagged by the FACTORY row: fmt, DECLARED, with its
 * provenance (Note [Provenance] in tensor/rules.c). */
static mft_tensor *factory_tag(mft_tensor *t, const char *fn, mft_format fmt) {
    mft__decision d = mft__rule_decide(MFT__RULE_FACTORY, fn + 4, 0, NULL, fmt, 0);
    mft__rule_apply(t, &d);
    return t;
}

mft_tensor *mft_empty(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt) {
    return factory_tag(mft__tensor_alloc("mft_empty", ndim, sizes, dtype, fmt), "mft_empty", fmt);
}

static void fill_loop(void *ctx, char **data, const int64_t *st, int64_t n0, int64_t n1) {
    const mft_tensor *t = ctx;
    size_t es = mft__elem_size(t->dtype);
    char *src = data[1]; /* one element holding the value */
    for (int64_t j = 0; j < n1; j++) {
        char *p = data[0] + j * st[2];
        if (st[0] == (int64_t)es && es == 4) {
            uint32_t v;
            memcpy(&v, src, 4);
            uint32_t *q = (uint32_t *)(void *)p;
            for (int64_t i = 0; i < n0; i++) q[i] = v;
        } else if (st[0] == (int64_t)es && es == 8) {
            uint64_t v;
            memcpy(&v, src, 8);
            uint64_t *q = (uint64_t *)(void *)p;
            for (int64_t i = 0; i < n0; i++) q[i] = v;
        } else {
            for (int64_t i = 0; i < n0; i++) memcpy(p + i * st[0], src, es);
        }
    }
}

void mft__fill(mft_tensor *t, double value) {
    if (t->nblocks) {
        mft__blk_fill(t, value);
        return;
    }
    _Alignas(8) char elem[8];
    mft__store(t->dtype, elem, value);
    mft__iter it;
    mft_tensor *ops[1] = {t};
    mft__iter_build("mft__fill", &it, 1, ops, t->ndim, t->sizes);
    /* a second pseudo-operand with stride 0 carries the value */
    it.nops = 2;
    it.data[1] = elem;
    for (int d = 0; d < it.ndim; d++) it.strides[1][d] = 0;
    mft__iter_run(&it, fill_loop, t, 1 << 16);
    atomic_fetch_add(&t->storage->version, 1);
}

mft_tensor *mft_full(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                     double value) {
    if (mft__check_dtype("mft_full", dtype) != MFT_OK ||
        mft__check_int_value("mft_full", "value", dtype, value) != MFT_OK)
        return NULL;
    mft_tensor *t = factory_tag(mft__tensor_alloc("mft_full", ndim, sizes, dtype, fmt), "mft_full", fmt);
    if (t) mft__fill(t, value);
    return t;
}

mft_tensor *mft_zeros(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt) {
    mft_tensor *t = factory_tag(mft__tensor_alloc("mft_zeros", ndim, sizes, dtype, fmt), "mft_zeros", fmt);
    if (t) memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

mft_tensor *mft_ones(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt) {
    mft_tensor *t = factory_tag(mft__tensor_alloc("mft_ones", ndim, sizes, dtype, fmt), "mft_ones", fmt);
    if (t) mft__fill(t, 1.0);
    return t;
}

mft_tensor *mft_empty_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                              mft_dtype dtype) {
    const char *fn = "mft_empty_strided";
    if (ndim > 0 && !strides) {
        mft__set_error(MFT_ERR_NULL, "%s: strides is NULL for ndim %d", fn, ndim);
        return NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, strides, dtype) != MFT_OK) return NULL;
    mft_tensor *t = mft__tensor_alloc_strided(fn, ndim, sizes, strides, dtype);
    mft__decision d = mft__rule_decide(MFT__RULE_STRIDED, fn + 4, 0, NULL, MFT_CONTIGUOUS, 0);
    mft__rule_apply(t, &d);
    return t;
}

mft_tensor *mft_from_blob(void *data, size_t nbytes, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t storage_offset, mft_dtype dtype,
                          void (*deleter)(void *data, void *ctx), void *ctx) {
    const char *fn = "mft_from_blob";
    if (!data) {
        mft__set_error(MFT_ERR_NULL, "%s: data is NULL", fn);
        return NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, NULL, dtype) != MFT_OK) return NULL;
    int64_t packed[MFT_MAX_DIMS];
    if (!strides) {
        mft__format_strides(ndim, sizes, MFT_CONTIGUOUS, packed);
        strides = packed;
    }
    if (mft__check_geometry(fn, ndim, sizes, strides, dtype) != MFT_OK) return NULL;
    if (storage_offset < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: negative storage offset %lld", fn,
                       (long long)storage_offset);
        return NULL;
    }
    int64_t need = 0, end = 0;
    size_t es = mft__elem_size(dtype);
    if (mft_min_storage_numel(ndim, sizes, strides, &need) != MFT_OK) return NULL;
    if (need > 0 && __builtin_add_overflow(need, storage_offset, &end)) {
        mft__set_error(MFT_ERR_OVERFLOW, "%s: storage offset %lld + %lld elements overflows", fn,
                       (long long)storage_offset, (long long)need);
        return NULL;
    }
    if (need > 0 && (uint64_t)end > nbytes / es) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_BOUNDS,
                       "%s: sizes %s strides %s offset %lld need %lld elements of %s (%zu bytes "
                       "each) but the buffer has %zu bytes",
                       fn, mft__fmt_dims(a, sizeof a, ndim, sizes),
                       mft__fmt_dims(b, sizeof b, ndim, strides), (long long)storage_offset,
                       (long long)end, mft_dtype_name(dtype), es, nbytes);
        return NULL;
    }
    /* an empty view addresses nothing; its offset only has to obey the span */
    if (mft__check_geometry_at(fn, ndim, sizes, strides, storage_offset, dtype) != MFT_OK)
        return NULL;
    if ((uintptr_t)data % es != 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: data %p is not aligned to %zu bytes for %s", fn, data,
                       es, mft_dtype_name(dtype));
        return NULL;
    }
    mft_storage *s = mft__storage_wrap(fn, data, nbytes, deleter, ctx);
    if (!s) return NULL;
    mft_tensor *t = mft__tensor_new(fn, s, storage_offset, ndim, sizes, strides, dtype);
    mft__decision d = mft__rule_decide(MFT__RULE_STRIDED, fn + 4, 0, NULL, MFT_CONTIGUOUS, 0);
    mft__rule_apply(t, &d);
    if (!t) {
        s->deleter = NULL; /* the caller keeps ownership of data on failure */
    }
    mft__storage_release(s);
    return t;
}

mft_tensor *mft_arange(double start, double end, double step, mft_dtype dtype) {
    const char *fn = "mft_arange";
    if (mft__check_dtype(fn, dtype) != MFT_OK) return NULL;
    if (!(step != 0.0) || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        mft__set_error(MFT_ERR_INVALID, "mft_arange: start %g, end %g, step %g: step must be non-zero and all finite",
                       start, end, step);
        return NULL;
    }
    if ((step > 0 && end < start) || (step < 0 && end > start)) {
        mft__set_error(MFT_ERR_INVALID,
                       "mft_arange: start %g, end %g, step %g: the step's sign does not lead from "
                       "start to end (as PyTorch)",
                       start, end, step);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count < 0) count = 0;
    if (count > 9.0e15) {
        mft__set_error(MFT_ERR_OVERFLOW, "mft_arange: start %g, end %g, step %g give too many elements",
                       start, end, step);
        return NULL;
    }
    int64_t n = (int64_t)count;
    /* Note [Integer scalars]: the first and the last value must fit */
    if (n > 0 && (mft__check_int_value(fn, "start", dtype, start) != MFT_OK ||
                  mft__check_int_value(fn, "last value", dtype,
                                       start + (double)(n - 1) * step) != MFT_OK))
        return NULL;
    mft_tensor *t = factory_tag(mft__tensor_alloc(fn, 1, &n, dtype, MFT_CONTIGUOUS), fn, MFT_CONTIGUOUS);
    if (!t) return NULL;
    char *p = t->storage->data;
    size_t es = mft__elem_size(dtype);
    for (int64_t i = 0; i < n; i++) mft__store(dtype, p + (size_t)i * es, start + (double)i * step);
    return t;
}

/* Counter-based generator: splitmix64 of (seed, index) -> 53 random bits. */
static uint64_t rng_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_uniform(uint64_t seed, uint64_t i, uint64_t stream) {
    uint64_t z = rng_mix(seed ^ rng_mix(i * 2 + stream));
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct rand_ctx {
    mft_tensor *t;
    uint64_t seed;
    bool normal;
} rand_ctx;

static void rand_range(void *vctx, int64_t begin, int64_t end) {
    const rand_ctx *c = vctx;
    const mft_tensor *t = c->t;
    size_t es = mft__elem_size(t->dtype);
    int64_t idx[MFT_MAX_DIMS];
    int64_t rem = begin;
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = rem % t->sizes[d];
        rem /= t->sizes[d];
    }
    for (int64_t i = begin; i < end; i++) {
        int64_t off = 0;
        if (t->nblocks) off = mft__blk_offset(t, idx);
        else
            for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        double v;
        if (c->normal) { /* Box-Muller on two uniforms of this index */
            double u1 = rng_uniform(c->seed, (uint64_t)i, 0), u2 = rng_uniform(c->seed, (uint64_t)i, 1);
            v = sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
        } else {
            v = rng_uniform(c->seed, (uint64_t)i, 0);
            if (t->dtype == MFT_F32 && (float)v >= 1.0f) v = 0.99999994;
        }
        mft__store(t->dtype, mft__tensor_ptr(t) + off * (int64_t)es, v);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

static mft_tensor *rand_impl(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                             mft_format fmt, uint64_t seed, bool normal) {
    if (mft__check_dtype(fn, dtype) != MFT_OK) return NULL;
    if (dtype != MFT_F32 && dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not a floating type", fn,
                       mft_dtype_name(dtype));
        return NULL;
    }
    mft_tensor *t = factory_tag(mft__tensor_alloc(fn, ndim, sizes, dtype, fmt), fn, fmt);
    if (!t) return NULL;
    rand_ctx c = {t, seed, normal};
    mft__parallel_for(0, t->numel, 1 << 14, rand_range, &c);
    return t;
}

mft_tensor *mft_rand(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                     uint64_t seed) {
    return rand_impl("mft_rand", ndim, sizes, dtype, fmt, seed, false);
}
mft_tensor *mft_randn(int ndim, const int64_t *sizes, mft_dtype dtype, mft_format fmt,
                      uint64_t seed) {
    return rand_impl("mft_randn", ndim, sizes, dtype, fmt, seed, true);
}
