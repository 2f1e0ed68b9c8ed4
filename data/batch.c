/* data/batch.c — batching for training loops: the seeded shuffle (Note
 * [Shuffle generator] in mft/data.h), the mft_batches iterator, row gathering
 * (mft_gather_rows) and the fused u8 -> normalised float batch
 * (mft_images_to_batch). Every index is validated before anything is
 * allocated; kernels then cannot fail. */
#include <math.h>
#include <string.h>
#include "internal.h"

/* ------------------------------------------------------------------ shuffle */
static uint64_t batch_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, m), m >= 1, by rejection (no modulo bias). */
static uint64_t batch_bounded(uint64_t *state, uint64_t m) {
    /* limit = m * floor(2^64 / m), computed without 128-bit arithmetic:
     * 2^64 mod m == (2^64 - m) mod m == (-m) mod m */
    uint64_t rem = (0 - m) % m;
    for (;;) {
        uint64_t r = batch_splitmix64(state);
        /* accept r < 2^64 - rem, i.e. r <= UINT64_MAX - rem */
        if (r <= UINT64_MAX - rem) return r % m;
    }
}

void mft_shuffle_indices(int64_t *idx, int64_t n, uint64_t seed) {
    if (n <= 0) return;
    if (!idx) {
        mft__null_arg("mft_shuffle_indices", "idx");
        return;
    }
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    uint64_t state = seed;
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)batch_bounded(&state, (uint64_t)i + 1);
        int64_t tmp = idx[i];
        idx[i] = idx[j];
        idx[j] = tmp;
    }
}

/* ------------------------------------------------------------------ iterator */
mft_status mft_batches_init(mft_batches *b, int64_t n, int64_t batch_size, bool shuffle,
                            uint64_t seed, bool drop_last) {
    static const char fn[] = "mft_batches_init";
    if (!b) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'b' is NULL", fn);
        return MFT_ERR_NULL;
    }
    memset(b, 0, sizeof *b);
    if (n < 0 || batch_size < 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: n %lld must be >= 0 and batch_size %lld >= 1", fn,
                       (long long)n, (long long)batch_size);
        return MFT_ERR_INVALID;
    }
    if (n > 0) {
        if ((uint64_t)n > SIZE_MAX / sizeof(int64_t)) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: n %lld overflows size_t", fn, (long long)n);
            return MFT_ERR_OVERFLOW;
        }
        b->order = mft__alloc_or_err(fn, (size_t)n * sizeof(int64_t), 64);
        if (!b->order) return MFT_ERR_NOMEM;
    }
    b->n = n;
    b->batch_size = batch_size;
    b->seed = seed;
    b->shuffle = shuffle;
    b->drop_last = drop_last;
    mft_batches_start_epoch(b, 0);
    return MFT_OK;
}

void mft_batches_start_epoch(mft_batches *b, uint64_t epoch) {
    if (!b || (!b->order && b->n > 0)) return;
    if (b->shuffle) {
        mft_shuffle_indices(b->order, b->n, b->seed + epoch);
    } else {
        for (int64_t i = 0; i < b->n; i++) b->order[i] = i;
    }
    b->pos = 0;
}

bool mft_batches_next(mft_batches *b, const int64_t **idx, int64_t *count) {
    if (!b || !idx || !count || b->pos >= b->n) return false;
    int64_t left = b->n - b->pos;
    int64_t c = left < b->batch_size ? left : b->batch_size;
    if (c < b->batch_size && b->drop_last) {
        b->pos = b->n;
        return false;
    }
    *idx = b->order + b->pos;
    *count = c;
    b->pos += c;
    return true;
}

int64_t mft_batches_count(const mft_batches *b) {
    if (!b || b->batch_size < 1) return 0;
    return b->drop_last ? b->n / b->batch_size : (b->n + b->batch_size - 1) / b->batch_size;
}

