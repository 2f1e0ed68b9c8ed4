/* ops/dropout/dropout.c — dropout and dropout2d (training), forward and backward
 * (mft/resize.h). Not dispatched: one elementwise loop that walks the
 * result's memory order.
 *
 * Note [Dropout draws]
 * The keep decision of an element is a pure function of (seed, key), where
 * the key is the element's linear index in row-major LOGICAL order (dropout)
 * or the channel index n*C + c (dropout2d). So the mask is the same for NCHW,
 * NHWC and strided inputs and for every thread count, and the backward
 * regenerates it from the seed. The draw:
 *     k = splitmix64(seed ^ splitmix64(key >> 32))      (per 2^32 keys)
 *     h = lowbias32(lowbias32((uint32)key ^ lo32(k)) ^ hi32(k))
 *     u = h / 2^32 in [0, 1);  keep iff u >= p
 * (lowbias32 is C. Wellons' 32-bit integer hash). keep iff h >= ceil(p*2^32),
 * compared in integers. Kept values are scaled by 1/(1-p); dropped ones are
 * 0 (deviation: PyTorch multiplies by a 0 mask, so a dropped inf or NaN
 * gives NaN there). PyTorch's masks come from its own RNG and cannot be
 * reproduced: only the statistics match (documented deviation).
 *
 * Speed: the loop walks the result in memory order after coalescing dims;
 * along the innermost dim the key grows by a constant step, so the hash is
 * 32-bit integer arithmetic the compiler vectorises, and the loop is
 * memory-bound.
 *
 * Autograd: mft_dropout / mft_dropout2d record one node (params p,
 * training, seed; nothing saved) whose backward regenerates the mask with
 * the public backward: grad_x = mask * grad_out / (1 - p), packed in
 * grad_out's tag (the output's, = the input's). p = 0 or eval returns x
 * itself, so nothing is recorded and the gradient flows through x. */
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"
#include "mft/resize.h"

/* ---------------------------------------------------------------- draws */
static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint32_t lowbias32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline uint64_t dropout_block_key(uint64_t seed, uint64_t hi) {
    return splitmix64(seed ^ splitmix64(hi));
}

static inline uint32_t dropout_hash(uint32_t lo, uint64_t k) {
    return lowbias32(lowbias32(lo ^ (uint32_t)k) ^ (uint32_t)(k >> 32));
}

/* The 32-bit draw of one key (the definition; the loops below compute the
 * same thing in bulk). Also used by the tests. */
uint32_t mft__dropout_draw(uint64_t seed, uint64_t key);
uint32_t mft__dropout_draw(uint64_t seed, uint64_t key) {
    return dropout_hash((uint32_t)key, dropout_block_key(seed, key >> 32));
}

/* ---------------------------------------------------------------- the walk */
typedef struct drop_job {
    int nd;                      /* coalesced dims, slowest first; the last is the row */
    int64_t size[MFT_MAX_DIMS];
    int64_t xs[MFT_MAX_DIMS];    /* x strides (elements) */
    int64_t ys[MFT_MAX_DIMS];    /* y strides (elements) */
    int64_t ks[MFT_MAX_DIMS];    /* key strides */
    const char *x;
    char *y;
    mft_dtype dt;
    uint64_t seed;
    uint32_t thr;                /* keep iff h >= thr */
    double scale;
    const uint8_t *chan_keep;    /* dropout2d: keep flag per n*C + c; NULL for dropout */
} drop_job;

/* The block key of the last 2^32-key block a thread used (rows of NHWC
 * tensors are short: two splitmix64 per row would cost as much as the row). */
typedef struct key_cache {
    uint64_t hi, bk;
    bool valid;
} key_cache;

/* Dropped elements are selected with a bit mask (and of the value's bits),
 * not a branch or a ?: on a load: GCC vectorises that form only. */
