/* tests/fuzz/fuzz_overlap.c — fuzz target for writes through overlapping views
 * (mft/ops.h _out and in-place ops, mft_copy_, mft_fill_).
 *
 * All operands live in ONE 512-byte buffer. Each input is a list of up to 6
 * cases; a case picks an op, a destination and its inputs as (sizes, strides,
 * offset) views of the buffer, made either as views of one mft tensor wrapping
 * the buffer (mft_as_strided: one storage) or as SEPARATE mft_from_blob wraps of
 * the same memory (one storage each), or mixed; an operand may also be the very
 * same object as another (mft_mul_out(o, a, a)). Inputs are derived from the
 * destination (same geometry at another offset, broadcast shapes, an exact
 * alias, ...) so overlaps are frequent; strides include 0 and huge values.
 *
 * Before each op the whole buffer is snapshot and the expected result is
 * computed by a naive reference (loops over logical indices through the strides,
 * inputs read from the snapshot). Oracles:
 *  - the op returned MFT_OK: every destination element equals the reference and
 *    no byte outside the destination's elements changed; the destination did not
 *    overlap itself, and no input partially overlapped it (shared memory that
 *    is not the very same element at every index): those must be refused;
 *  - the op refused: the buffer is unchanged, and the error is set with an
 *    "mft_..." message;
 *  - no tensor or storage outlives the input.
 * Value semantics of the reference: integers wrap (two's complement), floats
 * are IEEE in the operand type, compared by value with NaN == NaN.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include "fuzz_common.h"

enum { MEM_BYTES = 512, MAX_OPS = 3, MAX_CASES = 6, NDIM = 4 };
static _Alignas(64) unsigned char g_mem[MEM_BYTES];
static _Alignas(64) unsigned char g_snap[MEM_BYTES];
static _Alignas(64) unsigned char g_want[MEM_BYTES];
static unsigned char g_dst_mask[MEM_BYTES];

/* ------------------------------------------------------------------ ops */
typedef enum kind {
    K_ADD_OUT, K_SUB_OUT, K_MUL_OUT, K_MAX_OUT, K_MIN_OUT, K_DIV_OUT,
    K_ADD_, K_SUB_, K_MUL_, K_MAX_, K_MIN_,
    K_COPY_,
    K_NEG_OUT, K_ABS_OUT, K_SQUARE_OUT, K_FLOOR_OUT, K_ROUND_OUT, K_RELU_OUT,
    K_NEG_, K_ABS_, K_SQUARE_,
    K_ADD_SCALAR_OUT, K_MUL_SCALAR_OUT, K_ADD_SCALAR_, K_CLAMP_OUT, K_CLAMP_,
    K_WHERE_OUT, K_FILL_,
    K_COUNT
} kind;

static const char *const KIND_NAMES[K_COUNT] = {
    "mft_add_out", "mft_sub_out", "mft_mul_out", "mft_maximum_out", "mft_minimum_out", "mft_div_out",
    "mft_add_", "mft_sub_", "mft_mul_", "mft_maximum_", "mft_minimum_",
    "mft_copy_",
    "mft_neg_out", "mft_abs_out", "mft_square_out", "mft_floor_out", "mft_round_out", "mft_relu_out",
    "mft_neg_", "mft_abs_", "mft_square_",
    "mft_add_scalar_out", "mft_mul_scalar_out", "mft_add_scalar_", "mft_clamp_out", "mft_clamp_",
    "mft_where_out", "mft_fill_"};

/* Number of tensor inputs besides the destination; in-place ops read the
 * destination as input 0. */
static int n_inputs(kind k) {
    switch (k) {
    case K_ADD_OUT: case K_SUB_OUT: case K_MUL_OUT: case K_MAX_OUT: case K_MIN_OUT: case K_DIV_OUT: return 2;
    case K_WHERE_OUT: return 3;
    case K_ADD_: case K_SUB_: case K_MUL_: case K_MAX_: case K_MIN_: return 2; /* dst, b */
    case K_NEG_: case K_ABS_: case K_SQUARE_: case K_ADD_SCALAR_: case K_CLAMP_: return 1; /* dst */
    case K_FILL_: return 0;
    default: return 1;
    }
}
static bool in_place(kind k) {
    return (k >= K_ADD_ && k <= K_MIN_) || k == K_NEG_ || k == K_ABS_ || k == K_SQUARE_ ||
           k == K_ADD_SCALAR_ || k == K_CLAMP_;
}