void mft_batches_free(mft_batches *b) {
    if (!b) return;
    mft__free(b->order);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------ index checks */
static bool batch_check_indices(const char *fn, const int64_t *idx, int64_t count, int64_t n) {
    for (int64_t i = 0; i < count; i++) {
        if (idx[i] < 0 || idx[i] >= n) {
            mft__set_error(MFT_ERR_DIM, "%s: idx[%lld] = %lld is outside 0..%lld", fn,
                           (long long)i, (long long)idx[i], (long long)n - 1);
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ gather_rows */
typedef struct gather_ctx {
    const mft_tensor *t;
    mft_tensor *out;
    const int64_t *idx;
    size_t es;
    bool rows_packed; /* each row of t and of out is one contiguous block */
} gather_ctx;

/* in: t (N, ...) any strides; out (count, ...) packed; one row per item. */
static void gather_rows_kernel(void *vctx, int64_t begin, int64_t end) {
    const gather_ctx *c = vctx;
    const mft_tensor *t = c->t;
    mft_tensor *o = c->out;
    const int nd = t->ndim;
    const int64_t row_numel = o->numel / (o->sizes[0] ? o->sizes[0] : 1);
    for (int64_t r = begin; r < end; r++) {
        const char *src = mft__tensor_ptr(t) + c->idx[r] * t->strides[0] * (int64_t)c->es;
        char *dst = mft__tensor_ptr(o) + r * o->strides[0] * (int64_t)c->es;
        if (c->rows_packed) {
            memcpy(dst, src, (size_t)row_numel * c->es);
            continue;
        }
        if (row_numel == 0) continue;
        int64_t ix[MFT_MAX_DIMS] = {0};
        for (int64_t k = 0; k < row_numel; k++) {
            int64_t so = 0, dof = 0;
            for (int d = 1; d < nd; d++) {
                so += ix[d] * t->strides[d];
                dof += ix[d] * o->strides[d];
            }
            memcpy(dst + dof * (int64_t)c->es, src + so * (int64_t)c->es, c->es);
            for (int d = nd - 1; d >= 1; d--) {
                if (++ix[d] < t->sizes[d]) break;
                ix[d] = 0;
            }
        }
    }
}

/* The data ops index with plain strides: a blocked operand (docs/spec.md
 * §7.6) goes through a plain packed copy, a conversion of cause "fallback"
 * attributed to op (Note [Blocked fallback], ops/blocked_fallback.c, whose
 * macro this layer cannot include). New reference (not in any scope), NULL
 * on failure. */
static mft_tensor *batch_plain(const char *op, const mft_tensor *t) {
    mft__cause_push(MFT_CAUSE_FALLBACK, op);
    mft__scope_suspend();
    const bool grad = mft_set_grad_enabled(false); /* neither op is differentiable */
    mft_tensor *c = mft_contiguous(t, MFT_CONTIGUOUS);
    mft_set_grad_enabled(grad);
    mft__scope_resume();
    mft__cause_pop();
    return c;
}

/* r (made with the scopes suspended) back in tag when tag is NCHW8C /
 * NCHW16C (a fallback conversion), registered as op's result. */
static mft_tensor *batch_hand_over(const char *fn, const char *op, mft_tensor *r, mft_format tag) {
    if (r && (tag == MFT_NCHW8C || tag == MFT_NCHW16C)) {
        mft__cause_push(MFT_CAUSE_FALLBACK, op);
        mft__scope_suspend();
        mft_tensor *b = mft_to_format(r, tag);
        mft__scope_resume();
        mft__cause_pop();
        mft_tensor_release(r);
        r = b;
    }
    if (!r) return NULL;
    mft_tensor *kept = mft__retain_result(fn, r);
    mft_tensor_release(r);
    return kept;
}

mft_tensor *mft_gather_rows(const mft_tensor *t, const int64_t *idx, int64_t count) {
    static const char fn[] = "mft_gather_rows";
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    if (mft__is_blocked(t)) { /* rows of the plain copy, back in t's format */
        mft_tensor *c = batch_plain("gather_rows", t);
        if (!c) return NULL;
        mft__scope_suspend();
        mft_tensor *r = mft_gather_rows(c, idx, count);
        mft__scope_resume();
        mft_tensor_release(c);
        return batch_hand_over(fn, "gather_rows", r, t->tag);
    }
    if (t->ndim < 1) {
        mft__set_error(MFT_ERR_RANK, "%s: t must have rank >= 1, got rank 0", fn);
        return NULL;
    }
    if (count < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: count %lld is negative", fn, (long long)count);
        return NULL;
    }
    if (count > 0 && !idx) {
        mft__null_arg(fn, "idx");
        return NULL;
    }
    if (!batch_check_indices(fn, idx, count, t->sizes[0])) return NULL;
    int64_t sizes[MFT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) sizes[d] = t->sizes[d];
    sizes[0] = count;
    if (mft__check_geometry(fn, t->ndim, sizes, NULL, t->dtype) != MFT_OK) return NULL;
    const mft__decision dec = mft__rule_decide(MFT__RULE_GATHER, "gather_rows", 1, &t,
                                               MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft__scope_suspend();
    mft_tensor *out = mft__tensor_alloc(fn, t->ndim, sizes, t->dtype, fmt);
    mft__scope_resume();
    if (!out) return NULL;
    mft__rule_apply(out, &dec);
    if (out->numel > 0) {
        /* rows are single blocks when t is packed in a format whose slowest
         * dim is dim 0 (both named formats) and out has the same order */
        bool packed = mft_tensor_is_contiguous(t, fmt);
        for (int d = 1; packed && d < t->ndim; d++)
            packed = t->sizes[d] == 1 || t->strides[d] == out->strides[d];
        gather_ctx c = {t, out, idx, mft__elem_size(t->dtype), packed};
        int64_t row = out->numel / count;
        int64_t grain = row >= 32768 ? 1 : 32768 / (row ? row : 1);
        mft__parallel_for(0, count, grain, gather_rows_kernel, &c);
    }
    mft_tensor *r = mft__retain_result(fn, out);
    mft_tensor_release(out);
    return r;
}

/* ------------------------------------------------------------------ images_to_batch */
typedef struct to_batch_ctx {
    const mft_tensor *img; /* U8 (N, C, H, W) view (a rank-3 input gets C = 1) */
    int64_t is[4];         /* img strides in elements, C stride 0 for rank 3 */
    int64_t C, H, W;
    mft_tensor *out;
    const int64_t *idx;
    const void *lut; /* 256 entries of the output dtype */
} to_batch_ctx;

/* in: images u8 (N,C,H,W) any strides; out (count,C,H,W) packed NCHW or NHWC;
 * out[b,c,h,w] = lut[in[idx[b],c,h,w]]. The loop walks the output in its
 * physical order so writes stream. */
#define TO_BATCH_KERNEL(T, SUF)                                                              \
    static void to_batch_kernel_##SUF(void *vctx, int64_t begin, int64_t end) {              \
        const to_batch_ctx *c = vctx;                                                        \
        const T *lut = c->lut;                                                               \
        const int64_t *os = c->out->strides;                                                 \
        const int64_t s0 = c->is[0], s1 = c->is[1], s2 = c->is[2], s3 = c->is[3];            \
        const bool nhwc = os[1] == 1 && c->C > 1;                                            \
        for (int64_t b = begin; b < end; b++) {                                              \
            const unsigned char *src =                                                       \
                (const unsigned char *)mft__tensor_ptr(c->img) + c->idx[b] * s0;            \
            T *dst = (T *)(void *)mft__tensor_ptr(c->out) + b * os[0];                       \
            if (nhwc) {                                                                      \
                for (int64_t h = 0; h < c->H; h++)                                           \
                    for (int64_t w = 0; w < c->W; w++) {                                     \
                        const unsigned char *p = src + h * s2 + w * s3;                      \
                        T *q = dst + h * os[2] + w * os[3];                                  \
                        for (int64_t ch = 0; ch < c->C; ch++) q[ch] = lut[p[ch * s1]];       \
                    }                                                                        \
            } else {                                                                         \
                for (int64_t ch = 0; ch < c->C; ch++)                                        \
                    for (int64_t h = 0; h < c->H; h++) {                                     \
                        const unsigned char *p = src + ch * s1 + h * s2;                     \
                        T *q = dst + ch * os[1] + h * os[2];                                 \
                        if (s3 == 1 && os[3] == 1) {                                         \
                            for (int64_t w = 0; w < c->W; w++) q[w] = lut[p[w]];             \
                        } else {                                                             \
                            for (int64_t w = 0; w < c->W; w++) q[w * os[3]] = lut[p[w * s3]]; \
                        }                                                                    \
                    }                                                                        \
            }                                                                                \
        }                                                                                    \
    }
TO_BATCH_KERNEL(float, f32)
TO_BATCH_KERNEL(double, f64)

mft_tensor *mft_images_to_batch(const mft_tensor *images, const int64_t *idx, int64_t count,
                                double scale, double mean, double std, mft_format fmt,
                                mft_dtype dtype) {
    static const char fn[] = "mft_images_to_batch";
    if (!images) {
        mft__null_arg(fn, "images");
        return NULL;
    }
    if (mft__is_blocked(images)) { /* the batch of the plain copy (fmt says its format) */
        mft_tensor *c = batch_plain("images_to_batch", images);
        if (!c) return NULL;
        mft__scope_suspend();
        mft_tensor *r = mft_images_to_batch(c, idx, count, scale, mean, std, fmt, dtype);
        mft__scope_resume();
        mft_tensor_release(c);
        return batch_hand_over(fn, "images_to_batch", r, MFT_CONTIGUOUS);
    }
    char b1[MFT__DIMS_BUF];
    if (images->dtype != MFT_U8) {
        mft__set_error(MFT_ERR_DTYPE, "%s: images must be u8, got %s", fn,
                       mft_dtype_name(images->dtype));
        return NULL;
    }
    if (images->ndim != 3 && images->ndim != 4) {
        mft__set_error(MFT_ERR_RANK, "%s: images must be (N,H,W) or (N,C,H,W), got sizes %s", fn,
                       mft__fmt_dims(b1, sizeof b1, images->ndim, images->sizes));
        return NULL;
    }
    if (dtype != MFT_F32 && dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype must be f32 or f64, got %s", fn,
                       mft_dtype_name(dtype));
        return NULL;
    }
    if (fmt == MFT_NCHW8C || fmt == MFT_NCHW16C) {
        /* a blocked batch: the plain batch, reordered into the blocks (an
         * explicit conversion: the caller asked for the format) */
        mft__scope_suspend();
        mft_tensor *p = mft_images_to_batch(images, idx, count, scale, mean, std, MFT_CONTIGUOUS,
                                            dtype);
        mft_tensor *r = p ? mft_to_format(p, fmt) : NULL;
        mft__scope_resume();
        mft_tensor_release(p);
        if (!r) {
            mft__relabel_error(fn);
            return NULL;
        }
        mft_tensor *kept = mft__retain_result(fn, r);
        mft_tensor_release(r);
        return kept;
    }
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: fmt must be CONTIGUOUS, CHANNELS_LAST, NCHW8C or NCHW16C, got %s", fn,
                       mft_format_name(fmt));
        return NULL;
    }
    if (count < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: count %lld is negative", fn, (long long)count);
        return NULL;
    }
    if (!isfinite(scale) || !isfinite(mean) || !isfinite(std) || std == 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: scale %g, mean %g and std %g must be finite, std non-zero", fn, scale,
                       mean, std);
        return NULL;
    }
    if (count > 0 && !idx) {
        mft__null_arg(fn, "idx");
        return NULL;
    }
    if (!batch_check_indices(fn, idx, count, images->sizes[0])) return NULL;

    to_batch_ctx c;
    memset(&c, 0, sizeof c);
    c.img = images;
    c.idx = idx;
    c.is[0] = images->strides[0];
    if (images->ndim == 3) {
        c.C = 1;
        c.is[1] = 0;
        c.H = images->sizes[1], c.is[2] = images->strides[1];
        c.W = images->sizes[2], c.is[3] = images->strides[2];
    } else {
        c.C = images->sizes[1], c.is[1] = images->strides[1];
        c.H = images->sizes[2], c.is[2] = images->strides[2];
        c.W = images->sizes[3], c.is[3] = images->strides[3];
    }
    int64_t sizes[4] = {count, c.C, c.H, c.W};
    if (mft__check_geometry(fn, 4, sizes, NULL, dtype) != MFT_OK) return NULL;
    mft__scope_suspend();
    mft_tensor *out = mft__tensor_alloc(fn, 4, sizes, dtype, fmt);
    mft__scope_resume();
    if (!out) return NULL;
    c.out = out;
    float lut32[256];
    double lut64[256];
    for (int v = 0; v < 256; v++) {
        lut64[v] = ((double)v * scale - mean) / std;
        lut32[v] = (float)lut64[v];
    }
    c.lut = dtype == MFT_F32 ? (const void *)lut32 : (const void *)lut64;
    if (out->numel > 0) {
        int64_t per = c.C * c.H * c.W;
        int64_t grain = per >= 32768 ? 1 : 32768 / per;
        mft__parallel_for(0, count, grain,
                          dtype == MFT_F32 ? to_batch_kernel_f32 : to_batch_kernel_f64, &c);
    }
    mft_tensor *r = mft__retain_result(fn, out);
    mft_tensor_release(out);
    return r;
}