#define MFT__BITS_F32 uint32_t
#define MFT__BITS_F64 uint64_t
#define DROP_ROW(D)                                                                            \
    static inline MFT__T_##D drop_mask_##D(MFT__T_##D v, bool keep) {                          \
        MFT__BITS_##D b, m = (MFT__BITS_##D)0 - (MFT__BITS_##D)keep;                           \
        memcpy(&b, &v, sizeof b);                                                              \
        b &= m;                                                                                \
        memcpy(&v, &b, sizeof b);                                                              \
        return v;                                                                              \
    }                                                                                          \
    static void drop_row_##D(const drop_job *j, const MFT__T_##D *restrict x,                  \
                             MFT__T_##D *restrict y, int64_t L, int64_t xs, uint64_t key,      \
                             uint64_t ks, key_cache *kc) {                                     \
        typedef MFT__T_##D T;                                                                  \
        const T scale = (T)j->scale;                                                           \
        if (j->chan_keep) {                                                                    \
            for (int64_t i = 0; i < L; i++)                                                    \
                y[i] = drop_mask_##D(x[i * xs] * scale, j->chan_keep[key + (uint64_t)i * ks]); \
            return;                                                                            \
        }                                                                                      \
        const uint32_t thr = j->thr;                                                           \
        const uint64_t last = key + (uint64_t)(L - 1) * ks;                                    \
        if ((key >> 32) != (last >> 32) || ks > UINT32_MAX) { /* rare: keys cross 2^32 */      \
            for (int64_t i = 0; i < L; i++) {                                                  \
                uint64_t k = key + (uint64_t)i * ks;                                           \
                y[i] = drop_mask_##D(x[i * xs] * scale, mft__dropout_draw(j->seed, k) >= thr); \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        if (!kc->valid || kc->hi != key >> 32) {                                               \
            kc->hi = key >> 32;                                                                \
            kc->bk = dropout_block_key(j->seed, kc->hi);                                       \
            kc->valid = true;                                                                  \
        }                                                                                      \
        const uint64_t bk = kc->bk;                                                            \
        const uint32_t k0 = (uint32_t)bk, k1 = (uint32_t)(bk >> 32);                           \
        const uint32_t lo = (uint32_t)key, step = (uint32_t)ks;                                \
        if (xs == 1) {                                                                         \
            for (int64_t i = 0; i < L; i++) {                                                  \
                const uint32_t h = lowbias32(lowbias32((lo + (uint32_t)i * step) ^ k0) ^ k1);  \
                y[i] = drop_mask_##D(x[i] * scale, h >= thr);                                  \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < L; i++) {                                                  \
                const uint32_t h = lowbias32(lowbias32((lo + (uint32_t)i * step) ^ k0) ^ k1);  \
                y[i] = drop_mask_##D(x[i * xs] * scale, h >= thr);                             \
            }                                                                                  \
        }                                                                                      \
    }
DROP_ROW(F32)
DROP_ROW(F64)

/* One piece of a row: elements [from, from + len) of the row at offsets
 * (xo, yo) with key `key` at its element 0. */
static void drop_piece(const drop_job *j, int64_t xo, int64_t yo, uint64_t key, int64_t from,
                       int64_t len, key_cache *kc) {
    const int outer = j->nd - 1;
    const size_t es = mft__elem_size(j->dt);
    const int64_t xs = j->xs[outer];
    const uint64_t ks = (uint64_t)j->ks[outer];
    const char *xp = j->x + (xo + from * xs) * (int64_t)es;
    char *yp = j->y + (yo + from * j->ys[outer]) * (int64_t)es;
    key += (uint64_t)from * ks;
    if (j->dt == MFT_F32)
        drop_row_F32(j, (const float *)(const void *)xp, (float *)(void *)yp, len, xs, key, ks,
                     kc);
    else
        drop_row_F64(j, (const double *)(const void *)xp, (double *)(void *)yp, len, xs, key,
                     ks, kc);
}

/* Long rows (one dense tensor is one row) are split into pieces of
 * DROP_PIECE elements, so that they spread over the threads. */
#define DROP_PIECE 16384

/* Pieces [begin, end) = (row, piece) pairs of long rows. */
static void drop_pieces_range(void *ctx, int64_t begin, int64_t end) {
    const drop_job *j = ctx;
    const int outer = j->nd - 1;
    const int64_t L = j->size[outer], nb = (L + DROP_PIECE - 1) / DROP_PIECE;
    key_cache kc = {0, 0, false};
    for (int64_t it = begin; it < end; it++) {
        int64_t r = it / nb, from = (it % nb) * DROP_PIECE, xo = 0, yo = 0;
        uint64_t key = 0;
        for (int d = outer - 1; d >= 0; d--) {
            const int64_t i = r % j->size[d];
            r /= j->size[d];
            xo += i * j->xs[d];
            yo += i * j->ys[d];
            key += (uint64_t)i * (uint64_t)j->ks[d];
        }
        drop_piece(j, xo, yo, key, from, L - from < DROP_PIECE ? L - from : DROP_PIECE, &kc);
    }
}

/* Rows [begin, end): every dim but the last, in memory order. */
static void drop_range(void *ctx, int64_t begin, int64_t end) {
    const drop_job *j = ctx;
    const int outer = j->nd - 1;
    const int64_t L = j->size[outer];
    key_cache kc = {0, 0, false};
    int64_t idx[MFT_MAX_DIMS] = {0};
    int64_t r = begin;
    for (int d = outer - 1; d >= 0; d--) {
        idx[d] = r % j->size[d];
        r /= j->size[d];
    }
    for (int64_t row = begin; row < end; row++) {
        int64_t xo = 0, yo = 0;
        uint64_t key = 0;
        for (int d = 0; d < outer; d++) {
            xo += idx[d] * j->xs[d];
            yo += idx[d] * j->ys[d];
            key += (uint64_t)idx[d] * (uint64_t)j->ks[d];
        }
        drop_piece(j, xo, yo, key, 0, L, &kc);
        for (int d = outer - 1; d >= 0; d--) {
            if (++idx[d] < j->size[d]) break;
            idx[d] = 0;
        }
    }
}

/* ---------------------------------------------------------------- entry */
static mft_tensor *dropout_run(const char *fn, const char *xname, const mft_tensor *x, double p,
                               bool training, uint64_t seed, bool channels) {
    char b1[MFT__DIMS_BUF];
    if (!x) {
        mft__null_arg(fn, xname);
        return NULL;
    }
    if (!(p >= 0.0 && p <= 1.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: dropout probability p = %g should be between 0 and 1",
                       fn, p);
        return NULL;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 and f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return NULL;
    }
    if (channels && x->ndim < 2) {
        mft__set_error(MFT_ERR_RANK, "%s: expected an (N, C, ...) %s of rank >= 2, got rank %d "
                       "with sizes %s", fn, xname, x->ndim,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return NULL;
    }
    if (p == 0.0 || !training) return mft__retain_result(fn, (mft_tensor *)x);

    const mft__decision dec = mft__rule_decide(MFT__RULE_DROPOUT, fn + 4, 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    uint8_t *keep = NULL;
    const int64_t nc = channels ? x->sizes[0] * x->sizes[1] : 0;
    /* the keep threshold: h >= ceil(p * 2^32); p so close to 1 that no h
     * passes drops everything, as p = 1 */
    const double t = ceil(p * 4294967296.0);
    const bool drop_all = p == 1.0 || t > 4294967295.0;
    if (channels && !drop_all && nc > 0) {
        keep = mft__alloc_or_err(fn, (size_t)nc, 64);
        if (!keep) return NULL;
        for (int64_t i = 0; i < nc; i++)
            keep[i] = mft__dropout_draw(seed, (uint64_t)i) >= (uint32_t)t;
    }
    mft__scope_suspend();
    mft_tensor *y = mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
    mft__scope_resume();
    if (!y) {
        mft__free(keep);
        return NULL;
    }
    if (drop_all) {
        mft__fill(y, 0.0);
    } else if (y->numel > 0) {
        drop_job j;
        memset(&j, 0, sizeof j);
        int order[MFT_MAX_DIMS];
        int64_t rm[MFT_MAX_DIMS]; /* row-major logical strides */
        int64_t acc = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            rm[d] = acc;
            acc *= x->sizes[d];
        }
        mft__format_order(x->ndim, fmt, order);
        for (int k = 0; k < x->ndim; k++) {
            const int d = order[k];
            if (x->sizes[d] == 1) continue;
            const int64_t ks = channels ? (d == 0 ? x->sizes[1] : d == 1 ? 1 : 0) : rm[d];
            if (j.nd > 0) { /* merge into the previous (slower) dim when all strides allow */
                const int o = j.nd - 1;
                const int64_t s = x->sizes[d];
                if (j.xs[o] == x->strides[d] * s && j.ys[o] == y->strides[d] * s &&
                    j.ks[o] == ks * s) {
                    j.size[o] *= s;
                    j.xs[o] = x->strides[d];
                    j.ys[o] = y->strides[d];
                    j.ks[o] = ks;
                    continue;
                }
            }
            j.size[j.nd] = x->sizes[d];
            j.xs[j.nd] = x->strides[d];
            j.ys[j.nd] = y->strides[d];
            j.ks[j.nd] = ks;
            j.nd++;
        }
        if (j.nd == 0) { /* a single element */
            j.size[0] = 1;
            j.xs[0] = j.ys[0] = j.ks[0] = 1;
            j.nd = 1;
        }
        j.x = mft__tensor_ptr(x);
        j.y = mft__tensor_ptr(y);
        j.dt = x->dtype;
        j.seed = seed;
        j.thr = (uint32_t)t;
        j.scale = 1.0 / (1.0 - p);
        j.chan_keep = keep;
        const int64_t L = j.size[j.nd - 1];
        if (L > 2 * DROP_PIECE) {
            const int64_t nb = (L + DROP_PIECE - 1) / DROP_PIECE;
            mft__parallel_for(0, y->numel / L * nb, 2, drop_pieces_range, &j);
        } else {
            int64_t grain = 32768 / L;
            if (grain < 1) grain = 1;
            mft__parallel_for(0, y->numel / L, grain, drop_range, &j);
        }
    }
    mft__free(keep);
    mft__rule_apply(y, &dec);
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}

typedef struct dropout_ag_params {
    double p;
    uint64_t seed;
    bool training, channels;
} dropout_ag_params;

static mft_status dropout_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                        mft_tensor **gin) {
    const dropout_ag_params *a = n->params;
    gin[0] = a->channels ? mft_dropout2d_backward(gout[0], a->p, a->training, a->seed)
                         : mft_dropout_backward(gout[0], a->p, a->training, a->seed);
    return gin[0] ? MFT_OK : mft_last_error();
}

/* Forward plus recording (softmax_entry in ops/softmax/softmax.c explains the
 * pattern). */
static mft_tensor *dropout_entry(const char *fn, const mft_tensor *x, double p, bool training,
                                 uint64_t seed, bool channels) {
    if (!mft__ag_wants(1, &x)) return dropout_run(fn, "x", x, p, training, seed, channels);
    mft__scope_suspend();
    const bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = dropout_run(fn, "x", x, p, training, seed, channels);
    mft_set_grad_enabled(prev);
    mft__scope_resume();
    if (!y) return NULL;
    dropout_ag_params a;
    memset(&a, 0, sizeof a); /* padding copied into the node: keep it defined */
    a.p = p;
    a.seed = seed;
    a.training = training;
    a.channels = channels;
    if (mft__ag_record1(fn, channels ? "dropout2d" : "dropout", dropout_node_backward, x, y, false,
                        false, &a, sizeof a) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}

mft_tensor *mft_dropout(const mft_tensor *x, double p, bool training, uint64_t seed) {
    /* p 0 or eval: x itself comes back, blocked or not */
    if (training && p != 0.0)
        MFT__BLOCKED_FALLBACK("dropout", mft_dropout(x, p, training, seed), 1, &x);
    return dropout_entry("mft_dropout", x, p, training, seed, false);
}

mft_tensor *mft_dropout2d(const mft_tensor *x, double p, bool training, uint64_t seed) {
    /* p 0 or eval: x itself comes back, blocked or not */
    if (training && p != 0.0)
        MFT__BLOCKED_FALLBACK("dropout2d", mft_dropout2d(x, p, training, seed), 1, &x);
    return dropout_entry("mft_dropout2d", x, p, training, seed, true);
}

mft_tensor *mft_dropout_backward(const mft_tensor *grad_out, double p, bool training,
                                 uint64_t seed) {
    /* p 0 or eval: grad_out itself comes back, blocked or not */
    if (training && p != 0.0)
        MFT__BLOCKED_FALLBACK("dropout_backward", mft_dropout_backward(grad_out, p, training, seed),
                              1, &grad_out);
    return dropout_run("mft_dropout_backward", "grad_out", grad_out, p, training, seed, false);
}

mft_tensor *mft_dropout2d_backward(const mft_tensor *grad_out, double p, bool training,
                                   uint64_t seed) {
    /* p 0 or eval: grad_out itself comes back, blocked or not */
    if (training && p != 0.0)
        MFT__BLOCKED_FALLBACK("dropout2d_backward",
                              mft_dropout2d_backward(grad_out, p, training, seed), 1, &grad_out);
    return dropout_run("mft_dropout2d_backward", "grad_out", grad_out, p, training, seed, true);
}