/* ------------------------------------------------------------------ values */
typedef struct val {
    double f;  /* F32 / F64 */
    int64_t i; /* integers */
} val;

static bool is_float(mft_dtype dt) { return dt == MFT_F32 || dt == MFT_F64; }

static val load(mft_dtype dt, const unsigned char *p) {
    val v = {0, 0};
    switch (dt) {
    case MFT_F32: { float x; memcpy(&x, p, 4); v.f = x; break; }
    case MFT_F64: memcpy(&v.f, p, 8); break;
    case MFT_I32: { int32_t x; memcpy(&x, p, 4); v.i = x; break; }
    case MFT_I64: memcpy(&v.i, p, 8); break;
    case MFT_U8: v.i = *p; break;
    default: break;
    }
    return v;
}

/* Stores v (already in dt's domain for floats; integers wrap to the width). */
static void store(mft_dtype dt, unsigned char *p, val v) {
    switch (dt) {
    case MFT_F32: { float x = (float)v.f; memcpy(p, &x, 4); break; }
    case MFT_F64: memcpy(p, &v.f, 8); break;
    case MFT_I32: { uint32_t x = (uint32_t)(uint64_t)v.i; memcpy(p, &x, 4); break; }
    case MFT_I64: memcpy(p, &v.i, 8); break;
    case MFT_U8: *p = (unsigned char)(uint64_t)v.i; break;
    default: break;
    }
}

/* Wraps an integer result to dt's width (as a signed/unsigned value). */
static int64_t wrap_int(mft_dtype dt, uint64_t x) {
    switch (dt) {
    case MFT_I32: { uint32_t u = (uint32_t)x; int32_t s; memcpy(&s, &u, 4); return s; }
    case MFT_U8: return (int64_t)(uint8_t)x;
    default: { int64_t s; memcpy(&s, &x, 8); return s; }
    }
}

/* Float arithmetic in the operand type (F32 results rounded to float). */
static double fround(mft_dtype dt, double x) { return dt == MFT_F32 ? (double)(float)x : x; }

static val op_binary(kind k, mft_dtype dt, val a, val b) {
    val r = {0, 0};
    if (is_float(dt)) {
        bool f32 = dt == MFT_F32;
        float af = (float)a.f, bf = (float)b.f;
        switch (k) {
        case K_ADD_OUT: case K_ADD_: r.f = f32 ? (double)(af + bf) : a.f + b.f; break;
        case K_SUB_OUT: case K_SUB_: r.f = f32 ? (double)(af - bf) : a.f - b.f; break;
        case K_MUL_OUT: case K_MUL_: r.f = f32 ? (double)(af * bf) : a.f * b.f; break;
        case K_DIV_OUT: r.f = f32 ? (double)(af / bf) : a.f / b.f; break;
        case K_MAX_OUT: case K_MAX_: r.f = (a.f != a.f || a.f > b.f) ? a.f : b.f; break;
        case K_MIN_OUT: case K_MIN_: r.f = (a.f != a.f || a.f < b.f) ? a.f : b.f; break;
        default: break;
        }
        return r;
    }
    uint64_t ua = (uint64_t)a.i, ub = (uint64_t)b.i;
    switch (k) {
    case K_ADD_OUT: case K_ADD_: r.i = wrap_int(dt, ua + ub); break;
    case K_SUB_OUT: case K_SUB_: r.i = wrap_int(dt, ua - ub); break;
    case K_MUL_OUT: case K_MUL_: r.i = wrap_int(dt, ua * ub); break;
    case K_MAX_OUT: case K_MAX_: r.i = a.i > b.i ? a.i : b.i; break;
    case K_MIN_OUT: case K_MIN_: r.i = a.i < b.i ? a.i : b.i; break;
    default: break;
    }
    return r;
}

static val op_unary(kind k, mft_dtype dt, val x, double s0, double s1) {
    val r = x;
    if (is_float(dt)) {
        double v = x.f;
        switch (k) {
        case K_NEG_OUT: case K_NEG_: r.f = -v; break;
        case K_ABS_OUT: case K_ABS_: r.f = fabs(v); break;
        case K_SQUARE_OUT: case K_SQUARE_: r.f = fround(dt, v * v); break;
        case K_FLOOR_OUT: r.f = floor(v); break;
        case K_ROUND_OUT: r.f = nearbyint(v); break;
        case K_RELU_OUT: r.f = v < 0 ? 0.0 : v; break;
        case K_ADD_SCALAR_OUT: case K_ADD_SCALAR_: r.f = fround(dt, v + fround(dt, s0)); break;
        case K_MUL_SCALAR_OUT: r.f = fround(dt, v * fround(dt, s0)); break;
        case K_CLAMP_OUT: case K_CLAMP_: {
            double lo = fround(dt, s0), hi = fround(dt, s1), c = v < lo ? lo : v;
            r.f = c > hi ? hi : c;
            break;
        }
        default: break;
        }
        return r;
    }
    uint64_t u = (uint64_t)x.i;
    int64_t p0 = (int64_t)s0, p1 = (int64_t)s1; /* small integral scalars */
    switch (k) {
    case K_NEG_OUT: case K_NEG_: r.i = wrap_int(dt, 0 - u); break;
    case K_ABS_OUT: case K_ABS_: r.i = x.i < 0 ? wrap_int(dt, 0 - u) : x.i; break;
    case K_SQUARE_OUT: case K_SQUARE_: r.i = wrap_int(dt, u * u); break;
    case K_FLOOR_OUT: case K_ROUND_OUT: break;
    case K_RELU_OUT: r.i = x.i < 0 ? 0 : x.i; break;
    case K_ADD_SCALAR_OUT: case K_ADD_SCALAR_: r.i = wrap_int(dt, u + (uint64_t)wrap_int(dt, (uint64_t)p0)); break;
    case K_MUL_SCALAR_OUT: r.i = wrap_int(dt, u * (uint64_t)wrap_int(dt, (uint64_t)p0)); break;
    case K_CLAMP_OUT: case K_CLAMP_: {
        int64_t lo = wrap_int(dt, (uint64_t)p0), hi = wrap_int(dt, (uint64_t)p1), c = x.i < lo ? lo : x.i;
        r.i = c > hi ? hi : c;
        break;
    }
    default: break;
    }
    return r;
}

/* copy_ conversions whose result is unambiguous (exact, or one IEEE rounding). */
static bool copy_supported(mft_dtype from, mft_dtype to) {
    if (from == to || to == MFT_F64) return true;
    if (to == MFT_F32) return true; /* ints and f64 round once */
    if (to == MFT_I64) return from == MFT_I32 || from == MFT_U8;
    if (to == MFT_I32) return from == MFT_U8;
    return false;
}

static val convert(mft_dtype from, mft_dtype to, val v) {
    val r = {0, 0};
    if (is_float(to)) {
        if (is_float(from)) r.f = fround(to, v.f);
        else r.f = to == MFT_F32 ? (double)(float)v.i : (double)v.i;
    } else {
        r.i = v.i;
    }
    return r;
}

static bool same_val(mft_dtype dt, val a, val b) {
    if (is_float(dt)) return a.f == b.f || (a.f != a.f && b.f != b.f);
    return a.i == b.i;
}

/* ------------------------------------------------------------------ operands */
typedef struct spec {
    int nd;
    int64_t sizes[NDIM], strides[NDIM], off; /* off in elements from the buffer start */
    mft_dtype dt;
    int wrap; /* 1: separate from_blob wrap, 0: as_strided view of the shared base */
    int same_as; /* >= 0: the very same object as operand same_as */
} spec;

static int64_t fuzz_stride(fz_in *in) {
    uint8_t b = fz_u8(in);
    if (b < 208) return b % 6;
    if (b < 240) return (b & 15) + 6;
    /* huge strides: only where they cannot reach (size 0 or 1) they stay valid */
    static const int64_t huge[16] = {INT64_MAX, INT64_MAX / 2, INT64_MAX / 3, (int64_t)1 << 62,
                                     (int64_t)1 << 61, (int64_t)1 << 40, (int64_t)1 << 32, 1 << 20,
                                     INT64_MAX - 1, INT64_MAX / 4, (int64_t)1 << 60, 4611686018427387903,
                                     3074457345618258602, 1 << 30, 64, 128};
    return huge[b & 15];
}

static void read_spec(fz_in *in, spec *s, mft_dtype dt, int wrap_mode) {
    memset(s, 0, sizeof *s);
    s->same_as = -1;
    s->dt = dt;
    s->nd = fz_u8(in) % (NDIM + 1);
    for (int d = 0; d < s->nd; d++) {
        uint8_t b = fz_u8(in);
        s->sizes[d] = b < 224 ? b % 5 : b % 9;
    }
    for (int d = 0; d < s->nd; d++) s->strides[d] = fuzz_stride(in);
    s->off = fz_u8(in) % 48;
    s->wrap = wrap_mode == 2 ? (fz_u8(in) & 1) : wrap_mode;
}

/* Another operand derived from the destination d (overlaps are likely). */
static void derive_spec(fz_in *in, spec *s, const spec *d, int index, int wrap_mode) {
    uint8_t how = fz_u8(in);
    switch (how % 8) {
    case 0: /* the same object */
        *s = *d;
        s->same_as = index;
        return;
    case 1: /* the same geometry, separate object (an exact alias) */
        *s = *d;
        s->same_as = -1;
        s->wrap = wrap_mode == 2 ? (fz_u8(in) & 1) : wrap_mode;
        return;
    case 2:
    case 3: /* the same geometry at another offset */
        *s = *d;
        s->same_as = -1;
        s->off = fz_u8(in) % 48;
        s->wrap = wrap_mode == 2 ? (fz_u8(in) & 1) : wrap_mode;
        return;
    case 4:
    case 5: { /* broadcast: trailing dims of d, some of them 1 */
        *s = *d;
        s->same_as = -1;
        int drop = d->nd ? fz_u8(in) % (d->nd + 1) : 0;
        s->nd = d->nd - drop;
        for (int i = 0; i < s->nd; i++) {
            s->sizes[i] = d->sizes[i + drop];
            s->strides[i] = d->strides[i + drop];
            uint8_t b = fz_u8(in);
            if (b & 1) {
                s->sizes[i] = 1;
                s->strides[i] = fuzz_stride(in);
            }
        }
        s->off = fz_u8(in) % 48;
        s->wrap = wrap_mode == 2 ? (fz_u8(in) & 1) : wrap_mode;
        return;
    }
    default:
        read_spec(in, s, d->dt, wrap_mode);
        return;
    }
}

static void trace_spec(const char *what, const spec *s) {
    if (!fz_trace()) return;
    char a[200], b[200];
    if (s->same_as == -2) fprintf(stderr, "    %s: the destination object itself\n", what);
    else if (s->same_as >= 100) fprintf(stderr, "    %s: the same object as input %d\n", what, s->same_as - 100);
    else
        fprintf(stderr, "    %s: %s %s sizes %s strides %s offset %lld\n", what,
                s->wrap ? "mft_from_blob(buf, 512 bytes," : "mft_as_strided(base,", mft_dtype_name(s->dt),
                fz_dims(a, sizeof a, s->nd, s->sizes), fz_dims(b, sizeof b, s->nd, s->strides), (long long)s->off);
}

static mft_tensor *make_operand(const spec *s, mft_tensor *base) {
    mft_clear_error();
    mft_tensor *t;
    if (s->wrap || !base || mft_tensor_dtype(base) != s->dt)
        t = mft_from_blob(g_mem, MEM_BYTES, s->nd, s->sizes, s->strides, s->off, s->dt, NULL, NULL);
    else
        t = mft_as_strided(base, s->nd, s->sizes, s->strides, s->off);
    if (!t) FZ_FAILED(s->wrap ? "mft_from_blob" : "mft_as_strided");
    return t;
}

/* Byte offset in the buffer of a tensor's element at idx (broadcast: idx has
 * the destination's rank; the tensor's dims are right-aligned). */
static int64_t elem_at(const mft_tensor *t, int nd_dst, const int64_t *idx) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
    int64_t off = 0;
    for (int i = 0; i < nd; i++) {
        int64_t k = sz[i] == 1 ? 0 : idx[i + nd_dst - nd];
        off += k * st[i]; /* inside the buffer: validated by the library and below */
    }
    return ((const unsigned char *)mft_tensor_data(t) - g_mem) + off * (int64_t)mft_dtype_size(mft_tensor_dtype(t));
}

static bool broadcasts_to(const mft_tensor *t, int nd, const int64_t *sizes) {
    int n = mft_tensor_ndim(t);
    if (n > nd) return false;
    for (int i = 0; i < n; i++) {
        int64_t s = mft_tensor_sizes(t)[i];
        if (s != 1 && s != sizes[i + nd - n]) return false;
    }
    return true;
}

static bool next_index(int nd, const int64_t *sizes, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < sizes[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Every element of t lies inside the buffer (the library accepted the view). */
static void check_inside(const mft_tensor *t) {
    if (mft_tensor_numel(t) == 0) return;
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
    int64_t reach = 0, term;
    for (int d = 0; d < nd; d++) {
        FZ_CHECK(!__builtin_mul_overflow(sz[d] - 1, st[d], &term) && !__builtin_add_overflow(reach, term, &reach),
                 "accepted view whose reach overflows");
    }
    int64_t first = (const unsigned char *)mft_tensor_data(t) - g_mem;
    int64_t es = (int64_t)mft_dtype_size(mft_tensor_dtype(t));
    FZ_CHECK(first >= 0 && reach <= (MEM_BYTES - first) / es - 1, "accepted view outside the buffer");
}

/* ------------------------------------------------------------------ one case */
static mft_status run_op(kind k, mft_tensor *dst, mft_tensor *const *in, double s0, double s1) {
    switch (k) {
    case K_ADD_OUT: return mft_add_out(dst, in[0], in[1]);
    case K_SUB_OUT: return mft_sub_out(dst, in[0], in[1]);
    case K_MUL_OUT: return mft_mul_out(dst, in[0], in[1]);
    case K_MAX_OUT: return mft_maximum_out(dst, in[0], in[1]);
    case K_MIN_OUT: return mft_minimum_out(dst, in[0], in[1]);
    case K_DIV_OUT: return mft_div_out(dst, in[0], in[1]);
    case K_ADD_: return mft_add_(dst, in[1]);
    case K_SUB_: return mft_sub_(dst, in[1]);
    case K_MUL_: return mft_mul_(dst, in[1]);
    case K_MAX_: return mft_maximum_(dst, in[1]);
    case K_MIN_: return mft_minimum_(dst, in[1]);
    case K_COPY_: return mft_copy_(dst, in[0]);
    case K_NEG_OUT: return mft_neg_out(dst, in[0]);
    case K_ABS_OUT: return mft_abs_out(dst, in[0]);
    case K_SQUARE_OUT: return mft_square_out(dst, in[0]);
    case K_FLOOR_OUT: return mft_floor_out(dst, in[0]);
    case K_ROUND_OUT: return mft_round_out(dst, in[0]);
    case K_RELU_OUT: return mft_relu_out(dst, in[0]);
    case K_NEG_: return mft_neg_(dst);
    case K_ABS_: return mft_abs_(dst);
    case K_SQUARE_: return mft_square_(dst);
    case K_ADD_SCALAR_OUT: return mft_add_scalar_out(dst, in[0], s0);
    case K_MUL_SCALAR_OUT: return mft_mul_scalar_out(dst, in[0], s0);
    case K_ADD_SCALAR_: return mft_add_scalar_(dst, s0);
    case K_CLAMP_OUT: return mft_clamp_out(dst, in[0], s0, s1);
    case K_CLAMP_: return mft_clamp_(dst, s0, s1);
    case K_WHERE_OUT: return mft_where_out(dst, in[0], in[1], in[2]);
    case K_FILL_: return mft_fill_(dst, s0);
    default: return MFT_ERR_INTERNAL;
    }
}

static void run_case(fz_in *in, mft_dtype dt, int wrap_mode, mft_tensor *base) {
    kind k = (kind)(fz_u8(in) % K_COUNT);
    int nin = n_inputs(k);
    spec sd, si[MAX_OPS];
    read_spec(in, &sd, dt, wrap_mode);
    for (int j = 0; j < nin; j++) {
        if (in_place(k) && j == 0) {
            si[0] = sd;
            si[0].same_as = -2; /* the destination itself */
        } else {
            /* from the destination or from the previous input ("same object" = that one) */
            bool from_prev = j > 0 && (fz_u8(in) & 1);
            const spec *ref = from_prev ? &si[j - 1] : &sd;
            int index = !from_prev ? -2 : si[j - 1].same_as == -1 ? 100 + j - 1 : si[j - 1].same_as;
            derive_spec(in, &si[j], ref, index, wrap_mode);
        }
    }
    if (k == K_COPY_) { /* maybe a converting copy */
        uint8_t b = fz_u8(in);
        mft_dtype from = (mft_dtype)(b % MFT_DTYPE_COUNT);
        if (b >= 128 && copy_supported(from, dt) && si[0].same_as == -1) {
            si[0].dt = from;
            si[0].wrap = 1;
        }
    }
    double s0 = (double)((int)(fz_u8(in) % 9) - 4), s1 = s0 + (double)((int)(fz_u8(in) % 7) - 2);

    FZ_TRACE("%s (scalars %g, %g)\n", KIND_NAMES[k], s0, s1);
    trace_spec("dst", &sd);
    for (int j = 0; j < nin; j++) {
        char w[16];
        snprintf(w, sizeof w, "input %d", j);
        trace_spec(w, &si[j]);
    }
    mft_tensor *dst = make_operand(&sd, base);
    mft_tensor *ins[MAX_OPS] = {NULL, NULL, NULL};
    bool ok = dst != NULL;
    for (int j = 0; ok && j < nin; j++) {
        if (si[j].same_as == -2) ins[j] = mft_tensor_retain(dst);
        else if (si[j].same_as >= 100) ins[j] = mft_tensor_retain(ins[si[j].same_as - 100]);
        else ins[j] = make_operand(&si[j], base);
        ok = ins[j] != NULL;
    }
    if (!ok) {
        FZ_TRACE("    (operand refused: %s)\n", mft_last_error_message());
        mft_tensor_release(dst);
        for (int j = 0; j < nin; j++) mft_tensor_release(ins[j]);
        return;
    }
    check_inside(dst);
    for (int j = 0; j < nin; j++) check_inside(ins[j]);

    /* the hazards and the reference */
    int nd = mft_tensor_ndim(dst);
    const int64_t *dsz = mft_tensor_sizes(dst);
    int64_t dnumel = mft_tensor_numel(dst);
    size_t des = mft_dtype_size(dt);
    bool shape_ok = true, self_overlap = false, partial = false, partial_cross_storage = false;
    for (int j = 0; j < nin; j++) shape_ok = shape_ok && broadcasts_to(ins[j], nd, dsz);
    memset(g_dst_mask, 0, sizeof g_dst_mask);
    memcpy(g_snap, g_mem, MEM_BYTES);
    memcpy(g_want, g_mem, MEM_BYTES);
    int64_t idx[NDIM] = {0};
    if (dnumel > 0) {
        do {
            int64_t o = elem_at(dst, nd, idx);
            for (size_t b = 0; b < des; b++) {
                if (g_dst_mask[o + (int64_t)b]) self_overlap = true;
                g_dst_mask[o + (int64_t)b] = 1;
            }
        } while (next_index(nd, dsz, idx));
    }
    for (int j = 0; j < nin && shape_ok && dnumel > 0; j++) {
        if (in_place(k) && j == 0) continue;
        /* an exact alias: the same bytes at every index (same element size) */
        bool exact = mft_dtype_size(mft_tensor_dtype(ins[j])) == des, shares = false;
        memset(idx, 0, sizeof idx);
        size_t ies = mft_dtype_size(mft_tensor_dtype(ins[j]));
        do {
            int64_t oi = elem_at(ins[j], nd, idx), od = elem_at(dst, nd, idx);
            if (oi != od) exact = false;
            for (size_t b = 0; b < ies; b++) shares = shares || g_dst_mask[oi + (int64_t)b];
        } while (next_index(nd, dsz, idx));
        if (shares && !exact) {
            partial = true;
            if (!mft_tensor_shares_storage(ins[j], dst)) partial_cross_storage = true;
        }
    }
    bool must_refuse = !shape_ok || self_overlap || partial || (k == K_DIV_OUT && !is_float(dt));
    if (shape_ok && !self_overlap && dnumel > 0) {
        memset(idx, 0, sizeof idx);
        do {
            val v[MAX_OPS], r = {0, 0};
            for (int j = 0; j < nin; j++)
                v[j] = load(mft_tensor_dtype(ins[j]), g_snap + elem_at(ins[j], nd, idx));
            switch (k) {
            case K_COPY_: r = convert(mft_tensor_dtype(ins[0]), dt, v[0]); break;
            case K_WHERE_OUT: {
                bool c = is_float(dt) ? v[0].f != 0 : v[0].i != 0;
                r = c ? v[1] : v[2];
                break;
            }
            case K_FILL_: r.f = s0, r.i = (int64_t)s0; break;
            default:
                r = nin == 2 ? op_binary(k, dt, v[0], v[1]) : op_unary(k, dt, v[0], s0, s1);
                break;
            }
            store(dt, g_want + elem_at(dst, nd, idx), r);
        } while (next_index(nd, dsz, idx));
    }

    mft_clear_error();
    FZ_TRACE("    hazards: %s%s%s%s\n", shape_ok ? "" : "shapes do not broadcast to dst; ",
             self_overlap ? "dst overlaps itself; " : "", partial ? "an input partially overlaps dst" : "",
             partial_cross_storage ? " (separate storages)" : "");
    mft_status st = run_op(k, dst, ins, s0, s1);
    FZ_TRACE("    -> %s%s%s\n", mft_status_str(st), st ? ": " : "", st ? mft_last_error_message() : "");
    if (st != MFT_OK) {
        FZ_FAILED(KIND_NAMES[k]);
        FZ_CHECK(memcmp(g_mem, g_snap, MEM_BYTES) == 0, "%s refused (%s) but changed the buffer", KIND_NAMES[k],
                 mft_status_str(st));
    } else {
        FZ_CHECK(!self_overlap, "%s accepted a destination that overlaps itself", KIND_NAMES[k]);
        FZ_CHECK(shape_ok, "%s accepted inputs that do not broadcast to the destination", KIND_NAMES[k]);
        if (dnumel > 0) {
            memset(idx, 0, sizeof idx);
            do {
                int64_t o = elem_at(dst, nd, idx);
                val got = load(dt, g_mem + o), want = load(dt, g_want + o);
                FZ_CHECK(same_val(dt, got, want),
                         "%s (%s, %s) returned MFT_OK with a wrong value at buffer byte %lld: got %g / %lld, "
                         "expected %g / %lld%s",
                         KIND_NAMES[k], mft_dtype_name(dt), partial ? "inputs partially overlap the destination" : "no partial overlap",
                         (long long)o, got.f, (long long)got.i, want.f, (long long)want.i,
                         partial_cross_storage ? " (overlap across separate storages)" : "");
            } while (next_index(nd, dsz, idx));
        }
        for (int b = 0; b < MEM_BYTES; b++)
            if (!g_dst_mask[b])
                FZ_CHECK(g_mem[b] == g_snap[b], "%s changed buffer byte %d outside the destination", KIND_NAMES[k], b);
        FZ_CHECK(!partial, "%s returned MFT_OK although an input partially overlaps the destination%s", KIND_NAMES[k],
                 partial_cross_storage ? " (separate storages)" : "");
        FZ_CHECK(!must_refuse, "%s returned MFT_OK for an invalid call", KIND_NAMES[k]);
    }
    mft_tensor_release(dst);
    for (int j = 0; j < nin; j++) mft_tensor_release(ins[j]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    mft_set_num_threads(1);
    mft_clear_error();
    mft_dtype dt = (mft_dtype)(fz_u8(&in) % MFT_DTYPE_COUNT);
    uint8_t fill = fz_u8(&in);
    int wrap_mode = fz_u8(&in) % 3; /* 0 views of one tensor, 1 separate wraps, 2 mixed */
    size_t es = mft_dtype_size(dt);
    if (fill & 1) { /* raw bytes: NaNs, huge integers */
        for (size_t i = 0; i < MEM_BYTES; i++) g_mem[i] = (unsigned char)(i * (fill | 1) + (i >> 5) + fill);
    } else { /* small integral values of dt */
        for (size_t i = 0; i < MEM_BYTES / es; i++) {
            val v;
            int x = (int)((i * 7 + fill) % 17) - 8;
            v.f = x;
            v.i = dt == MFT_U8 ? (x & 0xff) : x;
            store(dt, g_mem + i * es, v);
        }
    }
    int64_t n = (int64_t)(MEM_BYTES / es);
    mft_tensor *base = mft_from_blob(g_mem, MEM_BYTES, 1, &n, NULL, 0, dt, NULL, NULL);
    FZ_TRACE("buf: 512 bytes, %s; base = mft_from_blob(buf, 512, 1, [%lld], NULL, 0, %s); fill %s\n",
             wrap_mode == 0 ? "views of base" : wrap_mode == 1 ? "separate wraps" : "mixed", (long long)n,
             mft_dtype_name(dt), (fill & 1) ? "raw bytes" : "small integers");
    FZ_CHECK(base != NULL, "wrapping the buffer failed");
    for (int c = 0; c < MAX_CASES && in.n > 0; c++) run_case(&in, dt, wrap_mode, base);
    mft_tensor_release(base);
    fz_check_no_leaks();
    return 0;
}
